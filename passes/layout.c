/*
 * layout.c — convolutions on f16/bf16 tensor cores run channels-last.
 *
 * cuDNN's tensor-core convolutions work on NHWC data; given NCHW they transpose in and out on
 * every call. This pass turns each 2-D Conv or ampc.FusedConv in f16 or bf16 (weights constant,
 * pads cuDNN can take, or any pads for a depthwise one, which ampc's own kernel runs) into an ampc.FusedConv with channels_last = 1: x and the residual z are
 * [N, H, W, C], the weights are permuted to [M, R, S, C/group] here, at compile time, and the
 * output is [N, H, W, M]. The model's NCHW value is then a Transpose of that output, made once.
 *
 * A transpose is only paid where the layout really changes: a convolution reading another's
 * output (or adding it as residual) reads the channels-last value directly, and the NCHW
 * Transpose is left unused (dce removes it); a value from elsewhere is transposed to
 * channels-last once, however many convolutions read it.
 *
 * What runs between convolutions runs channels-last too, in the same sweep, whenever it reads a
 * channels-last value and needs no transpose for its other inputs (propagate): elementwise ops
 * (SiLU, Hardswish, a squeeze-and-excitation gate's Mul; constants permuted, per-channel
 * vectors reshaped), Concat along channels (axis 3), BatchNormalization (on the [N*H*W, C] rows
 * of the same memory), MaxPool without Indices and AveragePool (channels_last = 1),
 * GlobalAveragePool (a ReduceMean over H and W, whose [N, 1, 1, C] is the pooled [N, C, 1, 1] in
 * the same order: a Reshape, no kernel), and a model's own Transpose(0, 3, 1, 2) (its input is
 * the channels-last form). The arithmetic is the same, element for element, so the results are
 * equal bit for bit on the reference evaluator. A ResNet, an EfficientNet or a DenseNet then
 * pays one transpose, of its input.
 *
 * The pass runs by default (--layout nchw turns it off). What makes channels-last pay is the
 * runtime's use of cuDNN's graph API (runtime/prov_cudnn.c): its runtime-fusion engines run an
 * NHWC f16 convolution with bias, residual and ReLU as one kernel. On an H200, ResNet-50 fp16 b1
 * took 0.36 ms channels-last against 0.83 ms NCHW (both with the graph API), and 2.27 / 1.55 ms
 * with cuDNN's legacy calls only, which pick slow NHWC algorithms (bench/conv-engines.sh).
 */
#include "passes.h"
#include "ir/reduce.h"
#include "ir/movement.h"
#include "ir/conv.h"

#include "ir/infer/infer.h"

#include <stdlib.h>
#include <string.h>

typedef struct layout_ctx {
    ampc_graph *g;
    int32_t n_orig;
    ampc_value **last;  /* by value id: its channels-last form (a conv output or a Transpose) */
    ampc_value **w_last; /* by value id: a weight permuted to [M, R, S, C/group] */
} layout_ctx;

/* Whether n is a depthwise convolution ampc's own kernel runs (codegen/lower_conv.c's
 * depthwise_ok): one filter per channel (group = C = M), C a multiple of 8. */
static bool depthwise(const ampc_node *n) {
    const int64_t c = n->inputs[0]->shape.dims[1];
    return ampc_conv_params_of(n).group == c && n->inputs[1]->shape.dims[0] == c && c % 8 == 0;
}

/* Pads the runtime can take: symmetric ones (cuDNN's legacy calls take one pad a dim), or any
 * non-negative ones for a depthwise convolution, which ampc's kernel runs. */
static bool pads_ok(ampc_graph *g, const ampc_node *n) {
    ampc_conv_geom geo;
    int32_t diags = g->diag.n;
    if (ampc_infer_conv_geom(g, n, &geo) != AMPC_OK) {
        ampc_diag_truncate(&g->diag, diags);
        return false;
    }
    const bool any = depthwise(n);
    for (int32_t i = 0; i < geo.k; i++)
        if ((!any && geo.pad_begin[i] != geo.pad_end[i]) || geo.pad_begin[i] < 0 || geo.pad_end[i] < 0)
            return false;
    return true;
}

