/*
 * dsl.c — the C DSL (public in ampc.h): thin constructors over ampc_ir_node_build, so a graph
 * built in C goes through the same arity checks and shape/dtype inference as an imported one.
 *
 * Failure model: a constructor that fails records a diagnostic (naming the node) and returns a
 * poisoned value; given a poisoned input it returns poison without a new diagnostic, so only the
 * root cause is reported.
 */
#include "ir/ir.h"

#include <string.h>

/* A poisoned value to return on failure; NULL only when even that cannot be allocated. */
static ampc_value *poison(ampc_graph *g) { return ampc_ir_poison_new(g, NULL); }

static bool check_dims(ampc_graph *g, const char *what, const char *name, int32_t rank,
                       const int64_t *dims) {
    ampc_shape s = {rank, {0}};
    if (rank < 0 || rank > AMPC_MAX_RANK || (rank && !dims)) {
        AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "%s '%s': rank %d is invalid (0 to %d, dims not NULL)",
                  what, name ? name : "", rank, AMPC_MAX_RANK);
        return false;
    }
    for (int32_t i = 0; i < rank; i++) s.dims[i] = dims[i];
    return ampc_shape_check_size(g, NULL, &s, AMPC_DTYPE_F64);
}

ampc_value *ampc_input(ampc_graph *g, const char *name, ampc_dtype dtype, int32_t rank,
                       const int64_t *dims) {
    if (!g) return NULL;
    if (!name || !*name) {
        AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "a graph input needs a name");
        return poison(g);
    }
    if (ampc_ir_value_find(g, name)) {
        AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "graph input '%s': the name is already used", name);
        return poison(g);
    }
    if (dtype <= AMPC_DTYPE_UNDEFINED || dtype >= AMPC_DTYPE_COUNT) {
        AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "graph input '%s': dtype %d is not an ampc_dtype",
                  name, (int)dtype);
        return poison(g);
    }
    if (!check_dims(g, "graph input", name, rank, dims)) return poison(g);
    ampc_shape s = {rank, {0}};
    if (rank) memcpy(s.dims, dims, (size_t)rank * sizeof *dims);
    ampc_value *v = ampc_ir_value_new(g, name, dtype, &s);
    if (!v) return NULL;
    ampc_ir_graph_add_input(g, v);
    return v;
}

ampc_value *ampc_constant(ampc_graph *g, const char *name, ampc_dtype dtype, int32_t rank,
                          const int64_t *dims, const void *data) {
    if (!g) return NULL;
    if (dtype <= AMPC_DTYPE_UNDEFINED || dtype >= AMPC_DTYPE_COUNT) {
        AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "constant '%s': dtype %d is not an ampc_dtype",
                  name ? name : "", (int)dtype);
        return poison(g);
    }
    if (!check_dims(g, "constant", name, rank, dims)) return poison(g);
    ampc_shape s = {rank, {0}};
    if (rank) memcpy(s.dims, dims, (size_t)rank * sizeof *dims);
    if (!data && ampc_shape_numel(&s)) {
        AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "constant '%s': data is NULL", name ? name : "");
        return poison(g);
    }
    ampc_value *v = ampc_ir_const_new(g, name ? name : "c", dtype, &s, data);
    return v ? v : poison(g);
}

ampc_value *ampc_scalar_f32(ampc_graph *g, float v) {
    return ampc_constant(g, NULL, AMPC_DTYPE_F32, 0, NULL, &v);
}

ampc_value *ampc_scalar_i64(ampc_graph *g, int64_t v) {
    return ampc_constant(g, NULL, AMPC_DTYPE_I64, 0, NULL, &v);
}

ampc_value *ampc_const_i64s(ampc_graph *g, const int64_t *v, int32_t n) {
    int64_t d = n;
    return ampc_constant(g, NULL, AMPC_DTYPE_I64, 1, &d, v);
}

ampc_status ampc_output(ampc_graph *g, ampc_value *v, const char *name) {
    if (!g || !v) return AMPC_E_INVALID_ARG;
    if (v->flags & AMPC_VALUE_POISON) return ampc_graph_status(g);
    if (name && *name) {
        ampc_status st = ampc_ir_value_rename(g, v, name);
        if (st != AMPC_OK) return st;
    }
    return ampc_ir_graph_add_output(g, v);
}

/* ---- generic constructors ------------------------------------------------------------------- */

