/*
 * test_attention.c — Attention and RotaryEmbedding. Attention is checked against a direct
 * computation written here (softmax of scaled dot products plus an additive bias, grouped-query
 * head mapping, bottom-right causal alignment) for 4-D and 3-D inputs, masks of every kind
 * (bool, float, broadcast, short last dim), a past cache and the present outputs, the
 * qk_matmul_output modes, softcap, scale, nonpad_kv_seqlen, fully masked rows and the exact
 * diagnostics. RotaryEmbedding is checked against the rotation formula (halves and interleaved,
 * partial rotary dims, 3-D and 4-D inputs, with and without position_ids).
 */
#include "support.h"

#include "ir/attention.h"
#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Marks vals[0..n-1] as outputs, evaluates with `inputs`, asserts success. */
static void eval_all(ampc_graph *g, ampc_value **vals, int32_t n, const ampc_tensor *inputs,
                     int32_t n_inputs, ampc_tensor *res) {
    for (int32_t i = 0; i < n; i++)
        cr_assert_eq(ampc_output(g, vals[i], NULL), AMPC_OK, "building failed:\n%s",
                     ampc_graph_errors(g));
    ampc_status st = ampc_graph_evaluate(g, inputs, n_inputs, res, n);
    cr_assert_eq(st, AMPC_OK, "evaluation failed:\n%s", ampc_graph_errors(g));
}

static void free_all(ampc_tensor *t, int32_t n) {
    for (int32_t i = 0; i < n; i++) ampc_tensor_free(&t[i]);
}

/* Deterministic test data in [-1, 1). */
static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)(((i + 1) * (seed * 7 + 13) + seed * 5) % 23) / 11.5 - 1;
}

/* ---- a direct computation ----------------------------------------------------------------------
 */

/* The problem in 4-D form: q [B,QH,S,D], k [B,KH,T,D], v [B,KH,T,DV] (the whole key sequence,
 * past included), bias [B,QH,S,T] additive (NULL: none), causal with offset `off`. Writes y
 * [B,QH,S,DV] and the probabilities [B,QH,S,T]. */
typedef struct direct {
    int64_t B, QH, KH, S, T, D, DV;
    double scale, off;
    bool causal;
} direct;

static void attend(const direct *p, const double *q, const double *k, const double *v,
                   const double *bias, double *y, double *probs) {
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->QH; h++)
            for (int64_t i = 0; i < p->S; i++) {
                const int64_t kh = h / (p->QH / p->KH), row = (b * p->QH + h) * p->S + i;
                double sc[64], mx = -INFINITY, sum = 0;
                cr_assert(p->T <= 64);
                for (int64_t j = 0; j < p->T; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < p->D; d++)
                        s += q[row * p->D + d] * k[((b * p->KH + kh) * p->T + j) * p->D + d];
                    s *= p->scale;
                    if (bias) s += bias[row * p->T + j];
                    if (p->causal && (double)j > (double)i + p->off) s = -INFINITY;
                    sc[j] = s;
                    mx = fmax(mx, s);
                }
                for (int64_t j = 0; j < p->T; j++)
                    sum += sc[j] = mx == -INFINITY ? 0 : exp(sc[j] - mx);
                for (int64_t j = 0; j < p->T; j++) {
                    double pr = sum ? sc[j] / sum : 0;
                    if (probs) probs[row * p->T + j] = pr;
                    sc[j] = pr;
                }
                for (int64_t d = 0; d < p->DV; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < p->T; j++)
                        acc += sc[j] * v[((b * p->KH + kh) * p->T + j) * p->DV + d];
                    y[row * p->DV + d] = acc;
                }
            }
}

/* ---- Attention: values ----------------------------------------------------------------------- */

