/*
 * attention.c — inference for Attention (opset 23 on) and RotaryEmbedding (opset 23).
 *
 * Attention: Q, K and V are all 4-D, [batch, heads, seq, head_size], or all 3-D, [batch, seq,
 * heads*head_size], the head counts then coming from the attributes q_num_heads and kv_num_heads
 * (for 4-D inputs they are dim 1, and the attributes, when set, must agree). K and V share
 * kv_num_heads and their sequence length; K's head size is Q's; V's (v_head_size) may differ.
 * q_num_heads must be a multiple of kv_num_heads (grouped-query attention: query head h reads
 * kv head h / (q_num_heads / kv_num_heads)). Optional inputs: attn_mask (bool, or numeric and
 * added to the scores), which broadcasts (numpy rules, right-aligned) to [batch, q_num_heads,
 * q_seq, total_seq] except that its last dim may be shorter than total_seq (the rest is masked
 * out); past_key [batch, kv_heads, past_seq, head_size] and past_value [.., past_seq,
 * v_head_size], both or neither; nonpad_kv_seqlen (opset 24) [batch] i64, not together with a
 * past cache. total_seq = past_seq + kv_seq. Outputs: Y ([batch, q_heads, q_seq, v_head_size],
 * or [batch, q_seq, q_heads*v_head_size] for 3-D inputs) of Q's dtype, present_key [batch,
 * kv_heads, total_seq, head_size] (Q's dtype), present_value [.., v_head_size] (V's dtype) and
 * qk_matmul_output [batch, q_heads, q_seq, total_seq] (Q's dtype). Attributes: is_causal 0/1,
 * qk_matmul_output_mode 0..3, scale > 0, softcap >= 0, softmax_precision an ONNX float type,
 * and opset 25's left_window_size / right_window_size (>= -1; -1: unbounded).
 *
 * RotaryEmbedding: X is [batch, num_heads, seq, head_size] or [batch, seq, hidden] (then the
 * num_heads attribute is required and divides hidden). rotary_embedding_dim (0: head_size) is even
 * and at most head_size. With position_ids ([batch, seq], i64) cos_cache and sin_cache are
 * [max_position, rotary_dim/2]; without, they are [batch, seq, rotary_dim/2]. Y has X's dtype and
 * shape.
 */
#include "infer.h"

#include "ir/attention.h"

/* Reads an int attribute; false when it is mistyped (the reader has already reported it). */
static bool read_int(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                     int64_t *out) {
    int32_t before = g->diag.n + g->diag.dropped;
    *out = ampc_ir_attr_int(g, n, name, dflt);
    return g->diag.n + g->diag.dropped == before;
}

static const ampc_value *opt_input(const ampc_node *n, int32_t i) {
    return i < n->n_inputs ? n->inputs[i] : NULL;
}

/* Input i must have the shape want (rank k); `form` spells it symbolically. */
static bool check_shape(ampc_graph *g, const ampc_node *n, int32_t i, const char *role,
                        const int64_t *want, int32_t rank, const char *form) {
    const ampc_value *v = n->inputs[i];
    ampc_shape w = {.rank = rank};
    for (int32_t d = 0; d < rank; d++) w.dims[d] = want[d];
    if (ampc_shape_eq(&v->shape, &w)) return true;
    char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
    AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must have shape %s (%s), got %s", i, v->name,
              role, ampc_shape_str(&w, a, sizeof a), form, ampc_shape_str(&v->shape, b, sizeof b));
    return false;
}

/* ---- Attention ------------------------------------------------------------------------------ */

/* Sizes of one Attention node, read from Q, K, V and the head-count attributes. */
typedef struct att_dims {
    int64_t batch, q_heads, kv_heads, q_seq, kv_seq, head, v_head;
} att_dims;

/* For 3-D inputs: the head count of attribute `attr` and the per-head size of input i's dim 2. */
static bool split_heads(ampc_graph *g, const ampc_node *n, int32_t i, const char *attr,
                        int64_t heads, int64_t *head_size) {
    const ampc_value *v = n->inputs[i];
    if (heads <= 0) {
        AMPC_FAIL(g, n, AMPC_E_ATTR,
                  "attribute '%s' must be set (> 0) when Q, K and V are 3-D, got %lld", attr,
                  (long long)heads);
        return false;
    }
    if (v->shape.dims[2] % heads) {
        AMPC_FAIL(g, n, AMPC_E_SHAPE, "dim 2 of input %d '%s' (%lld) must be a multiple of %s %lld",
                  i, v->name, (long long)v->shape.dims[2], attr, (long long)heads);
        return false;
    }
    *head_size = v->shape.dims[2] / heads;
    return true;
}

