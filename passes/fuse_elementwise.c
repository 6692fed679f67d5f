/*
 * fuse_elementwise.c — chains of elementwise ops become one kernel: a value produced by an
 * elementwise node and read only by another elementwise node of the same shape is marked
 * AMPC_VALUE_FUSED. It then never reaches memory: plan-memory gives it no bytes, and code
 * generation computes it in registers inside the kernel of the last node of the chain
 * (codegen/lower_elementwise.c, "fused chains"), which reads the chain's other inputs itself.
 * Exporters write such chains everywhere: BERT's embeddings (Gather, then two Adds of constant
 * tables), its mask (Cast, And, Where, Cast), scaling and activation tails.
 *
 * The rules, for a value v from node p read by node u:
 *   - p and u are elementwise ops with a generated kernel of one output and at most three inputs
 *     (LOWER_ELEMENTWISE, not the quantization ops, Dropout or the variadic Max/Min/Sum/Mean),
 *     or p is a Gather, which then heads the chain: the kernel reads its table and indices at
 *     the gathered positions (BERT's word embeddings, looked up and then added to), or p is
 *     a LayerNormalization / RMSNormalization with one output and u a Cast between float
 *     types, which the norm's kernel then writes (an exported model's last norm, cast to its
 *     f32 output); that Cast joins no further chain; or u is a LayerNormalization /
 *     RMSNormalization and v its X, over at least NORM_CHAIN_ROWS rows: the norm's kernel
 *     computes the chain where it reads each element (BERT's embedding lookup and Adds, then
 *     their LayerNorm: one kernel);
 *   - v has this one use, is not a graph output, has no known contents, and has u's output
 *     shape (so element i of every value in the chain is computed by the same thread; the
 *     chain's outside inputs may broadcast), or a shape that broadcasts to it when p is a cheap
 *     op (a Cast, a comparison, logic, Add/Sub/Mul, Where: `cheap`) that reads no value of the
 *     chain: the kernel then computes p again for each element that reads it, from p's inputs
 *     at their broadcast offset (a mask's Cast, computed once for each of the [S, S] elements
 *     that read it, instead of in a kernel of its own);
 *   - p and u run on the same GPU (the partition passes' rank attribute);
 *   - a chain holds at most MAX_CHAIN nodes.
 * A view (Transpose, Slice, Expand) every reader of which reads through it (virtual_views: an
 * elementwise node of its shape, which it then heads the chain of, or another view, whose
 * geometry composes with it) is never stored, however many readers it has (ViT's attention
 * output permuted back to batch-first before the residual Add; a rotary embedding's heads): each reads the tensor under it where the element lies;
 * after MAX_VIEW_DEPTH such views in a row the next one is stored (code generation composes
 * them recursively).
 * A Concat along the last axis read only by a BatchNormalization over channels-last rows ([R,
 * C], the layout pass's form), directly or through a Reshape of it to those rows, is never
 * stored either (concat_into_norm): the norm's kernel reads each element from the Concat's input
 * that holds it (DenseNet: every dense layer concatenates the block's earlier feature maps and
 * normalises them; the concatenation, written and read again, was a fifth of its time). At most
 * AMPC_CONCAT_READ_MAX inputs.
 * A Concat read only by an elementwise node of its shape is never stored either
 * (concat_in_chain): it joins that node's chain, whose kernel takes each element from the
 * input that holds it, and each of its inputs made by an elementwise op or a view that only it
 * reads is computed there, where the element lies (a chain of the input's shape, fused by the
 * rules above, but with no Concat inside). A rotary embedding's rotate-half (two Slices of the
 * heads, a Neg, a Concat, then the Muls by the sine and cosine tables and their Add) is one
 * kernel; so is ViT's class token joined to the patches before the position embedding's Add.
 * The graph itself is unchanged: the reference evaluator runs the nodes one by one, and the
 * fused kernel rounds each value of the chain to its type as the separate kernels stored it,
 * so the results are the same bit for bit. It runs after the passes that rewrite the graph,
 * right before dce and plan-memory.
 */
#include "passes.h"
#include "ir/index.h"

#include <stdlib.h>

enum { MAX_CHAIN = 16, MAX_VIEW_DEPTH = 8 };

/* A value a kernel would compute: not a constant, not poisoned, not empty. */
static bool computed(const ampc_value *y) {
    return !y->data && !(y->flags & AMPC_VALUE_POISON) && ampc_ir_numel(y) > 0;
}

