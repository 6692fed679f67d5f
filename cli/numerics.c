/*
 * numerics.c — what the command line says and checks about a build's numbers: the `math:`
 * line, the calibration samples, --precision auto's search and check, and --sparsity prune's
 * measured error.
 *
 * Calibration samples (--calibrate DIR), for K samples of the model's inputs:
 *   DIR/<k>/<input>.npy (or .pb)   k = 0, 1, 2, ...: one folder per sample;
 *   DIR/<input>.npy (or .pb)       the input's own shape: one sample; or [K, <input's shape>]:
 *                                  K samples along the leading axis (every input the same K).
 * <input> is the input's name made a safe file name (cli/paths.h); an input without a
 * file gets random data, said on stderr. At most MAX_SAMPLES samples are read. Without
 * --calibrate, two random samples (floats uniform in [-1, 1), integers 0), with a warning.
 *
 * --precision auto searches on the first half of the samples and checks what ships on the rest
 * (compiler/auto_precision.h); one sample whose inputs and outputs share a leading batch axis of
 * 2 or more is split along it instead, and a single sample of batch 1 serves both, with a
 * warning.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli/cli.h"
#include "cli/paths.h"
#include "compiler/tool.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Samples read at most (each is a full evaluation of the model on the reference evaluator). */
#define MAX_SAMPLES 64

void ampc_cli_say_math(const char *math, const char *note) {
    bool exact = !math || !*math;
    fprintf(stderr, "ampc: math: %s%s%s\n",
            exact ? "exact (every op in the model's declared types, one rounding each)" : math,
            note && *note ? "; " : "", note ? note : "");
}

static bool have_gpu(void);

/* ---- calibration samples --------------------------------------------------------------------- */

static void samples_alloc(ampc_cli_samples *s, int32_t n, int32_t n_inputs) {
    s->n = n;
    s->n_inputs = n_inputs;
    s->samples = ampc_xcalloc((size_t)n + 1, sizeof *s->samples);
    for (int32_t k = 0; k < n; k++)
        s->samples[k] = ampc_xcalloc((size_t)n_inputs + 1, sizeof **s->samples);
}

static void samples_free(ampc_cli_samples *s) {
    for (int32_t k = 0; s->samples && k < s->n; k++) {
        for (int32_t i = 0; i < s->n_inputs; i++) ampc_tensor_free(&s->samples[k][i]);
        free(s->samples[k]);
    }
    free(s->samples);
    memset(s, 0, sizeof *s);
}

/* DIR/<file>.npy, else DIR/<file>.pb: true with *path NULL when neither is there; false with a
 * message for a file outside DIR or not regular. */
static bool sample_file(const char *dir, const char *file, char **path) {
    char *err = NULL;
    for (int k = 0; k < 2; k++) {
        char name[300];
        snprintf(name, sizeof name, "%s%s", file, k ? ".pb" : ".npy");
        if (!ampc_cli_file_in_dir(dir, name, path, &err)) {
            fprintf(stderr, "ampc: --calibrate: %s\n", err ? err : "bad calibration file");
            free(err);
            return false;
        }
        if (*path) return true;
    }
    return true;
}

/* The sample folders DIR/0, DIR/1, ... that exist (as many as are consecutive from 0). */
static int32_t sample_folders(const char *dir) {
    int32_t n = 0;
    for (; n < MAX_SAMPLES; n++) {
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%d", dir, n);
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) break;
    }
    return n;
}

/* Reads the tensor at path into *t; false with a message. */
static bool read_tensor(const char *path, ampc_tensor *t) {
    char *err = NULL;
    if (ampc_tensor_read_file(path, t, NULL, &err) == AMPC_OK) return true;
    fprintf(stderr, "ampc: --calibrate: %s\n", err ? err : path);
    free(err);
    return false;
}

/* Whether shape s is [K, want...]; *k receives K. */
static bool stacked(const ampc_shape *s, const ampc_shape *want, int64_t *k) {
    if (s->rank != want->rank + 1) return false;
    for (int32_t d = 0; d < want->rank; d++)
        if (s->dims[d + 1] != want->dims[d]) return false;
    *k = s->dims[0];
    return true;
}

