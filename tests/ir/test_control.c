/*
 * test_control.c — control flow with subgraphs (If, Loop, Scan) at the IR level: bodies built in
 * C with ampc_ir_subgraph_new, captures made explicit as the convention of ir/subgraph.c says
 * (extra node inputs, extra body inputs, attribute num_captures), values computed by hand, the
 * static-shape rules and their exact diagnostics, the verifier's capture checks, the passes, and
 * a print/parse round trip of a graph with a Loop.
 */
#include "support.h"

#include "ir/subgraph.h"
#include "passes/passes.h"

#include <string.h>

/* ---- helpers -------------------------------------------------------------------------------- */

/* Builds a control-flow node: bodies[i] under attribute bnames[i], num_captures = k (omitted when
 * 0), then `extra` attributes. Returns the status; *node receives the node. */
static ampc_status build_cf(ampc_graph *g, ampc_opcode op, const char *name, ampc_value *const *in,
                            int32_t n_in, const char *const *bnames, ampc_graph *const *bodies,
                            int32_t nb, int64_t k, const ampc_attr *extra, int32_t n_extra,
                            int32_t n_out, ampc_node **node) {
    ampc_attr at[16];
    int32_t na = 0;
    for (int32_t i = 0; i < nb; i++)
        at[na++] = (ampc_attr){.name = bnames[i], .kind = AMPC_ATTR_GRAPH, .graph = bodies[i]};
    if (k) at[na++] = (ampc_attr){.name = AMPC_ATTR_NUM_CAPTURES, .kind = AMPC_ATTR_INT, .i = k};
    for (int32_t i = 0; i < n_extra; i++) at[na++] = extra[i];
    return ampc_ir_node_build(g, op, name, in, n_in, at, na, n_out, NULL, node);
}

static ampc_value *body_in(ampc_graph *b, const char *name, ampc_dtype t, ampc_shape s) {
    return t_input(b, name, t, s);
}

static void body_out(ampc_graph *b, ampc_value *v) {
    cr_assert_eq(ampc_ir_graph_add_output(b, v), AMPC_OK);
    cr_assert_eq(ampc_graph_status(b), AMPC_OK, "body: %s", ampc_graph_errors(b));
}

static ampc_value *cast_to(ampc_graph *g, ampc_value *x, ampc_dtype t) {
    return ampc_cast(g, x, t);
}

static ampc_value *ampc_neg(ampc_graph *g, ampc_value *x) {
    return ampc_op(g, "Neg", &x, 1, NULL, 0);
}

/* ---- If ------------------------------------------------------------------------------------- */

/* If(c) { x * 2 } else { x + 10 }: both branches capture x. */
static ampc_graph *if_graph(ampc_node **node) {
    ampc_graph *g = ampc_graph_create("if");
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3));
    ampc_graph *th = ampc_ir_subgraph_new(g, "then"), *el = ampc_ir_subgraph_new(g, "else");
    ampc_value *xt = body_in(th, "xt", AMPC_DTYPE_F32, SHAPE(3));
    body_out(th, ampc_mul(th, xt, ampc_scalar_f32(th, 2)));
    ampc_value *xe = body_in(el, "xe", AMPC_DTYPE_F32, SHAPE(3));
    body_out(el, ampc_add(el, xe, ampc_scalar_f32(el, 10)));
    ampc_value *in[2] = {c, x};
    const char *names[2] = {"then_branch", "else_branch"};
    ampc_graph *bodies[2] = {th, el};
    cr_assert_eq(build_cf(g, AMPC_OP_IF, "if", in, 2, names, bodies, 2, 1, NULL, 0, 1, node),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_output(g, (*node)->outputs[0], "y");
    return g;
}

Test(control, if_runs_the_branch_the_condition_selects) {
    ampc_node *n;
    ampc_graph *g = if_graph(&n);
    cr_assert_eq(n->outputs[0]->dtype, AMPC_DTYPE_F32);
    cr_assert(ampc_shape_eq(&n->outputs[0]->shape, &(ampc_shape){1, {3}}));
    float xv[3] = {1, -2, 0.5f};
    for (int c = 0; c < 2; c++) {
        uint8_t cv = (uint8_t)c;
        ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &cv),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(3), xv)},
                    out;
        cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
        double want_then[3] = {2, -4, 1}, want_else[3] = {11, 8, 10.5};
        t_expect_close(&out, SHAPE(3), c ? want_then : want_else, 0, 0);
        ampc_tensor_free(&out);
    }
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
}

Test(control, if_branches_must_agree_unless_the_condition_is_constant) {
    /* then gives f32[2], else f32[3]: fine when the condition is a constant, not otherwise. */
    for (int constant = 0; constant < 2; constant++) {
        ampc_graph *g = ampc_graph_create("t");
        uint8_t f = 0;
        ampc_value *c = constant ? t_const(g, AMPC_DTYPE_BOOL, SHAPE(), &f)
                                 : t_input(g, "c", AMPC_DTYPE_BOOL, SHAPE());
        ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3));
        ampc_graph *th = ampc_ir_subgraph_new(g, "then"), *el = ampc_ir_subgraph_new(g, "else");
        body_in(th, "xt", AMPC_DTYPE_F32, SHAPE(3));
        double two[2] = {7, 8};
        body_out(th, t_const_f32(th, SHAPE(2), two));
        ampc_value *xe = body_in(el, "xe", AMPC_DTYPE_F32, SHAPE(3));
        body_out(el, ampc_neg(el, xe));
        ampc_value *in[2] = {c, x};
        const char *names[2] = {"then_branch", "else_branch"};
        ampc_graph *bodies[2] = {th, el};
        ampc_node *n;
        ampc_status st = build_cf(g, AMPC_OP_IF, "if", in, 2, names, bodies, 2, 1, NULL, 0, 1, &n);
        if (!constant) {
            cr_assert_eq(st, AMPC_E_UNSUPPORTED);
            t_expect_diag(g, "node 0 (If 'if'): output 0: then_branch gives f32[2] ('c'), "
                             "else_branch gives f32[3] ('Neg_0'); ampc compiles static shapes, so "
                             "both branches must give one shape unless the condition (input 0 "
                             "'c') is known at compile time");
        } else {
            cr_assert_eq(st, AMPC_OK, "%s", ampc_graph_errors(g));
            float xv[3] = {1, 2, 3};
            ampc_tensor xin = t_tensor(AMPC_DTYPE_F32, SHAPE(3), xv);
            ampc_tensor out = t_eval1(g, n->outputs[0], &xin, 1);
            double want[3] = {-1, -2, -3}; /* the else branch's shape and values */
            t_expect_close(&out, SHAPE(3), want, 0, 0);
            ampc_tensor_free(&out);
        }
        ampc_graph_destroy(g);
    }
}

