/*
 * test_dsl.c — the C DSL's failure model: every misuse gives a diagnostic naming what was wrong,
 * poison propagates without new messages, nothing aborts; and the happy path builds what it says.
 */
#include "support.h"

#include <string.h>

Test(dsl, builds_and_reports_types) {
    ampc_graph *g = ampc_graph_create("m");
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F16, 2, (int64_t[]){4, 8});
    ampc_value *y = ampc_relu(g, x);
    cr_assert_eq(ampc_value_dtype(y), AMPC_DTYPE_F16);
    ampc_shape s = ampc_value_shape(y);
    ampc_shape want = SHAPE(4, 8);
    cr_assert(ampc_shape_eq(&s, &want));
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    cr_assert_str_eq(ampc_value_name(y), "y");
    cr_assert_eq(ampc_graph_node_count(g), 1);
    cr_assert_eq(ampc_graph_input(g, 0), x);
    cr_assert_eq(ampc_graph_output(g, 0), y);
    cr_assert_null(ampc_graph_output(g, 1));
    cr_assert_eq(ampc_graph_status(g), AMPC_OK);
    cr_assert_str_eq(ampc_graph_errors(g), "");
    ampc_graph_destroy(g);
}

Test(dsl, duplicate_input_name) {
    ampc_graph *g = ampc_graph_create("m");
    ampc_input(g, "x", AMPC_DTYPE_F32, 1, (int64_t[]){2});
    ampc_value *x2 = ampc_input(g, "x", AMPC_DTYPE_F32, 1, (int64_t[]){2});
    cr_assert(ampc_value_is_poisoned(x2));
    t_expect_diag(g, "graph input 'x': the name is already used");
    ampc_graph_destroy(g);
}

Test(dsl, overflowing_dims_are_rejected) {
    ampc_graph *g = ampc_graph_create("m");
    ampc_value *x = ampc_input(g, "big", AMPC_DTYPE_F32, 3, (int64_t[]){1ll << 31, 1ll << 31, 1ll << 4});
    cr_assert(ampc_value_is_poisoned(x));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_OVERFLOW);
    t_expect_diag(g, "shape [2147483648,2147483648,16] has more elements than a 64-bit size can count");
    ampc_graph_destroy(g);
}

Test(dsl, negative_dim_and_bad_rank) {
    ampc_graph *g = ampc_graph_create("m");
    cr_assert(ampc_value_is_poisoned(ampc_input(g, "a", AMPC_DTYPE_F32, 2, (int64_t[]){3, -1})));
    t_expect_diag(g, "dimension 1 of shape [3,-1] is negative");
    cr_assert(ampc_value_is_poisoned(ampc_input(g, "b", AMPC_DTYPE_F32, 9, (int64_t[9]){0})));
    t_expect_diag(g, "graph input 'b': rank 9 is invalid (0 to 8, dims not NULL)");
    ampc_graph_destroy(g);
}

Test(dsl, unknown_op_and_bad_attribute_kind) {
    ampc_graph *g = ampc_graph_create("m");
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 1, (int64_t[]){2});
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Frobnicate", &x, 1, NULL, 0)));
    t_expect_diag(g, "op 'Frobnicate' is not in ampc's op table");
    ampc_attr_arg to = AMPC_ATTR_F("to", 1.0f);
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Cast", &x, 1, &to, 1)));
    t_expect_diag(g, "node 0 (Cast 'Cast_0'): Cast needs an int attribute 'to' (the target dtype)");
    ampc_graph_destroy(g);
}

Test(dsl, wrong_arity_names_the_op) {
    ampc_graph *g = ampc_graph_create("m");
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 1, (int64_t[]){2});
    ampc_value *in[3] = {x, x, x};
    cr_assert(ampc_value_is_poisoned(ampc_op(g, "Add", in, 3, NULL, 0)));
    t_expect_diag(g, "node 0 (Add 'Add_0'): Add takes 2 to 2 inputs, got 3");
    ampc_graph_destroy(g);
}

Test(dsl, null_constant_data_and_output_rename_clash) {
    ampc_graph *g = ampc_graph_create("m");
    cr_assert(ampc_value_is_poisoned(ampc_constant(g, "w", AMPC_DTYPE_F32, 1, (int64_t[]){3}, NULL)));
    t_expect_diag(g, "constant 'w': data is NULL");
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 1, (int64_t[]){2});
    ampc_value *y = ampc_relu(g, x);
    cr_assert_eq(ampc_output(g, y, "x"), AMPC_E_INVALID_ARG);
    t_expect_diag(g, "cannot rename value 'Relu_0' to 'x': the name is taken");
    ampc_graph_destroy(g);
}

Test(dsl, eager_constant_evaluation_while_building) {
    ampc_graph *g = ampc_graph_create("m");
    ampc_value *a = ampc_scalar_f32(g, 2), *b = ampc_scalar_f32(g, 3);
    ampc_value *c = ampc_mul(g, a, b);
    cr_assert_not_null(c->data, "an all-constant node's output carries its value");
    cr_assert_float_eq(*(float *)c->data, 6.0f, 0);
    cr_assert_not_null(c->producer, "the node stays until the fold pass removes it");
    ampc_graph_destroy(g);
}

Test(dsl, null_graph_is_tolerated) {
    cr_assert_null(ampc_relu(NULL, NULL));
    cr_assert_eq(ampc_graph_status(NULL), AMPC_E_INVALID_ARG);
    ampc_graph_destroy(NULL);
}

/* Found by fuzz_onnx: an ONNX node carrying one attribute twice (transB = 1, transB = 1) built,
 * the second copy was ignored by every lookup, and the printed IR did not parse back. Every front
 * end now gets the builder's refusal. */
Test(dsl, an_attribute_given_twice_is_refused) {
    ampc_graph *g = ampc_graph_create("g");
    int64_t d[2] = {2, 2};
    ampc_value *a = ampc_input(g, "a", AMPC_DTYPE_F32, 2, d);
    ampc_value *in[2] = {a, a};
    ampc_attr_arg at[3] = {AMPC_ATTR_I("transB", 1), AMPC_ATTR_F("alpha", 2), AMPC_ATTR_I("transB", 0)};
    ampc_value *y = ampc_op(g, "Gemm", in, 2, at, 3);
    cr_assert(ampc_value_is_poisoned(y));
    cr_assert_eq(ampc_graph_status(g), AMPC_E_ATTR);
    cr_assert_str_eq(ampc_graph_errors(g), "node 0 (Gemm 'Gemm_0'): attribute 'transB' is given twice");
    ampc_graph_destroy(g);
}
