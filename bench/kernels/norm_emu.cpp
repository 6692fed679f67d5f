/*
 * norm_emu.cpp — runs the warp-row norm kernel of codegen/kernels/reduce.cuh (norm_rows_warp:
 * LayerNormalization and RMSNormalization of rows of up to 2048 elements, one warp a row) on the
 * CPU and checks it two ways. Run with bench/kernels/norm-emu.sh.
 *
 *  - Against a double-precision reference of the norm (the semantics of ir/ref/norm.c): every
 *    element within two roundings of the output type, and the statistics outputs within 1e-5.
 *  - With a post-scale (a Mul by a constant row after the norm, which fuse-elementwise lets the
 *    norm's kernel write): bit for bit the values of the two kernels it replaces, the norm's
 *    output rounded to its type, then multiplied in f32 and rounded again. The kernel without
 *    the post-scale gives the first; the second is computed here from it.
 *
 * A block is one warp (32 POSIX threads, emu.h), so the kernel's rows are blockIdx.x and
 * grid-strided; a grid smaller than the rows makes each warp take several.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "emu.h" /* the CUDA execution model */
#include "ampc/reduce.cuh"

/* Host float <-> T for f32, f16 and bf16. */
template <class T> static float host_f(T x) {
    if constexpr (std::is_same<T, float>::value) return x;
    else return to_float<T>(x);
}
template <class T> static T host_t(float x) {
    if constexpr (std::is_same<T, float>::value) return x;
    else return from_float<T>(x);
}
/* The spacing of T near |x| (one unit in the last place). */
template <class T> static double ulp(double x) {
    const int bits = std::is_same<T, float>::value ? 24 : std::is_same<T, __half>::value ? 11 : 8;
    int e;
    std::frexp(std::fabs(x) > 6.1e-5 ? x : 6.1e-5, &e);
    return std::ldexp(1.0, e - bits);
}

/* Rows of LEN elements of T, uniform in [-3, 3) plus an offset a row (so LayerNorm's centring
 * matters), Scale in [0.5, 1.5), B in [-1, 1), the post-scale row in [-2, 2). */
