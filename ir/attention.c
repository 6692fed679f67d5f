/*
 * attention.c — the output layout of ampc.FusedAttention (attention.h).
 */
#include "ir/attention.h"

#include <stdint.h>

const char *ampc_attention_y_layout(const ampc_node *n, const int64_t dims[6], int64_t ys[4],
                                    ampc_shape *y) {
    const int64_t yd[4] = {dims[0], dims[1], dims[2], dims[5]}; /* B, H, Sq, Dv */
    const ampc_attr *merge = ampc_ir_attr_find(n, "merge_heads");
    const ampc_attr *pa = ampc_ir_attr_find(n, "y_perm"), *sa = ampc_ir_attr_find(n, "y_shape");
    int64_t perm[4] = {0, 1, 2, 3};
    if (merge && merge->kind == AMPC_ATTR_INT && merge->i) {
        if (pa || sa) return "merge_heads = 1 excludes y_perm and y_shape";
        perm[1] = 2, perm[2] = 1;
    }
    if (pa) {
        if (pa->kind != AMPC_ATTR_INTS || pa->n != 4) return "y_perm must have 4 entries";
        bool seen[4] = {false, false, false, false};
        for (int32_t i = 0; i < 4; i++) {
            if (pa->ints[i] < 0 || pa->ints[i] > 3 || seen[pa->ints[i]])
                return "y_perm must be a permutation of 0, 1, 2, 3";
            seen[pa->ints[i]] = true;
            perm[i] = pa->ints[i];
        }
    }
    /* the transposed tensor: its dim i is Y's dim perm[i]; Y's dim perm[i] steps as it does */
    int64_t step = 1;
    for (int32_t i = 3; i >= 0; i--) {
        ys[perm[i]] = step;
        step *= yd[perm[i]];
    }
    *y = (ampc_shape){.rank = 4, .dims = {yd[perm[0]], yd[perm[1]], yd[perm[2]], yd[perm[3]]}};
    if (merge && merge->kind == AMPC_ATTR_INT && merge->i)
        *y = (ampc_shape){.rank = 3, .dims = {yd[0], yd[2], yd[1] * yd[3]}};
    if (sa) {
        if (sa->kind != AMPC_ATTR_INTS || sa->n < 1 || sa->n > AMPC_MAX_RANK)
            return "y_shape must have 1 to 8 entries";
        ampc_shape s = {.rank = sa->n};
        int64_t numel = 1;
        for (int32_t i = 0; i < sa->n; i++) {
            if (sa->ints[i] < 1) return "y_shape's entries must be positive";
            s.dims[i] = sa->ints[i];
            if (numel > INT64_MAX / s.dims[i]) return "y_shape must hold B * H * Sq * Dv elements";
            numel *= s.dims[i];
        }
        if (numel != step) return "y_shape must hold B * H * Sq * Dv elements";
        *y = s;
    }
    return NULL;
}
