/*
 * nvrtc.h — turning generated CUDA C into loadable images with NVRTC.
 *
 * Codegen writes one or more translation units (CUDA source text); this layer compiles each unit
 * into PTX for compute_80 (always: it is what lets an artifact run on every GPU of compute
 * capability >= 8.0, including ones newer than this NVRTC) plus a cubin for every architecture
 * asked, and returns them as ampc_rt_image records the runtime loads (runtime/plan.h).
 *
 *     int32_t archs[] = {80, 90 | AMPC_NVRTC_ARCH_A};          // sm_80 and sm_90a cubins
 *     ampc_nvrtc_unit u = {"model_u0.cu", source};
 *     ampc_nvrtc_options o = {.archs = archs, .n_archs = 2};
 *     ampc_rt_image *img; int32_t n; char *err;
 *     if (ampc_nvrtc_compile(&u, 1, &o, &img, &n, &err) != AMPC_OK) { puts(err); free(err); }
 *     else ampc_nvrtc_images_free(img, n);                   // n == 3: PTX, sm_80, sm_90a
 *
 * Sources may #include "ampc/<name>.cuh": the kernel templates of codegen/kernels/, embedded in
 * the binary at build time and handed to NVRTC in memory, and the toolkit's own headers
 * (cuda_fp16.h, cuda_bf16.h...), found under $CUDA_HOME/include or, when CUDA_HOME is unset, the
 * toolkit ampc was built against. Sources are compiled with --std=c++17 -default-device and
 * without --use_fast_math (results must match the reference evaluator).
 *
 * Images are cached on disk, keyed by a SHA-256 of the source, every embedded header, the options
 * and the NVRTC version, so recompiling an unchanged model costs file reads. Units and targets
 * compile in parallel on a pool of threads. NVRTC needs no GPU; only ampc_nvrtc_default_arch
 * looks for one (through cudart, never libcuda).
 */
#ifndef AMPC_COMPILER_NVRTC_H
#define AMPC_COMPILER_NVRTC_H

#include "ampc.h"
#include "codegen/kernels.h" /* the embedded templates it hands to NVRTC */
#include "runtime/plan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- architectures -------------------------------------------------------------------------- */

/* An architecture is its compute capability as 10 * major + minor (80 is sm_80, 90 is sm_90),
 * with AMPC_NVRTC_ARCH_A or'ed in for the architecture-specific variant (90 | AMPC_NVRTC_ARCH_A
 * is sm_90a, whose cubin loads only on exactly that capability). ampc_rt_image.sm of a cubin uses
 * the same encoding. */
enum { AMPC_NVRTC_ARCH_A = 1 << 16, AMPC_NVRTC_PTX_ARCH = 80 };

/* Parses "sm_86", "sm_90a", "86" or "90a" into the encoding above; false on anything else (the
 * range is not checked here: ampc_nvrtc_compile does that). */
bool ampc_nvrtc_arch_parse(const char *s, int32_t *arch);

/* Writes "sm_90a" (etc.) into buf (16 bytes are always enough) and returns buf. */
char *ampc_nvrtc_arch_name(int32_t arch, char *buf, size_t size);

/* The architecture of the first visible GPU (asked through cudart), or 80 when there is none, or
 * when the GPU is older than 8.0 or newer than this NVRTC can target (PTX then covers it). */
int32_t ampc_nvrtc_default_arch(void);

/* The NVRTC library's version (13.0 -> 13, 0). AMPC_E_NVRTC if it cannot say. */
ampc_status ampc_nvrtc_version(int *major, int *minor);

/* ---- compiling ------------------------------------------------------------------------------ */

/* One translation unit: a file name for diagnostics ("model_u0.cu") and its CUDA source. */
typedef struct ampc_nvrtc_unit {
    const char *name;
    const char *source;
} ampc_nvrtc_unit;

/* What one compile did (filled when ampc_nvrtc_options.stats is set, also on failure). */
typedef struct ampc_nvrtc_stats {
    int32_t jobs;           /* NVRTC compilations needed: (unit, target) pairs, see below */
    int32_t cache_hits;     /* jobs answered from the cache */
    int32_t compiled;       /* jobs NVRTC actually ran */
    int32_t cache_writes;   /* images stored into the cache */
    bool cache_unwritable;  /* the cache was asked for but could not be created or written */
    double seconds;         /* wall time of the whole call */
} ampc_nvrtc_stats;

