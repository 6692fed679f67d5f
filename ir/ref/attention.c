/*
 * attention.c — reference kernels for Attention and RotaryEmbedding (shapes: infer/attention.c).
 *
 * Attention follows the ONNX function body step by step, one query row at a time:
 *   1. K and V are the past cache followed by the new K and V (present_key, present_value).
 *   2. Q and K are each multiplied by sqrt(scale) (scale defaults to 1/sqrt(head_size)), and the
 *      scores are their dot products; query head h reads kv head h / (q_heads / kv_heads).
 *   3. softcap > 0 maps each score s to softcap * tanh(s / softcap).
 *   4. The bias is added: attn_mask (a bool mask gives 0 where true and -inf where false; a
 *      numeric one is added as is; columns past its last dim count as masked), plus -inf where
 *      is_causal, the sliding window (left/right_window_size), or nonpad_kv_seqlen exclude the
 *      key. Causal masking is aligned to the bottom right: query i sees key j iff j <= i + offset,
 *      offset being past_seq with a past cache, nonpad_kv_seqlen[b] - q_seq with an external cache
 *      (nonpad_kv_seqlen given), else 0; the window bounds i + offset - j likewise.
 *   5. Softmax over the keys; a row whose bias is -inf everywhere (no key may be attended) gives
 *      zero probabilities, hence a zero output row.
 *   6. Y is the probability-weighted sum of V rows. qk_matmul_output holds the scores after step
 *      3 (modes 0 and 1), after step 4 (mode 2) or the probabilities (mode 3).
 * Arithmetic is in double; every tensor the function body names (scaled Q and K, scores, biased
 * scores, probabilities) is rounded to Q's dtype, so f16 and bf16 inputs see the roundings the
 * specification prescribes. The softmax runs in softmax_precision (default: Q's dtype): each
 * elementwise step (x - max, exp, the division) rounds to it, and the sum, a reduction, is exact
 * and rounded once. The cost is batch * q_heads * q_seq * total_seq * (head + v_head): linear in
 * the size of the score matrix, which is the op's own cost.
 *
 * RotaryEmbedding rotates the first rotary_dim features of every head vector as rotary_dim / 2
 * complex pairs (x1, x2), taken as halves or, when interleaved, as even/odd neighbours:
 * (x1 cos - x2 sin, x1 sin + x2 cos), with cos and sin from the caches at the position
 * position_ids[b, s] (or at [b, s] without position_ids); the remaining features are copied.
 */
#include "ref.h"

#include "ir/attention.h"

#include <math.h>
#include <stdlib.h>

static const ampc_tensor *opt_in(const ampc_node *n, const ampc_tensor *const *in, int32_t i) {
    return i < n->n_inputs ? in[i] : NULL;
}

/* v rounded to dtype t (the value a tensor of that type holds). */
static double round_to(ampc_dtype t, double v) {
    double buf[1];
    ampc_ref_store_f64(buf, t, 0, v);
    return ampc_ref_load_f64(buf, t, 0);
}

/* ---- Attention ------------------------------------------------------------------------------ */

/* Sizes and options of one Attention node. */
typedef struct att {
    int64_t batch, q_heads, kv_heads, q_seq, kv_seq, past, total, head, v_head;
    bool rank3, causal;
    int64_t left, right; /* sliding window; -1: unbounded */
    double sqrt_scale, softcap;
    ampc_dtype t1, prec; /* Q's dtype; the softmax precision */
    const ampc_tensor *mask, *nonpad;
    int64_t mask_str[4]; /* mask strides against [batch, q_heads, q_seq, -] (0: broadcast) */
    int64_t mask_last;   /* the mask's last dim (columns at or past it are masked) */
} att;

/* Element (b, h, s, d) of a [batch, heads, seq, dim] tensor, or of its [batch, seq, heads*dim]
 * form when rank3. */
static int64_t bhsd(bool rank3, int64_t b, int64_t h, int64_t s, int64_t d, int64_t heads,
                    int64_t seq, int64_t dim) {
    return rank3 ? ((b * seq + s) * heads + h) * dim + d : ((b * heads + h) * seq + s) * dim + d;
}

