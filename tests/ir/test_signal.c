/*
 * test_signal.c — the signal-processing family through the DSL: DFT (forward, inverse, one-sided,
 * the inverse of a one-sided spectrum, zero padding and truncation, any axis) checked by hand on
 * small signals and against the plain O(n^2) definition written here for prime and composite
 * lengths; STFT frames, windows and one-sidedness; the Hann, Hamming and Blackman windows in
 * both forms and several dtypes; MelWeightMatrix's triangles; and the exact diagnostics.
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>

static const double PI = 3.14159265358979323846;

static ampc_value *cst(ampc_graph *g, const char *name, ampc_dtype t, ampc_shape s,
                       const double *vals) {
    int64_t n = ampc_shape_numel(&s);
    void *buf = calloc((size_t)(n ? n : 1), ampc_dtype_size(t));
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(buf, t, i, vals[i]);
    ampc_value *v = ampc_constant(g, name, t, s.rank, s.dims, buf);
    free(buf);
    return v;
}

/* A named i64 scalar constant. */
static ampc_value *scalar(ampc_graph *g, const char *name, int64_t v) {
    return ampc_constant(g, name, AMPC_DTYPE_I64, 0, NULL, &v);
}

static ampc_value *build(ampc_graph *g, const char *op, ampc_value **in, int32_t n_in,
                         const ampc_attr_arg *at, int32_t n_at) {
    ampc_value *y = ampc_op(g, op, in, n_in, at, n_at);
    cr_assert(!ampc_value_is_poisoned(y), "%s failed:\n%s", op, ampc_graph_errors(g));
    return y;
}

static void expect_fail(ampc_graph *g, const char *op, ampc_value **in, int32_t n_in,
                        const ampc_attr_arg *at, int32_t n_at, const char *needle) {
    ampc_value *y = ampc_op(g, op, in, n_in, at, n_at);
    cr_assert(ampc_value_is_poisoned(y), "%s unexpectedly succeeded", op);
    t_expect_diag(g, needle);
}

static void expect_vals(ampc_graph *g, ampc_value *y, ampc_shape s, const double *want,
                        double tol) {
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    t_expect_close(&out, s, want, tol, tol);
    ampc_tensor_free(&out);
}

/* ---- DFT ------------------------------------------------------------------------------------ */

/* [1, 2, 3, 4] as a real [4, 1] signal (axis -2 is dim 0): X = 10, -2 + 2i, -2, -2 - 2i; the
 * inverse of that spectrum gives the signal back (imaginary parts 0); the one-sided forward keeps
 * bins 0..2, and the inverse of those three bins (default length 2 * (3 - 1) = 4) is the real
 * signal again, with a last dim of 1. */
Test(dft, by_hand_forward_inverse_onesided) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[4] = {1, 2, 3, 4}, spec[8] = {10, 0, -2, 2, -2, 0, -2, -2};
    ampc_value *x = cst(g, "x", AMPC_DTYPE_F32, SHAPE(4, 1), xv);
    expect_vals(g, build(g, "DFT", &x, 1, NULL, 0), SHAPE(4, 2), spec, 1e-6);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    ampc_value *s = cst(g, "s", AMPC_DTYPE_F64, SHAPE(4, 2), spec);
    ampc_attr_arg inv = AMPC_ATTR_I("inverse", 1);
    double back[8] = {1, 0, 2, 0, 3, 0, 4, 0};
    expect_vals(g, build(g, "DFT", &s, 1, &inv, 1), SHAPE(4, 2), back, 1e-12);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    x = cst(g, "x", AMPC_DTYPE_F64, SHAPE(4, 1), xv);
    ampc_attr_arg one = AMPC_ATTR_I("onesided", 1);
    expect_vals(g, build(g, "DFT", &x, 1, &one, 1), SHAPE(3, 2), spec, 1e-12);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    s = cst(g, "half", AMPC_DTYPE_F64, SHAPE(3, 2), spec);
    ampc_attr_arg both[2] = {one, inv};
    expect_vals(g, build(g, "DFT", &s, 1, both, 2), SHAPE(4, 1), xv, 1e-12);
    ampc_graph_destroy(g);
}

/* The definition: X[k] = sum_t x[t] exp(sign 2 pi i k t / n) over complex x (re, im pairs). */
static void naive_dft(const double *x, int n, int sign, double *y) {
    for (int k = 0; k < n; k++) {
        double re = 0, im = 0;
        for (int t = 0; t < n; t++) {
            double a = sign * 2 * PI * (double)((k * t) % n) / n;
            re += x[2 * t] * cos(a) - x[2 * t + 1] * sin(a);
            im += x[2 * t] * sin(a) + x[2 * t + 1] * cos(a);
        }
        y[2 * k] = re, y[2 * k + 1] = im;
    }
}

