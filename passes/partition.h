/*
 * partition.h — what the two halves of the tensor-parallel split share: the MLP pairs
 * (partition.c) and the attention blocks split by heads (partition_heads.c). Internal to the
 * partition pass.
 */
#ifndef AMPC_PASSES_PARTITION_H
#define AMPC_PASSES_PARTITION_H

#include "passes.h"

enum { AMPC_PART_MAX_TAIL = 2 };

/* The Adds after a block's last matmul that rank 0 takes before the all-reduce: the bias of
 * that matmul and the residual, at most one of each (see partition.c, stage 2). */
typedef struct ampc_part_tail {
    ampc_node *node[AMPC_PART_MAX_TAIL];
    ampc_value *addend[AMPC_PART_MAX_TAIL]; /* each one's other operand */
    int32_t n;
} ampc_part_tail;

/* v's one reader, when v has exactly one and is not a graph output. */
ampc_node *ampc_part_only_reader(const ampc_uses *u, const ampc_value *v);
/* Whether v is a float constant matrix (a weight). */
bool ampc_part_const_matrix(const ampc_value *v);
/* The tail after `last` (the block's row-parallel matmul) of a block whose first node has id
 * first_id; nodes at or after n_old were appended by this run of the pass. */
void ampc_part_find_tail(const ampc_uses *u, const ampc_node *last, int32_t first_id,
                         int32_t n_old, ampc_part_tail *t);
/* Elements [start, start + len) of constant c along `axis` as a new constant named
 * "<c>_rank<rank>"; NULL on OOM (diagnosed). */
ampc_value *ampc_part_slice(ampc_graph *g, const ampc_value *c, int32_t axis, int64_t start,
                            int64_t len, int32_t rank);
/* A copy of node n for rank r as `op` over ins, with n's attributes and rank = r (the sparsity
 * mark only when keep_sparse); its one output, or NULL (diagnosed). */
ampc_value *ampc_part_rank_node(ampc_graph *g, const ampc_node *n, ampc_opcode op,
                                ampc_value *const *ins, int32_t n_ins, int32_t rank,
                                bool keep_sparse);
/* Appends rank r's tail Adds (r == 0 only) after its partial; NULL on failure. */
ampc_value *ampc_part_tail_apply(ampc_graph *g, const ampc_part_tail *t, ampc_value *v, int32_t r);
/* Removes `last` and the tail and writes y (the block's old output) with one ampc.AllReduce of
 * the ranks' partials, named after `last`. */
ampc_status ampc_part_all_reduce(ampc_graph *g, ampc_node *last, const ampc_part_tail *t,
                                 ampc_value *const *partial, int32_t ranks);

/* One attention block ending at the row-parallel candidate `wo` (a MatMul by a constant
 * matrix), split by heads when it can be: *split says whether it was; a block that looks like
 * attention (a softmax inside) but stays whole gets its reason recorded. partition_heads.c. */
ampc_status ampc_part_split_heads(ampc_graph *g, const ampc_pass_ctx *cx, const ampc_uses *u,
                                  ampc_node *wo, int32_t n_old, bool *split);

/* Records the pass's decision on one block for --report (g->partition_blocks). */
void ampc_part_note(ampc_graph *g, ampc_pipeline_report *r, const ampc_node *at, const char *kind,
                    bool split, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif /* AMPC_PASSES_PARTITION_H */
