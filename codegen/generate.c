/*
 * generate.c — the codegen driver: checks that the memory plan exists, lowers every node through
 * the lower-kind table, and assembles the plan (weights blob, inputs/outputs, steps) and the
 * translation units.
 *
 *   1. weights: the constants at their planned offsets; values that a node computes but that are
 *      already known (folded while building, when the fold pass is disabled) are appended after
 *      them and copied into place by a copy step.
 *   2. nodes in order: LOWER_NONE ops are views (no work when the view shares its input's bytes,
 *      else a copy); every other kind goes to its lowering function.
 *   3. units: kernels in emission order, one definition for kernels that repeat another
 *      (ampc_cg_share_kernels), split into contiguous groups (at most max_units), each unit a
 *      banner, the includes and its kernels.
 */
#include "internal.h"
#include "kernels.h"
#include "ir/subgraph.h"

#include <stdlib.h>
#include <string.h>

/* An op without a GPU lowering yet (the op table's REFERENCE rows). */
static ampc_status lower_reference(ampc_cg *cg, const ampc_node *n) {
    const char *why = ampc_op_reference_why(n);
    if (why)
        return AMPC_FAIL(cg->g, n, AMPC_E_UNSUPPORTED,
                         "%s; it runs on the reference evaluator only", why);
    return AMPC_FAIL(cg->g, n, AMPC_E_UNSUPPORTED,
                     "%s has no GPU lowering yet; it runs on the reference evaluator only",
                     ampc_op_get(n->op)->onnx);
}

/* The lowering function of each kind (lower_<kind>.c). */
static const ampc_cg_lower_fn lowerers[] = {
    [LOWER_NONE] = NULL, /* handled by the driver: views and known values */
    [LOWER_ELEMENTWISE] = ampc_cg_lower_elementwise,
    [LOWER_REDUCE] = ampc_cg_lower_reduce,
    [LOWER_NORM] = ampc_cg_lower_norm,
    [LOWER_CONTRACT] = ampc_cg_lower_contract,
    [LOWER_CONV] = ampc_cg_lower_conv,
    [LOWER_POOL] = ampc_cg_lower_pool,
    [LOWER_MOVE] = ampc_cg_lower_movement,
    [LOWER_INDEX] = ampc_cg_lower_index,
    [LOWER_CONTROL] = ampc_cg_lower_control,
    [LOWER_COLLECTIVE] = ampc_cg_lower_collective,
    [LOWER_REFERENCE] = lower_reference,
};
_Static_assert(AMPC_ARRAY_LEN(lowerers) == LOWER_REFERENCE + 1, "a lower kind has no entry");

ampc_graph *ampc_cg_graph(ampc_cg *cg) { return cg->g; }
const ampc_cg_options *ampc_cg_opts(ampc_cg *cg) { return &cg->o; }

/* ---- a data-dependent Loop's jumps (lower_control.c) ---------------------------------------- */

static ampc_status add_jump(ampc_cg *cg, const ampc_node *n, ampc_rt_ref go, bool if_set,
                            int32_t target, int64_t limit, int32_t *at) {
    ampc_rt_step s = {.kind = AMPC_RT_STEP_BRANCH, .label = ampc_cg_label(cg, n)};
    s.branch = (ampc_rt_branch){go, target, if_set, limit};
    return (*at = ampc_cg_add_step(cg, &s)) < 0 ? AMPC_E_OOM : AMPC_OK;
}

ampc_status ampc_cg_loop_open(ampc_cg *cg, const ampc_node *begin, ampc_rt_ref go) {
    if (cg->loop)
        return AMPC_FAIL(cg->g, begin, AMPC_E_UNSUPPORTED, "a data-dependent Loop inside another "
                         "one's region ('%s'): loops on the GPU do not nest", cg->loop->name);
    if (cg->n_ranks > 1 || cg->g->pipeline_stages > 1 || cg->g->data_ranks > 1)
        return AMPC_FAIL(cg->g, begin, AMPC_E_UNSUPPORTED, "a Loop whose stop depends on data "
                         "runs on one GPU: compile without --gpus / --partition");
    cg->loop = begin;
    ampc_status st = add_jump(cg, begin, go, false, -1, 1, &cg->loop_entry);
    cg->loop_body = cg->n_steps;
    return st;
}

