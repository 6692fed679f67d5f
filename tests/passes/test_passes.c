/*
 * test_passes.c — the passes and their pipeline.
 *
 *   golden::ir    every tests/passes/golden/NAME.ir: parse the file, run the passes its
 *                 `// RUN:` line names (verifying after each), print, match the CHECK lines
 *   check::*      the CHECK matcher itself fails when it should
 *   dce/cse/fold  direct unit tests: what changes, the changed flag, idempotence, values
 *   pipeline::*   options: disable, dump_after, verify, trace; unknown names; the registry
 */
#define _POSIX_C_SOURCE 200809L /* glob */

#include "support.h"

#include <criterion/parameterized.h>

#include "check.h"
#include "passes/passes.h"

#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_GLOB AMPC_SOURCE_DIR "/tests/passes/golden/*.ir"

static ampc_graph *parse_text(const char *text) {
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = ampc_graph_parse(text, strlen(text), &g, &err);
    cr_assert_eq(st, AMPC_OK, "parse failed: %s", err);
    return g;
}

/* Runs one pass directly, asserting success and a valid graph; returns the changed flag. */
static bool run_pass(ampc_graph *g, ampc_pass_fn pass) {
    bool changed = !false;
    cr_assert_eq(pass(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_verify(g), AMPC_OK, "invalid after the pass:\n%s",
                 ampc_graph_errors(g));
    return changed;
}

/* Runs fold-transpose on `text` (input %x of shape x_shape): the IR then holds each line of
 * `want` (the first one the Relu reading %x), computes what the model did for x = i % 7 - 3, and
 * a second run changes nothing. */
static void folds_to(const char *text, ampc_shape x_shape, const char *const want[2]) {
    ampc_graph *g = parse_text(text), *ref = parse_text(text);
    cr_assert(run_pass(g, ampc_pass_fold_transpose));
    char *ir = ampc_graph_to_text(g, true);
    for (int i = 0; i < 2; i++) cr_assert(strstr(ir, want[i]), "no '%s' in:\n%s", want[i], ir);
    free(ir);
    const int64_t count = ampc_shape_numel(&x_shape);
    float *xv = malloc((size_t)count * sizeof *xv);
    for (int64_t i = 0; i < count; i++) xv[i] = (float)(i % 7) - 3;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, x_shape, xv);
    t_expect_same_outputs(ref, g, &in, 1, 0, 0);
    cr_assert_not(run_pass(g, ampc_pass_fold_transpose), "a second run changes nothing");
    free(xv);
    ampc_graph_destroy(g);
    ampc_graph_destroy(ref);
}

/* Transpose(Transpose(x)): cancelling permutations vanish (the reader reads x), others become
 * one Transpose of x with the composed permutation; the results are the same. */
Test(passes, fold_transpose_composes_and_cancels) {
    static const char *const want[2] = {
        "%r : f32[2,3,4,5] = Relu(%x)",
        "%c : f32[4,2,5,3] = Transpose(%x) {perm = [2, 0, 3, 1]} @\"swap\""};
    folds_to("graph \"g\" {\n"
             "  input %x : f32[2,3,4,5]\n"
             "  %a : f32[2,4,5,3] = Transpose(%x) {perm = [0, 2, 3, 1]} @\"to_nhwc\"\n"
             "  %b : f32[2,3,4,5] = Transpose(%a) {perm = [0, 3, 1, 2]} @\"to_nchw\"\n"
             "  %r : f32[2,3,4,5] = Relu(%b) @\"r\"\n"
             "  %c : f32[4,2,5,3] = Transpose(%a) {perm = [1, 0, 2, 3]} @\"swap\"\n"
             "  output %r\n"
             "  output %c\n"
             "}\n",
             SHAPE(2, 3, 4, 5), want);
}

/* A permutation with negative entries (counted from the end, as inference reads them) composes
 * like its positive form: [-1, 0, 1] is [2, 0, 1], which [1, -1, 0] ([1, 2, 0]) undoes. */
Test(passes, fold_transpose_reads_negative_entries_from_the_end) {
    static const char *const want[2] = {
        "%r : f32[2,3,4] = Relu(%x)",
        "%c : f32[3,2,4] = Transpose(%x) {perm = [1, 0, 2]} @\"other\""};
    folds_to("graph \"g\" {\n"
             "  input %x : f32[2,3,4]\n"
             "  %a : f32[4,2,3] = Transpose(%x) {perm = [-1, 0, 1]} @\"last_first\"\n"
             "  %b : f32[2,3,4] = Transpose(%a) {perm = [1, -1, 0]} @\"back\"\n"
             "  %c : f32[3,2,4] = Transpose(%a) {perm = [-1, 1, 0]} @\"other\"\n"
             "  %r : f32[2,3,4] = Relu(%b) @\"r\"\n"
             "  output %r\n"
             "  output %c\n"
             "}\n",
             SHAPE(2, 3, 4), want);
}

/* A Pad by nothing and a Slice of everything with steps 1 are their input; a Pad that shifts
 * (pads 1 and -1) and a Slice that reverses keep the shape but stay. */
