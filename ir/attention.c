/*
 * attention.c — ampc.FusedAttention's parameters and output layout (attention.h).
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

static void ints4(const ampc_node *n, const char *name, int64_t out[4]) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    for (int32_t i = 0; i < 4; i++) out[i] = a->ints[i];
}

void ampc_attention_params_of(const ampc_node *n, ampc_attention_params *p) {
    const int64_t *dm = ampc_ir_attr_find(n, "dims")->ints;
    *p = (ampc_attention_params){dm[0], dm[1], dm[2], dm[3], dm[4], dm[5]};
    ints4(n, "q_strides", p->qs);
    ints4(n, "k_strides", p->ks);
    ints4(n, "v_strides", p->vs);
    const ampc_attr *off = ampc_ir_attr_find(n, "offsets");
    for (int32_t i = 0; i < 3; i++) p->off[i] = off ? off->ints[i] : 0;
    p->group = ampc_attr_int_or(n, "kv_group", 1);
    p->mp = ampc_attr_int_or(n, "mask_period", p->B);
    p->scale = ampc_attr_float_or(n, "scale", 1.0f);
    p->safe = ampc_attr_int_or(n, "safe", 0) != 0;
    (void)ampc_attention_y_layout(n, dm, p->ys, &p->y);
    if (n->n_inputs > 3 && n->inputs[3]) {
        const ampc_shape *m = &n->inputs[3]->shape;
        int64_t step = 1;
        for (int32_t d = 3; d >= 0; d--) {
            const int32_t md = d - (4 - m->rank);
            p->ms[d] = md < 0 || m->dims[md] == 1 ? 0 : step;
            if (md >= 0) step *= m->dims[md];
        }
    }
}
