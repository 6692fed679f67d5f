/*
 * test_optable.c — the op table is well formed: every row has an inference and a reference
 * function, consistent arity, compile-time-input bits within its inputs, a unique ONNX name that
 * lookup finds, and a sane opset range.
 */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
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
        if (op->traits & T_CONTRACT)
            cr_assert(op->lower == LOWER_CONTRACT || op->lower == LOWER_REFERENCE, "%s", op->onnx);
        if (op->traits & T_CONV) cr_assert_eq(op->lower, LOWER_CONV, "%s", op->onnx);
        if (op->traits & T_REDUCE) cr_assert_eq(op->lower, LOWER_REDUCE, "%s", op->onnx);
        if (op->traits & T_COMMUT) cr_assert(op->traits & T_ELEMWISE, "%s", op->onnx);
    }
}

/* The ops named in backquotes in the items of `list` (from its first "- " line to the next
 * heading), each checked to be reference-only; returns their count. */
static int listed_reference_ops(const char *list) {
    const char *end = strstr(list + 2, "\n## "), *p = strstr(list, "\n- ");
    cr_assert_not_null(p, "the list has items");
    int listed = 0;
    for (p = strchr(p, '`'); p && (!end || p < end); p = strchr(p, '`')) {
        const char *q = strchr(p + 1, '`');
        cr_assert_not_null(q);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(q - p - 1), p + 1);
        ampc_opcode op;
        cr_assert(ampc_op_from_onnx(name, &op), "the list names '%s', not an op", name);
        ampc_lower_kind k = ampc_op_get(op)->lower;
        cr_assert(k == LOWER_REFERENCE, "the list names %s, which has a GPU lowering", name);
        listed++;
        p = q + 1;
    }
    return listed;
}

/* The reference-only list of docs/adding-an-op.md is the op table's REFERENCE rows, no more and
 * no fewer. */
Test(optable, the_reference_only_list_is_the_documented_one) {
    char *doc = t_read_text(AMPC_SOURCE_DIR "/docs/adding-an-op.md");
    const char *list = strstr(doc, "## Ops without a GPU lowering");
    cr_assert_not_null(list, "docs/adding-an-op.md lists the reference-only ops");
    int n = 0;
    for (int i = 0; i < AMPC_OP_COUNT; i++) {
        const ampc_op_info *op = ampc_op_get((ampc_opcode)i);
        if (op->lower != LOWER_REFERENCE) continue;
        char item[80];
        snprintf(item, sizeof item, "`%s`", op->onnx);
        cr_assert(strstr(list, item), "%s is reference-only but not in docs/adding-an-op.md's list",
                  op->onnx);
        n++;
    }
    cr_assert_gt(n, 0);
    cr_assert_eq(listed_reference_ops(list), n, "the list and the table differ in size");
    free(doc);
}
