/*
 * fold.c — constant folding: every node whose present inputs all carry data (or, for shape-only
 * ops such as Shape and Size, whose inputs merely have static shapes) is evaluated with the
 * reference evaluator and removed; its outputs become constants (no producer, data kept, names
 * unchanged), so a graph output that folds stays a graph output. Data already attached by eager
 * folding while building is reused. One sweep in topological order folds whole constant chains.
 *
 * Limits: random ops and Loop (T_NOFOLD) never fold, nor does a node whose subgraphs hold one,
 * and a node with an output above FOLD_MAX_ELEMS elements (64M: 256 MiB of f32) stays, so
 * folding cannot blow the artifact up or exhaust host memory. A node whose evaluation fails (an
 * op without a reference kernel yet, an index out of range) also stays, without a diagnostic: it
 * runs at run time, where a real error surfaces with the actual inputs. Running out of host
 * memory is the one failure that stops the pass.
 */
#include "passes.h"
#include "ir/ref/ref.h"
#include "ir/subgraph.h"

#include <stdlib.h>

enum { FOLD_MAX_ELEMS = 1 << 26 };

/* Evaluates a shape-only node whose inputs may lack data: the kernel reads shapes only. */
static ampc_status fold_shape_only(ampc_graph *g, ampc_node *n) {
    ampc_tensor tin[64], tout[64];
    const ampc_tensor *pin[64];
    ampc_tensor *pout[64];
    if (n->n_inputs > 64 || n->n_outputs > 64) return AMPC_E_UNSUPPORTED;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        tin[i] = v ? (ampc_tensor){v->dtype, v->shape, v->data} : (ampc_tensor){0};
        pin[i] = v ? &tin[i] : NULL;
    }
    for (int32_t i = 0; i < n->n_outputs; i++) {
        const ampc_value *v = n->outputs[i];
        size_t nb = ampc_ir_nbytes(v);
        tout[i] = (ampc_tensor){v->dtype, v->shape, ampc_ir_alloc(g, nb ? nb : 1)};
        if (!tout[i].data) return AMPC_E_OOM;
        pout[i] = &tout[i];
    }
    ampc_status st = ampc_op_get(n->op)->ref(g, n, pin, pout);
    for (int32_t i = 0; st == AMPC_OK && i < n->n_outputs; i++) n->outputs[i]->data = tout[i].data;
    return st;
}

/* Whether n can fold; *shape_only tells that some input is not constant but the op reads only
 * its shape. */
static bool foldable(const ampc_node *n, bool *shape_only) {
    *shape_only = false;
    if (ampc_op_has(n->op, T_NOFOLD) || !ampc_ir_node_bodies_foldable(n)) return false;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        /* A graph input's data is only a default: the caller may pass another tensor. */
        if (!v || (v->data && !(v->flags & AMPC_VALUE_INPUT))) continue;
        if (!ampc_op_has(n->op, T_SHAPEONLY)) return false;
        *shape_only = true;
    }
    for (int32_t i = 0; i < n->n_outputs; i++)
        if (ampc_ir_numel(n->outputs[i]) > FOLD_MAX_ELEMS) return false;
    return true;
}

/* Drops the diagnostics recorded since `mark` (a fold attempt that did not work out). */
static void diag_rewind(ampc_graph *g, int32_t mark) {
    for (int32_t i = mark; i < g->diag.n; i++) free(g->diag.entries[i].msg);
    g->diag.n = mark;
}

ampc_status ampc_pass_fold(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    int32_t folded = 0;
    *changed = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        bool shape_only;
        if (n->dead || !foldable(n, &shape_only)) continue;
        bool known = true; /* eager folding already computed every output */
        for (int32_t j = 0; j < n->n_outputs; j++) known &= n->outputs[j]->data != NULL;
        if (!known) {
            int32_t mark = g->diag.n;
            ampc_status st = shape_only ? fold_shape_only(g, n) : ampc_ref_fold_node(g, n);
            if (st == AMPC_E_OOM) return st;
            if (st != AMPC_OK) {
                diag_rewind(g, mark); /* outputs are untouched on failure */
                continue;
            }
        }
        ampc_ir_node_remove(g, n);
        folded++;
    }
    if (folded) ampc_ir_graph_compact(g);
    *changed = folded > 0;
    return AMPC_OK;
}
