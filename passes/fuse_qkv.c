/*
 * fuse_qkv.c — the projections an attention reads become one matmul:
 *
 *   Q = x @ Wq + bq,   K = x @ Wk + bk,   V = x @ Wv + bv     (each then Reshaped into heads)
 *     ->   Y = x @ [Wq | Wk | Wv] + [bq | bk | bv]            (one GEMM, N = Nq + Nk + Nv)
 *
 * and ampc.FusedAttention reads Q, K and V out of Y's columns: operand i starts at element
 * offsets[i] (its first column) and each of its steps that crossed rows of its own projection
 * ([rows, N_i]) now crosses as many rows of Y ([rows, N]). One GEMM with N = 2304 fills the GPU
 * where three with N = 768 did not (BERT-base at 4096 tokens: 576 output tiles of 128 x 128, 4.4
 * waves on 132 SMs, against three times 192 tiles, 1.45 waves each), and two launches of a layer
 * go.
 *
 * The pass runs after fuse-attention, whose node says the projections are read as attention
 * operands and nothing else, and before fuse-matmul, which then puts the joined bias into the
 * GEMM's epilogue. Operand i of an ampc.FusedAttention qualifies when
 *   - it is a Reshape that only splits the last dim of its input ([.., N] -> [.., H, D]: the same
 *     bytes), read by this node only, or else it is the projection itself;
 *   - the projection is MatMul(x, W), W a constant [K, N] matrix, optionally followed by an Add
 *     of a constant bias of N values, each value read once;
 *   - its steps stay inside one row of the projection, or move by whole rows (the head split
 *     reads columns h D .. h D + D - 1 of each row).
 * Qualifying operands whose projections share x, the dtype, K, the bias (all have one or none)
 * and the `rank` of a partitioned graph (docs/multi-gpu.md) merge, two or three of them (cross-
 * attention merges K and V, whose x is the encoder's). A projection the sparsity pass marked 2:4
 * stays alone: its decision and report entry belong to its own weight.
 *
 * The result is exact: each column of Y is the dot product it was, so the graph computes what it
 * did, bit for bit, on the reference evaluator.
 */
#include "passes.h"
#include "ir/attention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One operand's projection, x @ w [+ bias], with the Reshape the attention reads it through. */
typedef struct proj {
    ampc_node *mm, *add, *reshape; /* add and reshape may be NULL */
    ampc_value *x, *w, *bias;
    int64_t n, rank; /* N; the `rank` attribute, -1 when replicated */
} proj;

/* How many of n's inputs are v. */
static int32_t reads(const ampc_node *n, const ampc_value *v) {
    int32_t c = 0;
    for (int32_t i = 0; i < n->n_inputs; i++) c += n->inputs[i] == v;
    return c;
}

/* Whether y is x with its last dim split (same leading dims, the rest multiplying to it). */
static bool splits_last_dim(const ampc_value *x, const ampc_value *y) {
    const int32_t r = x->shape.rank;
    if (r < 1 || y->shape.rank < r) return false;
    for (int32_t d = 0; d < r - 1; d++)
        if (x->shape.dims[d] != y->shape.dims[d]) return false;
    int64_t p = 1;
    for (int32_t d = r - 1; d < y->shape.rank; d++) p *= y->shape.dims[d];
    return p == x->shape.dims[r - 1];
}

/* The constant bias of N values among an Add's inputs (the other one is *other), or NULL. */
static ampc_value *bias_side(const ampc_node *add, int64_t n, ampc_value **other) {
    for (int32_t s = 0; s < 2; s++) {
        ampc_value *c = add->inputs[s], *o = add->inputs[1 - s];
        if (c->data && c->dtype == o->dtype && c->shape.rank >= 1 &&
            c->shape.dims[c->shape.rank - 1] == n && ampc_ir_numel(c) == n &&
            ampc_shape_eq(&add->outputs[0]->shape, &o->shape)) {
            *other = o;
            return c;
        }
    }
    return NULL;
}

