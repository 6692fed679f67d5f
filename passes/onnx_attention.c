/*
 * onnx_attention.c — ONNX's Attention op (opset 23) as ampc.FusedAttention, for a GPU build.
 *
 * The op says in one node what exporters otherwise write out (Q K^T, a scale, a mask, Softmax,
 * a product with V); ampc's attention kernels compute that as ampc.FusedAttention, which reads Q,
 * K and V through element steps and adds one additive mask. The node becomes:
 *
 *   present_key / present_value   Concat(past, K as [B, KV heads, S, D]) along the sequence when
 *                                 a past cache is given; the new K and V in that layout (a
 *                                 Reshape and Transpose of the 3-D form) when only the present is
 *                                 read. The kernel reads K and V from the present cache when there
 *                                 is a past, else from the inputs as they are (3-D through steps).
 *   the mask                      one additive bias in Q's type, broadcast to [B, H, Sq, T]:
 *                                 attn_mask (bool: 0 where true, -inf where false; numeric: as
 *                                 is; padded with -inf to T columns when shorter), and -inf where
 *                                 is_causal, the sliding window or nonpad_kv_seqlen exclude a key
 *                                 (the rules of ir/ref/attention.c). Without nonpad_kv_seqlen
 *                                 the exclusions are a constant [Sq, T]; with it they are computed
 *                                 on the GPU from the lengths, a column of query and a row of key
 *                                 positions (Add, Sub, comparisons, Or, Where).
 *   Y                             ampc.FusedAttention: kv_group = q_heads / kv_heads, the scale
 *                                 given or 1 / sqrt(head size), `safe` (a row that attends to no
 *                                 key gives zeros, as the op's definition says), the heads merged
 *                                 back for 3-D inputs.
 *
 * Rounding: the definition scales Q and K each by sqrt(scale) and rounds the scores, biased
 * scores and probabilities to Q's type (or softmax_precision); the kernel multiplies the f32
 * dot product by scale once and runs the softmax in f32, as it does for every attention
 * fuse-attention finds.
 *
 * What the kernel does not compute, softcap or a qk_matmul_output that is read, makes the node
 * its steps written out instead: Q and K (the present cache, each K/V head repeated for the
 * query heads it serves) times sqrt(scale), MatMul, softcap as Div, Tanh and Mul, the bias
 * above added, Softmax (between Casts to softmax_precision), a row the bias masks everywhere
 * zeroed (ReduceMax, Equal, Where), MatMul by V; each node rounds as the definition does. The
 * reference evaluator runs the node as written (the pass runs only when
 * ampc_pipeline_options.gpu_build is set).
 */
#include "passes.h"
#include "ir/activation.h"
#include "ir/attention.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest constant mask [Sq, T] the pass writes (elements). */
enum { MAX_BIAS = 1 << 24 };

typedef struct att {
    ampc_graph *g;
    ampc_node *n;
    char name[160];         /* the new nodes' name: the node's with a suffix */
    ampc_dtype t;           /* Q's dtype */
    bool rank3;
    int64_t B, H, KH, Sq, S, past, T, D, Dv;
    ampc_onnx_attention at;
    bool written_out;       /* softcap, or qk_matmul_output read: the op's steps as nodes */
} att;

static ampc_value *in_of(const ampc_node *n, int32_t i) {
    return i < n->n_inputs ? n->inputs[i] : NULL;
}

static ampc_value *node1(att *a, ampc_opcode op, ampc_value *const *in, int32_t n_in,
                         const ampc_attr *at, int32_t n_at) {
    return ampc_pass_node1(a->g, op, a->name, in, n_in, at, n_at);
}

static ampc_value *const_i64s(att *a, int32_t rank, const int64_t *dims, const int64_t *v) {
    return ampc_pass_const_i64s(a->g, rank, dims, v);
}

static ampc_value *binary(att *a, ampc_opcode op, ampc_value *x, ampc_value *y) {
    return ampc_pass_binary(a->g, op, a->name, x, y);
}

