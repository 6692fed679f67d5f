/*
 * ampc.h — build, import, optimise and evaluate inference graphs.
 *
 * ampc compiles neural-network inference graphs for NVIDIA GPUs. This header is the compile-side
 * API: build a graph with the C DSL (or import one), run the optimisation pipeline, and evaluate
 * it with the reference evaluator (plain C, the numerical oracle of every GPU path).
 *
 * A complete program:
 *
 *     #include <ampc.h>
 *     #include <stdio.h>
 *
 *     int main(void) {
 *         ampc_graph *g = ampc_graph_create("affine");
 *         int64_t xd[2] = {1, 3}, wd[2] = {3, 2};
 *         float w[6] = {1, 2, 3, 4, 5, 6};
 *         ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 2, xd);
 *         ampc_value *y = ampc_relu(g, ampc_matmul(g, x, ampc_constant(g, "w", AMPC_DTYPE_F32, 2, wd, w)));
 *         ampc_output(g, y, "y");
 *         if (ampc_graph_status(g) != AMPC_OK) { fprintf(stderr, "%s\n", ampc_graph_errors(g)); return 1; }
 *
 *         float xv[3] = {1, -1, 1};
 *         ampc_tensor in = {AMPC_DTYPE_F32, {2, {1, 3}}, xv}, out;
 *         if (ampc_graph_evaluate(g, &in, 1, &out, 1) != AMPC_OK) return 1;
 *         printf("%g %g\n", ((float *)out.data)[0], ((float *)out.data)[1]);   // 3 4
 *         ampc_tensor_free(&out);
 *         ampc_graph_destroy(g);
 *     }
 *
 * Conventions
 *   - Every handle is opaque. A graph owns everything built in it (values, nodes, constant data);
 *     ampc_graph_destroy frees all of it at once.
 *   - Errors the caller can cause never abort: functions return an ampc_status, and the graph
 *     keeps a diagnostic per problem that names the node (index, op, name) and says what was
 *     expected and what was found. A DSL constructor that fails returns a "poisoned" value:
 *     later constructors accept it silently and produce poison too, so a chain of calls needs
 *     one check at the end (ampc_graph_status).
 *   - Tensors are dense, row-major (C order). Element types are listed in ampc_dtype; f16 and
 *     bf16 elements are stored as their 16-bit patterns.
 */
#ifndef AMPC_H
#define AMPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AMPC_VERSION_MAJOR 0
#define AMPC_VERSION_MINOR 1
#define AMPC_VERSION_PATCH 0
#define AMPC_VERSION_STRING "0.1.0"

#if defined(AMPC_BUILDING)
#define AMPC_API __attribute__((visibility("default")))
#else
#define AMPC_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------- */

/* Result of every fallible call. AMPC_OK is zero; everything else is an error class, with the
 * details in the diagnostic text (ampc_graph_errors). */
typedef enum ampc_status {
    AMPC_OK = 0,
    AMPC_E_INVALID_ARG,  /* a NULL or out-of-range argument to an API call */
    AMPC_E_PARSE,        /* malformed text, protobuf or tensor file */
    AMPC_E_SHAPE,        /* shapes that an op's rules do not accept */
    AMPC_E_DTYPE,        /* element types that an op's rules do not accept */
    AMPC_E_ATTR,         /* a missing, mistyped or out-of-range attribute */
    AMPC_E_UNSUPPORTED,  /* an op, dtype or attribute combination ampc does not implement */
    AMPC_E_OVERFLOW,     /* sizes whose arithmetic overflows 64-bit integers */
    AMPC_E_VERIFY,       /* a graph that breaks an IR invariant (dangling value, cycle...) */
    AMPC_E_EVAL,         /* a value-dependent failure while evaluating (index out of range...) */
    AMPC_E_IO,           /* a file that cannot be opened, read or written */
    AMPC_E_OOM,          /* host memory exhausted */
    AMPC_E_NO_DEVICE,    /* no CUDA device (or driver) on this machine */
    AMPC_E_CUDA,         /* a CUDA runtime or library call failed */
    AMPC_E_NVRTC,        /* NVRTC rejected generated source */
    AMPC_E_INTERNAL,     /* a bug in ampc: please report it with the diagnostic */
    AMPC_STATUS_COUNT
} ampc_status;

/* Short name of a status ("shape error"); never NULL. */
AMPC_API const char *ampc_status_str(ampc_status s);

/* ---------------------------------------------------------------------------------------------
 * Element types, shapes, tensors
 * ------------------------------------------------------------------------------------------- */

typedef enum ampc_dtype {
    AMPC_DTYPE_UNDEFINED = 0,
    AMPC_DTYPE_F32,
    AMPC_DTYPE_F16,
    AMPC_DTYPE_BF16,
    AMPC_DTYPE_F64,
    AMPC_DTYPE_I64,
    AMPC_DTYPE_I32,
    AMPC_DTYPE_I16,
    AMPC_DTYPE_I8,
    AMPC_DTYPE_U64,
    AMPC_DTYPE_U32,
    AMPC_DTYPE_U16,
    AMPC_DTYPE_U8,
    AMPC_DTYPE_BOOL,
    AMPC_DTYPE_COUNT
} ampc_dtype;

