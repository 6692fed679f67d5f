/*
 * test_precision.c — the precision pass under fp16 and bf16: where the casts go (golden IR), which
 * nodes stay f32 and why (policy, keep-fp32, range), how an exporter's f32 islands in an f16
 * model rejoin it, cast folding, the graph's interface kept, a second run changing nothing, and
 * the moved graph computing what the f32 graph computes within the low type's precision on the
 * reference evaluator (the GPU suites run the same graphs there).
 */
#include "support.h"

#include "passes/passes.h"
#include "compiler/auto_precision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ampc_graph *parse(const char *text) {
    ampc_graph *g = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &g, &err), AMPC_OK, "parse: %s", err);
    return g;
}

/* Runs the precision pass alone in `mode` and returns the printed graph (the caller frees it). */
static char *run_pass(ampc_graph *g, ampc_precision mode, const char *const *keep, int32_t n_keep,
                      bool *changed_out) {
    FILE *trace = tmpfile();
    ampc_pipeline_options o = {.verify = true, .precision = mode, .keep_fp32 = keep,
                               .n_keep_fp32 = n_keep, .trace = trace};
    cr_assert_eq(ampc_pipeline_run_pass(g, "precision", &o), AMPC_OK, "%s", ampc_graph_errors(g));
    rewind(trace);
    char line[128] = "";
    cr_assert(fgets(line, sizeof line, trace));
    fclose(trace);
    if (changed_out) *changed_out = strstr(line, "changed yes") != NULL;
    return ampc_graph_to_text(g, false);
}

static void expect_text(ampc_graph *g, ampc_precision mode, const char *want) {
    bool changed;
    char *got = run_pass(g, mode, NULL, 0, &changed);
    cr_assert_str_eq(got, want, "got:\n%s", got);
    cr_assert(changed);
    free(got);
}

/* A second run finds nothing left to do and leaves the text as it is. */
static void expect_second_run_idle(ampc_graph *g, ampc_precision mode) {
    char *first = ampc_graph_to_text(g, false);
    bool changed;
    char *got = run_pass(g, mode, NULL, 0, &changed);
    cr_assert_not(changed, "second run changed the graph:\n%s", got);
    cr_assert_str_eq(got, first);
    free(got);
    free(first);
}

static const char *mlp =
    "graph \"mlp\" {\n"
    "  input %x : f32[2,4]\n"
    "  const %w : f32[4,3] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n"
    "  const %b : f32[3] = [0.5, -0.5, 1]\n"
    "  %h : f32[2,3] = MatMul(%x, %w) @\"fc\"\n"
    "  %hb : f32[2,3] = Add(%h, %b) @\"bias\"\n"
    "  %y : f32[2,3] = Relu(%hb) @\"relu\"\n"
    "  output %y\n"
    "}\n";

Test(precision, moves_an_mlp_and_keeps_its_interface) {
    ampc_graph *g = parse(mlp);
    expect_text(g, AMPC_PRECISION_FP16,
                "graph \"mlp\" {\n"
                "  input %x : f32[2,4]\n"
                "  const %w_f16 : f16[4,3] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n"
                "  const %b_f16 : f16[3] = [0.5, -0.5, 1]\n"
                "  %x_to_f16 : f16[2,4] = Cast(%x) {to = 10} @\"x_to_f16\"\n"
                "  %h : f16[2,3] = MatMul(%x_to_f16, %w_f16) @\"fc\"\n"
                "  %hb : f16[2,3] = Add(%h, %b_f16) @\"bias\"\n"
                "  %y_f16 : f16[2,3] = Relu(%hb) @\"relu\"\n"
                "  %y : f32[2,3] = Cast(%y_f16) {to = 1} @\"y_to_f32\"\n"
                "  output %y\n"
                "}\n");
    expect_second_run_idle(g, AMPC_PRECISION_FP16);
    ampc_graph_destroy(g);
}

Test(precision, bf16_moves_the_same_way) {
    ampc_graph *g = parse(mlp);
    char *t = run_pass(g, AMPC_PRECISION_BF16, NULL, 0, NULL);
    cr_assert(strstr(t, "%h : bf16[2,3] = MatMul(%x_to_bf16, %w_bf16)"), "%s", t);
    cr_assert(strstr(t, "%y : f32[2,3] = Cast(%y_bf16) {to = 1} @\"y_to_f32\""), "%s", t);
    free(t);
    cr_assert_eq(g->nodes[1]->prec_why, PREC_WHY_LOW);
    ampc_graph_destroy(g);
}

