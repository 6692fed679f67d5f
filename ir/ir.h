/*
 * ir.h — ampc's intermediate representation.
 *
 * A graph owns an arena holding its values (tensors: dtype, static shape, optional known data),
 * its nodes (an op from the op table, typed attributes, inputs, outputs) and every string. Nodes
 * are kept in topological order. Both front ends (ONNX, the C DSL) build graphs through
 * ampc_ir_node_build, which runs the op's shape/dtype inference from the op table, so the shape
 * rules exist once. The layers after this one (passes, codegen) read and rewrite the same
 * structures.
 *
 * Values with `data` are constants (weights, folded results). A value produced by a node may also
 * carry data: the builder evaluates small all-constant nodes eagerly so that shape computations
 * exported by frameworks (Shape -> Gather -> Concat -> Reshape) resolve as the graph is built;
 * the fold pass later removes such nodes.
 */
#ifndef AMPC_IR_H
#define AMPC_IR_H

#include "base.h"
#include "diag.h"

/* ---- the op table --------------------------------------------------------------------------- */

typedef enum ampc_opcode {
#define OP(id, onnx, lo, hi, min_in, max_in, min_out, max_out, cin, traits, prec, infer, ref, lower)     \
    AMPC_OP_##id,
#include "ops.def"
#undef OP
    AMPC_OP_COUNT
} ampc_opcode;

/* Traits: what passes may assume about an op (asked with ampc_op_has). */
enum {
    T_ELEMWISE = 1u << 0,  /* output element i depends only on input elements i (after bcast) */
    T_BCAST = 1u << 1,     /* inputs broadcast numpy-style */
    T_COMMUT = 1u << 2,    /* binary and commutative */
    T_REDUCE = 1u << 3,    /* reduces over axes */
    T_CONTRACT = 1u << 4,  /* a contraction (MatMul, Gemm): runs on tensor cores */
    T_CONV = 1u << 5,      /* a convolution */
    T_POOL = 1u << 6,      /* a window reduction */
    T_NORM = 1u << 7,      /* a normalisation with statistics */
    T_MOVE = 1u << 8,      /* moves or copies elements without arithmetic */
    T_SHAPEONLY = 1u << 9, /* output depends on input shapes only, never on their data */
    T_NOFOLD = 1u << 10,   /* never constant-folded (random, or output too large to fold) */
    T_VIEW = 1u << 11,     /* output is input 0 reinterpreted (same bytes, new shape) */
    T_INTERNAL = 1u << 12, /* ampc's own op ("ampc." name), written by passes, never imported */
};

/* How the GPU layer will lower an op (codegen maps each kind to its emitter). */
typedef enum ampc_lower_kind {
    LOWER_NONE,        /* resolved at compile time (Shape, Constant) or no GPU work (Identity) */
    LOWER_ELEMENTWISE, /* a generated elementwise kernel, fusible */
    LOWER_REDUCE,      /* a generated reduction kernel */
    LOWER_NORM,        /* softmax and normalisations: generated single-pass kernels */
    LOWER_CONTRACT,    /* cuBLASLt or generated tensor-core GEMM */
    LOWER_CONV,        /* cuDNN */
    LOWER_POOL,        /* generated window kernel */
    LOWER_MOVE,        /* generated gather/copy kernel (transpose, concat, slice...) */
    LOWER_INDEX,       /* data-dependent indexing (Gather, Scatter, TopK...) */
    LOWER_CONTROL,     /* a data-dependent Loop's marks (ampc.LoopBegin, ampc.LoopEnd): jumps */
    LOWER_COLLECTIVE,  /* a collective between GPUs (ampc.AllReduce): an NCCL step */
    LOWER_REFERENCE,   /* no GPU lowering yet: the reference evaluator only (docs/adding-an-op.md) */
} ampc_lower_kind;

