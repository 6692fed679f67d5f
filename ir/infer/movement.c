/*
 * movement.c — inference for the shape and data-movement family: Constant, Shape, Size, the views
 * (Reshape, Flatten, Squeeze, Unsqueeze, BitCast), Transpose, Concat, Split, Slice, Gather,
 * Expand, ConstantOfShape, Range and Pad.
 *
 * Operands that set a shape, axes or pads are compile-time constants (the `cin` column of
 * ops.def) and are read here with ampc_infer_const_ints. They come from the user, so every sum or
 * product built from them is checked for int64 overflow and every entry for its range, and a
 * rejected value is reported with the node, the operand and the shapes involved.
 */
#include "../ref/ref.h" /* element loads for the constant scalars of Range */
#include "infer.h"
#include "ir/movement.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Diagnostics recorded so far (kept and dropped): the attribute readers of ir.h report a
 * mistyped attribute by recording one and returning the default. */
static int64_t diag_count(const ampc_graph *g) { return (int64_t)g->diag.n + g->diag.dropped; }

/* "[2,3]" of a value's shape, in a caller buffer. */
static const char *shp(const ampc_value *v, char *buf) {
    return ampc_shape_str(&v->shape, buf, AMPC_SHAPE_STR_MAX);
}

/* "[a,b,c]" of a list of ints (at most 16 entries shown), in a caller buffer. */
enum { LIST_STR_MAX = 16 * 21 + 8 };
static const char *list_str(const int64_t *v, int32_t count, char *buf) {
    size_t len = 0;
    buf[len++] = '[';
    for (int32_t i = 0; i < count && i < 16; i++)
        len += (size_t)snprintf(buf + len, LIST_STR_MAX - len, "%s%lld", i ? "," : "",
                                (long long)v[i]);
    snprintf(buf + len, LIST_STR_MAX - len, "%s]", count > 16 ? ",..." : "");
    return buf;
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

/* Normalises a list of axes against `rank` (each in [-rank, rank-1]) and rejects repeats. */
static ampc_status norm_axes(ampc_graph *g, const ampc_node *n, const int64_t *axes, int32_t count,
                             int32_t rank, const char *what, int32_t *out) {
    bool seen[AMPC_MAX_RANK] = {false};
    for (int32_t i = 0; i < count; i++) {
        if (!ampc_infer_axis(g, n, axes[i], rank, what, &out[i])) return AMPC_E_ATTR;
        if (seen[out[i]]) {
            char b[LIST_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "%s list %s names axis %d twice", what,
                             list_str(axes, count, b), out[i]);
        }
        seen[out[i]] = true;
    }
    return AMPC_OK;
}

/* Input 0 must not be a scalar. */
static ampc_status need_rank1(ampc_graph *g, const ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (x->shape.rank >= 1) return AMPC_OK;
    return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' must have rank 1 or more, got a scalar",
                     x->name);
}

/* ---- Constant, Shape, Size ------------------------------------------------------------------ */

static const char *const constant_attrs[] = {"value",         "value_float", "value_floats",
                                             "value_int",     "value_ints",  "value_string",
                                             "value_strings", "sparse_value"};

/* Constant: exactly one of value (a tensor), value_float(s) (f32 scalar / 1-D), value_int(s)
 * (i64 scalar / 1-D). */
ampc_status ampc_infer_constant(ampc_graph *g, ampc_node *n) {
    const ampc_attr *a = NULL;
    int32_t present = 0;
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(constant_attrs); i++) {
        const ampc_attr *t = ampc_ir_attr_find(n, constant_attrs[i]);
        if (t) a = t, present++;
    }
    if (present != 1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "Constant needs exactly one of the attributes value, value_float, "
                         "value_floats, value_int, value_ints; got %d",
                         present);
    static const struct {
        const char *name;
        ampc_attr_kind kind;
        const char *kind_name;
    } forms[] = {
        {"value", AMPC_ATTR_TENSOR, "tensor"},        {"value_float", AMPC_ATTR_FLOAT, "float"},
        {"value_floats", AMPC_ATTR_FLOATS, "floats"}, {"value_int", AMPC_ATTR_INT, "int"},
        {"value_ints", AMPC_ATTR_INTS, "ints"},
    };
    int32_t f = -1;
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(forms); i++)
        if (!strcmp(a->name, forms[i].name)) f = i;
    if (f < 0)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "Constant attribute '%s' is not supported (ampc has no string or sparse "
                         "tensors)",
                         a->name);
    if (a->kind != forms[f].kind)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be of type %s", a->name,
                         forms[f].kind_name);
    ampc_shape s = {0, {0}};
    switch (a->kind) {
    case AMPC_ATTR_TENSOR: {
        const ampc_value *t = a->tensor;
        if (!t || (!t->data && ampc_ir_numel(t)))
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'value' must be a tensor with data");
        ampc_infer_set(n, 0, t->dtype, &t->shape);
        return AMPC_OK;
    }
    case AMPC_ATTR_FLOAT: ampc_infer_set(n, 0, AMPC_DTYPE_F32, &s); return AMPC_OK;
    case AMPC_ATTR_INT: ampc_infer_set(n, 0, AMPC_DTYPE_I64, &s); return AMPC_OK;
    default:
        s = (ampc_shape){1, {a->n}};
        ampc_infer_set(n, 0, a->kind == AMPC_ATTR_FLOATS ? AMPC_DTYPE_F32 : AMPC_DTYPE_I64, &s);
        return AMPC_OK;
    }
}

