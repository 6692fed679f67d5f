/*
 * conv.c — reference kernels for convolution and pooling (NCHW, any number of spatial dims), and
 * for Col2Im.
 *
 * Direct loops, no im2col: each output element is a sum over its window, accumulated in double
 * and rounded once to the output dtype. Conv costs O(output * kernel * C/group), ConvTranspose
 * the same scattered from the input side, pools O(output * kernel). DeformConv samples every
 * displaced kernel point once per input channel by multilinear interpolation (2^k corners) and
 * then contracts like Conv. Col2Im scatter-adds each column entry into its image point. Inputs
 * are widened to double once up front so the inner loops carry no dtype dispatch.
 *
 * Inference (ir/infer/conv.c) has validated the attributes and fixed the output shape; the
 * kernels take the window geometry (kernel, strides, dilations, the padding at each end) from
 * it, as code generation does (ampc_infer_conv_geom, through geom_init).
 */
#include "ref.h"
#include "ir/conv.h"
#include "../infer/infer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Window geometry along the k spatial dims. */
typedef struct geom {
    int32_t k;
    int64_t in[AMPC_MAX_RANK], out[AMPC_MAX_RANK], kern[AMPC_MAX_RANK];
    int64_t stride[AMPC_MAX_RANK], dil[AMPC_MAX_RANK];
    int64_t pb[AMPC_MAX_RANK], pe[AMPC_MAX_RANK]; /* padding at the beginning and end */
    int64_t in_n, out_n, kern_n;                  /* element counts of the spatial blocks */
    int64_t *kc;                                  /* kern_n x k kernel coordinates */
} geom;

/* Fills the geometry of node n for input and output shapes x and y (NCHW): the kernel, strides,
 * dilations and padding are inference's (ampc_infer_conv_geom, the geometry code generation
 * reads too), except for Col2Im, whose block dims `blocks` and explicit pads place the windows
 * over the image (x = y = the image). */
static ampc_status geom_init(ampc_graph *g, const ampc_node *n, const ampc_shape *x,
                             const ampc_shape *y, const int64_t *blocks, geom *gm) {
    int32_t k = x->rank - 2;
    memset(gm, 0, sizeof *gm);
    gm->k = k;
    if (blocks) {
        memcpy(gm->kern, blocks, (size_t)k * sizeof *blocks);
        ampc_col2im_window(n, k, gm->stride, gm->dil, gm->pb, gm->pe);
    } else {
        ampc_conv_geom cg;
        ampc_status st = ampc_infer_conv_geom(g, n, &cg);
        if (st != AMPC_OK) return st;
        for (int32_t i = 0; i < k; i++) {
            gm->kern[i] = cg.kernel[i], gm->stride[i] = cg.stride[i], gm->dil[i] = cg.dil[i];
            gm->pb[i] = cg.pad_begin[i], gm->pe[i] = cg.pad_end[i];
        }
    }
    gm->in_n = gm->out_n = gm->kern_n = 1;
    for (int32_t i = 0; i < k; i++) {
        gm->in[i] = x->dims[2 + i];
        gm->out[i] = y->dims[2 + i];
        gm->in_n *= gm->in[i];
        gm->out_n *= gm->out[i];
        gm->kern_n *= gm->kern[i];
    }
    /* Kernel offsets listed once, row-major, so the window loops are flat. */
    gm->kc = malloc((size_t)AMPC_MAX(gm->kern_n * k, 1) * sizeof *gm->kc);
    if (!gm->kc) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    for (int64_t j = 0; j < gm->kern_n; j++)
        for (int64_t i = k - 1, r = j; i >= 0; i--) {
            gm->kc[j * k + i] = r % gm->kern[i];
            r /= gm->kern[i];
        }
    return AMPC_OK;
}

/* Advances a row-major coordinate over dims (the spatial odometer). */
static void next_coord(int64_t *c, const int64_t *dims, int32_t k) {
    for (int32_t i = k - 1; i >= 0; i--) {
        if (++c[i] < dims[i]) return;
        c[i] = 0;
    }
}

/* Input coordinates of kernel offset j placed at output coordinate oc: oc * stride + kc * dil -
 * pad_begin. Returns the row-major spatial offset, or -1 when the point lies in the padding. */
