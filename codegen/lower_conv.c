/*
 * lower_conv.c — GPU lowering of the convolutions (LOWER_CONV): Conv, ConvTranspose, ConvInteger
 * and QLinearConv; and the pools (LOWER_POOL): MaxPool (with its optional Indices), AveragePool,
 * LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool and Col2Im (ir/ref/conv.c's), whose
 * kind also takes the resampling ops to lower_resize.c.
 *
 * The window (kernel, strides, dilations and the resolved pads, auto_pad included) comes from
 * ampc_infer_conv_geom (ir/infer/conv.c), which places it exactly as the reference kernels do.
 *
 * cuDNN steps (runtime/plan.h's ampc_rt_conv): Conv and ConvTranspose on f32 (with the compile's
 * math option, TF32 by default), f16 and bf16, with 1 to 3 spatial dims, any groups, strides and
 * dilations, the optional bias, when the pads are symmetric (pad_begin == pad_end >= 0: the
 * legacy cuDNN API the runtime uses takes one pad per dim) and, for ConvTranspose, when cuDNN's
 * forward convolution of the output gives back the input's dims (output_padding < stride).
 *
 * ampc.FusedConv (passes/fuse_conv.c) adds the residual z and the ReLU: in the cuDNN step
 * (runtime/prov_cudnn.c fuses them into the convolution call where cuDNN can) or at the end of
 * the direct kernel, before the one rounding to y.
 *
 * Depthwise convolutions (one filter per channel) in f16/bf16, channels last, run a generated
 * kernel of their own (kernels/depthwise.cuh) instead of cuDNN, which is slow on them.
 *
 * Generated direct kernels, one thread per output element (correct, slower), for everything
 * else: asymmetric pads (the memory plan has no temporaries to pad the input into), f64, more
 * than 3 spatial dims or tensors past cuDNN's 2^31-element limit, ConvTranspose shapes cuDNN
 * cannot express (negative or asymmetric pads from output_shape, output_padding >= stride),
 * ConvInteger and QLinearConv. A forward output sums over its window's kernel points (the
 * bounds checks baked per dim, dropped where the window never leaves the input) and, per point,
 * over the group's input channels, in the reference's order; ConvTranspose gathers, per output
 * point, the input points whose scattered kernel reaches it. Floats accumulate in f32 (f64 for
 * f64), the integer convolutions exactly in int64; QLinearConv requantises as ir/ref/quant.c.
 *
 * Pools, each generated with its geometry baked in and mirroring the reference kernel:
 *
 *   window pools     one thread per output; the window's points in row-major order (nested
 *                    loops, bounds checks only along dims where the window can leave the input);
 *                    MaxPool keeps the first maximum and lets NaN win, a window wholly in the
 *                    padding gives the dtype's lowest value and index -1; AveragePool divides by
 *                    the points inside the input, or inside the padded input (count_include_pad),
 *                    never counting what ceil_mode adds past the end padding. The window comes
 *                    from ampc_infer_conv_geom (ir/infer/conv.c).
 *   global pools     one warp per (n, c) row: strided partial sums (or maxima) and a shuffle
 *                    reduction.
 *   Col2Im           gathered: one thread per image element sums the column entries that land
 *                    on it, in the reference's order (block positions ascending).
 */
#include "codegen.h"
#include "ir/conv.h"
#include "ir/infer/infer.h"
#include "ir/ref/ref.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Everything a convolution kernel or step needs about one node. */
typedef struct conv_desc {
    const ampc_value *x, *w, *b, *y;
    const ampc_value *zx, *zw;           /* ConvInteger, QLinearConv: zero points */
    const ampc_value *sx, *sw, *sy, *zy; /* QLinearConv: scales and the output zero point */
    const ampc_value *z;                 /* ampc.FusedConv: the residual added, or NULL */
    bool transpose, integer, qlinear, relu;
    bool channels_last;                  /* x, z, y [N, S..., C], w [M, S..., C/group] */
    ampc_shape wshape;                   /* w's shape in NCHW order */
    int64_t batch, c, m, group;          /* N, input channels, output channels, groups */
    ampc_conv_geom geo;
    int64_t in[AMPC_MAX_RANK], out[AMPC_MAX_RANK];
} conv_desc;

static ampc_status describe(ampc_cg *cg, const ampc_node *n, conv_desc *d) {
    ampc_graph *g = ampc_cg_graph(cg);
    memset(d, 0, sizeof d[0]);
    d->qlinear = n->op == AMPC_OP_QLINEAR_CONV;
    d->integer = d->qlinear || n->op == AMPC_OP_CONV_INTEGER;
    d->transpose = n->op == AMPC_OP_CONV_TRANSPOSE;
    d->x = n->inputs[0];
    d->y = n->outputs[0];
    if (d->qlinear) {
        d->w = n->inputs[3];
        d->sx = n->inputs[1];
        d->zx = n->inputs[2];
        d->sw = n->inputs[4];
        d->zw = n->inputs[5];
        d->sy = n->inputs[6];
        d->zy = n->inputs[7];
        d->b = n->n_inputs > 8 ? n->inputs[8] : NULL;
    } else {
        d->w = n->inputs[1];
        if (d->integer) {
            d->zx = n->n_inputs > 2 ? n->inputs[2] : NULL;
            d->zw = n->n_inputs > 3 ? n->inputs[3] : NULL;
        } else {
            d->b = n->n_inputs > 2 ? n->inputs[2] : NULL;
        }
    }
    if (n->op == AMPC_OP_FUSED_CONV) {
        d->z = n->n_inputs > 3 ? n->inputs[3] : NULL;
        d->relu = ampc_conv_params_of(n).relu;
    }
    /* A channels-last convolution is described through its NCHW shadow (ir/infer/infer.h). */
    ampc_conv_shadow sh;
    d->channels_last = ampc_conv_channels_last(n);
    if (d->channels_last) ampc_conv_shadow_make(n, &sh);
    const ampc_node *nchw = d->channels_last ? &sh.node : n;
    const ampc_shape *xs = &nchw->inputs[0]->shape, *ys = &nchw->outputs[0]->shape;
    d->wshape = nchw->inputs[d->qlinear ? 3 : 1]->shape;
    d->batch = xs->dims[0];
    d->c = xs->dims[1];
    d->m = ys->dims[1];
    d->group = ampc_conv_params_of(n).group;
    if (d->group < 1) d->group = 1;
    ampc_status st = ampc_infer_conv_geom(g, nchw, &d->geo);
    if (st != AMPC_OK) return st;
    for (int32_t i = 0; i < d->geo.k; i++) {
        d->in[i] = xs->dims[2 + i];
        d->out[i] = ys->dims[2 + i];
    }
    return AMPC_OK;
}

