/*
 * partition_heads.c — tensor parallelism for attention: a block split over the ranks by heads.
 *
 * The block is the attention half of a transformer layer as the exporters write it, before
 * fuse-attention (which then fuses each rank's heads on its own):
 *
 *   Q, K, V = x @ Wq [+ bq], x @ Wk [+ bk], x @ Wv [+ bv]    W* [E, hid] constants
 *   heads split by Reshape [.., hid] -> [.., H, D] and Transposes, scores, scale, mask,
 *   softmax, the product with V, heads merged back by Transpose and Reshape to [.., hid]
 *   y = ctx @ Wo [+ bo] [+ residual]                          Wo [hid, N] constant
 *
 * Every op between the projections and Wo works on each head alone, so with R ranks and H a
 * multiple of R, rank r takes heads [r H/R, (r+1) H/R): columns [r hid/R, (r+1) hid/R) of Wq,
 * Wk, Wv and their biases (column-parallel), its heads' attention, and the same rows of Wo
 * (row-parallel), giving a partial product whose sum over the ranks is y. One ampc.AllReduce
 * adds them; bo and the residual go onto rank 0's partial first, as in an MLP pair
 * (partition.c, stage 2).
 *
 * Rather than match one exporter's spelling, the pass follows where the heads are:
 *   1. collect: from Wo's input back through the ops attention is made of (MatMul, Transpose,
 *      Reshape, softmaxes, elementwise) to the projections: MatMuls by a constant [E, hid].
 *   2. classify, in graph order: each value computed from a projection is a head value with a
 *      head axis, along which the H heads are the outermost split (head = index / (size / H));
 *      the rest (the mask and its arithmetic) is replicated. Each op must keep the heads apart:
 *      a Transpose moves the axis; a Reshape keeps the product of the dims before it (the first
 *      Reshape that splits a projection's axis names H: [.., hid] -> [.., H, D]); a MatMul of
 *      two head values batches over it; a softmax normalises along another axis; an elementwise
 *      op's other operand is a head value on the same axis, broadcasts along it, or is a
 *      constant of that size (a bias: sliced per rank). Wo reads the heads on its K axis.
 *   3. check: H is known and a multiple of R, every head value is read only inside the block
 *      and is no graph output.
 *   4. rewrite: per rank, a copy of every head node (rank = r) over its slice: projection
 *      weights and biases sliced by columns, Reshape targets rewritten for H/R heads, Wo sliced
 *      by rows; rank 0 takes the tail; one all-reduce writes the block's output.
 * A block that has a softmax but cannot split stays whole, its reason in the report's
 * partition_blocks.
 */
#include "partition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_NODES = 64 };

typedef struct head_block {
    ampc_node *wo;
    ampc_node *node[MAX_NODES]; /* stage 1's nodes, then in graph order */
    int32_t n;
    int8_t axis[MAX_NODES];     /* the head axis of node i's output; -1: replicated */
    int8_t slice[MAX_NODES][2]; /* the axis along which input j (a constant) is sliced; -1 */
    int64_t heads;              /* H; 0 until a Reshape names it */
    int32_t n_proj;
    bool softmax;               /* stage 1 found one: the block is attention */
    ampc_part_tail tail;
    char why[240];
} head_block;

static bool fail(head_block *b, const ampc_node *n, const char *what) {
    snprintf(b->why, sizeof b->why, "%s '%s' %s", ampc_op_get(n->op)->onnx, n->name, what);
    return false;
}

static bool is_projection(const ampc_node *p, int64_t hid) {
    return p->op == AMPC_OP_MATMUL && ampc_part_const_matrix(p->inputs[1]) &&
           !p->inputs[0]->data && p->inputs[1]->shape.dims[1] == hid &&
           p->outputs[0]->shape.rank >= 2;
}

static bool is_softmax(ampc_opcode op) {
    return op == AMPC_OP_SOFTMAX || op == AMPC_OP_LOG_SOFTMAX || op == AMPC_OP_SAFE_SOFTMAX;
}

/* The ops stage 1 walks through: what attention is made of. */
static bool walkable(const ampc_node *p) {
    if (p->n_outputs != 1 || ampc_node_rank(p) >= 0) return false;
    if (p->op == AMPC_OP_MATMUL || p->op == AMPC_OP_TRANSPOSE || p->op == AMPC_OP_RESHAPE ||
        is_softmax(p->op))
        return true;
    return ampc_op_has(p->op, T_ELEMWISE) &&
           (p->n_inputs == 1 || (p->n_inputs == 2 && ampc_op_has(p->op, T_BCAST)));
}

