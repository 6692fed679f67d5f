/*
 * fuse_attention.c — transformer attention written out as ops becomes one ampc.FusedAttention:
 *
 *   scores = MatMul(Q, K^T)  [* c or / c]  [+ mask]
 *   P      = Softmax(scores, last axis)  or  ampc.SafeSoftmax
 *   Y      = MatMul(P, V)  [-> Transpose [-> Reshape]]
 *
 * with Q [B, H, Sq, D], K^T [B, H, D, Sk], V [B, H, Sk, Dv] (rank 4, no batch broadcast). One
 * kernel replaces about eight, and the [B, H, Sq, Sk] scores never reach memory.
 *
 *   1. Operands: Q, K^T and V are traced back through the nodes that only re-index them
 *      (Transposes, Reshapes, Squeezes, the Gather or Split taking one of a joined projection's
 *      Q, K and V: ampc_pass_view_step) and, for Q and K^T, Muls by scalar constants (their
 *      product joins the scale) to a tensor in memory; the fused op reads it from an element
 *      offset (offsets) through element strides (q_strides, k_strides, v_strides), so the heads
 *      split from a projection's [B, S, H*D] or [S, B, 3, H*D] need no copy. The skipped nodes
 *      stay for their other readers; those left unread are removed here (dce). Grouped-query
 *      attention's K and V, each head repeated for a group of query heads by an Expand, are
 *      read unrepeated: kv_group g, query head h reading K/V head h / g.
 *   2. The chain: every value from the first MatMul to the softmax is read once and is no graph
 *      output; the scale is a scalar float constant; the mask broadcasts to the scores without
 *      growing them; the softmax is over the last axis.
 *   3. The output: when Y is read only by a Transpose, that folds in, and so does a Reshape (or
 *      another op that only renames the shape) reading it alone: the fused node writes Y
 *      transposed (y_perm; BERT's Transpose(0, 2, 1, 3) + Reshape to [B, Sq, H*Dv] is
 *      merge_heads = 1) with the last one's shape (y_shape) and takes its place and output;
 *      otherwise the second MatMul's.
 *
 * Numerics (ir/ref/attention.c): the scores are rounded once to the tensors' type, as the
 * unfused graph holds them, so a large negative mask overflows to -inf in f16 as it did there;
 * ampc.SafeSoftmax gives 0 on rows without a finite score, Softmax NaN. The chain rounded the
 * scores up to three times and the scale folded into Q or K once more: within a few roundings.
 */
#include "passes.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How one operand is read: `src` from element `off` through `st`, the element steps of the
 * operand's four dims. */
typedef struct operand {
    ampc_value *src;
    int64_t off;
    int64_t st[4];
} operand;

/* A matched pattern: the nodes it removes, the last one (rewritten), the fused op's inputs. */
typedef struct match {
    ampc_node *mm1, *scale, *add, *sm, *mm2, *tr, *last;
    int64_t y_perm[4]; /* with tr: its permutation */
    ampc_node *win_split, *win_add, *win_merge; /* the scores' window view (match_window) */
    ampc_value *win_mask;
    int64_t window; /* W, or 0 */
    bool merge_heads;  /* tr and last are BERT's merge of the heads: [B, Sq, H*Dv] */
    ampc_value *mask;
    operand q, k, v;
    double factor;
    int64_t dims[6]; /* B, H, Sq, Sk, D, Dv */
    int64_t group;   /* query heads a K/V head serves (kv_group) */
} match;

/* The value of a scalar float constant, or NAN. */
static double scalar_of(const ampc_value *v) {
    if (!v || !v->data || !ampc_dtype_is_float(v->dtype) || ampc_ir_numel(v) != 1) return NAN;
    return ampc_ref_load_f64(v->data, v->dtype, 0);
}

/* Traces x (rank 4) back through the nodes that only re-index it (ampc_pass_view_step:
 * Transposes, Reshapes, the Gather or Split taking one head of a joined projection) and, when
 * factor is not NULL, scalar Muls (stage 1): o->src is the tensor in memory, o->off and o->st
 * where x's elements are in it; *factor collects the scalars. The scores are linear in Q and in
 * K, so their scalars join the scale; V's do not.
 * With group g > 1, x's head dim h is traced as two, (h / g, h % g): the trace succeeds (true)
 * only when the second reads the same element for every h % g, a K or V head repeated for g
 * query heads (grouped-query attention's Expand); o->st then steps over (b, h / g, ., .). */
