/*
 * cli.h — the commands of the `ampc` executable (main.c parses, cli.c carries them out). Only the
 * executable links these; the library never prints.
 */
#ifndef AMPC_CLI_H
#define AMPC_CLI_H

#include "ampc.h"

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
    bool nchw;             /* --layout nchw */
    int32_t gpus;          /* --gpus N (0: one GPU) */
    bool tensor_parallel;  /* --partition tensor */
    bool data_parallel;    /* --partition data */
    const char *sparsity;  /* --sparsity off|verify|prune (NULL: off) */
    const char *sparsity_layers; /* --sparsity-layers GLOB (prune only) */
    const char *shapes[AMPC_CLI_MAX_LIST];
    const char *disable[AMPC_CLI_MAX_LIST];
    const char *inputs[AMPC_CLI_MAX_LIST];
    const char *keep_fp32[AMPC_CLI_MAX_LIST]; /* --keep-fp32 OP|NODE */
    int n_shapes, n_disable, n_inputs, n_keep_fp32;
    int64_t max_batch;
    int32_t iterations, warmup; /* run: timed launches (0: none) and warm-up launches */
    bool verbose, print_pipeline, reference, profile;
    bool sparse_report; /* `run`: the 2:4 GEMMs' dense / sparse decisions */
} ampc_cli_options;

/* Each returns the process exit code (0 success, 1 failure, 2 usage) after printing. */
int ampc_cli_compile(const ampc_cli_options *o);
int ampc_cli_inspect(const ampc_cli_options *o);
int ampc_cli_run(const ampc_cli_options *o);
int ampc_cli_doctor(const ampc_cli_options *o);

#endif