ampc_status ampc_cg_loop_close(ampc_cg *cg, const ampc_node *end, ampc_rt_ref go, int64_t limit) {
    if (!cg->loop || ampc_loop_begin_of(end) != cg->loop)
        return AMPC_FAIL(cg->g, end, AMPC_E_INTERNAL, "a LoopEnd whose LoopBegin's region is not "
                         "the one open");
    int32_t back = -1;
    ampc_status st = add_jump(cg, end, go, true, cg->loop_body, limit, &back);
    if (st == AMPC_OK) cg->steps[cg->loop_entry].branch.target = cg->n_steps;
    cg->loop = NULL;
    return st;
}

/* ampc.AllReduce(p_0, ..., p_{N-1}) -> y: on rank r, y = the sum over the ranks of p_r (one step
 * per rank, each reading its own partial; ranks.c sorts them into the rank plans). */
ampc_status ampc_cg_lower_collective(ampc_cg *cg, const ampc_node *n) {
    if (n->op == AMPC_OP_PEER_COPY) return ampc_cg_step_peer(cg, n);
    if (n->op != AMPC_OP_ALL_REDUCE || n->n_inputs != cg->n_ranks || n->n_outputs != 1)
        return AMPC_FAIL(cg->g, n, AMPC_E_UNSUPPORTED, "%s over %d ranks with %d outputs: "
                         "expected one input per GPU (%d) and one output",
                         ampc_op_get(n->op)->onnx, n->n_inputs, n->n_outputs, cg->n_ranks);
    const ampc_value *y = n->outputs[0];
    for (int32_t r = 0; r < n->n_inputs; r++) {
        const ampc_value *p = n->inputs[r];
        if (p->dtype != y->dtype || ampc_ir_nbytes(p) != ampc_ir_nbytes(y))
            return AMPC_FAIL(cg->g, n, AMPC_E_SHAPE,
                             "%s input %d '%s' must match its output '%s' in dtype and size",
                             ampc_op_get(n->op)->onnx, r, p->name, y->name);
        ampc_status st = ampc_cg_step_allreduce(cg, n, r, ampc_cg_ref(cg, p), ampc_cg_ref(cg, y));
        if (st != AMPC_OK) return st;
    }
    return AMPC_OK;
}

ampc_rt_ref ampc_cg_ref(ampc_cg *cg, const ampc_value *v) {
    (void)cg;
    AMPC_ASSERT(v->mem_space != AMPC_MEM_NONE);
    return (ampc_rt_ref){v->mem_space == AMPC_MEM_WEIGHTS ? AMPC_RT_WEIGHTS : AMPC_RT_ARENA,
                         v->mem_offset, (int64_t)ampc_ir_nbytes(v)};
}

static int64_t scratch_at(const ampc_graph *g) { return (g->arena_bytes + 255) & ~(int64_t)255; }

ampc_rt_ref ampc_cg_scratch(ampc_cg *cg, int64_t bytes) {
    if (bytes > cg->scratch_bytes) cg->scratch_bytes = bytes;
    return (ampc_rt_ref){AMPC_RT_ARENA, scratch_at(cg->g), bytes};
}

bool ampc_cg_same_bytes(ampc_cg *cg, const ampc_value *a, const ampc_value *b) {
    (void)cg;
    return a->mem_space == b->mem_space && a->mem_offset == b->mem_offset;
}

const char *ampc_cg_label(ampc_cg *cg, const ampc_node *n) {
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "%s '%s'", ampc_op_get(n->op)->onnx, n->name);
    const char *s = ampc_arena_strdup(&cg->out->arena, sb.data);
    ampc_sb_free(&sb);
    return s;
}

