/*
 * artifact.c — ampc_module_write_library: a compiled module becomes model.so + model.h.
 *
 * In a private temporary folder: the host C (host_c.c) and the header, every image and the
 * weights as files, and an assembler file that embeds them with .incbin as hidden symbols. The
 * system C compiler builds the library from those plus the ampc runtime archive, whose symbols
 * --exclude-libs hides, so the library exports only its own functions and two libraries load
 * side by side. The library and header are written under temporary names next to their final
 * paths and renamed into place only when everything succeeded.
 *
 * Where the runtime archive and headers are: $AMPC_RUNTIME_DIR (holding libampc_runtime.a and
 * include/), else lib/ampc/ of the installation this code runs from (found from the file holding
 * it: <prefix>/lib/libampc.so or <prefix>/bin/ampc), else the build tree ampc was built in.
 */
#define _GNU_SOURCE /* dladdr, mkdtemp */
#include "compiler/artifact.h"

#include "compiler/module.h"
#include "compiler/nvrtc.h"
#include "ir/base.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AMPC_BUILD_RUNTIME_DIR /* set by CMake: the build tree's runtime archive and includes */
#define AMPC_BUILD_RUNTIME_DIR ""
#define AMPC_BUILD_INCLUDE_PUBLIC ""
#define AMPC_BUILD_INCLUDE_ROOT ""
#endif
#ifndef AMPC_ARTIFACT_CFLAGS /* extra flags the runtime archive needs (the sanitizer build's) */
#define AMPC_ARTIFACT_CFLAGS ""
#endif
#ifndef AMPC_CUDA_LIBDIR
#define AMPC_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

enum { DEFAULT_SIDECAR_BYTES = 1 << 30, AMPC_MAX_LIBRARY_RANKS = 64 };

static ampc_status failf(char **err, ampc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ampc_status failf(char **err, ampc_status st, const char *fmt, ...) {
    if (err) {
        ampc_strbuf sb = {0};
        va_list ap;
        va_start(ap, fmt);
        ampc_sb_vprintf(&sb, fmt, ap);
        va_end(ap);
        free(*err);
        *err = ampc_sb_take(&sb);
    }
    return st;
}

enum { NAME_MAX_LEN = 200 }; /* a library name's length: file names <name>.h and <name>.c */

/* The C and C++ keywords (C23's and C++20's included, as model.h is included from both): none
 * is a library name, though <name>_create would compile, so that a name reads as a name. */
static const char *const c_keywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
    "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
    "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
    "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
    "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
    "throw", "true", "try", "typedef", "typeid", "typename", "typeof", "typeof_unqual", "union",
    "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
};

static bool is_keyword(const char *s) {
    for (int i = 0; i < AMPC_ARRAY_LEN(c_keywords); i++)
        if (!strcmp(s, c_keywords[i])) return true;
    return false;
}

/* Why `s` cannot be a library's C prefix, or NULL when it can: a C identifier of at most
 * NAME_MAX_LEN characters that is no keyword and not reserved (a leading '_' and a capital or a
 * second '_', and every name of C11's own keywords: _Bool...). */
static const char *name_problem(const char *s) {
    if (!s || !*s) return "it is empty";
    if (*s >= '0' && *s <= '9') return "it starts with a digit";
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return "it holds a character other than letters, digits and '_'";
    if (strlen(s) > NAME_MAX_LEN) return "it is longer than 200 characters";
    if (is_keyword(s)) return "it is a C or C++ keyword";
    if (s[0] == '_' && (s[1] == '_' || (s[1] >= 'A' && s[1] <= 'Z')))
        return "names starting with '__' or '_' and a capital are reserved in C";
    return NULL;
}

static bool is_ident(const char *s) { return name_problem(s) == NULL; }

bool ampc_artifact_name_ok(const char *name, char **err) {
    if (err) *err = NULL;
    const char *why = name_problem(name);
    if (!why) return true;
    failf(err, AMPC_E_INVALID_ARG, "library name '%.64s%s' is not a C identifier that can prefix "
                                   "the library's functions: %s (give letters, digits and '_', "
                                   "not starting with a digit)",
          name ? name : "", name && strlen(name) > 64 ? "..." : "", why);
    return false;
}