template <class T, int LEN, bool CENTER, int HOLD>
static int check(int rows, int grid, bool bias, bool stats) {
    /* the width code generation picks (codegen/lower_norm.c, warp_rows_vec) */
    constexpr int V16 = 16 / (int)sizeof(T);
    constexpr int VEC = LEN % (32 * V16) == 0 ? V16 : LEN % (16 * V16) == 0 ? V16 / 2
                      : LEN % (8 * V16) == 0 ? V16 / 4 : 1;
    std::vector<T> x((size_t)rows * LEN), sc(LEN), bi(LEN), w(LEN);
    std::vector<T> y((size_t)rows * LEN), yp((size_t)rows * LEN);
    std::vector<float> mean(rows, NAN), inv(rows, NAN);
    unsigned long long seed = 11;
    auto uniform = [&](double lo, double hi) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return (float)(lo + (hi - lo) * ((double)(seed >> 40) / (double)(1ull << 24)));
    };
    for (int r = 0; r < rows; r++) {
        const float off = uniform(-4, 4);
        for (int i = 0; i < LEN; i++) x[(size_t)r * LEN + i] = host_t<T>(off + uniform(-3, 3));
    }
    for (int i = 0; i < LEN; i++) {
        sc[i] = host_t<T>(uniform(0.5, 1.5));
        bi[i] = host_t<T>(uniform(-1, 1));
        w[i] = host_t<T>(uniform(-2, 2));
    }
    const float eps = 1e-5f;
    const T *pb = bias ? bi.data() : nullptr;
    float *pm = stats ? mean.data() : nullptr, *pi = stats ? inv.data() : nullptr;
    emu_launch({(unsigned)grid, 1, 1}, 32, [&] {
        ampc::norm_rows_warp<LEN, VEC, CENTER, HOLD, T>(x.data(), sc.data(), pb, y.data(), pm, pi,
                                                        eps, (ampc::i64)rows);
    });
    emu_launch({(unsigned)grid, 1, 1}, 32, [&] {
        ampc::norm_rows_warp<LEN, VEC, CENTER, HOLD, T>(x.data(), sc.data(), pb, yp.data(),
                                                        (float *)nullptr, (float *)nullptr, eps,
                                                        (ampc::i64)rows, w.data());
    });
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        double m = 0, q = 0;
        for (int i = 0; i < LEN; i++) m += CENTER ? host_f(x[(size_t)r * LEN + i]) : 0;
        m /= LEN;
        for (int i = 0; i < LEN; i++) {
            const double d = host_f(x[(size_t)r * LEN + i]) - m;
            q += d * d;
        }
        const double iv = 1 / std::sqrt(q / LEN + eps);
        if (stats && (std::fabs(mean[r] - m) > 1e-5 * (1 + std::fabs(m)) ||
                      std::fabs(inv[r] - iv) > 1e-5 * iv)) {
            if (bad++ < 4) printf("  row %d: mean %g inv %g, expected %g %g\n", r, mean[r], inv[r], m, iv);
        }
        for (int i = 0; i < LEN; i++) {
            const size_t e = (size_t)r * LEN + i;
            const double prod = (host_f(x[e]) - m) * iv * host_f(sc[i]);
            const double want = prod + (bias ? host_f(bi[i]) : 0);
            /* one rounding to T (2 of its units), after f32 statistics and arithmetic: a few f32
             * units of each term, which may cancel (x and the mean, the product and B) */
            const double terms = (std::fabs(host_f(x[e])) + std::fabs(m)) * iv * host_f(sc[i]) +
                                 std::fabs(want - prod);
            const double tol = 2 * ulp<T>(want) + 1e-6 * terms;
            if (std::fabs(host_f(y[e]) - want) > tol) {
                if (bad++ < 4) printf("  row %d [%d]: %g, expected %g\n", r, i, host_f(y[e]), want);
            }
            const T two = host_t<T>(host_f(y[e]) * host_f(w[i])); /* the Mul's own kernel */
            if (std::memcmp(&two, &yp[e], sizeof(T)) != 0) {
                if (bad++ < 4)
                    printf("  row %d [%d] post-scaled: %g, the two kernels give %g\n", r, i,
                           host_f(yp[e]), host_f(two));
            }
        }
    }
    printf("%s %-4s LEN %4d VEC %d %s HOLD %d rows %3d grid %2d%s%s: %s\n", bad ? "FAIL" : "ok  ",
           std::is_same<T, float>::value ? "f32" : std::is_same<T, __half>::value ? "f16" : "bf16",
           LEN, VEC, CENTER ? "LayerNorm" : "RMSNorm  ", HOLD, rows, grid, bias ? " bias" : "",
           stats ? " stats" : "", bad ? "differs" : "matches");
    return bad != 0;
}

int main() {
    setvbuf(stdout, nullptr, _IONBF, 0);
    int bad = 0;
    bad += check<__half, 768, true, 0>(9, 4, true, true);      /* BERT's rows, grid-strided */
    bad += check<__half, 512, false, 0>(6, 6, false, false);   /* T5's RMS norm */
    bad += check<__half, 256, true, 1>(5, 2, true, false);     /* Scale and B held */
    bad += check<__half, 1024, false, 2>(3, 3, false, false);  /* ... loaded before the wait */
    bad += check<__nv_bfloat16, 2048, false, 0>(3, 2, false, false); /* Llama-sized rows */
    bad += check<__nv_bfloat16, 256, true, 1>(4, 4, true, false);
    bad += check<float, 128, true, 0>(5, 2, true, true);
    bad += check<float, 64, false, 2>(7, 7, false, false);     /* two floats a lane */
    bad += check<__half, 96, true, 0>(4, 2, true, false);      /* 96: two halves a lane */
    printf(bad ? "norm_emu: FAILED\n" : "norm_emu: all cases match\n");
    return bad != 0;
}
