/*
 * lower_resize.c — GPU lowering of the resampling family (ir/infer/resize.c, ir/ref/resize.c):
 * Resize, Upsample, RoiAlign, MaxRoiPool and MaxUnpool (LOWER_POOL rows, dispatched from
 * lower_conv.c's pools) and GridSample (a LOWER_INDEX row, dispatched from lower_index.c). Every
 * kernel is generated with its geometry baked in and mirrors the reference kernel, edge cases
 * included:
 *
 *   Resize/Upsample  the per-axis tap tables (input index and weight of each tap of each output
 *                    coordinate, and tf_crop_and_resize's extrapolation flags) are computed by
 *                    ir/resize.h's ampc_resize_axis_build, the reference's own, in double, and
 *                    baked into the kernel as static tables; the kernel sums the product of the
 *                    taps of the resized axes in the reference's order (axes that do not change
 *                    are read directly). Integer outputs compute in double without fused
 *                    multiply-adds, so they truncate where the reference truncates; floats in
 *                    f32 (f64 for f64).
 *   RoiAlign,        one thread per output bin, in double as the reference; a batch index or roi
 *   MaxRoiPool       the reference rejects (out of range, not finite) gives 0 on the GPU, where
 *                    a kernel cannot raise an error.
 *   MaxUnpool        a memset of the output, then one thread per input element scattering it to
 *                    the position its index names (indices out of range are skipped; if two
 *                    elements name one position, which one lands is unspecified, where the
 *                    reference keeps the last).
 *   GridSample       one thread per output element (n, c, o1..ok), any number k of spatial dims.
 *                    The coordinates, their padding (border clamp, reflection) and the tap
 *                    weights (nearest, linear, cubic with A = -0.75) are computed in double
 *                    exactly as the reference does (including its rounding of the denormalised
 *                    coordinate to f32); the weighted sum over the cnt^k taps accumulates in the
 *                    compute type (f32 for f32/f16/bf16, f64 for f64), skipping taps outside the
 *                    input under padding_mode zeros. A point the reference gives up on (NaN, or
 *                    more than 2^40 pixels out after padding) reads 0 here too, before any
 *                    coordinate becomes an integer; the reflection's remainder is computed
 *                    without contraction into an fma, as the reference's separate steps (it
 *                    matters for far points).
 */
#include "codegen.h"
#include "ir/ref/ref.h"
#include "ir/resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Resize and Upsample --------------------------------------------------------------------- */

/* The configuration and the taps are ir/resize.h's, as the reference evaluator's. */
typedef ampc_resize_cfg rs_cfg;
typedef ampc_resize_axis rs_axis;

/* Emits `static const <type> <name>[count] = {...};`, 16 entries a line. `fmt` formats one
 * entry of vals (int64_t, int32_t, double or bool, by `kind`). */
typedef enum { TBL_I32, TBL_I64, TBL_F32, TBL_F64, TBL_BOOL } tbl_kind;

static void emit_table(ampc_cg_kernel *k, const char *name, tbl_kind kind, const void *vals,
                       int64_t count, int64_t scale) {
    static const char *const types[] = {"int", "long long", "float", "double", "bool"};
    ampc_cg_line(k, "static const %s %s[%lld] = {", types[kind], name, (long long)(count ? count : 1));
    ampc_strbuf sb = {0};
    for (int64_t i = 0; i < count; i++) {
        switch (kind) {
        case TBL_I32: ampc_sb_printf(&sb, "%d,", ((const int32_t *)vals)[i]); break;
        case TBL_I64:
            ampc_sb_printf(&sb, "%lldLL,", (long long)(((const int64_t *)vals)[i] * scale));
            break;
        case TBL_F32:
            ampc_sb_printf(&sb, "%s,", ampc_cg_f32((float)((const double *)vals)[i]).s);
            break;
        case TBL_F64: ampc_sb_printf(&sb, "%s,", ampc_cg_f64(((const double *)vals)[i]).s); break;
        case TBL_BOOL: ampc_sb_puts(&sb, ((const bool *)vals)[i] ? "1," : "0,"); break;
        }
        if (i % 16 == 15 || i == count - 1) {
            ampc_cg_line(k, "    %s", sb.data);
            ampc_sb_free(&sb);
        }
    }
    if (!count) ampc_cg_line(k, "    0");
    ampc_cg_line(k, "};");
}

/* The separable resampling of x into y by the per-axis scales and roi. With roi_rt (a
 * tf_crop_and_resize roi known only at run time), the axes it covers (roi_pos[d] >= 0: their
 * entry in it; na entries each for starts and ends) compute their taps in the kernel
 * (ampc_resize_taps, ir/resize_taps.h) instead of reading tables. */