/* Short name of a dtype as the IR text writes it ("f32", "bool"); "?" for invalid values. */
AMPC_API const char *ampc_dtype_name(ampc_dtype t);
/* Bytes per element; 0 for AMPC_DTYPE_UNDEFINED. */
AMPC_API size_t ampc_dtype_size(ampc_dtype t);

/* The largest rank ampc represents. */
#define AMPC_MAX_RANK 8

/* A static shape: rank dims, each >= 0. A scalar has rank 0 and one element. */
typedef struct ampc_shape {
    int32_t rank;
    int64_t dims[AMPC_MAX_RANK];
} ampc_shape;

/* A dense row-major tensor. `data` holds numel * dtype_size bytes. Who owns `data` is said by the
 * function that fills or takes the tensor. */
typedef struct ampc_tensor {
    ampc_dtype dtype;
    ampc_shape shape;
    void *data;
} ampc_tensor;

/* Number of elements of a shape (1 for a scalar). Shapes in a graph never overflow. */
AMPC_API int64_t ampc_shape_numel(const ampc_shape *s);
/* Frees the data of a tensor returned by ampc (ampc_graph_evaluate) and clears the pointer. */
AMPC_API void ampc_tensor_free(ampc_tensor *t);

/* ---------------------------------------------------------------------------------------------
 * Graphs
 * ------------------------------------------------------------------------------------------- */

typedef struct ampc_graph ampc_graph;
typedef struct ampc_value ampc_value;

/* Creates an empty graph. `name` is copied (NULL gives "graph"). Returns NULL only when host
 * memory is exhausted. */
AMPC_API ampc_graph *ampc_graph_create(const char *name);
/* Frees the graph and everything built in it. NULL is allowed. */
AMPC_API void ampc_graph_destroy(ampc_graph *g);

/* The first error recorded in the graph, or AMPC_OK. */
AMPC_API ampc_status ampc_graph_status(const ampc_graph *g);
/* All diagnostics recorded so far, one per line ("" when there are none). The string is owned by
 * the graph and valid until the next call that changes the graph. */
AMPC_API const char *ampc_graph_errors(ampc_graph *g);
/* Forgets the diagnostics recorded so far (the graph itself is unchanged). */
AMPC_API void ampc_graph_clear_errors(ampc_graph *g);

/* Number of nodes, graph inputs and graph outputs. */
AMPC_API int32_t ampc_graph_node_count(const ampc_graph *g);
AMPC_API int32_t ampc_graph_input_count(const ampc_graph *g);
AMPC_API int32_t ampc_graph_output_count(const ampc_graph *g);
/* The i-th graph input / output, or NULL when i is out of range. */
AMPC_API ampc_value *ampc_graph_input(const ampc_graph *g, int32_t i);
AMPC_API ampc_value *ampc_graph_output(const ampc_graph *g, int32_t i);

/* Facts about a value. A poisoned value (one whose construction failed) reports
 * AMPC_DTYPE_UNDEFINED and rank 0. */
AMPC_API const char *ampc_value_name(const ampc_value *v);
AMPC_API ampc_dtype ampc_value_dtype(const ampc_value *v);
AMPC_API ampc_shape ampc_value_shape(const ampc_value *v);
AMPC_API bool ampc_value_is_poisoned(const ampc_value *v);

/* ---------------------------------------------------------------------------------------------
 * The C DSL: graph inputs, constants, outputs and op constructors
 *
 * Each constructor adds one node, runs the op's shape and dtype inference (the same code the ONNX
 * importer runs) and returns the node's output value. On a rule violation it records a
 * diagnostic and returns a poisoned value; on a poisoned input it returns poison silently.
 * ------------------------------------------------------------------------------------------- */

/* A graph input of the given dtype and shape. `name` must be unique in the graph. */
AMPC_API ampc_value *ampc_input(ampc_graph *g, const char *name, ampc_dtype dtype, int32_t rank,
                                const int64_t *dims);
/* A constant (a weight): the data (numel * dtype_size bytes) is copied into the graph. `name` may
 * be NULL, which generates one. */
AMPC_API ampc_value *ampc_constant(ampc_graph *g, const char *name, ampc_dtype dtype, int32_t rank,
                                   const int64_t *dims, const void *data);
/* A scalar (rank 0) f32 / i64 constant. */
AMPC_API ampc_value *ampc_scalar_f32(ampc_graph *g, float v);
AMPC_API ampc_value *ampc_scalar_i64(ampc_graph *g, int64_t v);
/* A rank-1 i64 constant, the form ONNX uses for shapes, axes and pads. */
AMPC_API ampc_value *ampc_const_i64s(ampc_graph *g, const int64_t *v, int32_t n);
/* Marks `v` as a graph output, renaming it to `name` when `name` is not NULL. */
AMPC_API ampc_status ampc_output(ampc_graph *g, ampc_value *v, const char *name);

