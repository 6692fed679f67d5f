/*
 * index.c — inference for the indexing family: the element and N-d gathers and scatters
 * (GatherElements, GatherND, ScatterElements, Scatter, ScatterND, TensorScatter), OneHot, TopK,
 * Trilu, the arg reductions (ArgMax, ArgMin), Hardmax, CumSum, CumProd, EyeLike, ReverseSequence,
 * TfIdfVectorizer (n-gram counting over integer tokens), and the ops whose output shape depends
 * on the values of an input (NonZero, Compress, Unique, NonMaxSuppression).
 *
 * Index values themselves are data: they are range-checked by the reference kernels
 * (ir/ref/index.c), which report an index out of range as an evaluation error. The exception is
 * the data-dependent-shape ops: ampc compiles static graphs, so their deciding input is a
 * compile-time constant (the `cin` column) and inference reads it to fix the output shape.
 */
#include "../ref/ref.h" /* element loads for constant operands */
#include "infer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Defined in ir/ref/index.c: the number of distinct elements (axis < 0) or distinct slices along
 * `axis` of x; -1 when host memory runs out. Inference and the kernel share it so that the shape
 * inferred for Unique is exactly what the kernel produces. */
int64_t ampc_ref_unique_count(const ampc_tensor *x, int32_t axis);
/* Defined in ir/ref/index.c: NonMaxSuppression's selection over inputs in[0..n_in-1] (NULL for
 * absent ones); writes (batch, class, box) triples to sel unless it is NULL and returns their
 * count, or -1 when host memory runs out. */
int64_t ampc_ref_nms_select(const ampc_tensor *const *in, int32_t n_in, bool center, int64_t *sel);

/* Diagnostics recorded so far (kept and dropped): the attribute readers of ir.h report a
 * mistyped attribute by recording one and returning the default. */
static int64_t diag_count(const ampc_graph *g) { return (int64_t)g->diag.n + g->diag.dropped; }

/* "[2,3]" of a value's shape, in a caller buffer of AMPC_SHAPE_STR_MAX bytes. */
static const char *shp(const ampc_value *v, char *buf) {
    return ampc_shape_str(&v->shape, buf, AMPC_SHAPE_STR_MAX);
}

/* Reads an int attribute; false when it is mistyped (the reader recorded why). */
static bool read_int(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                     int64_t *out) {
    int64_t before = diag_count(g);
    *out = ampc_ir_attr_int(g, n, name, dflt);
    return diag_count(g) == before;
}

/* Reads an int attribute that must be 0 or 1. */
static bool read_flag(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                      int64_t *out) {
    if (!read_int(g, n, name, dflt, out)) return false;
    if (*out == 0 || *out == 1) return true;
    AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be 0 or 1, got %lld", name, (long long)*out);
    return false;
}

/* Reads the axis attribute (the op's default when absent: ampc_axis_default) and normalises it
 * against `rank`. */
static bool read_axis(ampc_graph *g, const ampc_node *n, int32_t rank, int32_t *ax) {
    int64_t axis;
    return ampc_infer_axis_attr(g, n, &axis) &&
           ampc_infer_axis(g, n, axis, rank, "attribute 'axis'", ax);
}

/* Input i must have rank `lo` or more. */
static bool need_rank(ampc_graph *g, const ampc_node *n, int32_t i, int32_t lo) {
    const ampc_value *v = n->inputs[i];
    if (v->shape.rank >= lo) return true;
    char s[AMPC_SHAPE_STR_MAX];
    AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' must have rank %d or more, got %s", i, v->name, lo,
              shp(v, s));
    return false;
}

/* Input i holds indices: i64 or i32. */
static bool need_index_dtype(ampc_graph *g, const ampc_node *n, int32_t i) {
    const ampc_value *v = n->inputs[i];
    if (v->dtype == AMPC_DTYPE_I64 || v->dtype == AMPC_DTYPE_I32) return true;
    AMPC_FAIL(g, n, AMPC_E_DTYPE, "input %d '%s' must be i64 or i32, got %s", i, v->name,
              ampc_dtype_name(v->dtype));
    return false;
}

static ampc_status rank_too_big(ampc_graph *g, const ampc_node *n, int32_t r) {
    return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "output rank %d exceeds ampc's maximum %d", r,
                     AMPC_MAX_RANK);
}

/* A compile-time operand that must hold exactly one integer (a scalar or a 1-element 1-D
 * tensor): TopK's K, Trilu's k, CumSum's axis. */
