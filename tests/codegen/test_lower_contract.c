/*
 * test_lower_contract.c — GPU lowering of the contractions, convolutions and pools
 * (codegen/lower_contract.c, lower_conv.c, lower_resize.c):
 *   - golden checks of the library steps: the cuBLASLt GEMM parameters (m, n, k, batch, pitches,
 *     batch strides, transposes, epilogue, alpha / beta, operand refs) for MatMul's broadcasting
 *     cases and Gemm's transposes and C forms, and the cuDNN convolution parameters; every plan
 *     also passes the runtime's static plan check (ampc_rt_plan_check) on its library steps;
 *   - which ops and shapes take a generated kernel instead, with golden substrings of its source;
 *   - the kernel before a GEMM asking L2 for the GEMM's weight (codegen/emit.c);
 *   - NVRTC compiling every lowered variant for compute_80 and sm_80 (no GPU needed);
 *   - on a machine with a GPU, the same graphs executed and compared with the reference
 *     evaluator (skipped without one).
 */
#include "support.h"

#include "codegen/codegen.h"
#include "ir/ref/ref.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- building -------------------------------------------------------------------------------- */

static ampc_value *node(ampc_graph *g, const char *op, ampc_value *const *in, int32_t n_in,
                        const ampc_attr_arg *at, int32_t n_at) {
    ampc_value *y = ampc_op(g, op, in, n_in, at, n_at);
    cr_assert(!ampc_value_is_poisoned(y), "%s failed:\n%s", op, ampc_graph_errors(g));
    return y;
}

/* A constant of dtype t holding vals (converted). */
static ampc_value *cst(ampc_graph *g, ampc_dtype t, ampc_shape s, const double *vals) {
    int64_t n = ampc_shape_numel(&s);
    void *buf = calloc((size_t)(n ? n : 1), ampc_dtype_size(t));
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(buf, t, i, vals[i]);
    ampc_value *v = t_const(g, t, s, buf);
    free(buf);
    return v;
}

/* A constant of dtype t whose element i is (i * 7 % 11 - 5) * step: varied, small, exact. */
static ampc_value *ramp(ampc_graph *g, ampc_dtype t, ampc_shape s, double step) {
    int64_t n = ampc_shape_numel(&s);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (double)(i * 7 % 11 - 5) * step;
    ampc_value *c = cst(g, t, s, v);
    free(v);
    return c;
}

static void out(ampc_graph *g, ampc_value *v) {
    cr_assert_eq(ampc_output(g, v, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
}

/* ---- generating and checking plans ----------------------------------------------------------- */

/* The runtime's static check of the plan's library steps (GEMM, conv, copy, memset): a copy of
 * the plan without its kernel launches, whose images do not exist yet. */
static void check_library_steps(const ampc_cg_output *o) {
    ampc_rt_plan p = o->plan;
    ampc_rt_step *steps = calloc((size_t)p.n_steps + 1, sizeof *steps);
    int32_t n = 0;
    for (int32_t i = 0; i < p.n_steps; i++)
        if (p.steps[i].kind != AMPC_RT_STEP_KERNEL) steps[n++] = p.steps[i];
    p.steps = steps;
    p.n_steps = n;
    p.n_units = 0;
    p.n_images = 0;
    char *err = NULL;
    ampc_status st = ampc_rt_plan_check(&p, &err);
    cr_assert_eq(st, AMPC_OK, "the runtime rejects the plan: %s", err ? err : "?");
    free(err);
    free(steps);
}

/* Runs the pipeline, the memory plan and code generation (TF32 math, as ampc_compile's default),
 * and checks the library steps against the runtime's rules. */
static ampc_cg_output *gen_with(ampc_graph *g, const ampc_cg_options *co) {
    ampc_pipeline_options po = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_cg_output *o = NULL;
    cr_assert_eq(ampc_cg_generate(g, co, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    check_library_steps(o);
    return o;
}

static ampc_cg_output *gen(ampc_graph *g) {
    return gen_with(g, &(ampc_cg_options){.math = AMPC_RT_MATH_TF32});
}

static int32_t count_steps(const ampc_cg_output *o, uint8_t kind) {
    int32_t c = 0;
    for (int32_t i = 0; i < o->plan.n_steps; i++) c += o->plan.steps[i].kind == kind;
    return c;
}

/* The idx-th step of `kind`. */
static const ampc_rt_step *step_of(const ampc_cg_output *o, uint8_t kind, int32_t idx) {
    for (int32_t i = 0; i < o->plan.n_steps; i++)
        if (o->plan.steps[i].kind == kind && idx-- == 0) return &o->plan.steps[i];
    cr_assert_fail("no step %d of kind %u among %d steps", idx, kind, o->plan.n_steps);
    return NULL;
}

/* Where a value lives, advanced by `elems` elements. */
static ampc_rt_ref vref(const ampc_value *v, int64_t elems) {
    int64_t es = (int64_t)ampc_dtype_size(v->dtype), nb = ampc_ir_numel(v) * es;
    return (ampc_rt_ref){v->mem_space == AMPC_MEM_WEIGHTS ? AMPC_RT_WEIGHTS : AMPC_RT_ARENA,
                         v->mem_offset + elems * es, nb - elems * es};
}

static void expect_ref(ampc_rt_ref got, ampc_rt_ref want, const char *what) {
    cr_expect(got.space == want.space && got.offset == want.offset && got.bytes == want.bytes,
              "%s: got space %u offset %lld bytes %lld, expected space %u offset %lld bytes %lld",
              what, got.space, (long long)got.offset, (long long)got.bytes, want.space,
              (long long)want.offset, (long long)want.bytes);
}

typedef struct gemm_want {
    int64_t m, n, k, batch, lda, ldb, ldd, sa, sb, sd;
    bool ta, tb;
    uint8_t epi;
    float alpha, beta;
} gemm_want;

static void expect_gemm(const ampc_rt_gemm *p, gemm_want w) {
    cr_expect_eq(p->m, w.m, "m: got %lld, expected %lld", (long long)p->m, (long long)w.m);
    cr_expect_eq(p->n, w.n, "n: got %lld, expected %lld", (long long)p->n, (long long)w.n);
    cr_expect_eq(p->k, w.k, "k: got %lld, expected %lld", (long long)p->k, (long long)w.k);
    cr_expect_eq(p->batch, w.batch, "batch: got %lld, expected %lld", (long long)p->batch,
                 (long long)w.batch);
    cr_expect_eq(p->lda, w.lda, "lda: got %lld, expected %lld", (long long)p->lda, (long long)w.lda);
    cr_expect_eq(p->ldb, w.ldb, "ldb: got %lld, expected %lld", (long long)p->ldb, (long long)w.ldb);
    cr_expect_eq(p->ldd, w.ldd, "ldd: got %lld, expected %lld", (long long)p->ldd, (long long)w.ldd);
    if (w.batch > 1) {
        cr_expect_eq(p->stride_a, w.sa, "stride_a: got %lld, expected %lld", (long long)p->stride_a,
                     (long long)w.sa);
        cr_expect_eq(p->stride_b, w.sb, "stride_b: got %lld, expected %lld", (long long)p->stride_b,
                     (long long)w.sb);
        cr_expect_eq(p->stride_d, w.sd, "stride_d: got %lld, expected %lld", (long long)p->stride_d,
                     (long long)w.sd);
    }
    cr_expect_eq(p->trans_a, w.ta, "trans_a");
    cr_expect_eq(p->trans_b, w.tb, "trans_b");
    cr_expect_eq(p->epilogue, w.epi, "epilogue: got %u, expected %u", p->epilogue, w.epi);
    cr_expect_eq(p->alpha, w.alpha, "alpha: got %g, expected %g", p->alpha, w.alpha);
    cr_expect_eq(p->beta, w.beta, "beta: got %g, expected %g", p->beta, w.beta);
}

/* A graph y = MatMul(a, b) over inputs of the given shapes. */
static ampc_graph *matmul_graph(ampc_dtype t, ampc_shape sa, ampc_shape sb, ampc_value **a,
                                ampc_value **b, ampc_value **y) {
    ampc_graph *g = ampc_graph_create("mm");
    *a = t_input(g, "a", t, sa);
    *b = t_input(g, "b", t, sb);
    ampc_value *in[2] = {*a, *b};
    *y = node(g, "MatMul", in, 2, NULL, 0);
    out(g, *y);
    return g;
}

/* ---- MatMul: GEMM steps ---------------------------------------------------------------------- */

Test(lower_contract, matmul_2d_is_one_gemm) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(4, 3), SHAPE(3, 5), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm;
    expect_gemm(p, (gemm_want){.m = 4, .n = 5, .k = 3, .batch = 1, .lda = 3, .ldb = 5, .ldd = 5,
                               .epi = AMPC_RT_EPI_NONE, .alpha = 1, .beta = 0});
    cr_expect_eq(p->dtype_ab, AMPC_DTYPE_F32);
    cr_expect_eq(p->dtype_cd, AMPC_DTYPE_F32);
    cr_expect_eq(p->math, AMPC_RT_MATH_TF32, "f32 takes the compile's math (TF32)");
    cr_expect_eq(p->c.bytes, 0, "no C operand");
    expect_ref(p->a, vref(a, 0), "A");
    expect_ref(p->b, vref(b, 0), "B");
    expect_ref(p->d, vref(y, 0), "D");
    cr_expect_str_eq(step_of(o, AMPC_RT_STEP_GEMM, 0)->label, "MatMul 'MatMul_0'");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_contract, matmul_full_batches_are_one_strided_gemm) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(2, 3, 4, 5), SHAPE(2, 3, 5, 6), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    expect_gemm(&step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm,
                (gemm_want){.m = 4, .n = 6, .k = 5, .batch = 6, .lda = 5, .ldb = 6, .ldd = 6,
                            .sa = 20, .sb = 30, .sd = 24, .alpha = 1});
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* B shared by every batch: the batch folds into M, one plain GEMM of 2*3*4 rows. */
Test(lower_contract, matmul_shared_b_folds_the_batch_into_m) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(2, 3, 4, 5), SHAPE(5, 6), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    expect_gemm(&step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm,
                (gemm_want){.m = 24, .n = 6, .k = 5, .batch = 1, .lda = 5, .ldb = 6, .ldd = 6,
                            .alpha = 1});
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* A shared ([1,1,4,5] has batch dims of 1): batch stride 0 for A. */
Test(lower_contract, matmul_shared_a_has_batch_stride_zero) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(1, 1, 4, 5), SHAPE(2, 3, 5, 6), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    expect_gemm(&step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm,
                (gemm_want){.m = 4, .n = 6, .k = 5, .batch = 6, .lda = 5, .ldb = 6, .ldd = 6,
                            .sa = 0, .sb = 30, .sd = 24, .alpha = 1});
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* [2,1,4,5] x [1,3,5,6] -> [2,3,4,6]: the last batch dim is one strided batch (A shared, B
 * present), the first is enumerated: two GEMM steps, the second offset by one A matrix (20
 * elements) and three D matrices (72 elements). */
Test(lower_contract, matmul_partial_broadcast_is_one_gemm_per_outer_index) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(2, 1, 4, 5), SHAPE(1, 3, 5, 6), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 2);
    for (int s = 0; s < 2; s++) {
        const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, s)->gemm;
        expect_gemm(p, (gemm_want){.m = 4, .n = 6, .k = 5, .batch = 3, .lda = 5, .ldb = 6, .ldd = 6,
                                   .sa = 0, .sb = 30, .sd = 24, .alpha = 1});
        expect_ref(p->a, vref(a, s * 20), "A");
        expect_ref(p->b, vref(b, 0), "B");
        expect_ref(p->d, vref(y, s * 72), "D");
    }
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* [2,1,3,4,5] x [1,2,1,5,6]: dims 1 and 2 cannot share one stride for A (present, broadcast), so
 * dim 2 is the batch (A present, B broadcast: folded into M) and dims 0-1 are enumerated. */
Test(lower_contract, matmul_mixed_broadcast_enumerates_the_outer_dims) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(2, 1, 3, 4, 5), SHAPE(1, 2, 1, 5, 6), &a,
                                 &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 4);
    /* outer index (i, j): A matrix block i * 3, B matrix j, D block (i * 2 + j) * 3 */
    for (int s = 0; s < 4; s++) {
        int i = s / 2, j = s % 2;
        const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, s)->gemm;
        expect_gemm(p, (gemm_want){.m = 12, .n = 6, .k = 5, .batch = 1, .lda = 5, .ldb = 6,
                                   .ldd = 6, .alpha = 1});
        expect_ref(p->a, vref(a, i * 3 * 20), "A");
        expect_ref(p->b, vref(b, j * 30), "B");
        expect_ref(p->d, vref(y, (i * 2 + j) * 3 * 24), "D");
    }
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* Too many outer indices (512 for [8,1,8,1] x [1,8,1,8]): one generated kernel instead. */
Test(lower_contract, matmul_scattered_broadcast_falls_back_to_a_kernel) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(8, 1, 8, 1, 2, 3), SHAPE(1, 8, 1, 8, 3, 2),
                                 &a, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_GEMM), 0);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_KERNEL), 1);
    const char *cu = o->sources[0];
    cr_assert(strstr(cu, "// k0_matmul: MatMul 'MatMul_0'"), "%s", cu);
    cr_assert(strstr(cu, "acc_ += ampc::cvt<float>(p0[abase_ + row_ * 3LL + p_]) * "
                         "ampc::cvt<float>(p1[bbase_ + p_ * 2LL + col_]);"), "%s", cu);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* 1-D operands: [3] is one row of A (m = 1), [4] one column of B (n = 1, ldb = ldd = 1). */