/* ---- cuDNN ----------------------------------------------------------------------------------- */

/* numel of n x c x spatial within cuDNN's int limit. */
static bool fits_int(int64_t n, int64_t c, const int64_t *sp, int32_t k) {
    int64_t v;
    if (__builtin_mul_overflow(n, c, &v)) return false;
    for (int32_t i = 0; i < k; i++)
        if (__builtin_mul_overflow(v, sp[i], &v)) return false;
    return v <= INT_MAX;
}

/* Whether the cuDNN provider can run this convolution (see the file comment). */
static bool cudnn_ok(const conv_desc *d) {
    const ampc_conv_geom *g = &d->geo;
    ampc_dtype t = d->x->dtype;
    if (d->integer || (t != AMPC_DTYPE_F32 && t != AMPC_DTYPE_F16 && t != AMPC_DTYPE_BF16))
        return false;
    if (g->k < 1 || g->k > 3 || d->c < 1 || d->m < 1) return false;
    for (int32_t i = 0; i < g->k; i++) {
        if (g->pad_begin[i] != g->pad_end[i] || g->pad_begin[i] < 0) return false;
        if (d->transpose) {
            /* cuDNN runs the transpose as the data gradient of the forward convolution of y. */
            int64_t ext = (g->kernel[i] - 1) * g->dil[i] + 1;
            int64_t fwd = d->out[i] + g->pad_begin[i] + g->pad_end[i] - ext;
            if (fwd < 0 || fwd / g->stride[i] + 1 != d->in[i]) return false;
        }
    }
    int64_t wk = d->wshape.dims[1];
    return fits_int(d->batch, d->c, d->in, g->k) && fits_int(d->batch, d->m, d->out, g->k) &&
           fits_int(d->wshape.dims[0], wk, g->kernel, g->k);
}

static ampc_status conv_step(ampc_cg *cg, const ampc_node *n, const conv_desc *d) {
    ampc_rt_conv p;
    memset(&p, 0, sizeof p);
    p.spatial = d->geo.k;
    p.n = d->batch;
    p.c_in = d->c;
    p.c_out = d->m;
    p.groups = d->group;
    for (int32_t i = 0; i < d->geo.k; i++) {
        p.in[i] = d->in[i];
        p.out[i] = d->out[i];
        p.kernel[i] = d->geo.kernel[i];
        p.stride[i] = d->geo.stride[i];
        p.dilation[i] = d->geo.dil[i];
        p.pad_begin[i] = d->geo.pad_begin[i];
        p.pad_end[i] = d->geo.pad_end[i];
        p.output_padding[i] = d->transpose ? d->geo.output_padding[i] : 0;
    }
    p.dtype = d->x->dtype;
    p.math = d->x->dtype == AMPC_DTYPE_F32 ? ampc_cg_opts(cg)->math : (uint8_t)AMPC_RT_MATH_DEFAULT;
    p.transpose = d->transpose;
    p.has_bias = d->b != NULL;
    p.has_residual = d->z != NULL;
    p.relu = d->relu;
    p.channels_last = d->channels_last;
    if (d->z) p.z = ampc_cg_ref(cg, d->z);
    p.x = ampc_cg_ref(cg, d->x);
    p.w = ampc_cg_ref(cg, d->w);
    if (d->b) p.bias = ampc_cg_ref(cg, d->b);
    p.y = ampc_cg_ref(cg, d->y);
    return ampc_cg_step_conv(cg, n, &p);
}

/* ---- depthwise, channels last ---------------------------------------------------------------- */

/* The channels a depthwise block takes: the largest of 64, 32, 16, 8 dividing C. */
static int64_t depthwise_block_channels(int64_t c) {
    for (int64_t cb = 64; cb >= 8; cb /= 2)
        if (c % cb == 0) return cb;
    return 0;
}

/* Whether ampc::dw_nhwc (kernels/depthwise.cuh) takes this convolution: a forward 2-D f16/bf16
 * channels-last convolution with one filter per channel (group = C = M), C a multiple of 8,
 * x, z and y 16-byte aligned, the block's filters within 48 KB of shared memory. */