/* The additive bias of query (b, h, i) and key j, rounded to Q's dtype (0 or -inf unless the
 * mask is numeric). */
static double att_bias(const att *a, int64_t b, int64_t h, int64_t i, int64_t j) {
    double bias = 0;
    if (a->mask) {
        if (j >= a->mask_last) return -INFINITY;
        const int64_t off = b * a->mask_str[0] + h * a->mask_str[1] + i * a->mask_str[2] + j;
        if (a->mask->dtype == AMPC_DTYPE_BOOL)
            bias = ampc_ref_load_i64(a->mask->data, AMPC_DTYPE_BOOL, off) ? 0 : -INFINITY;
        else
            bias = ampc_ref_load_f64(a->mask->data, a->mask->dtype, off);
    }
    int64_t offset = a->past, valid = a->total;
    if (a->nonpad) {
        valid = ampc_ref_load_i64(a->nonpad->data, a->nonpad->dtype, b);
        offset = valid - a->q_seq;
    }
    const int64_t diff = i + offset - j; /* how far key j lies behind query i */
    if ((a->causal && diff < 0) || (a->left >= 0 && diff > a->left) ||
        (a->right >= 0 && -diff > a->right) || j >= valid)
        return -INFINITY;
    return round_to(a->t1, bias);
}

/* Working rows of one query: T = total_seq entries each. */
typedef struct att_rows {
    double *q;      /* [head]: the scaled query */
    double *score;  /* [T]: after softcap */
    double *biased; /* [T]: score + bias */
    double *prob;   /* [T] */
    double *acc;    /* [v_head] */
} att_rows;

/* Computes probabilities for one query row from r->biased; `masked` says the bias excludes
 * every key. */
static void att_softmax(const att *a, att_rows *r, bool masked) {
    const int64_t T = a->total;
    double mx = -INFINITY;
    for (int64_t j = 0; j < T && !isnan(mx); j++)
        if (isnan(r->biased[j]) || r->biased[j] > mx) mx = r->biased[j];
    if (masked || mx == -INFINITY) { /* no attendable key: zero probabilities */
        for (int64_t j = 0; j < T; j++) r->prob[j] = 0;
        return;
    }
    /* In the softmax precision: each elementwise step rounds, the sum (a reduction) rounds once. */
    double sum = 0;
    for (int64_t j = 0; j < T; j++)
        sum += r->prob[j] = round_to(a->prec, exp(round_to(a->prec, r->biased[j] - mx)));
    sum = round_to(a->prec, sum);
    for (int64_t j = 0; j < T; j++)
        r->prob[j] = round_to(a->t1, round_to(a->prec, r->prob[j] / sum));
}

/* Attention: builds the present key/value cache in double, then computes each query row (steps
 * 1-6 of the file comment). Fails only when the cache does not fit in host memory. */
