/*
 * test_onnx_attention.c — the onnx-attention pass (a GPU build): ONNX Attention in its forms (3-D
 * and 4-D, grouped K/V heads, a past cache with present outputs, causal and window rules, a bool
 * or numeric mask shorter than the keys, key lengths given at run time) becomes one
 * ampc.FusedAttention, or with softcap or a read qk_matmul_output its steps written out, whose
 * graph computes what the node does on the reference evaluator, and on the GPU; outside a GPU
 * build, and with causal rules over more than 2^24 (query, key) pairs, the node stays. (Every ONNX Attention node test runs through the GPU build's graph too:
 * tests/conformance/test_conformance.c, gpu_graph.)
 */
#include "support.h"

#include "ir/ref/ref.h"
#include "passes/passes.h"

#include <string.h>

enum { B = 2, HQ = 4, HKV = 2, SQ = 5, SKV = 6, PAST = 3, D = 16, DV = 8 };

typedef struct form {
    const char *what;
    bool rank3, past, causal, bool_mask, float_mask, lengths, window, softcap, qk_out;
    ampc_dtype t;
} form;

/* One Attention node in the form f: inputs q, k, v [, mask, past_key, past_value, lengths];
 * outputs y [, present_key, present_value [, qk]]. */
static ampc_graph *build(const form *f) {
    ampc_graph *g = ampc_graph_create("attention");
    const ampc_dtype t = f->t ? f->t : AMPC_DTYPE_F32;
    ampc_value *in[7] = {NULL};
    if (f->rank3) {
        in[0] = t_input(g, "q", t, SHAPE(B, SQ, HQ * D));
        in[1] = t_input(g, "k", t, SHAPE(B, SKV, HKV * D));
        in[2] = t_input(g, "v", t, SHAPE(B, SKV, HKV * DV));
    } else {
        in[0] = t_input(g, "q", t, SHAPE(B, HQ, SQ, D));
        in[1] = t_input(g, "k", t, SHAPE(B, HKV, SKV, D));
        in[2] = t_input(g, "v", t, SHAPE(B, HKV, SKV, DV));
    }
    const int64_t total = SKV + (f->past ? PAST : 0);
    /* a mask of one column fewer than the keys: the last key counts as masked */
    if (f->bool_mask) in[3] = t_input(g, "mask", AMPC_DTYPE_BOOL, SHAPE(B, 1, SQ, total - 1));
    if (f->float_mask) in[3] = t_input(g, "mask", t, SHAPE(SQ, total - 1));
    if (f->past) {
        in[4] = t_input(g, "past_k", t, SHAPE(B, HKV, PAST, D));
        in[5] = t_input(g, "past_v", t, SHAPE(B, HKV, PAST, DV));
    }
    if (f->lengths) in[6] = t_input(g, "len", AMPC_DTYPE_I64, SHAPE(B));
    ampc_attr_arg at[8];
    int32_t na = 0;
    if (f->rank3) at[na++] = AMPC_ATTR_I("q_num_heads", HQ), at[na++] = AMPC_ATTR_I("kv_num_heads", HKV);
    if (f->causal) at[na++] = AMPC_ATTR_I("is_causal", 1);
    if (f->window) at[na++] = AMPC_ATTR_I("left_window_size", 2);
    if (f->softcap) at[na++] = AMPC_ATTR_F("softcap", 3.0f);
    if (f->qk_out) at[na++] = AMPC_ATTR_I("qk_matmul_output_mode", 3);
    const int32_t n_in = f->lengths ? 7 : f->past ? 6 : in[3] ? 4 : 3;
    const int32_t n_out = f->qk_out ? 4 : f->past ? 3 : 1;
    ampc_value *out[4];
    cr_assert_eq(ampc_op_multi(g, "Attention", in, n_in, at, na, out, n_out), AMPC_OK, "%s: %s",
                 f->what, ampc_graph_errors(g));
    const char *names[4] = {"y", "present_k", "present_v", "qk"};
    for (int32_t i = 0; i < n_out; i++) ampc_output(g, out[i], names[i]);
    return g;
}

