/*
 * resize.c — inference for resampling and spatial transforms: Resize (the opset 11-19 forms, in
 * the newest one's terms), Upsample (opsets 7-9), GridSample, AffineGrid, RoiAlign, MaxRoiPool
 * and MaxUnpool.
 *
 * Resize's output size comes from the constant scales (out = floor(in * scale)) or sizes input
 * (taken as they are, or fitted to keep the aspect ratio: out = round_half_up(in * scale) with
 * the smallest (not_larger) or largest (not_smaller) of the ratios size / in over the resized
 * axes). The reference kernel (ir/ref/resize.c) derives the per-axis scales the same way.
 */
#include "../ref/ref.h" /* element loads for the constant scales */
#include "infer.h"

#include <math.h>
#include <string.h>

static int64_t diag_count(const ampc_graph *g) { return (int64_t)g->diag.n + g->diag.dropped; }

static const char *shp(const ampc_value *v, char *buf) {
    return ampc_shape_str(&v->shape, buf, AMPC_SHAPE_STR_MAX);
}

static ampc_status overflow(ampc_graph *g, const ampc_node *n, const char *what) {
    return AMPC_FAIL(g, n, AMPC_E_OVERFLOW, "%s overflows a 64-bit integer", what);
}

/* Reads an int attribute; false when it is mistyped (the reader recorded why). */
static bool read_int(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                     int64_t *out) {
    int64_t before = diag_count(g);
    *out = ampc_ir_attr_int(g, n, name, dflt);
    return diag_count(g) == before;
}

static bool read_flag(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                      int64_t *out) {
    if (!read_int(g, n, name, dflt, out)) return false;
    if (*out == 0 || *out == 1) return true;
    AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be 0 or 1, got %lld", name, (long long)*out);
    return false;
}

/* Reads a string attribute that must be one of `opts` (NULL-terminated); `list` spells them for
 * the message. */
static bool read_choice(ampc_graph *g, const ampc_node *n, const char *name, const char *dflt,
                        const char *const *opts, const char *list) {
    int64_t before = diag_count(g);
    const char *s = ampc_ir_attr_string(g, n, name, dflt);
    if (diag_count(g) != before) return false;
    for (int32_t i = 0; opts[i]; i++)
        if (!strcmp(s, opts[i])) return true;
    AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be %s, got \"%s\"", name, list, s);
    return false;
}

/* Reads an ints attribute of exactly `count` entries, each >= lo; `dflt` fills it when absent. */
static bool read_ints(ampc_graph *g, const ampc_node *n, const char *name, int32_t count,
                      int64_t dflt, int64_t lo, int64_t *out) {
    int32_t got;
    int64_t before = diag_count(g);
    const int64_t *v = ampc_ir_attr_ints(g, n, name, &got);
    if (diag_count(g) != before) return false;
    if (!v && !ampc_ir_attr_find(n, name)) {
        for (int32_t i = 0; i < count; i++) out[i] = dflt;
        return true;
    }
    if (got != count) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must have %d entries, got %d", name, count,
                  got);
        return false;
    }
    for (int32_t i = 0; i < count; i++) {
        if (v[i] < lo) {
            AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' entry %d must be %s, got %lld", name, i,
                      lo > 0 ? "positive" : "non-negative", (long long)v[i]);
            return false;
        }
        out[i] = v[i];
    }
    return true;
}

/* Input i is present and not empty (ONNX marks an unused optional input with an empty name or
 * an empty tensor). */
static bool given(const ampc_node *n, int32_t i) {
    return i < n->n_inputs && n->inputs[i] && ampc_ir_numel(n->inputs[i]) > 0;
}

/* ---- Resize, Upsample ----------------------------------------------------------------------- */

static const char *const resize_modes[] = {"nearest", "linear", "cubic", NULL};
static const char *const coord_modes[] = {
    "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",   "align_corners",
    "asymmetric", "tf_crop_and_resize",   "tf_half_pixel_for_nn", NULL};
