/*
 * passes.h — the optimisation passes and their registry.
 *
 * A pass is one file and one entry function, ampc_pass_<name>(g, cx, &changed): it rewrites the
 * graph in place, sets *changed to whether it changed anything (a second run on its own output
 * must report false), and returns AMPC_OK or a status with a diagnostic recorded in the graph.
 * What the caller asked (precision, layout, partition, sparsity, GEMM and GELU choices) comes in
 * the context cx, and what a pass decided beyond the graph itself (rows for --report, what the
 * math: line names) goes to cx's report; the graph carries only what describes it (its nodes,
 * values, ranks and stages). Diagnostics stay with the graph, where import and inference record
 * theirs too. Passes leave the graph valid for ampc_ir_verify; the pipeline (pipeline.c) runs
 * the verifier between passes when asked (tests always ask).
 *
 * The registry is one table in pipeline.c, in pipeline order: name, entry function, one line of
 * description. Adding a pass: write passes/<name>.c, declare its entry here, add its row to the
 * table at its place in the order.
 */
#ifndef AMPC_PASSES_H
#define AMPC_PASSES_H

#include "ir/ir.h"
#include "ir/movement.h" /* ampc_transpose_perm */

/* What the sparsity pass found for one contraction or convolution (ampc_sparse_layer.status;
 * ampc_sparse_why_str). */
typedef enum ampc_sparse_why {
    SPARSE_WHY_ALREADY,      /* the weight is already 2:4 along K: marked, numbers unchanged */
    SPARSE_WHY_PRUNED,       /* pruned to 2:4 and marked (PRUNE) */
    SPARSE_WHY_DENSE,        /* eligible but not 2:4, and VERIFY does not prune */
    SPARSE_WHY_UNSELECTED,   /* eligible, not 2:4, and not matched by the sparsity_layers glob */
    SPARSE_WHY_NOT_CONSTANT, /* the weight is not a compile-time constant */
    SPARSE_WHY_DTYPE,        /* the weight is not f32, f16 or bf16 */
    SPARSE_WHY_SHAPE,        /* the weight is not a matrix (MatMul, Gemm) */
    SPARSE_WHY_K,            /* K is not a multiple of 4 (MatMul, Gemm) */
    SPARSE_WHY_CHANNELS,     /* C/group is not a multiple of 4 (Conv: groups run along channels) */
    SPARSE_WHY_EMPTY,        /* the weight has no elements */
} ampc_sparse_why;
const char *ampc_sparse_why_str(ampc_sparse_why why);

/* One row of the sparsity pass's per-layer record (ampc_pipeline_report.sparse_layers), for
 * --report. */
typedef struct ampc_sparse_layer {
    const char *node;      /* the node's name (graph arena) */
    ampc_opcode op;
    ampc_shape shape;      /* the weight's shape */
    int64_t k;             /* the reduction dimension (conv: C/group * prod(kernel)) */
    ampc_sparse_why status;
    double energy_removed; /* pruned: sum of the removed w^2 over the sum of all w^2; else 0 */
} ampc_sparse_layer;

/* One row of the partition pass's record (ampc_pipeline_report.partition_blocks), for --report:
 * each block it split and each attention block it left whole, with why. */
typedef struct ampc_partition_block {
    const char *node; /* the block's row-parallel matmul (graph arena) */
    const char *kind; /* "mlp" or "attention" */
    bool split;
    const char *why;  /* what each rank takes, or why the block stays whole (graph arena) */
} ampc_partition_block;

/* One stage chosen by the pipeline pass (ampc_pipeline_report.stages), for --report. */
typedef struct ampc_pipeline_stage {
    const char *first, *last; /* its first and last node (graph arena) */
    int32_t n_nodes;          /* nodes it runs, transfers in excluded */
    double cost;              /* estimated: FLOPs of contractions and convolutions + bytes moved */
    int32_t n_cross;          /* tensors sent to the next stage (0 for the last) */
    int64_t cross_bytes;      /* their bytes per micro-batch */
    const char *crossing;     /* their names, comma-separated (graph arena) */
} ampc_pipeline_stage;

/* What a pipeline run decided beyond the graph (ampc_pipeline_options.report): the caller owns
 * the struct, the rows live in the graph's arena. Each run that is given one rewrites it. */
struct ampc_pipeline_report {
    ampc_sparse_layer *sparse_layers; /* the sparsity pass: a row per contraction or convolution */
    int32_t n_sparse_layers;
    ampc_partition_block *partition_blocks; /* the partition pass: each block split or whole */
    int32_t n_partition_blocks, cap_partition_blocks;
    ampc_pipeline_stage *stages; /* the pipeline pass: the stages it chose */
    int32_t n_stages;
    /* What rounds differently from the model as written, for the compile's `math:` line
     * (compiler/math.c): erf GELUs fuse-matmul put in GELU's tanh form (--fast-gelu), and scalar
     * products fold-scale moved into constant weights. */
    int32_t n_tanh_gelus, n_folded_scales;
};

