/*
 * flatten_control.c — If, Loop and Scan written into the graph, for a GPU build.
 *
 * The GPU runs a plan of steps in a fixed order; a node that runs a subgraph has no step of its
 * own. When the control flow is known when compiling, the graph can say the same thing without
 * it, and every later pass (folding, fusion, the memory plan) then sees the body's nodes:
 *
 *   Loop   with a constant trip count M (1 <= M) and a first condition that is absent or a
 *          constant true: up to M copies of the body, iteration t's iteration number the constant
 *          t, each copy's carried values the previous copy's. The condition the body returns is
 *          its condition input (through Identity nodes) or a constant true, or it folds to a
 *          constant in each copy (computed from the iteration number and constants): a false one
 *          ends the loop after that copy; one that does not fold leaves the Loop as it is. A scan
 *          output is the copies' values stacked (Unsqueeze at 0, then Concat along 0), which is
 *          what the Loop returns.
 *   Scan   (its length is static): a copy of the body per position; scan input j's slice is a
 *          Gather of its position along its axis (from the end with direction 1), scan output j
 *          the copies' values stacked along its axis in the order of their positions.
 *   If     a constant condition takes its branch's copy; otherwise both branches' copies run and
 *          output i is Where(condition, then_i, else_i) (inference has made the branches agree
 *          in type and shape). Both branches' values are computed and one is selected, so every
 *          output is exactly the one the If gives; a branch value that would be an evaluation
 *          error when taken (an index out of range) is not one on the GPU, whose kernels do not
 *          raise errors, and is not selected.
 *
 *   Loop   that the above does not take (its stop depends on data, its trip count is computed at
 *          run time or is too long to copy) and that has no scan outputs: its body copied once
 *          between an ampc.LoopBegin and an ampc.LoopEnd (ir/subgraph.h), whose steps run it
 *          again while the loop goes on (codegen/lower_control.c).
 *
 * Bodies are flattened first, innermost out (an If inside a Loop's body becomes its Where before
 * the Loop is unrolled or marked). Copies are node for node, attributes deep-copied into the
 * graph's arena, constants of a body copied once. Not flattened (the GPU build then names the
 * node as it did before): bodies that still hold control flow (a data-dependent Loop: loops on
 * the GPU do not nest) or a node that must not be duplicated (T_NOFOLD: random ops), an empty
 * Loop or Scan, a Loop with scan outputs that cannot be unrolled, and a Scan or If that would
 * copy more than MAX_COPIED body nodes. The reference evaluator runs the nodes as they are (the pass
 * runs only when ampc_pipeline_options.gpu_build is set).
 */
#include "passes.h"
#include "ir/subgraph.h"

#include "ir/ref/ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most body nodes one control-flow node may become. */
enum { MAX_COPIED = 4096 };

typedef struct copier {
    ampc_graph *g;          /* the graph the copies go into */
    const ampc_node *cf;    /* the control-flow node */
    ampc_graph *body;
    ampc_value **map;       /* body value id -> its value in g (this copy) */
    ampc_value **consts;    /* body value id -> its constant copied into g (every copy) */
} copier;

/* Whether body b's nodes can be copied: no subgraphs, nothing that must not run twice, no
 * attribute holding a tensor. */
static bool copyable(const ampc_graph *b) {
    for (int32_t i = 0; i < b->n_nodes; i++) {
        const ampc_node *n = b->nodes[i];
        if (n->dead) continue;
        if (ampc_ir_op_has_bodies(n->op) || ampc_op_has(n->op, T_NOFOLD)) return false;
        for (int32_t a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].kind == AMPC_ATTR_TENSOR || n->attrs[a].kind == AMPC_ATTR_GRAPH)
                return false;
    }
    return true;
}

static int32_t live_nodes(const ampc_graph *b) {
    int32_t k = 0;
    for (int32_t i = 0; i < b->n_nodes; i++) k += !b->nodes[i]->dead;
    return k;
}

