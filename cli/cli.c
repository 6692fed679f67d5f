/*
 * cli.c — the commands of the `ampc` executable: compile (front end, pass pipeline, emission),
 * inspect (a summary of a model) and run --reference (evaluate on the CPU, save outputs).
 * Everything here prints; the library it calls does not.
 */
#define _POSIX_C_SOURCE 200809L /* strndup, getpid */
#include "cli/cli.h"

#include "cli/calls.h"
#include "cli/paths.h"
#include "compiler/tool.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Reads a whole regular file; NULL with a message on failure. A FIFO, device or folder is
 * refused before anything is read (opened non-blocking, so a FIFO cannot stall the open). */
static char *read_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "ampc: cannot open '%s': %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "ampc: cannot read '%s': not a regular file (%s); give a model file\n", path,
                S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder" : "a device or socket");
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        fprintf(stderr, "ampc: cannot read '%s': %s\n", path, strerror(errno));
        close(fd);
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

/* Checks once more, just before it is renamed into place, that output `what` may replace
 * path (not an input of the run, not a device, FIFO or socket); prints why not. */
static bool output_still_ok(const ampc_cli_options *o, const char *what, const char *path) {
    char *err = NULL;
    if (ampc_cli_check_output(o, what, path, &err)) return true;
    fprintf(stderr, "ampc: %s\n", err ? err : "cannot write the output");
    free(err);
    return false;
}

/* " (12.3 MB)": the size of the file at path, for the lines that say what was written. */
static void file_size_str(const char *path, char *buf, size_t n) {
    struct stat st;
    double b = stat(path, &st) == 0 ? (double)st.st_size : -1;
    if (b < 0) snprintf(buf, n, "%s", "");
    else if (b < 1e3) snprintf(buf, n, " (%.0f bytes)", b);
    else if (b < 1e6) snprintf(buf, n, " (%.1f kB)", b / 1e3);
    else if (b < 1e9) snprintf(buf, n, " (%.1f MB)", b / 1e6);
    else snprintf(buf, n, " (%.2f GB)", b / 1e9);
}

/* Says on stderr that path was written, with its size. */
static void say_written(const char *path) {
    char size[64];
    file_size_str(path, size, sizeof size);
    fprintf(stderr, "ampc: wrote %s%s\n", path, size);
}

/* Writes text to path through a temporary file renamed into place, so a failure never leaves a
 * half-written file; "-" writes to stdout. `what` names the option in messages ("-o"). */
static bool write_file_atomic(const ampc_cli_options *o, const char *what, const char *path,
                              const char *text) {
    if (!strcmp(path, "-")) return fputs(text, stdout) >= 0;
    ampc_artifact_sweep_stale(path);
    ampc_strbuf tmp = {0};
    ampc_sb_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp.data, "wb");
    bool ok = f && fputs(text, f) >= 0;
    if (f) ok = (fclose(f) == 0) && ok;
    if (ok && !output_still_ok(o, what, path)) {
        remove(tmp.data);
        ampc_sb_free(&tmp);
        return false;
    }
    if (ok && rename(tmp.data, path) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "ampc: cannot write '%s': %s\n", path, strerror(errno));
        remove(tmp.data);
    } else {
        say_written(path);
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

/* What a model file holds. */
typedef enum model_kind { KIND_ONNX, KIND_IR, KIND_LIBRARY } model_kind;

/* Whether text (n bytes) begins, after whitespace and `//` comments, with the IR's `graph`. */
static bool starts_as_ir(const char *t, size_t n) {
    size_t i = 0;
    for (;;) {
        while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) i++;
        if (i + 1 < n && t[i] == '/' && t[i + 1] == '/') {
            while (i < n && t[i] != '\n') i++;
            continue;
        }
        break;
    }
    return n - i > 5 && !strncmp(t + i, "graph", 5) &&
           (t[i + 5] == ' ' || t[i + 5] == '\t' || t[i + 5] == '"' || t[i + 5] == '\n');
}

/* What the model file holds, by its content: an ELF file is a library, text beginning with the
 * IR's `graph` is IR text, anything else binary is ONNX (a protobuf never begins with 'g', ' ',
 * '/' or a newline). The name decides only what the content cannot: an empty or unreadable
 * file, text that is not IR ("m.onnx" is then read as ONNX, "m.so" as a library, other names as
 * IR text, each reader's error naming what is wrong), and a binary "m.so" (a library, which the
 * loader then checks). */
static model_kind kind_of_model(const char *path) {
    model_kind by_name = has_suffix(path, ".so")     ? KIND_LIBRARY
                         : has_suffix(path, ".onnx") ? KIND_ONNX
                                                     : KIND_IR;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    char head[4096];
    ssize_t n = -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = read(fd, head, sizeof head);
    if (fd >= 0) close(fd);
    if (n <= 0) return by_name;
    if (n >= 4 && !memcmp(head, "\177ELF", 4)) return KIND_LIBRARY;
    if (starts_as_ir(head, (size_t)n)) return KIND_IR;
    bool text = true;
    for (ssize_t i = 0; i < n && text; i++)
        text = (unsigned char)head[i] >= 0x20 || head[i] == '\n' || head[i] == '\t' || head[i] == '\r';
    return text || by_name == KIND_LIBRARY ? by_name : KIND_ONNX;
}

/* The values to bind at import, from --bind NAME=FILE and (`run` compiling a model) --input
 * NAME=FILE, read into b (names pointing into the options); *n receives the count. False with a
 * message on a bad option or file (b's tensors so far are the caller's to free). */
static bool read_bindings(const ampc_cli_options *o, ampc_input_binding *b, int32_t *n) {
    *n = 0;
    const int total = o->n_binds + (o->bind_run_inputs ? o->n_inputs : 0);
    for (int k = 0; k < total && k < 2 * AMPC_CLI_MAX_LIST; k++) {
        const bool bind = k < o->n_binds;
        const char *opt = bind ? o->binds[k] : o->inputs[k - o->n_binds];
        const char *eq = strchr(opt, '=');
        if (!eq || eq == opt) {
            fprintf(stderr, "ampc: %s '%s' is not NAME=FILE\n", bind ? "--bind" : "--input", opt);
            return false;
        }
        char *err = NULL;
        b[*n] = (ampc_input_binding){.name = strndup(opt, (size_t)(eq - opt))};
        if (!b[*n].name || ampc_tensor_read_file(eq + 1, &b[*n].value, NULL, &err) != AMPC_OK) {
            if (err) fprintf(stderr, "ampc: %s\n", err); /* the reader's message names the file */
            else fprintf(stderr, "ampc: %s: cannot read tensor\n", eq + 1);
            free(err);
            free((char *)b[*n].name);
            return false;
        }
        (*n)++;
    }
    return true;
}

/* After an import with bindings: an input the graph still has was not bound, since nothing
 * reads it at compile time. A --bind of it is refused; a `run` --input of it is read at run time
 * as any other. The bound ones are said on stderr. False (with a message) on a refused --bind. */
static bool check_bindings(const ampc_cli_options *o, const ampc_graph *g, const ampc_input_binding *b,
                           int32_t n) {
    bool ok = true;
    for (int32_t k = 0; k < n; k++) {
        bool still_input = false;
        for (int32_t i = 0; i < g->n_inputs && !still_input; i++)
            still_input = !strcmp(g->inputs[i]->name, b[k].name);
        char *q = ampc_cli_quote(b[k].name);
        if (!still_input) {
            fprintf(stderr, "ampc: input '%s' bound at compile time to the given value (it sets a "
                            "shape, axes, sizes or pads)\n", q ? q : "?");
        } else if (k < o->n_binds) {
            fprintf(stderr, "ampc: --bind %s: the model reads input '%s' at run time only (no shape, "
                            "axes, sizes or pads depend on it); give it when the library runs\n",
                    o->binds[k], q ? q : "?");
            ok = false;
        }
        free(q);
    }
    return ok;
}

/* Loads MODEL: ONNX or IR text, told apart by content (kind_of_model). Prints the error and
 * returns NULL on failure. */