static bool trace_operand(ampc_value *x, int64_t group, operand *o, double *factor) {
    const int64_t *xd = x->shape.dims;
    const int64_t dims[5] = {xd[0], xd[1] / group, group, xd[2], xd[3]};
    ampc_pass_view v;
    ampc_pass_view_init(&v, x);
    const int32_t r = group > 1 ? 5 : 4;
    if (group > 1) { /* x's own strides over the five dims */
        const int64_t st[5] = {v.st[0], v.st[1] * group, v.st[1], v.st[2], v.st[3]};
        memcpy(v.st, st, sizeof st);
    }
    for (;;) {
        if (ampc_pass_view_step(&v, r, group > 1 ? dims : xd)) continue;
        ampc_node *p = v.src->producer; /* a scalar Mul keeps every element where it was */
        if (factor && p && !p->dead && p->op == AMPC_OP_MUL && p->n_inputs == 2 &&
            ampc_shape_eq(&p->inputs[0]->shape, &v.src->shape) &&
            !isnan(scalar_of(p->inputs[1]))) {
            *factor *= scalar_of(p->inputs[1]);
            v.src = p->inputs[0];
        } else if (factor && p && !p->dead && p->op == AMPC_OP_MUL && p->n_inputs == 2 &&
                   ampc_shape_eq(&p->inputs[1]->shape, &v.src->shape) &&
                   !isnan(scalar_of(p->inputs[0]))) {
            *factor *= scalar_of(p->inputs[0]);
            v.src = p->inputs[1];
        } else {
            break;
        }
    }
    if (group > 1 && v.st[2] != 0) return false;
    o->src = v.src;
    o->off = v.off;
    const int64_t st[4] = {v.st[0], v.st[1], v.st[r - 2], v.st[r - 1]};
    memcpy(o->st, st, sizeof st);
    return true;
}

/* Grouped-query attention: K^T and V, after tracing, still read an Expand that repeats each K/V
 * head for a group of query heads. The smallest group g dividing H for which both trace to the
 * unrepeated heads (trace_operand with g) replaces their traces; factor_q is the scale after
 * Q's trace. The group, or 1. */
static int64_t trace_group(match *m, ampc_value *kt, ampc_value *v, double factor_q) {
    const ampc_node *pk = m->k.src->producer, *pv = m->v.src->producer;
    if (!(pk && pk->op == AMPC_OP_EXPAND) && !(pv && pv->op == AMPC_OP_EXPAND)) return 1;
    for (int64_t g = 2; g <= m->dims[1]; g++) {
        operand k, vv;
        double f = factor_q;
        if (m->dims[1] % g || !trace_operand(kt, g, &k, &f) || !trace_operand(v, g, &vv, NULL))
            continue;
        m->k = k, m->v = vv, m->factor = f;
        return g;
    }
    return 1;
}

/* The softmax is over the last axis of its rank-4 input. */
static bool last_axis(const ampc_node *sm) {
    const ampc_attr *a = ampc_ir_attr_find(sm, "axis");
    int64_t axis = a && a->kind == AMPC_ATTR_INT ? a->i : -1;
    return axis == -1 || axis == 3;
}

/* The scores x: [Mul or Div by a scalar] after the first MatMul, each value read once. */
static bool match_product(const ampc_uses *u, ampc_value *x, ampc_node *reader, match *m) {
    ampc_node *p = x->producer;
    if (!p || ampc_pass_only_user(u, x) != reader) return false;
    if (p->op == AMPC_OP_MUL || p->op == AMPC_OP_DIV) {
        /* the scalar on either side of a Mul, the divisor of a Div */
        const int32_t side = p->op == AMPC_OP_MUL && !isnan(scalar_of(p->inputs[0])) ? 0 : 1;
        const double c = scalar_of(p->inputs[side]);
        ampc_value *in = p->inputs[1 - side];
        if (isnan(c) || c == 0 || !ampc_shape_eq(&p->outputs[0]->shape, &in->shape) ||
            !in->producer || ampc_pass_only_user(u, in) != p)
            return false;
        m->factor = p->op == AMPC_OP_MUL ? c : 1 / c;
        m->scale = p;
        p = in->producer;
    }
    if (p->op != AMPC_OP_MATMUL) return false;
    m->mm1 = p;
    return true;
}