static const char *const nearest_modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                            "ceil", NULL};
static const char *const aspect_policies[] = {"stretch", "not_larger", "not_smaller", NULL};

/* The scales (f32, one per resized axis) of input i, checked positive and finite. */
static bool read_scales(ampc_graph *g, const ampc_node *n, int32_t i, int32_t count, double *out) {
    const ampc_value *s = n->inputs[i];
    char b[AMPC_SHAPE_STR_MAX];
    if (!ampc_infer_check_dtype(g, n, i, DT_FLOAT)) return false;
    if (s->shape.rank != 1 || s->shape.dims[0] != count) {
        AMPC_FAIL(g, n, AMPC_E_SHAPE,
                  "input %d '%s' (scales) must be [%d] (one per resized axis), "
                  "got %s",
                  i, s->name, count, shp(s, b));
        return false;
    }
    for (int32_t k = 0; k < count; k++) {
        double v = ampc_ref_load_f64(s->data, s->dtype, k);
        if (!(v > 0) || !isfinite(v)) {
            AMPC_FAIL(g, n, AMPC_E_SHAPE,
                      "input %d '%s' (scales) entry %d must be positive, got %g", i, s->name, k, v);
            return false;
        }
        out[k] = v;
    }
    return true;
}

/* Output dims of a resize of x over axes ax[0..na-1] by scales (floor(in * scale)). */
static bool scaled_dims(ampc_graph *g, const ampc_node *n, const ampc_value *x, const int32_t *ax,
                        int32_t na, const double *sc, ampc_shape *y) {
    *y = x->shape;
    for (int32_t k = 0; k < na; k++) {
        double o = floor((double)x->shape.dims[ax[k]] * sc[k]);
        if (o >= 9.2e18) {
            overflow(g, n, "an output dim (dim * scale)");
            return false;
        }
        y->dims[ax[k]] = (int64_t)o;
    }
    return true;
}