/* Says what the file holds against what input v wants. */
static bool wrong_file(const char *path, const ampc_value *v, const ampc_tensor *t) {
    char want[AMPC_SHAPE_STR_MAX], got[AMPC_SHAPE_STR_MAX];
    char *q = ampc_cli_quote(v->name);
    ampc_shape_str(&v->shape, want, sizeof want);
    fprintf(stderr, "ampc: --calibrate: %s: input '%s' is %s%s (K samples of it: %s[K%s%s), the "
            "file holds %s%s\n", path, q, ampc_dtype_name(v->dtype), want,
            ampc_dtype_name(v->dtype), v->shape.rank ? "," : "", want + 1,
            ampc_dtype_name(t->dtype), ampc_shape_str(&t->shape, got, sizeof got));
    free(q);
    return false;
}

/* Sample k of stacked tensor t (K along its leading axis) as a tensor of v's shape. */
static ampc_tensor slice(const ampc_tensor *t, const ampc_value *v, int64_t k) {
    size_t nb = (size_t)ampc_shape_numel(&v->shape) * ampc_dtype_size(v->dtype);
    ampc_tensor s = {v->dtype, v->shape, ampc_xmalloc(nb + 1)};
    memcpy(s.data, (const char *)t->data + (size_t)k * nb, nb);
    return s;
}

/* DIR/<input> files: one sample, or K stacked along the leading axis. */
static bool read_flat(const char *dir, const ampc_graph *g, char **files, ampc_cli_samples *s) {
    ampc_tensor *held = ampc_xcalloc((size_t)g->n_inputs + 1, sizeof *held);
    int64_t k_all = 1;
    bool ok = true;
    for (int32_t i = 0; ok && i < g->n_inputs; i++) {
        char *path = NULL;
        if (!(ok = sample_file(dir, files[i], &path)) || !path) continue;
        const ampc_value *v = g->inputs[i];
        int64_t k = 1;
        ok = read_tensor(path, &held[i]);
        if (ok && (held[i].dtype != v->dtype ||
                   (!ampc_shape_eq(&held[i].shape, &v->shape) && !stacked(&held[i].shape, &v->shape, &k))))
            ok = wrong_file(path, v, &held[i]);
        if (ok && k != 1 && k_all != 1 && k != k_all) {
            fprintf(stderr, "ampc: --calibrate: %s holds %lld samples, another input %lld\n", path,
                    (long long)k, (long long)k_all);
            ok = false;
        }
        if (ok && k != 1) k_all = k;
        free(path);
    }
    if (ok && (k_all < 1 || k_all > MAX_SAMPLES)) {
        fprintf(stderr, "ampc: --calibrate %s: %lld samples; between 1 and %d are read: the first "
                "%d are used\n", dir, (long long)k_all, MAX_SAMPLES, MAX_SAMPLES);
        if (k_all < 1) ok = false;
        else k_all = MAX_SAMPLES;
    }
    if (ok) samples_alloc(s, (int32_t)k_all, g->n_inputs);
    for (int32_t i = 0; ok && i < g->n_inputs; i++) {
        const ampc_value *v = g->inputs[i];
        for (int64_t k = 0; held[i].data && k < k_all; k++)
            s->samples[k][i] = ampc_shape_eq(&held[i].shape, &v->shape) ? slice(&held[i], v, 0)
                                                                          : slice(&held[i], v, k);
    }
    for (int32_t i = 0; i < g->n_inputs; i++) ampc_tensor_free(&held[i]);
    free(held);
    return ok;
}

/* DIR/<k>/<input> files, one folder per sample. */
static bool read_folders(const char *dir, int32_t n, const ampc_graph *g, char **files,
                         ampc_cli_samples *s) {
    samples_alloc(s, n, g->n_inputs);
    bool ok = true;
    for (int32_t k = 0; ok && k < n; k++) {
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%d", dir, k);
        for (int32_t i = 0; ok && i < g->n_inputs; i++) {
            char *path = NULL;
            if (!(ok = sample_file(sub, files[i], &path)) || !path) continue;
            ok = read_tensor(path, &s->samples[k][i]);
            if (ok && (s->samples[k][i].dtype != g->inputs[i]->dtype ||
                       !ampc_shape_eq(&s->samples[k][i].shape, &g->inputs[i]->shape)))
                ok = wrong_file(path, g->inputs[i], &s->samples[k][i]);
            free(path);
        }
    }
    return ok;
}

