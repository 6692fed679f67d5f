/*
 * partition_pipeline.c — pipeline parallelism: the graph cut into N consecutive stages, GPU s
 * running stage s, the batch run through them in micro-batches.
 *
 * partition-data (first in the pipeline) has already made the graph one micro-batch (B / M rows,
 * g->micro_batches = M). This pass runs late, after fusion and layout, so it weighs the nodes
 * that will really run, and before the memory plan:
 *
 *   1. cost: every node gets an estimated cost in FLOP-equivalents. The cost model:
 *        - a contraction (MatMul, Gemm, ampc.FusedMatMul): 2 * numel(output) * K, K the
 *          reduction dim of input 0 (its last dim, or its first with transA);
 *        - ampc.FusedAttention (dims [B, H, Sq, Sk, D, Dv]): 2 B H Sq Sk (D + Dv), Q K^T and P V;
 *        - a convolution: 2 * numel(output) * numel(W) / W.dims[0];
 *        - any other node that runs on the GPU: the bytes it reads and writes, times
 *          AMPC_PIPE_FLOPS_PER_BYTE (100: a GPU of the H100/H200 class does about 1000 dense
 *          fp16 TFLOP/s against 3 to 5 TB/s of memory bandwidth, so a byte moved costs about as
 *          much time as 100 to 300 FLOPs of a tensor-core GEMM at its usual efficiency);
 *        - views and nodes resolved at compile time: 0.
 *   2. crossings: for each position p (a cut before node p) the values computed before p and
 *      read at or after p (or graph outputs): their count and bytes. Graph inputs never cross
 *      (every GPU copies its rows of each input) and constants never cross (weights live on the
 *      GPUs of the stages that read them).
 *   3. cuts: cut s (1..N-1) aims at s/N of the total cost. Among the legal positions (at most
 *      AMPC_PIPE_MAX_CROSS tensors crossing, each stage keeping a node) whose cost before them
 *      lies within AMPC_PIPE_SLACK of a stage's cost from that aim, the cut takes the one with
 *      the fewest bytes crossing, then the fewest tensors, then the closest to the aim (in a
 *      transformer stack that is a layer boundary: the residual stream, plus a mask when there
 *      is one). With no legal position in the window, the legal one closest to the aim; with
 *      none at all, the pass fails naming the stage and the tensors of the best position.
 *   4. rewrite: each node gets `rank = stage` (docs/multi-gpu.md: a node with `rank` runs on
 *      that GPU only); at cut s, each value crossing it gets one ampc.PeerCopy (`from` = s,
 *      `rank` = s + 1) whose output the later stages read instead, so a value read two stages
 *      on is copied along the chain; a graph output computed before the last stage is copied
 *      to it (the last GPU gives every output). The nodes are put in stage order with the
 *      copies of cut s between stages s and s + 1, which is the order the GPUs run them in, so
 *      the memory plan's liveness holds on every GPU.
 *   5. the report's stages record each stage (nodes, cost, the tensors crossing after it) for
 *      --report; g->pipeline_stages = N stays after the pipeline (codegen makes one plan per
 *      stage).
 *
 * Running the pass on its own output changes nothing.
 */
#include "passes.h"
#include "ir/activation.h"
#include "ir/attention.h"

#include <stdlib.h>
#include <string.h>

enum { AMPC_PIPE_MAX_CROSS = 8 };
#define AMPC_PIPE_FLOPS_PER_BYTE 100.0
#define AMPC_PIPE_SLACK 0.05 /* of one stage's cost: how far from balance a cut may go */

/* The pass's working state over the live nodes in order. */
typedef struct pipe {
    ampc_graph *g;
    int32_t n_stages, n;   /* stages, live nodes */
    ampc_node **nodes;     /* the live nodes, in order */
    double *prefix;        /* prefix[p]: the cost of nodes [0, p) */
    int32_t *pos;          /* per value id: its producer's position, -1 for none */
    int32_t *last;         /* per value id: its last reader's position (n for a graph output) */
    int64_t *cross_bytes;  /* per position p in [0, n]: bytes of the values crossing a cut at p */
    int32_t *cross_count;
    int32_t *cuts;         /* n_stages + 1 positions: 0, the cuts, n */
} pipe;

