/*
 * test_norm.c — Softmax, LogSoftmax, LayerNormalization and BatchNormalization: values against
 * hand formulas (softmax computed without the max shift, which is safe for the small inputs
 * used there), numerical stability on large inputs, axes, the optional outputs of LayerNorm and
 * their stash dtype, f16 inputs, empty tensors and the exact diagnostics.
 */
#include "support.h"

#include <math.h>
#include <string.h>

static ampc_value *softmax_op(ampc_graph *g, const char *op, ampc_value *x, const int64_t *axis) {
    ampc_attr_arg at = AMPC_ATTR_I("axis", axis ? *axis : 0);
    return ampc_op(g, op, &x, 1, &at, axis ? 1 : 0);
}

Test(norm, softmax_default_axis_is_last) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *y = softmax_op(g, "Softmax", x, NULL);
    float xv[6] = {1, 2, 3, 0, 0, 0};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), xv);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double z = exp(1) + exp(2) + exp(3);
    double want[6] = {exp(1) / z, exp(2) / z, exp(3) / z, 1.0 / 3, 1.0 / 3, 1.0 / 3};
    t_expect_close(&out, SHAPE(2, 3), want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, softmax_middle_axis_matches_formula) {
    /* [2,3,2], axis -2 (= 1): each (i, k) column over j is normalised. */
    float xv[12];
    for (int i = 0; i < 12; i++) xv[i] = (float)((i * 7) % 5) - 2;
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 2));
    int64_t axis = -2;
    ampc_value *y = softmax_op(g, "Softmax", x, &axis);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3, 2), xv);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[12];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            double z = 0;
            for (int j = 0; j < 3; j++) z += exp(xv[(i * 3 + j) * 2 + k]);
            for (int j = 0; j < 3; j++)
                want[(i * 3 + j) * 2 + k] = exp(xv[(i * 3 + j) * 2 + k]) / z;
        }
    t_expect_close(&out, SHAPE(2, 3, 2), want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, softmax_is_stable_on_large_inputs) {
    /* exp(1000) overflows double; shifted by the max the row is {e^-2, e^-1, 1} / (sum). */
    ampc_graph *g = ampc_graph_create("t");
    double v[3] = {1000, 1001, 1002};
    ampc_value *y = softmax_op(g, "Softmax", t_const_f32(g, SHAPE(3), v), NULL);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    double z = exp(-2) + exp(-1) + 1;
    double want[3] = {exp(-2) / z, exp(-1) / z, 1 / z};
    t_expect_close(&out, SHAPE(3), want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, log_softmax_values_and_stability) {
    ampc_graph *g = ampc_graph_create("t");
    double r1[3] = {1, 2, 3}, r2[2] = {-1000, -1000};
    ampc_value *y1 = softmax_op(g, "LogSoftmax", t_const_f32(g, SHAPE(3), r1), NULL);
    ampc_value *y2 = softmax_op(g, "LogSoftmax", t_const_f32(g, SHAPE(1, 2), r2), NULL);
    cr_assert_eq(ampc_output(g, y1, "y1"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, y2, "y2"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double lz = log(exp(1) + exp(2) + exp(3));
    double w1[3] = {1 - lz, 2 - lz, 3 - lz}, w2[2] = {-log(2), -log(2)};
    t_expect_close(&out[0], SHAPE(3), w1, 1e-6, 0);
    t_expect_close(&out[1], SHAPE(1, 2), w2, 1e-6, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(norm, softmax_f16_and_empty) {
    ampc_graph *g = ampc_graph_create("t");
    uint16_t h[2] = {ampc_f32_to_f16(0), ampc_f32_to_f16(0.6931472f)}; /* ~ln 2: 1/3, 2/3 */
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(2));
    ampc_value *y = softmax_op(g, "Softmax", x, NULL);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F16, SHAPE(2), h);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double l2 = ampc_f16_to_f32(h[1]);
    double want[2] = {1 / (1 + exp(l2)), exp(l2) / (1 + exp(l2))};
    t_expect_close(&out, SHAPE(2), want, 1e-3, 0); /* f16 keeps 11 bits */
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 0));
    y = softmax_op(g, "Softmax", x, NULL);
    in = t_tensor(AMPC_DTYPE_F32, SHAPE(4, 0), NULL);
    out = t_eval1(g, y, &in, 1);
    t_expect_close(&out, SHAPE(4, 0), NULL, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, softmax_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t axis = 2;
    cr_assert(ampc_value_is_poisoned(softmax_op(g, "Softmax", x, &axis)));
    t_expect_diag(g, "node 0 (Softmax 'Softmax_0'): attribute 'axis' 2 is out of range for rank 2 "
                     "(expected -2 to 1)");
    ampc_value *i = t_input(g, "i", AMPC_DTYPE_I32, SHAPE(3));
    cr_assert(ampc_value_is_poisoned(softmax_op(g, "LogSoftmax", i, NULL)));
    t_expect_diag(g, "node 1 (LogSoftmax 'LogSoftmax_1'): input 0 'i' must be a floating-point "
                     "type, got i32");
    ampc_value *s = t_input(g, "s", AMPC_DTYPE_F32, SHAPE());
    cr_assert(ampc_value_is_poisoned(softmax_op(g, "Softmax", s, NULL)));
    t_expect_diag(g, "node 2 (Softmax 'Softmax_2'): input 0 's' must have rank >= 1, got a scalar");
    ampc_graph_destroy(g);
}

/* ---- LayerNormalization ------------------------------------------------------------------- */

/* Expected LayerNorm of one row of `len` values (population variance, eps as f32). */
static void ln_row(const float *x, int len, const double *scale, const double *bias, double eps,
                   double *y, double *mean_out, double *inv_out) {
    double m = 0, v = 0;
    for (int j = 0; j < len; j++) m += x[j];
    m /= len;
    for (int j = 0; j < len; j++) v += (x[j] - m) * (x[j] - m);
    v /= len;
    double inv = 1 / sqrt(v + eps);
    for (int j = 0; j < len; j++) y[j] = (x[j] - m) * inv * scale[j] + (bias ? bias[j] : 0);
    *mean_out = m;
    *inv_out = inv;
}

Test(norm, layer_norm_last_axis_with_stats) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4));
    double sv[4] = {1, 2, 0.5, -1}, bv[4] = {0, 1, 2, 3};
    ampc_value *in3[3] = {x, t_const_f32(g, SHAPE(4), sv), t_const_f32(g, SHAPE(4), bv)};
    ampc_value *outs[3];
    cr_assert_eq(ampc_op_multi(g, "LayerNormalization", in3, 3, NULL, 0, outs, 3), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    cr_assert_eq(ampc_value_dtype(outs[1]), AMPC_DTYPE_F32);
    for (int i = 0; i < 3; i++) {
        char name[4] = {'o', (char)('0' + i), 0};
        cr_assert_eq(ampc_output(g, outs[i], name), AMPC_OK);
    }
    float xv[8] = {1, 2, 3, 4, 5, 5, 5, 5}; /* the second row is constant: y = B */
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 4), xv), out[3];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double wy[8], wm[2], wi[2];
    for (int r = 0; r < 2; r++)
        ln_row(xv + 4 * r, 4, sv, bv, (double)1e-5f, wy + 4 * r, &wm[r], &wi[r]);
    cr_assert_float_eq(wm[0], 2.5, 1e-12);
    cr_assert_float_eq(wi[1], 1 / sqrt((double)1e-5f), 1e-9);
    t_expect_close(&out[0], SHAPE(2, 4), wy, 1e-6, 1e-6);
    t_expect_close(&out[1], SHAPE(2, 1), wm, 1e-7, 0);
    t_expect_close(&out[2], SHAPE(2, 1), wi, 1e-6, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(norm, layer_norm_axis1_normalises_trailing_dims) {
    /* X [2,2,3], axis 1: each batch row of 6 is normalised; Scale [3] broadcasts over dim 1. */
    float xv[12] = {1, 2, 3, 4, 5, 6, -1, 0, 3, 8, 2, 2};
    double sv[3] = {1, 2, 3};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 2, 3));
    ampc_value *in2[2] = {x, t_const_f32(g, SHAPE(3), sv)};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("axis", 1), AMPC_ATTR_F("epsilon", 0.5f)};
    ampc_value *outs[2];
    cr_assert_eq(ampc_op_multi(g, "LayerNormalization", in2, 2, at, 2, outs, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, outs[0], "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, outs[1], "mean"), AMPC_OK);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 2, 3), xv), out[2];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double s6[6] = {1, 2, 3, 1, 2, 3}, wy[12], wm[2], wi;
    for (int r = 0; r < 2; r++) ln_row(xv + 6 * r, 6, s6, NULL, 0.5, wy + 6 * r, &wm[r], &wi);
    t_expect_close(&out[0], SHAPE(2, 2, 3), wy, 1e-6, 1e-6);
    t_expect_close(&out[1], SHAPE(2, 1, 1), wm, 1e-7, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(norm, layer_norm_f16_with_stash_dtypes) {
    ampc_graph *g = ampc_graph_create("t");
    uint16_t xh[2] = {ampc_f32_to_f16(1), ampc_f32_to_f16(3)}, sh[2], bh[2];
    for (int i = 0; i < 2; i++) sh[i] = ampc_f32_to_f16(2), bh[i] = ampc_f32_to_f16(0.5f);
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(1, 2));
    ampc_value *in3[3] = {x, t_const(g, AMPC_DTYPE_F16, SHAPE(2), sh),
                          t_const(g, AMPC_DTYPE_F16, SHAPE(2), bh)};
    ampc_value *outs[3];
    ampc_attr_arg at = AMPC_ATTR_F("epsilon", 0.0f);
    cr_assert_eq(ampc_op_multi(g, "LayerNormalization", in3, 3, &at, 1, outs, 3), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    cr_assert_eq(ampc_value_dtype(outs[0]), AMPC_DTYPE_F16);
    cr_assert_eq(ampc_value_dtype(outs[1]), AMPC_DTYPE_F32); /* stash_type 1 */
    cr_assert_eq(ampc_value_dtype(outs[2]), AMPC_DTYPE_F32);
    cr_assert_eq(ampc_output(g, outs[0], "y"), AMPC_OK);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F16, SHAPE(1, 2), xh), out;
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    /* mean 2, var 1: normalised {-1, 1}, times 2 plus 0.5. */
    double want[2] = {-1.5, 2.5};
    t_expect_close(&out, SHAPE(1, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2));
    double s2[2] = {1, 1};
    ampc_value *in2[2] = {x, t_const_f32(g, SHAPE(2), s2)};
    ampc_attr_arg st = AMPC_ATTR_I("stash_type", 11);
    cr_assert_eq(ampc_op_multi(g, "LayerNormalization", in2, 2, &st, 1, outs, 3), AMPC_OK);
    cr_assert_eq(ampc_value_dtype(outs[2]), AMPC_DTYPE_F64);
    ampc_shape s = ampc_value_shape(outs[2]);
    cr_assert(s.rank == 2 && s.dims[0] == 3 && s.dims[1] == 1);
    ampc_graph_destroy(g);
}

Test(norm, layer_norm_empty_batch_and_negative_axis) {
    /* X [0,2,3] with axis -2: no rows; Y keeps X's shape, Mean is [0,1,1]. */
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 2, 3));
    double sv[6] = {1, 1, 1, 1, 1, 1};
    ampc_value *in2[2] = {x, t_const_f32(g, SHAPE(2, 3), sv)};
    ampc_attr_arg at = AMPC_ATTR_I("axis", -2);
    ampc_value *outs[2];
    cr_assert_eq(ampc_op_multi(g, "LayerNormalization", in2, 2, &at, 1, outs, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, outs[0], "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, outs[1], "mean"), AMPC_OK);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 2, 3), NULL), out[2];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    t_expect_close(&out[0], SHAPE(0, 2, 3), NULL, 0, 0);
    t_expect_close(&out[1], SHAPE(0, 1, 1), NULL, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(norm, layer_norm_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4));
    ampc_value *s3 = t_input(g, "s3", AMPC_DTYPE_F32, SHAPE(3));
    ampc_value *s4 = t_input(g, "s4", AMPC_DTYPE_F32, SHAPE(4));
    ampc_value *h4 = t_input(g, "h4", AMPC_DTYPE_F16, SHAPE(4));
    ampc_value *in[3] = {x, s3, NULL};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LayerNormalization", in, 2, NULL, 0)));
    t_expect_diag(g, "node 0 (LayerNormalization 'LayerNormalization_0'): input 1 's3' (Scale) "
                     "must broadcast to the shape of input 0 'x' [2,4], got [3]");
    in[1] = s4, in[2] = s3;
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LayerNormalization", in, 3, NULL, 0)));
    t_expect_diag(g, "node 1 (LayerNormalization 'LayerNormalization_1'): input 2 's3' (B) must "
                     "broadcast to the shape of input 0 'x' [2,4], got [3]");
    in[1] = h4;
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LayerNormalization", in, 2, NULL, 0)));
    t_expect_diag(g, "node 2 (LayerNormalization 'LayerNormalization_2'): inputs 0 'x' and 1 'h4' "
                     "must have one dtype, got f32 and f16");
    in[1] = s4;
    ampc_attr_arg st = AMPC_ATTR_I("stash_type", 7);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LayerNormalization", in, 2, &st, 1)));
    t_expect_diag(g, "node 3 (LayerNormalization 'LayerNormalization_3'): attribute 'stash_type' "
                     "must be an ONNX floating-point data type (1 float, 10 float16, 11 double, "
                     "16 bfloat16), got 7");
    ampc_attr_arg ax = AMPC_ATTR_I("axis", -3);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LayerNormalization", in, 2, &ax, 1)));
    t_expect_diag(g, "node 4 (LayerNormalization 'LayerNormalization_4'): attribute 'axis' -3 is "
                     "out of range for rank 2 (expected -2 to 1)");
    ampc_graph_destroy(g);
}

/* ---- BatchNormalization ------------------------------------------------------------------- */

/* The five inputs of a BatchNormalization over x with per-channel constants. */
static ampc_value *batch_norm(ampc_graph *g, ampc_value *x, int64_t c, const double *scale,
                              const double *b, const double *mean, const double *var,
                              const ampc_attr_arg *at, int32_t n_at) {
    ampc_value *in[5] = {x, t_const_f32(g, SHAPE(c), scale), t_const_f32(g, SHAPE(c), b),
                         t_const_f32(g, SHAPE(c), mean), t_const_f32(g, SHAPE(c), var)};
    return ampc_op(g, "BatchNormalization", in, 5, at, n_at);
}

Test(norm, batch_norm_nchw) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 2, 1, 2));
    double s[2] = {1, 2}, b[2] = {0, -1}, m[2] = {1, 10}, v[2] = {4, 0.25};
    ampc_attr_arg eps = AMPC_ATTR_F("epsilon", 0.0f);
    ampc_value *y = batch_norm(g, x, 2, s, b, m, v, &eps, 1);
    float xv[8] = {1, 3, 10, 11, -1, 5, 9, 12}; /* n0c0, n0c1, n1c0, n1c1 */
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 2, 1, 2), xv);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    /* c0: (x - 1) / 2 * 1 + 0; c1: (x - 10) / 0.5 * 2 - 1 */
    double want[8] = {0, 1, -1, 3, -1, 2, -5, 7};
    t_expect_close(&out, SHAPE(2, 2, 1, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, batch_norm_default_epsilon_rank2_and_rank1) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    double s[3] = {1, 1, 2}, b[3] = {0, 1, 0}, m[3] = {0, 0, 1}, v[3] = {1, 1, 3};
    ampc_value *y = batch_norm(g, x, 3, s, b, m, v, NULL, 0);
    float xv[6] = {1, 2, 3, 4, 5, 6};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), xv);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double e = (double)1e-5f, want[6];
    for (int i = 0; i < 6; i++)
        want[i] = (xv[i] - m[i % 3]) / sqrt(v[i % 3] + e) * s[i % 3] + b[i % 3];
    t_expect_close(&out, SHAPE(2, 3), want, 1e-7, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    /* 1-D X: C is 1. */
    g = ampc_graph_create("t");
    double v1[4] = {-2, 0, 2, 4}, s1[1] = {3}, b1[1] = {1}, m1[1] = {1}, var1[1] = {9};
    ampc_attr_arg eps0 = AMPC_ATTR_F("epsilon", 0.0f);
    y = batch_norm(g, t_const_f32(g, SHAPE(4), v1), 1, s1, b1, m1, var1, &eps0, 1);
    out = t_eval1(g, y, NULL, 0);
    double w1[4] = {-2, 0, 2, 4};
    t_expect_close(&out, SHAPE(4), w1, 1e-7, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, batch_norm_f16_x_with_f32_statistics) {
    ampc_graph *g = ampc_graph_create("t");
    uint16_t xh[2] = {ampc_f32_to_f16(3), ampc_f32_to_f16(-1)};
    ampc_value *x = t_const(g, AMPC_DTYPE_F16, SHAPE(1, 2), xh);
    double s[2] = {1, 1}, b[2] = {0, 0}, m[2] = {1, 1}, v[2] = {4, 4};
    ampc_attr_arg eps0 = AMPC_ATTR_F("epsilon", 0.0f);
    ampc_value *y = batch_norm(g, x, 2, s, b, m, v, &eps0, 1);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    double want[2] = {1, -1};
    t_expect_close(&out, SHAPE(1, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, batch_norm_empty_batch) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 2, 3));
    double s[2] = {1, 1}, b[2] = {0, 0}, m[2] = {0, 0}, v[2] = {1, 1};
    ampc_value *y = batch_norm(g, x, 2, s, b, m, v, NULL, 0);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 2, 3), NULL);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    t_expect_close(&out, SHAPE(0, 2, 3), NULL, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, batch_norm_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 2, 1, 2));
    ampc_value *c2 = t_input(g, "c2", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *c3 = t_input(g, "c3", AMPC_DTYPE_F32, SHAPE(3));
    ampc_value *h2 = t_input(g, "h2", AMPC_DTYPE_F16, SHAPE(2));
    ampc_value *in[5] = {x, c3, c2, c2, c2};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BatchNormalization", in, 5, NULL, 0)));
    t_expect_diag(g, "node 0 (BatchNormalization 'BatchNormalization_0'): input 1 'c3' (scale) "
                     "must have shape [2], the channel count (dim 1 of input 0 'x' [1,2,1,2]), "
                     "got [3]");
    in[1] = c2, in[4] = c3;
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BatchNormalization", in, 5, NULL, 0)));
    t_expect_diag(g, "node 1 (BatchNormalization 'BatchNormalization_1'): input 4 'c3' "
                     "(input_var) must have shape [2], the channel count (dim 1 of input 0 'x' "
                     "[1,2,1,2]), got [3]");
    in[4] = h2;
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BatchNormalization", in, 5, NULL, 0)));
    t_expect_diag(g, "node 2 (BatchNormalization 'BatchNormalization_2'): inputs 3 'c2' and 4 "
                     "'h2' must have one dtype, got f32 and f16");
    in[4] = c2;
    ampc_attr_arg tm = AMPC_ATTR_I("training_mode", 1);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BatchNormalization", in, 5, &tm, 1)));
    cr_assert_eq(g->diag.entries[3].code, AMPC_E_UNSUPPORTED);
    t_expect_diag(g, "node 3 (BatchNormalization 'BatchNormalization_3'): training_mode=1 "
                     "(running statistics outputs) is not supported: ampc compiles inference "
                     "graphs, where BatchNormalization normalises with input_mean and input_var "
                     "(this node has training_mode=1 and 1 outputs)");
    ampc_value *x1 = t_input(g, "x1", AMPC_DTYPE_F32, SHAPE(5));
    in[0] = x1;
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BatchNormalization", in, 5, NULL, 0)));
    t_expect_diag(g, "node 4 (BatchNormalization 'BatchNormalization_4'): input 1 'c2' (scale) "
                     "must have shape [1], the channel count (1 for the 1-D input 0 'x1' [5]), "
                     "got [2]");
    ampc_graph_destroy(g);
}

