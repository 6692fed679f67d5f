/*
 * resize.c — reference kernels for resampling: Resize and Upsample (one separable interpolation
 * core), GridSample, AffineGrid, RoiAlign, MaxRoiPool and MaxUnpool. They follow the ONNX
 * reference implementation (onnx/reference/ops) step for step, including its conventions at the
 * edges:
 *
 *   Resize: each axis's tap table (ir/resize.h, which code generation bakes into its kernels
 *   too: input positions and weights of every output coordinate, and tf_crop_and_resize's
 *   extrapolation) is built once; axes interpolate independently, so an output element is the
 *   sum over the product of the per-axis taps (extrapolation_value where any axis
 *   extrapolates), and the cost is (output elements) x (taps per output element).
 *
 * Arithmetic is double throughout; the results round once to the output dtype (integer outputs
 * truncate, as numpy's astype does).
 */
#include "ref.h"

#include "ir/resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Resize and Upsample (the taps: ir/resize.h) ------------------------------------------ */

/* The separable resize of x into y with per-axis scales and roi (starts, ends). */
static ampc_status resize_core(ampc_graph *g, const ampc_node *n, const ampc_resize_cfg *c,
                               const ampc_tensor *x, ampc_tensor *y, const double *scale,
                               const double *roi_s, const double *roi_e) {
    int32_t r = x->shape.rank;
    ampc_resize_axis taps[AMPC_MAX_RANK];
    memset(taps, 0, sizeof taps);
    ampc_status st = AMPC_OK;
    for (int32_t d = 0; d < r && !st; d++) {
        if (!ampc_resize_scale_ok(c, scale[d]))
            st = AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                           "antialiased downsampling by %g along axis %d needs more than %d taps",
                           scale[d], d, AMPC_RESIZE_MAX_TAPS);
        else if (!ampc_resize_axis_build(c, x->shape.dims[d], y->shape.dims[d], scale[d],
                                         roi_s[d], roi_e[d], &taps[d]))
            st = AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory building the resize taps");
    }
    int64_t count = ampc_shape_numel(&y->shape), xs[AMPC_MAX_RANK], oc[AMPC_MAX_RANK] = {0};
    ampc_ref_strides(&x->shape, xs);
    for (int64_t e = 0; e < count && !st; e++) {
        bool ex = false;
        for (int32_t d = 0; d < r; d++) ex |= taps[d].extrap[oc[d]];
        double acc = 0;
        if (ex) {
            acc = c->extrapolation;
        } else {
            int32_t tc[AMPC_MAX_RANK] = {0};
            bool empty = false;
            for (int32_t d = 0; d < r; d++) empty |= taps[d].cnt[oc[d]] == 0;
            while (!empty) {
                double w = 1;
                int64_t off = 0;
                for (int32_t d = 0; d < r; d++) {
                    int64_t at = oc[d] * taps[d].per + tc[d];
                    w *= taps[d].w[at];
                    off += taps[d].idx[at] * xs[d];
                }
                acc += w * ampc_ref_load_f64(x->data, x->dtype, off);
                int32_t d = r - 1;
                for (; d >= 0; d--) {
                    if (++tc[d] < taps[d].cnt[oc[d]]) break;
                    tc[d] = 0;
                }
                if (d < 0) break;
            }
        }
        ampc_ref_store_f64(y->data, y->dtype, e, acc);
        for (int32_t d = r - 1; d >= 0; d--) {
            if (++oc[d] < y->shape.dims[d]) break;
            oc[d] = 0;
        }
    }
    for (int32_t d = 0; d < r; d++) ampc_resize_axis_free(&taps[d]);
    return st;
}

ampc_status ampc_ref_resize(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    const ampc_tensor *roi = n->n_inputs > 1 ? in[1] : NULL, *sc = n->n_inputs > 2 ? in[2] : NULL;
    const ampc_tensor *sz = n->n_inputs > 3 ? in[3] : NULL;
    if (roi && !ampc_shape_numel(&roi->shape)) roi = NULL;
    if (sc && !ampc_shape_numel(&sc->shape)) sc = NULL;
    const ampc_resize_cfg c = ampc_resize_cfg_of(g, n, sc != NULL);
    int32_t ax[AMPC_MAX_RANK];
    double scale[AMPC_MAX_RANK], rs[AMPC_MAX_RANK], re[AMPC_MAX_RANK];
    const ampc_resize_operand ro = {roi ? roi->data : NULL, roi ? roi->dtype : AMPC_DTYPE_F32};
    const ampc_resize_operand so = {sc ? sc->data : NULL, sc ? sc->dtype : AMPC_DTYPE_F32};
    const ampc_resize_operand zo = {sz ? sz->data : NULL, sz ? sz->dtype : AMPC_DTYPE_I64};
    (void)ampc_resize_scales(n, x->shape.rank, x->shape.dims, ro, so, zo, scale, rs, re, ax);
    return resize_core(g, n, &c, x, out[0], scale, rs, re);
}

