/*
 * lower_rnn.c — RNN, GRU and LSTM on the GPU (LOWER_CONTRACT rows, dispatched from
 * lower_contract.c), equation for equation as ir/ref/rnn.c.
 *
 * A layer is two parts. The input projection of every time step at once, Xt . W^T for each
 * direction, is one batched GEMM step (cuBLASLt; TF32 for f32 under the compile's math, as every
 * f32 matmul) into scratch, in the compute type. The recurrence is then one launch of a
 * generated kernel a time step (ampc_cg_kernel_repeat; two for GRU with linear_before_reset 0,
 * whose h gate needs every unit's r first): its blocks split the hidden units (all the gate rows
 * feeding them) and the batch, multiply their rows of R by the previous state (rnn.cuh's
 * rnn_recurrent; rnn_recurrent_tc on the tensor cores, TF32, when the compile's math allows TF32
 * for f32 matmuls and the layer is f32 with a batch tile of 8s: geom_of), add the biases and the
 * step's projection, and apply the gates. The state lives
 * in scratch between launches (h double-buffered, LSTM's c in place); step s of an entry of
 * length len reads time t = s (or len - 1 - s backwards), and for s >= len writes the zeros of Y
 * at time s instead. Y_h and Y_c are written at the entry's last step (zeros for length 0).
 * Sequence lengths (a compile-time input), clip and the activations (alpha / beta baked in) are
 * literals. Math is in the compute type (f32 for f32/f16/bf16, f64 for f64); Ht and Ct are rounded
 * to the tensor dtype after every step, as the reference does.
 */
#include "codegen.h"

#include "ir/ref/ref.h"
#include "ir/rnn.h"

#include <stdlib.h>
#include <string.h>

/* The step kernel's blocks: 256 threads; about RNN_BLOCKS of them a launch (two an SM of an
 * H100, so the rows of R stream from L2 through many SMs at once); at most RNN_BT batch entries
 * and RNN_U units a block; the state's chunk in shared memory at most RNN_HS_BYTES. Launches a
 * layer: at most RNN_MAX_LAUNCHES (sequence length, twice it for GRU's two phases). */
enum {
    RNN_THREADS = 256,
    RNN_BLOCKS = 256,
    RNN_BT = 32,
    RNN_U = 16,
    RNN_TC_BLOCKS = 128,
    RNN_TC_MIN_H = 64,
    RNN_HS_BYTES = 64 * 1024,
    RNN_MAX_LAUNCHES = 1 << 16,
};

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

/* ---- the layer ------------------------------------------------------------------------------ */

/* What a layer's lowering works with. */
typedef struct rnn_layer {
    const ampc_node *n;
    const ampc_value *X, *W, *R, *B, *L, *H0, *C0, *P, *Y, *YH, *YC;
    ampc_rnn_params rp;
    bool lstm, gru, two_phase; /* two_phase: GRU with linear_before_reset 0 */
    int64_t seq, batch, I, H, G, GH, rows; /* rows: seq * batch, the projection's rows */
    int32_t dirs, per;
    const char *ct;
    ampc_dtype cdt; /* the compute type's dtype: f64 or f32 */
    int64_t es;     /* its size */
} rnn_layer;

/* The scratch regions: gx the projection [dirs, rows, GH]; hb the state h, two of [dirs, batch,
 * H]; cb LSTM's c; zb and rb GRU's z and r . Ht-1 between its phases. */
typedef struct rnn_scratch {
    ampc_rt_ref gx, hb, cb, zb, rb;
} rnn_scratch;

/* How a step kernel's launch splits the work. */
typedef struct rnn_geom {
    int64_t bt, btiles; /* batch entries a block, tiles of the batch */
    int64_t kc;         /* state values a chunk (of H) in shared memory */
    int64_t u, nblk;    /* units a block, blocks a direction and tile */
    int32_t rw;         /* rows of R a warp takes at once */
    int32_t rows;       /* rows of R a block multiplies at most in one launch */
    bool tc;            /* the product on the tensor cores (rnn_recurrent_tc) */
    int64_t hs;         /* values of shared memory before acc (the state's chunk) */
} rnn_geom;

