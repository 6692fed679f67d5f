/*
 * model.h — the loaded model (struct ampc_rt_model), shared by model.c (one GPU) and ranks.c
 * (a multi-GPU model: one model per rank under one handle). Private to the runtime.
 */
#ifndef AMPC_RUNTIME_MODEL_H
#define AMPC_RUNTIME_MODEL_H

#include "runtime/internal.h"

typedef enum io_graph_state { IO_GRAPH_NONE = 0, IO_GRAPH_ON, IO_GRAPH_OFF } io_graph_state;

struct ampc_rt_model {
    rt_ctx ctx;
    ampc_rt_options opts;     /* its options (ctx.opts points here: rt_model_set_options) */
    bool device_set;          /* ctx.dev is valid: destroy switches to it */
    cudaStream_t stream;      /* the model's own stream (non-blocking) */
    /* the model's copy of the plan's steps and io; strings and arrays are in `owned` */
    int32_t n_steps, n_inputs, n_outputs;
    ampc_rt_step *steps;
    ampc_rt_io *inputs, *outputs;
    void **owned;
    int32_t n_owned, cap_owned;
    const rt_provider **prov; /* per step */
    void **state;             /* per step, the provider's */
    /* CUDA graph of the steps */
    ampc_rt_graph_status graph_status;
    char *graph_why;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    /* the I/O graph (runs on device tensors): input copies -> the steps' graph -> output
     * copies; io_node[i] copies input i (i < n_inputs) or output i - n_inputs (NULL for empty
     * tensors), last from or to io_ptr[i] */
    io_graph_state io_state;
    cudaGraph_t io_graph;
    cudaGraphExec_t io_exec;
    cudaGraphNode_t *io_node;
    void **io_ptr;
    cudaEvent_t *events;      /* n_steps + 1, created by the first profile */
    int64_t device_bytes;
    /* A multi-GPU model: one model per rank (rank[r], whose ctx.nccl is its communicator); this
     * one's steps, io, prov and state then mirror rank 0's and are not its own. n_ranks is 0
     * for a single-GPU model. */
    int32_t n_ranks;
    struct ampc_rt_model **rank;
    int32_t *cursor;          /* per rank: the next step to launch, during a launch */
    cudaEvent_t fork_ev;      /* on the first device: ranks start after the caller's stream */
    cudaEvent_t *join_ev;     /* per rank, on its device: the caller's stream waits for them */
    cudaEvent_t done_ev;      /* on the first device: the end of a run, polled */
    double timeout_s;         /* how long a run may wait for the GPUs (AMPC_NCCL_TIMEOUT_S) */
    int32_t plain_runs;       /* runs launched step by step so far (capture waits for one) */
    cudaGraph_t *rank_graph;  /* per rank, when graph_status is ON: its steps, captured */
    cudaGraphExec_t *rank_exec;
    char *broken;             /* why the communicators were aborted; runs then fail with it */
    /* One process per GPU (ampc_rt_model_create_rank): this process holds one rank of a group
     * of `group` ranks, rank[0] being rank first_rank. One process over every GPU: first_rank
     * 0 and group == n_ranks. */
    int32_t first_rank, group;
    /* Data parallelism (ranks_data.c): the ranks split the batch; inputs and outputs then point
     * into batch_io (owned: the whole batch's descriptors, inputs then outputs). */
    bool split_batch;
    ampc_rt_io *batch_io;
    int32_t peer_links;       /* peer-access directions enabled between the first GPU and others */
    /* A pipeline (ranks_pipe.c): rank s runs stage s on micro_batches micro-batches per run;
     * inputs and outputs then point into batch_io as for a batch split. */
    int32_t micro_batches;
    int32_t *n_peer;          /* per rank: its leading peer-copy steps */
    uint8_t *needs_input;     /* [rank * n_inputs + i]: rank reads input i (or the next rank
                               * copies its bytes) */
    uint8_t *early_take;      /* per rank: its input or peer copies write bytes the next rank's
                               * peer copies read, so they wait for taken_ev[rank + 1] too */
    cudaEvent_t *sent_ev;     /* per rank, on its device: it finished its last micro-batch */
    cudaEvent_t *taken_ev;    /* per rank: its peer copies of its last micro-batch are done */
    /* io_bind.c: runs on the caller's device buffers in place */
    bool zc_on;               /* this model can bind them (zc_why says why not) */
    const char *zc_why;       /* a static string */
    int32_t *zc_steps, n_zc_steps; /* the steps touching an input or output */
    struct rt_zc_graph *zc;   /* graphs captured on caller buffers, a few sets */
    uint64_t zc_tick;
    int64_t zc_runs;          /* runs made in place */
    bool told;                /* AMPC_GRAPH_VERBOSE=1 has printed what the first run did */
};