/* A scalar of Q's type. */
static ampc_value *const_scalar(att *a, double v) {
    uint64_t buf[2] = {0, 0};
    ampc_ref_store_f64(buf, a->t, 0, v);
    const ampc_shape s = {.rank = 0};
    return ampc_ir_const_new(a->g, NULL, a->t, &s, buf);
}

/* K or V (input i, head size d) as [B, KH, S, d]: itself when 4-D, else Transpose(Reshape(x,
 * [B, S, KH, d]), (0, 2, 1, 3)). */
static ampc_value *heads_first(att *a, int32_t i, int64_t d) {
    ampc_value *x = a->n->inputs[i];
    if (!a->rank3) return x;
    ampc_value *shape = const_i64s(a, 1, (int64_t[]){4}, (int64_t[]){a->B, a->S, a->KH, d});
    if (!shape) return NULL;
    ampc_value *in[2] = {x, shape};
    ampc_value *r = node1(a, AMPC_OP_RESHAPE, in, 2, NULL, 0);
    if (!r) return NULL;
    static const int64_t heads_out[4] = {0, 2, 1, 3};
    const ampc_attr perm = ampc_transpose_perm_attr(heads_out, 4);
    return node1(a, AMPC_OP_TRANSPOSE, &r, 1, &perm, 1);
}

/* The present cache of input i (1: K, 2: V; head size d): past followed by the new rows. */
static ampc_value *present(att *a, int32_t i, int64_t d) {
    ampc_value *cur = heads_first(a, i, d);
    ampc_value *past = in_of(a->n, i + 3);
    if (!cur || !past) return cur;
    ampc_value *in[2] = {past, cur};
    const ampc_attr axis = ampc_axis_attr_make(2);
    return node1(a, AMPC_OP_CONCAT, in, 2, &axis, 1);
}

/* Whether the constant rules (causal, windows; offset = the past's length) exclude key j of
 * query i. */
static bool excluded(const att *a, int64_t i, int64_t j) {
    const int64_t diff = i + a->past - j;
    return (a->at.causal && diff < 0) || (a->at.left >= 0 && diff > a->at.left) ||
           (a->at.right >= 0 && -diff > a->at.right);
}

/* attn_mask as an additive bias in Q's type over T columns, or NULL (*failed says why it is NULL:
 * no mask, or a node that could not be built). */
static ampc_value *mask_bias(att *a, bool *failed) {
    ampc_value *m = in_of(a->n, 3);
    *failed = false;
    if (!m) return NULL;
    ampc_value *ninf = const_scalar(a, -INFINITY);
    if (!ninf) {
        *failed = true;
        return NULL;
    }
    if (m->dtype == AMPC_DTYPE_BOOL) {
        ampc_value *zero = const_scalar(a, 0), *in[3] = {m, zero, ninf};
        m = zero ? node1(a, AMPC_OP_WHERE, in, 3, NULL, 0) : NULL;
    } else if (m->dtype != a->t) { /* a numeric mask of another type: its values in Q's */
        const ampc_attr to = ampc_cast_to_attr(a->t);
        m = node1(a, AMPC_OP_CAST, &m, 1, &to, 1);
    }
    const int32_t r = m ? m->shape.rank : 0;
    const int64_t last = m ? m->shape.dims[r - 1] : 0;
    if (m && last < a->T) { /* columns past the mask's count as masked */
        int64_t pads[2 * AMPC_MAX_RANK] = {0};
        pads[2 * r - 1] = a->T - last;
        ampc_value *p = const_i64s(a, 1, (int64_t[]){2 * r}, pads);
        ampc_value *in[3] = {m, p, ninf};
        m = p ? node1(a, AMPC_OP_PAD, in, 3, NULL, 0) : NULL;
    }
    *failed = !m;
    return m;
}

/* The exclusions with nonpad_kv_seqlen (lengths L[b]; offset L[b] - Sq): a bool [B, 1, Sq, T],
 * true where key j is excluded for query i of batch b. */
