/*
 * test_fuse_matmul.c — the fuse-matmul pass: MatMul by a matrix -> Add(bias) -> Add(residual) ->
 * Relu (and every prefix of it) becomes one ampc.FusedMatMul where the chain's last node was;
 * what must not fuse stays (a batched B, f64, a bias that broadcasts rows, a value used twice);
 * a Reshape of the product's rows in the chain (nn.Linear on flattened rows, reshaped back before
 * the residual Add) folds with what follows it;
 * the fused graph computes what the unfused one did (reference evaluator); it compiles to one
 * cuBLASLt step; on a GPU machine it matches the reference.
 */
#include "support.h"

#include "passes/passes.h"

#include <string.h>

static ampc_value *weights(ampc_graph *g, int64_t k, int64_t n, int salt) {
    double w[16 * 16];
    for (int i = 0; i < k * n; i++) w[i] = ((i * 7 + salt) % 13 - 6) / 8.0;
    return t_const_f32(g, SHAPE(k, n), w);
}

/* y = [relu](x @ W + b [+ r]), x [2, 5, 8], W [8, 6]; r = x2 @ W2 computed AFTER the MatMul. */
static ampc_graph *chain(bool bias, bool residual, bool relu) {
    ampc_graph *g = ampc_graph_create("chain");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 5, 8));
    ampc_value *x2 = t_input(g, "x2", AMPC_DTYPE_F32, SHAPE(2, 5, 4));
    ampc_value *y = ampc_matmul(g, x, weights(g, 8, 6, 1));
    ampc_value *r = ampc_matmul(g, x2, weights(g, 4, 6, 2));
    double b[6] = {0.5, -0.25, 1, -1, 0.125, 2};
    if (bias) y = ampc_add(g, t_const_f32(g, SHAPE(6), b), y); /* bias first, as torch exports */
    if (residual) y = ampc_add(g, y, ampc_relu(g, r));
    else ampc_output(g, r, "r");
    if (relu) y = ampc_relu(g, y);
    ampc_output(g, y, "y");
    return g;
}

static void check_variant(bool bias, bool residual, bool relu) {
    ampc_graph *a = chain(bias, residual, relu), *b = chain(bias, residual, relu);
    const char *off[1] = {"fuse-matmul"};
    ampc_pipeline_options with = {.verify = true}, without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    bool any = bias || residual || relu;
    /* With a residual, r = relu(x2 @ W2) is a chain of its own and fuses too. */
    cr_assert_eq(t_count_op(a, AMPC_OP_FUSED_MATMUL), any ? (residual ? 2 : 1) : 0);
    cr_assert_eq(t_count_op(a, AMPC_OP_ADD), 0, "every Add folded");
    float x[2 * 5 * 8], x2[2 * 5 * 4];
    uint64_t seed = 5;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2, 5, 8), x),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2, 5, 4), x2)};
    t_fill_uniform_f32(&in[0], "x", &seed);
    t_fill_uniform_f32(&in[1], "x2", &seed);
    int32_t no = ampc_graph_output_count(a);
    ampc_tensor ya[2], yb[2];
    cr_assert_eq(ampc_graph_evaluate(a, in, 2, ya, no), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, in, 2, yb, no), AMPC_OK, "%s", ampc_graph_errors(b));
    char msg[512];
    for (int32_t i = 0; i < no; i++) {
        cr_assert(t_tensors_close(&ya[i], &yb[i], 1e-6, 1e-6, "y", msg, sizeof msg), "%s", msg);
        ampc_tensor_free(&ya[i]);
        ampc_tensor_free(&yb[i]);
    }
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(fuse_matmul, bias_residual_relu) { check_variant(true, true, true); }
Test(fuse_matmul, bias_residual) { check_variant(true, true, false); }
Test(fuse_matmul, bias_only) { check_variant(true, false, false); }
Test(fuse_matmul, relu_only) { check_variant(false, false, true); }

Test(fuse_matmul, the_fused_node_follows_its_inputs) {
    ampc_graph *g = chain(true, true, true);
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->op != AMPC_OP_FUSED_MATMUL || n->n_inputs < 4) continue;
        const ampc_node *zp = n->inputs[3]->producer;
        cr_assert(zp && zp->id < n->id, "the residual is produced before the fused node");
        cr_assert_eq(n->inputs[2]->shape.dims[0], 6);
        cr_assert_str_eq(n->outputs[0]->name, "y");
        cr_assert_not_null(ampc_ir_attr_find(n, "activation"));
    }
    ampc_graph_destroy(g);
}

