/*
 * test_fuse_conv.c — the fuse-conv pass: Conv -> Relu and Conv -> Add(residual) [-> Relu] become
 * one ampc.FusedConv placed where the pattern's last node was (so a residual computed after the
 * Conv is still produced first); what must not fuse stays (a Conv output used twice, a graph
 * output, a broadcasting Add); the fused graph computes what the unfused one did (reference
 * evaluator), and on a GPU machine the fused op matches the reference through cuDNN and through
 * the generated direct kernel.
 */
#include "support.h"

#include "passes/passes.h"

#include <string.h>

static ampc_value *conv3x3(ampc_graph *g, ampc_value *x, int64_t c_in, int64_t c_out, uint64_t seed) {
    double w[8 * 8 * 9], b[8];
    for (int i = 0; i < c_out * c_in * 9; i++) w[i] = (double)((int)((seed + (uint64_t)i * 2654435761u) % 17) - 8) / 16;
    for (int i = 0; i < c_out; i++) b[i] = (i - 2) / 8.0;
    const int64_t pads[4] = {1, 1, 1, 1};
    return ampc_conv2d(g, x, t_const_f32(g, SHAPE(c_out, c_in, 3, 3), w),
                       t_const_f32(g, SHAPE(c_out), b), NULL, pads, NULL, 1);
}

/* A residual block: y = relu(conv2(relu(conv1(x))) + skip(x)), the skip a 3x3 conv computed
 * AFTER conv2 (as exporters order a downsample branch), plus a plain Conv -> Relu head. */
static ampc_graph *block(bool relu_after_add) {
    ampc_graph *g = ampc_graph_create("block");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4, 6, 6));
    ampc_value *h = ampc_relu(g, conv3x3(g, x, 4, 8, 1));
    ampc_value *c2 = conv3x3(g, h, 8, 8, 2);
    ampc_value *skip = conv3x3(g, x, 4, 8, 3);
    ampc_value *sum = ampc_add(g, c2, skip);
    ampc_output(g, relu_after_add ? ampc_relu(g, sum) : sum, "y");
    return g;
}

/* Evaluates g with and without the pass on the same input; asserts they agree. */
static void same_with_and_without(bool relu_after_add) {
    ampc_graph *a = block(relu_after_add), *b = block(relu_after_add);
    const char *off[1] = {"fuse-conv"};
    ampc_pipeline_options with = {.verify = true}, without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_FUSED_CONV), 2, "conv1+relu and conv2+add(+relu) fuse");
    cr_assert_eq(t_count_op(a, AMPC_OP_CONV), 1, "the skip conv feeds the fused node as z");
    cr_assert_eq(t_count_op(a, AMPC_OP_ADD) + t_count_op(a, AMPC_OP_RELU), 0);
    cr_assert_eq(t_count_op(b, AMPC_OP_FUSED_CONV), 0);
    float x[2 * 4 * 6 * 6];
    uint64_t seed = 7;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 4, 6, 6), x);
    t_fill_uniform_f32(&in, "x", &seed);
    ampc_tensor ya, yb;
    cr_assert_eq(ampc_graph_evaluate(a, &in, 1, &ya, 1), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, &in, 1, &yb, 1), AMPC_OK, "%s", ampc_graph_errors(b));
    char msg[512];
    /* One rounding instead of two or three: within a few f32 ulps. */
    cr_assert(t_tensors_close(&ya, &yb, 1e-6, 1e-6, "y", msg, sizeof msg), "%s", msg);
    ampc_tensor_free(&ya);
    ampc_tensor_free(&yb);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(fuse_conv, residual_block_with_relu) { same_with_and_without(true); }
Test(fuse_conv, residual_block_without_relu) { same_with_and_without(false); }

