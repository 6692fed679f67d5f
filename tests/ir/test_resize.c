/*
 * test_resize.c — resampling and spatial rearrangement through the DSL: Resize in each mode and
 * coordinate transformation (values worked out by hand from the ONNX formulas in the comments),
 * Upsample, GridSample, AffineGrid, RoiAlign, MaxRoiPool, MaxUnpool, and the movement ops Tile,
 * DepthToSpace, SpaceToDepth and CenterCropPad; with the exact diagnostics for operands that do
 * not fit.
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <math.h>
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

static void expect_vals(ampc_graph *g, ampc_value *y, ampc_shape s, const double *want,
                        double tol) {
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    t_expect_close(&out, s, want, tol, tol);
    ampc_tensor_free(&out);
}

/* Resize of a constant x by f32 scales (input 2) or i64 sizes (input 3). */
static ampc_value *resize(ampc_graph *g, ampc_value *x, const double *scales, const int64_t *sizes,
                          int32_t n, const ampc_attr_arg *at, int32_t n_at) {
    ampc_value *in[4] = {x, NULL, NULL, NULL};
    if (scales)
        in[2] = cst(g, "scales", AMPC_DTYPE_F32, SHAPE(n), scales);
    else
        in[3] = ints(g, "sizes", SHAPE(n), sizes);
    return build(g, "Resize", in, 4, at, n_at);
}

/* ---- Resize --------------------------------------------------------------------------------- */

/* Nearest, half_pixel, round_prefer_floor (the defaults) by 2 x 3: along the width x_ori =
 * (x + 0.5) / 3 - 0.5 = -1/3, 0, 1/3, 2/3, 1, 4/3 rounds to 0, 0, 0, 1, 1, 1. */
Test(resize, nearest_upsample_defaults) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4}, sc[4] = {1, 1, 2, 3};
    ampc_value *y =
        resize(g, cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), xv), sc, NULL, 4, NULL, 0);
    double want[24] = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
    expect_vals(g, y, SHAPE(1, 1, 4, 6), want, 0);
    ampc_graph_destroy(g);
}

/* The ONNX downsample example: [[1,2,3,4],[5,6,7,8]] by 0.6 -> 1 x 2. Rows: y_ori = 0.5/0.6 -
 * 0.5 = 1/3 blends the rows 2:1 into [7/3, 10/3, 13/3, 16/3]; columns x_ori = 1/3 and 2. */
Test(resize, linear_downsample_half_pixel) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[8] = {1, 2, 3, 4, 5, 6, 7, 8}, sc[4] = {1, 1, 0.6, 0.6};
    ampc_attr_arg m = AMPC_ATTR_S("mode", "linear");
    ampc_value *y =
        resize(g, cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 4), xv), sc, NULL, 4, &m, 1);
    double want[2] = {7.0 / 3 + 1.0 / 3, 13.0 / 3};
    expect_vals(g, y, SHAPE(1, 1, 1, 2), want, 1e-6);
    ampc_graph_destroy(g);
}

/* align_corners with sizes: 2x2 -> 3x3 samples at 0, 0.5, 1 of each axis. */
Test(resize, linear_align_corners_sizes) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4};
    int64_t sz[4] = {1, 1, 3, 3};
    ampc_attr_arg at[2] = {AMPC_ATTR_S("mode", "linear"),
                           AMPC_ATTR_S("coordinate_transformation_mode", "align_corners")};
    ampc_value *y =
        resize(g, cst(g, "x", AMPC_DTYPE_F64, SHAPE(1, 1, 2, 2), xv), NULL, sz, 4, at, 2);
    double want[9] = {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4};
    expect_vals(g, y, SHAPE(1, 1, 3, 3), want, 0);
    ampc_graph_destroy(g);
}

/* Cubic (A = -0.75), asymmetric, 1-D [0,10,20,30] by 2. At ratio 1/2 the coefficients are
 * [-3/32, 19/32, 19/32, -3/32]; edges repeat the border element:
 *   x_ori 0.5: taps -1,0,1,2 -> 0,0,10,20: (19*10 - 3*20)/32 = 4.0625
 *   x_ori 2.5: taps 1..4 -> 10,20,30,30: (-30 + 19*50 - 90)/32 = 25.9375
 *   x_ori 3.5: 20,30,30,30 -> (-60 + 19*60 - 90)/32 = 30.9375
 * With exclude_outside the tap at -1 drops out and the rest are renormalised by 35/32. */
