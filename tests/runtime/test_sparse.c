/*
 * test_sparse.c — 2:4 sparse GEMMs: the sparsity pass's mark carried to the plan's GEMM step,
 * the runtime's choice between cuBLASLt (dense), cuSPARSELt and ampc's own generated 2:4 kernel,
 * and the report of it (runtime/prov_cusparselt.c, runtime/prov_cublaslt.c,
 * codegen/sparse_gemm.c, docs/sparsity.md).
 *
 * On every machine: the cost model and AMPC_SPARSE, the static rules, the mark codegen puts on
 * a step (compiling needs no GPU), and a missing cuSPARSELt reported as a note, not a failure.
 * With a GPU: 2:4 products in f16 and bf16 at several shapes (MatMul, Gemm with transB and a
 * row bias, MatMul + bias + ReLU fused, a residual) against the reference evaluator, with
 * AMPC_SPARSE=cusparselt asserting the step really ran on cuSPARSELt (skipped, with the
 * library's message, where it cannot be loaded) and with AMPC_SPARSE=kernel on ampc's kernel
 * (M not a multiple of the block, K 768 / 3072, N 768 / 3072 / 4096, N and K padded);
 * AMPC_SPARSE=0 keeping the step dense; auto keeping the fastest; the missing library path.
 */
#define _GNU_SOURCE /* setenv */
#include "support.h"

#include "compiler/module.h"
#include "ir/ref/ref.h"
#include "runtime/internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *__asan_default_options(void) __attribute__((used, visibility("default")));
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }

/* ---- graphs ------------------------------------------------------------------------------------ */

typedef enum shape_kind {
    K_MATMUL,    /* y = x[M,K] @ w[K,N] */
    K_GEMM_TB,   /* y = Gemm(x[M,K], w[N,K], bias[N], transB = 1) */
    K_BIAS_RELU, /* y = relu(x @ w + bias): fuse-matmul makes it one GEMM with an epilogue */
    K_RESIDUAL,  /* y = x @ w + bias + z (z a constant [M,N]): the residual as C, beta 1 */
} shape_kind;

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* A weight of `rows` x `cols` (row-major) whose groups of 4 along K hold exactly 2 non-zeros
 * (uniform in [-1, 1), never 0); K runs down the rows when k_rows, else along a row. */
static void *weight_24(ampc_dtype t, int64_t rows, int64_t cols, bool k_rows, uint64_t seed) {
    void *w = calloc((size_t)(rows * cols), ampc_dtype_size(t));
    int64_t k = k_rows ? rows : cols, other = k_rows ? cols : rows;
    for (int64_t o = 0; o < other; o++)
        for (int64_t g = 0; g < k; g += 4) {
            int a = (int)(lcg(&seed) % 4), b = (a + 1 + (int)(lcg(&seed) % 3)) % 4;
            for (int j = 0; j < 4; j++) {
                double v = 0;
                if (j == a || j == b) {
                    v = (double)(lcg(&seed) % 2000) / 1000.0 - 1.0;
                    if (v == 0) v = 0.5;
                }
                int64_t kk = g + j, idx = k_rows ? kk * cols + o : o * cols + kk;
                ampc_ref_store_f64(w, t, idx, v);
            }
        }
    return w;
}

