/*
 * test_hostile.c — the run-time API against callers that get things wrong or unusual: input and
 * output pointers that are misaligned, that are device memory instead of host memory (or device
 * memory misaligned), tensors with the wrong dtype, shape or count handed to a compiled module,
 * a run after a rejected run, several threads each on their own model at once, and a plan larger
 * than the whole device.
 *
 * Needs a GPU of compute capability 8.0 or newer: without one every test skips with the
 * runtime's own "no CUDA device: ..." reason (the binary is runtime_test_hostile; run it on the
 * GPU machine). What the contract leaves to the caller is not tested here because no API can
 * detect it: a handle used after destroy (as with free()), two threads on one model at once
 * (include/ampc_runtime.h: "calls on one model must not overlap"), a buffer shorter than its
 * tensor's bytes.
 */
#include "support.h"

#include "ampc_runtime.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The CUDA driver maps memory inside AddressSanitizer's shadow gap; without this option every
 * cudaMalloc fails in sanitized builds on a GPU machine. */
const char *__asan_default_options(void) __attribute__((used, visibility("default")));
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }

enum { N = 1000 }; /* elements of x and y */


/* y = relu(2x + 1) over f32[N], compiled for the GPU present (PTX + its cubin). */
static ampc_module *compile_affine(void) {
    ampc_graph *g = ampc_graph_create("hostile");
    int64_t d = N;
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 1, &d);
    ampc_value *y = ampc_relu(g, ampc_add(g, ampc_mul(g, x, ampc_scalar_f32(g, 2)), ampc_scalar_f32(g, 1)));
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    ampc_compile_options o = {.cache_dir = ""};
    ampc_module *m = NULL;
    ampc_status st = ampc_compile(g, &o, &m);
    cr_assert_eq(st, AMPC_OK, "compile: %s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    return m;
}

static void fill_x(float *x, float shift) {
    for (int i = 0; i < N; i++) x[i] = (float)(i % 17) - 8.0f + shift;
}

/* Checks y == relu(2x + 1) exactly (every value is small and exact in f32). */
static void expect_affine(const float *x, const float *y) {
    for (int i = 0; i < N; i++) {
        float want = 2 * x[i] + 1 > 0 ? 2 * x[i] + 1 : 0;
        cr_assert_eq(y[i], want, "y[%d] = %g, expected %g (x = %g)", i, y[i], want, x[i]);
    }
}

static void run_ok(ampc_module *m, float *x, float *y) {
    ampc_tensor in = {AMPC_DTYPE_F32, {1, {N}}, x}, out = {AMPC_DTYPE_F32, {1, {N}}, y};
    ampc_status st = ampc_module_run(m, &in, 1, &out, 1, NULL);
    cr_assert_eq(st, AMPC_OK, "run: %s", ampc_module_errors(m));
}

/* ---- pointers --------------------------------------------------------------------------------- */

/* Host buffers at odd addresses: the runtime copies them as bytes, alignment does not matter. */
Test(runtime_hostile, misaligned_host_buffers) {
    t_skip_without_gpu();
    ampc_module *m = compile_affine();
    char *xb = malloc(N * sizeof(float) + 8), *yb = malloc(N * sizeof(float) + 8);
    float xv[N], yv[N];
    fill_x(xv, 0);
    memcpy(xb + 1, xv, sizeof xv);
    run_ok(m, (float *)(void *)(xb + 1), (float *)(void *)(yb + 3));
    memcpy(yv, yb + 3, sizeof yv);
    expect_affine(xv, yv);
    free(xb);
    free(yb);
    ampc_module_destroy(m);
}

/* Device buffers, aligned and misaligned, for the input and the output. */
Test(runtime_hostile, device_buffers_aligned_and_misaligned) {
    t_skip_without_gpu();
    ampc_module *m = compile_affine();
    float xv[N], yv[N];
    fill_x(xv, 0.5f);
    char *dx = NULL, *dy = NULL;
    cr_assert_eq(cudaMalloc((void **)&dx, N * sizeof(float) + 16), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dy, N * sizeof(float) + 16), cudaSuccess);
    for (int off = 0; off < 8; off += 5) { /* offsets 0 and 5 */
        cr_assert_eq(cudaMemcpy(dx + off, xv, sizeof xv, cudaMemcpyHostToDevice), cudaSuccess);
        cr_assert_eq(cudaMemset(dy, 0xff, N * sizeof(float) + 16), cudaSuccess);
        run_ok(m, (float *)(void *)(dx + off), (float *)(void *)(dy + off + 2));
        cr_assert_eq(cudaMemcpy(yv, dy + off + 2, sizeof yv, cudaMemcpyDeviceToHost), cudaSuccess);
        expect_affine(xv, yv);
    }
    cudaFree(dx);
    cudaFree(dy);
    ampc_module_destroy(m);
}

