/*
 * test_control_import.c — importing If, Loop and Scan from crafted ONNX models (onnx_builder.h):
 * subgraph attributes become subgraphs with explicit captures (docs/ir-control-flow.md), body
 * input shapes come from the node's inputs when the model leaves them unset, nested bodies
 * capture from two levels up, names shadow, constants are copied into bodies, Scan-8 is
 * rewritten per batch entry, and each bad form gets its exact message, coverage listing
 * unsupported ops inside bodies with their path. Values are computed by hand.
 */
#include "onnx_builder.h"

#include "ir/subgraph.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static Onnx__GraphProto *mk_graph(mb *b, const char *name) {
    Onnx__GraphProto *g = mb_alloc(b, sizeof *g);
    onnx__graph_proto__init(g);
    g->name = mb_str(b, name);
    return g;
}

/* A body input: typed (elem, dims as in mb_value_info), or with no type at all when elem is 0. */
static void g_input(mb *b, Onnx__GraphProto *g, const char *name, int32_t elem, const char *dims) {
    Onnx__ValueInfoProto *v;
    if (elem) {
        v = mb_value_info(b, name, elem, dims);
    } else {
        v = mb_alloc(b, sizeof *v);
        onnx__value_info_proto__init(v);
        v->name = mb_str(b, name);
    }
    MB_PUSH(b, g->input, g->n_input, v);
}

