/*
 * uses.c — what the fusion passes share: how many times each value is used and, for a value
 * used once, the node using it; and the in-place rewrite of a pattern's last node into the fused
 * op; the permutation of a Transpose; a value seen through the re-indexing ops before it as a
 * strided view of a tensor in memory; a node replaced by the nodes a pass built for it.
 */
#include "passes.h"

#include "ir/ref/ref.h"

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
    const ampc_attr *rank = ampc_node_rank(n) >= 0 ? ampc_ir_attr_find(n, AMPC_ATTR_RANK) : NULL;
    for (int32_t i = 0; rank && i < n_attrs; i++)
        if (!strcmp(attrs[i].name, AMPC_ATTR_RANK)) rank = NULL;
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

/* ---- strided views ---------------------------------------------------------------------------- */

void ampc_pass_view_init(ampc_pass_view *v, ampc_value *x) {
    v->src = x;
    v->off = 0;
    ampc_ref_strides(&x->shape, v->st);
}

/* Re-expresses the view's offsets into cur (row-major over cur's dims) as offsets into the tensor
 * below it, in which cur's dim j steps by t[j] and cur's element 0 sits at base. Each dim of the
 * view (extent dims[i] > 1) must step by a whole number m of one of cur's dims, and the offset's
 * digit in that dim plus the reach of every view dim stepping along it must stay inside it: then
 * the digits of every element's offset are its coordinates in cur, which map exactly. */
static bool redigit(ampc_pass_view *v, int32_t r, const int64_t *dims, const ampc_shape *cur,
                    const int64_t *t, int64_t base) {
    const int32_t cr = cur->rank;
    int64_t dense[AMPC_MAX_RANK], digit[AMPC_MAX_RANK], reach[AMPC_MAX_RANK], st[AMPC_MAX_RANK];
    if (!ampc_shape_numel(cur)) return false;
    ampc_ref_strides(cur, dense);
    int64_t rest = v->off;
    for (int32_t j = 0; j < cr; j++) {
        digit[j] = reach[j] = rest / dense[j];
        rest %= dense[j];
    }
    for (int32_t i = 0; i < r; i++) {
        st[i] = 0;
        const int64_t s = v->st[i];
        if (dims[i] == 1 || s == 0) continue; /* one element, or the same one over and over */
        int32_t j = 0;
        while (j < cr && (cur->dims[j] == 1 || dense[j] > s)) j++;
        if (s <= 0 || j == cr || s % dense[j]) return false;
        reach[j] += s / dense[j] * (dims[i] - 1);
        st[i] = s / dense[j] * t[j];
    }
    int64_t off = base;
    for (int32_t j = 0; j < cr; j++) {
        if (reach[j] >= cur->dims[j]) return false;
        off += digit[j] * t[j];
    }
    v->off = off;
    memcpy(v->st, st, (size_t)r * sizeof *st);
    return true;
}

/* The constant single index of Gather p, counted from the end when negative; false when p's
 * indices are not one constant entry inside the axis of `dim` entries. */
static bool one_index(const ampc_node *p, int64_t dim, int64_t *k) {
    const ampc_value *ix = p->inputs[1];
    if (!ix->data || (ix->flags & AMPC_VALUE_INPUT) || ampc_ir_numel(ix) != 1) return false;
    *k = ampc_ref_load_i64(ix->data, ix->dtype, 0);
    if (*k < 0) *k += dim;
    return *k >= 0 && *k < dim;
}

bool ampc_pass_view_step(ampc_pass_view *v, int32_t r, const int64_t *dims) {
    const ampc_value *cur = v->src;
    ampc_node *p = cur->producer;
    if (!p || p->dead || p->n_inputs < 1 || !p->inputs[0] || p->inputs[0]->dtype != cur->dtype)
        return false;
    ampc_value *in = p->inputs[0];
    const int32_t ir = in->shape.rank, cr = cur->shape.rank;
    int64_t din[AMPC_MAX_RANK], t[AMPC_MAX_RANK], base = 0;
    ampc_ref_strides(&in->shape, din);
    if (ampc_op_has(p->op, T_VIEW)) { /* the same elements in the same order */
        if (ampc_ir_numel(in) != ampc_ir_numel(cur)) return false;
        v->src = in;
        return true;
    }
    if (p->op == AMPC_OP_TRANSPOSE) { /* cur's dim j is in's dim perm[j] */
        int64_t perm[AMPC_MAX_RANK];
        if (cr != ir || !ampc_transpose_perm(p, ir, perm)) return false;
        for (int32_t j = 0; j < cr; j++) t[j] = din[perm[j]];
    } else if (p->op == AMPC_OP_GATHER) { /* in's axis a, at index k, becomes cur's index dims */
        int64_t a = ampc_axis_of(p, ir), k;
        const int32_t q = p->inputs[1]->shape.rank; /* all 1s: one entry */
        if (a < 0 || a >= ir || cr != ir - 1 + q || !one_index(p, in->shape.dims[a], &k))
            return false;
        for (int32_t j = 0; j < cr; j++) t[j] = j < a ? din[j] : j < a + q ? 0 : din[j - q + 1];
        base = k * din[a];
    } else if (p->op == AMPC_OP_EXPAND) { /* numpy broadcast: the dims in grows step 0 */
        if (cr < ir) return false;
        for (int32_t j = 0; j < cr; j++) {
            const int32_t k = j - (cr - ir);
            t[j] = k >= 0 && in->shape.dims[k] == cur->shape.dims[j] ? din[k] : 0;
        }
    } else if (p->op == AMPC_OP_SPLIT) { /* output o starts where the outputs before it end */
        int64_t a = ampc_axis_of(p, ir), start = 0;
        if (a < 0 || a >= ir || cr != ir) return false;
        int32_t o = 0;
        while (o < p->n_outputs && p->outputs[o] != cur) start += p->outputs[o++]->shape.dims[a];
        for (int32_t j = 0; j < cr; j++) t[j] = din[j];
        base = start * din[a];
    } else {
        return false;
    }
    if (!redigit(v, r, dims, &cur->shape, t, base)) return false;
    v->src = in;
    return true;
}

