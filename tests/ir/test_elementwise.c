/*
 * test_elementwise.c — the elementwise family through the DSL: inference (shapes, dtypes, the
 * exact diagnostics) and reference values computed by hand, broadcasting edge cases included;
 * SwiGLU; and the random draws, whose seeded reference is checked for determinism, ranges and
 * moments (their values match no other framework's, by design).
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

Test(elementwise, add_broadcasts_row_and_column) {
    ampc_graph *g = ampc_graph_create("t");
    double a[3] = {1, 2, 3}, b[2] = {10, 20};
    ampc_value *x = t_const_f32(g, SHAPE(1, 3), a), *y = t_const_f32(g, SHAPE(2, 1), b);
    ampc_value *z = ampc_add(g, x, y);
    ampc_tensor out = t_eval1(g, z, NULL, 0);
    double want[6] = {11, 12, 13, 21, 22, 23};
    t_expect_close(&out, SHAPE(2, 3), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, scalar_broadcasts_to_empty_tensor) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 4));
    ampc_value *z = ampc_mul(g, x, ampc_scalar_f32(g, 2));
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(0, 4), NULL);
    ampc_tensor out = t_eval1(g, z, &in, 1);
    t_expect_close(&out, SHAPE(0, 4), NULL, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, mismatched_broadcast_names_node_and_shapes) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *y = t_input(g, "y", AMPC_DTYPE_F32, SHAPE(4));
    ampc_value *z = ampc_add(g, x, y);
    cr_assert(ampc_value_is_poisoned(z));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_SHAPE);
    t_expect_diag(g, "node 0 (Add 'Add_0'): input shapes do not broadcast: input 1 'y' is [4], "
                     "but dimension 0 is 4 where the other inputs give 3");
    /* Poison propagates silently: one root cause, one message. */
    ampc_value *w = ampc_relu(g, z);
    cr_assert(ampc_value_is_poisoned(w));
    cr_assert_eq(g->diag.n, 1);
    ampc_graph_destroy(g);
}

