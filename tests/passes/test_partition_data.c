/*
 * test_partition_data.c — the partition-data pass (data parallelism): a small conv net (Conv,
 * Relu, a Reshape whose target bakes the batch in, MatMul + bias, Softmax) and the same net
 * flattening through Shape -> Gather -> Concat split over 2 and 4 GPUs: each GPU's graph has
 * B/N rows in every input and output, the baked target is rewritten, and on the reference
 * evaluator each GPU's graph run on its rows of the input gives exactly those rows of the whole
 * model's output. What cannot split is refused with a message naming the tensor or node: a
 * batch that is not a multiple of the GPUs, inputs with different batches, an input without
 * a batch dim, an output whose dim 0 is not the batch, Softmax over axis 0, a constant of the
 * whole batch, a Reshape target that is not a multiple of the GPUs. The split graph prints
 * (batch_split N) and parses back; a second run changes nothing.
 */
#include "support.h"

#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 8, C = 3, S = 4, M = 4, F = M * S * S, OUT = 5 };

typedef enum flatten_kind { FLAT_CONST, FLAT_SHAPE } flatten_kind;

/* x [b, C, S, S] -> Conv (M 3x3, pad 1) -> Relu -> flatten to [b, F] -> @ W [F, OUT] + bias
 * -> Softmax(-1) -> y. FLAT_CONST flattens with a stored target {b, F}; FLAT_SHAPE with
 * Concat(Gather(Shape(x), 0), {-1}), as exporters write it. */
static ampc_graph *convnet(int64_t b, flatten_kind kind) {
    ampc_graph *g = ampc_graph_create("convnet");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(b, C, S, S));
    double w[M * C * 9], fc[F * OUT], bias[OUT];
    for (int i = 0; i < M * C * 9; i++) w[i] = sin(i * 0.37) * 0.4;
    for (int i = 0; i < F * OUT; i++) fc[i] = cos(i * 0.11) * 0.2;
    for (int i = 0; i < OUT; i++) bias[i] = 0.05 * i;
    int64_t pads[4] = {1, 1, 1, 1};
    ampc_value *t = ampc_conv2d(g, x, t_const_f32(g, SHAPE(M, C, 3, 3), w), NULL, NULL, pads,
                                NULL, 1);
    t = ampc_relu(g, t);
    if (kind == FLAT_CONST) {
        int64_t target[2] = {b, F};
        t = ampc_reshape(g, t, target, 2);
    } else {
        ampc_value *shape = ampc_op(g, "Shape", &t, 1, NULL, 0);
        ampc_value *gi[2] = {shape, ampc_const_i64s(g, (int64_t[]){0}, 1)};
        ampc_value *rows = ampc_op(g, "Gather", gi, 2, NULL, 0);
        ampc_value *parts[2] = {rows, ampc_const_i64s(g, (int64_t[]){-1}, 1)};
        ampc_value *ri[2] = {t, ampc_concat(g, parts, 2, 0)};
        t = ampc_op(g, "Reshape", ri, 2, NULL, 0);
    }
    t = ampc_add(g, ampc_matmul(g, t, t_const_f32(g, SHAPE(F, OUT), fc)),
                 t_const_f32(g, SHAPE(OUT), bias));
    ampc_output(g, ampc_softmax(g, t, -1), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static ampc_pipeline_options data(int32_t n) {
    return (ampc_pipeline_options){.verify = true, .gpus = n, .partition = AMPC_PARTITION_DATA};
}

/* Runs only the partition-data pass over n GPUs; asserts it succeeds. */
static void split_only(ampc_graph *g, int32_t n) {
    ampc_pipeline_options o = data(n);
    cr_assert_eq(ampc_pipeline_run_pass(g, "partition-data", &o), AMPC_OK, "%s",
                 ampc_graph_errors(g));
}

/* Runs the pass and expects it to fail with `needle` in the diagnostics. */
static void refused(ampc_graph *g, int32_t n, const char *needle) {
    ampc_pipeline_options o = data(n);
    cr_assert_neq(ampc_pipeline_run_pass(g, "partition-data", &o), AMPC_OK,
                  "the split should be refused (%s)", needle);
    t_expect_diag(g, needle);
    ampc_graph_destroy(g);
}

/* The whole model on x [B, ...] against the split graph (through the whole pipeline) on each
 * GPU's rows: rank r's output is rows [r B/n, (r+1) B/n) of the whole one. */
static void rows_match(flatten_kind kind, int32_t n) {
    ampc_graph *whole = convnet(B, kind), *split = convnet(B, kind);
    ampc_pipeline_options o = data(n), one = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(split, &o), AMPC_OK, "%s", ampc_graph_errors(split));
    cr_assert_eq(ampc_graph_optimize(whole, &one), AMPC_OK, "%s", ampc_graph_errors(whole));
    cr_assert_eq(split->data_ranks, n);
    int64_t rows = B / n;
    cr_assert_eq(split->inputs[0]->shape.dims[0], rows);
    cr_assert_eq(split->outputs[0]->shape.dims[0], rows);
    cr_assert_eq(split->outputs[0]->shape.dims[1], OUT);
    float x[B * C * S * S];
    for (int i = 0; i < B * C * S * S; i++) x[i] = (float)cos(i * 0.29) - 0.2f;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(B, C, S, S), x), ref = {0};
    cr_assert_eq(ampc_graph_evaluate(whole, &in, 1, &ref, 1), AMPC_OK, "%s",
                 ampc_graph_errors(whole));
    int64_t row_in = C * S * S;
    for (int32_t r = 0; r < n; r++) {
        ampc_tensor part = t_tensor(AMPC_DTYPE_F32, SHAPE(rows, C, S, S), x + r * rows * row_in);
        ampc_tensor got = {0};
        cr_assert_eq(ampc_graph_evaluate(split, &part, 1, &got, 1), AMPC_OK, "%s",
                     ampc_graph_errors(split));
        ampc_tensor want = t_tensor(AMPC_DTYPE_F32, SHAPE(rows, OUT),
                                    (float *)ref.data + r * rows * OUT);
        char msg[512];
        cr_assert(t_tensors_close(&got, &want, 1e-6, 1e-7, "y", msg, sizeof msg),
                  "rank %d of %d: %s", r, n, msg);
        ampc_tensor_free(&got);
    }
    ampc_tensor_free(&ref);
    ampc_graph_destroy(whole);
    ampc_graph_destroy(split);
}

