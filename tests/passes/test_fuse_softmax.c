/*
 * test_fuse_softmax.c — the fuse-softmax pass: Softmax guarded by Where(IsNaN(s), 0, s), as torch
 * exports attention, becomes one ampc.SafeSoftmax computing the same values bit for bit (a fully
 * masked row, all -inf, gives zeros instead of NaN); near misses stay; on the GPU against the
 * guarded graph on the reference.
 */
#include "support.h"

#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { GUARDED, SOFTMAX_READ_TWICE, NONZERO_REPLACEMENT };

static ampc_graph *guarded(int variant) {
    ampc_graph *g = ampc_graph_create("sm");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 8));
    ampc_value *s = ampc_op(g, "Softmax", &x, 1, NULL, 0);
    ampc_value *nan = ampc_op(g, "IsNaN", &s, 1, NULL, 0);
    ampc_value *w[3] = {nan, ampc_scalar_f32(g, variant == NONZERO_REPLACEMENT ? 1.0f : 0.0f), s};
    ampc_output(g, ampc_op(g, "Where", w, 3, NULL, 0), "y");
    if (variant == SOFTMAX_READ_TWICE) ampc_output(g, s, "s");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* Scores with the second row of each batch fully masked (-inf). */
static void fill_scores(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    float *x = t->data;
    for (int64_t i = 0, n = ampc_shape_numel(&t->shape); i < n; i++)
        x[i] = (i / 8) % 3 == 1 ? -INFINITY : (float)sin((double)(i + (int64_t)*seed) * 0.9) * 3;
}

static void check(int variant, int32_t fused) {
    ampc_graph *a = guarded(variant), *b = guarded(variant);
    const char *off[1] = {"fuse-softmax"};
    ampc_pipeline_options with = {.verify = true}, without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_SAFE_SOFTMAX), fused);
    cr_assert_eq(t_count_op(a, AMPC_OP_IS_NAN), 1 - fused);
    float x[48];
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3, 8), x), ya[2], yb[2];
    uint64_t seed = 1;
    fill_scores(&in, "x", &seed);
    int32_t n_out = ampc_graph_output_count(a);
    cr_assert_eq(ampc_graph_evaluate(a, &in, 1, ya, n_out), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, &in, 1, yb, n_out), AMPC_OK, "%s", ampc_graph_errors(b));
    for (int32_t i = 0; i < n_out; i++) {
        cr_assert_arr_eq(ya[i].data, yb[i].data, 48 * sizeof(float));
        ampc_tensor_free(&ya[i]);
        ampc_tensor_free(&yb[i]);
    }
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(fuse_softmax, guarded_softmax_becomes_one_node) { check(GUARDED, 1); }
Test(fuse_softmax, softmax_read_elsewhere_stays) { check(SOFTMAX_READ_TWICE, 0); }
Test(fuse_softmax, other_replacement_stays) { check(NONZERO_REPLACEMENT, 0); }

Test(fuse_softmax_gpu, masked_rows_give_zeros) {
    t_gpu_check c = {.fill = fill_scores, .seed = 4, .rtol = 1e-5, .atol = 1e-6, .what = "SafeSoftmax"};
    t_gpu_vs_reference(guarded(GUARDED), &c);
}
