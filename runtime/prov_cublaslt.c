/*
 * prov_cublaslt.c — the cuBLASLt provider: GEMM steps (runtime/plan.h's ampc_rt_gemm).
 *
 * cuBLASLt is opened with dlopen on first use (libcublasLt.so.13, else .12) and its functions
 * bound with dlsym; its header is used for types only, so ampc never links it.
 *
 * Layout: the plan's operands are row-major; cuBLASLt's default order is column-major. A row-major
 * m x n matrix with row pitch ld IS a column-major n x m matrix with leading dimension ld, so
 *     D = op(A) @ op(B)   (row-major)   <=>   D^T = op(B)^T @ op(A)^T   (column-major)
 * and the runtime hands cuBLASLt the operands swapped (its A is our B, its B our A), with
 * M = n, N = m and the same transpose flags. No data moves, and the row bias bias[n] becomes
 * cuBLASLt's per-row bias of D^T (length M = n), exactly what its BIAS epilogue broadcasts.
 *
 * Everything is planned once at model creation: the matmul descriptor, the four layouts (with
 * batch count and strides), the epilogue, and the algorithm: the heuristic's first choice
 * given the operands' real alignment and a workspace cap. AMPC_GEMM_TUNE=1 times the first eight
 * candidates instead (GEMM_ROUNDS runs each on the model's buffers, rt_time_calls) and keeps the
 * fastest unless the heuristic's is within 3% (AMPC_GEMM_VERBOSE=1 prints the timings), a choice
 * the tuning cache keeps (runtime/tune_cache.c) for the next creation (AMPC_GEMM_REDUCTION
 * restricts the split-K reduction schemes the heuristic may offer: gemm_reduction_mask). It is
 * off by default: on the H200 it gained nothing consistent (BERT-base fp16, the same run: b1
 * 0.624 ms with the heuristic's choices, 0.636 ms timed; b32 2.001 against 1.983 ms), and the
 * b1 GEMMs it picked were slower one by one (72 GEMMs: 0.57 ms launched singly with the
 * heuristic's choices, 0.82 to 1.0 ms with the timed ones; docs/benchmarks.md). Timed cold, as
 * rt_time_calls now times, it is even with the heuristic (BERT b1 0.417 / 0.418 ms against
 * 0.415). A launch is one cublasLtMatmul.
 *
 * ampc's own dense kernel (the step's own_kernel on a step not marked 2:4, codegen/dense_gemm.c):
 * a step with the erf GELU epilogue runs on it alone (cuBLASLt's GELU is the tanh form, so
 * cuBLASLt is not planned for it). Any other step that has one is planned on cuBLASLt and then
 * the two are timed on the model's own buffers as the 2:4 candidates are (below), and the
 * kernel kept when it is faster and agrees with cuBLASLt on the same operands (dense_choose).
 * AMPC_GEMM_KERNEL=0 keeps cuBLASLt, =1 takes the kernel wherever it plans and agrees; the
 * choice goes into the tuning cache. --profile names such a step's provider "ampc-gemm".
 *
 * 2:4 steps (sparse24: the weight B passed the sparsity pass) are planned dense as above and then
 * on cuSPARSELt (prov_cusparselt.c) and on ampc's own generated 2:4 kernel (the step's
 * own_kernel, launched through the kernel provider). All are timed on the model's own buffers
 * (SPARSE_ROUNDS interleaved rounds of SPARSE_REPS calls each, every call timed alone behind an
 * L2 flush by rt_time_calls, the median round)
 * and the fastest kept: the cost model is the measurement at that shape on that GPU. A sparse
 * winner must also agree with the dense call on the same operands (agrees_with_dense). AMPC_SPARSE=0
 * keeps dense without opening cuSPARSELt, =1 takes the faster sparse way wherever one plans and
 * agrees, =cusparselt / =kernel only that way. Whatever happens is kept as a note for
 * ampc_rt_model_step_sparse and, with AMPC_SPARSE_VERBOSE=1, printed to stderr.
 */
#include "runtime/internal.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The workspace a matmul may use: 32 MiB is what NVIDIA recommends for Hopper. Candidates are
 * timed over GEMM_ROUNDS runs after one warm-up. */
enum { GEMM_WORKSPACE_MAX = 32 << 20, GEMM_ROUNDS = 3, GEMM_CANDIDATES = 8 };

/* The workspace a matmul may ask for: GEMM_WORKSPACE_MAX, or less with AMPC_GEMM_WORKSPACE=BYTES
 * (0 keeps cuBLASLt to algorithms that need none, split-K reductions in a workspace among them). */
static uint64_t gemm_ws_max(const rt_ctx *ctx) {
    int64_t n = ctx->opts->gemm_workspace;
    return n >= 0 && n < GEMM_WORKSPACE_MAX ? (uint64_t)n : GEMM_WORKSPACE_MAX;
}
/* The split-K reduction schemes cuBLASLt may use (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK):
 * all, or AMPC_GEMM_REDUCTION=MASK (1 in place, 2 and 4 a reduction kernel after the product; 0
 * no split-K). On the H200 the heuristic splits BERT b1's FFN-out GEMM (128 x 768 x 3072) in two,
 * reduced in place, which costs the graph one more node (the counters' reset); with 0 it picks
 * a one-block-column kernel and BERT b1 goes from 0.398 to 0.624 ms. */
static uint32_t gemm_reduction_mask(const rt_ctx *ctx) {
    int64_t m = ctx->opts->gemm_reduction;
    return m >= 0 && m <= CUBLASLT_REDUCTION_SCHEME_MASK ? (uint32_t)m
                                                          : CUBLASLT_REDUCTION_SCHEME_MASK;
}

/* Timing a 2:4 step both ways at creation: rounds of calls (rt_time_calls), the median round. */
enum { SPARSE_ROUNDS = 5, SPARSE_REPS = 10 };

/* ---- the library --------------------------------------------------------------------------- */

#define LT_FUNCS(X)                                                                                \
    X(cublasLtGetVersion)                                                                          \
    X(cublasLtGetStatusName)                                                                       \
    X(cublasLtGetStatusString)                                                                     \
    X(cublasLtCreate)                                                                              \
    X(cublasLtDestroy)                                                                             \
    X(cublasLtMatmulDescCreate)                                                                    \
    X(cublasLtMatmulDescDestroy)                                                                   \
    X(cublasLtMatmulDescSetAttribute)                                                              \
    X(cublasLtMatrixLayoutCreate)                                                                  \
    X(cublasLtMatrixLayoutDestroy)                                                                 \
    X(cublasLtMatrixLayoutSetAttribute)                                                            \
    X(cublasLtMatmulPreferenceCreate)                                                              \
    X(cublasLtMatmulPreferenceDestroy)                                                             \
    X(cublasLtMatmulPreferenceSetAttribute)                                                        \
    X(cublasLtMatmulAlgoGetHeuristic)                                                              \
    X(cublasLtMatmulAlgoConfigGetAttribute)                                                        \
    X(cublasLtMatmul)

/* The bound functions, each typed from the real header's declaration. */
static struct {
#define X(f) __typeof__(&f) f;
    LT_FUNCS(X)
#undef X
} lt;