int32_t ampc_cg_add_step(ampc_cg *cg, const ampc_rt_step *s) {
    if (cg->n_steps == cg->cap_steps) {
        cg->cap_steps = cg->cap_steps ? cg->cap_steps * 2 : 64;
        cg->steps = ampc_xrealloc(cg->steps, (size_t)cg->cap_steps * sizeof *cg->steps);
        cg->step_rank = ampc_xrealloc(cg->step_rank, (size_t)cg->cap_steps * sizeof *cg->step_rank);
    }
    cg->steps[cg->n_steps] = *s;
    cg->step_rank[cg->n_steps] = cg->cur_rank;
    return cg->n_steps++;
}

/* A GEMM step gets ampc's own kernel where one takes it: the 2:4 kernel for a sparse24 step
 * (sparse_gemm.c), else the dense one (dense_gemm.c), which an erf GELU epilogue requires and,
 * with --gemm-kernel (ampc_cg_options.gemm_kernel), every step gets as a candidate; a step with
 * the tanh GELU epilogue stays on cuBLASLt alone. */
ampc_status ampc_cg_step_gemm(ampc_cg *cg, const ampc_node *n, const ampc_rt_gemm *p) {
    ampc_rt_step s = {.kind = AMPC_RT_STEP_GEMM, .label = ampc_cg_label(cg, n), .gemm = *p};
    memset(&s.gemm.own_kernel, 0, sizeof s.gemm.own_kernel);
    int32_t i = ampc_cg_add_step(cg, &s);
    if (i < 0) return AMPC_E_OOM;
    if (ampc_rt_epilogue_tanh(p->epilogue)) return AMPC_OK;
    ampc_status st = p->sparse24 ? ampc_cg_sparse_gemm(cg, n, i) : AMPC_OK;
    if (st != AMPC_OK || cg->steps[i].gemm.own_kernel.name != NULL) return st;
    bool gelu = p->epilogue == AMPC_RT_EPI_GELU || p->epilogue == AMPC_RT_EPI_BIAS_GELU;
    return gelu || cg->o.gemm_kernel ? ampc_cg_dense_gemm(cg, n, i) : AMPC_OK;
}

ampc_status ampc_cg_step_conv(ampc_cg *cg, const ampc_node *n, const ampc_rt_conv *p) {
    ampc_rt_step s = {.kind = AMPC_RT_STEP_CONV, .label = ampc_cg_label(cg, n), .conv = *p};
    return ampc_cg_add_step(cg, &s) < 0 ? AMPC_E_OOM : AMPC_OK;
}

ampc_status ampc_cg_step_copy(ampc_cg *cg, const ampc_node *n, ampc_rt_ref src, ampc_rt_ref dst) {
    if (!dst.bytes || (src.space == dst.space && src.offset == dst.offset)) return AMPC_OK;
    ampc_rt_step s = {.kind = AMPC_RT_STEP_COPY, .label = ampc_cg_label(cg, n)};
    s.copy.src = src;
    s.copy.dst = dst;
    return ampc_cg_add_step(cg, &s) < 0 ? AMPC_E_OOM : AMPC_OK;
}

ampc_status ampc_cg_step_memset(ampc_cg *cg, const ampc_node *n, ampc_rt_ref dst) {
    if (!dst.bytes) return AMPC_OK;
    ampc_rt_step s = {.kind = AMPC_RT_STEP_MEMSET, .label = ampc_cg_label(cg, n)};
    s.memset.dst = dst;
    return ampc_cg_add_step(cg, &s) < 0 ? AMPC_E_OOM : AMPC_OK;
}

ampc_status ampc_cg_step_allreduce(ampc_cg *cg, const ampc_node *n, int32_t rank, ampc_rt_ref src,
                                   ampc_rt_ref dst) {
    ampc_rt_step s = {.kind = AMPC_RT_STEP_ALLREDUCE, .label = ampc_cg_label(cg, n)};
    const ampc_value *y = n->outputs[0];
    s.allreduce = (ampc_rt_allreduce){src, dst, y->dtype, ampc_ir_numel(y)};
    int32_t saved = cg->cur_rank;
    cg->cur_rank = rank;
    int32_t i = ampc_cg_add_step(cg, &s);
    cg->cur_rank = saved;
    return i < 0 ? AMPC_E_OOM : AMPC_OK;
}