Test(lower_contract, matmul_vectors_are_promoted) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(3), SHAPE(2, 3, 4), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    expect_gemm(&step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm,
                (gemm_want){.m = 1, .n = 4, .k = 3, .batch = 2, .lda = 3, .ldb = 4, .ldd = 4,
                            .sa = 0, .sb = 12, .sd = 4, .alpha = 1});
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = matmul_graph(AMPC_DTYPE_F32, SHAPE(2, 3, 4), SHAPE(4), &a, &b, &y);
    o = gen(g);
    expect_gemm(&step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm,
                (gemm_want){.m = 6, .n = 1, .k = 4, .batch = 1, .lda = 4, .ldb = 1, .ldd = 1,
                            .alpha = 1});
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = matmul_graph(AMPC_DTYPE_F64, SHAPE(5), SHAPE(5), &a, &b, &y);
    o = gen(g);
    const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm;
    expect_gemm(p, (gemm_want){.m = 1, .n = 1, .k = 5, .batch = 1, .lda = 5, .ldb = 1, .ldd = 1,
                               .alpha = 1});
    cr_expect_eq(p->dtype_ab, AMPC_DTYPE_F64);
    cr_expect_eq(p->math, AMPC_RT_MATH_DEFAULT, "TF32 is for f32 only");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_contract, matmul_f16_keeps_its_dtype_and_default_math) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F16, SHAPE(4, 8), SHAPE(8, 3), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm;
    cr_expect_eq(p->dtype_ab, AMPC_DTYPE_F16);
    cr_expect_eq(p->dtype_cd, AMPC_DTYPE_F16);
    cr_expect_eq(p->math, AMPC_RT_MATH_DEFAULT);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* An empty contraction (k = 0) gives zeros: a memset, no GEMM (cuBLASLt rejects k = 0). */
Test(lower_contract, matmul_empty_contraction_is_a_memset) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(2, 0), SHAPE(0, 3), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    expect_ref(step_of(o, AMPC_RT_STEP_MEMSET, 0)->memset.dst, vref(y, 0), "memset");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* An empty output: no step at all (the second, non-empty product keeps the plan non-empty). */
Test(lower_contract, matmul_empty_output_emits_nothing) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_F32, SHAPE(0, 4), SHAPE(4, 3), &a, &b, &y);
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_F32, SHAPE(2, 4)), *in[2] = {c, b};
    ampc_value *z = node(g, "MatMul", in, 2, NULL, 0);
    out(g, z);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    expect_ref(step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm.d, vref(z, 0), "D of the second product");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_contract, matmul_integers_take_a_generated_kernel) {
    ampc_value *a, *b, *y;
    ampc_graph *g = matmul_graph(AMPC_DTYPE_I32, SHAPE(2, 3, 4), SHAPE(4, 5), &a, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_GEMM), 0);
    const char *cu = o->sources[0];
    cr_assert(strstr(cu, "// k0_matmul_int: MatMul 'MatMul_0'"), "%s", cu);
    cr_assert(strstr(cu, "acc_ += (unsigned long long)a_ * (unsigned long long)b_;"), "%s", cu);
    cr_assert(strstr(cu, "p2[i] = (int)acc_;"), "%s", cu);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ---- Gemm ------------------------------------------------------------------------------------ */

/* Gemm(a, b, c) with a, b inputs and c a constant of shape sc (NULL: none). */
static ampc_graph *gemm_graph(ampc_dtype t, ampc_shape sa, ampc_shape sb, const ampc_shape *sc,
                              int64_t ta, int64_t tb, float alpha, float beta, ampc_value **a,
                              ampc_value **b, ampc_value **c, ampc_value **y) {
    ampc_graph *g = ampc_graph_create("gemm");
    *a = t_input(g, "a", t, sa);
    *b = t_input(g, "b", t, sb);
    *c = sc ? ramp(g, t, *sc, 0.5) : NULL;
    ampc_value *in[3] = {*a, *b, *c};
    ampc_attr_arg at[4] = {AMPC_ATTR_I("transA", ta), AMPC_ATTR_I("transB", tb),
                           AMPC_ATTR_F("alpha", alpha), AMPC_ATTR_F("beta", beta)};
    *y = node(g, "Gemm", in, sc ? 3 : 2, at, 4);
    out(g, *y);
    return g;
}

/* A [5,4] with transA (M = 4, K = 5, stored K x M: lda 4), B [3,5] with transB (N = 3, stored
 * N x K: ldb 5); C [3] with beta 1 is the bias epilogue. */