/* A copy of attribute a whose payload lives in g's arena (the body's may go with its node). */
static bool attr_copy(ampc_graph *g, const ampc_attr *a, ampc_attr *out) {
    *out = *a;
    out->name = ampc_arena_strdup(&g->arena, a->name);
    if (!out->name) return false;
    size_t each = 0;
    switch (a->kind) {
    case AMPC_ATTR_STRING: return (out->s = ampc_arena_strdup(&g->arena, a->s)) != NULL;
    case AMPC_ATTR_INTS: each = sizeof *a->ints; break;
    case AMPC_ATTR_FLOATS: each = sizeof *a->floats; break;
    case AMPC_ATTR_STRINGS: {
        const char **s = ampc_ir_alloc(g, (size_t)(a->n + 1) * sizeof *s);
        if (!s) return false;
        for (int32_t i = 0; i < a->n; i++)
            if (!(s[i] = ampc_arena_strdup(&g->arena, a->strings[i]))) return false;
        out->strings = s;
        return true;
    }
    default: return true;
    }
    void *p = ampc_ir_alloc(g, (size_t)(a->n + 1) * each);
    if (!p) return false;
    if (a->n) memcpy(p, a->kind == AMPC_ATTR_INTS ? (const void *)a->ints : (const void *)a->floats,
                     (size_t)a->n * each);
    if (a->kind == AMPC_ATTR_INTS) out->ints = p;
    else out->floats = p;
    return true;
}

/* Body value v as a value of g: its mapping in this copy, or its constant copied once. */
static ampc_value *mapped(copier *c, const ampc_value *v) {
    if (!v) return NULL;
    if (c->map[v->id]) return c->map[v->id];
    if (!v->data || v->producer) return NULL; /* a body value nothing mapped: malformed */
    if (!c->consts[v->id])
        c->consts[v->id] = ampc_ir_const_new(c->g, NULL, v->dtype, &v->shape, v->data);
    return c->consts[v->id];
}

/* Copies the nodes of the body once (copy number t, for the names), every one or those whose
 * pick[node index] equals want, the inputs they read already mapped; afterwards map holds what
 * they computed (the body's outputs, when every node is copied). */
static ampc_status copy_nodes(copier *c, int64_t t, const uint8_t *pick, uint8_t want) {
    ampc_graph *g = c->g;
    for (int32_t i = 0; i < c->body->n_nodes; i++) {
        const ampc_node *n = c->body->nodes[i];
        if (n->dead || (pick && pick[i] != want)) continue;
        ampc_value *in[64];
        ampc_attr at[64];
        if (n->n_inputs > 64 || n->n_attrs > 64) return AMPC_E_UNSUPPORTED;
        for (int32_t j = 0; j < n->n_inputs; j++) {
            in[j] = mapped(c, n->inputs[j]);
            if (n->inputs[j] && !in[j]) return AMPC_E_UNSUPPORTED;
        }
        for (int32_t a = 0; a < n->n_attrs; a++)
            if (!attr_copy(g, &n->attrs[a], &at[a])) return AMPC_E_OOM;
        char name[256];
        snprintf(name, sizeof name, "%.100s/%.100s/%lld", c->cf->name, n->name, (long long)t);
        ampc_node *copy = NULL;
        ampc_status st = ampc_ir_node_build(g, n->op, name, in, n->n_inputs, at, n->n_attrs,
                                            n->n_outputs, NULL, &copy);
        if (st != AMPC_OK) return st == AMPC_E_OOM ? st : AMPC_E_UNSUPPORTED;
        for (int32_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j]) c->map[n->outputs[j]->id] = copy->outputs[j];
    }
    return AMPC_OK;
}

static ampc_status copy_body(copier *c, int64_t t) { return copy_nodes(c, t, NULL, 0); }

static ampc_value *node1(ampc_graph *g, ampc_opcode op, const char *name, ampc_value *const *in,
                         int32_t n_in, const ampc_attr *at, int32_t n_at) {
    return ampc_pass_node1(g, op, name, in, n_in, at, n_at);
}

static ampc_value *const_i64(ampc_graph *g, const ampc_shape *s, int64_t v) {
    return ampc_pass_const_i64s(g, s->rank, s->dims, &v);
}

