/*
 * cse.c — common-subexpression elimination.
 *
 *   1. Constants: identical constants (same dtype, shape and bytes, at most CSE_CONST_MAX_BYTES)
 *      are merged into the first one. Larger ones are weights, rarely exact duplicates, and
 *      hashing them would cost time proportional to the model size.
 *   2. Nodes, in topological order: a node with the same op, the same inputs (by identity, after
 *      the merges so far; sorted for commutative ops), equal attributes (deep compare, in any
 *      order), the same number of outputs and the same output types as an earlier node is merged
 *      into it: its uses are redirected there and it is removed.
 *   3. Uses are redirected in one sweep (ampc_ir_graph_replace_uses) and the graph is compacted.
 *
 * Both phases look candidates up in a hash table keyed by a hash of the whole key, so the pass is
 * O(nodes + edges + constant bytes) expected (commutative inputs are sorted: O(k log k) each).
 * Never removed: a node or constant whose value is a graph output (its name is part of the
 * compiled model's interface; later duplicates still merge into it). Never merged: random ops
 * (T_NOFOLD: two draws differ), and nodes with subgraph attributes unless they share the very
 * same subgraph.
 */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

enum { CSE_CONST_MAX_BYTES = 1 << 20 };

/* ---- hashing -------------------------------------------------------------------------------- */

static uint64_t hash_mix(uint64_t h, uint64_t x) {
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull; /* FNV-1a */
    return h;
}

static uint64_t hash_str(uint64_t h, const char *s) { return hash_bytes(h, s, strlen(s) + 1); }

static uint64_t hash_shape(uint64_t h, ampc_dtype t, const ampc_shape *s) {
    h = hash_mix(h, (uint64_t)t);
    h = hash_mix(h, (uint64_t)s->rank);
    for (int32_t i = 0; i < s->rank; i++) h = hash_mix(h, (uint64_t)s->dims[i]);
    return h;
}

static uint64_t hash_attr(const ampc_attr *a) {
    uint64_t h = hash_str(1469598103934665603ull, a->name);
    h = hash_mix(h, (uint64_t)a->kind);
    switch (a->kind) {
    case AMPC_ATTR_INT: return hash_mix(h, (uint64_t)a->i);
    case AMPC_ATTR_FLOAT: return hash_bytes(h, &a->f, sizeof a->f);
    case AMPC_ATTR_STRING: return hash_str(h, a->s);
    case AMPC_ATTR_INTS: return hash_bytes(h, a->ints, (size_t)a->n * sizeof *a->ints);
    case AMPC_ATTR_FLOATS: return hash_bytes(h, a->floats, (size_t)a->n * sizeof *a->floats);
    case AMPC_ATTR_STRINGS:
        for (int32_t i = 0; i < a->n; i++) h = hash_str(h, a->strings[i]);
        return h;
    case AMPC_ATTR_TENSOR:
        h = hash_shape(h, a->tensor->dtype, &a->tensor->shape);
        return hash_bytes(h, a->tensor->data, ampc_ir_nbytes(a->tensor));
    default: return hash_mix(h, (uint64_t)(uintptr_t)a->graph);
    }
}

static bool tensor_eq(const ampc_value *a, const ampc_value *b) {
    return a->dtype == b->dtype && ampc_shape_eq(&a->shape, &b->shape) &&
           !memcmp(a->data, b->data, ampc_ir_nbytes(a));
}

static bool attr_eq(const ampc_attr *a, const ampc_attr *b) {
    if (a->kind != b->kind || strcmp(a->name, b->name)) return false;
    switch (a->kind) {
    case AMPC_ATTR_INT: return a->i == b->i;
    case AMPC_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f); /* bits: nan == nan, 0 != -0 */
    case AMPC_ATTR_STRING: return !strcmp(a->s, b->s);
    case AMPC_ATTR_INTS:
        return a->n == b->n && !memcmp(a->ints, b->ints, (size_t)a->n * sizeof *a->ints);
    case AMPC_ATTR_FLOATS:
        return a->n == b->n && !memcmp(a->floats, b->floats, (size_t)a->n * sizeof *a->floats);
    case AMPC_ATTR_STRINGS:
        if (a->n != b->n) return false;
        for (int32_t i = 0; i < a->n; i++)
            if (strcmp(a->strings[i], b->strings[i])) return false;
        return true;
    case AMPC_ATTR_TENSOR: return tensor_eq(a->tensor, b->tensor);
    default: return a->graph == b->graph;
    }
}

/* ---- the pass state and its hash table ------------------------------------------------------ */

typedef struct cse {
    ampc_graph *g;
    ampc_value **repl; /* by value id: the value that replaces it, or NULL */
    int32_t *ids;      /* canonical input ids of every node, node after node (-1: absent) */
    int32_t *ids_off;  /* by node index: where its ids start */
    int32_t *slot;     /* hash table: node index or value id, -1 for empty */
    uint64_t *slot_hash;
    size_t mask;
} cse;

static void table_reset(cse *c, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    free(c->slot);
    free(c->slot_hash);
    c->slot = ampc_xmalloc(cap * sizeof *c->slot);
    c->slot_hash = ampc_xmalloc(cap * sizeof *c->slot_hash);
    memset(c->slot, 0xff, cap * sizeof *c->slot);
    c->mask = cap - 1;
}