Test(resize, cubic_asymmetric_and_exclude_outside) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {0, 10, 20, 30}, sc[1] = {2};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(4), xv);
    ampc_attr_arg at[3] = {AMPC_ATTR_S("mode", "cubic"),
                           AMPC_ATTR_S("coordinate_transformation_mode", "asymmetric"),
                           AMPC_ATTR_I("exclude_outside", 1)};
    ampc_value *y = resize(g, x, sc, NULL, 1, at, 2), *z = resize(g, x, sc, NULL, 1, at, 3);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    cr_assert_eq(ampc_output(g, z, "z"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double wy[8] = {0, 4.0625, 10, 15, 20, 25.9375, 30, 30.9375};
    double wz[8] = {0, (19.0 * 10 - 3 * 20) / 35, 10, 15, 20, 0, 30, 0};
    /* exclude_outside at the right end: x_ori 2.5 drops tap 4 (weights 19/32 + 19/32 - 3/32),
     * x_ori 3.5 drops taps 4, 5 (weights -3/32 + 19/32) */
    wz[5] = (-3.0 * 10 + 19 * 20 + 19 * 30) / 35;
    wz[7] = (-3.0 * 20 + 19 * 30) / 16;
    t_expect_close(&out[0], SHAPE(8), wy, 1e-6, 1e-5);
    t_expect_close(&out[1], SHAPE(8), wz, 1e-6, 1e-5);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

/* Nearest modes on [1,2,3,4] resized to 8 with asymmetric coordinates x / 2: the half-way
 * points 0.5, 1.5, ... go up with round_prefer_ceil and down with floor. */
Test(resize, nearest_modes) {
    const char *modes[2] = {"round_prefer_ceil", "floor"};
    double want[2][8] = {{1, 2, 2, 3, 3, 4, 4, 4}, {1, 1, 2, 2, 3, 3, 4, 4}};
    for (int m = 0; m < 2; m++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[4] = {1, 2, 3, 4};
        int64_t sz[1] = {8};
        ampc_attr_arg at[2] = {AMPC_ATTR_S("coordinate_transformation_mode", "asymmetric"),
                               AMPC_ATTR_S("nearest_mode", modes[m])};
        ampc_value *y = resize(g, cst(g, "x", AMPC_DTYPE_I32, SHAPE(4), xv), NULL, sz, 1, at, 2);
        cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_I32);
        expect_vals(g, y, SHAPE(8), want[m], 0);
        ampc_graph_destroy(g);
    }
}

/* tf_crop_and_resize with roi [0, 1.5] to 3 samples: x_ori = x * 1.5 * 3 / 2 = 0, 2.25, 4.5;
 * 4.5 lies outside [0, 3] and gives the extrapolation value. */
Test(resize, tf_crop_and_resize_extrapolates) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4}, roi[2] = {0, 1.5};
    int64_t sz[1] = {3};
    ampc_value *in[4] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(4), xv),
                         cst(g, "roi", AMPC_DTYPE_F32, SHAPE(2), roi), NULL,
                         ints(g, "sizes", SHAPE(1), sz)};
    ampc_attr_arg at[3] = {AMPC_ATTR_S("mode", "linear"),
                           AMPC_ATTR_S("coordinate_transformation_mode", "tf_crop_and_resize"),
                           AMPC_ATTR_F("extrapolation_value", 10)};
    double want[3] = {1, 3.25, 10};
    expect_vals(g, build(g, "Resize", in, 4, at, 3), SHAPE(3), want, 1e-6);
    ampc_graph_destroy(g);
}

/* keep_aspect_ratio_policy over axes [2, 3] of a 1x1x2x4 asked for 4x4: the ratios are 2 and 1;
 * not_larger takes 1 (the input's own size), not_smaller takes 2 (4x8). */
Test(resize, keep_aspect_ratio_policies) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t sz[2] = {4, 4}, axes[2] = {2, 3};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 4), xv);
    ampc_attr_arg nl[2] = {AMPC_ATTR_S("keep_aspect_ratio_policy", "not_larger"),
                           AMPC_ATTR_IS("axes", axes, 2)};
    ampc_attr_arg ns[2] = {AMPC_ATTR_S("keep_aspect_ratio_policy", "not_smaller"),
                           AMPC_ATTR_IS("axes", axes, 2)};
    ampc_value *a = resize(g, x, NULL, sz, 2, nl, 2), *b = resize(g, x, NULL, sz, 2, ns, 2);
    ampc_shape sa = ampc_value_shape(a), sb = ampc_value_shape(b);
    ampc_shape wa = SHAPE(1, 1, 2, 4), wb = SHAPE(1, 1, 4, 8);
    cr_assert(ampc_shape_eq(&sa, &wa) && ampc_shape_eq(&sb, &wb));
    expect_vals(g, a, wa, xv, 0);
    ampc_graph_destroy(g);
}

/* Antialiased linear downsampling by 1/2 (half_pixel) of 0..7: the tent widens to 4 taps with
 * weights [1, 3, 3, 1] / 8 around x_ori = 2x + 0.5. */
Test(resize, antialias_linear_downsample) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[8] = {0, 1, 2, 3, 4, 5, 6, 7}, sc[1] = {0.5};
    ampc_attr_arg at[2] = {AMPC_ATTR_S("mode", "linear"), AMPC_ATTR_I("antialias", 1)};
    ampc_value *y = resize(g, cst(g, "x", AMPC_DTYPE_F32, SHAPE(8), xv), sc, NULL, 1, at, 2);
    /* taps -1..2 (clamped 0,0,1,2), 1..4, 3..6, 5..8 (clamped 5,6,7,7) */
    double want[4] = {(0 + 0 + 3 + 2) / 8.0, (1 + 6 + 9 + 4) / 8.0, (3 + 12 + 15 + 6) / 8.0,
                      (5 + 18 + 21 + 7) / 8.0};
    expect_vals(g, y, SHAPE(4), want, 1e-6);
    ampc_graph_destroy(g);
}

