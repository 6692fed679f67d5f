/*
 * test_partition.c — the partition pass (tensor parallelism): a two-layer perceptron split over
 * 2 and 4 ranks computes what the whole one computes (reference evaluator, which runs every rank
 * and the all-reduce); each rank's weights are its slice of the original (checked element by
 * element), every split node carries its rank; pairs that cannot split stay whole; 2:4 marks
 * stay only where a shard is still 2:4; the options are checked; the IR prints and parses back.
 * Transformer MLP blocks (+ b2, + residual after the pair) split over 2 and 4 ranks compute the
 * same, with b2 and the residual in rank 0's FusedMatMul and nothing after the all-reduce; a
 * residual read from the pair's output stays after it; a second run changes nothing. Gemm pairs
 * (transB, alpha, beta, C) split as their weights are stored.
 */
#include "support.h"

#include "passes/passes.h"
#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { K = 6, H = 8, N = 5 };

/* x [3, K] -> @ W1 [K, H] + b1 -> Relu -> Sigmoid -> @ W2 [H, N] -> + 1 -> y; h: W1's columns */
static ampc_graph *mlp(int64_t h, bool hidden_is_output) {
    ampc_graph *g = ampc_graph_create("mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, K));
    double w1[K * H], b1[H], w2[H * N];
    for (int i = 0; i < K * h; i++) w1[i] = sin(i * 0.7) * 0.5;
    for (int i = 0; i < h; i++) b1[i] = 0.1 * i - 0.3;
    for (int i = 0; i < h * N; i++) w2[i] = cos(i * 0.3) * 0.4;
    ampc_value *a[2] = {x, t_const_f32(g, SHAPE(K, h), w1)};
    ampc_value *t = ampc_add(g, ampc_op(g, "MatMul", a, 2, NULL, 0), t_const_f32(g, SHAPE(h), b1));
    t = ampc_op(g, "Relu", &t, 1, NULL, 0);
    t = ampc_op(g, "Sigmoid", &t, 1, NULL, 0);
    if (hidden_is_output) ampc_output(g, t, "hidden");
    ampc_value *b[2] = {t, t_const_f32(g, SHAPE(h, N), w2)};
    ampc_output(g, ampc_add(g, ampc_op(g, "MatMul", b, 2, NULL, 0), ampc_scalar_f32(g, 1)), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static ampc_pipeline_options ranks(int32_t n) {
    return (ampc_pipeline_options){.verify = true, .gpus = n, .partition = AMPC_PARTITION_TENSOR};
}

/* The node of op `op` and rank r (by its attribute), or NULL. */
static const ampc_node *node_of_rank(const ampc_graph *g, ampc_opcode op, int64_t r, int k) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        const ampc_attr *a = ampc_ir_attr_find(n, "rank");
        if (n->op == op && a && a->i == r && k-- == 0) return n;
    }
    return NULL;
}

/* a and b give the same outputs for one input x [3, width]. */
static void same_outputs_for(ampc_graph *a, ampc_graph *b, int64_t width) {
    float x[3 * K];
    for (int i = 0; i < 3 * width; i++) x[i] = (float)cos(i * 0.45);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3, width), x);
    t_expect_same_outputs(a, b, &in, 1, 1e-6, 1e-6);
}

static void same_outputs(ampc_graph *a, ampc_graph *b) { same_outputs_for(a, b, K); }

