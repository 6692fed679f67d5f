/*
 * precision.c — --precision fp16|bf16: f32 tensors move to the low type where the op table lets
 * them, so contractions and convolutions run on f16/bf16 tensor cores and every tensor between
 * them costs half the bytes.
 *
 * The op table's prec column (ops.def) holds each op's policy:
 *   LOW     contractions and convolutions: their f32 inputs are converted, always;
 *   FOLLOW  elementwise ops, data movement, pooling, normalisations and softmax (whose kernels keep
 *           sums and statistics in f32 whatever the storage): under fp16 the node runs low when
 *           at least one of its (non-constant) float inputs arrives in the low type; under bf16
 *           only when none arrives in f32 (the widest type wins, as in PyTorch's autocast);
 *   NORM    LayerNormalization and RMSNormalization: FOLLOW under fp16, F32 under bf16. With 8
 *           bits of mantissa a transformer's residual stream, normalised and added to a dozen
 *           times, drifts by 1e-2 of its scale (BERT-base measured 1.7e-2); in f32 (and with the
 *           widest-type rule keeping the residual Adds f32) it does not. f16's 11 bits hold it;
 *   F32     exp/log/pow-heavy ops and long sums whose results leave f16's range, losses, control
 *           flow, ops whose dtype comes from an attribute: inputs that arrive low go back to f32.
 * A node also stays f32 when keep_fp32 names it or its op, when a constant input holds a finite
 * value beyond the low type's range (f16: 65504; the constant would become infinity), and when its
 * inference refuses the low type for an input (the node then has its f32 inputs back).
 *
 * Only tensors that were f32 move: f64 stays what the model asked for, and f16 or bf16 tensors of
 * the model are already low. Inputs that set shapes, axes or scales (the op table's compile-time
 * inputs) never move. Constants are converted here, once, at compile time; other values get a Cast
 * node, one per value and direction however many nodes read it. A Cast of the model to f32 whose
 * input arrives low becomes a Cast to the low type, which is how an exporter's "f32 islands" in an
 * f16 model (torch writes LayerNormalization and attention of a half() BERT in f32) join the rest.
 * Graph inputs and outputs keep their dtypes: casts at the edges. Last, casts that do nothing
 * (to the type they read) and round trips through a wider type (f16 -> f32 -> f16) are removed.
 *
 * Each node's reason is left in node->prec_why for --report and `ampc inspect`.
 */
#include "passes.h"
#include "ir/activation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct prec_ctx {
    ampc_graph *g;
    const ampc_pipeline_options *o; /* keep_fp32, auto_fp32 */
    ampc_dtype low;
    float max_low;         /* the largest finite value of the low type */
    int32_t n_orig;        /* values that existed when the pass began (ids below this) */
    ampc_dtype *orig;      /* their dtypes then */
    ampc_value **as_low;   /* memo: the low-type copy of an f32 value (Cast output or constant) */
    ampc_value **as_f32;   /* memo: the f32 copy of a value the pass made low */
    bool *read_low;        /* a value some node that may run low reads (by id) */
    float *max_abs;        /* memo: the largest finite magnitude of an f32 constant (-1: not yet) */
    bool changed;
} prec_ctx;

static bool was_f32(const prec_ctx *c, const ampc_value *v) {
    return v && v->id < c->n_orig && c->orig[v->id] == AMPC_DTYPE_F32;
}

/* Input i of n is data the precision may move (not a shape, axes or scales operand). */
static bool movable_input(const ampc_node *n, int32_t i) {
    const ampc_op_info *info = ampc_op_get(n->op);
    if (!n->inputs[i] || (info->traits & T_SHAPEONLY)) return false;
    return i >= 32 || !(info->const_inputs & (1u << i));
}

/* ---- the decision --------------------------------------------------------------------------- */

static bool named_keep(const ampc_pipeline_options *o, const ampc_node *n) {
    for (int32_t i = 0; i < o->n_keep_fp32; i++)
        if (!strcmp(o->keep_fp32[i], n->name) || !strcmp(o->keep_fp32[i], ampc_op_get(n->op)->onnx))
            return true;
    return false;
}

static bool named_auto(const ampc_pipeline_options *o, const ampc_node *n) {
    for (int32_t i = 0; i < o->n_auto_fp32; i++)
        if (!strcmp(o->auto_fp32[i], n->name)) return true;
    return false;
}

/* The largest finite magnitude in an f32 constant (computed once per constant). */
static float max_finite(const prec_ctx *c, const ampc_value *v) {
    if (c->max_abs[v->id] >= 0) return c->max_abs[v->id];
    const float *x = v->data;
    float m = 0;
    for (int64_t i = 0, k = ampc_ir_numel(v); i < k; i++)
        if (isfinite(x[i]) && fabsf(x[i]) > m) m = fabsf(x[i]);
    return c->max_abs[v->id] = m;
}