Test(precision, keep_mode_changes_nothing) {
    ampc_graph *g = parse(mlp);
    bool changed;
    char *t = run_pass(g, AMPC_PRECISION_KEEP, NULL, 0, &changed);
    cr_assert_not(changed);
    cr_assert_str_eq(t, mlp);
    free(t);
    ampc_graph_destroy(g);
}

/* An F32-policy op between low nodes: its input comes back to f32, its output goes low again
 * for the FOLLOW node after it, because that node's other input arrives low. */
Test(precision, f32_policy_ops_get_their_inputs_back) {
    ampc_graph *g = parse("graph \"e\" {\n"
                          "  input %x : f32[2,2]\n"
                          "  input %w : f32[2,2]\n"
                          "  %m : f32[2,2] = MatMul(%x, %w) @\"mm\"\n"
                          "  %e : f32[2,2] = Exp(%m) @\"exp\"\n"
                          "  %s : f32[2,2] = Add(%e, %m) @\"add\"\n"
                          "  output %s\n"
                          "}\n");
    expect_text(g, AMPC_PRECISION_FP16,
                "graph \"e\" {\n"
                "  input %x : f32[2,2]\n"
                "  input %w : f32[2,2]\n"
                "  %x_to_f16 : f16[2,2] = Cast(%x) {to = 10} @\"x_to_f16\"\n"
                "  %w_to_f16 : f16[2,2] = Cast(%w) {to = 10} @\"w_to_f16\"\n"
                "  %m : f16[2,2] = MatMul(%x_to_f16, %w_to_f16) @\"mm\"\n"
                "  %m_to_f32 : f32[2,2] = Cast(%m) {to = 1} @\"m_to_f32\"\n"
                "  %e : f32[2,2] = Exp(%m_to_f32) @\"exp\"\n"
                "  %e_to_f16 : f16[2,2] = Cast(%e) {to = 10} @\"e_to_f16\"\n"
                "  %s_f16 : f16[2,2] = Add(%e_to_f16, %m) @\"add\"\n"
                "  %s : f32[2,2] = Cast(%s_f16) {to = 1} @\"s_to_f32\"\n"
                "  output %s\n"
                "}\n");
    cr_assert_eq(g->nodes[4]->prec_why, PREC_WHY_POLICY, "Exp: %s",
                 ampc_prec_why_str(g->nodes[4]->prec_why));
    cr_assert_eq(g->nodes[6]->prec_why, PREC_WHY_FOLLOW);
    expect_second_run_idle(g, AMPC_PRECISION_FP16);
    ampc_graph_destroy(g);
}

/* A FOLLOW node whose inputs all arrive f32 stays f32: the input normalisation before a network's
 * first convolution costs no casts. */
Test(precision, follow_ops_stay_f32_when_nothing_arrives_low) {
    ampc_graph *g = parse("graph \"n\" {\n"
                          "  input %x : f32[4]\n"
                          "  const %c : f32[4] = [1, 2, 3, 4]\n"
                          "  %a : f32[4] = Sub(%x, %c) @\"sub\"\n"
                          "  %y : f32[4] = Relu(%a) @\"relu\"\n"
                          "  output %y\n"
                          "}\n");
    bool changed;
    char *t = run_pass(g, AMPC_PRECISION_FP16, NULL, 0, &changed);
    cr_assert_not(changed, "%s", t);
    cr_assert(strstr(t, "%a : f32[4] = Sub(%x, %c)"), "%s", t);
    cr_assert_eq(g->nodes[0]->prec_why, PREC_WHY_FOLLOW);
    free(t);
    ampc_graph_destroy(g);
}

