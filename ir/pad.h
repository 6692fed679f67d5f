/*
 * pad.h — Pad's modes and geometry, one implementation for the reference evaluator
 * (ref/movement.c) and code generation (codegen/lower_movement.c, which writes the same index
 * mapping into its kernel).
 *
 * Per axis, negative pads first crop the input to [lo, lo + len); output index o maps to
 * j = o - shift (shift = max(pad_begin, 0)) in the kept range, and a j outside [0, len) takes
 * the constant, the nearest edge, the mirror image without the edge repeated (reflect, period
 * 2 * (len - 1)) or the torus (wrap, period len).
 */
#ifndef AMPC_IR_PAD_H
#define AMPC_IR_PAD_H

#include "ir/ir.h"

typedef enum ampc_pad_mode {
    AMPC_PAD_CONSTANT,
    AMPC_PAD_REFLECT,
    AMPC_PAD_EDGE,
    AMPC_PAD_WRAP
} ampc_pad_mode;

/* Node n's mode attribute ("constant" when absent or unknown: inference refuses the unknown). */
ampc_pad_mode ampc_pad_mode_of(ampc_graph *g, const ampc_node *n);

/* The geometry of padding an input of rank r and dims by pads[0 .. np) (begins, then ends) along
 * `axes` (np / 2 of them, negative from the end; NULL: the first np / 2 axes): per axis, the
 * kept range's start lo and length len, and the shift of its first element in the output. */
void ampc_pad_geometry(int32_t r, const int64_t *dims, const int64_t *pads, int32_t np,
                       const int64_t *axes, int64_t *lo, int64_t *len, int64_t *shift);

/* The kept-range index an outside j reads under `mode`; -1 for the constant. */
int64_t ampc_pad_source(int64_t j, int64_t len, ampc_pad_mode mode);

#endif
