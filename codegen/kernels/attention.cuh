/*
 * attention.cuh — ampc.FusedAttention (passes/fuse_attention.c; lowering: codegen/lower_attention.c):
 * y = softmax(round(q k^T * scale + mask)) v for every (batch, head, query row), without ever
 * writing the scores to memory. Semantics as the reference (ir/ref/attention.c): the biased
 * score is rounded to the tensors' type T (what the unfused graph held), a row with no finite
 * score or with a NaN gives 0 when SAFE (ampc.SafeSoftmax) and NaN otherwise (Softmax).
 *
 * Two kernels:
 *   attn_mma  — f16/bf16, head sizes multiples of 16 up to 128, contiguous head dims: flash
 *               attention on the tensor cores (mma.sync m16n8k16, f32 accumulation). A block of
 *               4 warps takes 64 query rows of one (batch, head); each warp keeps its 16 rows of
 *               Q as A fragments in registers, K and V stream through shared memory 64 keys at a
 *               time (V stored transposed, so both operands load as 32-bit pairs), the scores
 *               stay in registers, the softmax is online (running max and sum in f32) and the
 *               probabilities, rounded to T, feed the second product straight from the score
 *               fragments.
 *   attn_rows — any float type and shape: one warp per query row, three passes over the keys
 *               (max, sum, weighted sum of V), arithmetic in acc_t<T>.
 */
#pragma once

#include "ampc/common.cuh"
#include "ampc/elementwise.cuh" /* INFINITY, NAN, m_exp */