Test(resize, resize_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {0}, sc[2] = {2, 2};
    int64_t sz[4] = {1, 1, 4, 4};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), xv);
    ampc_value *in[4] = {x, NULL, cst(g, "scales", AMPC_DTYPE_F32, SHAPE(2), sc),
                         ints(g, "sizes", SHAPE(4), sz)};
    expect_fail(g, "Resize", in, 4, NULL, 0,
                "node 0 (Resize 'Resize_0'): exactly one of input 2 (scales) and input 3 (sizes) "
                "must be given and non-empty, got both");
    in[3] = NULL;
    expect_fail(g, "Resize", in, 4, NULL, 0,
                "input 2 'scales' (scales) must be [4] (one per resized axis), got [2]");
    ampc_attr_arg m = AMPC_ATTR_S("mode", "area");
    in[2] = NULL, in[3] = ints(g, "sizes2", SHAPE(4), sz);
    expect_fail(g, "Resize", in, 4, &m, 1,
                "attribute 'mode' must be nearest, linear or cubic, got \"area\"");
    ampc_graph_destroy(g);
}

/* ---- Upsample ------------------------------------------------------------------------------- */

/* Opset 7's attribute form (nearest: floor of x / scale) and opset 9's input form (linear,
 * asymmetric: x / 2 = 0, 0.5, 1, 1.5 over [1, 3], the last clamped to the edge). */
Test(resize, upsample_attribute_and_input_scales) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4}, lv[2] = {1, 3}, sc[1] = {2};
    float fs[4] = {1, 1, 2, 3};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), xv);
    ampc_attr_arg at = AMPC_ATTR_FS("scales", fs, 4);
    ampc_value *a = build(g, "Upsample", &x, 1, &at, 1);
    ampc_value *in[2] = {cst(g, "l", AMPC_DTYPE_F32, SHAPE(2), lv),
                         cst(g, "s", AMPC_DTYPE_F32, SHAPE(1), sc)};
    ampc_attr_arg lin = AMPC_ATTR_S("mode", "linear");
    ampc_value *b = build(g, "Upsample", in, 2, &lin, 1);
    cr_assert_eq(ampc_output(g, a, "a"), AMPC_OK);
    cr_assert_eq(ampc_output(g, b, "b"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double wa[24] = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
    double wb[4] = {1, 2, 3, 3};
    t_expect_close(&out[0], SHAPE(1, 1, 4, 6), wa, 0, 0);
    t_expect_close(&out[1], SHAPE(4), wb, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    float small[4] = {1, 1, 0.5f, 1};
    ampc_attr_arg bad = AMPC_ATTR_FS("scales", small, 4);
    expect_fail(g, "Upsample", &x, 1, &bad, 1, "Upsample scale 2 must be 1 or more, got 0.5");
    ampc_graph_destroy(g);
}

/* ---- GridSample ----------------------------------------------------------------------------- */

/* A 2x2 image [[1,2],[3,4]] sampled at (x, y) = (-1,-1), (1,1), (0,0), (0.5,-1).
 * align_corners=1 maps -1..1 onto pixel centres 0..1: 1, 4, 2.5 and (0.75, 0) -> 1.75.
 * align_corners=0 maps -1..1 onto -0.5..1.5: (-0.5,-0.5) is a quarter of pixel (0,0) with zeros
 * padding (0.25), all of it with border padding (1); (1.5,1.5) likewise 1 and 4; (0.5, 0.5)
 * blends all four: 2.5; (1, -0.5): half of row 0's x = 1 blend (2) -> 1 (zeros) or 2 (border). */
Test(resize, grid_sample_linear_paddings) {
    double xv[4] = {1, 2, 3, 4}, gv[8] = {-1, -1, 1, 1, 0, 0, 0.5, -1};
    double want[3][4] = {{1, 4, 2.5, 1.75}, {0.25, 1, 2.5, 1}, {1, 4, 2.5, 2}};
    for (int c = 0; c < 3; c++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), xv),
                             cst(g, "grid", AMPC_DTYPE_F32, SHAPE(1, 1, 4, 2), gv)};
        ampc_attr_arg at[2] = {AMPC_ATTR_I("align_corners", c == 0),
                               AMPC_ATTR_S("padding_mode", c == 2 ? "border" : "zeros")};
        expect_vals(g, build(g, "GridSample", in, 2, at, 2), SHAPE(1, 1, 1, 4), want[c], 1e-6);
        ampc_graph_destroy(g);
    }
}

/* Nearest rounds half to even in 2-D: x = ((g + 1) * 2 - 1) / 2 = 0.5 -> 0 and 1.5 -> 2, which
 * is outside (zeros: 0); reflection folds 2 about the border 1.5 back to 1 (value 2). The row
 * y = -0.5 rounds to -0, row 0. */
