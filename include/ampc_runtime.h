/*
 * ampc_runtime.h — run a compiled model on an NVIDIA GPU.
 *
 * The compiler (ampc.h) turns a graph into an executable plan: generated CUDA kernels plus
 * cuBLASLt matmuls and cuDNN convolutions, and a memory plan that places every tensor at a fixed
 * offset of one device buffer. This header loads such a plan onto a GPU (a "model") and runs it.
 * Plans come from ampc itself (the JIT path, or a generated library's model.c); their layout is
 * internal (runtime/plan.h), so this header only names them.
 *
 * A complete program (the plan comes from a generated library, here `resnet_plan()`):
 *
 *     #include <ampc_runtime.h>
 *     #include <stdio.h>
 *     #include <stdlib.h>
 *
 *     int main(void) {
 *         char *err = NULL;
 *         int32_t n = 0;
 *         if (ampc_rt_device_count(&n, &err) != AMPC_OK) {      // no GPU: an ordinary error
 *             fprintf(stderr, "%s\n", err); free(err); return 1;
 *         }
 *         ampc_rt_model *m;
 *         if (ampc_rt_model_create(resnet_plan(), 0, &m, &err) != AMPC_OK) {
 *             fprintf(stderr, "%s\n", err); free(err); return 1;
 *         }
 *         static float x[1 * 3 * 224 * 224], y[1 * 1000];      // host memory is fine
 *         ampc_tensor in = {AMPC_DTYPE_F32, {4, {1, 3, 224, 224}}, x};
 *         ampc_tensor out = {AMPC_DTYPE_F32, {2, {1, 1000}}, y};
 *         for (int i = 0; i < 100; i++)                         // first run captures a CUDA graph
 *             if (ampc_rt_model_run(m, &in, 1, &out, 1, NULL, &err) != AMPC_OK) {
 *                 fprintf(stderr, "%s\n", err); free(err); break;
 *             }
 *         printf("y[0] = %g\n", y[0]);                          // complete when run returns
 *         ampc_rt_model_destroy(m);
 *     }
 *
 * Conventions
 *   - The runtime links the CUDA runtime (libcudart) only, never the driver library (libcuda):
 *     a program using it starts on a machine without a GPU or driver, and every call that needs
 *     a GPU then returns AMPC_E_NO_DEVICE with a message that starts "no CUDA device: " and says
 *     why (no driver, a driver older than the runtime, no GPU visible...).
 *   - cuBLASLt and cuDNN are opened on first use (dlopen by soname: libcublasLt.so.13 then .12;
 *     libcudnn.so.9), so a plan needs only the libraries its steps use. A library that is missing
 *     or older than required (cuBLASLt 12.0, cuDNN 9.0) fails model creation with AMPC_E_CUDA
 *     and a message naming the library, the version found and the version required.
 *   - Every function that takes `char **err` sets *err (when err is not NULL) to a malloc'ed
 *     message on failure (the caller frees it) and to NULL on success. Messages say what was
 *     expected and what was found; failures inside a plan step name the step (index and the
 *     graph nodes it covers); failed CUDA, cuBLASLt and cuDNN calls name the call, the source
 *     location and the library's own message.
 *   - A model belongs to one device and one thread at a time: calls on one model must not
 *     overlap. Different models may run concurrently. Calls restore the caller's current device.
 *   - Tensors are dense, row-major, with exactly the dtype and shape the model declares.
 */
#ifndef AMPC_RUNTIME_H
#define AMPC_RUNTIME_H

#include "ampc.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------- */

/* The number of CUDA devices visible to this process. On success *count >= 1. When there is no
 * usable device, returns AMPC_E_NO_DEVICE with *count = 0 and *err starting "no CUDA device: "
 * followed by the reason (the driver is not installed, is older than the CUDA runtime ampc was
 * built with, or sees no GPU, with cudaGetDeviceCount's own error). Never aborts. */
AMPC_API ampc_status ampc_rt_device_count(int32_t *count, char **err);