/* ---- a node replaced by nodes ----------------------------------------------------------------- */

ampc_value *ampc_pass_node1(ampc_graph *g, ampc_opcode op, const char *name,
                            ampc_value *const *in, int32_t n_in, const ampc_attr *at,
                            int32_t n_at) {
    for (int32_t i = 0; i < n_in; i++)
        if (!in[i]) return NULL; /* a value the caller could not make */
    ampc_node *n = NULL;
    return ampc_ir_node_build(g, op, name, in, n_in, at, n_at, 1, NULL, &n) == AMPC_OK
               ? n->outputs[0]
               : NULL;
}

ampc_value *ampc_pass_binary(ampc_graph *g, ampc_opcode op, const char *name, ampc_value *a,
                             ampc_value *b) {
    ampc_value *in[2] = {a, b};
    return ampc_pass_node1(g, op, name, in, 2, NULL, 0);
}

ampc_value *ampc_pass_reshape(ampc_graph *g, const char *name, ampc_value *x, int32_t rank,
                              const int64_t *dims) {
    const int64_t r = rank;
    return ampc_pass_binary(g, AMPC_OP_RESHAPE, name, x, ampc_pass_const_i64s(g, 1, &r, dims));
}

ampc_value *ampc_pass_slice(ampc_graph *g, const char *name, ampc_value *x, int64_t axis,
                            int64_t from, int64_t to) {
    const int64_t one = 1;
    ampc_value *in[4] = {x, ampc_pass_const_i64s(g, 1, &one, &from),
                         ampc_pass_const_i64s(g, 1, &one, &to),
                         ampc_pass_const_i64s(g, 1, &one, &axis)};
    return ampc_pass_node1(g, AMPC_OP_SLICE, name, in, 4, NULL, 0);
}

ampc_value *ampc_pass_const_i64s(ampc_graph *g, int32_t rank, const int64_t *dims,
                                 const int64_t *v) {
    ampc_shape s = {.rank = rank};
    for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
    return ampc_ir_const_new(g, NULL, AMPC_DTYPE_I64, &s, v);
}

ampc_status ampc_pass_replace_each(ampc_graph *g, bool (*match)(const ampc_node *n),
                                   ampc_pass_build_fn build, const char *what, bool *changed) {
    *changed = false;
    bool undone = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (n->dead || !match(n)) continue;
        if (n->n_outputs > AMPC_PASS_MAX_OUTPUTS) continue;
        const int32_t first_new = g->n_nodes, diags = g->diag.n;
        ampc_value *out[AMPC_PASS_MAX_OUTPUTS] = {NULL};
        ampc_status st = build(g, n, out);
        if (st == AMPC_OK) st = ampc_pass_replace_node(g, n, out, first_new);
        else ampc_pass_undo(g, first_new, diags), undone = true; /* copies and diagnostics go */
        if (st == AMPC_OK) *changed = true;
        else if (st != AMPC_E_UNSUPPORTED) {
            ampc_ir_graph_compact(g);
            return AMPC_FAIL(g, n, st, "%s failed: %s", what, ampc_status_str(st));
        }
    }
    /* once the sweep is over: compacting inside it would move the nodes it walks and those a
     * build appended (first_new) */
    if (*changed || undone) ampc_ir_graph_compact(g);
    return AMPC_OK;
}

void ampc_pass_undo(ampc_graph *g, int32_t first_new, int32_t diags) {
    for (int32_t i = first_new; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead) ampc_ir_node_remove(g, g->nodes[i]);
    ampc_diag_truncate(&g->diag, diags);
}

ampc_status ampc_pass_replace_node(ampc_graph *g, ampc_node *n, ampc_value *const *out,
                                   int32_t first_new) {
    ampc_value *results[AMPC_PASS_MAX_OUTPUTS];
    if (n->n_outputs > AMPC_PASS_MAX_OUTPUTS) return AMPC_E_UNSUPPORTED;
    for (int32_t i = 0; i < n->n_outputs; i++) results[i] = n->outputs[i];
    ampc_ir_node_remove(g, n);
    for (int32_t i = 0; i < n->n_outputs; i++) {
        if (!results[i] || !out[i]) continue;
        if (!ampc_ir_node_append(g, AMPC_OP_IDENTITY, n->name, &out[i], 1, NULL, 0, &results[i], 1))
            return AMPC_E_OOM;
    }
    ampc_ir_graph_settle(g, first_new);
    return AMPC_OK;
}
