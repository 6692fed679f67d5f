/*
 * quant.c — the quantisation ops' parameters with their ONNX defaults (quant.h).
 */
#include "ir/quant.h"

int64_t ampc_quant_block(const ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, "block_size");
    return a && a->kind == AMPC_ATTR_INT ? a->i : 0;
}
