/*
 * quant.c — inference for quantisation and integer arithmetic: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv.
 *
 * Quantisation parameters (a scale and an optional zero point of one shape) come in three
 * granularities, told apart by the scale's shape: per tensor (one element), per axis (1-D, one
 * entry per index of `axis`) and blocked (opset 21: the input's rank, with dim `axis` split into
 * blocks of `block_size`). The quantised types are the integer dtypes ampc has: u8, i8, u16, i16
 * (ONNX's 4-bit and 8-bit float types have no ampc dtype).
 *
 * The integer convolutions reuse Conv's inference: a stand-in node whose operands carry Conv's
 * dtype (same names, same attributes, same id and op for the diagnostics) gets the output shape.
 */
#include "infer.h"

#include <string.h>

static int64_t diag_count(const ampc_graph *g) { return (int64_t)g->diag.n + g->diag.dropped; }

static const char *shp(const ampc_value *v, char *buf) {
    return ampc_shape_str(&v->shape, buf, AMPC_SHAPE_STR_MAX);
}

static bool read_int(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                     int64_t *out) {
    int64_t before = diag_count(g);
    *out = ampc_ir_attr_int(g, n, name, dflt);
    return diag_count(g) == before;
}

static bool present(const ampc_node *n, int32_t i) { return i < n->n_inputs && n->inputs[i]; }

/* The quantised types: u8, i8, u16, i16. */
static bool qtype(ampc_dtype t) {
    return t == AMPC_DTYPE_U8 || t == AMPC_DTYPE_I8 || t == AMPC_DTYPE_U16 || t == AMPC_DTYPE_I16;
}

static bool need_qtype(ampc_graph *g, const ampc_node *n, int32_t i, bool eight_bit_only) {
    ampc_dtype t = n->inputs[i]->dtype;
    if (eight_bit_only ? t == AMPC_DTYPE_U8 || t == AMPC_DTYPE_I8 : qtype(t)) return true;
    AMPC_FAIL(g, n, AMPC_E_DTYPE, "input %d '%s' must be %s, got %s", i, n->inputs[i]->name,
              eight_bit_only ? "u8 or i8" : "u8, i8, u16 or i16", ampc_dtype_name(t));
    return false;
}

/* A scale or zero point that must hold one element. */
static bool need_scalar(ampc_graph *g, const ampc_node *n, int32_t i) {
    const ampc_value *v = n->inputs[i];
    if (ampc_ir_numel(v) == 1 && v->shape.rank <= 1) return true;
    char s[AMPC_SHAPE_STR_MAX];
    AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' must hold one element (per-tensor), got %s", i,
              v->name, shp(v, s));
    return false;
}

/* Checks the scale (input si) and zero point (input zi, optional) of QuantizeLinear and
 * DequantizeLinear against input 0, from the attributes axis and block_size. */
static ampc_status check_qparams(ampc_graph *g, const ampc_node *n, int32_t si, int32_t zi) {
    const ampc_value *x = n->inputs[0], *s = n->inputs[si];
    char sx[AMPC_SHAPE_STR_MAX], ss[AMPC_SHAPE_STR_MAX];
    int64_t axis, block;
    if (!ampc_infer_axis_attr(g, n, &axis) || !read_int(g, n, "block_size", 0, &block))
        return AMPC_E_ATTR;
    if (!ampc_infer_check_dtype(g, n, si, DT_FLOAT)) return AMPC_E_DTYPE;
    if (present(n, zi)) {
        const ampc_value *z = n->inputs[zi];
        if (!ampc_shape_eq(&z->shape, &s->shape))
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input %d '%s' (zero point) must have the shape of input %d '%s' "
                             "(scale) %s, got %s",
                             zi, z->name, si, s->name, shp(s, ss), shp(z, sx));
    }
    if (block < 0)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'block_size' must be non-negative, got %lld",
                         (long long)block);
    if (ampc_ir_numel(s) == 1 && s->shape.rank <= 1 && block == 0) return AMPC_OK; /* per tensor */
    int32_t ax;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "attribute 'axis'", &ax)) return AMPC_E_ATTR;
    int64_t dim = x->shape.dims[ax];
    if (block == 0) {
        if (s->shape.rank != 1 || s->shape.dims[0] != dim)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input %d '%s' (scale) must hold one element (per tensor) or be "
                             "[%lld] (per axis %d of input 0 '%s' %s), got %s",
                             si, s->name, (long long)dim, ax, x->name, shp(x, sx), shp(s, ss));
        return AMPC_OK;
    }
    ampc_shape want = x->shape;
    want.dims[ax] = dim / block + (dim % block != 0);
    if (!ampc_shape_eq(&s->shape, &want)) {
        char sw[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input %d '%s' (scale) must be %s for blocks of %lld along axis %d of "
                         "input 0 '%s' %s, got %s",
                         si, s->name, ampc_shape_str(&want, sw, sizeof sw), (long long)block, ax,
                         x->name, shp(x, sx), shp(s, ss));
    }
    return AMPC_OK;
}

