/*
 * uses.c — what the fusion passes share: how many times each value is used and, for a value
 * used once, the node using it; and the in-place rewrite of a pattern's last node into the fused
 * op; the permutation of a Transpose.
 */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

ampc_status ampc_pass_uses(const ampc_graph *g, ampc_uses *u) {
    u->count = calloc((size_t)g->n_values + 1, sizeof *u->count);
    u->user = calloc((size_t)g->n_values + 1, sizeof *u->user);
    if (!u->count || !u->user) {
        ampc_pass_uses_free(u);
        return AMPC_E_OOM;
    }
    u->n = g->n_values;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (n->dead) continue;
        for (int32_t k = 0; k < n->n_inputs; k++)
            if (n->inputs[k]) u->count[n->inputs[k]->id]++, u->user[n->inputs[k]->id] = n;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) u->count[g->outputs[i]->id] += 2;
    return AMPC_OK;
}

ampc_status ampc_pass_uses_grow(const ampc_graph *g, ampc_uses *u) {
    if (g->n_values <= u->n) return AMPC_OK;
    int32_t *count = realloc(u->count, ((size_t)g->n_values + 1) * sizeof *count);
    if (count) u->count = count;
    ampc_node **user = count ? realloc(u->user, ((size_t)g->n_values + 1) * sizeof *user) : NULL;
    if (!user) return AMPC_E_OOM;
    u->user = user;
    for (int32_t i = u->n; i <= g->n_values; i++) u->count[i] = 0, u->user[i] = NULL;
    u->n = g->n_values;
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

ampc_status ampc_pass_rewrite(ampc_graph *g, ampc_node *n, ampc_opcode op, const char *name,
                              ampc_value *const *in, int32_t n_in, const ampc_attr *attrs,
                              int32_t n_attrs, ampc_uses *u) {
    /* The GPU a partitioned node runs on (passes/partition.c) stays with the rewritten node. */
    const ampc_attr *rank = ampc_ir_attr_find(n, "rank");
    for (int32_t i = 0; rank && i < n_attrs; i++)
        if (!strcmp(attrs[i].name, "rank")) rank = NULL;
    ampc_value **ins = ampc_ir_alloc(g, (size_t)(n_in ? n_in : 1) * sizeof *ins);
    ampc_attr *as = ampc_ir_alloc(g, (size_t)(n_attrs + 1) * sizeof *as);
    if (!ins || !as) return AMPC_E_OOM;
    memcpy(ins, in, (size_t)n_in * sizeof *ins);
    if (n_attrs) memcpy(as, attrs, (size_t)n_attrs * sizeof *as);
    if (rank) as[n_attrs++] = *rank;
    n->op = op;
    n->name = name;
    n->inputs = ins;
    n->n_inputs = n_in;
    n->attrs = as;
    n->n_attrs = n_attrs;
    n->outputs[0]->producer = n;
    /* The fused node took the place of the pattern's last node, often an epilogue op that
     * followed its inputs into the low type: the fused op's own policy is the reason now. */
    if (ampc_op_get(op)->prec == PREC_LOW && n->prec_why == PREC_WHY_FOLLOW) n->prec_why = PREC_WHY_LOW;
    ampc_pass_uses_moved(u, n);
    return ampc_ir_node_infer(g, n);
}

bool ampc_pass_perm_of(const ampc_node *t, int32_t r, int64_t *perm) {
    const ampc_attr *a = ampc_ir_attr_find(t, "perm");
    if (!a) {
        for (int32_t i = 0; i < r; i++) perm[i] = r - 1 - i;
        return true;
    }
    if (a->kind != AMPC_ATTR_INTS || a->n != r) return false;
    for (int32_t i = 0; i < r; i++) perm[i] = a->ints[i];
    return true;
}