/* ---- InstanceNormalization, GroupNormalization -------------------------------------------- */

/* Normalises len values of x (population variance) into y, then * s + b. */
static void norm_ref(const double *x, int len, double eps, double s, double b, double *y) {
    double m = 0, v = 0;
    for (int j = 0; j < len; j++) m += x[j];
    m /= len;
    for (int j = 0; j < len; j++) v += (x[j] - m) * (x[j] - m);
    v /= len;
    for (int j = 0; j < len; j++) y[j] = (x[j] - m) / sqrt(v + eps) * s + b;
}

Test(norm, instance_norm_per_sample_and_channel) {
    /* X [2, 2, 3]: each (n, c) row of 3 is normalised on its own. */
    double xv[12] = {1, 2, 3, 2, 2, 2, -1, 0, 4, 10, 20, 60};
    double s[2] = {1, 2}, b[2] = {0, 0.5};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 2, 3)), t_const_f32(g, SHAPE(2), s),
                         t_const_f32(g, SHAPE(2), b)};
    ampc_value *y = ampc_op(g, "InstanceNormalization", in, 3, NULL, 0);
    float xf[12];
    for (int i = 0; i < 12; i++) xf[i] = (float)xv[i];
    ampc_tensor xt = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 2, 3), xf);
    ampc_tensor out = t_eval1(g, y, &xt, 1);
    double want[12];
    for (int r = 0; r < 4; r++) norm_ref(&xv[r * 3], 3, (float)1e-5, s[r % 2], b[r % 2], &want[r * 3]);
    /* The constant row (2, 2, 2) has variance 0: its output is the bias, 0.5. */
    cr_assert_float_eq(want[4], 0.5, 1e-12);
    t_expect_close(&out, SHAPE(2, 2, 3), want, 1e-5, 1e-6);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, instance_norm_f64_epsilon_and_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {0, 2, 4, 4}, s[2] = {1, 1}, b[2] = {0, 0};
    ampc_value *in[3] = {t_const(g, AMPC_DTYPE_F64, SHAPE(1, 2, 2), xv),
                         t_const(g, AMPC_DTYPE_F64, SHAPE(2), s), t_const(g, AMPC_DTYPE_F64, SHAPE(2), b)};
    ampc_attr_arg eps = AMPC_ATTR_F("epsilon", 1.0f);
    ampc_tensor out = t_eval1(g, ampc_op(g, "InstanceNormalization", in, 3, &eps, 1), NULL, 0);
    double want[4] = {-1 / sqrt(2), 1 / sqrt(2), 0, 0}; /* var 1 + eps 1 */
    t_expect_close(&out, SHAPE(1, 2, 2), want, 1e-15, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 2, 4));
    ampc_value *s3 = t_input(g, "s3", AMPC_DTYPE_F32, SHAPE(3)), *b2 = t_input(g, "b2", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *bad[3] = {x, s3, b2};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "InstanceNormalization", bad, 3, NULL, 0)));
    t_expect_diag(g, "node 0 (InstanceNormalization 'InstanceNormalization_0'): input 1 's3' "
                     "(scale) must have shape [2], the channel count (dim 1 of input 0 'x' "
                     "[1,2,4]), got [3]");
    ampc_value *x1 = t_input(g, "x1", AMPC_DTYPE_F32, SHAPE(4));
    ampc_value *bad1[3] = {x1, b2, b2};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "InstanceNormalization", bad1, 3, NULL, 0)));
    t_expect_diag(g, "node 1 (InstanceNormalization 'InstanceNormalization_1'): input 0 'x1' must "
                     "have rank >= 2 ([N, C, D1, ...]), got [4]");
    ampc_graph_destroy(g);
}

