/*
 * gemm.cuh — y = act(alpha * x @ W + beta * c + bias) on the tensor cores, f16 or bf16 operands
 * and output, f32 accumulation: ampc's own dense GEMM (lowering: codegen/dense_gemm.c). It is
 * the GEMM of a step whose epilogue cuBLASLt cannot run exactly (the erf GELU: cuBLASLt's GELU
 * epilogue is the tanh approximation), and elsewhere one more candidate the runtime times
 * against cuBLASLt at load (runtime/prov_cublaslt.c).
 *
 * The operands: x [M, K] row-major (pitch ldx) is mma's A as it lies; W is either [K, N]
 * row-major (pitch ldw), whose B fragments come from shared memory by ldmatrix.trans, or, with
 * WT, W^T [N, K] row-major (a Gemm's transB weight), by plain ldmatrix: no copy of the weight
 * in either case. c [M, N] (pitch ldc) and bias [N] may be null.
 *
 * The block: BM rows x BN columns of y, warps WM x WN, each warp (BM/WM) x (BN/WN) as
 * (BM/WM/16) x (BN/WN/8) mma.sync m16n8k16 tiles a K step of 16. K advances BK a stage; STAGES
 * stages of shared memory (rows padded by 8 elements: ldmatrix's eight row addresses then fall
 * in distinct banks) are filled by cp.async STAGES - 1 tiles ahead of the tensor cores, with
 * zeros past M, N and K. The epilogue works on the accumulators in registers: each thread owns
 * pairs of neighbouring columns, so c, bias and y move as 32-bit pairs.
 *
 * Split K (SPLIT > 1, sm_90 and newer): a product of few rows and a long K leaves most of the
 * GPU idle, and each block then walks all of K one latency-bound stage after another. With
 * SPLIT, a thread-block cluster of SPLIT blocks (grid z, the kernel's __cluster_dims__) shares
 * each tile: block z accumulates its share of K's tiles, writes its f32 partial tile to its own
 * shared memory, and after a cluster barrier each block sums 1/SPLIT of the tile over every
 * block's shared memory (distributed shared memory), runs the epilogue and stores. No global
 * workspace, nothing to zero between runs. Compiled for an older GPU (or emulated on the CPU),
 * block z = 0 walks all of K and the others return: the same result, without the speed.
 *
 * Requirements, checked by the lowering: K and N multiples of 8, the pitches multiples of 8
 * (ldc, ldy of 2), x and W 16-byte aligned, c and y 4-byte aligned.
 */
#pragma once

#include "ampc/common.cuh"
#include "ampc/mma.cuh"

namespace ampc {
namespace gemm {

/* Epilogue activations (ampc_rt_epilogue's, without the bias which is an argument). */
enum { ACT_NONE = 0, ACT_RELU = 1, ACT_GELU = 2 };

template <typename T> struct args {
    const T *x;
    const T *w;
    const T *c;
    const T *bias;
    T *y;
    int M, N, K;
    long long ldx, ldw, ldc, ldy;
    float alpha, beta;
};

/* Shared memory of a configuration, in elements a stage and bytes in all. */
template <int BM, int BN, int BK, int STAGES, bool WT> struct smem {
    static constexpr int PAD = 8;
    static constexpr int x_pitch = BK + PAD;
    static constexpr int w_pitch = WT ? BK + PAD : BN + PAD;
    static constexpr int x_elems = BM * x_pitch;
    static constexpr int w_elems = WT ? BN * w_pitch : BK * w_pitch;
    static constexpr int stage = x_elems + w_elems;
    static constexpr int bytes = STAGES * stage * 2;
};

/* Split K's f32 partial tile, BM rows of BN (+ 8: the fragments' rows fall in distinct banks),
 * in the pipeline's shared memory once the main loop is done; a kernel's shared memory is the
 * larger of the two. */
template <int BM, int BN> struct partial {
    static constexpr int pitch = BN + 8;
    static constexpr int bytes = BM * pitch * 4;
};

/* The cluster's share of the work: SPLIT > 1 splits K only where clusters exist. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define AMPC_GEMM_CLUSTERS 1
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
/* Two floats at p's place in the shared memory of block `rank` of the cluster. */
__device__ __forceinline__ float2 ld_cluster_f2(const float *p, unsigned rank) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
    float2 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];"
                 : "=f"(v.x), "=f"(v.y) : "r"(r) : "memory");
    return v;
}
#else
#define AMPC_GEMM_CLUSTERS 0
#endif

