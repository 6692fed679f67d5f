/*
 * lower_rnn.c — generated kernels for the recurrent layers RNN, GRU and LSTM (LOWER_CONTRACT rows,
 * dispatched from lower_contract.c), mirroring ir/ref/rnn.c equation for equation.
 *
 * One block per (direction, batch entry): blockIdx.x = dir * batch + b. The threads stride over
 * the hidden units; the loop over time steps runs inside the block with __syncthreads between
 * steps. The hidden state lives in dynamic shared memory, double-buffered (h read, hn written,
 * swapped after each step); LSTM's cell state is per unit and stays in place; GRU keeps the step's
 * z, r, the input part of the h gate and rt . Ht-1 in shared memory between its two phases.
 * Shapes, strides, sequence lengths (a compile-time input), clip and the activations (with
 * alpha / beta baked in) are literals. Math is in the compute type (f32 for f32/f16/bf16, f64 for
 * f64) with the reference's order of additions; Ht and Ct are rounded to the tensor dtype after
 * every step, as the reference does. Y past an entry's length, and Y_h / Y_c of an entry of
 * length 0, are written as zeros (the arena is not zero-filled).
 */
#include "codegen.h"

#include "ir/ref/ref.h"
#include "ir/rnn.h"

#include <stdlib.h>
#include <string.h>

/* Shared-memory budget: the state must fit (f32 GRU: hidden_size up to 4096). */
enum { RNN_SMEM_MAX = 96 * 1024, RNN_BLOCK_MAX = 512 };

/* ---- activations (the table of ir/rnn.h) ------------------------------------------------ */

typedef ampc_rnn_act act;

/* The activation as an expression over `x` of compute type ct (ref/rnn.c's act_apply). */
static void act_expr(ampc_strbuf *e, const act *a, const char *ct) {
    const ampc_cg_literal A = ampc_cg_f64(a->alpha), B = ampc_cg_f64(a->beta);
    const char *al = A.s, *be = B.s;
    switch (a->kind) {
    case AMPC_RNN_ACT_RELU: ampc_sb_printf(e, "(x > (%s)0 ? x : (%s)0)", ct, ct); return;
    case AMPC_RNN_ACT_TANH: ampc_sb_puts(e, "ampc::m_tanh(x)"); return;
    case AMPC_RNN_ACT_SIGMOID: ampc_sb_printf(e, "((%s)1 / ((%s)1 + ampc::m_exp(-x)))", ct, ct); return;
    case AMPC_RNN_ACT_AFFINE: ampc_sb_printf(e, "((%s)%s * x + (%s)%s)", ct, al, ct, be); return;
    case AMPC_RNN_ACT_LEAKY_RELU: ampc_sb_printf(e, "(x >= (%s)0 ? x : (%s)%s * x)", ct, ct, al); return;
    case AMPC_RNN_ACT_THRESHOLDED_RELU:
        ampc_sb_printf(e, "(x >= (%s)%s ? x : (%s)0)", ct, al, ct);
        return;
    case AMPC_RNN_ACT_SCALED_TANH:
        ampc_sb_printf(e, "((%s)%s * ampc::m_tanh((%s)%s * x))", ct, al, ct, be);
        return;
    case AMPC_RNN_ACT_HARD_SIGMOID:
        ampc_sb_printf(e, "fmin(fmax((%s)%s * x + (%s)%s, (%s)0), (%s)1)", ct, al, ct, be,
                       ct, ct);
        return;
    case AMPC_RNN_ACT_ELU:
        ampc_sb_printf(e, "(x >= (%s)0 ? x : (%s)%s * (ampc::m_exp(x) - (%s)1))", ct, ct, al,
                       ct);
        return;
    case AMPC_RNN_ACT_SOFTSIGN: ampc_sb_printf(e, "(x / ((%s)1 + ampc::m_abs(x)))", ct); return;
    case AMPC_RNN_ACT_SOFTPLUS:
        ampc_sb_printf(e,
                       "(x > (%s)0 ? x + ampc::m_log1p(ampc::m_exp(-x)) : "
                       "ampc::m_log1p(ampc::m_exp(x)))",
                       ct);
        return;
    case AMPC_RNN_ACT_COUNT: break;
    }
    AMPC_ASSERT(!"unknown activation");
}

