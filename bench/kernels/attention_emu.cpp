/*
 * attention_emu.cpp — runs the ampc.FusedAttention kernels of codegen/kernels/attention.cuh on
 * the CPU and checks them against a plain double-precision reference (the semantics of
 * ir/ref/attention.c), so the tensor-core kernel's indexing, tails, online softmax and masking
 * can be validated on a machine without a GPU. Run with bench/kernels/attention-emu.sh.
 *
 * A block is 128 POSIX threads (attn_mma's of 8 warps: 256), one per CUDA thread
 * (bench/kernels/emu.h: __syncthreads is a block-wide barrier, the warp shuffles, ldmatrix and
 * mma.sync barriers of the warp's threads, so every lane of a warp must run its warp operations
 * as often: the generic kernel's cases fill their last warp). emu.h's
 * mma.sync and ldmatrix follow the PTX ISA's fragment layouts; that layout is this emulator's
 * assumption: it validates everything around the instructions, the GPU tests
 * (tests/passes/test_fuse_attention.c, fuse_attention_gpu) validate the instructions themselves.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "emu.h" /* the CUDA execution model; defines AMPC_EMULATE_MMA */
#include "ampc/attention.cuh"

/* ---- a case: inputs, launch, reference --------------------------------------------------- */


/* Runs the kernel over every block of the grid, 128 threads a block (attn_mma: 32 W). split:
 * attn_mma_split, else mma: attn_mma of W warps, else attn_rows. */
template <class T, int D, bool SAFE, bool MVEC, bool CAUSAL, int W>
static void run_grid(emu_dim3 grid, const T *q, const T *k, const T *v, const T *m, T *y,
                     const ampc::attn_desc &a, bool mma, bool split) {
    emu_launch(grid, mma && !split ? 32 * W : 128, [&] {
        if (split) ampc::attn_mma_split<T, D, D, SAFE, MVEC, CAUSAL>(q, k, v, m, y, a);
        else if (mma) ampc::attn_mma<T, D, D, SAFE, MVEC, CAUSAL, W>(q, k, v, m, y, a);
        else ampc::attn_rows<T, D, D, SAFE, CAUSAL>(q, k, v, m, y, a);
    });
}

/* Q, K, V [B, S, H*D] uniform in [-2, 2), the mask [B, 1, 1, Sk] by batch (b % 4: none, the last
 * quarter -inf, all -inf, the last half -10000) or, with per_row, [B, 1, Sq, Sk] (the same by
 * batch, keys past i + b masked for odd b: causal, and a NaN in row 3, +inf in row 5), Y [B, Sq,
 * H*D], scale 1/8. With group g, K and V have H / g heads ([B, Sk, (H / g) * D]), head h reading
 * head h / g; with period P, the mask has P batch entries, batch b reading entry b % P. causal 2
 * puts an infinity in K and a NaN in V at keys most rows mask, 3 an infinity in one row of Q.
 * CAUSAL: the kernels' implied mask, -inf past key i + coff (no mask tensor). Returns the number
 * of elements outside 1e-2 absolute + 1e-2 relative of the reference (NaN must match NaN). W:
 * attn_mma's warps a block. */
