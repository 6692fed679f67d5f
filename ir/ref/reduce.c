/*
 * reduce.c — reference kernels for the reductions (ReduceSum, Mean, Max, Min, Prod, L1, L2,
 * LogSum, LogSumExp, SumSquare).
 *
 * One pass over the input in row-major order: a multi-index counter carries the offset of the
 * output element each input element folds into (reduced dims have output stride 0), so the cost
 * is linear in the input size whatever the axes. Accumulators are double for floats and int64
 * for integers (wrapping like numpy), one per output element, initialised to the reduction's
 * identity: Sum 0, Prod 1, Max -inf / the type's minimum, Min +inf / the type's maximum. The mean
 * of an empty set is NaN for floats (0 for integers, which have no NaN). ReduceL2, ReduceLogSum
 * and ReduceLogSumExp accumulate in double even for integers and round once (truncated toward
 * zero for integer outputs, as numpy's astype); ReduceL1 and ReduceSumSquare of integers are
 * exact (wrapping). ReduceLogSumExp makes a first pass for each output's maximum and sums
 * exp(x - max), so no finite input overflows.
 *
 * noop_with_empty_axes with no axes reduces over the empty set of axes: each element is its own
 * group, so Sum, Mean, Max, Min and Prod give the input, L1 and L2 its absolute value, SumSquare
 * its square, LogSum its log, LogSumExp the input again — what ONNX's reference computes.
 */
#include "ref.h"

#include "ir/reduce.h"

#include <math.h>
#include <stdlib.h>

/* The smallest and largest value of an integer (or bool) dtype, as int64 bit patterns (u64's
 * maximum is all ones, i.e. -1). */
static int64_t int_min(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_I64: return INT64_MIN;
    case AMPC_DTYPE_I32: return INT32_MIN;
    case AMPC_DTYPE_I16: return INT16_MIN;
    case AMPC_DTYPE_I8: return INT8_MIN;
    default: return 0; /* unsigned and bool */
    }
}

static int64_t int_max(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_I64: return INT64_MAX;
    case AMPC_DTYPE_I32: return INT32_MAX;
    case AMPC_DTYPE_I16: return INT16_MAX;
    case AMPC_DTYPE_I8: return INT8_MAX;
    case AMPC_DTYPE_U64: return -1;
    case AMPC_DTYPE_U32: return UINT32_MAX;
    case AMPC_DTYPE_U16: return UINT16_MAX;
    case AMPC_DTYPE_U8: return UINT8_MAX;
    case AMPC_DTYPE_BOOL: return 1;
    default: AMPC_ASSERT(!"not an integer dtype"); return 0;
    }
}

/* Folds the float element v into accumulator *acc. */
static inline void fold_f(ampc_opcode op, double *acc, double v) {
    switch (op) {
    case AMPC_OP_REDUCE_SUM: case AMPC_OP_REDUCE_MEAN: case AMPC_OP_REDUCE_LOG_SUM:
        *acc += v;
        break;
    case AMPC_OP_REDUCE_PROD: *acc *= v; break;
    case AMPC_OP_REDUCE_L1: *acc += fabs(v); break;
    case AMPC_OP_REDUCE_L2: case AMPC_OP_REDUCE_SUM_SQUARE: *acc += v * v; break;
    case AMPC_OP_REDUCE_MAX: if (v > *acc || isnan(v)) *acc = v; break; /* NaN sticks */
    case AMPC_OP_REDUCE_MIN: if (v < *acc || isnan(v)) *acc = v; break;
    default: AMPC_ASSERT(!"not a reduction"); break;
    }
}

/* Folds the integer element v into *acc; `u` compares as unsigned 64-bit (u64 data). */
static inline void fold_i(ampc_opcode op, int64_t *acc, int64_t v, bool u) {
    switch (op) {
    case AMPC_OP_REDUCE_SUM: case AMPC_OP_REDUCE_MEAN:
        *acc = (int64_t)((uint64_t)*acc + (uint64_t)v);
        break;
    case AMPC_OP_REDUCE_PROD: *acc = (int64_t)((uint64_t)*acc * (uint64_t)v); break;
    case AMPC_OP_REDUCE_L1:
        *acc = (int64_t)((uint64_t)*acc + (!u && v < 0 ? 0 - (uint64_t)v : (uint64_t)v));
        break;
    case AMPC_OP_REDUCE_SUM_SQUARE: *acc = (int64_t)((uint64_t)*acc + (uint64_t)v * (uint64_t)v); break;
    case AMPC_OP_REDUCE_MAX: if (u ? (uint64_t)v > (uint64_t)*acc : v > *acc) *acc = v; break;
    case AMPC_OP_REDUCE_MIN: if (u ? (uint64_t)v < (uint64_t)*acc : v < *acc) *acc = v; break;
    default: AMPC_ASSERT(!"not an integer reduction"); break;
    }
}

/* Advances the input multi-index idx by one element in row-major order and moves the output
 * offset *off along (ostride: output stride of each input dim, 0 along reduced dims). */
