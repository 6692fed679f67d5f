/*
 * ranks_data.c — the parts of a multi-GPU model (ranks.c) that are particular to data
 * parallelism: a plan whose ranks split the batch (split_batch, runtime/plan.h).
 *
 * Every rank runs the same plan on B / N rows. The caller passes whole tensors (dim 0 = B), so
 * the model's inputs and outputs describe the whole batch, and a run moves rank r's rows
 * [r B/N, (r+1) B/N) straight between the caller's buffers and rank r's arena, on rank r's
 * stream, inside the fork/join of ranks.c: no staging copy through one GPU and no NCCL. A row
 * block of a row-major tensor is one contiguous byte range, so each is one copy:
 *
 *   - host memory: cudaMemcpyAsync (pinned memory is read by the GPU's copy engine; pageable
 *     memory is staged by CUDA itself);
 *   - memory of another GPU (the caller's device buffers usually live on `device`, rank 0's):
 *     cudaMemcpyPeerAsync, which goes over NVLink (or PCIe peer to peer) when peer access is
 *     enabled and through host memory otherwise. Creation enables peer access both ways between
 *     the first device and every other rank's where cudaDeviceCanAccessPeer allows it;
 *   - memory of the rank's own GPU, or managed memory: cudaMemcpyAsync (cudaMemcpyDefault).
 *
 * cudaPointerGetAttributes tells which (unified addressing is always on for 64-bit CUDA 12).
 */
#include "runtime/model.h"

#include <stdlib.h>
#include <string.h>

/* Peer access from device a to device b, when the hardware allows it; "already enabled" is
 * fine (it is a property of the process, kept after the model goes). Returns whether it is on. */
bool rt_enable_peer(int a, int b) {
    int can = 0;
    if (a == b || cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || !can) {
        rt_cuda_clear();
        return false;
    }
    if (cudaSetDevice(a) != cudaSuccess) {
        rt_cuda_clear();
        return false;
    }
    cudaError_t rc = cudaDeviceEnablePeerAccess(b, 0);
    if (rc != cudaSuccess) rt_cuda_clear(); /* "already enabled" too: not an error here */
    return rc == cudaSuccess || rc == cudaErrorPeerAccessAlreadyEnabled;
}

void rt_batch_io_views(ampc_rt_model *m, const ampc_rt_plan *p) {
    int32_t n = m->n_inputs + m->n_outputs;
    for (int32_t i = 0; i < n; i++) {
        bool is_in = i < m->n_inputs;
        m->batch_io[i] = is_in ? m->inputs[i] : m->outputs[i - m->n_inputs];
        const ampc_rt_io *whole = is_in ? &p->inputs[i] : &p->outputs[i - m->n_inputs];
        m->batch_io[i].shape = whole->shape;
        m->batch_io[i].ref.bytes = whole->ref.bytes;
    }
    m->inputs = m->batch_io;
    m->outputs = m->batch_io + m->n_inputs;
}

ampc_status rt_data_setup(ampc_rt_model *m, const ampc_rt_plan *p, rt_err *e) {
    m->split_batch = true;
    m->batch_io = calloc((size_t)(m->n_inputs + m->n_outputs) + 1, sizeof *m->batch_io);
    if (m->batch_io == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    rt_batch_io_views(m, p);
    int d0 = m->rank[0]->ctx.dev.index;
    m->peer_links = 0;
    for (int32_t r = 1; r < m->n_ranks; r++) {
        int d = m->rank[r]->ctx.dev.index;
        m->peer_links += rt_enable_peer(d, d0) + rt_enable_peer(d0, d);
    }
    RT_CUDA(e, cudaSetDevice(d0));
    return AMPC_OK;
}

/* One copy of `bytes` from src to dst on rank r's stream; peer copies for another GPU's memory
 * (see the top of the file). `what` names the tensor for an error. */
ampc_status rt_data_copy_rows(ampc_rt_model *m, int32_t r, void *dst, const void *src,
                              size_t bytes, bool to_caller, const char *what, rt_err *e) {
    ampc_rt_model *k = m->rank[r];
    int self = k->ctx.dev.index;
    const void *caller = to_caller ? dst : src;
    struct cudaPointerAttributes a;
    int other = -1;
    if (cudaPointerGetAttributes(&a, caller) == cudaSuccess) {
        if (a.type == cudaMemoryTypeDevice && a.device != self) other = a.device;
    } else {
        rt_cuda_clear(); /* memory CUDA does not know: plain host memory */
    }
    cudaError_t rc;
    if (other >= 0)
        rc = to_caller ? cudaMemcpyPeerAsync(dst, other, src, self, bytes, k->stream)
                       : cudaMemcpyPeerAsync(dst, self, src, other, bytes, k->stream);
    else
        rc = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, k->stream);
    if (rc == cudaSuccess) return AMPC_OK;
    rt_fail_cuda(e, rc, other >= 0 ? "cudaMemcpyPeerAsync(dst, dst_device, src, src_device, "
                 "bytes, stream)" : "cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream)",
                 __func__, __FILE__, __LINE__);
    rt_err_prefix(e, "copying rank %d's rows of %s %s: ", r, what, to_caller ? "out" : "in");
    return e->status;
}

ampc_status rt_data_copy_in(ampc_rt_model *m, const ampc_tensor *in, rt_err *e) {
    for (int32_t r = 0; r < m->n_ranks; r++) {
        ampc_rt_model *k = m->rank[r];
        RT_CUDA(e, cudaSetDevice(k->ctx.dev.index));
        for (int32_t i = 0; i < k->n_inputs; i++) {
            const ampc_rt_io *io = &k->inputs[i]; /* the rank's: its rows' bytes */
            if (io->ref.bytes == 0) continue;
            const char *src = (const char *)in[i].data + (size_t)r * (size_t)io->ref.bytes;
            char what[300];
            snprintf(what, sizeof what, "input %d '%s'", i, io->name);
            if (rt_data_copy_rows(m, r, rt_ref_ptr(&k->ctx, io->ref), src, (size_t)io->ref.bytes, false,
                          what, e) != AMPC_OK)
                return e->status;
        }
    }
    return AMPC_OK;
}

ampc_status rt_data_copy_out(ampc_rt_model *m, ampc_tensor *out, rt_err *e) {
    for (int32_t r = 0; r < m->n_ranks; r++) {
        ampc_rt_model *k = m->rank[r];
        RT_CUDA(e, cudaSetDevice(k->ctx.dev.index));
        for (int32_t i = 0; i < k->n_outputs; i++) {
            const ampc_rt_io *io = &k->outputs[i];
            if (io->ref.bytes == 0) continue;
            char *dst = (char *)out[i].data + (size_t)r * (size_t)io->ref.bytes;
            char what[300];
            snprintf(what, sizeof what, "output %d '%s'", i, io->name);
            if (rt_data_copy_rows(m, r, dst, rt_ref_ptr(&k->ctx, io->ref), (size_t)io->ref.bytes, true,
                          what, e) != AMPC_OK)
                return e->status;
        }
    }
    return AMPC_OK;
}

void rt_data_free(ampc_rt_model *m) {
    free(m->batch_io);
    m->batch_io = NULL;
}
