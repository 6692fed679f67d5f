/*
 * model.c — a plan loaded on a GPU, and running it.
 *
 * Creation (once): check the plan on the host; find the device; copy the parts of the plan the
 * runs need (steps, inputs, outputs: the caller may free the plan afterwards); load each unit's
 * image (the exact-architecture cubin, else the PTX); allocate the arena and the weights (one
 * cudaMalloc each; weights uploaded once); ask each step's provider whether it can run the step
 * and let it plan (descriptors, algorithm, workspace size); allocate one workspace for every
 * library step (they run one after another on one stream); run each library step once; zero the
 * arena.
 *
 * A run: validate every tensor (before touching memory), copy the inputs into their arena refs,
 * run the steps (captured into a CUDA graph on the first run, replayed afterwards: the addresses
 * never change), copy the outputs out, synchronise. When every tensor of a run is device memory
 * of the model's device, the copies are nodes of one more graph around the steps' graph (the I/O
 * graph), so that a run is a single launch.
 *
 * A multi-GPU model (a plan with n_ranks = N > 1) is N such models, rank r's on device
 * `device + r`, each with its NCCL communicator (prov_nccl.c), under one handle that routes to
 * them: see ranks.c.
 */
#define _GNU_SOURCE /* strdup */
#include "runtime/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cubin image encoding: 10 * major + minor, with the "a" (architecture-specific) flag above */
enum { ARCH_MASK = 0xffff };

static void io_graph_drop(ampc_rt_model *m, io_graph_state to);

/* ---- copying the plan ------------------------------------------------------------------------ */

/* A malloc'ed copy of n bytes the model frees at destroy; NULL on OOM (or for src NULL). */
static void *own(ampc_rt_model *m, const void *src, size_t n) {
    if (src == NULL) return NULL;
    if (m->n_owned == m->cap_owned) {
        int32_t cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **p = realloc(m->owned, (size_t)cap * sizeof *p);
        if (p == NULL) return NULL;
        m->owned = p;
        m->cap_owned = cap;
    }
    void *d = malloc(n ? n : 1);
    if (d == NULL) return NULL;
    if (n) memcpy(d, src, n);
    m->owned[m->n_owned++] = d;
    return d;
}

static const char *own_str(ampc_rt_model *m, const char *s) {
    return s ? own(m, s, strlen(s) + 1) : NULL;
}

static ampc_status copy_plan(ampc_rt_model *m, const ampc_rt_plan *p, rt_err *e) {
    m->n_steps = p->n_steps;
    m->n_inputs = p->n_inputs;
    m->n_outputs = p->n_outputs;
    m->steps = own(m, p->steps, (size_t)p->n_steps * sizeof *p->steps);
    m->inputs = own(m, p->inputs, (size_t)p->n_inputs * sizeof *p->inputs);
    m->outputs = own(m, p->outputs, (size_t)p->n_outputs * sizeof *p->outputs);
    m->prov = calloc((size_t)p->n_steps + 1, sizeof *m->prov);
    m->state = calloc((size_t)p->n_steps + 1, sizeof *m->state);
    bool ok = m->prov && m->state && (m->steps || !p->n_steps) && (m->inputs || !p->n_inputs) &&
              (m->outputs || !p->n_outputs);
    for (int32_t i = 0; ok && i < p->n_steps; i++) {
        ampc_rt_step *s = &m->steps[i];
        if (s->label) ok = (s->label = own_str(m, s->label)) != NULL;
        if (ok && s->kind == AMPC_RT_STEP_KERNEL) {
            ok = (s->kernel.name = own_str(m, s->kernel.name)) != NULL;
            if (ok && s->kernel.n_args > 0)
                ok = (s->kernel.args = own(m, s->kernel.args,
                                           (size_t)s->kernel.n_args * sizeof *s->kernel.args)) != NULL;
        }
        ampc_rt_kernel *sk = s->kind == AMPC_RT_STEP_GEMM ? &s->gemm.own_kernel : NULL;
        if (ok && sk && sk->name) {
            ok = (sk->name = own_str(m, sk->name)) != NULL;
            if (ok && sk->n_args > 0)
                ok = (sk->args = own(m, sk->args, (size_t)sk->n_args * sizeof *sk->args)) != NULL;
        }
    }
    for (int32_t i = 0; ok && i < p->n_inputs; i++)
        ok = (m->inputs[i].name = own_str(m, m->inputs[i].name)) != NULL;
    for (int32_t i = 0; ok && i < p->n_outputs; i++)
        ok = (m->outputs[i].name = own_str(m, m->outputs[i].name)) != NULL;
    return ok ? AMPC_OK : rt_fail(e, AMPC_E_OOM, "out of host memory copying the plan");
}

/* ---- loading images -------------------------------------------------------------------------- */

static const char *arch_str(int32_t sm, char *buf, size_t size) {
    snprintf(buf, size, "sm_%d%s", sm & ARCH_MASK, (sm & ~ARCH_MASK) ? "a" : "");
    return buf;
}

/* The image of unit u for this device: the cubin of exactly its architecture (the "a" variant
 * first: it may use architecture-specific instructions), else the PTX (the driver compiles it),
 * else NULL with the reason in e. */
static const ampc_rt_image *pick_image(const ampc_rt_plan *p, int32_t u, int32_t sm, rt_err *e) {
    const ampc_rt_image *cubin = NULL, *ptx = NULL;
    char have[256] = "", a[16];
    for (int32_t i = 0; i < p->n_images; i++) {
        const ampc_rt_image *im = &p->images[i];
        if (im->unit != u) continue;
        size_t n = strlen(have);
        snprintf(have + n, sizeof have - n, "%s%s %s", n ? ", " : "",
                 im->kind == AMPC_RT_IMAGE_PTX ? "PTX for" : "cubin for",
                 im->kind == AMPC_RT_IMAGE_PTX ? (snprintf(a, sizeof a, "compute_%d", im->sm), a)
                                               : arch_str(im->sm, a, sizeof a));
        if (im->kind == AMPC_RT_IMAGE_CUBIN && (im->sm & ARCH_MASK) == sm &&
            (cubin == NULL || (im->sm & ~ARCH_MASK)))
            cubin = im;
        if (im->kind == AMPC_RT_IMAGE_PTX && im->sm <= sm && (ptx == NULL || im->sm > ptx->sm))
            ptx = im;
    }
    if (cubin) return cubin;
    if (ptx) return ptx;
    rt_fail(e, AMPC_E_UNSUPPORTED, "unit %d has no image that runs on sm_%d: it has %s (a cubin "
            "must match the architecture exactly; PTX must be for compute_%d or older)", u, sm,
            have, sm);
    return NULL;
}

