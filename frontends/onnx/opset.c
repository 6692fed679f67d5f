/*
 * opset.c — per-version mapping of ONNX nodes onto the op table's form.
 *
 * The IR implements each op in the form of its newest opset (attributes that later became inputs
 * are inputs, newer defaults apply). A model built against an older opset is rewritten here, node
 * by node, before the node is built:
 *
 *   1. Attributes that later became inputs become constant inputs (attr_rules): the `axes` of the
 *      reductions (opset < 13 for ReduceSum, < 18 for the others), Squeeze/Unsqueeze (< 13),
 *      Split's `split` (< 13), Clip's min/max (< 11), Pad's pads and value (< 11), Slice's starts,
 *      ends and axes (< 10), TopK's k (< 10), Dropout's ratio (< 12), Reshape's shape (< 5),
 *      Upsample's scales (< 9), DFT's axis (< 20; DFT-17's default axis is 1, the newest -2).
 *   2. Attributes that carried no semantics are dropped: consumed_inputs (< 6), is_test (< 7),
 *      BatchNormalization's spatial=1 (< 9), Gemm's broadcast (< 7).
 *   3. Semantics that changed are re-expressed with other ops: legacy broadcasting of binary ops
 *      (opset < 7, `broadcast`/`axis`: the second input is reshaped so numpy rules give the same
 *      result), Softmax/LogSoftmax/Hardmax before opset 13 (the input is coerced to 2-D at `axis`,
 *      default 1: Flatten, the op on axis 1, Reshape back), Split before 18 (num_outputs),
 *      Concat before 4 (axis default 1), Cast-1's string `to`, Resize-10 as the newest Resize
 *      (asymmetric coordinates, floor rounding for nearest), PRelu before 7 (a
 *      slope [C] applies per channel: reshaped to [C,1,...]), Scan-8 (a batch dim: one Scan of
 *      the newest form per batch entry, sharing the body; sequence_lens unsupported),
 *      GroupNormalization before 21 (scale and bias per group [G] become per channel [C]),
 *      RoiAlign before 16 (its only coordinate mode was output_half_pixel), LpPool-1 and
 *      GlobalLpPool-1 (a float p).
 *
 *   4. What exporters write that the standard's type constraints exclude but onnxruntime runs:
 *      LayerNormalization whose Scale and B are another float type than X (torch.onnx.export of
 *      an fp16 model whose attention it computed in fp32 writes an f32 X with f16 Scale and B):
 *      Scale and B are cast to X's type, the type the output has.
 *
 * Which ops and opsets the importer takes is the op table's opset_lo/opset_hi, extended downwards
 * by op_floors where a rewrite here covers the older forms. Ops that name a different table row
 * (Scatter -> ScatterElements) are looked up by name at run time, so a row
 * that is not in the table yet simply leaves the op unsupported.
 */
#include "onnx_internal.h"

#include "ir/ref/ref.h"
#include "ir/subgraph.h"

#include <stdlib.h>
#include <string.h>

/* ---- which opsets are taken ----------------------------------------------------------------- */

/* Ops accepted below the table's opset_lo, down to `floor`, thanks to the rewrites in this file
 * (the forms in between differ only in what the rewrites cover). */
static const struct {
    const char *onnx;
    int16_t floor;
} op_floors[] = {
    /* legacy broadcast attributes (opset < 7) and consumed_inputs (< 6) */
    {"Add", 1}, {"Sub", 1}, {"Mul", 1}, {"Div", 1}, {"Pow", 1}, {"And", 1}, {"Or", 1},
    {"Xor", 1}, {"Equal", 1}, {"Less", 1}, {"Greater", 1},
    /* consumed_inputs only (opset < 6) */
    {"Abs", 1}, {"Neg", 1}, {"Reciprocal", 1}, {"Sqrt", 1}, {"Exp", 1}, {"Log", 1},
    {"Relu", 1}, {"Sigmoid", 1}, {"Tanh", 1}, {"Floor", 1}, {"Ceil", 1},
    {"LeakyRelu", 1}, {"Elu", 1}, {"Selu", 1}, {"PRelu", 1}, {"HardSigmoid", 1},
    /* no broadcasting before 8: a subset of the newest form */
    {"Max", 1}, {"Min", 1}, {"Sum", 1}, {"Mean", 1},
    /* attributes that became inputs, or semantics re-expressed here */
    {"Clip", 1}, {"Pad", 1}, {"Slice", 1}, {"Reshape", 1}, {"TopK", 1}, {"Dropout", 1},
    {"BatchNormalization", 1}, {"Gemm", 1}, {"Concat", 1}, {"Cast", 1}, {"Split", 2},
    {"Softmax", 1}, {"LogSoftmax", 1}, {"Hardmax", 1}, {"Resize", 10}, {"Scan", 8},
    {"GroupNormalization", 18}, {"RoiAlign", 10}, {"LpPool", 1}, {"GlobalLpPool", 1},
    /* forms that only gained types, optional attributes or outputs (defaults keep the old
     * meaning) */
    {"MaxPool", 1}, {"AveragePool", 1}, {"MatMul", 1}, {"ArgMax", 1}, {"ArgMin", 1},
    {"InstanceNormalization", 1}, {"DepthToSpace", 1}, {"SpaceToDepth", 1}, {"Flatten", 1},
    {"Transpose", 1}, {"Gather", 1}, {"Identity", 1}, {"Shape", 1}, {"Size", 1},
};

