/*
 * move.cuh — device helpers for the generated data-movement and indexing kernels
 * (codegen/lower_movement.c, codegen/lower_index.c): element constants from raw bits, index reads
 * that mirror the reference evaluator's integer loads, the scatter reductions, and TopK's
 * per-row bitonic sort in shared memory.
 *
 * The edge cases follow ir/ref/movement.c and ir/ref/index.c: an index read from a float tensor
 * truncates toward zero and saturates (NaN reads as 0); scatter reductions combine floats in f32
 * (f64 for double) and integers with wrap-around; max/min keep the current value when it is NaN;
 * TopK orders NaN above every number and breaks ties by the lower position.
 */
#pragma once

#include "ampc/common.cuh"

namespace ampc {

/* ---- element constants ---------------------------------------------------------------------- */

/* An element of type T from its bit pattern (the low sizeof(T) bytes of b). */
template <typename T> __device__ __forceinline__ T from_bits(unsigned long long b) { return (T)b; }
template <> __device__ __forceinline__ bool from_bits<bool>(unsigned long long b) { return b != 0; }
template <> __device__ __forceinline__ float from_bits<float>(unsigned long long b) {
    return __int_as_float((int)(unsigned int)b);
}
template <> __device__ __forceinline__ double from_bits<double>(unsigned long long b) {
    return __longlong_as_double((long long)b);
}
template <> __device__ __forceinline__ f16 from_bits<f16>(unsigned long long b) {
    return __ushort_as_half((unsigned short)b);
}
template <> __device__ __forceinline__ bf16 from_bits<bf16>(unsigned long long b) {
    return __ushort_as_bfloat16((unsigned short)b);
}

/* The zero of any element type (all bits clear). */
template <typename T> __device__ __forceinline__ T zero() { return from_bits<T>(0ull); }

/* ---- index reads ---------------------------------------------------------------------------- */

/* An element read as a 64-bit index, as ampc_ref_load_i64 does: integers exactly (u64 above
 * INT64_MAX wraps), floats truncated toward zero and saturated, NaN as 0. */
template <typename T> __device__ __forceinline__ long long to_index(T x) { return (long long)x; }
__device__ __forceinline__ long long to_index(double d) {
    if (d != d) return 0;
    if (d >= 9.2233720368547758e18) return 0x7fffffffffffffffLL;
    if (d <= -9.2233720368547758e18) return (long long)0x8000000000000000ULL;
    return (long long)d;
}
__device__ __forceinline__ long long to_index(float x) { return to_index((double)x); }
__device__ __forceinline__ long long to_index(f16 x) { return to_index((double)__half2float(x)); }
__device__ __forceinline__ long long to_index(bf16 x) {
    return to_index((double)__bfloat162float(x));
}

/* ---- scatter reductions --------------------------------------------------------------------- */

enum { RED_NONE = 0, RED_ADD = 1, RED_MUL = 2, RED_MAX = 3, RED_MIN = 4 };

template <typename T> struct is_fp { static const bool value = false; };
template <> struct is_fp<float> { static const bool value = true; };
template <> struct is_fp<double> { static const bool value = true; };
template <> struct is_fp<f16> { static const bool value = true; };
template <> struct is_fp<bf16> { static const bool value = true; };
template <typename T> struct is_bool { static const bool value = false; };
template <> struct is_bool<bool> { static const bool value = true; };

/* y[o] = combine(y[o], u) for reduction RED (RED_NONE: assignment). Floats combine in their
 * accumulation type and round once; integers wrap (computed in 64 bits, then truncated); bool
 * add is or, mul is and. Max/min keep y[o] on ties and when it is NaN (the reference's rule). */
template <int RED, typename T> __device__ __forceinline__ void combine(T *y, long long o, T u) {
    if constexpr (RED == RED_NONE) {
        y[o] = u;
    } else if constexpr (is_fp<T>::value) {
        typedef acc_t<T> A;
        const A a = cvt<A>(y[o]), b = cvt<A>(u);
        A r;
        if constexpr (RED == RED_ADD) r = a + b;
        else if constexpr (RED == RED_MUL) r = a * b;
        else if constexpr (RED == RED_MAX) r = (a >= b || a != a) ? a : b;
        else r = (a <= b || a != a) ? a : b;
        y[o] = cvt<T>(r);
    } else if constexpr (is_bool<T>::value) {
        const bool a = y[o], b = u;
        y[o] = (RED == RED_ADD || RED == RED_MAX) ? (a || b) : (a && b);
    } else {
        const T a = y[o], b = u;
        if constexpr (RED == RED_ADD) y[o] = (T)((unsigned long long)a + (unsigned long long)b);
        else if constexpr (RED == RED_MUL)
            y[o] = (T)((unsigned long long)a * (unsigned long long)b);
        else if constexpr (RED == RED_MAX) y[o] = a >= b ? a : b;
        else y[o] = a <= b ? a : b;
    }
}

/* ---- TopK ----------------------------------------------------------------------------------- */

/* Whether entry (a, ia) comes before (b, ib) in TopK order: larger (smaller) first, NaN above
 * every number, then the lower position. Position -1 marks padding, which comes last. */
template <typename K>
__device__ __forceinline__ bool topk_before(K a, int ia, K b, int ib, bool largest) {
    if (ia < 0) return false;
    if (ib < 0) return true;
    const bool an = a != a, bn = b != b; /* always false for integers */
    if (an || bn) return an && bn ? ia < ib : (largest ? an : bn);
    if (a != b) return largest ? a > b : a < b;
    return ia < ib;
}

/* Bitonic sort of cap (a power of two) entries of key/idx in shared memory into TopK order, by
 * the whole block. */
template <typename K> __device__ void topk_sort(K *key, int *idx, int cap, bool largest) {
    for (int size = 2; size <= cap; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int t = threadIdx.x; t < (cap >> 1); t += blockDim.x) {
                const int lo = 2 * t - (t & (stride - 1)), hi = lo + stride;
                const bool up = (lo & size) == 0;
                const bool swap = up ? topk_before(key[hi], idx[hi], key[lo], idx[lo], largest)
                                     : topk_before(key[lo], idx[lo], key[hi], idx[hi], largest);
                if (swap) {
                    const K tk = key[lo];
                    key[lo] = key[hi];
                    key[hi] = tk;
                    const int ti = idx[lo];
                    idx[lo] = idx[hi];
                    idx[hi] = ti;
                }
            }
        }
    __syncthreads();
}

