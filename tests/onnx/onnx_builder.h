/*
 * onnx_builder.h — crafting ONNX models and tensors in the tests with protobuf-c's generated API,
 * so no binary fixtures are needed: build an Onnx__ModelProto field by field, pack it, import the
 * buffer. Everything a builder allocates is freed by mb_free. Shapes are written as text:
 * "2,3" (fixed dims), "N,3" (a symbol), "?,3" (an unknown dim), "" (a scalar), NULL (no shape).
 */
#ifndef AMPC_TEST_ONNX_BUILDER_H
#define AMPC_TEST_ONNX_BUILDER_H

#include "support.h"

#include AMPC_ONNX_PB_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* TensorProto.DataType codes. */
enum {
    OT_FLOAT = 1, OT_UINT8 = 2, OT_INT8 = 3, OT_UINT16 = 4, OT_INT16 = 5, OT_INT32 = 6,
    OT_INT64 = 7, OT_STRING = 8, OT_BOOL = 9, OT_FLOAT16 = 10, OT_DOUBLE = 11, OT_UINT32 = 12,
    OT_UINT64 = 13, OT_BFLOAT16 = 16, OT_FLOAT8E4M3FN = 17,
};

typedef struct mb {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    void **allocs;
    int n_allocs, cap_allocs;
} mb;

/* Zeroed memory freed with the builder. */
static inline void *mb_alloc(mb *b, size_t n) {
    if (b->n_allocs == b->cap_allocs) {
        b->cap_allocs = b->cap_allocs ? b->cap_allocs * 2 : 64;
        b->allocs = realloc(b->allocs, (size_t)b->cap_allocs * sizeof *b->allocs);
    }
    void *p = calloc(1, n ? n : 1);
    b->allocs[b->n_allocs++] = p;
    return p;
}

static inline char *mb_str(mb *b, const char *s) {
    char *d = mb_alloc(b, strlen(s) + 1);
    strcpy(d, s);
    return d;
}

/* Appends p to a protobuf-c repeated field (count n, array arr). */
#define MB_PUSH(b, arr, n, p)                                                                      \
    do {                                                                                           \
        void *grown_ = mb_alloc((b), ((n) + 1) * sizeof *(arr));                                   \
        if (n) memcpy(grown_, (arr), (n) * sizeof *(arr));                                         \
        (arr) = grown_;                                                                            \
        (arr)[(n)++] = (p);                                                                        \
    } while (0)

static inline void mb_init(mb *b, int64_t ir_version, int64_t opset) {
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->model);
    onnx__graph_proto__init(&b->graph);
    b->model.graph = &b->graph;
    b->graph.name = "test";
    if (ir_version) {
        b->model.has_ir_version = 1;
        b->model.ir_version = ir_version;
    }
    if (opset) {
        Onnx__OperatorSetIdProto *o = mb_alloc(b, sizeof *o);
        onnx__operator_set_id_proto__init(o);
        o->domain = "";
        o->has_version = 1;
        o->version = opset;
        MB_PUSH(b, b->model.opset_import, b->model.n_opset_import, o);
    }
}

static inline void mb_free(mb *b) {
    for (int i = 0; i < b->n_allocs; i++) free(b->allocs[i]);
    free(b->allocs);
}

