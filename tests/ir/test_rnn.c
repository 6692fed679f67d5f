/*
 * test_rnn.c — RNN, GRU and LSTM: single steps checked against the ONNX equations written out in
 * the test, multi-step recurrences (forward, reverse, bidirectional, both layouts) against a
 * scalar recurrence computed here, sequence_lens zeroing, every activation with its alpha/beta
 * (and the order in which a list of alphas is consumed), clip, f16/f64, empty batches and the
 * exact diagnostics for wrong shapes and attributes.
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <string.h>

#define ATTR_SS(name_, v_, n_)                                                                     \
    ((ampc_attr_arg){.name = (name_), .kind = AMPC_ATTR_STRINGS, .strings = (v_), .n = (n_)})

static double sigm(double x) { return 1 / (1 + exp(-x)); }

/* Marks vals[0..n-1] as outputs, evaluates with `inputs`, asserts success. */
static void eval_all(ampc_graph *g, ampc_value **vals, int32_t n, const ampc_tensor *inputs,
                     int32_t n_inputs, ampc_tensor *res) {
    for (int32_t i = 0; i < n; i++)
        cr_assert_eq(ampc_output(g, vals[i], NULL), AMPC_OK, "building failed:\n%s",
                     ampc_graph_errors(g));
    ampc_status st = ampc_graph_evaluate(g, inputs, n_inputs, res, n);
    cr_assert_eq(st, AMPC_OK, "evaluation failed:\n%s", ampc_graph_errors(g));
}

/* Asserts a value's inferred shape. */
static void expect_shape(const ampc_value *v, ampc_shape s) {
    char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
    cr_assert(ampc_shape_eq(&v->shape, &s), "shape: got %s, expected %s",
              ampc_shape_str(&v->shape, a, sizeof a), ampc_shape_str(&s, b, sizeof b));
}

static void free_all(ampc_tensor *t, int32_t n) {
    for (int32_t i = 0; i < n; i++) ampc_tensor_free(&t[i]);
}

/* ---- RNN --------------------------------------------------------------------------------------
 */

