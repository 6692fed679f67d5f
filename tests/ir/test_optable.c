/*
 * test_optable.c — the op table is well formed: every row has an inference and a reference
 * function, consistent arity, compile-time-input bits within its inputs, a unique ONNX name that
 * lookup finds, and a sane opset range.
 */
#include "support.h"

#include <string.h>

Test(optable, every_row_is_complete) {
    for (int i = 0; i < AMPC_OP_COUNT; i++) {
        const ampc_op_info *op = ampc_op_get((ampc_opcode)i);
        cr_assert(op->name && op->onnx && op->onnx[0], "row %d has no name", i);
        cr_assert(op->infer, "%s has no inference function", op->onnx);
        cr_assert(op->ref, "%s has no reference function", op->onnx);
        cr_assert(op->min_in >= 0 && (op->max_in < 0 || op->max_in >= op->min_in),
                  "%s: input arity %d..%d", op->onnx, op->min_in, op->max_in);
        cr_assert(op->min_out >= 1 && (op->max_out < 0 || op->max_out >= op->min_out),
                  "%s: output arity %d..%d", op->onnx, op->min_out, op->max_out);
        if (op->max_in >= 0 && op->max_in < 32)
            cr_assert_eq(op->const_inputs >> op->max_in, 0u,
                         "%s marks a compile-time input beyond its %d inputs", op->onnx, op->max_in);
        cr_assert(op->opset_lo >= 1 && (op->opset_hi == 0 || op->opset_hi >= op->opset_lo),
                  "%s: opset range %d..%d", op->onnx, op->opset_lo, op->opset_hi);
    }
}

Test(optable, onnx_names_are_unique_and_found) {
    for (int i = 0; i < AMPC_OP_COUNT; i++) {
        const char *name = ampc_op_get((ampc_opcode)i)->onnx;
        for (int j = i + 1; j < AMPC_OP_COUNT; j++)
            cr_assert(strcmp(name, ampc_op_get((ampc_opcode)j)->onnx),
                      "ONNX name %s appears twice", name);
        ampc_opcode found;
        cr_assert(ampc_op_from_onnx(name, &found) && found == (ampc_opcode)i, "lookup of %s", name);
    }
    ampc_opcode none;
    cr_assert_not(ampc_op_from_onnx("NoSuchOp", &none));
}

Test(optable, traits_agree_with_lowering) {
    for (int i = 0; i < AMPC_OP_COUNT; i++) {
        const ampc_op_info *op = ampc_op_get((ampc_opcode)i);
        if (op->traits & T_CONTRACT) cr_assert_eq(op->lower, LOWER_CONTRACT, "%s", op->onnx);
        if (op->traits & T_CONV) cr_assert_eq(op->lower, LOWER_CONV, "%s", op->onnx);
        if (op->traits & T_REDUCE) cr_assert_eq(op->lower, LOWER_REDUCE, "%s", op->onnx);
        if (op->traits & T_COMMUT) cr_assert(op->traits & T_ELEMWISE, "%s", op->onnx);
    }
}