static ampc_status resize_kernel(ampc_cg *cg, const ampc_node *n, const rs_cfg *c,
                                 const double *scale, const double *roi_s, const double *roi_e,
                                 const ampc_value *roi_rt, const int32_t *roi_pos, int32_t na) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int32_t r = x->shape.rank;
    for (int32_t d = 0; d < r; d++)
        if (!ampc_resize_scale_ok(c, scale[d])) {
            char why[160];
            snprintf(why, sizeof why, "for antialiased downsampling by %g along axis %d (more than %d "
                     "taps)", scale[d], d, AMPC_RESIZE_MAX_TAPS);
            return ampc_cg_unsupported(cg, n, why);
        }
    rs_axis ax[AMPC_MAX_RANK];
    bool rt[AMPC_MAX_RANK]; /* taps computed at run time */
    memset(ax, 0, sizeof ax);
    for (int32_t d = 0; d < r; d++) {
        if (!ampc_resize_axis_build(c, x->shape.dims[d], y->shape.dims[d], scale[d], roi_s[d],
                                    roi_e[d], &ax[d])) {
            for (int32_t e = 0; e < d; e++) ampc_resize_axis_free(&ax[e]);
            return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_OOM,
                             "out of host memory building the resize taps");
        }
        rt[d] = roi_rt && roi_pos[d] >= 0;
        if (rt[d]) ax[d].identity = ax[d].any_extrap = false;
    }
    int64_t xs[AMPC_MAX_RANK];
    ampc_cg_row_strides(x->shape.dims, r, xs);
    /* Integer outputs follow the reference's double arithmetic exactly (they truncate); floats
     * compute in f32, f64 in f64. */
    bool exact = !ampc_dtype_is_float(y->dtype);
    bool dbl = exact || y->dtype == AMPC_DTYPE_F64;
    const char *ct = dbl ? "double" : "float";
    int64_t count = ampc_ir_numel(y);

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false);
    const char *proi = roi_rt ? ampc_cg_param(k, roi_rt, false) : NULL;
    const char *py = ampc_cg_param(k, y, true);
    /* The tap tables of the axes that resample (input indices premultiplied by the stride). */
    for (int32_t d = 0; d < r; d++) {
        if (ax[d].identity || rt[d]) continue;
        char name[32];
        int64_t out = y->shape.dims[d];
        snprintf(name, sizeof name, "tc%d_", d);
        emit_table(k, name, TBL_I32, ax[d].cnt, out, 1);
        snprintf(name, sizeof name, "ti%d_", d);
        emit_table(k, name, TBL_I64, ax[d].idx, out * ax[d].per, xs[d]);
        snprintf(name, sizeof name, "tw%d_", d);
        emit_table(k, name, dbl ? TBL_F64 : TBL_F32, ax[d].w, out * ax[d].per, 1);
        if (ax[d].any_extrap) {
            snprintf(name, sizeof name, "te%d_", d);
            emit_table(k, name, TBL_BOOL, ax[d].extrap, out, 1);
        }
    }
    ampc_cg_grid_loop(k, count);
    ampc_cg_split_trailing(k, y->shape.dims, r, r);
    ampc_strbuf sb = {0};
    for (int32_t d = 0; d < r; d++)
        if (!ax[d].identity && ax[d].any_extrap)
            ampc_sb_printf(&sb, "%ste%d_[o%d_]", sb.len ? " || " : "", d, d);
    /* Run-time taps: the input coordinate from the roi (as ampc_resize_axis_build), then the
     * taps. */
    for (int32_t d = 0; d < r; d++) {
        if (!rt[d]) continue;
        int64_t in = x->shape.dims[d];
        double ow = c->f32_scales ? (double)(float)(scale[d] * (double)in) : scale[d] * (double)in;
        ampc_cg_line(k, "long long ri%d_[%d];", d, ax[d].per);
        ampc_cg_line(k, "double rw%d_[%d];", d, ax[d].per);
        ampc_cg_line(k, "const double rs%d_ = ampc::cvt<double>(%s[%d]), "
                        "rl%d_ = ampc::cvt<double>(%s[%d]) - rs%d_;",
                     d, proi, roi_pos[d], d, proi, na + roi_pos[d], d);
        if (ow == 1)
            ampc_cg_line(k, "double xo%d_ = rl%d_ * %lld.0 / 2;", d, d, (long long)(in - 1));
        else
            ampc_cg_line(k, "double xo%d_ = (double)o%d_ * rl%d_ * %lld.0 / %s;", d, d, d,
                         (long long)(in - 1), ampc_cg_f64(ow - 1).s);
        ampc_cg_line(k, "xo%d_ = ampc::add_rn(xo%d_, ampc::mul_rn(rs%d_, %lld.0));", d, d, d,
                     (long long)(in - 1));
        ampc_cg_line(k, "const int rn%d_ = ampc_resize_taps(%d, %d, %s, %s, %s, %s, %lldLL, "
                        "xo%d_, ri%d_, rw%d_);",
                     d, c->mode, c->nearest, ampc_cg_f64(c->cubic_a).s,
                     c->exclude_outside ? "true" : "false", c->antialias ? "true" : "false",
                     ampc_cg_f64(scale[d]).s, (long long)in, d, d, d);
        ampc_sb_printf(&sb, "%s!(xo%d_ >= 0 && xo%d_ <= %lld.0)", sb.len ? " || " : "", d, d,
                       (long long)(in - 1));
    }
    const char *yt = ampc_cg_ctype(y->dtype);
    const ampc_cg_literal evl = ampc_cg_f64(c->extrapolation);
    const char *ev = evl.s;
    if (sb.len) {
        ampc_cg_open(k, "if (%s)", sb.data);
        ampc_cg_line(k, "%s[i] = ampc::cv::store_f64<%s>(%s);", py, yt, ev);
        ampc_cg_line(k, "continue;");
        ampc_cg_close(k);
    }
    ampc_sb_free(&sb);
    for (int32_t d = 0; d < r; d++)
        if (ax[d].identity) ampc_sb_printf(&sb, " + o%d_ * %lldLL", d, (long long)xs[d]);
    ampc_cg_line(k, "const long long b_ = 0%s;", sb.data ? sb.data : "");
    ampc_sb_free(&sb);
    ampc_cg_line(k, "%s acc_ = 0;", ct);
    /* Nested tap loops over the resampling axes, the weight product built in axis order. */
    int32_t opened = 0, prev = -1;
    for (int32_t d = 0; d < r; d++) {
        if (ax[d].identity) continue;
        char wv[64], iv[64];
        if (rt[d]) {
            ampc_cg_open(k, "for (int j%d_ = 0; j%d_ < rn%d_; j%d_++)", d, d, d, d);
            snprintf(wv, sizeof wv, "(%s)rw%d_[j%d_]", ct, d, d);
            snprintf(iv, sizeof iv, "ri%d_[j%d_] * %lldLL", d, d, (long long)xs[d]);
        } else {
            ampc_cg_open(k, "for (int j%d_ = 0; j%d_ < tc%d_[o%d_]; j%d_++)", d, d, d, d, d);
            ampc_cg_line(k, "const long long a%d_ = o%d_ * %dLL + j%d_;", d, d, ax[d].per, d);
            snprintf(wv, sizeof wv, "tw%d_[a%d_]", d, d);
            snprintf(iv, sizeof iv, "ti%d_[a%d_]", d, d);
        }
        if (prev < 0) {
            ampc_cg_line(k, "const %s w%d_ = %s;", ct, d, wv);
            ampc_cg_line(k, "const long long x%d_ = b_ + %s;", d, iv);
        } else {
            if (exact) ampc_cg_line(k, "const %s w%d_ = ampc::mul_rn(w%d_, %s);", ct, d, prev, wv);
            else ampc_cg_line(k, "const %s w%d_ = w%d_ * %s;", ct, d, prev, wv);
            ampc_cg_line(k, "const long long x%d_ = x%d_ + %s;", d, prev, iv);
        }
        prev = d;
        opened++;
    }
    if (prev < 0) { /* nothing resamples: a copy */
        ampc_cg_line(k, "acc_ = ampc::cvt<%s>(%s[b_]);", ct, px);
    } else if (exact) {
        ampc_cg_line(k, "acc_ = ampc::cv::madd_rn(acc_, w%d_, ampc::cvt<double>(%s[x%d_]));", prev,
                     px, prev);
    } else {
        ampc_cg_line(k, "acc_ += w%d_ * ampc::cvt<%s>(%s[x%d_]);", prev, ct, px, prev);
    }
    for (int32_t d = 0; d < opened; d++) ampc_cg_close(k);
    if (exact) ampc_cg_line(k, "%s[i] = ampc::cv::store_f64<%s>(acc_);", py, yt);
    else ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(acc_);", py, yt);
    ampc_cg_close(k);
    for (int32_t d = 0; d < r; d++) ampc_resize_axis_free(&ax[d]);
    return ampc_cg_kernel_end(k, count, 256);
}

