/*
 * test_multi_gpu_data.c — a model whose batch is split over 2 GPUs (--gpus 2 --partition data)
 * runs: a small conv net (Conv 3x3 -> Relu -> flatten by a stored Reshape target -> MatMul +
 * bias -> Softmax) and a two-layer perceptron, batch 8, give what one GPU gives and what the
 * reference evaluator gives, in f32 and f16, with the inputs and outputs in host memory and in
 * device memory of GPU 0 (peer copies to and from GPU 1) and of GPU 1; twice, with new inputs;
 * enqueued on the caller's stream; timed; each GPU's CUDA graph captured on the second run and
 * replayed after it. The model's inputs and outputs report the whole batch; NCCL is not needed.
 *
 * Needs 2 CUDA devices of compute capability 8.0 or newer: with fewer every test skips with the
 * reason (the binary is runtime_test_multi_gpu_data; run it on the 2-GPU machine).
 */
#define _GNU_SOURCE /* setenv */
#include "support.h"

#include "ampc_runtime.h"
#include "compiler/module.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *__asan_default_options(void) __attribute__((used, visibility("default")));
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }

enum { B = 8, C = 3, S = 16, M = 8, F = M * S * S, OUT = 10, K = 256, H = 512 };

typedef enum net { CONVNET, MLP } net;

static int64_t in_row(net n) { return n == CONVNET ? C * S * S : K; }
static int64_t out_row(net n) { return n == CONVNET ? OUT : K; }
static ampc_shape in_shape(net n, int64_t b) { return n == CONVNET ? SHAPE(b, C, S, S) : SHAPE(b, K); }
static ampc_shape out_shape(net n, int64_t b) { return SHAPE(b, out_row(n)); }

static ampc_graph *build(net n) {
    ampc_graph *g = ampc_graph_create(n == CONVNET ? "convnet" : "mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, in_shape(n, B)), *y;
    if (n == CONVNET) {
        double *w = malloc(sizeof(double) * M * C * 9), *fc = malloc(sizeof(double) * F * OUT);
        double bias[OUT];
        for (int i = 0; i < M * C * 9; i++) w[i] = sin(i * 0.37) * 0.3;
        for (int i = 0; i < F * OUT; i++) fc[i] = cos(i * 0.011) / 40;
        for (int i = 0; i < OUT; i++) bias[i] = 0.05 * i;
        int64_t pads[4] = {1, 1, 1, 1}, target[2] = {B, F};
        ampc_value *t = ampc_relu(g, ampc_conv2d(g, x, t_const_f32(g, SHAPE(M, C, 3, 3), w), NULL,
                                                 NULL, pads, NULL, 1));
        t = ampc_reshape(g, t, target, 2); /* bakes the batch in: rewritten per GPU */
        t = ampc_add(g, ampc_matmul(g, t, t_const_f32(g, SHAPE(F, OUT), fc)),
                     t_const_f32(g, SHAPE(OUT), bias));
        y = ampc_softmax(g, t, -1);
        free(w);
        free(fc);
    } else {
        double *w1 = malloc(sizeof(double) * K * H), *w2 = malloc(sizeof(double) * H * K);
        for (int i = 0; i < K * H; i++) w1[i] = sin(i * 0.37) / 16;
        for (int i = 0; i < H * K; i++) w2[i] = cos(i * 0.23) / 24;
        ampc_value *h = ampc_relu(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(K, H), w1)));
        y = ampc_add(g, ampc_matmul(g, h, t_const_f32(g, SHAPE(H, K), w2)), x);
        free(w1);
        free(w2);
    }
    ampc_output(g, y, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static void need_gpus(int want) {
    t_skip_without_gpu();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (n < want) t_skip_needs_devices(want, n);
}

static ampc_module *compile(net n, int32_t gpus, ampc_precision precision) {
    ampc_pipeline_options po = {.verify = true, .gpus = gpus, .precision = precision,
                                .partition = gpus > 1 ? AMPC_PARTITION_DATA : AMPC_PARTITION_NONE};
    ampc_compile_options o = {.cache_dir = "", .no_tf32 = true, .pipeline = &po};
    ampc_graph *g = build(n);
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return m;
}

static void fill_x(net n, float *x, float phase) {
    for (int64_t i = 0; i < B * in_row(n); i++) x[i] = (float)cos((double)i * 0.113 + phase);
}

static ampc_tensor reference(net n, float *x) {
    ampc_graph *g = build(n);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, in_shape(n, B), x), y;
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &y, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return y;
}

