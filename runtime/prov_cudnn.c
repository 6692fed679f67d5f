/*
 * prov_cudnn.c — the cuDNN provider: convolution steps (runtime/plan.h's ampc_rt_conv), forward
 * and transposed, 1-D to 3-D, with groups, strides, dilations, bias, residual and ReLU.
 *
 * cuDNN is opened with dlopen on first use (libcudnn.so.9) and its functions bound with dlsym;
 * its headers are used for types only.
 *
 * Two APIs. The legacy one (cudnnConvolutionForward and friends) covers every convolution ONNX
 * has (N-d, groups, dilations, transposed through cudnnConvolutionBackwardData) with a handful
 * of descriptors, its algorithms are chosen by one call, and its failure modes are simple to
 * report: every step is planned with it. For forward f16 and bf16 steps the graph API is tried
 * too (conv, bias, residual and ReLU as one operation graph, which runtime-fusion engines run as
 * one kernel) and the faster of the two, timed at creation, is kept: see "the graph API" below.
 * The legacy API is deprecated in cuDNN 9 but still complete; its one limit here is symmetric
 * padding (an asymmetric pad is AMPC_E_UNSUPPORTED, and codegen pads the input first).
 *
 * Planned once per step at model creation: the tensor, filter and convolution descriptors, the
 * algorithm (cudnnFind*AlgorithmEx: each candidate is run once on the model's own buffers in a
 * planning scratch workspace, three times over, and the fastest in total kept: see tally), and the
 * workspace size. The choices (algorithm, math type, graph API engine) go into the tuning cache
 * (runtime/tune_cache.c) under a key naming the GPU, cuDNN's version and the convolution, and a
 * later creation takes them from there without timing. Bias + ReLU (with or
 * without a residual) use the fused cudnnConvolutionBiasActivationForward (f32; f16 and bf16
 * where cuDNN accepts the configuration, see fused_launch); other combinations run the
 * convolution then cudnnAddTensor (residual, bias) and cudnnActivationForward (ReLU) in place.
 */
#include "runtime/internal.h"

#include <cudnn.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the library --------------------------------------------------------------------------- */

#define DNN_FUNCS(X)                                                                               \
    X(cudnnGetVersion)                                                                             \
    X(cudnnGetErrorString)                                                                         \
    X(cudnnGetLastErrorString)                                                                     \
    X(cudnnCreate)                                                                                 \
    X(cudnnDestroy)                                                                                \
    X(cudnnSetStream)                                                                              \
    X(cudnnCreateTensorDescriptor)                                                                 \
    X(cudnnSetTensorNdDescriptor)                                                                  \
    X(cudnnDestroyTensorDescriptor)                                                                \
    X(cudnnCreateFilterDescriptor)                                                                 \
    X(cudnnSetFilterNdDescriptor)                                                                  \
    X(cudnnDestroyFilterDescriptor)                                                                \
    X(cudnnCreateConvolutionDescriptor)                                                            \
    X(cudnnSetConvolutionNdDescriptor)                                                             \
    X(cudnnSetConvolutionGroupCount)                                                               \
    X(cudnnSetConvolutionMathType)                                                                 \
    X(cudnnDestroyConvolutionDescriptor)                                                           \
    X(cudnnGetConvolutionNdForwardOutputDim)                                                       \
    X(cudnnGetConvolutionForwardAlgorithmMaxCount)                                                 \
    X(cudnnFindConvolutionForwardAlgorithmEx)                                                      \
    X(cudnnGetConvolutionForwardWorkspaceSize)                                                     \
    X(cudnnConvolutionForward)                                                                     \
    X(cudnnConvolutionBiasActivationForward)                                                       \
    X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount)                                            \
    X(cudnnFindConvolutionBackwardDataAlgorithmEx)                                                 \
    X(cudnnGetConvolutionBackwardDataWorkspaceSize)                                                \
    X(cudnnConvolutionBackwardData)                                                                \
    X(cudnnAddTensor)                                                                              \
    X(cudnnCreateActivationDescriptor)                                                             \
    X(cudnnSetActivationDescriptor)                                                                \
    X(cudnnDestroyActivationDescriptor)                                                            \
    X(cudnnActivationForward)                                                                      \
    X(cudnnBackendCreateDescriptor)                                                                \
    X(cudnnBackendDestroyDescriptor)                                                               \
    X(cudnnBackendSetAttribute)                                                                    \
    X(cudnnBackendGetAttribute)                                                                    \
    X(cudnnBackendFinalize)                                                                        \
    X(cudnnBackendExecute)

static struct {
#define X(f) __typeof__(&f) f;
    DNN_FUNCS(X)
#undef X
} dnn;

