/*
 * runner.c — runs ONNX backend test cases on the reference evaluator (see runner.h).
 *
 * Per data set: read inputs and expected outputs (.pb TensorProto), import the model binding as
 * constants the inputs that must be known at compile time (Reshape's shape, Slice's starts...:
 * ampc compiles static graphs), run the default pass pipeline with the verifier on, evaluate, and
 * compare every output: dtype and shape exactly, values within atol + rtol * |expected| (NaN
 * matches NaN, infinities must match exactly), integers and bools exactly.
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "runner.h"

#include "ampc.h"
#include "ir/ir.h"
#include "ir/ref/ref.h"

#include AMPC_ONNX_PB_H

#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const conf_suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple",
                                   CONF_NEWER_SUITE};
const int conf_n_suites = 5;

const char *conf_data_root(void) {
    const char *env = getenv("AMPC_ONNX_TESTDATA");
    return env && *env ? env : "/usr/share/libonnx-testdata/data";
}

const char *conf_generated_root(void) {
    const char *env = getenv("AMPC_ONNX_GENERATED");
    return env && *env ? env : AMPC_SOURCE_DIR "/.onnx-tests";
}

const char *conf_suite_root(const char *suite) {
    return strcmp(suite, CONF_NEWER_SUITE) ? conf_data_root() : conf_generated_root();
}

const char *conf_status_name(conf_status s) {
    return s == CONF_PASS ? "pass" : s == CONF_FAIL ? "fail" : "unsupported";
}

bool conf_status_parse(const char *s, conf_status *out) {
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, conf_status_name((conf_status)i))) {
            *out = (conf_status)i;
            return true;
        }
    return false;
}

int conf_read_table(const char *path, conf_row **rows) {
    *rows = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, cap = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *save = NULL, *suite = strtok_r(line, "\t", &save), *name = strtok_r(NULL, "\t", &save);
        char *st = strtok_r(NULL, "\t", &save), *reason = strtok_r(NULL, "", &save);
        conf_status cs;
        if (!suite || !name || !st || !conf_status_parse(st, &cs)) continue;
        if (n == cap) *rows = ampc_xrealloc(*rows, (size_t)(cap = cap ? cap * 2 : 1024) * sizeof **rows);
        conf_row *r = &(*rows)[n++];
        snprintf(r->suite, sizeof r->suite, "%s", suite);
        snprintf(r->name, sizeof r->name, "%s", name);
        snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
        r->status = cs;
    }
    fclose(f);
    return n;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int conf_list_cases(const char *root, const char *suite, char ***names) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, suite);
    *names = NULL;
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char model[4096 + 512];
        if (e->d_name[0] == '.') continue;
        snprintf(model, sizeof model, "%s/%s/model.onnx", path, e->d_name);
        if (!is_file(model)) continue;
        if (n == cap) *names = ampc_xrealloc(*names, (size_t)(cap = cap ? cap * 2 : 256) * sizeof **names);
        (*names)[n++] = ampc_xstrdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(*names, (size_t)n, sizeof **names, cmp_str);
    return n;
}

void conf_free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* ---- one case ------------------------------------------------------------------------------- */

enum { MAX_TENSORS = 64 };

typedef struct dataset {
    ampc_tensor in[MAX_TENSORS], out[MAX_TENSORS];
    char *in_name[MAX_TENSORS], *out_name[MAX_TENSORS];
    int n_in, n_out;
} dataset;

static void dataset_free(dataset *ds) {
    for (int i = 0; i < ds->n_in; i++) ampc_tensor_free(&ds->in[i]), free(ds->in_name[i]);
    for (int i = 0; i < ds->n_out; i++) ampc_tensor_free(&ds->out[i]), free(ds->out_name[i]);
    memset(ds, 0, sizeof *ds);
}

/* The case folder of the run in progress: stripped from reasons so they read the same on
 * every machine. */
static const char *case_dir;