enum { JIT_LOG_BYTES = 16384 };

/* Fails unit u's load with the image named and the JIT log appended. */
static ampc_status unit_failed(rt_err *e, int32_t u, const rt_unit *un, int32_t sm) {
    rt_err_prefix(e, "unit %d: loading its %s on sm_%d failed: ", u, un->what, sm);
    if (un->log[0]) rt_err_append(e, "\nJIT log:\n%s", un->log);
    return e->status;
}

static ampc_status load_units(ampc_rt_model *m, const ampc_rt_plan *p, rt_err *e) {
    rt_ctx *c = &m->ctx;
    c->n_units = p->n_units;
    c->units = calloc((size_t)p->n_units + 1, sizeof *c->units);
    if (c->units == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    for (int32_t u = 0; u < p->n_units; u++) {
        rt_unit *un = &c->units[u];
        const ampc_rt_image *im = pick_image(p, u, c->dev.sm, e);
        if (im == NULL) return e->status;
        char a[16];
        un->pdl = (im->sm & ARCH_MASK) >= 90;
        if (im->kind == AMPC_RT_IMAGE_PTX)
            snprintf(un->what, sizeof un->what, "PTX for compute_%d", im->sm);
        else
            snprintf(un->what, sizeof un->what, "cubin for %s", arch_str(im->sm, a, sizeof a));
        /* The JIT's error log makes a rejected PTX's message useful. The buffer lives as long as
         * the unit: with lazy loading the driver may compile after this call returns. */
        un->log = calloc(1, JIT_LOG_BYTES);
        if (un->log == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
        enum cudaJitOption opts[2] = {cudaJitErrorLogBuffer, cudaJitErrorLogBufferSizeBytes};
        void *vals[2] = {un->log, (void *)(uintptr_t)(JIT_LOG_BYTES - 1)};
        cudaError_t rc = cudaLibraryLoadData(&un->lib, im->data, opts, vals, 2, NULL, NULL, 0);
        if (rc != cudaSuccess) {
            un->lib = NULL;
            rt_fail_cuda(e, rc, "cudaLibraryLoadData(&un->lib, im->data, opts, vals, 2, NULL, NULL, 0)",
                         __func__, __FILE__, __LINE__);
            return unit_failed(e, u, un, c->dev.sm);
        }
        /* Load one kernel into the context now, so that a PTX the driver cannot compile fails
         * here, naming the unit, even when the driver loads modules lazily. */
        unsigned count = 0;
        RT_CUDA(e, cudaLibraryGetKernelCount(&count, un->lib));
        if (count > 0) {
            cudaKernel_t k = NULL;
            struct cudaFuncAttributes fa;
            RT_CUDA(e, cudaLibraryEnumerateKernels(&k, 1, un->lib));
            rc = cudaFuncGetAttributes(&fa, (const void *)k);
            if (rc != cudaSuccess) {
                rt_fail_cuda(e, rc, "cudaFuncGetAttributes(&fa, (const void *)k)", __func__,
                             __FILE__, __LINE__);
                return unit_failed(e, u, un, c->dev.sm);
            }
        }
    }
    return AMPC_OK;
}

/* ---- creation -------------------------------------------------------------------------------- */

/* Plans every step through its provider; returns the largest workspace asked in *ws. */
static ampc_status plan_steps(ampc_rt_model *m, const ampc_rt_plan *p, size_t *ws, rt_err *e) {
    *ws = 0;
    for (int32_t i = 0; i < m->n_steps; i++) {
        const ampc_rt_step *s = &m->steps[i];
        const rt_provider *pv = rt_provider_for(s->kind);
        m->prov[i] = pv;
        size_t need = 0;
        if (pv->supports(&m->ctx, p, s, e) != AMPC_OK ||
            pv->plan(&m->ctx, s, &m->state[i], &need, e) != AMPC_OK) {
            rt_step_prefix(e, s, i);
            return e->status;
        }
        if (need > *ws) *ws = need;
    }
    return AMPC_OK;
}

/* Runs each library step once (on the zeroed arena) and waits for it, so a library that accepted
 * a plan but cannot run it fails here, naming the step, rather than inside the first run. It also
 * loads the library's kernels before any graph capture. */
static ampc_status prove_library_steps(ampc_rt_model *m, rt_err *e) {
    for (int32_t i = 0; i < m->n_steps; i++) {
        uint8_t k = m->steps[i].kind;
        if (k != AMPC_RT_STEP_GEMM && k != AMPC_RT_STEP_CONV) continue;
        ampc_status s = m->prov[i]->launch(&m->ctx, m->state[i], m->stream, e);
        if (s == AMPC_OK) {
            cudaError_t rc = cudaStreamSynchronize(m->stream);
            if (rc != cudaSuccess)
                s = rt_fail_cuda(e, rc, "cudaStreamSynchronize(m->stream)", __func__, __FILE__,
                                 __LINE__);
        }
        if (s != AMPC_OK) {
            rt_step_prefix(e, &m->steps[i], i);
            return s;
        }
    }
    return AMPC_OK;
}

/* Everything creation does once the plan is checked and the device found, in the order of the
 * file comment. Resources go into m as they are made, so a failure at any point leaves m for
 * ampc_rt_model_destroy to free; the caller restores the current device. */
ampc_status rt_model_build(ampc_rt_model *m, const ampc_rt_plan *p, rt_err *e) {
    if (m->ctx.opts == NULL) rt_model_set_options(m, NULL); /* every provider reads them */
    rt_ctx *c = &m->ctx;
    RT_CUDA(e, cudaSetDevice(c->dev.index));
    if (copy_plan(m, p, e) != AMPC_OK) return e->status;
    RT_CUDA(e, cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    c->plan_stream = m->stream;
    if (load_units(m, p, e) != AMPC_OK) return e->status;

    c->arena_bytes = p->arena_bytes;
    c->weights_bytes = p->weights_bytes;
    /* A plan that cannot fit the device at all is refused before allocating, with the sizes and
     * the largest input or output (the usual cause: a huge declared shape). */
    size_t free_b = 0, total_b = 0;
    RT_CUDA(e, cudaMemGetInfo(&free_b, &total_b));
    if (p->arena_bytes > (int64_t)total_b || p->weights_bytes > (int64_t)total_b - p->arena_bytes) {
        const ampc_rt_io *big = NULL;
        int64_t big_bytes = -1;
        for (int32_t i = 0; i < p->n_inputs + p->n_outputs; i++) {
            const ampc_rt_io *io = i < p->n_inputs ? &p->inputs[i] : &p->outputs[i - p->n_inputs];
            if (io->ref.bytes > big_bytes) big = io, big_bytes = io->ref.bytes;
        }
        char largest[512] = "";
        if (big)
            snprintf(largest, sizeof largest, "; its largest input or output, '%s', takes %lld bytes",
                     big->name, (long long)big_bytes);
        return rt_fail(e, AMPC_E_OOM,
                       "the model needs %lld bytes of GPU memory (%lld for activations, %lld for "
                       "weights), more than device %d (%s) has in all (%llu bytes)%s",
                       (long long)p->arena_bytes + (long long)p->weights_bytes,
                       (long long)p->arena_bytes, (long long)p->weights_bytes, (int)c->dev.index,
                       c->dev.name, (unsigned long long)total_b, largest);
    }
    if (p->arena_bytes > 0) {
        RT_CUDA(e, cudaMalloc((void **)&c->arena, (size_t)p->arena_bytes));
    }
    if (p->weights_bytes > 0) {
        RT_CUDA(e, cudaMalloc((void **)&c->weights, (size_t)p->weights_bytes));
        RT_CUDA(e, cudaMemcpyAsync(c->weights, p->weights, (size_t)p->weights_bytes,
                                   cudaMemcpyHostToDevice, m->stream));
    }
    RT_CUDA(e, cudaStreamSynchronize(m->stream));

    size_t ws = 0;
    if (plan_steps(m, p, &ws, e) != AMPC_OK) return e->status;
    if (rt_plan_scratch_free(c, e) != AMPC_OK) return e->status;
    if (ws > 0) {
        RT_CUDA(e, cudaMalloc(&c->workspace, ws));
        c->workspace_bytes = ws;
    }
    m->device_bytes = p->arena_bytes + p->weights_bytes + (int64_t)ws;
    if (prove_library_steps(m, e) != AMPC_OK) return e->status;
    /* Zeroed once the algorithm timings and the proving runs are done (they write into it), so
     * that nothing a run computes depends on what was left there. */
    if (p->arena_bytes > 0) {
        RT_CUDA(e, cudaMemsetAsync(c->arena, 0, (size_t)p->arena_bytes, m->stream));
        RT_CUDA(e, cudaStreamSynchronize(m->stream));
    }

    if (!m->opts.cuda_graphs) {
        m->graph_status = AMPC_RT_GRAPH_OFF;
        m->graph_why = strdup("turned off by the cuda_graphs option (AMPC_CUDA_GRAPHS=0)");
    }
    for (int32_t i = 0; i < m->n_steps && m->graph_status != AMPC_RT_GRAPH_OFF; i++)
        if (m->steps[i].kind == AMPC_RT_STEP_BRANCH) {
            m->graph_status = AMPC_RT_GRAPH_OFF;
            m->graph_why = strdup("the plan jumps (a Loop whose stop depends on data): its steps "
                                  "are launched one by one");
        }
    if (!m->opts.io_graph) m->io_state = IO_GRAPH_OFF; /* copies on the stream around the graph */
    rt_io_bind_setup(m);
    return AMPC_OK;
}


void rt_model_set_options(ampc_rt_model *m, const ampc_rt_options *o) {
    if (o) m->opts = *o;
    else ampc_rt_options_init(&m->opts);
    m->ctx.opts = &m->opts;
}

ampc_status ampc_rt_model_create(const ampc_rt_plan *plan, int32_t device, ampc_rt_model **out,
                                 char **err) {
    ampc_rt_options o;
    ampc_rt_options_init(&o);
    return ampc_rt_model_create_opts(plan, device, &o, out, err);
}

ampc_status ampc_rt_model_create_opts(const ampc_rt_plan *plan, int32_t device,
                                      const ampc_rt_options *opts, ampc_rt_model **out,
                                      char **err) {
    rt_err e = {0};
    if (out != NULL) *out = NULL;
    if (plan == NULL || out == NULL) {
        rt_fail(&e, AMPC_E_INVALID_ARG, "ampc_rt_model_create: %s is NULL",
                plan == NULL ? "plan" : "out");
        return rt_err_give(&e, err);
    }
    /* the host-side checks first: a broken plan is reported the same with or without a GPU */
    if (rt_plan_check(plan, &e) != AMPC_OK) return rt_err_give(&e, err);
    if (plan->n_ranks > 1) {
        if (plan->ranks == NULL)
            rt_fail(&e, AMPC_E_INVALID_ARG, "this is rank %d's plan of a %d-GPU model: create "
                    "the model from the model's plan (the one listing every rank's)", plan->rank,
                    plan->n_ranks);
        else
            rt_ranks_create(plan, device, opts, out, &e);
        return rt_err_give(&e, err);
    }
    rt_device dev;
    if (rt_device_open(device, &dev, &e) != AMPC_OK) return rt_err_give(&e, err);

    ampc_rt_model *m = calloc(1, sizeof *m);
    if (m == NULL) {
        rt_fail(&e, AMPC_E_OOM, "out of host memory");
        return rt_err_give(&e, err);
    }
    m->ctx.dev = dev;
    m->device_set = true;
    rt_model_set_options(m, opts);
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    ampc_status s = rt_model_build(m, plan, &e);
    if (prev >= 0) (void)cudaSetDevice(prev);
    if (s != AMPC_OK) {
        rt_err_prefix(&e, "loading model '%s' on device %d (%s): ", plan->name ? plan->name : "",
                      dev.index, dev.name);
        ampc_rt_model_destroy(m);
        return rt_err_give(&e, err);
    }
    *out = m;
    return rt_err_give(&e, err);
}


void ampc_rt_model_destroy(ampc_rt_model *m) {
    if (m == NULL) return;
    if (m->n_ranks > 0) {
        rt_ranks_destroy(m);
        return;
    }
    rt_ctx *c = &m->ctx;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    if (m->device_set) (void)cudaSetDevice(c->dev.index);
    if (m->stream) (void)cudaStreamSynchronize(m->stream);
    io_graph_drop(m, IO_GRAPH_OFF);
    rt_io_bind_free(m);
    if (m->exec) (void)cudaGraphExecDestroy(m->exec);
    if (m->graph) (void)cudaGraphDestroy(m->graph);
    for (int32_t i = 0; i < m->n_steps && m->prov && m->state; i++)
        if (m->prov[i] && m->state[i]) m->prov[i]->release(c, m->state[i]);
    if (rt_provider_cublaslt.close) rt_provider_cublaslt.close(c);
    if (rt_provider_cudnn.close) rt_provider_cudnn.close(c);
    if (m->events) {
        for (int32_t i = 0; i <= m->n_steps; i++)
            if (m->events[i]) (void)cudaEventDestroy(m->events[i]);
        free(m->events);
    }
    if (c->workspace) (void)cudaFree(c->workspace);
    if (c->scratch) (void)cudaFree(c->scratch);
    if (c->flush) (void)cudaFree(c->flush);
    if (c->arena) (void)cudaFree(c->arena);
    if (c->weights) (void)cudaFree(c->weights);
    for (int32_t u = 0; c->units && u < c->n_units; u++) {
        if (c->units[u].lib) (void)cudaLibraryUnload(c->units[u].lib);
        free(c->units[u].log);
    }
    free(c->units);
    if (m->stream) (void)cudaStreamDestroy(m->stream);
    for (int32_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->prov);
    free(m->state);
    free(m->graph_why);
    if (prev >= 0) (void)cudaSetDevice(prev);
    rt_cuda_clear();
    free(m);
}

/* ---- running --------------------------------------------------------------------------------- */

/* The names of a list of inputs or outputs, "x, y" (up to 8, then "..."). */
static const char *io_names(const ampc_rt_io *io, int32_t n, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < n && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s'%s'", i ? ", " : "",
                              i < 8 ? io[i].name : "...");
    return n ? buf : "none";
}

/* One caller tensor against its declaration; *on_device becomes false unless the tensor's bytes
 * are device memory of the model's device (or it has none). */
static ampc_status check_tensor(const ampc_rt_model *m, bool is_out, int32_t i,
                                const ampc_tensor *t, bool *on_device, rt_err *e) {
    const ampc_rt_io *io = is_out ? &m->outputs[i] : &m->inputs[i];
    const char *kind = is_out ? "output" : "input";
    char a[200], b[200];
    if (t->dtype != io->dtype)
        return rt_fail(e, AMPC_E_DTYPE, "%s %d '%s' has dtype %s, expected %s", kind, i, io->name,
                       rt_dtype_name(t->dtype), rt_dtype_name(io->dtype));
    bool same = t->shape.rank == io->shape.rank;
    for (int32_t d = 0; same && d < io->shape.rank; d++) same = t->shape.dims[d] == io->shape.dims[d];
    if (!same)
        return rt_fail(e, AMPC_E_SHAPE, "%s %d '%s' has shape %s, expected %s", kind, i, io->name,
                       rt_shape_str(&t->shape, a, sizeof a), rt_shape_str(&io->shape, b, sizeof b));
    int64_t bytes = io->ref.bytes;
    if (bytes == 0) return AMPC_OK;
    if (t->data == NULL)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s %d '%s' has NULL data, expected a buffer of %lld "
                       "bytes (%s %s)", kind, i, io->name, (long long)bytes,
                       rt_dtype_name(io->dtype), rt_shape_str(&io->shape, b, sizeof b));
    struct cudaPointerAttributes pa;
    memset(&pa, 0, sizeof pa);
    if (cudaPointerGetAttributes(&pa, t->data) != cudaSuccess) {
        rt_cuda_clear(); /* an address CUDA does not know: ordinary (pageable) host memory */
        pa.type = cudaMemoryTypeUnregistered;
    }
    /* a multi-GPU model takes memory of any of its GPUs (its ranks copy from and to it) */
    int32_t first = m->ctx.dev.index, last = first + (m->n_ranks > 1 ? m->n_ranks - 1 : 0);
    if (pa.type == cudaMemoryTypeDevice && (pa.device < first || pa.device > last)) {
        if (first == last)
            return rt_fail(e, AMPC_E_INVALID_ARG, "%s %d '%s' is memory of device %d, expected "
                           "host memory or memory of device %d (the model's)", kind, i, io->name,
                           pa.device, first);
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s %d '%s' is memory of device %d, expected host "
                       "memory or memory of devices %d to %d (the model's)", kind, i, io->name,
                       pa.device, first, last);
    }
    if (pa.type != cudaMemoryTypeDevice) *on_device = false;
    return AMPC_OK;
}