/* ONNX ops that the importer expresses with another table row: (ONNX name, row's ONNX name). */
static const struct {
    const char *onnx, *row;
    int16_t lo, hi; /* the ONNX op's own opsets (hi: last opset that has it) */
} op_aliases[] = {
    {"Scatter", "ScatterElements", 9, 11}, /* deprecated in 11 */
};

/* The oldest opset taken for a row: min(opset_lo, its op_floors entry). */
static int32_t floor_of(const char *onnx, int32_t lo) {
    for (int i = 0; i < AMPC_ARRAY_LEN(op_floors); i++)
        if (!strcmp(op_floors[i].onnx, onnx)) return AMPC_MIN(lo, op_floors[i].floor);
    return lo;
}

int32_t ampc_onnx_opset_floor(ampc_opcode op) {
    const ampc_op_info *info = ampc_op_get(op);
    return floor_of(info->onnx, info->opset_lo);
}

bool ampc_onnx_op_lookup(const char *op_type, int64_t opset, ampc_opcode *op, ampc_strbuf *why) {
    for (int i = 0; i < AMPC_ARRAY_LEN(op_aliases); i++) {
        if (strcmp(op_aliases[i].onnx, op_type)) continue;
        if (opset < op_aliases[i].lo || opset > op_aliases[i].hi) {
            ampc_sb_printf(why, "%s exists in opsets %d to %d only, the model imports opset %lld",
                           op_type, op_aliases[i].lo, op_aliases[i].hi, (long long)opset);
            return false;
        }
        if (!ampc_op_from_onnx(op_aliases[i].row, op)) {
            ampc_sb_printf(why, "op not in ampc's op table (it maps to %s, which is not either)",
                           op_aliases[i].row);
            return false;
        }
        return true;
    }
    if (!ampc_op_from_onnx(op_type, op) || (ampc_op_get(*op)->traits & T_INTERNAL)) {
        ampc_sb_puts(why, "op not in ampc's op table");
        return false;
    }
    const ampc_op_info *info = ampc_op_get(*op);
    int32_t lo = floor_of(info->onnx, info->opset_lo);
    if (opset < lo) {
        char hi[16] = "the newest";
        if (info->opset_hi) snprintf(hi, sizeof hi, "%d", info->opset_hi);
        ampc_sb_printf(why, "opset %lld is older than ampc supports for %s (opsets %d to %s)",
                       (long long)opset, op_type, lo, hi);
        return false;
    }
    if (info->opset_hi && opset > info->opset_hi) {
        ampc_sb_printf(why, "opset %lld is newer than ampc supports for %s (opsets %d to %d)",
                       (long long)opset, op_type, lo, info->opset_hi);
        return false;
    }
    return true;
}

/* ---- attribute combinations ----------------------------------------------------------------- */

static const Onnx__AttributeProto *proto_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i] && n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
            return n->attribute[i];
    return NULL;
}

