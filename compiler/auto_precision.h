/*
 * auto_precision.h — --precision auto: the search for the nodes that must stay f32, and the check
 * of the configuration it ships.
 *
 * Everything runs on the reference evaluator, so the library never depends on the machine that
 * built it. The calibration samples are split: the first n_search drive the search, the others
 * check its result (one sample with a batch: the outputs' first half of rows for the search, the
 * rest for the check).
 *
 * The search starts from everything the fp16 (or bf16) policy allows. Each round evaluates the
 * model as written (the reference) and the build's configuration with the nodes chosen so far in
 * f32 — the same pipeline options the build uses (fusion, sparsity, --fast-gelu, layout), TF32's
 * input rounding emulated when the build has it — with every float value a node produces made a
 * graph output ("probes", so both runs hand back the same values by name). Each node's own
 * contribution to the error is then known: the relative error of its output minus the largest of
 * its inputs'. While the outputs' error (max |y - ref| / max |ref|, the largest over outputs and
 * search samples) is above the tolerance, the nodes contributing most go back to f32, more each
 * round.
 *
 * The check then builds exactly what ships — the same options, no probes, so every fusion forms —
 * and measures it on the check samples against the model as written (compiler/check.h: max_rel
 * and the 99.9th percentile); result->met says whether the worst max_rel is within the tolerance.
 */
#ifndef AMPC_AUTO_PRECISION_H
#define AMPC_AUTO_PRECISION_H

#include "ampc.h"
#include "compiler/check.h"

#include <stdio.h>

typedef struct ampc_auto_options {
    ampc_precision low;          /* AMPC_PRECISION_FP16 or AMPC_PRECISION_BF16 */
    double tolerance;            /* bound on the outputs' relative error, e.g. 1e-2 */
    ampc_tensor **samples;       /* [sample][input]: calibration inputs in the graph's order */
    int32_t n_samples;
    int32_t n_search;            /* the first n_search samples search; the rest check */
    bool split_batch;            /* one sample: rows [0, batch/2) search, the rest check */
    int64_t batch;               /* the outputs' leading axis, with split_batch */
    ampc_pipeline_options pipeline; /* the build's; precision and auto_fp32 are the search's */
    bool tf32;                   /* the build runs f32 matmuls/convolutions on TF32 math */
    int32_t max_rounds;          /* 0: 8 */
    FILE *log;                   /* one line per round, or NULL */
} ampc_auto_options;

typedef struct ampc_auto_result {
    char **kept;          /* node names the search moved to f32 (malloc'ed, with the array) */
    int32_t n_kept;
    double error_low;     /* search samples: the outputs' error with no node moved back */
    double error;         /* search samples: the outputs' error of the final choice */
    int32_t rounds;       /* evaluations in the low type */
    ampc_check_set check; /* the check samples and the model's outputs on them */
    ampc_accuracy *acc;   /* per output: what ships, on the check samples (reference evaluator) */
    double check_error;   /* the worst max_rel of acc */
    bool met;             /* check_error <= tolerance */
} ampc_auto_result;

/* Runs the search and the check. `load` returns a fresh copy of the model's graph (imported,
 * not optimised) each time it is called, or NULL with its own message printed. On failure *err
 * (malloc'ed) says why. A build above the tolerance is not a failure here: result->met says so
 * (the caller refuses it). */
ampc_status ampc_auto_precision(ampc_graph *(*load)(void *user), void *user,
                                const ampc_auto_options *o, ampc_auto_result *result, char **err);
void ampc_auto_result_free(ampc_auto_result *r);

#endif /* AMPC_AUTO_PRECISION_H */