static bool fusable(const ampc_node *n) {
    if (n->dead || ampc_op_get(n->op)->lower != LOWER_ELEMENTWISE) return false;
    switch (n->op) {
    case AMPC_OP_QUANTIZE_LINEAR: case AMPC_OP_DEQUANTIZE_LINEAR: case AMPC_OP_MEL_WEIGHT_MATRIX:
    case AMPC_OP_DROPOUT: case AMPC_OP_MAX: case AMPC_OP_MIN: case AMPC_OP_SUM: case AMPC_OP_MEAN:
        return false;
    default: break;
    }
    if (n->n_outputs != 1 || n->n_inputs < 1 || n->n_inputs > 3 || !n->inputs[0]) return false;
    return computed(n->outputs[0]);
}

/* A Gather may head a chain (its inputs are read by the chain's kernel itself, at the gathered
 * positions, not as leaves): a table lookup followed by elementwise ops, as BERT's embeddings,
 * or a constant table of rows (row-gather: a window's rows read by its residual Add). */
static bool heads(const ampc_node *n) {
    if (n->dead || n->n_outputs != 1 || !n->inputs[0] || !computed(n->outputs[0])) return false;
    if (n->op != AMPC_OP_GATHER || n->n_inputs != 2 || !n->inputs[1]) return false;
    const bool constant = n->inputs[1]->data && !(n->inputs[1]->flags & AMPC_VALUE_INPUT);
    return !constant || ampc_gather_const_in_range(n);
}

/* An op cheap enough to compute again for each element of a broadcast (a few instructions). */
static bool cheap(ampc_opcode op) {
    switch (op) {
    case AMPC_OP_CAST: case AMPC_OP_NOT: case AMPC_OP_NEG: case AMPC_OP_ABS: case AMPC_OP_RELU:
    case AMPC_OP_ADD: case AMPC_OP_SUB: case AMPC_OP_MUL: case AMPC_OP_EQUAL: case AMPC_OP_LESS:
    case AMPC_OP_LESS_EQUAL: case AMPC_OP_GREATER: case AMPC_OP_GREATER_EQUAL: case AMPC_OP_AND:
    case AMPC_OP_OR: case AMPC_OP_XOR: case AMPC_OP_WHERE:
        return true;
    default:
        return false;
    }
}

/* Whether shape a broadcasts to shape b (numpy rules, b unchanged). */
static bool broadcasts_to(const ampc_shape *a, const ampc_shape *b) {
    if (a->rank > b->rank) return false;
    for (int32_t d = 1; d <= a->rank; d++) {
        const int64_t x = a->dims[a->rank - d], y = b->dims[b->rank - d];
        if (x != 1 && x != y) return false;
    }
    return true;
}

/* Whether p, whose output v is read by a chain of another shape (v broadcast to it), can be
 * computed inside that chain for each element: a cheap elementwise op of no chain value. */
static bool recomputable(const ampc_node *p, const ampc_value *v, const ampc_value *y) {
    if (!fusable(p) || !cheap(p->op) || !broadcasts_to(&v->shape, &y->shape)) return false;
    for (int32_t k = 0; k < p->n_inputs; k++)
        if (p->inputs[k] && (p->inputs[k]->flags & AMPC_VALUE_FUSED)) return false;
    return true;
}

static bool is_norm(const ampc_node *n) {
    return n && (n->op == AMPC_OP_LAYER_NORM || n->op == AMPC_OP_RMS_NORM);
}

static bool low_float(ampc_dtype t) {
    return t == AMPC_DTYPE_F32 || t == AMPC_DTYPE_F16 || t == AMPC_DTYPE_BF16;
}

/* A Cast between float types of a LayerNormalization's or RMSNormalization's only output, or a
 * Mul of it by a constant that broadcasts to it (ampc_ir_norm_post_scale: an exported RMS norm's
 * weight, multiplied after rounding): the norm's kernel writes the Cast's or the Mul's output
 * (codegen/lower_norm.c). Likewise a Relu of a BatchNormalization's (a pre-activation block:
 * DenseNet's BN, ReLU, convolution). Such a Cast, Mul or Relu ends its chain. */
static bool norm_then_cast(const ampc_node *p, const ampc_node *u) {
    if (p->dead || p->n_outputs != 1) return false;
    if (p->op == AMPC_OP_BATCH_NORM) return u->op == AMPC_OP_RELU;
    if (ampc_ir_norm_post_scale(p, u) >= 0) return true;
    return is_norm(p) && u->op == AMPC_OP_CAST && low_float(p->outputs[0]->dtype) &&
           low_float(u->outputs[0]->dtype);
}

