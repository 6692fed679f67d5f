/*
 * test_sparsity.c — the sparsity pass: verify marks weights already 2:4 along K and leaves dense
 * ones alone (golden IR); prune keeps the 2 largest magnitudes of every 4 along K for each op's K
 * (MatMul rows, Gemm transB columns, Conv channels), with the values and the energy removed
 * checked against hand computations; the layer glob restricts it; ineligible nodes keep their
 * weights and say why; the mark survives fuse-matmul; and a pruned graph computes on the
 * reference evaluator exactly what the original graph computes with the weights pruned here, by
 * this file's own rule.
 */
#include "support.h"

#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ampc_graph *parse(const char *text) {
    ampc_graph *g = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &g, &err), AMPC_OK, "parse: %s", err);
    return g;
}

/* What the last run of the pass reported (each test runs in a process of its own). */
static ampc_pipeline_report report;

/* Runs the sparsity pass alone; returns whether it changed the graph. */
static bool run_sparsity(ampc_graph *g, ampc_sparsity mode, const char *glob) {
    FILE *trace = tmpfile();
    ampc_pipeline_options o = {.verify = true, .sparsity = mode, .sparsity_layers = glob,
                               .trace = trace, .report = &report};
    cr_assert_eq(ampc_pipeline_run_pass(g, "sparsity", &o), AMPC_OK, "%s", ampc_graph_errors(g));
    rewind(trace);
    char line[128] = "";
    cr_assert(fgets(line, sizeof line, trace));
    fclose(trace);
    return strstr(line, "changed yes") != NULL;
}

static void expect_text(ampc_graph *g, const char *want) {
    char *got = ampc_graph_to_text(g, false);
    cr_assert_str_eq(got, want, "got:\n%s", got);
    free(got);
}

/* The record of the node named `node`. */
static const ampc_sparse_layer *record(const char *node) {
    for (int32_t i = 0; i < report.n_sparse_layers; i++)
        if (!strcmp(report.sparse_layers[i].node, node)) return &report.sparse_layers[i];
    cr_assert_fail("no sparsity record for node '%s'", node);
    return NULL;
}

/* The node's attribute sparse24 is 1. */
static bool is_marked(const ampc_graph *g, const char *node) {
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && !strcmp(g->nodes[i]->name, node)) {
            const ampc_attr *a = ampc_ir_attr_find(g->nodes[i], "sparse24");
            return a && a->kind == AMPC_ATTR_INT && a->i == 1;
        }
    cr_assert_fail("no node '%s'", node);
    return false;
}

/* Names the node that produced v (node names are what the glob and the records use). */
static ampc_value *named(ampc_value *v, const char *name) {
    v->producer->name = name;
    return v;
}

/* ---- verify --------------------------------------------------------------------------------- */

/* %ws [8,2]: along K (the rows) each group of 4 has 2 non-zeros in column 0 and 1 in column 1.
 * %wd: the same with one more non-zero in rows 0..3 of column 1 (3 of 4). */
static const char *two_matmuls =
    "graph \"v\" {\n"
    "  input %x : f32[2,8]\n"
    "  const %ws : f32[8,2] = [1, 0, 0, 0, 2, 5, 0, 0, 0, 0, 3, 0, 0, 6, 4, 0]\n"
    "  const %wd : f32[8,2] = [1, 7, 0, 7, 2, 5, 0, 0, 0, 0, 3, 0, 0, 6, 4, 0]\n"
    "  %a : f32[2,2] = MatMul(%x, %ws) @\"sparse\"\n"
    "  %b : f32[2,2] = MatMul(%x, %wd) @\"dense\"\n"
    "  output %a\n"
    "  output %b\n"
    "}\n";