/* Attribute kinds, as ONNX has them. */
typedef enum ampc_attr_kind {
    AMPC_ATTR_UNDEFINED = 0,
    AMPC_ATTR_INT,
    AMPC_ATTR_FLOAT,
    AMPC_ATTR_STRING,
    AMPC_ATTR_INTS,
    AMPC_ATTR_FLOATS,
    AMPC_ATTR_STRINGS,
    AMPC_ATTR_TENSOR,
    AMPC_ATTR_GRAPH,
} ampc_attr_kind;

/* One attribute handed to ampc_op. Arrays are copied into the graph. */
typedef struct ampc_attr_arg {
    const char *name;
    ampc_attr_kind kind;
    int64_t i;               /* AMPC_ATTR_INT */
    float f;                 /* AMPC_ATTR_FLOAT */
    const char *s;           /* AMPC_ATTR_STRING */
    const int64_t *ints;     /* AMPC_ATTR_INTS, n entries */
    const float *floats;     /* AMPC_ATTR_FLOATS, n entries */
    const char *const *strings; /* AMPC_ATTR_STRINGS, n entries */
    const ampc_value *tensor;   /* AMPC_ATTR_TENSOR: a constant of this graph */
    int32_t n;
} ampc_attr_arg;

#define AMPC_ATTR_I(name_, v_) ((ampc_attr_arg){.name = (name_), .kind = AMPC_ATTR_INT, .i = (v_)})
#define AMPC_ATTR_F(name_, v_) ((ampc_attr_arg){.name = (name_), .kind = AMPC_ATTR_FLOAT, .f = (v_)})
#define AMPC_ATTR_S(name_, v_) ((ampc_attr_arg){.name = (name_), .kind = AMPC_ATTR_STRING, .s = (v_)})
#define AMPC_ATTR_IS(name_, v_, n_) \
    ((ampc_attr_arg){.name = (name_), .kind = AMPC_ATTR_INTS, .ints = (v_), .n = (n_)})
#define AMPC_ATTR_FS(name_, v_, n_) \
    ((ampc_attr_arg){.name = (name_), .kind = AMPC_ATTR_FLOATS, .floats = (v_), .n = (n_)})

/* The generic constructor: adds a node of the ONNX op `op` (e.g. "Conv") with inputs `in` (NULL
 * entries stand for absent optional inputs) and attributes, and returns its first output. Any op of
 * the op table can be built this way. */
AMPC_API ampc_value *ampc_op(ampc_graph *g, const char *op, ampc_value *const *in, int32_t n_in,
                             const ampc_attr_arg *attrs, int32_t n_attrs);
/* Like ampc_op for ops with several outputs: fills out[0..n_out-1] (poisoned values on error). */
AMPC_API ampc_status ampc_op_multi(ampc_graph *g, const char *op, ampc_value *const *in,
                                   int32_t n_in, const ampc_attr_arg *attrs, int32_t n_attrs,
                                   ampc_value **out, int32_t n_out);

/* Convenience constructors for the common ops (each is ampc_op with the ONNX defaults). */
AMPC_API ampc_value *ampc_add(ampc_graph *g, ampc_value *a, ampc_value *b);
AMPC_API ampc_value *ampc_sub(ampc_graph *g, ampc_value *a, ampc_value *b);
AMPC_API ampc_value *ampc_mul(ampc_graph *g, ampc_value *a, ampc_value *b);
AMPC_API ampc_value *ampc_div(ampc_graph *g, ampc_value *a, ampc_value *b);
AMPC_API ampc_value *ampc_pow(ampc_graph *g, ampc_value *a, ampc_value *b);
AMPC_API ampc_value *ampc_relu(ampc_graph *g, ampc_value *x);
AMPC_API ampc_value *ampc_sigmoid(ampc_graph *g, ampc_value *x);
AMPC_API ampc_value *ampc_tanh(ampc_graph *g, ampc_value *x);
AMPC_API ampc_value *ampc_gelu(ampc_graph *g, ampc_value *x);
AMPC_API ampc_value *ampc_exp(ampc_graph *g, ampc_value *x);
AMPC_API ampc_value *ampc_sqrt(ampc_graph *g, ampc_value *x);
AMPC_API ampc_value *ampc_matmul(ampc_graph *g, ampc_value *a, ampc_value *b);
/* Gemm: alpha * op(a) @ op(b) + beta * c, op = transpose when trans_* is set; c may be NULL. */
AMPC_API ampc_value *ampc_gemm(ampc_graph *g, ampc_value *a, ampc_value *b, ampc_value *c,
                               bool trans_a, bool trans_b);
/* 2-D convolution, NCHW, weight [M, C/group, kH, kW]; bias may be NULL. pads is {top, left,
 * bottom, right}; NULL strides/pads/dilations mean 1/0/1. */
AMPC_API ampc_value *ampc_conv2d(ampc_graph *g, ampc_value *x, ampc_value *w, ampc_value *bias,
                                 const int64_t strides[2], const int64_t pads[4],
                                 const int64_t dilations[2], int64_t group);
