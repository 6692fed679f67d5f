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
 *               W warps (4 as the lowering picks them, or 8) takes 16 W query rows of one (batch,
 *               head); each warp keeps its 16 rows of Q as A fragments in registers; K, V (and a
 *               per-row mask) stream through two stages of shared memory 64 keys at a time,
 *               copied with cp.async one tile ahead of the tensor cores, each tile serving every
 *               warp; K's fragments load by ldmatrix, V's by ldmatrix.trans; the scores stay in
 *               registers, the softmax is online (running max and sum in f32, 2^x by the special
 *               function unit) and the probabilities, rounded to T, feed the second product
 *               straight from the score fragments. A tile that changes nothing (its mask tile
 *               all -inf, its K and V and the block's Q finite: attn_tile_hidden; a causal
 *               mask's tiles past a block's or a warp's rows) is skipped.
 *   attn_rows — any float type and shape: one warp per query row, three passes over the keys
 *               (max, sum, weighted sum of V), arithmetic in acc_t<T>.
 */
#pragma once

#include "ampc/common.cuh"
#include "ampc/elementwise.cuh" /* INFINITY, NAN, m_exp */
#include "ampc/mma.cuh"

namespace ampc {

/* Sizes and element steps of one attention: q (b, h, i, d), k and v (b, h, j, d), the mask
 * (b, h, i, j; 0 where it broadcasts), y (b, h, i, d). */
struct attn_desc {
    i64 B, H, Sq, Sk;
    i64 group; /* query heads a K/V head serves: head h reads K and V head h / group */
    i64 mp;    /* the mask's batch entries: batch b reads entry b % mp (B: one each) */
    i64 qs[4], ks[4], vs[4], ms[4], ys[4];
    float scale;
    i64 causal; /* CAUSAL kernels: the implied mask hides key j from query i past i + causal */
};

/* x rounded to T and back: the value a tensor of type T holds. */
template <typename T, typename A> __device__ __forceinline__ A attn_round(A x) {
    return cvt<A>(cvt<T>(x));
}

/* The row's result where no probability exists: 0 (SafeSoftmax) or NaN (Softmax). */
template <bool SAFE> __device__ __forceinline__ float attn_empty() { return SAFE ? 0.0f : NAN; }

/* ---- attn_rows: the generic kernel ---------------------------------------------------------- */

/* Score of query row qr (sequence index i) and key row kr (j), rounded to T; mr is the query's
 * mask row or null; with CAUSAL, -inf is added past i + a.causal. */
template <typename T, typename A, int D, bool CAUSAL>
__device__ __forceinline__ A attn_score(const T *qr, const T *kr, const T *mr, i64 i, i64 j,
                                        const attn_desc &a) {
    A dot = 0;
    for (int d = 0; d < D; d++) dot += ld(qr, d * a.qs[3]) * ld(kr, d * a.ks[3]);
    A s = (A)a.scale * dot;
    if (mr) s += ld(mr, j * a.ms[3]);
    if (CAUSAL && j > i + a.causal) s += -(A)INFINITY;
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
template <typename T, int D, int DV, bool SAFE, bool CAUSAL = false>
__device__ __forceinline__ void attn_rows(const T *q, const T *k, const T *v, const T *mask, T *y,
                                          const attn_desc &a) {
    typedef acc_t<T> A;
    const int lane = threadIdx.x & 31, warps = blockDim.x >> 5;
    const i64 rows = a.B * a.H * a.Sq;
    for (i64 row = (i64)blockIdx.x * warps + (threadIdx.x >> 5); row < rows;
         row += (i64)gridDim.x * warps) {
        const i64 i = row % a.Sq, h = row / a.Sq % a.H, b = row / (a.Sq * a.H);
        const T *qr = q + b * a.qs[0] + h * a.qs[1] + i * a.qs[2];
        const T *kb = k + b * a.ks[0] + h / a.group * a.ks[1];
        const T *vb = v + b * a.vs[0] + h / a.group * a.vs[1];
        const T *mr = mask ? mask + b % a.mp * a.ms[0] + h * a.ms[1] + i * a.ms[2] : (const T *)0;
        T *yr = y + b * a.ys[0] + h * a.ys[1] + i * a.ys[2];
        A mx = -(A)INFINITY;
        int bad = 0; /* a NaN score */
        for (i64 j = lane; j < a.Sk; j += 32) {
            const A s = attn_score<T, A, D, CAUSAL>(qr, kb + j * a.ks[2], mr, i, j, a);
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
            sum += m_exp(attn_score<T, A, D, CAUSAL>(qr, kb + j * a.ks[2], mr, i, j, a) - mx);
        sum = attn_warp_sum(sum);
        A acc[(DV + 31) / 32];
        for (int c = 0; c < (DV + 31) / 32; c++) acc[c] = 0;
        for (i64 j0 = 0; j0 < a.Sk; j0 += 32) {
            A p = 0;
            if (j0 + lane < a.Sk) {
                const i64 j = j0 + lane;
                const A s = attn_score<T, A, D, CAUSAL>(qr, kb + j * a.ks[2], mr, i, j, a);
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

/* The 32-bit pair at p (two consecutive elements, 4-byte aligned), or 0 when !ok. */
template <typename T> __device__ __forceinline__ unsigned attn_pair(const T *p, bool ok) {
    return ok ? *reinterpret_cast<const unsigned *>(p) : 0u;
}

/* attn_mma: 16 query rows a warp, 64-key tiles (a block of W warps takes 16 W rows). */
enum { ATTN_WARP_ROWS = 16, ATTN_BN = 64, ATTN_PAD = 8 };
/* attn_mma_split: 16 query rows a block, super-tiles of 4 x 32 keys, one 32-key part a warp. */
enum { ATTN_SPLIT_BM = 16, ATTN_SPLIT_BN = 128, ATTN_SPLIT_WARP_KEYS = 32 };

/* Shared memory in elements of one stage: a K tile of KEYS rows of D + PAD, a V tile of KEYS
 * rows of DV + PAD and, with a mask, its tile of MROWS rows of KEYS. attn_mma takes two stages
 * of 64 keys and 64 mask rows, attn_mma_split two of 128 keys and 16 mask rows; the lowering
 * launches with the same sizes in bytes (codegen/lower_attention.c). */
template <int D, int DV, int KEYS, int MROWS> __device__ __forceinline__ int attn_stage(bool mask) {
    return KEYS * (D + ATTN_PAD) + KEYS * (DV + ATTN_PAD) + (mask ? MROWS * KEYS : 0);
}

/* Loads the mask's tile of query rows [i0, i0 + MROWS) and keys [j0, j0 + KEYS) into mk (one row
 * when the mask broadcasts over the query rows), element by element, the row and key indices
 * clamped into the tensor (rows past Sq are computed but never stored; keys past Sk count as
 * -inf): no load waits on a branch, so a tile's loads issue together. The 16-byte form goes
 * with the K and V tiles (attn_fetch). */
template <typename T, int MROWS, int KEYS>
__device__ __forceinline__ void attn_load_mask(const T *mb, i64 i0, i64 j0, const attn_desc &a, T *mk) {
    const int rows = a.ms[2] == 0 ? 1 : MROWS;
    #pragma unroll 8
    for (int c = threadIdx.x; c < rows * KEYS; c += blockDim.x) {
        const i64 ic = i0 + c / KEYS, jc = j0 + c % KEYS;
        const i64 i = ic < a.Sq ? ic : a.Sq - 1, j = jc < a.Sk ? jc : a.Sk - 1;
        mk[c] = mb[i * a.ms[2] + j * a.ms[3]];
    }
}

/* Starts the copies of keys [j0, j0 + KEYS) into ks, of their values into vs (both row-major,
 * rows padded by PAD elements so the fragment reads of 8 rows hit 32 different banks) and, with
 * MVEC (the lowering's promise: mask rows contiguous, their steps and Sk multiples of 8, the mask
 * 16-byte aligned), of the mask's tile (MROWS query rows from i0) into mk: 16 bytes a copy (D and
 * DV multiples of 8, rows 16-byte aligned: the lowering checks), zeros past Sk. */
template <typename T, int D, int DV, bool MVEC, int KEYS, int MROWS>
__device__ __forceinline__ void attn_fetch(const T *kb, const T *vb, const T *mb, i64 i0, i64 j0,
                                           const attn_desc &a, T *ks, T *vs, T *mk) {
    for (int c = threadIdx.x; c < KEYS * (D / 8); c += blockDim.x) {
        const int r = c / (D / 8), d = c % (D / 8) * 8;
        const bool ok = j0 + r < a.Sk;
        cp16(ks + r * (D + ATTN_PAD) + d, ok ? kb + (j0 + r) * a.ks[2] + d : kb, ok);
    }
    for (int c = threadIdx.x; c < KEYS * (DV / 8); c += blockDim.x) {
        const int r = c / (DV / 8), d = c % (DV / 8) * 8;
        const bool ok = j0 + r < a.Sk;
        cp16(vs + r * (DV + ATTN_PAD) + d, ok ? vb + (j0 + r) * a.vs[2] + d : vb, ok);
    }
    if (!MVEC || !mb) return;
    const int rows = a.ms[2] == 0 ? 1 : MROWS;
    for (int c = threadIdx.x; c < rows * (KEYS / 8); c += blockDim.x) {
        const int r = c / (KEYS / 8), d = c % (KEYS / 8) * 8;
        const i64 ic = i0 + r, i = ic < a.Sq ? ic : a.Sq - 1;
        const bool ok = j0 + d < a.Sk;
        cp16(mk + r * KEYS + d, ok ? mb + i * a.ms[2] + j0 + d : mb, ok);
    }
}

/* The bits of T's -inf and of its exponent field (all ones: an infinity or a NaN). */
template <typename T> struct attn_bits;
template <> struct attn_bits<f16> { enum : unsigned { NEG_INF = 0xfc00u, EXP = 0x7c00u }; };
template <> struct attn_bits<bf16> { enum : unsigned { NEG_INF = 0xff80u, EXP = 0x7f80u }; };

/* Whether both elements of the pair w are finite. */
template <typename T> __device__ __forceinline__ bool attn_finite2(unsigned w) {
    return (w & attn_bits<T>::EXP) != attn_bits<T>::EXP &&
           (w >> 16 & attn_bits<T>::EXP) != attn_bits<T>::EXP;
}

/* Whether every pair of `words` 32-bit words in `rows` rows of `pitch` words from p passes `ok`,
 * over the whole block (a barrier: every thread must call it). */
template <typename T, bool NEG_INF>
__device__ __forceinline__ bool attn_block_all(const T *p, int rows, int words, int pitch) {
    const unsigned *w = reinterpret_cast<const unsigned *>(p);
    const unsigned ninf = attn_bits<T>::NEG_INF | attn_bits<T>::NEG_INF << 16;
    bool ok = true;
    for (int c = threadIdx.x; c < rows * words; c += blockDim.x) {
        const unsigned x = w[c / words * pitch + c % words];
        ok &= NEG_INF ? x == ninf : attn_finite2<T>(x);
    }
    return __syncthreads_and(ok);
}

/* Whether every element of rows [j0, j1) of the DN-wide rows at p (step `step` elements; DN a
 * multiple of 8, rows 16-byte aligned) is finite, this thread's share of them. */
template <typename T, int DN>
__device__ __forceinline__ bool attn_rows_finite(const T *p, i64 step, i64 j0, i64 j1) {
    bool ok = true;
    #pragma unroll 8
    for (i64 c = j0 * (DN / 8) + threadIdx.x; c < j1 * (DN / 8); c += blockDim.x) {
        const uint4 w = *reinterpret_cast<const uint4 *>(p + c / (DN / 8) * step + c % (DN / 8) * 8);
        ok &= attn_finite2<T>(w.x) & attn_finite2<T>(w.y) & attn_finite2<T>(w.z) & attn_finite2<T>(w.w);
    }
    return ok;
}

/* Whether the tile in shared memory changes nothing the block computes, so that it can be
 * skipped: every element of its mask tile is -inf (a causal mask's tiles above the diagonal)
 * and every element of its K and V tiles is finite (the block's Q too: `finite_q`). Then each
 * biased score is -inf whatever q.k is, each probability exactly 0, each 0 * v exactly 0, and
 * the softmax state is the same bits after the tile as before. A NaN or infinity in K or V (or
 * Q) under the mask makes a NaN there, which the tile computed carries as the reference does.
 * Block-wide votes (uniform: every thread takes the same branches). */
template <typename T, int D, int DV, int BN, int BM>
__device__ __forceinline__ bool attn_tile_hidden(const T *ks, const T *vs, const T *mk,
                                                 const attn_desc &a) {
    const int rows = a.ms[2] == 0 ? 1 : BM;
    if (!attn_block_all<T, true>(mk, rows, BN / 2, BN / 2)) return false;
    return attn_block_all<T, false>(ks, BN, D / 2, (D + ATTN_PAD) / 2) &&
           attn_block_all<T, false>(vs, BN, DV / 2, (DV + ATTN_PAD) / 2);
}

/* Q's A fragments of rows r0 and r1 = r0 + 8 (this thread's), zero past Sq. */
template <typename T, int D>
__device__ __forceinline__ void attn_load_q(const T *qb, i64 r0, i64 r1, const attn_desc &a,
                                            unsigned (&qa)[D / 16][4]) {
    const int t = threadIdx.x & 3;
    #pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const int d = kk * 16 + 2 * t;
        qa[kk][0] = attn_pair(qb + r0 * a.qs[2] + d, r0 < a.Sq);
        qa[kk][1] = attn_pair(qb + r1 * a.qs[2] + d, r1 < a.Sq);
        qa[kk][2] = attn_pair(qb + r0 * a.qs[2] + d + 8, r0 < a.Sq);
        qa[kk][3] = attn_pair(qb + r1 * a.qs[2] + d + 8, r1 < a.Sq);
    }
}

/* 2^x by the special function unit (ex2.approx.ftz: relative error about 2^-22, results below
 * 2^-126 flushed to 0; -inf gives 0, NaN NaN): the probabilities, rounded to T before they
 * multiply V, lose nothing to it. */
__device__ __forceinline__ float attn_exp2(float x) {
#ifdef AMPC_EMULATE_MMA
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
#endif
}

/* One warp's 16 query rows against NK keys in shared memory (NK a multiple of 16), the first at
 * sequence index jn: scores from K (ks: rows of D + PAD), scale, mask (MASK: mk, the mask tile at
 * the first key; mo0 and mo1: this thread's two rows in it, in elements; with `hide`, -inf added
 * past key lim0 for the first row and lim1 for the second: the implied causal mask), rounding to
 * T (keys past Sk -inf unless `full`), the online softmax update of the running max m, sum l and
 * output o, and P (rounded to T) times V from vs (rows of DV + PAD). */
template <typename T, int D, int DV, int NK, bool MASK>
__device__ __forceinline__ void attn_tile(const unsigned (&qa)[D / 16][4], const T *ks,
                                          const T *vs, const T *mk, int mo0, int mo1, i64 jn,
                                          bool full, bool hide, i64 lim0, i64 lim1,
                                          const attn_desc &a, float (&m)[2], float (&l)[2],
                                          float (&o)[DV / 8][4]) {
    const int lane = threadIdx.x & 31, t = lane & 3;
    const float log2e = 1.4426950408889634f;
    float s[NK / 8][4];
    #pragma unroll
    for (int n = 0; n < NK / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    /* K's B fragments for two 8-key tiles at once: one ldmatrix.x4 (lanes 8i..8i+7 address the
     * rows of its matrix i: keys +8 for i >= 2, columns +8 for odd i) */
    const T *kl = ks + ((lane >> 4) * 8 + (lane & 7)) * (D + ATTN_PAD) + (lane >> 3 & 1) * 8;
    #pragma unroll
    for (int n = 0; n < NK / 8; n += 2)
        #pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            unsigned kb4[4];
            ldsm_x4(kb4, kl + n * 8 * (D + ATTN_PAD) + kk * 16);
            mma_op<T>::run(s[n], qa[kk], kb4[0], kb4[1]);
            mma_op<T>::run(s[n + 1], qa[kk], kb4[2], kb4[3]);
        }
    /* scale, mask, round to T (a row's pair of keys at once); keys past Sk count as -inf; the
     * tile's row maxima. Limits relative to this thread's first key of the tile (2t), clamped
     * into [-1, NK]: keys from `kend` on are past Sk, past hl[w] hidden from row w. */
    const int kend = full ? NK : (int)(a.Sk - jn < NK ? a.Sk - jn : NK) - 2 * t;
    int hl[2] = {NK, NK};
    #pragma unroll
    for (int w = 0; w < 2; w++) {
        const i64 r = (w ? lim1 : lim0) - jn - 2 * t;
        if (hide) hl[w] = (int)(r < -1 ? -1 : r > NK ? NK : r);
    }
    float mt[2] = {-INFINITY, -INFINITY};
    #pragma unroll
    for (int n = 0; n < NK / 8; n++)
        #pragma unroll
        for (int w = 0; w < 2; w++) {
            float x[2], b[2];
            if (MASK) {
                const T *mp = mk + (w ? mo1 : mo0) + n * 8 + 2 * t;
                mma_op<T>::unpack(*reinterpret_cast<const unsigned *>(mp), b[0], b[1]);
            }
            #pragma unroll
            for (int e = 0; e < 2; e++) {
                x[e] = s[n][2 * w + e] * a.scale;
                if (MASK) x[e] += b[e];
                if (hide && n * 8 + e > hl[w]) x[e] += -INFINITY;
            }
            mma_op<T>::unpack(mma_op<T>::pack(x[0], x[1]), x[0], x[1]);
            #pragma unroll
            for (int e = 0; e < 2; e++) {
                if (n * 8 + e >= kend) x[e] = -INFINITY;
                s[n][2 * w + e] = x[e];
                mt[w] = fmaxf(mt[w], x[e]);
            }
        }
    #pragma unroll
    for (int w = 0; w < 2; w++) {
        mt[w] = fmaxf(mt[w], __shfl_xor_sync(0xffffffffu, mt[w], 1));
        mt[w] = fmaxf(mt[w], __shfl_xor_sync(0xffffffffu, mt[w], 2));
    }
    /* online softmax: what is accumulated is rescaled to the new maximum; until a finite score
     * shows up the base is 0, so every p and every correction is exp(-inf) = 0. p = 2^(s log2e -
     * base log2e), one fused multiply-add a score. */
    float base[2];
    #pragma unroll
    for (int w = 0; w < 2; w++) {
        const float mn = fmaxf(m[w], mt[w]);
        base[w] = mn == -INFINITY ? 0.0f : mn;
        const float corr = attn_exp2((m[w] - base[w]) * log2e);
        l[w] *= corr;
        #pragma unroll
        for (int n = 0; n < DV / 8; n++) o[n][2 * w] *= corr, o[n][2 * w + 1] *= corr;
        m[w] = mn;
        base[w] *= log2e;
    }
    #pragma unroll
    for (int n = 0; n < NK / 8; n++)
        for (int e = 0; e < 4; e++) {
            const float p = attn_exp2(fmaf(s[n][e], log2e, -base[e >> 1]));
            s[n][e] = p;
            l[e >> 1] += p;
        }
    /* P times V: score tiles 2c and 2c + 1 are the A fragment of keys 16c..; V's B fragments for
     * two 8-column tiles come from one ldmatrix.x4.trans (lanes 8i..8i+7 address the rows of its
     * tile i: keys +8 for odd i, columns +8 for i >= 2) */
    const int lr = (lane >> 3 & 1) * 8 + (lane & 7), lc = (lane >> 4) * 8;
    #pragma unroll
    for (int c = 0; c < NK / 16; c++) {
        const unsigned pa[4] = {mma_op<T>::pack(s[2 * c][0], s[2 * c][1]),
                                mma_op<T>::pack(s[2 * c][2], s[2 * c][3]),
                                mma_op<T>::pack(s[2 * c + 1][0], s[2 * c + 1][1]),
                                mma_op<T>::pack(s[2 * c + 1][2], s[2 * c + 1][3])};
        #pragma unroll
        for (int n = 0; n < DV / 8; n += 2) {
            unsigned vb4[4];
            ldsm_x4_trans(vb4, vs + (c * 16 + lr) * (DV + ATTN_PAD) + n * 8 + lc);
            mma_op<T>::run(o[n], pa, vb4[0], vb4[1]);
            mma_op<T>::run(o[n + 1], pa, vb4[2], vb4[3]);
        }
    }
}

/* Stores this thread's two rows of y: o / l, or attn_empty where the row had no probability. A
 * NaN score makes its p NaN, a +inf one its row's base +inf and p = exp(inf - inf) NaN: either
 * way the row's sum is NaN. l is the whole row's sum already. */
template <typename T, int DV, bool SAFE>
__device__ __forceinline__ void attn_store(T *yb, i64 r0, i64 r1, const attn_desc &a,
                                           const float (&m)[2], const float (&l)[2],
                                           const float (&o)[DV / 8][4]) {
    const int t = threadIdx.x & 3;
    #pragma unroll
    for (int w = 0; w < 2; w++) {
        const i64 r = w ? r1 : r0;
        if (r >= a.Sq) continue;
        const bool empty = l[w] != l[w] || m[w] == -INFINITY;
        const float inv = empty ? 0.0f : 1.0f / l[w];
        #pragma unroll
        for (int n = 0; n < DV / 8; n++) {
            const float lo = empty ? attn_empty<SAFE>() : o[n][2 * w] * inv;
            const float hi = empty ? attn_empty<SAFE>() : o[n][2 * w + 1] * inv;
            *reinterpret_cast<unsigned *>(yb + r * a.ys[2] + n * 8 + 2 * t) =
                mma_op<T>::pack(lo, hi);
        }
    }
}

/* The sum of l over the four threads of each row. */
__device__ __forceinline__ void attn_row_sums(float (&l)[2]) {
    #pragma unroll
    for (int w = 0; w < 2; w++) {
        l[w] += __shfl_xor_sync(0xffffffffu, l[w], 1);
        l[w] += __shfl_xor_sync(0xffffffffu, l[w], 2);
    }
}

#ifdef AMPC_EMULATE_MMA /* one block at a time: a static array is the block's memory */
#define AMPC_ATTN_SMEM(bytes) alignas(16) static unsigned char smem_raw[bytes]
#else
#define AMPC_ATTN_SMEM(bytes) extern __shared__ __align__(16) unsigned char smem_raw[]
#endif

/* The four warps' softmax states of the same 16 rows (attn_mma_split) meet in shared memory (smem,
 * free again): each row's max over the warps, then the sums and outputs rescaled to it (a warp
 * without a finite score adds nothing; a NaN sum stays NaN). Warp 0 receives the result in m, l
 * and o; the others return false. */
template <int DV>
__device__ __forceinline__ bool attn_combine(unsigned char *smem, float (&m)[2], float (&l)[2],
                                             float (&o)[DV / 8][4]) {
    enum { BM = ATTN_SPLIT_BM };
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    float *const st_m = reinterpret_cast<float *>(smem); /* [warp][row]: 4 x 16 */
    float *const st_l = st_m + 4 * BM, *const st_o = st_l + 4 * BM; /* st_o: [warp][row][DV] */
    if (t == 0)
        for (int w = 0; w < 2; w++) st_m[warp * BM + g + 8 * w] = m[w], st_l[warp * BM + g + 8 * w] = l[w];
    #pragma unroll
    for (int n = 0; n < DV / 8; n++)
        for (int e = 0; e < 4; e++)
            st_o[(warp * BM + g + (e >> 1) * 8) * DV + n * 8 + 2 * t + (e & 1)] = o[n][e];
    __syncthreads();
    if (warp != 0) return false;
    const float log2e = 1.4426950408889634f;
    #pragma unroll
    for (int w = 0; w < 2; w++) {
        const int row = g + 8 * w;
        float mx = -INFINITY;
        for (int p = 0; p < 4; p++) mx = fmaxf(mx, st_m[p * BM + row]);
        float sum = 0.0f, f[4];
        for (int p = 0; p < 4; p++) {
            const float mp = st_m[p * BM + row];
            f[p] = mp == -INFINITY ? 0.0f : exp2f((mp - mx) * log2e);
            sum += st_l[p * BM + row] * f[p];
        }
        m[w] = mx, l[w] = sum;
        #pragma unroll
        for (int n = 0; n < DV / 8; n++)
            for (int e = 0; e < 2; e++) {
                const int col = n * 8 + 2 * t + e;
                float acc = 0.0f;
                for (int p = 0; p < 4; p++) acc += st_o[(p * BM + row) * DV + col] * f[p];
                o[n][2 * w + e] = acc;
            }
    }
    return true;
}

/* attn_mma (SPLIT false) and attn_mma_split (SPLIT true), 32 WARPS threads (split: 128), two
 * stages of attn_stage<D, DV, BN, BM> elements of dynamic shared memory; per thread rows g and
 * g + 8 of its warp's 16 (g = lane / 4) and, in each 8-column tile, columns 2 * (lane % 4) and
 * the next. Key tiles of BN are double-buffered: the copies of tile j + 1 run while tile j is
 * computed.
 *   SPLIT false: grid (ceil(Sq / BM), H, B); BM = 16 WARPS query rows a block, 16 a warp; BN =
 *                64 keys, all of them for every warp.
 *   SPLIT true:  grid (ceil(Sq / 16), H, B), for grids too small to fill the GPU (batch 1: B * H *
 *                ceil(Sq / 64) blocks of 64 rows leave most SMs idle, and each warp walks every
 *                key); BM = 16 query rows a block, the same for the four warps; BN = 128 keys, a
 *                32-key part for each warp, with a softmax state of its own; at the end the four
 *                states meet (attn_combine). Four times the blocks, a quarter of the keys a warp. */
template <typename T, int D, int DV, bool SAFE, bool MVEC, bool SPLIT, bool CAUSAL, int WARPS>
__device__ __forceinline__ void attn_mma_run(const T *q, const T *k, const T *v, const T *mask,
                                             T *y, const attn_desc &a) {
    enum { BN = SPLIT ? (int)ATTN_SPLIT_BN : (int)ATTN_BN };
    enum { BM = SPLIT ? (int)ATTN_SPLIT_BM : (int)ATTN_WARP_ROWS * WARPS };
    enum { NK = SPLIT ? ATTN_SPLIT_WARP_KEYS : ATTN_BN }; /* a warp's keys of a tile */
    AMPC_ATTN_SMEM(2 * (BN * (D + ATTN_PAD) + BN * (DV + ATTN_PAD) + BM * BN) * sizeof(T));
    T *const smem = reinterpret_cast<T *>(smem_raw);
    const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2;
    const i64 b = blockIdx.z, h = blockIdx.y;
    /* causal: the blocks of the last rows, which see the most keys, start first */
    const i64 i0 = (i64)(CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BM;
    const int row = SPLIT ? g : warp * 16 + g; /* this thread's first row in the block */
    const i64 r0 = i0 + row, r1 = r0 + 8;
    const int m0 = a.ms[2] == 0 ? 0 : row, m1 = a.ms[2] == 0 ? 0 : row + 8; /* in the mask tile */
    const int part = SPLIT ? warp * NK : 0; /* this warp's first key in a tile */
    const T *kb = k + b * a.ks[0] + h / a.group * a.ks[1];
    const T *vb = v + b * a.vs[0] + h / a.group * a.vs[1];
    const T *mb = mask ? mask + b % a.mp * a.ms[0] + h * a.ms[1] : (const T *)0;
    const int stage = attn_stage<D, DV, BN, BM>(mb != 0), kv = BN * (D + ATTN_PAD);
    const int mo = kv + BN * (DV + ATTN_PAD); /* the mask tile, in a stage */
    const int tiles = (int)((a.Sk + BN - 1) / BN);
    const bool full = a.Sk % BN == 0;
    int end = tiles; /* the key tiles computed: causal, those up to the block's last row's */
    if (CAUSAL) {
        const i64 last = (i0 + BM < a.Sq ? i0 + BM : a.Sq) - 1 + a.causal;
        end = last < 0 ? 0 : last / BN + 1 < tiles ? (int)(last / BN + 1) : tiles;
    }
    attn_fetch<T, D, DV, MVEC, BN, BM>(kb, vb, mb, i0, 0, a, smem, smem + kv, smem + mo);
    cp_commit();
    unsigned qa[D / 16][4];
    attn_load_q<T, D>(q + b * a.qs[0] + h * a.qs[1], r0, r1, a, qa);
    bool finite_q = true; /* this thread's fragments, then the block's (with a mask) */
    #pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
        for (int e = 0; e < 4; e++) finite_q &= attn_finite2<T>(qa[kk][e]);
    /* causal: the keys past `end` change nothing when they, their values and the block's Q are
     * finite (each biased score -inf, each p exactly 0), nor those past a warp's last row for
     * that warp (attn_mma: from tile `skip` on, the first past warp 0's rows); else they are
     * computed, as the reference does, to carry the NaN they make. One vote, before the first
     * tile. */
    int skip = end;
    if (CAUSAL && !SPLIT) {
        const i64 w0 = i0 + ATTN_WARP_ROWS - 1 + a.causal;
        const int t0 = w0 < 0 ? 0 : w0 / BN + 1 < tiles ? (int)(w0 / BN + 1) : tiles;
        skip = t0 < end ? t0 : end;
    }
    if (CAUSAL && skip < tiles &&
        !__syncthreads_and(finite_q && attn_rows_finite<T, D>(kb, a.ks[2], (i64)skip * BN, a.Sk) &&
                           attn_rows_finite<T, DV>(vb, a.vs[2], (i64)skip * BN, a.Sk)))
        end = skip = tiles;
    finite_q = mb && __syncthreads_and(finite_q);
    float o[DV / 8][4];
    #pragma unroll
    for (int n = 0; n < DV / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    for (int jt = 0; jt < end; jt++) {
        const i64 j0 = (i64)jt * BN;
        T *const cur = smem + (jt & 1) * stage;
        if (jt + 1 < end) { /* the next tile's copies go into the other stage (free since the
                                 end of the previous tile) while this one is computed */
            T *const nx = smem + ((jt + 1) & 1) * stage;
            attn_fetch<T, D, DV, MVEC, BN, BM>(kb, vb, mb, i0, j0 + BN, a, nx, nx + kv, nx + mo);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        if (mb && !MVEC) attn_load_mask<T, BM, BN>(mb, i0, j0, a, cur + mo);
        __syncthreads(); /* this tile is in shared memory for every thread */
        /* (a split warp's part past Sk: all -inf, zero values, no change) */
        /* causal: the tiles the diagonal crosses hide keys past it */
        const bool hide = CAUSAL && j0 + BN - 1 > i0 + a.causal;
        const T *const kt = cur + part * (D + ATTN_PAD);
        const T *const vt = cur + kv + part * (DV + ATTN_PAD);
        if (CAUSAL && !SPLIT && jt >= skip && j0 > i0 + (warp + 1) * ATTN_WARP_ROWS - 1 + a.causal)
            ; /* every key of the tile past this warp's rows */
        else if (!mb)
            attn_tile<T, D, DV, NK, false>(qa, kt, vt, (const T *)0, 0, 0, j0 + part, full, hide,
                                           r0 + a.causal, r1 + a.causal, a, m, l, o);
        else if (!finite_q || !attn_tile_hidden<T, D, DV, BN, BM>(cur, cur + kv, cur + mo, a))
            attn_tile<T, D, DV, NK, true>(qa, kt, vt, cur + mo + part, m0 * BN, m1 * BN, j0 + part,
                                          full, hide, r0 + a.causal, r1 + a.causal, a, m, l, o);
        __syncthreads(); /* every thread is done with this stage before it is refilled */
    }
    if (end == 0) { /* the first tile's copies, not needed, landed before attn_combine reuses
                       the stage (every thread's: end is the block's) */
        cp_wait<0>();
        __syncthreads();
    }
    attn_row_sums(l);
    if (SPLIT && !attn_combine<DV>(smem_raw, m, l, o)) return;
    attn_store<T, DV, SAFE>(y + b * a.ys[0] + h * a.ys[1], r0, r1, a, m, l, o);
}

template <typename T, int D, int DV, bool SAFE, bool MVEC = false, bool CAUSAL = false,
          int WARPS = 4>
__device__ __forceinline__ void attn_mma(const T *q, const T *k, const T *v, const T *mask, T *y,
                                         const attn_desc &a) {
    attn_mma_run<T, D, DV, SAFE, MVEC, false, CAUSAL, WARPS>(q, k, v, mask, y, a);
}

template <typename T, int D, int DV, bool SAFE, bool MVEC = false, bool CAUSAL = false>
__device__ __forceinline__ void attn_mma_split(const T *q, const T *k, const T *v, const T *mask,
                                               T *y, const attn_desc &a) {
    attn_mma_run<T, D, DV, SAFE, MVEC, true, CAUSAL, 4>(q, k, v, mask, y, a);
}

} // namespace ampc
