/*
 * test_contract.c — MatMul and Gemm: hand-computed products, numpy's 1-D promotion, batch
 * broadcasting against an independent index formula, empty operands, integer dtypes (wrapping),
 * f16 inputs accumulated wide, Gemm's transposes, alpha/beta and C broadcasting, and the exact
 * diagnostics for shapes, dtypes and attributes.
 */
#include "support.h"

#include <math.h>

Test(contract, matmul_2d_by_hand) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2, 3));
    double bv[6] = {1, 0, 0, 1, 2, -1};
    ampc_value *y = ampc_matmul(g, a, t_const_f32(g, SHAPE(3, 2), bv));
    float av[6] = {1, 2, 3, 4, 5, 6};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), av);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    /* [1 2 3; 4 5 6] @ [1 0; 0 1; 2 -1] */
    double want[4] = {7, -1, 16, -1};
    t_expect_close(&out, SHAPE(2, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(contract, matmul_promotes_1d_operands) {
    double a1[3] = {1, 2, 3}, m[6] = {1, 2, 3, 4, 5, 6}, m32[6] = {1, 2, 3, 4, 5, 6};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *v = t_const_f32(g, SHAPE(3), a1);
    ampc_value *vm = ampc_matmul(g, v, t_const_f32(g, SHAPE(3, 2), m));  /* [3]@[3,2] -> [2] */
    ampc_value *mv = ampc_matmul(g, t_const_f32(g, SHAPE(2, 3), m32), v); /* [2,3]@[3] -> [2] */
    ampc_value *vv = ampc_matmul(g, v, v);                                /* [3]@[3] -> [] */
    cr_assert_eq(ampc_output(g, vm, "vm"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, mv, "mv"), AMPC_OK);
    cr_assert_eq(ampc_output(g, vv, "vv"), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double w_vm[2] = {1 + 6 + 15, 2 + 8 + 18}, w_mv[2] = {1 + 4 + 9, 4 + 10 + 18}, w_vv[1] = {14};
    t_expect_close(&out[0], SHAPE(2), w_vm, 0, 0);
    t_expect_close(&out[1], SHAPE(2), w_mv, 0, 0);
    t_expect_close(&out[2], SHAPE(), w_vv, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(contract, matmul_broadcasts_batch_dims) {
    /* a [2,1,2,3] @ b [3,3,2] -> [2,3,2,2]: a's dim 1 and b's missing dim 0 broadcast. */
    float av[12], bv[18];
    for (int i = 0; i < 12; i++) av[i] = (float)(i % 5) - 1;
    for (int i = 0; i < 18; i++) bv[i] = (float)((i * 3) % 7) - 2;
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2, 1, 2, 3));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(3, 3, 2));
    ampc_value *y = ampc_matmul(g, a, b);
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2, 1, 2, 3), av),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(3, 3, 2), bv)};
    ampc_tensor out = t_eval1(g, y, in, 2);
    double want[24];
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 3; q++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    double s = 0;
                    for (int k = 0; k < 3; k++)
                        s += av[(p * 2 + i) * 3 + k] * bv[(q * 3 + k) * 2 + j];
                    want[((p * 3 + q) * 2 + i) * 2 + j] = s;
                }
    t_expect_close(&out, SHAPE(2, 3, 2, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(contract, matmul_1d_against_batched) {
    /* [3] @ [2,3,2] -> [2,2] and [2,2,3] @ [3] -> [2,2]. */
    double v[3] = {1, -1, 2}, t[12];
    for (int i = 0; i < 12; i++) t[i] = i;
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *vc = t_const_f32(g, SHAPE(3), v);
    ampc_value *l = ampc_matmul(g, vc, t_const_f32(g, SHAPE(2, 3, 2), t));
    ampc_value *r = ampc_matmul(g, t_const_f32(g, SHAPE(2, 2, 3), t), vc);
    cr_assert_eq(ampc_output(g, l, "l"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, r, "r"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double wl[4], wr[4];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 2; j++) {
            wl[b * 2 + j] = 0;
            wr[b * 2 + j] = 0;
            for (int k = 0; k < 3; k++) {
                wl[b * 2 + j] += v[k] * t[(b * 3 + k) * 2 + j];
                wr[b * 2 + j] += t[(b * 2 + j) * 3 + k] * v[k];
            }
        }
    t_expect_close(&out[0], SHAPE(2, 2), wl, 0, 0);
    t_expect_close(&out[1], SHAPE(2, 2), wr, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(contract, matmul_empty_operands) {
    /* K = 0 gives zeros; M = 0 gives an empty result. */
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2, 0));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(0, 3));
    ampc_value *y = ampc_matmul(g, a, b);
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2, 0), NULL),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(0, 3), NULL)};
    ampc_tensor out = t_eval1(g, y, in, 2);
    double zeros[6] = {0};
    t_expect_close(&out, SHAPE(2, 3), zeros, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(0, 3));
    b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(4, 3, 2));
    y = ampc_matmul(g, a, b);
    float bv[24] = {0};
    ampc_tensor in2[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(0, 3), NULL),
                          t_tensor(AMPC_DTYPE_F32, SHAPE(4, 3, 2), bv)};
    out = t_eval1(g, y, in2, 2);
    t_expect_close(&out, SHAPE(4, 0, 2), NULL, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(contract, matmul_integers_wrap) {
    ampc_graph *g = ampc_graph_create("t");
    int32_t a[4] = {INT32_MAX, 1, -3, 2}, b[2] = {2, 5};
    ampc_value *y = ampc_matmul(g, t_const(g, AMPC_DTYPE_I32, SHAPE(2, 2), a),
                                t_const(g, AMPC_DTYPE_I32, SHAPE(2, 1), b));
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_I32);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    /* 2 * (2^31 - 1) + 5 = 2^32 + 3 wraps to 3 in int32; -6 + 10 = 4. */
    int64_t want[2] = {3, 4};
    t_expect_ints(&out, SHAPE(2, 1), want);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    int64_t a64[3] = {1LL << 40, -2, 3}, b64[3] = {1LL << 20, 7, -1};
    uint32_t au[2] = {UINT32_MAX, 2}, bu[2] = {1, 3};
    ampc_value *y64 = ampc_matmul(g, t_const_i64(g, SHAPE(3), a64), t_const_i64(g, SHAPE(3), b64));
    ampc_value *yu = ampc_matmul(g, t_const(g, AMPC_DTYPE_U32, SHAPE(1, 2), au),
                                 t_const(g, AMPC_DTYPE_U32, SHAPE(2), bu));
    cr_assert_eq(ampc_output(g, y64, "y64"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, yu, "yu"), AMPC_OK);
    ampc_tensor o[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, o, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t w64[1] = {(1LL << 60) - 14 - 3}, wu[1] = {5}; /* (2^32 - 1) + 6 wraps to 5 */
    t_expect_ints(&o[0], SHAPE(), w64);
    t_expect_ints(&o[1], SHAPE(1), wu);
    ampc_tensor_free(&o[0]);
    ampc_tensor_free(&o[1]);
    ampc_graph_destroy(g);
}

Test(contract, matmul_f16_accumulates_wide) {
    /* {2048, 1, 1} . {1, 1, 1}: an f16 running sum stays 2048; a wide one gives 2050. */
    ampc_graph *g = ampc_graph_create("t");
    uint16_t a[3] = {ampc_f32_to_f16(2048), ampc_f32_to_f16(1), ampc_f32_to_f16(1)};
    uint16_t b[3] = {ampc_f32_to_f16(1), ampc_f32_to_f16(1), ampc_f32_to_f16(1)};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F16, SHAPE(1, 3));
    ampc_value *y = ampc_matmul(g, x, t_const(g, AMPC_DTYPE_F16, SHAPE(3, 1), b));
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F16, SHAPE(1, 3), a);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[1] = {2050};
    t_expect_close(&out, SHAPE(1, 1), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* x [1,2] @ I, evaluated with or without the reference's TF32 emulation. */
static ampc_tensor times_identity(const float *xv, bool tf32) {
    ampc_graph *g = ampc_graph_create("t");
    double eye[4] = {1, 0, 0, 1};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1, 2));
    ampc_value *y = ampc_matmul(g, x, t_const_f32(g, SHAPE(2, 2), eye));
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(1, 2), (void *)xv);
    ampc_graph_set_reference_tf32(g, tf32);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    ampc_graph_destroy(g);
    return out;
}