/* QuantizeLinear: y = saturate(round_half_even(x / scale) + zero_point), of the zero point's
 * dtype (else `output_dtype`, else u8). */
ampc_status ampc_infer_quantize_linear(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t code;
    if (x->dtype != AMPC_DTYPE_I32 && !ampc_infer_check_dtype(g, n, 0, DT_FLOAT))
        return AMPC_E_DTYPE;
    if (!read_int(g, n, "output_dtype", 0, &code)) return AMPC_E_ATTR;
    ampc_dtype t = AMPC_DTYPE_U8,
               want = code ? ampc_dtype_from_onnx((int32_t)code) : AMPC_DTYPE_UNDEFINED;
    if (code && !qtype(want))
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "attribute 'output_dtype' %lld is not a quantised type ampc has (u8, i8, "
                         "u16, i16)",
                         (long long)code);
    if (present(n, 2)) {
        if (!need_qtype(g, n, 2, false)) return AMPC_E_DTYPE;
        t = n->inputs[2]->dtype;
        if (code && t != want)
            return AMPC_FAIL(g, n, AMPC_E_DTYPE,
                             "attribute 'output_dtype' (%s) and input 2 '%s' (%s) disagree",
                             ampc_dtype_name(want), n->inputs[2]->name, ampc_dtype_name(t));
    } else if (code) {
        t = want;
    }
    ampc_status st = check_qparams(g, n, 1, 2);
    if (st) return st;
    ampc_infer_set(n, 0, t, &x->shape);
    return AMPC_OK;
}

/* DequantizeLinear: y = (x - zero_point) * scale, of the scale's dtype. An i32 input (a bias)
 * has no zero point other than 0. */
ampc_status ampc_infer_dequantize_linear(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (x->dtype != AMPC_DTYPE_I32 && !need_qtype(g, n, 0, false)) return AMPC_E_DTYPE;
    if (present(n, 2) && !ampc_infer_same_dtype(g, n, 0, 2)) return AMPC_E_DTYPE;
    ampc_status st = check_qparams(g, n, 1, 2);
    if (st) return st;
    ampc_infer_set(n, 0, n->inputs[1]->dtype, &x->shape);
    return AMPC_OK;
}

/* DynamicQuantizeLinear: x (f32) -> y (u8), y_scale (f32 scalar), y_zero_point (u8 scalar),
 * the scale and zero point mapping [min(x, 0), max(x, 0)] onto [0, 255]. */
ampc_status ampc_infer_dynamic_quantize_linear(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (x->dtype != AMPC_DTYPE_F32)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 0 '%s' must be f32, got %s", x->name,
                         ampc_dtype_name(x->dtype));
    ampc_shape scalar = {0, {0}};
    ampc_infer_set(n, 0, AMPC_DTYPE_U8, &x->shape);
    if (n->n_outputs > 1) ampc_infer_set(n, 1, AMPC_DTYPE_F32, &scalar);
    if (n->n_outputs > 2) ampc_infer_set(n, 2, AMPC_DTYPE_U8, &scalar);
    return AMPC_OK;
}

