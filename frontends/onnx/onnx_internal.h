/*
 * onnx_internal.h — what the files of the ONNX front end share: the protobuf-c bindings
 * (generated at build time from the installed onnx.proto), the wire-format checks that run before
 * protobuf-c sees a buffer, access to fields newer than the schema (kept as unknown fields), the
 * TensorProto decoder, and the importer context that opset.c's per-version mapping builds nodes
 * through.
 *
 *   import.c     ModelProto -> ampc graph: checks, coverage, symbols, nodes, functions
 *   opset.c      per-op, per-opset rewriting of older ONNX forms onto the op table's form
 *   tensor_io.c  TensorProto decoding (initializers, Constant), .pb and .npy files
 *   inspect.c    the `ampc inspect` summary
 */
#ifndef AMPC_ONNX_INTERNAL_H
#define AMPC_ONNX_INTERNAL_H

#include "ir/ir.h"

#include AMPC_ONNX_PB_H

/* Versions this importer knows. Older IR versions lack opset_import; newer ones may carry
 * structures it cannot know about. Default-domain opsets above the newest are refused since an
 * op's semantics may have changed there. */
enum {
    AMPC_ONNX_IR_OLDEST = 3,
    AMPC_ONNX_IR_NEWEST = 14,     /* onnx 1.23 writes IR version 14 */
    AMPC_ONNX_OPSET_NEWEST = 28,  /* ONNX 1.23 */
    AMPC_ONNX_PB_MAX_DEPTH = 100, /* message nesting, as protobuf's C++ parser limits it */
};
/* The largest model file read: protobuf serializes no message of 2 GiB or more, so a bigger file
 * is not a ModelProto, and refusing it by its size avoids reading it whole first. */
#define AMPC_ONNX_MODEL_MAX_BYTES ((int64_t)INT32_MAX)

/* ---- protobuf ------------------------------------------------------------------------------- */

/* Walks a serialized message against its descriptor without building it: every tag, varint and
 * length must lie inside the buffer, and messages may nest at most AMPC_ONNX_PB_MAX_DEPTH deep
 * (protobuf-c's parser recurses without a limit). False with a message in err otherwise. */
bool ampc_onnx_pb_check(const void *data, size_t len, const ProtobufCMessageDescriptor *d,
                        ampc_strbuf *err);
/* pb_check, then protobuf-c's unpack; NULL with a message ("not an ONNX model: ...") on failure. */
Onnx__ModelProto *ampc_onnx_model_parse(const void *data, size_t len, ampc_strbuf *err);

/* Messages unpacked from unknown fields, freed together (see ampc_onnx_pb_messages). */
typedef struct ampc_onnx_pb_pool {
    ProtobufCMessage **msgs;
    int32_t n, cap;
} ampc_onnx_pb_pool;
void ampc_onnx_pb_pool_free(ampc_onnx_pb_pool *p);

/* A string field by tag, whether the schema we were built from knows it (read from the struct)
 * or not (read from the unknown fields, where protobuf-c keeps what a newer model carries).
 * Sets *s / *len (not NUL-terminated) and returns true when present. */
bool ampc_onnx_pb_string(const ProtobufCMessage *m, uint32_t tag, const char **s, size_t *len);
/* A repeated message field by tag, known or unknown; unknown ones are unpacked with `d` into the
 * pool. Returns the count (0 when absent or unparseable) and sets *out, valid until the message
 * is freed or the pool is freed or used again (copy the pointers before the next call). */
int32_t ampc_onnx_pb_messages(const ProtobufCMessage *m, uint32_t tag,
                              const ProtobufCMessageDescriptor *d, ampc_onnx_pb_pool *pool,
                              ProtobufCMessage *const **out);

/* ---- tensors -------------------------------------------------------------------------------- */

/* The TensorProto.DataType name of an ONNX element type code ("FLOAT", "FLOAT8E4M3FN"), or
 * "type N" for codes past the newest known. Returned in buf when not static. */
const char *ampc_onnx_dtype_name(int32_t code, char *buf, size_t n);
/* The ampc dtype and shape of a TensorProto. `what` names it in messages ("initializer 'w'"). */
ampc_status ampc_onnx_tensor_type(const Onnx__TensorProto *t, const char *what, ampc_dtype *dt,
                                  ampc_shape *s, ampc_strbuf *err);
/* Decodes the contents of t, whose dtype and shape tensor_type gave, into dst (numel * size
 * bytes): raw_data, the typed fields, or external data relative to base_dir (NULL: refused).
 * With dst NULL it only checks that the data is there (sizes, the external file's bounds), so a
 * caller can refuse a tensor whose dims claim more than the file holds before allocating. */
ampc_status ampc_onnx_tensor_data(const Onnx__TensorProto *t, const char *what,
                                  const char *base_dir, ampc_dtype dt, const ampc_shape *s,
                                  void *dst, ampc_strbuf *err);
/* Total bytes of a TensorProto's data wherever it is stored (for summaries); 0 when unknown. */
int64_t ampc_onnx_tensor_nbytes(const Onnx__TensorProto *t);

/* Reads a whole model file into a malloc'ed buffer: AMPC_E_IO with a message when it cannot be
 * read, AMPC_E_PARSE when it is above AMPC_ONNX_MODEL_MAX_BYTES (before allocating). */