AMPC_API ampc_value *ampc_softmax(ampc_graph *g, ampc_value *x, int64_t axis);
AMPC_API ampc_value *ampc_layer_norm(ampc_graph *g, ampc_value *x, ampc_value *scale,
                                     ampc_value *bias, int64_t axis, float epsilon);
AMPC_API ampc_value *ampc_reshape(ampc_graph *g, ampc_value *x, const int64_t *dims, int32_t rank);
AMPC_API ampc_value *ampc_transpose(ampc_graph *g, ampc_value *x, const int64_t *perm, int32_t rank);
AMPC_API ampc_value *ampc_concat(ampc_graph *g, ampc_value *const *xs, int32_t n, int64_t axis);
AMPC_API ampc_value *ampc_cast(ampc_graph *g, ampc_value *x, ampc_dtype to);

/* ---------------------------------------------------------------------------------------------
 * IR text: print and parse
 * ------------------------------------------------------------------------------------------- */

/* Writes the graph's textual IR to `f`. Constants are written in full when `full_data` is set;
 * otherwise those above 16 elements are elided (and the text can no longer be parsed back). */
AMPC_API ampc_status ampc_graph_print(const ampc_graph *g, FILE *f, bool full_data);
/* The same text in a malloc'ed string the caller frees; NULL on OOM. */
AMPC_API char *ampc_graph_to_text(const ampc_graph *g, bool full_data);
/* Parses IR text (as ampc_graph_print writes it) into a new graph. On success *out owns the graph.
 * On failure *out is NULL and, when `err` is not NULL, *err receives a malloc'ed message with the
 * line and column (the caller frees it). */
AMPC_API ampc_status ampc_graph_parse(const char *text, size_t len, ampc_graph **out, char **err);

/* ---------------------------------------------------------------------------------------------
 * Reference evaluation
 * ------------------------------------------------------------------------------------------- */

/* Evaluates the graph on the CPU with the reference evaluator. `inputs` are matched to the graph
 * inputs by position and must have their dtype and shape exactly. On success outputs[i] receives
 * a tensor whose data the caller frees with ampc_tensor_free; on failure no output is allocated
 * and the graph's diagnostics say why. */
AMPC_API ampc_status ampc_graph_evaluate(ampc_graph *g, const ampc_tensor *inputs, int32_t n_inputs,
                                         ampc_tensor *outputs, int32_t n_outputs);

/* The most iterations one execution of a Loop node may run in the reference evaluator (graph
 * evaluation and constant folding): a Loop whose trip count or condition comes from data could
 * otherwise run for ever. A Loop that would start iteration `n` + 1 fails with a diagnostic
 * naming the node, its trip count and the limit. Each execution of a Loop counts apart (a Loop
 * nested in another Loop's body gets the full count every time it runs). The default of one
 * million covers the loops of real models (decoding steps, sequence lengths) many times over
 * while a runaway loop of a small body fails within seconds. The CLI's --max-loop-iterations N
 * sets it; the ONNX import takes it in ampc_import_options.max_loop_iterations. */
#define AMPC_DEFAULT_MAX_LOOP_ITERATIONS 1000000
/* Sets the bound for g and the body graphs its Loop and If nodes run; n <= 0: the default. */
AMPC_API void ampc_graph_set_max_loop_iterations(ampc_graph *g, int64_t n);
/* With `on`, ampc_graph_evaluate rounds the f32 operands of every matmul and convolution to
 * TF32 (10 explicit mantissa bits, the low 13 bits dropped, as TF32 tensor cores read f32) before
 * multiplying, and accumulates as before: the reference then shows what a build with TF32 math
 * (the default for f32) computes, up to accumulation order. Off by default. */
AMPC_API void ampc_graph_set_reference_tf32(ampc_graph *g, bool on);

/* ---------------------------------------------------------------------------------------------
 * The optimisation pipeline
 * ------------------------------------------------------------------------------------------- */

/* What one pass of a pipeline run did (ampc_pipeline_options.record). */
typedef struct ampc_pass_record {
    const char *name;     /* the pass (static storage) */
    bool ran;             /* false: disabled */
    bool changed;         /* the pass changed the graph */
    ampc_status status;
    double ms;            /* wall time */
    int32_t nodes_before, nodes_after; /* live nodes around the pass */
} ampc_pass_record;

/* The tensor precision the precision pass gives the graph (ampc_pipeline_options.precision). */
typedef enum ampc_precision {
    AMPC_PRECISION_KEEP = 0, /* every tensor in the model's own dtype (--precision fp32, tf32) */
    AMPC_PRECISION_FP16,     /* f32 tensors to f16 where the op table's policy allows it */
    AMPC_PRECISION_BF16,     /* the same with bf16 */
} ampc_precision;

