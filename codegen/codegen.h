/*
 * codegen.h — lowering an optimised, memory-planned graph to an executable plan (runtime/plan.h)
 * and the CUDA C of its kernels.
 *
 * ampc_cg_generate walks the nodes in order and hands each to the lowering function of its op's
 * lower kind (the `lower` column of ir/ops.def; the kind -> function table is in generate.c).
 * A lowering function either emits a generated kernel through the emitter below, or adds a
 * library step (cuBLASLt matmul, cuDNN convolution, copy, memset). Tensors are addressed by the
 * plan-memory decision stored in the IR (value->mem_space / ->mem_offset).
 *
 * Generated kernels are specialised: shapes, strides and attributes are baked into the source as
 * constants, so a kernel's parameters are its tensors' pointers. Every kernel is an
 * extern "C" __global__ function named k<index>_<what> (deterministic: the same graph and
 * options give the same bytes), preceded by a comment listing the graph nodes it covers. A
 * kernel whose definition repeats an earlier one but for its index is not defined again: its
 * step launches the earlier kernel (with its own arguments), whose comment counts such steps.
 * Kernels are spread over a few translation units that NVRTC compiles in parallel; each unit
 * starts with a banner and includes the kernel templates of codegen/kernels/ (embedded in the
 * binary).
 */
#ifndef AMPC_CODEGEN_H
#define AMPC_CODEGEN_H

#include "ir/ir.h"
#include "runtime/plan.h"

typedef struct ampc_cg ampc_cg;
typedef struct ampc_cg_kernel ampc_cg_kernel;

typedef struct ampc_cg_options {
    uint8_t math;            /* ampc_rt_math for f32 matmuls and convolutions (TF32 default) */
    int32_t max_units;       /* translation units to spread kernels over (0: automatic, <= 8) */
    bool no_l2_prefetch;     /* no L2 prefetch of the next GEMM's weight (emit.c) */
    bool gemm_kernel;        /* ampc's own GEMM kernel a candidate for every f16/bf16 GEMM step
                                (ampc_pipeline_options.gemm_kernel, --gemm-kernel) */
} ampc_cg_options;

/* What codegen produces: the plan (images not compiled yet: plan.n_images is 0) and the CUDA C
 * of each translation unit. Everything is owned by `arena`; free with ampc_cg_output_free. */
typedef struct ampc_cg_output {
    ampc_arena arena;
    ampc_rt_plan plan;
    char **sources;          /* n_units NUL-terminated CUDA C sources */
    const char **unit_names; /* "<graph>_u<k>.cu" */
    int32_t n_units;
    int32_t n_kernels;       /* kernels defined in the sources; steps may share one */
    void *weights_owned;     /* the weights blob (plan.weights), malloc'ed */
    /* A graph partitioned over n_ranks > 1 GPUs: rank r's plan (runtime/plan.h), its weights
     * malloc'ed in rank_weights[r]; `plan` then repeats rank 0's with plan.ranks = rank_plans.
     * A batch split (split_batch) shares weights_owned among the ranks: rank_weights is NULL.
     * Whoever sets images sets them on every rank's plan too. n_ranks is 1 otherwise. */
    int32_t n_ranks;
    ampc_rt_plan *rank_plans;
    void **rank_weights;
} ampc_cg_output;

/* Generates the plan and sources for a graph on which plan-memory has run. Failures (an op with
 * no GPU lowering yet, a shape a kernel cannot take) are diagnostics naming the node. A graph the
 * partition pass split (nodes with `rank`, ampc.AllReduce) gives one plan per rank: a node with
 * rank r lands in rank r's plan only, a node without one in every plan, and each all-reduce is
 * a step of every rank reading that rank's partial. */
ampc_status ampc_cg_generate(ampc_graph *g, const ampc_cg_options *o, ampc_cg_output **out);
void ampc_cg_output_free(ampc_cg_output *out);

/* ---- for lowering functions ----------------------------------------------------------------- */

typedef ampc_status (*ampc_cg_lower_fn)(ampc_cg *cg, const ampc_node *n);

