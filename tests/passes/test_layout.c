/*
 * test_layout.c — the layout pass: f16/bf16 2-D convolutions run channels-last with transposes
 * only where the layout changes (a residual block: one, for its input), the ops between them
 * (elementwise, Concat, BatchNormalization, pools, a model's own permutes) channels-last too, the
 * result bit for bit what the NCHW graph computes on the reference evaluator, f32 convolutions untouched, a second run idle, on by
 * default and off with keep_nchw; and on the GPU (cuDNN with NHWC descriptors, legacy calls or
 * the graph API) against the reference.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "support.h"

#include "passes/passes.h"
#include "ir/infer/infer.h"
#include "ir/conv.h"
#include "ir/ref/ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ampc_value *conv(ampc_graph *g, ampc_value *x, int64_t m, int64_t c, int seed,
                        ampc_dtype t) {
    double w[16 * 16 * 9], b[16];
    for (int i = 0; i < m * c * 9; i++) w[i] = sin(seed * 7 + i * 0.37) * 0.3;
    for (int i = 0; i < m; i++) b[i] = 0.05 * (i % 5) - 0.1;
    ampc_value *wv = t_const_f32(g, SHAPE(m, c, 3, 3), w), *bv = t_const_f32(g, SHAPE(m), b);
    if (t != AMPC_DTYPE_F32) {
        ampc_attr_arg to = AMPC_ATTR_I("to", t == AMPC_DTYPE_F16 ? 10 : 16);
        wv = ampc_op(g, "Cast", &wv, 1, &to, 1);
        bv = ampc_op(g, "Cast", &bv, 1, &to, 1);
    }
    ampc_attr_arg pads = AMPC_ATTR_IS("pads", ((int64_t[]){1, 1, 1, 1}), 4);
    ampc_value *in[3] = {x, wv, bv};
    return ampc_op(g, "Conv", in, 3, &pads, 1);
}

/* x -> conv+relu -> maxpool -> conv+relu -> conv + residual(pool) -> relu -> global pool. */
static ampc_graph *block(ampc_dtype t) {
    ampc_graph *g = ampc_graph_create("block");
    ampc_value *x = t_input(g, "x", t, SHAPE(2, 4, 8, 8));
    ampc_value *c1 = conv(g, x, 8, 4, 1, t);
    c1 = ampc_op(g, "Relu", &c1, 1, NULL, 0);
    ampc_attr_arg pool[2] = {AMPC_ATTR_IS("kernel_shape", ((int64_t[]){2, 2}), 2),
                             AMPC_ATTR_IS("strides", ((int64_t[]){2, 2}), 2)};
    ampc_value *p = ampc_op(g, "MaxPool", &c1, 1, pool, 2);
    ampc_value *c2 = conv(g, p, 8, 8, 2, t);
    c2 = ampc_op(g, "Relu", &c2, 1, NULL, 0);
    ampc_value *c3 = ampc_add(g, conv(g, c2, 8, 8, 3, t), p);
    c3 = ampc_op(g, "Relu", &c3, 1, NULL, 0);
    ampc_output(g, ampc_op(g, "GlobalAveragePool", &c3, 1, NULL, 0), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    for (int64_t i = 0, n = ampc_shape_numel(&t->shape); i < n; i++)
        ampc_ref_store_f64(t->data, t->dtype, i, cos((double)(i + (int64_t)*seed) * 0.41));
}

Test(layout, residual_block_runs_channels_last_with_one_transpose) {
    ampc_graph *a = block(AMPC_DTYPE_F16), *b = block(AMPC_DTYPE_F16);
    const char *off[1] = {"layout"};
    ampc_pipeline_options with = {.verify = true},
                          without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_FUSED_CONV), 3);
    int32_t last = 0;
    for (int32_t i = 0; i < a->n_nodes; i++)
        last += a->nodes[i]->op == AMPC_OP_FUSED_CONV && ampc_ir_attr_find(a->nodes[i], "channels_last");
    cr_assert_eq(last, 3, "every convolution runs channels-last");
    cr_assert_eq(t_count_op(a, AMPC_OP_TRANSPOSE), 1, "x in only (the max pool runs channels-last, "
                 "the global pool is a ReduceMean whose output is reshaped):\n%s",
                 ampc_graph_to_text(a, false));
    cr_assert_eq(t_count_op(a, AMPC_OP_REDUCE_MEAN), 1);
    cr_assert_eq(t_count_op(b, AMPC_OP_TRANSPOSE), 0);
    /* The same arithmetic in the same order: equal bit for bit. */
    int16_t x[2 * 4 * 8 * 8];
    ampc_tensor in = t_tensor(AMPC_DTYPE_F16, SHAPE(2, 4, 8, 8), x), ya, yb;
    uint64_t seed = 5;
    fill(&in, "x", &seed);
    cr_assert_eq(ampc_graph_evaluate(a, &in, 1, &ya, 1), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, &in, 1, &yb, 1), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert(ampc_shape_eq(&ya.shape, &yb.shape));
    cr_assert_arr_eq(ya.data, yb.data, 2 * 8 * 2);
    ampc_tensor_free(&ya);
    ampc_tensor_free(&yb);
    /* A second run has nothing left to convert. */
    bool changed = true;
    cr_assert_eq(ampc_pass_layout(a, NULL, &changed), AMPC_OK); /* the default: channels-last */
    cr_assert_not(changed);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

