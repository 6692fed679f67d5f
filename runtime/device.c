/*
 * device.c — finding a GPU through the CUDA runtime (never the driver library, so a machine
 * without a driver reports "no CUDA device" as an ordinary error instead of failing to start),
 * and what the runtime records about it.
 */
#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The "no CUDA device: ..." failure for cudaGetDeviceCount's result (rc, n). */
static ampc_status no_device(rt_err *e, cudaError_t rc, int n) {
    int rt = 0, drv = 0;
    char rts[16], drvs[16];
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaDriverGetVersion(&drv);
    rt_cuda_clear();
    rt_cuda_version_str(rt, rts, sizeof rts);
    rt_cuda_version_str(drv, drvs, sizeof drvs);
    if (rc == cudaSuccess)
        return rt_fail(e, AMPC_E_NO_DEVICE,
                       "no CUDA device: cudaGetDeviceCount found %d devices (CUDA runtime %s, "
                       "driver for CUDA %s); check CUDA_VISIBLE_DEVICES",
                       n, rts, drvs);
    const char *why;
    if (rc == cudaErrorInsufficientDriver && drv == 0)
        why = "the NVIDIA driver is not installed or not loaded";
    else if (rc == cudaErrorInsufficientDriver)
        why = "the NVIDIA driver is older than the CUDA runtime: update the driver";
    else if (rc == cudaErrorNoDevice)
        why = "the driver sees no GPU (check CUDA_VISIBLE_DEVICES)";
    else
        why = "the CUDA runtime could not initialise";
    return rt_fail(e, AMPC_E_NO_DEVICE,
                   "no CUDA device: %s (cudaGetDeviceCount: %s: %s; CUDA runtime %s, driver %s%s)",
                   why, cudaGetErrorName(rc), cudaGetErrorString(rc), rts,
                   drv ? "for CUDA " : "version ", drv ? drvs : "0 (none)");
}

/* cudaGetDeviceCount with the no-device cases turned into AMPC_E_NO_DEVICE. */
static ampc_status count_devices(int *n, rt_err *e) {
    *n = 0;
    cudaError_t rc = cudaGetDeviceCount(n);
    if (rc != cudaSuccess || *n <= 0) {
        int got = rc == cudaSuccess ? *n : 0;
        *n = 0;
        return no_device(e, rc, got);
    }
    return AMPC_OK;
}

ampc_status rt_device_open(int32_t index, rt_device *d, rt_err *e) {
    memset(d, 0, sizeof *d);
    int n;
    if (count_devices(&n, e) != AMPC_OK) return e->status;
    if (index < 0 || index >= n)
        return rt_fail(e, AMPC_E_INVALID_ARG, "device %d does not exist: this machine has %d "
                       "CUDA device%s (0 to %d)", index, n, n == 1 ? "" : "s", n - 1);
    struct cudaDeviceProp p;
    RT_CUDA(e, cudaGetDeviceProperties(&p, index));
    d->index = index;
    d->sm = p.major * 10 + p.minor;
    d->sm_count = p.multiProcessorCount;
    d->smem_optin = p.sharedMemPerBlockOptin;
    d->max_threads = p.maxThreadsPerBlock;
    snprintf(d->name, sizeof d->name, "%s", p.name);
    if (p.major < 8)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "device %d (%s) has compute capability %d.%d: ampc "
                       "needs 8.0 (Ampere) or newer", index, p.name, p.major, p.minor);
    return AMPC_OK;
}

ampc_status ampc_rt_device_count(int32_t *count, char **err) {
    rt_err e = {0};
    int n = 0;
    if (count == NULL)
        rt_fail(&e, AMPC_E_INVALID_ARG, "ampc_rt_device_count: count is NULL");
    else if (count_devices(&n, &e) == AMPC_OK)
        *count = n;
    else
        *count = 0;
    return rt_err_give(&e, err);
}

ampc_status ampc_rt_device_info_get(int32_t device, ampc_rt_device_info *info, char **err) {
    rt_err e = {0};
    if (info == NULL) {
        rt_fail(&e, AMPC_E_INVALID_ARG, "ampc_rt_device_info_get: info is NULL");
        return rt_err_give(&e, err);
    }
    memset(info, 0, sizeof *info);
    int n;
    struct cudaDeviceProp p;
    if (count_devices(&n, &e) != AMPC_OK) return rt_err_give(&e, err);
    if (device < 0 || device >= n) {
        rt_fail(&e, AMPC_E_INVALID_ARG, "device %d does not exist: this machine has %d CUDA "
                "device%s (0 to %d)", device, n, n == 1 ? "" : "s", n - 1);
        return rt_err_give(&e, err);
    }
    cudaError_t rc = cudaGetDeviceProperties(&p, device);
    if (rc != cudaSuccess) {
        rt_fail_cuda(&e, rc, "cudaGetDeviceProperties(&p, device)", __func__, __FILE__, __LINE__);
        return rt_err_give(&e, err);
    }
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->major = p.major;
    info->minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    info->memory_bytes = (int64_t)p.totalGlobalMem;
    int v = 0;
    (void)cudaDriverGetVersion(&v);
    info->driver_version = v;
    v = 0;
    (void)cudaRuntimeGetVersion(&v);
    info->runtime_version = v;
    info->supported = p.major >= 8;
    return rt_err_give(&e, err);
}

