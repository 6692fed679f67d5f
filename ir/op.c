/*
 * op.c — the op info table, expanded from ops.def, and lookup by ONNX name.
 */
#include "ir.h"
#include "infer/infer.h"
#include "ref/ref.h"

#include <string.h>

const ampc_op_info ampc_op_table[AMPC_OP_COUNT] = {
#define OP(id, onnx, lo, hi, min_in, max_in, min_out, max_out, cin, traits, prec, infer, ref, lower)     \
    [AMPC_OP_##id] = {#id,        onnx,    lo,     hi,     min_in,     max_in,  min_out,           \
                      max_out,    cin,     traits, PREC_##prec, ampc_infer_##infer,                \
                      ampc_ref_##ref,      LOWER_##lower},
#include "ops.def"
#undef OP
};

bool ampc_op_from_onnx(const char *onnx, ampc_opcode *out) {
    for (int i = 0; i < AMPC_OP_COUNT; i++) /* ~200 rows; called once per imported node */
        if (strcmp(ampc_op_table[i].onnx, onnx) == 0) {
            *out = (ampc_opcode)i;
            return true;
        }
    return false;
}

const char *ampc_prec_why_str(ampc_prec_why why) {
    switch (why) {
    case PREC_WHY_NONE: return "none";
    case PREC_WHY_LOW: return "policy: low";
    case PREC_WHY_FOLLOW: return "policy: follows its inputs";
    case PREC_WHY_POLICY: return "policy: f32";
    case PREC_WHY_KEEP: return "keep-fp32";
    case PREC_WHY_RANGE: return "range: a constant beyond the low type";
    case PREC_WHY_TYPES: return "types: the op refuses the low type";
    case PREC_WHY_AUTO: return "auto: moved back to f32 by the error search";
    }
    return "?";
}


int64_t ampc_axis_default(ampc_opcode op) {
    switch (op) {
    case AMPC_OP_SOFTMAX:
    case AMPC_OP_LOG_SOFTMAX:
    case AMPC_OP_SAFE_SOFTMAX:
    case AMPC_OP_HARDMAX:
    case AMPC_OP_LAYER_NORM:
    case AMPC_OP_RMS_NORM:
    case AMPC_OP_LP_NORM:
    case AMPC_OP_ONE_HOT:
    case AMPC_OP_TOP_K: return -1;
    case AMPC_OP_FLATTEN:
    case AMPC_OP_QUANTIZE_LINEAR:
    case AMPC_OP_DEQUANTIZE_LINEAR: return 1;
    case AMPC_OP_TENSOR_SCATTER: return -2;
    default: return 0;
    }
}

const char *ampc_op_reference_why(const ampc_node *n) {
    if (n->op == AMPC_OP_ATTENTION) /* passes/onnx_attention.c takes every other form */
        return "an Attention whose causal or window rules span more than 2^24 (query, key) "
               "pairs has no GPU lowering yet (a GPU build writes those rules as a constant mask "
               "of that size)";
    if (n->op == AMPC_OP_IF || n->op == AMPC_OP_LOOP || n->op == AMPC_OP_SCAN)
        return "control flow that a GPU build cannot write into its plan: it unrolls a Loop of a "
               "constant trip count whose stop does not depend on data, a Scan and an If whose "
               "bodies hold no control flow or random op (up to 4096 copied nodes), and runs a "
               "Loop without scan outputs whose body holds none again while it goes on; this one "
               "is neither";
    if (n->op == AMPC_OP_DEFORM_CONV && n->inputs[0]->shape.rank != 4) /* onnx_deform_conv.c */
        return "a DeformConv over other than 2 spatial dims has no GPU lowering yet (a GPU build "
               "runs a 2-D one as GridSample and MatMul)";
    return NULL;
}

ampc_attr ampc_axis_attr_make(int64_t a) {
    return (ampc_attr){.name = "axis", .kind = AMPC_ATTR_INT, .i = a};
}

int64_t ampc_axis_attr(const ampc_node *n) {
    return ampc_attr_int_or(n, "axis", ampc_axis_default(n->op));
}

int32_t ampc_axis_of(const ampc_node *n, int32_t rank) {
    const int64_t a = ampc_axis_attr(n);
    return (int32_t)(a < 0 ? a + rank : a);
}

bool ampc_axis_given(const ampc_node *n) { return ampc_ir_attr_find(n, "axis") != NULL; }

int64_t ampc_node_rank(const ampc_node *n) { return ampc_attr_int_or(n, AMPC_ATTR_RANK, -1); }

int64_t ampc_node_peer_from(const ampc_node *n) {
    return ampc_attr_int_or(n, AMPC_ATTR_PEER_FROM, -1);
}

bool ampc_node_sparse24(const ampc_node *n) {
    return ampc_attr_int_or(n, AMPC_ATTR_SPARSE24, 0) != 0;
}
