/*
 * index.c — the index family's parameters with their ONNX defaults (index.h).
 */
#include "ir/index.h"

#include <string.h>

static int64_t int_attr(const ampc_node *n, const char *name, int64_t dflt) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_INT ? a->i : dflt;
}

static const char *string_attr(const ampc_node *n, const char *name, const char *dflt) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_STRING ? a->s : dflt;
}

ampc_index_params ampc_index_params_of(const ampc_node *n) {
    const char *red = string_attr(n, "reduction", "none");
    return (ampc_index_params){
        .reduction = !strcmp(red, "add")   ? AMPC_SCATTER_ADD
                     : !strcmp(red, "mul") ? AMPC_SCATTER_MUL
                     : !strcmp(red, "max") ? AMPC_SCATTER_MAX
                     : !strcmp(red, "min") ? AMPC_SCATTER_MIN
                                           : AMPC_SCATTER_NONE,
        .batch_dims = (int32_t)int_attr(n, "batch_dims", 0),
        .largest = int_attr(n, "largest", 1) != 0,
        .sorted = int_attr(n, "sorted", 1) != 0,
        .upper = int_attr(n, "upper", 1) != 0,
        .select_last = int_attr(n, "select_last_index", 0) != 0,
        .exclusive = int_attr(n, "exclusive", 0) != 0,
        .reverse = int_attr(n, "reverse", 0) != 0,
        .k = int_attr(n, "k", 0),
        .batch_axis = (int32_t)int_attr(n, "batch_axis", 1),
        .circular = !strcmp(string_attr(n, "mode", "linear"), "circular"),
        .center_point_box = int_attr(n, "center_point_box", 0) != 0};
}
