/*
 * test_conv.c — the convolution and pooling family through the DSL: output shapes (padding,
 * strides, dilations, ceil_mode, auto_pad), reference values computed by hand in the comments,
 * several float dtypes, MaxPool's Indices output, LpPool and GlobalLpPool, DeformConv (offsets,
 * interpolation, masks, offset groups), Col2Im against its definition, and the exact diagnostics
 * for wrong shapes.
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>

/* A constant of dtype t from doubles (exactly representable ones in the tests below). */
static ampc_value *const_of(ampc_graph *g, ampc_dtype t, ampc_shape s, const double *vals) {
    int64_t n = ampc_shape_numel(&s);
    void *buf = calloc((size_t)(n ? n : 1), ampc_dtype_size(t));
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(buf, t, i, vals[i]);
    ampc_value *v = t_const(g, t, s, buf);
    free(buf);
    return v;
}

/* 0, 1, 2, ... as doubles. */
static void iota(double *v, int n, double start) {
    for (int i = 0; i < n; i++) v[i] = start + i;
}

/* Builds op over in[0..n_in-1] with attributes, asserting that building succeeded. */
static ampc_value *build(ampc_graph *g, const char *op, ampc_value **in, int32_t n_in,
                         const ampc_attr_arg *at, int32_t n_at) {
    ampc_value *y = ampc_op(g, op, in, n_in, at, n_at);
    cr_assert(!ampc_value_is_poisoned(y), "%s failed:\n%s", op, ampc_graph_errors(g));
    return y;
}

static void expect_eval(ampc_graph *g, ampc_value *y, ampc_shape s, const double *want) {
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    t_expect_close(&out, s, want, 0, 0);
    ampc_tensor_free(&out);
}

/* ---- Conv ----------------------------------------------------------------------------------- */

/* x[i][j] = 4i + j on a 4x4 image, a 3x3 kernel of ones, pad 1, stride 2: output 2x2, each the
 * sum of the window's in-bounds part, plus the bias 0.5. */
Test(conv, conv2d_padding_stride_bias_in_four_dtypes) {
    ampc_dtype types[4] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16, AMPC_DTYPE_F64};
    for (int t = 0; t < 4; t++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[16], wv[9], bv[1] = {0.5};
        iota(xv, 16, 0);
        for (int i = 0; i < 9; i++) wv[i] = 1;
        ampc_value *x = const_of(g, types[t], SHAPE(1, 1, 4, 4), xv);
        ampc_value *w = const_of(g, types[t], SHAPE(1, 1, 3, 3), wv);
        ampc_value *b = const_of(g, types[t], SHAPE(1), bv);
        int64_t strides[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
        ampc_value *y = ampc_conv2d(g, x, w, b, strides, pads, NULL, 1);
        cr_assert_eq(ampc_value_dtype(y), types[t], "%s", ampc_graph_errors(g));
        /* (0,0): 0+1+4+5; (0,1): 1+2+3+5+6+7; (1,0): 4+5+8+9+12+13; (1,1): 5..7 + 9..11 + 13..15 */
        double want[4] = {10.5, 24.5, 51.5, 90.5};
        expect_eval(g, y, SHAPE(1, 1, 2, 2), want);
        ampc_graph_destroy(g);
    }
}

/* Dilation 2 on a 5x5 image x = 5i + j with W = [[1,2],[3,4]]:
 * y[i][j] = x[i][j] + 2x[i][j+2] + 3x[i+2][j] + 4x[i+2][j+2] = 10 x[i][j] + 4 + 30 + 48. */
Test(conv, conv2d_dilation) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[25], wv[4] = {1, 2, 3, 4};
    iota(xv, 25, 0);
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 5, 5));
    ampc_value *w = t_const_f32(g, SHAPE(1, 1, 2, 2), wv);
    int64_t dil[2] = {2, 2};
    ampc_value *y = ampc_conv2d(g, x, w, NULL, NULL, NULL, dil, 1);
    float xf[25];
    for (int i = 0; i < 25; i++) xf[i] = (float)xv[i];
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(1, 1, 5, 5), xf);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) want[i * 3 + j] = 10 * (5 * i + j) + 82;
    t_expect_close(&out, SHAPE(1, 1, 3, 3), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* Depthwise (group = C = 2): channel 0 sums its 2x2 windows, channel 1 takes the difference of
 * the window's corners; neither sees the other channel. x = 9c + 3i + j. */
Test(conv, depthwise_groups_keep_channels_apart) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[18], wv[8] = {1, 1, 1, 1, 1, 0, 0, -1};
    iota(xv, 18, 0);
    ampc_value *y = ampc_conv2d(g, t_const_f32(g, SHAPE(1, 2, 3, 3), xv),
                                t_const_f32(g, SHAPE(2, 1, 2, 2), wv), NULL, NULL, NULL, NULL, 2);
    /* ch 0: 4(3i + j) + (0 + 1 + 3 + 4); ch 1: x[i][j] - x[i+1][j+1] = -4 */
    double want[8] = {8, 12, 20, 24, -4, -4, -4, -4};
    expect_eval(g, y, SHAPE(1, 2, 2, 2), want);
    ampc_graph_destroy(g);
}

/* group 2 with two output channels per group and two input channels per group: output channel
 * m reads only input channels 2*(m/2) and 2*(m/2)+1. 1x1 kernels make it a grouped matmul. */
Test(conv, grouped_1x1_is_a_block_diagonal_matmul) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4};                         /* 4 channels, 1x1 image */
    double wv[8] = {1, 10, 100, 1000, 2, 20, 200, 2000}; /* [4, 2, 1, 1] */
    ampc_value *y = ampc_conv2d(g, t_const_f32(g, SHAPE(1, 4, 1, 1), xv),
                                t_const_f32(g, SHAPE(4, 2, 1, 1), wv), NULL, NULL, NULL, NULL, 2);
    /* m0 = 1*1 + 10*2, m1 = 100*1 + 1000*2, m2 = 2*3 + 20*4, m3 = 200*3 + 2000*4 */
    double want[4] = {21, 2100, 86, 8600};
    expect_eval(g, y, SHAPE(1, 4, 1, 1), want);
    ampc_graph_destroy(g);
}

/* Everything at once (batch 2, 2 groups of 2 -> 3 channels, strides, asymmetric pads,
 * dilation) against the definition written as a gather in the test:
 *   y[b][m][i][j] = sum over c, ki, kj of x[b][g*2 + c][i*2 + ki - 1][j + 2*kj] * w[m][c][ki][kj]
 * with g = m / 3 and out-of-range (padding) points skipped. Small integers keep f32 exact. */