/* Emits lambda `name` applying role `role` of each direction (picked by `dir` when the two
 * directions' activations differ), with clip applied to its input when `clip` is set. */
static void emit_act(ampc_cg_kernel *k, const char *name, const act *acts, int32_t per,
                     int32_t dirs, int32_t role, const char *ct, bool clip, double clipv) {
    ampc_strbuf e0 = {0}, e1 = {0};
    act_expr(&e0, &acts[role], ct);
    if (dirs == 2) act_expr(&e1, &acts[per + role], ct);
    ampc_strbuf c = {0};
    if (clip)
        ampc_sb_printf(&c, "x = fmin(fmax(x, (%s)%s), (%s)%s); ", ct, ampc_cg_f64(-clipv).s, ct,
                       ampc_cg_f64(clipv).s);
    if (dirs == 2 && strcmp(e0.data, e1.data))
        ampc_cg_line(k, "auto %s = [=](%s x) -> %s { %sreturn dir == 0 ? %s : %s; };", name, ct, ct,
                     c.data ? c.data : "", e0.data, e1.data);
    else
        ampc_cg_line(k, "auto %s = [=](%s x) -> %s { %sreturn %s; };", name, ct, ct,
                     c.data ? c.data : "", e0.data);
    ampc_sb_free(&c);
    ampc_sb_free(&e0);
    ampc_sb_free(&e1);
}

/* ---- the kernel ----------------------------------------------------------------------------- */

typedef struct rnn_gen {
    ampc_cg_kernel *k;
    const char *ct;
    int64_t H, I, GH;
    const char *x, *w, *r, *b; /* parameter names (b NULL when absent) */
} rnn_gen;

/* Emits the pre-activation of gate `gate` for unit j into local `out`, in the reference's order:
 * acc = Wb + Xt . W (then, when `rec`, acc += Rb + Ht-1 . R with the state read from `h`). */
static void emit_pre(const rnn_gen *q, const char *out, int32_t gate, bool rec, const char *h) {
    ampc_cg_kernel *k = q->k;
    const char *ct = q->ct;
    if (q->b)
        ampc_cg_line(k, "%s %s = ampc::ld(%s, wbo + %lldLL + j);", ct, out, q->b,
                     (long long)(gate * q->H));
    else
        ampc_cg_line(k, "%s %s = (%s)0;", ct, out, ct);
    ampc_cg_open(k, "%s", "");
    ampc_cg_line(k, "const long long wr = wo + (%lldLL + j) * %lldLL;", (long long)(gate * q->H),
                 (long long)q->I);
    ampc_cg_line(k, "for (long long kk = 0; kk < %lldLL; kk++) %s += ampc::ld(%s, xo + kk) * "
                    "ampc::ld(%s, wr + kk);",
                 (long long)q->I, out, q->x, q->w);
    ampc_cg_close(k);
    if (!rec) return;
    ampc_cg_open(k, "%s", "");
    if (q->b)
        ampc_cg_line(k, "%s rec = ampc::ld(%s, wbo + %lldLL + j);", ct, q->b,
                     (long long)(q->GH + gate * q->H));
    else
        ampc_cg_line(k, "%s rec = (%s)0;", ct, ct);
    ampc_cg_line(k, "const long long rr = ro + (%lldLL + j) * %lldLL;", (long long)(gate * q->H),
                 (long long)q->H);
    ampc_cg_line(k, "for (long long kk = 0; kk < %lldLL; kk++) rec += %s[kk] * ampc::ld(%s, rr + kk);",
                 (long long)q->H, h, q->r);
    ampc_cg_line(k, "%s += rec;", out);
    ampc_cg_close(k);
}