static void g_output(mb *b, Onnx__GraphProto *g, const char *name) {
    Onnx__ValueInfoProto *v = mb_alloc(b, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = mb_str(b, name);
    MB_PUSH(b, g->output, g->n_output, v);
}

static Onnx__NodeProto *g_node(mb *b, Onnx__GraphProto *g, const char *op, const char *name,
                               const char *ins, const char *outs) {
    Onnx__NodeProto *n = mb_make_node(b, op, name, ins, outs);
    MB_PUSH(b, g->node, g->n_node, n);
    return n;
}

static void attr_graph(mb *b, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *g) {
    mb_attr(b, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = g;
}

/* A Constant node in graph g (NULL: the main graph) making an i64 scalar. */
static void const_i64(mb *b, Onnx__GraphProto *g, const char *out, int64_t v) {
    Onnx__NodeProto *n =
        g ? g_node(b, g, "Constant", NULL, "", out) : mb_node(b, "Constant", NULL, "", out);
    mb_attr_i(b, n, "value_int", v);
}

static ampc_graph *import_ok(mb *b, const ampc_import_options *o) {
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = mb_import(b, NULL, o, &g, &err);
    cr_assert_eq(st, AMPC_OK, "import failed (%s):\n%s", ampc_status_str(st), err ? err : "");
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static void import_fails(mb *b, const ampc_import_options *o, ampc_status want,
                         const char *needle) {
    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    ampc_status st = mb_import(b, NULL, o, &g, &err);
    cr_assert_null(g);
    cr_assert(err && strstr(err, needle), "expected a message containing\n  %s\ngot (%s)\n  %s",
              needle, ampc_status_str(st), err ? err : "(none)");
    cr_assert_eq(st, want, "status: got %s, expected %s", ampc_status_str(st),
                 ampc_status_str(want));
    free(err);
}

/* The only node of op `op` in g. */
static ampc_node *find_op(ampc_graph *g, ampc_opcode op) {
    ampc_node *found = NULL;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == op) {
            cr_assert_null(found, "two %s nodes", ampc_op_get(op)->onnx);
            found = g->nodes[i];
        }
    cr_assert_not_null(found, "no %s node", ampc_op_get(op)->onnx);
    return found;
}

static ampc_graph *body_of(ampc_node *n, const char *attr) {
    const ampc_attr *a = ampc_ir_attr_find(n, attr);
    cr_assert(a && a->kind == AMPC_ATTR_GRAPH, "no graph attribute '%s'", attr);
    return a->graph;
}

/* ---- Loop ----------------------------------------------------------------------------------- */

/* Loop(M=3, "", s0) with a body that leaves every dim unset and adds the outer x each step. */
static void loop_model(mb *b) {
    mb_init(b, 8, 13);
    mb_input(b, "x", OT_FLOAT, "3");
    mb_input(b, "s0", OT_FLOAT, "3");
    const_i64(b, NULL, "M", 3);
    Onnx__GraphProto *body = mk_graph(b, "body");
    g_input(b, body, "iter", OT_INT64, NULL);
    g_input(b, body, "cond", OT_BOOL, NULL);
    g_input(b, body, "s", OT_FLOAT, "?");
    g_node(b, body, "Identity", NULL, "cond", "cond_out");
    g_node(b, body, "Add", "add", "s,x", "s_out");
    g_node(b, body, "Identity", NULL, "s_out", "row");
    g_output(b, body, "cond_out");
    g_output(b, body, "s_out");
    g_output(b, body, "row");
    Onnx__NodeProto *n = mb_node(b, "Loop", "loop", "M,,s0", "s_final,rows");
    attr_graph(b, n, "body", body);
    mb_output(b, "s_final", OT_FLOAT, NULL);
    mb_output(b, "rows", OT_FLOAT, NULL);
}

Test(onnx_control, loop_body_shapes_come_from_the_node_and_outer_values_are_captured) {
    mb b;
    loop_model(&b);
    ampc_graph *g = import_ok(&b, NULL);
    ampc_node *loop = find_op(g, AMPC_OP_LOOP);
    cr_assert_eq(loop->n_inputs, 4); /* M, (absent) cond, s0, then the capture x */
    cr_assert_null(loop->inputs[1]);
    cr_assert_str_eq(loop->inputs[3]->name, "x");
    cr_assert_eq(ampc_ir_node_captures(loop), 1);
    ampc_graph *body = body_of(loop, "body");
    cr_assert_eq(body->n_inputs, 4);
    cr_assert(ampc_shape_eq(&body->inputs[2]->shape, &(ampc_shape){1, {3}})); /* "?" filled */
    cr_assert_eq(body->inputs[0]->shape.rank, 0);
    cr_assert_str_eq(body->inputs[3]->name, "x");
    float x[3] = {1, 2, 3}, s0[3] = {0, 0, 1};
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(3), x),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(3), s0)},
                out[2];
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double fin[3] = {3, 6, 10}, rows[9] = {1, 2, 4, 2, 4, 7, 3, 6, 10};
    t_expect_close(&out[0], SHAPE(3), fin, 0, 0);
    t_expect_close(&out[1], SHAPE(3, 3), rows, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_control, loop_trip_count_from_an_input_binds_it_when_constants_are_needed) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "n", OT_INT64, "");
    mb_input(&b, "s0", OT_FLOAT, "");
    Onnx__GraphProto *body = mk_graph(&b, "body");
    g_input(&b, body, "i", OT_INT64, "");
    g_input(&b, body, "c", OT_BOOL, "");
    g_input(&b, body, "s", OT_FLOAT, "");
    g_node(&b, body, "Cast", "cast", "i", "fi");
    mb_attr_i(&b, body->node[0], "to", OT_FLOAT);
    g_node(&b, body, "Add", NULL, "s,fi", "s2");
    g_output(&b, body, "c"); /* the condition input itself, unchanged */
    g_output(&b, body, "s2");
    g_output(&b, body, "s2");
    mb_node(&b, "Add", NULL, "n,n", "m"); /* M is computed from the input */
    attr_graph(&b, mb_node(&b, "Loop", "loop", "m,,s0", "s,all"), "body", body);
    mb_output(&b, "s", OT_FLOAT, NULL);
    mb_output(&b, "all", OT_FLOAT, NULL);
    import_fails(
        &b, NULL, AMPC_E_UNSUPPORTED,
        "node 1 'loop' (Loop): Loop has 1 scan output, stacked along a new first dim whose "
        "size is the number of iterations, and ampc compiles static shapes: it needs that "
        "number at compile time, but the trip count M (input 0 'm') is computed at run "
        "time");
    int64_t nv = 2;
    float sv = 0.5f;
    ampc_input_binding binds[2] = {{"n", {AMPC_DTYPE_I64, {0}, &nv}},
                                   {"s0", {AMPC_DTYPE_F32, {0}, &sv}}};
    ampc_import_options o = {.constants = binds, .n_constants = 2, .constants_if_needed = true};
    ampc_graph *g = import_ok(&b, &o);
    cr_assert_eq(ampc_graph_input_count(g), 1); /* n was bound (it sets M), s0 stays an input */
    cr_assert_str_eq(ampc_graph_input(g, 0)->name, "s0");
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(), &sv), out[2];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double fin = 6.5, all[4] = {0.5, 1.5, 3.5, 6.5}; /* + 0, 1, 2, 3 */
    t_expect_close(&out[0], SHAPE(), &fin, 0, 0);
    t_expect_close(&out[1], SHAPE(4), all, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* ---- nesting, shadowing, constants ---------------------------------------------------------- */

/* t = Neg(w) and w2 = Identity(w) outside; Loop(M=2) body: If(flag) { t = Add(s, w2); out t }
 * else { Sub(s, w2) }. The then branch's own 't' shadows the outer one; w2 is used two levels
 * below where it lives (and, out of order, defined after the Loop: the sort must see that). */
static void nested_model(mb *b, bool out_of_order) {
    mb_init(b, 8, 13);
    mb_input(b, "w", OT_FLOAT, "2");
    mb_input(b, "flag", OT_BOOL, "");
    mb_input(b, "s0", OT_FLOAT, "2");
    Onnx__GraphProto *th = mk_graph(b, "then"), *el = mk_graph(b, "else"),
                     *body = mk_graph(b, "body");
    g_node(b, th, "Add", NULL, "s,w2", "t");
    g_output(b, th, "t");
    g_node(b, el, "Sub", NULL, "s,w2", "d");
    g_output(b, el, "d");
    g_input(b, body, "i", OT_INT64, "");
    g_input(b, body, "c", OT_BOOL, "");
    g_input(b, body, "s", OT_FLOAT, NULL);
    Onnx__NodeProto *ifn = g_node(b, body, "If", "choose", "flag", "s_next");
    attr_graph(b, ifn, "then_branch", th);
    attr_graph(b, ifn, "else_branch", el);
    g_output(b, body, "c");
    g_output(b, body, "s_next");
    mb_node(b, "Neg", "neg", "w", "t");
    if (!out_of_order) mb_node(b, "Identity", "idw", "w", "w2");
    const_i64(b, NULL, "M", 2);
    attr_graph(b, mb_node(b, "Loop", "loop", "M,,s0", "s"), "body", body);
    if (out_of_order) mb_node(b, "Identity", "idw", "w", "w2"); /* the Loop's body uses w2 */
    mb_output(b, "s", OT_FLOAT, NULL);
    mb_output(b, "t", OT_FLOAT, NULL);
}

static void run_nested(ampc_graph *g, uint8_t flag, const double *want_s) {
    float w[2] = {1, 2}, s0[2] = {10, 20};
    ampc_tensor in[3] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2), w),
                         t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &flag),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2), s0)},
                out[2];
    cr_assert_eq(ampc_graph_evaluate(g, in, 3, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double t[2] = {-1, -2};
    t_expect_close(&out[0], SHAPE(2), want_s, 0, 0);
    t_expect_close(&out[1], SHAPE(2), t, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
}

Test(onnx_control, nested_bodies_capture_from_two_levels_up_and_names_shadow) {
    for (int order = 0; order < 2; order++) {
        mb b;
        nested_model(&b, order == 1);
        ampc_graph *g = import_ok(&b, NULL);
        ampc_node *loop = find_op(g, AMPC_OP_LOOP);
        /* The Loop captures flag (the If's condition) and w2 (its branches'), in order of use. */
        cr_assert_eq(ampc_ir_node_captures(loop), 2);
        cr_assert_str_eq(loop->inputs[3]->name, "flag");
        cr_assert_str_eq(loop->inputs[4]->name, "w2");
        ampc_graph *body = body_of(loop, "body");
        ampc_node *ifn = find_op(body, AMPC_OP_IF);
        cr_assert_eq(ampc_ir_node_captures(ifn), 2); /* s (the body's), w2 (captured again) */
        cr_assert_eq(ifn->inputs[1], body->inputs[2]);
        cr_assert_eq(ifn->inputs[2], body->inputs[4]);
        cr_assert_eq(body_of(ifn, "then_branch")->n_inputs, 2);
        cr_assert_eq(body_of(ifn, "else_branch")->n_inputs, 2);
        double plus[2] = {12, 24}, minus[2] = {8, 16};
        run_nested(g, 1, plus);
        run_nested(g, 0, minus);
        cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
        run_nested(g, 1, plus);
        ampc_graph_destroy(g);
        mb_free(&b);
    }
}

Test(onnx_control, if_branches_with_different_captures_take_their_union) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "c", OT_BOOL, "");
    mb_input(&b, "a", OT_FLOAT, "2");
    mb_input(&b, "b", OT_FLOAT, "2");
    Onnx__GraphProto *th = mk_graph(&b, "then"), *el = mk_graph(&b, "else");
    g_node(&b, th, "Relu", NULL, "a", "ra");
    g_output(&b, th, "ra");
    g_node(&b, el, "Neg", NULL, "b", "nb");
    g_output(&b, el, "nb");
    Onnx__NodeProto *n = mb_node(&b, "If", "if", "c", "y");
    attr_graph(&b, n, "then_branch", th);
    attr_graph(&b, n, "else_branch", el);
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b, NULL);
    ampc_node *ifn = find_op(g, AMPC_OP_IF);
    cr_assert_eq(ifn->n_inputs, 3);
    cr_assert_str_eq(ifn->inputs[1]->name, "a");
    cr_assert_str_eq(ifn->inputs[2]->name, "b");
    for (int i = 0; i < 2; i++) {
        ampc_graph *br = body_of(ifn, i ? "else_branch" : "then_branch");
        cr_assert_eq(br->n_inputs, 2, "every branch takes every capture");
        cr_assert_eq(br->inputs[0]->shape.dims[0], 2);
    }
    float av[2] = {-1, 3}, bv[2] = {5, -6};
    for (uint8_t cv = 0; cv < 2; cv++) {
        ampc_tensor in[3] = {t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &cv),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(2), av),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(2), bv)},
                    out;
        cr_assert_eq(ampc_graph_evaluate(g, in, 3, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
        double then_v[2] = {0, 3}, else_v[2] = {-5, 6};
        t_expect_close(&out, SHAPE(2), cv ? then_v : else_v, 0, 0);
        ampc_tensor_free(&out);
    }
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_control, outer_constants_are_copied_so_compile_time_positions_stay_known) {
    /* The Scan body reshapes each [4] row to [2,2] with a shape that is an initializer of the
     * main graph: copied into the body, it stays a constant there. */
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "3,4");
    int64_t dims[1] = {2}, shape[2] = {2, 2};
    mb_initializer(&b, mb_tensor_raw(&b, "shape", OT_INT64, 1, dims, shape, sizeof shape));
    Onnx__GraphProto *body = mk_graph(&b, "body");
    g_input(&b, body, "row", OT_FLOAT, NULL);
    g_node(&b, body, "Reshape", NULL, "row,shape", "sq");
    g_output(&b, body, "sq");
    Onnx__NodeProto *n = mb_node(&b, "Scan", "scan", "x", "y");
    mb_attr_i(&b, n, "num_scan_inputs", 1);
    attr_graph(&b, n, "body", body);
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b, NULL);
    ampc_node *scan = find_op(g, AMPC_OP_SCAN);
    cr_assert_eq(ampc_ir_node_captures(scan), 0);
    cr_assert_null(ampc_ir_attr_find(scan, AMPC_ATTR_NUM_CAPTURES));
    cr_assert(ampc_shape_eq(&scan->outputs[0]->shape, &(ampc_shape){3, {3, 2, 2}}));
    float xv[12];
    for (int i = 0; i < 12; i++) xv[i] = (float)i;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3, 4), xv), out;
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    double want[12];
    for (int i = 0; i < 12; i++) want[i] = i;
    t_expect_close(&out, SHAPE(3, 2, 2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* ---- Scan-8 --------------------------------------------------------------------------------- */

Test(onnx_control, scan8_runs_one_scan_per_batch_entry) {
    mb b;
    mb_init(&b, 8, 8);
    mb_input(&b, "init", OT_FLOAT, "2,1");
    mb_input(&b, "x", OT_FLOAT, "2,3,1");
    Onnx__GraphProto *body = mk_graph(&b, "body");
    g_input(&b, body, "s", OT_FLOAT, "1");
    g_input(&b, body, "e", OT_FLOAT, "1");
    g_node(&b, body, "Add", NULL, "s,e", "s2");
    g_node(&b, body, "Identity", NULL, "s2", "o");
    g_output(&b, body, "s2");
    g_output(&b, body, "o");
    Onnx__NodeProto *n = mb_node(&b, "Scan", "scan", ",init,x", "y,z");
    mb_attr_i(&b, n, "num_scan_inputs", 1);
    int64_t rev[1] = {1};
    mb_attr_ints(&b, n, "directions", 1, rev);
    attr_graph(&b, n, "body", body);
    mb_output(&b, "y", OT_FLOAT, NULL);
    mb_output(&b, "z", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b, NULL);
    int32_t scans = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) scans += g->nodes[i]->op == AMPC_OP_SCAN;
    cr_assert_eq(scans, 2);
    float iv[2] = {0, 100}, xv[6] = {1, 2, 3, 4, 5, 6};
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2, 1), iv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3, 1), xv)},
                out[2];
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    /* reverse: batch 0 sums 3, 2, 1; batch 1 sums 6, 5, 4 from 100 */
    double y[2] = {6, 115}, z[6] = {3, 5, 6, 106, 111, 115}; /* outputs in iteration order */
    t_expect_close(&out[0], SHAPE(2, 1), y, 0, 0);
    t_expect_close(&out[1], SHAPE(2, 3, 1), z, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);

    n->input[0] = mb_str(&b, "init"); /* sequence_lens given */
    import_fails(&b, NULL, AMPC_E_UNSUPPORTED,
                 "node 0 'scan' (Scan): Scan-8's sequence_lens (input 0) is not supported: only "
                 "full-length sequences are (leave the input empty)");
    mb_free(&b);
}

