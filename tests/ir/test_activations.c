/*
 * test_activations.c — the unary math and activation ops added to the elementwise family:
 * trigonometric and hyperbolic functions, Round, Softplus, Softsign, Mish, HardSwish,
 * HardSigmoid, LeakyRelu, Elu, Selu, Celu, ThresholdedRelu, Shrink, Swish, IsNaN and IsInf.
 * Expected values are worked out by hand where they are simple and otherwise come from the
 * ONNX formula written literally (no stabilising rewrites), in f32, f64 and f16, with NaN,
 * infinities, attribute defaults and the exact diagnostics.
 */
#include "support.h"

#include <math.h>
#include <stdlib.h>

/* A tensor of dtype t (f32, f64 or f16) holding vals; free its data with free(). */
static ampc_tensor typed(ampc_dtype t, ampc_shape s, const double *vals) {
    int64_t n = ampc_shape_numel(&s);
    void *p = malloc((size_t)(n ? n : 1) * ampc_dtype_size(t));
    for (int64_t i = 0; i < n; i++) {
        if (t == AMPC_DTYPE_F32) ((float *)p)[i] = (float)vals[i];
        else if (t == AMPC_DTYPE_F64) ((double *)p)[i] = vals[i];
        else if (t == AMPC_DTYPE_F16) ((uint16_t *)p)[i] = ampc_f32_to_f16((float)vals[i]);
        else if (t == AMPC_DTYPE_I32) ((int32_t *)p)[i] = (int32_t)vals[i];
        else cr_assert_fail("typed(): unhandled dtype");
    }
    return t_tensor(t, s, p);
}

/* Runs op (with attributes) on a graph input of dtype t holding x[0..n-1] and checks the output
 * (of dtype t) against want within rtol. */
static void check(const char *op, ampc_dtype t, const double *x, int n, const ampc_attr_arg *at,
                  int n_at, const double *want, double rtol) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in = t_input(g, "x", t, SHAPE(n));
    ampc_value *y = ampc_op(g, op, &in, 1, at, n_at);
    cr_assert_not(ampc_value_is_poisoned(y), "%s: %s", op, ampc_graph_errors(g));
    cr_assert_eq(ampc_value_dtype(y), t, "%s keeps the input dtype", op);
    ampc_tensor xt = typed(t, SHAPE(n), x);
    ampc_tensor out = t_eval1(g, y, &xt, 1);
    t_expect_close(&out, SHAPE(n), want, rtol, 1e-12);
    free(xt.data);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* ---- trigonometric and hyperbolic ----------------------------------------------------------- */

Test(activations, trigonometric_values_by_hand) {
    const double pi = 3.14159265358979323846;
    double x[3] = {0, 0.5, 1};
    double sin_x[3] = {pi / 6, 0, pi / 2}, sin_w[3] = {0.5, 0, 1};
    check("Sin", AMPC_DTYPE_F64, sin_x, 3, NULL, 0, sin_w, 1e-15);
    double cos_x[3] = {0, pi / 3, pi}, cos_w[3] = {1, 0.5, -1};
    check("Cos", AMPC_DTYPE_F64, cos_x, 3, NULL, 0, cos_w, 1e-15);
    double tan_x[2] = {pi / 4, -pi / 4}, tan_w[2] = {1, -1};
    check("Tan", AMPC_DTYPE_F64, tan_x, 2, NULL, 0, tan_w, 1e-15);
    double asin_w[3] = {0, pi / 6, pi / 2};
    check("Asin", AMPC_DTYPE_F64, x, 3, NULL, 0, asin_w, 1e-15);
    double acos_w[3] = {pi / 2, pi / 3, 0};
    check("Acos", AMPC_DTYPE_F64, x, 3, NULL, 0, acos_w, 1e-15);
    double atan_x[3] = {0, 1, -1}, atan_w[3] = {0, pi / 4, -pi / 4};
    check("Atan", AMPC_DTYPE_F64, atan_x, 3, NULL, 0, atan_w, 1e-15);
    /* Outside the domain: NaN, as C and numpy give. */
    double out_x[2] = {2, -1.5}, nan2[2] = {NAN, NAN};
    check("Asin", AMPC_DTYPE_F32, out_x, 2, NULL, 0, nan2, 0);
    check("Acos", AMPC_DTYPE_F32, out_x, 2, NULL, 0, nan2, 0);
}