Test(conv, grouped_strided_dilated_padded_matches_definition) {
    enum { B = 2, C = 4, H = 5, W = 6, M = 6, CG = 2, KH = 3, KW = 2, OH = 3, OW = 5 };
    double xv[B * C * H * W], wv[M * CG * KH * KW], want[B * M * OH * OW];
    for (int i = 0; i < B * C * H * W; i++) xv[i] = (i * 7) % 11 - 5;
    for (int i = 0; i < M * CG * KH * KW; i++) wv[i] = (i * 5) % 7 - 3;
    for (int b = 0; b < B; b++)
        for (int m = 0; m < M; m++)
            for (int i = 0; i < OH; i++)
                for (int j = 0; j < OW; j++) {
                    double acc = 0;
                    for (int c = 0; c < CG; c++)
                        for (int ki = 0; ki < KH; ki++)
                            for (int kj = 0; kj < KW; kj++) {
                                int h = i * 2 + ki - 1, v = j + 2 * kj, ch = (m / 3) * CG + c;
                                if (h < 0 || h >= H || v < 0 || v >= W) continue;
                                acc += xv[((b * C + ch) * H + h) * W + v] *
                                       wv[((m * CG + c) * KH + ki) * KW + kj];
                            }
                    want[((b * M + m) * OH + i) * OW + j] = acc;
                }
    ampc_graph *g = ampc_graph_create("t");
    /* OH = floor((5 + 1 + 1 - 3) / 2) + 1 = 3, OW = (6 + 0 + 1 - 3) / 1 + 1 = 5 */
    int64_t strides[2] = {2, 1}, pads[4] = {1, 0, 1, 1}, dil[2] = {1, 2};
    ampc_value *y = ampc_conv2d(g, t_const_f32(g, SHAPE(B, C, H, W), xv),
                                t_const_f32(g, SHAPE(M, CG, KH, KW), wv), NULL, strides, pads, dil,
                                2);
    expect_eval(g, y, SHAPE(B, M, OH, OW), want);
    ampc_graph_destroy(g);
}

/* 1-D: x = [1..5], w = [1, 0, -1], pads 1 and 1, stride 2: windows start at -1, 1, 3. */
Test(conv, conv1d_pads_and_stride) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[5] = {1, 2, 3, 4, 5}, wv[3] = {1, 0, -1};
    ampc_value *in[2] = {t_const_f32(g, SHAPE(1, 1, 5), xv), t_const_f32(g, SHAPE(1, 1, 3), wv)};
    int64_t pads[2] = {1, 1}, strides[1] = {2};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("pads", pads, 2), AMPC_ATTR_IS("strides", strides, 1)};
    ampc_value *y = build(g, "Conv", in, 2, at, 2);
    /* [pad, 1, 2] -> -2; [2, 3, 4] -> -2; [4, 5, pad] -> 4 */
    double want[3] = {-2, -2, 4};
    expect_eval(g, y, SHAPE(1, 1, 3), want);
    ampc_graph_destroy(g);
}

/* 3-D: a 2x2x2 kernel of ones over a 2x2x2 volume holding 0..7 sums it all. */
Test(conv, conv3d_single_window) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[8], wv[8];
    iota(xv, 8, 0);
    for (int i = 0; i < 8; i++) wv[i] = 1;
    ampc_value *in[2] = {t_const_f32(g, SHAPE(1, 1, 2, 2, 2), xv),
                         t_const_f32(g, SHAPE(1, 1, 2, 2, 2), wv)};
    ampc_value *y = build(g, "Conv", in, 2, NULL, 0);
    double want[1] = {28};
    expect_eval(g, y, SHAPE(1, 1, 1, 1, 1), want);
    ampc_graph_destroy(g);
}

/* SAME padding of a 2x2 kernel on 3x3 ones: one pad row/col in total, at the end (UPPER) or at
 * the beginning (LOWER); each output counts the window's in-bounds points. */
Test(conv, auto_pad_same_upper_and_lower) {
    const char *modes[2] = {"SAME_UPPER", "SAME_LOWER"};
    double want[2][9] = {{4, 4, 2, 4, 4, 2, 2, 2, 1}, {1, 2, 2, 2, 4, 4, 2, 4, 4}};
    for (int m = 0; m < 2; m++) {
        ampc_graph *g = ampc_graph_create("t");
        double ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        ampc_value *in[2] = {t_const_f32(g, SHAPE(1, 1, 3, 3), ones),
                             t_const_f32(g, SHAPE(1, 1, 2, 2), ones)};
        ampc_attr_arg at = AMPC_ATTR_S("auto_pad", modes[m]);
        ampc_value *y = build(g, "Conv", in, 2, &at, 1);
        expect_eval(g, y, SHAPE(1, 1, 3, 3), want[m]);
        ampc_graph_destroy(g);
    }
}

/* Auto-padded stride 2 on 5 elements: out = ceil(5 / 2) = 3, total pad (3-1)*2 + 3 - 5 = 2. */
Test(conv, auto_pad_same_with_stride_and_valid_shapes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 5, 8));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(4, 3, 3, 3));
    int64_t strides[2] = {2, 3};
    ampc_attr_arg at[2] = {AMPC_ATTR_S("auto_pad", "SAME_UPPER"),
                           AMPC_ATTR_IS("strides", strides, 2)};
    ampc_value *in[2] = {x, w};
    ampc_shape s = ampc_value_shape(build(g, "Conv", in, 2, at, 2));
    cr_assert(ampc_shape_eq(&s, &(ampc_shape){4, {2, 4, 3, 3}}));
    at[0] = AMPC_ATTR_S("auto_pad", "VALID"); /* floor((5-3)/2)+1 = 2, floor((8-3)/3)+1 = 2 */
    s = ampc_value_shape(build(g, "Conv", in, 2, at, 2));
    cr_assert(ampc_shape_eq(&s, &(ampc_shape){4, {2, 4, 2, 2}}));
    ampc_graph_destroy(g);
}

