/*
 * paths.c — what a run of the `ampc` command may write. Every output of a run (the library,
 * its header and weights file, --emit's and --report's files, --save-outputs' files, the NCCL id
 * file) is checked before any work, and again just before it is put in place: not empty; in a
 * folder that exists and is writable; not an existing file that is not a regular one (writing
 * through a temporary renamed into place would replace a device, FIFO or socket with a regular
 * file); not the same file (device and inode) as an input of the run (the model or IR text,
 * --input and --calibrate files, a library's weights file); no two outputs the same file.
 *
 * Names from a model become file names only through ampc_cli_file_names: no '/', no "..", no
 * control bytes, not empty, not hidden, each unique. Lives in the core library (it prints
 * nothing), so that tests call it directly.
 */
#define _GNU_SOURCE /* vasprintf, realpath */
#include "cli/paths.h"

#include "compiler/tool.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *ampc_cli_quote(const char *name) {
    ampc_strbuf sb = {0};
    for (const unsigned char *p = (const unsigned char *)(name ? name : ""); *p; p++) {
        if (*p < 0x20 || *p == 0x7f || *p == '\'') ampc_sb_printf(&sb, "\\x%02x", *p);
        else ampc_sb_putc(&sb, (char)*p);
    }
    if (!sb.data) ampc_sb_puts(&sb, "");
    return ampc_sb_take(&sb);
}

/* ---- the files of a run ---------------------------------------------------------------------- */

/* A file of the run and how messages name it ("the model being compiled", "-o m.so"). */
typedef struct file_ref {
    char *path;
    char *role;
} file_ref;

typedef struct file_set {
    file_ref v[AMPC_CLI_MAX_LIST * 2 + 16];
    int n;
} file_set;

static void add_file(file_set *s, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_file(file_set *s, const char *path, const char *fmt, ...) {
    if (!path || s->n == (int)(sizeof s->v / sizeof *s->v)) return;
    va_list ap;
    va_start(ap, fmt);
    char *role = NULL;
    if (vasprintf(&role, fmt, ap) < 0) role = NULL;
    va_end(ap);
    s->v[s->n++] = (file_ref){ampc_xstrdup(path), role ? role : ampc_xstrdup("a file")};
}

static void free_files(file_set *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i].path), free(s->v[i].role);
    s->n = 0;
}

static bool is_library(const char *path) {
    size_t n = strlen(path);
    return n > 3 && !strcmp(path + n - 3, ".so");
}

/* The files the run reads: the model, a library's weights file, --input and --calibrate files. */
static void input_files(const ampc_cli_options *o, file_set *s) {
    if (o->model) {
        add_file(s, o->model, "the model being %s", o->command ? "read" : "compiled");
        if (is_library(o->model)) {
            char side[PATH_MAX + 16];
            snprintf(side, sizeof side, "%s.weights", o->model);
            add_file(s, side, "the weights file of the library");
        }
    }
    for (int i = 0; i < o->n_inputs; i++) {
        const char *eq = strchr(o->inputs[i], '=');
        if (eq) add_file(s, eq + 1, "the file of --input %.*s", (int)(eq - o->inputs[i]), o->inputs[i]);
    }
    DIR *d = o->calibrate ? opendir(o->calibrate) : NULL;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[PATH_MAX + 300];
        snprintf(p, sizeof p, "%s/%s", o->calibrate, e->d_name);
        add_file(s, p, "a file of --calibrate %s", o->calibrate);
    }
    if (d) closedir(d);
}

/* The files the run writes (each with how messages name it). */
static void output_files(const ampc_cli_options *o, file_set *s) {
    if (!o->command && o->output && (!o->emit || strcmp(o->output, "-"))) {
        add_file(s, o->output, "-o %s", o->output);
        if (!o->emit && *o->output) {
            char *h = ampc_artifact_header_path(o->output);
            add_file(s, h, "the header %s that -o %s writes", h, o->output);
            free(h);
            char side[PATH_MAX + 16];
            snprintf(side, sizeof side, "%s.weights", o->output);
            add_file(s, side, "the weights file %s that -o %s writes for large weights", side,
                     o->output);
        }
    }
    if (!o->command && o->report) add_file(s, o->report, "--report %s", o->report);
    if (o->command && !strcmp(o->command, "run") && o->nccl_id_file)
        add_file(s, o->nccl_id_file, "--nccl-id-file %s", o->nccl_id_file);
}

