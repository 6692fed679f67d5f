/*
 * conv.c — inference for convolution and pooling: Conv, ConvTranspose, DeformConv, MaxPool,
 * AveragePool, LpPool, the global pools, and Col2Im (the scatter-add inverse of im2col, whose block
 * positions follow the same window rules). Activations are N x C x D1 x ... x Dk (k >= 1 spatial
 * dims, NCHW order).
 *
 * The window attributes (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) are read
 * and checked once by read_window(); every output spatial size then follows the ONNX formulas,
 * with ek = (kernel - 1) * dilation + 1 the extent a dilated kernel covers:
 *   NOTSET, VALID (pads 0):  out = floor((in + pad_begin + pad_end - ek) / stride) + 1
 *     with ceil_mode: ceil instead of floor, then the last window is dropped when it would start
 *     in the right padding ((out - 1) * stride >= in + pad_begin)
 *   SAME_UPPER, SAME_LOWER:  out = ceil(in / stride); the total padding
 *     max(0, (out - 1) * stride + ek - in) is split evenly, the odd one at the end (UPPER) or
 *     at the beginning (LOWER)
 * ConvTranspose inverts this (see infer_conv_transpose). Every sum or product of attribute
 * values is checked for int64 overflow: attributes come from the user and may be absurd.
 */
#include "infer.h"
#include "ir/conv.h"

#include <string.h>

typedef enum auto_pad { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID } auto_pad;

/* The window of a conv or pool along each of the k spatial dims. */
typedef struct window {
    int32_t k;                     /* spatial dims */
    int64_t kernel[AMPC_MAX_RANK]; /* kernel size per spatial dim */
    int64_t ext[AMPC_MAX_RANK];    /* dilated extent (kernel - 1) * dilation + 1 */
    int64_t stride[AMPC_MAX_RANK], dil[AMPC_MAX_RANK];
    int64_t pad[2 * AMPC_MAX_RANK]; /* ONNX order: k begins, then k ends */
    auto_pad mode;
    bool ceil_mode;
} window;

/* Diagnostics recorded so far (kept and dropped): the attribute readers of ir.h report a
 * mistyped attribute by recording one and returning the default. */
static int64_t diag_count(const ampc_graph *g) { return (int64_t)g->diag.n + g->diag.dropped; }

static ampc_status overflow(ampc_graph *g, const ampc_node *n, const char *what) {
    return AMPC_FAIL(g, n, AMPC_E_OVERFLOW, "%s overflows a 64-bit integer", what);
}

/* Reads an int attribute that must lie in [lo, hi]. */
static ampc_status read_int(ampc_graph *g, ampc_node *n, const char *name, int64_t dflt, int64_t lo,
                            int64_t hi, int64_t *out) {
    int64_t before = diag_count(g);
    *out = ampc_ir_attr_int(g, n, name, dflt);
    if (diag_count(g) != before) return AMPC_E_ATTR;
    if (*out < lo || *out > hi)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be in [%lld, %lld], got %lld",
                         name, (long long)lo, (long long)hi, (long long)*out);
    return AMPC_OK;
}

/* Reads an ints attribute of exactly `count` entries, each >= lo; absent gives `dflt` for every
 * entry. `per` says what the entries are, for the message. */
static ampc_status read_ints(ampc_graph *g, ampc_node *n, const char *name, int32_t count,
                             int64_t dflt, int64_t lo, const char *per, int64_t *out) {
    int32_t got;
    int64_t before = diag_count(g);
    const int64_t *v = ampc_ir_attr_ints(g, n, name, &got);
    if (diag_count(g) != before) return AMPC_E_ATTR;
    if (!v && !ampc_ir_attr_find(n, name)) {
        for (int32_t i = 0; i < count; i++) out[i] = dflt;
        return AMPC_OK;
    }
    if (got != count)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must have %d entries (%s), got %d",
                         name, count, per, got);
    for (int32_t i = 0; i < count; i++) {
        if (v[i] < lo)
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' entry %d must be %s, got %lld",
                             name, i, lo > 0 ? "positive" : "non-negative", (long long)v[i]);
        out[i] = v[i];
    }
    return AMPC_OK;
}

