/*
 * bench_sparse.c — ampc's dense GEMM step (cuBLASLt) against its 2:4 sparse steps, cuSPARSELt
 * and ampc's own generated mma.sp kernel, at M x N x K, in one process on one GPU
 * (docs/sparsity.md; bench/sparse/run.sh runs it).
 *
 * For each shape: a graph y = x[M,K] @ w[K,N] with w 2:4 along K (random values), compiled once
 * with --sparsity verify; the plan is loaded three times, under AMPC_SPARSE=0 (dense),
 * =cusparselt and =kernel, each run once on the same random x and its output compared with the
 * dense one; then the models' steps are timed with CUDA events (ampc_rt_model_time: the plan's
 * CUDA graph replayed, one GEMM each) in alternating blocks, and the medians and their ratios
 * to dense printed, with the times the runtime itself measured at load (its cost model's
 * inputs). A way that cannot run (no cuSPARSELt) is reported and left out; ampc's kernel
 * failing to run, or any output off dense by more than 2 % of max |y|, is exit status 1.
 *
 *   ampc-bench-sparse [--shapes 4096x4096x4096,...] [--dtype f16|bf16] [--iterations N]
 */
#define _GNU_SOURCE /* setenv */
#include "ampc.h"
#include "ampc_runtime.h"
#include "compiler/module.h"
#include "ir/ref/ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* uniform in [-1, 1) */
static double uni(uint64_t *s) { return (double)(lcg(s) % 2000000) / 1000000.0 - 1.0; }

