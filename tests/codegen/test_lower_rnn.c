/*
 * test_lower_rnn.c — GPU lowering of the recurrent layers (codegen/lower_rnn.c) and of GridSample,
 * DFT and STFT (codegen/lower_signal.c):
 *   - golden substrings of the generated kernels and of their launch steps (grid, block, shared
 *     memory) for representative attribute combinations;
 *   - NVRTC compiling every lowered variant for compute_80 and sm_80 (no GPU needed);
 *   - the shapes a kernel cannot take keep a diagnostic naming the node;
 *   - on a machine with a GPU, the same graphs executed and compared with the reference
 *     evaluator (skipped without one).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "support.h"

#include "codegen/codegen.h"
#include "ir/ref/ref.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- building -------------------------------------------------------------------------------- */

static void out(ampc_graph *g, ampc_value *v) {
    cr_assert(!ampc_value_is_poisoned(v), "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, v, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
}

/* An i32 sequence_lens constant. */
static ampc_value *lens_i32(ampc_graph *g, const int32_t *v, int64_t n) {
    return t_const(g, AMPC_DTYPE_I32, SHAPE(n), v);
}

/* A recurrent node with every output marked as a graph output. */
static void rnn_node(ampc_graph *g, const char *op, ampc_value *const *in, int32_t n_in,
                     const ampc_attr_arg *at, int32_t n_at, int32_t n_out) {
    ampc_value *o[3] = {0};
    cr_assert_eq(ampc_op_multi(g, op, in, n_in, at, n_at, o, n_out), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    for (int32_t j = 0; j < n_out; j++) out(g, o[j]);
}

/* RNN: bidirectional, bias, initial_h, sequence lengths 3 and 1 of 4, different activations per
 * direction (Relu; LeakyRelu with alpha), clip. */
static ampc_graph *build_rnn(void) {
    ampc_graph *g = ampc_graph_create("rnn");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 2, 3));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2, 5, 3));
    ampc_value *r = t_input(g, "r", AMPC_DTYPE_F32, SHAPE(2, 5, 5));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(2, 10));
    ampc_value *h0 = t_input(g, "h0", AMPC_DTYPE_F32, SHAPE(2, 2, 5));
    static const int32_t lens[2] = {3, 1};
    ampc_value *in[6] = {x, w, r, b, lens_i32(g, lens, 2), h0};
    static const char *const acts[2] = {"Relu", "LeakyRelu"};
    static const float alpha[1] = {0.25f};
    ampc_attr_arg at[5] = {
        AMPC_ATTR_S("direction", "bidirectional"), AMPC_ATTR_I("hidden_size", 5),
        {.name = "activations", .kind = AMPC_ATTR_STRINGS, .strings = acts, .n = 2},
        AMPC_ATTR_FS("activation_alpha", alpha, 1), AMPC_ATTR_F("clip", 3.0f)};
    rnn_node(g, "RNN", in, 6, at, 5, 2);
    return g;
}

/* GRU: forward, default activations, linear_before_reset as given, layout 1. */
static ampc_graph *build_gru_common(ampc_dtype t, int64_t lbr, int64_t layout) {
    ampc_graph *g = ampc_graph_create("gru");
    ampc_value *x = t_input(g, "x", t, layout ? SHAPE(2, 3, 4) : SHAPE(3, 2, 4));
    ampc_value *w = t_input(g, "w", t, SHAPE(1, 18, 4));
    ampc_value *r = t_input(g, "r", t, SHAPE(1, 18, 6));
    ampc_value *b = t_input(g, "b", t, SHAPE(1, 36));
    ampc_value *in[4] = {x, w, r, b};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("linear_before_reset", lbr), AMPC_ATTR_I("layout", layout)};
    rnn_node(g, "GRU", in, 4, at, 2, 2);
    return g;
}
static ampc_graph *build_gru(void) { return build_gru_common(AMPC_DTYPE_F32, 0, 0); }
static ampc_graph *build_gru_lbr(void) { return build_gru_common(AMPC_DTYPE_F32, 1, 1); }
static ampc_graph *build_gru_f16(void) { return build_gru_common(AMPC_DTYPE_F16, 0, 1); }
static ampc_graph *build_gru_f64(void) { return build_gru_common(AMPC_DTYPE_F64, 1, 0); }

/* LSTM: reverse, peepholes, initial_h and initial_c, Y, Y_h and Y_c. */
static ampc_graph *build_lstm_common(bool input_forget) {
    ampc_graph *g = ampc_graph_create("lstm");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2, 4));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(1, 20, 4));
    ampc_value *r = t_input(g, "r", AMPC_DTYPE_F32, SHAPE(1, 20, 5));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(1, 40));
    ampc_value *h0 = t_input(g, "h0", AMPC_DTYPE_F32, SHAPE(1, 2, 5));
    ampc_value *c0 = t_input(g, "c0", AMPC_DTYPE_F32, SHAPE(1, 2, 5));
    ampc_value *p = t_input(g, "p", AMPC_DTYPE_F32, SHAPE(1, 15));
    static const int32_t lens[2] = {0, 3};
    ampc_value *in[8] = {x, w, r, b, lens_i32(g, lens, 2), h0, c0, p};
    ampc_attr_arg at[2] = {AMPC_ATTR_S("direction", "reverse"),
                           AMPC_ATTR_I("input_forget", input_forget)};
    rnn_node(g, "LSTM", in, 8, at, 2, 3);
    return g;
}
static ampc_graph *build_lstm(void) { return build_lstm_common(false); }
static ampc_graph *build_lstm_if(void) { return build_lstm_common(true); }