Test(norm, group_norm_statistics_per_group_scale_per_channel) {
    /* X [1, 4, 2], 2 groups: channels {0, 1} and {2, 3} share statistics over 4 values. */
    double xv[8] = {1, 2, 3, 4, -2, 0, 0, 10};
    double s[4] = {1, 2, 3, 4}, b[4] = {0, 0.5, -1, 1};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(1, 4, 2), xv), t_const_f32(g, SHAPE(4), s),
                         t_const_f32(g, SHAPE(4), b)};
    ampc_attr_arg ng = AMPC_ATTR_I("num_groups", 2);
    ampc_tensor out = t_eval1(g, ampc_op(g, "GroupNormalization", in, 3, &ng, 1), NULL, 0);
    double want[8], unit[8];
    norm_ref(&xv[0], 4, (float)1e-5, 1, 0, &unit[0]);
    norm_ref(&xv[4], 4, (float)1e-5, 1, 0, &unit[4]);
    for (int i = 0; i < 8; i++) want[i] = unit[i] * s[i / 2] + b[i / 2];
    t_expect_close(&out, SHAPE(1, 4, 2), want, 1e-5, 1e-6);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, group_norm_one_group_and_one_per_channel) {
    /* num_groups 1 is a LayerNorm over [C, ...]; num_groups C an InstanceNorm. */
    double xv[6] = {1, 5, -2, 4, 0, 3}, s[3] = {1, 1, 1}, b[3] = {0, 0, 0};
    for (int k = 0; k < 2; k++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[3] = {t_const(g, AMPC_DTYPE_F64, SHAPE(1, 3, 2), xv),
                             t_const(g, AMPC_DTYPE_F64, SHAPE(3), s), t_const(g, AMPC_DTYPE_F64, SHAPE(3), b)};
        ampc_attr_arg at[2] = {AMPC_ATTR_I("num_groups", k ? 3 : 1), AMPC_ATTR_F("epsilon", 0.0f)};
        ampc_tensor out = t_eval1(g, ampc_op(g, "GroupNormalization", in, 3, at, 2), NULL, 0);
        double want[6];
        if (k == 0) norm_ref(xv, 6, 0, 1, 0, want);
        else for (int c = 0; c < 3; c++) norm_ref(&xv[2 * c], 2, 0, 1, 0, &want[2 * c]);
        t_expect_close(&out, SHAPE(1, 3, 2), want, 1e-14, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(norm, group_norm_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4, 3));
    ampc_value *s4 = t_input(g, "s4", AMPC_DTYPE_F32, SHAPE(4)), *s2 = t_input(g, "s2", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *in[3] = {x, s4, s4};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "GroupNormalization", in, 3, NULL, 0)));
    t_expect_diag(g, "node 0 (GroupNormalization 'GroupNormalization_0'): GroupNormalization needs "
                     "an int attribute 'num_groups'");
    ampc_attr_arg ng3 = AMPC_ATTR_I("num_groups", 3);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "GroupNormalization", in, 3, &ng3, 1)));
    t_expect_diag(g, "node 1 (GroupNormalization 'GroupNormalization_1'): attribute 'num_groups' "
                     "must be positive and divide the channel count 4 (dim 1 of input 0 'x'), got 3");
    /* Opset 18's per-group scale reaches here only if the importer could not expand it. */
    ampc_attr_arg ng2 = AMPC_ATTR_I("num_groups", 2);
    ampc_value *per_group[3] = {x, s2, s2};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "GroupNormalization", per_group, 3, &ng2, 1)));
    t_expect_diag(g, "node 2 (GroupNormalization 'GroupNormalization_2'): input 1 's2' (scale) must "
                     "have shape [4], the channel count (dim 1 of input 0 'x' [2,4,3]) (per "
                     "channel, as in opset 21; opset 18's per-group form is expanded by the "
                     "importer), got [2]");
    ampc_attr_arg bad_stash[2] = {AMPC_ATTR_I("num_groups", 2), AMPC_ATTR_I("stash_type", 6)};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "GroupNormalization", in, 3, bad_stash, 2)));
    t_expect_diag(g, "node 3 (GroupNormalization 'GroupNormalization_3'): attribute 'stash_type' "
                     "must be an ONNX floating-point data type (1 float, 10 float16, 11 double, "
                     "16 bfloat16), got 6");
    ampc_graph_destroy(g);
}