/* The op's policy in this pass's low type (NORM resolved). */
static ampc_prec_policy policy_of(const prec_ctx *c, ampc_opcode op) {
    ampc_prec_policy p = ampc_op_get(op)->prec;
    if (p == PREC_NORM) return c->low == AMPC_DTYPE_BF16 ? PREC_F32 : PREC_FOLLOW;
    return p;
}

/* Why node n computes where it does; *move: it goes to the low type. */
static ampc_prec_why decide(const prec_ctx *c, const ampc_node *n, bool *move) {
    *move = false;
    if (named_keep(c->o, n)) return PREC_WHY_KEEP;
    if (named_auto(c->o, n)) return PREC_WHY_AUTO;
    ampc_prec_policy policy = policy_of(c, n->op);
    if (policy == PREC_F32) return PREC_WHY_POLICY;
    for (int32_t i = 0; i < n->n_outputs; i++) /* a value the builder already evaluated */
        if (n->outputs[i]->data) return PREC_WHY_POLICY;
    bool arrives_low = false, arrives_f32 = false;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        if (!movable_input(n, i)) continue;
        if (v->dtype == c->low && !v->data) arrives_low = true;
        if (v->dtype == AMPC_DTYPE_F32 && !v->data) arrives_f32 = true;
        if (was_f32(c, v) && v->data && v->dtype == AMPC_DTYPE_F32 && max_finite(c, v) > c->max_low)
            return PREC_WHY_RANGE;
    }
    if (c->low == AMPC_DTYPE_BF16 && arrives_f32) arrives_low = false; /* the widest type wins */
    /* A Cast to f32 read only by nodes that stay f32 (the pass's own casts, on a second run)
     * has nothing to gain. */
    if (n->op == AMPC_OP_CAST && !c->read_low[n->outputs[0]->id]) arrives_low = false;
    *move = policy == PREC_LOW || arrives_low;
    return policy == PREC_LOW ? PREC_WHY_LOW : PREC_WHY_FOLLOW;
}

/* ---- conversions ---------------------------------------------------------------------------- */

/* A Cast of v to dtype `to`, appended (the caller settles the order); the output is named
 * out_name, or after the node ("<v>_to_f16"). */
static ampc_value *cast_node(prec_ctx *c, ampc_value *v, ampc_dtype to, const char *out_name) {
    char name[160];
    snprintf(name, sizeof name, "%.140s_to_%s", v->name, ampc_dtype_name(to));
    ampc_attr a = ampc_cast_to_attr(to);
    ampc_node *n;
    if (ampc_ir_node_build(c->g, AMPC_OP_CAST, name, &v, 1, &a, 1, 1, &out_name, &n) != AMPC_OK)
        return NULL;
    n->prec_why = PREC_WHY_FOLLOW;
    return n->outputs[0];
}

/* The f32 constant v converted to the low type. */
static ampc_value *convert_constant(prec_ctx *c, const ampc_value *v) {
    int64_t k = ampc_ir_numel(v);
    uint16_t *y = malloc((size_t)(k ? k : 1) * sizeof *y);
    if (!y) return NULL;
    const float *x = v->data;
    for (int64_t i = 0; i < k; i++)
        y[i] = c->low == AMPC_DTYPE_F16 ? ampc_f32_to_f16(x[i]) : ampc_f32_to_bf16(x[i]);
    char name[160];
    snprintf(name, sizeof name, "%.140s_%s", v->name, ampc_dtype_name(c->low));
    ampc_value *r = ampc_ir_const_new(c->g, name, c->low, &v->shape, y);
    free(y);
    return r;
}

/* v in the low type: a converted constant or a Cast, made once. */
static ampc_value *low_copy(prec_ctx *c, ampc_value *v) {
    if (!c->as_low[v->id])
        c->as_low[v->id] = v->data ? convert_constant(c, v) : cast_node(c, v, c->low, NULL);
    return c->as_low[v->id];
}

static ampc_value *f32_copy(prec_ctx *c, ampc_value *v) {
    if (!c->as_f32[v->id]) c->as_f32[v->id] = cast_node(c, v, AMPC_DTYPE_F32, NULL);
    return c->as_f32[v->id];
}

/* Node n stays f32: inputs that were f32 and arrive low get their f32 copy. */
static ampc_status keep_f32(prec_ctx *c, ampc_node *n) {
    for (int32_t i = 0; i < n->n_inputs; i++) {
        ampc_value *v = n->inputs[i];
        if (!movable_input(n, i) || !was_f32(c, v) || v->dtype == AMPC_DTYPE_F32) continue;
        if (!(n->inputs[i] = f32_copy(c, v))) return AMPC_E_OOM;
        c->changed = true;
    }
    return AMPC_OK;
}