static void splits_into(int32_t r) {
    ampc_graph *whole = mlp(H, false), *split = mlp(H, false);
    const ampc_value *w1 = split->nodes[0]->inputs[1];
    float w1_copy[K * H];
    memcpy(w1_copy, w1->data, sizeof w1_copy);
    ampc_pipeline_options o = ranks(r), one = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(split, &o), AMPC_OK, "%s", ampc_graph_errors(split));
    cr_assert_eq(ampc_graph_optimize(whole, &one), AMPC_OK, "%s", ampc_graph_errors(whole));
    cr_assert_eq(t_count_op(split, AMPC_OP_ALL_REDUCE), 1, "%s", ampc_graph_to_text(split, false));
    /* after fuse-matmul: per rank one matmul with the bias, one without */
    cr_assert_eq(t_count_op(split, AMPC_OP_FUSED_MATMUL) + t_count_op(split, AMPC_OP_MATMUL),
                 2 * r);
    int64_t h = H / r;
    for (int64_t k = 0; k < r; k++) {
        const ampc_node *first = node_of_rank(split, AMPC_OP_FUSED_MATMUL, k, 0);
        cr_assert(first, "rank %lld has a first matmul:\n%s", (long long)k,
                  ampc_graph_to_text(split, false));
        const ampc_value *w = first->inputs[1];
        cr_assert_eq(w->shape.dims[0], K);
        cr_assert_eq(w->shape.dims[1], h);
        const float *d = w->data;
        for (int64_t i = 0; i < K; i++)
            for (int64_t j = 0; j < h; j++)
                cr_assert_eq(d[i * h + j], w1_copy[i * H + k * h + j], "rank %lld W1[%lld, %lld]",
                             (long long)k, (long long)i, (long long)(k * h + j));
        cr_assert(node_of_rank(split, AMPC_OP_SIGMOID, k, 0), "rank %lld has its Sigmoid",
                  (long long)k);
    }
    cr_assert_null(node_of_rank(split, AMPC_OP_FUSED_MATMUL, r, 0));
    same_outputs(split, whole);
    char *text = ampc_graph_to_text(split, true);
    ampc_graph *back = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &back, &err), AMPC_OK, "%s", err);
    char *again = ampc_graph_to_text(back, true);
    cr_assert_str_eq(again, text);
    free(text);
    free(again);
    ampc_graph_destroy(back);
    ampc_graph_destroy(whole);
    ampc_graph_destroy(split);
}

Test(partition, mlp_over_two_ranks) { splits_into(2); }
Test(partition, mlp_over_four_ranks) { splits_into(4); }

/* Hidden width 6 over 4 ranks, a hidden value that is also a graph output, one GPU: left whole. */
Test(partition, what_cannot_split_stays_whole) {
    struct { int64_t h; bool hidden_out; int32_t gpus; } cases[] = {{6, false, 4}, {H, true, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ampc_graph *g = mlp(cases[c].h, cases[c].hidden_out);
        ampc_graph *ref = mlp(cases[c].h, cases[c].hidden_out);
        ampc_pipeline_options o = ranks(cases[c].gpus), one = {.verify = true};
        cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
        cr_assert_eq(ampc_graph_optimize(ref, &one), AMPC_OK, "%s", ampc_graph_errors(ref));
        cr_assert_eq(t_count_op(g, AMPC_OP_ALL_REDUCE), 0, "case %zu:\n%s", c,
                     ampc_graph_to_text(g, false));
        same_outputs(g, ref);
        ampc_graph_destroy(g);
        ampc_graph_destroy(ref);
    }
}

/* A stack of transformer MLP blocks on x [3, N]: y = relu(x @ W1 [N, H] + b1) @ W2 [H, N], then
 *   BLOCK                      x + (y + b2)             (as PyTorch exports x + mlp(x))
 *   BLOCK_RESIDUAL_FIRST       b2 + (x + y)
 *   BLOCK_RESIDUAL_OF_OUTPUT   t + tanh(t), t = y + b2  (the residual reads the pair's output)
 *   BLOCK_RESIDUAL_OF_PRODUCT  (y + b2) + tanh(y)       (... and its product)
 * each block's output the next one's x. */
enum block_kind {
    BLOCK, BLOCK_RESIDUAL_FIRST, BLOCK_RESIDUAL_OF_OUTPUT, BLOCK_RESIDUAL_OF_PRODUCT
};

static ampc_graph *blocks(int n_blocks, enum block_kind kind) {
    ampc_graph *g = ampc_graph_create("blocks");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, N));
    for (int l = 0; l < n_blocks; l++) {
        double w1[N * H], b1[H], w2[H * N], b2[N];
        for (int i = 0; i < N * H; i++) w1[i] = sin(i * 0.7 + l) * 0.5;
        for (int i = 0; i < H; i++) b1[i] = 0.1 * i - 0.3 + l;
        for (int i = 0; i < H * N; i++) w2[i] = cos(i * 0.3 + l) * 0.4;
        for (int i = 0; i < N; i++) b2[i] = 0.2 * i - 0.5 + l;
        ampc_value *h = ampc_matmul(g, x, t_const_f32(g, SHAPE(N, H), w1));
        h = ampc_relu(g, ampc_add(g, h, t_const_f32(g, SHAPE(H), b1)));
        ampc_value *y = ampc_matmul(g, h, t_const_f32(g, SHAPE(H, N), w2));
        ampc_value *c = t_const_f32(g, SHAPE(N), b2), *t;
        switch (kind) {
        case BLOCK: x = ampc_add(g, x, ampc_add(g, y, c)); break;
        case BLOCK_RESIDUAL_FIRST: x = ampc_add(g, c, ampc_add(g, x, y)); break;
        case BLOCK_RESIDUAL_OF_OUTPUT:
            t = ampc_add(g, y, c);
            x = ampc_add(g, t, ampc_tanh(g, t));
            break;
        case BLOCK_RESIDUAL_OF_PRODUCT:
            t = ampc_add(g, y, c);
            x = ampc_add(g, t, ampc_tanh(g, y));
            break;
        }
    }
    ampc_output(g, x, "out");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static int64_t rank_of(const ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, "rank");
    return a ? a->i : -1;
}

