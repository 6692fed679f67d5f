/*
 * cli.h — the commands of the `ampc` executable (main.c parses, cli.c carries them out). Only the
 * executable links these; the library never prints.
 */
#ifndef AMPC_CLI_H
#define AMPC_CLI_H

#include "ampc.h"
#include "ampc_runtime.h"
#include "compiler/tool.h" /* ampc_pipeline_report */

#include <stdio.h>

enum { AMPC_CLI_MAX_LIST = 64 };

typedef struct ampc_cli_options {
    const char *command;   /* NULL (compile), "inspect", "run" or "doctor" */
    const char *model;
    const char *output;    /* -o */
    const char *emit;      /* --emit */
    const char *arch;      /* --arch, comma-separated */
    const char *dump_after;
    const char *save_dir;
    const char *name;      /* --name: the library's C prefix */
    const char *precision; /* --precision fp32|tf32|fp16|bf16 (NULL: tf32) */
    const char *report;    /* --report FILE.json */
    const char *calibrate; /* --calibrate DIR: inputs for --precision auto */
    const char *auto_type; /* --auto-type fp16|bf16 (NULL: fp16) */
    double tolerance;      /* --tolerance (0: 1e-2) */
    bool accept_error;     /* --accept-error: build even when auto's check misses --tolerance */
    bool nchw;             /* --layout nchw */
    bool gemm_kernel;      /* --gemm-kernel */
    bool no_l2_prefetch;   /* --no-l2-prefetch */
    bool fast_gelu;        /* --fast-gelu (--exact-gelu: accepted, the default) */
    int32_t gpus;          /* --gpus N (0: one GPU) */
    bool tensor_parallel;  /* --partition tensor */
    bool data_parallel;    /* --partition data */
    bool pipeline_parallel; /* --partition pipeline */
    int32_t micro_batches; /* --micro-batches M (0: the pass's default) */
    const char *sparsity;  /* --sparsity off|verify|prune (NULL: off) */
    const char *sparsity_layers; /* --sparsity-layers GLOB (prune only) */
    const char *shapes[AMPC_CLI_MAX_LIST];
    const char *disable[AMPC_CLI_MAX_LIST];
    const char *inputs[AMPC_CLI_MAX_LIST];
    const char *binds[AMPC_CLI_MAX_LIST]; /* --bind NAME=FILE: a compile-time input's value */
    int n_binds;
    /* `run` compiling a model: its --input values bind the inputs that must be known at
     * compile time (set by ampc_cli_run, not an option) */
    bool bind_run_inputs;
    const char *keep_fp32[AMPC_CLI_MAX_LIST]; /* --keep-fp32 OP|NODE */
    int n_shapes, n_disable, n_inputs, n_keep_fp32;
    int64_t max_batch;
    int64_t max_loop_iterations; /* --max-loop-iterations N (0: the evaluator's default) */
    int32_t iterations, warmup; /* run: timed launches (0: none) and warm-up launches */
    bool verbose, print_pipeline, reference, profile;
    bool sparse_report; /* `run`: the 2:4 GEMMs' dense / sparse decisions */
    /* `run`, one process per GPU: --rank R --ranks N (-1: not given; the MPI launcher's
     * environment is read then) and --nccl-id-file PATH */
    int32_t rank, ranks;
    const char *nccl_id_file;
} ampc_cli_options;

/* Each returns the process exit code (0 success, 1 failure, 2 usage) after printing. */
int ampc_cli_compile(const ampc_cli_options *o);
int ampc_cli_inspect(const ampc_cli_options *o);
int ampc_cli_run(const ampc_cli_options *o);
int ampc_cli_doctor(const ampc_cli_options *o);

/* Makes stdout and stderr print every control byte and every byte that is not UTF-8 as \xHH
 * (terminal.c), so that a model's names cannot send a terminal escape sequence; main() calls
 * it first. ampc_cli_raw_stderr is stderr without the filter, for ampc's own '\r' progress line. */
void ampc_cli_terminal_install(void);
FILE *ampc_cli_raw_stderr(void);

/* Replaces *err (when err is not NULL; *err NULL or malloc'ed) with the formatted message and
 * returns false: the failure path of the command line's helpers (ranks.c, paths.c). */