Test(passes, simplify_drops_pads_by_nothing_and_slices_of_everything) {
    static const char text[] =
        "graph \"g\" {\n"
        "  input %x : f32[2,3,4]\n"
        "  const %zero : i64[6] = [0, 0, 0, 0, 0, 0]\n"
        "  const %shift : i64[6] = [0, 1, 0, 0, -1, 0]\n"
        "  const %st : i64[1] = [0]\n"
        "  const %en : i64[1] = [9]\n"
        "  const %rst : i64[1] = [-1]\n"
        "  const %ren : i64[1] = [-10]\n"
        "  const %ax : i64[1] = [1]\n"
        "  const %one : i64[1] = [1]\n"
        "  const %back : i64[1] = [-1]\n"
        "  %p : f32[2,3,4] = Pad(%x, %zero) {mode = \"constant\"} @\"p\"\n"
        "  %a : f32[2,3,4] = Relu(%p) @\"a\"\n"
        "  %q : f32[2,3,4] = Pad(%x, %shift) {mode = \"constant\"} @\"q\"\n"
        "  %s : f32[2,3,4] = Slice(%x, %st, %en, %ax, %one) @\"s\"\n"
        "  %b : f32[2,3,4] = Relu(%s) @\"b\"\n"
        "  %r : f32[2,3,4] = Slice(%x, %rst, %ren, %ax, %back) @\"r\"\n"
        "  output %a\n"
        "  output %q\n"
        "  output %b\n"
        "  output %r\n"
        "}\n";
    ampc_graph *g = parse_text(text), *ref = parse_text(text);
    cr_assert(run_pass(g, ampc_pass_simplify));
    cr_assert_eq(t_count_op(g, AMPC_OP_PAD), 1, "the shifting Pad stays");
    cr_assert_eq(t_count_op(g, AMPC_OP_SLICE), 1, "the reversing Slice stays");
    char *ir = ampc_graph_to_text(g, true);
    cr_assert(strstr(ir, "%a : f32[2,3,4] = Relu(%x)"), "%s", ir);
    cr_assert(strstr(ir, "%b : f32[2,3,4] = Relu(%x)"), "%s", ir);
    free(ir);
    float xv[24];
    for (int i = 0; i < 24; i++) xv[i] = (float)(i % 5) - 2;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3, 4), xv);
    t_expect_same_outputs(ref, g, &in, 1, 0, 0);
    cr_assert_not(run_pass(g, ampc_pass_simplify), "a second run changes nothing");
    ampc_graph_destroy(g);
    ampc_graph_destroy(ref);
}

/* torch.roll as exported, a Concat of two Slices of one tensor along its axis, is a Gather of
 * the rolled indices; a Concat of Slices of two tensors stays. */
Test(passes, simplify_makes_a_roll_one_gather) {
    static const char text[] =
        "graph \"g\" {\n"
        "  input %x : f32[2,5,3]\n"
        "  input %w : f32[2,5,3]\n"
        "  const %m2 : i64[1] = [-2]\n"
        "  const %big : i64[1] = [100]\n"
        "  const %zero : i64[1] = [0]\n"
        "  const %ax : i64[1] = [1]\n"
        "  %a : f32[2,2,3] = Slice(%x, %m2, %big, %ax) @\"tail\"\n"
        "  %b : f32[2,3,3] = Slice(%x, %zero, %m2, %ax) @\"head\"\n"
        "  %r : f32[2,5,3] = Concat(%a, %b) {axis = 1} @\"roll\"\n"
        "  %c : f32[2,2,3] = Slice(%w, %m2, %big, %ax) @\"other\"\n"
        "  %d : f32[2,3,3] = Slice(%x, %zero, %m2, %ax) @\"head2\"\n"
        "  %e : f32[2,5,3] = Concat(%c, %d) {axis = 1} @\"mixed\"\n"
        "  output %r\n"
        "  output %e\n"
        "}\n";
    ampc_graph *g = parse_text(text), *ref = parse_text(text);
    cr_assert(run_pass(g, ampc_pass_simplify));
    cr_assert_eq(t_count_op(g, AMPC_OP_GATHER), 1);
    cr_assert_eq(t_count_op(g, AMPC_OP_CONCAT), 1, "the Concat of two tensors' Slices stays");
    char *ir = ampc_graph_to_text(g, true);
    cr_assert(strstr(ir, "%r : f32[2,5,3] = Gather(%x, "), "%s", ir);
    free(ir);
    float xv[30], wv[30];
    for (int i = 0; i < 30; i++) xv[i] = (float)i, wv[i] = (float)-i;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(2, 5, 3), xv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(2, 5, 3), wv)};
    t_expect_same_outputs(ref, g, in, 2, 0, 0);
    ampc_graph_destroy(g);
    ampc_graph_destroy(ref);
}

/* ampc_pass_view_step: a value seen back through Transpose, Reshape, Split and a one-index
 * Gather, each step checked against the elements the reference evaluator puts there; the walk
 * stops where one of the view's dims would run across a merged dim of a transposed tensor. */
