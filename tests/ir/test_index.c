/*
 * test_index.c — the indexing family through the DSL: gathers and scatters (by element and by
 * N-d slice, with every scatter reduction), TensorScatter, OneHot, TopK, Trilu, ArgMax/ArgMin,
 * Hardmax, CumSum, CumProd, the value-dependent shapes of NonZero, Compress, Unique and
 * NonMaxSuppression, EyeLike, ReverseSequence and TfIdfVectorizer. The
 * expected values are worked out by hand in the comments; run-time index errors and the exact
 * diagnostics for operands that do not fit are checked too.
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>

/* A named constant of dtype t from doubles (names keep the expected diagnostics stable). */
static ampc_value *cst(ampc_graph *g, const char *name, ampc_dtype t, ampc_shape s,
                       const double *vals) {
    int64_t n = ampc_shape_numel(&s);
    void *buf = calloc((size_t)(n ? n : 1), ampc_dtype_size(t));
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(buf, t, i, vals[i]);
    ampc_value *v = ampc_constant(g, name, t, s.rank, s.dims, buf);
    free(buf);
    return v;
}

static ampc_value *ints(ampc_graph *g, const char *name, ampc_shape s, const int64_t *v) {
    return ampc_constant(g, name, AMPC_DTYPE_I64, s.rank, s.dims, v);
}

static ampc_value *build(ampc_graph *g, const char *op, ampc_value **in, int32_t n_in,
                         const ampc_attr_arg *at, int32_t n_at) {
    ampc_value *y = ampc_op(g, op, in, n_in, at, n_at);
    cr_assert(!ampc_value_is_poisoned(y), "%s failed:\n%s", op, ampc_graph_errors(g));
    return y;
}

static void expect_fail(ampc_graph *g, const char *op, ampc_value **in, int32_t n_in,
                        const ampc_attr_arg *at, int32_t n_at, const char *needle) {
    ampc_value *y = ampc_op(g, op, in, n_in, at, n_at);
    cr_assert(ampc_value_is_poisoned(y), "%s unexpectedly succeeded", op);
    t_expect_diag(g, needle);
}

/* Evaluates y (no graph inputs) and checks dtype, shape and exact values. */
static void expect_vals(ampc_graph *g, ampc_value *y, ampc_dtype t, ampc_shape s,
                        const double *want) {
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    cr_assert_eq(out.dtype, t, "dtype %s", ampc_dtype_name(out.dtype));
    t_expect_close(&out, s, want, 0, 0);
    ampc_tensor_free(&out);
}

static void expect_i64(ampc_graph *g, ampc_value *y, ampc_shape s, const int64_t *want) {
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    cr_assert_eq(out.dtype, AMPC_DTYPE_I64);
    t_expect_ints(&out, s, want);
    ampc_tensor_free(&out);
}

/* Evaluates a one-output graph with one f32 input and expects an evaluation error. */
static void expect_eval_error(ampc_graph *g, ampc_value *y, ampc_tensor in, const char *needle) {
    ampc_tensor out;
    cr_assert_eq(ampc_output(g, y, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &out, 1), AMPC_E_EVAL);
    t_expect_diag(g, needle);
}

/* ---- GatherElements ------------------------------------------------------------------------- */

/* The ONNX example: axis 0 picks rows per element; negative indices count from the end. */
Test(index, gather_elements_axis0_and_negative) {
    ampc_graph *g = ampc_graph_create("t");
    double d[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int64_t iv[6] = {1, 2, 0, 2, 0, -3};
    ampc_value *in[2] = {cst(g, "data", AMPC_DTYPE_F32, SHAPE(3, 3), d),
                         ints(g, "idx", SHAPE(2, 3), iv)};
    ampc_value *y = build(g, "GatherElements", in, 2, NULL, 0);
    /* out[i][j] = data[idx[i][j]][j]: data[1][0], data[2][1], data[0][2]; data[2][0], ... */
    double want[6] = {4, 8, 3, 7, 2, 3};
    expect_vals(g, y, AMPC_DTYPE_F32, SHAPE(2, 3), want);
    ampc_graph_destroy(g);
}

/* Axis 1 on i32 data with i32 indices; the indices may be smaller than the data elsewhere. */
Test(index, gather_elements_axis1_ints) {
    ampc_graph *g = ampc_graph_create("t");
    double d[6] = {1, 2, 3, 4, 5, 6}, iv[2] = {2, 0};
    ampc_attr_arg ax = AMPC_ATTR_I("axis", 1);
    ampc_value *in[2] = {cst(g, "data", AMPC_DTYPE_I32, SHAPE(2, 3), d),
                         cst(g, "idx", AMPC_DTYPE_I32, SHAPE(2, 1), iv)};
    double want[2] = {3, 4}; /* data[0][2], data[1][0] */
    expect_vals(g, build(g, "GatherElements", in, 2, &ax, 1), AMPC_DTYPE_I32, SHAPE(2, 1), want);
    ampc_graph_destroy(g);
}

Test(index, gather_elements_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double d[6] = {0};
    int64_t iv[4] = {0, 0, 0, 0};
    ampc_value *in[2] = {cst(g, "data", AMPC_DTYPE_F32, SHAPE(2, 3), d),
                         ints(g, "idx", SHAPE(4), iv)};
    expect_fail(g, "GatherElements", in, 2, NULL, 0,
                "node 0 (GatherElements 'GatherElements_0'): input 1 'idx' must have the rank of "
                "input 0 'data': got [4] against [2,3]");
    in[1] = ints(g, "wide", SHAPE(1, 4), iv);
    expect_fail(g, "GatherElements", in, 2, NULL, 0,
                "input 1 'wide' [1,4] is larger than input 0 'data' [2,3] along dim 1 (4 > 3); "
                "only the axis dim 0 may be larger");
    ampc_graph_destroy(g);
}

/* An index out of range is found at evaluation and named with its position. */
Test(index, gather_elements_index_out_of_range) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t iv[2] = {0, 3};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3));
    ampc_value *in[2] = {x, ints(g, "idx", SHAPE(2), iv)};
    float xv[3] = {1, 2, 3};
    expect_eval_error(g, build(g, "GatherElements", in, 2, NULL, 0),
                      t_tensor(AMPC_DTYPE_F32, SHAPE(3), xv),
                      "index 3 (element 1 of input 1 'idx') is out of range for the axis of input "
                      "0, which has 3 entries (valid: -3 to 2)");
    ampc_graph_destroy(g);
}

/* ---- ScatterElements, Scatter --------------------------------------------------------------- */

/* The ONNX example (axis 0) through both ScatterElements and the deprecated Scatter. */
Test(index, scatter_elements_and_scatter) {
    ampc_graph *g = ampc_graph_create("t");
    double d[9] = {0}, u[6] = {1.0, 1.5, 1.25, 2.0, 2.5, 2.25};
    int64_t iv[6] = {1, 0, 2, 0, 2, 1};
    ampc_value *in[3] = {cst(g, "data", AMPC_DTYPE_F32, SHAPE(3, 3), d),
                         ints(g, "idx", SHAPE(2, 3), iv),
                         cst(g, "upd", AMPC_DTYPE_F32, SHAPE(2, 3), u)};
    /* update (i, j) goes to row idx[i][j], column j */
    double want[9] = {2.0, 1.5, 0, 1.0, 0, 2.25, 0, 2.5, 1.25};
    expect_vals(g, build(g, "ScatterElements", in, 3, NULL, 0), AMPC_DTYPE_F32, SHAPE(3, 3), want);
    ampc_graph_destroy(g);
    g = ampc_graph_create("t");
    in[0] = cst(g, "data", AMPC_DTYPE_F32, SHAPE(3, 3), d);
    in[1] = ints(g, "idx", SHAPE(2, 3), iv);
    in[2] = cst(g, "upd", AMPC_DTYPE_F32, SHAPE(2, 3), u);
    expect_vals(g, build(g, "Scatter", in, 3, NULL, 0), AMPC_DTYPE_F32, SHAPE(3, 3), want);
    ampc_graph_destroy(g);
}

