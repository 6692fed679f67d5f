/*
 * signal.c — reference kernels for the signal-processing family: DFT, STFT, the window
 * generators and MelWeightMatrix (see ir/infer/signal.c for the shapes).
 *
 * Transforms run on lines of complex doubles through one mixed-radix FFT: a length n splits at its
 * smallest prime factor p into p interleaved transforms of length n / p, recombined with the
 * twiddle factors, so the cost is O(n * (sum of n's prime factors)): O(n log n) for smooth lengths,
 * and at worst O(n^2) for a prime length, the plain DFT. Twiddles come from one table of the
 * top-level length, indexed exactly (k * t mod n), so no angle accumulates rounding. Results
 * round once to the output dtype.
 */
#include "ref.h"
#include "ir/signal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double PI = 3.14159265358979323846;

typedef struct cplx {
    double re, im;
} cplx;

/* The smallest prime factor of n >= 2. */
static int64_t smallest_factor(int64_t n) {
    if (n % 2 == 0) return 2;
    for (int64_t p = 3; p <= n / p; p += 2)
        if (n % p == 0) return p;
    return n;
}

/* y[k] = sum over t < n of x[t * xs] * w^(k t), where w = tw[ratio] is the n-th root of unity
 * (tw holds the powers of the top-level root, n * ratio entries). `scratch` has n entries; y and
 * scratch must not overlap x. */
static void fft(const cplx *x, int64_t xs, int64_t n, int64_t ratio, const cplx *tw, cplx *y,
                cplx *scratch) {
    if (n == 1) {
        y[0] = x[0];
        return;
    }
    int64_t p = smallest_factor(n), m = n / p;
    /* The p sub-transforms of the decimated sequences x[r], x[r + p], ... land in scratch; each
     * uses the matching part of y as its own scratch. */
    for (int64_t r = 0; r < p; r++)
        fft(x + r * xs, xs * p, m, ratio * p, tw, scratch + r * m, y + r * m);
    for (int64_t k = 0; k < n; k++) {
        cplx acc = {0, 0};
        for (int64_t r = 0; r < p; r++) {
            const cplx w = tw[((r * k) % n) * ratio], s = scratch[r * m + k % m];
            acc.re += w.re * s.re - w.im * s.im;
            acc.im += w.re * s.im + w.im * s.re;
        }
        y[k] = acc;
    }
}

/* A transform of one length, with its twiddle table and work buffers. */
typedef struct plan {
    int64_t n;
    cplx *tw, *in, *out, *scratch;
} plan;

static void plan_free(plan *pl) {
    free(pl->tw);
    free(pl->in);
    free(pl->out);
    free(pl->scratch);
}

/* Sets up a transform of length n; sign -1 for the forward DFT, +1 for the inverse. */
static ampc_status plan_init(ampc_graph *g, const ampc_node *n, plan *pl, int64_t len, int sign) {
    size_t cnt = (size_t)AMPC_MAX(len, 1);
    pl->n = len;
    pl->tw = malloc(cnt * sizeof(cplx));
    pl->in = calloc(cnt, sizeof(cplx));
    pl->out = malloc(cnt * sizeof(cplx));
    pl->scratch = malloc(cnt * sizeof(cplx));
    if (!pl->tw || !pl->in || !pl->out || !pl->scratch) {
        plan_free(pl);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory for a length-%lld transform",
                         (long long)len);
    }
    for (int64_t e = 0; e < len; e++) {
        double a = 2.0 * PI * (double)e / (double)len;
        pl->tw[e] = (cplx){cos(a), sign * sin(a)};
    }
    return AMPC_OK;
}

/* Transforms pl->in into pl->out. */
static void plan_run(plan *pl) { fft(pl->in, 1, pl->n, 1, pl->tw, pl->out, pl->scratch); }

/* ---- DFT ------------------------------------------------------------------------------------ */

/* DFT along the axis: each line (every index but the axis and the components) is read into a
 * buffer of dft_length points (truncated or zero-padded), transformed, and written back; the
 * inverse divides by dft_length. The inverse of a one-sided spectrum rebuilds the full spectrum
 * by conjugate symmetry and keeps the real part, which is numpy's irfft. */
