/*
 * test_ranks.c — the per-rank plans of a partitioned graph, without a GPU: a two-layer perceptron
 * compiled with --gpus 2 --partition tensor gives one plan per rank; each rank's steps are the
 * replicated ones and its own (by the split nodes' names), every rank has one all-reduce reading
 * its own partial into the same output; each rank's weights are the replicated ones and its
 * shards (checked byte for byte against slices of the original matrices); the plan check accepts
 * the plans and refuses ranks whose all-reduces do not pair; the library builds (NVRTC, cc) and
 * loads back with both ranks; creating it on this machine fails with a status, never a crash.
 * A transformer block's b2 and residual go into rank 0's second GEMM, none into rank 1's.
 * Data parallelism (--partition data): every rank's plan is the model for B/N rows, sharing the
 * steps and the one weights blob (in the library too), with no all-reduce; the model's inputs
 * and outputs are the whole batch's; the plan check refuses ranks whose rows do not add up.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "support.h"

#include "codegen/codegen.h"
#include "compiler/module.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { B = 3, K = 6, H = 8, N = 5 };

static double w1v(int i) { return sin(i * 0.7) * 0.5; }
static double w2v(int i) { return cos(i * 0.3) * 0.4; }

/* x [rows, K] -> @ W1 [K, H] + b1 -> Relu -> @ W2 [H, N] -> + 1 -> y */
static ampc_graph *mlp_rows(int64_t rows) {
    ampc_graph *g = ampc_graph_create("mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(rows, K));
    double w1[K * H], b1[H], w2[H * N];
    for (int i = 0; i < K * H; i++) w1[i] = w1v(i);
    for (int i = 0; i < H; i++) b1[i] = 0.1 * i - 0.3;
    for (int i = 0; i < H * N; i++) w2[i] = w2v(i);
    ampc_value *h = ampc_relu(g, ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(K, H), w1)),
                                          t_const_f32(g, SHAPE(H), b1)));
    ampc_output(g, ampc_add(g, ampc_matmul(g, h, t_const_f32(g, SHAPE(H, N), w2)),
                            ampc_scalar_f32(g, 1)), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static ampc_graph *mlp(void) { return mlp_rows(B); }

/* x [B, N] -> @ W1 [N, H] + b1 -> Relu -> @ W2 [H, N] + b2 + x: a transformer MLP block */
static ampc_graph *block(void) {
    ampc_graph *g = ampc_graph_create("block");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(B, N));
    double w1[N * H], b1[H], w2[H * N], b2[N];
    for (int i = 0; i < N * H; i++) w1[i] = w1v(i);
    for (int i = 0; i < H; i++) b1[i] = 0.1 * i - 0.3;
    for (int i = 0; i < H * N; i++) w2[i] = w2v(i);
    for (int i = 0; i < N; i++) b2[i] = 0.2 * i - 0.5;
    ampc_value *h = ampc_relu(g, ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(N, H), w1)),
                                          t_const_f32(g, SHAPE(H), b1)));
    ampc_value *y = ampc_add(g, ampc_matmul(g, h, t_const_f32(g, SHAPE(H, N), w2)),
                             t_const_f32(g, SHAPE(N), b2));
    ampc_output(g, ampc_add(g, x, y), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* Compiles g (destroyed) for `gpus` GPUs, split as `how` says. */
static ampc_module *compile_split(ampc_graph *g, int32_t gpus, ampc_partition how) {
    static const int32_t sm80 = 80;
    ampc_pipeline_options po = {.verify = true, .gpus = gpus,
                                .partition = gpus > 1 ? how : AMPC_PARTITION_NONE};
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .pipeline = &po};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return m;
}

static ampc_module *compile_graph(ampc_graph *g, int32_t gpus) {
    return compile_split(g, gpus, AMPC_PARTITION_TENSOR);
}

static ampc_module *compile(int32_t gpus) { return compile_graph(mlp(), gpus); }