Test(elementwise, integer_add_wraps_and_div_truncates) {
    ampc_graph *g = ampc_graph_create("t");
    int32_t a[3] = {INT32_MAX, -7, 7}, b[3] = {1, 2, 0};
    ampc_value *x = t_const(g, AMPC_DTYPE_I32, SHAPE(3), a), *y = t_const(g, AMPC_DTYPE_I32, SHAPE(3), b);
    ampc_value *s = ampc_add(g, x, y), *d = ampc_div(g, x, y);
    ampc_value *outs[2] = {s, d};
    cr_assert_eq(ampc_output(g, outs[0], "s"), AMPC_OK);
    cr_assert_eq(ampc_output(g, outs[1], "d"), AMPC_OK);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t ws[3] = {INT32_MIN, -5, 7}, wd[3] = {INT32_MAX, -3, 0};
    t_expect_ints(&out[0], SHAPE(3), ws);
    t_expect_ints(&out[1], SHAPE(3), wd);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(elementwise, unary_math_matches_libm) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(4));
    ampc_value *y = ampc_gelu(g, ampc_sigmoid(g, x));
    float xv[4] = {-3, -0.5f, 0, 2};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(4), xv);
    ampc_tensor out = t_eval1(g, y, &in, 1);
    double want[4];
    for (int i = 0; i < 4; i++) {
        double s = 1 / (1 + exp(-(double)xv[i]));
        s = (float)s;
        want[i] = 0.5 * s * (1 + erf(s / sqrt(2)));
    }
    t_expect_close(&out, SHAPE(4), want, 1e-6, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, f16_storage_rounds_once) {
    ampc_graph *g = ampc_graph_create("t");
    uint16_t a[2] = {ampc_f32_to_f16(1.0f), ampc_f32_to_f16(65504.0f)};
    uint16_t b[2] = {ampc_f32_to_f16(0.0004882812f), ampc_f32_to_f16(32.0f)};
    ampc_value *z = ampc_add(g, t_const(g, AMPC_DTYPE_F16, SHAPE(2), a), t_const(g, AMPC_DTYPE_F16, SHAPE(2), b));
    ampc_tensor out = t_eval1(g, z, NULL, 0);
    /* 1 + 2^-11 is a tie between 1 and 1+2^-10: nearest even gives 1. 65504+32 overflows. */
    double want[2] = {1.0, INFINITY};
    t_expect_close(&out, SHAPE(2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, cast_truncates_and_saturates_nan_to_zero) {
    ampc_graph *g = ampc_graph_create("t");
    float a[4] = {-2.7f, 2.7f, NAN, 300.0f};
    ampc_value *c = ampc_cast(g, t_const(g, AMPC_DTYPE_F32, SHAPE(4), a), AMPC_DTYPE_I32);
    ampc_tensor out = t_eval1(g, c, NULL, 0);
    int64_t want[4] = {-2, 2, 0, 300};
    t_expect_ints(&out, SHAPE(4), want);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* Cast of out-of-range and non-finite floats into every integer type and bool: truncated toward
 * zero and saturated to the type's range, NaN -> 0 (true for bool), from f32 and f64 alike. */
Test(elementwise, cast_saturates_out_of_range_floats_to_the_target_type) {
    enum { N = 11 };
    const double v[N] = {300.0, -300.0, -1e30, 1e30, NAN, INFINITY, -INFINITY, 2.9, -2.9, 255.9,
                         -0.5};
    static const struct {
        ampc_dtype t;
        int64_t want[N];
    } cases[] = {
        {AMPC_DTYPE_I8, {127, -128, -128, 127, 0, 127, -128, 2, -2, 127, 0}},
        {AMPC_DTYPE_U8, {255, 0, 0, 255, 0, 255, 0, 2, 0, 255, 0}},
        {AMPC_DTYPE_I16, {300, -300, -32768, 32767, 0, 32767, -32768, 2, -2, 255, 0}},
        {AMPC_DTYPE_U16, {300, 0, 0, 65535, 0, 65535, 0, 2, 0, 255, 0}},
        {AMPC_DTYPE_I32, {300, -300, INT32_MIN, INT32_MAX, 0, INT32_MAX, INT32_MIN, 2, -2, 255, 0}},
        {AMPC_DTYPE_U32, {300, 0, 0, UINT32_MAX, 0, UINT32_MAX, 0, 2, 0, 255, 0}},
        {AMPC_DTYPE_I64, {300, -300, INT64_MIN, INT64_MAX, 0, INT64_MAX, INT64_MIN, 2, -2, 255, 0}},
        /* u64 loads as int64: -1 is UINT64_MAX */
        {AMPC_DTYPE_U64, {300, 0, 0, -1, 0, -1, 0, 2, 0, 255, 0}},
        {AMPC_DTYPE_BOOL, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
    };
    for (int src = 0; src < 2; src++) {
        float f[N];
        for (int i = 0; i < N; i++) f[i] = (float)v[i];
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            ampc_graph *g = ampc_graph_create("t");
            ampc_value *x = src ? t_const(g, AMPC_DTYPE_F64, SHAPE(N), v)
                                : t_const(g, AMPC_DTYPE_F32, SHAPE(N), f);
            ampc_tensor out = t_eval1(g, ampc_cast(g, x, cases[c].t), NULL, 0);
            cr_assert_eq(out.dtype, cases[c].t);
            t_expect_ints(&out, SHAPE(N), cases[c].want);
            ampc_tensor_free(&out);
            ampc_graph_destroy(g);
        }
    }
}

Test(elementwise, where_and_compare) {
    ampc_graph *g = ampc_graph_create("t");
    double a[4] = {1, 5, 3, 7}, b[1] = {4};
    ampc_value *x = t_const_f32(g, SHAPE(4), a), *t = t_const_f32(g, SHAPE(1), b);
    ampc_value *cmp_in[2] = {x, t};
    ampc_value *m = ampc_op(g, "Greater", cmp_in, 2, NULL, 0);
    ampc_value *w_in[3] = {m, x, t};
    ampc_value *w = ampc_op(g, "Where", w_in, 3, NULL, 0);
    ampc_tensor out = t_eval1(g, w, NULL, 0);
    double want[4] = {4, 5, 4, 7};
    t_expect_close(&out, SHAPE(4), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, wrong_dtype_is_named) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "ids", AMPC_DTYPE_I64, SHAPE(3));
    ampc_value *y = ampc_sqrt(g, x);
    cr_assert(ampc_value_is_poisoned(y));
    t_expect_diag(g, "node 0 (Sqrt 'Sqrt_0'): input 0 'ids' must be a floating-point type, got i64");
    ampc_graph_destroy(g);
}

/* ---- Sign, BitwiseNot, Abs of unsigned ------------------------------------------------------ */

Test(elementwise, sign_of_floats_and_integers) {
    ampc_graph *g = ampc_graph_create("t");
    double f[5] = {-2.5, -0.0, 0, 3, NAN};
    int8_t i8[4] = {-128, -1, 0, 127};
    uint64_t u[3] = {0, 1, UINT64_MAX}; /* UINT64_MAX must not read as -1 */
    ampc_value *a = ampc_op(g, "Sign", (ampc_value *[]){t_const_f32(g, SHAPE(5), f)}, 1, NULL, 0);
    ampc_value *b = ampc_op(g, "Sign", (ampc_value *[]){t_const(g, AMPC_DTYPE_I8, SHAPE(4), i8)}, 1, NULL, 0);
    ampc_value *c = ampc_op(g, "Sign", (ampc_value *[]){t_const(g, AMPC_DTYPE_U64, SHAPE(3), u)}, 1, NULL, 0);
    cr_assert_eq(ampc_output(g, a, "out_a"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, b, "out_b"), AMPC_OK);
    cr_assert_eq(ampc_output(g, c, "out_c"), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double wf[5] = {-1, 0, 0, 1, NAN};
    int64_t wb[4] = {-1, -1, 0, 1}, wc[3] = {0, 1, 1};
    t_expect_close(&out[0], SHAPE(5), wf, 0, 0);
    t_expect_ints(&out[1], SHAPE(4), wb);
    t_expect_ints(&out[2], SHAPE(3), wc);
    cr_assert_eq(out[2].dtype, AMPC_DTYPE_U64);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(elementwise, bitwise_not_and_unsigned_abs) {
    ampc_graph *g = ampc_graph_create("t");
    uint8_t u8[3] = {0, 0x0f, 0xff};
    int32_t i32[3] = {0, -1, 5};
    uint64_t u64[2] = {UINT64_MAX, 3};
    ampc_value *a = ampc_op(g, "BitwiseNot", (ampc_value *[]){t_const(g, AMPC_DTYPE_U8, SHAPE(3), u8)}, 1, NULL, 0);
    ampc_value *b = ampc_op(g, "BitwiseNot", (ampc_value *[]){t_const(g, AMPC_DTYPE_I32, SHAPE(3), i32)}, 1, NULL, 0);
    ampc_value *c = ampc_op(g, "Abs", (ampc_value *[]){t_const(g, AMPC_DTYPE_U64, SHAPE(2), u64)}, 1, NULL, 0);
    cr_assert_eq(ampc_output(g, a, "out_a"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, b, "out_b"), AMPC_OK);
    cr_assert_eq(ampc_output(g, c, "out_c"), AMPC_OK);
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t wa[3] = {0xff, 0xf0, 0}, wb[3] = {-1, 0, -6};
    t_expect_ints(&out[0], SHAPE(3), wa);
    t_expect_ints(&out[1], SHAPE(3), wb);
    cr_assert_eq(((uint64_t *)out[2].data)[0], UINT64_MAX); /* |x| of unsigned is x */
    cr_assert_eq(((uint64_t *)out[2].data)[1], 3);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

/* ---- Mod ------------------------------------------------------------------------------------ */

/* Mod of two i32 constants (broadcast) with the given fmod; returns the evaluated output. */
static ampc_tensor mod_i32(ampc_graph *g, const int32_t *a, ampc_shape sa, const int32_t *b,
                           ampc_shape sb, int64_t fmod) {
    ampc_value *in[2] = {t_const(g, AMPC_DTYPE_I32, sa, a), t_const(g, AMPC_DTYPE_I32, sb, b)};
    ampc_attr_arg at = AMPC_ATTR_I("fmod", fmod);
    return t_eval1(g, ampc_op(g, "Mod", in, 2, &at, 1), NULL, 0);
}

Test(elementwise, mod_integer_takes_divisor_sign_fmod_dividend_sign) {
    int32_t a[6] = {-4, 7, 5, -7, 0, 9}, b[6] = {3, -3, 2, -3, 5, 0};
    ampc_graph *g = ampc_graph_create("t");
    ampc_tensor out = mod_i32(g, a, SHAPE(6), b, SHAPE(6), 0);
    int64_t floored[6] = {2, -2, 1, -1, 0, 0}; /* numpy's mod; x mod 0 gives 0 */
    t_expect_ints(&out, SHAPE(6), floored);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    g = ampc_graph_create("t");
    out = mod_i32(g, a, SHAPE(6), b, SHAPE(6), 1);
    int64_t trunc[6] = {-1, 1, 1, -1, 0, 0}; /* C's %: the dividend's sign */
    t_expect_ints(&out, SHAPE(6), trunc);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, mod_broadcasts_and_handles_extremes) {
    ampc_graph *g = ampc_graph_create("t");
    int32_t a[4] = {INT32_MIN, -1, 10, 11}, b[2] = {-1, 4};
    ampc_tensor out = mod_i32(g, a, SHAPE(2, 2), b, SHAPE(2), 0);
    int64_t w[4] = {0, 3, 0, 3};
    t_expect_ints(&out, SHAPE(2, 2), w);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    int64_t a64[2] = {INT64_MIN, INT64_MIN}, b64[2] = {-1, 3};
    uint64_t ua[2] = {UINT64_MAX, 10}, ub[2] = {10, 4};
    ampc_value *i1[2] = {t_const(g, AMPC_DTYPE_I64, SHAPE(2), a64), t_const(g, AMPC_DTYPE_I64, SHAPE(2), b64)};
    ampc_value *i2[2] = {t_const(g, AMPC_DTYPE_U64, SHAPE(2), ua), t_const(g, AMPC_DTYPE_U64, SHAPE(2), ub)};
    ampc_value *m1 = ampc_op(g, "Mod", i1, 2, NULL, 0), *m2 = ampc_op(g, "Mod", i2, 2, NULL, 0);
    cr_assert_eq(ampc_output(g, m1, "out_m1"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, m2, "out_m2"), AMPC_OK);
    ampc_tensor o[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, o, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    /* INT64_MIN = -3 * 3074457345618258603 + 1: floored remainder 1. UINT64_MAX % 10 = 5. */
    int64_t w1[2] = {0, 1}, w2[2] = {5, 2};
    t_expect_ints(&o[0], SHAPE(2), w1);
    t_expect_ints(&o[1], SHAPE(2), w2);
    ampc_tensor_free(&o[0]);
    ampc_tensor_free(&o[1]);
    ampc_graph_destroy(g);
}

Test(elementwise, mod_float_is_c_fmod) {
    ampc_graph *g = ampc_graph_create("t");
    double a[5] = {-4.5, 7.25, 5, -7, 1}, b[5] = {3, -3, 2.5, -3, 0};
    ampc_value *in[2] = {t_const_f32(g, SHAPE(5), a), t_const_f32(g, SHAPE(5), b)};
    ampc_attr_arg at = AMPC_ATTR_I("fmod", 1);
    ampc_tensor out = t_eval1(g, ampc_op(g, "Mod", in, 2, &at, 1), NULL, 0);
    double w[5] = {-1.5, 1.25, 0, -1, NAN};
    t_expect_close(&out, SHAPE(5), w, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    uint16_t ha[2] = {ampc_f32_to_f16(-4.5f), ampc_f32_to_f16(3.0f)};
    uint16_t hb[2] = {ampc_f32_to_f16(2.0f), ampc_f32_to_f16(-2.0f)};
    ampc_value *hin[2] = {t_const(g, AMPC_DTYPE_F16, SHAPE(2), ha), t_const(g, AMPC_DTYPE_F16, SHAPE(2), hb)};
    out = t_eval1(g, ampc_op(g, "Mod", hin, 2, &at, 1), NULL, 0);
    double wh[2] = {-0.5, 1};
    t_expect_close(&out, SHAPE(2), wh, 0, 0);
    cr_assert_eq(out.dtype, AMPC_DTYPE_F16);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, mod_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2)), *y = t_input(g, "y", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *in[2] = {x, y};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Mod", in, 2, NULL, 0)));
    t_expect_diag(g, "node 0 (Mod 'Mod_0'): attribute 'fmod' must be 1 for floating-point inputs "
                     "(input 0 'x' is f32), got 0");
    ampc_attr_arg f2 = AMPC_ATTR_I("fmod", 2);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Mod", in, 2, &f2, 1)));
    t_expect_diag(g, "node 1 (Mod 'Mod_1'): attribute 'fmod' must be 0 or 1, got 2");
    ampc_value *i = t_input(g, "i", AMPC_DTYPE_I32, SHAPE(2));
    ampc_value *mixed[2] = {i, y};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Mod", mixed, 2, NULL, 0)));
    t_expect_diag(g, "node 2 (Mod 'Mod_2'): inputs 0 'i' and 1 'y' must have one dtype, got i32 "
                     "and f32");
    ampc_graph_destroy(g);
}

/* ---- BitShift, BitwiseAnd / Or / Xor -------------------------------------------------------- */

Test(elementwise, bitshift_left_and_right_by_dtype) {
    ampc_graph *g = ampc_graph_create("t");
    uint8_t x8[4] = {1, 0x81, 0xff, 16}, s8[4] = {1, 1, 8, 2};
    uint32_t x32[3] = {16, 4, 1}, s32[1] = {2};
    ampc_attr_arg left = AMPC_ATTR_S("direction", "LEFT"), right = AMPC_ATTR_S("direction", "RIGHT");
    ampc_value *a[2] = {t_const(g, AMPC_DTYPE_U8, SHAPE(4), x8), t_const(g, AMPC_DTYPE_U8, SHAPE(4), s8)};
    ampc_value *b[2] = {t_const(g, AMPC_DTYPE_U32, SHAPE(3), x32), t_const(g, AMPC_DTYPE_U32, SHAPE(1), s32)};
    ampc_value *l8 = ampc_op(g, "BitShift", a, 2, &left, 1), *r8 = ampc_op(g, "BitShift", a, 2, &right, 1);
    ampc_value *r32 = ampc_op(g, "BitShift", b, 2, &right, 1);
    cr_assert_eq(ampc_output(g, l8, "out_l8"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, r8, "out_r8"), AMPC_OK);
    cr_assert_eq(ampc_output(g, r32, "out_r32"), AMPC_OK);
    ampc_tensor o[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, o, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    /* 0x81 << 1 keeps the low 8 bits; a shift by the full width gives 0. */
    int64_t wl[4] = {2, 0x02, 0, 64}, wr[4] = {0, 0x40, 0, 4}, w32[3] = {4, 1, 0};
    t_expect_ints(&o[0], SHAPE(4), wl);
    t_expect_ints(&o[1], SHAPE(4), wr);
    t_expect_ints(&o[2], SHAPE(3), w32);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&o[i]);
    ampc_graph_destroy(g);
}

Test(elementwise, bitshift_u64_high_bit) {
    ampc_graph *g = ampc_graph_create("t");
    uint64_t x[2] = {UINT64_MAX, 1}, s[2] = {63, 63};
    ampc_value *in[2] = {t_const(g, AMPC_DTYPE_U64, SHAPE(2), x), t_const(g, AMPC_DTYPE_U64, SHAPE(2), s)};
    ampc_attr_arg right = AMPC_ATTR_S("direction", "RIGHT"), left = AMPC_ATTR_S("direction", "LEFT");
    ampc_value *r = ampc_op(g, "BitShift", in, 2, &right, 1), *l = ampc_op(g, "BitShift", in, 2, &left, 1);
    cr_assert_eq(ampc_output(g, r, "out_r"), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_output(g, l, "out_l"), AMPC_OK);
    ampc_tensor o[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, o, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    const uint64_t *rv = o[0].data, *lv = o[1].data;
    cr_assert_eq(rv[0], 1); /* a logical shift: no sign fill */
    cr_assert_eq(rv[1], 0);
    cr_assert_eq(lv[0], 1ull << 63);
    cr_assert_eq(lv[1], 1ull << 63);
    ampc_tensor_free(&o[0]);
    ampc_tensor_free(&o[1]);
    ampc_graph_destroy(g);
}

Test(elementwise, bitwise_and_or_xor_broadcast) {
    ampc_graph *g = ampc_graph_create("t");
    int16_t a[4] = {0x0f0f, -1, 0, 0x1234}, b[1] = {0x00ff};
    ampc_value *in[2] = {t_const(g, AMPC_DTYPE_I16, SHAPE(2, 2), a), t_const(g, AMPC_DTYPE_I16, SHAPE(1), b)};
    const char *ops[3] = {"BitwiseAnd", "BitwiseOr", "BitwiseXor"};
    int64_t w[3][4] = {{0x000f, 0x00ff, 0, 0x0034},
                       {0x0fff, -1, 0x00ff, 0x12ff},
                       {0x0ff0, (int16_t)0xff00, 0x00ff, 0x12cb}};
    for (int i = 0; i < 3; i++) {
        ampc_value *y = ampc_op(g, ops[i], in, 2, NULL, 0);
        cr_assert_eq(ampc_output(g, y, ops[i]), AMPC_OK, "%s", ampc_graph_errors(g));
    }
    ampc_tensor o[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, o, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    for (int i = 0; i < 3; i++) {
        t_expect_ints(&o[i], SHAPE(2, 2), w[i]);
        ampc_tensor_free(&o[i]);
    }
    ampc_graph_destroy(g);
}

Test(elementwise, bitwise_diagnostics) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *s = t_input(g, "s", AMPC_DTYPE_I32, SHAPE(2)), *u = t_input(g, "u", AMPC_DTYPE_U8, SHAPE(2));
    ampc_value *f = t_input(g, "f", AMPC_DTYPE_F32, SHAPE(2));
    ampc_attr_arg left = AMPC_ATTR_S("direction", "LEFT"), up = AMPC_ATTR_S("direction", "UP");
    ampc_value *si[2] = {s, s}, *ui[2] = {u, u}, *fi[2] = {f, f};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BitShift", si, 2, &left, 1)));
    t_expect_diag(g, "node 0 (BitShift 'BitShift_0'): input 0 's' must be an unsigned integer type "
                     "(u8, u16, u32, u64), got i32");
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BitShift", ui, 2, &up, 1)));
    t_expect_diag(g, "node 1 (BitShift 'BitShift_1'): attribute 'direction' must be the string "
                     "\"LEFT\" or \"RIGHT\"");
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BitShift", ui, 2, NULL, 0)));
    t_expect_diag(g, "node 2 (BitShift 'BitShift_2'): attribute 'direction' must be the string "
                     "\"LEFT\" or \"RIGHT\" (it is required)");
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BitwiseAnd", fi, 2, NULL, 0)));
    t_expect_diag(g, "node 3 (BitwiseAnd 'BitwiseAnd_3'): input 0 'f' must be an integer type, got f32");
    ampc_value *bad = t_input(g, "v", AMPC_DTYPE_U8, SHAPE(3));
    ampc_value *mis[2] = {u, bad};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "BitwiseOr", mis, 2, NULL, 0)));
    t_expect_diag(g, "node 4 (BitwiseOr 'BitwiseOr_4'): input shapes do not broadcast: input 1 'v' "
                     "is [3], but dimension 0 is 3 where the other inputs give 2");
    ampc_value *bn = ampc_op(g, "BitwiseNot", &f, 1, NULL, 0);
    cr_assert(ampc_value_is_poisoned(bn));
    t_expect_diag(g, "node 5 (BitwiseNot 'BitwiseNot_5'): input 0 'f' must be an integer type, got f32");
    ampc_graph_destroy(g);
}

/* ---- PRelu ---------------------------------------------------------------------------------- */

Test(elementwise, prelu_per_channel_slope) {
    /* X [2, 3, 2] with slope [3, 1]: channel c's negatives are scaled by slope[c]. */
    ampc_graph *g = ampc_graph_create("t");
    double xv[12] = {-1, 2, -3, 4, -5, 6, 7, -8, 9, -10, 11, -12}, sv[3] = {0.5, 2, -1};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3, 2));
    ampc_value *in[2] = {x, t_const_f32(g, SHAPE(3, 1), sv)};
    ampc_value *y = ampc_op(g, "PRelu", in, 2, NULL, 0);
    float xf[12];
    for (int i = 0; i < 12; i++) xf[i] = (float)xv[i];
    ampc_tensor xt = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3, 2), xf);
    ampc_tensor out = t_eval1(g, y, &xt, 1);
    double w[12];
    for (int i = 0; i < 12; i++) w[i] = xv[i] < 0 ? xv[i] * sv[(i / 2) % 3] : xv[i];
    t_expect_close(&out, SHAPE(2, 3, 2), w, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, prelu_scalar_slope_and_integers) {
    ampc_graph *g = ampc_graph_create("t");
    int32_t xi[4] = {-3, 0, 5, -1}, si[1] = {4};
    ampc_value *in[2] = {t_const(g, AMPC_DTYPE_I32, SHAPE(4), xi), t_const(g, AMPC_DTYPE_I32, SHAPE(), si)};
    ampc_tensor out = t_eval1(g, ampc_op(g, "PRelu", in, 2, NULL, 0), NULL, 0);
    int64_t w[4] = {-12, 0, 5, -4};
    t_expect_ints(&out, SHAPE(4), w);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double xd[3] = {-2, NAN, 1}, sd[1] = {0.25};
    ampc_value *din[2] = {t_const(g, AMPC_DTYPE_F64, SHAPE(3), xd), t_const(g, AMPC_DTYPE_F64, SHAPE(1), sd)};
    out = t_eval1(g, ampc_op(g, "PRelu", din, 2, NULL, 0), NULL, 0);
    double wd[3] = {-0.5, NAN, 1};
    t_expect_close(&out, SHAPE(3), wd, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(elementwise, prelu_slope_must_broadcast_one_way) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *s = t_input(g, "slope", AMPC_DTYPE_F32, SHAPE(4, 1, 3));
    ampc_value *in[2] = {x, s};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "PRelu", in, 2, NULL, 0)));
    t_expect_diag(g, "node 0 (PRelu 'PRelu_0'): input 1 'slope' (slope) must broadcast to the shape "
                     "of input 0 'x' [2,3] (unidirectional), got [4,1,3]");
    ampc_value *s2 = t_input(g, "s2", AMPC_DTYPE_F32, SHAPE(2, 1)), *x1 = t_input(g, "x1", AMPC_DTYPE_F32, SHAPE(3));
    ampc_value *in2[2] = {x1, s2}; /* [3] with [2,1] broadcasts both ways: not allowed */
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "PRelu", in2, 2, NULL, 0)));
    t_expect_diag(g, "node 1 (PRelu 'PRelu_1'): input 1 's2' (slope) must broadcast to the shape of "
                     "input 0 'x1' [3] (unidirectional), got [2,1]");
    ampc_graph_destroy(g);
}

