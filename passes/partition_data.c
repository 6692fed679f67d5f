/*
 * partition_data.c — data parallelism: the model's batch split across the GPUs.
 *
 * With --gpus N --partition data, every GPU runs the whole model (weights replicated) on B / N of
 * the batch's B rows: GPU r takes rows [r B/N, (r+1) B/N) of every input and gives the same
 * rows of every output. The pass turns the graph into one GPU's share: the inputs' dim 0
 * becomes B / N and every node is inferred again, so code generation compiles the model once
 * for the smaller batch (codegen/ranks.c then gives every GPU that plan, sharing one copy of the
 * weights). g->data_ranks = N records it; it stays after the pipeline, in the IR text too.
 *
 * The split is right when each row of every output depends only on the same row of the inputs.
 * The pass checks that as it goes, value by value. A value is "batched" when it is computed
 * from a batched value (the inputs are); each node reading one:
 *   1. must not mix rows along dim 0 whatever the shapes say: recurrences and control flow
 *      (RNN, GRU, LSTM, If, Loop, Scan), an `axis` of 0 on its first input (Softmax, Concat,
 *      Gather, Split, Flatten, LayerNormalization...), CumSum along axis 0, a Transpose that
 *      moves dim 0, a Tile that repeats it;
 *   2. has its batch-baking constants rewritten: a Reshape's target (and an Expand's) whose
 *      first entry counts rows of the batch is divided by N (a target computed from Shape is
 *      computed again instead; its first entry must be a multiple of N);
 *   3. is inferred again, then every output must be its old shape with dim 0 divided by N and
 *      nothing else changed (a node whose outputs are known at compile time, Shape and the
 *      arithmetic on shapes, is evaluated again instead).
 * Anything else is refused with a message naming the node and the shapes found and expected;
 * the inputs (dim 0 = B, a multiple of N) and the outputs (dim 0 = B) are checked before any
 * change. Running the pass on its own output changes nothing.
 *
 * With --partition pipeline the same split makes the graph one micro-batch: B / M rows, M the
 * micro-batches asked (the options' micro_batches) or by default the largest divisor of B not above
 * 4 x the GPUs (a short pipeline fill: the GPUs idle (N-1)/(M+N-1) of a run). g->micro_batches
 * = M records it; passes/partition_pipeline.c then cuts the graph into stages.
 */
#include "passes.h"
#include "ir/ref/ref.h"

#include <stdlib.h>
#include <string.h>

/* The pass's working state: the split, and per value (by id) its shape before the split and
 * whether it is batched (computed from the inputs' rows) or only recomputed (shape data). */
typedef struct split {
    ampc_graph *g;
    int32_t n;          /* GPUs */
    int64_t batch;      /* B, the whole batch */
    int32_t n_values;   /* values before the pass (the constants it adds are untouched) */
    ampc_shape *old;    /* per value id: the shape before the split */
    uint8_t *state;     /* per value id: TOUCH_* */
    const char *mode;   /* how messages name the split: "--partition data" or the pipeline's */
} split;

#define MODE(s) ((s)->mode)

enum { TOUCH_NONE = 0, TOUCH_DATA = 1, TOUCH_BATCH = 2 };

static int state_of(const split *s, const ampc_value *v) {
    return v && v->id < s->n_values ? s->state[v->id] : TOUCH_NONE;
}

/* Checks the interface before any change: every input leads with the same batch B, a
 * multiple of n; every output leads with B. */
