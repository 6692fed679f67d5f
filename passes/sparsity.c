/*
 * sparsity.c — 2:4 structured sparsity of constant weights (--sparsity verify|prune).
 *
 * Sparse tensor cores (sm_80 and later, mma.sp) multiply a matrix in which every group of 4
 * consecutive elements along the reduction dimension K holds at most 2 non-zeros at twice the
 * dense rate. This pass decides which weights have that form; codegen/sparse24.c compresses
 * them for the instruction. It runs after precision (the weights are in their final dtype) and
 * before the fusions and the layout pass, which keep what it decided (the node's sparse24
 * attribute; see below for why the layout pass's weight permutation keeps the pattern).
 *
 *  1. Eligibility. A MatMul, Gemm, ampc.FusedMatMul, Conv or ampc.FusedConv whose weight (input
 *     1) is a compile-time constant of f32, f16 or bf16 with K groups of 4 whole. The weight seen
 *     as [outer, A, inner] row-major, groups of 4 run along A (stride inner):
 *       MatMul, FusedMatMul  B [K, N]: K runs along rows, A = K, inner = N;
 *       Gemm, transB = 0     B [K, N]: the same;
 *       Gemm, transB = 1     B [N, K]: K runs along columns, outer = N, A = K, inner = 1;
 *       Conv, FusedConv      W [M, C/group, k1..kd] (NCHW): K = C/group * k1 * ... * kd, taken in
 *                            the order (k1, ..., kd, c) with the channel fastest — the implicit
 *                            GEMM of a channels-last convolution, the form the layout pass gives
 *                            f16/bf16 convolutions. Groups of 4 run along the channels at one
 *                            kernel position: outer = M, A = C/group, inner = k1 * ... * kd. So
 *                            C/group must be a multiple of 4 (which makes K one), and the
 *                            pattern survives the layout pass's permutation to [M, k1..kd, C/g];
 *       FusedConv, channels_last = 1  W [M, k1..kd, C/group]: outer = M * k1 * ... * kd, A =
 *                            C/group, inner = 1 (the same groups).
 *  2. VERIFY (and PRUNE for a weight already in form): a weight whose every group has at most 2
 *     non-zeros (-0 is zero, NaN is not) marks its node with the int attribute sparse24 = 1;
 *     nothing else changes. A node marked before whose weight is not 2:4 loses the mark.
 *  3. PRUNE: every other eligible weight whose node the sparsity_layers glob matches (all of
 *     them without a glob) is magnitude-pruned: in each group the 2 largest |w| stay (ties go to
 *     the lower index), the others become +0. The node reads a new constant "<w>_24" (the old one
 *     is left to dce), is marked, and its record holds the fraction of the weight's energy
 *     (sum of w^2) removed. This changes the model's numbers.
 *  4. The record: one ampc_sparse_layer per contraction or convolution in the report's
 *     sparse_layers (node, op, weight shape, K, status, energy removed) for --report.
 */
#define _POSIX_C_SOURCE 200809L /* fnmatch */
#include "passes.h"
#include "ir/activation.h"
#include "ir/conv.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A weight seen as [outer, axis, inner] row-major with its groups of 4 along `axis`. */
typedef struct weight_view {
    ampc_value *w;
    int64_t outer, axis, inner;
    int64_t k; /* the reduction dimension K, for the record */
} weight_view;

static bool sparse_candidate(ampc_opcode op) {
    return op == AMPC_OP_MATMUL || op == AMPC_OP_GEMM || op == AMPC_OP_FUSED_MATMUL ||
           op == AMPC_OP_CONV || op == AMPC_OP_FUSED_CONV;
}

/* The view of a convolution's weight W [M, C/group, k...] or, channels-last, [M, k..., C/group]. */
static ampc_sparse_why conv_view(const ampc_node *n, weight_view *v) {
    const ampc_value *w = v->w;
    if (w->shape.rank < 3) return SPARSE_WHY_SHAPE;
    const bool last = ampc_conv_channels_last(n);
    int32_t r = w->shape.rank;
    int64_t spatial = 1;
    for (int32_t i = last ? 1 : 2; i < (last ? r - 1 : r); i++) spatial *= w->shape.dims[i];
    int64_t cg = w->shape.dims[last ? r - 1 : 1];
    *v = (weight_view){.w = v->w, .outer = last ? w->shape.dims[0] * spatial : w->shape.dims[0],
                       .axis = cg, .inner = last ? 1 : spatial, .k = cg * spatial};
    return cg % 4 ? SPARSE_WHY_CHANNELS : SPARSE_WHY_ALREADY;
}

/* The weight of n and its view; SPARSE_WHY_ALREADY stands for "eligible" here, any other value
 * says why not. */