static bool const_scalar_int(ampc_graph *g, const ampc_node *n, int32_t i, const char *what,
                             int64_t *out) {
    int64_t buf[1];
    const ampc_value *v = n->inputs[i];
    if (ampc_ir_numel(v) != 1 || v->shape.rank > 1) {
        char s[AMPC_SHAPE_STR_MAX];
        AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must hold exactly one integer, got %s", i,
                  v->name, what, shp(v, s));
        return false;
    }
    if (ampc_infer_const_ints(g, n, i, buf, 1) != 1) return false;
    *out = buf[0];
    return true;
}

/* Shape-dependent-on-values ops: their deciding input must carry data. The `cin` column marks it
 * (so the ONNX importer binds it and the graph builder rejects a run-time value with its generic
 * compile-time message before inference runs); this states the op's own rule where the shape is
 * decided, and is what a caller of the inference function alone would see. */
static bool need_values(ampc_graph *g, const ampc_node *n, int32_t i) {
    const ampc_value *v = n->inputs[i];
    if (v->data || !ampc_ir_numel(v)) return true;
    AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
              "output shape depends on the values of input %d '%s'; ampc compiles static graphs, "
              "so this input must be a constant",
              i, v->name);
    return false;
}

/* ---- GatherElements, ScatterElements, Scatter ----------------------------------------------- */

/* Indices (input 1) of the rank of the data (input 0), no larger than it along the dims other
 * than `ax` (where any size is allowed: every index is checked at evaluation). */
static ampc_status check_elements_indices(ampc_graph *g, const ampc_node *n, int32_t ax) {
    const ampc_value *x = n->inputs[0], *idx = n->inputs[1];
    char sx[AMPC_SHAPE_STR_MAX], si[AMPC_SHAPE_STR_MAX];
    if (idx->shape.rank != x->shape.rank)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must have the rank of input 0 '%s': got %s against %s",
                         idx->name, x->name, shp(idx, si), shp(x, sx));
    for (int32_t d = 0; d < x->shape.rank; d++)
        if (d != ax && idx->shape.dims[d] > x->shape.dims[d])
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 1 '%s' %s is larger than input 0 '%s' %s along dim %d (%lld > "
                             "%lld); only the axis dim %d may be larger",
                             idx->name, shp(idx, si), x->name, shp(x, sx), d,
                             (long long)idx->shape.dims[d], (long long)x->shape.dims[d], ax);
    return AMPC_OK;
}

/* GatherElements: out[i...] = data[i... with index `axis` replaced by indices[i...]]; the output
 * has the indices' shape and the data's dtype. */
ampc_status ampc_infer_gather_elements(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int32_t ax;
    if (!need_rank(g, n, 0, 1) || !need_index_dtype(g, n, 1)) return AMPC_E_SHAPE;
    if (!read_axis(g, n, x->shape.rank, &ax)) return AMPC_E_ATTR;
    ampc_status st = check_elements_indices(g, n, ax);
    if (st) return st;
    ampc_infer_set(n, 0, x->dtype, &n->inputs[1]->shape);
    return AMPC_OK;
}

static const char *const scatter_reductions[] = {"none", "add", "mul", "max", "min"};

/* Reads the `reduction` attribute of the scatters; its index in scatter_reductions. */
static bool read_reduction(ampc_graph *g, const ampc_node *n, int32_t *out) {
    int64_t before = diag_count(g);
    const char *s = ampc_ir_attr_string(g, n, "reduction", "none");
    if (diag_count(g) != before) return false;
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(scatter_reductions); i++)
        if (!strcmp(s, scatter_reductions[i])) {
            *out = i;
            return true;
        }
    AMPC_FAIL(g, n, AMPC_E_ATTR,
              "attribute 'reduction' must be none, add, mul, max or min, got "
              "\"%s\"",
              s);
    return false;
}

/* Updates (input 2) must have dtype of input 0 and the shape `want`. */
static ampc_status check_updates(ampc_graph *g, const ampc_node *n, const ampc_shape *want,
                                 const char *rule) {
    const ampc_value *u = n->inputs[2];
    if (!ampc_infer_same_dtype(g, n, 0, 2)) return AMPC_E_DTYPE;
    if (ampc_shape_eq(&u->shape, want)) return AMPC_OK;
    char su[AMPC_SHAPE_STR_MAX], sw[AMPC_SHAPE_STR_MAX];
    return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 2 '%s' must be %s (%s), got %s", u->name,
                     ampc_shape_str(want, sw, sizeof sw), rule, shp(u, su));
}

/* ScatterElements (and the deprecated Scatter, opsets 9-10): a copy of the data with
 * updates[i...] written (or combined by `reduction`) at the place GatherElements would read. */
