/*
 * ranks.c — the per-rank plans of a graph partitioned over N GPUs (passes/partition.c,
 * docs/multi-gpu.md). generate.c lowers every node once, each step tagged with the rank of its
 * node (-1 for a node without `rank`, which runs everywhere) and each ampc.AllReduce as one step
 * per rank; this file sorts them into N plans:
 *
 *   1. weight segments: every value in the weights space with the rank of the nodes that read
 *      it (-1 when read by several ranks or by a replicated node); overlapping values (views)
 *      merge into one segment, replicated unless every part belongs to the same rank.
 *   2. per rank r: the segments of rank r and the replicated ones packed into r's own blob
 *      (256-byte aligned, in their original order); its steps are the replicated ones and r's,
 *      with every weights ref moved to the packed offset; inputs and outputs likewise.
 *
 * The arena layout is the whole graph's (every rank allocates arena_bytes, so rank r's arena
 * has room for other ranks' values it never touches: a rank-aware memory plan would shrink it).
 *
 * A batch split (passes/partition_data.c) is simpler and at the end of the file: every rank
 * runs the one plan of the graph's B/N rows, sharing its steps and weights.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* A byte range of the full weights blob and the rank that reads it (-1: replicated). */
typedef struct wseg {
    int64_t offset, bytes;
    int32_t rank;
} wseg;

static int64_t align256(int64_t x) { return (x + 255) & ~(int64_t)255; }

static int cmp_seg(const void *a, const void *b) {
    int64_t x = ((const wseg *)a)->offset, y = ((const wseg *)b)->offset;
    return (x > y) - (x < y);
}

/* 1. The weights' segments, sorted and merged; *n their count. `total` is the blob's size (the
 * known values generate.c appended after the constants are replicated). */
static wseg *weight_segments(const ampc_graph *g, int64_t total, int32_t *n) {
    int32_t *vrank = ampc_xcalloc((size_t)g->n_values + 1, sizeof *vrank);
    for (int32_t i = 0; i < g->n_values; i++) vrank[i] = -2; /* no reader yet */
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *nd = g->nodes[i];
        if (nd->dead) continue;
        const int32_t r = (int32_t)ampc_node_rank(nd);
        for (int32_t j = 0; j < nd->n_inputs; j++) {
            const ampc_value *v = nd->inputs[j];
            if (!v || v->mem_space != AMPC_MEM_WEIGHTS) continue;
            vrank[v->id] = vrank[v->id] == -2 || vrank[v->id] == r ? r : -1;
        }
    }
    wseg *s = ampc_xcalloc((size_t)g->n_values + 2, sizeof *s);
    int32_t k = 0;
    for (int32_t i = 0; i < g->n_values; i++) {
        const ampc_value *v = g->values[i];
        int64_t bytes = (int64_t)ampc_ir_nbytes(v);
        if (v->mem_space != AMPC_MEM_WEIGHTS || bytes == 0) continue;
        bool out = v->flags & AMPC_VALUE_OUTPUT;
        s[k++] = (wseg){v->mem_offset, bytes, vrank[i] < 0 || out ? -1 : vrank[i]};
    }
    if (total > g->weights_bytes) s[k++] = (wseg){g->weights_bytes, total - g->weights_bytes, -1};
    free(vrank);
    qsort(s, (size_t)k, sizeof *s, cmp_seg);
    int32_t m = 0;
    for (int32_t i = 0; i < k; i++) {
        if (m > 0 && s[i].offset < s[m - 1].offset + s[m - 1].bytes) {
            wseg *last = &s[m - 1];
            int64_t end = s[i].offset + s[i].bytes;
            if (end > last->offset + last->bytes) last->bytes = end - last->offset;
            if (last->rank != s[i].rank) last->rank = -1;
        } else {
            s[m++] = s[i];
        }
    }
    *n = m;
    return s;
}

/* What one rank keeps: the segments it reads and where each lands in its blob (-1: not kept). */
typedef struct rank_layout {
    const wseg *segs;
    int32_t n_segs;
    int64_t *packed;
    int64_t bytes;
} rank_layout;

static void layout_rank(rank_layout *l, int32_t r) {
    int64_t at = 0;
    for (int32_t i = 0; i < l->n_segs; i++) {
        const wseg *s = &l->segs[i];
        if (s->rank >= 0 && s->rank != r) {
            l->packed[i] = -1;
            continue;
        }
        l->packed[i] = align256(at);
        at = l->packed[i] + s->bytes;
    }
    l->bytes = at;
}