static ampc_graph *sparse_graph(shape_kind kind, ampc_dtype t, int64_t m, int64_t n, int64_t k) {
    ampc_graph *g = ampc_graph_create("sparse");
    int64_t xd[2] = {m, k};
    ampc_value *x = ampc_input(g, "x", t, 2, xd), *y;
    bool tb = kind == K_GEMM_TB;
    int64_t wd[2] = {tb ? n : k, tb ? k : n};
    void *w = weight_24(t, wd[0], wd[1], !tb, 7);
    ampc_value *wv = ampc_constant(g, "w", t, 2, wd, w);
    free(w);
    void *b = calloc((size_t)n, ampc_dtype_size(t));
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(b, t, i, (double)(i % 7) * 0.25 - 0.75);
    ampc_value *bias = ampc_constant(g, "b", t, 1, &n, b);
    free(b);
    if (kind == K_MATMUL) y = ampc_matmul(g, x, wv);
    else if (kind == K_GEMM_TB) y = ampc_gemm(g, x, wv, bias, false, true);
    else if (kind == K_BIAS_RELU) y = ampc_relu(g, ampc_add(g, ampc_matmul(g, x, wv), bias));
    else {
        int64_t zd[2] = {m, n};
        void *z = calloc((size_t)(m * n), ampc_dtype_size(t));
        for (int64_t i = 0; i < m * n; i++) ampc_ref_store_f64(z, t, i, (double)(i % 5) * 0.25 - 0.5);
        y = ampc_add(g, ampc_add(g, ampc_matmul(g, x, wv), bias), ampc_constant(g, "z", t, 2, zd, z));
        free(z);
    }
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static ampc_module *compile_verify(ampc_graph *g) {
    static const int32_t none = 0;
    ampc_pipeline_options po = {.verify = true, .sparsity = AMPC_SPARSITY_VERIFY};
    ampc_compile_options o = {.archs = &none, .n_archs = 0, .cache_dir = "", .pipeline = &po};
    ampc_module *mod = NULL;
    ampc_status st = ampc_compile(g, &o, &mod);
    cr_assert_eq(st, AMPC_OK, "compile: %s", ampc_graph_errors(g));
    return mod;
}

/* The plan's one GEMM step (index in *at). */
static const ampc_rt_gemm *the_gemm(const ampc_module *mod, int32_t *at) {
    const ampc_rt_plan *p = &mod->cg->plan;
    for (int32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].kind == AMPC_RT_STEP_GEMM) {
            if (at) *at = i;
            return &p->steps[i].gemm;
        }
    cr_assert_fail("the plan has no GEMM step");
    return NULL;
}

/* ---- on every machine ------------------------------------------------------------------------ */

Test(sparse_host, cost_model_keeps_the_faster) {
    cr_assert(rt_sparse_pick(RT_SPARSE_AUTO, 1.0, 0.6));
    cr_assert(!rt_sparse_pick(RT_SPARSE_AUTO, 0.6, 1.0));
    cr_assert(!rt_sparse_pick(RT_SPARSE_AUTO, 1.0, 1.0), "a tie stays dense");
    cr_assert(!rt_sparse_pick(RT_SPARSE_AUTO, 1.0, -1), "a sparse call that failed stays dense");
    cr_assert(rt_sparse_pick(RT_SPARSE_AUTO, -1, 0.5), "dense could not be timed");
    cr_assert(rt_sparse_pick(RT_SPARSE_FORCE, 0.1, 5.0));
    cr_assert(!rt_sparse_pick(RT_SPARSE_FORCE, 0.1, -1), "forcing cannot run what did not plan");
    cr_assert(!rt_sparse_pick(RT_SPARSE_OFF, 5.0, 0.1));
}

/* The sparse options from the environment (ampc_rt_options_init), and the mode each gives. */
static rt_sparse_mode mode_with(const char *v) {
    if (v) setenv("AMPC_SPARSE", v, 1);
    else unsetenv("AMPC_SPARSE");
    ampc_rt_options o;
    ampc_rt_options_init(&o);
    return rt_sparse_mode_get(&o);
}

Test(sparse_host, mode_from_the_environment) {
    cr_assert_eq(mode_with(NULL), RT_SPARSE_AUTO);
    cr_assert_eq(mode_with("0"), RT_SPARSE_OFF);
    cr_assert_eq(mode_with("1"), RT_SPARSE_FORCE);
    cr_assert_eq(mode_with("auto"), RT_SPARSE_AUTO);
    cr_assert_eq(mode_with("cusparselt"), RT_SPARSE_FORCE_CUSPARSELT);
    cr_assert_eq(mode_with("kernel"), RT_SPARSE_FORCE_KERNEL);
    cr_assert_str_eq(rt_sparse_way_name(RT_SPARSE_KERNEL), "ampc-2:4");
    cr_assert(rt_sparse_pick(RT_SPARSE_FORCE_KERNEL, 0.1, 5.0), "a forced way runs when it plans");
    ampc_rt_options o;
    unsetenv("AMPC_SPARSE_VERBOSE");
    ampc_rt_options_init(&o);
    cr_assert(!o.sparse_verbose);
    setenv("AMPC_SPARSE_VERBOSE", "1", 1);
    ampc_rt_options_init(&o);
    cr_assert(o.sparse_verbose);
    unsetenv("AMPC_SPARSE_VERBOSE");
    unsetenv("AMPC_SPARSE");
}

