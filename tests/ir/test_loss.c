/*
 * test_loss.c — NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the three reductions,
 * class weights, ignore_index (inside and outside the class range, negative), extra spatial
 * dims, the optional log_prob output, f64 and f16, out-of-range targets (a value error) and the
 * exact diagnostics. Expected values are the ONNX definitions written out with loops.
 */
#include "support.h"

#include <math.h>
#include <string.h>

/* A loss node (op) over input x, target t and optional weight w, with attributes. */
static ampc_value *loss(ampc_graph *g, const char *op, ampc_value *x, ampc_value *t, ampc_value *w,
                        const ampc_attr_arg *at, int32_t n_at) {
    ampc_value *in[3] = {x, t, w};
    return ampc_op(g, op, in, w ? 3 : 2, at, n_at);
}

/* The NLL of log-probabilities lp [n, c, d] with targets t [n, d]: per-element losses into
 * `each` (may be NULL), and the sum and applied weight sum. ii < -1000 means no ignore_index. */
static void nll_ref(const double *lp, const int64_t *t, const double *w, int n, int c, int d,
                    int64_t ii, double *each, double *sum, double *wsum) {
    *sum = 0, *wsum = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d; k++) {
            int64_t cls = t[i * d + k];
            double l = 0, wt = 0;
            if (cls != ii) {
                wt = w ? w[cls] : 1;
                l = -lp[(i * c + cls) * d + k] * wt;
            }
            if (each) each[i * d + k] = l;
            *sum += l, *wsum += wt;
        }
}

static const double lp34[12] = {-1.2, -0.5, -2.0, -3.1, -0.1, -4.0, -2.5, -1.5,
                                -0.7, -0.9, -3.3, -0.2}; /* [3, 4] */