static ampc_status read_auto_pad(ampc_graph *g, ampc_node *n, auto_pad *out) {
    int64_t before = diag_count(g);
    const char *s = ampc_ir_attr_string(g, n, "auto_pad", "NOTSET");
    if (diag_count(g) != before) return AMPC_E_ATTR;
    if (!strcmp(s, "NOTSET"))
        *out = PAD_NOTSET;
    else if (!strcmp(s, "SAME_UPPER"))
        *out = PAD_SAME_UPPER;
    else if (!strcmp(s, "SAME_LOWER"))
        *out = PAD_SAME_LOWER;
    else if (!strcmp(s, "VALID"))
        *out = PAD_VALID;
    else
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'auto_pad' must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, "
                         "got \"%s\"",
                         s);
    return AMPC_OK;
}

/* Input 0 must be N x C x spatial dims. */
static ampc_status check_activation(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (x->shape.rank >= 3) return AMPC_OK;
    char s[AMPC_SHAPE_STR_MAX];
    return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                     "input 0 '%s' must be N x C x D1 x ... (rank 3 or more), got %s", x->name,
                     ampc_shape_str(&x->shape, s, sizeof s));
}

/* Reads the window attributes for k spatial dims. `kernel` holds the kernel from the weights
 * (Conv, ConvTranspose: the attribute, when present, must agree) or is NULL (pools: the
 * attribute is required). */
static ampc_status read_window(ampc_graph *g, ampc_node *n, int32_t k, const int64_t *kernel,
                               window *w) {
    ampc_status st;
    memset(w, 0, sizeof *w);
    w->k = k;
    const ampc_attr *ka = ampc_ir_attr_find(n, "kernel_shape");
    if (!ka && !kernel)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'kernel_shape' is required (one entry per spatial dim)");
    if (ka) {
        st = read_ints(g, n, "kernel_shape", k, 1, 1, "one per spatial dim of input 0", w->kernel);
        if (st != AMPC_OK) return st;
        if (kernel && memcmp(kernel, w->kernel, (size_t)k * sizeof *kernel)) {
            ampc_shape a = {k, {0}}, b = {k, {0}};
            memcpy(a.dims, w->kernel, (size_t)k * sizeof *kernel);
            memcpy(b.dims, kernel, (size_t)k * sizeof *kernel);
            char sa[AMPC_SHAPE_STR_MAX], sb[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'kernel_shape' %s does not match the kernel dims %s of "
                             "input 1 '%s' %s",
                             ampc_shape_str(&a, sa, sizeof sa), ampc_shape_str(&b, sb, sizeof sb),
                             n->inputs[1]->name,
                             ampc_shape_str(&n->inputs[1]->shape, sw, sizeof sw));
        }
    } else {
        memcpy(w->kernel, kernel, (size_t)k * sizeof *kernel);
        for (int32_t i = 0; i < k; i++)
            if (kernel[i] < 1) {
                char sw[AMPC_SHAPE_STR_MAX];
                return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 1 '%s' has an empty kernel: %s",
                                 n->inputs[1]->name,
                                 ampc_shape_str(&n->inputs[1]->shape, sw, sizeof sw));
            }
    }
    if ((st = read_ints(g, n, "strides", k, 1, 1, "one per spatial dim", w->stride)) ||
        (st = read_ints(g, n, "dilations", k, 1, 1, "one per spatial dim", w->dil)) ||
        (st = read_ints(g, n, "pads", 2 * k, 0, 0, "begin and end of each spatial dim", w->pad)) ||
        (st = read_auto_pad(g, n, &w->mode)))
        return st;
    if (w->mode != PAD_NOTSET) memset(w->pad, 0, sizeof w->pad); /* auto_pad overrides pads */
    for (int32_t i = 0; i < k; i++) {
        if (!ampc_mul_ok(w->kernel[i] - 1, w->dil[i], &w->ext[i]) ||
            !ampc_add_ok(w->ext[i], 1, &w->ext[i]))
            return overflow(g, n, "the dilated kernel extent (kernel - 1) * dilation + 1");
    }
    return AMPC_OK;
}

/* Division rounding toward -infinity / +infinity, for b > 0 and any a. */
static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b < 0); }
static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b > 0); }

/* Output size along spatial dim i of a conv or pool over `in` elements; resolves the SAME pads
 * into w->pad. */