/* An empty batch convolves to an empty batch. */
Test(conv, empty_batch) {
    ampc_graph *g = ampc_graph_create("t");
    double wv[4] = {1, 2, 3, 4};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 1, 3, 3));
    ampc_value *y =
        ampc_conv2d(g, x, t_const_f32(g, SHAPE(1, 1, 2, 2), wv), NULL, NULL, NULL, NULL, 1);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 1, 3, 3), NULL);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    t_expect_close(&out, SHAPE(0, 1, 2, 2), NULL, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(conv, channel_mismatch_is_named) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 3, 5, 5));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2, 2, 3, 3));
    ampc_value *y = ampc_conv2d(g, x, w, NULL, NULL, NULL, NULL, 1);
    cr_assert(ampc_value_is_poisoned(y));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_SHAPE);
    t_expect_diag(g, "node 0 (Conv 'Conv_0'): the input channels must equal W.shape[1] * group: "
                     "input 0 'x' is [1,3,5,5] (C = 3), input 1 'w' is [2,2,3,3] and group is 1");
    ampc_graph_destroy(g);
}

Test(conv, group_must_divide_output_channels) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 4, 5, 5));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(3, 2, 3, 3));
    cr_assert(ampc_value_is_poisoned(ampc_conv2d(g, x, w, NULL, NULL, NULL, NULL, 2)));
    t_expect_diag(g, "node 0 (Conv 'Conv_0'): group 2 must divide the output channels: input 1 "
                     "'w' is [3,2,3,3] (M = 3)");
    ampc_graph_destroy(g);
}

Test(conv, kernel_rank_mismatch) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[2] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 5, 5)),
                         t_input(g, "w", AMPC_DTYPE_F32, SHAPE(1, 1, 3))};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Conv", in, 2, NULL, 0)));
    t_expect_diag(g, "node 0 (Conv 'Conv_0'): input 1 'w' must have the rank of input 0 'x' (2 "
                     "channel dims and 2 kernel dims): input 0 is [1,1,5,5], input 1 is [1,1,3]");
    ampc_graph_destroy(g);
}

Test(conv, kernel_shape_attribute_must_match_weights) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[2] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 5, 5)),
                         t_input(g, "w", AMPC_DTYPE_F32, SHAPE(1, 1, 3, 2))};
    int64_t ks[2] = {3, 3};
    ampc_attr_arg at = AMPC_ATTR_IS("kernel_shape", ks, 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Conv", in, 2, &at, 1)));
    t_expect_diag(g, "node 0 (Conv 'Conv_0'): attribute 'kernel_shape' [3,3] does not match the "
                     "kernel dims [3,2] of input 1 'w' [1,1,3,2]");
    ampc_graph_destroy(g);
}

Test(conv, window_larger_than_padded_input) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(1, 1, 3, 3));
    cr_assert(ampc_value_is_poisoned(ampc_conv2d(g, x, w, NULL, NULL, NULL, NULL, 1)));
    t_expect_diag(g, "node 0 (Conv 'Conv_0'): output size along spatial dim 0 is 0, must be "
                     "positive: input 0 'x' is [1,1,2,2], so that dim has 2 elements plus pads 0 "
                     "and 0, but the window covers 3 (kernel 3, dilation 1)");
    ampc_graph_destroy(g);
}

Test(conv, bias_and_attribute_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 5, 5));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2, 1, 3, 3));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(3));
    cr_assert(ampc_value_is_poisoned(ampc_conv2d(g, x, w, b, NULL, NULL, NULL, 1)));
    t_expect_diag(g, "node 0 (Conv 'Conv_0'): input 2 'b' must be 1-D with 2 entries (M = "
                     "W.shape[0]), got [3]");
    int64_t pads[4] = {0, 0, INT64_MAX, 0}, strides[2] = {1, 0};
    cr_assert(ampc_value_is_poisoned(ampc_conv2d(g, x, w, NULL, NULL, pads, NULL, 1)));
    t_expect_diag(g, "node 1 (Conv 'Conv_1'): the padded input size overflows a 64-bit integer");
    cr_assert(ampc_value_is_poisoned(ampc_conv2d(g, x, w, NULL, strides, NULL, NULL, 1)));
    t_expect_diag(g, "node 2 (Conv 'Conv_2'): attribute 'strides' entry 1 must be positive, got 0");
    cr_assert(ampc_value_is_poisoned(ampc_conv2d(g, x, w, NULL, NULL, NULL, NULL, 0)));
    t_expect_diag(g, "node 3 (Conv 'Conv_3'): attribute 'group' must be in [1, "
                     "9223372036854775807], got 0");
    ampc_value *in[2] = {x, w};
    ampc_attr_arg ap = AMPC_ATTR_S("auto_pad", "SAME");
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Conv", in, 2, &ap, 1)));
    t_expect_diag(g, "node 4 (Conv 'Conv_4'): attribute 'auto_pad' must be NOTSET, SAME_UPPER, "
                     "SAME_LOWER or VALID, got \"SAME\"");
    ampc_value *xi = t_input(g, "xi", AMPC_DTYPE_I32, SHAPE(1, 1, 5, 5));
    ampc_value *ini[2] = {xi, w};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Conv", ini, 2, NULL, 0)));
    t_expect_diag(g, "node 5 (Conv 'Conv_5'): input 0 'xi' must be a floating-point type, got i32");
    ampc_graph_destroy(g);
}

/* ---- ConvTranspose -------------------------------------------------------------------------- */

/* x = [[1,2],[3,4]], W = 2x2 ones. Stride 2: each input element fills its own 2x2 block. Stride
 * 1: overlapping blocks add up. */