/* A host input with a device output and the reverse, in one module. */
Test(runtime_hostile, host_and_device_buffers_mixed) {
    t_skip_without_gpu();
    ampc_module *m = compile_affine();
    float xv[N], yv[N];
    fill_x(xv, 0.25f);
    float *dx = NULL, *dy = NULL;
    cr_assert_eq(cudaMalloc((void **)&dx, sizeof xv), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dy, sizeof yv), cudaSuccess);
    run_ok(m, xv, dy);
    cr_assert_eq(cudaMemcpy(yv, dy, sizeof yv, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_affine(xv, yv);
    cr_assert_eq(cudaMemcpy(dx, xv, sizeof xv, cudaMemcpyHostToDevice), cudaSuccess);
    memset(yv, 0, sizeof yv);
    run_ok(m, dx, yv);
    expect_affine(xv, yv);
    cudaFree(dx);
    cudaFree(dy);
    ampc_module_destroy(m);
}

/* Device memory of another device is refused before anything is copied. */
Test(runtime_hostile, device_memory_of_another_device_is_refused) {
    t_skip_without_gpu();
    int n = 0;
    cr_assert_eq(cudaGetDeviceCount(&n), cudaSuccess);
    if (n < 2) t_skip_needs_devices(2, n); /* memory of another device */
    ampc_module *m = compile_affine();
    float *other = NULL, yv[N];
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&other, N * sizeof(float)), cudaSuccess);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    ampc_tensor in = {AMPC_DTYPE_F32, {1, {N}}, other}, out = {AMPC_DTYPE_F32, {1, {N}}, yv};
    ampc_status st = ampc_module_run(m, &in, 1, &out, 1, NULL);
    cr_assert_eq(st, AMPC_E_INVALID_ARG, "got %s: %s", ampc_status_str(st), ampc_module_errors(m));
    cr_assert(strstr(ampc_module_errors(m), "device"), "%s", ampc_module_errors(m));
    cudaFree(other);
    ampc_module_destroy(m);
}

/* ---- tensors ---------------------------------------------------------------------------------- */

/* Through the JIT module: each wrong tensor is refused with a message naming it, the output is
 * not written, and a correct run afterwards still works. */
Test(runtime_hostile, wrong_tensors_through_a_module_are_refused_and_harmless) {
    t_skip_without_gpu();
    ampc_module *m = compile_affine();
    float xv[N], yv[N];
    fill_x(xv, 0);
    memset(yv, 0x7f, sizeof yv);
    ampc_tensor in = {AMPC_DTYPE_F32, {1, {N}}, xv}, out = {AMPC_DTYPE_F32, {1, {N}}, yv};
    struct {
        ampc_tensor in;
        int32_t n_in;
        ampc_status want;
        const char *needle;
    } cases[] = {
        {{AMPC_DTYPE_F16, {1, {N}}, xv}, 1, AMPC_E_DTYPE, "input 0 'x' has dtype f16, expected f32"},
        {{AMPC_DTYPE_F32, {1, {N - 1}}, xv}, 1, AMPC_E_SHAPE, "input 0 'x' has shape [999]"},
        {{AMPC_DTYPE_F32, {2, {1, N}}, xv}, 1, AMPC_E_SHAPE, "input 0 'x' has shape [1, 1000]"},
        {{AMPC_DTYPE_F32, {1, {N}}, NULL}, 1, AMPC_E_INVALID_ARG, "input 0 'x' has NULL data"},
        {{AMPC_DTYPE_UNDEFINED, {1, {N}}, xv}, 1, AMPC_E_DTYPE, "input 0 'x' has dtype"},
        {{AMPC_DTYPE_F32, {-1, {N}}, xv}, 1, AMPC_E_SHAPE, "input 0 'x'"},
        {{AMPC_DTYPE_F32, {1, {N}}, xv}, 0, AMPC_E_INVALID_ARG, "got 0 inputs"},
    };
    for (int i = 0; i < AMPC_ARRAY_LEN(cases); i++) {
        ampc_status st = ampc_module_run(m, &cases[i].in, cases[i].n_in, &out, 1, NULL);
        cr_assert_eq(st, cases[i].want, "case %d: got %s, expected %s: %s", i, ampc_status_str(st),
                     ampc_status_str(cases[i].want), ampc_module_errors(m));
        cr_assert(strstr(ampc_module_errors(m), cases[i].needle), "case %d: message\n  %s\nlacks\n  %s",
                  i, ampc_module_errors(m), cases[i].needle);
        uint32_t sentinel;
        memcpy(&sentinel, &yv[0], 4);
        cr_assert_eq(sentinel, 0x7f7f7f7fu, "case %d: a rejected run wrote the output", i);
    }
    ampc_status st = ampc_module_run(m, &in, 1, &out, 1, NULL);
    cr_assert_eq(st, AMPC_OK, "%s", ampc_module_errors(m));
    expect_affine(xv, yv);
    ampc_module_destroy(m);
}