/* Shape (opset 15): the dims [start, end) of input 0 as a 1-D i64; start and end are clamped to
 * [0, rank] after adding rank to negative ones. */
ampc_status ampc_infer_shape(ampc_graph *g, ampc_node *n) {
    int32_t r = n->inputs[0]->shape.rank;
    int64_t lo, hi;
    if (!read_int(g, n, "start", 0, &lo) || !read_int(g, n, "end", r, &hi)) return AMPC_E_ATTR;
    ampc_shape_range(n, r, &lo, &hi);
    ampc_shape s = {1, {AMPC_MAX(hi - lo, 0)}};
    ampc_infer_set(n, 0, AMPC_DTYPE_I64, &s);
    return AMPC_OK;
}

/* Size: the element count of input 0 as an i64 scalar. */
ampc_status ampc_infer_size(ampc_graph *g, ampc_node *n) {
    (void)g;
    ampc_shape s = {0, {0}};
    ampc_infer_set(n, 0, AMPC_DTYPE_I64, &s);
    return AMPC_OK;
}

/* ---- views: Reshape, Flatten, Squeeze, Unsqueeze ------------------------------------------- */

/* Reshape: input 1 lists the new dims; 0 copies the input dim at that index (unless allowzero,
 * where 0 is a real 0), and one -1 takes whatever keeps the element count. */
ampc_status ampc_infer_reshape(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *sv = n->inputs[1];
    int64_t req[AMPC_MAX_RANK], allowzero, known = 1, numel = ampc_ir_numel(x);
    char sx[AMPC_SHAPE_STR_MAX], sr[LIST_STR_MAX];
    int32_t cnt = ampc_infer_const_ints(g, n, 1, req, AMPC_MAX_RANK), infer_at = -1;
    if (cnt < 0) return AMPC_E_SHAPE;
    if (!read_int(g, n, "allowzero", 0, &allowzero)) return AMPC_E_ATTR;
    ampc_shape y = {cnt, {0}};
    bool has_zero = false;
    for (int32_t i = 0; i < cnt; i++) {
        int64_t d = req[i];
        if (d == -1) {
            if (infer_at >= 0)
                return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                                 "input 1 '%s' %s has more than one -1; at most one dim can be "
                                 "inferred",
                                 sv->name, list_str(req, cnt, sr));
            infer_at = i;
            continue;
        }
        if (d < -1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 1 '%s' %s has entry %d = %lld; entries must be -1, 0 or "
                             "positive",
                             sv->name, list_str(req, cnt, sr), i, (long long)d);
        if (d == 0 && !allowzero) {
            if (i >= x->shape.rank)
                return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                                 "input 1 '%s' %s has 0 at index %d, which copies input dim %d, "
                                 "but input 0 '%s' is %s",
                                 sv->name, list_str(req, cnt, sr), i, i, x->name, shp(x, sx));
            d = x->shape.dims[i];
        }
        has_zero |= d == 0;
        y.dims[i] = d;
        if (!ampc_mul_ok(known, d, &known)) return overflow(g, n, "the product of the new dims");
    }
    if (allowzero && infer_at >= 0 && has_zero)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' %s has both 0 and -1, which allowzero = 1 forbids", sv->name,
                         list_str(req, cnt, sr));
    if (infer_at >= 0) {
        if (known == 0 || numel % known)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "Reshape must keep the element count: input 0 '%s' is %s (%lld "
                             "elements), which no value of the -1 in input 1 '%s' %s gives",
                             x->name, shp(x, sx), (long long)numel, sv->name,
                             list_str(req, cnt, sr));
        y.dims[infer_at] = numel / known;
    } else if (known != numel) {
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "Reshape must keep the element count: input 0 '%s' is %s (%lld "
                         "elements), input 1 '%s' %s asks for %lld",
                         x->name, shp(x, sx), (long long)numel, sv->name, list_str(req, cnt, sr),
                         (long long)known);
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* Flatten: [d0..d(axis-1)] and [d(axis)..] each collapse to one dim; axis in [-rank, rank]. */
ampc_status ampc_infer_flatten(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int32_t r = x->shape.rank;
    int64_t axis;
    if (!ampc_infer_axis_attr(g, n, &axis)) return AMPC_E_ATTR;
    if (axis < -r || axis > r)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'axis' %lld is out of range for rank %d (expected %d to %d)",
                         (long long)axis, r, -r, r);
    if (axis < 0) axis += r;
    ampc_shape y = {2, {1, 1}};
    for (int32_t i = 0; i < r; i++) y.dims[i < axis ? 0 : 1] *= x->shape.dims[i];
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* The axes of Squeeze / Unsqueeze: input 1 (opset 13) or, when it is absent, the `axes`
 * attribute of older opsets. Returns the count, or -1 after a diagnostic; *given tells whether
 * any form was present. */