ampc_status ampc_infer_scatter_elements(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int32_t ax, red;
    if (!need_rank(g, n, 0, 1) || !need_index_dtype(g, n, 1)) return AMPC_E_SHAPE;
    if (!read_axis(g, n, x->shape.rank, &ax) || !read_reduction(g, n, &red)) return AMPC_E_ATTR;
    ampc_status st = check_elements_indices(g, n, ax);
    if (st || (st = check_updates(g, n, &n->inputs[1]->shape, "the shape of input 1"))) return st;
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* ---- GatherND, ScatterND -------------------------------------------------------------------- */

/* GatherND: indices [b..., m..., k] address slices data[b..., i1..ik, :] of the data; the output
 * is indices.shape[:-1] + data.shape[batch_dims + k:]. The first batch_dims dims of data and
 * indices are shared. */
ampc_status ampc_infer_gather_nd(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *idx = n->inputs[1];
    char sx[AMPC_SHAPE_STR_MAX], si[AMPC_SHAPE_STR_MAX];
    int64_t b;
    if (!need_rank(g, n, 0, 1) || !need_rank(g, n, 1, 1) || !need_index_dtype(g, n, 1))
        return AMPC_E_SHAPE;
    if (!read_int(g, n, "batch_dims", 0, &b)) return AMPC_E_ATTR;
    int32_t r = x->shape.rank, q = idx->shape.rank;
    if (b < 0 || b >= AMPC_MIN(r, q))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'batch_dims' %lld must be in [0, %d) for input 0 '%s' %s and "
                         "input 1 '%s' %s",
                         (long long)b, AMPC_MIN(r, q), x->name, shp(x, sx), idx->name,
                         shp(idx, si));
    for (int32_t d = 0; d < b; d++)
        if (x->shape.dims[d] != idx->shape.dims[d])
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "batch dim %d differs: input 0 '%s' is %s, input 1 '%s' is %s", d,
                             x->name, shp(x, sx), idx->name, shp(idx, si));
    int64_t k = idx->shape.dims[q - 1];
    if (k < 1 || k > r - b)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "the last dim of input 1 '%s' %s (the index depth) must be in [1, %lld] "
                         "(the rank of input 0 '%s' %s less batch_dims %lld), got %lld",
                         idx->name, shp(idx, si), (long long)(r - b), x->name, shp(x, sx),
                         (long long)b, (long long)k);
    int32_t yr = q - 1 + r - (int32_t)b - (int32_t)k;
    if (yr > AMPC_MAX_RANK) return rank_too_big(g, n, yr);
    ampc_shape y = {0, {0}};
    for (int32_t d = 0; d < q - 1; d++) y.dims[y.rank++] = idx->shape.dims[d];
    for (int32_t d = (int32_t)(b + k); d < r; d++) y.dims[y.rank++] = x->shape.dims[d];
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* ScatterND: a copy of data with the slices that indices [m..., k] address replaced (or
 * combined) by updates, which must be indices.shape[:-1] + data.shape[k:]. */
ampc_status ampc_infer_scatter_nd(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *idx = n->inputs[1];
    char sx[AMPC_SHAPE_STR_MAX], si[AMPC_SHAPE_STR_MAX];
    int32_t red;
    if (!need_rank(g, n, 0, 1) || !need_rank(g, n, 1, 1) || !need_index_dtype(g, n, 1))
        return AMPC_E_SHAPE;
    if (!read_reduction(g, n, &red)) return AMPC_E_ATTR;
    int32_t r = x->shape.rank, q = idx->shape.rank;
    int64_t k = idx->shape.dims[q - 1];
    if (k < 1 || k > r)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "the last dim of input 1 '%s' %s (the index depth) must be in [1, %d] "
                         "(the rank of input 0 '%s' %s), got %lld",
                         idx->name, shp(idx, si), r, x->name, shp(x, sx), (long long)k);
    ampc_shape want = {0, {0}};
    if (q - 1 + r - k > AMPC_MAX_RANK) return rank_too_big(g, n, (int32_t)(q - 1 + r - k));
    for (int32_t d = 0; d < q - 1; d++) want.dims[want.rank++] = idx->shape.dims[d];
    for (int32_t d = (int32_t)k; d < r; d++) want.dims[want.rank++] = x->shape.dims[d];
    ampc_status st = check_updates(g, n, &want, "indices.shape[:-1] + data.shape[k:]");
    if (st) return st;
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* ---- OneHot, TopK, Trilu -------------------------------------------------------------------- */

