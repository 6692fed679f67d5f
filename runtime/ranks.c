/*
 * ranks.c — a multi-GPU model: one model per rank (model.c) under one handle.
 *
 * One thread drives every rank. A launch walks the ranks' steps in segments: each rank's steps
 * up to its next all-reduce, then the all-reduces of every rank inside one NCCL group (NCCL
 * launches them together; one thread cannot launch them one by one), and so on. The ranks'
 * streams fork from the caller's stream (an event) and join it at the end, so a run is ordered
 * on the caller's stream like a single-GPU one; inputs are copied to every rank, outputs come
 * from rank 0. Waiting polls: a collective that fails (NCCL's asynchronous error) or does not
 * end within timeout_s aborts the communicators instead of hanging the caller. The steps are
 * launched one by one; with AMPC_MULTI_GPU_GRAPHS=1 the second run captures one CUDA graph per
 * GPU (the all-reduces inside) and later runs replay them. A batch split (ranks_data.c) and a
 * pipeline (ranks_pipe.c) have no collective and change what a run enqueues between the fork
 * and the join.
 */
#define _GNU_SOURCE /* strdup */
#include "runtime/model.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Aborts every rank's communicator after a failure or a timeout; later runs fail with `why`. */
static void break_ranks(ampc_rt_model *m, const char *why) {
    for (int32_t r = 0; r < m->n_ranks; r++)
        if (m->rank[r]) rt_nccl_comms_destroy(&m->rank[r]->ctx.nccl, 1, true);
    if (m->broken == NULL) m->broken = strdup(why ? why : "a collective failed");
}

/* Waits for ev (recorded on the first device) while watching every communicator. */
static ampc_status wait_ranks(ampc_rt_model *m, cudaEvent_t ev, rt_err *e) {
    double start = now_s();
    for (long spins = 0;; spins++) {
        cudaError_t rc = cudaEventQuery(ev);
        if (rc == cudaSuccess) return AMPC_OK;
        if (rc != cudaErrorNotReady)
            return rt_fail_cuda(e, rc, "cudaEventQuery(ev)", __func__, __FILE__, __LINE__);
        for (int32_t r = 0; r < m->n_ranks; r++) /* a batch split has no communicator */
            if (m->rank[r]->ctx.nccl && rt_nccl_comm_check(m->rank[r]->ctx.nccl, e) != AMPC_OK) {
                rt_err_prefix(e, "rank %d (device %d): ", m->first_rank + r,
                              m->rank[r]->ctx.dev.index);
                break_ranks(m, e->msg);
                return e->status;
            }
        if (now_s() - start > m->timeout_s) {
            if (m->group != m->n_ranks)
                rt_fail(e, AMPC_E_CUDA, "rank %d of %d did not finish the run within %.0f s "
                        "(AMPC_NCCL_TIMEOUT_S): a collective is stuck (another rank's process "
                        "failed, or did not make the same run); the NCCL communicator was "
                        "aborted and the model cannot run again", m->first_rank, m->group,
                        m->timeout_s);
            else
                rt_fail(e, AMPC_E_CUDA, "the %d GPUs did not finish the run within %.0f s "
                        "(AMPC_NCCL_TIMEOUT_S): %s", m->n_ranks, m->timeout_s,
                        m->split_batch ? "a GPU is stuck; the model cannot run again"
                                       : "a collective is stuck; the model's NCCL communicators "
                                         "were aborted and it cannot run again");
            break_ranks(m, e->msg);
            return e->status;
        }
        if (spins > 1000) { /* after a short spin, sleep between polls */
            struct timespec t = {0, 20000};
            nanosleep(&t, NULL);
        }
    }
}

/* Every rank's stream waits for what s0 (on the first device) has so far. */
static ampc_status fork_ranks(ampc_rt_model *m, cudaStream_t s0, rt_err *e) {
    RT_CUDA(e, cudaSetDevice(m->rank[0]->ctx.dev.index));
    RT_CUDA(e, cudaEventRecord(m->fork_ev, s0));
    for (int32_t r = 0; r < m->n_ranks; r++) {
        RT_CUDA(e, cudaSetDevice(m->rank[r]->ctx.dev.index));
        RT_CUDA(e, cudaStreamWaitEvent(m->rank[r]->stream, m->fork_ev, 0));
    }
    return AMPC_OK;
}

