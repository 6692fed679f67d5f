/*
 * reduce.h — a Reduce* node's parameters and which dims it reduces, one decoder for the
 * reference evaluator (ref/reduce.c), code generation (codegen/lower_reduce.c) and the passes.
 */
#ifndef AMPC_IR_REDUCE_H
#define AMPC_IR_REDUCE_H

#include "ir/ir.h"

/* Marks in reduced[0 .. rank) the dims node n reduces: the n_axes values of `axes` (its input 1,
 * of dtype axes_dtype; NULL when the node has none) or else its older `axes` attribute, negative
 * ones from the end; every dim for no axes, none with noop_with_empty_axes. Inference has
 * validated the axes, so this only decodes them. */
/* A Reduce* node's keepdims (1 when absent), noop_with_empty_axes (0) and its older `axes`
 * attribute (NULL and 0 when absent; from opset 18 the axes are input 1). */
typedef struct ampc_reduce_params {
    bool keepdims, noop_empty;
    const int64_t *axes;
    int32_t n_axes;
} ampc_reduce_params;

ampc_reduce_params ampc_reduce_params_of(const ampc_node *n);
/* The attribute of a Reduce* node's keepdims. */
ampc_attr ampc_keepdims_attr(bool keep);

void ampc_reduce_dims(const ampc_node *n, const void *axes, ampc_dtype axes_dtype, int64_t n_axes,
                      int32_t rank, bool reduced[AMPC_MAX_RANK]);

#endif