Test(passes, views_trace_through_reindexing_ops_and_stop_where_strides_break) {
    static const char text[] =
        "graph \"g\" {\n"
        "  input %z : f32[3,2,4]\n"
        "  const %one : i64[] = [1]\n"
        "  const %six : i64[2] = [6, 4]\n"
        "  const %halves : i64[2] = [2, 2]\n"
        "  %x : f32[2,3,4] = Transpose(%z) {perm = [1, 0, 2]} @\"t0\"\n"
        "  %c : f32[6,4] = Reshape(%x, %six) @\"r\"\n"
        "  %s0 : f32[6,2], %s1 : f32[6,2] = Split(%c, %halves) {axis = 1} @\"sp\"\n"
        "  %y : f32[2,6] = Transpose(%s1) {perm = [1, 0]} @\"t1\"\n"
        "  %w : f32[6] = Gather(%y, %one) {axis = 0} @\"g\"\n"
        "  output %w\n"
        "  output %x\n"
        "  output %s0\n"
        "}\n";
    ampc_graph *g = parse_text(text);
    ampc_value *w = NULL, *x = NULL;
    for (int32_t i = 0; i < g->n_values; i++) {
        if (!strcmp(g->values[i]->name, "w")) w = g->values[i];
        if (!strcmp(g->values[i]->name, "x")) x = g->values[i];
    }
    ampc_pass_view v;
    ampc_pass_view_init(&v, w);
    int32_t steps = 0;
    while (ampc_pass_view_step(&v, 1, w->shape.dims)) steps++;
    /* w[i] = y[1, i] = s1[i, 1] = c[i, 3] = x flat 4 i + 3: Gather, Transpose, Split, Reshape;
     * then x's dims (2, 3) read as one dim of 6 by stride 4, which no stride of z is: it stops */
    cr_assert_eq(steps, 4);
    cr_assert_eq(v.src, x);
    cr_assert_eq(v.off, 3);
    cr_assert_eq(v.st[0], 4);
    float zv[24];
    for (int i = 0; i < 24; i++) zv[i] = (float)i;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3, 2, 4), zv);
    ampc_tensor outs[3] = {{0}};
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, outs, 3), AMPC_OK, "%s", ampc_graph_errors(g));
    for (int64_t i = 0; i < 6; i++)
        cr_assert_eq(((float *)outs[0].data)[i], ((float *)outs[1].data)[v.off + i * v.st[0]],
                     "element %lld", (long long)i);
    for (int32_t i = 0; i < 3; i++) free(outs[i].data);
    ampc_graph_destroy(g);
}

/* A Concat whose other inputs are empty (a cache of past keys, empty without one) is its one
 * non-empty input: simplify removes it and its reader reads that input; the results are the
 * same. A Concat of two non-empty inputs stays. */
Test(passes, simplify_drops_a_concat_of_one_nonempty_input) {
    static const char text[] =
        "graph \"g\" {\n"
        "  input %k : f32[1,2,3,4]\n"
        "  input %j : f32[1,2,3,4]\n"
        "  const %past : f32[1,2,0,4] = []\n"
        "  %c : f32[1,2,3,4] = Concat(%past, %k) {axis = 2} @\"cache\"\n"
        "  %r : f32[1,2,3,4] = Relu(%c) @\"r\"\n"
        "  %d : f32[1,2,6,4] = Concat(%k, %j) {axis = 2} @\"both\"\n"
        "  output %r\n"
        "  output %d\n"
        "}\n";
    ampc_graph *g = parse_text(text), *ref = parse_text(text);
    bool changed = run_pass(g, ampc_pass_simplify);
    cr_assert(changed);
    cr_assert_eq(t_count_op(g, AMPC_OP_CONCAT), 1, "the Concat of two inputs stays");
    char *ir = ampc_graph_to_text(g, true);
    cr_assert(strstr(ir, "%r : f32[1,2,3,4] = Relu(%k)"), "%s", ir);
    free(ir);
    float kv[24], jv[24];
    for (int i = 0; i < 24; i++) kv[i] = (float)(i % 7) - 3, jv[i] = (float)i / 8;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(1, 2, 3, 4), kv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(1, 2, 3, 4), jv)};
    t_expect_same_outputs(ref, g, in, 2, 0, 0);
    cr_assert_not(run_pass(g, ampc_pass_simplify), "a second run changes nothing");
    ampc_graph_destroy(g);
    ampc_graph_destroy(ref);
}