/* Duplicate indices combine by the reduction: data [1,2,3,4,5], both updates at index 1. */
Test(index, scatter_elements_reductions) {
    const char *red[4] = {"add", "mul", "max", "min"};
    /* 2 + 1.5 + 2.5; 2 * 1.5 * 2.5; max(2, 1.5, 2.5); min(2, 1.5, 2.5) */
    double at1[4] = {6, 7.5, 2.5, 1.5};
    for (int r = 0; r < 4; r++) {
        ampc_graph *g = ampc_graph_create("t");
        double d[5] = {1, 2, 3, 4, 5}, u[2] = {1.5, 2.5};
        int64_t iv[2] = {1, -4};
        ampc_attr_arg at[2] = {AMPC_ATTR_I("axis", 1), AMPC_ATTR_S("reduction", red[r])};
        ampc_value *in[3] = {cst(g, "data", AMPC_DTYPE_F64, SHAPE(1, 5), d),
                             ints(g, "idx", SHAPE(1, 2), iv),
                             cst(g, "upd", AMPC_DTYPE_F64, SHAPE(1, 2), u)};
        double want[5] = {1, at1[r], 3, 4, 5};
        expect_vals(g, build(g, "ScatterElements", in, 3, at, 2), AMPC_DTYPE_F64, SHAPE(1, 5),
                    want);
        ampc_graph_destroy(g);
    }
}

/* Integer reductions wrap like numpy's: i8 add 100 + 100 -> -56. */
Test(index, scatter_elements_integer_add_wraps) {
    ampc_graph *g = ampc_graph_create("t");
    double d[2] = {100, 7}, u[1] = {100};
    int64_t iv[1] = {0};
    ampc_attr_arg at = AMPC_ATTR_S("reduction", "add");
    ampc_value *in[3] = {cst(g, "data", AMPC_DTYPE_I8, SHAPE(2), d), ints(g, "idx", SHAPE(1), iv),
                         cst(g, "upd", AMPC_DTYPE_I8, SHAPE(1), u)};
    double want[2] = {-56, 7};
    expect_vals(g, build(g, "ScatterElements", in, 3, &at, 1), AMPC_DTYPE_I8, SHAPE(2), want);
    ampc_graph_destroy(g);
}

Test(index, scatter_elements_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double d[4] = {0}, u[3] = {0};
    int64_t iv[2] = {0, 1};
    ampc_value *in[3] = {cst(g, "data", AMPC_DTYPE_F32, SHAPE(2, 2), d),
                         ints(g, "idx", SHAPE(1, 2), iv),
                         cst(g, "upd", AMPC_DTYPE_F32, SHAPE(1, 3), u)};
    expect_fail(g, "ScatterElements", in, 3, NULL, 0,
                "node 0 (ScatterElements 'ScatterElements_0'): input 2 'upd' must be [1,2] (the "
                "shape of input 1), got [1,3]");
    ampc_attr_arg bad = AMPC_ATTR_S("reduction", "mean");
    in[2] = cst(g, "upd2", AMPC_DTYPE_F32, SHAPE(1, 2), u);
    expect_fail(g, "ScatterElements", in, 3, &bad, 1,
                "attribute 'reduction' must be none, add, mul, max or min, got \"mean\"");
    ampc_graph_destroy(g);
}

/* ---- GatherND, ScatterND -------------------------------------------------------------------- */

