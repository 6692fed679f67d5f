/*
 * test_nvrtc.c — the NVRTC layer (compiler/nvrtc.c, compiler/cache.c) without a GPU: PTX and
 * cubins for a kernel using __half and an mma.sync tensor-core instruction, the image cache (hits,
 * identical bytes, corrupt entries, concurrent processes, unwritable folders), compile errors that
 * name the kernel, the embedded kernel templates, parallel compilation, arguments, SHA-256.
 * Every cache test uses its own temporary folder; no test touches ~/.cache.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, setenv, fork */
#include "support.h"

#include "compiler/nvrtc.h"

#include <dirent.h>
#include <elf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------------------------------- */

/* One warp computes D(16x8, f32) = A(16x16, f16) x B(16x8, f16) with the tensor-core mma, then
 * scales by a __half factor: sm_80's signature instruction, and the half type from cuda_fp16.h
 * that NVRTC only finds through the include path ampc passes. */
static const char mma_source[] =
    "#include \"ampc/common.cuh\"\n"
    "\n"
    "extern \"C\" __global__ void k_mma(const unsigned *a, const unsigned *b, float *d,\n"
    "                                  __half scale) {\n"
    "    unsigned lane = threadIdx.x;\n"
    "    float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \"\n"
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "                 : \"+f\"(c0), \"+f\"(c1), \"+f\"(c2), \"+f\"(c3)\n"
    "                 : \"r\"(a[lane * 4 + 0]), \"r\"(a[lane * 4 + 1]), \"r\"(a[lane * 4 + 2]),\n"
    "                   \"r\"(a[lane * 4 + 3]), \"r\"(b[lane * 2 + 0]), \"r\"(b[lane * 2 + 1]));\n"
    "    float s = __half2float(__hmul(scale, __float2half(1.0f)));\n"
    "    d[lane * 4 + 0] = c0 * s;\n"
    "    d[lane * 4 + 1] = c1 * s;\n"
    "    d[lane * 4 + 2] = c2 * s;\n"
    "    d[lane * 4 + 3] = c3 * s;\n"
    "}\n";

/* A small kernel whose entry is named after i, so units differ. */
static char *numbered_source(int i) {
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb,
                   "#include \"ampc/common.cuh\"\n"
                   "extern \"C\" __global__ void k_unit_%d(const __half *x, float *y, int n) {\n"
                   "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "    if (i < n) y[i] = ampc::ld(x, i) * %d.0f;\n"
                   "}\n",
                   i, i + 1);
    return ampc_sb_take(&sb);
}



static char *path_in(const char *dir, const char *name) {
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%s/%s", dir, name);
    return ampc_sb_take(&sb);
}

/* Counts the files of dir whose name ends with suffix; *hidden counts names starting with '.'
 * (stray temporaries). The first match's name goes to first (when not NULL). */
static int count_files(const char *dir, const char *suffix, int *hidden, char *first, size_t cap) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    int n = 0;
    if (hidden) *hidden = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (e->d_name[0] == '.') {
            if (hidden) (*hidden)++;
            continue;
        }
        size_t len = strlen(e->d_name), k = strlen(suffix);
        if (len >= k && !strcmp(e->d_name + len - k, suffix)) {
            if (n == 0 && first) snprintf(first, cap, "%.120s", e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

static char *read_all(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)*len + 1);
    cr_assert_eq(fread(buf, 1, (size_t)*len, f), (size_t)*len);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

static void write_all(const char *path, const void *data, long len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, (size_t)len, f), (size_t)len);
    fclose(f);
}

/* Compiles, asserting success (printing the message otherwise). */
static void compile_ok(const ampc_nvrtc_unit *u, int32_t n, const ampc_nvrtc_options *o,
                       ampc_rt_image **img, int32_t *n_img) {
    char *err = NULL;
    ampc_status st = ampc_nvrtc_compile(u, n, o, img, n_img, &err);
    cr_assert_eq(st, AMPC_OK, "compile failed (%s): %s", ampc_status_str(st), err ? err : "");
    cr_assert_null(err);
}

/* Compiles, asserting failure with `want`; returns the message (caller frees). */
static char *compile_fails(const ampc_nvrtc_unit *u, int32_t n, const ampc_nvrtc_options *o,
                           ampc_status want) {
    ampc_rt_image *img = (ampc_rt_image *)1;
    int32_t n_img = -1;
    char *err = NULL;
    ampc_status st = ampc_nvrtc_compile(u, n, o, &img, &n_img, &err);
    cr_assert_eq(st, want, "got %s, expected %s: %s", ampc_status_str(st), ampc_status_str(want),
                 err ? err : "");
    cr_assert_null(img);
    cr_assert_eq(n_img, 0);
    cr_assert_not_null(err);
    return err;
}

/* The SM a cubin was built for, from its ELF header (EM_CUDA; the field moved in ABI 8). */
static int cubin_sm(const ampc_rt_image *im) {
    cr_assert_geq(im->size, (int64_t)sizeof(Elf64_Ehdr));
    const Elf64_Ehdr *h = im->data;
    cr_assert_eq(memcmp(h->e_ident, ELFMAG, SELFMAG), 0, "cubin is not an ELF file");
    cr_assert_eq(h->e_machine, 190, "cubin machine %d is not EM_CUDA", h->e_machine);
    if (h->e_ident[EI_ABIVERSION] >= 8) return (int)((h->e_flags >> 8) & 0xff);
    return (int)(h->e_flags & 0xff);
}

