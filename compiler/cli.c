/*
 * cli.c — the commands of the `ampc` executable: compile (front end, pass pipeline, emission),
 * inspect (a summary of a model) and run --reference (evaluate on the CPU, save outputs).
 * Everything here prints; the library it calls does not.
 */
#define _POSIX_C_SOURCE 200809L /* strndup, getpid */
#include "compiler/cli.h"

#include "ir/ir.h"
#include "ir/ref/ref.h"
#include "compiler/nvrtc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Reads a whole file; NULL with a message on failure. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ampc: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    ampc_strbuf sb = {0};
    char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        for (size_t i = 0; i < n; i++) ampc_sb_putc(&sb, chunk[i]);
    bool err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "ampc: cannot read '%s'\n", path);
        ampc_sb_free(&sb);
        return NULL;
    }
    *len = sb.len;
    return ampc_sb_take(&sb);
}

/* Writes text to path through a temporary file renamed into place, so a failure never leaves a
 * half-written file; "-" writes to stdout. */
static bool write_file_atomic(const char *path, const char *text) {
    if (!strcmp(path, "-")) return fputs(text, stdout) >= 0;
    ampc_strbuf tmp = {0};
    ampc_sb_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp.data, "wb");
    bool ok = f && fputs(text, f) >= 0;
    if (f) ok = (fclose(f) == 0) && ok;
    if (ok && rename(tmp.data, path) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "ampc: cannot write '%s': %s\n", path, strerror(errno));
        remove(tmp.data);
    }
    ampc_sb_free(&tmp);
    return ok;
}

/* Parses "NAME=2x3x224x224" into an import shape override. */
static bool parse_shape_opt(const char *s, ampc_input_shape *out) {
    const char *eq = strrchr(s, '=');
    if (!eq || eq == s) return false;
    out->name = strndup(s, (size_t)(eq - s));
    out->shape.rank = 0;
    const char *p = eq + 1;
    while (*p) {
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 0 || out->shape.rank == AMPC_MAX_RANK) return false;
        out->shape.dims[out->shape.rank++] = d;
        if (*end == 'x' || *end == 'X' || *end == ',') end++;
        else if (*end) return false;
        p = end;
    }
    return true;
}

/* Loads MODEL: ONNX by extension, else IR text. Prints the error and returns NULL on failure. */
static ampc_graph *load_model(const ampc_cli_options *o) {
    ampc_graph *g = NULL;
    char *err = NULL;
    if (has_suffix(o->model, ".onnx")) {
        ampc_input_shape shapes[AMPC_CLI_MAX_LIST] = {0};
        ampc_import_options io = {0};
        for (int i = 0; i < o->n_shapes; i++) {
            if (!parse_shape_opt(o->shapes[i], &shapes[i])) {
                fprintf(stderr, "ampc: --shape '%s' is not NAME=DxDx... (e.g. x=1x3x224x224)\n",
                        o->shapes[i]);
                for (int j = 0; j <= i; j++) free((char *)shapes[j].name);
                return NULL;
            }
        }
        io.shapes = shapes;
        io.n_shapes = o->n_shapes;
        io.max_batch = o->max_batch;
        ampc_status st = ampc_onnx_import_file(o->model, &io, &g, &err);
        for (int i = 0; i < o->n_shapes; i++) free((char *)shapes[i].name);
        if (st != AMPC_OK) {
            fprintf(stderr, "ampc: %s: %s\n", o->model, err ? err : ampc_status_str(st));
            free(err);
            return NULL;
        }
        return g;
    }
    if (o->n_shapes || o->max_batch)
        fprintf(stderr, "ampc: warning: --shape and --max-batch apply to ONNX models only\n");
    size_t len;
    char *text = read_file(o->model, &len);
    if (!text) return NULL;
    ampc_status st = ampc_graph_parse(text, len, &g, &err);
    free(text);
    if (st != AMPC_OK) {
        fprintf(stderr, "ampc: %s:%s\n", o->model, err ? err : ampc_status_str(st));
        free(err);
        return NULL;
    }
    return g;
}