Test(index, gather_nd_elements_slices_and_batch_dims) {
    ampc_graph *g = ampc_graph_create("t");
    double d[4] = {0, 1, 2, 3}, d3[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t full[4] = {0, 0, 1, 1}, rows[2] = {1, 0}, batch[2] = {1, 0};
    ampc_value *x = cst(g, "data", AMPC_DTYPE_F32, SHAPE(2, 2), d);
    ampc_value *in1[2] = {x, ints(g, "i1", SHAPE(2, 2), full)};
    ampc_value *in2[2] = {x, ints(g, "i2", SHAPE(2, 1), rows)};
    ampc_value *in3[2] = {cst(g, "d3", AMPC_DTYPE_F32, SHAPE(2, 2, 2), d3),
                          ints(g, "i3", SHAPE(2, 1), batch)};
    ampc_attr_arg b1 = AMPC_ATTR_I("batch_dims", 1);
    ampc_value *y1 = build(g, "GatherND", in1, 2, NULL, 0),
               *y2 = build(g, "GatherND", in2, 2, NULL, 0);
    ampc_value *y3 = build(g, "GatherND", in3, 2, &b1, 1);
    cr_assert_eq(ampc_output(g, y1, "y1"), AMPC_OK);
    cr_assert_eq(ampc_output(g, y2, "y2"), AMPC_OK);
    cr_assert_eq(ampc_output(g, y3, "y3"), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double w1[2] = {0, 3};       /* data[0][0], data[1][1] */
    double w2[4] = {2, 3, 0, 1}; /* rows 1 and 0 */
    double w3[4] = {2, 3, 4, 5}; /* batch 0 row 1, batch 1 row 0 */
    t_expect_close(&out[0], SHAPE(2), w1, 0, 0);
    t_expect_close(&out[1], SHAPE(2, 2), w2, 0, 0);
    t_expect_close(&out[2], SHAPE(2, 2), w3, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(index, gather_nd_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double d[4] = {0};
    int64_t iv[3] = {0, 0, 0};
    ampc_value *in[2] = {cst(g, "data", AMPC_DTYPE_F32, SHAPE(2, 2), d),
                         ints(g, "idx", SHAPE(1, 3), iv)};
    expect_fail(g, "GatherND", in, 2, NULL, 0,
                "node 0 (GatherND 'GatherND_0'): the last dim of input 1 'idx' [1,3] (the index "
                "depth) must be in [1, 2] (the rank of input 0 'data' [2,2] less batch_dims 0), "
                "got 3");
    ampc_attr_arg b = AMPC_ATTR_I("batch_dims", 2);
    in[1] = ints(g, "i2", SHAPE(2, 1), iv);
    expect_fail(g, "GatherND", in, 2, &b, 1,
                "attribute 'batch_dims' 2 must be in [0, 2) for input 0 'data' [2,2] and input 1 "
                "'i2' [2,1]");
    ampc_graph_destroy(g);
}

/* The ONNX example: updates land at positions 4, 3, 1, 7; then add with a repeated index. */
Test(index, scatter_nd_replace_and_add) {
    ampc_graph *g = ampc_graph_create("t");
    double d[8] = {1, 2, 3, 4, 5, 6, 7, 8}, u[4] = {9, 10, 11, 12};
    int64_t iv[4] = {4, 3, 1, 7};
    ampc_value *in[3] = {cst(g, "data", AMPC_DTYPE_F32, SHAPE(8), d),
                         ints(g, "idx", SHAPE(4, 1), iv),
                         cst(g, "upd", AMPC_DTYPE_F32, SHAPE(4), u)};
    double want[8] = {1, 11, 3, 10, 9, 6, 7, 12};
    expect_vals(g, build(g, "ScatterND", in, 3, NULL, 0), AMPC_DTYPE_F32, SHAPE(8), want);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double d2[4] = {1, 2, 3, 4}, u2[4] = {10, 20, 30, 40};
    int64_t i2[2] = {1, 1};
    ampc_attr_arg add = AMPC_ATTR_S("reduction", "add");
    ampc_value *in2[3] = {cst(g, "data", AMPC_DTYPE_I64, SHAPE(2, 2), d2),
                          ints(g, "idx", SHAPE(2, 1), i2),
                          cst(g, "upd", AMPC_DTYPE_I64, SHAPE(2, 2), u2)};
    double want2[4] = {1, 2, 3 + 10 + 30, 4 + 20 + 40}; /* both slices added to row 1 */
    expect_vals(g, build(g, "ScatterND", in2, 3, &add, 1), AMPC_DTYPE_I64, SHAPE(2, 2), want2);
    ampc_graph_destroy(g);
}

Test(index, scatter_nd_update_shape_error) {
    ampc_graph *g = ampc_graph_create("t");
    double d[8] = {0}, u[3] = {0};
    int64_t iv[2] = {0, 1};
    ampc_value *in[3] = {cst(g, "data", AMPC_DTYPE_F32, SHAPE(2, 4), d),
                         ints(g, "idx", SHAPE(2, 1), iv),
                         cst(g, "upd", AMPC_DTYPE_F32, SHAPE(3), u)};
    expect_fail(g, "ScatterND", in, 3, NULL, 0,
                "node 0 (ScatterND 'ScatterND_0'): input 2 'upd' must be [2,4] "
                "(indices.shape[:-1] + data.shape[k:]), got [3]");
    ampc_graph_destroy(g);
}

/* ---- OneHot --------------------------------------------------------------------------------- */

/* Indices 0, 2, -1 (= 2) and 5 (out of range: all off) with depth 3, values [-1, 7]. */
Test(index, one_hot_last_axis_and_axis0) {
    ampc_graph *g = ampc_graph_create("t");
    double iv[4] = {0, 2, -1, 5}, dv[1] = {3}, vv[2] = {-1, 7};
    ampc_value *in[3] = {cst(g, "idx", AMPC_DTYPE_F32, SHAPE(4), iv),
                         cst(g, "depth", AMPC_DTYPE_F32, SHAPE(), dv),
                         cst(g, "vals", AMPC_DTYPE_I32, SHAPE(2), vv)};
    ampc_value *y = build(g, "OneHot", in, 3, NULL, 0);
    ampc_attr_arg a0 = AMPC_ATTR_I("axis", 0);
    ampc_value *y0 = build(g, "OneHot", in, 3, &a0, 1);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, y0, "y0"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double w[12] = {7, -1, -1, -1, -1, 7, -1, -1, 7, -1, -1, -1};
    double w0[12] = {7, -1, -1, -1, -1, -1, -1, -1, -1, 7, 7, -1}; /* the transpose */
    cr_assert_eq(out[0].dtype, AMPC_DTYPE_I32);
    t_expect_close(&out[0], SHAPE(4, 3), w, 0, 0);
    t_expect_close(&out[1], SHAPE(3, 4), w0, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(index, one_hot_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double iv[2] = {0, 1}, dv[1] = {0}, vv[3] = {0, 1, 2};
    ampc_value *in[3] = {cst(g, "idx", AMPC_DTYPE_I64, SHAPE(2), iv),
                         cst(g, "depth", AMPC_DTYPE_I64, SHAPE(1), dv),
                         cst(g, "vals", AMPC_DTYPE_F32, SHAPE(2), vv)};
    expect_fail(g, "OneHot", in, 3, NULL, 0,
                "node 0 (OneHot 'OneHot_0'): input 1 'depth' (depth) must be 1 or more, got 0");
    dv[0] = 2;
    in[1] = cst(g, "d2", AMPC_DTYPE_I64, SHAPE(1), dv);
    in[2] = cst(g, "v3", AMPC_DTYPE_F32, SHAPE(3), vv);
    expect_fail(g, "OneHot", in, 3, NULL, 0,
                "input 2 'v3' (values) must be [2] (off value, on value), got [3]");
    ampc_graph_destroy(g);
}

/* ---- TopK ----------------------------------------------------------------------------------- */

static void top_k(ampc_graph *g, ampc_value *x, int64_t k, const ampc_attr_arg *at, int32_t n_at,
                  ampc_value **out) {
    ampc_value *in[2] = {x, ints(g, NULL, SHAPE(1), &k)};
    cr_assert_eq(ampc_op_multi(g, "TopK", in, 2, at, n_at, out, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
}

/* The ONNX example rows, largest and smallest, and ties broken by the lower index. */
Test(index, top_k_largest_smallest_ties) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[12] = {0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11}, tv[4] = {3, 1, 3, 2};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(3, 4), xv), *o[6];
    ampc_attr_arg small = AMPC_ATTR_I("largest", 0);
    top_k(g, x, 3, NULL, 0, o);
    top_k(g, x, 3, &small, 1, o + 2);
    top_k(g, cst(g, "t", AMPC_DTYPE_I32, SHAPE(4), tv), 3, NULL, 0, o + 4);
    const char *names[6] = {"v", "i", "sv", "si", "tv", "ti"};
    for (int i = 0; i < 6; i++) cr_assert_eq(ampc_output(g, o[i], names[i]), AMPC_OK);
    ampc_tensor out[6];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 6), AMPC_OK, "%s", ampc_graph_errors(g));
    double wv[9] = {3, 2, 1, 7, 6, 5, 11, 10, 9}, sv[9] = {0, 1, 2, 4, 5, 6, 8, 9, 10};
    int64_t wi[9] = {3, 2, 1, 0, 1, 2, 3, 2, 1}, si[9] = {0, 1, 2, 3, 2, 1, 0, 1, 2};
    double tvw[3] = {3, 3, 2};
    int64_t tiw[3] = {0, 2, 3};
    t_expect_close(&out[0], SHAPE(3, 3), wv, 0, 0);
    t_expect_ints(&out[1], SHAPE(3, 3), wi);
    t_expect_close(&out[2], SHAPE(3, 3), sv, 0, 0);
    t_expect_ints(&out[3], SHAPE(3, 3), si);
    t_expect_close(&out[4], SHAPE(3), tvw, 0, 0);
    t_expect_ints(&out[5], SHAPE(3), tiw);
    cr_assert_eq(out[1].dtype, AMPC_DTYPE_I64);
    for (int i = 0; i < 6; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* Axis 0 of a [3,2] with k = 0 gives empty outputs; K past the dim is an error. */
Test(index, top_k_empty_and_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {1, 2, 3, 4, 5, 6};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2), xv), *o[2];
    ampc_attr_arg a0 = AMPC_ATTR_I("axis", 0);
    top_k(g, x, 0, &a0, 1, o);
    ampc_shape s = ampc_value_shape(o[1]), want = SHAPE(0, 2);
    cr_assert(ampc_shape_eq(&s, &want));
    int64_t k = 4;
    ampc_value *in[2] = {x, ints(g, "K", SHAPE(1), &k)};
    cr_assert_neq(ampc_op_multi(g, "TopK", in, 2, &a0, 1, o, 2), AMPC_OK);
    t_expect_diag(g, "input 1 'K' (K) is 4, must be in [0, 3]: axis 0 of input 0 'x' [3,2] has 3 "
                     "entries");
    ampc_graph_destroy(g);
}

/* ---- Trilu ---------------------------------------------------------------------------------- */

Test(index, trilu_upper_lower_with_k) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int64_t km1 = -1, k1 = 1;
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(3, 3), xv);
    ampc_value *in_m1[2] = {x, ints(g, "k", SHAPE(), &km1)},
               *in_1[2] = {x, ints(g, "k1", SHAPE(1), &k1)};
    ampc_attr_arg lower = AMPC_ATTR_I("upper", 0);
    ampc_value *u = build(g, "Trilu", &x, 1, NULL, 0), *l = build(g, "Trilu", in_m1, 2, &lower, 1);
    ampc_value *u1 = build(g, "Trilu", in_1, 2, NULL, 0);
    cr_assert_eq(ampc_output(g, u, "u"), AMPC_OK);
    cr_assert_eq(ampc_output(g, l, "l"), AMPC_OK);
    cr_assert_eq(ampc_output(g, u1, "u1"), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double wu[9] = {1, 2, 3, 0, 5, 6, 0, 0, 9}, wl[9] = {0, 0, 0, 4, 0, 0, 7, 8, 0};
    double wu1[9] = {0, 2, 3, 0, 0, 6, 0, 0, 0};
    t_expect_close(&out[0], SHAPE(3, 3), wu, 0, 0);
    t_expect_close(&out[1], SHAPE(3, 3), wl, 0, 0);
    t_expect_close(&out[2], SHAPE(3, 3), wu1, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(index, trilu_needs_a_matrix) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[3] = {0};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(3), xv);
    expect_fail(g, "Trilu", &x, 1, NULL, 0,
                "node 0 (Trilu 'Trilu_0'): input 0 'x' must have rank 2 or more, got [3]");
    ampc_graph_destroy(g);
}

/* ---- ArgMax, ArgMin, Hardmax ---------------------------------------------------------------- */

Test(index, argmax_argmin_keepdims_and_last_index) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {2, 1, 2, 3, 10, 3};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_I32, SHAPE(2, 3), xv);
    ampc_attr_arg a1[2] = {AMPC_ATTR_I("axis", 1), AMPC_ATTR_I("keepdims", 1)};
    ampc_attr_arg a0[2] = {AMPC_ATTR_I("axis", 0), AMPC_ATTR_I("keepdims", 0)};
    ampc_attr_arg last[2] = {AMPC_ATTR_I("axis", -1), AMPC_ATTR_I("select_last_index", 1)};
    ampc_value *y[4] = {build(g, "ArgMax", &x, 1, a1, 2), build(g, "ArgMin", &x, 1, a0, 2),
                        build(g, "ArgMax", &x, 1, last, 2), build(g, "ArgMin", &x, 1, last, 2)};
    const char *names[4] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) cr_assert_eq(ampc_output(g, y[i], names[i]), AMPC_OK);
    ampc_tensor out[4];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 4), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t w0[2] = {0, 1};    /* row maxima 2 (first at 0), 10 at 1 */
    int64_t w1[3] = {0, 0, 0}; /* column minima 2, 1, 2 all in row 0 */
    int64_t w2[2] = {2, 1};    /* last maximum: 2 at index 2; 10 at 1 */
    int64_t w3[2] = {1, 2};    /* last minimum: 1 at 1; 3 at index 2 */
    t_expect_ints(&out[0], SHAPE(2, 1), w0);
    t_expect_ints(&out[1], SHAPE(3), w1);
    t_expect_ints(&out[2], SHAPE(2, 1), w2);
    t_expect_ints(&out[3], SHAPE(2, 1), w3);
    for (int i = 0; i < 4; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* A NaN wins, as in numpy: argmax and argmin of [1, NaN, 5] are both 1. */
Test(index, argmax_nan) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[3] = {1, NAN, 5};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(3), xv);
    int64_t w[1] = {1};
    expect_i64(g, build(g, "ArgMin", &x, 1, NULL, 0), SHAPE(1), w);
    ampc_graph_destroy(g);
}