/* ampc.PeerCopy(x) -> y on rank r (the node's), from rank `from`: one step in rank r's plan
 * reading x's bytes in rank from's arena (every rank has the whole graph's arena layout). */
ampc_status ampc_cg_step_peer(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int64_t from = ampc_node_peer_from(n);
    if (cg->cur_rank < 0 || from < 0 || from >= cg->n_ranks || from == cg->cur_rank)
        return AMPC_FAIL(cg->g, n, AMPC_E_ATTR, "%s needs int attributes `from` and `rank`, two "
                         "different GPUs below %d", ampc_op_get(n->op)->onnx, cg->n_ranks);
    if (x->mem_space != AMPC_MEM_ARENA || y->mem_space != AMPC_MEM_ARENA)
        return AMPC_FAIL(cg->g, n, AMPC_E_UNSUPPORTED, "%s of '%s': a peer copy moves a computed "
                         "value between arenas, but '%s' lives in the weights",
                         ampc_op_get(n->op)->onnx, x->name,
                         x->mem_space != AMPC_MEM_ARENA ? x->name : y->name);
    ampc_rt_step s = {.kind = AMPC_RT_STEP_PEER_COPY, .label = ampc_cg_label(cg, n)};
    s.peer = (ampc_rt_peer){ampc_cg_ref(cg, x), ampc_cg_ref(cg, y), (int32_t)from};
    return ampc_cg_add_step(cg, &s) < 0 ? AMPC_E_OOM : AMPC_OK;
}

/* ---- 1. weights ----------------------------------------------------------------------------- */

static int64_t align256(int64_t x) { return (x + 255) & ~(int64_t)255; }

/* Bytes the known outputs of computed nodes need after the constants. */
static int64_t known_bytes(const ampc_graph *g) {
    int64_t extra = 0;
    for (int32_t i = 0; i < g->n_values; i++) {
        const ampc_value *v = g->values[i];
        if (v->data && v->producer && v->mem_space == AMPC_MEM_ARENA)
            extra = align256(extra + (int64_t)ampc_ir_nbytes(v));
    }
    return extra;
}

static ampc_status build_weights(ampc_cg *cg) {
    ampc_graph *g = cg->g;
    int64_t total = g->weights_bytes + known_bytes(g);
    unsigned char *w = calloc(1, (size_t)(total ? total : 1));
    if (!w) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory for %lld bytes of weights",
                             (long long)total);
    cg->out->weights_owned = w;
    for (int32_t i = 0; i < g->n_values; i++) {
        const ampc_value *v = g->values[i];
        if (v->mem_space == AMPC_MEM_WEIGHTS && v->data && !v->producer)
            memcpy(w + v->mem_offset, v->data, ampc_ir_nbytes(v));
    }
    cg->out->plan.weights = w;
    cg->out->plan.weights_bytes = total;
    return AMPC_OK;
}

/* A node whose outputs are all known: copy each from the weights (appended at `*at`). */
static ampc_status lower_known(ampc_cg *cg, const ampc_node *n, int64_t *at) {
    unsigned char *w = cg->out->weights_owned;
    for (int32_t j = 0; j < n->n_outputs; j++) {
        const ampc_value *v = n->outputs[j];
        size_t nb = ampc_ir_nbytes(v);
        memcpy(w + *at, v->data, nb);
        ampc_rt_ref src = {AMPC_RT_WEIGHTS, *at, (int64_t)nb};
        *at = align256(*at + (int64_t)nb);
        ampc_status st = ampc_cg_step_copy(cg, n, src, ampc_cg_ref(cg, v));
        if (st != AMPC_OK) return st;
    }
    return AMPC_OK;
}

/* ---- 2. nodes ------------------------------------------------------------------------------- */

