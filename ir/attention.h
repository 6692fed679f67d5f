/*
 * attention.h — where ampc.FusedAttention writes its output, one implementation for inference
 * (infer/attention.c, which reports malformed attributes), the reference evaluator
 * (ref/attention.c) and code generation (codegen/lower_attention.c, which bakes the steps into
 * its kernel).
 *
 * The result Y [B, H, Sq, Dv] is stored as Transpose(Y, y_perm) and the node's output is those
 * bytes with the shape y_shape: y_perm defaults to (0, 1, 2, 3), y_shape to the transposed dims.
 * merge_heads = 1 (the heads merged back, BERT's [B, Sq, H*Dv]) is y_perm (0, 2, 1, 3) with
 * y_shape [B, Sq, H*Dv]; it excludes the other two.
 */
#ifndef AMPC_IR_ATTENTION_H
#define AMPC_IR_ATTENTION_H

#include "ir/ir.h"

/* For node n with dims [B, H, Sq, Sk, D, Dv]: ys, the element steps of Y's (b, h, s, d) in the
 * output, and *y, the output's shape. NULL, or what is malformed (a static string naming the
 * attribute and the rule it breaks). */
const char *ampc_attention_y_layout(const ampc_node *n, const int64_t dims[6], int64_t ys[4],
                                    ampc_shape *y);

#endif