static int count_label(const ampc_rt_plan *p, const char *needle) {
    int n = 0;
    for (int32_t i = 0; i < p->n_steps; i++) n += p->steps[i].label && strstr(p->steps[i].label, needle);
    return n;
}

static const ampc_rt_step *only_allreduce(const ampc_rt_plan *p) {
    const ampc_rt_step *s = NULL;
    for (int32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].kind == AMPC_RT_STEP_ALLREDUCE) {
            cr_assert_null(s, "rank %d has more than one all-reduce", p->rank);
            s = &p->steps[i];
        }
    cr_assert_not_null(s, "rank %d has no all-reduce", p->rank);
    return s;
}

/* Rank p's matmul whose B operand is a weight of k rows. */
static const ampc_rt_gemm *gemm_with_k(const ampc_rt_plan *p, int64_t k) {
    for (int32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].kind == AMPC_RT_STEP_GEMM && p->steps[i].gemm.k == k &&
            p->steps[i].gemm.b.space == AMPC_RT_WEIGHTS)
            return &p->steps[i].gemm;
    cr_assert_fail("rank %d has no matmul with k = %lld", p->rank, (long long)k);
    return NULL;
}

Test(ranks, one_plan_per_rank_with_its_steps_and_all_reduce, .timeout = 60) {
    ampc_module *m = compile(2);
    const ampc_rt_plan *p = &m->cg->plan;
    cr_assert_eq(p->n_ranks, 2);
    cr_assert_not_null(p->ranks);
    int64_t dst_offset = -1, src_offset[2];
    for (int32_t r = 0; r < 2; r++) {
        const ampc_rt_plan *q = &p->ranks[r];
        cr_assert_eq(q->rank, r);
        cr_assert_eq(q->n_ranks, 2);
        cr_assert_null(q->ranks);
        cr_assert_eq(q->n_images, p->n_images, "every rank loads the same images");
        cr_assert_eq(q->arena_bytes, p->arena_bytes);
        char mine[16], other[16];
        snprintf(mine, sizeof mine, "_rank%d", r);
        snprintf(other, sizeof other, "_rank%d", 1 - r);
        cr_assert_gt(count_label(q, mine), 0, "rank %d runs its own split nodes", r);
        cr_assert_eq(count_label(q, other), 0, "rank %d runs none of rank %d's", r, 1 - r);
        const ampc_rt_allreduce *a = &only_allreduce(q)->allreduce;
        cr_assert_eq(a->dtype, AMPC_DTYPE_F32);
        cr_assert_eq(a->count, B * N);
        cr_assert_eq(a->dst.bytes, B * N * 4);
        if (dst_offset < 0) dst_offset = a->dst.offset;
        cr_assert_eq(a->dst.offset, dst_offset, "every rank's sum lands in the same value");
        src_offset[r] = a->src.offset;
    }
    cr_assert_neq(src_offset[0], src_offset[1], "each rank sends its own partial");
    /* the replicated tail (+ 1 after the all-reduce) runs on both */
    cr_assert_eq(p->ranks[0].n_steps, p->ranks[1].n_steps);
    /* the model's own fields are rank 0's */
    cr_assert_eq(p->n_steps, p->ranks[0].n_steps);
    cr_assert_eq(p->weights, p->ranks[0].weights);
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(p, &err), AMPC_OK, "%s", err ? err : "");
    ampc_module_destroy(m);
}

