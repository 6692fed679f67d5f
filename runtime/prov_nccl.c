/*
 * prov_nccl.c — the NCCL provider: all-reduce steps of multi-GPU plans (runtime/plan.h's
 * ampc_rt_allreduce) and the communicators they run on.
 *
 * NCCL is opened with dlopen on first use (libnccl.so.2) and its functions bound with dlsym, like
 * cuBLASLt and cuDNN: a single-GPU model never needs it installed. Its header is used for types
 * only.
 *
 * Communicators: rt_nccl_comms_init makes one per local rank from a unique id, inside one NCCL
 * group (ncclCommInitRank for each local rank): one process driving every GPU passes every rank
 * (what ncclCommInitAll does); one process per GPU would pass its own rank and an id handed
 * around out of band (MPI), which is why the id is a parameter. That case (one rank of a group
 * whose other ranks live in other processes) goes through rt_nccl_comm_init_rank: its
 * ncclCommInitRank blocks until every rank has joined, so it runs on a helper thread that the
 * caller waits for with a timeout, and a peer that never comes is an error, not a hang.
 *
 * A step's launch is one ncclAllReduce on the rank's stream. One thread drives every rank, so
 * the model (ranks.c) wraps the all-reduces of all ranks in rt_nccl_group_start / _end: NCCL
 * then launches them together instead of blocking on the first. Failures inside a collective
 * (a peer gone, a network error) surface through rt_nccl_comm_check, which the model polls
 * while it waits, and rt_nccl_comms_destroy(abort = true) frees communicators stuck in one.
 */
#define _GNU_SOURCE /* clock_gettime */
#include "runtime/internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the library --------------------------------------------------------------------------- */

#define NCCL_FUNCS(X)                                                                              \
    X(ncclGetVersion)                                                                              \
    X(ncclGetErrorString)                                                                          \
    X(ncclGetLastError)                                                                            \
    X(ncclGetUniqueId)                                                                             \
    X(ncclCommInitRank)                                                                            \
    X(ncclCommFinalize)                                                                            \
    X(ncclCommDestroy)                                                                             \
    X(ncclCommAbort)                                                                               \
    X(ncclCommGetAsyncError)                                                                       \
    X(ncclGroupStart)                                                                              \
    X(ncclGroupEnd)                                                                                \
    X(ncclAllReduce)

static struct {
#define X(f) __typeof__(&f) f;
    NCCL_FUNCS(X)
#undef X
} nc;

