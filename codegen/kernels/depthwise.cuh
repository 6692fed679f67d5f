/*
 * depthwise.cuh — depthwise 2-D convolution, channels last (codegen/lower_conv.c): every channel
 * convolved with its own KH x KW filter, y = act(conv(x, w) + b + z) rounded once to T, as the
 * reference (ir/ref/conv.c, group = C) computes it, the sum of the window's products in f32.
 *
 *   x, z, y  [N, H, W, C] / [N, HO, WO, C] (T: __half or __nv_bfloat16), 16-byte aligned, C a
 *            multiple of 8: each thread reads and writes 8 channels at once;
 *   w        [C, KH, KW] (the layout pass's [M, R, S, C / group] with C / group = 1);
 *   bias     [C] or null.
 *
 * A block of 256 threads takes CB channels (a multiple of 8 dividing C, at most 64) of 256 / (CB
 * / 8) consecutive output pixels (over n, oh, ow): the CB / 8 threads of one pixel read its
 * channels as adjacent 16-byte chunks, neighbouring pixels' threads the neighbouring columns of
 * x, so a block's window reads come from L1 after the first. The block's CB filters go to shared
 * memory once, tap-major ([KH * KW][CB] floats), so the 8 weights a thread needs for a tap are two
 * 16-byte loads every thread of a pixel group shares.
 */
#pragma once

#include "ampc/common.cuh"

namespace ampc {

/* Geometry of one depthwise convolution (pads may differ before and after: the window's points
 * outside x are skipped). */
struct dw_desc {
    i64 pixels;           /* N * HO * WO */
    int H, W, C, HO, WO;
    int sh, sw, ph, pw, dh, dw;
};

template <typename T> __device__ __forceinline__ void dw_load8(const T *p, float v[8]) {
    uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const T *h = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = cvt<float>(h[i]);
}

template <typename T> __device__ __forceinline__ void dw_store8(T *p, const float v[8]) {
    uint4 raw;
    T *h = reinterpret_cast<T *>(&raw);
#pragma unroll
    for (int i = 0; i < 8; i++) h[i] = cvt<T>(v[i]);
    *reinterpret_cast<uint4 *>(p) = raw;
}

/* The kernel's body: launch (ceil(pixels / (256 / (CB / 8))), C / CB) blocks of 256 threads with
 * CB * KH * KW * 4 bytes of dynamic shared memory. */
template <typename T, int KH, int KW, int CB, bool RELU>
__device__ __forceinline__ void dw_nhwc(const T *__restrict__ x, const T *__restrict__ w,
                                        const T *__restrict__ bias, const T *__restrict__ z,
                                        T *__restrict__ y, const dw_desc d) {
    extern __shared__ float dw_w[]; /* [KH * KW][CB] */
    constexpr int TAPS = KH * KW, VEC = CB / 8, PIX = 256 / VEC;
    const int c0 = blockIdx.y * CB;
    for (int i = threadIdx.x; i < CB * TAPS; i += 256) {
        const int c = i / TAPS, tap = i % TAPS;
        dw_w[tap * CB + c] = cvt<float>(w[(i64)(c0 + c) * TAPS + tap]);
    }
    __syncthreads();
    const int v = threadIdx.x % VEC;
    const i64 p = (i64)blockIdx.x * PIX + threadIdx.x / VEC;
    if (p >= d.pixels) return;
    const int c = c0 + v * 8;
    const int ow = (int)(p % d.WO), oh = (int)(p / d.WO % d.HO);
    const i64 n = p / ((i64)d.WO * d.HO);
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.0f;
    const T *xn = x + n * d.H * d.W * d.C + c;
#pragma unroll
    for (int r = 0; r < KH; r++) {
        const int ih = oh * d.sh - d.ph + r * d.dh;
        if (ih < 0 || ih >= d.H) continue;
#pragma unroll
        for (int s = 0; s < KW; s++) {
            const int iw = ow * d.sw - d.pw + s * d.dw;
            if (iw < 0 || iw >= d.W) continue;
            float xv[8];
            dw_load8(xn + ((i64)ih * d.W + iw) * d.C, xv);
            const float4 *wt = reinterpret_cast<const float4 *>(dw_w + (r * KW + s) * CB + v * 8);
            const float4 w0 = wt[0], w1 = wt[1];
            acc[0] += xv[0] * w0.x, acc[1] += xv[1] * w0.y, acc[2] += xv[2] * w0.z;
            acc[3] += xv[3] * w0.w, acc[4] += xv[4] * w1.x, acc[5] += xv[5] * w1.y;
            acc[6] += xv[6] * w1.z, acc[7] += xv[7] * w1.w;
        }
    }
    const i64 at = p * d.C + c;
    if (bias) {
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] += cvt<float>(bias[c + i]);
    }
    if (z) {
        float zv[8];
        dw_load8(z + at, zv);
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] += zv[i];
    }
    if (RELU) {
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] = acc[i] < 0.0f ? 0.0f : acc[i];
    }
    dw_store8(y + at, acc);
}

} // namespace ampc
