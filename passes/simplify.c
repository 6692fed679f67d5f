/*
 * simplify.c — nodes that only restate their input become what they are:
 *   - an Expand to its input's own shape is its input: its readers read the input instead;
 *   - a Concat whose inputs but one are empty is that one input: its readers read it instead;
 *   - a Pad whose constant pads are all 0, and a Slice whose constant steps are all 1 keeping
 *     every element (its output the input's shape), are their input (Swin pads its feature maps
 *     to a multiple of the window, 0 where they already are one);
 *   - a Gather whose constant indices list the gathered axis in order (0, 1, ..., n - 1) gives
 *     its input's elements in their order, so it is a Reshape of the input (a view: no step);
 *   - a Concat of Slices of one tensor, each read only by it, that keep every other axis whole
 *     and step 1 along the Concat's axis, is a Gather of those index ranges (torch.roll's shift
 *     as exported: one pass over the tensor instead of the slices' copies and the Concat's);
 *   - a Cast or Not read only by a Reshape, Flatten, Squeeze or Unsqueeze goes after it:
 *     Reshape(Cast(x)) is Cast(Reshape(x)), the Reshape a view of x, and the Cast then reads as
 *     the values around it are shaped, so it can join the chain of elementwise ops that reads
 *     the view (fuse-elementwise computes it there, broadcast).
 * Exporters write the last three around attention masks: transformers' padding mask is a Cast to
 * bool, gathered over an arange and expanded to the shape it already has, so each was a kernel
 * or a copy of its own, and the mask could not join the chain of elementwise ops that reads it
 * (fuse-elementwise). A graph output is left as it is (the interface keeps its names).
 */
#include "passes.h"

#include "ir/ref/ref.h"

#include <stdlib.h>

/* Whether the constant v holds 0, 1, ..., numel - 1 (integer indices). */
static bool is_arange(const ampc_value *v) {
    if (!v || !v->data || (v->dtype != AMPC_DTYPE_I64 && v->dtype != AMPC_DTYPE_I32)) return false;
    const int64_t n = ampc_ir_numel(v);
    for (int64_t i = 0; i < n; i++) {
        int64_t x = v->dtype == AMPC_DTYPE_I64 ? ((const int64_t *)v->data)[i]
                                               : ((const int32_t *)v->data)[i];
        if (x != i) return false;
    }
    return true;
}