/* A present, non-empty optional input. */
static const ampc_value *given(const ampc_node *n, int32_t i) {
    return n->n_inputs > i && n->inputs[i] && ampc_ir_numel(n->inputs[i]) ? n->inputs[i] : NULL;
}

static ampc_status lower_resize(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *x = n->inputs[0];
    const ampc_value *roi = given(n, 1), *sc = given(n, 2), *sz = given(n, 3);
    const rs_cfg c = ampc_resize_cfg_of(g, n, sc != NULL);
    /* The roi matters only to tf_crop_and_resize; one known only at run time is read by the
     * kernel. */
    const ampc_value *roi_rt = NULL;
    if (c.coord != AMPC_RESIZE_CROP) roi = NULL;
    else if (roi && !roi->data) roi_rt = roi, roi = NULL;
    if ((sc && !sc->data) || (!sc && (!sz || !sz->data)))
        return ampc_cg_unsupported(cg, n, "without constant scales or sizes");
    const int32_t r = x->shape.rank;
    int32_t ax[AMPC_MAX_RANK], roi_pos[AMPC_MAX_RANK];
    double scale[AMPC_MAX_RANK], rs[AMPC_MAX_RANK], re[AMPC_MAX_RANK];
    const ampc_resize_operand ro = {roi ? roi->data : NULL, roi ? roi->dtype : AMPC_DTYPE_F32};
    const ampc_resize_operand so = {sc ? sc->data : NULL, sc ? sc->dtype : AMPC_DTYPE_F32};
    const ampc_resize_operand zo = {sz ? sz->data : NULL, sz ? sz->dtype : AMPC_DTYPE_I64};
    const int32_t na = ampc_resize_scales(n, r, x->shape.dims, ro, so, zo, scale, rs, re, ax);
    for (int32_t d = 0; d < r; d++) roi_pos[d] = -1;
    for (int32_t k = 0; k < na; k++) roi_pos[ax[k]] = k;
    return resize_kernel(cg, n, &c, scale, rs, re, roi_rt, roi_pos, na);
}