static const char *kind_of(mode_t m) {
    return S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
           : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISDIR(m) ? "a folder"
                                                             : "not a regular file";
}

/* The folder a path's file goes in ("." for a bare name), malloc'ed. */
static char *folder_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ampc_xstrdup(".");
    if (slash == path) return ampc_xstrdup("/");
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%.*s", (int)(slash - path), path);
    return ampc_sb_take(&sb);
}

/* The folder of `path` exists, is a folder and can be written. */
static bool check_folder(const char *what, const char *path, char **err) {
    char *dir = folder_of(path);
    struct stat st;
    bool ok = true;
    if (stat(dir, &st) != 0)
        ok = ampc_cli_err(err, "%s: the folder '%s' %s: create it or choose another path", what, dir,
                     errno == ENOENT ? "does not exist" : strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        ok = ampc_cli_err(err, "%s: '%s' is not a folder (%s)", what, dir, kind_of(st.st_mode));
    else if (access(dir, W_OK | X_OK) != 0)
        ok = ampc_cli_err(err, "%s: the folder '%s' is not writable (%s)", what, dir, strerror(errno));
    free(dir);
    return ok;
}

/* One output against the inputs: not empty, not a file that is not regular, not an input. */
static bool check_one(const file_set *in, const char *what, const char *path, char **err) {
    if (!path || !*path)
        return ampc_cli_err(err, "%s is empty: give a file name", what);
    struct stat st;
    if (stat(path, &st) != 0) return true;
    if (!S_ISREG(st.st_mode))
        return ampc_cli_err(err, "%s is %s, not a regular file: ampc writes a file under a temporary "
                            "name and renames it into place, which would replace it; give a file "
                            "name%s", what, kind_of(st.st_mode),
                       S_ISCHR(st.st_mode) ? " (--emit writes to stdout with -o -)" : "");
    for (int i = 0; i < in->n; i++) {
        struct stat si;
        if (stat(in->v[i].path, &si) == 0 && si.st_dev == st.st_dev && si.st_ino == st.st_ino)
            return ampc_cli_err(err, "%s is %s, %s (same file): choose another output name", what,
                           in->v[i].role, in->v[i].path);
    }
    return true;
}

/* The file a path names, for telling two outputs apart when they do not exist yet: the real
 * path of its folder and its own name (malloc'ed; NULL when the folder cannot be resolved). */
static char *canonical(const char *path) {
    char *dir = folder_of(path), real[PATH_MAX];
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    char *r = NULL;
    if (realpath(dir, real)) {
        ampc_strbuf sb = {0};
        ampc_sb_printf(&sb, "%s/%s", real, base);
        r = ampc_sb_take(&sb);
    }
    free(dir);
    return r;
}

static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ca = canonical(a), *cb = canonical(b);
    bool same = ca && cb && !strcmp(ca, cb);
    free(ca);
    free(cb);
    return same;
}

bool ampc_cli_check_output(const ampc_cli_options *o, const char *what, const char *path,
                           char **err) {
    file_set in = {0};
    input_files(o, &in);
    bool ok = check_one(&in, what, path, err);
    free_files(&in);
    return ok;
}