Test(rnn, rnn_one_step_matches_the_equation) {
    /* Ht = tanh(Xt*W^T + Ht-1*R^T + Wb + Rb) with W the identity. */
    const double x[2] = {0.5, -1}, w[4] = {1, 0, 0, 1}, r[4] = {0.5, 0.25, -0.5, 1};
    const double b[4] = {0.1, -0.2, 0.05, 0.3}, h0[2] = {0.2, -0.4};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[6] = {t_const_f32(g, SHAPE(1, 1, 2), x),
                         t_const_f32(g, SHAPE(1, 2, 2), w),
                         t_const_f32(g, SHAPE(1, 2, 2), r),
                         t_const_f32(g, SHAPE(1, 4), b),
                         NULL,
                         t_const_f32(g, SHAPE(1, 1, 2), h0)};
    ampc_value *out[2];
    ampc_attr_arg at = AMPC_ATTR_I("hidden_size", 2);
    cr_assert_eq(ampc_op_multi(g, "RNN", in, 6, &at, 1, out, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_tensor res[2];
    eval_all(g, out, 2, NULL, 0, res);
    double want[2];
    for (int j = 0; j < 2; j++)
        want[j] = tanh(x[j] + r[j * 2] * h0[0] + r[j * 2 + 1] * h0[1] + b[j] + b[2 + j]);
    cr_assert_float_eq(want[0], tanh(0.65), 1e-12); /* the recurrent term cancels for unit 0 */
    t_expect_close(&res[0], SHAPE(1, 1, 1, 2), want, 1e-6, 0);
    t_expect_close(&res[1], SHAPE(1, 1, 2), want, 1e-6, 0);
    free_all(res, 2);
    ampc_graph_destroy(g);
}

/* A scalar RNN (input and hidden size 1, no bias): h_t = tanh(w x_t + r h_{t-1}) over the steps
 * t of `order`, starting from h. Writes h after each visited step into ys[t]; returns the last. */
static double scalar_rnn(const double *xs, const int *order, int steps, double w, double r,
                         double h, double *ys) {
    for (int s = 0; s < steps; s++) {
        h = tanh(w * xs[order[s]] + r * h);
        ys[order[s]] = h;
    }
    return h;
}

Test(rnn, rnn_bidirectional_in_both_layouts) {
    /* seq 3, batch 2, input 1, hidden 1; direction 0 runs forward, direction 1 backward with its
     * own weights. */
    const double xs[2][3] = {{0.5, -1, 2}, {1.5, 0.25, -0.75}}; /* [batch][time] */
    const double w[2] = {0.8, -1.2}, r[2] = {0.5, 0.3};
    const int fwd[3] = {0, 1, 2}, bwd[3] = {2, 1, 0};
    double ys[2][2][3], yh[2][2]; /* [dir][batch][time] */
    for (int b = 0; b < 2; b++) {
        yh[0][b] = scalar_rnn(xs[b], fwd, 3, w[0], r[0], 0, ys[0][b]);
        yh[1][b] = scalar_rnn(xs[b], bwd, 3, w[1], r[1], 0, ys[1][b]);
    }
    for (int layout = 0; layout < 2; layout++) {
        double xv[6], want_y[12], want_h[4];
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < 3; t++) {
                xv[layout ? b * 3 + t : t * 2 + b] = xs[b][t];
                for (int d = 0; d < 2; d++)
                    want_y[layout ? (b * 3 + t) * 2 + d : (t * 2 + d) * 2 + b] = ys[d][b][t];
            }
        for (int b = 0; b < 2; b++)
            for (int d = 0; d < 2; d++) want_h[layout ? b * 2 + d : d * 2 + b] = yh[d][b];
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[3] = {
            t_input(g, "x", AMPC_DTYPE_F32, layout ? SHAPE(2, 3, 1) : SHAPE(3, 2, 1)),
            t_const_f32(g, SHAPE(2, 1, 1), w), t_const_f32(g, SHAPE(2, 1, 1), r)};
        ampc_attr_arg at[2] = {AMPC_ATTR_S("direction", "bidirectional"),
                               AMPC_ATTR_I("layout", layout)};
        ampc_value *out[2];
        cr_assert_eq(ampc_op_multi(g, "RNN", in, 3, at, 2, out, 2), AMPC_OK, "%s",
                     ampc_graph_errors(g));
        float xf[6];
        for (int i = 0; i < 6; i++) xf[i] = (float)xv[i];
        ampc_tensor xin = t_tensor(AMPC_DTYPE_F32, layout ? SHAPE(2, 3, 1) : SHAPE(3, 2, 1), xf);
        ampc_tensor res[2];
        eval_all(g, out, 2, &xin, 1, res);
        t_expect_close(&res[0], layout ? SHAPE(2, 3, 2, 1) : SHAPE(3, 2, 2, 1), want_y, 1e-6, 1e-7);
        t_expect_close(&res[1], layout ? SHAPE(2, 2, 1) : SHAPE(2, 2, 1), want_h, 1e-6, 1e-7);
        free_all(res, 2);
        ampc_graph_destroy(g);
    }
}

Test(rnn, rnn_reverse_direction_alone) {
    const double xs[3] = {0.5, -1, 2}, w = 0.7, r = -0.4;
    const int bwd[3] = {2, 1, 0};
    double ys[3];
    double last = scalar_rnn(xs, bwd, 3, w, r, 0, ys);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(3, 1, 1), xs), t_const_f32(g, SHAPE(1, 1, 1), &w),
                         t_const_f32(g, SHAPE(1, 1, 1), &r)};
    ampc_attr_arg at = AMPC_ATTR_S("direction", "reverse");
    ampc_value *out[2];
    cr_assert_eq(ampc_op_multi(g, "RNN", in, 3, &at, 1, out, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_tensor res[2];
    eval_all(g, out, 2, NULL, 0, res);
    t_expect_close(&res[0], SHAPE(3, 1, 1, 1), ys, 1e-6, 1e-7);
    t_expect_close(&res[1], SHAPE(1, 1, 1), &last, 1e-6, 1e-7);
    cr_assert_float_eq(last, ys[0], 0); /* the reverse pass ends at t = 0 */
    free_all(res, 2);
    ampc_graph_destroy(g);
}

Test(rnn, rnn_sequence_lens_zero_the_tail) {
    /* batch 3 with lengths 3, 1, 0, bidirectional: entries past an entry's length are zero, the
     * reverse pass of a short entry starts at its own last step, Y_h is the state after the last
     * step run (zero for length 0). */
    const double xs[3][3] = {{0.5, -1, 2}, {1.5, 0.25, -0.75}, {0.3, 0.3, 0.3}};
    const double w[2] = {0.8, -1.2}, r[2] = {0.5, 0.3};
    const int32_t lens[3] = {3, 1, 0};
    double want_y[3 * 2 * 3] = {0}, want_h[2 * 3] = {0};
    for (int b = 0; b < 3; b++) {
        int fwd[3], bwd[3];
        for (int s = 0; s < lens[b]; s++) fwd[s] = s, bwd[s] = lens[b] - 1 - s;
        double yf[3] = {0}, yb[3] = {0};
        double hf = scalar_rnn(xs[b], fwd, lens[b], w[0], r[0], 0, yf);
        double hb = scalar_rnn(xs[b], bwd, lens[b], w[1], r[1], 0, yb);
        for (int t = 0; t < lens[b]; t++) {
            want_y[(t * 2 + 0) * 3 + b] = yf[t];
            want_y[(t * 2 + 1) * 3 + b] = yb[t];
        }
        if (lens[b]) want_h[0 * 3 + b] = hf, want_h[1 * 3 + b] = hb;
    }
    double xv[9];
    for (int t = 0; t < 3; t++)
        for (int b = 0; b < 3; b++) xv[t * 3 + b] = xs[b][t];
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[5] = {t_const_f32(g, SHAPE(3, 3, 1), xv), t_const_f32(g, SHAPE(2, 1, 1), w),
                         t_const_f32(g, SHAPE(2, 1, 1), r), NULL,
                         t_const(g, AMPC_DTYPE_I32, SHAPE(3), lens)};
    ampc_attr_arg at = AMPC_ATTR_S("direction", "bidirectional");
    ampc_value *out[2];
    cr_assert_eq(ampc_op_multi(g, "RNN", in, 5, &at, 1, out, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_tensor res[2];
    eval_all(g, out, 2, NULL, 0, res);
    t_expect_close(&res[0], SHAPE(3, 2, 3, 1), want_y, 1e-6, 1e-7);
    t_expect_close(&res[1], SHAPE(2, 3, 1), want_h, 1e-6, 1e-7);
    /* spot checks of the rule itself, independent of the loops above */
    cr_assert_float_eq(want_y[(1 * 2 + 0) * 3 + 1], 0, 0);           /* b 1 past its length */
    cr_assert_float_eq(want_h[3 + 1], tanh(w[1] * xs[1][0]), 1e-12); /* b 1 reverse: x[0] only */
    free_all(res, 2);
    ampc_graph_destroy(g);
}

/* ---- activations, clip ------------------------------------------------------------------------
 */

/* Runs an RNN with W = 1, R = 0 over xs (seq 4, batch 1): Y[t] = f(clip(x_t)). */
static void run_activation(const char *name, const float *alpha, const float *beta,
                           const float *clip, const double *xs, double *got) {
    const double one = 1, zero = 0;
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(4, 1, 1), xs), t_const_f32(g, SHAPE(1, 1, 1), &one),
                         t_const_f32(g, SHAPE(1, 1, 1), &zero)};
    const char *names[1] = {name};
    ampc_attr_arg at[4] = {ATTR_SS("activations", names, 1)};
    int32_t n_at = 1;
    if (alpha) at[n_at++] = AMPC_ATTR_FS("activation_alpha", alpha, 1);
    if (beta) at[n_at++] = AMPC_ATTR_FS("activation_beta", beta, 1);
    if (clip) at[n_at++] = AMPC_ATTR_F("clip", *clip);
    ampc_value *y = ampc_op(g, "RNN", in, 3, at, n_at);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    ampc_shape want_shape = SHAPE(4, 1, 1, 1);
    cr_assert(ampc_shape_eq(&out.shape, &want_shape));
    for (int i = 0; i < 4; i++) got[i] = ampc_ref_load_f64(out.data, out.dtype, i);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(rnn, every_activation_with_its_alpha_and_beta) {
    const double xs[4] = {-2, -0.5, 0.5, 2};
    const float a = 0.5f, b = 0.25f;
    struct {
        const char *name;
        bool alpha, beta;
    } cases[] = {{"Relu", 0, 0},       {"tanh", 0, 0},        {"Sigmoid", 0, 0},
                 {"Affine", 1, 1},     {"LeakyRelu", 1, 0},   {"ThresholdedRelu", 1, 0},
                 {"ScaledTanh", 1, 1}, {"HardSigmoid", 1, 1}, {"Elu", 1, 0},
                 {"Softsign", 0, 0},   {"Softplus", 0, 0}};
    for (int c = 0; c < AMPC_ARRAY_LEN(cases); c++) {
        double got[4], want[4];
        run_activation(cases[c].name, cases[c].alpha ? &a : NULL, cases[c].beta ? &b : NULL, NULL,
                       xs, got);
        for (int i = 0; i < 4; i++) {
            double x = xs[i];
            switch (c) {
            case 0: want[i] = x > 0 ? x : 0; break;
            case 1: want[i] = tanh(x); break;
            case 2: want[i] = sigm(x); break;
            case 3: want[i] = a * x + b; break;
            case 4: want[i] = x >= 0 ? x : a * x; break;
            case 5: want[i] = x >= a ? x : 0; break;
            case 6: want[i] = a * tanh(b * x); break;
            case 7: want[i] = fmin(fmax(a * x + b, 0), 1); break;
            case 8: want[i] = x >= 0 ? x : a * (exp(x) - 1); break;
            case 9: want[i] = x / (1 + fabs(x)); break;
            default: want[i] = log(1 + exp(x)); break;
            }
            cr_assert_float_eq(got[i], want[i], 1e-6, "%s(%g): got %.9g, expected %.9g",
                               cases[c].name, x, got[i], want[i]);
        }
    }
}

Test(rnn, activation_defaults_follow_the_onnx_ops) {
    /* LeakyRelu alpha 0.01, ThresholdedRelu alpha 1, HardSigmoid 0.2/0.5, Elu 1, Affine 1/0,
     * ScaledTanh 1/1. */
    const double xs[4] = {-2, -0.5, 0.5, 2};
    double got[4];
    run_activation("LeakyRelu", NULL, NULL, NULL, xs, got);
    cr_assert_float_eq(got[0], -0.02, 1e-7);
    run_activation("ThresholdedRelu", NULL, NULL, NULL, xs, got);
    cr_assert(got[2] == 0 && fabs(got[3] - 2) < 1e-7);
    run_activation("HardSigmoid", NULL, NULL, NULL, xs, got);
    cr_assert_float_eq(got[1], 0.4, 1e-7);
    cr_assert_float_eq(got[3], 0.9, 1e-7);
    run_activation("Elu", NULL, NULL, NULL, xs, got);
    cr_assert_float_eq(got[0], exp(-2) - 1, 1e-7);
    run_activation("Affine", NULL, NULL, NULL, xs, got);
    cr_assert_float_eq(got[1], -0.5, 1e-7);
    run_activation("ScaledTanh", NULL, NULL, NULL, xs, got);
    cr_assert_float_eq(got[3], tanh(2), 1e-7);
}

Test(rnn, clip_bounds_the_activation_input) {
    const double xs[4] = {-2, -0.25, 0.3, 2};
    const float clip = 0.5f;
    double got[4];
    run_activation("Affine", NULL, NULL, &clip, xs, got); /* Affine defaults: the identity */
    const double want[4] = {-0.5, -0.25, 0.3, 0.5};
    for (int i = 0; i < 4; i++) cr_assert_float_eq(got[i], want[i], 1e-7, "element %d", i);
}

/* ---- GRU --------------------------------------------------------------------------------------
 */

Test(gru, one_step_in_both_reset_modes) {
    /* input 2, hidden 2: rows of W and R are z, r, h; B = [Wbz Wbr Wbh Rbz Rbr Rbh]. */
    const double x[2] = {0.7, -0.3}, h0[2] = {0.4, -0.6};
    double w[12], r[12], b[12];
    for (int i = 0; i < 12; i++) {
        w[i] = 0.1 * (i % 5) - 0.2;
        r[i] = 0.15 * ((i * 7) % 4) - 0.25;
        b[i] = 0.05 * i - 0.3;
    }
    for (int lbr = 0; lbr < 2; lbr++) {
        double z[2], rg[2], want[2];
        for (int j = 0; j < 2; j++) {
            z[j] = sigm(w[j * 2] * x[0] + w[j * 2 + 1] * x[1] + r[j * 2] * h0[0] +
                        r[j * 2 + 1] * h0[1] + b[j] + b[6 + j]);
            rg[j] = sigm(w[(2 + j) * 2] * x[0] + w[(2 + j) * 2 + 1] * x[1] +
                         r[(2 + j) * 2] * h0[0] + r[(2 + j) * 2 + 1] * h0[1] + b[2 + j] + b[8 + j]);
        }
        for (int j = 0; j < 2; j++) {
            const double *wh = &w[(4 + j) * 2], *rh = &r[(4 + j) * 2];
            double xw = wh[0] * x[0] + wh[1] * x[1];
            double hh =
                lbr ? tanh(xw + rg[j] * (rh[0] * h0[0] + rh[1] * h0[1] + b[10 + j]) + b[4 + j])
                    : tanh(xw + rh[0] * rg[0] * h0[0] + rh[1] * rg[1] * h0[1] + b[10 + j] +
                           b[4 + j]);
            want[j] = (1 - z[j]) * hh + z[j] * h0[j];
        }
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[6] = {t_const_f32(g, SHAPE(1, 1, 2), x),
                             t_const_f32(g, SHAPE(1, 6, 2), w),
                             t_const_f32(g, SHAPE(1, 6, 2), r),
                             t_const_f32(g, SHAPE(1, 12), b),
                             NULL,
                             t_const_f32(g, SHAPE(1, 1, 2), h0)};
        ampc_attr_arg at = AMPC_ATTR_I("linear_before_reset", lbr);
        ampc_value *out[2];
        cr_assert_eq(ampc_op_multi(g, "GRU", in, 6, &at, 1, out, 2), AMPC_OK, "%s",
                     ampc_graph_errors(g));
        ampc_tensor res[2];
        eval_all(g, out, 2, NULL, 0, res);
        t_expect_close(&res[0], SHAPE(1, 1, 1, 2), want, 1e-6, 1e-7);
        t_expect_close(&res[1], SHAPE(1, 1, 2), want, 1e-6, 1e-7);
        free_all(res, 2);
        ampc_graph_destroy(g);
    }
}

Test(gru, two_steps_reuse_the_state) {
    /* input 1, hidden 1, default activations: the second step reads the first one's state. */
    const double xs[2] = {1, -0.5}, w[3] = {0.5, -0.4, 0.9}, r[3] = {0.3, 0.8, -0.6};
    double h = 0, want[2];
    for (int t = 0; t < 2; t++) {
        double z = sigm(w[0] * xs[t] + r[0] * h), rg = sigm(w[1] * xs[t] + r[1] * h);
        double hh = tanh(w[2] * xs[t] + r[2] * rg * h);
        want[t] = h = (1 - z) * hh + z * h;
    }
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(2, 1, 1), xs), t_const_f32(g, SHAPE(1, 3, 1), w),
                         t_const_f32(g, SHAPE(1, 3, 1), r)};
    ampc_tensor out = t_eval1(g, ampc_op(g, "GRU", in, 3, NULL, 0), NULL, 0);
    t_expect_close(&out, SHAPE(2, 1, 1, 1), want, 1e-6, 1e-7);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* ---- LSTM -------------------------------------------------------------------------------------
 */

/* One LSTM step for hidden 2, input 1 from the ONNX equations; rows of w, r are i, o, f, c;
 * p is [Pi Po Pf]; acts g and h given as function pointers. */
static void lstm_step(const double *w, const double *r, const double *b, const double *p, double x,
                      double *h, double *c, bool input_forget, double (*gf)(double),
                      double (*hf)(double)) {
    double pre[8], hn[2], cn[2];
    for (int j = 0; j < 8; j++)
        pre[j] = w[j] * x + r[j * 2] * h[0] + r[j * 2 + 1] * h[1] + b[j] + b[8 + j];
    for (int j = 0; j < 2; j++) {
        double i = sigm(pre[j] + p[j] * c[j]);
        double f = input_forget ? 1 - i : sigm(pre[4 + j] + p[4 + j] * c[j]);
        double cc = gf(pre[6 + j]);
        cn[j] = f * c[j] + i * cc;
        double o = sigm(pre[2 + j] + p[2 + j] * cn[j]);
        hn[j] = o * hf(cn[j]);
    }
    memcpy(h, hn, sizeof hn);
    memcpy(c, cn, sizeof cn);
}

static double leaky05(double x) { return x >= 0 ? x : 0.5 * x; }
static double affine_2_025(double x) { return 2 * x + 0.25; }

/* Builds and runs a one-direction LSTM (seq 2, batch 1, input 1, hidden 2) with peepholes,
 * initial states and the given attributes; checks Y, Y_h, Y_c against lstm_step. */
static void check_lstm(const ampc_attr_arg *at, int32_t n_at, bool input_forget,
                       double (*gf)(double), double (*hf)(double)) {
    const double xs[2] = {0.6, -1.1}, h0[2] = {0.1, -0.2}, c0[2] = {0.5, -0.3},
                 p[6] = {0.2, -0.1, 0.3, 0.25, -0.4, 0.15};
    double w[8], r[16], b[16];
    for (int i = 0; i < 8; i++) w[i] = 0.2 * (i % 3) - 0.15 * (i % 2);
    for (int i = 0; i < 16; i++) r[i] = 0.1 * ((i * 5) % 7) - 0.3, b[i] = 0.02 * i - 0.1;
    double h[2] = {h0[0], h0[1]}, c[2] = {c0[0], c0[1]}, want_y[4];
    for (int t = 0; t < 2; t++) {
        lstm_step(w, r, b, p, xs[t], h, c, input_forget, gf, hf);
        want_y[t * 2] = h[0], want_y[t * 2 + 1] = h[1];
    }
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[8] = {t_const_f32(g, SHAPE(2, 1, 1), xs),
                         t_const_f32(g, SHAPE(1, 8, 1), w),
                         t_const_f32(g, SHAPE(1, 8, 2), r),
                         t_const_f32(g, SHAPE(1, 16), b),
                         NULL,
                         t_const_f32(g, SHAPE(1, 1, 2), h0),
                         t_const_f32(g, SHAPE(1, 1, 2), c0),
                         t_const_f32(g, SHAPE(1, 6), p)};
    ampc_value *out[3];
    cr_assert_eq(ampc_op_multi(g, "LSTM", in, 8, at, n_at, out, 3), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_tensor res[3];
    eval_all(g, out, 3, NULL, 0, res);
    t_expect_close(&res[0], SHAPE(2, 1, 1, 2), want_y, 1e-6, 1e-7);
    t_expect_close(&res[1], SHAPE(1, 1, 2), h, 1e-6, 1e-7);
    t_expect_close(&res[2], SHAPE(1, 1, 2), c, 1e-6, 1e-7);
    free_all(res, 3);
    ampc_graph_destroy(g);
}

Test(lstm, peepholes_initial_state_and_cell_output) { check_lstm(NULL, 0, false, tanh, tanh); }

Test(lstm, input_forget_couples_the_gates) {
    ampc_attr_arg at = AMPC_ATTR_I("input_forget", 1);
    check_lstm(&at, 1, true, tanh, tanh);
}

Test(lstm, alphas_are_consumed_in_activation_order) {
    /* f = Sigmoid takes none; g = LeakyRelu takes alpha[0]; h = Affine takes alpha[1], beta[0]. */
    const char *names[3] = {"Sigmoid", "LeakyRelu", "Affine"};
    const float alpha[2] = {0.5f, 2.0f}, beta[1] = {0.25f};
    ampc_attr_arg at[3] = {ATTR_SS("activations", names, 3),
                           AMPC_ATTR_FS("activation_alpha", alpha, 2),
                           AMPC_ATTR_FS("activation_beta", beta, 1)};
    check_lstm(at, 3, false, leaky05, affine_2_025);
}

Test(lstm, clip_bounds_the_gates_but_not_the_cell_state) {
    /* X = W = R = 0 and every bias 10: each gate pre-activation (10) is clipped to 0.5, so
     * i = f = o = sigmoid(0.5) and c = tanh(0.5). C = f * 3 + i * c exceeds the clip, and
     * H = o * tanh(C) reads it unclipped. */
    const double zero[4] = {0}, b[8] = {10, 10, 10, 10, 0, 0, 0, 0}, c0 = 3;
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[7] = {t_const_f32(g, SHAPE(1, 1, 1), zero),
                         t_const_f32(g, SHAPE(1, 4, 1), zero),
                         t_const_f32(g, SHAPE(1, 4, 1), zero),
                         t_const_f32(g, SHAPE(1, 8), b),
                         NULL,
                         NULL,
                         t_const_f32(g, SHAPE(1, 1, 1), &c0)};
    ampc_attr_arg at = AMPC_ATTR_F("clip", 0.5f);
    ampc_value *out[3];
    cr_assert_eq(ampc_op_multi(g, "LSTM", in, 7, &at, 1, out, 3), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_tensor res[3];
    eval_all(g, out, 3, NULL, 0, res);
    const double s = sigm(0.5), cell = s * 3 + s * tanh(0.5), h = s * tanh(cell);
    cr_assert(cell > 2);
    t_expect_close(&res[1], SHAPE(1, 1, 1), &h, 1e-6, 0);
    t_expect_close(&res[2], SHAPE(1, 1, 1), &cell, 1e-6, 0);
    free_all(res, 3);
    ampc_graph_destroy(g);
}

Test(lstm, bidirectional_layout1_shapes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 5, 3)),
                         t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2, 24, 3)),
                         t_input(g, "r", AMPC_DTYPE_F32, SHAPE(2, 24, 6))};
    ampc_attr_arg at[2] = {AMPC_ATTR_S("direction", "bidirectional"), AMPC_ATTR_I("layout", 1)};
    ampc_value *out[3];
    cr_assert_eq(ampc_op_multi(g, "LSTM", in, 3, at, 2, out, 3), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    expect_shape(out[0], SHAPE(4, 5, 2, 6));
    expect_shape(out[1], SHAPE(4, 2, 6));
    expect_shape(out[2], SHAPE(4, 2, 6));
    ampc_graph_destroy(g);
}