/* Operand i of attention node fa as a projection (see the file comment), or false. */
static bool find_proj(const ampc_uses *u, const ampc_node *fa, int32_t i, proj *p) {
    memset(p, 0, sizeof *p);
    ampc_value *v = fa->inputs[i], *out = v;
    ampc_attention_form f;
    if (!ampc_attention_form_of(fa, &f) || u->count[v->id] != reads(fa, v) || f.off[i])
        return false; /* an offset: it reads part of a tensor already */
    ampc_node *d = v->producer;
    if (d && !d->dead && d->op == AMPC_OP_RESHAPE && splits_last_dim(d->inputs[0], v)) {
        p->reshape = d;
        out = d->inputs[0];
        if (ampc_pass_only_user(u, out) != d) return false;
    }
    if (out->shape.rank < 2) return false;
    p->n = out->shape.dims[out->shape.rank - 1];
    ampc_value *prod = out;
    d = out->producer;
    if (d && !d->dead && d->op == AMPC_OP_ADD && d->n_inputs == 2) {
        p->add = d;
        if (!(p->bias = bias_side(d, p->n, &prod)) || ampc_pass_only_user(u, prod) != d)
            return false;
        d = prod->producer;
    }
    if (!d || d->dead || d->op != AMPC_OP_MATMUL || ampc_node_sparse24(d)) return false;
    p->mm = d;
    p->x = d->inputs[0], p->w = d->inputs[1];
    if (!p->w->data || p->w->shape.rank != 2 || p->w->shape.dims[1] != p->n ||
        p->w->dtype != p->x->dtype || p->x->shape.rank < 2 || !ampc_dtype_is_float(p->x->dtype))
        return false;
    p->rank = ampc_node_rank(d);
    return (!p->add || ampc_node_rank(p->add) == p->rank) &&
           (!p->reshape || ampc_node_rank(p->reshape) == p->rank) && ampc_node_rank(fa) == p->rank;
}

static bool same_group(const proj *a, const proj *b) {
    return a->x == b->x && a->w->dtype == b->w->dtype && a->w->shape.dims[0] == b->w->shape.dims[0] &&
           !a->bias == !b->bias && a->rank == b->rank;
}

/* The operands' extents, in the (b, h, s, d) order of their strides (K and V have H / kv_group
 * heads). */
static void extents(const ampc_attention_form *f, int64_t ext[3][4]) {
    const int64_t *dm = f->dims; /* B, H, Sq, Sk, D, Dv */
    const int64_t kvh = dm[1] / f->group;
    const int64_t e[3][4] = {{dm[0], dm[1], dm[2], dm[4]}, {dm[0], kvh, dm[3], dm[4]},
                             {dm[0], kvh, dm[3], dm[5]}};
    memcpy(ext, e, sizeof e);
}

/* Steps st over extents ext into a [rows, n] tensor, as steps into a [rows, total] one: a step
 * of whole rows scales, a step inside a row stays, provided the in-row steps together stay inside
 * one row. False when they do not. */
static bool restride(const int64_t ext[4], int64_t st[4], int64_t n, int64_t total) {
    int64_t reach = 0;
    for (int32_t d = 0; d < 4; d++) {
        if (ext[d] == 1) st[d] = 0;
        else if (st[d] % n == 0) st[d] = st[d] / n * total;
        else reach += (ext[d] - 1) * st[d];
    }
    return reach < n;
}

/* [a | b | ...] of the members' constants along the last dim: W (rows K) or the bias (1 row). */
static ampc_value *join(ampc_graph *g, const ampc_value *const *part, int32_t k, int64_t rows,
                        int64_t total, bool matrix) {
    const ampc_dtype t = part[0]->dtype;
    const size_t es = ampc_dtype_size(t);
    unsigned char *data = malloc((size_t)(rows * total) * es + 1);
    if (!data) return NULL;
    for (int64_t r = 0, at = 0; r < rows; r++)
        for (int32_t m = 0; m < k; m++) {
            const int64_t n = part[m]->shape.dims[part[m]->shape.rank - 1];
            memcpy(data + (size_t)at * es, (const unsigned char *)part[m]->data + (size_t)(r * n) * es,
                   (size_t)n * es);
            at += n;
        }
    const ampc_shape s = matrix ? (ampc_shape){2, {rows, total}} : (ampc_shape){1, {total}};
    char name[160];
    snprintf(name, sizeof name, "%.140s_joined", part[0]->name);
    ampc_value *v = ampc_ir_const_new(g, name, t, &s, data);
    free(data);
    return v;
}

/* A node of the merged projection, with the members' `rank`; its output, or NULL. */
static ampc_value *build(ampc_graph *g, ampc_opcode op, const char *name, ampc_value *a,
                         ampc_value *b, int64_t rank) {
    const ampc_attr r = {.name = AMPC_ATTR_RANK, .kind = AMPC_ATTR_INT, .i = rank};
    ampc_value *in[2] = {a, b};
    ampc_node *n = NULL;
    if (ampc_ir_node_build(g, op, name, in, 2, &r, rank >= 0, 1, NULL, &n) != AMPC_OK) return NULL;
    return n->outputs[0];
}