/* parts[0 .. k) (each one slice) stacked along axis: Unsqueeze each there, Concat along it. */
static ampc_value *stack(ampc_graph *g, const ampc_node *cf, ampc_value **parts, int64_t k,
                         int64_t axis) {
    const ampc_shape one = {1, {1}};
    ampc_value *ax = const_i64(g, &one, axis);
    if (!ax) return NULL;
    char name[160];
    snprintf(name, sizeof name, "%.120s/stack", cf->name);
    for (int64_t t = 0; t < k; t++) {
        ampc_value *in[2] = {parts[t], ax};
        if (!(parts[t] = node1(g, AMPC_OP_UNSQUEEZE, name, in, 2, NULL, 0))) return NULL;
    }
    if (k == 1) return parts[0];
    const ampc_attr a = ampc_axis_attr_make(axis);
    return node1(g, AMPC_OP_CONCAT, name, parts, (int32_t)k, &a, 1);
}

/* Whether value v (one element) is a constant true. */
static bool const_true(const ampc_value *v) {
    return v && v->data && ampc_ir_numel(v) == 1 && ampc_ref_load_i64(v->data, v->dtype, 0) != 0;
}

/* ---- the three ops ------------------------------------------------------------------------- */

/* Loop: fills out[0 .. n_outputs) with the flattened values, or returns AMPC_E_UNSUPPORTED when
 * the loop is not one this pass takes. */
static ampc_status flatten_loop(copier *c, ampc_value **out) {
    const ampc_node *n = c->cf;
    ampc_graph *b = c->body;
    const int32_t k = ampc_ir_node_captures(n), N = n->n_inputs - 2 - k, K = n->n_outputs - N;
    const ampc_value *mv = n->inputs[0];
    if (!mv || !mv->data || ampc_ir_numel(mv) != 1) return AMPC_E_UNSUPPORTED;
    const int64_t M = ampc_ref_load_i64(mv->data, mv->dtype, 0);
    const int64_t nodes = live_nodes(b);
    if (M < 1 || M > MAX_COPIED || M * nodes > MAX_COPIED) return AMPC_E_UNSUPPORTED;
    if (n->inputs[1] && !const_true(n->inputs[1])) return AMPC_E_UNSUPPORTED;
    const ampc_value *cond_out = b->outputs[0]; /* the condition input, through Identity nodes */
    while (cond_out->producer && cond_out->producer->op == AMPC_OP_IDENTITY)
        cond_out = cond_out->producer->inputs[0];
    /* otherwise each copy's condition must fold to a constant: a false one ends the loop there */
    const bool always = cond_out == b->inputs[1] || const_true(cond_out);
    ampc_value **scans = calloc((size_t)(K * M + 1), sizeof *scans);
    if (!scans) return AMPC_E_OOM;
    ampc_value *carried[256];
    if (N > 256) {
        free(scans);
        return AMPC_E_UNSUPPORTED;
    }
    for (int32_t j = 0; j < N; j++) carried[j] = n->inputs[2 + j];
    uint8_t yes = 1;
    ampc_status st = AMPC_OK;
    int64_t ran = 0;
    for (bool stop = false; ran < M && st == AMPC_OK && !stop; ran++) {
        const int64_t t = ran;
        memset(c->map, 0, (size_t)b->n_values * sizeof *c->map);
        c->map[b->inputs[0]->id] = const_i64(c->g, &b->inputs[0]->shape, t);
        c->map[b->inputs[1]->id] =
            ampc_ir_const_new(c->g, NULL, AMPC_DTYPE_BOOL, &b->inputs[1]->shape, &yes);
        for (int32_t j = 0; j < N; j++) c->map[b->inputs[2 + j]->id] = carried[j];
        for (int32_t i = 0; i < k; i++) c->map[b->inputs[2 + N + i]->id] = n->inputs[2 + N + i];
        if (!c->map[b->inputs[0]->id] || !c->map[b->inputs[1]->id]) st = AMPC_E_OOM;
        if (st == AMPC_OK) st = copy_body(c, t);
        for (int32_t j = 0; j < N && st == AMPC_OK; j++)
            if (!(carried[j] = mapped(c, b->outputs[1 + j]))) st = AMPC_E_UNSUPPORTED;
        for (int32_t j = 0; j < K && st == AMPC_OK; j++)
            if (!(scans[j * M + t] = mapped(c, b->outputs[1 + N + j]))) st = AMPC_E_UNSUPPORTED;
        const ampc_value *co = always || st != AMPC_OK ? NULL : mapped(c, b->outputs[0]);
        if (co && (!co->data || ampc_ir_numel(co) != 1)) st = AMPC_E_UNSUPPORTED;
        else if (co) stop = ampc_ref_load_i64(co->data, co->dtype, 0) == 0;
    }
    if (K > 0 && ran != M) st = AMPC_E_UNSUPPORTED; /* (inference makes such loops run M times) */
    for (int32_t j = 0; j < N && st == AMPC_OK; j++) out[j] = carried[j];
    for (int32_t j = 0; j < K && st == AMPC_OK; j++)
        if (!(out[N + j] = stack(c->g, n, scans + j * M, M, 0))) st = AMPC_E_UNSUPPORTED;
    free(scans);
    return st;
}

