/*
 * nvrtc.c — compiles generated CUDA translation units with NVRTC into PTX and cubins, in
 * parallel, through the on-disk image cache (compiler/cache.c). See compiler/nvrtc.h for the
 * contract.
 *
 * A call turns its units into jobs, one per (unit, target): the compute_80 PTX and each cubin.
 * NVRTC compiles one architecture per program, but a program compiled for sm_80 also yields the
 * very PTX a compute_80 compile gives (same front end, same virtual architecture), so when sm_80
 * is asked that job delivers both. A pool of threads takes jobs in order; each job first asks the
 * cache (key: SHA-256 of the source, every embedded header, the options and NVRTC's version;
 * the target is part of the entry's file name) and runs NVRTC only on a miss. The first failing
 * job in job order is reported, which keeps the message the same from run to run however the
 * threads interleave: jobs are handed out in order and none is handed out after a failure, so
 * every job before the first failure has run.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sysconf */
#include "compiler/nvrtc.h"

#include "ir/base.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef AMPC_CUDA_HOME
#define AMPC_CUDA_HOME "/usr/local/cuda" /* set by CMake to the toolkit ampc was built against */
#endif

enum {
    MAX_OPTIONS = 8,
    KEY_HEX = 32,                 /* 128 bits of the SHA-256, as hex */
    THREAD_STACK = 64 << 20,      /* NVRTC's front end recurses deeply on large units */
    DEFAULT_THREADS_MAX = 32,     /* each running NVRTC holds a few hundred MB of host memory */
};

/* ---- NVRTC calls ---------------------------------------------------------------------------- */

/* Records a failed NVRTC call (statement, function, file, line and NVRTC's own message). */
static ampc_status nvrtc_fail(ampc_strbuf *msg, nvrtcResult r, const char *stmt, const char *func,
                              const char *file, int line) {
    ampc_sb_printf(msg, "%s failed in %s (%s:%d): %s", stmt, func, file, line,
                   nvrtcGetErrorString(r));
    return AMPC_E_NVRTC;
}

