/*
 * fold_transpose.c — a Transpose of a Transpose is one Transpose, or none:
 *
 *   Transpose(Transpose(x, p1), p2)  =  Transpose(x, c)   with c[k] = p1[p2[k]]
 *
 * and when c is the identity the outer node's readers read x itself. The layout pass makes this
 * pattern wherever a model permutes a convolution's output to channels last itself: the
 * convolution runs channels last, layout transposes its output back to the model's NCHW value,
 * and the model's Permute(0, 2, 3, 1) (ConvNeXt's blocks before their LayerNorm) transposes it
 * again; the two cancel and neither runs. The inner Transpose stays for its other readers (dce
 * removes it when none is left). A graph output keeps a node of its own: a cancelling pair's
 * second Transpose stays there.
 */
#include "passes.h"
#include "ir/movement.h"

#include <stdlib.h>

ampc_status ampc_pass_fold_transpose(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    *changed = false;
    ampc_value **map = calloc((size_t)g->n_values + 1, sizeof *map);
    ampc_uses uses;
    if (!map || ampc_pass_uses(g, &uses) != AMPC_OK) {
        free(map);
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    }
    ampc_status st = AMPC_OK;
    bool mapped = false;
    for (int32_t i = 0; st == AMPC_OK && i < g->n_nodes; i++) {
        ampc_node *t2 = g->nodes[i];
        if (t2->dead || t2->op != AMPC_OP_TRANSPOSE || !t2->inputs[0]) continue;
        ampc_node *t1 = t2->inputs[0]->producer;
        ampc_value *y = t2->outputs[0];
        if (!t1 || t1->dead || t1->op != AMPC_OP_TRANSPOSE) continue;
        ampc_value *x = map[t1->inputs[0]->id] ? map[t1->inputs[0]->id] : t1->inputs[0];
        const int32_t r = x->shape.rank;
        int64_t p1[AMPC_MAX_RANK], p2[AMPC_MAX_RANK], c[AMPC_MAX_RANK];
        if (r < 1 || !ampc_transpose_perm(t1, r, p1) || !ampc_transpose_perm(t2, r, p2)) continue;
        bool identity = true;
        for (int32_t k = 0; k < r; k++) c[k] = p1[p2[k]], identity &= c[k] == k;
        if (identity && (y->flags & AMPC_VALUE_OUTPUT)) continue; /* the output keeps its node */
        *changed = true;
        if (identity) {
            map[y->id] = x;
            ampc_ir_node_remove(g, t2);
            mapped = true;
            continue;
        }
        int64_t *perm = ampc_ir_alloc(g, (size_t)r * sizeof *perm); /* the attribute's ints */
        if (!perm) {
            st = AMPC_FAIL(g, t2, AMPC_E_OOM, "out of host memory");
            break;
        }
        for (int32_t k = 0; k < r; k++) perm[k] = c[k];
        ampc_attr a = ampc_transpose_perm_attr(perm, r);
        st = ampc_pass_rewrite(g, t2, AMPC_OP_TRANSPOSE, t2->name, &x, 1, &a, 1, &uses);
    }
    ampc_pass_uses_free(&uses);
    if (mapped) ampc_ir_graph_replace_uses(g, map);
    free(map);
    if (*changed) ampc_ir_graph_compact(g);
    return st;
}
