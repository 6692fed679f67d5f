/*
 * quant.c — reference kernels for quantisation and integer arithmetic (see ir/infer/quant.c).
 *
 * Rounding is half to even (numpy's rint) and results saturate to the target type. Where the ONNX
 * reference computes in f32 (x / scale of f32 operands, DynamicQuantizeLinear's scale and zero
 * point, the combined requantisation scale) the kernels round to f32 at the same steps, so that
 * values on a rounding boundary land where the reference puts them. The integer products and
 * convolutions are exact: MatMul's and Conv's reference kernels run on the zero-point-adjusted
 * operands widened to i64 (MatMul) or f64 (Conv: integer sums far below 2^53 stay exact).
 */
#include "ref.h"
#include "ir/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t dims_prod(const ampc_shape *s, int32_t lo, int32_t hi) {
    int64_t p = 1;
    for (int32_t i = lo; i < hi; i++) p *= s->dims[i];
    return p;
}

/* Rounds v half to even and saturates it into t's range. */
static double saturate_rint(double v, ampc_dtype t) {
    double lo, hi;
    ampc_quant_range(t, &lo, &hi);
    v = nearbyint(v);
    return isnan(v) ? 0 : v < lo ? lo : v > hi ? hi : v;
}

/* v rounded to the precision of float dtype t (f64: unchanged). */
static double round_to(double v, ampc_dtype t) {
    unsigned char b[8];
    ampc_ref_store_f64(b, t, 0, v);
    return ampc_ref_load_f64(b, t, 0);
}

/* Maps element e of x to its quantisation parameter: per tensor (all to 0), per axis, or per
 * block along the axis. */
typedef struct qmap {
    int mode; /* 0 tensor, 1 axis, 2 block */
    int64_t dim, inner, block, blocks;
} qmap;

static qmap qmap_of(const ampc_node *n, const ampc_shape *x, const ampc_shape *s) {
    qmap m = {0, 1, 1, 0, 1};
    int64_t block = ampc_quant_block(n);
    if (ampc_shape_numel(s) == 1 && s->rank <= 1 && block == 0) return m;
    int32_t ax = ampc_axis_of(n, x->rank);
    m.mode = block ? 2 : 1;
    m.dim = x->dims[ax];
    m.inner = dims_prod(x, ax + 1, x->rank);
    m.block = block;
    m.blocks = block ? s->dims[ax] : m.dim;
    return m;
}

static int64_t qmap_at(const qmap *m, int64_t e) {
    if (m->mode == 0) return 0;
    int64_t i = e % m->inner, a = (e / m->inner) % m->dim, o = e / (m->inner * m->dim);
    if (m->mode == 1) return a;
    return (o * m->blocks + a / m->block) * m->inner + i;
}

ampc_status ampc_ref_quantize_linear(ampc_graph *g, const ampc_node *n,
                                     const ampc_tensor *const *in, ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *s = in[1], *z = n->n_inputs > 2 ? in[2] : NULL;
    ampc_tensor *y = out[0];
    qmap m = qmap_of(n, &x->shape, &s->shape);
    ampc_dtype dt = ampc_quant_div_type(x->dtype, s->dtype);
    int64_t cnt = ampc_shape_numel(&x->shape);
    for (int64_t e = 0; e < cnt; e++) {
        int64_t p = qmap_at(&m, e);
        double q = round_to(
            ampc_ref_load_f64(x->data, x->dtype, e) / ampc_ref_load_f64(s->data, s->dtype, p), dt);
        double zp = z ? (double)ampc_ref_load_i64(z->data, z->dtype, p) : 0;
        ampc_ref_store_f64(y->data, y->dtype, e, saturate_rint(nearbyint(q) + zp, y->dtype));
    }
    return AMPC_OK;
}

ampc_status ampc_ref_dequantize_linear(ampc_graph *g, const ampc_node *n,
                                       const ampc_tensor *const *in, ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *s = in[1], *z = n->n_inputs > 2 ? in[2] : NULL;
    ampc_tensor *y = out[0];
    qmap m = qmap_of(n, &x->shape, &s->shape);
    int64_t cnt = ampc_shape_numel(&x->shape);
    for (int64_t e = 0; e < cnt; e++) {
        int64_t p = qmap_at(&m, e);
        int64_t d = ampc_ref_load_i64(x->data, x->dtype, e) -
                    (z ? ampc_ref_load_i64(z->data, z->dtype, p) : 0);
        ampc_ref_store_f64(y->data, y->dtype, e,
                           (double)d * ampc_ref_load_f64(s->data, s->dtype, p));
    }
    return AMPC_OK;
}