/* What the precision pass does with an op under --precision fp16/bf16 (ops.def's prec column). */
typedef enum ampc_prec_policy {
    PREC_FOLLOW, /* computes in the type of its float inputs: low when they are */
    PREC_LOW,    /* always in the low type (tensor-core contractions and convolutions) */
    PREC_F32,    /* stays f32: its inputs are cast back when they arrive in the low type */
    PREC_NORM,   /* FOLLOW under fp16, F32 under bf16 (normalisations of a residual stream) */
} ampc_prec_policy;

/* Why the precision pass left a node where it is (ampc_node.prec_why; ampc_prec_why_str). */
typedef enum ampc_prec_why {
    PREC_WHY_NONE,    /* the pass did not run, or the node has no f32 tensor to move */
    PREC_WHY_LOW,     /* policy LOW: runs in the low type */
    PREC_WHY_FOLLOW,  /* policy FOLLOW: runs in the type its inputs arrive in */
    PREC_WHY_POLICY,  /* policy F32: stays f32 */
    PREC_WHY_KEEP,    /* named by keep_fp32 (--keep-fp32) */
    PREC_WHY_RANGE,   /* a constant input holds a finite value beyond f16's range */
    PREC_WHY_TYPES,   /* the op does not take its inputs in the low type */
    PREC_WHY_AUTO,    /* --precision auto's search moved it back (auto_fp32) */
} ampc_prec_why;
const char *ampc_prec_why_str(ampc_prec_why why);

typedef struct ampc_graph ampc_graph;
typedef struct ampc_node ampc_node;
typedef struct ampc_value ampc_value;

/* A tensor handed to a reference kernel (same layout as the public ampc_tensor). */
typedef ampc_tensor ampc_ref_tensor;

/* Shape/dtype inference: reads n->inputs (and their data for inputs that must be constant) and
 * attributes, sets every n->outputs[i]->dtype and ->shape, or records a diagnostic and returns
 * its status. */
typedef ampc_status (*ampc_infer_fn)(ampc_graph *g, ampc_node *n);
/* Reference evaluation: computes out[i] (allocated by the caller to the inferred dtype and
 * shape, zero-filled) from in[i] (NULL for absent optional inputs). Value-dependent failures
 * (an index out of range) record a diagnostic against the node. */
typedef ampc_status (*ampc_ref_fn)(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                   ampc_tensor *const *out);

typedef struct ampc_op_info {
    const char *name;     /* enum name, upper case: "ADD" */
    const char *onnx;     /* ONNX op type: "Add" */
    int16_t opset_lo;     /* first ONNX opset of the default domain whose semantics we implement */
    int16_t opset_hi;     /* last one (0: still current) */
    int16_t min_in, max_in;   /* max_in < 0: variadic */
    int16_t min_out, max_out;
    uint32_t const_inputs;    /* bit i: input i must be known at compile time (shapes, axes) */
    uint32_t traits;
    ampc_prec_policy prec;
    ampc_infer_fn infer;
    ampc_ref_fn ref;
    ampc_lower_kind lower;
} ampc_op_info;

extern const ampc_op_info ampc_op_table[AMPC_OP_COUNT];

static inline const ampc_op_info *ampc_op_get(ampc_opcode op) { return &ampc_op_table[op]; }
static inline bool ampc_op_has(ampc_opcode op, uint32_t traits) {
    return (ampc_op_table[op].traits & traits) != 0;
}
/* Whether op's output is a strided view of its input (a first element and a step per dim:
 * Transpose, Slice, Expand), which a kernel may read in place instead of a copy of it
 * (fuse-elementwise, codegen/lower_movement.c ampc_cg_view_of). */
static inline bool ampc_op_is_strided_view(ampc_opcode op) {
    return op == AMPC_OP_TRANSPOSE || op == AMPC_OP_SLICE || op == AMPC_OP_EXPAND;
}
/* For a node of a reference-only op (lowering kind REFERENCE) that a GPU build's passes rewrite
 * in all but some forms (onnx-attention, onnx-deform-conv), what makes this node one of those,
 * for code generation's message; NULL for every other node. */
