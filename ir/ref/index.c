/*
 * index.c — reference kernels for the indexing family (see ir/infer/index.c for the shapes):
 * gathers and scatters by element and by N-d slice, TensorScatter, OneHot, TopK, Trilu, the arg
 * reductions, Hardmax, CumSum, CumProd, NonZero, Compress, Unique, NonMaxSuppression, EyeLike,
 * ReverseSequence and TfIdfVectorizer.
 *
 * Elements that are only moved are copied as raw bytes, so every dtype is handled alike; the
 * kernels that compare or combine values (scatter reductions, TopK, the arg reductions, CumSum,
 * Unique) read floats as double and integers as int64 (u64 compares as unsigned). Every index
 * read from a tensor is checked (negative ones count from the end where ONNX says so) and one
 * out of range fails the evaluation with the index, its position and the valid range. Sorting
 * (TopK, Unique) is a stable merge sort on positions, O(n log n).
 */
#include "ref.h"
#include "ir/index.h"

#include "ir/tfidf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int32_t norm_axis(int64_t a, int32_t rank) { return (int32_t)(a < 0 ? a + rank : a); }

/* Product of dims [lo, hi) of a shape. */
static int64_t dims_prod(const ampc_shape *s, int32_t lo, int32_t hi) {
    int64_t p = 1;
    for (int32_t i = lo; i < hi; i++) p *= s->dims[i];
    return p;
}

/* Advances a row-major coordinate over `dims`. */
static void next_coord(int64_t *c, const int64_t *dims, int32_t rank) {
    for (int32_t d = rank - 1; d >= 0; d--) {
        if (++c[d] < dims[d]) return;
        c[d] = 0;
    }
}

static size_t tensor_bytes(const ampc_tensor *t) {
    return (size_t)ampc_shape_numel(&t->shape) * ampc_dtype_size(t->dtype);
}

/* Compares elements i and j of a buffer of dtype t: -1, 0 or 1. NaN is above every number and
 * equal to itself (numpy's sort order). */
static int cmp_elem(const void *p, ampc_dtype t, int64_t i, const void *q, int64_t j) {
    if (ampc_dtype_is_float(t)) {
        double a = ampc_ref_load_f64(p, t, i), b = ampc_ref_load_f64(q, t, j);
        if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
        return (a > b) - (a < b);
    }
    if (t == AMPC_DTYPE_U64) {
        uint64_t a = ((const uint64_t *)p)[i], b = ((const uint64_t *)q)[j];
        return (a > b) - (a < b);
    }
    int64_t a = ampc_ref_load_i64(p, t, i), b = ampc_ref_load_i64(q, t, j);
    return (a > b) - (a < b);
}