/* How a graph is split over GPUs (ampc_pipeline_options.partition, passes/partition.c). */
typedef enum ampc_partition {
    AMPC_PARTITION_NONE = 0, /* one GPU */
    AMPC_PARTITION_TENSOR,   /* weights split across the GPUs (matmul pairs), one all-reduce each */
    AMPC_PARTITION_DATA,     /* the batch split across the GPUs, weights replicated
                                (passes/partition_data.c) */
    AMPC_PARTITION_PIPELINE, /* consecutive stages of the graph, one per GPU, the batch run through
                                them in micro-batches (passes/partition_pipeline.c) */
} ampc_partition;
/* What the sparsity pass does with the weights of contractions and convolutions
 * (ampc_pipeline_options.sparsity; docs/sparsity.md). 2:4 means: along the reduction dimension K,
 * every group of 4 consecutive weights holds at most 2 non-zeros, the pattern sparse tensor cores
 * run at twice the dense rate. */
typedef enum ampc_sparsity {
    AMPC_SPARSITY_OFF = 0, /* the pass does nothing (the default) */
    AMPC_SPARSITY_VERIFY,  /* mark the weights that are already 2:4 (sparse24 = 1); no number changes */
    AMPC_SPARSITY_PRUNE,   /* magnitude-prune every eligible weight to 2:4 and mark it: changes the
                              model's numbers (the energy removed is reported per layer) */
} ampc_sparsity;

typedef struct ampc_pipeline_options {
    const char *const *disable; /* names of passes to skip (n_disable of them) */
    int32_t n_disable;
    const char *dump_after;     /* pass name: print the IR to dump_file after it runs */
    FILE *dump_file;            /* NULL: stderr */
    bool verify;                /* run the verifier after every pass (tests always do) */
    FILE *trace;                /* when not NULL, one line per pass: name, changed, time */
    ampc_pass_record *record;   /* when not NULL, one record per pass in order, at most
                                   max_records; *n_records receives how many were written */
    int32_t max_records;
    int32_t *n_records;
    /* The precision pass: with FP16 or BF16, f32 tensors move to that type as the op table's
     * policy says, constants converted at compile time; graph inputs and outputs keep their
     * dtypes (casts at the edges). keep_fp32 names ops ("Softmax") or nodes (by name) that stay
     * f32 whatever the policy; a name that matches nothing is an error. */
    ampc_precision precision;
    const char *const *keep_fp32;
    int32_t n_keep_fp32;
    /* Node names --precision auto's search moved to f32 (kept like keep_fp32; reported apart). */
    const char *const *auto_fp32;
    int32_t n_auto_fp32;
    /* The layout pass: 2-D f16/bf16 convolutions run channels-last (NHWC) on cuDNN, where its
     * graph API fuses the epilogue (ResNet-50 fp16 b1 on an H200: 0.36 ms against 0.83 ms NCHW;
     * docs/benchmarks.md). keep_nchw (--layout nchw) leaves every convolution NCHW. */
    bool keep_nchw;
    /* The partition pass (--gpus N --partition tensor): with gpus >= 2 and TENSOR, each pair of
     * matmuls with constant weights (column-parallel, then row-parallel) is split into gpus
     * ranks with one ampc.AllReduce. The partitioned graph runs on the reference evaluator (all
     * ranks, the all-reduce as a sum), and ampc_compile gives one plan per GPU: the module (or
     * its library) then runs on devices 0 to gpus - 1 through NCCL (ampc_rt_model_create in
     * ampc_runtime.h, docs/multi-gpu.md). With DATA, the graph becomes one GPU's share of the
     * batch (dim 0 of every input and output, B / gpus rows), weights replicated; the module
     * still takes and gives the full batch, rank r computing rows [r B/gpus, (r+1) B/gpus). */
    int32_t gpus;
    ampc_partition partition;
    /* With PIPELINE: the graph is cut into `gpus` consecutive stages balanced by estimated cost
     * (GPU s runs stage s, its weights only there), and the batch (dim 0 of every input and
     * output) runs through them in micro_batches parts of B / micro_batches rows, GPU s working
     * on part m while GPU s+1 works on part m-1. 0 picks the default: the largest divisor of B
     * not above 4 * gpus. A batch that micro_batches does not divide is refused. */
    int32_t micro_batches;
    /* The sparsity pass (OFF: nothing). sparsity_layers, when not NULL, is an fnmatch(3) glob on
     * node names ("layer1.*"): PRUNE prunes only the eligible nodes it matches (VERIFY marks every
     * eligible node that is already 2:4 whatever the pattern). Read during the run only. */
    ampc_sparsity sparsity;
    const char *sparsity_layers;
    /* ampc's own dense GEMM kernel (--gemm-kernel; docs/fusion.md): fuse-matmul also takes the
     * erf GELU after an f16/bf16 product into the GEMM's epilogue, which only that kernel runs,
     * and every f16/bf16 GEMM step gets the kernel as a candidate the runtime times against
     * cuBLASLt at load. Off by default: on the H200 it is slower than cuBLASLt followed by the
     * GELU (docs/benchmarks.md), and each candidate costs compile time. */
    bool gemm_kernel;
    /* Let an erf GELU after an f16/bf16 product run as GELU's tanh form in cuBLASLt's epilogue
     * (--fast-gelu; docs/precision.md): within 5e-4 of the erf form everywhere (measured on the
     * H200), but not what the model says, so off by default: a zero-initialised struct keeps
     * every erf GELU exact (a kernel of its own, or, with gemm_kernel, the exact epilogue of
     * ampc's kernel). A GELU whose approximate attribute is "tanh" goes to the epilogue either
     * way: that is the model's own formula. (This field replaced exact_gelu, whose default was
     * the tanh form.) */
    bool fast_gelu;
    /* A build for the GPU (ampc_compile and ampc_compile_check set it): If, Loop and Scan nodes
     * whose control flow is known when compiling are written into the graph (flatten-control:
     * a Loop of a constant trip count whose stop does not depend on data and a Scan unrolled,
     * an If's constant branch taken or both branches computed and one selected), since a GPU
     * plan has no step that runs a subgraph. The reference evaluator runs them as they are. */
    bool gpu_build;
    /* When not NULL, what the passes decided beyond the graph is written here: the sparsity
     * pass's row per layer, the blocks the partition pass split or left whole, the pipeline's
     * stages, the roundings the `math:` line names (the command line's --report and summary read
     * it; its fields are internal, passes/passes.h). Each run rewrites it. */
    struct ampc_pipeline_report *report;
} ampc_pipeline_options;
typedef struct ampc_pipeline_report ampc_pipeline_report;