static bool holds(const head_block *b, const ampc_node *p) {
    for (int32_t i = 0; i < b->n; i++)
        if (b->node[i] == p) return true;
    return false;
}

/* The index of the node writing head value v, or -1 when v is replicated. */
static int32_t head_of(const head_block *b, const ampc_value *v) {
    for (int32_t i = 0; v && i < b->n; i++)
        if (b->node[i] == v->producer) return b->axis[i] >= 0 ? i : -1;
    return -1;
}

static int cmp_id(const void *a, const void *b) {
    return (*(ampc_node *const *)a)->id - (*(ampc_node *const *)b)->id;
}

/* 1. From Wo's input back to the projections. */
static bool collect(head_block *b) {
    const int64_t hid = b->wo->inputs[1]->shape.dims[0];
    ampc_value *stack[2 * MAX_NODES + 2];
    int32_t top = 0;
    stack[top++] = b->wo->inputs[0];
    while (top) {
        ampc_value *v = stack[--top];
        ampc_node *p = v->producer;
        if (!p || v->data || p->dead || holds(b, p)) continue;
        const bool proj = is_projection(p, hid);
        if (!proj && !walkable(p)) continue;
        if (b->n == MAX_NODES) return fail(b, b->wo, "has more than 64 nodes before it");
        b->node[b->n++] = p;
        b->softmax |= is_softmax(p->op);
        if (proj) continue;
        for (int32_t i = 0; i < (p->op == AMPC_OP_RESHAPE ? 1 : p->n_inputs); i++)
            if (p->inputs[i]) stack[top++] = p->inputs[i];
    }
    qsort(b->node, (size_t)b->n, sizeof *b->node, cmp_id);
    return true;
}

static int64_t prod(const ampc_shape *s, int32_t from, int32_t to) {
    int64_t p = 1;
    for (int32_t i = from; i < to; i++) p *= s->dims[i];
    return p;
}

/* A Reshape of a head value with axis a: the output axis holding the heads, or -1. The dims
 * before the axis keep their product P; the output's axis is the first whose prefix is P (and
 * which is not a 1 before another such). The first Reshape that splits an axis names H. */
static int32_t reshape_axis(head_block *b, const ampc_node *n, int32_t a) {
    const ampc_shape *s = &n->inputs[0]->shape, *t = &n->outputs[0]->shape;
    const int64_t P = prod(s, 0, a);
    int32_t to = -1;
    for (int32_t i = 0; i < t->rank; i++)
        if (prod(t, 0, i) == P && (to < 0 || t->dims[to] == 1)) to = i;
    if (to < 0) return -1;
    if (!b->heads && prod(t, to + 1, t->rank) > prod(s, a + 1, s->rank)) b->heads = t->dims[to];
    return b->heads && t->dims[to] % b->heads ? -1 : to;
}

/* An elementwise op with one head operand (axis a of input h): the other operand broadcasts
 * along the output's head axis or, being a constant of that size, is sliced. */
static bool through_elementwise(head_block *b, int32_t i, const int32_t in_axis[2]) {
    const ampc_node *n = b->node[i];
    const int32_t m = n->outputs[0]->shape.rank;
    const int32_t h = in_axis[0] >= 0 ? 0 : 1;
    const ampc_value *x = n->inputs[h];
    const int32_t out = in_axis[h] + (m - x->shape.rank);
    if (n->outputs[0]->shape.dims[out] != x->shape.dims[in_axis[h]])
        return fail(b, n, "broadcasts the heads");
    b->axis[i] = (int8_t)out;
    if (n->n_inputs == 1) return true;
    const ampc_value *o = n->inputs[1 - h];
    const int32_t ao = out - (m - o->shape.rank);
    if (in_axis[1 - h] >= 0) {
        if (in_axis[1 - h] != ao) return fail(b, n, "has its operands' heads on different axes");
        return true;
    }
    if (ao < 0 || o->shape.dims[ao] == 1) return true;
    if (!o->data) {
        snprintf(b->why, sizeof b->why, "%s '%s' reads '%s', which differs per head and is no "
                 "constant", ampc_op_get(n->op)->onnx, n->name, o->name);
        return false;
    }
    b->slice[i][1 - h] = (int8_t)ao;
    return true;
}