/* Stable merge sort of v[0..n-1] (positions) under cmp(ctx, a, b); tmp has n entries. */
typedef int (*pos_cmp)(const void *ctx, int64_t a, int64_t b);
static void merge_sort(int64_t *v, int64_t *tmp, int64_t n, pos_cmp cmp, const void *ctx) {
    if (n < 2) return;
    int64_t h = n / 2;
    merge_sort(v, tmp, h, cmp, ctx);
    merge_sort(v + h, tmp, n - h, cmp, ctx);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp(ctx, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

/* Reads index j of tensor `ix`, checks it against [-dim, dim) and returns it normalised; -1 with
 * a diagnostic when it is out of range. */
static int64_t checked_index(ampc_graph *g, const ampc_node *n, const ampc_tensor *ix, int64_t j,
                             int32_t in_idx, int64_t dim, const char *what) {
    int64_t v = ampc_ref_load_i64(ix->data, ix->dtype, j);
    if (v >= -dim && v < dim) return v < 0 ? v + dim : v;
    AMPC_FAIL(g, n, AMPC_E_EVAL,
              "index %lld (element %lld of input %d '%s') is out of range for %s, which has %lld "
              "entries (valid: %lld to %lld)",
              (long long)v, (long long)j, in_idx, n->inputs[in_idx]->name, what, (long long)dim,
              (long long)-dim, (long long)dim - 1);
    return -1;
}

/* ---- GatherElements, ScatterElements -------------------------------------------------------- */

ampc_status ampc_ref_gather_elements(ampc_graph *g, const ampc_node *n,
                                     const ampc_tensor *const *in, ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *ix = in[1];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    int64_t xs[AMPC_MAX_RANK], c[AMPC_MAX_RANK] = {0}, cnt = ampc_shape_numel(&ix->shape);
    ampc_ref_strides(&x->shape, xs);
    size_t esz = ampc_dtype_size(x->dtype);
    for (int64_t e = 0; e < cnt; e++, next_coord(c, ix->shape.dims, r)) {
        int64_t v = checked_index(g, n, ix, e, 1, x->shape.dims[ax], "the axis of input 0");
        if (v < 0) return AMPC_E_EVAL;
        int64_t off = 0;
        for (int32_t d = 0; d < r; d++) off += (d == ax ? v : c[d]) * xs[d];
        ampc_ref_copy_elem(out[0]->data, e, x->data, off, esz);
    }
    return AMPC_OK;
}

/* y[i] = combine(y[i], u[j]) for a scatter reduction (AMPC_SCATTER_NONE: assignment). Floats
 * combine in double, integers in int64 (bool: add is or, mul is and). */
static void combine(ampc_tensor *y, int64_t i, const ampc_tensor *u, int64_t j,
                    ampc_scatter_red red) {
    ampc_dtype t = y->dtype;
    if (red == AMPC_SCATTER_NONE) {
        ampc_ref_copy_elem(y->data, i, u->data, j, ampc_dtype_size(t));
    } else if (ampc_dtype_is_float(t)) {
        double a = ampc_ref_load_f64(y->data, t, i), b = ampc_ref_load_f64(u->data, t, j);
        double r = red == AMPC_SCATTER_ADD   ? a + b
                   : red == AMPC_SCATTER_MUL ? a * b
                   : red == AMPC_SCATTER_MAX ? (a >= b || isnan(a) ? a : b)
                                    : (a <= b || isnan(a) ? a : b);
        ampc_ref_store_f64(y->data, t, i, r);
    } else {
        int c = cmp_elem(y->data, t, i, u->data, j);
        int64_t a = ampc_ref_load_i64(y->data, t, i), b = ampc_ref_load_i64(u->data, t, j);
        int64_t r = red == AMPC_SCATTER_ADD   ? (int64_t)((uint64_t)a + (uint64_t)b)
                    : red == AMPC_SCATTER_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
                    : red == AMPC_SCATTER_MAX ? (c >= 0 ? a : b)
                                     : (c <= 0 ? a : b);
        if (t == AMPC_DTYPE_BOOL && red == AMPC_SCATTER_MUL) r = a && b;
        ampc_ref_store_i64(y->data, t, i, r);
    }
}

/* ScatterElements and Scatter: the copy of the data, then each update in row-major order. */
ampc_status ampc_ref_scatter_elements(ampc_graph *g, const ampc_node *n,
                                      const ampc_tensor *const *in, ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *ix = in[1], *u = in[2];
    ampc_tensor *y = out[0];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    const ampc_scatter_red red = ampc_index_params_of(n).reduction;
    int64_t xs[AMPC_MAX_RANK], c[AMPC_MAX_RANK] = {0}, cnt = ampc_shape_numel(&ix->shape);
    if (tensor_bytes(x)) memcpy(y->data, x->data, tensor_bytes(x));
    ampc_ref_strides(&x->shape, xs);
    for (int64_t e = 0; e < cnt; e++, next_coord(c, ix->shape.dims, r)) {
        int64_t v = checked_index(g, n, ix, e, 1, x->shape.dims[ax], "the axis of input 0");
        if (v < 0) return AMPC_E_EVAL;
        int64_t off = 0;
        for (int32_t d = 0; d < r; d++) off += (d == ax ? v : c[d]) * xs[d];
        combine(y, off, u, e, red);
    }
    return AMPC_OK;
}

/* ---- GatherND, ScatterND -------------------------------------------------------------------- */

/* Element offset (within one batch block of x from dim b on) of the slice addressed by the k
 * indices starting at element j of ix; -1 with a diagnostic when one is out of range. */
static int64_t nd_offset(ampc_graph *g, const ampc_node *n, const ampc_tensor *x,
                         const ampc_tensor *ix, int64_t j, int32_t b, int32_t k) {
    int64_t xs[AMPC_MAX_RANK], off = 0;
    ampc_ref_strides(&x->shape, xs);
    for (int32_t i = 0; i < k; i++) {
        int64_t v = checked_index(g, n, ix, j + i, 1, x->shape.dims[b + i], "a dim of input 0");
        if (v < 0) return -1;
        off += v * xs[b + i];
    }
    return off;
}

ampc_status ampc_ref_gather_nd(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                               ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *ix = in[1];
    int32_t b = ampc_index_params_of(n).batch_dims, q = ix->shape.rank;
    int32_t k = (int32_t)ix->shape.dims[q - 1];
    int64_t batches = dims_prod(&ix->shape, 0, b), tuples = dims_prod(&ix->shape, b, q - 1);
    int64_t slice = dims_prod(&x->shape, b + k, x->shape.rank);
    int64_t block = dims_prod(&x->shape, b, x->shape.rank); /* data elements per batch */
    size_t esz = ampc_dtype_size(x->dtype), nb = (size_t)slice * esz;
    unsigned char *dst = out[0]->data;
    for (int64_t bi = 0; bi < batches; bi++)
        for (int64_t t = 0; t < tuples; t++) {
            int64_t off = nd_offset(g, n, x, ix, (bi * tuples + t) * k, b, k);
            if (off < 0) return AMPC_E_EVAL;
            if (nb)
                memcpy(dst, (const unsigned char *)x->data + (size_t)(bi * block + off) * esz, nb);
            dst += nb;
        }
    return AMPC_OK;
}

ampc_status ampc_ref_scatter_nd(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *ix = in[1], *u = in[2];
    ampc_tensor *y = out[0];
    int32_t q = ix->shape.rank, k = (int32_t)ix->shape.dims[q - 1];
    const ampc_scatter_red red = ampc_index_params_of(n).reduction;
    int64_t tuples = dims_prod(&ix->shape, 0, q - 1);
    int64_t slice = dims_prod(&x->shape, k, x->shape.rank);
    if (tensor_bytes(x)) memcpy(y->data, x->data, tensor_bytes(x));
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off = nd_offset(g, n, x, ix, t * k, 0, k);
        if (off < 0) return AMPC_E_EVAL;
        for (int64_t i = 0; i < slice; i++) combine(y, off + i, u, t * slice + i, red);
    }
    return AMPC_OK;
}

/* ---- OneHot, TopK, Trilu -------------------------------------------------------------------- */

/* OneHot: every output element is the off value, except out[o, v, i] = on for the index v at
 * indices[o, i]; indices outside [-depth, depth) leave their row off (ONNX). */
ampc_status ampc_ref_one_hot(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *ix = in[0], *vals = in[2];
    ampc_tensor *y = out[0];
    int32_t r = y->shape.rank, ax = ampc_axis_of(n, r);
    int64_t depth = y->shape.dims[ax], inner = dims_prod(&y->shape, ax + 1, r);
    int64_t cnt = ampc_shape_numel(&y->shape), ni = ampc_shape_numel(&ix->shape);
    size_t esz = ampc_dtype_size(y->dtype);
    for (int64_t e = 0; e < cnt; e++) ampc_ref_copy_elem(y->data, e, vals->data, 0, esz);
    for (int64_t j = 0; j < ni; j++) {
        int64_t v = ampc_ref_load_i64(ix->data, ix->dtype, j); /* floats truncate, as numpy */
        if (v < -depth || v >= depth) continue;
        if (v < 0) v += depth;
        int64_t o = j / inner, i = j % inner;
        ampc_ref_copy_elem(y->data, (o * depth + v) * inner + i, vals->data, 1, esz);
    }
    return AMPC_OK;
}

/* One line of a tensor along an axis: element p of the line is at base + p * stride. */
typedef struct line {
    const void *data;
    ampc_dtype t;
    int64_t base, stride;
    bool largest;
} line;

/* TopK order: larger (or smaller) first, then the lower index (ONNX's tie rule). NaN counts as
 * the largest value. */
static int topk_cmp(const void *ctx, int64_t a, int64_t b) {
    const line *l = ctx;
    int c = cmp_elem(l->data, l->t, l->base + a * l->stride, l->data, l->base + b * l->stride);
    if (l->largest) c = -c;
    return c ? c : (a > b) - (a < b);
}

ampc_status ampc_ref_top_k(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    int64_t dim = x->shape.dims[ax], k = out[0]->shape.dims[ax];
    int64_t outer = dims_prod(&x->shape, 0, ax), inner = dims_prod(&x->shape, ax + 1, r);
    if (!k || !outer || !inner) return AMPC_OK;
    int64_t *pos = malloc((size_t)dim * 2 * sizeof *pos);
    if (!pos)
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory sorting %lld entries",
                         (long long)dim);
    line l = {x->data, x->dtype, 0, inner, ampc_index_params_of(n).largest};
    size_t esz = ampc_dtype_size(x->dtype);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            l.base = o * dim * inner + i;
            for (int64_t p = 0; p < dim; p++) pos[p] = p;
            merge_sort(pos, pos + dim, dim, topk_cmp, &l);
            for (int64_t p = 0; p < k; p++) {
                int64_t at = (o * k + p) * inner + i;
                ampc_ref_copy_elem(out[0]->data, at, x->data, l.base + pos[p] * inner, esz);
                ((int64_t *)out[1]->data)[at] = pos[p];
            }
        }
    free(pos);
    return AMPC_OK;
}