/* Complex [2, n, 3, 2] signals along axis 1 for a prime (7), composite (12 = 2 * 2 * 3) and
 * power-of-two (16) length, forward and inverse (scaled by 1 / n), against the definition. */
Test(dft, mixed_radix_matches_definition_along_axis_1) {
    int lens[3] = {7, 12, 16};
    for (int li = 0; li < 3; li++)
        for (int inverse = 0; inverse < 2; inverse++) {
            int n = lens[li];
            double *xv = malloc(sizeof(double) * 2 * n * 3 * 2);
            double *want = malloc(sizeof(double) * 2 * n * 3 * 2), line[64], res[64];
            for (int i = 0; i < 2 * n * 3 * 2; i++) xv[i] = sin(1.7 * i) + (i % 5) * 0.25;
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 3; c++) {
                    for (int t = 0; t < n; t++)
                        for (int r = 0; r < 2; r++)
                            line[2 * t + r] = xv[((b * n + t) * 3 + c) * 2 + r];
                    naive_dft(line, n, inverse ? 1 : -1, res);
                    for (int k = 0; k < n; k++)
                        for (int r = 0; r < 2; r++)
                            want[((b * n + k) * 3 + c) * 2 + r] =
                                res[2 * k + r] / (inverse ? n : 1);
                }
            ampc_graph *g = ampc_graph_create("t");
            ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F64, SHAPE(2, n, 3, 2), xv), NULL,
                                 scalar(g, "axis", 1)};
            ampc_attr_arg inv = AMPC_ATTR_I("inverse", 1);
            expect_vals(g, build(g, "DFT", in, 3, &inv, inverse), SHAPE(2, n, 3, 2), want, 1e-9);
            ampc_graph_destroy(g);
            free(xv);
            free(want);
        }
}

/* dft_length pads with zeros or truncates: [1, 2, 3] at length 4 is [1, 2, 3, 0] (X = 6, -2 -
 * 2i, 2, -2 + 2i); at length 2 it is [1, 2] (X = 3, -1). Axis 0 of a [3, 2, 1] signal. */
Test(dft, dft_length_pads_and_truncates) {
    double xv[6] = {1, 10, 2, 20, 3, 30}; /* two columns: x and 10 x */
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2, 1), xv), scalar(g, "len", 4),
                         scalar(g, "axis", 0)};
    double w4[16] = {6, 0, 60, 0, -2, -2, -20, -20, 2, 0, 20, 0, -2, 2, -20, 20};
    expect_vals(g, build(g, "DFT", in, 3, NULL, 0), SHAPE(4, 2, 2), w4, 1e-6);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    ampc_value *in2[3] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2, 1), xv), scalar(g, "len", 2),
                          scalar(g, "axis", -3)};
    double w2[8] = {3, 0, 30, 0, -1, 0, -10, 0};
    expect_vals(g, build(g, "DFT", in2, 3, NULL, 0), SHAPE(2, 2, 2), w2, 1e-6);
    ampc_graph_destroy(g);
}

Test(dft, errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 2, (int64_t[]){4, 3});
    expect_fail(g, "DFT", &x, 1, NULL, 0,
                "node 0 (DFT 'DFT_0'): input 0 'x' must be [signal dims..., components] (rank 2 "
                "or more) with a last dim of 1 (real) or 2 (complex), got [4,3]");
    ampc_value *in[3] = {ampc_input(g, "y", AMPC_DTYPE_F32, 2, (int64_t[]){4, 2}), NULL,
                         scalar(g, "axis", -1)};
    expect_fail(g, "DFT", in, 3, NULL, 0,
                "node 1 (DFT 'DFT_1'): input 2 (axis) -1 must be in [-2, -2] or [0, 0] for input "
                "0 'y' of rank 2 (the last dim holds the complex components)");
    in[1] = scalar(g, "len", 0);
    in[2] = NULL;
    expect_fail(g, "DFT", in, 2, NULL, 0,
                "node 2 (DFT 'DFT_2'): input 1 'len' (dft_length) must be at least 1, got 0");
    in[1] = ampc_input(g, "rt", AMPC_DTYPE_I64, 0, NULL);
    expect_fail(g, "DFT", in, 2, NULL, 0, "input 1 'rt' must be known at compile time");
    ampc_graph_destroy(g);
}

/* ---- STFT ----------------------------------------------------------------------------------- */