Test(activations, hyperbolic_match_exponential_formulas) {
    double x[4] = {-2, -0.5, 0, 1.25};
    double sinh_w[4], cosh_w[4], asinh_w[4];
    for (int i = 0; i < 4; i++) {
        sinh_w[i] = (exp(x[i]) - exp(-x[i])) / 2;
        cosh_w[i] = (exp(x[i]) + exp(-x[i])) / 2;
        asinh_w[i] = log(x[i] + sqrt(x[i] * x[i] + 1));
    }
    check("Sinh", AMPC_DTYPE_F32, x, 4, NULL, 0, sinh_w, 1e-6);
    check("Cosh", AMPC_DTYPE_F64, x, 4, NULL, 0, cosh_w, 1e-14);
    check("Asinh", AMPC_DTYPE_F64, x, 4, NULL, 0, asinh_w, 1e-14);
    double ac_x[3] = {1, 2, 10}, ac_w[3];
    for (int i = 0; i < 3; i++) ac_w[i] = log(ac_x[i] + sqrt(ac_x[i] * ac_x[i] - 1));
    check("Acosh", AMPC_DTYPE_F32, ac_x, 3, NULL, 0, ac_w, 1e-6);
    double at_x[4] = {0, 0.5, -0.5, 1}, at_w[4];
    for (int i = 0; i < 4; i++) at_w[i] = 0.5 * log((1 + at_x[i]) / (1 - at_x[i]));
    check("Atanh", AMPC_DTYPE_F64, at_x, 4, NULL, 0, at_w, 1e-14); /* atanh(1) = +inf */
}

Test(activations, f16_trig_rounds_once) {
    double x[2] = {0.5, 1}, w[2];
    for (int i = 0; i < 2; i++) w[i] = ampc_f16_to_f32(ampc_f32_to_f16((float)sin(x[i])));
    check("Sin", AMPC_DTYPE_F16, x, 2, NULL, 0, w, 0);
}

/* ---- Round ---------------------------------------------------------------------------------- */

Test(activations, round_halves_to_even) {
    double x[10] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -2.6, 1e10 + 0.5};
    double w[10] = {0, 2, 2, -0.0, -2, -2, 2, 3, -3, 1e10};
    check("Round", AMPC_DTYPE_F64, x, 10, NULL, 0, w, 0);
    check("Round", AMPC_DTYPE_F32, x, 9, NULL, 0, w, 0);
    check("Round", AMPC_DTYPE_F16, x, 9, NULL, 0, w, 0);
    double s[3] = {NAN, INFINITY, -INFINITY};
    check("Round", AMPC_DTYPE_F32, s, 3, NULL, 0, s, 0);
}

/* ---- smooth activations --------------------------------------------------------------------- */

Test(activations, softplus_softsign_mish_values) {
    double x[5] = {-3, -1, 0, 1, 2};
    double sp[5], ss[5] = {-0.75, -0.5, 0, 0.5, 2.0 / 3}, mish[5];
    for (int i = 0; i < 5; i++) {
        sp[i] = log(exp(x[i]) + 1);
        mish[i] = x[i] * tanh(log(1 + exp(x[i])));
    }
    check("Softplus", AMPC_DTYPE_F32, x, 5, NULL, 0, sp, 1e-6);
    check("Softsign", AMPC_DTYPE_F32, x, 5, NULL, 0, ss, 1e-7);
    check("Mish", AMPC_DTYPE_F64, x, 5, NULL, 0, mish, 1e-14);
}

Test(activations, softplus_and_mish_do_not_overflow) {
    /* e^1000 overflows a double; softplus(1000) is 1000 and mish(1000) is 1000. */
    double x[3] = {1000, -1000, NAN}, sp[3] = {1000, 0, NAN}, mish[3] = {1000, -0.0, NAN};
    check("Softplus", AMPC_DTYPE_F64, x, 3, NULL, 0, sp, 1e-15);
    check("Mish", AMPC_DTYPE_F64, x, 3, NULL, 0, mish, 1e-15);
}

