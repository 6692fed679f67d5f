/*
 * host_c.c — the C side of a generated library: the plan as static C data, the entry point
 * ampc_rt_load finds, and the model.h functions (<name>_create / _run / _device_bytes / _destroy),
 * plus model.h itself. artifact.c compiles what this writes; `ampc --emit c` prints it.
 *
 * The PTX, cubins and weights are not in the C: they are assembler symbols (ampc_blob_*) that
 * artifact.c defines with .incbin, hidden so that two libraries load side by side.
 */
#include "compiler/artifact.h"

#include "compiler/module.h"
#include "ir/base.h"

#include <math.h>
#include <string.h>

/* A C string literal; bytes outside printable ASCII and the quote characters are escaped. */
static void put_str(ampc_strbuf *sb, const char *s) {
    ampc_sb_putc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') ampc_sb_printf(sb, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f || *p == '?') ampc_sb_printf(sb, "\\%03o", *p);
        else ampc_sb_putc(sb, (char)*p);
    }
    ampc_sb_putc(sb, '"');
}

/* An exact f32 literal (hexadecimal), or the builtin for infinities and NaN. */
static void put_f32(ampc_strbuf *sb, float f) {
    if (isnan(f)) ampc_sb_puts(sb, "__builtin_nanf(\"\")");
    else if (isinf(f)) ampc_sb_puts(sb, f > 0 ? "__builtin_inff()" : "-__builtin_inff()");
    else ampc_sb_printf(sb, "%af", (double)f);
}

static void put_ref(ampc_strbuf *sb, const ampc_rt_ref *r) {
    ampc_sb_printf(sb, "{%u, %lld, %lld}", r->space, (long long)r->offset, (long long)r->bytes);
}

static void put_i64s(ampc_strbuf *sb, const int64_t *v, int n) {
    ampc_sb_putc(sb, '{');
    for (int i = 0; i < n; i++) ampc_sb_printf(sb, "%s%lld", i ? ", " : "", (long long)v[i]);
    ampc_sb_putc(sb, '}');
}

/* {dims}: only the rank's dims (a scalar's is {0}: the dims past the rank are not part of the
 * shape and need not be initialised, so they never reach the generated code). */
static void put_dims(ampc_strbuf *sb, const ampc_shape *s) {
    if (s->rank) put_i64s(sb, s->dims, s->rank);
    else ampc_sb_puts(sb, "{0}");
}

static void put_shape(ampc_strbuf *sb, const ampc_shape *s) {
    ampc_sb_printf(sb, "{%d, ", s->rank);
    put_dims(sb, s);
    ampc_sb_putc(sb, '}');
}

/* The fields of a kernel launch after ".kernel = " (or ".own_kernel = "); its arguments are
 * the array <tag><args>_<step> (put_kernel_args). */
static void put_kernel(ampc_strbuf *sb, const char *tag, const char *args, int32_t step,
                       const ampc_rt_kernel *k) {
    ampc_sb_printf(sb, "{.unit = %d, .name = ", k->unit);
    put_str(sb, k->name);
    ampc_sb_printf(sb, ", .grid = {%u, %u, %u}, .block = {%u, %u, %u}, .smem = %u, "
                       ".n_args = %d, .args = ",
                   k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2],
                   k->smem, k->n_args);
    if (k->n_args) ampc_sb_printf(sb, "%s%s_%d}", tag, args, step);
    else ampc_sb_puts(sb, "NULL}");
}

static void put_gemm(ampc_strbuf *sb, const char *tag, int32_t step, const ampc_rt_gemm *g) {
    ampc_sb_printf(sb, ".gemm = {.m = %lld, .n = %lld, .k = %lld, .batch = %lld, .trans_a = %d, "
                       ".trans_b = %d,\n        .lda = %lld, .ldb = %lld, .ldc = %lld, .ldd = %lld, "
                       ".stride_a = %lld, .stride_b = %lld, .stride_c = %lld, .stride_d = %lld,\n"
                       "        .dtype_ab = %d, .dtype_cd = %d, .dtype_bias = %d, .math = %u, "
                       ".epilogue = %u, .sparse24 = %u, .alpha = ",
                   (long long)g->m, (long long)g->n, (long long)g->k, (long long)g->batch,
                   g->trans_a, g->trans_b, (long long)g->lda, (long long)g->ldb,
                   (long long)g->ldc, (long long)g->ldd, (long long)g->stride_a,
                   (long long)g->stride_b, (long long)g->stride_c, (long long)g->stride_d,
                   g->dtype_ab, g->dtype_cd, g->dtype_bias, g->math, g->epilogue, g->sparse24);
    put_f32(sb, g->alpha);
    ampc_sb_puts(sb, ", .beta = ");
    put_f32(sb, g->beta);
    const ampc_rt_ref *refs[5] = {&g->a, &g->b, &g->c, &g->d, &g->bias};
    static const char *const names[5] = {"a", "b", "c", "d", "bias"};
    for (int i = 0; i < 5; i++) {
        ampc_sb_printf(sb, "%s.%s = ", i ? ", " : ",\n        ", names[i]);
        put_ref(sb, refs[i]);
    }
    if (g->own_kernel.name) {
        ampc_sb_puts(sb, ",\n        .own_kernel = ");
        put_kernel(sb, tag, "spargs", step, &g->own_kernel);
    }
    ampc_sb_putc(sb, '}');
}