Test(resize, grid_sample_nearest_and_reflection) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4}, gv[4] = {0, -1, 1, -1}; /* (0.5, -0.5) and (1.5, -0.5) */
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), xv),
                         cst(g, "grid", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), gv)};
    ampc_attr_arg near = AMPC_ATTR_S("mode", "nearest");
    ampc_attr_arg refl[2] = {near, AMPC_ATTR_S("padding_mode", "reflection")};
    ampc_value *a = build(g, "GridSample", in, 2, &near, 1),
               *b = build(g, "GridSample", in, 2, refl, 2);
    cr_assert_eq(ampc_output(g, a, "a"), AMPC_OK);
    cr_assert_eq(ampc_output(g, b, "b"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double wa[2] = {1, 0}, wb[2] = {1, 2};
    t_expect_close(&out[0], SHAPE(1, 1, 1, 2), wa, 0, 0);
    t_expect_close(&out[1], SHAPE(1, 1, 1, 2), wb, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(resize, grid_sample_grid_shape_error) {
    ampc_graph *g = ampc_graph_create("t");
    double z[12] = {0};
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), z),
                         cst(g, "grid", AMPC_DTYPE_F32, SHAPE(1, 2, 2, 3), z)};
    expect_fail(g, "GridSample", in, 2, NULL, 0,
                "node 0 (GridSample 'GridSample_0'): input 1 'grid' must be [N, O1..O2, 2] with "
                "the N of input 0 'x' [1,1,2,2], got [1,2,2,3]");
    ampc_graph_destroy(g);
}

/* ---- RoiAlign ------------------------------------------------------------------------------- */

/* x[i][j] = 4i + j on 4x4; one roi (0,0)-(3,3), one 1x1 bin, one sample at its centre:
 * output_half_pixel puts it at (1.5, 1.5): 7.5; half_pixel shifts by -0.5: (1, 1): 5. The max
 * mode keeps the largest weighted corner at (1.5, 1.5): 10 * 0.25 = 2.5. */
Test(resize, roi_align_modes) {
    const char *ctm[3] = {"output_half_pixel", "half_pixel", "output_half_pixel"};
    double want[3] = {7.5, 5, 2.5};
    for (int c = 0; c < 3; c++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[16], rv[4] = {0, 0, 3, 3};
        for (int i = 0; i < 16; i++) xv[i] = i;
        int64_t bi[1] = {0};
        ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 4, 4), xv),
                             cst(g, "rois", AMPC_DTYPE_F32, SHAPE(1, 4), rv),
                             ints(g, "bi", SHAPE(1), bi)};
        ampc_attr_arg at[3] = {AMPC_ATTR_S("coordinate_transformation_mode", ctm[c]),
                               AMPC_ATTR_I("sampling_ratio", 1),
                               AMPC_ATTR_S("mode", c == 2 ? "max" : "avg")};
        expect_vals(g, build(g, "RoiAlign", in, 3, at, 3), SHAPE(1, 1, 1, 1), &want[c], 1e-6);
        ampc_graph_destroy(g);
    }
}

Test(resize, roi_align_batch_index_out_of_range) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[16] = {0}, rv[4] = {0, 0, 1, 1};
    int64_t bi[1] = {2};
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 4, 4), xv),
                         cst(g, "rois", AMPC_DTYPE_F32, SHAPE(1, 4), rv),
                         ints(g, "bi", SHAPE(1), bi)};
    expect_fail(g, "RoiAlign", in, 3, NULL, 0,
                "batch index 2 (element 0 of input 2 'bi') is out of range for the 1 images of "
                "input 0 'x'");
    ampc_graph_destroy(g);
}

/* RoiAlign over x[i][j] = 4i + j (4x4) with one roi of the given corners. */
static ampc_value *roi_align(ampc_graph *g, const double rv[4], int64_t sr, const char *mode) {
    double xv[16];
    for (int i = 0; i < 16; i++) xv[i] = i;
    int64_t bi[1] = {0};
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 4, 4), xv),
                         cst(g, "rois", AMPC_DTYPE_F32, SHAPE(1, 4), rv),
                         ints(g, "bi", SHAPE(1), bi)};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("sampling_ratio", sr), AMPC_ATTR_S("mode", mode)};
    return ampc_op(g, "RoiAlign", in, 3, at, 2);
}

/* The samples a RoiAlign reads are counted before it reads any: a sampling_ratio of 2^31 (2^62
 * samples, which never finished) or a roi of 1e30 pixels with adaptive sampling is refused with
 * the count and the limit. */
Test(resize, roi_align_refuses_more_samples_than_the_limit, .timeout = 30) {
    ampc_graph *g = ampc_graph_create("t");
    double rv[4] = {0, 0, 3, 3};
    ampc_value *y = roi_align(g, rv, (int64_t)1 << 31, "avg");
    cr_assert(ampc_value_is_poisoned(y));
    t_expect_diag(g, "node 0 (RoiAlign 'RoiAlign_0'): the rois of input 1 'rois' (spatial_scale "
                     "1, sampling_ratio 2147483648) ask for 4.612e+18 bilinear samples, more than "
                     "the reference evaluator's limit of 4.295e+09 (2^32)");
    ampc_graph_clear_errors(g);
    double huge[4] = {0, 0, 1e30, 1e30};
    cr_assert(ampc_value_is_poisoned(roi_align(g, huge, 0, "max")));
    t_expect_diag(g, "ask for 1e+60 bilinear samples");
    ampc_graph_destroy(g);
}

