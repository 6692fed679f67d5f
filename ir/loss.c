/*
 * loss.c — the losses' parameters with their ONNX defaults (loss.h).
 */
#include "ir/loss.h"

#include <string.h>

ampc_loss_params ampc_loss_params_of(const ampc_node *n) {
    const ampc_attr *r = ampc_ir_attr_find(n, "reduction");
    const ampc_attr *ii = ampc_ir_attr_find(n, "ignore_index");
    const char *red = r && r->kind == AMPC_ATTR_STRING ? r->s : "mean";
    ampc_loss_params p = {.reduction = !strcmp(red, "none")  ? AMPC_LOSS_NONE
                                       : !strcmp(red, "sum") ? AMPC_LOSS_SUM
                                                             : AMPC_LOSS_MEAN,
                          .has_ignore = ii && ii->kind == AMPC_ATTR_INT};
    p.ignore = p.has_ignore ? ii->i : 0;
    return p;
}
