/*
 * test_lower_quant.c — GPU lowering of QuantizeLinear / DequantizeLinear (per tensor, per axis,
 * blocked), DynamicQuantizeLinear, Det, MelWeightMatrix and TfIdfVectorizer
 * (codegen/lower_quant.c, codegen/kernels/quant.cuh).
 *
 * Without a GPU: every variant compiles with NVRTC for sm_80 (one .entry per step), and golden
 * substrings of the emitted CUDA and launch shapes are checked. With a GPU: the same graphs run
 * on random inputs and every output is compared with the reference evaluator (exact for
 * integers, a tolerance per float dtype); without one those tests skip.
 */
#include "support.h"

#include "ampc_runtime.h"
#include "codegen/codegen.h"
#include "ir/ref/ref.h"
#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int32_t sm80 = 80;

typedef void (*build_fn)(ampc_graph *g, ampc_dtype t);

static void out(ampc_graph *g, ampc_value *v) {
    cr_assert_eq(ampc_output(g, v, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
}

/* ---- graph builders ------------------------------------------------------------------------- */

/* Quantize / Dequantize with scales of dtype t (named "pos*": positive): per tensor with and
 * without a zero point, per axis (u8, i8, i16 and u16 outputs), blocked; Dequantize of i8, u8
 * and i32; Quantize of i32 x. */
static void build_qdq(ampc_graph *g, ampc_dtype t) {
    ampc_value *x = t_input(g, "x", t, SHAPE(2, 3, 4));
    ampc_value *s1 = t_input(g, "pos_s1", t, SHAPE());
    ampc_value *s3 = t_input(g, "pos_s3", t, SHAPE(3));
    ampc_value *sb = t_input(g, "pos_sb", t, SHAPE(2, 3, 2));
    const uint8_t zu8 = 128;
    const int8_t z3[3] = {-3, 0, 5};
    const int16_t z16[3] = {-300, 0, 7};
    const uint16_t zb[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    ampc_value *zpu8 = t_const(g, AMPC_DTYPE_U8, SHAPE(), &zu8);
    ampc_value *zp3 = t_const(g, AMPC_DTYPE_I8, SHAPE(3), z3);
    ampc_value *zp16 = t_const(g, AMPC_DTYPE_I16, SHAPE(3), z16);
    ampc_value *zpb = t_const(g, AMPC_DTYPE_U16, SHAPE(2, 3, 2), zb);
    ampc_attr_arg ax1[1] = {AMPC_ATTR_I("axis", 1)};
    ampc_attr_arg blk[2] = {AMPC_ATTR_I("axis", -1), AMPC_ATTR_I("block_size", 2)};
    out(g, ampc_op(g, "QuantizeLinear", (ampc_value *[]){x, s1, zpu8}, 3, NULL, 0));
    out(g, ampc_op(g, "QuantizeLinear", (ampc_value *[]){x, s1}, 2, NULL, 0));
    out(g, ampc_op(g, "QuantizeLinear", (ampc_value *[]){x, s3, zp3}, 3, ax1, 1));
    out(g, ampc_op(g, "QuantizeLinear", (ampc_value *[]){x, s3, zp16}, 3, ax1, 1));
    out(g, ampc_op(g, "QuantizeLinear", (ampc_value *[]){x, sb, zpb}, 3, blk, 2));
    ampc_value *xi8 = t_input(g, "xi8", AMPC_DTYPE_I8, SHAPE(2, 3, 4));
    ampc_value *xu8 = t_input(g, "xu8", AMPC_DTYPE_U8, SHAPE(2, 3, 4));
    ampc_value *xi32 = t_input(g, "xi32", AMPC_DTYPE_I32, SHAPE(2, 3, 4));
    ampc_value *xu16 = t_input(g, "xu16", AMPC_DTYPE_U16, SHAPE(2, 3, 4));
    out(g, ampc_op(g, "DequantizeLinear", (ampc_value *[]){xu8, s1, zpu8}, 3, NULL, 0));
    out(g, ampc_op(g, "DequantizeLinear", (ampc_value *[]){xi8, s3, zp3}, 3, ax1, 1));
    out(g, ampc_op(g, "DequantizeLinear", (ampc_value *[]){xi32, s1}, 2, NULL, 0));
    out(g, ampc_op(g, "DequantizeLinear", (ampc_value *[]){xu16, sb, zpb}, 3, blk, 2));
    out(g, ampc_op(g, "QuantizeLinear", (ampc_value *[]){xi32, s3, zp3}, 3, ax1, 1));
}

/* DynamicQuantizeLinear of a small tensor (3 outputs) and of one longer than the block. */
static void build_dql(ampc_graph *g, ampc_dtype t) {
    (void)t;
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(5, 7));
    ampc_value *xl = t_input(g, "xl", AMPC_DTYPE_F32, SHAPE(3000));
    for (int32_t i = 0; i < 2; i++) {
        ampc_value *o[3];
        cr_assert_eq(ampc_op_multi(g, "DynamicQuantizeLinear", i ? &xl : &x, 1, NULL, 0, o, 3), AMPC_OK, "%s",
                     ampc_graph_errors(g));
        for (int32_t j = 0; j < 3; j++) out(g, o[j]);
    }
}

/* Det of one 3x3, a batch of 4x4, 1x1 and 7x7 matrices. */
static void build_det(ampc_graph *g, ampc_dtype t) {
    ampc_value *a = t_input(g, "a", t, SHAPE(3, 3)), *b = t_input(g, "b", t, SHAPE(2, 3, 4, 4));
    ampc_value *c = t_input(g, "c", t, SHAPE(5, 1, 1)), *d = t_input(g, "d", t, SHAPE(2, 7, 7));
    out(g, ampc_op(g, "Det", &a, 1, NULL, 0));
    out(g, ampc_op(g, "Det", &b, 1, NULL, 0));
    out(g, ampc_op(g, "Det", &c, 1, NULL, 0));
    out(g, ampc_op(g, "Det", &d, 1, NULL, 0));
}

/* MelWeightMatrix with constant sizes and band edges as inputs "lo" / "hi" of dtype t (so it does
 * not fold); output f32 and f64. */
static void build_mel(ampc_graph *g, ampc_dtype t) {
    const int64_t bins = 8, len = 64, rate = 8000;
    ampc_value *lo = t_input(g, "lo", t, SHAPE()), *hi = t_input(g, "hi", t, SHAPE());
    for (int32_t i = 0; i < 2; i++) {
        ampc_value *in[5] = {t_const_i64(g, SHAPE(), &bins), t_const_i64(g, SHAPE(), &len),
                             t_const_i64(g, SHAPE(), &rate), lo, hi};
        ampc_attr_arg a[1] = {AMPC_ATTR_I("output_datatype", i ? 11 : 1)};
        out(g, ampc_op(g, "MelWeightMatrix", in, 5, a, 1));
    }
}

/* TfIdfVectorizer over tokens of dtype t (i32 / i64), [2, 9] and [9]: 4 unigrams and 4 bigrams
 * with permuted output coordinates, in every mode, with and without skips and weights. */
static void build_tfidf(ampc_graph *g, ampc_dtype t) {
    static const int64_t counts[2] = {0, 4}, idx[8] = {7, 6, 5, 4, 3, 2, 1, 0};
    static const int64_t pool[12] = {2, 3, -5, 4, 2, 3, 3, 4, 5, -1, 4, 4};
    static const float w[8] = {0.5f, 1.5f, 2, 3, 0.25f, 1, 4, 8};
    ampc_value *x2 = t_input(g, "x", t, SHAPE(2, 9)), *x1 = t_input(g, "x1", t, SHAPE(9));
    static const char *const modes[3] = {"TF", "IDF", "TFIDF"};
    for (int32_t m = 0; m < 3; m++)
        for (int32_t v = 0; v < 3; v++) {
            ampc_attr_arg a[8] = {
                AMPC_ATTR_S("mode", modes[m]),
                AMPC_ATTR_I("min_gram_length", v == 2 ? 2 : 1),
                AMPC_ATTR_I("max_gram_length", v == 0 ? 1 : 2),
                AMPC_ATTR_I("max_skip_count", v == 0 ? 0 : 2),
                AMPC_ATTR_IS("ngram_counts", counts, 2),
                AMPC_ATTR_IS("ngram_indexes", idx, 8),
                AMPC_ATTR_IS("pool_int64s", pool, 12),
                AMPC_ATTR_FS("weights", w, 8),
            };
            out(g, ampc_op(g, "TfIdfVectorizer", v == 1 ? &x1 : &x2, 1, a, m && v != 2 ? 8 : 7));
        }
}

/* ---- NVRTC: every variant compiles ---------------------------------------------------------- */

/* Builds, compiles for sm_80 and checks that every step is a kernel whose entry is in the PTX;
 * returns the number of steps. */
static int32_t compiles(build_fn build, ampc_dtype t) {
    ampc_graph *g = ampc_graph_create("lq");
    build(g, t);
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "building (%s) failed:\n%s", ampc_dtype_name(t),
                 ampc_graph_errors(g));
    ampc_module *m = NULL;
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = ""};
    ampc_status st = ampc_compile(g, &o, &m);
    cr_assert_eq(st, AMPC_OK, "%s: %s\n%s", ampc_dtype_name(t), ampc_status_str(st), ampc_graph_errors(g));
    int32_t steps = ampc_module_step_count(m), entries = 0;
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++) {
        const char *ptx = ampc_module_ptx(m, u);
        cr_assert_not_null(ptx);
        for (const char *p = ptx; (p = strstr(p, ".entry ")); p++) entries++;
    }
    cr_assert_eq(entries, steps, "%s: %d kernels in the PTX for %d steps", ampc_dtype_name(t), entries, steps);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
    return steps;
}

