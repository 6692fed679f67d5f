/*
 * auto_precision.h — --precision auto: the search for the nodes that must stay f32.
 *
 * Starting from everything the fp16 (or bf16) policy allows, the search evaluates the model on
 * calibration inputs twice: in f32 (the reference: f32 math, TF32 off) and in the low type with the
 * nodes chosen so far kept in f32. Every float value a node produces is observed in both runs, so
 * each node's own contribution to the error is known: the relative error of its output minus the
 * largest of its inputs'. While the outputs' error (max |y - y_f32| / max |y_f32| over every
 * output) is above the tolerance, the nodes contributing most go back to f32, more each round.
 *
 * Evaluation runs on the GPU when there is one (the kernels that will run), else on the reference
 * evaluator (which rounds to the low type where the GPU stores it).
 */
#ifndef AMPC_AUTO_PRECISION_H
#define AMPC_AUTO_PRECISION_H

#include "ampc.h"

#include <stdio.h>

typedef struct ampc_auto_options {
    ampc_precision low;           /* AMPC_PRECISION_FP16 or AMPC_PRECISION_BF16 */
    double tolerance;             /* bound on the outputs' relative error, e.g. 1e-2 */
    const ampc_tensor *inputs;    /* calibration inputs in the graph's input order */
    int32_t n_inputs;
    bool gpu;                     /* evaluate on the GPU (else the reference evaluator) */
    int32_t max_rounds;           /* 0: 8 */
    const char *const *keep_fp32; /* the user's --keep-fp32 names, kept in every round */
    int32_t n_keep_fp32;
    FILE *log;                    /* one line per round, or NULL */
} ampc_auto_options;

typedef struct ampc_auto_result {
    char **kept;          /* node names the search moved to f32 (malloc'ed, with the array) */
    int32_t n_kept;
    double error_low;     /* the outputs' error with no node moved back */
    double error;         /* the outputs' error of the final choice */
    int32_t rounds;       /* evaluations in the low type */
    bool met;             /* error <= tolerance */
} ampc_auto_result;

/* Runs the search. `load` returns a fresh copy of the model's graph (imported, not optimised)
 * each time it is called, or NULL with its own message printed. On failure *err (malloc'ed) says
 * why. A search that ends above the tolerance is not a failure: result->met says so (everything
 * the search could move is then f32). */
ampc_status ampc_auto_precision(ampc_graph *(*load)(void *user), void *user,
                                const ampc_auto_options *o, ampc_auto_result *result, char **err);
void ampc_auto_result_free(ampc_auto_result *r);

#endif /* AMPC_AUTO_PRECISION_H */