Test(conv_transpose, stride_two_and_one_by_hand) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4}, wv[4] = {1, 1, 1, 1};
    ampc_value *in[2] = {t_const_f32(g, SHAPE(1, 1, 2, 2), xv),
                         t_const_f32(g, SHAPE(1, 1, 2, 2), wv)};
    int64_t s2[2] = {2, 2};
    ampc_attr_arg at = AMPC_ATTR_IS("strides", s2, 2);
    ampc_value *y2 = build(g, "ConvTranspose", in, 2, &at, 1);
    ampc_value *y1 = build(g, "ConvTranspose", in, 2, NULL, 0);
    double want2[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    double want1[9] = {1, 3, 2, 4, 10, 6, 3, 7, 4};
    cr_assert_eq(ampc_output(g, y2, "y2"), AMPC_OK);
    cr_assert_eq(ampc_output(g, y1, "y1"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    t_expect_close(&out[0], SHAPE(1, 1, 4, 4), want2, 0, 0);
    t_expect_close(&out[1], SHAPE(1, 1, 3, 3), want1, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

/* pads crop the full output; output_padding adds a row/col at the end that only the bias
 * reaches. */
Test(conv_transpose, pads_output_padding_and_bias) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4}, wv[4] = {1, 1, 1, 1}, bv[1] = {0.5};
    ampc_value *in[3] = {t_const_f32(g, SHAPE(1, 1, 2, 2), xv),
                         t_const_f32(g, SHAPE(1, 1, 2, 2), wv), t_const_f32(g, SHAPE(1), bv)};
    int64_t pads[4] = {1, 1, 1, 1}, s2[2] = {2, 2}, op[2] = {1, 1};
    ampc_attr_arg ap = AMPC_ATTR_IS("pads", pads, 4);
    double want_pad[1] = {10.5}; /* centre of the stride-1 result */
    expect_eval(g, build(g, "ConvTranspose", in, 3, &ap, 1), SHAPE(1, 1, 1, 1), want_pad);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    ampc_value *in2[3] = {t_const_f32(g, SHAPE(1, 1, 2, 2), xv),
                          t_const_f32(g, SHAPE(1, 1, 2, 2), wv), t_const_f32(g, SHAPE(1), bv)};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("strides", s2, 2), AMPC_ATTR_IS("output_padding", op, 2)};
    double want[25] = {1.5, 1.5, 2.5, 2.5, 0.5, 1.5, 1.5, 2.5, 2.5, 0.5, 3.5, 3.5, 4.5,
                       4.5, 0.5, 3.5, 3.5, 4.5, 4.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    expect_eval(g, build(g, "ConvTranspose", in2, 3, at, 2), SHAPE(1, 1, 5, 5), want);
    ampc_graph_destroy(g);
}

/* 1-D, x = [1,2,3], w = [1,1,1], stride 2: the full output is [1,1,3,2,5,3,3] (7 points).
 * output_shape and SAME_* choose a window of it by the ONNX padding split. */
Test(conv_transpose, output_shape_and_auto_pad_split) {
    struct {
        const char *auto_pad;
        int64_t oshape; /* 0: none */
        int64_t len;
        double want[8];
    } cases[] = {
        {NULL, 8, 8, {1, 1, 3, 2, 5, 3, 3, 0}},   /* total -1: begin 0, one more at the end */
        {NULL, 5, 5, {1, 3, 2, 5, 3}},            /* total 2: 1 and 1 */
        {"SAME_UPPER", 0, 6, {1, 1, 3, 2, 5, 3}}, /* out 3*2, total 1: the odd one at the end */
        {"SAME_LOWER", 0, 6, {1, 3, 2, 5, 3, 3}}, /* ... at the beginning */
    };
    for (int c = 0; c < 4; c++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[3] = {1, 2, 3}, wv[3] = {1, 1, 1};
        ampc_value *in[2] = {t_const_f32(g, SHAPE(1, 1, 3), xv),
                             t_const_f32(g, SHAPE(1, 1, 3), wv)};
        int64_t s[1] = {2}, os[1] = {cases[c].oshape};
        ampc_attr_arg at[2] = {AMPC_ATTR_IS("strides", s, 1),
                               cases[c].auto_pad ? AMPC_ATTR_S("auto_pad", cases[c].auto_pad)
                                                 : AMPC_ATTR_IS("output_shape", os, 1)};
        ampc_value *y = build(g, "ConvTranspose", in, 2, at, 2);
        expect_eval(g, y, SHAPE(1, 1, cases[c].len), cases[c].want);
        ampc_graph_destroy(g);
    }
}

/* group 2, 1-D: channel 0 scatters with [1, 10], channel 1 with [100, 1000]. */
Test(conv_transpose, groups) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4}, wv[4] = {1, 10, 100, 1000};
    ampc_value *in[2] = {t_const_f32(g, SHAPE(1, 2, 2), xv), t_const_f32(g, SHAPE(2, 1, 2), wv)};
    ampc_attr_arg at = AMPC_ATTR_I("group", 2);
    double want[6] = {1, 2 + 10, 20, 300, 400 + 3000, 4000};
    expect_eval(g, build(g, "ConvTranspose", in, 2, &at, 1), SHAPE(1, 2, 3), want);
    ampc_graph_destroy(g);
}

/* Batch 2, 2 groups, stride 2, dilation 2, pads and output_padding, against the definition
 * written as a gather: output point o receives x[q] * w[k] for every q, k with
 * q * stride + k * dilation - pad_begin = o. */
Test(conv_transpose, grouped_strided_matches_definition) {
    enum { B = 2, C = 4, L = 3, MG = 3, K = 3, S = 2, D = 2, PB = 1, PE = 2, OP = 1 };
    enum { G = 2, CG = C / G, M = MG * G, OL = S * (L - 1) + OP + (K - 1) * D + 1 - PB - PE };
    double xv[B * C * L], wv[C * MG * K], bv[M], want[B * M * OL];
    for (int i = 0; i < B * C * L; i++) xv[i] = (i * 3) % 7 - 3;
    for (int i = 0; i < C * MG * K; i++) wv[i] = (i * 5) % 9 - 4;
    for (int i = 0; i < M; i++) bv[i] = i;
    for (int b = 0; b < B; b++)
        for (int m = 0; m < M; m++)
            for (int o = 0; o < OL; o++) {
                double acc = bv[m];
                int grp = m / MG;
                for (int c = grp * CG; c < (grp + 1) * CG; c++)
                    for (int k = 0; k < K; k++) {
                        int t = o + PB - k * D; /* = q * S */
                        if (t < 0 || t % S || t / S >= L) continue;
                        acc += xv[(b * C + c) * L + t / S] * wv[(c * MG + m % MG) * K + k];
                    }
                want[(b * M + m) * OL + o] = acc;
            }
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(B, C, L), xv), t_const_f32(g, SHAPE(C, MG, K), wv),
                         t_const_f32(g, SHAPE(M), bv)};
    int64_t s[1] = {S}, d[1] = {D}, pads[2] = {PB, PE}, op[1] = {OP};
    ampc_attr_arg at[5] = {AMPC_ATTR_IS("strides", s, 1), AMPC_ATTR_IS("dilations", d, 1),
                           AMPC_ATTR_IS("pads", pads, 2), AMPC_ATTR_IS("output_padding", op, 1),
                           AMPC_ATTR_I("group", G)};
    expect_eval(g, build(g, "ConvTranspose", in, 3, at, 5), SHAPE(B, M, OL), want);
    ampc_graph_destroy(g);
}

Test(conv_transpose, channel_mismatch_is_named) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[2] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 3, 4, 4)),
                         t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2, 1, 3, 3))};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "ConvTranspose", in, 2, NULL, 0)));
    t_expect_diag(g, "node 0 (ConvTranspose 'ConvTranspose_0'): the input channels must equal "
                     "W.shape[0]: input 0 'x' is [1,3,4,4] (C = 3), input 1 'w' is [2,1,3,3]");
    ampc_graph_destroy(g);
}