/* With the reference's TF32 emulation each f32 operand keeps 10 mantissa bits (the low 13 are
 * dropped, as TF32 tensor cores read f32): x @ I returns x truncated, 1 + 2^-11 becomes 1 and
 * 1 + 2^-10 stays; an Add is not touched; without it, exact. */
Test(contract, matmul_tf32_emulation_truncates_f32_operands) {
    float xv[2] = {1.0f + 0x1p-11f, -(1.0f + 0x1p-10f + 0x1p-12f)};
    ampc_tensor out = times_identity(xv, true);
    double want[2] = {1.0, -(1.0 + 0x1p-10)};
    t_expect_close(&out, SHAPE(1, 2), want, 0, 0);
    ampc_tensor_free(&out);
    out = times_identity(xv, false);
    double exact[2] = {xv[0], xv[1]};
    t_expect_close(&out, SHAPE(1, 2), exact, 0, 0);
    ampc_tensor_free(&out);

    ampc_graph *g = ampc_graph_create("t");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *s = ampc_add(g, a, a);
    ampc_graph_set_reference_tf32(g, true);
    float av[2] = {1.0f + 0x1p-20f, 3};
    ampc_tensor ain = t_tensor(AMPC_DTYPE_F32, SHAPE(2), av);
    out = t_eval1(g, s, &ain, 1);
    double twice[2] = {2 * (double)av[0], 6};
    t_expect_close(&out, SHAPE(2), twice, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(contract, matmul_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(4, 5));
    cr_assert(ampc_value_is_poisoned(ampc_matmul(g, a, b)));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_SHAPE);
    t_expect_diag(g, "node 0 (MatMul 'MatMul_0'): MatMul inner dims differ: input 0 'a' is [2,3], "
                     "input 1 'b' is [4,5]");
    ampc_value *p = t_input(g, "p", AMPC_DTYPE_F32, SHAPE(2, 3, 4));
    ampc_value *q = t_input(g, "q", AMPC_DTYPE_F32, SHAPE(5, 4, 6));
    cr_assert(ampc_value_is_poisoned(ampc_matmul(g, p, q)));
    t_expect_diag(g, "node 1 (MatMul 'MatMul_1'): MatMul batch dims do not broadcast: input 0 'p' "
                     "is [2,3,4], input 1 'q' is [5,4,6]");
    ampc_value *s = t_input(g, "s", AMPC_DTYPE_F32, SHAPE());
    cr_assert(ampc_value_is_poisoned(ampc_matmul(g, a, s)));
    t_expect_diag(g, "node 2 (MatMul 'MatMul_2'): MatMul needs inputs of rank >= 1: input 1 's' "
                     "is a scalar");
    ampc_value *h = t_input(g, "h", AMPC_DTYPE_F16, SHAPE(3, 2));
    cr_assert(ampc_value_is_poisoned(ampc_matmul(g, a, h)));
    t_expect_diag(g, "node 3 (MatMul 'MatMul_3'): inputs 0 'a' and 1 'h' must have one dtype, got "
                     "f32 and f16");
    ampc_value *i8 = t_input(g, "i8", AMPC_DTYPE_I8, SHAPE(3, 3));
    cr_assert(ampc_value_is_poisoned(ampc_matmul(g, i8, i8)));
    t_expect_diag(g, "node 4 (MatMul 'MatMul_4'): input 0 'i8' must be f32, f16, bf16, f64, i32, "
                     "i64, u32 or u64, got i8");
    ampc_graph_destroy(g);
}

