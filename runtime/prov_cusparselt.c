/*
 * prov_cusparselt.c — 2:4 sparse GEMMs on cuSPARSELt, for the GEMM steps whose weight carries
 * the sparsity pass's mark (plan.h's ampc_rt_gemm.sparse24). The cuBLASLt provider plans every
 * GEMM step dense; for a marked one it asks this file for a sparse plan too, times both and keeps
 * the faster (prov_cublaslt.c, sparse_choose). Nothing here is required: without cuSPARSELt, or
 * when it refuses a shape, the step stays dense and the reason is kept for the report.
 *
 * The library. cuSPARSELt is not part of the CUDA toolkit and ampc ships no header of it: it is
 * opened with dlopen ($AMPC_CUSPARSELT_PATH, else the soname libcusparseLt.so.0, also next to
 * libcudart) and the few entry points used are declared below from the documented API
 * (docs.nvidia.com/cuda/cusparselt: functions.html, types.html). The opaque structures are
 * plain byte arrays the library fills in (512 bytes in 0.10; ampc gives each 1024, aligned to
 * 16, so an older release with larger ones still fits). Enumerators are the documented values
 * of 0.6 and later (cusparseComputeType is {32I, 16F, 32F} there); the minimum is 0.8.0, the
 * first release for CUDA 13 and the first with cusparseLtGetErrorName / GetErrorString and
 * cusparseLtMatmulAlgSelectionDestroy, which ampc binds.
 *
 * Orientation. Operands are row-major; as in the cuBLASLt provider ampc hands the library the
 * transposed problem in column-major terms, D^T = op(B)^T op(A)^T, so the structured operand
 * (cuSPARSELt's A) is our weight B: a row-major K x N weight is a column-major N x K matrix,
 * op(A) is N x K, and its 2:4 groups run along K, which is what the sparsity pass made. The
 * row bias bias[n] is then the per-row bias of D^T, the form cuSPARSELt's BIAS_POINTER takes.
 * Before compressing, cusparseLtSpMMAPruneCheck confirms on the device that the weight is 2:4 in
 * the library's own sense; a weight that is not stays dense (compression would drop values).
 *
 * Planned once at model creation: the four matrix descriptors, the matmul descriptor (alpha,
 * beta, ReLU and bias as the dense step has them), the algorithm (cusparseLtMatmulSearch on the
 * model's own buffers, once), the plan and the compressed weight. A launch is one
 * cusparseLtMatmul. The compressed weight is kept in a device buffer of its own.
 */
#include "runtime/internal.h"

#include <dlfcn.h>
#include <library_types.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the library's interface, declared from its documentation ------------------------------- */

/* The opaque structures (handle, matrix, matmul and algorithm descriptors, plan). */
typedef struct lt_opaque {
    alignas(16) uint8_t data[1024];
} lt_opaque;

typedef int lt_status; /* cusparseStatus_t: 0 is success */

/* cusparseOrder_t, cusparseOperation_t (cuSPARSE's enums, which cuSPARSELt takes) */
enum { LT_ORDER_COL = 1 };
enum { LT_OP_N = 0, LT_OP_T = 1 };
/* cusparseLtSparsity_t, cusparseComputeType (0.6 and later), cusparseLtMatmulAlg_t */
enum { LT_SPARSITY_50_PERCENT = 0 };
enum { LT_COMPUTE_32F = 2 };
enum { LT_ALG_DEFAULT = 0 };
/* cusparseLtMatmulDescAttribute_t */
enum { LT_MATMUL_ACTIVATION_RELU = 0, LT_MATMUL_BIAS_POINTER = 8 };