static bool eligible(ampc_graph *g, const ampc_node *n) {
    if (n->dead || (n->op != AMPC_OP_CONV && n->op != AMPC_OP_FUSED_CONV)) return false;
    if (ampc_conv_channels_last(n)) return false;
    const ampc_value *x = n->inputs[0], *w = n->inputs[1];
    if (x->dtype != AMPC_DTYPE_F16 && x->dtype != AMPC_DTYPE_BF16) return false;
    if (x->shape.rank != 4 || !w->data || w->shape.rank != 4) return false;
    return pads_ok(g, n);
}

static ampc_attr perm_attr(const int64_t *perm) { return ampc_transpose_perm_attr(perm, 4); }

static const int64_t TO_LAST[4] = {0, 2, 3, 1}, TO_FIRST[4] = {0, 3, 1, 2};

/* Whether the 4-D shape s (NCHW) holds its elements in the same order channels-last: C is 1,
 * or H and W are (a per-channel vector [N, C, 1, 1]). Its transpose is then a Reshape. */
static bool same_order_last(const ampc_shape *s) {
    return s->dims[1] == 1 || (s->dims[2] == 1 && s->dims[3] == 1);
}

/* A Reshape of v to `shape` (named `name`): a view, no kernel. NULL on failure. */
static ampc_value *reshaped(ampc_graph *g, ampc_value *v, const ampc_shape *shape, const char *name) {
    ampc_shape s = {1, {shape->rank}};
    ampc_value *in[2] = {v, ampc_ir_const_new(g, NULL, AMPC_DTYPE_I64, &s, shape->dims)};
    ampc_node *t;
    if (!in[1] || ampc_ir_node_build(g, AMPC_OP_RESHAPE, name, in, 2, NULL, 0, 1, NULL, &t) != AMPC_OK)
        return NULL;
    return t->outputs[0];
}

/* v channels-last: a convolution's own output, or one Transpose (a Reshape where the order of
 * the elements does not change) made once. */
static ampc_value *channels_last(layout_ctx *c, ampc_value *v) {
    if (v->id < c->n_orig && c->last[v->id]) return c->last[v->id];
    char name[160];
    snprintf(name, sizeof name, "%.140s_nhwc", v->name);
    ampc_value *r;
    if (same_order_last(&v->shape)) {
        ampc_shape s = ampc_shape_to_channels_last(&v->shape);
        r = reshaped(c->g, v, &s, name);
    } else {
        ampc_attr a = perm_attr(TO_LAST);
        ampc_node *t;
        r = ampc_ir_node_build(c->g, AMPC_OP_TRANSPOSE, name, &v, 1, &a, 1, 1, NULL, &t) == AMPC_OK
                ? t->outputs[0]
                : NULL;
    }
    if (r && v->id < c->n_orig) c->last[v->id] = r;
    return r;
}

/* Makes the model's NCHW value y the channels-last y_last transposed back (or reshaped, where
 * the order does not change), produced by a node appended here; records y_last as y's form. */
static ampc_status channels_first(layout_ctx *c, ampc_value *y_last, ampc_value *y, const char *node) {
    char name[160];
    snprintf(name, sizeof name, "%.140s_nchw", node);
    ampc_node *t;
    if (same_order_last(&y->shape)) {
        ampc_shape s = {1, {4}};
        ampc_value *in[2] = {y_last, ampc_ir_const_new(c->g, NULL, AMPC_DTYPE_I64, &s, y->shape.dims)};
        t = in[1] ? ampc_ir_node_append(c->g, AMPC_OP_RESHAPE, name, in, 2, NULL, 0, &y, 1) : NULL;
    } else {
        ampc_attr a = perm_attr(TO_FIRST);
        t = ampc_ir_node_append(c->g, AMPC_OP_TRANSPOSE, name, &y_last, 1, &a, 1, &y, 1);
    }
    if (!t) return AMPC_E_OOM;
    c->last[y->id] = y_last;
    return AMPC_OK;
}

/* The constant v, read as the 4-D d[] (its dims, with leading 1s), permuted to [d0, d2, d3, d1]
 * (a weight [M, C/g, R, S] becomes [M, R, S, C/g]); made once per constant. */
