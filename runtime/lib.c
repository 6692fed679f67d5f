/*
 * lib.c — opening the provider libraries (cuBLASLt, cuDNN, cuSPARSELt) on first use with dlopen, by soname,
 * once per process. A plan needs only the libraries its steps use, and a binary that never runs a
 * matmul never needs cuBLASLt installed. A library that is missing, lacks a function or is older
 * than required is an error naming it, what was tried or found, and what is required: the
 * library-mismatch troubles users of GPU runtimes report most.
 *
 * Libraries stay loaded for the life of the process (cuDNN in particular does not survive being
 * unloaded and reloaded), so the handles are never closed.
 */
#define _GNU_SOURCE /* dladdr, dlinfo, strdup */
#include "runtime/internal.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lib_mutex = PTHREAD_MUTEX_INITIALIZER;

/* dlopen `name`, then, when that fails, the same file next to the libcudart this process
 * loaded (the toolkit's lib64 folder, often not on the loader's path). The tried names and
 * dlerror's text are appended to `tried`. */
static void *open_soname(const char *name, char *tried, size_t size) {
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) return h;
    size_t n = strlen(tried);
    snprintf(tried + n, size - n, "%s%s (%s)", n ? "; " : "", name, dlerror());
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&cudaGetDeviceCount, &info) && info.dli_fname != NULL) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash != NULL) {
            char path[4096];
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
                     name);
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h != NULL) return h;
            n = strlen(tried);
            /* Truncation is fine: the message only lists what was tried. */
            int w = snprintf(tried + n, size - n, "; %.1000s (%.1000s)", path, dlerror());
            (void)w;
        }
    }
    return NULL;
}

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return strdup(buf);
}

/* Does the work of rt_lib_open under the lock; sets lib->fail on failure. */
static ampc_status open_now(rt_lib *lib) {
    char tried[2048] = "", need[24];
    rt_lib_version_str(lib->min_version, need, sizeof need);
    void *h = NULL;
    const char *file = rt_env_library_path(lib->path_env);
    if (file != NULL) {
        h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            snprintf(tried, sizeof tried, "%s=%.1000s (%.800s)", lib->path_env, file, dlerror());
    }
    for (const char *const *s = lib->sonames; *s != NULL && h == NULL; s++)
        h = open_soname(*s, tried, sizeof tried);
    if (h == NULL) {
        lib->fail = dupf("%s not found: tried %s. ampc needs %s %s or newer for this plan's "
                         "steps: install it, or add the folder holding it to LD_LIBRARY_PATH",
                         lib->name, tried, lib->name, need);
        return AMPC_E_CUDA;
    }
    struct link_map *lm = NULL;
    const char *path = dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL ? lm->l_name : "?";
    const char *missing = NULL;
    int64_t version = 0;
    char found[24];
    if (!lib->bind(h, &missing, &version)) {
        rt_lib_version_str(version, found, sizeof found);
        lib->fail = dupf("%s at %s (version %s) lacks the function %s: ampc needs %s %s or newer",
                         lib->name, path, version ? found : "unknown", missing, lib->name, need);
        dlclose(h);
        return AMPC_E_CUDA;
    }
    if (version < lib->min_version) {
        rt_lib_version_str(version, found, sizeof found);
        lib->fail = dupf("%s at %s is version %s: ampc needs %s %s or newer", lib->name, path,
                         found, lib->name, need);
        dlclose(h);
        return AMPC_E_CUDA;
    }
    lib->path = strdup(path);
    lib->handle = h;
    lib->version = version;
    return AMPC_OK;
}

ampc_status rt_lib_open(rt_lib *lib, rt_err *e) {
    pthread_mutex_lock(&lib_mutex);
    if (!lib->tried) {
        lib->tried = true;
        lib->status = open_now(lib);
    }
    ampc_status s = lib->status;
    pthread_mutex_unlock(&lib_mutex);
    if (s != AMPC_OK)
        return rt_fail(e, s, "%s", lib->fail ? lib->fail : "opening a provider library failed");
    return AMPC_OK;
}

ampc_status ampc_rt_library_version(ampc_rt_library lib, int64_t *version, char **path,
                                    char **err) {
    rt_err e = {0};
    if (version) *version = 0;
    if (path) *path = NULL;
    rt_lib *l = lib == AMPC_RT_LIB_CUBLASLT ? &rt_cublaslt_lib
                : lib == AMPC_RT_LIB_CUDNN  ? &rt_cudnn_lib
                : lib == AMPC_RT_LIB_CUSPARSELT ? &rt_cusparselt_lib
                                            : NULL;
    if (l == NULL) {
        rt_fail(&e, AMPC_E_INVALID_ARG, "unknown provider library %d (expected 0 to %d)",
                (int)lib, AMPC_RT_LIB_COUNT - 1);
    } else if (rt_lib_open(l, &e) == AMPC_OK) {
        if (version) *version = l->version;
        if (path) *path = strdup(l->path);
    }
    return rt_err_give(&e, err);
}