/* The planning scratch for algorithm searches and timings. */
enum { PLAN_SCRATCH_BYTES = 256 << 20 };

ampc_status rt_plan_scratch(rt_ctx *ctx, size_t need, rt_err *e) {
    if (ctx->scratch != NULL && ctx->scratch_bytes >= need) return AMPC_OK;
    size_t want = need;
    if (ctx->scratch == NULL) {
        size_t free_b = 0, total = 0;
        RT_CUDA(e, cudaMemGetInfo(&free_b, &total));
        size_t dflt = PLAN_SCRATCH_BYTES < free_b / 4 ? PLAN_SCRATCH_BYTES : free_b / 4;
        dflt &= ~(size_t)255;
        if (dflt > want) want = dflt;
    } else {
        RT_CUDA(e, cudaFree(ctx->scratch));
    }
    ctx->scratch = NULL;
    ctx->scratch_bytes = 0;
    if (want > 0) RT_CUDA(e, cudaMalloc(&ctx->scratch, want));
    ctx->scratch_bytes = want;
    return AMPC_OK;
}

ampc_status rt_plan_scratch_free(rt_ctx *ctx, rt_err *e) {
    void *bufs[2] = {ctx->scratch, ctx->flush};
    ctx->scratch = ctx->flush = NULL;
    ctx->scratch_bytes = ctx->flush_bytes = 0;
    for (int i = 0; i < 2; i++)
        if (bufs[i] != NULL) RT_CUDA(e, cudaFree(bufs[i]));
    return AMPC_OK;
}

const char *rt_tune_mode(const rt_ctx *ctx) {
    return ctx->opts && !ctx->opts->tune_cold ? "hot" : "cold";
}

/* The flush buffer of cold timings: three times the L2 cache; false when it cannot be made. */
static bool flush_ready(rt_ctx *ctx) {
    if (ctx->flush != NULL) return true;
    int l2 = 0;
    if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ctx->dev.index) != cudaSuccess ||
        l2 <= 0 || cudaMalloc(&ctx->flush, 3 * (size_t)l2) != cudaSuccess) {
        ctx->flush = NULL;
        rt_cuda_clear();
        return false;
    }
    ctx->flush_bytes = 3 * (size_t)l2;
    return true;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Cold timing (rt_time_calls): each call alone between two events, after the flush; the median. */
static float time_cold(rt_ctx *ctx, rt_timed_call call, void *arg, cudaStream_t s, int rounds) {
    enum { MAX_ROUNDS = 16 };
    cudaEvent_t ev[2 * MAX_ROUNDS] = {NULL};
    float ms[MAX_ROUNDS];
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    bool ok = call(arg, s);
    for (int r = 0; ok && r < rounds; r++)
        ok = cudaEventCreate(&ev[2 * r]) == cudaSuccess &&
             cudaEventCreate(&ev[2 * r + 1]) == cudaSuccess &&
             cudaMemsetAsync(ctx->flush, r & 0xff, ctx->flush_bytes, s) == cudaSuccess &&
             cudaEventRecord(ev[2 * r], s) == cudaSuccess && call(arg, s) &&
             cudaEventRecord(ev[2 * r + 1], s) == cudaSuccess;
    ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
    for (int r = 0; ok && r < rounds; r++)
        ok = cudaEventElapsedTime(&ms[r], ev[2 * r], ev[2 * r + 1]) == cudaSuccess;
    (void)cudaStreamSynchronize(s);
    for (int i = 0; i < 2 * rounds; i++)
        if (ev[i]) (void)cudaEventDestroy(ev[i]);
    rt_cuda_clear();
    if (!ok) return -1.0f;
    qsort(ms, (size_t)rounds, sizeof ms[0], cmp_float);
    return ms[rounds / 2];
}

float rt_time_calls(rt_ctx *ctx, rt_timed_call call, void *arg, cudaStream_t s, int rounds) {
    if (strcmp(rt_tune_mode(ctx), "cold") == 0 && flush_ready(ctx)) return time_cold(ctx, call, arg, s, rounds);
    cudaEvent_t a = NULL, b = NULL;
    float ms = -1.0f;
    bool ok = cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess &&
              call(arg, s) && cudaEventRecord(a, s) == cudaSuccess;
    for (int r = 0; ok && r < rounds; r++) ok = call(arg, s);
    if (ok && cudaEventRecord(b, s) == cudaSuccess && cudaEventSynchronize(b) == cudaSuccess &&
        cudaEventElapsedTime(&ms, a, b) == cudaSuccess)
        ms /= (float)rounds;
    else
        ms = -1.0f;
    (void)cudaStreamSynchronize(s);
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    rt_cuda_clear();
    return ms;
}
