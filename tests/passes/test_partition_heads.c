/*
 * test_partition_heads.c — the partition pass on attention: BERT-like layers (Q, K, V
 * projections with biases, heads split by Reshape + Transpose, K transposed again, Div by
 * sqrt(D), the mask Add, Softmax, heads merged back, Wo + bo + residual, LayerNorm) and the
 * scaled_dot_product_attention export (sqrt-scale Muls, the NaN guard) split by heads over 2 and
 * 4 ranks compute what the whole model computes on the reference evaluator; each rank's Wq, bq,
 * Reshape target and Wo are checked against their slice of the original; bo and the residual
 * sit on rank 0's partial; the whole pipeline still fuses each rank's attention; blocks that
 * cannot split (heads not a multiple of the ranks, a per-head mask, a value read outside the
 * block) stay whole with their reason in the report's partition_blocks; a second run changes
 * nothing.
 */
#include "support.h"

#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum form { BERT, SDPA };
enum variant { PLAIN, HEAD_MASK, Q_READ };

typedef struct lcase {
    int64_t B, S, H, D;
    int layers;
    enum form form;
    enum variant variant;
} lcase;

static ampc_value *weights(ampc_graph *g, int64_t rows, int64_t cols, int salt) {
    double *w = malloc((size_t)(rows * cols) * sizeof *w);
    for (int64_t i = 0; i < rows * cols; i++) w[i] = sin((double)(i * 7 + salt)) / sqrt((double)rows);
    ampc_value *v = t_const_f32(g, cols == 1 ? SHAPE(rows) : SHAPE(rows, cols), w);
    free(w);
    return v;
}

/* x @ W [E, E] + b [E] (a projection with its bias). */
static ampc_value *linear(ampc_graph *g, ampc_value *x, int64_t E, int salt) {
    return ampc_add(g, ampc_matmul(g, x, weights(g, E, E, salt)), weights(g, E, 1, salt + 1));
}

static ampc_value *heads(ampc_graph *g, const lcase *c, ampc_value *x, const int64_t perm[4]) {
    const int64_t split[4] = {c->B, c->S, c->H, c->D};
    return ampc_transpose(g, ampc_reshape(g, x, split, 4), perm, 4);
}

/* One layer's attention half on x [B, S, E]: LayerNorm(x + attention(x) @ Wo + bo). */
static ampc_value *layer(ampc_graph *g, const lcase *c, ampc_value *x, ampc_value *mask, int l) {
    static const int64_t bhsd[4] = {0, 2, 1, 3}, bhds[4] = {0, 2, 3, 1}, swap[4] = {0, 1, 3, 2};
    const int64_t E = c->H * c->D;
    ampc_value *q = linear(g, x, E, 100 * l + 1), *k = linear(g, x, E, 100 * l + 3);
    ampc_value *v = linear(g, x, E, 100 * l + 5);
    if (c->variant == Q_READ) ampc_output(g, q, "q");
    ampc_value *s, *p;
    if (c->form == BERT) {
        ampc_value *kt = ampc_transpose(g, heads(g, c, k, bhsd), swap, 4);
        s = ampc_div(g, ampc_matmul(g, heads(g, c, q, bhsd), kt), ampc_scalar_f32(g, sqrtf((float)c->D)));
        s = ampc_add(g, s, mask);
        p = ampc_softmax(g, s, -1);
    } else {
        ampc_value *r = ampc_scalar_f32(g, (float)sqrt(1 / sqrt((double)c->D)));
        s = ampc_matmul(g, ampc_mul(g, heads(g, c, q, bhsd), r), ampc_mul(g, heads(g, c, k, bhds), r));
        p = ampc_softmax(g, ampc_add(g, s, mask), -1);
        ampc_value *nan = ampc_op(g, "IsNaN", &p, 1, NULL, 0);
        ampc_value *w[3] = {nan, ampc_scalar_f32(g, 0), p};
        p = ampc_op(g, "Where", w, 3, NULL, 0);
    }
    ampc_value *y = ampc_transpose(g, ampc_matmul(g, p, heads(g, c, v, bhsd)), bhsd, 4);
    const int64_t merged[3] = {c->B, c->S, E};
    y = linear(g, ampc_reshape(g, y, merged, 3), E, 100 * l + 7);
    ampc_value *a = ampc_add(g, y, x);
    return ampc_layer_norm(g, a, weights(g, E, 1, 100 * l + 9), weights(g, E, 1, 100 * l + 11),
                           -1, 1e-5f);
}