static bool dnn_bind(void *h, const char **missing, int64_t *version) {
    *missing = NULL;
#define X(f)                                                                                       \
    if (*missing == NULL) {                                                                        \
        void *p_ = dlsym(h, #f);                                                                   \
        if (p_ == NULL) *missing = #f;                                                             \
        memcpy(&dnn.f, &p_, sizeof p_);                                                            \
    }
    DNN_FUNCS(X)
#undef X
    *version = dnn.cudnnGetVersion ? (int64_t)dnn.cudnnGetVersion() : 0;
    return *missing == NULL;
}

static const char *const dnn_sonames[] = {"libcudnn.so.9", NULL};
rt_lib rt_cudnn_lib = {
    .name = "cuDNN", .sonames = dnn_sonames, .path_env = "AMPC_CUDNN_PATH", .min_version = 90000,
    .bind = dnn_bind};

ampc_status rt_fail_cudnn(rt_err *e, int rc, const char *stmt, const char *func, const char *file,
                          int line) {
    char detail[512] = "";
    if (dnn.cudnnGetLastErrorString) dnn.cudnnGetLastErrorString(detail, sizeof detail);
    rt_cuda_clear();
    const char *name = dnn.cudnnGetErrorString ? dnn.cudnnGetErrorString((cudnnStatus_t)rc) : NULL;
    return rt_fail_call(e, "cuDNN", rc, name, detail[0] ? detail : "(no detail)", stmt, func, file,
                        line);
}

/* ---- static rules ---------------------------------------------------------------------------- */

/* Output extent of one spatial dim. */
static int64_t out_dim(const ampc_rt_conv *c, int i) {
    int64_t span = c->dilation[i] * (c->kernel[i] - 1) + 1;
    if (c->transpose)
        return (c->in[i] - 1) * c->stride[i] + c->output_padding[i] + span - c->pad_begin[i] -
               c->pad_end[i];
    return (c->in[i] + c->pad_begin[i] + c->pad_end[i] - span) / c->stride[i] + 1;
}

/* numel of n x c x spatial dims, false past cuDNN's 2^31-element limit. */
static bool count_ok(int64_t n, int64_t c, const int64_t *d, int spatial, int64_t *out) {
    int64_t v;
    if (__builtin_mul_overflow(n, c, &v)) return false;
    for (int i = 0; i < spatial; i++)
        if (__builtin_mul_overflow(v, d[i], &v)) return false;
    *out = v;
    return v <= INT_MAX;
}

static ampc_status conv_supports(const rt_ctx *ctx, const ampc_rt_plan *p, const ampc_rt_step *s,
                                 rt_err *e) {
    const ampc_rt_conv *c = &s->conv;
    const char *kind = c->transpose ? "ConvTranspose" : "convolution";
    if (c->spatial < 1 || c->spatial > 3)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s with %d spatial dims, expected 1 to 3", kind,
                       c->spatial);
    if (c->n < 0 || c->c_in < 1 || c->c_out < 1 || c->groups < 1 || c->c_in % c->groups ||
        c->c_out % c->groups)
        return rt_fail(e, AMPC_E_INVALID_ARG, "%s has n=%lld c_in=%lld c_out=%lld groups=%lld: "
                       "channels must be >= 1 and divisible by groups", kind, (long long)c->n,
                       (long long)c->c_in, (long long)c->c_out, (long long)c->groups);
    if (c->dtype != AMPC_DTYPE_F32 && c->dtype != AMPC_DTYPE_F16 && c->dtype != AMPC_DTYPE_BF16 &&
        c->dtype != AMPC_DTYPE_F64)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "%s of %s: cuDNN runs f32, f16, bf16 and f64", kind,
                       rt_dtype_name(c->dtype));
    for (int i = 0; i < c->spatial; i++) {
        if (c->in[i] < 1 || c->kernel[i] < 1 || c->stride[i] < 1 || c->dilation[i] < 1 ||
            c->pad_begin[i] < 0 || c->pad_end[i] < 0 || c->output_padding[i] < 0 ||
            (!c->transpose && c->output_padding[i] != 0))
            return rt_fail(e, AMPC_E_INVALID_ARG, "%s spatial dim %d has in %lld, kernel %lld, "
                           "stride %lld, dilation %lld, pads %lld/%lld, output_padding %lld",
                           kind, i, (long long)c->in[i], (long long)c->kernel[i],
                           (long long)c->stride[i], (long long)c->dilation[i],
                           (long long)c->pad_begin[i], (long long)c->pad_end[i],
                           (long long)c->output_padding[i]);
        if (c->pad_begin[i] != c->pad_end[i])
            return rt_fail(e, AMPC_E_UNSUPPORTED, "%s pads must be symmetric for cuDNN: spatial "
                           "dim %d has pad_begin %lld and pad_end %lld (pad the input first)",
                           kind, i, (long long)c->pad_begin[i], (long long)c->pad_end[i]);
        if (c->out[i] != out_dim(c, i) || c->out[i] < 1)
            return rt_fail(e, AMPC_E_INVALID_ARG, "%s spatial dim %d: the plan says out %lld, the "
                           "input %lld, kernel %lld, stride %lld, dilation %lld and pads %lld/%lld "
                           "give %lld", kind, i, (long long)c->out[i], (long long)c->in[i],
                           (long long)c->kernel[i], (long long)c->stride[i],
                           (long long)c->dilation[i], (long long)c->pad_begin[i],
                           (long long)c->pad_end[i], (long long)out_dim(c, i));
    }
    if (rt_check_ref(p, c->y, "conv y", true, c->n == 0, e) != AMPC_OK) return e->status;
    if (c->n == 0) return AMPC_OK; /* an empty batch: nothing to compute */
    int64_t es = (int64_t)rt_dtype_size(c->dtype), nx, ny, nw, nb = c->c_out;
    /* ConvTranspose weights are [C_in, C_out/groups, k...] as in ONNX; Conv's [C_out, C_in/g, k...] */
    int64_t w0 = c->transpose ? c->c_in : c->c_out;
    int64_t w1 = (c->transpose ? c->c_out : c->c_in) / c->groups;
    if (!count_ok(c->n, c->c_in, c->in, c->spatial, &nx) ||
        !count_ok(c->n, c->c_out, c->out, c->spatial, &ny) ||
        !count_ok(w0, w1, c->kernel, c->spatial, &nw))
        return rt_fail(e, AMPC_E_UNSUPPORTED, "%s tensors above 2^31 elements: cuDNN's limit",
                       kind);
    if (rt_check_ref(p, c->x, "conv x", false, false, e) ||
        rt_check_ref_size(c->x, "conv x", nx * es, es, e) ||
        rt_check_ref(p, c->w, "conv w", false, false, e) ||
        rt_check_ref_size(c->w, "conv w", nw * es, es, e) ||
        rt_check_ref_size(c->y, "conv y", ny * es, es, e))
        return e->status;
    if (c->has_bias && (rt_check_ref(p, c->bias, "conv bias", false, false, e) ||
                        rt_check_ref_size(c->bias, "conv bias", nb * es, es, e)))
        return e->status;
    if (c->has_residual && (rt_check_ref(p, c->z, "conv residual z", false, false, e) ||
                            rt_check_ref_size(c->z, "conv residual z", ny * es, es, e)))
        return e->status;
    if (ctx != NULL) return rt_lib_open(&rt_cudnn_lib, e);
    return AMPC_OK;
}

/* ---- planning and launching -------------------------------------------------------------------- */

typedef struct dnn_graph dnn_graph;

typedef struct conv_state {
    bool noop, fused, fused_proven; /* fused_proven: the fused call has succeeded once */
    dnn_graph *graph;      /* the graph API's plan when it won the timing (see graph_plan) */
    const ampc_rt_conv *c; /* the model's copy of the step */
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnActivationDescriptor_t ad;
    int algo;                  /* cudnnConvolutionFwdAlgo_t or cudnnConvolutionBwdDataAlgo_t */
    size_t ws;                 /* the chosen algorithm's workspace */
    const void *x, *w, *bias, *z;
    void *y;
    union {
        float f;
        double d;
    } one, zero;
} conv_state;

static cudnnDataType_t dnn_type(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_F16: return CUDNN_DATA_HALF;
    case AMPC_DTYPE_BF16: return CUDNN_DATA_BFLOAT16;
    case AMPC_DTYPE_F64: return CUDNN_DATA_DOUBLE;
    default: return CUDNN_DATA_FLOAT;
    }
}

/* Dims and strides of an n x ch x spatial tensor, 1-D lifted to N x C x 1 x W (cuDNN wants 4
 * dims or more): packed NC(D)HW, or N(D)HWC when channels_last. Returns the rank. */