Test(control, if_with_constant_inputs_folds_while_building) {
    ampc_graph *g = ampc_graph_create("t");
    uint8_t t = 1;
    ampc_value *c = t_const(g, AMPC_DTYPE_BOOL, SHAPE(), &t);
    double xv[2] = {3, 4};
    ampc_value *x = t_const_f32(g, SHAPE(2), xv);
    ampc_graph *th = ampc_ir_subgraph_new(g, "then"), *el = ampc_ir_subgraph_new(g, "else");
    ampc_value *xt = body_in(th, "xt", AMPC_DTYPE_F32, SHAPE(2));
    body_out(th, ampc_mul(th, xt, xt));
    ampc_value *xe = body_in(el, "xe", AMPC_DTYPE_F32, SHAPE(2));
    body_out(el, xe);
    ampc_value *in[2] = {c, x};
    const char *names[2] = {"then_branch", "else_branch"};
    ampc_graph *bodies[2] = {th, el};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_IF, "if", in, 2, names, bodies, 2, 1, NULL, 0, 1, &n), AMPC_OK,
                 "%s", ampc_graph_errors(g));
    cr_assert_not_null(n->outputs[0]->data); /* evaluated as it was built */
    cr_assert_eq(((float *)n->outputs[0]->data)[1], 16.0f);
    ampc_output(g, n->outputs[0], "y");
    bool changed;
    cr_assert_eq(ampc_pipeline_run_pass(g, "fold", &(ampc_pipeline_options){.verify = true}),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_node_count(g), 0); /* the If became a constant */
    cr_assert_eq(ampc_pass_fold(g, NULL, &changed), AMPC_OK);
    cr_assert_not(changed);
    ampc_graph_destroy(g);
}

Test(control, if_branch_dtypes_must_agree) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_BOOL, SHAPE());
    ampc_graph *th = ampc_ir_subgraph_new(g, "then"), *el = ampc_ir_subgraph_new(g, "else");
    double one = 1;
    int64_t two = 2;
    body_out(th, t_const_f32(th, SHAPE(), &one));
    body_out(el, t_const_i64(el, SHAPE(), &two));
    const char *names[2] = {"then_branch", "else_branch"};
    ampc_graph *bodies[2] = {th, el};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_IF, "if", &c, 1, names, bodies, 2, 0, NULL, 0, 1, &n),
                 AMPC_E_DTYPE);
    t_expect_diag(g, "node 0 (If 'if'): output 0: then_branch gives f32[] ('c'), else_branch "
                     "gives i64[] ('c'); both branches must give one dtype");
    ampc_graph_destroy(g);
}

Test(control, if_reports_a_branch_that_failed_to_build_and_bad_conditions) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_BOOL, SHAPE(2));
    ampc_graph *th = ampc_ir_subgraph_new(g, "then"), *el = ampc_ir_subgraph_new(g, "else");
    double a[2] = {1, 2}, b[3] = {1, 2, 3};
    ampc_value *bad = ampc_add(th, t_const_f32(th, SHAPE(2), a), t_const_f32(th, SHAPE(3), b));
    ampc_ir_graph_add_output(th, bad);
    body_out(el, t_const_f32(el, SHAPE(2), a));
    const char *names[2] = {"then_branch", "else_branch"};
    ampc_graph *bodies[2] = {th, el};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_IF, "if", &c, 1, names, bodies, 2, 0, NULL, 0, 1, &n),
                 AMPC_E_SHAPE);
    t_expect_diag(g, "node 0 (If 'if'): input 0 'c' (the condition) must hold one element, got "
                     "shape [2]");
    ampc_graph_clear_errors(g);
    ampc_value *c1 = t_input(g, "c1", AMPC_DTYPE_BOOL, SHAPE());
    cr_assert_eq(build_cf(g, AMPC_OP_IF, "if2", &c1, 1, names, bodies, 2, 0, NULL, 0, 1, &n),
                 AMPC_E_SHAPE);
    t_expect_diag(g, "node 1 (If 'if2'): attribute 'then_branch': subgraph 'then' failed to "
                     "build: node 0 (Add 'Add_0'): input shapes do not broadcast");
    ampc_graph_clear_errors(g);
    cr_assert_eq(
        build_cf(g, AMPC_OP_IF, "if3", &c1, 1, names + 1, bodies + 1, 1, 0, NULL, 0, 1, &n),
        AMPC_E_ATTR);
    t_expect_diag(g, "node 2 (If 'if3'): attribute 'then_branch' (a graph) is required");
    ampc_graph_destroy(g);
}

/* ---- Loop ----------------------------------------------------------------------------------- */

/* Loop M=m (a constant when m >= 0, else graph input "m"), cond absent, carried s (f32[2], from
 * input "s0"), captured x (f32[2]): s <- s + x * i; scan output s after each step. */