Test(index, argmax_empty_axis) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 0));
    ampc_attr_arg a = AMPC_ATTR_I("axis", 1);
    expect_fail(g, "ArgMax", &x, 1, &a, 1,
                "node 0 (ArgMax 'ArgMax_0'): axis 1 of input 0 'x' [2,0] is empty; ArgMax needs "
                "at least one entry");
    ampc_graph_destroy(g);
}

/* Hardmax: 1 at the first maximum of each row (default axis -1). */
Test(index, hardmax_rows_and_ties) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[8] = {3, 0, 1, 2, 1, 5, 5, 0};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F16, SHAPE(2, 4), xv);
    double want[8] = {1, 0, 0, 0, 0, 1, 0, 0};
    expect_vals(g, build(g, "Hardmax", &x, 1, NULL, 0), AMPC_DTYPE_F16, SHAPE(2, 4), want);
    ampc_graph_destroy(g);
}

/* ---- CumSum --------------------------------------------------------------------------------- */

Test(index, cumsum_flags) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[5] = {1, 2, 3, 4, 5};
    int64_t ax = 0;
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F64, SHAPE(5), xv), ints(g, "axis", SHAPE(), &ax)};
    ampc_attr_arg ex = AMPC_ATTR_I("exclusive", 1), rv = AMPC_ATTR_I("reverse", 1);
    ampc_attr_arg both[2] = {ex, rv};
    ampc_value *y[4] = {build(g, "CumSum", in, 2, NULL, 0), build(g, "CumSum", in, 2, &ex, 1),
                        build(g, "CumSum", in, 2, &rv, 1), build(g, "CumSum", in, 2, both, 2)};
    const char *names[4] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) cr_assert_eq(ampc_output(g, y[i], names[i]), AMPC_OK);
    ampc_tensor out[4];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 4), AMPC_OK, "%s", ampc_graph_errors(g));
    double w[4][5] = {{1, 3, 6, 10, 15}, {0, 1, 3, 6, 10}, {15, 14, 12, 9, 5}, {14, 12, 9, 5, 0}};
    for (int i = 0; i < 4; i++) t_expect_close(&out[i], SHAPE(5), w[i], 0, 0);
    for (int i = 0; i < 4; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* Along axis -1 of an i32 [2,3]. */
Test(index, cumsum_negative_axis_ints) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {1, 2, 3, 4, 5, 6};
    double av[1] = {-1};
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_I32, SHAPE(2, 3), xv),
                         cst(g, "axis", AMPC_DTYPE_I32, SHAPE(1), av)};
    double want[6] = {1, 3, 6, 4, 9, 15};
    expect_vals(g, build(g, "CumSum", in, 2, NULL, 0), AMPC_DTYPE_I32, SHAPE(2, 3), want);
    ampc_graph_destroy(g);
}

/* ---- NonZero, Compress, Unique -------------------------------------------------------------- */

Test(index, nonzero_of_a_constant) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 0, 1, 1};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(2, 2), xv);
    int64_t want[6] = {0, 1, 1, 0, 0, 1}; /* rows then columns of (0,0), (1,0), (1,1) */
    expect_i64(g, build(g, "NonZero", &x, 1, NULL, 0), SHAPE(2, 3), want);
    ampc_graph_destroy(g);
}

