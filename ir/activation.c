/*
 * activation.c — the activations', Gelu's, the fused epilogue's and Gemm's parameters with their
 * ONNX defaults (activation.h).
 */
#include "ir/activation.h"

#include <string.h>

static double float_attr(const ampc_node *n, const char *name, float dflt) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_FLOAT ? (double)a->f : (double)dflt;
}

static bool flag_attr(const ampc_node *n, const char *name) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_INT && a->i != 0;
}

ampc_act_params ampc_act_params_of(const ampc_node *n) {
    ampc_act_params a = {0, 0};
    switch (n->op) {
    case AMPC_OP_HARD_SIGMOID:
        a.p = float_attr(n, "alpha", 0.2f), a.q = float_attr(n, "beta", 0.5f);
        break;
    case AMPC_OP_LEAKY_RELU: a.p = float_attr(n, "alpha", 0.01f); break;
    case AMPC_OP_SELU:
        a.p = float_attr(n, "alpha", 1.67326319217681884765625f);
        a.q = float_attr(n, "gamma", 1.05070102214813232421875f);
        break;
    case AMPC_OP_SHRINK:
        a.p = float_attr(n, "lambd", 0.5f), a.q = float_attr(n, "bias", 0.0f);
        break;
    default: a.p = float_attr(n, "alpha", 1.0f); break; /* Elu, Celu, ThresholdedRelu, Swish */
    }
    return a;
}

ampc_gelu_form ampc_gelu_form_of(const ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, "approximate");
    if (!a) return AMPC_GELU_ERF;
    if (a->kind != AMPC_ATTR_STRING) return AMPC_GELU_INVALID;
    return !strcmp(a->s, "none") ? AMPC_GELU_ERF : !strcmp(a->s, "tanh") ? AMPC_GELU_TANH
                                                                          : AMPC_GELU_INVALID;
}

ampc_fused_act ampc_fused_act_of(const ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, "activation");
    if (!a) return AMPC_ACT_NONE;
    const bool s = a->kind == AMPC_ATTR_STRING;
    return s && !strcmp(a->s, "Gelu") ? AMPC_ACT_GELU
           : s && !strcmp(a->s, "GeluTanh") ? AMPC_ACT_GELU_TANH
                                            : AMPC_ACT_RELU; /* inference admits only "Relu" else */
}

static int64_t int_attr(const ampc_node *n, const char *name, int64_t dflt) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_INT ? a->i : dflt;
}

ampc_elementwise_flags ampc_elementwise_flags_of(const ampc_node *n) {
    const ampc_attr *d = ampc_ir_attr_find(n, "direction");
    return (ampc_elementwise_flags){
        .detect_negative = int_attr(n, "detect_negative", 1) != 0,
        .detect_positive = int_attr(n, "detect_positive", 1) != 0,
        .fmod = int_attr(n, "fmod", 0) != 0,
        .shift_left = d && d->kind == AMPC_ATTR_STRING && !strcmp(d->s, "LEFT")};
}

ampc_gemm_params ampc_gemm_params_of(const ampc_node *n) {
    if (n->op != AMPC_OP_GEMM) return (ampc_gemm_params){false, false, 1.0f, 1.0f};
    return (ampc_gemm_params){flag_attr(n, "transA"), flag_attr(n, "transB"),
                              (float)float_attr(n, "alpha", 1.0f),
                              (float)float_attr(n, "beta", 1.0f)};
}