/* Resize: X, roi (tf_crop_and_resize), scales or sizes (exactly one of the two, a constant). */
ampc_status ampc_infer_resize(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    char sx[AMPC_SHAPE_STR_MAX], sb[AMPC_SHAPE_STR_MAX];
    int64_t flag, policy_i = 0;
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM)) return AMPC_E_DTYPE;
    if (!read_choice(g, n, "mode", "nearest", resize_modes, "nearest, linear or cubic") ||
        !read_choice(g, n, "coordinate_transformation_mode", "half_pixel", coord_modes,
                     "half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, "
                     "asymmetric or tf_crop_and_resize") ||
        !read_choice(g, n, "nearest_mode", "round_prefer_floor", nearest_modes,
                     "round_prefer_floor, round_prefer_ceil, floor or ceil") ||
        !read_choice(g, n, "keep_aspect_ratio_policy", "stretch", aspect_policies,
                     "stretch, not_larger or not_smaller") ||
        !read_flag(g, n, "antialias", 0, &flag) || !read_flag(g, n, "exclude_outside", 0, &flag))
        return AMPC_E_ATTR;
    const char *policy = ampc_ir_attr_string(g, n, "keep_aspect_ratio_policy", "stretch");
    policy_i = !strcmp(policy, "not_larger") ? 1 : !strcmp(policy, "not_smaller") ? 2 : 0;
    int32_t r = x->shape.rank, ax[AMPC_MAX_RANK], na = r, cnt;
    int64_t before = diag_count(g);
    const int64_t *axes = ampc_ir_attr_ints(g, n, "axes", &cnt);
    if (diag_count(g) != before) return AMPC_E_ATTR;
    if (axes) {
        bool seen[AMPC_MAX_RANK] = {false};
        if (cnt > r)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'axes' has %d entries; input 0 '%s' "
                             "has rank %d",
                             cnt, x->name, r);
        for (int32_t i = 0; i < cnt; i++) {
            if (!ampc_infer_axis(g, n, axes[i], r, "attribute 'axes' entry", &ax[i]))
                return AMPC_E_ATTR;
            if (seen[ax[i]])
                return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'axes' names axis %d twice", ax[i]);
            seen[ax[i]] = true;
        }
        na = cnt;
    } else {
        for (int32_t i = 0; i < r; i++) ax[i] = i;
    }
    bool has_scales = given(n, 2), has_sizes = given(n, 3);
    if (has_scales == has_sizes)
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG,
                         "exactly one of input 2 (scales) and input 3 (sizes) must be given and "
                         "non-empty, got %s",
                         has_scales ? "both" : "neither");
    if (given(n, 1)) {
        const ampc_value *roi = n->inputs[1];
        if (!ampc_infer_check_dtype(g, n, 1, DT_FLOAT)) return AMPC_E_DTYPE;
        if (roi->shape.rank != 1 || roi->shape.dims[0] != 2 * na)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 1 '%s' (roi) must be [%d] (starts then ends of the %d "
                             "resized axes), got %s",
                             roi->name, 2 * na, na, shp(roi, sb));
    }
    ampc_shape y = x->shape;
    if (has_scales) {
        double sc[AMPC_MAX_RANK];
        if (!read_scales(g, n, 2, na, sc)) return AMPC_E_SHAPE;
        if (!scaled_dims(g, n, x, ax, na, sc, &y)) return AMPC_E_OVERFLOW;
    } else {
        const ampc_value *sv = n->inputs[3];
        int64_t sizes[AMPC_MAX_RANK];
        if (sv->shape.rank != 1 || sv->shape.dims[0] != na)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 3 '%s' (sizes) must be [%d] (one per resized axis), got %s",
                             sv->name, na, shp(sv, sb));
        if (ampc_infer_const_ints(g, n, 3, sizes, AMPC_MAX_RANK) < 0) return AMPC_E_SHAPE;
        double best = 0;
        for (int32_t k = 0; k < na; k++) {
            int64_t in = x->shape.dims[ax[k]];
            if (sizes[k] < 0 || (in == 0 && sizes[k] != 0))
                return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                                 "input 3 '%s' (sizes) entry %d is %lld; it must be non-negative, "
                                 "and 0 where input 0 '%s' %s is empty",
                                 sv->name, k, (long long)sizes[k], x->name, shp(x, sx));
            double s = in ? (double)sizes[k] / (double)in : 1;
            if (k == 0 || (policy_i == 1 && s < best) || (policy_i == 2 && s > best)) best = s;
            y.dims[ax[k]] = sizes[k];
        }
        if (policy_i)
            for (int32_t k = 0; k < na; k++) {
                double o = floor(best * (double)x->shape.dims[ax[k]] + 0.5);
                if (o >= 9.2e18) return overflow(g, n, "an output dim (dim * scale)");
                y.dims[ax[k]] = (int64_t)o;
            }
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* Upsample (opsets 7-9): nearest or (bi)linear resampling by the scales, one per dim, given as
 * input 1 (opset 9) or as the `scales` attribute (opset 7). */
