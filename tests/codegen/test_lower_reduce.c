/*
 * test_lower_reduce.c — GPU lowering of the reduction and normalisation families
 * (codegen/lower_reduce.c, codegen/lower_norm.c, codegen/kernels/reduce.cuh).
 *
 * Without a GPU: every op / dtype / layout variant we lower compiles with NVRTC (PTX for
 * compute_80 and an sm_80 cubin), golden substrings of the emitted CUDA and launch shapes of a
 * softmax and of reductions (a warp a row, a block a row, a thread an output with baked
 * strides), empty tensors (no step; an empty group's identity), and the ops still unsupported.
 * With a GPU: the same graphs run on random inputs and every output is compared with the
 * reference evaluator, with a tolerance per dtype, reporting the worst element; without one
 * those tests skip.
 */
#include "support.h"

#include "ampc_runtime.h"
#include "codegen/codegen.h"
#include "compiler/module.h"
#include "ir/ref/ref.h"
#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int32_t sm80 = 80;

static ampc_compile_options sm80_opts(void) {
    return (ampc_compile_options){.archs = &sm80, .n_archs = 1, .cache_dir = ""};
}

/* ---- graph builders: every variant of a family as one graph with many outputs ---------------- */

typedef void (*build_fn)(ampc_graph *g, ampc_dtype t);

/* Builders make every layout variant, or with `compact` one of each kernel shape (a thread, a
 * warp and a block a row): the NVRTC tests of the dtypes after the first use it, since what
 * differs between dtypes is the instantiation of the same templates. */
static bool compact;

static void out(ampc_graph *g, ampc_value *v) {
    cr_assert_eq(ampc_output(g, v, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
}

static ampc_value *input(ampc_graph *g, const char *stem, int32_t i, ampc_dtype t, int32_t rank,
                         const int64_t *dims) {
    char name[32];
    snprintf(name, sizeof name, "%s%d", stem, i);
    return ampc_input(g, name, t, rank, dims);
}

static ampc_value *reduce_node(ampc_graph *g, const char *op, ampc_value *x, const int64_t *axes,
                               int32_t n_axes, int64_t keepdims, int64_t noop) {
    ampc_value *in[2] = {x, n_axes ? ampc_const_i64s(g, axes, n_axes) : NULL};
    ampc_attr_arg a[2] = {AMPC_ATTR_I("keepdims", keepdims), AMPC_ATTR_I("noop_with_empty_axes", noop)};
    return ampc_op(g, op, in, n_axes ? 2 : 1, a, 2);
}

static const char *const reduce_ops[10] = {
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
};

/* The layouts every reduction is lowered for. */
typedef struct rpat {
    int32_t rank;
    int64_t dims[3];
    int32_t n_axes;
    int64_t axes[2];
    int64_t keepdims, noop;
    bool long_row; /* no ReduceProd: a product of thousands of elements over/underflows */
    bool in_compact;
} rpat;

static const rpat reduce_patterns[] = {
    {3, {4, 6, 40}, 1, {2}, 1, 0, false, true},     /* contiguous rows of 40: a warp a row */
    {3, {4, 6, 40}, 1, {1}, 1, 0, false, false},    /* a strided axis: a thread an output */
    {3, {4, 6, 40}, 2, {0, 2}, 0, 0, false, true},  /* two separate axes: baked offsets both ways */
    {3, {4, 6, 40}, 1, {-1}, 0, 0, false, false},   /* negative axis, keepdims=0 */
    {2, {3, 2000}, 0, {0}, 1, 0, true, true},       /* every axis: one block of 512 over 6000 */
    {2, {300, 3}, 1, {0}, 1, 0, true, false},       /* 3 neighbouring columns: 32 threads down each */
    {3, {300, 3, 2}, 2, {0, 2}, 1, 0, true, false}, /* long strided rows, apart: a block each */
    {3, {8, 40, 48}, 2, {0, 1}, 1, 0, true, false}, /* channels-last pooling: 32 columns a block */
    {3, {1, 4096, 40}, 1, {1}, 1, 0, true, false},  /* few long columns: 16 chunks, then combined */
    {3, {4, 0, 3}, 1, {1}, 1, 0, false, true},      /* an empty group: the identity */
    {2, {4, 6}, 0, {0}, 1, 1, false, false},        /* noop_with_empty_axes: element by element */
    {2, {16, 8192}, 0, {0}, 0, 0, true, false},     /* one row of 131072: split over 16 blocks */
    {3, {2, 64, 2048}, 2, {1, 2}, 1, 0, true, false}, /* two rows of 131072, split likewise */
};

/* Reductions of dtype t: all ten ops (only Max / Min for i8, u8, bool) over every pattern.
 * ReduceLogSum reads inputs named "pos*", which get positive data (a log of a sum). */
static void build_reduce(ampc_graph *g, ampc_dtype t) {
    const bool minmax_only = t == AMPC_DTYPE_I8 || t == AMPC_DTYPE_U8 || t == AMPC_DTYPE_BOOL;
    for (int32_t p = 0; p < AMPC_ARRAY_LEN(reduce_patterns); p++) {
        const rpat *rp = &reduce_patterns[p];
        if (compact && !rp->in_compact) continue;
        ampc_value *x = input(g, "x", p, t, rp->rank, rp->dims);
        ampc_value *xp = minmax_only ? NULL : input(g, "pos", p, t, rp->rank, rp->dims);
        for (int32_t o = 0; o < 10; o++) {
            const bool mm = o == 2 || o == 3;
            if ((minmax_only && !mm) || (o == 4 && rp->long_row)) continue;
            out(g, reduce_node(g, reduce_ops[o], o == 7 ? xp : x, rp->axes, rp->n_axes, rp->keepdims,
                               rp->noop));
        }
    }
}

/* ArgMax / ArgMin: contiguous (a warp), strided (a thread), long rows (blocks of 128 and 512),
 * long strided rows; keepdims and select_last_index both ways. */
static void build_arg(ampc_graph *g, ampc_dtype t) {
    static const struct {
        int32_t rank;
        int64_t dims[3], axis, keep, last;
    } v[] = {
        {3, {5, 7, 33}, 2, 1, 0}, {3, {5, 7, 33}, 1, 0, 1}, {3, {5, 7, 33}, 0, 1, 1},
        {2, {2, 3000}, 1, 1, 0},  {2, {2, 5000}, -1, 0, 1}, {2, {300, 2}, 0, 1, 0},
    };
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(v); i++) {
        if (compact && i != 0 && i != 1 && i != 3) continue;
        ampc_value *x = input(g, "x", i, t, v[i].rank, v[i].dims);
        for (int32_t m = 0; m < 2; m++) {
            ampc_attr_arg a[3] = {AMPC_ATTR_I("axis", v[i].axis), AMPC_ATTR_I("keepdims", v[i].keep),
                                  AMPC_ATTR_I("select_last_index", v[i].last)};
            out(g, ampc_op(g, m ? "ArgMin" : "ArgMax", &x, 1, a, 3));
        }
    }
}

/* CumSum / CumProd with every exclusive / reverse combination: a thread a line (short or
 * strided lines) and a block a line (block scans of 64 and 256). */
static void build_scan(ampc_graph *g, ampc_dtype t) {
    static const struct {
        int64_t dims[2], axis;
    } v[] = {{{3, 50}, 1}, {{3, 50}, 0}, {{2, 3000}, 1}, {{4, 100}, -1}};
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(v); i++) {
        if (compact && i != 0 && i != 2) continue;
        ampc_value *x = input(g, "x", i, t, 2, v[i].dims);
        for (int32_t f = 0; f < 4; f++)
            for (int32_t m = 0; m < 2; m++) {
                if (m && v[i].dims[1] > 100) continue; /* products of thousands overflow */
                if (compact && f != 0 && f != 3) continue;
                ampc_value *in[2] = {x, ampc_const_i64s(g, &v[i].axis, 1)};
                ampc_attr_arg a[2] = {AMPC_ATTR_I("exclusive", f & 1), AMPC_ATTR_I("reverse", f >> 1)};
                out(g, ampc_op(g, m ? "CumProd" : "CumSum", in, 2, a, 2));
            }
    }
}