static inline void step(const ampc_shape *s, const int64_t *ostride, int64_t *idx, int64_t *off) {
    for (int32_t d = s->rank - 1; d >= 0; d--) {
        if (++idx[d] < s->dims[d]) {
            *off += ostride[d];
            return;
        }
        idx[d] = 0;
        *off -= ostride[d] * (s->dims[d] - 1);
    }
}

ampc_status ampc_ref_reduce(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    const ampc_opcode op = n->op;
    const int32_t rank = x->shape.rank;
    const int64_t count = ampc_shape_numel(&x->shape), out_count = ampc_shape_numel(&y->shape);
    bool reduced[AMPC_MAX_RANK];
    const ampc_tensor *t = n->n_inputs > 1 ? in[1] : NULL;
    ampc_reduce_dims(n, t ? t->data : NULL, t ? t->dtype : AMPC_DTYPE_I64,
                     t ? ampc_shape_numel(&t->shape) : 0, rank, reduced);

    /* Output stride of each input dim (0 along reduced dims), and the reduced-set size. */
    int64_t ostride[AMPC_MAX_RANK], st = 1, group = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
        if (reduced[d]) {
            ostride[d] = 0;
            group *= x->shape.dims[d];
        } else {
            ostride[d] = st;
            st *= x->shape.dims[d];
        }
    }

    /* Integer reductions accumulate in int64, except those that end in a root or a log. */
    const bool lse = op == AMPC_OP_REDUCE_LOG_SUM_EXP;
    const bool fl = ampc_dtype_is_float(x->dtype) || op == AMPC_OP_REDUCE_L2 ||
                    op == AMPC_OP_REDUCE_LOG_SUM || lse;
    const bool u = x->dtype == AMPC_DTYPE_U64;
    const size_t n_acc = (size_t)(out_count ? out_count : 1);
    void *acc = calloc(n_acc, fl ? sizeof(double) : sizeof(int64_t));
    double *shift = lse ? malloc(n_acc * sizeof(double)) : NULL; /* LogSumExp: each group's max */
    if (!acc || (lse && !shift)) {
        free(acc);
        free(shift);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory for %lld accumulators",
                         (long long)out_count);
    }
    double *af = acc;
    int64_t *ai = acc;
    for (int64_t i = 0; i < out_count; i++) {
        if (fl) {
            af[i] = op == AMPC_OP_REDUCE_PROD ? 1.0
                  : op == AMPC_OP_REDUCE_MAX  ? -INFINITY
                  : op == AMPC_OP_REDUCE_MIN  ? INFINITY
                                              : 0.0;
        } else {
            ai[i] = op == AMPC_OP_REDUCE_PROD ? 1
                  : op == AMPC_OP_REDUCE_MAX  ? int_min(x->dtype)
                  : op == AMPC_OP_REDUCE_MIN  ? int_max(x->dtype)
                                              : 0;
        }
    }

    /* LogSumExp's first pass: the maximum of each group (NaN sticks), made 0 where it is not
     * finite so that exp(x - shift) stays defined: an empty or all -inf group then sums to 0
     * (log gives -inf), a group holding +inf sums to +inf. */
    if (lse) {
        for (int64_t i = 0; i < out_count; i++) shift[i] = -INFINITY;
        int64_t idx[AMPC_MAX_RANK] = {0}, off = 0;
        for (int64_t i = 0; i < count; i++) {
            fold_f(AMPC_OP_REDUCE_MAX, &shift[off], ampc_ref_load_f64(x->data, x->dtype, i));
            step(&x->shape, ostride, idx, &off);
        }
        for (int64_t i = 0; i < out_count; i++)
            if (!isfinite(shift[i])) shift[i] = 0;
    }

    /* The main pass: idx is the input multi-index, off the matching output offset. */
    int64_t idx[AMPC_MAX_RANK] = {0}, off = 0;
    for (int64_t i = 0; i < count; i++) {
        if (lse) af[off] += exp(ampc_ref_load_f64(x->data, x->dtype, i) - shift[off]);
        else if (fl) fold_f(op, &af[off], ampc_ref_load_f64(x->data, x->dtype, i));
        else fold_i(op, &ai[off], ampc_ref_load_i64(x->data, x->dtype, i), u);
        step(&x->shape, ostride, idx, &off);
    }

    for (int64_t i = 0; i < out_count; i++) {
        if (fl) {
            double v = af[i];
            if (op == AMPC_OP_REDUCE_MEAN) v = group ? v / (double)group : NAN;
            else if (op == AMPC_OP_REDUCE_L2) v = sqrt(v);
            else if (op == AMPC_OP_REDUCE_LOG_SUM) v = log(v);
            else if (lse) v = log(v) + shift[i];
            ampc_ref_store_f64(y->data, y->dtype, i, v);
        } else {
            int64_t v = ai[i];
            if (op == AMPC_OP_REDUCE_MEAN) /* truncates toward zero; no NaN in integers */
                v = group == 0 ? 0 : u ? (int64_t)((uint64_t)v / (uint64_t)group) : v / group;
            ampc_ref_store_i64(y->data, y->dtype, i, v);
        }
    }
    free(acc);
    free(shift);
    return AMPC_OK;
}