ampc_status ampc_infer_upsample(ampc_graph *g, ampc_node *n) {
    static const char *const modes[] = {"nearest", "linear", "bilinear", NULL};
    const ampc_value *x = n->inputs[0];
    int32_t r = x->shape.rank, ax[AMPC_MAX_RANK];
    double sc[AMPC_MAX_RANK];
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM)) return AMPC_E_DTYPE;
    if (!read_choice(g, n, "mode", "nearest", modes, "nearest, linear or bilinear"))
        return AMPC_E_ATTR;
    for (int32_t i = 0; i < r; i++) ax[i] = i;
    bool in_scales = n->n_inputs > 1 && n->inputs[1];
    const ampc_attr *a = ampc_ir_attr_find(n, "scales");
    if (in_scales == (a != NULL))
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG,
                         "the scales must be given either as input 1 or as the attribute "
                         "'scales', got %s",
                         in_scales ? "both" : "neither");
    if (in_scales) {
        if (!read_scales(g, n, 1, r, sc)) return AMPC_E_SHAPE;
    } else {
        if (a->kind != AMPC_ATTR_FLOATS || a->n != r)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'scales' must be %d floats (one per dim of input 0), got "
                             "%d",
                             r, a->kind == AMPC_ATTR_FLOATS ? a->n : 0);
        for (int32_t i = 0; i < r; i++) sc[i] = a->floats[i];
    }
    for (int32_t i = 0; i < r; i++)
        if (!(sc[i] >= 1) || !isfinite(sc[i]))
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "Upsample scale %d must be 1 or more, got %g", i,
                             sc[i]);
    ampc_shape y;
    if (!scaled_dims(g, n, x, ax, r, sc, &y)) return AMPC_E_OVERFLOW;
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* ---- GridSample, RoiAlign, MaxUnpool -------------------------------------------------------- */

/* GridSample (opsets 16 and 20): X [N, C, D1..Dk] sampled at grid [N, O1..Ok, k] (normalised
 * coordinates in [-1, 1], the last dim first) -> Y [N, C, O1..Ok]. */
ampc_status ampc_infer_grid_sample(ampc_graph *g, ampc_node *n) {
    static const char *const modes[] = {"linear", "bilinear", "nearest", "cubic", "bicubic", NULL};
    static const char *const pads[] = {"zeros", "border", "reflection", NULL};
    const ampc_value *x = n->inputs[0], *gr = n->inputs[1];
    char sx[AMPC_SHAPE_STR_MAX], sg[AMPC_SHAPE_STR_MAX];
    int64_t flag;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT) || !ampc_infer_check_dtype(g, n, 1, DT_FLOAT))
        return AMPC_E_DTYPE;
    if (!read_choice(g, n, "mode", "linear", modes, "linear, nearest or cubic") ||
        !read_choice(g, n, "padding_mode", "zeros", pads, "zeros, border or reflection") ||
        !read_flag(g, n, "align_corners", 0, &flag))
        return AMPC_E_ATTR;
    int32_t r = x->shape.rank, k = r - 2;
    if (r < 3)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must be N x C x D1 x ... (rank 3 or "
                         "more), got %s",
                         x->name, shp(x, sx));
    if (gr->shape.rank != r || gr->shape.dims[0] != x->shape.dims[0] || gr->shape.dims[r - 1] != k)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must be [N, O1..O%d, %d] with the N of input 0 '%s' %s, "
                         "got %s",
                         gr->name, k, k, x->name, shp(x, sx), shp(gr, sg));
    ampc_shape y = {r, {x->shape.dims[0], x->shape.dims[1]}};
    for (int32_t i = 0; i < k; i++) y.dims[2 + i] = gr->shape.dims[1 + i];
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* RoiAlign (opset 16): X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R] ->
 * [R, C, output_height, output_width]. */