/* Cast-1 names its target type with a string. */
static int32_t cast_type_code(const char *s) {
    static const char *const names[] = {"", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32",
                                        "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32",
                                        "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    for (int i = 1; i < AMPC_ARRAY_LEN(names); i++)
        if (!strcmp(s, names[i])) return i;
    return 0;
}

bool ampc_onnx_node_supported(const Onnx__NodeProto *n, ampc_opcode op, int64_t opset,
                              ampc_strbuf *why) {
    const char *row = ampc_op_get(op)->onnx;
    const Onnx__AttributeProto *a;
    if (!strcmp(row, "BatchNormalization") && opset < 9 && (a = proto_attr(n, "spatial")) &&
        a->i != 1) {
        ampc_sb_printf(why, "attribute spatial=%lld (opset %lld) is not supported: only the "
                       "per-channel form (spatial=1) is", (long long)a->i, (long long)opset);
        return false;
    }
    /* Before opset 14 training mode had up to 5 outputs (the row takes 3, for the message). */
    if (!strcmp(row, "BatchNormalization") && n->n_output > 3) {
        ampc_sb_printf(why, "training mode (%zu outputs: running and saved statistics) is not "
                       "supported: ampc compiles inference graphs", n->n_output);
        return false;
    }
    if (!strcmp(row, "Cast") && opset < 6 && (a = proto_attr(n, "to")) &&
        a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) {
        char buf[64] = "";
        size_t k = AMPC_MIN(a->s.len, sizeof buf - 1);
        if (k) memcpy(buf, a->s.data, k);
        buf[k] = 0;
        if (!cast_type_code(buf)) {
            ampc_sb_printf(why, "attribute to='%s' names no ONNX element type", buf);
            return false;
        }
    }
    if (!strcmp(row, "Scan") && opset < 9 && n->n_input > 0 && n->input[0] && *n->input[0]) {
        ampc_sb_puts(why, "Scan-8's sequence_lens (input 0) is not supported: only full-length "
                     "sequences are (leave the input empty)");
        return false;
    }
    if (n->op_type && !strcmp(n->op_type, "Upsample") && (a = proto_attr(n, "mode")) &&
        a->s.len && !(a->s.len == 7 && !memcmp(a->s.data, "nearest", 7)) &&
        !(a->s.len == 6 && !memcmp(a->s.data, "linear", 6)) &&
        !(a->s.len == 8 && !memcmp(a->s.data, "bilinear", 8))) {
        ampc_sb_printf(why, "attribute mode='%.*s' is not one of nearest, linear, bilinear",
                       (int)AMPC_MIN(a->s.len, 64), (const char *)a->s.data);
        return false;
    }
    return true;
}

/* ---- helpers on the node being built -------------------------------------------------------- */

const ampc_attr *ampc_onnx_attr(const ampc_onnx_node *nd, const char *name) {
    for (int32_t i = 0; i < nd->n_attrs; i++)
        if (!strcmp(nd->attrs[i].name, name)) return &nd->attrs[i];
    return NULL;
}

void ampc_onnx_attr_remove(ampc_onnx_node *nd, const char *name) {
    for (int32_t i = 0; i < nd->n_attrs; i++)
        if (!strcmp(nd->attrs[i].name, name)) {
            memmove(&nd->attrs[i], &nd->attrs[i + 1],
                    (size_t)(nd->n_attrs - i - 1) * sizeof *nd->attrs);
            nd->n_attrs--;
            return;
        }
}

/* Sets (adds or replaces) an attribute of the node. */
static void attr_set(ampc_onnx_node *nd, ampc_attr a) {
    ampc_onnx_attr_remove(nd, a.name);
    if (nd->n_attrs == nd->cap_attrs) {
        nd->cap_attrs = nd->cap_attrs ? nd->cap_attrs * 2 : 4;
        nd->attrs = ampc_xrealloc(nd->attrs, (size_t)nd->cap_attrs * sizeof *nd->attrs);
    }
    nd->attrs[nd->n_attrs++] = a;
}

void ampc_onnx_set_input(ampc_onnx_node *nd, int32_t i, ampc_value *v) {
    if (i >= nd->cap_in) {
        int32_t cap = AMPC_MAX(i + 1, nd->cap_in * 2);
        nd->in = ampc_xrealloc(nd->in, (size_t)cap * sizeof *nd->in);
        nd->cap_in = cap;
    }
    while (nd->n_in <= i) nd->in[nd->n_in++] = NULL;
    nd->in[i] = v;
}

/* Whether the node's table row is the one for ONNX op `onnx`. Rows are compared by name so that
 * this file needs no enum constant of rows other helpers may add or rename. */
static bool row_is(const ampc_onnx_node *nd, const char *onnx) {
    return !strcmp(ampc_op_get(nd->op)->onnx, onnx);
}

/* The node's ONNX op type (which differs from the row's for aliases). */
static const char *op_type(const ampc_onnx_node *nd) {
    return nd->proto && nd->proto->op_type ? nd->proto->op_type : ampc_op_get(nd->op)->onnx;
}

/* A hint for a helper value's name: "<node name or op>/<what>". */
static const char *hint(ampc_onnx_ctx *c, const ampc_onnx_node *nd, const char *what) {
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%s/%s", nd->name ? nd->name : op_type(nd), what);
    const char *s = ampc_onnx_fresh_name(c, sb.data);
    ampc_sb_free(&sb);
    return s;
}

/* ---- 1. attributes that became inputs ------------------------------------------------------- */

typedef enum {
    AS_INTS,      /* ints (or one int) -> i64 [n] */
    AS_LIKE_X,    /* float -> scalar of input 0's dtype */
    AS_F32,       /* float -> f32 scalar */
    AS_FLOATS,    /* floats -> f32 [n] */
} as_kind;

static const struct {
    const char *onnx;   /* the node's ONNX op type */
    int16_t below;      /* the rule applies to opsets below this */
    const char *attr;
    int8_t input;
    as_kind kind;
} attr_rules[] = {
    {"ReduceSum", 13, "axes", 1, AS_INTS},       {"ReduceMean", 18, "axes", 1, AS_INTS},
    {"ReduceMax", 18, "axes", 1, AS_INTS},       {"ReduceMin", 18, "axes", 1, AS_INTS},
    {"ReduceProd", 18, "axes", 1, AS_INTS},      {"ReduceL1", 18, "axes", 1, AS_INTS},
    {"ReduceL2", 18, "axes", 1, AS_INTS},        {"ReduceLogSum", 18, "axes", 1, AS_INTS},
    {"ReduceLogSumExp", 18, "axes", 1, AS_INTS}, {"ReduceSumSquare", 18, "axes", 1, AS_INTS},
    {"Squeeze", 13, "axes", 1, AS_INTS},         {"Unsqueeze", 13, "axes", 1, AS_INTS},
    {"Split", 13, "split", 1, AS_INTS},          {"Reshape", 5, "shape", 1, AS_INTS},
    {"Clip", 11, "min", 1, AS_LIKE_X},           {"Clip", 11, "max", 2, AS_LIKE_X},
    {"Pad", 2, "paddings", 1, AS_INTS},          {"Pad", 11, "pads", 1, AS_INTS},
    {"Pad", 11, "value", 2, AS_LIKE_X},          {"Slice", 10, "starts", 1, AS_INTS},
    {"Slice", 10, "ends", 2, AS_INTS},           {"Slice", 10, "axes", 3, AS_INTS},
    {"TopK", 10, "k", 1, AS_INTS},               {"Dropout", 12, "ratio", 1, AS_F32},
    {"Upsample", 9, "scales", 1, AS_FLOATS},     {"DFT", 20, "axis", 2, AS_INTS},
};

/* Makes attribute a the constant input idx of the node, converted as `kind` says. */
static ampc_status attr_to_input(ampc_onnx_ctx *c, ampc_onnx_node *nd, const ampc_attr *a,
                                 int32_t idx, as_kind kind) {
    if (idx < nd->n_in && nd->in[idx])
        return ampc_onnx_fail(c, nd, AMPC_E_ATTR, "attribute '%s' (opset %lld) and input %d give "
                              "the same thing; only one may be present", a->name,
                              (long long)nd->opset, idx);
    ampc_shape s = {0};
    ampc_value *v = NULL;
    switch (kind) {
    case AS_INTS: {
        if (a->kind != AMPC_ATTR_INTS && a->kind != AMPC_ATTR_INT) goto mistyped;
        s.rank = 1;
        s.dims[0] = a->kind == AMPC_ATTR_INT ? 1 : a->n;
        v = ampc_onnx_const(c, hint(c, nd, a->name), AMPC_DTYPE_I64, &s,
                            a->kind == AMPC_ATTR_INT ? (const void *)&a->i : (const void *)a->ints);
        break;
    }
    case AS_LIKE_X:
    case AS_F32: {
        if (a->kind != AMPC_ATTR_FLOAT) goto mistyped;
        ampc_dtype dt = kind == AS_F32 || !nd->in[0] ? AMPC_DTYPE_F32 : nd->in[0]->dtype;
        uint8_t buf[8];
        ampc_ref_store_f64(buf, dt, 0, a->f);
        v = ampc_onnx_const(c, hint(c, nd, a->name), dt, &s, buf);
        break;
    }
    case AS_FLOATS:
        if (a->kind != AMPC_ATTR_FLOATS) goto mistyped;
        s.rank = 1;
        s.dims[0] = a->n;
        v = ampc_onnx_const(c, hint(c, nd, a->name), AMPC_DTYPE_F32, &s, a->floats);
        break;
    }
    if (!v) return AMPC_E_OOM;
    ampc_onnx_set_input(nd, idx, v);
    return AMPC_OK;
mistyped:
    return ampc_onnx_fail(c, nd, AMPC_E_ATTR, "attribute '%s' (opset %lld) has the wrong type for "
                          "%s", a->name, (long long)nd->opset, op_type(nd));
}

/* ---- 3. re-expressed semantics -------------------------------------------------------------- */

/* Reshapes input i of nd to its shape followed by `ones` dims of 1. */
static ampc_status append_ones(ampc_onnx_ctx *c, ampc_onnx_node *nd, int32_t i, int32_t ones) {
    ampc_value *y = nd->in[i];
    int32_t r = y->shape.rank;
    if (ones <= 0) return AMPC_OK;
    if (r + ones > AMPC_MAX_RANK)
        return ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "input %d '%s' would need rank %d; ampc "
                              "supports ranks up to %d", i, y->name, r + ones, AMPC_MAX_RANK);
    ampc_shape s = {1, {r + ones}};
    int64_t dims[AMPC_MAX_RANK];
    for (int32_t k = 0; k < r + ones; k++) dims[k] = k < r ? y->shape.dims[k] : 1;
    ampc_value *shape = ampc_onnx_const(c, hint(c, nd, "bcast_shape"), AMPC_DTYPE_I64, &s, dims);
    if (!shape) return AMPC_E_OOM;
    ampc_value *in[2] = {y, shape}, *out;
    ampc_status st = ampc_onnx_build(c, nd, AMPC_OP_RESHAPE, hint(c, nd, "bcast"), in, 2, NULL, 0,
                                     1, NULL, &out);
    if (st == AMPC_OK) nd->in[i] = out;
    return st;
}