/* Softmax, LogSoftmax, Hardmax, LpNormalization along contiguous, strided and long axes. */
static void build_softmax(ampc_graph *g, ampc_dtype t) {
    static const struct {
        int32_t rank;
        int64_t dims[3], axis;
    } v[] = {
        {3, {4, 6, 40}, -1}, {3, {4, 6, 40}, 1}, {3, {4, 6, 40}, 0},
        {2, {2, 5000}, -1},  {3, {3, 300, 2}, 1}, {2, {50, 7}, 1},
    };
    static const char *const ops[4] = {"Softmax", "LogSoftmax", "Hardmax", "LpNormalization"};
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(v); i++) {
        if (compact && i != 0 && i != 1 && i != 3) continue;
        ampc_value *x = input(g, "x", i, t, v[i].rank, v[i].dims);
        for (int32_t o = 0; o < 5; o++) {
            ampc_attr_arg a[2] = {AMPC_ATTR_I("axis", v[i].axis), AMPC_ATTR_I("p", o == 4 ? 1 : 2)};
            out(g, ampc_op(g, ops[o < 4 ? o : 3], &x, 1, a, o >= 3 ? 2 : 1));
        }
    }
}

/* LayerNormalization (with Mean and InvStdDev, scale broadcast over two dims, no bias, a long
 * row) and RMSNormalization. */
static void build_layer_norm(ampc_graph *g, ampc_dtype t) {
    const int64_t x3[3] = {4, 6, 40}, s1[1] = {40}, s2[2] = {6, 40}, s61[2] = {6, 1}, xl[2] = {2, 3000},
                  sl[1] = {3000};
    ampc_value *x = ampc_input(g, "x", t, 3, x3), *s = ampc_input(g, "s", t, 1, s1);
    ampc_value *b = ampc_input(g, "b", t, 1, s1), *s6 = ampc_input(g, "s6", t, 2, s2);
    ampc_value *sc61 = ampc_input(g, "s61", t, 2, s61);
    ampc_value *xlong = ampc_input(g, "xl", t, 2, xl), *slong = ampc_input(g, "sl", t, 1, sl);
    ampc_value *o3[3];
    ampc_attr_arg a[2] = {AMPC_ATTR_I("axis", -1), AMPC_ATTR_F("epsilon", 1e-3f)};
    cr_assert_eq(ampc_op_multi(g, "LayerNormalization", (ampc_value *[]){x, s, b}, 3, a, 2, o3, 3), AMPC_OK,
                 "%s", ampc_graph_errors(g));
    for (int32_t i = 0; i < 3; i++) out(g, o3[i]);
    ampc_attr_arg a2[1] = {AMPC_ATTR_I("axis", 1)};
    out(g, ampc_op(g, "LayerNormalization", (ampc_value *[]){x, s6}, 2, a2, 1));
    ampc_attr_arg a3[1] = {AMPC_ATTR_I("axis", 2)};
    out(g, ampc_op(g, "LayerNormalization", (ampc_value *[]){x, sc61, s}, 3, a3, 1));
    out(g, ampc_op(g, "LayerNormalization", (ampc_value *[]){xlong, slong, slong}, 3, NULL, 0));
    out(g, ampc_op(g, "RMSNormalization", (ampc_value *[]){x, s}, 2, NULL, 0));
    out(g, ampc_op(g, "RMSNormalization", (ampc_value *[]){x, s6}, 2, a2, 1));
    out(g, ampc_op(g, "RMSNormalization", (ampc_value *[]){xlong, slong}, 2, NULL, 0));
}

/* Rows a warp holds in registers (norm_rows_warp): widths that take each vector width for 16-bit
 * types (768: 8, 128: 4, 96: 1), Mean and InvStdDev outputs, no bias, RMSNormalization, the
 * longest row (2048) and one just past it (2080, the row-loop kernel). */
static void build_warp_norms(ampc_graph *g, ampc_dtype t) {
    static const int64_t lens[] = {768, 128, 96, 2048, 2080};
    ampc_attr_arg eps[1] = {AMPC_ATTR_F("epsilon", 1e-3f)};
    for (int32_t i = 0; i < 5; i++) {
        const int64_t xd[2] = {i == 0 ? 37 : 5, lens[i]}, sd[1] = {lens[i]};
        ampc_value *x = input(g, "x", i, t, 2, xd), *s = input(g, "s", i, t, 1, sd);
        ampc_value *b = input(g, "b", i, t, 1, sd);
        if (i == 0) {
            ampc_value *o3[3];
            cr_assert_eq(ampc_op_multi(g, "LayerNormalization", (ampc_value *[]){x, s, b}, 3, eps, 1,
                                       o3, 3), AMPC_OK, "%s", ampc_graph_errors(g));
            for (int32_t k = 0; k < 3; k++) out(g, o3[k]);
        } else {
            out(g, ampc_op(g, "LayerNormalization", (ampc_value *[]){x, s, b}, i == 1 ? 2 : 3, NULL, 0));
        }
        if (i >= 3) out(g, ampc_op(g, "RMSNormalization", (ampc_value *[]){x, s}, 2, NULL, 0));
    }
}