ampc_status ampc_infer_roi_align(ampc_graph *g, ampc_node *n) {
    static const char *const modes[] = {"avg", "max", NULL};
    static const char *const ctm[] = {"half_pixel", "output_half_pixel", NULL};
    const ampc_value *x = n->inputs[0], *rois = n->inputs[1], *bi = n->inputs[2];
    char sx[AMPC_SHAPE_STR_MAX], s1[AMPC_SHAPE_STR_MAX], s2[AMPC_SHAPE_STR_MAX];
    int64_t oh, ow, sr;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT) || !ampc_infer_same_dtype(g, n, 0, 1))
        return AMPC_E_DTYPE;
    if (bi->dtype != AMPC_DTYPE_I64 && bi->dtype != AMPC_DTYPE_I32)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 2 '%s' must be i64 or i32, got %s", bi->name,
                         ampc_dtype_name(bi->dtype));
    if (!read_choice(g, n, "mode", "avg", modes, "avg or max") ||
        !read_choice(g, n, "coordinate_transformation_mode", "half_pixel", ctm,
                     "half_pixel or output_half_pixel") ||
        !read_int(g, n, "output_height", 1, &oh) || !read_int(g, n, "output_width", 1, &ow) ||
        !read_int(g, n, "sampling_ratio", 0, &sr))
        return AMPC_E_ATTR;
    if (oh < 1 || ow < 1 || sr < 0)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attributes 'output_height' and 'output_width' must be positive and "
                         "'sampling_ratio' non-negative, got %lld, %lld and %lld",
                         (long long)oh, (long long)ow, (long long)sr);
    if (x->shape.rank != 4)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' must be 4-D [N, C, H, W], got %s",
                         x->name, shp(x, sx));
    if (rois->shape.rank != 2 || rois->shape.dims[1] != 4 || bi->shape.rank != 1 ||
        bi->shape.dims[0] != rois->shape.dims[0])
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must be [R, 4] and input 2 '%s' [R], got %s and %s",
                         rois->name, bi->name, shp(rois, s1), shp(bi, s2));
    ampc_shape y = {4, {rois->shape.dims[0], x->shape.dims[1], oh, ow}};
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* MaxUnpool: X [N, C, D...] and the i64 indices of a MaxPool with the same window -> [N, C,
 * (in - 1) * stride - pad_begin - pad_end + kernel ...], or output_shape (input 2) when given. */
ampc_status ampc_infer_max_unpool(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *iv = n->inputs[1];
    char sx[AMPC_SHAPE_STR_MAX], si[AMPC_SHAPE_STR_MAX];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    int32_t r = x->shape.rank, k = r - 2;
    if (r < 3)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must be N x C x D1 x ... (rank 3 or "
                         "more), got %s",
                         x->name, shp(x, sx));
    if (iv->dtype != AMPC_DTYPE_I64 || !ampc_shape_eq(&iv->shape, &x->shape))
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must be i64 of the shape of input 0 "
                         "'%s' %s, got %s%s",
                         iv->name, x->name, shp(x, sx), ampc_dtype_name(iv->dtype), shp(iv, si));
    if (!ampc_ir_attr_find(n, "kernel_shape"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'kernel_shape' is required (one entry per "
                         "spatial dim)");
    int64_t kern[AMPC_MAX_RANK], st[AMPC_MAX_RANK], pads[2 * AMPC_MAX_RANK];
    if (!read_ints(g, n, "kernel_shape", k, 1, 1, kern) ||
        !read_ints(g, n, "strides", k, 1, 1, st) || !read_ints(g, n, "pads", 2 * k, 0, 0, pads))
        return AMPC_E_ATTR;
    ampc_shape y = x->shape;
    for (int32_t i = 0; i < k; i++) {
        int64_t o;
        if (!ampc_mul_ok(x->shape.dims[2 + i] - 1, st[i], &o) || !ampc_add_ok(o, kern[i], &o))
            return overflow(g, n, "(in - 1) * stride + kernel");
        o -= pads[i] + pads[k + i];
        if (o < 0 || (x->shape.dims[2 + i] == 0))
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "output size along spatial dim %d is %lld, must be positive: input 0 "
                             "'%s' is %s, pads %lld and %lld",
                             i, (long long)o, x->name, shp(x, sx), (long long)pads[i],
                             (long long)pads[k + i]);
        y.dims[2 + i] = o;
    }
    if (given(n, 2)) {
        int64_t os[AMPC_MAX_RANK];
        int32_t cnt = ampc_infer_const_ints(g, n, 2, os, AMPC_MAX_RANK);
        if (cnt < 0) return AMPC_E_SHAPE;
        ampc_shape want = {cnt, {0}};
        for (int32_t i = 0; i < cnt; i++) want.dims[i] = os[i];
        if (cnt != r || os[0] != x->shape.dims[0] || os[1] != x->shape.dims[1])
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 2 '%s' (output_shape) %s must have %d entries starting with "
                             "the N and C of input 0 '%s' %s",
                             n->inputs[2]->name, ampc_shape_str(&want, si, sizeof si), r, x->name,
                             shp(x, sx));
        for (int32_t i = 2; i < r; i++) {
            if (os[i] < 0)
                return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                                 "input 2 '%s' (output_shape) %s has a "
                                 "negative dim",
                                 n->inputs[2]->name, ampc_shape_str(&want, si, sizeof si));
            y.dims[i] = os[i];
        }
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* MaxRoiPool: X [N, C, H, W] and rois [R, 5] (batch index, x1, y1, x2, y2) -> [R, C,
 * pooled_shape[0], pooled_shape[1]]; spatial_scale maps roi coordinates onto X. */