static ampc_graph *build(const lcase *c) {
    ampc_graph *g = ampc_graph_create("layers");
    const int64_t E = c->H * c->D;
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(c->B, c->S, E));
    ampc_value *mask = c->variant == HEAD_MASK
                           ? t_input(g, "mask", AMPC_DTYPE_F32, SHAPE(c->B, c->H, c->S, c->S))
                           : t_input(g, "mask", AMPC_DTYPE_F32, SHAPE(c->B, 1, 1, c->S));
    for (int l = 0; l < c->layers; l++) x = layer(g, c, x, mask, l);
    ampc_output(g, x, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* What the last pipeline run with ranks() reported (each test runs in a process of its own). */
static ampc_pipeline_report report;

static ampc_pipeline_options ranks(int32_t n) {
    return (ampc_pipeline_options){.verify = true, .gpus = n, .partition = AMPC_PARTITION_TENSOR,
                                   .report = &report};
}

/* x uniform in [-1, 1); the mask 0, with the last key of odd batches at -10000. */
static void same_outputs(ampc_graph *a, ampc_graph *b) {
    ampc_tensor in[2];
    uint64_t seed = 11;
    for (int32_t i = 0; i < 2; i++) {
        const ampc_value *v = ampc_graph_input(a, i);
        in[i] = (ampc_tensor){ampc_value_dtype(v), ampc_value_shape(v), NULL};
        const int64_t n = ampc_shape_numel(&in[i].shape), last = in[i].shape.dims[3];
        in[i].data = calloc((size_t)n, sizeof(float));
        if (!strcmp(ampc_value_name(v), "x")) {
            t_fill_uniform_f32(&in[i], "x", &seed);
        } else {
            for (int64_t j = 0; j < n; j++)
                ((float *)in[i].data)[j] = (j / last) % 2 && j % last == last - 1 ? -10000.f : 0;
        }
    }
    t_expect_same_outputs(a, b, in, 2, 1e-5, 1e-5);
    for (int32_t i = 0; i < 2; i++) free(in[i].data);
}

static int64_t rank_of(const ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, "rank");
    return a ? a->i : -1;
}

/* The k-th node of op `op` on rank r. */
static const ampc_node *nth_of_rank(const ampc_graph *g, ampc_opcode op, int64_t r, int k) {
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == op && rank_of(g->nodes[i]) == r && k-- == 0) return g->nodes[i];
    return NULL;
}

/* Whether constant `part` is columns [c0, c0 + w) (rows when `rows`) of `whole`. */
static void expect_slice(const ampc_value *part, const float *whole, int64_t n_rows, int64_t n_cols,
                         bool rows, int64_t c0, int64_t w, const char *what) {
    const float *d = part->data;
    cr_assert(d, "%s is a constant", what);
    for (int64_t i = 0; i < (rows ? w : n_rows); i++)
        for (int64_t j = 0; j < (rows ? n_cols : w); j++) {
            const float want = rows ? whole[(c0 + i) * n_cols + j] : whole[i * n_cols + c0 + j];
            const float got = rows ? d[i * n_cols + j] : d[i * w + j];
            cr_assert_eq(got, want, "%s[%lld, %lld]", what, (long long)i, (long long)j);
        }
}