/* Whether n is such a Cast, Mul or Relu, an input of it computed by the norm in its kernel. */
static bool writes_norm(const ampc_node *n) {
    for (int32_t k = 0; k < n->n_inputs; k++) {
        const ampc_value *v = n->inputs[k];
        if (v && v->producer && (v->flags & AMPC_VALUE_FUSED) && norm_then_cast(v->producer, n))
            return true;
    }
    return false;
}


/* The X of norm u, made by a chain (or a lookup) that only u reads, is computed by the norm's
 * kernel where it reads each element (codegen/lower_norm.c): BERT's embeddings, looked up and
 * added, then normalised, are one kernel. Only over NORM_CHAIN_ROWS rows or more: the norm's
 * kernel gives a row one warp, so over few rows few warps compute the whole chain, and that
 * costs more than the kernel it saves (BERT b1, 128 rows: its steps' graph measured as fast with
 * the chain in the norm's kernel as with a kernel of its own, where the mask's fusion alone
 * should have gained a kernel's time). */
enum { NORM_CHAIN_ROWS = 1024 };
static void feeds_norm(const ampc_uses *uses, const int32_t *size, ampc_node *u, bool *changed) {
    ampc_value *v = u->inputs[0];
    ampc_node *p = v ? v->producer : NULL;
    if (!v || v->shape.rank < 1) return;
    int64_t axis = ampc_axis_attr(u), rows = 1;
    if (axis < 0) axis += v->shape.rank;
    for (int32_t d = 0; d < axis && d < v->shape.rank; d++) rows *= v->shape.dims[d];
    if (rows < NORM_CHAIN_ROWS) return;
    if (!p || !(fusable(p) || heads(p)) || ampc_pass_only_user(uses, v) != u) return;
    if ((v->flags & (AMPC_VALUE_OUTPUT | AMPC_VALUE_FUSED)) || v->data || !low_float(v->dtype)) return;
    if (ampc_node_rank(p) != ampc_node_rank(u) || (fusable(p) ? size[p->id] : 1) >= MAX_CHAIN)
        return;
    v->flags |= AMPC_VALUE_FUSED;
    *changed = true;
}

/* Whether Concat p is read in place by the chain of its one reader (the rule in the header): an
 * elementwise node of its output's shape on its GPU, at most AMPC_CONCAT_READ_MAX inputs of its
 * type. */
static bool concat_in_chain(const ampc_uses *uses, const ampc_node *p) {
    if (p->dead || p->op != AMPC_OP_CONCAT || p->n_outputs != 1 || p->n_inputs < 1 ||
        p->n_inputs > AMPC_CONCAT_READ_MAX)
        return false;
    const ampc_value *v = p->outputs[0];
    if (!computed(v) || (v->flags & (AMPC_VALUE_OUTPUT | AMPC_VALUE_FUSED)) || v->shape.rank < 1)
        return false;
    for (int32_t k = 0; k < p->n_inputs; k++)
        if (!p->inputs[k] || p->inputs[k]->dtype != v->dtype) return false;
    const ampc_node *u = ampc_pass_only_user(uses, v);
    return u && fusable(u) && ampc_node_rank(u) == ampc_node_rank(p) &&
           ampc_shape_eq(&v->shape, &u->outputs[0]->shape);
}

/* Whether node r, reading view v (made by p) as its input k, can read it where it lies: an
 * elementwise node of v's shape (v heads its chain), a Concat read in place by a chain (the
 * view heads the chain of r's input k) or another view, as its data. */
static bool reads_through(const ampc_uses *uses, const ampc_node *r, int32_t k, const ampc_node *p) {
    if (concat_in_chain(uses, r)) return ampc_node_rank(r) == ampc_node_rank(p);
    if (ampc_op_is_strided_view(r->op)) return k == 0 && ampc_node_rank(r) == ampc_node_rank(p);
    return fusable(r) && ampc_shape_eq(&r->inputs[k]->shape, &r->outputs[0]->shape) &&
           ampc_node_rank(r) == ampc_node_rank(p);
}

/* Views that every reader reads through (reads_through) are never stored: each reader's kernel
 * reads the tensor under them (a rotary embedding's heads, permuted and then multiplied, sliced
 * and negated, sliced and joined: no copy of the permuted heads). */