/* ---- LRN ---------------------------------------------------------------------------------- */

/* The ONNX LRN formula over C channels of one pixel, written out. */
static void lrn_ref(const double *x, int c, int size, double alpha, double beta, double bias,
                    double *y) {
    for (int ch = 0; ch < c; ch++) {
        int lo = ch - (size - 1) / 2, hi = ch + (size - 1 + 1) / 2; /* floor and ceil */
        double sq = 0;
        for (int i = lo < 0 ? 0 : lo; i <= (hi > c - 1 ? c - 1 : hi); i++) sq += x[i] * x[i];
        y[ch] = x[ch] / pow(bias + alpha / size * sq, beta);
    }
}

Test(norm, lrn_even_window_is_asymmetric) {
    /* size 2: the window is [c, c + 1] (floor((2-1)/2) = 0 before, ceil = 1 after). */
    double xv[5] = {1, 2, 3, 4, 5};
    ampc_graph *g = ampc_graph_create("t");
    ampc_attr_arg at[4] = {AMPC_ATTR_I("size", 2), AMPC_ATTR_F("alpha", 1.0f),
                           AMPC_ATTR_F("beta", 1.0f), AMPC_ATTR_F("bias", 1.0f)};
    ampc_value *x = t_const_f32(g, SHAPE(1, 5, 1, 1), xv);
    ampc_tensor out = t_eval1(g, ampc_op(g, "LRN", &x, 1, at, 4), NULL, 0);
    /* By hand: c0 = 1 / (1 + (1 + 4) / 2) = 2/7, c4 = 5 / (1 + 25 / 2) = 10/27. */
    double want[5];
    lrn_ref(xv, 5, 2, 1, 1, 1, want);
    cr_assert_float_eq(want[0], 2.0 / 7, 1e-15);
    cr_assert_float_eq(want[4], 10.0 / 27, 1e-15);
    t_expect_close(&out, SHAPE(1, 5, 1, 1), want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, lrn_defaults_and_spatial_dims) {
    /* X [1, 3, 2, 2] with size 3 and the default alpha 1e-4, beta 0.75, bias 1. */
    double xv[12];
    for (int i = 0; i < 12; i++) xv[i] = (i * 37 % 11) - 5.0;
    ampc_graph *g = ampc_graph_create("t");
    ampc_attr_arg size = AMPC_ATTR_I("size", 3);
    ampc_value *x = t_const(g, AMPC_DTYPE_F64, SHAPE(1, 3, 2, 2), xv);
    ampc_tensor out = t_eval1(g, ampc_op(g, "LRN", &x, 1, &size, 1), NULL, 0);
    double want[12];
    for (int p = 0; p < 4; p++) {
        double col[3] = {xv[p], xv[4 + p], xv[8 + p]}, r[3];
        lrn_ref(col, 3, 3, (float)1e-4, 0.75, 1, r);
        for (int c = 0; c < 3; c++) want[c * 4 + p] = r[c];
    }
    t_expect_close(&out, SHAPE(1, 3, 2, 2), want, 1e-14, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, lrn_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 3, 4, 4));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LRN", &x, 1, NULL, 0)));
    t_expect_diag(g, "node 0 (LRN 'LRN_0'): LRN needs an int attribute 'size' (the channel window)");
    ampc_attr_arg s0 = AMPC_ATTR_I("size", 0);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LRN", &x, 1, &s0, 1)));
    t_expect_diag(g, "node 1 (LRN 'LRN_1'): attribute 'size' must be >= 1, got 0");
    ampc_attr_arg at[2] = {AMPC_ATTR_I("size", 3), AMPC_ATTR_I("beta", 1)};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LRN", &x, 1, at, 2)));
    t_expect_diag(g, "node 2 (LRN 'LRN_2'): attribute 'beta' must be of type float, got int");
    ampc_graph_destroy(g);
}