/* BatchNormalization (NCHW, 1-D, channels-last rows with a Relu), InstanceNormalization,
 * GroupNormalization, LRN, MeanVarianceNormalization. BatchNorm's variance is an input named
 * "pos*" (positive). */
static void build_channel_norms(ampc_graph *g, ampc_dtype t) {
    const int64_t x4[4] = {2, 3, 5, 7}, c3[1] = {3}, xg[4] = {2, 6, 4, 5}, c6[1] = {6}, xb[4] = {1, 4, 40, 40},
                  c4[1] = {4}, x1[1] = {5}, c1[1] = {1};
    ampc_value *x = ampc_input(g, "x", t, 4, x4);
    ampc_value *sc = ampc_input(g, "sc", t, 1, c3), *bi = ampc_input(g, "bi", t, 1, c3);
    ampc_value *mean = ampc_input(g, "mean", t, 1, c3), *var = ampc_input(g, "pos_var", t, 1, c3);
    out(g, ampc_op(g, "BatchNormalization", (ampc_value *[]){x, sc, bi, mean, var}, 5,
                   (ampc_attr_arg[]){AMPC_ATTR_F("epsilon", 1e-2f)}, 1));
    /* A 1-D X: one channel. */
    ampc_value *xv = ampc_input(g, "xv", t, 1, x1), *one = ampc_input(g, "one", t, 1, c1);
    ampc_value *pone = ampc_input(g, "pos_one", t, 1, c1);
    out(g, ampc_op(g, "BatchNormalization", (ampc_value *[]){xv, one, one, one, pone}, 5, NULL, 0));
    /* Channels-last rows ([N*H*W, C], the layout pass's form) and a Relu, fused: 16 bytes a
     * thread where C allows (f32, f16, bf16; f64 one element a thread). */
    const int64_t xr[2] = {6, 16}, c16[1] = {16};
    ampc_value *rows = ampc_input(g, "rows", t, 2, xr);
    ampc_value *rp[4];
    for (int32_t i = 0; i < 4; i++) rp[i] = input(g, i == 3 ? "pos_r" : "r", i, t, 1, c16);
    ampc_value *bn = ampc_op(g, "BatchNormalization", (ampc_value *[]){rows, rp[0], rp[1], rp[2], rp[3]},
                             5, (ampc_attr_arg[]){AMPC_ATTR_F("epsilon", 1e-2f)}, 1);
    out(g, ampc_op(g, "Relu", &bn, 1, NULL, 0));
    out(g, ampc_op(g, "InstanceNormalization", (ampc_value *[]){x, sc, bi}, 3, NULL, 0));
    ampc_value *xgr = ampc_input(g, "xg", t, 4, xg);
    ampc_value *sg = ampc_input(g, "sg", t, 1, c6), *bg = ampc_input(g, "bg", t, 1, c6);
    out(g, ampc_op(g, "GroupNormalization", (ampc_value *[]){xgr, sg, bg}, 3,
                   (ampc_attr_arg[]){AMPC_ATTR_I("num_groups", 3)}, 1));
    ampc_value *xbig = ampc_input(g, "xb", t, 4, xb);
    ampc_value *sb = ampc_input(g, "sb", t, 1, c4), *bb = ampc_input(g, "bb", t, 1, c4);
    out(g, ampc_op(g, "GroupNormalization", (ampc_value *[]){xbig, sb, bb}, 3,
                   (ampc_attr_arg[]){AMPC_ATTR_I("num_groups", 2)}, 1));
    out(g, ampc_op(g, "InstanceNormalization", (ampc_value *[]){xbig, sb, bb}, 3, NULL, 0));
    for (int64_t size = 2; size <= 3; size++)
        out(g, ampc_op(g, "LRN", &x, 1,
                       (ampc_attr_arg[]){AMPC_ATTR_I("size", size), AMPC_ATTR_F("alpha", 0.5f),
                                         AMPC_ATTR_F("beta", 0.6f), AMPC_ATTR_F("bias", 2.0f)},
                       4));
    out(g, ampc_op(g, "MeanVarianceNormalization", &x, 1, NULL, 0));
    const int64_t ax1[1] = {1}, ax3[2] = {2, 3};
    out(g, ampc_op(g, "MeanVarianceNormalization", &x, 1, (ampc_attr_arg[]){AMPC_ATTR_IS("axes", ax1, 1)}, 1));
    out(g, ampc_op(g, "MeanVarianceNormalization", &xbig, 1, (ampc_attr_arg[]){AMPC_ATTR_IS("axes", ax3, 2)}, 1));
}

/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: reductions none / sum / mean, weights,
 * ignore_index, [N, C] and [N, C, D], i32 and i64 targets, SCE's log_prob output. */