/* DynamicQuantizeLinear, in f32 as the ONNX reference computes it. An all-zero input has scale 0;
 * its zero point and outputs are then 0 (the reference would divide by zero). */
ampc_status ampc_ref_dynamic_quantize_linear(ampc_graph *g, const ampc_node *n,
                                             const ampc_tensor *const *in,
                                             ampc_tensor *const *out) {
    (void)g;
    const float *x = in[0]->data;
    int64_t cnt = ampc_shape_numel(&in[0]->shape);
    float mn = 0, mx = 0;
    for (int64_t e = 0; e < cnt; e++) {
        if (x[e] < mn) mn = x[e];
        if (x[e] > mx) mx = x[e];
    }
    volatile float scale = (mx - mn) / 255.0f; /* volatile: round to f32 here, not later */
    float zpf = 0;
    if (scale != 0) {
        volatile float izp = 0.0f - mn / scale;
        zpf = (float)saturate_rint(izp, AMPC_DTYPE_U8);
    }
    uint8_t *y = out[0]->data;
    for (int64_t e = 0; e < cnt; e++) {
        volatile float q = scale != 0 ? x[e] / scale : 0.0f;
        y[e] = (uint8_t)saturate_rint(nearbyint(q) + zpf, AMPC_DTYPE_U8);
    }
    if (n->n_outputs > 1) ((float *)out[1]->data)[0] = scale;
    if (n->n_outputs > 2) ((uint8_t *)out[2]->data)[0] = (uint8_t)zpf;
    return AMPC_OK;
}

/* ---- integer matrix products ---------------------------------------------------------------- */

/* Index into a per-tensor / per-row / per-column parameter p (see check_rowcol in
 * ir/infer/quant.c) for element e of the matrix operand x (row = true: rows). */
static int64_t rowcol_at(const ampc_tensor *p, const ampc_tensor *x, int64_t e, bool row) {
    int64_t pn = ampc_shape_numel(&p->shape);
    if (pn == 1) return 0;
    int32_t r = x->shape.rank;
    int64_t cols = x->shape.dims[r - 1], rows = r >= 2 ? x->shape.dims[r - 2] : 1;
    int64_t c = e % cols, rw = (e / cols) % rows;
    if (p->shape.rank == 1) return row ? rw : c;
    /* Same rank, broadcasting batch dims: walk e's coordinates against p's dims. */
    int64_t off = 0, st = 1, rest = e;
    for (int32_t d = r - 1; d >= 0; d--) {
        int64_t cd = rest % x->shape.dims[d];
        rest /= x->shape.dims[d];
        if (p->shape.dims[d] != 1) off += cd * st;
        st *= p->shape.dims[d];
    }
    return off;
}

/* The operand m minus its zero point (optional), widened to an i64 tensor (malloc'ed data). */
static bool widen_minus_zp(const ampc_tensor *x, const ampc_tensor *z, bool row, ampc_tensor *w) {
    int64_t cnt = ampc_shape_numel(&x->shape);
    int64_t *d = malloc((size_t)(cnt ? cnt : 1) * sizeof *d);
    if (!d) return false;
    for (int64_t e = 0; e < cnt; e++)
        d[e] = ampc_ref_load_i64(x->data, x->dtype, e) -
               (z ? ampc_ref_load_i64(z->data, z->dtype, rowcol_at(z, x, e, row)) : 0);
    *w = (ampc_tensor){AMPC_DTYPE_I64, x->shape, d};
    return true;
}