/* Upsample: asymmetric coordinates; nearest rounds down (the opset 7-9 semantics). */
ampc_status ampc_ref_upsample(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    const ampc_resize_cfg c = ampc_resize_cfg_of(g, n, true);
    const int32_t r = x->shape.rank;
    double scale[AMPC_MAX_RANK], rs[AMPC_MAX_RANK], re[AMPC_MAX_RANK];
    const ampc_tensor *s = n->n_inputs > 1 ? in[1] : NULL;
    const ampc_resize_operand so = {s ? s->data : NULL, s ? s->dtype : AMPC_DTYPE_F32};
    (void)ampc_upsample_scales(n, r, so, scale); /* inference checked it has them */
    for (int32_t d = 0; d < r; d++) rs[d] = 0, re[d] = 1;
    return resize_core(g, n, &c, x, out[0], scale, rs, re);
}

/* ---- GridSample ----------------------------------------------------------------------------- */


/* Reflects x into [lo, hi] by the nearer border until it lies inside (the ONNX reference's
 * _gs_reflect). */
static double gs_reflect(double x, double lo, double hi) {
    double rng = hi - lo;
    if (rng <= 0) return lo;
    if (x < lo) {
        double dx = lo - x, k = trunc(dx / rng), r = dx - k * rng;
        return fmod(k, 2) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, k = trunc(dx / rng), r = dx - k * rng;
        return fmod(k, 2) == 0 ? hi - r : lo + r;
    }
    return x;
}

/* The input index a tap at integer position i reads along an axis of `dim` entries, or -1 for a
 * zero (padding_mode zeros outside the input). */
static int64_t gs_index(int64_t i, int64_t dim, ampc_grid_pad pad, double lo, double hi) {
    if (pad == AMPC_GRID_ZEROS) return i >= 0 && i < dim ? i : -1;
    if (pad == AMPC_GRID_REFLECTION) i = (int64_t)gs_reflect((double)i, lo, hi);
    return i < 0 ? 0 : i >= dim ? dim - 1 : i;
}

