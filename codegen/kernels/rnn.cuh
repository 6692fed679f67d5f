/*
 * rnn.cuh — the recurrent product of RNN, GRU and LSTM (codegen/lower_rnn.c).
 *
 * A layer runs as one launch a time step. Each block owns a few hidden units (all the gate rows
 * of R that feed them) and a tile of BT batch entries; rnn_recurrent multiplies those rows of R
 * by the entries' previous state (or GRU's r . Ht-1), the state coming through shared memory in
 * chunks. A warp takes RW rows at once, so that each value of the state read from shared memory
 * feeds RW products, and reads each row with consecutive lanes on consecutive elements
 * (coalesced). The sums land in shared memory for the threads that apply the gates.
 */
#pragma once

#include "ampc/common.cuh"

namespace ampc {

/* Sums v[i] over the warp's lanes for i < 32 and leaves the sum of v[l] in lane l's v[0]: at
 * each halving, a lane keeps the half of its values its lane bit picks and adds its partner's
 * copy of that half (16 + 8 + 4 + 2 + 1 shuffles). */
template <typename C> __device__ __forceinline__ void rnn_transpose_sum(C (&v)[32]) {
    const int lane = (int)(threadIdx.x & 31u);
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) {
        const bool upper = (lane & off) != 0;
#pragma unroll
        for (int i = 0; i < off; i++) {
            const C send = upper ? v[i] : v[i + off], keep = upper ? v[i + off] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
    }
}

/* acc[row * BT + bb] = sum over k of R(g0 + row / u, j0 + row % u)[k] * src(b0 + bb, k), for
 * row < nrows and bb < BT (entries past `batch` and units past h give 0 or are skipped), in a
 * block of NT threads. r points
 * at the direction's R, [gates * h, h]; hs is shared room for BT x kc values of the state (kc <=
 * h); acc is shared, nrows x BT. Every thread of the block calls it; it ends with
 * __syncthreads, acc complete. */
template <int NT, int BT, int RW, typename C, typename TR, typename Src>
__device__ __forceinline__ void rnn_recurrent(C *acc, C *hs, long long kc, const TR *r, long long h,
                                              long long u, int nrows, int g0, long long j0,
                                              long long b0, long long batch, Src src) {
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
    const int nw = (int)(blockDim.x >> 5);
    for (int i = (int)threadIdx.x; i < nrows * BT; i += (int)blockDim.x) acc[i] = C(0);
    for (long long k0 = 0; k0 < h; k0 += kc) {
        const long long kn = h - k0 < kc ? h - k0 : kc;
        __syncthreads(); /* the previous chunk is consumed (and acc zeroed) */
        /* a trip count the compiler knows, so that a thread's loads are all issued before the
         * first is stored (BT * kc / NT of them in flight, not one) */
        const int trips = (int)((kc + NT - 1) / NT);
#pragma unroll 4
        for (int t = 0; t < trips; t++) {
            const long long kk = (long long)threadIdx.x + (long long)t * NT;
#pragma unroll
            for (int bb = 0; bb < BT; bb++)
                if (kk < kc)
                    hs[bb * kc + kk] = b0 + bb < batch && kk < kn ? src(b0 + bb, k0 + kk) : C(0);
        }
        __syncthreads();
        for (int row0 = warp * RW; row0 < nrows; row0 += nw * RW) {
            const TR *w[RW];
            bool live[RW];
#pragma unroll
            for (int q = 0; q < RW; q++) {
                const int row = row0 + q;
                const long long j = j0 + row % u;
                live[q] = row < nrows && j < h;
                w[q] = r + ((long long)(g0 + row / u) * h + j) * h + k0;
            }
            C a[RW][BT];
#pragma unroll
            for (int q = 0; q < RW; q++)
#pragma unroll
                for (int bb = 0; bb < BT; bb++) a[q][bb] = C(0);
#pragma unroll 4
            for (long long kk = lane; kk < kn; kk += 32) {
                C wv[RW];
#pragma unroll
                for (int q = 0; q < RW; q++) wv[q] = live[q] ? ld(w[q], kk) : C(0);
#pragma unroll
                for (int bb = 0; bb < BT; bb++) {
                    const C x = hs[bb * kc + kk];
#pragma unroll
                    for (int q = 0; q < RW; q++) a[q][bb] += wv[q] * x;
                }
            }
#pragma unroll
            for (int q = 0; q < RW; q++) {
                if constexpr (BT == 32) { /* lane l ends with entry l's sum: 31 shuffles */
                    rnn_transpose_sum(a[q]);
                    if (live[q]) acc[(row0 + q) * BT + lane] += a[q][0];
                } else {
#pragma unroll
                    for (int bb = 0; bb < BT; bb++) {
                        C v = a[q][bb];
                        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                        if (lane == 0 && live[q]) acc[(row0 + q) * BT + bb] += v;
                    }
                }
            }
        }
    }
    __syncthreads();
}

} // namespace ampc