Test(activations, hard_swish_and_hard_sigmoid) {
    /* HardSwish: x * clamp(x / 6 + 0.5, 0, 1). */
    double x[6] = {-4, -3, -1, 0, 1, 3.5};
    double hs[6] = {0, 0, -1 * (0.5 - 1.0 / 6), 0, 1 * (0.5 + 1.0 / 6), 3.5};
    check("HardSwish", AMPC_DTYPE_F32, x, 6, NULL, 0, hs, 1e-6);
    /* HardSigmoid defaults alpha 0.2, beta 0.5: clamp(0.2x + 0.5, 0, 1). */
    double hsg[6] = {0, 0, 0.3, 0.5, 0.7, 1};
    check("HardSigmoid", AMPC_DTYPE_F32, x, 6, NULL, 0, hsg, 1e-6);
    ampc_attr_arg at[2] = {AMPC_ATTR_F("alpha", 0.5f), AMPC_ATTR_F("beta", 0.25f)};
    double hsg2[6] = {0, 0, 0, 0.25, 0.75, 1};
    check("HardSigmoid", AMPC_DTYPE_F64, x, 6, at, 2, hsg2, 1e-15);
    double nan1[1] = {NAN};
    check("HardSigmoid", AMPC_DTYPE_F32, nan1, 1, NULL, 0, nan1, 0);
    check("HardSwish", AMPC_DTYPE_F32, nan1, 1, NULL, 0, nan1, 0);
}

/* ---- piecewise activations with attributes -------------------------------------------------- */

Test(activations, leaky_relu_default_and_alpha) {
    double x[4] = {-2, -0.5, 0, 3};
    double w[4] = {-0.02, -0.005, 0, 3};
    check("LeakyRelu", AMPC_DTYPE_F32, x, 4, NULL, 0, w, 1e-6);
    ampc_attr_arg at = AMPC_ATTR_F("alpha", 0.1f);
    double w2[4] = {-0.2, -0.05, 0, 3};
    check("LeakyRelu", AMPC_DTYPE_F16, x, 4, &at, 1, w2, 1e-3);
}

Test(activations, elu_selu_celu_formulas) {
    double x[5] = {-3, -1, 0, 0.5, 2};
    double elu[5], elu2[5], selu[5], celu[5], celu2[5];
    const double sa = 1.67326319217681884765625, sg = 1.05070102214813232421875;
    for (int i = 0; i < 5; i++) {
        elu[i] = x[i] < 0 ? 1.0 * (exp(x[i]) - 1) : x[i];
        elu2[i] = x[i] < 0 ? 2.0 * (exp(x[i]) - 1) : x[i];
        selu[i] = x[i] <= 0 ? sg * (sa * exp(x[i]) - sa) : sg * x[i];
        celu[i] = fmax(0, x[i]) + fmin(0, 1.0 * (exp(x[i] / 1.0) - 1));
        celu2[i] = fmax(0, x[i]) + fmin(0, 2.0 * (exp(x[i] / 2.0) - 1));
    }
    check("Elu", AMPC_DTYPE_F32, x, 5, NULL, 0, elu, 1e-6);
    ampc_attr_arg a2 = AMPC_ATTR_F("alpha", 2.0f);
    check("Elu", AMPC_DTYPE_F64, x, 5, &a2, 1, elu2, 1e-14);
    check("Selu", AMPC_DTYPE_F64, x, 5, NULL, 0, selu, 1e-7); /* defaults are f32 constants */
    check("Celu", AMPC_DTYPE_F32, x, 5, NULL, 0, celu, 1e-6);
    check("Celu", AMPC_DTYPE_F64, x, 5, &a2, 1, celu2, 1e-14);
    ampc_attr_arg sel[2] = {AMPC_ATTR_F("alpha", 2.0f), AMPC_ATTR_F("gamma", 3.0f)};
    double selu2[5];
    for (int i = 0; i < 5; i++) selu2[i] = x[i] <= 0 ? 3 * (2 * exp(x[i]) - 2) : 3 * x[i];
    check("Selu", AMPC_DTYPE_F64, x, 5, sel, 2, selu2, 1e-14);
}

