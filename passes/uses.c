/*
 * uses.c — what the fusion passes share: how many times each value is used and, for a value
 * used once, the node using it.
 */
#include "passes.h"

#include <stdlib.h>

ampc_status ampc_pass_uses(const ampc_graph *g, ampc_uses *u) {
    u->count = calloc((size_t)g->n_values + 1, sizeof *u->count);
    u->user = calloc((size_t)g->n_values + 1, sizeof *u->user);
    if (!u->count || !u->user) {
        ampc_pass_uses_free(u);
        return AMPC_E_OOM;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int32_t k = 0; k < n->n_inputs; k++)
            if (n->inputs[k]) u->count[n->inputs[k]->id]++, u->user[n->inputs[k]->id] = n;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) u->count[g->outputs[i]->id] += 2;
    return AMPC_OK;
}

void ampc_pass_uses_free(ampc_uses *u) {
    free(u->count);
    free(u->user);
    u->count = NULL;
    u->user = NULL;
}

ampc_node *ampc_pass_only_user(const ampc_uses *u, const ampc_value *v) {
    ampc_node *n = u->count[v->id] == 1 ? u->user[v->id] : NULL;
    return n && !n->dead ? n : NULL;
}

void ampc_pass_uses_moved(ampc_uses *u, ampc_node *n) {
    for (int32_t k = 0; k < n->n_inputs; k++)
        if (n->inputs[k]) u->user[n->inputs[k]->id] = n;
}