/* Windowed attention's shift mask (Swin): the scores [B, H, Sq, Sk], seen as
 * [B / W, W, H, Sq, Sk] by a Reshape, get a constant added that is the same for every group of W
 * batch entries (its B / W dim 1), and are seen as [B, H, Sq, Sk] again for the softmax. On a
 * match the three nodes and the constant go into m and *x becomes the scores before the view. */
static bool match_window(const ampc_uses *u, match *m, ampc_value **x) {
    ampc_node *merge = (*x)->producer;
    if (!merge || merge->op != AMPC_OP_RESHAPE || ampc_pass_only_user(u, *x) != m->sm) return false;
    ampc_value *w5 = merge->inputs[0];
    ampc_node *add = w5->producer;
    if (!add || add->op != AMPC_OP_ADD || w5->shape.rank != 5 ||
        ampc_pass_only_user(u, w5) != merge)
        return false;
    const int64_t *d5 = w5->shape.dims;
    for (int32_t side = 0; side < 2; side++) {
        ampc_value *v = add->inputs[side], *c = add->inputs[1 - side];
        ampc_node *split = v->producer;
        if (!c->data || (c->flags & AMPC_VALUE_INPUT) || c->dtype != v->dtype ||
            (c->shape.rank == 5 && c->shape.dims[0] != 1) || !split ||
            split->op != AMPC_OP_RESHAPE || ampc_pass_only_user(u, v) != add ||
            !ampc_shape_eq(&v->shape, &w5->shape))
            continue;
        ampc_value *sc = split->inputs[0];
        const int64_t *d4 = sc->shape.dims;
        if (!ampc_shape_eq(&sc->shape, &(*x)->shape) || sc->shape.rank != 4 ||
            d5[0] * d5[1] != d4[0] || d5[2] != d4[1] || d5[3] != d4[2] || d5[4] != d4[3])
            continue;
        m->win_split = split, m->win_add = add, m->win_merge = merge;
        m->win_mask = c, m->window = d5[1];
        *x = sc;
        return true;
    }
    return false;
}

/* Walks from the softmax's input back to the first MatMul (stage 2), through a window view
 * (match_window); with an Add, either of its operands may be the scores, the other one is the
 * mask, which under a window view must be a constant the same for every batch entry. */
static bool match_scores(const ampc_uses *u, match *m) {
    ampc_value *x = m->sm->inputs[0];
    ampc_node *reader = match_window(u, m, &x) ? m->win_split : m->sm;
    ampc_node *add = x->producer;
    if (!add || add->op != AMPC_OP_ADD || ampc_pass_only_user(u, x) != reader)
        return match_product(u, x, reader, m);
    for (int32_t side = 0; side < 2; side++) {
        ampc_value *s = add->inputs[side], *mask = add->inputs[1 - side];
        if (!ampc_shape_eq(&s->shape, &x->shape) || mask->shape.rank > 4) continue;
        if (m->window && (!mask->data || (mask->flags & AMPC_VALUE_INPUT) ||
                          (mask->shape.rank == 4 && mask->shape.dims[0] != 1)))
            continue;
        m->scale = NULL, m->factor = 1;
        if (match_product(u, s, add, m)) {
            m->add = add, m->mask = mask;
            return true;
        }
    }
    return false;
}

/* Q [B, H, Sq, D], K^T [B, H, D, Sk], V [B, H, Sk, Dv], one float type, no batch broadcast. */
static bool shapes_fit(match *m) {
    const ampc_value *q = m->mm1->inputs[0], *kt = m->mm1->inputs[1], *v = m->mm2->inputs[1];
    if (q->shape.rank != 4 || kt->shape.rank != 4 || v->shape.rank != 4 ||
        !ampc_dtype_is_float(q->dtype) || kt->dtype != q->dtype || v->dtype != q->dtype ||
        (m->mask && m->mask->dtype != q->dtype))
        return false;
    const int64_t *a = q->shape.dims, *b = kt->shape.dims, *c = v->shape.dims;
    if (a[0] != b[0] || a[0] != c[0] || a[1] != b[1] || a[1] != c[1] || a[3] != b[2] ||
        b[3] != c[2])
        return false;
    const int64_t dims[6] = {a[0], a[1], a[2], b[3], a[3], c[3]};
    memcpy(m->dims, dims, sizeof dims);
    return true;
}