/* Only the partition pass over r ranks: each rank's shards against the original weights. */
static void shards_over(int32_t r) {
    const lcase c = {2, 5, 4, 4, 1, BERT, PLAIN};
    const int64_t E = c.H * c.D, w = E / r;
    ampc_graph *g = build(&c), *whole = build(&c);
    const ampc_node *mq = g->nodes[0], *aq = g->nodes[1];
    cr_assert(mq->op == AMPC_OP_MATMUL && aq->op == AMPC_OP_ADD);
    float *wq = malloc((size_t)(E * E) * sizeof *wq), bq[64], *wo = malloc((size_t)(E * E) * sizeof *wo);
    memcpy(wq, mq->inputs[1]->data, (size_t)(E * E) * sizeof *wq);
    memcpy(bq, aq->inputs[1]->data, (size_t)E * sizeof *bq);
    const ampc_node *mo = NULL;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == AMPC_OP_MATMUL && g->nodes[i]->inputs[1]->data) mo = g->nodes[i];
    memcpy(wo, mo->inputs[1]->data, (size_t)(E * E) * sizeof *wo);
    ampc_pipeline_options o = ranks(r);
    cr_assert_eq(ampc_pipeline_run_pass(g, "partition", &o), AMPC_OK, "%s", ampc_graph_errors(g));
    char *text = ampc_graph_to_text(g, false);
    cr_assert_eq(t_count_op(g, AMPC_OP_ALL_REDUCE), 1, "%s", text);
    cr_assert_eq(t_count_op(g, AMPC_OP_SOFTMAX), r, "one softmax per rank:\n%s", text);
    for (int32_t k = 0; k < r; k++) {
        /* the projections come first: Q's matmul and bias, then K's and V's */
        const ampc_node *q = nth_of_rank(g, AMPC_OP_MATMUL, k, 0), *b = nth_of_rank(g, AMPC_OP_ADD, k, 0);
        cr_assert(q && b, "rank %d has Q's projection:\n%s", k, text);
        expect_slice(q->inputs[1], wq, E, E, false, k * w, w, "rank's Wq");
        expect_slice(b->inputs[1], bq, 1, E, false, k * w, w, "rank's bq");
        const ampc_node *rs = nth_of_rank(g, AMPC_OP_RESHAPE, k, 0);
        const int64_t *t = rs->inputs[1]->data;
        cr_assert(t[0] == c.B && t[1] == c.S && t[2] == c.H / r && t[3] == c.D,
                  "rank %d's Reshape target is [B, S, H/R, D]:\n%s", k, text);
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->op != AMPC_OP_ALL_REDUCE) continue;
        for (int32_t k = 0; k < r; k++) {
            const ampc_node *p = n->inputs[k]->producer;
            if (k == 0) { /* + bo + x on rank 0 */
                cr_assert(p->op == AMPC_OP_ADD && rank_of(p) == 0, "%s", text);
                p = p->inputs[0]->producer->inputs[0]->producer;
            }
            cr_assert(p && p->op == AMPC_OP_MATMUL && rank_of(p) == k, "rank %d's partial:\n%s", k, text);
            expect_slice(p->inputs[1], wo, E, E, true, k * w, w, "rank's Wo");
        }
    }
    cr_assert_eq(report.n_partition_blocks, 1);
    const ampc_partition_block *pb = &report.partition_blocks[0];
    cr_assert(pb->split && !strcmp(pb->kind, "attention"));
    cr_assert(strstr(pb->why, "4 heads"), "%s", pb->why);
    same_outputs(g, whole);
    free(text);
    free(wq);
    free(wo);
    ampc_graph_destroy(g);
    ampc_graph_destroy(whole);
}

Test(partition_heads, shards_over_two_ranks) { shards_over(2); }
Test(partition_heads, shards_over_four_ranks) { shards_over(4); }

/* The whole pipeline over r ranks against one GPU's: the same outputs, one all-reduce per
 * layer, each rank's attention fused, bo and the residual in rank 0's FusedMatMul. */