/* OneHot: indices [d...], depth (a constant number), values [off, on] -> a new axis of `depth`
 * entries inserted at `axis` (default -1: last), of the values' dtype. */
ampc_status ampc_infer_one_hot(ampc_graph *g, ampc_node *n) {
    const ampc_value *idx = n->inputs[0], *dv = n->inputs[1], *vals = n->inputs[2];
    char s[AMPC_SHAPE_STR_MAX];
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM) || !ampc_infer_check_dtype(g, n, 1, DT_NUM))
        return AMPC_E_DTYPE;
    if (ampc_ir_numel(dv) != 1 || dv->shape.rank > 1)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 1 '%s' (depth) must hold one number, got %s",
                         dv->name, shp(dv, s));
    if (vals->shape.rank != 1 || vals->shape.dims[0] != 2)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 2 '%s' (values) must be [2] (off value, on value), got %s",
                         vals->name, shp(vals, s));
    double depth = ampc_ref_load_f64(dv->data, dv->dtype, 0);
    if (!(depth >= 1) || depth > (double)INT64_MAX / 2)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 1 '%s' (depth) must be 1 or more, got %g",
                         dv->name, depth);
    int32_t r = idx->shape.rank + 1, ax;
    if (r > AMPC_MAX_RANK) return rank_too_big(g, n, r);
    if (!read_axis(g, n, r, &ax)) return AMPC_E_ATTR;
    ampc_shape y = {r, {0}};
    for (int32_t d = 0, j = 0; d < r; d++)
        y.dims[d] = d == ax ? (int64_t)depth : idx->shape.dims[j++];
    ampc_infer_set(n, 0, vals->dtype, &y);
    return AMPC_OK;
}

/* TopK: the K largest (or smallest) entries along `axis` and their i64 indices; K is a
 * constant in [0, dim]. */
ampc_status ampc_infer_top_k(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    char s[AMPC_SHAPE_STR_MAX];
    int32_t ax;
    int64_t k, flag;
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM)) return AMPC_E_DTYPE;
    if (!need_rank(g, n, 0, 1)) return AMPC_E_SHAPE;
    if (!read_axis(g, n, x->shape.rank, &ax) || !read_flag(g, n, "largest", 1, &flag) ||
        !read_flag(g, n, "sorted", 1, &flag))
        return AMPC_E_ATTR;
    if (!const_scalar_int(g, n, 1, "K", &k)) return AMPC_E_SHAPE;
    if (k < 0 || k > x->shape.dims[ax])
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' (K) is %lld, must be in [0, %lld]: axis %d of input 0 '%s' "
                         "%s has %lld entries",
                         n->inputs[1]->name, (long long)k, (long long)x->shape.dims[ax], ax,
                         x->name, shp(x, s), (long long)x->shape.dims[ax]);
    ampc_shape y = x->shape;
    y.dims[ax] = k;
    ampc_infer_set(n, 0, x->dtype, &y);
    ampc_infer_set(n, 1, AMPC_DTYPE_I64, &y);
    return AMPC_OK;
}

/* Trilu: the upper (or lower) triangle of the last two dims, from diagonal k on. */
ampc_status ampc_infer_trilu(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t upper, k = 0;
    if (!need_rank(g, n, 0, 2)) return AMPC_E_SHAPE;
    if (!read_flag(g, n, "upper", 1, &upper)) return AMPC_E_ATTR;
    if (n->n_inputs > 1 && n->inputs[1] && !const_scalar_int(g, n, 1, "k", &k)) return AMPC_E_SHAPE;
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* ---- ArgMax, ArgMin, Hardmax, CumSum -------------------------------------------------------- */

/* ArgMax, ArgMin: the i64 index of the extreme entry along `axis` (first one, or last with
 * select_last_index); the axis is kept as 1 (keepdims) or dropped. */
ampc_status ampc_infer_arg_reduce(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    char s[AMPC_SHAPE_STR_MAX];
    int32_t ax;
    int64_t keep, last;
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM)) return AMPC_E_DTYPE;
    if (!need_rank(g, n, 0, 1)) return AMPC_E_SHAPE;
    if (!read_axis(g, n, x->shape.rank, &ax) || !read_flag(g, n, "keepdims", 1, &keep) ||
        !read_flag(g, n, "select_last_index", 0, &last))
        return AMPC_E_ATTR;
    if (x->shape.dims[ax] == 0)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "axis %d of input 0 '%s' %s is empty; %s needs at least one entry", ax,
                         x->name, shp(x, s), ampc_op_get(n->op)->onnx);
    ampc_shape y = {0, {0}};
    for (int32_t d = 0; d < x->shape.rank; d++)
        if (d != ax)
            y.dims[y.rank++] = x->shape.dims[d];
        else if (keep)
            y.dims[y.rank++] = 1;
    ampc_infer_set(n, 0, AMPC_DTYPE_I64, &y);
    return AMPC_OK;
}