static void virtual_views(ampc_graph *g, const ampc_uses *uses, bool *changed) {
    uint8_t *ok = calloc((size_t)g->n_values + 1, 1);
    if (!ok) return; /* an optimisation only: nothing is marked */
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *p = g->nodes[i];
        if (!p->dead && ampc_op_is_strided_view(p->op) && p->n_outputs == 1 && p->inputs[0] &&
            computed(p->outputs[0]) && !(p->outputs[0]->flags & AMPC_VALUE_OUTPUT))
            ok[p->outputs[0]->id] = 1;
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *r = g->nodes[i];
        for (int32_t k = 0; !r->dead && k < r->n_inputs; k++) {
            const ampc_value *v = r->inputs[k];
            if (!v || !ok[v->id]) continue;
            ok[v->id] = reads_through(uses, r, k, v->producer) ? 2 : 0; /* 2: read, and so far fine */
        }
    }
    /* A view of a view never stored composes with it; past MAX_VIEW_DEPTH such views in a row
     * the next one is stored (the composition recurses once per view). ok[] becomes each
     * value's depth, in node order (producers first). */
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *p = g->nodes[i];
        if (p->dead || !ampc_op_is_strided_view(p->op) || p->n_outputs != 1 || ok[p->outputs[0]->id] != 2) continue;
        const ampc_value *x = p->inputs[0];
        const int32_t depth = ok[x->id] >= 2 ? ok[x->id] + 1 : 2;
        ok[p->outputs[0]->id] = (uint8_t)(depth - 1 > MAX_VIEW_DEPTH ? 0 : depth);
    }
    for (int32_t i = 0; i < g->n_values; i++)
        if (ok[i] >= 2) g->values[i]->flags |= AMPC_VALUE_FUSED, *changed = true;
    free(ok);
}

/* Whether Concat p, its output v, can be read in place by a BatchNormalization over rows whose X
 * has last dim c: along its last axis, of at most AMPC_CONCAT_READ_MAX stored inputs of its type. */
static bool concat_readable(const ampc_node *p, const ampc_value *v, int64_t c) {
    if (p->dead || p->n_outputs != 1 || p->n_inputs < 1 || p->n_inputs > AMPC_CONCAT_READ_MAX) return false;
    if (!computed(v) || (v->flags & (AMPC_VALUE_OUTPUT | AMPC_VALUE_FUSED)) || v->shape.rank < 1)
        return false;
    int64_t axis = ampc_axis_attr(p);
    if (axis < 0) axis += v->shape.rank;
    if (axis != v->shape.rank - 1 || v->shape.dims[axis] != c) return false;
    for (int32_t k = 0; k < p->n_inputs; k++) {
        const ampc_value *x = p->inputs[k];
        if (!x || x->dtype != v->dtype || (x->flags & AMPC_VALUE_FUSED)) return false;
    }
    return true;
}

/* Concats read in place by the BatchNormalization over rows that alone reads them (the rule in
 * the header); a Reshape between them, to the rows, is never stored either. */
static void concat_into_norm(ampc_graph *g, const ampc_uses *uses, bool *changed) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *u = g->nodes[i];
        if (u->dead || u->op != AMPC_OP_BATCH_NORM || !u->inputs[0]) continue;
        ampc_value *x = u->inputs[0], *v = x, *via = NULL;
        if (x->shape.rank != 2 || (x->flags & AMPC_VALUE_OUTPUT)) continue;
        ampc_node *p = x->producer;
        if (p && p->op == AMPC_OP_RESHAPE && !p->dead && ampc_pass_only_user(uses, x) == u &&
            ampc_node_rank(p) == ampc_node_rank(u)) {
            via = x;
            v = p->inputs[0];
            p = v ? v->producer : NULL;
        }
        if (!p || p->op != AMPC_OP_CONCAT || ampc_node_rank(p) != ampc_node_rank(u)) continue;
        if (ampc_pass_only_user(uses, v) != (via ? via->producer : u)) continue;
        if (!concat_readable(p, v, x->shape.dims[1])) continue;
        v->flags |= AMPC_VALUE_FUSED;
        if (via) via->flags |= AMPC_VALUE_FUSED;
        *changed = true;
    }
}

/* Each input of Concat p (concat_in_chain) that an elementwise op or a Gather makes for p alone,
 * of no Concat's chain, is computed where the Concat's reader reads it (its output is marked),
 * the chains of all its inputs together at most MAX_CHAIN nodes (each node's inputs are kernel
 * parameters of the reader's kernel). */