/* ---- integer matrix products ---------------------------------------------------------------- */

/* numpy matmul shape of inputs ia and ib (see ir/infer/contract.c). */
static ampc_status matmul_shape(ampc_graph *g, const ampc_node *n, int32_t ia, int32_t ib,
                                ampc_shape *out) {
    const ampc_value *a = n->inputs[ia], *b = n->inputs[ib];
    const ampc_shape *sa = &a->shape, *sb = &b->shape;
    char as[AMPC_SHAPE_STR_MAX], bs[AMPC_SHAPE_STR_MAX];
    shp(a, as), shp(b, bs);
    if (sa->rank == 0 || sb->rank == 0)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "inputs %d '%s' and %d '%s' must have rank 1 or more, "
                         "got %s and %s",
                         ia, a->name, ib, b->name, as, bs);
    int64_t ka = sa->dims[sa->rank - 1], kb = sb->rank >= 2 ? sb->dims[sb->rank - 2] : sb->dims[0];
    if (ka != kb)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "the inner dims differ: input %d '%s' is %s, input %d '%s' is %s", ia,
                         a->name, as, ib, b->name, bs);
    int32_t ba = sa->rank >= 2 ? sa->rank - 2 : 0, bb = sb->rank >= 2 ? sb->rank - 2 : 0;
    ampc_shape o = {AMPC_MAX(ba, bb), {0}};
    for (int32_t d = 0; d < o.rank; d++) {
        int32_t da = d - (o.rank - ba), db = d - (o.rank - bb);
        int64_t x = da >= 0 ? sa->dims[da] : 1, y = db >= 0 ? sb->dims[db] : 1;
        if (x != y && x != 1 && y != 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "the batch dims do not broadcast: input %d '%s' is %s, input %d '%s' "
                             "is %s",
                             ia, a->name, as, ib, b->name, bs);
        o.dims[d] = x == 1 ? y : x;
    }
    if (o.rank + (sa->rank >= 2) + (sb->rank >= 2) > AMPC_MAX_RANK)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "output rank exceeds ampc's maximum %d",
                         AMPC_MAX_RANK);
    if (sa->rank >= 2) o.dims[o.rank++] = sa->dims[sa->rank - 2];
    if (sb->rank >= 2) o.dims[o.rank++] = sb->dims[sb->rank - 1];
    *out = o;
    return AMPC_OK;
}

/* A per-row (row = true: of matrix input m) or per-column parameter of a matrix product: one
 * element, a 1-D vector of the rows (columns), or (nd: MatMulInteger's zero points) a tensor of
 * the input's rank whose row (column) dim matches and whose other dims broadcast, with 1 for the
 * columns (rows). */
static ampc_status check_rowcol(ampc_graph *g, const ampc_node *n, int32_t pi, int32_t m, bool row,
                                bool nd) {
    const ampc_value *p = n->inputs[pi], *x = n->inputs[m];
    int32_t r = x->shape.rank;
    int32_t di = row ? (r >= 2 ? r - 2 : -1) : (r >= 2 ? r - 1 : -1);
    int64_t want = di >= 0 ? x->shape.dims[di] : 1;
    if (ampc_ir_numel(p) == 1 && p->shape.rank <= 1) return AMPC_OK;
    if (p->shape.rank == 1 && p->shape.dims[0] == want) return AMPC_OK;
    bool ok = nd && p->shape.rank == r && r >= 2;
    for (int32_t d = 0; ok && d < r; d++) {
        int64_t pd = p->shape.dims[d];
        if (d == di)
            ok = pd == want;
        else if (d >= r - 2)
            ok = pd == 1;
        else
            ok = pd == 1 || pd == x->shape.dims[d];
    }
    if (ok) return AMPC_OK;
    char sp[AMPC_SHAPE_STR_MAX], sx[AMPC_SHAPE_STR_MAX];
    return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                     "input %d '%s' must hold one element or one per %s (%lld) of input %d '%s' "
                     "%s, got %s",
                     pi, p->name, row ? "row" : "column", (long long)want, m, x->name, shp(x, sx),
                     shp(p, sp));
}

