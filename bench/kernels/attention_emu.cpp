/*
 * attention_emu.cpp — runs the ampc.FusedAttention kernels of codegen/kernels/attention.cuh on
 * the CPU and checks them against a plain double-precision reference (the semantics of
 * ir/ref/attention.c), so the tensor-core kernel's indexing, tails, online softmax and masking
 * can be validated on a machine without a GPU. Run with bench/kernels/attention-emu.sh.
 *
 * A block is 128 POSIX threads, one per CUDA thread. __syncthreads, the warp shuffles, ldmatrix
 * and mma.sync are block-wide barriers: every thread of these kernels reaches them in the same
 * order, and every warp of a block runs its warp operations as often (the generic kernel's cases
 * fill their last block). mma.sync m16n8k16 is computed from the fragments of the warp's 32
 * threads as the PTX ISA lays them out (A: a0 rows g, a1 rows g + 8, a2/a3 the same at columns
 * + 8; B: b0 rows 2t, 2t + 1, b1 rows + 8, column g; C: c0/c1 row g, c2/c3 row g + 8, columns
 * 2t, 2t + 1; with g = lane / 4, t = lane % 4), ldmatrix.x4.trans from the row addresses of
 * the warp's lanes, and cp.async as an immediate copy. That layout is this emulator's assumption: it
 * validates everything around the instruction, the GPU tests (tests/passes/test_fuse_attention.c,
 * fuse_attention_gpu) validate the instruction itself.
 */
#include <pthread.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* ---- the CUDA execution model, emulated ---------------------------------------------------- */

struct emu_dim3 {
    unsigned x, y, z;
};
static thread_local emu_dim3 threadIdx;
static emu_dim3 blockIdx, blockDim, gridDim;
static pthread_barrier_t block_barrier;
enum { THREADS = 128 };

static void __syncthreads() { pthread_barrier_wait(&block_barrier); }

static double shfl_slot[THREADS];

/* The value thread `src` of the caller's warp passed in. */
template <class T> static T shfl_from(T v, int src) {
    const int me = (int)threadIdx.x;
    shfl_slot[me] = (double)v;
    pthread_barrier_wait(&block_barrier);
    const T r = (T)shfl_slot[(me & ~31) | src];
    pthread_barrier_wait(&block_barrier);
    return r;
}
template <class T> static T __shfl_xor_sync(unsigned, T v, int m) {
    return shfl_from(v, (int)(threadIdx.x & 31) ^ m);
}
template <class T> static T __shfl_sync(unsigned, T v, int src) { return shfl_from(v, src); }
static int __any_sync(unsigned, int p) {
    int any = 0;
    for (int lane = 0; lane < 32; lane++) any |= shfl_from(p, lane) != 0;
    return any;
}
[[maybe_unused]] static float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

/* Element `hi` (0 or 1) of a word holding two f16 or bf16 values, as a float. */
template <class T> static float half_of(unsigned w, int hi) {
    const unsigned short bits = (unsigned short)(hi ? w >> 16 : w & 0xffffu);
    if constexpr (std::is_same<T, __half>::value) {
        __half_raw r;
        r.x = bits;
        return __half2float(__half(r));
    } else {
        __nv_bfloat16_raw r;
        r.x = bits;
        return __bfloat162float(__nv_bfloat16(r));
    }
}

static unsigned frag_a[THREADS][4], frag_b[THREADS][2];

/* mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: c += A (16x16) B (16x8) for the warp. */
template <class T> static void attn_emulate_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    const int me = (int)threadIdx.x, warp = me & ~31;
    memcpy(frag_a[me], a, sizeof frag_a[me]);
    frag_b[me][0] = b0, frag_b[me][1] = b1;
    pthread_barrier_wait(&block_barrier);
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        const unsigned *r = frag_a[warp + lane];
        for (int h = 0; h < 2; h++) {
            A[g][2 * t + h] = half_of<T>(r[0], h);
            A[g + 8][2 * t + h] = half_of<T>(r[1], h);
            A[g][2 * t + 8 + h] = half_of<T>(r[2], h);
            A[g + 8][2 * t + 8 + h] = half_of<T>(r[3], h);
            B[2 * t + h][g] = half_of<T>(frag_b[warp + lane][0], h);
            B[2 * t + 8 + h][g] = half_of<T>(frag_b[warp + lane][1], h);
        }
    }
    pthread_barrier_wait(&block_barrier);
    const int g = (me & 31) >> 2, t = me & 3;
    for (int e = 0; e < 4; e++) {
        const int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        float s = 0;
        for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
        c[e] += s;
    }
}

