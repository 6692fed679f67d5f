/*
 * test_lower_movement.c — GPU lowering of the data-movement and indexing families
 * (codegen/lower_movement.c, codegen/lower_index.c, codegen/kernels/move.cuh).
 *
 * Without a GPU: every op / dtype / strategy variant we lower compiles with NVRTC (PTX for
 * compute_80 and an sm_80 cubin, every kernel present in the PTX); golden substrings of the
 * emitted CUDA and of the plan for a tiled and a generic transpose, a gather, the Concat / Split
 * strategies (copy steps or one kernel with a chain), a negative-step Slice, Pad modes, the
 * sequential scatters and TopK's launch; empty tensors (no step); constant indices checked at
 * compile time; the ops still unsupported.
 * With a GPU: the same graphs run on random inputs (indices in range) and every output is
 * compared with the reference evaluator, exactly for integers and data movement, reporting the
 * worst element; without one those tests skip.
 */
#include "support.h"

#include "codegen/codegen.h"
#include "ir/ref/ref.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int32_t sm80 = 80;
static const char *const no_fold[1] = {"fold"};

/* Graphs whose ops read only constants (Range, ConstantOfShape) are built with the fold pass
 * off, so that they reach code generation. */
static const ampc_pipeline_options pipe_no_fold = {
    .disable = no_fold, .n_disable = 1, .verify = true};
static const ampc_pipeline_options pipe_default = {.verify = true};

typedef void (*build_fn)(ampc_graph *g, ampc_dtype t);

