/*
 * lower_quant.c — generated kernels for the rarer ops whose reference kernels are loops of their
 * own: QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked), DynamicQuantizeLinear,
 * Det, MelWeightMatrix and TfIdfVectorizer (integer pools). Each mirrors its reference kernel
 * (ir/ref/quant.c, linalg.c, signal.c, index.c) step by step, at the same precision:
 *
 *   Quantize / Dequantize: a thread an element; the parameter index (per tensor / axis / block)
 *     is baked in; x / scale is rounded to the numpy result type as the reference does, then
 *     rounded half to even and saturated (kernels/quant.cuh).
 *   DynamicQuantizeLinear: one block: min / max over the tensor (both start at 0, NaN ignored),
 *     scale and zero point in f32 by thread 0, then every element quantised by the block.
 *   Det: a thread a matrix, LU with partial pivoting in f64 in a local array (n <= 64).
 *   MelWeightMatrix: a thread an output, recomputing its band's three mel points in f64.
 *   TfIdfVectorizer: a thread a row; the pool's trie is baked into the kernel as sorted child
 *     lists; counts accumulate in the row of the f32 output, then turn into TF / IDF / TFIDF.
 */
#include "codegen.h"
#include "ir/quant.h"
#include "ir/infer/infer.h"
#include "ir/tfidf.h"

#include <stdlib.h>
#include <string.h>

static ampc_status unsupported(ampc_cg *cg, const ampc_node *n, const char *why) {
    return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED, "%s has no generated GPU kernel %s",
                     ampc_op_get(n->op)->onnx, why);
}

static bool present(const ampc_node *n, int32_t i) { return n->n_inputs > i && n->inputs[i]; }
static bool has_out(const ampc_node *n, int32_t i) { return n->n_outputs > i && n->outputs[i]; }

/* ---- QuantizeLinear / DequantizeLinear ------------------------------------------------------ */

/* The range of a quantised (or i32) dtype, as ir/ref/quant.c's qrange. */
static void qrange(ampc_dtype t, double *lo, double *hi) {
    switch (t) {
    case AMPC_DTYPE_I8: *lo = -128, *hi = 127; return;
    case AMPC_DTYPE_U16: *lo = 0, *hi = 65535; return;
    case AMPC_DTYPE_I16: *lo = -32768, *hi = 32767; return;
    case AMPC_DTYPE_I32: *lo = -2147483648.0, *hi = 2147483647.0; return;
    default: *lo = 0, *hi = 255; return;
    }
}

/* The numpy result type of x / scale (ir/ref/quant.c's div_type). */
static ampc_dtype div_type(ampc_dtype x, ampc_dtype s) {
    if (!ampc_dtype_is_float(x) || x == AMPC_DTYPE_F64 || s == AMPC_DTYPE_F64) return AMPC_DTYPE_F64;
    if (x == AMPC_DTYPE_F16 && s == AMPC_DTYPE_F16) return AMPC_DTYPE_F16;
    return AMPC_DTYPE_F32;
}

/* Emits "const long long q = <parameter index of element i>;" (ir/ref/quant.c's qmap). */
static void emit_qindex(ampc_cg_kernel *k, const ampc_node *n) {
    const ampc_shape *x = &n->inputs[0]->shape, *s = &n->inputs[1]->shape;
    int64_t block = ampc_quant_block(n);
    if (ampc_shape_numel(s) == 1 && s->rank <= 1 && block == 0) {
        ampc_cg_line(k, "const long long q = 0;");
        return;
    }
    const int32_t ax = ampc_axis_of(n, x->rank);
    int64_t dim = x->dims[ax], inner = 1;
    for (int32_t d = ax + 1; d < x->rank; d++) inner *= x->dims[d];
    if (!block) {
        ampc_cg_line(k, "const long long q = (i / %lldLL) %% %lldLL;", (long long)inner, (long long)dim);
        return;
    }
    ampc_cg_line(k, "const long long q = ((i / %lldLL) * %lldLL + ((i / %lldLL) %% %lldLL) / %lldLL) * "
                    "%lldLL + i %% %lldLL;",
                 (long long)(inner * dim), (long long)s->dims[ax], (long long)inner, (long long)dim,
                 (long long)block, (long long)inner, (long long)inner);
}