/* What a pass is given beside the graph. A NULL context is the defaults: every option off or
 * zero (ampc_pipeline_options zero-initialised, channels-last layout on) and nothing reported. */
typedef struct ampc_pass_ctx {
    const ampc_pipeline_options *opt; /* never NULL inside a pass: ampc_pass_opt */
    ampc_pipeline_report *report;     /* NULL: decisions not recorded */
} ampc_pass_ctx;

/* cx's options, or the defaults for a NULL context (or one without options). */
const ampc_pipeline_options *ampc_pass_opt(const ampc_pass_ctx *cx);
/* cx's report, or NULL. */
static inline ampc_pipeline_report *ampc_pass_report(const ampc_pass_ctx *cx) {
    return cx ? cx->report : NULL;
}

typedef ampc_status (*ampc_pass_fn)(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);

typedef struct ampc_pass_info {
    const char *name; /* as the command line spells it: "fold", "plan-memory" */
    ampc_pass_fn run;
    const char *description; /* one line, for ampc_pipeline_print and --help */
} ampc_pass_info;

/* The registered passes in pipeline order; *count receives their number. */
const ampc_pass_info *ampc_pass_list(int32_t *count);
/* The pass of that name, or NULL when there is none. */
const ampc_pass_info *ampc_pass_find(const char *name);
/* The registered names joined by ", " (malloc'ed), for messages that list the valid names. */
char *ampc_pass_names(void);

/* Runs the pipeline (ampc_graph_optimize without the NULL-options default); see ampc.h for the
 * options. Fails without running anything when the graph already has errors or an option names
 * an unknown pass; stops at the first pass that fails or leaves the graph invalid. */
ampc_status ampc_pipeline_run(ampc_graph *g, const ampc_pipeline_options *o);
/* Runs one pass by name with the same tracing, verification and dumping as the pipeline
 * (golden tests and `ampc --pass`); an unknown name is an error listing the valid ones. */
ampc_status ampc_pipeline_run_pass(ampc_graph *g, const char *name, const ampc_pipeline_options *o);

/* ---- shared by the fusion passes (uses.c) --------------------------------------------------- */

/* How many times each value (by id) is used, node inputs plus 2 for a graph output (so an
 * output never counts as used once), and for each the last node reading it. */
typedef struct ampc_uses {
    int32_t *count;
    ampc_node **user;
    int32_t n; /* the values it covers: ids below n */
} ampc_uses;

ampc_status ampc_pass_uses(const ampc_graph *g, ampc_uses *u); /* AMPC_E_OOM, nothing recorded */
void ampc_pass_uses_free(ampc_uses *u);
/* Covers the values made since (no reader yet); AMPC_E_OOM leaves it as it was. */
ampc_status ampc_pass_uses_grow(const ampc_graph *g, ampc_uses *u);
/* The live node reading v when v is used exactly once; else NULL. */
ampc_node *ampc_pass_only_user(const ampc_uses *u, const ampc_value *v);
/* A value seen as a strided view of a tensor in memory: element c of the value (rank r, its dims
 * outermost first) is element off + sum(c[d] * st[d]) of src, row-major. */
typedef struct ampc_pass_view {
    ampc_value *src;
    int64_t off;
    int64_t st[AMPC_MAX_RANK];
} ampc_pass_view;
/* The view of x as itself: src x, offset 0, its row-major strides. */
void ampc_pass_view_init(ampc_pass_view *v, ampc_value *x);
/* Steps v one node back when src's producer only re-indexes its input 0: Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity, Transpose, Split, Expand (its broadcast dims step 0), or a Gather
 * of one constant index. v then reads that input (same elements, same order over dims[0..r-1],
 * the viewed value's dims); false, v unchanged, for any other producer or when the view's steps
 * would not stay inside the dims they step along (a merged dim read with a stride that crosses
 * it). */
bool ampc_pass_view_step(ampc_pass_view *v, int32_t r, const int64_t *dims);
/* After a fusion rewrote node n's inputs: n is now the user of each of them. */
void ampc_pass_uses_moved(ampc_uses *u, ampc_node *n);
/* Turns node n, the last node of a matched pattern, into `op` with these inputs and attributes
 * (copied into the graph's arena), keeping its output and its place in the order (after every
 * input of the pattern); updates the use index and runs inference. The caller removes the
 * pattern's other nodes. */
