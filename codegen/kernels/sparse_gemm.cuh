/*
 * sparse_gemm.cuh — y = act(alpha * x @ W + beta * c + bias) on the sparse tensor cores, for a
 * weight W [K, N] that is 2:4 along K (the sparsity pass's mark), f16 or bf16, f32 accumulation.
 * The lowering is codegen/sparse_gemm.c; the weight arrives compressed at compile time by
 * codegen/sparse24.c; the index arithmetic shared with the CPU test is sparse_layout.cuh.
 *
 * The operands. mma.sp takes its sparse operand as A, the M x K row operand. The weight is
 * sparse along K, so A is W^T: N rows (output features) of K, compressed to N x K/2 values plus
 * metadata. The activation x [M, K] row-major is then B, K x M "col" (column j of B is row j of
 * x, contiguous along K): it is read as it lies, no transposition anywhere. Each instruction
 * computes a 16 (features) x 8 (activation rows) piece of y^T = W^T x^T; the epilogue stages the
 * block's tile through shared memory so that y is written row-major, coalesced, with the bias,
 * the residual c, the scale and the activation applied on the way.
 *
 * The block: BF features x BT activation rows, BK of K a stage (BK/2 compressed values), warps
 * WF x WT, each warp (BF/WF) x (BT/WT) as (BF/WF/16) x (BT/WT/8) instructions a K step of 32.
 * Stages of shared memory are filled with cp.async (16 bytes a copy, zero-fill past M and K)
 * STAGES - 1 tiles ahead of the tensor cores; fragments come out of shared memory by ldmatrix.x4
 * (A and B) and plain loads (metadata). Requirements, checked by the lowering: the compressed
 * weight is padded to whole blocks (rows to BF, K to BK; padding selects zeros), K and the row
 * pitches of x, c and y are multiples of 8, the pointers 16-byte aligned.
 */
#pragma once

#include "ampc/common.cuh"
#include "ampc/mma.cuh"
#include "ampc/sparse_layout.cuh"