typedef struct ampc_nvrtc_options {
    const int32_t *archs;   /* cubin targets (encoding above); duplicates are ignored */
    int32_t n_archs;        /* 0: PTX only */
    const char *cache_dir;  /* NULL: $AMPC_CACHE_DIR, else $XDG_CACHE_HOME/ampc, else
                               ~/.cache/ampc; "" (here or in AMPC_CACHE_DIR): no cache */
    int32_t jobs;           /* parallel compilations; 0: the online CPUs, at most 32 (each
                               running NVRTC holds a few hundred MB) */
    bool lineinfo;          /* -lineinfo: source line tables for profilers (part of the key) */
    /* Called on the calling thread after each finished job with done = 1..total (it may stop
     * short of total when a job fails). NULL: no reports. */
    void (*progress)(void *user, int32_t done, int32_t total);
    void *user;
    ampc_nvrtc_stats *stats; /* NULL: not reported */
} ampc_nvrtc_options;

/* Compiles every unit to PTX for compute_80 and to a cubin for each of o->archs (o may be NULL:
 * PTX only, default cache, all CPUs). On success *images is a malloc'ed array of *n_images =
 * n_units * (1 + distinct archs) records, unit by unit, each unit's PTX first then its cubins in
 * the order of o->archs; .unit is the unit's index, every .data is malloc'ed (PTX text includes
 * its terminating NUL in .size). Free with ampc_nvrtc_images_free.
 * Every (unit, architecture) pair is one NVRTC job; the PTX comes from the sm_80 job when sm_80
 * is asked (NVRTC emits the same compute_80 PTX there), else from a job of its own.
 * On failure *images is NULL, *n_images 0, and *err (when err is not NULL) a malloc'ed message:
 * AMPC_E_NVRTC names the unit, the target and the kernel (the `extern "C" __global__` function)
 * whose definition holds the first error, then NVRTC's log; AMPC_E_INVALID_ARG an unsupported
 * architecture or a NULL unit; AMPC_E_IO missing CUDA headers. A cache that cannot be written
 * is not an error: the images are compiled anyway (stats->cache_unwritable says so). */
ampc_status ampc_nvrtc_compile(const ampc_nvrtc_unit *units, int32_t n_units,
                               const ampc_nvrtc_options *o, ampc_rt_image **images,
                               int32_t *n_images, char **err);

/* Frees images returned by ampc_nvrtc_compile (NULL is fine). */
void ampc_nvrtc_images_free(ampc_rt_image *images, int32_t n);

/* ---- the image cache (compiler/cache.c) ----------------------------------------------------- */

/* SHA-256, incremental. */
typedef struct ampc_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[64];
    uint32_t fill;
} ampc_sha256;

void ampc_sha256_init(ampc_sha256 *s);
void ampc_sha256_update(ampc_sha256 *s, const void *data, size_t n);
void ampc_sha256_final(ampc_sha256 *s, uint8_t out[32]);

/* The cache directory chosen by `dir` as ampc_nvrtc_options.cache_dir describes: a malloc'ed
 * path, or NULL when caching is off (or no home directory is known). */
char *ampc_cache_dir_resolve(const char *dir);

/* Creates dir and its missing parents; false (errno set) on failure. */
bool ampc_cache_mkdirs(const char *dir);

/* Reads <dir>/<name>: true with a malloc'ed payload when the entry exists and its header (magic,
 * length, SHA-256 of the payload) checks out; false for a missing, truncated or corrupt entry. */
bool ampc_cache_get(const char *dir, const char *name, void **data, int64_t *size);

/* Stores a payload as <dir>/<name> atomically: written to a temporary file in dir, then renamed
 * over the name, so concurrent writers and a crash mid-write never leave a torn entry. False
 * when dir is not writable. */
bool ampc_cache_put(const char *dir, const char *name, const void *data, int64_t size);

/* Removes the temporaries that writers killed mid-write left in dir (named after their pid, which
 * no longer runs); nvrtc runs it once per compile. */
void ampc_cache_sweep(const char *dir);

/* The pid written at s (digits up to the character `stop`, NUL for the end) when its process is
 * gone (kill(pid, 0) fails with ESRCH); 0 otherwise: no such digits, this process, alive, or its
 * liveness unknown (EPERM: another user's). *end: past the digits. Temporaries named after their
 * writer's pid are swept with it. */
long ampc_dead_pid_at(const char *s, char stop, const char **end);

#endif /* AMPC_COMPILER_NVRTC_H */