/* ---- CastLike ------------------------------------------------------------------------------- */

Test(elementwise, cast_like_takes_the_dtype_of_input_1) {
    ampc_graph *g = ampc_graph_create("t");
    double xv[3] = {-2.7, 2.5, 100.9};
    ampc_value *x = t_const_f32(g, SHAPE(3), xv);
    ampc_value *like = t_input(g, "like", AMPC_DTYPE_I8, SHAPE(7, 7));
    ampc_value *in[2] = {x, like};
    ampc_value *y = ampc_op(g, "CastLike", in, 2, NULL, 0);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_I8);
    int8_t lk[49] = {0};
    ampc_tensor lt = t_tensor(AMPC_DTYPE_I8, SHAPE(7, 7), lk);
    ampc_tensor out = t_eval1(g, y, &lt, 1);
    int64_t w[3] = {-2, 2, 100}; /* truncation toward zero, as Cast does */
    t_expect_ints(&out, SHAPE(3), w);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    g = ampc_graph_create("t");
    double hv[2] = {1.0 / 3, 65520};
    ampc_value *hin[2] = {t_const_f32(g, SHAPE(2), hv), t_const(g, AMPC_DTYPE_F16, SHAPE(), (uint16_t[]){0})};
    out = t_eval1(g, ampc_op(g, "CastLike", hin, 2, NULL, 0), NULL, 0);
    double wh[2] = {ampc_f16_to_f32(ampc_f32_to_f16((float)(1.0 / 3))), INFINITY};
    t_expect_close(&out, SHAPE(2), wh, 0, 0);
    cr_assert_eq(out.dtype, AMPC_DTYPE_F16);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* ---- SwiGLU --------------------------------------------------------------------------------- */

