/*
 * norm.c — the normalisations' parameters with their ONNX defaults (norm.h).
 */
#include "ir/norm.h"

ampc_norm_params ampc_norm_params_of(const ampc_node *n) {
    ampc_norm_params p = {.eps = ampc_attr_float_or(n, "epsilon", 1e-5f)};
    p.stash_f64 = ampc_attr_int_or(n, "stash_type", 1) == (int64_t)ampc_dtype_to_onnx(AMPC_DTYPE_F64);
    if (n->op == AMPC_OP_GROUP_NORM) p.groups = ampc_attr_int_or(n, "num_groups", 0);
    if (n->op == AMPC_OP_LP_NORM) p.l1 = ampc_attr_int_or(n, "p", 2) == 1;
    if (n->op == AMPC_OP_LRN) {
        p.size = ampc_attr_int_or(n, "size", 0);
        p.alpha = ampc_attr_float_or(n, "alpha", 1e-4f);
        p.beta = ampc_attr_float_or(n, "beta", 0.75f);
        p.bias = ampc_attr_float_or(n, "bias", 1.0f);
    }
    return p;
}

void ampc_mvn_dims(const ampc_node *n, int32_t rank, bool on[AMPC_MAX_RANK]) {
    static const int64_t dflt[3] = {0, 2, 3};
    const ampc_attr *a = ampc_attr_ints_of(n, "axes");
    const int64_t *axes = a ? a->ints : dflt;
    const int32_t n_axes = a ? a->n : 3;
    for (int32_t d = 0; d < AMPC_MAX_RANK; d++) on[d] = false;
    for (int32_t i = 0; i < n_axes; i++) on[axes[i] < 0 ? axes[i] + rank : axes[i]] = true;
}

void ampc_norm_attrs(int64_t axis, double eps, ampc_attr out[3]) {
    out[0] = ampc_axis_attr_make(axis);
    out[1] = (ampc_attr){.name = "epsilon", .kind = AMPC_ATTR_FLOAT, .f = (float)eps};
    out[2] = (ampc_attr){.name = "stash_type", .kind = AMPC_ATTR_INT, .i = 1};
}