Test(fuse_matmul, what_must_not_fuse_stays) {
    ampc_graph *g = ampc_graph_create("nofuse");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 5, 8));
    ampc_value *wb = t_input(g, "wb", AMPC_DTYPE_F32, SHAPE(2, 8, 6));  /* batched B */
    ampc_output(g, ampc_relu(g, ampc_matmul(g, x, wb)), "out_a");
    double rows[5 * 6] = {0};
    ampc_value *m2 = ampc_matmul(g, x, weights(g, 8, 6, 3));             /* bias [5,6] broadcasts */
    ampc_output(g, ampc_add(g, m2, t_const_f32(g, SHAPE(5, 6), rows)), "out_b");
    ampc_value *m3 = ampc_matmul(g, x, weights(g, 8, 6, 4));             /* used twice */
    ampc_output(g, ampc_add(g, ampc_relu(g, m3), m3), "out_c");
    ampc_value *xd = t_input(g, "xd", AMPC_DTYPE_F64, SHAPE(2, 8));      /* f64 */
    ampc_value *wd = t_input(g, "wd", AMPC_DTYPE_F64, SHAPE(8, 3));
    ampc_output(g, ampc_relu(g, ampc_matmul(g, xd, wd)), "out_d");
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_FUSED_MATMUL), 0);
    cr_assert_eq(t_count_op(g, AMPC_OP_MATMUL), 4);
    ampc_graph_destroy(g);
}

/* y = GELU(x @ W + b) in dtype t (x an f32 input [16, 64], cast), pre-activations spread over
 * about [-6, 6]. */
static ampc_graph *gelu_graph(ampc_dtype t) {
    ampc_graph *g = ampc_graph_create("gelu");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(16, 64));
    if (t != AMPC_DTYPE_F32) x = ampc_cast(g, x, t);
    double w[64 * 32], b[32];
    for (int i = 0; i < 64 * 32; i++) w[i] = ((i * 7) % 13 - 6) / 64.0;
    for (int i = 0; i < 32; i++) b[i] = (i % 13 - 6);
    ampc_value *wv = t_const_f32(g, SHAPE(64, 32), w), *bv = t_const_f32(g, SHAPE(32), b);
    if (t != AMPC_DTYPE_F32) wv = ampc_cast(g, wv, t), bv = ampc_cast(g, bv, t);
    ampc_output(g, ampc_gelu(g, ampc_add(g, ampc_matmul(g, x, wv), bv)), "y");
    return g;
}

/* With fast_gelu the erf GELU after an f16 product becomes the tanh form in the epilogue
 * ("GeluTanh"), within 4.8e-4 of the erf form on the reference evaluator, plus two f16 roundings
 * (the unfused graph rounds the product and the bias Add too); by default (exact), or after an
 * f32 product, the GELU stays. */
Test(fuse_matmul, erf_gelu_after_f16_becomes_the_tanh_epilogue) {
    for (int c = 0; c < 3; c++) {
        ampc_dtype t = c == 2 ? AMPC_DTYPE_F32 : AMPC_DTYPE_F16;
        ampc_graph *a = gelu_graph(t), *ref = gelu_graph(t);
        ampc_pipeline_options po = {.verify = true, .fast_gelu = c != 1};
        cr_assert_eq(ampc_graph_optimize(a, &po), AMPC_OK, "%s", ampc_graph_errors(a));
        cr_assert_eq(t_count_op(a, AMPC_OP_GELU), c == 0 ? 0 : 1, "case %d", c);
        cr_assert_eq(t_count_op(a, AMPC_OP_FUSED_MATMUL), 1, "case %d", c);
        const ampc_attr *act = NULL;
        for (int32_t i = 0; i < a->n_nodes; i++)
            if (a->nodes[i]->op == AMPC_OP_FUSED_MATMUL) act = ampc_ir_attr_find(a->nodes[i], "activation");
        if (c == 0) cr_assert(act && !strcmp(act->s, "GeluTanh"), "no GeluTanh activation");
        else cr_assert_null(act, "case %d took the GELU", c);
        float xf[16 * 64];
        uint64_t seed = 9;
        ampc_tensor x = t_tensor(AMPC_DTYPE_F32, SHAPE(16, 64), xf);
        t_fill_uniform_f32(&x, "x", &seed);
        t_expect_same_outputs(ref, a, &x, 1, 1.0 / 512, 4.8e-4);
        ampc_graph_destroy(a), ampc_graph_destroy(ref);
    }
}

/* Without a GPU: the full chain compiles to one cuBLASLt step per MatMul. */
Test(fuse_matmul, one_step_per_matmul, .timeout = 60) {
    ampc_graph *g = chain(true, true, true);
    static const int32_t none = 0;
    ampc_compile_options o = {.archs = &none, .n_archs = 0, .cache_dir = ""};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_module_step_count(m), 2, "two GEMMs, nothing else");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

static void tol(ampc_dtype t, double *rtol, double *atol) {
    (void)t;
    *rtol = 1e-4, *atol = 1e-4;
}

Test(fuse_matmul, gpu_matches_the_reference, .timeout = 120) {
    t_gpu_check chk = {.fill = t_fill_uniform_f32, .seed = 3, .tolerance = tol, .what = "bias+residual+relu"};
    t_gpu_vs_reference(chain(true, true, true), &chk);
}