Test(sparsity, verify_marks_an_already_24_weight_and_leaves_a_dense_one) {
    ampc_graph *g = parse(two_matmuls);
    cr_assert(run_sparsity(g, AMPC_SPARSITY_VERIFY, NULL));
    expect_text(g, "graph \"v\" {\n"
                   "  input %x : f32[2,8]\n"
                   "  const %ws : f32[8,2] = [1, 0, 0, 0, 2, 5, 0, 0, 0, 0, 3, 0, 0, 6, 4, 0]\n"
                   "  const %wd : f32[8,2] = [1, 7, 0, 7, 2, 5, 0, 0, 0, 0, 3, 0, 0, 6, 4, 0]\n"
                   "  %a : f32[2,2] = MatMul(%x, %ws) {sparse24 = 1} @\"sparse\"\n"
                   "  %b : f32[2,2] = MatMul(%x, %wd) @\"dense\"\n"
                   "  output %a\n"
                   "  output %b\n"
                   "}\n");
    cr_assert_eq(report.n_sparse_layers, 2);
    cr_assert_eq(record("sparse")->status, SPARSE_WHY_ALREADY);
    cr_assert_eq(record("sparse")->k, 8);
    cr_assert_eq(record("dense")->status, SPARSE_WHY_DENSE);
    cr_assert_eq(record("dense")->energy_removed, 0);
    cr_assert_not(run_sparsity(g, AMPC_SPARSITY_VERIFY, NULL), "a second run changed the graph");
    ampc_graph_destroy(g);
}

Test(sparsity, off_does_nothing) {
    ampc_graph *g = parse(two_matmuls);
    cr_assert_not(run_sparsity(g, AMPC_SPARSITY_OFF, NULL));
    expect_text(g, two_matmuls);
    cr_assert_eq(report.n_sparse_layers, 0);
    ampc_graph_destroy(g);
}

/* A mark the weight does not deserve (IR text can carry one) is taken away by verify. */
Test(sparsity, verify_removes_a_wrong_mark) {
    ampc_graph *g = parse("graph \"w\" {\n"
                          "  input %x : f32[1,4]\n"
                          "  const %w : f32[4,1] = [1, 2, 3, 0]\n"
                          "  %y : f32[1,1] = MatMul(%x, %w) {sparse24 = 1} @\"fc\"\n"
                          "  output %y\n"
                          "}\n");
    cr_assert(run_sparsity(g, AMPC_SPARSITY_VERIFY, NULL));
    cr_assert_not(is_marked(g, "fc"));
    ampc_graph_destroy(g);
}

/* ---- prune: values, K per op, energy -------------------------------------------------------- */

/* W [4,2] = [[1, 4], [-3, 4], [2, -4], [0.5, 1]], K = 4 along rows.
 * Column 0: |1|, |-3|, |2|, |0.5| -> keep -3 and 2.
 * Column 1: |4|, |4|, |-4|, |1| -> a three-way tie at 4: the lower indices, rows 0 and 1, stay.
 * Pruned: [[0, 4], [-3, 4], [2, 0], [0, 0]].
 * Energy: all = 1 + 16 + 9 + 16 + 4 + 16 + 0.25 + 1 = 63.25; removed = 1 + 0.25 (column 0)
 * + 16 + 1 (column 1) = 18.25. */
Test(sparsity, prune_matmul_along_rows_with_ties_to_the_lower_index) {
    ampc_graph *g = parse("graph \"p\" {\n"
                          "  input %x : f32[2,4]\n"
                          "  const %w : f32[4,2] = [1, 4, -3, 4, 2, -4, 0.5, 1]\n"
                          "  %y : f32[2,2] = MatMul(%x, %w) @\"fc\"\n"
                          "  output %y\n"
                          "}\n");
    cr_assert(run_sparsity(g, AMPC_SPARSITY_PRUNE, NULL));
    ampc_ir_graph_compact(g); /* the old weight has no reader left */
    expect_text(g, "graph \"p\" {\n"
                   "  input %x : f32[2,4]\n"
                   "  const %w_24 : f32[4,2] = [0, 4, -3, 4, 2, 0, 0, 0]\n"
                   "  %y : f32[2,2] = MatMul(%x, %w_24) {sparse24 = 1} @\"fc\"\n"
                   "  output %y\n"
                   "}\n");
    const ampc_sparse_layer *r = record("fc");
    cr_assert_eq(r->status, SPARSE_WHY_PRUNED);
    cr_assert_eq(r->k, 4);
    cr_assert_float_eq(r->energy_removed, 18.25 / 63.25, 1e-12);
    cr_assert_not(run_sparsity(g, AMPC_SPARSITY_PRUNE, NULL), "a second run changed the graph");
    cr_assert_eq(record("fc")->status, SPARSE_WHY_ALREADY);
    ampc_graph_destroy(g);
}