/* Gather(x, arange(dim)) along an axis of dim elements -> Reshape(x, y's shape). */
static ampc_status gather_in_order(ampc_graph *g, ampc_node *n, bool *changed) {
    ampc_value *x = n->inputs[0], *idx = n->inputs[1], *y = n->outputs[0];
    int64_t axis = ampc_axis_attr(n);
    if (axis < 0) axis += x->shape.rank;
    if (axis < 0 || axis >= x->shape.rank || !is_arange(idx) ||
        ampc_ir_numel(idx) != x->shape.dims[axis])
        return AMPC_OK;
    ampc_shape s = {1, {y->shape.rank}};
    ampc_value *dims = ampc_ir_const_new(g, NULL, AMPC_DTYPE_I64, &s, y->shape.dims);
    ampc_uses uses; /* after the new constant: the index covers every value */
    if (!dims || ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_E_OOM;
    ampc_value *in[2] = {x, dims};
    *changed = true;
    ampc_status st = ampc_pass_rewrite(g, n, AMPC_OP_RESHAPE, n->name, in, 2, NULL, 0, &uses);
    ampc_pass_uses_free(&uses);
    return st;
}

/* Whether input i of n is absent or a constant all of whose entries are v. */
static bool all_entries(const ampc_node *n, int32_t i, int64_t v) {
    const ampc_value *c = i < n->n_inputs ? n->inputs[i] : NULL;
    if (!c) return true;
    if (!c->data || (c->flags & AMPC_VALUE_INPUT) ||
        (c->dtype != AMPC_DTYPE_I64 && c->dtype != AMPC_DTYPE_I32))
        return false;
    for (int64_t k = 0; k < ampc_ir_numel(c); k++)
        if ((c->dtype == AMPC_DTYPE_I64 ? ((const int64_t *)c->data)[k]
                                        : ((const int32_t *)c->data)[k]) != v)
            return false;
    return true;
}

/* Along axis a of a dim of `dim` entries, where Slice s starts (clamped, as for step 1), when its
 * starts and ends are constant, its steps all 1 and it keeps every other axis of its input
 * whole (its output shape says how many entries it keeps); -1 otherwise. */
static int64_t slice_start(const ampc_node *s, int32_t a) {
    const ampc_value *x = s->inputs[0], *y = s->outputs[0], *st = s->inputs[1];
    const ampc_value *ax = s->n_inputs > 3 ? s->inputs[3] : NULL;
    if (!st || !st->data || (st->flags & AMPC_VALUE_INPUT) || !all_entries(s, 4, 1) ||
        (ax && (!ax->data || (ax->flags & AMPC_VALUE_INPUT))) || y->shape.rank != x->shape.rank)
        return -1;
    for (int32_t d = 0; d < x->shape.rank; d++)
        if (d != a && y->shape.dims[d] != x->shape.dims[d]) return -1;
    const int64_t dim = x->shape.dims[a], n = ampc_ir_numel(st);
    for (int64_t k = 0; k < n; k++) {
        int64_t axis = ax ? ampc_ref_load_i64(ax->data, ax->dtype, k) : k;
        if (axis < 0) axis += x->shape.rank;
        if (axis != a) continue;
        int64_t v = ampc_ref_load_i64(st->data, st->dtype, k);
        if (v < 0) v += dim;
        return v < 0 ? 0 : v > dim ? dim : v;
    }
    return 0;
}

/* Concat n of Slices of one tensor (see the file comment) -> Gather(x, their index ranges). */
static ampc_status slices_as_gather(ampc_graph *g, ampc_node *n, ampc_uses *uses, bool *changed) {
    int64_t a = ampc_axis_attr(n);
    const ampc_value *y = n->outputs[0];
    if (a < 0) a += y->shape.rank;
    ampc_value *x = NULL;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_node *s = n->inputs[i] ? n->inputs[i]->producer : NULL;
        if (!s || s->dead || s->op != AMPC_OP_SLICE || ampc_pass_only_user(uses, n->inputs[i]) != n ||
            (x && s->inputs[0] != x) || slice_start(s, (int32_t)a) < 0)
            return AMPC_OK;
        x = s->inputs[0];
    }
    if (!x || n->n_inputs < 2 || x->dtype != y->dtype) return AMPC_OK;
    const int64_t total = y->shape.dims[a];
    int64_t *idx = malloc((size_t)total * sizeof *idx + 1);
    if (!idx) return AMPC_E_OOM;
    for (int32_t i = 0, at = 0; i < n->n_inputs; i++) {
        const int64_t first = slice_start(n->inputs[i]->producer, (int32_t)a);
        for (int64_t k = 0; k < n->inputs[i]->shape.dims[a]; k++) idx[at++] = first + k;
    }
    const ampc_shape s = {1, {total}};
    ampc_value *c = ampc_ir_const_new(g, NULL, AMPC_DTYPE_I64, &s, idx);
    free(idx);
    if (!c || ampc_pass_uses_grow(g, uses) != AMPC_OK) return AMPC_E_OOM;
    ampc_value *in[2] = {x, c};
    const ampc_attr axis = ampc_axis_attr_make(a);
    *changed = true;
    return ampc_pass_rewrite(g, n, AMPC_OP_GATHER, n->name, in, 2, &axis, 1, uses);
}

/* The views that give their input's elements in their order under another shape. */
static bool is_shape_view(ampc_opcode op) {
    return op == AMPC_OP_RESHAPE || op == AMPC_OP_FLATTEN || op == AMPC_OP_SQUEEZE ||
           op == AMPC_OP_UNSQUEEZE;
}

/* View r (is_shape_view) of the output of a Cast or Not c (its only reader) -> the view of c's
 * input, then c's op: the two nodes trade ops in place (c, first in the graph, becomes the
 * view), the value between them takes the input's type and the view's shape. Other unary ops
 * stay where they are: a Relu or a GELU right after a contraction is its epilogue
 * (fuse-matmul), which a view between them would keep out. */