static ampc_status attention_dims(ampc_graph *g, const ampc_node *n, att_dims *d) {
    static const char *const role[3] = {"Q", "K", "V"};
    const ampc_value *q = n->inputs[0], *k = n->inputs[1], *v = n->inputs[2];
    const int32_t rank = q->shape.rank;
    for (int32_t i = 0; i < 3; i++) {
        const ampc_value *x = n->inputs[i];
        if ((i == 0 && rank != 3 && rank != 4) || (i > 0 && x->shape.rank != rank)) {
            char s[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must have rank %s, got %s", i,
                             x->name, role[i],
                             i == 0      ? "3 or 4"
                             : rank == 3 ? "3, as Q has"
                                         : "4, as Q has",
                             ampc_shape_str(&x->shape, s, sizeof s));
        }
    }
    int64_t qh, kvh;
    if (!read_int(g, n, "q_num_heads", 0, &qh) || !read_int(g, n, "kv_num_heads", 0, &kvh))
        return AMPC_E_ATTR;
    d->batch = q->shape.dims[0];
    for (int32_t i = 1; i < 3; i++)
        if (n->inputs[i]->shape.dims[0] != d->batch)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input %d '%s' (%s) has batch size (dim 0) %lld, but Q has %lld", i,
                             n->inputs[i]->name, role[i], (long long)n->inputs[i]->shape.dims[0],
                             (long long)d->batch);
    int64_t k_head;
    if (rank == 3) {
        d->q_seq = q->shape.dims[1];
        d->kv_seq = k->shape.dims[1];
        d->q_heads = qh;
        d->kv_heads = kvh;
        if (!split_heads(g, n, 0, "q_num_heads", qh, &d->head) ||
            !split_heads(g, n, 1, "kv_num_heads", kvh, &k_head) ||
            !split_heads(g, n, 2, "kv_num_heads", kvh, &d->v_head))
            return AMPC_E_SHAPE;
    } else {
        d->q_heads = q->shape.dims[1];
        d->kv_heads = k->shape.dims[1];
        d->q_seq = q->shape.dims[2];
        d->kv_seq = k->shape.dims[2];
        d->head = q->shape.dims[3];
        k_head = k->shape.dims[3];
        d->v_head = v->shape.dims[3];
        if (v->shape.dims[1] != d->kv_heads)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 2 '%s' (V) has %lld heads (dim 1), but K has %lld", v->name,
                             (long long)v->shape.dims[1], (long long)d->kv_heads);
        if ((qh && qh != d->q_heads) || (kvh && kvh != d->kv_heads))
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attributes q_num_heads %lld and kv_num_heads %lld disagree with the "
                             "4-D inputs, which have %lld and %lld heads (dim 1 of Q and K)",
                             (long long)qh, (long long)kvh, (long long)d->q_heads,
                             (long long)d->kv_heads);
    }
    if (k_head != d->head)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' (K) has head size %lld, but Q has %lld (they are "
                         "multiplied together)",
                         k->name, (long long)k_head, (long long)d->head);
    const int64_t v_seq = v->shape.dims[rank == 3 ? 1 : 2];
    if (v_seq != d->kv_seq)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 2 '%s' (V) has sequence length %lld, but K has %lld", v->name,
                         (long long)v_seq, (long long)d->kv_seq);
    if (d->kv_heads <= 0 || d->q_heads % d->kv_heads)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "q_num_heads %lld must be a multiple of kv_num_heads %lld (grouped-query "
                         "attention shares each kv head among q_num_heads / kv_num_heads query "
                         "heads)",
                         (long long)d->q_heads, (long long)d->kv_heads);
    return AMPC_OK;
}