static double sig(double v) { return 1 / (1 + exp(-v)); }

/* y = a * sigmoid(alpha * a) * b, without broadcasting; alpha 1 (default) and 2. */
Test(elementwise, swiglu_values_and_alpha) {
    double av[4] = {0, 1, -2, 3}, bv[4] = {5, 2, 1, -1};
    for (int k = 0; k < 2; k++) {
        double alpha = k ? 2 : 1, want[4];
        for (int i = 0; i < 4; i++) want[i] = av[i] * sig(alpha * av[i]) * bv[i];
        ampc_graph *g = ampc_graph_create("t");
        ampc_value *in[2] = {t_const_f32(g, SHAPE(2, 2), av), t_const_f32(g, SHAPE(2, 2), bv)};
        ampc_attr_arg at = AMPC_ATTR_F("alpha", 2.0f);
        ampc_value *y = ampc_op(g, "SwiGLU", in, 2, &at, k);
        ampc_tensor out = t_eval1(g, y, NULL, 0);
        t_expect_close(&out, SHAPE(2, 2), want, 1e-6, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
    }
}

Test(elementwise, swiglu_does_not_broadcast) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *in[2] = {t_input(g, "a", AMPC_DTYPE_F16, SHAPE(2, 4)),
                         t_input(g, "b", AMPC_DTYPE_F16, SHAPE(4))};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "SwiGLU", in, 2, NULL, 0)));
    t_expect_diag(g, "node 0 (SwiGLU 'SwiGLU_0'): inputs 0 'a' and 1 'b' must have one shape "
                     "(SwiGLU does not broadcast), got [2,4] and [4]");
    ampc_graph_destroy(g);
}