/* A constant [n] (the values vary with seed) in dtype t. */
static ampc_value *vec(ampc_graph *g, int64_t n, int seed, double lo, ampc_dtype t) {
    double d[16];
    for (int i = 0; i < n; i++) d[i] = lo + 0.1 * ((i * 7 + seed) % 9);
    ampc_value *v = t_const_f32(g, SHAPE(n), d);
    ampc_attr_arg to = AMPC_ATTR_I("to", t == AMPC_DTYPE_F16 ? 10 : 16);
    return ampc_op(g, "Cast", &v, 1, &to, 1);
}

/* What runs between convolutions in mobile and dense networks: SiLU, a squeeze-and-excitation
 * gate, average and max pooling, a Concat along channels, BatchNormalization and ReLU, and a
 * ConvNeXt-style permute to channels-last, a scale along the last axis and a permute back
 * before a residual Add and a per-channel bias. */
static ampc_graph *mobile_block(ampc_dtype t) {
    ampc_graph *g = ampc_graph_create("mobile");
    ampc_value *x = t_input(g, "x", t, SHAPE(2, 8, 8, 8));
    ampc_value *c1 = conv(g, x, 8, 8, 1, t);
    ampc_value *a = ampc_mul(g, c1, ampc_op(g, "Sigmoid", &c1, 1, NULL, 0));
    ampc_value *p = ampc_op(g, "GlobalAveragePool", &a, 1, NULL, 0);
    ampc_value *f = conv(g, p, 8, 8, 2, t);
    f = ampc_op(g, "Relu", &f, 1, NULL, 0);
    ampc_value *h = conv(g, f, 8, 8, 3, t);
    ampc_value *m = ampc_mul(g, a, ampc_op(g, "HardSigmoid", &h, 1, NULL, 0));
    ampc_attr_arg win[2] = {AMPC_ATTR_IS("kernel_shape", ((int64_t[]){2, 2}), 2),
                            AMPC_ATTR_IS("strides", ((int64_t[]){2, 2}), 2)};
    ampc_value *two[2] = {ampc_op(g, "AveragePool", &m, 1, win, 2), ampc_op(g, "MaxPool", &m, 1, win, 2)};
    ampc_attr_arg axis = AMPC_ATTR_I("axis", 1);
    ampc_value *cat = ampc_op(g, "Concat", two, 2, &axis, 1);
    ampc_value *bn_in[5] = {cat, vec(g, 16, 1, 0.5, t), vec(g, 16, 2, -0.3, t), vec(g, 16, 3, -0.2, t),
                            vec(g, 16, 4, 0.4, t)};
    ampc_value *r = ampc_op(g, "BatchNormalization", bn_in, 5, NULL, 0);
    r = ampc_op(g, "Relu", &r, 1, NULL, 0);
    ampc_value *c2 = conv(g, r, 16, 16, 4, t);
    ampc_attr_arg to_last = AMPC_ATTR_IS("perm", ((int64_t[]){0, 2, 3, 1}), 4),
                  to_first = AMPC_ATTR_IS("perm", ((int64_t[]){0, 3, 1, 2}), 4);
    ampc_value *s = ampc_mul(g, ampc_op(g, "Transpose", &c2, 1, &to_last, 1), vec(g, 16, 5, 0.2, t));
    s = ampc_add(g, ampc_op(g, "Transpose", &s, 1, &to_first, 1), c2);
    ampc_value *bias = vec(g, 16, 6, -0.4, t), *sh = t_const_i64(g, SHAPE(3), (int64_t[]){16, 1, 1});
    ampc_value *rs[2] = {bias, sh};
    ampc_output(g, ampc_add(g, s, ampc_op(g, "Reshape", rs, 2, NULL, 0)), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

Test(layout, ops_between_convolutions_run_channels_last) {
    ampc_graph *a = mobile_block(AMPC_DTYPE_F16), *b = mobile_block(AMPC_DTYPE_F16);
    const char *off[1] = {"layout"};
    ampc_pipeline_options with = {.verify = true},
                          without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    char *ir = ampc_graph_to_text(a, false);
    cr_assert_eq(t_count_op(a, AMPC_OP_TRANSPOSE), 2, "x in and y out only:\n%s", ir);
    int32_t pools = 0;
    for (int32_t i = 0; i < a->n_nodes; i++) {
        const ampc_node *n = a->nodes[i];
        pools += (n->op == AMPC_OP_MAX_POOL || n->op == AMPC_OP_AVERAGE_POOL) && ampc_conv_channels_last(n);
        if (n->op == AMPC_OP_CONCAT) cr_assert_eq(ampc_ir_attr_int(a, n, "axis", 0), 3, "%s", ir);
        if (n->op == AMPC_OP_BATCH_NORM) cr_assert_eq(n->inputs[0]->shape.rank, 2, "%s", ir);
    }
    cr_assert_eq(pools, 2, "%s", ir);
    cr_assert_eq(t_count_op(a, AMPC_OP_REDUCE_MEAN), 1, "%s", ir);
    cr_assert_eq(t_count_op(a, AMPC_OP_GLOBAL_AVERAGE_POOL), 0, "%s", ir);
    free(ir);
    int16_t x[2 * 8 * 8 * 8];
    ampc_tensor in = t_tensor(AMPC_DTYPE_F16, SHAPE(2, 8, 8, 8), x), ya, yb;
    uint64_t seed = 9;
    fill(&in, "x", &seed);
    cr_assert_eq(ampc_graph_evaluate(a, &in, 1, &ya, 1), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, &in, 1, &yb, 1), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert(ampc_shape_eq(&ya.shape, &yb.shape));
    cr_assert_arr_eq(ya.data, yb.data, 2 * 16 * 4 * 4 * 2, "the same arithmetic in another layout");
    ampc_tensor_free(&ya);
    ampc_tensor_free(&yb);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

/* A MaxPool with its Indices output stays NCHW (its indices count NCHW positions). */
Test(layout, pool_with_indices_stays_nchw) {
    ampc_graph *g = ampc_graph_create("indices");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(1, 4, 8, 8));
    ampc_value *c1 = conv(g, x, 4, 4, 1, AMPC_DTYPE_F16);
    ampc_attr_arg win = AMPC_ATTR_IS("kernel_shape", ((int64_t[]){2, 2}), 2);
    ampc_value *outs[2];
    cr_assert_eq(ampc_op_multi(g, "MaxPool", &c1, 1, &win, 1, outs, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_output(g, outs[0], "y");
    ampc_output(g, outs[1], "i");
    ampc_pipeline_options o = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == AMPC_OP_MAX_POOL) cr_assert_not(ampc_conv_channels_last(g->nodes[i]));
    ampc_graph_destroy(g);
}

Test(layout, f32_convolutions_stay_nchw) {
    ampc_graph *g = block(AMPC_DTYPE_F32);
    ampc_pipeline_options o = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_TRANSPOSE), 0);
    for (int32_t i = 0; i < g->n_nodes; i++)
        cr_assert_null(ampc_ir_attr_find(g->nodes[i], "channels_last"));
    ampc_graph_destroy(g);
}

/* fp16 mode moves an f32 model to f16 first: its convolutions then go channels-last too. */
Test(layout, fp16_mode_then_channels_last) {
    ampc_graph *g = block(AMPC_DTYPE_F32);
    ampc_pipeline_options o = {.verify = true, .precision = AMPC_PRECISION_FP16};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_TRANSPOSE), 1);
    ampc_graph_destroy(g);
}