/* Wide layers, several blocks a step: a bidirectional GRU with linear_before_reset 0, hidden 600
 * (the state comes to shared memory in chunks) and 33 entries (two tiles of the batch) of
 * lengths 5, 0, 3, ...; an LSTM of layout 1, hidden 40, 35 entries, bidirectional, with Y_h and
 * Y_c. */
static ampc_graph *build_gru_wide(void) {
    ampc_graph *g = ampc_graph_create("gru_wide");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(5, 33, 7));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2, 1800, 7));
    ampc_value *r = t_input(g, "r", AMPC_DTYPE_F32, SHAPE(2, 1800, 600));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(2, 3600));
    int32_t lens[33];
    for (int32_t i = 0; i < 33; i++) lens[i] = (5 * i + 5) % 6;
    ampc_value *in[5] = {x, w, r, b, lens_i32(g, lens, 33)};
    ampc_attr_arg at[2] = {AMPC_ATTR_S("direction", "bidirectional"), AMPC_ATTR_I("hidden_size", 600)};
    rnn_node(g, "GRU", in, 5, at, 2, 2);
    return g;
}
static ampc_graph *build_lstm_wide(void) {
    ampc_graph *g = ampc_graph_create("lstm_wide");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(35, 4, 6));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2, 160, 6));
    ampc_value *r = t_input(g, "r", AMPC_DTYPE_F32, SHAPE(2, 160, 40));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(2, 320));
    ampc_value *h0 = t_input(g, "h0", AMPC_DTYPE_F32, SHAPE(35, 2, 40));
    int32_t lens[35];
    for (int32_t i = 0; i < 35; i++) lens[i] = 4 - i % 5;
    ampc_value *in[6] = {x, w, r, b, lens_i32(g, lens, 35), h0};
    ampc_attr_arg at[2] = {AMPC_ATTR_S("direction", "bidirectional"), AMPC_ATTR_I("layout", 1)};
    rnn_node(g, "LSTM", in, 6, at, 2, 3);
    return g;
}

/* An LSTM whose product runs on the tensor cores (f32 under TF32; f16 and bf16 always): 16
 * entries (a tile of 8s), hidden 72 (18 blocks of 4 units, the last partly past it; its k steps
 * over 8 warps), bidirectional. */
static ampc_graph *build_lstm_tc_of(ampc_dtype t) {
    ampc_graph *g = ampc_graph_create(t == AMPC_DTYPE_F32 ? "lstm_tc" : "lstm_tc_half");
    ampc_value *x = t_input(g, "x", t, SHAPE(6, 16, 5));
    ampc_value *w = t_input(g, "w", t, SHAPE(2, 288, 5));
    ampc_value *r = t_input(g, "r", t, SHAPE(2, 288, 72));
    ampc_value *b = t_input(g, "b", t, SHAPE(2, 576));
    ampc_value *in[4] = {x, w, r, b};
    ampc_attr_arg at[2] = {AMPC_ATTR_S("direction", "bidirectional"), AMPC_ATTR_I("hidden_size", 72)};
    rnn_node(g, "LSTM", in, 4, at, 2, 3);
    return g;
}
static ampc_graph *build_lstm_tc(void) { return build_lstm_tc_of(AMPC_DTYPE_F32); }
static ampc_graph *build_lstm_tc_f16(void) { return build_lstm_tc_of(AMPC_DTYPE_F16); }
static ampc_graph *build_lstm_tc_bf16(void) { return build_lstm_tc_of(AMPC_DTYPE_BF16); }

/* GridSample: X [1, 2, 3, 4] at a grid [1, 3, 2, 2] (or 3-D), one node per mode. */
static ampc_graph *build_grid_common(const char *mode, const char *pad, int64_t align, bool vol) {
    ampc_graph *g = ampc_graph_create("grid");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, vol ? SHAPE(1, 2, 2, 3, 4) : SHAPE(1, 2, 3, 4));
    ampc_value *gr = t_input(g, "grid", AMPC_DTYPE_F32, vol ? SHAPE(1, 2, 3, 2, 3) : SHAPE(1, 3, 2, 2));
    ampc_value *in[2] = {x, gr};
    ampc_attr_arg at[3] = {AMPC_ATTR_S("mode", mode), AMPC_ATTR_S("padding_mode", pad),
                           AMPC_ATTR_I("align_corners", align)};
    out(g, ampc_op(g, "GridSample", in, 2, at, 3));
    return g;
}
static ampc_graph *build_grid_linear(void) { return build_grid_common("linear", "zeros", 0, false); }
static ampc_graph *build_grid_nearest(void) { return build_grid_common("nearest", "border", 1, false); }
static ampc_graph *build_grid_cubic(void) { return build_grid_common("cubic", "reflection", 0, false); }
static ampc_graph *build_grid_3d(void) { return build_grid_common("linear", "reflection", 1, true); }
static ampc_graph *build_grid_3d_nearest(void) { return build_grid_common("nearest", "zeros", 0, true); }

