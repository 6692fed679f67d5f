/*
 * reduce.c — the dims a Reduce* node reduces (reduce.h).
 */
#include "ir/reduce.h"

#include "ir/ref/ref.h"

ampc_reduce_params ampc_reduce_params_of(const ampc_node *n) {
    const ampc_attr *a = ampc_attr_ints_of(n, "axes");
    return (ampc_reduce_params){.keepdims = ampc_attr_int_or(n, "keepdims", 1) != 0,
                                .noop_empty = ampc_attr_int_or(n, "noop_with_empty_axes", 0) != 0,
                                .axes = a ? a->ints : NULL,
                                .n_axes = a ? a->n : 0};
}

void ampc_reduce_dims(const ampc_node *n, const void *axes, ampc_dtype axes_dtype, int64_t n_axes,
                      int32_t rank, bool reduced[AMPC_MAX_RANK]) {
    int64_t list[64];
    int32_t count = 0;
    const ampc_reduce_params p = ampc_reduce_params_of(n);
    if (axes) {
        count = (int32_t)n_axes;
        AMPC_ASSERT(n_axes >= 0 && n_axes <= AMPC_ARRAY_LEN(list));
        for (int32_t i = 0; i < count; i++) list[i] = ampc_ref_load_i64(axes, axes_dtype, i);
    } else {
        count = p.n_axes;
        AMPC_ASSERT(count <= AMPC_ARRAY_LEN(list));
        for (int32_t i = 0; i < count; i++) list[i] = p.axes[i];
    }
    const bool none = count == 0 && p.noop_empty;
    for (int32_t d = 0; d < rank; d++) reduced[d] = count == 0 && !none;
    for (int32_t i = 0; i < count; i++) {
        int64_t d = list[i] < 0 ? list[i] + rank : list[i];
        AMPC_ASSERT(d >= 0 && d < rank);
        reduced[d] = true;
    }
}

ampc_attr ampc_keepdims_attr(bool keep) {
    return (ampc_attr){.name = "keepdims", .kind = AMPC_ATTR_INT, .i = keep};
}