/* Trilu: element (i, j) of each matrix is kept when j - i >= k (upper) or j - i <= k (lower). */
ampc_status ampc_ref_trilu(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    int32_t r = x->shape.rank;
    int64_t k = n->n_inputs > 1 && in[1] ? ampc_ref_load_i64(in[1]->data, in[1]->dtype, 0) : 0;
    bool upper = ampc_index_params_of(n).upper;
    int64_t rows = x->shape.dims[r - 2], cols = x->shape.dims[r - 1];
    int64_t mats = dims_prod(&x->shape, 0, r - 2);
    size_t esz = ampc_dtype_size(x->dtype);
    for (int64_t m = 0, e = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++, e++) {
                /* j - i cannot overflow: both are dims; k is any int64. */
                bool keep = upper ? j - i >= k : j - i <= k;
                if (keep) ampc_ref_copy_elem(out[0]->data, e, x->data, e, esz);
            }
    return AMPC_OK;
}

/* ---- ArgMax, ArgMin, Hardmax, CumSum -------------------------------------------------------- */

/* Position of the extreme entry of a line of `dim` entries: the first (or last) maximum or
 * minimum; a NaN wins over numbers (numpy's argmax and argmin both return the first NaN). */
static int64_t arg_extreme(const line *l, int64_t dim, bool want_max, bool last) {
    int64_t best = 0;
    for (int64_t p = 1; p < dim; p++) {
        int c =
            cmp_elem(l->data, l->t, l->base + p * l->stride, l->data, l->base + best * l->stride);
        if (ampc_dtype_is_float(l->t)) {
            bool pn = isnan(ampc_ref_load_f64(l->data, l->t, l->base + p * l->stride));
            bool bn = isnan(ampc_ref_load_f64(l->data, l->t, l->base + best * l->stride));
            if (bn && !(last && pn)) continue; /* a NaN already holds the place */
            if (pn) {
                best = p;
                continue;
            }
        }
        if (!want_max) c = -c;
        if (c > 0 || (c == 0 && last)) best = p;
    }
    return best;
}