ampc_status ampc_ref_grid_sample(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                 ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *gr = in[1];
    ampc_tensor *y = out[0];
    const ampc_grid_params gp = ampc_grid_params_of(n);
    const bool align = gp.align;
    const int mode = gp.mode;
    const ampc_grid_pad pad = gp.pad;
    int32_t k = x->shape.rank - 2;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], dims[AMPC_MAX_RANK];
    int64_t plane = 1, opix = 1;
    for (int32_t d = 0; d < k; d++) {
        dims[d] = x->shape.dims[2 + d];
        plane *= dims[d];
        opix *= y->shape.dims[2 + d];
    }
    double lo[AMPC_MAX_RANK], hi[AMPC_MAX_RANK];
    for (int32_t d = 0; d < k; d++) {
        lo[d] = align ? 0 : -0.5;
        hi[d] = align ? (double)dims[d] - 1 : (double)dims[d] - 0.5;
    }
    for (int64_t b = 0; b < N; b++)
        for (int64_t p = 0; p < opix; p++) {
            /* Denormalised coordinates (f32 in the reference), x[d] for spatial dim d. */
            double pos[AMPC_MAX_RANK];
            bool lost = false; /* a NaN coordinate, or one no padding brings back */
            for (int32_t d = 0; d < k; d++) {
                double v = ampc_ref_load_f64(gr->data, gr->dtype, (b * opix + p) * k + (k - 1 - d));
                v = align ? (v + 1) / 2 * (double)(dims[d] - 1)
                          : ((v + 1) * (double)dims[d] - 1) / 2;
                v = (double)(float)v;
                if (mode == AMPC_RESIZE_NEAREST)
                    v = k == 3 ? (v >= 0 ? floor(v + 0.5) : ceil(v - 0.5)) : nearbyint(v);
                if (v < lo[d] || v > hi[d]) {
                    if (pad == AMPC_GRID_BORDER)
                        v = v < 0 ? 0 : v > (double)(dims[d] - 1) ? (double)(dims[d] - 1) : v;
                    else if (pad == AMPC_GRID_REFLECTION)
                        v = gs_reflect(v, lo[d], hi[d]);
                }
                /* Beyond 2^40 pixels (inf under zeros padding, NaN under any) no tap can land on
                 * the input: the point reads padding zeros, and the int64 taps stay defined. */
                lost |= !(fabs(v) <= 1099511627776.0);
                pos[d] = v;
            }
            if (lost) {
                for (int64_t c = 0; c < C; c++)
                    ampc_ref_store_f64(y->data, y->dtype, (b * C + c) * opix + p, 0);
                continue;
            }
            /* Per-dim taps: first position, count, weights. */
            int64_t first[AMPC_MAX_RANK];
            double w[AMPC_MAX_RANK][4];
            int32_t cnt = mode == AMPC_RESIZE_NEAREST ? 1 : mode == AMPC_RESIZE_LINEAR ? 2 : 4;
            for (int32_t d = 0; d < k; d++) {
                if (mode == AMPC_RESIZE_NEAREST) {
                    first[d] = (int64_t)pos[d]; /* astype(int32): toward zero */
                    w[d][0] = 1;
                    continue;
                }
                double f = floor(pos[d]), t = pos[d] - f;
                if (mode == AMPC_RESIZE_LINEAR) {
                    first[d] = (int64_t)f;
                    w[d][0] = 1 - t, w[d][1] = t;
                } else {
                    double A = -0.75, q = 1 - t;
                    first[d] = (int64_t)f - 1;
                    w[d][0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
                    w[d][1] = ((A + 2) * t - (A + 3)) * t * t + 1;
                    w[d][2] = ((A + 2) * q - (A + 3)) * q * q + 1;
                    w[d][3] = ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A;
                }
            }
            for (int64_t c = 0; c < C; c++) {
                const int64_t base = (b * C + c) * plane;
                double acc = 0;
                int32_t tc[AMPC_MAX_RANK] = {0};
                for (;;) {
                    double wt = 1;
                    int64_t off = 0;
                    for (int32_t d = 0; d < k && off >= 0; d++) {
                        int64_t i = gs_index(first[d] + tc[d], dims[d], pad, lo[d], hi[d]);
                        wt *= w[d][tc[d]];
                        off = i < 0 ? -1 : off * dims[d] + i;
                    }
                    if (off >= 0) acc += wt * ampc_ref_load_f64(x->data, x->dtype, base + off);
                    int32_t d = k - 1;
                    for (; d >= 0; d--) {
                        if (++tc[d] < cnt) break;
                        tc[d] = 0;
                    }
                    if (d < 0) break;
                }
                ampc_ref_store_f64(y->data, y->dtype, (b * C + c) * opix + p, acc);
            }
        }
    return AMPC_OK;
}

/* ---- RoiAlign ------------------------------------------------------------------------------- */

/* Roi r scaled (v: x1, y1, x2, y2), its bin size (bh x bw) and sampling grid per bin (gh x gw,
 * whole numbers as doubles: sampling_ratio, or adaptive ceil(roi size / bins), which is <= 0
 * for an empty roi and 0 for a roi with a NaN or infinite size: no samples, output 0). */
static void roi_grid(const ampc_tensor *rois, int64_t r, double ss, bool half, int64_t sr,
                     int64_t PH, int64_t PW, double v[4], double *bh, double *bw, double *gh,
                     double *gw) {
    double off = half ? 0.5 : 0;
    for (int i = 0; i < 4; i++)
        v[i] = ampc_ref_load_f64(rois->data, rois->dtype, r * 4 + i) * ss - off;
    double rw = v[2] - v[0], rh = v[3] - v[1];
    if (!half) rw = fmax(rw, 1), rh = fmax(rh, 1);
    *bh = rh / (double)PH, *bw = rw / (double)PW;
    *gh = sr > 0 ? (double)sr : ceil(rh / (double)PH);
    *gw = sr > 0 ? (double)sr : ceil(rw / (double)PW);
    /* a roi of no finite area takes no samples: a grid of 0 by 5e29 would pass the count below
     * and then loop 5e29 times */
    if (!isfinite(rh) || !isfinite(rw) || !(*gh > 0 && *gw > 0)) *gh = *gw = 0;
}

