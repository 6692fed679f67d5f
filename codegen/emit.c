/*
 * emit.c — the kernel emitter: a string builder with indentation scopes, a parameter list that
 * records each pointer argument's place in the memory plan, deterministic local names, and the
 * launch step each finished kernel becomes.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const ctypes[AMPC_DTYPE_COUNT] = {
    [AMPC_DTYPE_F32] = "float",          [AMPC_DTYPE_F16] = "__half",
    [AMPC_DTYPE_BF16] = "__nv_bfloat16", [AMPC_DTYPE_F64] = "double",
    [AMPC_DTYPE_I64] = "long long",      [AMPC_DTYPE_I32] = "int",
    [AMPC_DTYPE_I16] = "short",          [AMPC_DTYPE_I8] = "signed char",
    [AMPC_DTYPE_U64] = "unsigned long long", [AMPC_DTYPE_U32] = "unsigned int",
    [AMPC_DTYPE_U16] = "unsigned short", [AMPC_DTYPE_U8] = "unsigned char",
    [AMPC_DTYPE_BOOL] = "bool",
};

const char *ampc_cg_ctype(ampc_dtype t) {
    AMPC_ASSERT(t > AMPC_DTYPE_UNDEFINED && t < AMPC_DTYPE_COUNT);
    return ctypes[t];
}

const char *ampc_cg_compute_type(ampc_dtype t) {
    if (t == AMPC_DTYPE_F64) return "double";
    if (ampc_dtype_is_float(t)) return "float";
    if (t == AMPC_DTYPE_BOOL) return "bool";
    return ampc_dtype_is_signed(t) ? "long long" : "unsigned long long";
}

static char *keep_name(ampc_cg_kernel *k, char *s) {
    k->names = ampc_xrealloc(k->names, (size_t)(k->n_names + 1) * sizeof *k->names);
    k->names[k->n_names++] = s;
    return s;
}

ampc_cg_kernel *ampc_cg_kernel_begin(ampc_cg *cg, const ampc_node *n, const char *what) {
    ampc_cg_kernel *k = ampc_xcalloc(1, sizeof *k);
    k->cg = cg;
    k->node = n;
    snprintf(k->name, sizeof k->name, "k%d_%s", cg->n_kernels, what);
    for (char *p = k->name; *p; p++) { /* lower case, and '_' for anything odd */
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
        else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))) *p = '_';
    }
    k->indent = 1;
    ampc_cg_kernel_covers(k, n);
    cg->n_kernels++; /* reserve the index now so names stay in emission order */
    return k;
}

void ampc_cg_kernel_covers(ampc_cg_kernel *k, const ampc_node *n) {
    if (k->covers.len) ampc_sb_puts(&k->covers, ", ");
    ampc_sb_printf(&k->covers, "%s '%s'", ampc_op_get(n->op)->onnx, n->name);
    /* the node's name is model text: escaped (and cut short) in the comment */
    if (k->covers_comment.len) ampc_sb_puts(&k->covers_comment, ", ");
    ampc_sb_printf(&k->covers_comment, "%s '", ampc_op_get(n->op)->onnx);
    ampc_sb_put_comment_text(&k->covers_comment, n->name);
    ampc_sb_putc(&k->covers_comment, '\'');
}

/* Adds an argument slot (zeroed) and the parameter's declaration (decl, or decl_restrict when k's
 * pointers are __restrict__) to k's parameter lists. */
static ampc_rt_arg *add_param(ampc_cg_kernel *k, const char *decl, const char *decl_restrict,
                              bool written) {
    if (k->n_args == k->cap_args) {
        k->cap_args = k->cap_args ? k->cap_args * 2 : 8;
        k->args = ampc_xrealloc(k->args, (size_t)k->cap_args * sizeof *k->args);
        k->written = ampc_xrealloc(k->written, (size_t)k->cap_args * sizeof *k->written);
    }
    k->written[k->n_args] = written;
    ampc_rt_arg *a = &k->args[k->n_args++];
    memset(a, 0, sizeof *a);
    if (k->params.len) ampc_sb_puts(&k->params, ", ");
    ampc_sb_puts(&k->params, decl);
    if (k->restrict_ptrs) {
        if (k->params_restrict.len) ampc_sb_puts(&k->params_restrict, ", ");
        ampc_sb_puts(&k->params_restrict, decl_restrict);
    }
    return a;
}

