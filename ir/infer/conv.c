/*
 * conv.c — inference for convolution and pooling: Conv, ConvTranspose, MaxPool, AveragePool and
 * the global pools. Activations are N x C x D1 x ... x Dk (k >= 1 spatial dims, NCHW order).
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

/* The optional bias (input 2) must be 1-D with m entries. */
static ampc_status check_bias(ampc_graph *g, ampc_node *n, int64_t m, const char *what) {
    if (n->n_inputs < 3 || !n->inputs[2]) return AMPC_OK;
    const ampc_value *b = n->inputs[2];
    if (!ampc_infer_same_dtype(g, n, 0, 2)) return AMPC_E_DTYPE;
    if (b->shape.rank == 1 && b->shape.dims[0] == m) return AMPC_OK;
    char s[AMPC_SHAPE_STR_MAX];
    return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 2 '%s' must be 1-D with %lld entries (%s), got %s",
                     b->name, (long long)m, what, ampc_shape_str(&b->shape, s, sizeof s));
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

/* Conv: X [N, C, D...], W [M, C/group, K...], B [M] -> Y [N, M, out...]. */
ampc_status ampc_infer_conv(ampc_graph *g, ampc_node *n) {
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
    if ((st = check_bias(g, n, m, "M = W.shape[0]"))) return st;
    window win;
    if ((st = read_window(g, n, k, &w->shape.dims[2], &win))) return st;
    ampc_shape y = {x->shape.rank, {x->shape.dims[0], m}};
    for (int32_t i = 0; i < k; i++)
        if ((st = window_out(g, n, &win, i, x->shape.dims[2 + i], &y.dims[2 + i]))) return st;
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
    if ((st = check_bias(g, n, m, "M = W.shape[1] * group"))) return st;
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

/* MaxPool and AveragePool: Y [N, C, out...]; MaxPool's optional Indices has Y's shape, i64. */
ampc_status ampc_infer_pool(ampc_graph *g, ampc_node *n) {
    bool is_max = n->op == AMPC_OP_MAX_POOL;
    const ampc_value *x = n->inputs[0];
    ampc_status st;
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
        (st = read_int(g, n, "ceil_mode", 0, 0, 1, &ceil_mode)) ||
        (st = read_int(g, n, is_max ? "storage_order" : "count_include_pad", 0, 0, 1, &flag)))
        return st;
    win.ceil_mode = ceil_mode != 0;
    ampc_shape y = {x->shape.rank, {x->shape.dims[0], x->shape.dims[1]}};
    for (int32_t i = 0; i < k; i++)
        if ((st = window_out(g, n, &win, i, x->shape.dims[2 + i], &y.dims[2 + i]))) return st;
    ampc_infer_set(n, 0, x->dtype, &y);
    if (n->n_outputs > 1) ampc_infer_set(n, 1, AMPC_DTYPE_I64, &y);
    return AMPC_OK;
}

/* GlobalAveragePool, GlobalMaxPool: [N, C, D...] -> [N, C, 1, ...]. */
ampc_status ampc_infer_global_pool(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
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