Test(ranks, each_rank_holds_its_shards_and_the_replicated_weights, .timeout = 60) {
    ampc_module *whole = compile(1), *m = compile(2);
    const ampc_rt_plan *p = &m->cg->plan;
    cr_assert_eq(whole->cg->n_ranks, 1, "an unpartitioned graph keeps one plan");
    cr_assert_leq(whole->cg->plan.n_ranks, 1);
    cr_assert_null(whole->cg->plan.ranks);
    for (int32_t r = 0; r < 2; r++) {
        const ampc_rt_plan *q = &p->ranks[r];
        cr_assert_lt(q->weights_bytes, whole->cg->plan.weights_bytes,
                     "rank %d holds %lld bytes of weights, the whole model %lld", r,
                     (long long)q->weights_bytes, (long long)whole->cg->plan.weights_bytes);
        /* W1's columns [4r, 4r + 4): the first matmul, k = K */
        const ampc_rt_gemm *g1 = gemm_with_k(q, K);
        cr_assert_eq(g1->n, H / 2);
        cr_assert_eq(g1->b.bytes, K * (H / 2) * 4);
        const float *w = (const float *)((const char *)q->weights + g1->b.offset);
        for (int i = 0; i < K; i++)
            for (int j = 0; j < H / 2; j++)
                cr_assert_float_eq(w[i * (H / 2) + j], (float)w1v(i * H + r * (H / 2) + j), 0,
                                   "rank %d W1[%d, %d]", r, i, r * (H / 2) + j);
        /* W2's rows [4r, 4r + 4): the second matmul, k = H / 2 */
        const ampc_rt_gemm *g2 = gemm_with_k(q, H / 2);
        cr_assert_eq(g2->b.bytes, (H / 2) * N * 4);
        w = (const float *)((const char *)q->weights + g2->b.offset);
        for (int i = 0; i < (H / 2) * N; i++)
            cr_assert_float_eq(w[i], (float)w2v(r * (H / 2) * N + i), 0, "rank %d W2 element %d",
                               r, i);
    }
    ampc_module_destroy(m);
    ampc_module_destroy(whole);
}

/* A transformer block's b2 and residual ride on rank 0's second GEMM (bias epilogue, x as C
 * with beta = 1); rank 1's is a plain product; the all-reduce is each rank's last step and
 * writes the model's output directly. */
Test(ranks, rank_0_adds_bias_and_residual_in_its_gemm, .timeout = 60) {
    ampc_module *m = compile_graph(block(), 2);
    const ampc_rt_plan *p = &m->cg->plan;
    cr_assert_eq(p->n_ranks, 2);
    for (int32_t r = 0; r < 2; r++) {
        const ampc_rt_plan *q = &p->ranks[r];
        const ampc_rt_gemm *g2 = gemm_with_k(q, H / 2);
        cr_assert_eq(g2->n, N);
        if (r == 0) {
            cr_assert_eq(g2->epilogue, AMPC_RT_EPI_BIAS);
            cr_assert_eq(g2->bias.bytes, N * 4);
            cr_assert_float_eq(g2->beta, 1.0f, 0);
            cr_assert(g2->c.space == q->inputs[0].ref.space &&
                      g2->c.offset == q->inputs[0].ref.offset, "rank 0's C is the input x");
        } else {
            cr_assert_eq(g2->epilogue, AMPC_RT_EPI_NONE);
            cr_assert_float_eq(g2->beta, 0.0f, 0);
        }
        const ampc_rt_step *s = only_allreduce(q);
        cr_assert_eq(s, &q->steps[q->n_steps - 1], "rank %d: nothing runs after the all-reduce", r);
        cr_assert(s->allreduce.dst.space == q->outputs[0].ref.space &&
                  s->allreduce.dst.offset == q->outputs[0].ref.offset,
                  "rank %d: the all-reduce writes the output", r);
    }
    cr_assert_eq(p->ranks[0].n_steps, p->ranks[1].n_steps, "two GEMMs and the all-reduce each");
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(p, &err), AMPC_OK, "%s", err ? err : "");
    ampc_module_destroy(m);
}