/* The whole pipeline on n_blocks blocks of `kind` over r ranks and on one GPU; both compute the
 * same. Returns the partitioned graph. */
static ampc_graph *partitioned(int n_blocks, enum block_kind kind, int32_t r) {
    ampc_graph *whole = blocks(n_blocks, kind), *split = blocks(n_blocks, kind);
    ampc_pipeline_options o = ranks(r), one = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(split, &o), AMPC_OK, "%s", ampc_graph_errors(split));
    cr_assert_eq(ampc_graph_optimize(whole, &one), AMPC_OK, "%s", ampc_graph_errors(whole));
    cr_assert_eq(t_count_op(split, AMPC_OP_ALL_REDUCE), n_blocks, "%s",
                 ampc_graph_to_text(split, false));
    same_outputs_for(split, whole, N);
    ampc_graph_destroy(whole);
    return split;
}

/* Each block's b2 and residual go onto rank 0's partial before the all-reduce, and fuse-matmul
 * folds them into rank 0's second matmul: rank 0 has one FusedMatMul with bias and residual per
 * block, the other ranks plain matmuls, no Add is left, and the last all-reduce writes the
 * model's output. The second block's residual is the first block's all-reduce. */
static void blocks_split_into(int32_t r, enum block_kind kind) {
    enum { BLOCKS = 2 };
    ampc_graph *g = partitioned(BLOCKS, kind, r);
    char *text = ampc_graph_to_text(g, false);
    cr_assert_eq(t_count_op(g, AMPC_OP_ADD), 0, "no Add after an all-reduce:\n%s", text);
    const ampc_value *out = g->outputs[0];
    cr_assert(out->producer && out->producer->op == AMPC_OP_ALL_REDUCE, "%s", text);
    int l = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *ar = g->nodes[i];
        if (ar->op != AMPC_OP_ALL_REDUCE) continue;
        cr_assert_eq(ar->n_inputs, r);
        const ampc_node *p0 = ar->inputs[0]->producer;
        cr_assert(p0 && p0->op == AMPC_OP_FUSED_MATMUL && rank_of(p0) == 0 && p0->n_inputs == 4 &&
                  !ampc_ir_attr_find(p0, "activation"),
                  "block %d: rank 0's partial is x @ W2 + b2 + residual:\n%s", l, text);
        const ampc_value *bias = p0->inputs[2], *z = p0->inputs[3];
        cr_assert(bias->data && ampc_shape_numel(&bias->shape) == N, "%s", text);
        for (int j = 0; j < N; j++)
            cr_assert_float_eq(((const float *)bias->data)[j], (float)(0.2 * j - 0.5 + l), 1e-6,
                               "block %d b2[%d]", l, j);
        if (l == 0)
            cr_assert_eq(z, g->inputs[0], "block 0's residual is x:\n%s", text);
        else
            cr_assert(z->producer && z->producer->op == AMPC_OP_ALL_REDUCE,
                      "block %d's residual is block %d's all-reduce:\n%s", l, l - 1, text);
        for (int32_t k = 1; k < r; k++) {
            const ampc_node *pk = ar->inputs[k]->producer;
            cr_assert(pk && pk->op == AMPC_OP_MATMUL && rank_of(pk) == k && pk->n_inputs == 2,
                      "block %d: rank %d's partial is a plain matmul:\n%s", l, k, text);
        }
        l++;
    }
    cr_assert_eq(l, BLOCKS);
    free(text);
    ampc_graph_destroy(g);
}