ampc_status ampc_ref_attention(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                               ampc_tensor *const *out) {
    const ampc_tensor *q = in[0], *k = in[1], *v = in[2];
    const ampc_tensor *pk = opt_in(n, in, 4), *pv = opt_in(n, in, 5);
    ampc_tensor *y = out[0];
    ampc_tensor *pres_k = n->n_outputs > 1 ? out[1] : NULL,
                *pres_v = n->n_outputs > 2 ? out[2] : NULL;
    ampc_tensor *qk_out = n->n_outputs > 3 ? out[3] : NULL;
    const ampc_onnx_attention at = ampc_onnx_attention_of(n);
    const int64_t mode = at.qk_mode;

    att a = {.t1 = q->dtype, .mask = opt_in(n, in, 3), .nonpad = opt_in(n, in, 6)};
    a.rank3 = q->shape.rank == 3;
    a.batch = q->shape.dims[0];
    if (a.rank3) {
        a.q_heads = at.q_heads;
        a.kv_heads = at.kv_heads;
        a.q_seq = q->shape.dims[1];
        a.kv_seq = k->shape.dims[1];
        a.head = q->shape.dims[2] / a.q_heads;
        a.v_head = v->shape.dims[2] / a.kv_heads;
    } else {
        a.q_heads = q->shape.dims[1];
        a.kv_heads = k->shape.dims[1];
        a.q_seq = q->shape.dims[2];
        a.kv_seq = k->shape.dims[2];
        a.head = q->shape.dims[3];
        a.v_head = v->shape.dims[3];
    }
    a.past = pk ? pk->shape.dims[2] : 0;
    a.total = a.past + a.kv_seq;
    a.causal = at.causal;
    a.left = at.left;
    a.right = at.right;
    const double scale = at.has_scale ? at.scale : 1 / sqrt((double)a.head);
    a.sqrt_scale = round_to(a.t1, sqrt(scale));
    a.softcap = at.softcap;
    a.prec = at.softmax_precision ? ampc_dtype_from_onnx(at.softmax_precision) : a.t1;
    if (a.mask) {
        const ampc_shape *ms = &a.mask->shape;
        int64_t st[AMPC_MAX_RANK];
        ampc_ref_strides(ms, st);
        for (int32_t d = 0; d < 3; d++) {
            const int32_t md = d - (4 - ms->rank); /* the mask dim aligned with target dim d */
            a.mask_str[d] = md < 0 || ms->dims[md] == 1 ? 0 : st[md];
        }
        a.mask_last = ms->dims[ms->rank - 1];
    }

    /* present key/value: the past followed by the new rows, [batch, kv_heads, total, dim] */
    const int64_t B = a.batch, KH = a.kv_heads, T = a.total, D = a.head, DV = a.v_head;
    const size_t nk = (size_t)(B * KH * T * D), nv = (size_t)(B * KH * T * DV);
    const size_t nrow = (size_t)(D + 3 * T + DV);
    double *mem = malloc((nk + nv + nrow + 1) * sizeof *mem);
    if (!mem)
        return AMPC_FAIL(g, n, AMPC_E_OOM,
                         "out of host memory for the key/value cache in double "
                         "(%zu bytes)",
                         (nk + nv + nrow) * sizeof *mem);
    double *kall = mem, *vall = mem + nk;
    att_rows r = {.q = vall + nv};
    r.score = r.q + D;
    r.biased = r.score + T;
    r.prob = r.biased + T;
    r.acc = r.prob + T;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < KH; h++)
            for (int64_t j = 0; j < T; j++) {
                const bool old = j < a.past;
                const int64_t s = j - a.past, base = ((b * KH + h) * T + j);
                for (int64_t d = 0; d < D; d++)
                    kall[base * D + d] =
                        old ? ampc_ref_load_f64(pk->data, pk->dtype,
                                                ((b * KH + h) * a.past + j) * D + d)
                            : ampc_ref_load_f64(k->data, k->dtype,
                                                bhsd(a.rank3, b, h, s, d, KH, a.kv_seq, D));
                for (int64_t d = 0; d < DV; d++)
                    vall[base * DV + d] =
                        old ? ampc_ref_load_f64(pv->data, pv->dtype,
                                                ((b * KH + h) * a.past + j) * DV + d)
                            : ampc_ref_load_f64(v->data, v->dtype,
                                                bhsd(a.rank3, b, h, s, d, KH, a.kv_seq, DV));
            }
    for (size_t i = 0; pres_k && i < nk; i++)
        ampc_ref_store_f64(pres_k->data, pres_k->dtype, (int64_t)i, kall[i]);
    for (size_t i = 0; pres_v && i < nv; i++)
        ampc_ref_store_f64(pres_v->data, pres_v->dtype, (int64_t)i, vall[i]);
    for (size_t i = 0; i < nk; i++) kall[i] = round_to(a.t1, kall[i] * a.sqrt_scale);

    const int64_t group = a.q_heads / KH;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < a.q_heads; h++)
            for (int64_t i = 0; i < a.q_seq; i++) {
                const int64_t kh = h / group;
                for (int64_t d = 0; d < D; d++)
                    r.q[d] = round_to(a.t1, a.sqrt_scale *
                                                ampc_ref_load_f64(q->data, q->dtype,
                                                                  bhsd(a.rank3, b, h, i, d,
                                                                       a.q_heads, a.q_seq, D)));
                bool masked = true;
                for (int64_t j = 0; j < T; j++) {
                    const double *kr = kall + ((b * KH + kh) * T + j) * D;
                    double s = 0;
                    for (int64_t d = 0; d < D; d++) s += r.q[d] * kr[d];
                    s = round_to(a.t1, s);
                    if (a.softcap > 0)
                        s = round_to(a.t1, a.softcap *
                                               round_to(a.t1, tanh(round_to(a.t1, s / a.softcap))));
                    const double bias = att_bias(&a, b, h, i, j);
                    if (bias != -INFINITY) masked = false;
                    r.score[j] = s;
                    r.biased[j] = round_to(a.t1, s + bias);
                }
                att_softmax(&a, &r, masked);
                for (int64_t d = 0; d < DV; d++) r.acc[d] = 0;
                for (int64_t j = 0; j < T; j++) {
                    const double *vr = vall + ((b * KH + kh) * T + j) * DV;
                    for (int64_t d = 0; d < DV; d++) r.acc[d] += r.prob[j] * vr[d];
                }
                for (int64_t d = 0; d < DV; d++)
                    ampc_ref_store_f64(y->data, y->dtype,
                                       bhsd(a.rank3, b, h, i, d, a.q_heads, a.q_seq, DV), r.acc[d]);
                if (!qk_out) continue;
                const double *src = mode == 3 ? r.prob : mode == 2 ? r.biased : r.score;
                for (int64_t j = 0; j < T; j++)
                    ampc_ref_store_f64(qk_out->data, qk_out->dtype,
                                       ((b * a.q_heads + h) * a.q_seq + i) * T + j, src[j]);
            }
    free(mem);
    return AMPC_OK;
}