/* ---- pools ---------------------------------------------------------------------------------- */

/* x = 5i + j on 5x5, 2x2 windows, stride 2. Floor: 2x2 windows; ceil_mode: a third row/col of
 * windows starting at 4, clipped to the input. */
Test(pool, max_pool_ceil_mode_and_indices) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[50];
    for (int i = 0; i < 25; i++) xv[i] = i, xv[25 + i] = -i; /* channel 1 peaks top-left */
    ampc_value *x = t_const_f32(g, SHAPE(1, 2, 5, 5), xv);
    int64_t k[2] = {2, 2}, s[2] = {2, 2};
    ampc_attr_arg at[3] = {AMPC_ATTR_IS("kernel_shape", k, 2), AMPC_ATTR_IS("strides", s, 2),
                           AMPC_ATTR_I("ceil_mode", 1)};
    ampc_value *outs[2];
    cr_assert_eq(ampc_op_multi(g, "MaxPool", &x, 1, at, 3, outs, 2), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_value *floor_y = build(g, "MaxPool", &x, 1, at, 2);
    cr_assert_eq(ampc_output(g, outs[0], "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, outs[1], "i"), AMPC_OK);
    cr_assert_eq(ampc_output(g, floor_y, "f"), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    /* ch 0: bottom-right valid point of each window: rows/cols {1, 3, 4}; ch 1: top-left. */
    double want[18];
    int64_t want_idx[18];
    int rc[3] = {1, 3, 4}, tl[3] = {0, 2, 4};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            want[i * 3 + j] = 5 * rc[i] + rc[j];
            want_idx[i * 3 + j] = 5 * rc[i] + rc[j];
            want[9 + i * 3 + j] = -(5 * tl[i] + tl[j]);
            want_idx[9 + i * 3 + j] = 25 + 5 * tl[i] + tl[j]; /* flattened N, C, H, W */
        }
    t_expect_close(&out[0], SHAPE(1, 2, 3, 3), want, 0, 0);
    cr_assert_eq(out[1].dtype, AMPC_DTYPE_I64);
    t_expect_ints(&out[1], SHAPE(1, 2, 3, 3), want_idx);
    double want_floor[8] = {6, 8, 16, 18, 0, -2, -10, -12};
    t_expect_close(&out[2], SHAPE(1, 2, 2, 2), want_floor, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* storage_order 1 numbers the spatial position column-major: h + w * H. */
Test(pool, max_pool_indices_column_major) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6] = {1, 9, 2, 3, 4, 8}; /* 2x3 */
    ampc_value *x = t_const_f32(g, SHAPE(1, 1, 2, 3), xv);
    int64_t k[2] = {2, 2};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("kernel_shape", k, 2), AMPC_ATTR_I("storage_order", 1)};
    ampc_value *outs[2];
    cr_assert_eq(ampc_op_multi(g, "MaxPool", &x, 1, at, 2, outs, 2), AMPC_OK);
    cr_assert_eq(ampc_output(g, outs[0], "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, outs[1], "i"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    /* windows cols 0-1: max 9 at (0,1) -> 0 + 1*2 = 2; cols 1-2: max 9 again -> 2 */
    double want[2] = {9, 9};
    int64_t want_idx[2] = {2, 2};
    t_expect_close(&out[0], SHAPE(1, 1, 1, 2), want, 0, 0);
    t_expect_ints(&out[1], SHAPE(1, 1, 1, 2), want_idx);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

/* ceil_mode drops a window that would start past the input: 6 elements, kernel 2, stride 3 give
 * ceil(4/3) + 1 = 3, but the third window would start at 6. With 5 elements and stride 2 the
 * third window starts at 4, inside, and is kept. Dilation 2 reaches every other element. */
Test(pool, max_pool_ceil_drop_rule_and_dilation) {
    ampc_graph *g = ampc_graph_create("t");
    double a[6] = {1, 2, 3, 4, 5, 6}, b[5] = {1, 2, 3, 4, 5}, c[5] = {1, 5, 2, 4, 3};
    int64_t k[1] = {2}, s3[1] = {3}, s2[1] = {2}, d2[1] = {2};
    ampc_value *xa = t_const_f32(g, SHAPE(1, 1, 6), a), *xb, *xc;
    ampc_attr_arg at[3] = {AMPC_ATTR_IS("kernel_shape", k, 1), AMPC_ATTR_IS("strides", s3, 1),
                           AMPC_ATTR_I("ceil_mode", 1)};
    double wa[2] = {2, 5};
    expect_eval(g, build(g, "MaxPool", &xa, 1, at, 3), SHAPE(1, 1, 2), wa);
    ampc_graph_destroy(g);
    g = ampc_graph_create("t");
    xb = t_const_f32(g, SHAPE(1, 1, 5), b);
    at[1] = AMPC_ATTR_IS("strides", s2, 1);
    double wb[3] = {2, 4, 5};
    expect_eval(g, build(g, "MaxPool", &xb, 1, at, 3), SHAPE(1, 1, 3), wb);
    ampc_graph_destroy(g);
    g = ampc_graph_create("t");
    xc = t_const_f32(g, SHAPE(1, 1, 5), c);
    ampc_attr_arg ad[2] = {AMPC_ATTR_IS("kernel_shape", k, 1), AMPC_ATTR_IS("dilations", d2, 1)};
    double wc[3] = {2, 5, 3}; /* max(x0,x2), max(x1,x3), max(x2,x4) */
    expect_eval(g, build(g, "MaxPool", &xc, 1, ad, 2), SHAPE(1, 1, 3), wc);
    ampc_graph_destroy(g);
}

/* MaxPool on int8 keeps the dtype. */
Test(pool, max_pool_int8) {
    ampc_graph *g = ampc_graph_create("t");
    int8_t xv[4] = {-7, 3, -128, 5};
    ampc_value *x = t_const(g, AMPC_DTYPE_I8, SHAPE(1, 1, 4), xv);
    int64_t k[1] = {2};
    ampc_attr_arg at = AMPC_ATTR_IS("kernel_shape", k, 1);
    ampc_tensor out = t_eval1(g, build(g, "MaxPool", &x, 1, &at, 1), NULL, 0);
    cr_assert_eq(out.dtype, AMPC_DTYPE_I8);
    int64_t want[3] = {3, 3, 5};
    t_expect_ints(&out, SHAPE(1, 1, 3), want);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* x = 1..9 on 3x3, 2x2 windows, stride 1, pad 1 all round: 4x4 windows. S = window sums; the
 * divisor is the in-bounds count (count_include_pad 0) or always 4 (1). */
Test(pool, average_pool_count_include_pad) {
    double sums[16] = {1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9};
    double rows[4] = {1, 2, 2, 1};
    for (int inc = 0; inc < 2; inc++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[9];
        iota(xv, 9, 1);
        ampc_value *x = t_const_f32(g, SHAPE(1, 1, 3, 3), xv);
        int64_t k[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
        ampc_attr_arg at[3] = {AMPC_ATTR_IS("kernel_shape", k, 2), AMPC_ATTR_IS("pads", pads, 4),
                               AMPC_ATTR_I("count_include_pad", inc)};
        double want[16];
        for (int i = 0; i < 16; i++) want[i] = sums[i] / (inc ? 4 : rows[i / 4] * rows[i % 4]);
        expect_eval(g, build(g, "AveragePool", &x, 1, at, 3), SHAPE(1, 1, 4, 4), want);
        ampc_graph_destroy(g);
    }
}

/* ceil_mode with count_include_pad: 6 elements, kernel 3, stride 2, pads 1 and 1 give 4 windows
 * starting at -1, 1, 3, 5; the last one covers x5, one pad point and one point past the padding,
 * which never counts. */
Test(pool, average_pool_ceil_mode_divisors) {
    double want[2][4] = {{1.5, 3, 5, 6}, {1, 3, 5, 3}};
    for (int inc = 0; inc < 2; inc++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[6] = {1, 2, 3, 4, 5, 6};
        ampc_value *x = t_const_f32(g, SHAPE(1, 1, 6), xv);
        int64_t k[1] = {3}, s[1] = {2}, pads[2] = {1, 1};
        ampc_attr_arg at[5] = {AMPC_ATTR_IS("kernel_shape", k, 1), AMPC_ATTR_IS("strides", s, 1),
                               AMPC_ATTR_IS("pads", pads, 2), AMPC_ATTR_I("ceil_mode", 1),
                               AMPC_ATTR_I("count_include_pad", inc)};
        expect_eval(g, build(g, "AveragePool", &x, 1, at, 5), SHAPE(1, 1, 4), want[inc]);
        ampc_graph_destroy(g);
    }
}

Test(pool, global_pools) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[8] = {1, 2, 3, 4, -1, -5, 0, 7};
    ampc_value *x = t_const_f32(g, SHAPE(1, 2, 2, 2), xv);
    ampc_value *avg = build(g, "GlobalAveragePool", &x, 1, NULL, 0);
    ampc_value *mx = build(g, "GlobalMaxPool", &x, 1, NULL, 0);
    cr_assert_eq(ampc_output(g, avg, "a"), AMPC_OK);
    cr_assert_eq(ampc_output(g, mx, "m"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double wa[2] = {2.5, 0.25}, wm[2] = {4, 7};
    t_expect_close(&out[0], SHAPE(1, 2, 1, 1), wa, 0, 0);
    t_expect_close(&out[1], SHAPE(1, 2, 1, 1), wm, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(pool, kernel_shape_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 4, 4));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "MaxPool", &x, 1, NULL, 0)));
    t_expect_diag(g, "node 0 (MaxPool 'MaxPool_0'): attribute 'kernel_shape' is required (one "
                     "entry per spatial dim)");
    int64_t k[1] = {2};
    ampc_attr_arg at = AMPC_ATTR_IS("kernel_shape", k, 1);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "AveragePool", &x, 1, &at, 1)));
    t_expect_diag(g, "node 1 (AveragePool 'AveragePool_1'): attribute 'kernel_shape' must have 2 "
                     "entries (one per spatial dim of input 0), got 1");
    ampc_value *flat = t_input(g, "flat", AMPC_DTYPE_F32, SHAPE(4, 4));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "AveragePool", &flat, 1, &at, 1)));
    t_expect_diag(g, "node 2 (AveragePool 'AveragePool_2'): input 0 'flat' must be N x C x D1 x "
                     "... (rank 3 or more), got [4,4]");
    ampc_graph_destroy(g);
}

