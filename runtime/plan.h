/*
 * plan.h — the executable plan: everything the runtime needs to run a compiled graph, and
 * nothing else. Codegen (codegen/) produces it; the runtime (runtime/) executes it; the artifact
 * writer (compiler/) serialises it into the generated library.
 *
 * A plan is plain data with no pointers into the IR. Every tensor lives at a byte offset in one
 * of two device buffers: the arena (activations, graph inputs and outputs; one allocation sized
 * arena_bytes) or the weights (constants, uploaded once at load). A run copies the caller's
 * inputs into their arena slots, executes the steps in order on one stream, and copies the
 * outputs out; the steps themselves always see the same addresses, which is what lets the
 * runtime capture them once into a CUDA graph and replay it.
 *
 * Steps are: a generated kernel launch (kernels come from the plan's images: PTX for compute_80
 * that runs on every GPU of compute capability >= 8.0, plus cubins for the architectures
 * compiled), a cuBLASLt matmul, a cuDNN convolution, a device copy, a memset, an all-reduce
 * between GPUs (NCCL), or a jump (a data-dependent Loop: the only step that makes the order
 * other than the steps' own).
 *
 * Multi-GPU (a graph partitioned over N GPUs, docs/multi-gpu.md): the plan of the model has
 * n_ranks = N and `ranks` pointing at N per-rank plans. Rank r's plan is a complete single-GPU
 * plan (its own steps and weights: the replicated ones and rank r's shards; the same images,
 * inputs and outputs as every rank) whose all-reduce steps pair with the other ranks' in order:
 * every rank has the same sequence of all-reduces. The model's own fields repeat rank 0's plan,
 * so a tool that reads one plan reads rank 0's. A single-GPU plan has n_ranks 0 or 1.
 *
 * Data parallelism (split_batch = 1, docs/multi-gpu.md): the ranks split the batch. Every rank's
 * plan is the model compiled for B / N rows (dim 0 of every input and output) and holds no
 * all-reduce; the ranks share one steps array and one weights blob (the same pointers). The
 * model's plan repeats rank 0's fields except its inputs and outputs, which describe the
 * caller's full tensors (dim 0 = B, ref.bytes N times a rank's: their offsets are rank 0's and
 * are not read). Rank r reads rows [r B/N, (r+1) B/N) of every input and writes the same rows of
 * every output.
 *
 * Pipeline parallelism (micro_batches = M >= 1, docs/multi-gpu.md): rank s's plan is stage s of
 * the graph compiled for one micro-batch (B / M rows of every input and output), with its own
 * steps and weights. Its first steps are peer copies (AMPC_RT_STEP_PEER_COPY) of what stage s - 1
 * hands it, read from rank s - 1's arena (every rank has the whole graph's arena layout); rank 0
 * has none, and no rank has an all-reduce. A run sends the micro-batches through the stages in
 * order: every rank copies micro-batch m's rows of every input into its arena, and the last rank
 * gives micro-batch m's rows of every output. The model's plan repeats rank 0's fields except
 * its inputs and outputs, which describe the caller's whole tensors (dim 0 = B, bytes M times a
 * rank's).
 */
#ifndef AMPC_RT_PLAN_H
#define AMPC_RT_PLAN_H

#include "ampc.h"

#include <stdbool.h>
#include <stdint.h>

enum { AMPC_RT_PLAN_VERSION = 8 }; /* 2: all-reduce steps, ranks; 3: split_batch; 4:
                                     ampc_rt_gemm.sparse_kernel; 5: inputs and outputs have
                                     arena bytes no other value shares; 6: pipelines
                                     (micro_batches, peer-copy steps); 7: sparse_kernel becomes
                                     own_kernel, on dense steps too (the GELU epilogue); 8: jumps
                                     (branch steps) */

/* Where a tensor lives. */
typedef enum ampc_rt_space {
    AMPC_RT_ARENA = 0,   /* the per-model device arena */
    AMPC_RT_WEIGHTS = 1, /* the constant blob, read-only */
} ampc_rt_space;

/* A tensor's bytes: [offset, offset + bytes) of a space. A tensor's own offset is a multiple of
 * 256 (the memory plan's alignment); a ref to part of a tensor (a copy of a slice) is aligned to
 * its element size only. */
