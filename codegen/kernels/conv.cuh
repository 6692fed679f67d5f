/*
 * conv.cuh — device helpers for the generated contraction, convolution and pooling kernels
 * (codegen/lower_contract.c, lower_conv.c, lower_resize.c). The kernels themselves are generated
 * with their geometry baked in; what lives here is what must match the reference evaluator bit
 * for bit where it matters:
 *   - arithmetic that the reference does in double and then truncates or rounds to an integer
 *     (integer Resize, requantisation): done with the _rn steps of common.cuh, which the
 *     compiler never contracts into a fused multiply-add, so they round as the host's do;
 *   - float -> integer stores that wrap as the reference's store does (through int64);
 *   - the pools' NaN-propagating maximum (the first maximum wins ties, NaN beats everything);
 *   - warp reductions for the global pools.
 * Everything is in namespace ampc::cv.
 */
#pragma once

#include "ampc/common.cuh"
/* The taps of a Resize coordinate (ir/resize_taps.h, the reference's own): the kernels of
 * tf_crop_and_resize with a roi known only at run time compute them with ampc_resize_taps. */
#include "ampc/resize_taps.h"

namespace ampc {
namespace cv {

/* ---- exact double / float steps (mul_rn, add_rn: common.cuh) ------------------------------- */
/* acc + w * v with the product and the sum rounded separately (no FMA), as the host computes. */
template <typename T> __device__ __forceinline__ T madd_rn(T acc, T w, T v) {
    return add_rn(acc, mul_rn(w, v));
}

/* ---- stores ---------------------------------------------------------------------------------- */
/* A double into an element of T the way the reference's store does: floats round to nearest;
 * integers truncate toward zero and saturate to T's range, NaN -> 0 (sat_int). */
template <typename T> struct from_f64 {
    __device__ __forceinline__ static T run(double v) { return sat_int<T>(v); }
};
template <> struct from_f64<bool> {
    __device__ __forceinline__ static bool run(double v) { return v != 0.0; }
};
template <> struct from_f64<float> {
    __device__ __forceinline__ static float run(double v) { return (float)v; }
};
template <> struct from_f64<double> {
    __device__ __forceinline__ static double run(double v) { return v; }
};
template <> struct from_f64<f16> {
    /* through f32, as the reference rounds (double -> float -> half) */
    __device__ __forceinline__ static f16 run(double v) { return __float2half_rn((float)v); }
};
template <> struct from_f64<bf16> {
    __device__ __forceinline__ static bf16 run(double v) { return __float2bfloat16_rn((float)v); }
};
template <typename T> __device__ __forceinline__ T store_f64(double v) { return from_f64<T>::run(v); }

/* ---- quantisation ---------------------------------------------------------------------------- */
/* The requantisation multiplier sa * sb / sy, rounded to f32 at each step as the reference does. */
__device__ __forceinline__ float requant_scale(float sa, float sb, float sy) {
    return __fdiv_rn(__fmul_rn(sa, sb), sy);
}
/* v rounded half to even and saturated into [lo, hi]; NaN gives 0. */
__device__ __forceinline__ double sat_rint(double v, double lo, double hi) {
    v = rint(v);
    return v != v ? 0.0 : v < lo ? lo : v > hi ? hi : v;
}

/* ---- pooling --------------------------------------------------------------------------------- */
/* -infinity of a float type (NVRTC has no <math.h> macros). */
template <typename T> __device__ __forceinline__ T neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double neg_inf<double>() {
    return -__longlong_as_double(0x7ff0000000000000LL);
}

/* Whether v replaces the running maximum `best`: larger, or NaN while best is not. */
template <typename T> __device__ __forceinline__ bool max_takes(T v, T best) {
    return v > best || (v != v && best == best);
}

__device__ __forceinline__ float absv(float x) { return fabsf(x); }
__device__ __forceinline__ double absv(double x) { return fabs(x); }
__device__ __forceinline__ float powv(float x, float p) { return powf(x, p); }
__device__ __forceinline__ double powv(double x, double p) { return pow(x, p); }

/* Warp-wide sum and NaN-propagating max; every lane of the warp must take part. */
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <typename T> __device__ __forceinline__ T warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) {
        T u = __shfl_xor_sync(0xffffffffu, v, o);
        if (max_takes(u, v)) v = u;
    }
    return v;
}

} // namespace cv
} // namespace ampc
