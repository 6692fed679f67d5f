/*
 * ranks_pipe.c — the parts of a multi-GPU model (ranks.c) that are particular to pipeline
 * parallelism: a plan whose ranks are consecutive stages of the graph (micro_batches,
 * runtime/plan.h), each compiled for one micro-batch of B / M rows.
 *
 * A run sends micro-batch m = 0..M-1 through the stages. The host enqueues, for each m and each
 * stage s in order, on GPU s's stream:
 *
 *   1. the rows of micro-batch m of every input stage s reads, from the caller's buffer
 *      (rt_data_copy_rows: host memory or any GPU's);
 *   2. (s > 0) a wait for sent_ev[s-1] (stage s-1 has computed micro-batch m), then stage s's
 *      peer copies (cudaMemcpyPeerAsync from GPU s-1's arena into its own, over NVLink or PCIe
 *      once peer access is on), then taken_ev[s];
 *   3. (s < N-1, m > 0) a wait for taken_ev[s+1]: stage s+1 has copied micro-batch m-1 out of
 *      this arena, so this micro-batch may overwrite those values; before 1. instead when 1. or
 *      2. write bytes that stage s+1 copies (early_take: a view of an input crossing the cut, a
 *      value handed along the chain of stages);
 *   4. stage s's steps (a CUDA graph per GPU from the second run on, captured without the peer
 *      copies; AMPC_MULTI_GPU_GRAPHS=0 or AMPC_CUDA_GRAPHS=0 keeps step-by-step launches);
 *   5. (s < N-1) sent_ev[s]; (s = N-1) the rows of micro-batch m of every output to the caller.
 *
 * Streams run in order and waits name only events already recorded, so GPU s computes
 * micro-batch m while GPU s+1 computes m-1: after a fill of N-1 micro-batches every GPU is busy,
 * and a run takes about (M + N - 1) stage times against N M on one GPU. One event per stage
 * of each kind is enough: a wait takes the event's latest record when it is enqueued.
 *
 * Peer copies rather than NCCL send/recv: one process drives every GPU, each stage's source
 * values sit at known offsets of the previous GPU's arena, and a copy engine moves them with no
 * communicator, no group calls and no SMs taken from compute; a pipeline library needs no
 * libnccl.so.2, like a batch split. One process per GPU is not built for pipelines.
 */
#define _GNU_SOURCE /* strdup */
#include "runtime/model.h"

#include <stdlib.h>
#include <string.h>

/* ---- the peer-copy step's provider ------------------------------------------------------------
 * Only the static rules: the copy itself needs the sending rank's arena, which this file's
 * launch reads from the model; a rank model never launches it through the provider. */

static ampc_status peer_supports(const rt_ctx *ctx, const ampc_rt_plan *p, const ampc_rt_step *s,
                                 rt_err *e) {
    (void)ctx;
    const ampc_rt_peer *c = &s->peer;
    if (c->src.space != AMPC_RT_ARENA || c->dst.space != AMPC_RT_ARENA)
        return rt_fail(e, AMPC_E_INVALID_ARG, "peer copy: src and dst must lie in the arena");
    if (c->src.bytes != c->dst.bytes)
        return rt_fail(e, AMPC_E_INVALID_ARG, "peer copy of %lld bytes into %lld",
                       (long long)c->src.bytes, (long long)c->dst.bytes);
    if (c->from < 0 || (p->n_ranks > 1 && c->from >= p->n_ranks) || c->from == p->rank)
        return rt_fail(e, AMPC_E_INVALID_ARG, "peer copy from rank %d into rank %d of %d",
                       c->from, p->rank, p->n_ranks);
    /* every rank has the whole graph's arena layout: src is checked against this plan's */
    if (rt_check_ref(p, c->src, "peer copy src", false, false, e) != AMPC_OK) return e->status;
    return rt_check_ref(p, c->dst, "peer copy dst", true, false, e);
}

static ampc_status peer_plan(rt_ctx *ctx, const ampc_rt_step *s, void **state, size_t *workspace,
                             rt_err *e) {
    (void)ctx, (void)s, (void)e;
    *state = NULL;
    *workspace = 0;
    return AMPC_OK;
}

static ampc_status peer_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    (void)ctx, (void)state, (void)stream;
    return rt_fail(e, AMPC_E_INTERNAL, "a peer copy runs only inside a pipeline of GPUs "
                   "(ranks_pipe.c), not on one GPU's stream");
}

