/*
 * test_dense_gemm.c — ampc's own dense GEMM kernel (codegen/dense_gemm.c,
 * codegen/kernels/gemm.cuh) and the GELU epilogue that needs it (passes/fuse_matmul.c), on the
 * CPU, with --gemm-kernel (ampc_pipeline_options.gemm_kernel) unless said otherwise:
 *   - without it, no GEMM step gets the kernel, and an f16 GELU keeps its step (exact), or with
 *     --fast-gelu goes to cuBLASLt's tanh-form epilogue;
 *   - MatMul -> Add(bias) -> Gelu (f16, bf16) becomes one GEMM step with the BIAS_GELU epilogue
 *     and its own_kernel, no step of its own for the GELU; the pipeline's verification (the
 *     reference evaluator before and after every pass) holds;
 *   - where the kernel cannot take the product (K or N not a multiple of 8) an f16 GELU goes to
 *     the tanh-form epilogue, as the tanh GELU always does (cuBLASLt's, no kernel of ampc's);
 *     an erf GELU after an f32 product keeps its step;
 *   - fold-scale does not move a scalar through a GELU epilogue;
 *   - every f16/bf16 GEMM step the kernel takes gets it as a candidate, with the tile the
 *     product's size asks for; a Gemm with transB reads W^T where it lies;
 *   - NVRTC compiles the kernel for sm_80 and sm_90, f16 and bf16, with every epilogue.
 * The kernel's arithmetic is validated on the CPU by bench/kernels/gemm-emu.sh and on the GPU by
 * tests/runtime/test_dense_gemm.c.
 */
#include "support.h"

#include "compiler/module.h"
#include "ir/ref/ref.h"

#include <stdlib.h>
#include <string.h>

typedef enum epi_kind { E_NONE, E_BIAS, E_BIAS_RELU, E_RESIDUAL, E_BIAS_GELU, E_GELU } epi_kind;

/* y = epilogue(x [m, k] @ w [k, n]) with small deterministic constants. */
static ampc_graph *graph(ampc_dtype t, int64_t m, int64_t n, int64_t k, epi_kind ek) {
    ampc_graph *g = ampc_graph_create("dense");
    int64_t xd[2] = {m, k}, wd[2] = {k, n}, yd[2] = {m, n};
    ampc_value *x = ampc_input(g, "x", t, 2, xd);
    void *w = calloc((size_t)(k * n), ampc_dtype_size(t));
    void *b = calloc((size_t)n, ampc_dtype_size(t));
    void *z = calloc((size_t)(m * n), ampc_dtype_size(t));
    for (int64_t i = 0; i < k * n; i++) ampc_ref_store_f64(w, t, i, (double)(i % 9) * 0.125 - 0.5);
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(b, t, i, (double)(i % 3) * 0.25);
    for (int64_t i = 0; i < m * n; i++) ampc_ref_store_f64(z, t, i, 0.5);
    ampc_value *y = ampc_matmul(g, x, ampc_constant(g, "w", t, 2, wd, w));
    if (ek == E_BIAS || ek == E_BIAS_RELU || ek == E_BIAS_GELU)
        y = ampc_add(g, y, ampc_constant(g, "b", t, 1, &n, b));
    if (ek == E_RESIDUAL) y = ampc_add(g, y, ampc_constant(g, "z", t, 2, yd, z));
    if (ek == E_BIAS_RELU) y = ampc_relu(g, y);
    if (ek == E_BIAS_GELU || ek == E_GELU) y = ampc_gelu(g, y);
    free(w), free(b), free(z);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* With --gemm-kernel (gemm_kernel) or without, and with --fast-gelu (fast) or without. */
static ampc_module *compile_opts(ampc_graph *g, const int32_t *archs, int32_t n_archs, bool own,
                                 bool fast) {
    ampc_pipeline_options po = {.verify = true, .gemm_kernel = own, .fast_gelu = fast};
    ampc_compile_options o = {.archs = archs, .n_archs = n_archs, .cache_dir = "", .pipeline = &po};
    ampc_module *mod = NULL;
    ampc_status st = ampc_compile(g, &o, &mod);
    cr_assert_eq(st, AMPC_OK, "compile: %s", ampc_graph_errors(g));
    return mod;
}

static ampc_module *compile_with(ampc_graph *g, const int32_t *archs, int32_t n_archs, bool own) {
    return compile_opts(g, archs, n_archs, own, false);
}

static ampc_module *compile(ampc_graph *g, const int32_t *archs, int32_t n_archs) {
    return compile_with(g, archs, n_archs, true);
}

static int32_t count_steps(const ampc_module *mod, ampc_rt_step_kind kind) {
    const ampc_rt_plan *p = &mod->cg->plan;
    int32_t n = 0;
    for (int32_t i = 0; i < p->n_steps; i++) n += p->steps[i].kind == (uint8_t)kind;
    return n;
}

static const ampc_rt_gemm *the_gemm(const ampc_module *mod) {
    const ampc_rt_plan *p = &mod->cg->plan;
    for (int32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].kind == AMPC_RT_STEP_GEMM) return &p->steps[i].gemm;
    cr_assert_fail("the plan has no GEMM step");
    return NULL;
}