/* ---- ampc.FusedAttention -------------------------------------------------------------------- */

/* One query row of ampc.FusedAttention: scores s_j = round(scale * q.k_j + mask_j) in Q's type
 * (the scores tensor the unfused graph holds; with causal, mask_j is 0 for j <= i + causal_off
 * and -inf past it), probabilities rounded to it as well, the sum over
 * V in double and one rounding on store. A row whose maximum is not finite (every key masked
 * with -inf, an overflow, a NaN) gives 0 when safe, else NaN: what Softmax and ampc.SafeSoftmax
 * give there. */
typedef struct fa {
    const ampc_tensor *q, *k, *v, *mask;
    ampc_attention_params p;
} fa;

static void fa_row(const fa *a, int64_t b, int64_t h, int64_t i, double *s, double *acc) {
    const ampc_attention_params *p = &a->p;
    const ampc_dtype t = a->q->dtype;
    double mx = -INFINITY;
    bool nan = false;
    const int64_t qr = p->off[0] + b * p->qs[0] + h * p->qs[1] + i * p->qs[2];
    const int64_t kb = p->off[1] + b * p->ks[0] + h / p->group * p->ks[1]; /* its K/V head */
    const int64_t vb = p->off[2] + b * p->vs[0] + h / p->group * p->vs[1];
    const int64_t mr = b % p->mp * p->ms[0] + h * p->ms[1] + i * p->ms[2]; /* the mask's row */
    for (int64_t j = 0; j < p->Sk; j++) {
        double dot = 0;
        for (int64_t d = 0; d < p->D; d++)
            dot += ampc_ref_load_f64(a->q->data, t, qr + d * p->qs[3]) *
                   ampc_ref_load_f64(a->k->data, t, kb + j * p->ks[2] + d * p->ks[3]);
        double bias = a->mask ? ampc_ref_load_f64(a->mask->data, t, mr + j * p->ms[3]) : 0;
        if (p->causal && j > i + p->causal_off) bias = -INFINITY;
        s[j] = round_to(t, p->scale * dot + bias);
        nan |= isnan(s[j]);
        if (s[j] > mx) mx = s[j];
    }
    for (int64_t d = 0; d < p->Dv; d++) acc[d] = 0;
    if (nan || !isfinite(mx)) {
        for (int64_t d = 0; d < p->Dv; d++) acc[d] = p->safe ? 0 : NAN;
        return;
    }
    double sum = 0;
    for (int64_t j = 0; j < p->Sk; j++) sum += s[j] = exp(s[j] - mx);
    for (int64_t j = 0; j < p->Sk; j++) {
        const double pj = round_to(t, s[j] / sum);
        for (int64_t d = 0; d < p->Dv; d++)
            acc[d] += pj * ampc_ref_load_f64(a->v->data, t, vb + j * p->vs[2] + d * p->vs[3]);
    }
}

