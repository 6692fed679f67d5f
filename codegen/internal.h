/*
 * internal.h — the codegen context shared by generate.c (the driver and plan assembly) and
 * emit.c (the kernel emitter). Lowering functions see only codegen.h.
 */
#ifndef AMPC_CODEGEN_INTERNAL_H
#define AMPC_CODEGEN_INTERNAL_H

#include "codegen.h"

/* A kernel's text and the step that launches it, kept until units are formed. */
typedef struct cg_kernel_rec {
    char *text;      /* comment + definition (malloc'ed); NULL once same_as is set */
    size_t name_at;    /* text's offset of the kernel's name in its signature */
    size_t params_end; /* text's offset of the ')' that closes the parameter list */
    size_t body_at;    /* text's offset of the body's first statement (ampc::pdl_enter) */
    int32_t step;    /* index of its launch step, or of the GEMM step it is the own_kernel of */
    int32_t n_steps; /* its launch steps: steps [step, step + n_steps) (ampc_cg_kernel_repeat) */
    bool gemm_alt;   /* the kernel is steps[step].gemm.own_kernel, not a step of its own */
    int32_t same_as; /* the earlier kernel whose definition this one repeats (its step launches
                      * that one), or -1 (ampc_cg_share_kernels) */
    int32_t n_sharers; /* kernels that repeat this one */
    int32_t unit;    /* the translation unit holding the definition (build_units) */
} cg_kernel_rec;

struct ampc_cg {
    ampc_graph *g;
    ampc_cg_options o;
    ampc_cg_output *out;     /* arena for everything the plan points to */
    ampc_rt_step *steps;     /* growable (malloc), copied into the arena at the end */
    int32_t *step_rank;      /* per step: the rank it runs on, -1 for every rank */
    int32_t n_steps, cap_steps;
    int32_t cur_rank;        /* the rank of the node being lowered (its `rank`), -1: none */
    int32_t n_ranks;         /* GPUs of a partitioned graph (its all-reduces' inputs), else 1 */
    cg_kernel_rec *kernels;
    int32_t n_kernels, cap_kernels;
    ampc_status status;      /* first failure of an emitter call */
    int64_t scratch_bytes;   /* the largest ampc_cg_scratch asked: past the planned arena */
    const ampc_node *loop;   /* the LoopBegin whose region is being lowered, or NULL */
    int32_t loop_entry;      /* its entry jump (the target set when the region closes) */
    int32_t loop_body;       /* the first step of its body */
};

struct ampc_cg_kernel {
    ampc_cg *cg;
    const ampc_node *node;   /* the first node covered (diagnostics) */
    char name[80];
    ampc_strbuf covers;      /* "Add 'add_3', Relu 'relu_4'" */
    ampc_strbuf covers_comment; /* the same, each name escaped for the kernel's comment */
    ampc_strbuf params;      /* the parameter list */
    ampc_strbuf params_restrict; /* the same with __restrict__ pointers (ampc_cg_kernel_restrict) */
    ampc_strbuf body;
    int32_t indent;
    int32_t min_blocks;      /* __launch_bounds__'s minimum blocks an SM; 0: none */
    int32_t cluster_z;       /* clusters of 1 x 1 x cluster_z blocks on sm_90+; 0: none */
    bool pdl_in_body;        /* the body calls ampc::pdl_enter itself (emit.c's finish) */
    bool restrict_ptrs;      /* pointer parameters are __restrict__ (ampc_cg_kernel_restrict) */
    int32_t repeat;          /* launches, one step each (ampc_cg_kernel_repeat); 0: one */
    int32_t n_args, cap_args;
    ampc_rt_arg *args;
    bool *written;           /* per argument: the kernel writes through it */
    int32_t n_locals;
    char **names;            /* names handed out (params, locals), freed at the end */
    int32_t n_names;
};