static ampc_status check_tensors(const ampc_rt_model *m, const ampc_tensor *in, int32_t n_in,
                                 ampc_tensor *out, int32_t n_out, bool *on_device, rt_err *e) {
    char names[512];
    if (n_in != m->n_inputs || (n_in > 0 && in == NULL))
        return rt_fail(e, AMPC_E_INVALID_ARG, "got %d inputs%s, the model takes %d (%s)", n_in,
                       n_in > 0 && in == NULL ? " (and a NULL array)" : "", m->n_inputs,
                       io_names(m->inputs, m->n_inputs, names, sizeof names));
    if (n_out != m->n_outputs || (n_out > 0 && out == NULL))
        return rt_fail(e, AMPC_E_INVALID_ARG, "got %d outputs%s, the model gives %d (%s)", n_out,
                       n_out > 0 && out == NULL ? " (and a NULL array)" : "", m->n_outputs,
                       io_names(m->outputs, m->n_outputs, names, sizeof names));
    for (int32_t i = 0; i < n_in; i++)
        if (check_tensor(m, false, i, &in[i], on_device, e) != AMPC_OK) return e->status;
    for (int32_t i = 0; i < n_out; i++)
        if (check_tensor(m, true, i, &out[i], on_device, e) != AMPC_OK) return e->status;
    return AMPC_OK;
}