/* cp.async (16 bytes, zeros when !ok): done at once, so its commit and wait do nothing. */
static void attn_emulate_cp16(void *dst, const void *src, bool ok) {
    if (ok) memcpy(dst, src, 16);
    else memset(dst, 0, 16);
}

static const void *ldsm_row[THREADS];

/* ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lanes 8i .. 8i + 7 give the row addresses of
 * tile i; each thread receives from tile i the elements (row 2t, column g) and (2t + 1, g), the
 * first in the low half. */
static void attn_emulate_ldsm_x4_trans(unsigned r[4], const void *p) {
    const int me = (int)threadIdx.x, warp = me & ~31, g = (me & 31) >> 2, t = me & 3;
    ldsm_row[me] = p;
    pthread_barrier_wait(&block_barrier);
    for (int i = 0; i < 4; i++) {
        const unsigned short *lo = (const unsigned short *)ldsm_row[warp + 8 * i + 2 * t];
        const unsigned short *hi = (const unsigned short *)ldsm_row[warp + 8 * i + 2 * t + 1];
        r[i] = (unsigned)lo[g] | (unsigned)hi[g] << 16;
    }
    pthread_barrier_wait(&block_barrier);
}

#define AMPC_ATTN_EMULATE_MMA 1
#undef __shared__
#define __shared__ static /* one block at a time: a function's statics are its block's memory */
#include "ampc/attention.cuh"

/* ---- a case: inputs, launch, reference --------------------------------------------------- */

template <class T> static float to_float(T x) {
    if constexpr (std::is_same<T, __half>::value) return __half2float(x);
    else return __bfloat162float(x);
}
template <class T> static T from_float(float x) {
    if constexpr (std::is_same<T, __half>::value) return __float2half_rn(x);
    else return __float2bfloat16_rn(x);
}

struct launch {
    const void *q, *k, *v, *mask;
    void *y;
    ampc::attn_desc a;
    unsigned tid;
    bool mma, split; /* split: attn_mma_split */
};

template <class T, int D, bool SAFE, bool MVEC> static void *thread_main(void *p) {
    const launch *l = (const launch *)p;
    threadIdx = {l->tid, 0, 0};
    const T *q = (const T *)l->q, *k = (const T *)l->k, *v = (const T *)l->v, *m = (const T *)l->mask;
    if (l->split) ampc::attn_mma_split<T, D, D, SAFE, MVEC>(q, k, v, m, (T *)l->y, l->a);
    else if (l->mma) ampc::attn_mma<T, D, D, SAFE, MVEC>(q, k, v, m, (T *)l->y, l->a);
    else ampc::attn_rows<T, D, D, SAFE>(q, k, v, m, (T *)l->y, l->a);
    return nullptr;
}

/* Runs every block of the grid, one after the other. */
template <class T, int D, bool SAFE, bool MVEC> static void run_grid(const launch &base) {
    pthread_barrier_init(&block_barrier, nullptr, THREADS);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    for (unsigned z = 0; z < gridDim.z; z++)
        for (unsigned y = 0; y < gridDim.y; y++)
            for (unsigned x = 0; x < gridDim.x; x++) {
                blockIdx = {x, y, z};
                pthread_t th[THREADS];
                launch l[THREADS];
                for (unsigned t = 0; t < THREADS; t++) {
                    l[t] = base, l[t].tid = t;
                    if (pthread_create(&th[t], &attr, thread_main<T, D, SAFE, MVEC>, &l[t])) {
                        fprintf(stderr, "attention_emu: cannot start thread %u\n", t);
                        exit(2);
                    }
                }
                for (unsigned t = 0; t < THREADS; t++) pthread_join(th[t], nullptr);
            }
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&block_barrier);
}