ampc_status ampc_onnx_slurp(const char *path, uint8_t **out, size_t *len, ampc_strbuf *err);
/* The folder of a path ("." when it has none), malloc'ed. */
char *ampc_onnx_dir_of(const char *path);

/* ---- whole models (import.c) ---------------------------------------------------------------- */

/* Imports a parsed model (see ampc_onnx_import_buffer). On failure *out is NULL and err holds
 * the message; `notes` (may be NULL) receives facts that do not fail the import, one a line:
 * value_info entries that disagree with inference. */
ampc_status ampc_onnx_model_import(const Onnx__ModelProto *m, const char *base_dir,
                                   const ampc_import_options *o, ampc_graph **out,
                                   ampc_strbuf *err, ampc_strbuf *notes);
/* The coverage check alone: returns the number of unsupported nodes and appends one line per
 * node ("  node 12 'conv_5' (Foo): op not in ampc's op table") to lines. -1 when the model's
 * versions are not importable at all (the reason is in lines). */
int32_t ampc_onnx_model_coverage(const Onnx__ModelProto *m, ampc_strbuf *lines);

/* ---- the importer context ------------------------------------------------------------------- */

/* One ONNX node on its way into the graph: its inputs resolved to values, its attributes
 * converted. opset.c rewrites it (attributes that became inputs, older semantics) and builds it. */
typedef struct ampc_onnx_node {
    const Onnx__NodeProto *proto;
    const char *where;         /* "node 12 'conv_5' (Conv)" for messages, possibly nested */
    const char *name;          /* the IR node's name (NULL: generated) */
    ampc_opcode op;
    int64_t opset;             /* the default-domain opset the node binds to */
    ampc_value **in;           /* n_in entries, NULL for absent optional inputs; cap_in room */
    int32_t n_in, cap_in;
    ampc_attr *attrs;          /* n_attrs entries; cap_attrs room */
    int32_t n_attrs, cap_attrs;
    const char **out_names;    /* n_out IR names for the outputs (NULL: generated) */
    int32_t n_out;
    ampc_value **outs;         /* n_out results, filled by ampc_onnx_emit */
} ampc_onnx_node;

typedef struct ampc_onnx_ctx ampc_onnx_ctx;

/* The graph being built. */
ampc_graph *ampc_onnx_graph(ampc_onnx_ctx *c);
/* A fresh value name derived from `hint` that no model name and no graph value uses (arena). */
const char *ampc_onnx_fresh_name(ampc_onnx_ctx *c, const char *hint);
/* Records an error about the node being imported ("<where>: <message>"); returns code. */
ampc_status ampc_onnx_fail(ampc_onnx_ctx *c, const ampc_onnx_node *nd, ampc_status code,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* ampc_ir_node_build for a node (or a helper node) of nd; the diagnostics of a failure are
 * re-worded against the ONNX node (nd->where) and recorded. outs receives n_out values. */
ampc_status ampc_onnx_build(ampc_onnx_ctx *c, const ampc_onnx_node *nd, ampc_opcode op,
                            const char *name, ampc_value *const *in, int32_t n_in,
                            const ampc_attr *attrs, int32_t n_attrs, int32_t n_out,
                            const char *const *out_names, ampc_value **outs);
/* A constant of the graph; NULL on OOM (recorded). */
ampc_value *ampc_onnx_const(ampc_onnx_ctx *c, const char *hint, ampc_dtype dt,
                            const ampc_shape *s, const void *data);

/* ---- per-opset mapping (opset.c) ------------------------------------------------------------ */

/* The oldest opset of op the importer accepts: the table's opset_lo, or lower where opset.c
 * rewrites the older form. */
int32_t ampc_onnx_opset_floor(ampc_opcode op);
/* The table row for a default-domain op type at an opset (aliases such as Upsample -> Resize
 * included); false with the reason appended to why ("op not in ampc's op table", "opset 5 is
 * older than ampc supports for X (opsets 7 to the newest)"). */
bool ampc_onnx_op_lookup(const char *op_type, int64_t opset, ampc_opcode *op, ampc_strbuf *why);
/* Attribute combinations the importer or the IR cannot take, checked before anything is built;
 * false with the reason appended to why. */
bool ampc_onnx_node_supported(const Onnx__NodeProto *n, ampc_opcode op, int64_t opset,
                              ampc_strbuf *why);
/* Rewrites nd onto the op table's form for its opset and builds it; nd->outs receives the values
 * that stand for the ONNX node's outputs. */
ampc_status ampc_onnx_emit(ampc_onnx_ctx *c, ampc_onnx_node *nd);

/* Helpers for the node's attribute list (opset.c uses them to move attributes to inputs). */
const ampc_attr *ampc_onnx_attr(const ampc_onnx_node *nd, const char *name);
void ampc_onnx_attr_remove(ampc_onnx_node *nd, const char *name);
/* Sets input i, growing the input list with absent (NULL) inputs as needed. */
void ampc_onnx_set_input(ampc_onnx_node *nd, int32_t i, ampc_value *v);

#endif /* AMPC_ONNX_INTERNAL_H */