ampc_status ampc_pass_rewrite(ampc_graph *g, ampc_node *n, ampc_opcode op, const char *name,
                              ampc_value *const *in, int32_t n_in, const ampc_attr *attrs,
                              int32_t n_attrs, ampc_uses *u);

/* Passes that replace a node by several (flatten-control and the onnx-* passes) append
 * the new nodes from position first_new on, then either undo them or replace the node.
 * ampc_pass_undo removes every node from first_new on and the diagnostics recorded since there
 * were diags of them, without compacting the graph (the nodes stay, dead, in their places: the
 * caller compacts, which drops them and the constants made for them, once it no longer walks
 * the nodes or holds a first_new). ampc_pass_replace_node removes n and
 * gives each of its outputs i (keeping their names and places) the value out[i] through an
 * Identity node (a NULL out[i]: an output nothing reads), then settles the new nodes; AMPC_E_OOM,
 * or AMPC_E_UNSUPPORTED for a node of more than AMPC_PASS_MAX_OUTPUTS outputs.
 * ampc_pass_replace_each is such a pass's loop: for each live node `match` takes, build(g, n, out)
 * appends the replacement and sets out[0 .. n's outputs); AMPC_OK replaces the node,
 * AMPC_E_UNSUPPORTED undoes and leaves it, any other status undoes and fails the pass naming the
 * node ("<what> failed: ..."). *changed says whether a node was replaced (the graph is
 * compacted at the end of the sweep, and after an undo). */
enum { AMPC_PASS_MAX_OUTPUTS = 256 };
typedef ampc_status (*ampc_pass_build_fn)(ampc_graph *g, ampc_node *n, ampc_value **out);
void ampc_pass_undo(ampc_graph *g, int32_t first_new, int32_t diags);
ampc_status ampc_pass_replace_node(ampc_graph *g, ampc_node *n, ampc_value *const *out,
                                   int32_t first_new);
ampc_status ampc_pass_replace_each(ampc_graph *g, bool (*match)(const ampc_node *n),
                                   ampc_pass_build_fn build, const char *what, bool *changed);
/* Such a pass's builders. ampc_pass_node1: a new node of op with one output, returned; NULL when
 * an input is NULL (a value the caller could not make), inference refuses the node or memory ran
 * out (the caller then undoes). ampc_pass_const_i64s: an i64 constant of the given dims (rank 0:
 * a scalar) holding v; NULL on OOM. */
ampc_value *ampc_pass_node1(ampc_graph *g, ampc_opcode op, const char *name,
                            ampc_value *const *in, int32_t n_in, const ampc_attr *at, int32_t n_at);
ampc_value *ampc_pass_const_i64s(ampc_graph *g, int32_t rank, const int64_t *dims,
                                 const int64_t *v);
/* And the common nodes, each NULL as ampc_pass_node1 is: a binary op of a and b; x reshaped to
 * dims[0 .. rank); x[from:to] along axis. */
ampc_value *ampc_pass_binary(ampc_graph *g, ampc_opcode op, const char *name, ampc_value *a,
                             ampc_value *b);
ampc_value *ampc_pass_reshape(ampc_graph *g, const char *name, ampc_value *x, int32_t rank,
                              const int64_t *dims);
ampc_value *ampc_pass_slice(ampc_graph *g, const char *name, ampc_value *x, int64_t axis,
                            int64_t from, int64_t to);

/* ---- the passes --------------------------------------------------------------------------- */

/* A GPU build's control flow known when compiling (constant trip counts, Scan, If) written into
 * the graph (flatten_control.c). */