#define SPLT_FUNCS(X)                                                                              \
    X(cusparseLtGetProperty, lt_status, (libraryPropertyType, int *))                             \
    X(cusparseLtGetErrorName, const char *, (lt_status))                                           \
    X(cusparseLtGetErrorString, const char *, (lt_status))                                         \
    X(cusparseLtInit, lt_status, (lt_opaque *))                                                    \
    X(cusparseLtDestroy, lt_status, (const lt_opaque *))                                           \
    X(cusparseLtDenseDescriptorInit, lt_status,                                                    \
      (const lt_opaque *, lt_opaque *, int64_t, int64_t, int64_t, uint32_t, cudaDataType, int))    \
    X(cusparseLtStructuredDescriptorInit, lt_status,                                               \
      (const lt_opaque *, lt_opaque *, int64_t, int64_t, int64_t, uint32_t, cudaDataType, int,     \
       int))                                                                                       \
    X(cusparseLtMatDescriptorDestroy, lt_status, (const lt_opaque *))                              \
    X(cusparseLtMatmulDescriptorInit, lt_status,                                                   \
      (const lt_opaque *, lt_opaque *, int, int, const lt_opaque *, const lt_opaque *,             \
       const lt_opaque *, const lt_opaque *, int))                                                 \
    X(cusparseLtMatmulDescSetAttribute, lt_status,                                                 \
      (const lt_opaque *, lt_opaque *, int, const void *, size_t))                                 \
    X(cusparseLtMatmulAlgSelectionInit, lt_status,                                                 \
      (const lt_opaque *, lt_opaque *, const lt_opaque *, int))                                    \
    X(cusparseLtMatmulAlgSelectionDestroy, lt_status, (const lt_opaque *))                         \
    X(cusparseLtMatmulPlanInit, lt_status,                                                         \
      (const lt_opaque *, lt_opaque *, const lt_opaque *, const lt_opaque *))                      \
    X(cusparseLtMatmulPlanDestroy, lt_status, (const lt_opaque *))                                 \
    X(cusparseLtMatmulGetWorkspace, lt_status, (const lt_opaque *, const lt_opaque *, size_t *))   \
    X(cusparseLtSpMMAPruneCheck, lt_status,                                                        \
      (const lt_opaque *, const lt_opaque *, const void *, int *, cudaStream_t))                   \
    X(cusparseLtSpMMACompressedSize, lt_status,                                                    \
      (const lt_opaque *, const lt_opaque *, size_t *, size_t *))                                  \
    X(cusparseLtSpMMACompress, lt_status,                                                          \
      (const lt_opaque *, const lt_opaque *, const void *, void *, void *, cudaStream_t))          \
    X(cusparseLtMatmulSearch, lt_status,                                                           \
      (const lt_opaque *, lt_opaque *, const void *, const void *, const void *, const void *,     \
       const void *, void *, void *, cudaStream_t *, int32_t))                                     \
    X(cusparseLtMatmul, lt_status,                                                                 \
      (const lt_opaque *, const lt_opaque *, const void *, const void *, const void *,             \
       const void *, const void *, void *, void *, cudaStream_t *, int32_t))

static struct {
#define X(f, ret, args) ret(*f) args;
    SPLT_FUNCS(X)
#undef X
} splt;