static bool depthwise_ok(ampc_cg *cg, const conv_desc *d) {
    const ampc_dtype t = d->x->dtype;
    if (d->transpose || d->integer || !d->channels_last || d->geo.k != 2) return false;
    if ((t != AMPC_DTYPE_F16 && t != AMPC_DTYPE_BF16) || d->y->dtype != t || d->w->dtype != t)
        return false;
    if (d->group != d->c || d->m != d->c || d->c % 8 || (d->b && d->b->dtype != t)) return false;
    if ((d->z && d->z->dtype != t) || d->batch * d->out[0] * d->out[1] > INT_MAX) return false;
    for (int32_t i = 0; i < 2; i++)
        if (d->in[i] > INT_MAX / 4 || d->out[i] > INT_MAX / 4 || d->geo.kernel[i] > 32) return false;
    if (depthwise_block_channels(d->c) * d->geo.kernel[0] * d->geo.kernel[1] * 4 > 48 * 1024)
        return false;
    const ampc_value *vs[3] = {d->x, d->y, d->z};
    for (int32_t i = 0; i < 3; i++)
        if (vs[i] && ampc_cg_ref(cg, vs[i]).offset % 16) return false;
    return true;
}

/* The output pixels a thread of the sliding form (ampc::dw_nhwc_rows) takes along a row: 4, 2 or
 * 1, the most that still gives DW_THREADS threads (a tile of 4 loads 4 + KW - 1 columns a filter
 * row for 4 outputs, against 4 * KW for four threads, but over few pixels the grid would be
 * too small to hide the loads' latency). 0: the general form (a dilation, or a horizontal
 * stride past 2). */
enum { DW_THREADS = 64 * 1024 };
static int64_t depthwise_tile(const conv_desc *d) {
    const ampc_conv_geom *g = &d->geo;
    if (g->dil[0] != 1 || g->dil[1] != 1 || g->stride[1] < 1 || g->stride[1] > 2) return 0;
    for (int64_t ot = 4; ot > 1; ot /= 2)
        if (d->batch * d->out[0] * ((d->out[1] + ot - 1) / ot) * (d->c / 8) >= DW_THREADS)
            return ot;
    return 1;
}

/* A depthwise convolution as ampc::dw_nhwc or dw_nhwc_rows: every window point a thread reads is
 * 8 channels in one 16-byte load; cuDNN measured 0.2 to 0.8 TFLOP/s on these (ConvNeXt's 7x7 on
 * [32, 56, 56, 96] 1.11 ms), far below what the memory allows (docs/benchmarks.md,
 * "Depthwise"). */
static ampc_status depthwise(ampc_cg *cg, const ampc_node *n, const conv_desc *d) {
    const ampc_conv_geom *g = &d->geo;
    const char *t = ampc_cg_ctype(d->x->dtype);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "conv_depthwise");
    const char *px = ampc_cg_param(k, d->x, false), *pw = ampc_cg_param(k, d->w, false);
    const char *pb = d->b ? ampc_cg_param(k, d->b, false) : NULL;
    const char *pz = d->z ? ampc_cg_param(k, d->z, false) : NULL;
    const char *py = ampc_cg_param(k, d->y, true);
    const int64_t cb = depthwise_block_channels(d->c), ot = depthwise_tile(d);
    const int64_t threads = d->batch * d->out[0] * (ot ? (d->out[1] + ot - 1) / ot : d->out[1]);
    ampc_cg_line(k, "const ampc::dw_desc d = {%lldLL, %lld, %lld, %lld, %lld, %lld, %lld, %lld, "
                    "%lld, %lld, %lld, %lld};", (long long)threads, (long long)d->in[0],
                 (long long)d->in[1], (long long)d->c, (long long)d->out[0], (long long)d->out[1],
                 (long long)g->stride[0], (long long)g->stride[1], (long long)g->pad_begin[0],
                 (long long)g->pad_begin[1], (long long)g->dil[0], (long long)g->dil[1]);
    char none[64], form[96];
    snprintf(none, sizeof none, "(const %s *)0", t);
    if (ot) snprintf(form, sizeof form, "dw_nhwc_rows<%s, %lld, %lld, %lld, %lld, %lld", t,
                     (long long)g->kernel[0], (long long)g->kernel[1], (long long)cb,
                     (long long)g->stride[1], (long long)ot);
    else snprintf(form, sizeof form, "dw_nhwc<%s, %lld, %lld, %lld", t, (long long)g->kernel[0],
                  (long long)g->kernel[1], (long long)cb);
    ampc_cg_line(k, "ampc::%s, %s>(%s, %s, %s, %s, %s, d);", form, d->relu ? "true" : "false",
                 px, pw, pb ? pb : none, pz ? pz : none, py);
    const int64_t per_block = 256 / (cb / 8);
    const uint32_t grid[3] = {(uint32_t)((threads + per_block - 1) / per_block),
                              (uint32_t)(d->c / cb), 1};
    const uint32_t block[3] = {256, 1, 1};
    return ampc_cg_kernel_end_launch(k, grid, block,
                                     (uint32_t)(cb * g->kernel[0] * g->kernel[1] * 4));
}

/* ---- generated direct kernels ---------------------------------------------------------------- */

/* Declares n_, m_ and the spatial coordinates o<d>_ of output element i (NC + k spatial dims). */
static void output_coords(ampc_cg_kernel *k, const conv_desc *d) {
    ampc_cg_line(k, "long long t_ = i;");
    for (int32_t i = d->geo.k - 1; i >= 0; i--) {
        ampc_cg_line(k, "const long long o%d_ = t_ %% %lldLL;", i, (long long)d->out[i]);
        ampc_cg_line(k, "t_ /= %lldLL;", (long long)d->out[i]);
    }
    ampc_cg_line(k, "const long long m_ = t_ %% %lldLL, n_ = t_ / %lldLL;", (long long)d->m,
                 (long long)d->m);
}

