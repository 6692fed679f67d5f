/*
 * rnn.c — reference kernels for the recurrent layers RNN, GRU and LSTM (shapes: infer/rnn.c).
 *
 * Each direction runs over each batch entry on its own: the hidden state H (and LSTM's cell state
 * C) starts from initial_h / initial_c (zero when absent) and advances one time step at a time,
 * forward over t = 0 .. len-1 or, for the reverse direction (the second one of a bidirectional
 * node), over t = len-1 .. 0, where len is the entry's sequence_lens value (seq_length when the
 * input is absent). The equations are the ONNX ones, with W/R rows in the ONNX gate order (GRU:
 * z, r, h; LSTM: i, o, f, c) and the activations f, g, h of the node:
 *   RNN   Ht = f(Xt*Wi^T + Ht-1*Ri^T + Wbi + Rbi)
 *   GRU   zt = f(Xt*Wz^T + Ht-1*Rz^T + Wbz + Rbz),  rt likewise with r
 *         ht = g(Xt*Wh^T + (rt . Ht-1)*Rh^T + Rbh + Wbh)          linear_before_reset = 0
 *         ht = g(Xt*Wh^T + rt . (Ht-1*Rh^T + Rbh) + Wbh)          linear_before_reset = 1
 *         Ht = (1 - zt) . ht + zt . Ht-1
 *   LSTM  it = f(Xt*Wi^T + Ht-1*Ri^T + Pi . Ct-1 + Wbi + Rbi)
 *         ft = f(Xt*Wf^T + Ht-1*Rf^T + Pf . Ct-1 + Wbf + Rbf)     (1 - it when input_forget)
 *         ct = g(Xt*Wc^T + Ht-1*Rc^T + Wbc + Rbc)
 *         Ct = ft . Ct-1 + it . ct
 *         ot = f(Xt*Wo^T + Ht-1*Ro^T + Po . Ct + Wbo + Rbo)
 *         Ht = ot . h(Ct)
 * clip, when set, bounds the gate pre-activations (the inputs of f and g) to [-clip, clip]; LSTM's
 * Ct, stored and handed to h, is not clipped. The spec's sentence ("applied to the input of
 * activations") leaves h(Ct) open; this is what ONNX Runtime does. Math is in double; Ht and Ct are
 * rounded to the tensor dtype after every step, since they are values of that type that the next
 * step reads. Y holds Ht at each time step the entry runs and zero past its length; Y_h and Y_c
 * hold the last state, and zero for an entry of length 0 (as ONNX Runtime does; the spec leaves
 * that case open).
 *
 * The activations and how a node's alpha and beta reach them: ir/rnn.h (one table, which
 * inference and code generation read too).
 */
#include "ref.h"

#include "ir/rnn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- activations (the table of ir/rnn.h) ------------------------------------------------ */

typedef ampc_rnn_act act;

static double act_apply(const act *a, double x) {
    switch (a->kind) {
    case AMPC_RNN_ACT_RELU: return x > 0 ? x : 0;
    case AMPC_RNN_ACT_TANH: return tanh(x);
    case AMPC_RNN_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case AMPC_RNN_ACT_AFFINE: return a->alpha * x + a->beta;
    case AMPC_RNN_ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case AMPC_RNN_ACT_THRESHOLDED_RELU: return x >= a->alpha ? x : 0;
    case AMPC_RNN_ACT_SCALED_TANH: return a->alpha * tanh(a->beta * x);
    case AMPC_RNN_ACT_HARD_SIGMOID: return fmin(fmax(a->alpha * x + a->beta, 0), 1);
    case AMPC_RNN_ACT_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1);
    case AMPC_RNN_ACT_SOFTSIGN: return x / (1 + fabs(x));
    case AMPC_RNN_ACT_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); /* log(1 + e^x) */
    case AMPC_RNN_ACT_COUNT: break;
    }
    AMPC_ASSERT(!"unknown activation");
    return 0;
}

/* ---- the kernel ----------------------------------------------------------------------------- */

/* v rounded to dtype t (the value a tensor of that type would hold). */
static double round_to(ampc_dtype t, double v) {
    double buf[1];
    ampc_ref_store_f64(buf, t, 0, v);
    return ampc_ref_load_f64(buf, t, 0);
}

/* Input i, or NULL when absent. */
static const ampc_tensor *opt_in(const ampc_node *n, const ampc_tensor *const *in, int32_t i) {
    return i < n->n_inputs ? in[i] : NULL;
}

/* Sizes and options of one node. */
typedef struct rnn_ctx {
    ampc_opcode op;
    int32_t gates, per_dir; /* G, activations per direction */
    int64_t seq, batch, in_size, hidden;
    int32_t dirs;
    bool layout1, reverse_only, lbr, input_forget, has_clip;
    double clip;
    ampc_dtype t;
} rnn_ctx;

static double clipped(const rnn_ctx *c, double v) {
    return c->has_clip ? fmin(fmax(v, -c->clip), c->clip) : v;
}