static ampc_status lower_qdq(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *s = n->inputs[1], *y = n->outputs[0];
    bool zp = present(n, 2), quant = n->op == AMPC_OP_QUANTIZE_LINEAR;
    int64_t count = ampc_ir_numel(y);
    if (count == 0) return AMPC_OK;
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, quant ? "quantize" : "dequantize");
    const char *px = ampc_cg_param(k, x, false), *ps = ampc_cg_param(k, s, false);
    const char *pz = zp ? ampc_cg_param(k, n->inputs[2], false) : NULL;
    const char *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    emit_qindex(k, n);
    if (quant) {
        /* x / scale in f64, rounded to the reference's result type, then rint + zero point. */
        double lo, hi;
        qrange(y->dtype, &lo, &hi);
        ampc_cg_line(k, "double v = ampc::to_f64(%s[i]) / ampc::to_f64(%s[q]);", px, ps);
        ampc_dtype dt = div_type(x->dtype, s->dtype);
        if (dt == AMPC_DTYPE_F32) ampc_cg_line(k, "v = (double)__double2float_rn(v);");
        else if (dt == AMPC_DTYPE_F16) ampc_cg_line(k, "v = (double)__half2float(__double2half(v));");
        ampc_strbuf z = {0};
        if (zp) ampc_sb_printf(&z, "(double)(long long)%s[q]", pz);
        else ampc_sb_puts(&z, "0.0");
        ampc_cg_line(k, "%s[i] = (%s)ampc::q_sat_rint(rint(v) + %s, %s, %s);", py,
                     ampc_cg_ctype(y->dtype), z.data, ampc_cg_f64(lo).s, ampc_cg_f64(hi).s);
        ampc_sb_free(&z);
    } else {
        if (zp) ampc_cg_line(k, "const long long d = (long long)%s[i] - (long long)%s[q];", px, pz);
        else ampc_cg_line(k, "const long long d = (long long)%s[i];", px);
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>((double)d * ampc::to_f64(%s[q]));", py,
                     ampc_cg_ctype(y->dtype), ps);
    }
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- DynamicQuantizeLinear ------------------------------------------------------------------ */

static ampc_status lower_dynamic_quantize(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t count = ampc_ir_numel(x);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "dynamic_quantize");
    const char *px = ampc_cg_param(k, x, false);
    const char *py = has_out(n, 0) ? ampc_cg_param(k, n->outputs[0], true) : NULL;
    const char *ps = has_out(n, 1) ? ampc_cg_param(k, n->outputs[1], true) : NULL;
    const char *pz = has_out(n, 2) ? ampc_cg_param(k, n->outputs[2], true) : NULL;
    ampc_cg_line(k, "__shared__ float smn[256], smx[256], sh_scale, sh_zp;");
    ampc_cg_line(k, "const int t = threadIdx.x;");
    /* Both extremes start at 0 and NaN never compares: as the reference. */
    ampc_cg_line(k, "float mn = 0.0f, mx = 0.0f;");
    ampc_cg_open(k, "for (long long e = t; e < %lldLL; e += 256)", (long long)count);
    ampc_cg_line(k, "const float v = %s[e];", px);
    ampc_cg_line(k, "if (v < mn) mn = v;");
    ampc_cg_line(k, "if (v > mx) mx = v;");
    ampc_cg_close(k);
    ampc_cg_line(k, "smn[t] = mn;");
    ampc_cg_line(k, "smx[t] = mx;");
    ampc_cg_line(k, "__syncthreads();");
    ampc_cg_open(k, "for (int w = 128; w > 0; w >>= 1)");
    ampc_cg_open(k, "if (t < w)");
    ampc_cg_line(k, "if (smn[t + w] < smn[t]) smn[t] = smn[t + w];");
    ampc_cg_line(k, "if (smx[t + w] > smx[t]) smx[t] = smx[t + w];");
    ampc_cg_close(k);
    ampc_cg_line(k, "__syncthreads();");
    ampc_cg_close(k);
    /* Scale and zero point in f32, each step rounded as the reference's volatile floats. */
    ampc_cg_open(k, "if (t == 0)");
    ampc_cg_line(k, "const float scale = __fdiv_rn(__fsub_rn(smx[0], smn[0]), 255.0f);");
    ampc_cg_line(k, "float zpf = 0.0f;");
    ampc_cg_line(k, "if (scale != 0.0f) zpf = (float)ampc::q_sat_rint((double)__fsub_rn(0.0f, "
                    "__fdiv_rn(smn[0], scale)), 0.0, 255.0);");
    ampc_cg_line(k, "sh_scale = scale;");
    ampc_cg_line(k, "sh_zp = zpf;");
    if (ps) ampc_cg_line(k, "%s[0] = scale;", ps);
    if (pz) ampc_cg_line(k, "%s[0] = (unsigned char)zpf;", pz);
    ampc_cg_close(k);
    ampc_cg_line(k, "__syncthreads();");
    if (py) {
        ampc_cg_line(k, "const float scale = sh_scale;");
        ampc_cg_line(k, "const double zpf = (double)sh_zp;");
        ampc_cg_open(k, "for (long long e = t; e < %lldLL; e += 256)", (long long)count);
        ampc_cg_line(k, "const float q = scale != 0.0f ? __fdiv_rn(%s[e], scale) : 0.0f;", px);
        ampc_cg_line(k, "%s[e] = (unsigned char)ampc::q_sat_rint(rint((double)q) + zpf, 0.0, 255.0);", py);
        ampc_cg_close(k);
    }
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {256, 1, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, 0);
}