/* What ampc knows about one device. */
typedef struct ampc_rt_device_info {
    char name[256];          /* "NVIDIA H200" */
    int32_t major, minor;    /* compute capability (9, 0) */
    int32_t sm_count;        /* streaming multiprocessors */
    int64_t memory_bytes;    /* total device memory */
    int32_t driver_version;  /* the CUDA version the driver supports, 1000*major + 10*minor */
    int32_t runtime_version; /* the CUDA runtime in use, same encoding (13000 for 13.0) */
    bool supported;          /* compute capability >= 8.0: ampc can run models on it */
} ampc_rt_device_info;

/* Fills *info for `device` (0-based). AMPC_E_NO_DEVICE as for ampc_rt_device_count,
 * AMPC_E_INVALID_ARG for an index out of range or a NULL info (*info is then zeroed when not
 * NULL). */
AMPC_API ampc_status ampc_rt_device_info_get(int32_t device, ampc_rt_device_info *info,
                                             char **err);

/* ---------------------------------------------------------------------------------------------
 * Provider libraries
 * ------------------------------------------------------------------------------------------- */

typedef enum ampc_rt_library {
    AMPC_RT_LIB_CUBLASLT = 0, /* $AMPC_CUBLASLT_PATH, else libcublasLt.so.13, else .12; 12.0 or
                               * newer */
    AMPC_RT_LIB_CUDNN = 1,    /* $AMPC_CUDNN_PATH, else libcudnn.so.9; version 9.0 or newer */
    AMPC_RT_LIB_CUSPARSELT = 2, /* $AMPC_CUSPARSELT_PATH, else libcusparseLt.so.0; 0.8 or newer.
                                 * Optional: 2:4 sparse GEMMs run dense without it */
    AMPC_RT_LIB_COUNT
} ampc_rt_library;

/* Opens the library (once per process: it stays loaded) and reports its version as the library
 * encodes it (cuBLASLt 13.1.0 is 130100, cuDNN 9.19.0 is 91900; cuSPARSELt 0.8.1, whose own
 * encoding differs, is reported as 801) and, when `path` is not NULL, a
 * malloc'ed path of the file that was loaded (the caller frees it). Needs no GPU. On failure
 * (AMPC_E_CUDA: not found, a symbol missing, or too old; AMPC_E_INVALID_ARG: unknown library)
 * *version is 0, *path NULL, and *err names the library, the sonames tried and the version found
 * against the version required. */
AMPC_API ampc_status ampc_rt_library_version(ampc_rt_library lib, int64_t *version, char **path,
                                             char **err);

/* The tuning cache (the choices model creation made by timing, kept for the next creation on the
 * same GPU with the same library; docs/libraries.md): its file's path into path (n bytes) and,
 * when entries is not NULL, how many entries the file holds now (0 when it does not exist yet).
 * false when the cache is off (AMPC_TUNE_CACHE=off or empty, or no HOME to put it under) or the
 * path does not fit. */
AMPC_API bool ampc_rt_tuning_cache(char *path, size_t n, int32_t *entries);

/* ---------------------------------------------------------------------------------------------
 * Diagnostics
 * ------------------------------------------------------------------------------------------- */

/* The runtime prints nothing itself. What the AMPC_*_VERBOSE variables ask it to tell (the
 * steps' CUDA graph, cuBLASLt's and cuDNN's choices and timings, 2:4 decisions, tuning-cache
 * lookups: docs/libraries.md) goes one line at a time (no newline) to the function set here,
 * for the whole process, with `user`; NULL (the default) drops it. `ampc run` prints the lines
 * on stderr. Lines come from whichever thread creates or runs a model: fn must be thread-safe
 * and must not call back into the runtime. */
typedef void (*ampc_rt_log_fn)(void *user, const char *line);
AMPC_API void ampc_rt_set_log(ampc_rt_log_fn fn, void *user);

/* ---------------------------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------------------------- */