/* (a - za) @ (b - zb) into an i64 tensor of y's shape (malloc'ed data in *acc). */
static ampc_status int_matmul(ampc_graph *g, const ampc_node *n, const ampc_tensor *a,
                              const ampc_tensor *za, const ampc_tensor *b, const ampc_tensor *zb,
                              const ampc_shape *ys, ampc_tensor *acc) {
    ampc_tensor wa = {0}, wb = {0};
    int64_t cnt = ampc_shape_numel(ys);
    *acc = (ampc_tensor){AMPC_DTYPE_I64, *ys, malloc((size_t)(cnt ? cnt : 1) * sizeof(int64_t))};
    if (!acc->data || !widen_minus_zp(a, za, true, &wa) || !widen_minus_zp(b, zb, false, &wb)) {
        free(acc->data), free(wa.data), free(wb.data);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory widening the operands");
    }
    const ampc_tensor *ins[2] = {&wa, &wb};
    ampc_tensor *outs[1] = {acc};
    ampc_status st = ampc_ref_matmul(g, n, ins, outs);
    free(wa.data), free(wb.data);
    if (st) free(acc->data);
    return st;
}

ampc_status ampc_ref_matmul_integer(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                    ampc_tensor *const *out) {
    ampc_tensor acc;
    const ampc_tensor *za = n->n_inputs > 2 ? in[2] : NULL, *zb = n->n_inputs > 3 ? in[3] : NULL;
    ampc_status st = int_matmul(g, n, in[0], za, in[1], zb, &out[0]->shape, &acc);
    if (st) return st;
    int64_t cnt = ampc_shape_numel(&acc.shape);
    for (int64_t e = 0; e < cnt; e++)
        ((int32_t *)out[0]->data)[e] = (int32_t)(uint32_t)((int64_t *)acc.data)[e];
    free(acc.data);
    return AMPC_OK;
}

/* The requantisation multiplier sa * sb / sy, in f32 (the reference's scalar arithmetic). */
static double multiplier(double sa, double sb, double sy) {
    volatile float p = (float)sa * (float)sb;
    volatile float q = p / (float)sy;
    return q;
}

ampc_status ampc_ref_qlinear_matmul(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                    ampc_tensor *const *out) {
    const ampc_tensor *a = in[0], *sa = in[1], *za = in[2], *b = in[3], *sb = in[4], *zb = in[5];
    const ampc_tensor *sy = in[6], *zy = in[7];
    ampc_tensor *y = out[0], acc;
    ampc_status st = int_matmul(g, n, a, za, b, zb, &y->shape, &acc);
    if (st) return st;
    /* Output element (.., i, j) takes a's row i scale and b's column j scale. A 1-D operand
     * has one row (a) or one column (b). */
    int32_t ra = a->shape.rank, rb = b->shape.rank;
    int64_t cols = rb >= 2 ? b->shape.dims[rb - 1] : 1, rows = ra >= 2 ? a->shape.dims[ra - 2] : 1;
    int64_t k = a->shape.dims[ra - 1], cnt = ampc_shape_numel(&y->shape);
    double vsy = ampc_ref_load_f64(sy->data, sy->dtype, 0);
    double vzy = (double)ampc_ref_load_i64(zy->data, zy->dtype, 0);
    bool per_tensor = ampc_shape_numel(&sa->shape) == 1 && ampc_shape_numel(&sb->shape) == 1;
    for (int64_t e = 0; e < cnt; e++) {
        int64_t j = e % cols, i = (e / cols) % rows;
        /* The scales are per tensor or 1-D (per row of a, per column of b): look them up at
         * row i of a and column j of b. */
        double va =
            ampc_ref_load_f64(sa->data, sa->dtype, per_tensor ? 0 : rowcol_at(sa, a, i * k, true));
        double vb =
            ampc_ref_load_f64(sb->data, sb->dtype, per_tensor ? 0 : rowcol_at(sb, b, j, false));
        double v = (double)((int64_t *)acc.data)[e] * multiplier(va, vb, vsy) + vzy;
        ampc_ref_store_f64(y->data, y->dtype, e, saturate_rint(v, y->dtype));
    }
    free(acc.data);
    return AMPC_OK;
}

/* ---- integer convolutions ------------------------------------------------------------------- */

/* Conv of (x - zx) and (w - zw) through Conv's reference kernel on f64 operands (exact for these
 * integer sums); zw holds one element or one per output channel. The result is f64 [N, M, ...]
 * in *acc (malloc'ed data). */