/* A zero point (optional input zi) for the 8-bit input m: its dtype and a per-tensor, per-row or
 * per-column shape. */
static ampc_status check_zero_point(ampc_graph *g, const ampc_node *n, int32_t zi, int32_t m,
                                    bool row) {
    if (!present(n, zi)) return AMPC_OK;
    if (!ampc_infer_same_dtype(g, n, m, zi)) return AMPC_E_DTYPE;
    return check_rowcol(g, n, zi, m, row, n->op == AMPC_OP_MATMUL_INTEGER);
}

/* MatMulInteger: (A - a_zero_point) @ (B - b_zero_point) in i32; A and B are u8 or i8. */
ampc_status ampc_infer_matmul_integer(ampc_graph *g, ampc_node *n) {
    ampc_shape y;
    ampc_status st;
    if (!need_qtype(g, n, 0, true) || !need_qtype(g, n, 1, true)) return AMPC_E_DTYPE;
    if ((st = matmul_shape(g, n, 0, 1, &y)) || (st = check_zero_point(g, n, 2, 0, true)) ||
        (st = check_zero_point(g, n, 3, 1, false)))
        return st;
    ampc_infer_set(n, 0, AMPC_DTYPE_I32, &y);
    return AMPC_OK;
}

/* A scale (input si): a float per tensor, row or column. */
static ampc_status check_scale(ampc_graph *g, const ampc_node *n, int32_t si, int32_t m, bool row) {
    if (!ampc_infer_check_dtype(g, n, si, DT_FLOAT)) return AMPC_E_DTYPE;
    return check_rowcol(g, n, si, m, row, false);
}

/* QLinearMatMul: a (0), a_scale, a_zero_point, b (3), b_scale, b_zero_point, y_scale,
 * y_zero_point -> y of y_zero_point's dtype: saturate(round((a - za) @ (b - zb) * sa * sb / sy)
 * + zy). */
ampc_status ampc_infer_qlinear_matmul(ampc_graph *g, ampc_node *n) {
    ampc_shape y;
    ampc_status st;
    if (!need_qtype(g, n, 0, true) || !need_qtype(g, n, 3, true) || !need_qtype(g, n, 7, true))
        return AMPC_E_DTYPE;
    if ((st = matmul_shape(g, n, 0, 3, &y)) || (st = check_scale(g, n, 1, 0, true)) ||
        (st = check_zero_point(g, n, 2, 0, true)) || (st = check_scale(g, n, 4, 3, false)) ||
        (st = check_zero_point(g, n, 5, 3, false)))
        return st;
    if (!ampc_infer_check_dtype(g, n, 6, DT_FLOAT) || !need_scalar(g, n, 6) ||
        !need_scalar(g, n, 7))
        return AMPC_E_SHAPE;
    ampc_infer_set(n, 0, n->inputs[7]->dtype, &y);
    return AMPC_OK;
}

/* ---- integer convolutions ------------------------------------------------------------------- */

/* Conv's output shape for activation input xi and weight input wi, through Conv's inference on a
 * stand-in node. */
static ampc_status conv_shape(ampc_graph *g, const ampc_node *n, int32_t xi, int32_t wi,
                              ampc_shape *y) {
    ampc_value fx = *n->inputs[xi], fw = *n->inputs[wi], fy = {0};
    fx.dtype = fw.dtype = AMPC_DTYPE_F32;
    fx.data = fw.data = NULL;
    ampc_value *ins[2] = {&fx, &fw}, *outs[1] = {&fy};
    ampc_node fake = *n;
    fake.inputs = ins;
    fake.n_inputs = 2;
    fake.outputs = outs;
    fake.n_outputs = 1;
    ampc_status st = ampc_infer_conv(g, &fake);
    if (st == AMPC_OK) *y = fy.shape;
    return st;
}

