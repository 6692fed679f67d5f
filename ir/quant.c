/*
 * quant.c — the quantisation ops' parameters with their ONNX defaults (quant.h).
 */
#include "ir/quant.h"

int64_t ampc_quant_block(const ampc_node *n) {
    return ampc_attr_int_or(n, "block_size", 0);
}
