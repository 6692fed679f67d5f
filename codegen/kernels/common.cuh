/*
 * common.cuh — the type helpers every generated kernel includes (as "ampc/common.cuh"): short
 * names for the element types, the accumulation type of each, and load / store / convert
 * helpers that go through f32 (f64 for double) so one kernel template serves every dtype.
 *
 * This file is embedded into ampc at build time and handed to NVRTC as an in-memory header; it
 * must compile on its own under `--std=c++17 -default-device` for compute_80 and up, with only
 * the CUDA toolkit headers on the include path (no libstdc++).
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ampc {

/* ---- element types (the names ampc_dtype uses) --------------------------------------------- */
typedef float f32;
typedef double f64;
typedef __half f16;
typedef __nv_bfloat16 bf16;
typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef unsigned int u32;
typedef unsigned long long u64;

/* ---- accumulation type: what arithmetic on an element is done in ---------------------------- */
/* Floats narrower than f32 compute in f32, f64 in f64, integers and bool in themselves. */
template <typename T> struct acc { typedef T type; };
template <> struct acc<f16> { typedef float type; };
template <> struct acc<bf16> { typedef float type; };
template <typename T> using acc_t = typename acc<T>::type;

/* ---- conversions ---------------------------------------------------------------------------- */
/* to_f32 / to_f64: any element to a wide float (f16/bf16 exactly; ints as static_cast). */
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(double x) { return (float)x; }
__device__ __forceinline__ float to_f32(f16 x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ float to_f32(T x) { return (float)x; }

__device__ __forceinline__ double to_f64(f16 x) { return (double)__half2float(x); }
__device__ __forceinline__ double to_f64(bf16 x) { return (double)__bfloat162float(x); }
template <typename T> __device__ __forceinline__ double to_f64(T x) { return (double)x; }

/* int_range<T>: whether T is an integer element type, and its range. */
template <typename T> struct int_range { static constexpr bool is_int = false; };
#define AMPC_INT_RANGE(T, LO, HI)                                                                \
    template <> struct int_range<T> {                                                            \
        static constexpr bool is_int = true;                                                     \
        static constexpr T lo = LO, hi = HI;                                                     \
    };
AMPC_INT_RANGE(i8, -128, 127)
AMPC_INT_RANGE(u8, 0, 255)
AMPC_INT_RANGE(i16, -32768, 32767)
AMPC_INT_RANGE(unsigned short, 0, 65535)
AMPC_INT_RANGE(i32, -2147483647 - 1, 2147483647)
AMPC_INT_RANGE(u32, 0u, 4294967295u)
AMPC_INT_RANGE(i64, -9223372036854775807LL - 1, 9223372036854775807LL)
AMPC_INT_RANGE(u64, 0ull, 18446744073709551615ull)
#undef AMPC_INT_RANGE

/* sat_int<To>(x): a float or double into integer type To, truncated toward zero and saturated
 * to To's range; NaN gives 0 (what ir/ref's store does). Written out because a C++ cast of a
 * value out of To's range is undefined. (F)hi is hi or the power of two above it, so below it
 * the truncation fits; (F)lo is exact. */
template <typename To, typename F> __device__ __forceinline__ To sat_int(F x) {
    if (x != x) return (To)0;
    if (x >= (F)int_range<To>::hi) return int_range<To>::hi;
    if (x <= (F)int_range<To>::lo) return int_range<To>::lo;
    return (To)x;
}

/* cvt<To>(x): element conversion with round-to-nearest-even into f16/bf16, nonzero -> true for
 * bool (NaN is true), sat_int for float -> integer, and C semantics otherwise (integers wrap). */
template <typename To> struct cvt_impl {
    template <typename From> __device__ __forceinline__ static To run(From x) { return (To)x; }
    __device__ __forceinline__ static To run(float x) { return from_float(x); }
    __device__ __forceinline__ static To run(double x) { return from_float(x); }
    __device__ __forceinline__ static To run(f16 x) { return from_float(__half2float(x)); }
    __device__ __forceinline__ static To run(bf16 x) { return from_float(__bfloat162float(x)); }
    template <typename F> __device__ __forceinline__ static To from_float(F x) {
        if constexpr (int_range<To>::is_int) return sat_int<To>(x);
        else return (To)x;
    }
};
template <> struct cvt_impl<f16> {
    __device__ __forceinline__ static f16 run(f16 x) { return x; }
    __device__ __forceinline__ static f16 run(double x) { return __double2half(x); }
    template <typename From> __device__ __forceinline__ static f16 run(From x) {
        return __float2half_rn(to_f32(x));
    }
};
template <> struct cvt_impl<bf16> {
    __device__ __forceinline__ static bf16 run(bf16 x) { return x; }
    __device__ __forceinline__ static bf16 run(double x) { return __double2bfloat16(x); }
    template <typename From> __device__ __forceinline__ static bf16 run(From x) {
        return __float2bfloat16_rn(to_f32(x));
    }
};
template <> struct cvt_impl<bool> {
    template <typename From> __device__ __forceinline__ static bool run(From x) {
        return to_f64(x) != 0.0;
    }
    __device__ __forceinline__ static bool run(bool x) { return x; }
};
template <typename To, typename From> __device__ __forceinline__ To cvt(From x) {
    return cvt_impl<To>::run(x);
}

/* ---- exact steps ---------------------------------------------------------------------------- */
/* A product or sum rounded on its own, as the reference rounds each op: the _rn intrinsics are
 * never contracted into a fused multiply-add (NVRTC contracts a * b + c by default). */
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }

/* ---- launch order ---------------------------------------------------------------------------- */
/* The first statement of every generated kernel (codegen/emit.c). On sm_90 and newer: wait until
 * the grid this one depends on has completed and its memory is visible (a no-op unless the
 * kernel was launched as a programmatic dependent, runtime/prov_kernel.c), then allow the grid
 * after this one to be scheduled; it waits the same way before touching memory. */
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* Asks L2 for bytes at p (a constant the next step reads), one 128-byte line a thread at a time
 * over the whole grid; nothing waits for it (codegen/emit.c, "L2 prefetch"). */
__device__ __forceinline__ void prefetch_l2(const void *p, long long bytes) {
#if defined(__CUDA_ARCH__)
    const long long threads = (long long)gridDim.x * gridDim.y * gridDim.z * blockDim.x *
                              blockDim.y * blockDim.z;
    const long long block =
        ((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const long long t = block * blockDim.x * blockDim.y * blockDim.z +
                        ((long long)threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x +
                        threadIdx.x;
    for (long long at = t * 128; at < bytes; at += threads * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char *>(p) + at));
#endif
}

/* A kernel attribute: launched as clusters of x * y * z blocks where clusters exist (sm_90 and
 * newer); elsewhere nothing, and the kernel's code does without (codegen/emit.c). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define AMPC_CLUSTER_DIMS(x, y, z) __cluster_dims__(x, y, z)
#else
#define AMPC_CLUSTER_DIMS(x, y, z)
#endif

/* ---- memory --------------------------------------------------------------------------------- */
/* ld(p, i): element i of p in its accumulation type; st(p, i, v): stores v converted to T. */
template <typename T> __device__ __forceinline__ acc_t<T> ld(const T *p, i64 i) {
    return cvt<acc_t<T>>(p[i]);
}
template <typename T, typename V> __device__ __forceinline__ void st(T *p, i64 i, V v) {
    p[i] = cvt<T>(v);
}

/* Vector access: N consecutive elements of T in one load or store of N * sizeof(T) bytes (2, 4,
 * 8 or 16, or two halves of a wider vector; p aligned to one access), converted to or from f32. */
template <int BYTES> struct raw_vec;
template <> struct raw_vec<2> { typedef unsigned short type; };
template <> struct raw_vec<4> { typedef unsigned int type; };
template <> struct raw_vec<8> { typedef uint2 type; };
template <> struct raw_vec<16> { typedef uint4 type; };

template <int N, typename T> __device__ __forceinline__ void ld_vec(const T *p, float *v) {
    if constexpr (N * sizeof(T) > 16) { /* wider than one access: two halves */
        ld_vec<N / 2>(p, v);
        ld_vec<N / 2>(p + N / 2, v + N / 2);
        return;
    } else {
    typedef typename raw_vec<N * sizeof(T)>::type R;
    const R raw = *reinterpret_cast<const R *>(p);
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int i = 0; i < N; i++) v[i] = to_f32(e[i]);
    }
}
template <int N, typename T> __device__ __forceinline__ void st_vec(T *p, const float *v) {
    if constexpr (N * sizeof(T) > 16) {
        st_vec<N / 2>(p, v);
        st_vec<N / 2>(p + N / 2, v + N / 2);
        return;
    } else {
    typedef typename raw_vec<N * sizeof(T)>::type R;
    R raw;
    T *e = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int i = 0; i < N; i++) e[i] = cvt<T>(v[i]);
    *reinterpret_cast<R *>(p) = raw;
    }
}

} // namespace ampc