static int64_t window_point(const geom *gm, const int64_t *oc, int64_t j, int64_t *pt) {
    int64_t off = 0;
    for (int32_t i = 0; i < gm->k; i++) {
        int64_t c = oc[i] * gm->stride[i] + gm->kc[j * gm->k + i] * gm->dil[i] - gm->pb[i];
        pt[i] = c;
        if (c < 0 || c >= gm->in[i])
            off = -1;
        else if (off >= 0)
            off = off * gm->in[i] + c;
    }
    return off;
}

/* The whole tensor widened to double (malloc'ed), or NULL with an OOM diagnostic. */
static double *load_all(ampc_graph *g, const ampc_node *n, const ampc_tensor *t) {
    int64_t cnt = ampc_shape_numel(&t->shape);
    double *d = malloc((size_t)(cnt ? cnt : 1) * sizeof *d);
    if (!d) {
        AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory widening a %lld-element tensor",
                  (long long)cnt);
        return NULL;
    }
    for (int64_t i = 0; i < cnt; i++) d[i] = ampc_ref_load_f64(t->data, t->dtype, i);
    return d;
}

/* The forward convolution, then (ampc.FusedConv) + z and ReLU before the one rounding to y. */
static ampc_status conv_forward(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *y, const ampc_tensor *z, bool relu) {
    const ampc_tensor *x = in[0], *w = in[1], *b = n->n_inputs > 2 ? in[2] : NULL;
    geom gm;
    ampc_status st = geom_init(g, n, &x->shape, &y->shape, NULL, &gm);
    if (st) return st;
    int64_t nb = x->shape.dims[0], c = x->shape.dims[1], m = y->shape.dims[1];
    int64_t group = ampc_conv_params_of(n).group, cg = c / group, mg = m / group;
    int64_t q = gm.in_n, kn = gm.kern_n, oc[AMPC_MAX_RANK], pt[AMPC_MAX_RANK];
    double *xd = load_all(g, n, x), *wd = xd ? load_all(g, n, w) : NULL;
    double *acc = wd ? malloc((size_t)(m ? m : 1) * sizeof *acc) : NULL;
    if (!acc) {
        st = xd && wd ? AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory") : AMPC_E_OOM;
        goto done;
    }
    for (int64_t b0 = 0; b0 < nb; b0++) {
        memset(oc, 0, sizeof oc);
        for (int64_t p = 0; p < gm.out_n; p++, next_coord(oc, gm.out, gm.k)) {
            for (int64_t j = 0; j < m; j++)
                acc[j] = b ? ampc_ref_load_f64(b->data, b->dtype, j) : 0;
            for (int64_t j = 0; j < kn; j++) {
                int64_t off = window_point(&gm, oc, j, pt);
                if (off < 0) continue;
                for (int64_t gi = 0; gi < group; gi++) {
                    const double *xp = xd + (b0 * c + gi * cg) * q + off;
                    for (int64_t mi = gi * mg; mi < (gi + 1) * mg; mi++) {
                        const double *wp = wd + mi * cg * kn + j;
                        double s = 0;
                        for (int64_t ci = 0; ci < cg; ci++) s += xp[ci * q] * wp[ci * kn];
                        acc[mi] += s;
                    }
                }
            }
            for (int64_t j = 0; j < m; j++) {
                int64_t at = (b0 * m + j) * gm.out_n + p;
                double v = acc[j] + (z ? ampc_ref_load_f64(z->data, z->dtype, at) : 0);
                ampc_ref_store_f64(y->data, y->dtype, at, relu && v < 0 ? 0 : v);
            }
        }
    }
done:
    free(gm.kc);
    free(xd);
    free(wd);
    free(acc);
    return st;
}

ampc_status ampc_ref_conv(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    return conv_forward(g, n, in, out[0], NULL, false);
}

/* Copies t into r with the channel dim moved: [N, C, S...] -> [N, S..., C] when to_last, the
 * reverse otherwise; r gets the moved shape and a new buffer (NULL data on OOM). */