/* Contents of a temporary file written by the pipeline. */
static char *file_text(FILE *f) {
    long n = ftell(f);
    rewind(f);
    char *s = calloc(1, (size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

/* ---- golden files --------------------------------------------------------------------------- */

typedef struct golden_file {
    char path[512];
} golden_file;

static void free_golden(struct criterion_test_params *p) { cr_free(p->params); }

ParameterizedTestParameters(golden, ir) {
    glob_t gl;
    size_t n = glob(GOLDEN_GLOB, 0, NULL, &gl) == 0 ? gl.gl_pathc : 0;
    golden_file *files = cr_malloc((n ? n : 1) * sizeof *files);
    for (size_t i = 0; i < n; i++)
        snprintf(files[i].path, sizeof files[i].path, "%s", gl.gl_pathv[i]);
    if (n) globfree(&gl);
    return cr_make_param_array(golden_file, files, n, free_golden);
}

ParameterizedTest(golden_file *f, golden, ir) {
    const char *name = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
    char *spec = t_read_text(f->path);
    const char *run = strstr(spec, "// RUN:");
    cr_assert_not_null(run, "%s: no '// RUN: <pass> ...' line", name);
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = ampc_graph_parse(spec, strlen(spec), &g, &err);
    cr_assert_eq(st, AMPC_OK, "%s: the input IR does not parse: %s", name, err);

    /* The passes named after RUN:, separated by blanks or commas, in order. */
    ampc_pipeline_options o = {.verify = true};
    const char *p = run + strlen("// RUN:");
    int passes = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p || *p == '\n' || *p == '\r') break;
        char pass[64];
        size_t k = 0;
        while (*p && !strchr(" \t,\r\n", *p) && k + 1 < sizeof pass) pass[k++] = *p++;
        pass[k] = 0;
        st = ampc_pipeline_run_pass(g, pass, &o);
        cr_assert_eq(st, AMPC_OK, "%s: pass %s failed:\n%s", name, pass, ampc_graph_errors(g));
        passes++;
    }
    cr_assert_gt(passes, 0, "%s: the RUN line names no pass", name);

    char *out = ampc_graph_to_text(g, true);
    t_expect_check(spec, out, name);
    /* What a pass prints must read back (its text is the next pass's golden input). */
    ampc_graph *h = parse_text(out);
    char *again = ampc_graph_to_text(h, true);
    cr_assert_str_eq(again, out, "%s: the output does not round-trip", name);
    free(again);
    free(out);
    free(spec);
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

Test(golden, the_directory_holds_the_golden_files) {
    glob_t gl;
    cr_assert_eq(glob(GOLDEN_GLOB, 0, NULL, &gl), 0, "no golden files match %s", GOLDEN_GLOB);
    cr_assert_geq(gl.gl_pathc, 8, "expected at least 8 golden files, found %zu", gl.gl_pathc);
    globfree(&gl);
}

/* ---- the matcher ---------------------------------------------------------------------------- */

static void expect_check_fails(const char *spec, const char *text, const char *msg) {
    char *got = t_check_match(spec, text, "t.ir");
    cr_assert_not_null(got, "the matcher accepted:\n%s\nagainst:\n%s", spec, text);
    cr_assert_str_eq(got, msg);
    free(got);
}

Test(check, matches_in_order_next_line_and_absence) {
    const char *text = "alpha beta\ngamma\ndelta\nepsilon\n";
    char *r = t_check_match("// CHECK: beta\n// CHECK-NEXT: gamma\n// CHECK-NOT: zeta\n"
                            "//   CHECK: epsilon\n",
                            text, "t.ir");
    cr_assert_null(r, "%s", r);
    /* Two matches on one line, in order. */
    r = t_check_match("x\n// CHECK: alpha\n// CHECK: beta\n", text, "t.ir");
    cr_assert_null(r, "%s", r);
}

Test(check, reports_each_kind_of_failure) {
    const char *text = "alpha beta\ngamma\ndelta\nepsilon\n";
    expect_check_fails("// CHECK: gamma\n// CHECK: beta\n", text,
                       "t.ir:2: CHECK: 'beta' not found in the output after line 2");
    expect_check_fails("// CHECK: alpha\n// CHECK-NEXT: delta\n", text,
                       "t.ir:2: CHECK-NEXT: 'delta' not found on output line 2, which is 'gamma'");
    expect_check_fails("// CHECK: alpha\n// CHECK-NOT: gamma\n// CHECK: delta\n", text,
                       "t.ir:2: CHECK-NOT: 'gamma' found on output line 2");
    expect_check_fails("// CHECK: delta\n// CHECK-NOT: eps\n", text,
                       "t.ir:2: CHECK-NOT: 'eps' found on output line 4");
    expect_check_fails("// CHECK-NEXT: alpha\n", text,
                       "t.ir:1: CHECK-NEXT: 'alpha' has no previous match to follow");
    expect_check_fails("// CHECK-NOT: zeta\n", text,
                       "t.ir: no CHECK or CHECK-NEXT directive: the test would check nothing");
    expect_check_fails("// CHECK-SAME: x\n", text,
                       "t.ir:1: unknown directive 'CHECK-SAME' (expected CHECK:, CHECK-NEXT: or "
                       "CHECK-NOT:)");
}

/* ---- dce ------------------------------------------------------------------------------------ */

Test(dce, removes_dead_nodes_transitively_and_is_idempotent) {
    ampc_graph *g = ampc_graph_create("dce");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(3));
    double k[3] = {1, 2, 3};
    ampc_value *c = t_const_f32(g, SHAPE(3), k);
    ampc_value *dead = ampc_exp(g, ampc_add(g, x, c)); /* two dead nodes, one dead constant */
    (void)dead;
    ampc_value *y = ampc_relu(g, x);
    ampc_output(g, y, "y");
    cr_assert_eq(ampc_graph_node_count(g), 3);
    cr_assert(run_pass(g, ampc_pass_dce));
    cr_assert_eq(g->n_nodes, 1);
    cr_assert_eq(g->nodes[0]->op, AMPC_OP_RELU);
    cr_assert_eq(g->n_values, 2); /* x and y: the constant and dead results are gone */
    cr_assert_null(ampc_ir_value_find(g, "c"));
    cr_assert_not(run_pass(g, ampc_pass_dce));
    /* The graph still computes y. */
    float xv[3] = {-1, 0, 2};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3), xv), out;
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, &out, 1), AMPC_OK, "%s", ampc_graph_errors(g));
    double want[3] = {0, 0, 2};
    t_expect_close(&out, SHAPE(3), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
}

Test(dce, keeps_outputs_that_are_inputs_or_constants_and_reports_no_change) {
    ampc_graph *g = ampc_graph_create("keep");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    double k[2] = {1, 2};
    ampc_output(g, x, NULL);
    ampc_output(g, t_const_f32(g, SHAPE(2), k), "k");
    cr_assert_not(run_pass(g, ampc_pass_dce));
    cr_assert_eq(g->n_values, 2);
    ampc_graph_destroy(g);
}

Test(dce, a_multi_output_node_lives_while_one_output_is_used) {
    ampc_graph *g = ampc_graph_create("multi");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *dr[2];
    ampc_op_multi(g, "Dropout", &x, 1, NULL, 0, dr, 2);
    ampc_output(g, dr[1], "mask");
    cr_assert_not(run_pass(g, ampc_pass_dce));
    cr_assert_eq(ampc_graph_node_count(g), 1);
    ampc_graph_destroy(g);
}

/* ---- cse ------------------------------------------------------------------------------------ */