static bool nccl_bind(void *h, const char **missing, int64_t *version) {
    *missing = NULL;
#define X(f)                                                                                       \
    if (*missing == NULL) {                                                                        \
        void *p_ = dlsym(h, #f);                                                                   \
        if (p_ == NULL) *missing = #f;                                                             \
        memcpy(&nc.f, &p_, sizeof p_);                                                             \
    }
    NCCL_FUNCS(X)
#undef X
    int v = 0;
    if (nc.ncclGetVersion == NULL || nc.ncclGetVersion(&v) != ncclSuccess) v = 0;
    *version = v;
    return *missing == NULL;
}

static const char *const nccl_sonames[] = {"libnccl.so.2", NULL};
/* 2.14: ncclGetLastError and ncclCommGetAsyncError as used here; the encoding is
 * major * 10000 + minor * 100 + patch (NCCL_VERSION_CODE since 2.9). */
rt_lib rt_nccl_lib = {
    .name = "NCCL", .sonames = nccl_sonames, .min_version = 21400, .bind = nccl_bind};

ampc_status rt_fail_nccl(rt_err *e, int rc, const char *stmt, const char *func, const char *file,
                         int line) {
    const char *last = nc.ncclGetLastError ? nc.ncclGetLastError(NULL) : NULL;
    const char *name = nc.ncclGetErrorString ? nc.ncclGetErrorString((ncclResult_t)rc) : NULL;
    rt_cuda_clear();
    return rt_fail_call(e, "NCCL", rc, name, last && *last ? last : "(no detail)", stmt, func,
                        file, line);
}

/* ---- communicators ------------------------------------------------------------------------- */

ampc_status rt_nccl_comms_init(int32_t n_ranks, const void *unique_id, int32_t n_local,
                               const int32_t *ranks, const int32_t *devices, void **comms,
                               rt_err *e) {
    for (int32_t i = 0; i < n_local; i++) comms[i] = NULL;
    if (rt_lib_open(&rt_nccl_lib, e) != AMPC_OK) return e->status;
    ncclUniqueId id;
    if (unique_id) memcpy(&id, unique_id, sizeof id);
    else RT_NCCL(e, nc.ncclGetUniqueId(&id));
    RT_NCCL(e, nc.ncclGroupStart());
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; i < n_local && st == AMPC_OK; i++) {
        cudaError_t rc = cudaSetDevice(devices[i]);
        if (rc != cudaSuccess)
            st = rt_fail_cuda(e, rc, "cudaSetDevice(devices[i])", __func__, __FILE__, __LINE__);
        ncclResult_t nr = ncclSuccess;
        if (st == AMPC_OK)
            nr = nc.ncclCommInitRank((ncclComm_t *)&comms[i], n_ranks, id, ranks[i]);
        if (nr != ncclSuccess)
            st = rt_fail_nccl(e, nr, "ncclCommInitRank(&comms[i], n_ranks, id, ranks[i])",
                              __func__, __FILE__, __LINE__);
    }
    ncclResult_t end = nc.ncclGroupEnd(); /* always: it closes the group */
    if (st == AMPC_OK && end != ncclSuccess)
        st = rt_fail_nccl(e, end, "ncclGroupEnd()", __func__, __FILE__, __LINE__);
    if (st != AMPC_OK) {
        rt_nccl_comms_destroy(comms, n_local, true);
        rt_err_prefix(e, "setting up NCCL over %d GPUs: ", n_ranks);
    }
    return st;
}

_Static_assert(sizeof(ncclUniqueId) == RT_NCCL_ID_BYTES, "ncclUniqueId is 128 bytes");

ampc_status rt_nccl_unique_id(void *id, rt_err *e) {
    memset(id, 0, RT_NCCL_ID_BYTES);
    if (rt_lib_open(&rt_nccl_lib, e) != AMPC_OK) return e->status;
    ncclUniqueId u;
    RT_NCCL(e, nc.ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
    return AMPC_OK;
}

/* What the thread making one rank's communicator shares with the caller waiting for it. The
 * last of the two to finish with it frees it: the caller when the thread is done, else the
 * thread (after aborting a communicator nobody waits for any more). */
typedef struct init_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, abandoned;
    ncclUniqueId id;
    int32_t n_ranks, rank, device;
    ncclComm_t comm;
    ncclResult_t nr;
    cudaError_t cr;
} init_job;

static void *init_thread(void *arg) {
    init_job *j = arg;
    j->cr = cudaSetDevice(j->device);
    if (j->cr == cudaSuccess) j->nr = nc.ncclCommInitRank(&j->comm, j->n_ranks, j->id, j->rank);
    pthread_mutex_lock(&j->mu);
    j->done = true;
    bool abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) {
        if (j->cr == cudaSuccess && j->nr == ncclSuccess) (void)nc.ncclCommAbort(j->comm);
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
    }
    return NULL;
}

