/*
 * partition.c — tensor parallelism: a pair of matmuls with constant weights split over the GPUs.
 *
 * The pattern is a transformer's MLP (and any two-layer perceptron):
 *
 *   y = act(x @ W1 + b1) @ W2        W1 [K, H], b1 [H] (optional), W2 [H, N] constants
 *
 * where each product is a MatMul or a Gemm (as exporters write a linear layer: transB, alpha,
 * beta and a bias C; not transA): a Gemm's weight is split as its transB stores it, the first
 * Gemm's C with its columns (or whole when it broadcasts along them), the second's C taken by
 * rank 0 alone; alpha and beta scale each rank's share as they scale the whole.
 *
 * where act is a chain of one-input elementwise ops (Relu, Gelu, Tanh...). With R ranks and H a
 * multiple of R, rank r takes columns [r h, (r+1) h) of W1 and b1 and the same rows of W2
 * (h = H / R): the first matmul is column-parallel, act works on the rank's own columns, and
 * the second matmul is row-parallel, giving a partial product whose sum over the ranks is y:
 *
 *   y = sum_r act(x @ W1[:, r] + b1[r]) @ W2[r, :]
 *
 * One ampc.AllReduce adds the partials and leaves y on every rank; x, the rest of the graph and
 * y's readers stay replicated (no `rank` attribute). Each rank holds 1/R of the pair's weights
 * and does 1/R of its work; the cost is one all-reduce of y per pair (Megatron-LM's split).
 *
 * The stages, for each MatMul in graph order:
 *   1. find_pair: the pair (first matmul, optional bias b1, the act chain, second matmul), each
 *      value inside it read once and not a graph output.
 *   2. find_tail: the Adds after it that rank 0 takes before the all-reduce. A transformer block
 *      goes on with y + b2 (the second matmul's bias) and + z (the residual); added once to the
 *      sum they equal added to one partial (Megatron's trick):
 *
 *        sum_r p_r + b2 + z  ==  (p_0 + b2 + z) + sum_{r>0} p_r
 *
 *      so rank 0's partial takes them, fuse-matmul folds them into rank 0's ampc.FusedMatMul
 *      (its bias and residual epilogue: the tail follows that pass's rules), and the all-reduce
 *      writes the block's output: two full-size elementwise passes on every rank disappear.
 *   3. split_pair: rank r's nodes (rank = r) on its shards, rank 0's tail, one ampc.AllReduce
 *      writing the value the pair (or its tail) wrote; the old nodes are removed.
 *
 * Attention blocks are split by heads in partition_heads.c (the same stages, with the head
 * layout followed through the block); the helpers both halves share are declared in
 * partition.h. The pass records each block it split, and each attention block it left whole
 * with the reason, in the report's partition_blocks (--report's "partition").
 *
 * The graph stays one graph: the reference evaluator runs all ranks and the all-reduce as a
 * sum, so the partition is checked against the original model on any machine. A pair is left
 * whole when H is not a multiple of R or a value inside it is used elsewhere or is a graph
 * output; an Add stays after the all-reduce when its other operand is neither such a bias nor
 * a value of y's shape computed before the pair, or when the value it reads has another reader.
 */
#include "partition.h"
#include "ir/activation.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CHAIN = 8 };

typedef struct mlp_pair {
    ampc_node *first, *bias, *chain[MAX_CHAIN], *second;
    bool trans_first, trans_second; /* a Gemm's transB: its weight stored [cols, K] */
    ampc_part_tail tail; /* the Adds rank 0 takes before the all-reduce (stage 2) */
    int32_t n_chain;
} mlp_pair;

bool ampc_part_const_matrix(const ampc_value *v) {
    return v && v->data && v->shape.rank == 2 && ampc_dtype_is_float(v->dtype);
}

ampc_node *ampc_part_only_reader(const ampc_uses *u, const ampc_value *v) {
    return (v->flags & AMPC_VALUE_OUTPUT) ? NULL : ampc_pass_only_user(u, v);
}