Test(lower_contract, gemm_transposes_and_bias_epilogue) {
    ampc_value *a, *b, *c, *y;
    ampc_shape sc = SHAPE(3);
    ampc_graph *g = gemm_graph(AMPC_DTYPE_F32, SHAPE(5, 4), SHAPE(3, 5), &sc, 1, 1, 1.0f, 1.0f, &a,
                               &b, &c, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm;
    expect_gemm(p, (gemm_want){.m = 4, .n = 3, .k = 5, .batch = 1, .lda = 4, .ldb = 5, .ldd = 3,
                               .ta = true, .tb = true, .epi = AMPC_RT_EPI_BIAS, .alpha = 1,
                               .beta = 0});
    expect_ref(p->bias, vref(c, 0), "bias");
    cr_expect_eq(p->dtype_bias, AMPC_DTYPE_F32);
    cr_expect_eq(p->c.bytes, 0, "the bias is not a C operand");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_contract, gemm_one_transpose_each) {
    ampc_value *a, *b, *c, *y;
    ampc_graph *g = gemm_graph(AMPC_DTYPE_F32, SHAPE(4, 5), SHAPE(3, 5), NULL, 0, 1, 1.0f, 1.0f,
                               &a, &b, &c, &y);
    ampc_cg_output *o = gen(g);
    expect_gemm(&step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm,
                (gemm_want){.m = 4, .n = 3, .k = 5, .batch = 1, .lda = 5, .ldb = 5, .ldd = 3,
                            .tb = true, .alpha = 1});
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
    g = gemm_graph(AMPC_DTYPE_F32, SHAPE(5, 4), SHAPE(5, 3), NULL, 1, 0, 2.0f, 1.0f, &a, &b, &c, &y);
    o = gen(g);
    expect_gemm(&step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm,
                (gemm_want){.m = 4, .n = 3, .k = 5, .batch = 1, .lda = 4, .ldb = 3, .ldd = 3,
                            .ta = true, .alpha = 2});
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* A full [M,N] C is the C operand, scaled by beta. */
Test(lower_contract, gemm_full_c_is_the_c_operand) {
    ampc_value *a, *b, *c, *y;
    ampc_shape sc = SHAPE(4, 3);
    ampc_graph *g = gemm_graph(AMPC_DTYPE_F32, SHAPE(4, 5), SHAPE(5, 3), &sc, 0, 0, 0.5f, 0.25f,
                               &a, &b, &c, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm;
    expect_gemm(p, (gemm_want){.m = 4, .n = 3, .k = 5, .batch = 1, .lda = 5, .ldb = 3, .ldd = 3,
                               .alpha = 0.5f, .beta = 0.25f});
    expect_ref(p->c, vref(c, 0), "C");
    cr_expect_eq(p->ldc, 3);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* C of [M,1], a scalar, or a row with beta != 1: broadcast into D by a kernel first, then the
 * GEMM accumulates onto D (C = D). */
Test(lower_contract, gemm_other_c_is_broadcast_into_d_first) {
    ampc_shape shapes[3] = {SHAPE(4, 1), SHAPE(), SHAPE(3)};
    float betas[3] = {1.0f, 1.0f, 2.0f};
    for (int t = 0; t < 3; t++) {
        ampc_value *a, *b, *c, *y;
        ampc_graph *g = gemm_graph(AMPC_DTYPE_F32, SHAPE(4, 5), SHAPE(5, 3), &shapes[t], 0, 0,
                                   1.0f, betas[t], &a, &b, &c, &y);
        ampc_cg_output *o = gen(g);
        cr_assert_eq(o->plan.n_steps, 2);
        cr_assert_eq(o->plan.steps[0].kind, AMPC_RT_STEP_KERNEL, "the broadcast comes first");
        cr_assert(strstr(o->sources[0], "k0_gemm_c: Gemm 'Gemm_0'"), "%s", o->sources[0]);
        const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm;
        expect_gemm(p, (gemm_want){.m = 4, .n = 3, .k = 5, .batch = 1, .lda = 5, .ldb = 3,
                                   .ldd = 3, .alpha = 1, .beta = betas[t]});
        expect_ref(p->c, vref(y, 0), "C is D");
        expect_ref(p->d, vref(y, 0), "D");
        cr_expect_eq(p->ldc, 3);
        ampc_cg_output_free(o);
        ampc_graph_destroy(g);
    }
}

/* f64 does not rely on cuBLASLt's bias epilogue: the row C is broadcast into D. */
Test(lower_contract, gemm_f64_row_c_is_broadcast) {
    ampc_value *a, *b, *c, *y;
    ampc_shape sc = SHAPE(1, 3);
    ampc_graph *g = gemm_graph(AMPC_DTYPE_F64, SHAPE(4, 5), SHAPE(5, 3), &sc, 0, 0, 1.0f, 1.0f,
                               &a, &b, &c, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_KERNEL), 1);
    const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm;
    cr_expect_eq(p->epilogue, AMPC_RT_EPI_NONE);
    cr_expect_eq(p->beta, 1.0f);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* beta = 0 ignores C altogether. */
Test(lower_contract, gemm_zero_beta_drops_c) {
    ampc_value *a, *b, *c, *y;
    ampc_shape sc = SHAPE(4, 3);
    ampc_graph *g = gemm_graph(AMPC_DTYPE_F32, SHAPE(4, 5), SHAPE(5, 3), &sc, 0, 0, 1.0f, 0.0f,
                               &a, &b, &c, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    cr_expect_eq(step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm.c.bytes, 0);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_contract, gemm_integers_take_a_generated_kernel) {
    ampc_value *a, *b, *c, *y;
    ampc_shape sc = SHAPE(3);
    ampc_graph *g = gemm_graph(AMPC_DTYPE_I32, SHAPE(5, 4), SHAPE(5, 3), &sc, 1, 0, 2.0f, 0.5f,
                               &a, &b, &c, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_GEMM), 0);
    const char *cu = o->sources[0];
    cr_assert(strstr(cu, "k0_gemm_int: Gemm 'Gemm_0'"), "%s", cu);
    /* transA: A(row, p) is stored at p * M + row */
    cr_assert(strstr(cu, "(long long)p0[abase_ + p_ * 4LL + row_]"), "%s", cu);
    cr_assert(strstr(cu, "double v_ = ampc::mul_rn(((double)2), (double)(long long)acc_);"), "%s", cu);
    cr_assert(strstr(cu, "p3[i] = ampc::cv::store_f64<int>(v_);"), "%s", cu);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ---- Conv: cuDNN steps and direct kernels ---------------------------------------------------- */

static ampc_graph *conv_graph(const char *op, ampc_dtype t, ampc_shape sx, ampc_shape sw,
                              bool bias, const ampc_attr_arg *at, int32_t n_at, ampc_value **x,
                              ampc_value **w, ampc_value **b, ampc_value **y) {
    ampc_graph *g = ampc_graph_create("conv");
    *x = t_input(g, "x", t, sx);
    *w = ramp(g, t, sw, 0.25);
    int64_t m = !strcmp(op, "ConvTranspose") ? sw.dims[1] : sw.dims[0];
    for (int32_t i = 0; i < n_at; i++)
        if (!strcmp(at[i].name, "group") && !strcmp(op, "ConvTranspose")) m *= at[i].i;
    *b = bias ? ramp(g, t, SHAPE(m), 0.125) : NULL;
    ampc_value *in[3] = {*x, *w, *b};
    *y = node(g, op, in, bias ? 3 : 2, at, n_at);
    out(g, *y);
    return g;
}

/* Groups, strides, dilations, symmetric pads and a bias: one cuDNN step with exactly those. */
Test(lower_contract, conv2d_is_a_cudnn_step) {
    ampc_value *x, *w, *b, *y;
    int64_t st[2] = {2, 1}, dil[2] = {1, 2}, pads[4] = {1, 2, 1, 2};
    ampc_attr_arg at[4] = {AMPC_ATTR_IS("strides", st, 2), AMPC_ATTR_IS("dilations", dil, 2),
                           AMPC_ATTR_IS("pads", pads, 4), AMPC_ATTR_I("group", 2)};
    ampc_graph *g = conv_graph("Conv", AMPC_DTYPE_F32, SHAPE(2, 4, 9, 8), SHAPE(6, 2, 3, 3), true,
                               at, 4, &x, &w, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const ampc_rt_conv *p = &step_of(o, AMPC_RT_STEP_CONV, 0)->conv;
    cr_expect_eq(p->spatial, 2);
    cr_expect(p->n == 2 && p->c_in == 4 && p->c_out == 6 && p->groups == 2);
    /* out: (9 + 2 - 3) / 2 + 1 = 5; (8 + 4 - 5) / 1 + 1 = 8 */
    cr_expect(p->in[0] == 9 && p->in[1] == 8 && p->out[0] == 5 && p->out[1] == 8,
              "in %lld %lld out %lld %lld", (long long)p->in[0], (long long)p->in[1],
              (long long)p->out[0], (long long)p->out[1]);
    cr_expect(p->kernel[0] == 3 && p->kernel[1] == 3 && p->stride[0] == 2 && p->stride[1] == 1 &&
              p->dilation[0] == 1 && p->dilation[1] == 2);
    cr_expect(p->pad_begin[0] == 1 && p->pad_end[0] == 1 && p->pad_begin[1] == 2 &&
              p->pad_end[1] == 2);
    cr_expect(p->has_bias && !p->relu && !p->has_residual && !p->transpose);
    cr_expect_eq(p->dtype, AMPC_DTYPE_F32);
    cr_expect_eq(p->math, AMPC_RT_MATH_TF32);
    expect_ref(p->x, vref(x, 0), "x");
    expect_ref(p->w, vref(w, 0), "w");
    expect_ref(p->bias, vref(b, 0), "bias");
    expect_ref(p->y, vref(y, 0), "y");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_contract, conv1d_and_conv3d_are_cudnn_steps) {
    ampc_value *x, *w, *b, *y;
    int64_t p1[2] = {1, 1};
    ampc_attr_arg a1[1] = {AMPC_ATTR_IS("pads", p1, 2)};
    ampc_graph *g = conv_graph("Conv", AMPC_DTYPE_F16, SHAPE(1, 3, 10), SHAPE(4, 3, 3), false, a1,
                               1, &x, &w, &b, &y);
    ampc_cg_output *o = gen(g);
    const ampc_rt_conv *p = &step_of(o, AMPC_RT_STEP_CONV, 0)->conv;
    cr_expect(p->spatial == 1 && p->in[0] == 10 && p->out[0] == 10 && p->pad_begin[0] == 1);
    cr_expect_eq(p->dtype, AMPC_DTYPE_F16);
    cr_expect_eq(p->math, AMPC_RT_MATH_DEFAULT);
    cr_expect(!p->has_bias);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    int64_t s3[3] = {1, 2, 2};
    ampc_attr_arg a3[1] = {AMPC_ATTR_IS("strides", s3, 3)};
    g = conv_graph("Conv", AMPC_DTYPE_F32, SHAPE(1, 2, 4, 6, 6), SHAPE(3, 2, 2, 3, 3), true, a3, 1,
                   &x, &w, &b, &y);
    o = gen(g);
    p = &step_of(o, AMPC_RT_STEP_CONV, 0)->conv;
    cr_expect(p->spatial == 3 && p->out[0] == 3 && p->out[1] == 2 && p->out[2] == 2);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* auto_pad SAME_UPPER resolved as inference does: odd kernel, stride 1 -> pads 1/1 (cuDNN);
 * kernel 2 -> total pad 1, at the end (asymmetric: a generated kernel). */
Test(lower_contract, conv_same_padding_is_resolved) {
    ampc_value *x, *w, *b, *y;
    ampc_attr_arg at[1] = {AMPC_ATTR_S("auto_pad", "SAME_UPPER")};
    ampc_graph *g = conv_graph("Conv", AMPC_DTYPE_F32, SHAPE(1, 1, 5, 5), SHAPE(1, 1, 3, 3), false,
                               at, 1, &x, &w, &b, &y);
    ampc_cg_output *o = gen(g);
    const ampc_rt_conv *p = &step_of(o, AMPC_RT_STEP_CONV, 0)->conv;
    cr_expect(p->pad_begin[0] == 1 && p->pad_end[0] == 1 && p->out[0] == 5);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = conv_graph("Conv", AMPC_DTYPE_F32, SHAPE(1, 1, 5, 5), SHAPE(1, 1, 2, 2), false, at, 1, &x,
                   &w, &b, &y);
    o = gen(g);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_CONV), 0);
    /* begin pad 0, no check needed below; end pad 1: p = o + k past the end is skipped */
    cr_assert(strstr(o->sources[0], "const long long p0_ = o0_ * 1LL + k0_ * 1LL - 0LL;"), "%s",
              o->sources[0]);
    cr_assert(strstr(o->sources[0], "if (p0_ < 0 || p0_ >= 5LL) continue;"), "%s", o->sources[0]);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* Asymmetric pads: no cuDNN step, a direct kernel with the window baked in. */
Test(lower_contract, conv_asymmetric_pads_take_a_direct_kernel) {
    ampc_value *x, *w, *b, *y;
    int64_t pads[4] = {0, 1, 2, 0};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("pads", pads, 4), AMPC_ATTR_I("group", 2)};
    ampc_graph *g = conv_graph("Conv", AMPC_DTYPE_F32, SHAPE(1, 4, 5, 5), SHAPE(2, 2, 3, 3), true,
                               at, 2, &x, &w, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_CONV), 0);
    const char *cu = o->sources[0];
    cr_assert(strstr(cu, "// k0_conv_direct: Conv 'Conv_0'"), "%s", cu);
    cr_assert(strstr(cu, "float acc_ = ampc::cvt<float>(p2[m_]);"), "the bias starts the sum: %s", cu);
    cr_assert(strstr(cu, "const long long p1_ = o1_ * 1LL + k1_ * 1LL - 1LL;"), "%s", cu);
    cr_assert(strstr(cu, "for (long long c_ = 0; c_ < 2LL; c_++)"), "two channels a group: %s", cu);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_contract, conv_f64_takes_a_direct_kernel) {
    ampc_value *x, *w, *b, *y;
    ampc_graph *g = conv_graph("Conv", AMPC_DTYPE_F64, SHAPE(1, 2, 5, 5), SHAPE(3, 2, 3, 3), true,
                               NULL, 0, &x, &w, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_CONV), 0);
    cr_assert(strstr(o->sources[0], "double s_ = 0;"), "%s", o->sources[0]);
    /* no pads: the window never leaves the input, no bounds checks */
    cr_assert_null(strstr(o->sources[0], "continue;"), "%s", o->sources[0]);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ConvTranspose with symmetric pads and output_padding < stride: a cuDNN transpose step. */
Test(lower_contract, conv_transpose_is_a_cudnn_step) {
    ampc_value *x, *w, *b, *y;
    int64_t st[2] = {2, 2}, pads[4] = {1, 1, 1, 1}, op[2] = {1, 0};
    ampc_attr_arg at[3] = {AMPC_ATTR_IS("strides", st, 2), AMPC_ATTR_IS("pads", pads, 4),
                           AMPC_ATTR_IS("output_padding", op, 2)};
    ampc_graph *g = conv_graph("ConvTranspose", AMPC_DTYPE_F32, SHAPE(1, 2, 4, 4),
                               SHAPE(2, 3, 3, 3), true, at, 3, &x, &w, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const ampc_rt_conv *p = &step_of(o, AMPC_RT_STEP_CONV, 0)->conv;
    cr_expect(p->transpose);
    cr_expect(p->c_in == 2 && p->c_out == 3);
    /* out = 2 * (4 - 1) + op + 3 - 2 = 7 + op */
    cr_expect(p->out[0] == 8 && p->out[1] == 7, "out %lld %lld", (long long)p->out[0],
              (long long)p->out[1]);
    cr_expect(p->output_padding[0] == 1 && p->output_padding[1] == 0);
    cr_expect(p->pad_begin[0] == 1 && p->pad_end[0] == 1);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* output_shape making the pads asymmetric (total 1: begin 1, end 0 for NOTSET): gathered kernel. */
Test(lower_contract, conv_transpose_output_shape_takes_a_direct_kernel) {
    ampc_value *x, *w, *b, *y;
    int64_t st[2] = {2, 2}, os[2] = {8, 8};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("strides", st, 2), AMPC_ATTR_IS("output_shape", os, 2)};
    ampc_graph *g = conv_graph("ConvTranspose", AMPC_DTYPE_F32, SHAPE(1, 2, 4, 4),
                               SHAPE(2, 3, 3, 3), false, at, 2, &x, &w, &b, &y);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(count_steps(o, AMPC_RT_STEP_CONV), 0);
    const char *cu = o->sources[0];
    cr_assert(strstr(cu, "k0_conv_transpose_direct: ConvTranspose"), "%s", cu);
    /* full = 2 * 3 + 3 = 9, total pad 1: begin 1 */
    cr_assert(strstr(cu, "const long long t0_ = o0_ + 1LL - k0_ * 1LL;"), "%s", cu);
    cr_assert(strstr(cu, "if (t0_ < 0 || t0_ % 2LL != 0) continue;"), "%s", cu);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ---- the generated kernels compile ----------------------------------------------------------- */

/* Compiles g with NVRTC for compute_80 and sm_80 (no cache) and returns the module. */
static ampc_module *compile(ampc_graph *g, bool tf32) {
    static const int32_t sm80 = 80;
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .no_tf32 = !tf32};
    ampc_module *m = NULL;
    ampc_status st = ampc_compile(g, &o, &m);
    cr_assert_eq(st, AMPC_OK, "%s: %s", ampc_status_str(st), ampc_graph_errors(g));
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++)
        cr_assert(ampc_module_ptx(m, u) && strstr(ampc_module_ptx(m, u), ".target sm_80"));
    return m;
}

/* Whether some unit of m contains s. */
static bool cuda_has(const ampc_module *m, const char *s) {
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++)
        if (strstr(ampc_module_cuda(m, u), s)) return true;
    return false;
}

/* Contractions that take generated kernels, and float ones on cuBLASLt, in one graph. */
static ampc_graph *build_contract(void) {
    ampc_graph *g = ampc_graph_create("contract");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2, 1, 4, 5));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(1, 3, 5, 6));
    ampc_value *in2[2] = {a, b};
    out(g, node(g, "MatMul", in2, 2, NULL, 0)); /* two GEMM steps */
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_F32, SHAPE(8, 1, 8, 1, 2, 3));
    ampc_value *d = t_input(g, "d", AMPC_DTYPE_F32, SHAPE(1, 8, 1, 8, 3, 2));
    ampc_value *in_cd[2] = {c, d};
    out(g, node(g, "MatMul", in_cd, 2, NULL, 0)); /* fallback kernel */
    ampc_value *v = t_input(g, "v", AMPC_DTYPE_F32, SHAPE(5));
    ampc_value *in_va[2] = {v, ramp(g, AMPC_DTYPE_F32, SHAPE(3, 5, 2), 0.5)};
    out(g, node(g, "MatMul", in_va, 2, NULL, 0));
    ampc_value *ia = t_input(g, "ia", AMPC_DTYPE_I32, SHAPE(2, 3, 4));
    ampc_value *in_i[2] = {ia, ramp(g, AMPC_DTYPE_I32, SHAPE(4, 5), 1)};
    out(g, node(g, "MatMul", in_i, 2, NULL, 0));
    ampc_value *h = t_input(g, "h", AMPC_DTYPE_F16, SHAPE(4, 8));
    ampc_value *in_h[2] = {h, ramp(g, AMPC_DTYPE_F16, SHAPE(8, 3), 0.25)};
    out(g, node(g, "MatMul", in_h, 2, NULL, 0));
    /* Gemm: bias epilogue with transposes; C [4,1] broadcast; full C; f64; integers; k = 0 */
    ampc_value *ga = t_input(g, "ga", AMPC_DTYPE_F32, SHAPE(5, 4));
    ampc_value *in_g1[3] = {ga, ramp(g, AMPC_DTYPE_F32, SHAPE(3, 5), 0.5),
                            ramp(g, AMPC_DTYPE_F32, SHAPE(3), 0.25)};
    ampc_attr_arg tt[2] = {AMPC_ATTR_I("transA", 1), AMPC_ATTR_I("transB", 1)};
    out(g, node(g, "Gemm", in_g1, 3, tt, 2));
    ampc_value *gb = t_input(g, "gb", AMPC_DTYPE_F32, SHAPE(4, 5));
    ampc_value *in_g2[3] = {gb, ramp(g, AMPC_DTYPE_F32, SHAPE(5, 3), 0.5),
                            ramp(g, AMPC_DTYPE_F32, SHAPE(4, 1), 0.25)};
    ampc_attr_arg ab[2] = {AMPC_ATTR_F("alpha", 0.5f), AMPC_ATTR_F("beta", 2.0f)};
    out(g, node(g, "Gemm", in_g2, 3, ab, 2));
    ampc_value *in_g3[3] = {gb, ramp(g, AMPC_DTYPE_F32, SHAPE(5, 3), 0.25),
                            ramp(g, AMPC_DTYPE_F32, SHAPE(4, 3), 0.5)};
    ampc_attr_arg b3[1] = {AMPC_ATTR_F("beta", 0.25f)};
    out(g, node(g, "Gemm", in_g3, 3, b3, 1));
    ampc_value *gd = t_input(g, "gd", AMPC_DTYPE_F64, SHAPE(4, 5));
    ampc_value *in_g4[3] = {gd, ramp(g, AMPC_DTYPE_F64, SHAPE(5, 3), 0.5),
                            ramp(g, AMPC_DTYPE_F64, SHAPE(3), 0.25)};
    out(g, node(g, "Gemm", in_g4, 3, NULL, 0));
    ampc_value *gi = t_input(g, "gi", AMPC_DTYPE_I64, SHAPE(4, 5));
    ampc_value *in_g5[3] = {gi, ramp(g, AMPC_DTYPE_I64, SHAPE(3, 5), 1),
                            ramp(g, AMPC_DTYPE_I64, SHAPE(3), 1)};
    ampc_attr_arg tb[1] = {AMPC_ATTR_I("transB", 1)};
    out(g, node(g, "Gemm", in_g5, 3, tb, 1));
    ampc_value *g32 = t_input(g, "g32", AMPC_DTYPE_I32, SHAPE(3, 4));
    ampc_value *in_g7[3] = {g32, ramp(g, AMPC_DTYPE_I32, SHAPE(4, 5), 1),
                            ramp(g, AMPC_DTYPE_I32, SHAPE(1, 5), 1)};
    ampc_attr_arg ab2[2] = {AMPC_ATTR_F("alpha", 1.5f), AMPC_ATTR_F("beta", -0.5f)};
    out(g, node(g, "Gemm", in_g7, 3, ab2, 2));
    ampc_value *gz = t_input(g, "gz", AMPC_DTYPE_F32, SHAPE(4, 0));
    ampc_value *in_g8[3] = {gz, ramp(g, AMPC_DTYPE_F32, SHAPE(0, 3), 1),
                            ramp(g, AMPC_DTYPE_F32, SHAPE(4, 3), 0.5)};
    out(g, node(g, "Gemm", in_g8, 3, b3, 1));
    /* MatMulInteger: per-row zero point of A, scalar of B; N-d zero points */
    ampc_value *qa = t_input(g, "qa", AMPC_DTYPE_U8, SHAPE(2, 3, 4));
    double zr[3] = {1, 130, 255}, z1[1] = {7};
    ampc_value *in_mi[4] = {qa, ramp(g, AMPC_DTYPE_I8, SHAPE(4, 5), 9),
                            cst(g, AMPC_DTYPE_U8, SHAPE(3), zr), cst(g, AMPC_DTYPE_I8, SHAPE(), z1)};
    out(g, node(g, "MatMulInteger", in_mi, 4, NULL, 0));
    double zn[6] = {1, 2, 3, 4, 5, 6}, zc[5] = {-1, 0, 1, 2, 3};
    ampc_value *in_mi2[4] = {qa, ramp(g, AMPC_DTYPE_U8, SHAPE(4, 5), 9),
                             cst(g, AMPC_DTYPE_U8, SHAPE(2, 3, 1), zn),
                             cst(g, AMPC_DTYPE_U8, SHAPE(1, 5), zc)};
    out(g, node(g, "MatMulInteger", in_mi2, 4, NULL, 0));
    /* QLinearMatMul: per-tensor A, per-column B scales */
    ampc_value *qm = t_input(g, "qm", AMPC_DTYPE_U8, SHAPE(3, 4));
    double sa[1] = {0.05}, za[1] = {120}, sb[2] = {0.02, 0.03}, zb[2] = {128, 100}, sy[1] = {0.1},
           zy[1] = {10};
    ampc_value *in_q[8] = {qm,
                           cst(g, AMPC_DTYPE_F32, SHAPE(), sa),
                           cst(g, AMPC_DTYPE_U8, SHAPE(), za),
                           ramp(g, AMPC_DTYPE_U8, SHAPE(4, 2), 17),
                           cst(g, AMPC_DTYPE_F32, SHAPE(2), sb),
                           cst(g, AMPC_DTYPE_U8, SHAPE(2), zb),
                           cst(g, AMPC_DTYPE_F32, SHAPE(), sy),
                           cst(g, AMPC_DTYPE_U8, SHAPE(), zy)};
    out(g, node(g, "QLinearMatMul", in_q, 8, NULL, 0));
    /* Einsum: a batched product, a diagonal, a full sum, "..." broadcasting, integers */
    ampc_value *e1 = t_input(g, "e1", AMPC_DTYPE_F32, SHAPE(2, 3, 4));
    ampc_value *in_e1[2] = {e1, ramp(g, AMPC_DTYPE_F32, SHAPE(2, 4, 5), 0.5)};
    ampc_attr_arg q1[1] = {AMPC_ATTR_S("equation", "bij,bjk->bik")};
    out(g, node(g, "Einsum", in_e1, 2, q1, 1));
    ampc_value *e2 = t_input(g, "e2", AMPC_DTYPE_F32, SHAPE(4, 4));
    ampc_attr_arg q2[1] = {AMPC_ATTR_S("equation", "ii->i")};
    out(g, node(g, "Einsum", &e2, 1, q2, 1));
    ampc_attr_arg q3[1] = {AMPC_ATTR_S("equation", "ij->")};
    out(g, node(g, "Einsum", &e2, 1, q3, 1));
    ampc_value *e4 = t_input(g, "e4", AMPC_DTYPE_F32, SHAPE(3, 1, 2, 4));
    ampc_value *in_e4[2] = {e4, ramp(g, AMPC_DTYPE_F32, SHAPE(2, 4, 3), 0.5)};
    ampc_attr_arg q4[1] = {AMPC_ATTR_S("equation", "...ij,...jk")};
    out(g, node(g, "Einsum", in_e4, 2, q4, 1));
    ampc_value *e5 = t_input(g, "e5", AMPC_DTYPE_I64, SHAPE(6));
    ampc_value *in_e5[2] = {e5, ramp(g, AMPC_DTYPE_I64, SHAPE(6), 3)};
    ampc_attr_arg q5[1] = {AMPC_ATTR_S("equation", "i,i->")};
    out(g, node(g, "Einsum", in_e5, 2, q5, 1));
    return g;
}