static ampc_graph *loop_graph(int64_t m, ampc_node **node, ampc_status *st) {
    ampc_graph *g = ampc_graph_create("loop");
    ampc_value *M = m >= 0 ? t_const_i64(g, SHAPE(), &m) : t_input(g, "m", AMPC_DTYPE_I64, SHAPE());
    ampc_value *s0 = t_input(g, "s0", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *i = body_in(b, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c = body_in(b, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *s = body_in(b, "s", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *xb = body_in(b, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *s1 = ampc_add(b, s, ampc_mul(b, xb, cast_to(b, i, AMPC_DTYPE_F32)));
    body_out(b, ampc_op(b, "Identity", &c, 1, NULL, 0));
    body_out(b, s1);
    body_out(b, ampc_op(b, "Identity", &s1, 1, NULL, 0));
    ampc_value *in[4] = {M, NULL, s0, x};
    const char *names[1] = {"body"};
    *st = build_cf(g, AMPC_OP_LOOP, "loop", in, 4, names, &b, 1, 1, NULL, 0, 2, node);
    return g;
}

Test(control, loop_carries_values_and_stacks_scan_outputs) {
    ampc_node *n;
    ampc_status st;
    ampc_graph *g = loop_graph(4, &n, &st);
    cr_assert_eq(st, AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert(ampc_shape_eq(&n->outputs[1]->shape, &(ampc_shape){2, {4, 2}}));
    ampc_output(g, n->outputs[0], "s");
    ampc_output(g, n->outputs[1], "rows");
    float s0[2] = {0, 0}, x[2] = {1, 2};
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2), s0),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2), x)},
                out[2];
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    /* i = 0..3: s = 0, 0+1x, +2x, +3x */
    double fin[2] = {6, 12}, rows[8] = {0, 0, 1, 2, 3, 6, 6, 12};
    t_expect_close(&out[0], SHAPE(2), fin, 0, 0);
    t_expect_close(&out[1], SHAPE(4, 2), rows, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_node_count(g), 1);
    ampc_graph_destroy(g);
}

Test(control, loop_scan_outputs_need_a_trip_count_known_at_compile_time) {
    ampc_node *n;
    ampc_status st;
    ampc_graph *g = loop_graph(-1, &n, &st);
    cr_assert_eq(st, AMPC_E_UNSUPPORTED);
    t_expect_diag(g, "node 0 (Loop 'loop'): Loop has 1 scan output, stacked along a new first dim "
                     "whose size is the number of iterations, and ampc compiles static shapes: it "
                     "needs that number at compile time, but the trip count M (input 0 'm') is "
                     "computed at run time (it is known when M is a constant and the condition is "
                     "absent or a constant true that the body returns unchanged)");
    ampc_graph_destroy(g);
}

Test(control, loop_with_zero_or_negative_trip_count_gives_empty_scan_outputs) {
    for (int64_t m = 0; m > -2; m--) {
        ampc_node *n;
        ampc_status st;
        ampc_graph *g = loop_graph(0, &n, &st);
        cr_assert_eq(st, AMPC_OK, "%s", ampc_graph_errors(g));
        if (m < 0) { /* M = -3 runs no iteration either */
            int64_t neg = -3;
            memcpy(n->inputs[0]->data, &neg, sizeof neg);
        }
        ampc_output(g, n->outputs[0], "s");
        ampc_output(g, n->outputs[1], "rows");
        float s0[2] = {5, 6}, x[2] = {1, 2};
        ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2), s0),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(2), x)},
                    out[2];
        cr_assert_eq(ampc_graph_evaluate(g, in, 2, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
        double fin[2] = {5, 6};
        t_expect_close(&out[0], SHAPE(2), fin, 0, 0);
        t_expect_close(&out[1], SHAPE(0, 2), NULL, 0, 0);
        ampc_tensor_free(&out[0]);
        ampc_tensor_free(&out[1]);
        ampc_graph_destroy(g);
    }
}

/* A while loop: counter c (i64) carried, cond_out = c + 1 < limit (a captured input); M given
 * as a constant when m >= 0, absent otherwise; the initial condition is input "go". */
static ampc_graph *while_graph(int64_t m, ampc_node **node) {
    ampc_graph *g = ampc_graph_create("while");
    ampc_value *M = m >= 0 ? t_const_i64(g, SHAPE(), &m) : NULL;
    ampc_value *go = t_input(g, "go", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *limit = t_input(g, "limit", AMPC_DTYPE_I64, SHAPE());
    int64_t zero = 0, one = 1;
    ampc_value *c0 = t_const_i64(g, SHAPE(), &zero);
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    body_in(b, "i", AMPC_DTYPE_I64, SHAPE());
    body_in(b, "cond", AMPC_DTYPE_BOOL, SHAPE(1)); /* [1] is as good as a scalar */
    ampc_value *c = body_in(b, "c", AMPC_DTYPE_I64, SHAPE());
    ampc_value *lim = body_in(b, "limit", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c1 = ampc_add(b, c, t_const_i64(b, SHAPE(), &one));
    body_out(b, ampc_op(b, "Less", (ampc_value *[]){c1, lim}, 2, NULL, 0));
    body_out(b, c1);
    ampc_value *in[4] = {M, go, c0, limit};
    const char *names[1] = {"body"};
    cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "loop", in, 4, names, &b, 1, 1, NULL, 0, 1, node),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_output(g, (*node)->outputs[0], "count");
    return g;
}

static int64_t run_while(ampc_graph *g, uint8_t go, int64_t limit) {
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &go),
                         t_tensor(AMPC_DTYPE_I64, SHAPE(), &limit)},
                out;
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t v = *(int64_t *)out.data;
    ampc_tensor_free(&out);
    return v;
}

Test(control, loop_without_scan_outputs_may_stop_at_run_time) {
    ampc_node *n;
    ampc_graph *g = while_graph(-1, &n);
    cr_assert_eq(run_while(g, 1, 5), 5);  /* runs while c + 1 < 5, and once more */
    cr_assert_eq(run_while(g, 0, 5), 0);  /* initial condition false: no iteration */
    cr_assert_eq(run_while(g, 1, -7), 1); /* the body runs once before the condition is read */
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    g = while_graph(3, &n);
    cr_assert_eq(run_while(g, 1, 100), 3); /* M bounds it */
    ampc_graph_destroy(g);
}

Test(control, loop_carried_values_keep_their_shape_and_loops_must_end) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t m = 2;
    ampc_value *M = t_const_i64(g, SHAPE(), &m);
    ampc_value *s0 = t_input(g, "s0", AMPC_DTYPE_F32, SHAPE(2));
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    body_in(b, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c = body_in(b, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *s = body_in(b, "s", AMPC_DTYPE_F32, SHAPE(2));
    body_out(b, c);
    body_out(b, ampc_concat(b, (ampc_value *[]){s, s}, 2, 0)); /* grows every iteration */
    ampc_value *in[3] = {M, NULL, s0};
    const char *names[1] = {"body"};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "grow", in, 3, names, &b, 1, 0, NULL, 0, 1, &n),
                 AMPC_E_UNSUPPORTED);
    t_expect_diag(g, "node 0 (Loop 'grow'): loop-carried value 0 enters the body as f32[2] (input "
                     "2 's') but the body returns f32[4] (output 1 'Concat_0'); ampc compiles "
                     "static shapes, so it must keep its shape from one iteration to the next");
    ampc_graph_clear_errors(g);

    ampc_graph *b2 = ampc_ir_subgraph_new(g, "forever");
    body_in(b2, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c2 = body_in(b2, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *s2 = body_in(b2, "s", AMPC_DTYPE_F32, SHAPE(2));
    body_out(b2, c2);
    body_out(b2, s2);
    in[0] = NULL;
    cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "forever", in, 3, names, &b2, 1, 0, NULL, 0, 1, &n),
                 AMPC_E_INVALID_ARG);
    t_expect_diag(g,
                  "node 1 (Loop 'forever'): the Loop never ends: it has no trip count M (input 0 "
                  "is absent) and its condition stays true (the initial one is absent and the "
                  "body returns it unchanged)");
    ampc_graph_clear_errors(g);
    in[0] = M;
    cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "few", in, 2, names, &b2, 1, 0, NULL, 0, 1, &n),
                 AMPC_E_INVALID_ARG);
    t_expect_diag(g, "node 2 (Loop 'few'): attribute 'body': subgraph 'forever' has 3 inputs, "
                     "expected 2 (the iteration number, the condition, 0 loop-carried values and "
                     "0 captures)");
    ampc_graph_destroy(g);
}