Test(cse, merges_identical_nodes_and_cascades) {
    ampc_graph *g = ampc_graph_create("cse");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = t_input(g, "y", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *a = ampc_mul(g, x, y), *b = ampc_mul(g, y, x); /* commutative: one value */
    ampc_value *ea = ampc_exp(g, a), *eb = ampc_exp(g, b);     /* then these are one too */
    ampc_value *s = ampc_sub(g, ea, eb);
    ampc_output(g, s, "s");
    cr_assert(run_pass(g, ampc_pass_cse));
    cr_assert_eq(ampc_graph_node_count(g), 3);
    cr_assert_eq(g->n_nodes, 3); /* compacted */
    const ampc_node *sub = s->producer;
    cr_assert_eq(sub->inputs[0], ea);
    cr_assert_eq(sub->inputs[1], ea);
    cr_assert_eq(ea->producer->inputs[0], a);
    cr_assert_null(ampc_ir_value_find(g, "Mul_1"));
    cr_assert_not(run_pass(g, ampc_pass_cse));
    ampc_graph_destroy(g);
}

Test(cse, keeps_what_differs) {
    ampc_graph *g = ampc_graph_create("differ");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = t_input(g, "y", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *in_xy[2] = {x, y}, *in_yx[2] = {y, x};
    float nz = -0.0f, pz = 0.0f;
    ampc_attr_arg a0 = AMPC_ATTR_F("alpha", pz), a1 = AMPC_ATTR_F("alpha", nz);
    ampc_value *vals[] = {
        ampc_op(g, "Sub", in_xy, 2, NULL, 0), /* not commutative: */
        ampc_op(g, "Sub", in_yx, 2, NULL, 0), /* a different value */
        ampc_op(g, "Relu", &x, 1, &a0, 1),    /* 0.0 and -0.0 differ in bits */
        ampc_op(g, "Relu", &x, 1, &a1, 1),
        ampc_cast(g, x, AMPC_DTYPE_F16), /* different attribute values */
        ampc_cast(g, x, AMPC_DTYPE_F64),
    };
    ampc_value *dr[2];
    ampc_op_multi(g, "Dropout", &x, 1, NULL, 0, dr, 2);
    ampc_value *d1 = ampc_op(g, "Dropout", &x, 1, NULL, 0); /* one output, not two */
    for (int i = 0; i < AMPC_ARRAY_LEN(vals); i++) ampc_output(g, vals[i], NULL);
    ampc_output(g, ampc_add(g, dr[0], d1), "dd");
    cr_assert_not(run_pass(g, ampc_pass_cse));
    cr_assert_eq(ampc_graph_node_count(g), 9);
    ampc_graph_destroy(g);
}

Test(cse, graph_outputs_keep_their_names) {
    ampc_graph *g = ampc_graph_create("outs");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *r1 = ampc_relu(g, x), *r2 = ampc_relu(g, x), *r3 = ampc_relu(g, x);
    ampc_output(g, r1, "first");
    ampc_output(g, r2, "second");
    ampc_output(g, ampc_sigmoid(g, r3), "third");
    cr_assert(run_pass(g, ampc_pass_cse)); /* r3 merges into r1; r2 is an output and stays */
    cr_assert_eq(ampc_graph_node_count(g), 3);
    cr_assert_str_eq(g->outputs[1]->name, "second");
    cr_assert_eq(g->outputs[2]->producer->inputs[0], r1);
    cr_assert_not(run_pass(g, ampc_pass_cse));
    ampc_graph_destroy(g);
}

Test(cse, merges_identical_constants_but_not_large_ones) {
    ampc_graph *g = ampc_graph_create("consts");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    int64_t k[2] = {3, 4};
    ampc_value *c1 = t_const_i64(g, SHAPE(2), k), *c2 = t_const_i64(g, SHAPE(2), k);
    ampc_output(g, ampc_cast(g, ampc_add(g, c1, c2), AMPC_DTYPE_F32), "y");
    /* 1 MiB + 4 bytes of f32 each: above the cap, so they stay two constants. */
    int64_t big = (1 << 18) + 1;
    float *zeros = calloc((size_t)big, sizeof *zeros);
    ampc_value *b1 = ampc_constant(g, "b1", AMPC_DTYPE_F32, 1, &big, zeros);
    ampc_value *b2 = ampc_constant(g, "b2", AMPC_DTYPE_F32, 1, &big, zeros);
    free(zeros);
    ampc_output(g, ampc_add(g, b1, b2), "z");
    ampc_output(g, x, NULL);
    cr_assert(run_pass(g, ampc_pass_cse));
    cr_assert_null(ampc_ir_value_find(g, c2->name)); /* merged into c1 and dropped */
    const ampc_node *add = ampc_ir_value_find(g, "Add_0")->producer;
    cr_assert_eq(add->inputs[0], c1);
    cr_assert_eq(add->inputs[1], c1);
    cr_assert_not_null(ampc_ir_value_find(g, "b2"));
    cr_assert_not(run_pass(g, ampc_pass_cse));
    ampc_graph_destroy(g);
}

Test(cse, is_linear_on_a_long_chain_of_duplicates) {
    /* 20000 pairs of identical nodes: a quadratic pass would take minutes under the sanitizers. */
    ampc_graph *g = ampc_graph_create("long");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(1));
    ampc_value *a = x, *b = x;
    for (int i = 0; i < 20000; i++) {
        a = ampc_sigmoid(g, a);
        b = ampc_sigmoid(g, b);
    }
    ampc_output(g, ampc_add(g, a, b), "y");
    cr_assert(run_pass(g, ampc_pass_cse));
    cr_assert_eq(ampc_graph_node_count(g), 20001);
    ampc_graph_destroy(g);
}

/* ---- fold ----------------------------------------------------------------------------------- */

Test(fold, folds_constant_chains_and_keeps_output_names) {
    ampc_graph *g = ampc_graph_create("fold");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    double a[2] = {1, 4}, b[2] = {2, 5};
    ampc_value *ca = t_const_f32(g, SHAPE(2), a), *cb = t_const_f32(g, SHAPE(2), b);
    ampc_value *s = ampc_sqrt(g, ampc_mul(g, ca, cb)); /* sqrt([2, 20]) */
    ampc_output(g, s, "root");
    ampc_output(g, ampc_add(g, x, s), "y");
    cr_assert(run_pass(g, ampc_pass_fold));
    cr_assert_eq(ampc_graph_node_count(g), 1);
    cr_assert_null(s->producer);
    cr_assert(s->flags & AMPC_VALUE_OUTPUT);
    cr_assert_str_eq(g->outputs[0]->name, "root");
    cr_assert_eq(((float *)s->data)[0], (float)sqrt(2.0));
    cr_assert_eq(((float *)s->data)[1], (float)sqrt(20.0));
    cr_assert_null(ampc_ir_value_find(g, ca->name)); /* no longer used: dropped */
    cr_assert_not(run_pass(g, ampc_pass_fold));
    ampc_graph_destroy(g);
}

Test(fold, evaluates_nodes_too_large_for_eager_folding) {
    /* 300 x 300 = 90000 elements: above the builder's eager limit, so the pass computes it. */
    ampc_graph *g = ampc_graph_create("big");
    int64_t dims[2] = {300, 300};
    int32_t *a = malloc(90000 * sizeof *a), *b = malloc(90000 * sizeof *b);
    for (int i = 0; i < 90000; i++) a[i] = i, b[i] = 3 * i;
    ampc_value *ca = ampc_constant(g, "a", AMPC_DTYPE_I32, 2, dims, a);
    ampc_value *cb = ampc_constant(g, "b", AMPC_DTYPE_I32, 2, dims, b);
    free(a);
    free(b);
    ampc_value *d = ampc_sub(g, cb, ca);
    cr_assert_null(d->data);
    ampc_output(g, d, "d");
    cr_assert(run_pass(g, ampc_pass_fold));
    cr_assert_eq(ampc_graph_node_count(g), 0);
    const int32_t *v = d->data;
    cr_assert_not_null(v);
    for (int i = 0; i < 90000; i++) cr_assert_eq(v[i], 2 * i, "element %d: got %d", i, v[i]);
    ampc_graph_destroy(g);
}

Test(fold, leaves_nodes_with_runtime_inputs_or_defaults_alone) {
    ampc_graph *g = parse_text("graph \"g\" {\n"
                               "  input %x : f32[2] = [1, 2]\n" /* a default: not a constant */
                               "  const %k : f32[2] = [3, 4]\n"
                               "  %y : f32[2] = Add(%x, %k) @\"add\"\n"
                               "  output %y\n"
                               "}\n");
    cr_assert_not(run_pass(g, ampc_pass_fold));
    cr_assert_eq(ampc_graph_node_count(g), 1);
    ampc_graph_destroy(g);
}

/* ---- the pipeline --------------------------------------------------------------------------- */

static ampc_graph *foldable_graph(void) {
    return parse_text("graph \"p\" {\n"
                      "  input %x : f32[2]\n"
                      "  const %a : f32[2] = [1, 2]\n"
                      "  const %b : f32[2] = [1, 2]\n"
                      "  %n : f32[2] = Neg(%a) @\"neg\"\n"
                      "  %m1 : f32[2] = Mul(%x, %b) @\"m1\"\n"
                      "  %m2 : f32[2] = Mul(%x, %a) @\"m2\"\n"
                      "  %s : f32[2] = Add(%m1, %m2) @\"s\"\n"
                      "  %dead : f32[2] = Exp(%s) @\"dead\"\n"
                      "  output %s\n"
                      "}\n");
}

Test(pipeline, runs_every_pass_and_traces_each) {
    ampc_graph *g = foldable_graph();
    FILE *trace = tmpfile();
    ampc_pipeline_options o = {.verify = true, .trace = trace};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    char *t = file_text(trace);
    fclose(trace);
    /* One line a pass, in order: name, changed, milliseconds. */
    char *l1 = strstr(t, "pass fold         changed yes "),
         *l2 = strstr(t, "pass cse          changed yes ");
    char *l3 = strstr(t, "pass dce          changed yes ");
    cr_assert(l1 && l2 && l3 && l1 < l2 && l2 < l3, "trace:\n%s", t);
    cr_assert(strstr(l1, " ms\n") < l2);
    int lines = 0;
    for (char *c = t; *c; c++) lines += *c == '\n';
    cr_assert(strstr(t, "pass plan-memory  changed yes "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass precision    changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass sparsity     changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fuse-gelu    changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fuse-conv    changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fuse-matmul  changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fuse-attention changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fuse-softmax changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fold-scale   changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass layout       changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fold-transpose changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass row-gather   changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass partition    changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass partition-data changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass partition-pipeline changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fuse-elementwise changed "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass simplify     changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass fuse-norm    changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass flatten-control changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass onnx-attention changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass onnx-rotary  changed no "), "trace:\n%s", t);
    cr_assert(strstr(t, "pass onnx-deform-conv changed no "), "trace:\n%s", t);
    cr_assert_eq(lines, 26, "trace:\n%s", t);
    free(t);
    char *text = ampc_graph_to_text(g, true);
    cr_assert_str_eq(text, "graph \"p\" {\n"
                           "  input %x : f32[2]\n"
                           "  const %a : f32[2] = [1, 2]\n"
                           "  %m1 : f32[2] = Mul(%x, %a) @\"m1\"\n"
                           "  %s : f32[2] = Add(%m1, %m1) @\"s\"\n"
                           "  output %s\n"
                           "}\n");
    free(text);
    /* Optimising an optimised graph changes nothing. */
    trace = tmpfile();
    o.trace = trace;
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK);
    t = file_text(trace);
    fclose(trace);
    cr_assert(strstr(t, "fold         changed no ") && strstr(t, "cse          changed no ") &&
                  strstr(t, "dce          changed no "),
              "trace:\n%s", t);
    free(t);
    ampc_graph_destroy(g);
}

