/*
 * test_quant.c — quantisation and integer arithmetic through the DSL: QuantizeLinear (per tensor,
 * per axis, blocked; rounding half to even and saturation for u8, i8 and i16),
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and
 * QLinearConv, on the ONNX examples and hand-worked cases, with the exact diagnostics for
 * quantisation parameters that do not fit.
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <stdlib.h>

static ampc_value *cst(ampc_graph *g, const char *name, ampc_dtype t, ampc_shape s,
                       const double *vals) {
    int64_t n = ampc_shape_numel(&s);
    void *buf = calloc((size_t)(n ? n : 1), ampc_dtype_size(t));
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(buf, t, i, vals[i]);
    ampc_value *v = ampc_constant(g, name, t, s.rank, s.dims, buf);
    free(buf);
    return v;
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

/* Evaluates y and checks its dtype, shape and values (exactly, or within tol). */
static void expect_vals(ampc_graph *g, ampc_value *y, ampc_dtype t, ampc_shape s,
                        const double *want, double tol) {
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    cr_assert_eq(out.dtype, t, "dtype %s, expected %s", ampc_dtype_name(out.dtype),
                 ampc_dtype_name(t));
    t_expect_close(&out, s, want, tol, tol);
    ampc_tensor_free(&out);
}

/* ---- QuantizeLinear ------------------------------------------------------------------------- */

/* The ONNX example plus 5: x / 2 = 0, 1, 1.5 (-> 2), 500, -127, -500, 2.5 (-> 2, half to even);
 * + 128, saturated to [0, 255]. */
Test(quant, quantize_u8_rounds_half_even_and_saturates) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[7] = {0, 2, 3, 1000, -254, -1000, 5}, s[1] = {2}, z[1] = {128};
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(7), xv),
                         cst(g, "scale", AMPC_DTYPE_F32, SHAPE(), s),
                         cst(g, "zp", AMPC_DTYPE_U8, SHAPE(), z)};
    double want[7] = {128, 129, 130, 255, 1, 0, 130};
    expect_vals(g, build(g, "QuantizeLinear", in, 3, NULL, 0), AMPC_DTYPE_U8, SHAPE(7), want, 0);
    ampc_graph_destroy(g);
}

/* i8 zero point -1: -3/2 = -1.5 -> -2 -> -3; 1/2 = 0.5 -> 0 -> -1; 400/2 + -1 saturates at 127. */
Test(quant, quantize_i8) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[3] = {-3, 1, 400}, s[1] = {2}, z[1] = {-1};
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(3), xv),
                         cst(g, "scale", AMPC_DTYPE_F32, SHAPE(1), s),
                         cst(g, "zp", AMPC_DTYPE_I8, SHAPE(1), z)};
    double want[3] = {-3, -1, 127};
    expect_vals(g, build(g, "QuantizeLinear", in, 3, NULL, 0), AMPC_DTYPE_I8, SHAPE(3), want, 0);
    ampc_graph_destroy(g);
}

/* Per axis 1 of [2,3]: scales [1, 2, 4], zero points [0, 1, -1]. */
Test(quant, quantize_per_axis) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {1, 3, 2, -4, 6, 8}, s[3] = {1, 2, 4}, z[3] = {0, 1, -1};
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3), xv),
                         cst(g, "scale", AMPC_DTYPE_F32, SHAPE(3), s),
                         cst(g, "zp", AMPC_DTYPE_I8, SHAPE(3), z)};
    /* row 0: 1, 1.5 -> 2 (+1), 0.5 -> 0 (-1); row 1: -4, 3 (+1), 2 (-1) */
    double want[6] = {1, 3, -1, -4, 4, 1};
    expect_vals(g, build(g, "QuantizeLinear", in, 3, NULL, 0), AMPC_DTYPE_I8, SHAPE(2, 3), want, 0);
    ampc_graph_destroy(g);
}

/* Blocks of 2 along axis 1 (scales 2 and 4, no zero point: u8), and output_dtype i16 (ONNX
 * code 5) saturating at 32767. */