template <class T, int D, bool SAFE, bool MVEC = false, bool CAUSAL = false, int W = 4>
static int check(int B, int H, int Sq, int Sk, bool with_mask, bool mma, bool per_row = false,
                 bool split = false, int group = 1, int period = 0, int causal = 0, int coff = 0) {
    const int mrows = per_row ? Sq : 1, P = period ? period : B;
    const int E = H * D, Ekv = H / group * D;
    std::vector<T> q((size_t)B * Sq * E), k((size_t)B * Sk * Ekv), v((size_t)B * Sk * Ekv);
    std::vector<T> m((size_t)P * mrows * Sk), y((size_t)B * Sq * E, from_float<T>(12345.0f));
    unsigned long long seed = 7;
    auto uniform = [&] {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return (float)((double)(seed >> 40) / (double)(1ull << 24) * 4 - 2);
    };
    for (T &x : q) x = from_float<T>(uniform());
    for (T &x : k) x = from_float<T>(uniform());
    for (T &x : v) x = from_float<T>(uniform());
    for (int b = 0; b < P; b++)
        for (int i = 0; i < mrows; i++)
            for (int j = 0; j < Sk; j++) {
                const int r = b % 4;
                const float mv = causal                               ? (j > i ? -INFINITY : 0.0f)
                                 : (r == 1 && j >= Sk - Sk / 4) || r == 2 ? -INFINITY
                                 : r == 3 && j >= Sk / 2              ? -10000.0f
                                 : per_row && b % 2 && j > i + b      ? -INFINITY
                                 : per_row && i == 3 && j == 1        ? NAN
                                 : per_row && i == 5 && j == Sk - 1   ? INFINITY
                                                                      : 0.0f;
                m[((size_t)b * mrows + i) * Sk + j] = from_float<T>(mv);
            }
    if (causal == 2) { /* an infinity in K and a NaN in V, at keys most rows mask */
        k[((size_t)1 * Sk + Sk - 1) * Ekv] = from_float<T>(INFINITY);
        v[((size_t)3 % B * Sk + Sk - 2) * Ekv + 1] = from_float<T>(NAN);
    }
    if (causal == 3) q[((size_t)1 % B * Sq + Sq / 2) * E + 2] = from_float<T>(INFINITY);
    const long long mb = (long long)mrows * Sk, mi = per_row ? Sk : 0;
    const long long sq = (long long)Sq * E, sk = (long long)Sk * Ekv;
    const ampc::attn_desc a = {B,     H,   Sq, Sk, group, P, {sq, D, E, 1}, {sk, D, Ekv, 1},
                               {sk, D, Ekv, 1}, {mb, 0, mi, 1}, {sq, D, E, 1}, 0.125f, coff};
    const emu_dim3 grid = split ? emu_dim3{(unsigned)((Sq + 15) / 16), (unsigned)H, (unsigned)B}
                          : mma ? emu_dim3{(unsigned)((Sq + 16 * W - 1) / (16 * W)), (unsigned)H, (unsigned)B}
                                : emu_dim3{(unsigned)((B * H * Sq + 3) / 4), 1, 1};
    run_grid<T, D, SAFE, MVEC, CAUSAL, W>(grid, q.data(), k.data(), v.data(), with_mask ? m.data() : nullptr,
                               y.data(), a, mma, split);

    int bad = 0;
    double worst = 0;
    std::vector<double> s(Sk), acc(D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Sq; i++) {
                double mx = -INFINITY;
                bool nan = false;
                for (int j = 0; j < Sk; j++) {
                    double dot = 0;
                    for (int e = 0; e < D; e++)
                        dot += (double)to_float(q[((size_t)b * Sq + i) * E + h * D + e]) *
                               to_float(k[((size_t)b * Sk + j) * Ekv + h / group * D + e]);
                    const size_t mr = (size_t)(b % P) * mrows + (per_row ? i : 0);
                    const double bias = CAUSAL && j > i + coff ? -INFINITY
                                        : with_mask            ? to_float(m[mr * Sk + j])
                                                               : 0;
                    s[j] = to_float(from_float<T>((float)(0.125 * dot + bias)));
                    nan |= std::isnan(s[j]);
                    if (s[j] > mx) mx = s[j];
                }
                for (int e = 0; e < D; e++) acc[e] = nan || !std::isfinite(mx) ? (SAFE ? 0 : NAN) : 0;
                if (!nan && std::isfinite(mx)) {
                    double sum = 0;
                    for (int j = 0; j < Sk; j++) sum += s[j] = exp(s[j] - mx);
                    for (int j = 0; j < Sk; j++) {
                        const double p = to_float(from_float<T>((float)(s[j] / sum)));
                        for (int e = 0; e < D; e++)
                            acc[e] += p * to_float(v[((size_t)b * Sk + j) * Ekv + h / group * D + e]);
                    }
                }
                for (int e = 0; e < D; e++) {
                    const double got = to_float(y[((size_t)b * Sq + i) * E + h * D + e]), want = acc[e];
                    if (std::isnan(want) && std::isnan(got)) continue;
                    const double err = fabs(got - want);
                    if (!(err <= 1e-2 + 1e-2 * fabs(want)) && bad++ < 3)
                        printf("  (b %d, h %d, i %d, d %d): got %g, expected %g\n", b, h, i, e, got, want);
                    if (err > worst || std::isnan(err)) worst = err;
                }
            }
    printf("%-9s %-4s D=%-3d %s B=%d H=%d Sq=%-3d Sk=%-3d mask=%d%s%s%s%s: worst |error| %.3g, %d "
           "bad\n",
           split ? "split" : !mma ? "attn_rows" : W == 8 ? "attn_mma8" : "attn_mma", std::is_same<T, __half>::value ? "f16" : "bf16", D,
           SAFE ? "safe  " : "unsafe", B, H, Sq, Sk, with_mask,
           per_row ? MVEC ? " (per row, 16-byte loads)" : " (per row)" : "",
           group > 1 ? " (grouped K/V)" : "", period ? " (mask period)" : "",
           CAUSAL ? causal == 2 ? " (implied causal, inf in K, NaN in V)"
                    : causal == 3 ? " (implied causal, inf in Q)"
                                  : " (implied causal)"
           : causal ? causal == 2 ? " (causal, inf in K, NaN in V)" : " (causal)"
                    : "",
           worst, bad);
    if (CAUSAL) printf("          (causal offset %d)\n", coff);
    return bad;
}

