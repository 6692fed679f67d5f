/*
 * common.c — helpers shared by the inference families (see infer.h).
 */
#include "infer.h"

#include <stdio.h>
#include <string.h>

bool ampc_dtype_in(ampc_dtype t, uint32_t mask) {
    if (ampc_dtype_is_float(t)) return mask & DT_FLOAT;
    if (t == AMPC_DTYPE_BOOL) return mask & DT_BOOL;
    if (ampc_dtype_is_int(t)) return mask & (ampc_dtype_is_signed(t) ? DT_SINT : DT_UINT);
    return false;
}

static const char *class_str(uint32_t mask) {
    switch (mask) {
    case DT_FLOAT: return "a floating-point type";
    case DT_INT: return "an integer type";
    case DT_SINT: return "a signed integer type";
    case DT_NUM: return "a numeric type";
    case DT_BOOL: return "bool";
    case DT_FLOAT | DT_SINT: return "a float or signed integer type";
    case DT_INT | DT_BOOL: return "an integer or bool type";
    default: return "one of the types the op accepts";
    }
}

bool ampc_infer_check_dtype(ampc_graph *g, const ampc_node *n, int32_t i, uint32_t mask) {
    const ampc_value *v = n->inputs[i];
    if (ampc_dtype_in(v->dtype, mask)) return true;
    AMPC_FAIL(g, n, AMPC_E_DTYPE, "input %d '%s' must be %s, got %s", i, v->name, class_str(mask),
              ampc_dtype_name(v->dtype));
    return false;
}

bool ampc_infer_same_dtype(ampc_graph *g, const ampc_node *n, int32_t i, int32_t j) {
    const ampc_value *a = n->inputs[i], *b = n->inputs[j];
    if (a->dtype == b->dtype) return true;
    AMPC_FAIL(g, n, AMPC_E_DTYPE, "inputs %d '%s' and %d '%s' must have one dtype, got %s and %s",
              i, a->name, j, b->name, ampc_dtype_name(a->dtype), ampc_dtype_name(b->dtype));
    return false;
}

void ampc_infer_set(ampc_node *n, int32_t i, ampc_dtype t, const ampc_shape *s) {
    n->outputs[i]->dtype = t;
    n->outputs[i]->shape = *s;
}

bool ampc_infer_bcast_shapes(ampc_graph *g, const ampc_node *n, const ampc_value *const *in,
                          int32_t k, ampc_shape *out) {
    ampc_shape r = {0};
    for (int32_t i = 0; i < k; i++)
        if (in[i] && in[i]->shape.rank > r.rank) r.rank = in[i]->shape.rank;
    for (int32_t d = 0; d < r.rank; d++) r.dims[d] = 1;
    for (int32_t i = 0; i < k; i++) {
        if (!in[i]) continue;
        const ampc_shape *s = &in[i]->shape;
        for (int32_t d = 0; d < s->rank; d++) {
            int64_t *o = &r.dims[r.rank - s->rank + d], x = s->dims[d];
            if (x == *o || x == 1) continue;
            if (*o == 1) {
                *o = x;
                continue;
            }
            char a[AMPC_SHAPE_STR_MAX];
            AMPC_FAIL(g, n, AMPC_E_SHAPE,
                      "input shapes do not broadcast: input %d '%s' is %s, but dimension %d is "
                      "%lld where the other inputs give %lld",
                      i, in[i]->name, ampc_shape_str(s, a, sizeof a), d, (long long)x,
                      (long long)*o);
            return false;
        }
    }
    *out = r;
    return true;
}

bool ampc_infer_axis(ampc_graph *g, const ampc_node *n, int64_t axis, int32_t rank,
                     const char *what, int32_t *out) {
    int64_t lo = rank ? -rank : -1, hi = rank ? rank - 1 : 0;
    if (axis < lo || axis > hi) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "%s %lld is out of range for rank %d (expected %lld to %lld)",
                  what, (long long)axis, rank, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int32_t)(axis < 0 ? axis + rank : axis);
    return true;
}

bool ampc_infer_axis_attr(ampc_graph *g, const ampc_node *n, int64_t *axis) {
    const int64_t before = (int64_t)g->diag.n + g->diag.dropped; /* counted even when dropped */
    *axis = ampc_ir_attr_int(g, n, "axis", ampc_axis_default(n->op));
    return (int64_t)g->diag.n + g->diag.dropped == before;
}

int32_t ampc_infer_const_ints(ampc_graph *g, const ampc_node *n, int32_t i, int64_t *buf,
                              int32_t cap) {
    if (i >= n->n_inputs || !n->inputs[i]) return 0;
    const ampc_value *v = n->inputs[i];
    if (!v->data) {
        AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                  "input %d '%s' must be a compile-time constant; ampc compiles static graphs", i,
                  v->name);
        return -1;
    }
    if (v->dtype != AMPC_DTYPE_I64 && v->dtype != AMPC_DTYPE_I32) {
        AMPC_FAIL(g, n, AMPC_E_DTYPE, "input %d '%s' must be i64 or i32, got %s", i, v->name,
                  ampc_dtype_name(v->dtype));
        return -1;
    }
    if (v->shape.rank > 1) {
        char b[AMPC_SHAPE_STR_MAX];
        AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' must be a scalar or a 1-D tensor, got %s", i,
                  v->name, ampc_shape_str(&v->shape, b, sizeof b));
        return -1;
    }
    int64_t count = ampc_ir_numel(v);
    if (count > cap) {
        AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' has %lld entries; at most %d are accepted", i,
                  v->name, (long long)count, cap);
        return -1;
    }
    for (int64_t k = 0; k < count; k++)
        buf[k] = v->dtype == AMPC_DTYPE_I64 ? ((const int64_t *)v->data)[k]
                                            : ((const int32_t *)v->data)[k];
    return (int32_t)count;
}