/* ---- Det ------------------------------------------------------------------------------------ */

enum { DET_MAX_N = 64 };

static ampc_status lower_det(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    int64_t m = x->shape.dims[x->shape.rank - 1], count = ampc_ir_numel(y);
    if (count == 0) return AMPC_OK;
    if (m > DET_MAX_N) {
        char why[128];
        snprintf(why, sizeof why, "for %lldx%lld matrices yet (at most %dx%d)", (long long)m,
                 (long long)m, DET_MAX_N, DET_MAX_N);
        return unsupported(cg, n, why);
    }
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "det");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    if (m == 0) {
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(1.0);", py, ampc_cg_ctype(y->dtype));
        ampc_cg_close(k);
        return ampc_cg_kernel_end(k, count, 64);
    }
    const long long M = (long long)m;
    ampc_cg_line(k, "double a[%lld];", M * M);
    ampc_cg_line(k, "for (int e = 0; e < %lld; e++) a[e] = ampc::to_f64(%s[i * %lldLL + e]);", M * M, px,
                 M * M);
    ampc_cg_line(k, "double det = 1.0;");
    ampc_cg_open(k, "for (int c = 0; c < %lld && det != 0.0; c++)", M);
    ampc_cg_line(k, "int piv = c;");
    ampc_cg_line(k, "for (int r = c + 1; r < %lld; r++) if (fabs(a[r * %lld + c]) > fabs(a[piv * %lld + c])) "
                    "piv = r;",
                 M, M, M);
    ampc_cg_open(k, "if (a[piv * %lld + c] == 0.0)", M);
    ampc_cg_line(k, "det = 0.0;");
    ampc_cg_line(k, "break;");
    ampc_cg_close(k);
    ampc_cg_open(k, "if (piv != c)");
    ampc_cg_open(k, "for (int j = 0; j < %lld; j++)", M);
    ampc_cg_line(k, "const double tmp = a[c * %lld + j];", M);
    ampc_cg_line(k, "a[c * %lld + j] = a[piv * %lld + j];", M, M);
    ampc_cg_line(k, "a[piv * %lld + j] = tmp;", M);
    ampc_cg_close(k);
    ampc_cg_line(k, "det = -det;");
    ampc_cg_close(k);
    ampc_cg_line(k, "det *= a[c * %lld + c];", M);
    ampc_cg_open(k, "for (int r = c + 1; r < %lld; r++)", M);
    ampc_cg_line(k, "const double f = a[r * %lld + c] / a[c * %lld + c];", M, M);
    /* __dmul_rn / __dsub_rn: no contraction into an fma, as the reference's separate steps. */
    ampc_cg_line(k, "for (int j = c + 1; j < %lld; j++) a[r * %lld + j] = __dsub_rn(a[r * %lld + j], "
                    "__dmul_rn(f, a[c * %lld + j]));",
                 M, M, M, M);
    ampc_cg_close(k);
    ampc_cg_close(k);
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(det);", py, ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 64);
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