/* Working state of one direction: its weights in double and the per-step buffers. */
typedef struct rnn_dir {
    double *w;       /* [G*H, I] */
    double *r;       /* [G*H, H] */
    double *wb, *rb; /* [G*H] each: the two halves of B (zero when absent) */
    double *p;       /* [3*H]: LSTM peepholes i, o, f (zero when absent) */
    double *pre;     /* [G*H]: gate pre-activations of the step */
    double *h, *c;   /* [H]: the state */
    double *tmp;     /* [H]: GRU's rt . Ht-1, or the step's new state */
    double *x;       /* [I]: the step's input row */
    const act *acts; /* per_dir entries: f (, g (, h)) */
} rnn_dir;

/* One time step: advances d->h (and d->c) given the input row d->x. */
static void rnn_step(const rnn_ctx *c, rnn_dir *d) {
    const int64_t H = c->hidden, I = c->in_size, GH = c->gates * H;
    const bool gru_default = c->op == AMPC_OP_GRU && !c->lbr;
    /* Pre-activations Xt*W^T + Ht-1*R^T + Wb + Rb; for GRU the h gate's recurrent part is
     * added below, since it depends on rt. */
    for (int64_t j = 0; j < GH; j++) {
        double acc = d->wb[j];
        const double *wr = d->w + j * I;
        for (int64_t k = 0; k < I; k++) acc += d->x[k] * wr[k];
        d->pre[j] = acc;
        if (c->op == AMPC_OP_GRU && j >= 2 * H) continue;
        const double *rr = d->r + j * H;
        double rec = d->rb[j];
        for (int64_t k = 0; k < H; k++) rec += d->h[k] * rr[k];
        d->pre[j] += rec;
    }
    switch (c->op) {
    case AMPC_OP_RNN:
        for (int64_t j = 0; j < H; j++)
            d->h[j] = round_to(c->t, act_apply(&d->acts[0], clipped(c, d->pre[j])));
        return;
    case AMPC_OP_GRU: {
        double *z = d->pre, *r = d->pre + H, *hh = d->pre + 2 * H;
        for (int64_t j = 0; j < 2 * H; j++)
            d->pre[j] = act_apply(&d->acts[0], clipped(c, d->pre[j]));
        if (gru_default)
            for (int64_t k = 0; k < H; k++) d->tmp[k] = r[k] * d->h[k];
        for (int64_t j = 0; j < H; j++) {
            const double *rr = d->r + (2 * H + j) * H;
            double rec = 0;
            for (int64_t k = 0; k < H; k++) rec += (gru_default ? d->tmp[k] : d->h[k]) * rr[k];
            rec += d->rb[2 * H + j];
            hh[j] += gru_default ? rec : r[j] * rec;
        }
        for (int64_t j = 0; j < H; j++) {
            double cand = act_apply(&d->acts[1], clipped(c, hh[j]));
            d->h[j] = round_to(c->t, (1 - z[j]) * cand + z[j] * d->h[j]);
        }
        return;
    }
    default: { /* LSTM: rows i, o, f, c; peepholes i, o, f */
        const double *pi = d->pre, *po = d->pre + H, *pf = d->pre + 2 * H, *pc = d->pre + 3 * H;
        for (int64_t j = 0; j < H; j++) {
            const double cprev = d->c[j];
            const double ig = act_apply(&d->acts[0], clipped(c, pi[j] + d->p[j] * cprev));
            const double fg =
                c->input_forget
                    ? 1 - ig
                    : act_apply(&d->acts[0], clipped(c, pf[j] + d->p[2 * H + j] * cprev));
            const double cg = act_apply(&d->acts[1], clipped(c, pc[j]));
            const double cell = round_to(c->t, fg * cprev + ig * cg);
            const double og = act_apply(&d->acts[0], clipped(c, po[j] + d->p[H + j] * cell));
            d->c[j] = cell;
            d->tmp[j] = round_to(c->t, og * act_apply(&d->acts[2], cell)); /* Ct unclipped */
        }
        memcpy(d->h, d->tmp, (size_t)H * sizeof *d->h);
        return;
    }
    }
}

/* Element offsets in X [seq, batch, I] / [batch, seq, I], Y [seq, dirs, batch, H] / [batch, seq,
 * dirs, H] and the states [dirs, batch, H] / [batch, dirs, H]. */
static int64_t x_off(const rnn_ctx *c, int64_t t, int64_t b) {
    return (c->layout1 ? b * c->seq + t : t * c->batch + b) * c->in_size;
}
static int64_t y_off(const rnn_ctx *c, int64_t t, int32_t dir, int64_t b) {
    return (c->layout1 ? (b * c->seq + t) * c->dirs + dir : (t * c->dirs + dir) * c->batch + b) *
           c->hidden;
}
static int64_t s_off(const rnn_ctx *c, int32_t dir, int64_t b) {
    return (c->layout1 ? b * c->dirs + dir : dir * c->batch + b) * c->hidden;
}

/* Loads n elements of t starting at element `base` into dst (zeros when t is NULL). */
static void load_row(double *dst, const ampc_tensor *t, int64_t base, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = t ? ampc_ref_load_f64(t->data, t->dtype, base + i) : 0;
}