/* The earlier entry equal to `key` under eq, or -1 after inserting key. */
static int32_t table_find_or_add(cse *c, uint64_t h, int32_t key,
                                 bool (*eq)(const cse *, int32_t, int32_t)) {
    size_t i = (size_t)h & c->mask;
    for (; c->slot[i] >= 0; i = (i + 1) & c->mask)
        if (c->slot_hash[i] == h && eq(c, c->slot[i], key)) return c->slot[i];
    c->slot[i] = key;
    c->slot_hash[i] = h;
    return -1;
}

/* ---- constants ------------------------------------------------------------------------------ */

static bool mergeable_const(const ampc_value *v) {
    return v->data && !v->producer && !(v->flags & (AMPC_VALUE_INPUT | AMPC_VALUE_OUTPUT)) &&
           ampc_ir_nbytes(v) <= CSE_CONST_MAX_BYTES;
}

static bool const_eq(const cse *c, int32_t a, int32_t b) {
    return tensor_eq(c->g->values[a], c->g->values[b]);
}

static int32_t merge_constants(cse *c) {
    ampc_graph *g = c->g;
    int32_t merged = 0;
    table_reset(c, (size_t)g->n_values);
    for (int32_t i = 0; i < g->n_values; i++) {
        ampc_value *v = g->values[i];
        if (!mergeable_const(v)) continue;
        uint64_t h = hash_shape(1469598103934665603ull, v->dtype, &v->shape);
        h = hash_bytes(h, v->data, ampc_ir_nbytes(v));
        int32_t rep = table_find_or_add(c, h, i, const_eq);
        if (rep >= 0) {
            c->repl[i] = g->values[rep];
            merged++;
        }
    }
    return merged;
}

/* ---- nodes ---------------------------------------------------------------------------------- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static bool node_eq(const cse *c, int32_t ia, int32_t ib) {
    const ampc_node *a = c->g->nodes[ia], *b = c->g->nodes[ib];
    if (a->op != b->op || a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs ||
        a->n_attrs != b->n_attrs)
        return false;
    if (memcmp(c->ids + c->ids_off[ia], c->ids + c->ids_off[ib],
               (size_t)a->n_inputs * sizeof *c->ids))
        return false;
    for (int32_t i = 0; i < a->n_outputs; i++) {
        const ampc_value *x = a->outputs[i], *y = b->outputs[i];
        if (x->dtype != y->dtype || !ampc_shape_eq(&x->shape, &y->shape)) return false;
    }
    for (int32_t i = 0; i < a->n_attrs; i++) { /* same names in any order */
        const ampc_attr *o = ampc_ir_attr_find(b, a->attrs[i].name);
        if (!o || !attr_eq(&a->attrs[i], o)) return false;
    }
    return true;
}

/* A node that produces a graph output can be the one others merge into, never one that goes. */
static bool produces_graph_output(const ampc_node *n) {
    for (int32_t i = 0; i < n->n_outputs; i++)
        if (n->outputs[i]->flags & AMPC_VALUE_OUTPUT) return true;
    return false;
}

static int32_t merge_nodes(cse *c) {
    ampc_graph *g = c->g;
    int32_t merged = 0, total = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) total += g->nodes[i]->n_inputs;
    c->ids = ampc_xmalloc(((size_t)total + 1) * sizeof *c->ids);
    c->ids_off = ampc_xmalloc(((size_t)g->n_nodes + 1) * sizeof *c->ids_off);
    table_reset(c, (size_t)g->n_nodes);
    int32_t off = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        ampc_node *n = g->nodes[i];
        c->ids_off[i] = off;
        int32_t *ids = c->ids + off;
        off += n->n_inputs;
        if (n->dead || ampc_op_has(n->op, T_NOFOLD)) continue;
        for (int32_t j = 0; j < n->n_inputs; j++) {
            const ampc_value *v = n->inputs[j];
            if (v && c->repl[v->id]) v = c->repl[v->id];
            ids[j] = v ? v->id : -1;
        }
        if (ampc_op_has(n->op, T_COMMUT)) qsort(ids, (size_t)n->n_inputs, sizeof *ids, cmp_i32);
        uint64_t h = hash_mix(1469598103934665603ull, (uint64_t)n->op);
        h = hash_mix(h, (uint64_t)n->n_outputs);
        h = hash_mix(h, (uint64_t)n->n_inputs);
        for (int32_t j = 0; j < n->n_inputs; j++) h = hash_mix(h, (uint64_t)(int64_t)ids[j]);
        uint64_t ah = 0;
        for (int32_t j = 0; j < n->n_attrs; j++) ah += hash_attr(&n->attrs[j]); /* any order */
        h = hash_mix(h, ah);
        int32_t rep = table_find_or_add(c, h, i, node_eq);
        if (rep < 0 || produces_graph_output(n)) continue;
        for (int32_t j = 0; j < n->n_outputs; j++)
            c->repl[n->outputs[j]->id] = g->nodes[rep]->outputs[j];
        ampc_ir_node_remove(g, n);
        merged++;
    }
    return merged;
}

ampc_status ampc_pass_cse(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    cse c = {.g = g};
    c.repl = ampc_xcalloc((size_t)g->n_values + 1, sizeof *c.repl);
    int32_t merged = merge_constants(&c);
    merged += merge_nodes(&c);
    if (merged) {
        ampc_ir_graph_replace_uses(g, c.repl);
        ampc_ir_graph_compact(g);
    }
    free(c.repl);
    free(c.ids);
    free(c.ids_off);
    free(c.slot);
    free(c.slot_hash);
    *changed = merged > 0;
    return AMPC_OK;
}
