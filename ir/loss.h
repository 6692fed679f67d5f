/*
 * loss.h — NegativeLogLikelihoodLoss's and SoftmaxCrossEntropyLoss's parameters, one decoder for
 * the reference evaluator (ref/loss.c) and code generation (codegen/lower_norm.c); inference
 * (infer/loss.c) checks them.
 */
#ifndef AMPC_IR_LOSS_H
#define AMPC_IR_LOSS_H

#include "ir/ir.h"

typedef enum ampc_loss_reduction {
    AMPC_LOSS_MEAN, /* the weighted mean over the targets not ignored (the default) */
    AMPC_LOSS_SUM,
    AMPC_LOSS_NONE  /* one loss per target */
} ampc_loss_reduction;

typedef struct ampc_loss_params {
    ampc_loss_reduction reduction;
    bool has_ignore;     /* ignore_index given: targets of that class count for nothing */
    int64_t ignore;      /* its value (0 when not given) */
} ampc_loss_params;

ampc_loss_params ampc_loss_params_of(const ampc_node *n);

#endif