Test(lower_contract, contraction_kernels_compile) {
    ampc_graph *g = build_contract();
    ampc_module *m = compile(g, true);
    cr_assert(cuda_has(m, "_matmul: MatMul"), "the broadcast fallback");
    cr_assert(cuda_has(m, "_matmul_int: MatMul"));
    cr_assert(cuda_has(m, "_gemm_c: Gemm"));
    cr_assert(cuda_has(m, "_gemm_int: Gemm"));
    cr_assert(cuda_has(m, "_matmul_integer: MatMulInteger"));
    cr_assert(cuda_has(m, "const long long za_ = (long long)p2[row_];"), "per-row zero point");
    cr_assert(cuda_has(m, "_qlinear_matmul: QLinearMatMul"));
    cr_assert(cuda_has(m, "ampc::cv::requant_scale(ampc::cvt<float>(p4[0]), ampc::cvt<float>(p5[col_])"),
              "per-column scale of B");
    cr_assert(cuda_has(m, "_einsum: Einsum"));
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* Einsum "ii->i" walks the diagonal: the output coordinate strides the input by 4 + 1. */
Test(lower_contract, einsum_diagonal_strides) {
    ampc_graph *g = ampc_graph_create("e");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 4));
    ampc_attr_arg q[1] = {AMPC_ATTR_S("equation", "ii->i")};
    out(g, node(g, "Einsum", &x, 1, q, 1));
    ampc_cg_output *o = gen(g);
    cr_assert(strstr(o->sources[0], "const long long b0_ = 0 + f0_ * 5LL;"), "%s", o->sources[0]);
    cr_assert_null(strstr(o->sources[0], "for (long long s"), "nothing is summed: %s", o->sources[0]);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

