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
#include "ampc/mma.cuh"

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
/* The chunk [k0, k0 + kn) of the state of batch entries b0 .. b0 + BT - 1 into hs, BT rows
 * `stride` values apart, `width` values of each written (zeros past kn and past the batch), by
 * the block's NT threads. A trip count the compiler knows, so that a thread's loads are all
 * issued before the first is stored (BT * width / NT of them in flight, not one). */
template <int NT, int BT, typename C, typename Src>
__device__ __forceinline__ void rnn_load_state(C *hs, long long stride, long long width, long long k0,
                                               long long kn, long long b0, long long batch, Src src) {
    const int trips = (int)((width + NT - 1) / NT);
#pragma unroll 4
    for (int i = 0; i < trips; i++) {
        const long long kk = (long long)threadIdx.x + (long long)i * NT;
#pragma unroll
        for (int bb = 0; bb < BT; bb++)
            if (kk < width)
                hs[bb * stride + kk] = b0 + bb < batch && kk < kn ? (C)src(b0 + bb, k0 + kk) : C(0);
    }
}

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
        rnn_load_state<NT, BT>(hs, kc, kc, k0, kn, b0, batch, src);
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

/* The tensor-core step of rnn_recurrent_tc for R's element type TR, with g = lane / 4 and
 * t = lane % 4 (PTX ISA fragment layouts):
 *   f32 (TF32, mma.sync m16n8k8; R and the state rounded to TF32, as the compile's math allows
 *   for f32 matmuls):
 *     A (16 x 8, row): a0 = (row g, col t), a1 = (row g + 8, col t), a2 / a3 the same at col t + 4
 *     B (8 x 8, col):  b0 = (row t, col g), b1 = (row t + 4, col g)
 *   f16 and bf16 (m16n8k16; the state is already of R's type, so nothing is rounded):
 *     A (16 x 16, row): a0 = (row g, cols 2t, 2t + 1), a1 = row g + 8, a2 / a3 at cols + 8
 *     B (16 x 8, col):  b0 = (rows 2t, 2t + 1, col g), b1 = rows + 8
 *   C (16 x 8, f32): c0, c1 = (row g, cols 2t, 2t + 1), c2, c3 = row g + 8.
 * a_frag reads the warp's two rows w[0] (g) and w[1] (g + 8) at k0 + ks + ...; entries at or
 * past kn are zero. b_frag reads the state of one batch column, col = its row of hs + ks. */
__device__ __forceinline__ unsigned rnn_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

template <typename TR> struct rnn_mma;
template <> struct rnn_mma<float> {
    static constexpr int KS = 8;
    static __device__ __forceinline__ void a_frag(unsigned (&a)[4], const float *const (&w)[2],
                                                  const bool (&live)[2], long long k0,
                                                  long long ks, long long kn, int t) {
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const long long k = ks + t + (q >> 1) * 4;
            a[q] = live[q & 1] && k < kn ? rnn_tf32(w[q & 1][k0 + k]) : 0u;
        }
    }
    static __device__ __forceinline__ void b_frag(unsigned &b0, unsigned &b1, const float *col,
                                                  int t) {
        b0 = rnn_tf32(col[t]);
        b1 = rnn_tf32(col[t + 4]);
    }
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};
template <typename H> struct rnn_mma16 {
    static constexpr int KS = 16;
    static __device__ __forceinline__ void a_frag(unsigned (&a)[4], const H *const (&w)[2],
                                                  const bool (&live)[2], long long k0,
                                                  long long ks, long long kn, int t) {
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const long long k = ks + 2 * t + (q >> 1) * 8;
            const H *p = w[q & 1] + k0 + k;
            const float lo = live[q & 1] && k < kn ? (float)p[0] : 0.f;
            const float hi = live[q & 1] && k + 1 < kn ? (float)p[1] : 0.f;
            a[q] = mma_op<H>::pack(lo, hi);
        }
    }
    static __device__ __forceinline__ void b_frag(unsigned &b0, unsigned &b1, const float *col,
                                                  int t) {
        b0 = mma_op<H>::pack(col[2 * t], col[2 * t + 1]);
        b1 = mma_op<H>::pack(col[2 * t + 8], col[2 * t + 9]);
    }
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) {
        mma_op<H>::run(d, a, b0, b1);
    }
};
template <> struct rnn_mma<f16> : rnn_mma16<f16> {};
template <> struct rnn_mma<bf16> : rnn_mma16<bf16> {};

