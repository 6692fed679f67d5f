/*
 * dtype.c — element types: names, sizes, classes, ONNX codes; shapes: element counts, printing and
 * the overflow check every inferred shape goes through.
 */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    uint8_t size;
    int8_t onnx;       /* TensorProto.DataType */
    uint8_t cls;       /* 1 float, 2 signed int, 3 unsigned int, 4 bool */
} dtypes[AMPC_DTYPE_COUNT] = {
    [AMPC_DTYPE_UNDEFINED] = {"undefined", 0, 0, 0},
    [AMPC_DTYPE_F32] = {"f32", 4, 1, 1},
    [AMPC_DTYPE_F16] = {"f16", 2, 10, 1},
    [AMPC_DTYPE_BF16] = {"bf16", 2, 16, 1},
    [AMPC_DTYPE_F64] = {"f64", 8, 11, 1},
    [AMPC_DTYPE_I64] = {"i64", 8, 7, 2},
    [AMPC_DTYPE_I32] = {"i32", 4, 6, 2},
    [AMPC_DTYPE_I16] = {"i16", 2, 5, 2},
    [AMPC_DTYPE_I8] = {"i8", 1, 3, 2},
    [AMPC_DTYPE_U64] = {"u64", 8, 13, 3},
    [AMPC_DTYPE_U32] = {"u32", 4, 12, 3},
    [AMPC_DTYPE_U16] = {"u16", 2, 4, 3},
    [AMPC_DTYPE_U8] = {"u8", 1, 2, 3},
    [AMPC_DTYPE_BOOL] = {"bool", 1, 9, 4},
};

const char *ampc_dtype_name(ampc_dtype t) {
    return (unsigned)t < AMPC_DTYPE_COUNT ? dtypes[t].name : "?";
}
size_t ampc_dtype_size(ampc_dtype t) { return (unsigned)t < AMPC_DTYPE_COUNT ? dtypes[t].size : 0; }
bool ampc_dtype_is_float(ampc_dtype t) { return (unsigned)t < AMPC_DTYPE_COUNT && dtypes[t].cls == 1; }
bool ampc_dtype_is_int(ampc_dtype t) {
    return (unsigned)t < AMPC_DTYPE_COUNT && (dtypes[t].cls == 2 || dtypes[t].cls == 3);
}
bool ampc_dtype_is_signed(ampc_dtype t) {
    return (unsigned)t < AMPC_DTYPE_COUNT && (dtypes[t].cls == 1 || dtypes[t].cls == 2);
}

int32_t ampc_dtype_to_onnx(ampc_dtype t) { return (unsigned)t < AMPC_DTYPE_COUNT ? dtypes[t].onnx : 0; }

ampc_dtype ampc_dtype_from_onnx(int32_t code) {
    for (int t = 1; t < AMPC_DTYPE_COUNT; t++)
        if (dtypes[t].onnx == code) return (ampc_dtype)t;
    return AMPC_DTYPE_UNDEFINED;
}

ampc_dtype ampc_dtype_from_name(const char *name) {
    for (int t = 1; t < AMPC_DTYPE_COUNT; t++)
        if (!strcmp(dtypes[t].name, name)) return (ampc_dtype)t;
    return AMPC_DTYPE_UNDEFINED;
}

/* ---- shapes --------------------------------------------------------------------------------- */

int64_t ampc_shape_numel(const ampc_shape *s) {
    int64_t n = 1;
    for (int32_t i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

int64_t ampc_ir_numel(const ampc_value *v) { return ampc_shape_numel(&v->shape); }

int32_t ampc_ir_norm_post_scale(const ampc_node *p, const ampc_node *u) {
    if (p->dead || u->dead || (p->op != AMPC_OP_LAYER_NORM && p->op != AMPC_OP_RMS_NORM)) return -1;
    if (p->n_outputs != 1 || u->op != AMPC_OP_MUL || u->n_inputs != 2 || u->n_outputs != 1) return -1;
    const ampc_value *y = p->outputs[0], *a = u->inputs[0], *b = u->inputs[1];
    if (!a || !b || (a == y) == (b == y)) return -1;
    const int32_t k = a == y ? 1 : 0;
    const ampc_value *w = u->inputs[k], *out = u->outputs[0];
    if (!w->data || (w->flags & AMPC_VALUE_INPUT) || w->dtype != y->dtype || out->dtype != y->dtype)
        return -1;
    if (y->dtype != AMPC_DTYPE_F32 && y->dtype != AMPC_DTYPE_F16 && y->dtype != AMPC_DTYPE_BF16)
        return -1;
    if (!ampc_shape_eq(&out->shape, &y->shape) || w->shape.rank > y->shape.rank) return -1;
    for (int32_t d = 1; d <= w->shape.rank; d++) {
        const int64_t wd = w->shape.dims[w->shape.rank - d];
        if (wd != 1 && wd != y->shape.dims[y->shape.rank - d]) return -1;
    }
    return k;
}

size_t ampc_ir_nbytes(const ampc_value *v) {
    return (size_t)ampc_ir_numel(v) * ampc_dtype_size(v->dtype);
}

bool ampc_shape_eq(const ampc_shape *a, const ampc_shape *b) {
    if (a->rank != b->rank) return false;
    for (int32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

char *ampc_shape_str(const ampc_shape *s, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf, n, "[");
    for (int32_t i = 0; i < s->rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)s->dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

char *ampc_value_type_str(const ampc_value *v, char *buf, size_t n) {
    char sh[AMPC_SHAPE_STR_MAX];
    snprintf(buf, n, "%s%s", ampc_dtype_name(v->dtype), ampc_shape_str(&v->shape, sh, sizeof sh));
    return buf;
}

bool ampc_shape_check_size(ampc_graph *g, const ampc_node *n, const ampc_shape *s, ampc_dtype t) {
    int64_t numel = 1, bytes;
    char buf[AMPC_SHAPE_STR_MAX];
    if (s->rank < 0 || s->rank > AMPC_MAX_RANK) {
        AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "rank %d is outside what ampc supports (0 to %d)",
                  s->rank, AMPC_MAX_RANK);
        return false;
    }
    for (int32_t i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0) {
            AMPC_FAIL(g, n, AMPC_E_SHAPE, "dimension %d of shape %s is negative", i,
                      ampc_shape_str(s, buf, sizeof buf));
            return false;
        }
        if (!ampc_mul_ok(numel, s->dims[i], &numel)) goto overflow;
    }
    if (!ampc_mul_ok(numel, (int64_t)(ampc_dtype_size(t) ? ampc_dtype_size(t) : 1), &bytes))
        goto overflow;
    return true;
overflow:
    AMPC_FAIL(g, n, AMPC_E_OVERFLOW, "shape %s has more elements than a 64-bit size can count",
              ampc_shape_str(s, buf, sizeof buf));
    return false;
}

void ampc_tensor_free(ampc_tensor *t) {
    if (!t) return;
    free(t->data);
    t->data = NULL;
}