/* Per body node: 1 when it reads, at any distance, the iteration number or a carried value
 * (inputs 0 and 2 .. 2 + N of the body); 0 when it computes the same thing every iteration. */
static uint8_t *varying_nodes(const ampc_graph *b, int32_t N) {
    uint8_t *vv = calloc((size_t)b->n_values + 1, 1), *vn = calloc((size_t)b->n_nodes + 1, 1);
    if (!vv || !vn) {
        free(vv), free(vn);
        return NULL;
    }
    vv[b->inputs[0]->id] = 1;
    for (int32_t j = 0; j < N; j++) vv[b->inputs[2 + j]->id] = 1;
    for (int32_t i = 0; i < b->n_nodes; i++) {
        const ampc_node *n = b->nodes[i];
        for (int32_t j = 0; !n->dead && j < n->n_inputs; j++) vn[i] |= n->inputs[j] && vv[n->inputs[j]->id];
        for (int32_t j = 0; vn[i] && j < n->n_outputs; j++)
            if (n->outputs[j]) vv[n->outputs[j]->id] = 1;
    }
    free(vv);
    return vn;
}

/* A Loop flatten_loop does not take (its stop depends on data, its trip count is computed at run
 * time or is too long to copy), when it has no scan outputs: its body copied once between an
 * ampc.LoopBegin and an ampc.LoopEnd (ir/subgraph.h), whose steps run the body again while the
 * loop goes on. The body's condition input is true whenever it runs. The nodes that compute the
 * same thing every iteration are copied before the LoopBegin, so that they run once, before the
 * loop, whether or not it runs (a node outside the loop that later passes find equal to one of
 * them, and merge, reads a value that exists even when the loop runs no iteration). */