ampc_graph *ampc_cli_load_model(const ampc_cli_options *o) {
    ampc_graph *g = NULL;
    char *err = NULL;
    model_kind kind = kind_of_model(o->model);
    if (kind == KIND_LIBRARY) {
        fprintf(stderr, "ampc: %s is a shared library (ELF), not a model: `ampc run` and `ampc "
                        "inspect` take a library; compiling takes the model (ONNX or IR text)\n",
                o->model);
        return NULL;
    }
    if (kind == KIND_ONNX) {
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
        io.max_loop_iterations = o->max_loop_iterations;
        ampc_input_binding binds[2 * AMPC_CLI_MAX_LIST];
        int32_t n_binds = 0;
        bool read = read_bindings(o, binds, &n_binds);
        io.constants = binds;
        io.n_constants = n_binds;
        io.constants_if_needed = true; /* only what must be known at compile time */
        ampc_status st = read ? ampc_onnx_import_file(o->model, &io, &g, &err) : AMPC_E_IO;
        for (int i = 0; i < o->n_shapes; i++) free((char *)shapes[i].name);
        if (st != AMPC_OK && read) { /* the importer's message names the file */
            if (err) fprintf(stderr, "ampc: %s\n", err);
            else fprintf(stderr, "ampc: %s: %s\n", o->model, ampc_status_str(st));
            free(err);
        }
        if (st == AMPC_OK && !check_bindings(o, g, binds, n_binds)) {
            ampc_graph_destroy(g);
            g = NULL;
        }
        for (int32_t k = 0; k < n_binds; k++) {
            free((char *)binds[k].name);
            ampc_tensor_free(&binds[k].value);
        }
        return g;
    }
    if (o->n_shapes || o->max_batch)
        fprintf(stderr, "ampc: warning: --shape and --max-batch apply to ONNX models only\n");
    if (o->n_binds) {
        fprintf(stderr, "ampc: --bind applies to ONNX models: %s is ampc IR text, whose constants "
                        "are written in it\n", o->model);
        return NULL;
    }
    size_t len;
    char *text = read_file(o->model, &len);
    if (!text) return NULL;
    ampc_status st = ampc_graph_parse(text, len, &g, &err);
    free(text);
    ampc_graph_set_max_loop_iterations(g, o->max_loop_iterations); /* NULL g: no-op */
    if (st != AMPC_OK) {
        fprintf(stderr, "ampc: %s:%s\n", o->model, err ? err : ampc_status_str(st));
        free(err);
        return NULL;
    }
    return g;
}

bool ampc_cli_is_auto(const ampc_cli_options *o) {
    return o->precision && !strcmp(o->precision, "auto");
}

static ampc_precision cli_precision(const ampc_cli_options *o) {
    const char *p = ampc_cli_is_auto(o) ? (o->auto_type ? o->auto_type : "fp16") : o->precision;
    if (p && !strcmp(p, "fp16")) return AMPC_PRECISION_FP16;
    if (p && !strcmp(p, "bf16")) return AMPC_PRECISION_BF16;
    return AMPC_PRECISION_KEEP;
}

static ampc_sparsity cli_sparsity(const ampc_cli_options *o) {
    if (o->sparsity && !strcmp(o->sparsity, "verify")) return AMPC_SPARSITY_VERIFY;
    if (o->sparsity && !strcmp(o->sparsity, "prune")) return AMPC_SPARSITY_PRUNE;
    return AMPC_SPARSITY_OFF;
}

bool ampc_cli_tf32(const ampc_cli_options *o) {
    return !(o->precision && !strcmp(o->precision, "fp32"));
}

ampc_pipeline_options ampc_cli_pipeline(const ampc_cli_options *o, char *const *kept,
                                        int32_t n_kept) {
    return (ampc_pipeline_options){.disable = o->disable, .n_disable = o->n_disable,
                                   .dump_after = o->dump_after, .dump_file = stderr, .verify = true,
                                   .trace = o->verbose ? stderr : NULL,
                                   .precision = cli_precision(o), .keep_fp32 = o->keep_fp32,
                                   .n_keep_fp32 = o->n_keep_fp32,
                                   .auto_fp32 = (const char *const *)kept, .n_auto_fp32 = n_kept,
                                   .keep_nchw = o->nchw, .gpus = o->gpus,
                                   .partition = o->tensor_parallel ? AMPC_PARTITION_TENSOR
                                                : o->data_parallel ? AMPC_PARTITION_DATA
                                                : o->pipeline_parallel ? AMPC_PARTITION_PIPELINE
                                                                   : AMPC_PARTITION_NONE,
                                   .micro_batches = o->micro_batches,
                                   .sparsity = cli_sparsity(o),
                                   .sparsity_layers = o->sparsity_layers,
                                   .gemm_kernel = o->gemm_kernel,
                                   .fast_gelu = o->fast_gelu};
}

ampc_compile_options ampc_cli_compile_options(const ampc_cli_options *o,
                                              const ampc_pipeline_options *po) {
    return (ampc_compile_options){.pipeline = po, .no_tf32 = !ampc_cli_tf32(o),
                                  .no_l2_prefetch = o->no_l2_prefetch};
}

/* The pipeline options of the build, after --precision auto's search when asked (n receives
 * it); false with the reason printed. */
static bool build_pipeline(const ampc_cli_options *o, ampc_cli_numerics *n,
                           ampc_pipeline_options *po) {
    if (ampc_cli_is_auto(o) && !ampc_cli_auto_search(o, n)) return false;
    *po = ampc_cli_pipeline(o, n->autop ? n->autop->kept : NULL, n->autop ? n->autop->n_kept : 0);
    po->report = &n->report;
    return true;
}

/* The math: facts of an optimised graph not compiled (TF32 counted from its ops), r what its
 * pipeline run reported. */
static char *graph_math(const ampc_graph *g, const ampc_pipeline_report *r,
                        const ampc_cli_options *o) {
    ampc_math_facts f;
    ampc_math_collect(g, r, NULL, ampc_cli_tf32(o), &f);
    return ampc_math_text(&f);
}

/* With --gpus N --partition tensor: each block the partition pass split, each it left whole
 * and why, and a warning when it split nothing (the build then runs on one GPU). */
static void say_partition(const ampc_pipeline_report *r, const ampc_cli_options *o) {
    if (!o->tensor_parallel || o->gpus < 2) return;
    int32_t split = 0;
    for (int32_t i = 0; i < r->n_partition_blocks; i++) {
        const ampc_partition_block *b = &r->partition_blocks[i];
        split += b->split;
        fprintf(stderr, "ampc: partition: %s block at '%s' %s: %s\n", b->kind, b->node,
                b->split ? "split" : "left whole", b->why);
    }
    if (split)
        fprintf(stderr, "ampc: partition: %d block%s split over %d GPUs\n", split,
                split == 1 ? "" : "s", o->gpus);
    else
        fprintf(stderr, "ampc: warning: --partition tensor split nothing over %d GPUs (it splits "
                        "pairs of MatMul or Gemm layers with constant weights joined by "
                        "elementwise ops, and attention blocks by heads): the build runs on one "
                        "GPU\n", o->gpus);
}

/* Runs the pass pipeline without compiling (--emit ir, inspect, run --reference). With `say`,
 * the math: line says what changes numbers (nothing that does is silent); with `measure`, the
 * numerics a compile reports are measured too; *report (when not NULL) receives what the passes
 * decided. */
static bool optimize(ampc_graph *g, const ampc_cli_options *o, bool say, bool measure,
                     ampc_pipeline_report *report) {
    ampc_cli_numerics num = {0};
    ampc_pipeline_options po;
    bool ok = build_pipeline(o, &num, &po);
    if (ok && ampc_graph_optimize(g, &po) != AMPC_OK) {
        fprintf(stderr, "ampc: %s: optimisation failed:\n%s\n", o->model, ampc_graph_errors(g));
        ok = false;
    }
    if (ok && measure) ok = ampc_cli_numerics_after(o, NULL, &num);
    if (ok && say) {
        char *text = graph_math(g, &num.report, o);
        ampc_cli_say_math(text, num.note);
        free(text);
        say_partition(&num.report, o);
    }
    if (report) *report = num.report;
    ampc_cli_numerics_free(&num);
    return ok;
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

/* The progress line while kernels compile (stderr, when it is a terminal or with -v). */
static void show_progress(void *user, int32_t done, int32_t total) {
    (void)user;
    FILE *f = ampc_cli_raw_stderr(); /* the '\r' passes: the line is ampc's own text */
    fprintf(f, "\rampc: compiling kernels %d/%d", done, total);
    if (done == total) fputc('\n', f);
    fflush(f);
}

/* What --report records besides the plan. */
typedef struct compile_record {
    ampc_pass_record passes[64];
    int32_t n_passes;
    double ms;
    ampc_cli_numerics num; /* --precision auto's search and check, --sparsity prune's error */
} compile_record;

static double wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Compiles the graph for the GPU with the command line's options, measures what changes its
 * numbers where asked and prints the math: line; prints the failure. */
static ampc_module *compile_gpu(ampc_graph *g, const ampc_cli_options *o, compile_record *rec) {
    int32_t archs[16], n_archs;
    if (!parse_archs(o->arch, archs, &n_archs)) return NULL;
    compile_record none = {0};
    if (!rec) rec = &none;
    ampc_pipeline_options po;
    ampc_module *m = NULL;
    if (build_pipeline(o, &rec->num, &po)) {
        po.record = rec->passes;
        po.max_records = 64;
        po.n_records = &rec->n_passes;
        ampc_compile_options co = ampc_cli_compile_options(o, &po);
        co.archs = o->arch ? archs : NULL, co.n_archs = n_archs;
        if (o->verbose || isatty(2)) co.progress = show_progress;
        double t0 = wall_ms();
        if (ampc_compile(g, &co, &m) != AMPC_OK)
            fprintf(stderr, "ampc: %s: compilation failed:\n%s\n", o->model, ampc_graph_errors(g));
        rec->ms = wall_ms() - t0;
    }
    if (m && !ampc_cli_numerics_after(o, m, &rec->num)) {
        ampc_module_destroy(m);
        m = NULL;
    }
    if (m) ampc_cli_say_math(ampc_module_math(m), rec->num.note);
    if (m) say_partition(&rec->num.report, o);
    if (rec == &none) ampc_cli_numerics_free(&none.num);
    return m;
}

/* A JSON string (ampc_sb_put_json_str: valid JSON whatever bytes s holds). */
static void json_str(FILE *f, const char *s) {
    ampc_strbuf sb = {0};
    ampc_sb_put_json_str(&sb, s);
    fputs(sb.data, f);
    ampc_sb_free(&sb);
}

static const char *step_precision(const ampc_rt_step *s);

/* --report FILE.json: what each pass did, the memory plan, the images and every step with its
 * provider, precision and (a GEMM's) epilogue. Written through a temporary file renamed into
 * place. */
/* The type node n computes in: its first float output's, else its first float input's. */
static ampc_dtype node_float_type(const ampc_node *n) {
    for (int32_t i = 0; i < n->n_outputs; i++)
        if (ampc_dtype_is_float(n->outputs[i]->dtype)) return n->outputs[i]->dtype;
    for (int32_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] && ampc_dtype_is_float(n->inputs[i]->dtype)) return n->inputs[i]->dtype;
    return AMPC_DTYPE_UNDEFINED;
}

