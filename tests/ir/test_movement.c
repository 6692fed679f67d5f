/*
 * test_movement.c — the shape and data-movement family through the DSL: shapes inferred from
 * constant operands, element placement checked against values worked out by hand, run-time
 * index errors, BitCast's reinterpreted bits, and the exact diagnostics for operands that do not
 * fit.
 */
#include "support.h"

#include <stdlib.h>

/* Builds op over in[0..n_in-1], asserting that building succeeded. */
static ampc_value *build(ampc_graph *g, const char *op, ampc_value **in, int32_t n_in,
                         const ampc_attr_arg *at, int32_t n_at) {
    ampc_value *y = ampc_op(g, op, in, n_in, at, n_at);
    cr_assert(!ampc_value_is_poisoned(y), "%s failed:\n%s", op, ampc_graph_errors(g));
    return y;
}

/* Evaluates y (no graph inputs) and checks it against exact values. */
static void expect_vals(ampc_graph *g, ampc_value *y, ampc_shape s, const double *want) {
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    t_expect_close(&out, s, want, 0, 0);
    ampc_tensor_free(&out);
}

static void expect_i64(ampc_graph *g, ampc_value *y, ampc_shape s, const int64_t *want) {
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    cr_assert_eq(out.dtype, AMPC_DTYPE_I64);
    t_expect_ints(&out, s, want);
    ampc_tensor_free(&out);
}

/* A named rank-1 i64 constant (names keep the expected diagnostics stable). */
static ampc_value *ints(ampc_graph *g, const char *name, const int64_t *v, int64_t n) {
    return ampc_constant(g, name, AMPC_DTYPE_I64, 1, &n, v);
}

/* 0, 1, 2, ... as doubles. */
static void iota(double *v, int n) {
    for (int i = 0; i < n; i++) v[i] = i;
}

/* Asserts that building `op` fails and that the diagnostics contain `needle`. */
static void expect_fail(ampc_graph *g, const char *op, ampc_value **in, int32_t n_in,
                        const ampc_attr_arg *at, int32_t n_at, const char *needle) {
    ampc_value *y = ampc_op(g, op, in, n_in, at, n_at);
    cr_assert(ampc_value_is_poisoned(y), "%s unexpectedly succeeded", op);
    t_expect_diag(g, needle);
}

/* ---- Constant, Shape, Size ------------------------------------------------------------------ */

Test(movement, constant_forms) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t iv[3] = {4, -5, 6};
    float fv[2] = {0.5f, -2};
    int32_t tv[4] = {1, 2, 3, 4};
    ampc_value *tensor = t_const(g, AMPC_DTYPE_I32, SHAPE(2, 2), tv);
    ampc_attr_arg a_ints = AMPC_ATTR_IS("value_ints", iv, 3),
                  a_floats = AMPC_ATTR_FS("value_floats", fv, 2);
    ampc_attr_arg a_int = AMPC_ATTR_I("value_int", 7), a_float = AMPC_ATTR_F("value_float", 1.25f);
    ampc_attr_arg a_tensor = {.name = "value", .kind = AMPC_ATTR_TENSOR, .tensor = tensor};
    ampc_value *c[5] = {
        build(g, "Constant", NULL, 0, &a_ints, 1), build(g, "Constant", NULL, 0, &a_floats, 1),
        build(g, "Constant", NULL, 0, &a_int, 1), build(g, "Constant", NULL, 0, &a_float, 1),
        build(g, "Constant", NULL, 0, &a_tensor, 1)};
    const char *names[5] = {"o0", "o1", "o2", "o3", "o4"};
    for (int i = 0; i < 5; i++) cr_assert_eq(ampc_output(g, c[i], names[i]), AMPC_OK);
    ampc_tensor out[5];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 5), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(out[0].dtype, AMPC_DTYPE_I64);
    t_expect_ints(&out[0], SHAPE(3), iv);
    cr_assert_eq(out[1].dtype, AMPC_DTYPE_F32);
    double wf[2] = {0.5, -2}, wd[1] = {1.25};
    t_expect_close(&out[1], SHAPE(2), wf, 0, 0);
    int64_t wi[1] = {7}, wt[4] = {1, 2, 3, 4};
    t_expect_ints(&out[2], SHAPE(), wi);
    t_expect_close(&out[3], SHAPE(), wd, 0, 0);
    cr_assert_eq(out[4].dtype, AMPC_DTYPE_I32);
    t_expect_ints(&out[4], SHAPE(2, 2), wt);
    for (int i = 0; i < 5; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(movement, constant_needs_exactly_one_value) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_attr_arg two[2] = {AMPC_ATTR_I("value_int", 1), AMPC_ATTR_F("value_float", 1)};
    expect_fail(g, "Constant", NULL, 0, two, 2,
                "node 0 (Constant 'Constant_0'): Constant needs exactly one of the attributes "
                "value, value_float, value_floats, value_int, value_ints; got 2");
    ampc_attr_arg wrong = AMPC_ATTR_F("value_int", 1);
    expect_fail(g, "Constant", NULL, 0, &wrong, 1,
                "node 1 (Constant 'Constant_1'): attribute 'value_int' must be of type int");
    ampc_graph_destroy(g);
}

