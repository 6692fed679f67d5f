/*
 * reduce.cuh — device helpers for the generated reductions, arg reductions, scans and
 * normalisations (codegen/lower_reduce.c, codegen/lower_norm.c).
 *
 * A generated kernel of these families walks "rows": one row per thread (W = 1), per warp
 * (W = 32, several rows per block along threadIdx.y) or per block (W > 32, blockDim.x == W, one
 * row per block). Each thread folds the elements k = tid, tid + W, ... of its row into a private
 * accumulator, and row_allreduce<W> combines the W partial results so that every thread of the
 * row holds the total (a warp butterfly, then shared memory across warps). The combine functors
 * mirror the reference evaluator (ir/ref/reduce.c, norm.c, index.c): Max and Min let NaN stick,
 * the arg reductions prefer NaN and break ties by index (first, or last with select_last_index).
 * Accumulators are float for f32/f16/bf16, double for f64, 64-bit integers for integers (sums
 * and products wrap in unsigned arithmetic, as the reference's int64 does).
 */
#pragma once

#include "ampc/common.cuh"
#include "ampc/elementwise.cuh" /* INFINITY, NAN, m_exp / m_log / m_sqrt, is_nan / is_inf */

namespace ampc {

/* ---- combine functors ----------------------------------------------------------------------- */
struct red_add {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct red_mul {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a * b; }
};
/* Max / Min where a NaN on either side wins (the reference's "NaN sticks"); for integers the
 * b != b test is always false. */
struct red_max {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const {
        return (b > a || b != b) ? b : a;
    }
};
struct red_min {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const {
        return (b < a || b != b) ? b : a;
    }
};

/* ---- warp / block all-reductions ------------------------------------------------------------ */
/* T is float, double, long long or unsigned long long (what __shfl_*_sync takes). */
template <typename T> __device__ __forceinline__ T red_shfl_xor(T v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
}

/* Butterfly over the 32 lanes: every lane ends with the same total. */
template <typename T, typename Op> __device__ __forceinline__ T warp_allreduce(T v, Op op) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) v = op(v, red_shfl_xor(v, m));
    return v;
}

/* Over the whole block (blockDim.x a multiple of 32, blockDim.y == 1); every thread gets the
 * total. Safe to call repeatedly: the first barrier keeps a previous call's readers ahead. */
template <typename T, typename Op> __device__ T block_allreduce(T v, Op op, T id) {
    __shared__ T sh[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_allreduce(v, op);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : id;
    return warp_allreduce(v, op);
}

/* The row's total for a row of W threads (1: the thread's own value). */
template <int W, typename T, typename Op> __device__ __forceinline__ T row_allreduce(T v, Op op, T id) {
    if constexpr (W == 1) return v;
    else if constexpr (W <= 32) return warp_allreduce(v, op);
    else return block_allreduce(v, op, id);
}

/* ---- arg reductions ------------------------------------------------------------------------- */
/* Whether candidate (vb, ib) beats (va, ia) for ArgMax (MAX) / ArgMin, first or LAST index on
 * ties; a NaN beats every number, and among NaNs the first (or last) wins; index -1 is "no
 * candidate yet". A total order, so partial results may be combined in any order. */
template <bool MAX, bool LAST, typename T>
__device__ __forceinline__ bool arg_better(T va, long long ia, T vb, long long ib) {
    if (ib < 0) return false;
    if (ia < 0) return true;
    const bool an = va != va, bn = vb != vb;
    if (an || bn) return an && bn ? (LAST ? ib > ia : ib < ia) : bn;
    if (va == vb) return LAST ? ib > ia : ib < ia;
    return MAX ? vb > va : vb < va;
}

template <bool MAX, bool LAST, typename T> __device__ __forceinline__ void warp_argreduce(T &v, long long &i) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) {
        const T ov = red_shfl_xor(v, m);
        const long long oi = red_shfl_xor(i, m);
        if (arg_better<MAX, LAST>(v, i, ov, oi)) v = ov, i = oi;
    }
}

/* Every thread of the row ends with the row's best (v, i). */
template <int W, bool MAX, bool LAST, typename T> __device__ void row_argreduce(T &v, long long &i) {
    if constexpr (W == 1) return;
    else {
        warp_argreduce<MAX, LAST>(v, i);
        if constexpr (W > 32) {
            __shared__ T shv[32];
            __shared__ long long shi[32];
            const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
            __syncthreads();
            if (lane == 0) shv[w] = v, shi[w] = i;
            __syncthreads();
            v = lane < nw ? shv[lane] : v;
            i = lane < nw ? shi[lane] : -1;
            warp_argreduce<MAX, LAST>(v, i);
        }
    }
}

/* ---- scans ---------------------------------------------------------------------------------- */
/* Block-wide scan of one value per thread (blockDim.x a multiple of 32, blockDim.y == 1) under
 * the associative op with identity id, in thread order: returns the inclusive prefix, and sets
 * `excl` to the exclusive one and `total` to the whole block's. */
template <typename T, typename Op> __device__ T block_scan(T v, Op op, T id, T &excl, T &total) {
    __shared__ T sh[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    T incl = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const T o = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl = op(o, incl);
    }
    T wex = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) wex = id;
    __syncthreads();
    if (lane == 31) sh[w] = incl;
    __syncthreads();
    if (w == 0) { /* scan the warp totals in place (each lane reads and writes its own slot) */
        T s = lane < nw ? sh[lane] : id;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const T o = __shfl_up_sync(0xffffffffu, s, d);
            if (lane >= d) s = op(o, s);
        }
        if (lane < nw) sh[lane] = s;
    }
    __syncthreads();
    const T before = w > 0 ? sh[w - 1] : id;
    total = sh[nw - 1];
    excl = op(before, wex);
    return op(before, incl);
}