/* Enqueues every step on s, with ev[i] recorded before step i and ev[n] after the last when ev
 * is not NULL. */
ampc_status rt_model_launch_steps(ampc_rt_model *m, cudaStream_t s, cudaEvent_t *ev, rt_err *e) {
    int64_t back = 0;
    for (int32_t i = 0, next; i < m->n_steps; i = next) {
        if (ev) RT_CUDA(e, cudaEventRecord(ev[i], s));
        next = m->prov[i]->launch(&m->ctx, m->state[i], s, e) != AMPC_OK ? -1
               : m->steps[i].kind == AMPC_RT_STEP_BRANCH
                   ? rt_branch_next(&m->steps[i], i, m->state[i], &back, e)
                   : i + 1;
        if (next < 0) {
            rt_step_prefix(e, &m->steps[i], i);
            return e->status;
        }
        for (int32_t k = i + 1; ev && k < next; k++) /* steps a jump skips: no time */
            RT_CUDA(e, cudaEventRecord(ev[k], s));
    }
    if (ev) RT_CUDA(e, cudaEventRecord(ev[m->n_steps], s));
    return AMPC_OK;
}

/* Captures the steps on the model's stream into a graph. A failure is not an error: runs then
 * launch the steps directly, and graph_why keeps the reason. */