Test(attention, mha_4d_matches_direct) {
    const direct p = {
        .B = 2, .QH = 2, .KH = 2, .S = 3, .T = 4, .D = 3, .DV = 2, .scale = 1 / sqrt(3.0)};
    double q[36], k[48], v[32], want[24];
    fill(q, 36, 1), fill(k, 48, 2), fill(v, 32, 3);
    attend(&p, q, k, v, NULL, want, NULL);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(2, 2, 3, 3), q), t_const_f32(g, SHAPE(2, 2, 4, 3), k),
                         t_const_f32(g, SHAPE(2, 2, 4, 2), v)};
    ampc_tensor out = t_eval1(g, ampc_op(g, "Attention", in, 3, NULL, 0), NULL, 0);
    t_expect_close(&out, SHAPE(2, 2, 3, 2), want, 1e-5, 1e-6);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(attention, gqa_3d_matches_direct) {
    /* 4 query heads share 2 kv heads: query heads 0, 1 read kv head 0; 2, 3 read kv head 1.
     * 3-D inputs are [B, S, heads*D]; the direct computation gets them in 4-D. */
    const direct p = {
        .B = 1, .QH = 4, .KH = 2, .S = 2, .T = 3, .D = 2, .DV = 3, .scale = 1 / sqrt(2.0)};
    double q3[16], k3[12], v3[18], q[16], k[12], v[18], y[24], want[24];
    fill(q3, 16, 4), fill(k3, 12, 5), fill(v3, 18, 6);
    for (int h = 0; h < 4; h++)
        for (int s = 0; s < 2; s++)
            for (int d = 0; d < 2; d++) q[(h * 2 + s) * 2 + d] = q3[s * 8 + h * 2 + d];
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < 3; t++) {
            for (int d = 0; d < 2; d++) k[(h * 3 + t) * 2 + d] = k3[t * 4 + h * 2 + d];
            for (int d = 0; d < 3; d++) v[(h * 3 + t) * 3 + d] = v3[t * 6 + h * 3 + d];
        }
    attend(&p, q, k, v, NULL, y, NULL);
    for (int h = 0; h < 4; h++) /* back to [B, S, QH*DV] */
        for (int s = 0; s < 2; s++)
            for (int d = 0; d < 3; d++) want[s * 12 + h * 3 + d] = y[(h * 2 + s) * 3 + d];
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(1, 2, 8), q3), t_const_f32(g, SHAPE(1, 3, 4), k3),
                         t_const_f32(g, SHAPE(1, 3, 6), v3)};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("q_num_heads", 4), AMPC_ATTR_I("kv_num_heads", 2)};
    ampc_tensor out = t_eval1(g, ampc_op(g, "Attention", in, 3, at, 2), NULL, 0);
    t_expect_close(&out, SHAPE(1, 2, 12), want, 1e-5, 1e-6);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(attention, causal_first_row_sees_only_the_first_key) {
    /* q_seq = kv_seq = 3, is_causal: row 0 attends key 0 alone, so Y[0] = V[0] exactly. */
    const direct p = {.B = 1,
                      .QH = 1,
                      .KH = 1,
                      .S = 3,
                      .T = 3,
                      .D = 2,
                      .DV = 2,
                      .scale = 1 / sqrt(2.0),
                      .causal = true};
    double q[6], k[6], v[6], want[6];
    fill(q, 6, 7), fill(k, 6, 8), fill(v, 6, 9);
    attend(&p, q, k, v, NULL, want, NULL);
    cr_assert_float_eq(want[0], v[0], 1e-12);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(1, 1, 3, 2), q), t_const_f32(g, SHAPE(1, 1, 3, 2), k),
                         t_const_f32(g, SHAPE(1, 1, 3, 2), v)};
    ampc_attr_arg at = AMPC_ATTR_I("is_causal", 1);
    ampc_tensor out = t_eval1(g, ampc_op(g, "Attention", in, 3, &at, 1), NULL, 0);
    t_expect_close(&out, SHAPE(1, 1, 3, 2), want, 1e-5, 1e-6);
    cr_assert_eq(((float *)out.data)[0], (float)v[0]);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(attention, past_cache_presents_and_bottom_right_causal) {
    /* past 2 + new 2 keys, 2 queries, causal: query i sees keys j <= i + 2. The present outputs
     * are the past followed by the new rows. */
    const direct p = {.B = 1,
                      .QH = 2,
                      .KH = 1,
                      .S = 2,
                      .T = 4,
                      .D = 2,
                      .DV = 2,
                      .scale = 1 / sqrt(2.0),
                      .causal = true,
                      .off = 2};
    double q[8], pk[4], pv[4], kn[4], vn[4], k[8], v[8], want[8];
    fill(q, 8, 10), fill(pk, 4, 11), fill(pv, 4, 12), fill(kn, 4, 13), fill(vn, 4, 14);
    memcpy(k, pk, sizeof pk), memcpy(k + 4, kn, sizeof kn);
    memcpy(v, pv, sizeof pv), memcpy(v + 4, vn, sizeof vn);
    attend(&p, q, k, v, NULL, want, NULL);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[6] = {
        t_const_f32(g, SHAPE(1, 2, 2, 2), q),  t_const_f32(g, SHAPE(1, 1, 2, 2), kn),
        t_const_f32(g, SHAPE(1, 1, 2, 2), vn), NULL,
        t_const_f32(g, SHAPE(1, 1, 2, 2), pk), t_const_f32(g, SHAPE(1, 1, 2, 2), pv)};
    ampc_attr_arg at = AMPC_ATTR_I("is_causal", 1);
    ampc_value *out[3];
    cr_assert_eq(ampc_op_multi(g, "Attention", in, 6, &at, 1, out, 3), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_tensor res[3];
    eval_all(g, out, 3, NULL, 0, res);
    t_expect_close(&res[0], SHAPE(1, 2, 2, 2), want, 1e-5, 1e-6);
    t_expect_close(&res[1], SHAPE(1, 1, 4, 2), k, 0, 1e-7);
    t_expect_close(&res[2], SHAPE(1, 1, 4, 2), v, 0, 1e-7);
    free_all(res, 3);
    ampc_graph_destroy(g);
}

Test(attention, masks_bool_float_broadcast_and_short) {
    /* B 2, heads 2, S 2, T 3. A float mask [S, T] broadcasts over batch and heads; a bool mask
     * [B, 1, 1, 2] is shorter than T: key 2 counts as masked for every row. */
    const direct p = {
        .B = 2, .QH = 2, .KH = 2, .S = 2, .T = 3, .D = 2, .DV = 2, .scale = 1 / sqrt(2.0)};
    double q[16], k[24], v[24], fmask[6] = {0.5, -1, 0, 2, 0, -0.25}, bias[24], want[16];
    fill(q, 16, 15), fill(k, 24, 16), fill(v, 24, 17);
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < 3; j++) bias[r * 3 + j] = fmask[(r % 2) * 3 + j];
    attend(&p, q, k, v, bias, want, NULL);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[4] = {t_const_f32(g, SHAPE(2, 2, 2, 2), q), t_const_f32(g, SHAPE(2, 2, 3, 2), k),
                         t_const_f32(g, SHAPE(2, 2, 3, 2), v), t_const_f32(g, SHAPE(2, 3), fmask)};
    ampc_tensor out = t_eval1(g, ampc_op(g, "Attention", in, 4, NULL, 0), NULL, 0);
    t_expect_close(&out, SHAPE(2, 2, 2, 2), want, 1e-5, 1e-6);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    const uint8_t bmask[4] = {1, 0, 1, 1}; /* batch 0: key 0 only; batch 1: keys 0, 1 */
    for (int b = 0; b < 2; b++)
        for (int r = 0; r < 4; r++)
            for (int j = 0; j < 3; j++)
                bias[(b * 4 + r) * 3 + j] = j < 2 && bmask[b * 2 + j] ? 0 : -INFINITY;
    attend(&p, q, k, v, bias, want, NULL);
    for (int r = 0; r < 4; r++) /* batch 0 attends key 0 alone */
        for (int d = 0; d < 2; d++)
            cr_assert_float_eq(want[r * 2 + d], v[(r / 2 * 3) * 2 + d], 1e-12);
    g = ampc_graph_create("t");
    in[0] = t_const_f32(g, SHAPE(2, 2, 2, 2), q);
    in[1] = t_const_f32(g, SHAPE(2, 2, 3, 2), k);
    in[2] = t_const_f32(g, SHAPE(2, 2, 3, 2), v);
    in[3] = t_const(g, AMPC_DTYPE_BOOL, SHAPE(2, 1, 1, 2), bmask);
    out = t_eval1(g, ampc_op(g, "Attention", in, 4, NULL, 0), NULL, 0);
    t_expect_close(&out, SHAPE(2, 2, 2, 2), want, 1e-5, 1e-6);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(attention, fully_masked_rows_are_zero) {
    /* Query row 1's mask excludes every key: its output and its probabilities are zero, not NaN. */
    double q[4], k[4], v[4];
    fill(q, 4, 18), fill(k, 4, 19), fill(v, 4, 20);
    const uint8_t mask[4] = {1, 1, 0, 0};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[4] = {t_const_f32(g, SHAPE(1, 1, 2, 2), q), t_const_f32(g, SHAPE(1, 1, 2, 2), k),
                         t_const_f32(g, SHAPE(1, 1, 2, 2), v),
                         t_const(g, AMPC_DTYPE_BOOL, SHAPE(2, 2), mask)};
    ampc_attr_arg at = AMPC_ATTR_I("qk_matmul_output_mode", 3);
    ampc_value *out[4];
    cr_assert_eq(ampc_op_multi(g, "Attention", in, 4, &at, 1, out, 4), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    ampc_value *want_out[2] = {out[0], out[3]};
    ampc_tensor res[2];
    eval_all(g, want_out, 2, NULL, 0, res);
    const direct p = {
        .B = 1, .QH = 1, .KH = 1, .S = 1, .T = 2, .D = 2, .DV = 2, .scale = 1 / sqrt(2.0)};
    double y[4] = {0}, probs[4] = {0};
    attend(&p, q, k, v, NULL, y, probs); /* row 0 alone: no mask applies to it */
    t_expect_close(&res[0], SHAPE(1, 1, 2, 2), y, 1e-5, 1e-6);
    t_expect_close(&res[1], SHAPE(1, 1, 2, 2), probs, 1e-5, 1e-6);
    cr_assert(((float *)res[0].data)[2] == 0 && ((float *)res[0].data)[3] == 0);
    free_all(res, 2);
    ampc_graph_destroy(g);
}

Test(attention, qk_output_modes_softcap_and_scale) {
    /* scale 0.5 (Q and K each scaled by sqrt(0.5)), softcap 1.5, float mask: mode 0 gives the
     * capped scores, mode 2 the scores plus the mask, mode 3 the probabilities. */
    double q[6], k[6], v[6], mask[3] = {0, -0.5, 1};
    fill(q, 6, 21), fill(k, 6, 22), fill(v, 6, 23);
    double capped[6], biased[6], probs[6], y[6];
    for (int i = 0; i < 2; i++) {
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < 3; j++) {
            double s = 0;
            for (int d = 0; d < 2; d++) s += q[i * 2 + d] * k[j * 2 + d];
            capped[i * 3 + j] = 1.5 * tanh(s * 0.5 / 1.5);
            biased[i * 3 + j] = capped[i * 3 + j] + mask[j];
            mx = fmax(mx, biased[i * 3 + j]);
        }
        for (int j = 0; j < 3; j++) sum += probs[i * 3 + j] = exp(biased[i * 3 + j] - mx);
        for (int j = 0; j < 3; j++) probs[i * 3 + j] /= sum;
        for (int d = 0; d < 3; d++) {
            y[i * 3 + d] = 0;
            for (int j = 0; j < 3; j++) y[i * 3 + d] += probs[i * 3 + j] * v[j * 2 + (d % 2)];
        }
    }
    const int64_t modes[3] = {0, 2, 3};
    const double *want[3] = {capped, biased, probs};
    for (int m = 0; m < 3; m++) {
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[4] = {t_const_f32(g, SHAPE(1, 1, 2, 2), q),
                             t_const_f32(g, SHAPE(1, 1, 3, 2), k),
                             t_const_f32(g, SHAPE(1, 1, 3, 2), v), t_const_f32(g, SHAPE(3), mask)};
        ampc_attr_arg at[3] = {AMPC_ATTR_I("qk_matmul_output_mode", modes[m]),
                               AMPC_ATTR_F("scale", 0.5f), AMPC_ATTR_F("softcap", 1.5f)};
        ampc_value *out[4];
        cr_assert_eq(ampc_op_multi(g, "Attention", in, 4, at, 3, out, 4), AMPC_OK, "%s",
                     ampc_graph_errors(g));
        ampc_value *sel[2] = {out[0], out[3]};
        ampc_tensor res[2];
        eval_all(g, sel, 2, NULL, 0, res);
        double y2[4];
        for (int i = 0; i < 2; i++)
            for (int d = 0; d < 2; d++) y2[i * 2 + d] = y[i * 3 + d];
        t_expect_close(&res[0], SHAPE(1, 1, 2, 2), y2, 1e-5, 1e-6);
        t_expect_close(&res[1], SHAPE(1, 1, 2, 3), want[m], 1e-5, 1e-6);
        free_all(res, 2);
        ampc_graph_destroy(g);
    }
}

Test(attention, nonpad_kv_seqlen_masks_the_padding) {
    /* batch 2 with 3 and 1 valid keys of 3; is_causal aligns query i with key i + len - S. */
    const double lens_d[2] = {3, 1};
    const int64_t lens[2] = {3, 1};
    double q[8], k[12], v[12], bias[12], want[8];
    fill(q, 8, 24), fill(k, 12, 25), fill(v, 12, 26);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                bias[(b * 2 + i) * 3 + j] = j < lens_d[b] && j <= i + lens[b] - 2 ? 0 : -INFINITY;
    const direct p = {
        .B = 2, .QH = 1, .KH = 1, .S = 2, .T = 3, .D = 2, .DV = 2, .scale = 1 / sqrt(2.0)};
    attend(&p, q, k, v, bias, want, NULL);
    /* batch 1, query 0 sees no key (0 > 0 + 1 - 2): zero; query 1 sees key 0 alone */
    cr_assert(want[4] == 0 && want[5] == 0);
    cr_assert_float_eq(want[6], v[6], 1e-12);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[7] = {t_const_f32(g, SHAPE(2, 1, 2, 2), q),
                         t_const_f32(g, SHAPE(2, 1, 3, 2), k),
                         t_const_f32(g, SHAPE(2, 1, 3, 2), v),
                         NULL,
                         NULL,
                         NULL,
                         t_const_i64(g, SHAPE(2), lens)};
    ampc_attr_arg at = AMPC_ATTR_I("is_causal", 1);
    ampc_tensor out = t_eval1(g, ampc_op(g, "Attention", in, 7, &at, 1), NULL, 0);
    t_expect_close(&out, SHAPE(2, 1, 2, 2), want, 1e-5, 1e-6);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(attention, f16_inputs_stay_close) {
    const direct p = {.B = 1, .QH = 2, .KH = 1, .S = 2, .T = 3, .D = 4, .DV = 4, .scale = 0.5};
    double q[16], k[12], v[12], want[16];
    fill(q, 16, 27), fill(k, 12, 28), fill(v, 12, 29);
    uint16_t hq[16], hk[12], hv[12];
    for (int i = 0; i < 16; i++) q[i] = ampc_f16_to_f32(hq[i] = ampc_f32_to_f16((float)q[i]));
    for (int i = 0; i < 12; i++) k[i] = ampc_f16_to_f32(hk[i] = ampc_f32_to_f16((float)k[i]));
    for (int i = 0; i < 12; i++) v[i] = ampc_f16_to_f32(hv[i] = ampc_f32_to_f16((float)v[i]));
    attend(&p, q, k, v, NULL, want, NULL);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const(g, AMPC_DTYPE_F16, SHAPE(1, 2, 2, 4), hq),
                         t_const(g, AMPC_DTYPE_F16, SHAPE(1, 1, 3, 4), hk),
                         t_const(g, AMPC_DTYPE_F16, SHAPE(1, 1, 3, 4), hv)};
    ampc_value *y = ampc_op(g, "Attention", in, 3, NULL, 0);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    t_expect_close(&out, SHAPE(1, 2, 2, 4), want, 4e-3, 1e-3);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* ---- Attention: shapes and diagnostics ----------------------------------------------------------
 */

/* Builds Attention over f32 graph inputs of the given shapes (rank 0: absent) and returns its
 * node's status; out receives up to 4 outputs. */
static ampc_status build_att(ampc_graph *g, const ampc_shape *s, int32_t n_in,
                             const ampc_attr_arg *at, int32_t n_at, ampc_value **out,
                             int32_t n_out) {
    static const char *const names[7] = {"Q", "K", "V", "mask", "past_k", "past_v", "nonpad"};
    ampc_value *in[7] = {0};
    for (int32_t i = 0; i < n_in; i++)
        if (s[i].rank) in[i] = t_input(g, names[i], i == 6 ? AMPC_DTYPE_I64 : AMPC_DTYPE_F32, s[i]);
    return ampc_op_multi(g, "Attention", in, n_in, at, n_at, out, n_out);
}

static void att_fail(const ampc_shape *s, int32_t n_in, const ampc_attr_arg *at, int32_t n_at,
                     const char *needle) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *out[1];
    cr_assert_neq(build_att(g, s, n_in, at, n_at, out, 1), AMPC_OK);
    cr_assert(ampc_value_is_poisoned(out[0]));
    t_expect_diag(g, needle);
    ampc_graph_destroy(g);
}

Test(attention, output_shapes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_shape s[6] = {SHAPE(2, 5, 24), SHAPE(2, 7, 8),    SHAPE(2, 7, 12),
                       SHAPE(5, 10),    SHAPE(2, 2, 3, 4), SHAPE(2, 2, 3, 6)};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("q_num_heads", 6), AMPC_ATTR_I("kv_num_heads", 2)};
    ampc_value *out[4];
    cr_assert_eq(build_att(g, s, 6, at, 2, out, 4), AMPC_OK, "%s", ampc_graph_errors(g));
    const ampc_shape want[4] = {SHAPE(2, 5, 36), SHAPE(2, 2, 10, 4), SHAPE(2, 2, 10, 6),
                                SHAPE(2, 6, 5, 10)};
    for (int i = 0; i < 4; i++) {
        char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
        cr_assert(ampc_shape_eq(&out[i]->shape, &want[i]), "output %d: got %s, expected %s", i,
                  ampc_shape_str(&out[i]->shape, a, sizeof a),
                  ampc_shape_str(&want[i], b, sizeof b));
    }
    ampc_graph_destroy(g);
}