Test(sparse_host, static_rules_name_the_reason) {
    ampc_rt_gemm g = {.m = 64, .n = 128, .k = 256, .batch = 1, .lda = 256, .ldb = 128,
                      .ldc = 128, .ldd = 128, .dtype_ab = AMPC_DTYPE_F16,
                      .dtype_cd = AMPC_DTYPE_F16, .dtype_bias = AMPC_DTYPE_F16, .sparse24 = 1,
                      .alpha = 1, .b = {AMPC_RT_WEIGHTS, 0, 256 * 128 * 2}};
    cr_assert_null(rt_sparse_gemm_why_not(&g));
    ampc_rt_gemm h = g;
    h.sparse24 = 0;
    cr_assert(strstr(rt_sparse_gemm_why_not(&h), "not marked"));
    h = g;
    h.dtype_ab = h.dtype_cd = AMPC_DTYPE_F32;
    cr_assert(strstr(rt_sparse_gemm_why_not(&h), "f16 and bf16"));
    h = g;
    h.batch = 2;
    cr_assert(strstr(rt_sparse_gemm_why_not(&h), "batched"));
    h = g;
    h.b.space = AMPC_RT_ARENA;
    cr_assert(strstr(rt_sparse_gemm_why_not(&h), "not a constant"));
    h = g;
    h.epilogue = AMPC_RT_EPI_BIAS;
    h.dtype_bias = AMPC_DTYPE_F32;
    cr_assert(strstr(rt_sparse_gemm_why_not(&h), "bias dtype"));
    h = g;
    h.n = h.ldb = h.ldd = h.ldc = 100;
    cr_assert(strstr(rt_sparse_gemm_why_not(&h), "multiple of 8"));
}