/* Shape of a run-time input is known from its static shape; start/end slice the dims. */
Test(movement, shape_with_start_end_and_size) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 4, 5));
    ampc_attr_arg se[2] = {AMPC_ATTR_I("start", 1), AMPC_ATTR_I("end", -1)};
    ampc_attr_arg clamp[2] = {AMPC_ATTR_I("start", -10), AMPC_ATTR_I("end", 100)};
    ampc_value *s1 = build(g, "Shape", &x, 1, se, 2), *s2 = build(g, "Shape", &x, 1, clamp, 2);
    ampc_value *s3 = build(g, "Shape", &x, 1, se + 1, 1), *sz = build(g, "Size", &x, 1, NULL, 0);
    ampc_attr_arg empty = AMPC_ATTR_I("start", 3);
    ampc_attr_arg empty_end = AMPC_ATTR_I("end", 1);
    ampc_attr_arg both[2] = {empty, empty_end};
    ampc_value *s4 = build(g, "Shape", &x, 1, both, 2);
    ampc_value *outs[5] = {s1, s2, s3, sz, s4};
    const char *names[5] = {"o0", "o1", "o2", "o3", "o4"};
    for (int i = 0; i < 5; i++) cr_assert_eq(ampc_output(g, outs[i], names[i]), AMPC_OK);
    float *xv = calloc(120, sizeof *xv);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3, 4, 5), xv), out[5];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 5), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t w1[2] = {3, 4}, w2[4] = {2, 3, 4, 5}, w3[3] = {2, 3, 4}, w4[1] = {120};
    t_expect_ints(&out[0], SHAPE(2), w1);
    t_expect_ints(&out[1], SHAPE(4), w2);
    t_expect_ints(&out[2], SHAPE(3), w3);
    t_expect_ints(&out[3], SHAPE(), w4);
    t_expect_ints(&out[4], SHAPE(0), NULL); /* start past end: empty */
    for (int i = 0; i < 5; i++) ampc_tensor_free(&out[i]);
    free(xv);
    ampc_graph_destroy(g);
}

/* ---- views ---------------------------------------------------------------------------------- */

/* 0 copies the input dim, -1 takes the rest; the bytes stay in order. */
Test(movement, reshape_zero_and_minus_one) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[24];
    iota(xv, 24);
    ampc_value *x = t_const_f32(g, SHAPE(2, 3, 4), xv);
    int64_t dims[3] = {0, -1, 2};
    ampc_value *y = ampc_reshape(g, x, dims, 3);
    cr_assert(!ampc_value_is_poisoned(y), "%s", ampc_graph_errors(g));
    expect_vals(g, y, SHAPE(2, 6, 2), xv);
    ampc_graph_destroy(g);
}

/* With allowzero a 0 is a real 0 (an empty tensor); without it, 0 copies the input dim. */
Test(movement, reshape_allowzero) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 3));
    int64_t dims[2] = {3, 0};
    ampc_value *in[2] = {x, ints(g, "shape", dims, 2)};
    ampc_attr_arg az = AMPC_ATTR_I("allowzero", 1);
    ampc_shape s = ampc_value_shape(build(g, "Reshape", in, 2, &az, 1));
    cr_assert(ampc_shape_eq(&s, &(ampc_shape){2, {3, 0}}));
    expect_fail(g, "Reshape", in, 2, NULL, 0,
                "node 1 (Reshape 'Reshape_1'): Reshape must keep the element count: input 0 'x' "
                "is [0,3] (0 elements), input 1 'shape' [3,0] asks for 9");
    ampc_graph_destroy(g);
}

Test(movement, reshape_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t d1[2] = {4, -1}, d2[2] = {-1, -1}, d3[3] = {0, 0, 0}, d4[2] = {-2, 3};
    ampc_value *in[2] = {x, ints(g, "s1", d1, 2)};
    expect_fail(g, "Reshape", in, 2, NULL, 0,
                "node 0 (Reshape 'Reshape_0'): Reshape must keep the element count: input 0 'x' "
                "is [2,3] (6 elements), which no value of the -1 in input 1 's1' [4,-1] gives");
    in[1] = ints(g, "s2", d2, 2);
    expect_fail(g, "Reshape", in, 2, NULL, 0,
                "node 1 (Reshape 'Reshape_1'): input 1 's2' [-1,-1] has more than one -1");
    in[1] = ints(g, "s3", d3, 3);
    expect_fail(g, "Reshape", in, 2, NULL, 0,
                "node 2 (Reshape 'Reshape_2'): input 1 's3' [0,0,0] has 0 at index 2, which "
                "copies input dim 2, but input 0 'x' is [2,3]");
    in[1] = ints(g, "s4", d4, 2);
    expect_fail(g, "Reshape", in, 2, NULL, 0,
                "node 3 (Reshape 'Reshape_3'): input 1 's4' [-2,3] has entry 0 = -2; entries "
                "must be -1, 0 or positive");
    ampc_graph_destroy(g);
}