bool ampc_cli_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- `run`, one process per GPU (ranks.c; in the tool's library, so tests reach it) --------- */

/* Where this process stands: one process per GPU when `on`. */
typedef struct ampc_cli_rank {
    bool on;
    int32_t rank, ranks; /* this process's rank, the number of processes */
    int32_t device;      /* the CUDA device it uses: its local rank on its machine */
    const char *source;  /* where rank and ranks came from, for messages ("--rank", "Open MPI") */
    char tag[128];       /* the launcher's job id ("" when none): tells a stale id file apart */
} ampc_cli_rank;

/* Resolves the mode from --rank/--ranks, else from the launcher's environment (Open MPI's
 * OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE, Slurm's SLURM_PROCID/SLURM_NTASKS), for a model of
 * `gpus` GPUs. false with a message in err (malloc'ed) when they disagree or are out of range. */
bool ampc_cli_rank_resolve(const ampc_cli_options *o, int32_t gpus, ampc_cli_rank *r,
                           char **err);
/* Writes id to path atomically (a temporary file renamed over it) with the job tag. */
bool ampc_cli_nccl_id_write(const char *path, const char *tag, const ampc_rt_nccl_id *id,
                            char **err);
/* Waits up to timeout_s seconds for path to hold an id of job `tag` (a file of another job, or
 * written more than a minute before the wait began without a tag, is stale and waited past). */
bool ampc_cli_nccl_id_read(const char *path, const char *tag, double timeout_s,
                           ampc_rt_nccl_id *id, char **err);
/* The model `run` uses: on GPU 0 (every GPU of a multi-GPU plan from this one process), or with
 * r->on this process's rank on r->device, the id made by rank 0 and passed through id_file. */
ampc_status ampc_cli_model_create(const ampc_rt_plan *plan, const ampc_cli_rank *r,
                                  const char *id_file, ampc_rt_model **m, char **err);

/* ---- numerics: what changes the model's numbers (numerics.c, with cli.c) --------------------- */

/* Calibration samples: samples[k][i] is input i of sample k. */
typedef struct ampc_cli_samples {
    ampc_tensor **samples;
    int32_t n, n_inputs;
    bool random; /* made up: no --calibrate */
} ampc_cli_samples;

/* What a compile measured of its numbers: --precision auto's search and check, --sparsity
 * prune's error; `note` goes into the library's math string. */
typedef struct ampc_cli_numerics {
    ampc_cli_samples samples;
    struct ampc_auto_result *autop; /* --precision auto (NULL otherwise) */
    char *note;
    ampc_pipeline_report report; /* what the build's passes decided (build_pipeline sets it) */
} ampc_cli_numerics;

/* From cli.c: the model loaded as the command line says (NULL with the reason printed); the
 * pipeline options it asks for, with `kept` moved to f32 (--precision auto's choice); a zeroed
 * host tensor (false with a message naming it when it cannot be held); uniform [-1, 1) floats
 * (integers and bools 0) from *seed. */
ampc_graph *ampc_cli_load_model(const ampc_cli_options *o);
ampc_pipeline_options ampc_cli_pipeline(const ampc_cli_options *o, char *const *kept,
                                        int32_t n_kept);
/* The compile options the command line asks for, with pipeline options po (every compile of a
 * command builds its options here). */
ampc_compile_options ampc_cli_compile_options(const ampc_cli_options *o,
                                              const ampc_pipeline_options *po);
bool ampc_cli_host_tensor(const char *kind, const char *name, ampc_dtype dt, const ampc_shape *s,
                          ampc_tensor *t);
void ampc_cli_fill_random(ampc_tensor *t, uint64_t *seed);
bool ampc_cli_is_auto(const ampc_cli_options *o);
bool ampc_cli_tf32(const ampc_cli_options *o);

/* --precision auto before the build: reads the samples, runs the search and the check of what
 * ships on the reference evaluator, prints the figures. False (printed) on failure, and when the
 * check misses the tolerance without --accept-error. */
bool ampc_cli_auto_search(const ampc_cli_options *o, ampc_cli_numerics *n);
/* After the build: with --precision auto and a GPU, runs the module on the check samples (the
 * check can fail the build, never change it); with --sparsity prune, reports each pruned layer
 * and the pruned model's measured error against the model. False (printed) on failure. */
bool ampc_cli_numerics_after(const ampc_cli_options *o, ampc_module *m, ampc_cli_numerics *n);
void ampc_cli_numerics_free(ampc_cli_numerics *n);
/* Prints "ampc: math: ..." on stderr: what the build computes differently from the model (the
 * module's or graph's math text, "" when exact) and the note. */
void ampc_cli_say_math(const char *math, const char *note);

#endif