/* ---- threads ---------------------------------------------------------------------------------- */

enum { THREADS = 4, RUNS = 50 };

typedef struct worker {
    ampc_module *m;
    float shift;
    int bad_runs; /* runs that failed or gave wrong values */
    char first_error[256];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    float xv[N], yv[N];
    for (int r = 0; r < RUNS; r++) {
        fill_x(xv, w->shift + (float)r);
        ampc_tensor in = {AMPC_DTYPE_F32, {1, {N}}, xv}, out = {AMPC_DTYPE_F32, {1, {N}}, yv};
        bool ok = ampc_module_run(w->m, &in, 1, &out, 1, NULL) == AMPC_OK;
        for (int i = 0; ok && i < N; i++) ok = yv[i] == (2 * xv[i] + 1 > 0 ? 2 * xv[i] + 1 : 0);
        if (!ok && !w->bad_runs++)
            snprintf(w->first_error, sizeof w->first_error, "run %d: %s", r, ampc_module_errors(w->m));
    }
    return NULL;
}

/* Different models may run concurrently (the contract): each thread its own module, every
 * result exact. */
Test(runtime_hostile, threads_each_on_their_own_model, .timeout = 300) {
    t_skip_without_gpu();
    worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.m = compile_affine(), .shift = 0.25f * (float)i};
        float xv[N], yv[N];
        fill_x(xv, 0);
        run_ok(w[i].m, xv, yv); /* the first run loads the module and captures its graph */
    }
    for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        cr_expect_eq(w[i].bad_runs, 0, "thread %d: %d of %d runs failed or were wrong; first: %s", i,
                     w[i].bad_runs, RUNS, w[i].first_error);
        ampc_module_destroy(w[i].m);
    }
}

/* ---- sizes -------------------------------------------------------------------------------- */

/* An input declared f32[2^20, 2^20] (4 TiB) compiles (nothing is allocated at compile time), but
 * no GPU holds its arena: creation refuses it before allocating, naming the sizes and the input,
 * instead of a bare CUDA out-of-memory error. */
Test(runtime_hostile, a_plan_larger_than_the_device_is_refused_naming_the_tensor) {
    t_skip_without_gpu();
    ampc_graph *g = ampc_graph_create("huge");
    int64_t d[2] = {1 << 20, 1 << 20};
    ampc_value *x = ampc_input(g, "huge_x", AMPC_DTYPE_F32, 2, d);
    cr_assert_eq(ampc_output(g, ampc_relu(g, x), "y"), AMPC_OK);
    ampc_compile_options o = {.cache_dir = ""};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "compile: %s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    float one = 1, out = 0;
    ampc_tensor in = {AMPC_DTYPE_F32, {2, {1 << 20, 1 << 20}}, &one};
    ampc_tensor y = {AMPC_DTYPE_F32, {2, {1 << 20, 1 << 20}}, &out};
    cr_assert_eq(ampc_module_run(m, &in, 1, &y, 1, NULL), AMPC_E_OOM, "%s", ampc_module_errors(m));
    const char *msg = ampc_module_errors(m);
    cr_assert(strstr(msg, "bytes of GPU memory") && strstr(msg, "more than device 0") &&
              strstr(msg, "'huge_x', takes 4398046511104 bytes"), "%s", msg);
    ampc_module_destroy(m);
}