/* Row-major strides of the spatial dims of `dims` (k entries) and their product. */
static int64_t spatial_strides(const int64_t *dims, int32_t k, int64_t *st) {
    int64_t acc = 1;
    for (int32_t i = k - 1; i >= 0; i--) st[i] = acc, acc *= dims[i];
    return acc;
}

/* Forward: Conv (floats, any dims), ConvInteger, QLinearConv. */
static ampc_status direct_forward(ampc_cg *cg, const ampc_node *n, const conv_desc *d) {
    const ampc_conv_geom *g = &d->geo;
    int64_t count = ampc_ir_numel(d->y), xs[AMPC_MAX_RANK], ks[AMPC_MAX_RANK];
    int64_t q = spatial_strides(d->in, g->k, xs), kn = spatial_strides(g->kernel, g->k, ks);
    int64_t cg_ = d->c / d->group, mg = d->m / d->group;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, d->qlinear ? "qlinear_conv"
                                                   : d->integer ? "conv_integer" : "conv_direct");
    const char *px = ampc_cg_param(k, d->x, false), *pw = ampc_cg_param(k, d->w, false);
    const char *pb = d->b ? ampc_cg_param(k, d->b, false) : NULL;
    const char *pz = d->z ? ampc_cg_param(k, d->z, false) : NULL;
    const char *pzx = d->zx ? ampc_cg_param(k, d->zx, false) : NULL;
    const char *pzw = d->zw ? ampc_cg_param(k, d->zw, false) : NULL;
    const char *psx = NULL, *psw = NULL, *psy = NULL, *pzy = NULL;
    if (d->qlinear) {
        psx = ampc_cg_param(k, d->sx, false);
        psw = ampc_cg_param(k, d->sw, false);
        psy = ampc_cg_param(k, d->sy, false);
        pzy = ampc_cg_param(k, d->zy, false);
    }
    const char *py = ampc_cg_param(k, d->y, true);
    const char *ct = d->integer ? "long long" : ampc_cg_compute_type(d->x->dtype);
    ampc_cg_grid_loop(k, count);
    output_coords(k, d);
    ampc_cg_line(k, "const long long g_ = m_ / %lldLL;", (long long)(mg ? mg : 1));
    ampc_cg_line(k, "const long long xb_ = (n_ * %lldLL + g_ * %lldLL) * %lldLL;", (long long)d->c,
                 (long long)cg_, (long long)q);
    ampc_cg_line(k, "const long long wb_ = m_ * %lldLL;", (long long)(cg_ * kn));
    if (d->integer) {
        /* x's zero point is per tensor; w's per tensor or one per output channel. */
        if (pzx) ampc_cg_line(k, "const long long zx_ = (long long)%s[0];", pzx);
        else ampc_cg_line(k, "const long long zx_ = 0;");
        if (pzw)
            ampc_cg_line(k, "const long long zw_ = (long long)%s[%s];", pzw,
                         ampc_ir_numel(d->zw) > 1 ? "m_" : "0");
        else
            ampc_cg_line(k, "const long long zw_ = 0;");
    }
    /* The accumulator starts at the bias (floats; the integer convs add theirs after). */
    if (pb && !d->integer)
        ampc_cg_line(k, "%s acc_ = ampc::cvt<%s>(%s[m_]);", ct, ct, pb);
    else
        ampc_cg_line(k, "%s acc_ = 0;", ct);
    /* One window point per iteration of the nested loops, the input point's bounds checked only
     * along dims where the window can leave the input. */
    for (int32_t i = 0; i < g->k; i++) {
        ampc_cg_open(k, "for (long long k%d_ = 0; k%d_ < %lldLL; k%d_++)", i, i,
                     (long long)g->kernel[i], i);
        ampc_cg_line(k, "const long long p%d_ = o%d_ * %lldLL + k%d_ * %lldLL - %lldLL;", i, i,
                     (long long)g->stride[i], i, (long long)g->dil[i], (long long)g->pad_begin[i]);
        int64_t lo = -g->pad_begin[i];
        int64_t hi = (d->out[i] - 1) * g->stride[i] + (g->kernel[i] - 1) * g->dil[i] - g->pad_begin[i];
        if (lo < 0 || hi >= d->in[i])
            ampc_cg_line(k, "if (p%d_ < 0 || p%d_ >= %lldLL) continue;", i, i, (long long)d->in[i]);
    }
    ampc_strbuf xo = {0}, wo = {0};
    for (int32_t i = 0; i < g->k; i++) {
        ampc_sb_printf(&xo, " + p%d_ * %lldLL", i, (long long)xs[i]);
        ampc_sb_printf(&wo, " + k%d_ * %lldLL", i, (long long)ks[i]);
    }
    ampc_cg_line(k, "const long long xo_ = xb_%s, wo_ = wb_%s;", xo.data ? xo.data : "",
                 wo.data ? wo.data : "");
    ampc_sb_free(&xo);
    ampc_sb_free(&wo);
    ampc_cg_line(k, "%s s_ = 0;", ct);
    ampc_cg_open(k, "for (long long c_ = 0; c_ < %lldLL; c_++)", (long long)cg_);
    if (d->integer)
        ampc_cg_line(k, "s_ += ((long long)%s[xo_ + c_ * %lldLL] - zx_) * ((long long)%s[wo_ + c_ * "
                        "%lldLL] - zw_);", px, (long long)q, pw, (long long)kn);
    else
        ampc_cg_line(k, "s_ += ampc::cvt<%s>(%s[xo_ + c_ * %lldLL]) * ampc::cvt<%s>(%s[wo_ + c_ * "
                        "%lldLL]);", ct, px, (long long)q, ct, pw, (long long)kn);
    ampc_cg_close(k);
    ampc_cg_line(k, "acc_ += s_;");
    for (int32_t i = 0; i < g->k; i++) ampc_cg_close(k);
    if (!d->integer) {
        if (pz) ampc_cg_line(k, "acc_ += ampc::cvt<%s>(%s[i]);", ct, pz);
        if (d->relu) ampc_cg_line(k, "if (acc_ < (%s)0) acc_ = (%s)0;", ct, ct);
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(acc_);", py, ampc_cg_ctype(d->y->dtype));
    } else if (!d->qlinear) {
        ampc_cg_line(k, "%s[i] = (int)acc_;", py);
    } else {
        bool per_channel = ampc_ir_numel(d->sw) > 1;
        if (pb) ampc_cg_line(k, "const double v_ = (double)acc_ + (double)(long long)%s[m_];", pb);
        else ampc_cg_line(k, "const double v_ = (double)acc_;");
        ampc_cg_line(k, "const float s2_ = ampc::cv::requant_scale(ampc::cvt<float>(%s[0]), "
                        "ampc::cvt<float>(%s[%s]), ampc::cvt<float>(%s[0]));",
                     psx, psw, per_channel ? "m_" : "0", psy);
        bool s8 = d->y->dtype == AMPC_DTYPE_I8;
        ampc_cg_line(k, "%s[i] = (%s)ampc::cv::sat_rint(ampc::add_rn(ampc::mul_rn(v_, "
                        "(double)s2_), (double)(long long)%s[0]), %s, %s);",
                     py, ampc_cg_ctype(d->y->dtype), pzy, s8 ? "-128.0" : "0.0",
                     s8 ? "127.0" : "255.0");
    }
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ConvTranspose, gathered: output point o along a dim receives input point q through kernel
 * point j when q * stride + j * dilation - pad_begin == o. */