/* ---- normalisation of short rows in registers ------------------------------------------------ */
/* The elements a norm reads: a tensor (a pointer), or elem_fn, a function of the flat index
 * that computes each element where it is read (a chain of elementwise ops before the norm:
 * passes/fuse_elementwise.c); x[i] reads both. */
template <typename F> struct elem_fn {
    F f;
    __device__ __forceinline__ auto operator[](i64 i) const { return f(i); }
};
template <typename F> __device__ __forceinline__ elem_fn<F> elem_fn_of(F f) { return elem_fn<F>{f}; }

/* Elements [at, at + N) of x as floats: one vector load from a tensor, N computed elements. */
template <int N, typename T> __device__ __forceinline__ void ld_row(const T *x, i64 at, float *v) {
    ld_vec<N>(x + at, v);
}
template <int N, typename F> __device__ __forceinline__ void ld_row(const elem_fn<F> &x, i64 at, float *v) {
#pragma unroll
    for (int i = 0; i < N; i++) v[i] = to_f32(x[at + i]);
}

/* LayerNormalization (CENTER) or RMSNormalization of contiguous rows of LEN elements: one warp a
 * row, the row read once into registers (lane l holds elements [(t * 32 + l) * VEC, + VEC) for
 * t < LEN / (32 * VEC)), vector loads and stores; statistics in f32 over the registers, then
 * y = (x - mean) * inv * scale (+ bias), with Scale and B one row of LEN. Rows blockIdx.x *
 * blockDim.y + threadIdx.y, grid-strided; mean and inv (when not null) get each row's
 * statistics. LEN is a multiple of 32 * VEC; the tensors are aligned to VEC elements; x is a
 * tensor or an elem_fn (ld_row).
 * The kernel calls pdl_enter itself (codegen/lower_norm.c). HOLD > 0 (few rows of up to 1024
 * elements, where latency matters more than occupancy): each lane holds its Scale and B in
 * registers, loaded with the row rather than after its statistics; HOLD 2 (Scale and B are
 * constants, which no step before writes) loads them before waiting for the grid before, while
 * that grid finishes. Each y is rounded to R (the norm's own output
 * type) before it is stored as Y: a Cast after the norm is written by the norm's kernel, with
 * the values the two kernels would give (codegen/lower_norm.c). With `post` (one row, like
 * Scale), each rounded y is multiplied by it in f32 before it is stored: a Mul by a constant
 * after the norm, as its own kernel computes it. */
template <int LEN, int VEC, bool CENTER, int HOLD, typename R, typename X, typename S,
          typename B, typename Y, typename M, typename P = float>
__device__ __forceinline__ void norm_rows_warp(X x, const S *scale, const B *bias, Y *y,
                                               M *mean_out, M *inv_out, float eps, i64 n_rows,
                                               const P *post = nullptr) {
    constexpr int PER = LEN / 32, STEPS = PER / VEC;
    static_assert(HOLD == 0 || PER <= 32, "Scale and B in registers: 2 * PER more a lane");
    const int lane = threadIdx.x;
    float sc_all[HOLD ? PER : 1], bi_all[HOLD ? PER : 1];
    if (HOLD != 2) pdl_enter();
    if (HOLD) {
#pragma unroll
        for (int t = 0; t < STEPS; t++) {
            const int at = (t * 32 + lane) * VEC;
            ld_vec<VEC>(scale + at, sc_all + t * VEC);
#pragma unroll
            for (int i = 0; i < VEC; i++) bi_all[t * VEC + i] = 0.f;
            if (bias) ld_vec<VEC>(bias + at, bi_all + t * VEC);
        }
    }
    if (HOLD == 2) pdl_enter();
    for (i64 row = (i64)blockIdx.x * blockDim.y + threadIdx.y; row < n_rows;
         row += (i64)gridDim.x * blockDim.y) {
        float v[PER];
#pragma unroll
        for (int t = 0; t < STEPS; t++) ld_row<VEC>(x, row * LEN + (t * 32 + lane) * VEC, v + t * VEC);
        float mean = 0.f;
        if (CENTER) {
#pragma unroll
            for (int i = 0; i < PER; i++) mean += v[i];
            mean = warp_allreduce(mean, red_add()) / (float)LEN;
        }
        float sq = 0.f;
#pragma unroll
        for (int i = 0; i < PER; i++) sq += (v[i] - mean) * (v[i] - mean);
        const float inv = 1.f / m_sqrt(warp_allreduce(sq, red_add()) / (float)LEN + eps);
#pragma unroll
        for (int t = 0; t < STEPS; t++) {
            const int at = (t * 32 + lane) * VEC;
            float sc[VEC], bi[VEC] = {};
            if (HOLD) {
#pragma unroll
                for (int i = 0; i < VEC; i++) sc[i] = sc_all[t * VEC + i], bi[i] = bi_all[t * VEC + i];
            } else {
                ld_vec<VEC>(scale + at, sc);
                if (bias) ld_vec<VEC>(bias + at, bi);
            }
#pragma unroll
            for (int i = 0; i < VEC; i++)
                v[t * VEC + i] = to_f32(cvt<R>((v[t * VEC + i] - mean) * inv * sc[i] + bi[i]));
            if (post) { /* a Mul by one row after the norm: rounded once more, in st_vec */
                float pv[VEC];
                ld_vec<VEC>(post + at, pv);
#pragma unroll
                for (int i = 0; i < VEC; i++) v[t * VEC + i] *= pv[i];
            }
            st_vec<VEC>(y + row * LEN + at, v + t * VEC);
        }
        if (lane == 0 && mean_out) mean_out[row] = cvt<M>(mean);
        if (lane == 0 && inv_out) inv_out[row] = cvt<M>(inv);
    }
}

} // namespace ampc