static void pipeline_over(const lcase *c, int32_t r) {
    ampc_graph *g = build(c), *whole = build(c);
    ampc_pipeline_options o = ranks(r), one = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_optimize(whole, &one), AMPC_OK, "%s", ampc_graph_errors(whole));
    char *text = ampc_graph_to_text(g, false);
    cr_assert_eq(t_count_op(g, AMPC_OP_ALL_REDUCE), c->layers, "%s", text);
    cr_assert_eq(t_count_op(g, AMPC_OP_FUSED_ATTENTION), r * c->layers, "%s", text);
    cr_assert_eq(t_count_op(g, AMPC_OP_ADD), 0, "no Add left:\n%s", text);
    for (int32_t k = 0; k < r; k++) {
        const ampc_node *fa = nth_of_rank(g, AMPC_OP_FUSED_ATTENTION, k, 0);
        cr_assert(fa, "rank %d's attention is fused:\n%s", k, text);
        const ampc_attr *d = ampc_ir_attr_find(fa, "dims");
        cr_assert(d && d->ints[1] == c->H / r, "rank %d has H/R heads:\n%s", k, text);
    }
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->op != AMPC_OP_ALL_REDUCE) continue;
        const ampc_node *p0 = n->inputs[0]->producer;
        cr_assert(p0->op == AMPC_OP_FUSED_MATMUL && p0->n_inputs == 4 && rank_of(p0) == 0,
                  "rank 0's partial is ctx @ Wo + bo + x:\n%s", text);
    }
    same_outputs(g, whole);
    free(text);
    ampc_graph_destroy(g);
    ampc_graph_destroy(whole);
}

Test(partition_heads, bert_layers_over_two_ranks) {
    const lcase c = {2, 5, 4, 4, 2, BERT, PLAIN};
    pipeline_over(&c, 2);
}

Test(partition_heads, bert_layers_over_four_ranks) {
    const lcase c = {2, 5, 8, 2, 2, BERT, PLAIN};
    pipeline_over(&c, 4);
}

Test(partition_heads, sdpa_export_over_two_ranks) {
    const lcase c = {2, 6, 4, 4, 1, SDPA, PLAIN};
    pipeline_over(&c, 2);
}

/* Blocks that cannot split stay whole, each with its reason recorded, and compute the same. */
static void stays_whole(const lcase *c, int32_t r, const char *why) {
    ampc_graph *g = build(c), *whole = build(c);
    ampc_pipeline_options o = ranks(r), one = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_optimize(whole, &one), AMPC_OK, "%s", ampc_graph_errors(whole));
    cr_assert_eq(t_count_op(g, AMPC_OP_ALL_REDUCE), 0, "%s", ampc_graph_to_text(g, false));
    cr_assert_eq(report.n_partition_blocks, c->layers);
    for (int32_t i = 0; i < report.n_partition_blocks; i++) {
        const ampc_partition_block *b = &report.partition_blocks[i];
        cr_assert(!b->split && !strcmp(b->kind, "attention"));
        cr_assert(strstr(b->why, why), "expected '%s' in: %s", why, b->why);
    }
    same_outputs(g, whole);
    ampc_graph_destroy(g);
    ampc_graph_destroy(whole);
}

Test(partition_heads, heads_not_a_multiple_of_the_ranks_stay_whole) {
    const lcase c = {2, 5, 3, 4, 1, BERT, PLAIN};
    stays_whole(&c, 2, "3 heads are not a multiple of 2 ranks");
}

Test(partition_heads, a_mask_per_head_stays_whole) {
    const lcase c = {2, 5, 4, 4, 1, BERT, HEAD_MASK};
    stays_whole(&c, 2, "reads 'mask', which differs per head");
}

Test(partition_heads, a_value_read_outside_stays_whole) {
    const lcase c = {2, 5, 4, 4, 1, BERT, Q_READ};
    stays_whole(&c, 2, "is also read outside it or is a graph output");
}

Test(partition_heads, a_second_run_changes_nothing) {
    const lcase c = {2, 5, 4, 4, 2, BERT, PLAIN};
    ampc_graph *g = build(&c);
    t_expect_second_run_unchanged(g, "partition", ranks(2));
    cr_assert_eq(t_count_op(g, AMPC_OP_ALL_REDUCE), 2);
    ampc_graph_destroy(g);
}