static bool lt_bind(void *h, const char **missing, int64_t *version) {
    *missing = NULL;
#define X(f)                                                                                       \
    if (*missing == NULL) {                                                                        \
        void *p_ = dlsym(h, #f);                                                                   \
        if (p_ == NULL) *missing = #f;                                                             \
        memcpy(&lt.f, &p_, sizeof p_);                                                             \
    }
    LT_FUNCS(X)
#undef X
    *version = lt.cublasLtGetVersion ? (int64_t)lt.cublasLtGetVersion() : 0;
    return *missing == NULL;
}

static const char *const lt_sonames[] = {"libcublasLt.so.13", "libcublasLt.so.12", NULL};
rt_lib rt_cublaslt_lib = {
    .name = "cuBLASLt", .sonames = lt_sonames, .path_env = "AMPC_CUBLASLT_PATH",
    .min_version = 120000, .bind = lt_bind};

ampc_status rt_fail_cublas(rt_err *e, int rc, const char *stmt, const char *func,
                           const char *file, int line) {
    cublasStatus_t s = (cublasStatus_t)rc;
    rt_cuda_clear(); /* a failed launch inside cuBLASLt leaves cudart's error set */
    return rt_fail_call(e, "cuBLASLt", rc, lt.cublasLtGetStatusName ? lt.cublasLtGetStatusName(s) : NULL,
                        lt.cublasLtGetStatusString ? lt.cublasLtGetStatusString(s) : NULL, stmt,
                        func, file, line);
}

/* ---- static rules ---------------------------------------------------------------------------- */

static bool epi_gelu(uint8_t epi) { return epi == AMPC_RT_EPI_GELU || epi == AMPC_RT_EPI_BIAS_GELU; }

static bool epi_has_bias(uint8_t epi) {
    return epi == AMPC_RT_EPI_BIAS || epi == AMPC_RT_EPI_BIAS_RELU || epi == AMPC_RT_EPI_BIAS_GELU ||
           epi == AMPC_RT_EPI_BIAS_GELU_TANH;
}

/* The (A/B, C/D) dtype pairs cuBLASLt runs for us. */
static bool dtype_pair_ok(ampc_dtype ab, ampc_dtype cd) {
    switch (ab) {
    case AMPC_DTYPE_F32: return cd == AMPC_DTYPE_F32;
    case AMPC_DTYPE_F64: return cd == AMPC_DTYPE_F64;
    case AMPC_DTYPE_F16: return cd == AMPC_DTYPE_F16 || cd == AMPC_DTYPE_F32;
    case AMPC_DTYPE_BF16: return cd == AMPC_DTYPE_BF16 || cd == AMPC_DTYPE_F32;
    default: return false;
    }
}

/* Checks one operand: the ref, its pitch against its columns, its size and alignment. */
static ampc_status check_operand(const ampc_rt_plan *p, ampc_rt_ref r, const char *what,
                                 bool writable, int64_t batch, int64_t stride, int64_t rows,
                                 int64_t cols, int64_t ld, size_t es, rt_err *e) {
    if (rt_check_ref(p, r, what, writable, false, e) != AMPC_OK) return e->status;
    if (ld < (cols > 1 ? cols : 1))
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s has row pitch %lld, less than its %lld columns",
                       what, (long long)ld, (long long)cols);
    if (stride < 0)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s has batch stride %lld", what, (long long)stride);
    return rt_check_ref_size(r, what, rt_span_bytes(batch, stride, rows, ld, cols, (int64_t)es),
                             (int64_t)es, e);
}

static ampc_status gemm_supports(const rt_ctx *ctx, const ampc_rt_plan *p, const ampc_rt_step *s,
                                 rt_err *e) {
    const ampc_rt_gemm *g = &s->gemm;
    if (g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 1 || g->batch > INT32_MAX)
        return rt_fail(e, AMPC_E_INVALID_ARG, "matmul has m=%lld n=%lld k=%lld batch=%lld: sizes "
                       "must be >= 0 and batch in [1, 2^31)", (long long)g->m, (long long)g->n,
                       (long long)g->k, (long long)g->batch);
    if (g->epilogue > AMPC_RT_EPI_BIAS_GELU_TANH || g->math > AMPC_RT_MATH_TF32)
        return rt_fail(e, AMPC_E_INVALID_ARG, "matmul has epilogue %u and math %u; the known "
                       "values are 0 to 7 and 0 to 1", g->epilogue, g->math);
    if (epi_gelu(g->epilogue) && g->own_kernel.name == NULL)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "matmul epilogue %s: cuBLASLt's GELU epilogue is "
                       "the tanh approximation, the plan asks for the erf form, and the step has "
                       "no kernel of ampc's own for it", ampc_rt_epilogue_name(g->epilogue));
    if (!dtype_pair_ok(g->dtype_ab, g->dtype_cd))
        return rt_fail(e, AMPC_E_UNSUPPORTED, "matmul of %s operands into %s: cuBLASLt runs "
                       "f32->f32, f64->f64, f16->f16/f32 and bf16->bf16/f32",
                       rt_dtype_name(g->dtype_ab), rt_dtype_name(g->dtype_cd));
    bool has_bias = epi_has_bias(g->epilogue);
    if (has_bias && g->dtype_bias != g->dtype_cd)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "matmul bias is %s, D is %s: the bias must have D's "
                       "dtype", rt_dtype_name(g->dtype_bias), rt_dtype_name(g->dtype_cd));
    if (rt_check_ref(p, g->d, "matmul D", true, false, e) != AMPC_OK) return e->status;
    if (g->m == 0 || g->n == 0) return AMPC_OK; /* nothing to compute */
    if (g->k == 0)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "matmul with k = 0 (an empty contraction): lower it "
                       "to a memset or a bias broadcast");
    if (g->batch > 1 && g->stride_d == 0)
        return rt_fail(e, AMPC_E_INVALID_ARG, "matmul D has batch stride 0 with batch %lld: every "
                       "batch would write the same matrix", (long long)g->batch);
    size_t es_ab = rt_dtype_size(g->dtype_ab), es_cd = rt_dtype_size(g->dtype_cd);
    /* stored shapes (before op): A is m x k, or k x m when transposed; B is k x n, or n x k */
    int64_t ar = g->trans_a ? g->k : g->m, ac = g->trans_a ? g->m : g->k;
    int64_t br = g->trans_b ? g->n : g->k, bc = g->trans_b ? g->k : g->n;
    if (check_operand(p, g->a, "matmul A", false, g->batch, g->stride_a, ar, ac, g->lda, es_ab, e) ||
        check_operand(p, g->b, "matmul B", false, g->batch, g->stride_b, br, bc, g->ldb, es_ab, e) ||
        check_operand(p, g->d, "matmul D", true, g->batch, g->stride_d, g->m, g->n, g->ldd, es_cd, e))
        return e->status;
    if (g->c.bytes > 0) {
        if (check_operand(p, g->c, "matmul C", false, g->batch, g->stride_c, g->m, g->n, g->ldc,
                          es_cd, e))
            return e->status;
        bool same = g->c.space == g->d.space && g->c.offset == g->d.offset;
        if (same && (g->ldc != g->ldd || g->stride_c != g->stride_d))
            return rt_fail(e, AMPC_E_INVALID_ARG, "matmul C and D are the same buffer with "
                           "different pitches (ldc %lld, ldd %lld; strides %lld, %lld)",
                           (long long)g->ldc, (long long)g->ldd, (long long)g->stride_c,
                           (long long)g->stride_d);
    }
    if (has_bias) {
        if (rt_check_ref(p, g->bias, "matmul bias", false, false, e) != AMPC_OK ||
            rt_check_ref_size(g->bias, "matmul bias", g->n * (int64_t)es_cd, (int64_t)es_cd, e))
            return e->status;
    }
    if (g->own_kernel.name != NULL) { /* ampc's own kernel: checked as any kernel step */
        ampc_rt_step ks = {.kind = AMPC_RT_STEP_KERNEL, .label = s->label};
        ks.kernel = g->own_kernel;
        if (rt_provider_kernel.supports(ctx, p, &ks, e) != AMPC_OK) {
            rt_err_prefix(e, g->sparse24 ? "the 2:4 kernel of a matmul: "
                                         : "ampc's kernel of a matmul: ");
            return e->status;
        }
        if (epi_gelu(g->epilogue)) return AMPC_OK; /* cuBLASLt is not needed */
    }
    if (ctx != NULL) return rt_lib_open(&rt_cublaslt_lib, e);
    return AMPC_OK;
}