/* The report's "nodes": each node the precision pass decided on, its type and the reason. */
static void write_node_precision(FILE *f, const ampc_graph *g) {
    fprintf(f, ",\n  \"nodes\": [");
    bool first = true;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead || n->prec_why == PREC_WHY_NONE) continue;
        fprintf(f, "%s\n    {\"node\": ", first ? "" : ",");
        json_str(f, n->name);
        fprintf(f, ", \"op\": ");
        json_str(f, ampc_op_get(n->op)->onnx);
        fprintf(f, ", \"dtype\": \"%s\", \"why\": ", ampc_dtype_name(node_float_type(n)));
        json_str(f, ampc_prec_why_str((ampc_prec_why)n->prec_why));
        fputc('}', f);
        first = false;
    }
    fprintf(f, "\n  ]");
}

/* The report's "sparse_layers": each contraction and convolution the sparsity pass looked at (only
 * with --sparsity verify|prune): weight shape, K, what it found, the energy pruning removed. */
static void write_sparsity(FILE *f, const ampc_pipeline_report *r) {
    fprintf(f, ",\n  \"sparse_layers\": [");
    for (int32_t i = 0; i < r->n_sparse_layers; i++) {
        const ampc_sparse_layer *l = &r->sparse_layers[i];
        char shape[AMPC_SHAPE_STR_MAX];
        fprintf(f, "%s\n    {\"node\": ", i ? "," : "");
        json_str(f, l->node);
        fprintf(f, ", \"op\": ");
        json_str(f, ampc_op_get(l->op)->onnx);
        fprintf(f, ", \"shape\": \"%s\", \"k\": %lld, \"status\": ",
                ampc_shape_str(&l->shape, shape, sizeof shape), (long long)l->k);
        json_str(f, ampc_sparse_why_str(l->status));
        fprintf(f, ", \"energy_removed\": %.6g}", l->energy_removed);
    }
    fprintf(f, "\n  ]");
}

/* The report's "partition" (with --gpus N --partition tensor): each block the partition pass
 * split, and each attention block it left whole, with why. */
static void write_partition(FILE *f, const ampc_pipeline_report *r) {
    fprintf(f, ",\n  \"partition\": [");
    for (int32_t i = 0; i < r->n_partition_blocks; i++) {
        const ampc_partition_block *b = &r->partition_blocks[i];
        fprintf(f, "%s\n    {\"node\": ", i ? "," : "");
        json_str(f, b->node);
        fprintf(f, ", \"kind\": \"%s\", \"split\": %s, \"why\": ", b->kind,
                b->split ? "true" : "false");
        json_str(f, b->why);
        fputc('}', f);
    }
    fprintf(f, "\n  ]");
}

/* The report's "pipeline" (with --gpus N --partition pipeline): each stage the pipeline pass
 * chose, its nodes and estimated cost, and the tensors it hands to the next stage. */
static void write_pipeline(FILE *f, const ampc_graph *g, const ampc_pipeline_report *r) {
    fprintf(f, ",\n  \"pipeline\": {\"stages\": %d, \"micro_batches\": %d, \"list\": [",
            r->n_stages, g->micro_batches);
    for (int32_t i = 0; i < r->n_stages; i++) {
        const ampc_pipeline_stage *s = &r->stages[i];
        fprintf(f, "%s\n    {\"stage\": %d, \"nodes\": %d, \"first\": ", i ? "," : "", i,
                s->n_nodes);
        json_str(f, s->first);
        fprintf(f, ", \"last\": ");
        json_str(f, s->last);
        fprintf(f, ", \"cost\": %.6g, \"crossing\": %d, \"crossing_bytes\": %lld, "
                   "\"tensors\": ", s->cost, s->n_cross, (long long)s->cross_bytes);
        json_str(f, s->crossing ? s->crossing : "");
        fputc('}', f);
    }
    fprintf(f, "\n  ]}");
}

/* The report's "math": the module's math line (what changes numbers, "" when nothing) and what
 * the compile measured. */
static void write_math(FILE *f, const ampc_module *m, const compile_record *rec) {
    fprintf(f, ",\n  \"math\": ");
    json_str(f, ampc_module_math(m));
    fprintf(f, ",\n  \"math_note\": ");
    json_str(f, rec->num.note ? rec->num.note : "");
}

static void json_accuracy(FILE *f, const ampc_check_set *c, const ampc_accuracy *acc) {
    for (int32_t i = 0; i < c->n_outputs; i++) {
        fprintf(f, "%s{\"output\": ", i ? ", " : "");
        json_str(f, c->names[i]);
        fprintf(f, ", \"max_rel\": %.6g, \"p999\": %.6g}", isfinite(acc[i].max_rel) ? acc[i].max_rel : 1e308,
                isfinite(acc[i].p999) ? acc[i].p999 : 1e308);
    }
}

/* The report's "auto": --precision auto's search and the check of what ships. */
static void write_auto(FILE *f, const ampc_cli_options *o, const ampc_auto_result *a) {
    fprintf(f, ",\n  \"auto\": {\"tolerance\": %g, \"search_error_all_low\": %g, "
               "\"search_error\": %g, \"rounds\": %d, \"check_error\": %g, \"met\": %s, "
               "\"accepted\": %s, \"check_samples\": %d, \"check\": [",
            o->tolerance > 0 ? o->tolerance : 1e-2, a->error_low, a->error, a->rounds,
            isfinite(a->check_error) ? a->check_error : 1e308, a->met ? "true" : "false",
            !a->met && o->accept_error ? "true" : "false", a->check.n_samples);
    json_accuracy(f, &a->check, a->acc);
    fprintf(f, "], \"moved_to_f32\": [");
    for (int32_t i = 0; i < a->n_kept; i++) {
        fputs(i ? ", " : "", f);
        json_str(f, a->kept[i]);
    }
    fprintf(f, "]}");
}

