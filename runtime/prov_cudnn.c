/*
 * prov_cudnn.c — the cuDNN provider: convolution steps (runtime/plan.h's ampc_rt_conv), forward
 * and transposed, 1-D to 3-D, with groups, strides, dilations, bias, residual and ReLU.
 *
 * cuDNN is opened with dlopen on first use (libcudnn.so.9) and its functions bound with dlsym;
 * its headers are used for types only.
 *
 * Why the legacy API (cudnnConvolutionForward and friends) and not cuDNN 9's graph API: the
 * legacy API covers every convolution ONNX has (N-d, groups, dilations, transposed through
 * cudnnConvolutionBackwardData) with a handful of descriptors, its algorithms are chosen by one
 * call, and its failure modes are simple to report. The graph API earns its complexity when
 * ampc fuses more than bias + activation into a convolution (pointwise chains, norms): that is
 * the plan for later, behind this same provider interface. The legacy API is deprecated in
 * cuDNN 9 but still complete; its one limit here is symmetric padding (an asymmetric pad is
 * AMPC_E_UNSUPPORTED, and codegen pads the input first).
 *
 * Planned once per step at model creation: the tensor, filter and convolution descriptors, the
 * algorithm (cudnnFind*AlgorithmEx: each candidate is run once on the model's own buffers in a
 * planning scratch workspace, three times over, and the fastest in total kept: see tally), and the
 * workspace size. Bias + ReLU (with or
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

/* The planning scratch for algorithm searches, and the most any chosen algorithm may keep. */
enum { CONV_SEARCH_BYTES = 256 << 20 };

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
    X(cudnnActivationForward)

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
    .name = "cuDNN", .sonames = dnn_sonames, .min_version = 90000, .bind = dnn_bind};

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

typedef struct conv_state {
    bool noop, fused, fused_proven; /* fused_proven: the fused call has succeeded once */
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

/* A packed NC(D)HW descriptor, or N(D)HWC with strides when channels_last; 1-D tensors become
 * N x C x 1 x W (cuDNN wants 4 dims or more). */
static ampc_status tensor_desc(cudnnTensorDescriptor_t *d, cudnnDataType_t t, int64_t n, int64_t ch,
                               const int64_t *sp, int spatial, bool channels_last, rt_err *e) {
    int dims[5], strides[5], nd = spatial == 1 ? 4 : spatial + 2;
    dims[0] = (int)n;
    dims[1] = (int)ch;
    if (spatial == 1) {
        dims[2] = 1;
        dims[3] = (int)sp[0];
    } else {
        for (int i = 0; i < spatial; i++) dims[2 + i] = (int)sp[i];
    }
    strides[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
    if (channels_last) { /* C innermost, then the spatial dims, then N */
        strides[1] = 1;
        strides[nd - 1] = dims[1];
        for (int i = nd - 2; i >= 2; i--) strides[i] = strides[i + 1] * dims[i + 1];
        strides[0] = strides[2] * dims[2];
    }
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

/* The planning scratch: allocated once per model on first need (freed after planning). */
static ampc_status scratch(rt_ctx *ctx, rt_err *e) {
    if (ctx->scratch != NULL) return AMPC_OK;
    size_t free_b = 0, total = 0;
    RT_CUDA(e, cudaMemGetInfo(&free_b, &total));
    size_t want = CONV_SEARCH_BYTES;
    if (want > free_b / 4) want = free_b / 4;
    want &= ~(size_t)255;
    if (want > 0) RT_CUDA(e, cudaMalloc(&ctx->scratch, want));
    ctx->scratch_bytes = want;
    return AMPC_OK;
}

/* Picks the first (fastest) candidate that ran and keeps to the step's math. */
/* cudnnFind times each candidate once, and one timing picks differently from run to run (the
 * spread showed in the benchmarks). The search runs FIND_ROUNDS times; a candidate (algorithm and
 * math type) that succeeded in every round with the smallest total time wins. Candidates that
 * convert f32 operands to lower precision on the fly are never taken. */
enum { FIND_ROUNDS = 3, FIND_KEYS = 64 };

typedef struct algo_tally {
    double total[FIND_KEYS];
    int seen[FIND_KEYS];
} algo_tally;

static void tally(algo_tally *t, int algo, cudnnStatus_t status, float ms, cudnnMathType_t math) {
    int key = algo * 4 + (int)math;
    if (status != CUDNN_STATUS_SUCCESS || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || key < 0 ||
        key >= FIND_KEYS)
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

    /* Algorithm search on the real buffers (contents do not matter at creation). */
    if (scratch(ctx, e) != AMPC_OK) return e->status;
    int max = 0, count = 0, found = -1;
    cudnnMathType_t chosen_math = math;
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
                tally(&tl, (int)res[i].algo, res[i].status, res[i].time, res[i].mathType);
        } else {
            RT_CUDNN(e, dnn.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
            cudnnConvolutionBwdDataAlgoPerf_t res[32];
            if (max > 32) max = 32;
            RT_CUDNN(e, dnn.cudnnFindConvolutionBackwardDataAlgorithmEx(
                            h, st->wd, st->w, st->xd, st->x, st->cd, st->yd, st->y, max, &count,
                            res, ctx->scratch, ctx->scratch_bytes));
            for (int i = 0; i < count; i++)
                tally(&tl, (int)res[i].algo, res[i].status, res[i].time, res[i].mathType);
        }
    }
    found = tally_best(&tl);
    if (found >= 0) {
        st->algo = found / 4;
        chosen_math = (cudnnMathType_t)(found % 4);
    }
    if (found < 0)
        return rt_fail(e, AMPC_E_UNSUPPORTED, "cuDNN found no algorithm for this %s%s (%s, %d "
                       "candidates tried, %zu bytes of workspace allowed)",
                       c->transpose ? "ConvTranspose" : "convolution",
                       c->groups > 1 ? " (grouped)" : "", rt_dtype_name(c->dtype), count,
                       ctx->scratch_bytes);
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

static ampc_status conv_launch(rt_ctx *ctx, void *state, cudaStream_t stream, rt_err *e) {
    conv_state *st = state;
    if (st->noop) return AMPC_OK;
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