static void expect_same_images(const ampc_rt_image *a, const ampc_rt_image *b, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        cr_assert_eq(a[i].unit, b[i].unit);
        cr_assert_eq(a[i].kind, b[i].kind);
        cr_assert_eq(a[i].sm, b[i].sm);
        cr_assert_eq(a[i].size, b[i].size, "image %d: %lld vs %lld bytes", i,
                     (long long)a[i].size, (long long)b[i].size);
        cr_assert_eq(memcmp(a[i].data, b[i].data, (size_t)a[i].size), 0, "image %d differs", i);
    }
}

/* ---- compiling ------------------------------------------------------------------------------ */

Test(nvrtc, version_is_known) {
    int major = -1, minor = -1;
    cr_assert_eq(ampc_nvrtc_version(&major, &minor), AMPC_OK);
    cr_assert_geq(major, 12, "NVRTC %d.%d: ampc needs 12.0 or newer", major, minor);
    cr_assert_geq(minor, 0);
}

Test(nvrtc, mma_kernel_to_ptx_and_two_cubins) {
    int32_t archs[] = {80, 90};
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_options o = {.archs = archs, .n_archs = 2, .cache_dir = ""};
    ampc_rt_image *img;
    int32_t n;
    compile_ok(&u, 1, &o, &img, &n);
    cr_assert_eq(n, 3);

    /* PTX first: NUL-terminated text for compute_80 holding the entry and the mma. */
    cr_assert_eq(img[0].unit, 0);
    cr_assert_eq(img[0].kind, AMPC_RT_IMAGE_PTX);
    cr_assert_eq(img[0].sm, 80);
    const char *ptx = img[0].data;
    cr_assert_eq(img[0].size, (int64_t)strlen(ptx) + 1);
    cr_assert_not_null(strstr(ptx, ".target sm_80"), "PTX:\n%s", ptx);
    cr_assert_not_null(strstr(ptx, ".entry k_mma("), "PTX:\n%s", ptx);
    cr_assert_not_null(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));

    /* Then the cubins, in the order asked, each an EM_CUDA ELF for its SM. */
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(img[1 + i].unit, 0);
        cr_assert_eq(img[1 + i].kind, AMPC_RT_IMAGE_CUBIN);
        cr_assert_eq(img[1 + i].sm, archs[i]);
        cr_assert_eq(cubin_sm(&img[1 + i]), archs[i]);
    }
    cr_assert(img[1].size != img[2].size || memcmp(img[1].data, img[2].data, (size_t)img[1].size),
              "the sm_80 and sm_90 cubins are the same bytes");
    ampc_nvrtc_images_free(img, n);
}

Test(nvrtc, ptx_of_the_sm80_job_equals_a_compute80_compile) {
    /* With sm_80 asked the PTX comes from that job; without, from a compute_80 job of its own.
     * They must be the same text, or artifacts would differ with the --arch list. */
    int32_t with80[] = {80}, without80[] = {90 | AMPC_NVRTC_ARCH_A};
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_options a = {.archs = with80, .n_archs = 1, .cache_dir = ""};
    ampc_nvrtc_options b = {.archs = without80, .n_archs = 1, .cache_dir = ""};
    ampc_nvrtc_stats sa, sb;
    a.stats = &sa;
    b.stats = &sb;
    ampc_rt_image *ia, *ib;
    int32_t na, nb;
    compile_ok(&u, 1, &a, &ia, &na);
    compile_ok(&u, 1, &b, &ib, &nb);
    cr_assert_eq(na, 2);
    cr_assert_eq(nb, 2);
    cr_assert_eq(sa.jobs, 1, "sm_80 should bring the PTX in the same job");
    cr_assert_eq(sb.jobs, 2);
    cr_assert_eq(ia[0].size, ib[0].size);
    cr_assert_str_eq(ia[0].data, ib[0].data);
    cr_assert_eq(ib[1].sm, 90 | AMPC_NVRTC_ARCH_A);
    cr_assert_eq(cubin_sm(&ib[1]), 90);
    ampc_nvrtc_images_free(ia, na);
    ampc_nvrtc_images_free(ib, nb);
}