Test(fuse_conv, the_fused_node_keeps_the_order_and_the_name) {
    ampc_graph *g = block(true);
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    /* The skip conv (z of the second fused node) comes before it. */
    int32_t skip = -1, fused = -1;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i]->op == AMPC_OP_CONV) skip = i;
        if (g->nodes[i]->op == AMPC_OP_FUSED_CONV && g->nodes[i]->n_inputs == 4) fused = i;
    }
    cr_assert(skip >= 0 && fused > skip, "skip conv at %d, fused conv at %d", skip, fused);
    const ampc_node *f = g->nodes[fused];
    cr_assert_eq(f->inputs[3], g->nodes[skip]->outputs[0]);
    cr_assert_str_eq(ampc_ir_attr_find(f, "activation")->s, "Relu");
    cr_assert_str_eq(f->outputs[0]->name, "y", "the graph output keeps its name");
    char *text = ampc_graph_to_text(g, false);
    cr_assert(strstr(text, "ampc.FusedConv("), "%s", text);
    free(text);
    ampc_graph_destroy(g);
}

Test(fuse_conv, what_must_not_fuse_stays) {
    ampc_graph *g = ampc_graph_create("nofuse");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 4, 5, 5));
    ampc_value *c1 = conv3x3(g, x, 4, 4, 1);           /* used twice: stays */
    ampc_value *r1 = ampc_relu(g, c1);
    ampc_value *c2 = conv3x3(g, r1, 4, 4, 2);           /* Add broadcasts a [4,1,1]: stays */
    double bias[4] = {1, 2, 3, 4};
    ampc_value *a2 = ampc_add(g, c2, t_const_f32(g, SHAPE(4, 1, 1), bias));
    ampc_output(g, ampc_add(g, a2, c1), "y");
    ampc_value *c3 = conv3x3(g, x, 4, 4, 3);            /* a graph output: stays */
    ampc_output(g, c3, "c3");
    ampc_output(g, ampc_relu(g, c3), "r3");
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_FUSED_CONV), 0);
    cr_assert_eq(t_count_op(g, AMPC_OP_CONV), 3);
    bool changed = true;
    cr_assert_eq(ampc_pass_fuse_conv(g, NULL, &changed), AMPC_OK);
    cr_assert_not(changed, "a second run changes nothing");
    ampc_graph_destroy(g);
}

Test(fuse_conv, an_ampc_op_is_not_importable_by_name) {
    ampc_opcode op;
    cr_assert(ampc_op_from_onnx("ampc.FusedConv", &op) && op == AMPC_OP_FUSED_CONV);
    cr_assert(ampc_op_get(op)->traits & T_INTERNAL);
}

/* GPU: the fused op through cuDNN (f32 with bias and ReLU: the fused cuDNN call) and through
 * the generated direct kernel (asymmetric pads keep it off cuDNN). */
static void tol(ampc_dtype t, double *rtol, double *atol) {
    (void)t;
    *rtol = 1e-4, *atol = 1e-4;
}

Test(fuse_conv, gpu_matches_the_reference, .timeout = 120) {
    for (int pass = 0; pass < 2; pass++) {
        ampc_graph *g = block(true);
        if (pass == 1) { /* asymmetric pads on every conv: the direct kernel */
            ampc_graph_destroy(g);
            g = ampc_graph_create("asym");
            ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 4, 6, 6));
            double w[4 * 4 * 9], b[4] = {0.1, -0.2, 0.3, -0.4};
            for (int i = 0; i < 4 * 4 * 9; i++) w[i] = ((i * 7) % 11 - 5) / 8.0;
            const int64_t pads[4] = {0, 0, 2, 2};
            ampc_value *c = ampc_conv2d(g, x, t_const_f32(g, SHAPE(4, 4, 3, 3), w),
                                        t_const_f32(g, SHAPE(4), b), NULL, pads, NULL, 1);
            ampc_output(g, ampc_relu(g, ampc_add(g, c, x)), "y");
        }
        t_gpu_check chk = {.fill = t_fill_uniform_f32, .seed = 11, .tolerance = tol,
                           .what = pass ? "direct kernel" : "cuDNN"};
        t_gpu_vs_reference(g, &chk);
    }
}

/* Without a GPU: the fused block compiles to one cuDNN step per convolution, the residual and
 * ReLU folded into the steps (no elementwise kernels left). */
Test(fuse_conv, one_step_per_convolution, .timeout = 60) {
    ampc_graph *g = block(true);
    static const int32_t none = 0;
    ampc_compile_options o = {.archs = &none, .n_archs = 0, .cache_dir = ""};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_module_step_count(m), 3, "three convolutions, nothing else");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}
