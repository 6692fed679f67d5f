/*
 * test_partition_pipeline.c — pipeline parallelism (--gpus N --partition pipeline): a stack of
 * residual MLP blocks, optionally with a second input read by every block (a mask-like side
 * input) and a long skip (block 0's output read by the last block), cut over 2 and 4 GPUs:
 *   - every node runs on one stage, the stages are consecutive in node order, each stage's
 *     estimated cost is near a 1/N share, and every value a stage reads comes from its own
 *     stage, a graph input, a constant or an ampc.PeerCopy from the stage before it;
 *   - a plain stack hands one activation across each cut; the long skip is copied along the
 *     chain of stages;
 *   - on the reference evaluator the pipelined graph run on each micro-batch's rows gives exactly
 *     those rows of the whole model's output;
 *   - the refusals: a batch that --micro-batches does not divide (naming the input), a graph with
 *     fewer nodes than stages, micro-batches without a pipeline;
 *   - the IR text round trip, and a second run changing nothing;
 *   - the plans (no GPU): one per stage, peer copies first and from the stage before, one
 *     micro-batch's io per rank and the whole batch's for the model, each stage's weights only
 *     on its GPU, the plan check passing and refusing a misplaced peer copy.
 */
#include "support.h"

#include "compiler/module.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 8, W = 16, HID = 32 };

/* x [b, W] through `layers` blocks x = x + relu(x @ W1 + b1 [+ side]) @ W2; with `side` a second
 * input s [b, HID] added inside every block; with `skip` the last block also adds block 0's
 * output. */
static ampc_graph *stack(int64_t b, int layers, bool side, bool skip) {
    ampc_graph *g = ampc_graph_create("stack");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(b, W));
    ampc_value *s = side ? t_input(g, "s", AMPC_DTYPE_F32, SHAPE(b, HID)) : NULL, *first = NULL;
    for (int l = 0; l < layers; l++) {
        double w1[W * HID], b1[HID], w2[HID * W];
        for (int i = 0; i < W * HID; i++) w1[i] = sin(i * 0.37 + l) * 0.3;
        for (int i = 0; i < HID; i++) b1[i] = 0.05 * i - 0.4 + 0.1 * l;
        for (int i = 0; i < HID * W; i++) w2[i] = cos(i * 0.23 + l) * 0.2;
        ampc_value *h = ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(W, HID), w1)),
                                 t_const_f32(g, SHAPE(HID), b1));
        if (s) h = ampc_add(g, h, s);
        ampc_value *y = ampc_matmul(g, ampc_relu(g, h), t_const_f32(g, SHAPE(HID, W), w2));
        if (skip && l == layers - 1) y = ampc_add(g, y, first);
        x = ampc_add(g, x, y);
        if (l == 0) first = x;
    }
    ampc_output(g, x, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* What the last pipeline run with pipeline() reported (each test runs in a process of its own). */
static ampc_pipeline_report report;

static ampc_pipeline_options pipeline(int32_t n, int32_t micro) {
    return (ampc_pipeline_options){.verify = true, .gpus = n, .partition = AMPC_PARTITION_PIPELINE,
                                   .micro_batches = micro, .report = &report};
}

static int64_t rank_of(const ampc_node *nd) {
    const ampc_attr *a = ampc_ir_attr_find(nd, "rank");
    cr_assert(a && a->kind == AMPC_ATTR_INT, "node '%s' has no rank", nd->name);
    return a->i;
}

/* The structure: ranks in [0, n) never decreasing, copies between consecutive stages with their
 * input's shape, every read local to its stage. Returns the number of copies. */
static int32_t check_stages(const ampc_graph *g, int32_t n) {
    int64_t prev = 0;
    int32_t copies = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *nd = g->nodes[i];
        if (nd->dead) continue;
        int64_t r = rank_of(nd);
        cr_assert(r >= 0 && r < n, "node '%s' has rank %lld of %d", nd->name, (long long)r, n);
        cr_assert_geq(r, prev, "node '%s' (rank %lld) after a node of rank %lld", nd->name,
                      (long long)r, (long long)prev);
        prev = r;
        if (nd->op == AMPC_OP_PEER_COPY) {
            copies++;
            const ampc_attr *from = ampc_ir_attr_find(nd, "from");
            cr_assert(from && from->i == r - 1, "copy '%s' into %lld from %lld", nd->name,
                      (long long)r, from ? (long long)from->i : -1LL);
            cr_assert(ampc_shape_eq(&nd->inputs[0]->shape, &nd->outputs[0]->shape));
            cr_assert_eq(rank_of(nd->inputs[0]->producer), r - 1, "copy '%s' reads stage %lld",
                         nd->name, (long long)rank_of(nd->inputs[0]->producer));
            continue;
        }
        for (int32_t j = 0; j < nd->n_inputs; j++) {
            const ampc_value *v = nd->inputs[j];
            if (!v || !v->producer) continue; /* an input or a constant */
            cr_assert_eq(rank_of(v->producer), r, "node '%s' (stage %lld) reads '%s' of stage "
                         "%lld without a copy", nd->name, (long long)r, v->name,
                         (long long)rank_of(v->producer));
        }
    }
    cr_assert_eq(prev, n - 1, "the last node runs on stage %lld of %d", (long long)prev, n);
    for (int32_t i = 0; i < g->n_outputs; i++)
        cr_assert_eq(rank_of(g->outputs[i]->producer), n - 1, "output '%s' is not on the last "
                     "stage", g->outputs[i]->name);
    return copies;
}