static void move_channels(const ampc_tensor *t, ampc_tensor *r, bool to_last) {
    r->dtype = t->dtype;
    r->shape = to_last ? ampc_shape_to_channels_last(&t->shape) : ampc_shape_to_channels_first(&t->shape);
    size_t es = ampc_dtype_size(t->dtype);
    int64_t nb = t->shape.dims[0], c = to_last ? t->shape.dims[1] : t->shape.dims[t->shape.rank - 1];
    int64_t sp = nb && c ? ampc_shape_numel(&t->shape) / nb / c : 0;
    r->data = malloc((size_t)ampc_shape_numel(&t->shape) * es + 1);
    if (!r->data) return;
    const char *src = t->data;
    char *dst = r->data;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t k = 0; k < c; k++)
            for (int64_t q = 0; q < sp; q++) {
                int64_t first = (b * c + k) * sp + q, last = (b * sp + q) * c + k;
                memcpy(dst + (to_last ? last : first) * es, src + (to_last ? first : last) * es, es);
            }
}

/* A channels-last ampc.FusedConv: its tensors moved to NCHW, the NCHW kernel on its shadow,
 * the output moved back. */
static ampc_status fused_conv_channels_last(ampc_graph *g, const ampc_node *n,
                                            const ampc_tensor *const *in, ampc_tensor *y, bool relu) {
    ampc_conv_shadow sh;
    ampc_conv_shadow_make(n, &sh);
    ampc_tensor t[4] = {{0}}, yt = {0};
    const ampc_tensor *args[4] = {NULL, NULL, n->n_inputs > 2 ? in[2] : NULL, NULL};
    bool ok = true;
    for (int32_t i = 0; i < n->n_inputs && i < 4; i++) {
        if (i == 2 || !in[i]) continue;
        move_channels(in[i], &t[i], false);
        args[i] = &t[i];
        ok = ok && t[i].data;
    }
    yt = (ampc_tensor){y->dtype, ampc_shape_to_channels_first(&y->shape),
                       calloc((size_t)ampc_shape_numel(&y->shape) + 1, ampc_dtype_size(y->dtype))};
    ampc_status st = ok && yt.data ? conv_forward(g, &sh.node, (const ampc_tensor *const *)args, &yt, args[3], relu)
                                   : AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    if (st == AMPC_OK) {
        ampc_tensor back;
        move_channels(&yt, &back, true);
        if (back.data) memcpy(y->data, back.data, (size_t)ampc_shape_numel(&y->shape) * ampc_dtype_size(y->dtype));
        else st = AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
        free(back.data);
    }
    for (int32_t i = 0; i < 4; i++) free(t[i].data);
    free(yt.data);
    return st;
}

ampc_status ampc_ref_fused_conv(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *const *out) {
    const bool relu = ampc_conv_params_of(n).relu;
    if (ampc_conv_channels_last(n)) return fused_conv_channels_last(g, n, in, out[0], relu);
    return conv_forward(g, n, in, out[0], n->n_inputs > 3 ? in[3] : NULL, relu);
}

/* ConvTranspose scatters each input element through the kernel: input point q of channel c adds
 * x * W[c, m, j] to output point q * stride + j * dilation - pad_begin of channel m. */
ampc_status ampc_ref_conv_transpose(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                    ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *w = in[1], *b = n->n_inputs > 2 ? in[2] : NULL;
    ampc_tensor *y = out[0];
    geom gm;
    ampc_status st = geom_init(g, n, &x->shape, &y->shape, NULL, &gm);
    if (st) return st;
    int64_t nb = x->shape.dims[0], c = x->shape.dims[1], m = y->shape.dims[1];
    int64_t group = ampc_conv_params_of(n).group, cg = c / group, mg = m / group;
    int64_t q = gm.in_n, kn = gm.kern_n, P = gm.out_n, ic[AMPC_MAX_RANK];
    int64_t ycount = ampc_shape_numel(&y->shape);
    double *xd = load_all(g, n, x), *wd = xd ? load_all(g, n, w) : NULL;
    double *acc = wd ? calloc((size_t)(ycount ? ycount : 1), sizeof *acc) : NULL;
    if (!acc) {
        st = xd && wd ? AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory") : AMPC_E_OOM;
        goto done;
    }
    for (int64_t b0 = 0; b0 < nb; b0++) {
        memset(ic, 0, sizeof ic);
        for (int64_t p = 0; p < q; p++, next_coord(ic, gm.in, gm.k)) {
            for (int64_t j = 0; j < kn; j++) {
                int64_t off = 0;
                for (int32_t i = 0; i < gm.k && off >= 0; i++) {
                    int64_t o = ic[i] * gm.stride[i] + gm.kc[j * gm.k + i] * gm.dil[i] - gm.pb[i];
                    off = o < 0 || o >= gm.out[i] ? -1 : off * gm.out[i] + o;
                }
                if (off < 0) continue;
                for (int64_t ci = 0; ci < c; ci++) {
                    int64_t gi = ci / cg;
                    double xv = xd[(b0 * c + ci) * q + p];
                    const double *wp = wd + ci * mg * kn + j;
                    double *yp = acc + (b0 * m + gi * mg) * P + off;
                    for (int64_t mi = 0; mi < mg; mi++) yp[mi * P] += xv * wp[mi * kn];
                }
            }
        }
    }
    for (int64_t i = 0; i < ycount; i++) {
        double bias = b ? ampc_ref_load_f64(b->data, b->dtype, (i / P) % m) : 0;
        ampc_ref_store_f64(y->data, y->dtype, i, acc[i] + bias);
    }
done:
    free(gm.kc);
    free(xd);
    free(wd);
    free(acc);
    return st;
}