static void build_loss(ampc_graph *g, ampc_dtype t) {
    const int64_t x2[2] = {4, 5}, x3[3] = {3, 5, 2}, c5[1] = {5};
    ampc_value *x = ampc_input(g, "x", t, 2, x2), *xd = ampc_input(g, "xd", t, 3, x3);
    ampc_value *w = ampc_input(g, "pos_w", t, 1, c5);
    const int64_t tv[4] = {0, 4, 2, 1}, td[6] = {1, 2, 2, 0, 4, 3};
    const int32_t t32[4] = {3, 2, 2, 0};
    ampc_value *tgt = t_const(g, AMPC_DTYPE_I64, SHAPE(4), tv), *tgd = t_const(g, AMPC_DTYPE_I64, SHAPE(3, 2), td);
    ampc_value *tg32 = t_const(g, AMPC_DTYPE_I32, SHAPE(4), t32);
    static const char *const red[3] = {"none", "sum", "mean"};
    for (int32_t sce = 0; sce < 2; sce++) {
        const char *op = sce ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
        for (int32_t r = 0; r < 3; r++) {
            ampc_attr_arg a[2] = {AMPC_ATTR_S("reduction", red[r]), AMPC_ATTR_I("ignore_index", 2)};
            out(g, ampc_op(g, op, (ampc_value *[]){x, tgt}, 2, a, 1));
            out(g, ampc_op(g, op, (ampc_value *[]){x, tgt, w}, 3, a, 2));
            out(g, ampc_op(g, op, (ampc_value *[]){xd, tgd, w}, 3, a, 1));
        }
        ampc_attr_arg a[1] = {AMPC_ATTR_I("ignore_index", 2)};
        out(g, ampc_op(g, op, (ampc_value *[]){x, tg32}, 2, a, 1)); /* mean over 2 of 4: not 0 / 0 */
    }
    ampc_value *o2[2];
    cr_assert_eq(ampc_op_multi(g, "SoftmaxCrossEntropyLoss", (ampc_value *[]){xd, tgd}, 2, NULL, 0, o2, 2),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    out(g, o2[0]);
    out(g, o2[1]);
}

/* ---- NVRTC: every variant compiles ---------------------------------------------------------- */

/* Builds (compact or not), compiles for sm_80 (PTX and cubin) and checks that every step is a
 * kernel of ours whose entry is in its unit's PTX, and that the PTX defines no other kernel
 * (steps whose kernels are the same launch one); returns the number of steps. */
static int32_t compiles(build_fn build, ampc_dtype t, bool small) {
    compact = small;
    ampc_graph *g = ampc_graph_create("lr");
    build(g, t);
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "building (%s) failed:\n%s", ampc_dtype_name(t),
                 ampc_graph_errors(g));
    ampc_module *m = NULL;
    ampc_compile_options o = sm80_opts();
    ampc_status st = ampc_compile(g, &o, &m);
    cr_assert_eq(st, AMPC_OK, "%s: %s\n%s", ampc_dtype_name(t), ampc_status_str(st), ampc_graph_errors(g));
    int32_t steps = ampc_module_step_count(m), entries = 0, distinct = 0;
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++) {
        const char *ptx = ampc_module_ptx(m, u);
        cr_assert_not_null(ptx);
        for (const char *p = ptx; (p = strstr(p, ".entry ")); p++) entries++;
    }
    const ampc_rt_plan *plan = &m->cg->plan;
    for (int32_t i = 0; i < steps; i++) {
        const ampc_rt_kernel *k = &plan->steps[i].kernel;
        cr_assert_eq(plan->steps[i].kind, AMPC_RT_STEP_KERNEL, "step %d is not a kernel", i);
        char entry[96];
        snprintf(entry, sizeof entry, ".entry %s(", k->name);
        cr_assert_not_null(strstr(ampc_module_ptx(m, k->unit), entry), "%s: step %d's kernel %s "
                           "is not in unit %d", ampc_dtype_name(t), i, k->name, k->unit);
        bool seen = false;
        for (int32_t j = 0; j < i && !seen; j++)
            seen = !strcmp(plan->steps[j].kernel.name, k->name);
        distinct += !seen;
    }
    cr_assert_eq(entries, distinct, "%s: %d kernels in the PTX for %d steps launching %d kernels",
                 ampc_dtype_name(t), entries, steps, distinct);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
    return steps;
}

static const ampc_dtype float_types[4] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16, AMPC_DTYPE_F64};

Test(lower_reduce, reductions_compile_for_float_dtypes) {
    /* f32: 13 patterns x 10 ops, minus ReduceProd on the 7 long ones: a kernel each (the empty
     * group and noop_with_empty_axes too: their outputs are not empty), two for the 8 split or
     * chunked ones (all but ReduceLogSumExp) of three patterns. The other dtypes: the 4 compact
     * patterns, one without ReduceProd. */
    cr_assert_eq(compiles(build_reduce, AMPC_DTYPE_F32, false), 147);
    for (int32_t i = 1; i < 4; i++) cr_assert_eq(compiles(build_reduce, float_types[i], true), 39);
}

Test(lower_reduce, reductions_compile_for_integer_dtypes) {
    cr_assert_eq(compiles(build_reduce, AMPC_DTYPE_I64, false), 147);
    static const ampc_dtype all[3] = {AMPC_DTYPE_I32, AMPC_DTYPE_U32, AMPC_DTYPE_U64};
    for (int32_t i = 0; i < 3; i++) cr_assert_eq(compiles(build_reduce, all[i], true), 39);
    /* Max and Min only (opset 20 adds 8-bit integers and bool to them). */
    static const ampc_dtype mm[3] = {AMPC_DTYPE_I8, AMPC_DTYPE_U8, AMPC_DTYPE_BOOL};
    for (int32_t i = 0; i < 3; i++) cr_assert_eq(compiles(build_reduce, mm[i], true), 8);
}

Test(lower_reduce, arg_reductions_compile) {
    static const ampc_dtype all[7] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16, AMPC_DTYPE_F64,
                                      AMPC_DTYPE_I32, AMPC_DTYPE_I64, AMPC_DTYPE_U8};
    cr_assert_eq(compiles(build_arg, all[0], false), 12);
    for (int32_t i = 1; i < 7; i++) cr_assert_eq(compiles(build_arg, all[i], true), 6);
}

Test(lower_reduce, scans_compile) {
    static const ampc_dtype all[6] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                                      AMPC_DTYPE_F64, AMPC_DTYPE_I32, AMPC_DTYPE_U64};
    cr_assert_eq(compiles(build_scan, all[0], false), 28);
    for (int32_t i = 1; i < 6; i++) cr_assert_eq(compiles(build_scan, all[i], true), 6);
}

Test(lower_reduce, softmax_family_compiles) {
    cr_assert_eq(compiles(build_softmax, AMPC_DTYPE_F32, false), 30);
    for (int32_t i = 1; i < 4; i++) cr_assert_eq(compiles(build_softmax, float_types[i], true), 15);
}

Test(lower_reduce, layer_norms_compile) {
    for (int32_t i = 0; i < 4; i++) cr_assert_eq(compiles(build_layer_norm, float_types[i], false), 7);
}

Test(lower_reduce, warp_norms_compile) {
    for (int32_t i = 0; i < 4; i++) cr_assert_eq(compiles(build_warp_norms, float_types[i], false), 7);
}

Test(lower_reduce, channel_norms_compile) {
    for (int32_t i = 0; i < 4; i++) cr_assert_eq(compiles(build_channel_norms, float_types[i], false), 12);
}

Test(lower_reduce, losses_compile) {
    for (int32_t i = 0; i < 4; i++) cr_assert_eq(compiles(build_loss, float_types[i], false), 21);
}

/* Mixed dtypes: BatchNorm with f16 X and f32 statistics (NCHW and rows), RMSNorm whose Y takes scale's dtype,
 * LayerNorm statistics stashed as f64. */