Test(precision, keep_fp32_by_op_or_node_name) {
    const char *by_op[1] = {"MatMul"}, *by_name[1] = {"bias"};
    ampc_graph *g = parse(mlp);
    char *t = run_pass(g, AMPC_PRECISION_FP16, by_op, 1, NULL);
    cr_assert(strstr(t, "%h : f32[2,3] = MatMul(%x, %w)"), "%s", t);
    cr_assert_eq(g->nodes[0]->prec_why, PREC_WHY_KEEP);
    /* Nothing arrives low after it: the rest stays f32 too, and no cast is left. */
    cr_assert_null(strstr(t, "Cast"), "%s", t);
    free(t);
    ampc_graph_destroy(g);

    g = parse(mlp);
    t = run_pass(g, AMPC_PRECISION_FP16, by_name, 1, NULL);
    cr_assert(strstr(t, "%h_to_f32 : f32[2,3] = Cast(%h) {to = 1}"), "%s", t);
    cr_assert(strstr(t, "%hb : f32[2,3] = Add(%h_to_f32, %b)"), "%s", t);
    cr_assert(strstr(t, "%y : f32[2,3] = Relu(%hb)"), "the Relu follows its f32 input:\n%s", t);
    free(t);
    ampc_graph_destroy(g);
}

Test(precision, keep_fp32_naming_nothing_is_an_error) {
    const char *keep[1] = {"Sofmax"};
    ampc_graph *g = parse(mlp);
    ampc_pipeline_options o = {.verify = true, .precision = AMPC_PRECISION_FP16,
                               .keep_fp32 = keep, .n_keep_fp32 = 1};
    cr_assert_eq(ampc_pipeline_run_pass(g, "precision", &o), AMPC_E_INVALID_ARG);
    t_expect_diag(g, "keep-fp32 'Sofmax' names no node and no op of graph 'mlp' (give a node name "
                     "or an ONNX op type such as Softmax)");
    ampc_graph_destroy(g);
}

/* A constant beyond f16's largest finite value (65504) would become infinity: its node stays
 * f32 in fp16, and moves in bf16, whose range is f32's. */
Test(precision, constants_beyond_f16_range_keep_their_node) {
    const char *text = "graph \"r\" {\n"
                       "  input %x : f32[2,2]\n"
                       "  input %w : f32[2,2]\n"
                       "  const %big : f32[] = [100000]\n"
                       "  %m : f32[2,2] = MatMul(%x, %w) @\"mm\"\n"
                       "  %y : f32[2,2] = Mul(%m, %big) @\"scale\"\n"
                       "  output %y\n"
                       "}\n";
    ampc_graph *g = parse(text);
    char *t = run_pass(g, AMPC_PRECISION_FP16, NULL, 0, NULL);
    cr_assert(strstr(t, "%y : f32[2,2] = Mul(%m_to_f32, %big)"), "%s", t);
    cr_assert_eq(g->nodes[g->n_nodes - 1]->prec_why, PREC_WHY_RANGE);
    free(t);
    ampc_graph_destroy(g);
    g = parse(text);
    t = run_pass(g, AMPC_PRECISION_BF16, NULL, 0, NULL);
    cr_assert(strstr(t, "bf16[2,2] = Mul(%m, %big_bf16)"), "%s", t);
    free(t);
    ampc_graph_destroy(g);
}

/* bf16: a residual Add that meets an f32 value stays f32 (the widest type wins) and the
 * LayerNormalization stays f32 (NORM policy): the residual stream keeps f32, the matmul does not. */
Test(precision, bf16_keeps_the_residual_stream_f32) {
    ampc_graph *g = parse("graph \"res\" {\n"
                          "  input %x : f32[2,4]\n"
                          "  input %w : f32[4,4]\n"
                          "  const %s : f32[4] = [1, 1, 1, 1]\n"
                          "  %h : f32[2,4] = MatMul(%x, %w) @\"mm\"\n"
                          "  %r : f32[2,4] = Add(%h, %x) @\"residual\"\n"
                          "  %n : f32[2,4] = LayerNormalization(%r, %s) {axis = -1} @\"ln\"\n"
                          "  output %n\n"
                          "}\n");
    char *t = run_pass(g, AMPC_PRECISION_BF16, NULL, 0, NULL);
    cr_assert(strstr(t, "%h : bf16[2,4] = MatMul(%x_to_bf16, %w_to_bf16)"), "%s", t);
    cr_assert(strstr(t, "%r : f32[2,4] = Add(%h_to_f32, %x)"), "%s", t);
    cr_assert(strstr(t, "%n : f32[2,4] = LayerNormalization(%r, %s)"), "%s", t);
    free(t);
    cr_assert_eq(g->nodes[g->n_nodes - 1]->prec_why, PREC_WHY_POLICY);
    ampc_graph_destroy(g);
    /* fp16 runs the same graph low from the MatMul on. */
    g = parse("graph \"res\" {\n"
              "  input %x : f32[2,4]\n"
              "  input %w : f32[4,4]\n"
              "  %h : f32[2,4] = MatMul(%x, %w) @\"mm\"\n"
              "  %r : f32[2,4] = Add(%h, %x) @\"residual\"\n"
              "  output %r\n"
              "}\n");
    t = run_pass(g, AMPC_PRECISION_FP16, NULL, 0, NULL);
    cr_assert(strstr(t, "%r_f16 : f16[2,4] = Add(%h, %x_to_f16)"), "%s", t);
    free(t);
    ampc_graph_destroy(g);
}