/* ---- dtypes, empty tensors --------------------------------------------------------------------
 */

Test(rnn, f16_and_f64_inputs) {
    const double xs[2] = {0.5, -1}, w = 0.75, r = 0.5;
    const double want[2] = {tanh(0.375), tanh(-0.75 + 0.5 * tanh(0.375))};
    /* f64: exact up to libm */
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const(g, AMPC_DTYPE_F64, SHAPE(2, 1, 1), xs),
                         t_const(g, AMPC_DTYPE_F64, SHAPE(1, 1, 1), &w),
                         t_const(g, AMPC_DTYPE_F64, SHAPE(1, 1, 1), &r)};
    ampc_value *y = ampc_op(g, "RNN", in, 3, NULL, 0);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F64);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    t_expect_close(&out, SHAPE(2, 1, 1, 1), want, 1e-14, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    /* f16: the state is rounded to f16 between steps; 11 bits of precision */
    uint16_t hx[2] = {ampc_f32_to_f16(0.5f), ampc_f32_to_f16(-1)}, hw = ampc_f32_to_f16(0.75f),
             hr = ampc_f32_to_f16(0.5f);
    g = ampc_graph_create("t");
    ampc_value *hin[3] = {t_const(g, AMPC_DTYPE_F16, SHAPE(2, 1, 1), hx),
                          t_const(g, AMPC_DTYPE_F16, SHAPE(1, 1, 1), &hw),
                          t_const(g, AMPC_DTYPE_F16, SHAPE(1, 1, 1), &hr)};
    y = ampc_op(g, "RNN", hin, 3, NULL, 0);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    out = t_eval1(g, y, NULL, 0);
    t_expect_close(&out, SHAPE(2, 1, 1, 1), want, 2e-3, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(rnn, empty_batch_and_empty_sequence) {
    ampc_graph *g = ampc_graph_create("t");
    const double w = 1, r = 1;
    ampc_value *in[3] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 0, 1)),
                         t_const_f32(g, SHAPE(1, 1, 1), &w), t_const_f32(g, SHAPE(1, 1, 1), &r)};
    ampc_value *out[2];
    cr_assert_eq(
        ampc_op_multi(g, "GRU",
                      (ampc_value *[]){in[0], t_const_f32(g, SHAPE(1, 3, 1), (double[]){1, 1, 1}),
                                       t_const_f32(g, SHAPE(1, 3, 1), (double[]){1, 1, 1})},
                      3, NULL, 0, out, 2),
        AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_tensor xin = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 0, 1), NULL), res[2];
    eval_all(g, out, 2, &xin, 1, res);
    t_expect_close(&res[0], SHAPE(2, 1, 0, 1), NULL, 0, 0);
    t_expect_close(&res[1], SHAPE(1, 0, 1), NULL, 0, 0);
    free_all(res, 2);
    ampc_graph_destroy(g);
    /* seq_length 0: no step runs, Y is empty and Y_h is zero (as for a length-0 entry) */
    g = ampc_graph_create("t");
    in[0] = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 2, 1));
    in[1] = t_const_f32(g, SHAPE(1, 1, 1), &w);
    in[2] = t_const_f32(g, SHAPE(1, 1, 1), &r);
    cr_assert_eq(ampc_op_multi(g, "RNN", in, 3, NULL, 0, out, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    xin = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 2, 1), NULL);
    eval_all(g, out, 2, &xin, 1, res);
    t_expect_close(&res[0], SHAPE(0, 1, 2, 1), NULL, 0, 0);
    const double zeros[2] = {0, 0};
    t_expect_close(&res[1], SHAPE(1, 2, 1), zeros, 0, 0);
    free_all(res, 2);
    ampc_graph_destroy(g);
}