ampc_status ampc_cg_lower_rnn(ampc_cg *cg, const ampc_node *n) {
    ampc_graph *g = ampc_cg_graph(cg);
    const bool lstm = n->op == AMPC_OP_LSTM, gru = n->op == AMPC_OP_GRU;
    const ampc_value *X = n->inputs[0], *W = n->inputs[1], *R = n->inputs[2];
#define OPT_IN(i) (n->n_inputs > (i) ? n->inputs[i] : NULL)
    const ampc_value *B = OPT_IN(3), *L = OPT_IN(4), *H0 = OPT_IN(5);
    const ampc_value *C0 = lstm ? OPT_IN(6) : NULL, *P = lstm ? OPT_IN(7) : NULL;
#undef OPT_IN
    const ampc_value *Y = n->outputs[0], *YH = n->n_outputs > 1 ? n->outputs[1] : NULL;
    const ampc_value *YC = lstm && n->n_outputs > 2 ? n->outputs[2] : NULL;

    const ampc_rnn_params rp = ampc_rnn_params_of(n);
    const bool layout1 = rp.layout1;
    const int64_t seq = X->shape.dims[layout1 ? 1 : 0], batch = X->shape.dims[layout1 ? 0 : 1];
    const int64_t I = X->shape.dims[2], H = R->shape.dims[2];
    const int32_t dirs = (int32_t)W->shape.dims[0];
    const int32_t G = gru ? 3 : lstm ? 4 : 1, per = gru ? 2 : lstm ? 3 : 1;
    const int64_t GH = G * H;
    const bool reverse_only = rp.reverse_only, lbr = rp.lbr, input_forget = rp.input_forget;
    const bool has_clip = rp.has_clip;
    const double clip = rp.clip;

    if (batch == 0 || H == 0) return AMPC_OK; /* every output is empty */
    if (seq == 0) {                          /* no step runs: Y is empty, Y_h and Y_c zero */
        ampc_status st = AMPC_OK;
        if (YH && ampc_ir_numel(YH)) st = ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, YH));
        if (st == AMPC_OK && YC && ampc_ir_numel(YC))
            st = ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, YC));
        return st;
    }

    const char *ct = ampc_cg_compute_type(X->dtype);
    const size_t es = X->dtype == AMPC_DTYPE_F64 ? 8 : 4;
    /* Each state vector starts 16-byte aligned (stride Hp): NVRTC vectorises the loops over
     * the state into 16-byte shared loads, which fault at an unaligned start (hn of an odd H). */
    const int64_t per16 = 16 / (int64_t)es, Hp = (H + per16 - 1) / per16 * per16;
    const int64_t words = (gru ? 6 : lstm ? 3 : 2) * Hp;
    if ((uint64_t)words * es > RNN_SMEM_MAX)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "%s with hidden_size %lld needs %lld bytes of shared memory for its "
                         "state, more than the %d the GPU kernel uses; it runs on the reference "
                         "evaluator only",
                         ampc_op_get(n->op)->onnx, (long long)H, (long long)(words * (int64_t)es),
                         RNN_SMEM_MAX);

    /* sequence lengths, a compile-time input (clamped as inference guarantees [0, seq]) */
    int64_t *lens = ampc_xcalloc((size_t)batch, sizeof *lens);
    for (int64_t b = 0; b < batch; b++) {
        int64_t v = L && L->data ? ampc_ref_load_i64(L->data, L->dtype, b) : seq;
        lens[b] = v < 0 ? 0 : v > seq ? seq : v;
    }
    act acts[6];
    ampc_rnn_acts_resolve(n, per, dirs, acts);

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    rnn_gen q = {.k = k, .ct = ct, .H = H, .I = I, .GH = GH};
    q.x = ampc_cg_param(k, X, false);
    q.w = ampc_cg_param(k, W, false);
    q.r = ampc_cg_param(k, R, false);
    q.b = B ? ampc_cg_param(k, B, false) : NULL;
    const char *ph0 = H0 ? ampc_cg_param(k, H0, false) : NULL;
    const char *pc0 = C0 ? ampc_cg_param(k, C0, false) : NULL;
    const char *pp = P ? ampc_cg_param(k, P, false) : NULL;
    const char *py = ampc_cg_param(k, Y, true);
    const char *pyh = YH ? ampc_cg_param(k, YH, true) : NULL;
    const char *pyc = YC ? ampc_cg_param(k, YC, true) : NULL;

    ampc_cg_line(k, "extern __shared__ __align__(16) unsigned char smem_[];");
    ampc_cg_line(k, "%s *const sh = reinterpret_cast<%s *>(smem_);", ct, ct);
    ampc_cg_line(k, "const int dir = (int)(blockIdx.x / %lldULL);", (unsigned long long)batch);
    ampc_cg_line(k, "const long long b = (long long)(blockIdx.x %% %lldULL);", (unsigned long long)batch);
    ampc_cg_line(k, "const bool rev = %s;", reverse_only ? "true" : "dir == 1");
    ampc_strbuf lb = {0};
    for (int64_t b = 0; b < batch; b++) ampc_sb_printf(&lb, "%lldLL,", (long long)lens[b]);
    ampc_cg_line(k, "static const long long lens_[%lld] = {%s};", (long long)batch, lb.data);
    ampc_sb_free(&lb);
    free(lens);
    ampc_cg_line(k, "const long long len = lens_[b];");
    /* element offsets, as ref/rnn.c's x_off / y_off / s_off */
    if (layout1)
        ampc_cg_line(k, "const long long so = (b * %dLL + dir) * %lldLL;", dirs, (long long)H);
    else
        ampc_cg_line(k, "const long long so = ((long long)dir * %lldLL + b) * %lldLL;",
                     (long long)batch, (long long)H);
    ampc_cg_line(k, "const long long wo = (long long)dir * %lldLL, ro = (long long)dir * %lldLL, "
                    "wbo = (long long)dir * %lldLL;",
                 (long long)(GH * I), (long long)(GH * H), (long long)(2 * GH));
    ampc_cg_line(k, "(void)wbo;");
    ampc_cg_line(k, "%s *h = sh, *hn = sh + %lldLL;", ct, (long long)Hp);
    if (lstm) ampc_cg_line(k, "%s *const c = sh + %lldLL;", ct, (long long)(2 * Hp));
    if (gru)
        ampc_cg_line(k, "%s *const tmp = sh + %lldLL, *const zs = sh + %lldLL, *const rs = sh + "
                        "%lldLL, *const hx = sh + %lldLL;",
                     ct, (long long)(2 * Hp), (long long)(3 * Hp), (long long)(4 * Hp),
                     (long long)(5 * Hp));
    /* Ht and Ct are values of the tensor dtype: round them after every step */
    if (X->dtype == AMPC_DTYPE_F16 || X->dtype == AMPC_DTYPE_BF16)
        ampc_cg_line(k, "auto rnd = [](%s v) -> %s { return ampc::to_f32(ampc::cvt<%s>(v)); };", ct,
                     ct, ampc_cg_ctype(X->dtype));
    else
        ampc_cg_line(k, "auto rnd = [](%s v) -> %s { return v; };", ct, ct);
    emit_act(k, "af", acts, per, dirs, 0, ct, has_clip, clip);
    if (per > 1) emit_act(k, "ag", acts, per, dirs, 1, ct, has_clip, clip);
    if (per > 2) emit_act(k, "ah", acts, per, dirs, 2, ct, false, 0); /* h(Ct): Ct unclipped */

    /* initial state */
    ampc_cg_open(k, "for (long long j = threadIdx.x; j < %lldLL; j += blockDim.x)", (long long)H);
    if (ph0) ampc_cg_line(k, "h[j] = ampc::ld(%s, so + j);", ph0);
    else ampc_cg_line(k, "h[j] = (%s)0;", ct);
    if (lstm) {
        if (pc0) ampc_cg_line(k, "c[j] = ampc::ld(%s, so + j);", pc0);
        else ampc_cg_line(k, "c[j] = (%s)0;", ct);
    }
    ampc_cg_close(k);
    ampc_cg_line(k, "__syncthreads();");

    /* the time steps */
    ampc_cg_open(k, "for (long long s = 0; s < len; s++)");
    ampc_cg_line(k, "const long long t = rev ? len - 1 - s : s;");
    if (layout1) {
        ampc_cg_line(k, "const long long xo = (b * %lldLL + t) * %lldLL;", (long long)seq, (long long)I);
        ampc_cg_line(k, "const long long yo = ((b * %lldLL + t) * %dLL + dir) * %lldLL;",
                     (long long)seq, dirs, (long long)H);
    } else {
        ampc_cg_line(k, "const long long xo = (t * %lldLL + b) * %lldLL;", (long long)batch, (long long)I);
        ampc_cg_line(k, "const long long yo = ((t * %dLL + dir) * %lldLL + b) * %lldLL;", dirs,
                     (long long)batch, (long long)H);
    }
    ampc_cg_open(k, "for (long long j = threadIdx.x; j < %lldLL; j += blockDim.x)", (long long)H);
    switch (n->op) {
    case AMPC_OP_RNN:
        emit_pre(&q, "pi", 0, true, "h");
        ampc_cg_line(k, "const %s v = rnd(af(pi));", ct);
        ampc_cg_line(k, "hn[j] = v;");
        ampc_cg_line(k, "ampc::st(%s, yo + j, v);", py);
        break;
    case AMPC_OP_GRU: /* phase 1: z, r, the input part of the h gate (and rt . Ht-1) */
        emit_pre(&q, "pz", 0, true, "h");
        emit_pre(&q, "pr", 1, true, "h");
        emit_pre(&q, "ph", 2, false, "h");
        ampc_cg_line(k, "zs[j] = af(pz);");
        ampc_cg_line(k, "rs[j] = af(pr);");
        ampc_cg_line(k, "hx[j] = ph;");
        if (!lbr) ampc_cg_line(k, "tmp[j] = rs[j] * h[j];");
        ampc_cg_close(k);
        ampc_cg_line(k, "__syncthreads();");
        ampc_cg_open(k, "for (long long j = threadIdx.x; j < %lldLL; j += blockDim.x)", (long long)H);
        ampc_cg_line(k, "%s rec = (%s)0;", ct, ct);
        ampc_cg_line(k, "const long long rr = ro + (%lldLL + j) * %lldLL;", (long long)(2 * H),
                     (long long)H);
        ampc_cg_line(k, "for (long long kk = 0; kk < %lldLL; kk++) rec += %s[kk] * ampc::ld(%s, rr + kk);",
                     (long long)H, lbr ? "h" : "tmp", q.r);
        if (B) ampc_cg_line(k, "rec += ampc::ld(%s, wbo + %lldLL + j);", q.b, (long long)(GH + 2 * H));
        else ampc_cg_line(k, "rec += (%s)0;", ct);
        ampc_cg_line(k, "const %s hh = hx[j] + %s;", ct, lbr ? "rs[j] * rec" : "rec");
        ampc_cg_line(k, "const %s cand = ag(hh), z = zs[j];", ct);
        ampc_cg_line(k, "const %s v = rnd(((%s)1 - z) * cand + z * h[j]);", ct, ct);
        ampc_cg_line(k, "hn[j] = v;");
        ampc_cg_line(k, "ampc::st(%s, yo + j, v);", py);
        break;
    default: /* LSTM: rows i, o, f, c; peepholes i, o, f */
        emit_pre(&q, "pi", 0, true, "h");
        emit_pre(&q, "po", 1, true, "h");
        emit_pre(&q, "pf", 2, true, "h");
        emit_pre(&q, "pc", 3, true, "h");
        ampc_cg_line(k, "const %s cprev = c[j];", ct);
        if (pp) {
            ampc_cg_line(k, "const long long po_ = (long long)dir * %lldLL + j;", (long long)(3 * H));
            ampc_cg_line(k, "const %s ig = af(pi + ampc::ld(%s, po_) * cprev);", ct, pp);
        } else {
            ampc_cg_line(k, "const %s ig = af(pi);", ct);
        }
        if (input_forget) ampc_cg_line(k, "const %s fg = (%s)1 - ig;", ct, ct);
        else if (pp)
            ampc_cg_line(k, "const %s fg = af(pf + ampc::ld(%s, po_ + %lldLL) * cprev);", ct, pp,
                         (long long)(2 * H));
        else ampc_cg_line(k, "const %s fg = af(pf);", ct);
        if (input_forget) ampc_cg_line(k, "(void)pf;");
        ampc_cg_line(k, "const %s cg = ag(pc);", ct);
        ampc_cg_line(k, "const %s cell = rnd(fg * cprev + ig * cg);", ct);
        if (pp)
            ampc_cg_line(k, "const %s og = af(po + ampc::ld(%s, po_ + %lldLL) * cell);", ct, pp,
                         (long long)H);
        else ampc_cg_line(k, "const %s og = af(po);", ct);
        ampc_cg_line(k, "c[j] = cell;");
        ampc_cg_line(k, "const %s v = rnd(og * ah(cell));", ct);
        ampc_cg_line(k, "hn[j] = v;");
        ampc_cg_line(k, "ampc::st(%s, yo + j, v);", py);
        break;
    }
    ampc_cg_close(k); /* units */
    ampc_cg_line(k, "__syncthreads();");
    ampc_cg_line(k, "%s *const sw = h; h = hn; hn = sw;", ct);
    ampc_cg_close(k); /* steps */

    /* Y is zero past the entry's length; Y_h / Y_c the last state, zero for length 0 */
    ampc_cg_open(k, "for (long long t = len; t < %lldLL; t++)", (long long)seq);
    if (layout1)
        ampc_cg_line(k, "const long long yo = ((b * %lldLL + t) * %dLL + dir) * %lldLL;",
                     (long long)seq, dirs, (long long)H);
    else
        ampc_cg_line(k, "const long long yo = ((t * %dLL + dir) * %lldLL + b) * %lldLL;", dirs,
                     (long long)batch, (long long)H);
    ampc_cg_line(k, "for (long long j = threadIdx.x; j < %lldLL; j += blockDim.x) ampc::st(%s, yo + j, "
                    "(%s)0);",
                 (long long)H, py, ct);
    ampc_cg_close(k);
    if (pyh || pyc) {
        ampc_cg_open(k, "for (long long j = threadIdx.x; j < %lldLL; j += blockDim.x)", (long long)H);
        if (pyh) ampc_cg_line(k, "ampc::st(%s, so + j, len ? h[j] : (%s)0);", pyh, ct);
        if (pyc) ampc_cg_line(k, "ampc::st(%s, so + j, len ? c[j] : (%s)0);", pyc, ct);
        ampc_cg_close(k);
    }

    int64_t threads = (H + 31) / 32 * 32;
    if (threads > RNN_BLOCK_MAX) threads = RNN_BLOCK_MAX;
    uint32_t grid[3] = {(uint32_t)(dirs * batch), 1, 1}, block[3] = {(uint32_t)threads, 1, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, (uint32_t)(words * (int64_t)es));
}