static bool convert_attrs(ampc_graph *g, const char *op, const ampc_attr_arg *args, int32_t n,
                          ampc_attr *out) {
    for (int32_t i = 0; i < n; i++) {
        const ampc_attr_arg *a = &args[i];
        ampc_attr *o = &out[i];
        memset(o, 0, sizeof *o);
        o->name = a->name;
        o->kind = a->kind;
        o->n = a->n;
        if (!a->name || a->n < 0) {
            AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "%s: attribute %d has no name or a negative count",
                      op, i);
            return false;
        }
        switch (a->kind) {
        case AMPC_ATTR_INT: o->i = a->i; break;
        case AMPC_ATTR_FLOAT: o->f = a->f; break;
        case AMPC_ATTR_STRING: o->s = a->s ? a->s : ""; break;
        case AMPC_ATTR_INTS: o->ints = (int64_t *)a->ints; break;
        case AMPC_ATTR_FLOATS: o->floats = (float *)a->floats; break;
        case AMPC_ATTR_STRINGS: o->strings = (const char **)a->strings; break;
        case AMPC_ATTR_TENSOR:
            if (!a->tensor || !a->tensor->data) {
                AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG,
                          "%s: tensor attribute '%s' must be a constant of the graph", op, a->name);
                return false;
            }
            o->tensor = (ampc_value *)a->tensor;
            break;
        default:
            AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "%s: attribute '%s' has an unsupported kind %d",
                      op, a->name, (int)a->kind);
            return false;
        }
        if ((a->kind == AMPC_ATTR_INTS && a->n && !a->ints) ||
            (a->kind == AMPC_ATTR_FLOATS && a->n && !a->floats) ||
            (a->kind == AMPC_ATTR_STRINGS && a->n && !a->strings)) {
            AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "%s: attribute '%s' has %d entries but no array",
                      op, a->name, a->n);
            return false;
        }
    }
    return true;
}

ampc_status ampc_op_multi(ampc_graph *g, const char *op, ampc_value *const *in, int32_t n_in,
                          const ampc_attr_arg *attrs, int32_t n_attrs, ampc_value **out,
                          int32_t n_out) {
    if (!g || !op || n_in < 0 || n_attrs < 0 || n_out < 1 || (n_in && !in) || !out ||
        (n_attrs && !attrs))
        return g ? AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "%s: invalid arguments to ampc_op",
                             op ? op : "(null op)")
                 : AMPC_E_INVALID_ARG;
    for (int32_t i = 0; i < n_out; i++) out[i] = NULL;
    ampc_status st = AMPC_OK;
    ampc_opcode id;
    ampc_attr attr_buf[32];
    for (int32_t i = 0; i < n_in; i++)
        if (in[i] && (in[i]->flags & AMPC_VALUE_POISON)) st = AMPC_E_INVALID_ARG; /* silent */
    if (st == AMPC_OK && !ampc_op_from_onnx(op, &id))
        st = AMPC_FAIL(g, NULL, AMPC_E_UNSUPPORTED, "op '%s' is not in ampc's op table", op);
    if (st == AMPC_OK && n_attrs > AMPC_ARRAY_LEN(attr_buf))
        st = AMPC_FAIL(g, NULL, AMPC_E_INVALID_ARG, "%s: more than %d attributes", op,
                       AMPC_ARRAY_LEN(attr_buf));
    if (st == AMPC_OK && !convert_attrs(g, op, attrs, n_attrs, attr_buf)) st = AMPC_E_INVALID_ARG;
    if (st == AMPC_OK) {
        ampc_node *n = NULL; /* on failure its outputs are poisoned by the builder */
        st = ampc_ir_node_build(g, id, NULL, in, n_in, attr_buf, n_attrs, n_out, NULL, &n);
        for (int32_t i = 0; i < n_out && n; i++) out[i] = n->outputs[i];
    }
    for (int32_t i = 0; i < n_out; i++)
        if (!out[i]) out[i] = poison(g);
    return st;
}

ampc_value *ampc_op(ampc_graph *g, const char *op, ampc_value *const *in, int32_t n_in,
                    const ampc_attr_arg *attrs, int32_t n_attrs) {
    ampc_value *out = NULL;
    if (!g) return NULL;
    ampc_op_multi(g, op, in, n_in, attrs, n_attrs, &out, 1);
    return out;
}