/* ---- bad forms ------------------------------------------------------------------------------ */

Test(onnx_control, coverage_lists_unsupported_ops_inside_bodies_with_their_path) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "2");
    mb_input(&b, "c", OT_BOOL, "");
    Onnx__GraphProto *body = mk_graph(&b, "body"), *th = mk_graph(&b, "then"),
                     *el = mk_graph(&b, "else");
    g_input(&b, body, "i", OT_INT64, "");
    g_input(&b, body, "cond", OT_BOOL, "");
    g_input(&b, body, "s", OT_FLOAT, "2");
    g_node(&b, body, "Relu", "fine", "s", "r");
    g_node(&b, body, "NotAnOp", "bad", "r", "q");
    g_node(&b, th, "AlsoNotAnOp", "worse", "q", "t");
    g_output(&b, th, "t");
    g_node(&b, el, "Identity", NULL, "q", "e");
    g_output(&b, el, "e");
    Onnx__NodeProto *ifn = g_node(&b, body, "If", "inner", "c", "s2");
    attr_graph(&b, ifn, "then_branch", th);
    attr_graph(&b, ifn, "else_branch", el);
    g_output(&b, body, "cond");
    g_output(&b, body, "s2");
    const_i64(&b, NULL, "M", 2);
    Onnx__NodeProto *loop = mb_node(&b, "Loop", "loop", "M,,x", "y");
    attr_graph(&b, loop, "body", body);
    mb_attr_i(&b, loop, "num_captures", 1);
    mb_node(&b, "Relu", "graph_attr", "y", "z");
    attr_graph(&b, b.graph.node[2], "body", el);
    mb_output(&b, "z", OT_FLOAT, NULL);
    import_fails(&b, NULL, AMPC_E_UNSUPPORTED,
                 "4 nodes are not supported:\n"
                 "  node 1 'loop' (Loop): attribute 'num_captures' is ampc's own (the importer "
                 "derives it from the subgraphs); a model may not set it\n"
                 "  node 1 'loop' (Loop) > body node 1 'bad' (NotAnOp): op not in ampc's op table\n"
                 "  node 1 'loop' (Loop) > body node 2 'inner' (If) > then_branch node 0 'worse' "
                 "(AlsoNotAnOp): op not in ampc's op table\n"
                 "  node 2 'graph_attr' (Relu): attribute 'body' is a graph, which ampc does not "
                 "take for Relu");
    mb_free(&b);
}