/* s0 waits for everything every rank's stream has so far. */
static ampc_status join_ranks(ampc_rt_model *m, cudaStream_t s0, rt_err *e) {
    for (int32_t r = 0; r < m->n_ranks; r++) {
        RT_CUDA(e, cudaSetDevice(m->rank[r]->ctx.dev.index));
        RT_CUDA(e, cudaEventRecord(m->join_ev[r], m->rank[r]->stream));
    }
    RT_CUDA(e, cudaSetDevice(m->rank[0]->ctx.dev.index));
    for (int32_t r = 0; r < m->n_ranks; r++) RT_CUDA(e, cudaStreamWaitEvent(s0, m->join_ev[r], 0));
    return AMPC_OK;
}

/* Launches rank r's steps from its cursor up to its next all-reduce (or its end). */
static ampc_status launch_segment(ampc_rt_model *m, int32_t r, rt_err *e) {
    ampc_rt_model *k = m->rank[r];
    RT_CUDA(e, cudaSetDevice(k->ctx.dev.index));
    for (int32_t i = m->cursor[r]; i < k->n_steps; i = ++m->cursor[r]) {
        if (k->steps[i].kind == AMPC_RT_STEP_ALLREDUCE) break;
        if (k->prov[i]->launch(&k->ctx, k->state[i], k->stream, e) != AMPC_OK) {
            rt_step_prefix(e, &k->steps[i], i);
            rt_err_prefix(e, "rank %d: ", m->first_rank + r);
            return e->status;
        }
    }
    return AMPC_OK;
}

/* Enqueues every rank's steps on its stream, segment by segment. */
static ampc_status launch_ranks(ampc_rt_model *m, rt_err *e) {
    for (int32_t r = 0; r < m->n_ranks; r++) m->cursor[r] = 0;
    for (;;) {
        int32_t waiting = 0; /* ranks stopped at an all-reduce */
        for (int32_t r = 0; r < m->n_ranks; r++) {
            if (launch_segment(m, r, e) != AMPC_OK) return e->status;
            waiting += m->cursor[r] < m->rank[r]->n_steps;
        }
        if (waiting == 0) return AMPC_OK;
        /* the plan check pairs every rank's all-reduces, so all ranks stop at one together */
        if (waiting != m->n_ranks)
            return rt_fail(e, AMPC_E_INTERNAL, "%d of %d ranks stopped at an all-reduce",
                           waiting, m->n_ranks);
        if (rt_nccl_group_start(e) != AMPC_OK) return e->status;
        ampc_status st = AMPC_OK;
        for (int32_t r = 0; r < m->n_ranks && st == AMPC_OK; r++) {
            ampc_rt_model *k = m->rank[r];
            int32_t i = m->cursor[r]++;
            st = k->prov[i]->launch(&k->ctx, k->state[i], k->stream, e);
            if (st != AMPC_OK) {
                rt_step_prefix(e, &k->steps[i], i);
                rt_err_prefix(e, "rank %d: ", m->first_rank + r);
            }
        }
        rt_err ge = {0}; /* the group is always closed */
        if (rt_nccl_group_end(&ge) != AMPC_OK && st == AMPC_OK) {
            *e = ge;
            return e->status;
        }
        rt_err_clear(&ge);
        if (st != AMPC_OK) return st;
    }
}

/* Frees the ranks' graphs (each on its device). */
static void drop_rank_graphs(ampc_rt_model *m) {
    for (int32_t r = 0; r < m->n_ranks && m->rank_graph && m->rank[r]; r++) {
        (void)cudaSetDevice(m->rank[r]->ctx.dev.index);
        if (m->rank_exec[r]) (void)cudaGraphExecDestroy(m->rank_exec[r]);
        if (m->rank_graph[r]) (void)cudaGraphDestroy(m->rank_graph[r]);
        m->rank_exec[r] = NULL;
        m->rank_graph[r] = NULL;
    }
}

/* Captures every rank's steps, all-reduces included, into one graph per rank: every rank's
 * stream is captured at once (relaxed mode: NCCL may set up connections while capturing), the
 * segments launched as for a plain run, then each capture ended and instantiated. A failure is
 * not an error: runs keep launching step by step and graph_why says why. Done after a plain run,
 * so NCCL's connections exist. */