Test(quant, quantize_blocked_and_output_dtype) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {2, 4, 6, 8}, s[2] = {2, 4}, big[2] = {40000, -5}, one[1] = {1};
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 4), xv),
                         cst(g, "scale", AMPC_DTYPE_F32, SHAPE(1, 2), s)};
    ampc_attr_arg blk[2] = {AMPC_ATTR_I("axis", 1), AMPC_ATTR_I("block_size", 2)};
    double want[4] = {1, 2, 2, 2}; /* 6/4 = 1.5 -> 2 */
    expect_vals(g, build(g, "QuantizeLinear", in, 2, blk, 2), AMPC_DTYPE_U8, SHAPE(1, 4), want, 0);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    ampc_value *in2[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(2), big),
                          cst(g, "scale", AMPC_DTYPE_F32, SHAPE(), one)};
    ampc_attr_arg od = AMPC_ATTR_I("output_dtype", 5);
    double w2[2] = {32767, -5};
    expect_vals(g, build(g, "QuantizeLinear", in2, 2, &od, 1), AMPC_DTYPE_I16, SHAPE(2), w2, 0);
    ampc_graph_destroy(g);
}

Test(quant, quantize_parameter_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {0}, s[3] = {1, 1, 1};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3), xv);
    ampc_value *in[3] = {x, cst(g, "scale", AMPC_DTYPE_F32, SHAPE(2), s), NULL};
    expect_fail(g, "QuantizeLinear", in, 2, NULL, 0,
                "node 0 (QuantizeLinear 'QuantizeLinear_0'): input 1 'scale' (scale) must hold "
                "one element (per tensor) or be [3] (per axis 1 of input 0 'x' [2,3]), got [2]");
    in[1] = cst(g, "s3", AMPC_DTYPE_F32, SHAPE(3), s);
    in[2] = cst(g, "zp", AMPC_DTYPE_U8, SHAPE(1), s);
    expect_fail(g, "QuantizeLinear", in, 3, NULL, 0,
                "input 2 'zp' (zero point) must have the shape of input 1 's3' (scale) [3], got "
                "[1]");
    in[2] = cst(g, "zf", AMPC_DTYPE_F32, SHAPE(3), s);
    expect_fail(g, "QuantizeLinear", in, 3, NULL, 0,
                "input 2 'zf' must be u8, i8, u16 or i16, got f32");
    ampc_graph_destroy(g);
}

/* ---- DequantizeLinear, DynamicQuantizeLinear ------------------------------------------------ */

Test(quant, dequantize_per_tensor_per_axis_and_i32) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {0, 3, 128, 255}, s[1] = {2}, z[1] = {128};
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_U8, SHAPE(4), xv),
                         cst(g, "scale", AMPC_DTYPE_F32, SHAPE(), s),
                         cst(g, "zp", AMPC_DTYPE_U8, SHAPE(), z)};
    double want[4] = {-256, -250, 0, 254};
    expect_vals(g, build(g, "DequantizeLinear", in, 3, NULL, 0), AMPC_DTYPE_F32, SHAPE(4), want, 0);
    ampc_graph_destroy(g);

    /* axis 0 of an i8 [2,2]: row 0 (x - 1) * 0.5, row 1 (x + 1) * 2; the output takes the
     * scale's dtype (f16) */
    g = ampc_graph_create("t");
    double x2[4] = {1, 2, 3, 4}, s2[2] = {0.5, 2}, z2[2] = {1, -1};
    ampc_value *in2[3] = {cst(g, "x", AMPC_DTYPE_I8, SHAPE(2, 2), x2),
                          cst(g, "scale", AMPC_DTYPE_F16, SHAPE(2), s2),
                          cst(g, "zp", AMPC_DTYPE_I8, SHAPE(2), z2)};
    ampc_attr_arg a0 = AMPC_ATTR_I("axis", 0);
    double w2[4] = {0, 0.5, 8, 10};
    expect_vals(g, build(g, "DequantizeLinear", in2, 3, &a0, 1), AMPC_DTYPE_F16, SHAPE(2, 2), w2,
                0);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double x3[2] = {100, -7}, s3[1] = {0.5};
    ampc_value *in3[2] = {cst(g, "x", AMPC_DTYPE_I32, SHAPE(2), x3),
                          cst(g, "scale", AMPC_DTYPE_F32, SHAPE(), s3)};
    double w3[2] = {50, -3.5};
    expect_vals(g, build(g, "DequantizeLinear", in3, 2, NULL, 0), AMPC_DTYPE_F32, SHAPE(2), w3, 0);
    ampc_graph_destroy(g);
}