/* ---- TfIdfVectorizer ------------------------------------------------------------------------ */

typedef ampc_tfidf_node tf_node;

/* Orders non-root nodes by (parent, token): each node's children become one sorted run. */
static const tf_node *sort_base;
static int by_parent_token(const void *a, const void *b) {
    const tf_node *x = &sort_base[*(const int64_t *)a], *y = &sort_base[*(const int64_t *)b];
    if (x->parent != y->parent) return x->parent < y->parent ? -1 : 1;
    return x->token < y->token ? -1 : x->token > y->token;
}

/* Emits `static const <type> name[] = {...};`, 12 entries a line (one 0 when empty). */
static void emit_table(ampc_cg_kernel *k, const char *type, const char *name, const int64_t *v,
                       int64_t cnt, const char *suffix) {
    ampc_cg_line(k, "static const %s %s[%lld] = {", type, name, (long long)(cnt ? cnt : 1));
    ampc_strbuf sb = {0};
    if (!cnt) ampc_sb_puts(&sb, "0");
    for (int64_t i = 0; i < cnt; i++) {
        ampc_sb_printf(&sb, "%lld%s%s", (long long)v[i], suffix, i + 1 < cnt ? "," : "");
        if ((i + 1) % 12 == 0 || i + 1 == cnt) {
            ampc_cg_line(k, "    %s", sb.data);
            sb.len = 0;
            sb.data[0] = 0;
        } else {
            ampc_sb_putc(&sb, ' ');
        }
    }
    if (!cnt) ampc_cg_line(k, "    %s", sb.data);
    ampc_sb_free(&sb);
    ampc_cg_line(k, "};");
}