/* Legacy broadcasting (opset < 7): with broadcast=1, input 1 is broadcast to input 0 either as a
 * suffix of its shape or aligned at `axis`. Appending ones to input 1's shape makes numpy
 * broadcasting give the same result. */
static ampc_status legacy_broadcast(ampc_onnx_ctx *c, ampc_onnx_node *nd) {
    const ampc_attr *b = ampc_onnx_attr(nd, "broadcast"), *ax = ampc_onnx_attr(nd, "axis");
    bool on = b && b->kind == AMPC_ATTR_INT && b->i == 1;
    int64_t axis = ax && ax->kind == AMPC_ATTR_INT ? ax->i : INT64_MIN;
    ampc_onnx_attr_remove(nd, "broadcast");
    ampc_onnx_attr_remove(nd, "axis");
    if (!on || axis == INT64_MIN || nd->n_in < 2 || !nd->in[0] || !nd->in[1]) return AMPC_OK;
    ampc_value *x = nd->in[0], *y = nd->in[1];
    int32_t ra = x->shape.rank, rb = y->shape.rank;
    if (axis < 0) axis += ra;
    int64_t trailing = (int64_t)ra - axis - rb;
    if (axis < 0 || axis > ra || trailing < 0)
        return ampc_onnx_fail(c, nd, AMPC_E_ATTR, "legacy broadcast (opset %lld): axis %lld does "
                              "not fit input 1 '%s' (rank %d) into input 0 '%s' (rank %d)",
                              (long long)nd->opset, (long long)(ax ? ax->i : 0), y->name, rb,
                              x->name, ra);
    return append_ones(c, nd, 1, (int32_t)trailing);
}