/* Upsample: asymmetric coordinates; nearest rounds down (the opset 7-9 semantics). */
static ampc_status lower_upsample(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *x = n->inputs[0];
    const rs_cfg c = ampc_resize_cfg_of(g, n, true);
    const ampc_value *sv = n->n_inputs > 1 ? n->inputs[1] : NULL;
    const int32_t r = x->shape.rank;
    double scale[AMPC_MAX_RANK], rs[AMPC_MAX_RANK], re[AMPC_MAX_RANK];
    const ampc_resize_operand so = {sv ? sv->data : NULL, sv ? sv->dtype : AMPC_DTYPE_F32};
    if ((sv && !sv->data) || !ampc_upsample_scales(n, r, so, scale))
        return ampc_cg_unsupported(cg, n, "without constant scales");
    for (int32_t d = 0; d < r; d++) {
        rs[d] = 0, re[d] = 1;
    }
    return resize_kernel(cg, n, &c, scale, rs, re, NULL, NULL, 0);
}

/* ---- RoiAlign and MaxRoiPool ----------------------------------------------------------------- */

static ampc_status lower_roi_align(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *rois = n->inputs[1], *bi = n->inputs[2], *y = n->outputs[0];
    const ampc_roi_params rp = ampc_roi_params_of(n);
    const bool is_max = rp.is_max, half = rp.half_pixel;
    const double ss = rp.spatial_scale;
    const int64_t sr = rp.sampling_ratio;
    int64_t C = y->shape.dims[1], PH = y->shape.dims[2], PW = y->shape.dims[3];
    int64_t N = x->shape.dims[0], H = x->shape.dims[2], W = x->shape.dims[3];
    int64_t count = ampc_ir_numel(y);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "roi_align");
    const char *px = ampc_cg_param(k, x, false), *pr = ampc_cg_param(k, rois, false);
    const char *pb = ampc_cg_param(k, bi, false), *py = ampc_cg_param(k, y, true);
    const char *yt = ampc_cg_ctype(y->dtype);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long pw_ = i %% %lldLL, ph_ = (i / %lldLL) %% %lldLL;", (long long)PW,
                 (long long)PW, (long long)PH);
    ampc_cg_line(k, "const long long c_ = (i / %lldLL) %% %lldLL, r_ = i / %lldLL;",
                 (long long)(PW * PH), (long long)C, (long long)(PW * PH * C));
    ampc_cg_line(k, "const long long b_ = (long long)%s[r_];", pb);
    ampc_cg_open(k, "if (b_ < 0 || b_ >= %lldLL)", (long long)N);
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(0.0);", py, yt);
    ampc_cg_line(k, "continue;");
    ampc_cg_close(k);
    ampc_cg_line(k, "double v_[4];");
    ampc_cg_line(k, "for (int j_ = 0; j_ < 4; j_++) v_[j_] = __dsub_rn(__dmul_rn(ampc::cvt<double>(%s[r_ * "
                    "4 + j_]), %s), %s);", pr, ampc_cg_f64(ss).s, half ? "0.5" : "0.0");
    ampc_cg_line(k, "double rw_ = v_[2] - v_[0], rh_ = v_[3] - v_[1];");
    if (!half) ampc_cg_line(k, "rw_ = fmax(rw_, 1.0), rh_ = fmax(rh_, 1.0);");
    ampc_cg_line(k, "const double bh_ = rh_ / %lld.0, bw_ = rw_ / %lld.0;", (long long)PH, (long long)PW);
    /* The sampling grid per bin, as the reference's roi_grid, in double before it becomes a
     * count: none for a roi with a NaN or infinite size or an empty one (either side <= 0: the
     * reference's loops run no sample then, whatever the other side). */
    if (sr > 0) {
        ampc_cg_line(k, "double ghd_ = %lld.0, gwd_ = %lld.0;", (long long)sr, (long long)sr);
    } else {
        ampc_cg_line(k, "double ghd_ = ceil(rh_ / %lld.0), gwd_ = ceil(rw_ / %lld.0);", (long long)PH,
                     (long long)PW);
    }
    ampc_cg_line(k, "if (!(fabs(rh_) <= 1.7976931348623157e308 && fabs(rw_) <= 1.7976931348623157e308) "
                    "|| !(ghd_ > 0 && gwd_ > 0)) ghd_ = gwd_ = 0;");
    /* More samples for this roi alone than the reference evaluates for a whole node (it refuses
     * the node then): a kernel cannot refuse, so the roi's bins are 0, in bounded time. */
    ampc_cg_open(k, "if (ghd_ * gwd_ * %lld.0 > %s)", (long long)(C * PH * PW),
                 ampc_cg_f64(AMPC_REF_MAX_SAMPLES).s);
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(0.0);", py, yt);
    ampc_cg_line(k, "continue;");
    ampc_cg_close(k);
    ampc_cg_line(k, "const long long gh_ = (long long)ghd_, gw_ = (long long)gwd_;");
    ampc_cg_line(k, "const double cnt_ = gh_ * gw_ > 1 ? (double)(gh_ * gw_) : 1.0;");
    ampc_cg_line(k, "const long long base_ = (b_ * %lldLL + c_) * %lldLL;", (long long)C,
                 (long long)(H * W));
    ampc_cg_line(k, "double acc_ = 0;");
    ampc_cg_line(k, "bool have_ = false;");
    ampc_cg_open(k, "for (long long iy_ = 0; iy_ < gh_; iy_++)");
    /* The sample points without contraction into an fma, as the reference's separate steps:
     * for far rois, whether a point lies on the map depends on each rounding. */
    ampc_cg_line(k, "const double yy_ = __dadd_rn(__dadd_rn(v_[1], __dmul_rn((double)ph_, bh_)), "
                    "__dmul_rn((double)iy_ + 0.5, bh_) / (double)gh_);");
    ampc_cg_open(k, "for (long long ix_ = 0; ix_ < gw_; ix_++)");
    ampc_cg_line(k, "const double xx_ = __dadd_rn(__dadd_rn(v_[0], __dmul_rn((double)pw_, bw_)), "
                    "__dmul_rn((double)ix_ + 0.5, bw_) / (double)gw_);");
    ampc_cg_line(k, "double t0_ = 0, t1_ = 0, t2_ = 0, t3_ = 0;");
    /* NaN counts as outside, like the far points */
    ampc_cg_open(k, "if (yy_ >= -1.0 && yy_ <= %lld.0 && xx_ >= -1.0 && xx_ <= %lld.0)", (long long)H,
                 (long long)W);
    ampc_cg_line(k, "double sy_ = fmax(yy_, 0.0), sx_ = fmax(xx_, 0.0);");
    ampc_cg_line(k, "long long y0_ = (long long)sy_, x0_ = (long long)sx_, y1_, x1_;");
    ampc_cg_line(k, "if (y0_ >= %lldLL) { y1_ = y0_ = %lldLL; sy_ = (double)y0_; } else y1_ = y0_ + 1;",
                 (long long)(H - 1), (long long)(H - 1));
    ampc_cg_line(k, "if (x0_ >= %lldLL) { x1_ = x0_ = %lldLL; sx_ = (double)x0_; } else x1_ = x0_ + 1;",
                 (long long)(W - 1), (long long)(W - 1));
    ampc_cg_line(k, "const double ly_ = sy_ - (double)y0_, lx_ = sx_ - (double)x0_;");
    ampc_cg_line(k, "const double hy_ = 1 - ly_, hx_ = 1 - lx_;");
    ampc_cg_line(k, "t0_ = hy_ * hx_ * "
                    "ampc::cvt<double>(%s[base_ + y0_ * %lldLL + x0_]);", px, (long long)W);
    ampc_cg_line(k, "t1_ = hy_ * lx_ * "
                    "ampc::cvt<double>(%s[base_ + y0_ * %lldLL + x1_]);", px, (long long)W);
    ampc_cg_line(k, "t2_ = ly_ * hx_ * "
                    "ampc::cvt<double>(%s[base_ + y1_ * %lldLL + x0_]);", px, (long long)W);
    ampc_cg_line(k, "t3_ = ly_ * lx_ * "
                    "ampc::cvt<double>(%s[base_ + y1_ * %lldLL + x1_]);", px, (long long)W);
    ampc_cg_close(k);
    if (is_max) {
        ampc_cg_line(k, "const double m_ = fmax(fmax(t0_, t1_), fmax(t2_, t3_));");
        ampc_cg_line(k, "acc_ = have_ ? fmax(acc_, m_) : m_;");
        ampc_cg_line(k, "have_ = true;");
    } else {
        ampc_cg_line(k, "acc_ += t0_ + t1_ + t2_ + t3_;");
    }
    ampc_cg_close(k);
    ampc_cg_close(k);
    if (!is_max) ampc_cg_line(k, "acc_ /= cnt_;");
    else ampc_cg_line(k, "(void)have_;");
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(acc_);", py, yt);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

