/*
 * gemm_emu.cpp — runs ampc's dense GEMM (ampc::gemm::dense_gemm of codegen/kernels/gemm.cuh) on
 * the CPU and checks it against a plain double-precision reference of
 * y = act(alpha * x @ W + beta * c + bias), so the kernel's tiling, cp.async pipeline, ldmatrix
 * addressing (W and W^T), tails and epilogue can be validated on a machine without a GPU. Run
 * with bench/kernels/gemm-emu.sh.
 *
 * A block is WM * WN * 32 POSIX threads, one per CUDA thread (bench/kernels/emu.h: ldmatrix and
 * mma.sync are barriers of the warp's threads, cp.async an immediate copy; their fragment
 * layouts are the emulator's assumption, the GPU tests validate the instructions themselves).
 * The padding of every pitch of x, W and c holds NaN, so a read past K shows in y; the padding
 * of y holds a sentinel that must survive. Not seen here: a wrong cp_wait count (the copies land
 * at once), and a missing __syncthreads only where the threads' scheduling happens to expose it.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "emu.h" /* the CUDA execution model; defines AMPC_EMULATE_MMA */
#include "ampc/gemm.cuh"

template <class T> static unsigned short bits_of(T x) {
    if constexpr (std::is_same<T, __half>::value) return __half_raw(x).x;
    else return __nv_bfloat16_raw(x).x;
}
template <class T> static T from_bits(unsigned short b) {
    if constexpr (std::is_same<T, __half>::value) {
        __half_raw r;
        r.x = b;
        return __half(r);
    } else {
        __nv_bfloat16_raw r;
        r.x = b;
        return __nv_bfloat16(r);
    }
}

/* A problem: the shape, the extra elements of every pitch (a multiple of 8, scaled per operand
 * so the pitches differ), whether c (beta 0.5) and bias are given, alpha. */
struct gemm_case {
    int M, N, K, pad;
    bool c, bias;
    float alpha;
};
static const gemm_case cases[] = {
    {37, 72, 40, 8, true, true, 0.75f},    /* tails in M, N and K; wider pitches */
    {128, 128, 64, 0, false, true, 1.0f},  /* whole tiles */
    {5, 8, 8, 0, true, false, 1.0f},       /* smaller than any tile */
    {24, 40, 200, 16, false, false, 0.75f}, /* many K tiles: the ring of stages wraps */
};
static const char *const act_name[] = {"none", "relu", "gelu"};

static double act_ref(double v, int act) {
    if (act == ampc::gemm::ACT_RELU) return v > 0 ? v : 0;
    if (act == ampc::gemm::ACT_GELU) return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    return v;
}

/* Runs dense_gemm over its grid: ceil(N / BN) x ceil(M / BM) blocks of WM * WN * 32 threads. */
template <class T, int BM, int BN, int BK, int WM, int WN, int STAGES, bool WT, int ACT>
static void run(const ampc::gemm::args<T> &p) {
    const emu_dim3 grid = {(unsigned)((p.N + BN - 1) / BN), (unsigned)((p.M + BM - 1) / BM), 1};
    emu_launch(grid, WM * WN * 32,
               [&] { ampc::gemm::dense_gemm<T, BM, BN, BK, WM, WN, STAGES, WT, ACT>(p); });
}

/* x [M, K] uniform in [-1, 1), W [K, N] (or W^T [N, K] with WT) uniform in [-2, 2) / sqrt(K),
 * c [M, N] and bias [N] uniform in [-1, 1). Returns the number of elements of y outside 1e-2
 * absolute + 1e-2 relative of the reference, plus the padding elements of y overwritten. */
