/*
 * test_flatten_control.c — the flatten-control pass (a GPU build): a Loop of a constant trip
 * count, a Scan (axes and directions) and an If with a run-time condition become nodes of the
 * graph that compute what the control-flow node computes on the reference evaluator; a Loop
 * whose stop depends on data becomes its body once between ampc.LoopBegin and ampc.LoopEnd,
 * whose plan jumps back to the body while the loop goes on (and, on a GPU, computes what the
 * reference does: swapped carried values, the iteration number, a trip count given at run time,
 * the iteration limit); nothing is flattened when the build is not for the GPU.
 */
#include "support.h"

#include "codegen/codegen.h"
#include "ir/ref/ref.h"
#include "ir/subgraph.h"
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

static ampc_node *build_cf(ampc_graph *g, ampc_opcode op, ampc_value *const *in, int32_t n_in,
                           const char *const *bnames, ampc_graph *const *bodies, int32_t nb,
                           int64_t k, const ampc_attr *extra, int32_t n_extra, int32_t n_out) {
    ampc_attr at[16];
    int32_t na = 0;
    for (int32_t i = 0; i < nb; i++)
        at[na++] = (ampc_attr){.name = bnames[i], .kind = AMPC_ATTR_GRAPH, .graph = bodies[i]};
    if (k) at[na++] = (ampc_attr){.name = AMPC_ATTR_NUM_CAPTURES, .kind = AMPC_ATTR_INT, .i = k};
    for (int32_t i = 0; i < n_extra; i++) at[na++] = extra[i];
    ampc_node *n = NULL;
    cr_assert_eq(ampc_ir_node_build(g, op, "cf", in, n_in, at, na, n_out, NULL, &n), AMPC_OK, "%s",
                 ampc_graph_errors(g));
    return n;
}

static void body_out(ampc_graph *b, ampc_value *v) {
    cr_assert_eq(ampc_ir_graph_add_output(b, v), AMPC_OK);
    cr_assert_eq(ampc_graph_status(b), AMPC_OK, "body: %s", ampc_graph_errors(b));
}

/* The whole pipeline, as a GPU build runs it (gpu_build) or not. */
static void optimize(ampc_graph *g, bool gpu_build) {
    ampc_pipeline_options po = {.verify = true, .gpu_build = gpu_build};
    cr_assert_eq(ampc_graph_optimize(g, &po), AMPC_OK, "%s", ampc_graph_errors(g));
}

/* ---- Loop ----------------------------------------------------------------------------------- */

enum { LOOP_ALWAYS, LOOP_COUNTED, LOOP_DATA };

/* Loop M = 4, carried s (f32[2] from input s0), captured x: s <- s + x * i, the scan output s
 * after each step (LOOP_ALWAYS); or, with no scan output, a condition output that stops it: i < 2,
 * which folds in each copy (LOOP_COUNTED), or sum(s) < 5, which depends on the data (LOOP_DATA). */
