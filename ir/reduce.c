/*
 * reduce.c — the dims a Reduce* node reduces (reduce.h).
 */
#include "ir/reduce.h"

#include "ir/ref/ref.h"

void ampc_reduce_dims(const ampc_node *n, const void *axes, ampc_dtype axes_dtype, int64_t n_axes,
                      int32_t rank, bool reduced[AMPC_MAX_RANK]) {
    int64_t list[64];
    int32_t count = 0;
    const ampc_attr *a = ampc_ir_attr_find(n, "axes");
    if (axes) {
        count = (int32_t)n_axes;
        AMPC_ASSERT(n_axes >= 0 && n_axes <= AMPC_ARRAY_LEN(list));
        for (int32_t i = 0; i < count; i++) list[i] = ampc_ref_load_i64(axes, axes_dtype, i);
    } else if (a && a->kind == AMPC_ATTR_INTS) {
        count = a->n;
        AMPC_ASSERT(count <= AMPC_ARRAY_LEN(list));
        for (int32_t i = 0; i < count; i++) list[i] = a->ints[i];
    }
    const ampc_attr *noop = ampc_ir_attr_find(n, "noop_with_empty_axes");
    const bool none = count == 0 && noop && noop->kind == AMPC_ATTR_INT && noop->i;
    for (int32_t d = 0; d < rank; d++) reduced[d] = count == 0 && !none;
    for (int32_t i = 0; i < count; i++) {
        int64_t d = list[i] < 0 ? list[i] + rank : list[i];
        AMPC_ASSERT(d >= 0 && d < rank);
        reduced[d] = true;
    }
}