static int32_t read_axes_operand(ampc_graph *g, const ampc_node *n, int64_t *axes, bool *given) {
    if (n->n_inputs > 1 && n->inputs[1]) {
        *given = true;
        return ampc_infer_const_ints(g, n, 1, axes, AMPC_MAX_RANK);
    }
    int32_t cnt;
    int64_t before = diag_count(g);
    const int64_t *a = ampc_ir_attr_ints(g, n, "axes", &cnt);
    if (diag_count(g) != before) return -1;
    *given = a || ampc_ir_attr_find(n, "axes");
    if (cnt > AMPC_MAX_RANK) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'axes' has %d entries; at most %d are accepted",
                  cnt, AMPC_MAX_RANK);
        return -1;
    }
    if (cnt) memcpy(axes, a, (size_t)cnt * sizeof *axes);
    return cnt;
}

/* Squeeze: drops the listed dims (each must be 1), or every dim of size 1 when none is listed. */
ampc_status ampc_infer_squeeze(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t axes[AMPC_MAX_RANK];
    int32_t ax[AMPC_MAX_RANK];
    bool given, drop[AMPC_MAX_RANK] = {false};
    int32_t cnt = read_axes_operand(g, n, axes, &given);
    if (cnt < 0) return AMPC_E_ATTR;
    ampc_status st = norm_axes(g, n, axes, cnt, x->shape.rank, "Squeeze axis", ax);
    if (st) return st;
    for (int32_t i = 0; i < cnt; i++) {
        if (x->shape.dims[ax[i]] != 1) {
            char sx[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "cannot squeeze axis %d: input 0 '%s' is %s, and that dim is %lld, "
                             "not 1",
                             ax[i], x->name, shp(x, sx), (long long)x->shape.dims[ax[i]]);
        }
        drop[ax[i]] = true;
    }
    if (!given)
        for (int32_t i = 0; i < x->shape.rank; i++) drop[i] = x->shape.dims[i] == 1;
    ampc_shape y = {0, {0}};
    for (int32_t i = 0; i < x->shape.rank; i++)
        if (!drop[i]) y.dims[y.rank++] = x->shape.dims[i];
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* Unsqueeze: inserts dims of size 1 at the listed positions of the output. */
ampc_status ampc_infer_unsqueeze(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t axes[AMPC_MAX_RANK];
    int32_t ax[AMPC_MAX_RANK];
    bool given, ins[AMPC_MAX_RANK] = {false};
    int32_t cnt = read_axes_operand(g, n, axes, &given);
    if (cnt < 0) return AMPC_E_ATTR;
    if (!given)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "Unsqueeze needs axes: input 1 'axes' or the attribute 'axes'");
    int32_t r = x->shape.rank + cnt;
    if (r > AMPC_MAX_RANK)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "output rank %d (input rank %d plus %d axes) exceeds ampc's maximum %d", r,
                         x->shape.rank, cnt, AMPC_MAX_RANK);
    ampc_status st = norm_axes(g, n, axes, cnt, r, "Unsqueeze axis", ax);
    if (st) return st;
    for (int32_t i = 0; i < cnt; i++) ins[ax[i]] = true;
    ampc_shape y = {r, {0}};
    for (int32_t i = 0, j = 0; i < r; i++) y.dims[i] = ins[i] ? 1 : x->shape.dims[j++];
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* ---- Transpose, Concat, Split, Slice -------------------------------------------------------- */

