/*
 * linalg.c — reference kernels for Einsum and Det. Einsum's equation and loop nest are
 * ir/einsum.h's, shared with inference and code generation.
 *
 * Einsum is evaluated by its definition: one loop over the full index space of every subscript
 * (and of the "..." dims), multiplying the operands' elements at each point and adding the
 * product into the output element the output subscripts select. A subscript repeated within an
 * operand walks its diagonal (its strides add up); a dim of 1 broadcasts (stride 0). Floats
 * accumulate in double, integers in wrapping int64.
 *
 * Det factors each matrix by LU with partial pivoting in double; the determinant is the product
 * of the pivots, negated once per row swap.
 */
#include "ref.h"
#include "ir/einsum.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- Einsum --------------------------------------------------------------------------------- */

ampc_status ampc_ref_einsum(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    const ampc_shape *shapes[AMPC_EINSUM_MAX_INPUTS + 1];
    for (int32_t j = 0; j < n->n_inputs; j++) shapes[j] = &in[j]->shape;
    ampc_einsum e;
    ampc_einsum_of(n, shapes, &e);
    ampc_einsum_loops l;
    ampc_einsum_loops_of(&e, shapes, &out[0]->shape, &l);
    const int32_t nl = l.n;
    const int64_t *ext = l.ext;
    ampc_tensor *y = out[0];
    bool fl = ampc_dtype_is_float(y->dtype);
    int64_t ny = ampc_shape_numel(&y->shape), total = 1;
    for (int32_t d = 0; d < nl; d++) total *= ext[d];
    double *accf = fl ? calloc((size_t)(ny ? ny : 1), sizeof *accf) : NULL;
    uint64_t *acci = fl ? NULL : calloc((size_t)(ny ? ny : 1), sizeof *acci);
    if (fl ? !accf : !acci) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    int64_t idx[AMPC_EINSUM_MAX_LOOP] = {0}, off[AMPC_EINSUM_MAX_INPUTS + 1] = {0};
    for (int64_t p = 0; p < total; p++) {
        if (fl) {
            double v = 1;
            for (int32_t j = 0; j < e.n_in; j++)
                v *= ampc_ref_load_f64(in[j]->data, in[j]->dtype, off[j]);
            accf[off[e.n_in]] += v;
        } else {
            uint64_t v = 1;
            for (int32_t j = 0; j < e.n_in; j++)
                v *= (uint64_t)ampc_ref_load_i64(in[j]->data, in[j]->dtype, off[j]);
            acci[off[e.n_in]] += v;
        }
        for (int32_t d = nl - 1; d >= 0; d--) {
            for (int32_t j = 0; j <= e.n_in; j++) off[j] += l.step[j][d];
            if (++idx[d] < ext[d]) break;
            for (int32_t j = 0; j <= e.n_in; j++) off[j] -= l.step[j][d] * ext[d];
            idx[d] = 0;
        }
    }
    for (int64_t i = 0; i < ny; i++) {
        if (fl)
            ampc_ref_store_f64(y->data, y->dtype, i, accf[i]);
        else
            ampc_ref_store_i64(y->data, y->dtype, i, (int64_t)acci[i]);
    }
    free(accf);
    free(acci);
    return AMPC_OK;
}

/* ---- Det ------------------------------------------------------------------------------------ */

ampc_status ampc_ref_det(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    int32_t r = x->shape.rank;
    int64_t m = x->shape.dims[r - 1], count = ampc_shape_numel(&out[0]->shape);
    double *a = malloc((size_t)(m > 0 ? m * m : 1) * sizeof *a);
    if (!a)
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory factoring a %lldx%lld matrix",
                         (long long)m, (long long)m);
    for (int64_t b = 0; b < count; b++) {
        for (int64_t i = 0; i < m * m; i++)
            a[i] = ampc_ref_load_f64(x->data, x->dtype, b * m * m + i);
        double det = 1;
        for (int64_t c = 0; c < m && det != 0; c++) {
            int64_t piv = c;
            for (int64_t i = c + 1; i < m; i++)
                if (fabs(a[i * m + c]) > fabs(a[piv * m + c])) piv = i;
            if (a[piv * m + c] == 0) {
                det = 0;
                break;
            }
            if (piv != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = a[c * m + j];
                    a[c * m + j] = a[piv * m + j];
                    a[piv * m + j] = t;
                }
                det = -det;
            }
            det *= a[c * m + c];
            for (int64_t i = c + 1; i < m; i++) {
                double f = a[i * m + c] / a[c * m + c];
                for (int64_t j = c + 1; j < m; j++) a[i * m + j] -= f * a[c * m + j];
            }
        }
        ampc_ref_store_f64(out[0]->data, out[0]->dtype, b, det);
    }
    free(a);
    return AMPC_OK;
}
