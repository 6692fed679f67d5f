/*
 * test_lower_conv.c — the depthwise family of codegen/lower_conv.c (kernels/depthwise.cuh): which
 * convolutions take the generated kernel (f16/bf16, channels last, one filter per channel, C a
 * multiple of 8) and which stay with cuDNN, in which form (general, or sliding with tiles of 1, 2
 * or 4 outputs); the kernel compiles with NVRTC; and on a GPU, every variant (3x3 to 7x7,
 * strides, dilations, asymmetric pads, bias, residual, ReLU, f16 and bf16, block widths of 8 to
 * 64 channels, partial tiles) against the reference evaluator.
 */
#include "support.h"

#include "compiler/module.h"
#include "ir/ref/ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dw_case {
    const char *what, *dtype;
    int n, c, h, w, kh, kw, stride, dil, groups;
    int pads[4];   /* ONNX order: h begin, w begin, h end, w end */
    bool bias, residual, relu;
} dw_case;

/* The output size along one dim. */
static int out_dim(int in, int k, int stride, int dil, int pb, int pe) {
    return (in + pb + pe - ((k - 1) * dil + 1)) / stride + 1;
}

/* The case as a graph: Conv [-> Add(residual)] [-> Relu], which fuse-conv and the layout pass
 * make one channels-last ampc.FusedConv. Weights and bias are small deterministic values. */
static ampc_graph *dw_graph(const dw_case *c) {
    int ho = out_dim(c->h, c->kh, c->stride, c->dil, c->pads[0], c->pads[2]);
    int wo = out_dim(c->w, c->kw, c->stride, c->dil, c->pads[1], c->pads[3]);
    int cg = c->c / c->groups;
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "graph \"dw\" {\n  input %%x : %s[%d,%d,%d,%d]\n", c->dtype, c->n, c->c,
                   c->h, c->w);
    if (c->residual)
        ampc_sb_printf(&sb, "  input %%r : %s[%d,%d,%d,%d]\n", c->dtype, c->n, c->c, ho, wo);
    ampc_sb_printf(&sb, "  const %%w : %s[%d,%d,%d,%d] = [", c->dtype, c->c, cg, c->kh, c->kw);
    for (int i = 0, n = c->c * cg * c->kh * c->kw; i < n; i++)
        ampc_sb_printf(&sb, "%s%g", i ? ", " : "", ((i * 37) % 23 - 11) / 32.0);
    ampc_sb_puts(&sb, "]\n");
    if (c->bias) {
        ampc_sb_printf(&sb, "  const %%b : %s[%d] = [", c->dtype, c->c);
        for (int i = 0; i < c->c; i++) ampc_sb_printf(&sb, "%s%g", i ? ", " : "", (i % 5 - 2) / 8.0);
        ampc_sb_puts(&sb, "]\n");
    }
    ampc_sb_printf(&sb, "  %%y : %s[%d,%d,%d,%d] = Conv(%%x, %%w%s) {group = %d, kernel_shape = "
                   "[%d, %d], pads = [%d, %d, %d, %d], strides = [%d, %d], dilations = [%d, %d]} "
                   "@\"conv\"\n", c->dtype, c->n, c->c, ho, wo, c->bias ? ", %b" : "", c->groups,
                   c->kh, c->kw, c->pads[0], c->pads[1], c->pads[2], c->pads[3], c->stride,
                   c->stride, c->dil, c->dil);
    const char *last = "y";
    if (c->residual) {
        ampc_sb_printf(&sb, "  %%s : %s[%d,%d,%d,%d] = Add(%%y, %%r) @\"res\"\n", c->dtype, c->n,
                       c->c, ho, wo);
        last = "s";
    }
    if (c->relu) {
        ampc_sb_printf(&sb, "  %%a : %s[%d,%d,%d,%d] = Relu(%%%s) @\"act\"\n", c->dtype, c->n,
                       c->c, ho, wo, last);
        last = "a";
    }
    ampc_sb_printf(&sb, "  output %%%s\n}\n", last);
    ampc_graph *g = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(sb.data, strlen(sb.data), &g, &err), AMPC_OK, "%s: %s", c->what,
                 err ? err : "");
    ampc_sb_free(&sb);
    return g;
}

