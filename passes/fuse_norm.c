/*
 * fuse_norm.c — the RMS norm as exporters write it out,
 *
 *   y = x / Sqrt(ReduceMean(Pow(x, 2), axes) + eps)
 *   y = x * Reciprocal(Sqrt(ReduceMean(x * x, axes) + eps))     (or Div(1, Sqrt(...)): rsqrt)
 *
 * (T5's and Llama's RMS norms: torch has no RMSNormalization before opset 23, so every model
 * of the Llama family brings this form), becomes one RMSNormalization(x, ones) over the same
 * trailing axes, with epsilon eps: one kernel that reads x once and keeps the sum of squares in
 * f32, instead of four kernels and an f32 tensor of squares written and read back.
 *
 * The match: the reduced axes are the last k of x, kept (keepdims 1); Pow's exponent is the
 * constant 2 (or the square is Mul(x, x)); eps is a one-element constant; every value between x
 * and y has that one reader and is no graph output; x is f32, f16 or bf16. The kernel computes
 * what the nodes compute, in f32, with the division as a product by the inverse square root
 * (within an f32 rounding of the quotient), and the sum of squares in its own order, as any
 * reduction kernel does. The scale of ones multiplies exactly; the model's own scale (a Mul by
 * the weight after a Cast back to f16) stays where it is, since folding it would round once
 * where the model rounds twice.
 */
#include "passes.h"
#include "ir/reduce.h"
#include "ir/norm.h"

#include "ir/ref/ref.h"

#include <stdlib.h>

static bool is_const_scalar(const ampc_value *v, double *out) {
    if (!v || !v->data || !ampc_dtype_is_float(v->dtype) || ampc_ir_numel(v) != 1) return false;
    *out = ampc_ref_load_f64(v->data, v->dtype, 0);
    return true;
}

/* The other input of binary node n than v, or NULL when v is not one of its two inputs. */
static ampc_value *other(const ampc_node *n, const ampc_value *v) {
    if (n->n_inputs != 2) return NULL;
    return n->inputs[0] == v ? n->inputs[1] : n->inputs[1] == v ? n->inputs[0] : NULL;
}

/* The value squared by node sq (Pow(x, 2) or Mul(x, x)), or NULL. */
static ampc_value *squared(const ampc_node *sq) {
    double e;
    if (sq->op == AMPC_OP_POW && sq->n_inputs == 2 && is_const_scalar(sq->inputs[1], &e) && e == 2.0)
        return sq->inputs[0];
    if (sq->op == AMPC_OP_MUL && sq->n_inputs == 2 && sq->inputs[0] == sq->inputs[1]) return sq->inputs[0];
    return NULL;
}

/* The value r inverts: Reciprocal(s) or Div(1, s) (torch's rsqrt exported); NULL otherwise. */
static ampc_value *inverted(const ampc_node *r) {
    double one;
    if (r->op == AMPC_OP_RECIPROCAL && r->n_inputs == 1) return r->inputs[0];
    if (r->op == AMPC_OP_DIV && r->n_inputs == 2 && is_const_scalar(r->inputs[0], &one) && one == 1.0)
        return r->inputs[1];
    return NULL;
}

/* The first reduced axis of ReduceMean r over x when its axes are the last k of x, kept; -1
 * otherwise. */
static int32_t trailing_axes(const ampc_node *r, const ampc_value *x) {
    const int32_t rank = x->shape.rank;
    const ampc_reduce_params p = ampc_reduce_params_of(r);
    if (rank < 1 || !p.keepdims) return -1;
    /* the axes, given: input 1 (opset 18), known, or the older `axes` attribute */
    const ampc_value *a = r->n_inputs > 1 ? r->inputs[1] : NULL;
    const int64_t k = a ? (a->data ? ampc_ir_numel(a) : 0) : p.n_axes;
    if (k < 1 || k > rank) return -1;
    bool on[AMPC_MAX_RANK];
    ampc_reduce_dims(r, a ? a->data : NULL, a ? a->dtype : AMPC_DTYPE_I64, k, rank, on);
    const int32_t first = rank - (int32_t)k;
    for (int32_t d = 0; d < rank; d++)
        if (on[d] != (d >= first)) return -1;
    return first;
}

/* Matches the written-out norm ending at node y (a Div or a Mul); on success fills x, the
 * first normalised axis, eps and the nodes the rewrite removes. */