/* Random data for every input a sample lacks, said once per input. */
static bool fill_missing(const ampc_graph *g, ampc_cli_samples *s, char **files, const char *dir) {
    uint64_t seed = 0x2545f4914f6cdd1dull;
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const ampc_value *v = g->inputs[i];
        bool said = false;
        for (int32_t k = 0; k < s->n; k++) {
            if (s->samples[k][i].data) continue;
            if (!ampc_cli_host_tensor("input", v->name, v->dtype, &v->shape, &s->samples[k][i]))
                return false;
            ampc_cli_fill_random(&s->samples[k][i], &seed);
            if (!said && dir) {
                char *q = ampc_cli_quote(v->name);
                fprintf(stderr, "ampc: --calibrate %s has neither %s.npy nor %s.pb: random "
                        "data for input '%s'\n", dir, files[i], files[i], q);
                free(q);
            }
            said = true;
        }
    }
    return true;
}

/* The calibration samples for g's inputs (file comment); false with a message. */
static bool read_samples(const ampc_cli_options *o, const ampc_graph *g, ampc_cli_samples *s) {
    memset(s, 0, sizeof *s);
    const char **names = ampc_xcalloc((size_t)g->n_inputs + 1, sizeof *names);
    for (int32_t i = 0; i < g->n_inputs; i++) names[i] = g->inputs[i]->name;
    char **files = ampc_cli_file_names(names, g->n_inputs);
    free(names);
    bool ok = true;
    if (!o->calibrate) {
        fprintf(stderr, "ampc: warning: no --calibrate DIR: the error is measured on random "
                        "inputs; real ones measure what users will see\n");
        samples_alloc(s, 2, g->n_inputs);
        s->random = true;
    } else {
        int32_t folders = sample_folders(o->calibrate);
        ok = folders ? read_folders(o->calibrate, folders, g, files, s)
                     : read_flat(o->calibrate, g, files, s);
    }
    ok = ok && fill_missing(g, s, files, o->calibrate);
    ampc_cli_file_names_free(files, g->n_inputs);
    if (!ok) samples_free(s);
    return ok;
}

/* ---- --precision auto ------------------------------------------------------------------------ */

static ampc_graph *reload(void *user) { return ampc_cli_load_model(user); }

/* The batch one sample can be split along: the leading axis every input and output shares
 * (>= 2), else 0. */
static int64_t split_batch(const ampc_graph *g) {
    int64_t b = g->n_inputs && g->inputs[0]->shape.rank ? g->inputs[0]->shape.dims[0] : 0;
    for (int32_t i = 0; i < g->n_inputs; i++)
        if (g->inputs[i]->shape.rank == 0 || g->inputs[i]->shape.dims[0] != b) return 0;
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i]->shape.rank == 0 || g->outputs[i]->shape.dims[0] != b) return 0;
    return b >= 2 ? b : 0;
}

/* Prints each output's figures, "what" naming the run. */
static void say_accuracy(const char *what, const ampc_check_set *c, const ampc_accuracy *acc,
                         double tolerance) {
    for (int32_t i = 0; i < c->n_outputs; i++) {
        char *q = ampc_cli_quote(c->names[i]);
        fprintf(stderr, "ampc:   %s, output '%s': max |y - ref| / max |ref| = %.3g%s, 99.9th "
                "percentile of |y - ref| / (|ref| + 1e-3 max |ref|) = %.3g\n", what, q,
                acc[i].max_rel, acc[i].max_rel <= tolerance ? "" : " (above the tolerance)",
                acc[i].p999);
        free(q);
    }
}

/* Where the check's samples come from, for messages. */
static void check_source(const ampc_auto_options *ao, char *buf, size_t n) {
    if (ao->split_batch)
        snprintf(buf, n, "the last %lld of the one sample's %lld rows (the search used the "
                 "first %lld)", (long long)(ao->batch - ao->batch / 2), (long long)ao->batch,
                 (long long)(ao->batch / 2));
    else if (ao->n_search >= ao->n_samples)
        snprintf(buf, n, "the search's own sample");
    else
        snprintf(buf, n, "%d held-out %s", ao->n_samples - ao->n_search,
                 ao->n_samples - ao->n_search == 1 ? "sample" : "samples");
}