Test(ranks, plan_check_refuses_unpaired_all_reduces, .timeout = 60) {
    ampc_module *m = compile(2);
    const ampc_rt_plan *p = &m->cg->plan;
    ampc_rt_plan ranks[2] = {p->ranks[0], p->ranks[1]};
    ampc_rt_step *steps = malloc((size_t)ranks[1].n_steps * sizeof *steps);
    memcpy(steps, ranks[1].steps, (size_t)ranks[1].n_steps * sizeof *steps);
    for (int32_t i = 0; i < ranks[1].n_steps; i++)
        if (steps[i].kind == AMPC_RT_STEP_ALLREDUCE) {
            steps[i].allreduce.count -= 1;
            steps[i].allreduce.src.bytes -= 4;
            steps[i].allreduce.dst.bytes -= 4;
        }
    ranks[1].steps = steps;
    ampc_rt_plan bad = *p;
    bad.ranks = ranks;
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(&bad, &err), AMPC_E_INVALID_ARG);
    cr_assert(strstr(err, "rank 1's step") && strstr(err, "pairs with rank 0's step"), "%s", err);
    free(err);
    err = NULL;
    /* a rank's own plan is not a model: the check accepts it, creation refuses it */
    ampc_rt_model *model = NULL;
    cr_assert_eq(ampc_rt_model_create(&p->ranks[1], 0, &model, &err), AMPC_E_INVALID_ARG);
    cr_assert(strstr(err, "this is rank 1's plan of a 2-GPU model"), "%s", err);
    cr_assert_null(model);
    free(err);
    free(steps);
    ampc_module_destroy(m);
}

Test(ranks, library_builds_and_loads_with_every_rank, .timeout = 180) {
    ampc_module *m = compile(2);
    char dir[] = "/tmp/ampc-ranks-XXXXXX", so[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(so, sizeof so, "%s/mlp2.so", dir);
    char *err = NULL;
    cr_assert_eq(ampc_module_write_library(m, so, NULL, &err), AMPC_OK, "%s", err ? err : "");
    ampc_rt_artifact *a = NULL;
    cr_assert_eq(ampc_rt_load(so, &a, &err), AMPC_OK, "%s", err ? err : "");
    const ampc_rt_plan *p = ampc_rt_artifact_plan(a);
    cr_assert_eq(p->n_ranks, 2);
    for (int32_t r = 0; r < 2; r++) {
        const ampc_rt_plan *want = &m->cg->plan.ranks[r], *got = &p->ranks[r];
        cr_assert_eq(got->n_steps, want->n_steps);
        cr_assert_eq(got->weights_bytes, want->weights_bytes);
        cr_assert_eq(memcmp(got->weights, want->weights, (size_t)want->weights_bytes), 0,
                     "rank %d's embedded weights", r);
        const ampc_rt_allreduce *ga = &only_allreduce(got)->allreduce;
        const ampc_rt_allreduce *wa = &only_allreduce(want)->allreduce;
        cr_assert(ga->count == wa->count && ga->src.offset == wa->src.offset &&
                  ga->dst.offset == wa->dst.offset, "rank %d's all-reduce", r);
    }
    cr_assert_eq(ampc_rt_plan_check(p, &err), AMPC_OK, "%s", err ? err : "");
    /* here (no GPU, or fewer than 2) creation fails with a status and a message */
    ampc_rt_model *model = NULL;
    ampc_status st = ampc_rt_model_create(p, 0, &model, &err);
    if (st != AMPC_OK) {
        cr_assert(st == AMPC_E_NO_DEVICE || st == AMPC_E_CUDA, "status %d: %s", st, err);
        cr_assert_not_null(err);
        cr_assert_null(model);
    }
    ampc_rt_model_destroy(model);
    free(err);
    ampc_rt_unload(a);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    ampc_module_destroy(m);
}

/* ---- data parallelism --------------------------------------------------------------------- */

Test(ranks, batch_split_ranks_share_steps_and_weights, .timeout = 60) {
    ampc_module *whole = compile_split(mlp_rows(4), 1, AMPC_PARTITION_NONE);
    ampc_module *m = compile_split(mlp_rows(4), 2, AMPC_PARTITION_DATA);
    const ampc_rt_plan *p = &m->cg->plan;
    cr_assert_eq(p->n_ranks, 2);
    cr_assert(p->split_batch);
    cr_assert_null(m->cg->rank_weights, "no per-rank weights: one blob for every rank");
    cr_assert_eq(p->weights_bytes, whole->cg->plan.weights_bytes, "every weight, once");
    cr_assert_eq(p->inputs[0].shape.dims[0], 4, "the model takes the whole batch");
    cr_assert_eq(p->inputs[0].ref.bytes, 4 * K * 4);
    cr_assert_eq(p->outputs[0].shape.dims[0], 4);
    cr_assert_eq(p->outputs[0].ref.bytes, 4 * N * 4);
    for (int32_t r = 0; r < 2; r++) {
        const ampc_rt_plan *q = &p->ranks[r];
        cr_assert_eq(q->rank, r);
        cr_assert(q->split_batch);
        cr_assert_null(q->ranks);
        cr_assert_eq(q->steps, p->steps, "rank %d runs the shared steps", r);
        cr_assert_eq(q->weights, p->weights, "rank %d reads the shared weights", r);
        cr_assert_eq(q->inputs[0].shape.dims[0], 2, "rank %d: 2 rows", r);
        cr_assert_eq(q->inputs[0].shape.dims[1], K);
        cr_assert_eq(q->outputs[0].ref.bytes, 2 * N * 4);
        for (int32_t i = 0; i < q->n_steps; i++)
            cr_assert_neq(q->steps[i].kind, AMPC_RT_STEP_ALLREDUCE, "no all-reduce");
        cr_assert_eq(gemm_with_k(q, K)->m, 2, "rank %d's first GEMM has its 2 rows", r);
    }
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(p, &err), AMPC_OK, "%s", err ? err : "");
    ampc_module_destroy(m);
    ampc_module_destroy(whole);
}