/* Gemm with transB: B [N, K], K along each row. Row 0 [1, -3, 2, 0.5] -> [0, -3, 2, 0]; row 1
 * [4, 4, -4, 1] -> [4, 4, 0, 0]. The same numbers as above, transposed: same energy. */
Test(sparsity, prune_gemm_transb_along_columns) {
    ampc_graph *g = parse("graph \"t\" {\n"
                          "  input %x : f32[3,4]\n"
                          "  const %w : f32[2,4] = [1, -3, 2, 0.5, 4, 4, -4, 1]\n"
                          "  %y : f32[3,2] = Gemm(%x, %w) {transB = 1} @\"fc\"\n"
                          "  output %y\n"
                          "}\n");
    cr_assert(run_sparsity(g, AMPC_SPARSITY_PRUNE, NULL));
    ampc_ir_graph_compact(g);
    char *t = ampc_graph_to_text(g, false);
    cr_assert(strstr(t, "const %w_24 : f32[2,4] = [0, -3, 2, 0, 4, 4, 0, 0]\n"), "%s", t);
    cr_assert(strstr(t, "= Gemm(%x, %w_24) {transB = 1, sparse24 = 1} @\"fc\""), "%s", t);
    free(t);
    cr_assert_float_eq(record("fc")->energy_removed, 18.25 / 63.25, 1e-12);
    ampc_graph_destroy(g);
}

/* Conv W [M=1, C=4, 1, 2]: groups of 4 run along C at each of the 2 kernel positions (the order
 * of a channels-last implicit GEMM), so K = 8 and the elements of a group are 2 apart.
 * Position 0: c = 0..3 -> [1, 5, -2, 3]: keep 5 and 3. Position 1: [-6, 1, 1, 0.5]: keep -6 and
 * the first 1 (c = 1, the tie to the lower index). Stored OIHW: [1, -6, 5, 1, -2, 1, 3, 0.5]
 * becomes [0, -6, 5, 1, 0, 0, 3, 0]. */
Test(sparsity, prune_conv_along_input_channels) {
    ampc_graph *g = parse("graph \"c\" {\n"
                          "  input %x : f32[1,4,3,3]\n"
                          "  const %w : f32[1,4,1,2] = [1, -6, 5, 1, -2, 1, 3, 0.5]\n"
                          "  %y : f32[1,1,3,2] = Conv(%x, %w) @\"conv\"\n"
                          "  output %y\n"
                          "}\n");
    cr_assert(run_sparsity(g, AMPC_SPARSITY_PRUNE, NULL));
    ampc_ir_graph_compact(g);
    char *t = ampc_graph_to_text(g, false);
    cr_assert(strstr(t, "const %w_24 : f32[1,4,1,2] = [0, -6, 5, 1, 0, 0, 3, 0]\n"), "%s", t);
    free(t);
    const ampc_sparse_layer *r = record("conv");
    cr_assert_eq(r->k, 8);
    /* all = 1+36+25+1+4+1+9+0.25 = 77.25; removed = 1 + 4 (position 0) + 1 + 0.25 (position 1) */
    cr_assert_float_eq(r->energy_removed, 6.25 / 77.25, 1e-12);
    ampc_graph_destroy(g);
}