Test(pipeline, disabled_passes_are_skipped_and_dump_after_writes_the_ir) {
    ampc_graph *g = foldable_graph();
    FILE *trace = tmpfile(), *dump = tmpfile();
    const char *off[1] = {"cse"};
    ampc_pipeline_options o = {.disable = off,
                               .n_disable = 1,
                               .dump_after = "fold",
                               .dump_file = dump,
                               .verify = true,
                               .trace = trace};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    char *t = file_text(trace), *d = file_text(dump);
    fclose(trace);
    fclose(dump);
    cr_assert(strstr(t, "pass cse          disabled\n"), "trace:\n%s", t);
    cr_assert_str_eq(d, "// IR after pass 'fold'\n"
                        "graph \"p\" {\n"
                        "  input %x : f32[2]\n"
                        "  const %a : f32[2] = [1, 2]\n"
                        "  const %b : f32[2] = [1, 2]\n"
                        "  %m1 : f32[2] = Mul(%x, %b) @\"m1\"\n"
                        "  %m2 : f32[2] = Mul(%x, %a) @\"m2\"\n"
                        "  %s : f32[2] = Add(%m1, %m2) @\"s\"\n"
                        "  %dead : f32[2] = Exp(%s) @\"dead\"\n"
                        "  output %s\n"
                        "}\n");
    cr_assert_eq(ampc_graph_node_count(g), 3); /* no CSE: both Muls stay; DCE took Exp */
    free(t);
    free(d);
    ampc_graph_destroy(g);
}