/* The pattern whose softmax is sm (stages 1-3), or false. */
static bool match_at(const ampc_uses *u, ampc_node *sm, match *m) {
    *m = (match){.sm = sm, .factor = 1};
    if (sm->outputs[0]->shape.rank != 4 || !last_axis(sm) || !match_scores(u, m)) return false;
    ampc_node *mm2 = ampc_pass_only_user(u, sm->outputs[0]);
    if (!mm2 || mm2->op != AMPC_OP_MATMUL || mm2->inputs[0] != sm->outputs[0]) return false;
    m->mm2 = m->last = mm2;
    if (!shapes_fit(m)) return false;
    trace_operand(m->mm1->inputs[0], 1, &m->q, &m->factor);
    const double factor_q = m->factor;
    trace_operand(m->mm1->inputs[1], 1, &m->k, &m->factor);
    trace_operand(mm2->inputs[1], 1, &m->v, NULL);
    m->group = trace_group(m, m->mm1->inputs[1], mm2->inputs[1], factor_q);
    /* K^T's dims are (b, h, d, j): the op wants (b, h, j, d) */
    const int64_t kd = m->k.st[2];
    m->k.st[2] = m->k.st[3], m->k.st[3] = kd;
    ampc_node *tr = ampc_pass_only_user(u, mm2->outputs[0]);
    if (tr && tr->op == AMPC_OP_TRANSPOSE && ampc_pass_perm_of(tr, 4, m->y_perm)) {
        m->tr = m->last = tr;
        ampc_node *rs = ampc_pass_only_user(u, tr->outputs[0]);
        if (rs && ampc_op_has(rs->op, T_VIEW) && rs->outputs[0]->dtype == tr->outputs[0]->dtype)
            m->last = rs;
        const ampc_shape merged = {.rank = 3,
                                   .dims = {m->dims[0], m->dims[2], m->dims[1] * m->dims[5]}};
        const int64_t *p = m->y_perm;
        m->merge_heads = p[0] == 0 && p[1] == 2 && p[2] == 1 && p[3] == 3 && m->last == rs &&
                         ampc_shape_eq(&rs->outputs[0]->shape, &merged);
    }
    return true;
}

/* The element of constant v (rank <= r, right-aligned to r dims) at coordinates c, broadcast. */
static double bcast_load(const ampc_value *v, int32_t r, const int64_t *c) {
    int64_t st[AMPC_MAX_RANK], off = 0;
    ampc_ref_strides(&v->shape, st);
    for (int32_t k = 0; k < v->shape.rank; k++)
        if (v->shape.dims[k] != 1) off += c[r - v->shape.rank + k] * st[k];
    return ampc_ref_load_f64(v->data, v->dtype, off);
}

/* The one mask of a windowed match: [W, H, Sq, Sk], the scores' first mask (when there is one,
 * the same for every batch entry) plus the window's, summed in double and rounded once; or NULL
 * (out of memory). */
static ampc_value *window_mask(ampc_graph *g, const match *m) {
    const int64_t W = m->window, H = m->dims[1], Sq = m->dims[2], Sk = m->dims[3];
    const ampc_dtype t = m->win_mask->dtype;
    const ampc_shape shape = {.rank = 4, .dims = {W, H, Sq, Sk}};
    unsigned char *data = malloc((size_t)(W * H * Sq * Sk) * ampc_dtype_size(t) + 1);
    if (!data) return NULL;
    int64_t at = 0;
    for (int64_t w = 0; w < W; w++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < Sq; i++)
                for (int64_t j = 0; j < Sk; j++) {
                    const int64_t c4[4] = {0, h, i, j}, c5[5] = {0, w, h, i, j};
                    double v = bcast_load(m->win_mask, 5, c5);
                    if (m->mask) v += bcast_load(m->mask, 4, c4);
                    ampc_ref_store_f64(data, t, at++, v);
                }
    char name[160];
    snprintf(name, sizeof name, "%.140s_window_mask", m->sm->name);
    ampc_value *c = ampc_ir_const_new(g, name, t, &shape, data);
    free(data);
    return c;
}

