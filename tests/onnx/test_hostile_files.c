/*
 * test_hostile_files.c — files that try to make the ONNX front end read outside the model's
 * folder, block, or allocate what they do not hold: external data through a symlinked folder, a
 * FIFO or a folder where data should be, a model file that is a FIFO, a model file above the
 * 2 GiB protobuf limit. (The plain path rules, absolute paths and `..`, are in test_import.c.)
 * Each case must fail at once with a message naming the file or tensor; the tests have a timeout
 * so a blocking open() fails them instead of hanging the suite.
 */
#define _GNU_SOURCE /* mkdtemp, symlink, mkfifo */
#include "onnx_builder.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh temporary folder; every path made in it is listed so rm_dir can remove it. */
typedef struct tmpdir {
    char path[64];
    char made[8][300];
    bool is_dir[8];
    int n;
} tmpdir;

static void mk_dir(tmpdir *d) {
    memset(d, 0, sizeof *d);
    strcpy(d->path, "/tmp/ampc-hostile-XXXXXX");
    cr_assert_not_null(mkdtemp(d->path));
}

/* The absolute path of `rel` in d, remembered for rm_dir. */
static const char *made(tmpdir *d, const char *rel, bool is_dir) {
    cr_assert_lt(d->n, 8);
    char p[sizeof d->made[0]];
    snprintf(p, sizeof p, "%s/%s", d->path, rel);
    memcpy(d->made[d->n], p, sizeof p);
    d->is_dir[d->n] = is_dir;
    return d->made[d->n++];
}

static void put_file(tmpdir *d, const char *rel, const void *data, size_t n) {
    const char *p = made(d, rel, false);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "cannot write %s", p);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

static void rm_dir(tmpdir *d) {
    for (int i = d->n - 1; i >= 0; i--) d->is_dir[i] ? rmdir(d->made[i]) : unlink(d->made[i]);
    rmdir(d->path);
}

/* y = Identity(w), w: f32[3] stored externally at `loc`. */
static void external_model(mb *b, const char *loc) {
    mb_init(b, 8, 13);
    Onnx__TensorProto *t = mb_tensor(b, "w", OT_FLOAT, 1, (int64_t[]){3});
    mb_external(b, t, loc, NULL, NULL);
    mb_initializer(b, t);
    mb_node(b, "Identity", "id", "w", "y");
    mb_output(b, "y", OT_FLOAT, "3");
}

static const float weights[3] = {1.5f, -2, 4};

/* Imports the model external_model(loc) builds with base folder dir; returns the status and
 * leaves the message in *err (the caller frees it). */
static ampc_status import_external(const char *dir, const char *loc, ampc_graph **g, char **err) {
    mb b;
    external_model(&b, loc);
    ampc_status st = mb_import(&b, dir, NULL, g, err);
    mb_free(&b);
    return st;
}

static void expect_external_fails(const char *dir, const char *loc, ampc_status want,
                                  const char *needle) {
    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    ampc_status st = import_external(dir, loc, &g, &err);
    cr_assert_null(g, "a failed import must leave *out NULL");
    cr_assert_not_null(err);
    cr_assert(strstr(err, needle), "location '%s': expected a message containing\n  %s\ngot (%s)\n  %s",
              loc, needle, ampc_status_str(st), err);
    cr_assert_eq(st, want, "location '%s': got %s, expected %s (%s)", loc, ampc_status_str(st),
                 ampc_status_str(want), err);
    free(err);
}

/* ---- external data -------------------------------------------------------------------------- */

/* A folder inside the model's folder that is a symlink to another folder: the location has no
 * `..` and is not absolute, but its file lies elsewhere. The rule is on the resolved path. */
Test(hostile_files, external_data_through_a_symlinked_folder_is_refused) {
    tmpdir d, other;
    mk_dir(&d);
    mk_dir(&other);
    put_file(&other, "w.bin", weights, sizeof weights);
    cr_assert_eq(symlink(other.path, made(&d, "sub", false)), 0);
    expect_external_fails(d.path, "sub/w.bin", AMPC_E_PARSE, "outside the model's folder");
    rm_dir(&d);
    rm_dir(&other);
}