static void put_conv(ampc_strbuf *sb, const ampc_rt_conv *c) {
    ampc_sb_printf(sb, ".conv = {.spatial = %d, .n = %lld, .c_in = %lld, .c_out = %lld, "
                       ".groups = %lld,\n        .in = ",
                   c->spatial, (long long)c->n, (long long)c->c_in, (long long)c->c_out,
                   (long long)c->groups);
    const int64_t *arrays[7] = {c->in, c->out, c->kernel, c->stride, c->dilation, c->pad_begin,
                                c->pad_end};
    static const char *const names[7] = {"in", "out", "kernel", "stride", "dilation",
                                         "pad_begin", "pad_end"};
    for (int i = 0; i < 7; i++) {
        if (i) ampc_sb_printf(sb, ", .%s = ", names[i]);
        put_i64s(sb, arrays[i], 3);
    }
    ampc_sb_printf(sb, ",\n        .dtype = %d, .math = %u, .relu = %d, .has_bias = %d, "
                       ".has_residual = %d, .transpose = %d, .channels_last = %d, .output_padding = ",
                   c->dtype, c->math, c->relu, c->has_bias, c->has_residual, c->transpose,
                   c->channels_last);
    put_i64s(sb, c->output_padding, 3);
    const ampc_rt_ref *refs[5] = {&c->x, &c->w, &c->bias, &c->z, &c->y};
    static const char *const rnames[5] = {"x", "w", "bias", "z", "y"};
    for (int i = 0; i < 5; i++) {
        ampc_sb_printf(sb, "%s.%s = ", i ? ", " : ",\n        ", rnames[i]);
        put_ref(sb, refs[i]);
    }
    ampc_sb_putc(sb, '}');
}

/* A rank's arrays are named with a prefix ("r1_"); rank 0's (the model's plan) with none. */
static void put_kernel_args(ampc_strbuf *sb, const char *tag, const char *args, int32_t step,
                            const ampc_rt_kernel *k) {
    if (!k->n_args) return;
    ampc_sb_printf(sb, "static const ampc_rt_arg %s%s_%d[] = {", tag, args, step);
    for (int32_t i = 0; i < k->n_args; i++) {
        const ampc_rt_arg *a = &k->args[i];
        ampc_sb_puts(sb, i ? ",\n    " : "\n    ");
        switch (a->kind) {
        case AMPC_RT_ARG_PTR: ampc_sb_puts(sb, "{.kind = AMPC_RT_ARG_PTR, .ref = "); put_ref(sb, &a->ref); break;
        case AMPC_RT_ARG_I32: ampc_sb_printf(sb, "{.kind = AMPC_RT_ARG_I32, .i32 = %d", a->i32); break;
        case AMPC_RT_ARG_I64: ampc_sb_printf(sb, "{.kind = AMPC_RT_ARG_I64, .i64 = %lldLL", (long long)a->i64); break;
        default: ampc_sb_puts(sb, "{.kind = AMPC_RT_ARG_F32, .f32 = "); put_f32(sb, a->f32); break;
        }
        ampc_sb_putc(sb, '}');
    }
    ampc_sb_puts(sb, "};\n");
}

/* ---- one step, by its kind's serialiser (runtime/steps.def) ------------------------------- */