/* How a model is created and run. None changes what a model computes beyond the choice among
 * implementations that agree (each library step is proved against the others at creation).
 * ampc_rt_options_init fills the defaults and then the environment's overrides, the variable
 * named beside each field (read when it is called: docs/options.md lists them all); a program
 * sets fields after it and passes the struct to ampc_rt_model_create_opts (or a generated
 * library's <name>_create_opts). Models made without options take ampc_rt_options_init's. */
typedef struct ampc_rt_options {
    /* launching */
    bool cuda_graphs;        /* AMPC_CUDA_GRAPHS=0: false, each run launches the steps one by
                                one (default true: the first run captures a CUDA graph) */
    bool io_graph;           /* AMPC_IO_GRAPH=0: false, a run's copies in and out go on the
                                stream around the steps' graph instead of in one graph with it */
    bool zero_copy;          /* AMPC_ZERO_COPY=0: false, device tensors are copied in and out
                                instead of being bound in place */
    bool pdl;                /* AMPC_PDL=0: false, no programmatic dependent launch */
    int32_t multi_gpu_graphs; /* AMPC_MULTI_GPU_GRAPHS: 1 a CUDA graph per GPU of a model with
                                all-reduces, 0 none even without, -1 (default) one only without */
    double nccl_timeout_s;   /* AMPC_NCCL_TIMEOUT_S: how long a multi-GPU run or a rank's setup
                                may wait for the others (default 300) */
    /* matmuls */
    int64_t gemm_workspace;  /* AMPC_GEMM_WORKSPACE: the most workspace bytes a cuBLASLt matmul
                                may use (-1, default: the runtime's own cap, 32 MiB) */
    int64_t gemm_reduction;  /* AMPC_GEMM_REDUCTION: cuBLASLt's split-K reduction schemes (a
                                mask; 0 no split-K; -1, default: all) */
    bool gemm_tune;          /* AMPC_GEMM_TUNE=1: time cuBLASLt's candidates (default: its
                                heuristic's first) */
    int32_t gemm_kernel;     /* AMPC_GEMM_KERNEL: 1 ampc's own GEMM kernel wherever there is
                                one, 0 cuBLASLt, -1 (default) the faster of the two at creation */
    /* convolutions */
    int32_t cudnn_graph;     /* AMPC_CUDNN_GRAPH: 1 cuDNN's graph API (fails where it cannot),
                                0 the legacy calls, -1 (default) the faster, remembered in the
                                tuning cache, -2 (any other value) the faster, timed anew */
    int32_t cudnn_tries;     /* AMPC_CUDNN_TRIES: graph-API configurations timed a heuristic
                                mode (0, default: 8) */
    bool cudnn_heur_b;       /* AMPC_CUDNN_HEUR containing B: heuristic mode B's list too */
    /* 2:4 sparse matmuls */
    int32_t sparse;          /* AMPC_SPARSE: 0 off (dense), 1 sparse wherever it runs, 2
                                cuSPARSELt only, 3 ampc's 2:4 kernel only, -1 (default) the
                                fastest of dense and the two */
    bool sparse_check;       /* AMPC_SPARSE_CHECK=0: false, no comparison with the dense GEMM */
    bool sparse_search;      /* AMPC_SPARSE_SEARCH=0: false, cuSPARSELt's default algorithm */
    /* timing at creation */
    bool tune_cold;          /* AMPC_TUNE_COLD=0: false, candidates are timed with warm caches
                                (default: L2 flushed between calls) */
    /* what the log is told (ampc_rt_set_log) */
    int32_t graph_verbose;   /* AMPC_GRAPH_VERBOSE: 1 the graph's summary, 2 and its nodes */
    int32_t cudnn_verbose;   /* AMPC_CUDNN_VERBOSE: 1 each convolution's choice, 2 and the
                                graph API's planning */
    bool gemm_verbose;       /* AMPC_GEMM_VERBOSE (set and not 0): each matmul's choice */
    bool sparse_verbose;     /* AMPC_SPARSE_VERBOSE (set and not 0): each 2:4 decision */
    bool tune_verbose;       /* AMPC_TUNE_VERBOSE (set and not 0): tuning-cache lookups */
} ampc_rt_options;