static int layout(int64_t n, int64_t ch, const int64_t *sp, int spatial, bool channels_last,
                  int64_t *dims, int64_t *strides) {
    int nd = spatial == 1 ? 4 : spatial + 2;
    dims[0] = n;
    dims[1] = ch;
    if (spatial == 1) {
        dims[2] = 1;
        dims[3] = sp[0];
    } else {
        for (int i = 0; i < spatial; i++) dims[2 + i] = sp[i];
    }
    strides[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
    if (channels_last) { /* C innermost, then the spatial dims, then N */
        strides[1] = 1;
        strides[nd - 1] = dims[1];
        for (int i = nd - 2; i >= 2; i--) strides[i] = strides[i + 1] * dims[i + 1];
        strides[0] = strides[2] * dims[2];
    }
    return nd;
}

/* A legacy tensor descriptor of that layout (conv_supports keeps every count below 2^31). */
static ampc_status tensor_desc(cudnnTensorDescriptor_t *d, cudnnDataType_t t, int64_t n, int64_t ch,
                               const int64_t *sp, int spatial, bool channels_last, rt_err *e) {
    int64_t dims64[5], strides64[5];
    int dims[5], strides[5], nd = layout(n, ch, sp, spatial, channels_last, dims64, strides64);
    for (int i = 0; i < nd; i++) dims[i] = (int)dims64[i], strides[i] = (int)strides64[i];
    RT_CUDNN(e, dnn.cudnnCreateTensorDescriptor(d));
    RT_CUDNN(e, dnn.cudnnSetTensorNdDescriptor(*d, t, nd, dims, strides));
    return AMPC_OK;
}

/* Spatial parameters in cuDNN's order, 1-D lifted to 2-D with a unit H dimension. */
static int lift(const int64_t *v, int spatial, int64_t pad1, int *out) {
    if (spatial == 1) {
        out[0] = (int)pad1;
        out[1] = (int)v[0];
        return 2;
    }
    for (int i = 0; i < spatial; i++) out[i] = (int)v[i];
    return spatial;
}

/* The math type this step allows: f32 without TF32 must stay on FMA units. */
static cudnnMathType_t want_math(const ampc_rt_conv *c) {
    if (c->dtype == AMPC_DTYPE_F16 || c->dtype == AMPC_DTYPE_BF16) return CUDNN_TENSOR_OP_MATH;
    if (c->dtype == AMPC_DTYPE_F32 && c->math != AMPC_RT_MATH_TF32) return CUDNN_FMA_MATH;
    return CUDNN_DEFAULT_MATH;
}


/* cudnnFind times each candidate once, and one timing picks differently from run to run (the
 * spread showed in the benchmarks). The search runs FIND_ROUNDS times; a candidate (algorithm and
 * math type) that succeeded in every round with the smallest total time wins. Never taken: the
 * candidates that convert f32 operands to lower precision on the fly, and those that compute
 * through an FFT (fft_algo). */
enum { FIND_ROUNDS = 3, FIND_KEYS = 64 };

/* Whether legacy algorithm `algo` (forward, or backward data for a ConvTranspose) computes
 * through an FFT: its rounding spreads over the whole output, so an element that is exactly 0
 * comes out near 1e-6 of the largest (the ONNX test test_convtranspose_3d, whose integer data
 * sum exactly in any order, gave 8.1e-6 for a 0 on an H100): not the model's numbers, so never
 * taken. */
static bool fft_algo(bool transpose, int algo) {
    return transpose ? algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
                           algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING
                     : algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
                           algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING;
}

typedef struct algo_tally {
    double total[FIND_KEYS];
    int seen[FIND_KEYS];
} algo_tally;

static void tally(algo_tally *t, bool transpose, int algo, cudnnStatus_t status, float ms,
                  cudnnMathType_t math) {
    int key = algo * 4 + (int)math;
    if (status != CUDNN_STATUS_SUCCESS || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || key < 0 ||
        key >= FIND_KEYS || fft_algo(transpose, algo))
        return;
    t->total[key] += ms;
    t->seen[key]++;
}

/* The winning key (algorithm * 4 + math type), or -1. */
static int tally_best(const algo_tally *t) {
    int best = -1;
    for (int k = 0; k < FIND_KEYS; k++)
        if (t->seen[k] == FIND_ROUNDS && (best < 0 || t->total[k] < t->total[best])) best = k;
    return best;
}

static ampc_status graph_choose(rt_ctx *ctx, conv_state *st, size_t *workspace, rt_err *e);
static bool graph_take(rt_ctx *ctx, conv_state *st, char mode, int index, size_t *workspace);
static void graph_place(const conv_state *st, char *mode, int *index);

/* ---- the tuning cache (runtime/tune_cache.c) ---------------------------------------------- */

enum { TUNE_KEY = 512 };

/* A step's choice: the legacy algorithm and math type, and the graph API's engine configuration
 * (heuristics mode 'A' or 'F' and place in its list) or '-' for the legacy calls. */
typedef struct conv_choice {
    int algo, math, index;
    char mode;
} conv_choice;

/* The cache key of convolution c on this GPU with this cuDNN: every field that decides the
 * choice. */
static void conv_key(const rt_ctx *ctx, const ampc_rt_conv *c, char *key, size_t n) {
    const int64_t *v[7] = {c->in, c->out, c->kernel, c->stride, c->dilation, c->pad_begin, c->pad_end};
    int w = snprintf(key, n, "cuDNN %lld|%s sm%d|conv%s %s n%lld c%lld>%lld g%lld",
                     (long long)rt_cudnn_lib.version, ctx->dev.name, ctx->dev.sm,
                     c->transpose ? "T" : "", rt_dtype_name(c->dtype), (long long)c->n,
                     (long long)c->c_in, (long long)c->c_out, (long long)c->groups);
    for (int f = 0; f < 7 && w > 0 && (size_t)w < n; f++)
        for (int i = 0; i < c->spatial && w > 0 && (size_t)w < n; i++)
            w += snprintf(key + w, n - (size_t)w, "%c%lld", i ? 'x' : ' ', (long long)v[f][i]);
    if (w > 0 && (size_t)w < n)
        snprintf(key + w, n - (size_t)w, "%s%s%s%s math%d%s %s", c->channels_last ? " nhwc" : "",
                 c->has_bias ? " bias" : "", c->has_residual ? " z" : "", c->relu ? " relu" : "",
                 (int)c->math, c->transpose ? " out-pad" : "", rt_tune_mode(ctx));
}

static bool choice_parse(const char *val, conv_choice *ch) {
    char mode = 0;
    int algo, math, index, used = 0;
    if (sscanf(val, "algo=%d math=%d graph=%c%n", &algo, &math, &mode, &used) != 3 || algo < 0 ||
        math < 0 || math > 3 || (mode != '-' && mode != 'A' && mode != 'B' && mode != 'F'))
        return false;
    index = 0;
    if (mode != '-' && (sscanf(val + used, "%d", &index) != 1 || index < 0)) return false;
    *ch = (conv_choice){algo, math, index, mode};
    return true;
}

/* Whether the cached algorithm still plans for st (its workspace size can be asked): an entry
 * from another cuDNN build, or a hand-edited one, goes back to the search. f32 without TF32
 * never takes a tensor-op math type. */
static bool choice_runs(cudnnHandle_t h, conv_state *st, const conv_choice *ch,
                        cudnnMathType_t want) {
    if (want == CUDNN_FMA_MATH && ch->math != CUDNN_FMA_MATH && ch->math != CUDNN_DEFAULT_MATH)
        return false;
    if (ch->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || fft_algo(st->c->transpose, ch->algo))
        return false;
    size_t ws = 0;
    if (!st->c->transpose)
        return dnn.cudnnGetConvolutionForwardWorkspaceSize(
                   h, st->xd, st->wd, st->cd, st->yd,
                   (cudnnConvolutionFwdAlgo_t)ch->algo, &ws) == CUDNN_STATUS_SUCCESS;
    return dnn.cudnnGetConvolutionBackwardDataWorkspaceSize(
               h, st->wd, st->xd, st->cd, st->yd,
               (cudnnConvolutionBwdDataAlgo_t)ch->algo, &ws) == CUDNN_STATUS_SUCCESS;
}

/* Searches the legacy algorithms on the step's real buffers (contents do not matter at
 * creation), FIND_ROUNDS times over (see tally): ch->algo and ch->math. */
static ampc_status legacy_search(rt_ctx *ctx, conv_state *st, conv_choice *ch, rt_err *e) {
    const ampc_rt_conv *c = st->c;
    cudnnHandle_t h = ctx->cudnn;
    if (rt_plan_scratch(ctx, 0, e) != AMPC_OK) return e->status;
    int max = 0, count = 0;
    algo_tally tl;
    memset(&tl, 0, sizeof tl);
    for (int round = 0; round < FIND_ROUNDS; round++) {
        if (!c->transpose) {
            RT_CUDNN(e, dnn.cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
            cudnnConvolutionFwdAlgoPerf_t res[32];
            if (max > 32) max = 32;
            RT_CUDNN(e, dnn.cudnnFindConvolutionForwardAlgorithmEx(h, st->xd, st->x, st->wd, st->w,
                                                                   st->cd, st->yd, st->y, max,
                                                                   &count, res, ctx->scratch,
                                                                   ctx->scratch_bytes));
            for (int i = 0; i < count; i++)
                tally(&tl, false, (int)res[i].algo, res[i].status, res[i].time, res[i].mathType);
        } else {
            RT_CUDNN(e, dnn.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
            cudnnConvolutionBwdDataAlgoPerf_t res[32];
            if (max > 32) max = 32;
            RT_CUDNN(e, dnn.cudnnFindConvolutionBackwardDataAlgorithmEx(
                            h, st->wd, st->w, st->xd, st->x, st->cd, st->yd, st->y, max, &count,
                            res, ctx->scratch, ctx->scratch_bytes));
            for (int i = 0; i < count; i++)
                tally(&tl, true, (int)res[i].algo, res[i].status, res[i].time, res[i].mathType);
        }
    }
    const int found = tally_best(&tl);
    if (found < 0)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "cuDNN found no algorithm for this %s%s (%s, %d "
                       "candidates tried, %zu bytes of workspace allowed)",
                       c->transpose ? "ConvTranspose" : "convolution",
                       c->groups > 1 ? " (grouped)" : "", rt_dtype_name(c->dtype), count,
                       ctx->scratch_bytes);
    ch->algo = found / 4;
    ch->math = found % 4;
    return AMPC_OK;
}


static ampc_status conv_plan(rt_ctx *ctx, const ampc_rt_step *s, void **state, size_t *workspace,
                             rt_err *e) {
    const ampc_rt_conv *c = &s->conv;
    *workspace = 0;
    conv_state *st = calloc(1, sizeof *st);
    if (st == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    *state = st;
    st->c = c;
    if (c->n == 0) {
        st->noop = true;
        return AMPC_OK;
    }
    if (ctx->cudnn == NULL) {
        cudnnHandle_t h = NULL;
        RT_CUDNN(e, dnn.cudnnCreate(&h));
        ctx->cudnn = h;
    }
    cudnnHandle_t h = ctx->cudnn;
    RT_CUDNN(e, dnn.cudnnSetStream(h, ctx->plan_stream));
    cudnnDataType_t t = dnn_type(c->dtype);
    bool f64 = c->dtype == AMPC_DTYPE_F64;
    if (f64) {
        st->one.d = 1.0;
        st->zero.d = 0.0;
    } else {
        st->one.f = 1.0f;
        st->zero.f = 0.0f;
    }
    bool cl = c->channels_last;
    if (tensor_desc(&st->xd, t, c->n, c->c_in, c->in, c->spatial, cl, e) ||
        tensor_desc(&st->yd, t, c->n, c->c_out, c->out, c->spatial, cl, e))
        return e->status;
    int64_t ones[3] = {1, 1, 1};
    if (c->has_bias && tensor_desc(&st->bd, t, 1, c->c_out, ones, c->spatial, false, e))
        return e->status;

    int fdims[5], nd;
    fdims[0] = (int)(c->transpose ? c->c_in : c->c_out);
    fdims[1] = (int)((c->transpose ? c->c_out : c->c_in) / c->groups);
    nd = 2 + lift(c->kernel, c->spatial, 1, fdims + 2);
    RT_CUDNN(e, dnn.cudnnCreateFilterDescriptor(&st->wd));
    RT_CUDNN(e, dnn.cudnnSetFilterNdDescriptor(st->wd, t, cl ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                               nd, fdims));

    int pad[3], stride[3], dil[3];
    int ns = lift(c->pad_begin, c->spatial, 0, pad);
    lift(c->stride, c->spatial, 1, stride);
    lift(c->dilation, c->spatial, 1, dil);
    RT_CUDNN(e, dnn.cudnnCreateConvolutionDescriptor(&st->cd));
    RT_CUDNN(e, dnn.cudnnSetConvolutionNdDescriptor(st->cd, ns, pad, stride, dil,
                                                    CUDNN_CROSS_CORRELATION,
                                                    f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
    RT_CUDNN(e, dnn.cudnnSetConvolutionGroupCount(st->cd, (int)c->groups));
    cudnnMathType_t math = want_math(c);
    RT_CUDNN(e, dnn.cudnnSetConvolutionMathType(st->cd, math));

    /* cuDNN's own output dims must be the plan's (for a transpose: the forward conv of y gives x) */
    int got[5], nd_t = c->spatial == 1 ? 4 : c->spatial + 2;
    RT_CUDNN(e, dnn.cudnnGetConvolutionNdForwardOutputDim(st->cd, c->transpose ? st->yd : st->xd,
                                                          st->wd, nd_t, got));
    int64_t want_c = c->transpose ? c->c_in : c->c_out;
    const int64_t *want_sp = c->transpose ? c->in : c->out;
    bool same = got[0] == c->n && got[1] == want_c;
    for (int i = 0; i < c->spatial; i++) same = same && got[nd_t - c->spatial + i] == want_sp[i];
    if (!same)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "cuDNN computes %s dims [%d, %d, %d, %d%s] for this "
                       "convolution, which differ from the plan's", c->transpose ? "input" : "output",
                       got[0], got[1], got[2], got[3], nd_t == 5 ? ", ..." : "");

    st->x = rt_ref_ptr(ctx, c->x);
    st->w = rt_ref_ptr(ctx, c->w);
    st->y = rt_ref_ptr(ctx, c->y);
    st->bias = c->has_bias ? rt_ref_ptr(ctx, c->bias) : NULL;
    st->z = c->has_residual ? rt_ref_ptr(ctx, c->z) : NULL;
    st->fused = !c->transpose && c->has_bias && c->relu && c->dtype != AMPC_DTYPE_F64;
    if (c->relu || st->fused) {
        RT_CUDNN(e, dnn.cudnnCreateActivationDescriptor(&st->ad));
        RT_CUDNN(e, dnn.cudnnSetActivationDescriptor(st->ad, CUDNN_ACTIVATION_RELU,
                                                     CUDNN_PROPAGATE_NAN, 0.0));
    }

    /* The algorithm: the tuning cache's, else searched (and the graph API timed) and recorded */
    char key[TUNE_KEY], val[64];
    conv_key(ctx, c, key, sizeof key);
    const bool cache = ctx->opts->cudnn_graph == -1; /* a forced choice is not a tuned one */
    conv_choice ch = {.mode = '-'};
    const bool hit = cache && rt_tune_get(key, val, sizeof val) && choice_parse(val, &ch) &&
                     choice_runs(h, st, &ch, math);
    if (!hit && legacy_search(ctx, st, &ch, e) != AMPC_OK) return e->status;
    st->algo = ch.algo;
    cudnnMathType_t chosen_math = (cudnnMathType_t)ch.math;
    /* f32 without TF32 stays on FMA whatever the candidate said; otherwise use its math type */
    if (math != CUDNN_FMA_MATH) RT_CUDNN(e, dnn.cudnnSetConvolutionMathType(st->cd, chosen_math));
    if (!c->transpose)
        RT_CUDNN(e, dnn.cudnnGetConvolutionForwardWorkspaceSize(
                        h, st->xd, st->wd, st->cd, st->yd, (cudnnConvolutionFwdAlgo_t)st->algo,
                        &st->ws));
    else
        RT_CUDNN(e, dnn.cudnnGetConvolutionBackwardDataWorkspaceSize(
                        h, st->wd, st->xd, st->cd, st->yd,
                        (cudnnConvolutionBwdDataAlgo_t)st->algo, &st->ws));
    *workspace = st->ws;
    if (hit && ch.mode != '-' && rt_plan_scratch(ctx, 0, e) != AMPC_OK) return e->status;
    if (hit && (ch.mode == '-' || graph_take(ctx, st, ch.mode, ch.index, workspace)))
        return AMPC_OK;
    if (graph_choose(ctx, st, workspace, e) != AMPC_OK) return e->status;
    if (cache) {
        graph_place(st, &ch.mode, &ch.index);
        snprintf(val, sizeof val, "algo=%d math=%d graph=%c%d", ch.algo, ch.math, ch.mode, ch.index);
        rt_tune_put(key, val);
    }
    return AMPC_OK;
}

/* y = relu(conv(x, w) + alpha2 * z + bias) in one call; without a residual z is y with
 * alpha2 = 0. cuDNN takes this form for f32 always, for f16 and bf16 in some configurations
 * only: the first launch (when model creation proves the step, before any graph capture) learns
 * which, and a configuration cuDNN refuses falls back to the separate calls for good. Returns
 * true when the step is done (e says how it went), false to run the separate calls. */
static bool fused_launch(conv_state *st, cudnnHandle_t h, rt_ctx *ctx, rt_err *e) {
    const ampc_rt_conv *c = st->c;
    cudnnStatus_t rc = dnn.cudnnConvolutionBiasActivationForward(
        h, &st->one, st->xd, st->x, st->wd, st->w, st->cd, (cudnnConvolutionFwdAlgo_t)st->algo,
        ctx->workspace, ctx->workspace_bytes,
        c->has_residual ? (const void *)&st->one : (const void *)&st->zero, st->yd,
        c->has_residual ? st->z : st->y, st->bd, st->bias, st->ad, st->yd, st->y);
    if (rc == CUDNN_STATUS_SUCCESS) {
        st->fused_proven = true;
        cudaError_t le = cudaGetLastError();
        if (le != cudaSuccess)
            rt_fail_cuda(e, le, "cudaGetLastError()", __func__, __FILE__, __LINE__);
        return true;
    }
    if (st->fused_proven || c->dtype == AMPC_DTYPE_F32) {
        rt_fail_cudnn(e, rc, "cudnnConvolutionBiasActivationForward(...)", __func__, __FILE__,
                      __LINE__);
        return true;
    }
    st->fused = false;
    return false;
}

/* The step through the legacy API: one fused call or the convolution and then the epilogue. */
static ampc_status legacy_launch(conv_state *st, rt_ctx *ctx, cudaStream_t stream, rt_err *e) {
    const ampc_rt_conv *c = st->c;
    cudnnHandle_t h = ctx->cudnn;
    RT_CUDNN(e, dnn.cudnnSetStream(h, stream));
    if (c->transpose) {
        RT_CUDNN(e, dnn.cudnnConvolutionBackwardData(h, &st->one, st->wd, st->w, st->xd, st->x,
                                                     st->cd, (cudnnConvolutionBwdDataAlgo_t)st->algo,
                                                     ctx->workspace, ctx->workspace_bytes,
                                                     &st->zero, st->yd, st->y));
    } else if (st->fused && fused_launch(st, h, ctx, e)) {
        return e->status;
    } else {
        RT_CUDNN(e, dnn.cudnnConvolutionForward(h, &st->one, st->xd, st->x, st->wd, st->w, st->cd,
                                                (cudnnConvolutionFwdAlgo_t)st->algo,
                                                ctx->workspace, ctx->workspace_bytes, &st->zero,
                                                st->yd, st->y));
    }
    if (c->has_residual)
        RT_CUDNN(e, dnn.cudnnAddTensor(h, &st->one, st->yd, st->z, &st->one, st->yd, st->y));
    if (c->has_bias)
        RT_CUDNN(e, dnn.cudnnAddTensor(h, &st->one, st->bd, st->bias, &st->one, st->yd, st->y));
    if (c->relu)
        RT_CUDNN(e, dnn.cudnnActivationForward(h, st->ad, &st->one, st->yd, st->y, &st->zero,
                                               st->yd, st->y));
    RT_LAUNCH_CHECK(e);
    return AMPC_OK;
}

/* ---- the graph API --------------------------------------------------------------------------- */

/* The legacy API runs the bias, residual and ReLU of an f16 or bf16 convolution as separate calls
 * (cuDNN refuses the fused call in most such configurations) and chooses among prebuilt kernels
 * only. The graph API takes the whole step as one operation graph, conv -> + bias -> + residual
 * -> ReLU, with float intermediates that never reach memory, and its engines include
 * runtime-fusion kernels that apply the epilogue in registers (channels-last f16/bf16). For each
 * such step graph_choose builds that graph, times the engine configurations cuDNN's heuristics
 * offer (the least of GRAPH_BATCHES batches of GRAPH_ROUNDS runs each, each run timed alone
 * behind an L2 flush by rt_time_calls, on the model's buffers and the planning scratch), times the
 * legacy calls the same way, and keeps the faster. AMPC_CUDNN_GRAPH=0 keeps the legacy calls;
 * AMPC_CUDNN_VERBOSE=1 prints both timings per convolution; AMPC_CUDNN_TRIES=N (at most
 * GRAPH_MAX_CFGS) times N configurations instead of GRAPH_MAX_TRIES, AMPC_CUDNN_HEUR=B also N
 * of heuristics mode B's (docs/libraries.md has what they gave). */

enum { GRAPH_MAX_DESCS = 32, GRAPH_MAX_CFGS = 32, GRAPH_MAX_TRIES = 8, GRAPH_ROUNDS = 3,
       GRAPH_BATCHES = 3 };
enum { UID_X = 1, UID_W, UID_Y, UID_B, UID_Z, UID_VIRTUAL = 100 };

struct dnn_graph {
    cudnnBackendDescriptor_t descs[GRAPH_MAX_DESCS]; /* what the plan was built from */
    int n_descs;
    cudnnBackendDescriptor_t cfg, plan, pack;      /* the chosen engine configuration... */
    char mode;                                     /* ...its heuristics mode ('A', 'B', 'F') */
    int index;                                     /* and place in that mode's list */
    void *pack_ws;                                 /* the workspace the pack was built with */
    int64_t uids[5];
    void *ptrs[5];
    int n_ptrs;
    size_t ws;
};

/* The cudnn_verbose option 2 (AMPC_CUDNN_VERBOSE=2): every stage of the graph API's planning,
 * to the log. */
static void gtrace(const rt_ctx *ctx, const char *fmt, long long a, long long b) {
    if (ctx->opts->cudnn_verbose != 2) return;
    char what[256];
    snprintf(what, sizeof what, fmt, a, b);
    rt_log("cuDNN graph API: %s", what);
}

#define GSET(d, name, type, n, ptr)                                                                \
    (dnn.cudnnBackendSetAttribute((d), (name), (type), (n), (ptr)) == CUDNN_STATUS_SUCCESS)
#define GFIN(d) (dnn.cudnnBackendFinalize(d) == CUDNN_STATUS_SUCCESS)

static void graph_free(dnn_graph *g) {
    if (g == NULL) return;
    if (g->pack) dnn.cudnnBackendDestroyDescriptor(g->pack);
    if (g->plan) dnn.cudnnBackendDestroyDescriptor(g->plan);
    if (g->cfg) dnn.cudnnBackendDestroyDescriptor(g->cfg);
    for (int i = g->n_descs - 1; i >= 0; i--) dnn.cudnnBackendDestroyDescriptor(g->descs[i]);
    free(g);
}

/* A descriptor that g owns; NULL when cuDNN makes none. */
static cudnnBackendDescriptor_t gdesc(dnn_graph *g, cudnnBackendDescriptorType_t t) {
    cudnnBackendDescriptor_t d = NULL;
    if (g->n_descs == GRAPH_MAX_DESCS ||
        dnn.cudnnBackendCreateDescriptor(t, &d) != CUDNN_STATUS_SUCCESS)
        return NULL;
    g->descs[g->n_descs++] = d;
    return d;
}

static cudnnBackendDescriptor_t gtensor(dnn_graph *g, int64_t uid, cudnnDataType_t t, int nd,
                                        const int64_t *dims, const int64_t *strides, bool virt) {
    cudnnBackendDescriptor_t d = gdesc(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t align = 16; /* ampc places every buffer at a 256-byte boundary */
    if (d && GSET(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t) &&
        GSET(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims) &&
        GSET(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides) &&
        GSET(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) &&
        GSET(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) &&
        GSET(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt) && GFIN(d))
        return d;
    return NULL;
}

/* y = mode(x[, b]) with float math. */
static cudnnBackendDescriptor_t gpointwise(dnn_graph *g, cudnnPointwiseMode_t mode,
                                           cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                           cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t pw = gdesc(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    if (!pw || !x || !y ||
        !GSET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) ||
        !GSET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) || !GFIN(pw))
        return NULL;
    cudnnBackendDescriptor_t op = gdesc(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    if (op && GSET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, D, 1, &pw) &&
        GSET(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, D, 1, &x) &&
        (b == NULL || GSET(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, D, 1, &b)) &&
        GSET(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, D, 1, &y) && GFIN(op))
        return op;
    return NULL;
}

/* The forward convolution x * w -> y. */
static cudnnBackendDescriptor_t gconv(dnn_graph *g, const ampc_rt_conv *c,
                                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t w,
                                      cudnnBackendDescriptor_t y) {
    int p[3], s[3], d[3];
    int ns = lift(c->pad_begin, c->spatial, 0, p);
    lift(c->stride, c->spatial, 1, s);
    lift(c->dilation, c->spatial, 1, d);
    int64_t pad[3], stride[3], dil[3], n = ns;
    for (int i = 0; i < ns; i++) pad[i] = p[i], stride[i] = s[i], dil[i] = d[i];
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnBackendDescriptor_t cd = gdesc(g, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    if (!cd || !x || !w || !y ||
        !GSET(cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp) ||
        !GSET(cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode) ||
        !GSET(cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &n) ||
        !GSET(cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, n, dil) ||
        !GSET(cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, n, stride) ||
        !GSET(cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, n, pad) ||
        !GSET(cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, n, pad) || !GFIN(cd))
        return NULL;
    float one = 1.0f, zero = 0.0f;
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    cudnnBackendDescriptor_t op = gdesc(g, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    if (op && GSET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, D, 1, &x) &&
        GSET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, D, 1, &w) &&
        GSET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, D, 1, &y) &&
        GSET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, D, 1, &cd) &&
        GSET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one) &&
        GSET(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero) &&
        GFIN(op))
        return op;
    return NULL;
}

/* The operation graph of step c: conv, then + bias, + residual and ReLU as the step has them,
 * each intermediate a virtual float tensor. NULL when cuDNN refuses a piece. */
static cudnnBackendDescriptor_t graph_build(dnn_graph *g, const conv_state *st, cudnnHandle_t h) {
    const ampc_rt_conv *c = st->c;
    cudnnDataType_t t = dnn_type(c->dtype), f = CUDNN_DATA_FLOAT;
    bool cl = c->channels_last;
    int64_t xd[5], xs[5], wd[5], ws[5], yd[5], ys[5], bd[5], bs[5], ones[3] = {1, 1, 1};
    int nd = layout(c->n, c->c_in, c->in, c->spatial, cl, xd, xs);
    layout(c->c_out, c->c_in / c->groups, c->kernel, c->spatial, cl, wd, ws);
    layout(c->n, c->c_out, c->out, c->spatial, cl, yd, ys);
    layout(1, c->c_out, ones, c->spatial, cl, bd, bs);
    int n_epi = (int)c->has_bias + (int)c->has_residual + (int)c->relu;
    int64_t uid = UID_VIRTUAL;
    /* the tensor an operation writes: y for the last one, a virtual float tensor otherwise */
#define NEXT()                                                                                     \
    (n_epi-- == 0 ? gtensor(g, UID_Y, t, nd, yd, ys, false) : gtensor(g, uid++, f, nd, yd, ys, true))
    cudnnBackendDescriptor_t ops[4];
    int n_ops = 0;
    cudnnBackendDescriptor_t cur = NEXT();
    ops[n_ops++] = gconv(g, c, gtensor(g, UID_X, t, nd, xd, xs, false),
                         gtensor(g, UID_W, t, nd, wd, ws, false), cur);
    g->uids[0] = UID_X, g->ptrs[0] = (void *)st->x;
    g->uids[1] = UID_W, g->ptrs[1] = (void *)st->w;
    g->uids[2] = UID_Y, g->ptrs[2] = st->y;
    g->n_ptrs = 3;
    if (c->has_residual) { /* the legacy calls' order: residual, then bias */
        cudnnBackendDescriptor_t next = NEXT();
        ops[n_ops++] = gpointwise(g, CUDNN_POINTWISE_ADD, cur,
                                  gtensor(g, UID_Z, t, nd, yd, ys, false), next);
        cur = next;
        g->uids[g->n_ptrs] = UID_Z, g->ptrs[g->n_ptrs++] = (void *)st->z;
    }
    if (c->has_bias) {
        cudnnBackendDescriptor_t next = NEXT();
        ops[n_ops++] = gpointwise(g, CUDNN_POINTWISE_ADD, cur,
                                  gtensor(g, UID_B, t, nd, bd, bs, false), next);
        cur = next;
        g->uids[g->n_ptrs] = UID_B, g->ptrs[g->n_ptrs++] = (void *)st->bias;
    }
    if (c->relu) ops[n_ops++] = gpointwise(g, CUDNN_POINTWISE_RELU_FWD, cur, NULL, NEXT());
#undef NEXT
    for (int i = 0; i < n_ops; i++)
        if (ops[i] == NULL) return NULL;
    cudnnBackendDescriptor_t og = gdesc(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (og && GSET(og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_ops, ops) &&
        GSET(og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) && GFIN(og))
        return og;
    return NULL;
}

/* A finalized variant pack binding g's buffers and the workspace ws; NULL when refused. */
static cudnnBackendDescriptor_t graph_pack(const dnn_graph *g, void *ws) {
    cudnnBackendDescriptor_t p = NULL;
    if (dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &p) !=
        CUDNN_STATUS_SUCCESS)
        return NULL;
    if (GSET(p, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, g->n_ptrs, g->uids) &&
        GSET(p, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, g->n_ptrs, g->ptrs) &&
        GSET(p, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws) && GFIN(p))
        return p;
    dnn.cudnnBackendDestroyDescriptor(p);
    return NULL;
}

static ampc_status graph_launch(conv_state *st, rt_ctx *ctx, cudaStream_t stream, rt_err *e) {
    dnn_graph *g = st->graph;
    if (g->pack == NULL || g->pack_ws != ctx->workspace) {
        if (g->pack) dnn.cudnnBackendDestroyDescriptor(g->pack);
        g->pack = graph_pack(g, ctx->workspace);
        g->pack_ws = ctx->workspace;
        if (g->pack == NULL)
            return rt_fail(e, AMPC_E_CUDA, "cuDNN refused the buffers of a convolution it planned");
    }
    cudnnHandle_t h = ctx->cudnn;
    RT_CUDNN(e, dnn.cudnnSetStream(h, stream));
    RT_CUDNN(e, dnn.cudnnBackendExecute(h, g->plan, g->pack));
    RT_LAUNCH_CHECK(e);
    return AMPC_OK;
}

typedef ampc_status (*timed_fn)(conv_state *st, rt_ctx *ctx, cudaStream_t stream, rt_err *e);

/* Milliseconds per run of f: the least over GRAPH_BATCHES batches of GRAPH_ROUNDS runs (each
 * batch after one warm-up, timed by rt_time_calls), with the planning scratch as the workspace;
 * -1 when a run fails (e is then cleared: a candidate that fails is skipped). One batch can
 * catch a clock change or another process's work; the least batch is the candidate's own time. */
typedef struct conv_timed {
    timed_fn f;
    conv_state *st;
    rt_ctx *ctx;
    rt_err e;
} conv_timed;

static bool conv_timed_call(void *arg, cudaStream_t s) {
    conv_timed *t = arg;
    return t->f(t->st, t->ctx, s, &t->e) == AMPC_OK;
}

static float time_runs(timed_fn f, conv_state *st, rt_ctx *ctx) {
    void *ws = ctx->workspace;
    size_t ws_bytes = ctx->workspace_bytes;
    ctx->workspace = ctx->scratch;
    ctx->workspace_bytes = ctx->scratch_bytes;
    conv_timed t = {f, st, ctx, {0}};
    float ms = -1.0f;
    for (int b = 0; b < GRAPH_BATCHES; b++) {
        const float one = rt_time_calls(ctx, conv_timed_call, &t, ctx->plan_stream, GRAPH_ROUNDS);
        if (one < 0) {
            ms = -1.0f;
            break;
        }
        if (ms < 0 || one < ms) ms = one;
    }
    rt_err_clear(&t.e);
    ctx->workspace = ws;
    ctx->workspace_bytes = ws_bytes;
    return ms;
}

/* The engine configurations cuDNN's heuristics offer for og in `mode` (at most GRAPH_MAX_CFGS)
 * into cfgs; returns how many were filled (the caller destroys cfgs[0..*made)). */
static int64_t mode_configs(const rt_ctx *ctx, dnn_graph *g, cudnnBackendDescriptor_t og,
                            cudnnBackendHeurMode_t mode,
                            cudnnBackendDescriptor_t cfgs[GRAPH_MAX_CFGS], int64_t *made) {
    cudnnBackendDescriptor_t heur = gdesc(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    int64_t count = 0, got = 0;
    *made = 0;
    if (!heur ||
        !GSET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og) ||
        !GSET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) || !GFIN(heur) ||
        dnn.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL) !=
            CUDNN_STATUS_SUCCESS)
        return 0;
    gtrace(ctx, "heuristics mode %lld: %lld configurations", (long long)mode, (long long)count);
    if (count > GRAPH_MAX_CFGS) count = GRAPH_MAX_CFGS;
    while (*made < count &&
           dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[*made]) ==
               CUDNN_STATUS_SUCCESS)
        (*made)++;
    if (dnn.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, *made, &got, cfgs) !=
        CUDNN_STATUS_SUCCESS)
        got = 0;
    gtrace(ctx, "%lld configurations made, %lld filled", (long long)*made, (long long)got);
    return got < *made ? got : *made;
}

