/*
 * signal.c — inference for the signal-processing family: DFT (the opset 20 form: axis is an
 * input), STFT, the window generators (HannWindow, HammingWindow, BlackmanWindow) and
 * MelWeightMatrix.
 *
 * Complex tensors are real ones with a last dim of 2 (real, imaginary); a real signal has a last
 * dim of 1. Every length that sets an output dim (dft_length, frame_step, frame_length, a
 * window's size, the mel matrix's bins) is a compile-time constant (the `cin` column of ops.def)
 * read here; they come from the user, so each is range-checked and reported with the node.
 */
#include "infer.h"

#include <string.h>

static int64_t diag_count(const ampc_graph *g) { return (int64_t)g->diag.n + g->diag.dropped; }

static const char *shp(const ampc_value *v, char *buf) {
    return ampc_shape_str(&v->shape, buf, AMPC_SHAPE_STR_MAX);
}

/* Reads an int attribute that must be 0 or 1. */
static bool read_flag(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                      int64_t *out) {
    int64_t before = diag_count(g);
    *out = ampc_ir_attr_int(g, n, name, dflt);
    if (diag_count(g) != before) return false;
    if (*out == 0 || *out == 1) return true;
    AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be 0 or 1, got %lld", name, (long long)*out);
    return false;
}

/* Compile-time input i holding one integer (a scalar or a 1-element tensor) that must be at
 * least `lo`; `what` names it. An absent input gives `dflt`. */
static bool const_scalar(ampc_graph *g, const ampc_node *n, int32_t i, const char *what,
                         int64_t dflt, int64_t lo, int64_t *out) {
    int64_t buf[1];
    *out = dflt;
    if (i >= n->n_inputs || !n->inputs[i]) return true;
    const ampc_value *v = n->inputs[i];
    if (ampc_ir_numel(v) != 1 || v->shape.rank > 1) {
        char s[AMPC_SHAPE_STR_MAX];
        AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must hold exactly one integer, got %s", i,
                  v->name, what, shp(v, s));
        return false;
    }
    if (ampc_infer_const_ints(g, n, i, buf, 1) != 1) return false;
    if (buf[0] < lo) {
        AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must be at least %lld, got %lld", i,
                  v->name, what, (long long)lo, (long long)buf[0]);
        return false;
    }
    *out = buf[0];
    return true;
}

/* The element type named by the `output_datatype` attribute (default f32); UNDEFINED with a
 * diagnostic when it names none ampc has or one the op does not produce (bool). */
static ampc_dtype output_datatype(ampc_graph *g, const ampc_node *n) {
    int64_t before = diag_count(g);
    int64_t code = ampc_ir_attr_int(g, n, "output_datatype", 1);
    if (diag_count(g) != before) return AMPC_DTYPE_UNDEFINED;
    ampc_dtype t =
        code == (int32_t)code ? ampc_dtype_from_onnx((int32_t)code) : AMPC_DTYPE_UNDEFINED;
    if (t == AMPC_DTYPE_UNDEFINED || t == AMPC_DTYPE_BOOL) {
        AMPC_FAIL(g, n, AMPC_E_ATTR,
                  "attribute 'output_datatype' must name a float or integer ONNX element type "
                  "ampc has, got %lld",
                  (long long)code);
        return AMPC_DTYPE_UNDEFINED;
    }
    return t;
}

/* Input 0: a float signal whose last dim holds 1 (real) or 2 (real, imaginary) components, of
 * rank `rank` (or more, with `or_more`); `form` spells the expected shape. */
static bool check_signal(ampc_graph *g, const ampc_node *n, int32_t rank, bool or_more,
                         const char *form) {
    const ampc_value *x = n->inputs[0];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return false;
    int32_t r = x->shape.rank;
    if ((r == rank || (or_more && r > rank)) &&
        (x->shape.dims[r - 1] == 1 || x->shape.dims[r - 1] == 2))
        return true;
    char s[AMPC_SHAPE_STR_MAX];
    AMPC_FAIL(g, n, AMPC_E_SHAPE,
              "input 0 '%s' must be %s with a last dim of 1 (real) or 2 (complex), got %s",
              x->name, form, shp(x, s));
    return false;
}

/* DFT: the transform of length dft_length (input 1; default the axis length, or 2 * (length - 1)
 * for the inverse of a one-sided spectrum) along `axis` (input 2, default -2; never the last
 * dim). Forward one-sided keeps floor(dft_length / 2) + 1 bins; the inverse of a one-sided
 * spectrum is real (last dim 1); every other form is complex (last dim 2). */
