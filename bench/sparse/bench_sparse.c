/*
 * bench_sparse.c — ampc's dense GEMM step (cuBLASLt) against its 2:4 sparse step (cuSPARSELt)
 * at M = N = K = S, in one process on one GPU (docs/sparsity.md; bench/sparse/run.sh runs it).
 *
 * For each size: a graph y = x[S,S] @ w[S,S] with w 2:4 along K (random values), compiled once
 * with --sparsity verify; the plan is loaded twice, under AMPC_SPARSE=0 (dense) and
 * AMPC_SPARSE=1 (sparse), both run once on the same random x and their outputs compared; then
 * the two models' steps are timed with CUDA events (ampc_rt_model_time: the plan's CUDA graph
 * replayed, one GEMM each) in alternating blocks, and the medians and their ratio printed,
 * together with the times the runtime itself measured at load (its cost model's inputs).
 *
 *   ampc-bench-sparse [--sizes 4096,8192] [--dtype f16|bf16] [--iterations N]
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
    ampc_rt_sparse_choice c = {false, -1, -1, "the plan has no 2:4 GEMM step"};
    for (int32_t i = 0; i < ampc_rt_model_n_steps(m); i++)
        if (ampc_rt_model_step_sparse(m, i, &c)) break;
    return c;
}

static int bench_size(int64_t s, ampc_dtype t, int32_t iters) {
    ampc_graph *g = ampc_graph_create("sparse_gemm");
    int64_t xd[2] = {s, s};
    void *wdata = weight_24(t, s, s, 1234);
    if (wdata == NULL) return fprintf(stderr, "ampc-bench-sparse: out of host memory\n"), 1;
    ampc_value *x = ampc_input(g, "x", t, 2, xd);
    ampc_value *w = ampc_constant(g, "w", t, 2, xd, wdata);
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

    size_t bytes = (size_t)(s * s) * ampc_dtype_size(t);
    ampc_tensor in = {t, {2, {s, s}}, malloc(bytes)};
    ampc_tensor yd = {t, {2, {s, s}}, malloc(bytes)}, ys = {t, {2, {s, s}}, malloc(bytes)};
    uint64_t seed = 99;
    for (int64_t i = 0; i < s * s; i++) ampc_ref_store_f64(in.data, t, i, uni(&seed));
    ampc_rt_model *dense = load(plan, "0", &in, &yd);
    ampc_rt_model *sparse = dense ? load(plan, "1", &in, &ys) : NULL;
    int rc = 1;
    if (dense && sparse) {
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < s * s; i++) {
            double a = ampc_ref_load_f64(yd.data, t, i), b = ampc_ref_load_f64(ys.data, t, i);
            worst = fmax(worst, fabs(a - b));
            scale = fmax(scale, fabs(a));
        }
        ampc_rt_sparse_choice cs = choice(sparse);
        /* alternating blocks, so that clock drift hits both alike */
        enum { BLOCKS = 4 };
        int32_t per = iters / BLOCKS > 0 ? iters / BLOCKS : 1;
        double *td = calloc((size_t)per * BLOCKS, sizeof *td);
        double *ts = calloc((size_t)per * BLOCKS, sizeof *ts);
        char *err = NULL;
        bool ok = td && ts && check(ampc_rt_model_time(dense, 20, td, &err), "warm-up", &err) &&
                  check(ampc_rt_model_time(sparse, 20, ts, &err), "warm-up", &err);
        for (int b = 0; ok && b < BLOCKS; b++)
            ok = check(ampc_rt_model_time(dense, per, td + b * per, &err), "timing dense", &err) &&
                 check(ampc_rt_model_time(sparse, per, ts + b * per, &err), "timing sparse", &err);
        if (ok) {
            int32_t n = per * BLOCKS;
            qsort(td, (size_t)n, sizeof *td, cmp_double);
            qsort(ts, (size_t)n, sizeof *ts, cmp_double);
            double md = td[n / 2], ms = ts[n / 2], flops = 2.0 * (double)s * (double)s * (double)s;
            printf("M=N=K=%lld %s: dense %.4f ms (%.0f TFLOP/s), sparse %.4f ms (%.0f TFLOP/s "
                   "dense-equivalent), speedup %.2fx; median of %d runs each; sparse ran on %s\n",
                   (long long)s, t == AMPC_DTYPE_BF16 ? "bf16" : "f16", md, flops / md / 1e9, ms,
                   flops / ms / 1e9, md / ms, n, cs.sparse ? "cuSPARSELt" : "cuBLASLt (dense!)");
            const char *why = "";
            bool graph = ampc_rt_model_graph_status(sparse, &why) == AMPC_RT_GRAPH_ON;
            printf("  at load: dense %.4f ms, sparse %.4f ms (%s); max |dense - sparse| %.3g "
                   "(max |y| %.3g); sparse model's CUDA graph: %s%s\n", cs.dense_ms,
                   cs.sparse_ms, cs.note, worst, scale, graph ? "on" : "off: ", why);
            rc = cs.sparse ? 0 : 1;
        }
        free(td);
        free(ts);
    }
    ampc_rt_model_destroy(dense);
    ampc_rt_model_destroy(sparse);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
    free(in.data);
    free(yd.data);
    free(ys.data);
    return rc;
}

int main(int argc, char **argv) {
    const char *sizes = "4096,8192";
    ampc_dtype t = AMPC_DTYPE_F16;
    int32_t iters = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) sizes = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "f16") && strcmp(v, "bf16"))
                return fprintf(stderr, "ampc-bench-sparse: --dtype %s: give f16 or bf16\n", v), 2;
            t = strcmp(v, "bf16") ? AMPC_DTYPE_F16 : AMPC_DTYPE_BF16;
        } else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: ampc-bench-sparse [--sizes 4096,8192] [--dtype f16|bf16] "
                            "[--iterations N]\n");
            return 2;
        }
    }
    if (iters < 4) iters = 4;
    int rc = 0;
    for (const char *p = sizes; *p;) {
        char *end;
        long long s = strtoll(p, &end, 10);
        if (end == p || s <= 0 || s % 16) {
            fprintf(stderr, "ampc-bench-sparse: size '%s': give multiples of 16\n", p);
            return 2;
        }
        rc |= bench_size((int64_t)s, t, iters);
        p = *end == ',' ? end + 1 : end;
    }
    return rc;
}
