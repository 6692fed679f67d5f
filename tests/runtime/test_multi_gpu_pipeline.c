/*
 * test_multi_gpu_pipeline.c — pipeline parallelism on 2 GPUs (skips with the count otherwise):
 * a stack of residual MLP blocks with a side input read by every block, cut into 2 stages and
 * run in micro-batches, against 1 GPU and the reference evaluator, f32 and f16, with tensors on
 * the host, on GPU 0 and on GPU 1, three runs each (step by step, capture, replay); enqueued on
 * the caller's stream and timed; fewer GPUs than stages refused at create with both counts.
 * Two graphs whose copies read what the sending stage writes before its steps: a view of an
 * input made before the first block and read by the last (2 GPUs), and block 0's output read
 * by the last block, handed along 3 stages.
 */
#define _GNU_SOURCE /* setenv */
#include "support.h"

#include "ampc_runtime.h"
#include "compiler/module.h"
#include "runtime/plan.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *__asan_default_options(void) __attribute__((used, visibility("default")));
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }

enum { B = 16, W = 256, HID = 512, LAYERS = 6 };

/* x [B, W] through LAYERS blocks x = x + relu(x @ W1 + b1 + s) @ W2, s [B, HID] an input. */
static ampc_graph *build(void) {
    ampc_graph *g = ampc_graph_create("stack");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(B, W));
    ampc_value *s = t_input(g, "s", AMPC_DTYPE_F32, SHAPE(B, HID));
    double *w1 = malloc(sizeof(double) * W * HID), *w2 = malloc(sizeof(double) * HID * W);
    double b1[HID];
    for (int l = 0; l < LAYERS; l++) {
        for (int i = 0; i < W * HID; i++) w1[i] = sin(i * 0.37 + l) / 24;
        for (int i = 0; i < HID * W; i++) w2[i] = cos(i * 0.23 + l) / 32;
        for (int i = 0; i < HID; i++) b1[i] = 0.01 * (i % 7) - 0.02;
        ampc_value *h = ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(W, HID), w1)),
                                 t_const_f32(g, SHAPE(HID), b1));
        h = ampc_relu(g, ampc_add(g, h, s));
        x = ampc_add(g, x, ampc_matmul(g, h, t_const_f32(g, SHAPE(HID, W), w2)));
    }
    free(w1);
    free(w2);
    ampc_output(g, x, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static void need_gpus(int want) {
    t_skip_without_gpu();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (n < want) t_skip_needs_devices(want, n);
}

static ampc_module *compile(int32_t gpus, int32_t micro, ampc_precision precision) {
    ampc_pipeline_options po = {.verify = true, .gpus = gpus, .precision = precision,
                                .partition = gpus > 1 ? AMPC_PARTITION_PIPELINE
                                                      : AMPC_PARTITION_NONE,
                                .micro_batches = gpus > 1 ? micro : 0};
    ampc_compile_options o = {.cache_dir = "", .no_tf32 = true, .pipeline = &po};
    ampc_graph *g = build();
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return m;
}

static void fill(float *x, float *s, float phase) {
    for (int64_t i = 0; i < B * W; i++) x[i] = (float)cos((double)i * 0.113 + phase);
    for (int64_t i = 0; i < B * HID; i++) s[i] = (float)sin((double)i * 0.071 - phase) * 0.2f;
}

static ampc_tensor reference(float *x, float *s) {
    ampc_graph *g = build();
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), x),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(B, HID), s)}, y;
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &y, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return y;
}

static void expect_close(const float *y, const ampc_tensor *ref, double tol, const char *what) {
    ampc_tensor got = t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), (void *)y);
    char msg[512];
    cr_assert(t_tensors_close(&got, ref, tol, tol, what, msg, sizeof msg), "%s", msg);
}