static rnn_layer layer_of(const ampc_node *n) {
    rnn_layer l = {.n = n, .lstm = n->op == AMPC_OP_LSTM, .gru = n->op == AMPC_OP_GRU};
#define OPT_IN(i) (n->n_inputs > (i) ? n->inputs[i] : NULL)
    l.X = n->inputs[0], l.W = n->inputs[1], l.R = n->inputs[2];
    l.B = OPT_IN(3), l.L = OPT_IN(4), l.H0 = OPT_IN(5);
    l.C0 = l.lstm ? OPT_IN(6) : NULL, l.P = l.lstm ? OPT_IN(7) : NULL;
#undef OPT_IN
    l.Y = n->outputs[0];
    l.YH = n->n_outputs > 1 ? n->outputs[1] : NULL;
    l.YC = l.lstm && n->n_outputs > 2 ? n->outputs[2] : NULL;
    l.rp = ampc_rnn_params_of(n);
    l.two_phase = l.gru && !l.rp.lbr;
    l.seq = l.X->shape.dims[l.rp.layout1 ? 1 : 0];
    l.batch = l.X->shape.dims[l.rp.layout1 ? 0 : 1];
    l.I = l.X->shape.dims[2], l.H = l.R->shape.dims[2];
    l.dirs = (int32_t)l.W->shape.dims[0];
    l.G = l.gru ? 3 : l.lstm ? 4 : 1, l.per = l.gru ? 2 : l.lstm ? 3 : 1;
    l.GH = l.G * l.H;
    l.rows = l.seq * l.batch;
    l.ct = ampc_cg_compute_type(l.X->dtype);
    l.cdt = l.X->dtype == AMPC_DTYPE_F64 ? AMPC_DTYPE_F64 : AMPC_DTYPE_F32;
    l.es = l.cdt == AMPC_DTYPE_F64 ? 8 : 4;
    return l;
}

/* The launch's split. The product runs on the tensor cores (rnn_recurrent_tc) for a hidden size
 * of at least RNN_TC_MIN_H and a batch tile of 8s when it computes what the CUDA cores would: a
 * layer of f16 or bf16 whose state is of that type (every one but GRU's second phase, whose
 * r . Ht-1 is a product in f32), or one of f32 when the compile's math allows TF32 for f32
 * matmuls. A block then takes a multiple of 16 rows (units rounded up to make them so), about
 * RNN_TC_BLOCKS blocks a launch (the state a block reloads each step costs L2 traffic as much as
 * R does). */
static rnn_geom geom_of(const rnn_layer *l, uint8_t math) {
    rnn_geom m;
    m.bt = AMPC_MIN(l->batch, (int64_t)RNN_BT);
    m.btiles = (l->batch + m.bt - 1) / m.bt;
    m.kc = AMPC_MIN(l->H, AMPC_MAX((int64_t)1, RNN_HS_BYTES / (m.bt * l->es)));
    const ampc_dtype t = l->X->dtype;
    const bool half = (t == AMPC_DTYPE_F16 || t == AMPC_DTYPE_BF16) && !l->two_phase;
    m.tc = (half || (t == AMPC_DTYPE_F32 && math == AMPC_RT_MATH_TF32)) && l->R->dtype == t &&
           l->H >= RNN_TC_MIN_H && m.bt % 8 == 0;
    const int64_t units = (int64_t)l->dirs * m.btiles * l->H;
    const int64_t blocks = m.tc ? RNN_TC_BLOCKS : RNN_BLOCKS;
    m.u = AMPC_MIN((int64_t)RNN_U, AMPC_MAX((int64_t)1, (units + blocks - 1) / blocks));
    if (m.tc) { /* rows a multiple of 16 in every phase */
        const int64_t step = l->lstm ? 4 : 16;
        m.u = AMPC_MIN((int64_t)RNN_U, (m.u + step - 1) / step * step);
    }
    m.u = m.tc ? m.u : AMPC_MIN(m.u, l->H);
    m.nblk = (l->H + m.u - 1) / m.u;
    m.rw = m.bt >= 8 ? 2 : 1;
    m.rows = (int32_t)((l->two_phase ? 2 : l->G) * m.u);
    m.hs = m.bt * m.kc;
    if (m.tc) { /* rows kcr + 4 apart (kc rounded up to a k step), room for the warps' parts */
        const int64_t ks = t == AMPC_DTYPE_F32 ? 8 : 16, kcr = (m.kc + ks - 1) / ks * ks;
        m.hs = AMPC_MAX(m.bt * (kcr + 4), 16 * (RNN_THREADS / 32) * m.bt);
    }
    return m;
}

