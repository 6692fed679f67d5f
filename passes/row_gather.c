/*
 * row_gather.c — a run of movement ops that keep the last dim moves whole rows of it, so it is
 * one Gather of rows by a constant table:
 *
 *   X -> Transpose / Gather / Reshape ... -> Y         (every op keeps the last dim C)
 *     ->   Y = Gather(Reshape(X, [RX, C]), table, axis 0)
 *
 * where the table, of Y's shape less the last dim, holds at each row of Y the row of X (of RX =
 * numel / C rows) it copies. The ops: a Transpose that leaves the last axis last, a Gather by
 * constant indices (all in range) along another axis (torch.roll's shift, a window's rows), and
 * the Reshapes, Squeezes, Unsqueezes and Flattens whose output's last dim is the input's (they
 * keep each row's index). Each op of the
 * run but the last is read by the next one only and is no graph output; a node a partitioned
 * graph placed on one GPU (docs/multi-gpu.md) is no part of a run.
 *
 * Such runs are what windowed attention writes around its windows (Swin: a cyclic shift as two
 * Gathers, then the window partition as Reshape, Transpose, Reshape; the reverse after the
 * attention): three copies become one. The run is rewritten when it copies twice or more (two
 * Transposes or Gathers), or once with a reshape after the copy and only elementwise readers:
 * a Transpose then merged by a Reshape is no strided view of the merged shape, so its reader
 * could not read it in place, and a Gather of rows can be (fuse-elementwise: a Gather heads a
 * chain). A single Transpose read by a matmul, or read in place as a view, stays as it is.
 *
 * The result is exact: every element is copied from where it was.
 */
#include "passes.h"
#include "ir/index.h"
#include "ir/movement.h"

#include "ir/ref/ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest run followed (a Swin block's: Gather, Gather, Reshape, Transpose, Reshape). */
enum { RUN_MAX = 16 };

static bool reshapes(ampc_opcode op) {
    return op == AMPC_OP_RESHAPE || op == AMPC_OP_SQUEEZE || op == AMPC_OP_UNSQUEEZE ||
           op == AMPC_OP_FLATTEN;
}

/* Whether n moves whole rows: its output's last dim is its input's, and it is one of the ops of
 * the file comment. A node placed on one GPU of a partitioned graph (its `rank`) stays. */
static bool moves_rows(const ampc_node *n) {
    if (n->dead || n->n_outputs != 1 || n->n_inputs < 1 || !n->inputs[0] || ampc_node_rank(n) >= 0)
        return false;
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int32_t r = x->shape.rank;
    if (r < 1 || y->shape.rank < 1 || y->data || !ampc_ir_numel(y) ||
        x->shape.dims[r - 1] != y->shape.dims[y->shape.rank - 1])
        return false;
    if (reshapes(n->op)) return true;
    if (n->op == AMPC_OP_TRANSPOSE) {
        int64_t perm[AMPC_MAX_RANK];
        return ampc_transpose_perm(n, r, perm) && perm[r - 1] == r - 1;
    }
    if (n->op == AMPC_OP_GATHER && n->n_inputs == 2 && n->inputs[1]) {
        const int32_t ax = ampc_axis_of(n, r);
        return ax < r - 1 && ampc_gather_const_in_range(n);
    }
    return false;
}

/* Row r of shape s (its last dim excluded) as coordinates c[0 .. rank - 2]. */
static void row_coords(const ampc_shape *s, int64_t r, int64_t *c) {
    for (int32_t d = s->rank - 2; d >= 0; d--) c[d] = r % s->dims[d], r /= s->dims[d];
}

static int64_t row_index(const ampc_shape *s, const int64_t *c) {
    int64_t r = 0;
    for (int32_t d = 0; d < s->rank - 1; d++) r = r * s->dims[d] + c[d];
    return r;
}

/* The row of n's input that row r of its output holds. */
static int64_t row_from(const ampc_node *n, int64_t r) {
    const ampc_shape *xs = &n->inputs[0]->shape, *ys = &n->outputs[0]->shape;
    int64_t c[AMPC_MAX_RANK], e[AMPC_MAX_RANK];
    if (reshapes(n->op)) return r;
    row_coords(ys, r, c);
    if (n->op == AMPC_OP_TRANSPOSE) {
        int64_t perm[AMPC_MAX_RANK];
        (void)ampc_transpose_perm(n, xs->rank, perm);
        for (int32_t d = 0; d < xs->rank - 1; d++) e[perm[d]] = c[d];
        return row_index(xs, e);
    }
    /* Gather: output coordinates (o.., j.., w..) read input (o.., indices[j], w..) */
    const ampc_value *ix = n->inputs[1];
    const int32_t ax = ampc_axis_of(n, xs->rank), ri = ix->shape.rank;
    int64_t j = 0;
    for (int32_t d = 0; d < ri; d++) j = j * ix->shape.dims[d] + c[ax + d];
    int64_t v = ampc_ref_load_i64(ix->data, ix->dtype, j);
    if (v < 0) v += xs->dims[ax];
    for (int32_t d = 0; d < ax; d++) e[d] = c[d];
    e[ax] = v;
    for (int32_t d = ax + 1; d < xs->rank - 1; d++) e[d] = c[d - 1 + ri];
    return row_index(xs, e);
}