Test(onnx_control, bad_bodies_get_messages_that_name_the_node_and_the_attribute) {
    /* The body declares two inputs where the Loop feeds three. */
    mb b;
    loop_model(&b);
    Onnx__GraphProto *body = b.graph.node[1]->attribute[0]->g;
    body->n_input = 2;
    import_fails(&b, NULL, AMPC_E_INVALID_ARG,
                 "node 1 'loop' (Loop): attribute 'body': the subgraph has 2 inputs, expected 3 "
                 "(the iteration number, the condition and 1 loop-carried value)");
    body->n_input = 3;
    /* A declared element type the node does not feed. */
    body->input[2]->type->tensor_type->elem_type = OT_INT32;
    import_fails(
        &b, NULL, AMPC_E_DTYPE,
        "node 1 'loop' (Loop): attribute 'body': subgraph input 2 's' is declared i32, but "
        "the node feeds it f32 (the iteration number, the condition and 1 loop-carried "
        "value)");
    body->input[2]->type->tensor_type->elem_type = OT_FLOAT;
    /* An output nothing defines. */
    body->output[1]->name = mb_str(&b, "nowhere");
    import_fails(&b, NULL, AMPC_E_VERIFY,
                 "node 1 'loop' (Loop): attribute 'body': subgraph output 1 'nowhere' is not "
                 "defined, neither in the subgraph nor around it");
    body->output[1]->name = mb_str(&b, "s_out");
    /* A use before the body's own definition must not capture the outer value of that name:
     * the body's last node now defines its own 'x', after the Add that reads 'x'. */
    body->node[2]->output[0] = body->output[2]->name = mb_str(&b, "x");
    import_fails(&b, NULL, AMPC_E_VERIFY,
                 "node 1 'loop' (Loop) > body node 1 'add' (Add): input 1 'x' is not defined "
                 "before this node (neither in its subgraph nor around it)");
    body->node[2]->output[0] = body->output[2]->name = mb_str(&b, "row");
    ampc_graph *g = import_ok(&b, NULL); /* repaired */
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_control, sequence_typed_body_inputs_are_unsupported) {
    mb b;
    loop_model(&b);
    Onnx__GraphProto *body = b.graph.node[1]->attribute[0]->g;
    Onnx__TypeProto__Sequence *seq = mb_alloc(&b, sizeof *seq);
    onnx__type_proto__sequence__init(seq);
    body->input[2]->type->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
    body->input[2]->type->sequence_type = seq;
    import_fails(&b, NULL, AMPC_E_UNSUPPORTED,
                 "node 1 'loop' (Loop): attribute 'body': subgraph input 2 's' is not a tensor (a "
                 "sequence, map or optional); ampc imports tensors only");
    mb_free(&b);
}