/* One stage: x's rows m0.. and W's part for columns n0.. at K tile kt, by cp.async. */
template <typename T, int BM, int BN, int BK, bool WT, int THREADS>
__device__ __forceinline__ void load_stage(const args<T> &p, T *st, int m0, int n0, int kt) {
    typedef smem<BM, BN, BK, 1, WT> S;
    T *sx = st, *sw = st + S::x_elems;
    const int tid = threadIdx.x, k0 = kt * BK;
    constexpr int xc = BK / 8; /* 16-byte copies a row of x's tile */
    for (int i = tid; i < BM * xc; i += THREADS) {
        const int r = i / xc, ch = i % xc, m = m0 + r, k = k0 + ch * 8;
        const bool in = m < p.M && k < p.K; /* K % 8 == 0: a copy is wholly in or out */
        cp16(sx + r * S::x_pitch + ch * 8, in ? p.x + (long long)m * p.ldx + k : p.x, in);
    }
    if (WT) { /* BN rows of W^T, BK each */
        for (int i = tid; i < BN * xc; i += THREADS) {
            const int r = i / xc, ch = i % xc, n = n0 + r, k = k0 + ch * 8;
            const bool in = n < p.N && k < p.K;
            cp16(sw + r * S::w_pitch + ch * 8, in ? p.w + (long long)n * p.ldw + k : p.w, in);
        }
    } else { /* BK rows of W, BN each */
        constexpr int wc = BN / 8;
        for (int i = tid; i < BK * wc; i += THREADS) {
            const int r = i / wc, ch = i % wc, k = k0 + r, n = n0 + ch * 8;
            const bool in = k < p.K && n < p.N; /* N % 8 == 0 */
            cp16(sw + r * S::w_pitch + ch * 8, in ? p.w + (long long)k * p.ldw + n : p.w, in);
        }
    }
}

__device__ __forceinline__ float act(float v, int a) {
    if (a == ACT_RELU) return v > 0.0f ? v : 0.0f;
    if (a == ACT_GELU) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    return v;
}

/* The epilogue of two neighbouring columns (n, n + 1) of row m, then the store. */
template <typename T, int ACT>
__device__ __forceinline__ void store_pair(const args<T> &p, int m, int n, float v0, float v1) {
    if (m >= p.M || n >= p.N) return; /* N is even: the pair is wholly in or out */
    float v[2] = {p.alpha * v0, p.alpha * v1};
#pragma unroll
    for (int q = 0; q < 2; q++) {
        if (p.c) v[q] += p.beta * to_f32(p.c[(long long)m * p.ldc + n + q]);
        if (p.bias) v[q] += to_f32(p.bias[n + q]);
        v[q] = act(v[q], ACT);
    }
    *reinterpret_cast<unsigned *>(p.y + (long long)m * p.ldy + n) = mma_op<T>::pack(v[0], v[1]);
}

/* Split K's sum (clusters only): once every block of the cluster has written its partial tile
 * (part, P's layout), block `rank` sums the tile's column pairs rank * THREADS.. of every
 * SPLIT * THREADS over the cluster's shared memory and stores them with the epilogue. */
template <typename T, int BM, int BN, int THREADS, int SPLIT, int ACT>
__device__ __forceinline__ void sum_split(const args<T> &p, const float *part, int m0, int n0) {
#if AMPC_GEMM_CLUSTERS
    typedef partial<BM, BN> P;
    constexpr int PAIRS = BM * BN / 2;
    cluster_sync(); /* every block's partial tile is written */
    const unsigned rank = cluster_rank();
    for (int q = (int)rank * THREADS + (int)threadIdx.x; q < PAIRS; q += SPLIT * THREADS) {
        const int r = q / (BN / 2), c = (q % (BN / 2)) * 2;
        float2 v = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int b = 0; b < SPLIT; b++) {
            const float2 u = ld_cluster_f2(part + r * P::pitch + c, (unsigned)b);
            v.x += u.x, v.y += u.y;
        }
        store_pair<T, ACT>(p, m0 + r, n0 + c, v.x, v.y);
    }
    cluster_sync(); /* no block leaves while another reads its shared memory */
#endif
}

/* The whole GEMM; a generated extern "C" kernel calls it with its constants. Grid: x over
 * column blocks (ceil(N / BN)), y over row blocks (ceil(M / BM)), z SPLIT (clusters of
 * 1 x 1 x SPLIT blocks); WM * WN * 32 threads; the larger of smem<...>::bytes and, with SPLIT,
 * partial<BM, BN>::bytes of dynamic shared memory. */
