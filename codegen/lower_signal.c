/*
 * lower_signal.c — generated kernels for the signal family (ir/infer/signal.c, ir/ref/signal.c):
 * DFT and STFT (LOWER_CONTRACT rows, dispatched from lower_contract.c) and MelWeightMatrix (a
 * LOWER_ELEMENTWISE row, dispatched from lower_elementwise.c).
 *
 * DFT and STFT mirror ir/ref/signal.c: one thread per output bin computing the direct sum over the
 * (zero-padded or truncated) line, O(length) per bin. The twiddle of term t of bin k is taken at
 * the exact angle 2 pi ((k t) mod n) / n with sincospi, as the reference indexes its table. The
 * inverse scales by 1 / n; the inverse of a one-sided spectrum rebuilds X[n - k] = conj(X[k]) and
 * keeps the real part (numpy's irfft). STFT multiplies frame f (samples f * frame_step + t) by the
 * window when given.
 *
 * MelWeightMatrix: a thread an output, recomputing its band's three mel points in f64.
 */
#include "codegen.h"
#include "ir/signal.h"
#include "ir/infer/infer.h"

#include "ir/ref/ref.h"

#include <string.h>

/* ---- DFT and STFT --------------------------------------------------------------------------- */

/* Element 0 of a compile-time integer input, or dflt when absent. */
static int64_t const_int(const ampc_node *n, int32_t i, int64_t dflt) {
    const ampc_value *v = i < n->n_inputs ? n->inputs[i] : NULL;
    return v && v->data ? ampc_ref_load_i64(v->data, v->dtype, 0) : dflt;
}

/* Emits the twiddle w = exp(sign 2 pi i m / len) of m = (kb * t) mod len into wr, wi. */
static void emit_twiddle(ampc_cg_kernel *k, const char *ct, int64_t len, int sign) {
    bool f = !strcmp(ct, "float");
    ampc_cg_line(k, "const long long m = (kb * t) %% %lldLL;", (long long)len);
    ampc_cg_line(k, "%s sn, cs;", ct);
    ampc_cg_line(k, "%s((%s)(2 * m) / (%s)%lld, &sn, &cs);", f ? "sincospif" : "sincospi", ct, ct,
                 (long long)len);
    ampc_cg_line(k, "const %s wr = cs, wi = %ssn;", ct, sign < 0 ? "-" : "");
}