/* One line of a (possibly multi-line) message into the reason, paths made relative to the case. */
static void set_reason(conf_result *r, conf_status st, const char *prefix, const char *msg) {
    r->status = st;
    snprintf(r->reason, sizeof r->reason, "%s%s", prefix, msg ? msg : "");
    size_t n = case_dir ? strlen(case_dir) : 0;
    for (char *p; n && (p = strstr(r->reason, case_dir));)
        memmove(p, p + n + (p[n] == '/'), strlen(p + n + (p[n] == '/')) + 1);
    for (char *p = r->reason; *p; p++)
        if (*p == '\n' || *p == '\t' || *p == '|') *p = ' ';
}

static bool read_tensors(const char *dir, const char *stem, ampc_tensor *ts, char **names, int *n,
                         conf_result *r) {
    *n = 0;
    for (int i = 0; i < MAX_TENSORS; i++) {
        char path[4096 + 64];
        snprintf(path, sizeof path, "%s/%s_%d.pb", dir, stem, i);
        if (!is_file(path)) break;
        char *err = NULL;
        if (ampc_tensor_read_file(path, &ts[i], &names[i], &err) != AMPC_OK) {
            /* Sequence, optional and string tensors are outside ampc's tensor types. */
            set_reason(r, CONF_UNSUPPORTED, "test data: ", err);
            free(err);
            return false;
        }
        *n = i + 1;
    }
    return true;
}

/* Compares one output within atol + rtol * |expected|; on mismatch fills the reason (with the
 * worst element, `what` naming the expectation) and returns false. */
static bool compare(const ampc_tensor *got, const ampc_tensor *want_in, const char *name,
                    double rtol, double atol, const char *what, conf_result *r) {
    char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX], msg[300];
    ampc_tensor want_bf16 = *want_in; /* bfloat16 is stored as UINT16 in the test data */
    if (want_in->dtype == AMPC_DTYPE_U16 && got->dtype == AMPC_DTYPE_BF16) want_bf16.dtype = AMPC_DTYPE_BF16;
    const ampc_tensor *want = &want_bf16;
    if (got->dtype != want->dtype || !ampc_shape_eq(&got->shape, &want->shape)) {
        snprintf(msg, sizeof msg, "output '%s' is %s%s, expected %s%s", name,
                 ampc_dtype_name(got->dtype), ampc_shape_str(&got->shape, a, sizeof a),
                 ampc_dtype_name(want->dtype), ampc_shape_str(&want->shape, b, sizeof b));
        set_reason(r, CONF_FAIL, "", msg);
        return false;
    }
    int64_t n = ampc_shape_numel(&want->shape), worst = -1;
    double worst_err = 0;
    bool fl = ampc_dtype_is_float(want->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (!fl) {
            if (ampc_ref_load_i64(got->data, got->dtype, i) != ampc_ref_load_i64(want->data, want->dtype, i)) {
                snprintf(msg, sizeof msg, "output '%s' element %lld: got %lld, %s %lld", name,
                         (long long)i, (long long)ampc_ref_load_i64(got->data, got->dtype, i), what,
                         (long long)ampc_ref_load_i64(want->data, want->dtype, i));
                set_reason(r, CONF_FAIL, "", msg);
                return false;
            }
            continue;
        }
        double x = ampc_ref_load_f64(got->data, got->dtype, i), e = ampc_ref_load_f64(want->data, want->dtype, i);
        if (isnan(e) || isnan(x)) {
            if (isnan(e) != isnan(x)) worst = i, worst_err = INFINITY;
            continue;
        }
        if (isinf(e) || isinf(x)) {
            if (x != e) worst = i, worst_err = INFINITY;
            continue;
        }
        double excess = fabs(x - e) - (atol + rtol * fabs(e));
        if (excess > 0 && excess > worst_err) worst = i, worst_err = excess;
    }
    if (worst < 0) return true;
    snprintf(msg, sizeof msg, "output '%s' element %lld: got %.9g, %s %.9g (rtol %g, atol %g)",
             name, (long long)worst, ampc_ref_load_f64(got->data, got->dtype, worst), what,
             ampc_ref_load_f64(want->data, want->dtype, worst), rtol, atol);
    set_reason(r, CONF_FAIL, "", msg);
    return false;
}

/* Imports the model binding the data set's inputs that must be compile-time constants (matched
 * by name, or by position among the model's runtime inputs when the test data has no name). */