/* The L2 prefetch (emit.c): every generated kernel launched right before a GEMM or
 * convolution step whose weight is a constant asks L2 for that weight as it starts
 * (ampc::prefetch_l2). Called once every node is lowered, before the units are built. */
ampc_status ampc_cg_prefetch_weights(ampc_cg *cg);

/* Kernels whose definitions are the same but for their index (k<index>_<what>) and whose
 * steps ask the same dynamic shared memory are defined once (emit.c): the steps of the later
 * ones launch the first, each with its own arguments and launch shape, and the first's comment
 * says how many more steps launch it. Called after ampc_cg_prefetch_weights (which changes
 * definitions), before the units are built. */
ampc_status ampc_cg_share_kernels(ampc_cg *cg);

/* Adds a step (copied) and returns its index; -1 on OOM (recorded). */
int32_t ampc_cg_add_step(ampc_cg *cg, const ampc_rt_step *s);
/* The per-rank plans of a partitioned graph (ranks.c): out->rank_plans from the steps and their
 * ranks, each rank's weights packed from what its steps read. Called once the units exist. */
ampc_status ampc_cg_build_ranks(ampc_cg *cg, int32_t n_ranks);
/* The plans of a graph that is one GPU's share of a batch split over n_ranks GPUs (ranks.c):
 * every rank runs the plan just built (shared steps and weights, split_batch = 1); the model's
 * plan describes the whole batch. A graph with all-reduces too is refused. */
ampc_status ampc_cg_build_data_ranks(ampc_cg *cg, int32_t n_ranks);
/* ranks.c: after ampc_cg_build_ranks of a pipeline (g->pipeline_stages), marks every plan with
 * its micro-batches and gives the model's plan the caller's whole tensors (dim 0 times them). */
ampc_status ampc_cg_build_pipeline(ampc_cg *cg, int32_t micro_batches);
/* generate.c: the peer-copy step of an ampc.PeerCopy, in its rank's plan. */
ampc_status ampc_cg_step_peer(ampc_cg *cg, const ampc_node *n);

/* Finishes kernel k as the own_kernel of GEMM step `step` (an alternative the runtime may
 * choose at load) instead of adding a launch step. */
ampc_status ampc_cg_kernel_end_gemm_alt(ampc_cg_kernel *k, int32_t step, const uint32_t grid[3],
                                        const uint32_t block[3], uint32_t smem);
/* The 2:4 GEMM step `step` (sparse24 set) gets ampc's own sparse kernel when it takes the
 * product (sparse_gemm.c): its weight compressed into the weights blob, the kernel emitted. */
ampc_status ampc_cg_sparse_gemm(ampc_cg *cg, const ampc_node *n, int32_t step);
/* A GEMM epilogue (ampc_rt_epilogue) as ampc's GEMM kernels take it: whether it adds the bias,
 * and its activation as their ACT template argument (0 none, 1 ReLU, 2 GELU). The tanh GELU
 * runs on cuBLASLt only (ampc_rt_epilogue_tanh): ampc's kernels are not made for it. */
static inline bool ampc_cg_epi_bias(uint8_t epi) {
    return epi == AMPC_RT_EPI_BIAS || epi == AMPC_RT_EPI_BIAS_RELU || epi == AMPC_RT_EPI_BIAS_GELU;
}
static inline int ampc_cg_epi_act(uint8_t epi) {
    if (epi == AMPC_RT_EPI_RELU || epi == AMPC_RT_EPI_BIAS_RELU) return 1;
    if (epi == AMPC_RT_EPI_GELU || epi == AMPC_RT_EPI_BIAS_GELU) return 2;
    return 0;
}
/* GEMM step `step` gets ampc's own dense kernel when it takes the product (dense_gemm.c);
 * a GELU epilogue it cannot take is an internal error. */
ampc_status ampc_cg_dense_gemm(ampc_cg *cg, const ampc_node *n, int32_t step);

/* "<Op> '<name>'" in the output arena. */
const char *ampc_cg_label(ampc_cg *cg, const ampc_node *n);

#endif
