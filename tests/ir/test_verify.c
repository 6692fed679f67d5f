/*
 * test_verify.c — the IR verifier: valid graphs pass without a message; graphs broken by hand
 * (nodes appended without inference, pointers and flags edited) fail with AMPC_E_VERIFY and the
 * exact message for each invariant.
 */
#include "support.h"

#include <string.h>

/* Verifies g, expecting failure, and that the diagnostics contain `msg`. */
static void expect_invalid(ampc_graph *g, const char *msg) {
    cr_assert_eq(ampc_graph_verify(g), AMPC_E_VERIFY, "the verifier accepted a broken graph");
    cr_assert_eq(ampc_graph_status(g), AMPC_E_VERIFY);
    t_expect_diag(g, msg);
}

static ampc_shape s2 = {1, {2}};

/* A value with no producer, no data, not an input: only hand-made graphs have these. */
static ampc_value *orphan(ampc_graph *g, const char *name) {
    return ampc_ir_value_new(g, name, AMPC_DTYPE_F32, &s2);
}

/* Appends a Relu node `name` reading `in` and writing `out` (no inference). */
static ampc_node *relu(ampc_graph *g, const char *name, ampc_value *in, ampc_value *out) {
    return ampc_ir_node_append(g, AMPC_OP_RELU, name, &in, 1, NULL, 0, &out, 1);
}

Test(verify, valid_graphs_pass_without_messages) {
    ampc_graph *g = ampc_graph_create("ok");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    double c[3] = {1, 2, 3};
    ampc_value *dr[2];
    ampc_op_multi(g, "Dropout", &x, 1, NULL, 0, dr, 2);
    ampc_value *y = ampc_add(g, dr[0], t_const_f32(g, SHAPE(3), c));
    ampc_output(g, y, "y");
    ampc_output(g, x, NULL); /* an input can be an output */
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_str_eq(ampc_graph_errors(g), "");
    /* Removed nodes are skipped: their outputs are no longer produced by anything. */
    ampc_node *dead = relu(g, "unused", x, orphan(g, "u"));
    ampc_ir_node_remove(g, dead);
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_verify(NULL), AMPC_E_INVALID_ARG);
    ampc_graph_destroy(g);
}

Test(verify, use_before_definition) {
    ampc_graph *g = ampc_graph_create("order");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *v = orphan(g, "v"), *w = orphan(g, "w");
    relu(g, "first", v, w);  /* reads v ... */
    relu(g, "second", x, v); /* ... which only this later node produces */
    ampc_ir_graph_add_output(g, w);
    expect_invalid(g, "node 0 (Relu 'first'): input 0 'v' is used before it is defined (its "
                      "producer is node 1, later in the order)");
    ampc_graph_destroy(g);
}

Test(verify, inputs_that_nothing_defines) {
    ampc_graph *g = ampc_graph_create("undef");
    ampc_value *u = orphan(g, "u"), *w = orphan(g, "w");
    relu(g, "r", u, w);
    ampc_ir_graph_add_output(g, w);
    ampc_ir_graph_add_output(g, orphan(g, "o"));
    expect_invalid(g, "node 0 (Relu 'r'): input 0 'u' is not defined: it is not a graph input, a "
                      "constant with data or the output of an earlier node");
    t_expect_diag(g, "graph output 1 'o' is not defined: it is not a graph input, a constant with "
                     "data or the output of a node");
    cr_assert_eq(g->diag.n, 2);
    ampc_graph_destroy(g);
}

Test(verify, a_constant_without_data_is_not_defined) {
    ampc_graph *g = ampc_graph_create("nodata");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    double c[2] = {1, 2};
    ampc_value *k = t_const_f32(g, SHAPE(2), c);
    ampc_output(g, ampc_add(g, x, k), "y");
    k->data = NULL;
    expect_invalid(g, "node 0 (Add 'Add_0'): input 1 'c' is not defined: it is not a graph input, "
                      "a constant with data or the output of an earlier node");
    ampc_graph_destroy(g);
}