Test(attention, diagnostics) {
    ampc_shape s3[3] = {SHAPE(1, 4, 8), SHAPE(1, 4, 8), SHAPE(1, 4, 8)};
    att_fail(s3, 3, NULL, 0,
             "node 0 (Attention 'Attention_0'): attribute 'q_num_heads' must be set (> 0) when Q, "
             "K and V are 3-D, got 0");
    ampc_attr_arg heads[2] = {AMPC_ATTR_I("q_num_heads", 3), AMPC_ATTR_I("kv_num_heads", 2)};
    att_fail(s3, 3, heads, 2, "dim 2 of input 0 'Q' (8) must be a multiple of q_num_heads 3");
    heads[0] = AMPC_ATTR_I("q_num_heads", 2), heads[1] = AMPC_ATTR_I("kv_num_heads", 4);
    att_fail(s3, 3, heads, 2,
             "input 1 'K' (K) has head size 2, but Q has 4 (they are multiplied together)");
    ampc_shape gq[3] = {SHAPE(1, 3, 4, 8), SHAPE(1, 2, 4, 8), SHAPE(1, 2, 4, 8)};
    att_fail(gq, 3, NULL, 0,
             "q_num_heads 3 must be a multiple of kv_num_heads 2 (grouped-query attention shares "
             "each kv head among q_num_heads / kv_num_heads query heads)");
    ampc_shape r[3] = {SHAPE(1, 2, 4, 8), SHAPE(1, 2, 8), SHAPE(1, 2, 4, 8)};
    att_fail(r, 3, NULL, 0, "input 1 'K' (K) must have rank 4, as Q has, got [1,2,8]");
    ampc_shape sv[3] = {SHAPE(1, 2, 4, 8), SHAPE(1, 2, 5, 8), SHAPE(1, 2, 4, 8)};
    att_fail(sv, 3, NULL, 0, "input 2 'V' (V) has sequence length 4, but K has 5");
    ampc_shape m[4] = {SHAPE(2, 2, 3, 8), SHAPE(2, 2, 5, 8), SHAPE(2, 2, 5, 8), SHAPE(3, 2, 5)};
    att_fail(m, 4, NULL, 0,
             "input 3 'mask' (attn_mask) must broadcast to [2,2,3,5] ([batch_size, q_num_heads, "
             "q_sequence_length, total_sequence_length]; its last dim may be shorter and is then "
             "padded as masked), got [3,2,5]");
    m[3] = SHAPE(3, 6);
    att_fail(m, 4, NULL, 0, "got [3,6]");
    ampc_shape pk[5] = {
        SHAPE(2, 2, 3, 8), SHAPE(2, 2, 5, 8), SHAPE(2, 2, 5, 8), {0}, SHAPE(2, 2, 4, 8)};
    att_fail(pk, 5, NULL, 0,
             "inputs 4 (past_key) and 5 (past_value) must be given together, got only past_key");
    ampc_shape pv[6] = {SHAPE(2, 2, 3, 8), SHAPE(2, 2, 5, 8), SHAPE(2, 2, 5, 8), {0},
                        SHAPE(2, 2, 4, 8), SHAPE(2, 2, 3, 8)};
    att_fail(pv, 6, NULL, 0,
             "input 5 'past_v' (past_value) must have shape [2,2,4,8] ([batch_size, kv_num_heads, "
             "past_sequence_length, v_head_size]), got [2,2,3,8]");
    ampc_shape np[7] = {SHAPE(2, 2, 3, 8), SHAPE(2, 2, 5, 8), SHAPE(2, 2, 5, 8), {0},
                        SHAPE(2, 2, 4, 8), SHAPE(2, 2, 4, 8), SHAPE(2)};
    att_fail(np, 7, NULL, 0,
             "input 6 (nonpad_kv_seqlen) describes an external cache and cannot be combined with "
             "past_key and past_value");
    gq[0] = SHAPE(1, 2, 4, 8);
    ampc_attr_arg mode = AMPC_ATTR_I("qk_matmul_output_mode", 4);
    att_fail(gq, 3, &mode, 1,
             "attribute 'qk_matmul_output_mode' must be 0 (Q*K^T), 1 (after softcap), 2 (after "
             "the mask) or 3 (after softmax), got 4");
    ampc_attr_arg sc = AMPC_ATTR_F("scale", 0);
    att_fail(gq, 3, &sc, 1,
             "attribute 'scale' must be positive (Q and K are each multiplied by its square "
             "root), got 0");
    ampc_attr_arg prec = AMPC_ATTR_I("softmax_precision", 7);
    att_fail(gq, 3, &prec, 1,
             "attribute 'softmax_precision' must be an ONNX floating-point data type (1 float, 10 "
             "float16, 11 double, 16 bfloat16), got 7");
    ampc_attr_arg h4 = AMPC_ATTR_I("q_num_heads", 4);
    att_fail(gq, 3, &h4, 1,
             "attributes q_num_heads 4 and kv_num_heads 0 disagree with the 4-D inputs, which "
             "have 2 and 2 heads (dim 1 of Q and K)");

    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_input(g, "q", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2)),
                         t_input(g, "k", AMPC_DTYPE_F16, SHAPE(1, 1, 2, 2)),
                         t_input(g, "v", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 2))};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Attention", in, 3, NULL, 0)));
    t_expect_diag(g,
                  "node 0 (Attention 'Attention_0'): inputs 0 'q' and 1 'k' must have one dtype, "
                  "got f32 and f16");
    ampc_graph_destroy(g);
}