/* ---- planning and launching -------------------------------------------------------------------- */

typedef struct gemm_state {
    bool noop;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld; /* cuBLASLt's A (our B), B (our A), C, D */
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulAlgo_t algo;
    const void *a, *b, *c; /* cuBLASLt's roles */
    void *d;
    union {
        float f;
        double d;
    } alpha, beta;
    /* a 2:4 step (sparse24): the decision (rt_sparse_way) and the plans of the candidates that
     * were planned; the losers' are freed once the choice is made */
    bool marked;
    bool own;                   /* a dense step with ampc's own kernel: way KERNEL runs that */
    int way;                    /* rt_sparse_way: what the launches run */
    double ms[RT_SPARSE_WAYS];  /* per call, measured at creation; -1 when not measured */
    bool sp_searched;           /* the cuSPARSELt kernel came from its search */
    char note[512];
    rt_sparse_gemm *sp;         /* cuSPARSELt's plan */
    void *kst;                  /* ampc's 2:4 kernel: rt_provider_kernel's state */
} gemm_state;

static cudaDataType_t cuda_type(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_F16: return CUDA_R_16F;
    case AMPC_DTYPE_BF16: return CUDA_R_16BF;
    case AMPC_DTYPE_F64: return CUDA_R_64F;
    default: return CUDA_R_32F;
    }
}

/* The largest power of two (<= 256) dividing the address and, for a batch, the batch stride. */
static uint32_t alignment(const void *ptr, int64_t batch, int64_t stride, size_t es) {
    uint64_t v = (uint64_t)(uintptr_t)ptr | 256;
    if (batch > 1 && stride != 0) v |= (uint64_t)stride * es;
    return (uint32_t)(v & (~v + 1));
}