/* ---- LpPool, GlobalLpPool ------------------------------------------------------------------- */

/* p = 2 over windows of 2 on {3, -4, 0}: sqrt(9 + 16) = 5 and sqrt(16 + 0) = 4, in three dtypes
 * (all exact). */
Test(lp_pool, p2_window_of_two_in_three_dtypes) {
    ampc_dtype types[3] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_F64};
    for (int t = 0; t < 3; t++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[3] = {3, -4, 0}, want[2] = {5, 4};
        ampc_value *x = const_of(g, types[t], SHAPE(1, 1, 3), xv);
        int64_t k[1] = {2};
        ampc_attr_arg at = AMPC_ATTR_IS("kernel_shape", k, 1);
        ampc_value *y = build(g, "LpPool", &x, 1, &at, 1);
        cr_assert_eq(ampc_value_dtype(y), types[t]);
        expect_eval(g, y, SHAPE(1, 1, 2), want);
        ampc_graph_destroy(g);
    }
}

/* p = 1 with pads 1 and stride 2 on {1, -2, 3, -4}: windows over [0 | 1, -2, 3, -4 | 0] at 0, 2
 * and 4 sum |x|: 1, 5, 4 (the padding adds nothing). */
Test(lp_pool, p1_pads_and_stride) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, -2, 3, -4}, want[3] = {1, 5, 4};
    ampc_value *x = t_const_f32(g, SHAPE(1, 1, 4), xv);
    int64_t k[1] = {2}, s[1] = {2}, p[2] = {1, 1};
    ampc_attr_arg at[4] = {AMPC_ATTR_IS("kernel_shape", k, 1), AMPC_ATTR_IS("strides", s, 1),
                           AMPC_ATTR_IS("pads", p, 2), AMPC_ATTR_I("p", 1)};
    expect_eval(g, build(g, "LpPool", &x, 1, at, 4), SHAPE(1, 1, 3), want);
    ampc_graph_destroy(g);
}

/* Dilation 2 pairs x[i] with x[i + 2] on 1..5: sqrt(1 + 9), sqrt(4 + 16), sqrt(9 + 25); p = 3 on
 * a 2x2 window of ones: 4^(1/3); SAME_UPPER keeps the length, the last window half in padding. */