const char *ampc_cg_param_ref(ampc_cg_kernel *k, ampc_rt_ref ref, const char *ctype, bool written) {
    ampc_strbuf name = {0}, decl = {0}, decl_r = {0};
    ampc_sb_printf(&name, "p%d", k->n_args);
    ampc_sb_printf(&decl, "%s%s *%s", written ? "" : "const ", ctype, name.data);
    ampc_sb_printf(&decl_r, "%s%s *__restrict__ %s", written ? "" : "const ", ctype, name.data);
    ampc_rt_arg *a = add_param(k, decl.data, decl_r.data, written);
    a->kind = AMPC_RT_ARG_PTR;
    a->ref = ref;
    ampc_sb_free(&decl);
    ampc_sb_free(&decl_r);
    return keep_name(k, ampc_sb_take(&name));
}

const char *ampc_cg_kernel_repeat(ampc_cg_kernel *k, int32_t count) {
    AMPC_ASSERT(count >= 1 && k->repeat == 0);
    k->repeat = count;
    ampc_rt_arg *a = add_param(k, "const int rep", "const int rep", false);
    a->kind = AMPC_RT_ARG_I32;
    a->i32 = 0;
    return "rep";
}

const char *ampc_cg_param(ampc_cg_kernel *k, const ampc_value *v, bool written) {
    return ampc_cg_param_ref(k, ampc_cg_ref(k->cg, v), ampc_cg_ctype(v->dtype), written);
}

static void vline(ampc_cg_kernel *k, const char *suffix, const char *fmt, va_list ap) {
    for (int32_t i = 0; i < k->indent; i++) ampc_sb_puts(&k->body, "    ");
    ampc_sb_vprintf(&k->body, fmt, ap);
    ampc_sb_puts(&k->body, suffix);
}

void ampc_cg_line(ampc_cg_kernel *k, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vline(k, "\n", fmt, ap);
    va_end(ap);
}

void ampc_cg_open(ampc_cg_kernel *k, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vline(k, " {\n", fmt, ap);
    va_end(ap);
    k->indent++;
}

void ampc_cg_close(ampc_cg_kernel *k) { ampc_cg_close_with(k, "}"); }

void ampc_cg_close_with(ampc_cg_kernel *k, const char *end) {
    AMPC_ASSERT(k->indent > 1);
    k->indent--;
    ampc_cg_line(k, "%s", end);
}

const char *ampc_cg_local(ampc_cg_kernel *k, const char *stem) {
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%s%d", stem, k->n_locals++);
    return keep_name(k, ampc_sb_take(&sb));
}

void ampc_cg_grid_loop(ampc_cg_kernel *k, int64_t n) {
    ampc_cg_open(k, "for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < %lldLL; "
                    "i += (long long)gridDim.x * blockDim.x)",
                 (long long)n);
}

void ampc_cg_kernel_restrict(ampc_cg_kernel *k) {
    AMPC_ASSERT(k->n_args == 0);
    k->restrict_ptrs = true;
}

/* Whether a pointer k writes through shares bytes with another of its pointers (the memory plan
 * put an output in place of an input): then no pointer of k may be __restrict__. */
static bool written_overlaps(const ampc_cg_kernel *k) {
    for (int32_t a = 0; a < k->n_args; a++) {
        if (!k->written[a]) continue;
        const ampc_rt_ref *x = &k->args[a].ref;
        for (int32_t b = 0; b < k->n_args; b++) {
            const ampc_rt_ref *y = &k->args[b].ref;
            if (b != a && k->args[b].kind == AMPC_RT_ARG_PTR && x->space == y->space &&
                x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes)
                return true;
        }
    }
    return false;
}

void ampc_cg_elem_open(ampc_cg_kernel *k) {
    ampc_cg_open(k, "auto elem_ = [&](const long long i)");
}