ampc_status ampc_infer_dft(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t inverse, onesided, axis, len;
    if (!check_signal(g, n, 2, true, "[signal dims..., components] (rank 2 or more)"))
        return AMPC_E_SHAPE;
    if (!read_flag(g, n, "inverse", 0, &inverse) || !read_flag(g, n, "onesided", 0, &onesided))
        return AMPC_E_ATTR;
    int32_t r = x->shape.rank;
    if (!const_scalar(g, n, 2, "axis", -2, INT64_MIN, &axis)) return AMPC_E_SHAPE;
    if (axis < -r || axis > r - 2 || axis == -1)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 2 (axis) %lld must be in [%d, -2] or [0, %d] for input 0 '%s' of "
                         "rank %d (the last dim holds the complex components)",
                         (long long)axis, -r, r - 2, x->name, r);
    int32_t ax = (int32_t)(axis < 0 ? axis + r : axis);
    int64_t dim = x->shape.dims[ax];
    bool irfft = inverse && onesided;
    int64_t dflt = irfft ? 2 * (dim - 1) : dim;
    if (!const_scalar(g, n, 1, "dft_length", dflt, 1, &len)) return AMPC_E_SHAPE;
    if (len < 1)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "the default dft_length of input 0 '%s' along axis %d is %lld; it must "
                         "be positive (give input 1)",
                         x->name, ax, (long long)len);
    ampc_shape y = x->shape;
    y.dims[ax] = onesided && !inverse ? len / 2 + 1 : len;
    y.dims[r - 1] = irfft ? 1 : 2;
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* STFT: signal [B, L, 1|2], frame_step (input 1), optional window [frame_length] (input 2) and
 * frame_length (input 3) -> [B, frames, bins, 2] with frames = (L - frame_length) / frame_step +
 * 1 and bins = frame_length / 2 + 1 when onesided (the default), frame_length otherwise. */
ampc_status ampc_infer_stft(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    const ampc_value *win = n->n_inputs > 2 ? n->inputs[2] : NULL;
    char sx[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
    int64_t step, fl, onesided;
    if (!check_signal(g, n, 3, false, "[batch, signal_length, components]")) return AMPC_E_SHAPE;
    if (!read_flag(g, n, "onesided", 1, &onesided)) return AMPC_E_ATTR;
    if (!const_scalar(g, n, 1, "frame_step", 1, 1, &step)) return AMPC_E_SHAPE;
    int64_t len = x->shape.dims[1];
    if (win) {
        if (!ampc_infer_same_dtype(g, n, 0, 2)) return AMPC_E_DTYPE;
        if (win->shape.rank != 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 2 '%s' (window) must be 1-D, got %s",
                             win->name, shp(win, sw));
    }
    int64_t dflt = win ? win->shape.dims[0] : len;
    if (!const_scalar(g, n, 3, "frame_length", dflt, 1, &fl)) return AMPC_E_SHAPE;
    if (win && win->shape.dims[0] != fl)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 2 '%s' (window) must have frame_length = %lld entries, got %s",
                         win->name, (long long)fl, shp(win, sw));
    if (fl < 1 || fl > len)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "frame_length %lld must be in [1, %lld], the signal length of input 0 "
                         "'%s' %s",
                         (long long)fl, (long long)len, x->name, shp(x, sx));
    ampc_shape y = {4, {x->shape.dims[0], (len - fl) / step + 1, onesided ? fl / 2 + 1 : fl, 2}};
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* HannWindow, HammingWindow, BlackmanWindow: [size] (input 0, a compile-time integer) of
 * `output_datatype` (default f32); `periodic` (default 1) picks the periodic or symmetric form. */
ampc_status ampc_infer_window(ampc_graph *g, ampc_node *n) {
    int64_t size, periodic;
    if (!const_scalar(g, n, 0, "size", 0, 0, &size)) return AMPC_E_SHAPE;
    if (!read_flag(g, n, "periodic", 1, &periodic)) return AMPC_E_ATTR;
    ampc_dtype t = output_datatype(g, n);
    if (t == AMPC_DTYPE_UNDEFINED) return AMPC_E_ATTR;
    ampc_shape y = {1, {size}};
    ampc_infer_set(n, 0, t, &y);
    return AMPC_OK;
}

/* MelWeightMatrix: num_mel_bins, dft_length and sample_rate (inputs 0-2, compile-time integers)
 * and the float band edges lower_edge_hertz, upper_edge_hertz (inputs 3, 4) -> [dft_length / 2
 * + 1, num_mel_bins] of `output_datatype` (default f32). */
ampc_status ampc_infer_mel_weight_matrix(ampc_graph *g, ampc_node *n) {
    int64_t bins, len, rate;
    if (!const_scalar(g, n, 0, "num_mel_bins", 0, 1, &bins) ||
        !const_scalar(g, n, 1, "dft_length", 0, 1, &len) ||
        !const_scalar(g, n, 2, "sample_rate", 0, 1, &rate))
        return AMPC_E_SHAPE;
    for (int32_t i = 3; i < 5; i++) {
        const ampc_value *v = n->inputs[i];
        if (!ampc_infer_check_dtype(g, n, i, DT_FLOAT)) return AMPC_E_DTYPE;
        if (ampc_ir_numel(v) != 1 || v->shape.rank > 1) {
            char s[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must hold one value, got %s",
                             i, v->name, i == 3 ? "lower_edge_hertz" : "upper_edge_hertz",
                             shp(v, s));
        }
    }
    ampc_dtype t = output_datatype(g, n);
    if (t == AMPC_DTYPE_UNDEFINED) return AMPC_E_ATTR;
    ampc_shape y = {2, {len / 2 + 1, bins}};
    ampc_infer_set(n, 0, t, &y);
    return AMPC_OK;
}