/* Transpose: output dim i is input dim perm[i]; perm defaults to the reversed dims. */
ampc_status ampc_infer_transpose(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int32_t r = x->shape.rank, cnt, perm[AMPC_MAX_RANK];
    int64_t before = diag_count(g);
    const int64_t *p = ampc_ir_attr_ints(g, n, "perm", &cnt);
    if (diag_count(g) != before) return AMPC_E_ATTR;
    ampc_shape y = {r, {0}};
    if (!p) {
        for (int32_t i = 0; i < r; i++) y.dims[i] = x->shape.dims[r - 1 - i];
    } else {
        char sx[AMPC_SHAPE_STR_MAX];
        if (cnt != r)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'perm' must have one entry per dim of input 0 '%s' %s, got "
                             "%d",
                             x->name, shp(x, sx), cnt);
        ampc_status st = norm_axes(g, n, p, cnt, r, "Transpose perm", perm);
        if (st) return st;
        for (int32_t i = 0; i < r; i++) y.dims[i] = x->shape.dims[perm[i]];
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* Concat: inputs of one dtype and rank, equal except along `axis`, which adds up. */
ampc_status ampc_infer_concat(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t axis;
    int32_t ax;
    char sa[AMPC_SHAPE_STR_MAX], sb[AMPC_SHAPE_STR_MAX];
    if (!ampc_ir_attr_find(n, "axis"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'axis' is required");
    if (!ampc_infer_axis_attr(g, n, &axis)) return AMPC_E_ATTR;
    ampc_status st = need_rank1(g, n);
    if (st) return st;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "attribute 'axis'", &ax)) return AMPC_E_ATTR;
    ampc_shape y = x->shape;
    for (int32_t i = 1; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        if (!v) return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "input %d is absent", i);
        if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
        bool ok = v->shape.rank == x->shape.rank;
        for (int32_t d = 0; ok && d < x->shape.rank; d++)
            ok = d == ax || v->shape.dims[d] == x->shape.dims[d];
        if (!ok)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "Concat inputs must match in every dim but axis %d: input 0 '%s' is "
                             "%s, input %d '%s' is %s",
                             ax, x->name, shp(x, sa), i, v->name, shp(v, sb));
        if (!ampc_add_ok(y.dims[ax], v->shape.dims[ax], &y.dims[ax]))
            return overflow(g, n, "the concatenated dim");
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* Split along `axis` into the node's outputs: sizes from input 1 (or the older `split`
 * attribute), or num_outputs chunks of ceil(dim / num_outputs) with a smaller last one, or equal
 * parts. */
ampc_status ampc_infer_split(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int32_t nout = n->n_outputs, ax, cnt = 0;
    int64_t axis, sizes[64], num, total = 0;
    char sx[AMPC_SHAPE_STR_MAX], sl[LIST_STR_MAX];
    ampc_status st = need_rank1(g, n);
    if (st) return st;
    if (!ampc_infer_axis_attr(g, n, &axis) || !read_int(g, n, "num_outputs", 0, &num))
        return AMPC_E_ATTR;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "attribute 'axis'", &ax)) return AMPC_E_ATTR;
    int64_t dim = x->shape.dims[ax];
    char src[160] = "attribute 'split'";
    if (n->n_inputs > 1 && n->inputs[1]) {
        snprintf(src, sizeof src, "input 1 '%s'", n->inputs[1]->name);
        cnt = ampc_infer_const_ints(g, n, 1, sizes, AMPC_ARRAY_LEN(sizes));
        if (cnt < 0) return AMPC_E_SHAPE;
    } else if (ampc_ir_attr_find(n, "split")) {
        int64_t before = diag_count(g);
        const int64_t *a = ampc_ir_attr_ints(g, n, "split", &cnt);
        if (diag_count(g) != before) return AMPC_E_ATTR;
        if (cnt > AMPC_ARRAY_LEN(sizes))
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'split' has %d entries; at most %d", cnt,
                             AMPC_ARRAY_LEN(sizes));
        if (cnt) memcpy(sizes, a, (size_t)cnt * sizeof *sizes);
    }
    if (cnt && ampc_ir_attr_find(n, "num_outputs"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "give either the split sizes or attribute 'num_outputs', not both");
    if (cnt) {
        if (cnt != nout)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "%s %s has %d entries but the node has %d outputs",
                             src, list_str(sizes, cnt, sl), cnt, nout);
        for (int32_t i = 0; i < cnt; i++) {
            if (sizes[i] < 0)
                return AMPC_FAIL(g, n, AMPC_E_SHAPE, "%s %s has a negative entry %lld", src,
                                 list_str(sizes, cnt, sl), (long long)sizes[i]);
            if (!ampc_add_ok(total, sizes[i], &total))
                return overflow(g, n, "the sum of the splits");
        }
        if (total != dim)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "%s %s sums to %lld, but axis %d of input 0 '%s' %s has %lld", src,
                             list_str(sizes, cnt, sl), (long long)total, ax, x->name, shp(x, sx),
                             (long long)dim);
    } else if (ampc_ir_attr_find(n, "num_outputs")) {
        if (num != nout)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'num_outputs' is %lld but the node has %d outputs",
                             (long long)num, nout);
        int64_t chunk = dim / nout + (dim % nout != 0), last = dim - chunk * (nout - 1);
        if (last < 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "axis %d of input 0 '%s' %s has %lld elements, too few for %d chunks "
                             "of %lld",
                             ax, x->name, shp(x, sx), (long long)dim, nout, (long long)chunk);
        for (int32_t i = 0; i < nout; i++) sizes[i] = i == nout - 1 ? last : chunk;
    } else {
        if (dim % nout)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "axis %d of input 0 '%s' %s has %lld elements, which do not split "
                             "into %d equal parts",
                             ax, x->name, shp(x, sx), (long long)dim, nout);
        for (int32_t i = 0; i < nout; i++) sizes[i] = dim / nout;
    }
    for (int32_t i = 0; i < nout; i++) {
        ampc_shape y = x->shape;
        y.dims[ax] = sizes[i];
        ampc_infer_set(n, i, x->dtype, &y);
    }
    return AMPC_OK;
}