static ampc_value *excluded_by_lengths(att *a, ampc_value *lengths) {
    ampc_value *shape = const_i64s(a, 1, (int64_t[]){4}, (int64_t[]){a->B, 1, 1, 1});
    if (!shape) return NULL;
    ampc_value *rin[2] = {lengths, shape};
    ampc_value *len = node1(a, AMPC_OP_RESHAPE, rin, 2, NULL, 0);
    /* i + L[b] - Sq - j from a column of i - Sq and a row of j (no [Sq, T] constant) */
    int64_t *col = malloc((size_t)a->Sq * sizeof *col), *row = malloc((size_t)a->T * sizeof *row),
            *next_row = malloc((size_t)a->T * sizeof *next_row);
    ampc_value *ci = NULL, *rj = NULL, *next = NULL;
    if (col && row && next_row) {
        for (int64_t i = 0; i < a->Sq; i++) col[i] = i - a->Sq;
        for (int64_t j = 0; j < a->T; j++) row[j] = j, next_row[j] = j + 1;
        ci = const_i64s(a, 2, (int64_t[]){a->Sq, 1}, col);
        rj = const_i64s(a, 2, (int64_t[]){1, a->T}, row);
        next = const_i64s(a, 1, (int64_t[]){a->T}, next_row);
    }
    free(col), free(row), free(next_row);
    if (!len || !ci || !rj || !next) return NULL;
    ampc_value *diff = binary(a, AMPC_OP_SUB, binary(a, AMPC_OP_ADD, len, ci), rj);
    ampc_value *vin[2] = {next, len};
    ampc_value *out = diff ? node1(a, AMPC_OP_GREATER, vin, 2, NULL, 0) : NULL; /* j >= L[b] */
    const struct {
        bool on;
        ampc_opcode op;
        int64_t bound;
    } rules[3] = {{a->at.causal, AMPC_OP_LESS, 0},
                  {a->at.left >= 0, AMPC_OP_GREATER, a->at.left},
                  {a->at.right >= 0, AMPC_OP_LESS, -a->at.right}};
    for (int32_t k = 0; k < 3 && out; k++) {
        if (!rules[k].on) continue;
        ampc_value *b = const_i64s(a, 0, NULL, &rules[k].bound);
        ampc_value *cin[2] = {diff, b};
        ampc_value *c = b ? node1(a, rules[k].op, cin, 2, NULL, 0) : NULL;
        ampc_value *oin[2] = {out, c};
        out = c ? node1(a, AMPC_OP_OR, oin, 2, NULL, 0) : NULL;
    }
    return out;
}

/* The additive mask of the fused node, or NULL with *none set when nothing is masked. */
static ampc_value *bias(att *a, bool *none) {
    bool failed;
    ampc_value *m = mask_bias(a, &failed);
    *none = false;
    if (failed) return NULL;
    ampc_value *lengths = in_of(a->n, 6), *ninf = const_scalar(a, -INFINITY);
    const bool rules = a->at.causal || a->at.left >= 0 || a->at.right >= 0;
    if (!lengths && rules && a->Sq * a->T > MAX_BIAS) return NULL; /* too large a constant */
    if (lengths) {
        ampc_value *ex = excluded_by_lengths(a, lengths);
        ampc_value *zero = m ? m : const_scalar(a, 0);
        ampc_value *in[3] = {ex, ninf, zero};
        return ex && zero && ninf ? node1(a, AMPC_OP_WHERE, in, 3, NULL, 0) : NULL;
    }
    bool any = false;
    for (int64_t i = 0; rules && i < a->Sq && !any; i++)
        for (int64_t j = 0; j < a->T && !any; j++) any = excluded(a, i, j);
    if (!any) {
        *none = !m;
        return m;
    }
    const size_t cells = (size_t)(a->Sq * a->T);
    const ampc_shape s = {.rank = 2, .dims = {a->Sq, a->T}};
    ampc_value *c = NULL;
    if (!m) { /* the constant rules alone: a constant bias of 0 and -inf */
        void *data = calloc(cells, 8);
        if (!data) return NULL;
        for (size_t k = 0; k < cells; k++)
            ampc_ref_store_f64(data, a->t, (int64_t)k,
                               excluded(a, (int64_t)k / a->T, (int64_t)k % a->T) ? -INFINITY : 0);
        c = ampc_ir_const_new(a->g, NULL, a->t, &s, data);
        free(data);
        return c;
    }
    uint8_t *ex = malloc(cells);
    if (!ex) return NULL;
    for (size_t k = 0; k < cells; k++) ex[k] = excluded(a, (int64_t)k / a->T, (int64_t)k % a->T);
    c = ampc_ir_const_new(a->g, NULL, AMPC_DTYPE_BOOL, &s, ex);
    free(ex);
    ampc_value *in[3] = {c, ninf, m};
    return c && ninf ? node1(a, AMPC_OP_WHERE, in, 3, NULL, 0) : NULL;
}