bool ampc_cli_check_paths(const ampc_cli_options *o, char **err) {
    if (err) *err = NULL;
    file_set in = {0}, out = {0};
    input_files(o, &in);
    output_files(o, &out);
    bool ok = true;
    for (int i = 0; ok && i < out.n; i++) {
        if (!*out.v[i].path) { /* "-o is empty", not "-o  is empty" */
            char *flag = ampc_xstrdup(out.v[i].role);
            flag[strcspn(flag, " ")] = 0;
            ok = ampc_cli_err(err, "%s is empty: give a file name", flag);
            free(flag);
            break;
        }
        ok = check_one(&in, out.v[i].role, out.v[i].path, err) &&
             check_folder(out.v[i].role, out.v[i].path, err);
        for (int j = 0; ok && j < i; j++)
            if (same_file(out.v[i].path, out.v[j].path))
                ok = ampc_cli_err(err, "%s and %s are the same file: give each output its own name",
                             out.v[j].role, out.v[i].role);
    }
    if (ok && o->command && !strcmp(o->command, "run") && o->save_dir) {
        struct stat st;
        if (!*o->save_dir) ok = ampc_cli_err(err, "--save-outputs is empty: give a folder");
        else if (stat(o->save_dir, &st) == 0 && !S_ISDIR(st.st_mode))
            ok = ampc_cli_err(err, "--save-outputs %s is %s, not a folder", o->save_dir,
                         S_ISREG(st.st_mode) ? "a file" : kind_of(st.st_mode));
        else if (stat(o->save_dir, &st) != 0)
            ok = check_folder("--save-outputs", o->save_dir, err);
    }
    if (ok && o->calibrate && !*o->calibrate) ok = ampc_cli_err(err, "--calibrate is empty: give a folder");
    free_files(&in);
    free_files(&out);
    return ok;
}

/* ---- file names from names in a model -------------------------------------------------------- */

enum { MAX_FILE_NAME = 200 };

/* The plain form of one name (see ampc_cli_file_names), malloc'ed. */
static char *plain_name(const char *name) {
    ampc_strbuf sb = {0};
    for (const char *p = name; *p && sb.len < MAX_FILE_NAME; p++) {
        char c = *p;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '-' || (c == '.' && p != name);
        ampc_sb_putc(&sb, plain ? c : '_');
    }
    if (!sb.len) ampc_sb_putc(&sb, '_');
    return ampc_sb_take(&sb);
}

static bool taken(char *const *files, int32_t n, const char *f) {
    for (int32_t i = 0; i < n; i++)
        if (files[i] && !strcmp(files[i], f)) return true;
    return false;
}

char **ampc_cli_file_names(const char *const *names, int32_t n) {
    char **files = ampc_xcalloc((size_t)n + 1, sizeof *files);
    /* first the names that are already plain and unique: they keep their own file names */
    for (int32_t i = 0; i < n; i++) {
        char *p = plain_name(names[i]);
        if (!strcmp(p, names[i]) && !taken(files, n, p)) files[i] = p;
        else free(p);
    }
    for (int32_t i = 0; i < n; i++) {
        if (files[i]) continue;
        char *p = plain_name(names[i]);
        for (int k = 2; taken(files, n, p); k++) {
            char *base = plain_name(names[i]);
            ampc_strbuf sb = {0};
            ampc_sb_printf(&sb, "%s_%d", base, k);
            free(base);
            free(p);
            p = ampc_sb_take(&sb);
        }
        files[i] = p;
    }
    return files;
}

void ampc_cli_file_names_free(char **files, int32_t n) {
    for (int32_t i = 0; files && i < n; i++) free(files[i]);
    free(files);
}

bool ampc_cli_file_in_dir(const char *dir, const char *file, char **path, char **err) {
    *path = NULL;
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%s/%s", dir, file);
    char *p = ampc_sb_take(&sb), real_dir[PATH_MAX], real[PATH_MAX];
    struct stat st;
    if (lstat(p, &st) != 0) {
        free(p);
        return true;
    }
    bool ok = true;
    if (!realpath(dir, real_dir) || !realpath(p, real)) {
        ok = ampc_cli_err(err, "--calibrate %s: '%s' cannot be resolved (%s)", dir, p, strerror(errno));
    } else if (strncmp(real, real_dir, strlen(real_dir)) ||
               (real[strlen(real_dir)] != '/' && strcmp(real_dir, "/"))) {
        ok = ampc_cli_err(err, "--calibrate %s: '%s' leads to '%s', outside the folder: refused", dir,
                     p, real);
    } else if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
        ok = ampc_cli_err(err, "--calibrate %s: '%s' is %s, not a regular file", dir, p,
                     kind_of(st.st_mode));
    }
    if (ok) *path = p;
    else free(p);
    return ok;
}