/* A run-time input decides nothing at compile time: the error says so. */
Test(index, nonzero_of_a_runtime_input) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4));
    expect_fail(g, "NonZero", &x, 1, NULL, 0,
                "node 0 (NonZero 'NonZero_0'): input 0 'x' must be known at compile time");
    t_expect_diag(g, "ampc compiles static graphs");
    ampc_graph_destroy(g);
}

/* The op's own inference states why (the graph builder's generic compile-time check runs first
 * when a node is built; a node appended without inference meets this one). */
Test(index, nonzero_inference_says_why) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4));
    ampc_value *y = ampc_ir_value_new(g, "y", AMPC_DTYPE_UNDEFINED, NULL);
    ampc_node *n = ampc_ir_node_append(g, AMPC_OP_NONZERO, "nz", &x, 1, NULL, 0, &y, 1);
    cr_assert_eq(ampc_op_get(AMPC_OP_NONZERO)->infer(g, n), AMPC_E_UNSUPPORTED);
    t_expect_diag(g, "node 0 (NonZero 'nz'): output shape depends on the values of input 0 'x'; "
                     "ampc compiles static graphs, so this input must be a constant");
    ampc_graph_destroy(g);
}

Test(index, compress_axes_and_flattened) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {1, 2, 3, 4, 5, 6}, c0[3] = {0, 1, 1}, c1[2] = {0, 1}, cf[5] = {0, 1, 0, 0, 1};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2)); /* data may be run-time */
    ampc_attr_arg a0 = AMPC_ATTR_I("axis", 0), a1 = AMPC_ATTR_I("axis", -1);
    ampc_value *in0[2] = {x, cst(g, "c0", AMPC_DTYPE_BOOL, SHAPE(3), c0)};
    ampc_value *in1[2] = {x, cst(g, "c1", AMPC_DTYPE_BOOL, SHAPE(2), c1)};
    ampc_value *inf[2] = {x, cst(g, "cf", AMPC_DTYPE_BOOL, SHAPE(5), cf)};
    ampc_value *y[3] = {build(g, "Compress", in0, 2, &a0, 1), build(g, "Compress", in1, 2, &a1, 1),
                        build(g, "Compress", inf, 2, NULL, 0)};
    const char *names[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) cr_assert_eq(ampc_output(g, y[i], names[i]), AMPC_OK);
    float xf[6];
    for (int i = 0; i < 6; i++) xf[i] = (float)xv[i];
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3, 2), xf), out[3];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double w0[4] = {3, 4, 5, 6}, w1[3] = {2, 4, 6}, wf[2] = {2, 5};
    t_expect_close(&out[0], SHAPE(2, 2), w0, 0, 0);
    t_expect_close(&out[1], SHAPE(3, 1), w1, 0, 0);
    t_expect_close(&out[2], SHAPE(2), wf, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(index, compress_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double c[4] = {0, 0, 0, 1};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2));
    ampc_attr_arg a0 = AMPC_ATTR_I("axis", 0);
    ampc_value *in[2] = {x, cst(g, "cond", AMPC_DTYPE_BOOL, SHAPE(4), c)};
    expect_fail(g, "Compress", in, 2, &a0, 1,
                "node 0 (Compress 'Compress_0'): input 1 'cond' (condition) is true at 3, past "
                "the 3 entries of the axis of input 0 'x' [3,2]");
    in[1] = cst(g, "c_f", AMPC_DTYPE_F32, SHAPE(4), c);
    expect_fail(g, "Compress", in, 2, &a0, 1, "input 1 'c_f' (condition) must be bool, got f32");
    ampc_graph_destroy(g);
}

static void unique_outputs(ampc_graph *g, ampc_value *x, const ampc_attr_arg *at, int32_t n_at,
                           ampc_tensor out[4]) {
    ampc_value *o[4];
    cr_assert_eq(ampc_op_multi(g, "Unique", &x, 1, at, n_at, o, 4), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    const char *names[4] = {"y", "indices", "inverse", "counts"};
    for (int i = 0; i < 4; i++) cr_assert_eq(ampc_output(g, o[i], names[i]), AMPC_OK);
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 4), AMPC_OK, "%s", ampc_graph_errors(g));
}

/* The ONNX examples: [2, 1, 1, 3, 4, 3] sorted and in order of first occurrence. */
Test(index, unique_sorted_and_unsorted) {
    double xv[6] = {2, 1, 1, 3, 4, 3};
    for (int sorted = 0; sorted < 2; sorted++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_attr_arg s = AMPC_ATTR_I("sorted", sorted);
        ampc_tensor out[4];
        unique_outputs(g, cst(g, "x", AMPC_DTYPE_F32, SHAPE(6), xv), &s, 1, out);
        double ys[4] = {1, 2, 3, 4}, yu[4] = {2, 1, 3, 4};
        int64_t is[4] = {1, 0, 3, 4}, iu[4] = {0, 1, 3, 4};
        int64_t vs[6] = {1, 0, 0, 2, 3, 2}, vu[6] = {0, 1, 1, 2, 3, 2};
        int64_t cs[4] = {2, 1, 2, 1}, cu[4] = {1, 2, 2, 1};
        t_expect_close(&out[0], SHAPE(4), sorted ? ys : yu, 0, 0);
        t_expect_ints(&out[1], SHAPE(4), sorted ? is : iu);
        t_expect_ints(&out[2], SHAPE(6), sorted ? vs : vu);
        t_expect_ints(&out[3], SHAPE(4), sorted ? cs : cu);
        for (int i = 0; i < 4; i++) ampc_tensor_free(&out[i]);
        ampc_graph_destroy(g);
    }
}

/* Unique rows (axis 0) of [[1,0,0],[1,0,0],[2,3,4]], and columns (axis 1) of a [2,3]. */
Test(index, unique_along_an_axis) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[9] = {1, 0, 0, 1, 0, 0, 2, 3, 4};
    ampc_attr_arg a0 = AMPC_ATTR_I("axis", 0);
    ampc_tensor out[4];
    unique_outputs(g, cst(g, "x", AMPC_DTYPE_I64, SHAPE(3, 3), xv), &a0, 1, out);
    double y[6] = {1, 0, 0, 2, 3, 4};
    int64_t idx[2] = {0, 2}, inv[3] = {0, 0, 1}, cnt[2] = {2, 1};
    t_expect_close(&out[0], SHAPE(2, 3), y, 0, 0);
    t_expect_ints(&out[1], SHAPE(2), idx);
    t_expect_ints(&out[2], SHAPE(3), inv);
    t_expect_ints(&out[3], SHAPE(2), cnt);
    for (int i = 0; i < 4; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    /* columns (2,1), (0,5), (2,1): sorted lexicographically (0,5) < (2,1) */
    double cv[6] = {2, 0, 2, 1, 5, 1};
    ampc_attr_arg a1 = AMPC_ATTR_I("axis", 1);
    unique_outputs(g, cst(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3), cv), &a1, 1, out);
    double yc[4] = {0, 2, 5, 1};
    int64_t ic[2] = {1, 0}, vc[3] = {1, 0, 1}, cc[2] = {1, 2};
    t_expect_close(&out[0], SHAPE(2, 2), yc, 0, 0);
    t_expect_ints(&out[1], SHAPE(2), ic);
    t_expect_ints(&out[2], SHAPE(3), vc);
    t_expect_ints(&out[3], SHAPE(2), cc);
    for (int i = 0; i < 4; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* ---- EyeLike, ReverseSequence --------------------------------------------------------------- */

Test(index, eye_like_k_and_dtype) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 4)); /* only its shape is read */
    ampc_attr_arg at[2] = {AMPC_ATTR_I("k", 1), AMPC_ATTR_I("dtype", 6 /* INT32 */)};
    ampc_attr_arg km = AMPC_ATTR_I("k", -2);
    ampc_value *y = build(g, "EyeLike", &x, 1, at, 2), *z = build(g, "EyeLike", &x, 1, &km, 1);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_I32);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, z, "z"), AMPC_OK);
    float xv[12] = {0};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3, 4), xv), out[2];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t wy[12] = {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    double wz[12] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    t_expect_ints(&out[0], SHAPE(3, 4), wy);
    t_expect_close(&out[1], SHAPE(3, 4), wz, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_attr_arg bad = AMPC_ATTR_I("dtype", 8 /* STRING */);
    expect_fail(g, "EyeLike", &x, 1, &bad, 1, "attribute 'dtype' 8 names no element type ampc has");
    ampc_graph_destroy(g);
}

/* The ONNX example: time-major [4, 4], lengths 4, 3, 2, 1 per batch column. */
Test(index, reverse_sequence_time_major_and_batch_major) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
    int64_t lens[4] = {4, 3, 2, 1};
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(4, 4), xv),
                         ints(g, "lens", SHAPE(4), lens)};
    double want[16] = {3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15};
    expect_vals(g, build(g, "ReverseSequence", in, 2, NULL, 0), AMPC_DTYPE_F32, SHAPE(4, 4), want);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double bv[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t bl[2] = {1, 3};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("batch_axis", 0), AMPC_ATTR_I("time_axis", 1)};
    ampc_value *in2[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4), bv),
                          ints(g, "lens", SHAPE(2), bl)};
    double w2[8] = {0, 1, 2, 3, 6, 5, 4, 7};
    expect_vals(g, build(g, "ReverseSequence", in2, 2, at, 2), AMPC_DTYPE_F32, SHAPE(2, 4), w2);
    ampc_graph_destroy(g);
}