ampc_status ampc_pass_flatten_control(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* A GPU build's ONNX Attention as ampc.FusedAttention, its masks and caches as nodes
 * (onnx_attention.c). */
ampc_status ampc_pass_onnx_attention(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* A GPU build's ONNX RotaryEmbedding as slices, products and joins (onnx_rotary.c). */
ampc_status ampc_pass_onnx_rotary(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* A GPU build's 2-D ONNX DeformConv as GridSample per offset group and MatMul
 * (onnx_deform_conv.c). */
ampc_status ampc_pass_onnx_deform_conv(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Constant folding: evaluates every node whose inputs are all known, turning its outputs into
 * constants (fold.c). */
ampc_status ampc_pass_fold(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Common-subexpression elimination: merges identical nodes and identical small constants
 * (cse.c). */
ampc_status ampc_pass_cse(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Nodes that only restate their input: an Expand to its input's own shape and a Concat whose
 * inputs but one are empty are removed (their readers read the input), a Gather of a whole axis in order becomes a Reshape, a Cast or
 * Not read only by a shape view moves past it (simplify.c). */
ampc_status ampc_pass_simplify(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Dead-code elimination: removes nodes the graph outputs do not depend on, then compacts
 * (dce.c). */
ampc_status ampc_pass_dce(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Mixed precision: under --precision fp16|bf16, f32 tensors move to the low type as the op
 * table's prec column says, with casts where types meet and at the graph's edges; constants are
 * converted; casts that do nothing or round-trip through a wider type are removed; each node's
 * reason is left in prec_why (precision.c). Does nothing in the default (keep) mode. */
ampc_status ampc_pass_precision(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* 2:4 structured sparsity: under --sparsity verify marks (sparse24 = 1) the contractions and
 * convolutions whose constant weight is already 2:4 along K; under prune magnitude-prunes the
 * eligible ones (those the sparsity_layers glob matches) to 2:4 and marks them; one record per
 * candidate in the report's sparse_layers (sparsity.c). Does nothing in the default (off) mode. */
ampc_status ampc_pass_sparsity(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Softmax with the exporters' NaN guard, Where(IsNaN(s), 0, s), into one ampc.SafeSoftmax
 * (fuse_softmax.c). */
ampc_status ampc_pass_fuse_softmax(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Attention: MatMul(Q, K^T) -> [scale] -> [+ mask] -> Softmax/SafeSoftmax -> MatMul(., V)
 * [-> merge heads] into one ampc.FusedAttention reading Q, K, V through strides
 * (fuse_attention.c). */
ampc_status ampc_pass_fuse_attention(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* x @ Wq + bq, x @ Wk + bk, x @ Wv + bv read only by one ampc.FusedAttention become one MatMul
 * of the joined weights (and one bias Add) whose columns the node reads through its offsets
 * (fuse_qkv.c). */
ampc_status ampc_pass_fuse_qkv(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Convolution epilogues: Conv -> [Add residual] -> [Relu] into one ampc.FusedConv
 * (fuse_conv.c). */
ampc_status ampc_pass_fuse_conv(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* GELU written out (Div/Mul by sqrt 2, Erf, Add 1, Mul by x and by 0.5) into one Gelu node
 * (fuse_gelu.c). */
ampc_status ampc_pass_fuse_gelu(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Matmul epilogues: MatMul by a matrix -> [Add bias] -> [Add residual] -> [Relu] into one
 * ampc.FusedMatMul, a single cuBLASLt call (fuse_matmul.c). */
ampc_status ampc_pass_fuse_matmul(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Scale folding: Mul by a scalar constant after a matmul with constant weights (through
 * Reshape/Transpose) becomes scaled weights and bias (fold_scale.c). */
ampc_status ampc_pass_fold_scale(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Values between elementwise nodes of one shape are marked AMPC_VALUE_FUSED: one kernel computes
 * the chain (fuse_elementwise.c). */
ampc_status ampc_pass_fuse_elementwise(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Data parallelism (--gpus N --partition data): the graph becomes one GPU's share of the batch
 * (dim 0 of inputs and outputs divided by N, shapes inferred again, Reshape targets rewritten),
 * g->data_ranks = N; refuses, naming the node, what would mix rows (partition_data.c). */
ampc_status ampc_pass_partition_data(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Pipeline parallelism (--gpus N --partition pipeline): the graph cut into N consecutive stages
 * balanced by estimated cost, node rank = stage, ampc.PeerCopy at the cuts; the stages chosen in
 * the report's stages (partition_pipeline.c). partition-data made it one micro-batch before. */
ampc_status ampc_pass_partition_pipeline(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Tensor parallelism (--gpus N --partition tensor): matmul pairs with constant weights split
 * column- then row-wise into N ranks with one ampc.AllReduce (partition.c), attention blocks
 * likewise by heads (partition_heads.c); decisions in the report's partition_blocks. */
ampc_status ampc_pass_partition(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Layout (unless --layout nchw): 2-D f16/bf16 convolutions become channels-last
 * ampc.FusedConv (NHWC data, weights permuted at compile time), with Transposes only where the
 * layout changes (layout.c). */
ampc_status ampc_pass_layout(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* The RMS norm written out (x / Sqrt(ReduceMean(x^2) + eps), or x * Reciprocal(...)) becomes one
 * RMSNormalization (fuse_norm.c). */
ampc_status ampc_pass_fuse_norm(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* A Transpose of a Transpose becomes one Transpose of the first's input, or nothing when the
 * two cancel (fold_transpose.c). */
ampc_status ampc_pass_fold_transpose(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* A run of movement ops that keep the last dim (Transposes, Gathers by constant indices,
 * reshapes) becomes one Gather of rows by a constant table (row_gather.c). */
ampc_status ampc_pass_row_gather(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);
/* Memory planning: weights offsets for constants, arena offsets for everything else by
 * liveness, views and in-place elementwise sharing bytes (plan_memory.c). */
ampc_status ampc_pass_plan_memory(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed);

#endif /* AMPC_PASSES_H */