static void out(ampc_graph *g, ampc_value *v) {
    cr_assert_eq(ampc_output(g, v, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
}

/* An input named "<stem><i>"; the stem decides its random contents in the GPU tests. */
static ampc_value *input(ampc_graph *g, const char *stem, int32_t i, ampc_dtype t, ampc_shape s) {
    char name[48];
    snprintf(name, sizeof name, "%s_%d", stem, i);
    return t_input(g, name, t, s);
}

static ampc_value *op1(ampc_graph *g, const char *op, ampc_value *x, const ampc_attr_arg *a,
                       int32_t na) {
    return ampc_op(g, op, &x, 1, a, na);
}

static ampc_value *i64s(ampc_graph *g, const int64_t *v, int32_t n) {
    return ampc_const_i64s(g, v, n);
}

/* ---- graph builders: every variant of a family as one graph with many outputs ---------------- */

/* Transpose (generic, tiled, a copy), Concat and Split (chain kernel, copies, many parts),
 * Slice (negative steps, a contiguous range), Expand, Tile, DepthToSpace / SpaceToDepth. */
static void build_views(ampc_graph *g, ampc_dtype t) {
    ampc_value *x = input(g, "x", 0, t, SHAPE(6, 5, 4));
    static const int64_t perms[4][3] = {{2, 0, 1}, {1, 0, 2}, {0, 2, 1}, {1, 2, 0}};
    for (int32_t i = 0; i < 4; i++) out(g, ampc_transpose(g, x, perms[i], 3));
    out(g, op1(g, "Transpose", x, NULL, 0)); /* default: reversed */
    ampc_value *big = input(g, "x", 1, t, SHAPE(3, 96, 80));
    out(g, ampc_transpose(g, big, perms[2], 3)); /* tiled: 96 x 80 planes */
    ampc_value *nchw = input(g, "x", 2, t, SHAPE(2, 32, 20, 20));
    static const int64_t to_nhwc[4] = {0, 2, 3, 1};
    out(g, ampc_transpose(g, nchw, to_nhwc, 4)); /* tiled: [2, 400, 32] from [2, 32, 400] */
    ampc_value *unit = input(g, "x", 3, t, SHAPE(1, 5, 4));
    out(g, ampc_transpose(g, unit, perms[1], 3)); /* moves a unit dim only: a copy */

    ampc_value *x2 = input(g, "x", 4, t, SHAPE(6, 2, 4)), *x3 = input(g, "x", 5, t, SHAPE(1, 5, 4));
    out(g, ampc_concat(g, (ampc_value *[]){x, x2, x}, 3, 1)); /* a chain of three */
    out(g, ampc_concat(g, (ampc_value *[]){x, x3}, 2, 0)); /* copies */
    out(g, ampc_concat(g, (ampc_value *[]){x, x, x}, 3, -1)); /* a chain along the last dim */
    ampc_value *many[17];
    ampc_value *col = input(g, "x", 6, t, SHAPE(3, 1));
    for (int32_t i = 0; i < 17; i++) many[i] = col;
    out(g, ampc_concat(g, many, 17, 1)); /* 17 parts: a tree of comparisons */

    ampc_value *parts[3];
    const int64_t sz23[2] = {2, 3}, sz411[3] = {4, 1, 1};
    cr_assert_eq(ampc_op_multi(g, "Split", (ampc_value *[]){x, i64s(g, sz23, 2)}, 2,
                               (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1, parts, 2),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    out(g, parts[0]), out(g, parts[1]); /* a chain */
    cr_assert_eq(
        ampc_op_multi(g, "Split", (ampc_value *[]){x, i64s(g, sz411, 3)}, 2, NULL, 0, parts, 3),
        AMPC_OK, "%s", ampc_graph_errors(g));
    out(g, parts[0]), out(g, parts[1]), out(g, parts[2]); /* along axis 0: copies */

    const int64_t st[2] = {-1, 0}, en[2] = {-100, 5}, ax[2] = {0, 2}, sp[2] = {-2, 3};
    out(g,
        ampc_op(g, "Slice",
                (ampc_value *[]){x, i64s(g, st, 2), i64s(g, en, 2), i64s(g, ax, 2), i64s(g, sp, 2)},
                5, NULL, 0));
    const int64_t st1[1] = {1}, en1[1] = {3}, ax1[1] = {0}, stm[1] = {-2}, enm[1] = {-5},
                  axm[1] = {-1};
    out(g,
        ampc_op(g, "Slice", (ampc_value *[]){x, i64s(g, st1, 1), i64s(g, en1, 1), i64s(g, ax1, 1)},
                4, NULL, 0)); /* rows 1..2: a copy */
    out(g, ampc_op(g, "Slice",
                   (ampc_value *[]){x, i64s(g, stm, 1), i64s(g, enm, 1), i64s(g, axm, 1),
                                    i64s(g, (int64_t[]){-1}, 1)},
                   5, NULL, 0));

    ampc_value *e = input(g, "x", 7, t, SHAPE(5, 1));
    const int64_t eshape[3] = {3, 5, 4}, reps[3] = {2, 1, 3};
    out(g, ampc_op(g, "Expand", (ampc_value *[]){e, i64s(g, eshape, 3)}, 2, NULL, 0));
    out(g, ampc_op(g, "Tile", (ampc_value *[]){x, i64s(g, reps, 3)}, 2, NULL, 0));

    ampc_value *d = input(g, "x", 8, t, SHAPE(2, 8, 3, 3)),
               *s = input(g, "x", 9, t, SHAPE(2, 2, 6, 4));
    out(g, op1(g, "DepthToSpace", d, (ampc_attr_arg[]){AMPC_ATTR_I("blocksize", 2)}, 1));
    out(g, op1(g, "DepthToSpace", d,
               (ampc_attr_arg[]){AMPC_ATTR_I("blocksize", 2), AMPC_ATTR_S("mode", "CRD")}, 2));
    out(g, op1(g, "SpaceToDepth", s, (ampc_attr_arg[]){AMPC_ATTR_I("blocksize", 2)}, 1));

    /* Last dims contiguous on both sides: moved in units of up to 16 bytes. */
    ampc_value *w = input(g, "x", 10, t, SHAPE(3, 5, 8)), *w2 = input(g, "x", 11, t, SHAPE(3, 2, 8));
    out(g, ampc_transpose(g, w, perms[1], 3)); /* a head split: [5, 3, 8] */
    out(g, ampc_concat(g, (ampc_value *[]){w, w2, w}, 3, 1)); /* rows interleaved */
    const int64_t st4[1] = {4}, en4[1] = {8}, ax4[1] = {2};
    out(g, ampc_op(g, "Slice", (ampc_value *[]){w, i64s(g, st4, 1), i64s(g, en4, 1), i64s(g, ax4, 1)},
                   4, NULL, 0)); /* half of each row */
}

/* Pad in every mode (positive and negative pads, axes, a constant input), a pure crop,
 * CenterCropPad (crop and pad, crop only), Trilu (upper, lower, everything, nothing). */
static void build_fills(ampc_graph *g, ampc_dtype t) {
    ampc_value *x = input(g, "x", 0, t, SHAPE(6, 5, 4));
    ampc_value *cv = input(g, "x", 1, t, SHAPE());
    const int64_t pads[6] = {1, -1, 2, 0, 1, 3};
    static const char *const modes[4] = {"constant", "reflect", "edge", "wrap"};
    for (int32_t m = 0; m < 4; m++)
        out(g, ampc_op(g, "Pad", (ampc_value *[]){x, i64s(g, pads, 6)}, 2,
                       (ampc_attr_arg[]){AMPC_ATTR_S("mode", modes[m])}, 1));
    const int64_t pads2[2] = {3, 2}, axes2[1] = {-2};
    out(g, ampc_op(g, "Pad", (ampc_value *[]){x, i64s(g, pads2, 2), cv, i64s(g, axes2, 1)}, 4, NULL,
                   0));
    const int64_t crop[6] = {0, -1, 0, -2, -1, -1};
    out(g, ampc_op(g, "Pad", (ampc_value *[]){x, i64s(g, crop, 6)}, 2, NULL, 0)); /* a view */
    const int64_t ccp[3] = {4, 8, 4}, cc[3] = {3, 3, 2};
    out(g, ampc_op(g, "CenterCropPad", (ampc_value *[]){x, i64s(g, ccp, 3)}, 2, NULL, 0));
    out(g, ampc_op(g, "CenterCropPad", (ampc_value *[]){x, i64s(g, cc, 3)}, 2, NULL, 0));
    /* k and upper: four kernels, then everything kept (a copy) and nothing (a memset). */
    static const int64_t tri[6][2] = {{1, 1}, {1, 0}, {-1, 1}, {-1, 0}, {-100, 1}, {INT64_MAX, 1}};
    for (int32_t i = 0; i < 6; i++)
        out(g, ampc_op(g, "Trilu", (ampc_value *[]){x, ampc_scalar_i64(g, tri[i][0])}, 2,
                       (ampc_attr_arg[]){AMPC_ATTR_I("upper", tri[i][1])}, 1));
}

/* Gathers (runtime i64 / i32 indices, a scalar index, batch_dims), OneHot, Compress and
 * ReverseSequence. Index inputs are named "ix<N>": the GPU tests fill them in [-N, N);
 * "nn<N>": in [0, N]. */
static void build_gathers(ampc_graph *g, ampc_dtype t) {
    ampc_value *x = input(g, "x", 0, t, SHAPE(7, 6));
    ampc_value *i0 = input(g, "ix7", 0, AMPC_DTYPE_I64, SHAPE(2, 3));
    ampc_value *i1 = input(g, "ix6", 1, AMPC_DTYPE_I32, SHAPE(4));
    ampc_value *i2 = input(g, "ix7", 2, AMPC_DTYPE_I64, SHAPE());
    out(g, ampc_op(g, "Gather", (ampc_value *[]){x, i0}, 2, NULL, 0));
    out(g, ampc_op(g, "Gather", (ampc_value *[]){x, i1}, 2,
                   (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1));
    out(g, ampc_op(g, "Gather", (ampc_value *[]){x, i2}, 2, NULL, 0));
    ampc_value *ge0 = input(g, "ix7", 3, AMPC_DTYPE_I64, SHAPE(9, 6));
    ampc_value *ge1 = input(g, "ix6", 4, AMPC_DTYPE_I32, SHAPE(5, 2));
    out(g, ampc_op(g, "GatherElements", (ampc_value *[]){x, ge0}, 2, NULL, 0));
    out(g, ampc_op(g, "GatherElements", (ampc_value *[]){x, ge1}, 2,
                   (ampc_attr_arg[]){AMPC_ATTR_I("axis", -1)}, 1));
    ampc_value *xn = input(g, "x", 1, t, SHAPE(4, 4, 4, 2));
    ampc_value *n0 = input(g, "ix4", 5, AMPC_DTYPE_I64, SHAPE(5, 2));
    ampc_value *n1 = input(g, "ix4", 6, AMPC_DTYPE_I32, SHAPE(4, 2, 1));
    out(g, ampc_op(g, "GatherND", (ampc_value *[]){xn, n0}, 2, NULL, 0));
    out(g, ampc_op(g, "GatherND", (ampc_value *[]){xn, n1}, 2,
                   (ampc_attr_arg[]){AMPC_ATTR_I("batch_dims", 1)}, 1));
    /* Constant indices in a few runs are view copies: one index (a copy), every other entry
     * counted from the end, a reversal, a roll by one (two runs); scattered ones (nine runs) a
     * gather kernel. */
    ampc_value *xg = input(g, "x", 5, t, SHAPE(3, 4, 8));
    const int64_t every_other[2] = {-4, -2}, reversed[3] = {2, 1, 0}, uneven[3] = {3, 0, 1};
    int64_t scattered[18]; /* 0, 7, 0, 7, ...: nine runs of two */
    for (int32_t i = 0; i < 18; i++) scattered[i] = i % 2 ? 7 : 0;
    out(g, ampc_op(g, "Gather", (ampc_value *[]){xg, t_const_i64(g, SHAPE(18), scattered)}, 2,
                   (ampc_attr_arg[]){AMPC_ATTR_I("axis", 2)}, 1));
    out(g, ampc_op(g, "Gather", (ampc_value *[]){xg, ampc_scalar_i64(g, 1)}, 2, NULL, 0));
    out(g, ampc_op(g, "Gather", (ampc_value *[]){xg, t_const_i64(g, SHAPE(2), every_other)}, 2,
                   (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1));
    out(g, ampc_op(g, "Gather", (ampc_value *[]){xg, t_const_i64(g, SHAPE(3), reversed)}, 2, NULL,
                   0));
    out(g, ampc_op(g, "Gather", (ampc_value *[]){xg, t_const_i64(g, SHAPE(3), uneven)}, 2,
                   (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1));
    const int64_t cidx[4] = {3, -2, 0, -4}; /* constant indices, checked while compiling */
    out(g, ampc_op(g, "GatherND", (ampc_value *[]){xn, t_const_i64(g, SHAPE(2, 2), cidx)}, 2, NULL,
                   0));

    ampc_value *vals = input(g, "x", 2, t, SHAPE(2));
    ampc_value *oh0 = input(g, "ix7", 7, AMPC_DTYPE_I64, SHAPE(3, 4)); /* some outside depth 5 */
    ampc_value *oh1 = input(g, "ix7", 8, AMPC_DTYPE_F32, SHAPE(3, 4));
    out(g, ampc_op(g, "OneHot", (ampc_value *[]){oh0, ampc_scalar_i64(g, 5), vals}, 3, NULL, 0));
    out(g, ampc_op(g, "OneHot", (ampc_value *[]){oh1, ampc_scalar_f32(g, 5), vals}, 3,
                   (ampc_attr_arg[]){AMPC_ATTR_I("axis", 0)}, 1));

    const bool c0[6] = {1, 0, 1, 1, 0, 1}, c1[4] = {0, 1, 1, 0};
    out(g, ampc_op(g, "Compress", (ampc_value *[]){x, t_const(g, AMPC_DTYPE_BOOL, SHAPE(6), c0)}, 2,
                   (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1));
    out(g, ampc_op(g, "Compress", (ampc_value *[]){x, t_const(g, AMPC_DTYPE_BOOL, SHAPE(4), c1)}, 2,
                   NULL, 0));

    ampc_value *rs0 = input(g, "x", 3, t, SHAPE(5, 3, 2)),
               *rs1 = input(g, "x", 4, t, SHAPE(3, 5, 2));
    ampc_value *l0 = input(g, "nn5", 9, AMPC_DTYPE_I64, SHAPE(3)),
               *l1 = input(g, "nn5", 10, AMPC_DTYPE_I32, SHAPE(3));
    out(g, ampc_op(g, "ReverseSequence", (ampc_value *[]){rs0, l0}, 2, NULL, 0));
    out(g,
        ampc_op(g, "ReverseSequence", (ampc_value *[]){rs1, l1}, 2,
                (ampc_attr_arg[]){AMPC_ATTR_I("batch_axis", 0), AMPC_ATTR_I("time_axis", 1)}, 2));
}

/* Scatters: ScatterElements and Scatter with every reduction over duplicate indices, ScatterND
 * by slice and by element, TensorScatter linear and circular. */
static void build_scatters(ampc_graph *g, ampc_dtype t) {
    static const char *const reds[5] = {"none", "add", "mul", "max", "min"};
    ampc_value *x = input(g, "x", 0, t, SHAPE(4, 5));
    ampc_value *ie = input(g, "ix4", 0, AMPC_DTYPE_I64, SHAPE(6, 5)),
               *ue = input(g, "x", 1, t, SHAPE(6, 5));
    ampc_value *ie1 = input(g, "ix5", 1, AMPC_DTYPE_I32, SHAPE(3, 7)),
               *ue1 = input(g, "x", 2, t, SHAPE(3, 7));
    for (int32_t r = 0; r < 5; r++) {
        ampc_attr_arg a[2] = {AMPC_ATTR_S("reduction", reds[r]), AMPC_ATTR_I("axis", 1)};
        out(g, ampc_op(g, "ScatterElements", (ampc_value *[]){x, ie, ue}, 3, a, 1));
        out(g, ampc_op(g, "ScatterElements", (ampc_value *[]){x, ie1, ue1}, 3, a, 2));
    }
    out(g, ampc_op(g, "Scatter", (ampc_value *[]){x, ie, ue}, 3, NULL, 0));
    ampc_value *xn = input(g, "x", 3, t, SHAPE(4, 4, 3));
    ampc_value *in0 = input(g, "ix4", 2, AMPC_DTYPE_I64, SHAPE(5, 2)),
               *un0 = input(g, "x", 4, t, SHAPE(5, 3));
    ampc_value *xe = input(g, "x", 5, t, SHAPE(4, 4, 4));
    ampc_value *in1 = input(g, "ix4", 3, AMPC_DTYPE_I64, SHAPE(2, 4, 3)),
               *un1 = input(g, "x", 6, t, SHAPE(2, 4));
    for (int32_t r = 0; r < 5; r++) {
        ampc_attr_arg a[1] = {AMPC_ATTR_S("reduction", reds[r])};
        out(g, ampc_op(g, "ScatterND", (ampc_value *[]){xn, in0, un0}, 3, a, 1));
        out(g, ampc_op(g, "ScatterND", (ampc_value *[]){xe, in1, un1}, 3, a, 1));
    }
    ampc_value *past = input(g, "x", 7, t, SHAPE(2, 6, 3)),
               *upd = input(g, "x", 8, t, SHAPE(2, 2, 3));
    ampc_value *wl = input(g, "nn4", 4, AMPC_DTYPE_I64, SHAPE(2)),
               *wc = input(g, "ix9", 5, AMPC_DTYPE_I64, SHAPE(2));
    out(g, ampc_op(g, "TensorScatter", (ampc_value *[]){past, upd, wl}, 3, NULL, 0));
    out(g, ampc_op(g, "TensorScatter", (ampc_value *[]){past, upd, wc}, 3,
                   (ampc_attr_arg[]){AMPC_ATTR_S("mode", "circular")}, 1));
    out(g, ampc_op(g, "TensorScatter", (ampc_value *[]){past, upd}, 2, NULL, 0));
}

/* TopK along contiguous and strided axes, smallest first, short lines, a line sorted whole in
 * shared memory and lines streamed through it. */
static void build_topk(ampc_graph *g, ampc_dtype t) {
    static const struct {
        int64_t dims[2], axis, k, largest;
    } v[] = {
        {{4, 37}, -1, 5, 1},     {{9, 6}, 0, 2, 0},    {{3, 1}, 1, 1, 1},
        {{2, 1500}, 1, 1500, 0}, {{2, 5000}, 1, 7, 1}, {{3000, 2}, 0, 3, 0},
    };
    for (int32_t i = 0; i < AMPC_ARRAY_LEN(v); i++) {
        ampc_value *x = input(g, "x", i, t, t_shape((int64_t[]){0, v[i].dims[0], v[i].dims[1]}, 2));
        ampc_value *o[2];
        ampc_attr_arg a[2] = {AMPC_ATTR_I("axis", v[i].axis), AMPC_ATTR_I("largest", v[i].largest)};
        cr_assert_eq(ampc_op_multi(g, "TopK", (ampc_value *[]){x, ampc_const_i64s(g, &v[i].k, 1)},
                                   2, a, 2, o, 2),
                     AMPC_OK, "%s", ampc_graph_errors(g));
        out(g, o[0]), out(g, o[1]);
    }
}

/* Range and ConstantOfShape (compiled with the fold pass off), AffineGrid for float types. */
static void build_generators(ampc_graph *g, ampc_dtype t) {
    if (ampc_dtype_is_float(t) || t == AMPC_DTYPE_I64 || t == AMPC_DTYPE_I32) {
        /* Over 65536 elements, so that building does not evaluate it at once. */
        const double fv[3] = {-1000, 1100, 0.03};
        const int64_t iv[3] = {-5, 3 * 70000 - 5, 3};
        ampc_value *in[3];
        for (int32_t i = 0; i < 3; i++) {
            unsigned char b[8];
            if (ampc_dtype_is_float(t)) ampc_ref_store_f64(b, t, 0, fv[i]);
            else ampc_ref_store_i64(b, t, 0, iv[i]);
            in[i] = t_const(g, t, SHAPE(), b);
        }
        out(g, ampc_op(g, "Range", in, 3, NULL, 0));
    }
    const int64_t shp[2] = {300, 300};
    unsigned char one[8] = {0};
    ampc_ref_store_f64(one, t, 0, t == AMPC_DTYPE_BOOL ? 1 : 3);
    ampc_value *val = t_const(g, t, SHAPE(1), one);
    ampc_attr_arg a = {.name = "value", .kind = AMPC_ATTR_TENSOR, .tensor = val};
    ampc_value *sv = i64s(g, shp, 2);
    out(g, ampc_op(g, "ConstantOfShape", &sv, 1, &a, 1));
    out(g, ampc_op(g, "ConstantOfShape", &sv, 1, NULL, 0)); /* f32 zeros: a memset */
    if (ampc_dtype_is_float(t)) {
        ampc_value *th2 = input(g, "x", 0, t, SHAPE(2, 2, 3)),
                   *th3 = input(g, "x", 1, t, SHAPE(1, 3, 4));
        const int64_t s2[4] = {2, 1, 4, 5}, s3[5] = {1, 1, 2, 3, 4};
        for (int64_t al = 0; al < 2; al++) {
            ampc_attr_arg ac = AMPC_ATTR_I("align_corners", al);
            out(g, ampc_op(g, "AffineGrid", (ampc_value *[]){th2, i64s(g, s2, 4)}, 2, &ac, 1));
            out(g, ampc_op(g, "AffineGrid", (ampc_value *[]){th3, i64s(g, s3, 5)}, 2, &ac, 1));
        }
    }
}

/* ---- NVRTC: every variant compiles ---------------------------------------------------------- */

static int32_t count_substr(const char *s, const char *needle) {
    int32_t c = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) c++;
    return c;
}

/* Builds, compiles for sm_80 (PTX and cubin), checks that every kernel of the CUDA is an entry
 * of the PTX, and returns the number of plan steps (*kernels: how many are kernels). */
static int32_t compiles(build_fn build, ampc_dtype t, const ampc_pipeline_options *po,
                        int32_t *kernels) {
    ampc_graph *g = ampc_graph_create("lm");
    build(g, t);
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "building (%s) failed:\n%s", ampc_dtype_name(t),
                 ampc_graph_errors(g));
    ampc_module *m = NULL;
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .pipeline = po};
    ampc_status st = ampc_compile(g, &o, &m);
    cr_assert_eq(st, AMPC_OK, "%s: %s\n%s", ampc_dtype_name(t), ampc_status_str(st),
                 ampc_graph_errors(g));
    int32_t entries = 0, defs = 0;
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++) {
        const char *ptx = ampc_module_ptx(m, u);
        cr_assert_not_null(ptx);
        entries += count_substr(ptx, ".entry ");
        defs += count_substr(ampc_module_cuda(m, u), "extern \"C\" __global__");
    }
    cr_assert_eq(entries, defs, "%s: %d kernels in the PTX for %d in the CUDA", ampc_dtype_name(t),
                 entries, defs);
    int32_t steps = ampc_module_step_count(m);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
    *kernels = defs;
    return steps;
}

/* Asserts the step and kernel counts of build(t) for each dtype of ts. */
static void expect_compiles(build_fn build, const ampc_dtype *ts, int32_t n,
                            const ampc_pipeline_options *po, int32_t steps, int32_t kernels) {
    for (int32_t i = 0; i < n; i++) {
        int32_t k = 0, s = compiles(build, ts[i], po, &k);
        cr_assert_eq(s, steps, "%s: %d steps, expected %d", ampc_dtype_name(ts[i]), s, steps);
        cr_assert_eq(k, kernels, "%s: %d kernels, expected %d", ampc_dtype_name(ts[i]), k, kernels);
    }
}

static const ampc_dtype every_type[13] = {
    AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16, AMPC_DTYPE_F64, AMPC_DTYPE_I64,
    AMPC_DTYPE_I32, AMPC_DTYPE_I16, AMPC_DTYPE_I8,   AMPC_DTYPE_U64, AMPC_DTYPE_U32,
    AMPC_DTYPE_U16, AMPC_DTYPE_U8,  AMPC_DTYPE_BOOL,
};
/* One per element width and kind: enough for code that only moves elements. */
static const ampc_dtype width_types[6] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16,  AMPC_DTYPE_F64,
                                          AMPC_DTYPE_I8,  AMPC_DTYPE_BF16, AMPC_DTYPE_BOOL};
static const ampc_dtype float_types[4] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                                          AMPC_DTYPE_F64};

Test(lower_move, views_compile) {
    /* 9 transposes (one a copy); 5 concats: 4 kernels and 2 copies; 2 splits: a kernel and 3
     * copies; 4 slices (one a copy); Expand, Tile, 3 depth/space. */
    expect_compiles(build_views, width_types, 6, &pipe_default, 28, 21);
}

Test(lower_move, fills_compile) {
    /* 5 pads (4 modes + constant input) and a crop view, 2 CenterCropPads (a kernel, a view),
     * 6 Trilus of which one is a copy and one a memset. */
    expect_compiles(build_fills, width_types, 6, &pipe_default, 14, 12);
}

Test(lower_move, generators_compile) {
    /* Range, 2 ConstantOfShape (a fill, a memset), 4 AffineGrids. */
    expect_compiles(build_generators, float_types, 4, &pipe_no_fold, 7, 6);
    static const ampc_dtype ints[2] = {AMPC_DTYPE_I64, AMPC_DTYPE_I32};
    expect_compiles(build_generators, ints, 2, &pipe_no_fold, 3, 2);
    static const ampc_dtype other[4] = {AMPC_DTYPE_I16, AMPC_DTYPE_U8, AMPC_DTYPE_BOOL,
                                        AMPC_DTYPE_U64};
    expect_compiles(build_generators, other, 4, &pipe_no_fold, 2, 1);
}

Test(lower_index, gathers_compile) {
    /* 8 Gathers (one a copy, the roll two view copies), 2 GatherElements, 3 GatherNDs, 2
     * OneHots, 2 Compress, 2 ReverseSequences. */
    expect_compiles(build_gathers, width_types, 6, &pipe_default, 20, 19);
}

Test(lower_index, scatters_compile_for_every_dtype) {
    /* 11 ScatterElements/Scatter and 10 ScatterND (a copy and a kernel each), 3 TensorScatters
     * (likewise). */
    expect_compiles(build_scatters, every_type, 13, &pipe_default, 48, 24);
}

Test(lower_index, topk_compiles) {
    static const ampc_dtype num[8] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                                      AMPC_DTYPE_F64, AMPC_DTYPE_I64, AMPC_DTYPE_I32,
                                      AMPC_DTYPE_U8,  AMPC_DTYPE_U64};
    expect_compiles(build_topk, num, 8, &pipe_default, 6, 6);
}

/* ---- golden CUDA and plans ------------------------------------------------------------------ */

/* Runs the pipeline and code generation on g (no NVRTC); the caller frees the output. */
static ampc_cg_output *generate(ampc_graph *g, const ampc_pipeline_options *po) {
    cr_assert_eq(ampc_graph_optimize(g, po), AMPC_OK, "%s", ampc_graph_errors(g));
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_cg_output *o = NULL;
    cr_assert_eq(ampc_cg_generate(g, NULL, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    return o;
}

static void expect_src(const char *src, const char *needle) {
    cr_assert(strstr(src, needle), "expected in the CUDA:\n  %s\ngot:\n%s", needle, src);
}

static const ampc_rt_step *step(const ampc_cg_output *o, int32_t i, ampc_rt_step_kind kind) {
    cr_assert_lt(i, o->plan.n_steps, "step %d of %d", i, o->plan.n_steps);
    cr_assert_eq(o->plan.steps[i].kind, kind, "step %d is kind %d, expected %d", i,
                 o->plan.steps[i].kind, kind);
    return &o->plan.steps[i];
}

/* The byte range of a copy, relative to the values it connects. */
static void expect_copy(const ampc_cg_output *o, int32_t i, const ampc_value *src, int64_t src_off,
                        const ampc_value *dst, int64_t dst_off, int64_t bytes) {
    const ampc_rt_step *s = step(o, i, AMPC_RT_STEP_COPY);
    cr_assert_eq(s->copy.src.offset, src->mem_offset + src_off);
    cr_assert_eq(s->copy.dst.offset, dst->mem_offset + dst_off);
    cr_assert_eq(s->copy.src.bytes, bytes);
    cr_assert_eq(s->copy.dst.bytes, bytes);
}

Test(lower_move, transpose_golden) {
    ampc_graph *g = ampc_graph_create("tr");
    ampc_value *small = t_input(g, "s", AMPC_DTYPE_F32, SHAPE(4, 3));
    ampc_value *big = t_input(g, "b", AMPC_DTYPE_F16, SHAPE(8, 64, 48));
    ampc_value *same = t_input(g, "u", AMPC_DTYPE_F32, SHAPE(2, 1, 3));
    const int64_t p10[2] = {1, 0}, p021[3] = {0, 2, 1}, p102[3] = {1, 0, 2};
    ampc_value *ys = ampc_transpose(g, small, p10, 2), *yb = ampc_transpose(g, big, p021, 3);
    ampc_value *yu = ampc_transpose(g, same, p102, 3);
    out(g, ys), out(g, yb), out(g, yu);
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 3);
    const char *src = o->sources[0];
    /* [4, 3] -> [3, 4]: one thread per element, the source offset from baked coordinates. */
    const ampc_rt_step *s0 = step(o, 0, AMPC_RT_STEP_KERNEL);
    cr_assert_eq(s0->kernel.block[0], 256);
    expect_src(src, "// k0_transpose: Transpose 'Transpose_0'\n");
    expect_src(src, "extern \"C\" __global__ void __launch_bounds__(256) k0_transpose(const float "
                    "*p0, float *p1) {\n");
    expect_src(src, "        long long r1 = i;\n"
                    "        const long long c0 = r1 % 4LL;\n"
                    "        r1 /= 4LL;\n"
                    "        const long long c2 = r1;\n"
                    "        p1[i] = p0[c2 + c0 * 3LL];\n");
    /* [8, 64, 48] -> [8, 48, 64] in f16: 32x32 tiles of 16-bit words, 8 x 2 x 2 = 32 blocks of
     * 32 x 8 threads. */
    const ampc_rt_step *s1 = step(o, 1, AMPC_RT_STEP_KERNEL);
    cr_assert(s1->kernel.grid[0] == 32 && s1->kernel.block[0] == 32 && s1->kernel.block[1] == 8,
              "grid %u block %u x %u", s1->kernel.grid[0], s1->kernel.block[0],
              s1->kernel.block[1]);
    expect_src(src, "__launch_bounds__(256) k1_transpose(const __half *p0, __half *p1) {\n");
    expect_src(src, "    __shared__ unsigned short tile[32][33];\n");
    expect_src(src, "    for (long long t = blockIdx.x; t < 32LL; t += gridDim.x) {\n");
    expect_src(src, "const long long tb = t % 2LL, ta = t / 2LL % 2LL, bt = t / 4LL;\n");
    expect_src(src, "const long long sb = c0 * 3072LL, db = c0 * 3072LL;\n");
    expect_src(src, "if (a < 48LL && b < 64LL) tile[j][threadIdx.x] = x[sb + a + b * 48LL];\n");
    expect_src(src, "if (a < 48LL && b < 64LL) y[db + a * 64LL + b] = tile[threadIdx.x][j];\n");
    /* Moving a unit dim changes no byte: a copy. */
    expect_copy(o, 2, same, 0, yu, 0, 24);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_move, space_to_depth_crd_golden) {
    /* [1, 2, 4, 4] -> [1, 8, 2, 2] in CRD order: deep channel c * 4 + i * 2 + j at (h, w) holds
     * spatial (c, 2h + i, 2w + j); the source is read in order, the destination strided. */
    ampc_graph *g = ampc_graph_create("s2d");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_I16, SHAPE(1, 2, 4, 4));
    out(g, op1(g, "SpaceToDepth", x,
               (ampc_attr_arg[]){AMPC_ATTR_I("blocksize", 2), AMPC_ATTR_S("mode", "CRD")}, 2));
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 1);
    expect_src(o->sources[0], "k0_space_to_depth(const short *p0, short *p1)");
    expect_src(o->sources[0], "p1[c5 * 16LL + c4 * 2LL + c3 * 8LL + c2 + c0 * 4LL] = p0[i];\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_index, gather_golden) {
    ampc_graph *g = ampc_graph_create("ga");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_BF16, SHAPE(5, 4));
    ampc_value *ix = t_input(g, "i", AMPC_DTYPE_I32, SHAPE(2, 3));
    out(g, ampc_op(g, "Gather", (ampc_value *[]){x, ix}, 2, NULL, 0));
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 1);
    cr_assert_eq(o->plan.steps[0].kernel.n_args, 3);
    const char *src = o->sources[0];
    expect_src(src, "k0_gather(const __nv_bfloat16 *p0, const int *p1, __nv_bfloat16 *p2) {\n");
    expect_src(src,
               "for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < 24LL;");
    expect_src(src, "const long long w0 = i % 4LL, j1 = i / 4LL % 6LL, o2 = i / 24LL;\n");
    expect_src(src, "long long v3 = ampc::to_index(p1[j1]);\n");
    expect_src(src, "if (v3 < 0) v3 += 5LL;\n");
    /* An index out of range reads as 0 instead of leaving the tensor. */
    expect_src(src, "p2[i] = v3 >= 0 && v3 < 5LL ? p0[(o2 * 5LL + v3) * 4LL + w0] : "
                    "ampc::zero<__nv_bfloat16>();\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* A copy whose last dim is contiguous on both sides moves the widest unit (up to 16 bytes) that
 * the row, the strides and the offsets divide; otherwise one element a thread. */
Test(lower_move, contiguous_rows_move_in_units_of_up_to_16_bytes) {
    ampc_graph *g = ampc_graph_create("units");
    ampc_value *heads = t_input(g, "h", AMPC_DTYPE_F16, SHAPE(6, 4, 64));
    ampc_value *odd = t_input(g, "o", AMPC_DTYPE_F16, SHAPE(6, 4, 3));
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F16, SHAPE(2, 8)),
               *b = t_input(g, "b", AMPC_DTYPE_F16, SHAPE(2, 4));
    const int64_t p102[3] = {1, 0, 2};
    out(g, ampc_transpose(g, heads, p102, 3));
    out(g, ampc_transpose(g, odd, p102, 3));
    out(g, ampc_concat(g, (ampc_value *[]){a, b}, 2, 1));
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 3);
    const char *src = o->sources[0];
    /* [6, 4, 64] -> [4, 6, 64] f16: rows of eight 16-byte units, 4 * 6 * 8 threads. */
    expect_src(src, "k0_transpose(const uint4 *p0, uint4 *p1) {\n");
    expect_src(src, "i < 192LL;");
    expect_src(src, "p1[i] = p0[c3 * 8LL + c2 * 32LL + c0];\n");
    /* Rows of three f16 (6 bytes): one element a thread. */
    expect_src(src, "k1_transpose(const __half *p0, __half *p1) {\n");
    expect_src(src, "i < 72LL;");
    /* Parts of 16 and 8 bytes in slabs of 24: 8-byte units. */
    expect_src(src, "k2_concat(const unsigned long long *p0, const unsigned long long *p1, "
                    "unsigned long long *p2) {\n");
    expect_src(src, "const long long o = i / 3LL, s = i % 3LL;\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_index, constant_even_indices_are_a_view_copy) {
    ampc_graph *g = ampc_graph_create("gv");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 4, 8));
    const int64_t every_other[2] = {1, 3};
    int64_t uneven[18]; /* 3, 0, 3, 0, ...: nine runs of two, read from memory */
    for (int32_t i = 0; i < 18; i++) uneven[i] = i % 2 ? 0 : 3;
    ampc_value *one = ampc_op(g, "Gather", (ampc_value *[]){x, ampc_scalar_i64(g, -1)}, 2, NULL, 0);
    ampc_value *two = ampc_op(g, "Gather", (ampc_value *[]){x, t_const_i64(g, SHAPE(2), every_other)},
                              2, (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1);
    ampc_value *three = ampc_op(g, "Gather", (ampc_value *[]){x, t_const_i64(g, SHAPE(18), uneven)},
                                2, (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1);
    /* slices of 6 floats, 24 bytes: no whole 16-byte units, an element a thread */
    ampc_value *x6 = t_input(g, "x6", AMPC_DTYPE_F32, SHAPE(3, 4, 6));
    ampc_value *four = ampc_op(g, "Gather", (ampc_value *[]){x6, t_const_i64(g, SHAPE(18), uneven)},
                               2, (ampc_attr_arg[]){AMPC_ATTR_I("axis", 1)}, 1);
    out(g, one), out(g, two), out(g, three), out(g, four);
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 4);
    expect_copy(o, 0, x, 2 * 32 * 4, one, 0, 32 * 4); /* index -1 of 3: the last [4, 8] */
    /* Rows 1 and 3 of each [4, 8]: 32-byte rows of two 16-byte units, every other row from the
     * second (unit 2), the three [4, 8] and the two rows one dim of six rows 4 units apart. */
    step(o, 1, AMPC_RT_STEP_KERNEL);
    const char *src = o->sources[0];
    expect_src(src, "k0_gather(const uint4 *p0, uint4 *p1) {\n");
    expect_src(src, "i < 12LL;");
    expect_src(src, "p1[i] = p0[2LL + c2 * 4LL + c0];\n");
    /* the uneven indices from memory; each [8] slice is two 16-byte units, moved a unit a thread:
     * 3 x 18 x 2 of them */
    step(o, 2, AMPC_RT_STEP_KERNEL);
    expect_src(src, "k1_gather(const uint4 *p0, const long long *p1, uint4 *p2) {\n");
    expect_src(src, "i < 108LL;");
    expect_src(src, "p2[i] = v0 >= 0 && v0 < 4LL ? p0[(o * 4LL + v0) * 2LL + w] : make_uint4(0u, 0u, 0u, 0u);");
    step(o, 3, AMPC_RT_STEP_KERNEL);
    expect_src(src, "k2_gather(const float *p0, const long long *p1, float *p2) {\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_move, concat_and_split_strategies) {
    ampc_graph *g = ampc_graph_create("cs");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_I64, SHAPE(2, 3)),
               *b = t_input(g, "b", AMPC_DTYPE_I64, SHAPE(2, 5));
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_I64, SHAPE(1, 3));
    ampc_value *ab = ampc_concat(g, (ampc_value *[]){a, b}, 2, 1); /* a kernel */
    ampc_value *ac = ampc_concat(g, (ampc_value *[]){a, c}, 2, 0); /* two copies */
    out(g, ab), out(g, ac);
    ampc_value *p[2];
    const int64_t sz[2] = {1, 2};
    cr_assert_eq(ampc_op_multi(g, "Split", (ampc_value *[]){a, i64s(g, sz, 2)}, 2,
                               (ampc_attr_arg[]){AMPC_ATTR_I("axis", -1)}, 1, p, 2),
                 AMPC_OK);
    out(g, p[0]), out(g, p[1]);
    ampc_value *q[2];
    cr_assert_eq(ampc_op_multi(g, "Split", (ampc_value *[]){b}, 1, NULL, 0, q, 2), AMPC_OK);
    out(g, q[0]), out(g, q[1]);
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 6);
    const char *src = o->sources[0];
    step(o, 0, AMPC_RT_STEP_KERNEL);
    expect_src(src, "k0_concat(const long long *p0, const long long *p1, long long *p2) {\n");
    expect_src(src, "const long long o = i / 8LL, s = i % 8LL;\n");
    expect_src(src, "        if (s < 3LL) {\n"
                    "            p2[i] = p0[o * 3LL + s - 0LL];\n"
                    "        }\n"
                    "        else {\n"
                    "            p2[i] = p1[o * 5LL + s - 3LL];\n");
    expect_copy(o, 1, a, 0, ac, 0, 48);
    expect_copy(o, 2, c, 0, ac, 48, 24);
    step(o, 3, AMPC_RT_STEP_KERNEL);
    expect_src(src, "k1_split(const long long *p0, long long *p1, long long *p2) {\n");
    expect_src(src, "const long long o = i / 3LL, s = i % 3LL;\n");
    expect_src(src, "        if (s < 1LL) {\n"
                    "            p1[o * 1LL + s - 0LL] = p0[i];\n"
                    "        }\n"
                    "        else {\n"
                    "            p2[o * 2LL + s - 1LL] = p0[i];\n");
    expect_copy(o, 4, b, 0, q[0], 0, 40);
    expect_copy(o, 5, b, 40, q[1], 0, 40);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_move, slice_pad_and_fill_golden) {
    ampc_graph *g = ampc_graph_create("sp");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(10));
    const int64_t st[1] = {-1}, en[1] = {-11}, sp[1] = {-2};
    ampc_value *sl = ampc_op(
        g, "Slice", (ampc_value *[]){x, i64s(g, st, 1), i64s(g, en, 1), NULL, i64s(g, sp, 1)}, 5,
        NULL, 0);
    const int64_t pads[2] = {3, -2};
    ampc_value *pr = ampc_op(g, "Pad", (ampc_value *[]){x, i64s(g, pads, 2)}, 2,
                             (ampc_attr_arg[]){AMPC_ATTR_S("mode", "reflect")}, 1);
    ampc_value *m = t_input(g, "m", AMPC_DTYPE_U8, SHAPE(3, 4));
    ampc_value *all = ampc_op(g, "Trilu", (ampc_value *[]){m, ampc_scalar_i64(g, -7)}, 2, NULL, 0);
    ampc_value *none = ampc_op(g, "Trilu", (ampc_value *[]){m, ampc_scalar_i64(g, INT64_MIN)}, 2,
                               (ampc_attr_arg[]){AMPC_ATTR_I("upper", 0)}, 1);
    ampc_value *tri =
        ampc_op(g, "Trilu", (ampc_value *[]){m, ampc_scalar_i64(g, INT64_MAX)}, 2, NULL, 0);
    out(g, sl), out(g, pr), out(g, all), out(g, none), out(g, tri);
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 5);
    const char *src = o->sources[0];
    /* Elements 9, 7, 5, 3, 1: a negative stride. */
    expect_src(src, "k0_slice(const float *p0, float *p1)");
    expect_src(src, "p1[i] = p0[9LL + c0 * -2LL];\n");
    /* Reflect by 3 at the front of the 8 elements kept by the -2 crop: period 14. */
    expect_src(src, "k1_pad(const float *p0, float *p1)");
    expect_src(src, "long long j1 = c0 - 3LL;\n");
    expect_src(src, "j1 = (j1 % 14LL + 14LL) % 14LL;\n");
    expect_src(src, "if (j1 >= 8LL) j1 = 14LL - j1;\n");
    expect_src(src, "s += (j1 + 0LL) * 1LL;\n");
    /* Trilu keeping everything (a copy), nothing (a memset), and an upper one with k clamped
     * to the 4 columns: a kernel that keeps nothing is a memset too. */
    expect_copy(o, 2, m, 0, all, 0, 12);
    step(o, 3, AMPC_RT_STEP_MEMSET);
    step(o, 4, AMPC_RT_STEP_MEMSET);
    cr_assert_eq(o->plan.steps[4].memset.dst.offset, tri->mem_offset);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_move, generator_golden) {
    ampc_graph *g = ampc_graph_create("gen");
    ampc_value *r = ampc_op(
        g, "Range",
        (ampc_value *[]){ampc_scalar_i64(g, -5), ampc_scalar_i64(g, 69995), ampc_scalar_i64(g, 1)},
        3, NULL, 0);
    const int64_t shp[2] = {300, 300};
    const uint16_t h = 0x7e00; /* an f16 NaN: its bits are baked in as they are */
    ampc_attr_arg a = {.name = "value",
                       .kind = AMPC_ATTR_TENSOR,
                       .tensor = t_const(g, AMPC_DTYPE_F16, SHAPE(1), &h)};
    ampc_value *sv = i64s(g, shp, 2);
    ampc_value *c = ampc_op(g, "ConstantOfShape", &sv, 1, &a, 1);
    out(g, r), out(g, c);
    ampc_cg_output *o = generate(g, &pipe_no_fold);
    cr_assert_eq(o->plan.n_steps, 2);
    const char *src = o->sources[0];
    expect_src(src, "k0_range(long long *p0)");
    expect_src(src,
               "p0[i] = (long long)(0xfffffffffffffffbULL + (unsigned long long)i * 0x1ULL);\n");
    expect_src(src, "k1_constant_of_shape(__half *p0)");
    expect_src(src, "const __half v = ampc::from_bits<__half>(0x7e00ULL);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_index, scatter_and_topk_golden) {
    ampc_graph *g = ampc_graph_create("sc");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4, 5));
    ampc_value *ix = t_input(g, "i", AMPC_DTYPE_I64, SHAPE(6, 5)),
               *u = t_input(g, "u", AMPC_DTYPE_F32, SHAPE(6, 5));
    ampc_value *y = ampc_op(g, "ScatterElements", (ampc_value *[]){x, ix, u}, 3,
                            (ampc_attr_arg[]){AMPC_ATTR_S("reduction", "max")}, 1);
    ampc_value *xn = t_input(g, "xn", AMPC_DTYPE_I32, SHAPE(4, 3));
    ampc_value *in = t_input(g, "in", AMPC_DTYPE_I64, SHAPE(7, 1)),
               *un = t_input(g, "un", AMPC_DTYPE_I32, SHAPE(7, 3));
    ampc_value *yn = ampc_op(g, "ScatterND", (ampc_value *[]){xn, in, un}, 3,
                             (ampc_attr_arg[]){AMPC_ATTR_S("reduction", "add")}, 1);
    ampc_value *xt = t_input(g, "xt", AMPC_DTYPE_F16, SHAPE(3, 5000)), *tk[2];
    const int64_t k = 9;
    cr_assert_eq(ampc_op_multi(g, "TopK", (ampc_value *[]){xt, ampc_const_i64s(g, &k, 1)}, 2, NULL,
                               0, tk, 2),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    out(g, y), out(g, yn), out(g, tk[0]), out(g, tk[1]);
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 5);
    const char *src = o->sources[0];
    /* ScatterElements: the copy, then 5 lines (one per column) applied in row order. */
    expect_copy(o, 0, x, 0, y, 0, 80);
    step(o, 1, AMPC_RT_STEP_KERNEL);
    expect_src(src, "k0_scatter_elements(const long long *p0, const float *p1, float *p2)");
    expect_src(src, "i < 5LL;");
    expect_src(src, "const long long bu = 0LL + c0 * 1LL, by = 0LL + c0 * 1LL;\n");
    expect_src(src, "for (long long j = 0; j < 6LL; j++) {\n");
    expect_src(src, "const long long at = bu + j * 5LL;\n");
    expect_src(src, "if (v1 >= 0 && v1 < 4LL) ampc::combine<3>(p2, by + v1 * 5LL, p1[at]);\n");
    /* ScatterND: one thread per element of a row of 3, looping the 7 tuples in order. */
    expect_copy(o, 2, xn, 0, yn, 0, 48);
    expect_src(src, "k1_scatter_nd(const long long *p0, const int *p1, int *p2)");
    expect_src(src, "for (long long t = 0; t < 7LL; t++) {\n");
    expect_src(src, "long long v0 = ampc::to_index(p0[t * 1LL + 0]);\n");
    expect_src(src, "off += v0 * 3LL;\n");
    expect_src(src, "if (in) ampc::combine<1>(p2, off + i, p1[t * 3LL + i]);\n");
    /* TopK over rows of 5000 f16 entries: f32 keys, a 4096-entry tile streamed in halves, one
     * block of 256 per row, 16 KiB of keys and 16 KiB of positions. */
    const ampc_rt_step *t = step(o, 4, AMPC_RT_STEP_KERNEL);
    cr_assert(t->kernel.grid[0] == 3 && t->kernel.block[0] == 256 && t->kernel.smem == 32768,
              "grid %u block %u smem %u", t->kernel.grid[0], t->kernel.block[0], t->kernel.smem);
    expect_src(src, "k2_top_k(const __half *p0, __half *p1, long long *p2)");
    expect_src(src, "int *pos = (int *)(smem + 16384);\n");
    expect_src(
        src,
        "ampc::topk_line<__half, float>(p0, o * 5000LL + w, 1LL, 5000LL, p1, p2, o * 9LL + w, 1LL, "
        "9LL, true, 4096, key, pos);\n");
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_move, empty_tensors_emit_no_step) {
    ampc_graph *g = ampc_graph_create("empty");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 5)),
               *x2 = t_input(g, "x2", AMPC_DTYPE_F32, SHAPE(3, 5));
    const int64_t p10[2] = {1, 0}, reps[2] = {0, 2};
    out(g, ampc_transpose(g, x, p10, 2));
    out(g, ampc_op(g, "Tile", (ampc_value *[]){x2, i64s(g, reps, 2)}, 2, NULL, 0));
    ampc_value *ix = t_input(g, "i", AMPC_DTYPE_I64, SHAPE(0));
    out(g, ampc_op(g, "Gather", (ampc_value *[]){x2, ix}, 2, NULL, 0));
    ampc_value *tk[2];
    const int64_t k0 = 0;
    cr_assert_eq(ampc_op_multi(g, "TopK", (ampc_value *[]){x2, ampc_const_i64s(g, &k0, 1)}, 2, NULL,
                               0, tk, 2),
                 AMPC_OK);
    out(g, tk[0]), out(g, tk[1]);
    /* A concat with an empty part is a copy of the other. */
    ampc_value *cat = ampc_concat(g, (ampc_value *[]){x, x2}, 2, 0);
    out(g, cat);
    ampc_cg_output *o = generate(g, &pipe_default);
    cr_assert_eq(o->plan.n_steps, 1);
    expect_copy(o, 0, x2, 0, cat, 0, 60);
    cr_assert_eq(o->n_kernels, 0);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

