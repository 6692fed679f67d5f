/*
 * test_fuse_gelu.c — the fuse-gelu pass: x * 0.5 * (1 + erf(x / sqrt 2)), as exporters write it
 * (both multiplication orders, Div by sqrt 2 or Mul by its inverse), becomes one Gelu that
 * computes the same values; near misses (another constant, an intermediate used twice) stay.
 */
#include "support.h"

#include "passes/passes.h"

#include <math.h>

enum { ORDER_X_A_HALF, ORDER_X_HALF_A, ORDER_MUL_INV };

static ampc_graph *gelu_chain(int order, float one) {
    ampc_graph *g = ampc_graph_create("gelu");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 7));
    ampc_value *in[2] = {x, NULL};
    ampc_value *scaled;
    if (order == ORDER_MUL_INV) {
        in[1] = ampc_scalar_f32(g, (float)sqrt(0.5));
        scaled = ampc_mul(g, in[1], x);
    } else {
        scaled = ampc_div(g, x, ampc_scalar_f32(g, (float)sqrt(2.0)));
    }
    ampc_value *e = ampc_op(g, "Erf", &scaled, 1, NULL, 0);
    ampc_value *a = ampc_add(g, e, ampc_scalar_f32(g, one));
    ampc_value *y = order == ORDER_X_HALF_A
                        ? ampc_mul(g, ampc_mul(g, x, ampc_scalar_f32(g, 0.5f)), a)
                        : ampc_mul(g, ampc_mul(g, x, a), ampc_scalar_f32(g, 0.5f));
    ampc_output(g, y, "y");
    return g;
}

static void check(int order) {
    ampc_graph *a = gelu_chain(order, 1.0f), *b = gelu_chain(order, 1.0f);
    const char *off[1] = {"fuse-gelu"};
    ampc_pipeline_options with = {.verify = true}, without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_GELU), 1);
    cr_assert_eq(ampc_graph_node_count(a), 1, "the Gelu alone is left");
    cr_assert_eq(t_count_op(b, AMPC_OP_ERF), 1);
    float x[21];
    for (int i = 0; i < 21; i++) x[i] = (float)(i - 10) / 3.0f;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3, 7), x), ya, yb;
    cr_assert_eq(ampc_graph_evaluate(a, &in, 1, &ya, 1), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, &in, 1, &yb, 1), AMPC_OK, "%s", ampc_graph_errors(b));
    char msg[512];
    cr_assert(t_tensors_close(&ya, &yb, 1e-6, 1e-7, "y", msg, sizeof msg), "%s", msg);
    ampc_tensor_free(&ya);
    ampc_tensor_free(&yb);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(fuse_gelu, x_times_a_times_half) { check(ORDER_X_A_HALF); }
Test(fuse_gelu, x_times_half_times_a) { check(ORDER_X_HALF_A); }
Test(fuse_gelu, multiplied_by_the_inverse) { check(ORDER_MUL_INV); }

Test(fuse_gelu, near_misses_stay) {
    ampc_graph *g = gelu_chain(ORDER_X_A_HALF, 1.5f); /* 1.5 + erf: not GELU */
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_GELU), 0);
    cr_assert_eq(t_count_op(g, AMPC_OP_ERF), 1);
    ampc_graph_destroy(g);
    /* erf's output also a graph output: used twice */
    g = gelu_chain(ORDER_X_A_HALF, 1.0f);
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == AMPC_OP_ERF) ampc_output(g, g->nodes[i]->outputs[0], "e");
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_GELU), 0);
    ampc_graph_destroy(g);
}