int64_t ampc_cg_elem_close(ampc_cg_kernel *k, int64_t n) {
    ampc_cg_close_with(k, "};");
    ampc_cg_line(k, "const long long gs_ = (long long)gridDim.x * blockDim.x;");
    ampc_cg_line(k, "long long i0_ = (long long)blockIdx.x * blockDim.x + threadIdx.x;");
    if (n < AMPC_CG_UNROLL_MIN) {
        ampc_cg_line(k, "for (; i0_ < %lldLL; i0_ += gs_) elem_(i0_);", (long long)n);
        return n;
    }
    ampc_cg_open(k, "for (; i0_ + %d * gs_ < %lldLL; i0_ += %d * gs_)", AMPC_CG_UNROLL - 1, (long long)n,
                 AMPC_CG_UNROLL);
    for (int32_t u = 0; u < AMPC_CG_UNROLL; u++) ampc_cg_line(k, "elem_(i0_ + %d * gs_);", u);
    ampc_cg_close(k);
    ampc_cg_line(k, "for (; i0_ < %lldLL; i0_ += gs_) elem_(i0_);", (long long)n);
    return (n + AMPC_CG_UNROLL - 1) / AMPC_CG_UNROLL;
}

const char *ampc_cg_bcast_offset(ampc_cg_kernel *k, const ampc_shape *out, const ampc_shape *in,
                                 const char *idx) {
    if (ampc_shape_eq(out, in)) return idx;
    if (ampc_shape_numel(in) == 1) return "0";
    /* the operand's steps over the output's dims: 0 where it broadcasts */
    int64_t steps[AMPC_MAX_RANK] = {0}, st = 1;
    for (int32_t d = in->rank - 1; d >= 0; d--) {
        const int32_t od = d + (out->rank - in->rank);
        if (in->dims[d] != 1) steps[od] = st;
        st *= in->dims[d];
    }
    return ampc_cg_strided_offset(k, out, steps, idx);
}

int64_t ampc_cg_row_strides(const int64_t *dims, int32_t k, int64_t *st) {
    int64_t acc = 1;
    for (int32_t i = k - 1; i >= 0; i--) st[i] = acc, acc *= dims[i];
    return acc;
}

int64_t ampc_cg_dims_prod(const ampc_shape *s, int32_t lo, int32_t hi) {
    int64_t p = 1;
    for (int32_t d = lo; d < hi; d++) p *= s->dims[d];
    return p;
}

const char *ampc_cg_acc_type(const ampc_value *const *vs, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (vs[i] && vs[i]->dtype == AMPC_DTYPE_F64) return "double";
    return "float";
}

void ampc_cg_split_trailing(ampc_cg_kernel *k, const int64_t *dims, int32_t r, int32_t nk) {
    ampc_cg_line(k, "long long t_ = i;");
    for (int32_t d = nk - 1; d >= 0; d--) {
        if (d == 0 && nk == r) {
            ampc_cg_line(k, "const long long o0_ = t_;");
            break;
        }
        ampc_cg_line(k, "const long long o%d_ = t_ %% %lldLL;", d, (long long)dims[r - nk + d]);
        ampc_cg_line(k, "t_ /= %lldLL;", (long long)dims[r - nk + d]);
    }
    if (nk < r) ampc_cg_line(k, "const long long r_ = t_;");
}

ampc_status ampc_cg_unsupported(ampc_cg *cg, const ampc_node *n, const char *why) {
    return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED, "%s has no GPU lowering %s",
                     ampc_op_get(n->op)->onnx, why);
}

const char *ampc_cg_strided_offset(ampc_cg_kernel *k, const ampc_shape *out, const int64_t *steps,
                                   const char *idx) {
    const char *off = ampc_cg_local(k, "o"), *rem = ampc_cg_local(k, "r");
    ampc_cg_line(k, "long long %s = 0, %s = %s;", off, rem, idx);
    /* Walk the dims from the innermost; a dim of step 0 adds nothing, and once no dim further out
     * has a step the division stops. */
    int32_t outer = -1; /* the outermost dim with a step */
    for (int32_t d = 0; d < out->rank && outer < 0; d++)
        if (steps[d] != 0) outer = d;
    for (int32_t d = out->rank - 1; d >= outer && outer >= 0; d--) {
        const int64_t od = out->dims[d];
        if (steps[d] != 0)
            ampc_cg_line(k, "%s += (%s %% %lldLL) * %lldLL;", off, rem, (long long)od,
                         (long long)steps[d]);
        if (d == outer) break;
        ampc_cg_line(k, "%s /= %lldLL;", rem, (long long)od);
    }
    return off;
}