/* model.c: loads plan p into m on the device m->ctx.dev names (opened by the caller). */
ampc_status rt_model_build(ampc_rt_model *m, const ampc_rt_plan *p, rt_err *e);
/* Gives m its own copy of o (before rt_model_build reads it). */
void rt_model_set_options(ampc_rt_model *m, const ampc_rt_options *o);
/* model.c: enqueues every step on s (events ev[i] before step i and ev[n_steps] after, when
 * ev is not NULL). */
ampc_status rt_model_launch_steps(ampc_rt_model *m, cudaStream_t s, cudaEvent_t *ev, rt_err *e);

/* model.c: copies the caller's inputs into their arena bytes on s. */
ampc_status rt_model_copy_inputs(ampc_rt_model *m, const ampc_tensor *in, cudaStream_t s,
                                 rt_err *e);

/* io_bind.c: decides at creation whether runs may bind the caller's buffers in place. */
void rt_io_bind_setup(ampc_rt_model *m);
/* io_bind.c: launches the run on s with the steps on the caller's device buffers, when this
 * run can (true; e holds a launch failure), else false (nothing done: copy instead). */
bool rt_io_bind_run(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out, cudaStream_t s,
                    rt_err *e);
void rt_io_bind_free(ampc_rt_model *m);

/* ranks.c: a multi-GPU model (p->n_ranks > 1), rank r on device `device + r`. */
ampc_status rt_ranks_create(const ampc_rt_plan *p, int32_t device, const ampc_rt_options *o,
                            ampc_rt_model **out, rt_err *e);
void rt_ranks_destroy(ampc_rt_model *m);
/* ranks.c: rank `rank` of multi-GPU plan p on `device`, its communicator joining the group that
 * `nccl_id` (an ncclUniqueId) names; the other ranks are created by other processes. */
ampc_status rt_ranks_create_rank(const ampc_rt_plan *p, int32_t device, int32_t rank,
                                 const void *nccl_id, const ampc_rt_options *o,
                                 ampc_rt_model **out, rt_err *e);
/* One run over every rank, ordered on `stream` (NULL: rank 0's stream); waits when sync. */
ampc_status rt_ranks_run(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out,
                         cudaStream_t stream, bool sync, rt_err *e);
/* Ends a capture of the ranks' graphs: with ce OK the graphs are on; otherwise they are dropped,
 * the CUDA error cleared, and graph_why says why, after `prefix` (a format taking the number of
 * ranks). A failed capture is not an error: runs go on step by step. */
void rt_ranks_capture_done(ampc_rt_model *m, rt_err *ce, const char *prefix);
/* ampc_rt_model_time of a multi-GPU model. */
ampc_status rt_ranks_time(ampc_rt_model *m, int32_t iterations, double *ms, rt_err *e);

/* ranks_data.c, a model whose ranks split the batch (p->split_batch): after the ranks are
 * built, the whole batch's io descriptors and peer access from the first GPU to the others. */
ampc_status rt_data_setup(ampc_rt_model *m, const ampc_rt_plan *p, rt_err *e);
/* Fills m->batch_io (allocated: inputs then outputs) with rank 0's descriptors (names owned by
 * rank 0) carrying the whole batch's shapes and bytes, and points m->inputs / m->outputs at it:
 * the caller's view of a model whose ranks each hold a share of the batch. */
void rt_batch_io_views(ampc_rt_model *m, const ampc_rt_plan *p);
/* Enqueues, on each rank's stream, its rows of every input from the caller's buffer / its rows
 * of every output into the caller's buffer (host memory or any GPU's). */
ampc_status rt_data_copy_in(ampc_rt_model *m, const ampc_tensor *in, rt_err *e);
ampc_status rt_data_copy_out(ampc_rt_model *m, ampc_tensor *out, rt_err *e);
void rt_data_free(ampc_rt_model *m);
/* ranks_data.c: one copy of a row block between the caller's buffer (host memory or any GPU's)
 * and rank r's arena, on rank r's stream; `what` names the tensor in an error. */
ampc_status rt_data_copy_rows(ampc_rt_model *m, int32_t r, void *dst, const void *src,
                              size_t bytes, bool to_caller, const char *what, rt_err *e);
/* ranks_data.c: peer access from device a to b where the hardware has it; whether it is on. */
bool rt_enable_peer(int a, int b);

/* ranks_pipe.c, a pipeline (p->micro_batches > 0): after the ranks are built, the whole batch's
 * io, peer access between neighbouring GPUs and the events between the stages. */
ampc_status rt_pipe_setup(ampc_rt_model *m, const ampc_rt_plan *p, rt_err *e);
/* Enqueues one run: every micro-batch through every stage (in and out NULL when timing: no
 * input or output copies). Inside the fork and join of ranks.c. */
ampc_status rt_pipe_launch(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out, rt_err *e);
void rt_pipe_free(ampc_rt_model *m);

#endif