/* ".<member> = {.<field> = <ref>, ..." for the refs steps.def lists for s's kind (unclosed). */
static void put_member_refs(ampc_strbuf *sb, const ampc_rt_step *s) {
    static const char *const members[] = {
#define AMPC_STEP(KIND, member, type, provider, work, serialise, name) [AMPC_RT_STEP_##KIND] = #member,
#include "runtime/steps.def"
    };
    ampc_sb_printf(sb, ".%s = {", members[s->kind]);
    const char *sep = "";
#define AMPC_STEP_REF(KIND, member, field, where)                                                  \
    if (s->kind == AMPC_RT_STEP_##KIND) {                                                          \
        ampc_sb_printf(sb, "%s." #field " = ", sep);                                               \
        put_ref(sb, &s->member.field);                                                             \
        sep = ", ";                                                                                \
    }
#include "runtime/steps.def"
}

static void put_step_kernel(ampc_strbuf *sb, const char *tag, int32_t i, const ampc_rt_step *s) {
    ampc_sb_puts(sb, ".kernel = ");
    put_kernel(sb, tag, "args", i, &s->kernel);
}

static void put_step_gemm(ampc_strbuf *sb, const char *tag, int32_t i, const ampc_rt_step *s) {
    put_gemm(sb, tag, i, &s->gemm);
}

static void put_step_conv(ampc_strbuf *sb, const char *tag, int32_t i, const ampc_rt_step *s) {
    (void)tag, (void)i;
    put_conv(sb, &s->conv);
}

static void put_step_refs(ampc_strbuf *sb, const char *tag, int32_t i, const ampc_rt_step *s) {
    (void)tag, (void)i;
    put_member_refs(sb, s);
    ampc_sb_putc(sb, '}');
}

static void put_step_allreduce(ampc_strbuf *sb, const char *tag, int32_t i, const ampc_rt_step *s) {
    (void)tag, (void)i;
    put_member_refs(sb, s);
    ampc_sb_printf(sb, ", .dtype = %d, .count = %lld}", s->allreduce.dtype,
                   (long long)s->allreduce.count);
}

static void put_step_peer(ampc_strbuf *sb, const char *tag, int32_t i, const ampc_rt_step *s) {
    (void)tag, (void)i;
    put_member_refs(sb, s);
    ampc_sb_printf(sb, ", .from = %d}", s->peer.from);
}

static void put_step_branch(ampc_strbuf *sb, const char *tag, int32_t i, const ampc_rt_step *s) {
    (void)tag, (void)i;
    put_member_refs(sb, s);
    ampc_sb_printf(sb, ", .target = %d, .jump_if_set = %u, .limit = %lldLL}", s->branch.target,
                   s->branch.jump_if_set, (long long)s->branch.limit);
}

static void put_step(ampc_strbuf *sb, const char *tag, int32_t i, const ampc_rt_step *s) {
    static void (*const put[])(ampc_strbuf *, const char *, int32_t, const ampc_rt_step *) = {
#define AMPC_STEP(KIND, member, type, provider, work, serialise, name) \
    [AMPC_RT_STEP_##KIND] = put_step_##serialise,
#include "runtime/steps.def"
    };
    AMPC_ASSERT(s->kind < AMPC_RT_STEP_KINDS); /* code generation makes no other */
    ampc_sb_printf(sb, "    /* %d */ {.kind = %u, .label = ", i, s->kind);
    put_str(sb, s->label);
    ampc_sb_puts(sb, ",\n        ");
    put[s->kind](sb, tag, i, s);
    ampc_sb_puts(sb, "},\n");
}

static void put_ios(ampc_strbuf *sb, const char *var, const ampc_rt_io *io, int32_t n) {
    ampc_sb_printf(sb, "static const ampc_rt_io %s[] = {\n", var);
    for (int32_t i = 0; i < n; i++) {
        ampc_sb_puts(sb, "    {");
        put_str(sb, io[i].name);
        ampc_sb_printf(sb, ", %d, ", io[i].dtype);
        put_shape(sb, &io[i].shape);
        ampc_sb_puts(sb, ", ");
        put_ref(sb, &io[i].ref);
        ampc_sb_puts(sb, "},\n");
    }
    if (!n) ampc_sb_puts(sb, "    {0},\n");
    ampc_sb_puts(sb, "};\n");
}

/* The descriptors model.h declares: name, dtype code and name, rank, dims, bytes. */
static void put_infos(ampc_strbuf *sb, const char *name, const char *var, const ampc_rt_io *io,
                      int32_t n) {
    ampc_sb_printf(sb, "EXPORT const %s_tensor_info %s_%s[%d] = {\n", name, name, var, n ? n : 1);
    for (int32_t i = 0; i < n; i++) {
        ampc_sb_puts(sb, "    {");
        put_str(sb, io[i].name);
        ampc_sb_printf(sb, ", %d, ", io[i].dtype);
        put_str(sb, ampc_dtype_name(io[i].dtype));
        ampc_sb_printf(sb, ", %d, ", io[i].shape.rank);
        put_dims(sb, &io[i].shape);
        ampc_sb_printf(sb, ", %lld},\n", (long long)io[i].ref.bytes);
    }
    if (!n) ampc_sb_puts(sb, "    {0},\n");
    ampc_sb_puts(sb, "};\n");
}

/* The plan's weights: embedded (a symbol) or read at first use from the sidecar file next to
 * the library, mapped read-only. */
static void put_weights_loader(ampc_strbuf *sb, const ampc_artifact_layout *l) {
    if (!l->sidecar) {
        ampc_sb_puts(sb, "static ampc_status load_weights(char **err) {\n"
                         "    (void)err;\n    return AMPC_OK;\n}\n\n");
        return;
    }
    ampc_sb_puts(sb, "/* The weights live in a file next to this library; mapped on first use. */\n"
                     "static const char weights_file[] = ");
    put_str(sb, l->sidecar);
    ampc_sb_puts(sb,
        ";\nstatic pthread_once_t weights_once = PTHREAD_ONCE_INIT;\n"
        "static char weights_error[4600];\n\n"
        "static void map_weights(void) {\n"
        "    Dl_info info;\n"
        "    char path[4096];\n"
        "    const char *so = dladdr((void *)&plan, &info) && info.dli_fname ? info.dli_fname : \"\";\n"
        "    const char *slash = strrchr(so, '/');\n"
        "    snprintf(path, sizeof path, \"%.*s%s\", slash ? (int)(slash - so + 1) : 0, so, weights_file);\n"
        "    int fd = open(path, O_RDONLY | O_CLOEXEC);\n"
        "    struct stat st;\n"
        "    if (fd < 0 || fstat(fd, &st) != 0) {\n"
        "        snprintf(weights_error, sizeof weights_error, \"cannot open the weights file '%s' \"\n"
        "                 \"(it belongs next to the library): %s\", path, strerror(errno));\n"
        "    } else if ((int64_t)st.st_size != plan.weights_bytes) {\n"
        "        snprintf(weights_error, sizeof weights_error, \"the weights file '%s' has %lld bytes, \"\n"
        "                 \"the library expects %lld: it belongs to another build\", path,\n"
        "                 (long long)st.st_size, (long long)plan.weights_bytes);\n"
        "    } else {\n"
        "        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);\n"
        "        if (p == MAP_FAILED)\n"
        "            snprintf(weights_error, sizeof weights_error, \"cannot map '%s': %s\", path,\n"
        "                     strerror(errno));\n"
        "        else\n"
        "            plan.weights = p;\n"
        "    }\n"
        "    if (fd >= 0) close(fd);\n"
        "}\n\n"
        "static ampc_status load_weights(char **err) {\n"
        "    pthread_once(&weights_once, map_weights);\n"
        "    if (plan.weights) return AMPC_OK;\n"
        "    if (err) *err = strdup(weights_error);\n"
        "    return AMPC_E_IO;\n"
        "}\n\n");
}

/* A plan's steps (with their kernel arguments), inputs and outputs as static arrays: arguments
 * and steps named with `tag` ("", "r1_"), the io as <io>inputs, <io>outputs. */
static void put_plan_arrays(ampc_strbuf *sb, const char *tag, const char *io,
                            const ampc_rt_plan *p) {
    for (int32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].kind == AMPC_RT_STEP_KERNEL)
            put_kernel_args(sb, tag, "args", i, &p->steps[i].kernel);
        else if (p->steps[i].kind == AMPC_RT_STEP_GEMM && p->steps[i].gemm.own_kernel.name)
            put_kernel_args(sb, tag, "spargs", i, &p->steps[i].gemm.own_kernel);
    ampc_sb_printf(sb, "\nstatic const ampc_rt_step %ssteps[%d] = {\n", tag,
                   p->n_steps ? p->n_steps : 1);
    for (int32_t i = 0; i < p->n_steps; i++) put_step(sb, tag, i, &p->steps[i]);
    ampc_sb_puts(sb, "};\n\n");
    char var[64];
    snprintf(var, sizeof var, "%sinputs", io);
    put_ios(sb, var, p->inputs, p->n_inputs);
    snprintf(var, sizeof var, "%soutputs", io);
    put_ios(sb, var, p->outputs, p->n_outputs);
}

/* The fields of plan p after `open` ("static ampc_rt_plan plan = {"), naming the arrays of
 * put_plan_arrays, the weights symbol (NULL: none or a sidecar) and the ranks array (NULL:
 * none); the caller closes the brace. */
static void put_plan_struct(ampc_strbuf *sb, const char *open, const char *tag, const char *io,
                            const char *weights, const ampc_rt_plan *p, const char *ranks) {
    ampc_sb_printf(sb, "%s\n    .version = AMPC_RT_PLAN_VERSION,\n    .name = ", open);
    put_str(sb, p->name);
    ampc_sb_printf(sb, ",\n    .arena_bytes = %lld,\n    .weights = %s,\n    .weights_bytes = %lld,\n"
                       "    .n_units = %d, .n_images = %d, .n_steps = %d, .n_inputs = %d, .n_outputs = %d,\n"
                       "    .images = images, .steps = %ssteps, .inputs = %sinputs, .outputs = %soutputs,\n",
                   (long long)p->arena_bytes, p->weights_bytes && weights ? weights : "NULL",
                   (long long)p->weights_bytes, p->n_units, p->n_images, p->n_steps, p->n_inputs,
                   p->n_outputs, tag, io, io);
    if (p->n_ranks > 1)
        ampc_sb_printf(sb, "    .rank = %d, .n_ranks = %d, .ranks = %s,\n", p->rank, p->n_ranks,
                       ranks ? ranks : "NULL");
    if (p->split_batch) ampc_sb_puts(sb, "    .split_batch = 1,\n");
    if (p->micro_batches) ampc_sb_printf(sb, "    .micro_batches = %d,\n", p->micro_batches);
}

/* The ranks of a batch split: one steps array and one weights blob (the model's) for all of
 * them, and one pair of io arrays (one GPU's rows) besides the model's (the whole batch). */
static void put_batch_ranks(ampc_strbuf *sb, const ampc_rt_plan *p, const char *weights) {
    ampc_sb_puts(sb, "/* Every rank runs the same steps on its rows of the batch. */\n");
    put_ios(sb, "rank_inputs", p->ranks[0].inputs, p->ranks[0].n_inputs);
    put_ios(sb, "rank_outputs", p->ranks[0].outputs, p->ranks[0].n_outputs);
    ampc_sb_printf(sb, "\n/* The plan of every rank (GPU): rank r runs on device `device + r`, rows "
                       "[r B/%d, (r+1) B/%d) of the batch. */\n"
                       "static const ampc_rt_plan rank_plans[%d] = {\n",
                   p->n_ranks, p->n_ranks, p->n_ranks);
    for (int32_t r = 0; r < p->n_ranks; r++) {
        put_plan_struct(sb, "    {", "", "rank_", weights, &p->ranks[r], NULL);
        ampc_sb_puts(sb, "},\n");
    }
    ampc_sb_puts(sb, "};\n\n");
}

/* The library's math string (compiler/math.h) as a C string literal: the module's, then the
 * caller's note. */
static void put_math(ampc_strbuf *sb, const ampc_module *m, const ampc_artifact_layout *l) {
    ampc_strbuf text = {0};
    const char *note = l && l->math_note ? l->math_note : "";
    ampc_sb_printf(&text, "%s%s%s", ampc_module_math(m), *ampc_module_math(m) && *note ? "; " : "",
                   note);
    put_str(sb, text.data ? text.data : "");
    ampc_sb_free(&text);
}

char *ampc_artifact_host_c(const ampc_module *m, const char *name, const ampc_artifact_layout *l) {
    const ampc_rt_plan *p = &m->cg->plan;
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "/*\n * %s.c — generated by ampc %s: the host side of the library %s.so (its "
                        "plan, entry point\n * and C functions). Do not edit; regenerate with "
                        "`ampc MODEL -o %s.so` or read it with --emit c.\n */\n",
                   name, AMPC_VERSION_STRING, name, name);
    ampc_sb_printf(&sb, "#define _GNU_SOURCE\n#include \"%s.h\"\n\n#include \"ampc_runtime.h\"\n"
                        "#include \"runtime/plan.h\"\n\n#include <dlfcn.h>\n#include <errno.h>\n"
                        "#include <fcntl.h>\n#include <pthread.h>\n#include <stdio.h>\n"
                        "#include <stdlib.h>\n#include <string.h>\n#include <sys/mman.h>\n"
                        "#include <sys/stat.h>\n#include <unistd.h>\n\n"
                        "#define EXPORT __attribute__((visibility(\"default\")))\n\n",
                   name);
    for (int32_t i = 0; i < p->n_images; i++)
        ampc_sb_printf(&sb, "extern const unsigned char ampc_blob_image_%d[]; /* unit %d: %s_%d, %lld bytes */\n",
                       i, p->images[i].unit, p->images[i].kind == AMPC_RT_IMAGE_PTX ? "PTX compute" : "cubin sm",
                       p->images[i].sm, (long long)p->images[i].size);
    if (p->weights_bytes && !l->sidecar)
        ampc_sb_printf(&sb, "extern const unsigned char ampc_blob_weights[]; /* %lld bytes */\n",
                       (long long)p->weights_bytes);
    for (int32_t r = 1; r < p->n_ranks && !p->split_batch; r++)
        if (p->ranks[r].weights_bytes)
            ampc_sb_printf(&sb, "extern const unsigned char ampc_blob_weights_r%d[]; /* rank %d: "
                                "%lld bytes */\n", r, r, (long long)p->ranks[r].weights_bytes);
    ampc_sb_puts(&sb, "\n");
    put_plan_arrays(&sb, "", "plan_", p);
    for (int32_t r = 1; r < p->n_ranks && !p->split_batch; r++) {
        char tag[32];
        snprintf(tag, sizeof tag, "r%d_", r);
        ampc_sb_printf(&sb, "/* rank %d */\n", r);
        put_plan_arrays(&sb, tag, tag, &p->ranks[r]);
    }
    ampc_sb_puts(&sb, "static const ampc_rt_image images[] = {\n");
    for (int32_t i = 0; i < p->n_images; i++)
        ampc_sb_printf(&sb, "    {%d, %u, %d, ampc_blob_image_%d, %lld},\n", p->images[i].unit,
                       p->images[i].kind, p->images[i].sm, i, (long long)p->images[i].size);
    if (!p->n_images) ampc_sb_puts(&sb, "    {0},\n");
    ampc_sb_puts(&sb, "};\n\n");
    if (p->split_batch) {
        put_batch_ranks(&sb, p, "ampc_blob_weights");
    } else if (p->n_ranks > 1) {
        /* a pipeline in micro-batches: plan_inputs and plan_outputs are the caller's whole
         * tensors (the model's), rank 0's own io one micro-batch's */
        bool whole = p->micro_batches > 1;
        if (whole) {
            ampc_sb_puts(&sb, "/* rank 0's inputs and outputs: one micro-batch's rows. */\n");
            put_ios(&sb, "r0_inputs", p->ranks[0].inputs, p->ranks[0].n_inputs);
            put_ios(&sb, "r0_outputs", p->ranks[0].outputs, p->ranks[0].n_outputs);
        }
        ampc_sb_printf(&sb, "/* The plan of every rank (GPU): rank r runs on device `device + r`. */\n"
                            "static const ampc_rt_plan rank_plans[%d] = {\n", p->n_ranks);
        for (int32_t r = 0; r < p->n_ranks; r++) {
            char tag[32], weights[64];
            snprintf(tag, sizeof tag, "r%d_", r);
            snprintf(weights, sizeof weights, "ampc_blob_weights_r%d", r);
            put_plan_struct(&sb, "    {", r ? tag : "", r ? tag : whole ? "r0_" : "plan_",
                            r ? weights : "ampc_blob_weights", &p->ranks[r], NULL);
            ampc_sb_puts(&sb, "},\n");
        }
        ampc_sb_puts(&sb, "};\n\n");
    }
    put_plan_struct(&sb, "static ampc_rt_plan plan = {", "", "plan_",
                    l->sidecar ? NULL : "ampc_blob_weights", p,
                    p->n_ranks > 1 ? "rank_plans" : NULL);
    ampc_sb_puts(&sb, "};\n\n");
    put_weights_loader(&sb, l);
    ampc_sb_puts(&sb, "static ampc_status get_plan(const ampc_rt_plan **out, char **err) {\n"
                      "    if (err) *err = NULL;\n"
                      "    ampc_status st = load_weights(err);\n"
                      "    *out = st == AMPC_OK ? &plan : NULL;\n"
                      "    return st;\n}\n\n");
    ampc_sb_printf(&sb, "static const ampc_rt_artifact_entry entry = {\n"
                        "    AMPC_RT_ARTIFACT_ABI, AMPC_RT_PLAN_VERSION, sizeof(ampc_rt_plan), sizeof(ampc_rt_step),\n"
                        "    sizeof(ampc_rt_io), sizeof(ampc_rt_image), \"%s\", \"%s\", get_plan,\n    ",
                   name, AMPC_VERSION_STRING);
    put_math(&sb, m, l);
    ampc_sb_puts(&sb, ",\n};\n\n"
                      "EXPORT const ampc_rt_artifact_entry *ampc_artifact_v1(void) { return &entry; }\n\n");
    put_infos(&sb, name, "inputs", p->inputs, p->n_inputs);
    put_infos(&sb, name, "outputs", p->outputs, p->n_outputs);
    ampc_sb_printf(&sb,
        "\nstatic int fail(char **err, int status, const char *msg) {\n"
        "    if (err) *err = strdup(msg);\n"
        "    return status;\n}\n\n"
        "EXPORT void %1$s_options_init(struct ampc_rt_options *options) {\n"
        "    ampc_rt_options_init(options);\n}\n\n"
        "EXPORT int %1$s_create_opts(int device, const struct ampc_rt_options *options,\n"
        "                            %1$s_model **model, char **err) {\n"
        "    if (err) *err = NULL;\n"
        "    if (!model) return fail(err, AMPC_E_INVALID_ARG, \"%1$s_create: model is NULL\");\n"
        "    *model = NULL;\n"
        "    const ampc_rt_plan *p = NULL;\n"
        "    ampc_status st = get_plan(&p, err);\n"
        "    if (st != AMPC_OK) return st;\n"
        "    ampc_rt_model *m = NULL;\n"
        "    st = ampc_rt_model_create_opts(p, device, options, &m, err);\n"
        "    *model = (%1$s_model *)m;\n"
        "    return st;\n}\n\n"
        "EXPORT int %1$s_create(int device, %1$s_model **model, char **err) {\n"
        "    return %1$s_create_opts(device, NULL, model, err);\n}\n\n"
        "EXPORT int %1$s_nccl_id_create(%1$s_nccl_id *id, char **err) {\n"
        "    return ampc_rt_nccl_id_create((ampc_rt_nccl_id *)id, err);\n}\n\n"
        "EXPORT int %1$s_create_rank(int device, int rank, int n_ranks, const %1$s_nccl_id *id,\n"
        "                            %1$s_model **model, char **err) {\n"
        "    if (err) *err = NULL;\n"
        "    if (!model) return fail(err, AMPC_E_INVALID_ARG, \"%1$s_create_rank: model is NULL\");\n"
        "    *model = NULL;\n"
        "    const ampc_rt_plan *p = NULL;\n"
        "    ampc_status st = get_plan(&p, err);\n"
        "    if (st != AMPC_OK) return st;\n"
        "    ampc_rt_model *m = NULL;\n"
        "    st = ampc_rt_model_create_rank(p, device, rank, n_ranks, (const ampc_rt_nccl_id *)id, &m, err);\n"
        "    *model = (%1$s_model *)m;\n"
        "    return st;\n}\n\n"
        "static int submit(%1$s_model *model, const void *const *inputs, void *const *outputs,\n"
        "                  void *stream, int enqueue, char **err) {\n"
        "    if (err) *err = NULL;\n"
        "    if ((!inputs && %2$d) || (!outputs && %3$d))\n"
        "        return fail(err, AMPC_E_INVALID_ARG, \"%1$s_run: inputs or outputs is NULL\");\n"
        "    ampc_tensor in[%4$d], out[%5$d];\n"
        "    for (int i = 0; i < %2$d; i++)\n"
        "        in[i] = (ampc_tensor){plan_inputs[i].dtype, plan_inputs[i].shape, (void *)inputs[i]};\n"
        "    for (int i = 0; i < %3$d; i++)\n"
        "        out[i] = (ampc_tensor){plan_outputs[i].dtype, plan_outputs[i].shape, outputs[i]};\n"
        "    return enqueue ? ampc_rt_model_enqueue((ampc_rt_model *)model, in, %2$d, out, %3$d, stream, err)\n"
        "                   : ampc_rt_model_run((ampc_rt_model *)model, in, %2$d, out, %3$d, stream, err);\n}\n\n"
        "EXPORT int %1$s_run(%1$s_model *model, const void *const *inputs, void *const *outputs,\n"
        "                    void *stream, char **err) {\n"
        "    return submit(model, inputs, outputs, stream, 0, err);\n}\n\n"
        "EXPORT int %1$s_enqueue(%1$s_model *model, const void *const *inputs, void *const *outputs,\n"
        "                        void *stream, char **err) {\n"
        "    return submit(model, inputs, outputs, stream, 1, err);\n}\n\n"
        "EXPORT int64_t %1$s_device_bytes(const %1$s_model *model) {\n"
        "    return ampc_rt_model_device_bytes((const ampc_rt_model *)model);\n}\n\n"
        "EXPORT void %1$s_destroy(%1$s_model *model) { ampc_rt_model_destroy((ampc_rt_model *)model); }\n",
        name, p->n_inputs, p->n_outputs, p->n_inputs ? p->n_inputs : 1,
        p->n_outputs ? p->n_outputs : 1);
    return ampc_sb_take(&sb);
}