static ampc_status lower_max_roi_pool(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *rois = n->inputs[1], *y = n->outputs[0];
    const double ss = ampc_roi_params_of(n).spatial_scale;
    int64_t C = y->shape.dims[1], PH = y->shape.dims[2], PW = y->shape.dims[3];
    int64_t N = x->shape.dims[0], H = x->shape.dims[2], W = x->shape.dims[3];
    int64_t count = ampc_ir_numel(y);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "max_roi_pool");
    const char *px = ampc_cg_param(k, x, false), *pr = ampc_cg_param(k, rois, false);
    const char *py = ampc_cg_param(k, y, true);
    const char *yt = ampc_cg_ctype(y->dtype);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long pw_ = i %% %lldLL, ph_ = (i / %lldLL) %% %lldLL;", (long long)PW,
                 (long long)PW, (long long)PH);
    ampc_cg_line(k, "const long long c_ = (i / %lldLL) %% %lldLL, r_ = i / %lldLL;",
                 (long long)(PW * PH), (long long)C, (long long)(PW * PH * C));
    ampc_cg_line(k, "double v_[5];");
    ampc_cg_line(k, "for (int j_ = 0; j_ < 5; j_++) v_[j_] = ampc::cvt<double>(%s[r_ * 5 + j_]);", pr);
    /* The reference rejects a roi whose batch index is not a whole number in range or whose
     * scaled corners are not finite; here it pools nothing. */
    ampc_cg_line(k, "bool ok_ = fabs(v_[0]) < 4.5e15 && v_[0] >= 0 && v_[0] < %lld.0 && v_[0] == "
                    "floor(v_[0]);", (long long)N);
    ampc_cg_line(k, "for (int j_ = 1; j_ < 5; j_++) ok_ = ok_ && fabs(v_[j_] * %s) < 4.5e15;",
                 ampc_cg_f64(ss).s);
    ampc_cg_open(k, "if (!ok_)");
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(0.0);", py, yt);
    ampc_cg_line(k, "continue;");
    ampc_cg_close(k);
    ampc_cg_line(k, "const long long b_ = (long long)v_[0];");
    const ampc_cg_literal ssl = ampc_cg_f64(ss);
    ampc_cg_line(k, "const long long x1_ = (long long)round(v_[1] * %s), "
                    "y1_ = (long long)round(v_[2] * %s);", ssl.s, ssl.s);
    ampc_cg_line(k, "const long long x2_ = (long long)round(v_[3] * %s), "
                    "y2_ = (long long)round(v_[4] * %s);", ssl.s, ssl.s);
    ampc_cg_line(k, "const double rh_ = (double)(y2_ - y1_ + 1 > 1 ? y2_ - y1_ + 1 : 1);");
    ampc_cg_line(k, "const double rw_ = (double)(x2_ - x1_ + 1 > 1 ? x2_ - x1_ + 1 : 1);");
    ampc_cg_line(k, "const double bh_ = rh_ / %lld.0, bw_ = rw_ / %lld.0;", (long long)PH, (long long)PW);
    ampc_cg_line(k, "long long hs_ = (long long)floor((double)ph_ * bh_) + y1_;");
    ampc_cg_line(k, "long long he_ = (long long)ceil((double)(ph_ + 1) * bh_) + y1_;");
    ampc_cg_line(k, "long long ws_ = (long long)floor((double)pw_ * bw_) + x1_;");
    ampc_cg_line(k, "long long we_ = (long long)ceil((double)(pw_ + 1) * bw_) + x1_;");
    ampc_cg_line(k, "hs_ = hs_ < 0 ? 0 : hs_ > %lldLL ? %lldLL : hs_;", (long long)H, (long long)H);
    ampc_cg_line(k, "he_ = he_ < 0 ? 0 : he_ > %lldLL ? %lldLL : he_;", (long long)H, (long long)H);
    ampc_cg_line(k, "ws_ = ws_ < 0 ? 0 : ws_ > %lldLL ? %lldLL : ws_;", (long long)W, (long long)W);
    ampc_cg_line(k, "we_ = we_ < 0 ? 0 : we_ > %lldLL ? %lldLL : we_;", (long long)W, (long long)W);
    ampc_cg_line(k, "const bool empty_ = he_ <= hs_ || we_ <= ws_;");
    ampc_cg_line(k, "const long long base_ = (b_ * %lldLL + c_) * %lldLL;", (long long)C,
                 (long long)(H * W));
    ampc_cg_line(k, "double m_ = empty_ ? 0.0 : ampc::cv::neg_inf<double>();");
    ampc_cg_open(k, "for (long long h_ = hs_; h_ < he_; h_++)");
    ampc_cg_open(k, "for (long long w_ = ws_; w_ < we_; w_++)");
    ampc_cg_line(k, "const double e_ = ampc::cvt<double>(%s[base_ + h_ * %lldLL + w_]);", px, (long long)W);
    ampc_cg_line(k, "if (e_ > m_ || e_ != e_) m_ = e_;");
    ampc_cg_close(k);
    ampc_cg_close(k);
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(m_);", py, yt);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- MaxUnpool ------------------------------------------------------------------------------- */