static ampc_graph *build_conv(void) {
    ampc_graph *g = ampc_graph_create("convs");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4, 7, 6));
    int64_t pa[4] = {0, 1, 2, 0}, s2[2] = {2, 2}, d2[2] = {2, 1}, ps[4] = {1, 1, 1, 1};
    /* asymmetric pads, groups, bias: direct */
    ampc_value *in1[3] = {x, ramp(g, AMPC_DTYPE_F32, SHAPE(6, 2, 3, 3), 0.25),
                          ramp(g, AMPC_DTYPE_F32, SHAPE(6), 0.5)};
    ampc_attr_arg a1[3] = {AMPC_ATTR_IS("pads", pa, 4), AMPC_ATTR_I("group", 2),
                           AMPC_ATTR_IS("dilations", d2, 2)};
    out(g, node(g, "Conv", in1, 3, a1, 3));
    /* symmetric: cuDNN */
    ampc_value *in2[3] = {x, ramp(g, AMPC_DTYPE_F32, SHAPE(3, 4, 3, 3), 0.25),
                          ramp(g, AMPC_DTYPE_F32, SHAPE(3), 0.5)};
    ampc_attr_arg a2[2] = {AMPC_ATTR_IS("pads", ps, 4), AMPC_ATTR_IS("strides", s2, 2)};
    out(g, node(g, "Conv", in2, 3, a2, 2));
    /* SAME_LOWER with an even kernel: asymmetric */
    ampc_value *in3[2] = {x, ramp(g, AMPC_DTYPE_F32, SHAPE(2, 4, 2, 2), 0.25)};
    ampc_attr_arg a3[1] = {AMPC_ATTR_S("auto_pad", "SAME_LOWER")};
    out(g, node(g, "Conv", in3, 2, a3, 1));
    /* f64 and f16, 1-D and 3-D */
    ampc_value *xd = t_input(g, "xd", AMPC_DTYPE_F64, SHAPE(1, 2, 9));
    ampc_value *in4[3] = {xd, ramp(g, AMPC_DTYPE_F64, SHAPE(3, 2, 3), 0.25),
                          ramp(g, AMPC_DTYPE_F64, SHAPE(3), 0.5)};
    int64_t p1[2] = {2, 1};
    ampc_attr_arg a4[1] = {AMPC_ATTR_IS("pads", p1, 2)};
    out(g, node(g, "Conv", in4, 3, a4, 1));
    ampc_value *xh = t_input(g, "xh", AMPC_DTYPE_F16, SHAPE(1, 2, 4, 5, 5));
    ampc_value *in5[2] = {xh, ramp(g, AMPC_DTYPE_F16, SHAPE(2, 2, 2, 3, 3), 0.25)};
    int64_t p3[6] = {0, 1, 1, 1, 1, 0};
    ampc_attr_arg a5[1] = {AMPC_ATTR_IS("pads", p3, 6)};
    out(g, node(g, "Conv", in5, 2, a5, 1));
    /* ConvTranspose: cuDNN (symmetric), and direct (output_shape; groups and dilations) */
    ampc_value *in6[3] = {x, ramp(g, AMPC_DTYPE_F32, SHAPE(4, 3, 3, 3), 0.25),
                          ramp(g, AMPC_DTYPE_F32, SHAPE(3), 0.5)};
    int64_t op[2] = {1, 1};
    ampc_attr_arg a6[3] = {AMPC_ATTR_IS("strides", s2, 2), AMPC_ATTR_IS("pads", ps, 4),
                           AMPC_ATTR_IS("output_padding", op, 2)};
    out(g, node(g, "ConvTranspose", in6, 3, a6, 3));
    ampc_value *in7[3] = {x, ramp(g, AMPC_DTYPE_F32, SHAPE(4, 1, 3, 2), 0.25),
                          ramp(g, AMPC_DTYPE_F32, SHAPE(2), 0.5)};
    int64_t os[2] = {15, 14};
    ampc_attr_arg a7[4] = {AMPC_ATTR_IS("strides", s2, 2), AMPC_ATTR_IS("output_shape", os, 2),
                           AMPC_ATTR_I("group", 2), AMPC_ATTR_IS("dilations", d2, 2)};
    out(g, node(g, "ConvTranspose", in7, 3, a7, 4));
    /* ConvInteger with a per-channel weight zero point; QLinearConv with a bias */
    ampc_value *xq = t_input(g, "xq", AMPC_DTYPE_U8, SHAPE(1, 2, 5, 5));
    double zx[1] = {100}, zw[3] = {1, 2, 3};
    ampc_value *in8[4] = {xq, ramp(g, AMPC_DTYPE_U8, SHAPE(3, 2, 3, 3), 7),
                          cst(g, AMPC_DTYPE_U8, SHAPE(), zx), cst(g, AMPC_DTYPE_U8, SHAPE(3), zw)};
    ampc_attr_arg a8[1] = {AMPC_ATTR_IS("pads", ps, 4)};
    out(g, node(g, "ConvInteger", in8, 4, a8, 1));
    double sx[1] = {0.02}, sw[3] = {0.01, 0.02, 0.03}, zq[1] = {5}, sy[1] = {0.5}, zy[1] = {128},
           bq[3] = {-100, 0, 250};
    ampc_value *in9[9] = {xq,
                          cst(g, AMPC_DTYPE_F32, SHAPE(), sx),
                          cst(g, AMPC_DTYPE_U8, SHAPE(), zx),
                          ramp(g, AMPC_DTYPE_I8, SHAPE(3, 2, 3, 3), 9),
                          cst(g, AMPC_DTYPE_F32, SHAPE(3), sw),
                          cst(g, AMPC_DTYPE_I8, SHAPE(), zq),
                          cst(g, AMPC_DTYPE_F32, SHAPE(), sy),
                          cst(g, AMPC_DTYPE_U8, SHAPE(), zy),
                          cst(g, AMPC_DTYPE_I32, SHAPE(3), bq)};
    ampc_attr_arg a9[1] = {AMPC_ATTR_IS("strides", s2, 2)};
    out(g, node(g, "QLinearConv", in9, 9, a9, 1));
    return g;
}

