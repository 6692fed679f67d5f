/*
 * resize_taps.h — the interpolation taps of one Resize output coordinate, written once for the
 * host and the GPU: ir/resize.c builds its per-axis tables with it (for the reference evaluator
 * and for the tables code generation bakes into kernels), and the kernels that compute taps at
 * run time (tf_crop_and_resize with a roi known only then: codegen/kernels/conv.cuh) include it
 * through NVRTC as "ampc/resize_taps.h". Plain C that is also CUDA C++: no ampc headers, no
 * allocation; the arithmetic is double throughout (ir/resize.h has the rules).
 */
#ifndef AMPC_IR_RESIZE_TAPS_H
#define AMPC_IR_RESIZE_TAPS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define AMPC_RS_FN __device__ inline
#else
#include <math.h>
#include <stdbool.h>
#define AMPC_RS_FN static inline
#endif

/* The most taps one output coordinate may take (antialiased downsampling by 1/16 needs 64). */
#define AMPC_RESIZE_TAPS_MAX 64

/* Coefficients for `ratio` in (0, 1] at the tap offsets 1 - n/2 .. n/2 from floor into w;
 * returns n. mode: 0 nearest, 1 linear, 2 cubic (coefficient A); nearest: 0 round_prefer_floor,
 * 1 round_prefer_ceil, 2 floor, 3 ceil; aa: antialias, which stretches a linear or cubic kernel
 * by 1 / scale when downsampling and normalises it. */
AMPC_RS_FN int ampc_resize_coeffs(int mode, int nearest, double A, bool aa, double ratio,
                                  double scale, double *w) {
    if (mode == 0) {
        bool right = ratio == 1 ? true
                     : nearest == 0 ? ratio > 0.5
                     : nearest == 1 ? ratio >= 0.5
                                    : nearest == 3;
        w[0] = !right, w[1] = right;
        return 2;
    }
    if (!aa || scale >= 1) {
        if (mode == 1) {
            w[0] = 1 - ratio, w[1] = ratio;
            return 2;
        }
        double r = ratio, q = 1 - ratio;
        w[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
        w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
        w[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
        w[3] = ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A;
        return 4;
    }
    int start = (int)floor((mode == 1 ? -1 : -2) / scale) + 1, cnt = 2 - 2 * start;
    if (cnt > AMPC_RESIZE_TAPS_MAX) cnt = AMPC_RESIZE_TAPS_MAX; /* the callers refuse such scales */
    double sum = 0;
    for (int i = 0; i < cnt; i++) {
        double x = fabs(scale * (start + i - ratio)), v;
        if (mode == 1) {
            v = 1 - x;
            v = v < 0 ? 0 : v > 1 ? 1 : v;
        } else {
            double x2 = x * x, x3 = x2 * x;
            v = x <= 1  ? (A + 2) * x3 - (A + 3) * x2 + 1
                : x < 2 ? A * x3 - 5 * A * x2 + 8 * A * x - 4 * A
                        : 0;
        }
        w[i] = v;
        sum += v;
    }
    for (int i = 0; i < cnt; i++) w[i] /= sum;
    return cnt;
}

/* The taps of input coordinate xo along an axis of `in` entries: the clamped input index and
 * the non-zero weight of each, in idx and wt; returns their count. The n taps of the mode are
 * the positions nearest to xo in the edge-padded input (an integer xo counts as the right end
 * of its left interval); with excl (exclude_outside) taps outside the input weigh 0 and the rest
 * are renormalised. A NaN xo (which its caller extrapolates) takes the taps of 0. */
AMPC_RS_FN int ampc_resize_taps(int mode, int nearest, double A, bool excl, bool aa,
                                double scale, long long in, double xo, long long *idx,
                                double *wt) {
    double w[AMPC_RESIZE_TAPS_MAX];
    if (xo != xo) xo = 0;
    double f = floor(xo), ratio = xo - f;
    if (ratio == 0) f -= 1, ratio = 1;
    int k = ampc_resize_coeffs(mode, nearest, A, aa, ratio, scale, w);
    long long pad = k / 2;
    double first_d = f - k / 2 + 1, lo = (double)-pad, hi = (double)(in + pad - k);
    first_d = first_d < lo ? lo : first_d > hi ? hi : first_d;
    long long first = (long long)first_d;
    if (excl) {
        double sum = 0;
        for (int i = 0; i < k; i++) {
            if (first + i < 0 || first + i >= in) w[i] = 0;
            sum += w[i];
        }
        for (int i = 0; i < k; i++) w[i] /= sum;
    }
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (w[i] == 0) continue;
        long long p = first + i;
        idx[m] = p < 0 ? 0 : p >= in ? in - 1 : p;
        wt[m] = w[i];
        m++;
    }
    return m;
}

#endif