AMPC_API void ampc_rt_options_init(ampc_rt_options *o);

/* ---------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------- */

/* A compiled plan (opaque here; produced by ampc's code generator). */
typedef struct ampc_rt_plan ampc_rt_plan;
/* A plan loaded on one device: its kernels, one device arena for every activation, the weights
 * (uploaded once), library descriptors and algorithms chosen once, a stream, and after the first
 * run a CUDA graph of the steps. */
typedef struct ampc_rt_model ampc_rt_model;

/* Loads `plan` onto `device`. The model copies what it needs: the plan (its weights and images
 * included) may be freed once this returns.
 *
 * Multi-GPU: a plan partitioned over N GPUs (`ampc --gpus N --partition tensor`; plan->n_ranks
 * is N, docs/multi-gpu.md) loads rank r onto device `device + r`, so N consecutive devices must
 * be visible, and one process drives them all: NCCL (libnccl.so.2, opened on first use; a
 * single-GPU model never needs it) gets one communicator per GPU (ncclCommInitRank within one
 * group over a fresh unique id). The model then behaves as one: inputs are host memory or
 * memory of any of its GPUs and are copied to every GPU, outputs come from rank 0, `stream` is a stream
 * of `device` and every GPU's work is ordered after it and before its end; ampc_rt_model_time
 * times all GPUs together; steps are launched one by one unless the environment variable
 * AMPC_MULTI_GPU_GRAPHS=1 (read at creation) asks for CUDA graphs: the second run then captures
 * one graph per GPU, all-reduces included, and later runs replay them (a failed capture falls
 * back, ampc_rt_model_graph_status says why); ampc_rt_model_profile is AMPC_E_UNSUPPORTED. A run waits for the GPUs at most
 * AMPC_NCCL_TIMEOUT_S seconds (default 300) while polling NCCL for asynchronous errors; a failed
 * or stuck collective aborts the communicators and the model then refuses to run (AMPC_E_CUDA
 * with the first failure), so destroy it. Fewer than N visible devices is AMPC_E_NO_DEVICE with
 * both counts in the message; a single rank's plan (plan->ranks NULL) is AMPC_E_INVALID_ARG. Creation checks the plan, loads each kernel image
 * (the cubin built for the device's exact architecture, else the PTX, which the driver compiles),
 * allocates the arena, the weights and one workspace shared by every library step, plans every
 * matmul (cuBLASLt heuristic) and convolution (cuDNN algorithm search) once, and runs each
 * library step once to prove it works. On success *out is the model (ampc_rt_model_destroy).
 * On failure *out is NULL and the status says what failed:
 *   AMPC_E_INVALID_ARG  NULL plan or out; a plan that is malformed (a version this runtime does
 *                       not read, a tensor outside its buffer, a step writing the weights...);
 *                       a device index out of range
 *   AMPC_E_NO_DEVICE    no CUDA device or driver (the message starts "no CUDA device: ")
 *   AMPC_E_UNSUPPORTED  the device's compute capability is below 8.0; no image for the device;
 *                       a step no provider can run (asymmetric convolution pads, no cuBLASLt
 *                       algorithm for a matmul...), naming the step
 *   AMPC_E_OOM          the arena and weights together exceed the device's whole memory
 *                       (checked before allocating; the message gives the sizes and the largest
 *                       input or output)
 *   AMPC_E_CUDA         a CUDA/cuBLASLt/cuDNN call failed (out of device memory, a PTX the
 *                       driver rejects, with its log), or a library is missing or too old */
AMPC_API ampc_status ampc_rt_model_create(const ampc_rt_plan *plan, int32_t device,
                                          ampc_rt_model **out, char **err);
/* The same with options (NULL: ampc_rt_options_init's); the model keeps its own copy. */
AMPC_API ampc_status ampc_rt_model_create_opts(const ampc_rt_plan *plan, int32_t device,
                                               const ampc_rt_options *options,
                                               ampc_rt_model **out, char **err);