/* On by default (also with no options); keep_nchw (--layout nchw) turns it off. */
Test(layout, on_by_default_off_with_keep_nchw) {
    ampc_graph *g = block(AMPC_DTYPE_F16), *h = block(AMPC_DTYPE_F16);
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_TRANSPOSE), 1);
    ampc_pipeline_options o = {.verify = true, .keep_nchw = true};
    cr_assert_eq(ampc_graph_optimize(h, &o), AMPC_OK, "%s", ampc_graph_errors(h));
    cr_assert_eq(t_count_op(h, AMPC_OP_TRANSPOSE), 0);
    for (int32_t i = 0; i < h->n_nodes; i++)
        cr_assert_null(ampc_ir_attr_find(h->nodes[i], "channels_last"));
    ampc_graph_destroy(g);
    ampc_graph_destroy(h);
}

/* The residual block channels-last on the GPU against the reference, through cuDNN's legacy
 * calls (AMPC_CUDNN_GRAPH=0) or its graph API (conv, bias, residual and ReLU as one operation
 * graph; AMPC_CUDNN_GRAPH=1 makes a step that finds no graph engine fail, so the check passes
 * only when every convolution ran that way). The default, the faster of the two per
 * convolution, runs in the precision and benchmark runs. */
static void block_on_gpu(ampc_dtype t, bool graph_api) {
    static const ampc_pipeline_options nhwc = {.verify = true};
    setenv("AMPC_CUDNN_GRAPH", graph_api ? "1" : "0", 1);
    double tol = t == AMPC_DTYPE_F16 ? 1e-2 : 4e-2;
    char what[64];
    snprintf(what, sizeof what, "%s NHWC, %s", t == AMPC_DTYPE_F16 ? "f16" : "bf16",
             graph_api ? "graph API" : "legacy calls");
    t_gpu_check c = {.fill = fill, .seed = graph_api ? 3 : 2, .rtol = tol, .atol = tol,
                     .what = what, .pipeline = &nhwc};
    t_gpu_vs_reference(block(t), &c);
}

Test(layout_gpu, residual_block_on_cudnn_legacy_nhwc) { block_on_gpu(AMPC_DTYPE_F16, false); }
Test(layout_gpu, residual_block_bf16_on_cudnn_legacy_nhwc) { block_on_gpu(AMPC_DTYPE_BF16, false); }
Test(layout_gpu, residual_block_on_cudnn_graph_api) { block_on_gpu(AMPC_DTYPE_F16, true); }
Test(layout_gpu, residual_block_bf16_on_cudnn_graph_api) { block_on_gpu(AMPC_DTYPE_BF16, true); }

/* The mobile block's ops channels-last on the GPU (a ReduceMean over H and W, channels-last
 * pools, BatchNormalization on rows, broadcasts along the last axis) against the reference. */
Test(layout_gpu, ops_between_convolutions_channels_last) {
    static const ampc_pipeline_options nhwc = {.verify = true};
    t_gpu_check c = {.fill = fill, .seed = 4, .rtol = 1e-2, .atol = 1e-2,
                     .what = "f16 mobile block NHWC", .pipeline = &nhwc};
    t_gpu_vs_reference(mobile_block(AMPC_DTYPE_F16), &c);
}