/* The scratch the layer needs, or fails naming the node when its size overflows. */
static ampc_status scratch_of(ampc_cg *cg, const rnn_layer *l, rnn_scratch *sc) {
    int64_t sizes[5] = {0}, total = 0, st = 0;
    const bool over = __builtin_mul_overflow(l->rows, l->GH, &sizes[0]) ||
                      __builtin_mul_overflow(sizes[0], (int64_t)l->dirs * l->es, &sizes[0]) ||
                      __builtin_mul_overflow((int64_t)l->dirs * l->batch, l->H, &st) ||
                      __builtin_mul_overflow(st, l->es, &st);
    if (over || sizes[0] > ((int64_t)1 << 46))
        return AMPC_FAIL(ampc_cg_graph(cg), l->n, AMPC_E_UNSUPPORTED,
                         "%s's input projection (%lld steps x %lld entries x %lld gate rows x %d "
                         "directions) is too large for the GPU's scratch memory",
                         ampc_op_get(l->n->op)->onnx, (long long)l->seq, (long long)l->batch,
                         (long long)l->GH, l->dirs);
    sizes[1] = 2 * st;
    sizes[2] = l->lstm ? st : 0;
    sizes[3] = sizes[4] = l->two_phase ? st : 0;
    int64_t offs[5];
    for (int32_t i = 0; i < 5; i++) {
        offs[i] = total;
        total += (sizes[i] + 255) / 256 * 256;
    }
    const ampc_rt_ref all = ampc_cg_scratch(cg, total);
    ampc_rt_ref *const out[5] = {&sc->gx, &sc->hb, &sc->cb, &sc->zb, &sc->rb};
    for (int32_t i = 0; i < 5; i++)
        *out[i] = (ampc_rt_ref){all.space, all.offset + offs[i], sizes[i]};
    return AMPC_OK;
}

/* The input projection: gx[dir] = X [rows, I] . W[dir]^T [I, GH], one batched GEMM step (a
 * memset when I is 0). */
static ampc_status emit_projection(ampc_cg *cg, const rnn_layer *l, const rnn_scratch *sc) {
    if (l->I == 0) return ampc_cg_step_memset(cg, l->n, sc->gx);
    ampc_rt_gemm p;
    memset(&p, 0, sizeof p);
    p.m = l->rows, p.n = l->GH, p.k = l->I, p.batch = l->dirs;
    p.trans_b = true; /* W[dir] is stored [GH, I] */
    p.lda = l->I, p.ldb = l->I, p.ldc = l->GH, p.ldd = l->GH;
    p.stride_a = 0, p.stride_b = l->GH * l->I, p.stride_d = l->rows * l->GH;
    p.dtype_ab = l->X->dtype;
    p.dtype_cd = p.dtype_bias = l->cdt;
    p.math = l->X->dtype == AMPC_DTYPE_F32 ? ampc_cg_opts(cg)->math : (uint8_t)AMPC_RT_MATH_DEFAULT;
    p.epilogue = AMPC_RT_EPI_NONE;
    p.alpha = 1.0f;
    p.a = ampc_cg_ref(cg, l->X);
    p.b = ampc_cg_ref(cg, l->W);
    p.d = sc->gx;
    return ampc_cg_step_gemm(cg, l->n, &p);
}

