/*
 * resize.c — Resize's and Upsample's interpolation taps (resize.h): the configuration decoded
 * from a node, the coefficients of one output coordinate, and an axis's table of them.
 */
#include "ir/resize.h"
#include "ir/ref/ref.h" /* operand elements */

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int index_of(const char *s, const char *const *opts, int count) {
    for (int i = 0; i < count; i++)
        if (!strcmp(s, opts[i])) return i;
    return 0;
}

ampc_resize_cfg ampc_resize_cfg_of(ampc_graph *g, const ampc_node *n, bool f32_scales) {
    if (n->op == AMPC_OP_UPSAMPLE) {
        const char *m = ampc_ir_attr_string(g, n, "mode", "nearest");
        return (ampc_resize_cfg){
            .mode = strcmp(m, "nearest") ? AMPC_RESIZE_LINEAR : AMPC_RESIZE_NEAREST,
            .coord = AMPC_RESIZE_ASYM,
            .nearest = AMPC_RESIZE_FLOOR,
            .f32_scales = true};
    }
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",  "align_corners",
        "asymmetric", "tf_crop_and_resize",   "tf_half_pixel_for_nn"};
    static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                          "ceil"};
    return (ampc_resize_cfg){
        .mode = index_of(ampc_ir_attr_string(g, n, "mode", "nearest"), modes, 3),
        .coord = index_of(ampc_ir_attr_string(g, n, "coordinate_transformation_mode", "half_pixel"),
                          coords, 7),
        .nearest =
            index_of(ampc_ir_attr_string(g, n, "nearest_mode", "round_prefer_floor"), nearest, 4),
        .cubic_a = ampc_ir_attr_float(g, n, "cubic_coeff_a", -0.75f),
        .extrapolation = ampc_ir_attr_float(g, n, "extrapolation_value", 0.0f),
        .exclude_outside = ampc_ir_attr_int(g, n, "exclude_outside", 0) != 0,
        .antialias = ampc_ir_attr_int(g, n, "antialias", 0) != 0,
        .f32_scales = f32_scales,
    };
}

/* The coefficients of configuration c (resize_taps.h). */
static int coeffs(const ampc_resize_cfg *c, double ratio, double scale, double *w) {
    return ampc_resize_coeffs(c->mode, c->nearest, c->cubic_a, c->antialias, ratio, scale, w);
}

bool ampc_resize_scale_ok(const ampc_resize_cfg *c, double scale) {
    return !(c->antialias && c->mode != AMPC_RESIZE_NEAREST && scale < 1.0 / 16);
}

/* The input coordinate x_ori of output coordinate x (the coordinate transformation mode). */
static double input_coord(const ampc_resize_cfg *c, int64_t x, int64_t in, int64_t out,
                          double scale, double ow, double roi_s, double roi_e) {
    switch (c->coord) {
    case AMPC_RESIZE_ALIGN: return ow == 1 ? 0 : (double)x * (double)(in - 1) / (ow - 1);
    case AMPC_RESIZE_ASYM: return (double)x / scale;
    case AMPC_RESIZE_TF_NN: return ((double)x + 0.5) / scale;
    case AMPC_RESIZE_CROP: {
        double roi_len = roi_e - roi_s;
        double xo = ow == 1 ? roi_len * (double)(in - 1) / 2
                            : (double)x * roi_len * (double)(in - 1) / (ow - 1);
        return xo + roi_s * (double)(in - 1);
    }
    case AMPC_RESIZE_PYTORCH: return ow == 1 ? -0.5 : ((double)x + 0.5) / scale - 0.5;
    case AMPC_RESIZE_HALF_PIXEL_SYM: {
        double adj = (double)out / ow, center = (double)in / 2;
        return center * (1 - adj) + ((double)x + 0.5) / scale - 0.5;
    }
    default: return ((double)x + 0.5) / scale - 0.5;
    }
}

bool ampc_resize_axis_build(const ampc_resize_cfg *c, int64_t in, int64_t out, double scale,
                            double roi_s, double roi_e, ampc_resize_axis *t) {
    double w[AMPC_RESIZE_MAX_TAPS];
    int32_t per = c->mode == AMPC_RESIZE_CUBIC ? 4 : 2;
    if (c->antialias && c->mode != AMPC_RESIZE_NEAREST && scale < 1) per = coeffs(c, 0.5, scale, w);
    size_t no = (size_t)(out ? out : 1);
    memset(t, 0, sizeof *t);
    t->per = per;
    t->cnt = calloc(no, sizeof *t->cnt);
    t->idx = calloc(no * (size_t)per, sizeof *t->idx);
    t->w = calloc(no * (size_t)per, sizeof *t->w);
    t->extrap = calloc(no, sizeof *t->extrap);
    if (!t->cnt || !t->idx || !t->w || !t->extrap) {
        ampc_resize_axis_free(t);
        return false;
    }
    /* The reference's output_width: scale * in, an f32 product when the scales are f32. */
    double ow = c->f32_scales ? (double)(float)(scale * (double)in) : scale * (double)in;
    t->identity = in == out;
    for (int64_t x = 0; x < out; x++) {
        double xo = input_coord(c, x, in, out, scale, ow, roi_s, roi_e);
        /* A NaN position (a NaN or infinite roi) extrapolates like one outside the input. */
        t->extrap[x] = c->coord == AMPC_RESIZE_CROP && !(xo >= 0 && xo <= (double)(in - 1));
        t->any_extrap |= t->extrap[x];
        long long idx[AMPC_RESIZE_MAX_TAPS];
        double wt[AMPC_RESIZE_MAX_TAPS];
        const int32_t m = ampc_resize_taps(c->mode, c->nearest, c->cubic_a, c->exclude_outside,
                                           c->antialias, scale, in, xo, idx, wt);
        for (int32_t i = 0; i < m; i++) t->idx[x * per + i] = idx[i], t->w[x * per + i] = wt[i];
        t->cnt[x] = m;
        t->identity &= m == 1 && t->idx[x * per] == x && t->w[x * per] == 1 && !t->extrap[x];
    }
    return true;
}