namespace ampc {

/* Sizes and element steps of one attention: q (b, h, i, d), k and v (b, h, j, d), the mask
 * (b, h, i, j; 0 where it broadcasts), y (b, h, i, d). */
struct attn_desc {
    i64 B, H, Sq, Sk;
    i64 qs[4], ks[4], vs[4], ms[4], ys[4];
    float scale;
};

/* x rounded to T and back: the value a tensor of type T holds. */
template <typename T, typename A> __device__ __forceinline__ A attn_round(A x) {
    return cvt<A>(cvt<T>(x));
}

/* The row's result where no probability exists: 0 (SafeSoftmax) or NaN (Softmax). */
template <bool SAFE> __device__ __forceinline__ float attn_empty() { return SAFE ? 0.0f : NAN; }

/* ---- attn_rows: the generic kernel ---------------------------------------------------------- */

/* Score of query row qr and key row kr, rounded to T; mr is the query's mask row or null. */
template <typename T, typename A, int D>
__device__ __forceinline__ A attn_score(const T *qr, const T *kr, const T *mr, i64 j,
                                        const attn_desc &a) {
    A dot = 0;
    for (int d = 0; d < D; d++) dot += ld(qr, d * a.qs[3]) * ld(kr, d * a.ks[3]);
    A s = (A)a.scale * dot;
    if (mr) s += ld(mr, j * a.ms[3]);
    return attn_round<T>(s);
}

template <typename A> __device__ __forceinline__ A attn_warp_max(A v) {
    for (int m = 16; m > 0; m >>= 1) {
        A o = __shfl_xor_sync(0xffffffffu, v, m);
        v = o > v ? o : v;
    }
    return v;
}

template <typename A> __device__ __forceinline__ A attn_warp_sum(A v) {
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

/* One warp per query row (blockDim.x a multiple of 32, rows grid-strided). */
template <typename T, int D, int DV, bool SAFE>
__device__ __forceinline__ void attn_rows(const T *q, const T *k, const T *v, const T *mask, T *y,
                                          const attn_desc &a) {
    typedef acc_t<T> A;
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const i64 rows = a.B * a.H * a.Sq;
    for (i64 row = (i64)blockIdx.x * warps + (threadIdx.x >> 5); row < rows;
         row += (i64)gridDim.x * warps) {
        const i64 i = row % a.Sq, h = row / a.Sq % a.H, b = row / (a.Sq * a.H);
        const T *qr = q + b * a.qs[0] + h * a.qs[1] + i * a.qs[2];
        const T *kb = k + b * a.ks[0] + h * a.ks[1], *vb = v + b * a.vs[0] + h * a.vs[1];
        const T *mr = mask ? mask + b * a.ms[0] + h * a.ms[1] + i * a.ms[2] : (const T *)0;
        T *yr = y + b * a.ys[0] + h * a.ys[1] + i * a.ys[2];
        A mx = -(A)INFINITY;
        int bad = 0; /* a NaN score */
        for (i64 j = lane; j < a.Sk; j += 32) {
            const A s = attn_score<T, A, D>(qr, kb + j * a.ks[2], mr, j, a);
            bad |= s != s;
            mx = s > mx ? s : mx;
        }
        mx = attn_warp_max(mx);
        if (__any_sync(0xffffffffu, bad) || mx == -(A)INFINITY || mx == (A)INFINITY) {
            for (int d = lane; d < DV; d += 32) yr[d * a.ys[3]] = cvt<T>(attn_empty<SAFE>());
            continue;
        }
        A sum = 0;
        for (i64 j = lane; j < a.Sk; j += 32)
            sum += m_exp(attn_score<T, A, D>(qr, kb + j * a.ks[2], mr, j, a) - mx);
        sum = attn_warp_sum(sum);
        A acc[(DV + 31) / 32];
        for (int c = 0; c < (DV + 31) / 32; c++) acc[c] = 0;
        for (i64 j0 = 0; j0 < a.Sk; j0 += 32) {
            A p = 0;
            if (j0 + lane < a.Sk) {
                const A s = attn_score<T, A, D>(qr, kb + (j0 + lane) * a.ks[2], mr, j0 + lane, a);
                p = attn_round<T>(m_exp(s - mx) / sum);
            }
            for (int t = 0; t < 32 && j0 + t < a.Sk; t++) {
                const A pt = __shfl_sync(0xffffffffu, p, t);
                const T *vr = vb + (j0 + t) * a.vs[2];
                for (int c = 0; c < (DV + 31) / 32; c++)
                    if (lane + 32 * c < DV) acc[c] += pt * ld(vr, (lane + 32 * c) * a.vs[3]);
            }
        }
        for (int c = 0; c < (DV + 31) / 32; c++)
            if (lane + 32 * c < DV) yr[(lane + 32 * c) * a.ys[3]] = cvt<T>(acc[c]);
    }
}

/* ---- attn_mma: the tensor-core kernel ------------------------------------------------------- */

template <typename T> struct attn_mma_op;
template <> struct attn_mma_op<f16> {
    /* c += a (16x16, row) * b (16x8, col), f32 accumulators */
    static __device__ __forceinline__ void run(float c[4], const unsigned a[4], unsigned b0,
                                               unsigned b1) {
#ifdef AMPC_ATTN_EMULATE_MMA /* bench/kernels/attention_emu.cpp runs the kernel on the CPU */
        attn_emulate_mma<f16>(c, a, b0, b1);
#else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
    }
    static __device__ __forceinline__ unsigned pack(float lo, float hi) {
        const __half_raw a = __float2half_rn(lo), b = __float2half_rn(hi);
        return (unsigned)a.x | (unsigned)b.x << 16;
    }
};
template <> struct attn_mma_op<bf16> {
    static __device__ __forceinline__ void run(float c[4], const unsigned a[4], unsigned b0,
                                               unsigned b1) {
#ifdef AMPC_ATTN_EMULATE_MMA /* bench/kernels/attention_emu.cpp runs the kernel on the CPU */
        attn_emulate_mma<bf16>(c, a, b0, b1);
#else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
    }
    static __device__ __forceinline__ unsigned pack(float lo, float hi) {
        const __nv_bfloat16_raw a = __float2bfloat16_rn(lo), b = __float2bfloat16_rn(hi);
        return (unsigned)a.x | (unsigned)b.x << 16;
    }
};

/* The 32-bit pair at p (two consecutive elements, 4-byte aligned), or 0 when !ok. */
template <typename T> __device__ __forceinline__ unsigned attn_pair(const T *p, bool ok) {
    return ok ? *reinterpret_cast<const unsigned *>(p) : 0u;
}

enum { ATTN_BM = 64, ATTN_BN = 64, ATTN_PAD = 8 };

/* Loads the mask's tile of query rows [i0, i0 + BM) and keys [j0, j0 + BN) into mk (one row
 * when the mask broadcasts over the query rows), with the row index clamped into the tensor
 * (rows past Sq are computed but never stored). With MVEC (the lowering's promise: rows
 * contiguous, their steps and Sk multiples of 8, the mask 16-byte aligned) in 16-byte chunks, a
 * chunk past Sk zero; else element by element with the key clamped too. Either way no load waits
 * on a branch, so a tile's loads issue together instead of one latency each in the score loop:
 * a mask per query row (BERT's [B, 1, S, S]) is 4 16-byte loads a thread a tile. */
template <typename T, bool MVEC>
__device__ __forceinline__ void attn_load_mask(const T *mb, i64 i0, i64 j0, const attn_desc &a,
                                               T (*mk)[ATTN_BN]) {
    const int rows = a.ms[2] == 0 ? 1 : ATTN_BM;
    if (MVEC) {
        for (int c = threadIdx.x; c < rows * (ATTN_BN / 8); c += blockDim.x) {
            const int r = c / (ATTN_BN / 8), d = c % (ATTN_BN / 8) * 8;
            const i64 ic = i0 + r, i = ic < a.Sq ? ic : a.Sq - 1;
            uint4 x = make_uint4(0, 0, 0, 0);
            if (j0 + d < a.Sk) x = *reinterpret_cast<const uint4 *>(mb + i * a.ms[2] + j0 + d);
            *reinterpret_cast<uint4 *>(&mk[r][d]) = x;
        }
        return;
    }
    #pragma unroll 8
    for (int c = threadIdx.x; c < rows * ATTN_BN; c += blockDim.x) {
        const i64 ic = i0 + c / ATTN_BN, jc = j0 + c % ATTN_BN;
        const i64 i = ic < a.Sq ? ic : a.Sq - 1, j = jc < a.Sk ? jc : a.Sk - 1;
        mk[c / ATTN_BN][c % ATTN_BN] = mb[i * a.ms[2] + j * a.ms[3]];
    }
}

/* Loads keys [j0, j0 + BN) into ks (row j: the key's D elements as D/2 words of element pairs)
 * and values into vt (row d: for each key pair 2p, 2p + 1 one word, value d of both), zeros past
 * Sk: both products then read their B fragments as single words. Global reads in 16-byte chunks
 * (D and DV multiples of 8, rows 16-byte aligned: the lowering checks); elements move as bits. */
template <typename T, int D, int DV>
__device__ __forceinline__ void attn_load_kv(const T *kb, const T *vb, i64 j0, const attn_desc &a,
                                             unsigned (*ks)[(D + ATTN_PAD) / 2],
                                             unsigned (*vt)[(ATTN_BN + ATTN_PAD) / 2]) {
    for (int c = threadIdx.x; c < ATTN_BN * (D / 8); c += blockDim.x) {
        const int r = c / (D / 8), d = c % (D / 8) * 8;
        uint4 x = make_uint4(0, 0, 0, 0);
        if (j0 + r < a.Sk) x = *reinterpret_cast<const uint4 *>(kb + (j0 + r) * a.ks[2] + d);
        ks[r][d / 2] = x.x, ks[r][d / 2 + 1] = x.y, ks[r][d / 2 + 2] = x.z, ks[r][d / 2 + 3] = x.w;
    }
    for (int c = threadIdx.x; c < ATTN_BN / 2 * (DV / 8); c += blockDim.x) {
        const int p = c % (ATTN_BN / 2), d = c / (ATTN_BN / 2) * 8; /* keys 2p, 2p + 1 */
        uint4 x0 = make_uint4(0, 0, 0, 0), x1 = x0;
        if (j0 + 2 * p < a.Sk) x0 = *reinterpret_cast<const uint4 *>(vb + (j0 + 2 * p) * a.vs[2] + d);
        if (j0 + 2 * p + 1 < a.Sk)
            x1 = *reinterpret_cast<const uint4 *>(vb + (j0 + 2 * p + 1) * a.vs[2] + d);
        const unsigned w0[4] = {x0.x, x0.y, x0.z, x0.w}, w1[4] = {x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int t = 0; t < 4; t++) {
            vt[d + 2 * t][p] = (w0[t] & 0xffffu) | w1[t] << 16;
            vt[d + 2 * t + 1][p] = w0[t] >> 16 | (w1[t] & 0xffff0000u);
        }
    }
}

/* Grid (ceil(Sq / 64), H, B), 128 threads. Per warp: 16 query rows; per thread rows g and g + 8
 * of them (g = lane / 4) and, in each 8-column tile, columns 2 * (lane % 4) and the next. */
template <typename T, int D, int DV, bool SAFE, bool MVEC = false>
__device__ __forceinline__ void attn_mma(const T *q, const T *k, const T *v, const T *mask, T *y,
                                         const attn_desc &a) {
    __shared__ unsigned ks[ATTN_BN][(D + ATTN_PAD) / 2];
    __shared__ unsigned vt[DV][(ATTN_BN + ATTN_PAD) / 2];
    __shared__ __align__(16) T mk[ATTN_BM][ATTN_BN]; /* the mask's tile (row 0 only when it
                                                        broadcasts) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const i64 b = blockIdx.z, h = blockIdx.y;
    const i64 i0 = (i64)blockIdx.x * ATTN_BM;
    const i64 r0 = i0 + warp * 16 + g, r1 = r0 + 8; /* this thread's rows */
    const int m0 = a.ms[2] == 0 ? 0 : warp * 16 + g, m1 = a.ms[2] == 0 ? 0 : m0 + 8; /* in mk */
    const T *qb = q + b * a.qs[0] + h * a.qs[1];
    const T *kb = k + b * a.ks[0] + h * a.ks[1], *vb = v + b * a.vs[0] + h * a.vs[1];
    const T *mb = mask ? mask + b * a.ms[0] + h * a.ms[1] : (const T *)0;

    unsigned qa[D / 16][4]; /* Q's A fragments, rows past Sq zero */
    #pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const int d = kk * 16 + 2 * t;
        qa[kk][0] = attn_pair(qb + r0 * a.qs[2] + d, r0 < a.Sq);
        qa[kk][1] = attn_pair(qb + r1 * a.qs[2] + d, r1 < a.Sq);
        qa[kk][2] = attn_pair(qb + r0 * a.qs[2] + d + 8, r0 < a.Sq);
        qa[kk][3] = attn_pair(qb + r1 * a.qs[2] + d + 8, r1 < a.Sq);
    }
    float o[DV / 8][4];
    #pragma unroll
    for (int n = 0; n < DV / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const float log2e = 1.4426950408889634f;

    for (i64 j0 = 0; j0 < a.Sk; j0 += ATTN_BN) {
        __syncthreads(); /* the previous tile is consumed */
        attn_load_kv<T, D, DV>(kb, vb, j0, a, ks, vt);
        if (mb) attn_load_mask<T, MVEC>(mb, i0, j0, a, mk);
        __syncthreads();
        float s[ATTN_BN / 8][4];
        #pragma unroll
        for (int n = 0; n < ATTN_BN / 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            #pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                attn_mma_op<T>::run(s[n], qa[kk], ks[n * 8 + g][kk * 8 + t], ks[n * 8 + g][kk * 8 + t + 4]);
            }
        }
        /* scale, mask, round to T; keys past Sk count as -inf; the tile's row maxima */
        float mt[2] = {-INFINITY, -INFINITY};
        #pragma unroll
        for (int n = 0; n < ATTN_BN / 8; n++)
            for (int e = 0; e < 4; e++) {
                const int jj = n * 8 + 2 * t + (e & 1);
                float x = -INFINITY;
                if (a.Sk % ATTN_BN == 0 || j0 + jj < a.Sk) {
                    x = s[n][e] * a.scale;
                    if (mb) x += to_f32(mk[e < 2 ? m0 : m1][jj]);
                    x = attn_round<T>(x);
                }
                s[n][e] = x;
                mt[e >> 1] = fmaxf(mt[e >> 1], x);
            }
        #pragma unroll
        for (int w = 0; w < 2; w++) {
            mt[w] = fmaxf(mt[w], __shfl_xor_sync(0xffffffffu, mt[w], 1));
            mt[w] = fmaxf(mt[w], __shfl_xor_sync(0xffffffffu, mt[w], 2));
        }
        /* online softmax: what is accumulated is rescaled to the new maximum; until a finite
         * score shows up the base is 0, so every p and every correction is exp(-inf) = 0 */
        float base[2];
        #pragma unroll
        for (int w = 0; w < 2; w++) {
            const float mn = fmaxf(m[w], mt[w]);
            base[w] = mn == -INFINITY ? 0.0f : mn;
            const float corr = exp2f((m[w] - base[w]) * log2e);
            l[w] *= corr;
            #pragma unroll
            for (int n = 0; n < DV / 8; n++) o[n][2 * w] *= corr, o[n][2 * w + 1] *= corr;
            m[w] = mn;
        }
        #pragma unroll
        for (int n = 0; n < ATTN_BN / 8; n++)
            for (int e = 0; e < 4; e++) {
                const float p = exp2f((s[n][e] - base[e >> 1]) * log2e);
                s[n][e] = p;
                l[e >> 1] += p;
            }
        /* P (rounded to T) times V: score tiles 2c and 2c + 1 are the A fragment of keys 16c.. */
        #pragma unroll
        for (int c = 0; c < ATTN_BN / 16; c++) {
            const unsigned pa[4] = {attn_mma_op<T>::pack(s[2 * c][0], s[2 * c][1]),
                                    attn_mma_op<T>::pack(s[2 * c][2], s[2 * c][3]),
                                    attn_mma_op<T>::pack(s[2 * c + 1][0], s[2 * c + 1][1]),
                                    attn_mma_op<T>::pack(s[2 * c + 1][2], s[2 * c + 1][3])};
            #pragma unroll
            for (int n = 0; n < DV / 8; n++) {
                attn_mma_op<T>::run(o[n], pa, vt[n * 8 + g][c * 8 + t], vt[n * 8 + g][c * 8 + t + 4]);
            }
        }
    }
    /* the row sums across the four threads of a row, then y = o / l */
    #pragma unroll
    for (int w = 0; w < 2; w++) {
        l[w] += __shfl_xor_sync(0xffffffffu, l[w], 1);
        l[w] += __shfl_xor_sync(0xffffffffu, l[w], 2);
    }
    T *yb = y + b * a.ys[0] + h * a.ys[1];
    #pragma unroll
    for (int w = 0; w < 2; w++) {
        const i64 r = w ? r1 : r0;
        if (r >= a.Sq) continue;
        /* a NaN score makes its p NaN, a +inf one its row's base +inf and p = exp(inf - inf)
         * NaN: either way the row's sum is NaN, and the result attn_empty */
        const bool empty = l[w] != l[w] || m[w] == -INFINITY;
        const float inv = empty ? 0.0f : 1.0f / l[w];
        #pragma unroll
        for (int n = 0; n < DV / 8; n++) {
            const float lo = empty ? attn_empty<SAFE>() : o[n][2 * w] * inv;
            const float hi = empty ? attn_empty<SAFE>() : o[n][2 * w + 1] * inv;
            *reinterpret_cast<unsigned *>(yb + r * a.ys[2] + n * 8 + 2 * t) =
                attn_mma_op<T>::pack(lo, hi);
        }
    }
}

} // namespace ampc