/* Element steps of (b, h, s, d) in input x (heads h, sequence s, head size d): its 3-D form
 * [B, s, h * d] or its 4-D [B, h, s, d]. */
static void steps(bool rank3, int64_t h, int64_t s, int64_t d, int64_t st[4]) {
    if (rank3) {
        st[0] = s * h * d, st[1] = d, st[2] = h * d, st[3] = 1;
    } else {
        st[0] = h * s * d, st[1] = s * d, st[2] = d, st[3] = 1;
    }
}

/* ---- the op's steps written out (softcap, or qk_matmul_output read) ------------------------- */

static ampc_value *transposed(att *a, ampc_value *x, const int64_t *perm) {
    const ampc_attr p = ampc_transpose_perm_attr(perm, 4);
    return node1(a, AMPC_OP_TRANSPOSE, &x, 1, &p, 1);
}

static ampc_value *cast(att *a, ampc_value *x, ampc_dtype to) {
    if (!x || x->dtype == to) return x;
    const ampc_attr t = ampc_cast_to_attr(to);
    return node1(a, AMPC_OP_CAST, &x, 1, &t, 1);
}

/* K or V as [B, KH, T, d] read by each of the H query heads: [B, H, T, d], query head h reading
 * head h / (H / KH) (Reshape to [B, KH, 1, T, d], Expand, Reshape). */
static ampc_value *per_query_head(att *a, ampc_value *x, int64_t d) {
    if (!x || a->H == a->KH) return x;
    const int64_t G = a->H / a->KH;
    ampc_value *in[2] = {x, const_i64s(a, 1, (int64_t[]){5}, (int64_t[]){a->B, a->KH, 1, a->T, d})};
    ampc_value *r = node1(a, AMPC_OP_RESHAPE, in, 2, NULL, 0);
    ampc_value *ein[2] = {r, const_i64s(a, 1, (int64_t[]){5}, (int64_t[]){a->B, a->KH, G, a->T, d})};
    ampc_value *e = node1(a, AMPC_OP_EXPAND, ein, 2, NULL, 0);
    ampc_value *bin[2] = {e, const_i64s(a, 1, (int64_t[]){4}, (int64_t[]){a->B, a->H, a->T, d})};
    return node1(a, AMPC_OP_RESHAPE, bin, 2, NULL, 0);
}

/* Y and qk_matmul_output by the op's steps (ir/ref/attention.c): Q and K each times sqrt(scale),
 * their products, softcap (s / c, Tanh, times c), the bias added, Softmax in softmax_precision, a
 * row the bias masks everywhere zeroed, the product with V. out[3] is the scores after softcap
 * (modes 0 and 1), after the bias (mode 2) or the probabilities (mode 3). */