/* Whether the run (n nodes) should become a Gather of rows (the file comment's rule). */
static bool worth_it(const ampc_uses *u, const ampc_graph *g, ampc_node *const *run, int32_t n) {
    int32_t copies = 0;
    bool reshaped = false;
    for (int32_t i = 0; i < n; i++) {
        if (!reshapes(run[i]->op)) copies++;
        else reshaped |= copies > 0;
    }
    if (copies >= 2) return true;
    const ampc_value *y = run[n - 1]->outputs[0];
    if (copies != 1 || !reshaped || (y->flags & AMPC_VALUE_OUTPUT) || !u->count[y->id]) return false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *m = g->nodes[i];
        for (int32_t k = 0; !m->dead && k < m->n_inputs; k++)
            if (m->inputs[k] == y && ampc_op_get(m->op)->lower != LOWER_ELEMENTWISE) return false;
    }
    return true;
}

/* Rewrites the run: a Reshape of its input to rows, and its last node the Gather of those rows
 * by a table of its own shape less the last dim (Gather's output: the table's shape, then C). */
static ampc_status rewrite(ampc_graph *g, ampc_uses *u, ampc_node *const *run, int32_t n) {
    ampc_node *last = run[n - 1];
    ampc_value *x = run[0]->inputs[0], *y = last->outputs[0];
    const int64_t C = y->shape.dims[y->shape.rank - 1];
    const int64_t rx = ampc_ir_numel(x) / C, ry = ampc_ir_numel(y) / C;
    const ampc_dtype it = rx <= INT32_MAX ? AMPC_DTYPE_I32 : AMPC_DTYPE_I64;
    void *table = malloc((size_t)ry * ampc_dtype_size(it) + 1);
    if (!table) return AMPC_E_OOM;
    for (int64_t r = 0; r < ry; r++) {
        int64_t at = r;
        for (int32_t i = n - 1; i >= 0; i--) at = row_from(run[i], at);
        ampc_ref_store_i64(table, it, r, at);
    }
    char name[160];
    snprintf(name, sizeof name, "%.140s_rows", last->name);
    ampc_shape ts = {.rank = y->shape.rank - 1};
    memcpy(ts.dims, y->shape.dims, (size_t)ts.rank * sizeof *ts.dims);
    ampc_value *idx = ampc_ir_const_new(g, name, it, &ts, table);
    free(table);
    const int64_t rows2[2] = {rx, C};
    const ampc_shape two = {.rank = 1, .dims = {2}};
    ampc_value *to_rows = ampc_ir_const_new(g, NULL, AMPC_DTYPE_I64, &two, rows2);
    if (!idx || !to_rows) return AMPC_E_OOM;
    ampc_node *flat = NULL;
    ampc_value *fin[2] = {x, to_rows};
    ampc_status st = ampc_ir_node_build(g, AMPC_OP_RESHAPE, name, fin, 2, NULL, 0, 1, NULL, &flat);
    if (st != AMPC_OK || (st = ampc_pass_uses_grow(g, u)) != AMPC_OK) return st;
    ampc_value *gin[2] = {flat->outputs[0], idx};
    const ampc_attr axis0 = ampc_axis_attr_make(0);
    st = ampc_pass_rewrite(g, last, AMPC_OP_GATHER, last->name, gin, 2, &axis0, 1, u);
    for (int32_t i = 0; i < n - 1; i++) ampc_ir_node_remove(g, run[i]);
    return st;
}

ampc_status ampc_pass_row_gather(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    const int32_t n_old = g->n_nodes;
    for (int32_t i = 0; i < n_old && st == AMPC_OK; i++) {
        ampc_node *first = g->nodes[i];
        if (!moves_rows(first)) continue;
        /* a run starts where its input is not another row move read by it alone */
        const ampc_node *p = first->inputs[0]->producer;
        if (p && moves_rows(p) && ampc_pass_only_user(&uses, first->inputs[0]) == first &&
            !(first->inputs[0]->flags & AMPC_VALUE_OUTPUT))
            continue;
        ampc_node *run[RUN_MAX] = {first};
        int32_t n = 1;
        for (;;) {
            const ampc_value *y = run[n - 1]->outputs[0];
            ampc_node *next = ampc_pass_only_user(&uses, y);
            if (n == RUN_MAX || !next || (y->flags & AMPC_VALUE_OUTPUT) || !moves_rows(next) ||
                next->inputs[0] != y)
                break;
            run[n++] = next;
        }
        if (!worth_it(&uses, g, run, n)) continue;
        st = rewrite(g, &uses, run, n);
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (g->n_nodes > n_old) ampc_ir_graph_settle(g, n_old);
    if (st == AMPC_E_OOM) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    bool swept;
    if (*changed && st == AMPC_OK) st = ampc_pass_dce(g, cx, &swept);
    return st;
}