static const dw_case cases[] = {
    {"3x3 f16, bias, relu", "f16", 2, 32, 9, 11, 3, 3, 1, 1, 32, {1, 1, 1, 1}, true, false, true},
    {"5x5 stride 2 dilation 2 asymmetric pads", "f16", 2, 24, 13, 12, 5, 5, 2, 2, 24, {1, 2, 3, 0},
     false, false, false},
    {"7x7 bf16 residual relu", "bf16", 1, 72, 10, 10, 7, 7, 1, 1, 72, {3, 3, 3, 3}, true, true, true},
    {"3x5 f16 64-channel blocks", "f16", 3, 128, 7, 9, 3, 5, 1, 1, 128, {1, 2, 1, 2}, true, false,
     false},
    /* enough pixels for tiles of 4 outputs a thread, the row's last tile half outside */
    {"7x7 f16 tiles of 4", "f16", 2, 64, 64, 254, 7, 7, 1, 1, 64, {3, 3, 3, 3}, true, false, true},
    /* tiles of 2, stride 2, the pads on opposite sides in the two dims, an odd last tile */
    {"3x3 bf16 stride 2 tiles of 2", "bf16", 4, 64, 128, 127, 3, 3, 2, 1, 64, {1, 0, 0, 1}, false,
     true, false},
};

/* The form each case takes (kernels/depthwise.cuh): the general one where there is a dilation, the
 * sliding one otherwise, with tiles of 1, 2 or 4 outputs by the count of pixels. */
static const char *const forms[] = {
    "ampc::dw_nhwc_rows<__half, 3, 3, 32, 1, 1, true>",
    "ampc::dw_nhwc<__half, 5, 5, 8, false>",
    "ampc::dw_nhwc_rows<__nv_bfloat16, 7, 7, 8, 1, 1, true>",
    "ampc::dw_nhwc_rows<__half, 3, 5, 64, 1, 1, false>",
    "ampc::dw_nhwc_rows<__half, 7, 7, 64, 1, 4, true>",
    "ampc::dw_nhwc_rows<__nv_bfloat16, 3, 3, 64, 2, 2, false>",
};

/* The generated code of the case's graph. */
static char *cuda_of(const dw_case *c) {
    ampc_graph *g = dw_graph(c);
    static const int32_t sm80 = 80;
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = ""};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s: %s", c->what, ampc_graph_errors(g));
    ampc_strbuf sb = {0};
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++) ampc_sb_puts(&sb, ampc_module_cuda(m, u));
    bool cudnn = false;
    for (int32_t i = 0; i < m->cg->plan.n_steps; i++) cudnn |= m->cg->plan.steps[i].kind == AMPC_RT_STEP_CONV;
    ampc_sb_puts(&sb, cudnn ? "\n// cuDNN step\n" : "\n");
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
    return ampc_sb_take(&sb);
}

Test(lower_conv, depthwise_takes_the_generated_kernel) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *cu = cuda_of(&cases[i]);
        cr_assert(strstr(cu, forms[i]) && !strstr(cu, "// cuDNN step"),
                  "%s: not %s:\n%.2000s", cases[i].what, forms[i], cu);
        free(cu);
    }
}

Test(lower_conv, other_convolutions_stay_with_cudnn) {
    const dw_case others[] = {
        /* C = 12: not a multiple of 8 */
        {"C 12", "f16", 1, 12, 8, 8, 3, 3, 1, 1, 12, {1, 1, 1, 1}, false, false, false},
        /* two channels a group */
        {"grouped", "f16", 1, 32, 8, 8, 3, 3, 1, 1, 16, {1, 1, 1, 1}, false, false, false},
        /* f32: not channels last */
        {"f32", "f32", 1, 32, 8, 8, 3, 3, 1, 1, 32, {1, 1, 1, 1}, false, false, false},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char *cu = cuda_of(&others[i]);
        cr_assert(!strstr(cu, "ampc::dw_nhwc") && strstr(cu, "// cuDNN step"), "%s:\n%.2000s",
                  others[i].what, cu);
        free(cu);
    }
}

static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    for (int64_t i = 0, n = ampc_shape_numel(&t->shape); i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        ampc_ref_store_f64(t->data, t->dtype, i, (double)(*seed >> 11) / 9007199254740992.0 * 2 - 1);
    }
}

Test(lower_conv_gpu, depthwise_matches_the_reference) {
    t_skip_without_gpu();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ampc_graph *g = dw_graph(&cases[i]);
        bool bf = !strcmp(cases[i].dtype, "bf16");
        /* the reference sums in double and rounds once; the kernel sums in f32 and rounds once */
        t_gpu_check c = {.fill = fill, .seed = 7 + i, .rtol = bf ? 2e-2 : 4e-3,
                         .atol = bf ? 2e-2 : 4e-3, .what = cases[i].what};
        t_gpu_vs_reference(g, &c);
    }
}