static ampc_status build_written_out(att *a, ampc_value *k4, ampc_value *v4, ampc_value **out) {
    static const int64_t heads_first[4] = {0, 2, 1, 3}, kt[4] = {0, 1, 3, 2};
    ampc_node *n = a->n;
    const double scale = a->at.has_scale ? a->at.scale : 1 / sqrt((double)a->D);
    ampc_value *q4 = n->inputs[0];
    if (a->rank3) {
        ampc_value *in[2] = {q4, const_i64s(a, 1, (int64_t[]){4},
                                            (int64_t[]){a->B, a->Sq, a->H, a->D})};
        q4 = transposed(a, node1(a, AMPC_OP_RESHAPE, in, 2, NULL, 0), heads_first);
    }
    ampc_value *root = const_scalar(a, sqrt(scale));
    ampc_value *qs = binary(a, AMPC_OP_MUL, q4, root);
    ampc_value *ks = binary(a, AMPC_OP_MUL, transposed(a, per_query_head(a, k4, a->D), kt), root);
    ampc_value *score = binary(a, AMPC_OP_MATMUL, qs, ks);
    if (a->at.softcap > 0) {
        ampc_value *c = const_scalar(a, a->at.softcap);
        ampc_value *in[1] = {binary(a, AMPC_OP_DIV, score, c)};
        score = binary(a, AMPC_OP_MUL, node1(a, AMPC_OP_TANH, in, 1, NULL, 0), c);
    }
    bool none;
    ampc_value *mask = bias(a, &none);
    if (!mask && !none) return AMPC_E_UNSUPPORTED;
    ampc_value *biased = mask ? binary(a, AMPC_OP_ADD, score, mask) : score;
    const ampc_dtype prec = a->at.softmax_precision ? ampc_dtype_from_onnx(a->at.softmax_precision)
                                                    : a->t;
    const ampc_attr last = ampc_axis_attr_make(-1);
    ampc_value *sin[1] = {cast(a, biased, prec)};
    ampc_value *prob = cast(a, node1(a, AMPC_OP_SOFTMAX, sin, 1, &last, 1), a->t);
    if (mask) { /* a row no key may be attended to: zero probabilities */
        ampc_value *rin[2] = {mask, const_i64s(a, 1, (int64_t[]){1}, (int64_t[]){-1})};
        ampc_value *rmax = node1(a, AMPC_OP_REDUCE_MAX, rin, 2, NULL, 0);
        ampc_value *w[3] = {binary(a, AMPC_OP_EQUAL, rmax, const_scalar(a, -INFINITY)),
                            const_scalar(a, 0), prob};
        prob = node1(a, AMPC_OP_WHERE, w, 3, NULL, 0);
    }
    ampc_value *y = binary(a, AMPC_OP_MATMUL, prob, per_query_head(a, v4, a->Dv));
    if (y && a->rank3) {
        ampc_value *in[2] = {transposed(a, y, heads_first),
                             const_i64s(a, 1, (int64_t[]){3},
                                        (int64_t[]){a->B, a->Sq, a->H * a->Dv})};
        y = node1(a, AMPC_OP_RESHAPE, in, 2, NULL, 0);
    }
    if (!(out[0] = y)) return AMPC_E_UNSUPPORTED;
    if (n->n_outputs > 3 && n->outputs[3]) {
        const int64_t mode = a->at.qk_mode;
        out[3] = mode == 3 ? prob : mode == 2 ? biased : score;
        if (!out[3]) return AMPC_E_UNSUPPORTED;
    }
    return AMPC_OK;
}

/* Builds the replacement of a->n into out[0 .. n_outputs): AMPC_E_UNSUPPORTED when a node could
 * not be built. */