/* The value a max over no element gives: -inf, or the smallest integer of the dtype. */
static double lowest(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_I8: return INT8_MIN;
    case AMPC_DTYPE_U8: return 0;
    default: return -INFINITY;
    }
}

/* MaxPool: the largest element of each window (NaN wins, the first maximum wins ties); the
 * optional Indices output holds its position in the input flattened N, C, then the spatial dims
 * row-major (storage_order 0) or column-major (storage_order 1). A window lying wholly in the
 * padding gives the dtype's lowest value and index -1. */
static ampc_status max_pool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0], *yi = n->n_outputs > 1 ? out[1] : NULL;
    geom gm;
    ampc_status st = geom_init(g, n, &x->shape, &y->shape, NULL, &gm);
    if (st) return st;
    bool col_major = ampc_conv_params_of(n).col_major;
    int64_t nc = x->shape.dims[0] * x->shape.dims[1], oc[AMPC_MAX_RANK], pt[AMPC_MAX_RANK];
    double *xd = load_all(g, n, x);
    if (!xd) {
        free(gm.kc);
        return AMPC_E_OOM;
    }
    for (int64_t r = 0; r < nc; r++) {
        memset(oc, 0, sizeof oc);
        for (int64_t p = 0; p < gm.out_n; p++, next_coord(oc, gm.out, gm.k)) {
            double best = lowest(x->dtype);
            int64_t arg = -1, argpt[AMPC_MAX_RANK];
            for (int64_t j = 0; j < gm.kern_n; j++) {
                int64_t off = window_point(&gm, oc, j, pt);
                if (off < 0) continue;
                double v = xd[r * gm.in_n + off];
                if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {
                    best = v;
                    arg = off;
                    memcpy(argpt, pt, sizeof argpt);
                }
            }
            ampc_ref_store_f64(y->data, y->dtype, r * gm.out_n + p, best);
            if (!yi) continue;
            if (arg >= 0 && col_major) {
                arg = 0;
                for (int32_t i = gm.k - 1; i >= 0; i--) arg = arg * gm.in[i] + argpt[i];
            }
            ampc_ref_store_i64(yi->data, AMPC_DTYPE_I64, r * gm.out_n + p,
                               arg < 0 ? -1 : r * gm.in_n + arg);
        }
    }
    free(gm.kc);
    free(xd);
    return AMPC_OK;
}

/* AveragePool: the mean of each window. The divisor counts the window's points inside the input
 * (count_include_pad 0) or inside the padded input (1); points past the end padding, which
 * ceil_mode can produce, never count. */