/* Whether n is a linear layer with a constant weight: MatMul(x, W [K, cols]), or Gemm(x, B, C?)
 * without transA, B [K, cols] or (transB) [cols, K], C absent or a constant that `c_split`
 * allows (the first of a pair: C splits with the columns or broadcasts along them) or any
 * constant (the second: rank 0 takes it). *k, *cols and *trans receive its shape. */
static bool linear(const ampc_node *n, bool c_split, int64_t *k, int64_t *cols, bool *trans) {
    if (n->op != AMPC_OP_MATMUL && n->op != AMPC_OP_GEMM) return false;
    const ampc_value *w = n->inputs[1];
    if (!ampc_part_const_matrix(w)) return false;
    *trans = ampc_gemm_params_of(n).tb;
    *k = w->shape.dims[*trans ? 1 : 0], *cols = w->shape.dims[*trans ? 0 : 1];
    if (n->op == AMPC_OP_MATMUL) return true;
    if (ampc_gemm_params_of(n).ta) return false;
    const ampc_value *c = n->n_inputs > 2 ? n->inputs[2] : NULL;
    if (!c) return true;
    if (!c->data) return false;
    int64_t last = c->shape.rank ? c->shape.dims[c->shape.rank - 1] : 1;
    return !c_split || last == *cols || last == 1;
}

/* The pair that starts at MatMul or Gemm m, or false. */
static bool find_pair(const ampc_uses *u, ampc_node *m, mlp_pair *p) {
    memset(p, 0, sizeof *p);
    int64_t k, h, k2, n2;
    if (m->dead || !linear(m, true, &k, &h, &p->trans_first) || m->inputs[0]->data ||
        ampc_node_rank(m) >= 0) /* already split: a second run changes nothing */
        return false;
    p->first = m;
    ampc_value *v = m->outputs[0];
    ampc_node *n = ampc_part_only_reader(u, v);
    if (n && n->op == AMPC_OP_ADD && n->n_inputs == 2) {
        ampc_value *b = n->inputs[0] == v ? n->inputs[1] : n->inputs[0];
        if (b->data && b->shape.rank == 1 && b->shape.dims[0] == h && b->dtype == v->dtype &&
            ampc_shape_eq(&n->outputs[0]->shape, &v->shape)) {
            p->bias = n;
            v = n->outputs[0];
            n = ampc_part_only_reader(u, v);
        }
    }
    while (n && n->op != AMPC_OP_MATMUL && n->op != AMPC_OP_GEMM) {
        if (!ampc_op_has(n->op, T_ELEMWISE) || n->n_inputs != 1 || n->n_outputs != 1 ||
            p->n_chain == MAX_CHAIN || !ampc_shape_eq(&n->outputs[0]->shape, &v->shape))
            return false;
        p->chain[p->n_chain++] = n;
        v = n->outputs[0];
        n = ampc_part_only_reader(u, v);
    }
    if (!n || n->inputs[0] != v || !linear(n, false, &k2, &n2, &p->trans_second) || k2 != h)
        return false;
    p->second = n;
    return true;
}

/* Whether v holds N values along its last dim and nothing else (fuse-matmul's bias rule). */
static bool bias_of(const ampc_value *v, int64_t n) {
    return v->data && v->shape.rank >= 1 && v->shape.dims[v->shape.rank - 1] == n &&
           ampc_shape_numel(&v->shape) == n;
}

/* Whether v is present on every rank before the block starts: a graph input or constant, a
 * value of a node before the block's first node, or an earlier block's all-reduce (appended by
 * this run, at or after position n_old; the split nodes' own values are partials, read by
 * all-reduces only). Such a value cannot depend on the block's products, and a rank node
 * reading it is still placed in order by ampc_ir_graph_settle. */
static bool before_block(const ampc_value *v, int32_t first_id, int32_t n_old) {
    const ampc_node *d = v->producer;
    return !d || (ampc_node_rank(d) < 0 && (d->id < first_id || d->id >= n_old));
}