Test(ranks, plan_check_refuses_a_batch_split_whose_rows_do_not_add_up, .timeout = 60) {
    ampc_module *m = compile_split(mlp_rows(4), 2, AMPC_PARTITION_DATA);
    const ampc_rt_plan *p = &m->cg->plan;
    ampc_rt_plan ranks[2] = {p->ranks[0], p->ranks[1]};
    ampc_rt_io out = ranks[1].outputs[0];
    out.shape.dims[0] = 3;
    out.ref.bytes = 3 * N * 4;
    ranks[1].outputs = &out;
    ampc_rt_plan bad = *p;
    bad.ranks = ranks;
    char *err = NULL;
    cr_assert_eq(ampc_rt_plan_check(&bad, &err), AMPC_E_INVALID_ARG);
    cr_assert(strstr(err, "output 'y' is [4, 5] for the model and [3, 5] for rank 1, expected dim 0 "
                          "divided by the 2 ranks"), "%s", err);
    free(err);
    err = NULL;
    ranks[1] = p->ranks[1];
    ranks[1].split_batch = 0;
    cr_assert_eq(ampc_rt_plan_check(&bad, &err), AMPC_E_INVALID_ARG);
    cr_assert(strstr(err, "split_batch 0), expected rank 1 of 2 with ranks NULL and split_batch 1"),
              "%s", err);
    free(err);
    ampc_module_destroy(m);
}