Test(activations, thresholded_relu_is_strict) {
    double x[5] = {-1, 0.5, 1, 1.5, 2.5};
    double w[5] = {0, 0, 0, 1.5, 2.5}; /* default alpha 1: x > 1 only */
    check("ThresholdedRelu", AMPC_DTYPE_F32, x, 5, NULL, 0, w, 0);
    ampc_attr_arg at = AMPC_ATTR_F("alpha", 2.0f);
    double w2[5] = {0, 0, 0, 0, 2.5};
    check("ThresholdedRelu", AMPC_DTYPE_F64, x, 5, &at, 1, w2, 0);
}

Test(activations, shrink_soft_hard_and_integers) {
    double x[5] = {-2, -1, 0, 1, 2};
    /* Defaults: lambd 0.5, bias 0 ("hard" shrink). */
    double hard[5] = {-2, -1, 0, 1, 2};
    check("Shrink", AMPC_DTYPE_F32, x, 5, NULL, 0, hard, 0);
    ampc_attr_arg soft[2] = {AMPC_ATTR_F("lambd", 1.5f), AMPC_ATTR_F("bias", 1.5f)};
    double sw[5] = {-0.5, 0, 0, 0, 0.5};
    check("Shrink", AMPC_DTYPE_F64, x, 5, soft, 2, sw, 0);
    /* Integers: computed with the float bias, truncated toward zero on store. */
    ampc_graph *g = ampc_graph_create("t");
    int32_t xi[5] = {-5, -1, 0, 1, 5};
    ampc_value *in = t_const(g, AMPC_DTYPE_I32, SHAPE(5), xi);
    ampc_attr_arg ib[2] = {AMPC_ATTR_F("lambd", 0.5f), AMPC_ATTR_F("bias", 1.5f)};
    ampc_value *y = ampc_op(g, "Shrink", &in, 1, ib, 2);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    int64_t wi[5] = {-3, 0, 0, 0, 3}; /* -5 + 1.5 = -3.5 -> -3; -1 + 1.5 = 0.5 -> 0 */
    t_expect_ints(&out, SHAPE(5), wi);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(activations, swish_is_x_times_sigmoid_alpha_x) {
    double x[5] = {-800, -1, 0, 1, 2}, w[5], w2[5];
    for (int i = 0; i < 5; i++) {
        w[i] = x[i] / (1 + exp(-x[i]));
        w2[i] = x[i] / (1 + exp(-0.5 * x[i]));
    }
    check("Swish", AMPC_DTYPE_F64, x, 5, NULL, 0, w, 1e-15);
    ampc_attr_arg at = AMPC_ATTR_F("alpha", 0.5f);
    check("Swish", AMPC_DTYPE_F32, x, 5, &at, 1, w2, 1e-6);
}

Test(activations, activations_propagate_nan_and_keep_empty) {
    const char *ops[8] = {"LeakyRelu", "Elu", "Selu", "Celu", "Swish", "Softplus", "Softsign",
                          "Mish"};
    double x[1] = {NAN};
    for (int i = 0; i < 8; i++) check(ops[i], AMPC_DTYPE_F32, x, 1, NULL, 0, x, 0);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 3));
    ampc_value *y = ampc_op(g, "Celu", &in, 1, NULL, 0);
    ampc_tensor xt = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 3), NULL);
    ampc_tensor out = t_eval1(g, y, &xt, 1);
    t_expect_close(&out, SHAPE(0, 3), NULL, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* ---- IsNaN, IsInf --------------------------------------------------------------------------- */

Test(activations, isnan_and_isinf_give_bool) {
    float xv[5] = {1, NAN, INFINITY, -INFINITY, 0};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(5));
    ampc_value *isnan_y = ampc_op(g, "IsNaN", &x, 1, NULL, 0);
    ampc_value *isinf_y = ampc_op(g, "IsInf", &x, 1, NULL, 0);
    ampc_attr_arg neg0 = AMPC_ATTR_I("detect_negative", 0), pos0 = AMPC_ATTR_I("detect_positive", 0);
    ampc_value *pos_y = ampc_op(g, "IsInf", &x, 1, &neg0, 1);
    ampc_value *neg_y = ampc_op(g, "IsInf", &x, 1, &pos0, 1);
    ampc_value *outs[4] = {isnan_y, isinf_y, pos_y, neg_y};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(ampc_value_dtype(outs[i]), AMPC_DTYPE_BOOL);
        cr_assert_eq(ampc_output(g, outs[i], NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    }
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(5), xv), out[4];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 4), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t w[4][5] = {{0, 1, 0, 0, 0}, {0, 0, 1, 1, 0}, {0, 0, 1, 0, 0}, {0, 0, 0, 1, 0}};
    for (int i = 0; i < 4; i++) {
        t_expect_ints(&out[i], SHAPE(5), w[i]);
        ampc_tensor_free(&out[i]);
    }
    ampc_graph_destroy(g);
}