/* One axis of Slice per ONNX: negative start/end count from the end; then start is clamped to
 * [0, dim] (step > 0) or [0, dim-1] (step < 0) and end to [0, dim] or [-1, dim-1]. Returns the
 * element count along the axis and the clamped start. */
static int64_t slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first) {
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = AMPC_MIN(AMPC_MAX(start, 0), dim);
        end = AMPC_MIN(AMPC_MAX(end, 0), dim);
    } else {
        start = AMPC_MIN(AMPC_MAX(start, 0), dim - 1);
        end = AMPC_MIN(AMPC_MAX(end, -1), dim - 1);
    }
    *first = start;
    /* Both bounds lie in [-1, dim]: their difference cannot overflow; |step| may be 2^63. */
    int64_t span = step > 0 ? end - start : start - end;
    uint64_t ustep = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
    return span <= 0 ? 0 : (int64_t)(1 + (uint64_t)(span - 1) / ustep);
}

/* Slice (opset 10+): starts, ends and the optional axes and steps are constant inputs 1-4. */
ampc_status ampc_infer_slice(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t starts[AMPC_MAX_RANK], ends[AMPC_MAX_RANK], axes[AMPC_MAX_RANK], steps[AMPC_MAX_RANK];
    int32_t ax[AMPC_MAX_RANK], r = x->shape.rank;
    char sl[LIST_STR_MAX];
    ampc_status st = need_rank1(g, n);
    if (st) return st;
    int32_t ns = ampc_infer_const_ints(g, n, 1, starts, AMPC_MAX_RANK);
    int32_t ne = ns < 0 ? -1 : ampc_infer_const_ints(g, n, 2, ends, AMPC_MAX_RANK);
    int32_t na = ne < 0 ? -1 : ampc_infer_const_ints(g, n, 3, axes, AMPC_MAX_RANK);
    int32_t nt = na < 0 ? -1 : ampc_infer_const_ints(g, n, 4, steps, AMPC_MAX_RANK);
    if (nt < 0) return AMPC_E_SHAPE;
    bool has_axes = n->n_inputs > 3 && n->inputs[3], has_steps = n->n_inputs > 4 && n->inputs[4];
    if (ne != ns || (has_axes && na != ns) || (has_steps && nt != ns))
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "starts, ends, axes and steps must have one length: got %d, %d, %d, %d",
                         ns, ne, has_axes ? na : ns, has_steps ? nt : ns);
    for (int32_t i = 0; i < ns; i++) {
        if (!has_axes) axes[i] = i;
        if (!has_steps) steps[i] = 1;
        if (steps[i] == 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 4 '%s' %s has a 0 step; steps must be "
                             "non-zero",
                             n->inputs[4]->name, list_str(steps, ns, sl));
    }
    if ((st = norm_axes(g, n, axes, ns, r, "Slice axis", ax))) return st;
    ampc_shape y = x->shape;
    for (int32_t i = 0; i < ns; i++) {
        int64_t first;
        y.dims[ax[i]] = slice_axis(x->shape.dims[ax[i]], starts[i], ends[i], steps[i], &first);
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* ---- Gather, Expand, ConstantOfShape, Range, Pad ------------------------------------------- */

/* Gather: data[:axis] + indices.shape + data[axis+1:]. Index values are checked at evaluation. */
ampc_status ampc_infer_gather(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *idx = n->inputs[1];
    int64_t axis;
    int32_t ax;
    ampc_status st = need_rank1(g, n);
    if (st) return st;
    if (idx->dtype != AMPC_DTYPE_I64 && idx->dtype != AMPC_DTYPE_I32)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 1 '%s' must be i64 or i32, got %s", idx->name,
                         ampc_dtype_name(idx->dtype));
    if (!ampc_infer_axis_attr(g, n, &axis)) return AMPC_E_ATTR;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "attribute 'axis'", &ax)) return AMPC_E_ATTR;
    int32_t r = x->shape.rank - 1 + idx->shape.rank;
    if (r > AMPC_MAX_RANK)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "output rank %d exceeds ampc's maximum %d", r,
                         AMPC_MAX_RANK);
    ampc_shape y = {0, {0}};
    for (int32_t i = 0; i < ax; i++) y.dims[y.rank++] = x->shape.dims[i];
    for (int32_t i = 0; i < idx->shape.rank; i++) y.dims[y.rank++] = idx->shape.dims[i];
    for (int32_t i = ax + 1; i < x->shape.rank; i++) y.dims[y.rank++] = x->shape.dims[i];
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* Expand: numpy broadcasting of input 0's shape with the shape in input 1 (either side may
 * hold the 1s). */