/* ---- Gemm --------------------------------------------------------------------------------- */

Test(contract, gemm_plain_with_row_bias) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2, 3));
    double bv[6] = {1, 0, 0, 1, 2, -1}, cv[2] = {10, 20};
    ampc_value *y = ampc_gemm(g, a, t_const_f32(g, SHAPE(3, 2), bv), t_const_f32(g, SHAPE(2), cv),
                              false, false);
    float av[6] = {1, 2, 3, 4, 5, 6};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), av);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[4] = {17, 19, 26, 19};
    t_expect_close(&out, SHAPE(2, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(contract, gemm_transposes_alpha_beta_column_bias) {
    /* A stored [K,M] = [3,2], B stored [N,K] = [2,3]; Y = 0.5 * A^T B^T + 2 * C, C [M,1]. */
    double at[6] = {1, 4, 2, 5, 3, 6}; /* A^T = [1 2 3; 4 5 6] */
    double bt[6] = {1, 0, 2, 0, 1, -1}; /* B^T = [1 0; 0 1; 2 -1] */
    double cv[2] = {1, -1};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[3] = {t_const_f32(g, SHAPE(3, 2), at), t_const_f32(g, SHAPE(2, 3), bt),
                         t_const_f32(g, SHAPE(2, 1), cv)};
    ampc_attr_arg attrs[4] = {AMPC_ATTR_I("transA", 1), AMPC_ATTR_I("transB", 1),
                              AMPC_ATTR_F("alpha", 0.5f), AMPC_ATTR_F("beta", 2.0f)};
    ampc_value *y = ampc_op(g, "Gemm", in, 3, attrs, 4);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    /* A^T B^T = [7 -1; 16 -1]; halved plus {2, -2} per row. */
    double want[4] = {5.5, 1.5, 6, -2.5};
    t_expect_close(&out, SHAPE(2, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(contract, gemm_scalar_c_no_c_and_empty_k) {
    double a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1};
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *ca = t_const_f32(g, SHAPE(2, 2), a), *cb = t_const_f32(g, SHAPE(2, 2), b);
    ampc_value *y1 = ampc_gemm(g, ca, cb, ampc_scalar_f32(g, 100), false, false);
    ampc_value *y2 = ampc_gemm(g, ca, cb, NULL, true, false);
    ampc_value *e = t_input(g, "e", AMPC_DTYPE_F32, SHAPE(2, 0));
    ampc_value *e2 = t_input(g, "e2", AMPC_DTYPE_F32, SHAPE(0, 3));
    ampc_value *y3 = ampc_gemm(g, e, e2, ampc_scalar_f32(g, 1.5f), false, false);
    cr_assert_eq(ampc_output(g, y1, "y1"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, y2, "y2"), AMPC_OK);
    cr_assert_eq(ampc_output(g, y3, "y3"), AMPC_OK);
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2, 0), NULL),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(0, 3), NULL)}, out[3];
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double w1[4] = {103, 103, 107, 107}, w2[4] = {4, 4, 6, 6};
    double w3[6] = {1.5, 1.5, 1.5, 1.5, 1.5, 1.5}; /* K = 0: only beta * C */
    t_expect_close(&out[0], SHAPE(2, 2), w1, 0, 0);
    t_expect_close(&out[1], SHAPE(2, 2), w2, 0, 0);
    t_expect_close(&out[2], SHAPE(2, 3), w3, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(contract, gemm_integers) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[2] = {-100, 100};
    ampc_value *in[3] = {t_const_i64(g, SHAPE(2, 2), a), t_const_i64(g, SHAPE(2, 2), b),
                         t_const_i64(g, SHAPE(2), c)};
    ampc_value *y = ampc_op(g, "Gemm", in, 3, NULL, 0);
    ampc_attr_arg half = AMPC_ATTR_F("alpha", 0.5f);
    ampc_value *yh = ampc_op(g, "Gemm", in, 2, &half, 1);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, yh, "yh"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    /* [1 2; 3 4] @ [5 6; 7 8] = [19 22; 43 50]; halves truncate: 9.5 -> 9, 21.5 -> 21. */
    int64_t w[4] = {-81, 122, -57, 150}, wh[4] = {9, 11, 21, 25};
    t_expect_ints(&out[0], SHAPE(2, 2), w);
    t_expect_ints(&out[1], SHAPE(2, 2), wh);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(contract, gemm_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(4, 5));
    ampc_value *a3 = t_input(g, "a3", AMPC_DTYPE_F32, SHAPE(2, 3, 4));
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_F32, SHAPE(3));
    cr_assert(ampc_value_is_poisoned(ampc_gemm(g, a, b, NULL, false, false)));
    t_expect_diag(g, "node 0 (Gemm 'Gemm_0'): Gemm inner dims differ: input 0 'a' is [2,3] with "
                     "transA=0 (K=3), input 1 'b' is [4,5] with transB=0 (K=4)");
    cr_assert(ampc_value_is_poisoned(ampc_gemm(g, a3, b, NULL, false, false)));
    t_expect_diag(g, "node 1 (Gemm 'Gemm_1'): input 0 'a3' must be 2-D, got [2,3,4]");
    ampc_value *b35 = t_input(g, "b35", AMPC_DTYPE_F32, SHAPE(3, 5));
    cr_assert(ampc_value_is_poisoned(ampc_gemm(g, a, b35, c, false, false)));
    t_expect_diag(g, "node 2 (Gemm 'Gemm_2'): input 2 'c' (C) must broadcast to the output [M,N] = "
                     "[2,5], got [3]");
    ampc_value *in[2] = {a, b35};
    ampc_attr_arg t2 = AMPC_ATTR_I("transB", 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Gemm", in, 2, &t2, 1)));
    t_expect_diag(g, "node 3 (Gemm 'Gemm_3'): attribute 'transB' must be 0 or 1, got 2");
    ampc_attr_arg ai = AMPC_ATTR_I("alpha", 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Gemm", in, 2, &ai, 1)));
    t_expect_diag(g, "node 4 (Gemm 'Gemm_4'): attribute 'alpha' must be of type float, got int");
    /* transposing A makes [2,3] an op(A) of [3,2]: K = 2, which [3,5] does not match. */
    cr_assert(ampc_value_is_poisoned(ampc_gemm(g, a, b35, NULL, true, false)));
    t_expect_diag(g, "node 5 (Gemm 'Gemm_5'): Gemm inner dims differ: input 0 'a' is [2,3] with "
                     "transA=1 (K=2), input 1 'b35' is [3,5] with transB=0 (K=3)");
    ampc_graph_destroy(g);
}