const char *ampc_op_reference_why(const ampc_node *n);
/* The most inputs of a Concat that a kernel reads in place instead of a copy of it
 * (fuse-elementwise's concat_into_norm; codegen/lower_norm.c): each is a parameter of the
 * kernel reading it, and a branch where it picks the input holding an element. */
enum { AMPC_CONCAT_READ_MAX = 64 };
/* Whether input i of an op must be present (a NULL slot is ONNX's omitted optional input):
 * the first min_in are, and so is every input of a variadic op (ONNX cannot omit one of
 * Sum's or Concat's inputs) except Loop's trip count and condition (and those of its marks,
 * ampc.LoopBegin's inputs 0 and 1 and ampc.LoopEnd's 2 and 3: ir/subgraph.h). */
static inline bool ampc_op_input_required(ampc_opcode op, int32_t i) {
    const ampc_op_info *info = &ampc_op_table[op];
    if (op == AMPC_OP_LOOP || op == AMPC_OP_LOOP_BEGIN) return i >= 2;
    if (op == AMPC_OP_LOOP_END) return i != 2 && i != 3;
    if (i < info->min_in) return true;
    return info->max_in < 0;
}
/* Looks an op up by ONNX op type; false when it is not in the table. */
bool ampc_op_from_onnx(const char *onnx, ampc_opcode *out);

/* ---- values, attributes, nodes -------------------------------------------------------------- */

enum {
    AMPC_VALUE_INPUT = 1u << 0,  /* a graph input */
    AMPC_VALUE_OUTPUT = 1u << 1, /* a graph output */
    AMPC_VALUE_POISON = 1u << 2, /* construction failed; dtype/shape meaningless */
    /* computed in registers inside the kernel of its one reader, never stored: no memory
     * (passes/fuse_elementwise.c) */
    AMPC_VALUE_FUSED = 1u << 3,
};

struct ampc_value {
    int32_t id;           /* index in graph->values; stable until ampc_ir_graph_compact */
    const char *name;     /* unique in the graph */
    ampc_dtype dtype;
    ampc_shape shape;
    void *data;           /* known contents (numel * dtype size bytes, row-major), or NULL */
    ampc_node *producer;  /* NULL for graph inputs and constants */
    uint32_t flags;
    /* Where the value lives on the device, decided by the plan-memory pass: mem_space is
     * AMPC_MEM_NONE until then, AMPC_MEM_ARENA (activations, inputs, outputs) or AMPC_MEM_WEIGHTS
     * (constants); mem_offset is in bytes, 256-aligned. Views share their source's bytes. */
    uint8_t mem_space;
    int64_t mem_offset;
};

enum { AMPC_MEM_NONE = 0, AMPC_MEM_ARENA = 1, AMPC_MEM_WEIGHTS = 2, AMPC_MEM_ALIGN = 256 };

typedef struct ampc_attr {
    const char *name;
    ampc_attr_kind kind;
    int32_t n; /* element count for list kinds */
    union {
        int64_t i;
        float f;
        const char *s;
        int64_t *ints;
        float *floats;
        const char **strings;
        ampc_value *tensor;    /* a constant, not in graph->values */
        ampc_graph *graph;     /* a subgraph (If/Loop bodies), owned by the parent graph */
    };
} ampc_attr;

struct ampc_node {
    int32_t id;            /* position in graph->nodes */
    ampc_opcode op;
    const char *name;      /* the model's node name, or a generated one; never NULL */
    int32_t n_inputs, n_outputs, n_attrs;
    ampc_value **inputs;   /* entries NULL for absent optional inputs */
    ampc_value **outputs;
    ampc_attr *attrs;
    bool dead;             /* removed; swept by ampc_ir_graph_compact */
    uint8_t prec_why;      /* ampc_prec_why: set by the precision pass */
};