/* RoiAlign: each output bin averages (or takes the max of) a grid of bilinear samples; a sample
 * more than one pixel outside the map counts as 0. The max mode takes, per sample, the largest of
 * its four weighted corner terms, as the ONNX reference (and onnxruntime) do. */
ampc_status ampc_ref_roi_align(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                               ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *rois = in[1], *bi = in[2];
    ampc_tensor *y = out[0];
    const ampc_roi_params rp = ampc_roi_params_of(n);
    const bool is_max = rp.is_max, half = rp.half_pixel;
    const double ss = rp.spatial_scale;
    const int64_t sr = rp.sampling_ratio;
    int64_t R = y->shape.dims[0], C = y->shape.dims[1], PH = y->shape.dims[2],
            PW = y->shape.dims[3];
    int64_t N = x->shape.dims[0], H = x->shape.dims[2], W = x->shape.dims[3];
    /* The work is counted before any is done: a huge roi or sampling_ratio could ask for more
     * samples than any run would finish (2^62 with sampling_ratio = 2^31). */
    double reads = 0;
    for (int64_t r = 0; r < R; r++) {
        double v[4], bh, bw, gh, gw;
        roi_grid(rois, r, ss, half, sr, PH, PW, v, &bh, &bw, &gh, &gw);
        reads += fmax(gh, 0) * fmax(gw, 0) * (double)(C * PH * PW);
    }
    if (!(reads <= AMPC_REF_MAX_SAMPLES))
        return AMPC_FAIL(g, n, AMPC_E_EVAL,
                         "the rois of input 1 '%s' (spatial_scale %g, sampling_ratio %lld) ask for "
                         "%.4g bilinear samples, more than the reference evaluator's limit of "
                         "%.4g (2^32): the roi sizes or sampling_ratio are out of proportion to the "
                         "%lld x %lld map", n->inputs[1]->name, ss, (long long)sr, reads,
                         AMPC_REF_MAX_SAMPLES, (long long)H, (long long)W);
    for (int64_t r = 0; r < R; r++) {
        int64_t b = ampc_ref_load_i64(bi->data, bi->dtype, r);
        if (b < 0 || b >= N)
            return AMPC_FAIL(g, n, AMPC_E_EVAL,
                             "batch index %lld (element %lld of input 2 '%s') is out of range for "
                             "the %lld images of input 0 '%s'",
                             (long long)b, (long long)r, n->inputs[2]->name, (long long)N,
                             n->inputs[0]->name);
        double v[4], bh, bw, ghd, gwd;
        roi_grid(rois, r, ss, half, sr, PH, PW, v, &bh, &bw, &ghd, &gwd);
        int64_t gh = (int64_t)ghd, gw = (int64_t)gwd; /* in range: the count above bounds them */
        double count = fmax(ghd * gwd, 1);
        for (int64_t c = 0; c < C; c++) {
            int64_t base = (b * C + c) * H * W;
            for (int64_t ph = 0; ph < PH; ph++)
                for (int64_t pw = 0; pw < PW; pw++) {
                    double acc = 0;
                    bool have = false;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double yy = v[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double xx =
                                v[0] + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            double t[4] = {0, 0, 0, 0};
                            /* NaN (an inf roi) counts as outside, like the far points */
                            if (yy >= -1.0 && yy <= (double)H && xx >= -1.0 && xx <= (double)W) {
                                double sy = fmax(yy, 0), sx = fmax(xx, 0);
                                int64_t y0 = (int64_t)sy, x0 = (int64_t)sx, y1, x1;
                                if (y0 >= H - 1)
                                    y1 = y0 = H - 1, sy = (double)y0;
                                else
                                    y1 = y0 + 1;
                                if (x0 >= W - 1)
                                    x1 = x0 = W - 1, sx = (double)x0;
                                else
                                    x1 = x0 + 1;
                                double ly = sy - (double)y0, lx = sx - (double)x0;
                                double hy = 1 - ly, hx = 1 - lx;
                                t[0] = hy * hx *
                                       ampc_ref_load_f64(x->data, x->dtype, base + y0 * W + x0);
                                t[1] = hy * lx *
                                       ampc_ref_load_f64(x->data, x->dtype, base + y0 * W + x1);
                                t[2] = ly * hx *
                                       ampc_ref_load_f64(x->data, x->dtype, base + y1 * W + x0);
                                t[3] = ly * lx *
                                       ampc_ref_load_f64(x->data, x->dtype, base + y1 * W + x1);
                            }
                            if (is_max) {
                                double m = fmax(fmax(t[0], t[1]), fmax(t[2], t[3]));
                                acc = have ? fmax(acc, m) : m;
                                have = true;
                            } else {
                                acc += t[0] + t[1] + t[2] + t[3];
                            }
                        }
                    }
                    if (!is_max) acc /= count;
                    ampc_ref_store_f64(y->data, y->dtype, ((r * C + c) * PH + ph) * PW + pw, acc);
                }
        }
    }
    return AMPC_OK;
}

