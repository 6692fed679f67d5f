/*
 * movement.c — the movement family's parameters (movement.h).
 */
#include "ir/movement.h"

#include <string.h>

bool ampc_transpose_perm(const ampc_node *t, int32_t r, int64_t *perm) {
    const ampc_attr *a = ampc_ir_attr_find(t, "perm");
    if (!a) {
        for (int32_t i = 0; i < r; i++) perm[i] = r - 1 - i;
        return true;
    }
    if (a->kind != AMPC_ATTR_INTS || a->n != r) return false;
    for (int32_t i = 0; i < r; i++) perm[i] = a->ints[i] < 0 ? a->ints[i] + r : a->ints[i];
    return true;
}

ampc_space_depth_params ampc_space_depth_params_of(const ampc_node *n) {
    return (ampc_space_depth_params){
        .blocksize = ampc_attr_int_or(n, "blocksize", 1),
        .crd = !strcmp(ampc_attr_string_or(n, "mode", "DCR"), "CRD")};
}

const void *ampc_constant_fill(const ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, "value");
    return a && a->kind == AMPC_ATTR_TENSOR && a->tensor ? a->tensor->data : NULL;
}