static ampc_status check_interface(const split *s, int64_t *batch) {
    ampc_graph *g = s->g;
    int32_t n = s->n;
    char sh[AMPC_SHAPE_STR_MAX];
    if (g->n_inputs == 0)
        return AMPC_FAIL(g, NULL, AMPC_E_SHAPE, "%s splits the inputs' batch over "
                         "%d GPUs, but the graph has no input", MODE(s), n);
    const ampc_value *first = g->inputs[0];
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const ampc_value *v = g->inputs[i];
        if (v->shape.rank == 0)
            return AMPC_FAIL(g, NULL, AMPC_E_SHAPE, "%s: input '%s' is a scalar, "
                             "expected a batch dim first (dim 0, split over the %d GPUs)", MODE(s),
                             v->name, n);
        if (i == 0 && v->shape.dims[0] % n != 0)
            return AMPC_FAIL(g, NULL, AMPC_E_SHAPE, "%s: the batch (dim 0 of input "
                             "'%s' %s) is %lld, not a multiple of the %d GPUs: each GPU takes "
                             "an equal share (use --shape %s=... with a batch divisible by %d)", MODE(s),
                             v->name, ampc_shape_str(&v->shape, sh, sizeof sh),
                             (long long)v->shape.dims[0], n, v->name, n);
        if (v->shape.dims[0] != first->shape.dims[0])
            return AMPC_FAIL(g, NULL, AMPC_E_SHAPE, "%s: input '%s' is %s, dim 0 "
                             "%lld, but the batch (dim 0 of input '%s') is %lld: every input "
                             "must lead with the batch", MODE(s), v->name,
                             ampc_shape_str(&v->shape, sh, sizeof sh),
                             (long long)v->shape.dims[0], first->name,
                             (long long)first->shape.dims[0]);
    }
    *batch = first->shape.dims[0];
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const ampc_value *v = g->outputs[i];
        if (v->shape.rank == 0 || v->shape.dims[0] != *batch)
            return AMPC_FAIL(g, NULL, AMPC_E_SHAPE, "%s: output '%s' is %s, "
                             "expected dim 0 to be the batch %lld (each GPU gives its rows of "
                             "every output)", MODE(s), v->name, ampc_shape_str(&v->shape, sh, sizeof sh),
                             (long long)*batch);
    }
    return AMPC_OK;
}

/* The axis an `axis` attribute names on a rank-r tensor (negative counts from the end). */
static int64_t resolve_axis(int64_t a, int32_t r) { return a < 0 ? a + r : a; }

/* The first entry of a constant int tensor (i64 or i32; a scalar or a list), or false. */
static bool first_entry(const ampc_value *v, int64_t *out) {
    if (!v || !v->data || v->shape.rank > 1 || ampc_ir_numel(v) < 1) return false;
    if (v->dtype == AMPC_DTYPE_I64) *out = ((const int64_t *)v->data)[0];
    else if (v->dtype == AMPC_DTYPE_I32) *out = ((const int32_t *)v->data)[0];
    else return false;
    return true;
}

/* 1. Refuses node nd, which reads a batched value, when it mixes rows along dim 0. */
static ampc_status refuse_mixing(split *s, const ampc_node *nd) {
    ampc_graph *g = s->g;
    const ampc_value *x = nd->inputs[0];
    bool x_batched = state_of(s, x) == TOUCH_BATCH;
    switch (nd->op) {
    case AMPC_OP_RNN: case AMPC_OP_GRU: case AMPC_OP_LSTM:
    case AMPC_OP_IF: case AMPC_OP_LOOP: case AMPC_OP_SCAN:
        return AMPC_FAIL(g, nd, AMPC_E_UNSUPPORTED, "%s: %s reads a tensor computed "
                         "from the batch; splitting the batch through recurrences and control "
                         "flow is not built (their batch need not be dim 0)", MODE(s),
                         ampc_op_get(nd->op)->onnx);
    default: break;
    }
    if (!x_batched) return AMPC_OK;
    int64_t v;
    if (ampc_axis_given(nd) && resolve_axis(ampc_axis_attr(nd), x->shape.rank) == 0)
        return AMPC_FAIL(g, nd, AMPC_E_UNSUPPORTED, "%s: %s works along axis 0 of "
                         "'%s', the batch: each GPU holds only its rows, so the batch cannot be "
                         "split", MODE(s), ampc_op_get(nd->op)->onnx, x->name);
    if (nd->op == AMPC_OP_CUMSUM && nd->n_inputs > 1 && first_entry(nd->inputs[1], &v) &&
        resolve_axis(v, x->shape.rank) == 0)
        return AMPC_FAIL(g, nd, AMPC_E_UNSUPPORTED, "%s: CumSum along axis 0 of "
                         "'%s' sums over the batch, which the GPUs hold in parts", MODE(s), x->name);
    if (nd->op == AMPC_OP_TRANSPOSE) {
        int64_t perm[AMPC_MAX_RANK];
        const int32_t r = x->shape.rank;
        bool moves = r > 0 && (!ampc_transpose_perm(nd, r, perm) || perm[0] != 0);
        if (moves)
            return AMPC_FAIL(g, nd, AMPC_E_UNSUPPORTED, "%s: Transpose moves dim 0 "
                             "of '%s' (the batch) away from the front, so the GPUs' rows would "
                             "not be rows of the output", MODE(s), x->name);
    }
    if (nd->op == AMPC_OP_TILE && first_entry(nd->inputs[1], &v) && v != 1)
        return AMPC_FAIL(g, nd, AMPC_E_UNSUPPORTED, "%s: Tile repeats dim 0 of "
                         "'%s' (the batch) %lld times; each GPU would repeat only its rows", MODE(s),
                         x->name, (long long)v);
    return AMPC_OK;
}