int main() {
    setvbuf(stdout, nullptr, _IONBF, 0);
    int bad = 0;
    bad += check<__half, 64, false>(4, 2, 77, 77, true, true);    /* BERT-like, tails, two tiles */
    bad += check<__half, 64, true>(4, 1, 130, 100, true, true);   /* three query blocks */
    bad += check<__half, 64, false>(2, 1, 64, 64, false, true);   /* exact tiles, no mask */
    bad += check<__half, 64, true>(4, 1, 100, 70, true, true, true); /* a mask per query row */
    bad += check<__half, 64, false, true>(4, 2, 72, 136, true, true, true); /* ... in chunks */
    bad += check<__nv_bfloat16, 128, true>(4, 1, 70, 129, true, true); /* D = 128, three tiles */
    bad += check<__half, 32, false>(4, 1, 20, 33, true, true);    /* short rows */
    bad += check<__half, 16, true>(4, 1, 8, 5, true, false);      /* the generic kernel */
    /* attn_mma_split: one super-tile, a tail, several super-tiles, per-row masks in chunks */
    bad += check<__half, 64, false>(4, 2, 40, 128, true, true, false, true);
    bad += check<__half, 64, true>(4, 1, 33, 77, true, true, true, true);
    bad += check<__half, 64, false, true>(4, 1, 20, 264, true, true, true, true);
    bad += check<__nv_bfloat16, 128, true>(4, 1, 17, 150, true, true, false, true);
    /* grouped K/V heads (4 query heads a K/V head), a mask repeating every 2 batch entries */
    bad += check<__half, 64, false>(4, 8, 70, 90, true, true, false, false, 4, 2);
    bad += check<__half, 64, true>(4, 4, 30, 77, true, true, true, true, 2, 2);
    bad += check<__half, 32, false>(4, 4, 9, 33, true, false, false, false, 2, 2);
    /* causal masks: the tiles above the diagonal skipped (attn_tile_hidden), except where K or
     * V holds an infinity or a NaN under the mask, which must reach the rows as in the reference */
    bad += check<__half, 64, false, true>(2, 2, 256, 256, true, true, true, false, 1, 0, 1);
    bad += check<__half, 64, true>(4, 1, 200, 200, true, true, true, false, 1, 0, 2);
    bad += check<__half, 64, false>(4, 1, 200, 200, true, true, true, false, 1, 0, 2);
    bad += check<__nv_bfloat16, 64, false, true>(4, 1, 48, 300, true, true, true, true, 1, 0, 2);
    /* the implied causal mask (attribute causal): no mask read, the tiles past a block's last row
     * not computed unless K, V or Q hold a non-finite value there; bottom-right aligned (offset Sk
     * - Sq), rows that see no key (a negative offset), the split and generic kernels */
    bad += check<__half, 64, true, false, true>(2, 2, 200, 200, false, true);
    bad += check<__half, 64, false, false, true>(4, 1, 200, 200, false, true, false, false, 1, 0, 2);
    bad += check<__half, 64, true, false, true>(4, 1, 200, 200, false, true, false, false, 1, 0, 2);
    bad += check<__half, 64, false, false, true>(2, 1, 130, 130, false, true, false, false, 1, 0, 3);
    bad += check<__half, 64, false, false, true>(2, 4, 70, 150, false, true, false, false, 2, 0, 0, 80);
    bad += check<__half, 64, true, false, true>(2, 1, 100, 100, false, true, false, false, 1, 0, 0, -20);
    bad += check<__half, 64, false, false, true>(2, 1, 100, 100, false, true, false, false, 1, 0, 0, -20);
    bad += check<__half, 64, true, false, true>(2, 2, 40, 264, false, true, false, true, 1, 0, 0, 224);
    bad += check<__nv_bfloat16, 128, false, false, true>(4, 1, 33, 150, false, true, false, true, 1, 0, 2, 117);
    /* (the generic kernel computes every key, so nothing is skipped) */
    bad += check<__half, 32, false, false, true>(4, 2, 9, 33, false, false, false, false, 1, 0, 0, 24);
    /* split blocks whose rows see no key (end 0: the first tile's copies waited for before the
     * warps' states reuse its stage), and split blocks that skip tiles holding an infinity in K
     * and a NaN in V */
    bad += check<__half, 64, true, false, true>(1, 1, 64, 32, false, true, false, true, 1, 0, 0, -32);
    bad += check<__half, 64, false, false, true>(4, 1, 48, 300, false, true, false, true, 1, 0, 2, 0);
    /* attn_mma of 8 warps (128 query rows a block): tails, masks per row in chunks, and the
     * implied causal mask with the warps of a block skipping the tiles past their own rows
     * (and not where K, V or Q hold an infinity or a NaN there), offsets either way */
    bad += check<__half, 64, false, false, false, 8>(4, 2, 77, 77, true, true);
    bad += check<__half, 64, true, true, false, 8>(2, 2, 200, 136, true, true, true);
    bad += check<__half, 64, false, true, false, 8>(2, 1, 256, 256, true, true, true, false, 1, 0, 1);
    bad += check<__half, 64, true, false, true, 8>(2, 2, 256, 256, false, true);
    bad += check<__half, 64, false, false, true, 8>(2, 1, 200, 200, false, true, false, false, 1, 0, 2);
    bad += check<__half, 64, false, false, true, 8>(2, 1, 200, 200, false, true, false, false, 1, 0, 3);
    bad += check<__half, 64, true, false, true, 8>(2, 4, 150, 230, false, true, false, false, 2, 0, 0, 80);
    bad += check<__nv_bfloat16, 64, false, false, true, 8>(2, 1, 140, 140, false, true, false, false, 1, 0, 0, -20);
    printf(bad ? "attention_emu: FAILED\n" : "attention_emu: all cases match\n");
    return bad != 0;
}