/* ---- 1. cost ---------------------------------------------------------------------------------- */

static double numel_d(const ampc_value *v) { return v ? (double)ampc_ir_numel(v) : 0; }

/* The estimated cost of node nd in FLOP-equivalents (the model at the top of the file). */
static double node_cost(const ampc_node *nd) {
    const ampc_op_info *info = ampc_op_get(nd->op);
    const ampc_value *y = nd->n_outputs ? nd->outputs[0] : NULL;
    if (info->lower == LOWER_NONE || !y) return 0;
    bool known = true;
    for (int32_t j = 0; j < nd->n_outputs; j++) known &= nd->outputs[j]->data != NULL;
    if (known) return 0;
    const ampc_value *a = nd->inputs[0], *b = nd->n_inputs > 1 ? nd->inputs[1] : NULL;
    ampc_attention_form f;
    const int64_t *dm = f.dims; /* [B, H, Sq, Sk, D, Dv]: Q K^T and P V */
    if (nd->op == AMPC_OP_FUSED_ATTENTION && ampc_attention_form_of(nd, &f))
        return 2.0 * (double)dm[0] * (double)dm[1] * (double)dm[2] * (double)dm[3] *
               (double)(dm[4] + dm[5]);
    if (ampc_op_has(nd->op, T_CONTRACT) && a && a->shape.rank >= 1) {
        bool ta = ampc_gemm_params_of(nd).ta;
        int32_t r = a->shape.rank;
        double k = (double)a->shape.dims[ta && r >= 2 ? r - 2 : r - 1];
        return 2 * numel_d(y) * k;
    }
    if (ampc_op_has(nd->op, T_CONV) && b && b->shape.rank >= 1 && b->shape.dims[0] > 0)
        return 2 * numel_d(y) * numel_d(b) / (double)b->shape.dims[0];
    double bytes = 0;
    for (int32_t i = 0; i < nd->n_inputs; i++)
        if (nd->inputs[i]) bytes += (double)ampc_ir_nbytes(nd->inputs[i]);
    for (int32_t j = 0; j < nd->n_outputs; j++) bytes += (double)ampc_ir_nbytes(nd->outputs[j]);
    return bytes * AMPC_PIPE_FLOPS_PER_BYTE;
}

/* ---- 2. crossings --------------------------------------------------------------------------- */

/* Fills pos, last, prefix and the crossings of every position. */
static void measure(pipe *P) {
    ampc_graph *g = P->g;
    for (int32_t i = 0; i < g->n_values; i++) P->pos[i] = -1, P->last[i] = -1;
    P->prefix[0] = 0;
    for (int32_t p = 0; p < P->n; p++) {
        const ampc_node *nd = P->nodes[p];
        P->prefix[p + 1] = P->prefix[p] + node_cost(nd);
        for (int32_t j = 0; j < nd->n_outputs; j++) P->pos[nd->outputs[j]->id] = p;
        for (int32_t i = 0; i < nd->n_inputs; i++)
            if (nd->inputs[i]) P->last[nd->inputs[i]->id] = p;
    }
    for (int32_t i = 0; i < g->n_outputs; i++) P->last[g->outputs[i]->id] = P->n;
    /* a value produced at i and last read at j crosses every cut p with i < p <= j: summed
     * with a difference array */
    for (int32_t i = 0; i < g->n_values; i++) {
        const ampc_value *v = g->values[i];
        int32_t from = P->pos[i], to = P->last[i];
        if (from < 0 || to <= from) continue;
        P->cross_bytes[from + 1] += (int64_t)ampc_ir_nbytes(v);
        P->cross_count[from + 1] += 1;
        if (to + 1 <= P->n) {
            P->cross_bytes[to + 1] -= (int64_t)ampc_ir_nbytes(v);
            P->cross_count[to + 1] -= 1;
        }
    }
    for (int32_t p = 1; p <= P->n; p++) {
        P->cross_bytes[p] += P->cross_bytes[p - 1];
        P->cross_count[p] += P->cross_count[p - 1];
    }
}

