/*
 * io_bind.c — runs on device buffers without copies: the steps read the caller's inputs and
 * write its outputs where they are.
 *
 * The memory plan gives every graph input and output arena bytes that no other value shares,
 * for the whole run (passes/plan_memory.c; plan version 5). So for a set of caller buffers,
 * ctx.io_bind maps each input's and output's arena range to the caller's buffer; every step
 * with a ref in one of those ranges is re-pointed (its provider's rebind, through rt_ref_ptr,
 * which now answers with the caller's address); the steps are captured into a CUDA graph; and
 * the steps are re-pointed back at the arena, so that every other kind of run (host tensors,
 * profiling, timing) finds them as planned. The graph is kept for that set of buffers, up to
 * ZC_CACHE sets (the least recently used goes first): a caller cycling through a few buffer
 * sets pays one capture for each.
 *
 * A run binds in place when every tensor of it is device memory of the model's device (the
 * caller checks), every buffer is 256-byte aligned (what the arena gave the libraries' algorithm
 * choices), no output overlaps another tensor of the run, and every step touching an input or
 * output can be re-pointed: generated kernels, copies and dense cuBLASLt GEMMs can; cuDNN and
 * 2:4 steps, whose plans hold their addresses, cannot, and their models copy as before (the
 * I/O graph, model.c). AMPC_ZERO_COPY=0 turns it off.
 */
#define _GNU_SOURCE /* strdup */
#include "runtime/model.h"

#include <stdlib.h>
#include <string.h>

enum { ZC_CACHE = 4, ZC_ALIGN = 256 };

/* One captured graph of the steps on one set of caller buffers. */
typedef struct rt_zc_graph {
    void **ptr;            /* n_inputs + n_outputs: the buffers it was captured on */
    cudaGraphExec_t exec;
    uint64_t used;         /* m->zc_tick when last launched */
} rt_zc_graph;

static const ampc_rt_io *io_at(const ampc_rt_model *m, int32_t i) {
    return i < m->n_inputs ? &m->inputs[i] : &m->outputs[i - m->n_inputs];
}

static bool overlaps(int64_t a, int64_t an, int64_t b, int64_t bn) {
    return a < b + bn && b < a + an;
}

/* Why step s, whose refs are refs[0..n), keeps model m from binding (a static string), or NULL;
 * a step touching an input or output joins m->zc_steps. */
static const char *step_eligible(ampc_rt_model *m, int32_t s, const ampc_rt_ref *refs, int n) {
    int32_t n_io = m->n_inputs + m->n_outputs;
    bool touches = false;
    for (int k = 0; k < n; k++) { /* every ref, so that none straddles */
        if (refs[k].bytes == 0 || refs[k].space != AMPC_RT_ARENA) continue;
        for (int32_t i = 0; i < n_io; i++) {
            ampc_rt_ref r = io_at(m, i)->ref;
            if (r.bytes == 0 || !overlaps(refs[k].offset, refs[k].bytes, r.offset, r.bytes))
                continue;
            if (refs[k].offset < r.offset || refs[k].offset + refs[k].bytes > r.offset + r.bytes)
                return "a step's tensor straddles an input's or output's bytes";
            touches = true;
        }
    }
    if (!touches) return NULL;
    if (m->prov[s]->rebind == NULL) return "a step touching an input or output cannot be "
                                           "re-pointed (cuDNN, NCCL)";
    rt_err e = {0}; /* with no binding, a rebind recomputes the arena addresses: a dry run */
    ampc_status st = m->prov[s]->rebind(&m->ctx, &m->steps[s], m->state[s], &e);
    rt_err_clear(&e);
    if (st != AMPC_OK) return "a step touching an input or output cannot be re-pointed "
                              "(a 2:4 GEMM)";
    m->zc_steps[m->n_zc_steps++] = s;
    return NULL;
}