/* A roi with a NaN or infinite corner has no defined samples: every bin reads as outside the
 * map (0) in both modes, with a fixed or an adaptive sampling grid; a finite roi next to it is
 * unaffected. (The int64 conversion of NaN and inf coordinates was undefined.) */
Test(resize, roi_align_nan_and_infinite_rois_read_zeros) {
    /* the last: no width and a height of 1e30 (its grid of 0 by 1e30 once looped 1e30 times) */
    double bad[5][4] = {{NAN, 0, 3, 3}, {0, 0, INFINITY, 3}, {0, -INFINITY, 3, 3}, {NAN, NAN, NAN, NAN},
                        {0, 0, -1, 1e30}};
    for (int k = 0; k < 5; k++)
        for (int m = 0; m < 2; m++)
            for (int64_t sr = 0; sr <= 2; sr += 2) {
                ampc_graph *g = ampc_graph_create("t");
                ampc_value *y = roi_align(g, bad[k], sr, m ? "max" : "avg");
                cr_assert(!ampc_value_is_poisoned(y), "roi %d: %s", k, ampc_graph_errors(g));
                double zero = 0;
                expect_vals(g, y, SHAPE(1, 1, 1, 1), &zero, 0);
                ampc_graph_destroy(g);
            }
}

/* GridSample points at NaN read padding zeros in every mode and padding; an infinite point is
 * outside under zeros padding (0) and on the border under border padding; far finite points
 * (1e30) likewise. Bicubic border was where the int64 taps of NaN and inf overflowed. */
Test(resize, grid_sample_nan_and_infinite_points) {
    double xv[4] = {1, 2, 3, 4};
    /* (x, y) points: NaN, (inf, -1), (1e30, -1), (-inf, 1) */
    double gv[8] = {NAN, 0, INFINITY, -1, 1e30, -1, -INFINITY, 1};
    const char *modes[3] = {"nearest", "linear", "cubic"};
    const char *pads[3] = {"zeros", "border", "reflection"};
    for (int m = 0; m < 3; m++)
        for (int p = 0; p < 3; p++) {
            ampc_graph *g = ampc_graph_create("t");
            ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), xv),
                                 cst(g, "grid", AMPC_DTYPE_F32, SHAPE(1, 1, 4, 2), gv)};
            ampc_attr_arg at[3] = {AMPC_ATTR_S("mode", modes[m]), AMPC_ATTR_S("padding_mode", pads[p]),
                                   AMPC_ATTR_I("align_corners", 1)};
            ampc_value *y = build(g, "GridSample", in, 2, at, 3);
            ampc_tensor out = t_eval1(g, y, NULL, 0);
            const float *o = out.data;
            cr_assert_eq(o[0], 0, "%s %s: NaN point gave %g", modes[m], pads[p], o[0]);
            if (p == 0) { /* far outside: zeros */
                for (int i = 1; i < 4; i++)
                    cr_assert_eq(o[i], 0, "%s zeros: point %d gave %g", modes[m], i, o[i]);
            } else if (p == 1) { /* clamped onto the border: x[0][1], x[0][1], x[1][0] */
                cr_assert_float_eq(o[1], 2, 1e-6, "%s border: (inf, -1) gave %g", modes[m], o[1]);
                cr_assert_float_eq(o[2], 2, 1e-6, "%s border: (1e30, -1) gave %g", modes[m], o[2]);
                cr_assert_float_eq(o[3], 3, 1e-6, "%s border: (-inf, 1) gave %g", modes[m], o[3]);
            } else { /* reflection of inf: NaN, read as zeros; of 1e30: some point inside */
                cr_assert_eq(o[1], 0, "%s reflection: (inf, -1) gave %g", modes[m], o[1]);
                cr_assert(isfinite(o[2]), "%s reflection: (1e30, -1) gave %g", modes[m], o[2]);
            }
            ampc_tensor_free(&out);
            ampc_graph_destroy(g);
        }
}

/* tf_crop_and_resize with a NaN or infinite roi: every output position is undefined, so it takes
 * the extrapolation value. */
Test(resize, tf_crop_and_resize_with_a_nan_roi_extrapolates) {
    double rois[2][2] = {{NAN, 1}, {-INFINITY, INFINITY}};
    for (int k = 0; k < 2; k++) {
        ampc_graph *g = ampc_graph_create("t");
        double xv[4] = {1, 2, 3, 4};
        int64_t sz[1] = {3};
        ampc_value *in[4] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(4), xv),
                             cst(g, "roi", AMPC_DTYPE_F32, SHAPE(2), rois[k]), NULL,
                             ints(g, "sizes", SHAPE(1), sz)};
        ampc_attr_arg at[3] = {AMPC_ATTR_S("mode", "linear"),
                               AMPC_ATTR_S("coordinate_transformation_mode", "tf_crop_and_resize"),
                               AMPC_ATTR_F("extrapolation_value", 10)};
        double want[3] = {10, 10, 10};
        expect_vals(g, build(g, "Resize", in, 4, at, 3), SHAPE(3), want, 0);
        ampc_graph_destroy(g);
    }
}

