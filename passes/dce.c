/*
 * dce.c — dead-code elimination: removes every node none of whose outputs the graph outputs
 * depend on (transitively), then compacts the graph, which also drops constants and other values
 * nothing refers to any more. One backward sweep over the topologically ordered nodes: O(nodes +
 * edges).
 */
#include "passes.h"

#include <stdlib.h>

ampc_status ampc_pass_dce(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    int32_t nodes_before = g->n_nodes, values_before = g->n_values;
    bool *needed = ampc_xcalloc((size_t)g->n_values + 1, 1); /* by value id */
    for (int32_t i = 0; i < g->n_outputs; i++) needed[g->outputs[i]->id] = true;
    for (int32_t i = g->n_nodes - 1; i >= 0; i--) {
        ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        bool live = false;
        for (int32_t j = 0; j < n->n_outputs && !live; j++) live = needed[n->outputs[j]->id];
        if (!live) {
            ampc_ir_node_remove(g, n);
            continue;
        }
        for (int32_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j]) needed[n->inputs[j]->id] = true;
    }
    free(needed);
    ampc_ir_graph_compact(g);
    *changed = g->n_nodes != nodes_before || g->n_values != values_before;
    return AMPC_OK;
}