void ampc_cg_kernel_min_blocks(ampc_cg_kernel *k, int32_t blocks) { k->min_blocks = blocks; }
void ampc_cg_kernel_cluster_z(ampc_cg_kernel *k, int32_t z) { k->cluster_z = z; }
void ampc_cg_kernel_pdl_in_body(ampc_cg_kernel *k) { k->pdl_in_body = true; }

/* Ends kernel k: its text recorded, and its launch either a new step (alt_of < 0) or the
 * own_kernel of GEMM step alt_of. */
static ampc_status finish(ampc_cg_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                          uint32_t smem, int32_t alt_of) {
    ampc_cg *cg = k->cg;
    AMPC_ASSERT(k->indent == 1);
    ampc_strbuf text = {0};
    ampc_sb_printf(&text, "// %s: %s\n", k->name, k->covers_comment.data);
    char bounds[32];
    snprintf(bounds, sizeof bounds, k->min_blocks > 0 ? "%u, %d" : "%u",
             block[0] * block[1] * block[2], k->min_blocks);
    char cluster[48] = "";
    if (k->cluster_z > 1) {
        AMPC_ASSERT(grid[2] % (uint32_t)k->cluster_z == 0);
        snprintf(cluster, sizeof cluster, "AMPC_CLUSTER_DIMS(1, 1, %d) ", k->cluster_z);
    }
    /* pdl_enter first (or where the body calls it): the runtime may launch it as a
     * programmatic dependent (common.cuh) */
    ampc_sb_printf(&text, "extern \"C\" __global__ void %s__launch_bounds__(%s) ", cluster, bounds);
    const size_t name_at = text.len;
    const ampc_strbuf *params =
        k->restrict_ptrs && !written_overlaps(k) ? &k->params_restrict : &k->params;
    ampc_sb_printf(&text, "%s(%s", k->name, params->data ? params->data : "");
    const size_t params_end = text.len;
    ampc_sb_puts(&text, ") {\n");
    const size_t body_at = text.len;
    ampc_sb_printf(&text, "%s%s}\n", k->pdl_in_body ? "" : "    ampc::pdl_enter();\n",
                   k->body.data ? k->body.data : "");
    ampc_rt_step s = {.kind = AMPC_RT_STEP_KERNEL, .label = NULL};
    s.label = ampc_arena_strdup(&cg->out->arena, k->covers.data);
    s.kernel.name = ampc_arena_strdup(&cg->out->arena, k->name);
    memcpy(s.kernel.grid, grid, sizeof s.kernel.grid);
    memcpy(s.kernel.block, block, sizeof s.kernel.block);
    s.kernel.smem = smem;
    s.kernel.n_args = k->n_args;
    s.kernel.args = ampc_arena_memdup(&cg->out->arena, k->args,
                                      (size_t)(k->n_args ? k->n_args : 1) * sizeof *k->args);
    int32_t step = alt_of, n_steps = 1;
    if (alt_of < 0) step = ampc_cg_add_step(cg, &s);
    else cg->steps[alt_of].gemm.own_kernel = s.kernel;
    /* a repeated kernel: one more step a launch, its last argument (`rep`) the launch's index */
    AMPC_ASSERT(k->repeat == 0 || (alt_of < 0 && k->args[k->n_args - 1].kind == AMPC_RT_ARG_I32));
    for (int32_t r = 1; r < k->repeat && step >= 0; r++, n_steps++) {
        ampc_rt_arg *args = ampc_arena_memdup(&cg->out->arena, s.kernel.args,
                                              (size_t)k->n_args * sizeof *args);
        if (args == NULL) {
            step = -1;
            break;
        }
        args[k->n_args - 1].i32 = r;
        ampc_rt_step sr = s;
        sr.kernel.args = args;
        if (ampc_cg_add_step(cg, &sr) < 0) step = -1;
    }
    if (cg->n_kernels > cg->cap_kernels) {
        int32_t old = cg->cap_kernels;
        cg->cap_kernels = cg->n_kernels * 2;
        cg->kernels = ampc_xrealloc(cg->kernels, (size_t)cg->cap_kernels * sizeof *cg->kernels);
        memset(cg->kernels + old, 0, (size_t)(cg->cap_kernels - old) * sizeof *cg->kernels);
        for (int32_t i = old; i < cg->cap_kernels; i++) cg->kernels[i].same_as = -1;
    }
    /* The kernel's index was reserved at begin; its text lands in that slot. */
    int32_t index = atoi(k->name + 1);
    cg->kernels[index] = (cg_kernel_rec){ampc_sb_take(&text), name_at, params_end, body_at, step,
                                         n_steps, alt_of >= 0, -1, 0, 0};
    for (int32_t i = 0; i < k->n_names; i++) free(k->names[i]);
    free(k->names);
    free(k->args);
    free(k->written);
    ampc_sb_free(&k->covers);
    ampc_sb_free(&k->covers_comment);
    ampc_sb_free(&k->params);
    ampc_sb_free(&k->params_restrict);
    ampc_sb_free(&k->body);
    free(k);
    return step < 0 ? AMPC_E_OOM : AMPC_OK;
}