/* ---- MaxUnpool ------------------------------------------------------------------------------ */

/* The ONNX example: [[5,6],[7,8]] with MaxPool indices 5, 7, 13, 15 of a 4x4, kernel 2 stride 2;
 * with output_shape 5x5 the 4x4 result sits at the origin. */
Test(resize, max_unpool_natural_and_output_shape) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {5, 6, 7, 8};
    int64_t iv[4] = {5, 7, 13, 15}, ks[2] = {2, 2}, os[4] = {1, 1, 5, 5};
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), xv),
                         ints(g, "i", SHAPE(1, 1, 2, 2), iv), ints(g, "os", SHAPE(4), os)};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("kernel_shape", ks, 2), AMPC_ATTR_IS("strides", ks, 2)};
    ampc_value *a = build(g, "MaxUnpool", in, 2, at, 2), *b = build(g, "MaxUnpool", in, 3, at, 2);
    cr_assert_eq(ampc_output(g, a, "a"), AMPC_OK);
    cr_assert_eq(ampc_output(g, b, "b"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double wa[16] = {0}, wb[25] = {0};
    wa[5] = 5, wa[7] = 6, wa[13] = 7, wa[15] = 8;
    wb[6] = 5, wb[8] = 6, wb[16] = 7, wb[18] = 8;
    t_expect_close(&out[0], SHAPE(1, 1, 4, 4), wa, 0, 0);
    t_expect_close(&out[1], SHAPE(1, 1, 5, 5), wb, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(resize, max_unpool_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {0};
    int64_t iv[4] = {0, 1, 2, 16}, ks[2] = {2, 2};
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2), xv),
                         ints(g, "i", SHAPE(1, 1, 2, 2), iv)};
    expect_fail(g, "MaxUnpool", in, 2, NULL, 0,
                "node 0 (MaxUnpool 'MaxUnpool_0'): attribute 'kernel_shape' is required");
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("kernel_shape", ks, 2), AMPC_ATTR_IS("strides", ks, 2)};
    expect_fail(g, "MaxUnpool", in, 2, at, 2,
                "index 16 (element 3 of input 1 'i') is out of range for the 16 elements of the "
                "unpooled tensor (valid: 0 to 15)");
    ampc_graph_destroy(g);
}

/* ---- Tile, DepthToSpace, SpaceToDepth, CenterCropPad ---------------------------------------- */

Test(resize, tile_repeats) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4};
    int64_t rep[2] = {2, 3}, zero[2] = {0, 1};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_I16, SHAPE(2, 2), xv);
    ampc_value *in[2] = {x, ints(g, "rep", SHAPE(2), rep)},
               *in0[2] = {x, ints(g, "z", SHAPE(2), zero)};
    ampc_value *y = build(g, "Tile", in, 2, NULL, 0), *e = build(g, "Tile", in0, 2, NULL, 0);
    ampc_shape se = ampc_value_shape(e), we = SHAPE(0, 2);
    cr_assert(ampc_shape_eq(&se, &we));
    double want[24] = {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4};
    expect_vals(g, y, SHAPE(4, 6), want, 0);
    int64_t bad[1] = {2};
    in[1] = ints(g, "bad", SHAPE(1), bad);
    expect_fail(g, "Tile", in, 2, NULL, 0,
                "input 1 'bad' must be 1-D with one repeat per dim of input 0 'x' [2,2], got 1 "
                "entries");
    ampc_graph_destroy(g);
}

/* DepthToSpace of channels 0..7 (one pixel each) with blocksize 2: DCR reads channel
 * (i*2 + j) * 2 + c for output (c, i, j), CRD reads c * 4 + i*2 + j. SpaceToDepth inverts DCR. */