/* Signal 1..6, frames of 4 every 2 samples: [1, 2, 3, 4] -> 10, -2 + 2i, -2 and [3, 4, 5, 6] ->
 * 18, -2 + 2i, -2 (one-sided, the default). The window [0, 1, 1, 0] (its length sets the frame)
 * makes the frames [0, 2, 3, 0] -> 5, -3 - 2i, 1 and [0, 4, 5, 0] -> 9, -5 - 4i, 1; two-sided
 * output adds bin 3 = conj(bin 1). */
Test(stft, frames_windows_and_sides) {
    double xv[6] = {1, 2, 3, 4, 5, 6}, wv[4] = {0, 1, 1, 0};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[4] = {cst(g, "x", AMPC_DTYPE_F32, SHAPE(1, 6, 1), xv), scalar(g, "step", 2),
                         NULL, scalar(g, "len", 4)};
    double w1[12] = {10, 0, -2, 2, -2, 0, 18, 0, -2, 2, -2, 0};
    expect_vals(g, build(g, "STFT", in, 4, NULL, 0), SHAPE(1, 2, 3, 2), w1, 1e-6);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    ampc_value *in2[3] = {cst(g, "x", AMPC_DTYPE_F64, SHAPE(1, 6, 1), xv), scalar(g, "step", 2),
                          cst(g, "win", AMPC_DTYPE_F64, SHAPE(4), wv)};
    ampc_attr_arg two = AMPC_ATTR_I("onesided", 0);
    double w2[16] = {5, 0, -3, -2, 1, 0, -3, 2, 9, 0, -5, -4, 1, 0, -5, 4};
    expect_vals(g, build(g, "STFT", in2, 3, &two, 1), SHAPE(1, 2, 4, 2), w2, 1e-12);
    ampc_graph_destroy(g);
}

Test(stft, errors) {
    ampc_graph *g = ampc_graph_create("t");
    double wv[4] = {0, 1, 1, 0};
    ampc_value *in[4] = {ampc_input(g, "x", AMPC_DTYPE_F32, 3, (int64_t[]){1, 6, 1}),
                         scalar(g, "step", 2), cst(g, "win", AMPC_DTYPE_F32, SHAPE(4), wv),
                         scalar(g, "len", 3)};
    expect_fail(g, "STFT", in, 4, NULL, 0,
                "node 0 (STFT 'STFT_0'): input 2 'win' (window) must have frame_length = 3 "
                "entries, got [4]");
    in[2] = NULL;
    in[3] = scalar(g, "len7", 7);
    expect_fail(g, "STFT", in, 4, NULL, 0,
                "node 1 (STFT 'STFT_1'): frame_length 7 must be in [1, 6], the signal length of "
                "input 0 'x' [1,6,1]");
    in[1] = scalar(g, "step0", 0);
    expect_fail(g, "STFT", in, 2, NULL, 0,
                "node 2 (STFT 'STFT_2'): input 1 'step0' (frame_step) must be at least 1, got 0");
    ampc_graph_destroy(g);
}

/* ---- windows -------------------------------------------------------------------------------- */

/* Periodic windows of size 4 use N = 4: Hann sin^2(pi n / 4) = 0, 1/2, 1, 1/2; Hamming 25/46 -
 * 21/46 cos(pi n / 2) = 4/46, 25/46, 1, 25/46; Blackman 0.42 - 0.5 cos(pi n / 2) + 0.08 cos(pi n)
 * = 0, 0.34, 1, 0.34. The symmetric Hann of size 5 uses N = 4 too and ends in 0 again. */
Test(window, hann_hamming_blackman) {
    const char *ops[3] = {"HannWindow", "HammingWindow", "BlackmanWindow"};
    double want[3][4] = {{0, 0.5, 1, 0.5}, {4.0 / 46, 25.0 / 46, 1, 25.0 / 46}, {0, 0.34, 1, 0.34}};
    for (int k = 0; k < 3; k++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *size = scalar(g, "size", 4);
        ampc_value *y = build(g, ops[k], &size, 1, NULL, 0);
        cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F32);
        cr_assert_not_null(y->data, "a window of a constant size folds while building");
        expect_vals(g, y, SHAPE(4), want[k], 1e-6);
        ampc_graph_destroy(g);
    }
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *size = scalar(g, "size", 5);
    ampc_attr_arg at[2] = {AMPC_ATTR_I("periodic", 0), AMPC_ATTR_I("output_datatype", 11)};
    double sym[5] = {0, 0.5, 1, 0.5, 0};
    ampc_value *y = build(g, "HannWindow", &size, 1, at, 2);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F64);
    expect_vals(g, y, SHAPE(5), sym, 1e-15);
    ampc_graph_destroy(g);
}