static void try_capture(ampc_rt_model *m) {
    rt_err ce = {0};
    cudaGraph_t g = NULL;
    cudaError_t rc = cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal);
    if (rc != cudaSuccess) {
        rt_fail_cuda(&ce, rc, "cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal)",
                     __func__, __FILE__, __LINE__);
    } else {
        ampc_status s = rt_model_launch_steps(m, m->stream, NULL, &ce);
        rc = cudaStreamEndCapture(m->stream, &g); /* always: it ends the capture mode */
        if (s == AMPC_OK && rc != cudaSuccess)
            rt_fail_cuda(&ce, rc, "cudaStreamEndCapture(m->stream, &g)", __func__, __FILE__,
                         __LINE__);
        else if (s == AMPC_OK && g != NULL) {
            rt_graph_describe(g, m->opts.graph_verbose);
            rc = cudaGraphInstantiateWithFlags(&m->exec, g, 0);
            if (rc != cudaSuccess)
                rt_fail_cuda(&ce, rc, "cudaGraphInstantiateWithFlags(&m->exec, g, 0)", __func__,
                             __FILE__, __LINE__);
        }
    }
    if (ce.status == AMPC_OK && g != NULL) {
        m->graph = g;
        m->graph_status = AMPC_RT_GRAPH_ON;
        return;
    }
    if (g != NULL) (void)cudaGraphDestroy(g);
    m->exec = NULL;
    rt_cuda_clear();
    rt_err_prefix(&ce, "graph capture failed: ");
    m->graph_status = AMPC_RT_GRAPH_OFF;
    m->graph_why = ce.msg ? ce.msg : strdup("graph capture failed");
    ce.msg = NULL;
}

/* ---- the I/O graph --------------------------------------------------------------------------- */

/* Frees the I/O graph; later runs build it again (to = IO_GRAPH_NONE) or never (IO_GRAPH_OFF). */
static void io_graph_drop(ampc_rt_model *m, io_graph_state to) {
    if (m->io_exec) (void)cudaGraphExecDestroy(m->io_exec);
    if (m->io_graph) (void)cudaGraphDestroy(m->io_graph);
    free(m->io_node);
    free(m->io_ptr);
    m->io_exec = NULL;
    m->io_graph = NULL;
    m->io_node = NULL;
    m->io_ptr = NULL;
    m->io_state = to;
}

/* The caller's buffer of I/O slot i (inputs first), and the arena ref it is copied to or from. */
static void *io_caller_ptr(const ampc_tensor *in, ampc_tensor *out, int32_t n_in, int32_t i) {
    return i < n_in ? (void *)in[i].data : out[i - n_in].data;
}

static const ampc_rt_io *io_slot(const ampc_rt_model *m, int32_t i) {
    return i < m->n_inputs ? &m->inputs[i] : &m->outputs[i - m->n_inputs];
}

/* The copy of I/O slot i between the caller's buffer p and the arena, as memcpy parameters. */
static void io_copy_ends(const ampc_rt_model *m, int32_t i, void *p, void **dst, const void **src) {
    void *arena = rt_ref_ptr(&m->ctx, io_slot(m, i)->ref);
    *dst = i < m->n_inputs ? arena : p;
    *src = i < m->n_inputs ? (const void *)p : arena;
}

/* Adds I/O slot i's copy to g after deps[0..n_deps) (when it has bytes). */
static ampc_status io_graph_copy(ampc_rt_model *m, cudaGraph_t g, int32_t i, void *p,
                                 const cudaGraphNode_t *deps, size_t n_deps, rt_err *e) {
    if (io_slot(m, i)->ref.bytes == 0) return AMPC_OK;
    void *dst;
    const void *src;
    m->io_ptr[i] = p;
    io_copy_ends(m, i, p, &dst, &src);
    RT_CUDA(e, cudaGraphAddMemcpyNode1D(&m->io_node[i], g, deps, n_deps, dst, src,
                                        (size_t)io_slot(m, i)->ref.bytes,
                                        cudaMemcpyDeviceToDevice));
    return AMPC_OK;
}

/* Adds the copies and the steps' graph to g: the input copies first (independent), the steps
 * after all of them, each output copy after the steps. */
static ampc_status io_graph_nodes(ampc_rt_model *m, cudaGraph_t g, const ampc_tensor *in,
                                  ampc_tensor *out, rt_err *e) {
    int32_t n_in = m->n_inputs, n = n_in + m->n_outputs;
    cudaGraphNode_t *deps = m->io_node + n; /* room for n_in + 1 after the n slots */
    size_t n_deps = 0;
    for (int32_t i = 0; i < n_in; i++) {
        if (io_graph_copy(m, g, i, io_caller_ptr(in, out, n_in, i), NULL, 0, e) != AMPC_OK)
            return e->status;
        if (m->io_node[i] != NULL) deps[n_deps++] = m->io_node[i];
    }
    if (m->graph != NULL) {
        cudaGraphNode_t steps = NULL;
        RT_CUDA(e, cudaGraphAddChildGraphNode(&steps, g, deps, n_deps, m->graph));
        deps[0] = steps, n_deps = 1;
    }
    for (int32_t i = n_in; i < n; i++)
        if (io_graph_copy(m, g, i, io_caller_ptr(in, out, n_in, i), deps, n_deps, e) != AMPC_OK)
            return e->status;
    return AMPC_OK;
}

/* Builds the I/O graph around the captured steps for these buffers. A failure is not an error:
 * runs then copy on the stream as before (the state says so). */