/* torch's export of a half() transformer: f16 activations cast to f32 around LayerNormalization
 * (with f32 scale and bias) and cast back. The island joins the f16 graph and no cast is left. */
Test(precision, exported_f32_islands_rejoin_the_f16_graph) {
    ampc_graph *g = parse("graph \"ln\" {\n"
                          "  input %x : f16[2,4]\n"
                          "  const %s : f32[4] = [1, 1, 1, 1]\n"
                          "  const %b : f32[4] = [0, 0, 0, 0]\n"
                          "  %x32 : f32[2,4] = Cast(%x) {to = 1} @\"up\"\n"
                          "  %n : f32[2,4] = LayerNormalization(%x32, %s, %b) {axis = -1} @\"ln\"\n"
                          "  %y : f16[2,4] = Cast(%n) {to = 10} @\"down\"\n"
                          "  %z : f16[2,4] = Relu(%y) @\"relu\"\n"
                          "  output %z\n"
                          "}\n");
    expect_text(g, AMPC_PRECISION_FP16,
                "graph \"ln\" {\n"
                "  input %x : f16[2,4]\n"
                "  const %s_f16 : f16[4] = [1, 1, 1, 1]\n"
                "  const %b_f16 : f16[4] = [0, 0, 0, 0]\n"
                "  %n : f16[2,4] = LayerNormalization(%x, %s_f16, %b_f16) {axis = -1} @\"ln\"\n"
                "  %z : f16[2,4] = Relu(%n) @\"relu\"\n"
                "  output %z\n"
                "}\n");
    expect_second_run_idle(g, AMPC_PRECISION_FP16);
    ampc_graph_destroy(g);
}

/* The moved graph against the f32 graph on the reference evaluator: a small network with a
 * convolution, a residual, a softmax and a LayerNorm, all of it moved, within f16's (bf16's)
 * precision. */