static void try_capture_ranks(ampc_rt_model *m) {
    rt_err ce = {0};
    int32_t begun = 0;
    for (; begun < m->n_ranks; begun++) {
        ampc_rt_model *k = m->rank[begun];
        cudaError_t rc = cudaSetDevice(k->ctx.dev.index);
        if (rc == cudaSuccess) rc = cudaStreamBeginCapture(k->stream, cudaStreamCaptureModeRelaxed);
        if (rc != cudaSuccess) {
            rt_fail_cuda(&ce, rc, "cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed)",
                         __func__, __FILE__, __LINE__);
            break;
        }
    }
    if (ce.status == AMPC_OK) launch_ranks(m, &ce);
    for (int32_t r = 0; r < begun; r++) { /* always: it ends the capture mode */
        ampc_rt_model *k = m->rank[r];
        (void)cudaSetDevice(k->ctx.dev.index);
        cudaError_t rc = cudaStreamEndCapture(k->stream, &m->rank_graph[r]);
        if (rc != cudaSuccess && ce.status == AMPC_OK)
            rt_fail_cuda(&ce, rc, "cudaStreamEndCapture(stream, &graph)", __func__, __FILE__,
                         __LINE__);
    }
    for (int32_t r = 0; r < m->n_ranks && ce.status == AMPC_OK; r++) {
        (void)cudaSetDevice(m->rank[r]->ctx.dev.index);
        cudaError_t rc = cudaGraphInstantiateWithFlags(&m->rank_exec[r], m->rank_graph[r], 0);
        if (rc != cudaSuccess)
            rt_fail_cuda(&ce, rc, "cudaGraphInstantiateWithFlags(&exec, graph, 0)", __func__,
                         __FILE__, __LINE__);
    }
    rt_ranks_capture_done(m, &ce, "graph capture over %d GPUs failed: ");
}

void rt_ranks_capture_done(ampc_rt_model *m, rt_err *ce, const char *prefix) {
    if (ce->status == AMPC_OK) {
        m->graph_status = AMPC_RT_GRAPH_ON;
        free(m->graph_why);
        m->graph_why = NULL;
        return;
    }
    drop_rank_graphs(m);
    rt_cuda_clear();
    rt_err_prefix(ce, prefix, m->n_ranks);
    m->graph_status = AMPC_RT_GRAPH_OFF;
    free(m->graph_why);
    m->graph_why = ce->msg ? ce->msg : strdup("graph capture failed");
    ce->msg = NULL;
}

/* Enqueues every rank's steps: their graphs once captured, else step by step (capturing them
 * on the run after the first when graphs are asked for). */
static ampc_status launch_or_replay(ampc_rt_model *m, rt_err *e) {
    if (m->micro_batches > 0) return rt_pipe_launch(m, NULL, NULL, e); /* timing: no io */
    if (m->graph_status == AMPC_RT_GRAPH_PENDING && m->plain_runs > 0) try_capture_ranks(m);
    if (m->graph_status != AMPC_RT_GRAPH_ON) {
        m->plain_runs++;
        return launch_ranks(m, e);
    }
    for (int32_t r = 0; r < m->n_ranks; r++) {
        ampc_rt_model *k = m->rank[r];
        RT_CUDA(e, cudaSetDevice(k->ctx.dev.index));
        RT_CUDA(e, cudaGraphLaunch(m->rank_exec[r], k->stream));
    }
    return AMPC_OK;
}

/* Waits for the end of a run on s0 (the first device). */
static ampc_status wait_done(ampc_rt_model *m, cudaStream_t s0, rt_err *e) {
    RT_CUDA(e, cudaSetDevice(m->rank[0]->ctx.dev.index));
    RT_CUDA(e, cudaEventRecord(m->done_ev, s0));
    return wait_ranks(m, m->done_ev, e);
}

