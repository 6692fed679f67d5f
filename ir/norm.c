/*
 * norm.c — the normalisations' parameters with their ONNX defaults (norm.h).
 */
#include "ir/norm.h"

static double float_attr(const ampc_node *n, const char *name, float dflt) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_FLOAT ? (double)a->f : (double)dflt;
}

static int64_t int_attr(const ampc_node *n, const char *name, int64_t dflt) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_INT ? a->i : dflt;
}

ampc_norm_params ampc_norm_params_of(const ampc_node *n) {
    ampc_norm_params p = {.eps = float_attr(n, "epsilon", 1e-5f)};
    p.stash_f64 = int_attr(n, "stash_type", 1) == (int64_t)ampc_dtype_to_onnx(AMPC_DTYPE_F64);
    if (n->op == AMPC_OP_GROUP_NORM) p.groups = int_attr(n, "num_groups", 0);
    if (n->op == AMPC_OP_LP_NORM) p.l1 = int_attr(n, "p", 2) == 1;
    if (n->op == AMPC_OP_LRN) {
        p.size = int_attr(n, "size", 0);
        p.alpha = float_attr(n, "alpha", 1e-4f);
        p.beta = float_attr(n, "beta", 0.75f);
        p.bias = float_attr(n, "bias", 1.0f);
    }
    return p;
}