/* Why model m cannot bind (a static string), or NULL when it can; fills m->zc_steps. */
static const char *eligible(ampc_rt_model *m) {
    int32_t n_io = m->n_inputs + m->n_outputs;
    for (int32_t s = 0; s < m->n_steps; s++)
        if (m->steps[s].kind == AMPC_RT_STEP_BRANCH)
            return "the plan jumps (a Loop whose stop depends on data): no graph to bind";
    for (int32_t i = 0; i < n_io; i++) {
        ampc_rt_ref r = io_at(m, i)->ref;
        if (r.bytes > 0 && r.space != AMPC_RT_ARENA) return "an input or output is a constant";
        for (int32_t j = 0; j < i; j++) {
            ampc_rt_ref q = io_at(m, j)->ref;
            if (r.bytes > 0 && q.bytes > 0 && overlaps(r.offset, r.bytes, q.offset, q.bytes))
                return "two inputs or outputs share arena bytes";
        }
    }
    m->zc_steps = calloc((size_t)m->n_steps + 1, sizeof *m->zc_steps);
    if (m->zc_steps == NULL) return "out of host memory";
    ampc_rt_ref *refs = NULL; /* every ref of the step: a kernel may have any number */
    const char *why = NULL;
    for (int32_t s = 0, cap = 0; s < m->n_steps && why == NULL; s++) {
        int n = rt_step_refs(&m->steps[s], refs, cap);
        if (n > cap) {
            free(refs);
            cap = n;
            if ((refs = calloc((size_t)cap, sizeof *refs)) == NULL) {
                why = "out of host memory";
                break;
            }
            (void)rt_step_refs(&m->steps[s], refs, cap);
        }
        why = step_eligible(m, s, refs, n);
    }
    free(refs);
    return why;
}

void rt_io_bind_setup(ampc_rt_model *m) {
    const char *why = !m->opts.zero_copy ? "turned off by the zero_copy option (AMPC_ZERO_COPY=0)"
                                         : eligible(m);
    m->zc_on = why == NULL;
    m->zc_why = why;
}

void rt_io_bind_free(ampc_rt_model *m) {
    for (int32_t k = 0; m->zc && k < ZC_CACHE; k++) {
        if (m->zc[k].exec) (void)cudaGraphExecDestroy(m->zc[k].exec);
        free(m->zc[k].ptr);
    }
    free(m->zc);
    free(m->zc_steps);
    m->zc = NULL;
    m->zc_steps = NULL;
}

static void *caller_ptr(const ampc_rt_model *m, const ampc_tensor *in, const ampc_tensor *out,
                        int32_t i) {
    return i < m->n_inputs ? (void *)in[i].data : out[i - m->n_inputs].data;
}

/* Whether this run's buffers can be bound: aligned, and no output overlapping another tensor. */
static bool run_fits(const ampc_rt_model *m, const ampc_tensor *in, const ampc_tensor *out) {
    int32_t n_io = m->n_inputs + m->n_outputs;
    for (int32_t i = 0; i < n_io; i++) {
        int64_t n = io_at(m, i)->ref.bytes;
        uintptr_t p = (uintptr_t)caller_ptr(m, in, out, i);
        if (n > 0 && p % ZC_ALIGN) return false;
        for (int32_t j = m->n_inputs; j < n_io && i < j && n > 0; j++) {
            uintptr_t q = (uintptr_t)caller_ptr(m, in, out, j);
            int64_t qn = io_at(m, j)->ref.bytes;
            if (qn > 0 && overlaps((int64_t)p, n, (int64_t)q, qn)) return false;
        }
    }
    return true;
}

/* Re-points every step touching an input or output through the current ctx.io_bind. */
static ampc_status rebind_steps(ampc_rt_model *m, rt_err *e) {
    for (int32_t k = 0; k < m->n_zc_steps; k++) {
        int32_t s = m->zc_steps[k];
        if (m->prov[s]->rebind(&m->ctx, &m->steps[s], m->state[s], e) != AMPC_OK) {
            rt_step_prefix(e, &m->steps[s], s);
            return e->status;
        }
    }
    return AMPC_OK;
}

/* Captures the steps re-pointed at the caller's buffers ptr[] into *exec, then points them back
 * at the arena. A failure to point them back leaves the model unusable in place: zc_on goes
 * off and the error is the run's. */