/* One process per GPU. A multi-GPU plan can also run as N processes (one per GPU, on one or
 * several machines), each loading ONE rank of it: rank 0 makes the group's NCCL id with
 * ampc_rt_nccl_id_create, the application hands those bytes to every other process through its
 * own channel (MPI_Bcast, a file, a socket), and every process calls
 * ampc_rt_model_create_rank with its rank and the same id (examples/mpi, docs/multi-gpu.md). */

/* NCCL's unique id of one group of ranks (an ncclUniqueId): opaque bytes, copied as is. */
typedef struct ampc_rt_nccl_id {
    char bytes[128];
} ampc_rt_nccl_id;

/* Makes a fresh id for a group (rank 0 calls it once per group; every rank must then use the
 * same id). Opens NCCL (libnccl.so.2); needs no GPU, but NCCL picks the network interface the
 * other ranks will connect to (NCCL_SOCKET_IFNAME chooses it). On failure *id is zeroed and:
 *   AMPC_E_INVALID_ARG  NULL id
 *   AMPC_E_CUDA         NCCL missing or too old (named with the version found), or its
 *                       ncclGetUniqueId failed (no usable network interface...) */
AMPC_API ampc_status ampc_rt_nccl_id_create(ampc_rt_nccl_id *id, char **err);

/* Loads rank `rank` of a plan partitioned over n_ranks GPUs onto `device` of this process, its
 * NCCL communicator joining the group that `id` names. Every rank of the group must be created,
 * each by its own process (or thread) with the same id: creation waits for all of them, at most
 * AMPC_NCCL_TIMEOUT_S seconds (default 300), then fails with AMPC_E_CUDA naming the rank and
 * the timeout (a thread then stays blocked inside NCCL: end the process). The model then runs,
 * enqueues, times and is destroyed as any model, except that every rank must make the same
 * calls in the same order (each run is one collective over the group): its inputs are this
 * process's (host memory or memory of `device`), its steps are this rank's, and its outputs are
 * this rank's copy of the model's outputs, which in a tensor-parallel plan are the same on every
 * rank (each is written after the all-reduce, or computed by every rank: the partition pass
 * never splits a value that is a graph output). Waiting for a run
 * polls NCCL as for one process over N GPUs: a failed collective (a peer process gone) or a run
 * that does not end within AMPC_NCCL_TIMEOUT_S aborts the communicator, and the model then
 * refuses to run. ampc_rt_model_destroy must be called by every rank (NCCL's teardown waits for
 * the peers on one machine) unless the model is broken.
 * A single-GPU plan is accepted only as rank 0 of 1 (it then loads as ampc_rt_model_create
 * would, id unused and may be NULL), so that a program can always call this function; otherwise
 * on failure *out is NULL and, besides ampc_rt_model_create's statuses:
 *   AMPC_E_INVALID_ARG  NULL plan, out or id; an id of zeros (not made by ampc_rt_nccl_id_create);
 *                       rank outside [0, n_ranks); n_ranks that differs from the plan's; a
 *                       single-GPU plan asked for more than one rank; one rank's own plan
 *                       (create from the model's plan, which lists every rank's) */
AMPC_API ampc_status ampc_rt_model_create_rank(const ampc_rt_plan *plan, int32_t device,
                                               int32_t rank, int32_t n_ranks,
                                               const ampc_rt_nccl_id *id, ampc_rt_model **out,
                                               char **err);
/* The same with options (NULL: ampc_rt_options_init's). */
AMPC_API ampc_status ampc_rt_model_create_rank_opts(const ampc_rt_plan *plan, int32_t device,
                                                    int32_t rank, int32_t n_ranks,
                                                    const ampc_rt_nccl_id *id,
                                                    const ampc_rt_options *options,
                                                    ampc_rt_model **out, char **err);

/* The number of GPUs (ranks) a plan is partitioned over: 1 for a single-GPU plan, 0 for NULL.
 * Needs no GPU. */
AMPC_API int32_t ampc_rt_plan_n_ranks(const ampc_rt_plan *plan);