static ampc_status build(att *a, ampc_value **out) {
    ampc_node *n = a->n;
    const bool want_k = n->n_outputs > 1 && n->outputs[1], want_v = n->n_outputs > 2 && n->outputs[2];
    ampc_value *pk = NULL, *pv = NULL;
    const bool need_k = a->past || want_k || a->written_out, need_v = a->past || want_v ||
                                                                        a->written_out;
    if (need_k) pk = present(a, 1, a->D);
    if (need_v) pv = present(a, 2, a->Dv);
    if ((need_k && !pk) || (need_v && !pv)) return AMPC_E_UNSUPPORTED;
    if (n->n_outputs > 1) out[1] = pk;
    if (n->n_outputs > 2) out[2] = pv;
    if (a->written_out) return build_written_out(a, pk, pv, out);
    bool none;
    ampc_value *mask = bias(a, &none);
    if (!mask && !none) return AMPC_E_UNSUPPORTED;

    ampc_attention_form f = {.dims = {a->B, a->H, a->Sq, a->T, a->D, a->Dv},
                             .scale = a->at.has_scale ? a->at.scale : 1 / sqrt((double)a->D),
                             .safe = true, .merge_heads = a->rank3, .group = a->H / a->KH};
    steps(a->rank3, a->H, a->Sq, a->D, f.qs);
    steps(a->rank3 && !a->past, a->KH, a->past ? a->T : a->S, a->D, f.ks);
    steps(a->rank3 && !a->past, a->KH, a->past ? a->T : a->S, a->Dv, f.vs);
    ampc_attr *as;
    int32_t n_as;
    if (ampc_attention_form_attrs(a->g, &f, &as, &n_as) != AMPC_OK) return AMPC_E_OOM;
    ampc_value *in[4] = {n->inputs[0], a->past ? pk : n->inputs[1], a->past ? pv : n->inputs[2],
                         mask};
    return (out[0] = node1(a, AMPC_OP_FUSED_ATTENTION, in, mask ? 4 : 3, as, n_as))
               ? AMPC_OK
               : AMPC_E_UNSUPPORTED;
}

/* Whether value v is read: by a live node or as a graph output. */
static bool read(const ampc_graph *g, const ampc_value *v) {
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return true;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *u = g->nodes[i];
        for (int32_t k = 0; !u->dead && k < u->n_inputs; k++)
            if (u->inputs[k] == v) return true;
    }
    return false;
}

/* Reads node n's sizes into a; false when it asks for what the kernel does not compute. */
static bool sizes(const ampc_graph *g, ampc_node *n, att *a) {
    const ampc_value *q = n->inputs[0], *k = n->inputs[1], *v = n->inputs[2];
    const ampc_value *past = in_of(n, 4);
    a->at = ampc_onnx_attention_of(n);
    a->written_out =
        a->at.softcap > 0 || (n->n_outputs > 3 && n->outputs[3] && read(g, n->outputs[3]));
    a->t = q->dtype;
    a->rank3 = q->shape.rank == 3;
    a->B = q->shape.dims[0];
    if (a->rank3) {
        a->H = a->at.q_heads, a->KH = a->at.kv_heads;
        a->Sq = q->shape.dims[1], a->S = k->shape.dims[1];
        a->D = q->shape.dims[2] / a->H, a->Dv = v->shape.dims[2] / a->KH;
    } else {
        a->H = q->shape.dims[1], a->KH = k->shape.dims[1];
        a->Sq = q->shape.dims[2], a->S = k->shape.dims[2];
        a->D = q->shape.dims[3], a->Dv = v->shape.dims[3];
    }
    a->past = past ? past->shape.dims[2] : 0;
    a->T = a->past + a->S;
    return a->H > 0 && a->KH > 0 && a->H % a->KH == 0;
}

/* Node n's replacement into out (ampc_pass_replace_each). */
static ampc_status rewrite(ampc_graph *g, ampc_node *n, ampc_value **out) {
    att a = {.g = g, .n = n};
    if (n->n_outputs > 4 || !sizes(g, n, &a)) return AMPC_E_UNSUPPORTED;
    snprintf(a.name, sizeof a.name, "%.140s/fused", n->name);
    return build(&a, out);
}

static bool is_attention(const ampc_node *n) { return n->op == AMPC_OP_ATTENTION; }

ampc_status ampc_pass_onnx_attention(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    if (!cx->opt->gpu_build) return AMPC_OK;
    return ampc_pass_replace_each(g, is_attention, rewrite, "rewriting Attention", changed);
}