Test(control, loop_with_constant_false_condition_runs_no_iteration_and_a_false_body_one) {
    for (int variant = 0; variant < 2; variant++) {
        ampc_graph *g = ampc_graph_create("t");
        int64_t m = 5;
        uint8_t init = variant == 0 ? 0 : 1, body_cond = 0;
        ampc_value *M = t_const_i64(g, SHAPE(), &m);
        ampc_value *c0 = t_const(g, AMPC_DTYPE_BOOL, SHAPE(), &init);
        ampc_value *s0 = t_input(g, "s0", AMPC_DTYPE_F32, SHAPE(2));
        ampc_graph *b = ampc_ir_subgraph_new(g, "body");
        body_in(b, "i", AMPC_DTYPE_I64, SHAPE());
        body_in(b, "cond", AMPC_DTYPE_BOOL, SHAPE());
        ampc_value *s = body_in(b, "s", AMPC_DTYPE_F32, SHAPE(2));
        body_out(b, t_const(b, AMPC_DTYPE_BOOL, SHAPE(), &body_cond)); /* stop after this one */
        ampc_value *s1 = ampc_add(b, s, s);
        body_out(b, s1);
        body_out(b, ampc_op(b, "Identity", &s1, 1, NULL, 0));
        ampc_value *in[3] = {M, c0, s0};
        const char *names[1] = {"body"};
        ampc_node *n;
        cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "l", in, 3, names, &b, 1, 0, NULL, 0, 2, &n),
                     AMPC_OK, "%s", ampc_graph_errors(g));
        int64_t T = variant == 0 ? 0 : 1;
        cr_assert_eq(n->outputs[1]->shape.dims[0], T);
        ampc_output(g, n->outputs[0], "s");
        ampc_output(g, n->outputs[1], "rows");
        float sv[2] = {1, 3};
        ampc_tensor xin = t_tensor(AMPC_DTYPE_F32, SHAPE(2), sv), out[2];
        cr_assert_eq(ampc_graph_evaluate(g, &xin, 1, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
        double fin0[2] = {1, 3}, fin1[2] = {2, 6};
        t_expect_close(&out[0], SHAPE(2), variant ? fin1 : fin0, 0, 0);
        t_expect_close(&out[1], variant ? SHAPE(1, 2) : SHAPE(0, 2), fin1, 0, 0);
        ampc_tensor_free(&out[0]);
        ampc_tensor_free(&out[1]);
        ampc_graph_destroy(g);
    }
}

Test(control, loop_body_errors_name_the_iteration_and_leave_the_body_reusable) {
    ampc_graph *g = ampc_graph_create("t");
    int64_t zero = 0, one = 1;
    ampc_value *M = t_input(g, "m", AMPC_DTYPE_I64, SHAPE());
    ampc_value *k0 = t_const_i64(g, SHAPE(), &zero);
    ampc_value *acc0 = t_input(g, "acc0", AMPC_DTYPE_F32, SHAPE());
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    body_in(b, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c = body_in(b, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *k = body_in(b, "k", AMPC_DTYPE_I64, SHAPE());
    ampc_value *acc = body_in(b, "acc", AMPC_DTYPE_F32, SHAPE());
    double table[3] = {10, 20, 30};
    ampc_value *row =
        ampc_op(b, "Gather", (ampc_value *[]){t_const_f32(b, SHAPE(3), table), k}, 2, NULL, 0);
    body_out(b, c);
    body_out(b, ampc_add(b, k, t_const_i64(b, SHAPE(), &one)));
    body_out(b, ampc_add(b, acc, row));
    ampc_value *in[4] = {M, NULL, k0, acc0};
    const char *names[1] = {"body"};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "l", in, 4, names, &b, 1, 0, NULL, 0, 2, &n), AMPC_OK,
                 "%s", ampc_graph_errors(g));
    ampc_output(g, n->outputs[1], "acc");
    float a0 = 0;
    for (int64_t m = 4; m >= 3; m--) {
        ampc_tensor in2[2] = {t_tensor(AMPC_DTYPE_I64, SHAPE(), &m),
                              t_tensor(AMPC_DTYPE_F32, SHAPE(), &a0)},
                    out;
        ampc_status st = ampc_graph_evaluate(g, in2, 2, &out, 1);
        if (m == 4) { /* iteration 3 reads table[3] */
            cr_assert_eq(st, AMPC_E_EVAL);
            t_expect_diag(g, "node 0 (Loop 'l'): attribute 'body', iteration 3: node 0 (Gather "
                             "'Gather_0'): index 3 (element 0 of input 1 'k') is out of range");
            cr_assert_eq(ampc_graph_status(b), AMPC_OK); /* moved to the parent */
            ampc_graph_clear_errors(g);
        } else {
            cr_assert_eq(st, AMPC_OK, "%s", ampc_graph_errors(g));
            double want = 60;
            t_expect_close(&out, SHAPE(), &want, 0, 0);
            ampc_tensor_free(&out);
        }
    }
    ampc_graph_destroy(g);
}

/* ---- Scan ----------------------------------------------------------------------------------- */