struct ampc_graph {
    ampc_arena arena;
    const char *name;
    ampc_node **nodes;     /* topological order */
    int32_t n_nodes, cap_nodes;
    ampc_value **values;
    int32_t n_values, cap_values;
    ampc_value **inputs;
    int32_t n_inputs, cap_inputs;
    ampc_value **outputs;
    int32_t n_outputs, cap_outputs;
    ampc_strmap names;     /* value name -> value */
    int64_t next_name;     /* counter for generated names */
    int64_t opset;         /* default-domain opset of the source model (0: the newest) */
    ampc_diag diag;
    char *errors_text;     /* cache for ampc_graph_errors */
    ampc_graph **subgraphs;/* attribute graphs owned by this graph */
    int32_t n_subgraphs;
    int64_t arena_bytes;   /* set by plan-memory: device arena size */
    int64_t weights_bytes; /* set by plan-memory: constant blob size */
    /* Set by partition-data (and read back from the IR text): the graph is one GPU's share of a
     * batch split over data_ranks GPUs (its inputs and outputs hold B / data_ranks rows of the
     * model's batch B); 0 when the batch is whole. Code generation makes one plan per GPU from
     * it. */
    int32_t data_ranks;
    /* Set by the pipeline partition (and read back from the IR text): the graph's inputs and
     * outputs hold one of micro_batches parts of the batch (partition-data's split, by parts
     * instead of GPUs), and its nodes run in pipeline_stages consecutive stages, node rank =
     * stage, with ampc.PeerCopy at the cuts. 0 when not pipelined. */
    int32_t micro_batches, pipeline_stages;
    /* The reference evaluator's bound on the iterations of one Loop execution
     * (ampc_graph_set_max_loop_iterations; 0: AMPC_DEFAULT_MAX_LOOP_ITERATIONS). A Loop node
     * hands it to its body graphs as they run, so nested Loops share it. */
    int64_t max_loop_iterations;
    /* The reference evaluator rounds the f32 operands of contractions and convolutions (the ops
     * with T_CONTRACT or T_CONV) to TF32 before it multiplies, as the GPU's TF32 math reads them
     * (ampc_graph_set_reference_tf32; --precision auto's check of a TF32 build). */
    bool ref_tf32;
};

/* ---- building ------------------------------------------------------------------------------- */

/* Creates a value with a unique name (NULL or a taken name: a fresh one is generated from `hint`).
 * Returns NULL only on OOM. */
ampc_value *ampc_ir_value_new(ampc_graph *g, const char *name, ampc_dtype dtype,
                              const ampc_shape *shape);
/* Creates a constant whose data (copied) is numel * dtype size bytes. NULL on OOM. */
ampc_value *ampc_ir_const_new(ampc_graph *g, const char *name, ampc_dtype dtype,
                              const ampc_shape *shape, const void *data);
/* A value flagged as poison with the given name. */
ampc_value *ampc_ir_poison_new(ampc_graph *g, const char *name);
/* Renames a value; fails (AMPC_E_INVALID_ARG with a diagnostic) when the name is taken. */
ampc_status ampc_ir_value_rename(ampc_graph *g, ampc_value *v, const char *name);
ampc_value *ampc_ir_value_find(const ampc_graph *g, const char *name);

ampc_status ampc_ir_graph_add_input(ampc_graph *g, ampc_value *v);
ampc_status ampc_ir_graph_add_output(ampc_graph *g, ampc_value *v);

/* Appends a node with the given inputs and attributes (copied into the arena). Outputs are
 * created, named from `out_names` when given (entries may be NULL). Then the op's arity is
 * checked, inference runs, and small all-constant nodes are evaluated so their outputs carry
 * data. On failure the outputs are poisoned, a diagnostic names the node, and the status is
 * returned; *out_node (may be NULL) always receives the node. */