/* The parameter names of the step kernel. */
typedef struct rnn_params {
    const char *gx, *r, *b, *p, *h0, *c0, *hb, *cb, *zb, *rb, *y, *yh, *yc, *rep;
} rnn_params;

static rnn_params params_of(ampc_cg_kernel *k, const rnn_layer *l, const rnn_scratch *sc,
                            int32_t launches) {
    rnn_params q = {0};
    q.gx = ampc_cg_param_ref(k, sc->gx, l->ct, false);
    q.r = ampc_cg_param(k, l->R, false);
    if (l->B) q.b = ampc_cg_param(k, l->B, false);
    if (l->P) q.p = ampc_cg_param(k, l->P, false);
    if (l->H0) q.h0 = ampc_cg_param(k, l->H0, false);
    if (l->C0) q.c0 = ampc_cg_param(k, l->C0, false);
    q.hb = ampc_cg_param_ref(k, sc->hb, l->ct, true);
    if (l->lstm) q.cb = ampc_cg_param_ref(k, sc->cb, l->ct, true);
    if (l->two_phase) {
        q.zb = ampc_cg_param_ref(k, sc->zb, l->ct, true);
        q.rb = ampc_cg_param_ref(k, sc->rb, l->ct, true);
    }
    q.y = ampc_cg_param(k, l->Y, true);
    if (l->YH) q.yh = ampc_cg_param(k, l->YH, true);
    if (l->YC) q.yc = ampc_cg_param(k, l->YC, true);
    q.rep = ampc_cg_kernel_repeat(k, launches);
    return q;
}

/* Declarations every step needs: the block's place, the step, the lengths, the state's
 * previous and next buffers, the activations, and the previous state h_prev(b, k). */