Test(pipeline, unknown_pass_names_are_errors_listing_the_valid_ones) {
    ampc_graph *g = foldable_graph();
    const char *off[2] = {"dce", "nope"};
    ampc_pipeline_options o = {.disable = off, .n_disable = 2};
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_E_INVALID_ARG);
    cr_assert_str_eq(ampc_graph_errors(g), "unknown pass 'nope' in the list of passes to disable; "
                                           "the passes are: flatten-control, partition-data, onnx-attention, onnx-rotary, onnx-deform-conv, fold, cse, simplify, fuse-norm, precision, sparsity, fuse-gelu, fuse-softmax, partition, fuse-conv, fuse-attention, fuse-qkv, fuse-matmul, fold-scale, layout, fold-transpose, row-gather, partition-pipeline, dce, fuse-elementwise, plan-memory");
    cr_assert_eq(ampc_graph_node_count(g), 5); /* nothing ran */
    ampc_graph_destroy(g);

    g = foldable_graph();
    ampc_pipeline_options o2 = {.dump_after = "fuse"};
    cr_assert_eq(ampc_graph_optimize(g, &o2), AMPC_E_INVALID_ARG);
    cr_assert_str_eq(ampc_graph_errors(g), "unknown pass 'fuse' to dump the IR after; the passes "
                                           "are: flatten-control, partition-data, onnx-attention, onnx-rotary, onnx-deform-conv, fold, cse, simplify, fuse-norm, precision, sparsity, fuse-gelu, fuse-softmax, partition, fuse-conv, fuse-attention, fuse-qkv, fuse-matmul, fold-scale, layout, fold-transpose, row-gather, partition-pipeline, dce, fuse-elementwise, plan-memory");
    ampc_graph_clear_errors(g);
    cr_assert_eq(ampc_pipeline_run_pass(g, "cse2", &o2), AMPC_E_INVALID_ARG);
    t_expect_diag(g, "unknown pass 'cse2' to run; the passes are: flatten-control, partition-data, onnx-attention, onnx-rotary, onnx-deform-conv, fold, cse, simplify, fuse-norm, precision, sparsity, fuse-gelu, fuse-softmax, partition, fuse-conv, fuse-attention, fuse-qkv, fuse-matmul, fold-scale, layout, fold-transpose, row-gather, partition-pipeline, dce, fuse-elementwise, plan-memory");
    ampc_graph_destroy(g);
}

Test(pipeline, verifies_the_input_graph_and_refuses_graphs_with_errors) {
    ampc_graph *g = foldable_graph();
    g->nodes[3]->inputs[0] = g->nodes[4]->outputs[0]; /* s reads dead: a cycle of sorts */
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_E_VERIFY);
    t_expect_diag(g, "node 3 (Add 's'): input 0 'dead' is used before it is defined (its producer "
                     "is node 4, later in the order)");
    t_expect_diag(g, "the graph is invalid before the first pass (verifier messages above)");
    ampc_graph_destroy(g);

    g = ampc_graph_create("bad");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = t_input(g, "y", AMPC_DTYPE_F32, SHAPE(3));
    ampc_add(g, x, y);
    cr_assert_eq(ampc_graph_optimize(g, NULL), AMPC_E_SHAPE); /* the builder's error stands */
    cr_assert_eq(g->diag.n, 1);
    cr_assert_eq(ampc_graph_optimize(NULL, NULL), AMPC_E_INVALID_ARG);
    ampc_graph_destroy(g);
}

