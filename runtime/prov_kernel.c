/*
 * prov_kernel.c — the provider of generated kernels: a kernel is found by name in its unit's
 * loaded image (cudaLibraryGetKernel), its parameter list is checked against the plan's arguments
 * at load (cudaFuncGetParamInfo: the count and each size), and its argument values are built once
 * (arena and weights addresses never change), so a launch is one cudaLaunchKernel.
 *
 * Programmatic dependent launch (sm_90 and newer): every generated kernel starts with
 * ampc::pdl_enter (codegen/kernels/common.cuh), which waits until the grid before it in the
 * stream has finished and its writes are visible, then lets the next grid launch. A kernel of a
 * unit built for sm_90+ is therefore launched with cudaLaunchAttributeProgrammaticStreamSerialization:
 * the GPU may schedule it while its predecessor's last blocks still run, instead of after, which
 * takes the launch gap off each pair of kernels in the steps' graph (the capture keeps the
 * attribute as a programmatic edge). AMPC_PDL=0 launches plainly.
 */
#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_SMEM_LIMIT = 48 * 1024 }; /* dynamic shared memory without opting in */

typedef union arg_value {
    void *ptr;
    int32_t i32;
    int64_t i64;
    float f32;
} arg_value;

typedef struct kernel_state {
    cudaKernel_t k;
    dim3 grid, block;
    uint32_t smem;
    bool empty;          /* a grid dimension is 0: nothing to launch */
    bool pdl;            /* launched as a programmatic dependent (file comment) */
    int32_t n_args;
    arg_value *values;   /* n_args values, each param[i] points at values[i] */
    void **params;
} kernel_state;

static size_t arg_size(uint8_t kind) {
    return kind == AMPC_RT_ARG_I32 || kind == AMPC_RT_ARG_F32 ? 4 : 8;
}

static const char *arg_kind_name(uint8_t kind) {
    static const char *const names[] = {"pointer", "i32", "i64", "f32"};
    return kind <= AMPC_RT_ARG_F32 ? names[kind] : "?";
}

static ampc_status kernel_supports(const rt_ctx *ctx, const ampc_rt_plan *p, const ampc_rt_step *s,
                                   rt_err *e) {
    (void)ctx;
    const ampc_rt_kernel *k = &s->kernel;
    if (k->unit < 0 || k->unit >= p->n_units)
        return rt_fail(e, AMPC_E_INVALID_ARG, "kernel names unit %d; the plan has %d units",
                       k->unit, p->n_units);
    if (k->name == NULL || k->name[0] == '\0')
        return rt_fail(e, AMPC_E_INVALID_ARG, "kernel has no name");
    uint64_t threads = (uint64_t)k->block[0] * k->block[1] * k->block[2];
    if (k->block[0] == 0 || k->block[1] == 0 || k->block[2] == 0 || threads > 1024)
        return rt_fail(e, AMPC_E_INVALID_ARG, "kernel '%s' has block (%u, %u, %u): each dimension "
                       "must be >= 1 and the product <= 1024", k->name, k->block[0], k->block[1],
                       k->block[2]);
    if (k->grid[0] > 0x7fffffffu || k->grid[1] > 65535 || k->grid[2] > 65535)
        return rt_fail(e, AMPC_E_INVALID_ARG, "kernel '%s' has grid (%u, %u, %u): the limits are "
                       "(2^31-1, 65535, 65535)", k->name, k->grid[0], k->grid[1], k->grid[2]);
    if (k->n_args < 0 || (k->n_args > 0 && k->args == NULL))
        return rt_fail(e, AMPC_E_INVALID_ARG, "kernel '%s' has %d arguments but no argument array",
                       k->name, k->n_args);
    for (int32_t i = 0; i < k->n_args; i++) {
        const ampc_rt_arg *a = &k->args[i];
        if (a->kind > AMPC_RT_ARG_F32)
            return rt_fail(e, AMPC_E_INVALID_ARG, "kernel '%s' argument %d has kind %u, expected "
                           "0 to 3", k->name, i, a->kind);
        if (a->kind == AMPC_RT_ARG_PTR) {
            char what[160];
            snprintf(what, sizeof what, "kernel '%s' argument %d", k->name, i);
            /* a kernel may read the weights, so writability is not checked here */
            if (rt_check_ref(p, a->ref, what, false, true, e) != AMPC_OK) return e->status;
        }
    }
    return AMPC_OK;
}