/* The ONNX example: range [-3, 2] -> scale 5/255, zero point 153; -2.5/scale is -127.49999 in
 * f32 (-> -127 -> 26) and 0.5/scale 25.5 (-> 26 -> 179). */
Test(quant, dynamic_quantize_linear_example) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {0, 2, -3, -2.5, 1.34, 0.5};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(6), xv), *o[3];
    cr_assert_eq(ampc_op_multi(g, "DynamicQuantizeLinear", &x, 1, NULL, 0, o, 3), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    const char *names[3] = {"y", "s", "z"};
    for (int i = 0; i < 3; i++) cr_assert_eq(ampc_output(g, o[i], names[i]), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double wy[6] = {153, 255, 0, 26, 221, 179}, ws[1] = {(double)(5.0f / 255.0f)}, wz[1] = {153};
    t_expect_close(&out[0], SHAPE(6), wy, 0, 0);
    t_expect_close(&out[1], SHAPE(), ws, 0, 0);
    t_expect_close(&out[2], SHAPE(), wz, 0, 0);
    cr_assert_eq(out[0].dtype, AMPC_DTYPE_U8);
    cr_assert_eq(out[2].dtype, AMPC_DTYPE_U8);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* ---- MatMulInteger, QLinearMatMul ----------------------------------------------------------- */

/* The ONNX example (a_zero_point 12), then per-row zero points [12, 10, 9, 8]: rows 1..3 become
 * [0, -4, -8] . [[1,4],[2,5],[3,6]] = [-32, -68]. */
Test(quant, matmul_integer_per_tensor_and_per_row) {
    double av[12] = {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0}, bv[6] = {1, 4, 2, 5, 3, 6};
    double z1[1] = {12}, z4[4] = {12, 10, 9, 8};
    double w1[8] = {-38, -83, -44, -98, -50, -113, -56, -128};
    double w4[8] = {-38, -83, -32, -68, -32, -68, -32, -68};
    for (int c = 0; c < 2; c++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[3] = {cst(g, "A", AMPC_DTYPE_U8, SHAPE(4, 3), av),
                             cst(g, "B", AMPC_DTYPE_U8, SHAPE(3, 2), bv),
                             c ? cst(g, "za", AMPC_DTYPE_U8, SHAPE(4), z4)
                               : cst(g, "za", AMPC_DTYPE_U8, SHAPE(), z1)};
        expect_vals(g, build(g, "MatMulInteger", in, 3, NULL, 0), AMPC_DTYPE_I32, SHAPE(4, 2),
                    c ? w4 : w1, 0);
        ampc_graph_destroy(g);
    }
}

Test(quant, matmul_integer_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double v[12] = {0};
    ampc_value *in[3] = {cst(g, "A", AMPC_DTYPE_U8, SHAPE(4, 3), v),
                         cst(g, "B", AMPC_DTYPE_U8, SHAPE(2, 2), v), NULL};
    expect_fail(g, "MatMulInteger", in, 2, NULL, 0,
                "node 0 (MatMulInteger 'MatMulInteger_0'): the inner dims differ: input 0 'A' is "
                "[4,3], input 1 'B' is [2,2]");
    in[1] = cst(g, "B2", AMPC_DTYPE_U8, SHAPE(3, 2), v);
    in[2] = cst(g, "za", AMPC_DTYPE_U8, SHAPE(3), v);
    expect_fail(g, "MatMulInteger", in, 3, NULL, 0,
                "input 2 'za' must hold one element or one per row (4) of input 0 'A' [4,3], got "
                "[3]");
    in[1] = cst(g, "Bf", AMPC_DTYPE_F32, SHAPE(3, 2), v);
    expect_fail(g, "MatMulInteger", in, 2, NULL, 0, "input 1 'Bf' must be u8 or i8, got f32");
    ampc_graph_destroy(g);
}

/* The ONNX 2-D example. */
Test(quant, qlinear_matmul_example) {
    ampc_graph *g = ampc_graph_create("t");
    double av[8] = {208, 236, 0, 238, 3, 214, 255, 29};
    double bv[12] = {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247};
    double sa[1] = {0.0066}, za[1] = {113}, sb[1] = {0.00705}, zb[1] = {114};
    double sy[1] = {0.0107}, zy[1] = {118};
    ampc_value *in[8] = {
        cst(g, "a", AMPC_DTYPE_U8, SHAPE(2, 4), av), cst(g, "sa", AMPC_DTYPE_F32, SHAPE(), sa),
        cst(g, "za", AMPC_DTYPE_U8, SHAPE(), za),    cst(g, "b", AMPC_DTYPE_U8, SHAPE(4, 3), bv),
        cst(g, "sb", AMPC_DTYPE_F32, SHAPE(), sb),   cst(g, "zb", AMPC_DTYPE_U8, SHAPE(), zb),
        cst(g, "sy", AMPC_DTYPE_F32, SHAPE(), sy),   cst(g, "zy", AMPC_DTYPE_U8, SHAPE(), zy)};
    double want[6] = {168, 115, 255, 1, 66, 151};
    expect_vals(g, build(g, "QLinearMatMul", in, 8, NULL, 0), AMPC_DTYPE_U8, SHAPE(2, 3), want, 0);
    ampc_graph_destroy(g);
}

/* ---- ConvInteger, QLinearConv --------------------------------------------------------------- */

/* The ONNX example: x 2..10 with zero point 1 (so 1..9), a 2x2 kernel of ones: the 2x2 window
 * sums 12, 16, 24, 28. */
Test(quant, conv_integer_example) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[9] = {2, 3, 4, 5, 6, 7, 8, 9, 10}, wv[4] = {1, 1, 1, 1}, zx[1] = {1};
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_U8, SHAPE(1, 1, 3, 3), xv),
                         cst(g, "w", AMPC_DTYPE_U8, SHAPE(1, 1, 2, 2), wv),
                         cst(g, "zx", AMPC_DTYPE_U8, SHAPE(), zx)};
    double want[4] = {12, 16, 24, 28};
    expect_vals(g, build(g, "ConvInteger", in, 3, NULL, 0), AMPC_DTYPE_I32, SHAPE(1, 1, 2, 2), want,
                0);
    ampc_graph_destroy(g);
}

