/*
 * support.h — helpers shared by the Criterion suites: tensors from literals, one-call evaluation
 * of a graph, and closeness checks that report the worst element.
 */
#ifndef AMPC_TEST_SUPPORT_H
#define AMPC_TEST_SUPPORT_H

#include <criterion/criterion.h>

#include "ir/ir.h"
#include "ampc_runtime.h"

/* A shape from a literal list: SHAPE(2, 3) is rank 2, dims {2, 3}; SHAPE() is a scalar. */
#define SHAPE(...) t_shape((int64_t[]){0, ##__VA_ARGS__}, (int32_t)(sizeof((int64_t[]){0, ##__VA_ARGS__}) / sizeof(int64_t)) - 1)
ampc_shape t_shape(const int64_t *dims_with_lead, int32_t rank);

/* A graph input / constant of the given dtype and shape (data copied for constants). */
ampc_value *t_input(ampc_graph *g, const char *name, ampc_dtype t, ampc_shape s);
ampc_value *t_const(ampc_graph *g, ampc_dtype t, ampc_shape s, const void *data);
/* f32 constant from doubles (converted), i64 constant from int64s. */
ampc_value *t_const_f32(ampc_graph *g, ampc_shape s, const double *vals);
ampc_value *t_const_i64(ampc_graph *g, ampc_shape s, const int64_t *vals);

/* A tensor view of caller memory. */
ampc_tensor t_tensor(ampc_dtype t, ampc_shape s, void *data);

/* Marks `v` as the graph's only output, evaluates with `inputs`, asserts success (printing the
 * graph's diagnostics otherwise) and returns the output (free with ampc_tensor_free). */
ampc_tensor t_eval1(ampc_graph *g, ampc_value *v, const ampc_tensor *inputs, int32_t n_inputs);

/* Asserts got has shape `s` and every element within atol + rtol*|expected| of expected[i];
 * on failure reports the worst element (index, got, expected). */
void t_expect_close(const ampc_tensor *got, ampc_shape s, const double *expected, double rtol,
                    double atol);
/* Asserts exact integer (or bool) contents. */
void t_expect_ints(const ampc_tensor *got, ampc_shape s, const int64_t *expected);

/* ---- GPU against the reference evaluator ---------------------------------------------------- */

/* Fills an input tensor (data already allocated) from its name and a random state. */
typedef void (*t_fill_fn)(ampc_tensor *t, const char *name, uint64_t *seed);
/* The tolerance for outputs of dtype t (integers and bool always compare exactly). */
typedef void (*t_tol_fn)(ampc_dtype t, double *rtol, double *atol);

typedef struct t_gpu_check {
    t_fill_fn fill;
    uint64_t seed;
    t_tol_fn tolerance;  /* NULL: rtol/atol below, at least 1e-2 for f16/bf16 outputs */
    double rtol, atol;
    const ampc_pipeline_options *pipeline; /* NULL: the default pipeline */
    bool tf32;           /* TF32 math for f32 matmuls and convolutions (default: full f32) */
    const char *what;    /* prefixes failure messages (a dtype, a case name) */
} t_gpu_check;

/* True when got matches ref element by element: integers and bool exactly, floats within
 * atol + rtol * |ref| (NaN matches NaN, infinities exactly). Otherwise false, with the worst
 * element (index, got, expected) in msg. */
bool t_tensors_close(const ampc_tensor *got, const ampc_tensor *ref, double rtol, double atol,
                     const char *name, char *msg, size_t cap);

/* Skips the calling test, with the runtime's reason, unless device 0 can run models (a CUDA
 * device of compute capability 8.0 or newer); returns that device's description. Under
 * AMPC_REQUIRE_GPU=1 (scripts/gpu-check.sh) the test fails instead: on the GPU machine a GPU test
 * that cannot reach its GPU is a failure, not a skip. */
ampc_rt_device_info t_skip_without_gpu(void);