/* 2. The Adds after the block's last matmul that rank 0 can take: while the current value (y,
 * then y + b2) has one reader and is not a graph output, an Add of it and
 *   a constant of its dtype holding N values along the last dim   (the bias, once), or
 *   a value of exactly its shape and dtype available before the block (the residual, once),
 * whose output has the current shape. */
void ampc_part_find_tail(const ampc_uses *u, const ampc_node *last, int32_t first_id,
                         int32_t n_old, ampc_part_tail *t) {
    memset(t, 0, sizeof *t);
    ampc_value *v = last->outputs[0];
    int64_t n = v->shape.dims[v->shape.rank - 1];
    bool bias = false, residual = false;
    ampc_node *a;
    while (t->n < AMPC_PART_MAX_TAIL && (a = ampc_part_only_reader(u, v)) &&
           a->op == AMPC_OP_ADD && a->n_inputs == 2 && a->inputs[0] != a->inputs[1]) {
        ampc_value *o = a->inputs[0] == v ? a->inputs[1] : a->inputs[0];
        if (o->dtype != v->dtype || !ampc_shape_eq(&a->outputs[0]->shape, &v->shape)) break;
        if (!bias && bias_of(o, n)) {
            bias = true;
        } else if (!residual && ampc_shape_eq(&o->shape, &v->shape) &&
                   before_block(o, first_id, n_old)) {
            residual = true;
        } else {
            break;
        }
        t->addend[t->n] = o;
        t->node[t->n++] = a;
        v = a->outputs[0];
    }
}

ampc_value *ampc_part_slice(ampc_graph *g, const ampc_value *c, int32_t axis, int64_t start,
                            int64_t len, int32_t rank) {
    size_t es = ampc_dtype_size(c->dtype);
    int64_t outer = 1, inner = 1, n = c->shape.dims[axis];
    for (int32_t i = 0; i < axis; i++) outer *= c->shape.dims[i];
    for (int32_t i = axis + 1; i < c->shape.rank; i++) inner *= c->shape.dims[i];
    ampc_shape s = c->shape;
    s.dims[axis] = len;
    const size_t row = (size_t)(len * inner) * es;
    char *d = malloc((size_t)outer * row + 1);
    if (!d) {
        AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
        return NULL;
    }
    for (int64_t o = 0; o < outer; o++)
        memcpy(d + (size_t)o * row, (const char *)c->data + (size_t)((o * n + start) * inner) * es,
               row);
    char name[160];
    snprintf(name, sizeof name, "%.140s_rank%d", c->name, rank);
    ampc_value *v = ampc_ir_const_new(g, name, c->dtype, &s, d);
    free(d);
    return v;
}

/* Columns [c0, c0 + w) of matrix (or vector) m, or its rows. */
static ampc_value *shard(ampc_graph *g, const ampc_value *m, bool rows, int64_t c0, int64_t w,
                         int32_t rank) {
    return ampc_part_slice(g, m, rows ? 0 : m->shape.rank - 1, c0, w, rank);
}

/* The sparsity pass's sparse24 mark stays only when keep_sparse: a row split of a 2:4 weight
 * (groups of 4 along K, its rows) keeps the pattern only when each rank's rows are whole
 * groups. */
ampc_value *ampc_part_rank_node(ampc_graph *g, const ampc_node *n, ampc_opcode op,
                                ampc_value *const *ins, int32_t n_ins, int32_t rank,
                                bool keep_sparse) {
    ampc_attr *attrs = ampc_ir_alloc(g, (size_t)(n->n_attrs + 1) * sizeof *attrs);
    if (!attrs) return NULL;
    int32_t k = 0;
    for (int32_t i = 0; i < n->n_attrs; i++)
        if ((keep_sparse || strcmp(n->attrs[i].name, AMPC_ATTR_SPARSE24)) &&
            strcmp(n->attrs[i].name, AMPC_ATTR_RANK))
            attrs[k++] = n->attrs[i];
    attrs[k] = (ampc_attr){.name = AMPC_ATTR_RANK, .kind = AMPC_ATTR_INT, .i = rank};
    char name[160];
    snprintf(name, sizeof name, "%.140s_rank%d", n->name, rank);
    ampc_node *out;
    if (ampc_ir_node_build(g, op, name, ins, n_ins, attrs, k + 1, 1, NULL, &out) != AMPC_OK)
        return NULL;
    return out->outputs[0];
}