Test(movement, flatten_squeeze_unsqueeze_shapes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 1, 3, 1));
    ampc_attr_arg a0 = AMPC_ATTR_I("axis", 0), a2 = AMPC_ATTR_I("axis", -2),
                  a4 = AMPC_ATTR_I("axis", 4);
    struct {
        ampc_value *v;
        ampc_shape want;
    } cases[8];
    int64_t sq_axes[2] = {-1, 1}, unsq[3] = {0, 3, -1}, attr_axes[1] = {1};
    ampc_value *sq_in[2] = {x, ampc_const_i64s(g, sq_axes, 2)};
    ampc_value *un_in[2] = {x, ampc_const_i64s(g, unsq, 3)};
    ampc_attr_arg old_axes = AMPC_ATTR_IS("axes", attr_axes, 1);
    cases[0].v = build(g, "Flatten", &x, 1, NULL, 0), cases[0].want = SHAPE(2, 3);
    cases[1].v = build(g, "Flatten", &x, 1, &a0, 1), cases[1].want = SHAPE(1, 6);
    cases[2].v = build(g, "Flatten", &x, 1, &a2, 1), cases[2].want = SHAPE(2, 3);
    cases[3].v = build(g, "Flatten", &x, 1, &a4, 1), cases[3].want = SHAPE(6, 1);
    cases[4].v = build(g, "Squeeze", sq_in, 2, NULL, 0), cases[4].want = SHAPE(2, 3);
    cases[5].v = build(g, "Squeeze", &x, 1, NULL, 0), cases[5].want = SHAPE(2, 3);
    cases[6].v = build(g, "Squeeze", &x, 1, &old_axes, 1), cases[6].want = SHAPE(2, 3, 1);
    cases[7].v = build(g, "Unsqueeze", un_in, 2, NULL, 0),
    cases[7].want = SHAPE(1, 2, 1, 1, 3, 1, 1);
    for (int i = 0; i < 8; i++) {
        ampc_shape s = ampc_value_shape(cases[i].v);
        char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
        cr_assert(ampc_shape_eq(&s, &cases[i].want), "case %d: got %s, expected %s", i,
                  ampc_shape_str(&s, a, sizeof a), ampc_shape_str(&cases[i].want, b, sizeof b));
    }
    ampc_graph_destroy(g);
}

/* Views copy the bytes unchanged, whatever the dtype. */
Test(movement, views_keep_the_bytes) {
    ampc_graph *g = ampc_graph_create("t");
    int16_t xv[6] = {1, -2, 3, -4, 5, -6};
    ampc_value *x = t_const(g, AMPC_DTYPE_I16, SHAPE(1, 2, 3), xv);
    int64_t axes[1] = {0};
    ampc_value *in[2] = {x, ampc_const_i64s(g, axes, 1)};
    ampc_value *y = ampc_op(g, "Flatten", &in[0], 1, NULL, 0);
    ampc_value *in2[2] = {build(g, "Squeeze", in, 2, NULL, 0), in[1]};
    ampc_value *z = build(g, "Unsqueeze", in2, 2, NULL, 0);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, z, "z"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t want[6] = {1, -2, 3, -4, 5, -6};
    t_expect_ints(&out[0], SHAPE(1, 6), want);
    t_expect_ints(&out[1], SHAPE(1, 2, 3), want);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(movement, squeeze_unsqueeze_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 1, 3));
    int64_t a1[1] = {0}, a2[2] = {1, -2}, a3[1] = {3};
    ampc_value *in[2] = {x, ampc_const_i64s(g, a1, 1)};
    expect_fail(g, "Squeeze", in, 2, NULL, 0,
                "node 0 (Squeeze 'Squeeze_0'): cannot squeeze axis 0: input 0 'x' is [2,1,3], "
                "and that dim is 2, not 1");
    in[1] = ampc_const_i64s(g, a2, 2);
    expect_fail(g, "Squeeze", in, 2, NULL, 0,
                "node 1 (Squeeze 'Squeeze_1'): Squeeze axis list [1,-2] names axis 1 twice");
    in[1] = ampc_const_i64s(g, a3, 1);
    expect_fail(g, "Squeeze", in, 2, NULL, 0,
                "node 2 (Squeeze 'Squeeze_2'): Squeeze axis 3 is out of range for rank 3 "
                "(expected -3 to 2)");
    expect_fail(g, "Unsqueeze", &x, 1, NULL, 0,
                "node 3 (Unsqueeze 'Unsqueeze_3'): Unsqueeze needs axes: input 1 'axes' or the "
                "attribute 'axes'");
    ampc_graph_destroy(g);
}

/* ---- Transpose, Concat, Split --------------------------------------------------------------- */

Test(movement, transpose_default_and_perm) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[24];
    iota(xv, 24); /* x[a][b][c] = 12a + 4b + c, shape [2,3,4] */
    ampc_value *x = t_const_f32(g, SHAPE(2, 3, 4), xv);
    int64_t perm[3] = {1, 2, 0};
    ampc_value *y = ampc_transpose(g, x, perm, 3), *r = ampc_transpose(g, x, NULL, 0);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, r, "r"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double wy[24], wr[24];
    for (int b = 0; b < 3; b++) /* y[b][c][a] */
        for (int c = 0; c < 4; c++)
            for (int a = 0; a < 2; a++) wy[(b * 4 + c) * 2 + a] = 12 * a + 4 * b + c;
    for (int c = 0; c < 4; c++) /* r[c][b][a] */
        for (int b = 0; b < 3; b++)
            for (int a = 0; a < 2; a++) wr[(c * 3 + b) * 2 + a] = 12 * a + 4 * b + c;
    t_expect_close(&out[0], SHAPE(3, 4, 2), wy, 0, 0);
    t_expect_close(&out[1], SHAPE(4, 3, 2), wr, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    int64_t bad[3] = {0, 0, 1};
    cr_assert(ampc_value_is_poisoned(ampc_transpose(g, x, bad, 3)));
    t_expect_diag(g, "node 2 (Transpose 'Transpose_2'): Transpose perm list [0,0,1] names axis 0 "
                     "twice");
    ampc_graph_destroy(g);
}