/* Node i's head axis from its inputs' (stage 2); false with the reason when it mixes heads. */
static bool through(head_block *b, int32_t i, const int32_t in_axis[2]) {
    const ampc_node *n = b->node[i];
    const int32_t a = in_axis[0];
    if (n->op == AMPC_OP_TRANSPOSE) {
        int64_t perm[AMPC_MAX_RANK];
        const int32_t r = n->outputs[0]->shape.rank;
        if (!ampc_transpose_perm(n, r, perm)) return false;
        for (int32_t j = 0; j < r; j++)
            if (perm[j] == a) b->axis[i] = (int8_t)j;
        return true;
    }
    if (n->op == AMPC_OP_RESHAPE) {
        const int32_t to = reshape_axis(b, n, a);
        if (to < 0) return fail(b, n, "mixes the heads with other dims");
        b->axis[i] = (int8_t)to;
        return true;
    }
    if (n->op == AMPC_OP_MATMUL) {
        const int32_t r = n->outputs[0]->shape.rank;
        if (in_axis[0] < 0 || in_axis[1] < 0 || n->inputs[0]->shape.rank != r ||
            n->inputs[1]->shape.rank != r)
            return fail(b, n, "reads the heads of one operand only");
        if (in_axis[0] != in_axis[1] || a >= r - 2)
            return fail(b, n, "does not batch over the heads");
        b->axis[i] = (int8_t)a;
        return true;
    }
    if (is_softmax(n->op)) {
        const int64_t k = ampc_axis_of(n, n->outputs[0]->shape.rank);
        if (k == a) return fail(b, n, "normalises across the heads");
        b->axis[i] = (int8_t)a;
        return true;
    }
    return through_elementwise(b, i, in_axis);
}

/* 2. and 3.: the head axis of every node, H, the readers. */
static bool classify(head_block *b, const ampc_uses *u, int32_t ranks) {
    const int64_t hid = b->wo->inputs[1]->shape.dims[0];
    for (int32_t i = 0; i < b->n; i++) {
        ampc_node *n = b->node[i];
        b->axis[i] = -1;
        b->slice[i][0] = b->slice[i][1] = -1;
        if (is_projection(n, hid)) {
            if (head_of(b, n->inputs[0]) >= 0) return fail(b, n, "projects the heads again");
            b->axis[i] = (int8_t)(n->outputs[0]->shape.rank - 1);
            b->n_proj++;
            continue;
        }
        int32_t in_axis[2] = {-1, -1};
        bool any = false;
        for (int32_t j = 0; j < n->n_inputs && j < 2; j++) {
            const int32_t k = n->op == AMPC_OP_RESHAPE && j == 1 ? -1 : head_of(b, n->inputs[j]);
            in_axis[j] = k >= 0 ? b->axis[k] : -1;
            any |= k >= 0;
        }
        if (!any) continue; /* replicated: the mask and its arithmetic */
        if (in_axis[0] < 0 && n->op != AMPC_OP_MATMUL && !ampc_op_has(n->op, T_ELEMWISE))
            return fail(b, n, "reads the heads in an unexpected place");
        if (!through(b, i, in_axis)) return false;
    }
    const int32_t c = head_of(b, b->wo->inputs[0]);
    if (c < 0 || b->axis[c] != b->wo->inputs[0]->shape.rank - 1)
        return fail(b, b->wo, "does not read the heads on its rows");
    if (!b->heads) return fail(b, b->wo, "reads values whose heads no Reshape names");
    if (b->heads % ranks) {
        snprintf(b->why, sizeof b->why, "%lld heads are not a multiple of %d ranks",
                 (long long)b->heads, ranks);
        return false;
    }
    for (int32_t i = 0; i < b->n; i++) {
        if (b->axis[i] < 0) continue;
        const ampc_value *v = b->node[i]->outputs[0];
        if (v->shape.dims[b->axis[i]] % b->heads)
            return fail(b, b->node[i], "holds a head axis that is not a multiple of the heads");
        int32_t reads = 0;
        for (int32_t k = 0; k < b->n; k++)
            for (int32_t j = 0; b->axis[k] >= 0 && j < b->node[k]->n_inputs; j++)
                reads += b->node[k]->inputs[j] == v;
        reads += b->wo->inputs[0] == v;
        if ((v->flags & AMPC_VALUE_OUTPUT) || reads != u->count[v->id]) {
            snprintf(b->why, sizeof b->why, "'%s' (inside the block) is also read outside it or "
                     "is a graph output", v->name);
            return false;
        }
    }
    return true;
}

/* Rank r's input j of node i: its own head value, a slice of a constant, a Reshape target for
 * H/R heads, or the replicated value itself. */