/* The scalar attributes of Attention. */
static ampc_status attention_attrs(ampc_graph *g, const ampc_node *n) {
    int64_t causal, mode, prec, left, right;
    if (!read_int(g, n, "is_causal", 0, &causal) ||
        !read_int(g, n, "qk_matmul_output_mode", 0, &mode) ||
        !read_int(g, n, "softmax_precision", 1, &prec) ||
        !read_int(g, n, "left_window_size", -1, &left) ||
        !read_int(g, n, "right_window_size", -1, &right))
        return AMPC_E_ATTR;
    if (causal != 0 && causal != 1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'is_causal' must be 0 or 1, got %lld",
                         (long long)causal);
    if (mode < 0 || mode > 3)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'qk_matmul_output_mode' must be 0 (Q*K^T), 1 (after softcap), "
                         "2 (after the mask) or 3 (after softmax), got %lld",
                         (long long)mode);
    ampc_dtype pt =
        prec == (int32_t)prec ? ampc_dtype_from_onnx((int32_t)prec) : AMPC_DTYPE_UNDEFINED;
    if (!ampc_dtype_is_float(pt))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'softmax_precision' must be an ONNX floating-point data type "
                         "(1 float, 10 float16, 11 double, 16 bfloat16), got %lld",
                         (long long)prec);
    if (left < -1 || right < -1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attributes 'left_window_size' and 'right_window_size' must be -1 "
                         "(unbounded) or >= 0, got %lld and %lld",
                         (long long)left, (long long)right);
    for (int32_t i = 0; i < 2; i++) {
        const char *name = i ? "softcap" : "scale";
        const ampc_attr *a = ampc_ir_attr_find(n, name);
        if (!a) continue;
        if (a->kind != AMPC_ATTR_FLOAT)
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be of type float", name);
        if (i == 0 && !(a->f > 0))
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'scale' must be positive (Q and K are each multiplied by "
                             "its square root), got %g",
                             (double)a->f);
        if (i == 1 && !(a->f >= 0))
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'softcap' must be >= 0 (0: no softcap), got %g",
                             (double)a->f);
    }
    return AMPC_OK;
}

/* Attention: checks dtypes (Q, K, past_key share one float type; V and past_value another; the
 * mask is bool or numeric; nonpad_kv_seqlen is i64), the head layout, the cache, the mask's
 * broadcast and the attributes, then sets Y, present_key, present_value and qk_matmul_output. */