/* DFT variants along axis 1 of [2, 8, c]. */
static ampc_graph *build_dft_common(int64_t cin, int64_t inverse, int64_t onesided, int64_t len) {
    ampc_graph *g = ampc_graph_create("dft");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 8, cin));
    int64_t ax[1] = {1}, ln[1] = {len};
    ampc_value *in[3] = {x, len ? ampc_const_i64s(g, ln, 1) : NULL, ampc_const_i64s(g, ax, 1)};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("inverse", inverse), AMPC_ATTR_I("onesided", onesided)};
    out(g, ampc_op(g, "DFT", in, 3, at, 2));
    return g;
}
static ampc_graph *build_dft_real(void) { return build_dft_common(1, 0, 0, 0); }
static ampc_graph *build_dft_onesided(void) { return build_dft_common(1, 0, 1, 6); }
static ampc_graph *build_dft_inverse(void) { return build_dft_common(2, 1, 0, 10); }
static ampc_graph *build_dft_irfft(void) { return build_dft_common(2, 1, 1, 0); }

/* STFT of [2, 16, c] signals, frame_step 3, with a window (length 6) or frame_length 5. */
static ampc_graph *build_stft_common(int64_t cin, bool window, int64_t onesided) {
    ampc_graph *g = ampc_graph_create("stft");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 16, cin));
    int64_t st[1] = {3}, fl[1] = {5};
    ampc_value *w = window ? t_input(g, "win", AMPC_DTYPE_F32, SHAPE(6)) : NULL;
    ampc_value *in[4] = {x, ampc_const_i64s(g, st, 1), w, window ? NULL : ampc_const_i64s(g, fl, 1)};
    ampc_attr_arg at[1] = {AMPC_ATTR_I("onesided", onesided)};
    out(g, ampc_op(g, "STFT", in, 4, at, 1));
    return g;
}
static ampc_graph *build_stft_window(void) { return build_stft_common(1, true, 1); }
static ampc_graph *build_stft_complex(void) { return build_stft_common(2, false, 0); }

/* ---- generating ------------------------------------------------------------------------------ */

/* g's plan under the compile's math `math` (gen: TF32, the default). */
static ampc_cg_output *gen_math(ampc_graph *g, uint8_t math) {
    ampc_pipeline_options po = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_cg_options co = {.math = math};
    ampc_cg_output *o = NULL;
    cr_assert_eq(ampc_cg_generate(g, &co, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    return o;
}

static ampc_cg_output *gen(ampc_graph *g) { return gen_math(g, AMPC_RT_MATH_TF32); }

static const char *source(const ampc_cg_output *o) {
    cr_assert_eq(o->n_units, 1, "one unit expected, got %d", o->n_units);
    return o->sources[0];
}

/* The plan of a recurrent layer: its projection (a GEMM step, `gemm`) then `launches` steps of
 * one kernel, the launch index its last argument; returns the first of them. */
static const ampc_rt_step *layer_steps(const ampc_cg_output *o, const ampc_rt_gemm **gemm,
                                       int32_t launches) {
    cr_assert_eq(o->plan.n_steps, 1 + launches, "a GEMM and %d launches, got %d steps", launches,
                 o->plan.n_steps);
    cr_assert_eq(o->plan.steps[0].kind, AMPC_RT_STEP_GEMM);
    *gemm = &o->plan.steps[0].gemm;
    const ampc_rt_step *s = &o->plan.steps[1];
    for (int32_t i = 0; i < launches; i++) {
        const ampc_rt_kernel *k = &o->plan.steps[1 + i].kernel;
        cr_assert_eq(o->plan.steps[1 + i].kind, AMPC_RT_STEP_KERNEL);
        cr_assert_str_eq(k->name, s->kernel.name);
        cr_assert_eq(k->n_args, s->kernel.n_args);
        cr_assert_eq(k->args[k->n_args - 1].kind, AMPC_RT_ARG_I32);
        cr_expect_eq(k->args[k->n_args - 1].i32, i, "launch %d has rep %d", i,
                     k->args[k->n_args - 1].i32);
    }
    return s;
}

#define EXPECT_SRC(cu, s) cr_expect(strstr((cu), (s)), "missing \"%s\" in:\n%s", (s), (cu))

/* Compiles g with NVRTC for compute_80 and sm_80 (no cache), in full f32 (compile) or with TF32
 * for f32 matmuls (compile_math). */
static ampc_module *compile_math(ampc_graph *g, bool tf32) {
    static const int32_t sm80 = 80;
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .no_tf32 = !tf32};
    ampc_module *m = NULL;
    ampc_status st = ampc_compile(g, &o, &m);
    cr_assert_eq(st, AMPC_OK, "%s: %s", ampc_status_str(st), ampc_graph_errors(g));
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++)
        cr_assert(ampc_module_ptx(m, u) && strstr(ampc_module_ptx(m, u), ".target sm_80"));
    return m;
}
static ampc_module *compile(ampc_graph *g) { return compile_math(g, false); }

/* ---- golden: recurrent layers ---------------------------------------------------------------- */