static void build_mixed(ampc_graph *g, ampc_dtype t) {
    (void)t;
    const int64_t x4[4] = {2, 3, 4, 4}, c3[1] = {3}, x2[2] = {3, 64}, s64[1] = {64};
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F16, 4, x4);
    ampc_value *p[4];
    for (int32_t i = 0; i < 4; i++) p[i] = input(g, i == 3 ? "pos" : "p", i, AMPC_DTYPE_F32, 1, c3);
    out(g, ampc_op(g, "BatchNormalization", (ampc_value *[]){x, p[0], p[1], p[2], p[3]}, 5, NULL, 0));
    /* channels-last rows of halves, f32 statistics: 8 elements a thread */
    const int64_t rows[2] = {5, 24}, c24[1] = {24};
    ampc_value *xc = ampc_input(g, "xc", AMPC_DTYPE_F16, 2, rows), *q[4];
    for (int32_t i = 0; i < 4; i++) q[i] = input(g, i == 3 ? "pos_q" : "q", i, AMPC_DTYPE_F32, 1, c24);
    out(g, ampc_op(g, "BatchNormalization", (ampc_value *[]){xc, q[0], q[1], q[2], q[3]}, 5, NULL, 0));
    ampc_value *xr = ampc_input(g, "xr", AMPC_DTYPE_BF16, 2, x2), *sr = ampc_input(g, "sr", AMPC_DTYPE_F32, 1, s64);
    out(g, ampc_op(g, "RMSNormalization", (ampc_value *[]){xr, sr}, 2, NULL, 0));
    ampc_value *xl = ampc_input(g, "xl", AMPC_DTYPE_F32, 2, x2), *sl = ampc_input(g, "sl", AMPC_DTYPE_F32, 1, s64);
    ampc_value *o3[3];
    cr_assert_eq(ampc_op_multi(g, "LayerNormalization", (ampc_value *[]){xl, sl}, 2,
                               (ampc_attr_arg[]){AMPC_ATTR_I("stash_type", 11)}, 1, o3, 3),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    for (int32_t i = 0; i < 3; i++) out(g, o3[i]);
}

Test(lower_reduce, mixed_dtypes_compile) {
    cr_assert_eq(compiles(build_mixed, AMPC_DTYPE_F32, false), 4);
}

/* ---- golden CUDA and launch shapes ---------------------------------------------------------- */