ampc_status rt_ranks_run(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out,
                             cudaStream_t stream, bool sync, rt_err *e) {
    if (m->broken) return rt_fail(e, AMPC_E_CUDA, "the model cannot run: %s", m->broken);
    ampc_rt_model *r0 = m->rank[0];
    cudaStream_t s0 = stream ? stream : r0->stream;
    if (fork_ranks(m, s0, e) != AMPC_OK) return e->status;
    if (m->micro_batches > 0) { /* a pipeline: the micro-batches through the stages */
        if (rt_pipe_launch(m, in, out, e) != AMPC_OK || join_ranks(m, s0, e) != AMPC_OK)
            return e->status;
        return sync ? wait_done(m, s0, e) : AMPC_OK;
    }
    if (m->split_batch) { /* each rank its rows, straight from and to the caller's buffers */
        if (rt_data_copy_in(m, in, e) != AMPC_OK || launch_or_replay(m, e) != AMPC_OK ||
            rt_data_copy_out(m, out, e) != AMPC_OK || join_ranks(m, s0, e) != AMPC_OK)
            return e->status;
        return sync ? wait_done(m, s0, e) : AMPC_OK;
    }
    for (int32_t r = 0; r < m->n_ranks; r++) {
        ampc_rt_model *k = m->rank[r];
        RT_CUDA(e, cudaSetDevice(k->ctx.dev.index));
        for (int32_t i = 0; i < k->n_inputs; i++) {
            const ampc_rt_io *io = &k->inputs[i];
            if (io->ref.bytes == 0) continue;
            cudaError_t rc = cudaMemcpyAsync(rt_ref_ptr(&k->ctx, io->ref), in[i].data,
                                             (size_t)io->ref.bytes, cudaMemcpyDefault, k->stream);
            if (rc != cudaSuccess) {
                rt_fail_cuda(e, rc, "cudaMemcpyAsync(arena + ref.offset, in[i].data, ref.bytes, "
                             "cudaMemcpyDefault, stream)", __func__, __FILE__, __LINE__);
                rt_err_prefix(e, "copying input %d '%s' to rank %d: ", i, io->name,
                              m->first_rank + r);
                return e->status;
            }
        }
    }
    if (launch_or_replay(m, e) != AMPC_OK || join_ranks(m, s0, e) != AMPC_OK) return e->status;
    for (int32_t i = 0; i < r0->n_outputs; i++) {
        const ampc_rt_io *io = &r0->outputs[i];
        if (io->ref.bytes == 0) continue;
        cudaError_t rc = cudaMemcpyAsync(out[i].data, rt_ref_ptr(&r0->ctx, io->ref),
                                         (size_t)io->ref.bytes, cudaMemcpyDefault, s0);
        if (rc != cudaSuccess) {
            rt_fail_cuda(e, rc, "cudaMemcpyAsync(out[i].data, arena + ref.offset, ref.bytes, "
                         "cudaMemcpyDefault, s0)", __func__, __FILE__, __LINE__);
            rt_err_prefix(e, "copying output %d '%s' out of rank %d: ", i, io->name,
                          m->first_rank);
            return e->status;
        }
    }
    return sync ? wait_done(m, s0, e) : AMPC_OK;
}

/* As time_loop, for every rank: the time on the first device from before the fork to after the
 * join. */
ampc_status rt_ranks_time(ampc_rt_model *m, int32_t iterations, double *ms, rt_err *e) {
    if (m->broken) return rt_fail(e, AMPC_E_CUDA, "the model cannot run: %s", m->broken);
    cudaStream_t s0 = m->rank[0]->stream;
    RT_CUDA(e, cudaSetDevice(m->rank[0]->ctx.dev.index));
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t rc = cudaEventCreate(&ev[0]);
    if (rc == cudaSuccess) rc = cudaEventCreate(&ev[1]);
    if (rc != cudaSuccess)
        rt_fail_cuda(e, rc, "cudaEventCreate(&ev[k])", __func__, __FILE__, __LINE__);
    for (int32_t i = 0; i < iterations && e->status == AMPC_OK; i++) {
        float t = 0;
        rc = cudaEventRecord(ev[0], s0);
        if (rc != cudaSuccess) {
            rt_fail_cuda(e, rc, "cudaEventRecord(ev[0], s0)", __func__, __FILE__, __LINE__);
            break;
        }
        if (fork_ranks(m, s0, e) != AMPC_OK || launch_or_replay(m, e) != AMPC_OK ||
            join_ranks(m, s0, e) != AMPC_OK)
            break;
        rc = cudaEventRecord(ev[1], s0);
        if (rc != cudaSuccess) {
            rt_fail_cuda(e, rc, "cudaEventRecord(ev[1], s0)", __func__, __FILE__, __LINE__);
            break;
        }
        if (wait_ranks(m, ev[1], e) != AMPC_OK) break;
        rc = cudaEventElapsedTime(&t, ev[0], ev[1]);
        if (rc != cudaSuccess)
            rt_fail_cuda(e, rc, "cudaEventElapsedTime(&t, ev[0], ev[1])", __func__, __FILE__,
                         __LINE__);
        ms[i] = t;
    }
    (void)cudaSetDevice(m->rank[0]->ctx.dev.index);
    for (int k = 0; k < 2; k++)
        if (ev[k]) (void)cudaEventDestroy(ev[k]);
    return e->status;
}