ampc_status ampc_ref_dft(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    const ampc_dft_params dp = ampc_dft_params_of(n);
    const bool inverse = dp.inverse, onesided = dp.onesided;
    int32_t r = x->shape.rank;
    int64_t axis = n->n_inputs > 2 && in[2] ? ampc_ref_load_i64(in[2]->data, in[2]->dtype, 0) : -2;
    int32_t ax = (int32_t)(axis < 0 ? axis + r : axis);
    bool irfft = inverse && onesided;
    int64_t n_in = x->shape.dims[ax], n_out = y->shape.dims[ax];
    int64_t len = n->n_inputs > 1 && in[1] ? ampc_ref_load_i64(in[1]->data, in[1]->dtype, 0)
                                          : irfft ? 2 * (n_in - 1) : n_in;
    int64_t cin = x->shape.dims[r - 1], cout = y->shape.dims[r - 1];
    int64_t outer = 1, inner = 1;
    for (int32_t d = 0; d < ax; d++) outer *= x->shape.dims[d];
    for (int32_t d = ax + 1; d < r - 1; d++) inner *= x->shape.dims[d];
    plan pl;
    ampc_status st = plan_init(g, n, &pl, len, inverse ? 1 : -1);
    if (st) return st;
    double scale = inverse ? 1.0 / (double)len : 1.0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            /* bins of the input spectrum (irfft) or points of the signal that are given */
            int64_t given = irfft ? AMPC_MIN(n_in, len / 2 + 1) : AMPC_MIN(n_in, len);
            memset(pl.in, 0, (size_t)len * sizeof(cplx));
            for (int64_t t = 0; t < given; t++) {
                int64_t at = ((o * n_in + t) * inner + i) * cin;
                pl.in[t].re = ampc_ref_load_f64(x->data, x->dtype, at);
                pl.in[t].im = cin == 2 ? ampc_ref_load_f64(x->data, x->dtype, at + 1) : 0;
            }
            if (irfft) /* X[len - k] = conj(X[k]) */
                for (int64_t k = len / 2 + 1; k < len; k++)
                    pl.in[k] = (cplx){pl.in[len - k].re, -pl.in[len - k].im};
            plan_run(&pl);
            for (int64_t k = 0; k < n_out; k++) {
                int64_t at = ((o * n_out + k) * inner + i) * cout;
                ampc_ref_store_f64(y->data, y->dtype, at, pl.out[k].re * scale);
                if (cout == 2) ampc_ref_store_f64(y->data, y->dtype, at + 1, pl.out[k].im * scale);
            }
        }
    plan_free(&pl);
    return AMPC_OK;
}

/* ---- STFT ----------------------------------------------------------------------------------- */

/* STFT: frame f of batch b is signal[b, f * frame_step + t] * window[t] for t < frame_length,
 * transformed forward; one-sided output keeps the first frame_length / 2 + 1 bins. */
ampc_status ampc_ref_stft(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *win = n->n_inputs > 2 ? in[2] : NULL;
    ampc_tensor *y = out[0];
    int64_t B = x->shape.dims[0], L = x->shape.dims[1], cin = x->shape.dims[2];
    int64_t frames = y->shape.dims[1], bins = y->shape.dims[2];
    int64_t step = ampc_ref_load_i64(in[1]->data, in[1]->dtype, 0);
    int64_t fl = n->n_inputs > 3 && in[3] ? ampc_ref_load_i64(in[3]->data, in[3]->dtype, 0)
                 : win                    ? win->shape.dims[0]
                                          : L;
    plan pl;
    ampc_status st = plan_init(g, n, &pl, fl, -1);
    if (st) return st;
    for (int64_t b = 0; b < B; b++)
        for (int64_t f = 0; f < frames; f++) {
            for (int64_t t = 0; t < fl; t++) {
                int64_t at = (b * L + f * step + t) * cin;
                double w = win ? ampc_ref_load_f64(win->data, win->dtype, t) : 1.0;
                pl.in[t].re = w * ampc_ref_load_f64(x->data, x->dtype, at);
                pl.in[t].im = cin == 2 ? w * ampc_ref_load_f64(x->data, x->dtype, at + 1) : 0;
            }
            plan_run(&pl);
            for (int64_t k = 0; k < bins; k++) {
                int64_t at = ((b * frames + f) * bins + k) * 2;
                ampc_ref_store_f64(y->data, y->dtype, at, pl.out[k].re);
                ampc_ref_store_f64(y->data, y->dtype, at + 1, pl.out[k].im);
            }
        }
    plan_free(&pl);
    return AMPC_OK;
}

/* ---- windows -------------------------------------------------------------------------------- */