ampc_status ampc_ref_arg_reduce(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    bool last = ampc_index_params_of(n).select_last;
    int64_t dim = x->shape.dims[ax];
    int64_t outer = dims_prod(&x->shape, 0, ax), inner = dims_prod(&x->shape, ax + 1, r);
    line l = {x->data, x->dtype, 0, inner, false};
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            l.base = o * dim * inner + i;
            ((int64_t *)out[0]->data)[o * inner + i] =
                arg_extreme(&l, dim, n->op == AMPC_OP_ARG_MAX, last);
        }
    return AMPC_OK;
}

ampc_status ampc_ref_hardmax(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    int64_t dim = x->shape.dims[ax];
    int64_t outer = dims_prod(&x->shape, 0, ax), inner = dims_prod(&x->shape, ax + 1, r);
    if (!dim) return AMPC_OK;
    line l = {x->data, x->dtype, 0, inner, false};
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            l.base = o * dim * inner + i;
            int64_t p = arg_extreme(&l, dim, true, false);
            ampc_ref_store_f64(out[0]->data, out[0]->dtype, l.base + p * inner, 1.0);
        }
    return AMPC_OK;
}

/* CumSum, CumProd: running sums or products along the axis (floats in double, integers in
 * wrapping int64); exclusive shifts by one (the first output is 0 or 1), reverse runs from the
 * end. */
ampc_status ampc_ref_cumsum(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    int32_t r = x->shape.rank;
    int32_t ax = norm_axis(ampc_ref_load_i64(in[1]->data, in[1]->dtype, 0), r);
    const ampc_index_params ip = ampc_index_params_of(n);
    bool excl = ip.exclusive, rev = ip.reverse;
    bool prod = n->op == AMPC_OP_CUMPROD;
    int64_t dim = x->shape.dims[ax];
    int64_t outer = dims_prod(&x->shape, 0, ax), inner = dims_prod(&x->shape, ax + 1, r);
    bool fl = ampc_dtype_is_float(x->dtype);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double sf = prod;
            uint64_t si = prod;
            for (int64_t s = 0; s < dim; s++) {
                int64_t p = rev ? dim - 1 - s : s, at = (o * dim + p) * inner + i;
                if (excl) {
                    if (fl)
                        ampc_ref_store_f64(y->data, y->dtype, at, sf);
                    else
                        ampc_ref_store_i64(y->data, y->dtype, at, (int64_t)si);
                }
                if (fl && prod)
                    sf *= ampc_ref_load_f64(x->data, x->dtype, at);
                else if (fl)
                    sf += ampc_ref_load_f64(x->data, x->dtype, at);
                else if (prod)
                    si *= (uint64_t)ampc_ref_load_i64(x->data, x->dtype, at);
                else
                    si += (uint64_t)ampc_ref_load_i64(x->data, x->dtype, at);
                if (!excl) {
                    if (fl)
                        ampc_ref_store_f64(y->data, y->dtype, at, sf);
                    else
                        ampc_ref_store_i64(y->data, y->dtype, at, (int64_t)si);
                }
            }
        }
    return AMPC_OK;
}

/* ---- NonZero, Compress, Unique -------------------------------------------------------------- */

ampc_status ampc_ref_nonzero(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    (void)g, (void)n;
    const ampc_tensor *x = in[0];
    int32_t r = x->shape.rank;
    int64_t nnz = out[0]->shape.dims[1], total = ampc_shape_numel(&x->shape), j = 0;
    int64_t c[AMPC_MAX_RANK] = {0}, *y = out[0]->data;
    bool fl = ampc_dtype_is_float(x->dtype);
    for (int64_t e = 0; e < total; e++, next_coord(c, x->shape.dims, r)) {
        bool nz = fl ? ampc_ref_load_f64(x->data, x->dtype, e) != 0
                     : ampc_ref_load_i64(x->data, x->dtype, e) != 0;
        if (!nz) continue;
        AMPC_ASSERT(j < nnz); /* inference counted the same input */
        if (r == 0) y[j] = 0;
        for (int32_t d = 0; d < r; d++) y[d * nnz + j] = c[d];
        j++;
    }
    return AMPC_OK;
}