/* Node n moves to the low type: its f32 inputs are replaced by low copies (a Cast to f32 casts to
 * the low type instead) and inference runs again. When inference refuses, everything is put
 * back and *refused is set. */
static ampc_status move_low(prec_ctx *c, ampc_node *n, bool *refused) {
    *refused = false;
    ampc_value *saved[64];
    if (n->n_inputs > AMPC_ARRAY_LEN(saved)) {
        *refused = true;
        return AMPC_OK;
    }
    memcpy(saved, n->inputs, (size_t)n->n_inputs * sizeof *saved);
    int32_t nodes = c->g->n_nodes, made[64], n_made = 0;
    bool did = false;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        ampc_value *v = n->inputs[i];
        if (!movable_input(n, i) || v->dtype != AMPC_DTYPE_F32 || !was_f32(c, v)) continue;
        if (!c->as_low[v->id]) made[n_made++] = v->id;
        if (!(n->inputs[i] = low_copy(c, v))) return AMPC_E_OOM;
        did = true;
    }
    const bool retargeted = ampc_cast_retarget(n, AMPC_DTYPE_F32, c->low);
    did |= retargeted;
    /* Inputs that arrive low change the output types too: inference runs in every case. */
    ampc_dtype before[64];
    for (int32_t i = 0; i < n->n_outputs && i < 64; i++) before[i] = n->outputs[i]->dtype;
    int32_t diags = c->g->diag.n;
    if (ampc_ir_node_infer(c->g, n) == AMPC_OK) {
        for (int32_t i = 0; i < n->n_outputs && i < 64; i++) did |= n->outputs[i]->dtype != before[i];
        c->changed |= did;
        return AMPC_OK;
    }
    /* A refusal, not an error: put everything back, the copies made for this node included. */
    ampc_diag_truncate(&c->g->diag, diags);
    memcpy(n->inputs, saved, (size_t)n->n_inputs * sizeof *saved);
    if (retargeted) ampc_cast_retarget(n, c->low, AMPC_DTYPE_F32);
    for (int32_t k = 0; k < n_made; k++) c->as_low[made[k]] = NULL;
    for (int32_t k = nodes; k < c->g->n_nodes; k++) ampc_ir_node_remove(c->g, c->g->nodes[k]);
    *refused = true;
    return ampc_ir_node_infer(c->g, n);
}

static ampc_status visit(prec_ctx *c, ampc_node *n) {
    bool any_f32 = false, move;
    for (int32_t i = 0; i < n->n_inputs; i++) any_f32 |= movable_input(n, i) && was_f32(c, n->inputs[i]);
    for (int32_t i = 0; i < n->n_outputs; i++) any_f32 |= was_f32(c, n->outputs[i]);
    n->prec_why = PREC_WHY_NONE;
    if (!any_f32) return AMPC_OK;
    ampc_prec_why why = decide(c, n, &move);
    if (move) {
        bool refused;
        ampc_status st = move_low(c, n, &refused);
        if (st != AMPC_OK) return st;
        if (refused) why = PREC_WHY_TYPES, move = false;
    }
    n->prec_why = (uint8_t)why;
    return move ? AMPC_OK : keep_f32(c, n);
}

/* Graph outputs that became low are cast back to the dtype the model declares; the cast's output
 * takes the output's name, the low value is renamed "<name>_f16". */
static ampc_status restore_outputs(prec_ctx *c) {
    for (int32_t i = 0; i < c->g->n_outputs; i++) {
        ampc_value *v = c->g->outputs[i];
        if (!was_f32(c, v) || v->dtype == AMPC_DTYPE_F32) continue;
        char low_name[160];
        snprintf(low_name, sizeof low_name, "%.140s_%s", v->name, ampc_dtype_name(v->dtype));
        ampc_value *r = cast_node(c, v, AMPC_DTYPE_F32, low_name);
        if (!r) return AMPC_E_OOM;
        ampc_ir_graph_replace_output(c->g, i, r);
        c->changed = true;
    }
    return AMPC_OK;
}

/* ---- cast folding --------------------------------------------------------------------------- */

/* Every value of `from` is exactly a value of `to`. */
static bool widens(ampc_dtype from, ampc_dtype to) {
    if (from == to) return true;
    if (from == AMPC_DTYPE_F16 || from == AMPC_DTYPE_BF16)
        return to == AMPC_DTYPE_F32 || to == AMPC_DTYPE_F64;
    return from == AMPC_DTYPE_F32 && to == AMPC_DTYPE_F64;
}

