/*
 * signal.c — DFT's and STFT's parameters with their ONNX defaults (signal.h).
 */
#include "ir/signal.h"

ampc_dft_params ampc_dft_params_of(const ampc_node *n) {
    return (ampc_dft_params){.inverse = ampc_attr_int_or(n, "inverse", 0) != 0,
                             .onesided = ampc_attr_int_or(n, "onesided", 0) != 0};
}

bool ampc_window_periodic(const ampc_node *n) { return ampc_attr_int_or(n, "periodic", 1) != 0; }