static ampc_status import_case(const char *model, const dataset *ds, ampc_graph **g, char **err) {
    ampc_input_binding binds[MAX_TENSORS];
    for (int i = 0; i < ds->n_in; i++) binds[i] = (ampc_input_binding){ds->in_name[i], ds->in[i]};
    ampc_import_options o = {0};
    o.constants = binds;
    o.n_constants = ds->n_in;
    o.constants_if_needed = true;
    return ampc_onnx_import_file(model, &o, g, err);
}

/* Where the outputs come from: the reference evaluator, or the GPU through ampc_compile. */
static ampc_status execute(ampc_graph *g, conf_mode mode, const ampc_tensor *in, int32_t ni,
                           ampc_tensor *out, int32_t no, conf_result *r) {
    if (mode == CONF_REFERENCE || mode == CONF_GPU_GRAPH) {
        if (ampc_graph_evaluate(g, in, ni, out, no) == AMPC_OK) return AMPC_OK;
        set_reason(r, CONF_FAIL, "evaluate: ", ampc_graph_errors(g));
        return AMPC_E_EVAL;
    }
    /* PTX only: the driver compiles it for the GPU present at load (no cubin per case). FP32
     * math, except for CONF_GPU_DEFAULT: the backend tests expect float32 results within rtol
     * 1e-3, which TF32's 10-bit mantissa (ampc's default for f32 matmuls and convolutions) does
     * not promise; the default build is held to conf_data_tolerance's instead. */
    static const int32_t no_cubins[1] = {0}, sm80[1] = {80};
    ampc_compile_options co = {.archs = no_cubins, .n_archs = 0,
                               .no_tf32 = mode != CONF_GPU_DEFAULT};
    if (mode == CONF_COMPILE) co.archs = sm80, co.n_archs = 1;
    ampc_module *m = NULL;
    ampc_status st = mode == CONF_CHECK ? ampc_compile_check(g, &co, NULL) : ampc_compile(g, &co, &m);
    if (mode == CONF_CHECK && st == AMPC_OK) return AMPC_OK;
    if (st != AMPC_OK) {
        set_reason(r, st == AMPC_E_UNSUPPORTED ? CONF_UNSUPPORTED : CONF_FAIL, "gpu compile: ",
                   ampc_graph_errors(g));
        return st;
    }
    if (mode == CONF_COMPILE) { /* every kernel compiled: nothing to run */
        ampc_module_destroy(m);
        return AMPC_OK;
    }
    for (int32_t i = 0; i < no; i++) {
        const ampc_value *v = ampc_graph_output(g, i);
        size_t nb = (size_t)ampc_shape_numel(&v->shape) * ampc_dtype_size(v->dtype);
        out[i] = (ampc_tensor){v->dtype, v->shape, calloc(1, nb ? nb : 1)};
    }
    st = ampc_module_run(m, in, ni, out, no, NULL);
    if (st != AMPC_OK) {
        set_reason(r, st == AMPC_E_NO_DEVICE ? CONF_UNSUPPORTED : CONF_FAIL, "gpu run: ",
                   ampc_module_errors(m));
        for (int32_t i = 0; i < no; i++) ampc_tensor_free(&out[i]);
    }
    ampc_module_destroy(m);
    return st;
}

void conf_data_tolerance(conf_mode mode, int dtype, double *rtol, double *atol) {
    *rtol = CONF_RTOL, *atol = CONF_ATOL;
    if (mode == CONF_GPU_DEFAULT && (ampc_dtype)dtype == AMPC_DTYPE_F32)
        *rtol = fmax(*rtol, CONF_TF32_RTOL), *atol = fmax(*atol, CONF_TF32_ATOL);
    if (mode == CONF_GPU_GRAPH &&
        ((ampc_dtype)dtype == AMPC_DTYPE_F16 || (ampc_dtype)dtype == AMPC_DTYPE_BF16))
        conf_random_tolerance(NULL, dtype, rtol, atol);
}

/* Ops whose outputs are long sums of products: the reference accumulates in f64, the GPU in
 * f32, so f32 outputs may differ by more than a rounding or two of the result (the error follows
 * the sum of the terms' magnitudes, not the result's). */
