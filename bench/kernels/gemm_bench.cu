/*
 * gemm_bench.cu — times ampc's dense GEMM (codegen/kernels/gemm.cuh) in several tile
 * configurations against cuBLAS (cublasGemmEx, its default algorithm choice) on the same
 * buffers, at the shapes of BERT-base's projections and the seed MLP, f16 with f32
 * accumulation, bias epilogue. Each figure is the median over 5 rounds of 50 back-to-back
 * launches (CUDA events), in microseconds a call. Build and run with bench/kernels/gemm-bench.sh
 * on a GPU machine; the numbers decide which tiles codegen/dense_gemm.c offers. cuBLAS is also
 * timed one call at a time, with its operands in L2 ("hot") and out of it ("cold"). Columns
 * "k/S" split K over clusters of S blocks. ampc's kernel: back to back / one call cold.
 */
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ampc/gemm.cuh"

#define CHECK(x)                                                                                \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

template <int BM, int BN, int BK, int WM, int WN, int ST, int SPLIT>
__global__ void __launch_bounds__(WM *WN * 32) k_gemm(ampc::gemm::args<__half> a) {
    ampc::gemm::dense_gemm<__half, BM, BN, BK, WM, WN, ST, false, 0, SPLIT>(a);
}

typedef void (*launch_fn)(const ampc::gemm::args<__half> &, cudaStream_t);

struct config {
    const char *name;
    launch_fn run;
};

/* SPLIT > 1: K split over clusters of 1 x 1 x SPLIT blocks (the cluster set at launch here;
 * ampc's generated kernels carry it as __cluster_dims__). */