/* Whether some unit of m contains s. */
static bool cuda_has(const ampc_module *m, const char *s) {
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++)
        if (strstr(ampc_module_cuda(m, u), s)) return true;
    return false;
}

static void gelu_joins(ampc_dtype t) {
    static const int32_t none = 0;
    ampc_graph *g = graph(t, 128, 256, 64, E_BIAS_GELU);
    ampc_module *mod = compile(g, &none, 0);
    cr_assert_eq(count_steps(mod, AMPC_RT_STEP_GEMM), 1);
    cr_assert_eq(count_steps(mod, AMPC_RT_STEP_KERNEL), 0, "the GELU kept a kernel of its own");
    const ampc_rt_gemm *gm = the_gemm(mod);
    cr_assert_eq(gm->epilogue, AMPC_RT_EPI_BIAS_GELU);
    cr_assert(gm->own_kernel.name && strstr(gm->own_kernel.name, "_dense_gemm"),
              "the GELU step has no kernel of ampc's own");
    cr_assert(cuda_has(mod, ", false, 2, "), "W [K, N], GELU");
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

Test(dense_gemm, bias_gelu_becomes_the_epilogue_f16) { gelu_joins(AMPC_DTYPE_F16); }
Test(dense_gemm, bias_gelu_becomes_the_epilogue_bf16) { gelu_joins(AMPC_DTYPE_BF16); }

/* Without --gemm-kernel no GEMM step gets the kernel: the f16 GELU keeps its step (exact), or
 * with --fast-gelu goes to cuBLASLt's tanh-form epilogue. */
Test(dense_gemm, off_by_default) {
    static const int32_t none = 0;
    for (int fast = 0; fast < 2; fast++) {
        ampc_graph *g = graph(AMPC_DTYPE_F16, 128, 256, 64, E_BIAS_GELU);
        ampc_module *mod = compile_opts(g, &none, 0, false, fast);
        cr_assert_eq(count_steps(mod, AMPC_RT_STEP_KERNEL), !fast, "fast %d: the GELU's steps", fast);
        cr_assert_eq(the_gemm(mod)->epilogue, fast ? AMPC_RT_EPI_BIAS_GELU_TANH : AMPC_RT_EPI_BIAS);
        cr_assert_null(the_gemm(mod)->own_kernel.name);
        ampc_module_destroy(mod);
        ampc_graph_destroy(g);
    }
}

Test(dense_gemm, gelu_without_bias) {
    static const int32_t none = 0;
    ampc_graph *g = graph(AMPC_DTYPE_F16, 16, 64, 32, E_GELU);
    ampc_module *mod = compile(g, &none, 0);
    cr_assert_eq(count_steps(mod, AMPC_RT_STEP_KERNEL), 0);
    cr_assert_eq(the_gemm(mod)->epilogue, AMPC_RT_EPI_GELU);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

/* Where the kernel cannot take the product, the GELU becomes epilogue `want` (no kernel of
 * ampc's) or, with want NONE, stays a step of its own. */
static void gelu_where(ampc_dtype t, int64_t n, int64_t k, bool fast, ampc_rt_epilogue want,
                       const char *what) {
    static const int32_t none = 0;
    ampc_graph *g = graph(t, 16, n, k, E_BIAS_GELU);
    ampc_module *mod = compile_opts(g, &none, 0, true, fast);
    bool apart = want == AMPC_RT_EPI_NONE;
    cr_assert_eq(count_steps(mod, AMPC_RT_STEP_GEMM), 1, "%s", what);
    cr_assert_eq(count_steps(mod, AMPC_RT_STEP_KERNEL), apart, "%s: the GELU's own steps", what);
    cr_assert_eq(the_gemm(mod)->epilogue, apart ? AMPC_RT_EPI_BIAS : want, "%s", what);
    if (!apart) cr_assert_null(the_gemm(mod)->own_kernel.name, "%s", what);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

Test(dense_gemm, gelu_where_the_kernel_cannot_run) {
    gelu_where(AMPC_DTYPE_F32, 64, 32, true, AMPC_RT_EPI_NONE, "f32, --fast-gelu");
    gelu_where(AMPC_DTYPE_F16, 60, 32, true, AMPC_RT_EPI_BIAS_GELU_TANH, "N = 60, --fast-gelu");
    gelu_where(AMPC_DTYPE_F16, 64, 36, true, AMPC_RT_EPI_BIAS_GELU_TANH, "K = 36, --fast-gelu");
    gelu_where(AMPC_DTYPE_F16, 60, 32, false, AMPC_RT_EPI_NONE, "N = 60 (exact by default)");
}

/* A GELU of approximate = "tanh" is cuBLASLt's epilogue exactly: it joins, without ampc's kernel,
 * also without --fast-gelu (the model asked for that formula). */
Test(dense_gemm, tanh_gelu_joins_on_cublaslt) {
    static const int32_t none = 0;
    ampc_graph *g = ampc_graph_create("tanh");
    int64_t xd[2] = {16, 32}, wd[2] = {32, 64};
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F16, 2, xd);
    uint16_t *w = calloc(32 * 64, 2);
    ampc_value *y = ampc_matmul(g, x, ampc_constant(g, "w", AMPC_DTYPE_F16, 2, wd, w));
    free(w);
    ampc_attr_arg tanh = AMPC_ATTR_S("approximate", "tanh");
    y = ampc_op(g, "Gelu", &y, 1, &tanh, 1);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *mod = compile_opts(g, &none, 0, true, false);
    cr_assert_eq(count_steps(mod, AMPC_RT_STEP_KERNEL), 0, "the tanh GELU kept a step");
    cr_assert_eq(the_gemm(mod)->epilogue, AMPC_RT_EPI_GELU_TANH);
    cr_assert_null(the_gemm(mod)->own_kernel.name);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

/* (x @ w + b) -> GELU -> * 0.5: the scale cannot move into the weights through the GELU. */
Test(dense_gemm, no_scale_folds_through_a_gelu) {
    static const int32_t none = 0;
    ampc_graph *g = ampc_graph_create("scale");
    int64_t xd[2] = {16, 32}, wd[2] = {32, 64}, n = 64, one = 1;
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F16, 2, xd);
    void *w = calloc(32 * 64, 2), *b = calloc(64, 2), *c = calloc(1, 2);
    for (int i = 0; i < 32 * 64; i++) ampc_ref_store_f64(w, AMPC_DTYPE_F16, i, (i % 5) * 0.25 - 0.5);
    ampc_ref_store_f64(c, AMPC_DTYPE_F16, 0, 0.5);
    ampc_value *y = ampc_matmul(g, x, ampc_constant(g, "w", AMPC_DTYPE_F16, 2, wd, w));
    y = ampc_gelu(g, ampc_add(g, y, ampc_constant(g, "b", AMPC_DTYPE_F16, 1, &n, b)));
    y = ampc_mul(g, y, ampc_constant(g, "c", AMPC_DTYPE_F16, 1, &one, c));
    free(w), free(b), free(c);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    ampc_module *mod = compile(g, &none, 0); /* verify: each pass against the reference */
    cr_assert_eq(the_gemm(mod)->epilogue, AMPC_RT_EPI_BIAS_GELU);
    cr_assert_eq(count_steps(mod, AMPC_RT_STEP_KERNEL), 1, "the scale stays a step");
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

/* Every f16 GEMM step the kernel takes gets it, with the tile for its size. */
Test(dense_gemm, tiles_follow_the_product) {
    static const int32_t none = 0;
    static const struct {
        int64_t m, n, k;
        uint32_t gx, gy, gz, threads;
    } cases[] = {
        {4096, 3072, 64, 24, 32, 1, 256}, /* 128 x 128 tiles: 768 blocks */
        {512, 3072, 64, 24, 8, 1, 128},   /* 64 x 128: 192 blocks */
        {128, 3072, 64, 48, 4, 1, 128},   /* 32 x 64: the others leave the GPU idle */
        {128, 3072, 768, 24, 1, 8, 256},  /* 128 x 128, K split over clusters of 8 */
        {128, 768, 3072, 12, 2, 8, 128},  /* 64 x 64, split 8 */
        {64, 128, 784, 2, 2, 4, 128},     /* too few tiles at any split: 32 x 64, split 4 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ampc_graph *g = graph(AMPC_DTYPE_F16, cases[i].m, cases[i].n, cases[i].k, E_BIAS_RELU);
        ampc_module *mod = compile(g, &none, 0);
        const ampc_rt_kernel *k = &the_gemm(mod)->own_kernel;
        cr_assert(k->name && strstr(k->name, "_dense_gemm"), "case %zu: no kernel", i);
        cr_assert_eq(k->grid[0], cases[i].gx, "case %zu: grid x %u", i, k->grid[0]);
        cr_assert_eq(k->grid[1], cases[i].gy, "case %zu: grid y %u", i, k->grid[1]);
        cr_assert_eq(k->grid[2], cases[i].gz, "case %zu: grid z %u", i, k->grid[2]);
        cr_assert_eq(k->block[0], cases[i].threads, "case %zu", i);
        cr_assert_eq(k->n_args, 4, "x, w, bias, y");
        ampc_module_destroy(mod);
        ampc_graph_destroy(g);
    }
}

Test(dense_gemm, an_f32_step_gets_no_kernel) {
    static const int32_t none = 0;
    ampc_graph *g = graph(AMPC_DTYPE_F32, 16, 64, 32, E_BIAS);
    ampc_module *mod = compile(g, &none, 0);
    cr_assert_null(the_gemm(mod)->own_kernel.name);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

/* nn.Linear's Gemm (transB = 1) with nothing after it stays a Gemm: the kernel reads W^T. */
Test(dense_gemm, gemm_trans_b_reads_the_transposed_weight) {
    static const int32_t none = 0;
    ampc_graph *g = ampc_graph_create("tb");
    int64_t xd[2] = {32, 64}, wd[2] = {48, 64}, n = 48;
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F16, 2, xd);
    void *w = calloc(48 * 64, 2), *b = calloc(48, 2);
    ampc_value *y = ampc_gemm(g, x, ampc_constant(g, "w", AMPC_DTYPE_F16, 2, wd, w),
                              ampc_constant(g, "b", AMPC_DTYPE_F16, 1, &n, b), false, true);
    free(w), free(b);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    ampc_module *mod = compile(g, &none, 0);
    const ampc_rt_gemm *gm = the_gemm(mod);
    cr_assert(gm->trans_b && gm->own_kernel.name);
    cr_assert(cuda_has(mod, ", true, 0, "), "WT");
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

static void compiles(ampc_dtype t) {
    static const int32_t archs[2] = {80, 90};
    static const epi_kind eks[6] = {E_NONE, E_BIAS, E_BIAS_RELU, E_RESIDUAL, E_BIAS_GELU, E_GELU};
    static const int acts[6] = {0, 0, 1, 0, 2, 2};
    for (int i = 0; i < 6; i++) {
        /* 96 x 256 x 768: 12 tiles of 32 x 64, K split over clusters of 4; 8192 rows: 128 tiles
         * of 128 x 128, no split */
        const int split = i % 2 ? 1 : 4;
        char act[32];
        snprintf(act, sizeof act, ", %d, %d>(a_);", acts[i], split);
        ampc_graph *g = graph(t, i % 2 ? 8192 : 96, 256, 768, eks[i]);
        ampc_module *mod = compile(g, archs, 2);
        cr_assert_not_null(the_gemm(mod)->own_kernel.name, "epilogue %d: no kernel", i);
        cr_assert(cuda_has(mod, "ampc::gemm::dense_gemm<"), "epilogue %d", i);
        /* every generated kernel starts by waiting for its predecessor (runtime/prov_kernel.c) */
        cr_assert(cuda_has(mod, "(a_) {\n    ampc::pdl_enter();\n") ||
                      cuda_has(mod, ") {\n    ampc::pdl_enter();\n"), "no pdl_enter prologue");
        cr_assert(cuda_has(mod, act), "epilogue %d: activation and split (%s)", i, act);
        cr_assert(cuda_has(mod, "AMPC_CLUSTER_DIMS(1, 1, 4) __launch_bounds__") == (split > 1),
                  "epilogue %d: clusters only with a split", i);
        if (eks[i] == E_RESIDUAL) cr_assert(cuda_has(mod, "a_.beta = (float)1;"), "the residual");
        bool mma = false;
        for (int32_t u = 0; u < ampc_module_unit_count(mod); u++)
            mma |= strstr(ampc_module_ptx(mod, u), "mma.sync.aligned.m16n8k16") != NULL;
        cr_assert(mma, "%s epilogue %d: the PTX has no mma.sync", ampc_dtype_name(t), i);
        ampc_module_destroy(mod);
        ampc_graph_destroy(g);
    }
}

Test(dense_gemm, kernel_compiles_for_sm80_and_sm90_f16) { compiles(AMPC_DTYPE_F16); }
Test(dense_gemm, kernel_compiles_for_sm80_and_sm90_bf16) { compiles(AMPC_DTYPE_BF16); }