/* Loads entries [first, first + count) of a line (element p at x[xbase + p * xstride], dim
 * entries) into key/idx slots [at, at + count), padding past the end of the line. */
template <typename T, typename K>
__device__ __forceinline__ void topk_load(const T *x, long long xbase, long long xstride,
                                          long long dim, long long first, int at, int count, K *key,
                                          int *idx) {
    for (int t = threadIdx.x; t < count; t += blockDim.x) {
        const long long p = first + t;
        if (p < dim) {
            key[at + t] = cvt<K>(x[xbase + p * xstride]);
            idx[at + t] = (int)p;
        } else {
            key[at + t] = K();
            idx[at + t] = -1;
        }
    }
}

/* TopK of one line by the whole block: the k first entries in TopK order go to
 * yv[ybase + j * ystride] (the element, bit for bit) and yi[...] (its position). key/idx hold
 * cap entries of shared memory. A line longer than cap is streamed: the best cap/2 entries seen
 * so far stay in the lower half while each next chunk of cap/2 fills the upper half (needs
 * k <= cap / 2). */
template <typename T, typename K>
__device__ void topk_line(const T *x, long long xbase, long long xstride, long long dim, T *yv,
                          long long *yi, long long ybase, long long ystride, long long k,
                          bool largest, int cap, K *key, int *idx) {
    const int half = cap >> 1;
    topk_load(x, xbase, xstride, dim, 0, 0, cap, key, idx);
    topk_sort(key, idx, cap, largest);
    for (long long next = cap; next < dim; next += half) {
        topk_load(x, xbase, xstride, dim, next, half, half, key, idx);
        topk_sort(key, idx, cap, largest);
    }
    for (long long j = threadIdx.x; j < k; j += blockDim.x) {
        const int p = idx[j];
        yv[ybase + j * ystride] = x[xbase + (long long)p * xstride];
        yi[ybase + j * ystride] = p;
    }
    __syncthreads(); /* the next line reuses the shared memory */
}

} // namespace ampc