static void io_graph_build(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out) {
    rt_err be = {0};
    size_t n = (size_t)(m->n_inputs + m->n_outputs);
    m->io_node = calloc(2 * n + 1, sizeof *m->io_node);
    m->io_ptr = calloc(n + 1, sizeof *m->io_ptr);
    bool ok = m->io_node && m->io_ptr && cudaGraphCreate(&m->io_graph, 0) == cudaSuccess &&
              io_graph_nodes(m, m->io_graph, in, out, &be) == AMPC_OK &&
              cudaGraphInstantiateWithFlags(&m->io_exec, m->io_graph, 0) == cudaSuccess;
    free(be.msg);
    if (ok) {
        m->io_state = IO_GRAPH_ON;
        return;
    }
    rt_cuda_clear();
    io_graph_drop(m, IO_GRAPH_OFF);
}

/* Points the I/O graph's copies at this run's buffers (those that moved since the last run) and
 * launches it. */
static ampc_status io_graph_launch(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out,
                                   cudaStream_t s, rt_err *e) {
    for (int32_t i = 0; i < m->n_inputs + m->n_outputs; i++) {
        void *p = io_caller_ptr(in, out, m->n_inputs, i), *dst;
        const void *src;
        if (m->io_node[i] == NULL || p == m->io_ptr[i]) continue;
        io_copy_ends(m, i, p, &dst, &src);
        RT_CUDA(e, cudaGraphExecMemcpyNodeSetParams1D(m->io_exec, m->io_node[i], dst, src,
                                                      (size_t)io_slot(m, i)->ref.bytes,
                                                      cudaMemcpyDeviceToDevice));
        m->io_ptr[i] = p;
    }
    RT_CUDA(e, cudaGraphLaunch(m->io_exec, s));
    return AMPC_OK;
}

ampc_status rt_model_copy_inputs(ampc_rt_model *m, const ampc_tensor *in, cudaStream_t s,
                                 rt_err *e) {
    for (int32_t i = 0; i < m->n_inputs; i++) {
        const ampc_rt_io *io = &m->inputs[i];
        if (io->ref.bytes == 0) continue;
        cudaError_t rc = cudaMemcpyAsync(rt_ref_ptr(&m->ctx, io->ref), in[i].data,
                                         (size_t)io->ref.bytes, cudaMemcpyDefault, s);
        if (rc != cudaSuccess) {
            rt_fail_cuda(e, rc, "cudaMemcpyAsync(arena + ref.offset, in[i].data, ref.bytes, "
                         "cudaMemcpyDefault, s)", __func__, __FILE__, __LINE__);
            rt_err_prefix(e, "copying input %d '%s' in: ", i, io->name);
            return e->status;
        }
    }
    return AMPC_OK;
}

/* Waits for the run on s; a profiled run's step times into step_ms. */
static ampc_status finish_run(ampc_rt_model *m, cudaStream_t s, double *step_ms, rt_err *e) {
    RT_CUDA(e, cudaStreamSynchronize(s));
    if (step_ms != NULL)
        for (int32_t i = 0; i < m->n_steps; i++) {
            float ms = 0;
            RT_CUDA(e, cudaEventElapsedTime(&ms, m->events[i], m->events[i + 1]));
            step_ms[i] = ms;
        }
    return AMPC_OK;
}

/* Everything after validation; the caller restores the current device. Copies use
 * cudaMemcpyDefault: unified addressing tells host from device memory, and CUDA itself stages
 * pageable host memory synchronously. Profiling launches step by step between events; a plain
 * run replays the graph (capturing it the first time), inside the I/O graph when every tensor is
 * on the device. */
