/*
 * test_layout.c — the layout pass: f16/bf16 2-D convolutions run channels-last with transposes
 * only where the layout changes (a residual block: four), the result bit for bit what the NCHW
 * graph computes on the reference evaluator, f32 convolutions untouched, a second run idle, on by
 * default and off with keep_nchw; and on the GPU (cuDNN with NHWC descriptors, legacy calls or
 * the graph API) against the reference.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "support.h"

#include "passes/passes.h"
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

Test(layout, residual_block_runs_channels_last_with_four_transposes) {
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
    cr_assert_eq(t_count_op(a, AMPC_OP_TRANSPOSE), 4, "x in, around the max pool, before the "
                 "global pool:\n%s", ampc_graph_to_text(a, false));
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
    a->channels_last = true;
    cr_assert_eq(ampc_pass_layout(a, &changed), AMPC_OK);
    cr_assert_not(changed);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
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
    cr_assert_eq(t_count_op(g, AMPC_OP_TRANSPOSE), 4);
    ampc_graph_destroy(g);
}

/* On by default (also with no options); keep_nchw (--layout nchw) turns it off. */
Test(layout, on_by_default_off_with_keep_nchw) {
    ampc_graph *g = block(AMPC_DTYPE_F16), *h = block(AMPC_DTYPE_F16);
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_TRANSPOSE), 4);
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
