/*
 * movement.h — the movement family's parameters (Transpose's permutation, DepthToSpace's and
 * SpaceToDepth's, Shape's range, ConstantOfShape's value), one decoder each for inference's successors: the
 * reference evaluator (ref/movement.c), code generation (codegen/lower_movement.c) and the passes
 * that move, fold or split transposes (inference validates the attributes).
 */
#ifndef AMPC_IR_MOVEMENT_H
#define AMPC_IR_MOVEMENT_H

#include "ir/ir.h"

/* Transpose t's permutation for an input of rank r into perm[0 .. r): output dim i is input dim
 * perm[i]; `perm` absent: the dims reversed; a negative entry counts from the end. False when
 * the attribute is not r integers. */
bool ampc_transpose_perm(const ampc_node *t, int32_t r, int64_t *perm);
/* The attribute of a Transpose by perm[0 .. r) (perm is not copied: it must outlive the use). */
ampc_attr ampc_transpose_perm_attr(const int64_t *perm, int32_t r);

/* DepthToSpace's and SpaceToDepth's block size (1 when absent) and whether their mode is CRD
 * (column-row-depth; else DCR, depth-column-row). */
typedef struct ampc_space_depth_params {
    int64_t blocksize;
    bool crd;
} ampc_space_depth_params;

ampc_space_depth_params ampc_space_depth_params_of(const ampc_node *n);

/* Shape's dims [*start, *end) of an input of rank r: its start (0) and end (r) attributes, negative
 * ones from the end, clamped to [0, r]. */
void ampc_shape_range(const ampc_node *n, int32_t r, int64_t *start, int64_t *end);

/* The bytes of ConstantOfShape's fill value (one element of the output's type), or NULL when it
 * has none (zeros). */
const void *ampc_constant_fill(const ampc_node *n);

#endif