Test(ranks, batch_split_library_embeds_the_weights_once, .timeout = 180) {
    ampc_module *m = compile_split(mlp_rows(4), 2, AMPC_PARTITION_DATA);
    char dir[] = "/tmp/ampc-ranks-XXXXXX", so[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(so, sizeof so, "%s/mlpd.so", dir);
    char *err = NULL;
    cr_assert_eq(ampc_module_write_library(m, so, NULL, &err), AMPC_OK, "%s", err ? err : "");
    ampc_rt_artifact *a = NULL;
    cr_assert_eq(ampc_rt_load(so, &a, &err), AMPC_OK, "%s", err ? err : "");
    const ampc_rt_plan *p = ampc_rt_artifact_plan(a), *want = &m->cg->plan;
    cr_assert(p->split_batch);
    cr_assert_eq(p->n_ranks, 2);
    cr_assert_eq(p->inputs[0].shape.dims[0], 4);
    cr_assert_eq(memcmp(p->weights, want->weights, (size_t)want->weights_bytes), 0);
    for (int32_t r = 0; r < 2; r++) {
        cr_assert_eq(p->ranks[r].weights, p->weights, "rank %d points at the one blob", r);
        cr_assert_eq(p->ranks[r].steps, p->steps, "rank %d runs the one steps array", r);
        cr_assert_eq(p->ranks[r].inputs[0].shape.dims[0], 2);
        cr_assert_eq(p->ranks[r].rank, r);
    }
    cr_assert_eq(ampc_rt_plan_check(p, &err), AMPC_OK, "%s", err ? err : "");
    ampc_rt_model *model = NULL;
    ampc_status st = ampc_rt_model_create(p, 0, &model, &err);
    if (st != AMPC_OK) { /* here (no GPU, or fewer than 2): a status and a message */
        cr_assert(st == AMPC_E_NO_DEVICE || st == AMPC_E_CUDA, "status %d: %s", st, err);
        cr_assert_null(model);
    }
    ampc_rt_model_destroy(model);
    free(err);
    ampc_rt_unload(a);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    ampc_module_destroy(m);
}

/* ---- pipelines -------------------------------------------------------------------------------- */

/* A pipeline in micro-batches built into a library: the model's io are the whole batch, every
 * stage's io one micro-batch (rank 0's too), and the loaded plan passes the check. */
Test(ranks, pipeline_library_gives_each_stage_one_micro_batch, .timeout = 180) {
    static const int32_t sm80 = 80;
    ampc_pipeline_options po = {.verify = true, .gpus = 2, .partition = AMPC_PARTITION_PIPELINE,
                                .micro_batches = 2};
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .pipeline = &po};
    ampc_graph *g = mlp_rows(4);
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    char dir[] = "/tmp/ampc-ranks-XXXXXX", so[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(so, sizeof so, "%s/mlpp.so", dir);
    char *err = NULL;
    cr_assert_eq(ampc_module_write_library(m, so, NULL, &err), AMPC_OK, "%s", err ? err : "");
    ampc_rt_artifact *a = NULL;
    cr_assert_eq(ampc_rt_load(so, &a, &err), AMPC_OK, "%s", err ? err : "");
    const ampc_rt_plan *p = ampc_rt_artifact_plan(a);
    cr_assert_eq(p->n_ranks, 2);
    cr_assert_eq(p->micro_batches, 2);
    cr_assert_eq(p->inputs[0].shape.dims[0], 4, "the model's input is the whole batch");
    cr_assert_eq(p->outputs[0].shape.dims[0], 4);
    for (int32_t r = 0; r < 2; r++) {
        cr_assert_eq(p->ranks[r].inputs[0].shape.dims[0], 2, "rank %d's input", r);
        cr_assert_eq(p->ranks[r].inputs[0].ref.bytes, p->inputs[0].ref.bytes / 2);
        cr_assert_eq(p->ranks[r].outputs[0].shape.dims[0], 2, "rank %d's output", r);
        cr_assert_eq(p->ranks[r].micro_batches, 2);
    }
    cr_assert_eq(ampc_rt_plan_check(p, &err), AMPC_OK, "%s", err ? err : "");
    ampc_rt_model *model = NULL;
    ampc_status st = ampc_rt_model_create(p, 0, &model, &err);
    if (st != AMPC_OK) { /* here (no GPU, or fewer than 2): a status and a message */
        cr_assert(st == AMPC_E_NO_DEVICE || st == AMPC_E_CUDA, "status %d: %s", st, err);
        cr_assert_null(model);
    }
    ampc_rt_model_destroy(model);
    free(err);
    ampc_rt_unload(a);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    ampc_module_destroy(m);
}
