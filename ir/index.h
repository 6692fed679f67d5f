/*
 * index.h — the index family's parameters (gathers, scatters, TopK, Trilu, ArgMax / ArgMin,
 * CumSum, EyeLike, ReverseSequence, TensorScatter, NonMaxSuppression), one decoder for the
 * reference evaluator (ref/index.c) and code generation (codegen/lower_index.c,
 * codegen/lower_reduce.c); inference (infer/index.c) checks their kinds and values. The axis is
 * ampc_axis_of's (ir.h).
 */
#ifndef AMPC_IR_INDEX_H
#define AMPC_IR_INDEX_H

#include "ir/ir.h"

/* A scatter's reduction; the values of codegen/kernels/move.cuh's RED_* constants. */
typedef enum ampc_scatter_red {
    AMPC_SCATTER_NONE = 0, /* assignment */
    AMPC_SCATTER_ADD = 1,
    AMPC_SCATTER_MUL = 2,
    AMPC_SCATTER_MAX = 3,
    AMPC_SCATTER_MIN = 4
} ampc_scatter_red;

typedef struct ampc_index_params {
    ampc_scatter_red reduction; /* ScatterElements, ScatterND ("none") */
    int32_t batch_dims;         /* GatherND (0) */
    bool largest, sorted;       /* TopK (1, 1); Unique's sorted (1) */
    bool upper;                 /* Trilu (1) */
    bool select_last;           /* ArgMax, ArgMin: select_last_index (0) */
    bool exclusive, reverse;    /* CumSum (0, 0) */
    int64_t k;                  /* EyeLike's diagonal (0) */
    int32_t batch_axis;         /* ReverseSequence (1; time_axis is the other of 0 and 1) */
    bool circular;              /* TensorScatter's mode is "circular" (else "linear") */
    bool center_point_box;      /* NonMaxSuppression (0) */
} ampc_index_params;

ampc_index_params ampc_index_params_of(const ampc_node *n);

/* Whether Gather n's indices are a constant (no graph input) of int32 or int64 entries each in
 * range of its axis (negative ones counting from its end): what a pass may rely on, where an
 * index out of range is the Gather's own lowering's to report. */
bool ampc_gather_const_in_range(const ampc_node *n);

#endif