static void emit_prologue(ampc_cg_kernel *k, const rnn_layer *l, const rnn_geom *m,
                          const rnn_params *q) {
    const char *ct = l->ct;
    const long long H = (long long)l->H, batch = (long long)l->batch;
    ampc_cg_line(k, "extern __shared__ __align__(16) unsigned char smem_[];");
    ampc_cg_line(k, "%s *const hs = reinterpret_cast<%s *>(smem_), *const acc = hs + %lldLL;", ct,
                 ct, (long long)m->hs);
    ampc_cg_line(k, "const int dir = (int)blockIdx.y;");
    ampc_cg_line(k, "const long long j0 = (long long)blockIdx.x * %lldLL, b0 = (long long)blockIdx.z "
                    "* %lldLL;",
                 (long long)m->u, (long long)m->bt);
    if (l->two_phase) ampc_cg_line(k, "const long long s = %s >> 1; const int ph = %s & 1;", q->rep,
                                   q->rep);
    else ampc_cg_line(k, "const long long s = %s;", q->rep);
    ampc_cg_line(k, "const bool rev = %s;", l->rp.reverse_only ? "true" : "dir == 1");
    ampc_strbuf lb = {0};
    for (int64_t b = 0; b < l->batch; b++) {
        int64_t v = l->L && l->L->data ? ampc_ref_load_i64(l->L->data, l->L->dtype, b) : l->seq;
        ampc_sb_printf(&lb, "%lldLL,", (long long)(v < 0 ? 0 : v > l->seq ? l->seq : v));
    }
    ampc_cg_line(k, "static const long long lens_[%lld] = {%s};", batch, lb.data);
    ampc_sb_free(&lb);
    /* the state buffers [dirs, batch, H]: step s writes buffer s & 1, reads the other */
    const long long sst = (long long)l->dirs * batch * H;
    ampc_cg_line(k, "const %s *const hp = %s + ((s + 1) & 1) * %lldLL;", ct, q->hb, sst);
    ampc_cg_line(k, "%s *const hn = %s + (s & 1) * %lldLL;", ct, q->hb, sst);
    /* offsets of h0 / c0 / Y_h / Y_c ([dirs, batch, H], layout 1 [batch, dirs, H]) and Y */
    if (l->rp.layout1) {
        ampc_cg_line(k, "auto so_of = [=](long long b) { return (b * %dLL + dir) * %lldLL; };",
                     l->dirs, H);
        ampc_cg_line(k, "auto yo_of = [=](long long b, long long t) { return ((b * %lldLL + t) * "
                        "%dLL + dir) * %lldLL; };",
                     (long long)l->seq, l->dirs, H);
    } else {
        ampc_cg_line(k, "auto so_of = [=](long long b) { return ((long long)dir * %lldLL + b) * "
                        "%lldLL; };",
                     batch, H);
        ampc_cg_line(k, "auto yo_of = [=](long long b, long long t) { return ((t * %dLL + dir) * "
                        "%lldLL + b) * %lldLL; };",
                     l->dirs, batch, H);
    }
    ampc_cg_line(k, "(void)so_of;");
    ampc_cg_line(k, "auto h_prev = [=](long long b, long long j) -> %s { return s == 0 ? %s%s%s : "
                    "hp[((long long)dir * %lldLL + b) * %lldLL + j]; };",
                 ct, q->h0 ? "ampc::ld(" : "(", q->h0 ? q->h0 : ct, q->h0 ? ", so_of(b) + j)" : ")0",
                 batch, H);
    if (l->X->dtype == AMPC_DTYPE_F16 || l->X->dtype == AMPC_DTYPE_BF16)
        ampc_cg_line(k, "auto rnd = [](%s v) -> %s { return ampc::to_f32(ampc::cvt<%s>(v)); };", ct,
                     ct, ampc_cg_ctype(l->X->dtype));
    else
        ampc_cg_line(k, "auto rnd = [](%s v) -> %s { return v; };", ct, ct);
    act acts[6];
    ampc_rnn_acts_resolve(l->n, l->per, l->dirs, acts);
    emit_act(k, "af", acts, l->per, l->dirs, 0, ct, l->rp.has_clip, l->rp.clip);
    if (l->per > 1) emit_act(k, "ag", acts, l->per, l->dirs, 1, ct, l->rp.has_clip, l->rp.clip);
    if (l->per > 2) emit_act(k, "ah", acts, l->per, l->dirs, 2, ct, false, 0); /* h(Ct): unclipped */
}

/* The recurrent product of the block's rows (rnn.cuh): for GRU's second phase the h gate's rows
 * times r . Ht-1, else every gate's rows (GRU's first phase: z and r) times Ht-1. */
static void emit_recurrent(ampc_cg_kernel *k, const rnn_layer *l, const rnn_geom *m,
                           const rnn_params *q) {
    const long long H = (long long)l->H, batch = (long long)l->batch;
    if (l->two_phase)
        ampc_cg_line(k, "auto src = [=](long long b, long long j) -> %s { return ph ? %s[((long "
                        "long)dir * %lldLL + b) * %lldLL + j] : h_prev(b, j); };",
                     l->ct, q->rb, batch, H);
    else ampc_cg_line(k, "auto src = h_prev;");
    char rows[64];
    if (l->two_phase) snprintf(rows, sizeof rows, "ph ? %lld : %d", (long long)m->u, m->rows);
    else snprintf(rows, sizeof rows, "%d", m->rows);
    if (m->tc)
        ampc_cg_line(k, "ampc::rnn_recurrent_tc<%d, %lld>(acc, hs, %lldLL, %s + (long long)dir * "
                        "%lldLL, %lldLL, %lldLL, %s, %s, j0, b0, %lldLL, src);",
                     RNN_THREADS, (long long)m->bt, (long long)m->kc, q->r,
                     (long long)(l->GH * l->H), H, (long long)m->u, rows,
                     l->two_phase ? "ph ? 2 : 0" : "0", batch);
    else
        ampc_cg_line(k, "ampc::rnn_recurrent<%d, %lld, %d>(acc, hs, %lldLL, %s + (long long)dir * "
                        "%lldLL, %lldLL, %lldLL, %s, %s, j0, b0, %lldLL, src);",
                     RNN_THREADS, (long long)m->bt, m->rw, (long long)m->kc, q->r,
                     (long long)(l->GH * l->H), H, (long long)m->u, rows,
                     l->two_phase ? "ph ? 2 : 0" : "0", batch);
}