static ampc_value *const_last(layout_ctx *c, ampc_value *v, const int64_t d[4]) {
    if (v->id < c->n_orig && c->w_last[v->id]) return c->w_last[v->id];
    size_t es = ampc_dtype_size(v->dtype);
    int64_t m = d[0], k = d[1], sp = d[2] * d[3];
    char *out = malloc((size_t)(m * k * sp) * es + 1);
    if (!out) return NULL;
    for (int64_t o = 0; o < m; o++)
        for (int64_t i = 0; i < k; i++)
            for (int64_t q = 0; q < sp; q++)
                memcpy(out + ((o * sp + q) * k + i) * es, (const char *)v->data + ((o * k + i) * sp + q) * es, es);
    char name[160];
    snprintf(name, sizeof name, "%.140s_%s", v->name, v->shape.rank == 4 ? "mrsc" : "nhwc");
    ampc_shape s4 = {4, {d[0], d[1], d[2], d[3]}};
    ampc_shape s = ampc_shape_to_channels_last(&s4);
    ampc_value *r = ampc_ir_const_new(c->g, name, v->dtype, &s, out);
    free(out);
    if (r && v->id < c->n_orig) c->w_last[v->id] = r;
    return r;
}

static ampc_value *weight_last(layout_ctx *c, ampc_value *w) {
    return const_last(c, w, w->shape.dims);
}

/* Node n becomes a channels-last ampc.FusedConv writing y_nhwc; the model's y becomes the
 * output of a Transpose back to NCHW. */
static ampc_status convert(layout_ctx *c, ampc_node *n) {
    ampc_graph *g = c->g;
    ampc_value *in[4] = {NULL, NULL, NULL, NULL};
    int32_t n_in = n->n_inputs;
    if (!(in[0] = channels_last(c, n->inputs[0])) || !(in[1] = weight_last(c, n->inputs[1])))
        return AMPC_E_OOM;
    if (n_in > 2) in[2] = n->inputs[2];
    if (n_in > 3 && n->inputs[3] && !(in[3] = channels_last(c, n->inputs[3]))) return AMPC_E_OOM;
    ampc_attr *attrs = ampc_ir_alloc(g, (size_t)(n->n_attrs + 1) * sizeof *attrs);
    ampc_value **ins = ampc_ir_alloc(g, 4 * sizeof *ins);
    if (!attrs || !ins) return AMPC_E_OOM;
    memcpy(attrs, n->attrs, (size_t)n->n_attrs * sizeof *attrs);
    attrs[n->n_attrs] = ampc_channels_last_attr();
    memcpy(ins, in, sizeof in);
    ampc_value *y = n->outputs[0];
    char name[160];
    snprintf(name, sizeof name, "%.140s_nhwc", y->name);
    ampc_shape ys = ampc_shape_to_channels_last(&y->shape);
    ampc_value *y_last = ampc_ir_value_new(g, name, y->dtype, &ys);
    if (!y_last) return AMPC_E_OOM;
    n->op = AMPC_OP_FUSED_CONV;
    n->inputs = ins;
    n->n_inputs = n_in;
    n->attrs = attrs;
    n->n_attrs++;
    n->outputs[0] = y_last;
    y_last->producer = n;
    ampc_status st = ampc_ir_node_infer(g, n);
    if (st != AMPC_OK) return st;
    return channels_first(c, y_last, y, n->name);
}

/* ---- propagation: what runs on channels-last values as well as on NCHW ones ---------------- */

/* v's dims with leading 1s, as a 4-D shape (v has rank <= 4). */
static ampc_shape aligned4(const ampc_value *v) {
    ampc_shape s = {4, {1, 1, 1, 1}};
    for (int32_t i = 0; i < v->shape.rank; i++) s.dims[4 - v->shape.rank + i] = v->shape.dims[i];
    return s;
}

static bool has_last(const layout_ctx *c, const ampc_value *v) {
    return v && v->id < c->n_orig && c->last[v->id];
}

