/*
 * test_multi_gpu.c — a model partitioned over 2 GPUs (--gpus 2 --partition tensor) runs: a
 * two-layer perceptron (x [64, 256] @ W1 [256, 768] + b1 -> Relu -> @ W2 [768, 256] -> + 1)
 * split column- then row-parallel, one NCCL all-reduce, gives what the reference evaluator gives
 * for the whole model and what one GPU gives, in f32 and in f16, and so does a transformer MLP
 * block (+ b2 + x in place of + 1: both on rank 0's second GEMM); it runs again with new inputs;
 * it enqueues on the caller's stream and times; with AMPC_MULTI_GPU_GRAPHS=1 it captures a CUDA
 * graph per GPU on the second run and replays it; asking for more GPUs than are visible fails at
 * creation with a message naming both counts.
 *
 * Needs 2 CUDA devices of compute capability 8.0 or newer and NCCL (libnccl.so.2): with fewer
 * every test skips with the reason (the binary is runtime_test_multi_gpu; run it on the 2-GPU
 * machine).
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

enum { B = 64, K = 256, H = 768, N = 256 };

/* x @ W1 + b1 -> Relu -> @ W2, then + 1; or, as a transformer MLP block, + b2 + x (which the
 * partition pass puts on rank 0's second matmul, before the all-reduce). */
static ampc_graph *mlp(bool block) {
    ampc_graph *g = ampc_graph_create("mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(B, K));
    double *w1 = malloc(sizeof(double) * K * H), *b1 = malloc(sizeof(double) * H);
    double *w2 = malloc(sizeof(double) * H * N), b2[N];
    for (int i = 0; i < K * H; i++) w1[i] = sin(i * 0.37) / 16;
    for (int i = 0; i < H; i++) b1[i] = 0.01 * (i % 11) - 0.05;
    for (int i = 0; i < H * N; i++) w2[i] = cos(i * 0.23) / 28;
    for (int i = 0; i < N; i++) b2[i] = 0.02 * (i % 7) - 0.06;
    ampc_value *h = ampc_relu(g, ampc_add(g, ampc_matmul(g, x, t_const_f32(g, SHAPE(K, H), w1)),
                                          t_const_f32(g, SHAPE(H), b1)));
    ampc_value *y = ampc_matmul(g, h, t_const_f32(g, SHAPE(H, N), w2));
    if (block) /* K == N: x is the residual */
        y = ampc_add(g, x, ampc_add(g, y, t_const_f32(g, SHAPE(N), b2)));
    else
        y = ampc_add(g, y, ampc_scalar_f32(g, 1));
    ampc_output(g, y, "y");
    free(w1);
    free(b1);
    free(w2);
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* Skips unless `want` CUDA devices can run models. NVLink multicast stays off on the shared
 * multi-GPU hosts (.devlibs/env.sh sets it too; a value already set is kept). */
static void need_gpus(int want) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    t_skip_without_gpu();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (n < want) t_skip_needs_devices(want, n);
}

static ampc_module *compile(int32_t gpus, ampc_precision precision, bool block) {
    ampc_pipeline_options po = {.verify = true, .gpus = gpus, .precision = precision,
                                .partition = gpus > 1 ? AMPC_PARTITION_TENSOR : AMPC_PARTITION_NONE};
    ampc_compile_options o = {.cache_dir = "", .no_tf32 = true, .pipeline = &po};
    ampc_graph *g = mlp(block);
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return m;
}

static void fill_x(float *x, float phase) {
    for (int i = 0; i < B * K; i++) x[i] = (float)cos(i * 0.113 + phase);
}

/* y of the whole (unpartitioned) model on the reference evaluator. */
static ampc_tensor reference(float *x, bool block) {
    ampc_graph *g = mlp(block);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), x), y;
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &y, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return y;
}

static void run(ampc_module *m, float *x, float *y) {
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), x);
    ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), y);
    cr_assert_eq(ampc_module_run(m, &in, 1, &out, 1, NULL), AMPC_OK, "%s", ampc_module_errors(m));
}

static void expect_close(float *y, const ampc_tensor *ref, double tol, const char *what) {
    ampc_tensor got = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), y);
    char msg[512];
    cr_assert(t_tensors_close(&got, ref, tol, tol, what, msg, sizeof msg), "%s", msg);
}

/* 2 GPUs against the reference and against 1 GPU, twice (new inputs the second time). */
static void two_gpus_match(ampc_precision precision, double tol, bool block) {
    need_gpus(2);
    ampc_module *two = compile(2, precision, block), *one = compile(1, precision, block);
    float *x = malloc(sizeof(float) * B * K), *y2 = malloc(sizeof(float) * B * N);
    float *y1 = malloc(sizeof(float) * B * N);
    for (int pass = 0; pass < 2; pass++) {
        fill_x(x, pass * 0.5f);
        ampc_tensor ref = reference(x, block);
        run(two, x, y2);
        run(one, x, y1);
        expect_close(y2, &ref, tol, "y (2 GPUs vs the reference)");
        expect_close(y1, &ref, tol, "y (1 GPU vs the reference)");
        ampc_tensor single = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), y1);
        expect_close(y2, &single, tol, "y (2 GPUs vs 1 GPU)");
        ampc_tensor_free(&ref);
    }
    free(x);
    free(y1);
    free(y2);
    ampc_module_destroy(one);
    ampc_module_destroy(two);
}

Test(multi_gpu, tensor_parallel_mlp_f32_matches, .timeout = 120) { two_gpus_match(AMPC_PRECISION_KEEP, 1e-4, false); }

