/*
 * doctor.c — `ampc doctor`: what this machine offers ampc, and each problem found with its fix.
 *
 * It reports the GPUs the CUDA runtime sees (name, compute capability, memory, the driver's and
 * runtime's CUDA versions, TF32 / BF16 / 2:4 sparse tensor-core support), the GPUs the driver's
 * management library (NVML, opened by soname when present) sees with their MIG mode and NVLink
 * links, peer access between visible GPUs, the versions of NVRTC, cuBLASLt, cuDNN and NCCL that
 * would be used, and what building a library needs (a C compiler, the runtime archive) plus the
 * kernel cache. The story it ends: a GPU is in the machine but nothing uses it (a driver older
 * than the runtime, CUDA_VISIBLE_DEVICES hiding it, a library missing from the loader's path):
 * each case prints the cause and the fix. Exit status 0 when no problem was found, 1 otherwise.
 */
#define _GNU_SOURCE /* dlopen */
#include "cli/cli.h"

#include "compiler/tool.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int problems;

static void problem(const char *what, const char *fix) {
    problems++;
    printf("  PROBLEM: %s\n    fix: %s\n", what, fix);
}

/* NVML, by soname: nvmlReturn_t is 0 on success; devices are opaque handles. */
typedef struct nvml {
    void *lib;
    int (*init)(void);
    int (*shutdown)(void);
    int (*count)(unsigned *);
    int (*handle)(unsigned, void **);
    int (*name)(void *, char *, unsigned);
    int (*mig)(void *, unsigned *, unsigned *);
    int (*nvlink)(void *, unsigned, int *);
    int (*driver)(char *, unsigned);
} nvml;