/* Runs m on x, s with the tensors on the host (device < 0) or on GPU `device`; y on the host. */
static void run_at(ampc_rt_model *m, const float *x, const float *s, float *y, int device) {
    size_t xb = sizeof(float) * B * W, sb = sizeof(float) * B * HID;
    void *dx = (void *)x, *ds = (void *)s, *dy = y;
    if (device >= 0) {
        cr_assert_eq(cudaSetDevice(device), cudaSuccess);
        cr_assert_eq(cudaMalloc(&dx, xb), cudaSuccess);
        cr_assert_eq(cudaMalloc(&ds, sb), cudaSuccess);
        cr_assert_eq(cudaMalloc(&dy, xb), cudaSuccess);
        cr_assert_eq(cudaMemcpy(dx, x, xb, cudaMemcpyHostToDevice), cudaSuccess);
        cr_assert_eq(cudaMemcpy(ds, s, sb, cudaMemcpyHostToDevice), cudaSuccess);
        cr_assert_eq(cudaMemset(dy, 0xff, xb), cudaSuccess); /* NaNs: a micro-batch not written shows */
    }
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), dx),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(B, HID), ds)};
    ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), dy);
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_run(m, in, 2, &out, 1, NULL, &err), AMPC_OK, "%s", err);
    if (device >= 0) {
        cr_assert_eq(cudaSetDevice(device), cudaSuccess);
        cr_assert_eq(cudaMemcpy(y, dy, xb, cudaMemcpyDeviceToHost), cudaSuccess);
        cudaFree(dx);
        cudaFree(ds);
        cudaFree(dy);
    }
}

/* 2 stages in `micro` micro-batches against 1 GPU and the reference. */
static void two_stages_match(int32_t micro, ampc_precision precision, double tol) {
    need_gpus(2);
    ampc_module *two = compile(2, micro, precision), *one = compile(1, 0, precision);
    cr_assert_eq(two->cg->plan.n_ranks, 2);
    cr_assert_eq(two->cg->plan.micro_batches, micro);
    ampc_rt_model *m2 = NULL, *m1 = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create(&two->cg->plan, 0, &m2, &err), AMPC_OK, "%s", err);
    cr_assert_eq(ampc_rt_model_create(&one->cg->plan, 0, &m1, &err), AMPC_OK, "%s", err);
    ampc_shape sh;
    cr_assert(ampc_rt_model_io(m2, false, 0, NULL, NULL, &sh));
    cr_assert_eq(sh.dims[0], B, "the model's input reports the whole batch");
    float *x = malloc(sizeof(float) * B * W), *s = malloc(sizeof(float) * B * HID);
    float *y1 = malloc(sizeof(float) * B * W), *y2 = malloc(sizeof(float) * B * W);
    const int where[3] = {-1, 0, 1};
    const char *names[3] = {"host", "GPU 0", "GPU 1"};
    for (int pass = 0; pass < 3; pass++) { /* step by step, capture, replay */
        fill(x, s, pass * 0.5f);
        ampc_tensor ref = reference(x, s);
        run_at(m1, x, s, y1, -1);
        expect_close(y1, &ref, tol, "y (1 GPU vs the reference)");
        ampc_tensor single = t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), y1);
        for (int w = 0; w < 3; w++) {
            char what[128];
            memset(y2, 0, sizeof(float) * B * W);
            run_at(m2, x, s, y2, where[w]);
            snprintf(what, sizeof what, "y (pipeline, %d micro-batches, tensors on the %s, pass "
                     "%d, vs the reference)", micro, names[w], pass);
            expect_close(y2, &ref, tol, what);
            snprintf(what, sizeof what, "y (pipeline, tensors on the %s, pass %d, vs 1 GPU)",
                     names[w], pass);
            expect_close(y2, &single, tol, what);
        }
        ampc_tensor_free(&ref);
    }
    const char *why = NULL;
    cr_assert_eq(ampc_rt_model_graph_status(m2, &why), AMPC_RT_GRAPH_ON,
                 "each stage's CUDA graph is captured on the second run: %s", why ? why : "");
    ampc_rt_model_destroy(m2);
    ampc_rt_model_destroy(m1);
    free(x);
    free(s);
    free(y1);
    free(y2);
    ampc_module_destroy(one);
    ampc_module_destroy(two);
}

Test(multi_gpu_pipeline, f32_four_micro_batches, .timeout = 180) { two_stages_match(4, AMPC_PRECISION_KEEP, 1e-4); }
Test(multi_gpu_pipeline, f32_one_micro_batch, .timeout = 180) { two_stages_match(1, AMPC_PRECISION_KEEP, 1e-4); }
Test(multi_gpu_pipeline, f16_eight_micro_batches, .timeout = 180) { two_stages_match(8, AMPC_PRECISION_FP16, 3e-2); }