/* A copy of constant int tensor c with its first entry set to v (named after c). */
static ampc_value *with_first(ampc_graph *g, const ampc_value *c, int64_t v, int32_t n) {
    size_t bytes = ampc_ir_nbytes(c);
    void *d = malloc(bytes ? bytes : 1);
    if (!d) return NULL;
    memcpy(d, c->data, bytes);
    if (c->dtype == AMPC_DTYPE_I64) ((int64_t *)d)[0] = v;
    else ((int32_t *)d)[0] = (int32_t)v;
    char name[200];
    snprintf(name, sizeof name, "%.160s_per_gpu%d", c->name, n);
    ampc_value *r = ampc_ir_const_new(g, name, c->dtype, &c->shape, d);
    free(d);
    return r;
}

/* 2. A Reshape's or Expand's constant target (a value the model stores, not one computed from
 * shapes, which is computed again) whose first entry counts rows of the batch: divided by n. */
static ampc_status rewrite_target(split *s, ampc_node *nd) {
    if ((nd->op != AMPC_OP_RESHAPE && nd->op != AMPC_OP_EXPAND) || nd->n_inputs < 2) return AMPC_OK;
    const ampc_value *x = nd->inputs[0], *t = nd->inputs[1];
    int64_t t0;
    if (state_of(s, x) != TOUCH_BATCH || !t || t->producer || t->shape.rank != 1 ||
        !first_entry(t, &t0))
        return AMPC_OK;
    if (nd->op == AMPC_OP_EXPAND && (t->shape.dims[0] != x->shape.rank || t0 <= 1))
        return AMPC_OK; /* leading new dims (refused by the shape check) or a broadcast 1 */
    if (t0 <= 0) return AMPC_OK; /* -1 or 0 (copy): follows the input */
    if (t0 % s->n != 0)
        return AMPC_FAIL(s->g, nd, AMPC_E_SHAPE, "%s: the %s target '%s' starts "
                         "with %lld rows, not a multiple of the %d GPUs: its first dim cannot be "
                         "split with the batch", MODE(s), ampc_op_get(nd->op)->onnx, t->name,
                         (long long)t0, s->n);
    ampc_value *c = with_first(s->g, t, t0 / s->n, s->n);
    if (!c) return AMPC_FAIL(s->g, nd, AMPC_E_OOM, "out of host memory");
    nd->inputs[1] = c;
    return AMPC_OK;
}

/* After a failed inference: says which constant read by nd bakes in the batch. */
static ampc_status explain_infer(split *s, const ampc_node *nd, ampc_status st) {
    const char *culprit = NULL;
    for (int32_t i = 0; i < nd->n_inputs && !culprit; i++) {
        const ampc_value *v = nd->inputs[i];
        if (v && v->data && state_of(s, v) == TOUCH_NONE && v->shape.rank > 0 &&
            v->shape.dims[0] == s->batch)
            culprit = v->name;
    }
    if (culprit)
        return AMPC_FAIL(s->g, nd, st, "%s: with %lld rows per GPU (the batch %lld "
                         "over %d GPUs) this node's inputs no longer fit: the constant '%s' has "
                         "the whole batch %lld as dim 0", MODE(s), (long long)(s->batch / s->n),
                         (long long)s->batch, s->n, culprit, (long long)s->batch);
    return AMPC_FAIL(s->g, nd, st, "%s: with %lld rows per GPU (the batch %lld over "
                     "%d GPUs) this node's inputs no longer fit (above); a constant it reads "
                     "probably bakes the batch in", MODE(s), (long long)(s->batch / s->n),
                     (long long)s->batch, s->n);
}

