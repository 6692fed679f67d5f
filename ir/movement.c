/*
 * movement.c — Transpose's permutation (movement.h).
 */
#include "ir/movement.h"

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
