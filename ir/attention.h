/*
 * attention.h — ampc.FusedAttention's parameters and where it writes its output, one
 * implementation for inference (infer/attention.c, which reports malformed attributes), the
 * reference evaluator (ref/attention.c) and code generation (codegen/lower_attention.c, which
 * bakes them into its kernel).
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

/* Everything an ampc.FusedAttention node says, decoded once (inference has checked it): Y[b, h,
 * i, :] = softmax(scale * Q[b, h, i, :] K[b, h / group]^T + mask[b % mp, h, i, :]) V[b, h / group],
 * each operand read through its element steps from its offset. */
typedef struct ampc_attention_params {
    int64_t B, H, Sq, Sk, D, Dv; /* dims */
    int64_t qs[4], ks[4], vs[4]; /* the element steps of (b, h, s, d) in Q, K and V */
    int64_t off[3];              /* offsets: where Q, K and V start in their inputs, elements */
    int64_t ms[4];  /* the mask's, broadcast right-aligned to [B, H, Sq, Sk] (unit dims step 0);
                       zeros without a mask */
    int64_t ys[4];  /* Y's in the output (ampc_attention_y_layout) */
    ampc_shape y;   /* the output's shape */
    int64_t group;  /* kv_group: the query heads a K/V head serves (1) */
    int64_t mp;     /* mask_period: batch b reads the mask's entry b % mp (B) */
    double scale;   /* 1 when absent */
    bool safe;      /* a row with no finite score gives 0 (else NaN) */
} ampc_attention_params;

void ampc_attention_params_of(const ampc_node *n, ampc_attention_params *p);

#endif