template <class T, int BM, int BN, int BK, int WM, int WN, int STAGES, bool WT>
static int check(const gemm_case &cs, int act) {
    const int M = cs.M, N = cs.N, K = cs.K;
    const long long ldx = K + cs.pad, ldw = (WT ? K : N) + 2 * cs.pad, ldc = N + cs.pad,
                    ldy = N + 3 * cs.pad;
    const T nan = from_float<T>(NAN);
    const unsigned short sentinel = 0xbeef;
    std::vector<T> x((size_t)M * ldx, nan), w((size_t)(WT ? N : K) * ldw, nan);
    std::vector<T> c((size_t)M * ldc, nan), bias(N), y((size_t)M * ldy, from_bits<T>(sentinel));
    unsigned long long seed = 11;
    auto uniform = [&] { /* [-1, 1) */
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return (float)((double)(seed >> 40) / (double)(1ull << 24) * 2 - 1);
    };
    const float wscale = 2.0f / sqrtf((float)K);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) x[m * ldx + k] = from_float<T>(uniform());
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            w[WT ? n * ldw + k : k * ldw + n] = from_float<T>(uniform() * wscale);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) c[m * ldc + n] = from_float<T>(uniform());
    for (T &e : bias) e = from_float<T>(uniform());
    if ((uintptr_t)x.data() % 16 || (uintptr_t)w.data() % 16 || (uintptr_t)y.data() % 4) {
        fprintf(stderr, "gemm_emu: misaligned buffers\n");
        exit(2);
    }

    const float beta = cs.c ? 0.5f : 0.0f;
    const ampc::gemm::args<T> p = {x.data(), w.data(), cs.c ? c.data() : nullptr,
                                   cs.bias ? bias.data() : nullptr, y.data(), M, N, K,
                                   ldx, ldw, ldc, ldy, cs.alpha, beta};
    using namespace ampc::gemm;
    switch (act) {
    case ACT_NONE: run<T, BM, BN, BK, WM, WN, STAGES, WT, ACT_NONE>(p); break;
    case ACT_RELU: run<T, BM, BN, BK, WM, WN, STAGES, WT, ACT_RELU>(p); break;
    default: run<T, BM, BN, BK, WM, WN, STAGES, WT, ACT_GELU>(p); break;
    }

    int bad = 0;
    double worst = 0;
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            double dot = 0;
            for (int k = 0; k < K; k++)
                dot += (double)to_float(x[m * ldx + k]) *
                       to_float(w[WT ? n * ldw + k : k * ldw + n]);
            double v = cs.alpha * dot;
            if (cs.c) v += beta * (double)to_float(c[m * ldc + n]);
            if (cs.bias) v += to_float(bias[n]);
            const double want = to_float(from_float<T>((float)act_ref(v, act)));
            const double got = to_float(y[m * ldy + n]), err = fabs(got - want);
            if (!(err <= 1e-2 + 1e-2 * fabs(want)) && bad++ < 3)
                printf("  (m %d, n %d): got %g, expected %g\n", m, n, got, want);
            if (err > worst || std::isnan(err)) worst = err;
        }
        for (long long n = N; n < ldy; n++)
            if (bits_of(y[m * ldy + n]) != sentinel && bad++ < 3)
                printf("  (m %d, n %lld): padding of y overwritten\n", m, n);
    }
    printf("%-4s WT=%d %3dx%3dx%2d %dx%d warps %d stages  M=%-3d N=%-3d K=%-3d pad=%-2d c=%d "
           "bias=%d alpha=%-4g act=%s: worst |error| %.3g, %d bad\n",
           std::is_same<T, __half>::value ? "f16" : "bf16", WT, BM, BN, BK, WM, WN, STAGES, M, N,
           K, cs.pad, cs.c, cs.bias, cs.alpha, act_name[act], worst, bad);
    return bad;
}

/* Every case on one configuration; the activation rotates with the case and configuration. */
template <class T, int BM, int BN, int BK, int WM, int WN, int STAGES, bool WT>
static int all_cases(int cfg) {
    int bad = 0;
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++)
        bad += check<T, BM, BN, BK, WM, WN, STAGES, WT>(
            cases[i], (i + cfg + WT + std::is_same<T, __nv_bfloat16>::value) % 3);
    return bad;
}

template <class T, bool WT> static int all_configs() {
    int bad = 0;
    bad += all_cases<T, 128, 128, 32, 2, 4, 4, WT>(0); /* 256 threads */
    bad += all_cases<T, 64, 128, 32, 2, 2, 4, WT>(1);
    bad += all_cases<T, 64, 64, 32, 2, 2, 4, WT>(2);
    bad += all_cases<T, 32, 64, 64, 2, 2, 3, WT>(3); /* one 16-row tile a warp, BK 64 */
    return bad;
}

int main() {
    setvbuf(stdout, nullptr, _IONBF, 0);
    int bad = 0;
    bad += all_configs<__half, false>();
    bad += all_configs<__half, true>();
    bad += all_configs<__nv_bfloat16, false>();
    bad += all_configs<__nv_bfloat16, true>();
    printf(bad ? "gemm_emu: FAILED\n" : "gemm_emu: all cases match\n");
    return bad != 0;
}