/* Emits `pre` = (Wb + Xt . W) + (Rb + Ht-1 . R) of gate g, the reference's grouping, with the
 * recurrent sum from acc's row `row` (without it when !rec: GRU's h gate before r applies). */
static void emit_pre(ampc_cg_kernel *k, const rnn_layer *l, const rnn_geom *m, const rnn_params *q,
                     const char *pre, int32_t g, const char *row, bool rec) {
    const char *ct = l->ct;
    const long long gH = (long long)(g * l->H);
    ampc_strbuf wb = {0}, rb = {0};
    if (q->b) {
        ampc_sb_printf(&wb, "ampc::ld(%s, wbo + %lldLL + j)", q->b, gH);
        ampc_sb_printf(&rb, "ampc::ld(%s, wbo + %lldLL + j)", q->b, (long long)l->GH + gH);
    } else {
        ampc_sb_printf(&wb, "(%s)0", ct);
        ampc_sb_printf(&rb, "(%s)0", ct);
    }
    if (rec)
        ampc_cg_line(k, "const %s %s = (%s + %s[xr + %lldLL + j]) + (%s + acc[(%s) * %lldLL + bb]);",
                     ct, pre, wb.data, q->gx, gH, rb.data, row, (long long)m->bt);
    else ampc_cg_line(k, "const %s %s = %s + %s[xr + %lldLL + j];", ct, pre, wb.data, q->gx, gH);
    ampc_sb_free(&wb);
    ampc_sb_free(&rb);
}

/* The gates of unit j of entry b at time t, from the block's sums: Ht (and Ct) written to the
 * next state, Y, and at the entry's last step Y_h / Y_c. */