/* Step by step (AMPC_MULTI_GPU_GRAPHS=0) gives the same numbers. */
Test(multi_gpu_pipeline, without_graphs, .timeout = 180) {
    setenv("AMPC_MULTI_GPU_GRAPHS", "0", 1);
    need_gpus(2);
    ampc_module *two = compile(2, 4, AMPC_PRECISION_KEEP);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create(&two->cg->plan, 0, &m, &err), AMPC_OK, "%s", err);
    float *x = malloc(sizeof(float) * B * W), *s = malloc(sizeof(float) * B * HID);
    float *y = malloc(sizeof(float) * B * W);
    fill(x, s, 0.3f);
    ampc_tensor ref = reference(x, s);
    for (int i = 0; i < 3; i++) {
        run_at(m, x, s, y, -1);
        expect_close(y, &ref, 1e-4, "y (pipeline, step by step)");
    }
    cr_assert_eq(ampc_rt_model_graph_status(m, NULL), AMPC_RT_GRAPH_OFF);
    ampc_tensor_free(&ref);
    ampc_rt_model_destroy(m);
    ampc_module_destroy(two);
    free(x);
    free(s);
    free(y);
}

/* Enqueued on the caller's stream (GPU 0) with device tensors, then timed. */
Test(multi_gpu_pipeline, enqueue_on_the_callers_stream_and_time, .timeout = 180) {
    need_gpus(2);
    ampc_module *two = compile(2, 4, AMPC_PRECISION_KEEP);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create(&two->cg->plan, 0, &m, &err), AMPC_OK, "%s", err);
    size_t xb = sizeof(float) * B * W, sb = sizeof(float) * B * HID;
    float *x = malloc(xb), *s = malloc(sb), *y = malloc(xb);
    fill(x, s, 0.25f);
    ampc_tensor ref = reference(x, s);
    void *dx, *ds, *dy;
    cudaStream_t st;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaStreamCreate(&st), cudaSuccess);
    cr_assert_eq(cudaMalloc(&dx, xb), cudaSuccess);
    cr_assert_eq(cudaMalloc(&ds, sb), cudaSuccess);
    cr_assert_eq(cudaMalloc(&dy, xb), cudaSuccess);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(cudaMemcpyAsync(dx, x, xb, cudaMemcpyHostToDevice, st), cudaSuccess);
        cr_assert_eq(cudaMemcpyAsync(ds, s, sb, cudaMemcpyHostToDevice, st), cudaSuccess);
        cr_assert_eq(cudaMemsetAsync(dy, 0xff, xb, st), cudaSuccess);
        ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), dx),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(B, HID), ds)};
        ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), dy);
        cr_assert_eq(ampc_rt_model_enqueue(m, in, 2, &out, 1, st, &err), AMPC_OK, "%s", err);
        cr_assert_eq(cudaMemcpyAsync(y, dy, xb, cudaMemcpyDeviceToHost, st), cudaSuccess);
        cr_assert_eq(cudaStreamSynchronize(st), cudaSuccess);
        expect_close(y, &ref, 1e-4, "y (pipeline enqueued on the caller's stream)");
    }
    double ms[5] = {0};
    cr_assert_eq(ampc_rt_model_time(m, 5, ms, &err), AMPC_OK, "%s", err);
    for (int i = 0; i < 5; i++) cr_assert_gt(ms[i], 0, "iteration %d took %g ms", i, ms[i]);
    cudaFree(dx);
    cudaFree(ds);
    cudaFree(dy);
    cudaStreamDestroy(st);
    ampc_rt_model_destroy(m);
    ampc_tensor_free(&ref);
    free(x);
    free(s);
    free(y);
    ampc_module_destroy(two);
}

/* More stages than visible GPUs: refused at create, naming both counts. */
Test(multi_gpu_pipeline, more_stages_than_gpus_is_refused, .timeout = 180) {
    t_skip_without_gpu();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (n > 8) cr_skip_test("needs at most 8 CUDA devices, %d visible: a pipeline of 8 fits", n);
    ampc_module *eight = compile(8, 2, AMPC_PRECISION_KEEP);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    cr_assert_neq(ampc_rt_model_create(&eight->cg->plan, 0, &m, &err), AMPC_OK);
    cr_assert(err && strstr(err, "partitioned over 8 GPUs"), "%s", err ? err : "");
    free(err);
    ampc_module_destroy(eight);
}