/* ---- random draws --------------------------------------------------------------------------- */

/* Evaluates a graph whose outputs are ys[0..n-1] (no inputs) into outs. */
static void eval_all(ampc_graph *g, ampc_value **ys, int n, ampc_tensor *outs) {
    for (int i = 0; i < n; i++) {
        char name[24];
        snprintf(name, sizeof name, "o%d", i);
        cr_assert_eq(ampc_output(g, ys[i], name), AMPC_OK, "%s", ampc_graph_errors(g));
    }
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, outs, n), AMPC_OK, "%s", ampc_graph_errors(g));
}

/* Mean and variance of the first `count` elements of an f32 tensor. */
static void moments(const ampc_tensor *t, int64_t count, double *mean, double *var) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < count; i++) s += ((float *)t->data)[i];
    *mean = s / (double)count;
    for (int64_t i = 0; i < count; i++) s2 += pow(((float *)t->data)[i] - *mean, 2);
    *var = s2 / (double)count;
}

/* The reference draws from a seeded generator: one seed gives one sequence (two nodes with seed 3
 * agree bit for bit), another seed another; uniform draws lie in [low, high) with the uniform
 * mean and variance (low + high) / 2 and (high - low)^2 / 12, normal ones have mean and scale^2
 * for variance (20000 draws: the tolerances are several standard errors wide, and the draws are
 * deterministic, so the test cannot flake). */