static ampc_status lower_max_unpool(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *iv = n->inputs[1], *y = n->outputs[0];
    const int32_t r = x->shape.rank;
    /* the unpooled tensor's natural shape, at y's origin */
    const ampc_shape nat = ampc_unpool_shape(n, &x->shape);
    ampc_status s = ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, y));
    int64_t count = ampc_ir_numel(x), total = ampc_shape_numel(&nat), ys[AMPC_MAX_RANK];
    if (s != AMPC_OK || count == 0) return s;
    ampc_cg_row_strides(y->shape.dims, r, ys);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "max_unpool");
    const char *px = ampc_cg_param(k, x, false), *pi = ampc_cg_param(k, iv, false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "long long p_ = %s[i];", pi);
    ampc_cg_line(k, "if (p_ < 0 || p_ >= %lldLL) continue;", (long long)total);
    ampc_cg_line(k, "long long off_ = 0;");
    ampc_cg_line(k, "bool inside_ = true;");
    for (int32_t d = r - 1; d >= 0; d--) {
        ampc_cg_line(k, "{ const long long c_ = p_ %% %lldLL; p_ /= %lldLL; inside_ = inside_ && c_ < "
                        "%lldLL; off_ += c_ * %lldLL; }",
                     (long long)nat.dims[d], (long long)nat.dims[d], (long long)y->shape.dims[d],
                     (long long)ys[d]);
    }
    ampc_cg_line(k, "if (inside_) %s[off_] = %s[i];", py, px);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- GridSample ----------------------------------------------------------------------------- */