template <int BM, int BN, int BK, int WM, int WN, int ST, int SPLIT>
static void launch(const ampc::gemm::args<__half> &a, cudaStream_t s) {
    constexpr int pipe = ampc::gemm::smem<BM, BN, BK, ST, false>::bytes;
    constexpr int part = SPLIT > 1 ? ampc::gemm::partial<BM, BN>::bytes : 0;
    constexpr int bytes = pipe > part ? pipe : part;
    auto *f = k_gemm<BM, BN, BK, WM, WN, ST, SPLIT>;
    static bool set = false;
    if (!set) {
        CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        set = true;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((a.N + BN - 1) / BN, (a.M + BM - 1) / BM, SPLIT);
    cfg.blockDim = dim3(WM * WN * 32);
    cfg.dynamicSmemBytes = bytes;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 1, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = SPLIT;
    cfg.attrs = at;
    cfg.numAttrs = SPLIT > 1 ? 1 : 0;
    CHECK(cudaLaunchKernelEx(&cfg, f, a));
}

#define CFG(BM, BN, BK, WM, WN, ST) \
    {#BM "x" #BN "x" #BK " w" #WM "x" #WN " s" #ST, launch<BM, BN, BK, WM, WN, ST, 1>}
#define CFGS(BM, BN, BK, WM, WN, ST, SP) \
    {#BM "x" #BN "x" #BK " s" #ST " k/" #SP, launch<BM, BN, BK, WM, WN, ST, SP>}

static const config configs[] = {
    CFG(128, 128, 32, 2, 4, 4), CFG(128, 128, 64, 2, 4, 3), CFG(128, 128, 32, 2, 2, 4),
    CFG(64, 128, 32, 2, 2, 4),  CFG(64, 128, 64, 2, 2, 4),  CFG(64, 64, 32, 2, 2, 4),
    CFG(64, 64, 64, 2, 2, 4),   CFG(32, 64, 64, 2, 2, 3),   CFG(32, 64, 64, 2, 2, 6),
    CFG(16, 64, 64, 1, 4, 6),   CFG(16, 128, 64, 1, 4, 4),  CFG(32, 32, 64, 2, 2, 6),
    CFG(32, 128, 64, 2, 4, 4),  CFG(16, 64, 128, 1, 4, 4),
    /* deep pipelines for products of few rows: more of K in flight a block */
    CFG(64, 64, 64, 2, 2, 5),   CFG(64, 64, 64, 2, 4, 5),   CFG(32, 64, 64, 2, 2, 5),
    CFG(64, 32, 64, 2, 1, 6),   CFG(64, 64, 32, 2, 2, 8),   CFG(64, 64, 128, 2, 2, 3),
    /* K split over a cluster (gemm.cuh) */
    CFGS(128, 128, 32, 2, 4, 4, 4), CFGS(128, 128, 32, 2, 4, 4, 8), CFGS(64, 128, 32, 2, 2, 4, 4),
    CFGS(64, 128, 32, 2, 2, 4, 8),  CFGS(64, 64, 32, 2, 2, 4, 2),   CFGS(64, 64, 32, 2, 2, 4, 4),
    CFGS(64, 64, 32, 2, 2, 4, 8),   CFGS(32, 64, 64, 2, 2, 3, 2),   CFGS(32, 64, 64, 2, 2, 3, 4),
    CFGS(32, 64, 64, 2, 2, 3, 8),   CFGS(64, 64, 64, 2, 2, 4, 4),   CFGS(128, 64, 64, 2, 2, 3, 4),
};

/* The erf GELU in place, 2 elements a thread: what a GEMM without the GELU epilogue is
 * followed by (the cuBLAS+GELU column). */
__global__ void k_gelu(__half2 *y, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n2) return;
    float2 v = __half22float2(y[i]);
    v.x = 0.5f * v.x * (1.0f + erff(v.x * 0.70710678f));
    v.y = 0.5f * v.y * (1.0f + erff(v.y * 0.70710678f));
    y[i] = __float22half2_rn(v);
}

template <class F> static float time_us(F f, cudaStream_t s) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++) f();
    std::vector<float> r;
    for (int round = 0; round < 5; round++) {
        CHECK(cudaEventRecord(a, s));
        for (int i = 0; i < 50; i++) f();
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        r.push_back(ms * 1000.0f / 50);
    }
    std::sort(r.begin(), r.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return r[2];
}

/* One call at a time between two events, after writing `flush` (three times the L2 cache) so
 * that the operands come from memory, as a model's weights mostly do: the median of 9. */
template <class F> static float time_cold_us(F f, cudaStream_t s, void *flush, size_t bytes) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    f();
    std::vector<float> r;
    for (int round = 0; round < 9; round++) {
        CHECK(cudaMemsetAsync(flush, round, bytes, s));
        CHECK(cudaEventRecord(a, s));
        f();
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        r.push_back(ms * 1000.0f);
    }
    std::sort(r.begin(), r.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return r[4];
}

int main() {
    const int shapes[][3] = {{128, 3072, 768}, {128, 768, 3072}, {128, 2304, 768}, {128, 768, 768},
                             {64, 128, 784},   {4096, 3072, 768}, {4096, 768, 3072},
                             {4096, 2304, 768}, {4096, 768, 768}};
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return fprintf(stderr, "cublasCreate\n"), 1;
    cublasSetStream(h, s);
    printf("%-18s", "M x N x K");
    int l2 = 0;
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    const size_t flush_bytes = 3 * (size_t)l2;
    void *flush;
    CHECK(cudaMalloc(&flush, flush_bytes));
    printf(" %9s %12s %12s %12s", "cuBLAS", "cuBLAS+GELU", "1 call, hot", "1 call, cold");
    for (const config &c : configs) printf(" %24s", c.name);
    printf("\n");
    for (const auto &sh : shapes) {
        const int M = sh[0], N = sh[1], K = sh[2];
        __half *x, *w, *y, *yr, *bias;
        CHECK(cudaMalloc(&x, (size_t)M * K * 2));
        CHECK(cudaMalloc(&w, (size_t)K * N * 2));
        CHECK(cudaMalloc(&y, (size_t)M * N * 2));
        CHECK(cudaMalloc(&yr, (size_t)M * N * 2));
        CHECK(cudaMalloc(&bias, (size_t)N * 2));
        std::vector<__half> hx((size_t)M * K), hw((size_t)K * N), hb(N, __float2half(0.0f));
        for (size_t i = 0; i < hx.size(); i++) hx[i] = __float2half((float)(i % 13) / 13.0f - 0.5f);
        for (size_t i = 0; i < hw.size(); i++) hw[i] = __float2half(((float)(i % 7) / 7.0f - 0.5f) / 16.0f);
        CHECK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(bias, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
        const float one = 1.0f, zero = 0.0f;
        auto blas = [&] {
            cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, w, CUDA_R_16F, N, x,
                         CUDA_R_16F, K, &zero, yr, CUDA_R_16F, N, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT);
        };
        printf("%5d x %4d x %4d", M, N, K);
        auto blas_gelu = [&] {
            blas();
            const int n2 = M * N / 2;
            k_gelu<<<(n2 + 255) / 256, 256, 0, s>>>(reinterpret_cast<__half2 *>(yr), n2);
        };
        printf(" %9.2f %12.2f %12.2f %12.2f", time_us(blas, s), time_us(blas_gelu, s),
               time_cold_us(blas, s, flush, 256), time_cold_us(blas, s, flush, flush_bytes));
        blas();
        CHECK(cudaStreamSynchronize(s));
        std::vector<__half> ref((size_t)M * N), got((size_t)M * N);
        CHECK(cudaMemcpy(ref.data(), yr, ref.size() * 2, cudaMemcpyDeviceToHost));
        ampc::gemm::args<__half> a = {x, w, nullptr, bias, y, M, N, K, K, N, 0, N, 1.0f, 0.0f};
        for (const config &c : configs) {
            CHECK(cudaMemset(y, 0, (size_t)M * N * 2));
            float us = time_us([&] { c.run(a, s); }, s);
            float cold = time_cold_us([&] { c.run(a, s); }, s, flush, flush_bytes);
            CHECK(cudaStreamSynchronize(s));
            CHECK(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
            double worst = 0;
            for (size_t i = 0; i < got.size(); i++)
                worst = std::max(worst, (double)fabsf(__half2float(got[i]) - __half2float(ref[i])));
            printf(" %8.2f / %6.2f%s", us, cold, worst < 2e-2 ? "       " : " (BAD) ");
        }
        printf("\n");
        cudaFree(x), cudaFree(w), cudaFree(y), cudaFree(yr), cudaFree(bias);
    }
    return 0;
}