Test(partition_data, stored_target_over_two_gpus) { rows_match(FLAT_CONST, 2); }
Test(partition_data, stored_target_over_four_gpus) { rows_match(FLAT_CONST, 4); }
Test(partition_data, shape_computed_target_over_two_gpus) { rows_match(FLAT_SHAPE, 2); }
Test(partition_data, shape_computed_target_over_four_gpus) { rows_match(FLAT_SHAPE, 4); }

Test(partition_data, stored_target_is_rewritten_and_the_graph_prints_back) {
    ampc_graph *g = convnet(B, FLAT_CONST);
    split_only(g, 2);
    const ampc_node *reshape = NULL;
    for (int32_t i = 0; i < g->n_nodes && !reshape; i++)
        if (g->nodes[i]->op == AMPC_OP_RESHAPE) reshape = g->nodes[i];
    cr_assert(reshape);
    const int64_t *target = reshape->inputs[1]->data;
    cr_assert_eq(target[0], B / 2, "target %lld", (long long)target[0]);
    cr_assert_eq(target[1], F);
    char *text = ampc_graph_to_text(g, true);
    cr_assert(strstr(text, "graph \"convnet\" batch_split 2 {"), "%s", text);
    ampc_graph *back = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &back, &err), AMPC_OK, "%s", err);
    cr_assert_eq(back->data_ranks, 2);
    char *again = ampc_graph_to_text(back, true);
    cr_assert_str_eq(again, text);
    /* a second run, on the split graph's text, changes nothing */
    bool changed = true;
    ampc_pipeline_options po = {.gpus = 2, .partition = AMPC_PARTITION_DATA};
    const ampc_pass_ctx cx = {.opt = &po};
    cr_assert_eq(ampc_pass_partition_data(back, &cx, &changed), AMPC_OK, "%s",
                 ampc_graph_errors(back));
    cr_assert_not(changed);
    cr_assert_eq(back->inputs[0]->shape.dims[0], B / 2);
    /* over another number of GPUs it is refused */
    po.gpus = 4;
    cr_assert_neq(ampc_pass_partition_data(back, &cx, &changed), AMPC_OK);
    t_expect_diag(back, "already one GPU's share of a batch split over 2");
    free(text);
    free(again);
    ampc_graph_destroy(back);
    ampc_graph_destroy(g);
}