/* Checks the kernel's parameter list against the plan's arguments. cudaFuncGetParamInfo answers
 * cudaErrorInvalidValue past the last parameter; any other failure means the driver cannot say
 * (then the check is skipped: the launch still works). */
static ampc_status check_params(const ampc_rt_kernel *k, cudaKernel_t kern, rt_err *e) {
    for (int32_t i = 0; i <= k->n_args; i++) {
        size_t off = 0, size = 0;
        cudaError_t rc = cudaFuncGetParamInfo((const void *)kern, (size_t)i, &off, &size);
        if (rc != cudaSuccess) rt_cuda_clear();
        if (rc != cudaSuccess && rc != cudaErrorInvalidValue) return AMPC_OK;
        if (i == k->n_args) {
            if (rc == cudaSuccess)
                return rt_fail(e, AMPC_E_INVALID_ARG, "kernel '%s' takes more than the %d "
                               "parameters the plan passes", k->name, k->n_args);
            break;
        }
        if (rc != cudaSuccess)
            return rt_fail(e, AMPC_E_INVALID_ARG, "kernel '%s' takes %d parameters, the plan "
                           "passes %d", k->name, i, k->n_args);
        if (size != arg_size(k->args[i].kind))
            return rt_fail(e, AMPC_E_INVALID_ARG, "kernel '%s' parameter %d is %zu bytes, the "
                           "plan passes a %s (%zu bytes)", k->name, i, size,
                           arg_kind_name(k->args[i].kind), arg_size(k->args[i].kind));
    }
    return AMPC_OK;
}