/* A 1x1 conv with two output channels: (x - 10) * (w - 1) = [0, 10, 20, 30] * 2 (channel 0) and
 * * 4 (channel 1); channel 0 adds bias 7 and scales by 0.5 * 2 / 1, channel 1 scales by
 * 0.5 * 0.25 / 1; both add y_zero_point 5. */
Test(quant, qlinear_conv_per_channel_with_bias) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {10, 20, 30, 40}, sx[1] = {0.5}, zx[1] = {10}, wv[2] = {3, 5};
    double sw[2] = {2, 0.25}, zw[2] = {1, 1}, sy[1] = {1}, zy[1] = {5}, bv[2] = {7, 0};
    ampc_value *in[9] = {cst(g, "x", AMPC_DTYPE_U8, SHAPE(1, 1, 2, 2), xv),
                         cst(g, "sx", AMPC_DTYPE_F32, SHAPE(), sx),
                         cst(g, "zx", AMPC_DTYPE_U8, SHAPE(), zx),
                         cst(g, "w", AMPC_DTYPE_U8, SHAPE(2, 1, 1, 1), wv),
                         cst(g, "sw", AMPC_DTYPE_F32, SHAPE(2), sw),
                         cst(g, "zw", AMPC_DTYPE_U8, SHAPE(2), zw),
                         cst(g, "sy", AMPC_DTYPE_F32, SHAPE(), sy),
                         cst(g, "zy", AMPC_DTYPE_U8, SHAPE(), zy),
                         cst(g, "bias", AMPC_DTYPE_I32, SHAPE(2), bv)};
    /* ch 0: ([0,20,40,60] + 7) * 1 + 5; ch 1: [0,40,80,120] * 0.125 + 5 */
    double want[8] = {12, 32, 52, 72, 5, 10, 15, 20};
    expect_vals(g, build(g, "QLinearConv", in, 9, NULL, 0), AMPC_DTYPE_U8, SHAPE(1, 2, 2, 2), want,
                0);
    ampc_graph_destroy(g);
}