/* Codegen carries the pass's mark to the step: verify marks a 2:4 weight; off leaves it. */
Test(sparse_host, the_mark_reaches_the_gemm_step) {
    shape_kind kinds[3] = {K_MATMUL, K_GEMM_TB, K_BIAS_RELU};
    for (int i = 0; i < 3; i++) {
        ampc_graph *gi = sparse_graph(kinds[i], AMPC_DTYPE_F16, 64, 128, 256);
        ampc_module *mod = compile_verify(gi);
        const ampc_rt_gemm *g = the_gemm(mod, NULL);
        cr_assert_eq(g->sparse24, 1, "case %d: the GEMM step is not marked", i);
        cr_assert_eq(g->b.space, AMPC_RT_WEIGHTS);
        if (kinds[i] == K_BIAS_RELU)
            cr_assert_eq(g->epilogue, AMPC_RT_EPI_BIAS_RELU, "the bias and ReLU did not fuse");
        ampc_module_destroy(mod);
        ampc_graph_destroy(gi);
    }
    static const int32_t none = 0;
    ampc_graph *g = sparse_graph(K_MATMUL, AMPC_DTYPE_F16, 64, 128, 256);
    ampc_compile_options o = {.archs = &none, .n_archs = 0, .cache_dir = ""};
    ampc_module *mod = NULL;
    cr_assert_eq(ampc_compile(g, &o, &mod), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(the_gemm(mod, NULL)->sparse24, 0, "--sparsity off marks nothing");
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

/* True when the loader finds cuSPARSELt by its soname (then a missing library is unreachable). */
static bool soname_loadable(void) {
    void *h = dlopen("libcusparseLt.so.0", RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
}

/* A missing cuSPARSELt is a message naming it and what was tried, and no sparse plan; planning
 * stops before touching the GPU, so this runs without one. */
Test(sparse_host, missing_library_is_reported) {
    if (soname_loadable())
        t_skip_only_without("cuSPARSELt", "libcusparseLt.so.0 is on the loader's path: the "
                            "missing-library path is not reachable here");
    setenv("AMPC_CUSPARSELT_PATH", "/nonexistent/libcusparseLt.so.0", 1);
    ampc_rt_gemm g = {.m = 64, .n = 128, .k = 256, .batch = 1, .lda = 256, .ldb = 128,
                      .ldc = 128, .ldd = 128, .dtype_ab = AMPC_DTYPE_F16,
                      .dtype_cd = AMPC_DTYPE_F16, .sparse24 = 1, .alpha = 1,
                      .b = {AMPC_RT_WEIGHTS, 0, 256 * 128 * 2}};
    rt_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rt_err e = {0};
    rt_sparse_gemm *sp = (rt_sparse_gemm *)&ctx; /* overwritten with NULL */
    size_t ws = 7;
    cr_assert_eq(rt_sparse_gemm_plan(&ctx, &g, &sp, &ws, &e), AMPC_E_CUDA);
    cr_assert_null(sp);
    cr_assert_eq(ws, 0);
    cr_assert(strstr(e.msg, "cuSPARSELt not found") &&
              strstr(e.msg, "AMPC_CUSPARSELT_PATH=/nonexistent/libcusparseLt.so.0") &&
              strstr(e.msg, "libcusparseLt.so.0") && strstr(e.msg, "0.8.0 or newer"),
              "%s", e.msg);
    rt_err_clear(&e);
    char *err = NULL;
    int64_t v = 1;
    cr_assert_eq(ampc_rt_library_version(AMPC_RT_LIB_CUSPARSELT, &v, NULL, &err), AMPC_E_CUDA);
    cr_assert_eq(v, 0);
    cr_assert(strstr(err, "cuSPARSELt"), "%s", err);
    free(err);
}

/* Where cuSPARSELt is installed (AMPC_CUSPARSELT_PATH or the soname), every entry point ampc
 * declares binds and the version is new enough; needs no GPU. */
Test(sparse_host, library_binds_when_present) {
    const char *path = getenv("AMPC_CUSPARSELT_PATH");
    if ((path == NULL || path[0] == '\0') && !soname_loadable())
        t_skip_needs_cusparselt("not installed here (set AMPC_CUSPARSELT_PATH to a "
                                "libcusparseLt.so.0 to run this check)");
    int64_t v = 0;
    char *file = NULL, *err = NULL;
    ampc_status s = ampc_rt_library_version(AMPC_RT_LIB_CUSPARSELT, &v, &file, &err);
    cr_assert_eq(s, AMPC_OK, "%s", err);
    cr_assert_geq(v, 800, "cuSPARSELt version %lld", (long long)v);
    cr_assert(strstr(file, "libcusparseLt"), "%s", file);
    free(file);
}

/* ---- with a GPU -------------------------------------------------------------------------------- */

static void fill(ampc_tensor *t, uint64_t seed) {
    for (int64_t i = 0; i < ampc_shape_numel(&t->shape); i++)
        ampc_ref_store_f64(t->data, t->dtype, i, (double)(lcg(&seed) % 2000) / 1000.0 - 1.0);
}

/* Compiles (with --sparsity verify) and runs one 2:4 product on the GPU under AMPC_SPARSE=mode,
 * checks the output against the reference evaluator and returns the step's decision. Skips when
 * mode "1" could not load cuSPARSELt. */
static ampc_rt_sparse_choice run_case(shape_kind kind, ampc_dtype t, int64_t m, int64_t n,
                                      int64_t k, const char *mode) {
    t_skip_without_gpu();
    setenv("AMPC_SPARSE", mode, 1);
    ampc_graph *g = sparse_graph(kind, t, m, n, k);
    ampc_tensor x = {t, {2, {m, k}}, calloc((size_t)(m * k), ampc_dtype_size(t))}, ref;
    fill(&x, 11);
    cr_assert_eq(ampc_graph_evaluate(g, &x, 1, &ref, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *mod = compile_verify(g);
    int32_t step = -1;
    cr_assert_eq(the_gemm(mod, &step)->sparse24, 1);
    ampc_tensor y = {t, {2, {m, n}}, calloc((size_t)(m * n), ampc_dtype_size(t))};
    cr_assert_eq(ampc_module_run(mod, &x, 1, &y, 1, NULL), AMPC_OK, "%s", ampc_module_errors(mod));
    ampc_rt_sparse_choice c;
    cr_assert(ampc_rt_model_step_sparse(mod->model, step, &c), "step %d has no 2:4 decision", step);
    char what[512];
    snprintf(what, sizeof what, "%s %lldx%lldx%lld kind %d, AMPC_SPARSE=%s (ran %s; dense %.4f "
             "ms, cuSPARSELt %.4f ms, ampc-2:4 %.4f ms)", rt_dtype_name(t), (long long)m,
             (long long)n, (long long)k, (int)kind, mode, c.runs_on, c.dense_ms, c.sparse_ms,
             c.kernel_ms);
    if (strcmp(mode, "cusparselt") == 0 && !c.sparse && strstr(c.note, "cuSPARSELt not found")) {
        char reason[1024];
        snprintf(reason, sizeof reason, "cannot be loaded: %s", c.note);
        t_skip_needs_cusparselt(reason);
    }
    char msg[512] = "";
    double tol = t == AMPC_DTYPE_BF16 ? 3e-2 : 2e-2;
    bool ok = t_tensors_close(&y, &ref, tol, tol, "y", msg, sizeof msg);
    cr_assert(ok, "%s: %s (note: %s)", what, msg, c.note);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
    free(x.data);
    free(y.data);
    ampc_tensor_free(&ref);
    return c;
}

/* cuSPARSELt forced (AMPC_SPARSE=cusparselt): the step must run there. */
static void expect_sparse(shape_kind kind, ampc_dtype t, int64_t m, int64_t n, int64_t k) {
    ampc_rt_sparse_choice c = run_case(kind, t, m, n, k, "cusparselt");
    cr_assert(c.sparse && strcmp(c.runs_on, "cuSPARSELt") == 0,
              "%s %lldx%lldx%lld: AMPC_SPARSE=cusparselt but the step ran on %s: %s",
              rt_dtype_name(t), (long long)m, (long long)n, (long long)k, c.runs_on, c.note);
    cr_assert_geq(c.sparse_ms, 0);
    cr_assert_lt(c.kernel_ms, 0, "the generated kernel was not to be planned");
}

/* ampc's generated kernel forced (AMPC_SPARSE=kernel): the step must run on it, the output
 * within the tolerance of the reference evaluator (run_case). Needs no cuSPARSELt. */
static void expect_kernel(shape_kind kind, ampc_dtype t, int64_t m, int64_t n, int64_t k) {
    ampc_rt_sparse_choice c = run_case(kind, t, m, n, k, "kernel");
    cr_assert(c.sparse && strcmp(c.runs_on, "ampc-2:4") == 0,
              "%s %lldx%lldx%lld kind %d: AMPC_SPARSE=kernel but the step ran on %s: %s",
              rt_dtype_name(t), (long long)m, (long long)n, (long long)k, (int)kind, c.runs_on,
              c.note);
    cr_assert_gt(c.kernel_ms, 0, "%s", c.note);
    cr_assert_lt(c.sparse_ms, 0, "cuSPARSELt was not to be planned");
}

Test(sparse_gpu, matmul_f16) {
    expect_sparse(K_MATMUL, AMPC_DTYPE_F16, 64, 128, 256);
    expect_sparse(K_MATMUL, AMPC_DTYPE_F16, 256, 512, 1024);
    expect_sparse(K_MATMUL, AMPC_DTYPE_F16, 1024, 768, 3072);
}

Test(sparse_gpu, matmul_bf16) {
    expect_sparse(K_MATMUL, AMPC_DTYPE_BF16, 64, 128, 256);
    expect_sparse(K_MATMUL, AMPC_DTYPE_BF16, 512, 1024, 512);
}

Test(sparse_gpu, gemm_trans_b_with_bias) {
    expect_sparse(K_GEMM_TB, AMPC_DTYPE_F16, 128, 256, 512);
    expect_sparse(K_GEMM_TB, AMPC_DTYPE_BF16, 128, 256, 512);
}

Test(sparse_gpu, matmul_bias_relu_epilogue) {
    expect_sparse(K_BIAS_RELU, AMPC_DTYPE_F16, 256, 768, 768);
    expect_sparse(K_BIAS_RELU, AMPC_DTYPE_BF16, 256, 768, 768);
}

Test(sparse_gpu, large_square_f16) {
    expect_sparse(K_MATMUL, AMPC_DTYPE_F16, 2048, 2048, 2048);
}

Test(sparse_gpu, forced_off_stays_dense) {
    ampc_rt_sparse_choice c = run_case(K_MATMUL, AMPC_DTYPE_F16, 64, 128, 256, "0");
    cr_assert(!c.sparse);
    cr_assert(strstr(c.note, "AMPC_SPARSE=0"), "%s", c.note);
    cr_assert_lt(c.sparse_ms, 0);
}

/* The default (auto) mode records the three times and keeps the fastest, whichever it is. */
Test(sparse_gpu, auto_reports_every_time) {
    ampc_rt_sparse_choice c = run_case(K_MATMUL, AMPC_DTYPE_F16, 1024, 1024, 1024, "auto");
    cr_assert_gt(c.dense_ms, 0, "%s", c.note);
    cr_assert_gt(c.kernel_ms, 0, "%s", c.note);
    double best = c.kernel_ms;
    if (strstr(c.note, "cuSPARSELt not found") == NULL) {
        cr_assert_gt(c.sparse_ms, 0, "%s", c.note);
        if (c.sparse_ms < best) best = c.sparse_ms;
    }
    cr_assert_eq(c.sparse, best < c.dense_ms, "%s", c.note);
    if (c.sparse)
        cr_assert_str_eq(c.runs_on, best == c.kernel_ms ? "ampc-2:4" : "cuSPARSELt", "%s", c.note);
}

/* ---- ampc's generated 2:4 kernel ------------------------------------------------------------- */

Test(sparse_gpu, kernel_matmul_f16_shapes) {
    expect_kernel(K_MATMUL, AMPC_DTYPE_F16, 64, 128, 256);
    expect_kernel(K_MATMUL, AMPC_DTYPE_F16, 200, 768, 768);   /* M not a multiple of 128 */
    expect_kernel(K_MATMUL, AMPC_DTYPE_F16, 333, 3072, 768);
    expect_kernel(K_MATMUL, AMPC_DTYPE_F16, 512, 768, 3072);
    expect_kernel(K_MATMUL, AMPC_DTYPE_F16, 1000, 4096, 768);
    expect_kernel(K_MATMUL, AMPC_DTYPE_F16, 40, 200, 96);     /* N, K padded to the block */
}

Test(sparse_gpu, kernel_matmul_bf16_shapes) {
    expect_kernel(K_MATMUL, AMPC_DTYPE_BF16, 64, 128, 256);
    expect_kernel(K_MATMUL, AMPC_DTYPE_BF16, 200, 768, 768);
    expect_kernel(K_MATMUL, AMPC_DTYPE_BF16, 333, 3072, 768);
    expect_kernel(K_MATMUL, AMPC_DTYPE_BF16, 512, 768, 3072);
    expect_kernel(K_MATMUL, AMPC_DTYPE_BF16, 1000, 4096, 768);
}

Test(sparse_gpu, kernel_epilogues) {
    ampc_dtype ts[2] = {AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    for (int i = 0; i < 2; i++) {
        expect_kernel(K_GEMM_TB, ts[i], 130, 256, 512);
        expect_kernel(K_BIAS_RELU, ts[i], 257, 768, 768);
        expect_kernel(K_RESIDUAL, ts[i], 129, 768, 3072);
    }
}

Test(sparse_gpu, kernel_large_square_f16) {
    expect_kernel(K_MATMUL, AMPC_DTYPE_F16, 2048, 2048, 2048);
}

Test(sparse_gpu, missing_library_runs_dense) {
    if (soname_loadable())
        t_skip_only_without("cuSPARSELt", "libcusparseLt.so.0 is on the loader's path: the "
                            "missing-library path is not reachable here");
    setenv("AMPC_CUSPARSELT_PATH", "/nonexistent/libcusparseLt.so.0", 1);
    ampc_rt_sparse_choice c = run_case(K_MATMUL, AMPC_DTYPE_F16, 64, 128, 256, "cusparselt");
    cr_assert(!c.sparse);
    cr_assert(strstr(c.note, "no cuSPARSELt plan: cuSPARSELt not found"), "%s", c.note);
}