static ampc_status kernel_plan(rt_ctx *ctx, const ampc_rt_step *s, void **state, size_t *workspace,
                               rt_err *e) {
    const ampc_rt_kernel *k = &s->kernel;
    *workspace = 0;
    kernel_state *st = calloc(1, sizeof *st);
    if (st == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    *state = st;
    st->grid = (dim3){k->grid[0], k->grid[1], k->grid[2]};
    st->block = (dim3){k->block[0], k->block[1], k->block[2]};
    st->smem = k->smem;
    st->empty = k->grid[0] == 0 || k->grid[1] == 0 || k->grid[2] == 0;
    st->n_args = k->n_args;
    if (k->n_args > 0) {
        st->values = calloc((size_t)k->n_args, sizeof *st->values);
        st->params = calloc((size_t)k->n_args, sizeof *st->params);
        if (st->values == NULL || st->params == NULL)
            return rt_fail(e, AMPC_E_OOM, "out of host memory");
    }
    for (int32_t i = 0; i < k->n_args; i++) {
        const ampc_rt_arg *a = &k->args[i];
        switch (a->kind) {
        case AMPC_RT_ARG_PTR: st->values[i].ptr = rt_ref_ptr(ctx, a->ref); break;
        case AMPC_RT_ARG_I32: st->values[i].i32 = a->i32; break;
        case AMPC_RT_ARG_I64: st->values[i].i64 = a->i64; break;
        default: st->values[i].f32 = a->f32; break;
        }
        st->params[i] = &st->values[i];
    }

    const rt_unit *unit = &ctx->units[k->unit];
    st->pdl = unit->pdl && ctx->opts->pdl;
    cudaError_t rc = cudaLibraryGetKernel(&st->k, unit->lib, k->name);
    if (rc != cudaSuccess) {
        rt_fail_cuda(e, rc, "cudaLibraryGetKernel(&st->k, unit->lib, k->name)", __func__, __FILE__,
                     __LINE__);
        /* With lazy loading the driver compiles the image here: an invalid image fails now. */
        rt_err_prefix(e, rc == cudaErrorSymbolNotFound ? "kernel '%s' not found in unit %d (%s): "
                                                       : "kernel '%s' could not be loaded from unit "
                                                         "%d (%s): ",
                      k->name, k->unit, unit->what);
        return e->status;
    }
    /* Asking the attributes loads the kernel into the context now (lazy loading would do it at
     * the first launch, inside graph capture) and tells its limits. */
    struct cudaFuncAttributes fa;
    rc = cudaFuncGetAttributes(&fa, (const void *)st->k);
    if (rc != cudaSuccess) {
        rt_fail_cuda(e, rc, "cudaFuncGetAttributes(&fa, (const void *)st->k)", __func__, __FILE__,
                     __LINE__);
        rt_err_prefix(e, "kernel '%s' of unit %d (%s) cannot be loaded: ", k->name, k->unit,
                      unit->what);
        if (unit->log && unit->log[0]) rt_err_append(e, "\nJIT log:\n%s", unit->log);
        return e->status;
    }
    uint32_t threads = k->block[0] * k->block[1] * k->block[2];
    if ((int)threads > fa.maxThreadsPerBlock)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "kernel '%s' can run at most %d threads per block "
                       "(it uses %d registers per thread), the plan launches %u", k->name,
                       fa.maxThreadsPerBlock, fa.numRegs, threads);
    if (k->smem > DEFAULT_SMEM_LIMIT) {
        if ((size_t)k->smem + fa.sharedSizeBytes > ctx->dev.smem_optin)
            return rt_fail(e, AMPC_E_UNSUPPORTED, "kernel '%s' asks %u bytes of dynamic shared "
                           "memory (plus %zu static); device %d allows %zu per block", k->name,
                           k->smem, fa.sharedSizeBytes, ctx->dev.index, ctx->dev.smem_optin);
        RT_CUDA(e, cudaFuncSetAttribute((const void *)st->k,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k->smem));
    }
    return check_params(k, st->k, e);
}

/* Re-points a kernel's pointer arguments (io_bind.c). */
static ampc_status kernel_rebind(rt_ctx *ctx, const ampc_rt_step *s, void *state, rt_err *e) {
    (void)e;
    kernel_state *st = state;
    for (int32_t i = 0; i < s->kernel.n_args && i < st->n_args; i++)
        if (s->kernel.args[i].kind == AMPC_RT_ARG_PTR)
            st->values[i].ptr = rt_ref_ptr(ctx, s->kernel.args[i].ref);
    return AMPC_OK;
}

static ampc_status kernel_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    (void)ctx;
    kernel_state *st = state;
    if (st->empty) return AMPC_OK;
    if (st->pdl) {
        cudaLaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {.gridDim = st->grid, .blockDim = st->block,
                                  .dynamicSmemBytes = st->smem, .stream = stream,
                                  .attrs = &attr, .numAttrs = 1};
        RT_CUDA(e, cudaLaunchKernelExC(&cfg, (const void *)st->k, st->params));
    } else {
        RT_CUDA(e, cudaLaunchKernel((const void *)st->k, st->grid, st->block, st->params,
                                    st->smem, stream));
    }
    RT_LAUNCH_CHECK(e);
    return AMPC_OK;
}

static void kernel_release(rt_ctx *ctx, void *state) {
    (void)ctx;
    kernel_state *st = state;
    if (st == NULL) return;
    free(st->values);
    free(st->params);
    free(st);
}

const rt_provider rt_provider_kernel = {
    .name = "kernel",
    .supports = kernel_supports,
    .plan = kernel_plan,
    .launch = kernel_launch,
    .release = kernel_release,
    .rebind = kernel_rebind,
};

/* ---- copies and memsets ------------------------------------------------------------------------
 * Device-to-device copies and zero fills inside the model's buffers. Their state is the two
 * addresses and the size. */