typedef struct rms_match {
    ampc_value *x;
    int32_t axis;
    double eps;
    ampc_node *dead[5];
    int32_t n_dead;
} rms_match;

static bool match_rms(const ampc_uses *u, ampc_node *y, rms_match *m) {
    if (y->n_inputs != 2) return false;
    for (int32_t side = 0; side < 2; side++) {
        ampc_value *x = y->inputs[side], *d = y->inputs[1 - side];
        ampc_node *root = d ? d->producer : NULL; /* Sqrt for a Div, Reciprocal for a Mul */
        if (!x || !root || root->dead || ampc_pass_only_user(u, d) != y) continue;
        if (!(x->dtype == AMPC_DTYPE_F32 || x->dtype == AMPC_DTYPE_F16 || x->dtype == AMPC_DTYPE_BF16))
            continue;
        m->n_dead = 0;
        ampc_node *sqrt_n = root;
        if (y->op == AMPC_OP_MUL) {
            ampc_value *s = inverted(root);
            if (!s || !(sqrt_n = s->producer) || ampc_pass_only_user(u, s) != root) continue;
            m->dead[m->n_dead++] = root;
        } else if (y->op != AMPC_OP_DIV || side != 0) {
            continue;
        }
        if (!sqrt_n || sqrt_n->dead || sqrt_n->op != AMPC_OP_SQRT) continue;
        ampc_node *add = sqrt_n->inputs[0]->producer;
        if (!add || add->dead || add->op != AMPC_OP_ADD ||
            ampc_pass_only_user(u, sqrt_n->inputs[0]) != sqrt_n)
            continue;
        ampc_node *mean = NULL;
        for (int32_t k = 0; k < 2 && !mean; k++) {
            ampc_value *s = add->inputs[k];
            if (s && s->producer && s->producer->op == AMPC_OP_REDUCE_MEAN && !s->producer->dead &&
                is_const_scalar(other(add, s), &m->eps) && ampc_pass_only_user(u, s) == add)
                mean = s->producer;
        }
        ampc_node *sq = mean ? mean->inputs[0]->producer : NULL;
        if (!sq || sq->dead || ampc_pass_only_user(u, mean->inputs[0]) != mean || squared(sq) != x) continue;
        if (!(m->eps >= 0.0 && m->eps < 1.0) || (m->axis = trailing_axes(mean, x)) < 0) continue;
        m->x = x;
        m->dead[m->n_dead++] = sqrt_n;
        m->dead[m->n_dead++] = add;
        m->dead[m->n_dead++] = mean;
        m->dead[m->n_dead++] = sq;
        return true;
    }
    return false;
}

/* A constant of ones in x's dtype over the normalised dims [axis, rank). */
static ampc_value *ones(ampc_graph *g, const ampc_value *x, int32_t axis) {
    ampc_shape s = {x->shape.rank - axis, {0}};
    int64_t n = 1;
    for (int32_t d = axis; d < x->shape.rank; d++) s.dims[d - axis] = x->shape.dims[d], n *= x->shape.dims[d];
    const size_t es = ampc_dtype_size(x->dtype);
    char *data = malloc((size_t)n * es + 1);
    if (!data) return NULL;
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(data, x->dtype, i, 1.0);
    ampc_value *v = ampc_ir_const_new(g, NULL, x->dtype, &s, data);
    free(data);
    return v;
}

ampc_status ampc_pass_fuse_norm(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    const int32_t n_nodes = g->n_nodes;
    for (int32_t i = 0; i < n_nodes && st == AMPC_OK; i++) {
        ampc_node *y = g->nodes[i];
        rms_match m;
        if (y->dead || (y->op != AMPC_OP_DIV && y->op != AMPC_OP_MUL) || !match_rms(&uses, y, &m)) continue;
        ampc_value *in[2] = {m.x, ones(g, m.x, m.axis)};
        if (!in[1] || ampc_pass_uses_grow(g, &uses) != AMPC_OK) {
            st = AMPC_FAIL(g, y, AMPC_E_OOM, "out of host memory");
            break;
        }
        ampc_attr attrs[3];
        ampc_norm_attrs(m.axis, m.eps, attrs);
        for (int32_t k = 0; k < m.n_dead; k++) ampc_ir_node_remove(g, m.dead[k]);
        st = ampc_pass_rewrite(g, y, AMPC_OP_RMS_NORM, y->name, in, 2, attrs, 3, &uses);
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (*changed) ampc_ir_graph_compact(g);
    return st;
}