ampc_status ampc_ref_compress(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *cond = in[1];
    const uint8_t *cv = cond->data;
    size_t esz = ampc_dtype_size(x->dtype);
    unsigned char *dst = out[0]->data;
    const unsigned char *src = x->data;
    int64_t clen = cond->shape.dims[0];
    if (!ampc_axis_given(n)) {
        int64_t total = ampc_shape_numel(&x->shape);
        for (int64_t i = 0; i < clen && i < total; i++)
            if (cv[i]) memcpy(dst, src + (size_t)i * esz, esz), dst += esz;
        return AMPC_OK;
    }
    int32_t r = x->shape.rank, ax = ampc_axis_of(n, r);
    int64_t dim = x->shape.dims[ax];
    int64_t outer = dims_prod(&x->shape, 0, ax);
    size_t nb = (size_t)dims_prod(&x->shape, ax + 1, r) * esz;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < clen && i < dim; i++)
            if (cv[i] && nb) {
                memcpy(dst, src + ((size_t)o * (size_t)dim + (size_t)i) * nb, nb);
                dst += nb;
            }
    return AMPC_OK;
}

/* Unique works on "items": the elements of the flattened input, or the slices along an axis.
 * Item s, entry e (e = o * inner + i over the dims before and after the axis) is element
 * (o * count + s) * inner + i. */
typedef struct items {
    const void *data;
    ampc_dtype t;
    int64_t count, outer, inner;
} items;

static items items_of(const ampc_tensor *x, int32_t axis) {
    items it = {x->data, x->dtype, ampc_shape_numel(&x->shape), 1, 1};
    if (axis >= 0) {
        it.count = x->shape.dims[axis];
        it.outer = dims_prod(&x->shape, 0, axis);
        it.inner = dims_prod(&x->shape, axis + 1, x->shape.rank);
    }
    return it;
}

static int64_t item_elem(const items *it, int64_t s, int64_t e) {
    return ((e / it->inner) * it->count + s) * it->inner + e % it->inner;
}

/* Lexicographic order of items (numpy's for unique with an axis). */
static int item_cmp(const items *it, int64_t a, int64_t b) {
    for (int64_t e = 0, len = it->outer * it->inner; e < len; e++) {
        int c = cmp_elem(it->data, it->t, item_elem(it, a, e), it->data, item_elem(it, b, e));
        if (c) return c;
    }
    return 0;
}

static int unique_cmp(const void *ctx, int64_t a, int64_t b) {
    int c = item_cmp(ctx, a, b);
    return c ? c : (a > b) - (a < b);
}

/* Sorts the items into pos (stable: equal items keep their order) and marks in `start` (when not
 * NULL) where each run of equal items begins. Returns the number of distinct items, -1 on OOM. */
static int64_t unique_sort(const items *it, int64_t *pos, bool *start) {
    int64_t *tmp = malloc((size_t)(it->count ? it->count : 1) * sizeof *tmp);
    if (!tmp) return -1;
    for (int64_t s = 0; s < it->count; s++) pos[s] = s;
    merge_sort(pos, tmp, it->count, unique_cmp, it);
    free(tmp);
    int64_t u = 0;
    for (int64_t s = 0; s < it->count; s++) {
        bool st = s == 0 || item_cmp(it, pos[s - 1], pos[s]) != 0;
        if (start) start[s] = st;
        u += st;
    }
    return u;
}

/* The number of distinct items of x (elements, or slices along axis >= 0); -1 on OOM. Inference
 * (ir/infer/index.c) uses it to fix Unique's output shape. */
int64_t ampc_ref_unique_count(const ampc_tensor *x, int32_t axis) {
    items it = items_of(x, axis);
    int64_t *pos = malloc((size_t)(it.count ? it.count : 1) * sizeof *pos);
    if (!pos) return -1;
    int64_t u = unique_sort(&it, pos, NULL);
    free(pos);
    return u;
}

/* Unique: runs of equal items in sorted order are the distinct values; each run's first entry
 * is its first occurrence. Unsorted output orders the runs by first occurrence instead. */