static void expect_close(net n, const float *y, const ampc_tensor *ref, double tol,
                         const char *what) {
    ampc_tensor got = t_tensor(AMPC_DTYPE_F32, out_shape(n, B), (void *)y);
    char msg[512];
    cr_assert(t_tensors_close(&got, ref, tol, tol, what, msg, sizeof msg), "%s", msg);
}

/* Where the caller's tensors live: host memory, or device memory of GPU `device`. */
typedef struct place { int device; } place;

/* Runs model m (created once by the caller) on x with the tensors at `where`; y on the host. */
static void run_at(ampc_rt_model *m, net n, const float *x, float *y, place where) {
    size_t xb = sizeof(float) * (size_t)(B * in_row(n)), yb = sizeof(float) * (size_t)(B * out_row(n));
    void *dx = (void *)x, *dy = y;
    if (where.device >= 0) {
        cr_assert_eq(cudaSetDevice(where.device), cudaSuccess);
        cr_assert_eq(cudaMalloc(&dx, xb), cudaSuccess);
        cr_assert_eq(cudaMalloc(&dy, yb), cudaSuccess);
        cr_assert_eq(cudaMemcpy(dx, x, xb, cudaMemcpyHostToDevice), cudaSuccess);
        cr_assert_eq(cudaMemset(dy, 0xff, yb), cudaSuccess); /* NaNs: a row no GPU writes shows */
    }
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, in_shape(n, B), dx);
    ampc_tensor out = t_tensor(AMPC_DTYPE_F32, out_shape(n, B), dy);
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_run(m, &in, 1, &out, 1, NULL, &err), AMPC_OK, "%s", err);
    if (where.device >= 0) {
        cr_assert_eq(cudaSetDevice(where.device), cudaSuccess);
        cr_assert_eq(cudaMemcpy(y, dy, yb, cudaMemcpyDeviceToHost), cudaSuccess);
        cudaFree(dx);
        cudaFree(dy);
    }
}

/* 2 GPUs splitting the batch against 1 GPU and the reference, tensors on the host, on GPU 0
 * and on GPU 1, two inputs each. */
static void two_gpus_match(net n, ampc_precision precision, double tol) {
    need_gpus(2);
    ampc_module *two = compile(n, 2, precision), *one = compile(n, 1, precision);
    ampc_rt_model *m2 = NULL, *m1 = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create(&two->cg->plan, 0, &m2, &err), AMPC_OK, "%s", err);
    cr_assert_eq(ampc_rt_model_create(&one->cg->plan, 0, &m1, &err), AMPC_OK, "%s", err);
    ampc_shape s;
    cr_assert(ampc_rt_model_io(m2, false, 0, NULL, NULL, &s));
    cr_assert_eq(s.dims[0], B, "the model's input reports the whole batch");
    cr_assert(ampc_rt_model_io(m2, true, 0, NULL, NULL, &s));
    cr_assert_eq(s.dims[0], B, "the model's output reports the whole batch");
    float *x = malloc(sizeof(float) * (size_t)(B * in_row(n)));
    float *y1 = malloc(sizeof(float) * (size_t)(B * out_row(n)));
    float *y2 = malloc(sizeof(float) * (size_t)(B * out_row(n)));
    place where[3] = {{-1}, {0}, {1}};
    const char *names[3] = {"host", "GPU 0", "GPU 1"};
    for (int pass = 0; pass < 2; pass++) {
        fill_x(n, x, pass * 0.5f);
        ampc_tensor ref = reference(n, x);
        run_at(m1, n, x, y1, where[0]);
        expect_close(n, y1, &ref, tol, "y (1 GPU vs the reference)");
        ampc_tensor single = t_tensor(AMPC_DTYPE_F32, out_shape(n, B), y1);
        for (int w = 0; w < 3; w++) {
            char what[96];
            memset(y2, 0, sizeof(float) * (size_t)(B * out_row(n)));
            run_at(m2, n, x, y2, where[w]);
            snprintf(what, sizeof what, "y (2 GPUs, tensors on the %s, vs the reference)", names[w]);
            expect_close(n, y2, &ref, tol, what);
            snprintf(what, sizeof what, "y (2 GPUs, tensors on the %s, vs 1 GPU)", names[w]);
            expect_close(n, y2, &single, tol, what);
        }
        ampc_tensor_free(&ref);
    }
    const char *why = NULL;
    cr_assert_eq(ampc_rt_model_graph_status(m2, &why), AMPC_RT_GRAPH_ON,
                 "each GPU's CUDA graph is captured on the second run: %s", why ? why : "");
    ampc_rt_model_destroy(m2);
    ampc_rt_model_destroy(m1);
    free(x);
    free(y1);
    free(y2);
    ampc_module_destroy(one);
    ampc_module_destroy(two);
}