ampc_status ampc_infer_attention(ampc_graph *g, ampc_node *n) {
    const ampc_value *q = n->inputs[0], *v = n->inputs[2];
    const ampc_value *mask = opt_input(n, 3), *pk = opt_input(n, 4), *pv = opt_input(n, 5);
    const ampc_value *nonpad = opt_input(n, 6);
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT) || !ampc_infer_same_dtype(g, n, 0, 1) ||
        !ampc_infer_check_dtype(g, n, 2, DT_FLOAT))
        return AMPC_E_DTYPE;
    if (pk && !ampc_infer_same_dtype(g, n, 0, 4)) return AMPC_E_DTYPE;
    if (pv && !ampc_infer_same_dtype(g, n, 2, 5)) return AMPC_E_DTYPE;
    if (mask && !ampc_infer_check_dtype(g, n, 3, DT_ANY)) return AMPC_E_DTYPE;
    if (nonpad && nonpad->dtype != AMPC_DTYPE_I64)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 6 '%s' (nonpad_kv_seqlen) must be i64, got %s",
                         nonpad->name, ampc_dtype_name(nonpad->dtype));
    att_dims d = {0};
    ampc_status st = attention_dims(g, n, &d);
    if (st == AMPC_OK) st = attention_attrs(g, n);
    if (st != AMPC_OK) return st;

    /* the past cache */
    if (!pk != !pv)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "inputs 4 (past_key) and 5 (past_value) must be given together, got "
                         "only %s",
                         pk ? "past_key" : "past_value");
    int64_t past = 0;
    if (pk) {
        past = pk->shape.rank == 4 ? pk->shape.dims[2] : 0;
        const char *f = "[batch_size, kv_num_heads, past_sequence_length, head_size]";
        if (!check_shape(g, n, 4, "past_key", (int64_t[]){d.batch, d.kv_heads, past, d.head}, 4, f))
            return AMPC_E_SHAPE;
        f = "[batch_size, kv_num_heads, past_sequence_length, v_head_size]";
        if (!check_shape(g, n, 5, "past_value", (int64_t[]){d.batch, d.kv_heads, past, d.v_head}, 4,
                         f))
            return AMPC_E_SHAPE;
    }
    if (nonpad) {
        if (pk)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 6 (nonpad_kv_seqlen) describes an external cache and cannot "
                             "be combined with past_key and past_value");
        if (!check_shape(g, n, 6, "nonpad_kv_seqlen", (int64_t[]){d.batch}, 1, "[batch_size]"))
            return AMPC_E_SHAPE;
    }
    const int64_t total = past + d.kv_seq;

    /* the mask: right-aligned broadcast to [batch, q_heads, q_seq, total]; last dim <= total */
    if (mask) {
        const int64_t target[4] = {d.batch, d.q_heads, d.q_seq, total};
        const int32_t mr = mask->shape.rank;
        bool ok = mr >= 1 && mr <= 4 && mask->shape.dims[mr - 1] <= total;
        for (int32_t i = 0; ok && i < mr - 1; i++) {
            int64_t m = mask->shape.dims[i], t = target[4 - mr + i];
            ok = m == 1 || m == t;
        }
        if (!ok) {
            char ms[AMPC_SHAPE_STR_MAX], ts[AMPC_SHAPE_STR_MAX];
            ampc_shape tsh = {.rank = 4, .dims = {d.batch, d.q_heads, d.q_seq, total}};
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 3 '%s' (attn_mask) must broadcast to %s ([batch_size, "
                             "q_num_heads, q_sequence_length, total_sequence_length]; its last "
                             "dim may be shorter and is then padded as masked), got %s",
                             mask->name, ampc_shape_str(&tsh, ts, sizeof ts),
                             ampc_shape_str(&mask->shape, ms, sizeof ms));
        }
    }

    ampc_shape y = {.rank = 4, .dims = {d.batch, d.q_heads, d.q_seq, d.v_head}};
    if (q->shape.rank == 3)
        y = (ampc_shape){.rank = 3, .dims = {d.batch, d.q_seq, d.q_heads * d.v_head}};
    ampc_infer_set(n, 0, q->dtype, &y);
    ampc_shape s = {.rank = 4, .dims = {d.batch, d.kv_heads, total, d.head}};
    if (n->n_outputs > 1) ampc_infer_set(n, 1, q->dtype, &s);
    s.dims[3] = d.v_head;
    if (n->n_outputs > 2) ampc_infer_set(n, 2, v->dtype, &s);
    s = (ampc_shape){.rank = 4, .dims = {d.batch, d.q_heads, d.q_seq, total}};
    if (n->n_outputs > 3) ampc_infer_set(n, 3, q->dtype, &s);
    return AMPC_OK;
}

/* ---- ampc.FusedAttention -------------------------------------------------------------------- */

/* Reads an ints attribute of exactly `count` non-negative entries into out. */
static bool read_ints(ampc_graph *g, const ampc_node *n, const char *name, int32_t count,
                      int64_t *out) {
    int32_t got;
    const int64_t *v = ampc_ir_attr_ints(g, n, name, &got);
    bool ok = v && got == count;
    for (int32_t i = 0; ok && i < count; i++) ok = v[i] >= 0, out[i] = v[i];
    if (!ok)
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be %d non-negative ints, got %d%s", name,
                  count, v ? got : 0, v && got == count ? " with a negative one" : "");
    return ok;
}

/* Input i, read as [B, H, S, D] from element `off` through strides st (b, h, s, d), must hold
 * every element. */
static bool strided_fits(ampc_graph *g, const ampc_node *n, int32_t i, const char *attr,
                         int64_t off, const int64_t st[4], const int64_t dims[4]) {
    const ampc_value *v = n->inputs[i];
    int64_t last = off;
    for (int32_t d = 0; d < 4; d++) last += (dims[d] - 1) * st[d];
    if (last < ampc_ir_numel(v)) return true;
    AMPC_FAIL(g, n, AMPC_E_SHAPE,
              "input %d '%s' has %lld elements, but %s reads [%lld,%lld,%lld,%lld] up to element "
              "%lld",
              i, v->name, (long long)ampc_ir_numel(v), attr, (long long)dims[0],
              (long long)dims[1], (long long)dims[2], (long long)dims[3], (long long)last);
    return false;
}

