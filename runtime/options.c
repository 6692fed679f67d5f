/*
 * options.c — the one place the runtime reads the environment. ampc_rt_options_init gives a
 * model's options (ampc_runtime.h; docs/options.md): the defaults, then each AMPC_* variable's
 * override, read when it is called (a model made without options calls it at creation). The
 * process's own settings, which no model owns, are read here too: where to find the libraries
 * it opens (AMPC_CUBLASLT_PATH...) and the tuning cache's file.
 */
#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A variable that is set and not "0" (the verbose switches). */
static bool on(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* A variable that is exactly "0" (the switches that turn a default off). */
static bool zero(const char *name) {
    const char *v = getenv(name);
    return v != NULL && strcmp(v, "0") == 0;
}

/* A variable that is exactly "0" or "1": 0 or 1; unset: -1 (automatic); anything else: other. */
static int tristate(const char *name, int other) {
    const char *v = getenv(name);
    return v == NULL ? -1 : !strcmp(v, "0") ? 0 : !strcmp(v, "1") ? 1 : other;
}

/* The index of the variable's value among words[0 .. n), else -1 (unset too). */
static int word(const char *name, const char *const *words, int n) {
    const char *v = getenv(name);
    for (int i = 0; v != NULL && i < n; i++)
        if (!strcmp(v, words[i])) return i;
    return -1;
}

/* Whether the variable is set and holds the character c. */
static bool holds(const char *name, char c) {
    const char *v = getenv(name);
    return v != NULL && strchr(v, c) != NULL;
}

/* A positive number of seconds, else dflt. */
static double seconds(const char *name, double dflt) {
    const char *v = getenv(name);
    const double s = v != NULL ? atof(v) : 0;
    return s > 0 ? s : dflt;
}

/* A whole number in [lo, hi], else dflt (unset, empty, not a number, out of range). */
static int64_t number(const char *name, int64_t lo, int64_t hi, int64_t dflt) {
    const char *v = getenv(name);
    char *end = NULL;
    if (v == NULL || v[0] == '\0') return dflt;
    long long n = strtoll(v, &end, 0);
    return *end != '\0' || n < lo || n > hi ? dflt : (int64_t)n;
}

void ampc_rt_options_init(ampc_rt_options *o) {
    if (o == NULL) return;
    static const char *const sparse[] = {"0", "1", "cusparselt", "kernel"}; /* -1: automatic */
    static const char *const verbosity[] = {"0", "1", "2"};
    const int cudnn_verbose = word("AMPC_CUDNN_VERBOSE", verbosity, 3);
    *o = (ampc_rt_options){
        .cuda_graphs = !zero("AMPC_CUDA_GRAPHS"),
        .io_graph = !zero("AMPC_IO_GRAPH"),
        .zero_copy = !zero("AMPC_ZERO_COPY"),
        .pdl = !zero("AMPC_PDL"),
        .multi_gpu_graphs = tristate("AMPC_MULTI_GPU_GRAPHS", -1),
        .nccl_timeout_s = seconds("AMPC_NCCL_TIMEOUT_S", 300),
        .gemm_workspace = number("AMPC_GEMM_WORKSPACE", 0, INT64_MAX, -1),
        .gemm_reduction = number("AMPC_GEMM_REDUCTION", 0, INT32_MAX, -1),
        .gemm_tune = word("AMPC_GEMM_TUNE", (const char *const[]){"1"}, 1) == 0,
        .gemm_kernel = tristate("AMPC_GEMM_KERNEL", -1),
        .cudnn_graph = tristate("AMPC_CUDNN_GRAPH", -2),
        .cudnn_tries = (int32_t)number("AMPC_CUDNN_TRIES", 1, 32, 0),
        .cudnn_heur_b = holds("AMPC_CUDNN_HEUR", 'B'),
        .sparse = word("AMPC_SPARSE", sparse, 4),
        .sparse_check = !zero("AMPC_SPARSE_CHECK"),
        .sparse_search = !zero("AMPC_SPARSE_SEARCH"),
        .tune_cold = !zero("AMPC_TUNE_COLD"),
        .graph_verbose = (int32_t)number("AMPC_GRAPH_VERBOSE", 0, 2, 0),
        /* unset or "0": 0; "2": 2; anything else: 1 */
        .cudnn_verbose = getenv("AMPC_CUDNN_VERBOSE") == NULL ? 0
                         : cudnn_verbose < 0                  ? 1
                                                              : cudnn_verbose,
        .gemm_verbose = on("AMPC_GEMM_VERBOSE"),
        .sparse_verbose = on("AMPC_SPARSE_VERBOSE"),
        .tune_verbose = on("AMPC_TUNE_VERBOSE"),
    };
}

const char *rt_env_library_path(const char *var) {
    const char *v = var ? getenv(var) : NULL;
    return v != NULL && v[0] != '\0' ? v : NULL;
}

bool rt_env_tune_cache_path(char *buf, size_t n) {
    const char *env = getenv("AMPC_TUNE_CACHE");
    if (env) {
        if (env[0] == '\0' || strcmp(env, "off") == 0) return false;
        return snprintf(buf, n, "%s", env) < (int)n;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') return snprintf(buf, n, "%s/ampc/tuning.txt", xdg) < (int)n;
    if (home && home[0] == '/') return snprintf(buf, n, "%s/.cache/ampc/tuning.txt", home) < (int)n;
    return false;
}

bool rt_env_tune_verbose(void) { return on("AMPC_TUNE_VERBOSE"); }