Test(nvrtc, ptx_only_without_archs_and_null_options) {
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_rt_image *img;
    int32_t n;
    ampc_nvrtc_options o = {.cache_dir = ""};
    compile_ok(&u, 1, &o, &img, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(img[0].kind, AMPC_RT_IMAGE_PTX);
    ampc_nvrtc_images_free(img, n);

    /* NULL options: default cache, which here is a temporary AMPC_CACHE_DIR. */
    char *dir = t_tmpdir("nvrtc");
    setenv("AMPC_CACHE_DIR", dir, 1);
    compile_ok(&u, 1, NULL, &img, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(count_files(dir, ".compute_80.ptx", NULL, NULL, 0), 1);
    ampc_nvrtc_images_free(img, n);
    t_rmdir_all(dir);
}

Test(nvrtc, cuda_home_without_headers_falls_back_to_the_build_toolkit) {
    setenv("CUDA_HOME", "/nonexistent/cuda", 1);
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_options o = {.cache_dir = ""};
    ampc_rt_image *img;
    int32_t n;
    compile_ok(&u, 1, &o, &img, &n);
    cr_assert_eq(n, 1);
    ampc_nvrtc_images_free(img, n);
}

Test(nvrtc, default_arch_compiles) {
    /* 80 without a GPU (CI); the GPU's own architecture on the GPU machine. */
    int32_t arch = ampc_nvrtc_default_arch();
    cr_assert_geq(arch & ~AMPC_NVRTC_ARCH_A, 80);
    cr_assert_eq(arch, ampc_nvrtc_default_arch(), "the answer is computed once");
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_options o = {.archs = &arch, .n_archs = 1, .cache_dir = ""};
    ampc_rt_image *img;
    int32_t n;
    compile_ok(&u, 1, &o, &img, &n);
    cr_assert_eq(n, 2);
    cr_assert_eq(cubin_sm(&img[1]), arch & 0xff);
    ampc_nvrtc_images_free(img, n);
}

/* ---- parallel compilation ------------------------------------------------------------------- */

typedef struct progress_log {
    int32_t calls, last, total;
    bool ordered;
} progress_log;

static void on_progress(void *user, int32_t done, int32_t total) {
    progress_log *p = user;
    p->ordered &= done == p->last + 1 && (p->total == 0 || total == p->total);
    p->calls++;
    p->last = done;
    p->total = total;
}

Test(nvrtc, eight_units_in_parallel) {
    enum { N = 8 };
    char *src[N];
    ampc_nvrtc_unit u[N];
    char names[N][32];
    for (int i = 0; i < N; i++) {
        src[i] = numbered_source(i);
        snprintf(names[i], sizeof names[i], "model_u%d.cu", i);
        u[i] = (ampc_nvrtc_unit){names[i], src[i]};
    }
    int32_t archs[] = {80, 90, 80}; /* the duplicate is ignored */
    progress_log log = {.ordered = true};
    ampc_nvrtc_stats stats;
    ampc_nvrtc_options o = {.archs = archs, .n_archs = 3, .cache_dir = "", .jobs = 4,
                            .progress = on_progress, .user = &log, .stats = &stats};
    ampc_rt_image *img;
    int32_t n;
    compile_ok(u, N, &o, &img, &n);
    cr_assert_eq(n, N * 3);
    cr_assert_eq(stats.jobs, N * 2, "one sm_80 job (with the PTX) and one sm_90 job per unit");
    cr_assert_eq(stats.compiled, N * 2);
    cr_assert_eq(stats.cache_hits, 0);
    cr_assert_eq(log.calls, N * 2);
    cr_assert_eq(log.last, N * 2);
    cr_assert_eq(log.total, N * 2);
    cr_assert(log.ordered, "progress must count 1, 2, ... total on the calling thread");
    for (int i = 0; i < N; i++) {
        char entry[64];
        snprintf(entry, sizeof entry, ".entry k_unit_%d(", i);
        cr_assert_eq(img[3 * i].unit, i);
        cr_assert_eq(img[3 * i].kind, AMPC_RT_IMAGE_PTX);
        cr_assert_not_null(strstr(img[3 * i].data, entry), "unit %d's PTX lacks %s", i, entry);
        for (int a = 0; a < 2; a++) {
            cr_assert_eq(img[3 * i + 1 + a].unit, i);
            cr_assert_eq(img[3 * i + 1 + a].sm, archs[a]);
            cr_assert_eq(cubin_sm(&img[3 * i + 1 + a]), archs[a]);
        }
    }

    /* The same work on one thread gives the same bytes. */
    ampc_nvrtc_options serial = {.archs = archs, .n_archs = 2, .cache_dir = "", .jobs = 1};
    ampc_rt_image *img1;
    int32_t n1;
    compile_ok(u, N, &serial, &img1, &n1);
    cr_assert_eq(n1, n);
    expect_same_images(img, img1, n);
    ampc_nvrtc_images_free(img, n);
    ampc_nvrtc_images_free(img1, n1);
    for (int i = 0; i < N; i++) free(src[i]);
}

/* ---- the cache ------------------------------------------------------------------------------ */

Test(nvrtc, second_compile_hits_the_cache_with_identical_bytes) {
    char *dir = t_tmpdir("nvrtc");
    int32_t archs[] = {80, 90};
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_stats s1, s2;
    ampc_nvrtc_options o = {.archs = archs, .n_archs = 2, .cache_dir = dir, .stats = &s1};
    ampc_rt_image *a, *b;
    int32_t na, nb;
    compile_ok(&u, 1, &o, &a, &na);
    cr_assert_eq(s1.jobs, 2);
    cr_assert_eq(s1.compiled, 2);
    cr_assert_eq(s1.cache_hits, 0);
    cr_assert_eq(s1.cache_writes, 3);
    cr_assert_not(s1.cache_unwritable);

    int hidden;
    char ptx_name[128], key[64];
    cr_assert_eq(count_files(dir, ".compute_80.ptx", &hidden, ptx_name, sizeof ptx_name), 1);
    cr_assert_eq(count_files(dir, ".sm_80.cubin", NULL, NULL, 0), 1);
    cr_assert_eq(count_files(dir, ".sm_90.cubin", NULL, NULL, 0), 1);
    cr_assert_eq(count_files(dir, "", NULL, NULL, 0), 3);
    cr_assert_eq(hidden, 0, "temporary files left behind");
    /* <128-bit key as hex>.<target>.<ext> */
    cr_assert_eq(strchr(ptx_name, '.') - ptx_name, 32, "entry %s", ptx_name);
    snprintf(key, sizeof key, "%.32s", ptx_name);
    char cubin_name[128];
    snprintf(cubin_name, sizeof cubin_name, "%s.sm_90.cubin", key);
    char *cubin_path = path_in(dir, cubin_name);
    long len;
    free(read_all(cubin_path, &len));
    cr_assert_eq(len, 48 + a[2].size, "entry = 48-byte header + payload");
    free(cubin_path);

    o.stats = &s2;
    compile_ok(&u, 1, &o, &b, &nb);
    cr_assert_eq(s2.cache_hits, 2);
    cr_assert_eq(s2.compiled, 0);
    cr_assert_eq(s2.cache_writes, 0);
    cr_assert_eq(nb, na);
    expect_same_images(a, b, na);
    ampc_nvrtc_images_free(a, na);
    ampc_nvrtc_images_free(b, nb);
    t_rmdir_all(dir);
}

Test(nvrtc, key_covers_source_name_and_options) {
    char *dir = t_tmpdir("nvrtc");
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_stats s;
    ampc_nvrtc_options o = {.cache_dir = dir, .stats = &s};
    ampc_rt_image *img;
    int32_t n;
    compile_ok(&u, 1, &o, &img, &n);
    ampc_nvrtc_images_free(img, n);

    /* One more space in the source: a new key. */
    char *changed = malloc(sizeof mma_source + 1);
    snprintf(changed, sizeof mma_source + 1, "%s ", mma_source);
    ampc_nvrtc_unit u2 = {"mma_u0.cu", changed};
    compile_ok(&u2, 1, &o, &img, &n);
    cr_assert_eq(s.compiled, 1);
    ampc_nvrtc_images_free(img, n);
    /* -lineinfo: a new key. */
    o.lineinfo = true;
    compile_ok(&u, 1, &o, &img, &n);
    cr_assert_eq(s.compiled, 1);
    cr_assert_not_null(strstr(img[0].data, ".loc"), "-lineinfo PTX has .loc directives");
    ampc_nvrtc_images_free(img, n);
    /* Another unit name: a new key. */
    o.lineinfo = false;
    ampc_nvrtc_unit u3 = {"other.cu", mma_source};
    compile_ok(&u3, 1, &o, &img, &n);
    cr_assert_eq(s.compiled, 1);
    ampc_nvrtc_images_free(img, n);
    cr_assert_eq(count_files(dir, ".ptx", NULL, NULL, 0), 4);
    /* The first again: a hit. */
    compile_ok(&u, 1, &o, &img, &n);
    cr_assert_eq(s.cache_hits, 1);
    ampc_nvrtc_images_free(img, n);
    free(changed);
    t_rmdir_all(dir);
}

Test(nvrtc, corrupt_and_truncated_entries_are_recompiled_and_rewritten) {
    char *dir = t_tmpdir("nvrtc");
    int32_t archs[] = {80};
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_stats s;
    ampc_nvrtc_options o = {.archs = archs, .n_archs = 1, .cache_dir = dir, .stats = &s};
    ampc_rt_image *a, *b;
    int32_t na, nb;
    compile_ok(&u, 1, &o, &a, &na);

    char ptx_name[128], cubin_name[128];
    cr_assert_eq(count_files(dir, ".ptx", NULL, ptx_name, sizeof ptx_name), 1);
    cr_assert_eq(count_files(dir, ".cubin", NULL, cubin_name, sizeof cubin_name), 1);
    char *ptx_path = path_in(dir, ptx_name), *cubin_path = path_in(dir, cubin_name);
    long ptx_len, cubin_len;
    char *ptx_bytes = read_all(ptx_path, &ptx_len), *cubin_bytes = read_all(cubin_path, &cubin_len);

    /* A flipped payload byte in the cubin (the checksum catches it) and a PTX cut in half
     * (the length catches it): both are misses, recompiled, and rewritten whole. */
    cubin_bytes[cubin_len / 2] ^= 0x5a;
    write_all(cubin_path, cubin_bytes, cubin_len);
    write_all(ptx_path, ptx_bytes, ptx_len / 2);
    void *data;
    int64_t size;
    cr_assert_not(ampc_cache_get(dir, cubin_name, &data, &size));
    cr_assert_not(ampc_cache_get(dir, ptx_name, &data, &size));
    cr_assert_null(data);

    compile_ok(&u, 1, &o, &b, &nb);
    cr_assert_eq(s.cache_hits, 0);
    cr_assert_eq(s.compiled, 1);
    cr_assert_eq(s.cache_writes, 2);
    expect_same_images(a, b, na);
    cr_assert(ampc_cache_get(dir, cubin_name, &data, &size), "cubin entry rewritten");
    cr_assert_eq(size, a[1].size);
    free(data);
    ampc_nvrtc_images_free(b, nb);

    /* Only one of the two bad: the job reruns and writes just that one. */
    write_all(ptx_path, "AMPCIMG1", 8);
    compile_ok(&u, 1, &o, &b, &nb);
    cr_assert_eq(s.compiled, 1);
    cr_assert_eq(s.cache_writes, 1);
    expect_same_images(a, b, na);
    ampc_nvrtc_images_free(b, nb);

    /* Now everything is valid again. */
    compile_ok(&u, 1, &o, &b, &nb);
    cr_assert_eq(s.cache_hits, 1);
    cr_assert_eq(s.compiled, 0);
    ampc_nvrtc_images_free(b, nb);

    ampc_nvrtc_images_free(a, na);
    free(ptx_bytes);
    free(cubin_bytes);
    free(ptx_path);
    free(cubin_path);
    t_rmdir_all(dir);
}

Test(nvrtc, unwritable_cache_compiles_anyway) {
    /* A folder below a regular file cannot be created, even by root. */
    char *dir = t_tmpdir("nvrtc");
    char *file = path_in(dir, "plain-file");
    write_all(file, "x", 1);
    char *below = path_in(file, "cache");
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_stats s;
    ampc_nvrtc_options o = {.cache_dir = below, .stats = &s};
    ampc_rt_image *img;
    int32_t n;
    compile_ok(&u, 1, &o, &img, &n);
    cr_assert_eq(n, 1);
    cr_assert(s.cache_unwritable);
    cr_assert_eq(s.compiled, 1);
    cr_assert_eq(s.cache_writes, 0);
    ampc_nvrtc_images_free(img, n);
    cr_assert_not(ampc_cache_put(below, "x.ptx", "a", 1));
    free(below);
    free(file);
    t_rmdir_all(dir);
}

Test(nvrtc, two_processes_compiling_into_one_cache) {
    enum { PROCS = 3 };
    char *dir = t_tmpdir("nvrtc");
    int32_t archs[] = {80, 90};
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    ampc_nvrtc_options o = {.archs = archs, .n_archs = 2, .cache_dir = dir, .jobs = 1};
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        cr_assert_geq(pids[p], 0);
        if (pids[p] == 0) {
            ampc_rt_image *img;
            int32_t n;
            ampc_status st = ampc_nvrtc_compile(&u, 1, &o, &img, &n, NULL);
            if (st == AMPC_OK) ampc_nvrtc_images_free(img, n);
            _exit(st == AMPC_OK && n == 3 ? 0 : 1);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        cr_assert_eq(waitpid(pids[p], &status, 0), pids[p]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed", p);
    }
    int hidden;
    cr_assert_eq(count_files(dir, "", &hidden, NULL, 0), 3);
    cr_assert_eq(hidden, 0);
    /* Whatever writer won, the entries are whole and equal to a fresh compile. */
    ampc_nvrtc_stats s;
    o.stats = &s;
    ampc_rt_image *a, *b;
    int32_t na, nb;
    compile_ok(&u, 1, &o, &a, &na);
    cr_assert_eq(s.cache_hits, 2);
    o.cache_dir = "";
    compile_ok(&u, 1, &o, &b, &nb);
    expect_same_images(a, b, na);
    ampc_nvrtc_images_free(a, na);
    ampc_nvrtc_images_free(b, nb);
    t_rmdir_all(dir);
}

Test(nvrtc, cache_dir_resolution) {
    char *d;
    cr_assert_null(ampc_cache_dir_resolve(""));
    d = ampc_cache_dir_resolve("/some/where");
    cr_assert_str_eq(d, "/some/where");
    free(d);
    setenv("AMPC_CACHE_DIR", "", 1);
    cr_assert_null(ampc_cache_dir_resolve(NULL));
    setenv("AMPC_CACHE_DIR", "/env/cache", 1);
    d = ampc_cache_dir_resolve(NULL);
    cr_assert_str_eq(d, "/env/cache");
    free(d);
    unsetenv("AMPC_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    d = ampc_cache_dir_resolve(NULL);
    cr_assert_str_eq(d, "/xdg/ampc");
    free(d);
    setenv("XDG_CACHE_HOME", "relative", 1); /* ignored, as the XDG spec says */
    d = ampc_cache_dir_resolve(NULL);
    cr_assert_str_eq(d, "/home/u/.cache/ampc");
    free(d);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    cr_assert_null(ampc_cache_dir_resolve(NULL));
}

Test(nvrtc, cache_put_get_round_trip) {
    char *dir = t_tmpdir("nvrtc");
    char *nested = path_in(dir, "a/b/c");
    cr_assert(ampc_cache_mkdirs(nested));
    cr_assert(ampc_cache_mkdirs(nested), "existing folders are fine");
    const char payload[] = "hello\0cache";
    cr_assert(ampc_cache_put(nested, "k.sm_80.cubin", payload, sizeof payload));
    void *data;
    int64_t size;
    cr_assert(ampc_cache_get(nested, "k.sm_80.cubin", &data, &size));
    cr_assert_eq(size, (int64_t)sizeof payload);
    cr_assert_eq(memcmp(data, payload, sizeof payload), 0);
    free(data);
    cr_assert(ampc_cache_put(nested, "empty", "", 0));
    cr_assert(ampc_cache_get(nested, "empty", &data, &size));
    cr_assert_eq(size, 0);
    free(data);
    cr_assert_not(ampc_cache_get(nested, "missing", &data, &size));
    /* A file without the magic is not an entry. */
    char *junk = path_in(nested, "junk");
    write_all(junk, "not an ampc cache entry, but long enough to hold a header", 56);
    cr_assert_not(ampc_cache_get(nested, "junk", &data, &size));
    free(junk);
    free(nested);
    t_rmdir_all(dir);
}

/* A writer killed mid-write leaves .<name>.PID.XXXXXX; the sweep removes those whose PID is gone
 * and keeps a running writer's, entries, and names that only look alike. */
Test(nvrtc, cache_sweep_removes_dead_writers_temporaries) {
    char *dir = t_tmpdir("nvrtc");
    pid_t dead = fork();
    cr_assert_geq(dead, 0);
    if (dead == 0) _exit(0);
    cr_assert_eq(waitpid(dead, NULL, 0), dead);
    pid_t live = fork();
    cr_assert_geq(live, 0);
    if (live == 0) {
        pause();
        _exit(0);
    }
    char names[5][128];
    snprintf(names[0], 128, ".k.sm_80.cubin.%ld.Ab12Cd", (long)dead); /* removed */
    snprintf(names[1], 128, ".k.sm_80.cubin.%ld.Ab12Cd", (long)live); /* a running writer's */
    snprintf(names[2], 128, "k.sm_80.cubin");                          /* an entry */
    snprintf(names[3], 128, ".k.sm_80.cubin.%ld.Ab12C", (long)dead);  /* not mkstemp's form */
    snprintf(names[4], 128, ".k.sm_80.cubin.0%ld.Ab12Cd", (long)dead); /* not a pid */
    for (int i = 0; i < 5; i++) {
        char *p = path_in(dir, names[i]);
        write_all(p, "x", 1);
        free(p);
    }
    ampc_cache_sweep(dir);
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    for (int i = 0; i < 5; i++) {
        char *p = path_in(dir, names[i]);
        cr_assert_eq(access(p, F_OK) == 0, i != 0, "%s", names[i]);
        free(p);
    }
    t_rmdir_all(dir);
}

/* ---- errors --------------------------------------------------------------------------------- */

static const char bad_source[] =
    "#include \"ampc/common.cuh\"\n"                                          /* 1 */
    "\n"                                                                    /* 2 */
    "extern \"C\" __global__ void k_fine(float *x) {\n"                     /* 3 */
    "    x[threadIdx.x] = 1.0f; /* a } in a comment */\n"                   /* 4 */
    "}\n"                                                                   /* 5 */
    "\n"                                                                    /* 6 */
    "extern \"C\" __global__ void __launch_bounds__(128)\n"                 /* 7 */
    "k_broken(float *x, const char *s = \"{\") {\n"                         /* 8 */
    "    if (threadIdx.x == 0) {\n"                                         /* 9 */
    "        x[0] = undefined_thing;\n"                                     /* 10 */
    "    }\n"                                                               /* 11 */
    "}\n";                                                                  /* 12 */

Test(nvrtc, syntax_error_names_unit_target_kernel_and_log) {
    int32_t archs[] = {90};
    ampc_nvrtc_unit u[2] = {{"good.cu", mma_source}, {"bad_u1.cu", bad_source}};
    ampc_nvrtc_options o = {.archs = archs, .n_archs = 1, .cache_dir = "", .jobs = 4};
    char *err = compile_fails(u, 2, &o, AMPC_E_NVRTC);
    /* The first failing job is unit 1's PTX job (it comes before its sm_90 job). */
    cr_assert_not_null(strstr(err, "NVRTC could not compile unit 1 'bad_u1.cu' for compute_80 "
                                   "(PTX): first error in kernel 'k_broken' (line 10)\n"),
                       "message:\n%s", err);
    cr_assert_not_null(strstr(err, "bad_u1.cu(10): error: identifier \"undefined_thing\" is "
                                   "undefined"),
                       "the NVRTC log is missing:\n%s", err);
    free(err);

    /* Same unit, sm_80 asked: the failing job is the sm_80 one. */
    int32_t a80[] = {80};
    o.archs = a80;
    err = compile_fails(&u[1], 1, &o, AMPC_E_NVRTC);
    cr_assert_not_null(strstr(err, "unit 0 'bad_u1.cu' for sm_80: first error in kernel "
                                   "'k_broken' (line 10)"), "message:\n%s", err);
    free(err);
}

Test(nvrtc, error_outside_any_kernel_and_without_err) {
    static const char src[] =
        "extern \"C\" __global__ void k_ok(float *x) { x[0] = 1.0f; /* { */ x[1] = '{'; }\n"
        "__device__ float helper(float v) { return v + missing; }\n";
    ampc_nvrtc_unit u = {"helper.cu", src};
    ampc_nvrtc_options o = {.cache_dir = ""};
    char *err = compile_fails(&u, 1, &o, AMPC_E_NVRTC);
    cr_assert_not_null(strstr(err, "first error in line 2, outside any kernel\n"), "%s", err);
    cr_assert_not_null(strstr(err, "helper.cu(2): error"), "%s", err);
    free(err);
    /* err may be NULL: the status alone comes back, nothing leaks. */
    ampc_rt_image *img;
    int32_t n;
    cr_assert_eq(ampc_nvrtc_compile(&u, 1, &o, &img, &n, NULL), AMPC_E_NVRTC);
    cr_assert_null(img);
}

Test(nvrtc, error_inside_an_embedded_header_names_the_header) {
    /* A macro that breaks common.cuh: the error sits in the header, not in a kernel. */
    static const char src[] =
        "#define acc 1\n"
        "#include \"ampc/common.cuh\"\n"
        "extern \"C\" __global__ void k(float *x) { x[0] = 1.0f; }\n";
    ampc_nvrtc_unit u = {"macro.cu", src};
    ampc_nvrtc_options o = {.cache_dir = ""};
    char *err = compile_fails(&u, 1, &o, AMPC_E_NVRTC);
    cr_assert_not_null(strstr(err, "for compute_80 (PTX): first error in 'ampc/common.cuh' line "),
                       "%s", err);
    cr_assert_not_null(strstr(err, ", included by the unit\nampc/common.cuh("), "%s", err);
    free(err);
}

Test(nvrtc, ptxas_error_names_the_entry_function) {
    /* 300 kB of static shared memory is valid C++ and valid PTX; only ptxas, building the
     * cubin, refuses it: the PTX job passes and the sm_90 job fails. */
    static const char src[] =
        "extern \"C\" __global__ void k_small(float *x) { x[0] = 1.0f; }\n"
        "extern \"C\" __global__ void k_big(float *x) {\n"
        "    __shared__ float big[75000];\n"
        "    big[threadIdx.x] = x[threadIdx.x];\n"
        "    __syncthreads();\n"
        "    x[threadIdx.x] = big[threadIdx.x + 1];\n"
        "}\n";
    ampc_nvrtc_unit u = {"big.cu", src};
    int32_t arch = 90;
    ampc_nvrtc_options o = {.archs = &arch, .n_archs = 1, .cache_dir = ""};
    char *err = compile_fails(&u, 1, &o, AMPC_E_NVRTC);
    cr_assert_not_null(strstr(err, "unit 0 'big.cu' for sm_90: error in kernel 'k_big'\n"),
                       "%s", err);
    cr_assert_not_null(strstr(err, "too much shared data"), "%s", err);
    free(err);
}

Test(nvrtc, bad_arguments) {
    ampc_nvrtc_unit u = {"mma_u0.cu", mma_source};
    int32_t arch;
    ampc_nvrtc_options o = {.archs = &arch, .n_archs = 1, .cache_dir = ""};
    char *err;

    arch = 75;
    err = compile_fails(&u, 1, &o, AMPC_E_INVALID_ARG);
    cr_assert_str_eq(err, "architecture sm_75 is not supported: ampc targets compute capability "
                          "8.0 and up (sm_80 or newer)");
    free(err);
    arch = 86 | AMPC_NVRTC_ARCH_A;
    err = compile_fails(&u, 1, &o, AMPC_E_INVALID_ARG);
    cr_assert_str_eq(err, "architecture sm_86a does not exist: architecture-specific targets "
                          "start at sm_90a");
    free(err);
    arch = 99;
    err = compile_fails(&u, 1, &o, AMPC_E_INVALID_ARG);
    cr_assert_not_null(strstr(err, "architecture sm_99 is not supported by NVRTC "), "%s", err);
    cr_assert_not_null(strstr(err, " sm_80 "), "the supported list is given: %s", err);
    free(err);

    ampc_nvrtc_unit null_src = {"x.cu", NULL};
    arch = 80;
    err = compile_fails(&null_src, 1, &o, AMPC_E_INVALID_ARG);
    cr_assert_str_eq(err, "ampc_nvrtc_compile: unit 0 has a NULL name or source");
    free(err);

    /* No units: nothing to do, successfully. */
    ampc_rt_image *img = (ampc_rt_image *)1;
    int32_t n = -1;
    cr_assert_eq(ampc_nvrtc_compile(NULL, 0, &o, &img, &n, NULL), AMPC_OK);
    cr_assert_null(img);
    cr_assert_eq(n, 0);
}

Test(nvrtc, arch_parse_and_name) {
    int32_t a = 0;
    char buf[16];
    cr_assert(ampc_nvrtc_arch_parse("sm_80", &a));
    cr_assert_eq(a, 80);
    cr_assert(ampc_nvrtc_arch_parse("86", &a));
    cr_assert_eq(a, 86);
    cr_assert(ampc_nvrtc_arch_parse("sm_90a", &a));
    cr_assert_eq(a, 90 | AMPC_NVRTC_ARCH_A);
    cr_assert_str_eq(ampc_nvrtc_arch_name(a, buf, sizeof buf), "sm_90a");
    cr_assert(ampc_nvrtc_arch_parse("sm_100a", &a));
    cr_assert_str_eq(ampc_nvrtc_arch_name(a, buf, sizeof buf), "sm_100a");
    cr_assert_str_eq(ampc_nvrtc_arch_name(120, buf, sizeof buf), "sm_120");
    const char *bad[] = {"", "sm_", "sm_8", "compute_80", "sm_80b", "sm_80 ", "sm_90aa", "x86"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_not(ampc_nvrtc_arch_parse(bad[i], &a), "'%s' parsed", bad[i]);
}

/* ---- embedded kernel templates -------------------------------------------------------------- */

Test(nvrtc, embedded_headers_match_the_source_tree) {
    int32_t n = 0;
    const ampc_embedded_file *f = ampc_kernel_headers(&n);
    cr_assert_geq(n, 1);
    bool common = false;
    for (int32_t i = 0; i < n; i++) {
        cr_assert_eq(strncmp(f[i].name, "ampc/", 5), 0, "%s", f[i].name);
        if (i) cr_assert_lt(strcmp(f[i - 1].name, f[i].name), 0, "headers are in name order");
        common |= !strcmp(f[i].name, "ampc/common.cuh");
        /* a template of codegen/kernels, or a header of ir/ the templates share */
        const size_t nl = strlen(f[i].name);
        const bool shared = nl > 2 && !strcmp(f[i].name + nl - 2, ".h");
        char rel[256];
        snprintf(rel, sizeof rel, "%s/%s/%s", AMPC_SOURCE_DIR, shared ? "ir" : "codegen/kernels",
                 f[i].name + 5);
        long len;
        char *disk = read_all(rel, &len);
        cr_assert_eq((long)f[i].size, len, "%s: %zu bytes embedded, %ld on disk", f[i].name,
                     f[i].size, len);
        cr_assert_eq(memcmp(f[i].text, disk, (size_t)len), 0, "%s differs from the tree",
                     f[i].name);
        cr_assert_eq(f[i].text[f[i].size], '\0');
        free(disk);
    }
    cr_assert(common, "ampc/common.cuh is embedded");
}

Test(nvrtc, every_embedded_header_compiles_on_its_own) {
    int32_t n = 0;
    const ampc_embedded_file *f = ampc_kernel_headers(&n);
    ampc_nvrtc_unit *u = calloc((size_t)n, sizeof *u);
    char **src = calloc((size_t)n, sizeof *src);
    for (int32_t i = 0; i < n; i++) {
        ampc_strbuf sb = {0};
        ampc_sb_printf(&sb,
                       "#include \"%s\"\n"
                       "extern \"C\" __global__ void k_probe(int *x) { x[0] = 1; }\n",
                       f[i].name);
        src[i] = ampc_sb_take(&sb);
        u[i] = (ampc_nvrtc_unit){f[i].name + 5, src[i]};
    }
    int32_t arch = 80;
    ampc_nvrtc_options o = {.archs = &arch, .n_archs = 1, .cache_dir = ""};
    ampc_rt_image *img;
    int32_t n_img;
    compile_ok(u, n, &o, &img, &n_img);
    cr_assert_eq(n_img, 2 * n);
    ampc_nvrtc_images_free(img, n_img);
    for (int32_t i = 0; i < n; i++) free(src[i]);
    free(src);
    free(u);
}

Test(nvrtc, common_helpers_convert_every_dtype) {
    /* ampc::ld / st / cvt for each element type, instantiated and compiled. */
    static const char src[] =
        "#include \"ampc/common.cuh\"\n"
        "using namespace ampc;\n"
        "template <typename T> __device__ void roundtrip(const T *x, T *y, i64 i) {\n"
        "    acc_t<T> v = ld(x, i);\n"
        "    st(y, i, v + cvt<acc_t<T>>(1));\n"
        "}\n"
        "extern \"C\" __global__ void k_all(const void *x, void *y) {\n"
        "    i64 i = threadIdx.x;\n"
        "    roundtrip((const f32 *)x, (f32 *)y, i);\n"
        "    roundtrip((const f64 *)x, (f64 *)y, i);\n"
        "    roundtrip((const f16 *)x, (f16 *)y, i);\n"
        "    roundtrip((const bf16 *)x, (bf16 *)y, i);\n"
        "    roundtrip((const i8 *)x, (i8 *)y, i);\n"
        "    roundtrip((const u8 *)x, (u8 *)y, i);\n"
        "    roundtrip((const i16 *)x, (i16 *)y, i);\n"
        "    roundtrip((const i32 *)x, (i32 *)y, i);\n"
        "    roundtrip((const i64 *)x, (i64 *)y, i);\n"
        "    ((bool *)y)[i] = cvt<bool>(((const f16 *)x)[i]);\n"
        "    ((f16 *)y)[i] = cvt<f16>(((const bf16 *)x)[i]);\n"
        "    ((bf16 *)y)[i] = cvt<bf16>(((const f64 *)x)[i]);\n"
        "    ((i64 *)y)[i] = cvt<i64>(((const f16 *)x)[i]);\n"
        "    ((f32 *)y)[i] = to_f32(((const i64 *)x)[i]) + (float)to_f64(((const bf16 *)x)[i]);\n"
        "}\n";
    ampc_nvrtc_unit u = {"common_probe.cu", src};
    int32_t arch = 80;
    ampc_nvrtc_options o = {.archs = &arch, .n_archs = 1, .cache_dir = ""};
    ampc_rt_image *img;
    int32_t n;
    compile_ok(&u, 1, &o, &img, &n);
    cr_assert_not_null(strstr(img[0].data, ".entry k_all("));
    ampc_nvrtc_images_free(img, n);
}

/* ---- SHA-256 -------------------------------------------------------------------------------- */

static void hex(const uint8_t d[32], char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

Test(nvrtc, sha256_known_answers) {
    /* FIPS 180-4 examples. */
    struct {
        const char *msg, *digest;
    } cases[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char got[65];
    uint8_t d[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ampc_sha256 s;
        ampc_sha256_init(&s);
        ampc_sha256_update(&s, cases[i].msg, strlen(cases[i].msg));
        ampc_sha256_final(&s, d);
        hex(d, got);
        cr_assert_str_eq(got, cases[i].digest, "sha256('%s')", cases[i].msg);
    }
    /* A million 'a', fed in uneven pieces that straddle block boundaries. */
    ampc_sha256 s;
    ampc_sha256_init(&s);
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    size_t left = 1000000;
    for (size_t piece = 1; left; piece = piece % 990 + 7) {
        size_t take = piece < left ? piece : left;
        ampc_sha256_update(&s, chunk, take);
        left -= take;
    }
    ampc_sha256_final(&s, d);
    hex(d, got);
    cr_assert_str_eq(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