/* w[i] over N = size (periodic) or size - 1 (symmetric):
 *   Hann      sin^2(pi i / N)
 *   Hamming   25/46 - 21/46 cos(2 pi i / N)
 *   Blackman  0.42 - 0.5 cos(2 pi i / N) + 0.08 cos(4 pi i / N)
 * A symmetric window of size 1 (N = 0) is [1], as torch gives. Integer outputs truncate. */
ampc_status ampc_ref_window(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    (void)g, (void)in;
    ampc_tensor *y = out[0];
    int64_t size = y->shape.dims[0];
    bool periodic = ampc_window_periodic(n);
    double N = (double)(periodic ? size : size - 1);
    for (int64_t i = 0; i < size; i++) {
        double a = 2.0 * PI * (double)i / N, v;
        if (N == 0)
            v = 1;
        else if (n->op == AMPC_OP_HANN_WINDOW)
            v = sin(a / 2) * sin(a / 2);
        else if (n->op == AMPC_OP_HAMMING_WINDOW)
            v = 25.0 / 46.0 - 21.0 / 46.0 * cos(a);
        else
            v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
        ampc_ref_store_f64(y->data, y->dtype, i, v);
    }
    return AMPC_OK;
}

/* ---- MelWeightMatrix ------------------------------------------------------------------------ */

/* MelWeightMatrix, as the ONNX reference builds it: num_mel_bins + 2 points evenly spaced on the
 * mel scale mel(f) = 2595 log10(1 + f / 700) from lower_edge_hertz (step (high - low) / (bins +
 * 2)) are mapped back to hertz and to spectrogram bins floor((dft_length + 1) * f / sample_rate);
 * mel band i is the triangle rising from point i to 1 at point i + 1 and falling to 0 at point
 * i + 2. A point outside the spectrogram's bins is an evaluation error. */
ampc_status ampc_ref_mel_weight_matrix(ampc_graph *g, const ampc_node *n,
                                       const ampc_tensor *const *in, ampc_tensor *const *out) {
    ampc_tensor *y = out[0];
    int64_t bins = ampc_ref_load_i64(in[0]->data, in[0]->dtype, 0);
    int64_t len = ampc_ref_load_i64(in[1]->data, in[1]->dtype, 0);
    int64_t rate = ampc_ref_load_i64(in[2]->data, in[2]->dtype, 0);
    double lo = ampc_ref_load_f64(in[3]->data, in[3]->dtype, 0);
    double hi = ampc_ref_load_f64(in[4]->data, in[4]->dtype, 0);
    int64_t spec = len / 2 + 1;
    int64_t *pt = malloc((size_t)(bins + 2) * sizeof *pt);
    if (!pt) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    double mlo = 2595.0 * log1p(lo / 700.0) / log(10.0);
    double mhi = 2595.0 * log1p(hi / 700.0) / log(10.0);
    double step = (mhi - mlo) / (double)(bins + 2);
    for (int64_t i = 0; i < bins + 2; i++) {
        double hz = 700.0 * expm1(((double)i * step + mlo) / 2595.0 * log(10.0));
        double b = floor((double)(len + 1) * hz / (double)rate);
        if (!(b >= 0 && b < (double)spec)) {
            free(pt);
            return AMPC_FAIL(g, n, AMPC_E_EVAL,
                             "mel point %lld (%g Hz) falls on spectrogram bin %g, outside the %lld "
                             "bins of a length-%lld DFT: the band edges %g and %g Hz must lie "
                             "within [0, sample_rate / 2 = %g]",
                             (long long)i, hz, b, (long long)spec, (long long)len, lo, hi,
                             (double)rate / 2);
        }
        pt[i] = (int64_t)b;
    }
    double *w = calloc((size_t)AMPC_MAX(spec * bins, 1), sizeof *w);
    if (!w) {
        free(pt);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    }
    for (int64_t i = 0; i < bins; i++) {
        int64_t l = pt[i], c = pt[i + 1], h = pt[i + 2];
        if (c == l)
            w[c * bins + i] = 1;
        else
            for (int64_t j = l; j <= c; j++) w[j * bins + i] = (double)(j - l) / (double)(c - l);
        for (int64_t j = c; j < h; j++) w[j * bins + i] = (double)(h - j) / (double)(h - c);
    }
    for (int64_t i = 0; i < spec * bins; i++) ampc_ref_store_f64(y->data, y->dtype, i, w[i]);
    free(pt);
    free(w);
    return AMPC_OK;
}