/* The search's options: the build's pipeline, the samples split. */
static ampc_auto_options auto_options(const ampc_cli_options *o, const ampc_graph *g,
                                      ampc_cli_samples *s) {
    ampc_auto_options ao = {.low = o->auto_type && !strcmp(o->auto_type, "bf16")
                                       ? AMPC_PRECISION_BF16 : AMPC_PRECISION_FP16,
                            .tolerance = o->tolerance > 0 ? o->tolerance : 1e-2,
                            .samples = s->samples, .n_samples = s->n,
                            .n_search = (s->n + 1) / 2,
                            .pipeline = ampc_cli_pipeline(o, NULL, 0), .tf32 = ampc_cli_tf32(o),
                            .log = stderr};
    if (s->n == 1 && (ao.batch = split_batch(g)) > 0) ao.split_batch = true;
    else if (s->n == 1)
        fprintf(stderr, "ampc: warning: one calibration sample of batch 1: the check of the "
                        "build runs on the search's own sample; give 2 samples or more\n");
    return ao;
}

bool ampc_cli_auto_search(const ampc_cli_options *o, ampc_cli_numerics *n) {
    ampc_graph *g = ampc_cli_load_model(o);
    if (!g || !read_samples(o, g, &n->samples)) {
        ampc_graph_destroy(g);
        return false;
    }
    ampc_auto_options ao = auto_options(o, g, &n->samples);
    /* the reference run, a round per search sample and the check (two evaluations a sample) */
    double cost = ampc_check_cost(g) * (double)(ao.n_search * 3 + n->samples.n * 2);
    if (cost > 1e11)
        fprintf(stderr, "ampc: precision auto: the search and the check run on the reference "
                "evaluator, about %.2g multiply-adds at least (minutes: fewer or smaller samples "
                "go faster)\n", cost);
    ampc_graph_destroy(g);
    n->autop = ampc_xcalloc(1, sizeof *n->autop);
    char *err = NULL;
    if (ampc_auto_precision(reload, (void *)o, &ao, n->autop, &err) != AMPC_OK) {
        fprintf(stderr, "ampc: %s: precision auto: %s\n", o->model, err ? err : "failed");
        free(err);
        return false;
    }
    const ampc_auto_result *r = n->autop;
    char src[160];
    check_source(&ao, src, sizeof src);
    fprintf(stderr, "ampc: precision auto: %d nodes moved back to f32 (search: outputs' error "
            "%.3g, all low %.3g); the build as it ships, on the reference evaluator%s, on %s: "
            "error %.3g, tolerance %g: %s\n", r->n_kept, r->error, r->error_low,
            ao.tf32 ? " with TF32 emulated" : "", src, r->check_error, ao.tolerance,
            r->met ? "met" : o->accept_error ? "NOT MET, accepted (--accept-error)" : "NOT MET");
    say_accuracy("check", &r->check, r->acc, ao.tolerance);
    ampc_strbuf note = {0};
    ampc_sb_printf(&note, "--precision auto: outputs' error %.3g on %s (reference evaluator), "
                   "tolerance %g%s", r->check_error, src, ao.tolerance,
                   r->met ? "" : ", NOT MET: accepted with --accept-error");
    n->note = ampc_sb_take(&note);
    if (r->met || o->accept_error) return true;
    fprintf(stderr, "ampc: %s: precision auto: the build would miss --tolerance %g (error %.3g): "
            "not written. Raise --tolerance, keep nodes in f32 (--keep-fp32), or build anyway "
            "with --accept-error\n", o->model, ao.tolerance, r->check_error);
    return false;
}