/* "models/resnet-50.so" -> "resnet_50": every character but letters and digits '_'; a name
 * that starts with a digit or '_', or is empty or a keyword, gets "m_" before it; at most
 * NAME_MAX_LEN characters. Always a valid library name. */
static char *name_from_path(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strcspn(base, ".");
    if (n > NAME_MAX_LEN - 2) n = NAME_MAX_LEN - 2;
    ampc_strbuf sb = {0};
    for (size_t i = 0; i < n; i++) {
        char c = base[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        ampc_sb_putc(&sb, ok ? c : '_');
    }
    char *name = ampc_sb_take(&sb);
    bool letter = (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z');
    if (!letter || is_keyword(name)) {
        ampc_sb_printf(&sb, "m_%s", name);
        free(name);
        name = ampc_sb_take(&sb);
    }
    AMPC_ASSERT(is_ident(name));
    return name;
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The runtime archive and the folders its headers are included from. */
typedef struct runtime_files {
    char archive[4096];
    char include[2][4096];
    int n_include;
} runtime_files;

static bool try_runtime_dir(const char *dir, runtime_files *rf) {
    snprintf(rf->archive, sizeof rf->archive, "%s/libampc_runtime.a", dir);
    snprintf(rf->include[0], sizeof rf->include[0], "%s/include", dir);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/runtime/plan.h", rf->include[0]);
    rf->n_include = 1;
    return is_file(rf->archive) && is_file(probe);
}

static ampc_status find_runtime(runtime_files *rf, char **err) {
    const char *env = getenv("AMPC_RUNTIME_DIR");
    if (env && *env) {
        if (try_runtime_dir(env, rf)) return AMPC_OK;
        return failf(err, AMPC_E_IO, "AMPC_RUNTIME_DIR='%s' holds no libampc_runtime.a and "
                                     "include/runtime/plan.h", env);
    }
    /* The file holding this code: libampc.so, or the executable ampc_core is linked into (whose
     * name dladdr may report as argv[0], which need not be a path: /proc/self/exe is asked too). */
    char self[2][4096] = {{0}};
    Dl_info info;
    if (dladdr((void *)(uintptr_t)&ampc_module_write_library, &info) && info.dli_fname)
        snprintf(self[0], sizeof self[0], "%s", info.dli_fname);
    ssize_t len = readlink("/proc/self/exe", self[1], sizeof self[1] - 1);
    self[1][len > 0 ? len : 0] = 0;
    for (int k = 0; k < 2; k++) {
        const char *slash = strrchr(self[k], '/');
        if (!slash) continue;
        int n = (int)(slash - self[k]);
        char cand[4200];
        snprintf(cand, sizeof cand, "%.*s/ampc", n, self[k]); /* <prefix>/lib/libampc.so */
        if (try_runtime_dir(cand, rf)) return AMPC_OK;
        snprintf(cand, sizeof cand, "%.*s/../lib/ampc", n, self[k]); /* <prefix>/bin/ampc */
        if (try_runtime_dir(cand, rf)) return AMPC_OK;
    }
    if (*AMPC_BUILD_RUNTIME_DIR) {
        snprintf(rf->archive, sizeof rf->archive, "%s/libampc_runtime.a", AMPC_BUILD_RUNTIME_DIR);
        snprintf(rf->include[0], sizeof rf->include[0], "%s", AMPC_BUILD_INCLUDE_PUBLIC);
        snprintf(rf->include[1], sizeof rf->include[1], "%s", AMPC_BUILD_INCLUDE_ROOT);
        rf->n_include = 2;
        if (is_file(rf->archive)) return AMPC_OK;
    }
    return failf(err, AMPC_E_IO,
                 "cannot find the ampc runtime (libampc_runtime.a and its headers) that a library "
                 "links: looked in $AMPC_RUNTIME_DIR (unset), lib/ampc/ of this installation and "
                 "the build tree '%s'; install ampc (cmake --install) or set AMPC_RUNTIME_DIR",
                 AMPC_BUILD_RUNTIME_DIR);
}

/* Finds `prog` as the shell would (a name with a '/' as given, else along PATH); the path in
 * out (may be NULL). */
static bool find_program(const char *prog, char *out, size_t cap) {
    if (strchr(prog, '/')) {
        if (access(prog, X_OK) != 0) return false;
        if (out) snprintf(out, cap, "%s", prog);
        return true;
    }
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        char cand[4096];
        snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, prog);
        if (n && access(cand, X_OK) == 0) {
            if (out) snprintf(out, cap, "%s", cand);
            return true;
        }
        p += n + (p[n] == ':');
    }
    return false;
}

/* The C compiler to run: the option, else $CC, else "cc". */
static const char *compiler_name(const char *cc) {
    if (!cc || !*cc) cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

ampc_status ampc_artifact_toolchain(const char *cc, char *cc_path, size_t cc_cap, char *runtime,
                                    size_t runtime_cap, char **err) {
    if (err) *err = NULL;
    cc = compiler_name(cc);
    runtime[0] = 0;
    if (!find_program(cc, cc_path, cc_cap))
        return failf(err, AMPC_E_IO, "the C compiler '%s' was not found (ampc needs one to build "
                                     "a library: install gcc or clang, or name it with $CC)", cc);
    runtime_files rf;
    ampc_status st = find_runtime(&rf, err);
    if (st == AMPC_OK) snprintf(runtime, runtime_cap, "%s", rf.archive);
    return st;
}

/* ---- files ----------------------------------------------------------------------------------- */

typedef struct tmp_files {
    char dir[4096];
    char *paths[256];
    int n;
} tmp_files;

/* Writes bytes to dir/name (remembered for cleanup); the path in *path. */
static ampc_status put_file(tmp_files *t, const char *name, const void *data, size_t n,
                            const char **path, char **err) {
    if (t->n == (int)(sizeof t->paths / sizeof *t->paths))
        return failf(err, AMPC_E_INTERNAL, "too many files for one library");
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%s/%s", t->dir, name);
    char *p = ampc_sb_take(&sb);
    t->paths[t->n++] = p;
    FILE *f = fopen(p, "wb");
    bool ok = f && (n == 0 || fwrite(data, 1, n, f) == n);
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok) return failf(err, AMPC_E_IO, "cannot write '%s': %s", p, strerror(errno));
    if (path) *path = p;
    return AMPC_OK;
}

static void remove_tmp(tmp_files *t) {
    for (int i = 0; i < t->n; i++) {
        remove(t->paths[i]);
        free(t->paths[i]);
    }
    if (t->dir[0]) rmdir(t->dir);
}

/* Removes the temporaries PATH.tmp.PID that compiles killed while writing PATH left beside it:
 * regular files whose PID no longer runs. A file whose process is alive, or whose liveness cannot
 * be told, is left alone, and so is this process's own. Errors are ignored: sweeping is tidying,
 * never a reason to fail. */
void ampc_artifact_sweep_stale(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    size_t blen = strlen(base);
    if (!blen) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name, *end;
        if (strncmp(name, base, blen) || strncmp(name + blen, ".tmp.", 5)) continue;
        if (!ampc_dead_pid_at(name + blen + 5, '\0', &end)) continue;
        struct stat st;
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        (void)unlinkat(dirfd(d), name, 0);
    }
    closedir(d);
}