static void emit_gates(ampc_cg_kernel *k, const rnn_layer *l, const rnn_geom *m,
                       const rnn_params *q) {
    const char *ct = l->ct;
    const long long H = (long long)l->H, U = (long long)m->u;
    char row[4][48];
    for (int32_t g = 0; g < 4; g++) snprintf(row[g], sizeof row[g], "%lldLL + u", (long long)g * U);
    switch (l->n->op) {
    case AMPC_OP_RNN:
        emit_pre(k, l, m, q, "pi", 0, row[0], true);
        ampc_cg_line(k, "const %s v = rnd(af(pi));", ct);
        break;
    case AMPC_OP_GRU: /* rows z, r (and h); with linear_before_reset 0, two phases */
        if (l->two_phase) {
            ampc_cg_open(k, "if (ph == 0)");
            emit_pre(k, l, m, q, "pz", 0, row[0], true);
            emit_pre(k, l, m, q, "pr", 1, row[1], true);
            ampc_cg_line(k, "%s[st_] = af(pz);", q->zb);
            ampc_cg_line(k, "%s[st_] = af(pr) * h_prev(b, j);", q->rb);
            ampc_cg_line(k, "continue;");
            ampc_cg_close(k);
            emit_pre(k, l, m, q, "hx", 2, NULL, false);
            ampc_cg_line(k, "%s rec = acc[u * %lldLL + bb];", ct, (long long)m->bt);
            if (q->b) ampc_cg_line(k, "rec += ampc::ld(%s, wbo + %lldLL + j);", q->b, (long long)(l->GH + 2 * l->H));
            ampc_cg_line(k, "const %s hh = hx + rec, z = %s[st_];", ct, q->zb);
        } else {
            emit_pre(k, l, m, q, "pz", 0, row[0], true);
            emit_pre(k, l, m, q, "pr", 1, row[1], true);
            emit_pre(k, l, m, q, "hx", 2, NULL, false);
            ampc_cg_line(k, "%s rec = acc[(%s) * %lldLL + bb];", ct, row[2], (long long)m->bt);
            if (q->b) ampc_cg_line(k, "rec += ampc::ld(%s, wbo + %lldLL + j);", q->b, (long long)(l->GH + 2 * l->H));
            ampc_cg_line(k, "const %s z = af(pz), hh = hx + af(pr) * rec;", ct);
        }
        ampc_cg_line(k, "const %s v = rnd(((%s)1 - z) * ag(hh) + z * h_prev(b, j));", ct, ct);
        break;
    default: /* LSTM: rows i, o, f, c; peepholes i, o, f */
        emit_pre(k, l, m, q, "pi", 0, row[0], true);
        emit_pre(k, l, m, q, "po", 1, row[1], true);
        emit_pre(k, l, m, q, "pf", 2, row[2], true);
        emit_pre(k, l, m, q, "pc", 3, row[3], true);
        ampc_cg_line(k, "const %s cprev = s == 0 ? %s%s%s : %s[st_];", ct, q->c0 ? "ampc::ld(" : "(",
                     q->c0 ? q->c0 : ct, q->c0 ? ", so_of(b) + j)" : ")0", q->cb);
        if (q->p) {
            ampc_cg_line(k, "const long long po_ = (long long)dir * %lldLL + j;", 3 * H);
            ampc_cg_line(k, "const %s ig = af(pi + ampc::ld(%s, po_) * cprev);", ct, q->p);
        } else {
            ampc_cg_line(k, "const %s ig = af(pi);", ct);
        }
        if (l->rp.input_forget) ampc_cg_line(k, "const %s fg = (%s)1 - ig;", ct, ct);
        else if (q->p)
            ampc_cg_line(k, "const %s fg = af(pf + ampc::ld(%s, po_ + %lldLL) * cprev);", ct, q->p,
                         2 * H);
        else ampc_cg_line(k, "const %s fg = af(pf);", ct);
        if (l->rp.input_forget) ampc_cg_line(k, "(void)pf;");
        ampc_cg_line(k, "const %s cell = rnd(fg * cprev + ig * ag(pc));", ct);
        if (q->p)
            ampc_cg_line(k, "const %s og = af(po + ampc::ld(%s, po_ + %lldLL) * cell);", ct, q->p, H);
        else ampc_cg_line(k, "const %s og = af(po);", ct);
        ampc_cg_line(k, "%s[st_] = cell;", q->cb);
        ampc_cg_line(k, "const %s v = rnd(og * ah(cell));", ct);
        if (q->yc) ampc_cg_line(k, "if (s == len - 1) ampc::st(%s, so_of(b) + j, cell);", q->yc);
        break;
    }
    ampc_cg_line(k, "hn[st_] = v;");
    ampc_cg_line(k, "ampc::st(%s, yo_of(b, t) + j, v);", q->y);
    if (q->yh) ampc_cg_line(k, "if (s == len - 1) ampc::st(%s, so_of(b) + j, v);", q->yh);
}

/* After the product, each of the block's (unit, entry) pairs: the entry's step s, or past its
 * length the zeros of Y at time s (and Y_h / Y_c of an entry of length 0). */
