/*
 * test_linalg.c — Einsum and Det through the DSL: explicit and implicit outputs, transposes,
 * traces and diagonals (repeated subscripts), sums, outer products, "..." broadcasting and
 * integer operands for Einsum; single, batched and singular determinants; and the exact
 * diagnostics for equations and shapes that do not fit.
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <stdlib.h>

static ampc_value *cst(ampc_graph *g, const char *name, ampc_dtype t, ampc_shape s,
                       const double *vals) {
    int64_t n = ampc_shape_numel(&s);
    void *buf = calloc((size_t)(n ? n : 1), ampc_dtype_size(t));
    for (int64_t i = 0; i < n; i++) ampc_ref_store_f64(buf, t, i, vals[i]);
    ampc_value *v = ampc_constant(g, name, t, s.rank, s.dims, buf);
    free(buf);
    return v;
}

static ampc_value *einsum(ampc_graph *g, const char *eq, ampc_value **in, int32_t n) {
    ampc_attr_arg at = AMPC_ATTR_S("equation", eq);
    ampc_value *y = ampc_op(g, "Einsum", in, n, &at, 1);
    cr_assert(!ampc_value_is_poisoned(y), "Einsum %s failed:\n%s", eq, ampc_graph_errors(g));
    return y;
}

static void expect_fail(ampc_graph *g, const char *eq, ampc_value **in, int32_t n,
                        const char *needle) {
    ampc_attr_arg at = AMPC_ATTR_S("equation", eq);
    ampc_value *y = ampc_op(g, "Einsum", in, n, &at, 1);
    cr_assert(ampc_value_is_poisoned(y), "Einsum %s unexpectedly succeeded", eq);
    t_expect_diag(g, needle);
}

/* Evaluates the graph's outputs (named o0, o1, ...) and checks each against want[i]. */
static void expect_outputs(ampc_graph *g, ampc_value **ys, int32_t n, const ampc_shape *shapes,
                           const double *const *want) {
    char name[16];
    for (int32_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "o%d", (int)(i % 100));
        cr_assert_eq(ampc_output(g, ys[i], name), AMPC_OK, "%s", ampc_graph_errors(g));
    }
    ampc_tensor out[16];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, n), AMPC_OK, "%s", ampc_graph_errors(g));
    for (int32_t i = 0; i < n; i++) {
        t_expect_close(&out[i], shapes[i], want[i], 1e-12, 0);
        ampc_tensor_free(&out[i]);
    }
}

/* ---- Einsum --------------------------------------------------------------------------------- */

/* A = [[1,2],[3,4]], B = [[5,6],[7,8]]: A @ B = [[19,22],[43,50]], explicit and implicit; the
 * transpose; the trace (implicit "ii": no label used once, a scalar) and the diagonal. */
Test(linalg, einsum_matmul_transpose_trace_diagonal) {
    ampc_graph *g = ampc_graph_create("t");
    double av[4] = {1, 2, 3, 4}, bv[4] = {5, 6, 7, 8}, cv[6] = {1, 2, 3, 4, 5, 6};
    ampc_value *a = cst(g, "A", AMPC_DTYPE_F32, SHAPE(2, 2), av);
    ampc_value *b = cst(g, "B", AMPC_DTYPE_F32, SHAPE(2, 2), bv);
    ampc_value *c = cst(g, "C", AMPC_DTYPE_F32, SHAPE(2, 3), cv);
    ampc_value *ab[2] = {a, b};
    ampc_value *ys[5] = {einsum(g, "ij,jk->ik", ab, 2), einsum(g, "ij, jk", ab, 2),
                         einsum(g, "ij->ji", &c, 1), einsum(g, "ii", &a, 1),
                         einsum(g, "ii->i", &a, 1)};
    double mm[4] = {19, 22, 43, 50}, tr[6] = {1, 4, 2, 5, 3, 6}, trace[1] = {5}, dg[2] = {1, 4};
    const double *want[5] = {mm, mm, tr, trace, dg};
    ampc_shape shapes[5] = {SHAPE(2, 2), SHAPE(2, 2), SHAPE(3, 2), SHAPE(), SHAPE(2)};
    expect_outputs(g, ys, 5, shapes, want);
    ampc_graph_destroy(g);
}

/* The sum of everything, an outer product, and a batched matmul over "..." where A's batch of 2
 * meets B's missing batch (B broadcasts). */
Test(linalg, einsum_sum_outer_ellipsis) {
    ampc_graph *g = ampc_graph_create("t");
    double cv[6] = {1, 2, 3, 4, 5, 6}, pv[2] = {1, 2}, qv[3] = {3, 4, 5};
    double av[4] = {1, 2, 3, 4}, bv[2] = {5, 6};
    ampc_value *c = cst(g, "C", AMPC_DTYPE_F64, SHAPE(2, 3), cv);
    ampc_value *pq[2] = {cst(g, "p", AMPC_DTYPE_F64, SHAPE(2), pv),
                         cst(g, "q", AMPC_DTYPE_F64, SHAPE(3), qv)};
    ampc_value *ab[2] = {cst(g, "A", AMPC_DTYPE_F64, SHAPE(2, 1, 2), av),
                         cst(g, "B", AMPC_DTYPE_F64, SHAPE(2, 1), bv)};
    ampc_value *ys[3] = {einsum(g, "ij->", &c, 1), einsum(g, "i,j->ij", pq, 2),
                         einsum(g, "...ij,...jk->...ik", ab, 2)};
    /* [1,2] . [5,6] = 17, [3,4] . [5,6] = 39 */
    double sum[1] = {21}, outer[6] = {3, 4, 5, 6, 8, 10}, bmm[2] = {17, 39};
    const double *want[3] = {sum, outer, bmm};
    ampc_shape shapes[3] = {SHAPE(), SHAPE(2, 3), SHAPE(2, 1, 1)};
    expect_outputs(g, ys, 3, shapes, want);
    ampc_graph_destroy(g);
}