/* Random inputs: floats in [-1, 1), mask entries true 4 times in 5, lengths between SQ and the
 * keys. */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    const int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
        const uint32_t r = (uint32_t)(*seed >> 33);
        if (!strcmp(name, "len"))
            ((int64_t *)t->data)[i] = SQ + (int64_t)(r % (SKV - SQ + 1));
        else if (t->dtype == AMPC_DTYPE_BOOL)
            ((uint8_t *)t->data)[i] = r % 5 != 0;
        else
            ampc_ref_store_f64(t->data, t->dtype, i, (double)r / 2147483648.0 - 1.0);
    }
}

static void optimize(ampc_graph *g, bool gpu_build) {
    ampc_pipeline_options po = {.verify = true, .gpu_build = gpu_build};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
}

static const form forms[] = {
    {.what = "4-D"},
    {.what = "3-D, causal", .rank3 = true, .causal = true},
    {.what = "4-D, past cache, causal", .past = true, .causal = true},
    {.what = "3-D, past cache, bool mask", .rank3 = true, .past = true, .bool_mask = true},
    {.what = "4-D, numeric mask, sliding window", .float_mask = true, .window = true,
     .causal = true},
    {.what = "4-D, key lengths, causal", .lengths = true, .causal = true},
    {.what = "3-D, key lengths, bool mask", .rank3 = true, .lengths = true, .bool_mask = true},
    /* written out: softcap, or qk_matmul_output read */
    {.what = "4-D, softcap, causal", .softcap = true, .causal = true},
    {.what = "3-D, past cache, bool mask, qk output", .rank3 = true, .past = true,
     .bool_mask = true, .qk_out = true},
    {.what = "4-D, softcap, key lengths, qk output", .softcap = true, .lengths = true,
     .qk_out = true},
};

static ampc_graph *build_case(size_t i, ampc_dtype t) {
    form f = forms[i];
    if (t) f.t = t;
    return build(&f);
}

static const char *case_what(size_t i) { return forms[i].what; }

/* No Attention left: one ampc.FusedAttention, or the written-out steps (softcap, qk output). */
static void fused(size_t i, const ampc_graph *g) {
    const form *f = &forms[i];
    cr_assert_eq(t_count_op(g, AMPC_OP_ATTENTION), 0, "%s", f->what);
    cr_assert_eq(t_count_op(g, AMPC_OP_FUSED_ATTENTION), f->softcap || f->qk_out ? 0 : 1, "%s",
                 f->what);
}

Test(onnx_attention, each_form_becomes_one_fused_attention_computing_the_same) {
    t_expect_gpu_build_same(build_case, sizeof forms / sizeof *forms, fill, 7, 1e-5, 1e-6, fused);
}

Test(onnx_attention, stays_outside_a_gpu_build) {
    const form f = {.what = "4-D, not a GPU build"};
    ampc_graph *g = build(&f);
    optimize(g, false);
    cr_assert_eq(t_count_op(g, AMPC_OP_ATTENTION), 1);
    cr_assert_eq(t_count_op(g, AMPC_OP_FUSED_ATTENTION), 0);
    ampc_graph_destroy(g);
}

/* Causal rules over more than 2^24 (query, key) pairs would be a constant mask of that size:
 * the node stays, and the GPU build says why. */
Test(onnx_attention, stays_when_its_mask_would_be_too_large) {
    ampc_graph *g = ampc_graph_create("long");
    ampc_value *in[3] = {t_input(g, "q", AMPC_DTYPE_F16, SHAPE(1, 1, 4097, 8)),
                         t_input(g, "k", AMPC_DTYPE_F16, SHAPE(1, 1, 4097, 8)),
                         t_input(g, "v", AMPC_DTYPE_F16, SHAPE(1, 1, 4097, 8))};
    const ampc_attr_arg causal = AMPC_ATTR_I("is_causal", 1);
    ampc_output(g, ampc_op(g, "Attention", in, 3, &causal, 1), "y");
    optimize(g, true);
    cr_assert_eq(t_count_op(g, AMPC_OP_ATTENTION), 1);
    ampc_graph_destroy(g);
}

Test(onnx_attention, second_run_changes_nothing) {
    ampc_pipeline_options po = {.gpu_build = true};
    t_expect_second_run_unchanged(build(&forms[3]), "onnx-attention", po);
}

Test(onnx_attention, gpu_matches_the_reference) {
    t_gpu_vs_reference_cases(build_case, sizeof forms / sizeof *forms, case_what, fill, 3, 1e-4,
                             6e-3);
}