static bool write_report(const char *path, const ampc_cli_options *o, const ampc_graph *g,
                         const ampc_module *m, const compile_record *rec) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "ampc: cannot write '%s': %s\n", tmp, strerror(errno));
        return false;
    }
    const ampc_rt_plan *p = ampc_module_plan(m);
    fprintf(f, "{\n  \"ampc\": \"%s\",\n  \"model\": ", AMPC_VERSION_STRING);
    json_str(f, o->model);
    fprintf(f, ",\n  \"output\": ");
    json_str(f, o->output);
    fprintf(f, ",\n  \"precision\": \"%s\",\n  \"sparsity\": \"%s\",\n  \"compile_ms\": %.3f,\n"
               "  \"passes\": [",
            o->precision ? o->precision : "tf32", o->sparsity ? o->sparsity : "off", rec->ms);
    for (int32_t i = 0; i < rec->n_passes; i++) {
        const ampc_pass_record *r = &rec->passes[i];
        fprintf(f, "%s\n    {\"name\": \"%s\", \"ran\": %s, \"changed\": %s, \"ms\": %.3f, "
                   "\"nodes_before\": %d, \"nodes_after\": %d}",
                i ? "," : "", r->name, r->ran ? "true" : "false", r->changed ? "true" : "false",
                r->ms, r->nodes_before, r->nodes_after);
    }
    fprintf(f, "\n  ],\n  \"memory\": {\"arena_bytes\": %lld, \"weights_bytes\": %lld},\n"
               "  \"images\": [", (long long)p->arena_bytes, (long long)p->weights_bytes);
    for (int32_t i = 0; i < p->n_images; i++)
        fprintf(f, "%s\n    {\"unit\": %d, \"kind\": \"%s\", \"sm\": %d, \"bytes\": %lld}",
                i ? "," : "", p->images[i].unit,
                p->images[i].kind == AMPC_RT_IMAGE_PTX ? "ptx" : "cubin", p->images[i].sm,
                (long long)p->images[i].size);
    fprintf(f, "\n  ],\n  \"steps\": [");
    for (int32_t i = 0; i < p->n_steps; i++) {
        const ampc_rt_step *s = &p->steps[i];
        fprintf(f, "%s\n    {\"index\": %d, \"provider\": \"%s\", \"precision\": \"%s\", "
                   "\"nodes\": ",
                i ? "," : "", i, ampc_rt_step_kind_name(s->kind), step_precision(s));
        json_str(f, s->label);
        if (s->kind == AMPC_RT_STEP_KERNEL) {
            fprintf(f, ", \"kernel\": ");
            json_str(f, s->kernel.name);
        }
        /* a 2:4 weight: the runtime times cuSPARSELt and ampc's 2:4 kernel against cuBLASLt at
         * load; ampc's dense kernel is timed against cuBLASLt, or the only way for a GELU */
        if (s->kind == AMPC_RT_STEP_GEMM && s->gemm.sparse24) fprintf(f, ", \"sparse24\": true");
        /* "BIAS_GELU_TANH": an erf or tanh GELU that runs in its tanh form (docs/precision.md) */
        if (s->kind == AMPC_RT_STEP_GEMM && s->gemm.epilogue != AMPC_RT_EPI_NONE)
            fprintf(f, ", \"epilogue\": \"%s\"", ampc_rt_epilogue_name(s->gemm.epilogue));
        if (s->kind == AMPC_RT_STEP_GEMM && s->gemm.own_kernel.name) {
            fprintf(f, ", \"own_kernel\": ");
            json_str(f, s->gemm.own_kernel.name);
        }
        fputc('}', f);
    }
    fprintf(f, "\n  ]");
    write_node_precision(f, g);
    const ampc_pipeline_report *r = &rec->num.report;
    write_sparsity(f, r);
    if (r->n_partition_blocks) write_partition(f, r);
    if (r->n_stages) write_pipeline(f, g, r);
    write_math(f, m, rec);
    if (rec->num.autop) write_auto(f, o, rec->num.autop);
    fprintf(f, "\n}\n");
    bool ok = fclose(f) == 0;
    if (ok && !output_still_ok(o, "--report", path)) {
        remove(tmp);
        return false;
    }
    ok = ok && rename(tmp, path) == 0;
    if (!ok) {
        fprintf(stderr, "ampc: cannot write '%s': %s\n", path, strerror(errno));
        remove(tmp);
    } else {
        say_written(path);
    }
    return ok;
}

/* One line on stderr naming each file of a library just written, with its size. */
static void say_library_written(const ampc_module *m, const char *path,
                                const ampc_library_options *lo) {
    char size[64];
    char *h = ampc_artifact_header_path(path);
    file_size_str(path, size, sizeof size);
    fprintf(stderr, "ampc: wrote %s%s, %s", path, size, h);
    if (ampc_artifact_has_sidecar(m, lo)) {
        char side[4200];
        snprintf(side, sizeof side, "%s.weights", path);
        file_size_str(side, size, sizeof size);
        fprintf(stderr, ", %s%s", side, size);
    }
    fputc('\n', stderr);
    free(h);
}

/* --emit cuda|ptx|c, or -o LIBRARY: compile for the GPU and write what was asked. */
static int emit_gpu(ampc_graph *g, const ampc_cli_options *o) {
    compile_record rec = {0};
    ampc_module *m = compile_gpu(g, o, &rec);
    bool reported = m && (!o->report || write_report(o->report, o, g, m, &rec));
    if (!reported) {
        ampc_cli_numerics_free(&rec.num);
        ampc_module_destroy(m);
        return 1;
    }
    int rc = 1;
    if (!o->emit) { /* the shared library and its header */
        char *err = NULL;
        ampc_library_options lo = {.name = o->name, .source = o->model,
                                   .math_note = rec.num.note};
        if (ampc_module_write_library(m, o->output, &lo, &err) == AMPC_OK) {
            rc = 0;
            say_library_written(m, o->output, &lo);
        } else {
            fprintf(stderr, "ampc: %s: %s\n", o->output, err ? err : "cannot write the library");
        }
        free(err);
    } else if (!strcmp(o->emit, "c")) {
        char *text = ampc_module_host_c(m, o->name);
        rc = text && write_file_atomic(o, "-o", o->output ? o->output : "-", text) ? 0 : 1;
        free(text);
    } else {
        ampc_strbuf sb = {0};
        bool ptx = !strcmp(o->emit, "ptx");
        const ampc_rt_plan *p = ampc_module_plan(m);
        int32_t kernels = 0, steps = p->n_steps;
        for (int32_t i = 0; i < steps; i++) kernels += p->steps[i].kind == AMPC_RT_STEP_KERNEL;
        if (kernels == 0) { /* said on stderr, and in the file so that it is not empty */
            fprintf(stderr, "ampc: %s: no generated kernels: every step runs in cuBLASLt/cuDNN "
                            "or is a copy (%d step%s); --emit %s has nothing to show\n",
                    o->model, steps, steps == 1 ? "" : "s", o->emit);
            ampc_sb_printf(&sb, "// no generated kernels: every step runs in cuBLASLt/cuDNN or "
                                "is a copy (%d step%s)\n", steps, steps == 1 ? "" : "s");
        }
        for (int32_t u = 0; u < ampc_module_unit_count(m); u++) {
            const char *text = ptx ? ampc_module_ptx(m, u) : ampc_module_cuda(m, u);
            if (ampc_module_unit_count(m) > 1) ampc_sb_printf(&sb, "// ---- unit %d ----\n", u);
            ampc_sb_puts(&sb, text ? text : "");
        }
        rc = write_file_atomic(o, "-o", o->output ? o->output : "-", sb.data ? sb.data : "") ? 0 : 1;
        ampc_sb_free(&sb);
    }
    ampc_cli_numerics_free(&rec.num);
    ampc_module_destroy(m);
    return rc;
}

/* Every output the command line names, checked before any work; prints why not. */
static bool paths_ok(const ampc_cli_options *o) {
    char *err = NULL;
    if (ampc_cli_check_paths(o, &err)) return true;
    fprintf(stderr, "ampc: %s\n", err ? err : "bad output path");
    free(err);
    return false;
}