static ampc_status lower_dft(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int64_t total = ampc_ir_numel(y);
    if (total == 0) return AMPC_OK;
    const ampc_dft_params dp = ampc_dft_params_of(n);
    const bool inverse = dp.inverse, onesided = dp.onesided;
    const int32_t r = x->shape.rank;
    const int64_t axis = const_int(n, 2, -2);
    const int32_t ax = (int32_t)(axis < 0 ? axis + r : axis);
    const bool irfft = inverse && onesided;
    const int64_t n_in = x->shape.dims[ax], n_out = y->shape.dims[ax];
    const int64_t len = const_int(n, 1, irfft ? 2 * (n_in - 1) : n_in);
    const int64_t cin = x->shape.dims[r - 1], cout = y->shape.dims[r - 1];
    int64_t inner = 1;
    for (int32_t d = ax + 1; d < r - 1; d++) inner *= x->shape.dims[d];
    const int64_t given = irfft ? AMPC_MIN(n_in, len / 2 + 1) : AMPC_MIN(n_in, len);
    const char *ct = ampc_cg_compute_type(x->dtype);

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "dft");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, total / cout);
    ampc_cg_line(k, "const long long ii = i %% %lldLL, rq = i / %lldLL;", (long long)inner,
                 (long long)inner);
    ampc_cg_line(k, "const long long kb = rq %% %lldLL, o = rq / %lldLL;", (long long)n_out,
                 (long long)n_out);
    ampc_cg_line(k, "%s are = (%s)0, aim = (%s)0;", ct, ct, ct);
    ampc_cg_open(k, "for (long long t = 0; t < %lldLL; t++)", (long long)(irfft ? len : given));
    ampc_cg_line(k, "long long src = t;");
    ampc_cg_line(k, "%s sg = (%s)1;", ct, ct);
    if (irfft) /* X[len - k] = conj(X[k]) */
        ampc_cg_line(k, "if (t >= %lldLL) { src = %lldLL - t; sg = (%s)-1; }", (long long)(len / 2 + 1),
                     (long long)len, ct);
    ampc_cg_line(k, "if (src >= %lldLL) continue;", (long long)given);
    ampc_cg_line(k, "const long long at = ((o * %lldLL + src) * %lldLL + ii) * %lldLL;",
                 (long long)n_in, (long long)inner, (long long)cin);
    ampc_cg_line(k, "const %s xr = ampc::ld(%s, at);", ct, px);
    if (cin == 2) ampc_cg_line(k, "const %s xi = sg * ampc::ld(%s, at + 1);", ct, px);
    else ampc_cg_line(k, "const %s xi = (%s)0; (void)sg;", ct, ct);
    emit_twiddle(k, ct, len, inverse ? 1 : -1);
    ampc_cg_line(k, "are += wr * xr - wi * xi;");
    ampc_cg_line(k, "aim += wr * xi + wi * xr;");
    ampc_cg_close(k);
    const double scale = inverse ? 1.0 / (double)len : 1.0;
    ampc_cg_line(k, "const long long yo = i * %lldLL;", (long long)cout);
    const ampc_cg_literal sl = ampc_cg_f64(scale);
    ampc_cg_line(k, "ampc::st(%s, yo, are * (%s)%s);", py, ct, sl.s);
    if (cout == 2) ampc_cg_line(k, "ampc::st(%s, yo + 1, aim * (%s)%s);", py, ct, sl.s);
    else ampc_cg_line(k, "(void)aim;");
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, total / cout, 256);
}

static ampc_status lower_stft(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const ampc_value *win = n->n_inputs > 2 ? n->inputs[2] : NULL;
    const int64_t total = ampc_ir_numel(y);
    if (total == 0) return AMPC_OK;
    const int64_t L = x->shape.dims[1], cin = x->shape.dims[2];
    const int64_t frames = y->shape.dims[1], bins = y->shape.dims[2];
    const int64_t step = const_int(n, 1, 1);
    const int64_t fl = const_int(n, 3, win ? win->shape.dims[0] : L);
    const char *ct = ampc_cg_compute_type(x->dtype);

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "stft");
    const char *px = ampc_cg_param(k, x, false);
    const char *pw = win ? ampc_cg_param(k, win, false) : NULL;
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, total / 2);
    ampc_cg_line(k, "const long long kb = i %% %lldLL, bf = i / %lldLL;", (long long)bins,
                 (long long)bins);
    ampc_cg_line(k, "const long long f = bf %% %lldLL, b = bf / %lldLL;", (long long)frames,
                 (long long)frames);
    ampc_cg_line(k, "%s are = (%s)0, aim = (%s)0;", ct, ct, ct);
    ampc_cg_open(k, "for (long long t = 0; t < %lldLL; t++)", (long long)fl);
    ampc_cg_line(k, "const long long at = (b * %lldLL + f * %lldLL + t) * %lldLL;", (long long)L,
                 (long long)step, (long long)cin);
    if (pw) ampc_cg_line(k, "const %s w = (%s)ampc::ld(%s, t);", ct, ct, pw);
    else ampc_cg_line(k, "const %s w = (%s)1;", ct, ct);
    ampc_cg_line(k, "const %s xr = w * ampc::ld(%s, at);", ct, px);
    if (cin == 2) ampc_cg_line(k, "const %s xi = w * ampc::ld(%s, at + 1);", ct, px);
    else ampc_cg_line(k, "const %s xi = (%s)0;", ct, ct);
    emit_twiddle(k, ct, fl, -1);
    ampc_cg_line(k, "are += wr * xr - wi * xi;");
    ampc_cg_line(k, "aim += wr * xi + wi * xr;");
    ampc_cg_close(k);
    ampc_cg_line(k, "ampc::st(%s, i * 2, are);", py);
    ampc_cg_line(k, "ampc::st(%s, i * 2 + 1, aim);", py);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, total / 2, 256);
}