static ampc_status direct_transpose(ampc_cg *cg, const ampc_node *n, const conv_desc *d) {
    const ampc_conv_geom *g = &d->geo;
    int64_t count = ampc_ir_numel(d->y), xs[AMPC_MAX_RANK], ks[AMPC_MAX_RANK];
    int64_t q = spatial_strides(d->in, g->k, xs), kn = spatial_strides(g->kernel, g->k, ks);
    int64_t cg_ = d->c / d->group, mg = d->m / d->group;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "conv_transpose_direct");
    const char *px = ampc_cg_param(k, d->x, false), *pw = ampc_cg_param(k, d->w, false);
    const char *pb = d->b ? ampc_cg_param(k, d->b, false) : NULL;
    const char *py = ampc_cg_param(k, d->y, true);
    const char *ct = ampc_cg_compute_type(d->x->dtype);
    ampc_cg_grid_loop(k, count);
    output_coords(k, d);
    ampc_cg_line(k, "const long long g_ = m_ / %lldLL, mi_ = m_ %% %lldLL;", (long long)(mg ? mg : 1),
                 (long long)(mg ? mg : 1));
    ampc_cg_line(k, "const long long xb_ = (n_ * %lldLL + g_ * %lldLL) * %lldLL;", (long long)d->c,
                 (long long)cg_, (long long)q);
    /* W is [C, M/group, K...]: input channel g_ * CG + c_, output channel mi_ of the group. */
    ampc_cg_line(k, "const long long wb_ = (g_ * %lldLL + mi_) * %lldLL;", (long long)(cg_ * mg),
                 (long long)kn);
    ampc_cg_line(k, "%s acc_ = 0;", ct);
    for (int32_t i = 0; i < g->k; i++) {
        ampc_cg_open(k, "for (long long k%d_ = 0; k%d_ < %lldLL; k%d_++)", i, i,
                     (long long)g->kernel[i], i);
        ampc_cg_line(k, "const long long t%d_ = o%d_ + %lldLL - k%d_ * %lldLL;", i, i,
                     (long long)g->pad_begin[i], i, (long long)g->dil[i]);
        if (g->stride[i] == 1) {
            ampc_cg_line(k, "if (t%d_ < 0 || t%d_ >= %lldLL) continue;", i, i, (long long)d->in[i]);
            ampc_cg_line(k, "const long long q%d_ = t%d_;", i, i);
        } else {
            ampc_cg_line(k, "if (t%d_ < 0 || t%d_ %% %lldLL != 0) continue;", i, i,
                         (long long)g->stride[i]);
            ampc_cg_line(k, "const long long q%d_ = t%d_ / %lldLL;", i, i, (long long)g->stride[i]);
            ampc_cg_line(k, "if (q%d_ >= %lldLL) continue;", i, (long long)d->in[i]);
        }
    }
    ampc_strbuf xo = {0}, wo = {0};
    for (int32_t i = 0; i < g->k; i++) {
        ampc_sb_printf(&xo, " + q%d_ * %lldLL", i, (long long)xs[i]);
        ampc_sb_printf(&wo, " + k%d_ * %lldLL", i, (long long)ks[i]);
    }
    ampc_cg_line(k, "const long long xo_ = xb_%s, wo_ = wb_%s;", xo.data ? xo.data : "",
                 wo.data ? wo.data : "");
    ampc_sb_free(&xo);
    ampc_sb_free(&wo);
    ampc_cg_open(k, "for (long long c_ = 0; c_ < %lldLL; c_++)", (long long)cg_);
    ampc_cg_line(k, "acc_ += ampc::cvt<%s>(%s[xo_ + c_ * %lldLL]) * ampc::cvt<%s>(%s[wo_ + c_ * "
                    "%lldLL]);", ct, px, (long long)q, ct, pw, (long long)(mg * kn));
    ampc_cg_close(k);
    for (int32_t i = 0; i < g->k; i++) ampc_cg_close(k);
    if (pb) ampc_cg_line(k, "acc_ += ampc::cvt<%s>(%s[m_]);", ct, pb);
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(acc_);", py, ampc_cg_ctype(d->y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- MaxPool, AveragePool, LpPool ------------------------------------------------------------ */

