/*
 * test_onnx_rotary.c — the onnx-rotary pass (a GPU build): ONNX RotaryEmbedding in its forms (3-D
 * and 4-D input, halves or interleaved pairs, a partial rotary_embedding_dim, with and without
 * position_ids) becomes slices, products and joins that compute what the node does on the
 * reference evaluator, and on the GPU; outside a GPU build the node stays. (Every ONNX
 * RotaryEmbedding node test runs through the GPU build's graph too:
 * tests/conformance/test_conformance.c, gpu_graph.)
 */
#include "support.h"

#include "ir/ref/ref.h"
#include "passes/passes.h"

#include <string.h>

enum { B = 2, H = 3, S = 5, HEAD = 8, MAX_POS = 12 };

typedef struct form {
    const char *what;
    bool rank3, interleaved, positions;
    int64_t rot; /* 0: the whole head */
    ampc_dtype t;
} form;

static ampc_graph *build(const form *f) {
    ampc_graph *g = ampc_graph_create("rotary");
    const ampc_dtype t = f->t ? f->t : AMPC_DTYPE_F32;
    const int64_t half = (f->rot ? f->rot : HEAD) / 2;
    ampc_value *in[4] = {NULL};
    in[0] = f->rank3 ? t_input(g, "x", t, SHAPE(B, S, H * HEAD))
                     : t_input(g, "x", t, SHAPE(B, H, S, HEAD));
    if (f->positions) {
        in[1] = t_input(g, "cos", t, SHAPE(MAX_POS, half));
        in[2] = t_input(g, "sin", t, SHAPE(MAX_POS, half));
        in[3] = t_input(g, "pos", AMPC_DTYPE_I64, SHAPE(B, S));
    } else {
        in[1] = t_input(g, "cos", t, SHAPE(B, S, half));
        in[2] = t_input(g, "sin", t, SHAPE(B, S, half));
    }
    ampc_attr_arg at[3];
    int32_t na = 0;
    if (f->rank3) at[na++] = AMPC_ATTR_I("num_heads", H);
    if (f->interleaved) at[na++] = AMPC_ATTR_I("interleaved", 1);
    if (f->rot) at[na++] = AMPC_ATTR_I("rotary_embedding_dim", f->rot);
    ampc_value *y = ampc_op(g, "RotaryEmbedding", in, f->positions ? 4 : 3, at, na);
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s: %s", f->what, ampc_graph_errors(g));
    ampc_output(g, y, "y");
    return g;
}

/* Floats in [-1, 1), positions inside the caches. */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    const int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
        const uint32_t r = (uint32_t)(*seed >> 33);
        if (!strcmp(name, "pos")) ((int64_t *)t->data)[i] = r % MAX_POS;
        else ampc_ref_store_f64(t->data, t->dtype, i, (double)r / 2147483648.0 - 1.0);
    }
}

static const form forms[] = {
    {.what = "4-D, halves, position ids", .positions = true},
    {.what = "3-D, halves, cached rows per (b, s)", .rank3 = true},
    {.what = "4-D, interleaved", .interleaved = true},
    {.what = "3-D, interleaved, partial, position ids", .rank3 = true, .interleaved = true,
     .rot = 4, .positions = true},
    {.what = "4-D, halves, partial", .rot = 6},
};

static ampc_graph *build_case(size_t i, ampc_dtype t) {
    form f = forms[i];
    if (t) f.t = t;
    return build(&f);
}

static const char *case_what(size_t i) { return forms[i].what; }

static void rotary_gone(size_t i, const ampc_graph *g) {
    cr_assert_eq(t_count_op(g, AMPC_OP_ROTARY_EMBEDDING), 0, "%s", forms[i].what);
}

Test(onnx_rotary, each_form_becomes_nodes_computing_the_same) {
    t_expect_gpu_build_same(build_case, sizeof forms / sizeof *forms, fill, 5, 1e-6, 1e-7,
                            rotary_gone);
}

Test(onnx_rotary, stays_outside_a_gpu_build) {
    ampc_graph *g = build(&forms[0]);
    ampc_pipeline_options po = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_ROTARY_EMBEDDING), 1);
    ampc_graph_destroy(g);
}

Test(onnx_rotary, gpu_matches_the_reference) {
    t_gpu_vs_reference_cases(build_case, sizeof forms / sizeof *forms, case_what, fill, 9, 1e-5,
                             2e-3);
}
