/*
 * fuse_softmax.c — the NaN guard exporters write after attention's softmax,
 *
 *   s = Softmax(x);  y = Where(IsNaN(s), 0, s)
 *
 * (torch's scaled_dot_product_attention export: a fully masked row gives 0/0), becomes one
 * ampc.SafeSoftmax(x), whose kernel writes 0 where the softmax is NaN: one pass over the scores
 * instead of three. The softmax output must be read by exactly the IsNaN and the Where and be no
 * graph output; the IsNaN output only by the Where; the replacement a constant zero (any float
 * type, one element). The result is the same bit for bit.
 */
#include "passes.h"

#include "ir/ref/ref.h"

static bool is_zero_scalar(const ampc_value *v) {
    return v && v->data && ampc_dtype_is_float(v->dtype) && ampc_ir_numel(v) == 1 &&
           ampc_ref_load_f64(v->data, v->dtype, 0) == 0.0;
}

/* The Softmax guarded by Where node w, or NULL. */
static ampc_node *guarded_softmax(const ampc_node *w, const ampc_uses *u, ampc_node **isnan) {
    if (w->n_inputs != 3 || !is_zero_scalar(w->inputs[1])) return NULL;
    ampc_node *nan = w->inputs[0]->producer, *sm = w->inputs[2]->producer;
    if (!nan || !sm || nan->dead || sm->dead || nan->op != AMPC_OP_IS_NAN ||
        sm->op != AMPC_OP_SOFTMAX || nan->inputs[0] != sm->outputs[0])
        return NULL;
    if (u->count[sm->outputs[0]->id] != 2 || ampc_pass_only_user(u, nan->outputs[0]) != w)
        return NULL;
    *isnan = nan;
    return sm;
}

ampc_status ampc_pass_fuse_softmax(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++) {
        ampc_node *w = g->nodes[i], *nan, *sm;
        if (w->dead || w->op != AMPC_OP_WHERE || !(sm = guarded_softmax(w, &uses, &nan))) continue;
        ampc_value *x = sm->inputs[0];
        ampc_ir_node_remove(g, nan);
        ampc_ir_node_remove(g, sm);
        st = ampc_pass_rewrite(g, w, AMPC_OP_SAFE_SOFTMAX, w->name, &x, 1, sm->attrs, sm->n_attrs,
                               &uses);
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (*changed) ampc_ir_graph_compact(g);
    return st;
}