/* Merges the projections of the operands in `ops` (k of them, distinct projections in `mem`,
 * operand ops[j] reading member of[j]) and re-points fa at the joined value. */
static ampc_status merge(ampc_graph *g, ampc_node *fa, const proj *mem, int32_t n_mem,
                         const int32_t *ops, const int32_t *of, int32_t k) {
    int64_t total = 0, start[3], ext[3][4];
    for (int32_t m = 0; m < n_mem; m++) start[m] = total, total += mem[m].n;
    ampc_attention_form f;
    if (!ampc_attention_form_of(fa, &f)) return AMPC_OK;
    extents(&f, ext);
    int64_t *st[3] = {f.qs, f.ks, f.vs};
    for (int32_t j = 0; j < k; j++)
        if (!restride(ext[ops[j]], st[ops[j]], mem[of[j]].n, total)) return AMPC_OK;
    const ampc_value *ws[3], *bs[3];
    for (int32_t m = 0; m < n_mem; m++) ws[m] = mem[m].w, bs[m] = mem[m].bias;
    char name[160];
    snprintf(name, sizeof name, "%.140s_qkv", mem[0].mm->name);
    ampc_value *w = join(g, ws, n_mem, mem[0].w->shape.dims[0], total, true);
    ampc_value *y = w ? build(g, AMPC_OP_MATMUL, name, mem[0].x, w, mem[0].rank) : NULL;
    if (y && mem[0].bias) {
        ampc_value *b = join(g, bs, n_mem, 1, total, false);
        snprintf(name, sizeof name, "%.140s_qkv_bias", mem[0].mm->name);
        y = b ? build(g, AMPC_OP_ADD, name, y, b, mem[0].rank) : NULL;
    }
    if (!y) return AMPC_E_OOM;
    for (int32_t j = 0; j < k; j++) {
        fa->inputs[ops[j]] = y;
        f.off[ops[j]] = start[of[j]];
    }
    if (ampc_attention_form_set(g, fa, &f) != AMPC_OK) return AMPC_E_OOM;
    for (int32_t m = 0; m < n_mem; m++) {
        ampc_node *gone[3] = {mem[m].reshape, mem[m].add, mem[m].mm};
        for (int32_t i = 0; i < 3; i++)
            if (gone[i]) ampc_ir_node_remove(g, gone[i]);
    }
    return ampc_ir_node_infer(g, fa);
}

/* Groups fa's qualifying operands by x (see the file comment) and merges each group of two or
 * more projections; *changed when one merged. */
static ampc_status fuse_node(ampc_graph *g, const ampc_uses *u, ampc_node *fa, bool *changed) {
    proj p[3];
    bool ok[3];
    for (int32_t i = 0; i < 3; i++) ok[i] = find_proj(u, fa, i, &p[i]);
    bool done[3] = {false, false, false};
    for (int32_t i = 0; i < 3; i++) {
        if (!ok[i] || done[i]) continue;
        proj mem[3];
        int32_t ops[3], of[3], k = 0, n_mem = 0;
        for (int32_t j = i; j < 3; j++) {
            if (!ok[j] || done[j] || !same_group(&p[i], &p[j])) continue;
            int32_t m = 0;
            while (m < n_mem && mem[m].mm != p[j].mm) m++;
            if (m == n_mem) mem[n_mem++] = p[j];
            ops[k] = j, of[k++] = m, done[j] = true;
        }
        if (n_mem < 2) continue;
        const int32_t before = g->n_nodes;
        ampc_status st = merge(g, fa, mem, n_mem, ops, of, k);
        if (st != AMPC_OK) return st;
        *changed |= g->n_nodes != before;
    }
    return AMPC_OK;
}

ampc_status ampc_pass_fuse_qkv(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    const int32_t n_old = g->n_nodes;
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; i < n_old && st == AMPC_OK; i++) {
        ampc_node *n = g->nodes[i];
        if (!n->dead && n->op == AMPC_OP_FUSED_ATTENTION && n->n_inputs >= 3)
            st = fuse_node(g, &uses, n, changed);
    }
    ampc_pass_uses_free(&uses);
    if (st == AMPC_E_OOM) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    if (*changed) {
        ampc_ir_graph_settle(g, n_old);
        ampc_ir_graph_compact(g);
    }
    return st;
}