/* Hardmax (opset 13): 1 at the first maximum along `axis` (default -1), 0 elsewhere. */
ampc_status ampc_infer_hardmax(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int32_t ax;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (!need_rank(g, n, 0, 1)) return AMPC_E_SHAPE;
    if (!read_axis(g, n, x->shape.rank, &ax)) return AMPC_E_ATTR;
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* CumSum, CumProd: running sums or products along the constant axis in input 1; exclusive and
 * reverse flags. */
ampc_status ampc_infer_cumsum(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t axis, flag;
    int32_t ax;
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM)) return AMPC_E_DTYPE;
    if (!need_rank(g, n, 0, 1)) return AMPC_E_SHAPE;
    if (!const_scalar_int(g, n, 1, "axis", &axis)) return AMPC_E_SHAPE;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "input 1 (axis)", &ax) ||
        !read_flag(g, n, "exclusive", 0, &flag) || !read_flag(g, n, "reverse", 0, &flag))
        return AMPC_E_ATTR;
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* ---- NonZero, Compress, Unique: shapes that depend on values -------------------------------- */

/* NonZero: the i64 coordinates [rank, count] of the non-zero entries (a scalar counts as 1-D,
 * as numpy does). */
ampc_status ampc_infer_nonzero(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (!need_values(g, n, 0)) return AMPC_E_UNSUPPORTED;
    int64_t cnt = 0, total = ampc_ir_numel(x);
    for (int64_t i = 0; i < total; i++)
        cnt += ampc_dtype_is_float(x->dtype) ? ampc_ref_load_f64(x->data, x->dtype, i) != 0
                                             : ampc_ref_load_i64(x->data, x->dtype, i) != 0;
    ampc_shape y = {2, {x->shape.rank ? x->shape.rank : 1, cnt}};
    ampc_infer_set(n, 0, AMPC_DTYPE_I64, &y);
    return AMPC_OK;
}

/* Compress: the slices along `axis` (or the elements of the flattened input, without axis)
 * whose entry in the constant bool condition is true. A condition shorter than the axis drops
 * the rest; a true entry past the end of the axis is an error. */
ampc_status ampc_infer_compress(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *c = n->inputs[1];
    char sx[AMPC_SHAPE_STR_MAX], sc[AMPC_SHAPE_STR_MAX];
    if (c->dtype != AMPC_DTYPE_BOOL)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 1 '%s' (condition) must be bool, got %s",
                         c->name, ampc_dtype_name(c->dtype));
    if (c->shape.rank != 1)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 1 '%s' (condition) must be 1-D, got %s",
                         c->name, shp(c, sc));
    if (!need_values(g, n, 1)) return AMPC_E_UNSUPPORTED;
    const ampc_attr *a = ampc_ir_attr_find(n, "axis");
    int32_t ax = -1;
    if (a && !read_axis(g, n, x->shape.rank, &ax)) return AMPC_E_ATTR;
    int64_t len = ax < 0 ? ampc_ir_numel(x) : x->shape.dims[ax], cnt = 0;
    for (int64_t i = 0; i < c->shape.dims[0]; i++) {
        if (!((const uint8_t *)c->data)[i]) continue;
        if (i >= len)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 1 '%s' (condition) is true at %lld, past the %lld entries of "
                             "%s of input 0 '%s' %s",
                             c->name, (long long)i, (long long)len,
                             ax < 0 ? "the flattened input" : "the axis", x->name, shp(x, sx));
        cnt++;
    }
    ampc_shape y = {1, {cnt}};
    if (ax >= 0) {
        y = x->shape;
        y.dims[ax] = cnt;
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}

/* Unique: the distinct elements (or slices along `axis`), sorted or in order of first
 * occurrence; then the i64 index of each one's first occurrence, the inverse map (for every
 * element or slice of the input, the position of its value in Y) and the counts. */