Test(quant, qlinear_conv_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    ampc_value *in[8] = {cst(g, "x", AMPC_DTYPE_U8, SHAPE(1, 1, 2, 2), v),
                         cst(g, "sx", AMPC_DTYPE_F32, SHAPE(), v),
                         cst(g, "zx", AMPC_DTYPE_U8, SHAPE(), v),
                         cst(g, "w", AMPC_DTYPE_U8, SHAPE(1, 1, 1), v),
                         cst(g, "sw", AMPC_DTYPE_F32, SHAPE(), v),
                         cst(g, "zw", AMPC_DTYPE_U8, SHAPE(), v),
                         cst(g, "sy", AMPC_DTYPE_F32, SHAPE(), v),
                         cst(g, "zy", AMPC_DTYPE_U8, SHAPE(), v)};
    expect_fail(g, "QLinearConv", in, 8, NULL, 0,
                "node 0 (QLinearConv 'QLinearConv_0'): input 3 'w' must have the rank of input 0 "
                "'x' (2 channel dims and 2 kernel dims): input 0 is [1,1,2,2], input 3 is [1,1,1]");
    in[3] = cst(g, "w4", AMPC_DTYPE_U8, SHAPE(2, 1, 1, 1), v);
    in[4] = cst(g, "sw3", AMPC_DTYPE_F32, SHAPE(3), v);
    expect_fail(g, "QLinearConv", in, 8, NULL, 0,
                "input 4 'sw3' must hold one element or one per output channel (2) of input 3 "
                "'w4' [2,1,1,1], got [3]");
    ampc_graph_destroy(g);
}

/* An f16 input divides in f16 (1.5 and 2.5 are exact) and rounds half to even: 2, 2. */
Test(quant, quantize_f16_input) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[3] = {1.5, 2.5, -0.5}, s[1] = {1};
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F16, SHAPE(3), xv),
                         cst(g, "scale", AMPC_DTYPE_F16, SHAPE(), s)};
    double want[3] = {2, 2, 0}; /* -0.5 -> -0 -> saturates to 0 in u8 */
    expect_vals(g, build(g, "QuantizeLinear", in, 2, NULL, 0), AMPC_DTYPE_U8, SHAPE(3), want, 0);
    ampc_graph_destroy(g);
}

/* All zeros: the range [0, 0] has scale 0; zero point and outputs are 0 (nothing to divide). */
Test(quant, dynamic_quantize_linear_all_zero) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[2] = {0, 0};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(2), xv), *o[3];
    cr_assert_eq(ampc_op_multi(g, "DynamicQuantizeLinear", &x, 1, NULL, 0, o, 3), AMPC_OK);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ampc_output(g, o[i], i ? (i == 1 ? "s" : "z") : "y"), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double z2[2] = {0, 0}, z1[1] = {0};
    t_expect_close(&out[0], SHAPE(2), z2, 0, 0);
    t_expect_close(&out[1], SHAPE(), z1, 0, 0);
    t_expect_close(&out[2], SHAPE(), z1, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}