/* The per-output-channel parameter pi (scale or zero point of the weights): one element or [M]. */
static ampc_status check_per_channel(ampc_graph *g, const ampc_node *n, int32_t pi, int32_t wi) {
    const ampc_value *p = n->inputs[pi], *w = n->inputs[wi];
    if (ampc_ir_numel(p) == 1 && p->shape.rank <= 1) return AMPC_OK;
    int64_t m = w->shape.rank ? w->shape.dims[0] : 1;
    if (p->shape.rank == 1 && p->shape.dims[0] == m) return AMPC_OK;
    char sp[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
    return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                     "input %d '%s' must hold one element or one per output channel (%lld) of "
                     "input %d '%s' %s, got %s",
                     pi, p->name, (long long)m, wi, w->name, shp(w, sw), shp(p, sp));
}

/* ConvInteger: Conv of (x - x_zero_point) and (w - w_zero_point) in i32; x and w u8 or i8. */
ampc_status ampc_infer_conv_integer(ampc_graph *g, ampc_node *n) {
    ampc_shape y;
    ampc_status st;
    if (!need_qtype(g, n, 0, true) || !need_qtype(g, n, 1, true)) return AMPC_E_DTYPE;
    if ((st = conv_shape(g, n, 0, 1, &y))) return st;
    if (present(n, 2) && (!ampc_infer_same_dtype(g, n, 0, 2) || !need_scalar(g, n, 2)))
        return AMPC_E_SHAPE;
    if (present(n, 3) &&
        (!ampc_infer_same_dtype(g, n, 1, 3) || (st = check_per_channel(g, n, 3, 1))))
        return st ? st : AMPC_E_DTYPE;
    ampc_infer_set(n, 0, AMPC_DTYPE_I32, &y);
    return AMPC_OK;
}

/* QLinearConv: x (0), x_scale, x_zero_point, w (3), w_scale, w_zero_point, y_scale,
 * y_zero_point, B (8, optional i32 [M]) -> y of y_zero_point's dtype. */
ampc_status ampc_infer_qlinear_conv(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *w = n->inputs[3];
    char sx[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
    ampc_shape y;
    ampc_status st;
    if (!need_qtype(g, n, 0, true) || !need_qtype(g, n, 3, true) || !need_qtype(g, n, 7, true))
        return AMPC_E_DTYPE;
    /* What Conv's inference would report against its input 1 is checked here first, so the
     * message names the weights by their index in this op. */
    if (x->shape.rank >= 3 && w->shape.rank != x->shape.rank)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 3 '%s' must have the rank of input 0 '%s' (2 channel dims and %d "
                         "kernel dims): input 0 is %s, input 3 is %s",
                         w->name, x->name, x->shape.rank - 2, shp(x, sx), shp(w, sw));
    if ((st = conv_shape(g, n, 0, 3, &y))) return st;
    if (!ampc_infer_check_dtype(g, n, 1, DT_FLOAT) || !ampc_infer_check_dtype(g, n, 4, DT_FLOAT) ||
        !ampc_infer_check_dtype(g, n, 6, DT_FLOAT))
        return AMPC_E_DTYPE;
    if (!need_scalar(g, n, 1) || !need_scalar(g, n, 2) || !need_scalar(g, n, 6) ||
        !need_scalar(g, n, 7))
        return AMPC_E_SHAPE;
    if (!ampc_infer_same_dtype(g, n, 0, 2) || !ampc_infer_same_dtype(g, n, 3, 5))
        return AMPC_E_DTYPE;
    if ((st = check_per_channel(g, n, 4, 3)) || (st = check_per_channel(g, n, 5, 3))) return st;
    if (present(n, 8)) {
        const ampc_value *b = n->inputs[8];
        if (b->dtype != AMPC_DTYPE_I32 || b->shape.rank != 1 ||
            b->shape.dims[0] != w->shape.dims[0])
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 8 '%s' (bias) must be i32 [%lld] (one per output channel), "
                             "got %s%s",
                             b->name, (long long)w->shape.dims[0], ampc_dtype_name(b->dtype),
                             shp(b, sx));
    }
    ampc_infer_set(n, 0, n->inputs[7]->dtype, &y);
    return AMPC_OK;
}