/* Moves a weights ref to the rank's blob; false when the rank does not hold its bytes. */
static bool remap(const rank_layout *l, ampc_rt_ref *ref) {
    if (ref->space != AMPC_RT_WEIGHTS || ref->bytes == 0) return true;
    int32_t lo = 0, hi = l->n_segs - 1;
    while (lo <= hi) { /* the last segment starting at or before the ref */
        int32_t mid = (lo + hi) / 2;
        if (l->segs[mid].offset <= ref->offset) lo = mid + 1;
        else hi = mid - 1;
    }
    if (hi < 0 || l->packed[hi] < 0) return false;
    const wseg *s = &l->segs[hi];
    if (ref->offset + ref->bytes > s->offset + s->bytes) return false;
    ref->offset = l->packed[hi] + (ref->offset - s->offset);
    return true;
}

/* The refs of a library step (kernel arguments, own_kernel's too, are handled apart), at most
 * STEP_REFS (runtime/steps.def's rows of its kind); returns their count. */
enum { STEP_REFS = 8 };
static int step_refs(ampc_rt_step *s, ampc_rt_ref **r) {
    int n = 0;
#define AMPC_STEP_REF(KIND, member, field, where) \
    if (s->kind == AMPC_RT_STEP_##KIND && n < STEP_REFS) r[n++] = &s->member.field;
#include "runtime/steps.def"
    return n;
}

/* 2. Rank r's steps, with their weights refs moved; NULL after a diagnostic. */
static ampc_rt_step *rank_steps(ampc_cg *cg, const rank_layout *l, int32_t r, int32_t *n) {
    ampc_arena *ar = &cg->out->arena;
    ampc_rt_step *steps = ampc_arena_alloc(ar, (size_t)(cg->n_steps + 1) * sizeof *steps);
    if (!steps) return NULL;
    int32_t k = 0;
    for (int32_t i = 0; i < cg->n_steps; i++) {
        if (cg->step_rank[i] >= 0 && cg->step_rank[i] != r) continue;
        ampc_rt_step *s = &steps[k++];
        *s = cg->steps[i];
        ampc_rt_ref *refs[STEP_REFS];
        int nr = step_refs(s, refs);
        bool ok = true;
        for (int j = 0; j < nr; j++) ok &= remap(l, refs[j]);
        ampc_rt_kernel *k = s->kind == AMPC_RT_STEP_KERNEL ? &s->kernel
                            : s->kind == AMPC_RT_STEP_GEMM && s->gemm.own_kernel.name ? &s->gemm.own_kernel
                            : NULL;
        if (k && k->n_args > 0) {
            ampc_rt_arg *args = ampc_arena_memdup(ar, k->args, (size_t)k->n_args * sizeof *args);
            if (!args) return NULL;
            for (int32_t j = 0; j < k->n_args; j++)
                if (args[j].kind == AMPC_RT_ARG_PTR) ok &= remap(l, &args[j].ref);
            k->args = args;
        }
        if (!ok) {
            AMPC_FAIL(cg->g, NULL, AMPC_E_INTERNAL, "step %d (%s) of rank %d reads weights that "
                      "rank %d does not hold", i, s->label ? s->label : "", r, r);
            return NULL;
        }
    }
    *n = k;
    return steps;
}

static ampc_rt_io *rank_io(ampc_cg *cg, const rank_layout *l, const ampc_rt_io *io, int32_t n) {
    ampc_rt_io *c = ampc_arena_memdup(&cg->out->arena, io, (size_t)(n ? n : 1) * sizeof *c);
    for (int32_t i = 0; c && i < n; i++)
        if (!remap(l, &c[i].ref)) {
            AMPC_FAIL(cg->g, NULL, AMPC_E_INTERNAL, "output '%s' lies in weights no rank holds "
                      "whole", c[i].name);
            return NULL;
        }
    return c;
}

ampc_status ampc_cg_build_ranks(ampc_cg *cg, int32_t n_ranks) {
    ampc_cg_output *out = cg->out;
    const ampc_rt_plan whole = out->plan;
    int32_t n_segs = 0;
    wseg *segs = weight_segments(cg->g, whole.weights_bytes, &n_segs);
    rank_layout l = {segs, n_segs, ampc_xcalloc((size_t)n_segs + 1, sizeof(int64_t)), 0};
    out->n_ranks = n_ranks;
    out->rank_plans = ampc_arena_alloc(&out->arena, (size_t)n_ranks * sizeof *out->rank_plans);
    out->rank_weights = ampc_xcalloc((size_t)n_ranks, sizeof *out->rank_weights);
    ampc_status st = out->rank_plans ? AMPC_OK : AMPC_E_OOM;
    for (int32_t r = 0; r < n_ranks && st == AMPC_OK; r++) {
        layout_rank(&l, r);
        unsigned char *w = calloc(1, (size_t)(l.bytes ? l.bytes : 1));
        if (!w) {
            st = AMPC_FAIL(cg->g, NULL, AMPC_E_OOM, "out of host memory for rank %d's %lld bytes "
                           "of weights", r, (long long)l.bytes);
            break;
        }
        out->rank_weights[r] = w;
        for (int32_t i = 0; i < n_segs; i++)
            if (l.packed[i] >= 0)
                memcpy(w + l.packed[i], (const unsigned char *)whole.weights + segs[i].offset,
                       (size_t)segs[i].bytes);
        ampc_rt_plan *p = &out->rank_plans[r];
        *p = whole;
        p->weights = w;
        p->weights_bytes = l.bytes;
        p->rank = r;
        p->n_ranks = n_ranks;
        p->ranks = NULL;
        p->steps = rank_steps(cg, &l, r, &p->n_steps);
        p->inputs = rank_io(cg, &l, whole.inputs, whole.n_inputs);
        p->outputs = rank_io(cg, &l, whole.outputs, whole.n_outputs);
        if (!p->steps || !p->inputs || !p->outputs)
            st = ampc_graph_status(cg->g) != AMPC_OK ? ampc_graph_status(cg->g) : AMPC_E_OOM;
    }
    if (st == AMPC_OK) {
        out->plan = out->rank_plans[0];
        out->plan.ranks = out->rank_plans;
    }
    free(l.packed);
    free(segs);
    return st;
}

/* ---- data parallelism ------------------------------------------------------------------------
 * A graph that partition-data made one GPU's share of the batch (g->data_ranks = N) lowers to
 * one plan for B / N rows; every rank runs that plan. The ranks' plans share its steps and its
 * weights blob (one copy in the library however many GPUs), and the model's plan describes the
 * caller's whole tensors: the same inputs and outputs with dim 0 and the bytes times N. */

/* A copy of io with dim 0 and the bytes of each tensor multiplied by n (the caller's view). */
static ampc_rt_io *whole_batch_io(ampc_cg *cg, const ampc_rt_io *io, int32_t count, int32_t n) {
    ampc_rt_io *c = ampc_arena_memdup(&cg->out->arena, io, (size_t)(count ? count : 1) * sizeof *c);
    for (int32_t i = 0; c && i < count; i++) {
        AMPC_ASSERT(c[i].shape.rank > 0); /* partition-data refused inputs without a batch dim */
        c[i].shape.dims[0] *= n;
        c[i].ref.bytes *= n;
    }
    return c;
}

ampc_status ampc_cg_build_data_ranks(ampc_cg *cg, int32_t n_ranks) {
    ampc_cg_output *out = cg->out;
    if (cg->n_ranks > 1)
        return AMPC_FAIL(cg->g, NULL, AMPC_E_ATTR, "the graph is one GPU's share of a batch split "
                         "over %d GPUs and also has all-reduces over %d: one partition at a time",
                         n_ranks, cg->n_ranks);
    ampc_rt_plan share = out->plan;
    share.n_ranks = n_ranks;
    share.ranks = NULL;
    share.split_batch = 1;
    out->rank_plans = ampc_arena_alloc(&out->arena, (size_t)n_ranks * sizeof *out->rank_plans);
    ampc_rt_io *in = whole_batch_io(cg, share.inputs, share.n_inputs, n_ranks);
    ampc_rt_io *o = whole_batch_io(cg, share.outputs, share.n_outputs, n_ranks);
    if (!out->rank_plans || !in || !o) return AMPC_FAIL(cg->g, NULL, AMPC_E_OOM, "out of memory");
    for (int32_t r = 0; r < n_ranks; r++) {
        out->rank_plans[r] = share; /* the same steps, io and weights pointers */
        out->rank_plans[r].rank = r;
    }
    out->n_ranks = n_ranks; /* rank_weights stays NULL: the weights are out->weights_owned */
    out->plan = share;
    out->plan.ranks = out->rank_plans;
    out->plan.inputs = in;
    out->plan.outputs = o;
    return AMPC_OK;
}

/* ---- pipelines -------------------------------------------------------------------------------
 * A graph cut into stages (passes/partition_pipeline.c) is built like a tensor split: rank s's
 * plan holds stage s's steps (its peer copies first, the pass ordered them so) and only the
 * weights stage s reads. Each plan is one micro-batch's; the model's plan describes the caller's
 * whole tensors. */
ampc_status ampc_cg_build_pipeline(ampc_cg *cg, int32_t micro_batches) {
    ampc_cg_output *out = cg->out;
    for (int32_t r = 0; r < out->n_ranks; r++) out->rank_plans[r].micro_batches = micro_batches;
    out->plan.micro_batches = micro_batches;
    if (micro_batches == 1) return AMPC_OK; /* the whole batch at once: the ranks' io */
    ampc_rt_io *in = whole_batch_io(cg, out->plan.inputs, out->plan.n_inputs, micro_batches);
    ampc_rt_io *o = whole_batch_io(cg, out->plan.outputs, out->plan.n_outputs, micro_batches);
    if (!in || !o) return AMPC_FAIL(cg->g, NULL, AMPC_E_OOM, "out of memory");
    out->plan.inputs = in;
    out->plan.outputs = o;
    return AMPC_OK;
}