/* Every NVRTC call goes through this: on failure it sets `st`, writes `msg` and jumps to done. */
#define NVRTC_CHECK(call)                                                                          \
    do {                                                                                           \
        nvrtcResult rc_ = (call);                                                                  \
        if (rc_ != NVRTC_SUCCESS) {                                                                \
            st = nvrtc_fail(msg, rc_, #call, __func__, __FILE__, __LINE__);                        \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

ampc_status ampc_nvrtc_version(int *major, int *minor) {
    *major = *minor = 0;
    return nvrtcVersion(major, minor) == NVRTC_SUCCESS ? AMPC_OK : AMPC_E_NVRTC;
}

/* ---- architectures -------------------------------------------------------------------------- */

bool ampc_nvrtc_arch_parse(const char *s, int32_t *arch) {
    if (!strncmp(s, "sm_", 3)) s += 3;
    int32_t v = 0, digits = 0;
    for (; isdigit((unsigned char)*s) && digits < 4; s++, digits++) v = v * 10 + (*s - '0');
    if (digits < 2) return false; /* "8" is not a capability; "80" is */
    if (*s == 'a') {
        v |= AMPC_NVRTC_ARCH_A;
        s++;
    }
    if (*s) return false;
    *arch = v;
    return true;
}

char *ampc_nvrtc_arch_name(int32_t arch, char *buf, size_t size) {
    snprintf(buf, size, "sm_%d%s", (int)(arch & ~AMPC_NVRTC_ARCH_A),
             (arch & AMPC_NVRTC_ARCH_A) ? "a" : "");
    return buf;
}

/* The real architectures this NVRTC can target (nvrtcGetSupportedArchs), asked once. */
static int supported_archs[64];
static int n_supported_archs;
static pthread_once_t supported_once = PTHREAD_ONCE_INIT;

static void supported_init(void) {
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 ||
        n > AMPC_ARRAY_LEN(supported_archs))
        return;
    if (nvrtcGetSupportedArchs(supported_archs) == NVRTC_SUCCESS) n_supported_archs = n;
}

static bool nvrtc_supports(int32_t base) {
    pthread_once(&supported_once, supported_init);
    for (int i = 0; i < n_supported_archs; i++)
        if (supported_archs[i] == base) return true;
    return false;
}

/* Checks one requested architecture; false with the reason in msg. */
static bool arch_check(int32_t arch, ampc_strbuf *msg) {
    int32_t base = arch & ~AMPC_NVRTC_ARCH_A;
    char name[16];
    ampc_nvrtc_arch_name(arch, name, sizeof name);
    if (arch <= 0 || base > 0xffff) {
        ampc_sb_printf(msg, "architecture %d is not a valid encoding (expected 10 * major + minor, "
                            "optionally | AMPC_NVRTC_ARCH_A)", (int)arch);
        return false;
    }
    if (base < AMPC_NVRTC_PTX_ARCH) {
        ampc_sb_printf(msg, "architecture %s is not supported: ampc targets compute capability 8.0 "
                            "and up (sm_80 or newer)", name);
        return false;
    }
    if ((arch & AMPC_NVRTC_ARCH_A) && base < 90) {
        ampc_sb_printf(msg, "architecture %s does not exist: architecture-specific targets "
                            "start at sm_90a", name);
        return false;
    }
    if (!nvrtc_supports(base)) {
        int major = 0, minor = 0;
        ampc_nvrtc_version(&major, &minor);
        ampc_sb_printf(msg, "architecture %s is not supported by NVRTC %d.%d (it targets:", name,
                       major, minor);
        for (int i = 0; i < n_supported_archs; i++)
            if (supported_archs[i] >= AMPC_NVRTC_PTX_ARCH)
                ampc_sb_printf(msg, " sm_%d", supported_archs[i]);
        ampc_sb_puts(msg, ")");
        return false;
    }
    return true;
}

static int32_t default_arch;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

/* Asks cudart for device 0; anything short of a usable GPU leaves 80. */
static void default_init(void) {
    default_arch = AMPC_NVRTC_PTX_ARCH;
    int count = 0, major = 0, minor = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
        (void)cudaGetLastError(); /* leave no sticky error for the caller's next cudart call */
        return;
    }
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    int32_t cc = 10 * major + minor;
    /* A cubin runs on its own major with any minor at least its own: take the best this NVRTC
     * can build for the device (sm_120 for a 12.1 GPU an older NVRTC does not know). */
    for (int32_t a = cc; a >= 10 * major && a >= AMPC_NVRTC_PTX_ARCH; a--)
        if (nvrtc_supports(a)) {
            default_arch = a;
            return;
        }
}

int32_t ampc_nvrtc_default_arch(void) {
    pthread_once(&default_once, default_init);
    return default_arch;
}

/* ---- where the first error is --------------------------------------------------------------- */

static const char *skip_blank(const char *p) {
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

/* True when the line at p starts (after blanks) with `extern "C" __global__`. */
static bool line_is_kernel(const char *p) {
    p = skip_blank(p);
    if (strncmp(p, "extern", 6)) return false;
    p = skip_blank(p + 6);
    if (strncmp(p, "\"C\"", 3)) return false;
    const char *q = skip_blank(p + 3);
    return q != p + 3 && !strncmp(q, "__global__", 10) && !isalnum((unsigned char)q[10]) &&
           q[10] != '_';
}

/* The kernel's name: the identifier before the first '(' that is not a __attribute-like group
 * (__launch_bounds__(256) and friends), e.g. `extern "C" __global__ void __launch_bounds__(256)
 * k_add(...)` -> "k_add". Empty when none is found before '{' or ';'. */
static void kernel_name(const char *p, char *out, size_t cap) {
    out[0] = '\0';
    char ident[128] = "";
    while (*p && *p != '{' && *p != ';') {
        if (isalpha((unsigned char)*p) || *p == '_') {
            size_t n = 0;
            while (isalnum((unsigned char)*p) || *p == '_') {
                if (n + 1 < sizeof ident) ident[n++] = *p;
                p++;
            }
            ident[n] = '\0';
            continue;
        }
        if (*p == '(') {
            if (ident[0] && strncmp(ident, "__", 2) != 0) {
                snprintf(out, cap, "%s", ident);
                return;
            }
            int depth = 0; /* skip the attribute's arguments */
            do {
                if (*p == '(') depth++;
                else if (*p == ')') depth--;
                p++;
            } while (*p && depth > 0);
            ident[0] = '\0';
            continue;
        }
        if (!isspace((unsigned char)*p) && *p != '*' && *p != '&') ident[0] = '\0';
        p++;
    }
}

/* Skips a comment, string or character literal at p, counting newlines into *line; returns p
 * unchanged when there is none there. */
static const char *skip_lexeme(const char *p, int32_t *line) {
    if (p[0] == '/' && p[1] == '/') {
        while (*p && *p != '\n') p++;
        return p;
    }
    if (p[0] == '/' && p[1] == '*') {
        for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
            if (*p == '\n') (*line)++;
        return *p ? p + 2 : p;
    }
    if (*p == '"' || *p == '\'') {
        char quote = *p++;
        for (; *p && *p != quote && *p != '\n'; p++)
            if (*p == '\\' && p[1]) p++;
        return *p == quote ? p + 1 : p;
    }
    return p;
}

/* The last line of the definition starting at p (on line `line`): where its body's braces
 * close. -1 for a declaration without a body; the last line of the text when it never closes. */
static int32_t definition_end(const char *p, int32_t line) {
    int32_t depth = 0;
    bool body = false;
    while (*p) {
        const char *q = skip_lexeme(p, &line);
        if (q != p) {
            p = q;
            continue;
        }
        if (*p == '\n') line++;
        else if (*p == '{') depth++, body = true;
        else if (*p == '}' && --depth == 0 && body) return line;
        else if (*p == ';' && !body) return -1;
        p++;
    }
    return line;
}

/* Describes where line `err_line` of `src` sits: "kernel 'k' (line 12)" or "line 3, outside any
 * kernel". Kernels are the definitions whose line starts with `extern "C" __global__`. */
static void describe_line(const char *src, int32_t err_line, ampc_strbuf *out) {
    const char *start = NULL;
    int32_t start_line = 0, line = 1;
    for (const char *p = src; *p && line <= err_line; line++) {
        if (line_is_kernel(p)) start = p, start_line = line;
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        p = nl + 1;
    }
    if (start) {
        int32_t end = definition_end(start, start_line);
        if (end >= err_line) {
            char name[128];
            kernel_name(strstr(start, "__global__") + 10, name, sizeof name);
            ampc_sb_printf(out, "kernel '%s' (line %d)", name[0] ? name : "?", (int)err_line);
            return;
        }
    }
    ampc_sb_printf(out, "line %d, outside any kernel", (int)err_line);
}

/* Finds the first "FILE(LINE): error" (or "catastrophic error") line of an NVRTC log. */
static bool log_first_error(const char *log, char *file, size_t cap, int32_t *line) {
    for (const char *p = log; *p;) {
        const char *nl = strchr(p, '\n');
        const char *end = nl ? nl : p + strlen(p);
        for (const char *q = p; q < end; q++) {
            if (*q != ')' || q[1] != ':') continue;
            const char *r = skip_blank(q + 2);
            if (strncmp(r, "error", 5) && strncmp(r, "catastrophic error", 18)) continue;
            const char *open = q;
            while (open > p && open[-1] != '(') open--;
            if (open == p || open == q) continue;
            char *num_end;
            long n = strtol(open, &num_end, 10);
            if (num_end != q || n <= 0) continue;
            size_t len = (size_t)(open - 1 - p);
            snprintf(file, cap, "%.*s", (int)AMPC_MIN(len, cap - 1), p);
            *line = (int32_t)n;
            return true;
        }
        p = nl ? nl + 1 : end;
    }
    return false;
}

/* The message of a compile error: where the first error is, then NVRTC's log. */
static void compile_error(const ampc_nvrtc_unit *u, const char *log, ampc_strbuf *msg) {
    char file[256];
    int32_t line = 0;
    const char *entry = strstr(log, "Entry function '"); /* ptxas names the kernel it rejects */
    if (log_first_error(log, file, sizeof file, &line)) {
        ampc_sb_puts(msg, "first error in ");
        if (!strcmp(file, u->name)) describe_line(u->source, line, msg);
        else ampc_sb_printf(msg, "'%s' line %d, included by the unit", file, (int)line);
    } else if (entry) {
        entry += strlen("Entry function '");
        const char *close = strchr(entry, '\'');
        ampc_sb_printf(msg, "error in kernel '%.*s'", close ? (int)(close - entry) : 0, entry);
    } else {
        ampc_sb_puts(msg, "NVRTC gave no source line");
    }
    size_t n = strlen(log);
    while (n && isspace((unsigned char)log[n - 1])) n--;
    ampc_sb_printf(msg, "\n%.*s", (int)n, log);
}

/* ---- jobs ----------------------------------------------------------------------------------- */

typedef struct job {
    int32_t unit;
    int32_t arch;        /* cubin target, 0 for the PTX-only job */
    bool want_ptx;       /* this job also delivers the unit's compute_80 PTX */
    int32_t ptx_image;   /* index in the result array, or -1 */
    int32_t cubin_image; /* index in the result array, or -1 */
} job;

typedef struct compile_ctx {
    const ampc_nvrtc_unit *units;
    const char *options[MAX_OPTIONS]; /* the common options, without the architecture */
    int32_t n_options;
    const char **header_names, **header_texts;
    int32_t n_headers;
    char (*keys)[KEY_HEX + 1]; /* cache key of each unit */
    char *cache;               /* cache directory, NULL when off */
    job *jobs;
    int32_t n_jobs;
    ampc_rt_image *images;

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    int32_t next, done, workers_left;
    bool failed;
    int32_t fail_job;          /* lowest failing job index, -1 when none */
    ampc_status fail_status;
    char *fail_msg;
    ampc_nvrtc_stats stats;
} compile_ctx;

static void target_name(const job *j, char *buf, size_t size) {
    if (j->arch) ampc_nvrtc_arch_name(j->arch, buf, size);
    else snprintf(buf, size, "compute_%d (PTX)", AMPC_NVRTC_PTX_ARCH);
}

/* Runs NVRTC for one job; the images it asks for are returned malloc'ed. */
static ampc_status run_nvrtc(const compile_ctx *c, const job *j, void **ptx, int64_t *ptx_size,
                             void **cubin, int64_t *cubin_size, ampc_strbuf *msg) {
    const ampc_nvrtc_unit *u = &c->units[j->unit];
    ampc_status st = AMPC_OK;
    char arch_opt[64], name[16];
    if (j->arch)
        snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s",
                 ampc_nvrtc_arch_name(j->arch, name, sizeof name));
    else snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=compute_%d", AMPC_NVRTC_PTX_ARCH);
    const char *opts[MAX_OPTIONS + 1];
    memcpy(opts, c->options, sizeof(char *) * (size_t)c->n_options);
    opts[c->n_options] = arch_opt;

    nvrtcProgram prog = NULL;
    char *log = NULL;
    NVRTC_CHECK(nvrtcCreateProgram(&prog, u->source, u->name, c->n_headers, c->header_texts,
                                   c->header_names));
    nvrtcResult r = nvrtcCompileProgram(prog, c->n_options + 1, opts);
    if (r == NVRTC_ERROR_COMPILATION) {
        size_t n = 0;
        NVRTC_CHECK(nvrtcGetProgramLogSize(prog, &n));
        log = ampc_xmalloc(n + 1);
        log[0] = log[n] = '\0';
        NVRTC_CHECK(nvrtcGetProgramLog(prog, log));
        compile_error(u, log, msg);
        st = AMPC_E_NVRTC;
        goto done;
    }
    NVRTC_CHECK(r); /* anything else: out of memory, invalid option... */
    if (j->want_ptx) {
        size_t n = 0;
        NVRTC_CHECK(nvrtcGetPTXSize(prog, &n));
        *ptx = ampc_xmalloc(n + 1);
        ((char *)*ptx)[n] = '\0';
        NVRTC_CHECK(nvrtcGetPTX(prog, *ptx));
        *ptx_size = (int64_t)n; /* NVRTC counts the terminating NUL */
    }
    if (j->arch) {
        size_t n = 0;
        NVRTC_CHECK(nvrtcGetCUBINSize(prog, &n));
        *cubin = ampc_xmalloc(n ? n : 1);
        NVRTC_CHECK(nvrtcGetCUBIN(prog, *cubin));
        *cubin_size = (int64_t)n;
    }
done:
    free(log);
    if (prog) nvrtcDestroyProgram(&prog);
    return st;
}

/* Runs job `ji`: the cache first, NVRTC on a miss; records images or the failure. */
static void job_run(compile_ctx *c, int32_t ji) {
    const job *j = &c->jobs[ji];
    char target[32], ptx_entry[KEY_HEX + 32], cubin_entry[KEY_HEX + 32];
    target_name(j, target, sizeof target);
    snprintf(ptx_entry, sizeof ptx_entry, "%s.compute_%d.ptx", c->keys[j->unit],
             AMPC_NVRTC_PTX_ARCH);
    snprintf(cubin_entry, sizeof cubin_entry, "%s.%s.cubin", c->keys[j->unit], target);

    void *ptx = NULL, *cubin = NULL;
    int64_t ptx_n = 0, cubin_n = 0;
    bool ptx_hit = false, cubin_hit = false;
    if (c->cache && j->want_ptx) {
        ptx_hit = ampc_cache_get(c->cache, ptx_entry, &ptx, &ptx_n);
        if (ptx_hit && (ptx_n == 0 || ((const char *)ptx)[ptx_n - 1] != '\0')) { /* not PTX */
            free(ptx);
            ptx = NULL;
            ptx_hit = false;
        }
    }
    if (c->cache && j->arch) cubin_hit = ampc_cache_get(c->cache, cubin_entry, &cubin, &cubin_n);
    bool hit = c->cache && (!j->want_ptx || ptx_hit) && (!j->arch || cubin_hit);

    ampc_status st = AMPC_OK;
    ampc_strbuf msg = {0};
    int32_t writes = 0;
    bool unwritable = false;
    if (!hit) {
        free(ptx);
        free(cubin);
        ptx = cubin = NULL;
        ampc_strbuf detail = {0};
        st = run_nvrtc(c, j, &ptx, &ptx_n, &cubin, &cubin_n, &detail);
        if (st != AMPC_OK) {
            ampc_sb_printf(&msg, "NVRTC could not compile unit %d '%s' for %s: %s", (int)j->unit,
                           c->units[j->unit].name, target, detail.data);
            free(ptx);
            free(cubin);
        } else if (c->cache) {
            /* Store what the cache lacked; a failed write only costs a later recompile. */
            if (j->want_ptx && !ptx_hit) {
                bool ok = ampc_cache_put(c->cache, ptx_entry, ptx, ptx_n);
                writes += ok, unwritable |= !ok;
            }
            if (j->arch && !cubin_hit) {
                bool ok = ampc_cache_put(c->cache, cubin_entry, cubin, cubin_n);
                writes += ok, unwritable |= !ok;
            }
        }
        ampc_sb_free(&detail);
    }

    pthread_mutex_lock(&c->mu);
    if (st == AMPC_OK) {
        if (j->want_ptx)
            c->images[j->ptx_image] = (ampc_rt_image){.unit = j->unit, .kind = AMPC_RT_IMAGE_PTX,
                                                      .sm = AMPC_NVRTC_PTX_ARCH, .data = ptx,
                                                      .size = ptx_n};
        if (j->arch)
            c->images[j->cubin_image] = (ampc_rt_image){.unit = j->unit,
                                                        .kind = AMPC_RT_IMAGE_CUBIN,
                                                        .sm = j->arch, .data = cubin,
                                                        .size = cubin_n};
        c->stats.cache_hits += hit;
        c->stats.compiled += !hit;
        c->stats.cache_writes += writes;
        c->stats.cache_unwritable |= unwritable;
    } else {
        c->stats.compiled++;
        c->failed = true;
        if (c->fail_job < 0 || ji < c->fail_job) {
            free(c->fail_msg);
            c->fail_job = ji;
            c->fail_status = st;
            c->fail_msg = ampc_sb_take(&msg);
        }
    }
    c->done++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    ampc_sb_free(&msg);
}

/* A pool thread: takes jobs in order until none is left or one has failed. */
static void *worker(void *arg) {
    compile_ctx *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        if (c->failed || c->next >= c->n_jobs) {
            c->workers_left--;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        int32_t ji = c->next++;
        pthread_mutex_unlock(&c->mu);
        job_run(c, ji);
    }
}

/* Runs every job on `threads` threads (the caller's when 1), reporting progress from the
 * calling thread. */
static void run_jobs(compile_ctx *c, int32_t threads, const ampc_nvrtc_options *o) {
    int32_t reported = 0;
    if (threads > 1) {
        pthread_t *tids = ampc_xcalloc((size_t)threads, sizeof *tids);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, THREAD_STACK);
        int32_t started = 0;
        c->workers_left = threads;
        for (; started < threads; started++)
            if (pthread_create(&tids[started], &attr, worker, c) != 0) break;
        pthread_attr_destroy(&attr);
        pthread_mutex_lock(&c->mu);
        c->workers_left -= threads - started; /* the ones that could not start */
        while (started > 0) {
            while (c->done == reported && c->workers_left > 0) pthread_cond_wait(&c->cv, &c->mu);
            int32_t done = c->done;
            if (done == reported) break; /* every worker has left */
            pthread_mutex_unlock(&c->mu);
            if (o && o->progress)
                while (reported < done) o->progress(o->user, ++reported, c->n_jobs);
            reported = done;
            pthread_mutex_lock(&c->mu);
        }
        pthread_mutex_unlock(&c->mu);
        for (int32_t i = 0; i < started; i++) pthread_join(tids[i], NULL);
        free(tids);
        if (started > 0) {
            if (o && o->progress)
                while (reported < c->done) o->progress(o->user, ++reported, c->n_jobs);
            return;
        }
        /* No thread could start: fall through and do the work here. */
    }
    while (!c->failed && c->next < c->n_jobs) {
        job_run(c, c->next++);
        if (o && o->progress) o->progress(o->user, c->done, c->n_jobs);
    }
}