int ampc_cli_compile(const ampc_cli_options *o) {
    char *name_err = NULL;
    if (o->name && !ampc_artifact_name_ok(o->name, &name_err)) {
        fprintf(stderr, "ampc: --name: %s\n", name_err);
        free(name_err);
        return 1;
    }
    if (!o->emit && !o->output) {
        fprintf(stderr, "ampc: nothing to do: give -o MODEL.so to build a library, or --emit "
                        "ir|cuda|ptx|c to see the optimised graph, its CUDA C, PTX or host C\n");
        return 2;
    }
    if (!o->emit || strcmp(o->emit, "ir")) {
        if (!o->emit && !strcmp(o->output, "-")) {
            fprintf(stderr, "ampc: a library cannot go to stdout: give -o MODEL.so\n");
            return 2;
        }
        if (!paths_ok(o)) return 2;
        ampc_graph *g = ampc_cli_load_model(o);
        if (!g) return 1;
        int rc = emit_gpu(g, o);
        ampc_graph_destroy(g);
        return rc;
    }
    if (!paths_ok(o)) return 2;
    ampc_graph *g = ampc_cli_load_model(o);
    if (!g) return 1;
    int rc = 1;
    if (optimize(g, o, true, true, NULL)) {
        char *text = ampc_graph_to_text(g, true);
        if (text && write_file_atomic(o, "-o", o->output ? o->output : "-", text)) rc = 0;
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

/* The precision a step computes in: f32 library steps say TF32 or FP32. */
static const char *step_precision(const ampc_rt_step *s) {
    uint8_t math = s->kind == AMPC_RT_STEP_GEMM ? s->gemm.math
                   : s->kind == AMPC_RT_STEP_CONV ? s->conv.math : 0;
    ampc_dtype t = s->kind == AMPC_RT_STEP_GEMM ? s->gemm.dtype_ab
                   : s->kind == AMPC_RT_STEP_CONV ? s->conv.dtype : AMPC_DTYPE_UNDEFINED;
    if (t == AMPC_DTYPE_F32) return math == AMPC_RT_MATH_TF32 ? "tf32" : "fp32";
    return t == AMPC_DTYPE_UNDEFINED ? "" : ampc_dtype_name(t);
}

/* The line `inspect` and `run` print for a plan whose GPUs split the batch. */
static void print_batch_split(const ampc_rt_plan *p) {
    int64_t b = p->n_inputs > 0 && p->inputs[0].shape.rank > 0 ? p->inputs[0].shape.dims[0] : 0;
    printf("data parallel: %d GPUs (devices 0 to %d) split the batch of %lld, %lld rows each "
           "(rank r: rows [r %lld, (r+1) %lld)); one copy of the weights (%lld bytes) for every "
           "rank, no all-reduce\n", p->n_ranks, p->n_ranks - 1, (long long)b,
           (long long)(b / p->n_ranks), (long long)(b / p->n_ranks),
           (long long)(b / p->n_ranks), (long long)p->weights_bytes);
}

/* The line `inspect` and `run` print for a pipeline. */
static void print_pipeline(const ampc_rt_plan *p) {
    int64_t b = p->n_inputs > 0 && p->inputs[0].shape.rank > 0 ? p->inputs[0].shape.dims[0] : 0;
    int32_t m = p->micro_batches > 0 ? p->micro_batches : 1;
    printf("pipeline: %d stages on %d GPUs (devices 0 to %d), the batch of %lld in %d "
           "micro-batches of %lld rows, peer copies between the stages; weights per stage:",
           p->n_ranks, p->n_ranks, p->n_ranks - 1, (long long)b, m, (long long)(b / m));
    for (int32_t r = 0; p->ranks && r < p->n_ranks; r++) {
        int32_t copies = 0;
        for (int32_t i = 0; i < p->ranks[r].n_steps; i++)
            copies += p->ranks[r].steps[i].kind == AMPC_RT_STEP_PEER_COPY;
        printf(" %lld (%d steps, %d peer copies)%s", (long long)p->ranks[r].weights_bytes,
               p->ranks[r].n_steps, copies, r + 1 < p->n_ranks ? "," : "\n");
    }
}

/* `ampc inspect model.so`: what the library holds and how it will run. */
static int inspect_library(const ampc_cli_options *o) {
    ampc_rt_artifact *a = NULL;
    char *err = NULL;
    if (ampc_rt_load(o->model, &a, &err) != AMPC_OK) {
        fprintf(stderr, "ampc: %s\n", err ? err : "cannot load the library");
        free(err);
        return 1;
    }
    const ampc_rt_plan *p = ampc_rt_artifact_plan(a);
    printf("library '%s' (C prefix %s_), written by ampc %s\n", o->model,
           ampc_rt_artifact_name(a), ampc_rt_artifact_version(a));
    for (int pass = 0; pass < 2; pass++) {
        const ampc_rt_io *io = pass ? p->outputs : p->inputs;
        int32_t n = pass ? p->n_outputs : p->n_inputs;
        printf("%s (%d):\n", pass ? "outputs" : "inputs", n);
        for (int32_t i = 0; i < n; i++) {
            char sh[AMPC_SHAPE_STR_MAX];
            printf("  %-24s %s%s  %lld bytes\n", io[i].name, ampc_dtype_name(io[i].dtype),
                   ampc_shape_str(&io[i].shape, sh, sizeof sh), (long long)io[i].ref.bytes);
        }
    }
    printf("memory plan: arena %lld bytes, weights %lld bytes\n", (long long)p->arena_bytes,
           (long long)p->weights_bytes);
    const char *math = ampc_rt_artifact_math(a);
    printf("math: %s\n", *math ? math : "exact (every op in the model's declared types, one "
                                         "rounding each)");
    printf("images (%d, %d translation units):\n", p->n_images, p->n_units);
    for (int32_t i = 0; i < p->n_images; i++)
        printf("  unit %d: %s_%d, %lld bytes\n", p->images[i].unit,
               p->images[i].kind == AMPC_RT_IMAGE_PTX ? "PTX compute" : "cubin sm", p->images[i].sm,
               (long long)p->images[i].size);
    if (p->split_batch)
        print_batch_split(p);
    else if (p->micro_batches > 0)
        print_pipeline(p);
    else if (p->n_ranks > 1)
        printf("multi-GPU: %d ranks (one GPU each); rank 0's plan below, weights per rank:",
               p->n_ranks);
    for (int32_t r = 0; p->n_ranks > 1 && !p->split_batch && !p->micro_batches && p->ranks &&
                        r < p->n_ranks; r++)
        printf(" %lld%s", (long long)p->ranks[r].weights_bytes, r + 1 < p->n_ranks ? "," : "\n");
    int32_t count[6] = {0};
    for (int32_t i = 0; i < p->n_steps; i++) count[p->steps[i].kind < 6 ? p->steps[i].kind : 4]++;
    printf("steps (%d): %d kernels, %d cuBLASLt, %d cuDNN, %d copies, %d memsets", p->n_steps,
           count[0], count[1], count[2], count[3], count[4]);
    if (count[5]) printf(", %d all-reduces", count[5]);
    printf("\n");
    for (int32_t i = 0; i < p->n_steps; i++) {
        const ampc_rt_step *s = &p->steps[i];
        bool gemm = s->kind == AMPC_RT_STEP_GEMM, sp = gemm && s->gemm.sparse24;
        bool own = gemm && s->gemm.own_kernel.name;
        bool gelu = gemm && (s->gemm.epilogue == AMPC_RT_EPI_GELU ||
                             s->gemm.epilogue == AMPC_RT_EPI_BIAS_GELU);
        bool tanh = gemm && ampc_rt_epilogue_tanh(s->gemm.epilogue);
        printf("  %4d  %-8s %-5s %s%s\n", i, ampc_rt_step_kind_name(s->kind), step_precision(s),
               s->label ? s->label : "",
               gelu        ? "  [GELU epilogue: ampc's kernel]"
               : tanh      ? "  [GELU epilogue, tanh form: cuBLASLt]"
               : sp && own ? "  [2:4: ampc's kernel or cuSPARSELt where faster at load]"
               : sp        ? "  [2:4: cuSPARSELt where faster at load]"
               : own       ? "  [ampc's kernel where faster at load]"
                           : "");
    }
    ampc_rt_unload(a);
    return 0;
}

/* With --precision: the optimised graph's nodes, each with the type it computes in and why, and
 * the GELUs that run in their tanh form. */
static void print_precision(const ampc_cli_options *o, const ampc_graph *g,
                            const ampc_pipeline_report *r) {
    int32_t low = 0, f32 = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead || n->prec_why == PREC_WHY_NONE) continue;
        ampc_dtype t = node_float_type(n);
        if (t == AMPC_DTYPE_F32) f32++;
        else low++;
    }
    printf("precision (%s): %d nodes in the low type, %d in f32\n", o->precision, low, f32);
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead || n->prec_why == PREC_WHY_NONE) continue;
        printf("  %-40s %-22s %-5s %s\n", n->name, ampc_op_get(n->op)->onnx,
               ampc_dtype_name(node_float_type(n)), ampc_prec_why_str((ampc_prec_why)n->prec_why));
    }
    int32_t tanh = r->n_tanh_gelus;
    if (tanh > 0)
        printf("GELU: %d %s in GELU's tanh form, in cuBLASLt's epilogue (an erf GELU: within "
               "5e-4 of it, asked for by --fast-gelu)\n", tanh,
               tanh == 1 ? "matmul ends" : "matmuls end");
}

/* With --sparsity verify|prune: each matmul and convolution the sparsity pass looked at. */
static void print_sparsity(const ampc_cli_options *o, const ampc_pipeline_report *r) {
    int32_t sparse = 0, pruned = 0;
    for (int32_t i = 0; i < r->n_sparse_layers; i++) {
        ampc_sparse_why w = r->sparse_layers[i].status;
        sparse += w == SPARSE_WHY_ALREADY || w == SPARSE_WHY_PRUNED;
        pruned += w == SPARSE_WHY_PRUNED;
    }
    printf("sparsity (%s): %d of %d layers 2:4 (%d pruned; f16/bf16 GEMMs among them run sparse "
           "where faster at load)\n", o->sparsity, sparse, r->n_sparse_layers, pruned);
    for (int32_t i = 0; i < r->n_sparse_layers; i++) {
        const ampc_sparse_layer *l = &r->sparse_layers[i];
        char shape[AMPC_SHAPE_STR_MAX];
        printf("  %-40s %-10s %-16s K %-6lld %s", l->node, ampc_op_get(l->op)->onnx,
               ampc_shape_str(&l->shape, shape, sizeof shape), (long long)l->k,
               ampc_sparse_why_str(l->status));
        if (l->status == SPARSE_WHY_PRUNED) printf(", %.2f%% of the energy removed", 100 * l->energy_removed);
        printf("\n");
    }
}