Test(lower_index, constant_indices_out_of_range_fail_at_compile_time) {
    ampc_graph *g = ampc_graph_create("oor");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(5, 4));
    const int64_t idx[3] = {0, -5, 5};
    ampc_value *ix = t_const_i64(g, SHAPE(3), idx);
    out(g, ampc_op(g, "Gather", (ampc_value *[]){x, ix}, 2, NULL, 0));
    ampc_module *m = NULL;
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = ""};
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_E_EVAL);
    cr_assert_null(m);
    char want[256];
    snprintf(want, sizeof want,
             "node 0 (Gather 'Gather_0'): index 5 (element 2 of input 1 '%s') is out of "
             "range for axis 0 of input 0 'x', which has 5 entries (valid: -5 to 4)",
             ampc_value_name(ix));
    t_expect_diag(g, want);
    ampc_graph_destroy(g);
}

Test(lower_index, unsupported_ops_name_the_node) {
    ampc_graph *g = ampc_graph_create("t");
    /* a 1-D DeformConv: a GPU build runs only 2-D ones (passes/onnx_deform_conv.c) */
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 1, 3));
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(1, 1, 2));
    ampc_value *off = t_input(g, "off", AMPC_DTYPE_F32, SHAPE(1, 2, 2));
    ampc_output(g, ampc_op(g, "DeformConv", (ampc_value *[]){x, w, off}, 3, NULL, 0), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_module *m = NULL;
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = ""};
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_E_UNSUPPORTED);
    cr_assert_null(m);
    t_expect_diag(g, "node 0 (DeformConv 'DeformConv_0'): a DeformConv over other than 2 spatial "
                     "dims has no GPU lowering yet");
    ampc_graph_destroy(g);
}