/* With a GPU: the module itself on the check samples. */
static bool auto_gpu_check(const ampc_cli_options *o, ampc_module *m, ampc_cli_numerics *n) {
    char *err = NULL;
    if (!have_gpu()) {
        fprintf(stderr, "ampc: precision auto: no GPU here: the build is checked on the "
                        "reference evaluator only\n");
        return true;
    }
    const ampc_auto_result *r = n->autop;
    double tol = o->tolerance > 0 ? o->tolerance : 1e-2;
    ampc_accuracy *acc = ampc_xcalloc((size_t)r->check.n_outputs + 1, sizeof *acc);
    bool ok = ampc_check_module(&r->check, m, acc, &err) == AMPC_OK;
    if (!ok) fprintf(stderr, "ampc: %s: precision auto: checking on the GPU: %s\n", o->model, err);
    double worst = ok ? ampc_accuracy_worst(acc, r->check.n_outputs) : 0;
    if (ok) {
        fprintf(stderr, "ampc: precision auto: the build on this GPU: error %.3g, tolerance %g: "
                "%s\n", worst, tol, worst <= tol ? "met" : o->accept_error ? "NOT MET, accepted"
                                                                        : "NOT MET");
        say_accuracy("GPU", &r->check, acc, tol);
        ampc_strbuf note = {0};
        ampc_sb_printf(&note, "%s; on the GPU: %.3g", n->note, worst);
        free(n->note);
        n->note = ampc_sb_take(&note);
    }
    if (ok && !(worst <= tol) && !o->accept_error) {
        fprintf(stderr, "ampc: %s: precision auto: the build misses --tolerance %g on the GPU "
                "(error %.3g): not written (--accept-error builds it anyway)\n", o->model, tol, worst);
        ok = false;
    }
    free(acc);
    free(err);
    return ok;
}

/* ---- --sparsity prune -------------------------------------------------------------------------- */

/* The reference evaluator's work allowed for measuring the pruning without a GPU: 4 evaluations
 * (two samples, the model and the pruned model) of at most 2.5e9 multiply-adds each, about ten
 * seconds in all. */
#define PRUNE_REFERENCE_MACS 1e10

/* Lists each pruned layer; the number of them. */
static int32_t say_pruned_layers(const ampc_pipeline_report *r) {
    int32_t pruned = 0;
    for (int32_t i = 0; i < r->n_sparse_layers; i++) {
        const ampc_sparse_layer *l = &r->sparse_layers[i];
        if (l->status != SPARSE_WHY_PRUNED) continue;
        char *q = ampc_cli_quote(l->node), shape[AMPC_SHAPE_STR_MAX];
        fprintf(stderr, "ampc: --sparsity prune: %s '%s' (weight %s): %.2f%% of its weight "
                "energy removed\n", ampc_op_get(l->op)->onnx, q,
                ampc_shape_str(&l->shape, shape, sizeof shape), 100 * l->energy_removed);
        free(q);
        pruned++;
    }
    return pruned;
}

static bool have_gpu(void) {
    int32_t devices = 0;
    char *err = NULL;
    bool gpu = ampc_rt_device_count(&devices, &err) == AMPC_OK && devices > 0;
    free(err);
    return gpu;
}

/* The pruned model against the model on the reference evaluator: the pruning alone (the
 * model's own precision, exact GELU, no TF32). */
static ampc_status prune_on_reference(const ampc_cli_options *o, ampc_check_set *c,
                                      ampc_cli_samples *s, ampc_accuracy **acc, char **err) {
    ampc_graph *model = ampc_cli_load_model(o);
    ampc_status st = model ? AMPC_OK : AMPC_E_INVALID_ARG;
    if (st == AMPC_OK) st = ampc_check_set_init(c, model, s->samples, s->n, err);
    ampc_graph_destroy(model);
    ampc_graph *pg = st == AMPC_OK ? ampc_cli_load_model(o) : NULL;
    ampc_pipeline_options po = ampc_cli_pipeline(o, NULL, 0);
    po.precision = AMPC_PRECISION_KEEP;
    po.fast_gelu = false;
    po.trace = NULL, po.dump_after = NULL;
    *acc = ampc_xcalloc((size_t)c->n_outputs + 1, sizeof **acc);
    if (st == AMPC_OK) st = pg ? ampc_check_reference(c, pg, &po, false, *acc, err) : AMPC_E_INVALID_ARG;
    ampc_graph_destroy(pg);
    return st;
}