ampc_status ampc_ref_unique(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    int32_t axis = -1;
    if (ampc_axis_given(n))
        axis = ampc_axis_of(n, x->shape.rank);
    bool sorted = ampc_index_params_of(n).sorted;
    items it = items_of(x, axis);
    int64_t m = it.count ? it.count : 1;
    int64_t *pos = malloc((size_t)m * sizeof *pos), *first = malloc((size_t)m * sizeof *first);
    int64_t *cnt = malloc((size_t)m * sizeof *cnt), *rank = malloc((size_t)m * sizeof *rank);
    int64_t *run = malloc((size_t)m * sizeof *run);
    bool *start = malloc((size_t)m * sizeof *start);
    int64_t u = pos && first && cnt && rank && run && start ? unique_sort(&it, pos, start) : -1;
    if (u < 0) {
        free(pos), free(first), free(cnt), free(rank), free(run), free(start);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory sorting input 0");
    }
    AMPC_ASSERT(u == (axis < 0 ? out[0]->shape.dims[0] : out[0]->shape.dims[axis]));
    /* run[s]: the run (sorted distinct value) of sorted position s; first/cnt per run. */
    for (int64_t s = 0, k = -1; s < it.count; s++) {
        if (start[s]) first[++k] = pos[s], cnt[k] = 0;
        run[s] = k;
        cnt[k]++;
    }
    /* rank[k]: the output position of run k. Sorted: k itself; unsorted: the runs ordered by
     * first occurrence (the `first` entries are distinct, so any sort is exact). */
    int64_t *order = malloc((size_t)(u ? u : 1) * sizeof *order);
    int64_t *tmp = malloc((size_t)(u ? u : 1) * sizeof *tmp);
    if (!order || !tmp) {
        free(pos), free(first), free(cnt), free(rank), free(run), free(start), free(order),
            free(tmp);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory sorting input 0");
    }
    for (int64_t k = 0; k < u; k++) order[k] = k;
    if (!sorted) { /* runs by first occurrence: first[] values are distinct, a plain sort */
        for (int64_t w = 1; w < u; w *= 2) /* bottom-up merge sort on first[order[.]] */
            for (int64_t lo = 0; lo < u; lo += 2 * w) {
                int64_t mid = AMPC_MIN(lo + w, u), hi = AMPC_MIN(lo + 2 * w, u), i = lo, j = mid,
                        t = lo;
                while (i < mid && j < hi)
                    tmp[t++] = first[order[j]] < first[order[i]] ? order[j++] : order[i++];
                while (i < mid) tmp[t++] = order[i++];
                while (j < hi) tmp[t++] = order[j++];
                memcpy(order + lo, tmp + lo, (size_t)(hi - lo) * sizeof *order);
            }
    }
    for (int64_t k = 0; k < u; k++) rank[order[k]] = k;
    size_t esz = ampc_dtype_size(x->dtype);
    int64_t len = it.outer * it.inner;
    items yi = {out[0]->data, x->dtype, u, it.outer, it.inner};
    for (int64_t k = 0; k < u; k++)
        for (int64_t e = 0; e < len; e++)
            ampc_ref_copy_elem(out[0]->data, item_elem(&yi, rank[k], e), x->data,
                               item_elem(&it, first[k], e), esz);
    for (int64_t k = 0; k < u; k++) {
        if (n->n_outputs > 1) ((int64_t *)out[1]->data)[rank[k]] = first[k];
        if (n->n_outputs > 3) ((int64_t *)out[3]->data)[rank[k]] = cnt[k];
    }
    if (n->n_outputs > 2)
        for (int64_t s = 0; s < it.count; s++) ((int64_t *)out[2]->data)[pos[s]] = rank[run[s]];
    free(pos), free(first), free(cnt), free(rank), free(run), free(start), free(order), free(tmp);
    return AMPC_OK;
}

/* ---- EyeLike, ReverseSequence --------------------------------------------------------------- */

ampc_status ampc_ref_eye_like(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    (void)g;
    (void)in;
    ampc_tensor *y = out[0];
    int64_t k = ampc_index_params_of(n).k, rows = y->shape.dims[0], cols = y->shape.dims[1];
    for (int64_t i = 0; i < rows; i++) {
        /* column i + k, computed without overflow for any k */
        if (k >= cols || k <= -rows) break;
        int64_t j = i + k;
        if (j >= 0 && j < cols) ampc_ref_store_i64(y->data, y->dtype, i * cols + j, 1);
    }
    return AMPC_OK;
}

ampc_status ampc_ref_reverse_sequence(ampc_graph *g, const ampc_node *n,
                                      const ampc_tensor *const *in, ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *lens = in[1];
    int32_t ba = ampc_index_params_of(n).batch_axis, ta = 1 - ba;
    int64_t steps = x->shape.dims[ta], batch = x->shape.dims[ba];
    for (int64_t b = 0; b < batch; b++) {
        int64_t len = ampc_ref_load_i64(lens->data, lens->dtype, b);
        if (len < 0 || len > steps)
            return AMPC_FAIL(g, n, AMPC_E_EVAL,
                             "sequence length %lld (element %lld of input 1 '%s') must be in "
                             "[0, %lld], the time steps of input 0 '%s'",
                             (long long)len, (long long)b, n->inputs[1]->name, (long long)steps,
                             n->inputs[0]->name);
    }
    int64_t inner = dims_prod(&x->shape, 2, x->shape.rank);
    size_t nb = (size_t)inner * ampc_dtype_size(x->dtype);
    if (!nb) return AMPC_OK;
    /* Dims 0 and 1 are time and batch in some order; the rest (inner) move as one block. */
    for (int64_t b = 0; b < batch; b++) {
        int64_t len = ampc_ref_load_i64(lens->data, lens->dtype, b);
        for (int64_t t = 0; t < steps; t++) {
            int64_t src_t = t < len ? len - 1 - t : t;
            int64_t d = ba == 1 ? t * batch + b : b * steps + t;
            int64_t s = ba == 1 ? src_t * batch + b : b * steps + src_t;
            memcpy((unsigned char *)out[0]->data + (size_t)d * nb,
                   (const unsigned char *)x->data + (size_t)s * nb, nb);
        }
    }
    return AMPC_OK;
}