/* The whole model on x (and s) against the pipelined graph on each micro-batch's rows. */
static void rows_match(ampc_graph *whole, ampc_graph *piped, bool side) {
    int32_t m = piped->micro_batches;
    int64_t rows = B / m;
    float x[B * W], s[B * HID];
    for (int i = 0; i < B * W; i++) x[i] = (float)cos(i * 0.41) - 0.1f;
    for (int i = 0; i < B * HID; i++) s[i] = (float)sin(i * 0.13) * 0.5f;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), x),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(B, HID), s)}, ref = {0};
    cr_assert_eq(ampc_graph_evaluate(whole, in, side ? 2 : 1, &ref, 1), AMPC_OK, "%s",
                 ampc_graph_errors(whole));
    for (int32_t k = 0; k < m; k++) {
        ampc_tensor part[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(rows, W), x + k * rows * W),
                               t_tensor(AMPC_DTYPE_F32, SHAPE(rows, HID), s + k * rows * HID)};
        ampc_tensor got = {0};
        cr_assert_eq(ampc_graph_evaluate(piped, part, side ? 2 : 1, &got, 1), AMPC_OK, "%s",
                     ampc_graph_errors(piped));
        ampc_tensor want = t_tensor(AMPC_DTYPE_F32, SHAPE(rows, W), (float *)ref.data + k * rows * W);
        char msg[512];
        cr_assert(t_tensors_close(&got, &want, 1e-6, 1e-7, "y", msg, sizeof msg),
                  "micro-batch %d of %d: %s", k, m, msg);
        ampc_tensor_free(&got);
    }
    ampc_tensor_free(&ref);
}