static bool all_outputs_known(const ampc_node *n) {
    for (int32_t j = 0; j < n->n_outputs; j++)
        if (!n->outputs[j]->data) return false;
    return n->n_outputs > 0;
}

/* The rank a node runs on: its `rank` attribute (the partition pass's), -1 for every rank. */
static int32_t node_rank(const ampc_node *n) { return (int32_t)ampc_node_rank(n); }

/* The GPUs a partitioned graph runs on (1 for any other): every all-reduce has one input per
 * rank, and every node's rank is below their count. */
static ampc_status count_ranks(ampc_cg *cg) {
    const ampc_graph *g = cg->g;
    if (g->pipeline_stages > 1) { /* a pipeline: one rank per stage, no all-reduce */
        for (int32_t i = 0; i < g->n_nodes; i++) {
            const ampc_node *nd = g->nodes[i];
            if (nd->dead) continue;
            if (nd->op == AMPC_OP_ALL_REDUCE || node_rank(nd) < 0 ||
                node_rank(nd) >= g->pipeline_stages)
                return AMPC_FAIL(cg->g, nd, AMPC_E_ATTR, "a pipeline of %d stages: every node "
                                 "runs on one stage (rank 0 to %d) and none is an all-reduce; "
                                 "this one has rank %d", g->pipeline_stages,
                                 g->pipeline_stages - 1, node_rank(nd));
        }
        cg->n_ranks = g->pipeline_stages;
        return AMPC_OK;
    }
    int32_t n = 0, top = -1;
    const ampc_node *first = NULL;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *nd = g->nodes[i];
        if (nd->dead) continue;
        if (node_rank(nd) > top) top = node_rank(nd);
        if (nd->op != AMPC_OP_ALL_REDUCE) continue;
        if (first && nd->n_inputs != n)
            return AMPC_FAIL(cg->g, nd, AMPC_E_ATTR, "all-reduce over %d ranks, but node %s "
                             "reduces over %d: a graph is partitioned over one number of GPUs",
                             nd->n_inputs, first->name, n);
        first = nd;
        n = nd->n_inputs;
    }
    if (top >= 0 && (n < 2 || top >= n))
        return AMPC_FAIL(cg->g, NULL, AMPC_E_ATTR, "a node has rank %d, but the graph's "
                         "all-reduces are over %d ranks", top, n);
    cg->n_ranks = n > 1 ? n : 1;
    return AMPC_OK;
}

static ampc_status lower_node(ampc_cg *cg, const ampc_node *n, int64_t *known_at) {
    const ampc_op_info *info = ampc_op_get(n->op);
    if (all_outputs_known(n)) return lower_known(cg, n, known_at);
    if (info->lower == LOWER_NONE) {
        /* Views and Identity: the memory plan usually made the output share the input's bytes. */
        if (ampc_op_has(n->op, T_VIEW) && n->n_inputs && n->inputs[0])
            return ampc_cg_step_copy(cg, n, ampc_cg_ref(cg, n->inputs[0]),
                                     ampc_cg_ref(cg, n->outputs[0]));
        return AMPC_FAIL(cg->g, n, AMPC_E_UNSUPPORTED,
                         "%s must be resolved at compile time, but its output depends on run-time "
                         "values; ampc compiles static graphs",
                         info->onnx);
    }
    return lowerers[info->lower](cg, n);
}

/* ---- 3. units ------------------------------------------------------------------------------- */