/* Runs the pipeline and code generation on g (no NVRTC); the caller frees the output. */
static ampc_cg_output *generate(ampc_graph *g) {
    ampc_pipeline_options po = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_cg_output *o = NULL;
    cr_assert_eq(ampc_cg_generate(g, NULL, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    return o;
}

static void expect_src(const char *src, const char *needle) {
    cr_assert(strstr(src, needle), "expected in the CUDA:\n  %s\ngot:\n%s", needle, src);
}

static void expect_launch(const ampc_rt_step *s, uint32_t gx, uint32_t bx, uint32_t by) {
    cr_assert_eq(s->kind, AMPC_RT_STEP_KERNEL);
    cr_assert(s->kernel.grid[0] == gx && s->kernel.grid[1] == 1 && s->kernel.block[0] == bx &&
                  s->kernel.block[1] == by && s->kernel.block[2] == 1,
              "%s: got grid %u block %u x %u, expected grid %u block %u x %u", s->kernel.name,
              s->kernel.grid[0], s->kernel.block[0], s->kernel.block[1], gx, bx, by);
}

/* A LayerNorm over rows of 768 halves: a warp a row holding it in registers, 16-byte accesses
 * (8 elements), four rows a block; the Mean and InvStdDev outputs written by the same kernel. */
Test(lower_reduce, warp_norm_golden) {
    ampc_graph *g = ampc_graph_create("ln");
    build_warp_norms(g, AMPC_DTYPE_F16);
    ampc_cg_output *o = generate(g);
    expect_launch(&o->plan.steps[0], 10, 32, 4); /* 37 rows */
    const char *src = o->sources[0];
    /* Scale and B are graph inputs here: the kernel waits for its predecessor before reading
     * them (HOLD 1; 0 for rows past 1024), inside norm_rows_warp rather than as its first
     * statement */
    expect_src(src, "extern \"C\" __global__ void __launch_bounds__(128) k0_layer_norm(const __half *p0, "
                    "const __half *p1, const __half *p2, __half *p3, float *p4, float *p5) {\n"
                    "    ampc::norm_rows_warp<768, 8, true, 1, __half>(p0, p1, p2, p3, p4, p5, "
                    "(float)0.0010000000474974513, 37LL);\n");
    expect_src(src, "ampc::norm_rows_warp<128, 4, true, 1, __half>(p0, p1, (const float *)nullptr, p2, "
                    "(float *)nullptr, (float *)nullptr,");
    expect_src(src, "ampc::norm_rows_warp<96, 1, true, 1, __half>(");
    expect_src(src, "ampc::norm_rows_warp<2048, 8, false, 0, __half>(");
    cr_assert_null(strstr(src, "norm_rows_warp<2080"), "a row of 2080 is past the registers");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* BatchNormalization over channels-last rows, its Relu fused: one kernel, a thread loading and
 * storing 8 halves at once, the statistics read at each element's channel; over NCHW, or rows
 * whose C is no multiple of 8, one element a thread. */
Test(lower_reduce, batch_norm_rows_take_16_bytes) {
    for (int32_t c = 24; c <= 28; c += 4) {
        ampc_graph *g = ampc_graph_create("bn");
        const int64_t xd[2] = {40, c}, cd[1] = {c};
        ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F16, 2, xd), *p[4];
        for (int32_t i = 0; i < 4; i++) p[i] = input(g, "p", i, AMPC_DTYPE_F16, 1, cd);
        ampc_value *bn = ampc_op(g, "BatchNormalization", (ampc_value *[]){x, p[0], p[1], p[2], p[3]},
                                 5, NULL, 0);
        out(g, ampc_op(g, "Relu", &bn, 1, NULL, 0));
        ampc_cg_output *o = generate(g);
        cr_assert_eq(o->plan.n_steps, 1, "BatchNormalization and Relu: %d steps", o->plan.n_steps);
        const bool vec = strstr(o->sources[0], "ampc::ld_vec<8>(p0 + i * 8, x_);") &&
                         strstr(o->sources[0], "ampc::st_vec<8>(p5 + i * 8, r_);");
        cr_assert_eq(vec, c == 24, "C = %d:\n%s", c, o->sources[0]);
        if (c == 24) expect_launch(&o->plan.steps[0], 1, 256, 1); /* 120 vectors */
        ampc_cg_output_free(o);
        ampc_graph_destroy(g);
    }
}

/* Few rows: Scale and B held in registers, read before the kernel waits for the grid before it
 * when they are constants (weights, which no step writes: HOLD 2), after when computed (1);
 * many rows (2048): none held (0). Every norm kernel waits inside norm_rows_warp. */
Test(lower_reduce, warp_norm_reads_constant_scale_before_waiting) {
    ampc_graph *g = ampc_graph_create("ln");
    const int64_t xd[2] = {4, 256}, sd[1] = {256};
    float ones[256];
    for (int32_t i = 0; i < 256; i++) ones[i] = 1.0f + (float)i / 256.0f;
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 2, xd);
    ampc_value *s = ampc_constant(g, "s", AMPC_DTYPE_F32, 1, sd, ones);
    ampc_value *b = ampc_constant(g, "b", AMPC_DTYPE_F32, 1, sd, ones);
    out(g, ampc_op(g, "LayerNormalization", (ampc_value *[]){x, s, b}, 3, NULL, 0));
    ampc_value *s2 = ampc_op(g, "Relu", (ampc_value *[]){ampc_input(g, "s2", AMPC_DTYPE_F32, 1, sd)}, 1,
                             NULL, 0);
    out(g, ampc_op(g, "LayerNormalization", (ampc_value *[]){x, s2, b}, 3, NULL, 0));
    ampc_cg_output *o = generate(g);
    const char *src = o->sources[0];
    expect_src(src, ") {\n    ampc::norm_rows_warp<256, 4, true, 2, float>(");
    expect_src(src, ") {\n    ampc::norm_rows_warp<256, 4, true, 1, float>(");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
    /* many rows: occupancy matters more than latency, nothing held (HOLD 0) */
    g = ampc_graph_create("ln_rows");
    const int64_t xm[2] = {2048, 256};
    ampc_value *xx = ampc_input(g, "x", AMPC_DTYPE_F32, 2, xm);
    out(g, ampc_op(g, "LayerNormalization", (ampc_value *[]){xx, ampc_constant(g, "s", AMPC_DTYPE_F32, 1,
                                                                                 sd, ones)}, 2, NULL, 0));
    o = generate(g);
    src = o->sources[0];
    expect_src(src, ") {\n    ampc::norm_rows_warp<256, 4, true, 0, float>(");
    cr_assert_null(strstr(src, "pdl_enter();\n    ampc::norm_rows_warp"),
                   "the norm kernels wait inside norm_rows_warp:\n%s", src);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_reduce, softmax_golden) {
    ampc_graph *g = ampc_graph_create("sm");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(20, 100));
    ampc_output(g, ampc_softmax(g, x, -1), "y");
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 1);
    /* 20 rows of 100: a warp a row, 8 rows a block, 3 blocks. */
    expect_launch(&o->plan.steps[0], 3, 32, 8);
    const char *src = o->sources[0];
    expect_src(src, "// k0_softmax: Softmax 'Softmax_0'\n");
    expect_src(src, "extern \"C\" __global__ void __launch_bounds__(256) k0_softmax(const __half *p0, __half *p1) {\n");
    expect_src(src, "for (long long row = (long long)blockIdx.x * 8 + threadIdx.y; row < 20LL; "
                    "row += (long long)gridDim.x * 8) {\n");
    expect_src(src, "const long long b = row * 100LL;\n");
    expect_src(src, "for (long long j = threadIdx.x; j < 100LL; j += 32) {\n");
    expect_src(src, "mx = ampc::red_max()(mx, ampc::cvt<float>(p0[b + j * 1LL]));\n");
    expect_src(src, "mx = ampc::row_allreduce<32>(mx, ampc::red_max(), -(float)INFINITY);\n");
    expect_src(src, "s += ampc::m_exp(ampc::cvt<float>(p0[b + j * 1LL]) - mx);\n");
    expect_src(src, "s = ampc::row_allreduce<32>(s, ampc::red_add(), (float)0);\n");
    expect_src(src, "p1[b + j * 1LL] = ampc::cvt<__half>(ampc::m_exp(d) / s);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_reduce, reduction_golden) {
    ampc_graph *g = ampc_graph_create("rd");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 6, 400));
    const int64_t ax02[2] = {0, 2}, ax1[1] = {1};
    ampc_value *l = t_input(g, "l", AMPC_DTYPE_F32, SHAPE(2, 5000));
    ampc_value *xi = t_input(g, "xi", AMPC_DTYPE_I32, SHAPE(4, 6, 40));
    ampc_output(g, reduce_node(g, "ReduceSum", x, ax02, 2, 0, 0), "out_a");  /* generic offsets */
    ampc_output(g, reduce_node(g, "ReduceMax", l, ax1, 1, 1, 0), "out_b");   /* a block a row */
    ampc_output(g, reduce_node(g, "ReduceMean", xi, ax1, 1, 1, 0), "out_c"); /* a thread an output */
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 3);
    const char *src = o->sources[0];
    /* ReduceSum over axes {0, 2} of [4, 6, 400]: 6 outputs of 1600 strided elements: a block of
     * 128 per output; the output's offset is row * 400, each reduced element's decomposes its
     * index over [4 (stride 2400), 400 (stride 1)]. */
    expect_launch(&o->plan.steps[0], 6, 128, 1);
    expect_src(src, "// k0_reduce_sum: ReduceSum 'ReduceSum_0'\n");
    expect_src(src, "__launch_bounds__(128) k0_reduce_sum(const float *p0, float *p1)");
    expect_src(src, "const long long o0 = row * 400LL;\n");
    expect_src(src, "for (long long r2 = threadIdx.x; r2 < 1600LL; r2 += 128) {\n");
    expect_src(src, "long long o3 = 0, q4 = r2;\n");
    expect_src(src, "o3 += (q4 % 400LL) * 1LL;\n");
    expect_src(src, "q4 /= 400LL;\n");
    expect_src(src, "o3 += q4 * 2400LL;\n");
    expect_src(src, "const long long e1 = o0 + o3;\n");
    expect_src(src, "acc = ampc::red_add()(acc, (float)((float)v));\n");
    expect_src(src, "acc = ampc::row_allreduce<128>(acc, ampc::red_add(), (float)0);\n");
    expect_src(src, "if (threadIdx.x == 0) p1[row] = ampc::cvt<float>(acc);\n");
    /* ReduceMax over rows of 5000: a block of 512 a row, NaN-sticky max from -inf. */
    expect_launch(&o->plan.steps[1], 2, 512, 1);
    expect_src(src, "float acc = -(float)INFINITY;\n");
    expect_src(src, "acc = ampc::row_allreduce<512>(acc, ampc::red_max(), -(float)INFINITY);\n");
    /* ReduceMean of i32 over the strided axis 1 of [4, 6, 40]: a thread an output whose offset
     * decomposes over the kept [4 (240), 40 (1)], a loop over the 6 reduced (stride 40), a
     * wrapping unsigned sum and a truncating signed division. */
    expect_launch(&o->plan.steps[2], 1, 256, 1);
    expect_src(src, "k2_reduce_mean(const int *p0, int *p1)");
    expect_src(src, "long long o0 = 0, q1 = row;\n");
    expect_src(src, "o0 += (q1 % 40LL) * 1LL;\n");
    expect_src(src, "o0 += q1 * 240LL;\n");
    expect_src(src, "for (long long j3 = 0; j3 < 6LL; j3++) {\n");
    expect_src(src, "const long long e2 = o0 + j3 * 40LL;\n");
    expect_src(src, "const long long v = ampc::cvt<long long>(p0[e2]);\n");
    expect_src(src, "acc = ampc::red_add()(acc, (unsigned long long)((unsigned long long)v));\n");
    expect_src(src, "p1[row] = ampc::cvt<int>((long long)acc / 6LL);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* A few long rows are split: ReduceSum of all 131072 elements of [16, 8192] runs as 16 blocks of
 * 512, each summing a chunk of 8192 into the step's scratch past the planned arena, then one warp
 * combining the 16 partials in order. */
Test(lower_reduce, split_reduction_golden) {
    ampc_graph *g = ampc_graph_create("rs");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(16, 8192));
    ampc_output(g, reduce_node(g, "ReduceSum", x, NULL, 0, 0, 0), "total");
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 2);
    const char *src = o->sources[0];
    expect_launch(&o->plan.steps[0], 16, 512, 1);
    expect_launch(&o->plan.steps[1], 1, 32, 8);
    expect_src(src, "k0_reduce_part(const float *p0, float *p1)");
    expect_src(src, "const long long row = blockIdx.x / 16, c0 = (long long)(blockIdx.x % 16) * 8192LL;\n");
    expect_src(src, "for (long long r = c0 + threadIdx.x; r < c1; r += 512) {\n");
    expect_src(src, "if (threadIdx.x == 0) p1[blockIdx.x] = acc;\n");
    expect_src(src, "k1_reduce_combine(const float *p0, float *p1)");
    expect_src(src, "for (int c = threadIdx.x; c < 16; c += 32) {\n");
    expect_src(src, "if (threadIdx.x == 0) p1[row] = ampc::cvt<float>(acc);\n");
    /* the partials live past every planned value, in 16 floats the plan's arena adds */
    const ampc_rt_arg *part = &o->plan.steps[0].kernel.args[1];
    cr_assert_geq(part->ref.offset, g->arena_bytes);
    cr_assert_eq(o->plan.arena_bytes, part->ref.offset + 16 * 4);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* A channels-last [2, 16, 16, 64] averaged over H and W: 128 outputs, neighbours in memory,
 * 32 a block (a lane each) with 32 threads down each column's 256 elements, their partial sums
 * combined in order through shared memory. */
