/*
 * emu.h — the CUDA execution model, emulated on the CPU, for the kernel emulators of
 * bench/kernels (attention_emu.cpp, gemm_emu.cpp, norm_emu.cpp): include it before the kernel's header
 * (ampc/attention.cuh, ampc/gemm.cuh, ...) and run the kernel with emu_launch, one POSIX thread
 * per CUDA thread, one block at a time.
 *
 * It defines threadIdx (per thread), blockIdx, blockDim and gridDim, __syncthreads,
 * __syncthreads_and, the warp shuffles (__shfl_xor_sync, __shfl_sync, __any_sync),
 * __int_as_float and __longlong_as_double (move.cuh's bit casts), __fmul_rn and its kin
 * (common.cuh's steps without contraction), and the emu_* functions
 * that codegen/kernels/mma.cuh calls under AMPC_EMULATE_MMA (defined here): mma.sync m16n8k16,
 * cp.async and ldmatrix.x4 (plain and transposed). __shared__ becomes static: with one block
 * at a time a function's statics are its block's shared memory.
 *
 * The warp operations (shuffles, ldmatrix, mma.sync) are barriers of the warp's threads here:
 * the 32 threads of a warp must reach them in the same order and as often (a warp whose lanes
 * diverge around them deadlocks), while different warps may take different branches. mma.sync is computed from the fragments of the warp's 32
 * threads as the PTX ISA lays them out (see mma.cuh), ldmatrix from the row addresses of the
 * warp's lanes, cp.async as an immediate copy (so its commit and wait do nothing). That layout is
 * the emulators' assumption: they validate everything around the instructions, the GPU tests
 * validate the instructions themselves.
 */
#pragma once

#include <pthread.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

struct emu_dim3 {
    unsigned x, y, z;
};
inline thread_local emu_dim3 threadIdx;
inline emu_dim3 blockIdx, blockDim, gridDim;

enum { EMU_MAX_THREADS = 256 }; /* the largest block emu_launch runs */
inline pthread_barrier_t emu_block_barrier; /* all the threads of the running block */
inline pthread_barrier_t emu_warp_barrier[EMU_MAX_THREADS / 32]; /* each warp's threads */

inline void __syncthreads() { pthread_barrier_wait(&emu_block_barrier); }

/* ---- warp shuffles -------------------------------------------------------------------------- */

inline double emu_shfl_slot[EMU_MAX_THREADS];

/* The value thread `src` (a lane) of the caller's warp passed in: a barrier of the warp's
 * threads only, so that warps may take different branches around their shuffles. */
template <class T> T emu_shfl_from(T v, int src) {
    const int me = (int)threadIdx.x;
    emu_shfl_slot[me] = (double)v;
    pthread_barrier_wait(&emu_warp_barrier[me >> 5]);
    const T r = (T)emu_shfl_slot[(me & ~31) | src];
    pthread_barrier_wait(&emu_warp_barrier[me >> 5]);
    return r;
}
template <class T> T __shfl_xor_sync(unsigned, T v, int m) {
    return emu_shfl_from(v, (int)(threadIdx.x & 31) ^ m);
}
template <class T> T __shfl_sync(unsigned, T v, int src) { return emu_shfl_from(v, src); }
inline int __any_sync(unsigned, int p) {
    int any = 0;
    for (int lane = 0; lane < 32; lane++) any |= emu_shfl_from(p, lane) != 0;
    return any;
}
/* Every thread of the block votes: whether all voted true (a barrier, as on the GPU). */
inline int emu_vote_slot[EMU_MAX_THREADS];
inline int __syncthreads_and(int p) {
    const int me = (int)threadIdx.x;
    emu_vote_slot[me] = p != 0;
    pthread_barrier_wait(&emu_block_barrier);
    int all = 1;
    for (int t = 0; t < (int)blockDim.x; t++) all &= emu_vote_slot[t];
    pthread_barrier_wait(&emu_block_barrier);
    return all;
}
inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
inline float __uint_as_float(unsigned i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
inline double __longlong_as_double(long long i) {
    double d;
    memcpy(&d, &i, sizeof d);
    return d;
}
/* The steps rounded on their own (common.cuh's mul_rn, add_rn): the emulators build with
 * -ffp-contract=off, so a product and a sum round as on the device. */
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }

/* ---- mma.cuh's primitives ------------------------------------------------------------------- */