static ampc_status window_out(ampc_graph *g, ampc_node *n, window *w, int32_t i, int64_t in,
                              int64_t *out) {
    int64_t s = w->stride[i], *pb = &w->pad[i], *pe = &w->pad[w->k + i], o, t;
    if (w->mode == PAD_SAME_UPPER || w->mode == PAD_SAME_LOWER) {
        o = ceil_div(in, s);
        if (o > 0) {
            if (!ampc_mul_ok(o - 1, s, &t) || !ampc_add_ok(t, w->ext[i] - in, &t))
                return overflow(g, n, "the SAME padding (out - 1) * stride + extent - in");
            if (t < 0) t = 0;
            *pb = w->mode == PAD_SAME_UPPER ? t / 2 : t - t / 2;
            *pe = t - *pb;
        }
    } else {
        if (!ampc_add_ok(in, *pb, &t) || !ampc_add_ok(t, *pe, &t))
            return overflow(g, n, "the padded input size");
        t -= w->ext[i]; /* both operands are non-negative: no overflow */
        o = (w->ceil_mode ? ceil_div(t, s) : floor_div(t, s)) + 1;
        /* ceil_mode: a window must start inside the input or the left padding. */
        if (w->ceil_mode && o > 0 && o - 1 >= ceil_div(in + *pb, s)) o--;
    }
    if (o <= 0) {
        char sx[AMPC_SHAPE_STR_MAX];
        const ampc_value *x = n->inputs[0];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "output size along spatial dim %d is %lld, must be positive: input 0 "
                         "'%s' is %s, so that dim has %lld elements plus pads %lld and %lld, "
                         "but the window covers %lld (kernel %lld, dilation %lld)",
                         i, (long long)o, x->name, ampc_shape_str(&x->shape, sx, sizeof sx),
                         (long long)in, (long long)*pb, (long long)*pe, (long long)w->ext[i],
                         (long long)w->kernel[i], (long long)w->dil[i]);
    }
    *out = o;
    return AMPC_OK;
}

/* The optional bias (input i: 2 for Conv, 3 for DeformConv) must be 1-D with m entries. */
static ampc_status check_bias(ampc_graph *g, ampc_node *n, int32_t i, int64_t m, const char *what) {
    if (n->n_inputs <= i || !n->inputs[i]) return AMPC_OK;
    const ampc_value *b = n->inputs[i];
    if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
    if (b->shape.rank == 1 && b->shape.dims[0] == m) return AMPC_OK;
    char s[AMPC_SHAPE_STR_MAX];
    return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' must be 1-D with %lld entries (%s), got %s",
                     i, b->name, (long long)m, what, ampc_shape_str(&b->shape, s, sizeof s));
}

/* Shared checks of X and W: float dtypes, equal ranks, a positive group. */
static ampc_status conv_common(ampc_graph *g, ampc_node *n, int64_t *group) {
    ampc_status st;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT) || !ampc_infer_same_dtype(g, n, 0, 1))
        return AMPC_E_DTYPE;
    if ((st = check_activation(g, n))) return st;
    const ampc_value *x = n->inputs[0], *w = n->inputs[1];
    if (w->shape.rank != x->shape.rank) {
        char sx[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must have the rank of input 0 '%s' (2 channel dims and %d "
                         "kernel dims): input 0 is %s, input 1 is %s",
                         w->name, x->name, x->shape.rank - 2,
                         ampc_shape_str(&x->shape, sx, sizeof sx),
                         ampc_shape_str(&w->shape, sw, sizeof sw));
    }
    return read_int(g, n, "group", 1, 1, INT64_MAX, group);
}

/* The output shape of a forward convolution (Conv, DeformConv): X [N, C, D...], W [M, C/group,
 * K...], the bias B [M] at input `bias` -> Y [N, M, out...]; also returns the window. */
static ampc_status conv_forward(ampc_graph *g, ampc_node *n, int32_t bias, window *win,
                                ampc_shape *y) {
    int64_t group, cw;
    ampc_status st = conv_common(g, n, &group);
    if (st) return st;
    const ampc_value *x = n->inputs[0], *w = n->inputs[1];
    int32_t k = x->shape.rank - 2;
    int64_t c = x->shape.dims[1], m = w->shape.dims[0];
    char sx[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
    if (!ampc_mul_ok(w->shape.dims[1], group, &cw) || cw != c)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "the input channels must equal W.shape[1] * group: input 0 '%s' is %s "
                         "(C = %lld), input 1 '%s' is %s and group is %lld",
                         x->name, ampc_shape_str(&x->shape, sx, sizeof sx), (long long)c, w->name,
                         ampc_shape_str(&w->shape, sw, sizeof sw), (long long)group);
    if (m % group)
        return AMPC_FAIL(
            g, n, AMPC_E_SHAPE,
            "group %lld must divide the output channels: input 1 '%s' is %s (M = %lld)",
            (long long)group, w->name, ampc_shape_str(&w->shape, sw, sizeof sw), (long long)m);
    if ((st = check_bias(g, n, bias, m, "M = W.shape[0]"))) return st;
    if ((st = read_window(g, n, k, &w->shape.dims[2], win))) return st;
    *y = (ampc_shape){x->shape.rank, {x->shape.dims[0], m}};
    for (int32_t i = 0; i < k; i++)
        if ((st = window_out(g, n, win, i, x->shape.dims[2 + i], &y->dims[2 + i]))) return st;
    return AMPC_OK;
}