Test(movement, concat_axis_and_mismatch) {
    ampc_graph *g = ampc_graph_create("t");
    double b[4] = {3, 4, 5, 6};
    ampc_value *xs[3] = {
        ampc_constant(g, "a", AMPC_DTYPE_F32, 2, (int64_t[]){2, 1}, (float[]){1, 2}),
        t_const_f32(g, SHAPE(2, 2), b), t_const_f32(g, SHAPE(2, 0), NULL)};
    ampc_value *y = ampc_concat(g, xs, 3, -1);
    double want[6] = {1, 3, 4, 2, 5, 6};
    expect_vals(g, y, SHAPE(2, 3), want);
    ampc_value *bad[2] = {xs[0], t_input(g, "z", AMPC_DTYPE_F32, SHAPE(3, 1))};
    cr_assert(ampc_value_is_poisoned(ampc_concat(g, bad, 2, 1)));
    t_expect_diag(g, "node 1 (Concat 'Concat_1'): Concat inputs must match in every dim but axis "
                     "1: input 0 'a' is [2,1], input 1 'z' is [3,1]");
    ampc_graph_destroy(g);
}

/* Split [2, 7] along axis 1 four ways: explicit sizes (input or old attribute), num_outputs
 * (chunks of ceil(7/3) = 3, the last one 1) and equal parts. */