static const ampc_dtype float_types[4] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16, AMPC_DTYPE_F64};

Test(lower_quant, quantize_dequantize_compile) {
    for (int32_t i = 0; i < 4; i++) cr_assert_eq(compiles(build_qdq, float_types[i]), 10);
}

Test(lower_quant, dynamic_quantize_compiles) { cr_assert_eq(compiles(build_dql, AMPC_DTYPE_F32), 2); }

Test(lower_quant, det_compiles) {
    for (int32_t i = 0; i < 4; i++) cr_assert_eq(compiles(build_det, float_types[i]), 4);
}

Test(lower_quant, mel_weight_matrix_compiles) {
    cr_assert_eq(compiles(build_mel, AMPC_DTYPE_F32), 2);
    cr_assert_eq(compiles(build_mel, AMPC_DTYPE_F16), 2);
}

Test(lower_quant, tfidf_compiles) {
    cr_assert_eq(compiles(build_tfidf, AMPC_DTYPE_I64), 9);
    cr_assert_eq(compiles(build_tfidf, AMPC_DTYPE_I32), 9);
}

/* ---- golden CUDA and launch shapes ---------------------------------------------------------- */

static ampc_cg_output *generate(ampc_graph *g) {
    ampc_pipeline_options po = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_cg_output *o = NULL;
    cr_assert_eq(ampc_cg_generate(g, NULL, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    return o;
}

static void expect_src(const char *src, const char *needle) {
    cr_assert(strstr(src, needle), "expected in the CUDA:\n  %s\ngot:\n%s", needle, src);
}

Test(lower_quant, quantize_golden) {
    ampc_graph *g = ampc_graph_create("q");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(2, 3, 4));
    ampc_value *s3 = t_input(g, "s", AMPC_DTYPE_F16, SHAPE(3)), *sb = t_input(g, "sb", AMPC_DTYPE_F32, SHAPE(2, 3, 2));
    const int8_t z3[3] = {-3, 0, 5};
    ampc_value *zp3 = t_const(g, AMPC_DTYPE_I8, SHAPE(3), z3);
    ampc_output(g, ampc_op(g, "QuantizeLinear", (ampc_value *[]){x, s3, zp3}, 3,
                           (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1), "qa");
    ampc_output(g, ampc_op(g, "QuantizeLinear", (ampc_value *[]){x, sb}, 2,
                           (ampc_attr_arg[]){AMPC_ATTR_I("axis", 2), AMPC_ATTR_I("block_size", 2)}, 2), "qb");
    ampc_value *xi = t_input(g, "xi", AMPC_DTYPE_I8, SHAPE(2, 3, 4));
    ampc_output(g, ampc_op(g, "DequantizeLinear", (ampc_value *[]){xi, s3, zp3}, 3,
                           (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1), "dq");
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 3);
    const char *src = o->sources[0];
    /* Per axis 1 of [2, 3, 4]: the parameter of element i is (i / 4) % 3; f16 / f16 divides in
     * f16 (numpy), so the quotient is rounded to f16 before rint. */
    expect_src(src, "const long long q = (i / 4LL) % 3LL;\n");
    expect_src(src, "double v = ampc::to_f64(p0[i]) / ampc::to_f64(p1[q]);\n");
    expect_src(src, "v = (double)__half2float(__double2half(v));\n");
    expect_src(src, "p3[i] = (signed char)ampc::q_sat_rint(rint(v) + (double)(long long)p2[q], -128, 127);\n");
    /* Blocks of 2 along axis 2 of [2, 3, 4]: scale [2, 3, 2]; f16 / f32 divides in f32. */
    expect_src(src, "const long long q = ((i / 4LL) * 2LL + ((i / 1LL) % 4LL) / 2LL) * 1LL + i % 1LL;\n");
    expect_src(src, "v = (double)__double2float_rn(v);\n");
    expect_src(src, "ampc::q_sat_rint(rint(v) + 0.0, 0, 255);\n");
    expect_src(src, "const long long d = (long long)p0[i] - (long long)p2[q];\n");
    expect_src(src, "p3[i] = ampc::cvt<__half>((double)d * ampc::to_f64(p1[q]));\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_quant, dynamic_quantize_golden) {
    ampc_graph *g = ampc_graph_create("d");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3000)), *o3[3];
    cr_assert_eq(ampc_op_multi(g, "DynamicQuantizeLinear", &x, 1, NULL, 0, o3, 3), AMPC_OK);
    for (int32_t j = 0; j < 3; j++) out(g, o3[j]);
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const ampc_rt_step *s = &o->plan.steps[0];
    cr_assert_eq(s->kind, AMPC_RT_STEP_KERNEL);
    cr_assert(s->kernel.grid[0] == 1 && s->kernel.block[0] == 256, "one block of 256: got %u x %u",
              s->kernel.grid[0], s->kernel.block[0]);
    const char *src = o->sources[0];
    expect_src(src, "k0_dynamic_quantize(const float *p0, unsigned char *p1, float *p2, unsigned char *p3)");
    expect_src(src, "for (long long e = t; e < 3000LL; e += 256) {\n");
    expect_src(src, "const float scale = __fdiv_rn(__fsub_rn(smx[0], smn[0]), 255.0f);\n");
    expect_src(src, "p2[0] = scale;\n");
    expect_src(src, "p3[0] = (unsigned char)zpf;\n");
    expect_src(src, "p1[e] = (unsigned char)ampc::q_sat_rint(rint((double)q) + zpf, 0.0, 255.0);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_quant, det_golden_and_limits) {
    ampc_graph *g = ampc_graph_create("det");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(10, 3, 3));
    ampc_output(g, ampc_op(g, "Det", &x, 1, NULL, 0), "d");
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const char *src = o->sources[0];
    expect_src(src, "double a[9];\n");
    expect_src(src, "for (int e = 0; e < 9; e++) a[e] = ampc::to_f64(p0[i * 9LL + e]);\n");
    expect_src(src, "for (int c = 0; c < 3 && det != 0.0; c++) {\n");
    expect_src(src, "p1[i] = ampc::cvt<float>(det);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
    /* A matrix larger than the local array: a clear refusal naming the node. */
    g = ampc_graph_create("big");
    x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(65, 65));
    ampc_output(g, ampc_op(g, "Det", &x, 1, NULL, 0), "d");
    ampc_module *m = NULL;
    ampc_compile_options co = {.archs = &sm80, .n_archs = 1, .cache_dir = ""};
    cr_assert_eq(ampc_compile(g, &co, &m), AMPC_E_UNSUPPORTED);
    cr_assert_null(m);
    t_expect_diag(g, "node 0 (Det 'Det_0'): Det has no generated GPU kernel for 65x65 matrices yet (at most 64x64)");
    ampc_graph_destroy(g);
}

Test(lower_quant, det_of_empty_batch_has_no_step) {
    ampc_graph *g = ampc_graph_create("e");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 3, 3));
    ampc_output(g, ampc_op(g, "Det", &x, 1, NULL, 0), "d");
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 0);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_quant, mel_golden) {
    ampc_graph *g = ampc_graph_create("mel");
    build_mel(g, AMPC_DTYPE_F32);
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 2);
    const char *src = o->sources[0];
    /* [33, 8]: 64 / 2 + 1 spectrogram bins by 8 mel bins. */
    expect_src(src, "i < 264LL;");
    expect_src(src, "const long long bi = i % 8LL, j = i / 8LL;\n");
    expect_src(src, "const double step = (mhi - mlo) / (double)10;\n");
    expect_src(src, "const double pb = floor((double)65 * hz / (double)8000);\n");
    /* a point off the 33 bins (or NaN) becomes no integer: its bands are 0 */
    expect_src(src, "pt[e] = pb >= 0 && pb < 33.0 ? (long long)pb : -1;\n");
    expect_src(src, "if (pt[0] < 0 || pt[1] < 0 || pt[2] < 0) {\n");
    expect_src(src, "ampc::cvt<double>(w);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_quant, tfidf_golden) {
    ampc_graph *g = ampc_graph_create("tf");
    static const int64_t counts[2] = {0, 2}, idx[3] = {2, 0, 1}, pool[4] = {7, 9, 7, 8};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_I64, SHAPE(2, 5));
    ampc_attr_arg a[7] = {AMPC_ATTR_S("mode", "TF"),          AMPC_ATTR_I("min_gram_length", 1),
                          AMPC_ATTR_I("max_gram_length", 2),  AMPC_ATTR_I("max_skip_count", 1),
                          AMPC_ATTR_IS("ngram_counts", counts, 2), AMPC_ATTR_IS("ngram_indexes", idx, 3),
                          AMPC_ATTR_IS("pool_int64s", pool, 4)};
    ampc_output(g, ampc_op(g, "TfIdfVectorizer", &x, 1, a, 7), "y");
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const char *src = o->sources[0];
    /* Trie: root 0 -> 7 (node 1), 9 (node 2); 7 -> 8 (node 3). Children sorted by token:
     * root's run [0, 2) = tokens 7, 9; node 1's run [2, 3) = token 8. Coordinates: unigram 7 is
     * n-gram 1 (-> 2), 9 is n-gram 2 (-> 0), bigram (7, 8) n-gram 3 (-> 1). */
    expect_src(src, "static const int tf_first[5] = {\n        0, 2, 3, 3, 3\n");
    expect_src(src, "static const long long tf_tok[3] = {\n        7LL, 9LL, 8LL\n");
    expect_src(src, "static const int tf_node[3] = {\n        1, 2, 3\n");
    expect_src(src, "static const int tf_coord[4] = {\n        -1, 2, 0, 1\n");
    expect_src(src, "for (long long skip = 1; skip <= 2LL; skip++) {\n");
    expect_src(src, "if (size >= first && tf_coord[node] >= 0) yr[tf_coord[node]] += 1.0f;\n");
    cr_assert_null(strstr(src, "tf_w"), "TF mode needs no weights");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ---- on the GPU: every variant against the reference evaluator ------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random contents: floats in [-2, 2] ([0.25, 2] for "pos*"; "lo" in [0, 300] Hz, "hi" in
 * [3000, 4000] Hz), integers in [-5, 5] ([0, 10] unsigned); 4 of every 5 i8 / u8 / u16 / i32
 * inputs of the quantisers spread over their whole range instead. */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    const bool pos = !strncmp(name, "pos", 3), wide = !strncmp(name, "xi", 2) || !strncmp(name, "xu", 2);
    int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(rng_next(seed) >> 11) / 9007199254740992.0;
        if (ampc_dtype_is_float(t->dtype)) {
            double v = pos ? 0.25 + 1.75 * u : -2 + 4 * u;
            if (!strcmp(name, "lo")) v = 300 * u;
            if (!strcmp(name, "hi")) v = 3000 + 1000 * u;
            ampc_ref_store_f64(t->data, t->dtype, i, v);
        } else if (wide) {
            double lo = t->dtype == AMPC_DTYPE_I8 ? -128 : t->dtype == AMPC_DTYPE_I32 ? -1e6 : 0;
            double hi = t->dtype == AMPC_DTYPE_I8 ? 127 : t->dtype == AMPC_DTYPE_U8 ? 255 : t->dtype == AMPC_DTYPE_U16 ? 65535 : 1e6;
            ampc_ref_store_i64(t->data, t->dtype, i, (int64_t)(lo + u * (hi - lo)));
        } else {
            int64_t v = (int64_t)(u * 11);
            if (ampc_dtype_is_signed(t->dtype)) v -= 5;
            ampc_ref_store_i64(t->data, t->dtype, i, v);
        }
    }
}