static ampc_status window_pool(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const ampc_value *yi = n->op == AMPC_OP_MAX_POOL && n->n_outputs > 1 ? n->outputs[1] : NULL;
    ampc_conv_geom geo;
    ampc_status st = ampc_infer_conv_geom(g, n, &geo);
    if (st != AMPC_OK) return st;
    const int32_t kk = geo.k, r = x->shape.rank;
    const bool cl = ampc_conv_channels_last(n); /* [N, H, W, C], one output (the layout pass's) */
    const int64_t *in = &x->shape.dims[cl ? 1 : 2], *out = &y->shape.dims[cl ? 1 : 2];
    const int64_t ch = cl ? x->shape.dims[3] : 1;
    int64_t xs[AMPC_MAX_RANK], cs[AMPC_MAX_RANK];
    int64_t q = ampc_cg_row_strides(in, kk, xs);
    for (int32_t d = 0; d < kk; d++) xs[d] *= ch;
    int64_t cacc = 1; /* column-major strides, for storage_order 1 */
    for (int32_t d = 0; d < kk; d++) cs[d] = cacc, cacc *= in[d];
    bool is_max = n->op == AMPC_OP_MAX_POOL, is_avg = n->op == AMPC_OP_AVERAGE_POOL;
    const ampc_conv_params cp = ampc_conv_params_of(n);
    bool include_pad = is_avg && cp.include_pad, col_major = is_max && cp.col_major;
    int64_t p = cp.p;
    const char *ct = ampc_cg_compute_type(x->dtype);
    int64_t count = ampc_ir_numel(y);

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    const char *pi = yi ? ampc_cg_param(k, yi, true) : NULL;
    ampc_cg_grid_loop(k, count);
    if (cl) { /* i = ((n * Ho + o0) * Wo + o1) * C + c */
        ampc_cg_line(k, "const long long c_ = i %% %lldLL, m_ = i / %lldLL;", (long long)ch, (long long)ch);
        ampc_cg_line(k, "const long long o1_ = m_ %% %lldLL, o0_ = (m_ / %lldLL) %% %lldLL;",
                     (long long)out[1], (long long)out[1], (long long)out[0]);
        ampc_cg_line(k, "const long long xb_ = m_ / %lldLL * %lldLL + c_;", (long long)(out[0] * out[1]),
                     (long long)(q * ch));
    } else {
        ampc_cg_split_trailing(k, y->shape.dims, r, kk);
        ampc_cg_line(k, "const long long xb_ = r_ * %lldLL;", (long long)q);
    }
    if (is_max) {
        const char *lo = x->dtype == AMPC_DTYPE_I8   ? "-128LL"
                         : x->dtype == AMPC_DTYPE_U8 ? "0ULL"
                         : !strcmp(ct, "double")     ? "ampc::cv::neg_inf<double>()"
                                                     : "ampc::cv::neg_inf<float>()";
        ampc_cg_line(k, "%s best_ = %s;", ct, lo);
        ampc_cg_line(k, "long long arg_ = -1;");
    } else {
        ampc_cg_line(k, "%s sum_ = 0;", ct);
        if (is_avg) ampc_cg_line(k, "long long inside_ = 0, padded_ = 0;");
    }
    for (int32_t d = 0; d < kk; d++) {
        ampc_cg_open(k, "for (long long k%d_ = 0; k%d_ < %lldLL; k%d_++)", d, d,
                     (long long)geo.kernel[d], d);
        ampc_cg_line(k, "const long long p%d_ = o%d_ * %lldLL + k%d_ * %lldLL - %lldLL;", d, d,
                     (long long)geo.stride[d], d, (long long)geo.dil[d], (long long)geo.pad_begin[d]);
        int64_t lo = -geo.pad_begin[d];
        int64_t hi = (out[d] - 1) * geo.stride[d] + (geo.kernel[d] - 1) * geo.dil[d] - geo.pad_begin[d];
        bool leaves = lo < 0 || hi >= in[d];
        if (include_pad) {
            /* Points past the padded input never count; inside-ness is kept per dim. */
            if (hi >= in[d] + geo.pad_end[d])
                ampc_cg_line(k, "if (p%d_ < %lldLL || p%d_ >= %lldLL) continue;", d,
                             (long long)-geo.pad_begin[d], d, (long long)(in[d] + geo.pad_end[d]));
            if (leaves) ampc_cg_line(k, "const bool in%d_ = p%d_ >= 0 && p%d_ < %lldLL;", d, d, d,
                                     (long long)in[d]);
            else ampc_cg_line(k, "const bool in%d_ = true;", d);
        } else if (leaves) {
            ampc_cg_line(k, "if (p%d_ < 0 || p%d_ >= %lldLL) continue;", d, d, (long long)in[d]);
        }
    }
    ampc_strbuf off = {0}, coff = {0}, inside = {0};
    for (int32_t d = 0; d < kk; d++) {
        ampc_sb_printf(&off, " + p%d_ * %lldLL", d, (long long)xs[d]);
        ampc_sb_printf(&coff, " + p%d_ * %lldLL", d, (long long)cs[d]);
        ampc_sb_printf(&inside, "%sin%d_", d ? " && " : "", d);
    }
    ampc_cg_line(k, "const long long off_ = 0%s;", off.data ? off.data : "");
    if (is_max) {
        ampc_cg_line(k, "const %s v_ = ampc::cvt<%s>(%s[xb_ + off_]);", ct, ct, px);
        ampc_cg_open(k, "if (arg_ < 0 || ampc::cv::max_takes(v_, best_))");
        ampc_cg_line(k, "best_ = v_;");
        if (col_major) ampc_cg_line(k, "arg_ = 0%s;", coff.data ? coff.data : "");
        else ampc_cg_line(k, "arg_ = off_;");
        ampc_cg_close(k);
    } else if (is_avg) {
        if (include_pad) {
            ampc_cg_line(k, "padded_++;");
            ampc_cg_open(k, "if (%s)", inside.data ? inside.data : "true");
        }
        ampc_cg_line(k, "sum_ += ampc::cvt<%s>(%s[xb_ + off_]);", ct, px);
        ampc_cg_line(k, "inside_++;");
        if (include_pad) ampc_cg_close(k);
    } else {
        ampc_cg_line(k, "sum_ += ampc::cv::powv(ampc::cv::absv(ampc::cvt<%s>(%s[xb_ + off_])), (%s)%lld);",
                     ct, px, ct, (long long)p);
    }
    ampc_sb_free(&off);
    ampc_sb_free(&coff);
    ampc_sb_free(&inside);
    for (int32_t d = 0; d < kk; d++) ampc_cg_close(k);
    const char *yt = ampc_cg_ctype(y->dtype);
    if (is_max) {
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(best_);", py, yt);
        if (pi) ampc_cg_line(k, "%s[i] = arg_ < 0 ? -1LL : r_ * %lldLL + arg_;", pi, (long long)q);
    } else if (is_avg) {
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(sum_ / (%s)%s);", py, yt, ct,
                     include_pad ? "padded_" : "inside_");
    } else {
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(ampc::cv::powv(sum_, (%s)1 / (%s)%lld));", py, yt, ct,
                     ct, (long long)p);
    }
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- global pools ---------------------------------------------------------------------------- */

