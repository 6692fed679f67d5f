/*
 * attention_bench.cu — times ampc.FusedAttention's kernels (codegen/kernels/attention.cuh) at one
 * shape, chosen at compile time as the generated code chooses it (the sizes and steps constants):
 *
 *   -DAB_B=16 -DAB_H=16 -DAB_HKV=4 -DAB_SQ=256 -DAB_SK=256 -DAB_D=64 -DAB_MASK=1
 *
 * AB_MASK: 0 none, 1 causal (a [1, 1, Sq, Sk] tensor of 0 and -inf, as exporters write it), 2
 * padding ([B, 1, 1, Sk]: the last quarter of each entry's keys -inf), 3 an additive bias of
 * [H, Sq, Sk] (relative positions), 4 the causal mask implied (the CAUSAL kernels, no tensor:
 * what fuse-attention makes of mask 1; the reference still reads the tensor). Q, K, V and Y are [B, heads, S, D] contiguous, f16, values
 * uniform in [-1, 1). The kernel the lowering picks (attn_mma, or attn_mma_split for small grids:
 * codegen/lower_attention.c), then attn_mma at its other block widths (4 and 8 warps), each runs
 * against attn_rows, the generic kernel, as a reference (max abs difference printed), then 20 warm-up and 5 rounds of 100 back-to-back launches timed with CUDA
 * events; the median round's time a call is printed in microseconds with the FLOP rate (a causal
 * mask counts half the products). Built and run by bench/kernels/attention-bench.sh on a GPU
 * machine, beside PyTorch's scaled_dot_product_attention at the same shapes.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ampc/attention.cuh"

#define CHECK(x)                                                                                \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

typedef __half T;
enum { B = AB_B, H = AB_H, HKV = AB_HKV, SQ = AB_SQ, SK = AB_SK, D = AB_D, MASK = AB_MASK };

/* The mask's steps and batch entries, as the lowering gives them for each kind. */
#define MS_CAUSAL {0LL, 0LL, (long long)SK, 1LL}
#define MS_PAD {(long long)SK, 0LL, 0LL, 1LL}
#define MS_BIAS {0LL, (long long)SQ * SK, (long long)SK, 1LL}
#define MS_NONE {0LL, 0LL, 0LL, 0LL}
#if AB_MASK == 1 || AB_MASK == 4
#define MS MS_CAUSAL
#elif AB_MASK == 2
#define MS MS_PAD
#elif AB_MASK == 3
#define MS MS_BIAS
#else
#define MS MS_NONE
#endif

#define DESC                                                                                    \
    const ampc::attn_desc a = {B, H, SQ, SK, H / HKV, B,                                        \
                               {(long long)H * SQ * D, (long long)SQ * D, D, 1},                \
                               {(long long)HKV * SK * D, (long long)SK * D, D, 1},              \
                               {(long long)HKV * SK * D, (long long)SK * D, D, 1},              \
                               MS,                                                              \
                               {(long long)H * SQ * D, (long long)SQ * D, D, 1},                \
                               0.125f, (long long)(SK - SQ)}

/* The causal mask implied: the kernels under test read no mask. Whether the mask loads in
 * 16-byte chunks (lower_attention.c mask_vector). */
static const bool IMPLIED = MASK == 4;
static const bool MVEC = MASK != 0 && !IMPLIED && SK % 8 == 0;

/* attn_mma with W warps a block (128 / W: at most 128 registers a thread at head size 64) */
template <int W>
__global__ void __launch_bounds__(32 * W, 16 / W) k_mma(const T *q, const T *k, const T *v, const T *m, T *y) {
    DESC;
#ifdef AB_ONE_WIDTH /* kernels from before the block width was a template parameter */
    ampc::attn_mma<T, D, D, false, MVEC, IMPLIED>(q, k, v, IMPLIED ? nullptr : m, y, a);
#else
    ampc::attn_mma<T, D, D, false, MVEC, IMPLIED, W>(q, k, v, IMPLIED ? nullptr : m, y, a);
#endif
}

__global__ void __launch_bounds__(128) k_split(const T *q, const T *k, const T *v, const T *m, T *y) {
    DESC;
    ampc::attn_mma_split<T, D, D, false, MVEC, IMPLIED>(q, k, v, IMPLIED ? nullptr : m, y, a);
}

__global__ void __launch_bounds__(128) k_rows(const T *q, const T *k, const T *v, const T *m, T *y) {
    DESC;
    ampc::attn_rows<T, D, D, false>(q, k, v, m, y, a);
}