/* A stack of `layers` blocks over n GPUs: structure, balance, crossings, numbers. */
static void pipelines(int32_t n, int layers, bool side, bool skip) {
    ampc_graph *whole = stack(B, layers, side, skip), *piped = stack(B, layers, side, skip);
    ampc_pipeline_options o = pipeline(n, 0), one = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(piped, &o), AMPC_OK, "%s", ampc_graph_errors(piped));
    cr_assert_eq(ampc_graph_optimize(whole, &one), AMPC_OK, "%s", ampc_graph_errors(whole));
    cr_assert_eq(piped->pipeline_stages, n);
    cr_assert_eq(piped->micro_batches, B, "default micro-batches %d (batch %d, %d GPUs)",
                 piped->micro_batches, B, n);
    cr_assert_eq(piped->inputs[0]->shape.dims[0], B / piped->micro_batches);
    int32_t copies = check_stages(piped, n);
    cr_assert_eq(report.n_stages, n);
    double total = 0, top = 0;
    int32_t crossing = 0;
    for (int32_t s = 0; s < n; s++) {
        const ampc_pipeline_stage *st = &report.stages[s];
        cr_assert_gt(st->n_nodes, 0);
        total += st->cost;
        if (st->cost > top) top = st->cost;
        crossing += st->n_cross;
        if (s + 1 < n) cr_assert_gt(st->n_cross, 0, "stage %d hands nothing on", s);
        if (!skip && s + 1 < n) /* one activation of the residual stream, one micro-batch's */
            cr_assert_eq(st->cross_bytes, (int64_t)(B / piped->micro_batches) * W * 4,
                         "stage %d hands on %lld bytes: %s", s, (long long)st->cross_bytes,
                         st->crossing);
    }
    cr_assert_eq(crossing, copies, "%d tensors cross the cuts, %d copies", crossing, copies);
    if (!skip) cr_assert_eq(copies, n - 1, "%d copies for %d cuts", copies, n - 1);
    else cr_assert_gt(copies, n - 1, "the skip is copied along the stages");
    /* layers divisible by n: every cut at a block boundary, the stages within one block's
     * share of each other */
    cr_assert_leq(top, total / n * (1 + 1.0 / (layers / n)) + 1, "stage cost %g of %g", top,
                  total);
    rows_match(whole, piped, side);
    ampc_graph_destroy(whole);
    ampc_graph_destroy(piped);
}

Test(partition_pipeline, stack_over_two_gpus) { pipelines(2, 8, false, false); }
Test(partition_pipeline, stack_over_four_gpus) { pipelines(4, 8, false, false); }
Test(partition_pipeline, side_input_read_by_every_stage) { pipelines(2, 6, true, false); }
Test(partition_pipeline, long_skip_copied_along_the_stages) { pipelines(4, 8, false, true); }

Test(partition_pipeline, skip_is_chained_through_the_stages) {
    ampc_graph *g = stack(B, 8, false, true);
    ampc_pipeline_options o = pipeline(4, 2);
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(g->micro_batches, 2);
    /* every copy into stage r walks back, one stage per copy, to the value's producer; block
     * 0's output, read by the last block, crosses two cuts at least */
    int32_t chain = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *nd = g->nodes[i];
        if (nd->op != AMPC_OP_PEER_COPY) continue;
        int32_t len = 0;
        const ampc_node *c = nd;
        for (; c->op == AMPC_OP_PEER_COPY; c = c->inputs[0]->producer) len++;
        cr_assert_eq(rank_of(c), rank_of(nd) - len, "copy '%s' into stage %lld: %d copies back "
                     "from '%s' of stage %lld", nd->name, (long long)rank_of(nd), len, c->name,
                     (long long)rank_of(c));
        if (len > chain) chain = len;
    }
    cr_assert_geq(chain, 2, "longest chain of copies %d", chain);
    ampc_graph_destroy(g);
}

Test(partition_pipeline, micro_batches_that_do_not_divide_the_batch) {
    ampc_graph *g = stack(B, 4, false, false);
    ampc_pipeline_options o = pipeline(2, 3);
    cr_assert_neq(ampc_graph_optimize(g, &o), AMPC_OK);
    t_expect_diag(g, "input 'x'");
    t_expect_diag(g, "not a multiple of the 3 micro-batches");
    ampc_graph_destroy(g);
}

Test(partition_pipeline, fewer_nodes_than_stages) {
    ampc_graph *g = ampc_graph_create("one");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 4));
    ampc_output(g, ampc_relu(g, x), "y");
    ampc_pipeline_options o = pipeline(2, 0);
    cr_assert_neq(ampc_graph_optimize(g, &o), AMPC_OK);
    t_expect_diag(g, "fewer than the 2 stages");
    ampc_graph_destroy(g);
}