Test(lower_rnn, rnn_projects_once_then_launches_a_kernel_each_step) {
    ampc_graph *g = build_rnn();
    ampc_cg_output *o = gen(g);
    const ampc_rt_gemm *p;
    const ampc_rt_step *s = layer_steps(o, &p, 4);
    /* X [4 x 2, 3] times each direction's W^T [3, 5], in f32, TF32 as the compile asked */
    cr_expect(p->m == 8 && p->n == 5 && p->k == 3 && p->batch == 2 && p->trans_b && !p->trans_a,
              "m %lld n %lld k %lld batch %lld", (long long)p->m, (long long)p->n, (long long)p->k,
              (long long)p->batch);
    cr_expect(p->stride_a == 0 && p->stride_b == 15 && p->stride_d == 40);
    cr_expect(p->dtype_ab == AMPC_DTYPE_F32 && p->dtype_cd == AMPC_DTYPE_F32);
    cr_expect_eq(p->math, AMPC_RT_MATH_TF32);
    /* a block a unit (5), a direction (2), the batch's one tile */
    cr_expect(s->kernel.grid[0] == 5 && s->kernel.grid[1] == 2 && s->kernel.grid[2] == 1,
              "grid %u %u %u", s->kernel.grid[0], s->kernel.grid[1], s->kernel.grid[2]);
    cr_expect_eq(s->kernel.block[0], 256u);
    cr_expect_eq(s->kernel.smem, (2u * 5u + 1u * 2u) * 4u, "the state's 2 x 5, 1 row x 2 sums");
    const char *cu = source(o);
    EXPECT_SRC(cu, "const int rep) {");
    EXPECT_SRC(cu, "static const long long lens_[2] = {3LL,1LL,};");
    EXPECT_SRC(cu, "const bool rev = dir == 1;");
    EXPECT_SRC(cu, "ampc::rnn_recurrent<256, 2, 1>(acc, hs, 5LL, p1 + (long long)dir * 25LL, 5LL, 1LL, 1, 0, j0, b0, 2LL, src);");
    /* the activations differ per direction; clip bounds their input */
    EXPECT_SRC(cu, "x = fmin(fmax(x, (float)-3), (float)3); return dir == 0 ? (x > (float)0 ? x : "
                   "(float)0) : (x >= (float)0 ? x : (float)0.25 * x);");
    /* (Wb + Xt . W) + (Rb + Ht-1 . R); the state [dirs, batch, H], Y [seq, dirs, batch, H] */
    EXPECT_SRC(cu, "const float pi = (ampc::ld(p2, wbo + 0LL + j) + p0[xr + 0LL + j]) + "
                   "(ampc::ld(p2, wbo + 5LL + j) + acc[(0LL + u) * 2LL + bb]);");
    EXPECT_SRC(cu, "auto yo_of = [=](long long b, long long t) { return ((t * 2LL + dir) * 2LL + b) * 5LL; };");
    EXPECT_SRC(cu, "const long long xr = ((long long)dir * 8LL + t * 2LL + b) * 5LL;");
    EXPECT_SRC(cu, "s == 0 ? ampc::ld(p3, so_of(b) + j) : hp[");
    /* past the length: Y's zeros at time s, Y_h zero for length 0; else Y_h at the last step */
    EXPECT_SRC(cu, "ampc::st(p5, yo_of(b, s) + j, (float)0);");
    EXPECT_SRC(cu, "if (s == len - 1) ampc::st(p6, so_of(b) + j, v);");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_rnn, gru_phases_and_linear_before_reset) {
    ampc_graph *g = build_gru();
    ampc_cg_output *o = gen(g);
    const ampc_rt_gemm *p;
    const ampc_rt_step *s = layer_steps(o, &p, 6); /* two phases a step */
    cr_expect_eq(s->kernel.grid[0], 6u);
    cr_expect_eq(s->kernel.smem, (2u * 6u + 2u * 2u) * 4u, "state 2 x 6, rows z and r x 2");
    const char *cu = source(o);
    EXPECT_SRC(cu, "const long long s = rep >> 1; const int ph = rep & 1;");
    EXPECT_SRC(cu, "ampc::rnn_recurrent<256, 2, 1>(acc, hs, 6LL, p1 + (long long)dir * 108LL, 6LL, 1LL, ph ? 1 : 2, ph ? 2 : 0, j0, b0, 2LL, src);");
    EXPECT_SRC(cu, "p5[st_] = af(pr) * h_prev(b, j);");
    EXPECT_SRC(cu, "const float hh = hx + rec, z = p4[st_];");
    EXPECT_SRC(cu, "const float v = rnd(((float)1 - z) * ag(hh) + z * h_prev(b, j));");
    EXPECT_SRC(cu, "auto af = [=](float x) -> float { return ((float)1 / ((float)1 + ampc::m_exp(-x))); };");
    EXPECT_SRC(cu, "auto ag = [=](float x) -> float { return ampc::m_tanh(x); };");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = build_gru_lbr();
    o = gen(g);
    layer_steps(o, &p, 3);
    cu = source(o);
    cr_expect_null(strstr(cu, "ph ?"), "%s", cu);
    EXPECT_SRC(cu, "const float z = af(pz), hh = hx + af(pr) * rec;");
    /* layout 1: X [batch, seq, I], Y [batch, seq, dirs, H], states [batch, dirs, H] */
    EXPECT_SRC(cu, "const long long xr = ((long long)dir * 6LL + b * 3LL + t) * 18LL;");
    EXPECT_SRC(cu, "auto yo_of = [=](long long b, long long t) { return ((b * 3LL + t) * 1LL + dir) * 6LL; };");
    EXPECT_SRC(cu, "auto so_of = [=](long long b) { return (b * 1LL + dir) * 6LL; };");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_rnn, half_precision_rounds_the_state_every_step) {
    ampc_graph *g = build_gru_f16();
    ampc_cg_output *o = gen(g);
    const ampc_rt_gemm *p;
    layer_steps(o, &p, 6);
    /* f16 operands, the projection kept in f32 */
    cr_expect(p->dtype_ab == AMPC_DTYPE_F16 && p->dtype_cd == AMPC_DTYPE_F32);
    EXPECT_SRC(source(o), "auto rnd = [](float v) -> float { return ampc::to_f32(ampc::cvt<__half>(v)); };");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
    g = build_gru_f64();
    o = gen(g);
    const ampc_rt_step *s = layer_steps(o, &p, 3);
    cr_expect(p->dtype_cd == AMPC_DTYPE_F64 && p->math == AMPC_RT_MATH_DEFAULT);
    cr_expect_eq(s->kernel.smem, (2u * 6u + 3u * 2u) * 8u, "f64 state and sums");
    EXPECT_SRC(source(o), "auto rnd = [](double v) -> double { return v; };");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_rnn, lstm_peepholes_and_input_forget) {
    ampc_graph *g = build_lstm();
    ampc_cg_output *o = gen(g);
    const ampc_rt_gemm *p;
    const ampc_rt_step *s = layer_steps(o, &p, 3);
    cr_expect_eq(s->kernel.smem, (2u * 5u + 4u * 2u) * 4u, "state 2 x 5, rows i o f c x 2");
    const char *cu = source(o);
    EXPECT_SRC(cu, "const bool rev = true;");
    EXPECT_SRC(cu, "static const long long lens_[2] = {0LL,3LL,};");
    EXPECT_SRC(cu, "const float cprev = s == 0 ? ampc::ld(p5, so_of(b) + j) : p7[st_];");
    EXPECT_SRC(cu, "const float ig = af(pi + ampc::ld(p3, po_) * cprev);");
    EXPECT_SRC(cu, "const float fg = af(pf + ampc::ld(p3, po_ + 10LL) * cprev);");
    EXPECT_SRC(cu, "const float og = af(po + ampc::ld(p3, po_ + 5LL) * cell);");
    EXPECT_SRC(cu, "const float v = rnd(og * ah(cell));");
    EXPECT_SRC(cu, "if (s == len - 1) ampc::st(p10, so_of(b) + j, cell);");
    EXPECT_SRC(cu, "if (len == 0 && s == 0) ampc::st(p10, so_of(b) + j, (float)0);");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = build_lstm_if();
    o = gen(g);
    EXPECT_SRC(source(o), "const float fg = (float)1 - ig;");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* The wide GRU's plan under `math`: 10 launches of a grid of (blocks, 2 directions, 2 tiles of
 * the batch), `smem` bytes of shared memory, the product called as `call`. */
