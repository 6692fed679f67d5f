/*
 * check.h — how far a build's outputs are from the model as written, on sample inputs.
 *
 * A check set holds samples (one tensor per graph input each) and, for each, the outputs of the
 * model as written: the imported graph, no pass run, on the reference evaluator (every op in its
 * declared type, one rounding per op, TF32 off). A configuration is then measured against those
 * outputs either on the reference evaluator (ampc_check_reference: the pipeline options a build
 * uses, with TF32's input rounding emulated when the build has it) or on the GPU
 * (ampc_check_module: the compiled module itself).
 *
 * Per output, two figures over every sample:
 *   max_rel  max |y - ref| / max |ref|                     (what --tolerance bounds)
 *   p999     the 99.9th percentile of |y - ref| / (|ref| + 1e-3 max |ref|)
 * A NaN or infinity where the reference has a finite value makes both infinite. With `rows` set,
 * only rows [row0, row1) of each output's leading axis count: one sample split along its batch
 * between the precision search and this check.
 */
#ifndef AMPC_COMPILER_CHECK_H
#define AMPC_COMPILER_CHECK_H

#include "ampc.h"

typedef struct ampc_accuracy {
    double max_rel;
    double p999;
} ampc_accuracy;

typedef struct ampc_check_set {
    ampc_tensor **inputs;  /* [sample][input], borrowed */
    int32_t n_samples, n_inputs, n_outputs;
    ampc_tensor **ref;     /* [sample][output]: the model as written */
    char **names;          /* the outputs' names */
    bool rows;             /* compare rows [row0, row1) of the leading axis only */
    int64_t row0, row1;
} ampc_check_set;

/* Fills c's references: g is the model as imported (not optimised; it is evaluated, not
 * changed). inputs[k] holds sample k's tensors in g's input order. On failure *err (malloc'ed)
 * says why. */
ampc_status ampc_check_set_init(ampc_check_set *c, ampc_graph *g, ampc_tensor **inputs,
                                int32_t n_samples, char **err);
/* The same with the references from module m run on the GPU (g: the graph m was compiled from,
 * for the outputs' names): a build measured against another build of the same model. */
ampc_status ampc_check_set_from_module(ampc_check_set *c, ampc_module *m, const ampc_graph *g,
                                       ampc_tensor **inputs, int32_t n_samples, char **err);
void ampc_check_set_free(ampc_check_set *c);
/* The multiply-adds of one evaluation of g's contractions and convolutions (an estimate of the
 * reference evaluator's work: it runs about 1e9 of them a second). */
double ampc_check_cost(const ampc_graph *g);

/* Optimises g (a fresh copy of the model) with po, emulates TF32 when `tf32`, evaluates it on
 * the reference evaluator and measures each output into acc[n_outputs]. */
ampc_status ampc_check_reference(const ampc_check_set *c, ampc_graph *g,
                                 const ampc_pipeline_options *po, bool tf32, ampc_accuracy *acc,
                                 char **err);
/* Runs module m (compiled from the same model) on the GPU and measures each output. */
ampc_status ampc_check_module(const ampc_check_set *c, ampc_module *m, ampc_accuracy *acc,
                              char **err);
/* Measures got[k] (k < n samples) against ref[k] over rows [row0, row1) of the leading axis
 * (rows false: every element). */
ampc_accuracy ampc_accuracy_of(const ampc_tensor *const *got, const ampc_tensor *const *ref,
                               int32_t n, bool rows, int64_t row0, int64_t row1);
/* The largest max_rel of acc[n]. */
double ampc_accuracy_worst(const ampc_accuracy *acc, int32_t n);

#endif /* AMPC_COMPILER_CHECK_H */