/* The build m against the same build unpruned, both on the GPU. */
static ampc_status prune_on_gpu(const ampc_cli_options *o, const ampc_cli_numerics *n,
                                ampc_module *m, ampc_check_set *c, ampc_accuracy **acc, char **err) {
    ampc_graph *g = ampc_cli_load_model(o);
    if (!g) return AMPC_E_INVALID_ARG;
    ampc_pipeline_options po = ampc_cli_pipeline(o, n->autop ? n->autop->kept : NULL,
                                                 n->autop ? n->autop->n_kept : 0);
    po.sparsity = AMPC_SPARSITY_OFF;
    po.trace = NULL, po.dump_after = NULL;
    ampc_compile_options co = ampc_cli_compile_options(o, &po);
    ampc_module *dense = NULL;
    ampc_status st = ampc_compile(g, &co, &dense);
    if (st != AMPC_OK) ampc_cli_err(err, "compiling the unpruned build: %s", ampc_graph_errors(g));
    if (st == AMPC_OK)
        st = ampc_check_set_from_module(c, dense, g, n->samples.samples, n->samples.n, err);
    *acc = ampc_xcalloc((size_t)g->n_outputs + 1, sizeof **acc);
    if (st == AMPC_OK) st = ampc_check_module(c, m, *acc, err);
    ampc_module_destroy(dense);
    ampc_graph_destroy(g);
    return st;
}

/* Each pruned layer, and the pruned model's outputs against the unpruned one's on the samples:
 * on the GPU when there is one (the build against the same build unpruned), else on the
 * reference evaluator when the model is small enough to evaluate 4 times in seconds. */
static bool prune_report(const ampc_cli_options *o, ampc_module *m, ampc_cli_numerics *n) {
    if (!say_pruned_layers(&n->report)) return true;
    ampc_graph *model = ampc_cli_load_model(o);
    bool ok = model && (n->samples.n || read_samples(o, model, &n->samples));
    double cost = model ? ampc_check_cost(model) * 2 * n->samples.n : 0;
    ampc_graph_destroy(model);
    if (!ok) return false;
    bool gpu = m && have_gpu();
    if (!gpu && cost > PRUNE_REFERENCE_MACS) {
        fprintf(stderr, "ampc: --sparsity prune: the pruned model's error is not measured: on the "
                "reference evaluator it would take %.3g multiply-adds (minutes; the limit is "
                "%.3g); compile with -o on a machine with a GPU to measure it there\n", cost,
                PRUNE_REFERENCE_MACS);
        return true;
    }
    ampc_check_set c = {0};
    ampc_accuracy *acc = NULL;
    char *err = NULL;
    ok = (gpu ? prune_on_gpu(o, n, m, &c, &acc, &err)
              : prune_on_reference(o, &c, &n->samples, &acc, &err)) == AMPC_OK;
    const char *where = gpu ? "the GPU: the build against the same build unpruned"
                            : "the reference evaluator";
    if (ok) {
        double worst = ampc_accuracy_worst(acc, c.n_outputs);
        fprintf(stderr, "ampc: --sparsity prune: the pruned model against the model, on %d %s"
                "sample%s (%s): outputs' error %.3g\n", c.n_samples,
                n->samples.random ? "random " : "calibration ", c.n_samples == 1 ? "" : "s",
                where, worst);
        say_accuracy("pruned", &c, acc, INFINITY);
        ampc_strbuf note = {0};
        ampc_sb_printf(&note, "%s%spruning's measured outputs' error %.3g on %d %s sample%s",
                       n->note ? n->note : "", n->note ? "; " : "", worst, c.n_samples,
                       n->samples.random ? "random" : "calibration", c.n_samples == 1 ? "" : "s");
        free(n->note);
        n->note = ampc_sb_take(&note);
    } else {
        fprintf(stderr, "ampc: %s: --sparsity prune: measuring the pruned model on %s: %s\n",
                o->model, where, err ? err : "failed");
    }
    free(acc);
    free(err);
    ampc_check_set_free(&c);
    return ok;
}

bool ampc_cli_numerics_after(const ampc_cli_options *o, ampc_module *m, ampc_cli_numerics *n) {
    bool ok = true;
    if (n->autop && m) ok = auto_gpu_check(o, m, n);
    if (ok && o->sparsity && !strcmp(o->sparsity, "prune")) ok = prune_report(o, m, n);
    return ok;
}

void ampc_cli_numerics_free(ampc_cli_numerics *n) {
    if (n->autop) ampc_auto_result_free(n->autop);
    free(n->autop);
    samples_free(&n->samples);
    free(n->note);
    memset(n, 0, sizeof *n);
}