/* Implicit outputs sort labels in ASCII order, capitals first: "ba,aB" gives "Bb", i.e.
 * (A @ M) transposed. With i32 operands the sums are exact integers. */
Test(linalg, einsum_implicit_ascii_order_ints) {
    ampc_graph *g = ampc_graph_create("t");
    double av[6] = {1, 2, 3, 4, 5, 6}, mv[3] = {1, 10, 100};
    ampc_value *in[2] = {cst(g, "A", AMPC_DTYPE_I32, SHAPE(2, 3), av),
                         cst(g, "M", AMPC_DTYPE_I32, SHAPE(3, 1), mv)};
    ampc_value *y = einsum(g, "ba,aB", in, 2);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_I32);
    double w[2] = {321, 654}; /* [1 + 20 + 300, 4 + 50 + 600] as a [1, 2] */
    const double *want[1] = {w};
    ampc_shape shapes[1] = {SHAPE(1, 2)};
    expect_outputs(g, &y, 1, shapes, want);
    ampc_graph_destroy(g);
}

Test(linalg, einsum_errors) {
    ampc_graph *g = ampc_graph_create("t");
    double v[6] = {0};
    ampc_value *a = cst(g, "A", AMPC_DTYPE_F32, SHAPE(2, 2), v);
    ampc_value *in[2] = {a, cst(g, "B", AMPC_DTYPE_F32, SHAPE(3, 2), v)};
    expect_fail(g, "ij,jk->ik", in, 2,
                "node 0 (Einsum 'Einsum_0'): equation \"ij,jk->ik\" does not fit the inputs: "
                "subscript 'j' is 3 in input 1 but 2 before");
    expect_fail(g, "ij-k", &a, 1,
                "equation \"ij-k\" has the character '-', which is not a letter, '.', ',' or "
                "\"->\" (the node has 1 inputs)");
    expect_fail(g, "ijk", &a, 1,
                "equation \"ijk\" does not fit the inputs: input 0 has rank 2, but its term has 3 "
                "subscripts");
    expect_fail(g, "ij->iq", &a, 1, "output subscript 'q' that no input has");
    expect_fail(g, "ij", in, 2, "equation \"ij\" has 1 terms (the node has 2 inputs)");
    ampc_graph_destroy(g);
}

/* ---- Det ------------------------------------------------------------------------------------ */

/* det [[1,2],[3,4]] = -2; [[4,3],[6,3]] = -6; a batch of 3x3: 2I (8), a row swap (-1), and a
 * singular matrix (0); a partial pivot is needed for [[0,1],[1,0]]-like leading zeros. */
Test(linalg, det_single_batched_singular) {
    ampc_graph *g = ampc_graph_create("t");
    double m2[8] = {1, 2, 3, 4, 4, 3, 6, 3};
    double m3[27] = {2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 1, 0, 1, 0,
                     0, 0, 0, 1, 1, 2, 3, 2, 4, 6, 0, 1, 1};
    ampc_value *a = cst(g, "a", AMPC_DTYPE_F32, SHAPE(2, 2, 2), m2);
    ampc_value *b = cst(g, "b", AMPC_DTYPE_F64, SHAPE(3, 3, 3), m3);
    ampc_value *ys[2] = {ampc_op(g, "Det", &a, 1, NULL, 0), ampc_op(g, "Det", &b, 1, NULL, 0)};
    double w2[2] = {-2, -6}, w3[3] = {8, -1, 0};
    const double *want[2] = {w2, w3};
    ampc_shape shapes[2] = {SHAPE(2), SHAPE(3)};
    char name[4] = "d0";
    for (int i = 0; i < 2; i++, name[1]++) cr_assert_eq(ampc_output(g, ys[i], name), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    for (int i = 0; i < 2; i++) {
        t_expect_close(&out[i], shapes[i], want[i], 1e-6, 1e-12);
        ampc_tensor_free(&out[i]);
    }
    ampc_graph_destroy(g);
}

Test(linalg, det_needs_square_matrices) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *y = ampc_op(g, "Det", &x, 1, NULL, 0);
    cr_assert(ampc_value_is_poisoned(y));
    t_expect_diag(g, "node 0 (Det 'Det_0'): input 0 'x' must be [..., M, M] (square matrices), "
                     "got [2,3]");
    ampc_value *i = t_input(g, "i", AMPC_DTYPE_I32, SHAPE(2, 2));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Det", &i, 1, NULL, 0)));
    t_expect_diag(g, "input 0 'i' must be a floating-point type, got i32");
    ampc_graph_destroy(g);
}

/* A contraction over an empty subscript sums nothing: zeros of the output's shape. */
Test(linalg, einsum_empty_contraction) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[2] = {cst(g, "A", AMPC_DTYPE_F32, SHAPE(2, 0), NULL),
                         cst(g, "B", AMPC_DTYPE_F32, SHAPE(0, 3), NULL)};
    ampc_value *y = einsum(g, "ij,jk->ik", in, 2);
    double z[6] = {0};
    const double *want[1] = {z};
    ampc_shape shapes[1] = {SHAPE(2, 3)};
    expect_outputs(g, &y, 1, shapes, want);
    ampc_graph_destroy(g);
}