/* Runs the default pass pipeline over the graph. `o` may be NULL (defaults: verify on). */
AMPC_API ampc_status ampc_graph_optimize(ampc_graph *g, const ampc_pipeline_options *o);
/* Writes the pipeline, one pass a line with its description. */
AMPC_API void ampc_pipeline_print(FILE *f);
/* Checks every IR invariant; AMPC_OK or AMPC_E_VERIFY with diagnostics. */
AMPC_API ampc_status ampc_graph_verify(ampc_graph *g);

/* ---------------------------------------------------------------------------------------------
 * ONNX import, and tensor files (.pb, .npy)
 *
 * The importer reads a ModelProto (IR version 3 to 14, default-domain opsets 1 to 28; each op is
 * accepted in the opsets ampc's op table lists, older forms being rewritten to the newest one) and
 * builds a graph through the same inference as the C DSL. It first checks coverage: every
 * unsupported op, domain or attribute is listed in ONE message ("3 nodes are not supported:"
 * then a line per node with its index, name, domain and op type). Then it checks structure:
 * dangling and duplicate value names, cycles (nodes out of order are sorted), dims. Graph inputs
 * that have an initializer are constants. Model-local functions are expanded inline.
 *
 * Shapes are static. A graph input whose ONNX type has symbolic dims ("batch") needs a shape from
 * the caller (ampc_import_options.shapes, the CLI's --shape name=AxBxC); a symbol bound once holds
 * for every input that uses it. With max_batch set, a symbolic dim 0 left unbound becomes
 * max_batch: the graph is compiled for its largest batch.
 *
 * Every function below that takes `char **err` sets *err (when err is not NULL) to a malloc'ed
 * message on failure (the caller frees it) and to NULL on success.
 * ------------------------------------------------------------------------------------------- */

/* The static shape to give a graph input (--shape name=1x3x224x224). It must have the rank the
 * model declares and agree with the model's fixed dims; it fixes the input's symbolic dims. */
typedef struct ampc_input_shape {
    const char *name;  /* the ONNX graph input */
    ampc_shape shape;
} ampc_input_shape;

/* A graph input bound at import time to a known value: it becomes a constant of the graph (not an
 * input), so positions that must be known at compile time (Reshape's shape, Pad's pads...) can be
 * fed from it. The tensor's dtype must be the input's ONNX element type and its shape must agree
 * with the declared dims; its data is copied. */
typedef struct ampc_input_binding {
    const char *name;  /* the ONNX graph input; NULL or "": the input at this entry's position in
                        * `constants` among the graph inputs without an initializer */
    ampc_tensor value;
} ampc_input_binding;

/* Options of the ONNX import; a zeroed struct (or NULL) means none. Arrays are read during the
 * call only. */
typedef struct ampc_import_options {
    const ampc_input_shape *shapes;       /* n_shapes entries, names unique and naming inputs */
    int32_t n_shapes;
    int64_t max_batch;                    /* > 0: bound for a symbolic dim 0 no shape fixes */
    const ampc_input_binding *constants;  /* n_constants entries */
    int32_t n_constants;
    /* Bind only the inputs whose value must be known at compile time: those that reach a
     * compile-time position (Reshape's shape, Slice's starts...) through the nodes that compute
     * it. The others stay graph inputs (their binding still gives their shape). Test runners use
     * this to keep as much of a graph as possible running on its inputs. */
    bool constants_if_needed;
    /* The reference evaluator's Loop bound for the imported graph, folding during the import
     * included (ampc_graph_set_max_loop_iterations); 0: AMPC_DEFAULT_MAX_LOOP_ITERATIONS. */
    int64_t max_loop_iterations;
} ampc_import_options;