/* A finalized execution plan of configuration cfg whose workspace (*ws) fits the planning
 * scratch; NULL when cuDNN refuses it. */
static cudnnBackendDescriptor_t plan_of(rt_ctx *ctx, cudnnBackendDescriptor_t cfg, int64_t *ws) {
    cudnnBackendDescriptor_t plan = NULL;
    cudnnHandle_t h = ctx->cudnn;
    int64_t n_ws = 0;
    if (dnn.cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) !=
        CUDNN_STATUS_SUCCESS)
        return NULL;
    *ws = 0;
    bool ok = GSET(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) &&
              GSET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                   1, &cfg) &&
              GFIN(plan) &&
              dnn.cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                           CUDNN_TYPE_INT64, 1, &n_ws, ws) == CUDNN_STATUS_SUCCESS &&
              *ws >= 0 && (size_t)*ws <= ctx->scratch_bytes;
    if (ok) return plan;
    dnn.cudnnBackendDestroyDescriptor(plan);
    return NULL;
}

/* Makes configuration i of cfgs g's plan (g takes cfgs[i]). */
static void graph_keep(dnn_graph *g, cudnnBackendDescriptor_t cfgs[], int64_t i,
                       cudnnBackendDescriptor_t plan, int64_t ws, cudnnBackendHeurMode_t mode) {
    if (g->plan) dnn.cudnnBackendDestroyDescriptor(g->plan);
    if (g->cfg) dnn.cudnnBackendDestroyDescriptor(g->cfg);
    g->plan = plan;
    g->cfg = cfgs[i];
    cfgs[i] = NULL;
    g->ws = (size_t)ws;
    g->mode = mode == CUDNN_HEUR_MODE_A ? 'A' : mode == CUDNN_HEUR_MODE_B ? 'B' : 'F';
    g->index = (int)i;
}