/* ---- RotaryEmbedding ------------------------------------------------------------------------ */

/* Rotates x [B, S, H, D] (row-major, head vectors contiguous per (b, s, h)) by cos/sin rows
 * [B*S, rot/2] as the definition says. */
static void rotate(const double *x, const double *cs, const double *sn, int64_t B, int64_t S,
                   int64_t H, int64_t D, int64_t rot, bool inter, double *y) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) {
                const double *xv = x + ((b * S + s) * H + h) * D;
                double *yv = y + ((b * S + s) * H + h) * D;
                const double *c = cs + (b * S + s) * (rot / 2), *si = sn + (b * S + s) * (rot / 2);
                memcpy(yv, xv, (size_t)D * sizeof *xv);
                for (int64_t k = 0; k < rot / 2; k++) {
                    int64_t i1 = inter ? 2 * k : k, i2 = inter ? 2 * k + 1 : k + rot / 2;
                    yv[i1] = xv[i1] * c[k] - xv[i2] * si[k];
                    yv[i2] = xv[i1] * si[k] + xv[i2] * c[k];
                }
            }
}

Test(rotary, halves_and_interleaved_with_position_ids_4d) {
    /* x [B 1, H 2, S 3, D 4]; caches of 5 positions; position_ids {4, 0, 2}. */
    double x4[24], cache_c[10], cache_s[10];
    fill(x4, 24, 30);
    for (int p = 0; p < 5; p++)
        for (int k = 0; k < 2; k++)
            cache_c[p * 2 + k] = cos(0.3 * p * (k + 1)),
                            cache_s[p * 2 + k] = sin(0.3 * p * (k + 1));
    const int64_t pos[3] = {4, 0, 2};
    double xs[24], cs[6], sn[6], ys[24], want[24];
    for (int h = 0; h < 2; h++) /* to [B, S, H, D] for the direct computation */
        for (int s = 0; s < 3; s++)
            for (int d = 0; d < 4; d++) xs[(s * 2 + h) * 4 + d] = x4[(h * 3 + s) * 4 + d];
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 2; k++)
            cs[s * 2 + k] = cache_c[pos[s] * 2 + k], sn[s * 2 + k] = cache_s[pos[s] * 2 + k];
    for (int inter = 0; inter < 2; inter++) {
        rotate(xs, cs, sn, 1, 3, 2, 4, 4, inter, ys);
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 3; s++)
                for (int d = 0; d < 4; d++) want[(h * 3 + s) * 4 + d] = ys[(s * 2 + h) * 4 + d];
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[4] = {
            t_const_f32(g, SHAPE(1, 2, 3, 4), x4), t_const_f32(g, SHAPE(5, 2), cache_c),
            t_const_f32(g, SHAPE(5, 2), cache_s), t_const_i64(g, SHAPE(1, 3), pos)};
        ampc_attr_arg at = AMPC_ATTR_I("interleaved", inter);
        ampc_tensor out = t_eval1(g, ampc_op(g, "RotaryEmbedding", in, 4, &at, 1), NULL, 0);
        t_expect_close(&out, SHAPE(1, 2, 3, 4), want, 1e-6, 1e-7);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
    /* position 0 has cos 1, sin 0: the middle sequence step is unchanged */
    cr_assert_float_eq(want[4], x4[4], 1e-12);
}