/* 3. Checks nd's outputs after inference: each batched, with dim 0 divided by n. */
static ampc_status check_outputs(split *s, const ampc_node *nd) {
    char was[AMPC_SHAPE_STR_MAX], got[AMPC_SHAPE_STR_MAX], want[AMPC_SHAPE_STR_MAX];
    for (int32_t j = 0; j < nd->n_outputs; j++) {
        ampc_value *v = nd->outputs[j];
        const ampc_shape *o = &s->old[v->id];
        ampc_shape expect = *o;
        bool ok = o->rank > 0 && o->dims[0] % s->n == 0;
        if (ok) expect.dims[0] = o->dims[0] / s->n;
        if (ok && ampc_shape_eq(&v->shape, &expect)) {
            s->state[v->id] = TOUCH_BATCH;
            continue;
        }
        return AMPC_FAIL(s->g, nd, AMPC_E_SHAPE, "%s: output '%s' is %s for the "
                         "whole batch and %s for one GPU's %lld rows, expected %s: only dim 0 "
                         "may follow the batch (this node mixes rows, or a constant it reads "
                         "bakes the batch in)", MODE(s), v->name, ampc_shape_str(o, was, sizeof was),
                         ampc_shape_str(&v->shape, got, sizeof got),
                         (long long)(s->batch / s->n),
                         ok ? ampc_shape_str(&expect, want, sizeof want) : "dim 0 divisible by the GPUs");
    }
    return AMPC_OK;
}

/* Re-infers node nd if it reads a changed value. */
static ampc_status split_node(split *s, ampc_node *nd) {
    bool touched = false, batched = false;
    for (int32_t i = 0; i < nd->n_inputs; i++) {
        const ampc_value *v = nd->inputs[i];
        if (!v) continue;
        touched |= state_of(s, v) != TOUCH_NONE;
        batched |= state_of(s, v) == TOUCH_BATCH;
    }
    if (!touched) return AMPC_OK;
    ampc_status st = batched ? refuse_mixing(s, nd) : AMPC_OK;
    if (st == AMPC_OK && batched) st = rewrite_target(s, nd);
    if (st != AMPC_OK) return st;
    bool known = nd->n_outputs > 0;
    for (int32_t j = 0; j < nd->n_outputs; j++) known &= nd->outputs[j]->data != NULL;
    for (int32_t j = 0; j < nd->n_outputs; j++) nd->outputs[j]->data = NULL; /* arena: no free */
    if ((st = ampc_ir_node_infer(s->g, nd)) != AMPC_OK) return explain_infer(s, nd, st);
    if (known) { /* shape arithmetic: known again, with the new numbers */
        if ((st = ampc_ref_fold_node(s->g, nd)) != AMPC_OK) return st;
        for (int32_t j = 0; j < nd->n_outputs; j++) s->state[nd->outputs[j]->id] = TOUCH_DATA;
        return AMPC_OK;
    }
    if (!batched) { /* computed from shape data only: it must keep its shape */
        for (int32_t j = 0; j < nd->n_outputs; j++) {
            ampc_value *v = nd->outputs[j];
            if (!ampc_shape_eq(&v->shape, &s->old[v->id])) return check_outputs(s, nd);
            s->state[v->id] = TOUCH_DATA;
        }
        return AMPC_OK;
    }
    return check_outputs(s, nd);
}