static ampc_status run_on_device(ampc_rt_model *m, const ampc_tensor *in, ampc_tensor *out,
                                 cudaStream_t stream, double *step_ms, bool on_device, bool sync,
                                 rt_err *e) {
    RT_CUDA(e, cudaSetDevice(m->ctx.dev.index));
    cudaStream_t s = stream ? stream : m->stream;
    if (step_ms == NULL && m->graph_status == AMPC_RT_GRAPH_PENDING) try_capture(m);
    if (step_ms == NULL && !m->told && m->opts.graph_verbose >= 1) {
        m->told = true; /* what the first run does (AMPC_GRAPH_VERBOSE=1), to the log */
        rt_log("a model of %d steps: CUDA graph %s%s%s; tensors %s%s%s", m->n_steps,
                m->graph_status == AMPC_RT_GRAPH_ON ? "on" : "off",
                m->graph_why ? ": " : "", m->graph_why ? m->graph_why : "",
                !on_device ? "not all on the device: copied" : m->zc_on ? "on the device: bound in place"
                                                                       : "on the device: copied",
                on_device && !m->zc_on && m->zc_why ? ": " : "",
                on_device && !m->zc_on && m->zc_why ? m->zc_why : "");
    }
    if (step_ms == NULL && on_device && rt_io_bind_run(m, in, out, s, e))
        return e->status != AMPC_OK ? e->status : sync ? finish_run(m, s, NULL, e) : AMPC_OK;
    if (step_ms == NULL && on_device && m->graph_status == AMPC_RT_GRAPH_ON &&
        m->io_state == IO_GRAPH_NONE)
        io_graph_build(m, in, out);
    if (step_ms == NULL && on_device && m->io_state == IO_GRAPH_ON) {
        if (io_graph_launch(m, in, out, s, e) != AMPC_OK) return e->status;
        return sync ? finish_run(m, s, NULL, e) : AMPC_OK;
    }
    if (rt_model_copy_inputs(m, in, s, e) != AMPC_OK) return e->status;
    if (step_ms != NULL) {
        if (m->events == NULL) {
            m->events = calloc((size_t)m->n_steps + 1, sizeof *m->events);
            if (m->events == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
            for (int32_t i = 0; i <= m->n_steps; i++) RT_CUDA(e, cudaEventCreate(&m->events[i]));
        }
        if (rt_model_launch_steps(m, s, m->events, e) != AMPC_OK) return e->status;
    } else {
        if (m->graph_status == AMPC_RT_GRAPH_ON)
            RT_CUDA(e, cudaGraphLaunch(m->exec, s));
        else if (rt_model_launch_steps(m, s, NULL, e) != AMPC_OK)
            return e->status;
    }
    for (int32_t i = 0; i < m->n_outputs; i++) {
        const ampc_rt_io *io = &m->outputs[i];
        if (io->ref.bytes == 0) continue;
        cudaError_t rc = cudaMemcpyAsync(out[i].data, rt_ref_ptr(&m->ctx, io->ref),
                                         (size_t)io->ref.bytes, cudaMemcpyDefault, s);
        if (rc != cudaSuccess) {
            rt_fail_cuda(e, rc, "cudaMemcpyAsync(out[i].data, arena + ref.offset, ref.bytes, "
                         "cudaMemcpyDefault, s)", __func__, __FILE__, __LINE__);
            rt_err_prefix(e, "copying output %d '%s' out: ", i, io->name);
            return e->status;
        }
    }
    return sync ? finish_run(m, s, step_ms, e) : AMPC_OK;
}

/* The body of run and profile: argument checks and validation touch nothing on the device. */
static ampc_status run(ampc_rt_model *m, const ampc_tensor *in, int32_t n_in, ampc_tensor *out,
                       int32_t n_out, void *stream, double *step_ms, bool profile, bool sync,
                       char **err) {
    rt_err e = {0};
    if (m == NULL) {
        rt_fail(&e, AMPC_E_INVALID_ARG, "the model is NULL");
        return rt_err_give(&e, err);
    }
    if (profile && step_ms == NULL && m->n_steps > 0) {
        rt_fail(&e, AMPC_E_INVALID_ARG, "step_ms is NULL, expected room for %d values", m->n_steps);
        return rt_err_give(&e, err);
    }
    if (profile && m->n_ranks > 0) {
        rt_fail(&e, AMPC_E_UNSUPPORTED, "profiling a multi-GPU model (%d GPUs) is not built yet: "
                "time it with ampc_rt_model_time", m->n_ranks);
        return rt_err_give(&e, err);
    }
    bool on_device = true;
    if (check_tensors(m, in, n_in, out, n_out, &on_device, &e) != AMPC_OK)
        return rt_err_give(&e, err);
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    double none;
    if (m->n_ranks > 0)
        rt_ranks_run(m, in, out, (cudaStream_t)stream, sync, &e);
    else
        run_on_device(m, in, out, (cudaStream_t)stream, profile ? (step_ms ? step_ms : &none) : NULL,
                      on_device, sync || profile, &e);
    if (prev >= 0 && (prev != m->ctx.dev.index || m->n_ranks > 0)) (void)cudaSetDevice(prev);
    return rt_err_give(&e, err);
}

ampc_status ampc_rt_model_run(ampc_rt_model *m, const ampc_tensor *inputs, int32_t n_in,
                              ampc_tensor *outputs, int32_t n_out, void *stream, char **err) {
    return run(m, inputs, n_in, outputs, n_out, stream, NULL, false, true, err);
}

ampc_status ampc_rt_model_enqueue(ampc_rt_model *m, const ampc_tensor *inputs, int32_t n_in,
                                  ampc_tensor *outputs, int32_t n_out, void *stream, char **err) {
    return run(m, inputs, n_in, outputs, n_out, stream, NULL, false, false, err);
}

ampc_status ampc_rt_model_profile(ampc_rt_model *m, const ampc_tensor *inputs, int32_t n_in,
                                  ampc_tensor *outputs, int32_t n_out, void *stream,
                                  double *step_ms, char **err) {
    return run(m, inputs, n_in, outputs, n_out, stream, step_ms, true, true, err);
}

/* Times `iterations` launches of the steps alone (the graph replay once captured), each between
 * the events ev[0] and ev[1] on the model's stream, on whatever the arena holds. */
static ampc_status time_loop(ampc_rt_model *m, cudaEvent_t *ev, int32_t iterations, double *ms,
                             rt_err *e) {
    for (int32_t i = 0; i < iterations; i++) {
        RT_CUDA(e, cudaEventRecord(ev[0], m->stream));
        if (m->graph_status == AMPC_RT_GRAPH_ON) RT_CUDA(e, cudaGraphLaunch(m->exec, m->stream));
        else if (rt_model_launch_steps(m, m->stream, NULL, e) != AMPC_OK) return e->status;
        RT_CUDA(e, cudaEventRecord(ev[1], m->stream));
        RT_CUDA(e, cudaEventSynchronize(ev[1]));
        float t = 0;
        RT_CUDA(e, cudaEventElapsedTime(&t, ev[0], ev[1]));
        ms[i] = t;
    }
    return AMPC_OK;
}

static ampc_status time_steps(ampc_rt_model *m, int32_t iterations, double *ms, rt_err *e) {
    RT_CUDA(e, cudaSetDevice(m->ctx.dev.index));
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t rc = cudaEventCreate(&ev[0]);
    if (rc == cudaSuccess) rc = cudaEventCreate(&ev[1]);
    if (rc != cudaSuccess)
        rt_fail_cuda(e, rc, "cudaEventCreate(&ev[k])", __func__, __FILE__, __LINE__);
    else
        time_loop(m, ev, iterations, ms, e);
    for (int k = 0; k < 2; k++)
        if (ev[k]) (void)cudaEventDestroy(ev[k]);
    return e->status;
}

ampc_status ampc_rt_model_time(ampc_rt_model *m, int32_t iterations, double *ms, char **err) {
    rt_err e = {0};
    if (m == NULL || (iterations > 0 && ms == NULL) || iterations < 0)
        rt_fail(&e, AMPC_E_INVALID_ARG, "ampc_rt_model_time: %s",
                m == NULL ? "the model is NULL" : "ms must hold `iterations` (>= 0) values");
    else if (m->n_ranks > 0 ? m->plain_runs == 0 && m->graph_status != AMPC_RT_GRAPH_ON
                            : m->graph_status == AMPC_RT_GRAPH_PENDING)
        rt_fail(&e, AMPC_E_INVALID_ARG, "ampc_rt_model_time: run the model once first (its "
                                        "inputs are what the timed launches compute on)");
    if (e.status != AMPC_OK) return rt_err_give(&e, err);
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    if (m->n_ranks > 0) rt_ranks_time(m, iterations, ms, &e);
    else time_steps(m, iterations, ms, &e);
    if (prev >= 0 && (prev != m->ctx.dev.index || m->n_ranks > 0)) (void)cudaSetDevice(prev);
    return rt_err_give(&e, err);
}

/* ---- queries --------------------------------------------------------------------------------- */

bool ampc_rt_model_io(const ampc_rt_model *m, bool is_output, int32_t i, const char **name,
                      ampc_dtype *dtype, ampc_shape *shape) {
    if (m == NULL || i < 0 || i >= (is_output ? m->n_outputs : m->n_inputs)) return false;
    const ampc_rt_io *io = is_output ? &m->outputs[i] : &m->inputs[i];
    if (name) *name = io->name;
    if (dtype) *dtype = io->dtype;
    if (shape) *shape = io->shape;
    return true;
}

int32_t ampc_rt_model_n_inputs(const ampc_rt_model *m) { return m ? m->n_inputs : 0; }
int32_t ampc_rt_model_n_outputs(const ampc_rt_model *m) { return m ? m->n_outputs : 0; }
int32_t ampc_rt_model_n_steps(const ampc_rt_model *m) { return m ? m->n_steps : 0; }

const char *ampc_rt_model_step_label(const ampc_rt_model *m, int32_t i) {
    if (m == NULL || i < 0 || i >= m->n_steps || m->steps[i].label == NULL) return "";
    return m->steps[i].label;
}

const char *ampc_rt_model_step_provider(const ampc_rt_model *m, int32_t i) {
    if (m == NULL || i < 0 || i >= m->n_steps || m->prov[i] == NULL) return "";
    const char *on = m->prov[i]->runs_on ? m->prov[i]->runs_on(m->state[i]) : NULL;
    return on ? on : m->prov[i]->name;
}

bool ampc_rt_model_step_sparse(const ampc_rt_model *m, int32_t i, ampc_rt_sparse_choice *out) {
    if (m == NULL || out == NULL || i < 0 || i >= m->n_steps || m->prov[i] == NULL ||
        m->prov[i]->sparse_choice == NULL)
        return false;
    return m->prov[i]->sparse_choice(m->state[i], out);
}

/* Bytes of the refs a step touches, each buffer once (an in-place step names one twice). */
static double refs_bytes(const ampc_rt_ref *r, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        bool seen = r[i].bytes == 0;
        for (int j = 0; j < i && !seen; j++)
            seen = r[j].space == r[i].space && r[j].offset == r[i].offset;
        if (!seen) sum += (double)r[i].bytes;
    }
    return sum;
}