/* ---- diagnostics ------------------------------------------------------------------------------
 */

/* Builds `op` over inputs of the given shapes (f32 graph inputs; sequence_lens an i32 constant
 * when lens is given) and asserts it fails with `needle`. */
static void expect_fail(const char *op, const ampc_shape *shapes, int32_t n_in, const int32_t *lens,
                        const ampc_attr_arg *at, int32_t n_at, const char *needle) {
    ampc_graph *g = ampc_graph_create("t");
    static const char *const names[8] = {"X", "W", "R", "B", "seq", "h0", "c0", "P"};
    ampc_value *in[8] = {0};
    for (int32_t i = 0; i < n_in; i++) {
        if (!shapes[i].rank && i != 0) continue; /* rank 0: absent */
        if (i == 4)
            in[i] = t_const(g, AMPC_DTYPE_I32, shapes[i], lens);
        else
            in[i] = t_input(g, names[i], AMPC_DTYPE_F32, shapes[i]);
    }
    ampc_value *out[2];
    cr_assert_neq(ampc_op_multi(g, op, in, n_in, at, n_at, out, 2), AMPC_OK);
    cr_assert(ampc_value_is_poisoned(out[0]));
    t_expect_diag(g, needle);
    ampc_graph_destroy(g);
}

Test(rnn, diagnostics_for_shapes) {
    ampc_shape s[6] = {SHAPE(3, 2, 4), SHAPE(1, 5, 4), SHAPE(1, 6, 2)};
    expect_fail("GRU", s, 3, NULL, NULL, 0,
                "node 0 (GRU 'GRU_0'): input 1 'W' (W) must have shape [1,6,4] ([num_directions, "
                "3*hidden_size, input_size]), got [1,5,4]");
    s[1] = SHAPE(1, 2, 4);
    s[2] = SHAPE(1, 2, 3);
    expect_fail("RNN", s, 3, NULL, NULL, 0,
                "node 0 (RNN 'RNN_0'): input 2 'R' (R) must have shape [1,3,3] ([num_directions, "
                "hidden_size, hidden_size]), got [1,2,3]");
    s[2] = SHAPE(1, 2, 2);
    s[3] = SHAPE(1, 2);
    expect_fail(
        "RNN", s, 4, NULL, NULL, 0,
        "input 3 'B' (B) must have shape [1,4] ([num_directions, 2*hidden_size]), got [1,2]");
    s[3] = (ampc_shape){0};
    s[5] = SHAPE(1, 3, 2);
    ampc_attr_arg lay = AMPC_ATTR_I("layout", 1); /* X is then [batch 3, seq 2, input 4] */
    expect_fail("RNN", s, 6, NULL, &lay, 1,
                "input 5 'h0' (initial_h) must have shape [3,1,2] ([batch_size, num_directions, "
                "hidden_size]), got [1,3,2]");
    s[5] = (ampc_shape){0};
    s[4] = SHAPE(3);
    expect_fail("RNN", s, 5, (int32_t[]){1, 2, 3}, NULL, 0,
                "(sequence_lens) must have shape [2] ([batch_size]), got [3]");
    s[4] = SHAPE(2);
    expect_fail("RNN", s, 5, (int32_t[]){3, 4}, NULL, 0,
                "(sequence_lens) entry 1 is 4, outside [0, 3] (0 to seq_length)");
    ampc_shape x2[3] = {SHAPE(3, 4), SHAPE(1, 2, 4), SHAPE(1, 2, 2)};
    expect_fail("LSTM", x2, 3, NULL, NULL, 0,
                "node 0 (LSTM 'LSTM_0'): input 0 'X' (X) must have rank 3, got [3,4]");
    ampc_shape p[8] = {SHAPE(3, 2, 4), SHAPE(1, 8, 4), SHAPE(1, 8, 2), {0}, {0}, {0}, {0},
                       SHAPE(1, 8)};
    expect_fail(
        "LSTM", p, 8, NULL, NULL, 0,
        "input 7 'P' (P) must have shape [1,6] ([num_directions, 3*hidden_size]), got [1,8]");
    ampc_shape bi[3] = {SHAPE(3, 2, 4), SHAPE(1, 2, 4), SHAPE(1, 2, 2)};
    ampc_attr_arg dir = AMPC_ATTR_S("direction", "bidirectional");
    expect_fail("RNN", bi, 3, NULL, &dir, 1,
                "input 2 'R' (R) must have shape [2,2,2] ([num_directions, hidden_size, "
                "hidden_size]), got [1,2,2]");
}