/* ---- LpNormalization ---------------------------------------------------------------------- */

Test(norm, lp_norm_l2_l1_and_axis) {
    double xv[6] = {3, 4, 0, -1, 3, 0}; /* [2, 3] */
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_const_f32(g, SHAPE(2, 3), xv);
    ampc_attr_arg p1[2] = {AMPC_ATTR_I("p", 1), AMPC_ATTR_I("axis", 0)};
    ampc_value *l2 = ampc_op(g, "LpNormalization", &x, 1, NULL, 0);
    ampc_value *l1 = ampc_op(g, "LpNormalization", &x, 1, p1, 2);
    cr_assert_eq(ampc_output(g, l2, "o2"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, l1, "o1"), AMPC_OK);
    ampc_tensor o[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, o, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double w2[6] = {0.6, 0.8, 0, -1 / sqrt(10), 3 / sqrt(10), 0};
    /* Columns, p = 1: |3| + |-1| = 4, |4| + |3| = 7, and 0 / 0. */
    double w1[6] = {0.75, 4.0 / 7, NAN, -0.25, 3.0 / 7, NAN};
    t_expect_close(&o[0], SHAPE(2, 3), w2, 1e-6, 0);
    t_expect_close(&o[1], SHAPE(2, 3), w1, 1e-6, 0);
    ampc_tensor_free(&o[0]);
    ampc_tensor_free(&o[1]);
    ampc_graph_destroy(g);
}

Test(norm, lp_norm_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_attr_arg p3 = AMPC_ATTR_I("p", 3), ax = AMPC_ATTR_I("axis", 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LpNormalization", &x, 1, &p3, 1)));
    t_expect_diag(g, "node 0 (LpNormalization 'LpNormalization_0'): attribute 'p' must be 1 or 2, "
                     "got 3");
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LpNormalization", &x, 1, &ax, 1)));
    t_expect_diag(g, "node 1 (LpNormalization 'LpNormalization_1'): attribute 'axis' 2 is out of "
                     "range for rank 2 (expected -2 to 1)");
    ampc_graph_destroy(g);
}

/* ---- MeanVarianceNormalization ------------------------------------------------------------ */

/* (x - mean) / (sqrt(var) + 1e-9) over the given values (ONNX's function body). */
static void mvn_ref(const double *x, int len, double *y) {
    double m = 0, v = 0;
    for (int j = 0; j < len; j++) m += x[j];
    m /= len;
    for (int j = 0; j < len; j++) v += x[j] * x[j];
    v = v / len - m * m; /* E[x^2] - E[x]^2, as the function body computes it */
    for (int j = 0; j < len; j++) y[j] = (x[j] - m) / (sqrt(v) + 1e-9);
}

Test(norm, mvn_default_axes_per_channel) {
    /* X [2, 2, 1, 2]: axes [0, 2, 3] leave one group per channel, of 4 values each. */
    double xv[8] = {1, 2, 10, 20, 3, 6, 30, 70};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_const_f32(g, SHAPE(2, 2, 1, 2), xv);
    ampc_tensor out = t_eval1(g, ampc_op(g, "MeanVarianceNormalization", &x, 1, NULL, 0), NULL, 0);
    double c0[4] = {1, 2, 3, 6}, c1[4] = {10, 20, 30, 70}, y0[4], y1[4];
    mvn_ref(c0, 4, y0);
    mvn_ref(c1, 4, y1);
    double want[8] = {y0[0], y0[1], y1[0], y1[1], y0[2], y0[3], y1[2], y1[3]};
    t_expect_close(&out, SHAPE(2, 2, 1, 2), want, 1e-5, 1e-6);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, mvn_custom_axes_and_diagnostics) {
    double xv[6] = {1, 2, 3, -4, 0, 4};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_const(g, AMPC_DTYPE_F64, SHAPE(2, 3), xv);
    int64_t ax[1] = {-1};
    ampc_attr_arg at = AMPC_ATTR_IS("axes", ax, 1);
    ampc_tensor out = t_eval1(g, ampc_op(g, "MeanVarianceNormalization", &x, 1, &at, 1), NULL, 0);
    double want[6];
    mvn_ref(&xv[0], 3, &want[0]);
    mvn_ref(&xv[3], 3, &want[3]);
    t_expect_close(&out, SHAPE(2, 3), want, 1e-12, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    ampc_value *x2 = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "MeanVarianceNormalization", &x2, 1, NULL, 0)));
    t_expect_diag(g, "node 0 (MeanVarianceNormalization 'MeanVarianceNormalization_0'): axes "
                     "entry 2 is out of range for rank 2 (expected -2 to 1)");
    int64_t rep[2] = {0, -2};
    ampc_attr_arg ra = AMPC_ATTR_IS("axes", rep, 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "MeanVarianceNormalization", &x2, 1, &ra, 1)));
    t_expect_diag(g, "node 1 (MeanVarianceNormalization 'MeanVarianceNormalization_1'): axes must "
                     "not repeat an axis: axis 0 appears twice (axes[1] = -2)");
    ampc_graph_destroy(g);
}