static ampc_status mark_loop(copier *c, ampc_value **out) {
    const ampc_node *n = c->cf;
    ampc_graph *g = c->g, *b = c->body;
    const int32_t k = ampc_ir_node_captures(n), N = n->n_inputs - 2 - k, K = n->n_outputs - N;
    if (K != 0 || N < 1 || live_nodes(b) > MAX_COPIED) return AMPC_E_UNSUPPORTED;
    ampc_value **in = calloc((size_t)(4 + 2 * N + k), sizeof *in);
    uint8_t *varying = varying_nodes(b, N);
    if (!in || !varying) {
        free(in), free(varying);
        return AMPC_E_OOM;
    }
    for (int32_t i = 0; i < 2 + N + k; i++) in[i] = n->inputs[i]; /* M, cond, carried, captures */
    const ampc_attr carried = ampc_loop_carried_attr(N);
    char name[160];
    ampc_node *lb = NULL, *le = NULL;
    /* the body's inputs: true, the captures; the nodes that read nothing else (before the
     * LoopBegin); then the iteration number (in its declared shape) and the carried values as
     * LoopBegin gives them, and the other nodes */
    const uint8_t yes = 1;
    memset(c->map, 0, (size_t)b->n_values * sizeof *c->map);
    c->map[b->inputs[1]->id] = ampc_ir_const_new(g, NULL, AMPC_DTYPE_BOOL, &b->inputs[1]->shape, &yes);
    for (int32_t i = 0; i < k; i++) c->map[b->inputs[2 + N + i]->id] = n->inputs[2 + N + i];
    ampc_status st = c->map[b->inputs[1]->id] ? copy_nodes(c, 0, varying, 0) : AMPC_E_OOM;
    snprintf(name, sizeof name, "%.120s/begin", n->name);
    if (st == AMPC_OK)
        st = ampc_ir_node_build(g, AMPC_OP_LOOP_BEGIN, name, in, 2 + N + k, &carried, 1,
                                AMPC_LOOP_STATE + N, NULL, &lb);
    if (st != AMPC_OK) goto done;
    ampc_value *iter = lb->outputs[AMPC_LOOP_ITER];
    const ampc_shape *is = &b->inputs[0]->shape;
    if (is->rank > 0) {
        ampc_value *rs[2] = {iter, ampc_pass_const_i64s(g, 1, (int64_t[]){is->rank}, is->dims)};
        iter = rs[1] ? node1(g, AMPC_OP_RESHAPE, name, rs, 2, NULL, 0) : NULL;
    }
    if (!(c->map[b->inputs[0]->id] = iter)) {
        st = AMPC_E_OOM;
        goto done;
    }
    for (int32_t j = 0; j < N; j++) c->map[b->inputs[2 + j]->id] = lb->outputs[AMPC_LOOP_STATE + j];
    if ((st = copy_nodes(c, 0, varying, 1)) != AMPC_OK) goto done;
    /* LoopEnd(iter, go, M, cond_out, the body's values, LoopBegin's values) */
    ampc_value *cond = mapped(c, b->outputs[0]);
    in[0] = lb->outputs[AMPC_LOOP_ITER];
    in[1] = lb->outputs[AMPC_LOOP_GO];
    in[2] = n->inputs[0];
    in[3] = const_true(cond) ? NULL : cond;
    for (int32_t j = 0; j < N; j++) {
        in[4 + j] = mapped(c, b->outputs[1 + j]);
        in[4 + N + j] = lb->outputs[AMPC_LOOP_STATE + j];
        if (!in[4 + j]) st = AMPC_E_UNSUPPORTED;
    }
    if (!cond) st = AMPC_E_UNSUPPORTED;
    snprintf(name, sizeof name, "%.120s/end", n->name);
    if (st == AMPC_OK)
        st = ampc_ir_node_build(g, AMPC_OP_LOOP_END, name, in, 4 + 2 * N, &carried, 1, N, NULL, &le);
    for (int32_t j = 0; j < N && st == AMPC_OK; j++) out[j] = le->outputs[j];
done:
    free(in), free(varying);
    return st == AMPC_OK || st == AMPC_E_OOM ? st : AMPC_E_UNSUPPORTED;
}