/* An ints attribute in the graph's arena. */
static ampc_attr ints_attr(ampc_graph *g, const char *name, const int64_t *v, int32_t n) {
    int64_t *copy = ampc_ir_alloc(g, (size_t)n * sizeof *copy);
    if (copy) memcpy(copy, v, (size_t)n * sizeof *copy);
    return (ampc_attr){.name = name, .kind = AMPC_ATTR_INTS, .n = copy ? n : 0, .ints = copy};
}

static ampc_status rewrite(ampc_graph *g, match *m, ampc_uses *u) {
    const int64_t offsets[3] = {m->q.off, m->k.off, m->v.off};
    const ampc_shape *ys = &m->last->outputs[0]->shape;
    ampc_attr as[12] = {
        ints_attr(g, "dims", m->dims, 6),
        ints_attr(g, "q_strides", m->q.st, 4),
        ints_attr(g, "k_strides", m->k.st, 4),
        ints_attr(g, "v_strides", m->v.st, 4),
        {.name = "scale", .kind = AMPC_ATTR_FLOAT, .f = (float)m->factor},
        {.name = "safe", .kind = AMPC_ATTR_INT, .i = m->sm->op == AMPC_OP_SAFE_SOFTMAX},
        {.name = "merge_heads", .kind = AMPC_ATTR_INT, .i = m->merge_heads},
        ints_attr(g, "offsets", offsets, 3),
        {.name = "kv_group", .kind = AMPC_ATTR_INT, .i = m->group},
        ints_attr(g, "y_perm", m->y_perm, 4),
        ints_attr(g, "y_shape", ys->dims, ys->rank),
        {.name = "mask_period", .kind = AMPC_ATTR_INT, .i = m->window},
    };
    for (int32_t i = 0; i < 12; i++)
        if (as[i].kind == AMPC_ATTR_INTS && !as[i].ints) return AMPC_E_OOM;
    /* the attributes past merge_heads only where they are not the defaults */
    int32_t n_as = 7;
    if (offsets[0] || offsets[1] || offsets[2]) as[n_as++] = as[7];
    if (m->group > 1) as[n_as++] = as[8];
    if (m->tr && !m->merge_heads) {
        as[n_as++] = as[9];
        if (m->last != m->tr) as[n_as++] = as[10];
    }
    ampc_value *mask = m->mask;
    if (m->window) {
        if (!(mask = window_mask(g, m)) || ampc_pass_uses_grow(g, u) != AMPC_OK) return AMPC_E_OOM;
        as[n_as++] = as[11];
    }
    ampc_value *in[4] = {m->q.src, m->k.src, m->v.src, mask};
    ampc_node *chain[9] = {m->mm1, m->scale,     m->add,     m->win_split, m->win_add,
                           m->win_merge, m->sm, m->mm2, m->tr};
    for (int32_t i = 0; i < 9; i++)
        if (chain[i] && chain[i] != m->last) ampc_ir_node_remove(g, chain[i]);
    return ampc_pass_rewrite(g, m->last, AMPC_OP_FUSED_ATTENTION, m->last->name, in,
                             mask ? 4 : 3, as, n_as, u);
}

ampc_status ampc_pass_fuse_attention(ampc_graph *g, bool *changed) {
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++) {
        ampc_node *sm = g->nodes[i];
        match m;
        if (sm->dead || (sm->op != AMPC_OP_SOFTMAX && sm->op != AMPC_OP_SAFE_SOFTMAX) ||
            !match_at(&uses, sm, &m))
            continue;
        st = rewrite(g, &m, &uses);
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (st == AMPC_E_OOM) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    /* The operands' skipped nodes nobody reads any more go now: the scale folding must not see
     * the Muls the fused op already applies, nor fuse-qkv count the Reshapes as readers. */
    bool swept;
    if (*changed && st == AMPC_OK) st = ampc_pass_dce(g, &swept);
    return st;
}