Test(index, reverse_sequence_errors) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t lens[3] = {1, 1, 1};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 2));
    ampc_value *in[2] = {x, ints(g, "lens", SHAPE(3), lens)};
    expect_fail(g, "ReverseSequence", in, 2, NULL, 0,
                "node 0 (ReverseSequence 'ReverseSequence_0'): input 1 'lens' must be [2] (one "
                "length per batch entry of input 0 'x' [2,2] along axis 1), got [3]");
    ampc_graph_destroy(g);
    g = ampc_graph_create("t"); /* a graph with a failed node does not evaluate */
    int64_t big[2] = {1, 5};
    in[0] = x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 2));
    in[1] = ints(g, "big", SHAPE(2), big);
    float xv[4] = {0};
    expect_eval_error(g, build(g, "ReverseSequence", in, 2, NULL, 0),
                      t_tensor(AMPC_DTYPE_F32, SHAPE(2, 2), xv),
                      "sequence length 5 (element 1 of input 1 'big') must be in [0, 2], the time "
                      "steps of input 0 'x'");
    ampc_graph_destroy(g);
}

/* ---- empty tensors -------------------------------------------------------------------------- */

/* Empty indices gather nothing; an empty set of ScatterND updates leaves the data as it is. */
Test(index, empty_gathers_and_scatters) {
    ampc_graph *g = ampc_graph_create("t");
    double d[6] = {1, 2, 3, 4, 5, 6};
    ampc_value *x = cst(g, "data", AMPC_DTYPE_F32, SHAPE(2, 3), d);
    ampc_value *ge[2] = {x, ints(g, "idx", SHAPE(0, 3), NULL)};
    ampc_value *y = build(g, "GatherElements", ge, 2, NULL, 0);
    ampc_shape s = ampc_value_shape(y), want = SHAPE(0, 3);
    cr_assert(ampc_shape_eq(&s, &want));
    ampc_value *sn[3] = {x, ints(g, "none", SHAPE(0, 1), NULL),
                         cst(g, "upd", AMPC_DTYPE_F32, SHAPE(0, 3), NULL)};
    expect_vals(g, build(g, "ScatterND", sn, 3, NULL, 0), AMPC_DTYPE_F32, SHAPE(2, 3), d);
    ampc_graph_destroy(g);
}

/* ---- CumProd -------------------------------------------------------------------------------- */

/* Running products of 1..5 with each flag combination (an exclusive product starts at 1). */
Test(index, cumprod_flags) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[5] = {1, 2, 3, 4, 5};
    int64_t ax = 0;
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F64, SHAPE(5), xv), ints(g, "axis", SHAPE(), &ax)};
    ampc_attr_arg ex = AMPC_ATTR_I("exclusive", 1), rv = AMPC_ATTR_I("reverse", 1);
    ampc_attr_arg both[2] = {ex, rv};
    ampc_value *y[4] = {build(g, "CumProd", in, 2, NULL, 0), build(g, "CumProd", in, 2, &ex, 1),
                        build(g, "CumProd", in, 2, &rv, 1), build(g, "CumProd", in, 2, both, 2)};
    const char *names[4] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) cr_assert_eq(ampc_output(g, y[i], names[i]), AMPC_OK);
    ampc_tensor out[4];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 4), AMPC_OK, "%s", ampc_graph_errors(g));
    double w[4][5] = {{1, 2, 6, 24, 120}, {1, 1, 2, 6, 24}, {120, 120, 60, 20, 5},
                      {120, 60, 20, 5, 1}};
    for (int i = 0; i < 4; i++) t_expect_close(&out[i], SHAPE(5), w[i], 0, 0);
    for (int i = 0; i < 4; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* Along axis 0 of an i32 [2,3]; an i64 product wraps like numpy's. */
Test(index, cumprod_ints_axis0_and_wrapping) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {1, 2, 3, 4, 5, 6}, av[1] = {0};
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_I32, SHAPE(2, 3), xv),
                         cst(g, "axis", AMPC_DTYPE_I32, SHAPE(1), av)};
    double want[6] = {1, 2, 3, 4, 10, 18};
    expect_vals(g, build(g, "CumProd", in, 2, NULL, 0), AMPC_DTYPE_I32, SHAPE(2, 3), want);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    int64_t big[2] = {INT64_C(1) << 62, 4}, ax = 0;
    ampc_value *in2[2] = {ints(g, "x", SHAPE(2), big), ints(g, "axis", SHAPE(), &ax)};
    int64_t wrapped[2] = {INT64_C(1) << 62, 0}; /* 2^64 wraps to 0 */
    expect_i64(g, build(g, "CumProd", in2, 2, NULL, 0), SHAPE(2), wrapped);
    ampc_graph_destroy(g);
}

/* ---- TensorScatter -------------------------------------------------------------------------- */

/* Cache [2, 4, 2] (batch, sequence, 2 values) of zeros, update [2, 2, 2] = 1..8:
 *   no write_indices: both batches write rows 0 and 1
 *   write_indices {1, 3}, circular: batch 0 rows 1, 2; batch 1 rows 3, 0 (wrapped) */
Test(index, tensor_scatter_linear_and_circular) {
    double zeros[16] = {0}, uv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t wi[2] = {1, 3};
    double w0[16] = {1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0};
    double w1[16] = {0, 0, 1, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 0, 5, 6};
    for (int k = 0; k < 2; k++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[3] = {cst(g, "past", AMPC_DTYPE_F16, SHAPE(2, 4, 2), zeros),
                             cst(g, "upd", AMPC_DTYPE_F16, SHAPE(2, 2, 2), uv),
                             ints(g, "wi", SHAPE(2), wi)};
        ampc_attr_arg mode = AMPC_ATTR_S("mode", "circular");
        ampc_value *y = build(g, "TensorScatter", in, k ? 3 : 2, &mode, k);
        expect_vals(g, y, AMPC_DTYPE_F16, SHAPE(2, 4, 2), k ? w1 : w0);
        ampc_graph_destroy(g);
    }
}