ampc_status ampc_infer_max_roi_pool(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *rois = n->inputs[1];
    char sx[AMPC_SHAPE_STR_MAX], sr[AMPC_SHAPE_STR_MAX];
    int64_t pooled[2];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT) || !ampc_infer_same_dtype(g, n, 0, 1))
        return AMPC_E_DTYPE;
    if (!ampc_ir_attr_find(n, "pooled_shape"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'pooled_shape' is required ([pooled_height, pooled_width])");
    if (!read_ints(g, n, "pooled_shape", 2, 1, 1, pooled)) return AMPC_E_ATTR;
    if (x->shape.rank != 4)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' must be 4-D [N, C, H, W], got %s",
                         x->name, shp(x, sx));
    if (rois->shape.rank != 2 || rois->shape.dims[1] != 5)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must be [R, 5] (batch index, x1, y1, x2, y2), got %s",
                         rois->name, shp(rois, sr));
    ampc_shape y = {4, {rois->shape.dims[0], x->shape.dims[1], pooled[0], pooled[1]}};
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* AffineGrid: theta [N, 2, 3] with size (constant input 1) [N, C, H, W] -> grid [N, H, W, 2], or
 * theta [N, 3, 4] with size [N, C, D, H, W] -> [N, D, H, W, 3]. */
ampc_status ampc_infer_affine_grid(ampc_graph *g, ampc_node *n) {
    const ampc_value *th = n->inputs[0];
    char st[AMPC_SHAPE_STR_MAX];
    int64_t sz[6], flag;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (!read_flag(g, n, "align_corners", 0, &flag)) return AMPC_E_ATTR;
    int32_t cnt = ampc_infer_const_ints(g, n, 1, sz, 5);
    if (cnt < 0) return AMPC_E_SHAPE;
    if (cnt != 4 && cnt != 5)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' (size) must hold [N, C, H, W] or [N, C, D, H, W], got %d "
                         "entries",
                         n->inputs[1]->name, cnt);
    int32_t k = cnt - 2; /* spatial dims: 2 or 3 */
    if (th->shape.rank != 3 || th->shape.dims[0] != sz[0] || th->shape.dims[1] != k ||
        th->shape.dims[2] != k + 1)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' (theta) must be [%lld, %d, %d] for the %d-D size given by "
                         "input 1, got %s",
                         th->name, (long long)sz[0], k, k + 1, k, shp(th, st));
    for (int32_t i = 2; i < cnt; i++)
        if (sz[i] < 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 1 '%s' (size) entry %d is negative: %lld",
                             n->inputs[1]->name, i, (long long)sz[i]);
    ampc_shape y = {k + 2, {sz[0]}};
    for (int32_t i = 0; i < k; i++) y.dims[1 + i] = sz[2 + i];
    y.dims[k + 1] = k;
    ampc_infer_set(n, 0, th->dtype, &y);
    return AMPC_OK;
}
