/*
 * activation.c — the activations', Gelu's, the fused epilogue's and Gemm's parameters with their
 * ONNX defaults (activation.h).
 */
#include "ir/activation.h"

#include <string.h>

ampc_act_params ampc_act_params_of(const ampc_node *n) {
    ampc_act_params a = {0, 0};
    switch (n->op) {
    case AMPC_OP_HARD_SIGMOID:
        a.p = ampc_attr_float_or(n, "alpha", 0.2f), a.q = ampc_attr_float_or(n, "beta", 0.5f);
        break;
    case AMPC_OP_LEAKY_RELU: a.p = ampc_attr_float_or(n, "alpha", 0.01f); break;
    case AMPC_OP_SELU:
        a.p = ampc_attr_float_or(n, "alpha", 1.67326319217681884765625f);
        a.q = ampc_attr_float_or(n, "gamma", 1.05070102214813232421875f);
        break;
    case AMPC_OP_SHRINK:
        a.p = ampc_attr_float_or(n, "lambd", 0.5f), a.q = ampc_attr_float_or(n, "bias", 0.0f);
        break;
    default: a.p = ampc_attr_float_or(n, "alpha", 1.0f); break; /* Elu, Celu, ThresholdedRelu, Swish */
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

ampc_elementwise_flags ampc_elementwise_flags_of(const ampc_node *n) {
    const ampc_attr *d = ampc_ir_attr_find(n, "direction");
    return (ampc_elementwise_flags){
        .detect_negative = ampc_attr_int_or(n, "detect_negative", 1) != 0,
        .detect_positive = ampc_attr_int_or(n, "detect_positive", 1) != 0,
        .fmod = ampc_attr_int_or(n, "fmod", 0) != 0,
        .shift_left = d && d->kind == AMPC_ATTR_STRING && !strcmp(d->s, "LEFT")};
}

ampc_gemm_params ampc_gemm_params_of(const ampc_node *n) {
    if (n->op != AMPC_OP_GEMM) return (ampc_gemm_params){false, false, 1.0f, 1.0f};
    return (ampc_gemm_params){ampc_attr_int_or(n, "transA", 0) != 0, ampc_attr_int_or(n, "transB", 0) != 0,
                              (float)ampc_attr_float_or(n, "alpha", 1.0f),
                              (float)ampc_attr_float_or(n, "beta", 1.0f)};
}

ampc_random_params ampc_random_params_of(const ampc_node *n) {
    const ampc_attr *seed = ampc_ir_attr_find(n, "seed");
    ampc_random_params p = {.seeded = seed && seed->kind == AMPC_ATTR_FLOAT};
    p.seed = p.seeded ? seed->f : 0.0f;
    p.mean = ampc_attr_float_or(n, "mean", 0.0f);
    p.scale = ampc_attr_float_or(n, "scale", 1.0f);
    p.low = ampc_attr_float_or(n, "low", 0.0f);
    p.high = ampc_attr_float_or(n, "high", 1.0f);
    return p;
}

bool ampc_cast_retarget(ampc_node *n, ampc_dtype from, ampc_dtype to) {
    ampc_attr *a = n->op == AMPC_OP_CAST ? (ampc_attr *)ampc_ir_attr_find(n, "to") : NULL;
    if (!a || a->kind != AMPC_ATTR_INT || a->i != ampc_dtype_to_onnx(from)) return false;
    a->i = ampc_dtype_to_onnx(to);
    return true;
}

ampc_attr ampc_gelu_form_attr(ampc_gelu_form f) {
    return (ampc_attr){.name = "approximate", .kind = AMPC_ATTR_STRING,
                       .s = f == AMPC_GELU_TANH ? "tanh" : "none"};
}

ampc_attr ampc_fused_act_attr(ampc_fused_act a) {
    static const char *const names[] = {[AMPC_ACT_NONE] = "None", [AMPC_ACT_RELU] = "Relu",
                                        [AMPC_ACT_GELU] = "Gelu", [AMPC_ACT_GELU_TANH] = "GeluTanh"};
    return (ampc_attr){.name = "activation", .kind = AMPC_ATTR_STRING, .s = names[a]};
}

ampc_attr ampc_cast_to_attr(ampc_dtype to) {
    return (ampc_attr){.name = "to", .kind = AMPC_ATTR_INT, .i = ampc_dtype_to_onnx(to)};
}