ampc_status ampc_infer_unique(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t sorted;
    int32_t ax = -1;
    if (!need_values(g, n, 0)) return AMPC_E_UNSUPPORTED;
    if (!read_flag(g, n, "sorted", 1, &sorted)) return AMPC_E_ATTR;
    if (ampc_ir_attr_find(n, "axis")) {
        if (!need_rank(g, n, 0, 1)) return AMPC_E_SHAPE;
        if (!read_axis(g, n, x->shape.rank, &ax)) return AMPC_E_ATTR;
    }
    ampc_tensor t = {x->dtype, x->shape, x->data};
    int64_t u = ampc_ref_unique_count(&t, ax);
    if (u < 0) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory sorting input 0");
    ampc_shape y = {1, {u}}, idx = {1, {u}};
    ampc_shape inv = {1, {ax < 0 ? ampc_ir_numel(x) : x->shape.dims[ax]}};
    if (ax >= 0) {
        y = x->shape;
        y.dims[ax] = u;
    }
    ampc_infer_set(n, 0, x->dtype, &y);
    if (n->n_outputs > 1) ampc_infer_set(n, 1, AMPC_DTYPE_I64, &idx);
    if (n->n_outputs > 2) ampc_infer_set(n, 2, AMPC_DTYPE_I64, &inv);
    if (n->n_outputs > 3) ampc_infer_set(n, 3, AMPC_DTYPE_I64, &idx);
    return AMPC_OK;
}

/* ---- EyeLike, ReverseSequence --------------------------------------------------------------- */

/* EyeLike: a 2-D tensor of input 0's shape with ones on diagonal k, of the `dtype` attribute's
 * type (an ONNX TensorProto code) or else input 0's. */
ampc_status ampc_infer_eye_like(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    char s[AMPC_SHAPE_STR_MAX];
    int64_t code, k;
    if (x->shape.rank != 2)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' must be 2-D, got %s", x->name,
                         shp(x, s));
    if (!read_int(g, n, "dtype", 0, &code) || !read_int(g, n, "k", 0, &k)) return AMPC_E_ATTR;
    ampc_dtype t = x->dtype;
    if (ampc_ir_attr_find(n, "dtype")) {
        t = ampc_dtype_from_onnx((int32_t)code);
        if (t == AMPC_DTYPE_UNDEFINED || code != (int32_t)code)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'dtype' %lld names no element type ampc has",
                             (long long)code);
    }
    ampc_infer_set(n, 0, t, &x->shape);
    return AMPC_OK;
}

/* ReverseSequence: for each batch entry b, the first sequence_lens[b] steps along time_axis are
 * reversed. batch_axis and time_axis are 0 and 1 in some order. */
ampc_status ampc_infer_reverse_sequence(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *lens = n->inputs[1];
    char sx[AMPC_SHAPE_STR_MAX], sl[AMPC_SHAPE_STR_MAX];
    int64_t ba, ta;
    if (!need_rank(g, n, 0, 2) || !need_index_dtype(g, n, 1)) return AMPC_E_SHAPE;
    if (!read_int(g, n, "batch_axis", 1, &ba) || !read_int(g, n, "time_axis", 0, &ta))
        return AMPC_E_ATTR;
    if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attributes 'batch_axis' and 'time_axis' must be 0 and 1 in some order, "
                         "got %lld and %lld",
                         (long long)ba, (long long)ta);
    if (lens->shape.rank != 1 || lens->shape.dims[0] != x->shape.dims[ba])
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' must be [%lld] (one length per batch entry of input 0 '%s' "
                         "%s along axis %lld), got %s",
                         lens->name, (long long)x->shape.dims[ba], x->name, shp(x, sx),
                         (long long)ba, shp(lens, sl));
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* ---- TensorScatter -------------------------------------------------------------------------- */

/* TensorScatter: past_cache [B, ..., S_max, ...] (S_max at `axis`, default -2, never the batch
 * dim 0), update of the same shape but S <= S_max along the axis, optional write_indices [B]
 * (i64) -> present_cache, shaped like past_cache. Modes: linear, circular. */