/* A two-input rank node: in and `more`, or in alone. */
static ampc_value *rank_node(ampc_graph *g, const ampc_node *n, ampc_opcode op, ampc_value *in,
                             ampc_value *more, int32_t rank, bool keep_sparse) {
    ampc_value *ins[2] = {in, more};
    return ampc_part_rank_node(g, n, op, ins, more ? 2 : 1, rank, keep_sparse);
}

ampc_value *ampc_part_tail_apply(ampc_graph *g, const ampc_part_tail *t, ampc_value *v, int32_t r) {
    for (int32_t i = 0; v && r == 0 && i < t->n; i++)
        v = rank_node(g, t->node[i], AMPC_OP_ADD, v, t->addend[i], 0, true);
    return v;
}

/* Rank r's part of the pair: its partial product (rank 0's with the tail added). */
static ampc_value *split_rank(ampc_graph *g, const mlp_pair *p, int32_t r, int64_t h,
                              int32_t ranks) {
    const ampc_node *m = p->first, *s = p->second;
    /* the columns of the first weight and the same rows of the second, as each is stored */
    ampc_value *w1 = shard(g, m->inputs[1], p->trans_first, r * h, h, r);
    ampc_value *w2 = shard(g, s->inputs[1], !p->trans_second, r * h, h, r);
    if (!w1 || !w2) return NULL;
    ampc_value *in[3] = {m->inputs[0], w1, m->n_inputs > 2 ? m->inputs[2] : NULL};
    if (in[2] && in[2]->shape.rank && in[2]->shape.dims[in[2]->shape.rank - 1] == h * ranks &&
        !(in[2] = shard(g, in[2], false, r * h, h, r))) /* a C of the columns: the rank's own */
        return NULL;
    ampc_value *v = ampc_part_rank_node(g, m, m->op, in, in[2] ? 3 : 2, r, true);
    if (v && p->bias) {
        const ampc_value *b = p->bias->inputs[0]->data ? p->bias->inputs[0] : p->bias->inputs[1];
        ampc_value *bs = shard(g, b, false, r * h, h, r);
        v = bs ? rank_node(g, p->bias, AMPC_OP_ADD, v, bs, r, true) : NULL;
    }
    for (int32_t i = 0; v && i < p->n_chain; i++)
        v = rank_node(g, p->chain[i], p->chain[i]->op, v, NULL, r, true);
    if (v) { /* the second's C (a Gemm's addend) is rank 0's, like the tail */
        ampc_value *in2[3] = {v, w2, r == 0 && s->n_inputs > 2 ? s->inputs[2] : NULL};
        v = ampc_part_rank_node(g, s, s->op, in2, in2[2] ? 3 : 2, r, h % 4 == 0);
    }
    return ampc_part_tail_apply(g, &p->tail, v, r);
}

ampc_status ampc_part_all_reduce(ampc_graph *g, ampc_node *last, const ampc_part_tail *t,
                                 ampc_value *const *partial, int32_t ranks) {
    ampc_value *y = (t->n ? t->node[t->n - 1] : last)->outputs[0];
    for (int32_t i = 0; i < t->n; i++) ampc_ir_node_remove(g, t->node[i]);
    ampc_ir_node_remove(g, last); /* before the all-reduce takes y: removing clears producers */
    char name[160];
    snprintf(name, sizeof name, "%.140s_allreduce", last->name);
    ampc_node *ar =
        ampc_ir_node_append(g, AMPC_OP_ALL_REDUCE, name, partial, ranks, NULL, 0, &y, 1);
    if (!ar) return AMPC_E_OOM;
    return ampc_ir_node_infer(g, ar);
}

/* 3. Replaces the pair and its tail by the R ranks and an ampc.AllReduce writing the value the
 * last of them wrote. */