template <typename T, int BM, int BN, int BK, int WM, int WN, int STAGES, bool WT, int ACT,
          int SPLIT = 1>
__device__ __forceinline__ void dense_gemm(const args<T> &p) {
    constexpr int THREADS = WM * WN * 32;
    constexpr int TM = BM / WM, TN = BN / WN; /* a warp's rows and columns */
    constexpr int MI = TM / 16, NI = TN / 8;
    typedef smem<BM, BN, BK, STAGES, WT> S;
    static_assert(TM % 16 == 0 && TN % 16 == 0 && BK % 16 == 0, "dense_gemm: tile shape");
#ifdef AMPC_EMULATE_MMA
    alignas(16) static T raw[STAGES * S::stage];
#else
    extern __shared__ __align__(16) unsigned char gemm_smem_raw[];
    T *raw = reinterpret_cast<T *>(gemm_smem_raw);
#endif
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / WN, wn = warp % WN;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    /* K's tiles [kt0, kt0 + kts): all of them, or block z's share of a split */
    int kt0 = 0, kts = (p.K + BK - 1) / BK;
    if (SPLIT > 1) {
        if (!AMPC_GEMM_CLUSTERS && blockIdx.z > 0) return;
        if (AMPC_GEMM_CLUSTERS) {
            const int share = (kts + SPLIT - 1) / SPLIT;
            kt0 = (int)blockIdx.z * share;
            kts = kt0 >= kts ? 0 : (kts - kt0 < share ? kts - kt0 : share);
        }
    }

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < kts) load_stage<T, BM, BN, BK, WT, THREADS>(p, raw + s * S::stage, m0, n0, kt0 + s);
        cp_commit();
    }
    for (int kt = 0; kt < kts; kt++) {
        cp_wait<STAGES - 2>();
        __syncthreads(); /* stage kt landed for every thread; stage kt - 1 is free */
        const int nk = kt + STAGES - 1;
        if (nk < kts)
            load_stage<T, BM, BN, BK, WT, THREADS>(p, raw + (nk % STAGES) * S::stage, m0, n0,
                                                   kt0 + nk);
        cp_commit();

        const T *sx = raw + (kt % STAGES) * S::stage, *sw = sx + S::x_elems;
#pragma unroll
        for (int ks = 0; ks < BK / 16; ks++) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; i++)
                ldsm_x4(a[i], sx + (wm * TM + i * 16 + lane % 16) * S::x_pitch + ks * 16 +
                                  (lane / 16) * 8);
#pragma unroll
            for (int j = 0; j < NI; j += 2) {
                unsigned r[4];
                if (WT)
                    ldsm_x4(r, sw + (wn * TN + j * 8 + lane % 8 + (lane / 16) * 8) * S::w_pitch +
                                   ks * 16 + ((lane / 8) % 2) * 8);
                else
                    ldsm_x4_trans(r, sw + (ks * 16 + lane % 16) * S::w_pitch + wn * TN + j * 8 +
                                         (lane / 16) * 8);
                b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
                for (int j = 0; j < NI; j++) mma_op<T>::run(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_wait<0>();

    /* the accumulators to y, or with a split to this block's partial tile, then the sum */
    constexpr bool split = SPLIT > 1 && AMPC_GEMM_CLUSTERS;
    typedef partial<BM, BN> P;
    float *part = reinterpret_cast<float *>(raw);
    if (split) __syncthreads(); /* every warp is done with the stages: they become the tile */
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++) {
            const int r = wm * TM + i * 16 + g, c = wn * TN + j * 8 + 2 * t;
            if (split) {
                *reinterpret_cast<float2 *>(part + r * P::pitch + c) =
                    make_float2(acc[i][j][0], acc[i][j][1]);
                *reinterpret_cast<float2 *>(part + (r + 8) * P::pitch + c) =
                    make_float2(acc[i][j][2], acc[i][j][3]);
            } else {
                store_pair<T, ACT>(p, m0 + r, n0 + c, acc[i][j][0], acc[i][j][1]);
                store_pair<T, ACT>(p, m0 + r + 8, n0 + c, acc[i][j][2], acc[i][j][3]);
            }
        }
    if (split) sum_split<T, BM, BN, THREADS, SPLIT, ACT>(p, part, m0, n0);
}

} // namespace gemm
} // namespace ampc