static const struct {
    const char *op;
    double rtol, atol;
} long_sums[] = {{"DFT", 1e-3, 1e-4}, {"STFT", 1e-3, 1e-4}};

void conf_random_tolerance(const ampc_graph *g, int dtype, double *rtol, double *atol) {
    switch ((ampc_dtype)dtype) {
    case AMPC_DTYPE_F64: *rtol = 1e-9, *atol = 1e-12; return;
    case AMPC_DTYPE_F16: *rtol = 4e-3, *atol = 1e-3; return;  /* 11-bit significand */
    case AMPC_DTYPE_BF16: *rtol = 2e-2, *atol = 1e-2; return; /* 8-bit significand */
    default: *rtol = 1e-4, *atol = 1e-5; break;               /* f32 (integers compare exactly) */
    }
    for (int32_t i = 0; g && i < g->n_nodes; i++)
        for (size_t k = 0; k < sizeof long_sums / sizeof *long_sums; k++)
            if (!g->nodes[i]->dead && !strcmp(ampc_op_get(g->nodes[i]->op)->onnx, long_sums[k].op)) {
                *rtol = fmax(*rtol, long_sums[k].rtol);
                *atol = fmax(*atol, long_sums[k].atol);
            }
}

/* A 64-bit hash of a string (FNV-1a), seeding the case's random inputs. */
static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Uniform in [0, 1) from a xorshift64* state. */
static double next_unit(uint64_t *state) {
    *state ^= *state >> 12, *state ^= *state << 25, *state ^= *state >> 27;
    return (double)((*state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* A copy of `t` whose floating-point elements are uniform in [min, max] of t's finite values. */
static ampc_tensor randomised(const ampc_tensor *t, uint64_t *state) {
    size_t nb = (size_t)ampc_shape_numel(&t->shape) * ampc_dtype_size(t->dtype);
    ampc_tensor c = {t->dtype, t->shape, malloc(nb ? nb : 1)};
    memcpy(c.data, t->data, nb);
    if (!ampc_dtype_is_float(t->dtype)) return c;
    int64_t n = ampc_shape_numel(&t->shape);
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = ampc_ref_load_f64(t->data, t->dtype, i);
        if (isfinite(v)) lo = fmin(lo, v), hi = fmax(hi, v);
    }
    if (lo > hi) return c; /* no finite value: keep the data */
    for (int64_t i = 0; i < n; i++)
        if (isfinite(ampc_ref_load_f64(t->data, t->dtype, i)))
            ampc_ref_store_f64(c.data, c.dtype, i, lo + (hi - lo) * next_unit(state));
    return c;
}

/* CONF_RANDOM: the reference and the GPU on the same random inputs, compared per output dtype. */
static void run_random(ampc_graph *g, const ampc_tensor *in, int32_t ni, int32_t no, conf_result *r) {
    ampc_tensor rin[MAX_TENSORS], ref[MAX_TENSORS], gpu[MAX_TENSORS];
    uint64_t state = hash_str(case_dir) | 1;
    for (int32_t i = 0; i < ni; i++) rin[i] = randomised(&in[i], &state);
    if (execute(g, CONF_REFERENCE, rin, ni, ref, no, r) == AMPC_OK) {
        if (execute(g, CONF_GPU, rin, ni, gpu, no, r) == AMPC_OK) {
            for (int32_t i = 0; i < no; i++) {
                double rtol, atol;
                conf_random_tolerance(g, ref[i].dtype, &rtol, &atol);
                if (r->status == CONF_PASS)
                    compare(&gpu[i], &ref[i], ampc_value_name(ampc_graph_output(g, i)), rtol, atol,
                            "reference", r);
                ampc_tensor_free(&gpu[i]);
            }
        }
        for (int32_t i = 0; i < no; i++) ampc_tensor_free(&ref[i]);
    }
    for (int32_t i = 0; i < ni; i++) ampc_tensor_free(&rin[i]);
}

/* ---- through the command line (CONF_CLI) ---------------------------------------------------- */

/* The ampc binary: $AMPC_BIN, else `ampc` beside this program. */
static const char *ampc_binary(void) {
    static char path[4096];
    const char *env = getenv("AMPC_BIN");
    if (env && *env) return env;
    if (!path[0]) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = 0;
        snprintf(path, sizeof path, "%s/ampc", n > 0 ? dirname(self) : ".");
    }
    return path;
}

/* Runs argv with stdout and stderr into `log`; returns the exit status (-1: did not run). */
static int run_logged(char *const *argv, const char *log) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The last line of the log that starts with "ampc: " (or its first line), with the line after
 * it when it ends in ':' (the details of "evaluation failed:"), into buf. */
static void last_message(const char *log, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(log, "r");
    char line[1024];
    bool more = false;
    while (f && fgets(line, sizeof line, f)) {
        size_t used = strlen(buf), n = strlen(line);
        if (more && used + n < cap) memcpy(buf + used, line, n + 1);
        more = false;
        if (!strncmp(line, "ampc: ", 6) || !buf[0]) {
            n = n < cap ? n : cap - 1;
            memcpy(buf, line, n);
            buf[n] = 0;
            while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
            more = n && buf[n - 1] == ':';
            if (more && n + 1 < cap) buf[n] = ' ', buf[n + 1] = 0;
        }
    }
    if (f) fclose(f);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
}

/* Whether a failed command's message says the model is outside what ampc takes. */
static bool says_unsupported(const char *msg) {
    return strstr(msg, "not supported") || strstr(msg, "unsupported") || strstr(msg, "no GPU lowering") ||
           strstr(msg, "has no generated GPU kernel") || strstr(msg, "outside ampc's tensor types");
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[4096 + 300];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) remove_dir(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* The model's names a user reads off it (ampc inspect, netron): its runtime inputs (those
 * without an initializer) and its outputs, in order, for test data that leaves its tensors
 * unnamed. False when the file does not parse (the command then says why). */
static bool model_io_names(const char *model, char ***in, int *n_in, char ***out, int *n_out) {
    *in = *out = NULL, *n_in = *n_out = 0;
    FILE *f = fopen(model, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = len > 0 ? malloc((size_t)len) : NULL;
    bool ok = buf && fread(buf, 1, (size_t)len, f) == (size_t)len;
    fclose(f);
    Onnx__ModelProto *m = ok ? onnx__model_proto__unpack(NULL, (size_t)len, buf) : NULL;
    free(buf);
    if (!m || !m->graph) {
        if (m) onnx__model_proto__free_unpacked(m, NULL);
        return false;
    }
    const Onnx__GraphProto *g = m->graph;
    *in = ampc_xcalloc(g->n_input + 1, sizeof **in);
    *out = ampc_xcalloc(g->n_output + 1, sizeof **out);
    for (size_t i = 0; i < g->n_input; i++) {
        const char *nm = g->input[i] && g->input[i]->name ? g->input[i]->name : "";
        bool init = false;
        for (size_t k = 0; k < g->n_initializer && !init; k++)
            init = g->initializer[k]->name && !strcmp(g->initializer[k]->name, nm);
        if (!init) (*in)[(*n_in)++] = ampc_xstrdup(nm);
    }
    for (size_t i = 0; i < g->n_output; i++)
        (*out)[(*n_out)++] = ampc_xstrdup(g->output[i] && g->output[i]->name ? g->output[i]->name : "");
    onnx__model_proto__free_unpacked(m, NULL);
    return true;
}

/* Names the data set's unnamed tensors after the model's, by position. */
static void name_by_position(char **names, int n, char **model_names, int n_model) {
    for (int i = 0; i < n; i++)
        if ((!names[i] || !names[i][0]) && i < n_model) {
            free(names[i]);
            names[i] = ampc_xstrdup(model_names[i]);
        }
}

static void run_dataset_cli(const char *dir, const char *ds_dir, conf_result *r) {
    dataset ds = {0};
    if (!read_tensors(ds_dir, "input", ds.in, ds.in_name, &ds.n_in, r) ||
        !read_tensors(ds_dir, "output", ds.out, ds.out_name, &ds.n_out, r)) {
        dataset_free(&ds);
        return;
    }
    char model_path[4096 + 16], **mi = NULL, **mo = NULL;
    int n_mi = 0, n_mo = 0;
    snprintf(model_path, sizeof model_path, "%s/model.onnx", dir);
    if (model_io_names(model_path, &mi, &n_mi, &mo, &n_mo)) {
        name_by_position(ds.in_name, ds.n_in, mi, n_mi);
        name_by_position(ds.out_name, ds.n_out, mo, n_mo);
    }
    conf_free_names(mi, n_mi);
    conf_free_names(mo, n_mo);
    char tmp[] = "/tmp/ampc-conf-XXXXXX", model[4096 + 16], log[64], *argv[2 * MAX_TENSORS + 8];
    char *ins[MAX_TENSORS] = {0};
    if (!mkdtemp(tmp)) {
        set_reason(r, CONF_FAIL, "cannot make a folder under ", "/tmp");
        dataset_free(&ds);
        return;
    }
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    snprintf(log, sizeof log, "%s/log", tmp);
    int a = 0;
    argv[a++] = (char *)ampc_binary(), argv[a++] = "run", argv[a++] = model, argv[a++] = "--reference";
    for (int i = 0; i < ds.n_in && r->status == CONF_PASS; i++) {
        if (!ds.in_name[i] || !ds.in_name[i][0]) {
            set_reason(r, CONF_UNSUPPORTED, "test data: ", "an input without a name (the command "
                       "line gives inputs by name)");
            break;
        }
        size_t n = strlen(ds.in_name[i]) + strlen(ds_dir) + 32;
        ins[i] = ampc_xcalloc(n, 1);
        snprintf(ins[i], n, "%s=%s/input_%d.pb", ds.in_name[i], ds_dir, i);
        argv[a++] = "--input", argv[a++] = ins[i];
    }
    argv[a++] = "--save-outputs", argv[a++] = tmp, argv[a] = NULL;
    int rc = r->status == CONF_PASS ? run_logged(argv, log) : 0;
    if (r->status == CONF_PASS && rc != 0) {
        char msg[600];
        last_message(log, msg, sizeof msg);
        set_reason(r, says_unsupported(msg) ? CONF_UNSUPPORTED : CONF_FAIL, "cli: ",
                   msg[0] ? msg : "ampc run failed without a message");
    }
    for (int i = 0; i < ds.n_out && r->status == CONF_PASS; i++) {
        char path[4096 + 300], *err = NULL;
        snprintf(path, sizeof path, "%s/%s.npy", tmp, ds.out_name[i] ? ds.out_name[i] : "");
        ampc_tensor got;
        if (!ds.out_name[i] || ampc_tensor_read_file(path, &got, NULL, &err) != AMPC_OK) {
            set_reason(r, CONF_FAIL, "cli: no saved output for ", ds.out_name[i] ? ds.out_name[i] : "(unnamed)");
            free(err);
            break;
        }
        const ampc_dtype want = ds.out[i].dtype;
        if (got.dtype == AMPC_DTYPE_F32 && (want == AMPC_DTYPE_BF16 || want == AMPC_DTYPE_U16)) {
            /* --save-outputs widens bf16 to f32 (numpy has none), exactly: narrow it back */
            const int64_t n = ampc_shape_numel(&got.shape);
            uint16_t *b = ampc_xcalloc((size_t)n + 1, sizeof *b);
            for (int64_t k = 0; k < n; k++)
                ampc_ref_store_f64(b, AMPC_DTYPE_BF16, k, ampc_ref_load_f64(got.data, AMPC_DTYPE_F32, k));
            free(got.data);
            got.data = b, got.dtype = AMPC_DTYPE_BF16;
        }
        double rtol, atol;
        conf_data_tolerance(CONF_CLI, got.dtype, &rtol, &atol);
        compare(&got, &ds.out[i], ds.out_name[i], rtol, atol, "expected", r);
        ampc_tensor_free(&got);
    }
    for (int i = 0; i < ds.n_in; i++) free(ins[i]);
    remove_dir(tmp);
    dataset_free(&ds);
}

static void run_dataset(const char *dir, const char *ds_dir, conf_mode mode, conf_result *r) {
    if (mode == CONF_CLI) {
        run_dataset_cli(dir, ds_dir, r);
        return;
    }
    dataset ds = {0};
    char model[4096 + 16];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    if (!read_tensors(ds_dir, "input", ds.in, ds.in_name, &ds.n_in, r) ||
        !read_tensors(ds_dir, "output", ds.out, ds.out_name, &ds.n_out, r)) {
        dataset_free(&ds);
        return;
    }
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = import_case(model, &ds, &g, &err);
    if (st != AMPC_OK) {
        set_reason(r, st == AMPC_E_UNSUPPORTED ? CONF_UNSUPPORTED : CONF_FAIL, "import: ", err);
        free(err);
        dataset_free(&ds);
        return;
    }
    ampc_pipeline_options po = {.verify = true, .gpu_build = mode == CONF_GPU_GRAPH};
    ampc_tensor in[MAX_TENSORS], out[MAX_TENSORS];
    int32_t ni = ampc_graph_input_count(g), no = ampc_graph_output_count(g);
    if (ampc_graph_optimize(g, &po) != AMPC_OK) {
        set_reason(r, CONF_FAIL, "passes: ", ampc_graph_errors(g));
        goto done;
    }
    if (no != ds.n_out || ni > MAX_TENSORS) {
        char msg[128];
        snprintf(msg, sizeof msg, "the model has %d outputs, the test data %d", no, ds.n_out);
        set_reason(r, CONF_FAIL, "", msg);
        goto done;
    }
    /* Runtime inputs by name (the test data names them as the model does), else by position. */
    for (int32_t i = 0; i < ni; i++) {
        const char *name = ampc_value_name(ampc_graph_input(g, i));
        int k = -1;
        for (int j = 0; j < ds.n_in && k < 0; j++)
            if (ds.in_name[j] && !strcmp(ds.in_name[j], name)) k = j;
        if (k < 0 && i < ds.n_in && (!ds.in_name[i] || !ds.in_name[i][0])) k = i;
        if (k < 0) {
            set_reason(r, CONF_FAIL, "no test input for model input ", name);
            goto done;
        }
        in[i] = ds.in[k];
        /* The ONNX test data stores bfloat16 tensors as UINT16 bit patterns. */
        if (in[i].dtype == AMPC_DTYPE_U16 && ampc_value_dtype(ampc_graph_input(g, i)) == AMPC_DTYPE_BF16)
            in[i].dtype = AMPC_DTYPE_BF16;
    }
    if (mode == CONF_RANDOM) {
        run_random(g, in, ni, no, r);
        goto done;
    }
    if (execute(g, mode, in, ni, out, no, r) != AMPC_OK || mode == CONF_COMPILE || mode == CONF_CHECK)
        goto done;
    for (int32_t i = 0; i < no; i++) {
        double rtol, atol;
        conf_data_tolerance(mode, out[i].dtype, &rtol, &atol);
        if (r->status == CONF_PASS)
            compare(&out[i], &ds.out[i], ampc_value_name(ampc_graph_output(g, i)), rtol, atol,
                    "expected", r);
        ampc_tensor_free(&out[i]);
    }
done:
    ampc_graph_destroy(g);
    dataset_free(&ds);
}

void conf_run_case(const char *dir, conf_mode mode, conf_result *r) {
    case_dir = dir;
    r->status = CONF_PASS;
    r->reason[0] = 0;
    char **sets = NULL;
    int n = 0, cap = 0;
    DIR *d = opendir(dir);
    if (!d) {
        set_reason(r, CONF_FAIL, "cannot open ", dir);
        return;
    }
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "test_data_set_", 14)) {
            if (n == cap) sets = ampc_xrealloc(sets, (size_t)(cap = cap ? cap * 2 : 4) * sizeof *sets);
            sets[n++] = ampc_xstrdup(e->d_name);
        }
    closedir(d);
    if (n) qsort(sets, (size_t)n, sizeof *sets, cmp_str);
    if (!n) set_reason(r, CONF_FAIL, "no test_data_set_* in ", dir);
    for (int i = 0; i < n && r->status == CONF_PASS; i++) {
        char path[4096 + 300];
        snprintf(path, sizeof path, "%s/%s", dir, sets[i]);
        run_dataset(dir, path, mode, r);
    }
    conf_free_names(sets, n);
}