Test(lower_contract, convolution_kernels_compile) {
    ampc_graph *g = build_conv();
    ampc_module *m = compile(g, true);
    cr_assert(cuda_has(m, "_conv_direct: Conv 'Conv_0'"));
    cr_assert(!cuda_has(m, "Conv 'Conv_1'"), "the symmetric Conv is a cuDNN step");
    cr_assert(cuda_has(m, "_conv_direct: Conv 'Conv_2'"));
    cr_assert(cuda_has(m, "_conv_transpose_direct: ConvTranspose"));
    cr_assert(cuda_has(m, "_conv_integer: ConvInteger"));
    cr_assert(cuda_has(m, "const long long zw_ = (long long)p3[m_];"), "per-channel zero point");
    cr_assert(cuda_has(m, "_qlinear_conv: QLinearConv"));
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* ---- pools ----------------------------------------------------------------------------------- */

static ampc_graph *build_pool(void) {
    ampc_graph *g = ampc_graph_create("pools");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 7, 8));
    int64_t k32[2] = {3, 2}, k33[2] = {3, 3}, s2[2] = {2, 2}, p1[4] = {1, 0, 1, 1},
            d2[2] = {2, 1};
    /* MaxPool with Indices (column-major), pads, dilations, ceil_mode; then MaxUnpool */
    ampc_attr_arg am[5] = {AMPC_ATTR_IS("kernel_shape", k32, 2), AMPC_ATTR_IS("strides", s2, 2),
                           AMPC_ATTR_IS("pads", p1, 4), AMPC_ATTR_I("ceil_mode", 1),
                           AMPC_ATTR_I("storage_order", 1)};
    ampc_value *mp[2];
    cr_assert_eq(ampc_op_multi(g, "MaxPool", &x, 1, am, 5, mp, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    out(g, mp[0]);
    out(g, mp[1]);
    /* overlapping windows with dilation; then a pool / unpool pair (the same window) */
    ampc_attr_arg am2[3] = {AMPC_ATTR_IS("kernel_shape", k33, 2), AMPC_ATTR_IS("strides", s2, 2),
                            AMPC_ATTR_IS("dilations", d2, 2)};
    out(g, node(g, "MaxPool", &x, 1, am2, 3));
    ampc_value *mp2[2], *x77 = t_input(g, "x77", AMPC_DTYPE_F32, SHAPE(2, 3, 7, 7));
    cr_assert_eq(ampc_op_multi(g, "MaxPool", &x77, 1, am2, 2, mp2, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    out(g, mp2[0]);
    ampc_value *un_in[2] = {mp2[0], mp2[1]};
    out(g, node(g, "MaxUnpool", un_in, 2, am2, 2));
    /* AveragePool: count_include_pad with ceil_mode, and without */
    ampc_attr_arg aa[5] = {AMPC_ATTR_IS("kernel_shape", k33, 2), AMPC_ATTR_IS("strides", s2, 2),
                           AMPC_ATTR_IS("pads", p1, 4), AMPC_ATTR_I("ceil_mode", 1),
                           AMPC_ATTR_I("count_include_pad", 1)};
    out(g, node(g, "AveragePool", &x, 1, aa, 5));
    out(g, node(g, "AveragePool", &x, 1, aa, 4));
    ampc_attr_arg al[3] = {AMPC_ATTR_IS("kernel_shape", k32, 2), AMPC_ATTR_IS("pads", p1, 4),
                           AMPC_ATTR_I("p", 3)};
    out(g, node(g, "LpPool", &x, 1, al, 3));
    /* other dtypes and ranks */
    ampc_value *xh = t_input(g, "xh", AMPC_DTYPE_F16, SHAPE(1, 2, 5, 4, 6));
    int64_t k3[3] = {2, 2, 3};
    ampc_attr_arg a3[1] = {AMPC_ATTR_IS("kernel_shape", k3, 3)};
    out(g, node(g, "MaxPool", &xh, 1, a3, 1));
    out(g, node(g, "AveragePool", &xh, 1, a3, 1));
    ampc_value *x8 = t_input(g, "x8", AMPC_DTYPE_I8, SHAPE(1, 2, 9));
    int64_t k1[1] = {4}, pp1[2] = {2, 2};
    ampc_attr_arg a1[2] = {AMPC_ATTR_IS("kernel_shape", k1, 1), AMPC_ATTR_IS("pads", pp1, 2)};
    out(g, node(g, "MaxPool", &x8, 1, a1, 2));
    ampc_value *xu = t_input(g, "xu", AMPC_DTYPE_U8, SHAPE(1, 2, 9));
    out(g, node(g, "MaxPool", &xu, 1, a1, 2));
    /* global pools */
    out(g, node(g, "GlobalAveragePool", &x, 1, NULL, 0));
    out(g, node(g, "GlobalMaxPool", &xh, 1, NULL, 0));
    ampc_attr_arg gp[1] = {AMPC_ATTR_I("p", 3)};
    out(g, node(g, "GlobalLpPool", &x, 1, gp, 1));
    ampc_value *xl = t_input(g, "xl", AMPC_DTYPE_F32, SHAPE(2, 2, 40, 40));
    out(g, node(g, "GlobalAveragePool", &xl, 1, NULL, 0));
    /* RoiAlign (avg, half_pixel; max, output_half_pixel) and MaxRoiPool */
    double rois[12] = {0, 0, 3, 4, 1.5, 1, 6.5, 5, -2, 2, 9, 3.5};
    double bidx[3] = {0, 1, 1};
    ampc_value *in_r[3] = {x, cst(g, AMPC_DTYPE_F32, SHAPE(3, 4), rois),
                           cst(g, AMPC_DTYPE_I64, SHAPE(3), bidx)};
    ampc_attr_arg ra[3] = {AMPC_ATTR_I("output_height", 2), AMPC_ATTR_I("output_width", 3),
                           AMPC_ATTR_F("spatial_scale", 0.5f)};
    out(g, node(g, "RoiAlign", in_r, 3, ra, 3));
    ampc_attr_arg rm[4] = {AMPC_ATTR_I("output_height", 3), AMPC_ATTR_I("sampling_ratio", 2),
                           AMPC_ATTR_S("mode", "max"),
                           AMPC_ATTR_S("coordinate_transformation_mode", "output_half_pixel")};
    out(g, node(g, "RoiAlign", in_r, 3, rm, 4));
    double rp[10] = {0, 0, 0, 5, 4, 1, 2.6, 1, 7.4, 6};
    ampc_value *in_p[2] = {x, cst(g, AMPC_DTYPE_F32, SHAPE(2, 5), rp)};
    int64_t pooled[2] = {2, 3};
    ampc_attr_arg mr[1] = {AMPC_ATTR_IS("pooled_shape", pooled, 2)};
    out(g, node(g, "MaxRoiPool", in_p, 2, mr, 1));
    /* Col2Im: [1, 2 * 2 * 3, L] into 2 channels of 5x6, dilation and stride and pads */
    int64_t img[2] = {5, 6}, blk[2] = {2, 3}, cs[2] = {1, 2}, cd[2] = {2, 1}, cp[4] = {1, 0, 0, 1};
    /* blocks: (5 + 1 - 3) / 1 + 1 = 4 rows, (6 + 1 - 3) / 2 + 1 = 3 cols: L = 12 */
    ampc_value *xc = t_input(g, "xc", AMPC_DTYPE_F32, SHAPE(1, 12, 12));
    ampc_value *in_c[3] = {xc, ampc_const_i64s(g, img, 2), ampc_const_i64s(g, blk, 2)};
    ampc_attr_arg ca[3] = {AMPC_ATTR_IS("strides", cs, 2), AMPC_ATTR_IS("dilations", cd, 2),
                           AMPC_ATTR_IS("pads", cp, 4)};
    out(g, node(g, "Col2Im", in_c, 3, ca, 3));
    ampc_value *xci = t_input(g, "xci", AMPC_DTYPE_I32, SHAPE(1, 12, 12));
    ampc_value *in_ci[3] = {xci, ampc_const_i64s(g, img, 2), ampc_const_i64s(g, blk, 2)};
    out(g, node(g, "Col2Im", in_ci, 3, ca, 3));
    return g;
}

Test(lower_contract, pooling_kernels_compile) {
    ampc_graph *g = build_pool();
    ampc_module *m = compile(g, true);
    const char *names[] = {"_max_pool: MaxPool", "_average_pool: AveragePool", "_lp_pool: LpPool",
                           "_global_average_pool: GlobalAveragePool",
                           "_global_max_pool: GlobalMaxPool", "_global_lp_pool: GlobalLpPool",
                           "_roi_align: RoiAlign", "_max_roi_pool: MaxRoiPool",
                           "_max_unpool: MaxUnpool", "_col2im: Col2Im"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        cr_assert(cuda_has(m, names[i]), "no kernel '%s'", names[i]);
    /* storage_order 1: the index is column-major over the 7 x 8 plane */
    cr_assert(cuda_has(m, "arg_ = 0 + p0_ * 1LL + p1_ * 7LL;"));
    cr_assert(cuda_has(m, "p2[i] = arg_ < 0 ? -1LL : r_ * 56LL + arg_;"));
    cr_assert(cuda_has(m, "long long best_ = -128LL;"), "i8 MaxPool's lowest value");
    cr_assert(cuda_has(m, "acc_ = ampc::cv::warp_sum(acc_);"));
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* AveragePool's divisor: count_include_pad counts the padded window, never what ceil_mode adds. */
Test(lower_contract, average_pool_counts_as_the_reference) {
    ampc_graph *g = ampc_graph_create("ap");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 5, 5));
    int64_t k[2] = {3, 3}, s[2] = {2, 2}, p[4] = {1, 1, 0, 0};
    ampc_attr_arg a[5] = {AMPC_ATTR_IS("kernel_shape", k, 2), AMPC_ATTR_IS("strides", s, 2),
                          AMPC_ATTR_IS("pads", p, 4), AMPC_ATTR_I("ceil_mode", 1),
                          AMPC_ATTR_I("count_include_pad", 1)};
    out(g, node(g, "AveragePool", &x, 1, a, 5));
    ampc_cg_output *o = gen(g);
    const char *cu = o->sources[0];
    /* the last window (o = 2) starts at 3 and reaches 5, past the end pad 0: skipped */
    cr_assert(strstr(cu, "if (p0_ < -1LL || p0_ >= 5LL) continue;"), "%s", cu);
    cr_assert(strstr(cu, "padded_++;"), "%s", cu);
    cr_assert(strstr(cu, "p1[i] = ampc::cvt<float>(sum_ / (float)padded_);"), "%s", cu);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ---- Resize ---------------------------------------------------------------------------------- */

static ampc_graph *build_resize(void) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                         "align_corners", "asymmetric", "tf_crop_and_resize",
                                         "tf_half_pixel_for_nn"};
    ampc_graph *g = ampc_graph_create("resize");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 2, 4, 5));
    int64_t up[4] = {1, 2, 7, 3};
    double roi[8] = {0, 0, 0.1, 0.2, 1, 1, 0.8, 1.1};
    for (int m = 0; m < 3; m++)
        for (int c = 0; c < 7; c++) {
            if (m != 0 && c == 6) continue; /* tf_half_pixel_for_nn is for nearest */
            ampc_value *in[4] = {x, c == 5 ? cst(g, AMPC_DTYPE_F32, SHAPE(8), roi) : NULL, NULL,
                                 ampc_const_i64s(g, up, 4)};
            ampc_attr_arg a[3] = {AMPC_ATTR_S("mode", modes[m]),
                                  AMPC_ATTR_S("coordinate_transformation_mode", coords[c]),
                                  AMPC_ATTR_F("extrapolation_value", -7.5f)};
            out(g, node(g, "Resize", in, 4, a, 3));
        }
    /* nearest modes by scales; antialias; exclude_outside; axes; integers; Upsample */
    double sc[4] = {1, 1, 1.5, 0.6};
    static const char *const nm[] = {"round_prefer_ceil", "floor", "ceil"};
    for (int i = 0; i < 3; i++) {
        ampc_value *in[3] = {x, NULL, cst(g, AMPC_DTYPE_F32, SHAPE(4), sc)};
        ampc_attr_arg a[1] = {AMPC_ATTR_S("nearest_mode", nm[i])};
        out(g, node(g, "Resize", in, 3, a, 1));
    }
    int64_t down[4] = {1, 2, 2, 2};
    ampc_value *in_aa[4] = {x, NULL, NULL, ampc_const_i64s(g, down, 4)};
    ampc_attr_arg aa[2] = {AMPC_ATTR_S("mode", "linear"), AMPC_ATTR_I("antialias", 1)};
    out(g, node(g, "Resize", in_aa, 4, aa, 2));
    ampc_attr_arg ac[3] = {AMPC_ATTR_S("mode", "cubic"), AMPC_ATTR_I("antialias", 1),
                           AMPC_ATTR_I("exclude_outside", 1)};
    out(g, node(g, "Resize", in_aa, 4, ac, 3));
    int64_t ax[2] = {2, 3}, sz[2] = {6, 9};
    ampc_value *in_ax[4] = {x, NULL, NULL, ampc_const_i64s(g, sz, 2)};
    ampc_attr_arg axa[3] = {AMPC_ATTR_S("mode", "cubic"), AMPC_ATTR_IS("axes", ax, 2),
                            AMPC_ATTR_S("keep_aspect_ratio_policy", "not_larger")};
    out(g, node(g, "Resize", in_ax, 4, axa, 3));
    ampc_value *xu = t_input(g, "xu", AMPC_DTYPE_U8, SHAPE(1, 1, 4, 4));
    int64_t u8sz[4] = {1, 1, 7, 6};
    ampc_value *in_u[4] = {xu, NULL, NULL, ampc_const_i64s(g, u8sz, 4)};
    ampc_attr_arg ua[1] = {AMPC_ATTR_S("mode", "cubic")};
    out(g, node(g, "Resize", in_u, 4, ua, 1));
    ampc_attr_arg ul[1] = {AMPC_ATTR_S("mode", "linear")};
    out(g, node(g, "Resize", in_u, 4, ul, 1));
    /* tf_crop_and_resize with a roi computed at run time (roi + 0 * rz: rz is an input) */
    ampc_value *rz = t_input(g, "rz", AMPC_DTYPE_F32, SHAPE(4));
    double zero4[4] = {0, 0, 0, 0}, roi4[4] = {0.1, -0.2, 0.9, 1.05};
    ampc_value *rin[2] = {rz, cst(g, AMPC_DTYPE_F32, SHAPE(4), zero4)};
    ampc_value *rsum[2] = {node(g, "Mul", rin, 2, NULL, 0), cst(g, AMPC_DTYPE_F32, SHAPE(4), roi4)};
    ampc_value *roi_rt = node(g, "Add", rsum, 2, NULL, 0);
    for (int m = 0; m < 3; m++) {
        int64_t rax[2] = {2, 3}, rsz[2] = {5, 7};
        ampc_value *in[4] = {m == 2 ? xu : x, roi_rt, NULL, ampc_const_i64s(g, rsz, 2)};
        ampc_attr_arg a[4] = {AMPC_ATTR_S("mode", modes[m]), AMPC_ATTR_IS("axes", rax, 2),
                              AMPC_ATTR_S("coordinate_transformation_mode", "tf_crop_and_resize"),
                              AMPC_ATTR_F("extrapolation_value", 3.25f)};
        out(g, node(g, "Resize", in, 4, a, 4));
    }
    ampc_value *xh = t_input(g, "xh", AMPC_DTYPE_F16, SHAPE(1, 1, 3, 3));
    double us[4] = {1, 1, 2, 1.5};
    ampc_value *in_up[2] = {xh, cst(g, AMPC_DTYPE_F32, SHAPE(4), us)};
    ampc_attr_arg upa[1] = {AMPC_ATTR_S("mode", "linear")};
    out(g, node(g, "Upsample", in_up, 2, upa, 1));
    out(g, node(g, "Upsample", in_up, 2, NULL, 0));
    return g;
}