Test(control, scan_sums_rows_and_stacks_running_sums) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *init = t_input(g, "init", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2));
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *s = body_in(b, "sum_in", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *r = body_in(b, "next", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *s1 = ampc_add(b, s, r);
    body_out(b, s1);
    body_out(b, ampc_op(b, "Identity", &s1, 1, NULL, 0));
    ampc_attr m = {.name = "num_scan_inputs", .kind = AMPC_ATTR_INT, .i = 1};
    const char *names[1] = {"body"};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_SCAN, "scan", (ampc_value *[]){init, x}, 2, names, &b, 1, 0,
                          &m, 1, 2, &n),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_output(g, n->outputs[0], "y");
    ampc_output(g, n->outputs[1], "z");
    float iv[2] = {0, 0}, xv[6] = {1, 2, 3, 4, 5, 6};
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2), iv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(3, 2), xv)},
                out[2];
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double y[2] = {9, 12}, z[6] = {1, 2, 4, 6, 9, 12};
    t_expect_close(&out[0], SHAPE(2), y, 0, 0);
    t_expect_close(&out[1], SHAPE(3, 2), z, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(control, scan_follows_axes_and_directions) {
    /* x [2,3] scanned along axis 1 backwards: columns 2, 1, 0; running sums s = [3,6], [5,11],
     * [6,15]; output A stacks them along axis 1 forwards, output B along axis 0 backwards. */
    ampc_graph *g = ampc_graph_create("t");
    double zero[2] = {0, 0}, xv[6] = {1, 2, 3, 4, 5, 6};
    ampc_value *init = t_const_f32(g, SHAPE(2), zero), *x = t_const_f32(g, SHAPE(2, 3), xv);
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *s = body_in(b, "s", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *col = body_in(b, "col", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *s1 = ampc_add(b, s, col);
    body_out(b, s1);
    body_out(b, ampc_op(b, "Identity", &s1, 1, NULL, 0));
    body_out(b, ampc_op(b, "Identity", &s1, 1, NULL, 0));
    int64_t in_axes[1] = {-1}, in_dirs[1] = {1}, out_axes[2] = {1, 0}, out_dirs[2] = {0, 1};
    ampc_attr at[5] = {
        {.name = "num_scan_inputs", .kind = AMPC_ATTR_INT, .i = 1},
        {.name = "scan_input_axes", .kind = AMPC_ATTR_INTS, .ints = in_axes, .n = 1},
        {.name = "scan_input_directions", .kind = AMPC_ATTR_INTS, .ints = in_dirs, .n = 1},
        {.name = "scan_output_axes", .kind = AMPC_ATTR_INTS, .ints = out_axes, .n = 2},
        {.name = "scan_output_directions", .kind = AMPC_ATTR_INTS, .ints = out_dirs, .n = 2},
    };
    const char *names[1] = {"body"};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_SCAN, "scan", (ampc_value *[]){init, x}, 2, names, &b, 1, 0,
                          at, 5, 3, &n),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    /* All inputs constant: evaluated while building. */
    for (int i = 0; i < 3; i++) cr_assert_not_null(n->outputs[i]->data);
    ampc_output(g, n->outputs[0], "y");
    ampc_output(g, n->outputs[1], "a");
    ampc_output(g, n->outputs[2], "b");
    ampc_tensor out[3];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    double y[2] = {6, 15}, a[6] = {3, 5, 6, 6, 11, 15}, bb[6] = {6, 15, 5, 11, 3, 6};
    t_expect_close(&out[0], SHAPE(2), y, 0, 0);
    t_expect_close(&out[1], SHAPE(2, 3), a, 0, 0);
    t_expect_close(&out[2], SHAPE(3, 2), bb, 0, 0);
    for (int i = 0; i < 3; i++) ampc_tensor_free(&out[i]);
    ampc_graph_destroy(g);
}

Test(control, scan_over_an_empty_sequence_and_scalar_slices) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *init = t_input(g, "init", AMPC_DTYPE_I32, SHAPE());
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_I32, SHAPE(0));
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *s = body_in(b, "s", AMPC_DTYPE_I32, SHAPE());
    ampc_value *e = body_in(b, "e", AMPC_DTYPE_I32, SHAPE()); /* a slice of a 1-D input */
    ampc_value *s1 = ampc_mul(b, s, e);
    body_out(b, s1);
    body_out(b, s1);
    ampc_attr m = {.name = "num_scan_inputs", .kind = AMPC_ATTR_INT, .i = 1};
    const char *names[1] = {"body"};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_SCAN, "scan", (ampc_value *[]){init, x}, 2, names, &b, 1, 0,
                          &m, 1, 2, &n),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_output(g, n->outputs[0], "p");
    ampc_output(g, n->outputs[1], "all");
    int32_t iv = 7;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_I32, SHAPE(), &iv),
                         t_tensor(AMPC_DTYPE_I32, SHAPE(0), NULL)},
                out[2];
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t p = 7;
    t_expect_ints(&out[0], SHAPE(), &p);
    t_expect_ints(&out[1], SHAPE(0), NULL);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
}

Test(control, scan_rules_and_their_messages) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3, 2));
    ampc_value *y = t_input(g, "y", AMPC_DTYPE_F32, SHAPE(4, 2));
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *p = body_in(b, "p", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *q = body_in(b, "q", AMPC_DTYPE_F32, SHAPE(2));
    body_out(b, ampc_add(b, p, q));
    const char *names[1] = {"body"};
    ampc_node *n;
    ampc_attr m2 = {.name = "num_scan_inputs", .kind = AMPC_ATTR_INT, .i = 2};
    cr_assert_eq(
        build_cf(g, AMPC_OP_SCAN, "s1", (ampc_value *[]){x, y}, 2, names, &b, 1, 0, &m2, 1, 1, &n),
        AMPC_E_SHAPE);
    t_expect_diag(g, "node 0 (Scan 's1'): scan inputs must have one sequence length: input 0 'x' "
                     "has 3 along its scan axis 0, input 1 'y' has 4");
    ampc_graph_clear_errors(g);
    cr_assert_eq(
        build_cf(g, AMPC_OP_SCAN, "s2", (ampc_value *[]){x, x}, 2, names, &b, 1, 0, NULL, 0, 1, &n),
        AMPC_E_ATTR);
    t_expect_diag(g, "node 1 (Scan 's2'): attribute 'num_scan_inputs' (an int) is required");
    ampc_graph_clear_errors(g);
    int64_t dirs[2] = {0, 2};
    ampc_attr bad[2] = {
        m2, {.name = "scan_input_directions", .kind = AMPC_ATTR_INTS, .ints = dirs, .n = 2}};
    cr_assert_eq(
        build_cf(g, AMPC_OP_SCAN, "s3", (ampc_value *[]){x, x}, 2, names, &b, 1, 0, bad, 2, 1, &n),
        AMPC_E_ATTR);
    t_expect_diag(g, "node 2 (Scan 's3'): attribute 'scan_input_directions' entry 1 is 2; "
                     "directions are 0 (forward) or 1 (reverse)");
    ampc_graph_clear_errors(g);
    /* One state (x's row [2] is not the state's [3,2]), one scan input. */
    ampc_attr m1 = {.name = "num_scan_inputs", .kind = AMPC_ATTR_INT, .i = 1};
    cr_assert_eq(
        build_cf(g, AMPC_OP_SCAN, "s4", (ampc_value *[]){x, x}, 2, names, &b, 1, 0, &m1, 1, 1, &n),
        AMPC_E_SHAPE);
    t_expect_diag(g, "node 3 (Scan 's4'): attribute 'body': subgraph input 0 'p' is f32[2], but "
                     "the node feeds it f32[3,2] (state variable 0: input 0 'x')");
    ampc_graph_destroy(g);
}

