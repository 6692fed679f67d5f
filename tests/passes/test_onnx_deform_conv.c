/*
 * test_onnx_deform_conv.c — the onnx-deform-conv pass (a GPU build): a 2-D ONNX DeformConv
 * (groups, offset groups, a mask and a bias, strides, pads and dilations) becomes GridSamples
 * and a MatMul that compute what the node does on the reference evaluator, and on the GPU;
 * outside a GPU build the node stays. (The ONNX DeformConv node tests run through the GPU build's
 * graph too: tests/conformance/test_conformance.c, gpu_graph.)
 */
#include "support.h"

#include "ir/ref/ref.h"
#include "passes/passes.h"


enum { N = 2, H = 6, W = 5 };

typedef struct form {
    const char *what;
    int64_t C, M, group, og, stride, pad, dil;
    bool mask, bias;
    ampc_dtype t;
} form;

static int64_t out_dim(const form *f, int64_t in) {
    return (in + 2 * f->pad - f->dil * 2 - 1) / f->stride + 1; /* 3x3 kernel */
}

static ampc_graph *build(const form *f) {
    ampc_graph *g = ampc_graph_create("deform");
    const ampc_dtype t = f->t ? f->t : AMPC_DTYPE_F32;
    const int64_t oh = out_dim(f, H), ow = out_dim(f, W);
    ampc_value *in[5] = {t_input(g, "x", t, SHAPE(N, f->C, H, W)),
                         t_input(g, "w", t, SHAPE(f->M, f->C / f->group, 3, 3)),
                         t_input(g, "off", t, SHAPE(N, f->og * 18, oh, ow)), NULL, NULL};
    if (f->bias) in[3] = t_input(g, "b", t, SHAPE(f->M));
    if (f->mask) in[4] = t_input(g, "mask", t, SHAPE(N, f->og * 9, oh, ow));
    const int64_t two[2] = {f->stride, f->stride}, pads[4] = {f->pad, f->pad, f->pad, f->pad},
                  dil[2] = {f->dil, f->dil};
    const ampc_attr_arg at[5] = {AMPC_ATTR_IS("strides", two, 2), AMPC_ATTR_IS("pads", pads, 4),
                                 AMPC_ATTR_IS("dilations", dil, 2),
                                 AMPC_ATTR_I("group", f->group),
                                 AMPC_ATTR_I("offset_group", f->og)};
    ampc_value *y = ampc_op(g, "DeformConv", in, f->mask ? 5 : f->bias ? 4 : 3, at, 5);
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s: %s", f->what, ampc_graph_errors(g));
    ampc_output(g, y, "y");
    return g;
}

/* Floats in [-1, 1); offsets in [-2.5, 2.5) pixels, so that samples fall across the borders. */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    const double span = name[0] == 'o' ? 2.5 : 1.0;
    const int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
        const double u = (double)(uint32_t)(*seed >> 33) / 2147483648.0 - 1.0;
        ampc_ref_store_f64(t->data, t->dtype, i, span * u);
    }
}

static const form forms[] = {
    {.what = "plain", .C = 3, .M = 4, .group = 1, .og = 1, .stride = 1, .pad = 1, .dil = 1},
    {.what = "mask and bias", .C = 2, .M = 3, .group = 1, .og = 1, .stride = 1, .pad = 0, .dil = 1,
     .mask = true, .bias = true},
    {.what = "groups, offset groups, stride 2", .C = 4, .M = 6, .group = 2, .og = 2, .stride = 2,
     .pad = 1, .dil = 1, .bias = true},
    {.what = "dilation 2, offset groups, mask", .C = 4, .M = 2, .group = 1, .og = 4, .stride = 1,
     .pad = 2, .dil = 2, .mask = true},
};

static ampc_graph *build_case(size_t i, ampc_dtype t) {
    form f = forms[i];
    if (t) f.t = t;
    return build(&f);
}

static const char *case_what(size_t i) { return forms[i].what; }

/* No DeformConv left: a GridSample per offset group. */
static void sampled(size_t i, const ampc_graph *g) {
    cr_assert_eq(t_count_op(g, AMPC_OP_DEFORM_CONV), 0, "%s", forms[i].what);
    cr_assert_eq(t_count_op(g, AMPC_OP_GRID_SAMPLE), forms[i].og, "%s", forms[i].what);
}

Test(onnx_deform_conv, each_form_becomes_grid_samples_computing_the_same) {
    t_expect_gpu_build_same(build_case, sizeof forms / sizeof *forms, fill, 3, 1e-5, 1e-6,
                            sampled);
}

Test(onnx_deform_conv, stays_outside_a_gpu_build) {
    ampc_graph *g = build(&forms[0]);
    ampc_pipeline_options po = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_DEFORM_CONV), 1);
    ampc_graph_destroy(g);
}

Test(onnx_deform_conv, gpu_matches_the_reference) {
    t_gpu_vs_reference_cases(build_case, sizeof forms / sizeof *forms, case_what, fill, 17, 1e-4,
                             1e-2);
}