typedef struct copy_state {
    void *dst;
    const void *src;
    size_t bytes;
} copy_state;

static ampc_status copy_supports(const rt_ctx *ctx, const ampc_rt_plan *p, const ampc_rt_step *s,
                                 rt_err *e) {
    (void)ctx;
    ampc_rt_ref src = s->copy.src, dst = s->copy.dst;
    if (rt_check_ref(p, src, "copy source", false, true, e) != AMPC_OK ||
        rt_check_ref(p, dst, "copy destination", true, src.bytes == 0, e) != AMPC_OK)
        return e->status;
    if (dst.bytes < src.bytes)
        return rt_fail(e, AMPC_E_INVALID_ARG, "copy of %lld bytes into a destination of %lld",
                       (long long)src.bytes, (long long)dst.bytes);
    if (src.bytes > 0 && src.space == dst.space && src.offset < dst.offset + src.bytes &&
        dst.offset < src.offset + src.bytes)
        return rt_fail(e, AMPC_E_INVALID_ARG, "copy source [%lld, +%lld) and destination "
                       "[%lld, +%lld) overlap", (long long)src.offset, (long long)src.bytes,
                       (long long)dst.offset, (long long)src.bytes);
    return AMPC_OK;
}

static ampc_status memset_supports(const rt_ctx *ctx, const ampc_rt_plan *p,
                                   const ampc_rt_step *s, rt_err *e) {
    (void)ctx;
    return rt_check_ref(p, s->memset.dst, "memset destination", true, true, e);
}

static ampc_status copy_plan(rt_ctx *ctx, const ampc_rt_step *s, void **state, size_t *workspace,
                             rt_err *e) {
    *workspace = 0;
    copy_state *st = calloc(1, sizeof *st);
    if (st == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    *state = st;
    if (s->kind == AMPC_RT_STEP_COPY) {
        st->src = rt_ref_ptr(ctx, s->copy.src);
        st->dst = rt_ref_ptr(ctx, s->copy.dst);
        st->bytes = (size_t)s->copy.src.bytes;
    } else {
        st->dst = rt_ref_ptr(ctx, s->memset.dst);
        st->bytes = (size_t)s->memset.dst.bytes;
    }
    return AMPC_OK;
}

/* Re-points a copy or memset (io_bind.c). */
static ampc_status copy_rebind(rt_ctx *ctx, const ampc_rt_step *s, void *state, rt_err *e) {
    (void)e;
    copy_state *st = state;
    if (s->kind == AMPC_RT_STEP_COPY) {
        st->src = rt_ref_ptr(ctx, s->copy.src);
        st->dst = rt_ref_ptr(ctx, s->copy.dst);
    } else {
        st->dst = rt_ref_ptr(ctx, s->memset.dst);
    }
    return AMPC_OK;
}

static ampc_status copy_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    (void)ctx;
    copy_state *st = state;
    if (st->bytes == 0) return AMPC_OK;
    RT_CUDA(e, cudaMemcpyAsync(st->dst, st->src, st->bytes, cudaMemcpyDeviceToDevice, stream));
    return AMPC_OK;
}

static ampc_status memset_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    (void)ctx;
    copy_state *st = state;
    if (st->bytes == 0) return AMPC_OK;
    RT_CUDA(e, cudaMemsetAsync(st->dst, 0, st->bytes, stream));
    return AMPC_OK;
}

static void copy_release(rt_ctx *ctx, void *state) {
    (void)ctx;
    free(state);
}

const rt_provider rt_provider_copy = {
    .name = "copy",
    .supports = copy_supports,
    .plan = copy_plan,
    .launch = copy_launch,
    .release = copy_release,
    .rebind = copy_rebind,
};

const rt_provider rt_provider_memset = {
    .name = "memset",
    .supports = memset_supports,
    .plan = copy_plan,
    .launch = memset_launch,
    .release = copy_release,
    .rebind = copy_rebind,
};