/* Conv: X [N, C, D...], W [M, C/group, K...], B [M] -> Y [N, M, out...]. */
ampc_status ampc_infer_conv(ampc_graph *g, ampc_node *n) {
    window win;
    ampc_shape y;
    ampc_status st = conv_forward(g, n, 2, &win, &y);
    if (st) return st;
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &y);
    return AMPC_OK;
}

/* ampc.FusedConv: Conv's rules, then the residual z (input 3) has Y's dtype and shape, and the
 * activation is absent or "Relu". */

ampc_shape ampc_shape_to_channels_last(const ampc_shape *s) {
    ampc_shape r = *s;
    if (s->rank < 3) return r;
    for (int32_t i = 2; i < s->rank; i++) r.dims[i - 1] = s->dims[i];
    r.dims[s->rank - 1] = s->dims[1];
    return r;
}

ampc_shape ampc_shape_to_channels_first(const ampc_shape *s) {
    ampc_shape r = *s;
    if (s->rank < 3) return r;
    r.dims[1] = s->dims[s->rank - 1];
    for (int32_t i = 2; i < s->rank; i++) r.dims[i] = s->dims[i - 1];
    return r;
}

void ampc_conv_shadow_make(const ampc_node *n, ampc_conv_shadow *s) {
    memset(s, 0, sizeof *s);
    s->node = *n;
    for (int32_t i = 0; i < n->n_inputs && i < 4; i++) {
        if (!n->inputs[i]) continue;
        s->vals[i] = *n->inputs[i];
        s->vals[i].data = NULL;
        if (i != 2) s->vals[i].shape = ampc_shape_to_channels_first(&n->inputs[i]->shape);
        s->in[i] = &s->vals[i];
    }
    s->vals[4] = *n->outputs[0];
    s->vals[4].shape = ampc_shape_to_channels_first(&n->outputs[0]->shape);
    s->out[0] = &s->vals[4];
    s->node.inputs = s->in;
    s->node.outputs = s->out;
    s->node.n_outputs = 1;
}

static ampc_status infer_fused_conv_nchw(ampc_graph *g, ampc_node *n);

ampc_status ampc_infer_fused_conv(ampc_graph *g, ampc_node *n) {
    const ampc_attr *cl = ampc_ir_attr_find(n, "channels_last");
    if (cl && (cl->kind != AMPC_ATTR_INT || (cl->i != 0 && cl->i != 1)))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'channels_last' must be the int 0 or 1");
    if (!ampc_conv_channels_last(n)) return infer_fused_conv_nchw(g, n);
    if (n->inputs[0]->shape.rank < 3)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "a channels-last convolution needs x of rank 3 or "
                         "more, got rank %d", n->inputs[0]->shape.rank);
    ampc_conv_shadow sh;
    ampc_conv_shadow_make(n, &sh);
    ampc_status st = infer_fused_conv_nchw(g, &sh.node);
    if (st) return st;
    n->outputs[0]->dtype = sh.vals[4].dtype;
    n->outputs[0]->shape = ampc_shape_to_channels_last(&sh.vals[4].shape);
    return AMPC_OK;
}