Test(partition_data, batch_not_a_multiple_of_the_gpus) {
    refused(convnet(6, FLAT_SHAPE), 4, "the batch (dim 0 of input 'x' [6,3,4,4]) is 6, not a "
                                       "multiple of the 4 GPUs");
}

Test(partition_data, inputs_with_different_batches) {
    ampc_graph *g = ampc_graph_create("two");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(4, 3));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_output(g, ampc_add(g, a, ampc_op(g, "Tile", (ampc_value *[]){b, ampc_const_i64s(g, (int64_t[]){2, 1}, 2)}, 2, NULL, 0)), "y");
    refused(g, 2, "input 'b' is [2,3], dim 0 2, but the batch (dim 0 of input 'a') is 4: every "
                  "input must lead with the batch");
}

Test(partition_data, input_without_a_batch_dim) {
    ampc_graph *g = ampc_graph_create("scalar");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(4, 3));
    ampc_value *s = t_input(g, "scale", AMPC_DTYPE_F32, SHAPE());
    ampc_output(g, ampc_mul(g, a, s), "y");
    refused(g, 2, "input 'scale' is a scalar, expected a batch dim first");
}

Test(partition_data, output_whose_dim_0_is_not_the_batch) {
    ampc_graph *g = ampc_graph_create("sum");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(4, 3));
    ampc_value *in[2] = {a, ampc_const_i64s(g, (int64_t[]){0}, 1)};
    ampc_output(g, ampc_op(g, "ReduceSum", in, 2, (ampc_attr_arg[]){AMPC_ATTR_I("keepdims", 0)}, 1), "total");
    refused(g, 2, "output 'total' is [3], expected dim 0 to be the batch 4");
}

Test(partition_data, softmax_over_the_batch) {
    ampc_graph *g = ampc_graph_create("softmax0");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(4, 3));
    ampc_output(g, ampc_softmax(g, a, 0), "y");
    refused(g, 2, "Softmax works along axis 0 of 'a', the batch");
}

Test(partition_data, constant_of_the_whole_batch) {
    ampc_graph *g = ampc_graph_create("bias");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(4, 3));
    ampc_value *c = ampc_constant(g, "per_row", AMPC_DTYPE_F32, 2, (int64_t[]){4, 3}, (float[12]){0});
    ampc_output(g, ampc_add(g, a, c), "y");
    refused(g, 2, "the constant 'per_row' has the whole batch 4 as dim 0");
}

Test(partition_data, reshape_target_not_a_multiple_of_the_gpus) {
    ampc_graph *g = ampc_graph_create("reshape");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(4, 6));
    ampc_value *t = ampc_reshape(g, a, (int64_t[]){3, 8}, 2);
    ampc_output(g, ampc_reshape(g, t, (int64_t[]){4, 6}, 2), "y");
    refused(g, 2, "starts with 3 rows, not a multiple of the 2 GPUs");
}

Test(partition_data, transpose_of_the_batch) {
    ampc_graph *g = ampc_graph_create("transpose");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(4, 4));
    ampc_output(g, ampc_transpose(g, a, (int64_t[]){1, 0}, 2), "y");
    refused(g, 2, "Transpose moves dim 0 of 'a'");
}