void ampc_resize_axis_free(ampc_resize_axis *t) {
    free(t->cnt), free(t->idx), free(t->w), free(t->extrap);
    t->cnt = NULL, t->idx = NULL, t->w = NULL, t->extrap = NULL;
}

ampc_grid_params ampc_grid_params_of(const ampc_node *n) {
    const char *ms = ampc_attr_string_or(n, "mode", "linear");
    const char *ps = ampc_attr_string_or(n, "padding_mode", "zeros");
    ampc_grid_params p = {.align = ampc_attr_int_or(n, "align_corners", 0) != 0};
    p.mode = !strcmp(ms, "nearest")                           ? AMPC_RESIZE_NEAREST
             : !strcmp(ms, "cubic") || !strcmp(ms, "bicubic") ? AMPC_RESIZE_CUBIC
                                                              : AMPC_RESIZE_LINEAR;
    p.pad = !strcmp(ps, "border")       ? AMPC_GRID_BORDER
            : !strcmp(ps, "reflection") ? AMPC_GRID_REFLECTION
                                        : AMPC_GRID_ZEROS;
    return p;
}

ampc_roi_params ampc_roi_params_of(const ampc_node *n) {
    return (ampc_roi_params){
        .is_max = !strcmp(ampc_attr_string_or(n, "mode", "avg"), "max"),
        .half_pixel = !strcmp(ampc_attr_string_or(n, "coordinate_transformation_mode", "half_pixel"),
                              "half_pixel"),
        .spatial_scale = ampc_attr_float_or(n, "spatial_scale", 1.0f),
        .sampling_ratio = ampc_attr_int_or(n, "sampling_ratio", 0)};
}

static const int64_t *ints_attr(const ampc_node *n, const char *name) {
    const ampc_attr *a = ampc_attr_ints_of(n, name);
    return a ? a->ints : NULL;
}

ampc_shape ampc_unpool_shape(const ampc_node *n, const ampc_shape *x) {
    const int32_t k = x->rank - 2;
    const int64_t *kern = ints_attr(n, "kernel_shape"), *st = ints_attr(n, "strides");
    const int64_t *pads = ints_attr(n, "pads");
    ampc_shape s = *x;
    for (int32_t i = 0; i < k; i++) /* inference required kernel_shape */
        s.dims[2 + i] = (x->dims[2 + i] - 1) * (st ? st[i] : 1) -
                        (pads ? pads[i] + pads[k + i] : 0) + kern[i];
    return s;
}

int32_t ampc_resize_scales(const ampc_node *n, int32_t r, const int64_t *x_dims,
                           ampc_resize_operand roi, ampc_resize_operand scales,
                           ampc_resize_operand sizes, double *scale, double *rs, double *re,
                           int32_t *ax) {
    const ampc_attr *axes = ampc_ir_attr_find(n, "axes");
    const bool given = axes && axes->kind == AMPC_ATTR_INTS;
    const int32_t na = given ? axes->n : r;
    for (int32_t k = 0; k < na; k++)
        ax[k] = (int32_t)(given ? (axes->ints[k] < 0 ? axes->ints[k] + r : axes->ints[k]) : k);
    for (int32_t d = 0; d < r; d++) scale[d] = 1, rs[d] = 0, re[d] = 1;
    const char *policy = ampc_attr_string_or(n, "keep_aspect_ratio_policy", "stretch");
    double fit = 0;
    for (int32_t k = 0; k < na; k++) {
        const int32_t d = ax[k];
        if (roi.data) {
            rs[d] = ampc_ref_load_f64(roi.data, roi.t, k);
            re[d] = ampc_ref_load_f64(roi.data, roi.t, na + k);
        }
        if (scales.data) {
            scale[d] = ampc_ref_load_f64(scales.data, scales.t, k);
        } else {
            const int64_t want = ampc_ref_load_i64(sizes.data, sizes.t, k), have = x_dims[d];
            scale[d] = have ? (double)want / (double)have : 1;
            if (k == 0 || (!strcmp(policy, "not_larger") && scale[d] < fit) ||
                (!strcmp(policy, "not_smaller") && scale[d] > fit))
                fit = scale[d];
        }
    }
    if (!scales.data && strcmp(policy, "stretch"))
        for (int32_t k = 0; k < na; k++) scale[ax[k]] = fit;
    return na;
}

bool ampc_upsample_scales(const ampc_node *n, int32_t r, ampc_resize_operand in1, double *scale) {
    const ampc_attr *a = ampc_ir_attr_find(n, "scales");
    const bool attr = a && a->kind == AMPC_ATTR_FLOATS && a->n >= r;
    if (!in1.data && !attr) return false;
    for (int32_t d = 0; d < r; d++)
        scale[d] = in1.data ? ampc_ref_load_f64(in1.data, in1.t, d) : a->floats[d];
    return true;
}