/* ---- captures ------------------------------------------------------------------------------- */

/* Loop (M = 2) whose body holds an If whose branches use the outer graph's input w, two levels
 * up: w is a capture of the Loop and, inside the body, of the If. s <- flag ? s + w : s - w. */
static ampc_graph *nested_graph(void) {
    ampc_graph *g = ampc_graph_create("nested");
    ampc_value *w = t_input(g, "w", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *flag = t_input(g, "flag", AMPC_DTYPE_BOOL, SHAPE());
    int64_t two = 2;
    double zero[2] = {0, 0};
    ampc_value *M = t_const_i64(g, SHAPE(), &two), *s0 = t_const_f32(g, SHAPE(2), zero);

    ampc_graph *body = ampc_ir_subgraph_new(g, "body");
    body_in(body, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c = body_in(body, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *s = body_in(body, "s", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *w1 = body_in(body, "w", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *f1 = body_in(body, "flag", AMPC_DTYPE_BOOL, SHAPE());

    ampc_graph *th = ampc_ir_subgraph_new(body, "then"), *el = ampc_ir_subgraph_new(body, "else");
    ampc_value *ts = body_in(th, "s", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *tw = body_in(th, "w", AMPC_DTYPE_F32, SHAPE(2));
    body_out(th, ampc_add(th, ts, tw));
    ampc_value *es = body_in(el, "s", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *ew = body_in(el, "w", AMPC_DTYPE_F32, SHAPE(2));
    body_out(el, ampc_sub(el, es, ew));
    const char *bn[2] = {"then_branch", "else_branch"};
    ampc_graph *bb[2] = {th, el};
    ampc_node *ifn;
    cr_assert_eq(build_cf(body, AMPC_OP_IF, "if", (ampc_value *[]){f1, s, w1}, 3, bn, bb, 2, 2,
                          NULL, 0, 1, &ifn),
                 AMPC_OK, "%s", ampc_graph_errors(body));
    body_out(body, c);
    body_out(body, ifn->outputs[0]);

    const char *ln[1] = {"body"};
    ampc_node *loop;
    cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "loop", (ampc_value *[]){M, NULL, s0, w, flag}, 5, ln,
                          &body, 1, 2, NULL, 0, 1, &loop),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_output(g, loop->outputs[0], "s");
    return g;
}

static void run_nested(ampc_graph *g, uint8_t flag, const double *want) {
    float w[2] = {1, 2};
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2), w),
                         t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &flag)},
                out;
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    t_expect_close(&out, SHAPE(2), want, 0, 0);
    ampc_tensor_free(&out);
}

Test(control, captures_reach_through_nested_bodies) {
    ampc_graph *g = nested_graph();
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    double plus[2] = {2, 4}, minus[2] = {-2, -4};
    run_nested(g, 1, plus);
    run_nested(g, 0, minus);
    /* The dependency is an edge: dce keeps w's consumer, and the If's captures are inputs. */
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    run_nested(g, 1, plus);
    ampc_graph_destroy(g);
}

Test(control, print_and_parse_round_trip_a_graph_with_a_loop_and_nested_bodies) {
    ampc_graph *g = nested_graph();
    char *text = ampc_graph_to_text(g, true);
    cr_assert(strstr(text, "num_captures = 2"), "%s", text);
    cr_assert(strstr(text, "%s : f32[2] = Loop(%c, _, %c.0, %w, %flag) {body = graph \"body\" {\n"
                           "    input %i : i64[]\n"),
              "%s", text);
    ampc_graph *p = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &p, &err), AMPC_OK, "%s\n%s", err, text);
    char *again = ampc_graph_to_text(p, true);
    cr_assert_str_eq(again, text);
    cr_assert_eq(ampc_graph_verify(p), AMPC_OK, "%s", ampc_graph_errors(p));
    double plus[2] = {2, 4}, minus[2] = {-2, -4};
    run_nested(p, 1, plus);
    run_nested(p, 0, minus);
    free(text);
    free(again);
    ampc_graph_destroy(p);
    ampc_graph_destroy(g);
}

/* ---- the verifier --------------------------------------------------------------------------- */

static void expect_verify_error(ampc_graph *g, const char *needle) {
    cr_assert_eq(ampc_graph_verify(g), AMPC_E_VERIFY, "the verifier accepted the graph");
    t_expect_diag(g, needle);
    ampc_graph_clear_errors(g);
}

Test(control, verifier_reports_malformed_captures) {
    ampc_node *n;
    ampc_graph *g = if_graph(&n);
    ampc_graph *th = n->attrs[0].graph;
    /* A capture whose body input has another shape. */
    th->inputs[0]->shape.dims[0] = 4;
    expect_verify_error(g, "node 0 (If 'if'): capture 0: input 1 'x' is f32[3] but enters subgraph "
                           "'then' (attribute 'then_branch') as input 0 'xt' of type f32[4]; a "
                           "capture keeps its dtype and shape");
    th->inputs[0]->shape.dims[0] = 3;
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    /* num_captures beyond the inputs. */
    ampc_attr *k = &n->attrs[2];
    cr_assert_str_eq(k->name, AMPC_ATTR_NUM_CAPTURES);
    k->i = 2;
    expect_verify_error(g, "node 0 (If 'if'): attribute 'num_captures' is 2, but the node has 2 "
                           "inputs of which at most 1 can be captures");
    /* One capture fewer than the bodies take. */
    k->i = 0;
    expect_verify_error(g, "node 0 (If 'if'): attribute 'then_branch': subgraph 'then' has 1 "
                           "inputs, expected 0 for this If node (0 of them captures)");
    k->i = 1;
    /* A capture that is absent. */
    ampc_value *x = n->inputs[1];
    n->inputs[1] = NULL;
    expect_verify_error(g, "node 0 (If 'if'): input 1 is absent, but it is capture 0 (captures are "
                           "always present)");
    n->inputs[1] = x;
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
}

