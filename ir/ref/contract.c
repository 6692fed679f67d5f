/*
 * contract.c — reference kernels for MatMul and Gemm.
 *
 * Operands are first widened into contiguous buffers (double for floats, int64 for integers;
 * Gemm's operands transposed there when transA / transB ask), then one plain row-times-matrix
 * loop computes each [M,K] @ [K,N] product, accumulating in double (floats) or in int64 with
 * wrap-around (integers, as numpy does), and the result is rounded once to the output dtype.
 * MatMul walks its broadcast batch dims with the broadcasting iterator, counting in whole
 * matrices.
 */
#include "ref.h"
#include "ir/activation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A widened copy of t viewed as [rows, cols] (transposed from [cols, rows] storage when `trans`):
 * doubles when `fl`, else int64s. NULL when the host is out of memory. */
static void *widen(const ampc_tensor *t, bool fl, bool trans, int64_t rows, int64_t cols) {
    const int64_t count = rows * cols;
    void *buf = calloc((size_t)(count ? count : 1), fl ? sizeof(double) : sizeof(int64_t));
    if (!buf) return NULL;
    double *f = buf;
    int64_t *q = buf;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const int64_t src = trans ? c * rows + r : r * cols + c, dst = r * cols + c;
            if (fl) f[dst] = ampc_ref_load_f64(t->data, t->dtype, src);
            else q[dst] = ampc_ref_load_i64(t->data, t->dtype, src);
        }
    return buf;
}

/* c[m,n] = a[m,k] @ b[k,n], in double; each c element sums its k products in order. */
static void mm_f64(const double *a, const double *b, int64_t m, int64_t k, int64_t n, double *c) {
    for (int64_t i = 0; i < m; i++) {
        double *row = c + i * n;
        for (int64_t j = 0; j < n; j++) row[j] = 0;
        for (int64_t p = 0; p < k; p++) {
            const double av = a[i * k + p], *brow = b + p * n;
            for (int64_t j = 0; j < n; j++) row[j] += av * brow[j];
        }
    }
}

/* The same in 64-bit two's complement, wrapping (unsigned arithmetic: no UB on overflow). */
static void mm_i64(const int64_t *a, const int64_t *b, int64_t m, int64_t k, int64_t n,
                   int64_t *c) {
    for (int64_t i = 0; i < m; i++) {
        uint64_t *row = (uint64_t *)(c + i * n);
        for (int64_t j = 0; j < n; j++) row[j] = 0;
        for (int64_t p = 0; p < k; p++) {
            const uint64_t av = (uint64_t)a[i * k + p];
            const int64_t *brow = b + p * n;
            for (int64_t j = 0; j < n; j++) row[j] += av * (uint64_t)brow[j];
        }
    }
}

/* The product, then (ampc.FusedMatMul) + bias[col] + z and its activation (ReLU, or GELU in its
 * erf or tanh form) before the one rounding. */
static ampc_status matmul(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *y, const ampc_tensor *bias, const ampc_tensor *z,
                          ampc_fused_act act) {
    const ampc_tensor *a = in[0], *b = in[1];
    const int32_t ra = a->shape.rank, rb = b->shape.rank;
    const int64_t m = ra >= 2 ? a->shape.dims[ra - 2] : 1, k = a->shape.dims[ra - 1];
    const int64_t nn = rb >= 2 ? b->shape.dims[rb - 1] : 1;
    const bool fl = ampc_dtype_is_float(y->dtype);

    /* Batch shapes (in matrices): each operand's leading dims and the output's broadcast ones. */
    ampc_shape ba = {ra >= 2 ? ra - 2 : 0, {0}}, bb = {rb >= 2 ? rb - 2 : 0, {0}}, bo = {0};
    for (int32_t d = 0; d < ba.rank; d++) ba.dims[d] = a->shape.dims[d];
    for (int32_t d = 0; d < bb.rank; d++) bb.dims[d] = b->shape.dims[d];
    bo.rank = AMPC_MAX(ba.rank, bb.rank);
    for (int32_t d = 0; d < bo.rank; d++) bo.dims[d] = y->shape.dims[d];
    const int64_t nbatch = ampc_shape_numel(&bo);
    const int64_t na = ampc_shape_numel(&ba), nb = ampc_shape_numel(&bb);

    void *wa = widen(a, fl, false, na * m, k), *wb = widen(b, fl, false, nb * k, nn);
    void *wc = calloc((size_t)(m * nn > 0 ? m * nn : 1), fl ? sizeof(double) : sizeof(int64_t));
    if (!wa || !wb || !wc) {
        free(wa), free(wb), free(wc);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory widening MatMul operands");
    }
    const ampc_shape *shapes[2] = {&ba, &bb};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &bo, shapes, 2);
    for (int64_t t = 0; t < nbatch; t++, ampc_bcast_iter_next(&it)) {
        const int64_t oa = it.off[0] * m * k, ob = it.off[1] * k * nn, oy = t * m * nn;
        if (fl) {
            mm_f64((const double *)wa + oa, (const double *)wb + ob, m, k, nn, wc);
            for (int64_t i = 0; i < m * nn; i++) {
                double v = ((double *)wc)[i];
                if (bias) v += ampc_ref_load_f64(bias->data, bias->dtype, i % nn);
                if (z) v += ampc_ref_load_f64(z->data, z->dtype, oy + i);
                if (act == AMPC_ACT_RELU && v < 0) v = 0;
                if (act == AMPC_ACT_GELU) v = 0.5 * v * (1.0 + erf(v * 0.70710678118654752440));
                if (act == AMPC_ACT_GELU_TANH)
                    v = 0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
                ampc_ref_store_f64(y->data, y->dtype, oy + i, v);
            }
        } else {
            mm_i64((const int64_t *)wa + oa, (const int64_t *)wb + ob, m, k, nn, wc);
            for (int64_t i = 0; i < m * nn; i++)
                ampc_ref_store_i64(y->data, y->dtype, oy + i, ((int64_t *)wc)[i]);
        }
    }
    free(wa), free(wb), free(wc);
    return AMPC_OK;
}