/* Whether value v crosses a cut at position p. */
static bool crosses(const pipe *P, const ampc_value *v, int32_t p) {
    return P->pos[v->id] >= 0 && P->pos[v->id] < p && P->last[v->id] >= p;
}

/* "'a' f16[2,512,1024], 'b' ..." for the values crossing position p (graph arena). */
static const char *crossing_names(const pipe *P, int32_t p) {
    ampc_strbuf sb = {0};
    char ty[AMPC_TYPE_STR_MAX];
    int32_t k = 0;
    for (int32_t i = 0; i < P->g->n_values; i++) {
        const ampc_value *v = P->g->values[i];
        if (!crosses(P, v, p)) continue;
        ampc_sb_printf(&sb, "%s'%s' %s", k++ ? ", " : "", v->name,
                       ampc_value_type_str(v, ty, sizeof ty));
    }
    const char *s = ampc_arena_strdup(&P->g->arena, sb.data ? sb.data : "");
    ampc_sb_free(&sb);
    return s;
}

/* ---- 3. cuts -------------------------------------------------------------------------------- */

/* Whether candidate position p beats the best so far (-1: none). */
static bool better(const pipe *P, int32_t p, int32_t best, double aim) {
    if (best < 0) return true;
    if (P->cross_bytes[p] != P->cross_bytes[best]) return P->cross_bytes[p] < P->cross_bytes[best];
    if (P->cross_count[p] != P->cross_count[best]) return P->cross_count[p] < P->cross_count[best];
    double dp = P->prefix[p] - aim, db = P->prefix[best] - aim;
    return (dp < 0 ? -dp : dp) < (db < 0 ? -db : db);
}

/* Cut s in (lo, hi]: see stage 3 at the top of the file. */
static ampc_status choose_cut(pipe *P, int32_t s, int32_t lo, int32_t hi) {
    ampc_graph *g = P->g;
    double total = P->prefix[P->n], aim = total * s / P->n_stages;
    double slack = AMPC_PIPE_SLACK * total / P->n_stages;
    int32_t best = -1, nearest = -1, fewest = -1;
    for (int32_t p = lo + 1; p <= hi; p++) {
        if (fewest < 0 || P->cross_count[p] < P->cross_count[fewest]) fewest = p;
        if (P->cross_count[p] > AMPC_PIPE_MAX_CROSS) continue;
        double d = P->prefix[p] - aim;
        if ((d < 0 ? -d : d) <= slack && better(P, p, best, aim)) best = p;
        double dn = nearest < 0 ? 0 : P->prefix[nearest] - aim;
        if (nearest < 0 || (d < 0 ? -d : d) < (dn < 0 ? -dn : dn)) nearest = p;
    }
    if (best < 0) best = nearest;
    if (best < 0)
        return AMPC_FAIL(g, fewest >= 0 ? P->nodes[fewest] : NULL, AMPC_E_UNSUPPORTED,
                         "--partition pipeline: no legal cut for stage %d of %d: every position "
                         "between node '%s' and node '%s' has more than %d tensors crossing (at "
                         "this node, %d: %s); a pipeline stage hands few tensors to the next",
                         s, P->n_stages, P->nodes[lo + 1 < P->n ? lo + 1 : lo]->name,
                         P->nodes[hi < P->n ? hi : P->n - 1]->name, AMPC_PIPE_MAX_CROSS,
                         fewest >= 0 ? P->cross_count[fewest] : 0,
                         fewest >= 0 ? crossing_names(P, fewest) : "");
    P->cuts[s] = best;
    return AMPC_OK;
}

static ampc_status choose_cuts(pipe *P) {
    P->cuts[0] = 0;
    P->cuts[P->n_stages] = P->n;
    for (int32_t s = 1; s < P->n_stages; s++) {
        ampc_status st = choose_cut(P, s, P->cuts[s - 1], P->n - (P->n_stages - s));
        if (st != AMPC_OK) return st;
    }
    return AMPC_OK;
}

/* ---- 4. rewrite ----------------------------------------------------------------------------- */