static ampc_graph *small_net(void) {
    ampc_graph *g = ampc_graph_create("net");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 2, 6, 6));
    double w[3 * 2 * 3 * 3], b[3], s[6], z[6];
    for (int i = 0; i < 54; i++) w[i] = sin(i * 0.7) * 0.4;
    for (int i = 0; i < 3; i++) b[i] = 0.1 * i - 0.1;
    for (int i = 0; i < 6; i++) s[i] = 1 + 0.1 * i, z[i] = 0.05 * i;
    ampc_value *in[3] = {x, t_const_f32(g, SHAPE(3, 2, 3, 3), w), t_const_f32(g, SHAPE(3), b)};
    ampc_attr_arg pads = AMPC_ATTR_IS("pads", ((int64_t[]){1, 1, 1, 1}), 4);
    ampc_value *c = ampc_op(g, "Conv", in, 3, &pads, 1);
    ampc_value *r = ampc_op(g, "Relu", &c, 1, NULL, 0);
    ampc_value *sm = ampc_op(g, "Softmax", &r, 1, NULL, 0);
    ampc_value *ln_in[3] = {ampc_add(g, sm, r), t_const_f32(g, SHAPE(6), s), t_const_f32(g, SHAPE(6), z)};
    ampc_value *ln = ampc_op(g, "LayerNormalization", ln_in, 3, NULL, 0);
    ampc_output(g, ln, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static void check_against_f32(ampc_precision mode, double tol) {
    ampc_graph *a = small_net(), *b = small_net();
    ampc_pipeline_options o = {.verify = true, .precision = mode};
    cr_assert_eq(ampc_graph_optimize(a, &o), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(t_count_op(a, AMPC_OP_CAST), 2, "one cast in, one out");
    ampc_value *y = a->outputs[0];
    cr_assert_eq(y->dtype, AMPC_DTYPE_F32);
    cr_assert_str_eq(y->name, "y");
    float x[72];
    for (int i = 0; i < 72; i++) x[i] = (float)cos(i * 0.31);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(1, 2, 6, 6), x), ya, yb;
    cr_assert_eq(ampc_graph_evaluate(a, &in, 1, &ya, 1), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, &in, 1, &yb, 1), AMPC_OK, "%s", ampc_graph_errors(b));
    char msg[512];
    cr_assert(t_tensors_close(&ya, &yb, tol, tol, "y", msg, sizeof msg), "%s", msg);
    /* ...and not equal: the low type did round somewhere. */
    cr_assert(memcmp(ya.data, yb.data, 108 * sizeof(float)) != 0);
    ampc_tensor_free(&ya);
    ampc_tensor_free(&yb);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(precision, fp16_network_matches_f32_on_the_reference) { check_against_f32(AMPC_PRECISION_FP16, 1e-2); }
Test(precision, bf16_network_matches_f32_on_the_reference) { check_against_f32(AMPC_PRECISION_BF16, 4e-2); }

/* ---- on the GPU: the moved graph against the f32 graph on the reference evaluator ----------- */

static void fill_cos(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    float *x = t->data;
    for (int64_t i = 0, n = ampc_shape_numel(&t->shape); i < n; i++)
        x[i] = (float)cos((double)(i + (int64_t)*seed) * 0.31);
}

static void gpu_check(ampc_graph *g, ampc_precision mode, double tol, const char *what) {
    ampc_pipeline_options o = {.verify = true, .precision = mode};
    t_gpu_check c = {.fill = fill_cos, .seed = 1, .rtol = tol, .atol = tol, .pipeline = &o,
                     .what = what};
    t_gpu_vs_reference(g, &c);
}

Test(precision_gpu, fp16_network) { gpu_check(small_net(), AMPC_PRECISION_FP16, 1e-2, "fp16"); }
Test(precision_gpu, bf16_network) { gpu_check(small_net(), AMPC_PRECISION_BF16, 4e-2, "bf16"); }

/* Activations whose squares leave f16's range (|x| up to 400, x^2 up to 1.6e5 > 65504): a
 * LayerNormalization that summed squares in f16 would overflow; in fp16 mode the tensors are f16
 * and the statistics f32, and the output stays right. */
static void fill_large(ampc_tensor *t, const char *name, uint64_t *seed) {
    fill_cos(t, name, seed);
    float *x = t->data;
    for (int64_t i = 0, n = ampc_shape_numel(&t->shape); i < n; i++) x[i] *= 400.0f;
}

static ampc_graph *layer_norm_large(void *user) {
    (void)user;
    ampc_graph *g = ampc_graph_create("ln_large");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 768));
    double s[768], b[768];
    for (int i = 0; i < 768; i++) s[i] = 1 + 0.001 * i, b[i] = 0.01 * (i % 7);
    ampc_value *in[3] = {x, t_const_f32(g, SHAPE(768), s), t_const_f32(g, SHAPE(768), b)};
    ampc_output(g, ampc_op(g, "LayerNormalization", in, 3, NULL, 0), "y");
    return g;
}

Test(precision_gpu, layer_norm_of_large_activations_in_fp16) {
    ampc_graph *g = layer_norm_large(NULL);
    ampc_pipeline_options o = {.verify = true, .precision = AMPC_PRECISION_FP16};
    t_gpu_check c = {.fill = fill_large, .seed = 3, .rtol = 1e-2, .atol = 1e-2, .pipeline = &o,
                     .what = "fp16 LayerNormalization, |x| <= 400"};
    t_gpu_vs_reference(g, &c);
}

/* TF32 against full f32 on a large GEMM (1024^3, values in [-1, 1)): TF32 rounds each operand to
 * a 10-bit mantissa, so an element may be off by up to 2^-10 of the sum of |a_k b_k| (each product
 * within 2 * 2^-11 of exact, f32 accumulation far below that); full f32 must be far closer. */
