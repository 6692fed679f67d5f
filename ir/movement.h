/*
 * movement.h — Transpose's permutation, one decoder for inference's successors: the reference
 * evaluator (ref/movement.c), code generation (codegen/lower_move.c) and the passes that move,
 * fold or split transposes (inference validates the attribute: one entry per dim, each dim once).
 */
#ifndef AMPC_IR_MOVEMENT_H
#define AMPC_IR_MOVEMENT_H

#include "ir/ir.h"

/* Transpose t's permutation for an input of rank r into perm[0 .. r): output dim i is input dim
 * perm[i]; `perm` absent: the dims reversed; a negative entry counts from the end. False when
 * the attribute is not r integers. */
bool ampc_transpose_perm(const ampc_node *t, int32_t r, int64_t *perm);

#endif