static void free_configs(cudnnBackendDescriptor_t cfgs[], int64_t made) {
    for (int64_t i = 0; i < made; i++)
        if (cfgs[i]) dnn.cudnnBackendDestroyDescriptor(cfgs[i]);
}

/* Tries the engine configurations of one heuristics mode, keeping in g the fastest so far
 * (*best its time); *tried counts the plans that ran. */
static void graph_try_mode(dnn_graph *g, conv_state *st, rt_ctx *ctx,
                           cudnnBackendDescriptor_t og, cudnnBackendHeurMode_t mode, float *best,
                           int *tried, int max_tries) {
    cudnnBackendDescriptor_t cfgs[GRAPH_MAX_CFGS] = {0};
    int64_t made = 0, got = mode_configs(ctx, g, og, mode, cfgs, &made), ws = 0;
    for (int64_t i = 0; i < got && *tried < max_tries; i++) {
        cudnnBackendDescriptor_t plan = plan_of(ctx, cfgs[i], &ws);
        gtrace(ctx, "configuration %lld: plan finalized %lld", (long long)i, (long long)(plan != NULL));
        if (plan == NULL) continue;
        /* time it as g's plan, then put back the best so far */
        cudnnBackendDescriptor_t kept = g->plan;
        g->plan = plan;
        float ms = time_runs(graph_launch, st, ctx);
        gtrace(ctx, "configuration %lld: %lld us", (long long)i, (long long)(ms * 1000));
        if (g->pack) dnn.cudnnBackendDestroyDescriptor(g->pack);
        g->pack = NULL;
        g->plan = kept;
        (*tried)++;
        if (ms >= 0 && (*best < 0 || ms < *best)) {
            graph_keep(g, cfgs, i, plan, ws, mode);
            *best = ms;
        } else {
            dnn.cudnnBackendDestroyDescriptor(plan);
        }
    }
    free_configs(cfgs, made);
}