Test(lower_contract, resize_kernels_compile) {
    ampc_graph *g = build_resize();
    ampc_module *m = compile(g, true);
    cr_assert(cuda_has(m, "_resize: Resize"));
    cr_assert(cuda_has(m, "_upsample: Upsample"));
    cr_assert(cuda_has(m, "static const bool te3_[3] = {"), "tf_crop_and_resize extrapolates");
    cr_assert(cuda_has(m, "p1[i] = ampc::cv::store_f64<float>(-7.5);"));
    cr_assert(cuda_has(m, "acc_ = ampc::cv::madd_rn(acc_, w3_, ampc::cvt<double>(p0[x3_]));"),
              "u8 output: exact double arithmetic");
    cr_assert(cuda_has(m, "const int rn3_ = ampc_resize_taps(2, 0, -0.75, false, false, 1.75, 4LL, "
                          "xo3_, ri3_, rw3_);"), "run-time roi: taps in the kernel");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* A 2x nearest upsample of the last axis: tables only for that axis; the taps of output
 * coordinate j read input j / 2 (half_pixel, round_prefer_floor: 0, 0, 1, 1, ...). */
Test(lower_contract, resize_tables_are_the_reference_taps) {
    ampc_graph *g = ampc_graph_create("r");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 3));
    double sc[4] = {1, 1, 1, 2};
    ampc_value *in[3] = {x, NULL, cst(g, AMPC_DTYPE_F32, SHAPE(4), sc)};
    out(g, node(g, "Resize", in, 3, NULL, 0));
    ampc_cg_output *o = gen(g);
    const char *cu = o->sources[0];
    cr_assert(strstr(cu, "static const int tc3_[6] = {"), "%s", cu);
    cr_assert(strstr(cu, "1,1,1,1,1,1,"), "one tap per coordinate: %s", cu);
    /* index pairs per coordinate (the second slot unused) */
    cr_assert(strstr(cu, "0LL,0LL,0LL,0LL,1LL,0LL,1LL,0LL,2LL,0LL,2LL,0LL,"), "%s", cu);
    cr_assert_null(strstr(cu, "tc2_"), "axis 2 does not resample: %s", cu);
    cr_assert(strstr(cu, "const long long b_ = 0 + o0_ * 6LL + o1_ * 6LL + o2_ * 3LL;"), "%s", cu);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ---- unsupported ops keep their diagnostic --------------------------------------------------- */

Test(lower_contract, ops_without_a_lowering_name_the_node) {
    ampc_graph *g = ampc_graph_create("t");
    /* RandomNormalLike has no GPU lowering yet (a reference-only row) */
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_output(g, ampc_op(g, "RandomNormalLike", &x, 1, NULL, 0), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *m = NULL;
    static const int32_t sm80 = 80;
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = ""};
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_E_UNSUPPORTED);
    t_expect_diag(g, "(RandomNormalLike 'RandomNormalLike_0'): RandomNormalLike has no GPU "
                     "lowering yet; it runs on the reference evaluator only");
    ampc_graph_destroy(g);
}

/* ---- on a GPU: results against the reference evaluator --------------------------------------- */

/* Random contents for an input: floats in multiples of 1/16 in [-4, 4) (exact in every float
 * dtype), small integers, full-range bytes. */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        *seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
        uint64_t r = *seed >> 11;
        double v;
        switch (t->dtype) {
        case AMPC_DTYPE_U8: v = (double)(r % 256); break;
        case AMPC_DTYPE_I8: v = (double)(r % 256) - 128; break;
        case AMPC_DTYPE_BOOL: v = (double)(r % 2); break;
        default: v = ampc_dtype_is_float(t->dtype) ? (double)(r % 128) / 16.0 - 4.0
                                                   : (double)(r % 17) - 8;
        }
        ampc_ref_store_f64(t->data, t->dtype, i, v);
    }
}

/* Runs build()'s graph on the GPU (full f32 math) and on the reference evaluator with random
 * inputs and compares every output (f16/bf16 within 1e-2, integers exactly). Skips without a
 * GPU. */
static void run_vs_reference(ampc_graph *(*build)(void), double rtol, double atol) {
    t_gpu_check c = {.fill = fill, .seed = 0x9e3779b97f4a7c15ull, .rtol = rtol, .atol = atol,
                     .what = "contract"};
    t_gpu_vs_reference(build(), &c);
}

Test(lower_contract, gpu_contractions_match_the_reference) { run_vs_reference(build_contract, 1e-3, 1e-4); }
Test(lower_contract, gpu_convolutions_match_the_reference) { run_vs_reference(build_conv, 1e-3, 1e-4); }
Test(lower_contract, gpu_pools_match_the_reference) { run_vs_reference(build_pool, 1e-3, 1e-4); }
Test(lower_contract, gpu_resize_matches_the_reference) { run_vs_reference(build_resize, 1e-3, 1e-4); }