static bool optimize(ampc_graph *g, const ampc_cli_options *o) {
    ampc_pipeline_options po = {
        .disable = o->disable,
        .n_disable = o->n_disable,
        .dump_after = o->dump_after,
        .dump_file = stderr,
        .verify = true,
        .trace = o->verbose ? stderr : NULL,
    };
    if (ampc_graph_optimize(g, &po) == AMPC_OK) return true;
    fprintf(stderr, "ampc: %s: optimisation failed:\n%s\n", o->model, ampc_graph_errors(g));
    return false;
}

/* Parses --arch "sm_80,sm_90a" into archs; false with a message on a bad name. */
static bool parse_archs(const char *list, int32_t *archs, int32_t *n) {
    *n = 0;
    if (!list) return true;
    char *copy = ampc_xstrdup(list), *save = NULL;
    bool ok = true;
    for (char *t = strtok_r(copy, ",", &save); t && ok; t = strtok_r(NULL, ",", &save)) {
        if (*n == 16 || !ampc_nvrtc_arch_parse(t, &archs[*n])) {
            fprintf(stderr, "ampc: --arch '%s' is not an architecture such as sm_80, sm_86 or sm_90a\n", t);
            ok = false;
        } else {
            (*n)++;
        }
    }
    free(copy);
    return ok;
}

/* --emit cuda|ptx: compile for the GPU and write every unit's CUDA C or PTX. */
static int emit_gpu(ampc_graph *g, const ampc_cli_options *o) {
    int32_t archs[16], n_archs;
    if (!parse_archs(o->arch, archs, &n_archs)) return 2;
    ampc_pipeline_options po = {.disable = o->disable, .n_disable = o->n_disable,
                                .dump_after = o->dump_after, .dump_file = stderr, .verify = true,
                                .trace = o->verbose ? stderr : NULL};
    ampc_compile_options co = {.archs = archs, .n_archs = n_archs, .pipeline = &po};
    ampc_module *m = NULL;
    if (ampc_compile(g, &co, &m) != AMPC_OK) {
        fprintf(stderr, "ampc: %s: compilation failed:\n%s\n", o->model, ampc_graph_errors(g));
        return 1;
    }
    ampc_strbuf sb = {0};
    bool ptx = !strcmp(o->emit, "ptx");
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++) {
        const char *text = ptx ? ampc_module_ptx(m, u) : ampc_module_cuda(m, u);
        if (ampc_module_unit_count(m) > 1) ampc_sb_printf(&sb, "// ---- unit %d ----\n", u);
        ampc_sb_puts(&sb, text ? text : "");
    }
    int rc = write_file_atomic(o->output ? o->output : "-", sb.data ? sb.data : "") ? 0 : 1;
    ampc_sb_free(&sb);
    ampc_module_destroy(m);
    return rc;
}

int ampc_cli_compile(const ampc_cli_options *o) {
    if (o->emit && strcmp(o->emit, "ir")) {
        ampc_graph *g = load_model(o);
        if (!g) return 1;
        int rc = emit_gpu(g, o);
        ampc_graph_destroy(g);
        return rc;
    }
    if (!o->emit) {
        fprintf(stderr,
                "ampc: building a shared library (-o model.so) is not available yet; use "
                "--emit ir|cuda|ptx to see the optimised graph, its CUDA C or its PTX, and "
                "`ampc run` to run it on the GPU\n");
        return 1;
    }
    ampc_graph *g = load_model(o);
    if (!g) return 1;
    int rc = 1;
    if (optimize(g, o)) {
        char *text = ampc_graph_to_text(g, true);
        if (text && write_file_atomic(o->output ? o->output : "-", text)) rc = 0;
        free(text);
    }
    ampc_graph_destroy(g);
    return rc;
}

/* ---- inspect -------------------------------------------------------------------------------- */

static void print_values(const char *what, ampc_value *const *vs, int32_t n) {
    printf("%s (%d):\n", what, n);
    for (int32_t i = 0; i < n; i++) {
        char t[AMPC_TYPE_STR_MAX];
        printf("  %-24s %s\n", vs[i]->name, ampc_value_type_str(vs[i], t, sizeof t));
    }
}