static ampc_status split_pair(ampc_graph *g, ampc_pipeline_report *rep, const mlp_pair *p,
                              int64_t cols, int32_t ranks) {
    int64_t h = cols / ranks;
    ampc_value **partial = ampc_ir_alloc(g, (size_t)ranks * sizeof *partial);
    if (!partial) return AMPC_E_OOM;
    for (int32_t r = 0; r < ranks; r++)
        if (!(partial[r] = split_rank(g, p, r, h, ranks))) return ampc_graph_status(g);
    ampc_node *second = p->second;
    ampc_status st = ampc_part_all_reduce(g, second, &p->tail, partial, ranks);
    for (int32_t i = 0; i < p->n_chain; i++) ampc_ir_node_remove(g, p->chain[i]);
    if (p->bias) ampc_ir_node_remove(g, p->bias);
    ampc_ir_node_remove(g, p->first);
    if (st == AMPC_OK)
        ampc_part_note(g, rep, second, "mlp", true, "rank r: columns [r*%lld, (r+1)*%lld) of '%s', "
                       "the same rows of '%s'; %d Adds on rank 0", (long long)h, (long long)h,
                       p->first->inputs[1]->name, second->inputs[1]->name, p->tail.n);
    return st;
}

void ampc_part_note(ampc_graph *g, ampc_pipeline_report *r, const ampc_node *at, const char *kind,
                    bool split, const char *fmt, ...) {
    if (!r) return;
    if (r->n_partition_blocks == r->cap_partition_blocks) {
        int32_t cap = r->cap_partition_blocks ? 2 * r->cap_partition_blocks : 16;
        ampc_partition_block *b = ampc_ir_alloc(g, (size_t)cap * sizeof *b);
        if (!b) return;
        if (r->n_partition_blocks)
            memcpy(b, r->partition_blocks, (size_t)r->n_partition_blocks * sizeof *b);
        r->partition_blocks = b, r->cap_partition_blocks = cap;
    }
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    size_t nn = strlen(at->name) + 1, nw = strlen(why) + 1;
    char *node = ampc_ir_alloc(g, nn), *w = ampc_ir_alloc(g, nw);
    if (!node || !w) return;
    memcpy(node, at->name, nn);
    memcpy(w, why, nw);
    r->partition_blocks[r->n_partition_blocks++] =
        (ampc_partition_block){.node = node, .kind = kind, .split = split, .why = w};
}

ampc_status ampc_pass_partition(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    const ampc_pipeline_options *o = ampc_pass_opt(cx);
    ampc_pipeline_report *rep = ampc_pass_report(cx);
    if (o->partition != AMPC_PARTITION_TENSOR || o->gpus < 2) return AMPC_OK;
    if (rep) rep->n_partition_blocks = 0;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK)
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    int32_t n_old = g->n_nodes;
    for (int32_t i = 0; st == AMPC_OK && i < n_old; i++) {
        ampc_node *n = g->nodes[i];
        bool split = false;
        /* an attention block ends at its output projection, after its Q, K and V projections
         * (which find_pair does not take: a Reshape follows them) */
        if (!n->dead && (st = ampc_part_split_heads(g, cx, &uses, n, n_old, &split)) != AMPC_OK)
            break;
        if (split) {
            *changed = true;
            continue;
        }
        mlp_pair p;
        if (!find_pair(&uses, n, &p)) continue;
        const ampc_value *w1 = p.first->inputs[1];
        int64_t h = w1->shape.dims[p.trans_first ? 0 : 1];
        if (h % o->gpus) { /* H not a multiple of R */
            ampc_part_note(g, rep, p.second, "mlp", false, "%lld hidden columns are not a "
                           "multiple of %d ranks", (long long)h, o->gpus);
            continue;
        }
        ampc_part_find_tail(&uses, p.second, p.first->id, n_old, &p.tail);
        st = split_pair(g, rep, &p, h, o->gpus);
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (st == AMPC_OK && *changed) {
        ampc_ir_graph_settle(g, n_old);
        ampc_ir_graph_compact(g);
    }
    if (st == AMPC_E_OOM && ampc_graph_status(g) == AMPC_OK)
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    return st;
}