Test(resize, depth_to_space_modes_and_back) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 8, 1, 1), xv);
    ampc_attr_arg b = AMPC_ATTR_I("blocksize", 2);
    ampc_attr_arg crd[2] = {b, AMPC_ATTR_S("mode", "CRD")};
    ampc_value *dcr = build(g, "DepthToSpace", &x, 1, &b, 1);
    ampc_value *c = build(g, "DepthToSpace", &x, 1, crd, 2);
    ampc_value *back = build(g, "SpaceToDepth", &dcr, 1, &b, 1);
    cr_assert_eq(ampc_output(g, dcr, "dcr"), AMPC_OK);
    cr_assert_eq(ampc_output(g, c, "crd"), AMPC_OK);
    cr_assert_eq(ampc_output(g, back, "back"), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double wd[8] = {0, 2, 4, 6, 1, 3, 5, 7}, wc[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    t_expect_close(&out[0], SHAPE(1, 2, 2, 2), wd, 0, 0);
    t_expect_close(&out[1], SHAPE(1, 2, 2, 2), wc, 0, 0);
    t_expect_close(&out[2], SHAPE(1, 8, 1, 1), xv, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(resize, depth_space_errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 6, 3, 3));
    ampc_attr_arg b = AMPC_ATTR_I("blocksize", 2);
    expect_fail(g, "DepthToSpace", &x, 1, &b, 1,
                "node 0 (DepthToSpace 'DepthToSpace_0'): the channels of input 0 'x' [1,6,3,3] "
                "must be a multiple of blocksize^2 = 4");
    expect_fail(g, "SpaceToDepth", &x, 1, &b, 1,
                "the height and width of input 0 'x' [1,6,3,3] must be multiples of blocksize 2");
    expect_fail(g, "SpaceToDepth", &x, 1, NULL, 0, "attribute 'blocksize' is required");
    ampc_graph_destroy(g);
}

/* CenterCropPad of a 3x4 (values 0..11) to 2x6: rows crop from (3-2)/2 = 0, columns pad with
 * (6-4)/2 = 1 zero in front. Cropping only the last axis from 4 to 2 starts at 1. */
Test(resize, center_crop_pad) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[12];
    for (int i = 0; i < 12; i++) xv[i] = i;
    int64_t sh[2] = {2, 6}, one[1] = {2}, ax[1] = {-1};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(3, 4), xv);
    ampc_value *in[2] = {x, ints(g, "shape", SHAPE(2), sh)};
    ampc_value *in1[2] = {x, ints(g, "one", SHAPE(1), one)};
    ampc_attr_arg axes = AMPC_ATTR_IS("axes", ax, 1);
    ampc_value *a = build(g, "CenterCropPad", in, 2, NULL, 0);
    ampc_value *b = build(g, "CenterCropPad", in1, 2, &axes, 1);
    cr_assert_eq(ampc_output(g, a, "a"), AMPC_OK);
    cr_assert_eq(ampc_output(g, b, "b"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double wa[12] = {0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 7, 0};
    double wb[6] = {1, 2, 5, 6, 9, 10}; /* columns 1..2 of each row */
    t_expect_close(&out[0], SHAPE(2, 6), wa, 0, 0);
    t_expect_close(&out[1], SHAPE(3, 2), wb, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    expect_fail(g, "CenterCropPad", in1, 2, NULL, 0,
                "input 1 'one' must have one size per axis (2), got 1");
    ampc_graph_destroy(g);
}

/* ---- MaxRoiPool ----------------------------------------------------------------------------- */

/* x = 4i + j on two 4x4 images (the second one + 100), 2x2 bins:
 *   roi (0; 0,0,3,3):  4x4 pixels, 2x2 bins: the quadrant maxima 5, 7, 13, 15
 *   roi (0; 1,1,3,2):  3 wide, 2 high: rows [1,2) [2,3), cols [1,3) [2,4): 6, 7, 10, 11
 *   roi (0; 5,5,8,8):  entirely past the image: every bin empty, 0
 *   roi (1; 0,0,3,3):  the second image: 105, 107, 113, 115 */
Test(max_roi_pool, bins_clipping_and_batches) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[32], rois[20] = {0, 0, 0, 3, 3, 0, 1, 1, 3, 2, 0, 5, 5, 8, 8, 1, 0, 0, 3, 3};
    for (int i = 0; i < 32; i++) xv[i] = i < 16 ? i : i - 16 + 100;
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(2, 1, 4, 4), xv),
                         cst(g, "rois", AMPC_DTYPE_F32, SHAPE(4, 5), rois)};
    int64_t ps[2] = {2, 2};
    ampc_attr_arg at = AMPC_ATTR_IS("pooled_shape", ps, 2);
    double want[16] = {5, 7, 13, 15, 6, 7, 10, 11, 0, 0, 0, 0, 105, 107, 113, 115};
    expect_vals(g, build(g, "MaxRoiPool", in, 2, &at, 1), SHAPE(4, 1, 2, 2), want, 0);
    ampc_graph_destroy(g);
}

/* spatial_scale 0.5 maps the roi (0,0)-(6,6) onto pixels (0,0)-(3,3); one 1x1 bin takes the max
 * of the whole roi, per channel (channel 1 is x negated: its max is -0). */
Test(max_roi_pool, spatial_scale_and_channels) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[32], rois[5] = {0, 0, 0, 6, 6};
    for (int i = 0; i < 32; i++) xv[i] = i < 16 ? i : -(i - 16);
    ampc_value *in[2] = {cst(g, "x", AMPC_DTYPE_F64, SHAPE(1, 2, 4, 4), xv),
                         cst(g, "rois", AMPC_DTYPE_F64, SHAPE(1, 5), rois)};
    int64_t ps[2] = {1, 1};
    ampc_attr_arg at[2] = {AMPC_ATTR_IS("pooled_shape", ps, 2), AMPC_ATTR_F("spatial_scale", 0.5f)};
    double want[2] = {15, 0};
    expect_vals(g, build(g, "MaxRoiPool", in, 2, at, 2), SHAPE(1, 2, 1, 1), want, 0);
    ampc_graph_destroy(g);
}