/* ---- RMSNormalization --------------------------------------------------------------------- */

Test(norm, rms_norm_last_axis_and_scale_dtype) {
    double xv[6] = {1, 2, 3, -2, 0, 2}, sv[3] = {1, 0.5, 2};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[2] = {t_const_f32(g, SHAPE(2, 3), xv), t_const_f32(g, SHAPE(3), sv)};
    ampc_tensor out = t_eval1(g, ampc_op(g, "RMSNormalization", in, 2, NULL, 0), NULL, 0);
    double want[6];
    for (int r = 0; r < 2; r++) {
        double ms = 0;
        for (int j = 0; j < 3; j++) ms += xv[r * 3 + j] * xv[r * 3 + j];
        ms /= 3;
        for (int j = 0; j < 3; j++) want[r * 3 + j] = xv[r * 3 + j] / sqrt(ms + (float)1e-5) * sv[j];
    }
    t_expect_close(&out, SHAPE(2, 3), want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    /* An f16 scale makes an f16 Y from an f32 X; axis 0 normalises the whole tensor. */
    g = ampc_graph_create("t");
    uint16_t h[1] = {ampc_f32_to_f16(2)};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("axis", 0), AMPC_ATTR_F("epsilon", 0.0f)};
    ampc_value *in2[2] = {t_const_f32(g, SHAPE(2, 2), (double[]){3, -3, 3, -3}),
                          t_const(g, AMPC_DTYPE_F16, SHAPE(1), h)};
    ampc_value *y = ampc_op(g, "RMSNormalization", in2, 2, at, 2);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    out = t_eval1(g, y, NULL, 0);
    double w2[4] = {2, -2, 2, -2};
    t_expect_close(&out, SHAPE(2, 2), w2, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(norm, rms_norm_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4));
    ampc_value *s3 = t_input(g, "s3", AMPC_DTYPE_F32, SHAPE(3)), *si = t_input(g, "si", AMPC_DTYPE_I32, SHAPE(4));
    ampc_value *in[2] = {x, s3};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RMSNormalization", in, 2, NULL, 0)));
    t_expect_diag(g, "node 0 (RMSNormalization 'RMSNormalization_0'): input 1 's3' (scale) must "
                     "broadcast to the shape of input 0 'x' [2,4], got [3]");
    in[1] = si;
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RMSNormalization", in, 2, NULL, 0)));
    t_expect_diag(g, "node 1 (RMSNormalization 'RMSNormalization_1'): input 1 'si' must be a "
                     "floating-point type, got i32");
    ampc_graph_destroy(g);
}

