/*
 * lower_sample.c — generated kernels for GridSample (a LOWER_INDEX row, dispatched from
 * lower_index.c) and for DFT and STFT (LOWER_CONTRACT rows, dispatched from lower_contract.c).
 *
 * GridSample mirrors ir/ref/resize.c's ampc_ref_grid_sample: one thread per output element
 * (n, c, o1..ok), any number k of spatial dims. The coordinates, their padding (border clamp,
 * reflection) and the tap weights (nearest, linear, cubic with A = -0.75) are computed in double
 * exactly as the reference does (including its rounding of the denormalised coordinate to f32);
 * the weighted sum over the cnt^k taps accumulates in the compute type (f32 for f32/f16/bf16, f64
 * for f64), skipping taps outside the input under padding_mode zeros. A point the reference
 * gives up on (NaN, or more than 2^40 pixels out after padding) reads 0 here too, before any
 * coordinate becomes an integer; the reflection's remainder is computed without contraction into
 * an fma, as the reference's separate steps (it matters for far points).
 *
 * DFT and STFT mirror ir/ref/signal.c: one thread per output bin computing the direct sum over the
 * (zero-padded or truncated) line, O(length) per bin. The twiddle of term t of bin k is taken at
 * the exact angle 2 pi ((k t) mod n) / n with sincospi, as the reference indexes its table. The
 * inverse scales by 1 / n; the inverse of a one-sided spectrum rebuilds X[n - k] = conj(X[k]) and
 * keeps the real part (numpy's irfft). STFT multiplies frame f (samples f * frame_step + t) by the
 * window when given.
 */
#include "codegen.h"
#include "ir/resize.h"
#include "ir/signal.h"

#include "ir/ref/ref.h"

#include <string.h>

/* ---- GridSample ----------------------------------------------------------------------------- */