/* Rank r's model on `device` with its communicator *comm, which it takes (*comm is then NULL:
 * rank[r]->ctx.nccl owns it, also when building fails). */
static ampc_status build_rank(ampc_rt_model *m, const ampc_rt_plan *p, int32_t r, int32_t device,
                              void **comm, rt_err *e) {
    ampc_rt_model *k = calloc(1, sizeof *k);
    if (k == NULL) { /* no rank to own the communicator: it goes here */
        rt_nccl_comms_destroy(comm, 1, true);
        return rt_fail(e, AMPC_E_OOM, "out of host memory");
    }
    m->rank[r] = k;
    rt_model_set_options(k, &m->opts);
    k->ctx.nccl = *comm; /* the all-reduce steps' plan needs it */
    *comm = NULL;
    if (rt_device_open(device, &k->ctx.dev, e) != AMPC_OK) return e->status;
    k->device_set = true;
    if (rt_model_build(k, p, e) != AMPC_OK) {
        rt_err_prefix(e, "rank %d on device %d (%s): ", m->first_rank + r, device,
                      k->ctx.dev.name);
        return e->status;
    }
    k->graph_status = AMPC_RT_GRAPH_OFF;
    m->device_bytes += k->device_bytes;
    RT_CUDA(e, cudaEventCreateWithFlags(&m->join_ev[r], cudaEventDisableTiming));
    return AMPC_OK;
}

static ampc_status finish_ranks(ampc_rt_model *m, const ampc_rt_plan *p, int32_t device,
                                rt_err *e);

/* Everything a multi-GPU model's creation does after the plan check: the device count, the
 * communicators, one model per rank, the events. Resources go into m as they are made. */
static ampc_status build_ranks(ampc_rt_model *m, const ampc_rt_plan *p, int32_t device,
                               rt_err *e) {
    int32_t n = p->n_ranks;
    m->group = n;
    m->timeout_s = m->opts.nccl_timeout_s;
    if (rt_device_open(device, &m->ctx.dev, e) != AMPC_OK) return e->status;
    m->device_set = true;
    int count = 0;
    RT_CUDA(e, cudaGetDeviceCount(&count));
    if (device < 0 || (int64_t)device + n > count)
        return rt_fail(e, AMPC_E_NO_DEVICE, "the model is partitioned over %d GPUs (devices %d "
                       "to %d), but %d CUDA device%s visible: run it on a machine with %d GPUs "
                       "(CUDA_VISIBLE_DEVICES), or compile it for fewer with --gpus", n, device,
                       device + n - 1, count, count == 1 ? " is" : "s are", n);
    m->rank = calloc((size_t)n, sizeof *m->rank);
    m->cursor = calloc((size_t)n, sizeof *m->cursor);
    m->join_ev = calloc((size_t)n, sizeof *m->join_ev);
    int32_t *ranks = calloc((size_t)n, sizeof *ranks), *devices = calloc((size_t)n, sizeof *devices);
    void **comms = calloc((size_t)n, sizeof *comms);
    ampc_status st = m->rank && m->cursor && m->join_ev && ranks && devices && comms
                         ? AMPC_OK
                         : rt_fail(e, AMPC_E_OOM, "out of host memory");
    for (int32_t r = 0; r < n && st == AMPC_OK; r++) ranks[r] = r, devices[r] = device + r;
    /* a batch split never exchanges data: no communicators, NCCL is not even loaded */
    if (st == AMPC_OK && !p->split_batch && !p->micro_batches) /* a pipeline: peer copies */
        st = rt_nccl_comms_init(n, NULL, n, ranks, devices, comms, e);
    m->n_ranks = st == AMPC_OK ? n : 0;
    for (int32_t r = 0; r < n && st == AMPC_OK; r++) {
        st = build_rank(m, &p->ranks[r], r, devices[r], &comms[r], e);
    }
    if (comms) rt_nccl_comms_destroy(comms, n, true); /* those no rank took */
    free(ranks);
    free(devices);
    free(comms);
    if (st != AMPC_OK) return st;
    return finish_ranks(m, p, device, e);
}