/* A symlink whose target stays inside the folder is followed: symlinks as such are fine. */
Test(hostile_files, a_symlink_that_stays_inside_the_folder_is_followed) {
    tmpdir d;
    mk_dir(&d);
    put_file(&d, "w.bin", weights, sizeof weights);
    cr_assert_eq(mkdir(made(&d, "sub", true), 0700), 0);
    cr_assert_eq(symlink("../w.bin", made(&d, "sub/alias.bin", false)), 0);
    ampc_graph *g = NULL;
    char *err = NULL;
    cr_assert_eq(import_external(d.path, "sub/alias.bin", &g, &err), AMPC_OK, "%s", err);
    const ampc_value *w = g->nodes[0]->inputs[0];
    cr_assert_not_null(w->data);
    cr_assert_eq(memcmp(w->data, weights, sizeof weights), 0);
    ampc_graph_destroy(g);
    rm_dir(&d);
}

/* A FIFO where the data should be would block open() until a writer came; a folder cannot be
 * read as data. Both are refused at once as "not a regular file". */
Test(hostile_files, external_data_that_is_a_fifo_or_a_folder_is_refused_at_once, .timeout = 20) {
    tmpdir d;
    mk_dir(&d);
    cr_assert_eq(mkfifo(made(&d, "fifo.bin", false), 0600), 0);
    cr_assert_eq(mkdir(made(&d, "dir.bin", true), 0700), 0);
    expect_external_fails(d.path, "fifo.bin", AMPC_E_IO,
                          "initializer 'w': external data location 'fifo.bin' is not a regular file");
    expect_external_fails(d.path, "dir.bin", AMPC_E_IO,
                          "initializer 'w': external data location 'dir.bin' is not a regular file");
    rm_dir(&d);
}

/* ---- model and tensor files ----------------------------------------------------------------- */

/* `ampc fifo.onnx`, `ampc inspect fifo.onnx` and reading a FIFO as a tensor fail at once. */
Test(hostile_files, a_model_or_tensor_file_that_is_a_fifo_is_refused_at_once, .timeout = 20) {
    tmpdir d;
    mk_dir(&d);
    const char *fifo = made(&d, "model.onnx", false);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    ampc_status st = ampc_onnx_import_file(fifo, NULL, &g, &err);
    cr_assert_eq(st, AMPC_E_IO, "got %s (%s)", ampc_status_str(st), err);
    cr_assert_null(g);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
    free(err);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(ampc_onnx_inspect(fifo, f), AMPC_E_IO);
    fclose(f);
    cr_assert(strstr(text, "not a regular file"), "%s", text);
    free(text);

    ampc_tensor t;
    char *name = NULL;
    cr_assert_eq(ampc_tensor_read_file(fifo, &t, &name, &err), AMPC_E_IO);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
    cr_assert_null(t.data);
    free(err);
    rm_dir(&d);
}

/* protobuf serializes no message of 2 GiB or more, so a bigger model file is refused by its size
 * before it is read (the file here is sparse: it takes no disk space). */
Test(hostile_files, a_model_file_above_2_gib_is_refused_before_reading) {
    tmpdir d;
    mk_dir(&d);
    const char *path = made(&d, "big.onnx", false);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, (off_t)INT32_MAX + 1), 0);
    close(fd);
    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    ampc_status st = ampc_onnx_import_file(path, NULL, &g, &err);
    cr_assert_eq(st, AMPC_E_PARSE, "got %s (%s)", ampc_status_str(st), err);
    cr_assert_null(g);
    char want[512];
    snprintf(want, sizeof want,
             "'%s' is 2147483648 bytes, more than an ONNX model file can hold (2 GiB, "
             "protobuf's limit); larger models keep their weights in external data files",
             path);
    cr_assert_str_eq(err, want);
    free(err);
    rm_dir(&d);
}