/* ---- MaxUnpool ------------------------------------------------------------------------------ */

/* MaxUnpool: each input element goes to the flat position its index names in the unpooled
 * tensor of the window's natural shape ((in - 1) * stride - pads + kernel per spatial dim); that
 * tensor sits at the origin of the output (output_shape may make it larger). */
ampc_status ampc_ref_max_unpool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *iv = in[1];
    ampc_tensor *y = out[0];
    const int32_t r = x->shape.rank;
    const ampc_shape nat = ampc_unpool_shape(n, &x->shape);
    int64_t total = ampc_shape_numel(&nat), cntx = ampc_shape_numel(&x->shape);
    int64_t ys[AMPC_MAX_RANK];
    ampc_ref_strides(&y->shape, ys);
    size_t esz = ampc_dtype_size(x->dtype);
    for (int64_t e = 0; e < cntx; e++) {
        int64_t p = ((const int64_t *)iv->data)[e];
        if (p < 0 || p >= total)
            return AMPC_FAIL(g, n, AMPC_E_EVAL,
                             "index %lld (element %lld of input 1 '%s') is out of range for the "
                             "%lld elements of the unpooled tensor (valid: 0 to %lld)",
                             (long long)p, (long long)e, n->inputs[1]->name, (long long)total,
                             (long long)total - 1);
        int64_t off = 0;
        bool inside = true;
        for (int32_t d = r - 1; d >= 0; d--) {
            int64_t c = p % nat.dims[d];
            p /= nat.dims[d];
            inside &= c < y->shape.dims[d];
            off += c * ys[d];
        }
        if (inside) ampc_ref_copy_elem(y->data, off, x->data, e, esz);
    }
    return AMPC_OK;
}

/* ---- MaxRoiPool ----------------------------------------------------------------------------- */

/* MaxRoiPool (Caffe's ROI pooling, as onnxruntime implements it): the roi corners are scaled and
 * rounded (half away from zero) to whole pixels; the roi, at least 1 x 1, is split into
 * pooled_h x pooled_w bins of fractional size, bin i covering [floor(i * size), ceil((i + 1) *
 * size)) clipped to the map; each output is the max over its bin, 0 for an empty bin. */