/* The end of a multi-GPU model's creation, once every local rank is built: the events on the
 * first device, the queries mirroring rank 0's, the graph settings. */
static ampc_status finish_ranks(ampc_rt_model *m, const ampc_rt_plan *p, int32_t device,
                                rt_err *e) {
    int32_t n = m->n_ranks;
    RT_CUDA(e, cudaSetDevice(device));
    RT_CUDA(e, cudaEventCreateWithFlags(&m->fork_ev, cudaEventDisableTiming));
    RT_CUDA(e, cudaEventCreateWithFlags(&m->done_ev, cudaEventDisableTiming));
    /* the queries (io, steps, providers) read rank 0's */
    ampc_rt_model *r0 = m->rank[0];
    m->n_steps = r0->n_steps;
    m->steps = r0->steps;
    m->prov = r0->prov;
    m->state = r0->state;
    m->n_inputs = r0->n_inputs;
    m->inputs = r0->inputs;
    m->n_outputs = r0->n_outputs;
    m->outputs = r0->outputs;
    if (p->split_batch && rt_data_setup(m, p, e) != AMPC_OK) return e->status;
    if (p->micro_batches > 0 && rt_pipe_setup(m, p, e) != AMPC_OK) return e->status;
    bool no_collective = p->split_batch || p->micro_batches > 0;
    /* CUDA graphs over several GPUs are opt-in until measured on the GPU machines; a batch
     * split has no collective to capture, so its ranks' graphs are plain ones: on by default
     * (AMPC_MULTI_GPU_GRAPHS=0 turns them off) */
    m->rank_graph = calloc((size_t)n, sizeof *m->rank_graph);
    m->rank_exec = calloc((size_t)n, sizeof *m->rank_exec);
    if (m->rank_graph == NULL || m->rank_exec == NULL)
        return rt_fail(e, AMPC_E_OOM, "out of host memory");
    const int32_t g = m->opts.multi_gpu_graphs;
    if (!m->opts.cuda_graphs) {
        m->graph_status = AMPC_RT_GRAPH_OFF;
        m->graph_why = strdup("turned off by the cuda_graphs option (AMPC_CUDA_GRAPHS=0)");
    } else if (no_collective && g == 0) {
        m->graph_status = AMPC_RT_GRAPH_OFF;
        m->graph_why = strdup("turned off by the multi_gpu_graphs option (AMPC_MULTI_GPU_GRAPHS=0)");
    } else if (!no_collective && g != 1) {
        m->graph_status = AMPC_RT_GRAPH_OFF;
        m->graph_why = strdup("a multi-GPU model launches its steps one by one unless "
                              "AMPC_MULTI_GPU_GRAPHS=1 asks for a CUDA graph per GPU");
    }
    return AMPC_OK;
}