/* Gives node nd the int attribute `name` = v (replacing one it has). */
static ampc_status set_int_attr(ampc_graph *g, ampc_node *nd, const char *name, int64_t v) {
    for (int32_t i = 0; i < nd->n_attrs; i++)
        if (!strcmp(nd->attrs[i].name, name)) {
            nd->attrs[i].kind = AMPC_ATTR_INT;
            nd->attrs[i].i = v;
            return AMPC_OK;
        }
    ampc_attr *a = ampc_ir_alloc(g, (size_t)(nd->n_attrs + 1) * sizeof *a);
    if (!a) return AMPC_E_OOM;
    if (nd->n_attrs) memcpy(a, nd->attrs, (size_t)nd->n_attrs * sizeof *a);
    a[nd->n_attrs] = (ampc_attr){.name = ampc_arena_strdup(&g->arena, name),
                                 .kind = AMPC_ATTR_INT, .i = v};
    nd->attrs = a;
    nd->n_attrs++;
    return AMPC_OK;
}

/* One ampc.PeerCopy of x from stage s to s + 1; its output, or NULL (diagnosed). */
static ampc_value *peer_copy(ampc_graph *g, ampc_value *x, const char *base, int32_t s) {
    ampc_attr attrs[2] = {{.name = AMPC_ATTR_RANK, .kind = AMPC_ATTR_INT, .i = s + 1},
                          {.name = AMPC_ATTR_PEER_FROM, .kind = AMPC_ATTR_INT, .i = s}};
    char name[200], out[200];
    snprintf(name, sizeof name, "%.160s_to_stage%d", base, s + 1);
    snprintf(out, sizeof out, "%.160s_stage%d", base, s + 1);
    const char *outs[1] = {out};
    ampc_node *nd = NULL;
    if (ampc_ir_node_build(g, AMPC_OP_PEER_COPY, name, &x, 1, attrs, 2, 1, outs, &nd) != AMPC_OK)
        return NULL;
    return nd->outputs[0];
}

/* Puts the ranks and the copies in, then the nodes in stage order. */
static ampc_status rewrite(pipe *P) {
    ampc_graph *g = P->g;
    int32_t n_vals = g->n_values, n_old = g->n_nodes;
    ampc_value **cur = ampc_xcalloc((size_t)n_vals + 1, sizeof *cur);
    const char **base = ampc_xcalloc((size_t)n_vals + 1, sizeof *base);
    int32_t *copies_at = ampc_xcalloc((size_t)P->n_stages + 1, sizeof *copies_at);
    for (int32_t i = 0; i < n_vals; i++) cur[i] = g->values[i], base[i] = g->values[i]->name;
    ampc_status st = AMPC_OK;
    for (int32_t s = 0; s < P->n_stages && st == AMPC_OK; s++) {
        for (int32_t p = P->cuts[s]; p < P->cuts[s + 1] && st == AMPC_OK; p++) {
            ampc_node *nd = P->nodes[p];
            st = set_int_attr(g, nd, AMPC_ATTR_RANK, s);
            for (int32_t i = 0; i < nd->n_inputs; i++) /* what earlier stages sent */
                if (nd->inputs[i] && nd->inputs[i]->id < n_vals) nd->inputs[i] = cur[nd->inputs[i]->id];
        }
        copies_at[s] = g->n_nodes;
        if (s + 1 == P->n_stages) break;
        int32_t c = P->cuts[s + 1];
        for (int32_t i = 0; i < n_vals && st == AMPC_OK; i++) {
            if (!crosses(P, g->values[i], c)) continue;
            ampc_value *y = peer_copy(g, cur[i], base[i], s);
            if (!y) st = ampc_graph_status(g) != AMPC_OK ? ampc_graph_status(g) : AMPC_E_OOM;
            else cur[i] = y;
        }
    }
    for (int32_t i = 0; i < g->n_outputs && st == AMPC_OK; i++) {
        ampc_value *v = g->outputs[i];
        if (v->id < n_vals && cur[v->id] != v) ampc_ir_graph_replace_output(g, i, cur[v->id]);
    }
    if (st == AMPC_OK) { /* stage order: stage s's nodes, then the copies of cut s */
        ampc_node **order = ampc_xcalloc((size_t)g->n_nodes + 1, sizeof *order);
        /* the copies after stage s were built between copies_at[s] and copies_at[s + 1] (the
         * last stage builds none) */
        int32_t k = 0;
        for (int32_t s = 0; s < P->n_stages; s++) {
            for (int32_t p = P->cuts[s]; p < P->cuts[s + 1]; p++) order[k++] = P->nodes[p];
            int32_t from = copies_at[s], to = s + 1 < P->n_stages ? copies_at[s + 1] : from;
            for (int32_t j = from; j < to; j++) order[k++] = g->nodes[j];
        }
        AMPC_ASSERT(k == g->n_nodes && n_old == P->n);
        for (int32_t i = 0; i < k; i++) g->nodes[i] = order[i], order[i]->id = i;
        free(order);
    }
    free(cur);
    free(base);
    free(copies_at);
    return st;
}

