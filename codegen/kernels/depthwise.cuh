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
 * / 8) consecutive output pixels (over n, oh, ow), or tiles of OT pixels of one output row (the
 * sliding form, dw_nhwc_rows): the CB / 8 threads of one pixel read its channels as adjacent
 * 16-byte chunks, neighbouring pixels' threads the neighbouring columns of x, so a block's window
 * reads come from L1 after the first. The block's CB filters go to shared memory once, tap-major
 * ([KH * KW][CB] floats), so the 8 weights a thread needs for a tap are two 16-byte loads every
 * thread of a pixel group shares.
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

/* Adds the bias and z (at element `at` of y) to the 8 channels from c, applies the ReLU, stores. */
template <typename T, bool RELU>
__device__ __forceinline__ void dw_finish(float acc[8], const T *__restrict__ bias,
                                          const T *__restrict__ z, T *__restrict__ y, i64 at,
                                          int c) {
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

/* The block's CB filters into shared memory, tap-major ([KH * KW][CB] floats). */
template <typename T, int TAPS, int CB>
__device__ __forceinline__ void dw_filters(float *dw_w, const T *__restrict__ w, int c0) {
    for (int i = threadIdx.x; i < CB * TAPS; i += 256) {
        const int c = i / TAPS, tap = i % TAPS;
        dw_w[tap * CB + c] = cvt<float>(w[(i64)(c0 + c) * TAPS + tap]);
    }
    __syncthreads();
}

/* acc += xv * the 8 weights of one tap (two 16-byte shared-memory loads). */
__device__ __forceinline__ void dw_fma8(float acc[8], const float xv[8], const float *wt) {
    const float4 w0 = reinterpret_cast<const float4 *>(wt)[0];
    const float4 w1 = reinterpret_cast<const float4 *>(wt)[1];
    acc[0] += xv[0] * w0.x, acc[1] += xv[1] * w0.y, acc[2] += xv[2] * w0.z;
    acc[3] += xv[3] * w0.w, acc[4] += xv[4] * w1.x, acc[5] += xv[5] * w1.y;
    acc[6] += xv[6] * w1.z, acc[7] += xv[7] * w1.w;
}

/* The general form, any stride and dilation, one output pixel a thread: launch (ceil(pixels /
 * (256 / (CB / 8))), C / CB) blocks of 256 threads with CB * KH * KW * 4 bytes of dynamic shared
 * memory. */
template <typename T, int KH, int KW, int CB, bool RELU>
__device__ __forceinline__ void dw_nhwc(const T *__restrict__ x, const T *__restrict__ w,
                                        const T *__restrict__ bias, const T *__restrict__ z,
                                        T *__restrict__ y, const dw_desc d) {
    extern __shared__ float dw_w[]; /* [KH * KW][CB] */
    constexpr int VEC = CB / 8, PIX = 256 / VEC;
    const int c0 = blockIdx.y * CB;
    dw_filters<T, KH * KW, CB>(dw_w, w, c0);
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
            dw_fma8(acc, xv, dw_w + (r * KW + s) * CB + v * 8);
        }
    }
    dw_finish<T, RELU>(acc, bias, z, y, p * d.C + c, c);
}

/* The sliding form, horizontal stride SW (1 or 2) and no dilation, OT output pixels of one row a
 * thread: each input column of a filter row is loaded once for the OT outputs whose windows
 * hold it ((OT - 1) * SW + KW loads a row instead of OT * KW) and the row's KW taps are loaded
 * once for all of them. Each output's sum runs over its window in the same order as dw_nhwc's,
 * so both forms give the same bits. d.pixels counts N * HO * ceil(WO / OT) tiles; launch
 * (ceil(tiles / (256 / (CB / 8))), C / CB) blocks as for dw_nhwc. */
template <typename T, int KH, int KW, int CB, int SW, int OT, bool RELU>
__device__ __forceinline__ void dw_nhwc_rows(const T *__restrict__ x, const T *__restrict__ w,
                                             const T *__restrict__ bias, const T *__restrict__ z,
                                             T *__restrict__ y, const dw_desc d) {
    extern __shared__ float dw_w[]; /* [KH * KW][CB] */
    constexpr int VEC = CB / 8, PIX = 256 / VEC, COLS = (OT - 1) * SW + KW;
    const int c0 = blockIdx.y * CB;
    dw_filters<T, KH * KW, CB>(dw_w, w, c0);
    const int v = threadIdx.x % VEC;
    const i64 p = (i64)blockIdx.x * PIX + threadIdx.x / VEC;
    if (p >= d.pixels) return;
    const int c = c0 + v * 8, tiles = (d.WO + OT - 1) / OT;
    const int ow0 = (int)(p % tiles) * OT, oh = (int)(p / tiles % d.HO);
    const i64 n = p / ((i64)tiles * d.HO);
    float acc[OT][8];
#pragma unroll
    for (int o = 0; o < OT; o++)
#pragma unroll
        for (int i = 0; i < 8; i++) acc[o][i] = 0.0f;
    const T *xn = x + n * d.H * d.W * d.C + c;
    const int iw0 = ow0 * SW - d.pw;
#pragma unroll
    for (int r = 0; r < KH; r++) {
        const int ih = oh * d.sh - d.ph + r;
        if (ih < 0 || ih >= d.H) continue;
        const T *xr = xn + (i64)ih * d.W * d.C;
        float wr[KW][8]; /* the row's taps, in registers for the OT outputs */
#pragma unroll
        for (int s = 0; s < KW; s++) {
            const float4 *wt = reinterpret_cast<const float4 *>(dw_w + (r * KW + s) * CB + v * 8);
            const float4 w0 = wt[0], w1 = wt[1];
            wr[s][0] = w0.x, wr[s][1] = w0.y, wr[s][2] = w0.z, wr[s][3] = w0.w;
            wr[s][4] = w1.x, wr[s][5] = w1.y, wr[s][6] = w1.z, wr[s][7] = w1.w;
        }
#pragma unroll
        for (int j = 0; j < COLS; j++) {
            const int iw = iw0 + j;
            if (iw < 0 || iw >= d.W) continue;
            float xv[8];
            dw_load8(xr + (i64)iw * d.C, xv);
#pragma unroll
            for (int o = 0; o < OT; o++) {
                const int s = j - o * SW; /* this column's tap in output o's window */
                if (s >= 0 && s < KW) {
#pragma unroll
                    for (int i = 0; i < 8; i++) acc[o][i] += xv[i] * wr[s][i];
                }
            }
        }
    }
    const i64 row = (n * d.HO + oh) * d.WO;
#pragma unroll
    for (int o = 0; o < OT; o++)
        if (ow0 + o < d.WO) dw_finish<T, RELU>(acc[o], bias, z, y, (row + ow0 + o) * d.C + c, c);
}

} // namespace ampc