int rt_step_refs(const ampc_rt_step *s, ampc_rt_ref *out, int max) {
    int n = 0;
#define REF(r) do { if (n < max) out[n] = (r); n++; } while (0)
    if (s->kind == AMPC_RT_STEP_KERNEL)
        for (int32_t i = 0; i < s->kernel.n_args; i++)
            if (s->kernel.args[i].kind == AMPC_RT_ARG_PTR) REF(s->kernel.args[i].ref);
    enum { LOCAL = 1, PEER = 0 }; /* a PEER ref is in the sender's arena: not this rank's */
#define AMPC_STEP_REF(KIND, member, field, where) \
    if (s->kind == AMPC_RT_STEP_##KIND && where) REF(s->member.field);
#include "runtime/steps.def"
#undef REF
    return n;
}

/* ---- work estimates (runtime/steps.def's work column) --------------------------------------- */
/* Each sets the step's flops and may correct its bytes, which come in as those of its refs. */

static void rt_work_refs(const ampc_rt_step *s, double *flops, double *bytes) {
    (void)s, (void)bytes;
    *flops = 0;
}

static void rt_work_gemm(const ampc_rt_step *s, double *flops, double *bytes) {
    (void)bytes;
    const ampc_rt_gemm *g = &s->gemm;
    *flops = 2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->batch;
}

static void rt_work_conv(const ampc_rt_step *s, double *flops, double *bytes) {
    (void)bytes;
    const ampc_rt_conv *c = &s->conv;
    /* per output element of the forward convolution (ConvTranspose: of its input) */
    double k = (double)(c->transpose ? c->c_out : c->c_in) / (double)c->groups, points = 1;
    for (int i = 0; i < c->spatial; i++) {
        k *= (double)c->kernel[i];
        points *= (double)(c->transpose ? c->in[i] : c->out[i]);
    }
    *flops = 2.0 * (double)c->n * (double)(c->transpose ? c->c_in : c->c_out) * points * k;
}

static void rt_work_allreduce(const ampc_rt_step *s, double *flops, double *bytes) {
    *flops = 0;
    *bytes = (double)s->allreduce.dst.bytes; /* what one rank's buffer holds */
}

void rt_step_work(const ampc_rt_step *s, double *flops, double *bytes) {
    enum { MAX_REFS = 64 };
    ampc_rt_ref r[MAX_REFS];
    int n = rt_step_refs(s, r, MAX_REFS);
    if (n > MAX_REFS) n = MAX_REFS; /* the bytes of the first MAX_REFS: an estimate */
    *flops = 0;
    *bytes = refs_bytes(r, n);
    static void (*const work[])(const ampc_rt_step *, double *, double *) = {
#define AMPC_STEP(KIND, member, type, provider, work, serialise, name) \
    [AMPC_RT_STEP_##KIND] = rt_work_##work,
#include "runtime/steps.def"
    };
    if (s->kind < AMPC_RT_STEP_KINDS) work[s->kind](s, flops, bytes);
}

bool ampc_rt_model_step_work(const ampc_rt_model *m, int32_t i, double *flops, double *bytes) {
    if (flops) *flops = 0;
    if (bytes) *bytes = 0;
    if (m == NULL || i < 0 || i >= m->n_steps || flops == NULL || bytes == NULL) return false;
    rt_step_work(&m->steps[i], flops, bytes);
    return true;
}

int64_t ampc_rt_model_device_bytes(const ampc_rt_model *m) { return m ? m->device_bytes : 0; }

ampc_rt_graph_status ampc_rt_model_graph_status(const ampc_rt_model *m, const char **why) {
    if (why) *why = m && m->graph_why ? m->graph_why : "";
    return m ? m->graph_status : AMPC_RT_GRAPH_OFF;
}

int32_t ampc_rt_model_graph_nodes(const ampc_rt_model *m) {
    size_t n = 0;
    if (m == NULL || m->graph_status != AMPC_RT_GRAPH_ON || m->graph == NULL ||
        cudaGraphGetNodes(m->graph, NULL, &n) != cudaSuccess) {
        rt_cuda_clear();
        return -1;
    }
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

bool ampc_rt_model_io_in_place(const ampc_rt_model *m, const char **why) {
    const ampc_rt_model *k = m && m->n_ranks > 0 ? NULL : m;
    if (why) *why = k == NULL ? (m ? "a multi-GPU model copies its inputs and outputs" : "the model is NULL")
                    : k->zc_on ? NULL : k->zc_why;
    return k != NULL && k->zc_on;
}