static inline void mb_opset(mb *b, const char *domain, int64_t version) {
    Onnx__OperatorSetIdProto *o = mb_alloc(b, sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = mb_str(b, domain);
    o->has_version = 1;
    o->version = version;
    MB_PUSH(b, b->model.opset_import, b->model.n_opset_import, o);
}

/* A comma-separated list into a string array (empty entries kept: "a,,c" has 3). */
static inline size_t mb_split(mb *b, const char *spec, char ***out) {
    *out = NULL;
    size_t n = 0;
    if (!spec || !*spec) return 0;
    char *s = mb_str(b, spec);
    for (char *p = s;; p++) {
        char *e = strchr(p, ',');
        if (e) *e = 0;
        MB_PUSH(b, *out, n, p);
        if (!e) break;
        p = e;
    }
    return n;
}

static inline Onnx__ValueInfoProto *mb_value_info(mb *b, const char *name, int32_t elem,
                                                  const char *dims) {
    Onnx__ValueInfoProto *v = mb_alloc(b, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = mb_str(b, name);
    Onnx__TypeProto *t = mb_alloc(b, sizeof *t);
    onnx__type_proto__init(t);
    Onnx__TypeProto__Tensor *tt = mb_alloc(b, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->type = t;
    if (dims) {
        Onnx__TensorShapeProto *sh = mb_alloc(b, sizeof *sh);
        onnx__tensor_shape_proto__init(sh);
        char **parts;
        size_t n = mb_split(b, dims, &parts);
        for (size_t i = 0; i < n; i++) {
            Onnx__TensorShapeProto__Dimension *d = mb_alloc(b, sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            char *end;
            long long x = strtoll(parts[i], &end, 10);
            if (!strcmp(parts[i], "?")) {
                /* neither value nor symbol */
            } else if (*parts[i] && !*end) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = x;
            } else {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = parts[i];
            }
            MB_PUSH(b, sh->dim, sh->n_dim, d);
        }
        tt->shape = sh;
    }
    return v;
}

static inline Onnx__ValueInfoProto *mb_input(mb *b, const char *name, int32_t elem,
                                             const char *dims) {
    Onnx__ValueInfoProto *v = mb_value_info(b, name, elem, dims);
    MB_PUSH(b, b->graph.input, b->graph.n_input, v);
    return v;
}

static inline Onnx__ValueInfoProto *mb_output(mb *b, const char *name, int32_t elem,
                                              const char *dims) {
    Onnx__ValueInfoProto *v = mb_value_info(b, name, elem, dims);
    MB_PUSH(b, b->graph.output, b->graph.n_output, v);
    return v;
}

/* A node with comma-separated inputs and outputs ("" entries are absent optional ones). */
static inline Onnx__NodeProto *mb_make_node(mb *b, const char *op, const char *name,
                                            const char *ins, const char *outs) {
    Onnx__NodeProto *n = mb_alloc(b, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = mb_str(b, op);
    n->name = mb_str(b, name ? name : "");
    n->n_input = mb_split(b, ins, &n->input);
    n->n_output = mb_split(b, outs, &n->output);
    return n;
}

static inline Onnx__NodeProto *mb_node(mb *b, const char *op, const char *name, const char *ins,
                                       const char *outs) {
    Onnx__NodeProto *n = mb_make_node(b, op, name, ins, outs);
    MB_PUSH(b, b->graph.node, b->graph.n_node, n);
    return n;
}

static inline Onnx__AttributeProto *mb_attr(mb *b, Onnx__NodeProto *n, const char *name, int type) {
    Onnx__AttributeProto *a = mb_alloc(b, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = mb_str(b, name);
    a->has_type = 1;
    a->type = (Onnx__AttributeProto__AttributeType)type;
    if (n) MB_PUSH(b, n->attribute, n->n_attribute, a);
    return a;
}

static inline void mb_attr_i(mb *b, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static inline void mb_attr_f(mb *b, Onnx__NodeProto *n, const char *name, float v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static inline void mb_attr_s(mb *b, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)mb_str(b, v);
    a->s.len = strlen(v);
}

static inline void mb_attr_ints(mb *b, Onnx__NodeProto *n, const char *name, size_t k,
                                const int64_t *v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = mb_alloc(b, k * sizeof *v);
    if (k) memcpy(a->ints, v, k * sizeof *v);
    a->n_ints = k;
}

static inline void mb_attr_floats(mb *b, Onnx__NodeProto *n, const char *name, size_t k,
                                  const float *v) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    a->floats = mb_alloc(b, k * sizeof *v);
    if (k) memcpy(a->floats, v, k * sizeof *v);
    a->n_floats = k;
}

static inline void mb_attr_t(mb *b, Onnx__NodeProto *n, const char *name, Onnx__TensorProto *t) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t;
}

/* A function-body attribute that takes the caller's attribute `ref`. */
static inline void mb_attr_ref(mb *b, Onnx__NodeProto *n, const char *name, int type,
                               const char *ref) {
    Onnx__AttributeProto *a = mb_attr(b, n, name, type);
    a->ref_attr_name = mb_str(b, ref);
}

/* A tensor with dims and no data yet (fill one of its fields). */
static inline Onnx__TensorProto *mb_tensor(mb *b, const char *name, int32_t dtype, size_t rank,
                                           const int64_t *dims) {
    Onnx__TensorProto *t = mb_alloc(b, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = mb_str(b, name ? name : "");
    t->has_data_type = 1;
    t->data_type = dtype;
    t->dims = mb_alloc(b, rank * sizeof *dims);
    if (rank) memcpy(t->dims, dims, rank * sizeof *dims);
    t->n_dims = rank;
    return t;
}

static inline Onnx__TensorProto *mb_tensor_raw(mb *b, const char *name, int32_t dtype, size_t rank,
                                               const int64_t *dims, const void *data,
                                               size_t nbytes) {
    Onnx__TensorProto *t = mb_tensor(b, name, dtype, rank, dims);
    t->has_raw_data = 1;
    t->raw_data.data = mb_alloc(b, nbytes);
    if (nbytes) memcpy(t->raw_data.data, data, nbytes);
    t->raw_data.len = nbytes;
    return t;
}

static inline void mb_initializer(mb *b, Onnx__TensorProto *t) {
    MB_PUSH(b, b->graph.initializer, b->graph.n_initializer, t);
}

static inline void mb_external(mb *b, Onnx__TensorProto *t, const char *location,
                               const char *offset, const char *length) {
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    const char *keys[3] = {"location", "offset", "length"}, *vals[3] = {location, offset, length};
    for (int i = 0; i < 3; i++) {
        if (!vals[i]) continue;
        Onnx__StringStringEntryProto *e = mb_alloc(b, sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = mb_str(b, keys[i]);
        e->value = mb_str(b, vals[i]);
        MB_PUSH(b, t->external_data, t->n_external_data, e);
    }
}

/* A model-local function (domain, name), its inputs/outputs comma-separated; add body nodes
 * with mb_fn_node. */
static inline Onnx__FunctionProto *mb_function(mb *b, const char *domain, const char *name,
                                               const char *ins, const char *outs, int64_t opset) {
    Onnx__FunctionProto *f = mb_alloc(b, sizeof *f);
    onnx__function_proto__init(f);
    f->domain = mb_str(b, domain);
    f->name = mb_str(b, name);
    f->n_input = mb_split(b, ins, &f->input);
    f->n_output = mb_split(b, outs, &f->output);
    if (opset) {
        Onnx__OperatorSetIdProto *o = mb_alloc(b, sizeof *o);
        onnx__operator_set_id_proto__init(o);
        o->domain = "";
        o->has_version = 1;
        o->version = opset;
        MB_PUSH(b, f->opset_import, f->n_opset_import, o);
    }
    MB_PUSH(b, b->model.functions, b->model.n_functions, f);
    return f;
}

static inline Onnx__NodeProto *mb_fn_node(mb *b, Onnx__FunctionProto *f, const char *op,
                                          const char *name, const char *ins, const char *outs) {
    Onnx__NodeProto *n = mb_make_node(b, op, name, ins, outs);
    MB_PUSH(b, f->node, f->n_node, n);
    return n;
}

/* Adds a length-delimited field the generated schema may not know (as a newer ONNX writes it):
 * the payload is kept among the message's unknown fields, which protobuf-c packs as they are. */
static inline void mb_unknown_bytes(mb *b, ProtobufCMessage *m, uint32_t tag, const void *data,
                                    size_t len) {
    uint8_t *buf = mb_alloc(b, len + 10);
    size_t k = 0;
    size_t v = len;
    do {
        buf[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    memcpy(buf + k, data, len);
    ProtobufCMessageUnknownField *u = mb_alloc(b, (m->n_unknown_fields + 1) * sizeof *u);
    if (m->n_unknown_fields) memcpy(u, m->unknown_fields, m->n_unknown_fields * sizeof *u);
    u[m->n_unknown_fields] =
        (ProtobufCMessageUnknownField){tag, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, k + len, buf};
    m->unknown_fields = u;
    m->n_unknown_fields++;
}

/* Packs the model into a buffer owned by the builder. */
static inline uint8_t *mb_pack(mb *b, size_t *len) {
    *len = onnx__model_proto__get_packed_size(&b->model);
    uint8_t *buf = mb_alloc(b, *len);
    onnx__model_proto__pack(&b->model, buf);
    return buf;
}

/* Imports the packed model; the graph (or NULL) is returned, *err (or NULL) malloc'ed. */
static inline ampc_status mb_import(mb *b, const char *base_dir, const ampc_import_options *o,
                                    ampc_graph **g, char **err) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    return ampc_onnx_import_buffer(buf, len, base_dir, o, g, err);
}

#endif
