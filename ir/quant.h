/*
 * quant.h — QuantizeLinear's and DequantizeLinear's parameters, one decoder for the reference
 * evaluator (ref/quant.c) and code generation (codegen/lower_quant.c); inference (infer/quant.c)
 * checks them. The axis is ampc_axis_of's (ir.h).
 */
#ifndef AMPC_IR_QUANT_H
#define AMPC_IR_QUANT_H

#include "ir/ir.h"

/* The block a scale covers along the axis (block_size; 0: per tensor or per axis). */
int64_t ampc_quant_block(const ampc_node *n);

#endif