/* Lowers GridSample: X [N, C, D1..Dk] sampled at grid [N, O1..Ok, k] -> Y [N, C, O1..Ok]. */
ampc_status ampc_cg_lower_grid_sample(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *gr = n->inputs[1], *y = n->outputs[0];
    const int64_t total = ampc_ir_numel(y);
    if (total == 0) return AMPC_OK;
    const ampc_grid_params gp = ampc_grid_params_of(n);
    const bool align = gp.align;
    const int mode = gp.mode;
    const ampc_grid_pad pad = gp.pad;
    const int32_t k = x->shape.rank - 2;
    const int32_t cnt = mode == AMPC_RESIZE_NEAREST ? 1 : mode == AMPC_RESIZE_LINEAR ? 2 : 4;
    const int64_t C = x->shape.dims[1];
    int64_t dims[AMPC_MAX_RANK], plane = 1, opix = 1;
    for (int32_t d = 0; d < k; d++) {
        dims[d] = x->shape.dims[2 + d];
        plane *= dims[d];
        opix *= y->shape.dims[2 + d];
    }
    const char *ct = ampc_cg_compute_type(x->dtype);

    ampc_cg_kernel *kn = ampc_cg_kernel_begin(cg, n, "grid_sample");
    const char *px = ampc_cg_param(kn, x, false), *pg = ampc_cg_param(kn, gr, false);
    const char *py = ampc_cg_param(kn, y, true);
    /* ref/resize.c's gs_reflect, in double */
    ampc_cg_line(kn, "auto refl = [](double v, double lo, double hi) -> double {");
    ampc_cg_line(kn, "    const double rng = hi - lo;");
    ampc_cg_line(kn, "    if (rng <= 0) return lo;");
    ampc_cg_line(kn, "    if (v < lo) { const double dx = lo - v, q = trunc(dx / rng), "
                     "r = __dsub_rn(dx, __dmul_rn(q, rng)); return fmod(q, 2.0) == 0 ? lo + r : hi - r; }");
    ampc_cg_line(kn, "    if (v > hi) { const double dx = v - hi, q = trunc(dx / rng), "
                     "r = __dsub_rn(dx, __dmul_rn(q, rng)); return fmod(q, 2.0) == 0 ? hi - r : lo + r; }");
    ampc_cg_line(kn, "    return v;");
    ampc_cg_line(kn, "};");
    ampc_cg_grid_loop(kn, total);
    ampc_cg_line(kn, "const long long p = i %% %lldLL, bc = i / %lldLL, b = bc / %lldLL;",
                 (long long)opix, (long long)opix, (long long)C);
    ampc_cg_line(kn, "const long long go = (b * %lldLL + p) * %dLL;", (long long)opix, k);
    ampc_cg_line(kn, "const long long base = bc * %lldLL;", (long long)plane);
    if (mode == AMPC_RESIZE_CUBIC) ampc_cg_line(kn, "const double A = -0.75;");
    ampc_cg_line(kn, "bool lost = false;");
    for (int32_t d = 0; d < k; d++) {
        const double dim = (double)dims[d];
        const double lo = align ? 0 : -0.5, hi = align ? dim - 1 : dim - 0.5;
        ampc_cg_line(kn, "double v%d = ampc::cvt<double>(%s[go + %d]);", d, pg, k - 1 - d);
        const ampc_cg_literal L = ampc_cg_f64(lo), H = ampc_cg_f64(hi), D1 = ampc_cg_f64(dim - 1);
        if (align) ampc_cg_line(kn, "v%d = (v%d + 1) / 2 * %s;", d, d, D1.s);
        else ampc_cg_line(kn, "v%d = __dsub_rn(__dmul_rn(v%d + 1, %s), 1.0) / 2;", d, d,
                          ampc_cg_f64(dim).s);
        ampc_cg_line(kn, "v%d = (double)(float)v%d;", d, d);
        if (mode == AMPC_RESIZE_NEAREST) {
            if (k == 3) ampc_cg_line(kn, "v%d = v%d >= 0 ? floor(v%d + 0.5) : ceil(v%d - 0.5);", d, d, d, d);
            else ampc_cg_line(kn, "v%d = rint(v%d);", d, d);
        }
        if (pad == AMPC_GRID_BORDER)
            ampc_cg_line(kn, "if (v%d < %s || v%d > %s) v%d = v%d < 0 ? 0 : v%d > %s ? %s : v%d;",
                         d, L.s, d, H.s, d, d, d, D1.s, D1.s, d);
        else if (pad == AMPC_GRID_REFLECTION)
            ampc_cg_line(kn, "if (v%d < %s || v%d > %s) v%d = refl(v%d, %s, %s);", d, L.s,
                         d, H.s, d, d, L.s, H.s);
        /* Beyond 2^40 pixels (inf under zeros padding or reflection, NaN under any) no tap can
         * land on the input: the point reads padding zeros, and the integer taps stay defined. */
        ampc_cg_line(kn, "lost = lost || !(fabs(v%d) <= 1099511627776.0);", d);
    }
    ampc_cg_open(kn, "if (lost)");
    ampc_cg_line(kn, "ampc::st(%s, i, (%s)0);", py, ct);
    ampc_cg_line(kn, "continue;");
    ampc_cg_close(kn);
    for (int32_t d = 0; d < k; d++) {
        /* taps: first position and weights */
        if (mode == AMPC_RESIZE_NEAREST) {
            ampc_cg_line(kn, "const long long f%d = (long long)v%d;", d, d);
            ampc_cg_line(kn, "const double w%d[1] = {1.0};", d);
        } else if (mode == AMPC_RESIZE_LINEAR) {
            ampc_cg_line(kn, "const double fl%d = floor(v%d), t%d = v%d - fl%d;", d, d, d, d, d);
            ampc_cg_line(kn, "const long long f%d = (long long)fl%d;", d, d);
            ampc_cg_line(kn, "const double w%d[2] = {1 - t%d, t%d};", d, d, d);
        } else {
            ampc_cg_line(kn, "const double fl%d = floor(v%d), t%d = v%d - fl%d, q%d = 1 - t%d;", d,
                         d, d, d, d, d, d);
            ampc_cg_line(kn, "const long long f%d = (long long)fl%d - 1;", d, d);
            ampc_cg_line(kn, "const double w%d[4] = {((A * (t%d + 1) - 5 * A) * (t%d + 1) + 8 * A) * "
                             "(t%d + 1) - 4 * A, ((A + 2) * t%d - (A + 3)) * t%d * t%d + 1, ((A + 2) * "
                             "q%d - (A + 3)) * q%d * q%d + 1, ((A * (q%d + 1) - 5 * A) * (q%d + 1) + "
                             "8 * A) * (q%d + 1) - 4 * A};",
                         d, d, d, d, d, d, d, d, d, d, d, d, d);
        }
    }
    ampc_cg_line(kn, "%s acc = (%s)0;", ct, ct);
    /* the taps: nested loops, the last dim fastest, as the reference's odometer */
    for (int32_t d = 0; d < k; d++) {
        ampc_cg_open(kn, "for (int c%d = 0; c%d < %d; c%d++)", d, d, cnt, d);
        ampc_cg_line(kn, "long long i%d = f%d + c%d;", d, d, d);
        const double dim = (double)dims[d];
        const double lo = align ? 0 : -0.5, hi = align ? dim - 1 : dim - 0.5;
        if (pad == AMPC_GRID_ZEROS) {
            ampc_cg_line(kn, "if (i%d < 0 || i%d >= %lldLL) continue;", d, d, (long long)dims[d]);
        } else {
            if (pad == AMPC_GRID_REFLECTION)
                ampc_cg_line(kn, "i%d = (long long)refl((double)i%d, %s, %s);", d, d,
                             ampc_cg_f64(lo).s, ampc_cg_f64(hi).s);
            ampc_cg_line(kn, "i%d = i%d < 0 ? 0 : i%d >= %lldLL ? %lldLL : i%d;", d, d, d,
                         (long long)dims[d], (long long)(dims[d] - 1), d);
        }
    }
    ampc_strbuf wt = {0}, off = {0};
    ampc_sb_puts(&wt, "1.0");
    ampc_sb_puts(&off, "0LL");
    for (int32_t d = 0; d < k; d++) {
        ampc_sb_printf(&wt, " * w%d[c%d]", d, d);
        ampc_strbuf t = {0};
        ampc_sb_printf(&t, "(%s) * %lldLL + i%d", off.data, (long long)dims[d], d);
        ampc_sb_free(&off);
        off = t;
    }
    ampc_cg_line(kn, "acc += (%s)(%s) * ampc::ld(%s, base + %s);", ct, wt.data, px, off.data);
    ampc_sb_free(&wt);
    ampc_sb_free(&off);
    for (int32_t d = 0; d < k; d++) ampc_cg_close(kn);
    ampc_cg_line(kn, "ampc::st(%s, i, acc);", py);
    ampc_cg_close(kn);
    return ampc_cg_kernel_end(kn, total, 256);
}

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

/* Lowers DFT and STFT (the caller dispatches only these two). */
ampc_status ampc_cg_lower_dft(ampc_cg *cg, const ampc_node *n) {
    return n->op == AMPC_OP_STFT ? lower_stft(cg, n) : lower_dft(cg, n);
}