ampc_status ampc_cg_kernel_end_launch(ampc_cg_kernel *k, const uint32_t grid[3],
                                      const uint32_t block[3], uint32_t smem) {
    return finish(k, grid, block, smem, -1);
}

ampc_status ampc_cg_kernel_end_gemm_alt(ampc_cg_kernel *k, int32_t step, const uint32_t grid[3],
                                        const uint32_t block[3], uint32_t smem) {
    AMPC_ASSERT(step >= 0 && step < k->cg->n_steps && k->cg->steps[step].kind == AMPC_RT_STEP_GEMM);
    return finish(k, grid, block, smem, step);
}

ampc_status ampc_cg_kernel_end(ampc_cg_kernel *k, int64_t threads, int32_t block) {
    uint32_t b = block > 0 ? (uint32_t)block : 256;
    int64_t blocks = (threads + b - 1) / b;
    /* Enough blocks to fill any current GPU many times over; the grid-stride loop does the rest. */
    if (blocks > 65536) blocks = 65536;
    if (blocks < 1) blocks = 1;
    uint32_t grid[3] = {(uint32_t)blocks, 1, 1}, blk[3] = {b, 1, 1};
    return finish(k, grid, blk, 0, -1);
}

/* ---- L2 prefetch of the next step's weight --------------------------------------------------
 * A GEMM (or convolution) of few rows (BERT at batch 1: 128 x 3072 x 768) streams its weight
 * from memory once and spends most of its time waiting for it. The generated kernel launched
 * before it (a LayerNorm, the attention, a GELU) asks L2 for that weight as it starts, before it
 * waits for its own predecessor (the weight is a constant), so the GEMM finds it in L2. The
 * kernel gets two more parameters, the weight and its size. The compile option no_l2_prefetch
 * (`ampc --no-l2-prefetch`) leaves it out.
 * Measured on the H200 (`ampc run`, two runs each way): BERT-base b1 0.4118 / 0.4112 ms against
 * 0.4162 / 0.4132 without, the MLP's call 0.0095 / 0.0090 against 0.0100 / 0.0100 ms. */

static const char PF_PARAMS[] = "const void *__restrict__ ampc_pf, long long ampc_pf_bytes";
static const char PF_CALL[] = "    ampc::prefetch_l2(ampc_pf, ampc_pf_bytes);\n";

/* The constant weight step i reads (a GEMM's B, a convolution's filter) where it is larger than
 * the step's input (A, x): a step that streams its weight; else a ref of 0 bytes. A larger
 * input (BERT at batch 32) makes the step compute-bound, and the prefetch then only takes memory
 * bandwidth from the kernel before it (measured: 1.75 -> 1.80 ms). */