/* nn.Linear exports Gemm(transB=1) with a bias: the first layer's ReLU folds into it (B is
 * transposed once at compile time); the last Gemm, with nothing after it, stays a Gemm. */
static ampc_graph *mlp(void) {
    ampc_graph *g = ampc_graph_create("mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 8));
    double w1[6 * 8], b1[6], w2[3 * 6], b2[3];
    for (int i = 0; i < 6 * 8; i++) w1[i] = ((i * 5) % 11 - 5) / 8.0;
    for (int i = 0; i < 6; i++) b1[i] = (i - 3) / 4.0;
    for (int i = 0; i < 3 * 6; i++) w2[i] = ((i * 3) % 7 - 3) / 4.0;
    for (int i = 0; i < 3; i++) b2[i] = i / 2.0;
    ampc_value *h = ampc_relu(g, ampc_gemm(g, x, t_const_f32(g, SHAPE(6, 8), w1),
                                           t_const_f32(g, SHAPE(6), b1), false, true));
    ampc_output(g, ampc_gemm(g, h, t_const_f32(g, SHAPE(3, 6), w2), t_const_f32(g, SHAPE(3), b2),
                             false, true), "logits");
    return g;
}

Test(fuse_matmul, linear_layers) {
    ampc_graph *a = mlp(), *b = mlp();
    const char *off[1] = {"fuse-matmul"};
    ampc_pipeline_options with = {.verify = true}, without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_FUSED_MATMUL), 1);
    cr_assert_eq(t_count_op(a, AMPC_OP_GEMM), 1);
    cr_assert_eq(t_count_op(a, AMPC_OP_RELU), 0);
    float x[4 * 8];
    uint64_t seed = 9;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(4, 8), x), ya, yb;
    t_fill_uniform_f32(&in, "x", &seed);
    cr_assert_eq(ampc_graph_evaluate(a, &in, 1, &ya, 1), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, &in, 1, &yb, 1), AMPC_OK, "%s", ampc_graph_errors(b));
    char msg[512];
    cr_assert(t_tensors_close(&ya, &yb, 1e-6, 1e-6, "logits", msg, sizeof msg), "%s", msg);
    ampc_tensor_free(&ya);
    ampc_tensor_free(&yb);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(fuse_matmul, linear_layers_gpu, .timeout = 120) {
    t_gpu_check chk = {.fill = t_fill_uniform_f32, .seed = 4, .tolerance = tol, .what = "linear layers"};
    t_gpu_vs_reference(mlp(), &chk);
}

/* GPT-2's projections: x [2, 5, 8] flattened to rows, a Gemm (transB, bias), the rows reshaped
 * back to [2, 5, 6] and added to r, then a Relu: one FusedMatMul of x's rows reshaped [2, 5, 8]. */
static ampc_graph *rows_reshaped(void) {
    ampc_graph *g = ampc_graph_create("rows");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 5, 8));
    ampc_value *r = t_input(g, "r", AMPC_DTYPE_F32, SHAPE(2, 5, 6));
    double w[6 * 8], b[6];
    for (int i = 0; i < 6 * 8; i++) w[i] = ((i * 5) % 11 - 5) / 8.0;
    for (int i = 0; i < 6; i++) b[i] = (i - 3) / 4.0;
    const int64_t flat[2] = {10, 8}, back[3] = {2, 5, 6};
    ampc_value *p = ampc_gemm(g, ampc_reshape(g, x, flat, 2), t_const_f32(g, SHAPE(6, 8), w),
                              t_const_f32(g, SHAPE(6), b), false, true);
    ampc_output(g, ampc_relu(g, ampc_add(g, ampc_reshape(g, p, back, 3), r)), "y");
    return g;
}

Test(fuse_matmul, a_reshape_of_the_rows_folds_with_what_follows) {
    ampc_graph *a = rows_reshaped(), *b = rows_reshaped();
    const char *off[1] = {"fuse-matmul"};
    ampc_pipeline_options with = {.verify = true}, without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_FUSED_MATMUL), 1, "%s", ampc_graph_to_text(a, false));
    cr_assert_eq(t_count_op(a, AMPC_OP_GEMM) + t_count_op(a, AMPC_OP_ADD) +
                     t_count_op(a, AMPC_OP_RELU), 0, "%s", ampc_graph_to_text(a, false));
    float x[2 * 5 * 8], r[2 * 5 * 6];
    uint64_t seed = 3;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2, 5, 8), x),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2, 5, 6), r)};
    t_fill_uniform_f32(&in[0], "x", &seed);
    t_fill_uniform_f32(&in[1], "r", &seed);
    t_expect_same_outputs(a, b, in, 2, 1e-6, 1e-6);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(fuse_matmul, a_reshape_of_the_rows_gpu, .timeout = 120) {
    t_gpu_check chk = {.fill = t_fill_uniform_f32, .seed = 6, .tolerance = tol,
                       .what = "a reshape of the rows"};
    t_gpu_vs_reference(rows_reshaped(), &chk);
}