/* Splits g's batch into n equal parts (s->n, s->mode set): the graph becomes one part. */
static ampc_status split_batch(split *sp) {
    ampc_graph *g = sp->g;
    split s = *sp;
    ampc_status st = check_interface(&s, &s.batch);
    if (st != AMPC_OK) return st;
    s.old = malloc((size_t)g->n_values * sizeof *s.old + 1);
    s.state = calloc((size_t)g->n_values + 1, 1);
    if (!s.old || !s.state) {
        free(s.old);
        free(s.state);
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    }
    s.n_values = g->n_values;
    for (int32_t i = 0; i < s.n_values; i++) s.old[i] = g->values[i]->shape;
    for (int32_t i = 0; i < g->n_inputs; i++) {
        g->inputs[i]->shape.dims[0] /= s.n;
        s.state[g->inputs[i]->id] = TOUCH_BATCH;
    }
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++)
        if (!g->nodes[i]->dead) st = split_node(&s, g->nodes[i]);
    for (int32_t i = 0; i < g->n_outputs && st == AMPC_OK; i++) {
        const ampc_value *v = g->outputs[i];
        if (state_of(&s, v) != TOUCH_BATCH)
            st = AMPC_FAIL(g, NULL, AMPC_E_SHAPE, "%s: output '%s' is not computed "
                           "from the inputs' batch (a constant, or a value of shapes only): each "
                           "GPU could not give its rows of it", MODE(&s), v->name);
    }
    free(s.old);
    free(s.state);
    return st;
}

/* The micro-batches of a pipeline: the number asked (refused, naming the input, when it does
 * not divide the batch), else the largest divisor of the batch not above 4 stages. */
static ampc_status pick_micro_batches(ampc_graph *g, const ampc_pipeline_options *o,
                                      int32_t *m) {
    if (g->n_inputs == 0 || g->inputs[0]->shape.rank == 0) { /* check_interface says why */
        *m = o->micro_batches > 0 ? o->micro_batches : 2;
        return AMPC_OK;
    }
    const ampc_value *x = g->inputs[0];
    int64_t b = x->shape.dims[0];
    char sh[AMPC_SHAPE_STR_MAX];
    if (o->micro_batches > 0) {
        if (b % o->micro_batches != 0)
            return AMPC_FAIL(g, NULL, AMPC_E_SHAPE, "--partition pipeline: the batch (dim 0 of "
                             "input '%s' %s) is %lld, not a multiple of the %d micro-batches "
                             "(--micro-batches): each micro-batch takes an equal share; give a "
                             "divisor of %lld", x->name, ampc_shape_str(&x->shape, sh, sizeof sh),
                             (long long)b, o->micro_batches, (long long)b);
        *m = o->micro_batches;
        return AMPC_OK;
    }
    int64_t best = 1;
    for (int64_t d = 1; d <= 4 * (int64_t)o->gpus && d <= b; d++)
        if (b % d == 0) best = d;
    *m = (int32_t)best;
    return AMPC_OK;
}

ampc_status ampc_pass_partition_data(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    const ampc_pipeline_options *o = ampc_pass_opt(cx);
    if (o->gpus < 2) return AMPC_OK;
    if (o->partition == AMPC_PARTITION_PIPELINE) {
        if (g->micro_batches > 0) return AMPC_OK; /* already one micro-batch */
        int32_t m = 0;
        ampc_status st = pick_micro_batches(g, o, &m);
        if (st != AMPC_OK) return st;
        if (m > 1) {
            char mode[160];
            snprintf(mode, sizeof mode, "--partition pipeline (the batch in %d micro-batches, "
                     "split as --partition data splits it over GPUs)", m);
            split s = {.g = g, .n = m, .mode = mode};
            if ((st = split_batch(&s)) != AMPC_OK) return st;
        }
        g->micro_batches = m;
        *changed = m > 1;
        return AMPC_OK;
    }
    if (o->partition != AMPC_PARTITION_DATA) return AMPC_OK;
    if (g->data_ranks == o->gpus) return AMPC_OK; /* already one GPU's share */
    if (g->data_ranks > 1)
        return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "--partition data over %d GPUs: the graph "
                         "is already one GPU's share of a batch split over %d", o->gpus,
                         g->data_ranks);
    split s = {.g = g, .n = o->gpus, .mode = "--partition data"};
    ampc_status st = split_batch(&s);
    if (st != AMPC_OK) return st;
    g->data_ranks = s.n;
    *changed = true;
    return AMPC_OK;
}