/* Whether operand v (NULL: an omitted optional input) of a node running channels-last can be
 * given channels-last without a transpose kernel: it has that form already, broadcasts alike in
 * both layouts (every dim 1), keeps its order (same_order_last) or is a constant. */
static bool operand_ok(const layout_ctx *c, const ampc_value *v) {
    if (!v || has_last(c, v) || ampc_ir_numel(v) == 1 || v->data) return true;
    ampc_shape s = aligned4(v);
    return v->shape.rank <= 4 && same_order_last(&s);
}

/* Operand v channels-last (operand_ok holds): its form, itself (one element), a constant
 * permuted or reshaped, or a Reshape of it. */
static ampc_value *operand_last(layout_ctx *c, ampc_value *v) {
    if (!v || ampc_ir_numel(v) == 1) return v;
    if (has_last(c, v)) return c->last[v->id];
    ampc_shape s = aligned4(v);
    if (v->data) return const_last(c, v, s.dims);
    if (v->shape.rank == 4) return channels_last(c, v);
    char name[160];
    snprintf(name, sizeof name, "%.140s_nhwc", v->name);
    ampc_shape sl = ampc_shape_to_channels_last(&s);
    return reshaped(c->g, v, &sl, name);
}

/* An elementwise op whose kernel reads every operand at the element's broadcast position, so
 * it computes the same in any layout: a generated elementwise kernel, no random draw, one
 * output of rank 4 to which every input broadcasts (not SwiGLU, which halves its last dim). */
static bool layout_free(const ampc_node *n) {
    const ampc_op_info *op = ampc_op_get(n->op);
    if (op->lower != LOWER_ELEMENTWISE || !(op->traits & T_ELEMWISE) || (op->traits & T_NOFOLD) ||
        n->n_outputs != 1 || n->outputs[0]->shape.rank != 4)
        return false;
    const ampc_shape *ys = &n->outputs[0]->shape;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        if (!v) continue;
        if (v->shape.rank > 4) return false;
        ampc_shape s = aligned4(v);
        for (int32_t d = 0; d < 4; d++)
            if (s.dims[d] != ys->dims[d] && s.dims[d] != 1) return false;
    }
    return true;
}

/* n reads `ins` (its inputs channels-last) and writes its output channels-last, with `attrs`
 * (NULL: unchanged); the model's value becomes that output transposed back. */
static ampc_status run_last(layout_ctx *c, ampc_node *n, ampc_value **ins, const ampc_attr *attrs,
                            int32_t n_attrs) {
    ampc_value *y = n->outputs[0];
    char name[160];
    snprintf(name, sizeof name, "%.140s_nhwc", y->name);
    ampc_shape ys = ampc_shape_to_channels_last(&y->shape);
    ampc_value *y_last = ampc_ir_value_new(c->g, name, y->dtype, &ys);
    if (!y_last) return AMPC_E_OOM;
    n->inputs = ins;
    if (attrs) n->attrs = (ampc_attr *)attrs, n->n_attrs = n_attrs;
    n->outputs[0] = y_last;
    y_last->producer = n;
    ampc_status st = ampc_ir_node_infer(c->g, n);
    if (st != AMPC_OK) return st;
    return channels_first(c, y_last, y, n->name);
}

/* The inputs of n channels-last (operand_ok holds for each), in arena memory. */
static ampc_value **operands_last(layout_ctx *c, const ampc_node *n) {
    ampc_value **ins = ampc_ir_alloc(c->g, (size_t)(n->n_inputs + 1) * sizeof *ins);
    if (!ins) return NULL;
    for (int32_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] && !(ins[i] = operand_last(c, n->inputs[i]))) return NULL;
    return ins;
}