static ampc_rt_ref next_weight(const ampc_cg *cg, int32_t i) {
    ampc_rt_ref none = {0};
    if (i < 0 || i >= cg->n_steps) return none;
    const ampc_rt_step *s = &cg->steps[i];
    if (s->kind == AMPC_RT_STEP_GEMM && s->gemm.b.space == AMPC_RT_WEIGHTS &&
        s->gemm.b.bytes > s->gemm.a.bytes)
        return s->gemm.b;
    if (s->kind == AMPC_RT_STEP_CONV && s->conv.w.space == AMPC_RT_WEIGHTS &&
        s->conv.w.bytes > s->conv.x.bytes)
        return s->conv.w;
    return none;
}

static ampc_status add_prefetch(ampc_cg *cg, cg_kernel_rec *rec, ampc_rt_ref w) {
    ampc_rt_kernel *k = &cg->steps[rec->step].kernel;
    ampc_strbuf t = {0};
    const bool first = rec->text[rec->params_end - 1] == '(';
    ampc_sb_printf(&t, "%.*s%s%s", (int)rec->params_end, rec->text, first ? "" : ", ", PF_PARAMS);
    ampc_sb_printf(&t, "%.*s%s%s", (int)(rec->body_at - rec->params_end),
                   rec->text + rec->params_end, PF_CALL, rec->text + rec->body_at);
    ampc_rt_arg *args = ampc_arena_alloc(&cg->out->arena, (size_t)(k->n_args + 2) * sizeof *args);
    if (t.data == NULL || args == NULL) {
        ampc_sb_free(&t);
        return AMPC_FAIL(cg->g, NULL, AMPC_E_OOM, "out of memory");
    }
    if (k->n_args) memcpy(args, k->args, (size_t)k->n_args * sizeof *args);
    args[k->n_args] = (ampc_rt_arg){.kind = AMPC_RT_ARG_PTR, .ref = w};
    args[k->n_args + 1] = (ampc_rt_arg){.kind = AMPC_RT_ARG_I64, .i64 = w.bytes};
    k->args = args;
    k->n_args += 2;
    free(rec->text);
    rec->text = ampc_sb_take(&t);
    return AMPC_OK;
}

ampc_status ampc_cg_prefetch_weights(ampc_cg *cg) {
    if (cg->o.no_l2_prefetch || cg->n_ranks > 1) return AMPC_OK;
    for (int32_t i = 0; i < cg->n_kernels; i++) {
        cg_kernel_rec *rec = &cg->kernels[i];
        /* (a repeated kernel's steps share one definition: its next step is itself) */
        if (rec->text == NULL || rec->gemm_alt || rec->n_steps > 1) continue;
        ampc_rt_ref w = next_weight(cg, rec->step + 1);
        if (w.bytes == 0) continue;
        ampc_status st = add_prefetch(cg, rec, w);
        if (st != AMPC_OK) return st;
    }
    return AMPC_OK;
}

/* ---- one definition for kernels that repeat -------------------------------------------------
 * A model repeats itself (a transformer's layers, a long chain of the same ops), and so do its
 * kernels: their definitions differ only in the index of their names. NVRTC's time grows with
 * the source, so each definition is compiled once and every step that needs it launches it. */

/* The kernel step (or GEMM alternative) that runs the kernel of rec. */
static ampc_rt_kernel *rec_kernel(ampc_cg *cg, const cg_kernel_rec *rec) {
    return rec->gemm_alt ? &cg->steps[rec->step].gemm.own_kernel : &cg->steps[rec->step].kernel;
}

/* What makes two kernels one: the definition without its comment line and without the index of
 * its name ("k12" of "k12_relu"), in two pieces, and the dynamic shared memory its step asks
 * (the runtime raises a kernel's limit to what its step asks). */
typedef struct def_key {
    const char *head, *tail; /* "extern ... " up to the name; from the "_<what>(" on */
    size_t n_head, n_tail;
    uint32_t smem;
} def_key;

