/*
 * test_fuse_norm.c — the fuse-norm pass: the RMS norm written out as Llama's export writes it
 * (Cast to f32, Pow 2, ReduceMean over the last axis with the older `axes` attribute, Add eps,
 * Sqrt, Div(1, .), Mul by x, Cast back, Mul by the weight) and as a plain Div of x (axes as an
 * input, the square a Mul(x, x)) becomes one RMSNormalization; what is not such a norm stays
 * (a reduction over another axis, another exponent, a value read elsewhere); the result is the
 * written-out graph's on the reference evaluator, and on the GPU.
 */
#include "support.h"

#include "passes/passes.h"
#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { LLAMA, PLAIN_DIV, OTHER_AXIS, CUBE, SQRT_READ_TWICE };

static ampc_graph *rms(int variant) {
    ampc_graph *g = ampc_graph_create("rms");
    const bool llama = variant == LLAMA;
    ampc_value *x = t_input(g, "x", llama ? AMPC_DTYPE_F16 : AMPC_DTYPE_F32, SHAPE(2, 4, 64));
    ampc_attr_arg to32 = AMPC_ATTR_I("to", 1), to16 = AMPC_ATTR_I("to", 10);
    ampc_value *xf = llama ? ampc_op(g, "Cast", &x, 1, &to32, 1) : x;
    ampc_value *sq;
    if (variant == PLAIN_DIV) {
        sq = ampc_mul(g, xf, xf);
    } else {
        ampc_value *p[2] = {xf, ampc_scalar_f32(g, variant == CUBE ? 3.0f : 2.0f)};
        sq = ampc_op(g, "Pow", p, 2, NULL, 0);
    }
    ampc_value *mean;
    if (llama) {
        ampc_attr_arg a[2] = {AMPC_ATTR_IS("axes", ((int64_t[]){-1}), 1), AMPC_ATTR_I("keepdims", 1)};
        mean = ampc_op(g, "ReduceMean", &sq, 1, a, 2);
    } else {
        const int64_t axis = variant == OTHER_AXIS ? 1 : 2;
        ampc_value *r[2] = {sq, ampc_const_i64s(g, &axis, 1)};
        mean = ampc_op(g, "ReduceMean", r, 2, NULL, 0);
    }
    ampc_value *s = ampc_op(g, "Sqrt", (ampc_value *[]){ampc_add(g, mean, ampc_scalar_f32(g, 1e-6f))}, 1,
                            NULL, 0);
    ampc_value *y;
    if (llama) {
        ampc_value *d[2] = {ampc_scalar_f32(g, 1.0f), s};
        y = ampc_mul(g, xf, ampc_op(g, "Div", d, 2, NULL, 0));
        y = ampc_op(g, "Cast", &y, 1, &to16, 1);
        double w[64];
        for (int i = 0; i < 64; i++) w[i] = 0.5 + 0.01 * i;
        ampc_value *w32 = t_const_f32(g, SHAPE(64), w);
        y = ampc_mul(g, ampc_op(g, "Cast", &w32, 1, &to16, 1), y);
    } else {
        ampc_value *d[2] = {xf, s};
        y = ampc_op(g, "Div", d, 2, NULL, 0);
    }
    ampc_output(g, y, "y");
    if (variant == SQRT_READ_TWICE) ampc_output(g, s, "s");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    for (int64_t i = 0, n = ampc_shape_numel(&t->shape); i < n; i++)
        ampc_ref_store_f64(t->data, t->dtype, i, sin((double)(i + (int64_t)*seed) * 0.7) * 3.0);
}

/* Optimises the variant with and without fuse-norm; `fused` RMSNormalizations expected; output
 * 0 of both on the reference within a relative 1e-3 (f16) or 1e-6 (f32) of its largest value. */
static void check(int variant, int32_t fused) {
    ampc_graph *a = rms(variant), *b = rms(variant);
    const char *off[1] = {"fuse-norm"};
    ampc_pipeline_options with = {.verify = true}, without = {.verify = true, .disable = off, .n_disable = 1};
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_RMS_NORM), fused);
    cr_assert_eq(t_count_op(a, AMPC_OP_SQRT), 1 - fused);
    cr_assert_eq(t_count_op(a, AMPC_OP_REDUCE_MEAN), 1 - fused);
    const ampc_dtype t = variant == LLAMA ? AMPC_DTYPE_F16 : AMPC_DTYPE_F32;
    char buf[2 * 4 * 64 * 4];
    ampc_tensor in = t_tensor(t, SHAPE(2, 4, 64), buf), ya[2], yb[2];
    uint64_t seed = 3;
    fill(&in, "x", &seed);
    const int32_t n_out = ampc_graph_output_count(a);
    cr_assert_eq(ampc_graph_evaluate(a, &in, 1, ya, n_out), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, &in, 1, yb, n_out), AMPC_OK, "%s", ampc_graph_errors(b));
    double worst = 0, top = 0;
    for (int64_t i = 0; i < 2 * 4 * 64; i++) {
        const double p = ampc_ref_load_f64(ya[0].data, ya[0].dtype, i), q = ampc_ref_load_f64(yb[0].data, yb[0].dtype, i);
        worst = fmax(worst, fabs(p - q)), top = fmax(top, fabs(q));
    }
    cr_assert(top > 0.5 && worst <= (t == AMPC_DTYPE_F16 ? 1e-3 : 1e-6) * top,
              "fused and written-out norms differ by %g (largest %g)", worst, top);
    for (int32_t i = 0; i < n_out; i++) ampc_tensor_free(&ya[i]), ampc_tensor_free(&yb[i]);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

Test(fuse_norm, llamas_written_out_norm_becomes_one_node) { check(LLAMA, 1); }
Test(fuse_norm, a_division_by_the_root_mean_square_too) { check(PLAIN_DIV, 1); }
Test(fuse_norm, a_mean_over_another_axis_stays) { check(OTHER_AXIS, 0); }
Test(fuse_norm, another_exponent_stays) { check(CUBE, 0); }
Test(fuse_norm, a_root_read_elsewhere_stays) { check(SQRT_READ_TWICE, 0); }

Test(fuse_norm_gpu, llamas_norm_on_the_gpu) {
    t_gpu_check c = {.fill = fill, .seed = 5, .rtol = 2e-3, .atol = 2e-3, .what = "fused RMS norm f16"};
    t_gpu_vs_reference(rms(LLAMA), &c);
}

Test(fuse_norm_gpu, a_division_on_the_gpu) {
    t_gpu_check c = {.fill = fill, .seed = 6, .rtol = 1e-5, .atol = 1e-6, .what = "fused RMS norm f32"};
    t_gpu_vs_reference(rms(PLAIN_DIV), &c);
}
