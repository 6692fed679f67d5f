/*
 * rnn.h — the activations of the recurrent ops (RNN, GRU, LSTM), one table for every layer that
 * needs them: inference validates the `activations` attribute against it, the reference
 * evaluator (ref/rnn.c) computes each activation, and code generation (codegen/lower_rnn.c)
 * writes each as CUDA, both from the activations ampc_rnn_acts_resolve gives a node.
 *
 * The names are those ONNX defines for recurrent ops, matched without regard to case.
 * activation_alpha and activation_beta are consumed in order by the activations that take them
 * (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu), in the order the node
 * lists its activations; a missing value takes the default of the ONNX op of that name.
 */
#ifndef AMPC_IR_RNN_H
#define AMPC_IR_RNN_H

#include "ir/ir.h"

typedef enum ampc_rnn_act_kind {
    AMPC_RNN_ACT_RELU,
    AMPC_RNN_ACT_TANH,
    AMPC_RNN_ACT_SIGMOID,
    AMPC_RNN_ACT_AFFINE,
    AMPC_RNN_ACT_LEAKY_RELU,
    AMPC_RNN_ACT_THRESHOLDED_RELU,
    AMPC_RNN_ACT_SCALED_TANH,
    AMPC_RNN_ACT_HARD_SIGMOID,
    AMPC_RNN_ACT_ELU,
    AMPC_RNN_ACT_SOFTSIGN,
    AMPC_RNN_ACT_SOFTPLUS,
    AMPC_RNN_ACT_COUNT
} ampc_rnn_act_kind;

/* One activation of a node, its alpha and beta resolved (unused ones hold the defaults). */
typedef struct ampc_rnn_act {
    ampc_rnn_act_kind kind;
    double alpha, beta;
} ampc_rnn_act;

/* The kind named `name` (any case); false when ONNX defines no such activation. */
bool ampc_rnn_act_lookup(const char *name, ampc_rnn_act_kind *kind);
/* "Relu, Tanh, ..., Softplus": every name, for messages, written into buf (n bytes, cut short
 * when too small); returns buf. */
const char *ampc_rnn_act_names(char *buf, size_t n);
/* Fills acts[0 .. dirs * per - 1] (per: activations per direction) from node n's validated
 * activations attribute, or from the op's defaults (RNN: Tanh; GRU: Sigmoid, Tanh; LSTM:
 * Sigmoid, Tanh, Tanh), with alpha and beta consumed as the file comment says. */
void ampc_rnn_acts_resolve(const ampc_node *n, int32_t per, int32_t dirs, ampc_rnn_act *acts);

/* RNN's, GRU's and LSTM's other parameters: layout 1 (batch first; else sequence first),
 * direction "reverse" alone (one direction, run backwards), GRU's linear_before_reset, LSTM's
 * input_forget (coupled input and forget gates) and the clip of the gates' inputs (when given). */
typedef struct ampc_rnn_params {
    bool layout1, reverse_only, lbr, input_forget, has_clip;
    double clip;
} ampc_rnn_params;

ampc_rnn_params ampc_rnn_params_of(const ampc_node *n);

#endif