Test(partition, mlp_blocks_over_two_ranks) { blocks_split_into(2, BLOCK); }
Test(partition, mlp_blocks_over_four_ranks) { blocks_split_into(4, BLOCK); }
Test(partition, residual_before_bias_over_two_ranks) { blocks_split_into(2, BLOCK_RESIDUAL_FIRST); }

/* A residual operand computed from the pair's output is no residual of the pair: its Add stays
 * after the all-reduce (replicated); b2 still moves when y has no other reader. One computed
 * from y itself leaves both Adds where they are. */
Test(partition, residual_read_from_the_pair_stays_after_the_all_reduce) {
    ampc_graph *g = partitioned(1, BLOCK_RESIDUAL_OF_OUTPUT, 2);
    char *text = ampc_graph_to_text(g, false);
    const ampc_node *add = g->outputs[0]->producer, *ar = NULL;
    cr_assert(add && add->op == AMPC_OP_ADD && rank_of(add) == -1, "%s", text);
    cr_assert_eq(t_count_op(g, AMPC_OP_ADD), 1, "%s", text);
    for (int32_t k = 0; k < 2; k++) {
        const ampc_node *d = add->inputs[k]->producer;
        if (d && d->op == AMPC_OP_ALL_REDUCE) ar = d;
    }
    cr_assert(ar, "the residual Add reads the all-reduce:\n%s", text);
    const ampc_node *p0 = ar->inputs[0]->producer;
    cr_assert(p0->op == AMPC_OP_FUSED_MATMUL && p0->n_inputs == 3 && rank_of(p0) == 0,
              "rank 0's partial has b2, no residual:\n%s", text);
    free(text);
    ampc_graph_destroy(g);

    g = partitioned(1, BLOCK_RESIDUAL_OF_PRODUCT, 2);
    text = ampc_graph_to_text(g, false);
    cr_assert_eq(t_count_op(g, AMPC_OP_ADD), 2, "%s", text);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->op == AMPC_OP_ADD) cr_assert_eq(rank_of(n), -1, "%s", text);
        if (n->op == AMPC_OP_ALL_REDUCE)
            for (int32_t k = 0; k < 2; k++)
                cr_assert_eq(n->inputs[k]->producer->op, AMPC_OP_MATMUL, "%s", text);
    }
    free(text);
    ampc_graph_destroy(g);
}

/* The pass leaves what it split alone: a second run reports no change. */
Test(partition, a_second_run_changes_nothing) {
    ampc_graph *g = blocks(2, BLOCK);
    t_expect_second_run_unchanged(g, "partition", ranks(2));
    cr_assert_eq(t_count_op(g, AMPC_OP_ALL_REDUCE), 2);
    ampc_graph_destroy(g);
}