static ampc_status infer_fused_conv_nchw(ampc_graph *g, ampc_node *n) {
    ampc_status st = ampc_infer_conv(g, n);
    if (st) return st;
    const ampc_value *y = n->outputs[0];
    if (n->n_inputs > 3 && n->inputs[3]) {
        const ampc_value *z = n->inputs[3];
        if (!ampc_infer_same_dtype(g, n, 0, 3)) return AMPC_E_DTYPE;
        char sz[AMPC_SHAPE_STR_MAX], sy[AMPC_SHAPE_STR_MAX];
        if (!ampc_shape_eq(&z->shape, &y->shape))
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "the residual input 3 '%s' must have the output's "
                             "shape %s, got %s", z->name, ampc_shape_str(&y->shape, sy, sizeof sy),
                             ampc_shape_str(&z->shape, sz, sizeof sz));
    }
    const ampc_attr *act = ampc_ir_attr_find(n, "activation");
    if (act && (act->kind != AMPC_ATTR_STRING || strcmp(act->s, "Relu")))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'activation' must be the string \"Relu\" "
                         "when present");
    return AMPC_OK;
}

/* Input i of a DeformConv (offset or mask) must be [N, per_point, out...] with Y's N and spatial
 * dims; `what` says what its channels hold. */
static ampc_status check_sampling_input(ampc_graph *g, ampc_node *n, int32_t i, const ampc_shape *y,
                                        int64_t per_point, const char *what) {
    const ampc_value *v = n->inputs[i];
    if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
    ampc_shape want = *y;
    want.dims[1] = per_point;
    if (ampc_shape_eq(&v->shape, &want)) return AMPC_OK;
    char sv[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
    return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' must be %s (N, %s, then the output's "
                     "spatial dims), got %s", i, v->name, ampc_shape_str(&want, sw, sizeof sw),
                     what, ampc_shape_str(&v->shape, sv, sizeof sv));
}

/* DeformConv: a Conv whose kernel points are displaced per output position by `offset` (input 2,
 * [N, offset_group * prod(K) * k, out...]: one k-vector per kernel point) and optionally scaled
 * by `mask` (input 4, [N, offset_group * prod(K), out...]); the bias is input 3. The input
 * channels split into offset_group groups, each with its own offsets. */
