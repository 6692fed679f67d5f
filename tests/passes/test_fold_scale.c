/*
 * test_fold_scale.c — the fold-scale pass: a scalar product after a matmul with constant weights,
 * through Reshape and Transpose (torch's scaled_dot_product_attention export), goes into the
 * weights and bias; the graph computes what it computed (reference evaluator); near misses stay.
 */
#include "support.h"

#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PLAIN, RELU_NEGATIVE, USED_TWICE };

/* x [2,4,8] @ W [8,8] + bias -> Reshape [2,4,2,4] -> Transpose [0,2,1,3] -> * c */
static ampc_graph *attention_query(int variant, double c) {
    ampc_graph *g = ampc_graph_create("q");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 4, 8));
    double w[64], b[8];
    for (int i = 0; i < 64; i++) w[i] = sin(i * 0.7) * 0.5;
    for (int i = 0; i < 8; i++) b[i] = 0.1 * i - 0.3;
    ampc_value *mm[2] = {x, t_const_f32(g, SHAPE(8, 8), w)};
    ampc_value *h = ampc_add(g, ampc_op(g, "MatMul", mm, 2, NULL, 0), t_const_f32(g, SHAPE(8), b));
    if (variant == RELU_NEGATIVE) h = ampc_op(g, "Relu", &h, 1, NULL, 0);
    int64_t dims[4] = {2, 4, 2, 4};
    ampc_value *rs[2] = {h, t_const_i64(g, SHAPE(4), dims)};
    ampc_value *r = ampc_op(g, "Reshape", rs, 2, NULL, 0);
    ampc_attr_arg perm = AMPC_ATTR_IS("perm", ((int64_t[]){0, 2, 1, 3}), 4);
    ampc_value *t = ampc_op(g, "Transpose", &r, 1, &perm, 1);
    ampc_output(g, ampc_mul(g, t, ampc_scalar_f32(g, (float)c)), "y");
    if (variant == USED_TWICE) ampc_output(g, t, "t");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static void check(int variant, double c, int muls_left) {
    ampc_graph *a = attention_query(variant, c), *b = attention_query(variant, c);
    const char *off[1] = {"fold-scale"};
    ampc_pipeline_options with = {.verify = true}, without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_MUL), muls_left, "%s", ampc_graph_to_text(a, false));
    cr_assert_eq(t_count_op(b, AMPC_OP_MUL), 1);
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = (float)cos(i * 0.3);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 4, 8), x);
    t_expect_same_outputs(a, b, &in, 1, 1e-6, 1e-6);
    cr_assert_str_eq(ampc_value_name(ampc_graph_output(a, 0)), "y");
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(fold_scale, query_scaling_goes_into_the_weights) { check(PLAIN, 0.35355339, 0); }
Test(fold_scale, a_negative_scale_does_not_cross_a_relu) { check(RELU_NEGATIVE, -0.5, 1); }
Test(fold_scale, a_positive_scale_crosses_a_relu) { check(RELU_NEGATIVE, 0.5, 0); }
Test(fold_scale, an_intermediate_used_elsewhere_stays) { check(USED_TWICE, 0.5, 1); }