static ampc_status lower_tfidf(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const ampc_tfidf p = ampc_tfidf_of(g, n);
    const int64_t *idx = p.indexes, lo = p.min_len, hi = p.max_len, skips = p.skips;
    const float *wts = p.weights;
    const char *mode = p.mode;
    int64_t rows = x->shape.rank == 2 ? x->shape.dims[0] : 1;
    int64_t cols = x->shape.rank ? x->shape.dims[x->shape.rank - 1] : 1;
    int64_t out_size = y->shape.dims[y->shape.rank - 1];
    if (ampc_ir_numel(y) == 0) return AMPC_OK;

    /* The trie, as the reference walks it (ir/tfidf.h). */
    ampc_tfidf_trie t;
    if (!ampc_tfidf_trie_build(&p, &t))
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory building the n-gram table");
    /* Child runs: ord = non-root nodes sorted by (parent, token); first[] = CSR offsets; a
     * node's output coordinate is the ngram_indexes entry of its id, or -1. */
    int64_t nn = t.n, nc = nn - 1;
    int64_t *ord = ampc_xcalloc((size_t)AMPC_MAX(nc, 1), sizeof *ord);
    int64_t *tok = ampc_xcalloc((size_t)AMPC_MAX(nc, 1), sizeof *tok);
    int64_t *first = ampc_xcalloc((size_t)nn + 1, sizeof *first);
    int64_t *oc = ampc_xcalloc((size_t)nn, sizeof *oc);
    for (int64_t i = 0; i < nc; i++) ord[i] = i + 1;
    sort_base = t.nodes;
    if (nc > 1) qsort(ord, (size_t)nc, sizeof *ord, by_parent_token);
    for (int64_t i = 0; i < nc; i++) {
        tok[i] = t.nodes[ord[i]].token;
        first[t.nodes[ord[i]].parent + 1]++;
    }
    for (int64_t i = 0; i < nn; i++) first[i + 1] += first[i];
    for (int64_t i = 0; i < nn; i++) oc[i] = t.nodes[i].id ? idx[t.nodes[i].id - 1] : -1;

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "tfidf");
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    emit_table(k, "int", "tf_first", first, nn + 1, "");
    emit_table(k, "long long", "tf_tok", tok, nc, "LL");
    emit_table(k, "int", "tf_node", ord, nc, "");
    emit_table(k, "int", "tf_coord", oc, nn, "");
    bool tf = !strcmp(mode, "TF"), idf = !strcmp(mode, "IDF");
    if (!tf && wts) {
        ampc_cg_line(k, "static const float tf_w[%lld] = {", (long long)out_size);
        for (int64_t i = 0; i < out_size; i++)
            ampc_cg_line(k, "    %s%s", ampc_cg_f32(wts[i]).s, i + 1 < out_size ? "," : "");
        ampc_cg_line(k, "};");
    }
    ampc_cg_grid_loop(k, rows);
    ampc_cg_line(k, "float *yr = %s + i * %lldLL;", py, (long long)out_size);
    ampc_cg_line(k, "const %s *xr = %s + i * %lldLL;", ampc_cg_ctype(x->dtype), px, (long long)cols);
    ampc_cg_line(k, "for (long long o = 0; o < %lldLL; o++) yr[o] = 0.0f;", (long long)out_size);
    ampc_cg_line(k, "long long first = %lldLL;", (long long)lo);
    ampc_cg_open(k, "for (long long skip = 1; skip <= %lldLL; skip++)", (long long)skips);
    ampc_cg_open(k, "for (long long s0 = 0; s0 < %lldLL; s0++)", (long long)cols);
    ampc_cg_line(k, "if (s0 + skip * (first - 1) >= %lldLL) break;", (long long)cols);
    ampc_cg_line(k, "int node = 0;");
    ampc_cg_line(k, "long long size = 1;");
    ampc_cg_open(k, "for (long long e = s0; size <= %lldLL && e < %lldLL; e += skip, size++)", (long long)hi,
                 (long long)cols);
    ampc_cg_line(k, "node = ampc::tf_child(tf_first, tf_tok, tf_node, node, (long long)xr[e]);");
    ampc_cg_line(k, "if (node < 0) break;");
    ampc_cg_line(k, "if (size >= first && tf_coord[node] >= 0) yr[tf_coord[node]] += 1.0f;");
    ampc_cg_close(k);
    ampc_cg_close(k);
    ampc_cg_open(k, "if (first == 1)");
    ampc_cg_line(k, "first = 2;");
    ampc_cg_line(k, "if (first > %lldLL) break;", (long long)hi);
    ampc_cg_close(k);
    ampc_cg_close(k);
    if (!tf) {
        const char *w = wts ? "(double)tf_w[o]" : "1.0";
        ampc_cg_open(k, "for (long long o = 0; o < %lldLL; o++)", (long long)out_size);
        ampc_cg_line(k, "const double f = (double)yr[o];");
        if (idf) ampc_cg_line(k, "yr[o] = (float)(f > 0.0 ? %s : 0.0);", w);
        else ampc_cg_line(k, "yr[o] = (float)(%s * f);", w);
        ampc_cg_close(k);
    }
    ampc_cg_close(k);
    ampc_tfidf_trie_free(&t);
    free(ord), free(tok), free(first), free(oc);
    return ampc_cg_kernel_end(k, rows, 64);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

ampc_status ampc_cg_lower_quant(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_QUANTIZE_LINEAR: case AMPC_OP_DEQUANTIZE_LINEAR: return lower_qdq(cg, n);
    case AMPC_OP_DYNAMIC_QUANTIZE_LINEAR: return lower_dynamic_quantize(cg, n);
    case AMPC_OP_DET: return lower_det(cg, n);
    case AMPC_OP_MEL_WEIGHT_MATRIX: return lower_mel(cg, n);
    case AMPC_OP_TFIDF_VECTORIZER: return lower_tfidf(cg, n);
    default: return unsupported(cg, n, "yet");
    }
}