static void concat_inputs(const ampc_uses *uses, const int32_t *size, const uint8_t *in_cat,
                          const ampc_node *p, bool *changed) {
    int32_t total = 0;
    for (int32_t k = 0; k < p->n_inputs; k++) {
        ampc_value *v = p->inputs[k];
        const ampc_node *q = v->producer;
        if (!q || !(fusable(q) || heads(q)) || ampc_pass_only_user(uses, v) != p) continue;
        if (writes_norm(q) || in_cat[q->id]) continue;
        if ((v->flags & (AMPC_VALUE_OUTPUT | AMPC_VALUE_FUSED)) || v->data) continue;
        const int32_t with = fusable(q) ? size[q->id] : 1;
        if (ampc_node_rank(q) != ampc_node_rank(p) || total + with > MAX_CHAIN) continue;
        v->flags |= AMPC_VALUE_FUSED;
        total += with;
        *changed = true;
    }
}

/* Whether node n's chain (so far) holds a Concat read in place: in_cat[n] after the main loop. */
static bool holds_concat(const ampc_node *n, const uint8_t *in_cat) {
    for (int32_t k = 0; k < n->n_inputs; k++) {
        const ampc_value *v = n->inputs[k];
        if (v && (v->flags & AMPC_VALUE_FUSED) && v->producer && in_cat[v->producer->id]) return true;
    }
    return false;
}

/* The views heading node u's chain (fused by virtual_views) and the Concats read in it: each
 * is a node of the chain, and counts towards it (a Concat's input chains are chains of their
 * own, bounded by concat_inputs). */
static int32_t heads_read(const ampc_node *u) {
    int32_t n = 0;
    for (int32_t k = 0; k < u->n_inputs; k++) {
        const ampc_value *v = u->inputs[k];
        n += v && (v->flags & AMPC_VALUE_FUSED) && v->producer &&
             (ampc_op_is_strided_view(v->producer->op) || v->producer->op == AMPC_OP_CONCAT);
    }
    return n;
}

ampc_status ampc_pass_fuse_elementwise(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    *changed = false;
    for (int32_t i = 0; i < g->n_values; i++) g->values[i]->flags &= ~(uint32_t)AMPC_VALUE_FUSED;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    int32_t *size = calloc((size_t)g->n_nodes + 1, sizeof *size); /* nodes in each node's chain */
    uint8_t *in_cat = calloc((size_t)g->n_nodes + 1, 1); /* the node's chain holds a Concat */
    if (!size || !in_cat) {
        free(size);
        free(in_cat);
        ampc_pass_uses_free(&uses);
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    }
    virtual_views(g, &uses, changed);
    concat_into_norm(g, &uses, changed);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *u = g->nodes[i];
        if (is_norm(u) && !u->dead) {
            feeds_norm(&uses, size, u, changed);
            continue;
        }
        if (concat_in_chain(&uses, u)) {
            u->outputs[0]->flags |= AMPC_VALUE_FUSED;
            concat_inputs(&uses, size, in_cat, u, changed);
            in_cat[i] = 1;
            *changed = true;
            continue;
        }
        if (!fusable(u)) continue;
        size[i] = 1 + heads_read(u);
        const ampc_value *y = u->outputs[0];
        for (int32_t k = 0; k < u->n_inputs; k++) {
            ampc_value *v = u->inputs[k];
            ampc_node *p = v ? v->producer : NULL;
            if (!p || !(fusable(p) || heads(p) || norm_then_cast(p, u)) ||
                ampc_pass_only_user(&uses, v) != u)
                continue;
            if (writes_norm(p)) continue; /* it writes a norm's output: the end of its chain */
            if ((v->flags & (AMPC_VALUE_OUTPUT | AMPC_VALUE_FUSED)) || v->data) continue;
            if (ampc_node_rank(p) != ampc_node_rank(u)) continue;
            if (!ampc_shape_eq(&v->shape, &y->shape) && !recomputable(p, v, y)) continue;
            const int32_t with = fusable(p) ? size[p->id] : 1; /* a Gather, a norm: itself */
            if (size[i] + with > MAX_CHAIN) continue;
            v->flags |= AMPC_VALUE_FUSED;
            size[i] += with;
            *changed = true;
        }
        in_cat[i] = holds_concat(u, in_cat);
    }
    free(size);
    free(in_cat);
    ampc_pass_uses_free(&uses);
    return AMPC_OK;
}