/* ampc.FusedAttention: one float dtype for Q, K, V and the mask; dims all > 0; kv_group divides
 * H (K and V have H / kv_group heads); each input holds what its offset and strides read; the
 * mask broadcasts to [B, H, Sq, Sk] (with mask_period W: its first dim has W entries, batch b
 * reading entry b % W); causal = 1 (the mask implied) excludes a mask input, its causal_offset
 * within [-Sq, Sk] (beyond, every key or none is masked). Y is [B, H, Sq, Dv], stored as
 * merge_heads or y_perm and y_shape say (ir/attention.h). */
ampc_status ampc_infer_fused_attention(ampc_graph *g, ampc_node *n) {
    const ampc_value *mask = opt_input(n, 3);
    for (int32_t i = 1; i < n->n_inputs; i++)
        if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    int64_t dm[6], qs[4], ks[4], vs[4], ys[4], merge, group, off[3] = {0, 0, 0};
    if (!read_ints(g, n, "dims", 6, dm) || !read_ints(g, n, "q_strides", 4, qs) ||
        !read_ints(g, n, "k_strides", 4, ks) || !read_ints(g, n, "v_strides", 4, vs) ||
        !read_int(g, n, "merge_heads", 0, &merge) || !read_int(g, n, "kv_group", 1, &group) ||
        (ampc_ir_attr_find(n, "offsets") && !read_ints(g, n, "offsets", 3, off)))
        return AMPC_E_ATTR;
    for (int32_t i = 0; i < 6; i++)
        if (dm[i] == 0)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'dims' [B, H, Sq, Sk, D, Dv] must be positive, got 0 at %d",
                             i);
    if (group < 1 || dm[1] % group)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'kv_group' (query heads a K/V head serves) must divide the "
                         "%lld heads, got %lld", (long long)dm[1], (long long)group);
    const int64_t kvh = dm[1] / group; /* K and V heads */
    if (!strided_fits(g, n, 0, "q_strides", off[0], qs, (int64_t[]){dm[0], dm[1], dm[2], dm[4]}) ||
        !strided_fits(g, n, 1, "k_strides", off[1], ks, (int64_t[]){dm[0], kvh, dm[3], dm[4]}) ||
        !strided_fits(g, n, 2, "v_strides", off[2], vs, (int64_t[]){dm[0], kvh, dm[3], dm[5]}))
        return AMPC_E_SHAPE;
    const ampc_shape scores = {.rank = 4, .dims = {dm[0], dm[1], dm[2], dm[3]}};
    int64_t period;
    if (!read_int(g, n, "mask_period", 0, &period)) return AMPC_E_ATTR;
    if (ampc_ir_attr_find(n, "mask_period") &&
        (!mask || mask->shape.rank != 4 || period < 1 || mask->shape.dims[0] != period ||
         dm[0] % period))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'mask_period' %lld needs a mask of rank 4 whose first dim has "
                         "that many entries, dividing B = %lld", (long long)period,
                         (long long)dm[0]);
    bool ok = !mask || mask->shape.rank <= 4;
    for (int32_t i = period ? 1 : 0; ok && mask && i < mask->shape.rank; i++) {
        const int64_t m = mask->shape.dims[i], t = scores.dims[4 - mask->shape.rank + i];
        ok = m == 1 || m == t;
    }
    if (!ok) {
        char ms[AMPC_SHAPE_STR_MAX], ts[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 3 '%s' (mask) must broadcast to the scores %s "
                         "([B, H, Sq, Sk]), got %s", mask->name,
                         ampc_shape_str(&scores, ts, sizeof ts),
                         ampc_shape_str(&mask->shape, ms, sizeof ms));
    }
    int64_t causal, coff;
    if (!read_int(g, n, "causal", 0, &causal) || !read_int(g, n, "causal_offset", 0, &coff))
        return AMPC_E_ATTR;
    if (causal != 0 && causal != 1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'causal' must be 0 or 1, got %lld",
                         (long long)causal);
    if (causal && mask)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'causal' = 1 implies the mask, so input 3 '%s' must be absent",
                         mask->name);
    if (!causal && ampc_ir_attr_find(n, "causal_offset"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'causal_offset' needs causal = 1");
    if (coff < -dm[2] || coff > dm[3])
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'causal_offset' must be within [-Sq, Sk] = [%lld, %lld], got "
                         "%lld", (long long)-dm[2], (long long)dm[3], (long long)coff);
    ampc_shape y;
    const char *bad = ampc_attention_y_layout(n, dm, ys, &y);
    if (bad) return AMPC_FAIL(g, n, AMPC_E_ATTR, "output layout: %s", bad);
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &y);
    return AMPC_OK;
}