/* rnn_recurrent on the tensor cores (rnn_mma<TR>): the same sums, accumulated in f32. nrows is a
 * multiple of 16 and at most 16 * NT / 32, BT of 8. Warp w takes the rows of tile w % tm
 * (tm = nrows / 16) times every batch column, over the k steps numbered w / tm modulo
 * NT / 32 / tm (the warps of one tile split k), the rows of R of four k steps loaded at once;
 * each keeps its sums in registers across the chunks of the state, then the parts are added in a
 * fixed order (the result does not depend on timing). The state's rows in shared memory are kcr + 4 values apart (kcr: kc rounded up to a k
 * step), so that a B fragment's eight columns fall in distinct banks; hs needs
 * max(BT * (kcr + 4), 16 * (NT / 32) * BT) values. */
template <int NT, int BT, typename TR, typename Src>
__device__ __forceinline__ void rnn_recurrent_tc(float *acc, float *hs, long long kc, const TR *r,
                                                 long long h, long long u, int nrows, int g0,
                                                 long long j0, long long b0, long long batch,
                                                 Src src) {
    typedef rnn_mma<TR> M;
    constexpr int NW = NT / 32, NN = BT / 8;
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
    const int g = lane >> 2, t = lane & 3;
    const long long kcr = (kc + M::KS - 1) / M::KS * M::KS, stride = kcr + 4;
    const int tm = nrows / 16, parts = NW / tm, mt = warp % tm, part = warp / tm;
    const bool active = part < parts;
    const TR *w[2];
    bool live[2];
#pragma unroll
    for (int q = 0; q < 2; q++) { /* the warp's rows g and g + 8 of its tile */
        const int row = mt * 16 + g + 8 * q;
        const long long j = j0 + row % u;
        live[q] = active && j < h;
        w[q] = r + ((long long)(g0 + row / u) * h + (live[q] ? j : 0)) * h;
    }
    float d[NN][4];
#pragma unroll
    for (int n = 0; n < NN; n++) d[n][0] = d[n][1] = d[n][2] = d[n][3] = 0.f;
    for (long long k0 = 0; k0 < h; k0 += kc) {
        const long long kn = h - k0 < kc ? h - k0 : kc;
        __syncthreads(); /* the previous chunk is consumed */
        rnn_load_state<NT, BT>(hs, stride, kcr, k0, kn, b0, batch, src);
        __syncthreads();
        if (!active) continue;
        /* DEPTH k steps' rows of R loaded before their products, so that their trips to L2
         * overlap (one at a time, each k step would wait for its own) */
        constexpr int DEPTH = 4;
        const long long step = (long long)parts * M::KS;
        for (long long ks = (long long)part * M::KS; ks < kn; ks += DEPTH * step) {
            unsigned a[DEPTH][4];
#pragma unroll
            for (int e = 0; e < DEPTH; e++) M::a_frag(a[e], w, live, k0, ks + e * step, kn, t);
#pragma unroll
            for (int e = 0; e < DEPTH; e++) {
                if (ks + e * step >= kn) break; /* past the chunk: hs holds nothing there */
#pragma unroll
                for (int n = 0; n < NN; n++) {
                    unsigned b0r, b1r;
                    M::b_frag(b0r, b1r, hs + (long long)(n * 8 + g) * stride + ks + e * step, t);
                    M::run(d[n], a[e], b0r, b1r);
                }
            }
        }
    }
    __syncthreads(); /* hs is free: it holds the parts */
    if (active)
#pragma unroll
        for (int n = 0; n < NN; n++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int row = mt * 16 + g + (q >> 1) * 8, c = n * 8 + 2 * t + (q & 1);
                hs[((long long)part * nrows + row) * BT + c] = d[n][q];
            }
    __syncthreads();
    for (int i = (int)threadIdx.x; i < nrows * BT; i += NT) {
        float sum = 0.f;
        for (int p = 0; p < parts; p++) sum += hs[(long long)p * nrows * BT + i];
        acc[i] = sum;
    }
    __syncthreads();
}

} // namespace ampc