Test(random, seeded_uniform_and_normal_moments) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t shape[1] = {20000};
    ampc_attr_arg u[4] = {AMPC_ATTR_IS("shape", shape, 1), AMPC_ATTR_F("low", -1.0f),
                          AMPC_ATTR_F("high", 3.0f), AMPC_ATTR_F("seed", 3.0f)};
    ampc_attr_arg nrm[4] = {AMPC_ATTR_IS("shape", shape, 1), AMPC_ATTR_F("mean", 5.0f),
                            AMPC_ATTR_F("scale", 2.0f), AMPC_ATTR_F("seed", 4.0f)};
    ampc_value *ys[4] = {ampc_op(g, "RandomUniform", NULL, 0, u, 4),
                         ampc_op(g, "RandomUniform", NULL, 0, u, 4),
                         ampc_op(g, "RandomUniform", NULL, 0, u, 3), /* unseeded */
                         ampc_op(g, "RandomNormal", NULL, 0, nrm, 4)};
    /* Random nodes are never folded, even without inputs. */
    for (int i = 0; i < 4; i++) cr_assert_null(ys[i]->data);
    ampc_tensor o[4];
    eval_all(g, ys, 4, o);
    cr_assert_eq(memcmp(o[0].data, o[1].data, sizeof(float) * 20000), 0);
    cr_assert_neq(memcmp(o[0].data, o[2].data, sizeof(float) * 20000), 0);
    float lo = 1, hi = -1;
    for (int i = 0; i < 20000; i++) {
        lo = fminf(lo, ((float *)o[0].data)[i]);
        hi = fmaxf(hi, ((float *)o[0].data)[i]);
    }
    cr_assert(lo >= -1 && hi < 3 && lo < -0.99 && hi > 2.99, "range [%g, %g]", lo, hi);
    double m, v;
    moments(&o[0], 20000, &m, &v);
    cr_assert(fabs(m - 1) < 0.05 && fabs(v - 16.0 / 12) < 0.05, "uniform mean %g var %g", m, v);
    moments(&o[3], 20000, &m, &v);
    cr_assert(fabs(m - 5) < 0.05 && fabs(v - 4) < 0.15, "normal mean %g var %g", m, v);
    for (int i = 0; i < 4; i++) ampc_tensor_free(&o[i]);
    ampc_graph_destroy(g);
}