/* The lowering functions, one per lower kind (the op table's lower column), each in the file of
 * the op family that owns the kind: lower_<family>.c, the family named as ir/infer/<family>.c
 * and ir/ref/<family>.c name it (LOWER_POOL: lower_conv.c, LOWER_MOVE: lower_movement.c). */
ampc_status ampc_cg_lower_elementwise(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_reduce(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_norm(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_contract(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_conv(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_pool(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_movement(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_index(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_control(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_collective(ampc_cg *cg, const ampc_node *n);
/* A data-dependent Loop's jumps (generate.c, for lower_control.c). ampc_cg_loop_open adds the
 * entry jump (past the loop when the int32 at go is 0) and marks the next step as the body's
 * first; ampc_cg_loop_close adds the back edge (to the body's first step while go is set, at
 * most `limit` iterations) and points the entry jump at the step after it. Regions do not nest. */
ampc_status ampc_cg_loop_open(ampc_cg *cg, const ampc_node *begin, ampc_rt_ref go);
ampc_status ampc_cg_loop_close(ampc_cg *cg, const ampc_node *end, ampc_rt_ref go, int64_t limit);
/* The families whose ops take another family's lower kind, which dispatches to them:
 * RNN/GRU/LSTM (lower_rnn.c, from the contractions), ampc.FusedAttention (lower_attention.c,
 * from the contractions), Einsum and Det (lower_linalg.c, from the contractions and the
 * reductions), Resize, Upsample, RoiAlign, MaxRoiPool, MaxUnpool and GridSample (lower_resize.c,
 * from the pools and the index ops), DFT, STFT and MelWeightMatrix (lower_signal.c, from the
 * contractions and the elementwise ops), the losses (lower_loss.c, from the norms), Quantize /
 * Dequantize / DynamicQuantizeLinear (lower_quant.c, from the elementwise ops and the
 * reductions). */
ampc_status ampc_cg_lower_rnn(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_attention(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_linalg(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_resize(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_signal(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_loss(ampc_cg *cg, const ampc_node *n);
ampc_status ampc_cg_lower_quant(ampc_cg *cg, const ampc_node *n);
/* A LayerNormalization or RMSNormalization whose output only a Cast reads, or a
 * BatchNormalization whose output only a Relu reads (fused, marked by fuse-elementwise): one
 * kernel writes the Cast's or Relu's output (lower_norm.c). */
ampc_status ampc_cg_lower_norm_cast(ampc_cg *cg, const ampc_node *norm, const ampc_node *cast);
/* A chain of fused elementwise ops (passes/fuse_elementwise.c) computed inside another kernel:
 * ampc_cg_chain_check fails (with the node) when a node of the chain ending at `last` has no
 * generated expression; ampc_cg_chain_element then emits, in kernel k, the computation of
 * element `i` (a variable of the code around it, the flat index into last's output) into a
 * local whose name goes into result (covering the chain's nodes, `last` too when cover_last). */
ampc_status ampc_cg_chain_check(ampc_cg *cg, const ampc_node *last);
void ampc_cg_chain_element(ampc_cg *cg, ampc_cg_kernel *k, const ampc_node *last, bool cover_last,
                           char *result, size_t size);
/* Emits, into kernel k, Gather node n's output element `i` (an expression) assigned to the
 * lvalue `dst`, reading its data from parameter px and its indices from pi; an index out of
 * range reads 0 (lower_index.c). The Gather kernel's body, and a Gather heading a fused chain
 * (lower_elementwise.c). */
void ampc_cg_gather_element(ampc_cg_kernel *k, const ampc_node *n, const char *px, const char *pi,
                            const char *i, const char *dst);

ampc_graph *ampc_cg_graph(ampc_cg *cg);
const ampc_cg_options *ampc_cg_opts(ampc_cg *cg);
/* Where a value lives (space, offset, bytes), from the memory plan. */
ampc_rt_ref ampc_cg_ref(ampc_cg *cg, const ampc_value *v);
/* Device bytes a step may use for its own partial results between its kernels (a split
 * reduction's partial sums): one region past every planned value, the same for every step that
 * asks (steps run one after another), so its content lasts from a step's first kernel to its
 * last only. The plan's arena grows by the largest size asked. */
ampc_rt_ref ampc_cg_scratch(ampc_cg *cg, int64_t bytes);
/* Whether two values share bytes (a view, or an op done in place). */
bool ampc_cg_same_bytes(ampc_cg *cg, const ampc_value *a, const ampc_value *b);

/* CUDA storage type of a dtype ("float", "__half", "__nv_bfloat16", "long long", "bool"...). */
const char *ampc_cg_ctype(ampc_dtype t);
/* The type kernels compute in: float for f32/f16/bf16, double for f64, long long for signed
 * integers, unsigned long long for unsigned ones, bool for bool. */
const char *ampc_cg_compute_type(ampc_dtype t);

/* ---- float constants in generated source (literal.c) ---------------------------------------- */
/* Every float a lowering writes into CUDA goes through these. A finite value is a decimal
 * literal that reads back to exactly that value ("0.20000000298023224", "-1e-05"; f32:
 * "0.200000003f", "1.0f"); NaN and the infinities, which have no literal in C or CUDA ("nan" and
 * "inf" do not compile), are their bits: "__builtin_bit_cast(double, 0x7ff0000000000000ULL)",
 * "__builtin_bit_cast(float, 0x7fc00000U)". Either form is one constant expression of type
 * double (f64) or float (f32), valid after a cast or an operator and in a static table's
 * initializer. A negative value starts with '-'. */
typedef struct ampc_cg_literal {
    char s[64];
} ampc_cg_literal;
ampc_cg_literal ampc_cg_f64(double v);
ampc_cg_literal ampc_cg_f32(float v);
void ampc_cg_put_f64(ampc_strbuf *sb, double v);
void ampc_cg_put_f32(ampc_strbuf *sb, float v);
/* v as a value of compute type ct: "((ct)<f64 literal>)" when finite (one rounding from double
 * to ct), else the bits in double for a double ct and in float otherwise, converted to ct. */
void ampc_cg_put_typed(ampc_strbuf *sb, const char *ct, double v);

/* ---- the kernel emitter --------------------------------------------------------------------- */

/* Starts kernel k<index>_<what> for node n (its comment names n; add fused nodes with
 * ampc_cg_kernel_covers). Never fails: errors surface at ampc_cg_kernel_end. */
ampc_cg_kernel *ampc_cg_kernel_begin(ampc_cg *cg, const ampc_node *n, const char *what);
void ampc_cg_kernel_covers(ampc_cg_kernel *k, const ampc_node *n);
/* Adds a pointer parameter for value v ("const T *pN" or "T *pN" when written) and returns its
 * name (valid until the kernel ends). */
const char *ampc_cg_param(ampc_cg_kernel *k, const ampc_value *v, bool written);
/* Adds a pointer parameter "[const ]<ctype> *pN" for the bytes at ref (data codegen made
 * itself, such as a compressed weight, that no graph value holds) and returns its name. */
const char *ampc_cg_param_ref(ampc_cg_kernel *k, ampc_rt_ref ref, const char *ctype, bool written);
/* Appends a line to the body at the current indentation (printf-style). */
void ampc_cg_line(ampc_cg_kernel *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends "<line> {" and indents / dedents and appends "}". */
void ampc_cg_open(ampc_cg_kernel *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ampc_cg_close(ampc_cg_kernel *k);
/* Closes a block with `end` instead of "}" (a lambda's "});"). */
void ampc_cg_close_with(ampc_cg_kernel *k, const char *end);
/* A fresh local name "<stem><n>" unique in the kernel. */
const char *ampc_cg_local(ampc_cg_kernel *k, const char *stem);
/* Finishes the kernel and adds its launch step: a 1-D launch of `threads` threads in blocks of
 * `block` (0: 256), the grid capped so a grid-stride loop covers the rest; the body must loop
 * "for (long long i = ...; i < n; i += stride)" itself: use ampc_cg_grid_loop. */
ampc_status ampc_cg_kernel_end(ampc_cg_kernel *k, int64_t threads, int32_t block);
/* Asks the compiler to keep k's registers low enough for `blocks` blocks an SM (the second
 * argument of __launch_bounds__), when occupancy matters more than registers. */
void ampc_cg_kernel_min_blocks(ampc_cg_kernel *k, int32_t blocks);
/* The kernel runs as clusters of 1 x 1 x z blocks where clusters exist (sm_90 and newer:
 * ampc::AMPC_CLUSTER_DIMS of common.cuh); the grid's z must be a multiple of z. */
void ampc_cg_kernel_cluster_z(ampc_cg_kernel *k, int32_t z);
/* The body calls ampc::pdl_enter itself, after reading only constants (common.cuh), instead of
 * as its first statement. */
void ampc_cg_kernel_pdl_in_body(ampc_cg_kernel *k);
/* The kernel becomes `count` launch steps, one after another, that differ only in its last
 * parameter, `const int rep`: 0, 1, ..., count - 1 (a recurrence: launch rep reads what launch
 * rep - 1 wrote; each waits for the one before, as every step does). Call once, after the other
 * parameters; returns the parameter's name. */
const char *ampc_cg_kernel_repeat(ampc_cg_kernel *k, int32_t count);
/* Finishes with an explicit launch shape and dynamic shared memory. */
ampc_status ampc_cg_kernel_end_launch(ampc_cg_kernel *k, const uint32_t grid[3],
                                      const uint32_t block[3], uint32_t smem);
/* The launch shape of the row kernels (reductions, scans, normalisations: lower_reduce.c,
 * lower_norm.c): n rows, w threads a row (1, 32 or a multiple of 32), per_block rows a block
 * (w 32: 8 rows, one a warp; w > 32: 1). */
typedef struct ampc_cg_rows {
    int64_t n;
    int32_t w, per_block;
} ampc_cg_rows;
/* How many threads share a row of `len` elements (contiguous: stride 1) among n_rows rows: one
 * when rows are short, or strided with enough rows that neighbouring threads read neighbouring
 * elements; else a warp (contiguous up to 1024) or a block. */
ampc_cg_rows ampc_cg_rows_make(int64_t n_rows, int64_t len, bool contiguous);
/* The first element of a row a thread handles ("0" for a thread a row). */
const char *ampc_cg_rows_tid(const ampc_cg_rows *r);
/* Opens the loop over the rows with index variable `row` (uniform across a row's threads). */
void ampc_cg_rows_open(ampc_cg_kernel *k, const ampc_cg_rows *r);
/* Finishes the kernel with the launch shape of r. */
ampc_status ampc_cg_rows_end(ampc_cg_kernel *k, const ampc_cg_rows *r);
/* Opens the grid-stride loop over [0, n) with index variable `i` (close with ampc_cg_close). */
void ampc_cg_grid_loop(ampc_cg_kernel *k, int64_t n);
/* The element loop of a memory-bound kernel: the body between ampc_cg_elem_open and
 * ampc_cg_elem_close computes element `i` (a lambda); each thread then takes AMPC_CG_UNROLL
 * elements a trip, a grid apart (each warp access stays contiguous), with the body inlined for
 * each, so that with __restrict__ parameters (ampc_cg_kernel_restrict) the compiler issues the
 * loads of all of them before the first is used: enough bytes in flight to reach the memory's
 * bandwidth. The rest, fewer than AMPC_CG_UNROLL a thread, one at a time. Below
 * AMPC_CG_UNROLL_MIN elements a thread takes one element a trip: a quarter of the threads would
 * leave a GPU's SMs short of warps (an H100 holds 270,336 threads at once). ampc_cg_elem_close
 * returns the threads to launch. */
enum { AMPC_CG_UNROLL = 4, AMPC_CG_UNROLL_MIN = 1 << 20 };
void ampc_cg_elem_open(ampc_cg_kernel *k);
int64_t ampc_cg_elem_close(ampc_cg_kernel *k, int64_t n);
/* Declares k's pointer parameters __restrict__ (call before the first ampc_cg_param): for a
 * kernel whose thread reads element i of an output-shaped input only before it writes element i
 * of the output, which stays correct when plan-memory puts the output in place of the input. */
void ampc_cg_kernel_restrict(ampc_cg_kernel *k);

/* Emits "long long <off> = ...;" computing, from the flat output index `idx` of a tensor of shape
 * `out`, the element offset into an operand of shape `in` that broadcasts to it (numpy rules).
 * Returns the offset variable's name ("idx" itself when the shapes match, "0" for one element). */
const char *ampc_cg_bcast_offset(ampc_cg_kernel *k, const ampc_shape *out, const ampc_shape *in,
                                 const char *idx);

/* Emits "long long <off> = ...;" computing, from the flat index `idx` of a tensor of shape `out`,
 * sum over its dims d of coordinate d times steps[d] (element steps of an operand read through a
 * view: a transpose's permuted strides, 0 for a broadcast dim). Returns the variable's name. */
const char *ampc_cg_strided_offset(ampc_cg_kernel *k, const ampc_shape *out, const int64_t *steps,
                                   const char *idx);

/* Row-major strides of dims[0..k) into st; returns their product. */
int64_t ampc_cg_row_strides(const int64_t *dims, int32_t k, int64_t *st);
/* The product of s's dims [lo, hi). */
int64_t ampc_cg_dims_prod(const ampc_shape *s, int32_t lo, int32_t hi);
/* "double" when any of vs[0..n) (NULL entries skipped) is f64, else "float": the type a kernel
 * accumulates floats in. */
const char *ampc_cg_acc_type(const ampc_value *const *vs, int32_t n);
/* Declares the coordinates o<d>_ of the last nk dims of `dims` (rank r) of flat index i, and
 * (when there are leading dims) r_, the flat index over the leading r - nk dims. */
void ampc_cg_split_trailing(ampc_cg_kernel *k, const int64_t *dims, int32_t r, int32_t nk);
/* An AMPC_E_UNSUPPORTED diagnostic for n: "<Op> has no GPU lowering <why>". */
ampc_status ampc_cg_unsupported(ampc_cg *cg, const ampc_node *n, const char *why);

/* Emits the row-major coordinates of flat index `idx` (< the product of dims) over
 * dims[0..rank-1] as locals, names[d] receiving each one's name ("0LL" for a unit dim). */
void ampc_cg_coords(ampc_cg_kernel *k, const int64_t *dims, int32_t rank, const char *idx,
                    const char **names);
/* Copies, over coordinates c in dims[0..rank-1], element src0 + sum(c[d] * src[d]) of x into
 * element dst0 + sum(c[d] * dst[d]) of y (element strides; a source stride of 0 repeats; dst
 * NULL: y row-major over dims, which then hold as many elements as y): a copy step when that is
 * one contiguous run, else a generated kernel (lower_movement.c, which lowers its own ops the same
 * way). */
ampc_status ampc_cg_view_copy(ampc_cg *cg, const ampc_node *n, const char *what,
                              const ampc_value *x, const ampc_value *y, const int64_t *dims,
                              int32_t rank, const int64_t *src, int64_t src0, const int64_t *dst,
                              int64_t dst0);
/* For a Transpose, Slice or Expand n: the tensor in memory it reads (its input, or, through
 * views never stored (fuse-elementwise), theirs), with *src0 and steps (one per dim of n's
 * output) such that output element c (row-major) is its element *src0 + sum(c[d] * steps[d]);
 * NULL for any other op. A fused elementwise chain reads such a node's input through it
 * (lower_elementwise.c). */
const ampc_value *ampc_cg_view_of(ampc_cg *cg, const ampc_node *n, int64_t *src0,
                                   int64_t *steps);

/* ---- library steps -------------------------------------------------------------------------- */

ampc_status ampc_cg_step_gemm(ampc_cg *cg, const ampc_node *n, const ampc_rt_gemm *p);
ampc_status ampc_cg_step_conv(ampc_cg *cg, const ampc_node *n, const ampc_rt_conv *p);
ampc_status ampc_cg_step_copy(ampc_cg *cg, const ampc_node *n, ampc_rt_ref src, ampc_rt_ref dst);
ampc_status ampc_cg_step_memset(ampc_cg *cg, const ampc_node *n, ampc_rt_ref dst);
/* Rank `rank`'s all-reduce of node n: the sum over the ranks of src lands in dst. */
ampc_status ampc_cg_step_allreduce(ampc_cg *cg, const ampc_node *n, int32_t rank, ampc_rt_ref src,
                                   ampc_rt_ref dst);

#endif /* AMPC_CODEGEN_H */
