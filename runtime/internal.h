/*
 * internal.h — what the runtime's files share and nobody else sees: the error record and the
 * checked-call macros (one family for cudart, cuBLASLt and cuDNN), the provider interface every
 * step kind sits behind, and the per-model context providers work in.
 *
 * The runtime depends on no other part of ampc (a generated library links it alone), so it keeps
 * its own small helpers (dtype sizes and names) instead of calling the compiler's.
 */
#ifndef AMPC_RT_INTERNAL_H
#define AMPC_RT_INTERNAL_H

#include "runtime/runtime.h"

#include <cuda_runtime_api.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors --------------------------------------------------------------------------------- */

/* The first failure of an operation: its status and a malloc'ed message (NULL while none). */
typedef struct rt_err {
    ampc_status status;
    char *msg;
} rt_err;

/* Records a failure (when none is recorded yet) and returns `s`, so `return rt_fail(...)`. */
ampc_status rt_fail(rt_err *e, ampc_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends context to the recorded message ("step 3 (Conv 'c1'): "); no-op without one. */
void rt_err_prefix(rt_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends detail to the recorded message (a JIT log); no-op without one. */
void rt_err_append(rt_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the message to the caller's `err` (or frees it) and returns the status (AMPC_OK with
 * *err = NULL when nothing failed). */
ampc_status rt_err_give(rt_err *e, char **err);
void rt_err_clear(rt_err *e);

/* The failure of a library call: "<stmt> failed in <func> (<file>:<line>): <lib> <code>: <msg>".
 * rc is the library's status; lib_msg its text. The status is AMPC_E_CUDA, or AMPC_E_NO_DEVICE
 * for cudart's no-driver / no-device codes. */
ampc_status rt_fail_call(rt_err *e, const char *lib, int rc, const char *code_name,
                         const char *lib_msg, const char *stmt, const char *func,
                         const char *file, int line);
ampc_status rt_fail_cuda(rt_err *e, int rc, const char *stmt, const char *func, const char *file,
                         int line);
/* Defined by the cuBLASLt and cuDNN providers (they know the library's message functions). */
ampc_status rt_fail_cublas(rt_err *e, int rc, const char *stmt, const char *func,
                           const char *file, int line);
ampc_status rt_fail_cudnn(rt_err *e, int rc, const char *stmt, const char *func,
                          const char *file, int line);
ampc_status rt_fail_nccl(rt_err *e, int rc, const char *stmt, const char *func,
                         const char *file, int line);

/* The checked-call family (STYLE §5): every cudart / cuBLASLt / cuDNN call goes through one of
 * these. On failure it records the statement text, the function, file and line and the
 * library's own message, and returns the status from the enclosing function (which therefore
 * returns ampc_status and leaves its resources owned by a structure that is freed later). Every
 * library reports success as 0. */
#define RT_CHECK_GEN(e, failfn, call)                                                             \
    do {                                                                                           \
        int rt_rc_ = (int)(call);                                                                  \
        if (rt_rc_ != 0) return failfn((e), rt_rc_, #call, __func__, __FILE__, __LINE__);          \
    } while (0)
#define RT_CUDA(e, call) RT_CHECK_GEN(e, rt_fail_cuda, call)
#define RT_CUBLAS(e, call) RT_CHECK_GEN(e, rt_fail_cublas, call)
#define RT_CUDNN(e, call) RT_CHECK_GEN(e, rt_fail_cudnn, call)
#define RT_NCCL(e, call) RT_CHECK_GEN(e, rt_fail_nccl, call)
/* After every kernel launch (ours or a library's): the launch error, if any. */
#define RT_LAUNCH_CHECK(e) RT_CUDA(e, cudaGetLastError())

/* ---- small helpers -------------------------------------------------------------------------- */

/* The work of one plan step (ampc_rt_model_step_work). */
void rt_step_work(const ampc_rt_step *s, double *flops, double *bytes);

/* Bytes per element and the IR's short name ("f32") of a dtype; 0 / "?" when invalid. */
size_t rt_dtype_size(ampc_dtype t);
const char *rt_dtype_name(ampc_dtype t);
/* "[2, 3, 4]" into buf (at least 160 bytes hold any shape); returns buf. */
char *rt_shape_str(const ampc_shape *s, char *buf, size_t size);
/* numel of a shape into *n; false on a negative dim or an overflow. */
bool rt_shape_numel(const ampc_shape *s, int64_t *n);
/* The CUDA version encoding 13000 as "13.0" into buf (16 bytes); returns buf. */
char *rt_cuda_version_str(int v, char *buf, size_t size);
/* A library version major*10000 + minor*100 + patch as "13.1.0" into buf (24 bytes). */
char *rt_lib_version_str(int64_t v, char *buf, size_t size);
/* Clears cudart's last (non-sticky) error after a call whose failure we handled. */
void rt_cuda_clear(void);

/* ---- devices -------------------------------------------------------------------------------- */

typedef struct rt_device {
    int32_t index;
    int32_t sm;              /* 10 * major + minor */
    int32_t sm_count;
    size_t smem_optin;       /* max dynamic shared memory per block after opting in */
    int32_t max_threads;     /* per block */
    char name[256];
} rt_device;

/* Finds device `index`: AMPC_E_NO_DEVICE ("no CUDA device: ...") when none is usable,
 * AMPC_E_INVALID_ARG for an index out of range, AMPC_E_UNSUPPORTED below compute 8.0. */
ampc_status rt_device_open(int32_t index, rt_device *d, rt_err *e);

/* ---- provider libraries ----------------------------------------------------------------------- */

/* A library opened with dlopen on first use and kept for the life of the process. Each provider
 * owns one (a static), lists its functions and knows how to ask the version. */
typedef struct rt_lib {
    const char *name;             /* "cuBLASLt" */
    const char *const *sonames;   /* tried in order, NULL-terminated */
    const char *path_env;         /* (optional) an environment variable naming a file to try
                                   * before the sonames (AMPC_CUSPARSELT_PATH) */
    int64_t min_version;          /* in the library's encoding */
    /* Binds every function the provider uses from `handle`; false names the first missing one
     * in *missing. Sets the version the library reports into *version. */
    bool (*bind)(void *handle, const char **missing, int64_t *version);
    /* state, guarded by a mutex in lib.c */
    bool tried;
    ampc_status status;
    char *fail;                   /* message of a failed open, repeated to every caller */
    void *handle;
    int64_t version;
    char *path;                   /* the file loaded */
} rt_lib;

/* Opens `lib` once per process (thread-safe); AMPC_OK or AMPC_E_CUDA naming the library, the
 * sonames tried with dlerror's text, or the version found vs required. */
ampc_status rt_lib_open(rt_lib *lib, rt_err *e);

extern rt_lib rt_cublaslt_lib;
extern rt_lib rt_cudnn_lib;
extern rt_lib rt_cusparselt_lib;
extern rt_lib rt_nccl_lib;

/* ---- NCCL communicators (prov_nccl.c) -------------------------------------------------------- */

/* Makes the communicators of n_local ranks of an n_ranks group, local rank i (rank ranks[i]) on
 * CUDA device devices[i], into comms[i] (ncclComm_t). unique_id is the group's ncclUniqueId
 * (every process of the group passes the same one), or NULL to make one: then n_local must be
 * n_ranks (one process drives every GPU). On failure every comms[i] is NULL. Changes the
 * current device. */
ampc_status rt_nccl_comms_init(int32_t n_ranks, const void *unique_id, int32_t n_local,
                               const int32_t *ranks, const int32_t *devices, void **comms,
                               rt_err *e);
/* Frees the n communicators of one process (NULL entries are skipped) and sets them NULL; abort
 * (ncclCommAbort) when a collective on them may never end. */
void rt_nccl_comms_destroy(void **comms, int32_t n, bool abort);
/* The size of an ncclUniqueId (and of ampc_rt_nccl_id). */
enum { RT_NCCL_ID_BYTES = 128 };
/* A fresh unique id into id (RT_NCCL_ID_BYTES bytes; zeroed on failure). Opens NCCL. */
ampc_status rt_nccl_unique_id(void *id, rt_err *e);
/* The communicator of rank `rank` of an n_ranks group whose other ranks live in other processes,
 * on CUDA device `device`, into *comm. NCCL's setup waits for every rank: it runs on a helper
 * thread, and after timeout_s seconds without every rank this fails (AMPC_E_CUDA) instead of
 * hanging (the thread, blocked in NCCL, aborts the communicator if setup ever ends). */
ampc_status rt_nccl_comm_init_rank(int32_t n_ranks, const void *unique_id, int32_t rank,
                                   int32_t device, double timeout_s, void **comm, rt_err *e);
/* A failure NCCL found asynchronously on comm (a peer gone, a network error), or AMPC_OK. */
ampc_status rt_nccl_comm_check(void *comm, rt_err *e);
/* Brackets the all-reduces of every local rank so that one thread can launch them all. */
ampc_status rt_nccl_group_start(rt_err *e);
ampc_status rt_nccl_group_end(rt_err *e);

/* ---- the per-model context and the provider interface --------------------------------------- */

/* A translation unit loaded on the device. */
typedef struct rt_unit {
    cudaLibrary_t lib;
    char what[48]; /* the image loaded: "PTX for compute_80", "cubin for sm_90a" */
    bool pdl;      /* built for sm_90 or newer: its kernels wait for their predecessor's grid
                      (ampc::pdl_enter), so they may launch as programmatic dependents */
    char *log;     /* the JIT's error log buffer, kept as long as the unit is loaded */
} rt_unit;

/* An arena range [offset, offset + bytes) that is, for now, the caller's buffer at ptr
 * (io_bind.c: steps re-pointed at the caller's inputs and outputs). */
typedef struct rt_io_bind {
    int64_t offset, bytes;
    char *ptr;
} rt_io_bind;

/* What a provider sees of a model. Pointers are device addresses. */
typedef struct rt_ctx {
    rt_device dev;
    char *arena;              /* arena_bytes, or NULL when 0 */
    int64_t arena_bytes;
    char *weights;            /* weights_bytes, or NULL when 0 */
    int64_t weights_bytes;
    void *workspace;          /* shared by every library step (they run one after another) */
    size_t workspace_bytes;
    rt_unit *units;           /* one loaded library per translation unit */
    int32_t n_units;
    void *cublaslt;           /* cublasLtHandle_t, created by the cuBLASLt provider on demand */
    void *cudnn;              /* cudnnHandle_t, created by the cuDNN provider on demand */
    void *cusparselt;         /* cuSPARSELt's handle (malloc'ed), made by the first 2:4 step */
    void *nccl;               /* ncclComm_t of this rank in a multi-GPU model, else NULL */
    cudaStream_t plan_stream; /* the model's stream: planning work (algorithm search) runs here */
    void *scratch;            /* planning-time workspace for algorithm searches and timings, */
    size_t scratch_bytes;     /* allocated on first need and freed once every step is planned */
    void *flush;              /* what cold timings write to push the operands out of L2: */
    size_t flush_bytes;       /* made and freed with the scratch (rt_time_calls) */
    const rt_io_bind *io_bind; /* while steps are re-pointed at a caller's buffers, else NULL */
    int32_t n_io_bind;
    const ampc_rt_options *opts; /* the model's options (its own copy) */
} rt_ctx;

/* Level 1 (the graph_verbose option) / 2: a count of captured graph g's nodes / and each node,
 * to the log (graph.c); 0: nothing. */
void rt_graph_describe(cudaGraph_t g, int level);

/* The planning scratch (ctx->scratch), at least `need` bytes: made on first need with a quarter
 * of the free device memory up to 256 MiB (or `need`, when more), made again larger when a
 * later caller needs more; the model frees it once every step is planned. */
ampc_status rt_plan_scratch(rt_ctx *ctx, size_t need, rt_err *e);

/* The tuning cache (tune_cache.c): the choice stored under key (the GPU, the library and its
 * version, the problem), copied into val (n bytes); false when there is none, it does not fit
 * or the cache is off (AMPC_TUNE_CACHE=off). */
/* The process's settings that no model owns (options.c, the one reader of the environment): a
 * library's file from its variable (AMPC_CUBLASLT_PATH...; NULL when unset or empty), the
 * tuning cache's file (false: off, or no place for it), and AMPC_TUNE_VERBOSE. */
const char *rt_env_library_path(const char *var);
bool rt_env_tune_cache_path(char *buf, size_t n);
bool rt_env_tune_verbose(void);

/* A diagnostic line (no newline, no "ampc: ") for the function ampc_rt_set_log set; nothing
 * when none is set (log.c). The runtime prints nothing itself. */
void rt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

bool rt_tune_get(const char *key, char *val, size_t n);
/* Records val under key in memory and in the cache file; a failure to write is silent. */
void rt_tune_put(const char *key, const char *val);
/* Drops the entries held in memory: the next use reads the file (AMPC_TUNE_CACHE) again. */
void rt_tune_forget(void);

/* Milliseconds per call of call(arg, s), used to time algorithm candidates at creation; -1 when
 * a call or an event fails (the CUDA error is cleared). After one warm-up call, `rounds` calls
 * on stream s, each timed alone with CUDA events after writing three times the GPU's L2 cache
 * (ctx->flush): the median call, with the operands out of L2 as a model's weights mostly are
 * when it runs. With the tune_cold option off (rt_tune_mode "hot"), `rounds` calls back to back
 * between two events instead, on whatever the caches hold (the mean call). */
typedef bool (*rt_timed_call)(void *arg, cudaStream_t s);
float rt_time_calls(rt_ctx *ctx, rt_timed_call call, void *arg, cudaStream_t s, int rounds);
/* "cold" or "hot": how rt_time_calls times for ctx's model (its tune_cold option); tuning
 * cache keys name it. */
const char *rt_tune_mode(const rt_ctx *ctx);
/* Frees the planning scratch and the flush buffer (once every step is planned). */
ampc_status rt_plan_scratch_free(rt_ctx *ctx, rt_err *e);

/* The device address of a ref (NULL for an absent ref: bytes 0): in the caller's buffer when
 * its arena range is bound to one (c->io_bind), else in the arena or the weights. */
static inline void *rt_ref_ptr(const rt_ctx *c, ampc_rt_ref r) {
    if (r.bytes == 0) return NULL;
    if (r.space == AMPC_RT_WEIGHTS) return c->weights + r.offset;
    for (int32_t i = 0; i < c->n_io_bind; i++)
        if (r.offset >= c->io_bind[i].offset && r.offset < c->io_bind[i].offset + c->io_bind[i].bytes)
            return c->io_bind[i].ptr + (r.offset - c->io_bind[i].offset);
    return c->arena + r.offset;
}

/* Every ref step s reads or writes, the first max of them into out[0..max); returns how many
 * there are (absent refs included), which may exceed max. */
int rt_step_refs(const ampc_rt_step *s, ampc_rt_ref *out, int max);

/* One kind of step: generated kernels, cuBLASLt, cuDNN, copies (STYLE §10: capability is asked,
 * not assumed). A failure message needs no step prefix: the caller adds "step N (label): ". */
typedef struct rt_provider {
    const char *name; /* "kernel", "cuBLASLt", "cuDNN", "copy", "memset", "NCCL" */
    /* Can this provider run step s? With ctx NULL only the static rules are checked (no GPU, no
     * library needed); with a ctx the library is opened and its version checked too. */
    ampc_status (*supports)(const rt_ctx *ctx, const ampc_rt_plan *plan, const ampc_rt_step *s,
                            rt_err *e);
    /* Prepares s once (descriptors, algorithm, kernel handle): *state is the provider's, freed by
     * release (also when plan fails midway); *workspace the bytes of shared workspace it needs. */
    ampc_status (*plan)(rt_ctx *ctx, const ampc_rt_step *s, void **state, size_t *workspace,
                        rt_err *e);
    /* Enqueues the step on `stream` (also while the stream is being captured into a graph). */
    ampc_status (*launch)(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e);
    /* Frees a step's state (NULL is fine). */
    void (*release)(rt_ctx *ctx, void *state);
    /* (optional) Frees per-model resources (library handles) when the model goes. */
    void (*close)(rt_ctx *ctx);
    /* (optional) Recomputes every device address the state holds from the step's refs, with
     * rt_ref_ptr (so after ctx->io_bind changes, at the caller's buffers); AMPC_E_UNSUPPORTED
     * when this state cannot be re-pointed (the step's inputs and outputs are then copied). */
    ampc_status (*rebind)(rt_ctx *ctx, const ampc_rt_step *s, void *state, rt_err *e);
    /* (optional) The 2:4 decision of a step (ampc_rt_model_step_sparse): false when the step is
     * not a 2:4 GEMM. */
    bool (*sparse_choice)(const void *state, ampc_rt_sparse_choice *out);
    /* (optional) What the step runs on when the choice made at load is not the provider itself
     * ("ampc-gemm", "ampc-2:4", "cuSPARSELt" for a GEMM step); NULL when it is. */
    const char *(*runs_on)(const void *state);
} rt_provider;

/* ---- 2:4 sparse GEMMs (prov_cusparselt.c) --------------------------------------------------
 * A GEMM step marked sparse24 is planned by the cuBLASLt provider as usual and then, unless
 * the sparse option is 0 (AMPC_SPARSE=0), on cuSPARSELt and on ampc's own 2:4 kernel (the step's own_kernel) too; the
 * provider times them and keeps the fastest (prov_cublaslt.c, sparse_choose). */

/* The sparse option (AMPC_SPARSE): -1 (unset, "auto"): the fastest; 0: dense; 1: the faster
 * sparse candidate wherever one plans; 2 / 3 (cusparselt / kernel): that one only, wherever it
 * plans. */
typedef enum rt_sparse_mode {
    RT_SPARSE_AUTO = 0,
    RT_SPARSE_OFF,
    RT_SPARSE_FORCE,
    RT_SPARSE_FORCE_CUSPARSELT,
    RT_SPARSE_FORCE_KERNEL,
} rt_sparse_mode;
/* The ways a 2:4 step can run. */
typedef enum rt_sparse_way {
    RT_SPARSE_DENSE = 0,     /* cuBLASLt */
    RT_SPARSE_CUSPARSELT,
    RT_SPARSE_KERNEL,        /* ampc's generated mma.sp kernel */
    RT_SPARSE_WAYS
} rt_sparse_way;
/* "cuBLASLt", "cuSPARSELt", "ampc-2:4" (as --profile and the sparse report name them). */
const char *rt_sparse_way_name(int way);
rt_sparse_mode rt_sparse_mode_get(const ampc_rt_options *o);
/* The cost model: sparse when forced, never when off, else when it ran (sparse_ms >= 0) and is
 * faster than dense (or dense could not be timed: dense_ms < 0). */
bool rt_sparse_pick(rt_sparse_mode mode, double dense_ms, double sparse_ms);
/* Why a step cannot run on cuSPARSELt by its static description alone (no GPU, no library):
 * a sentence, or NULL when it may (the library may still refuse it while planning). */
const char *rt_sparse_gemm_why_not(const ampc_rt_gemm *g);

/* One GEMM planned on cuSPARSELt: descriptors, plan, the compressed weight (device memory). */
typedef struct rt_sparse_gemm rt_sparse_gemm;
/* Opens cuSPARSELt, checks the weight is 2:4 in its sense, plans the product (with cuSPARSELt's
 * own algorithm search on the model's buffers unless the sparse_search option is off) and compresses the
 * weight. *out is NULL on failure, which the caller turns into a dense step with e's message as
 * the note; *workspace the bytes of shared workspace the calls need. */
ampc_status rt_sparse_gemm_plan(rt_ctx *ctx, const ampc_rt_gemm *g, rt_sparse_gemm **out,
                                size_t *workspace, rt_err *e);
/* Enqueues the product (ctx->workspace as its workspace). */
ampc_status rt_sparse_gemm_launch(rt_ctx *ctx, rt_sparse_gemm *sp, cudaStream_t stream, rt_err *e);
void rt_sparse_gemm_release(rt_sparse_gemm *sp);
/* Whether cuSPARSELt's algorithm search chose sp's kernel (false: its default kernel). */
bool rt_sparse_gemm_searched(const rt_sparse_gemm *sp);
/* Destroys ctx's cuSPARSELt handle (model destroy). */
void rt_sparse_close(rt_ctx *ctx);

extern const rt_provider rt_provider_kernel;
extern const rt_provider rt_provider_cublaslt;
extern const rt_provider rt_provider_cudnn;
extern const rt_provider rt_provider_copy;
extern const rt_provider rt_provider_memset;
extern const rt_provider rt_provider_nccl;
extern const rt_provider rt_provider_peer; /* ranks_pipe.c: a pipeline's peer copies */
extern const rt_provider rt_provider_branch; /* prov_branch.c: a data-dependent Loop's jumps */

/* The step after jump step s (index i), whose launch has read its flag (state): its target or
 * i + 1. *back counts the backward jumps taken in a row (loops do not nest); -1 with e set when
 * the loop would run past the step's limit. */
int32_t rt_branch_next(const ampc_rt_step *s, int32_t i, const void *state, int64_t *back,
                       rt_err *e);

/* The provider of a step kind (NULL for an unknown kind). */
const rt_provider *rt_provider_for(uint8_t kind);

/* The static plan check behind ampc_rt_plan_check; model creation runs it first. */
ampc_status rt_plan_check(const ampc_rt_plan *p, rt_err *e);
/* Prepends "step i (label): " (or "step i: ") to e's message. */
void rt_step_prefix(rt_err *e, const ampc_rt_step *s, int32_t i);
/* Bytes a strided batch of row-major matrices spans: ((batch-1)*stride + (rows-1)*ld + cols) *
 * elem (0 when rows or cols is 0; INT64_MAX on overflow). */
int64_t rt_span_bytes(int64_t batch, int64_t stride, int64_t rows, int64_t ld, int64_t cols,
                      int64_t elem);

/* Checks that a ref lies in its space: AMPC_E_INVALID_ARG naming `what` otherwise. `writable`
 * refuses the weights space; `optional` accepts an absent ref (bytes 0). */
ampc_status rt_check_ref(const ampc_rt_plan *p, ampc_rt_ref r, const char *what, bool writable,
                         bool optional, rt_err *e);
/* Checks that a ref holds at least `need` bytes and is aligned to `align` bytes. */
ampc_status rt_check_ref_size(ampc_rt_ref r, const char *what, int64_t need, int64_t align,
                              rt_err *e);

#endif /* AMPC_RT_INTERNAL_H */