Test(max_roi_pool, errors) {
    ampc_graph *g = ampc_graph_create("t");
    double rois[5] = {2, 0, 0, 1, 1};
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 4, (int64_t[]){2, 1, 4, 4});
    ampc_value *in[2] = {x, ampc_input(g, "r4", AMPC_DTYPE_F32, 2, (int64_t[]){3, 4})};
    int64_t ps[2] = {2, 2};
    ampc_attr_arg at = AMPC_ATTR_IS("pooled_shape", ps, 2);
    expect_fail(g, "MaxRoiPool", in, 2, NULL, 0,
                "node 0 (MaxRoiPool 'MaxRoiPool_0'): attribute 'pooled_shape' is required "
                "([pooled_height, pooled_width])");
    expect_fail(g, "MaxRoiPool", in, 2, &at, 1,
                "node 1 (MaxRoiPool 'MaxRoiPool_1'): input 1 'r4' must be [R, 5] (batch index, "
                "x1, y1, x2, y2), got [3,4]");
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double xv[32] = {0};
    ampc_value *in2[2] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(2, 1, 4, 4), xv),
                          cst(g, "rois", AMPC_DTYPE_F32, SHAPE(1, 5), rois)};
    ampc_value *y = ampc_op(g, "MaxRoiPool", in2, 2, &at, 1);
    /* The constant inputs fold while building: the bad batch index fails right there. */
    cr_assert(ampc_value_is_poisoned(y));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_EVAL);
    t_expect_diag(g, "node 0 (MaxRoiPool 'MaxRoiPool_0'): roi 0 of input 1 'rois' is (2, 0, 0, 1, "
                     "1): its batch index must be a whole number in [0, 2) and its corners finite");
    ampc_graph_destroy(g);
}

/* ---- AffineGrid ----------------------------------------------------------------------------- */

/* The identity on a 2x3 (H x W) grid gives the base points (x, y): without align_corners the
 * cell centres x = -2/3, 0, 2/3 and y = -1/2, 1/2; with it the corners x = -1, 0, 1, y = -1, 1.
 * theta = [[2, 0, 0.5], [0, 1, -1]] maps (x, y) to (2x + 0.5, y - 1). */
Test(affine_grid, two_d_base_points_and_transform) {
    double id[6] = {1, 0, 0, 0, 1, 0}, th[6] = {2, 0, 0.5, 0, 1, -1};
    int64_t size[4] = {1, 1, 2, 3};
    double t = 2.0 / 3;
    double w0[12] = {-t, -0.5, 0, -0.5, t, -0.5, -t, 0.5, 0, 0.5, t, 0.5};
    double w1[12] = {-1, -1, 0, -1, 1, -1, -1, 1, 0, 1, 1, 1};
    double w2[12];
    for (int i = 0; i < 6; i++) w2[2 * i] = 2 * w1[2 * i] + 0.5, w2[2 * i + 1] = w1[2 * i + 1] - 1;
    for (int k = 0; k < 3; k++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[2] = {cst(g, "theta", AMPC_DTYPE_F32, SHAPE(1, 2, 3), k == 2 ? th : id),
                             ints(g, "size", SHAPE(4), size)};
        ampc_attr_arg ac = AMPC_ATTR_I("align_corners", 1);
        ampc_value *y = build(g, "AffineGrid", in, 2, &ac, k ? 1 : 0);
        expect_vals(g, y, SHAPE(1, 2, 3, 2), k == 0 ? w0 : k == 1 ? w1 : w2, 1e-6);
        ampc_graph_destroy(g);
    }
}

/* 3-D with two batches: size [2, 1, 2, 1, 2] (D, H, W) and align_corners: z = -1, 1; y = -1 (a
 * single point); x = -1, 1. Batch 0 is the identity, batch 1 swaps x and z. */
Test(affine_grid, three_d_batches) {
    ampc_graph *g = ampc_graph_create("t");
    double th[24] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, /* identity */
                     0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0 /* x' = z, z' = x */};
    int64_t size[5] = {2, 1, 2, 1, 2};
    ampc_value *in[2] = {cst(g, "theta", AMPC_DTYPE_F64, SHAPE(2, 3, 4), th),
                         ints(g, "size", SHAPE(5), size)};
    ampc_attr_arg ac = AMPC_ATTR_I("align_corners", 1);
    double want[24] = {-1, -1, -1, 1, -1, -1, -1, -1, 1, 1, -1, 1,
                       -1, -1, -1, -1, -1, 1, 1, -1, -1, 1, -1, 1};
    expect_vals(g, build(g, "AffineGrid", in, 2, &ac, 1), SHAPE(2, 2, 1, 2, 3), want, 0);
    ampc_graph_destroy(g);
}

Test(affine_grid, theta_must_fit_the_size) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t s4[4] = {1, 1, 2, 3}, s3[3] = {1, 2, 3};
    ampc_value *in[2] = {ampc_input(g, "theta", AMPC_DTYPE_F32, 3, (int64_t[]){1, 3, 4}),
                         ints(g, "size", SHAPE(4), s4)};
    expect_fail(g, "AffineGrid", in, 2, NULL, 0,
                "node 0 (AffineGrid 'AffineGrid_0'): input 0 'theta' (theta) must be [1, 2, 3] "
                "for the 2-D size given by input 1, got [1,3,4]");
    in[1] = ints(g, "size3", SHAPE(3), s3);
    expect_fail(g, "AffineGrid", in, 2, NULL, 0,
                "node 1 (AffineGrid 'AffineGrid_1'): input 1 'size3' (size) must hold [N, C, H, "
                "W] or [N, C, D, H, W], got 3 entries");
    ampc_graph_destroy(g);
}
