/*
 * simplify.c — nodes that only restate their input become what they are:
 *   - an Expand to its input's own shape is its input: its readers read the input instead;
 *   - a Gather whose constant indices list the gathered axis in order (0, 1, ..., n - 1) gives
 *     its input's elements in their order, so it is a Reshape of the input (a view: no step).
 * Exporters write both around attention masks: transformers' padding mask is gathered over an
 * arange and expanded to the shape it already has, so each was a kernel or a copy of its own,
 * and the expanded mask could not join the chain of elementwise ops that reads it
 * (fuse-elementwise). A graph output is left as it is (the interface keeps its names).
 */
#include "passes.h"

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
    int64_t axis = ampc_ir_attr_int(g, n, "axis", 0);
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

ampc_status ampc_pass_simplify(ampc_graph *g, bool *changed) {
    *changed = false;
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; st == AMPC_OK && i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (!n->dead && n->op == AMPC_OP_GATHER && n->n_inputs == 2 && n->inputs[0] &&
            !(n->outputs[0]->flags & AMPC_VALUE_OUTPUT))
            st = gather_in_order(g, n, changed);
    }
    if (st != AMPC_OK) return st == AMPC_E_OOM ? AMPC_FAIL(g, NULL, st, "out of host memory") : st;
    /* Expands to their input's own shape, after the rewrites above added their constants: the
     * map covers every value */
    ampc_value **map = calloc((size_t)g->n_values + 1, sizeof *map);
    if (!map) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    bool any = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (n->dead || n->op != AMPC_OP_EXPAND || !n->inputs[0]) continue;
        ampc_value *x = map[n->inputs[0]->id] ? map[n->inputs[0]->id] : n->inputs[0];
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