ampc_status ampc_infer_tensor_scatter(ampc_graph *g, ampc_node *n) {
    const ampc_value *past = n->inputs[0], *upd = n->inputs[1];
    char sp[AMPC_SHAPE_STR_MAX], su[AMPC_SHAPE_STR_MAX];
    int32_t ax;
    if (!need_rank(g, n, 0, 2)) return AMPC_E_SHAPE;
    if (!ampc_infer_same_dtype(g, n, 0, 1)) return AMPC_E_DTYPE;
    if (!read_axis(g, n, past->shape.rank, &ax)) return AMPC_E_ATTR;
    if (ax == 0)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'axis' must not name dim 0, the batch dim of input 0 '%s' %s",
                         past->name, shp(past, sp));
    int64_t before = diag_count(g);
    const char *mode = ampc_ir_attr_string(g, n, "mode", "linear");
    if (diag_count(g) != before) return AMPC_E_ATTR;
    if (strcmp(mode, "linear") && strcmp(mode, "circular"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'mode' must be \"linear\" or \"circular\", got \"%s\"", mode);
    bool ok = upd->shape.rank == past->shape.rank;
    for (int32_t d = 0; ok && d < past->shape.rank; d++)
        ok = d == ax ? upd->shape.dims[d] <= past->shape.dims[d]
                     : upd->shape.dims[d] == past->shape.dims[d];
    if (!ok)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' (update) must have the shape of input 0 '%s' (past_cache) "
                         "except along axis %d, where it may be shorter: got %s against %s",
                         upd->name, past->name, ax, shp(upd, su), shp(past, sp));
    if (n->n_inputs > 2 && n->inputs[2]) {
        const ampc_value *wi = n->inputs[2];
        if (wi->dtype != AMPC_DTYPE_I64 || wi->shape.rank != 1 ||
            wi->shape.dims[0] != past->shape.dims[0])
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 2 '%s' (write_indices) must be i64 [%lld], one index per batch "
                             "entry, got %s%s",
                             wi->name, (long long)past->shape.dims[0], ampc_dtype_name(wi->dtype),
                             shp(wi, su));
    }
    ampc_infer_set(n, 0, past->dtype, &past->shape);
    return AMPC_OK;
}

/* ---- NonMaxSuppression ---------------------------------------------------------------------- */

/* NonMaxSuppression: boxes [B, K, 4], scores [B, C, K] and the optional scalars
 * max_output_boxes_per_class (i64), iou_threshold and score_threshold -> i64 [selected, 3]. How
 * many boxes survive depends on every input's values, so all of them are compile-time constants
 * (`cin`) and the selection runs here once to fix the output shape. */
ampc_status ampc_infer_nms(ampc_graph *g, ampc_node *n) {
    const ampc_value *bx = n->inputs[0], *sc = n->inputs[1];
    char sb[AMPC_SHAPE_STR_MAX], ss[AMPC_SHAPE_STR_MAX];
    int64_t center;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT) || !ampc_infer_same_dtype(g, n, 0, 1))
        return AMPC_E_DTYPE;
    if (!read_flag(g, n, "center_point_box", 0, &center)) return AMPC_E_ATTR;
    if (bx->shape.rank != 3 || bx->shape.dims[2] != 4 || sc->shape.rank != 3 ||
        sc->shape.dims[0] != bx->shape.dims[0] || sc->shape.dims[2] != bx->shape.dims[1])
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' (boxes) must be [B, K, 4] and input 1 '%s' (scores) [B, C, "
                         "K] with the same B and K, got %s and %s",
                         bx->name, sc->name, shp(bx, sb), shp(sc, ss));
    static const char *const what[5] = {"", "", "max_output_boxes_per_class", "iou_threshold",
                                        "score_threshold"};
    for (int32_t i = 2; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        if (!v) continue;
        if (i == 2 ? v->dtype != AMPC_DTYPE_I64 : !ampc_dtype_is_float(v->dtype))
            return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input %d '%s' (%s) must be %s, got %s", i,
                             v->name, what[i], i == 2 ? "i64" : "a float type",
                             ampc_dtype_name(v->dtype));
        if (ampc_ir_numel(v) > 1 || v->shape.rank > 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input %d '%s' (%s) must be a scalar or hold one value, got %s", i,
                             v->name, what[i], shp(v, ss));
    }
    ampc_tensor t[5];
    const ampc_tensor *pt[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int32_t i = 0; i < n->n_inputs; i++) {
        if (!n->inputs[i]) continue;
        if (!need_values(g, n, i)) return AMPC_E_UNSUPPORTED;
        t[i] = (ampc_tensor){n->inputs[i]->dtype, n->inputs[i]->shape, n->inputs[i]->data};
        pt[i] = &t[i];
    }
    int64_t cnt = ampc_ref_nms_select(pt, n->n_inputs, center != 0, NULL);
    if (cnt < 0) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory sorting the boxes");
    ampc_shape y = {2, {cnt, 3}};
    ampc_infer_set(n, 0, AMPC_DTYPE_I64, &y);
    return AMPC_OK;
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------------ */

/* An ints attribute that must be present; NULL with a diagnostic otherwise. */
static const int64_t *required_ints(ampc_graph *g, const ampc_node *n, const char *name,
                                    int32_t *count) {
    int64_t before = diag_count(g);
    const int64_t *v = ampc_ir_attr_ints(g, n, name, count);
    if (diag_count(g) != before) return NULL;
    if (!ampc_ir_attr_find(n, name)) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' is required", name);
        return NULL;
    }
    static const int64_t none[1] = {0};
    if (!v) *count = 0;
    return v ? v : none;
}