static ampc_value *rank_input(ampc_graph *g, const head_block *b, ampc_value *const *mine,
                              int32_t i, int32_t j, int32_t r, int32_t ranks) {
    const ampc_node *n = b->node[i];
    ampc_value *v = n->inputs[j];
    const int32_t k = head_of(b, v);
    if (k >= 0) return mine[k];
    if (n->op == AMPC_OP_RESHAPE && j == 1) {
        const ampc_shape *t = &n->outputs[0]->shape;
        int64_t dims[AMPC_MAX_RANK];
        for (int32_t d = 0; d < t->rank; d++) dims[d] = t->dims[d];
        dims[b->axis[i]] /= ranks;
        const ampc_shape s = {.rank = 1, .dims = {t->rank}};
        char name[160];
        snprintf(name, sizeof name, "%.140s_rank%d", v->name, r);
        return ampc_ir_const_new(g, name, AMPC_DTYPE_I64, &s, dims);
    }
    const int32_t axis = n->op == AMPC_OP_MATMUL && j == 1 ? 1 : b->slice[i][j];
    if (axis < 0) return v;
    const int64_t len = v->shape.dims[axis] / ranks;
    return ampc_part_slice(g, v, axis, r * len, len, r);
}

/* 4. Each rank's copy of the block, the tail on rank 0, the all-reduce. */
static ampc_status rewrite(ampc_graph *g, head_block *b, int32_t ranks) {
    ampc_value *mine[MAX_NODES] = {0};
    ampc_value **partial = ampc_ir_alloc(g, (size_t)ranks * sizeof *partial);
    if (!partial) return AMPC_E_OOM;
    const ampc_value *wo = b->wo->inputs[1];
    const int64_t rows = wo->shape.dims[0] / ranks;
    for (int32_t r = 0; r < ranks; r++) {
        for (int32_t i = 0; i < b->n; i++) {
            if (b->axis[i] < 0) continue;
            ampc_value *ins[2] = {NULL, NULL};
            for (int32_t j = 0; j < b->node[i]->n_inputs; j++)
                if (!(ins[j] = rank_input(g, b, mine, i, j, r, ranks))) return ampc_graph_status(g);
            mine[i] = ampc_part_rank_node(g, b->node[i], b->node[i]->op, ins,
                                          b->node[i]->n_inputs, r, true);
            if (!mine[i]) return ampc_graph_status(g);
        }
        ampc_value *ins[2] = {mine[head_of(b, b->wo->inputs[0])],
                              ampc_part_slice(g, wo, 0, r * rows, rows, r)};
        if (!ins[1]) return ampc_graph_status(g);
        ampc_value *p = ampc_part_rank_node(g, b->wo, AMPC_OP_MATMUL, ins, 2, r, rows % 4 == 0);
        if (!(partial[r] = ampc_part_tail_apply(g, &b->tail, p, r))) return ampc_graph_status(g);
    }
    ampc_status st = ampc_part_all_reduce(g, b->wo, &b->tail, partial, ranks);
    for (int32_t i = 0; i < b->n; i++)
        if (b->axis[i] >= 0) ampc_ir_node_remove(g, b->node[i]);
    return st;
}

ampc_status ampc_part_split_heads(ampc_graph *g, const ampc_pass_ctx *cx, const ampc_uses *u,
                                  ampc_node *wo, int32_t n_old, bool *split) {
    const int32_t ranks = ampc_pass_opt(cx)->gpus;
    ampc_pipeline_report *rep = ampc_pass_report(cx);
    *split = false;
    if (wo->op != AMPC_OP_MATMUL || !ampc_part_const_matrix(wo->inputs[1]) ||
        wo->inputs[0]->data || ampc_node_rank(wo) >= 0)
        return AMPC_OK;
    head_block *b = ampc_ir_alloc(g, sizeof *b); /* a few KB; the arena is freed with the graph */
    if (!b) return AMPC_E_OOM;
    memset(b, 0, sizeof *b);
    b->wo = wo;
    bool ok = collect(b) && classify(b, u, ranks);
    if (!b->softmax) return AMPC_OK; /* not attention: an MLP pair's second matmul, say */
    if (!ok) {
        ampc_part_note(g, rep, wo, "attention", false, "%s", b->why);
        return AMPC_OK;
    }
    ampc_part_find_tail(u, wo, b->node[0]->id, n_old, &b->tail);
    ampc_status st = rewrite(g, b, ranks);
    if (st != AMPC_OK) return st;
    *split = true;
    const int64_t h = b->heads / ranks;
    ampc_part_note(g, rep, wo, "attention", true, "%lld heads: rank r takes heads [r*%lld, "
                   "(r+1)*%lld) of %d projections and the same rows of '%s'; %d Adds on rank 0",
                   (long long)b->heads, (long long)h, (long long)h, b->n_proj, wo->inputs[1]->name,
                   b->tail.n);
    return AMPC_OK;
}