Test(partition_pipeline, micro_batches_need_a_pipeline) {
    ampc_graph *g = stack(B, 2, false, false);
    ampc_pipeline_options o = {.verify = true, .gpus = 2, .partition = AMPC_PARTITION_DATA,
                               .micro_batches = 2};
    cr_assert_neq(ampc_graph_optimize(g, &o), AMPC_OK);
    t_expect_diag(g, "micro-batches are for --partition pipeline");
    ampc_graph_destroy(g);
}

Test(partition_pipeline, prints_back_and_a_second_run_changes_nothing) {
    ampc_graph *g = stack(B, 4, true, false);
    ampc_pipeline_options o = pipeline(2, 4);
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    char *text = ampc_graph_to_text(g, true);
    cr_assert(strstr(text, "graph \"stack\" micro_batches 4 stages 2 {"), "%s", text);
    cr_assert(strstr(text, "ampc.PeerCopy"), "%s", text);
    ampc_graph *back = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &back, &err), AMPC_OK, "%s", err);
    cr_assert_eq(back->micro_batches, 4);
    cr_assert_eq(back->pipeline_stages, 2);
    char *again = ampc_graph_to_text(back, true);
    cr_assert_str_eq(again, text);
    bool changed = true;
    ampc_pipeline_options po = {.gpus = 2, .partition = AMPC_PARTITION_PIPELINE};
    const ampc_pass_ctx cx = {.opt = &po};
    cr_assert_eq(ampc_pass_partition_data(back, &cx, &changed), AMPC_OK, "%s",
                 ampc_graph_errors(back));
    cr_assert_not(changed);
    cr_assert_eq(ampc_pass_partition_pipeline(back, &cx, &changed), AMPC_OK, "%s",
                 ampc_graph_errors(back));
    cr_assert_not(changed);
    po.gpus = 4;
    cr_assert_neq(ampc_pass_partition_pipeline(back, &cx, &changed), AMPC_OK);
    t_expect_diag(back, "already cut into 2 stages");
    free(text);
    free(again);
    ampc_graph_destroy(back);
    ampc_graph_destroy(g);
}

/* ---- the plans (no GPU) ---------------------------------------------------------------------- */

static ampc_module *compile_pipeline(ampc_graph *g, int32_t gpus, int32_t micro) {
    static const int32_t sm80 = 80;
    ampc_pipeline_options po = pipeline(gpus, micro);
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .pipeline = &po};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    return m;
}