ampc_status ampc_infer_deform_conv(ampc_graph *g, ampc_node *n) {
    window win;
    ampc_shape y;
    int64_t og, kn = 1, per;
    ampc_status st = conv_forward(g, n, 3, &win, &y);
    if (st) return st;
    const ampc_value *x = n->inputs[0];
    int32_t k = x->shape.rank - 2;
    if ((st = read_int(g, n, "offset_group", 1, 1, INT64_MAX, &og))) return st;
    if (x->shape.dims[1] % og) {
        char sx[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'offset_group' %lld must divide the input channels: input 0 "
                         "'%s' is %s (C = %lld)",
                         (long long)og, x->name, ampc_shape_str(&x->shape, sx, sizeof sx),
                         (long long)x->shape.dims[1]);
    }
    for (int32_t i = 0; i < k; i++)
        if (!ampc_mul_ok(kn, win.kernel[i], &kn)) return overflow(g, n, "the kernel size");
    if (!ampc_mul_ok(og, kn, &kn) || !ampc_mul_ok(kn, k, &per))
        return overflow(g, n, "offset_group * kernel size * spatial dims");
    if ((st = check_sampling_input(g, n, 2, &y, per,
                                   "offset_group * kernel points * spatial dims offsets")))
        return st;
    if (n->n_inputs > 4 && n->inputs[4] &&
        (st = check_sampling_input(g, n, 4, &y, kn, "offset_group * kernel points mask values")))
        return st;
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* ConvTranspose: X [N, C, D...], W [C, M/group, K...], B [M] -> Y [N, M, out...] with
 *   out = stride * (in - 1) + output_padding + ek - pad_begin - pad_end,
 * or out = output_shape when given (pads then follow from it), or out = in * stride for SAME_*. */
ampc_status ampc_infer_conv_transpose(ampc_graph *g, ampc_node *n) {
    int64_t group, m;
    ampc_status st = conv_common(g, n, &group);
    if (st) return st;
    const ampc_value *x = n->inputs[0], *w = n->inputs[1];
    int32_t k = x->shape.rank - 2;
    int64_t c = x->shape.dims[1];
    char sx[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
    if (w->shape.dims[0] != c)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "the input channels must equal W.shape[0]: input 0 '%s' is %s (C = %lld), "
                         "input 1 '%s' is %s",
                         x->name, ampc_shape_str(&x->shape, sx, sizeof sx), (long long)c, w->name,
                         ampc_shape_str(&w->shape, sw, sizeof sw));
    if (c % group)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "group %lld must divide the input channels: input 0 '%s' is %s (C = %lld)",
                         (long long)group, x->name, ampc_shape_str(&x->shape, sx, sizeof sx),
                         (long long)c);
    if (!ampc_mul_ok(w->shape.dims[1], group, &m)) return overflow(g, n, "W.shape[1] * group");
    if ((st = check_bias(g, n, 2, m, "M = W.shape[1] * group"))) return st;
    window win;
    int64_t opad[AMPC_MAX_RANK], oshape[AMPC_MAX_RANK + 2];
    if ((st = read_window(g, n, k, &w->shape.dims[2], &win)) ||
        (st = read_ints(g, n, "output_padding", k, 0, 0, "one per spatial dim", opad)))
        return st;
    /* output_shape: one entry per spatial dim (older exporters also wrote N and C first). */
    const ampc_attr *osa = ampc_ir_attr_find(n, "output_shape");
    int32_t os_off = osa && osa->kind == AMPC_ATTR_INTS && osa->n == k + 2 ? 2 : 0;
    if (osa &&
        (st = read_ints(g, n, "output_shape", k + os_off, 1, 1, "one per spatial dim", oshape)))
        return st;
    ampc_shape y = {x->shape.rank, {x->shape.dims[0], m}};
    for (int32_t i = 0; i < k; i++) {
        int64_t in = x->shape.dims[2 + i], full, o;
        /* full = stride * (in - 1) + output_padding + ek: the output before any padding. */
        if (!ampc_mul_ok(win.stride[i], in - 1, &full) || !ampc_add_ok(full, opad[i], &full) ||
            !ampc_add_ok(full, win.ext[i], &full))
            return overflow(g, n, "stride * (in - 1) + output_padding + kernel extent");
        if (osa) {
            o = oshape[os_off + i];
        } else if (win.mode == PAD_SAME_UPPER || win.mode == PAD_SAME_LOWER) {
            if (!ampc_mul_ok(in, win.stride[i], &o)) return overflow(g, n, "in * stride");
        } else {
            o = full - win.pad[i] - win.pad[k + i]; /* pads >= 0 and full >= 0: no overflow */
        }
        if (o <= 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "output size along spatial dim %d is %lld, must be positive: input "
                             "0 '%s' is %s, the unpadded output is %lld, pads are %lld and %lld",
                             i, (long long)o, x->name, ampc_shape_str(&x->shape, sx, sizeof sx),
                             (long long)full, (long long)win.pad[i], (long long)win.pad[k + i]);
        y.dims[2 + i] = o;
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

ampc_status ampc_infer_pool(ampc_graph *g, ampc_node *n);

/* A channels-last MaxPool or AveragePool (made by the layout pass): X [N, H, W, C] -> Y
 * [N, out..., C], by the NCHW rules on a shadow of the node; no Indices output. */
static ampc_status infer_pool_channels_last(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (x->shape.rank != 4 || n->n_outputs != 1)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "a channels-last pool takes a 4-D input and gives one "
                         "output; input 0 '%s' has rank %d, %d outputs", x->name, x->shape.rank,
                         n->n_outputs);
    ampc_value xs = *x, ys = *n->outputs[0], *ins[1] = {&xs}, *outs[1] = {&ys};
    xs.shape = ampc_shape_to_channels_first(&x->shape);
    ampc_attr attrs[16];
    int32_t na = 0;
    if (n->n_attrs > 16)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "a channels-last pool has %d attributes; at most 16 "
                         "are accepted", n->n_attrs);
    for (int32_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, "channels_last")) attrs[na++] = n->attrs[i];
    ampc_node shadow = *n;
    shadow.inputs = ins, shadow.outputs = outs, shadow.attrs = attrs, shadow.n_attrs = na;
    ampc_status st = ampc_infer_pool(g, &shadow);
    if (st != AMPC_OK) return st;
    ampc_shape y = ampc_shape_to_channels_last(&ys.shape);
    ampc_infer_set(n, 0, ys.dtype, &y);
    return AMPC_OK;
}

/* MaxPool, AveragePool and LpPool: Y [N, C, out...]; MaxPool's optional Indices has Y's shape,
 * i64. LpPool's p (default 2) must be positive. */