Test(partition, options_are_checked) {
    ampc_graph *g = mlp(H, false);
    ampc_pipeline_options bad[] = {{.gpus = 2}, {.gpus = 1, .partition = AMPC_PARTITION_TENSOR},
                                   {.gpus = -1}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ampc_graph_clear_errors(g);
        cr_assert_eq(ampc_graph_optimize(g, &bad[i]), AMPC_E_INVALID_ARG, "case %zu", i);
        cr_assert(strstr(ampc_graph_errors(g), "partition"), "%s", ampc_graph_errors(g));
    }
    ampc_graph_destroy(g);
}

/* ampc.AllReduce sums one same-shaped input per rank; other shapes are refused by name. */
Test(partition, all_reduce_sums_and_checks_shapes) {
    ampc_graph *g = ampc_graph_create("ar");
    ampc_value *in[2] = {t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2)),
                         t_input(g, "b", AMPC_DTYPE_F32, SHAPE(2))};
    ampc_node *n;
    cr_assert_eq(ampc_ir_node_build(g, AMPC_OP_ALL_REDUCE, "ar", in, 2, NULL, 0, 1, NULL, &n),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_output(g, n->outputs[0], "y");
    float a[2] = {1, 2}, b[2] = {10, 20};
    ampc_tensor ins[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2), a),
                          t_tensor(AMPC_DTYPE_F32, SHAPE(2), b)}, y;
    cr_assert_eq(ampc_graph_evaluate(g, ins, 2, &y, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_float_eq(((float *)y.data)[0], 11.0f, 0);
    cr_assert_float_eq(((float *)y.data)[1], 22.0f, 0);
    ampc_tensor_free(&y);
    ampc_value *bad[2] = {in[0], t_input(g, "c", AMPC_DTYPE_F32, SHAPE(3))};
    cr_assert_neq(ampc_ir_node_build(g, AMPC_OP_ALL_REDUCE, "bad", bad, 2, NULL, 0, 1, NULL, &n),
                  AMPC_OK);
    cr_assert(strstr(ampc_graph_errors(g), "every rank's input must have one shape: input 0 'a' and "
                                           "input 1 'c' differ"), "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
}

static int32_t marked(const ampc_graph *g, ampc_opcode op) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        n += g->nodes[i]->op == op && ampc_ir_attr_find(g->nodes[i], "sparse24") != NULL;
    return n;
}

/* A pruned (2:4) pair keeps its marks where each rank's weight is still 2:4: W2 split by rows
 * only when each rank has whole groups of 4 rows (W1's K = 6 is not eligible at all). */
Test(partition, sparse_marks_follow_the_split) {
    for (int32_t r = 2; r <= 4; r += 2) {
        ampc_graph *g = mlp(H, false);
        ampc_pipeline_options o = ranks(r);
        o.sparsity = AMPC_SPARSITY_PRUNE;
        cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
        cr_assert_eq(marked(g, AMPC_OP_FUSED_MATMUL), 0, "%s", ampc_graph_to_text(g, false));
        cr_assert_eq(marked(g, AMPC_OP_MATMUL), (H / r) % 4 == 0 ? r : 0, "%d ranks:\n%s", r,
                     ampc_graph_to_text(g, false));
        ampc_graph_destroy(g);
    }
}

/* The same two-layer perceptron as exporters write linear layers: Gemm(x, W1^T, b1, transB = 1,
 * alpha, beta) -> Relu -> Gemm(t, W2^T, c2, transB = 1, alpha, beta), with a C of the first
 * that broadcasts along the columns in `c1_cols` (a [3, 1] column) when not a bias. */
static ampc_graph *gemm_mlp(bool c1_is_bias) {
    ampc_graph *g = ampc_graph_create("gemm_mlp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, K));
    double w1[H * K], b1[H], w2[N * H], c2[N], col[3] = {0.25, -0.5, 0.75};
    for (int i = 0; i < H * K; i++) w1[i] = sin(i * 0.7) * 0.5;
    for (int i = 0; i < H; i++) b1[i] = 0.1 * i - 0.3;
    for (int i = 0; i < N * H; i++) w2[i] = cos(i * 0.3) * 0.4;
    for (int i = 0; i < N; i++) c2[i] = 0.2 * i - 0.1;
    ampc_value *a[3] = {x, t_const_f32(g, SHAPE(H, K), w1),
                        c1_is_bias ? t_const_f32(g, SHAPE(H), b1) : t_const_f32(g, SHAPE(3, 1), col)};
    ampc_attr_arg at1[3] = {AMPC_ATTR_I("transB", 1), AMPC_ATTR_F("alpha", 0.5f),
                            AMPC_ATTR_F("beta", 2.0f)};
    ampc_value *t = ampc_op(g, "Gemm", a, 3, at1, 3);
    t = ampc_op(g, "Relu", &t, 1, NULL, 0);
    ampc_value *b[3] = {t, t_const_f32(g, SHAPE(N, H), w2), t_const_f32(g, SHAPE(N), c2)};
    ampc_attr_arg at2[3] = {AMPC_ATTR_I("transB", 1), AMPC_ATTR_F("alpha", 1.5f),
                            AMPC_ATTR_F("beta", 0.25f)};
    ampc_output(g, ampc_op(g, "Gemm", b, 3, at2, 3), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* Gemm pairs split like MatMul pairs: each rank's first weight holds its rows of the stored
 * [H, K] (its columns of W1), the second's its columns of the stored [N, H], the first's bias
 * its slice (a broadcast column stays whole), the second's C on rank 0 alone; the result is the
 * whole model's. */
Test(partition, gemm_pairs_split_as_stored) {
    for (int c1_bias = 0; c1_bias < 2; c1_bias++)
        for (int32_t r = 2; r <= 4; r += 2) {
            ampc_graph *whole = gemm_mlp(c1_bias), *split = gemm_mlp(c1_bias);
            ampc_pipeline_options o = ranks(r), one = {.verify = true};
            static const char *const no_fuse[1] = {"fuse-matmul"};
            o.disable = one.disable = no_fuse, o.n_disable = one.n_disable = 1;
            cr_assert_eq(ampc_graph_optimize(split, &o), AMPC_OK, "%s", ampc_graph_errors(split));
            cr_assert_eq(ampc_graph_optimize(whole, &one), AMPC_OK, "%s", ampc_graph_errors(whole));
            cr_assert_eq(t_count_op(split, AMPC_OP_ALL_REDUCE), 1, "%s",
                         ampc_graph_to_text(split, false));
            cr_assert_eq(t_count_op(split, AMPC_OP_GEMM), 2 * r);
            int64_t h = H / r;
            for (int64_t k = 0; k < r; k++) {
                const ampc_node *first = node_of_rank(split, AMPC_OP_GEMM, k, 0);
                const ampc_node *second = node_of_rank(split, AMPC_OP_GEMM, k, 1);
                cr_assert(first && second, "rank %lld:\n%s", (long long)k,
                          ampc_graph_to_text(split, false));
                cr_assert_eq(first->inputs[1]->shape.dims[0], h);
                cr_assert_eq(first->inputs[1]->shape.dims[1], K);
                cr_assert_eq(first->inputs[2]->shape.dims[first->inputs[2]->shape.rank - 1],
                             c1_bias ? h : 1);
                cr_assert_eq(second->inputs[1]->shape.dims[0], N);
                cr_assert_eq(second->inputs[1]->shape.dims[1], h);
                cr_assert_eq(second->n_inputs > 2 && second->inputs[2], k == 0,
                             "only rank 0 adds the second C");
            }
            same_outputs(split, whole);
            ampc_graph *fused = gemm_mlp(c1_bias); /* fuse-matmul on: rank FusedMatMuls */
            o = ranks(r);
            cr_assert_eq(ampc_graph_optimize(fused, &o), AMPC_OK, "%s", ampc_graph_errors(fused));
            cr_assert_eq(t_count_op(fused, AMPC_OP_ALL_REDUCE), 1);
            same_outputs(fused, whole);
            ampc_graph_destroy(fused);
            ampc_graph_destroy(whole);
            ampc_graph_destroy(split);
        }
}