Test(lp_pool, dilation_p3_and_same_upper) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[5] = {1, 2, 3, 4, 5}, ones[4] = {1, 1, 1, 1};
    ampc_value *x = t_const_f32(g, SHAPE(1, 1, 5), xv);
    int64_t k[1] = {2}, d[1] = {2}, k2[2] = {2, 2};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("kernel_shape", k, 1), AMPC_ATTR_IS("dilations", d, 1)};
    double want[3] = {sqrt(10), sqrt(20), sqrt(34)};
    ampc_tensor out = t_eval1(g, build(g, "LpPool", &x, 1, at, 2), NULL, 0);
    t_expect_close(&out, SHAPE(1, 1, 3), want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    x = t_const_f32(g, SHAPE(1, 1, 2, 2), ones);
    ampc_attr_arg a3[2] = {AMPC_ATTR_IS("kernel_shape", k2, 2), AMPC_ATTR_I("p", 3)};
    double w3[1] = {cbrt(4)};
    out = t_eval1(g, build(g, "LpPool", &x, 1, a3, 2), NULL, 0);
    t_expect_close(&out, SHAPE(1, 1, 1, 1), w3, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    x = t_const_f32(g, SHAPE(1, 1, 3), xv);
    ampc_attr_arg su[3] = {AMPC_ATTR_IS("kernel_shape", k, 1),
                           AMPC_ATTR_S("auto_pad", "SAME_UPPER"), AMPC_ATTR_I("p", 1)};
    double ws[3] = {3, 5, 3};
    expect_eval(g, build(g, "LpPool", &x, 1, su, 3), SHAPE(1, 1, 3), ws);
    ampc_graph_destroy(g);
}

Test(lp_pool, p_must_be_positive) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 4));
    int64_t k[1] = {2};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("kernel_shape", k, 1), AMPC_ATTR_I("p", 0)};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LpPool", &x, 1, at, 2)));
    t_expect_diag(g, "node 0 (LpPool 'LpPool_0'): attribute 'p' must be in [1, "
                     "9223372036854775807], got 0");
    ampc_value *xi = t_input(g, "xi", AMPC_DTYPE_I32, SHAPE(1, 1, 4));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "LpPool", &xi, 1, at, 1)));
    t_expect_diag(g, "node 1 (LpPool 'LpPool_1'): input 0 'xi' must be");
    ampc_graph_destroy(g);
}

/* GlobalLpPool over each channel: {3, 4} and {1, -1} give 5 and sqrt(2) with p = 2 (the
 * default), 7 and 2 with p = 1. */
Test(lp_pool, global_lp_pool) {
    double xv[4] = {3, 4, 1, -1}, w2[2] = {5, sqrt(2)}, w1[2] = {7, 2};
    ampc_attr_arg p1 = AMPC_ATTR_I("p", 1);
    for (int k = 0; k < 2; k++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *x = t_const_f32(g, SHAPE(1, 2, 2), xv);
        ampc_tensor out = t_eval1(g, build(g, "GlobalLpPool", &x, 1, &p1, k), NULL, 0);
        t_expect_close(&out, SHAPE(1, 2, 1), k ? w1 : w2, 1e-6, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

/* ---- Col2Im --------------------------------------------------------------------------------- */

/* Col2Im of an i64 [2] constant pair. */
static ampc_value *pair(ampc_graph *g, int64_t a, int64_t b) {
    int64_t v[2] = {a, b};
    return t_const_i64(g, SHAPE(2), v);
}

/* All-ones columns of 2x2 blocks over a 3x3 image count how many blocks cover each pixel. */
Test(col2im, ones_count_the_block_overlaps) {
    ampc_graph *g = ampc_graph_create("t");
    double ones[16];
    for (int i = 0; i < 16; i++) ones[i] = 1;
    ampc_value *in[3] = {t_const_f32(g, SHAPE(1, 4, 4), ones), pair(g, 3, 3), pair(g, 2, 2)};
    double want[9] = {1, 2, 1, 2, 4, 2, 1, 2, 1};
    expect_eval(g, build(g, "Col2Im", in, 3, NULL, 0), SHAPE(1, 1, 3, 3), want);
    ampc_graph_destroy(g);
}

/* Batch 2, 2 channels, a [4, 5] image, [2, 3] blocks, strides [2, 1], pads [1, 0, 0, 2] and
 * dilations [1, 2] (2 x 3 block positions), against the definition written as loops here:
 * column (c * 6 + ki * 3 + kj, bi * 3 + bj) adds to pixel (2 bi - 1 + ki, bj + 2 kj). */
Test(col2im, strides_pads_dilations_match_definition) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[2 * 12 * 6], want[2 * 2 * 20] = {0};
    for (int i = 0; i < 2 * 12 * 6; i++) xv[i] = i % 7 - 3;
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 2; c++)
            for (int ki = 0; ki < 2; ki++)
                for (int kj = 0; kj < 3; kj++)
                    for (int bi = 0; bi < 2; bi++)
                        for (int bj = 0; bj < 3; bj++) {
                            int r = 2 * bi - 1 + ki, q = bj + 2 * kj;
                            if (r < 0 || r >= 4 || q < 0 || q >= 5) continue;
                            want[(n * 2 + c) * 20 + r * 5 + q] +=
                                xv[(n * 12 + c * 6 + ki * 3 + kj) * 6 + bi * 3 + bj];
                        }
    int64_t st[2] = {2, 1}, pd[4] = {1, 0, 0, 2}, dl[2] = {1, 2};
    ampc_attr_arg at[3] = {AMPC_ATTR_IS("strides", st, 2), AMPC_ATTR_IS("pads", pd, 4),
                           AMPC_ATTR_IS("dilations", dl, 2)};
    ampc_value *in[3] = {t_const_f32(g, SHAPE(2, 12, 6), xv), pair(g, 4, 5), pair(g, 2, 3)};
    expect_eval(g, build(g, "Col2Im", in, 3, at, 3), SHAPE(2, 2, 4, 5), want);
    ampc_graph_destroy(g);
}

/* Integer columns sum in int64 (i32 here) and a 1-D image works as well: blocks of 2 over 3. */
Test(col2im, int32_and_one_spatial_dim) {
    ampc_graph *g = ampc_graph_create("t");
    int32_t xv[4] = {1, 10, 100, 1000}; /* block element 0: {1, 10}, element 1: {100, 1000} */
    int64_t img = 3, blk = 2;
    ampc_value *in[3] = {t_const(g, AMPC_DTYPE_I32, SHAPE(1, 2, 2), xv),
                         t_const_i64(g, SHAPE(1), &img), t_const_i64(g, SHAPE(1), &blk)};
    ampc_value *y = build(g, "Col2Im", in, 3, NULL, 0);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_I32);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    int64_t want[3] = {1, 10 + 100, 1000};
    t_expect_ints(&out, SHAPE(1, 1, 3), want);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(col2im, column_count_and_block_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 4, 5)), pair(g, 3, 3),
                         pair(g, 2, 2)};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Col2Im", in, 3, NULL, 0)));
    t_expect_diag(g, "node 0 (Col2Im 'Col2Im_0'): input 0 'x' must be [N, C * 4, 4] (C times the "
                     "block size, then one column per block position), got [1,4,5]");
    in[2] = pair(g, 4, 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Col2Im", in, 3, NULL, 0)));
    t_expect_diag(g, "node 1 (Col2Im 'Col2Im_1'): the block does not fit spatial dim 0: the image "
                     "has 3 elements plus pads 0 and 0, but the block covers 4 (size 4, dilation "
                     "1)");
    in[1] = t_input(g, "shape", AMPC_DTYPE_I64, SHAPE(2));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Col2Im", in, 3, NULL, 0)));
    t_expect_diag(g, "input 1 'shape' must be known at compile time");
    ampc_graph_destroy(g);
}