/* ---- unrolling ------------------------------------------------------------------------------ */

/* Loop(M, "", acc0) over x [5]: acc += x[i:i+1], the slice's bounds computed from the iteration
 * number (which a Slice needs at compile time); the body's condition is `stop_at` > i + 1 when
 * stop_at > 0, else the condition input unchanged. */
static void slice_loop_model(mb *b, int64_t m, int64_t stop_at, bool m_is_input) {
    mb_init(b, 8, 13);
    mb_input(b, "x", OT_FLOAT, "5");
    mb_input(b, "acc0", OT_FLOAT, "1");
    if (m_is_input)
        mb_input(b, "M", OT_INT64, "");
    else
        const_i64(b, NULL, "M", m);
    Onnx__GraphProto *body = mk_graph(b, "body");
    g_input(b, body, "i", OT_INT64, "");
    g_input(b, body, "c", OT_BOOL, "");
    g_input(b, body, "acc", OT_FLOAT, "1");
    const_i64(b, body, "one", 1);
    int64_t zero[1] = {0}, d1[1] = {1};
    g_node(b, body, "Constant", NULL, "", "axes");
    mb_attr_t(b, body->node[1], "value", mb_tensor_raw(b, "axes", OT_INT64, 1, d1, zero, 8));
    g_node(b, body, "Add", NULL, "i,one", "i1");
    g_node(b, body, "Unsqueeze", NULL, "i,axes", "start");
    g_node(b, body, "Unsqueeze", NULL, "i1,axes", "end");
    g_node(b, body, "Slice", "slice", "x,start,end", "elem");
    g_node(b, body, "Add", NULL, "acc,elem", "acc2");
    g_node(b, body, "Identity", NULL, "acc2", "row");
    if (stop_at > 0) {
        const_i64(b, body, "limit", stop_at);
        g_node(b, body, "Less", NULL, "i1,limit", "c2");
    } else {
        g_node(b, body, "Identity", NULL, "c", "c2");
    }
    g_output(b, body, "c2");
    g_output(b, body, "acc2");
    g_output(b, body, "row");
    attr_graph(b, mb_node(b, "Loop", "loop", "M,,acc0", "acc,rows"), "body", body);
    mb_output(b, "acc", OT_FLOAT, NULL);
    mb_output(b, "rows", OT_FLOAT, NULL);
}