Test(activations, isnan_of_f16_and_f64) {
    ampc_graph *g = ampc_graph_create("t");
    uint16_t h[3] = {ampc_f32_to_f16(NAN), ampc_f32_to_f16(INFINITY), ampc_f32_to_f16(1)};
    double d[3] = {-INFINITY, NAN, 2};
    ampc_value *a = t_const(g, AMPC_DTYPE_F16, SHAPE(3), h), *b = t_const(g, AMPC_DTYPE_F64, SHAPE(3), d);
    ampc_value *ya = ampc_op(g, "IsNaN", &a, 1, NULL, 0), *yb = ampc_op(g, "IsInf", &b, 1, NULL, 0);
    cr_assert_eq(ampc_output(g, ya, "a"), AMPC_OK);
    cr_assert_eq(ampc_output(g, yb, "b"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t wa[3] = {1, 0, 0}, wb[3] = {1, 0, 0};
    t_expect_ints(&out[0], SHAPE(3), wa);
    t_expect_ints(&out[1], SHAPE(3), wb);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

/* ---- diagnostics ---------------------------------------------------------------------------- */

Test(activations, float_only_ops_reject_integers) {
    const char *ops[6] = {"Sin", "Acosh", "Round", "Softplus", "HardSwish", "Elu"};
    for (int i = 0; i < 6; i++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "ids", AMPC_DTYPE_I32, SHAPE(2));
        cr_assert(ampc_value_is_poisoned(ampc_op(g, ops[i], &x, 1, NULL, 0)));
        char want[160];
        snprintf(want, sizeof want, "node 0 (%s '%s_0'): input 0 'ids' must be a floating-point "
                 "type, got i32", ops[i], ops[i]);
        t_expect_diag(g, want);
        ampc_graph_destroy(g);
    }
}

Test(activations, attribute_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_attr_arg ai = AMPC_ATTR_I("alpha", 1);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LeakyRelu", &x, 1, &ai, 1)));
    t_expect_diag(g, "node 0 (LeakyRelu 'LeakyRelu_0'): attribute 'alpha' must be of type float, "
                     "got int");
    ampc_attr_arg a0 = AMPC_ATTR_F("alpha", 0.0f);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Celu", &x, 1, &a0, 1)));
    t_expect_diag(g, "node 1 (Celu 'Celu_1'): attribute 'alpha' must be non-zero (Celu divides by "
                     "it), got 0");
    ampc_attr_arg d2 = AMPC_ATTR_I("detect_negative", 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "IsInf", &x, 1, &d2, 1)));
    t_expect_diag(g, "node 2 (IsInf 'IsInf_2'): attribute 'detect_negative' must be 0 or 1, got 2");
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_BOOL, SHAPE(2));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "IsNaN", &b, 1, NULL, 0)));
    t_expect_diag(g, "node 3 (IsNaN 'IsNaN_3'): input 0 'b' must be a floating-point type, got bool");
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Shrink", &b, 1, NULL, 0)));
    t_expect_diag(g, "node 4 (Shrink 'Shrink_4'): input 0 'b' must be a numeric type, got bool");
    ampc_graph_destroy(g);
}