/* ---- RotaryEmbedding ------------------------------------------------------------------------ */

/* RotaryEmbedding: checks X's layout, the head and rotary sizes and the cache shapes (which depend
 * on whether position_ids is given); Y takes X's dtype and shape. */
ampc_status ampc_infer_rotary_embedding(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *pos = opt_input(n, 3);
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT) || !ampc_infer_same_dtype(g, n, 0, 1) ||
        !ampc_infer_same_dtype(g, n, 0, 2))
        return AMPC_E_DTYPE;
    if (pos && pos->dtype != AMPC_DTYPE_I64)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 3 '%s' (position_ids) must be i64, got %s",
                         pos->name, ampc_dtype_name(pos->dtype));
    const int32_t rank = x->shape.rank;
    char s[AMPC_SHAPE_STR_MAX];
    if (rank != 3 && rank != 4)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must be [batch, num_heads, seq, head_size] or [batch, seq, "
                         "hidden_size], got %s",
                         x->name, ampc_shape_str(&x->shape, s, sizeof s));
    int64_t heads, interleaved, rot;
    if (!read_int(g, n, "num_heads", 0, &heads) ||
        !read_int(g, n, "interleaved", 0, &interleaved) ||
        !read_int(g, n, "rotary_embedding_dim", 0, &rot))
        return AMPC_E_ATTR;
    if (interleaved != 0 && interleaved != 1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'interleaved' must be 0 or 1, got %lld",
                         (long long)interleaved);
    const int64_t batch = x->shape.dims[0], seq = x->shape.dims[rank == 4 ? 2 : 1];
    int64_t head;
    if (rank == 3) {
        if (heads <= 0)
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'num_heads' must be set (> 0) when input 0 is 3-D, got "
                             "%lld",
                             (long long)heads);
        if (x->shape.dims[2] % heads)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "dim 2 of input 0 '%s' (%lld) must be a multiple of num_heads %lld",
                             x->name, (long long)x->shape.dims[2], (long long)heads);
        head = x->shape.dims[2] / heads;
    } else {
        head = x->shape.dims[3];
        if (heads && heads != x->shape.dims[1])
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'num_heads' %lld disagrees with dim 1 of input 0 '%s' %s",
                             (long long)heads, x->name, ampc_shape_str(&x->shape, s, sizeof s));
    }
    if (rot == 0) rot = head;
    if (rot < 0 || rot > head || rot % 2)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "the rotary embedding dim (attribute 'rotary_embedding_dim', 0: the head "
                         "size) must be even and in [0, head_size %lld], got %lld",
                         (long long)head, (long long)rot);
    if (pos) {
        if (!check_shape(g, n, 3, "position_ids", (int64_t[]){batch, seq}, 2, "[batch, seq]"))
            return AMPC_E_SHAPE;
        const ampc_value *c = n->inputs[1];
        if (c->shape.rank != 2)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 1 '%s' (cos_cache) must be 2-D, [max_position_id + 1, "
                             "rotary_embedding_dim / 2], when position_ids is given, got %s",
                             c->name, ampc_shape_str(&c->shape, s, sizeof s));
        const int64_t max_pos = c->shape.dims[0]; /* sin_cache must match it */
        for (int32_t i = 1; i <= 2; i++)
            if (!check_shape(g, n, i, i == 1 ? "cos_cache" : "sin_cache",
                             (int64_t[]){max_pos, rot / 2}, 2,
                             "[max_position_id + 1, rotary_embedding_dim / 2]"))
                return AMPC_E_SHAPE;
    } else {
        for (int32_t i = 1; i <= 2; i++)
            if (!check_shape(g, n, i, i == 1 ? "cos_cache" : "sin_cache",
                             (int64_t[]){batch, seq, rot / 2}, 3,
                             "[batch, seq, rotary_embedding_dim / 2] without position_ids"))
                return AMPC_E_SHAPE;
    }
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}