/* ---- TensorScatter -------------------------------------------------------------------------- */

/* TensorScatter: past_cache copied, then for every index prefix before the axis (batch entry b
 * first) the S update rows land at write_indices[b] + s, taken modulo S_max in circular mode; in
 * linear mode a row past the end of the cache is an evaluation error. */
ampc_status ampc_ref_tensor_scatter(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                    ampc_tensor *const *out) {
    const ampc_tensor *past = in[0], *upd = in[1], *wi = n->n_inputs > 2 ? in[2] : NULL;
    ampc_tensor *y = out[0];
    int32_t r = past->shape.rank, ax = ampc_axis_of(n, r);
    bool circular = ampc_index_params_of(n).circular;
    size_t esz = ampc_dtype_size(past->dtype);
    size_t nb = tensor_bytes(past);
    if (nb) memcpy(y->data, past->data, nb);
    int64_t B = past->shape.dims[0], M = past->shape.dims[ax], S = upd->shape.dims[ax];
    int64_t outer = dims_prod(&past->shape, 0, ax), inner = dims_prod(&past->shape, ax + 1, r);
    size_t row = (size_t)inner * esz;
    for (int64_t o = 0; o < outer; o++) {
        int64_t b = o / (outer / B); /* the prefix's batch entry: dim 0 varies slowest */
        int64_t w = wi ? ampc_ref_load_i64(wi->data, wi->dtype, b) : 0;
        for (int64_t s0 = 0; s0 < S; s0++) {
            int64_t t;
            if (__builtin_add_overflow(w, s0, &t)) t = INT64_MAX;
            if (circular)
                t = (t % M + M) % M;
            else if (t < 0 || t >= M)
                return AMPC_FAIL(g, n, AMPC_E_EVAL,
                                 "write index %lld (element %lld of input 2 '%s') plus update row "
                                 "%lld is outside the %lld rows of the cache axis (mode linear)",
                                 (long long)w, (long long)b, wi ? n->inputs[2]->name : "",
                                 (long long)s0, (long long)M);
            if (row)
                memcpy((unsigned char *)y->data + (size_t)(o * M + t) * row,
                       (const unsigned char *)upd->data + (size_t)(o * S + s0) * row, row);
        }
    }
    return AMPC_OK;
}

/* ---- NonMaxSuppression ---------------------------------------------------------------------- */

/* Candidates of one (batch, class) in selection order: score descending, then box index
 * ascending. */
typedef struct nms_ctx {
    const ampc_tensor *scores;
    int64_t base; /* offset of the (batch, class) row of scores */
} nms_ctx;

static int nms_cmp(const void *ctx, int64_t a, int64_t b) {
    const nms_ctx *c = ctx;
    int r = cmp_elem(c->scores->data, c->scores->dtype, c->base + b, c->scores->data, c->base + a);
    return r ? r : (a > b) - (a < b);
}

/* The corners (y1, x1, y2, x2 with min <= max) of box i of a batch's boxes. */
static void nms_box(const ampc_tensor *bx, int64_t i, bool center, double *c) {
    double v[4];
    for (int k = 0; k < 4; k++) v[k] = ampc_ref_load_f64(bx->data, bx->dtype, i * 4 + k);
    if (center) { /* [x_center, y_center, width, height] */
        c[0] = v[1] - v[3] / 2, c[2] = v[1] + v[3] / 2;
        c[1] = v[0] - v[2] / 2, c[3] = v[0] + v[2] / 2;
    } else { /* [y1, x1, y2, x2], corners in either order */
        c[0] = fmin(v[0], v[2]), c[2] = fmax(v[0], v[2]);
        c[1] = fmin(v[1], v[3]), c[3] = fmax(v[1], v[3]);
    }
}

/* Whether boxes a and b overlap with IoU strictly above the threshold (empty boxes never do). */
static bool nms_suppress(const double *a, const double *b, double thr) {
    double ih = fmin(a[2], b[2]) - fmax(a[0], b[0]), iw = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return false;
    double inter = ih * iw;
    double aa = (a[2] - a[0]) * (a[3] - a[1]), ab = (b[2] - b[0]) * (b[3] - b[1]);
    double uni = aa + ab - inter;
    if (aa <= 0 || ab <= 0 || uni <= 0) return false;
    return inter / uni > thr;
}