/* The *Like forms take input 0's shape and (without `dtype`) its dtype; Bernoulli draws 1 with
 * probability p: exactly 0 and 1 at the ends, about half at 0.5. */
Test(random, like_forms_and_bernoulli) {
    ampc_graph *g = ampc_graph_create("t");
    double pv[3000];
    for (int i = 0; i < 3000; i++) pv[i] = i < 1000 ? 0 : i < 2000 ? 1 : 0.5;
    ampc_value *p = t_const(g, AMPC_DTYPE_F64, SHAPE(3000), pv);
    ampc_attr_arg dt = AMPC_ATTR_I("dtype", 9); /* BOOL */
    ampc_value *like = ampc_op(g, "RandomNormalLike", &p, 1, NULL, 0);
    ampc_value *bern = ampc_op(g, "Bernoulli", &p, 1, &dt, 1);
    cr_assert_eq(ampc_value_dtype(like), AMPC_DTYPE_F64);
    cr_assert_eq(ampc_value_dtype(bern), AMPC_DTYPE_BOOL);
    ampc_value *ys[2] = {like, bern};
    ampc_tensor o[2];
    eval_all(g, ys, 2, o);
    const uint8_t *b = o[1].data;
    int ones = 0;
    for (int i = 0; i < 1000; i++) cr_assert_eq(b[i], 0);
    for (int i = 1000; i < 2000; i++) cr_assert_eq(b[i], 1);
    for (int i = 2000; i < 3000; i++) ones += b[i];
    cr_assert(ones > 430 && ones < 570, "%d of 1000 draws at p = 0.5", ones);
    ampc_tensor_free(&o[0]);
    ampc_tensor_free(&o[1]);
    ampc_graph_destroy(g);
}