Test(lower_reduce, column_reduction_golden) {
    ampc_graph *g = ampc_graph_create("rc");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(2, 16, 16, 64));
    const int64_t hw[2] = {1, 2};
    ampc_output(g, reduce_node(g, "ReduceMean", x, hw, 2, 1, 0), "pooled");
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 1);
    const char *src = o->sources[0];
    expect_launch(&o->plan.steps[0], 4, 32, 32);
    expect_src(src, "__shared__ float part[32][33];\n");
    expect_src(src, "const long long row = (long long)blockIdx.x * 32 + threadIdx.x;\n");
    expect_src(src, "for (long long r = c0 + threadIdx.y; r < c1; r += 32) {\n");
    expect_src(src, "const long long o2 = r * 64LL;\n");
    expect_src(src, "for (int j = 1; j < 32; j++) acc = ampc::red_add()(acc, part[j][threadIdx.x]);\n");
    expect_src(src, "p1[row] = ampc::cvt<__half>(acc / (float)256);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_reduce, empty_tensors) {
    ampc_graph *g = ampc_graph_create("empty");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 5));
    ampc_value *z = t_input(g, "z", AMPC_DTYPE_F32, SHAPE(3, 0));
    const int64_t ax1[1] = {1};
    ampc_output(g, reduce_node(g, "ReduceSum", x, ax1, 1, 1, 0), "out_a"); /* [0, 1]: nothing to do */
    ampc_output(g, ampc_softmax(g, x, -1), "out_b");                       /* empty: nothing to do */
    ampc_output(g, reduce_node(g, "ReduceMean", z, ax1, 1, 0, 0), "out_c"); /* [3] of empty means */
    ampc_output(g, reduce_node(g, "ReduceLogSumExp", z, ax1, 1, 0, 0), "out_d");
    ampc_cg_output *o = generate(g);
    cr_assert_eq(o->plan.n_steps, 2, "only the two reductions of empty groups have work");
    const char *src = o->sources[0];
    expect_src(src, "k0_reduce_mean");
    expect_src(src, "p1[row] = ampc::cvt<float>((float)NAN);\n"); /* the mean of nothing */
    expect_src(src, "for (int z = 0; z < 0; z++) {\n");
    expect_src(src, "p1[row] = ampc::cvt<float>(ampc::m_log(acc) + sh);\n"); /* log(0) + 0 */
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_reduce, unsupported_ops_name_the_node) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(65, 65));
    ampc_output(g, ampc_op(g, "Det", &x, 1, NULL, 0), "det");
    ampc_module *m = NULL;
    ampc_compile_options o = sm80_opts();
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_E_UNSUPPORTED);
    cr_assert_null(m);
    t_expect_diag(g, "node 0 (Det 'Det_0'): Det has no generated GPU kernel for 65x65 matrices "
                     "yet (at most 64x64)");
    ampc_graph_destroy(g);
}

/* ---- on the GPU: every variant against the reference evaluator ------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random contents: floats uniform in [-2, 2] ([0.25, 2] for inputs named "pos*"), integers in
 * [-5, 5] ([0, 10] unsigned; [1, 10] "pos*"), bools 0 / 1. */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    const bool pos = !strncmp(name, "pos", 3);
    int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(rng_next(seed) >> 11) / 9007199254740992.0;
        if (ampc_dtype_is_float(t->dtype)) {
            ampc_ref_store_f64(t->data, t->dtype, i, pos ? 0.25 + 1.75 * u : -2 + 4 * u);
        } else if (t->dtype == AMPC_DTYPE_BOOL) {
            ampc_ref_store_i64(t->data, t->dtype, i, u < 0.5);
        } else {
            int64_t v = (int64_t)(u * 11); /* 0..10 */
            if (pos) v = v ? v : 1;
            else if (ampc_dtype_is_signed(t->dtype)) v -= 5;
            ampc_ref_store_i64(t->data, t->dtype, i, v);
        }
    }
}

