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
 * channels-last once, however many convolutions read it. A ResNet pays four transposes: the
 * input, around the max pooling (twice) and before the global pooling.
 *
 * The pass runs by default (--layout nchw turns it off). What makes channels-last pay is the
 * runtime's use of cuDNN's graph API (runtime/prov_cudnn.c): its runtime-fusion engines run an
 * NHWC f16 convolution with bias, residual and ReLU as one kernel. On an H200, ResNet-50 fp16 b1
 * took 0.36 ms channels-last against 0.83 ms NCHW (both with the graph API), and 2.27 / 1.55 ms
 * with cuDNN's legacy calls only, which pick slow NHWC algorithms (bench/conv-engines.sh).
 */
#include "passes.h"

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
static bool depthwise(ampc_graph *g, const ampc_node *n) {
    const int64_t c = n->inputs[0]->shape.dims[1];
    return ampc_ir_attr_int(g, n, "group", 1) == c && n->inputs[1]->shape.dims[0] == c && c % 8 == 0;
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
    const bool any = depthwise(g, n);
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

static ampc_attr perm_attr(const int64_t *perm) {
    return (ampc_attr){.name = "perm", .kind = AMPC_ATTR_INTS, .n = 4, .ints = (int64_t *)perm};
}

static const int64_t TO_LAST[4] = {0, 2, 3, 1}, TO_FIRST[4] = {0, 3, 1, 2};

/* v channels-last: a convolution's own output, or one Transpose made once. */
static ampc_value *channels_last(layout_ctx *c, ampc_value *v) {
    if (v->id < c->n_orig && c->last[v->id]) return c->last[v->id];
    char name[160];
    snprintf(name, sizeof name, "%.140s_nhwc", v->name);
    ampc_attr a = perm_attr(TO_LAST);
    ampc_node *t;
    if (ampc_ir_node_build(c->g, AMPC_OP_TRANSPOSE, name, &v, 1, &a, 1, 1, NULL, &t) != AMPC_OK)
        return NULL;
    if (v->id < c->n_orig) c->last[v->id] = t->outputs[0];
    return t->outputs[0];
}

/* The weight [M, C/g, R, S] as a constant [M, R, S, C/g]. */
static ampc_value *weight_last(layout_ctx *c, ampc_value *w) {
    if (c->w_last[w->id]) return c->w_last[w->id];
    size_t es = ampc_dtype_size(w->dtype);
    int64_t m = w->shape.dims[0], k = w->shape.dims[1], sp = w->shape.dims[2] * w->shape.dims[3];
    char *d = malloc((size_t)(m * k * sp) * es + 1);
    if (!d) return NULL;
    for (int64_t o = 0; o < m; o++)
        for (int64_t i = 0; i < k; i++)
            for (int64_t q = 0; q < sp; q++)
                memcpy(d + ((o * sp + q) * k + i) * es, (const char *)w->data + ((o * k + i) * sp + q) * es, es);
    char name[160];
    snprintf(name, sizeof name, "%.140s_mrsc", w->name);
    ampc_shape s = ampc_shape_to_channels_last(&w->shape);
    c->w_last[w->id] = ampc_ir_const_new(c->g, name, w->dtype, &s, d);
    free(d);
    return c->w_last[w->id];
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
    attrs[n->n_attrs] = (ampc_attr){.name = "channels_last", .kind = AMPC_ATTR_INT, .i = 1};
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
    ampc_attr a = perm_attr(TO_FIRST);
    snprintf(name, sizeof name, "%.140s_nchw", n->name);
    if (!ampc_ir_node_append(g, AMPC_OP_TRANSPOSE, name, &y_last, 1, &a, 1, &y, 1))
        return AMPC_E_OOM;
    c->last[y->id] = y_last;
    return AMPC_OK;
}

ampc_status ampc_pass_layout(ampc_graph *g, bool *changed) {
    *changed = false;
    if (!g->channels_last) return AMPC_OK;
    layout_ctx c = {.g = g, .n_orig = g->n_values};
    c.last = calloc((size_t)c.n_orig + 1, sizeof *c.last);
    c.w_last = calloc((size_t)c.n_orig + 1, sizeof *c.w_last);
    ampc_status st = c.last && c.w_last ? AMPC_OK : AMPC_E_OOM;
    int32_t n_old = g->n_nodes;
    for (int32_t i = 0; st == AMPC_OK && i < n_old; i++) {
        if (!eligible(g, g->nodes[i])) continue;
        st = convert(&c, g->nodes[i]);
        *changed = true;
    }
    if (st == AMPC_OK && *changed) ampc_ir_graph_settle(g, n_old);
    free(c.last);
    free(c.w_last);
    if (st == AMPC_E_OOM && ampc_graph_status(g) == AMPC_OK)
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory in the layout pass");
    return st;
}
