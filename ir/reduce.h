/*
 * reduce.h — which dims a Reduce* node reduces, one decoder for the reference evaluator
 * (ref/reduce.c) and code generation (codegen/lower_reduce.c).
 */
#ifndef AMPC_IR_REDUCE_H
#define AMPC_IR_REDUCE_H

#include "ir/ir.h"

/* Marks in reduced[0 .. rank) the dims node n reduces: the n_axes values of `axes` (its input 1,
 * of dtype axes_dtype; NULL when the node has none) or else its older `axes` attribute, negative
 * ones from the end; every dim for no axes, none with noop_with_empty_axes. Inference has
 * validated the axes, so this only decodes them. */
void ampc_reduce_dims(const ampc_node *n, const void *axes, ampc_dtype axes_dtype, int64_t n_axes,
                      int32_t rank, bool reduced[AMPC_MAX_RANK]);

#endif