Test(loss, nll_reductions_without_weight) {
    const int64_t tv[3] = {1, 0, 3};
    const char *red[3] = {"none", "sum", "mean"};
    double each[3], sum, wsum;
    nll_ref(lp34, tv, NULL, 3, 4, 1, -10000, each, &sum, &wsum);
    cr_assert_float_eq(sum, 0.5 + 0.1 + 0.2, 1e-12); /* by hand */
    for (int r = 0; r < 3; r++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_attr_arg at = AMPC_ATTR_S("reduction", red[r]);
        ampc_value *y = loss(g, "NegativeLogLikelihoodLoss", t_const_f32(g, SHAPE(3, 4), lp34),
                             t_const_i64(g, SHAPE(3), tv), NULL, &at, 1);
        ampc_tensor out = t_eval1(g, y, NULL, 0);
        if (r == 0) t_expect_close(&out, SHAPE(3), each, 1e-6, 0);
        else {
            double v = r == 1 ? sum : sum / 3;
            t_expect_close(&out, SHAPE(), &v, 1e-6, 0);
        }
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(loss, nll_weighted_mean_divides_by_applied_weights) {
    const int64_t tv[3] = {1, 1, 2};
    const double w[4] = {0.1, 2, 0.5, 7};
    double sum, wsum;
    nll_ref(lp34, tv, w, 3, 4, 1, -10000, NULL, &sum, &wsum);
    cr_assert_float_eq(wsum, 4.5, 1e-12);
    ampc_graph *g = ampc_graph_create("t"); /* reduction defaults to mean */
    ampc_value *y = loss(g, "NegativeLogLikelihoodLoss", t_const_f32(g, SHAPE(3, 4), lp34),
                         t_const(g, AMPC_DTYPE_I32, SHAPE(3), (int32_t[]){1, 1, 2}),
                         t_const_f32(g, SHAPE(4), w), NULL, 0);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    double want = sum / wsum; /* (2 * 0.5 + 2 * 4.0 + 0.5 * 3.3) / 4.5 */
    cr_assert_float_eq(want, (1.0 + 8.0 + 1.65) / 4.5, 1e-12);
    t_expect_close(&out, SHAPE(), &want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(loss, nll_ignore_index_in_and_out_of_range) {
    /* ignore_index 3 is a valid class; -1 and 100 are outside [0, C). */
    const int64_t iis[3] = {3, -1, 100};
    const int64_t tvs[3][3] = {{3, 0, 2}, {-1, 0, 2}, {100, 0, 2}};
    const double w[4] = {1, 2, 3, 4};
    for (int k = 0; k < 3; k++) {
        double sum, wsum;
        nll_ref(lp34, tvs[k], w, 3, 4, 1, iis[k], NULL, &sum, &wsum);
        cr_assert_float_eq(wsum, 1 + 3, 1e-12); /* the first target is ignored */
        ampc_graph *g = ampc_graph_create("t");
        ampc_attr_arg at = AMPC_ATTR_I("ignore_index", iis[k]);
        ampc_value *y = loss(g, "NegativeLogLikelihoodLoss", t_const_f32(g, SHAPE(3, 4), lp34),
                             t_const_i64(g, SHAPE(3), tvs[k]), t_const_f32(g, SHAPE(4), w), &at, 1);
        ampc_tensor out = t_eval1(g, y, NULL, 0);
        double want = sum / wsum;
        t_expect_close(&out, SHAPE(), &want, 1e-6, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(loss, nll_spatial_dims_none_and_all_ignored) {
    /* input [2, 3, 2] (N, C, d1), target [2, 2]. */
    double lp[12];
    for (int i = 0; i < 12; i++) lp[i] = -0.25 * (i % 5) - 0.1 * i;
    const int64_t tv[4] = {0, 2, 1, 1};
    double each[4], sum, wsum;
    nll_ref(lp, tv, NULL, 2, 3, 2, 1, each, &sum, &wsum); /* ignore_index 1 */
    ampc_graph *g = ampc_graph_create("t");
    ampc_attr_arg at[2] = {AMPC_ATTR_S("reduction", "none"), AMPC_ATTR_I("ignore_index", 1)};
    ampc_value *y = loss(g, "NegativeLogLikelihoodLoss", t_const(g, AMPC_DTYPE_F64, SHAPE(2, 3, 2), lp),
                         t_const_i64(g, SHAPE(2, 2), tv), NULL, at, 2);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    cr_assert_float_eq(each[2], 0, 0);
    t_expect_close(&out, SHAPE(2, 2), each, 1e-15, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    /* Every target ignored: the mean is 0 / 0. */
    g = ampc_graph_create("t");
    ampc_attr_arg ii = AMPC_ATTR_I("ignore_index", 1);
    y = loss(g, "NegativeLogLikelihoodLoss", t_const(g, AMPC_DTYPE_F64, SHAPE(2, 3, 2), lp),
             t_const_i64(g, SHAPE(2, 2), (int64_t[]){1, 1, 1, 1}), NULL, &ii, 1);
    out = t_eval1(g, y, NULL, 0);
    double nan1 = NAN;
    t_expect_close(&out, SHAPE(), &nan1, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(loss, nll_target_out_of_range_is_a_value_error) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *t = t_input(g, "t", AMPC_DTYPE_I64, SHAPE(2));
    ampc_attr_arg ii = AMPC_ATTR_I("ignore_index", -1);
    ampc_value *y = loss(g, "NegativeLogLikelihoodLoss", x, t, NULL, &ii, 1);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    float xv[6] = {0};
    int64_t tv[2] = {-1, 3}; /* -1 is ignored; 3 is not a class */
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), xv), t_tensor(AMPC_DTYPE_I64, SHAPE(2), tv)};
    ampc_tensor out = {0};
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_E_EVAL);
    t_expect_diag(g, "node 0 (NegativeLogLikelihoodLoss 'NegativeLogLikelihoodLoss_0'): input 1 "
                     "'t' holds 3 at element 1, outside the class range [0, 3) and not "
                     "ignore_index");
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* ---- SoftmaxCrossEntropyLoss ------------------------------------------------------------- */

/* log-softmax over dim 1 of scores [n, c, d], written without any shift (small inputs). */
static void log_softmax_ref(const double *x, int n, int c, int d, double *lp) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < d; k++) {
            double z = 0;
            for (int j = 0; j < c; j++) z += exp(x[(i * c + j) * d + k]);
            for (int j = 0; j < c; j++) lp[(i * c + j) * d + k] = x[(i * c + j) * d + k] - log(z);
        }
}

Test(loss, sce_mean_and_log_prob) {
    const double sv[6] = {1, 2, 3, 0.5, -1, 0}; /* [2, 3] */
    const int64_t lv[2] = {2, 0};
    double lp[6], sum, wsum;
    log_softmax_ref(sv, 2, 3, 1, lp);
    nll_ref(lp, lv, NULL, 2, 3, 1, -10000, NULL, &sum, &wsum);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[2] = {t_input(g, "scores", AMPC_DTYPE_F32, SHAPE(2, 3)), t_const_i64(g, SHAPE(2), lv)};
    ampc_value *outs[2];
    cr_assert_eq(ampc_op_multi(g, "SoftmaxCrossEntropyLoss", in, 2, NULL, 0, outs, 2), AMPC_OK,
                 "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, outs[0], "loss"), AMPC_OK);
    cr_assert_eq(ampc_output(g, outs[1], "log_prob"), AMPC_OK);
    float sf[6];
    for (int i = 0; i < 6; i++) sf[i] = (float)sv[i];
    ampc_tensor xt = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), sf), o[2];
    cr_assert_eq(ampc_graph_evaluate(g, &xt, 1, o, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double want = sum / 2;
    t_expect_close(&o[0], SHAPE(), &want, 1e-6, 0);
    t_expect_close(&o[1], SHAPE(2, 3), lp, 1e-6, 0);
    ampc_tensor_free(&o[0]);
    ampc_tensor_free(&o[1]);
    ampc_graph_destroy(g);
}

Test(loss, sce_weights_ignore_index_and_spatial) {
    /* scores [2, 3, 2] (N, C, d1), labels [2, 2] with ignore_index 0, weights [3]. */
    double sv[12];
    for (int i = 0; i < 12; i++) sv[i] = sin(i * 1.7) * 2;
    const int64_t lv[4] = {0, 2, 1, 0};
    const double w[3] = {0.3, 1.5, 2};
    const char *red[3] = {"none", "sum", "mean"};
    double lp[12], each[4], sum, wsum;
    log_softmax_ref(sv, 2, 3, 2, lp);
    nll_ref(lp, lv, w, 2, 3, 2, 0, each, &sum, &wsum);
    for (int r = 0; r < 3; r++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_attr_arg at[2] = {AMPC_ATTR_S("reduction", red[r]), AMPC_ATTR_I("ignore_index", 0)};
        ampc_value *y = loss(g, "SoftmaxCrossEntropyLoss", t_const(g, AMPC_DTYPE_F64, SHAPE(2, 3, 2), sv),
                             t_const(g, AMPC_DTYPE_I32, SHAPE(2, 2), (int32_t[]){0, 2, 1, 0}),
                             t_const(g, AMPC_DTYPE_F64, SHAPE(3), w), at, 2);
        ampc_tensor out = t_eval1(g, y, NULL, 0);
        if (r == 0) t_expect_close(&out, SHAPE(2, 2), each, 1e-14, 0);
        else {
            double v = r == 1 ? sum : sum / wsum;
            cr_assert_float_eq(wsum, 1.5 + 2, 1e-12);
            t_expect_close(&out, SHAPE(), &v, 1e-14, 0);
        }
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(loss, sce_is_stable_and_f16) {
    /* Scores near 1000 would overflow exp; the column maximum is subtracted first. */
    ampc_graph *g = ampc_graph_create("t");
    double sv[2] = {1000, 1001};
    ampc_value *y = loss(g, "SoftmaxCrossEntropyLoss", t_const(g, AMPC_DTYPE_F64, SHAPE(1, 2), sv),
                         t_const_i64(g, SHAPE(1), (int64_t[]){0}), NULL, NULL, 0);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    double want = log(1 + exp(1)); /* -log(e^0 / (e^0 + e^1)) */
    t_expect_close(&out, SHAPE(), &want, 1e-14, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    uint16_t h[2] = {ampc_f32_to_f16(0), ampc_f32_to_f16(0)};
    y = loss(g, "SoftmaxCrossEntropyLoss", t_const(g, AMPC_DTYPE_F16, SHAPE(1, 2), h),
             t_const_i64(g, SHAPE(1), (int64_t[]){1}), NULL, NULL, 0);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    out = t_eval1(g, y, NULL, 0);
    double l2 = ampc_f16_to_f32(ampc_f32_to_f16((float)log(2)));
    t_expect_close(&out, SHAPE(), &l2, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(loss, loss_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 4));
    ampc_value *tf = t_input(g, "tf", AMPC_DTYPE_F32, SHAPE(2, 4));
    ampc_value *t5 = t_input(g, "t5", AMPC_DTYPE_I64, SHAPE(2, 5));
    ampc_value *t = t_input(g, "t", AMPC_DTYPE_I64, SHAPE(2, 4));
    ampc_value *w2 = t_input(g, "w2", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *x1 = t_input(g, "x1", AMPC_DTYPE_F32, SHAPE(3));
    cr_assert(ampc_value_is_poisoned(loss(g, "NegativeLogLikelihoodLoss", x, tf, NULL, NULL, 0)));
    t_expect_diag(g, "node 0 (NegativeLogLikelihoodLoss 'NegativeLogLikelihoodLoss_0'): input 1 "
                     "'tf' (target) must be i32 or i64, got f32");
    cr_assert(ampc_value_is_poisoned(loss(g, "NegativeLogLikelihoodLoss", x, t5, NULL, NULL, 0)));
    t_expect_diag(g, "node 1 (NegativeLogLikelihoodLoss 'NegativeLogLikelihoodLoss_1'): input 1 "
                     "'t5' (target) must have the shape of input 0 'x' [2,3,4] without its class "
                     "dim 1, got [2,5]");
    cr_assert(ampc_value_is_poisoned(loss(g, "SoftmaxCrossEntropyLoss", x, t, w2, NULL, 0)));
    t_expect_diag(g, "node 2 (SoftmaxCrossEntropyLoss 'SoftmaxCrossEntropyLoss_2'): input 2 'w2' "
                     "(weights) must have shape [3], the class count (dim 1 of input 0 'x'), got "
                     "[2]");
    ampc_attr_arg bad = AMPC_ATTR_S("reduction", "max");
    cr_assert(ampc_value_is_poisoned(loss(g, "SoftmaxCrossEntropyLoss", x, t, NULL, &bad, 1)));
    t_expect_diag(g, "node 3 (SoftmaxCrossEntropyLoss 'SoftmaxCrossEntropyLoss_3'): attribute "
                     "'reduction' must be the string \"none\", \"sum\" or \"mean\"");
    cr_assert(ampc_value_is_poisoned(loss(g, "SoftmaxCrossEntropyLoss", x1, t, NULL, NULL, 0)));
    t_expect_diag(g, "node 4 (SoftmaxCrossEntropyLoss 'SoftmaxCrossEntropyLoss_4'): input 0 'x1' "
                     "(scores) must have rank >= 2 ([N, C, D1, ...]), got [3]");
    ampc_attr_arg iif = AMPC_ATTR_F("ignore_index", 1.0f);
    cr_assert(ampc_value_is_poisoned(loss(g, "NegativeLogLikelihoodLoss", x, t, NULL, &iif, 1)));
    t_expect_diag(g, "node 5 (NegativeLogLikelihoodLoss 'NegativeLogLikelihoodLoss_5'): attribute "
                     "'ignore_index' must be an int");
    ampc_graph_destroy(g);
}

Test(loss, output_shapes_follow_reduction) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F64, SHAPE(2, 3, 4, 5));
    ampc_value *t = t_input(g, "t", AMPC_DTYPE_I32, SHAPE(2, 4, 5));
    ampc_attr_arg none = AMPC_ATTR_S("reduction", "none");
    ampc_value *a = loss(g, "NegativeLogLikelihoodLoss", x, t, NULL, &none, 1);
    ampc_value *b = loss(g, "NegativeLogLikelihoodLoss", x, t, NULL, NULL, 0);
    ampc_value *in[2] = {x, t}, *outs[2];
    cr_assert_eq(ampc_op_multi(g, "SoftmaxCrossEntropyLoss", in, 2, &none, 1, outs, 2), AMPC_OK);
    char s[AMPC_TYPE_STR_MAX];
    cr_assert_str_eq(ampc_value_type_str(a, s, sizeof s), "f64[2,4,5]");
    cr_assert_str_eq(ampc_value_type_str(b, s, sizeof s), "f64[]");
    cr_assert_str_eq(ampc_value_type_str(outs[0], s, sizeof s), "f64[2,4,5]");
    cr_assert_str_eq(ampc_value_type_str(outs[1], s, sizeof s), "f64[2,3,4,5]");
    ampc_graph_destroy(g);
}