/* Elementwise n, and Concat along channels, on channels-last operands. */
static ampc_status propagate_elementwise(layout_ctx *c, ampc_node *n, bool *done) {
    int64_t axis = 0;
    if (n->op == AMPC_OP_CONCAT) {
        axis = ampc_axis_attr(n);
        if (n->outputs[0]->shape.rank != 4 || (axis != 1 && axis != -3)) return AMPC_OK;
    } else if (!layout_free(n)) {
        return AMPC_OK;
    }
    bool any = false;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        if (!operand_ok(c, n->inputs[i])) return AMPC_OK;
        any |= has_last(c, n->inputs[i]);
    }
    if (!any) return AMPC_OK;
    ampc_value **ins = operands_last(c, n);
    if (!ins) return AMPC_E_OOM;
    *done = true;
    if (n->op != AMPC_OP_CONCAT) return run_last(c, n, ins, NULL, 0);
    ampc_attr *at = ampc_ir_alloc(c->g, sizeof *at);
    if (!at) return AMPC_E_OOM;
    *at = ampc_axis_attr_make(3);
    return run_last(c, n, ins, at, 1);
}

/* GlobalAveragePool of a channels-last x: a ReduceMean over H and W, keeping them, whose
 * [N, 1, 1, C] is the pooled [N, C, 1, 1] in the same order. */
static ampc_status propagate_global_pool(layout_ctx *c, ampc_node *n, bool *done) {
    ampc_value *x = n->inputs[0];
    if (x->shape.rank != 4 || !has_last(c, x)) return AMPC_OK;
    static const int64_t hw[2] = {1, 2};
    ampc_shape s = {1, {2}};
    ampc_value **ins = ampc_ir_alloc(c->g, 2 * sizeof *ins);
    ampc_attr *at = ampc_ir_alloc(c->g, sizeof *at);
    if (!ins || !at || !(ins[1] = ampc_ir_const_new(c->g, NULL, AMPC_DTYPE_I64, &s, hw)))
        return AMPC_E_OOM;
    ins[0] = c->last[x->id];
    *at = ampc_keepdims_attr(true);
    n->op = AMPC_OP_REDUCE_MEAN;
    n->n_inputs = 2;
    *done = true;
    return run_last(c, n, ins, at, 1);
}

/* MaxPool (without Indices) or AveragePool of a channels-last x, on it: channels_last = 1. */
static ampc_status propagate_pool(layout_ctx *c, ampc_node *n, bool *done) {
    ampc_value *x = n->inputs[0];
    if (x->shape.rank != 4 || n->n_outputs != 1 || !has_last(c, x)) return AMPC_OK;
    ampc_attr *attrs = ampc_ir_alloc(c->g, (size_t)(n->n_attrs + 1) * sizeof *attrs);
    ampc_value **ins = ampc_ir_alloc(c->g, sizeof *ins);
    if (!attrs || !ins) return AMPC_E_OOM;
    memcpy(attrs, n->attrs, (size_t)n->n_attrs * sizeof *attrs);
    attrs[n->n_attrs] = ampc_channels_last_attr();
    ins[0] = c->last[x->id];
    *done = true;
    return run_last(c, n, ins, attrs, n->n_attrs + 1);
}

/* The one node that reads v, when v is no graph output and one node (once) reads it. */
static ampc_node *only_reader(const ampc_graph *g, const ampc_value *v) {
    if (v->flags & AMPC_VALUE_OUTPUT) return NULL;
    ampc_node *found = NULL;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *u = g->nodes[i];
        for (int32_t k = 0; !u->dead && k < u->n_inputs; k++) {
            if (u->inputs[k] != v) continue;
            if (found) return NULL;
            found = u;
        }
    }
    return found;
}

/* BatchNormalization (inference) of a channels-last x: the same op on x viewed as [N*H*W, C],
 * whose channels are its dim 1, viewed back as [N, H, W, C]. A Relu that alone reads it runs on
 * the rows too (before the view back), so that fuse-elementwise can give it to the norm's
 * kernel (DenseNet's BN, ReLU, convolution). */