static void expect_wide_gru(uint8_t math, uint32_t blocks, uint32_t smem, const char *call) {
    ampc_graph *g = build_gru_wide();
    ampc_cg_output *o = gen_math(g, math);
    const ampc_rt_gemm *p;
    const ampc_rt_step *s = layer_steps(o, &p, 10);
    cr_expect(s->kernel.grid[0] == blocks && s->kernel.grid[1] == 2 && s->kernel.grid[2] == 2,
              "grid %u %u %u", s->kernel.grid[0], s->kernel.grid[1], s->kernel.grid[2]);
    cr_expect_eq(s->kernel.smem, smem);
    EXPECT_SRC(source(o), call);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_rnn, wide_layers_split_units_and_batch_and_stream_the_state) {
    /* full f32: 2 directions x 600 units x 2 tiles of the batch: 10 units a block, about 256
     * blocks; the state of 32 entries in chunks of 512 of its 600 units */
    expect_wide_gru(AMPC_RT_MATH_DEFAULT, 60, (32u * 512u + 20u * 32u) * 4u,
                    "ampc::rnn_recurrent<256, 32, 2>(acc, hs, 512LL, ");
    /* TF32 (the default): the tensor cores, 16 units a block (rows a multiple of 16 in both
     * phases), about 128 blocks; the state's rows 516 values apart */
    expect_wide_gru(AMPC_RT_MATH_TF32, 38, (32u * 516u + 32u * 32u) * 4u,
                    "ampc::rnn_recurrent_tc<256, 32>(acc, hs, 512LL, ");
}

Test(lower_rnn, too_many_time_steps_for_a_launch_each_names_the_node) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(70000, 1, 1));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(1, 1, 1));
    ampc_value *r = t_input(g, "r", AMPC_DTYPE_F32, SHAPE(1, 1, 1));
    ampc_value *in[3] = {x, w, r};
    out(g, ampc_op(g, "RNN", in, 3, NULL, 0));
    ampc_pipeline_options po = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_cg_options co = {0};
    ampc_cg_output *o = NULL;
    cr_assert_eq(ampc_cg_generate(g, &co, &o), AMPC_E_UNSUPPORTED);
    t_expect_diag(g, "(RNN 'RNN_0'): RNN over 70000 time steps: the GPU runs a layer as one launch "
                     "a step, at most 65536");
    ampc_graph_destroy(g);
}