ampc_status ampc_infer_pool(ampc_graph *g, ampc_node *n) {
    bool is_max = n->op == AMPC_OP_MAX_POOL, is_lp = n->op == AMPC_OP_LP_POOL;
    const ampc_value *x = n->inputs[0];
    ampc_status st;
    if (ampc_conv_channels_last(n)) return infer_pool_channels_last(g, n);
    if (is_max && (x->dtype == AMPC_DTYPE_I8 || x->dtype == AMPC_DTYPE_U8)) {
        /* MaxPool also takes 8-bit integers (opset 12). */
    } else if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) {
        return AMPC_E_DTYPE;
    }
    if ((st = check_activation(g, n))) return st;
    int32_t k = x->shape.rank - 2;
    window win;
    int64_t ceil_mode, flag;
    if ((st = read_window(g, n, k, NULL, &win)) ||
        (st = read_int(g, n, "ceil_mode", 0, 0, 1, &ceil_mode)))
        return st;
    if (is_lp)
        st = read_int(g, n, "p", 2, 1, INT64_MAX, &flag);
    else
        st = read_int(g, n, is_max ? "storage_order" : "count_include_pad", 0, 0, 1, &flag);
    if (st) return st;
    win.ceil_mode = ceil_mode != 0;
    ampc_shape y = {x->shape.rank, {x->shape.dims[0], x->shape.dims[1]}};
    for (int32_t i = 0; i < k; i++)
        if ((st = window_out(g, n, &win, i, x->shape.dims[2 + i], &y.dims[2 + i]))) return st;
    ampc_infer_set(n, 0, x->dtype, &y);
    if (n->n_outputs > 1) ampc_infer_set(n, 1, AMPC_DTYPE_I64, &y);
    return AMPC_OK;
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool (p >= 1, default 2): [N, C, D...] ->
 * [N, C, 1, ...]. */
ampc_status ampc_infer_global_pool(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t p;
    ampc_status st;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (n->op == AMPC_OP_GLOBAL_LP_POOL && (st = read_int(g, n, "p", 2, 1, INT64_MAX, &p)))
        return st;
    if (x->shape.rank < 2) {
        char s[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must be N x C x D1 x ... (rank 2 or more), got %s", x->name,
                         ampc_shape_str(&x->shape, s, sizeof s));
    }
    ampc_shape y = x->shape;
    for (int32_t i = 2; i < y.rank; i++) y.dims[i] = 1;
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* Col2Im: X [N, C * prod(block), L] and the constant image_shape and block_shape (input 1 and 2,
 * k entries each) -> [N, C, image...]. The L columns are the block positions, row-major over
 * the k dims, each dim holding floor((image + pad_begin + pad_end - extent) / stride) + 1 of
 * them, with extent = (block - 1) * dilation + 1. */
ampc_status ampc_infer_col2im(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    char sx[AMPC_SHAPE_STR_MAX];
    int64_t img[AMPC_MAX_RANK], blk[AMPC_MAX_RANK], per = 1, count = 1;
    ampc_status st;
    if (x->shape.rank != 3)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must be 3-D [N, C * prod(block_shape), L], got %s", x->name,
                         ampc_shape_str(&x->shape, sx, sizeof sx));
    int32_t k = ampc_infer_const_ints(g, n, 1, img, AMPC_MAX_RANK - 2);
    if (k < 0) return AMPC_E_SHAPE;
    int32_t kb = ampc_infer_const_ints(g, n, 2, blk, AMPC_MAX_RANK - 2);
    if (kb < 0) return AMPC_E_SHAPE;
    if (k < 1 || kb != k || n->inputs[1]->shape.rank != 1 || n->inputs[2]->shape.rank != 1)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "inputs 1 '%s' (image_shape) and 2 '%s' (block_shape) must be 1-D with "
                         "one entry per spatial dim each, got %d and %d entries",
                         n->inputs[1]->name, n->inputs[2]->name, k, kb);
    for (int32_t i = 0; i < k; i++) {
        if (img[i] < 1 || blk[i] < 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "image_shape and block_shape entries must be positive, got %lld and "
                             "%lld for spatial dim %d",
                             (long long)img[i], (long long)blk[i], i);
        if (!ampc_mul_ok(per, blk[i], &per)) return overflow(g, n, "the block size");
    }
    window win;
    if ((st = read_window(g, n, k, blk, &win))) return st;
    for (int32_t i = 0; i < k; i++) {
        int64_t t, s = win.stride[i];
        if (!ampc_add_ok(img[i], win.pad[i], &t) || !ampc_add_ok(t, win.pad[k + i], &t))
            return overflow(g, n, "the padded image size");
        if (t < win.ext[i])
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "the block does not fit spatial dim %d: the image has %lld elements "
                             "plus pads %lld and %lld, but the block covers %lld (size %lld, "
                             "dilation %lld)",
                             i, (long long)img[i], (long long)win.pad[i], (long long)win.pad[k + i],
                             (long long)win.ext[i], (long long)blk[i], (long long)win.dil[i]);
        if (!ampc_mul_ok(count, (t - win.ext[i]) / s + 1, &count))
            return overflow(g, n, "the block count");
    }
    if (x->shape.dims[1] % per || x->shape.dims[2] != count)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must be [N, C * %lld, %lld] (C times the block size, then "
                         "one column per block position), got %s",
                         x->name, (long long)per, (long long)count,
                         ampc_shape_str(&x->shape, sx, sizeof sx));
    ampc_shape y = {k + 2, {x->shape.dims[0], x->shape.dims[1] / per}};
    memcpy(&y.dims[2], img, (size_t)k * sizeof *img);
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* ---- resolved geometry, for code generation --------------------------------------------------- */

