/*
 * rnn.c — the recurrent ops' activation table (rnn.h): names, which of alpha and beta each
 * consumes and their defaults, and a node's activations resolved from its attributes.
 */
#include "ir/rnn.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int8_t takes_alpha, takes_beta;
    float alpha, beta; /* the defaults of the ONNX op of the same name */
} table[AMPC_RNN_ACT_COUNT] = {
    [AMPC_RNN_ACT_RELU] = {"Relu", 0, 0, 0, 0},
    [AMPC_RNN_ACT_TANH] = {"Tanh", 0, 0, 0, 0},
    [AMPC_RNN_ACT_SIGMOID] = {"Sigmoid", 0, 0, 0, 0},
    [AMPC_RNN_ACT_AFFINE] = {"Affine", 1, 1, 1.0f, 0.0f},
    [AMPC_RNN_ACT_LEAKY_RELU] = {"LeakyRelu", 1, 0, 0.01f, 0},
    [AMPC_RNN_ACT_THRESHOLDED_RELU] = {"ThresholdedRelu", 1, 0, 1.0f, 0},
    [AMPC_RNN_ACT_SCALED_TANH] = {"ScaledTanh", 1, 1, 1.0f, 1.0f},
    [AMPC_RNN_ACT_HARD_SIGMOID] = {"HardSigmoid", 1, 1, 0.2f, 0.5f},
    [AMPC_RNN_ACT_ELU] = {"Elu", 1, 0, 1.0f, 0},
    [AMPC_RNN_ACT_SOFTSIGN] = {"Softsign", 0, 0, 0, 0},
    [AMPC_RNN_ACT_SOFTPLUS] = {"Softplus", 0, 0, 0, 0},
};

static bool name_eq_nocase(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

bool ampc_rnn_act_lookup(const char *name, ampc_rnn_act_kind *kind) {
    for (int32_t k = 0; k < AMPC_RNN_ACT_COUNT; k++)
        if (name_eq_nocase(name, table[k].name)) {
            *kind = (ampc_rnn_act_kind)k;
            return true;
        }
    return false;
}

const char *ampc_rnn_act_names(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int32_t k = 0; k < AMPC_RNN_ACT_COUNT && at < n; k++) {
        int w = snprintf(buf + at, n - at, "%s%s", k ? ", " : "", table[k].name);
        at += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

void ampc_rnn_acts_resolve(const ampc_node *n, int32_t per, int32_t dirs, ampc_rnn_act *acts) {
    static const ampc_rnn_act_kind dflt[3] = {AMPC_RNN_ACT_SIGMOID, AMPC_RNN_ACT_TANH,
                                              AMPC_RNN_ACT_TANH};
    const ampc_attr *names = ampc_ir_attr_find(n, "activations");
    const ampc_attr *al = ampc_ir_attr_find(n, "activation_alpha");
    const ampc_attr *be = ampc_ir_attr_find(n, "activation_beta");
    int32_t ai = 0, bi = 0;
    for (int32_t i = 0; i < per * dirs; i++) {
        ampc_rnn_act *a = &acts[i];
        a->kind = per == 1 ? AMPC_RNN_ACT_TANH : dflt[i % per];
        if (names && names->kind == AMPC_ATTR_STRINGS && i < names->n &&
            !ampc_rnn_act_lookup(names->strings[i], &a->kind))
            AMPC_ASSERT(!"activation name not validated by inference");
        a->alpha = table[a->kind].alpha;
        a->beta = table[a->kind].beta;
        if (table[a->kind].takes_alpha && al && al->kind == AMPC_ATTR_FLOATS && ai < al->n)
            a->alpha = al->floats[ai++];
        if (table[a->kind].takes_beta && be && be->kind == AMPC_ATTR_FLOATS && bi < be->n)
            a->beta = be->floats[bi++];
    }
}

ampc_rnn_params ampc_rnn_params_of(const ampc_node *n) {
    const ampc_attr *d = ampc_ir_attr_find(n, "direction"), *c = ampc_ir_attr_find(n, "clip");
    ampc_rnn_params p = {.layout1 = ampc_attr_int_or(n, "layout", 0) == 1,
                         .reverse_only = d && d->kind == AMPC_ATTR_STRING &&
                                         !strcmp(d->s, "reverse"),
                         .lbr = ampc_attr_int_or(n, "linear_before_reset", 0) != 0,
                         .input_forget = ampc_attr_int_or(n, "input_forget", 0) != 0,
                         .has_clip = c && c->kind == AMPC_ATTR_FLOAT};
    p.clip = p.has_clip ? (double)c->f : 0;
    return p;
}