/* ---- golden: GridSample, DFT, STFT ----------------------------------------------------------- */

Test(lower_rnn, grid_sample_modes) {
    ampc_graph *g = build_grid_linear();
    ampc_cg_output *o = gen(g);
    const char *cu = source(o);
    EXPECT_SRC(cu, "v1 = __dsub_rn(__dmul_rn(v1 + 1, 4), 1.0) / 2;"); /* W = 4 (dim 1) is grid component 0 */
    EXPECT_SRC(cu, "double v0 = ampc::cvt<double>(p1[go + 1]);");
    EXPECT_SRC(cu, "v0 = (double)(float)v0;");
    EXPECT_SRC(cu, "if (i0 < 0 || i0 >= 3LL) continue;");
    EXPECT_SRC(cu, "acc += (float)(1.0 * w0[c0] * w1[c1]) * ampc::ld(p0, base + ((0LL) * 3LL + i0) * 4LL + i1);");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = build_grid_nearest();
    o = gen(g);
    cu = source(o);
    EXPECT_SRC(cu, "v0 = (v0 + 1) / 2 * 2;");
    EXPECT_SRC(cu, "v0 = rint(v0);");
    EXPECT_SRC(cu, "if (v0 < 0 || v0 > 2) v0 = v0 < 0 ? 0 : v0 > 2 ? 2 : v0;");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = build_grid_cubic();
    o = gen(g);
    cu = source(o);
    EXPECT_SRC(cu, "const double A = -0.75;");
    EXPECT_SRC(cu, "if (v1 < -0.5 || v1 > 3.5) v1 = refl(v1, -0.5, 3.5);");
    EXPECT_SRC(cu, "i1 = (long long)refl((double)i1, -0.5, 3.5);");
    EXPECT_SRC(cu, "for (int c1 = 0; c1 < 4; c1++)");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = build_grid_3d_nearest();
    o = gen(g);
    /* 3-D nearest rounds half away from zero, as the reference */
    EXPECT_SRC(source(o), "v2 = v2 >= 0 ? floor(v2 + 0.5) : ceil(v2 - 0.5);");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_rnn, dft_direct_sums) {
    ampc_graph *g = build_dft_onesided();
    ampc_cg_output *o = gen(g);
    const char *cu = source(o);
    cr_expect_eq(o->plan.n_steps, 1);
    cr_expect_eq(o->plan.steps[0].kernel.grid[0], 1u);
    EXPECT_SRC(cu, "for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < 8LL;");
    EXPECT_SRC(cu, "const long long m = (kb * t) % 6LL;");
    EXPECT_SRC(cu, "sincospif((float)(2 * m) / (float)6, &sn, &cs);");
    EXPECT_SRC(cu, "const float wr = cs, wi = -sn;");
    EXPECT_SRC(cu, "for (long long t = 0; t < 6LL; t++)"); /* 8 points truncated to 6 */
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = build_dft_inverse();
    o = gen(g);
    cu = source(o);
    EXPECT_SRC(cu, "const float wr = cs, wi = sn;");
    EXPECT_SRC(cu, "are * (float)0.10000000000000001");
    EXPECT_SRC(cu, "if (src >= 8LL) continue;"); /* zero-padded from 8 to 10 */
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);

    g = build_dft_irfft();
    o = gen(g);
    cu = source(o);
    /* 8 bins of a one-sided spectrum: length 14, bins 8..13 mirrored */
    EXPECT_SRC(cu, "if (t >= 8LL) { src = 14LL - t; sg = (float)-1; }");
    EXPECT_SRC(cu, "const float xi = sg * ampc::ld(p0, at + 1);");
    EXPECT_SRC(cu, "(void)aim;");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_rnn, stft_frames_and_window) {
    ampc_graph *g = build_stft_window();
    ampc_cg_output *o = gen(g);
    const char *cu = source(o);
    /* frames (16 - 6) / 3 + 1 = 4, bins 6 / 2 + 1 = 4 */
    EXPECT_SRC(cu, "const long long kb = i % 4LL, bf = i / 4LL;");
    EXPECT_SRC(cu, "const long long at = (b * 16LL + f * 3LL + t) * 1LL;");
    EXPECT_SRC(cu, "const float w = (float)ampc::ld(p1, t);");
    EXPECT_SRC(cu, "const long long m = (kb * t) % 6LL;");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* ---- NVRTC compiles every variant ------------------------------------------------------------ */

static ampc_graph *(*const all_builds[])(void) = {
    build_rnn,         build_gru,           build_gru_lbr,      build_gru_f16,
    build_gru_f64,     build_lstm,          build_lstm_if,      build_gru_wide,
    build_lstm_wide,   build_lstm_tc,       build_lstm_tc_f16,  build_lstm_tc_bf16,
    build_grid_linear,
    build_grid_nearest, build_grid_cubic,   build_grid_3d,      build_grid_3d_nearest,
    build_dft_real,    build_dft_onesided,  build_dft_inverse,  build_dft_irfft,
    build_stft_window, build_stft_complex,
};

Test(lower_rnn, every_variant_compiles_with_nvrtc, .timeout = 600) {
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(all_builds); i++) {
        ampc_graph *g = all_builds[i]();
        ampc_module *m = compile(g);
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
    /* the tensor cores: under TF32 the wide GRU (two phases) and the LSTM; f16 and bf16 always */
    ampc_graph *(*const tc[4])(void) = {build_gru_wide, build_lstm_tc, build_lstm_tc_f16,
                                        build_lstm_tc_bf16};
    static const char *const mma[4] = {"m16n8k8.row.col.f32.tf32.tf32.f32",
                                       "m16n8k8.row.col.f32.tf32.tf32.f32",
                                       "m16n8k16.row.col.f32.f16.f16.f32",
                                       "m16n8k16.row.col.f32.bf16.bf16.f32"};
    for (int32_t i = 0; i < 4; i++) {
        ampc_graph *g = tc[i]();
        ampc_module *m = compile_math(g, i < 2);
        cr_expect(strstr(ampc_module_ptx(m, 0), mma[i]), "%s: no %s in the PTX", g->name, mma[i]);
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
}

/* ---- on a GPU: results against the reference evaluator --------------------------------------- */

/* Random floats in multiples of 1/64 in [-1, 1) (exact in every float dtype). */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        *seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
        ampc_ref_store_f64(t->data, t->dtype, i, (double)((*seed >> 11) % 128) / 64.0 - 1.0);
    }
}