/* Multinomial samples class indices from softmax(logits): a row with one finite logit always
 * gives that class; logits log(1/4), log(3/4) give class 1 about 3/4 of the time. */
Test(random, multinomial_samples_the_softmax) {
    ampc_graph *g = ampc_graph_create("t");
    double lv[6] = {-INFINITY, 0, -INFINITY, log(0.25), log(0.75), -INFINITY};
    ampc_value *x = t_const_f32(g, SHAPE(2, 3), lv);
    ampc_attr_arg at[2] = {AMPC_ATTR_I("sample_size", 4000), AMPC_ATTR_I("dtype", 7)};
    ampc_value *y = ampc_op(g, "Multinomial", &x, 1, at, 2);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_I64);
    ampc_tensor out = t_eval1(g, y, NULL, 0);
    const int64_t *s = out.data;
    int ones = 0;
    for (int i = 0; i < 4000; i++) cr_assert_eq(s[i], 1);
    for (int i = 4000; i < 8000; i++) {
        cr_assert(s[i] == 0 || s[i] == 1);
        ones += s[i] == 1;
    }
    cr_assert(ones > 2850 && ones < 3150, "%d of 4000 draws of class 1", ones);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(random, errors) {
    ampc_graph *g = ampc_graph_create("t");
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RandomNormal", NULL, 0, NULL, 0)));
    t_expect_diag(g, "node 0 (RandomNormal 'RandomNormal_0'): attribute 'shape' is required (the "
                     "output dims)");
    ampc_value *xi = t_input(g, "xi", AMPC_DTYPE_I32, SHAPE(3));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "RandomUniformLike", &xi, 1, NULL, 0)));
    t_expect_diag(g, "node 1 (RandomUniformLike 'RandomUniformLike_1'): the output dtype "
                     "(attribute 'dtype', or else input 0's) must be a float type, got i32");
    ampc_value *x1 = t_input(g, "x1", AMPC_DTYPE_F32, SHAPE(3));
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Multinomial", &x1, 1, NULL, 0)));
    t_expect_diag(g, "node 2 (Multinomial 'Multinomial_2'): input 0 'x1' must be 2-D [batch, "
                     "classes], got [3]");
    ampc_graph_destroy(g);

    /* A probability outside [0, 1] is an evaluation error. */
    g = ampc_graph_create("t");
    ampc_value *p = t_input(g, "p", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *b = ampc_op(g, "Bernoulli", &p, 1, NULL, 0);
    cr_assert_eq(ampc_output(g, b, NULL), AMPC_OK);
    float pv[2] = {0.5f, 1.5f};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2), pv), out;
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &out, 1), AMPC_E_EVAL);
    t_expect_diag(g, "node 0 (Bernoulli 'Bernoulli_0'): element 1 of input 0 'p' is 1.5; a "
                     "probability must lie in [0, 1]");
    ampc_graph_destroy(g);
}

/* Found by fuzz_onnx: an input named "" (ONNX's omitted optional input) in the variadic part of
 * Sum built a node with a NULL operand that shape inference then read. Only Loop may omit
 * inputs of its variadic list (its trip count and condition). */
Test(elementwise, variadic_input_cannot_be_omitted) {
    ampc_graph *g = ampc_graph_create("sum");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3));
    const char *ops[] = {"Sum", "Max", "Concat"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        ampc_value *in[3] = {x, NULL, x};
        ampc_attr_arg axis = AMPC_ATTR_I("axis", 0);
        ampc_graph_clear_errors(g);
        ampc_value *y = ampc_op(g, ops[k], in, 3, &axis, k == 2 ? 1 : 0);
        cr_assert(ampc_value_is_poisoned(y), "%s", ops[k]);
        cr_assert_eq(ampc_graph_status(g), AMPC_E_INVALID_ARG);
        cr_assert(strstr(ampc_graph_errors(g), "input 1 is required but absent"), "%s: %s", ops[k],
                  ampc_graph_errors(g));
    }
    ampc_graph_destroy(g);
}
