/*
 * tfidf.c — TfIdfVectorizer's parameters and n-gram trie (tfidf.h).
 */
#include "ir/tfidf.h"

#include <stdlib.h>

ampc_tfidf ampc_tfidf_of(ampc_graph *g, const ampc_node *n) {
    ampc_tfidf p = {0};
    p.counts = ampc_ir_attr_ints(g, n, "ngram_counts", &p.n_counts);
    p.indexes = ampc_ir_attr_ints(g, n, "ngram_indexes", &p.n_indexes);
    p.pool = ampc_ir_attr_ints(g, n, "pool_int64s", &p.n_pool);
    if (!p.pool) p.n_pool = 0;
    p.weights = ampc_ir_attr_floats(g, n, "weights", &p.n_weights);
    p.mode = ampc_ir_attr_string(g, n, "mode", "TF");
    p.min_len = ampc_ir_attr_int(g, n, "min_gram_length", 1);
    p.max_len = ampc_ir_attr_int(g, n, "max_gram_length", 1);
    p.skips = ampc_ir_attr_int(g, n, "max_skip_count", 0) + 1;
    return p;
}

static uint64_t hash(int64_t parent, int64_t token) {
    uint64_t h = (uint64_t)parent * 0x9E3779B97F4A7C15ull ^ (uint64_t)token;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
}

/* The node of (parent, token), or -1 with *slot the empty slot where it would go. */
static int64_t find(const ampc_tfidf_trie *t, int64_t parent, int64_t token, uint64_t *slot) {
    for (uint64_t s = hash(parent, token) & t->mask;; s = (s + 1) & t->mask) {
        int64_t k = t->slots[s] - 1;
        if (k < 0) {
            *slot = s;
            return -1;
        }
        if (t->nodes[k].parent == parent && t->nodes[k].token == token) return k;
    }
}

int64_t ampc_tfidf_child(const ampc_tfidf_trie *t, int64_t parent, int64_t token) {
    uint64_t slot;
    return find(t, parent, token, &slot);
}

/* The child of `parent` for `token`, made when absent. */
static int64_t child(ampc_tfidf_trie *t, int64_t parent, int64_t token) {
    uint64_t slot;
    int64_t k = find(t, parent, token, &slot);
    if (k >= 0) return k;
    t->nodes[t->n] = (ampc_tfidf_node){token, parent, 0};
    t->slots[slot] = ++t->n;
    return t->n - 1;
}

bool ampc_tfidf_trie_build(const ampc_tfidf *p, ampc_tfidf_trie *t) {
    uint64_t cap = 4;
    while (cap < 2 * ((uint64_t)p->n_pool + 1)) cap *= 2;
    *t = (ampc_tfidf_trie){calloc((size_t)p->n_pool + 1, sizeof *t->nodes), 1,
                           calloc(cap, sizeof *t->slots), cap - 1};
    if (!t->nodes || !t->slots) {
        ampc_tfidf_trie_free(t);
        return false;
    }
    t->nodes[0] = (ampc_tfidf_node){0, -1, 0};
    /* The n-grams of the wanted sizes; ids count every n-gram of the pool. */
    int64_t id = 1;
    for (int32_t i = 0; i < p->n_counts; i++) {
        int64_t size = i + 1, start = p->counts[i];
        int64_t end = i + 1 < p->n_counts ? p->counts[i + 1] : p->n_pool;
        for (int64_t at = start; at + size <= end; at += size, id++) {
            if (size < p->min_len || size > p->max_len) continue;
            int64_t node = 0;
            for (int64_t e = 0; e < size; e++) node = child(t, node, p->pool[at + e]);
            t->nodes[node].id = id;
        }
    }
    return true;
}

void ampc_tfidf_trie_free(ampc_tfidf_trie *t) {
    free(t->nodes), free(t->slots);
    t->nodes = NULL, t->slots = NULL;
}