static ampc_status avg_pool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    geom gm;
    ampc_status st = geom_init(g, n, &x->shape, &y->shape, NULL, &gm);
    if (st) return st;
    bool include_pad = ampc_conv_params_of(n).include_pad;
    int64_t nc = x->shape.dims[0] * x->shape.dims[1], oc[AMPC_MAX_RANK], pt[AMPC_MAX_RANK];
    double *xd = load_all(g, n, x);
    if (!xd) {
        free(gm.kc);
        return AMPC_E_OOM;
    }
    for (int64_t r = 0; r < nc; r++) {
        memset(oc, 0, sizeof oc);
        for (int64_t p = 0; p < gm.out_n; p++, next_coord(oc, gm.out, gm.k)) {
            double sum = 0;
            int64_t inside = 0, padded = 0;
            for (int64_t j = 0; j < gm.kern_n; j++) {
                int64_t off = window_point(&gm, oc, j, pt);
                if (off >= 0) {
                    sum += xd[r * gm.in_n + off];
                    inside++;
                }
                bool in_pad = true;
                for (int32_t i = 0; i < gm.k; i++)
                    in_pad &= pt[i] >= -gm.pb[i] && pt[i] < gm.in[i] + gm.pe[i];
                padded += in_pad;
            }
            double cnt = (double)(include_pad ? padded : inside);
            ampc_ref_store_f64(y->data, y->dtype, r * gm.out_n + p, sum / cnt);
        }
    }
    free(gm.kc);
    free(xd);
    return AMPC_OK;
}

typedef ampc_status (*pool_fn)(ampc_graph *, const ampc_node *, const ampc_tensor *const *,
                               ampc_tensor *const *);

/* A pool with channels_last = 1 (the layout pass's, one output): x moved to NCHW, the NCHW pool,
 * the output moved back; else the NCHW pool itself. */
static ampc_status pool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                        ampc_tensor *const *out, pool_fn nchw) {
    if (!ampc_conv_channels_last(n)) return nchw(g, n, in, out);
    ampc_tensor x, back, y = {out[0]->dtype, ampc_shape_to_channels_first(&out[0]->shape), NULL};
    move_channels(in[0], &x, false);
    y.data = calloc((size_t)ampc_shape_numel(&y.shape) + 1, ampc_dtype_size(y.dtype));
    const ampc_tensor *xs[1] = {&x};
    ampc_tensor *ys[1] = {&y};
    ampc_status st = x.data && y.data ? nchw(g, n, xs, ys) : AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    if (st == AMPC_OK) {
        move_channels(&y, &back, true);
        if (back.data) memcpy(out[0]->data, back.data, (size_t)ampc_shape_numel(&y.shape) * ampc_dtype_size(y.dtype));
        else st = AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
        free(back.data);
    }
    free(x.data);
    free(y.data);
    return st;
}

ampc_status ampc_ref_max_pool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    return pool(g, n, in, out, max_pool);
}

ampc_status ampc_ref_avg_pool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    return pool(g, n, in, out, avg_pool);
}

/* LpPool: (sum over the window's points inside the input of |x|^p)^(1/p). Padding adds zeros,
 * which add nothing to the sum. */
ampc_status ampc_ref_lp_pool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    geom gm;
    ampc_status st = geom_init(g, n, &x->shape, &y->shape, NULL, &gm);
    if (st) return st;
    double p = (double)ampc_conv_params_of(n).p;
    int64_t nc = x->shape.dims[0] * x->shape.dims[1], oc[AMPC_MAX_RANK], pt[AMPC_MAX_RANK];
    double *xd = load_all(g, n, x);
    if (!xd) {
        free(gm.kc);
        return AMPC_E_OOM;
    }
    for (int64_t r = 0; r < nc; r++) {
        memset(oc, 0, sizeof oc);
        for (int64_t q = 0; q < gm.out_n; q++, next_coord(oc, gm.out, gm.k)) {
            double sum = 0;
            for (int64_t j = 0; j < gm.kern_n; j++) {
                int64_t off = window_point(&gm, oc, j, pt);
                if (off >= 0) sum += pow(fabs(xd[r * gm.in_n + off]), p);
            }
            ampc_ref_store_f64(y->data, y->dtype, r * gm.out_n + q, pow(sum, 1.0 / p));
        }
    }
    free(gm.kc);
    free(xd);
    return AMPC_OK;
}

/* GlobalAveragePool / GlobalMaxPool / GlobalLpPool: one mean, max or p-norm per (n, c) over all
 * spatial points. */