static void emit_units(ampc_cg_kernel *k, const rnn_layer *l, const rnn_geom *m,
                       const rnn_params *q) {
    const char *ct = l->ct;
    ampc_cg_line(k, "const long long wbo = (long long)dir * %lldLL;", (long long)(2 * l->GH));
    ampc_cg_line(k, "(void)wbo;");
    ampc_cg_open(k, "for (int i_ = (int)threadIdx.x; i_ < %lld; i_ += (int)blockDim.x)",
                 (long long)(m->u * m->bt));
    ampc_cg_line(k, "const long long u = i_ %% %lldLL, bb = i_ / %lldLL;", (long long)m->u,
                 (long long)m->u);
    ampc_cg_line(k, "const long long j = j0 + u, b = b0 + bb;");
    ampc_cg_line(k, "if (j >= %lldLL || b >= %lldLL) continue;", (long long)l->H, (long long)l->batch);
    ampc_cg_line(k, "const long long len = lens_[b];");
    ampc_cg_open(k, "if (s >= len)");
    if (l->two_phase) ampc_cg_line(k, "if (ph == 0) continue;");
    ampc_cg_line(k, "ampc::st(%s, yo_of(b, s) + j, (%s)0);", q->y, ct);
    if (q->yh) ampc_cg_line(k, "if (len == 0 && s == 0) ampc::st(%s, so_of(b) + j, (%s)0);", q->yh, ct);
    if (q->yc) ampc_cg_line(k, "if (len == 0 && s == 0) ampc::st(%s, so_of(b) + j, (%s)0);", q->yc, ct);
    ampc_cg_line(k, "continue;");
    ampc_cg_close(k);
    ampc_cg_line(k, "const long long t = rev ? len - 1 - s : s;");
    /* the projection's row of (b, t): X's row order */
    if (l->rp.layout1)
        ampc_cg_line(k, "const long long xr = ((long long)dir * %lldLL + b * %lldLL + t) * %lldLL;",
                     (long long)l->rows, (long long)l->seq, (long long)l->GH);
    else
        ampc_cg_line(k, "const long long xr = ((long long)dir * %lldLL + t * %lldLL + b) * %lldLL;",
                     (long long)l->rows, (long long)l->batch, (long long)l->GH);
    ampc_cg_line(k, "const long long st_ = ((long long)dir * %lldLL + b) * %lldLL + j;",
                 (long long)l->batch, (long long)l->H);
    emit_gates(k, l, m, q);
    ampc_cg_close(k);
}

ampc_status ampc_cg_lower_rnn(ampc_cg *cg, const ampc_node *n) {
    const rnn_layer l = layer_of(n);
    if (l.batch == 0 || l.H == 0) return AMPC_OK; /* every output is empty */
    if (l.seq == 0) {                            /* no step runs: Y is empty, Y_h and Y_c zero */
        ampc_status st = AMPC_OK;
        if (l.YH && ampc_ir_numel(l.YH)) st = ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, l.YH));
        if (st == AMPC_OK && l.YC && ampc_ir_numel(l.YC))
            st = ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, l.YC));
        return st;
    }
    const int64_t launches = l.two_phase ? 2 * l.seq : l.seq;
    if (launches > RNN_MAX_LAUNCHES)
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "%s over %lld time steps: the GPU runs a layer as one launch a step, at "
                         "most %d; it runs on the reference evaluator only",
                         ampc_op_get(n->op)->onnx, (long long)l.seq, RNN_MAX_LAUNCHES);
    rnn_scratch sc;
    ampc_status st = scratch_of(cg, &l, &sc);
    if (st == AMPC_OK) st = emit_projection(cg, &l, &sc);
    if (st != AMPC_OK) return st;

    const rnn_geom m = geom_of(&l, ampc_cg_opts(cg)->math);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const rnn_params q = params_of(k, &l, &sc, (int32_t)launches);
    emit_prologue(k, &l, &m, &q);
    emit_recurrent(k, &l, &m, &q);
    emit_units(k, &l, &m, &q);
    const uint32_t grid[3] = {(uint32_t)m.nblk, (uint32_t)l.dirs, (uint32_t)m.btiles};
    const uint32_t block[3] = {RNN_THREADS, 1, 1};
    const int64_t smem = (m.hs + (int64_t)m.rows * m.bt) * l.es;
    return ampc_cg_kernel_end_launch(k, grid, block, (uint32_t)smem);
}
