/*
 * contract.c — inference for the contractions.
 *   MatMul: numpy matmul. A 1-D first input is a row [1,K] and a 1-D second input a column [K,1],
 *     the added dim being dropped from the result; the dims before the last two broadcast
 *     (numpy rules). Output [batch..., M, N].
 *   Gemm: Y = alpha * op(A) @ op(B) + beta * C with A and B 2-D, op() transposing per transA /
 *     transB, and the optional C broadcasting in one direction to [M,N]. Output [M,N].
 * Both take f32, f16, bf16, f64, i32, i64, u32 and u64 (ONNX's constraints), all inputs of one
 * dtype.
 */
#include "infer.h"

#include <string.h>

static bool contract_dtype_ok(ampc_dtype t) {
    switch (t) {
    case AMPC_DTYPE_F32: case AMPC_DTYPE_F16: case AMPC_DTYPE_BF16: case AMPC_DTYPE_F64:
    case AMPC_DTYPE_I32: case AMPC_DTYPE_I64: case AMPC_DTYPE_U32: case AMPC_DTYPE_U64:
        return true;
    default: return false;
    }
}

/* Input 0's dtype is one the contractions take and every other present input shares it. */
static bool check_dtypes(ampc_graph *g, const ampc_node *n) {
    const ampc_value *a = n->inputs[0];
    if (!contract_dtype_ok(a->dtype)) {
        AMPC_FAIL(g, n, AMPC_E_DTYPE,
                  "input 0 '%s' must be f32, f16, bf16, f64, i32, i64, u32 or u64, got %s",
                  a->name, ampc_dtype_name(a->dtype));
        return false;
    }
    for (int32_t i = 1; i < n->n_inputs; i++)
        if (n->inputs[i] && !ampc_infer_same_dtype(g, n, 0, i)) return false;
    return true;
}

ampc_status ampc_infer_matmul(ampc_graph *g, ampc_node *n) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1];
    const ampc_shape *sa = &a->shape, *sb = &b->shape;
    char as[AMPC_SHAPE_STR_MAX], bs[AMPC_SHAPE_STR_MAX];
    if (!check_dtypes(g, n)) return AMPC_E_DTYPE;
    for (int32_t i = 0; i < 2; i++)
        if (n->inputs[i]->shape.rank == 0)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "MatMul needs inputs of rank >= 1: input %d '%s' is a scalar", i,
                             n->inputs[i]->name);
    ampc_shape_str(sa, as, sizeof as);
    ampc_shape_str(sb, bs, sizeof bs);
    const int64_t ka = sa->dims[sa->rank - 1];
    const int64_t kb = sb->rank >= 2 ? sb->dims[sb->rank - 2] : sb->dims[0];
    if (ka != kb)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "MatMul inner dims differ: input 0 '%s' is %s, input 1 '%s' is %s",
                         a->name, as, b->name, bs);

    /* Batch dims: all but the last two of each (none for a 1-D input), right-aligned. */
    const int32_t ba = sa->rank >= 2 ? sa->rank - 2 : 0, bb = sb->rank >= 2 ? sb->rank - 2 : 0;
    ampc_shape out = {0};
    out.rank = AMPC_MAX(ba, bb);
    for (int32_t d = 0; d < out.rank; d++) {
        const int32_t da = d - (out.rank - ba), db = d - (out.rank - bb);
        const int64_t x = da >= 0 ? sa->dims[da] : 1, y = db >= 0 ? sb->dims[db] : 1;
        if (x != y && x != 1 && y != 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "MatMul batch dims do not broadcast: input 0 '%s' is %s, input 1 "
                             "'%s' is %s",
                             a->name, as, b->name, bs);
        out.dims[d] = x == 1 ? y : x;
    }
    if (sa->rank >= 2) out.dims[out.rank++] = sa->dims[sa->rank - 2];
    if (sb->rank >= 2) out.dims[out.rank++] = sb->dims[sb->rank - 1];
    ampc_infer_set(n, 0, a->dtype, &out);
    return AMPC_OK;
}

/* ampc.FusedMatMul: MatMul's rules with B a matrix and A of rank >= 2 (the product is one GEMM
 * of prod(A's leading dims) rows); bias (input 2) holds N elements of Y's dtype with N last;
 * z (input 3) has Y's shape; the activation is absent, "Relu", "GeluTanh" (GELU's tanh form, in
 * cuBLASLt's epilogue), or "Gelu" (the erf form) for f16/bf16, the types of ampc's own GEMM
 * kernel which runs that epilogue; floats only. */