static ampc_status capture(ampc_rt_model *m, void **ptr, cudaGraphExec_t *exec, rt_err *e) {
    int32_t n_io = m->n_inputs + m->n_outputs, nb = 0;
    rt_io_bind *bind = calloc((size_t)n_io + 1, sizeof *bind);
    if (bind == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    for (int32_t i = 0; i < n_io; i++) {
        ampc_rt_ref r = io_at(m, i)->ref;
        if (r.bytes > 0) bind[nb++] = (rt_io_bind){r.offset, r.bytes, ptr[i]};
    }
    m->ctx.io_bind = bind, m->ctx.n_io_bind = nb;
    cudaGraph_t g = NULL;
    if (rebind_steps(m, e) == AMPC_OK) {
        cudaError_t rc = cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal);
        if (rc != cudaSuccess) {
            rt_fail_cuda(e, rc, "cudaStreamBeginCapture(m->stream, ThreadLocal)", __func__,
                         __FILE__, __LINE__);
        } else {
            ampc_status st = rt_model_launch_steps(m, m->stream, NULL, e);
            rc = cudaStreamEndCapture(m->stream, &g); /* always: it ends the capture mode */
            if (st == AMPC_OK && rc != cudaSuccess)
                rt_fail_cuda(e, rc, "cudaStreamEndCapture(m->stream, &g)", __func__, __FILE__,
                             __LINE__);
            else if (st == AMPC_OK) {
                rt_graph_describe(g, m->opts.graph_verbose);
                if ((rc = cudaGraphInstantiateWithFlags(exec, g, 0)) != cudaSuccess)
                    rt_fail_cuda(e, rc, "cudaGraphInstantiateWithFlags(exec, g, 0)", __func__,
                                 __FILE__, __LINE__);
            }
        }
    }
    if (g) (void)cudaGraphDestroy(g);
    m->ctx.io_bind = NULL, m->ctx.n_io_bind = 0;
    free(bind);
    rt_err back = {0};
    if (rebind_steps(m, &back) != AMPC_OK) {
        m->zc_on = false;
        m->zc_why = "re-pointing the steps back at the arena failed";
        if (e->status == AMPC_OK) *e = back;
        else rt_err_clear(&back);
    }
    return e->status;
}

/* The cached graph for this run's buffers, captured on a miss (into the least recently used
 * slot; *fresh then true); NULL after a failure, e says why. */
static rt_zc_graph *graph_for(ampc_rt_model *m, const ampc_tensor *in, const ampc_tensor *out,
                              bool *fresh, rt_err *e) {
    *fresh = false;
    int32_t n_io = m->n_inputs + m->n_outputs;
    if (m->zc == NULL && (m->zc = calloc(ZC_CACHE, sizeof *m->zc)) == NULL) {
        rt_fail(e, AMPC_E_OOM, "out of host memory");
        return NULL;
    }
    rt_zc_graph *lru = &m->zc[0];
    for (int32_t k = 0; k < ZC_CACHE; k++) {
        rt_zc_graph *z = &m->zc[k];
        bool same = z->exec != NULL;
        for (int32_t i = 0; i < n_io && same; i++) same = z->ptr[i] == caller_ptr(m, in, out, i);
        if (same) return z;
        if (z->exec == NULL || (lru->exec != NULL && z->used < lru->used)) lru = z;
    }
    if (lru->exec) (void)cudaGraphExecDestroy(lru->exec);
    lru->exec = NULL;
    if (lru->ptr == NULL && (lru->ptr = calloc((size_t)n_io + 1, sizeof *lru->ptr)) == NULL) {
        rt_fail(e, AMPC_E_OOM, "out of host memory");
        return NULL;
    }
    for (int32_t i = 0; i < n_io; i++) lru->ptr[i] = caller_ptr(m, in, out, i);
    if (capture(m, lru->ptr, &lru->exec, e) != AMPC_OK) {
        lru->exec = NULL;
        return NULL;
    }
    *fresh = true;
    return lru;
}

bool rt_io_bind_run(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out, cudaStream_t s,
                    rt_err *e) {
    if (!m->zc_on || m->graph_status != AMPC_RT_GRAPH_ON || !run_fits(m, in, out)) return false;
    rt_err ce = {0};
    bool fresh;
    rt_zc_graph *z = graph_for(m, in, out, &fresh, &ce);
    if (z == NULL) { /* not an error of the run: it copies instead, from now on */
        rt_cuda_clear();
        if (m->zc_on) {
            m->zc_on = false;
            m->zc_why = "capturing the steps on the caller's buffers failed";
        }
        rt_err_clear(&ce);
        return false;
    }
    z->used = ++m->zc_tick;
    /* the first run on a set of buffers also leaves the inputs in the arena, where
     * ampc_rt_model_time's launches (on the arena) find real data */
    if (fresh && rt_model_copy_inputs(m, in, s, e) != AMPC_OK) return true;
    cudaError_t rc = cudaGraphLaunch(z->exec, s);
    if (rc != cudaSuccess)
        rt_fail_cuda(e, rc, "cudaGraphLaunch(exec, stream)", __func__, __FILE__, __LINE__);
    m->zc_runs++;
    return true;
}