ampc_status ampc_ir_node_build(ampc_graph *g, ampc_opcode op, const char *name,
                               ampc_value *const *inputs, int32_t n_inputs,
                               const ampc_attr *attrs, int32_t n_attrs, int32_t n_outputs,
                               const char *const *out_names, ampc_node **out_node);
/* Appends a node without running inference (the parser uses it: shapes come from the text);
 * outputs are given. */
ampc_node *ampc_ir_node_append(ampc_graph *g, ampc_opcode op, const char *name,
                               ampc_value *const *inputs, int32_t n_inputs,
                               const ampc_attr *attrs, int32_t n_attrs,
                               ampc_value *const *outputs, int32_t n_outputs);
/* Runs the op's arity checks and inference on an existing node. */
ampc_status ampc_ir_node_infer(ampc_graph *g, ampc_node *n);
/* Marks a node dead and clears its outputs' producer. */
void ampc_ir_node_remove(ampc_graph *g, ampc_node *n);
/* Drops dead nodes and values nothing refers to; renumbers ids. */
void ampc_ir_graph_compact(ampc_graph *g);
/* Replaces every use of a value (node inputs, graph outputs) following map[old->id] when not
 * NULL; one sweep over the graph. */
void ampc_ir_graph_replace_uses(ampc_graph *g, ampc_value *const *map);
/* Makes r graph output i in place of the value there, which hands r its name (unless r is
 * itself part of the interface). */
void ampc_ir_graph_replace_output(ampc_graph *g, int32_t i, ampc_value *r);
/* Moves the nodes appended since position first_new (whose inputs come from graph inputs,
 * constants, nodes before first_new or earlier appended nodes) to just after the producers of
 * their inputs, keeping every other order; renumbers ids. Passes that insert nodes (casts,
 * layout transposes) append them and settle once. */
void ampc_ir_graph_settle(ampc_graph *g, int32_t first_new);

/* Allocates arena memory; records an OOM diagnostic and returns NULL on exhaustion. */
void *ampc_ir_alloc(ampc_graph *g, size_t n);

/* ---- attributes ----------------------------------------------------------------------------- */

const ampc_attr *ampc_ir_attr_find(const ampc_node *n, const char *name);
/* Typed attribute readers. A missing attribute gives `dflt`; one of the wrong kind records a
 * diagnostic and gives `dflt` (check the graph status). */
int64_t ampc_ir_attr_int(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt);
float ampc_ir_attr_float(ampc_graph *g, const ampc_node *n, const char *name, float dflt);
const char *ampc_ir_attr_string(ampc_graph *g, const ampc_node *n, const char *name,
                                const char *dflt);
/* The ints list (count in *count), or NULL with *count = 0 when missing or mistyped. */
const int64_t *ampc_ir_attr_ints(ampc_graph *g, const ampc_node *n, const char *name,
                                 int32_t *count);
const float *ampc_ir_attr_floats(ampc_graph *g, const ampc_node *n, const char *name,
                                 int32_t *count);
/* The same without a diagnostic, for the parameter decoders (ir/activation.h, ir/conv.h, ...),
 * which read what inference has checked: `dflt` when missing or of another kind; a float
 * widened to double; the ints attribute itself, or NULL. */
int64_t ampc_attr_int_or(const ampc_node *n, const char *name, int64_t dflt);
double ampc_attr_float_or(const ampc_node *n, const char *name, float dflt);
const char *ampc_attr_string_or(const ampc_node *n, const char *name, const char *dflt);
const ampc_attr *ampc_attr_ints_of(const ampc_node *n, const char *name);

/* ---- shapes --------------------------------------------------------------------------------- */

