/*
 * signal.h — DFT's, STFT's and the windows' parameters, one decoder for the reference evaluator (ref/signal.c)
 * and code generation (codegen/lower_signal.c); inference (infer/signal.c) checks them.
 */
#ifndef AMPC_IR_SIGNAL_H
#define AMPC_IR_SIGNAL_H

#include "ir/ir.h"

typedef struct ampc_dft_params {
    bool inverse;  /* DFT: the inverse transform, scaled by 1 / n (0) */
    bool onesided; /* only the first n / 2 + 1 frequencies of a real signal (0) */
} ampc_dft_params;

ampc_dft_params ampc_dft_params_of(const ampc_node *n);

/* The window ops' (HannWindow, HammingWindow, BlackmanWindow) form: periodic (1) or symmetric. */
bool ampc_window_periodic(const ampc_node *n);

#endif