/* Imports the ONNX model file at `path`. External data files are resolved relative to the model's
 * folder and must stay inside it. On success *out owns the new graph (ampc_graph_destroy); on
 * failure *out is NULL and *err says why: AMPC_E_IO (cannot read), AMPC_E_PARSE (not an ONNX
 * model, bad tensor data), AMPC_E_UNSUPPORTED (the coverage list), AMPC_E_VERIFY (dangling or
 * duplicate names, cycles), AMPC_E_SHAPE (unresolved or bad dims, inference), ... `o` may be NULL. */
AMPC_API ampc_status ampc_onnx_import_file(const char *path, const ampc_import_options *o,
                                           ampc_graph **out, char **err);
/* The same from a serialized ModelProto in memory (len bytes, read during the call only).
 * `base_dir` is the folder external data is relative to; NULL rejects models with external data. */
AMPC_API ampc_status ampc_onnx_import_buffer(const void *data, size_t len, const char *base_dir,
                                             const ampc_import_options *o, ampc_graph **out,
                                             char **err);
/* Writes a summary of the model at `path` to `f`: IR version, producer, opsets, graph inputs and
 * outputs with their types, an op histogram, coverage (the unsupported nodes), initializer count
 * and bytes, then whether the import (without options; when only symbolic dims stop it, again
 * with max_batch 1) succeeds and, if not, why. Never crashes on a bad file: it prints the error.
 * Returns AMPC_OK when the model imports, else the status of the first problem found
 * (AMPC_E_PARSE for a file that is not a model, AMPC_E_UNSUPPORTED when coverage fails...). */
AMPC_API ampc_status ampc_onnx_inspect(const char *path, FILE *f);

/* Reads a tensor file: numpy .npy (format 1.0 to 3.0, C order, little-endian or byte-sized
 * elements: '<f4' '<f8' '<f2' '<i8' '<i4' '<i2' '|i1' '<u8' '<u4' '<u2' '|u1' '|b1') or an ONNX
 * TensorProto .pb (every encoding; external data relative to the file's folder), told apart by
 * content. numpy has no bfloat16: bf16 tensors come only from .pb files. On success t->data is
 * malloc'ed (ampc_tensor_free) and, when `name` is not NULL, *name receives a malloc'ed name (the
 * TensorProto's name, possibly ""; for .npy the file name without folder and extension). On
 * failure t is zeroed, *name is NULL and *err says why (AMPC_E_IO, AMPC_E_PARSE,
 * AMPC_E_UNSUPPORTED for element types ampc lacks). */
AMPC_API ampc_status ampc_tensor_read_file(const char *path, ampc_tensor *t, char **name,
                                           char **err);
/* Writes `t` as a numpy .npy file (format 1.0). bf16 has no numpy type: it is written as '<f4'
 * (exact: every bf16 value is an f32 value). On failure the file may be partly written. */
AMPC_API ampc_status ampc_tensor_write_npy(const char *path, const ampc_tensor *t, char **err);
/* Writes `t` as an ONNX TensorProto .pb file (raw_data, little-endian) named `name` (NULL: ""). */
AMPC_API ampc_status ampc_tensor_write_pb(const char *path, const ampc_tensor *t, const char *name,
                                          char **err);

/* ---------------------------------------------------------------------------------------------
 * Compiling for the GPU (JIT): graph -> CUDA C -> NVRTC -> a module that runs in this process
 *
 * ampc_compile runs the pass pipeline (the memory plan included), generates a kernel plan and
 * the CUDA C of its kernels, and compiles them with NVRTC into PTX for compute_80 (loads on every
 * GPU of compute capability 8.0 and newer) plus a cubin for each architecture asked. It needs no
 * GPU. The first ampc_module_run loads the module on the GPU; without one it fails with
 * AMPC_E_NO_DEVICE.
 * ------------------------------------------------------------------------------------------- */

typedef struct ampc_module ampc_module;

typedef struct ampc_compile_options {
    const int32_t *archs;  /* cubin architectures, 10 * major + minor (80, 86, 90); NULL with
                              n_archs 0: the GPU present, or sm_80 without one; non-NULL with
                              n_archs 0: PTX only (the driver compiles it at load) */
    int32_t n_archs;
    bool no_tf32;          /* f32 matmuls and convolutions in full f32 (default: TF32 math) */
    bool no_l2_prefetch;   /* the kernel before a GEMM or convolution does not ask L2 for its
                              constant weight as it starts (default: it does; numbers unchanged) */
    const char *cache_dir; /* NVRTC image cache: NULL: $AMPC_CACHE_DIR or ~/.cache/ampc; "": off */
    const ampc_pipeline_options *pipeline; /* NULL: defaults (verifier on) */
    int32_t device;        /* the CUDA device ampc_module_run uses */
    /* Called as kernels finish compiling (done = 1..total), on the calling thread; NULL: no
     * reports. The CLI draws its progress line with it. */
    void (*progress)(void *user, int32_t done, int32_t total);
    void *progress_user;
} ampc_compile_options;