static ampc_status propagate_batch_norm(layout_ctx *c, ampc_node *n, bool *done) {
    ampc_value *x = n->inputs[0], *y = n->outputs[0];
    if (x->shape.rank != 4 || n->n_outputs != 1 || !has_last(c, x)) return AMPC_OK;
    const int64_t *d = x->shape.dims;
    ampc_shape flat = {2, {d[0] * d[2] * d[3], d[1]}};
    char name[160];
    snprintf(name, sizeof name, "%.140s_rows", x->name);
    ampc_value *rows = reshaped(c->g, c->last[x->id], &flat, name);
    snprintf(name, sizeof name, "%.140s_rows", y->name);
    ampc_value *out = rows ? ampc_ir_value_new(c->g, name, y->dtype, &flat) : NULL;
    if (!out) return AMPC_E_OOM;
    *done = true;
    n->inputs[0] = rows;
    n->outputs[0] = out;
    out->producer = n;
    ampc_status st = ampc_ir_node_infer(c->g, n);
    if (st != AMPC_OK) return st;
    ampc_node *relu = only_reader(c->g, y);
    if (relu && relu->op == AMPC_OP_RELU) { /* it stays on the rows, where its kernel joins the norm's */
        ampc_value *r_out = ampc_ir_value_new(c->g, name, relu->outputs[0]->dtype, &flat);
        if (!r_out) return AMPC_E_OOM;
        relu->inputs[0] = out;
        y->producer = NULL; /* the norm's NCHW output: nothing reads or makes it now */
        y = relu->outputs[0];
        relu->outputs[0] = r_out;
        r_out->producer = relu;
        if ((st = ampc_ir_node_infer(c->g, relu)) != AMPC_OK) return st;
        out = r_out, n = relu;
    }
    snprintf(name, sizeof name, "%.140s_nhwc", y->name);
    ampc_shape ys = ampc_shape_to_channels_last(&y->shape);
    ampc_value *y_last = reshaped(c->g, out, &ys, name);
    return y_last ? channels_first(c, y_last, y, n->name) : AMPC_E_OOM;
}

/* A model's own Transpose(0, 3, 1, 2) (ConvNeXt's permute back to NCHW after its channels-last
 * block): its input is the output's channels-last form, for the readers that can take it. */
static ampc_status model_transpose(layout_ctx *c, const ampc_node *n) {
    int64_t p[4];
    ampc_value *y = n->outputs[0];
    if (y->shape.rank != 4 || !ampc_transpose_perm(n, 4, p) || y->id >= c->n_orig || c->last[y->id])
        return AMPC_OK;
    if (p[0] == TO_FIRST[0] && p[1] == TO_FIRST[1] && p[2] == TO_FIRST[2] && p[3] == TO_FIRST[3])
        c->last[y->id] = n->inputs[0];
    return AMPC_OK;
}

/* Node n on channels-last values when it reads one and can: *done says whether it does. */
static ampc_status propagate(layout_ctx *c, ampc_node *n, bool *done) {
    *done = false;
    if (n->dead || n->n_outputs < 1) return AMPC_OK;
    switch (n->op) {
    case AMPC_OP_TRANSPOSE: return model_transpose(c, n);
    case AMPC_OP_GLOBAL_AVERAGE_POOL: return propagate_global_pool(c, n, done);
    case AMPC_OP_BATCH_NORM: return propagate_batch_norm(c, n, done);
    case AMPC_OP_MAX_POOL: case AMPC_OP_AVERAGE_POOL: return propagate_pool(c, n, done);
    default: return propagate_elementwise(c, n, done);
    }
}

ampc_status ampc_pass_layout(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    if (ampc_pass_opt(cx)->keep_nchw) return AMPC_OK;
    layout_ctx c = {.g = g, .n_orig = g->n_values};
    c.last = calloc((size_t)c.n_orig + 1, sizeof *c.last);
    c.w_last = calloc((size_t)c.n_orig + 1, sizeof *c.w_last);
    ampc_status st = c.last && c.w_last ? AMPC_OK : AMPC_E_OOM;
    int32_t n_old = g->n_nodes;
    for (int32_t i = 0; st == AMPC_OK && i < n_old; i++) {
        bool done = false;
        if (eligible(g, g->nodes[i])) st = convert(&c, g->nodes[i]), done = true;
        else st = propagate(&c, g->nodes[i], &done);
        *changed |= done;
    }
    if (st == AMPC_OK && *changed) ampc_ir_graph_settle(g, n_old);
    free(c.last);
    free(c.w_last);
    if (st == AMPC_E_OOM && ampc_graph_status(g) == AMPC_OK)
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory in the layout pass");
    return st;
}
