/*
 * einsum.h — Einsum's equation, parsed and bound once: inference (infer/linalg.c) reports a
 * malformed equation or operands that do not fit it, and the reference evaluator (ref/linalg.c)
 * and code generation (codegen/lower_contract.c) walk the same loop nest, so that the three
 * cannot disagree on what a subscript means.
 *
 * The equation names each operand's dims by letters (a-z, A-Z) and "..." (the broadcast dims);
 * the output term follows "->", or is implicit: "..." when any input has it, then the letters
 * used exactly once, in ASCII order (as numpy orders them). A letter repeated within an operand
 * walks its diagonal; a dim of 1 broadcasts; letters missing from the output are summed over.
 */
#ifndef AMPC_IR_EINSUM_H
#define AMPC_IR_EINSUM_H

#include "ir/ir.h"

enum {
    AMPC_EINSUM_LABELS = 52,   /* a-z, A-Z */
    AMPC_EINSUM_ELLIPSIS = 52, /* the label standing for "..." */
    AMPC_EINSUM_MAX_INPUTS = 16,
    AMPC_EINSUM_MAX_TERM = 2 * AMPC_MAX_RANK, /* subscripts per term (a scalar's term is empty) */
    AMPC_EINSUM_MAX_LOOP = AMPC_MAX_RANK + AMPC_EINSUM_LABELS,
};

typedef struct ampc_einsum_term {
    int32_t n; /* labels in order, AMPC_EINSUM_ELLIPSIS for "..." */
    int32_t labels[AMPC_EINSUM_MAX_TERM];
    bool ellipsis;
} ampc_einsum_term;

typedef struct ampc_einsum {
    int32_t n_in;
    ampc_einsum_term in[AMPC_EINSUM_MAX_INPUTS], out;
    int64_t dim[AMPC_EINSUM_LABELS];        /* each label's extent (-1: unused) */
    int32_t in_ell[AMPC_EINSUM_MAX_INPUTS]; /* how many dims "..." covers in each input */
    int32_t ell_rank;                       /* the broadcast "..." rank */
    int64_t ell_dims[AMPC_MAX_RANK];
} ampc_einsum;

/* Parses equation eq for n operands (at most AMPC_EINSUM_MAX_INPUTS) into *e; false with what is
 * malformed in why[0 .. why_len) ("more terms than inputs", ...). */
bool ampc_einsum_parse(const char *eq, int32_t n, ampc_einsum *e, char *why, size_t why_len);
/* Fixes each label's extent and the "..." dims from the operands' shapes: a label's dims must
 * agree (or be 1, which broadcasts), the "..." dims broadcast numpy-style. False with the
 * mismatch in why. */
bool ampc_einsum_bind(ampc_einsum *e, const ampc_shape *const *shapes, char *why, size_t why_len);
/* The output's shape of a bound equation; false when its rank would pass AMPC_MAX_RANK. */
bool ampc_einsum_out_shape(const ampc_einsum *e, ampc_shape *y, char *why, size_t why_len);

/* Einsum node n's equation parsed and bound to the shapes of its inputs, shapes[0 .. n_inputs)
 * (inference accepted both, so this only decodes them). */
void ampc_einsum_of(const ampc_node *n, const ampc_shape *const *shapes, ampc_einsum *e);

/* The loop nest of a bound equation: the "..." dims, then every label in use, in that order (the
 * order the sums run in); per loop dim its extent and the element step of each operand (rows
 * 0 .. n_in - 1) and of the output (row n_in) along it; per output axis its loop dim. */
typedef struct ampc_einsum_loops {
    int32_t n;
    int64_t ext[AMPC_EINSUM_MAX_LOOP];
    int64_t step[AMPC_EINSUM_MAX_INPUTS + 1][AMPC_EINSUM_MAX_LOOP];
    int32_t n_out;
    int32_t out_loop[AMPC_MAX_RANK];
} ampc_einsum_loops;

/* The loops of e over operands of shapes in[0 .. n_in) and the output's shape y. */
void ampc_einsum_loops_of(const ampc_einsum *e, const ampc_shape *const *in, const ampc_shape *y,
                          ampc_einsum_loops *l);

#endif