ampc_status ampc_ref_global_pool(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                 ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    bool is_max = n->op == AMPC_OP_GLOBAL_MAX_POOL, is_lp = n->op == AMPC_OP_GLOBAL_LP_POOL;
    double p = (double)ampc_conv_params_of(n).p; /* 1 unless is_lp */
    int64_t nc = x->shape.dims[0] * x->shape.dims[1];
    int64_t q = nc ? ampc_shape_numel(&x->shape) / nc : 0;
    if (!nc) return AMPC_OK;
    for (int64_t r = 0; r < nc; r++) {
        double acc = is_max ? -INFINITY : 0;
        for (int64_t i = 0; i < q; i++) {
            double v = ampc_ref_load_f64(x->data, x->dtype, r * q + i);
            if (is_lp)
                acc += pow(fabs(v), p);
            else if (!is_max)
                acc += v;
            else if (v > acc || (isnan(v) && !isnan(acc)))
                acc = v;
        }
        double res = is_max ? acc : is_lp ? pow(acc, 1.0 / p) : acc / (double)q;
        ampc_ref_store_f64(y->data, y->dtype, r, res);
    }
    return AMPC_OK;
}

/* ---- DeformConv ----------------------------------------------------------------------------- */

/* Channel plane x (gm->in dims) sampled at the fractional point pt by multilinear interpolation
 * over the 2^k surrounding grid points; points outside the plane count as zero (GridSample's
 * bilinear zeros padding with aligned corners, which is how ONNX defines DeformConv). */
static double sample(const double *x, const geom *gm, const double *pt) {
    int64_t lo[AMPC_MAX_RANK];
    double fr[AMPC_MAX_RANK], acc = 0;
    for (int32_t i = 0; i < gm->k; i++) {
        /* A point beyond every plane (or NaN) reads only zeros; this also keeps the int64
         * conversion below defined. */
        if (!(pt[i] > -2.0 && pt[i] < (double)gm->in[i] + 1.0)) return 0;
        double f = floor(pt[i]);
        lo[i] = (int64_t)f;
        fr[i] = pt[i] - f;
    }
    for (int32_t corner = 0; corner < (1 << gm->k); corner++) {
        double w = 1;
        int64_t off = 0;
        for (int32_t i = 0; i < gm->k && off >= 0; i++) {
            int bit = (corner >> (gm->k - 1 - i)) & 1;
            int64_t c = lo[i] + bit;
            w *= bit ? fr[i] : 1 - fr[i];
            off = c < 0 || c >= gm->in[i] ? -1 : off * gm->in[i] + c;
        }
        if (off >= 0 && w != 0) acc += w * x[off];
    }
    return acc;
}

/* DeformConv: kernel point j of output point p samples each input channel of offset group og at
 *   p * stride - pad_begin + kc_j * dilation + offset[b, og, j, :, p]
 * scaled by mask[b, og, j, p] (1 without a mask); the samples are then contracted with W as in
 * a grouped Conv. */
ampc_status ampc_ref_deform_conv(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                 ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *w = in[1], *off = in[2];
    const ampc_tensor *b = n->n_inputs > 3 ? in[3] : NULL, *mask = n->n_inputs > 4 ? in[4] : NULL;
    ampc_tensor *y = out[0];
    geom gm;
    ampc_status st = geom_init(g, n, &x->shape, &y->shape, NULL, &gm);
    if (st) return st;
    int64_t nb = x->shape.dims[0], c = x->shape.dims[1], m = y->shape.dims[1];
    int64_t group = ampc_conv_params_of(n).group, cg = c / group, mg = m / group;
    int64_t og = ampc_conv_params_of(n).offset_group, cpo = c / og;
    int64_t kn = gm.kern_n, k = gm.k, P = gm.out_n, Q = gm.in_n, oc[AMPC_MAX_RANK];
    double pt[AMPC_MAX_RANK];
    double *xd = load_all(g, n, x), *wd = xd ? load_all(g, n, w) : NULL;
    double *samp = wd ? malloc((size_t)AMPC_MAX(c * kn, 1) * sizeof *samp) : NULL;
    if (!samp) {
        st = xd && wd ? AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory") : AMPC_E_OOM;
        goto done;
    }
    for (int64_t b0 = 0; b0 < nb; b0++) {
        memset(oc, 0, sizeof oc);
        for (int64_t p = 0; p < P; p++, next_coord(oc, gm.out, gm.k)) {
            for (int64_t o = 0; o < og; o++)
                for (int64_t j = 0; j < kn; j++) {
                    int64_t oj = (b0 * og + o) * kn + j; /* (b, offset group, kernel point) */
                    for (int32_t i = 0; i < k; i++)
                        pt[i] = (double)(oc[i] * gm.stride[i] - gm.pb[i] +
                                         gm.kc[j * k + i] * gm.dil[i]) +
                                ampc_ref_load_f64(off->data, off->dtype, (oj * k + i) * P + p);
                    double mv = mask ? ampc_ref_load_f64(mask->data, mask->dtype, oj * P + p) : 1;
                    for (int64_t ci = o * cpo; ci < (o + 1) * cpo; ci++)
                        samp[ci * kn + j] = mv * sample(xd + (b0 * c + ci) * Q, &gm, pt);
                }
            for (int64_t mi = 0; mi < m; mi++) {
                int64_t gi = mi / mg;
                double acc = b ? ampc_ref_load_f64(b->data, b->dtype, mi) : 0;
                const double *wp = wd + mi * cg * kn, *sp = samp + gi * cg * kn;
                for (int64_t e = 0; e < cg * kn; e++) acc += wp[e] * sp[e];
                ampc_ref_store_f64(y->data, y->dtype, (b0 * m + mi) * P + p, acc);
            }
        }
    }
done:
    free(gm.kc);
    free(xd);
    free(wd);
    free(samp);
    return st;
}