Test(movement, split_variants) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[14];
    iota(xv, 14);
    ampc_value *x = t_const_f32(g, SHAPE(2, 7), xv);
    int64_t sizes[2] = {2, 5};
    ampc_value *in[2] = {x, ampc_const_i64s(g, sizes, 2)};
    ampc_attr_arg ax = AMPC_ATTR_I("axis", 1);
    ampc_attr_arg num[2] = {AMPC_ATTR_I("axis", -1), AMPC_ATTR_I("num_outputs", 3)};
    ampc_value *p[2], *q[3];
    cr_assert_eq(ampc_op_multi(g, "Split", in, 2, &ax, 1, p, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    cr_assert_eq(ampc_op_multi(g, "Split", &x, 1, num, 2, q, 3), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_value *outs[5] = {p[0], p[1], q[0], q[1], q[2]};
    const char *names[5] = {"o0", "o1", "o2", "o3", "o4"};
    for (int i = 0; i < 5; i++) cr_assert_eq(ampc_output(g, outs[i], names[i]), AMPC_OK);
    ampc_tensor out[5];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 5), AMPC_OK, "%s", ampc_graph_errors(g));
    double w0[4] = {0, 1, 7, 8}, w1[10] = {2, 3, 4, 5, 6, 9, 10, 11, 12, 13};
    double w2[6] = {0, 1, 2, 7, 8, 9}, w3[6] = {3, 4, 5, 10, 11, 12}, w4[2] = {6, 13};
    t_expect_close(&out[0], SHAPE(2, 2), w0, 0, 0);
    t_expect_close(&out[1], SHAPE(2, 5), w1, 0, 0);
    t_expect_close(&out[2], SHAPE(2, 3), w2, 0, 0);
    t_expect_close(&out[3], SHAPE(2, 3), w3, 0, 0);
    t_expect_close(&out[4], SHAPE(2, 1), w4, 0, 0);
    for (int i = 0; i < 5; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* No sizes: equal parts; the older `split` attribute works like input 1. */
Test(movement, split_equal_and_attribute) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6];
    iota(xv, 6);
    ampc_value *x = t_const_f32(g, SHAPE(6), xv);
    int64_t old[3] = {1, 1, 4};
    ampc_attr_arg split_attr = AMPC_ATTR_IS("split", old, 3);
    ampc_value *e[2], *s[3];
    cr_assert_eq(ampc_op_multi(g, "Split", &x, 1, NULL, 0, e, 2), AMPC_OK);
    cr_assert_eq(ampc_op_multi(g, "Split", &x, 1, &split_attr, 1, s, 3), AMPC_OK);
    cr_assert_eq(ampc_output(g, e[1], "e1"), AMPC_OK);
    cr_assert_eq(ampc_output(g, s[2], "s2"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double w_e1[3] = {3, 4, 5}, w_s2[4] = {2, 3, 4, 5};
    t_expect_close(&out[0], SHAPE(3), w_e1, 0, 0);
    t_expect_close(&out[1], SHAPE(4), w_s2, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(movement, split_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "v", AMPC_DTYPE_F32, SHAPE(6));
    int64_t three[3] = {1, 1, 4}, short_sizes[2] = {1, 2};
    ampc_value *o[4], *bad_in[2] = {x, ints(g, "split", three, 3)};
    cr_assert_neq(ampc_op_multi(g, "Split", &x, 1, NULL, 0, o, 4), AMPC_OK);
    t_expect_diag(g, "node 0 (Split 'Split_0'): axis 0 of input 0 'v' [6] has 6 elements, which "
                     "do not split into 4 equal parts");
    cr_assert_neq(ampc_op_multi(g, "Split", bad_in, 2, NULL, 0, o, 2), AMPC_OK);
    t_expect_diag(g, "node 1 (Split 'Split_1'): input 1 'split' [1,1,4] has 3 entries but the "
                     "node has 2 outputs");
    bad_in[1] = ints(g, "split2", short_sizes, 2);
    cr_assert_neq(ampc_op_multi(g, "Split", bad_in, 2, NULL, 0, o, 2), AMPC_OK);
    t_expect_diag(g, "node 2 (Split 'Split_2'): input 1 'split2' [1,2] sums to 3, but axis 0 of "
                     "input 0 'v' [6] has 6");
    ampc_attr_arg num = AMPC_ATTR_I("num_outputs", 4);
    ampc_value *two[2] = {t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2)), NULL};
    cr_assert_neq(ampc_op_multi(g, "Split", two, 1, &num, 1, o, 4), AMPC_OK);
    t_expect_diag(g, "node 3 (Split 'Split_3'): axis 0 of input 0 'w' [2] has 2 elements, too "
                     "few for 4 chunks of 1");
    ampc_graph_destroy(g);
}

/* ---- Slice ---------------------------------------------------------------------------------- */

static ampc_value *slice(ampc_graph *g, ampc_value *x, const int64_t *starts, const int64_t *ends,
                         const int64_t *axes, const int64_t *steps, int32_t k) {
    ampc_value *in[5] = {x, ampc_const_i64s(g, starts, k), ampc_const_i64s(g, ends, k),
                         axes ? ampc_const_i64s(g, axes, k) : NULL,
                         steps ? ampc_const_i64s(g, steps, k) : NULL};
    return build(g, "Slice", in, steps ? 5 : axes ? 4 : 3, NULL, 0);
}

/* x = 0..9. Negative steps walk backwards from the clamped start; INT64_MIN / INT64_MAX ends
 * mean "to the edge". */
Test(movement, slice_negative_steps_and_clamping) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[10];
    iota(xv, 10);
    ampc_value *x = t_const_f32(g, SHAPE(10), xv);
    int64_t s1[1] = {-1}, e1[1] = {INT64_MIN}, st1[1] = {-3};
    int64_t s2[1] = {5}, e2[1] = {1}, st2[1] = {-2};
    int64_t s3[1] = {100}, e3[1] = {-100}, st3[1] = {-4};
    int64_t s4[1] = {2}, e4[1] = {INT64_MAX}, st4[1] = {INT64_MAX};
    int64_t s5[1] = {7}, e5[1] = {3};
    ampc_value *y[5] = {slice(g, x, s1, e1, NULL, st1, 1), slice(g, x, s2, e2, NULL, st2, 1),
                        slice(g, x, s3, e3, NULL, st3, 1), slice(g, x, s4, e4, NULL, st4, 1),
                        slice(g, x, s5, e5, NULL, NULL, 1)};
    double w0[4] = {9, 6, 3, 0}, w1[2] = {5, 3}, w2[3] = {9, 5, 1}, w3[1] = {2};
    const char *names[5] = {"o0", "o1", "o2", "o3", "o4"};
    for (int i = 0; i < 5; i++) cr_assert_eq(ampc_output(g, y[i], names[i]), AMPC_OK);
    ampc_tensor out[5];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 5), AMPC_OK, "%s", ampc_graph_errors(g));
    t_expect_close(&out[0], SHAPE(4), w0, 0, 0);
    t_expect_close(&out[1], SHAPE(2), w1, 0, 0);
    t_expect_close(&out[2], SHAPE(3), w2, 0, 0);
    t_expect_close(&out[3], SHAPE(1), w3, 0, 0);
    t_expect_close(&out[4], SHAPE(0), NULL, 0, 0); /* start 7 > end 3 with step 1 */
    for (int i = 0; i < 5; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* 2-D with axes: x[i][j] = 4i + j on [3,4]; rows reversed, columns 1..3 by 2. */
Test(movement, slice_axes_2d) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[12];
    iota(xv, 12);
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 4));
    int64_t starts[2] = {1, -1}, ends[2] = {4, INT64_MIN}, axes[2] = {-1, 0}, steps[2] = {2, -1};
    ampc_value *y = slice(g, x, starts, ends, axes, steps, 2);
    float xf[12];
    for (int i = 0; i < 12; i++) xf[i] = (float)xv[i];
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3, 4), xf);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[6] = {9, 11, 5, 7, 1, 3};
    t_expect_close(&out, SHAPE(3, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(movement, slice_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 4));
    int64_t z[1] = {0}, two[2] = {0, 0}, ax[2] = {1, -1}, one[2] = {1, 1};
    ampc_value *in[5] = {x, ints(g, "starts", z, 1), ints(g, "ends", z, 1), NULL,
                         ints(g, "steps", z, 1)};
    expect_fail(
        g, "Slice", in, 5, NULL, 0,
        "node 0 (Slice 'Slice_0'): input 4 'steps' [0] has a 0 step; steps must be non-zero");
    ampc_value *in2[4] = {x, ampc_const_i64s(g, two, 2), ampc_const_i64s(g, one, 2),
                          ampc_const_i64s(g, ax, 2)};
    expect_fail(g, "Slice", in2, 4, NULL, 0,
                "node 1 (Slice 'Slice_1'): Slice axis list [1,-1] names axis 1 twice");
    ampc_value *in3[3] = {x, ampc_const_i64s(g, two, 2), ampc_const_i64s(g, z, 1)};
    expect_fail(g, "Slice", in3, 3, NULL, 0,
                "node 2 (Slice 'Slice_2'): starts, ends, axes and steps must have one length: got "
                "2, 1, 2, 2");
    ampc_graph_destroy(g);
}

/* ---- Gather, Expand, ConstantOfShape, Range ------------------------------------------------- */