/* Where st's graph API plan came from ('A' or 'F' and its place in the list), or '-' and 0 when
 * the legacy calls run it. */
static void graph_place(const conv_state *st, char *mode, int *index) {
    *mode = st->graph ? st->graph->mode : '-';
    *index = st->graph ? st->graph->index : 0;
}

/* The graph API's plan of the tuning cache's choice (configuration `index` of heuristics mode
 * `mode`) for st, without timing: true when cuDNN still builds it (st->graph is then set and
 * *workspace grown to its workspace). */
static bool graph_take(rt_ctx *ctx, conv_state *st, char mode, int index, size_t *workspace) {
    dnn_graph *g = calloc(1, sizeof *g);
    if (g == NULL) return false;
    cudnnBackendDescriptor_t og = graph_build(g, st, ctx->cudnn);
    const cudnnBackendHeurMode_t m = mode == 'A'   ? CUDNN_HEUR_MODE_A
                                     : mode == 'B' ? CUDNN_HEUR_MODE_B
                                                   : CUDNN_HEUR_MODE_FALLBACK;
    cudnnBackendDescriptor_t cfgs[GRAPH_MAX_CFGS] = {0};
    int64_t made = 0, got = og ? mode_configs(ctx, g, og, m, cfgs, &made) : 0, ws = 0;
    cudnnBackendDescriptor_t plan = index >= 0 && index < got ? plan_of(ctx, cfgs[index], &ws) : NULL;
    if (plan) graph_keep(g, cfgs, index, plan, ws, m);
    free_configs(cfgs, made);
    if (!plan) {
        graph_free(g);
        return false;
    }
    st->graph = g;
    if (g->ws > *workspace) *workspace = g->ws;
    return true;
}