ampc_status rt_nccl_comm_init_rank(int32_t n_ranks, const void *unique_id, int32_t rank,
                                   int32_t device, double timeout_s, void **comm, rt_err *e) {
    *comm = NULL;
    if (rt_lib_open(&rt_nccl_lib, e) != AMPC_OK) return e->status;
    init_job *j = calloc(1, sizeof *j);
    if (j == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    pthread_mutex_init(&j->mu, NULL);
    /* the wait below is on the monotonic clock: a change of the wall clock neither cuts it
     * short nor stretches it */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    memcpy(&j->id, unique_id, sizeof j->id);
    j->n_ranks = n_ranks, j->rank = rank, j->device = device;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, init_thread, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
        return rt_fail(e, AMPC_E_OOM, "cannot start a thread for NCCL's setup (error %d)", rc);
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_s > 1e9) timeout_s = 1e9; /* about 30 years: no time_t overflow below */
    double whole = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec + timeout_s;
    until.tv_sec = (time_t)whole;
    until.tv_nsec = (long)((whole - (double)until.tv_sec) * 1e9);
    pthread_mutex_lock(&j->mu);
    while (!j->done)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) break;
    bool done = j->done;
    if (!done) j->abandoned = true; /* the thread frees the job when NCCL returns, if ever */
    pthread_mutex_unlock(&j->mu);
    if (!done)
        return rt_fail(e, AMPC_E_CUDA, "rank %d of %d: the NCCL communicator did not come up "
                       "within %.0f s (AMPC_NCCL_TIMEOUT_S): every rank must create its model "
                       "with the same NCCL id (made once by rank 0) and reach this point; a "
                       "thread stays blocked inside NCCL, so end the process", rank, n_ranks,
                       timeout_s);
    ampc_status st = AMPC_OK;
    if (j->cr != cudaSuccess)
        st = rt_fail_cuda(e, j->cr, "cudaSetDevice(device)", __func__, __FILE__, __LINE__);
    else if (j->nr != ncclSuccess)
        st = rt_fail_nccl(e, j->nr, "ncclCommInitRank(&comm, n_ranks, id, rank)", __func__,
                          __FILE__, __LINE__);
    else
        *comm = j->comm;
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
    if (st != AMPC_OK) rt_err_prefix(e, "setting up NCCL as rank %d of %d: ", rank, n_ranks);
    return st;
}

void rt_nccl_comms_destroy(void **comms, int32_t n, bool abort) {
    if (nc.ncclCommDestroy == NULL) return;
    if (abort) {
        for (int32_t i = 0; i < n; i++)
            if (comms[i]) (void)nc.ncclCommAbort((ncclComm_t)comms[i]);
    } else {
        /* Finalizing flushes a communicator's work and may wait for its peers: grouped, so that
         * one thread can finalize every rank. */
        (void)nc.ncclGroupStart();
        for (int32_t i = 0; i < n; i++)
            if (comms[i]) (void)nc.ncclCommFinalize((ncclComm_t)comms[i]);
        (void)nc.ncclGroupEnd();
        for (int32_t i = 0; i < n; i++)
            if (comms[i]) (void)nc.ncclCommDestroy((ncclComm_t)comms[i]);
    }
    for (int32_t i = 0; i < n; i++) comms[i] = NULL;
}

ampc_status rt_nccl_comm_check(void *comm, rt_err *e) {
    ncclResult_t async = ncclSuccess;
    RT_NCCL(e, nc.ncclCommGetAsyncError((ncclComm_t)comm, &async));
    if (async != ncclSuccess && async != ncclInProgress)
        return rt_fail_nccl(e, async, "ncclCommGetAsyncError(comm, &async) reported", __func__,
                            __FILE__, __LINE__);
    return AMPC_OK;
}

ampc_status rt_nccl_group_start(rt_err *e) {
    RT_NCCL(e, nc.ncclGroupStart());
    return AMPC_OK;
}

ampc_status rt_nccl_group_end(rt_err *e) {
    RT_NCCL(e, nc.ncclGroupEnd());
    return AMPC_OK;
}

/* ---- the provider ---------------------------------------------------------------------------- */

/* NCCL's type for an ampc dtype; false when NCCL has none. */
static bool nccl_type(ampc_dtype t, ncclDataType_t *out) {
    switch (t) {
    case AMPC_DTYPE_F32: *out = ncclFloat32; return true;
    case AMPC_DTYPE_F16: *out = ncclFloat16; return true;
    case AMPC_DTYPE_BF16: *out = ncclBfloat16; return true;
    case AMPC_DTYPE_F64: *out = ncclFloat64; return true;
    case AMPC_DTYPE_I32: *out = ncclInt32; return true;
    case AMPC_DTYPE_I64: *out = ncclInt64; return true;
    case AMPC_DTYPE_I8: *out = ncclInt8; return true;
    case AMPC_DTYPE_U8: *out = ncclUint8; return true;
    default: return false;
    }
}