/* PRelu before opset 7 applies a slope of shape [C] per channel (dim 1); from 7 on the slope
 * broadcasts numpy-style (from the right), so it becomes [C, 1, ...]. */
static ampc_status prelu_channels(ampc_onnx_ctx *c, ampc_onnx_node *nd) {
    if (nd->n_in < 2 || !nd->in[0] || !nd->in[1]) return AMPC_OK;
    const ampc_value *x = nd->in[0], *slope = nd->in[1];
    if (slope->shape.rank != 1 || x->shape.rank < 3 || slope->shape.dims[0] != x->shape.dims[1] ||
        slope->shape.dims[0] == 1)
        return AMPC_OK;
    return append_ones(c, nd, 1, x->shape.rank - 2);
}

/* Softmax, LogSoftmax and Hardmax before opset 13 work on the input coerced to 2-D at `axis`
 * (default 1): [prod(dims before axis), prod(dims from axis)]. */
static ampc_status coerced_softmax(ampc_onnx_ctx *c, ampc_onnx_node *nd) {
    const ampc_attr *ax = ampc_onnx_attr(nd, "axis");
    int64_t axis = ax && ax->kind == AMPC_ATTR_INT ? ax->i : 1;
    ampc_value *x = nd->in[0];
    int32_t r = x->shape.rank;
    if (axis < -r || axis >= (r ? r : 1))
        return ampc_onnx_fail(c, nd, AMPC_E_ATTR, "attribute axis %lld is out of range for input "
                              "0 '%s' of rank %d (opset %lld)", (long long)axis, x->name, r,
                              (long long)nd->opset);
    if (axis < 0) axis += r;
    ampc_attr last = {.name = "axis", .kind = AMPC_ATTR_INT, .i = -1};
    if (axis == r - 1 || r == 0) { /* the 2-D view changes nothing */
        attr_set(nd, last);
        return ampc_onnx_build(c, nd, nd->op, nd->name, nd->in, nd->n_in, nd->attrs, nd->n_attrs,
                               nd->n_out, nd->out_names, nd->outs);
    }
    ampc_attr fa = {.name = "axis", .kind = AMPC_ATTR_INT, .i = axis};
    ampc_value *flat, *y;
    ampc_status st = ampc_onnx_build(c, nd, AMPC_OP_FLATTEN, hint(c, nd, "flatten"), &x, 1, &fa, 1,
                                     1, NULL, &flat);
    if (st != AMPC_OK) return st;
    attr_set(nd, last);
    st = ampc_onnx_build(c, nd, nd->op, nd->name, &flat, 1, nd->attrs, nd->n_attrs, 1, NULL, &y);
    if (st != AMPC_OK) return st;
    ampc_shape s = {1, {r}};
    ampc_value *shape = ampc_onnx_const(c, hint(c, nd, "shape"), AMPC_DTYPE_I64, &s, x->shape.dims);
    if (!shape) return AMPC_E_OOM;
    ampc_value *in[2] = {y, shape};
    ampc_attr az = {.name = "allowzero", .kind = AMPC_ATTR_INT, .i = 1};
    return ampc_onnx_build(c, nd, AMPC_OP_RESHAPE, hint(c, nd, "reshape"), in, 2, &az, 1, 1,
                           nd->out_names, nd->outs);
}

/* Resize-10 as the newest Resize: inputs (X, roi, scales), asymmetric coordinates, and floor
 * rounding for nearest (Upsample has a row of its own). */
static void upsample_to_resize(ampc_onnx_node *nd) {
    if (nd->n_in == 2) { /* Resize-10 gives scales as input 1; Resize's is 2 */
        ampc_value *scales = nd->in[1];
        nd->in[1] = NULL;
        ampc_onnx_set_input(nd, 2, scales);
    }
    const ampc_attr *m = ampc_onnx_attr(nd, "mode");
    if (m && m->kind == AMPC_ATTR_STRING && !strcmp(m->s, "bilinear"))
        attr_set(nd, (ampc_attr){.name = "mode", .kind = AMPC_ATTR_STRING, .s = "linear"});
    attr_set(nd, (ampc_attr){.name = "coordinate_transformation_mode", .kind = AMPC_ATTR_STRING,
                             .s = "asymmetric"});
    attr_set(nd, (ampc_attr){.name = "nearest_mode", .kind = AMPC_ATTR_STRING, .s = "floor"});
}

