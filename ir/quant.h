/*
 * quant.h — QuantizeLinear's and DequantizeLinear's parameters and arithmetic, one implementation
 * for the reference evaluator (ref/quant.c) and code generation (codegen/lower_quant.c);
 * inference (infer/quant.c) checks them. The axis is ampc_axis_of's (ir.h).
 */
#ifndef AMPC_IR_QUANT_H
#define AMPC_IR_QUANT_H

#include "ir/ir.h"

/* The block a scale covers along the axis (block_size; 0: per tensor or per axis). */
int64_t ampc_quant_block(const ampc_node *n);

/* The range [*lo, *hi] of quantised (or i32) dtype t: what a quantised value saturates to. */
void ampc_quant_range(ampc_dtype t, double *lo, double *hi);

/* The type QuantizeLinear divides x by its scale in: numpy's result type of x / scale, the wider
 * float (bf16 counts as f32, which is how it reaches numpy; f16 for two f16s); an integer x
 * divides in f64. */
ampc_dtype ampc_quant_div_type(ampc_dtype x, ampc_dtype scale);

#endif
