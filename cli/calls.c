/*
 * calls.c — `ampc run --iterations`'s second figure: the latency of a whole call as an
 * application sees it, next to the steps alone (cli.c's benchmark).
 *
 * The inputs are copied once into device buffers, outputs get device buffers, and each timed
 * call is ampc_rt_model_enqueue on them between two CUDA events on one stream (what a caller
 * who keeps its tensors on the GPU pays: the input and output copies, or the I/O graph that
 * holds them, plus the runtime's host work when the GPU waits for it), then a wait. The host
 * time inside the enqueue call is measured too: when it exceeds the GPU time of the steps, the
 * host is the bottleneck of back-to-back calls.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli/calls.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static size_t tensor_bytes(const ampc_tensor *t) {
    return (size_t)ampc_shape_numel(&t->shape) * ampc_dtype_size(t->dtype);
}

/* Device copies of n tensors (inputs: with their data; outputs: uninitialised). */
static bool device_copies(const ampc_tensor *src, int32_t n, bool copy, ampc_tensor *dst) {
    for (int32_t i = 0; i < n; i++) {
        dst[i] = src[i];
        dst[i].data = NULL;
        size_t bytes = tensor_bytes(&src[i]);
        if (bytes == 0) continue;
        if (cudaMalloc(&dst[i].data, bytes) != cudaSuccess) return false;
        if (copy && cudaMemcpy(dst[i].data, src[i].data, bytes, cudaMemcpyDefault) != cudaSuccess)
            return false;
    }
    return true;
}

static void device_free(ampc_tensor *t, int32_t n) {
    for (int32_t i = 0; t && i < n; i++)
        if (t[i].data) (void)cudaFree(t[i].data);
}

/* Times `count` calls (gpu_ms: event to event, host_us: inside the enqueue call). */
static bool timed_calls(ampc_rt_model *m, const ampc_tensor *in, int32_t ni, ampc_tensor *out,
                        int32_t no, cudaStream_t s, cudaEvent_t ev[2], int32_t count,
                        double *gpu_ms, double *host_us, char **err) {
    for (int32_t i = 0; i < count; i++) {
        if (cudaEventRecord(ev[0], s) != cudaSuccess) return false;
        double t0 = now_us();
        if (ampc_rt_model_enqueue(m, in, ni, out, no, s, err) != AMPC_OK) return false;
        double t1 = now_us();
        float ms = 0;
        if (cudaEventRecord(ev[1], s) != cudaSuccess || cudaEventSynchronize(ev[1]) != cudaSuccess ||
            cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess)
            return false;
        if (gpu_ms) gpu_ms[i] = ms;
        if (host_us) host_us[i] = t1 - t0;
    }
    return true;
}

bool ampc_cli_time_calls(ampc_rt_model *m, const ampc_tensor *in, int32_t ni,
                         const ampc_tensor *out, int32_t no, int32_t iterations, int32_t warmup) {
    ampc_tensor *din = calloc((size_t)ni + 1, sizeof *din), *dout = calloc((size_t)no + 1, sizeof *dout);
    double *gpu = calloc((size_t)iterations + 1, sizeof *gpu), *host = calloc((size_t)iterations + 1, sizeof *host);
    cudaStream_t s = NULL;
    cudaEvent_t ev[2] = {NULL, NULL};
    char *err = NULL;
    bool ok = din && dout && gpu && host && device_copies(in, ni, true, din) &&
              device_copies(out, no, false, dout) &&
              cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
              cudaEventCreate(&ev[0]) == cudaSuccess && cudaEventCreate(&ev[1]) == cudaSuccess;
    /* on a stream of the caller's, then on the legacy default stream (where a framework's
     * default stream puts work, PyTorch's for one) */
    const struct { cudaStream_t s; const char *name; } on[2] = {{s, "a stream"},
                                                                 {cudaStreamLegacy, "the legacy default stream"}};
    for (int k = 0; k < 2 && ok; k++) {
        ok = timed_calls(m, din, ni, dout, no, on[k].s, ev, warmup, NULL, NULL, &err) &&
             timed_calls(m, din, ni, dout, no, on[k].s, ev, iterations, gpu, host, &err);
        if (!ok) break;
        qsort(gpu, (size_t)iterations, sizeof *gpu, cmp_double);
        qsort(host, (size_t)iterations, sizeof *host, cmp_double);
        printf("whole call on device buffers, %s (enqueue between CUDA events, %d calls): median "
               "%.4f ms, p90 %.4f ms; host time in the call: median %.1f us\n", on[k].name,
               iterations, gpu[iterations / 2], gpu[(int32_t)(0.9 * (iterations - 1))],
               host[iterations / 2]);
    }
    if (ok) {
        const char *why = NULL;
        if (ampc_rt_model_io_in_place(m, &why))
            printf("inputs and outputs on device buffers: bound in place (no copies)\n");
        else
            printf("inputs and outputs on device buffers: copied (%s)\n", why ? why : "");
    } else {
        cudaError_t rc = cudaGetLastError();
        fprintf(stderr, "ampc: timing whole calls failed: %s\n",
                err ? err : rc != cudaSuccess ? cudaGetErrorString(rc) : "out of memory");
    }
    free(err);
    for (int k = 0; k < 2; k++)
        if (ev[k]) (void)cudaEventDestroy(ev[k]);
    if (s) (void)cudaStreamDestroy(s);
    device_free(din, ni);
    device_free(dout, no);
    free(din);
    free(dout);
    free(gpu);
    free(host);
    return ok;
}