static void run_slice_loop(ampc_graph *g, const double *acc, const double *rows, int64_t T) {
    float x[5] = {1, 2, 3, 4, 5}, a0 = 10;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(5), x),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(1), &a0)},
                out[2];
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    t_expect_close(&out[0], SHAPE(1), acc, 0, 0);
    t_expect_close(&out[1], SHAPE(T, 1), rows, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
}

Test(onnx_control, a_loop_whose_body_needs_its_iteration_number_is_unrolled) {
    mb b;
    slice_loop_model(&b, 3, 0, false);
    ampc_graph *g = import_ok(&b, NULL);
    for (int32_t i = 0; i < g->n_nodes; i++) cr_assert_neq(g->nodes[i]->op, AMPC_OP_LOOP);
    cr_assert_eq(g->n_subgraphs, 0); /* the first try's body is gone */
    double acc = 16, rows[3] = {11, 13, 16};
    run_slice_loop(g, &acc, rows, 3);
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    run_slice_loop(g, &acc, rows, 3);
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_control, unrolling_stops_where_the_constant_condition_turns_false) {
    mb b;
    slice_loop_model(&b, 5, 2, false); /* runs while i + 1 < 2: two iterations of five */
    ampc_graph *g = import_ok(&b, NULL);
    double acc = 13, rows[2] = {11, 13};
    run_slice_loop(g, &acc, rows, 2);
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_control, a_loop_that_cannot_be_unrolled_keeps_the_loop_message) {
    mb b;
    slice_loop_model(&b, 0, 0, true); /* M is an input: neither a Loop nor unrolled */
    import_fails(
        &b, NULL, AMPC_E_UNSUPPORTED,
        "node 0 'loop' (Loop) > body node 5 'slice' (Slice): input 1 'start' must be known "
        "at compile time");
    mb_free(&b);
    slice_loop_model(&b, 1000, 0, false); /* too many trips to unroll */
    import_fails(
        &b, NULL, AMPC_E_UNSUPPORTED,
        "node 1 'loop' (Loop) > body node 5 'slice' (Slice): input 1 'start' must be known "
        "at compile time");
    mb_free(&b);
}

