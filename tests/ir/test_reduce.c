/*
 * test_reduce.c — the reductions (ReduceSum, Mean, Max, Min, Prod, L2): output shapes for
 * keepdims 0/1, negative and repeated axes, the axes input and the older axes attribute,
 * noop_with_empty_axes, empty tensors (each reduction's identity), integer and bool dtypes, f16
 * accumulation, NaN, and the exact diagnostics. Values are computed by hand or by a nested-loop
 * formula in the test.
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reduction node on x with an optional axes input (NULL: none) and attributes. */
static ampc_value *reduce(ampc_graph *g, const char *op, ampc_value *x, ampc_value *axes,
                          const ampc_attr_arg *attrs, int32_t n_attrs) {
    ampc_value *in[2] = {x, axes};
    return ampc_op(g, op, in, axes ? 2 : 1, attrs, n_attrs);
}

static ampc_value *axes_of(ampc_graph *g, const int64_t *v, int32_t n) {
    return ampc_const_i64s(g, v, n);
}

/* x = [[1,2,3],[4,5,6]] as a graph input, with its tensor. */
static float x23[6] = {1, 2, 3, 4, 5, 6};

Test(reduce, sum_keepdims_and_negative_axis) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t ax1[1] = {1};
    ampc_value *y = reduce(g, "ReduceSum", x, axes_of(g, ax1, 1), NULL, 0);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), x23);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[2] = {6, 15};
    t_expect_close(&out, SHAPE(2, 1), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t axm2[1] = {-2};
    ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
    y = reduce(g, "ReduceSum", x, axes_of(g, axm2, 1), &kd0, 1);
    out = t_eval1(g, y, &in, 1);
    double want0[3] = {5, 7, 9};
    t_expect_close(&out, SHAPE(3), want0, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, every_op_over_all_axes) {
    const char *ops[6] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                          "ReduceL2"};
    const double want[6] = {21, 3.5, 6, 1, 720, sqrt(1 + 4 + 9 + 16 + 25 + 36)};
    for (int i = 0; i < 6; i++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
        ampc_value *y = reduce(g, ops[i], x, NULL, NULL, 0); /* no axes: all of them */
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), x23);
        ampc_tensor out = t_eval1(g, y, &in, 1);
        t_expect_close(&out, SHAPE(1, 1), &want[i], 1e-7, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(reduce, keepdims0_over_all_axes_gives_scalar) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
    double v[6] = {1, 2, 3, 4, 5, 6};
    ampc_value *y = reduce(g, "ReduceMax", t_const_f32(g, SHAPE(2, 3), v), NULL, &kd0, 1);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    double want[1] = {6};
    t_expect_close(&out, SHAPE(), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, several_axes_match_nested_loops) {
    /* x[i][j][k] = 100i + 10j + k - 50 over [2,3,4]; reduce axes {0, -1}, keepdims 1 -> [1,3,1]. */
    float xv[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                xv[(i * 3 + j) * 4 + k] = (float)(100 * i + 10 * j + k - 50);
    const char *ops[3] = {"ReduceSum", "ReduceMin", "ReduceMean"};
    for (int o = 0; o < 3; o++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 4));
        int64_t ax[2] = {0, -1};
        ampc_value *y = reduce(g, ops[o], x, axes_of(g, ax, 2), NULL, 0);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3, 4), xv);
        ampc_tensor out = t_eval1(g, y, &in, 1);
        double want[3];
        for (int j = 0; j < 3; j++) {
            double s = 0, mn = INFINITY;
            for (int i = 0; i < 2; i++)
                for (int k = 0; k < 4; k++) {
                    double e = 100 * i + 10 * j + k - 50;
                    s += e;
                    mn = e < mn ? e : mn;
                }
            want[j] = o == 0 ? s : o == 1 ? mn : s / 8;
        }
        t_expect_close(&out, SHAPE(1, 3, 1), want, 0, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(reduce, axes_attribute_of_older_opsets) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t ax[1] = {0};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("axes", ax, 1), AMPC_ATTR_I("keepdims", 0)};
    ampc_value *y = reduce(g, "ReduceProd", x, NULL, at, 2);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), x23);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[3] = {4, 10, 18};
    t_expect_close(&out, SHAPE(3), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, noop_with_empty_axes_keeps_the_shape) {
    /* Without an axes input, and with an empty one: both are "no axes". */
    for (int with_input = 0; with_input < 2; with_input++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
        ampc_attr_arg at = AMPC_ATTR_I("noop_with_empty_axes", 1);
        ampc_value *axes = with_input ? axes_of(g, NULL, 0) : NULL;
        ampc_value *y = reduce(g, "ReduceL2", x, axes, &at, 1);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), x23);
        ampc_tensor out = t_eval1(g, y, &in, 1);
        double want[6] = {1, 2, 3, 4, 5, 6};
        t_expect_close(&out, SHAPE(2, 3), want, 0, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(reduce, empty_axes_input_reduces_all_without_noop) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *y = reduce(g, "ReduceSum", x, axes_of(g, NULL, 0), NULL, 0);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), x23);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[1] = {21};
    t_expect_close(&out, SHAPE(1, 1), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, empty_set_gives_each_identity) {
    /* x is [0,3]; reducing axis 0 folds nothing into each of the 3 outputs. */
    const char *ops[6] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                          "ReduceL2"};
    const double id[6] = {0, NAN, -INFINITY, INFINITY, 1, 0};
    for (int i = 0; i < 6; i++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 3));
        int64_t ax[1] = {0};
        ampc_value *y = reduce(g, ops[i], x, axes_of(g, ax, 1), NULL, 0);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 3), NULL);
        ampc_tensor out = t_eval1(g, y, &in, 1);
        double want[3] = {id[i], id[i], id[i]};
        t_expect_close(&out, SHAPE(1, 3), want, 0, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(reduce, empty_output_when_a_kept_dim_is_zero) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 0));
    int64_t ax[1] = {0};
    ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
    ampc_value *y = reduce(g, "ReduceSum", x, axes_of(g, ax, 1), &kd0, 1);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 0), NULL);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    t_expect_close(&out, SHAPE(0), NULL, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, integer_sum_wraps_and_mean_truncates) {
    ampc_graph *g = ampc_graph_create("t");
    int32_t a[4] = {INT32_MAX, 1, -7, 0};
    ampc_value *x = t_const(g, AMPC_DTYPE_I32, SHAPE(2, 2), a);
    int64_t ax[1] = {1};
    ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
    ampc_value *s = reduce(g, "ReduceSum", x, axes_of(g, ax, 1), &kd0, 1);
    ampc_value *m = reduce(g, "ReduceMean", x, axes_of(g, ax, 1), &kd0, 1);
    cr_assert_eq(ampc_value_dtype(s), AMPC_DTYPE_I32);
    cr_assert_eq(ampc_output(g, s, "s"), AMPC_OK);
    cr_assert_eq(ampc_output(g, m, "m"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    /* The sum wraps when stored as i32; the mean divides the int64 sum, as numpy's mean of
     * int32 does in float64: (2^31 - 1 + 1) / 2 = 2^30, and -7 / 2 truncates to -3. */
    int64_t ws[2] = {INT32_MIN, -7}, wm[2] = {1LL << 30, -3};
    t_expect_ints(&out[0], SHAPE(2), ws);
    t_expect_ints(&out[1], SHAPE(2), wm);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(reduce, integer_prod_l2_and_i64) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t a[3] = {-3, 4, 5};
    ampc_value *x = t_const_i64(g, SHAPE(3), a);
    ampc_value *p = reduce(g, "ReduceProd", x, NULL, NULL, 0);
    ampc_value *l = reduce(g, "ReduceL2", x, NULL, NULL, 0);
    cr_assert_eq(ampc_output(g, p, "p"), AMPC_OK);
    cr_assert_eq(ampc_output(g, l, "l"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t wp[1] = {-60}, wl[1] = {7}; /* sqrt(50) = 7.07 truncated */
    t_expect_ints(&out[0], SHAPE(1), wp);
    t_expect_ints(&out[1], SHAPE(1), wl);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(reduce, integer_max_min_of_empty_are_type_limits) {
    const ampc_dtype types[3] = {AMPC_DTYPE_I8, AMPC_DTYPE_U8, AMPC_DTYPE_I32};
    const int64_t lo[3] = {-128, 0, INT32_MIN}, hi[3] = {127, 255, INT32_MAX};
    for (int i = 0; i < 3; i++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "x", types[i], SHAPE(2, 0));
        int64_t ax[1] = {1};
        ampc_value *mx = reduce(g, "ReduceMax", x, axes_of(g, ax, 1), NULL, 0);
        ampc_value *mn = reduce(g, "ReduceMin", x, axes_of(g, ax, 1), NULL, 0);
        cr_assert_eq(ampc_output(g, mx, "mx"), AMPC_OK, "%s", ampc_graph_errors(g));
        cr_assert_eq(ampc_output(g, mn, "mn"), AMPC_OK);
        ampc_tensor in = t_tensor(types[i], SHAPE(2, 0), NULL), out[2];
        cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
        int64_t wmx[2] = {lo[i], lo[i]}, wmn[2] = {hi[i], hi[i]};
        t_expect_ints(&out[0], SHAPE(2, 1), wmx);
        t_expect_ints(&out[1], SHAPE(2, 1), wmn);
        ampc_tensor_free(&out[0]);
        ampc_tensor_free(&out[1]);
        ampc_graph_destroy(g);
    }
}

Test(reduce, u64_max_min_compare_unsigned) {
    ampc_graph *g = ampc_graph_create("t");
    uint64_t a[3] = {5, UINT64_MAX, 1};
    ampc_value *x = t_const(g, AMPC_DTYPE_U64, SHAPE(3), a);
    ampc_value *mx = reduce(g, "ReduceMax", x, NULL, NULL, 0);
    ampc_value *mn = reduce(g, "ReduceMin", x, NULL, NULL, 0);
    cr_assert_eq(ampc_output(g, mx, "mx"), AMPC_OK);
    cr_assert_eq(ampc_output(g, mn, "mn"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(((uint64_t *)out[0].data)[0], UINT64_MAX);
    cr_assert_eq(((uint64_t *)out[1].data)[0], 1);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(reduce, bool_max_is_any_min_is_all) {
    ampc_graph *g = ampc_graph_create("t");
    uint8_t a[6] = {0, 1, 0, 1, 1, 1};
    ampc_value *x = t_const(g, AMPC_DTYPE_BOOL, SHAPE(2, 3), a);
    int64_t ax[1] = {1};
    ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
    ampc_value *mx = reduce(g, "ReduceMax", x, axes_of(g, ax, 1), &kd0, 1);
    ampc_value *mn = reduce(g, "ReduceMin", x, axes_of(g, ax, 1), &kd0, 1);
    cr_assert_eq(ampc_output(g, mx, "mx"), AMPC_OK);
    cr_assert_eq(ampc_output(g, mn, "mn"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t wmx[2] = {1, 1}, wmn[2] = {0, 1};
    t_expect_ints(&out[0], SHAPE(2), wmx);
    t_expect_ints(&out[1], SHAPE(2), wmn);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(reduce, f16_accumulates_wide_and_rounds_once) {
    /* In f16, 2048 + 1 rounds back to 2048 (spacing 2 there): a running f16 sum of
     * {2048, 1, 1} would stay 2048; a wide accumulator gives 2050, exact in f16. */
    ampc_graph *g = ampc_graph_create("t");
    uint16_t a[3] = {ampc_f32_to_f16(2048), ampc_f32_to_f16(1), ampc_f32_to_f16(1)};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(3));
    ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
    ampc_value *y = reduce(g, "ReduceSum", x, NULL, &kd0, 1);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F16, SHAPE(3), a);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[1] = {2050};
    t_expect_close(&out, SHAPE(), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, max_and_min_propagate_nan) {
    ampc_graph *g = ampc_graph_create("t");
    float a[4] = {1, NAN, 3, 2};
    ampc_value *x = t_const(g, AMPC_DTYPE_F32, SHAPE(2, 2), a);
    int64_t ax[1] = {1};
    ampc_value *mx = reduce(g, "ReduceMax", x, axes_of(g, ax, 1), NULL, 0);
    ampc_tensor out = t_eval1(g, mx, NULL, 0);
    double want[2] = {NAN, 3};
    t_expect_close(&out, SHAPE(2, 1), want, 0, 0);
    cr_assert(isnan(((float *)out.data)[0]));
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, scalar_input_reduces_to_itself) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *y = reduce(g, "ReduceMean", ampc_scalar_f32(g, 2.5f), NULL, NULL, 0);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    double want[1] = {2.5};
    t_expect_close(&out, SHAPE(), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, large_reduction_is_linear) {
    /* 2^22 elements reduced along the middle axis of [64, 4096, 16]: a quadratic kernel would not
     * finish; the values check the offsets: x = k (the last index), so each sum is 4096 k. */
    const int64_t a = 64, b = 4096, c = 16;
    float *xv = malloc((size_t)(a * b * c) * sizeof *xv);
    for (int64_t i = 0; i < a * b * c; i++) xv[i] = (float)(i % c);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(64, 4096, 16));
    int64_t ax[1] = {1};
    ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
    ampc_value *y = reduce(g, "ReduceSum", x, axes_of(g, ax, 1), &kd0, 1);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(64, 4096, 16), xv);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double *want = malloc((size_t)(a * c) * sizeof *want);
    for (int64_t i = 0; i < a * c; i++) want[i] = 4096.0 * (double)(i % c);
    t_expect_close(&out, SHAPE(64, 16), want, 0, 0);
    free(want);
    free(xv);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* ---- diagnostics -------------------------------------------------------------------------- */

Test(reduce, axis_out_of_range_is_named) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t ax[1] = {2};
    ampc_value *y = reduce(g, "ReduceSum", x, axes_of(g, ax, 1), NULL, 0);
    cr_assert(ampc_value_is_poisoned(y));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_ATTR);
    t_expect_diag(g, "node 0 (ReduceSum 'ReduceSum_0'): axes entry 2 is out of range for rank 2 "
                     "(expected -2 to 1)");
    ampc_graph_destroy(g);
}

Test(reduce, repeated_axis_is_rejected) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t ax[2] = {1, -1};
    ampc_value *y = reduce(g, "ReduceMax", x, axes_of(g, ax, 2), NULL, 0);
    cr_assert(ampc_value_is_poisoned(y));
    t_expect_diag(g, "node 0 (ReduceMax 'ReduceMax_0'): axes must not repeat an axis: axis 1 "
                     "appears twice (axes[1] = -1)");
    ampc_graph_destroy(g);
}

Test(reduce, bad_flags_and_both_axes_forms) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_attr_arg kd2 = AMPC_ATTR_I("keepdims", 2);
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceSum", x, NULL, &kd2, 1)));
    t_expect_diag(g,
                  "node 0 (ReduceSum 'ReduceSum_0'): attribute 'keepdims' must be 0 or 1, got 2");
    ampc_attr_arg noopf = AMPC_ATTR_F("noop_with_empty_axes", 1.0f);
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceSum", x, NULL, &noopf, 1)));
    t_expect_diag(g, "node 1 (ReduceSum 'ReduceSum_1'): attribute 'noop_with_empty_axes' must be "
                     "of type int, got float");
    int64_t ax[1] = {0};
    ampc_attr_arg at = AMPC_ATTR_IS("axes", ax, 1);
    ampc_value *axes = axes_of(g, ax, 1);
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceMin", x, axes, &at, 1)));
    char want[160];
    snprintf(want, sizeof want, "node 2 (ReduceMin 'ReduceMin_2'): axes are given both as input 1 "
             "'%s' and as an attribute; give one", ampc_value_name(axes));
    t_expect_diag(g, want);
    ampc_graph_destroy(g);
}

Test(reduce, dtype_rules_follow_onnx) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_I8, SHAPE(4));
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceSum", x, NULL, NULL, 0)));
    t_expect_diag(g, "node 0 (ReduceSum 'ReduceSum_0'): input 0 'x' must be f32, f16, bf16, f64, "
                     "i32, i64, u32 or u64, got i8");
    /* Max and Min also take 8-bit integers and bool, but not 16-bit integers. */
    ampc_value *m = reduce(g, "ReduceMax", x, NULL, NULL, 0);
    cr_assert_not(ampc_value_is_poisoned(m));
    cr_assert_eq(ampc_value_dtype(m), AMPC_DTYPE_I8);
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_BOOL, SHAPE(4));
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceProd", b, NULL, NULL, 0)));
    t_expect_diag(g, "node 2 (ReduceProd 'ReduceProd_2'): input 0 'b' must be f32, f16, bf16, "
                     "f64, i32, i64, u32 or u64, got bool");
    ampc_value *s = t_input(g, "s", AMPC_DTYPE_I16, SHAPE(4));
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceMin", s, NULL, NULL, 0)));
    t_expect_diag(g, "node 3 (ReduceMin 'ReduceMin_3'): input 0 's' must be f32, f16, bf16, f64, "
                     "i8, i32, i64, u8, u32, u64 or bool, got i16");
    ampc_graph_destroy(g);
}

Test(reduce, scalar_with_axes_and_runtime_axes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *s = t_input(g, "s", AMPC_DTYPE_F32, SHAPE());
    int64_t ax[1] = {0};
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceSum", s, axes_of(g, ax, 1), NULL, 0)));
    t_expect_diag(g, "node 0 (ReduceSum 'ReduceSum_0'): a scalar input 0 's' has no axes to "
                     "reduce, but axes has 1 entries");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *rt = t_input(g, "rt", AMPC_DTYPE_I64, SHAPE(1));
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceSum", x, rt, NULL, 0)));
    t_expect_diag(g, "node 1 (ReduceSum 'ReduceSum_1'): input 1 'rt' must be known at compile "
                     "time");
    ampc_graph_destroy(g);
}

/* ---- ReduceL1, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare ------------------------------- */

Test(reduce, new_ops_over_all_axes) {
    const char *ops[4] = {"ReduceL1", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
    double lse = 0;
    for (int i = 1; i <= 6; i++) lse += exp(i);
    const double want[4] = {21, log(21), log(lse), 91};
    for (int i = 0; i < 4; i++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
        ampc_value *y = reduce(g, ops[i], x, NULL, NULL, 0);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), x23);
        ampc_tensor out = t_eval1(g, y, &in, 1);
        t_expect_close(&out, SHAPE(1, 1), &want[i], 1e-7, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(reduce, new_ops_along_an_axis_with_signs) {
    /* x = [[-1, 2, -3], [4, -5, 6]] reduced over axis -1, keepdims 0. */
    double xv[6] = {-1, 2, -3, 4, -5, 6};
    const char *ops[4] = {"ReduceL1", "ReduceSumSquare", "ReduceLogSumExp", "ReduceLogSum"};
    double want[4][2] = {{6, 15},
                         {14, 77},
                         {log(exp(-1) + exp(2) + exp(-3)), log(exp(4) + exp(-5) + exp(6))},
                         {NAN, log(5)}}; /* log of a negative sum is NaN */
    for (int i = 0; i < 4; i++) {
        ampc_graph *g = ampc_graph_create("t");
        int64_t ax[1] = {-1};
        ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
        ampc_value *y = reduce(g, ops[i], t_const_f32(g, SHAPE(2, 3), xv), axes_of(g, ax, 1), &kd0, 1);
        ampc_tensor out = t_eval1(g, y, NULL, 0);
        t_expect_close(&out, SHAPE(2), want[i], 1e-7, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(reduce, log_sum_exp_is_stable) {
    /* e^1000 overflows a double: the max is subtracted first. Columns of a [2, 4] input. */
    double xv[8] = {1000, -INFINITY, INFINITY, NAN, 1000, -INFINITY, 1, 0};
    ampc_graph *g = ampc_graph_create("t");
    int64_t ax[1] = {0};
    ampc_value *x = t_const(g, AMPC_DTYPE_F64, SHAPE(2, 4), xv);
    ampc_value *y = reduce(g, "ReduceLogSumExp", x, axes_of(g, ax, 1), NULL, 0);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    double want[4] = {1000 + log(2), -INFINITY, INFINITY, NAN};
    t_expect_close(&out, SHAPE(1, 4), want, 1e-15, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(reduce, new_ops_of_the_empty_set) {
    const char *ops[4] = {"ReduceL1", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
    const double id[4] = {0, -INFINITY, -INFINITY, 0}; /* log(0) for the logs */
    for (int i = 0; i < 4; i++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 2));
        int64_t ax[1] = {0};
        ampc_value *y = reduce(g, ops[i], x, axes_of(g, ax, 1), NULL, 0);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 2), NULL);
        ampc_tensor out = t_eval1(g, y, &in, 1);
        double want[2] = {id[i], id[i]};
        t_expect_close(&out, SHAPE(1, 2), want, 0, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(reduce, noop_applies_each_element_function) {
    /* Reducing over no axis: every element is its own group (what ONNX's reference computes). */
    double xv[4] = {-2, 0.5, 3, 1};
    const char *ops[7] = {"ReduceSum", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                          "ReduceLogSumExp", "ReduceMean"};
    double want[7][4] = {{-2, 0.5, 3, 1},       {2, 0.5, 3, 1},        {2, 0.5, 3, 1},
                         {4, 0.25, 9, 1},       {NAN, log(0.5), log(3), 0},
                         {-2, 0.5, 3, 1},       {-2, 0.5, 3, 1}};
    for (int i = 0; i < 7; i++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_attr_arg at = AMPC_ATTR_I("noop_with_empty_axes", 1);
        ampc_value *y = reduce(g, ops[i], t_const_f32(g, SHAPE(2, 2), xv), NULL, &at, 1);
        ampc_tensor out = t_eval1(g, y, NULL, 0);
        t_expect_close(&out, SHAPE(2, 2), want[i], 1e-7, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(reduce, integer_l1_sum_square_and_logs) {
    ampc_graph *g = ampc_graph_create("t");
    int32_t a[3] = {-3, 4, 46341}; /* 46341^2 = 2147488281 wraps in i32 */
    int64_t b[3] = {1, 2, 4};
    uint64_t u[2] = {UINT64_MAX, 0};
    ampc_value *ca = t_const(g, AMPC_DTYPE_I32, SHAPE(3), a), *cb = t_const(g, AMPC_DTYPE_I64, SHAPE(3), b);
    ampc_value *cu = t_const(g, AMPC_DTYPE_U64, SHAPE(2), u);
    ampc_attr_arg kd0 = AMPC_ATTR_I("keepdims", 0);
    ampc_value *outs[5] = {
        reduce(g, "ReduceL1", ca, NULL, &kd0, 1), reduce(g, "ReduceSumSquare", ca, NULL, &kd0, 1),
        reduce(g, "ReduceLogSum", cb, NULL, &kd0, 1), reduce(g, "ReduceLogSumExp", cb, NULL, &kd0, 1),
        reduce(g, "ReduceL1", cu, NULL, &kd0, 1)};
    for (int i = 0; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof name, "o%d", i);
        cr_assert_eq(ampc_output(g, outs[i], name), AMPC_OK, "%s", ampc_graph_errors(g));
    }
    ampc_tensor o[5];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, o, 5), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t w0 = 3 + 4 + 46341;
    int64_t w1 = (int32_t)(uint32_t)(9u + 16u + 2147488281u);
    int64_t w2 = 1;               /* log(7) = 1.95 truncated */
    int64_t w3 = 4;               /* log(e + e^2 + e^4) = 4.20 truncated */
    t_expect_ints(&o[0], SHAPE(), &w0);
    t_expect_ints(&o[1], SHAPE(), &w1);
    t_expect_ints(&o[2], SHAPE(), &w2);
    t_expect_ints(&o[3], SHAPE(), &w3);
    cr_assert_eq(*(const uint64_t *)o[4].data, UINT64_MAX); /* unsigned: |x| is x */
    for (int i = 0; i < 5; i++) ampc_tensor_free(&o[i]);
    ampc_graph_destroy(g);
}

Test(reduce, new_ops_f16_and_f64) {
    ampc_graph *g = ampc_graph_create("t");
    /* 2048 + 1 + 1: f16 cannot hold 2049, but the wide accumulator gives 2050 exactly. */
    uint16_t h[3] = {ampc_f32_to_f16(2048), ampc_f32_to_f16(-1), ampc_f32_to_f16(1)};
    double d[4] = {0.5, -0.25, 2, 1e-3};
    ampc_value *y1 = reduce(g, "ReduceL1", t_const(g, AMPC_DTYPE_F16, SHAPE(3), h), NULL, NULL, 0);
    ampc_value *y2 = reduce(g, "ReduceSumSquare", t_const(g, AMPC_DTYPE_F64, SHAPE(2, 2), d), NULL, NULL, 0);
    cr_assert_eq(ampc_value_dtype(y1), AMPC_DTYPE_F16);
    cr_assert_eq(ampc_output(g, y1, "o1"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, y2, "o2"), AMPC_OK);
    ampc_tensor o[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, o, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double w1[1] = {2050}, w2[1] = {0.25 + 0.0625 + 4 + 1e-6};
    t_expect_close(&o[0], SHAPE(1), w1, 0, 0);
    t_expect_close(&o[1], SHAPE(1, 1), w2, 1e-15, 0);
    ampc_tensor_free(&o[0]);
    ampc_tensor_free(&o[1]);
    ampc_graph_destroy(g);
}

Test(reduce, new_ops_dtype_and_axis_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_BOOL, SHAPE(4));
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceLogSumExp", b, NULL, NULL, 0)));
    t_expect_diag(g, "node 0 (ReduceLogSumExp 'ReduceLogSumExp_0'): input 0 'b' must be f32, f16, "
                     "bf16, f64, i32, i64, u32 or u64, got bool");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t ax[2] = {1, -1};
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceSumSquare", x, axes_of(g, ax, 2), NULL, 0)));
    t_expect_diag(g, "node 1 (ReduceSumSquare 'ReduceSumSquare_1'): axes must not repeat an axis: "
                     "axis 1 appears twice (axes[1] = -1)");
    int64_t ax3[1] = {3};
    cr_assert(ampc_value_is_poisoned(reduce(g, "ReduceL1", x, axes_of(g, ax3, 1), NULL, 0)));
    t_expect_diag(g, "node 2 (ReduceL1 'ReduceL1_2'): axes entry 3 is out of range for rank 2 "
                     "(expected -2 to 1)");
    ampc_graph_destroy(g);
}