static std::vector<T> random_half(size_t n, unsigned seed) {
    std::vector<T> x(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = __float2half((float)(seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f);
    }
    return x;
}

static std::vector<T> make_mask(size_t *n) {
    const float ninf = -INFINITY;
    std::vector<T> m;
    if (MASK == 1 || MASK == 4) {
        m.resize((size_t)SQ * SK);
        for (int i = 0; i < SQ; i++)
            for (int j = 0; j < SK; j++) m[(size_t)i * SK + j] = __float2half(j > i + (SK - SQ) ? ninf : 0.0f);
    } else if (MASK == 2) {
        m.resize((size_t)B * SK);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < SK; j++) m[(size_t)b * SK + j] = __float2half(j >= SK - SK / 4 ? ninf : 0.0f);
    } else if (MASK == 3) {
        m = random_half((size_t)H * SQ * SK, 99);
    } else {
        m.resize(8);
    }
    *n = m.size();
    return m;
}

static T *upload(const std::vector<T> &x) {
    T *d;
    CHECK(cudaMalloc(&d, x.size() * sizeof(T)));
    CHECK(cudaMemcpy(d, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

typedef void (*kernel_fn)(const T *, const T *, const T *, const T *, T *);

/* Runs kern (blocks of `rows` query rows, `threads` threads; key tiles of `keys`, mask tiles of
 * `mrows` rows) against the reference output hr, then times it; prints one line; 1 on a
 * mismatch. */
static int run(kernel_fn kern, int rows, int keys, int mrows, const char *label, const T *q,
               const T *k, const T *v, const T *m, T *y, const std::vector<T> &hr) {
    const int threads = rows == 16 ? 128 : rows * 2;
    const size_t nq = hr.size();
    const dim3 grid((SQ + rows - 1) / rows, H, B), block(threads);
    const size_t smem = 2 * ((size_t)keys * (D + 8) * 2 + (MASK && !IMPLIED ? mrows * keys : 0)) * sizeof(T);
    CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CHECK(cudaMemset(y, 0, nq * sizeof(T)));
    kern<<<grid, block, smem>>>(q, k, v, m, y);
    CHECK(cudaDeviceSynchronize());
    std::vector<T> hy(nq);
    CHECK(cudaMemcpy(hy.data(), y, nq * sizeof(T), cudaMemcpyDeviceToHost));
    double err = 0, mag = 0;
    for (size_t i = 0; i < nq; i++) {
        const double a = __half2float(hy[i]), r = __half2float(hr[i]);
        err = std::max(err, std::isnan(a) != std::isnan(r) ? INFINITY : std::fabs(a - r));
        mag = std::max(mag, std::fabs(r));
    }
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < 20; i++) kern<<<grid, block, smem>>>(q, k, v, m, y);
    std::vector<float> us;
    for (int r = 0; r < 5; r++) {
        CHECK(cudaEventRecord(e0));
        for (int i = 0; i < 100; i++) kern<<<grid, block, smem>>>(q, k, v, m, y);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        us.push_back(ms * 10.0f);
    }
    std::sort(us.begin(), us.end());
    const double flop = 4.0 * B * H * SQ * SK * D * (MASK == 1 || IMPLIED ? 0.5 : 1.0);
    printf("B=%d H=%d Hkv=%d Sq=%d Sk=%d D=%d mask=%s  %-16s %8.2f us %7.1f TFLOP/s  max err %.3g of %.3g\n",
           B, H, HKV, SQ, SK, D,
           MASK == 1 ? "causal" : MASK == 2 ? "padding" : MASK == 3 ? "bias" : IMPLIED ? "implied" : "none",
           label, us[2], flop / (us[2] * 1e-6) / 1e12, err, mag);
    return err <= 0.02 * mag + 1e-3 ? 0 : 1;
}

int main() {
    const size_t nq = (size_t)B * H * SQ * D, nk = (size_t)B * HKV * SK * D;
    size_t nm;
    T *q = upload(random_half(nq, 1)), *k = upload(random_half(nk, 2)), *v = upload(random_half(nk, 3));
    T *m = MASK ? upload(make_mask(&nm)) : (T *)0;
    T *y, *yref;
    CHECK(cudaMalloc(&y, nq * sizeof(T)));
    CHECK(cudaMalloc(&yref, nq * sizeof(T)));
    k_rows<<<(unsigned)std::min<long long>(((long long)B * H * SQ + 3) / 4, 65535), 128>>>(q, k, v, m, yref);
    CHECK(cudaDeviceSynchronize());
    std::vector<T> hr(nq);
    CHECK(cudaMemcpy(hr.data(), yref, nq * sizeof(T), cudaMemcpyDeviceToHost));
    /* the lowering's choice first (attn_mma_split below 32 blocks of 64 rows), then the others */
    const bool split = (long long)B * H * ((SQ + 63) / 64) < 32;
    int bad = 0;
    if (split) bad |= run(k_split, 16, 128, 16, "attn_mma_split", q, k, v, m, y, hr);
    bad |= run(k_mma<4>, 64, 64, 64, split ? "(attn_mma)" : "attn_mma", q, k, v, m, y, hr);
#ifndef AB_ONE_WIDTH
    bad |= run(k_mma<8>, 128, 64, 128, "attn_mma 8 warps", q, k, v, m, y, hr);
#endif
    return bad;
}