/* A column-major rows x cols layout with leading dimension ld, batched when batch > 1. */
static ampc_status make_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows,
                               int64_t cols, int64_t ld, int64_t batch, int64_t stride, rt_err *e) {
    RT_CUBLAS(e, lt.cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        RT_CUBLAS(e, lt.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                         &count, sizeof count));
        RT_CUBLAS(e, lt.cublasLtMatrixLayoutSetAttribute(
                         *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
    return AMPC_OK;
}

/* Milliseconds per run of the matmul with algorithm `algo` over GEMM_ROUNDS runs after one
 * warm-up (rt_time_calls), on the planning stream with the planning scratch as workspace; -1 when a run fails
 * (the error is cleared: a candidate that fails is skipped). */
typedef struct gemm_timed {
    rt_ctx *ctx;
    const gemm_state *st;
    const cublasLtMatmulAlgo_t *algo;
} gemm_timed;

static bool gemm_timed_call(void *arg, cudaStream_t s) {
    const gemm_timed *t = arg;
    const gemm_state *st = t->st;
    return lt.cublasLtMatmul(t->ctx->cublaslt, st->op, &st->alpha, st->a, st->la, st->b, st->lb,
                             &st->beta, st->c, st->lc, st->d, st->ld, t->algo, t->ctx->scratch,
                             t->ctx->scratch_bytes, s) == CUBLAS_STATUS_SUCCESS;
}

static float gemm_time(rt_ctx *ctx, const gemm_state *st, const cublasLtMatmulAlgo_t *algo) {
    gemm_timed t = {ctx, st, algo};
    return rt_time_calls(ctx, gemm_timed_call, &t, ctx->plan_stream, GEMM_ROUNDS);
}


/* An algorithm's configuration attribute (a 32-bit one), 0 when cuBLASLt does not say. */
static uint32_t algo_u32(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint32_t v = 0;
    size_t w = 0;
    if (lt.cublasLtMatmulAlgoConfigGetAttribute(a, attr, &v, sizeof v, &w) != CUBLAS_STATUS_SUCCESS)
        v = 0;
    return v;
}

/* AMPC_GEMM_VERBOSE=1: the chosen algorithm's split of K, its reduction scheme and tile. */
static void say_algo(const ampc_rt_step *s, const cublasLtMatmulHeuristicResult_t *r, int pick,
                     int count) {
    int32_t splitk = (int32_t)algo_u32(&r->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
    int32_t tile = (int32_t)algo_u32(&r->algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
    uint32_t scheme = algo_u32(&r->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
    const ampc_rt_gemm *g = &s->gemm;
    rt_log("cuBLASLt %s (%lld x %lld x %lld): candidate %d of %d, split-K %d, "
           "reduction scheme %u, tile id %d, workspace %zu bytes, %.2f waves",
            s->label ? s->label : "?", (long long)g->m, (long long)g->n, (long long)g->k, pick,
            count, splitk, scheme, tile, r->workspaceSize, (double)r->wavesCount);
}

/* The tuning cache's key of GEMM g with operand alignments al on this GPU with this cuBLASLt. */
static void gemm_key(const rt_ctx *ctx, const ampc_rt_gemm *g, const uint32_t al[4], size_t ws_max,
                     char *key, size_t n) {
    snprintf(key, n, "cuBLASLt %lld|%s sm%d|gemm %lldx%lldx%lld b%lld t%d%d ld %lld %lld %lld "
             "%lld st %lld %lld %lld %lld %s>%s bias %s math%d epi%d al %u %u %u %u ws %zu red %u %s",
             (long long)rt_cublaslt_lib.version, ctx->dev.name, ctx->dev.sm, (long long)g->m,
             (long long)g->n, (long long)g->k, (long long)g->batch, g->trans_a, g->trans_b,
             (long long)g->lda, (long long)g->ldb, (long long)g->ldc, (long long)g->ldd,
             (long long)g->stride_a, (long long)g->stride_b, (long long)g->stride_c,
             (long long)g->stride_d, rt_dtype_name(g->dtype_ab), rt_dtype_name(g->dtype_cd),
             rt_dtype_name(g->dtype_bias), g->math, g->epilogue, al[0], al[1], al[2], al[3],
             ws_max, gemm_reduction_mask(ctx), rt_tune_mode(ctx));
}

/* The candidate to keep among the heuristic's results res[0..count) that succeeded and fit
 * ws_max (file comment); -1 when none does. A timed choice goes into the tuning cache under
 * `key` (runtime/tune_cache.c), and a later creation takes it from there when the heuristic
 * still offers it. */
static int gemm_pick(rt_ctx *ctx, const gemm_state *st, const cublasLtMatmulHeuristicResult_t *res,
                     int count, size_t ws_max, const char *key, rt_err *e) {
    int first = -1, fits = 0;
    for (int i = 0; i < count; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= ws_max)
            first = first < 0 ? i : first, fits++;
    if (fits < 2 || !ctx->opts->gemm_tune) return first;
    char val[32];
    int cached = -1;
    if (rt_tune_get(key, val, sizeof val) && sscanf(val, "index=%d", &cached) == 1 && cached >= 0 &&
        cached < count && res[cached].state == CUBLAS_STATUS_SUCCESS &&
        res[cached].workspaceSize <= ws_max)
        return cached;
    if (rt_plan_scratch(ctx, 0, e) != AMPC_OK) return -1;
    const bool verbose = ctx->opts->gemm_verbose;
    int best = first;
    float best_ms = -1.0f, first_ms = -1.0f;
    for (int i = first; i < count; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > ws_max ||
            res[i].workspaceSize > ctx->scratch_bytes)
            continue;
        float ms = gemm_time(ctx, st, &res[i].algo);
        if (verbose) rt_log("cuBLASLt candidate %d: %.4f ms", i, ms);
        if (i == first) first_ms = ms;
        if (ms >= 0 && (best_ms < 0 || ms < best_ms)) best = i, best_ms = ms;
    }
    /* the heuristic's choice stands unless another is clearly faster (timing noise) */
    if (first_ms >= 0 && best != first && best_ms > 0.97f * first_ms) best = first;
    if (verbose) rt_log("cuBLASLt keeps candidate %d", best);
    snprintf(val, sizeof val, "index=%d", best);
    rt_tune_put(key, val);
    return best;
}

static ampc_status dense_call(rt_ctx *ctx, gemm_state *st, cudaStream_t stream, rt_err *e) {
    RT_CUBLAS(e, lt.cublasLtMatmul(ctx->cublaslt, st->op, &st->alpha, st->a, st->la, st->b, st->lb,
                                   &st->beta, st->c, st->lc, st->d, st->ld, &st->algo,
                                   ctx->workspace, ctx->workspace_bytes, stream));
    RT_LAUNCH_CHECK(e);
    return AMPC_OK;
}

/* ---- 2:4 steps: dense or sparse, by measurement ---------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The name of `way` for this step: ampc's kernel is "ampc-gemm" on a dense step. */
static const char *way_name(const gemm_state *st, int way) {
    return way == RT_SPARSE_KERNEL && !st->marked ? "ampc-gemm" : rt_sparse_way_name(way);
}

/* One call of candidate `way` (rt_sparse_way) on stream s. */
static ampc_status one_call(rt_ctx *ctx, gemm_state *st, int way, cudaStream_t s, rt_err *e) {
    if (way == RT_SPARSE_CUSPARSELT) return rt_sparse_gemm_launch(ctx, st->sp, s, e);
    if (way == RT_SPARSE_KERNEL) return rt_provider_kernel.launch(ctx, st->kst, s, e);
    return dense_call(ctx, st, s, e);
}

/* One call of candidate `way` for rt_time_calls; a failure is kept in *e. */
typedef struct way_timed {
    rt_ctx *ctx;
    gemm_state *st;
    int way;
    rt_err *e;
} way_timed;

static bool way_timed_call(void *arg, cudaStream_t s) {
    way_timed *t = arg;
    return one_call(t->ctx, t->st, t->way, s, t->e) == AMPC_OK;
}

/* One round of SPARSE_REPS calls of `way` timed by rt_time_calls: milliseconds per call into
 * *ms. */
static ampc_status time_round(rt_ctx *ctx, gemm_state *st, int way, double *ms, rt_err *e) {
    way_timed t = {ctx, st, way, e};
    float v = rt_time_calls(ctx, way_timed_call, &t, ctx->plan_stream, SPARSE_REPS);
    if (v < 0)
        return e->status != AMPC_OK ? e->status
                                    : rt_fail(e, AMPC_E_CUDA, "timing the %s call failed",
                                              way_name(st, way));
    *ms = (double)v;
    return AMPC_OK;
}

/* Milliseconds per call of every planned candidate (planned[w]) into st->ms[w]: SPARSE_ROUNDS
 * rounds of each (time_round), interleaved (clock changes hit all alike), on the planning stream
 * with the planning scratch as workspace; the median round. A candidate whose call fails gets -1
 * and its failure in e[w]; one not planned keeps -1. */
static void time_all(rt_ctx *ctx, gemm_state *st, const bool planned[RT_SPARSE_WAYS],
                     rt_err e[RT_SPARSE_WAYS]) {
    void *ws = ctx->workspace;
    size_t ws_bytes = ctx->workspace_bytes;
    ctx->workspace = ctx->scratch;
    ctx->workspace_bytes = ctx->scratch_bytes;
    double rounds[RT_SPARSE_WAYS][SPARSE_ROUNDS];
    bool ok[RT_SPARSE_WAYS];
    for (int k = 0; k < RT_SPARSE_WAYS; k++) ok[k] = planned[k];
    for (int r = 0; r < SPARSE_ROUNDS; r++)
        for (int k = 0; k < RT_SPARSE_WAYS; k++)
            if (ok[k]) ok[k] = time_round(ctx, st, k, &rounds[k][r], &e[k]) == AMPC_OK;
    for (int k = 0; k < RT_SPARSE_WAYS; k++) {
        st->ms[k] = -1;
        if (!ok[k]) continue;
        qsort(rounds[k], SPARSE_ROUNDS, sizeof rounds[k][0], cmp_double);
        st->ms[k] = rounds[k][SPARSE_ROUNDS / 2];
    }
    (void)cudaStreamSynchronize(ctx->plan_stream);
    rt_cuda_clear();
    ctx->workspace = ws;
    ctx->workspace_bytes = ws_bytes;
}

/* Element i of an f16 or bf16 array as a float (no libm: the runtime links only cudart). */
static float half_at(const void *p, ampc_dtype t, int64_t i) {
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    uint32_t u = (uint32_t)h << 16;
    if (t != AMPC_DTYPE_BF16) {
        uint32_t sign = (uint32_t)(h >> 15) << 31, ex = (h >> 10) & 31, man = h & 1023;
        if (ex == 0) {
            float v = (float)man * (1.0f / 16777216.0f); /* subnormal: man * 2^-24 */
            return sign ? -v : v;
        }
        u = sign | (ex == 31 ? 0xffu << 23 : (ex + 112) << 23) | man << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The self-check's device work: x (when an activation) filled from the weight's bytes, D saved,
 * the dense call, D copied out to host[0..dbytes), D restored, the call of `way`, D copied out
 * to host[dbytes..2*dbytes). */
static ampc_status check_calls(rt_ctx *ctx, const ampc_rt_gemm *g, gemm_state *st, int way,
                               void *save, char *host, size_t dbytes, rt_err *e) {
    cudaStream_t s = ctx->plan_stream;
    void *d = rt_ref_ptr(ctx, g->d);
    if (g->c.bytes > 0 && g->c.space == AMPC_RT_ARENA) /* not whatever planning left there */
        RT_CUDA(e, cudaMemsetAsync(rt_ref_ptr(ctx, g->c), 0, (size_t)g->c.bytes, s));
    if (g->a.space == AMPC_RT_ARENA) {
        char *x = rt_ref_ptr(ctx, g->a);
        const char *w = rt_ref_ptr(ctx, g->b);
        for (int64_t at = 0; at < g->a.bytes; at += g->b.bytes) {
            int64_t n = g->a.bytes - at < g->b.bytes ? g->a.bytes - at : g->b.bytes;
            RT_CUDA(e, cudaMemcpyAsync(x + at, w, (size_t)n, cudaMemcpyDeviceToDevice, s));
        }
    }
    RT_CUDA(e, cudaMemcpyAsync(save, d, dbytes, cudaMemcpyDeviceToDevice, s));
    if (dense_call(ctx, st, s, e) != AMPC_OK) return e->status;
    RT_CUDA(e, cudaMemcpyAsync(host, d, dbytes, cudaMemcpyDeviceToHost, s));
    RT_CUDA(e, cudaMemcpyAsync(d, save, dbytes, cudaMemcpyDeviceToDevice, s));
    if (one_call(ctx, st, way, s, e) != AMPC_OK) return e->status;
    RT_CUDA(e, cudaMemcpyAsync(host + dbytes, d, dbytes, cudaMemcpyDeviceToHost, s));
    RT_CUDA(e, cudaStreamSynchronize(s));
    return AMPC_OK;
}

/* Before a candidate other than cuBLASLt's dense call (`way`: cuSPARSELt, ampc's 2:4 or dense
 * kernel) is trusted: the dense call and it on the same operands (x filled from the weight's
 * values, so the product is not trivially zero) must agree within 2 % of the output's largest
 * magnitude. Guards against a cuSPARSELt that reads the weight, the bias
 * or an epilogue otherwise than documented, and against a fault of ampc's own kernel. false
 * with the evidence in why when they differ or the check cannot run. AMPC_SPARSE_CHECK=0 skips
 * it. */
static bool agrees_with_dense(rt_ctx *ctx, const ampc_rt_gemm *g, gemm_state *st, int way,
                              char *why, size_t size) {
    if (!ctx->opts->sparse_check) return true;
    size_t es = rt_dtype_size(g->dtype_cd);
    size_t dbytes = (size_t)((g->m - 1) * g->ldd + g->n) * es;
    void *save = NULL, *ws = ctx->workspace;
    size_t ws_bytes = ctx->workspace_bytes;
    char *host = malloc(2 * dbytes);
    rt_err e = {0};
    if (host == NULL) rt_fail(&e, AMPC_E_OOM, "out of host memory (%zu bytes)", 2 * dbytes);
    else if (cudaMalloc(&save, dbytes) != cudaSuccess)
        rt_fail(&e, AMPC_E_OOM, "out of device memory (%zu bytes)", dbytes);
    if (e.status == AMPC_OK) {
        ctx->workspace = ctx->scratch;
        ctx->workspace_bytes = ctx->scratch_bytes;
        check_calls(ctx, g, st, way, save, host, dbytes, &e);
        ctx->workspace = ws;
        ctx->workspace_bytes = ws_bytes;
    }
    bool agree = false;
    if (e.status != AMPC_OK) {
        snprintf(why, size, "the check of the %s result against the dense one failed: %s",
                 way_name(st, way), e.msg ? e.msg : "?");
    } else {
        double worst = 0, scale = 0;
        int64_t at = 0;
        for (int64_t r = 0; r < g->m; r++)
            for (int64_t c = 0; c < g->n; c++) {
                int64_t i = r * g->ldd + c;
                double a = half_at(host, g->dtype_cd, i);
                double b = half_at(host + dbytes, g->dtype_cd, i);
                double diff = a > b ? a - b : b - a, mag = a < 0 ? -a : a;
                if (!(diff <= worst)) worst = diff, at = i; /* NaN counts as the worst */
                if (mag > scale) scale = mag;
            }
        agree = worst <= 2e-2 * scale + 1e-3;
        if (!agree)
            snprintf(why, size, "the %s result differs from the dense one: |%g - %g| at "
                     "element %lld, largest |dense| %g", way_name(st, way),
                     half_at(host, g->dtype_cd, at),
                     half_at(host + dbytes, g->dtype_cd, at), (long long)at, scale);
    }
    rt_err_clear(&e);
    rt_cuda_clear();
    if (save) (void)cudaFree(save);
    free(host);
    return agree;
}

/* Tells the log the decision of a 2:4 step (the sparse_verbose option). */
static void sparse_say(const rt_ctx *ctx, const ampc_rt_step *s, const gemm_state *st) {
    if (!ctx->opts->sparse_verbose) return;
    const ampc_rt_gemm *g = &s->gemm;
    rt_log("2:4 GEMM %s (m %lld, n %lld, k %lld, %s%s): dense %.4f ms, cuSPARSELt "
           "%.4f ms%s, ampc 2:4 kernel %.4f ms -> %s (%s)", s->label ? s->label : "?",
            (long long)g->m, (long long)g->n, (long long)g->k, rt_dtype_name(g->dtype_ab),
            g->epilogue != AMPC_RT_EPI_NONE ? ", epilogue" : "", st->ms[RT_SPARSE_DENSE],
            st->ms[RT_SPARSE_CUSPARSELT], st->sp_searched ? " (searched kernel)" : "",
            st->ms[RT_SPARSE_KERNEL], rt_sparse_way_name(st->way), st->note);
}

/* Plans the candidates the mode allows besides dense (planned[way]); notes why one could not
 * be planned in why[way]. */
static ampc_status plan_candidates(rt_ctx *ctx, const ampc_rt_step *s, gemm_state *st,
                                   rt_sparse_mode mode, bool planned[RT_SPARSE_WAYS],
                                   char why[RT_SPARSE_WAYS][200], size_t *sparse_ws, rt_err *e) {
    const ampc_rt_gemm *g = &s->gemm;
    planned[RT_SPARSE_DENSE] = true;
    if (mode != RT_SPARSE_FORCE_KERNEL) {
        rt_err se = {0};
        if (rt_sparse_gemm_plan(ctx, g, &st->sp, sparse_ws, &se) == AMPC_OK)
            planned[RT_SPARSE_CUSPARSELT] = true;
        else
            snprintf(why[RT_SPARSE_CUSPARSELT], 200, "no cuSPARSELt plan: %s", se.msg ? se.msg : "?");
        rt_err_clear(&se);
    } else {
        snprintf(why[RT_SPARSE_CUSPARSELT], 200, "AMPC_SPARSE=kernel");
    }
    if (mode == RT_SPARSE_FORCE_CUSPARSELT) {
        snprintf(why[RT_SPARSE_KERNEL], 200, "AMPC_SPARSE=cusparselt");
    } else if (g->own_kernel.name == NULL) {
        snprintf(why[RT_SPARSE_KERNEL], 200, "the plan has no ampc 2:4 kernel for this step");
    } else {
        ampc_rt_step ks = {.kind = AMPC_RT_STEP_KERNEL, .label = s->label};
        ks.kernel = g->own_kernel;
        size_t kws = 0;
        rt_err ke = {0};
        if (rt_provider_kernel.plan(ctx, &ks, &st->kst, &kws, &ke) == AMPC_OK) {
            planned[RT_SPARSE_KERNEL] = true;
        } else {
            snprintf(why[RT_SPARSE_KERNEL], 200, "no ampc 2:4 kernel: %s", ke.msg ? ke.msg : "?");
            rt_provider_kernel.release(ctx, st->kst);
            st->kst = NULL;
        }
        rt_err_clear(&ke);
    }
    (void)e;
    return AMPC_OK;
}

/* The sparse candidates that ran, fastest first, into order[]; their count. */
static int sparse_order(const gemm_state *st, int order[2]) {
    int n = 0;
    for (int w = RT_SPARSE_CUSPARSELT; w < RT_SPARSE_WAYS; w++)
        if (st->ms[w] >= 0) order[n++] = w;
    if (n == 2 && st->ms[order[1]] < st->ms[order[0]]) {
        int t = order[0];
        order[0] = order[1], order[1] = t;
    }
    return n;
}

/* Plans a 2:4 step on cuSPARSELt and on ampc's own kernel too, times them with the dense call
 * and keeps the fastest that agrees with dense (file comment). Anything that keeps it from
 * running sparse becomes the note of a dense step, never a failure of the model. */
static ampc_status sparse_choose(rt_ctx *ctx, const ampc_rt_step *s, gemm_state *st,
                                 size_t *workspace, rt_err *e) {
    rt_sparse_mode mode = rt_sparse_mode_get(ctx->opts);
    st->marked = true;
    st->way = RT_SPARSE_DENSE;
    for (int w = 0; w < RT_SPARSE_WAYS; w++) st->ms[w] = -1;
    if (mode == RT_SPARSE_OFF) {
        snprintf(st->note, sizeof st->note, "the sparse option 0 (AMPC_SPARSE=0) keeps every step dense");
        sparse_say(ctx, s, st);
        return AMPC_OK;
    }
    bool planned[RT_SPARSE_WAYS] = {false};
    char why[RT_SPARSE_WAYS][200] = {{0}};
    size_t sparse_ws = 0;
    plan_candidates(ctx, s, st, mode, planned, why, &sparse_ws, e);
    if (!planned[RT_SPARSE_CUSPARSELT] && !planned[RT_SPARSE_KERNEL]) {
        snprintf(st->note, sizeof st->note, "%s; %s", why[RT_SPARSE_CUSPARSELT], why[RT_SPARSE_KERNEL]);
        sparse_say(ctx, s, st);
        return AMPC_OK;
    }
    size_t need = sparse_ws > *workspace ? sparse_ws : *workspace;
    if (rt_plan_scratch(ctx, need > 256 ? need : 256, e) != AMPC_OK) return e->status;
    st->sp_searched = rt_sparse_gemm_searched(st->sp);
    rt_err te[RT_SPARSE_WAYS] = {{0}};
    time_all(ctx, st, planned, te);
    for (int w = RT_SPARSE_CUSPARSELT; w < RT_SPARSE_WAYS; w++)
        if (planned[w] && st->ms[w] < 0)
            snprintf(why[w], 200, "the %s call failed: %s", rt_sparse_way_name(w),
                     te[w].msg ? te[w].msg : "?");
    for (int w = 0; w < RT_SPARSE_WAYS; w++) rt_err_clear(&te[w]);

    /* the fastest sparse candidate the mode takes and the self-check passes */
    int order[2], n = sparse_order(st, order);
    char check_note[sizeof st->note] = "";
    for (int i = 0; i < n && st->way == RT_SPARSE_DENSE; i++) {
        int w = order[i];
        bool take = mode != RT_SPARSE_AUTO ||
                    rt_sparse_pick(mode, st->ms[RT_SPARSE_DENSE], st->ms[w]);
        if (take && agrees_with_dense(ctx, &s->gemm, st, w, check_note, sizeof check_note))
            st->way = w;
    }
    double best = n ? st->ms[order[0]] : -1, dense = st->ms[RT_SPARSE_DENSE];
    if (st->way != RT_SPARSE_DENSE && mode != RT_SPARSE_AUTO)
        snprintf(st->note, sizeof st->note, "the sparse option (AMPC_SPARSE) asks for %s",
                 rt_sparse_way_name(st->way));
    else if (st->way != RT_SPARSE_DENSE)
        snprintf(st->note, sizeof st->note, "%s is the fastest (%.2fx dense)",
                 rt_sparse_way_name(st->way), dense > 0 ? dense / st->ms[st->way] : 0.0);
    else if (check_note[0])
        snprintf(st->note, sizeof st->note, "%s", check_note);
    else if (n == 0)
        snprintf(st->note, sizeof st->note, "%s; %s", why[RT_SPARSE_CUSPARSELT], why[RT_SPARSE_KERNEL]);
    else
        snprintf(st->note, sizeof st->note, "dense is faster (best sparse, %s, %.2fx)",
                 rt_sparse_way_name(order[0]), best > 0 ? dense / best : 0.0);

    if (st->way == RT_SPARSE_CUSPARSELT) *workspace = sparse_ws;
    if (st->way != RT_SPARSE_CUSPARSELT) {
        rt_sparse_gemm_release(st->sp); /* frees the compressed weight */
        st->sp = NULL;
    }
    if (st->way != RT_SPARSE_KERNEL && st->kst) {
        rt_provider_kernel.release(ctx, st->kst);
        st->kst = NULL;
    }
    sparse_say(ctx, s, st);
    return AMPC_OK;
}

static bool gemm_sparse_choice(const void *state, ampc_rt_sparse_choice *out) {
    const gemm_state *st = state;
    if (st == NULL || !st->marked) return false;
    out->sparse = st->way != RT_SPARSE_DENSE;
    out->dense_ms = st->ms[RT_SPARSE_DENSE];
    out->sparse_ms = st->ms[RT_SPARSE_CUSPARSELT];
    out->kernel_ms = st->ms[RT_SPARSE_KERNEL];
    out->runs_on = rt_sparse_way_name(st->way);
    out->note = st->note;
    return true;
}

/* ---- ampc's own dense kernel: the GELU epilogue, or cuBLASLt's rival -------------------------- */

/* Plans the step's own_kernel into st->kst; false with the reason in why. */
static bool own_plan(rt_ctx *ctx, const ampc_rt_step *s, gemm_state *st, char *why, size_t size) {
    ampc_rt_step ks = {.kind = AMPC_RT_STEP_KERNEL, .label = s->label};
    ks.kernel = s->gemm.own_kernel;
    size_t kws = 0;
    rt_err ke = {0};
    bool ok = rt_provider_kernel.plan(ctx, &ks, &st->kst, &kws, &ke) == AMPC_OK;
    if (!ok) {
        snprintf(why, size, "%s", ke.msg ? ke.msg : "?");
        rt_provider_kernel.release(ctx, st->kst);
        st->kst = NULL;
    }
    rt_err_clear(&ke);
    return ok;
}

/* A GELU epilogue: ampc's kernel is the only way (file comment). */
static ampc_status own_only(rt_ctx *ctx, const ampc_rt_step *s, gemm_state *st, rt_err *e) {
    char why[400];
    for (int w = 0; w < RT_SPARSE_WAYS; w++) st->ms[w] = -1;
    st->marked = s->gemm.sparse24;
    st->own = !st->marked;
    if (!own_plan(ctx, s, st, why, sizeof why))
        return rt_fail(e, AMPC_E_UNSUPPORTED, "the matmul's GELU epilogue runs only in ampc's own "
                       "kernel, which failed to load: %s", why);
    st->way = RT_SPARSE_KERNEL;
    snprintf(st->note, sizeof st->note, "the erf GELU epilogue runs only in ampc's kernel");
    return AMPC_OK;
}

/* The tuning cache's key of the choice between cuBLASLt's algorithm and ampc's kernel. */
static void own_key(const rt_ctx *ctx, const ampc_rt_step *s, const gemm_state *st, char *key,
                    size_t n) {
    const ampc_rt_kernel *k = &s->gemm.own_kernel;
    char lt_key[512];
    uint32_t al[4] = {0, 0, 0, 0};
    gemm_key(ctx, &s->gemm, al, gemm_ws_max(ctx), lt_key, sizeof lt_key);
    snprintf(key, n, "ampc-gemm grid %u %u block %u smem %u algo %016llx|%s", k->grid[0],
             k->grid[1], k->block[0], k->smem,
             (unsigned long long)st->algo.data[0] ^ (unsigned long long)st->algo.data[1], lt_key);
}

/* A dense step with ampc's kernel: timed against cuBLASLt's algorithm, the faster kept when it
 * agrees with cuBLASLt (file comment). Anything that keeps the kernel out leaves the step on
 * cuBLASLt, with the reason as its note. */
static ampc_status dense_choose(rt_ctx *ctx, const ampc_rt_step *s, gemm_state *st,
                                size_t *workspace, rt_err *e) {
    const bool force = ctx->opts->gemm_kernel == 1;
    const bool verbose = ctx->opts->gemm_verbose;
    st->own = true;
    st->way = RT_SPARSE_DENSE;
    for (int w = 0; w < RT_SPARSE_WAYS; w++) st->ms[w] = -1;
    char why[400] = "";
    if (ctx->opts->gemm_kernel == 0) {
        snprintf(st->note, sizeof st->note, "the gemm_kernel option 0 (AMPC_GEMM_KERNEL=0) keeps "
                 "cuBLASLt");
        return AMPC_OK;
    }
    if (!own_plan(ctx, s, st, why, sizeof why)) {
        snprintf(st->note, sizeof st->note, "ampc's kernel did not load: %s", why);
        return AMPC_OK;
    }
    char key[800], val[32] = "";
    own_key(ctx, s, st, key, sizeof key);
    bool take;
    if (!force && rt_tune_get(key, val, sizeof val) &&
        (!strcmp(val, "way=kernel") || !strcmp(val, "way=cublaslt"))) {
        take = !strcmp(val, "way=kernel");
    } else {
        size_t need = *workspace > 256 ? *workspace : 256;
        if (rt_plan_scratch(ctx, need, e) != AMPC_OK) return e->status;
        bool planned[RT_SPARSE_WAYS] = {false};
        planned[RT_SPARSE_DENSE] = planned[RT_SPARSE_KERNEL] = true;
        rt_err te[RT_SPARSE_WAYS] = {{0}};
        time_all(ctx, st, planned, te);
        if (st->ms[RT_SPARSE_KERNEL] < 0)
            snprintf(why, sizeof why, "ampc's kernel failed: %s",
                     te[RT_SPARSE_KERNEL].msg ? te[RT_SPARSE_KERNEL].msg : "?");
        for (int w = 0; w < RT_SPARSE_WAYS; w++) rt_err_clear(&te[w]);
        double d = st->ms[RT_SPARSE_DENSE], k = st->ms[RT_SPARSE_KERNEL];
        take = k >= 0 && (force || d < 0 || k < d);
        if (!force && k >= 0) rt_tune_put(key, take ? "way=kernel" : "way=cublaslt");
    }
    char check[sizeof st->note] = "";
    if (take && agrees_with_dense(ctx, &s->gemm, st, RT_SPARSE_KERNEL, check, sizeof check))
        st->way = RT_SPARSE_KERNEL;
    double d = st->ms[RT_SPARSE_DENSE], k = st->ms[RT_SPARSE_KERNEL];
    if (check[0]) snprintf(st->note, sizeof st->note, "%s", check);
    else if (why[0]) snprintf(st->note, sizeof st->note, "%s", why);
    else if (d < 0 && k < 0) snprintf(st->note, sizeof st->note, "the tuning cache's choice");
    else snprintf(st->note, sizeof st->note, "cuBLASLt %.4f ms, ampc's kernel %.4f ms", d, k);
    if (st->way == RT_SPARSE_KERNEL) {
        *workspace = 0;
    } else {
        rt_provider_kernel.release(ctx, st->kst);
        st->kst = NULL;
    }
    if (verbose)
        rt_log("GEMM %s (m %lld, n %lld, k %lld): %s -> %s",
                s->label ? s->label : "?", (long long)s->gemm.m, (long long)s->gemm.n,
                (long long)s->gemm.k, st->note, way_name(st, st->way));
    return AMPC_OK;
}

/* What a GEMM step runs on when that is not cuBLASLt (ampc_rt_model_step_provider). */
static const char *gemm_runs_on(const void *state) {
    const gemm_state *st = state;
    return st != NULL && st->way != RT_SPARSE_DENSE ? way_name(st, st->way) : NULL;
}

static ampc_status gemm_plan(rt_ctx *ctx, const ampc_rt_step *s, void **state, size_t *workspace,
                             rt_err *e) {
    const ampc_rt_gemm *g = &s->gemm;
    *workspace = 0;
    gemm_state *st = calloc(1, sizeof *st);
    if (st == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    *state = st;
    if (g->m == 0 || g->n == 0) {
        st->noop = true;
        return AMPC_OK;
    }
    if (epi_gelu(g->epilogue)) return own_only(ctx, s, st, e);
    if (ctx->cublaslt == NULL) {
        cublasLtHandle_t h = NULL;
        RT_CUBLAS(e, lt.cublasLtCreate(&h));
        ctx->cublaslt = h;
    }
    bool f64 = g->dtype_ab == AMPC_DTYPE_F64;
    cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F
                                  : g->dtype_ab == AMPC_DTYPE_F32 && g->math == AMPC_RT_MATH_TF32
                                      ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : CUBLAS_COMPUTE_32F;
    RT_CUBLAS(e, lt.cublasLtMatmulDescCreate(&st->op, compute, f64 ? CUDA_R_64F : CUDA_R_32F));
    /* swapped roles (file comment): cuBLASLt's A is our B, so its transa is our trans_b */
    int32_t ta = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    RT_CUBLAS(e, lt.cublasLtMatmulDescSetAttribute(st->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    RT_CUBLAS(e, lt.cublasLtMatmulDescSetAttribute(st->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    uint32_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    switch (g->epilogue) {
    case AMPC_RT_EPI_BIAS: epi = CUBLASLT_EPILOGUE_BIAS; break;
    case AMPC_RT_EPI_RELU: epi = CUBLASLT_EPILOGUE_RELU; break;
    case AMPC_RT_EPI_BIAS_RELU: epi = CUBLASLT_EPILOGUE_RELU_BIAS; break;
    case AMPC_RT_EPI_GELU_TANH: epi = CUBLASLT_EPILOGUE_GELU; break; /* cuBLASLt's is the tanh form */
    case AMPC_RT_EPI_BIAS_GELU_TANH: epi = CUBLASLT_EPILOGUE_GELU_BIAS; break;
    default: break;
    }
    RT_CUBLAS(e, lt.cublasLtMatmulDescSetAttribute(st->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                   sizeof epi));
    if (epi_has_bias(g->epilogue)) {
        /* the heuristic reads the bias address to learn its alignment */
        const void *bias = rt_ref_ptr(ctx, g->bias);
        int32_t bt = (int32_t)cuda_type(g->dtype_bias);
        RT_CUBLAS(e, lt.cublasLtMatmulDescSetAttribute(st->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof bias));
        RT_CUBLAS(e, lt.cublasLtMatmulDescSetAttribute(st->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                       &bt, sizeof bt));
    }

    cudaDataType_t tab = cuda_type(g->dtype_ab), tcd = cuda_type(g->dtype_cd);
    bool has_c = g->c.bytes > 0;
    if (make_layout(&st->la, tab, g->trans_b ? g->k : g->n, g->trans_b ? g->n : g->k, g->ldb,
                    g->batch, g->stride_b, e) ||
        make_layout(&st->lb, tab, g->trans_a ? g->m : g->k, g->trans_a ? g->k : g->m, g->lda,
                    g->batch, g->stride_a, e) ||
        make_layout(&st->lc, tcd, g->n, g->m, has_c ? g->ldc : g->ldd, g->batch,
                    has_c ? g->stride_c : g->stride_d, e) ||
        make_layout(&st->ld, tcd, g->n, g->m, g->ldd, g->batch, g->stride_d, e))
        return e->status;
    st->a = rt_ref_ptr(ctx, g->b);
    st->b = rt_ref_ptr(ctx, g->a);
    st->d = rt_ref_ptr(ctx, g->d);
    st->c = has_c ? rt_ref_ptr(ctx, g->c) : st->d;
    if (f64) {
        st->alpha.d = g->alpha;
        st->beta.d = has_c ? g->beta : 0.0;
    } else {
        st->alpha.f = g->alpha;
        st->beta.f = has_c ? g->beta : 0.0f;
    }

    size_t es_ab = rt_dtype_size(g->dtype_ab), es_cd = rt_dtype_size(g->dtype_cd);
    uint64_t ws_max = gemm_ws_max(ctx);
    uint32_t al[4] = {
        alignment(st->a, g->batch, g->stride_b, es_ab),
        alignment(st->b, g->batch, g->stride_a, es_ab),
        alignment(st->c, g->batch, has_c ? g->stride_c : g->stride_d, es_cd),
        alignment(st->d, g->batch, g->stride_d, es_cd),
    };
    RT_CUBLAS(e, lt.cublasLtMatmulPreferenceCreate(&st->pref));
    RT_CUBLAS(e, lt.cublasLtMatmulPreferenceSetAttribute(
                     st->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max, sizeof ws_max));
    static const cublasLtMatmulPreferenceAttributes_t al_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        RT_CUBLAS(e, lt.cublasLtMatmulPreferenceSetAttribute(st->pref, al_attr[i], &al[i],
                                                             sizeof al[i]));
    const uint32_t red = gemm_reduction_mask(ctx);
    RT_CUBLAS(e, lt.cublasLtMatmulPreferenceSetAttribute(
                     st->pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red));

    cublasLtMatmulHeuristicResult_t res[GEMM_CANDIDATES];
    int count = 0;
    memset(res, 0, sizeof res);
    cublasStatus_t hs = lt.cublasLtMatmulAlgoGetHeuristic(ctx->cublaslt, st->op, st->la, st->lb,
                                                          st->lc, st->ld, st->pref, GEMM_CANDIDATES,
                                                          res, &count);
    if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED)
        return rt_fail_cublas(e, hs, "lt.cublasLtMatmulAlgoGetHeuristic(...)", __func__, __FILE__,
                              __LINE__);
    char key[512];
    gemm_key(ctx, g, al, ws_max, key, sizeof key);
    int pick = hs == CUBLAS_STATUS_SUCCESS ? gemm_pick(ctx, st, res, count, ws_max, key, e) : -1;
    if (e->status != AMPC_OK) return e->status;
    if (pick < 0)
        return rt_fail(e, AMPC_E_UNSUPPORTED,
                       "cuBLASLt has no algorithm for this matmul on device %d (sm_%d): m=%lld "
                       "n=%lld k=%lld batch=%lld trans_a=%d trans_b=%d, %s x %s -> %s, %s, epilogue "
                       "%s, alignment of A/B/C/D %u/%u/%u/%u bytes",
                       ctx->dev.index, ctx->dev.sm, (long long)g->m, (long long)g->n,
                       (long long)g->k, (long long)g->batch, g->trans_a, g->trans_b,
                       rt_dtype_name(g->dtype_ab), rt_dtype_name(g->dtype_ab),
                       rt_dtype_name(g->dtype_cd),
                       compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? "TF32" : "full precision",
                       ampc_rt_epilogue_name(g->epilogue), al[1], al[0], al[2], al[3]);
    st->algo = res[pick].algo;
    *workspace = res[pick].workspaceSize;
    if (ctx->opts->gemm_verbose)
        say_algo(s, &res[pick], pick, count);
    if (g->sparse24) return sparse_choose(ctx, s, st, workspace, e);
    if (g->own_kernel.name != NULL) return dense_choose(ctx, s, st, workspace, e);
    return AMPC_OK;
}

static ampc_status gemm_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    gemm_state *st = state;
    if (st->noop) return AMPC_OK;
    return one_call(ctx, st, st->way, stream, e);
}

/* Re-points a step (io_bind.c): one on ampc's kernel as any kernel step; a cuBLASLt one keeps
 * its algorithm, chosen for the arena's alignment (256 bytes, every ref's offset a multiple of
 * it), which a caller's 256-byte-aligned buffer keeps. A step on cuSPARSELt, or a cuBLASLt one
 * whose bias lives in the arena, keeps its copies. */
static ampc_status gemm_rebind(rt_ctx *ctx, const ampc_rt_step *s, void *state, rt_err *e) {
    gemm_state *st = state;
    const ampc_rt_gemm *g = &s->gemm;
    if (st->noop) return AMPC_OK;
    if (st->way == RT_SPARSE_KERNEL) { /* ampc's kernel: re-pointed as any kernel step */
        ampc_rt_step ks = {.kind = AMPC_RT_STEP_KERNEL, .label = s->label};
        ks.kernel = g->own_kernel;
        return rt_provider_kernel.rebind(ctx, &ks, st->kst, e);
    }
    if (st->way != RT_SPARSE_DENSE || (g->bias.bytes > 0 && g->bias.space == AMPC_RT_ARENA))
        return rt_fail(e, AMPC_E_UNSUPPORTED, "a %s GEMM step%s is not re-pointed",
                       rt_sparse_way_name(st->way),
                       st->way == RT_SPARSE_DENSE ? " with its bias in the arena" : "");
    st->a = rt_ref_ptr(ctx, g->b);
    st->b = rt_ref_ptr(ctx, g->a);
    st->d = rt_ref_ptr(ctx, g->d);
    st->c = g->c.bytes > 0 ? rt_ref_ptr(ctx, g->c) : st->d;
    return AMPC_OK;
}

static void gemm_release(rt_ctx *ctx, void *state) {
    gemm_state *st = state;
    if (st == NULL) return;
    rt_sparse_gemm_release(st->sp);
    if (st->kst) rt_provider_kernel.release(ctx, st->kst);
    if (st->pref) lt.cublasLtMatmulPreferenceDestroy(st->pref);
    if (st->la) lt.cublasLtMatrixLayoutDestroy(st->la);
    if (st->lb) lt.cublasLtMatrixLayoutDestroy(st->lb);
    if (st->lc) lt.cublasLtMatrixLayoutDestroy(st->lc);
    if (st->ld) lt.cublasLtMatrixLayoutDestroy(st->ld);
    if (st->op) lt.cublasLtMatmulDescDestroy(st->op);
    free(st);
}

static void gemm_close(rt_ctx *ctx) {
    if (ctx->cublaslt != NULL) lt.cublasLtDestroy(ctx->cublaslt);
    ctx->cublaslt = NULL;
    rt_sparse_close(ctx);
}

const rt_provider rt_provider_cublaslt = {
    .name = "cuBLASLt",
    .supports = gemm_supports,
    .plan = gemm_plan,
    .launch = gemm_launch,
    .release = gemm_release,
    .close = gemm_close,
    .rebind = gemm_rebind,
    .sparse_choice = gemm_sparse_choice,
    .runs_on = gemm_runs_on,
};