Test(multi_gpu_data, convnet_f32_matches, .timeout = 180) { two_gpus_match(CONVNET, AMPC_PRECISION_KEEP, 1e-4); }
Test(multi_gpu_data, convnet_f16_matches, .timeout = 180) { two_gpus_match(CONVNET, AMPC_PRECISION_FP16, 3e-2); }
Test(multi_gpu_data, mlp_f32_matches, .timeout = 180) { two_gpus_match(MLP, AMPC_PRECISION_KEEP, 1e-4); }
Test(multi_gpu_data, mlp_f16_matches, .timeout = 180) { two_gpus_match(MLP, AMPC_PRECISION_FP16, 3e-2); }

/* Enqueued on the caller's stream (on GPU 0) with device tensors: the outputs are there once
 * the stream is; timing works after a run. */
Test(multi_gpu_data, enqueue_on_the_callers_stream_and_time, .timeout = 180) {
    need_gpus(2);
    ampc_module *two = compile(MLP, 2, AMPC_PRECISION_KEEP);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create(&two->cg->plan, 0, &m, &err), AMPC_OK, "%s", err);
    size_t xb = sizeof(float) * B * K;
    float *x = malloc(xb), *y = malloc(xb);
    fill_x(MLP, x, 0.25f);
    ampc_tensor ref = reference(MLP, x);
    void *dx, *dy;
    cudaStream_t s;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    cr_assert_eq(cudaMalloc(&dx, xb), cudaSuccess);
    cr_assert_eq(cudaMalloc(&dy, xb), cudaSuccess);
    for (int i = 0; i < 3; i++) { /* plain, capture, replay */
        cr_assert_eq(cudaMemcpyAsync(dx, x, xb, cudaMemcpyHostToDevice, s), cudaSuccess);
        cr_assert_eq(cudaMemsetAsync(dy, 0xff, xb, s), cudaSuccess);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), dx);
        ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), dy);
        cr_assert_eq(ampc_rt_model_enqueue(m, &in, 1, &out, 1, s, &err), AMPC_OK, "%s", err);
        cr_assert_eq(cudaMemcpyAsync(y, dy, xb, cudaMemcpyDeviceToHost, s), cudaSuccess);
        cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
        expect_close(MLP, y, &ref, 1e-4, "y (enqueued on the caller's stream)");
    }
    double ms[5] = {0};
    cr_assert_eq(ampc_rt_model_time(m, 5, ms, &err), AMPC_OK, "%s", err);
    for (int i = 0; i < 5; i++) cr_assert_gt(ms[i], 0, "iteration %d took %g ms", i, ms[i]);
    cudaFree(dx);
    cudaFree(dy);
    cudaStreamDestroy(s);
    ampc_rt_model_destroy(m);
    ampc_tensor_free(&ref);
    free(x);
    free(y);
    ampc_module_destroy(two);
}