/* ---- the entry point ------------------------------------------------------------------------ */

/* The CUDA include directory: $CUDA_HOME/include, else the build's toolkit; NULL (message in
 * msg) when neither has cuda_fp16.h. */
static char *cuda_include_dir(ampc_strbuf *msg) {
    const char *env = getenv("CUDA_HOME");
    const char *homes[2] = {env && *env ? env : NULL, AMPC_CUDA_HOME};
    ampc_strbuf looked = {0};
    for (int i = 0; i < 2; i++) {
        if (!homes[i]) continue;
        ampc_strbuf dir = {0};
        ampc_sb_printf(&dir, "%s/include", homes[i]);
        ampc_strbuf probe = {0};
        ampc_sb_printf(&probe, "%s/cuda_fp16.h", dir.data);
        bool ok = access(probe.data, R_OK) == 0;
        ampc_sb_printf(&looked, "%s%s", looked.len ? ", " : "", probe.data);
        ampc_sb_free(&probe);
        if (ok) {
            ampc_sb_free(&looked);
            return ampc_sb_take(&dir);
        }
        ampc_sb_free(&dir);
    }
    ampc_sb_printf(msg, "CUDA headers not found: looked for %s; set CUDA_HOME to the CUDA "
                        "toolkit", looked.data);
    ampc_sb_free(&looked);
    return NULL;
}

