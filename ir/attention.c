/*
 * attention.c — the attention family's parameters (attention.h): ampc.FusedAttention's, its
 * output layout and its written form; ONNX Attention's and RotaryEmbedding's.
 */
#include "ir/attention.h"

#include <stdint.h>
#include <string.h>

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

void ampc_attention_params_of(const ampc_node *n, ampc_attention_params *p) {
    ampc_attention_form f;
    (void)ampc_attention_form_of(n, &f);
    const int64_t *dm = f.dims;
    *p = (ampc_attention_params){dm[0], dm[1], dm[2], dm[3], dm[4], dm[5]};
    memcpy(p->qs, f.qs, sizeof p->qs);
    memcpy(p->ks, f.ks, sizeof p->ks);
    memcpy(p->vs, f.vs, sizeof p->vs);
    memcpy(p->off, f.off, sizeof p->off);
    p->group = f.group;
    p->mp = f.mask_period ? f.mask_period : p->B;
    p->scale = f.scale;
    p->safe = f.safe;
    p->causal = f.causal;
    p->causal_off = f.causal_off;
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

/* Copies attribute `name` of exactly `count` ints into out; false when it is not that. */
static bool ints_exact(const ampc_node *n, const char *name, int32_t count, int64_t *out) {
    const ampc_attr *a = ampc_attr_ints_of(n, name);
    if (!a || a->n != count) return false;
    for (int32_t i = 0; i < count; i++) out[i] = a->ints[i];
    return true;
}

bool ampc_attention_form_of(const ampc_node *n, ampc_attention_form *f) {
    *f = (ampc_attention_form){.scale = ampc_attr_float_or(n, "scale", 1.0f),
                               .safe = ampc_attr_int_or(n, "safe", 0) != 0,
                               .merge_heads = ampc_attr_int_or(n, "merge_heads", 0) != 0,
                               .group = ampc_attr_int_or(n, "kv_group", 1),
                               .mask_period = ampc_attr_int_or(n, "mask_period", 0),
                               .causal = ampc_attr_int_or(n, "causal", 0) != 0,
                               .causal_off = ampc_attr_int_or(n, "causal_offset", 0)};
    (void)ints_exact(n, "offsets", 3, f->off);
    f->has_perm = ints_exact(n, "y_perm", 4, f->y_perm);
    const ampc_attr *ys = ampc_attr_ints_of(n, "y_shape");
    if (ys && ys->n >= 1 && ys->n <= AMPC_MAX_RANK) {
        f->y_rank = ys->n;
        for (int32_t i = 0; i < ys->n; i++) f->y_shape[i] = ys->ints[i];
    }
    return ints_exact(n, "dims", 6, f->dims) && ints_exact(n, "q_strides", 4, f->qs) &&
           ints_exact(n, "k_strides", 4, f->ks) && ints_exact(n, "v_strides", 4, f->vs);
}

/* An ints attribute whose entries are a copy in the graph's arena (NULL ints when out of it). */
static ampc_attr ints_attr(ampc_graph *g, const char *name, const int64_t *v, int32_t count) {
    int64_t *copy = ampc_ir_alloc(g, (size_t)count * sizeof *copy);
    if (copy) memcpy(copy, v, (size_t)count * sizeof *copy);
    return (ampc_attr){.name = name, .kind = AMPC_ATTR_INTS, .n = copy ? count : 0, .ints = copy};
}

static ampc_attr int_attr(const char *name, int64_t v) {
    return (ampc_attr){.name = name, .kind = AMPC_ATTR_INT, .i = v};
}

ampc_status ampc_attention_form_attrs(ampc_graph *g, const ampc_attention_form *f, ampc_attr **attrs,
                                      int32_t *n) {
    ampc_attr *as = ampc_ir_alloc(g, 14 * sizeof *as);
    if (!as) return AMPC_E_OOM;
    int32_t k = 0;
    as[k++] = ints_attr(g, "dims", f->dims, 6);
    as[k++] = ints_attr(g, "q_strides", f->qs, 4);
    as[k++] = ints_attr(g, "k_strides", f->ks, 4);
    as[k++] = ints_attr(g, "v_strides", f->vs, 4);
    as[k++] = (ampc_attr){.name = "scale", .kind = AMPC_ATTR_FLOAT, .f = (float)f->scale};
    as[k++] = int_attr("safe", f->safe);
    as[k++] = int_attr("merge_heads", f->merge_heads);
    if (f->off[0] || f->off[1] || f->off[2]) as[k++] = ints_attr(g, "offsets", f->off, 3);
    if (f->group != 1) as[k++] = int_attr("kv_group", f->group);
    if (f->has_perm && !f->merge_heads) as[k++] = ints_attr(g, "y_perm", f->y_perm, 4);
    if (f->y_rank > 0 && !f->merge_heads) as[k++] = ints_attr(g, "y_shape", f->y_shape, f->y_rank);
    if (f->mask_period) as[k++] = int_attr("mask_period", f->mask_period);
    if (f->causal) as[k++] = int_attr("causal", 1);
    if (f->causal && f->causal_off) as[k++] = int_attr("causal_offset", f->causal_off);
    for (int32_t i = 0; i < k; i++)
        if (as[i].kind == AMPC_ATTR_INTS && !as[i].ints) return AMPC_E_OOM;
    *attrs = as;
    *n = k;
    return AMPC_OK;
}

static const char *const form_names[] = {"dims",    "q_strides", "k_strides", "v_strides",
                                         "scale",   "safe",      "merge_heads", "offsets",
                                         "kv_group", "y_perm",   "y_shape",   "mask_period",
                                         "causal",  "causal_offset"};

static bool in_form(const char *name) {
    for (size_t i = 0; i < sizeof form_names / sizeof *form_names; i++)
        if (!strcmp(name, form_names[i])) return true;
    return false;
}

ampc_status ampc_attention_form_set(ampc_graph *g, ampc_node *n, const ampc_attention_form *f) {
    ampc_attr *as;
    int32_t k;
    ampc_status st = ampc_attention_form_attrs(g, f, &as, &k);
    if (st != AMPC_OK) return st;
    ampc_attr *all = ampc_ir_alloc(g, (size_t)(k + n->n_attrs) * sizeof *all);
    if (!all) return AMPC_E_OOM;
    memcpy(all, as, (size_t)k * sizeof *all);
    for (int32_t i = 0; i < n->n_attrs; i++) /* what the form does not own (a rank, ...) stays */
        if (!in_form(n->attrs[i].name)) all[k++] = n->attrs[i];
    n->attrs = all;
    n->n_attrs = k;
    return AMPC_OK;
}

ampc_onnx_attention ampc_onnx_attention_of(const ampc_node *n) {
    const ampc_attr *scale = ampc_ir_attr_find(n, "scale");
    return (ampc_onnx_attention){
        .q_heads = ampc_attr_int_or(n, "q_num_heads", 0),
        .kv_heads = ampc_attr_int_or(n, "kv_num_heads", 0),
        .qk_mode = ampc_attr_int_or(n, "qk_matmul_output_mode", 0),
        .causal = ampc_attr_int_or(n, "is_causal", 0) != 0,
        .left = ampc_attr_int_or(n, "left_window_size", -1),
        .right = ampc_attr_int_or(n, "right_window_size", -1),
        .has_scale = scale && scale->kind == AMPC_ATTR_FLOAT,
        .scale = ampc_attr_float_or(n, "scale", 1.0f),
        .softcap = ampc_attr_float_or(n, "softcap", 0.0f),
        .softmax_precision = (int32_t)ampc_attr_int_or(n, "softmax_precision", 0),
    };
}

ampc_rotary_params ampc_rotary_params_of(const ampc_node *n) {
    return (ampc_rotary_params){.interleaved = ampc_attr_int_or(n, "interleaved", 0) != 0,
                                .heads = ampc_attr_int_or(n, "num_heads", 1),
                                .rot_dim = ampc_attr_int_or(n, "rotary_embedding_dim", 0)};
}