static bool sparsity_on(const ampc_cli_options *o) { return cli_sparsity(o) != AMPC_SPARSITY_OFF; }

/* With --precision fp16|bf16|auto or --sparsity verify|prune: what the passes decided. */
static int inspect_decisions(const ampc_cli_options *o) {
    ampc_graph *g = ampc_cli_load_model(o);
    ampc_pipeline_report r = {0};
    if (!g || !optimize(g, o, false, false, &r)) {
        ampc_graph_destroy(g);
        return 1;
    }
    if (cli_precision(o) != AMPC_PRECISION_KEEP) print_precision(o, g, &r);
    if (sparsity_on(o)) print_sparsity(o, &r);
    char *math = graph_math(g, &r, o);
    printf("math: %s\n", *math ? math : "exact (every op in the model's declared types, one "
                                         "rounding each)");
    free(math);
    ampc_graph_destroy(g);
    return 0;
}

/* Whether `-o` with these options builds the model for the GPU, said as one line: the pass
 * pipeline and code generation of that build (ampc_compile_check, without NVRTC), so that what
 * inspect calls buildable builds, and what does not is named with the reason. */
static void inspect_gpu(const ampc_cli_options *o) {
    ampc_graph *g = ampc_cli_load_model(o);
    if (!g) {
        printf("GPU build: not possible: the model does not load (the error is above)\n");
        return;
    }
    ampc_pipeline_options po = ampc_cli_pipeline(o, NULL, 0);
    ampc_compile_options co = ampc_cli_compile_options(o, &po);
    int32_t steps = 0;
    if (ampc_compile_check(g, &co, &steps) == AMPC_OK) {
        printf("GPU build: ok (%d step%s; `ampc MODEL -o MODEL.so` builds it)\n", steps,
               steps == 1 ? "" : "s");
    } else {
        printf("GPU build: not possible; `-o` refuses it with:\n");
        const char *e = ampc_graph_errors(g);
        for (const char *p = e ? e : ""; *p;) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            printf("  %.*s\n", (int)n, p);
            p += n + (nl != NULL);
        }
        printf("  (`ampc run MODEL --reference` runs it on the CPU evaluator)\n");
    }
    ampc_graph_destroy(g);
}

int ampc_cli_inspect(const ampc_cli_options *o) {
    model_kind kind = kind_of_model(o->model);
    if (kind == KIND_LIBRARY) return inspect_library(o);
    bool low = cli_precision(o) != AMPC_PRECISION_KEEP || sparsity_on(o);
    if (kind == KIND_ONNX) {
        /* The ONNX view first (opsets, coverage): it works even when import would fail. Its
         * import takes no option: with --bind, the GPU line's import (which binds) decides. */
        if (ampc_onnx_inspect(o->model, stdout) != AMPC_OK && !o->n_binds) return 1;
        inspect_gpu(o);
        return low ? inspect_decisions(o) : 0;
    }
    ampc_graph *g = ampc_cli_load_model(o);
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
    if (!rc) inspect_gpu(o);
    return rc || !low ? rc : inspect_decisions(o);
}

/* ---- run ------------------------------------------------------------------------------------ */

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

/* The model's inputs and outputs as `run` sees them, whichever way it runs. */
typedef struct io_list {
    int32_t n;
    const char **names;
    ampc_dtype *dtypes;
    ampc_shape *shapes;
} io_list;

static void io_alloc(io_list *l, int32_t n) {
    l->n = n;
    l->names = ampc_xcalloc((size_t)n + 1, sizeof *l->names);
    l->dtypes = ampc_xcalloc((size_t)n + 1, sizeof *l->dtypes);
    l->shapes = ampc_xcalloc((size_t)n + 1, sizeof *l->shapes);
}

static void io_free(io_list *l) {
    free(l->names);
    free(l->dtypes);
    free(l->shapes);
}

static void io_from_graph(io_list *l, ampc_value *const *vs, int32_t n) {
    io_alloc(l, n);
    for (int32_t i = 0; i < n; i++)
        l->names[i] = vs[i]->name, l->dtypes[i] = vs[i]->dtype, l->shapes[i] = vs[i]->shape;
}

static void io_from_plan(io_list *l, const ampc_rt_io *io, int32_t n) {
    io_alloc(l, n);
    for (int32_t i = 0; i < n; i++)
        l->names[i] = io[i].name, l->dtypes[i] = io[i].dtype, l->shapes[i] = io[i].shape;
}

/* Uniform in [0, 1) (xorshift64*), for random inputs. */
static double next_unit(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

void ampc_cli_fill_random(ampc_tensor *t, uint64_t *seed) {
    if (!ampc_dtype_is_float(t->dtype)) return; /* calloc'ed: integers and bools 0 */
    for (int64_t k = 0, n = ampc_shape_numel(&t->shape); k < n; k++)
        ampc_ref_store_f64(t->data, t->dtype, k, 2 * next_unit(seed) - 1);
}

/* A zeroed host tensor for input or output `name`; false with a message naming it when it cannot
 * be held. One larger than the machine's memory is refused before allocating (calloc could
 * succeed lazily and the process die filling it). */
bool ampc_cli_host_tensor(const char *kind, const char *name, ampc_dtype dt, const ampc_shape *s,
                        ampc_tensor *t) {
    char sh[AMPC_SHAPE_STR_MAX];
    int64_t bytes = ampc_shape_numel(s) * (int64_t)ampc_dtype_size(dt), host = ampc_host_memory_bytes();
    if (bytes > host) {
        fprintf(stderr, "ampc: %s '%s' %s%s takes %lld bytes (%.3g GiB), more than this machine's "
                "%.3g GiB of memory\n", kind, name, ampc_dtype_name(dt), ampc_shape_str(s, sh, sizeof sh),
                (long long)bytes, bytes / 1073741824.0, host / 1073741824.0);
        return false;
    }
    void *data = calloc((size_t)bytes + 1, 1);
    if (!data) {
        fprintf(stderr, "ampc: out of host memory allocating %s '%s' %s%s (%lld bytes)\n", kind, name,
                ampc_dtype_name(dt), ampc_shape_str(s, sh, sizeof sh), (long long)bytes);
        return false;
    }
    *t = (ampc_tensor){dt, *s, data};
    return true;
}

/* Reads --input NAME=FILE for each input; the others get random data (floats uniform in
 * [-1, 1), integers 0, bools false: integer inputs are most often indices or lengths), each
 * said on stderr. False with a message on a bad option or file. */
static bool read_inputs(const ampc_cli_options *o, const io_list *l, ampc_tensor *in, bool bound) {
    for (int k = 0; k < o->n_inputs; k++) {
        const char *eq = strchr(o->inputs[k], '=');
        if (!eq) {
            fprintf(stderr, "ampc: --input '%s' is not NAME=FILE\n", o->inputs[k]);
            return false;
        }
        int32_t idx = -1;
        for (int32_t i = 0; i < l->n; i++)
            if (strlen(l->names[i]) == (size_t)(eq - o->inputs[k]) &&
                !strncmp(l->names[i], o->inputs[k], (size_t)(eq - o->inputs[k])))
                idx = i;
        if (idx < 0 && bound) continue; /* bound at import: the importer knew the name */
        if (idx < 0) {
            fprintf(stderr, "ampc: --input '%.*s': the model has no input of that name\n",
                    (int)(eq - o->inputs[k]), o->inputs[k]);
            return false;
        }
        char *err = NULL;
        ampc_tensor_free(&in[idx]);
        if (ampc_tensor_read_file(eq + 1, &in[idx], NULL, &err) != AMPC_OK) {
            if (err) fprintf(stderr, "ampc: %s\n", err); /* the reader's message names the file */
            else fprintf(stderr, "ampc: %s: cannot read tensor\n", eq + 1);
            free(err);
            return false;
        }
        if (in[idx].dtype == AMPC_DTYPE_U16 && l->dtypes[idx] == AMPC_DTYPE_BF16) {
            /* numpy and older ONNX test data have no bfloat16: its bits are stored as u16 */
            in[idx].dtype = AMPC_DTYPE_BF16;
            fprintf(stderr, "ampc: input '%s': %s holds u16, read as the bits of the model's bf16\n",
                    l->names[idx], eq + 1);
        }
    }
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int32_t i = 0; i < l->n; i++) {
        if (in[i].dtype != AMPC_DTYPE_UNDEFINED) continue;
        char t[AMPC_SHAPE_STR_MAX];
        if (!ampc_cli_host_tensor("input", l->names[i], l->dtypes[i], &l->shapes[i], &in[i])) return false;
        ampc_cli_fill_random(&in[i], &seed);
        fprintf(stderr, "ampc: input '%s' %s%s: random data (give --input %s=FILE for real data)\n",
                l->names[i], ampc_dtype_name(l->dtypes[i]),
                ampc_shape_str(&l->shapes[i], t, sizeof t), l->names[i]);
    }
    return true;
}

