/*
 * conv.h — the convolutions' and pools' parameters beyond the window geometry, one decoder for
 * the reference evaluator (ref/conv.c), code generation (codegen/lower_conv.c,
 * codegen/lower_conv.c's pools) and the passes; inference (infer/conv.c) checks them. The window itself
 * (kernel, strides, dilations, padding) is ampc_infer_conv_geom's (infer/infer.h), except
 * Col2Im's.
 */
#ifndef AMPC_IR_CONV_H
#define AMPC_IR_CONV_H

#include "ir/ir.h"

typedef struct ampc_conv_params {
    int64_t group;        /* the channel groups of a convolution (1) */
    int64_t offset_group; /* DeformConv's offset groups (1) */
    bool relu;            /* ampc.FusedConv's activation is Relu (else none) */
    bool include_pad;     /* AveragePool's count_include_pad (0) */
    bool col_major;       /* MaxPool's storage_order: indices column-major (0) */
    int64_t p;            /* LpPool's and GlobalLpPool's p (2); 1 for the other ops */
} ampc_conv_params;

ampc_conv_params ampc_conv_params_of(const ampc_node *n);

/* Whether node n (ampc.FusedConv, MaxPool, AveragePool: the layout pass's) works channels-last:
 * x and y [N, S..., C], a convolution's weight [M, S..., C/group]. */
bool ampc_conv_channels_last(const ampc_node *n);
/* The attribute that makes such a node channels-last. */
ampc_attr ampc_channels_last_attr(void);

/* Col2Im's windows over its k-dim image: per dim the stride and dilation (1) and the padding at
 * each end (0), read as the last entries of a longer list. */
void ampc_col2im_window(const ampc_node *n, int32_t k, int64_t *stride, int64_t *dil, int64_t *pb,
                        int64_t *pe);

#endif
