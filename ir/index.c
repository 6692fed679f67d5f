/*
 * index.c — the index family's parameters with their ONNX defaults (index.h).
 */
#include "ir/index.h"

#include "ir/ref/ref.h"

#include <string.h>

ampc_index_params ampc_index_params_of(const ampc_node *n) {
    const char *red = ampc_attr_string_or(n, "reduction", "none");
    return (ampc_index_params){
        .reduction = !strcmp(red, "add")   ? AMPC_SCATTER_ADD
                     : !strcmp(red, "mul") ? AMPC_SCATTER_MUL
                     : !strcmp(red, "max") ? AMPC_SCATTER_MAX
                     : !strcmp(red, "min") ? AMPC_SCATTER_MIN
                                           : AMPC_SCATTER_NONE,
        .batch_dims = (int32_t)ampc_attr_int_or(n, "batch_dims", 0),
        .largest = ampc_attr_int_or(n, "largest", 1) != 0,
        .sorted = ampc_attr_int_or(n, "sorted", 1) != 0,
        .upper = ampc_attr_int_or(n, "upper", 1) != 0,
        .select_last = ampc_attr_int_or(n, "select_last_index", 0) != 0,
        .exclusive = ampc_attr_int_or(n, "exclusive", 0) != 0,
        .reverse = ampc_attr_int_or(n, "reverse", 0) != 0,
        .k = ampc_attr_int_or(n, "k", 0),
        .batch_axis = (int32_t)ampc_attr_int_or(n, "batch_axis", 1),
        .circular = !strcmp(ampc_attr_string_or(n, "mode", "linear"), "circular"),
        .center_point_box = ampc_attr_int_or(n, "center_point_box", 0) != 0};
}

bool ampc_gather_const_in_range(const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *ix = n->n_inputs > 1 ? n->inputs[1] : NULL;
    if (!x || !ix || !ix->data || (ix->flags & AMPC_VALUE_INPUT) || x->shape.rank < 1) return false;
    if (ix->dtype != AMPC_DTYPE_I32 && ix->dtype != AMPC_DTYPE_I64) return false;
    const int64_t dim = x->shape.dims[ampc_axis_of(n, x->shape.rank)];
    for (int64_t j = 0; j < ampc_ir_numel(ix); j++) {
        const int64_t v = ampc_ref_load_i64(ix->data, ix->dtype, j);
        if (v < -dim || v >= dim) return false;
    }
    return true;
}