/* Summary of an IR graph: inputs, outputs, op histogram, constants. */
static void print_graph_summary(ampc_graph *g) {
    int32_t hist[AMPC_OP_COUNT] = {0}, n_const = 0;
    int64_t const_bytes = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead) hist[g->nodes[i]->op]++;
    for (int32_t i = 0; i < g->n_values; i++)
        if (g->values[i]->data && !g->values[i]->producer) {
            n_const++;
            const_bytes += (int64_t)ampc_ir_nbytes(g->values[i]);
        }
    printf("graph '%s': %d nodes, %d constants (%lld bytes)\n", g->name, ampc_graph_node_count(g),
           n_const, (long long)const_bytes);
    print_values("inputs", g->inputs, g->n_inputs);
    print_values("outputs", g->outputs, g->n_outputs);
    printf("ops:\n");
    for (int op = 0; op < AMPC_OP_COUNT; op++)
        if (hist[op]) printf("  %-24s %d\n", ampc_op_get((ampc_opcode)op)->onnx, hist[op]);
}

int ampc_cli_inspect(const ampc_cli_options *o) {
    if (has_suffix(o->model, ".onnx")) {
        /* The ONNX view first (opsets, coverage): it works even when import would fail. */
        if (ampc_onnx_inspect(o->model, stdout) != AMPC_OK) return 1;
        return 0;
    }
    ampc_graph *g = load_model(o);
    if (!g) return 1;
    print_graph_summary(g);
    int rc = 0;
    if (ampc_graph_verify(g) != AMPC_OK) {
        printf("verifier:\n%s\n", ampc_graph_errors(g));
        rc = 1;
    } else {
        printf("verifier: ok\n");
    }
    ampc_graph_destroy(g);
    return rc;
}

/* ---- run ------------------------------------------------------------------------------------ */

/* A file name for an output: path separators and other odd characters become '_'. */
static char *output_path(const char *dir, const char *name) {
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%s/", dir);
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '-' || c == '.';
        ampc_sb_putc(&sb, plain && !(p == name && c == '.') ? c : '_');
    }
    ampc_sb_puts(&sb, ".npy");
    return ampc_sb_take(&sb);
}

static void print_tensor_head(const char *name, const ampc_tensor *t) {
    char s[AMPC_SHAPE_STR_MAX];
    int64_t n = ampc_shape_numel(&t->shape);
    printf("  %s: %s%s", name, ampc_dtype_name(t->dtype), ampc_shape_str(&t->shape, s, sizeof s));
    for (int64_t i = 0; i < n && i < 6; i++) {
        if (ampc_dtype_is_float(t->dtype))
            printf(" %.6g", ampc_ref_load_f64(t->data, t->dtype, i));
        else
            printf(" %lld", (long long)ampc_ref_load_i64(t->data, t->dtype, i));
    }
    printf("%s\n", n > 6 ? " ..." : "");
}

/* Compiles the graph for the GPU and runs it once; outputs are allocated on the host. */
static bool run_gpu(ampc_graph *g, const ampc_cli_options *o, const ampc_tensor *in,
                    ampc_tensor *out) {
    int32_t archs[16], n_archs;
    if (!parse_archs(o->arch, archs, &n_archs)) return false;
    ampc_pipeline_options po = {.disable = o->disable, .n_disable = o->n_disable, .verify = true,
                                .trace = o->verbose ? stderr : NULL};
    ampc_compile_options co = {.archs = archs, .n_archs = n_archs, .pipeline = &po};
    ampc_module *m = NULL;
    if (ampc_compile(g, &co, &m) != AMPC_OK) {
        fprintf(stderr, "ampc: %s: compilation failed:\n%s\n", o->model, ampc_graph_errors(g));
        return false;
    }
    bool ok = true;
    for (int32_t i = 0; i < g->n_outputs && ok; i++) {
        const ampc_value *v = g->outputs[i];
        out[i] = (ampc_tensor){v->dtype, v->shape, calloc(1, ampc_ir_nbytes(v) + 1)};
        ok = out[i].data != NULL;
    }
    if (ok && ampc_module_run(m, in, g->n_inputs, out, g->n_outputs, NULL) != AMPC_OK) {
        fprintf(stderr, "ampc: %s: %s\n", o->model, ampc_module_errors(m));
        ok = false;
    }
    ampc_module_destroy(m);
    return ok;
}

