/*
 * ref.h — the reference evaluator: declarations of every ampc_ref_* kernel named in ops.def, and
 * the helpers the kernels share: element loads and stores in a wide type, and a broadcasting
 * iterator. Floating-point kernels compute in double and round once to the storage type;
 * integer kernels compute in 64-bit two's complement (wrapping, as numpy does).
 */
#ifndef AMPC_REF_H
#define AMPC_REF_H

#include "../ir.h"

#define OP(id, onnx, lo, hi, min_in, max_in, min_out, max_out, cin, traits, prec, infer, ref, lower)     \
    ampc_status ampc_ref_##ref(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,    \
                               ampc_tensor *const *out);
#include "../ops.def"
#undef OP

/* The most input samples one node may read where the count comes from data (RoiAlign's rois and
 * sampling_ratio): 2^32, minutes of work for the evaluator; more is refused with a message. */
#define AMPC_REF_MAX_SAMPLES 4294967296.0

/* Evaluates node n, whose present inputs all carry data, and attaches arena-allocated data to
 * its outputs. */
ampc_status ampc_ref_fold_node(ampc_graph *g, ampc_node *n);

/* Element i of a buffer of dtype t, widened. Floats load exactly into double; integers and bool
 * into int64 (u64 above INT64_MAX wraps: use the u64 loader where that matters). */
double ampc_ref_load_f64(const void *p, ampc_dtype t, int64_t i);
int64_t ampc_ref_load_i64(const void *p, ampc_dtype t, int64_t i);
/* Stores with one rounding (floats: to nearest even; integers: wrap modulo 2^bits; bool: != 0,
 * so NaN is true). A double stored into an integer dtype (Cast, and every integer output an op
 * computes in double) is truncated toward zero and saturated to that dtype's range, NaN giving
 * 0: 300.0 -> i8 127, -1e30 -> u32 0, inf -> i64 INT64_MAX. ONNX leaves these conversions
 * undefined; the GPU kernels do the same (ampc::sat_int, codegen/kernels/common.cuh). */
void ampc_ref_store_f64(void *p, ampc_dtype t, int64_t i, double v);
void ampc_ref_store_i64(void *p, ampc_dtype t, int64_t i, int64_t v);
/* v truncated toward zero and saturated to the range of integer dtype t (i64 for any dtype
 * that is not a narrower integer; u64 values above INT64_MAX are not representable here: the
 * store handles u64 itself); NaN gives 0. */
int64_t ampc_ref_sat_int(double v, ampc_dtype t);
/* Copies element j of src into element i of dst (same dtype). */
static inline void ampc_ref_copy_elem(void *dst, int64_t i, const void *src, int64_t j, size_t esz) {
    unsigned char *d = (unsigned char *)dst + (size_t)i * esz;
    const unsigned char *s = (const unsigned char *)src + (size_t)j * esz;
    for (size_t b = 0; b < esz; b++) d[b] = s[b];
}

/* Row-major strides (in elements) of a shape. */
void ampc_ref_strides(const ampc_shape *s, int64_t strides[AMPC_MAX_RANK]);

/* Walks the elements of `out` in row-major order while tracking, for up to 4 operands that
 * broadcast to it, the matching element offset of each. */
enum { AMPC_ITER_MAX_OPERANDS = 4 };
typedef struct ampc_bcast_iter {
    int32_t rank, k;
    int64_t dims[AMPC_MAX_RANK], idx[AMPC_MAX_RANK];
    int64_t strides[AMPC_ITER_MAX_OPERANDS][AMPC_MAX_RANK]; /* 0 along broadcast dims */
    int64_t off[AMPC_ITER_MAX_OPERANDS];
} ampc_bcast_iter;

void ampc_bcast_iter_init(ampc_bcast_iter *it, const ampc_shape *out, const ampc_shape *const *ins,
                          int32_t k);
void ampc_bcast_iter_next(ampc_bcast_iter *it);

#endif /* AMPC_REF_H */