typedef struct ampc_rt_ref {
    uint8_t space;  /* ampc_rt_space */
    int64_t offset; /* bytes */
    int64_t bytes;
} ampc_rt_ref;

/* One argument of a generated kernel, in the order of the kernel's parameter list. */
typedef enum ampc_rt_arg_kind {
    AMPC_RT_ARG_PTR = 0, /* a device pointer: base of ref.space + ref.offset */
    AMPC_RT_ARG_I32,
    AMPC_RT_ARG_I64,
    AMPC_RT_ARG_F32,
} ampc_rt_arg_kind;

typedef struct ampc_rt_arg {
    uint8_t kind; /* ampc_rt_arg_kind */
    union {
        ampc_rt_ref ref;
        int32_t i32;
        int64_t i64;
        float f32;
    };
} ampc_rt_arg;

typedef struct ampc_rt_kernel {
    int32_t unit;       /* the translation unit holding the kernel (see ampc_rt_image.unit) */
    const char *name;   /* extern "C" name in that unit */
    uint32_t grid[3], block[3];
    uint32_t smem;      /* dynamic shared memory, bytes */
    int32_t n_args;
    const ampc_rt_arg *args;
} ampc_rt_kernel;

/* Matmul through cuBLASLt, row-major view of every operand:
 *   D[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b]  (+ bias[n] broadcast over rows, then the
 *   epilogue activation), for b in [0, batch), op(X) = X^T when trans_x.
 * A is m x k after op (so k x m stored when trans_a), B is k x n after op, C and D are m x n.
 * ld* are row pitches in elements of the stored (pre-op) matrices; stride_* are batch strides in
 * elements (0: the operand is shared by every batch). C may be absent (space 0, bytes 0: beta
 * is ignored); C and D may be the same ref. */