/* Casts to the type they read, and x -> wider -> x round trips, read their source instead. */
static ampc_status fold_casts(prec_ctx *c) {
    ampc_graph *g = c->g;
    ampc_value **map = calloc((size_t)g->n_values + 1, sizeof *map);
    if (!map) return AMPC_E_OOM;
    bool any = false;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        if (n->dead || n->op != AMPC_OP_CAST) continue;
        ampc_value *x = n->inputs[0], *y = n->outputs[0];
        if (y->flags & AMPC_VALUE_OUTPUT) continue; /* the interface keeps its names */
        if (map[x->id]) x = map[x->id]; /* the source of a cast folded just before */
        const ampc_node *p = x->producer;
        if (x->dtype != y->dtype && p && p->op == AMPC_OP_CAST && !p->dead &&
            p->inputs[0]->dtype == y->dtype && widens(y->dtype, x->dtype))
            x = p->inputs[0];
        if (x->dtype != y->dtype) continue;
        map[y->id] = x;
        ampc_ir_node_remove(g, n);
        any = true;
    }
    if (any) ampc_ir_graph_replace_uses(g, map), c->changed = true;
    free(map);
    return AMPC_OK;
}

/* ---- the pass ------------------------------------------------------------------------------- */

/* Marks the values read by nodes whose policy lets them run low. */
static void mark_read_low(prec_ctx *c) {
    for (int32_t i = 0; i < c->g->n_nodes; i++) {
        const ampc_node *n = c->g->nodes[i];
        if (n->dead || policy_of(c, n->op) == PREC_F32 || named_keep(c->o, n) ||
            named_auto(c->o, n))
            continue;
        for (int32_t k = 0; k < n->n_inputs; k++)
            if (movable_input(n, k)) c->read_low[n->inputs[k]->id] = true;
    }
}

/* Every keep_fp32 name must name a node or an op of the graph. */
static ampc_status check_keep_names(ampc_graph *g, const ampc_pipeline_options *o) {
    for (int32_t k = 0; k < o->n_keep_fp32; k++) {
        bool found = false;
        for (int32_t i = 0; i < g->n_nodes && !found; i++)
            found = !g->nodes[i]->dead &&
                    (!strcmp(o->keep_fp32[k], g->nodes[i]->name) ||
                     !strcmp(o->keep_fp32[k], ampc_op_get(g->nodes[i]->op)->onnx));
        if (!found)
            return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG,
                             "keep-fp32 '%s' names no node and no op of graph '%s' (give a node "
                             "name or an ONNX op type such as Softmax)",
                             o->keep_fp32[k], g->name ? g->name : "");
    }
    return AMPC_OK;
}

ampc_status ampc_pass_precision(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    const ampc_pipeline_options *o = ampc_pass_opt(cx);
    if (o->precision == AMPC_PRECISION_KEEP) return AMPC_OK;
    ampc_status st = check_keep_names(g, o);
    if (st != AMPC_OK) return st;
    prec_ctx c = {.g = g, .o = o, .n_orig = g->n_values};
    c.low = o->precision == AMPC_PRECISION_BF16 ? AMPC_DTYPE_BF16 : AMPC_DTYPE_F16;
    c.max_low = c.low == AMPC_DTYPE_F16 ? 65504.0f : 3.3895314e38f;
    c.orig = malloc((size_t)(c.n_orig + 1) * sizeof *c.orig);
    c.as_low = calloc((size_t)c.n_orig + 1, sizeof *c.as_low);
    c.as_f32 = calloc((size_t)c.n_orig + 1, sizeof *c.as_f32);
    c.read_low = calloc((size_t)c.n_orig + 1, sizeof *c.read_low);
    c.max_abs = malloc((size_t)(c.n_orig + 1) * sizeof *c.max_abs);
    if (!c.orig || !c.as_low || !c.as_f32 || !c.read_low || !c.max_abs) st = AMPC_E_OOM;
    for (int32_t i = 0; st == AMPC_OK && i < c.n_orig; i++)
        c.orig[i] = g->values[i]->dtype, c.max_abs[i] = -1;
    if (st == AMPC_OK) mark_read_low(&c);
    int32_t n_old = g->n_nodes;
    for (int32_t i = 0; st == AMPC_OK && i < n_old; i++)
        if (!g->nodes[i]->dead) st = visit(&c, g->nodes[i]);
    if (st == AMPC_OK) st = restore_outputs(&c);
    if (st == AMPC_OK) {
        ampc_ir_graph_settle(g, n_old);
        st = fold_casts(&c);
    }
    free(c.orig);
    free(c.as_low);
    free(c.as_f32);
    free(c.read_low);
    free(c.max_abs);
    if (st == AMPC_E_OOM && ampc_graph_status(g) == AMPC_OK)
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory in the precision pass");
    if (st != AMPC_OK) return st;
    if (c.changed) ampc_ir_graph_compact(g);
    *changed = c.changed;
    return AMPC_OK;
}