/* ---- L2 prefetch of the next GEMM's weight (codegen/emit.c) ---------------------------------- */

/* y = Tanh(x) @ w, x [rows, 16], w [16, 32]: the Tanh kernel runs right before the GEMM and
 * asks L2 for w when w is the larger operand. */
static ampc_graph *tanh_then_matmul(ampc_value **w, int64_t rows) {
    ampc_graph *g = ampc_graph_create("pf");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(rows, 16));
    ampc_value *t = node(g, "Tanh", &x, 1, NULL, 0);
    *w = ramp(g, AMPC_DTYPE_F32, SHAPE(16, 32), 0.125);
    ampc_value *in[2] = {t, *w};
    out(g, node(g, "MatMul", in, 2, NULL, 0));
    return g;
}

Test(lower_contract, the_kernel_before_a_gemm_prefetches_its_weight) {
    ampc_value *w;
    ampc_graph *g = tanh_then_matmul(&w, 8);
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 2);
    const ampc_rt_kernel *k = &step_of(o, AMPC_RT_STEP_KERNEL, 0)->kernel;
    const ampc_rt_gemm *p = &step_of(o, AMPC_RT_STEP_GEMM, 0)->gemm;
    cr_assert_eq(o->plan.steps[1].kind, AMPC_RT_STEP_GEMM, "the GEMM follows the kernel");
    cr_assert_geq(k->n_args, 2);
    const ampc_rt_arg *a = &k->args[k->n_args - 2];
    cr_assert_eq(a[0].kind, AMPC_RT_ARG_PTR);
    expect_ref(a[0].ref, p->b, "the prefetched weight");
    expect_ref(p->b, vref(w, 0), "B");
    cr_assert_eq(a[1].kind, AMPC_RT_ARG_I64);
    cr_assert_eq(a[1].i64, 16 * 32 * 4, "its bytes");
    cr_assert(strstr(o->sources[0], ", const void *__restrict__ ampc_pf, long long ampc_pf_bytes) {\n"
                                    "    ampc::prefetch_l2(ampc_pf, ampc_pf_bytes);\n"
                                    "    ampc::pdl_enter();\n"),
              "the kernel's parameters and first statement:\n%s", o->sources[0]);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = tanh_then_matmul(&w, 8);
    o = gen_with(g, &(ampc_cg_options){.math = AMPC_RT_MATH_TF32, .no_l2_prefetch = true});
    cr_assert_null(strstr(o->sources[0], "prefetch_l2"), "no_l2_prefetch leaves it out");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_contract, no_prefetch_when_the_input_outweighs_the_weight) {
    ampc_value *w;
    ampc_graph *g = tanh_then_matmul(&w, 64); /* x 4096 bytes, w 2048 */
    ampc_cg_output *o = gen(g);
    cr_assert_eq(o->plan.n_steps, 2);
    cr_assert_null(strstr(o->sources[0], "prefetch_l2"), "%s", o->sources[0]);
    cr_assert_eq(step_of(o, AMPC_RT_STEP_KERNEL, 0)->kernel.n_args, 2, "x and y only");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ---- hostile coordinates: RoiAlign rois, tf_crop_and_resize rois ----------------------------- */

/* Roi corners no sampling can use as they are: NaN, the infinities, corners 1e30 and 3e9 away.
 * Adaptive sampling gets only the first three (a huge finite roi asks the reference evaluator for
 * more samples than it takes). */
static const double hostile[] = {NAN, INFINITY, -INFINITY, 1e30, -3e9, -1e30, 3e9};

/* RoiAlign avg and max, fixed and adaptive sampling, over hostile rois (12 of them; batch
 * indices 0, 1, 0, ...). */
static ampc_graph *build_roi_hostile(void) {
    ampc_graph *g = ampc_graph_create("roi_hostile");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 6, 7));
    ampc_value *far = t_input(g, "rois_far", AMPC_DTYPE_F32, SHAPE(12, 4));
    ampc_value *nf = t_input(g, "rois_nonfinite", AMPC_DTYPE_F32, SHAPE(12, 4));
    ampc_value *bi = t_input(g, "bi", AMPC_DTYPE_I64, SHAPE(12));
    for (int i = 0; i < 4; i++) {
        bool adaptive = i >= 2, is_max = i % 2;
        ampc_attr_arg a[5] = {
            AMPC_ATTR_I("output_height", 2), AMPC_ATTR_I("output_width", 3),
            AMPC_ATTR_I("sampling_ratio", adaptive ? 0 : 2 + i),
            AMPC_ATTR_S("mode", is_max ? "max" : "avg"),
            AMPC_ATTR_S("coordinate_transformation_mode", is_max ? "output_half_pixel" : "half_pixel")};
        out(g, node(g, "RoiAlign", (ampc_value *[]){x, adaptive ? nf : far, bi}, 3, a, 5));
    }
    return g;
}

/* tf_crop_and_resize (nearest, linear, cubic) over axes 2 and 3 with run-time rois holding NaN,
 * an infinity or a far start (-3e9: the last rows land on the input again), and one constant roi with NaN and inf (taps in tables). */
static ampc_graph *build_crop_hostile(void) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const rois[] = {"roi_nan", "roi_inf", "roi_far"};
    ampc_graph *g = ampc_graph_create("crop_hostile");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 2, 4, 5));
    int64_t ax[2] = {2, 3}, sz[2] = {5, 7};
    for (int r = 0; r < 3; r++) {
        ampc_value *roi = t_input(g, rois[r], AMPC_DTYPE_F32, SHAPE(4));
        for (int m = 0; m < 3; m++) {
            ampc_attr_arg a[4] = {AMPC_ATTR_S("mode", modes[m]), AMPC_ATTR_IS("axes", ax, 2),
                                  AMPC_ATTR_S("coordinate_transformation_mode", "tf_crop_and_resize"),
                                  AMPC_ATTR_F("extrapolation_value", 3.25f)};
            out(g, node(g, "Resize", (ampc_value *[]){x, roi, NULL, ampc_const_i64s(g, sz, 2)}, 4,
                        a, 4));
        }
    }
    double croi[8] = {0, 0, NAN, 0.1, 1, 1, 0.9, INFINITY};
    int64_t up[4] = {1, 2, 7, 3};
    ampc_attr_arg a[3] = {AMPC_ATTR_S("mode", "linear"),
                          AMPC_ATTR_S("coordinate_transformation_mode", "tf_crop_and_resize"),
                          AMPC_ATTR_F("extrapolation_value", -7.5f)};
    out(g, node(g, "Resize",
                (ampc_value *[]){x, cst(g, AMPC_DTYPE_F32, SHAPE(8), croi), NULL,
                                 ampc_const_i64s(g, up, 4)},
                4, a, 3));
    return g;
}

/* The kernels test a sample point or crop position for NaN before it becomes an integer, bound
 * RoiAlign's samples per roi, and compile with NVRTC. */
Test(lower_contract, hostile_coordinates_are_tested_before_use_and_compile, .timeout = 600) {
    ampc_graph *g = build_roi_hostile();
    ampc_module *m = compile(g, false);
    cr_expect(cuda_has(m, "if (yy_ >= -1.0 && yy_ <= 6.0 && xx_ >= -1.0 && xx_ <= 7.0) {"),
              "a NaN sample point is outside the map");
    cr_expect(cuda_has(m, "|| !(ghd_ > 0 && gwd_ > 0)) ghd_ = gwd_ = 0;"), "no samples");
    cr_expect(cuda_has(m, "if (ghd_ * gwd_ * 18.0 > 4294967296) {"), "bounded samples per roi");
    cr_expect(cuda_has(m, "double ghd_ = ceil(rh_ / 2.0), gwd_ = ceil(rw_ / 3.0);"), "adaptive");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);

    g = build_crop_hostile();
    m = compile(g, false);
    cr_expect(cuda_has(m, "if (!(xo2_ >= 0 && xo2_ <= 3.0) || !(xo3_ >= 0 && xo3_ <= 4.0)) {"),
              "a NaN crop position extrapolates");
    /* the constant roi: axis 2 starts at NaN, so every output extrapolates (table te2_) */
    cr_expect(cuda_has(m, "static const bool te2_[7] = {\n        1,1,1,1,1,1,1,\n"));
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* Roi r: an ordinary roi (x1, y1, x2, y2) moved by r / 4, where r % 3 == 1 replaces one corner
 * and r % 3 == 2 two opposite corners with values from `hostile` (the first 3 for
 * rois_nonfinite); batch indices 0, 1, 0, ...; crop rois by name; everything else from fill. */
static void fill_hostile(ampc_tensor *t, const char *name, uint64_t *seed) {
    static const double base[4] = {0.5, 1.0, 4.5, 3.0};
    static const double roi_nan[4] = {NAN, 0.1, 0.9, 0.8}, roi_inf[4] = {0.2, 0.1, INFINITY, 0.9},
                        roi_far[4] = {-3e9, 0.2, 0.5, 0.8};
    int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        double v;
        int64_t r = i / 4, c = i % 4, kinds = strcmp(name, "rois_far") ? 3 : 7;
        if (!strcmp(name, "rois_far") || !strcmp(name, "rois_nonfinite")) {
            v = base[c] + (double)r / 4;
            if (r % 3 == 1 && c == r % 4) v = hostile[r % kinds];
            if (r % 3 == 2 && (c == r % 4 || c == (r + 2) % 4)) v = hostile[(r + c) % kinds];
        } else if (!strcmp(name, "bi")) {
            v = (double)(i % 2);
        } else if (!strcmp(name, "roi_nan")) {
            v = roi_nan[i % 4];
        } else if (!strcmp(name, "roi_inf")) {
            v = roi_inf[i % 4];
        } else if (!strcmp(name, "roi_far")) {
            v = roi_far[i % 4];
        } else {
            fill(t, name, seed);
            return;
        }
        ampc_ref_store_f64(t->data, t->dtype, i, v);
    }
}

static void hostile_vs_reference(ampc_graph *g) {
    t_gpu_check c = {.fill = fill_hostile, .seed = 0x9e3779b97f4a7c15ull, .rtol = 1e-3,
                     .atol = 1e-4, .what = g->name};
    t_gpu_vs_reference(g, &c);
}

Test(lower_contract, gpu_roi_align_hostile_rois_match_the_reference) {
    hostile_vs_reference(build_roi_hostile());
}
Test(lower_contract, gpu_crop_and_resize_hostile_rois_match_the_reference) {
    hostile_vs_reference(build_crop_hostile());
}
