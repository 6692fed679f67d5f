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
#include <time.h>
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

/* ---- size: import and compile stay linear in the model ---------------------------------------- */

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Appends the n pointers of `items` to a fresh repeated field in one allocation (MB_PUSH copies
 * the array on every push, quadratic for the sizes here). */
static void **mb_array(mb *b, size_t n) { return mb_alloc(b, (n ? n : 1) * sizeof(void *)); }

/* Every name lookup of the importer is a hash probe: a model whose n graph inputs all have an
 * initializer (as older exporters write weights) imports in time linear in n. Name searches
 * over the inputs for each input took 16 s for 2,000 of them. */
Test(hostile_files, many_inputs_that_are_initializers_import_in_linear_time, .timeout = 30) {
    enum { N = 3000 };
    mb b;
    mb_init(&b, 8, 17);
    Onnx__ValueInfoProto **ins = (Onnx__ValueInfoProto **)mb_array(&b, N);
    Onnx__TensorProto **inits = (Onnx__TensorProto **)mb_array(&b, N);
    Onnx__NodeProto **nodes = (Onnx__NodeProto **)mb_array(&b, N);
    char nm[32], prev[32], out[32];
    for (int i = 0; i < N; i++) {
        snprintf(nm, sizeof nm, "w%d", i);
        ins[i] = mb_value_info(&b, nm, OT_FLOAT, "2");
        inits[i] = mb_tensor(&b, nm, OT_FLOAT, 1, (int64_t[]){2});
        inits[i]->n_float_data = 2;
        inits[i]->float_data = mb_alloc(&b, 2 * sizeof(float));
        inits[i]->float_data[0] = inits[i]->float_data[1] = (float)i;
    }
    strcpy(prev, "w0");
    for (int i = 1; i < N; i++) {
        snprintf(nm, sizeof nm, "in%d", i);
        snprintf(out, sizeof out, i == N - 1 ? "y" : "s%d", i);
        char ab[80];
        snprintf(ab, sizeof ab, "%s,w%d", prev, i);
        nodes[i - 1] = mb_make_node(&b, "Add", nm, ab, out);
        strcpy(prev, out);
    }
    b.graph.input = ins, b.graph.n_input = N;
    b.graph.initializer = inits, b.graph.n_initializer = N;
    b.graph.node = nodes, b.graph.n_node = N - 1;
    mb_output(&b, "y", OT_FLOAT, "2");
    double t0 = seconds_now();
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = mb_import(&b, NULL, NULL, &g, &err);
    double dt = seconds_now() - t0;
    cr_assert_eq(st, AMPC_OK, "%s", err);
    cr_assert_lt(dt, 10.0, "importing %d inputs with initializers took %.1f s", N, dt);
    cr_assert_eq(g->n_inputs, 0, "inputs with an initializer are constants");
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* A 200,000-node chain of cheap elementwise nodes imports, optimises (verifier on) and runs
 * through the reference evaluator in seconds: no pass or lookup is quadratic in the nodes. */
Test(hostile_files, a_200000_node_chain_imports_optimises_and_runs, .timeout = 240) {
    enum { N = 200000 };
    mb b;
    mb_init(&b, 8, 17);
    Onnx__NodeProto **nodes = (Onnx__NodeProto **)mb_array(&b, N);
    char nm[32], in[64], out[32];
    static const char *const ops[3] = {"Relu", "Neg", "Add"};
    for (int i = 0; i < N; i++) {
        snprintf(nm, sizeof nm, "n%d", i);
        if (i == 0) strcpy(in, "x");
        else snprintf(in, sizeof in, "t%d", i - 1);
        if (i % 3 == 2) strcat(in, ",c");
        if (i == N - 1) strcpy(out, "y");
        else snprintf(out, sizeof out, "t%d", i);
        nodes[i] = mb_make_node(&b, ops[i % 3], nm, in, out);
    }
    b.graph.node = nodes, b.graph.n_node = N;
    Onnx__TensorProto *c = mb_tensor(&b, "c", OT_FLOAT, 1, (int64_t[]){4});
    c->n_float_data = 4;
    c->float_data = mb_alloc(&b, 4 * sizeof(float));
    for (int i = 0; i < 4; i++) c->float_data[i] = 0.5f;
    mb_initializer(&b, c);
    mb_input(&b, "x", OT_FLOAT, "4");
    mb_output(&b, "y", OT_FLOAT, "4");
    double t0 = seconds_now();
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = mb_import(&b, NULL, NULL, &g, &err);
    cr_assert_eq(st, AMPC_OK, "%s", err);
    mb_free(&b);
    ampc_pipeline_options po = {.verify = true};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
    float xs[4] = {-2, -0.25f, 0.25f, 3};
    ampc_tensor x = {AMPC_DTYPE_F32, {1, {4}}, xs}, y = {0};
    cr_assert_eq(ampc_graph_evaluate(g, &x, 1, &y, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    double dt = seconds_now() - t0;
    for (int i = 0; i < 4; i++) { /* the chain in plain C */
        float v = xs[i];
        for (int k = 0; k < N; k++) v = k % 3 == 0 ? (v > 0 ? v : 0) : k % 3 == 1 ? -v : v + 0.5f;
        cr_assert_float_eq(((float *)y.data)[i], v, 0, "y[%d]", i);
    }
    ampc_tensor_free(&y);
    cr_assert_lt(dt, 120.0, "import, optimise and evaluate of %d nodes took %.1f s", N, dt);
    ampc_graph_destroy(g);
}
