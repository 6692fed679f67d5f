/*
 * signal.c — DFT's and STFT's parameters with their ONNX defaults (signal.h).
 */
#include "ir/signal.h"

static bool flag(const ampc_node *n, const char *name) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_INT && a->i != 0;
}

ampc_dft_params ampc_dft_params_of(const ampc_node *n) {
    return (ampc_dft_params){.inverse = flag(n, "inverse"), .onesided = flag(n, "onesided")};
}