static ampc_status global_pool(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    bool is_max = n->op == AMPC_OP_GLOBAL_MAX_POOL, is_lp = n->op == AMPC_OP_GLOBAL_LP_POOL;
    int64_t p = ampc_conv_params_of(n).p; /* 1 unless is_lp */
    int64_t rows = x->shape.dims[0] * x->shape.dims[1];
    int64_t q = rows ? ampc_ir_numel(x) / rows : 0;
    const char *ct = ampc_cg_compute_type(x->dtype);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    /* One warp per row; every lane of a warp takes the same trips through the row loop. */
    ampc_cg_open(k, "for (long long w_ = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; "
                    "w_ < %lldLL; w_ += ((long long)gridDim.x * blockDim.x) >> 5)",
                 (long long)rows);
    ampc_cg_line(k, "const long long lane_ = threadIdx.x & 31, xb_ = w_ * %lldLL;", (long long)q);
    ampc_cg_line(k, "%s acc_ = %s;", ct,
                 is_max ? (!strcmp(ct, "double") ? "ampc::cv::neg_inf<double>()"
                                                 : "ampc::cv::neg_inf<float>()")
                        : "0");
    ampc_cg_open(k, "for (long long j_ = lane_; j_ < %lldLL; j_ += 32)", (long long)q);
    ampc_cg_line(k, "const %s v_ = ampc::cvt<%s>(%s[xb_ + j_]);", ct, ct, px);
    if (is_max) ampc_cg_line(k, "if (ampc::cv::max_takes(v_, acc_)) acc_ = v_;");
    else if (is_lp)
        ampc_cg_line(k, "acc_ += ampc::cv::powv(ampc::cv::absv(v_), (%s)%lld);", ct, (long long)p);
    else ampc_cg_line(k, "acc_ += v_;");
    ampc_cg_close(k);
    ampc_cg_line(k, "acc_ = ampc::cv::%s(acc_);", is_max ? "warp_max" : "warp_sum");
    const char *yt = ampc_cg_ctype(y->dtype);
    if (is_max) ampc_cg_line(k, "if (lane_ == 0) %s[w_] = ampc::cvt<%s>(acc_);", py, yt);
    else if (is_lp)
        ampc_cg_line(k, "if (lane_ == 0) %s[w_] = ampc::cvt<%s>(ampc::cv::powv(acc_, (%s)1 / (%s)%lld));",
                     py, yt, ct, ct, (long long)p);
    else ampc_cg_line(k, "if (lane_ == 0) %s[w_] = ampc::cvt<%s>(acc_ / (%s)%lld);", py, yt, ct,
                      (long long)q);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, rows * 32, 256);
}

/* ---- Col2Im ---------------------------------------------------------------------------------- */