static ampc_status flatten_scan(copier *c, ampc_value **out) {
    const ampc_node *n = c->cf;
    ampc_graph *b = c->body;
    const ampc_scan_params sp = ampc_scan_params_of(n);
    const int32_t k = ampc_ir_node_captures(n), M = sp.n_scan_inputs;
    const int32_t N = n->n_inputs - k - M, K = n->n_outputs - N;
    if (M < 1 || N > 256) return AMPC_E_UNSUPPORTED;
    int64_t in_ax[64], out_ax[64];
    if (M > 64 || K > 64) return AMPC_E_UNSUPPORTED;
    for (int32_t j = 0; j < M; j++) {
        const int64_t a = ampc_scan_entry(sp.in_axes, j);
        in_ax[j] = a < 0 ? a + n->inputs[N + j]->shape.rank : a;
    }
    for (int32_t j = 0; j < K; j++) {
        const int64_t a = ampc_scan_entry(sp.out_axes, j);
        out_ax[j] = a < 0 ? a + n->outputs[N + j]->shape.rank : a;
    }
    const int64_t L = n->inputs[N]->shape.dims[in_ax[0]], nodes = live_nodes(b);
    if (L < 1 || L > MAX_COPIED || L * nodes > MAX_COPIED) return AMPC_E_UNSUPPORTED;
    ampc_value **scans = calloc((size_t)(K * L + 1), sizeof *scans);
    if (!scans) return AMPC_E_OOM;
    ampc_value *state[256];
    for (int32_t j = 0; j < N; j++) state[j] = n->inputs[j];
    const ampc_shape scalar = {0, {0}};
    ampc_status st = AMPC_OK;
    for (int64_t t = 0; t < L && st == AMPC_OK; t++) {
        memset(c->map, 0, (size_t)b->n_values * sizeof *c->map);
        for (int32_t j = 0; j < N; j++) c->map[b->inputs[j]->id] = state[j];
        for (int32_t j = 0; j < M && st == AMPC_OK; j++) { /* slice t (or L-1-t) along the axis */
            const int64_t pos = ampc_scan_entry(sp.in_dirs, j) ? L - 1 - t : t;
            ampc_value *in[2] = {n->inputs[N + j], const_i64(c->g, &scalar, pos)};
            const ampc_attr a = ampc_axis_attr_make(in_ax[j]);
            char name[160];
            snprintf(name, sizeof name, "%.120s/slice", n->name);
            ampc_value *s = in[1] ? node1(c->g, AMPC_OP_GATHER, name, in, 2, &a, 1) : NULL;
            if (!s) st = AMPC_E_UNSUPPORTED;
            c->map[b->inputs[N + j]->id] = s;
        }
        for (int32_t i = 0; i < k; i++) c->map[b->inputs[N + M + i]->id] = n->inputs[N + M + i];
        if (st == AMPC_OK) st = copy_body(c, t);
        for (int32_t j = 0; j < N && st == AMPC_OK; j++)
            if (!(state[j] = mapped(c, b->outputs[j]))) st = AMPC_E_UNSUPPORTED;
        for (int32_t j = 0; j < K && st == AMPC_OK; j++) { /* kept in the order of positions */
            const int64_t pos = ampc_scan_entry(sp.out_dirs, j) ? L - 1 - t : t;
            if (!(scans[j * L + pos] = mapped(c, b->outputs[N + j]))) st = AMPC_E_UNSUPPORTED;
        }
    }
    for (int32_t j = 0; j < N && st == AMPC_OK; j++) out[j] = state[j];
    for (int32_t j = 0; j < K && st == AMPC_OK; j++)
        if (!(out[N + j] = stack(c->g, n, scans + j * L, L, out_ax[j]))) st = AMPC_E_UNSUPPORTED;
    free(scans);
    return st;
}

/* One branch of an If copied, its outputs in out. */
static ampc_status copy_branch(copier *c, ampc_graph *branch, int64_t t, ampc_value **out) {
    const ampc_node *n = c->cf;
    const int32_t k = ampc_ir_node_captures(n);
    c->body = branch;
    ampc_value **map = calloc((size_t)branch->n_values + 1, sizeof *map);
    ampc_value **consts = calloc((size_t)branch->n_values + 1, sizeof *consts);
    ampc_status st = map && consts ? AMPC_OK : AMPC_E_OOM;
    c->map = map, c->consts = consts;
    for (int32_t i = 0; i < k && st == AMPC_OK; i++)
        map[branch->inputs[branch->n_inputs - k + i]->id] = n->inputs[n->n_inputs - k + i];
    if (st == AMPC_OK) st = copy_body(c, t);
    for (int32_t i = 0; i < n->n_outputs && st == AMPC_OK; i++)
        if (!(out[i] = mapped(c, branch->outputs[i]))) st = AMPC_E_UNSUPPORTED;
    free(map), free(consts);
    c->map = c->consts = NULL;
    return st;
}

