/*
 * norm.h — the normalisations' parameters, one decoder for the reference evaluator (ref/norm.c)
 * and code generation (codegen/lower_norm.c); inference (infer/norm.c) checks their kinds and
 * values. The axis is ampc_axis_of's (ir.h).
 */
#ifndef AMPC_IR_NORM_H
#define AMPC_IR_NORM_H

#include "ir/ir.h"

typedef struct ampc_norm_params {
    double eps;       /* epsilon widened from its float32 (1e-5) */
    bool stash_f64;   /* stash_type asks for f64 statistics (LayerNormalization, RMS, Group) */
    int64_t groups;   /* GroupNormalization's num_groups (required); 0 for the others */
    bool l1;          /* LpNormalization's p is 1 (else 2) */
    int64_t size;     /* LRN's size (required); 0 for the others */
    double alpha, beta, bias; /* LRN's, widened from float32 (1e-4, 0.75, 1) */
} ampc_norm_params;

ampc_norm_params ampc_norm_params_of(const ampc_node *n);
/* The attributes of a LayerNormalization or RMSNormalization over the dims from `axis` with
 * epsilon eps (rounded to float32) and f32 statistics (stash_type 1), into out[0 .. 3). */
void ampc_norm_attrs(int64_t axis, double eps, ampc_attr out[3]);

/* Marks in on[0 .. rank) the dims MeanVarianceNormalization normalises over: its axes (0, 2, 3
 * when absent), negative ones from the end. */
void ampc_mvn_dims(const ampc_node *n, int32_t rank, bool on[AMPC_MAX_RANK]);

#endif