static def_key key_of(ampc_cg *cg, const cg_kernel_rec *rec) {
    const char *t = rec->text;
    const char *eol = memchr(t, '\n', rec->name_at); /* the comment is one line (escaped) */
    AMPC_ASSERT(eol != NULL && t[rec->name_at] == 'k');
    size_t after = rec->name_at + 1;
    while (t[after] >= '0' && t[after] <= '9') after++;
    def_key k = {eol + 1, t + after, (size_t)(t + rec->name_at - (eol + 1)), strlen(t + after),
                 rec_kernel(cg, rec)->smem};
    return k;
}

static uint64_t fnv1a(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t key_hash(const def_key *k) {
    uint64_t h = fnv1a(0xcbf29ce484222325ULL, k->head, k->n_head);
    h = fnv1a(h, k->tail, k->n_tail);
    return (h ^ k->smem) * 0x100000001b3ULL;
}

static bool key_eq(const def_key *a, const def_key *b) {
    return a->smem == b->smem && a->n_head == b->n_head && a->n_tail == b->n_tail &&
           memcmp(a->head, b->head, a->n_head) == 0 && memcmp(a->tail, b->tail, a->n_tail) == 0;
}

/* Adds "; also launched by N more steps" to the comment line of kernel rec. */
static ampc_status note_sharers(ampc_cg *cg, cg_kernel_rec *rec) {
    const char *eol = strchr(rec->text, '\n');
    ampc_strbuf t = {0};
    ampc_sb_printf(&t, "%.*s; also launched by %d more step%s%s", (int)(eol - rec->text),
                   rec->text, rec->n_sharers, rec->n_sharers == 1 ? "" : "s", eol);
    if (t.data == NULL) return AMPC_FAIL(cg->g, NULL, AMPC_E_OOM, "out of memory");
    size_t grew = t.len - strlen(rec->text);
    free(rec->text);
    rec->text = ampc_sb_take(&t);
    rec->name_at += grew;
    rec->params_end += grew;
    rec->body_at += grew;
    return AMPC_OK;
}

ampc_status ampc_cg_share_kernels(ampc_cg *cg) {
    size_t cap = 16;
    while (cap < (size_t)cg->n_kernels * 2) cap *= 2;
    int32_t *slots = calloc(cap, sizeof *slots); /* kernel index + 1; 0: empty */
    uint64_t *hashes = calloc((size_t)cg->n_kernels + 1, sizeof *hashes);
    if (slots == NULL || hashes == NULL) {
        free(slots);
        free(hashes);
        return AMPC_FAIL(cg->g, NULL, AMPC_E_OOM, "out of memory");
    }
    for (int32_t i = 0; i < cg->n_kernels; i++) {
        cg_kernel_rec *rec = &cg->kernels[i];
        if (rec->text == NULL) continue;
        def_key k = key_of(cg, rec);
        hashes[i] = key_hash(&k);
        size_t s = (size_t)hashes[i] & (cap - 1);
        for (; slots[s] != 0; s = (s + 1) & (cap - 1)) {
            if (hashes[slots[s] - 1] != hashes[i]) continue;
            def_key o = key_of(cg, &cg->kernels[slots[s] - 1]);
            if (key_eq(&k, &o)) break;
        }
        if (slots[s] == 0) {
            slots[s] = i + 1;
            continue;
        }
        cg_kernel_rec *first = &cg->kernels[slots[s] - 1];
        const char *name = rec_kernel(cg, first)->name;
        if (rec->gemm_alt) rec_kernel(cg, rec)->name = name;
        else
            for (int32_t j = 0; j < rec->n_steps; j++) cg->steps[rec->step + j].kernel.name = name;
        rec->same_as = slots[s] - 1;
        first->n_sharers++;
        free(rec->text);
        rec->text = NULL;
    }
    free(slots);
    free(hashes);
    for (int32_t i = 0; i < cg->n_kernels; i++) {
        cg_kernel_rec *rec = &cg->kernels[i];
        if (rec->text != NULL && rec->n_sharers > 0) {
            ampc_status st = note_sharers(cg, rec);
            if (st != AMPC_OK) return st;
        }
    }
    return AMPC_OK;
}
