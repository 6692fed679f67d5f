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