ampc_status ampc_infer_expand(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t req[AMPC_MAX_RANK];
    char sx[AMPC_SHAPE_STR_MAX], sl[LIST_STR_MAX];
    int32_t cnt = ampc_infer_const_ints(g, n, 1, req, AMPC_MAX_RANK);
    if (cnt < 0) return AMPC_E_SHAPE;
    ampc_shape y = {AMPC_MAX(cnt, x->shape.rank), {0}};
    for (int32_t i = 0; i < y.rank; i++) {
        int32_t xi = i - (y.rank - x->shape.rank), si = i - (y.rank - cnt);
        int64_t a = xi >= 0 ? x->shape.dims[xi] : 1, b = si >= 0 ? req[si] : 1;
        if (b < 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 1 '%s' %s has a negative dim",
                             n->inputs[1]->name, list_str(req, cnt, sl));
        if (a != b && a != 1 && b != 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 0 '%s' %s does not broadcast with the shape %s of input 1 "
                             "'%s': output dim %d is %lld against %lld",
                             x->name, shp(x, sx), list_str(req, cnt, sl), n->inputs[1]->name, i,
                             (long long)a, (long long)b);
        y.dims[i] = a == 1 ? b : a;
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* ConstantOfShape: a tensor of the shape in input 0, filled with the one element of the `value`
 * tensor attribute (default: f32 0). */
ampc_status ampc_infer_constant_of_shape(ampc_graph *g, ampc_node *n) {
    int64_t req[AMPC_MAX_RANK];
    char sl[LIST_STR_MAX], sv[AMPC_SHAPE_STR_MAX];
    int32_t cnt = ampc_infer_const_ints(g, n, 0, req, AMPC_MAX_RANK);
    if (cnt < 0) return AMPC_E_SHAPE;
    if (n->inputs[0]->shape.rank != 1)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' must be 1-D, got %s", n->inputs[0]->name,
                         shp(n->inputs[0], sv));
    ampc_shape y = {cnt, {0}};
    for (int32_t i = 0; i < cnt; i++) {
        if (req[i] < 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' %s has a negative dim",
                             n->inputs[0]->name, list_str(req, cnt, sl));
        y.dims[i] = req[i];
    }
    ampc_dtype t = AMPC_DTYPE_F32;
    const ampc_attr *a = ampc_ir_attr_find(n, "value");
    if (a) {
        if (a->kind != AMPC_ATTR_TENSOR || !a->tensor)
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'value' must be a one-element tensor");
        if (ampc_ir_numel(a->tensor) != 1 || !a->tensor->data)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'value' must be a one-element tensor, got %s",
                             shp(a->tensor, sv));
        t = a->tensor->dtype;
    }
    ampc_infer_set(n, 0, t, &y);
    return AMPC_OK;
}

/* Largest Range length accepted: far beyond anything that could be allocated, and small enough
 * that the float arithmetic below stays exact. */
#define RANGE_MAX_LEN ((int64_t)1 << 52)

/* Range: start, start + delta, ... while short of limit; length max(ceil((limit - start) /
 * delta), 0). The three scalars are constants (ops.def) of one dtype. */
ampc_status ampc_infer_range(ampc_graph *g, ampc_node *n) {
    const char *names[3] = {"start", "limit", "delta"};
    for (int32_t i = 0; i < 3; i++) {
        const ampc_value *v = n->inputs[i];
        char s[AMPC_SHAPE_STR_MAX];
        if (!ampc_infer_check_dtype(g, n, i, DT_FLOAT | DT_SINT)) return AMPC_E_DTYPE;
        if (i && !ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
        if (ampc_ir_numel(v) != 1 || v->shape.rank > 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must be a scalar, got %s", i,
                             v->name, names[i], shp(v, s));
    }
    ampc_dtype t = n->inputs[0]->dtype;
    int64_t len;
    if (ampc_dtype_is_float(t)) {
        double s = ampc_ref_load_f64(n->inputs[0]->data, t, 0);
        double l = ampc_ref_load_f64(n->inputs[1]->data, t, 0);
        double d = ampc_ref_load_f64(n->inputs[2]->data, t, 0);
        double q = ceil((l - s) / d);
        if (d == 0 || !isfinite(q) || q > (double)RANGE_MAX_LEN)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "Range from %g to %g by %g has no finite length below 2^52", s, l, d);
        len = q > 0 ? (int64_t)q : 0;
    } else {
        int64_t s = ampc_ref_load_i64(n->inputs[0]->data, t, 0);
        int64_t l = ampc_ref_load_i64(n->inputs[1]->data, t, 0);
        int64_t d = ampc_ref_load_i64(n->inputs[2]->data, t, 0), diff;
        if (d == 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 2 '%s' (delta) is 0; Range needs a "
                             "non-zero step",
                             n->inputs[2]->name);
        if (__builtin_sub_overflow(l, s, &diff) || (diff == INT64_MIN && d == -1))
            return overflow(g, n, "the Range length (limit - start) / delta");
        len = diff / d + (diff % d != 0 && (diff < 0) == (d < 0)); /* ceil */
        if (len < 0) len = 0;
        if (len > RANGE_MAX_LEN)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "Range from %lld to %lld by %lld has %lld elements; at most 2^52 are "
                             "accepted",
                             (long long)s, (long long)l, (long long)d, (long long)len);
    }
    ampc_shape y = {1, {len}};
    ampc_infer_set(n, 0, t, &y);
    return AMPC_OK;
}