static ampc_graph *loop_graph(int kind) {
    const bool scans = kind == LOOP_ALWAYS;
    ampc_graph *g = ampc_graph_create("loop");
    int64_t m = 4;
    ampc_value *M = t_const_i64(g, SHAPE(), &m);
    ampc_value *s0 = t_input(g, "s0", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *i = t_input(b, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c = t_input(b, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *s = t_input(b, "s", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *xb = t_input(b, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *s1 = ampc_add(b, s, ampc_mul(b, xb, ampc_cast(b, i, AMPC_DTYPE_F32)));
    if (kind == LOOP_COUNTED) {
        int64_t two = 2;
        ampc_value *lt[2] = {i, t_const_i64(b, SHAPE(), &two)};
        body_out(b, ampc_op(b, "Less", lt, 2, NULL, 0));
    } else if (kind == LOOP_DATA) {
        ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
        ampc_value *lt[2] = {ampc_op(b, "ReduceSum", &s1, 1, &keep, 1), ampc_scalar_f32(b, 5)};
        body_out(b, ampc_op(b, "Less", lt, 2, NULL, 0));
    } else { /* the condition returned through an Identity, as exporters write it */
        body_out(b, ampc_op(b, "Identity", &c, 1, NULL, 0));
    }
    body_out(b, s1);
    if (scans) body_out(b, ampc_op(b, "Identity", &s1, 1, NULL, 0));
    ampc_value *in[4] = {M, NULL, s0, x};
    const char *names[1] = {"body"};
    ampc_node *n = build_cf(g, AMPC_OP_LOOP, in, 4, names, &b, 1, 1, NULL, 0, scans ? 2 : 1);
    ampc_output(g, n->outputs[0], "s");
    if (scans) ampc_output(g, n->outputs[1], "rows");
    return g;
}

Test(flatten_control, a_loop_of_a_constant_trip_count_unrolls) {
    /* every iteration, then one that stops after i = 2 (three iterations, not four) */
    for (int kind = LOOP_ALWAYS; kind <= LOOP_COUNTED; kind++) {
        ampc_graph *a = loop_graph(kind), *b = loop_graph(kind);
        optimize(b, true);
        cr_assert_eq(t_count_op(b, AMPC_OP_LOOP), 0);
        float s0[2] = {0.5f, -1}, x[2] = {1, 2};
        ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2), s0),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(2), x)};
        t_expect_same_outputs(a, b, in, 2, 0, 0);
        ampc_graph_destroy(a);
        ampc_graph_destroy(b);
    }
}

Test(flatten_control, a_loop_whose_stop_depends_on_data_is_marked_and_only_gpu_builds_flatten) {
    ampc_graph *g = loop_graph(LOOP_DATA);
    optimize(g, true);
    cr_assert_eq(t_count_op(g, AMPC_OP_LOOP), 0);
    cr_assert_eq(t_count_op(g, AMPC_OP_LOOP_BEGIN), 1);
    cr_assert_eq(t_count_op(g, AMPC_OP_LOOP_END), 1);
    cr_assert_eq(t_count_op(g, AMPC_OP_REDUCE_SUM), 1, "the body copied once");
    ampc_graph_destroy(g);
    g = loop_graph(LOOP_ALWAYS);
    optimize(g, false);
    cr_assert_eq(t_count_op(g, AMPC_OP_LOOP), 1);
    ampc_graph_destroy(g);
}

/* A Loop in g of M = 4 carrying s (from s0), capturing x: s <- s + relu(x) * i while
 * sum(s) < 5; relu(x) reads nothing the loop changes. */
static ampc_value *add_data_loop(ampc_graph *g, ampc_value *s0, ampc_value *x) {
    int64_t m = 4;
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *i = t_input(b, "i", AMPC_DTYPE_I64, SHAPE());
    t_input(b, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *s = t_input(b, "s", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *xb = t_input(b, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *rx = ampc_op(b, "Relu", &xb, 1, NULL, 0);
    ampc_value *s1 = ampc_add(b, s, ampc_mul(b, rx, ampc_cast(b, i, AMPC_DTYPE_F32)));
    ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
    ampc_value *lt[2] = {ampc_op(b, "ReduceSum", &s1, 1, &keep, 1), ampc_scalar_f32(b, 5)};
    body_out(b, ampc_op(b, "Less", lt, 2, NULL, 0));
    body_out(b, s1);
    ampc_value *in[4] = {t_const_i64(g, SHAPE(), &m), NULL, s0, x};
    const char *names[1] = {"body"};
    return build_cf(g, AMPC_OP_LOOP, in, 4, names, &b, 1, 1, NULL, 0, 1)->outputs[0];
}

static ampc_graph *if_graph(void);

/* Two such loops, the second reading the first's result through a node, an If before them,
 * relu(x) outside too: every Loop and If is flattened (the graph stays ordered: a sweep that
 * undid one attempt and marked the Loop instead kept its place), and the loop-invariant relu(xs)
 * runs once, before the loops (the graph output's own relu(xs) apart), not in either loop. */
Test(flatten_control, two_data_dependent_loops_and_an_if_keep_the_graph_ordered) {
    ampc_graph *g = if_graph();
    ampc_value *x = g->inputs[1];
    ampc_value *x2 = ampc_op(g, "Relu", &x, 1, NULL, 0);
    ampc_value *s0 = t_input(g, "s0", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *xs = t_input(g, "xs", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *l1 = add_data_loop(g, s0, xs);
    ampc_value *l2 = add_data_loop(g, ampc_op(g, "Neg", &l1, 1, NULL, 0), xs);
    ampc_output(g, ampc_add(g, l2, l2), "l");
    ampc_output(g, ampc_op(g, "Relu", &xs, 1, NULL, 0), "r");
    ampc_output(g, x2, "x2");
    optimize(g, true); /* verifies the graph after every pass */
    cr_assert_eq(t_count_op(g, AMPC_OP_LOOP) + t_count_op(g, AMPC_OP_IF), 0);
    cr_assert_eq(t_count_op(g, AMPC_OP_LOOP_BEGIN), 2);
    bool inside = false; /* between a LoopBegin and its LoopEnd */
    int32_t relus = 0;
    for (int32_t k = 0; k < g->n_nodes; k++) {
        const ampc_node *n = g->nodes[k];
        if (n->dead) continue;
        inside = n->op == AMPC_OP_LOOP_BEGIN || (inside && n->op != AMPC_OP_LOOP_END);
        if (n->op == AMPC_OP_RELU && n->inputs[0] == xs) {
            cr_expect(!inside, "relu(xs) at %d runs inside a loop", k);
            relus++;
        }
    }
    cr_expect_eq(relus, 2, "the loops' relu(xs) merged into one, the output's apart: %d", relus);
    ampc_cg_output *o = NULL;
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_cg_generate(g, NULL, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* The plan of g (optimised for the GPU, then its memory planned). */
static ampc_cg_output *plan_of(ampc_graph *g) {
    optimize(g, true);
    bool changed;
    cr_assert_eq(ampc_pass_plan_memory(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_cg_output *o = NULL;
    cr_assert_eq(ampc_cg_generate(g, NULL, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    return o;
}

Test(flatten_control, the_plan_of_a_data_dependent_loop_jumps_back_to_its_body) {
    for (int64_t limit = 0; limit <= 7; limit += 7) {
        ampc_graph *g = loop_graph(LOOP_DATA);
        ampc_graph_set_max_loop_iterations(g, limit);
        ampc_cg_output *o = plan_of(g);
        int32_t at[3], n = 0;
        for (int32_t i = 0; i < o->plan.n_steps; i++)
            if (o->plan.steps[i].kind == AMPC_RT_STEP_BRANCH && n < 3) at[n++] = i;
        cr_assert_eq(n, 2, "an entry jump and a back edge, got %d jumps", n);
        const ampc_rt_branch *entry = &o->plan.steps[at[0]].branch;
        const ampc_rt_branch *back = &o->plan.steps[at[1]].branch;
        cr_expect(!entry->jump_if_set && back->jump_if_set);
        cr_expect_eq(entry->target, at[1] + 1, "the entry jump lands after the back edge");
        cr_expect_eq(back->target, at[0] + 1, "the back edge returns to the body's first step");
        cr_expect(entry->flag.offset == back->flag.offset && entry->flag.bytes == 4);
        cr_expect_eq(back->limit, limit ? limit : AMPC_DEFAULT_MAX_LOOP_ITERATIONS);
        bool reduces = false; /* the body's steps lie between the jumps */
        for (int32_t i = at[0] + 1; i < at[1]; i++)
            reduces |= strstr(o->plan.steps[i].label, "ReduceSum") != NULL;
        cr_expect(reduces, "the body's ReduceSum runs between the jumps");
        ampc_cg_output_free(o);
        ampc_graph_destroy(g);
    }
}

/* A while loop: no trip count (or M given at run time), carried (a, b, t) with
 * (a, b) <- (b, a + b * i), t <- i, while sum(b) < 40 (WHILE_DATA) or until M (WHILE_COUNT):
 * the body returns a carried value and the iteration number through views of other state.
 * WHILE_IF: WHILE_DATA whose new b goes through an If on data, b * 0.5 when its sum passes 20,
 * else b + 1 (control flow inside the body). */
enum { WHILE_DATA, WHILE_COUNT, WHILE_IF };

/* If(sum(v) > 20) { v * 0.5 } else { v + 1 } in body b, capturing v. */
static ampc_value *halve_or_step(ampc_graph *b, ampc_value *v) {
    ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
    ampc_value *gt[2] = {ampc_op(b, "ReduceSum", &v, 1, &keep, 1), ampc_scalar_f32(b, 20)};
    ampc_value *c = ampc_op(b, "Greater", gt, 2, NULL, 0);
    ampc_graph *th = ampc_ir_subgraph_new(b, "then"), *el = ampc_ir_subgraph_new(b, "else");
    ampc_value *vt = t_input(th, "vt", AMPC_DTYPE_F32, SHAPE(3));
    body_out(th, ampc_mul(th, vt, ampc_scalar_f32(th, 0.5f)));
    ampc_value *ve = t_input(el, "ve", AMPC_DTYPE_F32, SHAPE(3));
    body_out(el, ampc_add(el, ve, ampc_scalar_f32(el, 1)));
    ampc_value *in[2] = {c, v};
    const char *names[2] = {"then_branch", "else_branch"};
    ampc_graph *bodies[2] = {th, el};
    return build_cf(b, AMPC_OP_IF, in, 2, names, bodies, 2, 1, NULL, 0, 1)->outputs[0];
}

static ampc_graph *while_graph(int kind) {
    ampc_graph *g = ampc_graph_create(kind == WHILE_COUNT ? "counted" : kind == WHILE_IF ? "while_if" : "while");
    ampc_value *M = kind == WHILE_COUNT ? t_input(g, "M", AMPC_DTYPE_I64, SHAPE()) : NULL;
    ampc_value *a0 = t_input(g, "a0", AMPC_DTYPE_F32, SHAPE(3));
    ampc_value *b0 = t_input(g, "b0", AMPC_DTYPE_F32, SHAPE(3));
    int64_t minus = -1;
    ampc_value *t0 = t_const_i64(g, SHAPE(), &minus);
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *i = t_input(b, "i", AMPC_DTYPE_I64, SHAPE());
    ampc_value *c = t_input(b, "cond", AMPC_DTYPE_BOOL, SHAPE());
    ampc_value *a = t_input(b, "a", AMPC_DTYPE_F32, SHAPE(3));
    ampc_value *bb = t_input(b, "b", AMPC_DTYPE_F32, SHAPE(3));
    t_input(b, "t", AMPC_DTYPE_I64, SHAPE());
    ampc_value *b1 = ampc_add(b, a, ampc_mul(b, bb, ampc_cast(b, ampc_add(b, i, t_const_i64(b, SHAPE(), (int64_t[]){1})), AMPC_DTYPE_F32)));
    if (kind == WHILE_IF) b1 = halve_or_step(b, b1);
    if (kind != WHILE_COUNT) {
        ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
        ampc_value *lt[2] = {ampc_op(b, "ReduceSum", &b1, 1, &keep, 1), ampc_scalar_f32(b, 40)};
        body_out(b, ampc_op(b, "Less", lt, 2, NULL, 0));
    } else {
        body_out(b, ampc_op(b, "Identity", &c, 1, NULL, 0));
    }
    body_out(b, ampc_op(b, "Identity", &bb, 1, NULL, 0));
    body_out(b, b1);
    body_out(b, ampc_op(b, "Identity", &i, 1, NULL, 0));
    uint8_t yes = 1;
    ampc_value *in[5] = {M, kind != WHILE_COUNT ? t_const(g, AMPC_DTYPE_BOOL, SHAPE(), &yes) : NULL,
                         a0, b0, t0};
    const char *names[1] = {"body"};
    ampc_node *n = build_cf(g, AMPC_OP_LOOP, in, 5, names, &b, 1, 0, NULL, 0, 3);
    ampc_output(g, n->outputs[0], "a");
    ampc_output(g, n->outputs[1], "b");
    ampc_output(g, n->outputs[2], "t");
    return g;
}

/* The body returns carried value b as a and its iteration number as t, each the bytes of
 * another value of the loop's state: both go through scratch (past the planned arena) before
 * the state is written, as one parallel assignment. */
Test(flatten_control, values_returned_in_the_state_s_own_bytes_go_through_scratch) {
    ampc_graph *g = while_graph(WHILE_DATA);
    ampc_cg_output *o = plan_of(g);
    int32_t staged = 0, jumps = 0;
    for (int32_t i = 0; i < o->plan.n_steps; i++) {
        const ampc_rt_step *s = &o->plan.steps[i];
        jumps += s->kind == AMPC_RT_STEP_BRANCH;
        if (s->kind == AMPC_RT_STEP_COPY && s->copy.dst.offset >= g->arena_bytes) {
            cr_expect_eq(jumps, 1, "step %d stages a value outside the loop's body", i);
            staged++;
        }
    }
    cr_expect_eq(staged, 2, "a and t staged, got %d copies into scratch", staged);
    ampc_cg_output_free(o);
    ampc_graph_destroy(g);
}

/* Floats in [0.25, 1) (the while loop then runs a few times), M = 5. */
static void fill_while(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    for (int64_t k = 0; k < ampc_shape_numel(&t->shape); k++) {
        *seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
        ampc_ref_store_f64(t->data, t->dtype, k,
                           t->dtype == AMPC_DTYPE_I64 ? 5.0 : 0.25 + (double)(*seed >> 11 & 63) / 84.0);
    }
}

/* An If inside a data-dependent Loop's body is written into the body first (its Where), and the
 * Loop is then marked. */
Test(flatten_control, control_flow_inside_a_body_is_flattened_first) {
    ampc_graph *g = while_graph(WHILE_IF);
    optimize(g, true);
    cr_assert_eq(t_count_op(g, AMPC_OP_LOOP), 0);
    cr_assert_eq(t_count_op(g, AMPC_OP_IF), 0);
    cr_assert_eq(t_count_op(g, AMPC_OP_LOOP_BEGIN), 1);
    cr_assert_eq(t_count_op(g, AMPC_OP_WHERE), 1);
    ampc_graph_destroy(g);
}

Test(flatten_control, gpu_a_data_dependent_loop_matches_the_reference) {
    const int kinds[4] = {LOOP_DATA, WHILE_DATA, WHILE_COUNT, WHILE_IF};
    for (int k = 0; k < 4; k++) {
        ampc_graph *g = k == 0 ? loop_graph(LOOP_DATA) : while_graph(kinds[k]);
        t_gpu_check c = {.fill = fill_while, .seed = 0x2545f4914f6cdd1dull + (uint64_t)k,
                         .rtol = 1e-5, .atol = 1e-6, .what = g->name};
        t_gpu_vs_reference(g, &c);
    }
}

/* Past --max-loop-iterations the run fails, naming the Loop; at the limit it runs. */
Test(flatten_control, gpu_a_loop_past_its_iteration_limit_fails_naming_it) {
    t_skip_without_gpu();
    for (int64_t M = 3; M <= 4; M++) {
        ampc_graph *g = while_graph(WHILE_COUNT);
        ampc_graph_set_max_loop_iterations(g, 3);
        static const int32_t none = 0;
        ampc_compile_options co = {.archs = &none, .n_archs = 0, .cache_dir = ""};
        ampc_module *m = NULL;
        cr_assert_eq(ampc_compile(g, &co, &m), AMPC_OK, "%s", ampc_graph_errors(g));
        float a0[3] = {1, 2, 3}, b0[3] = {1, 1, 1}, ra[3], rb[3];
        int64_t t = 0;
        ampc_tensor in[3] = {t_tensor(AMPC_DTYPE_I64, SHAPE(), &M),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(3), a0),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(3), b0)};
        ampc_tensor out[3] = {t_tensor(AMPC_DTYPE_F32, SHAPE(3), ra),
                              t_tensor(AMPC_DTYPE_F32, SHAPE(3), rb),
                              t_tensor(AMPC_DTYPE_I64, SHAPE(), &t)};
        const ampc_status st = ampc_module_run(m, in, 3, out, 3, NULL);
        if (M == 3) {
            cr_expect_eq(st, AMPC_OK, "%s", ampc_module_errors(m));
            cr_expect_eq(t, 2, "the last iteration number, got %lld", (long long)t);
        } else {
            const char *err = ampc_module_errors(m);
            cr_expect_eq(st, AMPC_E_EVAL, "%s", err);
            cr_expect(strstr(err, "'cf/end'") && strstr(err, "more than 3 iterations"), "%s", err);
        }
        ampc_module_destroy(m);
        ampc_graph_destroy(g);
    }
}

/* ---- Scan ----------------------------------------------------------------------------------- */

/* x [2, 3] scanned along axis -1 backwards with running sums s; output A stacks them along axis
 * 1 forwards, output B along axis 0 backwards; a captured bias c is added to each sum. */
static ampc_graph *scan_graph(void) {
    ampc_graph *g = ampc_graph_create("scan");
    ampc_value *init = t_input(g, "init", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *bias = t_input(g, "bias", AMPC_DTYPE_F32, SHAPE(2));
    ampc_graph *b = ampc_ir_subgraph_new(g, "body");
    ampc_value *s = t_input(b, "s", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *col = t_input(b, "col", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *cb = t_input(b, "c", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *s1 = ampc_add(b, ampc_add(b, s, col), cb);
    body_out(b, s1);
    body_out(b, ampc_op(b, "Identity", &s1, 1, NULL, 0));
    body_out(b, ampc_mul(b, s1, ampc_scalar_f32(b, 2)));
    int64_t in_axes[1] = {-1}, in_dirs[1] = {1}, out_axes[2] = {1, 0}, out_dirs[2] = {0, 1};
    ampc_attr at[5] = {
        {.name = "num_scan_inputs", .kind = AMPC_ATTR_INT, .i = 1},
        {.name = "scan_input_axes", .kind = AMPC_ATTR_INTS, .ints = in_axes, .n = 1},
        {.name = "scan_input_directions", .kind = AMPC_ATTR_INTS, .ints = in_dirs, .n = 1},
        {.name = "scan_output_axes", .kind = AMPC_ATTR_INTS, .ints = out_axes, .n = 2},
        {.name = "scan_output_directions", .kind = AMPC_ATTR_INTS, .ints = out_dirs, .n = 2},
    };
    const char *names[1] = {"body"};
    ampc_value *in[3] = {init, x, bias};
    ampc_node *n = build_cf(g, AMPC_OP_SCAN, in, 3, names, &b, 1, 1, at, 5, 3);
    ampc_output(g, n->outputs[0], "y");
    ampc_output(g, n->outputs[1], "a");
    ampc_output(g, n->outputs[2], "b");
    return g;
}

Test(flatten_control, a_scan_unrolls_along_its_axes_and_directions) {
    ampc_graph *a = scan_graph(), *b = scan_graph();
    optimize(b, true);
    cr_assert_eq(t_count_op(b, AMPC_OP_SCAN), 0);
    float iv[2] = {0.25f, -3}, xv[6] = {1, 2, 3, 4, 5, 6}, bv[2] = {10, 20};
    ampc_tensor in[3] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2), iv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), xv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2), bv)};
    t_expect_same_outputs(a, b, in, 3, 0, 0);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

/* ---- If ------------------------------------------------------------------------------------- */

/* If(c) { x * 2 } else { x + 10 }, both branches capturing x. */
static ampc_graph *if_graph(void) {
    ampc_graph *g = ampc_graph_create("if");
    ampc_value *c = t_input(g, "c", AMPC_DTYPE_BOOL, SHAPE(1));
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3));
    ampc_graph *th = ampc_ir_subgraph_new(g, "then"), *el = ampc_ir_subgraph_new(g, "else");
    ampc_value *xt = t_input(th, "xt", AMPC_DTYPE_F32, SHAPE(3));
    body_out(th, ampc_mul(th, xt, ampc_scalar_f32(th, 2)));
    ampc_value *xe = t_input(el, "xe", AMPC_DTYPE_F32, SHAPE(3));
    body_out(el, ampc_add(el, xe, ampc_scalar_f32(el, 10)));
    ampc_value *in[2] = {c, x};
    const char *names[2] = {"then_branch", "else_branch"};
    ampc_graph *bodies[2] = {th, el};
    ampc_node *n = build_cf(g, AMPC_OP_IF, in, 2, names, bodies, 2, 1, NULL, 0, 1);
    ampc_output(g, n->outputs[0], "y");
    return g;
}

Test(flatten_control, an_if_computes_both_branches_and_selects) {
    ampc_graph *a = if_graph(), *b = if_graph();
    optimize(b, true);
    cr_assert_eq(t_count_op(b, AMPC_OP_IF), 0);
    cr_assert_eq(t_count_op(b, AMPC_OP_WHERE), 1);
    float xv[3] = {1, -2, 0.5f};
    for (uint8_t c = 0; c < 2; c++) {
        ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_BOOL, SHAPE(1), &c),
                             t_tensor(AMPC_DTYPE_F32, SHAPE(3), xv)};
        t_expect_same_outputs(a, b, in, 2, 0, 0);
    }
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}