/* Compiles the graph (which it optimises in place). On success *out owns the module (free with
 * ampc_module_destroy); on failure *out is NULL and the graph's diagnostics say why:
 * AMPC_E_UNSUPPORTED for an op without a GPU kernel yet (naming the node), AMPC_E_NVRTC with the
 * compiler's log and the kernel's name, or the pipeline's errors. */
AMPC_API ampc_status ampc_compile(ampc_graph *g, const ampc_compile_options *o, ampc_module **out);
/* Whether ampc_compile would build the graph for the GPU, as far as the model decides it: the
 * same pass pipeline and code generation, without NVRTC (fast; no GPU needed). AMPC_OK with
 * *steps (may be NULL) the plan's step count; else what ampc_compile returns for it, with the
 * same diagnostics (an op without a GPU kernel yet, naming the node). `ampc inspect` says it. */
AMPC_API ampc_status ampc_compile_check(ampc_graph *g, const ampc_compile_options *o, int32_t *steps);
/* Runs the module: inputs and outputs in the graph's order with exactly their dtypes and shapes;
 * data may be host or device memory; outputs are written into the caller's buffers. Returns
 * after the outputs are complete. On failure ampc_module_errors says why (AMPC_E_NO_DEVICE on a
 * machine without a GPU, input validation errors naming the input, CUDA errors naming the
 * step). `stream` is a cudaStream_t or NULL. */
AMPC_API ampc_status ampc_module_run(ampc_module *m, const ampc_tensor *inputs, int32_t n_inputs,
                                     ampc_tensor *outputs, int32_t n_outputs, void *stream);
/* The message of the last failure of ampc_module_run ("" when there was none); owned by m. */
AMPC_API const char *ampc_module_errors(const ampc_module *m);
/* What the module computes differently from the model as written, one line, owned by m; "" when
 * it computes every op in the model's declared types with one rounding per op (accumulation
 * order aside). Lists TF32 for f32 matmuls/convolutions, nodes moved to f16/bf16, erf GELUs in
 * their tanh form, 2:4-pruned layers with the weight energy removed and folded scales;
 * `ampc -o` prints it as its `math:` line and records it in the library (docs/precision.md). */
AMPC_API const char *ampc_module_math(const ampc_module *m);
/* The generated CUDA C and the PTX of translation unit i (NULL when i is out of range). */
AMPC_API int32_t ampc_module_unit_count(const ampc_module *m);
AMPC_API const char *ampc_module_cuda(const ampc_module *m, int32_t i);
AMPC_API const char *ampc_module_ptx(const ampc_module *m, int32_t i);
/* Steps of the plan and the device arena size in bytes. */
AMPC_API int32_t ampc_module_step_count(const ampc_module *m);
AMPC_API int64_t ampc_module_arena_bytes(const ampc_module *m);
AMPC_API void ampc_module_destroy(ampc_module *m);

/* ---- shared libraries (ampc model.onnx -o model.so) ---------------------------------------- */

typedef struct ampc_library_options {
    const char *name;   /* prefix of the library's C functions (<name>_create...): a C identifier;
                           NULL: from the file name ("models/resnet-50.so" -> "resnet_50") */
    const char *header; /* where model.h goes; NULL: the library path with ".h" for ".so" */
    const char *cc;     /* the C compiler that builds the library; NULL: $CC, else "cc" */
    const char *source; /* the model's file, named in the generated header; may be NULL */
    int64_t sidecar_bytes; /* weights above this size go to "<library>.weights" next to the
                              library instead of inside it; 0: 1 GiB */
    /* Appended to the module's math string in the library (ampc_module_math; `ampc inspect`
     * shows it): e.g. the outputs' error --precision auto measured, or an error accepted with
     * --accept-error. NULL: none. */
    const char *math_note;
} ampc_library_options;

/* Writes the module as a shared library plus its header: the plan as C data, the PTX and cubins
 * and the weights embedded (assembler .incbin), the ampc runtime linked in with its symbols
 * hidden; the library exports <name>_create / _run / _destroy, <name>_inputs / _outputs and the
 * generic entry point ampc_rt_load opens. It runs the system C compiler. Nothing is left behind
 * on failure: the library and header appear (renamed into place) only when both are complete.
 * Errors (AMPC_E_INVALID_ARG for a bad name or path, AMPC_E_IO for files, AMPC_E_INTERNAL when
 * the C compiler fails, with its output) come back in *err (malloc'ed; the caller frees it). */
AMPC_API ampc_status ampc_module_write_library(const ampc_module *m, const char *path,
                                              const ampc_library_options *o, char **err);
/* The C source of the library's host side (what -o compiles; `ampc --emit c`), malloc'ed, for
 * the given prefix (NULL: "model"); the PTX and weights appear as extern symbols. */
AMPC_API char *ampc_module_host_c(const ampc_module *m, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* AMPC_H */