/* Runs build()'s graph on the GPU and on the reference evaluator with random inputs and
 * compares every output (f16/bf16 within 1e-2); outputs are poisoned first, so an element no
 * kernel writes fails. Skips without a GPU. */
/* fill, but R (the input named "r") 32 times smaller: a recurrence that damps a difference
 * rather than amplifying it step after step, as trained layers do, so that TF32's rounding of
 * the state stays at its own size (R of a hidden size of 600 filled as the rest grows one about
 * 14 times a step). Exact in TF32, f16 and bf16. */
static void fill_damped(ampc_tensor *t, const char *name, uint64_t *seed) {
    fill(t, name, seed);
    if (strcmp(name, "r") != 0) return;
    for (int64_t i = 0; i < ampc_shape_numel(&t->shape); i++)
        ampc_ref_store_f64(t->data, t->dtype, i, ampc_ref_load_f64(t->data, t->dtype, i) / 32);
}

static void run_math(ampc_graph *(*build)(void), bool tf32, double rtol, double atol) {
    ampc_graph *g = build();
    t_gpu_check c = {.fill = tf32 ? fill_damped : fill, .seed = 0x9e3779b97f4a7c15ull,
                     .rtol = rtol, .atol = atol, .tf32 = tf32, .what = g->name};
    t_gpu_vs_reference(g, &c);
}
static void run_vs_reference(ampc_graph *(*build)(void), double rtol, double atol) {
    run_math(build, false, rtol, atol);
}

Test(lower_rnn, gpu_rnn_matches_the_reference) { run_vs_reference(build_rnn, 1e-3, 1e-4); }
Test(lower_rnn, gpu_gru_matches_the_reference) { run_vs_reference(build_gru, 1e-3, 1e-4); }
Test(lower_rnn, gpu_gru_lbr_matches_the_reference) { run_vs_reference(build_gru_lbr, 1e-3, 1e-4); }
Test(lower_rnn, gpu_gru_f16_matches_the_reference) { run_vs_reference(build_gru_f16, 1e-3, 1e-4); }
Test(lower_rnn, gpu_gru_f64_matches_the_reference) { run_vs_reference(build_gru_f64, 1e-9, 1e-12); }
Test(lower_rnn, gpu_lstm_matches_the_reference) { run_vs_reference(build_lstm, 1e-3, 1e-4); }
Test(lower_rnn, gpu_lstm_input_forget_matches_the_reference) { run_vs_reference(build_lstm_if, 1e-3, 1e-4); }
Test(lower_rnn, gpu_wide_layers_match_the_reference) {
    run_vs_reference(build_gru_wide, 1e-3, 1e-4);
    run_vs_reference(build_lstm_wide, 1e-3, 1e-4);
}
/* The product on the tensor cores (rnn_recurrent_tc): f32 under TF32 (the default math) within
 * TF32's rounding of the state (the inputs are exact in TF32); f16 and bf16, which round
 * nothing more, at the f16/bf16 tolerances. */
Test(lower_rnn, gpu_tensor_core_products_match_the_reference) {
    run_math(build_gru_wide, true, 1e-2, 1e-3);
    run_math(build_lstm_tc, true, 1e-2, 1e-3);
    run_vs_reference(build_lstm_tc_f16, 1e-3, 1e-4);
    run_vs_reference(build_lstm_tc_bf16, 1e-3, 1e-4);
}
Test(lower_rnn, gpu_grid_sample_matches_the_reference) {
    run_vs_reference(build_grid_linear, 1e-3, 1e-4);
    run_vs_reference(build_grid_nearest, 1e-3, 1e-4);
    run_vs_reference(build_grid_cubic, 1e-3, 1e-4);
    run_vs_reference(build_grid_3d, 1e-3, 1e-4);
    run_vs_reference(build_grid_3d_nearest, 1e-3, 1e-4);
}
Test(lower_rnn, gpu_dft_matches_the_reference) {
    run_vs_reference(build_dft_real, 1e-3, 1e-4);
    run_vs_reference(build_dft_onesided, 1e-3, 1e-4);
    run_vs_reference(build_dft_inverse, 1e-3, 1e-4);
    run_vs_reference(build_dft_irfft, 1e-3, 1e-4);
}
Test(lower_rnn, gpu_stft_matches_the_reference) {
    run_vs_reference(build_stft_window, 1e-3, 1e-4);
    run_vs_reference(build_stft_complex, 1e-3, 1e-4);
}