static double gemm_error(bool tf32, double *bound) {
    enum { N = 1024 };
    ampc_graph *g = ampc_graph_create("gemm");
    ampc_value *in[2] = {t_input(g, "a", AMPC_DTYPE_F32, SHAPE(N, N)),
                         t_input(g, "b", AMPC_DTYPE_F32, SHAPE(N, N))};
    ampc_output(g, ampc_op(g, "MatMul", in, 2, NULL, 0), "y");
    float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N);
    uint64_t seed = 7;
    ampc_tensor t[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(N, N), a), t_tensor(AMPC_DTYPE_F32, SHAPE(N, N), b)};
    t_fill_uniform_f32(&t[0], "a", &seed);
    t_fill_uniform_f32(&t[1], "b", &seed);
    ampc_tensor ref;
    cr_assert_eq(ampc_graph_evaluate(g, t, 2, &ref, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    *bound = 0;
    for (int i = 0; i < N; i += 97) /* sum |a_ik b_kj| over a sample of rows, all columns */
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < N; k++) s += fabs((double)a[i * N + k] * b[k * N + j]);
            if (s > *bound) *bound = s;
        }
    *bound *= ldexp(1, -10);
    static const int32_t none = 0;
    ampc_compile_options o = {.archs = &none, .n_archs = 0, .cache_dir = "", .no_tf32 = !tf32};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    float *y = malloc(sizeof(float) * N * N);
    ampc_tensor got = t_tensor(AMPC_DTYPE_F32, SHAPE(N, N), y);
    cr_assert_eq(ampc_module_run(m, t, 2, &got, 1, NULL), AMPC_OK, "%s", ampc_module_errors(m));
    double worst = 0;
    for (int64_t i = 0; i < (int64_t)N * N; i++) {
        double d = fabs((double)y[i] - ((const float *)ref.data)[i]);
        if (d > worst) worst = d;
    }
    ampc_module_destroy(m);
    ampc_tensor_free(&ref);
    free(a), free(b), free(y);
    ampc_graph_destroy(g);
    return worst;
}

Test(precision_gpu, tf32_against_fp32_on_a_large_gemm) {
    t_skip_without_gpu();
    double bound, bound32;
    double e_tf32 = gemm_error(true, &bound), e_fp32 = gemm_error(false, &bound32);
    cr_log_info("1024^3 GEMM: max |err| TF32 %.3g (bound %.3g), fp32 %.3g", e_tf32, bound, e_fp32);
    cr_assert_leq(e_tf32, bound, "TF32 error %g beyond 2^-10 sum |ab| = %g", e_tf32, bound);
    cr_assert_lt(e_fp32 * 16, e_tf32, "fp32 (%g) is not clearly closer than TF32 (%g): is TF32 "
                 "really off with --precision fp32?", e_fp32, e_tf32);
}

/* The same model through --precision auto: the search (on the reference evaluator) meets 1e-2
 * with nothing moved (the statistics are f32 already), the check of the build on held-out rows of
 * the batch agrees, and the shipped module on the GPU is within the tolerance too. */
Test(precision_gpu, layer_norm_of_large_activations_in_auto) {
    t_skip_without_gpu();
    float x[4 * 768];
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(4, 768), x), *sample = &in;
    uint64_t seed = 3;
    fill_large(&in, "x", &seed);
    ampc_auto_options o = {.low = AMPC_PRECISION_FP16, .tolerance = 1e-2, .samples = &sample,
                           .n_samples = 1, .n_search = 1, .split_batch = true, .batch = 4,
                           .pipeline = {.verify = true}, .tf32 = true};
    ampc_auto_result r;
    char *err = NULL;
    cr_assert_eq(ampc_auto_precision(layer_norm_large, NULL, &o, &r, &err), AMPC_OK, "%s", err);
    cr_assert(r.met, "check error %g above 1e-2", r.check_error);
    cr_assert_leq(r.error, 1e-2);
    cr_assert_eq(r.rounds, 1);
    cr_assert_eq(r.check.row0, 2);
    ampc_graph *g = layer_norm_large(NULL);
    ampc_pipeline_options po = {.verify = true, .precision = AMPC_PRECISION_FP16};
    static const int32_t none = 0;
    ampc_compile_options co = {.archs = &none, .cache_dir = "", .pipeline = &po};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &co, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_accuracy acc;
    cr_assert_eq(ampc_check_module(&r.check, m, &acc, &err), AMPC_OK, "%s", err);
    cr_log_info("auto LayerNorm: reference check %g, GPU %g (p99.9 %g)", r.check_error,
                acc.max_rel, acc.p999);
    cr_assert_leq(acc.max_rel, 1e-2, "the GPU's error %g", acc.max_rel);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
    ampc_auto_result_free(&r);
}