int ampc_cli_run(const ampc_cli_options *o) {
    ampc_graph *g = load_model(o);
    if (!g) return 1;
    int rc = 1;
    int32_t ni = g->n_inputs, no = g->n_outputs;
    ampc_tensor *in = calloc((size_t)ni + 1, sizeof *in), *out = calloc((size_t)no + 1, sizeof *out);
    bool ok = !o->reference || optimize(g, o); /* the GPU path runs the pipeline itself */
    /* Match --input NAME=FILE to the graph inputs by name. */
    for (int k = 0; ok && k < o->n_inputs; k++) {
        const char *eq = strchr(o->inputs[k], '=');
        if (!eq) {
            fprintf(stderr, "ampc: --input '%s' is not NAME=FILE\n", o->inputs[k]);
            ok = false;
            break;
        }
        int32_t idx = -1;
        for (int32_t i = 0; i < ni; i++)
            if (strlen(g->inputs[i]->name) == (size_t)(eq - o->inputs[k]) &&
                !strncmp(g->inputs[i]->name, o->inputs[k], (size_t)(eq - o->inputs[k])))
                idx = i;
        if (idx < 0) {
            fprintf(stderr, "ampc: --input '%.*s': the model has no input of that name\n",
                    (int)(eq - o->inputs[k]), o->inputs[k]);
            ok = false;
            break;
        }
        char *err = NULL;
        ampc_tensor_free(&in[idx]);
        if (ampc_tensor_read_file(eq + 1, &in[idx], NULL, &err) != AMPC_OK) {
            fprintf(stderr, "ampc: %s: %s\n", eq + 1, err ? err : "cannot read tensor");
            free(err);
            ok = false;
        }
    }
    for (int32_t i = 0; ok && i < ni; i++) {
        if (in[i].dtype != AMPC_DTYPE_UNDEFINED) continue;
        char t[AMPC_TYPE_STR_MAX];
        fprintf(stderr, "ampc: input '%s' (%s) was not given: add --input %s=FILE.npy\n",
                g->inputs[i]->name, ampc_value_type_str(g->inputs[i], t, sizeof t),
                g->inputs[i]->name);
        ok = false;
    }
    if (ok && o->reference && ampc_graph_evaluate(g, in, ni, out, no) != AMPC_OK) {
        fprintf(stderr, "ampc: %s: evaluation failed:\n%s\n", o->model, ampc_graph_errors(g));
        ok = false;
    }
    if (ok && !o->reference) ok = run_gpu(g, o, in, out);
    if (ok) {
        printf("outputs (%s):\n", o->reference ? "reference evaluator" : "GPU");
        for (int32_t i = 0; i < no; i++) print_tensor_head(g->outputs[i]->name, &out[i]);
        if (o->save_dir && mkdir(o->save_dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "ampc: cannot create '%s': %s\n", o->save_dir, strerror(errno));
            ok = false;
        }
        for (int32_t i = 0; ok && o->save_dir && i < no; i++) {
            char *path = output_path(o->save_dir, g->outputs[i]->name), *err = NULL;
            if (ampc_tensor_write_npy(path, &out[i], &err) != AMPC_OK) {
                fprintf(stderr, "ampc: %s: %s\n", path, err ? err : "cannot write");
                ok = false;
            }
            free(err);
            free(path);
        }
        rc = ok ? 0 : 1;
    }
    for (int32_t i = 0; i < ni; i++) ampc_tensor_free(&in[i]);
    for (int32_t i = 0; i < no; i++) ampc_tensor_free(&out[i]);
    free(in);
    free(out);
    ampc_graph_destroy(g);
    return rc;
}