static ampc_status lower_col2im(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0], *bv = n->inputs[2];
    int32_t r = y->shape.rank, kk = r - 2;
    int64_t blk[AMPC_MAX_RANK], st[AMPC_MAX_RANK], dil[AMPC_MAX_RANK], pb[AMPC_MAX_RANK],
        pe[AMPC_MAX_RANK], nb[AMPC_MAX_RANK], bs[AMPC_MAX_RANK], ls[AMPC_MAX_RANK];
    if (!bv->data) return ampc_cg_unsupported(cg, n, "without a constant block_shape");
    ampc_col2im_window(n, kk, st, dil, pb, pe); /* as the reference reads them */
    for (int32_t i = 0; i < kk; i++) {
        blk[i] = ampc_ref_load_i64(bv->data, bv->dtype, i);
        int64_t ext = (blk[i] - 1) * dil[i] + 1;
        nb[i] = (y->shape.dims[2 + i] + pb[i] + pe[i] - ext) / st[i] + 1;
    }
    int64_t per = ampc_cg_row_strides(blk, kk, bs), L = x->shape.dims[2];
    ampc_cg_row_strides(nb, kk, ls);
    const char *ct = ampc_dtype_is_float(y->dtype) ? ampc_cg_compute_type(y->dtype)
                                                   : "unsigned long long";
    bool is_bool = y->dtype == AMPC_DTYPE_BOOL;
    int64_t count = ampc_ir_numel(y);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "col2im");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_split_trailing(k, y->shape.dims, r, kk);
    ampc_cg_line(k, "%s acc_ = 0;", ct);
    /* Block elements in descending row-major order: their block positions then ascend, the
     * order in which the reference adds them. */
    for (int32_t d = 0; d < kk; d++) {
        ampc_cg_open(k, "for (long long k%d_ = %lldLL; k%d_ >= 0; k%d_--)", d, (long long)(blk[d] - 1),
                     d, d);
        ampc_cg_line(k, "const long long t%d_ = o%d_ + %lldLL - k%d_ * %lldLL;", d, d, (long long)pb[d],
                     d, (long long)dil[d]);
        if (st[d] == 1) {
            ampc_cg_line(k, "if (t%d_ < 0 || t%d_ >= %lldLL) continue;", d, d, (long long)nb[d]);
            ampc_cg_line(k, "const long long l%d_ = t%d_;", d, d);
        } else {
            ampc_cg_line(k, "if (t%d_ < 0 || t%d_ %% %lldLL != 0) continue;", d, d, (long long)st[d]);
            ampc_cg_line(k, "const long long l%d_ = t%d_ / %lldLL;", d, d, (long long)st[d]);
            ampc_cg_line(k, "if (l%d_ >= %lldLL) continue;", d, (long long)nb[d]);
        }
    }
    ampc_strbuf jo = {0}, lo = {0};
    for (int32_t d = 0; d < kk; d++) {
        ampc_sb_printf(&jo, " + k%d_ * %lldLL", d, (long long)bs[d]);
        ampc_sb_printf(&lo, " + l%d_ * %lldLL", d, (long long)ls[d]);
    }
    ampc_cg_line(k, "const long long src_ = (r_ * %lldLL%s) * %lldLL%s;", (long long)per,
                 jo.data ? jo.data : "", (long long)L, lo.data ? lo.data : "");
    ampc_sb_free(&jo);
    ampc_sb_free(&lo);
    if (ampc_dtype_is_float(y->dtype))
        ampc_cg_line(k, "acc_ += ampc::cvt<%s>(%s[src_]);", ct, px);
    else if (is_bool)
        ampc_cg_line(k, "acc_ |= (unsigned long long)%s[src_];", px);
    else
        ampc_cg_line(k, "acc_ += (unsigned long long)(long long)%s[src_];", px);
    for (int32_t d = 0; d < kk; d++) ampc_cg_close(k);
    if (ampc_dtype_is_float(y->dtype))
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(acc_);", py, ampc_cg_ctype(y->dtype));
    else if (is_bool)
        ampc_cg_line(k, "%s[i] = acc_ != 0;", py);
    else
        ampc_cg_line(k, "%s[i] = (%s)acc_;", py, ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- entry ----------------------------------------------------------------------------------- */

ampc_status ampc_cg_lower_conv(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_CONV: case AMPC_OP_CONV_TRANSPOSE: case AMPC_OP_CONV_INTEGER:
    case AMPC_OP_QLINEAR_CONV: case AMPC_OP_FUSED_CONV: break;
    default:
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "%s has no GPU lowering yet; it runs on the reference evaluator only",
                         ampc_op_get(n->op)->onnx);
    }
    if (ampc_ir_numel(n->outputs[0]) == 0) return AMPC_OK; /* nothing to compute */
    conv_desc d;
    ampc_status st = describe(cg, n, &d);
    if (st != AMPC_OK) return st;
    if (depthwise_ok(cg, &d)) return depthwise(cg, n, &d);
    if (cudnn_ok(&d)) return conv_step(cg, n, &d);
    if (d.channels_last) /* the layout pass makes channels-last convolutions for cuDNN only */
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "a channels-last convolution cuDNN cannot run (pads, dtype or size)");
    return d.transpose ? direct_transpose(cg, n, &d) : direct_forward(cg, n, &d);
}

ampc_status ampc_cg_lower_pool(ampc_cg *cg, const ampc_node *n) {
    if (ampc_ir_numel(n->outputs[0]) == 0) return AMPC_OK; /* nothing to compute */
    switch (n->op) {
    case AMPC_OP_MAX_POOL:
    case AMPC_OP_AVERAGE_POOL:
    case AMPC_OP_LP_POOL: return window_pool(cg, n);
    case AMPC_OP_GLOBAL_AVERAGE_POOL:
    case AMPC_OP_GLOBAL_MAX_POOL:
    case AMPC_OP_GLOBAL_LP_POOL: return global_pool(cg, n);
    case AMPC_OP_COL2IM: return lower_col2im(cg, n);
    default: return ampc_cg_lower_resize(cg, n);
    }
}