Test(verify, values_of_another_graph) {
    ampc_graph *g = ampc_graph_create("a"), *other = ampc_graph_create("b");
    ampc_value *x = t_input(other, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = orphan(g, "y");
    relu(g, "r", x, y);
    ampc_ir_graph_add_output(g, y);
    expect_invalid(g, "node 0 (Relu 'r'): input 0 'x' is not a value of this graph");
    ampc_graph_destroy(g);
    ampc_graph_destroy(other);
}

Test(verify, two_producers_and_disagreeing_producer_pointers) {
    ampc_graph *g = ampc_graph_create("prod");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *v = orphan(g, "v");
    relu(g, "a", x, v);
    relu(g, "b", x, v); /* append points v->producer at b */
    ampc_ir_graph_add_output(g, v);
    expect_invalid(g, "node 0 (Relu 'a'): output 0 'v' names node 1 as its producer");
    t_expect_diag(g, "node 1 (Relu 'b'): output 0 'v' is also produced by node 0 (a value has one "
                     "producer)");
    ampc_graph_destroy(g);
}

Test(verify, output_without_producer_pointer_and_producer_not_listing_it) {
    ampc_graph *g = ampc_graph_create("ptr");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = ampc_relu(g, x), *z = ampc_relu(g, x);
    ampc_output(g, y, "y");
    ampc_output(g, z, "z");
    y->producer = NULL;
    z->producer = g->nodes[0]; /* node 0 does not list z */
    expect_invalid(g, "node 0 (Relu 'Relu_0'): output 0 'y' has no producer set");
    t_expect_diag(g, "value 2 'z' names node 0 as its producer, but that node does not list it as "
                     "an output");
    t_expect_diag(g, "node 1 (Relu 'Relu_1'): output 0 'z' names node 0 as its producer");
    ampc_graph_destroy(g);
}

Test(verify, producer_removed_without_clearing) {
    ampc_graph *g = ampc_graph_create("dead");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = ampc_relu(g, x);
    ampc_output(g, ampc_relu(g, y), "z");
    g->nodes[0]->dead = true; /* ampc_ir_node_remove would have cleared y->producer */
    expect_invalid(g, "value 1 'Relu_0' names removed node 0 as its producer");
    t_expect_diag(g, "node 1 (Relu 'Relu_1'): input 0 'Relu_0' is not defined");
    ampc_graph_destroy(g);
}

Test(verify, names_must_be_unique_and_in_the_name_map) {
    ampc_graph *g = ampc_graph_create("names");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = ampc_relu(g, x);
    ampc_output(g, y, "y");
    y->name = x->name;
    expect_invalid(g, "value 1 'x': value 0 has the same name (names must be unique)");
    ampc_graph_destroy(g);

    g = ampc_graph_create("map");
    x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_output(g, ampc_relu(g, x), "y");
    ampc_strmap_del(&g->names, "x");
    expect_invalid(g, "value 0 'x' is missing from the name map");
    cr_assert_eq(g->diag.n, 1);
    ampc_graph_destroy(g);

    g = ampc_graph_create("stale");
    x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_output(g, ampc_relu(g, x), "y");
    ampc_strmap_put(&g->names, "ghost", x); /* a name no value carries */
    expect_invalid(g, "the name map holds 3 names for 2 values");
    ampc_graph_destroy(g);
}

Test(verify, ids_must_match_positions) {
    ampc_graph *g = ampc_graph_create("ids");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_output(g, ampc_relu(g, x), "y");
    g->nodes[0]->id = 4;
    expect_invalid(g, "node 4 (Relu 'Relu_0'): has id 4 but sits at index 0 of the node list");
    g->nodes[0]->id = 0;
    ampc_graph_clear_errors(g);
    g->values[1]->id = 7;
    expect_invalid(g, "value 'y' has id 7 but sits at index 1 of the value list");
    ampc_graph_destroy(g);
}

Test(verify, graph_input_and_output_lists_and_flags) {
    ampc_graph *g = ampc_graph_create("flags");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    double c[2] = {1, 2};
    ampc_value *k = t_const_f32(g, SHAPE(2), c);
    ampc_value *y = ampc_add(g, x, k);
    ampc_output(g, y, "y");
    k->flags |= AMPC_VALUE_INPUT | AMPC_VALUE_OUTPUT;
    y->flags &= ~(uint32_t)AMPC_VALUE_OUTPUT;
    x->flags &= ~(uint32_t)AMPC_VALUE_INPUT;
    expect_invalid(g, "value 1 'c' is flagged as a graph input but is not in the input list");
    t_expect_diag(g, "value 1 'c' is flagged as a graph output but is not in the output list");
    t_expect_diag(g, "graph output 0 'y' is not flagged as an output");
    t_expect_diag(g, "graph input 0 'x' is not flagged as an input");
    ampc_graph_destroy(g);

    g = ampc_graph_create("inputs");
    x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    y = ampc_relu(g, x);
    ampc_output(g, y, "y");
    ampc_ir_graph_add_input(g, x);
    ampc_ir_graph_add_input(g, y);
    expect_invalid(g, "graph input 1 'x' is listed twice");
    t_expect_diag(g, "graph input 2 'y' is produced by node 0");
    t_expect_diag(g, "node 0 (Relu 'Relu_0'): output 0 'y' is a graph input");
    ampc_graph_destroy(g);
}

Test(verify, poisoned_values_and_bad_types) {
    ampc_graph *g = ampc_graph_create("poison");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_output(g, ampc_relu(g, x), "y");
    ampc_ir_poison_new(g, "p");
    expect_invalid(g, "value 2 'p' is poisoned (its construction failed)");
    ampc_graph_destroy(g);

    g = ampc_graph_create("types");
    x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *a = t_input(g, "a", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *b = t_input(g, "b", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_F32, SHAPE(2, 2));
    x->shape.rank = 9;
    a->shape.dims[0] = -3;
    b->dtype = AMPC_DTYPE_UNDEFINED;
    c->shape.dims[0] = c->shape.dims[1] = INT64_MAX / 2;
    expect_invalid(g, "value 0 'x' has rank 9 (ampc supports 0 to 8)");
    t_expect_diag(g, "value 1 'a' has a negative dimension 0 (-3)");
    t_expect_diag(g, "value 2 'b' has no valid dtype (0)");
    t_expect_diag(g, "value 3 'c' has more elements than a 64-bit size can count");
    cr_assert_eq(g->diag.n, 4);
    ampc_graph_destroy(g);
}

Test(verify, arity_within_the_op_table_bounds) {
    ampc_graph *g = ampc_graph_create("arity");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *in2[2] = {x, x}, *a = orphan(g, "a"), *b = orphan(g, "b"), *c = orphan(g, "c");
    ampc_value *outs2[2] = {b, c};
    ampc_ir_node_append(g, AMPC_OP_RELU, "r", in2, 2, NULL, 0, &a, 1);
    ampc_ir_node_append(g, AMPC_OP_RELU, "r2", &x, 1, NULL, 0, outs2, 2);
    ampc_value *half[2] = {x, NULL}, *d = orphan(g, "d");
    ampc_ir_node_append(g, AMPC_OP_ADD, "add", half, 2, NULL, 0, &d, 1);
    ampc_value *e = orphan(g, "e");
    ampc_ir_node_append(g, AMPC_OP_MAX, "max", NULL, 0, NULL, 0, &e, 1);
    expect_invalid(g, "node 0 (Relu 'r'): Relu takes 1 to 1 inputs, got 2");
    t_expect_diag(g, "node 1 (Relu 'r2'): Relu has 1 to 1 outputs, got 2");
    t_expect_diag(g, "node 2 (Add 'add'): input 1 is required but absent");
    t_expect_diag(g, "node 3 (Max 'max'): Max takes at least 1 inputs, got 0");
    cr_assert_eq(g->diag.n, 4);
    ampc_graph_destroy(g);
}

Test(verify, malformed_attributes) {
    ampc_graph *g = ampc_graph_create("attrs");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = orphan(g, "y");
    ampc_value tensor = {.id = -1, .name = "t", .dtype = AMPC_DTYPE_F32, .shape = {1, {2}}};
    ampc_attr at[3] = {
        {.name = "t", .kind = AMPC_ATTR_TENSOR, .tensor = &tensor},
        {.name = "is", .kind = AMPC_ATTR_INTS, .n = 3, .ints = NULL},
        {.name = "k", .kind = (ampc_attr_kind)42},
    };
    ampc_node *n = ampc_ir_node_append(g, AMPC_OP_RELU, "r", &x, 1, at, 1, &y, 1);
    n->attrs = at; /* the builder copies; put the broken forms back */
    n->n_attrs = 3;
    ampc_ir_graph_add_output(g, y);
    expect_invalid(g, "node 0 (Relu 'r'): attribute 't' is a tensor without data");
    t_expect_diag(g, "node 0 (Relu 'r'): attribute 'is' (ints) has 3 entries but no array");
    t_expect_diag(g, "node 0 (Relu 'r'): attribute 'k' has an invalid kind 42");
    n->n_attrs = 0;
    ampc_graph_destroy(g);
}

Test(verify, invalid_subgraphs_are_reported_by_the_parent) {
    const char *text = "graph \"outer\" {\n"
                       "  input %x : f32[2]\n"
                       "  %y : f32[2] = Relu(%x) {body = graph \"inner\" {\n"
                       "    input %a : f32[]\n"
                       "    %b : f32[] = Relu(%a) @\"m\"\n"
                       "    output %b\n"
                       "  }} @\"r\"\n"
                       "  output %y\n"
                       "}\n";
    ampc_graph *g = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &g, &err), AMPC_OK, "%s", err);
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph *sub = g->subgraphs[0];
    sub->nodes[0]->inputs[0] = NULL;
    expect_invalid(g, "node 0 (Relu 'r'): attribute 'body': subgraph 'inner' is invalid: node 0 "
                      "(Relu 'm'): input 0 is required but absent");
    cr_assert_eq(sub->diag.n, 0); /* reported once, by the parent */
    ampc_graph_destroy(g);
}
