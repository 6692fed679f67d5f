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
 *   4. Permuted rows around the projections (nn.MultiheadAttention with batch_first): a packed
 *      projection of a permuted x is made a projection of x itself (sink_permutation), and a
 *      row permutation after the output projection is written by the fused node (hoist_rows).
 *   5. A constant causal mask, on every ampc.FusedAttention (onnx-attention's too), becomes the
 *      attributes causal and causal_offset, and a mask of zeros goes (mask_structure).
 *
 * Numerics (ir/ref/attention.c): the scores are rounded once to the tensors' type, as the
 * unfused graph holds them, so a large negative mask overflows to -inf in f16 as it did there;
 * ampc.SafeSoftmax gives 0 on rows without a finite score, Softmax NaN. The chain rounded the
 * scores up to three times and the scale folded into Q or K once more: within a few roundings.
 */
#include "passes.h"
#include "ir/activation.h"
#include "ir/attention.h"

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
    const int64_t axis = ampc_axis_attr(sm);
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
    if (tr && tr->op == AMPC_OP_TRANSPOSE && ampc_transpose_perm(tr, 4, m->y_perm)) {
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

/* ---- a projection of permuted rows ---------------------------------------------------------- *
 * nn.MultiheadAttention with batch_first permutes its input to sequence-first before the packed
 * projection: P = MatMul(Transpose(x, p), W) [+ b], with p keeping the last axis, so the
 * projection's rows are x's rows permuted. The GEMM commutes with that permutation:
 * P = Transpose(MatMul(x, W) [+ b], p). When every reader of P is a view leading only to this
 * attention's operands, the operands are traced once more through that Transpose to a new
 * projection of x itself, and the permuted copy of x is never made. */

/* Whether value v is read only by views (and scalar Muls) that lead to the operands `ends` of
 * the matched attention, each of which only its MatMuls read. Each value looked at costs one of
 * *budget (a whole scan of the nodes): past it the answer is no, however the views branch. */
static bool feeds_only(const ampc_graph *g, const ampc_value *v, const match *m,
                       const ampc_value *const ends[3], int32_t *budget) {
    if (--*budget < 0 || (v->flags & AMPC_VALUE_OUTPUT)) return false;
    for (int32_t e = 0; e < 3; e++)
        if (v == ends[e]) {
            for (int32_t i = 0; i < g->n_nodes; i++) {
                const ampc_node *r = g->nodes[i];
                for (int32_t k = 0; !r->dead && k < r->n_inputs; k++)
                    if (r->inputs[k] == v && r != m->mm1 && r != m->mm2) return false;
            }
            return true;
        }
    int32_t readers = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *r = g->nodes[i];
        bool reads = false;
        for (int32_t k = 0; !r->dead && k < r->n_inputs; k++) reads |= r->inputs[k] == v;
        if (!reads) continue;
        readers++;
        const bool view = ampc_op_has(r->op, T_VIEW) || r->op == AMPC_OP_TRANSPOSE ||
                          r->op == AMPC_OP_GATHER || r->op == AMPC_OP_SPLIT ||
                          r->op == AMPC_OP_EXPAND ||
                          (r->op == AMPC_OP_MUL && r->n_inputs == 2 &&
                           (!isnan(scalar_of(r->inputs[0])) || !isnan(scalar_of(r->inputs[1]))));
        if (!view || (r->inputs[0] != v && r->op != AMPC_OP_MUL)) return false;
        for (int32_t o = 0; o < r->n_outputs; o++)
            if (!feeds_only(g, r->outputs[o], m, ends, budget)) return false;
    }
    return readers > 0;
}

/* P's parts when it is [Add(] MatMul(Transpose(x, p), W) [, b)] as above: false otherwise. */
typedef struct permuted_projection {
    ampc_node *add, *mm, *tr;
    ampc_value *x, *w, *b;
    int64_t perm[AMPC_MAX_RANK];
} permuted_projection;

static bool permuted(const ampc_uses *u, ampc_value *pv, permuted_projection *pp) {
    *pp = (permuted_projection){0};
    ampc_node *n = pv->producer;
    if (n && !n->dead && n->op == AMPC_OP_ADD && n->n_inputs == 2) {
        for (int32_t side = 0; side < 2 && !pp->add; side++) {
            ampc_value *a = n->inputs[side], *b = n->inputs[1 - side];
            const int32_t br = b->shape.rank, r = pv->shape.rank;
            bool row = br >= 1 && br <= r && b->shape.dims[br - 1] == pv->shape.dims[r - 1] &&
                       ampc_shape_eq(&a->shape, &pv->shape) && a->producer &&
                       ampc_pass_only_user(u, a) == n;
            for (int32_t d = 0; row && d < br - 1; d++) row = b->shape.dims[d] == 1;
            if (row) pp->add = n, pp->b = b, n = a->producer;
        }
        if (!pp->add) return false;
    }
    if (!n || n->dead || n->op != AMPC_OP_MATMUL || n->inputs[1]->shape.rank != 2) return false;
    ampc_node *tr = n->inputs[0]->producer;
    const int32_t r = n->inputs[0]->shape.rank;
    if (!tr || tr->dead || tr->op != AMPC_OP_TRANSPOSE || r < 3 ||
        !ampc_transpose_perm(tr, r, pp->perm) || pp->perm[r - 1] != r - 1)
        return false;
    pp->mm = n, pp->tr = tr, pp->x = tr->inputs[0], pp->w = n->inputs[1];
    return true;
}

/* The dims of operand o of m as its strides step them: Q's, K's (b, h, j, d), V's. */
static void operand_dims(const match *m, int32_t o, int64_t dims[4]) {
    const int64_t *q = m->mm1->inputs[0]->shape.dims, *kt = m->mm1->inputs[1]->shape.dims;
    const int64_t *v = m->mm2->inputs[1]->shape.dims;
    const int64_t k[4] = {kt[0], kt[1], kt[3], kt[2]};
    memcpy(dims, o == 0 ? q : o == 1 ? k : v, 4 * sizeof *dims);
}

/* Moves the operands reading a permuted projection P onto a projection of x itself (see above);
 * on any failure leaves m as it was. AMPC_E_OOM only for want of memory. */
static ampc_status sink_permutation(ampc_graph *g, const ampc_uses *u, match *m) {
    operand *ops[3] = {&m->q, &m->k, &m->v};
    ampc_value *pv = m->q.src;
    permuted_projection pp;
    if (m->group > 1 || m->k.src != pv || m->v.src != pv || !permuted(u, pv, &pp)) return AMPC_OK;
    const ampc_value *ends[3] = {m->mm1->inputs[0], m->mm1->inputs[1], m->mm2->inputs[1]};
    int32_t budget = 64; /* MHA's trace: about 15 values from the projection to Q, K and V */
    if (!feeds_only(g, pv, m, ends, &budget)) return AMPC_OK;
    /* MatMul(x, W) [+ b], then the Transpose that gives P's layout, to trace through */
    ampc_node *mm = NULL, *add = NULL, *tr = NULL;
    ampc_value *in[2] = {pp.x, pp.w};
    if (ampc_ir_node_build(g, AMPC_OP_MATMUL, pp.mm->name, in, 2, NULL, 0, 1, NULL, &mm) != AMPC_OK)
        return mm ? AMPC_OK : AMPC_E_OOM;
    ampc_value *y = mm->outputs[0];
    if (pp.add) {
        ampc_value *ab[2] = {y, pp.b};
        const ampc_status st = ampc_ir_node_build(g, AMPC_OP_ADD, pp.add->name, ab, 2, NULL, 0, 1,
                                                  NULL, &add);
        if (st != AMPC_OK) goto undo;
        y = add->outputs[0];
    }
    const int32_t r = y->shape.rank;
    int64_t perm[AMPC_MAX_RANK];
    memcpy(perm, pp.perm, (size_t)r * sizeof *perm);
    ampc_attr a = ampc_transpose_perm_attr(perm, r);
    const ampc_status st = ampc_ir_node_build(g, AMPC_OP_TRANSPOSE, pp.tr->name, &y, 1, &a, 1, 1,
                                              NULL, &tr);
    if (st != AMPC_OK || !ampc_shape_eq(&tr->outputs[0]->shape, &pv->shape)) goto undo;
    operand moved[3];
    for (int32_t o = 0; o < 3; o++) {
        int64_t dims[4];
        operand_dims(m, o, dims);
        ampc_pass_view v = {.src = tr->outputs[0], .off = ops[o]->off};
        memcpy(v.st, ops[o]->st, sizeof ops[o]->st);
        if (!ampc_pass_view_step(&v, 4, dims) || v.src != y) goto undo;
        moved[o] = (operand){.src = y, .off = v.off};
        memcpy(moved[o].st, v.st, sizeof moved[o].st);
    }
    ampc_ir_node_remove(g, tr);
    for (int32_t o = 0; o < 3; o++) *ops[o] = moved[o];
    return AMPC_OK;
undo:
    if (tr) ampc_ir_node_remove(g, tr);
    if (add) ampc_ir_node_remove(g, add);
    ampc_ir_node_remove(g, mm);
    return AMPC_OK;
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

static ampc_status rewrite(ampc_graph *g, match *m, ampc_uses *u) {
    const ampc_shape *ys = &m->last->outputs[0]->shape;
    ampc_attention_form f = {.scale = m->factor,
                             .safe = m->sm->op == AMPC_OP_SAFE_SOFTMAX,
                             .merge_heads = m->merge_heads,
                             .off = {m->q.off, m->k.off, m->v.off},
                             .group = m->group,
                             .has_perm = m->tr && !m->merge_heads,
                             .mask_period = m->window};
    memcpy(f.dims, m->dims, sizeof f.dims);
    memcpy(f.qs, m->q.st, sizeof f.qs);
    memcpy(f.ks, m->k.st, sizeof f.ks);
    memcpy(f.vs, m->v.st, sizeof f.vs);
    memcpy(f.y_perm, m->y_perm, sizeof f.y_perm);
    if (f.has_perm && m->last != m->tr) {
        f.y_rank = ys->rank;
        memcpy(f.y_shape, ys->dims, sizeof f.y_shape);
    }
    ampc_value *mask = m->mask;
    if (m->window && (!(mask = window_mask(g, m)) || ampc_pass_uses_grow(g, u) != AMPC_OK))
        return AMPC_E_OOM;
    ampc_attr *as;
    int32_t n_as;
    if (ampc_attention_form_attrs(g, &f, &as, &n_as) != AMPC_OK) return AMPC_E_OOM;
    ampc_value *in[4] = {m->q.src, m->k.src, m->v.src, mask};
    ampc_node *chain[9] = {m->mm1, m->scale,     m->add,     m->win_split, m->win_add,
                           m->win_merge, m->sm, m->mm2, m->tr};
    for (int32_t i = 0; i < 9; i++)
        if (chain[i] && chain[i] != m->last) ampc_ir_node_remove(g, chain[i]);
    return ampc_pass_rewrite(g, m->last, AMPC_OP_FUSED_ATTENTION, m->last->name, in,
                             mask ? 4 : 3, as, n_as, u);
}

/* ---- an output projection of permuted rows ------------------------------------------------- *
 * The same model permutes the output projection's rows back to batch-first:
 * Transpose(Reshape(Gemm(Y), [A0, A1, N]), (1, 0, 2)) where the fused node f writes Y's rows in
 * the order (A0, A1) (y_perm (a0, a1, 1, 3)). The projection is row-wise, so f writes the rows
 * in the order (A1, A0) instead, the projection runs on them as they are, and the Transpose
 * becomes a Reshape: no copy, and the residual Add after it reads the projection's output
 * directly (fuse-matmul then folds it into the GEMM). */

/* Whether n computes each output row from the same input row alone: a 2-D Gemm without transA,
 * its C a row vector, or a MatMul by a 2-D B. */
static bool row_wise(const ampc_node *n, const ampc_value *y) {
    if (n->inputs[0] != y || n->inputs[1]->shape.rank != 2) return false;
    if (n->op == AMPC_OP_MATMUL) return true;
    if (n->op != AMPC_OP_GEMM || ampc_gemm_params_of(n).ta) return false;
    const ampc_value *c = n->n_inputs > 2 ? n->inputs[2] : NULL;
    return !c || ampc_shape_numel(&c->shape) == 1 || c->shape.rank == 1 ||
           (c->shape.rank == 2 && c->shape.dims[0] == 1);
}

static ampc_status hoist_rows(ampc_graph *g, ampc_uses *u, ampc_node *f) {
    ampc_value *y = f->outputs[0];
    ampc_attention_form form;
    if (!ampc_attention_form_of(f, &form) || !form.has_perm) return AMPC_OK;
    const int64_t *p = form.y_perm, *d = form.dims; /* d: B, H, Sq, Sk, D, Dv */
    if (p[2] != 1 || p[3] != 3 || y->shape.rank != 2) return AMPC_OK;
    ampc_node *proj = ampc_pass_only_user(u, y);
    if (!proj || !row_wise(proj, y)) return AMPC_OK;
    ampc_node *rs = ampc_pass_only_user(u, proj->outputs[0]);
    if (!rs || rs->op != AMPC_OP_RESHAPE) return AMPC_OK;
    ampc_node *tr = ampc_pass_only_user(u, rs->outputs[0]);
    int64_t perm[3];
    const ampc_shape *rsh = &rs->outputs[0]->shape;
    const int64_t extent[4] = {d[0], d[1], d[2], d[5]};
    if (!tr || tr->op != AMPC_OP_TRANSPOSE || rsh->rank != 3 || !ampc_transpose_perm(tr, 3, perm) ||
        perm[0] != 1 || perm[1] != 0 || perm[2] != 2 || rsh->dims[0] != extent[p[0]] ||
        rsh->dims[1] != extent[p[1]] || (tr->outputs[0]->flags & AMPC_VALUE_OUTPUT))
        return AMPC_OK;
    const int64_t swapped[4] = {p[1], p[0], 1, 3};
    memcpy(form.y_perm, swapped, sizeof swapped);
    ampc_value *target = ampc_ir_const_new(g, NULL, AMPC_DTYPE_I64,
                                           &(ampc_shape){.rank = 1, .dims = {3}},
                                           tr->outputs[0]->shape.dims);
    if (!target || ampc_pass_uses_grow(g, u) != AMPC_OK ||
        ampc_attention_form_set(g, f, &form) != AMPC_OK)
        return AMPC_E_OOM;
    ampc_value *in[2] = {proj->outputs[0], target};
    ampc_status st = ampc_pass_rewrite(g, tr, AMPC_OP_RESHAPE, tr->name, in, 2, NULL, 0, u);
    if (st == AMPC_OK) ampc_ir_node_remove(g, rs);
    return st;
}

/* ---- a constant causal mask becomes structure ---------------------------------------------- *
 * A constant mask that is, for every batch entry and head, 0 at keys j <= i + c and -inf past
 * them (a decoder's causal mask as exporters write it, often expanded over the batch, one per
 * layer; onnx-attention's is_causal) leaves the node for the attributes causal = 1,
 * causal_offset = c: the kernels skip the key tiles no row of a block sees without reading a
 * mask (codegen/kernels/attention.cuh), and the constants leave the weights. A mask of zeros
 * only is dropped outright: adding 0 changes no probability. Any other value (a large finite
 * negative, a NaN) keeps the mask as it is. */

/* Whether constant mask m of node p is causal (*c its offset) or all zeros (*zero). */
static bool causal_mask(const ampc_value *m, const ampc_attention_params *p, int64_t *c,
                        bool *zero) {
    const int32_t r = m->shape.rank;
    const int64_t n = ampc_ir_numel(m);
    *zero = true;
    for (int64_t e = 0; e < n && *zero; e++) *zero = ampc_ref_load_f64(m->data, m->dtype, e) == 0;
    if (*zero) return true;
    const int64_t rows = r >= 2 ? m->shape.dims[r - 2] : 1;
    if (r < 1 || m->shape.dims[r - 1] != p->Sk || rows != p->Sq) return false;
    /* the offset from the first row that sees a key: it sees keys 0 .. i + c */
    int64_t i = 0, z = 0;
    for (; i < rows && z == 0; i++)
        while (z < p->Sk && ampc_ref_load_f64(m->data, m->dtype, i * p->Sk + z) == 0) z++;
    if (z == 0) return false; /* every key masked: no offset says it */
    *c = z - i; /* i is one past that row */
    for (int64_t e = 0; e < n; e++) {
        const int64_t j = e % p->Sk, row = e / p->Sk % rows;
        const double x = ampc_ref_load_f64(m->data, m->dtype, e);
        if (j <= row + *c ? x != 0 : x != -INFINITY) return false;
    }
    return true;
}

static ampc_status mask_structure(ampc_graph *g, ampc_node *n, bool *changed) {
    const ampc_value *m = n->n_inputs > 3 ? n->inputs[3] : NULL;
    ampc_attention_params p;
    ampc_attention_form f;
    int64_t c = 0;
    bool zero;
    /* a graph input's data is a default the caller may replace: no constant */
    if (!m || !m->data || (m->flags & AMPC_VALUE_INPUT) || !ampc_attention_form_of(n, &f))
        return AMPC_OK;
    ampc_attention_params_of(n, &p);
    if (!causal_mask(m, &p, &c, &zero)) return AMPC_OK;
    f.mask_period = 0;
    f.causal = !zero;
    f.causal_off = zero ? 0 : c;
    n->n_inputs = 3; /* the constant goes with dce when nothing else reads it */
    if (ampc_attention_form_set(g, n, &f) != AMPC_OK) return AMPC_E_OOM;
    *changed = true;
    return ampc_ir_node_infer(g, n);
}

ampc_status ampc_pass_fuse_attention(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    const int32_t n_old = g->n_nodes;
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++) {
        ampc_node *sm = g->nodes[i];
        match m;
        if (sm->dead || (sm->op != AMPC_OP_SOFTMAX && sm->op != AMPC_OP_SAFE_SOFTMAX) ||
            !match_at(&uses, sm, &m))
            continue;
        st = sink_permutation(g, &uses, &m);
        if (st == AMPC_OK && (st = ampc_pass_uses_grow(g, &uses)) == AMPC_OK)
            st = rewrite(g, &m, &uses);
        if (st == AMPC_OK) st = hoist_rows(g, &uses, m.last);
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (g->n_nodes > n_old) ampc_ir_graph_settle(g, n_old); /* the projections of x */
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++)
        if (!g->nodes[i]->dead && g->nodes[i]->op == AMPC_OP_FUSED_ATTENTION)
            st = mask_structure(g, g->nodes[i], changed);
    if (st == AMPC_E_OOM) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    /* The operands' skipped nodes nobody reads any more go now: the scale folding must not see
     * the Muls the fused op already applies, nor fuse-qkv count the Reshapes as readers. */
    bool swept;
    if (*changed && st == AMPC_OK) st = ampc_pass_dce(g, cx, &swept);
    return st;
}
