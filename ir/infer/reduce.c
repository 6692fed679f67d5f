/*
 * reduce.c — inference for the reductions ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
 * ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare in their newest ONNX form
 * (opset 18): the axes are an optional constant input 1, with attributes keepdims (default 1)
 * and noop_with_empty_axes (default 0). A node in the older form, with an `axes` ints attribute
 * and no input 1, is accepted too. The output has the input's dtype; reduced dims become 1
 * (keepdims=1) or disappear (keepdims=0). No axes means every axis, unless noop_with_empty_axes
 * is set, which reduces over no axis: the output keeps the input's shape (the reference applies
 * the reduction's element function, e.g. ReduceSumSquare squares).
 */
#include "infer.h"

/* ONNX's type constraints: floats and 32/64-bit integers for all; Max and Min (opset 20) also
 * take 8-bit integers and bool. */
static bool reduce_dtype_ok(ampc_opcode op, ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_F32: case AMPC_DTYPE_F16: case AMPC_DTYPE_BF16: case AMPC_DTYPE_F64:
    case AMPC_DTYPE_I32: case AMPC_DTYPE_I64: case AMPC_DTYPE_U32: case AMPC_DTYPE_U64:
        return true;
    case AMPC_DTYPE_I8: case AMPC_DTYPE_U8: case AMPC_DTYPE_BOOL:
        return op == AMPC_OP_REDUCE_MAX || op == AMPC_OP_REDUCE_MIN;
    default: return false;
    }
}

/* Reads an int attribute that must be 0 or 1; false with a diagnostic otherwise. */
static bool read_flag(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                      bool *out) {
    int32_t before = g->diag.n + g->diag.dropped;
    int64_t v = ampc_ir_attr_int(g, n, name, dflt);
    if (g->diag.n + g->diag.dropped != before) return false; /* mistyped: already reported */
    if (v != 0 && v != 1) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be 0 or 1, got %lld", name, (long long)v);
        return false;
    }
    *out = v != 0;
    return true;
}

ampc_status ampc_infer_reduce(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    const int32_t rank = x->shape.rank;
    if (!reduce_dtype_ok(n->op, x->dtype))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 0 '%s' must be %s, got %s", x->name,
                         n->op == AMPC_OP_REDUCE_MAX || n->op == AMPC_OP_REDUCE_MIN
                             ? "f32, f16, bf16, f64, i8, i32, i64, u8, u32, u64 or bool"
                             : "f32, f16, bf16, f64, i32, i64, u32 or u64",
                         ampc_dtype_name(x->dtype));
    bool keepdims, noop;
    if (!read_flag(g, n, "keepdims", 1, &keepdims) ||
        !read_flag(g, n, "noop_with_empty_axes", 0, &noop))
        return AMPC_E_ATTR;

    /* The axes: input 1 (the newest form) or the `axes` attribute (the older one), not both. */
    int64_t axes[64];
    int32_t n_axes = 0;
    const bool have_input = n->n_inputs > 1 && n->inputs[1];
    const ampc_attr *attr = ampc_ir_attr_find(n, "axes");
    if (have_input && attr)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "axes are given both as input 1 '%s' and as an attribute; give one",
                         n->inputs[1]->name);
    if (have_input) {
        n_axes = ampc_infer_const_ints(g, n, 1, axes, AMPC_ARRAY_LEN(axes));
        if (n_axes < 0) return AMPC_E_SHAPE;
    } else if (attr) {
        if (attr->kind != AMPC_ATTR_INTS)
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'axes' must be a list of ints");
        if (attr->n > AMPC_ARRAY_LEN(axes))
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'axes' has %d entries; at most %d are "
                             "accepted", attr->n, AMPC_ARRAY_LEN(axes));
        n_axes = attr->n;
        for (int32_t i = 0; i < n_axes; i++) axes[i] = attr->ints[i];
    }

    if (n_axes == 0 && noop) { /* reduces over no axis: the input's shape */
        ampc_infer_set(n, 0, x->dtype, &x->shape);
        return AMPC_OK;
    }
    bool reduced[AMPC_MAX_RANK] = {false};
    if (n_axes == 0) {
        for (int32_t d = 0; d < rank; d++) reduced[d] = true;
    } else if (rank == 0) {
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "a scalar input 0 '%s' has no axes to reduce, but axes has %d entries",
                         x->name, n_axes);
    }
    for (int32_t i = 0; i < n_axes; i++) {
        int32_t d;
        if (!ampc_infer_axis(g, n, axes[i], rank, "axes entry", &d)) return AMPC_E_ATTR;
        if (reduced[d])
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "axes must not repeat an axis: axis %d appears "
                             "twice (axes[%d] = %lld)", d, i, (long long)axes[i]);
        reduced[d] = true;
    }

    ampc_shape s = {0};
    for (int32_t d = 0; d < rank; d++) {
        if (!reduced[d]) s.dims[s.rank++] = x->shape.dims[d];
        else if (keepdims) s.dims[s.rank++] = 1;
    }
    ampc_infer_set(n, 0, x->dtype, &s);
    return AMPC_OK;
}