/* Runs the model: copies inputs[i] into the model, runs every step, copies the outputs into
 * outputs[i].data, and returns when the outputs are complete (it synchronises the stream).
 * `inputs` and `outputs` follow the model's input and output order (ampc_rt_model_io); each
 * tensor must have exactly the declared dtype and shape, and its data may be host memory
 * (pageable or pinned) or device memory of the model's device; the caller owns every buffer,
 * and an output buffer must hold the output's bytes. Pinned host or device buffers are copied
 * asynchronously on the stream; pageable host memory is copied through CUDA's staging buffers,
 * which makes those copies synchronous with the host. `stream` is a cudaStream_t of the model's
 * device, or NULL for the model's own stream; all work is ordered on it.
 * Everything is validated before any memory is touched: on failure nothing was copied or run.
 *   AMPC_E_INVALID_ARG  NULL model; counts that differ from the model's (or NULL arrays with
 *                       nonzero counts); NULL data for a tensor with bytes; device memory of
 *                       another device
 *   AMPC_E_DTYPE        a tensor whose dtype differs from the declared one
 *   AMPC_E_SHAPE        a tensor whose shape differs from the declared one
 *   AMPC_E_CUDA         a copy, launch or library call failed (the message names the step);
 *                       after an error inside a kernel the device may be unusable: destroy the
 *                       model.
 * The first run captures the steps into a CUDA graph and later runs replay it (the steps always
 * see the same addresses). When every tensor of a run is device memory, the copies in and out are
 * nodes of one more graph around that one, so that the run is a single graph launch (the copies
 * are re-pointed when the caller's buffers differ from the last such run's). When capture is
 * impossible, runs launch the steps one by one
 * (ampc_rt_model_graph_status says why); results are the same either way. Setting the
 * environment variable AMPC_CUDA_GRAPHS=0 before creating a model turns capture off. */
AMPC_API ampc_status ampc_rt_model_run(ampc_rt_model *m, const ampc_tensor *inputs, int32_t n_in,
                                       ampc_tensor *outputs, int32_t n_out, void *stream,
                                       char **err);

/* As ampc_rt_model_run, but returns once the work is enqueued on the stream, without waiting:
 * the outputs are complete when the stream reaches that point (record an event, or synchronise),
 * and every buffer must stay valid until then. The model is then busy until the stream gets
 * there: enqueue it again on the same stream only (work on another stream would race with this
 * one for the model's memory). Errors inside kernels show at the next call that synchronises.
 * The checks before anything is touched are ampc_rt_model_run's. This is the call to use from a
 * framework's stream, next to its own work, as CUDA graph replays are. NULL is the model's own
 * stream, not the legacy default stream: to order with work there, pass cudaStreamLegacy. A
 * model with a Loop whose stop depends on data (a plan with jumps) waits on the stream at each
 * jump to read the loop's flag, so its enqueue returns only once the stream has passed the last
 * jump. */
AMPC_API ampc_status ampc_rt_model_enqueue(ampc_rt_model *m, const ampc_tensor *inputs,
                                           int32_t n_in, ampc_tensor *outputs, int32_t n_out,
                                           void *stream, char **err);

/* As ampc_rt_model_run, but the steps are launched one by one (never from the graph) with a CUDA
 * event before and after each, and step_ms[i] receives step i's GPU time in milliseconds
 * (step_ms must hold ampc_rt_model_n_steps(m) values; on failure its contents are unspecified).
 * The events add a little time: use it to find slow steps, ampc_rt_model_run to time the model. */
AMPC_API ampc_status ampc_rt_model_profile(ampc_rt_model *m, const ampc_tensor *inputs,
                                           int32_t n_in, ampc_tensor *outputs, int32_t n_out,
                                           void *stream, double *step_ms, char **err);

/* Times the model's GPU work: `iterations` launches of its steps (the CUDA graph once captured),
 * each between two CUDA events, computing on the inputs last copied into the model (so run it
 * once first: a run on host memory copies them, and so does the first run on each set of device
 * buffers bound in place; outputs are not copied out). ms[i] receives launch i's time in milliseconds. Input and output
 * copies are not included: this is the latency a caller keeping tensors on the device sees.
 *   AMPC_E_INVALID_ARG  NULL model, ms NULL with iterations > 0, no run yet
 *   AMPC_E_CUDA         a launch failed (the message names the step) */