/* ampc.FusedAttention (shapes and attributes: infer/attention.c): row by row, in double. */
ampc_status ampc_ref_fused_attention(ampc_graph *g, const ampc_node *n,
                                     const ampc_tensor *const *in, ampc_tensor *const *out) {
    fa a = {.q = in[0], .k = in[1], .v = in[2], .mask = opt_in(n, in, 3)};
    ampc_attention_params_of(n, &a.p);
    const ampc_attention_params *p = &a.p;
    double *s = malloc((size_t)(p->Sk + p->Dv) * sizeof *s);
    if (!s)
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory for a row of %lld scores",
                         (long long)p->Sk);
    double *acc = s + p->Sk;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->H; h++)
            for (int64_t i = 0; i < p->Sq; i++) {
                fa_row(&a, b, h, i, s, acc);
                const int64_t base = b * p->ys[0] + h * p->ys[1] + i * p->ys[2];
                for (int64_t d = 0; d < p->Dv; d++)
                    ampc_ref_store_f64(out[0]->data, out[0]->dtype, base + d * p->ys[3], acc[d]);
            }
    free(s);
    return AMPC_OK;
}

/* ---- RotaryEmbedding ------------------------------------------------------------------------ */

/* RotaryEmbedding: rotates each head vector; a position id outside the caches' rows is an
 * AMPC_E_EVAL error. */
ampc_status ampc_ref_rotary_embedding(ampc_graph *g, const ampc_node *n,
                                      const ampc_tensor *const *in, ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *cosc = in[1], *sinc = in[2], *pos = opt_in(n, in, 3);
    ampc_tensor *y = out[0];
    const ampc_rotary_params rp = ampc_rotary_params_of(n);
    const bool rank4 = x->shape.rank == 4, interleaved = rp.interleaved;
    const int64_t batch = x->shape.dims[0];
    const int64_t heads = rank4 ? x->shape.dims[1] : rp.heads;
    const int64_t seq = x->shape.dims[rank4 ? 2 : 1];
    const int64_t head = rank4 ? x->shape.dims[3] : x->shape.dims[2] / heads;
    int64_t rot = rp.rot_dim;
    if (rot == 0) rot = head;
    const int64_t half = rot / 2, max_pos = pos ? cosc->shape.dims[0] : 0;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t s = 0; s < seq; s++) {
            int64_t row = b * seq + s; /* the cache row: [b, s], or position_ids[b, s] */
            if (pos) {
                const int64_t p = ampc_ref_load_i64(pos->data, pos->dtype, row);
                if (p < 0 || p >= max_pos)
                    return AMPC_FAIL(g, n, AMPC_E_EVAL,
                                     "position_ids[%lld, %lld] is %lld, outside the %lld rows of "
                                     "cos_cache and sin_cache",
                                     (long long)b, (long long)s, (long long)p, (long long)max_pos);
                row = p;
            }
            for (int64_t h = 0; h < heads; h++) {
                const int64_t base = rank4 ? ((b * heads + h) * seq + s) * head
                                           : (b * seq + s) * heads * head + h * head;
                for (int64_t k = 0; k < half; k++) {
                    const int64_t i1 = base + (interleaved ? 2 * k : k);
                    const int64_t i2 = base + (interleaved ? 2 * k + 1 : k + half);
                    const double x1 = ampc_ref_load_f64(x->data, x->dtype, i1);
                    const double x2 = ampc_ref_load_f64(x->data, x->dtype, i2);
                    const double c = ampc_ref_load_f64(cosc->data, cosc->dtype, row * half + k);
                    const double sn = ampc_ref_load_f64(sinc->data, sinc->dtype, row * half + k);
                    ampc_ref_store_f64(y->data, y->dtype, i1, x1 * c - x2 * sn);
                    ampc_ref_store_f64(y->data, y->dtype, i2, x1 * sn + x2 * c);
                }
                for (int64_t d = rot; d < head; d++)
                    ampc_ref_copy_elem(y->data, base + d, x->data, base + d,
                                       ampc_dtype_size(x->dtype));
            }
        }
    return AMPC_OK;
}
