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