AMPC_API ampc_status ampc_rt_model_time(ampc_rt_model *m, int32_t iterations, double *ms,
                                        char **err);

/* Frees everything the model holds (waiting for its pending work first). NULL is fine. */
AMPC_API void ampc_rt_model_destroy(ampc_rt_model *m);

/* The model's input (is_output false) or output number i: its name, dtype and shape. Returns false
 * (and leaves the out-parameters alone) for an index out of range. `name` stays valid until the
 * model is destroyed; any out-parameter may be NULL. */
AMPC_API bool ampc_rt_model_io(const ampc_rt_model *m, bool is_output, int32_t i,
                               const char **name, ampc_dtype *dtype, ampc_shape *shape);
/* The number of inputs / outputs / steps (0 for a NULL model). */
AMPC_API int32_t ampc_rt_model_n_inputs(const ampc_rt_model *m);
AMPC_API int32_t ampc_rt_model_n_outputs(const ampc_rt_model *m);
AMPC_API int32_t ampc_rt_model_n_steps(const ampc_rt_model *m);
/* Step i's label (the graph nodes it covers, "Add 'add_3'") and provider ("kernel", "cuBLASLt",
 * "cuSPARSELt" or "ampc-2:4" (a 2:4 GEMM that runs sparse), "ampc-gemm" (a GEMM on ampc's own
 * dense kernel), "cuDNN", "copy", "memset"); "" for an index out of range. Valid until destroy. */
AMPC_API const char *ampc_rt_model_step_label(const ampc_rt_model *m, int32_t i);
AMPC_API const char *ampc_rt_model_step_provider(const ampc_rt_model *m, int32_t i);
/* The work of step i, for achieved-throughput figures (`ampc run --profile`): *flops the
 * floating-point operations of a matmul or convolution (2 per multiply-add; 0 for other steps,
 * whose cost is memory), *bytes the bytes it reads plus writes (each buffer it touches counted
 * once). false for an index out of range (both 0). */
AMPC_API bool ampc_rt_model_step_work(const ampc_rt_model *m, int32_t i, double *flops,
                                      double *bytes);
/* The 2:4 sparsity decision of a GEMM step whose weight carries the sparsity pass's mark
 * (`ampc --sparsity verify|prune`; docs/sparsity.md). At creation the runtime plans such a step
 * up to three ways, dense (cuBLASLt), cuSPARSELt (when it can be loaded) and ampc's own 2:4
 * tensor-core kernel (when the plan has one for the step), times each on the model's own
 * buffers, and keeps the fastest that agrees with dense (AMPC_SPARSE=0 forces dense, =1 the
 * faster sparse one where one runs, =cusparselt or =kernel that one). */
typedef struct ampc_rt_sparse_choice {
    bool sparse;      /* the step runs sparse (cuSPARSELt or ampc's own 2:4 kernel) */
    double dense_ms;  /* milliseconds per call measured at creation; -1 when not measured */
    double sparse_ms; /* the same for cuSPARSELt; -1 when it could not be planned */
    const char *note; /* why, in words: "ampc-2:4 is the fastest (1.41x dense)", "AMPC_SPARSE=1
                       * asks for cuSPARSELt", "no cuSPARSELt plan: ...", "dense is faster ...";
                       * valid until destroy */
    double kernel_ms; /* the same for ampc's generated 2:4 kernel; -1 when the plan has none
                       * for the step or it was not planned */
    const char *runs_on; /* "cuBLASLt" (dense), "cuSPARSELt" or "ampc-2:4"; static */
} ampc_rt_sparse_choice;
/* Fills *out for step i and returns true when step i is a GEMM with a 2:4 weight; false (and
 * *out untouched) for any other step, an index out of range or a NULL argument. */