static ampc_status unary_past_view(ampc_graph *g, ampc_node *r, ampc_uses *uses, bool *changed) {
    ampc_value *v = r->inputs[0];
    ampc_node *c = v->producer;
    if (!c || c->dead || (c->op != AMPC_OP_CAST && c->op != AMPC_OP_NOT) || c->n_inputs != 1 ||
        c->n_outputs != 1 || !c->inputs[0] || c->inputs[0]->data || v->data ||
        (v->flags & AMPC_VALUE_OUTPUT) || ampc_pass_only_user(uses, v) != r ||
        ampc_node_rank(c) != ampc_node_rank(r))
        return AMPC_OK;
    const ampc_opcode op = c->op;
    const char *name = c->name;
    const ampc_attr *attrs = c->attrs;
    const int32_t n_attrs = c->n_attrs;
    const uint8_t why = c->prec_why;
    ampc_value *in[2] = {c->inputs[0], r->n_inputs > 1 ? r->inputs[1] : NULL};
    ampc_status st = ampc_pass_rewrite(g, c, r->op, r->name, in, r->n_inputs > 1 ? 2 : 1, r->attrs,
                                       r->n_attrs, uses);
    if (st == AMPC_OK) st = ampc_pass_rewrite(g, r, op, name, &v, 1, attrs, n_attrs, uses);
    c->prec_why = r->prec_why, r->prec_why = why;
    *changed = true;
    return st;
}

/* The one input of Concat n that has elements, when every other is empty (an exporter's cache of
 * past keys and values, empty when the model runs without one); NULL otherwise. */
static ampc_value *only_nonempty(const ampc_node *n) {
    ampc_value *x = NULL;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        if (!n->inputs[i] || ampc_ir_numel(n->inputs[i]) == 0) continue;
        if (x) return NULL;
        x = n->inputs[i];
    }
    return x;
}

/* The input whose elements node n gives in their order and shape, when n only restates it (the
 * caller checks the shapes match); NULL otherwise. */
static ampc_value *restated(const ampc_node *n) {
    if (n->dead) return NULL;
    switch (n->op) {
    case AMPC_OP_EXPAND: return n->inputs[0];
    case AMPC_OP_CONCAT: return only_nonempty(n);
    case AMPC_OP_PAD: return n->n_inputs >= 2 && n->inputs[1] && all_entries(n, 1, 0) ? n->inputs[0] : NULL;
    case AMPC_OP_SLICE: return all_entries(n, 4, 1) ? n->inputs[0] : NULL;
    default: return NULL;
    }
}

ampc_status ampc_pass_simplify(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    *changed = false;
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; st == AMPC_OK && i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (!n->dead && n->op == AMPC_OP_GATHER && n->n_inputs == 2 && n->inputs[0] &&
            !(n->outputs[0]->flags & AMPC_VALUE_OUTPUT))
            st = gather_in_order(g, n, changed);
    }
    ampc_uses uses;
    if (st == AMPC_OK && (st = ampc_pass_uses(g, &uses)) == AMPC_OK) {
        for (int32_t i = 0; st == AMPC_OK && i < g->n_nodes; i++) {
            ampc_node *n = g->nodes[i];
            if (!n->dead && is_shape_view(n->op) && n->n_inputs >= 1 && n->inputs[0])
                st = unary_past_view(g, n, &uses, changed);
            else if (!n->dead && n->op == AMPC_OP_CONCAT)
                st = slices_as_gather(g, n, &uses, changed);
        }
        ampc_pass_uses_free(&uses);
    }
    if (st != AMPC_OK) return st == AMPC_E_OOM ? AMPC_FAIL(g, NULL, st, "out of host memory") : st;
    /* Expands to their input's own shape, Concats of one non-empty input, Pads by nothing and
     * Slices of everything, after the rewrites above added their constants: the map covers
     * every value */
    ampc_value **map = calloc((size_t)g->n_values + 1, sizeof *map);
    if (!map) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    bool any = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        ampc_value *x0 = restated(n);
        if (!x0) continue;
        ampc_value *x = map[x0->id] ? map[x0->id] : x0;
        ampc_value *y = n->outputs[0];
        if ((y->flags & AMPC_VALUE_OUTPUT) || x->dtype != y->dtype || !ampc_shape_eq(&x->shape, &y->shape))
            continue;
        map[y->id] = x;
        ampc_ir_node_remove(g, n);
        any = true;
    }
    if (any) ampc_ir_graph_replace_uses(g, map), *changed = true;
    free(map);
    return AMPC_OK;
}