static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap"};

/* Pad (opset 18/19): input 1 holds the pads (all begins, then all ends) of the axes in input 3
 * (default: every axis); negative pads crop. Input 2 is the optional constant. Modes other than
 * constant copy elements of the (cropped) input, so they need at least one on a padded axis. */
ampc_status ampc_infer_pad(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t pads[2 * AMPC_MAX_RANK], axes[AMPC_MAX_RANK];
    int32_t ax[AMPC_MAX_RANK], r = x->shape.rank, mode = -1;
    char sx[AMPC_SHAPE_STR_MAX], sl[LIST_STR_MAX];
    int64_t before = diag_count(g);
    const char *m = ampc_ir_attr_string(g, n, "mode", "constant");
    if (diag_count(g) != before) return AMPC_E_ATTR;
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(pad_modes); i++)
        if (!strcmp(m, pad_modes[i])) mode = i;
    if (mode < 0)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'mode' must be constant, reflect, edge or wrap, got \"%s\"", m);
    int32_t np = ampc_infer_const_ints(g, n, 1, pads, 2 * AMPC_MAX_RANK);
    int32_t na = np < 0 ? -1 : ampc_infer_const_ints(g, n, 3, axes, AMPC_MAX_RANK);
    if (na < 0) return AMPC_E_SHAPE;
    bool has_axes = n->n_inputs > 3 && n->inputs[3];
    if (!has_axes) {
        na = r;
        for (int32_t i = 0; i < r; i++) axes[i] = i;
    }
    ampc_status st = norm_axes(g, n, axes, na, r, "Pad axis", ax);
    if (st) return st;
    if (np != 2 * na && (n->n_inputs < 2 || !n->inputs[1])) /* the table lets pads be absent */
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 (pads) is absent; it must have %d entries (begin and end for "
                         "each of %d axes)",
                         2 * na, na);
    if (np != 2 * na)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must have %d entries (begin and end for each of %d axes), "
                         "got %d",
                         n->inputs[1]->name, 2 * na, na, np);
    if (n->n_inputs > 2 && n->inputs[2]) {
        const ampc_value *c = n->inputs[2];
        if (!ampc_infer_same_dtype(g, n, 0, 2)) return AMPC_E_DTYPE;
        if (ampc_ir_numel(c) > 1 || c->shape.rank > 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 2 '%s' (constant_value) must be a scalar, got %s", c->name,
                             shp(c, sx));
    }
    ampc_shape y = x->shape;
    for (int32_t i = 0; i < na; i++) {
        int64_t d = x->shape.dims[ax[i]], pb = pads[i], pe = pads[na + i], o;
        /* What is left after the negative pads crop: pads < 0 may remove at most the dim. */
        uint64_t cb = pb < 0 ? 0 - (uint64_t)pb : 0, ce = pe < 0 ? 0 - (uint64_t)pe : 0;
        if (cb > (uint64_t)d || ce > (uint64_t)d - cb)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 1 '%s' %s crops more than the %lld elements of axis %d of "
                             "input 0 '%s' %s",
                             n->inputs[1]->name, list_str(pads, np, sl), (long long)d, ax[i],
                             x->name, shp(x, sx));
        int64_t kept = d - (int64_t)cb - (int64_t)ce;
        if (!ampc_add_ok(d, pb, &o) || !ampc_add_ok(o, pe, &o))
            return overflow(g, n, "the padded dim");
        if (mode != 0 && kept == 0 && (pb > 0 || pe > 0))
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "mode '%s' pads axis %d from its elements, but input 0 '%s' %s has "
                             "none left there",
                             m, ax[i], x->name, shp(x, sx));
        y.dims[ax[i]] = o;
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* ---- Tile, DepthToSpace, SpaceToDepth, CenterCropPad --------------------------------------- */