/* ---- Col2Im --------------------------------------------------------------------------------- */

/* Col2Im: column (c * prod(block) + j, l) of batch b holds block element j of block position l;
 * it adds into image point l * stride - pad_begin + kc_j * dilation of channel c when that
 * point lies inside the image. Floats sum in double, integers in wrapping int64 (bool: or). */
ampc_status ampc_ref_col2im(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    int32_t k = y->shape.rank - 2;
    int64_t blk[AMPC_MAX_RANK] = {0};
    for (int32_t i = 0; i < k; i++) blk[i] = ampc_ref_load_i64(in[2]->data, in[2]->dtype, i);
    /* The window geometry treats the image as the "input" and the grid of block positions as
     * the "output" of a convolution-like window walk. geom_init takes the image for both and
     * reads the pads, strides and dilations; the block grid follows from them (inference has
     * checked that it has x's L positions). */
    int64_t per = 1;
    for (int32_t i = 0; i < k; i++) per *= blk[i];
    geom gm;
    ampc_status st = geom_init(g, n, &y->shape, &y->shape, blk, &gm);
    if (st) return st;
    for (int32_t i = 0; i < k; i++) {
        int64_t ext = (blk[i] - 1) * gm.dil[i] + 1;
        gm.out[i] = (gm.in[i] + gm.pb[i] + gm.pe[i] - ext) / gm.stride[i] + 1;
    }
    gm.out_n = x->shape.dims[2];
    int64_t nc = y->shape.dims[0] * y->shape.dims[1], oc[AMPC_MAX_RANK], pt[AMPC_MAX_RANK];
    int64_t ycount = ampc_shape_numel(&y->shape);
    bool fl = ampc_dtype_is_float(y->dtype);
    double *accf = fl ? calloc((size_t)AMPC_MAX(ycount, 1), sizeof *accf) : NULL;
    uint64_t *acci = fl ? NULL : calloc((size_t)AMPC_MAX(ycount, 1), sizeof *acci);
    if (!accf && !acci) {
        free(gm.kc);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    }
    for (int64_t r = 0; r < nc; r++) {
        memset(oc, 0, sizeof oc);
        for (int64_t l = 0; l < gm.out_n; l++, next_coord(oc, gm.out, gm.k))
            for (int64_t j = 0; j < per; j++) {
                int64_t off = window_point(&gm, oc, j, pt);
                if (off < 0) continue;
                int64_t src = (r * per + j) * gm.out_n + l, dst = r * gm.in_n + off;
                if (fl)
                    accf[dst] += ampc_ref_load_f64(x->data, x->dtype, src);
                else if (y->dtype == AMPC_DTYPE_BOOL)
                    acci[dst] |= (uint64_t)ampc_ref_load_i64(x->data, x->dtype, src);
                else
                    acci[dst] += (uint64_t)ampc_ref_load_i64(x->data, x->dtype, src);
            }
    }
    for (int64_t i = 0; i < ycount; i++) {
        if (fl)
            ampc_ref_store_f64(y->data, y->dtype, i, accf[i]);
        else
            ampc_ref_store_i64(y->data, y->dtype, i, (int64_t)acci[i]);
    }
    free(gm.kc);
    free(accf);
    free(acci);
    return AMPC_OK;
}