Test(multi_gpu, tensor_parallel_mlp_f16_matches, .timeout = 120) { two_gpus_match(AMPC_PRECISION_FP16, 3e-2, false); }

/* b2 and the residual in rank 0's cuBLASLt epilogue (bias, x as C with beta = 1). */
Test(multi_gpu, tensor_parallel_block_f32_matches, .timeout = 120) {
    two_gpus_match(AMPC_PRECISION_KEEP, 1e-4, true);
}
Test(multi_gpu, tensor_parallel_block_f16_matches, .timeout = 120) {
    two_gpus_match(AMPC_PRECISION_FP16, 3e-2, true);
}

/* Through the runtime API: enqueue on the caller's stream, timing, the step list, profiling
 * refused with its reason. */
Test(multi_gpu, enqueue_time_and_queries, .timeout = 120) {
    need_gpus(2);
    ampc_module *two = compile(2, AMPC_PRECISION_KEEP, false);
    float *x = malloc(sizeof(float) * B * K), *y = malloc(sizeof(float) * B * N);
    fill_x(x, 0.25f);
    ampc_tensor ref = reference(x, false);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), x);
    ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), y);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create(&two->cg->plan, 0, &m, &err), AMPC_OK, "%s", err);
    cudaStream_t s = NULL;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    cr_assert_eq(ampc_rt_model_enqueue(m, &in, 1, &out, 1, s, &err), AMPC_OK, "%s", err);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    expect_close(y, &ref, 1e-4, "y (enqueued on the caller's stream)");
    double ms[5] = {0};
    cr_assert_eq(ampc_rt_model_time(m, 5, ms, &err), AMPC_OK, "%s", err);
    for (int i = 0; i < 5; i++) cr_assert_gt(ms[i], 0, "iteration %d took %g ms", i, ms[i]);
    int nccl = 0;
    for (int32_t i = 0; i < ampc_rt_model_n_steps(m); i++)
        nccl += !strcmp(ampc_rt_model_step_provider(m, i), "NCCL");
    cr_assert_eq(nccl, 1, "rank 0's steps hold one all-reduce");
    double step_ms[64];
    cr_assert_eq(ampc_rt_model_profile(m, &in, 1, &out, 1, NULL, step_ms, &err),
                 AMPC_E_UNSUPPORTED);
    cr_assert(strstr(err, "profiling a multi-GPU model (2 GPUs) is not built yet"), "%s", err);
    free(err);
    cr_assert_eq(cudaStreamDestroy(s), cudaSuccess);
    ampc_rt_model_destroy(m);
    ampc_tensor_free(&ref);
    free(x);
    free(y);
    ampc_module_destroy(two);
}

/* AMPC_MULTI_GPU_GRAPHS=1: the second run captures one CUDA graph per GPU, later runs replay
 * them and still match. */
Test(multi_gpu, graphs_per_gpu_replay_and_match, .timeout = 120) {
    need_gpus(2);
    setenv("AMPC_MULTI_GPU_GRAPHS", "1", 1);
    ampc_module *two = compile(2, AMPC_PRECISION_KEEP, false);
    float *x = malloc(sizeof(float) * B * K), *y = malloc(sizeof(float) * B * N);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), x);
    ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), y);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_rt_model_create(&two->cg->plan, 0, &m, &err), AMPC_OK, "%s", err);
    for (int pass = 0; pass < 4; pass++) {
        fill_x(x, pass * 0.3f);
        ampc_tensor ref = reference(x, false);
        memset(y, 0, sizeof(float) * B * N);
        cr_assert_eq(ampc_rt_model_run(m, &in, 1, &out, 1, NULL, &err), AMPC_OK, "%s", err);
        expect_close(y, &ref, 1e-4, pass < 2 ? "y (step by step, then capture)" : "y (replayed)");
        ampc_tensor_free(&ref);
        const char *why = NULL;
        ampc_rt_graph_status gs = ampc_rt_model_graph_status(m, &why);
        if (pass == 0) cr_assert_eq(gs, AMPC_RT_GRAPH_PENDING, "after the first run: %s", why);
        else cr_assert_eq(gs, AMPC_RT_GRAPH_ON, "after run %d: %s", pass + 1, why);
    }
    double ms[3];
    cr_assert_eq(ampc_rt_model_time(m, 3, ms, &err), AMPC_OK, "%s", err);
    ampc_rt_model_destroy(m);
    free(x);
    free(y);
    ampc_module_destroy(two);
}

Test(multi_gpu, more_gpus_than_visible_fail_at_create, .timeout = 120) {
    need_gpus(1);
    int n = 0;
    cr_assert_eq(cudaGetDeviceCount(&n), cudaSuccess);
    int32_t want = n + 1;
    while (H % want) want++; /* a split needs H to be a multiple of the ranks */
    ampc_module *m = compile(want, AMPC_PRECISION_KEEP, false);
    float *x = calloc(B * K, sizeof(float)), *y = calloc(B * N, sizeof(float));
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, K), x);
    ampc_tensor out = t_tensor(AMPC_DTYPE_F32, SHAPE(B, N), y);
    cr_assert_eq(ampc_module_run(m, &in, 1, &out, 1, NULL), AMPC_E_NO_DEVICE);
    char expect[160];
    snprintf(expect, sizeof expect, "partitioned over %d GPUs (devices 0 to %d), but %d CUDA "
             "device%s visible", want, want - 1, n, n == 1 ? " is" : "s are");
    cr_assert(strstr(ampc_module_errors(m), expect), "%s", ampc_module_errors(m));
    free(x);
    free(y);
    ampc_module_destroy(m);
}