namespace ampc {
namespace sp24 {

/* Epilogue activations (ampc_rt_epilogue's, without the bias which is a flag of its own). */
enum { ACT_NONE = 0, ACT_RELU = 1, ACT_GELU = 2 };

/* The ordered-metadata form where the toolkit knows it (PTX 8.5): our nibbles are ordered
 * (lower index first), which both forms accept, and newer GPUs run the plain .sp form slower. */
#if defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 5))
#define AMPC_MMA_SP "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32."
#else
#define AMPC_MMA_SP "mma.sp.sync.aligned.m16n8k32.row.col.f32."
#endif

/* d += A(sparse: a, e) * B(b), sparsity selector 0. */
template <typename T> struct mma_sp;
template <> struct mma_sp<f16> {
    __device__ __forceinline__ static void run(float d[4], const unsigned a[4],
                                               const unsigned b[4], unsigned e) {
        asm volatile(AMPC_MMA_SP "f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                       "r"(b[2]), "r"(b[3]), "r"(e));
    }
};
template <> struct mma_sp<bf16> {
    __device__ __forceinline__ static void run(float d[4], const unsigned a[4],
                                               const unsigned b[4], unsigned e) {
        asm volatile(AMPC_MMA_SP "bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                       "r"(b[2]), "r"(b[3]), "r"(e));
    }
};

/* The problem: y [M, N] (pitch ldy) = act(alpha * x [M, K] (pitch ldx) @ W + beta * c + bias).
 * wv: the compressed W^T, Np x Kp/2 (Np, Kp: N, K padded to BF, BK); meta: its metadata,
 * (Np/16) x (Kp/32) tiles of AMPC_SPL_META_WORDS words. c and bias may be null. */
template <typename T> struct sp_args {
    const T *wv;
    const unsigned *meta;
    const T *x;
    const T *c;
    const T *bias;
    T *y;
    int M, N, K, Kp;
    long long ldx, ldc, ldy;
    float alpha, beta;
};

/* Bytes of dynamic shared memory a configuration needs: the stages, or the epilogue's f32 tile
 * when that is larger (it reuses the same memory). */
template <int BF, int BT, int BK, int STAGES> struct sp_smem {
    static constexpr int a_bytes = BF * (BK / 2 + 8) * 2;
    static constexpr int e_bytes = (BF / 16) * (BK / 32) * AMPC_SPL_META_WORDS * 4;
    static constexpr int x_bytes = BT * (BK + 8) * 2;
    static constexpr int stage = a_bytes + e_bytes + x_bytes;
    static constexpr int out = BT * (BF + 4) * 4;
    static constexpr int bytes = STAGES * stage > out ? STAGES * stage : out;
};

/* One stage: the block's compressed weight rows, their metadata and its activation rows for
 * K tile kt, by cp.async. */
template <typename T, int BF, int BT, int BK, int THREADS>
__device__ __forceinline__ void sp_load_stage(const sp_args<T> &p, char *st, int f0, int t0,
                                              int kt) {
    typedef sp_smem<BF, BT, BK, 1> S;
    T *sa = reinterpret_cast<T *>(st);
    unsigned *se = reinterpret_cast<unsigned *>(st + S::a_bytes);
    T *sx = reinterpret_cast<T *>(st + S::a_bytes + S::e_bytes);
    const int tid = threadIdx.x;
    constexpr int a_chunks = BK / 2 / 8; /* 16-byte copies a weight row */
    for (int i = tid; i < BF * a_chunks; i += THREADS) {
        int r = i / a_chunks, ch = i % a_chunks;
        const T *src = p.wv + (long long)(f0 + r) * (p.Kp / 2) + kt * (BK / 2) + ch * 8;
        cp16(sa + r * ampc_spl_a_pitch(BK) + ch * 8, src, true);
    }
    constexpr int e_tiles = BK / 32, e_chunks = e_tiles * AMPC_SPL_META_WORDS / 4;
    for (int i = tid; i < (BF / 16) * e_chunks; i += THREADS) {
        int rt = i / e_chunks, ch = i % e_chunks;
        const unsigned *src = p.meta + ((long long)(f0 / 16 + rt) * (p.Kp / 32) + kt * e_tiles) *
                                           AMPC_SPL_META_WORDS + ch * 4;
        cp16(se + rt * e_tiles * AMPC_SPL_META_WORDS + ch * 4, src, true);
    }
    constexpr int x_chunks = BK / 8;
    for (int i = tid; i < BT * x_chunks; i += THREADS) {
        int r = i / x_chunks, ch = i % x_chunks;
        int m = t0 + r, k = kt * BK + ch * 8;
        bool in = m < p.M && k < p.K; /* K % 8 == 0: a copy is wholly in or out */
        const T *src = in ? p.x + (long long)m * p.ldx + k : p.x;
        cp16(sx + r * ampc_spl_x_pitch(BK) + ch * 8, src, in);
    }
}

__device__ __forceinline__ float sp_act(float v, int act) {
    if (act == ACT_RELU) return v > 0.0f ? v : 0.0f;
    if (act == ACT_GELU) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    return v;
}

/* The whole GEMM; a generated extern "C" kernel calls it with its constants. Grid: x over
 * feature blocks (Np / BF), y over activation-row blocks (ceil(M / BT)). */
template <typename T, int BF, int BT, int BK, int WF, int WT, int STAGES, int ACT>
__device__ __forceinline__ void sparse_gemm(const sp_args<T> &p) {
    constexpr int THREADS = WF * WT * 32;
    constexpr int FW = BF / WF, TW = BT / WT;       /* a warp's features and activation rows */
    constexpr int MF = FW / AMPC_SPL_MMA_M, MT = TW / AMPC_SPL_MMA_N;
    typedef sp_smem<BF, BT, BK, STAGES> S;
    static_assert(BK % 32 == 0 && FW % 16 == 0 && TW % 8 == 0, "sparse_gemm: tile shape");
    extern __shared__ __align__(16) char sp_smem_raw[];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wf = warp % WF, wt = warp / WF;
    const int f0 = blockIdx.x * BF, t0 = blockIdx.y * BT;
    const int kts = p.Kp / BK;

    float acc[MF][MT][4];
#pragma unroll
    for (int i = 0; i < MF; i++)
#pragma unroll
        for (int j = 0; j < MT; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < kts) sp_load_stage<T, BF, BT, BK, THREADS>(p, sp_smem_raw + s * S::stage, f0, t0, s);
        cp_commit();
    }
    for (int kt = 0; kt < kts; kt++) {
        cp_wait<STAGES - 2>();
        __syncthreads(); /* stage kt landed for every thread; stage kt-1 is free */
        int nk = kt + STAGES - 1;
        if (nk < kts)
            sp_load_stage<T, BF, BT, BK, THREADS>(p, sp_smem_raw + (nk % STAGES) * S::stage, f0,
                                                  t0, nk);
        cp_commit();

        const char *st = sp_smem_raw + (kt % STAGES) * S::stage;
        const T *sa = reinterpret_cast<const T *>(st);
        const unsigned *se = reinterpret_cast<const unsigned *>(st + S::a_bytes);
        const T *sx = reinterpret_cast<const T *>(st + S::a_bytes + S::e_bytes);
#pragma unroll
        for (int ks = 0; ks < BK / 32; ks++) {
            unsigned b[MT][4];
#pragma unroll
            for (int j = 0; j < MT; j++) {
                int r = wt * TW + j * 8 + ampc_spl_b_ldm_row(lane);
                ldsm_x4(b[j], sx + r * ampc_spl_x_pitch(BK) + ks * 32 + ampc_spl_b_ldm_col(lane));
            }
#pragma unroll
            for (int i = 0; i < MF; i++) {
                int rt = (wf * FW + i * 16) / 16; /* the 16-row tile in the block */
                unsigned a[4];
                int r = rt * 16 + ampc_spl_a_ldm_row(lane);
                ldsm_x4(a, sa + r * ampc_spl_a_pitch(BK) + ks * 16 + ampc_spl_a_ldm_col(lane));
                unsigned e = se[(rt * (BK / 32) + ks) * AMPC_SPL_META_WORDS +
                                ampc_spl_meta_lane_word(lane)];
#pragma unroll
                for (int j = 0; j < MT; j++) mma_sp<T>::run(acc[i][j], a, b[j], e);
            }
        }
    }
    cp_wait<0>();
    __syncthreads(); /* the stages are free: the epilogue tile takes their place */

    /* acc -> out[t][f] (f32, pitch BF + 4), so y's rows come out contiguous */
    float *out = reinterpret_cast<float *>(sp_smem_raw);
    const int g = lane / 4, tq = lane % 4;
#pragma unroll
    for (int i = 0; i < MF; i++)
#pragma unroll
        for (int j = 0; j < MT; j++) {
            int f = wf * FW + i * 16 + g, t = wt * TW + j * 8 + 2 * tq;
            out[t * (BF + 4) + f] = acc[i][j][0];
            out[(t + 1) * (BF + 4) + f] = acc[i][j][1];
            out[t * (BF + 4) + f + 8] = acc[i][j][2];
            out[(t + 1) * (BF + 4) + f + 8] = acc[i][j][3];
        }
    __syncthreads();
    /* two features a thread and step: N is even, so a pair is wholly in or out */
    for (int i = threadIdx.x; i < BT * BF / 2; i += THREADS) {
        int t = i / (BF / 2), f = (i % (BF / 2)) * 2;
        int m = t0 + t, n = f0 + f;
        if (m >= p.M || n >= p.N) continue;
        float v[2];
#pragma unroll
        for (int q = 0; q < 2; q++) {
            float s = p.alpha * out[t * (BF + 4) + f + q];
            if (p.c) s += p.beta * to_f32(p.c[(long long)m * p.ldc + n + q]);
            if (p.bias) s += to_f32(p.bias[n + q]);
            v[q] = sp_act(s, ACT);
        }
        st_vec<2>(p.y + (long long)m * p.ldy + n, v);
    }
}

} // namespace sp24
} // namespace ampc