static ampc_sparse_why view_of(const ampc_node *n, weight_view *v) {
    memset(v, 0, sizeof *v);
    v->w = n->n_inputs > 1 ? n->inputs[1] : NULL;
    const ampc_value *w = v->w;
    if (!w || !w->data) return SPARSE_WHY_NOT_CONSTANT;
    if (w->dtype != AMPC_DTYPE_F32 && w->dtype != AMPC_DTYPE_F16 && w->dtype != AMPC_DTYPE_BF16)
        return SPARSE_WHY_DTYPE;
    if (ampc_ir_numel(w) == 0) return SPARSE_WHY_EMPTY;
    if (n->op == AMPC_OP_CONV || n->op == AMPC_OP_FUSED_CONV) return conv_view(n, v);
    if (w->shape.rank != 2) return SPARSE_WHY_SHAPE;
    int64_t rows = w->shape.dims[0], cols = w->shape.dims[1];
    if (ampc_gemm_params_of(n).tb)
        v->outer = rows, v->axis = cols, v->inner = 1; /* B [N, K] */
    else
        v->outer = 1, v->axis = rows, v->inner = cols; /* B [K, N] */
    v->k = v->axis;
    return v->axis % 4 ? SPARSE_WHY_K : SPARSE_WHY_ALREADY;
}

/* ---- reading and writing elements ----------------------------------------------------------- */

static double get(const ampc_value *w, const void *data, int64_t i) {
    switch (w->dtype) {
    case AMPC_DTYPE_F16: return ampc_f16_to_f32(((const uint16_t *)data)[i]);
    case AMPC_DTYPE_BF16: return ampc_bf16_to_f32(((const uint16_t *)data)[i]);
    default: return ((const float *)data)[i];
    }
}

/* Sets element i to +0 (all bits clear in every dtype the pass takes). */
static void clear(const ampc_value *w, void *data, int64_t i) {
    if (w->dtype == AMPC_DTYPE_F32) ((float *)data)[i] = 0.0f;
    else ((uint16_t *)data)[i] = 0;
}

/* The index of element 0 of group q (of outer * axis/4 * inner, in storage order). */
static int64_t group_base(const weight_view *v, int64_t q) {
    int64_t i = q % v->inner, r = q / v->inner, per_row = v->axis / 4;
    return ((r / per_row) * v->axis + (r % per_row) * 4) * v->inner + i;
}

/* Runs the statement after it with `base` the first element of each group in turn; the group's
 * elements are base + j * v->inner, j = 0..3. */
#define FOR_EACH_GROUP(v, base)                                                                   \
    for (int64_t q_ = 0, n_ = (v)->outer * ((v)->axis / 4) * (v)->inner, base = 0;                \
         q_ < n_ && ((base = group_base((v), q_)), true); q_++)

/* Every group of 4 along K holds at most 2 non-zeros. */
static bool is_24(const weight_view *v) {
    FOR_EACH_GROUP(v, base) {
        int nz = 0;
        for (int j = 0; j < 4; j++) nz += get(v->w, v->w->data, base + j * v->inner) != 0;
        if (nz > 2) return false;
    }
    return true;
}

/* Prunes data (a copy of the weight's) to 2:4: the 2 largest magnitudes of each group stay,
 * ties to the lower index. Returns the sum of the removed squares; *total gets the sum of all. */
static double prune(const weight_view *v, void *data, double *total) {
    double removed = 0;
    *total = 0;
    FOR_EACH_GROUP(v, base) {
        double x[4];
        int keep0 = 0, keep1 = -1;
        for (int j = 0; j < 4; j++) {
            x[j] = get(v->w, data, base + j * v->inner);
            *total += x[j] * x[j];
            if (fabs(x[j]) > fabs(x[keep0])) keep0 = j;
        }
        for (int j = 0; j < 4; j++)
            if (j != keep0 && (keep1 < 0 || fabs(x[j]) > fabs(x[keep1]))) keep1 = j;
        for (int j = 0; j < 4; j++) {
            if (j == keep0 || j == keep1) continue;
            removed += x[j] * x[j];
            clear(v->w, data, base + j * v->inner);
        }
    }
    return removed;
}

/* ---- marks and records ---------------------------------------------------------------------- */


/* Gives n the attribute sparse24 = 1 (on = true) or takes it away; true when that changed n. */
static bool set_mark(ampc_graph *g, ampc_node *n, bool on, ampc_status *st) {
    if (ampc_node_sparse24(n) == on) return false;
    if (!on) { /* drop it, keeping the other attributes in order */
        int32_t k = 0;
        for (int32_t i = 0; i < n->n_attrs; i++)
            if (strcmp(n->attrs[i].name, AMPC_ATTR_SPARSE24)) n->attrs[k++] = n->attrs[i];
        n->n_attrs = k;
        return true;
    }
    ampc_attr *attrs = ampc_ir_alloc(g, (size_t)(n->n_attrs + 1) * sizeof *attrs);
    if (!attrs) {
        *st = AMPC_E_OOM;
        return false;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < n->n_attrs; i++) /* a sparse24 = 0 the model gave goes */
        if (strcmp(n->attrs[i].name, AMPC_ATTR_SPARSE24)) attrs[k++] = n->attrs[i];
    attrs[k++] = (ampc_attr){.name = AMPC_ATTR_SPARSE24, .kind = AMPC_ATTR_INT, .i = 1};
    n->attrs = attrs;
    n->n_attrs = k;
    return true;
}

