/*
 * loss.c — inference for the losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
 * (opset 13 semantics, the same since opset 12).
 *
 * Input 0 (NLL: log-probabilities, SCE: scores) is float [N, C] or [N, C, D1, ..., Dk]; input 1
 * (target / labels) is i32 or i64 [N] or [N, D1, ..., Dk]; the optional input 2 (weight) is
 * [C] of input 0's dtype. Attributes: reduction ("none", "sum" or "mean", default "mean") and
 * the optional int ignore_index. The loss has input 0's dtype and, for reduction "none", the
 * target's shape, else it is a scalar. SoftmaxCrossEntropyLoss's optional output 1, log_prob,
 * has input 0's dtype and shape.
 */
#include "infer.h"

#include <string.h>

static ampc_status infer_loss(ampc_graph *g, ampc_node *n, const char *in0, const char *in1,
                              const char *in2) {
    const ampc_value *x = n->inputs[0], *t = n->inputs[1];
    const ampc_value *w = n->n_inputs > 2 ? n->inputs[2] : NULL;
    char xs[AMPC_SHAPE_STR_MAX], ts[AMPC_SHAPE_STR_MAX];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (x->shape.rank < 2)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' (%s) must have rank >= 2 ([N, C, "
                         "D1, ...]), got %s", x->name, in0, ampc_shape_str(&x->shape, xs, sizeof xs));
    if (t->dtype != AMPC_DTYPE_I32 && t->dtype != AMPC_DTYPE_I64)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 1 '%s' (%s) must be i32 or i64, got %s",
                         t->name, in1, ampc_dtype_name(t->dtype));
    /* The target is input 0's shape without the class dim 1. */
    bool ok = t->shape.rank == x->shape.rank - 1 && t->shape.dims[0] == x->shape.dims[0];
    for (int32_t d = 1; ok && d < t->shape.rank; d++) ok = t->shape.dims[d] == x->shape.dims[d + 1];
    if (!ok)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' (%s) must have the shape of input 0 '%s' %s without its "
                         "class dim 1, got %s",
                         t->name, in1, x->name, ampc_shape_str(&x->shape, xs, sizeof xs),
                         ampc_shape_str(&t->shape, ts, sizeof ts));
    if (w) {
        if (!ampc_infer_same_dtype(g, n, 0, 2)) return AMPC_E_DTYPE;
        if (w->shape.rank != 1 || w->shape.dims[0] != x->shape.dims[1])
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 2 '%s' (%s) must have shape [%lld], the class count (dim 1 "
                             "of input 0 '%s'), got %s",
                             w->name, in2, (long long)x->shape.dims[1], x->name,
                             ampc_shape_str(&w->shape, ts, sizeof ts));
    }
    const ampc_attr *r = ampc_ir_attr_find(n, "reduction");
    if (r && (r->kind != AMPC_ATTR_STRING ||
              (strcmp(r->s, "none") && strcmp(r->s, "sum") && strcmp(r->s, "mean"))))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'reduction' must be the string \"none\", \"sum\" or \"mean\"");
    const ampc_attr *ii = ampc_ir_attr_find(n, "ignore_index");
    if (ii && ii->kind != AMPC_ATTR_INT)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'ignore_index' must be an int");

    const ampc_shape scalar = {0};
    ampc_infer_set(n, 0, x->dtype, r && !strcmp(r->s, "none") ? &t->shape : &scalar);
    if (n->n_outputs > 1) ampc_infer_set(n, 1, x->dtype, &x->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_nll_loss(ampc_graph *g, ampc_node *n) {
    return infer_loss(g, n, "input", "target", "weight");
}

ampc_status ampc_infer_sce_loss(ampc_graph *g, ampc_node *n) {
    return infer_loss(g, n, "scores", "labels", "weights");
}