static bool splt_bind(void *h, const char **missing, int64_t *version) {
    *missing = NULL;
#define X(f, ret, args)                                                                            \
    if (*missing == NULL) {                                                                        \
        void *p_ = dlsym(h, #f);                                                                   \
        if (p_ == NULL) *missing = #f;                                                             \
        else memcpy(&splt.f, &p_, sizeof p_);                                                      \
    }
    SPLT_FUNCS(X)
#undef X
    *version = 0;
    if (*missing != NULL) return false;
    int major = 0, minor = 0, patch = 0;
    if (splt.cusparseLtGetProperty(MAJOR_VERSION, &major) == 0 &&
        splt.cusparseLtGetProperty(MINOR_VERSION, &minor) == 0 &&
        splt.cusparseLtGetProperty(PATCH_LEVEL, &patch) == 0)
        *version = (int64_t)major * 10000 + minor * 100 + patch;
    return true;
}

static const char *const splt_sonames[] = {"libcusparseLt.so.0", NULL};

rt_lib rt_cusparselt_lib = {
    .name = "cuSPARSELt",
    .sonames = splt_sonames,
    .path_env = "AMPC_CUSPARSELT_PATH",
    .min_version = 800, /* 0.8.0 (file comment) */
    .bind = splt_bind,
};

static ampc_status fail_splt(rt_err *e, int rc, const char *stmt, const char *func,
                             const char *file, int line) {
    lt_status s = (lt_status)rc;
    return rt_fail_call(e, "cuSPARSELt", rc,
                        splt.cusparseLtGetErrorName ? splt.cusparseLtGetErrorName(s) : NULL,
                        splt.cusparseLtGetErrorString ? splt.cusparseLtGetErrorString(s) : NULL,
                        stmt, func, file, line);
}
#define RT_SPLT(e, call) RT_CHECK_GEN(e, fail_splt, call)

/* ---- the cost model and the static rules ----------------------------------------------------- */

rt_sparse_mode rt_sparse_mode_get(const ampc_rt_options *o) {
    switch (o->sparse) {
    case 0: return RT_SPARSE_OFF;
    case 1: return RT_SPARSE_FORCE;
    case 2: return RT_SPARSE_FORCE_CUSPARSELT;
    case 3: return RT_SPARSE_FORCE_KERNEL;
    default: return RT_SPARSE_AUTO;
    }
}

const char *rt_sparse_way_name(int way) {
    static const char *const names[RT_SPARSE_WAYS] = {"cuBLASLt", "cuSPARSELt", "ampc-2:4"};
    return way >= 0 && way < RT_SPARSE_WAYS ? names[way] : "?";
}

bool rt_sparse_pick(rt_sparse_mode mode, double dense_ms, double sparse_ms) {
    if (mode == RT_SPARSE_OFF || sparse_ms < 0) return false;
    if (mode != RT_SPARSE_AUTO) return true;
    return dense_ms < 0 || sparse_ms < dense_ms;
}

const char *rt_sparse_gemm_why_not(const ampc_rt_gemm *g) {
    if (!g->sparse24) return "the weight is not marked 2:4";
    if (g->dtype_ab != AMPC_DTYPE_F16 && g->dtype_ab != AMPC_DTYPE_BF16)
        return "2:4 GEMMs run for f16 and bf16 operands only (f32 would need 1:2 for TF32)";
    if (g->dtype_cd != g->dtype_ab) return "the output dtype differs from the operands'";
    if (g->batch != 1) return "a batched GEMM (the weight would be compressed per batch)";
    if (g->b.space != AMPC_RT_WEIGHTS) return "the weight is not a constant";
    if (g->m == 0 || g->n == 0 || g->k == 0) return "an empty product";
    if (g->epilogue == AMPC_RT_EPI_GELU || g->epilogue == AMPC_RT_EPI_BIAS_GELU)
        return "the erf GELU epilogue (cuSPARSELt's GELU is the tanh form)";
    if (ampc_rt_epilogue_tanh(g->epilogue))
        return "a GELU epilogue (not planned on cuSPARSELt)";
    bool bias = g->epilogue == AMPC_RT_EPI_BIAS || g->epilogue == AMPC_RT_EPI_BIAS_RELU;
    if (bias && g->dtype_bias != g->dtype_cd) return "the bias dtype differs from the output's";
    /* rows aligned to 16 bytes (8 elements), the alignment the descriptors are given; the
     * library refuses, while planning, any further shape it does not run */
    if (g->k % 8 || g->n % 8 || g->ldb % 8 || g->lda % 8 || g->ldd % 8 ||
        (g->c.bytes > 0 && g->ldc % 8))
        return "a dimension or row pitch is not a multiple of 8 elements";
    return NULL;
}

/* ---- planning and launching ------------------------------------------------------------------ */

struct rt_sparse_gemm {
    lt_opaque mat[4]; /* cuSPARSELt's A (our weight, structured), B (our A), C, D */
    lt_opaque op, alg, plan;
    bool have_mat[4], have_alg, have_plan; /* (the matmul descriptor needs no destroy) */
    bool searched;           /* cusparseLtMatmulSearch ran and chose the kernel */
    void *compressed;        /* the compressed weight, device memory this state owns */
    const void *b, *c;       /* cuSPARSELt's dense B (our A) and C */
    void *d;
    float alpha, beta;
};

static cudaDataType_t cuda_type(ampc_dtype t) {
    return t == AMPC_DTYPE_BF16 ? CUDA_R_16BF : t == AMPC_DTYPE_F32 ? CUDA_R_32F : CUDA_R_16F;
}

/* The handle of ctx, made on first use (cuSPARSELt ties it to the current device). */
static ampc_status handle(rt_ctx *ctx, rt_err *e) {
    if (ctx->cusparselt != NULL) return AMPC_OK;
    lt_opaque *h = calloc(1, sizeof *h);
    if (h == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    lt_status rc = splt.cusparseLtInit(h);
    if (rc != 0) {
        free(h);
        return fail_splt(e, rc, "splt.cusparseLtInit(h)", __func__, __FILE__, __LINE__);
    }
    ctx->cusparselt = h;
    return AMPC_OK;
}

void rt_sparse_close(rt_ctx *ctx) {
    if (ctx->cusparselt == NULL) return;
    splt.cusparseLtDestroy(ctx->cusparselt);
    free(ctx->cusparselt);
    ctx->cusparselt = NULL;
}

void rt_sparse_gemm_release(rt_sparse_gemm *sp) {
    if (sp == NULL) return;
    if (sp->have_plan) splt.cusparseLtMatmulPlanDestroy(&sp->plan);
    if (sp->have_alg) splt.cusparseLtMatmulAlgSelectionDestroy(&sp->alg);
    for (int i = 0; i < 4; i++)
        if (sp->have_mat[i]) splt.cusparseLtMatDescriptorDestroy(&sp->mat[i]);
    if (sp->compressed) (void)cudaFree(sp->compressed);
    free(sp);
}

/* The largest power of two (<= 16) dividing the address: cuSPARSELt's alignment argument. */
static uint32_t align16(const void *p) {
    uintptr_t v = (uintptr_t)p | 16;
    return (uint32_t)(v & (~v + 1));
}

/* Checks on the device that the weight is 2:4 along K as cuSPARSELt reads it. */
static ampc_status prune_check(rt_ctx *ctx, rt_sparse_gemm *sp, const void *w, rt_err *e) {
    const lt_opaque *h = ctx->cusparselt;
    int *valid_d = NULL, valid = 1;
    RT_CUDA(e, cudaMalloc((void **)&valid_d, sizeof *valid_d));
    /* the check only raises the flag: it starts at 0 (fresh memory holds anything) */
    cudaError_t cr = cudaMemsetAsync(valid_d, 0, sizeof *valid_d, ctx->plan_stream);
    lt_status rc = cr == cudaSuccess ? splt.cusparseLtSpMMAPruneCheck(h, &sp->op, w, valid_d,
                                                                      ctx->plan_stream)
                                     : 0;
    if (rc == 0 && cr == cudaSuccess)
        cr = cudaMemcpyAsync(&valid, valid_d, sizeof valid, cudaMemcpyDeviceToHost,
                             ctx->plan_stream);
    if (rc == 0 && cr == cudaSuccess) cr = cudaStreamSynchronize(ctx->plan_stream);
    (void)cudaFree(valid_d);
    if (rc != 0)
        return fail_splt(e, rc, "splt.cusparseLtSpMMAPruneCheck(h, &sp->op, w, valid_d, stream)",
                         __func__, __FILE__, __LINE__);
    if (cr != cudaSuccess)
        return rt_fail_cuda(e, cr, "cudaMemcpyAsync / cudaStreamSynchronize (the prune check)",
                            __func__, __FILE__, __LINE__);
    if (valid != 0)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "cuSPARSELt's prune check finds the weight not "
                       "2:4 along K (a group of 4 with more than 2 non-zeros)");
    return AMPC_OK;
}

/* The descriptors and the matmul descriptor of g (file comment: the transposed problem). */
static ampc_status describe(rt_ctx *ctx, const ampc_rt_gemm *g, rt_sparse_gemm *sp, rt_err *e) {
    const lt_opaque *h = ctx->cusparselt;
    cudaDataType_t tab = cuda_type(g->dtype_ab), tcd = cuda_type(g->dtype_cd);
    const void *w = rt_ref_ptr(ctx, g->b);
    sp->b = rt_ref_ptr(ctx, g->a);
    sp->d = rt_ref_ptr(ctx, g->d);
    sp->c = g->c.bytes > 0 ? rt_ref_ptr(ctx, g->c) : sp->d;
    int64_t ldc = g->c.bytes > 0 ? g->ldc : g->ldd;
    /* A: our weight, stored k x n (n x k when trans_b) row-major = n x k (k x n) column-major */
    RT_SPLT(e, splt.cusparseLtStructuredDescriptorInit(
                   h, &sp->mat[0], g->trans_b ? g->k : g->n, g->trans_b ? g->n : g->k, g->ldb,
                   align16(w), tab, LT_ORDER_COL, LT_SPARSITY_50_PERCENT));
    sp->have_mat[0] = true;
    /* B: our A, stored m x k (k x m when trans_a) row-major */
    RT_SPLT(e, splt.cusparseLtDenseDescriptorInit(h, &sp->mat[1], g->trans_a ? g->m : g->k,
                                                  g->trans_a ? g->k : g->m, g->lda,
                                                  align16(sp->b), tab, LT_ORDER_COL));
    sp->have_mat[1] = true;
    RT_SPLT(e, splt.cusparseLtDenseDescriptorInit(h, &sp->mat[2], g->n, g->m, ldc, align16(sp->c),
                                                  tcd, LT_ORDER_COL));
    sp->have_mat[2] = true;
    RT_SPLT(e, splt.cusparseLtDenseDescriptorInit(h, &sp->mat[3], g->n, g->m, g->ldd,
                                                  align16(sp->d), tcd, LT_ORDER_COL));
    sp->have_mat[3] = true;
    RT_SPLT(e, splt.cusparseLtMatmulDescriptorInit(h, &sp->op, g->trans_b ? LT_OP_T : LT_OP_N,
                                                   g->trans_a ? LT_OP_T : LT_OP_N, &sp->mat[0],
                                                   &sp->mat[1], &sp->mat[2], &sp->mat[3],
                                                   LT_COMPUTE_32F));
    if (g->epilogue == AMPC_RT_EPI_RELU || g->epilogue == AMPC_RT_EPI_BIAS_RELU) {
        int32_t on = 1;
        RT_SPLT(e, splt.cusparseLtMatmulDescSetAttribute(h, &sp->op, LT_MATMUL_ACTIVATION_RELU,
                                                         &on, sizeof on));
    }
    if (g->epilogue == AMPC_RT_EPI_BIAS || g->epilogue == AMPC_RT_EPI_BIAS_RELU) {
        const void *bias = rt_ref_ptr(ctx, g->bias);
        RT_SPLT(e, splt.cusparseLtMatmulDescSetAttribute(h, &sp->op, LT_MATMUL_BIAS_POINTER,
                                                         &bias, sizeof bias));
    }
    sp->alpha = g->alpha;
    sp->beta = g->c.bytes > 0 ? g->beta : 0.0f;
    return prune_check(ctx, sp, w, e);
}

/* The workspace for the search: the planning scratch when large enough, else a buffer of its
 * own (*own, freed by the caller). */
static ampc_status search_ws(rt_ctx *ctx, size_t need, void **ws, void **own, rt_err *e) {
    *own = NULL;
    *ws = NULL;
    if (need == 0) return AMPC_OK;
    if (ctx->scratch != NULL && ctx->scratch_bytes >= need) {
        *ws = ctx->scratch;
        return AMPC_OK;
    }
    RT_CUDA(e, cudaMalloc(own, need));
    *ws = *own;
    return AMPC_OK;
}

/* The plan, its workspace, the algorithm search and the compression; sp is described. */
static ampc_status plan_compress(rt_ctx *ctx, const ampc_rt_gemm *g, rt_sparse_gemm *sp,
                                 size_t *workspace, rt_err *e) {
    const lt_opaque *h = ctx->cusparselt;
    cudaStream_t s = ctx->plan_stream;
    RT_SPLT(e, splt.cusparseLtMatmulAlgSelectionInit(h, &sp->alg, &sp->op, LT_ALG_DEFAULT));
    sp->have_alg = true;
    RT_SPLT(e, splt.cusparseLtMatmulPlanInit(h, &sp->plan, &sp->op, &sp->alg));
    sp->have_plan = true;
    size_t size = 0, buf_size = 0;
    RT_SPLT(e, splt.cusparseLtSpMMACompressedSize(h, &sp->plan, &size, &buf_size));
    void *buf = NULL;
    RT_CUDA(e, cudaMalloc(&sp->compressed, size));
    if (buf_size > 0) RT_CUDA(e, cudaMalloc(&buf, buf_size));
    lt_status rc = splt.cusparseLtSpMMACompress(h, &sp->plan, rt_ref_ptr(ctx, g->b),
                                                sp->compressed, buf, s);
    cudaError_t cr = cudaStreamSynchronize(s);
    if (buf) (void)cudaFree(buf);
    if (rc != 0)
        return fail_splt(e, rc, "splt.cusparseLtSpMMACompress(h, &sp->plan, w, compressed, buf, s)",
                         __func__, __FILE__, __LINE__);
    if (cr != cudaSuccess)
        return rt_fail_cuda(e, cr, "cudaStreamSynchronize(s)", __func__, __FILE__, __LINE__);

    size_t ws = 0;
    RT_SPLT(e, splt.cusparseLtMatmulGetWorkspace(h, &sp->plan, &ws));
    if (ctx->opts->sparse_search) {
        /* cuSPARSELt runs its candidate kernels on the model's buffers and keeps the fastest in
         * the plan; the search may pick a split-K needing more workspace, asked again after. */
        void *w = NULL, *own = NULL;
        if (search_ws(ctx, ws > (32u << 20) ? ws : (32u << 20), &w, &own, e) != AMPC_OK)
            return e->status;
        rc = splt.cusparseLtMatmulSearch(h, &sp->plan, &sp->alpha, sp->compressed, sp->b,
                                         &sp->beta, sp->c, sp->d, w, &s, 1);
        cr = cudaStreamSynchronize(s);
        if (own) (void)cudaFree(own);
        /* A search that fails leaves the default kernel, which the timing and the self-check
         * then judge like any other; only a CUDA error (the context may be broken) stops here. */
        sp->searched = rc == 0;
        if (cr != cudaSuccess)
            return rt_fail_cuda(e, cr, "cudaStreamSynchronize(s) after cusparseLtMatmulSearch",
                                __func__, __FILE__, __LINE__);
        rt_cuda_clear();
        RT_SPLT(e, splt.cusparseLtMatmulGetWorkspace(h, &sp->plan, &ws));
    }
    *workspace = ws;
    return AMPC_OK;
}

ampc_status rt_sparse_gemm_plan(rt_ctx *ctx, const ampc_rt_gemm *g, rt_sparse_gemm **out,
                                size_t *workspace, rt_err *e) {
    *out = NULL;
    *workspace = 0;
    const char *why = rt_sparse_gemm_why_not(g);
    if (why != NULL) return rt_fail(e, AMPC_E_UNSUPPORTED, "%s", why);
    if (rt_lib_open(&rt_cusparselt_lib, e) != AMPC_OK || handle(ctx, e) != AMPC_OK)
        return e->status;
    rt_sparse_gemm *sp = calloc(1, sizeof *sp);
    if (sp == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    if (describe(ctx, g, sp, e) != AMPC_OK || plan_compress(ctx, g, sp, workspace, e) != AMPC_OK) {
        rt_sparse_gemm_release(sp);
        rt_cuda_clear();
        *workspace = 0;
        return e->status;
    }
    *out = sp;
    return AMPC_OK;
}

bool rt_sparse_gemm_searched(const rt_sparse_gemm *sp) { return sp != NULL && sp->searched; }

ampc_status rt_sparse_gemm_launch(rt_ctx *ctx, rt_sparse_gemm *sp, cudaStream_t stream,
                                  rt_err *e) {
    RT_SPLT(e, splt.cusparseLtMatmul(ctx->cusparselt, &sp->plan, &sp->alpha, sp->compressed,
                                     sp->b, &sp->beta, sp->c, sp->d, ctx->workspace, &stream, 1));
    RT_LAUNCH_CHECK(e);
    return AMPC_OK;
}