/* Appends a length-prefixed field to a hash, so ("ab","c") and ("a","bc") differ. */
static void key_field(ampc_sha256 *h, const void *data, size_t n) {
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    ampc_sha256_update(h, len, 8);
    ampc_sha256_update(h, data, n);
}

static void key_str(ampc_sha256 *h, const char *s) { key_field(h, s, strlen(s)); }

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static ampc_status fail(char **err, ampc_status st, ampc_strbuf *msg) {
    if (err) *err = ampc_sb_take(msg);
    else ampc_sb_free(msg);
    return st;
}

ampc_status ampc_nvrtc_compile(const ampc_nvrtc_unit *units, int32_t n_units,
                               const ampc_nvrtc_options *o, ampc_rt_image **images,
                               int32_t *n_images, char **err) {
    double t0 = now_seconds();
    ampc_strbuf msg = {0};
    if (err) *err = NULL;
    if (!images || !n_images) {
        ampc_sb_puts(&msg, "ampc_nvrtc_compile: images and n_images must not be NULL");
        return fail(err, AMPC_E_INVALID_ARG, &msg);
    }
    *images = NULL;
    *n_images = 0;
    if (o && o->stats) *o->stats = (ampc_nvrtc_stats){0};
    if (n_units < 0 || (n_units > 0 && !units) || (o && o->n_archs > 0 && !o->archs)) {
        ampc_sb_puts(&msg, "ampc_nvrtc_compile: NULL units or archs, or a negative count");
        return fail(err, AMPC_E_INVALID_ARG, &msg);
    }
    for (int32_t u = 0; u < n_units; u++)
        if (!units[u].name || !units[u].source) {
            ampc_sb_printf(&msg, "ampc_nvrtc_compile: unit %d has a NULL name or source", (int)u);
            return fail(err, AMPC_E_INVALID_ARG, &msg);
        }

    /* The distinct architectures, in the order asked. */
    int32_t n_in = o ? AMPC_MAX(o->n_archs, 0) : 0, n_archs = 0;
    int32_t *archs = ampc_xcalloc((size_t)n_in + 1, sizeof *archs);
    bool has_80 = false;
    for (int32_t i = 0; i < n_in; i++) {
        if (!arch_check(o->archs[i], &msg)) {
            free(archs);
            return fail(err, AMPC_E_INVALID_ARG, &msg);
        }
        bool seen = false;
        for (int32_t k = 0; k < n_archs; k++) seen |= archs[k] == o->archs[i];
        if (!seen) archs[n_archs++] = o->archs[i];
        has_80 |= o->archs[i] == AMPC_NVRTC_PTX_ARCH;
    }
    if (n_units == 0) {
        free(archs);
        return AMPC_OK;
    }
    char *include = cuda_include_dir(&msg);
    if (!include) {
        free(archs);
        return fail(err, AMPC_E_IO, &msg);
    }

    compile_ctx c = {.units = units, .fail_job = -1};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    ampc_strbuf inc_opt = {0};
    ampc_sb_printf(&inc_opt, "-I%s", include);
    c.options[c.n_options++] = "--std=c++17";
    c.options[c.n_options++] = "-default-device";
    c.options[c.n_options++] = inc_opt.data;
    if (o && o->lineinfo) c.options[c.n_options++] = "-lineinfo";

    int32_t n_embedded = 0;
    const ampc_embedded_file *embedded = ampc_kernel_headers(&n_embedded);
    c.n_headers = n_embedded;
    c.header_names = ampc_xcalloc((size_t)n_embedded + 1, sizeof(char *));
    c.header_texts = ampc_xcalloc((size_t)n_embedded + 1, sizeof(char *));
    for (int32_t i = 0; i < n_embedded; i++) {
        c.header_names[i] = embedded[i].name;
        c.header_texts[i] = embedded[i].text;
    }

    /* Cache keys: everything that can change the output except the target, which names the
     * entry. The common part is hashed once, then finished per unit. */
    int major = 0, minor = 0;
    ampc_nvrtc_version(&major, &minor);
    char version[32];
    snprintf(version, sizeof version, "nvrtc %d.%d", major, minor);
    ampc_sha256 base;
    ampc_sha256_init(&base);
    key_str(&base, "ampc image cache 1");
    key_str(&base, version);
    for (int32_t i = 0; i < c.n_options; i++) key_str(&base, c.options[i]);
    for (int32_t i = 0; i < n_embedded; i++) {
        key_str(&base, embedded[i].name);
        key_field(&base, embedded[i].text, embedded[i].size);
    }
    c.keys = ampc_xcalloc((size_t)n_units, sizeof *c.keys);
    for (int32_t u = 0; u < n_units; u++) {
        ampc_sha256 h = base;
        uint8_t digest[32];
        key_str(&h, units[u].name);
        key_str(&h, units[u].source);
        ampc_sha256_final(&h, digest);
        for (int i = 0; i < KEY_HEX / 2; i++) snprintf(c.keys[u] + 2 * i, 3, "%02x", digest[i]);
    }

    c.cache = ampc_cache_dir_resolve(o ? o->cache_dir : NULL);
    if (c.cache && !ampc_cache_mkdirs(c.cache)) {
        free(c.cache);
        c.cache = NULL;
        c.stats.cache_unwritable = true;
    }
    ampc_cache_sweep(c.cache);

    /* Jobs, unit by unit: the PTX-only job (when sm_80 does not bring the PTX), then one per
     * architecture. Image slots: the unit's PTX, then its cubins in architecture order. */
    int32_t per_unit = 1 + n_archs;
    c.jobs = ampc_xcalloc((size_t)n_units * (size_t)per_unit, sizeof *c.jobs);
    c.images = ampc_xcalloc((size_t)n_units * (size_t)per_unit, sizeof *c.images);
    for (int32_t u = 0; u < n_units; u++) {
        int32_t img = u * per_unit;
        if (!has_80)
            c.jobs[c.n_jobs++] = (job){.unit = u, .want_ptx = true, .ptx_image = img,
                                       .cubin_image = -1};
        for (int32_t a = 0; a < n_archs; a++) {
            bool ptx = archs[a] == AMPC_NVRTC_PTX_ARCH;
            c.jobs[c.n_jobs++] = (job){.unit = u, .arch = archs[a], .want_ptx = ptx,
                                       .ptx_image = ptx ? img : -1, .cubin_image = img + 1 + a};
        }
    }
    c.stats.jobs = c.n_jobs;

    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int32_t threads = o && o->jobs > 0 ? o->jobs : (int32_t)AMPC_MIN(AMPC_MAX(cpus, 1),
                                                                     DEFAULT_THREADS_MAX);
    threads = AMPC_MIN(threads, c.n_jobs);
    run_jobs(&c, threads, o);

    ampc_status st = AMPC_OK;
    if (c.fail_job >= 0) {
        st = c.fail_status;
        ampc_nvrtc_images_free(c.images, n_units * per_unit);
        if (err) *err = c.fail_msg;
        else free(c.fail_msg);
    } else {
        *images = c.images;
        *n_images = n_units * per_unit;
    }
    c.stats.seconds = now_seconds() - t0;
    if (o && o->stats) *o->stats = c.stats;

    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    free(c.cache);
    free(c.jobs);
    free(c.keys);
    free(c.header_names);
    free(c.header_texts);
    free(include);
    free(archs);
    ampc_sb_free(&inc_opt);
    ampc_sb_free(&msg);
    return st;
}

void ampc_nvrtc_images_free(ampc_rt_image *images, int32_t n) {
    if (!images) return;
    for (int32_t i = 0; i < n; i++) free((void *)images[i].data);
    free(images);
}