/* ---- If with a constant condition ----------------------------------------------------------- */

/* If(cond) over x [3]: then x + 1; else Add(x, y [2]), which does not build for these shapes. */
static void const_if_model(mb *b, bool cond_is_input) {
    mb_init(b, 8, 13);
    mb_input(b, "x", OT_FLOAT, "3");
    mb_input(b, "y", OT_FLOAT, "2");
    if (cond_is_input) {
        mb_input(b, "cond", OT_BOOL, "");
    } else { /* Size(x) == 3: known while importing */
        mb_node(b, "Size", NULL, "x", "n");
        const_i64(b, NULL, "three", 3);
        mb_node(b, "Equal", NULL, "n,three", "cond");
    }
    Onnx__GraphProto *th = mk_graph(b, "then"), *el = mk_graph(b, "else");
    const_i64(b, th, "one", 1);
    g_node(b, th, "Cast", NULL, "one", "onef");
    mb_attr_i(b, th->node[1], "to", OT_FLOAT);
    g_node(b, th, "Add", "inc", "x,onef", "r");
    g_output(b, th, "r");
    g_node(b, el, "Add", "bad", "x,y", "r");
    g_output(b, el, "r");
    Onnx__NodeProto *n = mb_node(b, "If", "pick", "cond", "out");
    attr_graph(b, n, "then_branch", th);
    attr_graph(b, n, "else_branch", el);
    mb_output(b, "out", OT_FLOAT, NULL);
}

Test(onnx_control, an_if_with_a_constant_condition_becomes_its_taken_branch) {
    mb b;
    const_if_model(&b, false);
    ampc_graph *g = import_ok(&b, NULL);
    for (int32_t i = 0; i < g->n_nodes; i++) cr_assert_neq(g->nodes[i]->op, AMPC_OP_IF);
    cr_assert_eq(g->n_subgraphs, 0);
    float x[3] = {1, 2, 3}, y[2] = {0, 0};
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(3), x),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2), y)},
                out;
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    double want[3] = {2, 3, 4};
    t_expect_close(&out, SHAPE(3), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
    /* With a condition known only at run time, both branches must build. */
    const_if_model(&b, true);
    import_fails(&b, NULL, AMPC_E_SHAPE,
                 "node 0 'pick' (If) > else_branch node 0 'bad' (Add): input shapes do not "
                 "broadcast");
    mb_free(&b);
}