/* ---- copies of what the sending stage writes before its steps ------------------------------- */

/* x [B, W] through LAYERS blocks x = x + relu(x @ W1 + b1 [+ extra]) @ W2: with `view`, the last
 * block adds a Reshape of the input s [B, 2, HID / 2] made before the first block (the view is
 * copied from the input's bytes on GPU 0, where no step reads s); else the last block adds block
 * 0's output to x (a value handed along the stages). */
static ampc_graph *build_late(bool view) {
    ampc_graph *g = ampc_graph_create(view ? "late_view" : "late_skip");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(B, W)), *first = NULL, *sv = NULL;
    if (view) {
        static const int64_t to[2] = {0, HID};
        sv = ampc_reshape(g, t_input(g, "s", AMPC_DTYPE_F32, SHAPE(B, 2, HID / 2)), to, 2);
    }
    double *w1 = malloc(sizeof(double) * W * HID), *w2 = malloc(sizeof(double) * HID * W);
    double b1[HID];
    for (int l = 0; l < LAYERS; l++) {
        for (int i = 0; i < W * HID; i++) w1[i] = sin(i * 0.37 + l) / 24;
        for (int i = 0; i < HID * W; i++) w2[i] = cos(i * 0.23 + l) / 32;
        for (int i = 0; i < HID; i++) b1[i] = 0.01 * (i % 7) - 0.02;
        ampc_value *h = ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(W, HID), w1)),
                                 t_const_f32(g, SHAPE(HID), b1));
        if (sv && l == LAYERS - 1) h = ampc_add(g, h, sv);
        x = ampc_add(g, x, ampc_matmul(g, ampc_relu(g, h), t_const_f32(g, SHAPE(HID, W), w2)));
        if (!view && l == LAYERS - 1) x = ampc_add(g, x, first);
        if (l == 0) first = x;
    }
    free(w1);
    free(w2);
    ampc_output(g, x, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* The graph over `gpus` stages in 4 micro-batches, three runs (step by step, capture, replay)
 * with tensors on the host, each against the reference. */
static void late_reads_match(bool view, int32_t gpus) {
    need_gpus(gpus);
    ampc_pipeline_options po = {.verify = true, .gpus = gpus,
                                .partition = AMPC_PARTITION_PIPELINE, .micro_batches = 4};
    ampc_compile_options o = {.cache_dir = "", .no_tf32 = true, .pipeline = &po};
    ampc_graph *g = build_late(view);
    ampc_module *mod = NULL;
    cr_assert_eq(ampc_compile(g, &o, &mod), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create(&mod->cg->plan, 0, &m, &err), AMPC_OK, "%s", err);
    float *x = malloc(sizeof(float) * B * W), *s = malloc(sizeof(float) * B * HID);
    float *y = malloc(sizeof(float) * B * W);
    for (int pass = 0; pass < 3; pass++) {
        fill(x, s, pass * 0.4f);
        ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), x),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(B, 2, HID / 2), s)}, ref;
        g = build_late(view);
        cr_assert_eq(ampc_graph_evaluate(g, in, view ? 2 : 1, &ref, 1), AMPC_OK, "%s",
                     ampc_graph_errors(g));
        ampc_graph_destroy(g);
        for (int64_t i = 0; i < B * W; i++) y[i] = NAN;
        ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, W), y);
        cr_assert_eq(ampc_rt_model_run(m, in, view ? 2 : 1, &out, 1, NULL, &err), AMPC_OK, "%s",
                     err);
        char what[128];
        snprintf(what, sizeof what, "y (%s over %d stages, pass %d, vs the reference)",
                 view ? "a late view of an input" : "a skip handed along", gpus, pass);
        expect_close(y, &ref, 1e-4, what);
        ampc_tensor_free(&ref);
    }
    ampc_rt_model_destroy(m);
    ampc_module_destroy(mod);
    free(x);
    free(s);
    free(y);
}

Test(multi_gpu_pipeline, input_view_copied_from_a_stage_that_does_not_read_it, .timeout = 180) {
    late_reads_match(true, 2);
}
Test(multi_gpu_pipeline, value_handed_along_three_stages, .timeout = 180) {
    late_reads_match(false, 3);
}