/* The sequence axis in the middle of a rank-4 cache [2, 2, 3, 1] (axis -2): every prefix (b, h)
 * writes at write_indices[b]. */
Test(index, tensor_scatter_inner_axis) {
    ampc_graph *g = ampc_graph_create("t");
    double zeros[12] = {0}, uv[4] = {1, 2, 3, 4};
    int64_t wi[2] = {2, 0};
    ampc_value *in[3] = {cst(g, "past", AMPC_DTYPE_I32, SHAPE(2, 2, 3, 1), zeros),
                         cst(g, "upd", AMPC_DTYPE_I32, SHAPE(2, 2, 1, 1), uv),
                         ints(g, "wi", SHAPE(2), wi)};
    double want[12] = {0, 0, 1, 0, 0, 2, 3, 0, 0, 4, 0, 0};
    expect_vals(g, build(g, "TensorScatter", in, 3, NULL, 0), AMPC_DTYPE_I32, SHAPE(2, 2, 3, 1),
                want);
    ampc_graph_destroy(g);
}

Test(index, tensor_scatter_errors) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t wi[2] = {1, 3};
    ampc_value *past = t_input(g, "past", AMPC_DTYPE_F32, SHAPE(2, 4, 2));
    double uv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ampc_value *in[3] = {past, cst(g, "upd", AMPC_DTYPE_F32, SHAPE(2, 2, 2), uv),
                         ints(g, "wi", SHAPE(2), wi)};
    ampc_attr_arg a0 = AMPC_ATTR_I("axis", 0);
    expect_fail(g, "TensorScatter", in, 3, &a0, 1,
                "node 0 (TensorScatter 'TensorScatter_0'): attribute 'axis' must not name dim 0, "
                "the batch dim of input 0 'past' [2,4,2]");
    ampc_value *wide = t_input(g, "wide", AMPC_DTYPE_F32, SHAPE(2, 5, 2));
    ampc_value *bad[2] = {past, wide};
    expect_fail(g, "TensorScatter", bad, 2, NULL, 0,
                "node 1 (TensorScatter 'TensorScatter_1'): input 1 'wide' (update) must have the "
                "shape of input 0 'past' (past_cache) except along axis 1, where it may be "
                "shorter: got [2,5,2] against [2,4,2]");
    ampc_graph_destroy(g);

    /* linear mode: batch 1 would write rows 3 and 4 of 4 */
    g = ampc_graph_create("t");
    in[0] = t_input(g, "past", AMPC_DTYPE_F32, SHAPE(2, 4, 2));
    in[1] = cst(g, "upd", AMPC_DTYPE_F32, SHAPE(2, 2, 2), uv);
    in[2] = ints(g, "wi", SHAPE(2), wi);
    ampc_value *y = build(g, "TensorScatter", in, 3, NULL, 0);
    float pv[16] = {0};
    expect_eval_error(g, y, t_tensor(AMPC_DTYPE_F32, SHAPE(2, 4, 2), pv),
                      "write index 3 (element 1 of input 2 'wi') plus update row 1 is outside the "
                      "4 rows of the cache axis (mode linear)");
    ampc_graph_destroy(g);
}

/* ---- NonMaxSuppression ---------------------------------------------------------------------- */

/* Boxes (y1, x1, y2, x2): b0 the unit square, b1 the same moved 0.1 right (IoU 0.9 / 1.1 =
 * 0.82 with b0), b2 far to the right. */
static const double nms_boxes[12] = {0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 2, 1, 3};

/* NonMaxSuppression over constant inputs; max_out < 0 leaves input 2 out, and the thresholds
 * are given when >= 0. */
static ampc_value *nms(ampc_graph *g, const double *boxes, const double *scores, int64_t classes,
                       int64_t max_out, double iou, double score_min, const ampc_attr_arg *at,
                       int32_t n_at) {
    double iv[1] = {iou}, sv[1] = {score_min};
    ampc_value *in[5] = {cst(g, "boxes", AMPC_DTYPE_F32, SHAPE(1, 3, 4), boxes),
                         cst(g, "scores", AMPC_DTYPE_F32, SHAPE(1, classes, 3), scores), NULL,
                         NULL, NULL};
    if (max_out >= 0) in[2] = ints(g, "max_out", SHAPE(1), &max_out);
    if (iou >= 0) in[3] = cst(g, "iou", AMPC_DTYPE_F32, SHAPE(1), iv);
    if (score_min >= 0) in[4] = cst(g, "score_min", AMPC_DTYPE_F32, SHAPE(), sv);
    return build(g, "NonMaxSuppression", in, 5, at, n_at);
}

Test(nms, suppression_limits_and_thresholds) {
    double sc[3] = {0.9, 0.8, 0.7};
    struct {
        int64_t max_out;
        double iou, score_min;
        int64_t count, want[9];
    } cases[] = {
        {3, 0.5, -1, 2, {0, 0, 0, 0, 0, 2}},           /* b1 suppressed by b0 */
        {1, 0.5, -1, 1, {0, 0, 0}},                    /* one box per class */
        {3, 0.5, 0.75, 1, {0, 0, 0}},                  /* b2 below the score threshold */
        {3, 0.9, -1, 3, {0, 0, 0, 0, 0, 1, 0, 0, 2}},  /* IoU 0.82 is not above 0.9 */
        {-1, 0.5, -1, 0, {0}},                         /* no max_output_boxes_per_class: none */
    };
    for (int k = 0; k < AMPC_ARRAY_LEN(cases); k++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *y = nms(g, nms_boxes, sc, 1, cases[k].max_out, cases[k].iou,
                            cases[k].score_min, NULL, 0);
        expect_i64(g, y, SHAPE(cases[k].count, 3), cases[k].want);
        ampc_graph_destroy(g);
    }
}

/* Two classes: class 1 ranks b1 (0.95) first, which then suppresses b0; equal scores keep the
 * lower box index first. The centre format (x_c, y_c, w, h) of the same boxes selects alike. */
Test(nms, classes_ties_and_center_format) {
    double sc[6] = {0.9, 0.8, 0.7, 0.1, 0.95, 0.2};
    ampc_graph *g = ampc_graph_create("t");
    int64_t want[12] = {0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 1, 2};
    expect_i64(g, nms(g, nms_boxes, sc, 2, 3, 0.5, -1, NULL, 0), SHAPE(4, 3), want);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double tie[3] = {0.5, 0.5, 0.5};
    int64_t wt[6] = {0, 0, 0, 0, 0, 2};
    expect_i64(g, nms(g, nms_boxes, tie, 1, 3, 0.5, -1, NULL, 0), SHAPE(2, 3), wt);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double centre[12] = {0.5, 0.5, 1, 1, 0.6, 0.5, 1, 1, 2.5, 0.5, 1, 1};
    ampc_attr_arg cp = AMPC_ATTR_I("center_point_box", 1);
    expect_i64(g, nms(g, centre, sc, 1, 3, 0.5, -1, &cp, 1), SHAPE(2, 3), wt);
    ampc_graph_destroy(g);
}