/* Scan-8 carries a batch dim: inputs (sequence_lens, states [B, ...], scan inputs [B, seq, ...])
 * run one independent scan per batch entry. It becomes B Scan nodes of the newest form sharing
 * the body (imported once, for one batch entry): Gather picks entry b of every state and scan
 * input, and each output's B results are stacked again (Unsqueeze, Concat along dim 0) under the
 * ONNX output's name. `directions` is the newest scan_input_directions. sequence_lens is refused
 * before (coverage): without it every sequence has the full length. */
static ampc_status scan8_per_batch(ampc_onnx_ctx *c, ampc_onnx_node *nd) {
    if (nd->n_in > 0 && nd->in[0])
        return ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "Scan-8's sequence_lens (input 0) is not "
                              "supported: only full-length sequences are");
    const ampc_attr *ka = ampc_onnx_attr(nd, AMPC_ATTR_NUM_CAPTURES);
    int32_t k = ka ? (int32_t)ka->i : 0, nx = nd->n_in - k - 1, n_out = nd->n_out;
    if (nx < 1 || !nd->in[1] || nd->in[1]->shape.rank < 1)
        return ampc_onnx_fail(c, nd, AMPC_E_INVALID_ARG, "Scan-8 needs states or scan inputs with "
                              "a batch dim after sequence_lens");
    int64_t B = nd->in[1]->shape.dims[0];
    for (int32_t j = 1; j <= nx; j++)
        if (!nd->in[j] || nd->in[j]->shape.rank < 1 || nd->in[j]->shape.dims[0] != B)
            return ampc_onnx_fail(c, nd, AMPC_E_SHAPE, "Scan-8's states and scan inputs share a "
                                  "batch dim 0: input 1 '%s' has %lld, input %d '%s' does not",
                                  nd->in[1]->name, (long long)B, j,
                                  nd->in[j] ? nd->in[j]->name : "");
    if (B < 1 || B > 4096)
        return ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "Scan-8 with a batch of %lld: ampc takes "
                              "1 to 4096 (one Scan per batch entry)", (long long)B);
    const ampc_attr *dirs = ampc_onnx_attr(nd, "directions");
    if (dirs) {
        ampc_attr d = *dirs;
        d.name = "scan_input_directions";
        ampc_onnx_attr_remove(nd, "directions");
        attr_set(nd, d);
    }
    ampc_value **parts = ampc_xcalloc((size_t)(B * n_out), sizeof *parts);
    ampc_value **in9 = ampc_xcalloc((size_t)(nx + k), sizeof *in9);
    ampc_status st = AMPC_OK;
    ampc_attr axis0 = {.name = "axis", .kind = AMPC_ATTR_INT, .i = 0};
    for (int64_t b = 0; b < B && st == AMPC_OK; b++) {
        ampc_shape scalar = {0};
        ampc_value *idx = ampc_onnx_const(c, hint(c, nd, "batch"), AMPC_DTYPE_I64, &scalar, &b);
        if (!idx) {
            st = AMPC_E_OOM;
            break;
        }
        for (int32_t j = 0; j < nx && st == AMPC_OK; j++) {
            ampc_value *gin[2] = {nd->in[1 + j], idx};
            st = ampc_onnx_build(c, nd, AMPC_OP_GATHER, hint(c, nd, "entry"), gin, 2, &axis0, 1, 1,
                                 NULL, &in9[j]);
        }
        for (int32_t i = 0; i < k; i++) in9[nx + i] = nd->in[nd->n_in - k + i];
        if (st == AMPC_OK)
            st = ampc_onnx_build(c, nd, AMPC_OP_SCAN, hint(c, nd, "scan"), in9, nx + k, nd->attrs,
                                 nd->n_attrs, n_out, NULL, parts + b * n_out);
    }
    ampc_shape one = {1, {1}};
    int64_t zero = 0;
    ampc_value *axes = st == AMPC_OK ? ampc_onnx_const(c, hint(c, nd, "axes"), AMPC_DTYPE_I64, &one,
                                                       &zero)
                                     : NULL;
    if (st == AMPC_OK && !axes) st = AMPC_E_OOM;
    for (int32_t j = 0; j < n_out && st == AMPC_OK; j++) {
        for (int64_t b = 0; b < B && st == AMPC_OK; b++) {
            ampc_value *uin[2] = {parts[b * n_out + j], axes};
            st = ampc_onnx_build(c, nd, AMPC_OP_UNSQUEEZE, hint(c, nd, "stack"), uin, 2, NULL, 0,
                                 1, B == 1 ? &nd->out_names[j] : NULL, &parts[b * n_out + j]);
        }
        if (st != AMPC_OK) break;
        if (B == 1) {
            nd->outs[j] = parts[j];
            continue;
        }
        ampc_value **col = ampc_xcalloc((size_t)B, sizeof *col);
        for (int64_t b = 0; b < B; b++) col[b] = parts[b * n_out + j];
        st = ampc_onnx_build(c, nd, AMPC_OP_CONCAT, hint(c, nd, "concat"), col, (int32_t)B, &axis0,
                             1, 1, &nd->out_names[j], &nd->outs[j]);
        free(col);
    }
    free(parts);
    free(in9);
    return st;
}