/* Chooses between the legacy calls and the graph API for a forward f16 or bf16 convolution (see
 * the section comment); *workspace grows to the graph plan's when it wins. Without a graph plan
 * that runs, the legacy calls stay, unless AMPC_CUDNN_GRAPH=1 asks for the graph API (the tests
 * use it to prove that path): then the step fails. */
static ampc_status graph_choose(rt_ctx *ctx, conv_state *st, size_t *workspace, rt_err *e) {
    const ampc_rt_conv *c = st->c;
    bool off = ctx->opts->cudnn_graph == 0, must = ctx->opts->cudnn_graph == 1;
    if (c->transpose || (c->dtype != AMPC_DTYPE_F16 && c->dtype != AMPC_DTYPE_BF16) || off)
        return AMPC_OK;
    dnn_graph *g = calloc(1, sizeof *g);
    if (g == NULL) return rt_fail(e, AMPC_E_OOM, "out of host memory");
    gtrace(ctx, "step of %lld -> %lld channels", (long long)c->c_in, (long long)c->c_out);
    float legacy = time_runs(legacy_launch, st, ctx), best = -1.0f;
    gtrace(ctx, "legacy calls: %lld us (%lld)", (long long)(legacy * 1000), 0);
    int tried = 0;
    cudnnBackendDescriptor_t og = graph_build(g, st, ctx->cudnn);
    gtrace(ctx, "operation graph built: %lld (%lld)", (long long)(og != NULL), 0);
    st->graph = g; /* graph_launch runs st's graph: the candidates are timed through it */
    if (og != NULL) {
        int tries = ctx->opts->cudnn_tries;
        if (tries < 1 || tries > GRAPH_MAX_CFGS) tries = GRAPH_MAX_TRIES;
        graph_try_mode(g, st, ctx, og, CUDNN_HEUR_MODE_A, &best, &tried, tries);
        if (ctx->opts->cudnn_heur_b) { /* mode B's list too, as many again */
            int more = tried + tries;
            graph_try_mode(g, st, ctx, og, CUDNN_HEUR_MODE_B, &best, &tried, more);
        }
        if (g->plan == NULL)
            graph_try_mode(g, st, ctx, og, CUDNN_HEUR_MODE_FALLBACK, &best, &tried, tries);
    }
    bool take = g->plan != NULL && (must || legacy < 0 || best < legacy);
    if (ctx->opts->cudnn_verbose >= 1)
        rt_log("cuDNN %s conv n%lld c%lld->%lld k%lld s%lld%s%s%s%s: legacy %.4f ms, "
               "graph %.4f ms (%d plans ran%s), %s", rt_dtype_name(c->dtype), (long long)c->n,
                (long long)c->c_in, (long long)c->c_out, (long long)c->kernel[0],
                (long long)c->stride[0], c->channels_last ? " nhwc" : "",
                c->has_bias ? " +bias" : "", c->has_residual ? " +z" : "", c->relu ? " relu" : "",
                legacy, best, tried, og == NULL ? ", graph refused" : "",
                take ? "graph" : "legacy");
    if (take) {
        if (g->ws > *workspace) *workspace = g->ws;
        return AMPC_OK;
    }
    st->graph = NULL;
    graph_free(g);
    if (must)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "AMPC_CUDNN_GRAPH=1 asks for cuDNN's graph API, but "
                       "no engine runs this %s convolution%s (%d plans ran)",
                       rt_dtype_name(c->dtype), og == NULL ? " (the operation graph was refused)"
                                                           : "", tried);
    return AMPC_OK;
}


