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

static int64_t clamp_dim(int64_t d, int32_t r) {
    if (d < 0) d += r;
    return d < 0 ? 0 : d > r ? r : d;
}

void ampc_shape_range(const ampc_node *n, int32_t r, int64_t *start, int64_t *end) {
    *start = clamp_dim(ampc_attr_int_or(n, "start", 0), r);
    *end = clamp_dim(ampc_attr_int_or(n, "end", r), r);
}

ampc_attr ampc_transpose_perm_attr(const int64_t *perm, int32_t r) {
    return (ampc_attr){.name = "perm", .kind = AMPC_ATTR_INTS, .n = r, .ints = (int64_t *)perm};
}