/* RNN, GRU and LSTM (dispatching on n->op): runs every direction over every batch entry and fills
 * Y, Y_h and Y_c; a sequence_lens entry outside [0, seq_length] is an AMPC_E_EVAL error. */
ampc_status ampc_ref_rnn(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    const bool lstm = n->op == AMPC_OP_LSTM;
    const ampc_tensor *x = in[0], *w = in[1], *r = in[2], *bias = opt_in(n, in, 3);
    const ampc_tensor *lens = opt_in(n, in, 4), *h0 = opt_in(n, in, 5);
    const ampc_tensor *c0 = lstm ? opt_in(n, in, 6) : NULL, *peep = lstm ? opt_in(n, in, 7) : NULL;
    ampc_tensor *y = out[0], *yh = n->n_outputs > 1 ? out[1] : NULL;
    ampc_tensor *yc = n->n_outputs > 2 ? out[2] : NULL;

    rnn_ctx c = {.op = n->op, .t = x->dtype};
    c.gates = n->op == AMPC_OP_GRU ? 3 : lstm ? 4 : 1;
    c.per_dir = n->op == AMPC_OP_GRU ? 2 : lstm ? 3 : 1;
    const ampc_rnn_params rp = ampc_rnn_params_of(n);
    c.layout1 = rp.layout1;
    c.seq = x->shape.dims[c.layout1 ? 1 : 0];
    c.batch = x->shape.dims[c.layout1 ? 0 : 1];
    c.in_size = x->shape.dims[2];
    c.hidden = r->shape.dims[2];
    c.dirs = (int32_t)w->shape.dims[0];
    c.reverse_only = rp.reverse_only;
    c.lbr = rp.lbr;
    c.input_forget = rp.input_forget;
    c.has_clip = rp.has_clip;
    c.clip = rp.clip;

    /* sequence lengths: checked here too, since a reference run may get them at run time */
    for (int64_t b = 0; lens && b < c.batch; b++) {
        int64_t len = ampc_ref_load_i64(lens->data, lens->dtype, b);
        if (len < 0 || len > c.seq)
            return AMPC_FAIL(g, n, AMPC_E_EVAL,
                             "input 4 (sequence_lens) entry %lld is %lld, outside [0, %lld] (0 to "
                             "seq_length)",
                             (long long)b, (long long)len, (long long)c.seq);
    }

    const int64_t H = c.hidden, I = c.in_size, GH = c.gates * H;
    act acts[6];
    ampc_rnn_acts_resolve(n, c.per_dir, c.dirs, acts);
    /* one block for every buffer: w, r, wb, rb, p, pre, h, c, tmp, x */
    const size_t doubles = (size_t)(GH * I + GH * H + 3 * GH + 3 * H + 3 * H + I);
    double *mem = malloc((doubles ? doubles : 1) * sizeof *mem);
    if (!mem)
        return AMPC_FAIL(g, n, AMPC_E_OOM,
                         "out of host memory for the weights in double (%zu bytes)",
                         doubles * sizeof *mem);
    rnn_dir d;
    d.w = mem;
    d.r = d.w + GH * I;
    d.wb = d.r + GH * H;
    d.rb = d.wb + GH;
    d.pre = d.rb + GH;
    d.p = d.pre + GH;
    d.h = d.p + 3 * H;
    d.c = d.h + H;
    d.tmp = d.c + H;
    d.x = d.tmp + H;

    for (int32_t dir = 0; dir < c.dirs; dir++) {
        const bool rev = dir == 1 || c.reverse_only;
        load_row(d.w, w, dir * GH * I, GH * I);
        load_row(d.r, r, dir * GH * H, GH * H);
        load_row(d.wb, bias, dir * 2 * GH, GH);
        load_row(d.rb, bias, dir * 2 * GH + GH, GH);
        load_row(d.p, peep, dir * 3 * H, lstm ? 3 * H : 0);
        d.acts = &acts[dir * c.per_dir];
        for (int64_t b = 0; b < c.batch; b++) {
            const int64_t len = lens ? ampc_ref_load_i64(lens->data, lens->dtype, b) : c.seq;
            load_row(d.h, h0, s_off(&c, dir, b), H);
            load_row(d.c, c0, s_off(&c, dir, b), H);
            for (int64_t s = 0; s < len; s++) {
                const int64_t t = rev ? len - 1 - s : s;
                load_row(d.x, x, x_off(&c, t, b), I);
                rnn_step(&c, &d);
                for (int64_t j = 0; j < H; j++)
                    ampc_ref_store_f64(y->data, y->dtype, y_off(&c, t, dir, b) + j, d.h[j]);
            }
            for (int64_t j = 0; j < H; j++) { /* outputs are zero-filled: len 0 leaves zeros */
                if (yh && len)
                    ampc_ref_store_f64(yh->data, yh->dtype, s_off(&c, dir, b) + j, d.h[j]);
                if (yc && len)
                    ampc_ref_store_f64(yc->data, yc->dtype, s_off(&c, dir, b) + j, d.c[j]);
            }
        }
    }
    free(mem);
    return AMPC_OK;
}