int64_t ampc_ref_nms_select(const ampc_tensor *const *in, int32_t n_in, bool center, int64_t *sel) {
    const ampc_tensor *bx = in[0], *sc = in[1];
    const ampc_tensor *mo = n_in > 2 ? in[2] : NULL, *it = n_in > 3 ? in[3] : NULL;
    const ampc_tensor *st = n_in > 4 ? in[4] : NULL;
    int64_t B = sc->shape.dims[0], C = sc->shape.dims[1], K = sc->shape.dims[2], count = 0;
    int64_t max_out =
        mo && ampc_shape_numel(&mo->shape) ? ampc_ref_load_i64(mo->data, mo->dtype, 0) : 0;
    double iou = it && ampc_shape_numel(&it->shape) ? ampc_ref_load_f64(it->data, it->dtype, 0) : 0;
    bool has_st = st && ampc_shape_numel(&st->shape);
    double smin = has_st ? ampc_ref_load_f64(st->data, st->dtype, 0) : 0;
    if (max_out <= 0 || !B || !C || !K) return 0;
    int64_t *cand = malloc((size_t)K * sizeof *cand), *tmp = malloc((size_t)K * sizeof *tmp);
    double *kept = malloc((size_t)K * 4 * sizeof *kept);
    if (!cand || !tmp || !kept) {
        free(cand), free(tmp), free(kept);
        return -1;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            nms_ctx ctx = {sc, (b * C + c) * K};
            int64_t nc = 0, nk = 0;
            for (int64_t i = 0; i < K; i++)
                if (!has_st || ampc_ref_load_f64(sc->data, sc->dtype, ctx.base + i) > smin)
                    cand[nc++] = i;
            merge_sort(cand, tmp, nc, nms_cmp, &ctx);
            for (int64_t j = 0; j < nc && nk < max_out; j++) {
                double box[4];
                nms_box(bx, b * K + cand[j], center, box);
                bool keep = true;
                for (int64_t q = 0; q < nk && keep; q++)
                    keep = !nms_suppress(box, &kept[q * 4], iou);
                if (!keep) continue;
                memcpy(&kept[nk++ * 4], box, sizeof box);
                if (sel) {
                    sel[count * 3] = b;
                    sel[count * 3 + 1] = c;
                    sel[count * 3 + 2] = cand[j];
                }
                count++;
            }
        }
    free(cand), free(tmp), free(kept);
    return count;
}

/* NonMaxSuppression: per batch and class, the boxes by falling score (above score_threshold when
 * given), each kept unless it overlaps an already kept one with IoU > iou_threshold, at most
 * max_output_boxes_per_class of them. */
ampc_status ampc_ref_nms(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    bool center = ampc_index_params_of(n).center_point_box;
    int64_t cnt = ampc_ref_nms_select(in, n->n_inputs, center, out[0]->data);
    if (cnt < 0) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory sorting the boxes");
    AMPC_ASSERT(cnt == out[0]->shape.dims[0]); /* inference ran the same selection */
    return AMPC_OK;
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------------ */

/* TfIdfVectorizer: counts, per row, every pool n-gram of size min_gram_length..max_gram_length
 * that occurs with its tokens skip apart (skip = 1 .. max_skip_count + 1; unigrams count once),
 * at the n-gram's output coordinate; then TF keeps the counts, IDF gives weight (or 1) where the
 * count is positive, TFIDF weight times count. This follows onnxruntime's algorithm. */
ampc_status ampc_ref_tfidf(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    const ampc_tfidf p = ampc_tfidf_of(g, n);
    const int64_t *idx = p.indexes, lo = p.min_len, hi = p.max_len, skips = p.skips;
    const float *w = p.weights;
    int64_t rows = x->shape.rank == 2 ? x->shape.dims[0] : 1;
    int64_t cols = x->shape.rank ? x->shape.dims[x->shape.rank - 1] : 1;
    int64_t out_size = y->shape.dims[y->shape.rank - 1];
    ampc_tfidf_trie t;
    int64_t *freq = calloc((size_t)AMPC_MAX(rows * out_size, 1), sizeof *freq);
    if (!freq || !ampc_tfidf_trie_build(&p, &t)) {
        free(freq);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory building the n-gram table");
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t first = lo;
        for (int64_t skip = 1; skip <= skips; skip++) {
            for (int64_t s0 = 0; s0 < cols; s0++) {
                if (s0 + skip * (first - 1) >= cols) break; /* no n-gram fits from here on */
                int64_t node = 0, size = 1;
                for (int64_t e = s0; size <= hi && e < cols; e += skip, size++) {
                    node = ampc_tfidf_child(&t, node,
                                            ampc_ref_load_i64(x->data, x->dtype, r * cols + e));
                    if (node < 0) break;
                    if (size >= first && t.nodes[node].id)
                        freq[r * out_size + idx[t.nodes[node].id - 1]]++;
                }
            }
            if (first == 1) { /* unigrams do not depend on the skip: count them once */
                first = 2;
                if (first > hi) break;
            }
        }
    }
    bool tf = !strcmp(p.mode, "TF"), idf = !strcmp(p.mode, "IDF");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < out_size; i++) {
            int64_t f = freq[r * out_size + i];
            double v = tf    ? (double)f
                       : idf ? (f > 0 ? (w ? (double)w[i] : 1.0) : 0.0)
                             : (w ? (double)w[i] : 1.0) * (double)f;
            ampc_ref_store_f64(y->data, y->dtype, r * out_size + i, v);
        }
    ampc_tfidf_trie_free(&t);
    free(freq);
    return AMPC_OK;
}