Test(partition_pipeline, one_plan_per_stage) {
    ampc_graph *g = stack(B, 4, true, false), *one = stack(B, 4, true, false);
    ampc_module *m = compile_pipeline(g, 2, 4), *whole = NULL;
    static const int32_t sm80 = 80;
    ampc_compile_options wo = {.archs = &sm80, .n_archs = 1, .cache_dir = ""};
    cr_assert_eq(ampc_compile(one, &wo, &whole), AMPC_OK, "%s", ampc_graph_errors(one));
    const ampc_rt_plan *p = &m->cg->plan;
    cr_assert_eq(p->n_ranks, 2);
    cr_assert_eq(p->micro_batches, 4);
    cr_assert_not(p->split_batch);
    cr_assert_eq(p->inputs[0].shape.dims[0], B);
    cr_assert_eq(p->outputs[0].shape.dims[0], B);
    int64_t weights = 0;
    for (int32_t r = 0; r < 2; r++) {
        const ampc_rt_plan *q = &p->ranks[r];
        cr_assert_eq(q->micro_batches, 4);
        cr_assert_eq(q->inputs[0].shape.dims[0], B / 4);
        cr_assert_eq(q->inputs[0].ref.bytes * 4, p->inputs[0].ref.bytes);
        int32_t copies = 0, computed = 0;
        for (int32_t i = 0; i < q->n_steps; i++) {
            if (q->steps[i].kind == AMPC_RT_STEP_PEER_COPY) {
                cr_assert_eq(computed, 0, "rank %d: a peer copy after computing steps", r);
                cr_assert_eq(q->steps[i].peer.from, r - 1);
                cr_assert_eq(q->steps[i].peer.src.bytes, (int64_t)(B / 4) * W * 4);
                copies++;
            } else {
                computed++;
            }
            cr_assert_neq(q->steps[i].kind, AMPC_RT_STEP_ALLREDUCE);
        }
        cr_assert_eq(copies, r == 0 ? 0 : 1, "rank %d has %d peer copies", r, copies);
        cr_assert_gt(computed, 0);
        cr_assert_lt(q->weights_bytes, whole->cg->plan.weights_bytes, "rank %d holds %lld of "
                     "%lld bytes of weights", r, (long long)q->weights_bytes,
                     (long long)whole->cg->plan.weights_bytes);
        weights += q->weights_bytes;
    }
    cr_assert_leq(weights, whole->cg->plan.weights_bytes + 2 * 256 * 16,
                  "the stages hold %lld bytes, the whole model %lld", (long long)weights,
                  (long long)whole->cg->plan.weights_bytes);
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(p, &err), AMPC_OK, "%s", err ? err : "");
    /* a peer copy out of order is refused */
    ampc_rt_plan bad_ranks[2] = {p->ranks[0], p->ranks[1]};
    ampc_rt_step *steps = malloc((size_t)p->ranks[1].n_steps * sizeof *steps);
    memcpy(steps, p->ranks[1].steps, (size_t)p->ranks[1].n_steps * sizeof *steps);
    ampc_rt_step first = steps[0];
    steps[0] = steps[p->ranks[1].n_steps - 1];
    steps[p->ranks[1].n_steps - 1] = first;
    bad_ranks[1].steps = steps;
    ampc_rt_plan bad = *p;
    bad.ranks = bad_ranks;
    cr_assert_neq(ampc_rt_plan_check(&bad, &err), AMPC_OK);
    cr_assert(err && strstr(err, "after computing steps"), "%s", err ? err : "");
    free(err);
    free(steps);
    ampc_module_destroy(m);
    ampc_module_destroy(whole);
    ampc_graph_destroy(g);
    ampc_graph_destroy(one);
}

/* A peer copy reads the sending rank's arena: its src is checked against that rank's arena, not
 * the receiving rank's (a larger arena on the receiver must not let it read past the sender's). */