/* ---- MelWeightMatrix ------------------------------------------------------------------------ */

static ampc_status lower_mel(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *y = n->outputs[0];
    int64_t v[1], bins, len, rate;
    if (ampc_infer_const_ints(g, n, 0, v, 1) != 1) return AMPC_E_UNSUPPORTED;
    bins = v[0];
    if (ampc_infer_const_ints(g, n, 1, v, 1) != 1) return AMPC_E_UNSUPPORTED;
    len = v[0];
    if (ampc_infer_const_ints(g, n, 2, v, 1) != 1) return AMPC_E_UNSUPPORTED;
    rate = v[0];
    int64_t count = ampc_ir_numel(y);
    if (count == 0) return AMPC_OK;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "mel_weight_matrix");
    const char *plo = ampc_cg_param(k, n->inputs[3], false), *phi = ampc_cg_param(k, n->inputs[4], false);
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long bi = i %% %lldLL, j = i / %lldLL;", (long long)bins, (long long)bins);
    ampc_cg_line(k, "const double lo = ampc::to_f64(%s[0]), hi = ampc::to_f64(%s[0]);", plo, phi);
    ampc_cg_line(k, "const double mlo = 2595.0 * log1p(lo / 700.0) / log(10.0);");
    ampc_cg_line(k, "const double mhi = 2595.0 * log1p(hi / 700.0) / log(10.0);");
    ampc_cg_line(k, "const double step = (mhi - mlo) / (double)%lld;", (long long)(bins + 2));
    ampc_cg_line(k, "long long pt[3];");
    ampc_cg_open(k, "for (int e = 0; e < 3; e++)");
    ampc_cg_line(k, "const double hz = 700.0 * expm1(__dadd_rn(__dmul_rn((double)(bi + e), step), mlo) / 2595.0 * log(10.0));");
    /* A point outside the spectrogram's bins (the band edges beyond [0, sample_rate / 2], or not
     * finite) is an evaluation error in the reference; a kernel cannot refuse, so the bands that
     * touch it are 0 (and no NaN or huge value becomes an integer). */
    ampc_cg_line(k, "const double pb = floor((double)%lld * hz / (double)%lld);", (long long)(len + 1),
                 (long long)rate);
    ampc_cg_line(k, "pt[e] = pb >= 0 && pb < %lld.0 ? (long long)pb : -1;", (long long)(len / 2 + 1));
    ampc_cg_close(k);
    ampc_cg_open(k, "if (pt[0] < 0 || pt[1] < 0 || pt[2] < 0)");
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(0.0);", py, ampc_cg_ctype(y->dtype));
    ampc_cg_line(k, "continue;");
    ampc_cg_close(k);
    /* The reference writes the rising edge (l..c), then the falling one (c..h-1) over it. */
    ampc_cg_line(k, "const long long l = pt[0], c = pt[1], h = pt[2];");
    ampc_cg_line(k, "double w = 0.0;");
    ampc_cg_line(k, "if (j >= c && j < h) w = (double)(h - j) / (double)(h - c);");
    ampc_cg_line(k, "else if (c == l) w = j == c ? 1.0 : 0.0;");
    ampc_cg_line(k, "else if (j >= l && j <= c) w = (double)(j - l) / (double)(c - l);");
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(w);", py, ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- entry ------------------------------------------------------------------------------- */

ampc_status ampc_cg_lower_signal(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_DFT: return lower_dft(cg, n);
    case AMPC_OP_STFT: return lower_stft(cg, n);
    case AMPC_OP_MEL_WEIGHT_MATRIX: return lower_mel(cg, n);
    default: return ampc_cg_unsupported(cg, n, "yet; it runs on the reference evaluator only");
    }
}