ampc_status ampc_ref_matmul(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    return matmul(g, n, in, out[0], NULL, NULL, AMPC_ACT_NONE);
}

ampc_status ampc_ref_fused_matmul(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                  ampc_tensor *const *out) {
    return matmul(g, n, in, out[0], n->n_inputs > 2 ? in[2] : NULL, n->n_inputs > 3 ? in[3] : NULL,
                  ampc_fused_act_of(n));
}

ampc_status ampc_ref_gemm(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    const ampc_tensor *a = in[0], *b = in[1], *c = n->n_inputs > 2 ? in[2] : NULL;
    ampc_tensor *y = out[0];
    const ampc_gemm_params gp = ampc_gemm_params_of(n);
    const bool ta = gp.ta, tb = gp.tb;
    const double alpha = gp.alpha, beta = gp.beta;
    const int64_t m = y->shape.dims[0], nn = y->shape.dims[1];
    const int64_t k = a->shape.dims[ta ? 0 : 1];
    const bool fl = ampc_dtype_is_float(y->dtype);

    void *wa = widen(a, fl, ta, m, k), *wb = widen(b, fl, tb, k, nn);
    void *wc = calloc((size_t)(m * nn > 0 ? m * nn : 1), fl ? sizeof(double) : sizeof(int64_t));
    if (!wa || !wb || !wc) {
        free(wa), free(wb), free(wc);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory widening Gemm operands");
    }
    if (fl) mm_f64(wa, wb, m, k, nn, wc);
    else mm_i64(wa, wb, m, k, nn, wc);

    /* Y = alpha * AB + beta * C, C broadcast to [M,N] (operand 0 of the iterator). */
    const ampc_shape *shapes[1] = {c ? &c->shape : &y->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &y->shape, shapes, 1);
    const bool exact_int = alpha == 1.0 && (!c || beta == 1.0);
    for (int64_t i = 0; i < m * nn; i++, ampc_bcast_iter_next(&it)) {
        if (fl) {
            double v = alpha * ((double *)wc)[i];
            if (c) v += beta * ampc_ref_load_f64(c->data, c->dtype, it.off[0]);
            ampc_ref_store_f64(y->data, y->dtype, i, v);
        } else if (exact_int) { /* integer math throughout, wrapping */
            uint64_t v = (uint64_t)((int64_t *)wc)[i];
            if (c) v += (uint64_t)ampc_ref_load_i64(c->data, c->dtype, it.off[0]);
            ampc_ref_store_i64(y->data, y->dtype, i, (int64_t)v);
        } else { /* fractional alpha or beta: in double, truncated toward zero (numpy's astype) */
            const int64_t dot = ((int64_t *)wc)[i];
            double v = alpha * (y->dtype == AMPC_DTYPE_U64 ? (double)(uint64_t)dot : (double)dot);
            if (c) v += beta * ampc_ref_load_f64(c->data, c->dtype, it.off[0]);
            ampc_ref_store_f64(y->data, y->dtype, i, v);
        }
    }
    free(wa), free(wb), free(wc);
    return AMPC_OK;
}