/* The skips a GPU suite may make on the GPU machine, each reason starting with its class's words,
 * which scripts/gpu-check.sh recognises (any other skip fails the check there):
 *   "needs N CUDA devices, M visible"   more GPUs than the machine has (fails when none at all is
 *                                       visible under AMPC_REQUIRE_GPU=1)
 *   "needs cuSPARSELt: ..."             the optional library is not installed
 *   "runs only without ...: ..."        a test of the no-GPU / no-library path, which a machine
 *                                       that has the GPU or library cannot reach (CI runs it) */
bool t_require_gpu(void);
void t_skip_needs_devices(int want, int visible);
void t_skip_needs_cusparselt(const char *why);
void t_skip_only_without(const char *what, const char *why);

/* Fills g's inputs with c->fill, evaluates g on the reference evaluator, compiles it (PTX, no
 * cache) and runs it on the GPU with every output poisoned first (so an element no kernel writes
 * shows), and asserts that every output matches. Skips the test when there is no CUDA device.
 * Destroys g. */
void t_gpu_vs_reference(ampc_graph *g, const t_gpu_check *c);

/* Evaluates a and b on the reference evaluator with the same inputs and asserts they have as
 * many outputs, each matching within atol + rtol * |a's| (t_tensors_close), naming the worst
 * element. */
void t_expect_same_outputs(ampc_graph *a, ampc_graph *b, const ampc_tensor *in, int32_t n_in,
                           double rtol, double atol);

/* t_expect_same_outputs on inputs of a's names, dtypes and shapes filled by fill from seed. */
void t_expect_same_outputs_filled(ampc_graph *a, ampc_graph *b, t_fill_fn fill, uint64_t seed,
                                  double rtol, double atol);

/* Case i of a test's table of forms, built with its floats in dtype t (0: the form's own). */
typedef ampc_graph *(*t_case_build)(size_t i, ampc_dtype t);
/* For cases 0 .. n-1: the graph a GPU build runs (the pipeline with gpu_build) computes on the
 * reference evaluator what the graph as built does (inputs by fill from seed + i), within rtol
 * and atol; check (may be NULL) then looks at the optimised graph. */
void t_expect_gpu_build_same(t_case_build build, size_t n, t_fill_fn fill, uint64_t seed,
                             double rtol, double atol,
                             void (*check)(size_t i, const ampc_graph *optimised));
/* For cases 0 .. n-1, in f32 and in f16: t_gpu_vs_reference at tol32 and tol16, each failure
 * named by what(i) and the dtype. */
void t_gpu_vs_reference_cases(t_case_build build, size_t n, const char *(*what)(size_t i),
                              t_fill_fn fill, uint64_t seed, double tol32, double tol16);

/* Runs pass `pass` on g twice with options o (its record fields are set here): the first run
 * must change g, the second must not (a pass leaves what it made alone). */
void t_expect_second_run_unchanged(ampc_graph *g, const char *pass, ampc_pipeline_options o);

/* The number of live nodes of op `op` in g. */
int32_t t_count_op(const ampc_graph *g, ampc_opcode op);
/* A t_fill_fn for f32 tensors: uniform values in [-1, 1) from the seed (LCG). */
void t_fill_uniform_f32(ampc_tensor *t, const char *name, uint64_t *seed);

/* Runs `ampc ARGS` (this build's bin/ampc) through the shell, killed after timeout_s seconds
 * (exit status 124, so a command that blocks fails its test without leaving a process behind);
 * returns the exit status and, in *out (malloc'ed), stdout and stderr together, byte for byte. */
int t_ampc(char **out, int timeout_s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The whole file at path, NUL-terminated (malloc'ed); writes text to path (replacing it). */
char *t_read_text(const char *path);
void t_write_text(const char *path, const char *text);

/* A fresh folder /tmp/ampc-TAG-XXXXXX (malloc'ed name); t_rmdir_all removes it with everything
 * in it and frees the name. */
char *t_tmpdir(const char *tag);
void t_rmdir_all(char *dir);

/* Asserts the graph's diagnostics contain `needle` (and prints them when they do not). */
void t_expect_diag(ampc_graph *g, const char *needle);

#endif