Test(rotary, partial_dim_3d_without_position_ids) {
    /* x [B 2, S 2, hidden 2 heads * 6]; rotary dim 4 of 6: features 4, 5 of each head copied. */
    double x[48], cs[8], sn[8], want[48];
    fill(x, 48, 31);
    for (int i = 0; i < 8; i++) cs[i] = cos(0.2 * i + 0.1), sn[i] = sin(0.2 * i + 0.1);
    rotate(x, cs, sn, 2, 2, 2, 6, 4, false, want);
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(2, 2, 12), x), t_const_f32(g, SHAPE(2, 2, 2), cs),
                         t_const_f32(g, SHAPE(2, 2, 2), sn)};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("num_heads", 2), AMPC_ATTR_I("rotary_embedding_dim", 4)};
    ampc_tensor out = t_eval1(g, ampc_op(g, "RotaryEmbedding", in, 3, at, 2), NULL, 0);
    t_expect_close(&out, SHAPE(2, 2, 12), want, 1e-6, 1e-7);
    cr_assert_eq(((float *)out.data)[4], (float)x[4]);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(rotary, position_out_of_range_and_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    double c[4] = {1, 1, 1, 1};
    ampc_value *in[4] = {t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 2, 4)),
                         t_const_f32(g, SHAPE(2, 2), c), t_const_f32(g, SHAPE(2, 2), c),
                         t_input(g, "pos", AMPC_DTYPE_I64, SHAPE(1, 2))};
    ampc_value *y = ampc_op(g, "RotaryEmbedding", in, 4, NULL, 0);
    cr_assert_eq(ampc_output(g, y, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    float xv[8] = {0};
    int64_t pv[2] = {1, 2};
    ampc_tensor ins[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(1, 1, 2, 4), xv),
                          t_tensor(AMPC_DTYPE_I64, SHAPE(1, 2), pv)};
    ampc_tensor out;
    cr_assert_eq(ampc_graph_evaluate(g, ins, 2, &out, 1), AMPC_E_EVAL);
    t_expect_diag(g,
                  "node 0 (RotaryEmbedding 'RotaryEmbedding_0'): position_ids[0, 1] is 2, outside "
                  "the 2 rows of cos_cache and sin_cache");
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    ampc_value *x3 = t_input(g, "x3", AMPC_DTYPE_F32, SHAPE(1, 2, 8));
    ampc_value *c3 = t_input(g, "c3", AMPC_DTYPE_F32, SHAPE(1, 2, 3));
    ampc_value *r3[3] = {x3, c3, c3};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RotaryEmbedding", r3, 3, NULL, 0)));
    t_expect_diag(g, "node 0 (RotaryEmbedding 'RotaryEmbedding_0'): attribute 'num_heads' must be "
                     "set (> 0) when input 0 is 3-D, got 0");
    ampc_attr_arg nh = AMPC_ATTR_I("num_heads", 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RotaryEmbedding", r3, 3, &nh, 1)));
    t_expect_diag(g, "node 1 (RotaryEmbedding 'RotaryEmbedding_1'): input 1 'c3' (cos_cache) must "
                     "have shape [1,2,2] ([batch, seq, rotary_embedding_dim / 2] without "
                     "position_ids), got [1,2,3]");
    ampc_value *r4[4] = {t_input(g, "x4", AMPC_DTYPE_F32, SHAPE(1, 2, 3, 4)), c3, c3,
                         t_input(g, "p4", AMPC_DTYPE_I64, SHAPE(1, 3))};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RotaryEmbedding", r4, 4, NULL, 0)));
    t_expect_diag(g, "node 2 (RotaryEmbedding 'RotaryEmbedding_2'): input 1 'c3' (cos_cache) must "
                     "be 2-D, [max_position_id + 1, rotary_embedding_dim / 2], when position_ids "
                     "is given, got [1,2,3]");
    ampc_attr_arg odd[2] = {AMPC_ATTR_I("num_heads", 2), AMPC_ATTR_I("rotary_embedding_dim", 3)};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RotaryEmbedding", r3, 3, odd, 2)));
    t_expect_diag(g,
                  "the rotary embedding dim (attribute 'rotary_embedding_dim', 0: the head size) "
                  "must be even and in [0, head_size 4], got 3");
    ampc_graph_destroy(g);
}

/* ---- ampc.FusedAttention's written form ---------------------------------------------------- */

/* A FusedAttention over Q, K, V [1, 2, 3, 4] built from a form, with a rank mark beside it. */
static ampc_node *fused_from_form(ampc_graph *g, const ampc_attention_form *f) {
    static const char *const names[3] = {"q", "k", "v"};
    ampc_value *in[3];
    for (int i = 0; i < 3; i++) in[i] = t_input(g, names[i], AMPC_DTYPE_F32, SHAPE(1, 2, 3, 4));
    ampc_attr *as;
    int32_t n;
    cr_assert_eq(ampc_attention_form_attrs(g, f, &as, &n), AMPC_OK);
    ampc_attr all[16];
    memcpy(all, as, (size_t)n * sizeof *all);
    all[n++] = (ampc_attr){.name = AMPC_ATTR_RANK, .kind = AMPC_ATTR_INT, .i = 1};
    ampc_node *node = NULL;
    cr_assert_eq(ampc_ir_node_build(g, AMPC_OP_FUSED_ATTENTION, "fa", in, 3, all, n, 1, NULL, &node),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    return node;
}

Test(fused_attention, form_round_trip_and_edit_keep_the_rest) {
    ampc_graph *g = ampc_graph_create("t");
    const ampc_attention_form f = {.dims = {1, 2, 3, 3, 4, 4},
                                   .qs = {24, 12, 4, 1}, .ks = {24, 12, 4, 1}, .vs = {24, 12, 4, 1},
                                   .scale = 0.5, .group = 1, .has_perm = true,
                                   .y_perm = {0, 2, 1, 3}};
    ampc_node *n = fused_from_form(g, &f);
    ampc_attention_form back;
    cr_assert(ampc_attention_form_of(n, &back));
    cr_assert_eq(memcmp(back.dims, f.dims, sizeof f.dims), 0);
    cr_assert_eq(memcmp(back.y_perm, f.y_perm, sizeof f.y_perm), 0);
    cr_assert(back.has_perm && !back.merge_heads && back.y_rank == 0 && back.mask_period == 0);
    cr_assert_eq(back.scale, 0.5);
    cr_assert_eq(back.off[0] + back.off[1] + back.off[2], 0);
    /* the defaults are not written: no offsets, kv_group, y_shape or mask_period attribute */
    for (int32_t i = 0; i < n->n_attrs; i++)
        cr_assert(strcmp(n->attrs[i].name, "offsets") && strcmp(n->attrs[i].name, "kv_group") &&
                  strcmp(n->attrs[i].name, "mask_period"), "%s written", n->attrs[i].name);
    /* an edit rewrites the form's attributes and keeps the others (the rank) */
    back.off[2] = 5;
    back.y_perm[1] = 1, back.y_perm[2] = 2;
    cr_assert_eq(ampc_attention_form_set(g, n, &back), AMPC_OK);
    cr_assert_eq(ampc_node_rank(n), 1);
    ampc_attention_params p;
    ampc_attention_params_of(n, &p);
    cr_assert_eq(p.off[2], 5);
    cr_assert_eq(p.mp, 1, "mask_period defaults to B");
    const int64_t ys[4] = {24, 12, 4, 1}; /* y_perm (0, 1, 2, 3): Y as it is */
    cr_assert_eq(memcmp(p.ys, ys, sizeof ys), 0);
    ampc_graph_destroy(g);
}