ampc_status ampc_ref_max_roi_pool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                  ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *rois = in[1];
    ampc_tensor *y = out[0];
    const double ss = ampc_roi_params_of(n).spatial_scale;
    int64_t R = y->shape.dims[0], C = y->shape.dims[1], PH = y->shape.dims[2],
            PW = y->shape.dims[3];
    int64_t N = x->shape.dims[0], H = x->shape.dims[2], W = x->shape.dims[3];
    for (int64_t r = 0; r < R; r++) {
        double v[5];
        for (int i = 0; i < 5; i++) v[i] = ampc_ref_load_f64(rois->data, rois->dtype, r * 5 + i);
        /* Rounded coordinates beyond +-2^52 (or NaN) have no pixel to name. */
        bool finite = fabs(v[0]) < 4.5e15;
        for (int i = 1; i < 5; i++) finite &= fabs(v[i] * ss) < 4.5e15;
        if (!finite || v[0] < 0 || v[0] >= (double)N || v[0] != floor(v[0]))
            return AMPC_FAIL(g, n, AMPC_E_EVAL,
                             "roi %lld of input 1 '%s' is (%g, %g, %g, %g, %g): its batch index "
                             "must be a whole number in [0, %lld) and its corners finite",
                             (long long)r, n->inputs[1]->name, v[0], v[1], v[2], v[3], v[4],
                             (long long)N);
        int64_t b = (int64_t)v[0];
        int64_t x1 = (int64_t)round(v[1] * ss), y1 = (int64_t)round(v[2] * ss);
        int64_t x2 = (int64_t)round(v[3] * ss), y2 = (int64_t)round(v[4] * ss);
        double rh = (double)AMPC_MAX(y2 - y1 + 1, 1), rw = (double)AMPC_MAX(x2 - x1 + 1, 1);
        double bh = rh / (double)PH, bw = rw / (double)PW;
        for (int64_t ph = 0; ph < PH; ph++) {
            int64_t hs = (int64_t)floor((double)ph * bh) + y1;
            int64_t he = (int64_t)ceil((double)(ph + 1) * bh) + y1;
            hs = AMPC_MIN(AMPC_MAX(hs, 0), H);
            he = AMPC_MIN(AMPC_MAX(he, 0), H);
            for (int64_t pw = 0; pw < PW; pw++) {
                int64_t ws = (int64_t)floor((double)pw * bw) + x1;
                int64_t we = (int64_t)ceil((double)(pw + 1) * bw) + x1;
                ws = AMPC_MIN(AMPC_MAX(ws, 0), W);
                we = AMPC_MIN(AMPC_MAX(we, 0), W);
                bool empty = he <= hs || we <= ws;
                for (int64_t c = 0; c < C; c++) {
                    int64_t base = (b * C + c) * H * W;
                    double m = empty ? 0 : -INFINITY;
                    for (int64_t h = hs; h < he; h++)
                        for (int64_t w = ws; w < we; w++) {
                            double e = ampc_ref_load_f64(x->data, x->dtype, base + h * W + w);
                            if (e > m || isnan(e)) m = e;
                        }
                    ampc_ref_store_f64(y->data, y->dtype, ((r * C + c) * PH + ph) * PW + pw, m);
                }
            }
        }
    }
    return AMPC_OK;
}

/* ---- AffineGrid ----------------------------------------------------------------------------- */

/* Base coordinate i of an axis of `size` points in [-1, 1]: the pixel centres with align_corners
 * (-1 + 2i / (size - 1); a single point sits at -1, as torch.linspace gives), otherwise the
 * centres of `size` equal cells (-1 + (2i + 1) / size). */
static double grid_base(int64_t i, int64_t size, bool align) {
    if (align) return size > 1 ? -1.0 + 2.0 * (double)i / (double)(size - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)size;
}

/* AffineGrid: grid[n, (d,) h, w] = theta[n] @ (x, y, (z,) 1), with x running along W, y along H
 * and z along D; the last output dim holds (x, y(, z)). */
ampc_status ampc_ref_affine_grid(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                 ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *th = in[0];
    ampc_tensor *y = out[0];
    const bool align = ampc_grid_params_of(n).align;
    int32_t k = y->shape.rank - 2;
    int64_t N = y->shape.dims[0], pts = 1, c[3] = {0, 0, 0}, o = 0;
    for (int32_t i = 0; i < k; i++) pts *= y->shape.dims[1 + i];
    for (int64_t b = 0; b < N; b++) {
        memset(c, 0, sizeof c);
        for (int64_t p = 0; p < pts; p++) {
            double hom[4]; /* (x, y, z, 1): coordinate of the last spatial dim first */
            for (int32_t i = 0; i < k; i++)
                hom[i] = grid_base(c[k - 1 - i], y->shape.dims[k - i], align);
            hom[k] = 1;
            for (int32_t r = 0; r < k; r++) {
                double acc = 0;
                for (int32_t j = 0; j <= k; j++)
                    acc += ampc_ref_load_f64(th->data, th->dtype, (b * k + r) * (k + 1) + j) *
                           hom[j];
                ampc_ref_store_f64(y->data, y->dtype, o++, acc);
            }
            for (int32_t i = k - 1; i >= 0; i--) { /* next (d,) h, w point */
                if (++c[i] < y->shape.dims[1 + i]) break;
                c[i] = 0;
            }
        }
    }
    return AMPC_OK;
}