char *ampc_artifact_header(const ampc_module *m, const char *name, const char *source) {
    const ampc_rt_plan *p = &m->cg->plan;
    ampc_strbuf sb = {0}, from = {0};
    if (source) { /* the model's path: any bytes a file name may hold */
        ampc_sb_puts(&from, " from ");
        ampc_sb_put_comment_text(&from, source);
    }
    ampc_sb_printf(&sb,
        "/*\n * %1$s.h — generated by ampc %2$s%3$s. Link %1$s.so; it needs the CUDA "
        "runtime (libcudart)\n * and, when the model uses them, cuBLASLt and cuDNN, found by "
        "their sonames at run time.\n *\n"
        " *     %1$s_model *m;\n"
        " *     char *err;\n"
        " *     if (%1$s_create(0, &m, &err) != 0) { fprintf(stderr, \"%%s\\n\", err); free(err); return 1; }\n"
        " *     const void *in[%1$s_N_INPUTS] = {...};   // host or device pointers, one per input\n"
        " *     void *out[%1$s_N_OUTPUTS] = {...};\n"
        " *     if (%1$s_run(m, in, out, NULL, &err) != 0) { ... }\n"
        " *     %1$s_destroy(m);\n *\n"
        " * Every function returns 0 on success, else an ampc_status code (ampc.h): 1 invalid "
        "argument,\n * 6 unsupported (a GPU below compute capability 8.0), 10 I/O (the weights "
        "file), 11 out of\n * memory, 12 no CUDA device (an ordinary error on a machine without a "
        "GPU or driver), 13 a\n * CUDA / cuBLASLt / cuDNN failure; *err (when err is not NULL) then "
        "holds a malloc'ed message\n * the caller frees, naming what failed; on success *err is "
        "NULL.\n *\n"
        " * Threads: a model is used by one thread at a time (calls on one model must not overlap;\n"
        " * use one model per thread, or a lock); different models run concurrently.\n */\n",
        name, AMPC_VERSION_STRING, from.data ? from.data : "");
    ampc_sb_free(&from);
    ampc_sb_printf(&sb,
        "#ifndef %1$s_AMPC_MODEL_H\n#define %1$s_AMPC_MODEL_H\n\n#include <stdint.h>\n\n"
        "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
        "/* A loaded model: its kernels, weights and one device arena on one GPU. */\n"
        "typedef struct %1$s_model %1$s_model;\n\n"
        "/* An input or output: exactly this dtype and shape, dense and row-major. */\n"
        "typedef struct %1$s_tensor_info {\n"
        "    const char *name;\n"
        "    int32_t dtype;          /* ampc_dtype code (ampc.h) */\n"
        "    const char *dtype_name; /* \"f32\", \"f16\", \"i64\"... */\n"
        "    int32_t rank;\n"
        "    int64_t dims[%2$d];\n"
        "    int64_t bytes;          /* what a buffer for it must hold */\n"
        "} %1$s_tensor_info;\n\n",
        name, AMPC_MAX_RANK);
    ampc_sb_printf(&sb, "#define %s_N_INPUTS %d\n#define %s_N_OUTPUTS %d\n", name, p->n_inputs,
                   name, p->n_outputs);
    if (p->split_batch)
        ampc_sb_printf(&sb, "/* GPUs the model runs on: rank r on CUDA device `device + r`, rows "
                            "[r B/%d, (r+1) B/%d)\n * of every input and output (the batch B is "
                            "dim 0; data parallelism, no NCCL). */\n", p->n_ranks, p->n_ranks);
    else if (p->micro_batches)
        ampc_sb_printf(&sb, "/* GPUs the model runs on: stage s of the pipeline on CUDA device "
                            "`device + s`, the batch\n * in %d micro-batches (peer copies between "
                            "the GPUs, no NCCL). */\n", p->micro_batches);
    else
        ampc_sb_puts(&sb, "/* GPUs the model runs on: rank r on CUDA device `device + r` (NCCL when "
                          "more than one). */\n");
    ampc_sb_printf(&sb, "#define %s_GPUS %d\n", name, p->n_ranks > 1 ? p->n_ranks : 1);
    ampc_sb_printf(&sb, "/* Device memory: the arena (activations) and the weights, in bytes. */\n"
                        "#define %s_ARENA_BYTES %lldLL\n#define %s_WEIGHTS_BYTES %lldLL\n\n",
                   name, (long long)p->arena_bytes, name, (long long)p->weights_bytes);
    for (int pass = 0; pass < 2; pass++) {
        const ampc_rt_io *io = pass ? p->outputs : p->inputs;
        int32_t n = pass ? p->n_outputs : p->n_inputs;
        for (int32_t i = 0; i < n; i++) {
            char s[AMPC_SHAPE_STR_MAX];
            ampc_sb_printf(&sb, "/* %s %d: '", pass ? "output" : "input", i);
            ampc_sb_put_comment_text(&sb, io[i].name);
            ampc_sb_printf(&sb, "' %s%s, %lld bytes */\n", ampc_dtype_name(io[i].dtype),
                           ampc_shape_str(&io[i].shape, s, sizeof s), (long long)io[i].ref.bytes);
        }
    }
    ampc_sb_printf(&sb,
        "extern const %1$s_tensor_info %1$s_inputs[], %1$s_outputs[];\n\n"
        "/* Loads the model onto CUDA device `device` (0-based): images, weights, arena, library\n"
        " * plans; a model of %1$s_GPUS > 1 onto devices `device` to `device + %1$s_GPUS - 1`, one\n"
        " * NCCL communicator each (12 with a message naming the counts when fewer are visible).\n"
        " * On failure *model is NULL. */\n"
        "int %1$s_create(int device, %1$s_model **model, char **err);\n\n"
        "/* The same with the runtime's options (ampc_runtime.h's ampc_rt_options: CUDA graphs, zero-copy\n"
        " * I/O, GEMM and convolution choices, what the log is told): %1$s_options_init fills the\n"
        " * defaults and the AMPC_* environment's overrides, the program changes fields, and\n"
        " * %1$s_create_opts takes them (NULL: the defaults). %1$s_create reads the environment. */\n"
        "struct ampc_rt_options;\n"
        "void %1$s_options_init(struct ampc_rt_options *options);\n"
        "int %1$s_create_opts(int device, const struct ampc_rt_options *options, %1$s_model **model,\n"
        "                     char **err);\n\n"
        "/* One process per GPU (%1$s_GPUS > 1; docs/multi-gpu.md): each process loads one rank on "
        "one\n * device. Rank 0 makes the group's NCCL id with %1$s_nccl_id_create and hands the bytes "
        "to every other\n * process (MPI_Bcast...); each then calls %1$s_create_rank with its "
        "rank, n_ranks =\n * %1$s_GPUS and that id, and all make the same runs in the same "
        "order. Inputs and outputs are\n * this process's; the outputs are the same on every "
        "rank. Creation waits for every rank (at\n * most AMPC_NCCL_TIMEOUT_S seconds, default "
        "300); 1 for a rank out of range, an n_ranks\n * other than %1$s_GPUS or an id of zeros. "
        "A one-GPU model accepts rank 0 of 1 (id unused). */\n"
        "typedef struct %1$s_nccl_id {\n    char bytes[128];\n} %1$s_nccl_id;\n"
        "int %1$s_nccl_id_create(%1$s_nccl_id *id, char **err);\n"
        "int %1$s_create_rank(int device, int rank, int n_ranks, const %1$s_nccl_id *id,\n"
        "                     %1$s_model **model, char **err);\n\n"
        "/* Runs the model: inputs[i] points at input i's bytes, outputs[i] at a buffer of output "
        "i's\n * bytes, host (pageable or pinned) or device memory of the model's device. `stream` "
        "is a\n * cudaStream_t or NULL (the model's own). Returns when the outputs are complete. "
        "Inputs are\n * checked before anything is copied. The first run captures a CUDA graph; "
        "later runs replay it. */\n"
        "int %1$s_run(%1$s_model *model, const void *const *inputs, void *const *outputs, void "
        "*stream,\n          char **err);\n\n"
        "/* As %1$s_run, but returns once the work is enqueued on `stream`: the outputs are complete "
        "when\n * the stream gets there, and the buffers must stay valid until then. Enqueue a "
        "model on one\n * stream only. Errors inside kernels show at the next call that "
        "synchronises. NULL is the model's own stream; cudaStreamLegacy orders with the\n * legacy default stream. */\n"
        "int %1$s_enqueue(%1$s_model *model, const void *const *inputs, void *const *outputs, "
        "void *stream,\n              char **err);\n\n"
        "/* Device memory the model holds, in bytes, on all its GPUs together: weights, arena and "
        "the\n * workspaces of the libraries its steps run on (cuBLASLt, cuDNN), as allocated at "
        "creation;\n * at least %1$s_ARENA_BYTES + %1$s_WEIGHTS_BYTES. 0 for NULL. */\n"
        "int64_t %1$s_device_bytes(const %1$s_model *model);\n\n"
        "/* Frees the model (NULL is fine). */\n"
        "void %1$s_destroy(%1$s_model *model);\n\n"
        "#ifdef __cplusplus\n}\n#endif\n#endif\n",
        name);
    return ampc_sb_take(&sb);
}