Test(norm, new_norms_keep_empty_batches) {
    const char *ops[4] = {"LRN", "LpNormalization", "MeanVarianceNormalization",
                          "InstanceNormalization"};
    for (int i = 0; i < 4; i++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 2, 1, 1));
        ampc_value *in[3] = {x, t_const_f32(g, SHAPE(2), (double[]){1, 1}),
                             t_const_f32(g, SHAPE(2), (double[]){0, 0})};
        ampc_attr_arg size = AMPC_ATTR_I("size", 1);
        ampc_value *y = ampc_op(g, ops[i], in, i == 3 ? 3 : 1, &size, i == 0);
        ampc_tensor xt = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 2, 1, 1), NULL);
        ampc_tensor out = t_eval1(g, y, &xt, 1);
        t_expect_close(&out, SHAPE(0, 2, 1, 1), NULL, 0, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

/* The training form: three outputs (Y, running_mean, running_var) with training_mode=1 gets the
 * clear unsupported message rather than an arity error; so do the extra outputs alone, which
 * selected training before opset 14. */
Test(norm, batch_norm_training_outputs_are_unsupported) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[5] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 2, 3)),
                         t_input(g, "s", AMPC_DTYPE_F32, SHAPE(2)),
                         t_input(g, "b", AMPC_DTYPE_F32, SHAPE(2)),
                         t_input(g, "m", AMPC_DTYPE_F32, SHAPE(2)),
                         t_input(g, "v", AMPC_DTYPE_F32, SHAPE(2))};
    ampc_value *outs[4];
    ampc_attr_arg tm = AMPC_ATTR_I("training_mode", 1);
    cr_assert_eq(ampc_op_multi(g, "BatchNormalization", in, 5, &tm, 1, outs, 3),
                 AMPC_E_UNSUPPORTED);
    cr_assert(ampc_value_is_poisoned(outs[0]) && ampc_value_is_poisoned(outs[2]));
    t_expect_diag(g, "node 0 (BatchNormalization 'BatchNormalization_0'): training_mode=1 "
                     "(running statistics outputs) is not supported: ampc compiles inference "
                     "graphs, where BatchNormalization normalises with input_mean and input_var "
                     "(this node has training_mode=1 and 3 outputs)");
    cr_assert_eq(ampc_op_multi(g, "BatchNormalization", in, 5, NULL, 0, outs, 3),
                 AMPC_E_UNSUPPORTED);
    t_expect_diag(g, "node 1 (BatchNormalization 'BatchNormalization_1'): training_mode=1 "
                     "(running statistics outputs) is not supported: ampc compiles inference "
                     "graphs, where BatchNormalization normalises with input_mean and input_var "
                     "(this node has training_mode=0 and 3 outputs)");
    cr_assert_eq(ampc_op_multi(g, "BatchNormalization", in, 5, NULL, 0, outs, 4),
                 AMPC_E_INVALID_ARG);
    t_expect_diag(g, "node 2 (BatchNormalization 'BatchNormalization_2'): BatchNormalization has "
                     "1 to 3 outputs, got 4");
    ampc_graph_destroy(g);
}

/* Found by fuzz_compile: Scale is a required input of LayerNormalization, but the op table let
 * the node build with X alone; the reference evaluator and the GPU lowering then read a Scale
 * that was not there. */
Test(norm, layer_norm_without_scale_does_not_build) {
    ampc_graph *g = ampc_graph_create("ln");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 4));
    ampc_value *y = ampc_op(g, "LayerNormalization", &x, 1, NULL, 0);
    cr_assert(ampc_value_is_poisoned(y));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_INVALID_ARG);
    cr_assert(strstr(ampc_graph_errors(g), "LayerNormalization takes 2 to 3 inputs, got 1"), "%s",
              ampc_graph_errors(g));
    ampc_value *in[2] = {x, NULL};
    ampc_graph_clear_errors(g);
    y = ampc_op(g, "LayerNormalization", in, 2, NULL, 0);
    cr_assert(ampc_value_is_poisoned(y));
    cr_assert(strstr(ampc_graph_errors(g), "input 1 is required but absent"), "%s",
              ampc_graph_errors(g));
    ampc_graph_destroy(g);
}