/* GroupNormalization before opset 21 takes scale and bias per group ([num_groups]); the newest
 * form takes them per channel ([C]). Repeating each group's entry C / num_groups times gives the
 * same result: directly for a constant, else Reshape [G, 1] -> Expand [G, C/G] -> Reshape [C].
 * Inputs of any other shape are left for inference to report. */
static ampc_status group_norm_per_channel(ampc_onnx_ctx *c, ampc_onnx_node *nd) {
    const ampc_attr *ga = ampc_onnx_attr(nd, "num_groups");
    if (!ga || ga->kind != AMPC_ATTR_INT || nd->n_in < 3 || !nd->in[0]) return AMPC_OK;
    const ampc_value *x = nd->in[0];
    int64_t groups = ga->i, ch = x->shape.rank >= 2 ? x->shape.dims[1] : 0;
    if (groups <= 0 || ch <= 0 || ch % groups || groups == ch) return AMPC_OK;
    int64_t rep = ch / groups;
    for (int32_t i = 1; i <= 2; i++) {
        ampc_value *v = nd->in[i];
        if (!v || v->shape.rank != 1 || v->shape.dims[0] != groups) continue;
        const char *what = i == 1 ? "scale_per_channel" : "bias_per_channel";
        if (v->data) {
            ampc_shape sc = {1, {ch}};
            size_t esz = ampc_dtype_size(v->dtype);
            unsigned char *buf = ampc_xmalloc((size_t)ch * esz);
            for (int64_t k = 0; k < ch; k++)
                memcpy(buf + (size_t)k * esz,
                       (const unsigned char *)v->data + (size_t)(k / rep) * esz, esz);
            ampc_value *nv = ampc_onnx_const(c, hint(c, nd, what), v->dtype, &sc, buf);
            free(buf);
            if (!nv) return AMPC_E_OOM;
            nd->in[i] = nv;
            continue;
        }
        ampc_shape s1 = {1, {1}}, s2 = {1, {2}};
        int64_t col[2] = {groups, 1}, wide[2] = {groups, rep};
        ampc_value *c_col = ampc_onnx_const(c, hint(c, nd, "group_column"), AMPC_DTYPE_I64, &s2,
                                            col);
        ampc_value *c_wide = ampc_onnx_const(c, hint(c, nd, "group_repeat"), AMPC_DTYPE_I64, &s2,
                                             wide);
        ampc_value *c_flat = ampc_onnx_const(c, hint(c, nd, "channels"), AMPC_DTYPE_I64, &s1, &ch);
        if (!c_col || !c_wide || !c_flat) return AMPC_E_OOM;
        ampc_value *a[2] = {v, c_col}, *t1, *t2, *t3;
        ampc_status st = ampc_onnx_build(c, nd, AMPC_OP_RESHAPE, hint(c, nd, "group_column"), a, 2,
                                         NULL, 0, 1, NULL, &t1);
        if (st != AMPC_OK) return st;
        a[0] = t1, a[1] = c_wide;
        st = ampc_onnx_build(c, nd, AMPC_OP_EXPAND, hint(c, nd, "group_repeat"), a, 2, NULL, 0, 1,
                             NULL, &t2);
        if (st != AMPC_OK) return st;
        a[0] = t2, a[1] = c_flat;
        st = ampc_onnx_build(c, nd, AMPC_OP_RESHAPE, hint(c, nd, what), a, 2, NULL, 0, 1, NULL,
                             &t3);
        if (st != AMPC_OK) return st;
        nd->in[i] = t3;
    }
    return AMPC_OK;
}

/* LpPool-1 and GlobalLpPool-1 give p as a float; from opset 2 it is an int. */
static ampc_status lp_pool_int_p(ampc_onnx_ctx *c, ampc_onnx_node *nd) {
    const ampc_attr *p = ampc_onnx_attr(nd, "p");
    if (!p || p->kind != AMPC_ATTR_FLOAT) return AMPC_OK;
    if (!(p->f >= 1 && p->f <= 1e9f && p->f == (float)(int64_t)p->f))
        return ampc_onnx_fail(c, nd, AMPC_E_UNSUPPORTED, "attribute p=%g (opset %lld) is not "
                              "supported: only whole numbers p >= 1 are", (double)p->f,
                              (long long)nd->opset);
    attr_set(nd, (ampc_attr){.name = "p", .kind = AMPC_ATTR_INT, .i = (int64_t)p->f});
    return AMPC_OK;
}

/* LayerNormalization with Scale / B of another float type than X: cast them to X's type. */
static ampc_status layer_norm_param_dtype(ampc_onnx_ctx *c, ampc_onnx_node *nd) {
    if (nd->n_in < 2 || !nd->in[0] || !ampc_dtype_is_float(nd->in[0]->dtype)) return AMPC_OK;
    ampc_dtype t = nd->in[0]->dtype;
    for (int32_t i = 1; i <= 2 && i < nd->n_in; i++) {
        ampc_value *v = nd->in[i];
        if (!v || v->dtype == t || !ampc_dtype_is_float(v->dtype)) continue;
        ampc_attr to = {.name = "to", .kind = AMPC_ATTR_INT, .i = ampc_dtype_to_onnx(t)};
        ampc_value *out;
        ampc_status st = ampc_onnx_build(c, nd, AMPC_OP_CAST,
                                         hint(c, nd, i == 1 ? "scale_cast" : "bias_cast"), &v, 1,
                                         &to, 1, 1, NULL, &out);
        if (st != AMPC_OK) return st;
        nd->in[i] = out;
    }
    return AMPC_OK;
}