/* Replaces n's weight by its 2:4-pruned copy; *energy gets the fraction of sum w^2 removed. */
static ampc_status prune_node(ampc_graph *g, ampc_node *n, const weight_view *v, double *energy) {
    size_t bytes = ampc_ir_nbytes(v->w);
    void *data = malloc(bytes);
    if (!data) return AMPC_E_OOM;
    memcpy(data, v->w->data, bytes);
    double total, removed = prune(v, data, &total);
    *energy = total > 0 ? removed / total : 0;
    char name[160];
    snprintf(name, sizeof name, "%.140s_24", v->w->name);
    ampc_value *c = ampc_ir_const_new(g, name, v->w->dtype, &v->w->shape, data);
    free(data);
    if (!c) return AMPC_E_OOM;
    n->inputs[1] = c;
    return AMPC_OK;
}

static bool selected(const ampc_pipeline_options *o, const ampc_node *n) {
    return !o->sparsity_layers || fnmatch(o->sparsity_layers, n->name, 0) == 0;
}

/* Decides for one candidate node and fills its record. */
static ampc_status visit(ampc_graph *g, const ampc_pipeline_options *o, ampc_node *n,
                         ampc_sparse_layer *rec, bool *changed) {
    weight_view v;
    ampc_sparse_why why = view_of(n, &v);
    ampc_status st = AMPC_OK;
    *rec = (ampc_sparse_layer){.node = n->name, .op = n->op, .k = v.k, .status = why};
    if (v.w) rec->shape = v.w->shape;
    bool mark = false;
    if (why == SPARSE_WHY_ALREADY && is_24(&v)) {
        mark = true;
    } else if (why == SPARSE_WHY_ALREADY && o->sparsity == AMPC_SPARSITY_VERIFY) {
        rec->status = SPARSE_WHY_DENSE;
    } else if (why == SPARSE_WHY_ALREADY && !selected(o, n)) {
        rec->status = SPARSE_WHY_UNSELECTED;
    } else if (why == SPARSE_WHY_ALREADY) {
        if ((st = prune_node(g, n, &v, &rec->energy_removed)) != AMPC_OK) return st;
        rec->status = SPARSE_WHY_PRUNED;
        mark = *changed = true;
    }
    if (set_mark(g, n, mark, &st)) *changed = true;
    return st;
}

/* A glob that matches no candidate node is almost certainly a typo: an error naming it. */
static ampc_status check_glob(ampc_graph *g, const ampc_pipeline_options *o) {
    if (!o->sparsity_layers || o->sparsity != AMPC_SPARSITY_PRUNE) return AMPC_OK;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->dead && sparse_candidate(g->nodes[i]->op) && selected(o, g->nodes[i]))
            return AMPC_OK;
    return AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG,
                     "sparsity-layers '%s' matches no MatMul, Gemm or Conv node of graph '%s' "
                     "(a glob on node names such as 'layer1.*')",
                     o->sparsity_layers, g->name ? g->name : "");
}

const char *ampc_sparse_why_str(ampc_sparse_why why) {
    switch (why) {
    case SPARSE_WHY_ALREADY: return "already 2:4";
    case SPARSE_WHY_PRUNED: return "pruned to 2:4";
    case SPARSE_WHY_DENSE: return "dense (verify does not prune)";
    case SPARSE_WHY_UNSELECTED: return "dense (not matched by --sparsity-layers)";
    case SPARSE_WHY_NOT_CONSTANT: return "not eligible: the weight is not a compile-time constant";
    case SPARSE_WHY_DTYPE: return "not eligible: the weight is not f32, f16 or bf16";
    case SPARSE_WHY_SHAPE: return "not eligible: the weight is not a matrix";
    case SPARSE_WHY_K: return "not eligible: K is not a multiple of 4";
    case SPARSE_WHY_CHANNELS:
        return "not eligible: C/group is not a multiple of 4 (groups of 4 run along the channels)";
    case SPARSE_WHY_EMPTY: return "not eligible: the weight is empty";
    }
    return "?";
}

ampc_status ampc_pass_sparsity(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    const ampc_pipeline_options *o = ampc_pass_opt(cx);
    ampc_pipeline_report *report = ampc_pass_report(cx);
    if (report) report->sparse_layers = NULL, report->n_sparse_layers = 0;
    if (o->sparsity == AMPC_SPARSITY_OFF) return AMPC_OK;
    ampc_status st = check_glob(g, o);
    if (st != AMPC_OK) return st;
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) n += !g->nodes[i]->dead && sparse_candidate(g->nodes[i]->op);
    ampc_sparse_layer *recs = ampc_ir_alloc(g, (size_t)(n ? n : 1) * sizeof *recs);
    if (!recs) return AMPC_E_OOM;
    int32_t k = 0;
    for (int32_t i = 0; st == AMPC_OK && i < g->n_nodes; i++) {
        ampc_node *nd = g->nodes[i];
        if (!nd->dead && sparse_candidate(nd->op)) st = visit(g, o, nd, &recs[k++], changed);
    }
    if (st == AMPC_E_OOM)
        return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory in the sparsity pass");
    if (report) report->sparse_layers = recs, report->n_sparse_layers = k;
    return st;
}