static ampc_status build_units(ampc_cg *cg) {
    ampc_cg_output *out = cg->out;
    /* the kernels defined (a kernel that repeats another is not: ampc_cg_share_kernels) */
    int32_t *defs = malloc((size_t)(cg->n_kernels ? cg->n_kernels : 1) * sizeof *defs), n_defs = 0;
    if (!defs) return AMPC_FAIL(cg->g, NULL, AMPC_E_OOM, "out of memory");
    for (int32_t k = 0; k < cg->n_kernels; k++)
        if (cg->kernels[k].text) defs[n_defs++] = k;
    int32_t max_units = cg->o.max_units > 0 ? cg->o.max_units : 8;
    int32_t units = (n_defs + 23) / 24; /* about two dozen kernels a unit; none when no
                                         * kernels (copies and library steps only) */
    if (units > max_units) units = max_units;
    out->n_units = units;
    out->n_kernels = n_defs;
    out->sources = ampc_arena_alloc(&out->arena, (size_t)(units ? units : 1) * sizeof *out->sources);
    out->unit_names = ampc_arena_alloc(&out->arena, (size_t)(units ? units : 1) * sizeof *out->unit_names);
    if (!out->sources || !out->unit_names) {
        free(defs);
        return AMPC_FAIL(cg->g, NULL, AMPC_E_OOM, "out of memory");
    }
    for (int32_t u = 0; u < units; u++) {
        int32_t first = (int32_t)((int64_t)n_defs * u / units);
        int32_t last = (int32_t)((int64_t)n_defs * (u + 1) / units);
        ampc_strbuf sb = {0};
        ampc_sb_printf(&sb, "// generated by ampc %s - do not edit\n", AMPC_VERSION_STRING);
        ampc_sb_puts(&sb, "// graph '");
        ampc_sb_put_comment_text(&sb, cg->g->name); /* model text */
        ampc_sb_printf(&sb, "', unit %d of %d: kernels k%d to k%d; math %s\n", u, units,
                       defs[first], defs[last - 1],
                       cg->o.math == AMPC_RT_MATH_TF32 ? "tf32" : "fp32");
        /* Every kernel template (the .cuh files of codegen/kernels, embedded): each unit may use
         * any. The shared headers of ir/ embedded beside them come in through the templates. */
        int32_t n_headers;
        const ampc_embedded_file *headers = ampc_kernel_headers(&n_headers);
        for (int32_t h = 0; h < n_headers; h++) {
            const size_t len = strlen(headers[h].name);
            if (len > 4 && !strcmp(headers[h].name + len - 4, ".cuh"))
                ampc_sb_printf(&sb, "#include \"%s\"\n", headers[h].name);
        }
        ampc_sb_putc(&sb, '\n');
        for (int32_t d = first; d < last; d++) {
            cg_kernel_rec *rec = &cg->kernels[defs[d]];
            ampc_sb_puts(&sb, rec->text);
            ampc_sb_putc(&sb, '\n');
            rec->unit = u;
        }
        out->sources[u] = ampc_arena_strdup(&out->arena, sb.data ? sb.data : "");
        ampc_sb_free(&sb);
        /* NVRTC's name of the unit (its messages show it): the graph's name in letters,
         * digits, '_', '-' and '.', the rest '_' */
        char name[160];
        snprintf(name, sizeof name, "%.120s_u%d.cu", cg->g->name, u);
        for (char *p = name; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                  *p == '_' || *p == '-' || *p == '.'))
                *p = '_';
        out->unit_names[u] = ampc_arena_strdup(&out->arena, name);
    }
    free(defs);
    /* every kernel's step: the unit of the definition it launches */
    for (int32_t k = 0; k < cg->n_kernels; k++) {
        const cg_kernel_rec *rec = &cg->kernels[k];
        if (!rec->text && rec->same_as < 0) continue;
        int32_t unit = cg->kernels[rec->same_as >= 0 ? rec->same_as : k].unit;
        if (rec->gemm_alt) cg->steps[rec->step].gemm.own_kernel.unit = unit;
        else
            for (int32_t j = 0; j < rec->n_steps; j++) cg->steps[rec->step + j].kernel.unit = unit;
    }
    return AMPC_OK;
}

static ampc_rt_io *build_io(ampc_cg *cg, ampc_value *const *vals, int32_t n) {
    ampc_rt_io *io = ampc_arena_alloc(&cg->out->arena, (size_t)(n ? n : 1) * sizeof *io);
    for (int32_t i = 0; io && i < n; i++) {
        const ampc_value *v = vals[i];
        io[i] = (ampc_rt_io){ampc_arena_strdup(&cg->out->arena, v->name), v->dtype, v->shape,
                             ampc_cg_ref(cg, v)};
    }
    return io;
}