/* Run-time indices: -1 is the last row; an index out of range fails the evaluation. */
Test(movement, gather_negative_index_and_range_error) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {10, 11, 20, 21, 30, 31};
    ampc_value *data = t_const_f32(g, SHAPE(3, 2), xv);
    ampc_ir_value_rename(g, data, "table");
    ampc_value *idx = t_input(g, "idx", AMPC_DTYPE_I64, SHAPE(2));
    ampc_value *in[2] = {data, idx};
    ampc_value *y = build(g, "Gather", in, 2, NULL, 0);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    int64_t iv[2] = {-1, 0};
    ampc_tensor tin = t_tensor(AMPC_DTYPE_I64, SHAPE(2), iv), out;
    cr_assert_eq(ampc_graph_evaluate(g, &tin, 1, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    double want[4] = {30, 31, 10, 11};
    t_expect_close(&out, SHAPE(2, 2), want, 0, 0);
    ampc_tensor_free(&out);
    int64_t bad[2] = {1, 3};
    tin.data = bad;
    cr_assert_eq(ampc_graph_evaluate(g, &tin, 1, &out, 1), AMPC_E_EVAL);
    t_expect_diag(g, "node 0 (Gather 'Gather_0'): index 3 (element 1 of input 1 'idx') is out of "
                     "range for axis 0 of input 0 'table', which has 3 entries (valid: -3 to 2)");
    ampc_graph_destroy(g);
}

/* axis 1 with 2-D i32 indices: output [2] + [2,2] = [2,2,2]. */
Test(movement, gather_axis1_matrix_indices) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {0, 1, 2, 10, 11, 12};
    int32_t iv[4] = {2, 0, -2, 2};
    ampc_value *in[2] = {t_const_f32(g, SHAPE(2, 3), xv),
                         t_const(g, AMPC_DTYPE_I32, SHAPE(2, 2), iv)};
    ampc_attr_arg ax = AMPC_ATTR_I("axis", 1);
    double want[8] = {2, 0, 1, 2, 12, 10, 11, 12};
    expect_vals(g, build(g, "Gather", in, 2, &ax, 1), SHAPE(2, 2, 2), want);
    ampc_graph_destroy(g);
}

/* Constant indices are evaluated while building: the range error surfaces there. */
Test(movement, gather_constant_out_of_range_fails_while_building) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[3] = {1, 2, 3};
    int64_t iv[1] = {-4};
    ampc_value *in[2] = {t_const_f32(g, SHAPE(3), xv), ints(g, "idx", iv, 1)};
    ampc_value *y = ampc_op(g, "Gather", in, 2, NULL, 0);
    cr_assert(ampc_value_is_poisoned(y));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_EVAL);
    t_expect_diag(g, "index -4 (element 0 of input 1 'idx') is out of range for axis 0");
    ampc_graph_destroy(g);
}

/* Expand broadcasts both ways: [3,1] with shape [2,1,4] gives [2,3,4]. */
Test(movement, expand_bidirectional) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[3] = {1, 2, 3};
    int64_t shape[3] = {2, 1, 4};
    ampc_value *in[2] = {t_const_f32(g, SHAPE(3, 1), xv), ampc_const_i64s(g, shape, 3)};
    double want[24];
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++) want[(a * 3 + b) * 4 + c] = b + 1;
    expect_vals(g, build(g, "Expand", in, 2, NULL, 0), SHAPE(2, 3, 4), want);
    int64_t bad[1] = {2};
    ampc_value *in2[2] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 3)), ints(g, "to", bad, 1)};
    expect_fail(g, "Expand", in2, 2, NULL, 0,
                "node 1 (Expand 'Expand_1'): input 0 'x' [3,3] does not broadcast with the shape "
                "[2] of input 1 'to': output dim 1 is 3 against 2");
    ampc_graph_destroy(g);
}

Test(movement, constant_of_shape_value_and_default) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t shape[2] = {2, 3}, seven = 7;
    ampc_value *s = ampc_const_i64s(g, shape, 2);
    ampc_value *v = t_const(g, AMPC_DTYPE_I64, SHAPE(1), &seven);
    ampc_attr_arg at = {.name = "value", .kind = AMPC_ATTR_TENSOR, .tensor = v};
    ampc_value *a = build(g, "ConstantOfShape", &s, 1, &at, 1);
    ampc_value *b = build(g, "ConstantOfShape", &s, 1, NULL, 0);
    cr_assert_eq(ampc_value_dtype(b), AMPC_DTYPE_F32);
    int64_t want[6] = {7, 7, 7, 7, 7, 7};
    expect_i64(g, a, SHAPE(2, 3), want);
    int64_t neg[1] = {-1};
    ampc_value *sn = ints(g, "neg", neg, 1);
    expect_fail(
        g, "ConstantOfShape", &sn, 1, NULL, 0,
        "node 2 (ConstantOfShape 'ConstantOfShape_2'): input 0 'neg' [-1] has a negative dim");
    ampc_graph_destroy(g);
}

static ampc_value *range(ampc_graph *g, ampc_value *s, ampc_value *l, ampc_value *d) {
    ampc_value *in[3] = {s, l, d};
    return ampc_op(g, "Range", in, 3, NULL, 0);
}