ampc_status rt_ranks_create(const ampc_rt_plan *p, int32_t device, const ampc_rt_options *o,
                            ampc_rt_model **out, rt_err *e) {
    ampc_rt_model *m = calloc(1, sizeof *m);
    if (m == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    rt_model_set_options(m, o);
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    ampc_status st = build_ranks(m, p, device, e);
    if (prev >= 0) (void)cudaSetDevice(prev);
    if (st != AMPC_OK) {
        rt_err_prefix(e, "loading model '%s' on %d GPUs: ", p->name ? p->name : "", p->n_ranks);
        m->n_ranks = m->n_ranks ? m->n_ranks : p->n_ranks; /* rt_ranks_destroy frees what exists */
        rt_ranks_destroy(m);
        return st;
    }
    *out = m;
    return AMPC_OK;
}

void rt_ranks_destroy(ampc_rt_model *m) {
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    void **comms = calloc((size_t)m->n_ranks + 1, sizeof *comms);
    for (int32_t r = 0; m->rank && r < m->n_ranks; r++) {
        ampc_rt_model *k = m->rank[r];
        if (k == NULL) continue;
        if (k->stream) {
            (void)cudaSetDevice(k->ctx.dev.index);
            (void)cudaStreamSynchronize(k->stream);
        }
        if (comms) comms[r] = k->ctx.nccl;
        else rt_nccl_comms_destroy(&k->ctx.nccl, 1, true);
        k->ctx.nccl = NULL;
    }
    drop_rank_graphs(m);
    rt_pipe_free(m); /* its events live on the ranks' devices, read from the rank models */
    if (comms) rt_nccl_comms_destroy(comms, m->n_ranks, m->broken != NULL);
    free(comms);
    for (int32_t r = 0; m->rank && r < m->n_ranks; r++) {
        if (m->join_ev && m->join_ev[r] && m->rank[r]) {
            (void)cudaSetDevice(m->rank[r]->ctx.dev.index);
            (void)cudaEventDestroy(m->join_ev[r]);
        }
        ampc_rt_model_destroy(m->rank[r]);
    }
    if (m->device_set) (void)cudaSetDevice(m->ctx.dev.index);
    if (m->fork_ev) (void)cudaEventDestroy(m->fork_ev);
    if (m->done_ev) (void)cudaEventDestroy(m->done_ev);
    free(m->rank);
    free(m->rank_graph);
    free(m->rank_exec);
    free(m->cursor);
    free(m->join_ev);
    free(m->graph_why);
    free(m->broken);
    rt_data_free(m);
    if (prev >= 0) (void)cudaSetDevice(prev);
    rt_cuda_clear();
    free(m);
}

/* ---- one process per GPU --------------------------------------------------------------------
 * The same model with one local rank: rank[0] is rank `first_rank` of a group of `group` ranks
 * whose others are other processes' models. Runs walk the same code (one rank's segments, each
 * all-reduce alone in its NCCL group); inputs go to this rank, outputs come from it. */

/* Rank `rank`'s model on `device`: its communicator (NCCL's setup bounded by the timeout), its
 * model, then what every multi-GPU model has. */
static ampc_status build_one_rank(ampc_rt_model *m, const ampc_rt_plan *p, int32_t device,
                                  int32_t rank, const void *nccl_id, rt_err *e) {
    m->first_rank = rank;
    m->group = p->n_ranks;
    m->timeout_s = m->opts.nccl_timeout_s;
    if (rt_device_open(device, &m->ctx.dev, e) != AMPC_OK) return e->status;
    m->device_set = true;
    m->rank = calloc(1, sizeof *m->rank);
    m->cursor = calloc(1, sizeof *m->cursor);
    m->join_ev = calloc(1, sizeof *m->join_ev);
    if (m->rank == NULL || m->cursor == NULL || m->join_ev == NULL)
        return rt_fail(e, AMPC_E_OOM, "out of host memory");
    m->n_ranks = 1; /* from here rt_ranks_destroy frees rank[0] */
    void *comm = NULL;
    if (rt_nccl_comm_init_rank(p->n_ranks, nccl_id, rank, device, m->timeout_s, &comm, e) !=
        AMPC_OK)
        return e->status;
    if (build_rank(m, &p->ranks[rank], 0, device, &comm, e) != AMPC_OK) return e->status;
    return finish_ranks(m, p, device, e);
}

ampc_status rt_ranks_create_rank(const ampc_rt_plan *p, int32_t device, int32_t rank,
                                 const void *nccl_id, const ampc_rt_options *o,
                                 ampc_rt_model **out, rt_err *e) {
    ampc_rt_model *m = calloc(1, sizeof *m);
    if (m == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    rt_model_set_options(m, o);
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    ampc_status st = build_one_rank(m, p, device, rank, nccl_id, e);
    if (prev >= 0) (void)cudaSetDevice(prev);
    if (st != AMPC_OK) {
        rt_err_prefix(e, "loading rank %d of %d of model '%s' on device %d: ", rank, p->n_ranks,
                      p->name ? p->name : "", device);
        if (m->n_ranks > 0) {
            rt_ranks_destroy(m);
        } else {
            free(m->rank);
            free(m->cursor);
            free(m->join_ev);
            free(m);
        }
        return st;
    }
    *out = m;
    return AMPC_OK;
}

/* The host-side checks of ampc_rt_model_create_rank: every argument against the plan. */
static ampc_status check_rank_args(const ampc_rt_plan *plan, int32_t rank, int32_t n_ranks,
                                   const ampc_rt_nccl_id *id, ampc_rt_model **out, rt_err *e) {
    const char *null = plan == NULL ? "plan" : out == NULL ? "out" : NULL;
    if (null)
        return rt_fail(e, AMPC_E_INVALID_ARG, "ampc_rt_model_create_rank: %s is NULL", null);
    if (rt_plan_check(plan, e) != AMPC_OK) return e->status;
    int32_t gpus = plan->n_ranks > 1 ? plan->n_ranks : 1;
    if (n_ranks != gpus && gpus == 1)
        return rt_fail(e, AMPC_E_INVALID_ARG, "model '%s' is compiled for one GPU (no --gpus), "
                       "but n_ranks is %d: one process per GPU needs a model compiled with "
                       "--gpus N --partition tensor, N the number of processes",
                       plan->name ? plan->name : "", n_ranks);
    if (n_ranks != gpus)
        return rt_fail(e, AMPC_E_INVALID_ARG, "model '%s' is partitioned over %d GPUs, but "
                       "n_ranks is %d: start one process per GPU", plan->name ? plan->name : "",
                       gpus, n_ranks);
    if (rank < 0 || rank >= n_ranks)
        return rt_fail(e, AMPC_E_INVALID_ARG, "rank %d is out of range: model '%s' has ranks 0 "
                       "to %d", rank, plan->name ? plan->name : "", n_ranks - 1);
    if (gpus == 1) return AMPC_OK; /* rank 0 of 1: no NCCL, the id is not read */
    if (plan->split_batch)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "model '%s' splits the batch over %d GPUs "
                       "(--partition data), which runs from one process: load it with "
                       "ampc_rt_model_create", plan->name ? plan->name : "", plan->n_ranks);
    if (plan->micro_batches > 0)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "model '%s' is a pipeline over %d GPUs "
                       "(--partition pipeline), which runs from one process (its stages copy "
                       "between the GPUs' memory): load it with ampc_rt_model_create",
                       plan->name ? plan->name : "", plan->n_ranks);
    if (plan->ranks == NULL)
        return rt_fail(e, AMPC_E_INVALID_ARG, "this is rank %d's own plan of a %d-GPU model: "
                       "create each rank from the model's plan (the one listing every rank's)",
                       plan->rank, plan->n_ranks);
    if (id == NULL)
        return rt_fail(e, AMPC_E_INVALID_ARG, "ampc_rt_model_create_rank: id is NULL: rank 0 "
                       "makes the group's NCCL id with ampc_rt_nccl_id_create and every process "
                       "passes the same bytes");
    bool zero = true;
    for (size_t i = 0; i < sizeof id->bytes && zero; i++) zero = id->bytes[i] == 0;
    if (zero)
        return rt_fail(e, AMPC_E_INVALID_ARG, "the NCCL id is all zeros: rank 0 makes it with "
                       "ampc_rt_nccl_id_create and hands the same 128 bytes to every process "
                       "(MPI_Bcast, a file) before they create their ranks");
    return AMPC_OK;
}