AMPC_API bool ampc_rt_model_step_sparse(const ampc_rt_model *m, int32_t i,
                                        ampc_rt_sparse_choice *out);
/* Device memory the model holds, in bytes: arena + weights + library workspace. */
AMPC_API int64_t ampc_rt_model_device_bytes(const ampc_rt_model *m);

/* How runs launch the steps:
 *   AMPC_RT_GRAPH_PENDING  no run yet: the next run tries to capture a CUDA graph
 *   AMPC_RT_GRAPH_ON       runs replay the captured graph
 *   AMPC_RT_GRAPH_OFF      runs launch the steps directly; *why (when not NULL) says why:
 *                          "turned off by AMPC_CUDA_GRAPHS=0" or the failed capture call and
 *                          its error. Valid until destroy. */
typedef enum ampc_rt_graph_status {
    AMPC_RT_GRAPH_PENDING = 0,
    AMPC_RT_GRAPH_ON,
    AMPC_RT_GRAPH_OFF,
} ampc_rt_graph_status;
AMPC_API ampc_rt_graph_status ampc_rt_model_graph_status(const ampc_rt_model *m, const char **why);
/* The nodes of the captured steps' graph (kernels, copies, memsets: a step may launch several,
 * a library's GEMM its split-K reduction too); -1 while no graph is on (a multi-GPU model too). */
AMPC_API int32_t ampc_rt_model_graph_nodes(const ampc_rt_model *m);

/* Whether runs whose tensors are all device memory of the model's device, 256-byte aligned,
 * read the inputs and write the outputs where they are (no copies: the steps' graph is captured
 * on those buffers, a few buffer sets kept), or copy them in and out (false; *why, when not
 * NULL, a static string saying why: a cuDNN or 2:4 step touches an input or output,
 * AMPC_ZERO_COPY=0, ...). A run on other buffers always copies. */
AMPC_API bool ampc_rt_model_io_in_place(const ampc_rt_model *m, const char **why);

/* ---------------------------------------------------------------------------------------------
 * Generated libraries
 * ------------------------------------------------------------------------------------------- */

/* A library written by `ampc model.onnx -o model.so`, opened by path. Each library also exports
 * its own C functions (model.h: <name>_create / _run / _destroy); this is the generic way in, for
 * programs that open any ampc model (`ampc run model.so` does). */
typedef struct ampc_rt_artifact ampc_rt_artifact;

/* Opens the library at `path` (dlopen, RTLD_LOCAL: several libraries live side by side) and
 * reads its plan (and its weights, from the sidecar file next to it when they are not
 * embedded). Needs no GPU. On failure *out is NULL and:
 *   AMPC_E_INVALID_ARG  NULL path or out
 *   AMPC_E_IO           the file cannot be opened as a shared library (dlopen's message), or
 *                       the weights file is missing or has the wrong size
 *   AMPC_E_UNSUPPORTED  not an ampc library (no ampc_artifact_v1), or one built by an ampc whose
 *                       plan layout differs (versions and sizes named) */
AMPC_API ampc_status ampc_rt_load(const char *path, ampc_rt_artifact **out, char **err);
/* The library's plan, for ampc_rt_model_create; valid until ampc_rt_unload. */
AMPC_API const ampc_rt_plan *ampc_rt_artifact_plan(const ampc_rt_artifact *a);
/* The library's C prefix and the ampc version that wrote it ("" for NULL). */
AMPC_API const char *ampc_rt_artifact_name(const ampc_rt_artifact *a);
AMPC_API const char *ampc_rt_artifact_version(const ampc_rt_artifact *a);
/* What the library computes differently from the model as written: the `math:` line its
 * compile printed, with what --precision auto measured ("" when the library is exact). */
AMPC_API const char *ampc_rt_artifact_math(const ampc_rt_artifact *a);
/* Closes the library; models created from its plan must be destroyed first. NULL is fine. */
AMPC_API void ampc_rt_unload(ampc_rt_artifact *a);

#ifdef __cplusplus
}
#endif
#endif /* AMPC_RUNTIME_H */