/* Q, K, V [B, S, H*D] uniform in [-2, 2), the mask [B, 1, 1, Sk] by batch (b % 4: none, the last
 * quarter -inf, all -inf, the last half -10000) or, with per_row, [B, 1, Sq, Sk] (the same by
 * batch, keys past i + b masked for odd b: causal, and a NaN in row 3, +inf in row 5), Y [B, Sq, H*D], scale 1/8. Returns the
 * number of elements outside 1e-2 absolute + 1e-2 relative of the reference (NaN must match NaN). */
template <class T, int D, bool SAFE, bool MVEC = false>
static int check(int B, int H, int Sq, int Sk, bool with_mask, bool mma, bool per_row = false,
                 bool split = false) {
    const int mrows = per_row ? Sq : 1;
    const int E = H * D;
    std::vector<T> q((size_t)B * Sq * E), k((size_t)B * Sk * E), v((size_t)B * Sk * E);
    std::vector<T> m((size_t)B * mrows * Sk), y((size_t)B * Sq * E, from_float<T>(12345.0f));
    unsigned long long seed = 7;
    auto uniform = [&] {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return (float)((double)(seed >> 40) / (double)(1ull << 24) * 4 - 2);
    };
    for (T &x : q) x = from_float<T>(uniform());
    for (T &x : k) x = from_float<T>(uniform());
    for (T &x : v) x = from_float<T>(uniform());
    for (int b = 0; b < B; b++)
        for (int i = 0; i < mrows; i++)
            for (int j = 0; j < Sk; j++) {
                const int r = b % 4;
                const float mv = (r == 1 && j >= Sk - Sk / 4) || r == 2 ? -INFINITY
                                 : r == 3 && j >= Sk / 2              ? -10000.0f
                                 : per_row && b % 2 && j > i + b      ? -INFINITY
                                 : per_row && i == 3 && j == 1        ? NAN
                                 : per_row && i == 5 && j == Sk - 1   ? INFINITY
                                                                      : 0.0f;
                m[((size_t)b * mrows + i) * Sk + j] = from_float<T>(mv);
            }
    const long long mb = (long long)mrows * Sk, mi = per_row ? Sk : 0;
    const long long sq = (long long)Sq * E, sk = (long long)Sk * E;
    launch base = {q.data(), k.data(), v.data(), with_mask ? m.data() : nullptr, y.data(),
                   {B, H, Sq, Sk, {sq, D, E, 1}, {sk, D, E, 1}, {sk, D, E, 1}, {mb, 0, mi, 1}, {sq, D, E, 1}, 0.125f},
                   0, mma, split};
    blockDim = {THREADS, 1, 1};
    gridDim = split ? emu_dim3{(unsigned)((Sq + 15) / 16), (unsigned)H, (unsigned)B}
              : mma ? emu_dim3{(unsigned)((Sq + 63) / 64), (unsigned)H, (unsigned)B}
                    : emu_dim3{(unsigned)((B * H * Sq + 3) / 4), 1, 1};
    run_grid<T, D, SAFE, MVEC>(base);

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
                               to_float(k[((size_t)b * Sk + j) * E + h * D + e]);
                    const size_t mr = (size_t)b * mrows + (per_row ? i : 0);
                    const double bias = with_mask ? to_float(m[mr * Sk + j]) : 0;
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
                            acc[e] += p * to_float(v[((size_t)b * Sk + j) * E + h * D + e]);
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
    printf("%-9s %-4s D=%-3d %s B=%d H=%d Sq=%-3d Sk=%-3d mask=%d%s: worst |error| %.3g, %d bad\n",
           split ? "split" : mma ? "attn_mma" : "attn_rows", std::is_same<T, __half>::value ? "f16" : "bf16", D,
           SAFE ? "safe  " : "unsafe", B, H, Sq, Sk, with_mask,
           per_row ? MVEC ? " (per row, 16-byte loads)" : " (per row)" : "", worst, bad);
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
    printf(bad ? "attention_emu: FAILED\n" : "attention_emu: all cases match\n");
    return bad != 0;
}