static ampc_status allreduce_supports(const rt_ctx *ctx, const ampc_rt_plan *p,
                                      const ampc_rt_step *s, rt_err *e) {
    const ampc_rt_allreduce *a = &s->allreduce;
    if (p->n_ranks < 2)
        return rt_fail(e, AMPC_E_INVALID_ARG, "an all-reduce step in a plan for one GPU "
                       "(n_ranks %d): all-reduces belong to multi-GPU plans", p->n_ranks);
    ncclDataType_t t;
    if (!nccl_type(a->dtype, &t))
        return rt_fail(e, AMPC_E_UNSUPPORTED, "all-reduce of %s: NCCL sums f32, f16, bf16, f64, "
                       "i32, i64, i8 and u8", rt_dtype_name(a->dtype));
    int64_t bytes;
    if (a->count < 0 || __builtin_mul_overflow(a->count, (int64_t)rt_dtype_size(a->dtype), &bytes))
        return rt_fail(e, AMPC_E_INVALID_ARG, "all-reduce of %lld elements", (long long)a->count);
    if (a->src.space != AMPC_RT_ARENA || a->dst.space != AMPC_RT_ARENA)
        return rt_fail(e, AMPC_E_INVALID_ARG, "all-reduce source and destination must lie in "
                       "the arena");
    if (rt_check_ref(p, a->src, "all-reduce source", false, bytes == 0, e) != AMPC_OK ||
        rt_check_ref(p, a->dst, "all-reduce destination", true, bytes == 0, e) != AMPC_OK ||
        rt_check_ref_size(a->src, "all-reduce source", bytes, (int64_t)rt_dtype_size(a->dtype),
                          e) != AMPC_OK ||
        rt_check_ref_size(a->dst, "all-reduce destination", bytes,
                          (int64_t)rt_dtype_size(a->dtype), e) != AMPC_OK)
        return e->status;
    if (a->src.offset != a->dst.offset && a->src.offset < a->dst.offset + bytes &&
        a->dst.offset < a->src.offset + bytes)
        return rt_fail(e, AMPC_E_INVALID_ARG, "all-reduce source [%lld, +%lld) and destination "
                       "[%lld, +%lld) overlap without being the same buffer",
                       (long long)a->src.offset, (long long)bytes, (long long)a->dst.offset,
                       (long long)bytes);
    if (ctx != NULL && rt_lib_open(&rt_nccl_lib, e) != AMPC_OK) return e->status;
    return AMPC_OK;
}

typedef struct ar_state {
    const void *src;
    void *dst;
    size_t count;
    ncclDataType_t type;
    ncclComm_t comm;
} ar_state;

static ampc_status allreduce_plan(rt_ctx *ctx, const ampc_rt_step *s, void **state,
                                  size_t *workspace, rt_err *e) {
    *workspace = 0;
    if (ctx->nccl == NULL)
        return rt_fail(e, AMPC_E_INVALID_ARG, "an all-reduce step needs the communicator of a "
                       "multi-GPU model: create the model from the whole plan, not one rank's");
    ar_state *st = calloc(1, sizeof *st);
    if (st == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    const ampc_rt_allreduce *a = &s->allreduce;
    st->src = rt_ref_ptr(ctx, a->src);
    st->dst = rt_ref_ptr(ctx, a->dst);
    st->count = (size_t)a->count;
    (void)nccl_type(a->dtype, &st->type);
    st->comm = (ncclComm_t)ctx->nccl;
    *state = st;
    return AMPC_OK;
}

static ampc_status allreduce_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    (void)ctx;
    ar_state *st = state;
    if (st->count == 0) return AMPC_OK;
    RT_NCCL(e, nc.ncclAllReduce(st->src, st->dst, st->count, st->type, ncclSum, st->comm, stream));
    return AMPC_OK;
}

static void allreduce_release(rt_ctx *ctx, void *state) {
    (void)ctx;
    free(state);
}

const rt_provider rt_provider_nccl = {
    .name = "NCCL",
    .supports = allreduce_supports,
    .plan = allreduce_plan,
    .launch = allreduce_launch,
    .release = allreduce_release,
};