/* ---- the entry ------------------------------------------------------------------------------ */

ampc_status ampc_onnx_emit(ampc_onnx_ctx *c, ampc_onnx_node *nd) {
    const char *ot = op_type(nd);
    const int64_t opset = nd->opset;
    ampc_status st;

    /* 2. attributes without semantics in the newest form */
    if (opset < 6) ampc_onnx_attr_remove(nd, "consumed_inputs");
    if (opset < 7) ampc_onnx_attr_remove(nd, "is_test");
    if (row_is(nd, "BatchNormalization") && opset < 9) ampc_onnx_attr_remove(nd, "spatial");
    if (row_is(nd, "Gemm") && opset < 7) ampc_onnx_attr_remove(nd, "broadcast");

    /* DFT-17's axis attribute defaults to 1; as an input it defaults to -2: make it explicit. */
    if (row_is(nd, "DFT") && opset < 20 && !ampc_onnx_attr(nd, "axis"))
        attr_set(nd, (ampc_attr){.name = "axis", .kind = AMPC_ATTR_INT, .i = 1});

    /* 1. attributes that became inputs */
    for (int i = 0; i < AMPC_ARRAY_LEN(attr_rules); i++) {
        if (strcmp(attr_rules[i].onnx, ot) || opset >= attr_rules[i].below) continue;
        const ampc_attr *a = ampc_onnx_attr(nd, attr_rules[i].attr);
        if (!a) continue;
        st = attr_to_input(c, nd, a, attr_rules[i].input, attr_rules[i].kind);
        if (st != AMPC_OK) return st;
        ampc_onnx_attr_remove(nd, attr_rules[i].attr);
    }

    /* 3. semantics that changed */
    static const char *const legacy_bcast[] = {"Add", "Sub", "Mul", "Div", "Pow", "And",
                                               "Or", "Xor", "Equal", "Less", "Greater"};
    if (opset < 7)
        for (int i = 0; i < AMPC_ARRAY_LEN(legacy_bcast); i++)
            if (!strcmp(ot, legacy_bcast[i]) && (st = legacy_broadcast(c, nd)) != AMPC_OK)
                return st;
    if (row_is(nd, "PRelu") && opset < 7 && (st = prelu_channels(c, nd)) != AMPC_OK) return st;
    if (row_is(nd, "Concat") && opset < 4 && !ampc_onnx_attr(nd, "axis"))
        attr_set(nd, (ampc_attr){.name = "axis", .kind = AMPC_ATTR_INT, .i = 1});
    if (row_is(nd, "Cast") && opset < 6) {
        const ampc_attr *to = ampc_onnx_attr(nd, "to");
        if (to && to->kind == AMPC_ATTR_STRING)
            attr_set(nd,
                     (ampc_attr){.name = "to", .kind = AMPC_ATTR_INT, .i = cast_type_code(to->s)});
    }
    if (row_is(nd, "Split") && opset < 18 && (nd->n_in < 2 || !nd->in[1]) &&
        !ampc_onnx_attr(nd, "num_outputs"))
        attr_set(nd, (ampc_attr){.name = "num_outputs", .kind = AMPC_ATTR_INT, .i = nd->n_out});
    if (!strcmp(ot, "Resize") && opset < 11) upsample_to_resize(nd);
    if (row_is(nd, "GroupNormalization") && opset < 21 &&
        (st = group_norm_per_channel(c, nd)) != AMPC_OK)
        return st;
    if (row_is(nd, "RoiAlign") && opset < 16)
        attr_set(nd, (ampc_attr){.name = "coordinate_transformation_mode",
                                 .kind = AMPC_ATTR_STRING, .s = "output_half_pixel"});
    if ((row_is(nd, "LpPool") || row_is(nd, "GlobalLpPool")) && opset < 2 &&
        (st = lp_pool_int_p(c, nd)) != AMPC_OK)
        return st;
    if (row_is(nd, "Scan") && opset < 9) return scan8_per_batch(c, nd);

    /* 4. exporters' liberties */
    if (row_is(nd, "LayerNormalization") && (st = layer_norm_param_dtype(c, nd)) != AMPC_OK)
        return st;
    if ((row_is(nd, "Softmax") || row_is(nd, "LogSoftmax") || row_is(nd, "Hardmax")) &&
        opset < 13 && nd->n_in >= 1 && nd->in[0] && nd->n_out == 1) /* else: the arity error */
        return coerced_softmax(c, nd);

    return ampc_onnx_build(c, nd, nd->op, nd->name, nd->in, nd->n_in, nd->attrs, nd->n_attrs,
                           nd->n_out, nd->out_names, nd->outs);
}