Test(lower_move, plans_pass_the_runtime_check) {
    /* Copies of sub-ranges (Concat / Split parts) and every launch satisfy the runtime's static
     * plan rules. */
    static const build_fn builds[5] = {build_views, build_fills, build_gathers, build_scatters,
                                       build_topk};
    for (int32_t b = 0; b < 5; b++) {
        ampc_graph *g = ampc_graph_create("chk");
        builds[b](g, AMPC_DTYPE_F16);
        cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
        ampc_cg_output *o = generate(g, &pipe_default);
        ampc_rt_image *img = calloc((size_t)o->n_units, sizeof *img);
        for (int32_t u = 0; u < o->n_units; u++)
            img[u] = (ampc_rt_image){u, AMPC_RT_IMAGE_PTX, 80, "", 1};
        o->plan.images = img;
        o->plan.n_images = o->n_units;
        char *err = NULL;
        ampc_status st = ampc_rt_plan_check(&o->plan, &err);
        cr_assert_eq(st, AMPC_OK, "builder %d: %s", b, err ? err : "");
        free(err);
        free(img);
        ampc_cg_output_free(o);
        ampc_graph_destroy(g);
    }
}

/* ---- on the GPU: every variant against the reference evaluator ------------------------------- */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random contents by input name: "ix<N>_*" integers in [-N, N), "nn<N>_*" in [0, N]; other
 * floats uniform in [-2, 2], integers in [-5, 5] ([0, 10] unsigned), bools 0 / 1. */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    long bound = 0;
    bool nonneg = !strncmp(name, "nn", 2), index = nonneg || !strncmp(name, "ix", 2);
    if (index) bound = strtol(name + 2, NULL, 10);
    int64_t n = ampc_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(rng_next(seed) >> 11) / 9007199254740992.0;
        if (index) {
            int64_t v = nonneg ? (int64_t)(u * (double)(bound + 1))
                               : (int64_t)(u * (double)(2 * bound)) - bound;
            ampc_ref_store_i64(t->data, t->dtype, i, v);
        } else if (ampc_dtype_is_float(t->dtype)) {
            ampc_ref_store_f64(t->data, t->dtype, i, -2 + 4 * u);
        } else if (t->dtype == AMPC_DTYPE_BOOL) {
            ampc_ref_store_i64(t->data, t->dtype, i, u < 0.5);
        } else {
            int64_t v = (int64_t)(u * 11); /* 0..10 */
            if (ampc_dtype_is_signed(t->dtype)) v -= 5;
            ampc_ref_store_i64(t->data, t->dtype, i, v);
        }
    }
}