Test(control, verifier_reports_outer_values_used_without_capture_and_foreign_bodies) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_graph *th = ampc_ir_subgraph_new(g, "then"), *el = ampc_ir_subgraph_new(g, "else");
    body_out(th, ampc_relu(th, x)); /* names the outer x directly: not self-contained */
    body_out(el, ampc_neg(el, x));
    const char *names[2] = {"then_branch", "else_branch"};
    ampc_graph *bodies[2] = {th, el};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_IF, "if", &c, 1, names, bodies, 2, 0, NULL, 0, 1, &n), AMPC_OK,
                 "%s", ampc_graph_errors(g));
    ampc_output(g, n->outputs[0], "y");
    expect_verify_error(g, "node 0 (If 'if'): attribute 'then_branch': subgraph 'then' is invalid: "
                           "node 0 (Relu 'Relu_0'): input 0 'x' is not a value of this graph");

    /* A body nobody owns (made with ampc_graph_create and never adopted). */
    ampc_graph *stray = ampc_graph_create("stray");
    ampc_value *sx = body_in(stray, "x", AMPC_DTYPE_F32, SHAPE(2));
    body_out(stray, sx);
    ampc_graph *keep = n->attrs[1].graph;
    n->attrs[1].graph = stray;
    expect_verify_error(g, "node 0 (If 'if'): attribute 'else_branch': subgraph 'stray' is not "
                           "owned by graph 't'");
    n->attrs[1].graph = keep;
    ampc_graph_destroy(stray);
    ampc_graph_destroy(g);
}

/* ---- passes --------------------------------------------------------------------------------- */

/* Two Ifs on the same inputs with equal but distinct bodies, and a third sharing the first one's
 * bodies: cse merges only the one that holds the very same subgraphs. */
Test(control, cse_merges_only_nodes_holding_the_same_subgraphs_and_dce_drops_unused_loops) {
    ampc_graph *g = ampc_graph_create("t");
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *outs[3];
    ampc_graph *first[2];
    const char *names[2] = {"then_branch", "else_branch"};
    for (int i = 0; i < 3; i++) {
        ampc_graph *bodies[2];
        if (i < 2) {
            for (int j = 0; j < 2; j++) {
                bodies[j] = ampc_ir_subgraph_new(g, j ? "else" : "then");
                ampc_value *v = body_in(bodies[j], "x", AMPC_DTYPE_F32, SHAPE(2));
                body_out(bodies[j], j ? ampc_neg(bodies[j], v) : ampc_relu(bodies[j], v));
                if (i == 0) first[j] = bodies[j];
            }
        } else {
            bodies[0] = first[0], bodies[1] = first[1];
        }
        ampc_node *n;
        cr_assert_eq(build_cf(g, AMPC_OP_IF, NULL, (ampc_value *[]){c, x}, 2, names, bodies, 2, 1,
                              NULL, 0, 1, &n),
                     AMPC_OK, "%s", ampc_graph_errors(g));
        outs[i] = n->outputs[0];
    }
    ampc_value *sum = ampc_op(g, "Sum", outs, 3, NULL, 0);
    ampc_output(g, sum, "y");
    /* An unused Loop: dce removes it (its body goes with the graph). */
    ampc_node *unused;
    int64_t m = 2;
    ampc_graph *lb = ampc_ir_subgraph_new(g, "body");
    body_in(lb, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *lc = body_in(lb, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *ls = body_in(lb, "s", AMPC_DTYPE_F32, SHAPE(2));
    body_out(lb, lc);
    body_out(lb, ampc_neg(lb, ls));
    const char *ln[1] = {"body"};
    cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "dead",
                          (ampc_value *[]){t_const_i64(g, SHAPE(), &m), NULL, x}, 3, ln, &lb, 1, 0,
                          NULL, 0, 1, &unused),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_node_count(g), 5);
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_node_count(g), 3); /* If, If, Sum */
    uint8_t cv = 1;
    float xv[2] = {-1, 2};
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &cv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2), xv)},
                out;
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    double want[2] = {0, 6}; /* relu three times */
    t_expect_close(&out, SHAPE(2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(control, nodes_whose_bodies_hold_a_loop_never_fold) {
    ampc_graph *g = ampc_graph_create("t");
    uint8_t t = 1;
    ampc_value *c = t_const(g, AMPC_DTYPE_BOOL, SHAPE(), &t);
    ampc_graph *th = ampc_ir_subgraph_new(g, "then"), *el = ampc_ir_subgraph_new(g, "else");
    int64_t m = 3, zero = 0, one = 1;
    ampc_graph *lb = ampc_ir_subgraph_new(th, "body");
    body_in(lb, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *lc = body_in(lb, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *ls = body_in(lb, "s", AMPC_DTYPE_I64, SHAPE());
    body_out(lb, lc);
    body_out(lb, ampc_add(lb, ls, t_const_i64(lb, SHAPE(), &one)));
    const char *ln[1] = {"body"};
    ampc_node *loop;
    cr_assert_eq(build_cf(th, AMPC_OP_LOOP, "count",
                          (ampc_value *[]){t_const_i64(th, SHAPE(), &m), NULL,
                                           t_const_i64(th, SHAPE(), &zero)},
                          3, ln, &lb, 1, 0, NULL, 0, 1, &loop),
                 AMPC_OK, "%s", ampc_graph_errors(th));
    cr_assert_null(loop->outputs[0]->data); /* Loop never folds */
    body_out(th, loop->outputs[0]);
    body_out(el, t_const_i64(el, SHAPE(), &zero));
    const char *names[2] = {"then_branch", "else_branch"};
    ampc_graph *bodies[2] = {th, el};
    ampc_node *n;
    cr_assert_eq(build_cf(g, AMPC_OP_IF, "if", &c, 1, names, bodies, 2, 0, NULL, 0, 1, &n), AMPC_OK,
                 "%s", ampc_graph_errors(g));
    cr_assert_null(n->outputs[0]->data);
    cr_assert_not(ampc_ir_node_bodies_foldable(n));
    ampc_output(g, n->outputs[0], "y");
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_node_count(g), 1);
    ampc_tensor out = {0};
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    int64_t want = 3;
    t_expect_ints(&out, SHAPE(), &want);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

/* ---- the iteration bound -------------------------------------------------------------------- */

/* The counting while loop with a run-time limit of 2^40 runs into the graph's bound: the failure
 * names the node, the bound, where the trip count came from, and how to raise it. */
Test(control, a_loop_stops_at_the_iteration_bound_with_a_message) {
    ampc_node *n;
    ampc_graph *g = while_graph(-1, &n);
    ampc_graph_set_max_loop_iterations(g, 1000);
    cr_assert_eq(run_while(g, 1, 1000), 1000); /* exactly the bound is fine */
    uint8_t go = 1;
    int64_t big = (int64_t)1 << 40;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &go),
                         t_tensor(AMPC_DTYPE_I64, SHAPE(), &big)},
                out = {0};
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_E_EVAL);
    cr_assert_null(out.data);
    t_expect_diag(g, "node 0 (Loop 'loop'): more than 1000 iterations (no trip count, and the "
                     "condition stayed true); raise the limit with --max-loop-iterations N "
                     "(ampc_graph_set_max_loop_iterations)");
    ampc_graph_clear_errors(g);
    ampc_graph_set_max_loop_iterations(g, 2000); /* raised: the same loop of 1,500 runs */
    cr_assert_eq(run_while(g, 1, 1500), 1500);
    ampc_graph_destroy(g);

    /* A trip count of 2^40 from the graph: named with its value and its input. */
    g = while_graph(big, &n);
    ampc_graph_set_max_loop_iterations(g, 10);
    big = (int64_t)1 << 41;
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_E_EVAL);
    char want[300];
    snprintf(want, sizeof want, "node 0 (Loop 'loop'): more than 10 iterations (trip count "
             "1099511627776 from input '%s'); raise the limit with --max-loop-iterations N "
             "(ampc_graph_set_max_loop_iterations)", n->inputs[0]->name);
    t_expect_diag(g, want);
    ampc_graph_destroy(g);
}