/* ---- 5. report ------------------------------------------------------------------------------ */

static ampc_status record_stages(pipe *P, ampc_pipeline_report *r) {
    if (!r) return AMPC_OK;
    r->stages = ampc_ir_alloc(P->g, (size_t)P->n_stages * sizeof *r->stages);
    if (!r->stages) return AMPC_E_OOM;
    r->n_stages = P->n_stages;
    for (int32_t s = 0; s < P->n_stages; s++) {
        int32_t a = P->cuts[s], b = P->cuts[s + 1];
        bool last = s + 1 == P->n_stages;
        r->stages[s] = (ampc_pipeline_stage){
            .first = P->nodes[a]->name, .last = P->nodes[b - 1]->name, .n_nodes = b - a,
            .cost = P->prefix[b] - P->prefix[a], .n_cross = last ? 0 : P->cross_count[b],
            .cross_bytes = last ? 0 : P->cross_bytes[b],
            .crossing = last ? "" : crossing_names(P, b)};
    }
    return AMPC_OK;
}

ampc_status ampc_pass_partition_pipeline(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    const ampc_pipeline_options *o = ampc_pass_opt(cx);
    if (o->partition != AMPC_PARTITION_PIPELINE || o->gpus < 2) return AMPC_OK;
    if (g->pipeline_stages == o->gpus) return AMPC_OK; /* already cut */
    if (g->pipeline_stages > 1)
        return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "--partition pipeline over %d GPUs: the "
                         "graph is already cut into %d stages", o->gpus, g->pipeline_stages);
    ampc_ir_graph_compact(g);
    pipe P = {.g = g, .n_stages = o->gpus, .n = g->n_nodes};
    if (P.n < P.n_stages)
        return AMPC_FAIL(g, NULL, AMPC_E_UNSUPPORTED, "--partition pipeline: the graph has %d "
                         "node%s to run, fewer than the %d stages (one per GPU): no legal cut; "
                         "use fewer GPUs", P.n, P.n == 1 ? "" : "s", P.n_stages);
    P.nodes = ampc_xcalloc((size_t)P.n + 1, sizeof *P.nodes);
    memcpy(P.nodes, g->nodes, (size_t)P.n * sizeof *P.nodes);
    P.prefix = ampc_xcalloc((size_t)P.n + 1, sizeof *P.prefix);
    P.pos = ampc_xcalloc((size_t)g->n_values + 1, sizeof *P.pos);
    P.last = ampc_xcalloc((size_t)g->n_values + 1, sizeof *P.last);
    P.cross_bytes = ampc_xcalloc((size_t)P.n + 2, sizeof *P.cross_bytes);
    P.cross_count = ampc_xcalloc((size_t)P.n + 2, sizeof *P.cross_count);
    P.cuts = ampc_xcalloc((size_t)P.n_stages + 1, sizeof *P.cuts);
    measure(&P);
    ampc_status st = choose_cuts(&P);
    /* the stages recorded before the rewrite: names of this graph */
    if (st == AMPC_OK) st = record_stages(&P, ampc_pass_report(cx));
    if (st == AMPC_OK) st = rewrite(&P);
    free(P.nodes);
    free(P.prefix);
    free(P.pos);
    free(P.last);
    free(P.cross_bytes);
    free(P.cross_count);
    free(P.cuts);
    if (st != AMPC_OK) return ampc_graph_status(g) != AMPC_OK ? ampc_graph_status(g) : st;
    g->pipeline_stages = P.n_stages;
    *changed = true;
    return AMPC_OK;
}