/* How many boxes survive depends on the values, so run-time boxes are refused with the
 * static-graph message; the op's own inference names the rule too. */
Test(nms, runtime_boxes_and_shape_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double sc[3] = {0.9, 0.8, 0.7};
    ampc_value *in[2] = {t_input(g, "boxes", AMPC_DTYPE_F32, SHAPE(1, 3, 4)),
                         cst(g, "scores", AMPC_DTYPE_F32, SHAPE(1, 1, 3), sc)};
    expect_fail(g, "NonMaxSuppression", in, 2, NULL, 0,
                "node 0 (NonMaxSuppression 'NonMaxSuppression_0'): input 0 'boxes' must be known "
                "at compile time (it sets a shape, axes or pads), but it is computed at run time; "
                "ampc compiles static graphs");
    ampc_value *y = ampc_ir_value_new(g, "y", AMPC_DTYPE_UNDEFINED, NULL);
    ampc_node *n =
        ampc_ir_node_append(g, AMPC_OP_NON_MAX_SUPPRESSION, "nms", in, 2, NULL, 0, &y, 1);
    cr_assert_eq(ampc_op_get(AMPC_OP_NON_MAX_SUPPRESSION)->infer(g, n), AMPC_E_UNSUPPORTED);
    t_expect_diag(g, "node 1 (NonMaxSuppression 'nms'): output shape depends on the values of "
                     "input 0 'boxes'; ampc compiles static graphs, so this input must be a "
                     "constant");
    double b5[15] = {0};
    ampc_value *bad[2] = {cst(g, "b5", AMPC_DTYPE_F32, SHAPE(1, 3, 5), b5), in[1]};
    expect_fail(g, "NonMaxSuppression", bad, 2, NULL, 0,
                "node 2 (NonMaxSuppression 'NonMaxSuppression_2'): input 0 'b5' (boxes) must be "
                "[B, K, 4] and input 1 'scores' (scores) [B, C, K] with the same B and K, got "
                "[1,3,5] and [1,1,3]");
    ampc_graph_destroy(g);
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------------ */

/* Pool: unigrams 2 and 3, bigram (2, 3); tokens 2 3 2 2 3 hold 2 three times, 3 twice and the
 * bigram twice adjacent (positions 0-1 and 3-4) plus once two apart (2 at 2, 3 at 4). */
static ampc_value *tfidf(ampc_graph *g, ampc_value *x, const char *mode, int64_t min_len,
                         int64_t skip, const int64_t *indexes, const float *weights) {
    static const int64_t counts[2] = {0, 2}, pool[4] = {2, 3, 2, 3};
    ampc_attr_arg at[9] = {AMPC_ATTR_S("mode", mode),
                           AMPC_ATTR_I("min_gram_length", min_len),
                           AMPC_ATTR_I("max_gram_length", 2),
                           AMPC_ATTR_I("max_skip_count", skip),
                           AMPC_ATTR_IS("ngram_counts", counts, 2),
                           AMPC_ATTR_IS("ngram_indexes", indexes, 3),
                           AMPC_ATTR_IS("pool_int64s", pool, 4),
                           AMPC_ATTR_FS("weights", weights, 3)};
    return build(g, "TfIdfVectorizer", &x, 1, at, weights ? 8 : 7);
}

Test(tfidf, counts_skips_and_modes) {
    static const int64_t idx[3] = {0, 1, 2}, perm[3] = {2, 0, 1};
    static const float w[3] = {0.5f, 2, 10};
    int32_t xv[5] = {2, 3, 2, 2, 3};
    struct {
        const char *mode;
        int64_t min_len, skip;
        const int64_t *idx;
        const float *w;
        double want[3];
    } cases[] = {
        {"TF", 1, 0, idx, NULL, {3, 2, 2}},
        {"TF", 1, 1, idx, NULL, {3, 2, 3}},     /* unigrams still count once */
        {"TF", 2, 0, idx, NULL, {0, 0, 2}},     /* bigrams only */
        {"TF", 1, 0, perm, NULL, {2, 2, 3}},    /* n-gram i goes to coordinate perm[i] */
        {"IDF", 1, 0, idx, NULL, {1, 1, 1}},
        {"IDF", 1, 0, idx, w, {0.5, 2, 10}},
        {"TFIDF", 1, 0, idx, w, {1.5, 4, 20}},
    };
    for (int k = 0; k < AMPC_ARRAY_LEN(cases); k++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_const(g, AMPC_DTYPE_I32, SHAPE(5), xv);
        ampc_value *y = tfidf(g, x, cases[k].mode, cases[k].min_len, cases[k].skip, cases[k].idx,
                              cases[k].w);
        expect_vals(g, y, AMPC_DTYPE_F32, SHAPE(3), cases[k].want);
        ampc_graph_destroy(g);
    }
}

/* A batch [2, 5] counts per row; the second row 3 3 7 2 9 has one 2, two 3s, no bigram. */
Test(tfidf, batch_rows_of_i64) {
    static const int64_t idx[3] = {0, 1, 2};
    ampc_graph *g = ampc_graph_create("t");
    int64_t xv[10] = {2, 3, 2, 2, 3, 3, 3, 7, 2, 9};
    ampc_value *y = tfidf(g, ints(g, "x", SHAPE(2, 5), xv), "TF", 1, 0, idx, NULL);
    double want[6] = {3, 2, 2, 1, 2, 0};
    expect_vals(g, y, AMPC_DTYPE_F32, SHAPE(2, 3), want);
    ampc_graph_destroy(g);
}

Test(tfidf, string_pools_and_bad_attributes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_I64, SHAPE(5));
    static const char *const strs[2] = {"a", "b"};
    ampc_attr_arg ps = {.name = "pool_strings", .kind = AMPC_ATTR_STRINGS, .strings = strs, .n = 2};
    expect_fail(g, "TfIdfVectorizer", &x, 1, &ps, 1,
                "node 0 (TfIdfVectorizer 'TfIdfVectorizer_0'): string n-grams (attribute "
                "'pool_strings') are not supported: ampc has no string tensors; only integer "
                "pools (pool_int64s) are");
    cr_assert_eq(g->diag.entries[0].code, AMPC_E_UNSUPPORTED);
    static const int64_t counts[2] = {0, 2}, pool[4] = {2, 3, 2, 3}, idx2[2] = {0, 1};
    ampc_attr_arg at[7] = {AMPC_ATTR_S("mode", "TF"), AMPC_ATTR_I("min_gram_length", 1),
                           AMPC_ATTR_I("max_gram_length", 2), AMPC_ATTR_I("max_skip_count", 0),
                           AMPC_ATTR_IS("ngram_counts", counts, 2),
                           AMPC_ATTR_IS("ngram_indexes", idx2, 2),
                           AMPC_ATTR_IS("pool_int64s", pool, 4)};
    expect_fail(g, "TfIdfVectorizer", &x, 1, at, 7,
                "node 1 (TfIdfVectorizer 'TfIdfVectorizer_1'): attribute 'ngram_indexes' must have "
                "one entry per n-gram of the pool (3), got 2");
    at[0] = AMPC_ATTR_S("mode", "BM25");
    expect_fail(g, "TfIdfVectorizer", &x, 1, at, 7,
                "node 2 (TfIdfVectorizer 'TfIdfVectorizer_2'): attribute 'mode' is required and "
                "must be \"TF\", \"IDF\" or \"TFIDF\", got \"BM25\"");
    ampc_graph_destroy(g);
}