ampc_status ampc_cg_generate(ampc_graph *g, const ampc_cg_options *o, ampc_cg_output **out) {
    *out = NULL;
    if (ampc_graph_status(g) != AMPC_OK) return ampc_graph_status(g);
    for (int32_t i = 0; i < g->n_values; i++)
        if (g->values[i]->mem_space == AMPC_MEM_NONE &&
            !(g->values[i]->flags & (AMPC_VALUE_POISON | AMPC_VALUE_FUSED)))
            return AMPC_FAIL(g, NULL, AMPC_E_INTERNAL,
                             "value '%s' has no place in memory: run the plan-memory pass before "
                             "code generation", g->values[i]->name);
    ampc_cg cg = {.g = g};
    if (o) cg.o = *o;
    cg.out = ampc_xcalloc(1, sizeof *cg.out);
    ampc_arena_init(&cg.out->arena);
    ampc_rt_plan *plan = &cg.out->plan;
    plan->version = AMPC_RT_PLAN_VERSION;
    plan->name = ampc_arena_strdup(&cg.out->arena, g->name);
    plan->arena_bytes = g->arena_bytes;

    ampc_status st = build_weights(&cg);
    if (st == AMPC_OK) st = count_ranks(&cg);
    int64_t known_at = g->weights_bytes;
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++) {
        const ampc_node *n = g->nodes[i];
        /* a node whose output is fused is computed inside its reader's kernel */
        if (n->dead || (n->n_outputs == 1 && (n->outputs[0]->flags & AMPC_VALUE_FUSED))) continue;
        cg.cur_rank = node_rank(n);
        st = lower_node(&cg, n, &known_at);
    }
    if (st == AMPC_OK && cg.loop)
        st = AMPC_FAIL(g, cg.loop, AMPC_E_INTERNAL, "a LoopBegin without its LoopEnd");
    if (cg.scratch_bytes) plan->arena_bytes = scratch_at(g) + cg.scratch_bytes;
    if (st == AMPC_OK) st = ampc_cg_prefetch_weights(&cg);
    if (st == AMPC_OK) st = ampc_cg_share_kernels(&cg);
    if (st == AMPC_OK) st = build_units(&cg);
    if (st == AMPC_OK) {
        plan->n_units = cg.out->n_units;
        plan->steps = ampc_arena_memdup(&cg.out->arena, cg.steps,
                                        (size_t)(cg.n_steps ? cg.n_steps : 1) * sizeof *cg.steps);
        plan->n_steps = cg.n_steps;
        plan->inputs = build_io(&cg, g->inputs, g->n_inputs);
        plan->n_inputs = g->n_inputs;
        plan->outputs = build_io(&cg, g->outputs, g->n_outputs);
        plan->n_outputs = g->n_outputs;
        cg.out->n_ranks = 1;
        if (g->data_ranks > 1) st = ampc_cg_build_data_ranks(&cg, g->data_ranks);
        else if (cg.n_ranks > 1) st = ampc_cg_build_ranks(&cg, cg.n_ranks);
        if (st == AMPC_OK && g->pipeline_stages > 1)
            st = ampc_cg_build_pipeline(&cg, g->micro_batches > 0 ? g->micro_batches : 1);
    }
    for (int32_t k = 0; k < cg.cap_kernels; k++) free(cg.kernels[k].text);
    free(cg.kernels);
    free(cg.steps);
    free(cg.step_rank);
    if (st != AMPC_OK) {
        ampc_cg_output_free(cg.out);
        return st;
    }
    *out = cg.out;
    return AMPC_OK;
}

void ampc_cg_output_free(ampc_cg_output *out) {
    if (!out) return;
    free(out->weights_owned);
    for (int32_t r = 0; out->rank_weights && r < out->n_ranks; r++) free(out->rank_weights[r]);
    free(out->rank_weights);
    ampc_arena_free(&out->arena);
    free(out);
}