/* f16 weights (the precision pass ran first): pruned in f16, groups checked here. */
Test(sparsity, prune_f16_weights_after_precision) {
    ampc_graph *g = parse("graph \"h\" {\n"
                          "  input %x : f32[2,8]\n"
                          "  const %w : f32[8,3] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -1, -2, "
                          "-3, -4, -5, -6, -7, -8, -9, -10, -11, -12]\n"
                          "  %y : f32[2,3] = MatMul(%x, %w) @\"fc\"\n"
                          "  output %y\n"
                          "}\n");
    ampc_pipeline_options o = {.verify = true, .precision = AMPC_PRECISION_FP16,
                               .sparsity = AMPC_SPARSITY_PRUNE};
    cr_assert_eq(ampc_pipeline_run_pass(g, "precision", &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_pipeline_run_pass(g, "sparsity", &o), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_ir_graph_compact(g);
    char *t = ampc_graph_to_text(g, true);
    /* Rows 0..3 of each column: 1,4,7,10 -> 7,10 stay; rows 4..7: -1,-4,-7,-10 -> -7,-10. */
    cr_assert(strstr(t, "const %w_f16_24 : f16[8,3] = [0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0, "
                        "0, 0, 0, 0, -7, -8, -9, -10, -11, -12]"), "%s", t);
    free(t);
    cr_assert(is_marked(g, "fc"));
    ampc_graph_destroy(g);
}

/* ---- eligibility and the layer glob --------------------------------------------------------- */

Test(sparsity, ineligible_nodes_keep_their_weights_and_say_why) {
    const char *text =
        "graph \"n\" {\n"
        "  input %x : f32[2,6]\n"
        "  input %z : f32[6,2]\n"
        "  input %i : f32[1,6,3,3]\n"
        "  input %i2 : f32[1,2,3,3]\n"
        "  input %xi : i32[2,4]\n"
        "  const %w6 : f32[6,2] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n"
        "  const %wc : f32[2,6,1,1] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n"
        "  const %w2 : f32[1,2,2,2] = [1, 2, 3, 4, 5, 6, 7, 8]\n"
        "  const %wi : i32[4,2] = [1, 2, 3, 4, 5, 6, 7, 8]\n"
        "  %a : f32[2,2] = MatMul(%x, %w6) @\"k6\"\n"
        "  %b : f32[2,2] = MatMul(%x, %z) @\"activations\"\n"
        "  %c : f32[1,2,3,3] = Conv(%i, %wc) @\"conv6\"\n"
        "  %d : f32[1,1,2,2] = Conv(%i2, %w2) @\"conv2x2\"\n"
        "  %e : i32[2,2] = MatMul(%xi, %wi) @\"ints\"\n"
        "  output %a\n"
        "  output %b\n"
        "  output %c\n"
        "  output %d\n"
        "  output %e\n"
        "}\n";
    ampc_graph *g = parse(text);
    cr_assert_not(run_sparsity(g, AMPC_SPARSITY_PRUNE, NULL));
    expect_text(g, text);
    cr_assert_eq(record("k6")->status, SPARSE_WHY_K);
    cr_assert_eq(record("k6")->k, 6);
    cr_assert_eq(record("activations")->status, SPARSE_WHY_NOT_CONSTANT);
    cr_assert_eq(record("conv6")->status, SPARSE_WHY_CHANNELS);
    cr_assert_eq(record("conv6")->k, 6);
    cr_assert_eq(record("conv2x2")->status, SPARSE_WHY_CHANNELS, "K = 2 * 2 * 2 = 8 is a "
                 "multiple of 4, but the groups run along the 2 channels");
    cr_assert_eq(record("conv2x2")->k, 8);
    cr_assert_eq(record("ints")->status, SPARSE_WHY_DTYPE);
    cr_assert_str_eq(ampc_sparse_why_str(SPARSE_WHY_K), "not eligible: K is not a multiple of 4");
    ampc_graph_destroy(g);
}

static const char *encoder_decoder =
    "graph \"ed\" {\n"
    "  input %x : f32[1,4]\n"
    "  const %we : f32[4,1] = [1, 2, 3, 4]\n"
    "  const %wd : f32[4,1] = [4, 3, 2, 1]\n"
    "  %h : f32[1,1] = MatMul(%x, %we) @\"enc.fc1\"\n"
    "  %y : f32[1,1] = MatMul(%x, %wd) @\"dec.fc1\"\n"
    "  output %h\n"
    "  output %y\n"
    "}\n";

Test(sparsity, the_layer_glob_restricts_pruning) {
    ampc_graph *g = parse(encoder_decoder);
    cr_assert(run_sparsity(g, AMPC_SPARSITY_PRUNE, "enc.*"));
    ampc_ir_graph_compact(g);
    expect_text(g, "graph \"ed\" {\n"
                   "  input %x : f32[1,4]\n"
                   "  const %wd : f32[4,1] = [4, 3, 2, 1]\n"
                   "  const %we_24 : f32[4,1] = [0, 0, 3, 4]\n"
                   "  %h : f32[1,1] = MatMul(%x, %we_24) {sparse24 = 1} @\"enc.fc1\"\n"
                   "  %y : f32[1,1] = MatMul(%x, %wd) @\"dec.fc1\"\n"
                   "  output %h\n"
                   "  output %y\n"
                   "}\n");
    cr_assert_eq(record("dec.fc1")->status, SPARSE_WHY_UNSELECTED);
    ampc_graph_destroy(g);
}

Test(sparsity, a_glob_matching_no_layer_is_an_error) {
    ampc_graph *g = parse(encoder_decoder);
    ampc_pipeline_options o = {.verify = true, .sparsity = AMPC_SPARSITY_PRUNE,
                               .sparsity_layers = "encoder.*"};
    cr_assert_eq(ampc_pipeline_run_pass(g, "sparsity", &o), AMPC_E_INVALID_ARG);
    t_expect_diag(g, "sparsity-layers 'encoder.*' matches no MatMul, Gemm or Conv node of graph 'ed'");
    ampc_graph_destroy(g);
}

/* The whole pipeline: the mark goes with a MatMul into ampc.FusedMatMul. */
Test(sparsity, the_mark_survives_fuse_matmul) {
    ampc_graph *g = parse("graph \"f\" {\n"
                          "  input %x : f32[2,4]\n"
                          "  const %w : f32[4,2] = [1, 4, -3, 4, 2, -4, 0.5, 1]\n"
                          "  const %b : f32[2] = [1, 2]\n"
                          "  %h : f32[2,2] = MatMul(%x, %w) @\"fc\"\n"
                          "  %y : f32[2,2] = Add(%h, %b) @\"bias\"\n"
                          "  output %y\n"
                          "}\n");
    ampc_pipeline_options o = {.verify = true, .sparsity = AMPC_SPARSITY_PRUNE};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_FUSED_MATMUL), 1);
    cr_assert(is_marked(g, "fc"), "%s", ampc_graph_to_text(g, false));
    ampc_graph_destroy(g);
}