/* Tile: output dim i is dim i times repeats[i]; input 1 holds one non-negative repeat per dim. */
ampc_status ampc_infer_tile(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *rv = n->inputs[1];
    int64_t rep[AMPC_MAX_RANK];
    char sx[AMPC_SHAPE_STR_MAX], sl[LIST_STR_MAX];
    int32_t cnt = ampc_infer_const_ints(g, n, 1, rep, AMPC_MAX_RANK);
    if (cnt < 0) return AMPC_E_SHAPE;
    if (rv->shape.rank != 1 || cnt != x->shape.rank)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must be 1-D with one repeat per dim of input 0 '%s' %s, got "
                         "%d entries",
                         rv->name, x->name, shp(x, sx), cnt);
    ampc_shape y = x->shape;
    for (int32_t i = 0; i < cnt; i++) {
        if (rep[i] < 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 1 '%s' %s has a negative repeat",
                             rv->name, list_str(rep, cnt, sl));
        if (!ampc_mul_ok(y.dims[i], rep[i], &y.dims[i]))
            return overflow(g, n, "a tiled dim (dim * repeat)");
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* DepthToSpace ([N, C, H, W] -> [N, C/b^2, H*b, W*b], modes DCR and CRD) and SpaceToDepth
 * ([N, C, H, W] -> [N, C*b^2, H/b, W/b]) with blocksize b. */
ampc_status ampc_infer_depth_space(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    bool to_space = n->op == AMPC_OP_DEPTH_TO_SPACE;
    char sx[AMPC_SHAPE_STR_MAX];
    int64_t b, bb;
    if (x->shape.rank != 4)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' must be 4-D [N, C, H, W], got %s",
                         x->name, shp(x, sx));
    if (!ampc_ir_attr_find(n, "blocksize"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'blocksize' is required");
    if (!read_int(g, n, "blocksize", 1, &b)) return AMPC_E_ATTR;
    if (b < 1 || !ampc_mul_ok(b, b, &bb))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'blocksize' must be positive (and its "
                         "square fit in 64 bits), got %lld", (long long)b);
    if (to_space) {
        int64_t before = diag_count(g);
        const char *m = ampc_ir_attr_string(g, n, "mode", "DCR");
        if (diag_count(g) != before) return AMPC_E_ATTR;
        if (strcmp(m, "DCR") && strcmp(m, "CRD"))
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'mode' must be DCR or CRD, got \"%s\"",
                             m);
    }
    const int64_t *d = x->shape.dims;
    ampc_shape y = x->shape;
    if (to_space) {
        if (d[1] % bb)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "the channels of input 0 '%s' %s must be a multiple of blocksize^2 = "
                             "%lld",
                             x->name, shp(x, sx), (long long)bb);
        y.dims[1] = d[1] / bb;
        if (!ampc_mul_ok(d[2], b, &y.dims[2]) || !ampc_mul_ok(d[3], b, &y.dims[3]))
            return overflow(g, n, "a spatial dim times blocksize");
    } else {
        if (d[2] % b || d[3] % b)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "the height and width of input 0 '%s' %s must be multiples of "
                             "blocksize %lld",
                             x->name, shp(x, sx), (long long)b);
        if (!ampc_mul_ok(d[1], bb, &y.dims[1])) return overflow(g, n, "channels * blocksize^2");
        y.dims[2] = d[2] / b;
        y.dims[3] = d[3] / b;
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* CenterCropPad: each listed axis (attribute `axes`, default all) is cropped or zero-padded
 * around its centre to the size in input 1. */
ampc_status ampc_infer_center_crop_pad(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t req[AMPC_MAX_RANK], axes[AMPC_MAX_RANK];
    int32_t ax[AMPC_MAX_RANK], r = x->shape.rank, na = r, cnt;
    char sl[LIST_STR_MAX];
    if ((cnt = ampc_infer_const_ints(g, n, 1, req, AMPC_MAX_RANK)) < 0) return AMPC_E_SHAPE;
    int64_t before = diag_count(g);
    const int64_t *a = ampc_ir_attr_ints(g, n, "axes", &na);
    if (diag_count(g) != before) return AMPC_E_ATTR;
    if (!a) na = r;
    if (na > AMPC_MAX_RANK)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'axes' has %d entries; input 0 has rank %d",
                         na, r);
    for (int32_t i = 0; i < na; i++) axes[i] = a ? a[i] : i;
    ampc_status st = norm_axes(g, n, axes, na, r, "CenterCropPad axis", ax);
    if (st) return st;
    if (cnt != na)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must have one size per axis (%d), got %d",
                         n->inputs[1]->name, na, cnt);
    ampc_shape y = x->shape;
    for (int32_t i = 0; i < na; i++) {
        if (req[i] < 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 1 '%s' %s has a negative size",
                             n->inputs[1]->name, list_str(req, cnt, sl));
        y.dims[ax[i]] = req[i];
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* BitCast: the same bytes read as the element type `to` (an ONNX TensorProto code) of the same
 * width; the shape is unchanged. */
ampc_status ampc_infer_bit_cast(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    const ampc_attr *a = ampc_ir_attr_find(n, "to");
    if (!a || a->kind != AMPC_ATTR_INT)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "BitCast needs an int attribute 'to' (the target ONNX data type)");
    ampc_dtype to = a->i == (int32_t)a->i ? ampc_dtype_from_onnx((int32_t)a->i)
                                          : AMPC_DTYPE_UNDEFINED;
    if (to == AMPC_DTYPE_UNDEFINED)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "BitCast to ONNX data type %lld is not supported (supported: float, "
                         "double, float16, bfloat16, integers and bool)",
                         (long long)a->i);
    if (ampc_dtype_size(to) != ampc_dtype_size(x->dtype))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE,
                         "BitCast keeps every bit, so the target type must have the width of "
                         "input 0 '%s': %s is %zu bits, %s is %zu bits",
                         x->name, ampc_dtype_name(x->dtype), 8 * ampc_dtype_size(x->dtype),
                         ampc_dtype_name(to), 8 * ampc_dtype_size(to));
    ampc_infer_set(n, 0, to, &x->shape);
    return AMPC_OK;
}