static bool nvml_open(nvml *n) {
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) return false;
    *(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
    *(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
    *(void **)&n->count = dlsym(n->lib, "nvmlDeviceGetCount_v2");
    *(void **)&n->handle = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&n->name = dlsym(n->lib, "nvmlDeviceGetName");
    *(void **)&n->mig = dlsym(n->lib, "nvmlDeviceGetMigMode");
    *(void **)&n->nvlink = dlsym(n->lib, "nvmlDeviceGetNvLinkState");
    *(void **)&n->driver = dlsym(n->lib, "nvmlSystemGetDriverVersion");
    if (n->init && n->shutdown && n->count && n->handle && n->name && n->init() == 0) return true;
    dlclose(n->lib);
    n->lib = NULL;
    return false;
}

/* The GPUs the driver sees (NVML), whatever CUDA_VISIBLE_DEVICES says; -1 without NVML. */
static int report_nvml(void) {
    nvml n;
    if (!nvml_open(&n)) {
        printf("driver (NVML): libnvidia-ml.so.1 not found or not usable (no NVIDIA driver)\n");
        return -1;
    }
    unsigned count = 0;
    char buf[96] = "?";
    if (n.driver) n.driver(buf, sizeof buf);
    n.count(&count);
    printf("driver (NVML): version %s, %u GPU%s in the machine\n", buf, count, count == 1 ? "" : "s");
    for (unsigned i = 0; i < count; i++) {
        void *d = NULL;
        if (n.handle(i, &d) != 0) continue;
        char name[96] = "?";
        n.name(d, name, sizeof name);
        unsigned mig = 0, pending = 0;
        bool has_mig = n.mig && n.mig(d, &mig, &pending) == 0;
        int links = 0;
        for (unsigned l = 0; n.nvlink && l < 18; l++) {
            int on = 0;
            if (n.nvlink(d, l, &on) == 0 && on) links++;
        }
        printf("  GPU %u: %s; MIG %s; %d NVLink link%s active\n", i, name,
               has_mig ? (mig ? "on" : "off") : "not supported", links, links == 1 ? "" : "s");
        if (has_mig && mig)
            printf("    note: with MIG on, CUDA sees MIG instances, not the whole GPU: run ampc "
                   "on an instance (CUDA_VISIBLE_DEVICES=MIG-<uuid>, see nvidia-smi -L)\n");
    }
    n.shutdown();
    dlclose(n.lib);
    return (int)count;
}

/* The GPUs CUDA sees, each with what ampc can use on it; returns their number (0 on error). */
static int report_cuda(int machine_gpus) {
    int32_t n = 0;
    char *err = NULL;
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (ampc_rt_device_count(&n, &err) != AMPC_OK) {
        printf("CUDA: %s\n", err ? err : "no device");
        char fix[512];
        if (machine_gpus > 0 && cvd)
            snprintf(fix, sizeof fix, "CUDA_VISIBLE_DEVICES='%s' hides the %d GPU%s the driver "
                     "sees: unset it or list them (CUDA_VISIBLE_DEVICES=0,1...)", cvd,
                     machine_gpus, machine_gpus == 1 ? "" : "s");
        else if (err && strstr(err, "older than the CUDA runtime"))
            snprintf(fix, sizeof fix, "update the NVIDIA driver to one that supports CUDA %d.%d "
                     "(see the CUDA release notes' driver table)", CUDART_VERSION / 1000,
                     CUDART_VERSION % 1000 / 10);
        else if (machine_gpus > 0)
            snprintf(fix, sizeof fix, "the driver sees GPUs but CUDA cannot use them: check "
                     "that the driver and the CUDA runtime match, and the /dev/nvidia* permissions");
        else
            snprintf(fix, sizeof fix, "install the NVIDIA driver (and check that nvidia-smi "
                     "lists the GPU); without a GPU, ampc still compiles models and libraries");
        problem("no CUDA device usable", fix);
        free(err);
        return 0;
    }
    printf("CUDA: %d device%s visible%s%s%s\n", n, n == 1 ? "" : "s", cvd ? " (CUDA_VISIBLE_DEVICES=" : "",
           cvd ? cvd : "", cvd ? ")" : "");
    if (machine_gpus > n && !cvd)
        problem("the driver sees more GPUs than CUDA does",
                "check MIG mode and the /dev/nvidia* device permissions");
    for (int32_t i = 0; i < n; i++) {
        ampc_rt_device_info d;
        if (ampc_rt_device_info_get(i, &d, &err) != AMPC_OK) {
            printf("  device %d: %s\n", i, err ? err : "");
            free(err);
            continue;
        }
        printf("  device %d: %s, compute capability %d.%d, %d SMs, %.1f GiB; driver for CUDA "
               "%d.%d, runtime %d.%d\n", i, d.name, d.major, d.minor, d.sm_count,
               (double)d.memory_bytes / (1 << 30), d.driver_version / 1000,
               d.driver_version % 1000 / 10, d.runtime_version / 1000, d.runtime_version % 1000 / 10);
        bool sm80 = d.major >= 8;
        printf("    TF32 %s, BF16 %s, 2:4 sparse tensor cores %s, FP8 %s\n", sm80 ? "yes" : "no",
               sm80 ? "yes" : "no", sm80 ? "yes" : "no",
               d.major * 10 + d.minor >= 89 ? "yes" : "no");
        if (!d.supported) {
            char what[400];
            snprintf(what, sizeof what, "device %d (%s) has compute capability %d.%d; ampc "
                     "needs 8.0 or newer", i, d.name, d.major, d.minor);
            problem(what, "run on an Ampere (A100, A10...), Ada, Hopper or newer GPU");
        }
    }
    if (n > 1) {
        printf("  peer access (row can read column):\n");
        for (int a = 0; a < n; a++) {
            printf("    %d:", a);
            for (int b = 0; b < n; b++) {
                int can = 0;
                if (a != b && cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) can = -1;
                printf(" %s", a == b ? "-" : can > 0 ? "yes" : can == 0 ? "no" : "?");
            }
            printf("\n");
        }
    }
    return n;
}

static void report_library(ampc_rt_library lib, const char *name, const char *fix) {
    int64_t v = 0;
    char *path = NULL, *err = NULL;
    if (ampc_rt_library_version(lib, &v, &path, &err) == AMPC_OK)
        printf("%s: version %lld (%s)\n", name, (long long)v, path ? path : "");
    else
        problem(err ? err : name, fix);
    free(path);
    free(err);
}

static void report_nccl(void) {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    int (*get)(int *) = NULL;
    if (h) *(void **)&get = dlsym(h, "ncclGetVersion");
    int v = 0;
    if (get && get(&v) == 0)
        printf("NCCL: version %d.%d.%d (multi-GPU plans)\n", v / 10000, v / 100 % 100, v % 100);
    else
        printf("NCCL: libnccl.so.2 not found (needed only for multi-GPU plans: install NCCL or "
               "add its folder to LD_LIBRARY_PATH)\n");
    if (h) dlclose(h);
}

/* cuSPARSELt is optional (2:4 GEMMs run dense without it): its absence is a note, not a problem. */
static void report_cusparselt(void) {
    int64_t v = 0;
    char *path = NULL, *err = NULL;
    if (ampc_rt_library_version(AMPC_RT_LIB_CUSPARSELT, &v, &path, &err) == AMPC_OK)
        printf("cuSPARSELt: version %lld.%lld.%lld (%s; 2:4 GEMMs may run sparse)\n",
               (long long)(v / 10000), (long long)(v / 100 % 100), (long long)(v % 100),
               path ? path : "");
    else
        printf("cuSPARSELt: not loaded (optional: 2:4 GEMMs run dense; set AMPC_CUSPARSELT_PATH "
               "to libcusparseLt.so.0 or add its folder to LD_LIBRARY_PATH)\n");
    free(path);
    free(err);
}

int ampc_cli_doctor(const ampc_cli_options *o) {
    (void)o;
    problems = 0;
    printf("ampc %s (built with CUDA %d.%d)\n", AMPC_VERSION_STRING, CUDART_VERSION / 1000,
           CUDART_VERSION % 1000 / 10);
    int machine = report_nvml();
    report_cuda(machine);
    int major = 0, minor = 0;
    if (ampc_nvrtc_version(&major, &minor) == AMPC_OK)
        printf("NVRTC: version %d.%d (compiles kernels; needs no GPU)\n", major, minor);
    report_library(AMPC_RT_LIB_CUBLASLT, "cuBLASLt",
                   "install cuBLAS (CUDA toolkit, or the nvidia-cublas wheel) or add the folder "
                   "holding libcublasLt.so to LD_LIBRARY_PATH");
    report_library(AMPC_RT_LIB_CUDNN, "cuDNN",
                   "install cuDNN 9 (libcudnn9 package, or the nvidia-cudnn wheel) or add the "
                   "folder holding libcudnn.so.9 to LD_LIBRARY_PATH");
    report_cusparselt();
    report_nccl();
    char cc[4096], runtime[4096], *err = NULL;
    if (ampc_artifact_toolchain(NULL, cc, sizeof cc, runtime, sizeof runtime, &err) == AMPC_OK)
        printf("libraries (ampc -o model.so): C compiler %s; runtime %s\n", cc, runtime);
    else
        problem(err ? err : "cannot build libraries",
                "install a C compiler (gcc or clang; $CC names another) and ampc's runtime "
                "(cmake --install), or set AMPC_RUNTIME_DIR");
    free(err);
    char *cache = ampc_cache_dir_resolve(NULL);
    if (!cache || !*cache)
        printf("kernel cache: off (AMPC_CACHE_DIR is empty)\n");
    else if (ampc_cache_mkdirs(cache) && access(cache, W_OK) == 0)
        printf("kernel cache: %s\n", cache);
    else
        problem("the kernel cache folder cannot be created or written: every compile starts cold",
                "make ~/.cache/ampc writable, or point AMPC_CACHE_DIR at a writable folder");
    free(cache);
    char tune[4096];
    int32_t entries = 0;
    if (ampc_rt_tuning_cache(tune, sizeof tune, &entries))
        printf("tuning cache: %s (%d entr%s; the choices model creation timed, reused on this GPU "
               "with these libraries)\n", tune, entries, entries == 1 ? "y" : "ies");
    else
        printf("tuning cache: off (AMPC_TUNE_CACHE=off, or no HOME): every model creation times "
               "its cuDNN choices afresh\n");
    if (problems) printf("%d problem%s found\n", problems, problems == 1 ? "" : "s");
    else printf("no problems found\n");
    return problems ? 1 : 0;
}