ampc_status ampc_infer_fused_matmul(ampc_graph *g, ampc_node *n) {
    ampc_status st = ampc_infer_matmul(g, n);
    if (st) return st;
    const ampc_value *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
    if (!ampc_dtype_is_float(y->dtype) || b->shape.rank != 2 || a->shape.rank < 2)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "ampc.FusedMatMul takes a float A of rank >= 2 and a "
                         "matrix B, got %s A of rank %d and B of rank %d",
                         ampc_dtype_name(y->dtype), a->shape.rank, b->shape.rank);
    int64_t nn = b->shape.dims[1];
    const ampc_value *bias = n->n_inputs > 2 ? n->inputs[2] : NULL;
    const ampc_value *z = n->n_inputs > 3 ? n->inputs[3] : NULL;
    if (bias && (ampc_shape_numel(&bias->shape) != nn || bias->shape.rank < 1 ||
                 bias->shape.dims[bias->shape.rank - 1] != nn))
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "the bias input 2 '%s' must hold N = %lld elements "
                         "along its last dim", bias->name, (long long)nn);
    if (z && !ampc_shape_eq(&z->shape, &y->shape))
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "the residual input 3 '%s' must have the output's "
                         "shape", z->name);
    const ampc_attr *act = ampc_ir_attr_find(n, "activation");
    bool any_float = act && act->kind == AMPC_ATTR_STRING &&
                    (!strcmp(act->s, "Relu") || !strcmp(act->s, "GeluTanh"));
    if (act && !any_float &&
        !(act->kind == AMPC_ATTR_STRING && !strcmp(act->s, "Gelu") &&
          (y->dtype == AMPC_DTYPE_F16 || y->dtype == AMPC_DTYPE_BF16)))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'activation' must be the string \"Relu\" "
                         "or \"GeluTanh\" (or \"Gelu\" for f16/bf16) when present, found %s%s%s "
                         "on %s",
                         act->kind == AMPC_ATTR_STRING ? "\"" : "a non-string",
                         act->kind == AMPC_ATTR_STRING ? act->s : "",
                         act->kind == AMPC_ATTR_STRING ? "\"" : "", ampc_dtype_name(y->dtype));
    return AMPC_OK;
}

/* Reads a 0/1 int attribute; false with a diagnostic when mistyped or out of range. */
static bool read_flag(ampc_graph *g, const ampc_node *n, const char *name, bool *out) {
    int32_t before = g->diag.n + g->diag.dropped;
    int64_t v = ampc_ir_attr_int(g, n, name, 0);
    if (g->diag.n + g->diag.dropped != before) return false;
    if (v != 0 && v != 1) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be 0 or 1, got %lld", name, (long long)v);
        return false;
    }
    *out = v;
    return true;
}

ampc_status ampc_infer_gemm(ampc_graph *g, ampc_node *n) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1];
    const ampc_value *c = n->n_inputs > 2 ? n->inputs[2] : NULL;
    char as[AMPC_SHAPE_STR_MAX], bs[AMPC_SHAPE_STR_MAX];
    if (!check_dtypes(g, n)) return AMPC_E_DTYPE;
    for (int32_t i = 0; i < 2; i++)
        if (n->inputs[i]->shape.rank != 2) {
            char s[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' must be 2-D, got %s", i,
                             n->inputs[i]->name, ampc_shape_str(&n->inputs[i]->shape, s, sizeof s));
        }
    bool ta, tb;
    int32_t before = g->diag.n + g->diag.dropped;
    if (!read_flag(g, n, "transA", &ta) || !read_flag(g, n, "transB", &tb)) return AMPC_E_ATTR;
    (void)ampc_ir_attr_float(g, n, "alpha", 1.0f);
    (void)ampc_ir_attr_float(g, n, "beta", 1.0f);
    if (g->diag.n + g->diag.dropped != before) return AMPC_E_ATTR; /* mistyped alpha or beta */

    const int64_t m = a->shape.dims[ta ? 1 : 0], ka = a->shape.dims[ta ? 0 : 1];
    const int64_t kb = b->shape.dims[tb ? 1 : 0], nn = b->shape.dims[tb ? 0 : 1];
    ampc_shape_str(&a->shape, as, sizeof as);
    ampc_shape_str(&b->shape, bs, sizeof bs);
    if (ka != kb)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "Gemm inner dims differ: input 0 '%s' is %s with transA=%d (K=%lld), "
                         "input 1 '%s' is %s with transB=%d (K=%lld)",
                         a->name, as, ta, (long long)ka, b->name, bs, tb, (long long)kb);
    ampc_shape out = {2, {m, nn}};
    if (c) {
        bool ok = c->shape.rank <= 2;
        for (int32_t d = 0; ok && d < c->shape.rank; d++) {
            int64_t x = c->shape.dims[d], want = out.dims[2 - c->shape.rank + d];
            ok = x == want || x == 1;
        }
        if (!ok) {
            char cs[AMPC_SHAPE_STR_MAX], os[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input 2 '%s' (C) must broadcast to the output [M,N] = %s, got %s",
                             c->name, ampc_shape_str(&out, os, sizeof os),
                             ampc_shape_str(&c->shape, cs, sizeof cs));
        }
    }
    ampc_infer_set(n, 0, a->dtype, &out);
    return AMPC_OK;
}