static ampc_status conv_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    conv_state *st = state;
    if (st->noop) return AMPC_OK;
    if (st->graph != NULL) return graph_launch(st, ctx, stream, e);
    return legacy_launch(st, ctx, stream, e);
}

static void conv_release(rt_ctx *ctx, void *state) {
    (void)ctx;
    conv_state *st = state;
    if (st == NULL) return;
    if (st->xd) dnn.cudnnDestroyTensorDescriptor(st->xd);
    if (st->yd) dnn.cudnnDestroyTensorDescriptor(st->yd);
    if (st->bd) dnn.cudnnDestroyTensorDescriptor(st->bd);
    if (st->wd) dnn.cudnnDestroyFilterDescriptor(st->wd);
    if (st->cd) dnn.cudnnDestroyConvolutionDescriptor(st->cd);
    if (st->ad) dnn.cudnnDestroyActivationDescriptor(st->ad);
    graph_free(st->graph);
    free(st);
}

static void conv_close(rt_ctx *ctx) {
    if (ctx->cudnn != NULL) dnn.cudnnDestroy(ctx->cudnn);
    ctx->cudnn = NULL;
}

const rt_provider rt_provider_cudnn = {
    .name = "cuDNN",
    .supports = conv_supports,
    .plan = conv_plan,
    .launch = conv_launch,
    .release = conv_release,
    .close = conv_close,
};