/* The default bound holds without any setting (a runaway loop fails instead of hanging). */
Test(control, the_default_bound_stops_a_runaway_loop, .timeout = 60) {
    ampc_node *n;
    ampc_graph *g = while_graph(-1, &n);
    uint8_t go = 1;
    int64_t big = INT64_MAX;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &go),
                         t_tensor(AMPC_DTYPE_I64, SHAPE(), &big)},
                out = {0};
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_E_EVAL);
    char want[64];
    snprintf(want, sizeof want, "more than %d iterations", AMPC_DEFAULT_MAX_LOOP_ITERATIONS);
    cr_assert(strstr(ampc_graph_errors(g), want), "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
}

/* The bound counts each execution of a Loop apart: an inner loop of `limit` iterations inside
 * an outer loop of 3 runs 3 * limit iterations in all and passes; one more inner iteration
 * fails, and the message says which outer iteration it was. */
Test(control, the_bound_applies_to_each_execution_of_a_nested_loop) {
    ampc_graph *g = ampc_graph_create("outer");
    ampc_value *go = t_input(g, "go", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *lim = t_input(g, "limit", AMPC_DTYPE_I64, SHAPE());
    int64_t three = 3, zero = 0, one = 1;
    ampc_value *M = t_const_i64(g, SHAPE(), &three), *t0 = t_const_i64(g, SHAPE(), &zero);
    ampc_graph *ob = ampc_ir_subgraph_new(g, "obody");
    body_in(ob, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *oc = body_in(ob, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *tot = body_in(ob, "total", AMPC_DTYPE_I64, SHAPE());
    ampc_value *ogo = body_in(ob, "go", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *olim = body_in(ob, "limit", AMPC_DTYPE_I64, SHAPE());
    /* the inner while loop: c <- c + 1 while c + 1 < limit */
    ampc_graph *ib = ampc_ir_subgraph_new(ob, "ibody");
    body_in(ib, "i", AMPC_DTYPE_I64, SHAPE());
    body_in(ib, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *c = body_in(ib, "c", AMPC_DTYPE_I64, SHAPE());
    ampc_value *il = body_in(ib, "limit", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c1 = ampc_add(ib, c, t_const_i64(ib, SHAPE(), &one));
    body_out(ib, ampc_op(ib, "Less", (ampc_value *[]){c1, il}, 2, NULL, 0));
    body_out(ib, c1);
    const char *names[1] = {"body"};
    ampc_node *inner, *outer;
    cr_assert_eq(build_cf(ob, AMPC_OP_LOOP, "inner",
                          (ampc_value *[]){NULL, ogo, t_const_i64(ob, SHAPE(), &zero), olim}, 4,
                          names, &ib, 1, 1, NULL, 0, 1, &inner),
                 AMPC_OK, "%s", ampc_graph_errors(ob));
    body_out(ob, oc);
    body_out(ob, ampc_add(ob, tot, inner->outputs[0]));
    cr_assert_eq(build_cf(g, AMPC_OP_LOOP, "outer", (ampc_value *[]){M, NULL, t0, go, lim}, 5,
                          names, &ob, 1, 2, NULL, 0, 1, &outer),
                 AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_output(g, outer->outputs[0], "total");
    ampc_graph_set_max_loop_iterations(g, 500);
    cr_assert_eq(run_while(g, 1, 500), 1500); /* 3 executions of 500 */
    uint8_t yes = 1;
    int64_t l = 501;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_BOOL, SHAPE(), &yes),
                         t_tensor(AMPC_DTYPE_I64, SHAPE(), &l)},
                out = {0};
    cr_assert_eq(ampc_graph_evaluate(g, in, 2, &out, 1), AMPC_E_EVAL);
    t_expect_diag(g, "node 0 (Loop 'outer'): attribute 'body', iteration 0: node 0 (Loop "
                     "'inner'): more than 500 iterations (no trip count, and the condition stayed "
                     "true); raise the limit with --max-loop-iterations N "
                     "(ampc_graph_set_max_loop_iterations)");
    ampc_graph_destroy(g);
}