static ampc_status int_conv(ampc_graph *g, const ampc_node *n, const ampc_tensor *x,
                            const ampc_tensor *zx, const ampc_tensor *w, const ampc_tensor *zw,
                            const ampc_shape *ys, ampc_tensor *acc) {
    int64_t nx = ampc_shape_numel(&x->shape), nw = ampc_shape_numel(&w->shape);
    int64_t ny = ampc_shape_numel(ys), per_m = w->shape.dims[0] ? nw / w->shape.dims[0] : 0;
    double *dx = malloc((size_t)(nx ? nx : 1) * sizeof *dx);
    double *dw = malloc((size_t)(nw ? nw : 1) * sizeof *dw);
    double *dy = calloc((size_t)(ny ? ny : 1), sizeof *dy);
    if (!dx || !dw || !dy) {
        free(dx), free(dw), free(dy);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory widening the operands");
    }
    double vzx = zx ? (double)ampc_ref_load_i64(zx->data, zx->dtype, 0) : 0;
    for (int64_t e = 0; e < nx; e++) dx[e] = (double)ampc_ref_load_i64(x->data, x->dtype, e) - vzx;
    bool per_channel = zw && ampc_shape_numel(&zw->shape) > 1;
    for (int64_t e = 0; e < nw; e++) {
        double z =
            zw ? (double)ampc_ref_load_i64(zw->data, zw->dtype, per_channel ? e / per_m : 0) : 0;
        dw[e] = (double)ampc_ref_load_i64(w->data, w->dtype, e) - z;
    }
    ampc_tensor tx = {AMPC_DTYPE_F64, x->shape, dx}, tw = {AMPC_DTYPE_F64, w->shape, dw};
    *acc = (ampc_tensor){AMPC_DTYPE_F64, *ys, dy};
    const ampc_tensor *ins[2] = {&tx, &tw};
    ampc_tensor *outs[1] = {acc};
    ampc_node fake = *n; /* Conv's kernel reads the window attributes; no bias */
    fake.n_inputs = 2;
    ampc_status st = ampc_ref_conv(g, &fake, ins, outs);
    free(dx), free(dw);
    if (st) free(dy);
    return st;
}

ampc_status ampc_ref_conv_integer(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                  ampc_tensor *const *out) {
    ampc_tensor acc;
    const ampc_tensor *zx = n->n_inputs > 2 ? in[2] : NULL, *zw = n->n_inputs > 3 ? in[3] : NULL;
    ampc_status st = int_conv(g, n, in[0], zx, in[1], zw, &out[0]->shape, &acc);
    if (st) return st;
    int64_t cnt = ampc_shape_numel(&acc.shape);
    for (int64_t e = 0; e < cnt; e++)
        ((int32_t *)out[0]->data)[e] = (int32_t)(int64_t)((double *)acc.data)[e];
    free(acc.data);
    return AMPC_OK;
}

/* QLinearConv: the integer conv plus the i32 bias, times x_scale * w_scale / y_scale (w_scale
 * per output channel or not), plus y_zero_point, rounded half to even and saturated. */
ampc_status ampc_ref_qlinear_conv(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                  ampc_tensor *const *out) {
    const ampc_tensor *sx = in[1], *sw = in[4], *sy = in[6], *zy = in[7];
    const ampc_tensor *bias = n->n_inputs > 8 ? in[8] : NULL;
    ampc_tensor *y = out[0], acc;
    ampc_status st = int_conv(g, n, in[0], in[2], in[3], in[5], &y->shape, &acc);
    if (st) return st;
    int64_t M = y->shape.dims[1], plane = dims_prod(&y->shape, 2, y->shape.rank);
    int64_t cnt = ampc_shape_numel(&y->shape);
    bool per_channel = ampc_shape_numel(&sw->shape) > 1;
    double vsx = ampc_ref_load_f64(sx->data, sx->dtype, 0),
           vsy = ampc_ref_load_f64(sy->data, sy->dtype, 0);
    double vzy = (double)ampc_ref_load_i64(zy->data, zy->dtype, 0);
    for (int64_t e = 0; e < cnt; e++) {
        int64_t m = (e / plane) % M;
        double v = ((double *)acc.data)[e];
        if (bias) v += (double)ampc_ref_load_i64(bias->data, bias->dtype, m);
        double s =
            multiplier(vsx, ampc_ref_load_f64(sw->data, sw->dtype, per_channel ? m : 0), vsy);
        ampc_ref_store_f64(y->data, y->dtype, e, saturate_rint(v * s + vzy, y->dtype));
    }
    free(acc.data);
    return AMPC_OK;
}