/* w [k, n] row-major with 2 non-zeros in every 4 consecutive rows of a column. */
static void *weight_24(ampc_dtype t, int64_t k, int64_t n, uint64_t seed) {
    void *w = calloc((size_t)(k * n), ampc_dtype_size(t));
    if (w == NULL) return NULL;
    for (int64_t g = 0; g < k; g += 4)
        for (int64_t j = 0; j < n; j++) {
            int a = (int)(lcg(&seed) % 4), b = (a + 1 + (int)(lcg(&seed) % 3)) % 4;
            ampc_ref_store_f64(w, t, (g + a) * n + j, uni(&seed));
            ampc_ref_store_f64(w, t, (g + b) * n + j, uni(&seed));
        }
    return w;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints and frees *err when s failed (the message is read after the call that set it). */
static bool check(ampc_status s, const char *what, char **err) {
    if (s == AMPC_OK) return true;
    fprintf(stderr, "ampc-bench-sparse: %s: %s\n", what, *err ? *err : "");
    free(*err);
    *err = NULL;
    return false;
}

/* Loads the plan under AMPC_SPARSE=mode and runs it once; NULL on failure (printed). */
static ampc_rt_model *load(const ampc_rt_plan *p, const char *mode, ampc_tensor *x,
                           ampc_tensor *y) {
    setenv("AMPC_SPARSE", mode, 1);
    ampc_rt_model *m = NULL;
    char *err = NULL;
    if (!check(ampc_rt_model_create(p, 0, &m, &err), "loading the plan", &err)) return NULL;
    if (!check(ampc_rt_model_run(m, x, 1, y, 1, NULL, &err), "running it", &err)) {
        ampc_rt_model_destroy(m);
        return NULL;
    }
    return m;
}

/* The plan's GEMM step and its 2:4 decision. */
static ampc_rt_sparse_choice choice(const ampc_rt_model *m) {
    ampc_rt_sparse_choice c = {false, -1, -1, "the plan has no 2:4 GEMM step", -1, "cuBLASLt"};
    for (int32_t i = 0; i < ampc_rt_model_n_steps(m); i++)
        if (ampc_rt_model_step_sparse(m, i, &c)) break;
    return c;
}

/* The three ways, each a model of the same plan loaded under its AMPC_SPARSE. */
enum { WAYS = 3 };
static const char *const modes[WAYS] = {"0", "cusparselt", "kernel"};
static const char *const names[WAYS] = {"ampc dense (cuBLASLt)", "cuSPARSELt", "ampc 2:4 kernel"};
static const char *const runs_on[WAYS] = {"cuBLASLt", "cuSPARSELt", "ampc-2:4"};

/* Times the loaded models (m[w] NULL: skipped) in alternating blocks; medians into med[w]. */
static bool time_models(ampc_rt_model *m[WAYS], int32_t iters, double med[WAYS]) {
    enum { BLOCKS = 4 };
    int32_t per = iters / BLOCKS > 0 ? iters / BLOCKS : 1, n = per * BLOCKS;
    double *t[WAYS] = {NULL};
    char *err = NULL;
    bool ok = true;
    for (int w = 0; w < WAYS; w++) {
        med[w] = -1;
        t[w] = calloc((size_t)n, sizeof *t[w]);
        ok = ok && t[w] && (!m[w] || check(ampc_rt_model_time(m[w], 20, t[w], &err), "warm-up", &err));
    }
    for (int b = 0; ok && b < BLOCKS; b++)
        for (int w = 0; ok && w < WAYS; w++)
            ok = !m[w] || check(ampc_rt_model_time(m[w], per, t[w] + b * per, &err), names[w], &err);
    for (int w = 0; ok && w < WAYS; w++)
        if (m[w]) {
            qsort(t[w], (size_t)n, sizeof *t[w], cmp_double);
            med[w] = t[w][n / 2];
        }
    for (int w = 0; w < WAYS; w++) free(t[w]);
    return ok;
}

/* y = x[M,K] @ w[K,N], w 2:4: each way loaded, checked against dense, timed; one row each. */
static int bench_shape(int64_t M, int64_t N, int64_t K, ampc_dtype t, int32_t iters) {
    ampc_graph *g = ampc_graph_create("sparse_gemm");
    int64_t xd[2] = {M, K}, wd[2] = {K, N};
    void *wdata = weight_24(t, K, N, 1234);
    if (wdata == NULL) return fprintf(stderr, "ampc-bench-sparse: out of host memory\n"), 1;
    ampc_value *x = ampc_input(g, "x", t, 2, xd);
    ampc_value *w = ampc_constant(g, "w", t, 2, wd, wdata);
    free(wdata);
    ampc_output(g, ampc_matmul(g, x, w), "y");
    ampc_pipeline_options po = {.sparsity = AMPC_SPARSITY_VERIFY};
    ampc_compile_options o = {.pipeline = &po};
    ampc_module *mod = NULL;
    if (ampc_compile(g, &o, &mod) != AMPC_OK) {
        fprintf(stderr, "ampc-bench-sparse: compile: %s\n", ampc_graph_errors(g));
        ampc_graph_destroy(g);
        return 1;
    }
    const ampc_rt_plan *plan = &mod->cg->plan;
    ampc_tensor in = {t, {2, {M, K}}, malloc((size_t)(M * K) * ampc_dtype_size(t))};
    ampc_tensor y[WAYS];
    uint64_t seed = 99;
    for (int64_t i = 0; i < M * K; i++) ampc_ref_store_f64(in.data, t, i, uni(&seed));
    ampc_rt_model *m[WAYS] = {NULL};
    ampc_rt_sparse_choice c[WAYS];
    int rc = 0;
    for (int w = 0; w < WAYS; w++) {
        y[w] = (ampc_tensor){t, {2, {M, N}}, malloc((size_t)(M * N) * ampc_dtype_size(t))};
        m[w] = load(plan, modes[w], &in, &y[w]);
        c[w] = m[w] ? choice(m[w]) : (ampc_rt_sparse_choice){0};
        /* a way that planned nothing runs dense: no row of its own */
        if (m[w] && w > 0 && strcmp(c[w].runs_on, runs_on[w]) != 0) {
            printf("  %s: not run (%s)\n", names[w], c[w].note);
            ampc_rt_model_destroy(m[w]);
            m[w] = NULL;
            rc |= w == 2; /* ampc's own kernel must always run */
        }
    }
    double med[WAYS], flops = 2.0 * (double)M * (double)N * (double)K;
    if (m[0] && time_models(m, iters, med)) {
        printf("M=%lld N=%lld K=%lld %s (median of %d runs each):\n", (long long)M, (long long)N,
               (long long)K, t == AMPC_DTYPE_BF16 ? "bf16" : "f16", iters / 4 * 4);
        for (int w = 0; w < WAYS; w++) {
            if (!m[w]) continue;
            double worst = 0, scale = 0;
            for (int64_t i = 0; i < M * N; i++) {
                double a = ampc_ref_load_f64(y[0].data, t, i), b = ampc_ref_load_f64(y[w].data, t, i);
                worst = fmax(worst, fabs(a - b));
                scale = fmax(scale, fabs(a));
            }
            printf("  %-22s %9.4f ms %5.0f TFLOP/s (dense-equivalent) %5.2fx dense; max |y - dense| "
                   "%.3g of max |y| %.3g\n", names[w], med[w], flops / med[w] / 1e9,
                   med[0] / med[w], worst, scale);
            if (worst > 2e-2 * scale + 1e-3) rc = 1;
        }
        printf("  at load (the cost model's inputs): dense %.4f, cuSPARSELt %.4f, ampc 2:4 %.4f ms\n",
               c[2].dense_ms, c[1].sparse_ms, c[2].kernel_ms);
    } else {
        rc = 1;
    }
    for (int w = 0; w < WAYS; w++) {
        ampc_rt_model_destroy(m[w]);
        free(y[w].data);
    }
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
    free(in.data);
    return rc;
}

/* The runtime's diagnostics (AMPC_SPARSE_VERBOSE's decisions), on stderr. */
static void log_line(void *user, const char *line) {
    (void)user;
    fprintf(stderr, "ampc: %s\n", line);
}

int main(int argc, char **argv) {
    ampc_rt_set_log(log_line, NULL);
    const char *shapes = "4096x4096x4096,8192x8192x8192";
    ampc_dtype t = AMPC_DTYPE_F16;
    int32_t iters = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "f16") && strcmp(v, "bf16"))
                return fprintf(stderr, "ampc-bench-sparse: --dtype %s: give f16 or bf16\n", v), 2;
            t = strcmp(v, "bf16") ? AMPC_DTYPE_F16 : AMPC_DTYPE_BF16;
        } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: ampc-bench-sparse [--shapes MxNxK,...] [--dtype f16|bf16] "
                            "[--iterations N]\n");
            return 2;
        }
    }
    if (iters < 4) iters = 4;
    int rc = 0;
    for (const char *p = shapes; *p;) {
        long long d[3];
        char *end = (char *)p;
        for (int j = 0; j < 3; j++) {
            const char *at = end;
            d[j] = strtoll(at, &end, 10);
            if (end == at || d[j] <= 0 || d[j] % 8 || (j < 2 && *end != 'x')) {
                fprintf(stderr, "ampc-bench-sparse: shape '%s': give MxNxK, multiples of 8\n", p);
                return 2;
            }
            if (j < 2) end++;
        }
        rc |= bench_shape((int64_t)d[0], (int64_t)d[1], (int64_t)d[2], t, iters);
        p = *end == ',' ? end + 1 : end;
    }
    return rc;
}