/* f16 Conv through the whole pipeline: fuse-conv and layout make it a channels-last
 * ampc.FusedConv with weights permuted to [M, R, S, C]; the mark stays, and verify finds the
 * permuted weight still 2:4 along its channels. */
Test(sparsity, the_conv_pattern_survives_the_channels_last_permutation) {
    ampc_graph *g = ampc_graph_create("conv");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 8, 5, 5));
    double w[8 * 8 * 3 * 3];
    for (int i = 0; i < 8 * 8 * 9; i++) w[i] = sin(i * 0.77) + 0.1 * (i % 5);
    ampc_value *in[2] = {x, t_const_f32(g, SHAPE(8, 8, 3, 3), w)};
    ampc_value *c = named(ampc_op(g, "Conv", in, 2, NULL, 0), "conv");
    ampc_output(g, ampc_op(g, "Relu", &c, 1, NULL, 0), "y");
    ampc_pipeline_options o = {.verify = true, .precision = AMPC_PRECISION_FP16,
                               .sparsity = AMPC_SPARSITY_PRUNE};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_FUSED_CONV), 1);
    cr_assert(is_marked(g, "conv"));
    char *t = ampc_graph_to_text(g, false);
    cr_assert(strstr(t, "channels_last = 1"), "%s", t);
    free(t);
    cr_assert_not(run_sparsity(g, AMPC_SPARSITY_VERIFY, NULL));
    cr_assert_eq(record("conv")->status, SPARSE_WHY_ALREADY);
    cr_assert_eq(record("conv")->k, 8 * 9);
    ampc_graph_destroy(g);
}

/* ---- the pruned graph computes what the original computes with pruned weights --------------- */

/* This file's own 2:4 rule, on a row-major [rows, cols] f32 matrix with groups along the rows
 * (by_rows) or along the columns: keep the two largest |w| of each 4, the lower index first
 * among equals. */