Test(rnn, diagnostics_for_attributes_and_dtypes) {
    ampc_shape s[3] = {SHAPE(3, 2, 4), SHAPE(1, 2, 4), SHAPE(1, 2, 2)};
    ampc_attr_arg a = AMPC_ATTR_S("direction", "sideways");
    expect_fail("RNN", s, 3, NULL, &a, 1,
                "node 0 (RNN 'RNN_0'): attribute 'direction' must be forward, reverse or "
                "bidirectional, got 'sideways'");
    a = AMPC_ATTR_I("layout", 2);
    expect_fail("RNN", s, 3, NULL, &a, 1, "attribute 'layout' must be 0 or 1, got 2");
    a = AMPC_ATTR_I("hidden_size", 3);
    expect_fail("RNN", s, 3, NULL, &a, 1,
                "attribute 'hidden_size' 3 disagrees with input 2 'R' (R) [1,2,2], whose last dim "
                "is the hidden size 2");
    a = AMPC_ATTR_F("clip", -1);
    expect_fail("RNN", s, 3, NULL, &a, 1,
                "attribute 'clip' (the cell clip threshold) must be positive, got -1");
    const char *two[2] = {"Tanh", "Relu"}, *bad[1] = {"Swish"};
    ampc_attr_arg acts[2] = {ATTR_SS("activations", bad, 1),
                             AMPC_ATTR_S("direction", "bidirectional")};
    expect_fail("RNN", s, 3, NULL, acts, 1,
                "attribute 'activations' entry 0 'Swish' is not an activation ONNX defines for "
                "recurrent ops (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)");
    ampc_shape g3[3] = {SHAPE(3, 2, 4), SHAPE(1, 6, 4), SHAPE(1, 6, 2)};
    acts[0] = ATTR_SS("activations", two, 1);
    expect_fail("GRU", g3, 3, NULL, acts, 1,
                "attribute 'activations' must list 2 activation functions (2 per direction: f "
                "for the gates z and r, g for the hidden gate), got 1");
    expect_fail("RNN", s, 3, NULL, &acts[1], 1, /* bidirectional needs two directions' weights */
                "input 2 'R' (R) must have shape [2,2,2]");
    acts[0] = ATTR_SS("activations", two, 2);
    ampc_shape one_dir[3] = {SHAPE(3, 2, 4), SHAPE(1, 2, 4), SHAPE(1, 2, 2)};
    const char *three[3] = {"Tanh", "Relu", "Tanh"};
    ampc_attr_arg three_acts = ATTR_SS("activations", three, 3);
    expect_fail("RNN", one_dir, 3, NULL, &three_acts, 1,
                "attribute 'activations' must list 1 activation function (1 per direction: f), "
                "got 3");
    a = AMPC_ATTR_I("linear_before_reset", 3);
    expect_fail("GRU", g3, 3, NULL, &a, 1, "attribute 'linear_before_reset' must be 0 or 1, got 3");

    /* dtypes */
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2, 4)),
                         t_input(g, "w", AMPC_DTYPE_F16, SHAPE(1, 2, 4)),
                         t_input(g, "r", AMPC_DTYPE_F32, SHAPE(1, 2, 2))};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RNN", in, 3, NULL, 0)));
    t_expect_diag(g, "node 0 (RNN 'RNN_0'): inputs 0 'x' and 1 'w' must have one dtype, got f32 "
                     "and f16");
    in[0] = t_input(g, "xi", AMPC_DTYPE_I32, SHAPE(3, 2, 4));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RNN", in, 3, NULL, 0)));
    t_expect_diag(g, "node 1 (RNN 'RNN_1'): input 0 'xi' must be a floating-point type, got i32");
    ampc_graph_destroy(g);
}