Test(pipeline, the_registry_lists_and_finds_passes) {
    int32_t n;
    const ampc_pass_info *list = ampc_pass_list(&n);
    cr_assert_eq(n, 26);
    const char *names[26] = {"flatten-control", "partition-data", "onnx-attention", "onnx-rotary",
                             "onnx-deform-conv", "fold", "cse", "simplify", "fuse-norm", "precision", "sparsity", "fuse-gelu", "fuse-softmax",
                             "partition", "fuse-conv", "fuse-attention", "fuse-qkv", "fuse-matmul",
                             "fold-scale", "layout", "fold-transpose", "row-gather", "partition-pipeline", "dce",
                             "fuse-elementwise",
                             "plan-memory"};
    for (int i = 0; i < 26; i++) cr_assert_str_eq(list[i].name, names[i]);
    cr_assert_eq(ampc_pass_find("cse")->run, ampc_pass_cse);
    cr_assert_null(ampc_pass_find("CSE"));
    cr_assert_null(ampc_pass_find(NULL));
    FILE *f = tmpfile();
    ampc_pipeline_print(f);
    char *t = file_text(f);
    fclose(f);
    cr_assert_str_eq(t, "ampc pass pipeline (in order):\n"
                        "   1. flatten-control for a GPU build, write If, Loop and Scan nodes whose control flow is known when compiling "
                        "into the graph: unrolled loops and scans, a branch taken or both selected by Where\n"
                        "   2. partition-data with --gpus N --partition data, make the graph one GPU's share (B/N rows) of the batch; "
                        "with --partition pipeline, one micro-batch\n"
                        "   3. onnx-attention for a GPU build, make each ONNX Attention an "
                        "ampc.FusedAttention, with its mask, causal and window rules, key lengths "
                        "and present caches as nodes\n"
                        "   4. onnx-rotary  for a GPU build, write each ONNX RotaryEmbedding as "
                        "slices of its pairs, products with the cached angles and joins\n"
                        "   5. onnx-deform-conv for a GPU build, write each 2-D ONNX DeformConv as a "
                        "GridSample per offset group and a MatMul by the weights\n"
                        "   6. fold         evaluate nodes whose inputs are all constant into "
                        "constants\n"
                        "   7. cse          merge identical nodes and identical small constants\n"
                        "   8. simplify     drop Expands to their input's own shape, Concats of one "
                        "non-empty input, Pads by nothing and Slices of everything; a Gather of a "
                        "whole axis in order is a Reshape, a Concat of Slices of one tensor a "
                        "Gather\n"
                        "   9. fuse-norm    turn the RMS norm written out (x / Sqrt(ReduceMean(x^2) + eps)) into one "
                        "RMSNormalization\n"
                        "  10. precision    with --precision fp16|bf16, move f32 tensors to the "
                        "low type as the op table's policy says\n"
                        "  11. sparsity     with --sparsity verify|prune, mark (prune: make) 2:4 "
                        "sparse constant weights of matmuls/convs\n"
                        "  12. fuse-gelu    turn GELU written out with Erf (x * 0.5 * (1 + erf(x / "
                        "sqrt 2))) into one Gelu\n"
                        "  13. fuse-softmax turn Softmax guarded by Where(IsNaN(s), 0, s) into one "
                        "ampc.SafeSoftmax\n"
                        "  14. partition    with --gpus N --partition tensor, split matmul pairs "
                        "and attention (by heads) across the GPUs, one all-reduce each\n"
                        "  15. fuse-conv    fold a residual Add and a ReLU after a Conv into one "
                        "ampc.FusedConv\n"
                        "  16. fuse-attention turn MatMul(Q, K^T), scale, mask, softmax and "
                        "MatMul(., V) into one ampc.FusedAttention\n"
                        "  17. fuse-qkv     join the Q, K and V projections of an "
                        "ampc.FusedAttention into one MatMul it reads\n"
                        "  18. fuse-matmul  fold a bias Add, a residual Add and a ReLU after a "
                        "MatMul into one ampc.FusedMatMul\n"
                        "  19. fold-scale   fold a scalar product after a matmul with constant weights "
                        "into the weights\n"
                        "  20. layout       run 2-D f16/bf16 convolutions, "
                        "and what runs between them, channels-last (transposes where it changes; --layout nchw: off)\n"
                        "  21. fold-transpose make a Transpose of a Transpose one Transpose, or none "
                        "when they cancel\n"
                        "  22. row-gather   make a run of Transposes, Gathers and reshapes that keep the last "
                        "dim one Gather of rows (torch.roll and window partitions: one copy, or none where an "
                        "elementwise op reads it)\n"
                        "  23. partition-pipeline with --gpus N --partition pipeline, cut the graph into N stages "
                        "balanced by cost, one per GPU, with peer copies at the cuts\n"
                        "  24. dce          remove nodes that no graph output depends on\n"
                        "  25. fuse-elementwise compute chains of elementwise ops of one shape in one "
                        "kernel (values between them never stored)\n"
                        "  26. plan-memory  place constants in the weights blob and every other "
                         "value in the arena (liveness)\n");
    free(t);
}