/* TfIdfVectorizer over integer tokens: X [C] or [B, C] (i32 or i64) -> f32 [max(ngram_indexes)
 * + 1] or [B, that]. The pool (pool_int64s) lists the n-grams by size: ngram_counts[i] is where
 * the (i+1)-grams start; ngram_indexes gives each n-gram's output coordinate, in pool order.
 * String pools are not supported: ampc has no string tensors. */
ampc_status ampc_infer_tfidf(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    char sx[AMPC_SHAPE_STR_MAX];
    int64_t lo, hi, skip;
    int32_t n_counts, n_idx, n_pool = 0, n_w;
    if (ampc_ir_attr_find(n, "pool_strings"))
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "string n-grams (attribute 'pool_strings') are not supported: ampc has "
                         "no string tensors; only integer pools (pool_int64s) are");
    if (x->dtype != AMPC_DTYPE_I64 && x->dtype != AMPC_DTYPE_I32)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 0 '%s' must be i64 or i32 tokens, got %s",
                         x->name, ampc_dtype_name(x->dtype));
    if (x->shape.rank > 2)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' must be [C] or [B, C], got %s", x->name,
                         shp(x, sx));
    int64_t before = diag_count(g);
    const char *mode = ampc_ir_attr_string(g, n, "mode", "");
    if (diag_count(g) != before) return AMPC_E_ATTR;
    if (strcmp(mode, "TF") && strcmp(mode, "IDF") && strcmp(mode, "TFIDF"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'mode' is required and must be \"TF\", \"IDF\" or "
                         "\"TFIDF\", got \"%s\"",
                         mode);
    if (!read_int(g, n, "min_gram_length", 0, &lo) || !read_int(g, n, "max_gram_length", 0, &hi) ||
        !read_int(g, n, "max_skip_count", 0, &skip))
        return AMPC_E_ATTR;
    if (lo < 1 || hi < lo || skip < 0)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attributes 'min_gram_length' and 'max_gram_length' must satisfy 1 <= "
                         "min <= max and 'max_skip_count' be non-negative, got %lld, %lld and %lld",
                         (long long)lo, (long long)hi, (long long)skip);
    const int64_t *counts = required_ints(g, n, "ngram_counts", &n_counts);
    const int64_t *idx = counts ? required_ints(g, n, "ngram_indexes", &n_idx) : NULL;
    if (!idx) return AMPC_E_ATTR;
    before = diag_count(g);
    ampc_ir_attr_ints(g, n, "pool_int64s", &n_pool);
    if (diag_count(g) != before) return AMPC_E_ATTR;
    /* Each size's block [counts[i], counts[i+1]) holds whole (i+1)-grams. */
    int64_t grams = 0, out_size = 0;
    for (int32_t i = 0; i < n_counts; i++) {
        int64_t end = i + 1 < n_counts ? counts[i + 1] : n_pool;
        if (counts[i] < 0 || end < counts[i] || end > n_pool || (end - counts[i]) % (i + 1))
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'ngram_counts' entry %d (%lld) must start a block of "
                             "whole %d-grams inside the %d pool entries, up to %lld",
                             i, (long long)counts[i], i + 1, n_pool, (long long)end);
        grams += (end - counts[i]) / (i + 1);
    }
    if (n_idx != grams)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'ngram_indexes' must have one entry per n-gram of the pool "
                         "(%lld), got %d",
                         (long long)grams, n_idx);
    for (int32_t i = 0; i < n_idx; i++) {
        if (idx[i] < 0 || idx[i] >= INT32_MAX)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'ngram_indexes' entry %d is %lld; it must be in [0, %d)", i,
                             (long long)idx[i], INT32_MAX);
        out_size = AMPC_MAX(out_size, idx[i] + 1);
    }
    before = diag_count(g);
    if (ampc_ir_attr_floats(g, n, "weights", &n_w) && n_w < out_size)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'weights' must have one entry per output coordinate (%lld), "
                         "got %d",
                         (long long)out_size, n_w);
    if (diag_count(g) != before) return AMPC_E_ATTR;
    ampc_shape y = {1, {out_size}};
    if (x->shape.rank == 2) y = (ampc_shape){2, {x->shape.dims[0], out_size}};
    ampc_infer_set(n, 0, AMPC_DTYPE_F32, &y);
    return AMPC_OK;
}