static void tolerance(ampc_dtype t, double *rtol, double *atol) {
    switch (t) {
    case AMPC_DTYPE_F64: *rtol = 1e-9, *atol = 1e-12; break;
    case AMPC_DTYPE_F32: *rtol = 1e-5, *atol = 1e-6; break;
    case AMPC_DTYPE_F16: *rtol = 1e-3, *atol = 1e-4; break;
    case AMPC_DTYPE_BF16: *rtol = 8e-3, *atol = 1e-3; break;
    default: *rtol = 0, *atol = 0; break; /* exact */
    }
}

/* Runs the graph of build(t) on the GPU and on the reference evaluator with the same random
 * inputs and compares every output; skips the test when there is no GPU. */
static void on_gpu(build_fn build, ampc_dtype t) {
    ampc_graph *g = ampc_graph_create("gpu");
    build(g, t);
    t_gpu_check c = {.fill = fill, .seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)t,
                     .tolerance = tolerance, .what = ampc_dtype_name(t)};
    t_gpu_vs_reference(g, &c);
}

Test(lower_quant_gpu, quantize_dequantize) {
    for (int32_t i = 0; i < 4; i++) on_gpu(build_qdq, float_types[i]);
}

Test(lower_quant_gpu, dynamic_quantize) { on_gpu(build_dql, AMPC_DTYPE_F32); }

Test(lower_quant_gpu, det) {
    for (int32_t i = 0; i < 4; i++) on_gpu(build_det, float_types[i]);
}

Test(lower_quant_gpu, mel_weight_matrix) {
    on_gpu(build_mel, AMPC_DTYPE_F32);
    on_gpu(build_mel, AMPC_DTYPE_F64);
}

Test(lower_quant_gpu, tfidf) {
    on_gpu(build_tfidf, AMPC_DTYPE_I64);
    on_gpu(build_tfidf, AMPC_DTYPE_I32);
}
