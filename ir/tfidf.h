/*
 * tfidf.h — TfIdfVectorizer's parameters and its pool of n-grams as a trie, one implementation
 * for the reference evaluator (ref/index.c, which walks it) and code generation
 * (codegen/lower_quant.c, which bakes it into its kernel as sorted child runs).
 *
 * Node 0 is the root; a child is found by (parent, token) through an open-addressing table. A
 * node that ends an n-gram of a wanted size (min_gram_length .. max_gram_length) carries its
 * 1-based order in the whole pool in `id` (the last such n-gram's, when the pool repeats one).
 */
#ifndef AMPC_IR_TFIDF_H
#define AMPC_IR_TFIDF_H

#include "ir/ir.h"

typedef struct ampc_tfidf {
    const int64_t *counts, *indexes, *pool; /* ngram_counts, ngram_indexes, pool_int64s */
    int32_t n_counts, n_indexes, n_pool;
    const float *weights;                   /* NULL: none */
    int32_t n_weights;
    const char *mode;                       /* "TF", "IDF" or "TFIDF" */
    int64_t min_len, max_len, skips;        /* skips: max_skip_count + 1 */
} ampc_tfidf;

typedef struct ampc_tfidf_node {
    int64_t token, parent;
    int64_t id; /* 0: no n-gram ends here */
} ampc_tfidf_node;

typedef struct ampc_tfidf_trie {
    ampc_tfidf_node *nodes;
    int64_t n;
    int64_t *slots; /* node index + 1; 0 = empty */
    uint64_t mask;
} ampc_tfidf_trie;

/* Node n's parameters (inference has validated them). */
ampc_tfidf ampc_tfidf_of(ampc_graph *g, const ampc_node *n);
/* The trie of p's pool; false when memory ran out (nothing to free then). */
bool ampc_tfidf_trie_build(const ampc_tfidf *p, ampc_tfidf_trie *t);
/* The child of `parent` for `token`; -1 when absent. */
int64_t ampc_tfidf_child(const ampc_tfidf_trie *t, int64_t parent, int64_t token);
void ampc_tfidf_trie_free(ampc_tfidf_trie *t);

#endif