/* Integer output truncates (the symmetric Hann of size 5 becomes 0 0 1 0 0); a symmetric window
 * of size 1 is [1]; size 0 is empty. */
Test(window, int_output_and_tiny_sizes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *size = scalar(g, "size", 5);
    ampc_attr_arg at[2] = {AMPC_ATTR_I("periodic", 0), AMPC_ATTR_I("output_datatype", 6)};
    ampc_tensor out = t_eval1(g, build(g, "HannWindow", &size, 1, at, 2), NULL, 0);
    int64_t wi[5] = {0, 0, 1, 0, 0};
    t_expect_ints(&out, SHAPE(5), wi);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    size = scalar(g, "size", 1);
    double one[1] = {1};
    expect_vals(g, build(g, "BlackmanWindow", &size, 1, at, 1), SHAPE(1), one, 0);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    size = scalar(g, "size", 0);
    expect_vals(g, build(g, "HammingWindow", &size, 1, NULL, 0), SHAPE(0), NULL, 0);
    ampc_graph_destroy(g);
}

Test(window, errors) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *size = scalar(g, "size", 4);
    ampc_attr_arg bad = AMPC_ATTR_I("output_datatype", 9); /* BOOL */
    expect_fail(g, "HannWindow", &size, 1, &bad, 1,
                "node 0 (HannWindow 'HannWindow_0'): attribute 'output_datatype' must name a "
                "float or integer ONNX element type ampc has, got 9");
    ampc_value *neg = scalar(g, "neg", -1);
    expect_fail(g, "HannWindow", &neg, 1, NULL, 0,
                "node 1 (HannWindow 'HannWindow_1'): input 0 'neg' (size) must be at least 0, got "
                "-1");
    ampc_value *rt = ampc_input(g, "rt", AMPC_DTYPE_I32, 0, NULL);
    expect_fail(g, "HammingWindow", &rt, 1, NULL, 0,
                "node 2 (HammingWindow 'HammingWindow_2'): input 0 'rt' must be known at compile "
                "time");
    ampc_graph_destroy(g);
}

/* ---- MelWeightMatrix ------------------------------------------------------------------------ */

/* 2 mel bands over a 16-point DFT (9 bins) at 1600 Hz from 0 to 1000 Hz: the 4 points are
 * evenly spaced on the mel scale by (mel(1000) - mel(0)) / 4 (about 174, 391 and 662 Hz), on
 * bins floor(17 f / 1600) = 0, 1, 4, 7. Band 0 rises 0 -> 1 over bins 0-1 and falls over 1-4
 * (1, 2/3, 1/3); band 1 rises over 1-4 (0, 1/3, 2/3, 1) and falls over 4-7 (1, 2/3, 1/3). */
Test(mel_weight_matrix, triangles) {
    ampc_graph *g = ampc_graph_create("t");
    double lo[1] = {0}, hi[1] = {1000};
    ampc_value *in[5] = {scalar(g, "bins", 2), scalar(g, "len", 16), scalar(g, "rate", 1600),
                         cst(g, "lo", AMPC_DTYPE_F32, SHAPE(), lo),
                         cst(g, "hi", AMPC_DTYPE_F32, SHAPE(), hi)};
    double t = 1.0 / 3;
    double want[18] = {0, 0, 1, 0, 2 * t, t, t, 2 * t, 0, 1, 0, 2 * t, 0, t, 0, 0, 0, 0};
    expect_vals(g, build(g, "MelWeightMatrix", in, 5, NULL, 0), SHAPE(9, 2), want, 1e-6);
    ampc_graph_destroy(g);
}

Test(mel_weight_matrix, band_edges_past_nyquist) {
    ampc_graph *g = ampc_graph_create("t");
    double lo[1] = {0}, hi[1] = {5000};
    ampc_value *in[5] = {scalar(g, "bins", 2), scalar(g, "len", 16), scalar(g, "rate", 1600),
                         cst(g, "lo", AMPC_DTYPE_F32, SHAPE(), lo),
                         cst(g, "hi", AMPC_DTYPE_F32, SHAPE(), hi)};
    /* Everything is constant: the node folds while building and the bad edge fails there. */
    ampc_value *y = ampc_op(g, "MelWeightMatrix", in, 5, NULL, 0);
    cr_assert(ampc_value_is_poisoned(y));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_EVAL);
    t_expect_diag(g, "node 0 (MelWeightMatrix 'MelWeightMatrix_0'): mel point 2 (");
    t_expect_diag(g, "outside the 9 bins of a length-16 DFT: the band edges 0 and 5000 Hz must "
                     "lie within [0, sample_rate / 2 = 800]");
    ampc_graph_destroy(g);
}