/* Says on stderr where a name from the model was saved when its file name differs. */
static void say_file_name(const char *what, const char *name, const char *dir, const char *file,
                          const char *ext) {
    if (!strcmp(name, file)) return;
    char *q = ampc_cli_quote(name);
    fprintf(stderr, "ampc: %s '%s' -> %s/%s%s (file names from a model have no '/', control "
                    "bytes or leading '.', and are unique)\n", what, q, dir, file, ext);
    free(q);
}

static bool save_outputs(const ampc_cli_options *o, const io_list *l, const ampc_tensor *out) {
    if (!o->save_dir) return true;
    if (mkdir(o->save_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ampc: cannot create '%s': %s\n", o->save_dir, strerror(errno));
        return false;
    }
    /* file names made safe and unique first: outputs 'a/b' and 'a_b' get two files */
    char **files = ampc_cli_file_names(l->names, l->n);
    bool ok = true;
    for (int32_t i = 0; ok && i < l->n; i++) {
        ampc_strbuf path = {0}, what = {0};
        char *err = NULL, *q = ampc_cli_quote(l->names[i]);
        ampc_sb_printf(&path, "%s/%s.npy", o->save_dir, files[i]);
        ampc_sb_printf(&what, "--save-outputs file %s of output '%s'", path.data, q);
        say_file_name("--save-outputs: output", l->names[i], o->save_dir, files[i], ".npy");
        if (!output_still_ok(o, what.data, path.data)) {
            ok = false;
        } else if (ampc_tensor_write_npy(path.data, &out[i], &err) != AMPC_OK) {
            fprintf(stderr, "ampc: %s: %s\n", path.data, err ? err : "cannot write");
            ok = false;
        }
        free(err);
        free(q);
        ampc_sb_free(&path);
        ampc_sb_free(&what);
    }
    ampc_cli_file_names_free(files, l->n);
    return ok;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --iterations: warm-up launches, then timed ones (CUDA events around each launch of the
 * steps, the inputs already on the device); prints median, p90, p99 and throughput. */
static bool benchmark(ampc_rt_model *m, const ampc_cli_options *o, bool print) {
    int32_t n = o->iterations, w = o->warmup;
    double *ms = ampc_xcalloc((size_t)(n > w ? n : w) + 1, sizeof *ms);
    char *err = NULL;
    bool ok = ampc_rt_model_time(m, w, ms, &err) == AMPC_OK &&
              ampc_rt_model_time(m, n, ms, &err) == AMPC_OK;
    if (!ok) {
        fprintf(stderr, "ampc: timing failed: %s\n", err ? err : "");
        free(err);
    } else if (print) {
        qsort(ms, (size_t)n, sizeof *ms, cmp_double);
        double med = ms[n / 2], p90 = ms[(int32_t)(0.9 * (n - 1))], p99 = ms[(int32_t)(0.99 * (n - 1))];
        printf("latency over %d runs (after %d warm-up; GPU time of the steps, CUDA events): "
               "median %.4f ms, p90 %.4f ms, p99 %.4f ms, min %.4f ms; throughput %.1f runs/s\n",
               n, w, med, p90, p99, ms[0], med > 0 ? 1000.0 / med : 0.0);
        const char *why = NULL;
        if (ampc_rt_model_graph_status(m, &why) == AMPC_RT_GRAPH_ON)
            printf("CUDA graph: on (%d steps, %d graph nodes, replayed as one launch)\n",
                   ampc_rt_model_n_steps(m), ampc_rt_model_graph_nodes(m));
        else
            printf("CUDA graph: off, steps launched one by one (%s)\n", why ? why : "");
    }
    free(ms);
    return ok;
}

typedef struct step_time {
    int32_t step;
    double ms;
} step_time;

static int cmp_step_time(const void *a, const void *b) {
    double x = ((const step_time *)a)->ms, y = ((const step_time *)b)->ms;
    return (x < y) - (x > y);
}

/* The ceilings a step's throughput is shown against: the f16 tensor-core GEMM rate (TFLOP/s) and
 * the device-to-device copy rate (GB/s, bytes read plus written, as ampc_rt_model_step_work
 * counts them) measured on the GPUs ampc is benchmarked on; AMPC_PEAK_TFLOPS and AMPC_PEAK_GBPS
 * give them for another GPU. 0: unknown (no percent). */
typedef struct ceilings {
    double tflops, gbps;
} ceilings;

static ceilings gpu_ceilings(void) {
    static const struct {
        const char *name;
        ceilings c;
    } measured[] = {
        {"NVIDIA H200", {755, 4100}}, /* measured 2026-11-30: f16 GEMM, device copy */
    };
    ceilings c = {0, 0};
    ampc_rt_device_info info;
    if (ampc_rt_device_info_get(0, &info, NULL) == AMPC_OK)
        for (size_t i = 0; i < sizeof measured / sizeof *measured; i++)
            if (!strncmp(info.name, measured[i].name, strlen(measured[i].name)))
                c = measured[i].c;
    const char *t = getenv("AMPC_PEAK_TFLOPS"), *b = getenv("AMPC_PEAK_GBPS");
    if (t && atof(t) > 0) c.tflops = atof(t);
    if (b && atof(b) > 0) c.gbps = atof(b);
    return c;
}

/* One step's throughput column: TFLOP/s for a matmul or convolution, GB/s otherwise, each with
 * its share of the ceiling when that is known ("-" for a step too short to time). */
static void throughput(char *buf, size_t n, double flops, double bytes, double ms, ceilings c) {
    if (ms <= 0) {
        snprintf(buf, n, "-");
    } else if (flops > 0) {
        double tf = flops / (ms * 1e9);
        if (c.tflops > 0)
            snprintf(buf, n, "%8.1f TFLOP/s %3.0f%%", tf, 100 * tf / c.tflops);
        else
            snprintf(buf, n, "%8.1f TFLOP/s", tf);
    } else {
        double gb = bytes / (ms * 1e6);
        if (c.gbps > 0)
            snprintf(buf, n, "%8.1f GB/s    %3.0f%%", gb, 100 * gb / c.gbps);
        else
            snprintf(buf, n, "%8.1f GB/s", gb);
    }
}

/* --profile: one run step by step between events; the steps by time, largest first, each with
 * its achieved throughput. */
static bool profile(ampc_rt_model *m, const ampc_tensor *in, int32_t ni, ampc_tensor *out,
                    int32_t no) {
    int32_t n = ampc_rt_model_n_steps(m);
    double *ms = ampc_xcalloc((size_t)n + 1, sizeof *ms), total = 0;
    step_time *st = ampc_xcalloc((size_t)n + 1, sizeof *st);
    char *err = NULL;
    /* The first profiled run loads lazily compiled code; the second is the one shown. */
    bool ok = ampc_rt_model_profile(m, in, ni, out, no, NULL, ms, &err) == AMPC_OK &&
              ampc_rt_model_profile(m, in, ni, out, no, NULL, ms, &err) == AMPC_OK;
    if (ok) {
        ceilings c = gpu_ceilings();
        for (int32_t i = 0; i < n; i++) st[i] = (step_time){i, ms[i]}, total += ms[i];
        qsort(st, (size_t)n, sizeof *st, cmp_step_time);
        printf("profile (%d steps, %.4f ms in all, launched one by one; ceilings: ", n, total);
        if (c.tflops > 0)
            printf("%.0f TFLOP/s f16 GEMM, %.0f GB/s copy):\n", c.tflops, c.gbps);
        else
            printf("unknown for this GPU, set AMPC_PEAK_TFLOPS and AMPC_PEAK_GBPS):\n");
        printf("  %5s  %-10s %10s %7s  %-24s %s\n", "step", "provider", "ms", "%", "achieved",
               "graph nodes");
        for (int32_t i = 0; i < n; i++) {
            double flops, bytes;
            char tp[64];
            ampc_rt_model_step_work(m, st[i].step, &flops, &bytes);
            throughput(tp, sizeof tp, flops, bytes, st[i].ms, c);
            printf("  %5d  %-10s %10.4f %6.1f%%  %-24s %s\n", st[i].step,
                   ampc_rt_model_step_provider(m, st[i].step), st[i].ms,
                   total > 0 ? 100 * st[i].ms / total : 0.0, tp,
                   ampc_rt_model_step_label(m, st[i].step));
        }
    } else {
        fprintf(stderr, "ampc: profiling failed: %s\n", err ? err : "");
    }
    free(err);
    free(ms);
    free(st);
    return ok;
}

/* --sparse-report: every GEMM step with a 2:4 weight, its times measured at load and the
 * provider that runs it. */
static void sparse_report(const ampc_rt_model *m) {
    int32_t n = ampc_rt_model_n_steps(m), count = 0, sparse = 0;
    for (int32_t i = 0; i < n; i++) {
        ampc_rt_sparse_choice c;
        if (!ampc_rt_model_step_sparse(m, i, &c)) continue;
        if (count++ == 0)
            printf("sparse report (2:4 GEMMs timed at load):\n  %5s  %10s %10s %10s  %-10s  %s\n",
                   "step", "dense ms", "cuSPLt ms", "ampc ms", "runs on", "graph nodes: note");
        sparse += c.sparse;
        char d[32] = "-", sp[32] = "-", k[32] = "-";
        if (c.dense_ms >= 0) snprintf(d, sizeof d, "%.4f", c.dense_ms);
        if (c.sparse_ms >= 0) snprintf(sp, sizeof sp, "%.4f", c.sparse_ms);
        if (c.kernel_ms >= 0) snprintf(k, sizeof k, "%.4f", c.kernel_ms);
        printf("  %5d  %10s %10s %10s  %-10s  %s: %s\n", i, d, sp, k, c.runs_on,
               ampc_rt_model_step_label(m, i), c.note);
    }
    if (count == 0)
        printf("sparse report: no GEMM step has a 2:4 weight (compile with --sparsity verify or "
               "prune; f16/bf16 weights only)\n");
    else
        printf("sparse report: %d of %d 2:4 GEMMs run sparse\n", sparse, count);
}

/* Runs a plan on GPU 0 (or this process's rank): once for the outputs, then --profile and
 * --iterations (every rank times; rank 0 prints). */
static bool run_plan(const ampc_rt_plan *plan, const ampc_cli_options *o, const ampc_cli_rank *rk,
                     const ampc_tensor *in, int32_t ni, ampc_tensor *out, int32_t no) {
    ampc_rt_model *m = NULL;
    char *err = NULL;
    if (plan->split_batch)
        print_batch_split(plan);
    else if (plan->micro_batches > 0)
        print_pipeline(plan);
    else if (plan->n_ranks > 1)
        printf("tensor parallel: %d GPUs (devices 0 to %d), all-reduces through NCCL\n",
               plan->n_ranks, plan->n_ranks - 1);
    bool ok = ampc_cli_model_create(plan, rk, o->nccl_id_file, &m, &err) == AMPC_OK &&
              ampc_rt_model_run(m, in, ni, out, no, NULL, &err) == AMPC_OK;
    if (!ok) fprintf(stderr, "ampc: %s: %s\n", o->model, err ? err : "");
    free(err);
    if (ok && o->sparse_report) sparse_report(m);
    if (ok && o->profile) ok = profile(m, in, ni, out, no);
    if (ok && o->iterations > 0) ok = benchmark(m, o, !rk->on || rk->rank == 0);
    if (ok && o->iterations > 0 && !rk->on)
        ok = ampc_cli_time_calls(m, in, ni, out, no, o->iterations, o->warmup);
    ampc_rt_model_destroy(m);
    return ok;
}

/* One process per GPU or not (--rank/--ranks, mpirun's environment), and --gpus against the
 * plan; false after printing why. */
static bool plan_ranks(const ampc_cli_options *o, const ampc_rt_plan *plan, ampc_cli_rank *rk) {
    int32_t gpus = plan ? ampc_rt_plan_n_ranks(plan) : 1;
    if (plan && kind_of_model(o->model) == KIND_LIBRARY && o->gpus > 0 && o->gpus != gpus) {
        fprintf(stderr, "ampc: %s: --gpus %d, but the model is %s %d GPU%s\n", o->model, o->gpus,
                gpus > 1 ? "partitioned over" : "built for", gpus, gpus == 1 ? "" : "s");
        return false;
    }
    char *err = NULL;
    if (plan && ampc_cli_rank_resolve(o, gpus, rk, &err)) return true;
    if (!plan && (o->rank >= 0)) err = strdup("--rank/--ranks run a library on the GPU, not the "
                                              "reference evaluator");
    if (err == NULL) return true;
    fprintf(stderr, "ampc: %s: %s\n", o->model, err);
    free(err);
    return false;
}

int ampc_cli_run(const ampc_cli_options *o) {
    ampc_graph *g = NULL;
    ampc_module *mod = NULL;
    ampc_rt_artifact *lib = NULL;
    const ampc_rt_plan *plan = NULL;
    io_list li = {0}, lo = {0};
    char *err = NULL;
    if (!paths_ok(o)) return 2;
    if (kind_of_model(o->model) == KIND_LIBRARY) {
        if (o->reference) {
            fprintf(stderr, "ampc: --reference needs the model (.onnx or IR), not a library\n");
            return 2;
        }
        if (ampc_rt_load(o->model, &lib, &err) != AMPC_OK) {
            fprintf(stderr, "ampc: %s\n", err ? err : "cannot load the library");
            free(err);
            return 1;
        }
        plan = ampc_rt_artifact_plan(lib);
    } else {
        ampc_cli_options lo = *o;
        lo.bind_run_inputs = true;
        if (!(g = ampc_cli_load_model(&lo))) return 1;
        bool built = o->reference ? optimize(g, o, true, false, NULL)
                                  : (mod = compile_gpu(g, o, NULL)) != NULL;
        if (!built) {
            ampc_graph_destroy(g);
            return 1;
        }
        if (mod) plan = ampc_module_plan(mod);
    }
    if (plan) {
        io_from_plan(&li, plan->inputs, plan->n_inputs);
        io_from_plan(&lo, plan->outputs, plan->n_outputs);
    } else {
        io_from_graph(&li, g->inputs, g->n_inputs);
        io_from_graph(&lo, g->outputs, g->n_outputs);
    }
    ampc_cli_rank rk = {0};
    if (!plan_ranks(o, plan, &rk)) {
        io_free(&li);
        io_free(&lo);
        ampc_module_destroy(mod);
        ampc_rt_unload(lib);
        ampc_graph_destroy(g);
        return 1;
    }
    ampc_tensor *in = ampc_xcalloc((size_t)li.n + 1, sizeof *in);
    ampc_tensor *out = ampc_xcalloc((size_t)lo.n + 1, sizeof *out);
    /* a model compiled here from ONNX had the --input values it needed bound at import */
    bool ok = read_inputs(o, &li, in, g && kind_of_model(o->model) == KIND_ONNX);
    for (int32_t i = 0; ok && plan && i < lo.n; i++) /* the reference evaluator allocates its own */
        ok = ampc_cli_host_tensor("output", lo.names[i], lo.dtypes[i], &lo.shapes[i], &out[i]);
    if (ok && !plan) {
        ampc_tensor *ref = ampc_xcalloc((size_t)lo.n + 1, sizeof *ref);
        ok = ampc_graph_evaluate(g, in, li.n, ref, lo.n) == AMPC_OK;
        if (!ok) fprintf(stderr, "ampc: %s: evaluation failed:\n%s\n", o->model, ampc_graph_errors(g));
        for (int32_t i = 0; ok && i < lo.n; i++) out[i] = ref[i];
        free(ref);
    } else if (ok) {
        ok = run_plan(plan, o, &rk, in, li.n, out, lo.n);
    }
    if (ok && rk.on && rk.rank != 0) { /* the outputs are the same on every rank: 0 shows them */
        printf("rank %d of %d (device %d, %s): ran; outputs shown by rank 0\n", rk.rank,
               rk.ranks, rk.device, rk.source);
    } else if (ok) {
        if (rk.on)
            printf("rank 0 of %d (device %d, %s), one process per GPU\n", rk.ranks, rk.device,
                   rk.source);
        printf("outputs (%s):\n", plan ? "GPU" : "reference evaluator");
        for (int32_t i = 0; i < lo.n; i++) print_tensor_head(lo.names[i], &out[i]);
        ok = save_outputs(o, &lo, out);
    }
    for (int32_t i = 0; i < li.n; i++) ampc_tensor_free(&in[i]);
    for (int32_t i = 0; i < lo.n; i++) ampc_tensor_free(&out[i]);
    free(in);
    free(out);
    io_free(&li);
    io_free(&lo);
    ampc_module_destroy(mod);
    ampc_rt_unload(lib);
    ampc_graph_destroy(g);
    return ok ? 0 : 1;
}