Test(partition_pipeline, plan_check_bounds_a_peer_copy_by_the_senders_arena) {
    ampc_graph *g = stack(B, 4, false, false);
    ampc_module *m = compile_pipeline(g, 2, 2);
    const ampc_rt_plan *p = &m->cg->plan;
    ampc_rt_plan ranks[2] = {p->ranks[0], p->ranks[1]};
    int32_t n = ranks[1].n_steps;
    ampc_rt_step *steps = malloc((size_t)n * sizeof *steps);
    memcpy(steps, ranks[1].steps, (size_t)n * sizeof *steps);
    cr_assert_eq(steps[0].kind, AMPC_RT_STEP_PEER_COPY);
    ranks[1].arena_bytes = ranks[0].arena_bytes + 4096;
    steps[0].peer.src.offset = ranks[0].arena_bytes; /* past the sender's arena */
    ranks[1].steps = steps;
    ampc_rt_plan bad = *p;
    bad.ranks = ranks;
    char *err = NULL;
    cr_assert_neq(ampc_rt_plan_check(&bad, &err), AMPC_OK, "a copy past rank 0's arena passed");
    cr_assert(err && strstr(err, "peer copy src") && strstr(err, "outside the arena"), "%s",
              err ? err : "");
    free(err);
    free(steps);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* x [b, W] through `layers` blocks; the last block adds sv, a view (Reshape) of the input
 * s [b, 2, HID / 2] made before the first block: the view crosses every cut, so its copy reads
 * the input's own bytes in stage 0's arena, though no step of stage 0 reads s. */
static ampc_graph *late_view(int64_t b, int layers) {
    ampc_graph *g = ampc_graph_create("late_view");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(b, W));
    ampc_value *s = t_input(g, "s", AMPC_DTYPE_F32, SHAPE(b, 2, HID / 2));
    static const int64_t to[2] = {0, HID};
    ampc_value *sv = ampc_reshape(g, s, to, 2);
    for (int l = 0; l < layers; l++) {
        double w1[W * HID], b1[HID], w2[HID * W];
        for (int i = 0; i < W * HID; i++) w1[i] = sin(i * 0.37 + l) * 0.3;
        for (int i = 0; i < HID; i++) b1[i] = 0.05 * i - 0.4 + 0.1 * l;
        for (int i = 0; i < HID * W; i++) w2[i] = cos(i * 0.23 + l) * 0.2;
        ampc_value *h = ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(W, HID), w1)),
                                 t_const_f32(g, SHAPE(HID), b1));
        if (l == layers - 1) h = ampc_add(g, h, sv);
        x = ampc_add(g, x, ampc_matmul(g, ampc_relu(g, h), t_const_f32(g, SHAPE(HID, W), w2)));
    }
    ampc_output(g, x, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* The plans the runtime must order (runtime/ranks_pipe.c, early_take): a copy that reads the
 * bytes of an input of the stage before (which that stage then copies in although none of its
 * steps reads them), and, over 4 stages, a value handed along the chain, whose copy into stage
 * r writes the bytes stage r + 1 copies out. */
Test(partition_pipeline, copies_that_read_what_the_sender_writes_before_its_steps) {
    ampc_graph *g = late_view(B, 4);
    ampc_module *m = compile_pipeline(g, 2, 2);
    const ampc_rt_plan *p = &m->cg->plan;
    const ampc_rt_ref in = p->ranks[0].inputs[1].ref;
    bool copied = false, read = false;
    for (int32_t i = 0; i < p->ranks[1].n_steps; i++) {
        const ampc_rt_step *s = &p->ranks[1].steps[i];
        if (s->kind == AMPC_RT_STEP_PEER_COPY)
            copied |= s->peer.src.offset < in.offset + in.bytes &&
                      in.offset < s->peer.src.offset + s->peer.src.bytes;
    }
    for (int32_t i = 0; i < p->ranks[0].n_steps; i++) {
        const ampc_rt_step *s = &p->ranks[0].steps[i];
        read |= s->kind == AMPC_RT_STEP_GEMM &&
                ((s->gemm.c.offset == in.offset && s->gemm.c.bytes) || s->gemm.a.offset == in.offset);
    }
    cr_assert(copied, "rank 1 copies the bytes of rank 0's input 's'");
    cr_assert_not(read, "no GEMM of rank 0 reads 's'");
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(p, &err), AMPC_OK, "%s", err ? err : "");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
    g = stack(B, 8, false, true);
    m = compile_pipeline(g, 4, 2);
    p = &m->cg->plan;
    bool chained = false;
    for (int32_t r = 1; r + 1 < 4; r++)
        for (int32_t i = 0; i < p->ranks[r].n_steps; i++)
            for (int32_t j = 0; j < p->ranks[r + 1].n_steps; j++) {
                const ampc_rt_step *a = &p->ranks[r].steps[i], *b = &p->ranks[r + 1].steps[j];
                if (a->kind == AMPC_RT_STEP_PEER_COPY && b->kind == AMPC_RT_STEP_PEER_COPY &&
                    a->peer.dst.offset == b->peer.src.offset)
                    chained = true;
            }
    cr_assert(chained, "a copy into stage r writes what stage r + 1 copies out");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}