/* Removes the work folders ampc-lib-PID-XXXXXX under root that killed compiles left: folders of
 * this user whose PID no longer runs, with the regular files in them (a folder holding anything
 * else stays). Errors are ignored, as above. */
static void sweep_stale_folders(const char *root) {
    DIR *d = opendir(root);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name, *end;
        if (strncmp(name, "ampc-lib-", 9) || !ampc_dead_pid_at(name + 9, '-', &end)) continue;
        struct stat st;
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != getuid())
            continue;
        int fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        DIR *sub = fd >= 0 ? fdopendir(fd) : NULL;
        if (!sub) {
            if (fd >= 0) close(fd);
            continue;
        }
        struct dirent *f;
        while ((f = readdir(sub)) != NULL)
            if (fstatat(fd, f->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                (void)unlinkat(fd, f->d_name, 0);
        closedir(sub);
        (void)unlinkat(dirfd(d), name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* Runs argv (no shell) with stdout and stderr into log; AMPC_OK when it exits 0. The caller's
 * stdio buffers are flushed first: the child would otherwise write them out again when it
 * fails to start the tool (and a program whose stdout is not a terminal printed lines twice). */
static ampc_status run_tool(char *const *argv, const char *log, char **err) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return failf(err, AMPC_E_IO, "cannot start '%s': %s", argv[0], strerror(errno));
    if (pid == 0) { /* descriptors, not stdio: the caller's stdout may be any kind of stream */
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0 && dup2(fd, 1) >= 0 && dup2(fd, 2) >= 0) execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return AMPC_OK;
    ampc_strbuf out = {0};
    FILE *f = fopen(log, "rb");
    char buf[8192];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    ampc_strbuf cmd = {0};
    for (int i = 0; argv[i]; i++) ampc_sb_printf(&cmd, "%s%s", i ? " " : "", argv[i]);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !n)
        ampc_sb_printf(&out, "the C compiler '%s' was not found (ampc needs one to build a "
                             "library: install gcc or clang, or name it with $CC)", argv[0]);
    else
        ampc_sb_printf(&out, "the C compiler failed building the library (exit %d):\n%s\ncommand: %s",
                       WIFEXITED(status) ? WEXITSTATUS(status) : -1, buf, cmd.data);
    ampc_sb_free(&cmd);
    ampc_status st = failf(err, AMPC_E_INTERNAL, "%s", out.data);
    ampc_sb_free(&out);
    return st;
}

/* The assembler file embedding the images and (when not a sidecar) the weights: the model's
 * (rank 0's) at weights_path, rank r's at rank_paths[r] for a multi-GPU plan. */
static char *blobs_asm(const ampc_rt_plan *p, char *const *image_paths, const char *weights_path,
                       char *const *rank_paths) {
    ampc_strbuf sb = {0};
    ampc_sb_puts(&sb, "/* The PTX, cubins and weights of the library, as hidden symbols. */\n"
                      "    .section .rodata.ampc, \"a\"\n");
    int32_t n_extra = p->n_ranks > 1 ? p->n_ranks - 1 : 0;
    for (int32_t i = 0; i <= p->n_images + n_extra; i++) {
        const char *path = i < p->n_images    ? image_paths[i]
                           : i == p->n_images ? weights_path
                                              : rank_paths[i - p->n_images];
        if (!path) continue;
        char sym[64];
        if (i < p->n_images) snprintf(sym, sizeof sym, "ampc_blob_image_%d", i);
        else if (i == p->n_images) snprintf(sym, sizeof sym, "ampc_blob_weights");
        else snprintf(sym, sizeof sym, "ampc_blob_weights_r%d", i - p->n_images);
        ampc_sb_printf(&sb, "    .balign 256\n    .globl %s\n    .hidden %s\n    .type %s, @object\n"
                            "%s:\n    .incbin \"%s\"\n    .byte 0\n",
                       sym, sym, sym, sym, path);
    }
    ampc_sb_puts(&sb, "    .section .note.GNU-stack, \"\", @progbits\n");
    return ampc_sb_take(&sb);
}

bool ampc_artifact_has_sidecar(const ampc_module *m, const ampc_library_options *o) {
    int64_t limit = o && o->sidecar_bytes > 0 ? o->sidecar_bytes : DEFAULT_SIDECAR_BYTES;
    /* a multi-GPU library embeds every rank's weights (a sidecar per rank is not built yet) */
    return m->cg->plan.weights_bytes > limit && m->cg->plan.n_ranks <= 1;
}

char *ampc_module_host_c(const ampc_module *m, const char *name) {
    if (!m) return NULL;
    const char *n = name && is_ident(name) ? name : "model";
    bool sidecar = m->cg->plan.weights_bytes > DEFAULT_SIDECAR_BYTES && m->cg->plan.n_ranks <= 1;
    ampc_artifact_layout l = {.sidecar = sidecar ? "model.weights" : NULL};
    return ampc_artifact_host_c(m, n, &l);
}

char *ampc_artifact_header_path(const char *path) {
    ampc_strbuf hp = {0};
    size_t plen = strlen(path);
    if (plen > 3 && !strcmp(path + plen - 3, ".so")) ampc_sb_printf(&hp, "%.*s.h", (int)(plen - 3), path);
    else ampc_sb_printf(&hp, "%s.h", path);
    return ampc_sb_take(&hp);
}

/* What a file that is not regular is, for messages. */
static const char *kind_of(mode_t m) {
    return S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
           : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISDIR(m) ? "a folder"
                                                             : "not a regular file";
}

ampc_status ampc_artifact_check_target(const char *path, const char *source, char **err) {
    struct stat st, ss;
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return failf(err, AMPC_E_IO, "cannot write '%s': the folder '%s' %s", path, dir,
                     errno == ENOENT || S_ISDIR(st.st_mode) ? "does not exist" : "is not a folder");
    if (access(dir, W_OK | X_OK) != 0)
        return failf(err, AMPC_E_IO, "cannot write '%s': the folder '%s' is not writable (%s)",
                     path, dir, strerror(errno));
    if (stat(path, &st) != 0) return AMPC_OK;
    if (!S_ISREG(st.st_mode))
        return failf(err, AMPC_E_INVALID_ARG, "'%s' is %s, not a regular file: writing it would "
                     "replace it with a regular file; give a file name", path, kind_of(st.st_mode));
    if (source && stat(source, &ss) == 0 && ss.st_dev == st.st_dev && ss.st_ino == st.st_ino)
        return failf(err, AMPC_E_INVALID_ARG, "'%s' is the model being compiled, '%s' (same "
                     "file): choose another output name", path, source);
    return AMPC_OK;
}

/* Renames tmp to final, checked again first (it may have become a device, FIFO or the model
 * since the build began); on failure removes tmp. */
static ampc_status place(const char *tmp, const char *final, const char *source, char **err) {
    ampc_status st = ampc_artifact_check_target(final, source, err);
    if (st != AMPC_OK) {
        remove(tmp);
        return st;
    }
    if (rename(tmp, final) == 0) return AMPC_OK;
    st = failf(err, AMPC_E_IO, "cannot write '%s': %s", final, strerror(errno));
    remove(tmp);
    return st;
}

/* Builds the library into so_tmp (and the weights sidecar into side_tmp when given). */
static ampc_status build(const ampc_module *m, const char *name, const char *final_path, const char *so_tmp,
                         const char *header_text, const char *side_tmp, const char *side_name,
                         const ampc_library_options *o, tmp_files *t, char **err) {
    const ampc_rt_plan *p = &m->cg->plan;
    runtime_files rf;
    ampc_status st = find_runtime(&rf, err);
    if (st != AMPC_OK) return st;
    char *image_paths[256] = {0};
    if (p->n_images > 200) return failf(err, AMPC_E_INTERNAL, "%d images: too many for one library", p->n_images);
    for (int32_t i = 0; i < p->n_images && st == AMPC_OK; i++) {
        char fname[64];
        snprintf(fname, sizeof fname, "image_%d.bin", i);
        const char *path;
        st = put_file(t, fname, p->images[i].data, (size_t)p->images[i].size, &path, err);
        image_paths[i] = (char *)path;
    }
    const char *weights_path = NULL;
    if (st == AMPC_OK && p->weights_bytes) {
        if (side_tmp) {
            FILE *f = fopen(side_tmp, "wb");
            bool ok = f && fwrite(p->weights, 1, (size_t)p->weights_bytes, f) == (size_t)p->weights_bytes;
            if (f) ok = fclose(f) == 0 && ok;
            if (!ok) st = failf(err, AMPC_E_IO, "cannot write '%s': %s", side_tmp, strerror(errno));
        } else {
            st = put_file(t, "weights.bin", p->weights, (size_t)p->weights_bytes, &weights_path, err);
        }
    }
    /* a multi-GPU plan: each further rank's weights (rank 0's are the model's, above) */
    char *rank_paths[AMPC_MAX_LIBRARY_RANKS] = {0};
    if (p->n_ranks > AMPC_MAX_LIBRARY_RANKS)
        st = failf(err, AMPC_E_UNSUPPORTED, "a library of %d ranks: at most %d GPUs are built",
                   p->n_ranks, AMPC_MAX_LIBRARY_RANKS);
    for (int32_t r = 1; st == AMPC_OK && r < p->n_ranks; r++) {
        if (!p->ranks[r].weights_bytes || p->split_batch) continue; /* a batch split: shared */
        char fname[64];
        snprintf(fname, sizeof fname, "weights_r%d.bin", r);
        const char *path;
        st = put_file(t, fname, p->ranks[r].weights, (size_t)p->ranks[r].weights_bytes, &path, err);
        rank_paths[r] = (char *)path;
    }
    if (st != AMPC_OK) return st;
    ampc_artifact_layout l = {.sidecar = side_tmp ? side_name : NULL,
                              .math_note = o ? o->math_note : NULL};
    char *c_text = ampc_artifact_host_c(m, name, &l),
         *s_text = blobs_asm(p, image_paths, weights_path, rank_paths);
    char hname[300], cname[300];
    snprintf(hname, sizeof hname, "%s.h", name);
    snprintf(cname, sizeof cname, "%s.c", name);
    const char *c_path = NULL, *s_path = NULL, *log_path = NULL;
    st = put_file(t, hname, header_text, strlen(header_text), NULL, err);
    if (st == AMPC_OK) st = put_file(t, cname, c_text, strlen(c_text), &c_path, err);
    if (st == AMPC_OK) st = put_file(t, "blobs.S", s_text, strlen(s_text), &s_path, err);
    if (st == AMPC_OK) st = put_file(t, "cc.log", "", 0, &log_path, err);
    free(c_text);
    free(s_text);
    if (st != AMPC_OK) return st;

    const char *cc = compiler_name(o ? o->cc : NULL);
    const char *cuda = getenv("CUDA_HOME");
    char libdir[4200], rpath[4300], inc[3][4200];
    if (cuda && *cuda) snprintf(libdir, sizeof libdir, "%s/lib64", cuda);
    else snprintf(libdir, sizeof libdir, "%s", AMPC_CUDA_LIBDIR);
    snprintf(rpath, sizeof rpath, "-Wl,-rpath,%s", libdir);
    char ldir[4300];
    snprintf(ldir, sizeof ldir, "-L%s", libdir);
    snprintf(inc[0], sizeof inc[0], "-I%s", t->dir);
    for (int i = 0; i < rf.n_include; i++) snprintf(inc[i + 1], sizeof inc[i + 1], "-I%s", rf.include[i]);
    char *argv[48];
    int a = 0;
    argv[a++] = (char *)cc;
    argv[a++] = "-shared";
    argv[a++] = "-fPIC";
    argv[a++] = "-O1";
    argv[a++] = "-std=c11";
    argv[a++] = "-fvisibility=hidden";
    for (int i = 0; i <= rf.n_include; i++) argv[a++] = inc[i];
    char extra[512];
    snprintf(extra, sizeof extra, "%s", AMPC_ARTIFACT_CFLAGS);
    if (*extra) argv[a++] = extra;
    argv[a++] = "-o";
    argv[a++] = (char *)so_tmp;
    argv[a++] = (char *)c_path;
    argv[a++] = (char *)s_path;
    argv[a++] = rf.archive;
    /* the soname is the file's name as the user gave it: -Xlinker passes it as one argument
     * (-Wl, would split it at commas into more linker options) */
    const char *base = strrchr(final_path, '/');
    argv[a++] = "-Xlinker";
    argv[a++] = "-soname";
    argv[a++] = "-Xlinker";
    argv[a++] = (char *)(base ? base + 1 : final_path);
    argv[a++] = "-Wl,--exclude-libs,ALL";
    /* LLD links a library with large embedded weights in about half the time of GNU ld (the
     * weights are copied once more either way); used when it is installed. */
    if (find_program("ld.lld", NULL, 0)) argv[a++] = "-fuse-ld=lld";
    argv[a++] = "-Wl,-z,noexecstack";
    argv[a++] = ldir;
    argv[a++] = rpath;
    argv[a++] = "-lcudart";
    argv[a++] = "-ldl";
    argv[a++] = "-lpthread";
    argv[a++] = "-lm";
    argv[a] = NULL;
    return run_tool(argv, log_path, err);
}

ampc_status ampc_module_write_library(const ampc_module *m, const char *path,
                                      const ampc_library_options *o, char **err) {
    if (err) *err = NULL;
    if (!m || !path)
        return failf(err, AMPC_E_INVALID_ARG, "ampc_module_write_library: NULL %s", m ? "path" : "module");
    if (!*path)
        return failf(err, AMPC_E_INVALID_ARG, "the library's path is empty: give a file name");
    if (o && o->name && !ampc_artifact_name_ok(o->name, err)) return AMPC_E_INVALID_ARG;
    char *name = o && o->name ? ampc_xstrdup(o->name) : name_from_path(path);
    ampc_strbuf hp = {0}, so_tmp = {0}, h_tmp = {0}, side = {0}, side_tmp = {0};
    if (o && o->header) ampc_sb_puts(&hp, o->header);
    else {
        char *h = ampc_artifact_header_path(path);
        ampc_sb_puts(&hp, h);
        free(h);
    }
    ampc_sb_printf(&so_tmp, "%s.tmp.%ld", path, (long)getpid());
    ampc_sb_printf(&h_tmp, "%s.tmp.%ld", hp.data, (long)getpid());
    bool sidecar = ampc_artifact_has_sidecar(m, o);
    if (sidecar) {
        ampc_sb_printf(&side, "%s.weights", path);
        ampc_sb_printf(&side_tmp, "%s.tmp.%ld", side.data, (long)getpid());
    }
    const char *base = strrchr(path, '/');
    char side_name[4200];
    snprintf(side_name, sizeof side_name, "%s.weights", base ? base + 1 : path);

    /* every file is checked before any work (and again as it is renamed into place) */
    const char *src = o ? o->source : NULL;
    tmp_files t = {0};
    char *header = NULL;
    ampc_status st = ampc_artifact_check_target(path, src, err);
    if (st == AMPC_OK) st = ampc_artifact_check_target(hp.data, src, err);
    if (st == AMPC_OK && sidecar) st = ampc_artifact_check_target(side.data, src, err);
    if (st != AMPC_OK) goto done;
    ampc_artifact_sweep_stale(path);
    ampc_artifact_sweep_stale(hp.data);
    ampc_strbuf side_any = {0}; /* the weights file's temporaries, whether or not this one has it */
    ampc_sb_printf(&side_any, "%s.weights", path);
    ampc_artifact_sweep_stale(side_any.data);
    ampc_sb_free(&side_any);

    const char *tmpdir = getenv("TMPDIR");
    const char *root = tmpdir && *tmpdir && !strpbrk(tmpdir, "\"\\\n") ? tmpdir : "/tmp";
    /* the pid in the name lets a later compile remove the folder when this one is killed */
    sweep_stale_folders(root);
    snprintf(t.dir, sizeof t.dir, "%s/ampc-lib-%ld-XXXXXX", root, (long)getpid());
    if (!mkdtemp(t.dir)) {
        st = failf(err, AMPC_E_IO, "cannot create a temporary folder '%s': %s", t.dir, strerror(errno));
        t.dir[0] = 0;
    }
    header = ampc_artifact_header(m, name, o ? o->source : NULL);
    if (st == AMPC_OK)
        st = build(m, name, path, so_tmp.data, header, sidecar ? side_tmp.data : NULL, side_name, o, &t, err);
    if (st == AMPC_OK) {
        FILE *f = fopen(h_tmp.data, "wb");
        bool ok = f && fputs(header, f) >= 0;
        if (f) ok = fclose(f) == 0 && ok;
        if (!ok) st = failf(err, AMPC_E_IO, "cannot write '%s': %s", h_tmp.data, strerror(errno));
    }
    if (st == AMPC_OK && sidecar) st = place(side_tmp.data, side.data, src, err);
    if (st == AMPC_OK) st = place(h_tmp.data, hp.data, src, err);
    if (st == AMPC_OK) st = place(so_tmp.data, path, src, err);
    if (st != AMPC_OK) { /* nothing half-written stays */
        remove(so_tmp.data);
        remove(h_tmp.data);
        if (sidecar) remove(side_tmp.data);
    }
    remove_tmp(&t);
done:
    free(header);
    free(name);
    ampc_sb_free(&hp);
    ampc_sb_free(&so_tmp);
    ampc_sb_free(&h_tmp);
    ampc_sb_free(&side);
    ampc_sb_free(&side_tmp);
    return st;
}