static ampc_status flatten_if(copier *c, ampc_value **out) {
    const ampc_node *n = c->cf;
    ampc_graph *th = ampc_ir_node_body(n, "then_branch"), *el = ampc_ir_node_body(n, "else_branch");
    ampc_value *cond = n->inputs[0];
    if (!th || !el || !copyable(th) || !copyable(el) || n->n_outputs > 256) return AMPC_E_UNSUPPORTED;
    if (cond->data) /* a constant condition: its branch alone */
        return copy_branch(c, ampc_ref_load_i64(cond->data, cond->dtype, 0) ? th : el, 0, out);
    if (live_nodes(th) + live_nodes(el) > MAX_COPIED) return AMPC_E_UNSUPPORTED;
    ampc_value *t_out[256], *e_out[256];
    ampc_status st = copy_branch(c, th, 0, t_out);
    if (st == AMPC_OK) st = copy_branch(c, el, 1, e_out);
    if (st != AMPC_OK) return st;
    const ampc_shape empty = {1, {0}};
    const int64_t none = 0;
    ampc_value *shape = ampc_ir_const_new(c->g, NULL, AMPC_DTYPE_I64, &empty, &none);
    char name[160];
    snprintf(name, sizeof name, "%.120s/select", n->name);
    ampc_value *rin[2] = {cond, shape};
    ampc_value *c0 = cond->shape.rank == 0 ? cond
                     : shape ? node1(c->g, AMPC_OP_RESHAPE, name, rin, 2, NULL, 0)
                             : NULL;
    if (!c0) return AMPC_E_UNSUPPORTED;
    for (int32_t i = 0; i < n->n_outputs; i++) {
        ampc_value *w[3] = {c0, t_out[i], e_out[i]};
        if (!(out[i] = node1(c->g, AMPC_OP_WHERE, name, w, 3, NULL, 0))) return AMPC_E_UNSUPPORTED;
    }
    return AMPC_OK;
}

/* Node cf flattened into out (ampc_pass_replace_each: cf's outputs become Identity nodes of
 * them, keeping their names and places). */
static ampc_status flatten(ampc_graph *g, ampc_node *cf, ampc_value **out) {
    copier c = {.g = g, .cf = cf};
    if (cf->op == AMPC_OP_IF) return flatten_if(&c, out);
    c.body = ampc_ir_node_body(cf, "body");
    if (!c.body || !copyable(c.body)) return AMPC_E_UNSUPPORTED;
    c.map = calloc((size_t)c.body->n_values + 1, sizeof *c.map);
    c.consts = calloc((size_t)c.body->n_values + 1, sizeof *c.consts);
    const int32_t first_new = g->n_nodes, diags = g->diag.n;
    ampc_status st = !c.map || !c.consts ? AMPC_E_OOM
                     : cf->op == AMPC_OP_LOOP ? flatten_loop(&c, out)
                                              : flatten_scan(&c, out);
    if (st == AMPC_E_UNSUPPORTED && cf->op == AMPC_OP_LOOP) {
        ampc_pass_undo(g, first_new, diags); /* the copies flatten_loop made before it gave up */
        memset(c.consts, 0, ((size_t)c.body->n_values + 1) * sizeof *c.consts);
        st = mark_loop(&c, out);
    }
    free(c.map), free(c.consts);
    return st;
}

static bool has_bodies(const ampc_node *n) { return ampc_ir_op_has_bodies(n->op); }

/* g's control flow, that of its bodies first (innermost out), so that a body whose own If or
 * Loop is written into it can be copied in turn. */
static ampc_status flatten_graph(ampc_graph *g, bool *changed) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        for (int32_t a = 0; !n->dead && has_bodies(n) && a < n->n_attrs; a++) {
            if (n->attrs[a].kind != AMPC_ATTR_GRAPH || !n->attrs[a].graph) continue;
            bool inner = false;
            ampc_status st = flatten_graph(n->attrs[a].graph, &inner);
            if (st != AMPC_OK) return st;
            *changed |= inner;
        }
    }
    bool here = false;
    ampc_status st = ampc_pass_replace_each(g, has_bodies, flatten, "flattening", &here);
    *changed |= here;
    return st;
}

ampc_status ampc_pass_flatten_control(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    if (!cx->opt->gpu_build) return AMPC_OK;
    return flatten_graph(g, changed);
}