/* Element count and byte size of a value (shapes in a graph never overflow: the builder checks). */
int64_t ampc_ir_numel(const ampc_value *v);
size_t ampc_ir_nbytes(const ampc_value *v);
bool ampc_shape_eq(const ampc_shape *a, const ampc_shape *b);
/* Writes "[2,3,4]" into buf (a scalar is "[]"); returns buf. */
char *ampc_shape_str(const ampc_shape *s, char *buf, size_t n);
enum { AMPC_SHAPE_STR_MAX = 8 * 21 + 3 };
/* "f32[2,3]" for a value; returns buf. */
char *ampc_value_type_str(const ampc_value *v, char *buf, size_t n);
enum { AMPC_TYPE_STR_MAX = AMPC_SHAPE_STR_MAX + 8 };
/* Checks that the shape's element count and byte size (for dtype) fit in int64: false with a
 * diagnostic (AMPC_E_OVERFLOW) otherwise. */
bool ampc_shape_check_size(ampc_graph *g, const ampc_node *n, const ampc_shape *s, ampc_dtype t);

/* The attributes ampc's passes give nodes: the GPU a partitioned node runs on (partition,
 * partition-pipeline; -1 for every GPU), the GPU an ampc.PeerCopy reads from (-1 when absent)
 * and the sparsity pass's 2:4 mark. The IR text carries them; these read them. */
#define AMPC_ATTR_RANK "rank"
#define AMPC_ATTR_PEER_FROM "from"
#define AMPC_ATTR_SPARSE24 "sparse24"
int64_t ampc_node_rank(const ampc_node *n);
int64_t ampc_node_peer_from(const ampc_node *n);
bool ampc_node_sparse24(const ampc_node *n);

/* Node n's `axis` attribute, or the op's ONNX default when it has none: -1 for Softmax,
 * LogSoftmax, ampc.SafeSoftmax, Hardmax, LayerNormalization, RMSNormalization, LpNormalization,
 * OneHot and TopK; 1 for Flatten, QuantizeLinear and DequantizeLinear; -2 for TensorScatter; 0
 * otherwise (Gather, GatherElements, Scatter, ScatterElements, Concat, Split, ArgMax, ArgMin,
 * Compress and Unique when given). Inference validates it; readers decode it here. */
int64_t ampc_axis_attr(const ampc_node *n);
/* That default alone (inference reads the attribute with it, checking its kind and range). */
int64_t ampc_axis_default(ampc_opcode op);
/* That axis counted from the front of a rank-`rank` tensor (a negative one from the end). */
int32_t ampc_axis_of(const ampc_node *n, int32_t rank);
/* Whether n has an `axis` attribute (Compress and Unique flatten their input without one). */
bool ampc_axis_given(const ampc_node *n);
/* The attribute of axis a. */
ampc_attr ampc_axis_attr_make(int64_t a);

/* The input of node u, a Mul, that scales the only output of norm p (a LayerNormalization or
 * RMSNormalization) when the other is a constant that broadcasts to that output, of its type
 * (the weight an exported RMS norm multiplies by after rounding: Hugging Face's Llama and T5);
 * -1 otherwise. fuse-elementwise then lets the norm's kernel write u's output, and code
 * generation reads the scale from the input this returns (codegen/lower_norm.c). */
int32_t ampc_ir_norm_post_scale(const ampc_node *p, const ampc_node *u);

/* ---- graph-level -------------------------------------------------------------------------- */

/* Verifies every IR invariant (see verify.c); AMPC_OK or AMPC_E_VERIFY with diagnostics. */
ampc_status ampc_ir_verify(ampc_graph *g);

/* The dtype's ONNX TensorProto.DataType code, and the reverse (UNDEFINED when unknown). */
int32_t ampc_dtype_to_onnx(ampc_dtype t);
ampc_dtype ampc_dtype_from_onnx(int32_t code);
/* Parses "f32" etc.; UNDEFINED when unknown. */
ampc_dtype ampc_dtype_from_name(const char *name);
bool ampc_dtype_is_float(ampc_dtype t);
bool ampc_dtype_is_int(ampc_dtype t);    /* signed or unsigned integer, not bool */
bool ampc_dtype_is_signed(ampc_dtype t); /* signed integers and floats */

#endif /* AMPC_IR_H */