static void tolerance(ampc_dtype t, double *rtol, double *atol) {
    switch (t) {
    case AMPC_DTYPE_F64: *rtol = 1e-9, *atol = 1e-12; break;
    case AMPC_DTYPE_F32: *rtol = 1e-3, *atol = 1e-4; break;
    case AMPC_DTYPE_F16: *rtol = 4e-3, *atol = 1e-3; break;
    case AMPC_DTYPE_BF16: *rtol = 2e-2, *atol = 1e-2; break;
    default: *rtol = 0, *atol = 0; break; /* exact */
    }
}

/* Runs the graph of build(t) on the GPU and on the reference evaluator with the same random
 * inputs and compares every output; skips the test when there is no GPU. */
static void on_gpu(build_fn build, ampc_dtype t) {
    compact = false;
    ampc_graph *g = ampc_graph_create("gpu");
    build(g, t);
    t_gpu_check c = {.fill = fill, .seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)t,
                     .tolerance = tolerance, .what = ampc_dtype_name(t)};
    t_gpu_vs_reference(g, &c);
}

Test(lower_reduce_gpu, reductions_float) {
    for (int32_t i = 0; i < 4; i++) on_gpu(build_reduce, float_types[i]);
}

Test(lower_reduce_gpu, reductions_int) {
    static const ampc_dtype all[7] = {AMPC_DTYPE_I32, AMPC_DTYPE_I64, AMPC_DTYPE_U32, AMPC_DTYPE_U64,
                                      AMPC_DTYPE_I8, AMPC_DTYPE_U8, AMPC_DTYPE_BOOL};
    for (int32_t i = 0; i < 7; i++) on_gpu(build_reduce, all[i]);
}

Test(lower_reduce_gpu, arg_reductions) {
    static const ampc_dtype all[6] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                                      AMPC_DTYPE_F64, AMPC_DTYPE_I32, AMPC_DTYPE_U8};
    for (int32_t i = 0; i < 6; i++) on_gpu(build_arg, all[i]);
}

Test(lower_reduce_gpu, scans) {
    static const ampc_dtype all[5] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_F64, AMPC_DTYPE_I32,
                                      AMPC_DTYPE_U64};
    for (int32_t i = 0; i < 5; i++) on_gpu(build_scan, all[i]);
}

Test(lower_reduce_gpu, softmax_family) {
    for (int32_t i = 0; i < 4; i++) on_gpu(build_softmax, float_types[i]);
}

Test(lower_reduce_gpu, layer_norms) {
    for (int32_t i = 0; i < 4; i++) on_gpu(build_layer_norm, float_types[i]);
}

Test(lower_reduce_gpu, warp_norms) {
    for (int32_t i = 0; i < 4; i++) on_gpu(build_warp_norms, float_types[i]);
}

Test(lower_reduce_gpu, channel_norms) {
    for (int32_t i = 0; i < 4; i++) on_gpu(build_channel_norms, float_types[i]);
}

Test(lower_reduce_gpu, losses) {
    for (int32_t i = 0; i < 4; i++) on_gpu(build_loss, float_types[i]);
}

Test(lower_reduce_gpu, mixed_dtypes) { on_gpu(build_mixed, AMPC_DTYPE_F32); }

/* ---- integer outputs of float results -------------------------------------------------------- */

/* ReduceL2, ReduceLogSum and ReduceLogSumExp of [4, 6] i32 and i64 rows whose results are -inf
 * (a log of 0), NaN (a log of a negative sum), beyond the output type (an L2 norm of 2e9s, 4e18s)
 * or ordinary. */
static void build_int_of_float(ampc_graph *g, ampc_dtype t) {
    static const char *const ops[3] = {"ReduceL2", "ReduceLogSum", "ReduceLogSumExp"};
    const int64_t dims[2] = {4, 6}, ax1[1] = {1};
    ampc_value *x = input(g, "edge", 0, t, 2, dims);
    for (int32_t o = 0; o < 3; o++) out(g, reduce_node(g, ops[o], x, ax1, 1, 0, 0));
}

/* The rows of build_int_of_float: zeros, -3s, huge values, 1..6. */
static void fill_edges(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name, (void)seed;
    const double huge = t->dtype == AMPC_DTYPE_I64 ? 4e18 : 2e9;
    for (int64_t i = 0; i < 24; i++) {
        const int64_t r = i / 6;
        const double v = r == 0 ? 0 : r == 1 ? -3 : r == 2 ? huge : (double)(i % 6 + 1);
        ampc_ref_store_f64(t->data, t->dtype, i, v);
    }
}

/* A float result goes into the integer output by ampc::cvt alone (truncated, saturated to the
 * output type, NaN -> 0), never through a C cast to 64 bits first (undefined for NaN and inf, and
 * it wrapped an out-of-range i32). */
Test(lower_reduce, integer_outputs_of_float_results_saturate) {
    ampc_graph *g = ampc_graph_create("edges");
    build_int_of_float(g, AMPC_DTYPE_I32);
    ampc_cg_output *o = generate(g);
    const char *src = o->sources[0];
    expect_src(src, "p1[row] = ampc::cvt<int>(ampc::m_sqrt(acc));\n");
    expect_src(src, "p1[row] = ampc::cvt<int>(ampc::m_log(acc));\n");
    expect_src(src, "p1[row] = ampc::cvt<int>(ampc::m_log(acc) + sh);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
    for (int32_t i = 0; i < 2; i++) {
        g = ampc_graph_create("edges");
        build_int_of_float(g, i ? AMPC_DTYPE_I64 : AMPC_DTYPE_I32);
        ampc_compile_options opts = sm80_opts();
        ampc_module *m = NULL;
        cr_assert_eq(ampc_compile(g, &opts, &m), AMPC_OK, "%s", ampc_graph_errors(g));
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
}

Test(lower_reduce_gpu, integer_outputs_of_float_results) {
    for (int32_t i = 0; i < 2; i++) {
        ampc_dtype t = i ? AMPC_DTYPE_I64 : AMPC_DTYPE_I32;
        ampc_graph *g = ampc_graph_create("edges");
        build_int_of_float(g, t);
        t_gpu_check c = {.fill = fill_edges, .tolerance = tolerance, .what = ampc_dtype_name(t)};
        t_gpu_vs_reference(g, &c);
    }
}