static void peer_release(rt_ctx *ctx, void *state) { (void)ctx, (void)state; }

const rt_provider rt_provider_peer = {
    .name = "peer copy",
    .supports = peer_supports,
    .plan = peer_plan,
    .launch = peer_launch,
    .release = peer_release,
};

/* ---- setup ---------------------------------------------------------------------------------- */

static bool overlap(ampc_rt_ref a, ampc_rt_ref b) {
    return a.space == AMPC_RT_ARENA && b.space == AMPC_RT_ARENA && a.bytes > 0 && b.bytes > 0 &&
           a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

/* Whether one of the leading n_peer peer copies of rank model k reads bytes of arena ref r in
 * the sender's arena. */
static bool peer_reads(const ampc_rt_model *k, int32_t n_peer, ampc_rt_ref r) {
    for (int32_t s = 0; s < n_peer; s++)
        if (overlap(k->steps[s].peer.src, r)) return true;
    return false;
}

/* Whether any step of rank model k reads bytes of arena ref r. */
static bool reads_ref(const ampc_rt_model *k, ampc_rt_ref r) {
    enum { MAX_REFS = 256 };
    ampc_rt_ref refs[MAX_REFS];
    for (int32_t s = 0; s < k->n_steps; s++) {
        int n = rt_step_refs(&k->steps[s], refs, MAX_REFS);
        if (n > MAX_REFS) return true; /* too many to look at: copy the input */
        for (int j = 0; j < n; j++)
            if (refs[j].space == AMPC_RT_ARENA && refs[j].bytes > 0 &&
                refs[j].offset < r.offset + r.bytes && r.offset < refs[j].offset + refs[j].bytes)
                return true;
    }
    return false;
}

ampc_status rt_pipe_setup(ampc_rt_model *m, const ampc_rt_plan *p, rt_err *e) {
    int32_t n = m->n_ranks, nio = m->n_inputs + m->n_outputs;
    m->micro_batches = p->micro_batches;
    m->batch_io = calloc((size_t)nio + 1, sizeof *m->batch_io);
    m->n_peer = calloc((size_t)n, sizeof *m->n_peer);
    m->needs_input = calloc((size_t)n * (size_t)m->n_inputs + 1, 1);
    m->sent_ev = calloc((size_t)n, sizeof *m->sent_ev);
    m->taken_ev = calloc((size_t)n, sizeof *m->taken_ev);
    m->early_take = calloc((size_t)n, 1);
    if (!m->batch_io || !m->n_peer || !m->needs_input || !m->sent_ev || !m->taken_ev ||
        !m->early_take)
        return rt_fail(e, AMPC_E_OOM, "out of host memory");
    rt_batch_io_views(m, p); /* the caller's view: the whole batch */
    for (int32_t r = 0; r < n; r++) {
        const ampc_rt_model *k = m->rank[r];
        while (m->n_peer[r] < k->n_steps && k->steps[m->n_peer[r]].kind == AMPC_RT_STEP_PEER_COPY)
            m->n_peer[r]++;
    }
    /* A value the next stage copies may share bytes with what this stage writes before its
     * steps: an input (a view of it crossing the cut: the input's bytes are then copied even
     * when no step here reads them) or a peer copy's dst (a value handed along the chain). */
    for (int32_t r = 0; r < n; r++) {
        const ampc_rt_model *k = m->rank[r], *next = r + 1 < n ? m->rank[r + 1] : NULL;
        int32_t next_peer = next ? m->n_peer[r + 1] : 0;
        for (int32_t i = 0; i < m->n_inputs; i++) {
            ampc_rt_ref in = k->inputs[i].ref;
            bool sent = next && peer_reads(next, next_peer, in);
            m->needs_input[(size_t)r * (size_t)m->n_inputs + i] = sent || reads_ref(k, in);
            if (sent) m->early_take[r] = 1;
        }
        for (int32_t s = 0; next && s < m->n_peer[r]; s++)
            if (peer_reads(next, next_peer, k->steps[s].peer.dst)) m->early_take[r] = 1;
    }
    int d0 = m->rank[0]->ctx.dev.index;
    m->peer_links = 0;
    for (int32_t r = 0; r < n; r++) {
        ampc_rt_model *k = m->rank[r];
        int d = k->ctx.dev.index;
        if (r > 0) { /* the stage before sends, and the caller's buffers usually live on d0 */
            int prev = m->rank[r - 1]->ctx.dev.index;
            m->peer_links += rt_enable_peer(d, prev) + rt_enable_peer(prev, d);
            if (prev != d0) m->peer_links += rt_enable_peer(d, d0) + rt_enable_peer(d0, d);
        }
        RT_CUDA(e, cudaSetDevice(d));
        RT_CUDA(e, cudaEventCreateWithFlags(&m->sent_ev[r], cudaEventDisableTiming));
        RT_CUDA(e, cudaEventCreateWithFlags(&m->taken_ev[r], cudaEventDisableTiming));
    }
    RT_CUDA(e, cudaSetDevice(d0));
    return AMPC_OK;
}

void rt_pipe_free(ampc_rt_model *m) {
    for (int32_t r = 0; r < m->n_ranks && m->rank && m->rank[r]; r++) {
        if ((m->sent_ev && m->sent_ev[r]) || (m->taken_ev && m->taken_ev[r]))
            (void)cudaSetDevice(m->rank[r]->ctx.dev.index);
        if (m->sent_ev && m->sent_ev[r]) (void)cudaEventDestroy(m->sent_ev[r]);
        if (m->taken_ev && m->taken_ev[r]) (void)cudaEventDestroy(m->taken_ev[r]);
    }
    free(m->sent_ev);
    free(m->taken_ev);
    free(m->n_peer);
    free(m->needs_input);
    free(m->early_take);
    m->sent_ev = m->taken_ev = NULL;
    m->n_peer = NULL;
    m->needs_input = m->early_take = NULL;
}

/* ---- a run ---------------------------------------------------------------------------------- */

/* 2. Rank r's peer copies, each from rank `from`'s arena into its own, on its stream. */
static ampc_status launch_peer(ampc_rt_model *m, int32_t r, rt_err *e) {
    ampc_rt_model *k = m->rank[r];
    for (int32_t i = 0; i < m->n_peer[r]; i++) {
        const ampc_rt_peer *c = &k->steps[i].peer;
        if (c->from < 0 || c->from >= m->n_ranks || c->src.bytes == 0) continue;
        ampc_rt_model *f = m->rank[c->from];
        cudaError_t rc = cudaMemcpyPeerAsync(rt_ref_ptr(&k->ctx, c->dst), k->ctx.dev.index,
                                             rt_ref_ptr(&f->ctx, c->src), f->ctx.dev.index,
                                             (size_t)c->src.bytes, k->stream);
        if (rc != cudaSuccess) {
            rt_fail_cuda(e, rc, "cudaMemcpyPeerAsync(dst, device, src, from_device, bytes, "
                         "stream)", __func__, __FILE__, __LINE__);
            rt_step_prefix(e, &k->steps[i], i);
            rt_err_prefix(e, "stage %d: ", r);
            return e->status;
        }
    }
    return AMPC_OK;
}

/* 4. Rank r's computing steps: its graph when captured, else one by one. */
static ampc_status launch_stage(ampc_rt_model *m, int32_t r, rt_err *e) {
    ampc_rt_model *k = m->rank[r];
    if (m->graph_status == AMPC_RT_GRAPH_ON) {
        RT_CUDA(e, cudaGraphLaunch(m->rank_exec[r], k->stream));
        return AMPC_OK;
    }
    for (int32_t i = m->n_peer[r]; i < k->n_steps; i++)
        if (k->prov[i]->launch(&k->ctx, k->state[i], k->stream, e) != AMPC_OK) {
            rt_step_prefix(e, &k->steps[i], i);
            rt_err_prefix(e, "stage %d: ", r);
            return e->status;
        }
    return AMPC_OK;
}

/* Captures each stage's computing steps into a graph on its GPU (one stream each, nothing
 * crossing GPUs inside); a failure leaves runs step by step with graph_why saying why. */
static void try_capture_stages(ampc_rt_model *m) {
    rt_err ce = {0};
    for (int32_t r = 0; r < m->n_ranks && ce.status == AMPC_OK; r++) {
        ampc_rt_model *k = m->rank[r];
        cudaError_t rc = cudaSetDevice(k->ctx.dev.index);
        if (rc == cudaSuccess) rc = cudaStreamBeginCapture(k->stream, cudaStreamCaptureModeRelaxed);
        if (rc != cudaSuccess) {
            rt_fail_cuda(&ce, rc, "cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed)",
                         __func__, __FILE__, __LINE__);
            break;
        }
        (void)launch_stage(m, r, &ce);
        rc = cudaStreamEndCapture(k->stream, &m->rank_graph[r]);
        if (rc != cudaSuccess && ce.status == AMPC_OK)
            rt_fail_cuda(&ce, rc, "cudaStreamEndCapture(stream, &graph)", __func__, __FILE__,
                         __LINE__);
        if (ce.status == AMPC_OK) {
            rc = cudaGraphInstantiateWithFlags(&m->rank_exec[r], m->rank_graph[r], 0);
            if (rc != cudaSuccess)
                rt_fail_cuda(&ce, rc, "cudaGraphInstantiateWithFlags(&exec, graph, 0)", __func__,
                             __FILE__, __LINE__);
        }
    }
    rt_ranks_capture_done(m, &ce, "graph capture of the %d pipeline stages failed: ");
}

/* 1. and 5.: micro-batch mb's rows of the inputs rank r reads, or of every output (last rank). */
static ampc_status copy_io(ampc_rt_model *m, int32_t r, int32_t mb, const ampc_tensor *in,
                           ampc_tensor *out, rt_err *e) {
    ampc_rt_model *k = m->rank[r];
    char what[300];
    for (int32_t i = 0; in && i < k->n_inputs; i++) {
        const ampc_rt_io *io = &k->inputs[i]; /* the rank's: one micro-batch's bytes */
        if (io->ref.bytes == 0 || !m->needs_input[(size_t)r * (size_t)k->n_inputs + i]) continue;
        const char *src = (const char *)in[i].data + (size_t)mb * (size_t)io->ref.bytes;
        snprintf(what, sizeof what, "micro-batch %d of input %d '%s'", mb, i, io->name);
        if (rt_data_copy_rows(m, r, rt_ref_ptr(&k->ctx, io->ref), src, (size_t)io->ref.bytes,
                              false, what, e) != AMPC_OK)
            return e->status;
    }
    for (int32_t i = 0; out && r == m->n_ranks - 1 && i < k->n_outputs; i++) {
        const ampc_rt_io *io = &k->outputs[i];
        if (io->ref.bytes == 0) continue;
        char *dst = (char *)out[i].data + (size_t)mb * (size_t)io->ref.bytes;
        snprintf(what, sizeof what, "micro-batch %d of output %d '%s'", mb, i, io->name);
        if (rt_data_copy_rows(m, r, dst, rt_ref_ptr(&k->ctx, io->ref), (size_t)io->ref.bytes,
                              true, what, e) != AMPC_OK)
            return e->status;
    }
    return AMPC_OK;
}

ampc_status rt_pipe_launch(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out, rt_err *e) {
    if (m->graph_status == AMPC_RT_GRAPH_PENDING && m->plain_runs > 0) try_capture_stages(m);
    if (m->graph_status != AMPC_RT_GRAPH_ON) m->plain_runs++;
    int32_t n = m->n_ranks;
    for (int32_t mb = 0; mb < m->micro_batches; mb++)
        for (int32_t r = 0; r < n; r++) {
            ampc_rt_model *k = m->rank[r];
            bool take = r + 1 < n && mb > 0; /* stage r + 1 copied micro-batch mb - 1 out */
            RT_CUDA(e, cudaSetDevice(k->ctx.dev.index));
            if (take && m->early_take[r]) {
                RT_CUDA(e, cudaStreamWaitEvent(k->stream, m->taken_ev[r + 1], 0));
                take = false;
            }
            if (copy_io(m, r, mb, in, NULL, e) != AMPC_OK) return e->status;
            if (r > 0) {
                RT_CUDA(e, cudaStreamWaitEvent(k->stream, m->sent_ev[r - 1], 0));
                if (launch_peer(m, r, e) != AMPC_OK) return e->status;
                RT_CUDA(e, cudaEventRecord(m->taken_ev[r], k->stream));
            }
            if (take) RT_CUDA(e, cudaStreamWaitEvent(k->stream, m->taken_ev[r + 1], 0));
            if (launch_stage(m, r, e) != AMPC_OK) return e->status;
            if (r + 1 < n) RT_CUDA(e, cudaEventRecord(m->sent_ev[r], k->stream));
            if (copy_io(m, r, mb, NULL, out, e) != AMPC_OK) return e->status;
        }
    return AMPC_OK;
}