/* ---- DeformConv ----------------------------------------------------------------------------- */

/* With zero offsets DeformConv is Conv: 2x2 windows of ones over x = 3i + j plus bias 0.5. */
Test(deform_conv, zero_offsets_are_a_conv) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[9], wv[4] = {1, 1, 1, 1}, off[32] = {0}, bv[1] = {0.5};
    iota(xv, 9, 0);
    ampc_value *in[4] = {t_const_f32(g, SHAPE(1, 1, 3, 3), xv),
                         t_const_f32(g, SHAPE(1, 1, 2, 2), wv),
                         t_const_f32(g, SHAPE(1, 8, 2, 2), off), t_const_f32(g, SHAPE(1), bv)};
    double want[4] = {8.5, 12.5, 20.5, 24.5};
    expect_eval(g, build(g, "DeformConv", in, 4, NULL, 0), SHAPE(1, 1, 2, 2), want);
    ampc_graph_destroy(g);
}

/* A 1x1 kernel reads x at the displaced point: +1 along W reads the right neighbour (0 past the
 * edge); +0.5 along H interpolates halfway to the row below (whose past-the-edge row is 0). */
Test(deform_conv, offsets_shift_and_interpolate) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[6], wv[1] = {1};
    iota(xv, 6, 0); /* [[0, 1, 2], [3, 4, 5]] */
    double right[12] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}; /* channel 0: dH, channel 1: dW */
    double down[12] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0, 0, 0};
    ampc_value *x = t_const_f32(g, SHAPE(1, 1, 2, 3), xv);
    ampc_value *w = t_const_f32(g, SHAPE(1, 1, 1, 1), wv);
    ampc_value *in[3] = {x, w, t_const_f32(g, SHAPE(1, 2, 2, 3), right)};
    double w1[6] = {1, 2, 0, 4, 5, 0};
    expect_eval(g, build(g, "DeformConv", in, 3, NULL, 0), SHAPE(1, 1, 2, 3), w1);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    x = t_const_f32(g, SHAPE(1, 1, 2, 3), xv), w = t_const_f32(g, SHAPE(1, 1, 1, 1), wv);
    ampc_value *in2[3] = {x, w, t_const_f32(g, SHAPE(1, 2, 2, 3), down)};
    double w2[6] = {1.5, 2.5, 3.5, 1.5, 2, 2.5};
    expect_eval(g, build(g, "DeformConv", in2, 3, NULL, 0), SHAPE(1, 1, 2, 3), w2);
    ampc_graph_destroy(g);
}

/* Two offset groups (one channel each): channel 0 reads its right neighbour, channel 1 (all
 * ones, weight 10) stays put but its mask is 0.5: y = x0[i][j+1] + 5. */
Test(deform_conv, offset_groups_and_mask) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[12], wv[2] = {1, 10}, off[24] = {0}, mask[12];
    iota(xv, 6, 0);
    for (int i = 6; i < 12; i++) xv[i] = 1;
    for (int i = 6; i < 12; i++) off[i] = 1; /* group 0, kernel point 0, dim W */
    for (int i = 0; i < 12; i++) mask[i] = i < 6 ? 1 : 0.5;
    ampc_value *in[5] = {t_const_f32(g, SHAPE(1, 2, 2, 3), xv),
                         t_const_f32(g, SHAPE(1, 2, 1, 1), wv),
                         t_const_f32(g, SHAPE(1, 4, 2, 3), off), NULL,
                         t_const_f32(g, SHAPE(1, 2, 2, 3), mask)};
    ampc_attr_arg og = AMPC_ATTR_I("offset_group", 2);
    double want[6] = {6, 7, 5, 9, 10, 5};
    expect_eval(g, build(g, "DeformConv", in, 5, &og, 1), SHAPE(1, 1, 2, 3), want);
    ampc_graph_destroy(g);
}

Test(deform_conv, offset_and_mask_shapes_are_checked) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[5] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 2, 3, 3)),
                         t_input(g, "w", AMPC_DTYPE_F32, SHAPE(1, 2, 2, 2)),
                         t_input(g, "off", AMPC_DTYPE_F32, SHAPE(1, 7, 2, 2)), NULL,
                         t_input(g, "mask", AMPC_DTYPE_F32, SHAPE(1, 3, 2, 2))};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "DeformConv", in, 3, NULL, 0)));
    t_expect_diag(g, "node 0 (DeformConv 'DeformConv_0'): input 2 'off' must be [1,8,2,2] (N, "
                     "offset_group * kernel points * spatial dims offsets, then the output's "
                     "spatial dims), got [1,7,2,2]");
    in[2] = t_input(g, "off8", AMPC_DTYPE_F32, SHAPE(1, 8, 2, 2));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "DeformConv", in, 5, NULL, 0)));
    t_expect_diag(g, "node 1 (DeformConv 'DeformConv_1'): input 4 'mask' must be [1,4,2,2] (N, "
                     "offset_group * kernel points mask values, then the output's spatial dims), "
                     "got [1,3,2,2]");
    ampc_attr_arg og = AMPC_ATTR_I("offset_group", 3);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "DeformConv", in, 3, &og, 1)));
    t_expect_diag(g, "node 2 (DeformConv 'DeformConv_2'): attribute 'offset_group' 3 must divide "
                     "the input channels: input 0 'x' is [1,2,3,3] (C = 2)");
    ampc_graph_destroy(g);
}