ampc_status ampc_rt_model_create_rank(const ampc_rt_plan *plan, int32_t device, int32_t rank,
                                      int32_t n_ranks, const ampc_rt_nccl_id *id,
                                      ampc_rt_model **out, char **err) {
    ampc_rt_options o;
    ampc_rt_options_init(&o);
    return ampc_rt_model_create_rank_opts(plan, device, rank, n_ranks, id, &o, out, err);
}

ampc_status ampc_rt_model_create_rank_opts(const ampc_rt_plan *plan, int32_t device,
                                           int32_t rank, int32_t n_ranks,
                                           const ampc_rt_nccl_id *id, const ampc_rt_options *o,
                                           ampc_rt_model **out, char **err) {
    rt_err e = {0};
    if (out != NULL) *out = NULL;
    if (check_rank_args(plan, rank, n_ranks, id, out, &e) != AMPC_OK) {
        if (plan != NULL && out != NULL && plan->n_ranks > 1)
            rt_err_prefix(&e, "rank %d of %d: ", rank, n_ranks);
        return rt_err_give(&e, err);
    }
    if (plan->n_ranks <= 1) return ampc_rt_model_create_opts(plan, device, o, out, err);
    rt_ranks_create_rank(plan, device, rank, id->bytes, o, out, &e);
    return rt_err_give(&e, err);
}

ampc_status ampc_rt_nccl_id_create(ampc_rt_nccl_id *id, char **err) {
    rt_err e = {0};
    if (id == NULL)
        rt_fail(&e, AMPC_E_INVALID_ARG, "ampc_rt_nccl_id_create: id is NULL");
    else
        rt_nccl_unique_id(id->bytes, &e);
    return rt_err_give(&e, err);
}

int32_t ampc_rt_plan_n_ranks(const ampc_rt_plan *plan) {
    if (plan == NULL) return 0;
    return plan->n_ranks > 1 ? plan->n_ranks : 1;
}
