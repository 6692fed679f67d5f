/*
 * elementwise.cuh — math for the generated elementwise kernels (codegen/lower_elementwise.c):
 * overloads that pick the f32 or f64 libdevice function from the argument type, and the
 * activations and integer operations whose edge cases must match the reference evaluator
 * (ir/ref/elementwise.c): integer division by zero gives 0, NaN propagates through Max/Min and
 * Relu, Sigmoid is evaluated without overflow.
 */
#pragma once

#include "ampc/common.cuh"

#ifndef INFINITY /* NVRTC has no <math.h> */
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

namespace ampc {

#define AMPC_MATH1(name, f32fn, f64fn)                                                             \
    __device__ __forceinline__ float name(float x) { return f32fn(x); }                           \
    __device__ __forceinline__ double name(double x) { return f64fn(x); }

AMPC_MATH1(m_abs, fabsf, fabs)
AMPC_MATH1(m_sqrt, sqrtf, sqrt)
AMPC_MATH1(m_exp, expf, exp)
AMPC_MATH1(m_expm1, expm1f, expm1)
AMPC_MATH1(m_log, logf, log)
AMPC_MATH1(m_log1p, log1pf, log1p)
AMPC_MATH1(m_erf, erff, erf)
AMPC_MATH1(m_tanh, tanhf, tanh)
AMPC_MATH1(m_floor, floorf, floor)
AMPC_MATH1(m_ceil, ceilf, ceil)
AMPC_MATH1(m_rint, rintf, rint) /* round half to even */
AMPC_MATH1(m_sin, sinf, sin)
AMPC_MATH1(m_cos, cosf, cos)
AMPC_MATH1(m_tan, tanf, tan)
AMPC_MATH1(m_asin, asinf, asin)
AMPC_MATH1(m_acos, acosf, acos)
AMPC_MATH1(m_atan, atanf, atan)
AMPC_MATH1(m_sinh, sinhf, sinh)
AMPC_MATH1(m_cosh, coshf, cosh)
AMPC_MATH1(m_asinh, asinhf, asinh)
AMPC_MATH1(m_acosh, acoshf, acosh)
AMPC_MATH1(m_atanh, atanhf, atanh)
#undef AMPC_MATH1

__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float m_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double m_fmod(double a, double b) { return fmod(a, b); }

template <typename T> __device__ __forceinline__ bool is_nan(T x) { return x != x; }
template <typename T> __device__ __forceinline__ bool is_inf(T x) {
    return x == (T)INFINITY || x == -(T)INFINITY;
}

/* Max / Min propagating NaN, as numpy's maximum / minimum do. */
template <typename T> __device__ __forceinline__ T max_nan(T a, T b) {
    return is_nan(a) || is_nan(b) ? (T)NAN : (a > b ? a : b);
}
template <typename T> __device__ __forceinline__ T min_nan(T a, T b) {
    return is_nan(a) || is_nan(b) ? (T)NAN : (a < b ? a : b);
}

/* 1 / (1 + e^-x), from e = e^-|x| (at most 1: never overflows) on both sides of 0 without a
 * branch: 1 / (1 + e), or e times that (within an ulp of e / (1 + e)). A branch per sign would
 * have a warp over mixed signs run both sides, and the kernels applying it (SiLU, SwiGLU, SE
 * gates) are bound by these instructions rather than by memory. NaN stays NaN. */
template <typename T> __device__ __forceinline__ T sigmoid(T x) {
    const T e = m_exp(-m_abs(x));
    const T r = (T)1 / ((T)1 + e);
    return x >= (T)0 ? r : e * r;
}
template <typename T> __device__ __forceinline__ T gelu_erf(T x) {
    return (T)0.5 * x * ((T)1 + m_erf(x * (T)0.7071067811865476));
}
template <typename T> __device__ __forceinline__ T gelu_tanh(T x) {
    return (T)0.5 * x * ((T)1 + m_tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)));
}
/* log(1 + exp(x)) without overflow for large x. */
template <typename T> __device__ __forceinline__ T softplus(T x) {
    return x > (T)20 ? x + m_log1p(m_exp(-x)) : m_log1p(m_exp(x));
}
template <typename T> __device__ __forceinline__ T sign(T x) {
    return x > (T)0 ? (T)1 : x < (T)0 ? (T)-1 : x; /* 0 and NaN map to themselves */
}

/* Integer arithmetic that wraps instead of overflowing, and division without traps. */
__device__ __forceinline__ long long wrap_add(long long a, long long b) {
    return (long long)((unsigned long long)a + (unsigned long long)b);
}
__device__ __forceinline__ long long wrap_sub(long long a, long long b) {
    return (long long)((unsigned long long)a - (unsigned long long)b);
}
__device__ __forceinline__ long long wrap_mul(long long a, long long b) {
    return (long long)((unsigned long long)a * (unsigned long long)b);
}
__device__ __forceinline__ unsigned long long wrap_add(unsigned long long a, unsigned long long b) { return a + b; }
__device__ __forceinline__ unsigned long long wrap_sub(unsigned long long a, unsigned long long b) { return a - b; }
__device__ __forceinline__ unsigned long long wrap_mul(unsigned long long a, unsigned long long b) { return a * b; }
__device__ __forceinline__ long long idiv(long long a, long long b) {
    if (b == 0) return 0;
    if (b == -1) return (long long)(0ull - (unsigned long long)a); /* INT64_MIN / -1 wraps */
    return a / b;
}
__device__ __forceinline__ unsigned long long idiv(unsigned long long a, unsigned long long b) {
    return b ? a / b : 0;
}
/* Remainder: truncated (fmod: the dividend's sign) or floored (the divisor's sign). */
__device__ __forceinline__ long long imod(long long a, long long b, bool fmod_sign) {
    if (b == 0 || b == -1) return 0;
    long long r = a % b;
    if (!fmod_sign && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
__device__ __forceinline__ unsigned long long imod(unsigned long long a, unsigned long long b, bool) {
    return b ? a % b : 0;
}

} // namespace ampc