/* Lowers GridSample: X [N, C, D1..Dk] sampled at grid [N, O1..Ok, k] -> Y [N, C, O1..Ok]. */
static ampc_status lower_grid_sample(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *gr = n->inputs[1], *y = n->outputs[0];
    const int64_t total = ampc_ir_numel(y);
    if (total == 0) return AMPC_OK;
    const ampc_grid_params gp = ampc_grid_params_of(n);
    const bool align = gp.align;
    const int mode = gp.mode;
    const ampc_grid_pad pad = gp.pad;
    const int32_t k = x->shape.rank - 2;
    const int32_t cnt = mode == AMPC_RESIZE_NEAREST ? 1 : mode == AMPC_RESIZE_LINEAR ? 2 : 4;
    const int64_t C = x->shape.dims[1];
    int64_t dims[AMPC_MAX_RANK], plane = 1, opix = 1;
    for (int32_t d = 0; d < k; d++) {
        dims[d] = x->shape.dims[2 + d];
        plane *= dims[d];
        opix *= y->shape.dims[2 + d];
    }
    const char *ct = ampc_cg_compute_type(x->dtype);

    ampc_cg_kernel *kn = ampc_cg_kernel_begin(cg, n, "grid_sample");
    const char *px = ampc_cg_param(kn, x, false), *pg = ampc_cg_param(kn, gr, false);
    const char *py = ampc_cg_param(kn, y, true);
    /* ref/resize.c's gs_reflect, in double */
    ampc_cg_line(kn, "auto refl = [](double v, double lo, double hi) -> double {");
    ampc_cg_line(kn, "    const double rng = hi - lo;");
    ampc_cg_line(kn, "    if (rng <= 0) return lo;");
    ampc_cg_line(kn, "    if (v < lo) { const double dx = lo - v, q = trunc(dx / rng), "
                     "r = __dsub_rn(dx, __dmul_rn(q, rng)); return fmod(q, 2.0) == 0 ? lo + r : hi - r; }");
    ampc_cg_line(kn, "    if (v > hi) { const double dx = v - hi, q = trunc(dx / rng), "
                     "r = __dsub_rn(dx, __dmul_rn(q, rng)); return fmod(q, 2.0) == 0 ? hi - r : lo + r; }");
    ampc_cg_line(kn, "    return v;");
    ampc_cg_line(kn, "};");
    ampc_cg_grid_loop(kn, total);
    ampc_cg_line(kn, "const long long p = i %% %lldLL, bc = i / %lldLL, b = bc / %lldLL;",
                 (long long)opix, (long long)opix, (long long)C);
    ampc_cg_line(kn, "const long long go = (b * %lldLL + p) * %dLL;", (long long)opix, k);
    ampc_cg_line(kn, "const long long base = bc * %lldLL;", (long long)plane);
    if (mode == AMPC_RESIZE_CUBIC) ampc_cg_line(kn, "const double A = -0.75;");
    ampc_cg_line(kn, "bool lost = false;");
    for (int32_t d = 0; d < k; d++) {
        const double dim = (double)dims[d];
        const double lo = align ? 0 : -0.5, hi = align ? dim - 1 : dim - 0.5;
        ampc_cg_line(kn, "double v%d = ampc::cvt<double>(%s[go + %d]);", d, pg, k - 1 - d);
        const ampc_cg_literal L = ampc_cg_f64(lo), H = ampc_cg_f64(hi), D1 = ampc_cg_f64(dim - 1);
        if (align) ampc_cg_line(kn, "v%d = (v%d + 1) / 2 * %s;", d, d, D1.s);
        else ampc_cg_line(kn, "v%d = __dsub_rn(__dmul_rn(v%d + 1, %s), 1.0) / 2;", d, d,
                          ampc_cg_f64(dim).s);
        ampc_cg_line(kn, "v%d = (double)(float)v%d;", d, d);
        if (mode == AMPC_RESIZE_NEAREST) {
            if (k == 3) ampc_cg_line(kn, "v%d = v%d >= 0 ? floor(v%d + 0.5) : ceil(v%d - 0.5);", d, d, d, d);
            else ampc_cg_line(kn, "v%d = rint(v%d);", d, d);
        }
        if (pad == AMPC_GRID_BORDER)
            ampc_cg_line(kn, "if (v%d < %s || v%d > %s) v%d = v%d < 0 ? 0 : v%d > %s ? %s : v%d;",
                         d, L.s, d, H.s, d, d, d, D1.s, D1.s, d);
        else if (pad == AMPC_GRID_REFLECTION)
            ampc_cg_line(kn, "if (v%d < %s || v%d > %s) v%d = refl(v%d, %s, %s);", d, L.s,
                         d, H.s, d, d, L.s, H.s);
        /* Beyond 2^40 pixels (inf under zeros padding or reflection, NaN under any) no tap can
         * land on the input: the point reads padding zeros, and the integer taps stay defined. */
        ampc_cg_line(kn, "lost = lost || !(fabs(v%d) <= 1099511627776.0);", d);
    }
    ampc_cg_open(kn, "if (lost)");
    ampc_cg_line(kn, "ampc::st(%s, i, (%s)0);", py, ct);
    ampc_cg_line(kn, "continue;");
    ampc_cg_close(kn);
    for (int32_t d = 0; d < k; d++) {
        /* taps: first position and weights */
        if (mode == AMPC_RESIZE_NEAREST) {
            ampc_cg_line(kn, "const long long f%d = (long long)v%d;", d, d);
            ampc_cg_line(kn, "const double w%d[1] = {1.0};", d);
        } else if (mode == AMPC_RESIZE_LINEAR) {
            ampc_cg_line(kn, "const double fl%d = floor(v%d), t%d = v%d - fl%d;", d, d, d, d, d);
            ampc_cg_line(kn, "const long long f%d = (long long)fl%d;", d, d);
            ampc_cg_line(kn, "const double w%d[2] = {1 - t%d, t%d};", d, d, d);
        } else {
            ampc_cg_line(kn, "const double fl%d = floor(v%d), t%d = v%d - fl%d, q%d = 1 - t%d;", d,
                         d, d, d, d, d, d);
            ampc_cg_line(kn, "const long long f%d = (long long)fl%d - 1;", d, d);
            ampc_cg_line(kn, "const double w%d[4] = {((A * (t%d + 1) - 5 * A) * (t%d + 1) + 8 * A) * "
                             "(t%d + 1) - 4 * A, ((A + 2) * t%d - (A + 3)) * t%d * t%d + 1, ((A + 2) * "
                             "q%d - (A + 3)) * q%d * q%d + 1, ((A * (q%d + 1) - 5 * A) * (q%d + 1) + "
                             "8 * A) * (q%d + 1) - 4 * A};",
                         d, d, d, d, d, d, d, d, d, d, d, d, d);
        }
    }
    ampc_cg_line(kn, "%s acc = (%s)0;", ct, ct);
    /* the taps: nested loops, the last dim fastest, as the reference's odometer */
    for (int32_t d = 0; d < k; d++) {
        ampc_cg_open(kn, "for (int c%d = 0; c%d < %d; c%d++)", d, d, cnt, d);
        ampc_cg_line(kn, "long long i%d = f%d + c%d;", d, d, d);
        const double dim = (double)dims[d];
        const double lo = align ? 0 : -0.5, hi = align ? dim - 1 : dim - 0.5;
        if (pad == AMPC_GRID_ZEROS) {
            ampc_cg_line(kn, "if (i%d < 0 || i%d >= %lldLL) continue;", d, d, (long long)dims[d]);
        } else {
            if (pad == AMPC_GRID_REFLECTION)
                ampc_cg_line(kn, "i%d = (long long)refl((double)i%d, %s, %s);", d, d,
                             ampc_cg_f64(lo).s, ampc_cg_f64(hi).s);
            ampc_cg_line(kn, "i%d = i%d < 0 ? 0 : i%d >= %lldLL ? %lldLL : i%d;", d, d, d,
                         (long long)dims[d], (long long)(dims[d] - 1), d);
        }
    }
    ampc_strbuf wt = {0}, off = {0};
    ampc_sb_puts(&wt, "1.0");
    ampc_sb_puts(&off, "0LL");
    for (int32_t d = 0; d < k; d++) {
        ampc_sb_printf(&wt, " * w%d[c%d]", d, d);
        ampc_strbuf t = {0};
        ampc_sb_printf(&t, "(%s) * %lldLL + i%d", off.data, (long long)dims[d], d);
        ampc_sb_free(&off);
        off = t;
    }
    ampc_cg_line(kn, "acc += (%s)(%s) * ampc::ld(%s, base + %s);", ct, wt.data, px, off.data);
    ampc_sb_free(&wt);
    ampc_sb_free(&off);
    for (int32_t d = 0; d < k; d++) ampc_cg_close(kn);
    ampc_cg_line(kn, "ampc::st(%s, i, acc);", py);
    ampc_cg_close(kn);
    return ampc_cg_kernel_end(kn, total, 256);
}

/* ---- entry ----------------------------------------------------------------------------------- */

ampc_status ampc_cg_lower_resize(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_RESIZE: return lower_resize(cg, n);
    case AMPC_OP_UPSAMPLE: return lower_upsample(cg, n);
    case AMPC_OP_ROI_ALIGN: return lower_roi_align(cg, n);
    case AMPC_OP_MAX_ROI_POOL: return lower_max_roi_pool(cg, n);
    case AMPC_OP_MAX_UNPOOL: return lower_max_unpool(cg, n);
    case AMPC_OP_GRID_SAMPLE: return lower_grid_sample(cg, n);
    default: return ampc_cg_unsupported(cg, n, "yet; it runs on the reference evaluator only");
    }
}