typedef enum ampc_rt_epilogue {
    AMPC_RT_EPI_NONE = 0,
    AMPC_RT_EPI_BIAS,      /* + bias[n] */
    AMPC_RT_EPI_RELU,      /* max(x, 0) */
    AMPC_RT_EPI_BIAS_RELU,
    AMPC_RT_EPI_GELU,      /* erf form (ampc's own kernel only) */
    AMPC_RT_EPI_BIAS_GELU,
    AMPC_RT_EPI_GELU_TANH, /* tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    AMPC_RT_EPI_BIAS_GELU_TANH,
} ampc_rt_epilogue;

/* Epilogue e's name ("BIAS_GELU_TANH"), "?" past the known values. */
static inline const char *ampc_rt_epilogue_name(uint8_t e) {
    static const char *const names[] = {"NONE", "BIAS",      "RELU",      "BIAS_RELU",
                                        "GELU", "BIAS_GELU", "GELU_TANH", "BIAS_GELU_TANH"};
    return e < sizeof names / sizeof *names ? names[e] : "?";
}

/* Whether epilogue e is GELU's tanh form: cuBLASLt's GELU epilogue, no kernel of ampc's. */
static inline bool ampc_rt_epilogue_tanh(uint8_t e) {
    return e == AMPC_RT_EPI_GELU_TANH || e == AMPC_RT_EPI_BIAS_GELU_TANH;
}

typedef enum ampc_rt_math {
    AMPC_RT_MATH_DEFAULT = 0, /* accumulate in f32 (f64 for f64 operands), no TF32 */
    AMPC_RT_MATH_TF32,        /* f32 operands on TF32 tensor cores, f32 accumulation */
} ampc_rt_math;

typedef struct ampc_rt_gemm {
    int64_t m, n, k, batch;
    bool trans_a, trans_b;
    int64_t lda, ldb, ldc, ldd;
    int64_t stride_a, stride_b, stride_c, stride_d;
    ampc_dtype dtype_ab;   /* A and B */
    ampc_dtype dtype_cd;   /* C and D */
    ampc_dtype dtype_bias; /* bias, when the epilogue has one */
    uint8_t math;          /* ampc_rt_math */
    uint8_t epilogue;      /* ampc_rt_epilogue */
    /* 1: B is a constant (weights space) whose every group of 4 consecutive elements along K
     * holds at most 2 non-zeros (the sparsity pass's mark), and batch is 1. The runtime may then
     * run the step on sparse tensor cores (own_kernel below, or cuSPARSELt when present)
     * where that is measured faster; the result is the same product either way. */
    uint8_t sparse24;
    float alpha, beta;
    ampc_rt_ref a, b, c, d, bias;
    /* ampc's own tensor-core kernel for the same product, epilogue included; name NULL when
     * codegen made none. On a sparse24 step, the 2:4 kernel (codegen/sparse_gemm.c; its
     * arguments include the weight compressed at compile time, in the weights space), one more
     * candidate of the runtime's choice at load. Otherwise the dense kernel
     * (codegen/dense_gemm.c): the only way to run a GELU epilogue (cuBLASLt's is the tanh
     * approximation), and elsewhere a candidate timed against cuBLASLt at load. */
    ampc_rt_kernel own_kernel;
} ampc_rt_gemm;

/* Convolution through cuDNN (cross-correlation, as ONNX Conv), NC(D)HW layout, 1 to 3 spatial
 * dims: y = conv(x, w) (+ bias[C_out] broadcast) (+ z when has_residual) then relu when set. */
typedef struct ampc_rt_conv {
    int32_t spatial;                 /* 1, 2 or 3 */
    int64_t n, c_in, c_out, groups;
    int64_t in[3], out[3], kernel[3];
    int64_t stride[3], dilation[3], pad_begin[3], pad_end[3];
    ampc_dtype dtype;
    uint8_t math;                    /* ampc_rt_math */
    bool relu, has_bias, has_residual;
    bool transpose;                  /* ConvTranspose (data gradient form) */
    bool channels_last;              /* x, z, y stored [N, S..., C] and w [M, S..., C/groups] */
    int64_t output_padding[3];
    ampc_rt_ref x, w, bias, z, y;
} ampc_rt_conv;

/* A copy between the GPUs of a pipeline: src.bytes bytes at src in the arena of rank `from`
 * (the previous stage) to dst in this rank's arena (cudaMemcpyPeerAsync). */
typedef struct ampc_rt_peer {
    ampc_rt_ref src, dst;
    int32_t from;
} ampc_rt_peer;

/* An all-reduce over the ranks of a multi-GPU plan (ncclAllReduce, sum): `count` elements of
 * `dtype` at src on each rank, summed, land at dst on every rank. src and dst are arena refs of
 * count elements each; they may be the same (in place) or must not overlap. */
typedef struct ampc_rt_allreduce {
    ampc_rt_ref src, dst;
    ampc_dtype dtype;
    int64_t count;
} ampc_rt_allreduce;

/* A copy within this rank's memory: src.bytes bytes from src to dst (cudaMemcpyAsync). */
typedef struct ampc_rt_copy {
    ampc_rt_ref src, dst;
} ampc_rt_copy;

/* dst set to zero bytes (cudaMemsetAsync). */
typedef struct ampc_rt_memset {
    ampc_rt_ref dst;
} ampc_rt_memset;

/* A jump: a Loop whose stop depends on data (codegen/lower_control.c) runs its body's steps
 * again while it goes on. Once the steps before it have finished, the runtime reads the int32 at
 * flag (arena); when (flag != 0) == jump_if_set the next step is `target` (0 .. n_steps; n_steps
 * ends the run), else the one after this. A backward jump (target <= this step) is taken at most
 * limit - 1 times in a row, so that the loop runs at most `limit` iterations: the run fails past
 * them, naming the step (the Loop). A plan with a jump is not captured into a CUDA graph: its
 * steps are launched one by one, and the host waits for the flag at each jump. */
typedef struct ampc_rt_branch {
    ampc_rt_ref flag;
    int32_t target;
    uint8_t jump_if_set;
    int64_t limit;
} ampc_rt_branch;

/* The kinds of step: the rows of runtime/steps.def, in order. */
typedef enum ampc_rt_step_kind {
#define AMPC_STEP(KIND, member, type, provider, work, serialise, name) AMPC_RT_STEP_##KIND,
#include "runtime/steps.def"
    AMPC_RT_STEP_KINDS
} ampc_rt_step_kind;

typedef struct ampc_rt_step {
    uint8_t kind;        /* ampc_rt_step_kind */
    const char *label;   /* the graph nodes covered, for profiles and errors: "Add 'add_3'" */
    union {              /* the field its kind names (runtime/steps.def) */
#define AMPC_STEP(KIND, member, type, provider, work, serialise, name) type member;
#include "runtime/steps.def"
    };
} ampc_rt_step;

/* What runs a step of kind `kind` ("cuBLASLt", "peer copy": runtime/steps.def), "?" past them. */
static inline const char *ampc_rt_step_kind_name(uint8_t kind) {
    static const char *const names[] = {
#define AMPC_STEP(KIND, member, type, provider, work, serialise, name) [AMPC_RT_STEP_##KIND] = name,
#include "runtime/steps.def"
    };
    return kind < AMPC_RT_STEP_KINDS ? names[kind] : "?";
}

/* A graph input or output: the caller's tensor is copied to / from `ref` around the steps. */
typedef struct ampc_rt_io {
    const char *name;
    ampc_dtype dtype;
    ampc_shape shape;
    ampc_rt_ref ref;
} ampc_rt_io;

/* A compiled translation unit for one target. */
typedef enum ampc_rt_image_kind { AMPC_RT_IMAGE_PTX = 0, AMPC_RT_IMAGE_CUBIN = 1 } ampc_rt_image_kind;

typedef struct ampc_rt_image {
    int32_t unit;       /* translation unit index (kernels name their unit) */
    uint8_t kind;       /* ampc_rt_image_kind */
    int32_t sm;         /* cubin: the architecture (80, 86, 89, 90...); PTX: its virtual arch */
    const void *data;   /* PTX text (NUL-terminated) or cubin bytes */
    int64_t size;
} ampc_rt_image;

typedef struct ampc_rt_plan {
    int32_t version;           /* AMPC_RT_PLAN_VERSION */
    const char *name;
    int64_t arena_bytes;
    const void *weights;       /* host copy of the constant blob, uploaded at load */
    int64_t weights_bytes;
    int32_t n_units;           /* translation units; kernels refer to them by index */
    int32_t n_images, n_steps, n_inputs, n_outputs;
    const ampc_rt_image *images;
    const ampc_rt_step *steps;
    const ampc_rt_io *inputs;
    const ampc_rt_io *outputs;
    /* Multi-GPU (see the top of this file): this plan is rank `rank` of n_ranks; the model's plan
     * (rank 0's fields) points at every rank's plan in `ranks`, a rank's own plan has ranks NULL.
     * A single-GPU plan: rank 0, n_ranks 0 or 1, ranks NULL. */
    int32_t rank, n_ranks;
    const struct ampc_rt_plan *ranks;
    /* 1: the ranks split the batch (data parallelism, see the top of this file), on the model's
     * plan and on every rank's; 0: tensor parallelism or one GPU. */
    uint8_t split_batch;
    /* A pipeline (see the top of this file): the micro-batches a run sends through the ranks
     * (>= 1), on the model's plan and every rank's; 0: not a pipeline. */
    int32_t micro_batches;
} ampc_rt_plan;

/* ---- generated libraries ---------------------------------------------------------------------
 * A library written by `ampc -o model.so` exports one function of this name returning its entry;
 * ampc_rt_load (runtime/artifact.c) opens the library, checks the entry's ABI against its own and
 * asks for the plan. The layout sizes let a loader refuse a library built by an ampc whose plan
 * structures differ. */
#define AMPC_RT_ARTIFACT_SYMBOL "ampc_artifact_v1"
enum { AMPC_RT_ARTIFACT_ABI = 2 };

typedef struct ampc_rt_artifact_entry {
    int32_t abi;          /* AMPC_RT_ARTIFACT_ABI */
    int32_t plan_version; /* AMPC_RT_PLAN_VERSION */
    int32_t plan_size, step_size, io_size, image_size; /* sizeof of those structures */
    const char *name;     /* the library's C prefix */
    const char *ampc_version;
    /* The plan, its weights in host memory (read from the sidecar file on first call when they
     * are not embedded). AMPC_OK, else AMPC_E_IO with *err (malloc'ed) naming the file. The plan
     * stays valid while the library is loaded. Thread-safe. */
    ampc_status (*plan)(const ampc_rt_plan **plan, char **err);
    /* What the library computes differently from the model as written (ampc_module_math, with
     * the note the build added: --precision auto's measured error); "" when nothing. */
    const char *math;
} ampc_rt_artifact_entry;

#endif /* AMPC_RT_PLAN_H */