/* Element `hi` (0 or 1) of a word holding two f16 or bf16 values, as a float. */
template <class T> float half_of(unsigned w, int hi) {
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

inline unsigned emu_frag_a[EMU_MAX_THREADS][4], emu_frag_b[EMU_MAX_THREADS][2];

/* mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: c += A (16x16) B (16x8) for the warp. */
template <class T> void emu_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    const int me = (int)threadIdx.x, warp = me & ~31;
    memcpy(emu_frag_a[me], a, sizeof emu_frag_a[me]);
    emu_frag_b[me][0] = b0, emu_frag_b[me][1] = b1;
    pthread_barrier_wait(&emu_warp_barrier[me >> 5]);
    float A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        const unsigned *r = emu_frag_a[warp + lane], *rb = emu_frag_b[warp + lane];
        for (int h = 0; h < 2; h++) {
            A[g][2 * t + h] = half_of<T>(r[0], h);
            A[g + 8][2 * t + h] = half_of<T>(r[1], h);
            A[g][2 * t + 8 + h] = half_of<T>(r[2], h);
            A[g + 8][2 * t + 8 + h] = half_of<T>(r[3], h);
            B[2 * t + h][g] = half_of<T>(rb[0], h);
            B[2 * t + 8 + h][g] = half_of<T>(rb[1], h);
        }
    }
    pthread_barrier_wait(&emu_warp_barrier[me >> 5]);
    const int g = (me & 31) >> 2, t = me & 3;
    for (int e = 0; e < 4; e++) {
        const int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        float s = 0;
        for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
        c[e] += s;
    }
}

/* cp.async (16 bytes, zeros and no read when !ok): done at once. */
inline void emu_cp16(void *dst, const void *src, bool ok) {
    if (ok) memcpy(dst, src, 16);
    else memset(dst, 0, 16);
}

inline const void *emu_ldsm_row[EMU_MAX_THREADS];

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8i .. 8i + 7 give the row addresses
 * of tile i; register i of each thread receives from tile i, plain, the elements (row g,
 * columns 2t and 2t + 1), transposed, (rows 2t and 2t + 1, column g); the first in the low half. */
inline void emu_ldsm_x4(unsigned r[4], const void *p, bool trans) {
    const int me = (int)threadIdx.x, warp = me & ~31, g = (me & 31) >> 2, t = me & 3;
    emu_ldsm_row[me] = p;
    pthread_barrier_wait(&emu_warp_barrier[me >> 5]);
    for (int i = 0; i < 4; i++) {
        const unsigned short *row = (const unsigned short *)emu_ldsm_row[warp + 8 * i + g];
        const unsigned short *lo = (const unsigned short *)emu_ldsm_row[warp + 8 * i + 2 * t];
        const unsigned short *hi = (const unsigned short *)emu_ldsm_row[warp + 8 * i + 2 * t + 1];
        r[i] = trans ? (unsigned)lo[g] | (unsigned)hi[g] << 16
                     : (unsigned)row[2 * t] | (unsigned)row[2 * t + 1] << 16;
    }
    pthread_barrier_wait(&emu_warp_barrier[me >> 5]);
}

#define AMPC_EMULATE_MMA 1
#undef __shared__
#define __shared__ static /* one block at a time: a function's statics are its block's memory */

/* ---- the launch ----------------------------------------------------------------------------- */

/* Runs body() as each of `threads` CUDA threads (a POSIX thread each, threadIdx.x set) of every
 * block of `grid`, one block after the other; blockIdx, blockDim and gridDim are set. Any count
 * up to EMU_MAX_THREADS; a kernel using warp operations needs whole warps (a multiple of 32). */
template <class F> void emu_launch(emu_dim3 grid, unsigned threads, const F &body) {
    if (threads == 0 || threads > EMU_MAX_THREADS) {
        fprintf(stderr, "emu_launch: %u threads a block (at most %d)\n", threads, EMU_MAX_THREADS);
        exit(2);
    }
    struct start {
        const F *body;
        unsigned tid;
    };
    void *(*thread_main)(void *) = [](void *p) -> void * {
        const start *s = (const start *)p;
        threadIdx = {s->tid, 0, 0};
        (*s->body)();
        return nullptr;
    };
    gridDim = grid, blockDim = {threads, 1, 1};
    pthread_barrier_init(&emu_block_barrier, nullptr, threads);
    const unsigned warps = (threads + 31) / 32;
    for (unsigned w = 0; w < warps; w++)
        pthread_barrier_init(&emu_warp_barrier[w], nullptr, w + 1 < warps ? 32 : threads - 32 * w);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = {x, y, z};
                pthread_t th[EMU_MAX_THREADS];
                start st[EMU_MAX_THREADS];
                for (unsigned t = 0; t < threads; t++) {
                    st[t] = {&body, t};
                    if (pthread_create(&th[t], &attr, thread_main, &st[t])) {
                        fprintf(stderr, "emu_launch: cannot start thread %u\n", t);
                        exit(2);
                    }
                }
                for (unsigned t = 0; t < threads; t++) pthread_join(th[t], nullptr);
            }
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&emu_block_barrier);
    for (unsigned w = 0; w < warps; w++) pthread_barrier_destroy(&emu_warp_barrier[w]);
}

/* f16 / bf16 <-> float on the host, for the emulators' inputs and references. */
template <class T> [[maybe_unused]] static float to_float(T x) {
    if constexpr (std::is_same<T, __half>::value) return __half2float(x);
    else return __bfloat162float(x);
}
template <class T> [[maybe_unused]] static T from_float(float x) {
    if constexpr (std::is_same<T, __half>::value) return __float2half_rn(x);
    else return __float2bfloat16_rn(x);
}