static void tolerance(ampc_dtype t, double *rtol, double *atol) {
    switch (t) {
    case AMPC_DTYPE_F64: *rtol = 1e-12, *atol = 1e-12; break;
    case AMPC_DTYPE_F32: *rtol = 1e-5, *atol = 1e-6; break;
    case AMPC_DTYPE_F16: *rtol = 1e-3, *atol = 1e-3; break;
    case AMPC_DTYPE_BF16: *rtol = 8e-3, *atol = 8e-3; break;
    default: *rtol = 0, *atol = 0; break; /* exact */
    }
}

/* Runs the graph of build(t) on the GPU and on the reference evaluator with the same random
 * inputs and compares every output; skips the test when there is no GPU. */
static void on_gpu(build_fn build, ampc_dtype t, const ampc_pipeline_options *po) {
    ampc_graph *g = ampc_graph_create("gpu");
    build(g, t);
    t_gpu_check c = {.fill = fill, .seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)t,
                     .tolerance = tolerance, .pipeline = po, .what = ampc_dtype_name(t)};
    t_gpu_vs_reference(g, &c);
}

Test(lower_move_gpu, views) {
    for (int32_t i = 0; i < 6; i++) on_gpu(build_views, width_types[i], &pipe_default);
}

Test(lower_move_gpu, fills) {
    for (int32_t i = 0; i < 6; i++) on_gpu(build_fills, width_types[i], &pipe_default);
}

Test(lower_move_gpu, generators) {
    static const ampc_dtype ts[7] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                                     AMPC_DTYPE_F64, AMPC_DTYPE_I64, AMPC_DTYPE_I32,
                                     AMPC_DTYPE_BOOL};
    for (int32_t i = 0; i < 7; i++) on_gpu(build_generators, ts[i], &pipe_no_fold);
}

Test(lower_index_gpu, gathers) {
    for (int32_t i = 0; i < 6; i++) on_gpu(build_gathers, width_types[i], &pipe_default);
}

Test(lower_index_gpu, scatters) {
    for (int32_t i = 0; i < 13; i++) on_gpu(build_scatters, every_type[i], &pipe_default);
}

Test(lower_index_gpu, topk) {
    static const ampc_dtype num[7] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                                      AMPC_DTYPE_F64, AMPC_DTYPE_I64, AMPC_DTYPE_I32,
                                      AMPC_DTYPE_U8};
    for (int32_t i = 0; i < 7; i++) on_gpu(build_topk, num[i], &pipe_default);
}