/* ---- convenience constructors --------------------------------------------------------------- */

#define UNARY(fn, onnx)                                                                            \
    ampc_value *fn(ampc_graph *g, ampc_value *x) { return ampc_op(g, onnx, &x, 1, NULL, 0); }
#define BINARY(fn, onnx)                                                                           \
    ampc_value *fn(ampc_graph *g, ampc_value *a, ampc_value *b) {                                  \
        ampc_value *in[2] = {a, b};                                                                \
        return ampc_op(g, onnx, in, 2, NULL, 0);                                                   \
    }

UNARY(ampc_relu, "Relu")
UNARY(ampc_sigmoid, "Sigmoid")
UNARY(ampc_tanh, "Tanh")
UNARY(ampc_gelu, "Gelu")
UNARY(ampc_exp, "Exp")
UNARY(ampc_sqrt, "Sqrt")
BINARY(ampc_add, "Add")
BINARY(ampc_sub, "Sub")
BINARY(ampc_mul, "Mul")
BINARY(ampc_div, "Div")
BINARY(ampc_pow, "Pow")
BINARY(ampc_matmul, "MatMul")

ampc_value *ampc_gemm(ampc_graph *g, ampc_value *a, ampc_value *b, ampc_value *c, bool trans_a,
                      bool trans_b) {
    ampc_value *in[3] = {a, b, c};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("transA", trans_a), AMPC_ATTR_I("transB", trans_b)};
    return ampc_op(g, "Gemm", in, c ? 3 : 2, at, 2);
}

ampc_value *ampc_conv2d(ampc_graph *g, ampc_value *x, ampc_value *w, ampc_value *bias,
                        const int64_t strides[2], const int64_t pads[4], const int64_t dilations[2],
                        int64_t group) {
    static const int64_t one[2] = {1, 1}, zero[4] = {0, 0, 0, 0};
    /* ONNX orders pads as [x1_begin, x2_begin, x1_end, x2_end]: top, left, bottom, right. */
    ampc_value *in[3] = {x, w, bias};
    ampc_attr_arg at[4] = {
        AMPC_ATTR_IS("strides", strides ? strides : one, 2),
        AMPC_ATTR_IS("pads", pads ? pads : zero, 4),
        AMPC_ATTR_IS("dilations", dilations ? dilations : one, 2),
        AMPC_ATTR_I("group", group),
    };
    return ampc_op(g, "Conv", in, bias ? 3 : 2, at, 4);
}

ampc_value *ampc_softmax(ampc_graph *g, ampc_value *x, int64_t axis) {
    ampc_attr_arg at = AMPC_ATTR_I("axis", axis);
    return ampc_op(g, "Softmax", &x, 1, &at, 1);
}

ampc_value *ampc_layer_norm(ampc_graph *g, ampc_value *x, ampc_value *scale, ampc_value *bias,
                            int64_t axis, float epsilon) {
    ampc_value *in[3] = {x, scale, bias};
    ampc_attr_arg at[2] = {AMPC_ATTR_I("axis", axis), AMPC_ATTR_F("epsilon", epsilon)};
    return ampc_op(g, "LayerNormalization", in, bias ? 3 : 2, at, 2);
}

ampc_value *ampc_reshape(ampc_graph *g, ampc_value *x, const int64_t *dims, int32_t rank) {
    ampc_value *in[2] = {x, ampc_const_i64s(g, dims, rank)};
    return ampc_op(g, "Reshape", in, 2, NULL, 0);
}

ampc_value *ampc_transpose(ampc_graph *g, ampc_value *x, const int64_t *perm, int32_t rank) {
    ampc_attr_arg at = AMPC_ATTR_IS("perm", perm, rank);
    return ampc_op(g, "Transpose", &x, 1, &at, perm ? 1 : 0);
}

ampc_value *ampc_concat(ampc_graph *g, ampc_value *const *xs, int32_t n, int64_t axis) {
    ampc_attr_arg at = AMPC_ATTR_I("axis", axis);
    return ampc_op(g, "Concat", xs, n, &at, 1);
}

ampc_value *ampc_cast(ampc_graph *g, ampc_value *x, ampc_dtype to) {
    ampc_attr_arg at = AMPC_ATTR_I("to", ampc_dtype_to_onnx(to));
    return ampc_op(g, "Cast", &x, 1, &at, 1);
}