/* ---- hostile grid points --------------------------------------------------------------------- */

/* Grid values no sampling can use as they are: NaN, the infinities, points 1e30 and 3e9 beyond
 * the input. */
static const double hostile[] = {NAN, INFINITY, -INFINITY, 1e30, -1e30, -3e9, 3e9};

/* GridSample of every mode, padding and align_corners (2-D), nearest and linear (3-D) and one f64
 * node, all reading the hostile grids. */
static ampc_graph *build_grid_hostile(void) {
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const pads[] = {"zeros", "border", "reflection"};
    ampc_graph *g = ampc_graph_create("grid_hostile");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 2, 3, 4));
    ampc_value *gr = t_input(g, "grid", AMPC_DTYPE_F32, SHAPE(1, 4, 5, 2));
    ampc_value *x3 = t_input(g, "x3", AMPC_DTYPE_F32, SHAPE(1, 2, 2, 3, 4));
    ampc_value *gr3 = t_input(g, "grid3", AMPC_DTYPE_F32, SHAPE(1, 2, 3, 4, 3));
    ampc_value *xd = t_input(g, "xd", AMPC_DTYPE_F64, SHAPE(1, 1, 3, 4));
    ampc_value *grd = t_input(g, "grid_d", AMPC_DTYPE_F64, SHAPE(1, 4, 5, 2));
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 3; p++)
            for (int64_t a = 0; a < 2; a++) {
                ampc_attr_arg at[3] = {AMPC_ATTR_S("mode", modes[m]),
                                       AMPC_ATTR_S("padding_mode", pads[p]),
                                       AMPC_ATTR_I("align_corners", a)};
                out(g, ampc_op(g, "GridSample", (ampc_value *[]){x, gr}, 2, at, 3));
                if (m < 2 && a == 0)
                    out(g, ampc_op(g, "GridSample", (ampc_value *[]){x3, gr3}, 2, at, 3));
            }
    ampc_attr_arg ad[3] = {AMPC_ATTR_S("mode", "cubic"), AMPC_ATTR_S("padding_mode", "reflection"),
                           AMPC_ATTR_I("align_corners", 1)};
    out(g, ampc_op(g, "GridSample", (ampc_value *[]){xd, grd}, 2, ad, 3));
    return g;
}

/* Whether some unit of o contains s. */
static bool any_unit_has(const ampc_cg_output *o, const char *s) {
    for (int32_t u = 0; u < o->n_units; u++)
        if (strstr(o->sources[u], s)) return true;
    return false;
}

/* Before any coordinate becomes an integer, a point that is NaN or more than 2^40 pixels out after
 * padding reads zeros (as the reference), and every variant compiles with NVRTC. */
Test(lower_rnn, hostile_grid_points_read_zeros_and_compile, .timeout = 600) {
    ampc_graph *g = build_grid_hostile();
    ampc_cg_output *o = gen(g);
    cr_expect(any_unit_has(o, "lost = lost || !(fabs(v0) <= 1099511627776.0);"));
    cr_expect(any_unit_has(o, "lost = lost || !(fabs(v2) <= 1099511627776.0);"), "3-D");
    cr_expect(any_unit_has(o, "if (lost) {\n"));
    cr_expect(any_unit_has(o, "ampc::st(p2, i, (float)0);"));
    cr_expect(any_unit_has(o, "ampc::st(p2, i, (double)0);"));
    cr_expect(any_unit_has(o, "r = __dsub_rn(dx, __dmul_rn(q, rng));"), "reflection, no fma");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
    g = build_grid_hostile();
    ampc_module_destroy(compile(g));
    ampc_graph_destroy(g);
}

/* Grids: every fourth component from `hostile` (in turn), the others ordinary points in [-1.125,
 * 1] (so points mix hostile and ordinary components, and some are wholly ordinary); everything
 * else from fill. */
static void fill_hostile(ampc_tensor *t, const char *name, uint64_t *seed) {
    if (strncmp(name, "grid", 4)) {
        fill(t, name, seed);
        return;
    }
    int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        double v = i % 4 == 1 ? hostile[i / 4 % AMPC_ARRAY_LEN(hostile)]
                              : (double)(i * 7 % 17) / 8.0 - 1.125;
        ampc_ref_store_f64(t->data, t->dtype, i, v);
    }
}

Test(lower_rnn, gpu_grid_sample_hostile_points_match_the_reference) {
    t_gpu_check c = {.fill = fill_hostile, .seed = 0x9e3779b97f4a7c15ull, .rtol = 1e-3,
                     .atol = 1e-4, .what = "grid_hostile"};
    t_gpu_vs_reference(build_grid_hostile(), &c);
}