Test(movement, range_lengths) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *ri = range(g, ampc_scalar_i64(g, 1), ampc_scalar_i64(g, 10), ampc_scalar_i64(g, 3));
    ampc_value *rf =
        range(g, ampc_scalar_f32(g, 1), ampc_scalar_f32(g, 0), ampc_scalar_f32(g, -0.25f));
    ampc_value *re = range(g, ampc_scalar_i64(g, 5), ampc_scalar_i64(g, 1), ampc_scalar_i64(g, 2));
    ampc_value *rn =
        range(g, ampc_scalar_i64(g, 5), ampc_scalar_i64(g, -5), ampc_scalar_i64(g, -4));
    ampc_value *outs[4] = {ri, rf, re, rn};
    const char *names[4] = {"o0", "o1", "o2", "o3"};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ampc_output(g, outs[i], names[i]), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_tensor out[4];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 4), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t wi[3] = {1, 4, 7}, wn[3] = {5, 1, -3};
    double wf[4] = {1, 0.75, 0.5, 0.25};
    t_expect_ints(&out[0], SHAPE(3), wi);
    t_expect_close(&out[1], SHAPE(4), wf, 0, 0);
    t_expect_ints(&out[2], SHAPE(0), NULL);
    t_expect_ints(&out[3], SHAPE(3), wn); /* ceil(-10 / -4) = 3 */
    for (int i = 0; i < 4; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

static ampc_value *i64_named(ampc_graph *g, const char *name, int64_t v) {
    return ampc_constant(g, name, AMPC_DTYPE_I64, 0, NULL, &v);
}

Test(movement, range_errors) {
    ampc_graph *g = ampc_graph_create("t");
    cr_assert(ampc_value_is_poisoned(
        range(g, i64_named(g, "s0", 0), i64_named(g, "l0", 3), i64_named(g, "d0", 0))));
    t_expect_diag(g, "node 0 (Range 'Range_0'): input 2 'd0' (delta) is 0; Range needs a non-zero "
                     "step");
    cr_assert(ampc_value_is_poisoned(range(g, ampc_scalar_i64(g, INT64_MIN),
                                           ampc_scalar_i64(g, INT64_MAX), ampc_scalar_i64(g, 1))));
    t_expect_diag(g, "node 1 (Range 'Range_1'): the Range length (limit - start) / delta overflows "
                     "a 64-bit integer");
    cr_assert(ampc_value_is_poisoned(
        range(g, ampc_scalar_i64(g, 0), ampc_scalar_i64(g, INT64_MAX), ampc_scalar_i64(g, 1))));
    t_expect_diag(g, "node 2 (Range 'Range_2'): Range from 0 to 9223372036854775807 by 1 has "
                     "9223372036854775807 elements; at most 2^52 are accepted");
    ampc_value *lf = ampc_constant(g, "lf", AMPC_DTYPE_F32, 0, NULL, &(float){3});
    cr_assert(ampc_value_is_poisoned(range(g, i64_named(g, "s3", 0), lf, i64_named(g, "d3", 1))));
    t_expect_diag(g, "node 3 (Range 'Range_3'): inputs 0 's3' and 1 'lf' must have one dtype, got "
                     "i64 and f32");
    ampc_graph_destroy(g);
}

/* ---- Pad ------------------------------------------------------------------------------------ */

static ampc_value *pad(ampc_graph *g, ampc_value *x, const int64_t *pads, int32_t np,
                       ampc_value *cval, const int64_t *axes, int32_t na, const char *mode) {
    ampc_value *in[4] = {x, ampc_const_i64s(g, pads, np), cval,
                         axes ? ampc_const_i64s(g, axes, na) : NULL};
    ampc_attr_arg at = AMPC_ATTR_S("mode", mode);
    return build(g, "Pad", in, axes ? 4 : cval ? 3 : 2, &at, 1);
}

/* x = [1, 2, 3] padded by 2 on each side in every mode; negative pads crop first. */
Test(movement, pad_modes_1d) {
    struct {
        const char *mode;
        int64_t pads[2];
        int64_t len;
        double want[8];
    } cases[] = {
        {"constant", {2, 2}, 7, {0, 0, 1, 2, 3, 0, 0}},
        {"reflect", {2, 2}, 7, {3, 2, 1, 2, 3, 2, 1}},
        {"edge", {2, 2}, 7, {1, 1, 1, 2, 3, 3, 3}},
        {"wrap", {2, 2}, 7, {2, 3, 1, 2, 3, 1, 2}},
        {"reflect", {0, 5}, 8, {1, 2, 3, 2, 1, 2, 3, 2}}, /* reflects past both edges */
        {"wrap", {-1, 2}, 4, {2, 3, 2, 3}},               /* crop to [2,3], then wrap it */
        {"reflect", {-1, 3}, 5, {2, 3, 2, 3, 2}},
        {"edge", {1, -2}, 2, {1, 1}},
    };
    for (int c = 0; c < 8; c++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[3] = {1, 2, 3};
        ampc_value *y =
            pad(g, t_const_f32(g, SHAPE(3), xv), cases[c].pads, 2, NULL, NULL, 0, cases[c].mode);
        expect_vals(g, y, SHAPE(cases[c].len), cases[c].want);
        ampc_graph_destroy(g);
    }
}

/* 2-D constant pad with a value, on axis 1 only (axes input), on a run-time input. */
Test(movement, pad_constant_value_with_axes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_I32, SHAPE(2, 2));
    int32_t nine = 9;
    int64_t pads[2] = {1, -1}, axes[1] = {-1};
    ampc_value *y =
        pad(g, x, pads, 2, t_const(g, AMPC_DTYPE_I32, SHAPE(), &nine), axes, 1, "constant");
    int32_t xv[4] = {1, 2, 3, 4};
    ampc_tensor in = t_tensor(AMPC_DTYPE_I32, SHAPE(2, 2), xv);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    int64_t want[4] = {9, 1, 9, 3};
    t_expect_ints(&out, SHAPE(2, 2), want);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(movement, pad_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    int64_t p3[3] = {1, 1, 1}, crop[4] = {0, -2, 0, -2}, p4[4] = {0, 0, 0, 0};
    ampc_value *in[2] = {x, ints(g, "p3", p3, 3)};
    expect_fail(g, "Pad", in, 2, NULL, 0,
                "node 0 (Pad 'Pad_0'): input 1 'p3' must have 4 entries (begin and end for each of "
                "2 axes), got 3");
    in[1] = ints(g, "crop", crop, 4);
    expect_fail(g, "Pad", in, 2, NULL, 0,
                "node 1 (Pad 'Pad_1'): input 1 'crop' [0,-2,0,-2] crops more than the 3 elements "
                "of axis 1 of input 0 'x' [2,3]");
    in[1] = ampc_const_i64s(g, p4, 4);
    ampc_attr_arg bad = AMPC_ATTR_S("mode", "mirror");
    expect_fail(g, "Pad", in, 2, &bad, 1,
                "node 2 (Pad 'Pad_2'): attribute 'mode' must be constant, reflect, edge or wrap, "
                "got \"mirror\"");
    ampc_value *e = t_input(g, "e", AMPC_DTYPE_F32, SHAPE(0, 2));
    int64_t p1[4] = {1, 0, 0, 0};
    ampc_value *in2[2] = {e, ampc_const_i64s(g, p1, 4)};
    ampc_attr_arg edge = AMPC_ATTR_S("mode", "edge");
    expect_fail(g, "Pad", in2, 2, &edge, 1,
                "node 3 (Pad 'Pad_3'): mode 'edge' pads axis 0 from its elements, but input 0 "
                "'e' [0,2] has none left there");
    /* Found by fuzz_compile: pads absent (the op table lets Pad take X alone) made the message
     * read the name of a NULL input. */
    expect_fail(g, "Pad", &x, 1, NULL, 0,
                "node 4 (Pad 'Pad_4'): input 1 (pads) is absent; it must have 4 entries (begin "
                "and end for each of 2 axes)");
    ampc_graph_destroy(g);
}

/* ---- BitCast -------------------------------------------------------------------------------- */

/* The same bytes under another type of the same width: 1.0f is 0x3f800000, -1.0 (f64) is
 * 0xbff0000000000000, i8 -1 is u8 255, bool true is u8 1; the shape is kept. */
Test(movement, bit_cast_reinterprets_bits) {
    ampc_graph *g = ampc_graph_create("t");
    float fv[2] = {1.0f, -2.0f};
    ampc_value *x = t_const(g, AMPC_DTYPE_F32, SHAPE(1, 2), fv);
    ampc_attr_arg to = AMPC_ATTR_I("to", 6); /* INT32 */
    ampc_value *y = build(g, "BitCast", &x, 1, &to, 1);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_I32);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    int64_t want[2] = {0x3f800000, (int32_t)0xc0000000u};
    t_expect_ints(&out, SHAPE(1, 2), want);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double dv[1] = {-1.0};
    x = t_const(g, AMPC_DTYPE_F64, SHAPE(), dv);
    to = AMPC_ATTR_I("to", 7); /* INT64 */
    int64_t w64[1] = {(int64_t)0xbff0000000000000ull};
    expect_i64(g, build(g, "BitCast", &x, 1, &to, 1), SHAPE(), w64);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    int8_t iv[3] = {-1, 127, -128};
    uint8_t bv[2] = {1, 0};
    ampc_value *xi = t_const(g, AMPC_DTYPE_I8, SHAPE(3), iv);
    ampc_value *xb = t_const(g, AMPC_DTYPE_BOOL, SHAPE(2), bv);
    to = AMPC_ATTR_I("to", 2); /* UINT8 */
    ampc_value *yi = build(g, "BitCast", &xi, 1, &to, 1), *yb = build(g, "BitCast", &xb, 1, &to, 1);
    cr_assert_eq(ampc_output(g, yi, "i"), AMPC_OK);
    cr_assert_eq(ampc_output(g, yb, "b"), AMPC_OK);
    ampc_tensor outs[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, outs, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t wi[3] = {255, 127, 128}, wb[2] = {1, 0};
    t_expect_ints(&outs[0], SHAPE(3), wi);
    t_expect_ints(&outs[1], SHAPE(2), wb);
    ampc_tensor_free(&outs[0]);
    ampc_tensor_free(&outs[1]);
    ampc_graph_destroy(g);
}

Test(movement, bit_cast_needs_equal_widths) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_attr_arg to = AMPC_ATTR_I("to", 11); /* DOUBLE */
    expect_fail(g, "BitCast", &x, 1, &to, 1,
                "node 0 (BitCast 'BitCast_0'): BitCast keeps every bit, so the target type must "
                "have the width of input 0 'x': f32 is 32 bits, f64 is 64 bits");
    cr_assert_eq(g->diag.entries[0].code, AMPC_E_DTYPE);
    to = AMPC_ATTR_I("to", 14); /* COMPLEX64 */
    expect_fail(g, "BitCast", &x, 1, &to, 1,
                "node 1 (BitCast 'BitCast_1'): BitCast to ONNX data type 14 is not supported");
    expect_fail(g, "BitCast", &x, 1, NULL, 0,
                "node 2 (BitCast 'BitCast_2'): BitCast needs an int attribute 'to' (the target "
                "ONNX data type)");
    ampc_graph_destroy(g);
}