static void prune_by_hand(float *w, int rows, int cols, bool by_rows) {
    int groups = by_rows ? rows / 4 * cols : rows * (cols / 4);
    for (int q = 0; q < groups; q++) {
        float *e[4];
        for (int j = 0; j < 4; j++)
            e[j] = by_rows ? &w[((q / cols) * 4 + j) * cols + q % cols]
                           : &w[(q / (cols / 4)) * cols + (q % (cols / 4)) * 4 + j];
        int first = 0, second = -1;
        for (int j = 1; j < 4; j++)
            if (fabsf(*e[j]) > fabsf(*e[first])) first = j;
        for (int j = 0; j < 4; j++)
            if (j != first && (second < 0 || fabsf(*e[j]) > fabsf(*e[second]))) second = j;
        for (int j = 0; j < 4; j++)
            if (j != first && j != second) *e[j] = 0;
    }
}

/* x [3,8] -> MatMul W1 [8,8] -> Relu -> Gemm(transB) W2 [4,8] -> y [3,4]. */
static ampc_graph *mlp(const float *w1, const float *w2) {
    ampc_graph *g = ampc_graph_create("mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 8));
    ampc_value *mm[2] = {x, t_const(g, AMPC_DTYPE_F32, SHAPE(8, 8), w1)};
    ampc_value *h = named(ampc_op(g, "MatMul", mm, 2, NULL, 0), "fc1");
    h = ampc_op(g, "Relu", &h, 1, NULL, 0);
    ampc_attr_arg tb = AMPC_ATTR_I("transB", 1);
    ampc_value *gm[2] = {h, t_const(g, AMPC_DTYPE_F32, SHAPE(4, 8), w2)};
    ampc_output(g, named(ampc_op(g, "Gemm", gm, 2, &tb, 1), "fc2"), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

Test(sparsity, the_pruned_graph_equals_the_graph_with_weights_pruned_by_hand) {
    float w1[64], w2[32], x[24];
    for (int i = 0; i < 64; i++) w1[i] = (float)sin(i * 1.37) * 0.8f;
    for (int i = 0; i < 32; i++) w2[i] = (float)cos(i * 0.91) * 0.6f;
    for (int i = 0; i < 24; i++) x[i] = (float)sin(i * 0.5 + 0.3);
    ampc_graph *pruned = mlp(w1, w2);
    ampc_pipeline_options o = {.verify = true, .sparsity = AMPC_SPARSITY_PRUNE};
    cr_assert_eq(ampc_pipeline_run_pass(pruned, "sparsity", &o), AMPC_OK, "%s",
                 ampc_graph_errors(pruned));
    cr_assert(is_marked(pruned, "fc1") && is_marked(pruned, "fc2"));
    prune_by_hand(w1, 8, 8, true);  /* MatMul B [K, N]: K along rows */
    prune_by_hand(w2, 4, 8, false); /* Gemm transB B [N, K]: K along columns */
    ampc_graph *by_hand = mlp(w1, w2);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3, 8), x), ya, yb;
    cr_assert_eq(ampc_graph_evaluate(pruned, &in, 1, &ya, 1), AMPC_OK, "%s", ampc_graph_errors(pruned));
    cr_assert_eq(ampc_graph_evaluate(by_hand, &in, 1, &yb, 1), AMPC_OK, "%s", ampc_graph_errors(by_hand));
    char msg[512];
    cr_assert(t_tensors_close(&ya, &yb, 0, 0, "y", msg, sizeof msg), "%s", msg);
    /* and pruning changed the numbers: the unpruned graph differs */
    float w1o[64], w2o[32];
    for (int i = 0; i < 64; i++) w1o[i] = (float)sin(i * 1.37) * 0.8f;
    for (int i = 0; i < 32; i++) w2o[i] = (float)cos(i * 0.91) * 0.6f;
    ampc_graph *dense = mlp(w1o, w2o);
    ampc_tensor yd;
    cr_assert_eq(ampc_graph_evaluate(dense, &in, 1, &yd, 1), AMPC_OK);
    cr_assert_not(t_tensors_close(&ya, &yd, 1e-3, 1e-3, "y", msg, sizeof msg));
    ampc_tensor_free(&ya);
    ampc_tensor_free(&yb);
    ampc_tensor_free(&yd);
    ampc_graph_destroy(pruned);
    ampc_graph_destroy(by_hand);
    ampc_graph_destroy(dense);
}