/* Resolves the window of a node whose inference succeeded, exactly as the reference kernels
 * (ir/ref/conv.c, geom_init) place their windows: the attributes are read by read_window, SAME
 * pads follow from the inferred output, and ConvTranspose with auto_pad SAME or output_shape takes
 * its pads from how much the unpadded output exceeds the one asked for (which may leave a
 * negative pad when output_shape is larger). */
ampc_status ampc_infer_conv_geom(ampc_graph *g, const ampc_node *n, ampc_conv_geom *out) {
    /* read_window and read_ints only read the node; they take it mutable for their callers. */
    ampc_node *nn = (ampc_node *)n;
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const ampc_value *w = n->op == AMPC_OP_QLINEAR_CONV ? n->inputs[3]
                          : (ampc_op_has(n->op, T_POOL) ? NULL : n->inputs[1]);
    memset(out, 0, sizeof *out);
    if (x->shape.rank < 3 || y->shape.rank != x->shape.rank || (w && w->shape.rank != x->shape.rank))
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "a window needs N x C x spatial tensors (rank 3 or "
                         "more) for input 0 and the output");
    int32_t k = x->shape.rank - 2;
    window win;
    ampc_status st = read_window(g, nn, k, w ? &w->shape.dims[2] : NULL, &win);
    if (st == AMPC_OK && n->op == AMPC_OP_CONV_TRANSPOSE)
        st = read_ints(g, nn, "output_padding", k, 0, 0, "one per spatial dim", out->output_padding);
    if (st != AMPC_OK) return st;
    bool same = win.mode == PAD_SAME_UPPER || win.mode == PAD_SAME_LOWER;
    bool from_out = n->op == AMPC_OP_CONV_TRANSPOSE && (same || ampc_ir_attr_find(n, "output_shape"));
    /* a channels-last pool's spatial dims follow N ([N, H, W, C]) */
    const int32_t sp = ampc_op_has(n->op, T_POOL) && ampc_conv_channels_last(n) ? 1 : 2;
    out->k = k;
    for (int32_t i = 0; i < k; i++) {
        int64_t in = x->shape.dims[sp + i], o = y->shape.dims[sp + i], t;
        out->kernel[i] = win.kernel[i];
        out->stride[i] = win.stride[i];
        out->dil[i] = win.dil[i];
        if (from_out) { /* ONNX: the odd pad goes to the end for SAME_UPPER only */
            t = win.stride[i] * (in - 1) + out->output_padding[i] + win.ext[i] - o;
            int64_t half = t / 2 - (t % 2 < 0); /* floor */
            out->pad_begin[i] = win.mode == PAD_SAME_UPPER ? half : t - half;
            out->pad_end[i] = t - out->pad_begin[i];
        } else if (same && n->op != AMPC_OP_CONV_TRANSPOSE) {
            t = (o - 1) * win.stride[i] + win.ext[i] - in;
            if (t < 0) t = 0;
            out->pad_begin[i] = win.mode == PAD_SAME_UPPER ? t / 2 : t - t / 2;
            out->pad_end[i] = t - out->pad_begin[i];
        } else { /* NOTSET: the attribute (read_window zeroed it for VALID and SAME) */
            out->pad_begin[i] = win.pad[i];
            out->pad_end[i] = win.pad[k + i];
        }
    }
    return AMPC_OK;
}
