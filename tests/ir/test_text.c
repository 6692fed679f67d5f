/*
 * test_text.c — the textual IR: exact printed text, the round-trip property
 * print(parse(print(g))) == print(g) over graphs that cover every attribute kind, multi-output
 * nodes, absent optional inputs, odd names, every dtype in constants (bit-exact data) and empty and
 * scalar shapes; elision; hand-written text; and the parser's error messages (line:column, what
 * was expected, what was found).
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Prints g, parses the text, prints again: both texts must be identical. Returns the parsed graph
 * (the caller destroys it). */
static ampc_graph *roundtrip(ampc_graph *g) {
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "building failed:\n%s", ampc_graph_errors(g));
    char *a = ampc_graph_to_text(g, true), *err = NULL;
    ampc_graph *h = NULL;
    ampc_status st = ampc_graph_parse(a, strlen(a), &h, &err);
    cr_assert_eq(st, AMPC_OK, "parse failed (%s): %s\n%s", ampc_status_str(st), err, a);
    cr_assert_null(err);
    char *b = ampc_graph_to_text(h, true);
    cr_assert_str_eq(b, a, "round trip differs:\n--- first ---\n%s--- second ---\n%s", a, b);
    cr_assert_eq(ampc_graph_verify(h), AMPC_OK, "%s", ampc_graph_errors(h));
    free(a);
    free(b);
    return h;
}

/* Parses text that must fail with `status` and exactly `msg`. */
static void expect_parse_error(const char *text, ampc_status status, const char *msg) {
    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    ampc_status st = ampc_graph_parse(text, strlen(text), &g, &err);
    cr_assert_eq(st, status, "status %s, expected %s (message: %s)", ampc_status_str(st),
                 ampc_status_str(status), err ? err : "none");
    cr_assert_null(g);
    cr_assert_not_null(err);
    cr_assert_str_eq(err, msg);
    free(err);
}

static ampc_graph *parse_ok(const char *text) {
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = ampc_graph_parse(text, strlen(text), &g, &err);
    cr_assert_eq(st, AMPC_OK, "parse failed: %s", err);
    return g;
}

/* ---- printing ------------------------------------------------------------------------------- */

Test(text, prints_exact_text_of_a_small_graph) {
    ampc_graph *g = ampc_graph_create("affine");
    int64_t d3 = 3;
    float w[3] = {1, 0.5f, -2};
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *c = ampc_constant(g, "w", AMPC_DTYPE_F32, 1, &d3, w);
    ampc_output(g, ampc_relu(g, ampc_add(g, x, c)), "y");
    char *text = ampc_graph_to_text(g, true);
    cr_assert_str_eq(text, "graph \"affine\" {\n"
                           "  input %x : f32[2,3]\n"
                           "  const %w : f32[3] = [1, 0.5, -2]\n"
                           "  %Add_0 : f32[2,3] = Add(%x, %w) @\"Add_0\"\n"
                           "  %y : f32[2,3] = Relu(%Add_0) @\"Relu_1\"\n"
                           "  output %y\n"
                           "}\n");
    free(text);
    ampc_graph_destroy(g);
}

Test(text, graph_print_writes_the_same_text_to_a_file) {
    ampc_graph *g = ampc_graph_create("f");
    ampc_output(g, ampc_relu(g, t_input(g, "x", AMPC_DTYPE_F16, SHAPE(4))), "y");
    FILE *f = tmpfile();
    cr_assert_eq(ampc_graph_print(g, f, true), AMPC_OK);
    long n = ftell(f);
    rewind(f);
    char buf[512] = {0};
    cr_assert_eq(fread(buf, 1, sizeof buf - 1, f), (size_t)n);
    fclose(f);
    char *text = ampc_graph_to_text(g, true);
    cr_assert_str_eq(buf, text);
    free(text);
    cr_assert_eq(ampc_graph_print(NULL, stderr, true), AMPC_E_INVALID_ARG);
    cr_assert_null(ampc_graph_to_text(NULL, true));
    ampc_graph_destroy(g);
}

Test(text, every_attribute_kind_prints_and_round_trips) {
    ampc_graph *g = ampc_graph_create("attrs");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    int64_t ints[2] = {1, -2}, d2 = 2;
    float floats[3] = {1.5f, 2.0f, NAN}, tdata[2] = {0.25f, -1};
    const char *strs[2] = {"a", "b \"c\""};
    ampc_value *tv = ampc_constant(g, "tv", AMPC_DTYPE_F32, 1, &d2, tdata);
    ampc_attr_arg at[] = {
        AMPC_ATTR_I("i", -3),
        AMPC_ATTR_F("f", 2.0f),
        AMPC_ATTR_F("g", 0.1f),
        AMPC_ATTR_F("h", -1e-10f),
        AMPC_ATTR_F("inf", -INFINITY),
        AMPC_ATTR_S("s", "q\"\\\n\t\x01"),
        AMPC_ATTR_IS("is", ints, 2),
        AMPC_ATTR_FS("fs", floats, 3),
        {.name = "ss", .kind = AMPC_ATTR_STRINGS, .strings = strs, .n = 2},
        AMPC_ATTR_IS("ei", ints, 0),
        AMPC_ATTR_FS("ef", floats, 0),
        {.name = "es", .kind = AMPC_ATTR_STRINGS, .strings = strs, .n = 0},
        {.name = "t", .kind = AMPC_ATTR_TENSOR, .tensor = tv},
        AMPC_ATTR_S("odd name", ""),
    };
    ampc_output(g, ampc_op(g, "Relu", &x, 1, at, AMPC_ARRAY_LEN(at)), "y");
    char *text = ampc_graph_to_text(g, true);
    cr_assert(strstr(text, "  %y : f32[2] = Relu(%x) {i = -3, f = 2.0, g = 0.1, h = -1e-10, "
                           "inf = -inf, s = \"q\\\"\\\\\\n\\t\\x01\", is = [1, -2], "
                           "fs = [1.5, 2.0, nan], ss = [\"a\", \"b \\\"c\\\"\"], ei = ints[], "
                           "ef = floats[], es = strings[], t = tensor<f32[2]>[0.25, -1], "
                           "\"odd name\" = \"\"} @\"Relu_0\"\n"),
              "got:\n%s", text);
    ampc_graph *h = roundtrip(g);
    /* The attributes read back with their kinds and values. */
    const ampc_node *n = h->nodes[0];
    cr_assert_eq(n->n_attrs, AMPC_ARRAY_LEN(at));
    cr_assert_eq(ampc_ir_attr_find(n, "i")->kind, AMPC_ATTR_INT);
    cr_assert_eq(ampc_ir_attr_find(n, "i")->i, -3);
    cr_assert_eq(ampc_ir_attr_find(n, "f")->kind, AMPC_ATTR_FLOAT);
    cr_assert_eq(ampc_ir_attr_find(n, "f")->f, 2.0f);
    cr_assert_eq(ampc_ir_attr_find(n, "g")->f, 0.1f);
    cr_assert_eq(ampc_ir_attr_find(n, "h")->f, -1e-10f);
    cr_assert_str_eq(ampc_ir_attr_find(n, "s")->s, "q\"\\\n\t\x01");
    const ampc_attr *fs = ampc_ir_attr_find(n, "fs");
    cr_assert_eq(fs->kind, AMPC_ATTR_FLOATS);
    cr_assert(fs->n == 3 && fs->floats[0] == 1.5f && fs->floats[1] == 2.0f && isnan(fs->floats[2]));
    cr_assert_eq(ampc_ir_attr_find(n, "ei")->kind, AMPC_ATTR_INTS);
    cr_assert_eq(ampc_ir_attr_find(n, "ef")->kind, AMPC_ATTR_FLOATS);
    cr_assert_eq(ampc_ir_attr_find(n, "es")->kind, AMPC_ATTR_STRINGS);
    cr_assert_eq(ampc_ir_attr_find(n, "es")->n, 0);
    cr_assert_str_eq(ampc_ir_attr_find(n, "ss")->strings[1], "b \"c\"");
    const ampc_value *t = ampc_ir_attr_find(n, "t")->tensor;
    cr_assert(t->dtype == AMPC_DTYPE_F32 && t->shape.rank == 1 && t->shape.dims[0] == 2);
    cr_assert(((float *)t->data)[0] == 0.25f && ((float *)t->data)[1] == -1);
    free(text);
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

Test(text, multi_output_absent_inputs_and_variadic_ops_round_trip) {
    ampc_graph *g = ampc_graph_create("mixed");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2, 3));
    ampc_value *hi = ampc_scalar_f32(g, 6);
    ampc_value *dr[2];
    cr_assert_eq(ampc_op_multi(g, "Dropout", &x, 1, NULL, 0, dr, 2), AMPC_OK);
    ampc_value *clip_in[3] = {dr[0], NULL, hi};
    ampc_value *c = ampc_op(g, "Clip", clip_in, 3, NULL, 0);
    ampc_value *mx_in[3] = {c, x, hi};
    ampc_value *m = ampc_op(g, "Max", mx_in, 3, NULL, 0);
    ampc_value *w_in[3] = {dr[1], m, x};
    ampc_value *w = ampc_op(g, "Where", w_in, 3, NULL, 0);
    ampc_output(g, ampc_cast(g, w, AMPC_DTYPE_F16), "out");
    ampc_output(g, dr[1], "mask");
    char *text = ampc_graph_to_text(g, true);
    cr_assert(strstr(text,
                     "  %Dropout_0 : f32[2,3], %mask : bool[2,3] = Dropout(%x) @\"Dropout_0\"\n"
                     "  %Clip_1 : f32[2,3] = Clip(%Dropout_0, _, %c) @\"Clip_1\"\n"
                     "  %Max_2 : f32[2,3] = Max(%Clip_1, %x, %c) @\"Max_2\"\n"
                     "  %Where_3 : f32[2,3] = Where(%mask, %Max_2, %x) @\"Where_3\"\n"
                     "  %out : f16[2,3] = Cast(%Where_3) {to = 10} @\"Cast_4\"\n"
                     "  output %out\n  output %mask\n}\n"),
              "got:\n%s", text);
    ampc_graph *h = roundtrip(g);
    cr_assert_eq(h->nodes[1]->n_inputs, 3);
    cr_assert_null(h->nodes[1]->inputs[1]);
    cr_assert_eq(h->nodes[0]->n_outputs, 2);
    cr_assert_eq(h->outputs[1], h->nodes[0]->outputs[1]);
    free(text);
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

Test(text, odd_names_are_quoted_and_round_trip) {
    ampc_graph *g = ampc_graph_create("odd \"graph\"");
    ampc_value *x = t_input(g, "/input:0", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *y = t_input(g, "9lives.x_y", AMPC_DTYPE_F32, SHAPE(2));
    ampc_value *in[2] = {x, y};
    ampc_node *n = NULL;
    const char *names[1] = {"new\nline \\ \"q\" ünï"};
    cr_assert_eq(
        ampc_ir_node_build(g, AMPC_OP_ADD, "layer/1 \"add\"", in, 2, NULL, 0, 1, names, &n),
        AMPC_OK);
    ampc_output(g, n->outputs[0], NULL);
    char *text = ampc_graph_to_text(g, true);
    cr_assert_str_eq(text, "graph \"odd \\\"graph\\\"\" {\n"
                           "  input %\"/input:0\" : f32[2]\n"
                           "  input %9lives.x_y : f32[2]\n"
                           "  %\"new\\nline \\\\ \\\"q\\\" ünï\" : f32[2] = Add(%\"/input:0\", "
                           "%9lives.x_y) @\"layer/1 \\\"add\\\"\"\n"
                           "  output %\"new\\nline \\\\ \\\"q\\\" ünï\"\n"
                           "}\n");
    ampc_graph *h = roundtrip(g);
    cr_assert_str_eq(h->name, "odd \"graph\"");
    cr_assert_str_eq(h->nodes[0]->name, "layer/1 \"add\"");
    cr_assert_str_eq(h->outputs[0]->name, names[0]);
    free(text);
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

/* Found by fuzz_onnx: an attribute name made only of identifier characters but starting with a
 * digit or '.' ("1ode") was printed bare, and the lexer read it back as a malformed number. */
Test(text, attribute_names_that_start_like_numbers_are_quoted_and_round_trip) {
    ampc_graph *g = ampc_graph_create("attr names");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(2));
    ampc_attr_arg at[] = {AMPC_ATTR_I("1ode", 1), AMPC_ATTR_I(".5", 2), AMPC_ATTR_I("_ok.1", 3)};
    ampc_output(g, ampc_op(g, "Relu", &x, 1, at, AMPC_ARRAY_LEN(at)), "y");
    char *text = ampc_graph_to_text(g, true);
    cr_assert(strstr(text, "{\"1ode\" = 1, \".5\" = 2, _ok.1 = 3}"), "got:\n%s", text);
    ampc_graph *h = roundtrip(g);
    cr_assert_eq(ampc_ir_attr_find(h->nodes[0], "1ode")->i, 1);
    cr_assert_eq(ampc_ir_attr_find(h->nodes[0], ".5")->i, 2);
    free(text);
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

Test(text, constants_of_every_dtype_round_trip_bit_exactly) {
    ampc_graph *g = ampc_graph_create("dtypes");
    int64_t d;
    float f32[8] = {0.1f, -0.0f, NAN, INFINITY, -INFINITY, 1e-45f, 3.4028235e38f, 16777217.0f};
    double f64[6] = {0.1, 1e300, 5e-324, -0.0, -INFINITY, 1.0 / 3};
    uint16_t f16[6] = {
        ampc_f32_to_f16(0.1f), 0x7bff /* 65504 */, 0x0001 /* 2^-24 */, 0x7e00, 0xfc00, 0x8000};
    uint16_t bf16[5] = {ampc_f32_to_bf16(0.1f), ampc_f32_to_bf16(3e38f), 0x0001, 0x7fc0, 0xff80};
    int64_t i64[3] = {INT64_MIN, INT64_MAX, 0};
    int32_t i32[2] = {INT32_MIN, INT32_MAX};
    int16_t i16[2] = {INT16_MIN, INT16_MAX};
    int8_t i8[2] = {INT8_MIN, INT8_MAX};
    uint64_t u64[2] = {0, UINT64_MAX};
    uint32_t u32[2] = {0, UINT32_MAX};
    uint16_t u16[2] = {0, UINT16_MAX};
    uint8_t u8[2] = {0, UINT8_MAX}, b[3] = {1, 0, 1};
    struct {
        const char *name;
        ampc_dtype t;
        int64_t n;
        const void *data;
    } cs[] = {
        {"f32", AMPC_DTYPE_F32, 8, f32}, {"f64", AMPC_DTYPE_F64, 6, f64},
        {"f16", AMPC_DTYPE_F16, 6, f16}, {"bf16", AMPC_DTYPE_BF16, 5, bf16},
        {"i64", AMPC_DTYPE_I64, 3, i64}, {"i32", AMPC_DTYPE_I32, 2, i32},
        {"i16", AMPC_DTYPE_I16, 2, i16}, {"i8", AMPC_DTYPE_I8, 2, i8},
        {"u64", AMPC_DTYPE_U64, 2, u64}, {"u32", AMPC_DTYPE_U32, 2, u32},
        {"u16", AMPC_DTYPE_U16, 2, u16}, {"u8", AMPC_DTYPE_U8, 2, u8},
        {"bool", AMPC_DTYPE_BOOL, 3, b},
    };
    for (int i = 0; i < AMPC_ARRAY_LEN(cs); i++) {
        d = cs[i].n;
        ampc_output(g, ampc_constant(g, cs[i].name, cs[i].t, 1, &d, cs[i].data), NULL);
    }
    char *text = ampc_graph_to_text(g, true);
    /* Shortest text that reads back to the same bits; f16/bf16 as float values. */
    cr_assert(strstr(text, "const %f32 : f32[8] = [0.1, -0, nan, inf, -inf, 1e-45, 3.4028235e+38, "
                           "16777216]\n"),
              "got:\n%s", text);
    cr_assert(strstr(text, "const %f64 : f64[6] = [0.1, 1e+300, 5e-324, -0, -inf, "
                           "0.3333333333333333]\n"),
              "got:\n%s", text);
    cr_assert(strstr(text, "const %f16 : f16[6] = [0.1, 65504, 6e-08, nan, -inf, -0]\n"),
              "got:\n%s", text);
    cr_assert(strstr(text, "const %bf16 : bf16[5] = [0.1, 3e+38, 9e-41, nan, -inf]\n"), "got:\n%s",
              text);
    cr_assert(
        strstr(text, "const %i64 : i64[3] = [-9223372036854775808, 9223372036854775807, 0]\n"));
    cr_assert(strstr(text, "const %u64 : u64[2] = [0, 18446744073709551615]\n"));
    cr_assert(strstr(text, "const %i8 : i8[2] = [-128, 127]\n"));
    cr_assert(strstr(text, "const %u8 : u8[2] = [0, 255]\n"));
    cr_assert(strstr(text, "const %bool : bool[3] = [true, false, true]\n"));
    ampc_graph *h = roundtrip(g);
    for (int i = 0; i < AMPC_ARRAY_LEN(cs); i++) {
        const ampc_value *v = ampc_ir_value_find(h, cs[i].name);
        cr_assert_not_null(v);
        cr_assert_eq(v->dtype, cs[i].t);
        cr_assert_eq(ampc_ir_numel(v), cs[i].n);
        /* NaN payloads normalise to the quiet NaN the text names; everything else is exact. */
        for (int64_t k = 0; k < cs[i].n; k++) {
            size_t esz = ampc_dtype_size(cs[i].t);
            const unsigned char *a = (const unsigned char *)cs[i].data + k * esz;
            const unsigned char *c = (const unsigned char *)v->data + k * esz;
            bool nan =
                ampc_dtype_is_float(cs[i].t) && isnan(ampc_ref_load_f64(cs[i].data, cs[i].t, k));
            if (nan)
                cr_assert(isnan(ampc_ref_load_f64(v->data, cs[i].t, k)));
            else
                cr_assert(!memcmp(a, c, esz), "%s element %lld differs", cs[i].name, (long long)k);
        }
    }
    free(text);
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

Test(text, empty_and_scalar_shapes_round_trip) {
    ampc_graph *g = ampc_graph_create("shapes");
    ampc_value *x = t_input(g, "x", AMPC_DTYPE_F32, SHAPE(0, 4));
    ampc_value *s = t_input(g, "s", AMPC_DTYPE_I64, SHAPE());
    ampc_value *e = t_const(g, AMPC_DTYPE_I64, SHAPE(0), NULL);
    ampc_output(g, ampc_mul(g, x, ampc_scalar_f32(g, 2.5f)), "y");
    ampc_output(g, ampc_add(g, s, e), "z");
    char *text = ampc_graph_to_text(g, true);
    cr_assert_str_eq(text, "graph \"shapes\" {\n"
                           "  input %x : f32[0,4]\n"
                           "  input %s : i64[]\n"
                           "  const %c : i64[0] = []\n"
                           "  const %c.0 : f32[] = [2.5]\n"
                           "  %y : f32[0,4] = Mul(%x, %c.0) @\"Mul_0\"\n"
                           "  %z : i64[0] = Add(%s, %c) @\"Add_1\"\n"
                           "  output %y\n"
                           "  output %z\n"
                           "}\n");
    ampc_graph *h = roundtrip(g);
    free(text);
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

Test(text, eagerly_folded_nodes_print_as_nodes_and_reparse_with_data) {
    ampc_graph *g = ampc_graph_create("eager");
    double a[2] = {1, 2}, b[2] = {10, 20};
    ampc_value *ca = t_const_f32(g, SHAPE(2), a), *cb = t_const_f32(g, SHAPE(2), b);
    ampc_value *s = ampc_add(g, ca, cb);
    cr_assert_not_null(s->data);
    ampc_output(g, s, "s");
    char *text = ampc_graph_to_text(g, true);
    cr_assert(strstr(text, "  %s : f32[2] = Add(%c, %c.0) @\"Add_0\"\n"), "got:\n%s", text);
    ampc_graph *h = roundtrip(g);
    const ampc_value *v = ampc_ir_value_find(h, "s");
    cr_assert_not_null(v->producer);
    cr_assert_not_null(v->data);
    cr_assert(((float *)v->data)[0] == 11 && ((float *)v->data)[1] == 22);
    free(text);
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

Test(text, large_constants_are_elided_unless_full_data_and_elision_does_not_parse) {
    ampc_graph *g = ampc_graph_create("big");
    float v16[16] = {0}, v17[17] = {0};
    int64_t n16 = 16, n17 = 17;
    ampc_output(g, ampc_constant(g, "a", AMPC_DTYPE_F32, 1, &n16, v16), NULL);
    ampc_output(g, ampc_constant(g, "b", AMPC_DTYPE_F32, 1, &n17, v17), NULL);
    char *brief = ampc_graph_to_text(g, false), *full = ampc_graph_to_text(g, true);
    cr_assert(
        strstr(brief, "const %a : f32[16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n"));
    cr_assert(strstr(brief, "  const %b : f32[17] = [...]\n"), "got:\n%s", brief);
    cr_assert(
        strstr(full, "const %b : f32[17] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n"));
    expect_parse_error(brief, AMPC_E_PARSE,
                       "3:25: the data of this f32[17] constant was elided ('[...]'); print the "
                       "graph with full data to parse it back");
    free(brief);
    free(full);
    ampc_graph_destroy(g);
}

/* ---- parsing hand-written text -------------------------------------------------------------- */

Test(text, parses_hand_written_text_with_comments_and_omitted_types) {
    const char *text = "// a comment before the graph\n"
                       "graph \"hand\" opset 17 {\n"
                       "  input %x : f32[3]   // trailing comment\n"
                       "  const %b : f32[3] = [1, -2, 0.5]\n"
                       "  const %k : f32[] = 2\n"
                       "  %s = Add(%x, %b)\n"
                       "  %m = Mul(%s, %k) @\"scale\"\n"
                       "  %r : f32[3] = Relu(%m)\n"
                       "  output %r, %s\n"
                       "}\n";
    ampc_graph *g = parse_ok(text);
    cr_assert_str_eq(g->name, "hand");
    cr_assert_eq(g->opset, 17);
    cr_assert_eq(ampc_graph_node_count(g), 3);
    cr_assert_str_eq(g->nodes[1]->name, "scale");
    cr_assert_str_eq(g->nodes[0]->name, "Add_0"); /* generated when the text gives none */
    cr_assert_eq(g->n_outputs, 2);
    float xv[3] = {1, 1, -4};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3), xv), out[2];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double want_r[3] = {4, 0, 0}, want_s[3] = {2, -1, -3.5};
    t_expect_close(&out[0], SHAPE(3), want_r, 0, 0);
    t_expect_close(&out[1], SHAPE(3), want_s, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    /* Printing restores the full form: types, node names, one output a line, list data. */
    char *p = ampc_graph_to_text(g, true);
    cr_assert_str_eq(p, "graph \"hand\" opset 17 {\n"
                        "  input %x : f32[3]\n"
                        "  const %b : f32[3] = [1, -2, 0.5]\n"
                        "  const %k : f32[] = [2]\n"
                        "  %s : f32[3] = Add(%x, %b) @\"Add_0\"\n"
                        "  %m : f32[3] = Mul(%s, %k) @\"scale\"\n"
                        "  %r : f32[3] = Relu(%m) @\"Relu_2\"\n"
                        "  output %r\n"
                        "  output %s\n"
                        "}\n");
    free(p);
    ampc_graph_destroy(g);
}

Test(text, untyped_lists_take_their_kind_from_their_elements) {
    ampc_graph *g = parse_ok("graph \"l\" {\n  input %x : f32[1]\n"
                             "  %y = Relu(%x) {a = [1, 2], b = [1, 2.5], c = [\"u\"], d = ints[3], "
                             "e = floats[1, 2], f = 4, g = 4.0, h = nan, i = 1e3}\n"
                             "  output %y\n}\n");
    const ampc_node *n = g->nodes[0];
    cr_assert_eq(ampc_ir_attr_find(n, "a")->kind, AMPC_ATTR_INTS);
    cr_assert_eq(ampc_ir_attr_find(n, "b")->kind, AMPC_ATTR_FLOATS);
    cr_assert_eq(ampc_ir_attr_find(n, "b")->floats[1], 2.5f);
    cr_assert_eq(ampc_ir_attr_find(n, "c")->kind, AMPC_ATTR_STRINGS);
    cr_assert_eq(ampc_ir_attr_find(n, "d")->kind, AMPC_ATTR_INTS);
    cr_assert_eq(ampc_ir_attr_find(n, "e")->kind, AMPC_ATTR_FLOATS);
    cr_assert_eq(ampc_ir_attr_find(n, "e")->floats[1], 2.0f);
    cr_assert_eq(ampc_ir_attr_find(n, "f")->kind, AMPC_ATTR_INT);
    cr_assert_eq(ampc_ir_attr_find(n, "g")->kind, AMPC_ATTR_FLOAT);
    cr_assert(isnan(ampc_ir_attr_find(n, "h")->f));
    cr_assert_eq(ampc_ir_attr_find(n, "i")->f, 1000.0f);
    ampc_graph_destroy(g);
}

Test(text, inputs_with_default_data_and_subgraph_attributes_round_trip) {
    const char *text = "graph \"outer\" {\n"
                       "  input %x : f32[2] = [1, 2]\n"
                       "  %y : f32[2] = Relu(%x) {body = graph \"inner\" {\n"
                       "    input %a : f32[]\n"
                       "    const %k : f32[] = [3]\n"
                       "    %b : f32[] = Mul(%a, %k) @\"m\"\n"
                       "    output %b\n"
                       "  }, n = 1} @\"r\"\n"
                       "  output %y\n"
                       "}\n";
    ampc_graph *g = parse_ok(text);
    cr_assert_not_null(g->inputs[0]->data);
    const ampc_attr *body = ampc_ir_attr_find(g->nodes[0], "body");
    cr_assert_eq(body->kind, AMPC_ATTR_GRAPH);
    cr_assert_eq(g->n_subgraphs, 1);
    cr_assert_eq(body->graph, g->subgraphs[0]);
    cr_assert_str_eq(body->graph->name, "inner");
    cr_assert_eq(ampc_graph_node_count(body->graph), 1);
    cr_assert_null(ampc_ir_value_find(g, "a")); /* the subgraph has its own scope */
    char *p = ampc_graph_to_text(g, true);
    cr_assert_str_eq(p, text);
    free(p);
    ampc_graph_destroy(roundtrip(g));
    ampc_graph_destroy(g);
}

/* ---- parse errors --------------------------------------------------------------------------- */

Test(text, parse_errors_name_line_column_expected_and_found) {
    expect_parse_error("", AMPC_E_PARSE, "1:1: expected 'graph', found end of input");
    expect_parse_error("graph \"g\" {\n  input %x : f33[2]\n}", AMPC_E_PARSE,
                       "2:14: unknown dtype 'f33' (expected f32, f16, bf16, f64, i64, i32, i16, "
                       "i8, u64, u32, u16, u8 or bool)");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y = Frob(%x)\n}", AMPC_E_PARSE,
                       "3:8: unknown op 'Frob' (not in ampc's op table)");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y = Relu(%z)\n}", AMPC_E_PARSE,
                       "3:13: value %z is not defined before this use");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  const %x : f32[] = [1]\n}",
                       AMPC_E_PARSE, "3:9: value %x is already defined at line 2");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %x = Relu(%x)\n}", AMPC_E_PARSE,
                       "3:3: value %x is already defined at line 2");
    expect_parse_error("graph \"g\" {\n  const %c : f32[3] = [1, 2]\n}", AMPC_E_PARSE,
                       "2:23: expected 3 values for f32[3], found 2");
    expect_parse_error("graph \"g\" {\n  const %c : f32[1] = [1, 2]\n}", AMPC_E_PARSE,
                       "2:27: too many values: f32[1] holds 1");
    expect_parse_error("graph \"g\" {\n  const %c : u8[] = [300]\n}", AMPC_E_PARSE,
                       "2:22: value 300 is out of range for u8");
    expect_parse_error("graph \"g\" {\n  const %c : i32[] = [1.5]\n}", AMPC_E_PARSE,
                       "2:23: expected an integer for i32, found '1.5'");
    expect_parse_error("graph \"g\" {\n  const %c : bool[] = [2]\n}", AMPC_E_PARSE,
                       "2:24: expected a bool (true, false, 1 or 0), found '2'");
    expect_parse_error("graph \"g\" {\n  const %c : f32[2] = [1, x]\n}", AMPC_E_PARSE,
                       "2:27: expected a number for f32, found 'x'");
    expect_parse_error("graph \"g\" {\n  input %x : f32[-1]\n}", AMPC_E_PARSE,
                       "2:18: dimensions must be >= 0, found -1");
    expect_parse_error("graph \"g\" {\n  input %x : f32[1,1,1,1,1,1,1,1,1]\n}", AMPC_E_PARSE,
                       "2:34: shape has more than 8 dimensions");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y = Relu(%x\n}", AMPC_E_PARSE,
                       "4:1: expected ',' or ')' in the inputs, found '}'");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y = Relu(%x) {a = []}\n}",
                       AMPC_E_PARSE,
                       "3:22: an empty list needs its kind: write ints[], floats[] or strings[]");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y = Relu(%x) {a = 1, a = 2}\n}",
                       AMPC_E_PARSE, "3:25: attribute 'a' is given twice");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y = Relu(%x) {a = }\n}",
                       AMPC_E_PARSE,
                       "3:22: expected an attribute value (an int, a float, a string, a list, "
                       "tensor<...> or a graph), found '}'");
    expect_parse_error("graph \"g {\n}", AMPC_E_PARSE,
                       "1:7: unterminated string: expected a closing '\"'");
    expect_parse_error("graph \"a\\qb\" {\n}", AMPC_E_PARSE,
                       "1:9: unknown escape sequence '\\q' (use \\\" \\\\ \\n \\t \\r \\xHH)");
    expect_parse_error("graph \"g\" {\n}\nextra", AMPC_E_PARSE,
                       "3:1: expected end of input after the graph's closing '}', found 'extra'");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n", AMPC_E_PARSE,
                       "3:1: expected '}' closing the graph, found end of input");
    expect_parse_error("graph \"g\" {\n  input % : f32[2]\n}", AMPC_E_PARSE,
                       "2:10: expected a name (letters, digits, '_', '.') or a quoted string "
                       "after '%'");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2] $\n}", AMPC_E_PARSE,
                       "2:21: unexpected character '$'");
    expect_parse_error("graph \"g\" {\n  const %c : f32[] = [12ab]\n}", AMPC_E_PARSE,
                       "2:23: malformed number '12ab'");
    expect_parse_error("graph \"g\" {\n  relu %x\n}", AMPC_E_PARSE,
                       "2:3: expected a statement (input, const, output, or %name = Op(...)) or "
                       "'}', found 'relu'");
}

/* Found by fuzz_ir_text: a raw NUL inside a quoted name cut the name short, the builder then gave
 * the value a fresh name and the parser's own assertion (the name it asked for) aborted. */
Test(text, a_nul_byte_inside_a_quoted_name_is_a_parse_error) {
    static const char text[] = "graph \"g\" {\n  input %x : f32[2]\n  %\"a\0b\" = Relu(%x)\n"
                               "  output %x\n}\n";
    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    ampc_status st = ampc_graph_parse(text, sizeof text - 1, &g, &err);
    cr_assert_eq(st, AMPC_E_PARSE, "status %s (message: %s)", ampc_status_str(st), err);
    cr_assert_null(g);
    cr_assert_str_eq(err, "3:6: a string cannot contain a NUL byte");
    free(err);
}

/* Found by fuzz_ir_text: a constant's shape was allocated before its data was read, so a few
 * bytes of text could ask for gigabytes. The parser now refuses a shape with more elements than
 * the text left could hold, before allocating. */
Test(text, a_constant_larger_than_the_text_left_fails_before_allocating) {
    expect_parse_error("graph \"g\" {\n  const %c : f32[8, 888003316] = [0, 1]\n}", AMPC_E_PARSE,
                       "2:34: f32[8,888003316] needs 7104026528 values, more than the 8 bytes "
                       "of text left hold");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y = Relu(%x) {t = tensor<i64["
                       "1099511627776]>[1]}\n}",
                       AMPC_E_PARSE,
                       "3:48: i64[1099511627776] needs 1099511627776 values, more than the 6 bytes "
                       "of text left hold");
}

Test(text, printed_types_must_agree_with_inference) {
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y : f32[3] = Relu(%x)\n}",
                       AMPC_E_PARSE, "3:3: %y is declared f32[3], but Relu inference gives f32[2]");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y : f16[2] = Relu(%x)\n}",
                       AMPC_E_PARSE, "3:3: %y is declared f16[2], but Relu inference gives f32[2]");
    expect_parse_error("graph \"g\" {\n  input %x : f32[2]\n  %y : f32[2], %m : f32[2] = "
                       "Dropout(%x)\n  output %y\n}",
                       AMPC_E_PARSE,
                       "3:16: %m is declared f32[2], but Dropout inference gives bool[2]");
}

Test(text, inference_failures_carry_the_builders_diagnostic_and_status) {
    expect_parse_error("graph \"g\" {\n  input %a : f32[2,3]\n  input %b : f32[4]\n"
                       "  %c = Add(%a, %b) @\"add\"\n}",
                       AMPC_E_SHAPE,
                       "4:8: Add node does not build: node 0 (Add 'add'): input shapes do not "
                       "broadcast: input 1 'b' is [4], but dimension 0 is 4 where the other inputs "
                       "give 3");
    expect_parse_error("graph \"g\" {\n  input %a : f32[2]\n  %c = Add(%a)\n}", AMPC_E_INVALID_ARG,
                       "3:8: Add node does not build: node 0 (Add 'Add_0'): Add takes 2 to 2 "
                       "inputs, got 1");
}

Test(text, parse_rejects_invalid_arguments) {
    ampc_graph *g = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse("graph", 5, NULL, &err), AMPC_E_INVALID_ARG);
    cr_assert_eq(ampc_graph_parse(NULL, 3, &g, &err), AMPC_E_INVALID_ARG);
    /* The length bounds the text: what follows is not read. */
    const char *t = "graph \"g\" {\n}\ngarbage";
    cr_assert_eq(ampc_graph_parse(t, 13, &g, NULL), AMPC_OK);
    ampc_graph_destroy(g);
    /* err may be NULL on failure too. */
    cr_assert_eq(ampc_graph_parse(t, 5, &g, NULL), AMPC_E_PARSE);
    cr_assert_null(g);
}

/* A small model through every op family (conv, movement, norm, contraction, reduction, index,
 * multi-output Split, Slice with absent inputs, Constant with a tensor attribute, Shape): the
 * text round-trips, and the parsed graph computes bit-identical outputs. */
Test(text, a_model_of_every_family_round_trips_and_computes_the_same) {
    ampc_graph *g = ampc_graph_create("families");
    int64_t xd[4] = {2, 3, 4, 4}, wdims[4] = {5, 3, 3, 3}, pads[4] = {1, 1, 1, 1};
    int64_t perm[4] = {0, 2, 3, 1}, shp[2] = {32, 5}, d5 = 5, d52[2] = {5, 2}, d2 = 2;
    float wd[135];
    for (int i = 0; i < 135; i++) wd[i] = (float)(i % 17) / 7 - 1;
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 4, xd);
    ampc_value *w = ampc_constant(g, "w", AMPC_DTYPE_F32, 4, wdims, wd);
    ampc_value *c = ampc_conv2d(g, x, w, NULL, NULL, pads, NULL, 1);
    ampc_value *r = ampc_reshape(g, ampc_transpose(g, c, perm, 4), shp, 2);
    ampc_value *ln =
        ampc_layer_norm(g, ampc_softmax(g, r, -1),
                        ampc_constant(g, "scale", AMPC_DTYPE_F32, 1, &d5, wd), NULL, -1, 1e-5f);
    ampc_value *wm = ampc_constant(g, "wm", AMPC_DTYPE_F32, 2, d52, wd + 7);
    ampc_value *gm = ampc_gemm(g, ampc_matmul(g, ln, wm), wm, NULL, false, true);
    ampc_value *rin[2] = {gm, ampc_const_i64s(g, (int64_t[]){1}, 1)};
    ampc_attr_arg keep = AMPC_ATTR_I("keepdims", 0);
    ampc_value *rs = ampc_op(g, "ReduceSum", rin, 2, &keep, 1);
    ampc_value *cat_in[2] = {gm, gm}, *sp[2];
    ampc_value *spin[2] = {ampc_concat(g, cat_in, 2, 1), ampc_const_i64s(g, (int64_t[]){7, 3}, 2)};
    ampc_attr_arg ax1 = AMPC_ATTR_I("axis", 1);
    ampc_op_multi(g, "Split", spin, 2, &ax1, 1, sp, 2);
    ampc_value *slin[5] = {sp[0], ampc_const_i64s(g, (int64_t[]){0}, 1),
                           ampc_const_i64s(g, (int64_t[]){2}, 1), NULL, NULL};
    ampc_value *kv = ampc_constant(g, "kv", AMPC_DTYPE_F32, 1, &d2, wd + 3);
    ampc_attr_arg value = {.name = "value", .kind = AMPC_ATTR_TENSOR, .tensor = kv};
    ampc_value *gin[2] = {rs, ampc_const_i64s(g, (int64_t[]){3, 0, 31}, 3)};
    ampc_output(g, ampc_op(g, "Gather", gin, 2, NULL, 0), "picked");
    ampc_output(g, ampc_op(g, "Shape", &x, 1, NULL, 0), "shape");
    ampc_output(g, ampc_op(g, "Slice", slin, 5, NULL, 0), "sl");
    ampc_output(g, sp[1], "sp1");
    ampc_output(g, ampc_op(g, "Constant", NULL, 0, &value, 1), "k");
    ampc_graph *h = roundtrip(g);

    float xv[96];
    for (int i = 0; i < 96; i++) xv[i] = (float)((i * 7) % 11) / 5 - 1;
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3, 4, 4), xv), a[5], b[5];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, a, 5), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(ampc_graph_evaluate(h, &in, 1, b, 5), AMPC_OK, "%s", ampc_graph_errors(h));
    for (int i = 0; i < 5; i++) {
        cr_assert(ampc_shape_eq(&a[i].shape, &b[i].shape) && a[i].dtype == b[i].dtype);
        size_t nb = (size_t)ampc_shape_numel(&a[i].shape) * ampc_dtype_size(a[i].dtype);
        cr_assert(!memcmp(a[i].data, b[i].data, nb), "output %d differs after the round trip", i);
        ampc_tensor_free(&a[i]);
        ampc_tensor_free(&b[i]);
    }
    ampc_graph_destroy(h);
    ampc_graph_destroy(g);
}

/* Every proper prefix of valid text is an error with a position, never a crash or a leak. */
Test(text, every_truncation_of_valid_text_fails_cleanly) {
    const char *text =
        "graph \"outer\" opset 13 {\n"
        "  input %x : f32[2] = [1, 2]\n"
        "  const %\"k/0\" : f16[2] = [0.5, -inf]\n"
        "  %y : f32[2], %m : bool[2] = Dropout(%x, _, _) @\"d\"\n"
        "  %z : f32[2] = Relu(%y) {body = graph \"inner\" {\n"
        "    input %a : f32[]\n"
        "    output %a\n"
        "  }, s = [\"a\\n\", \"b\"], f = floats[], t = tensor<i8[2]>[-1, 2]} @\"r\"\n"
        "  output %z\n"
        "}\n";
    size_t len = strlen(text), ok = 0;
    for (size_t n = 0; n < len; n++) {
        ampc_graph *g = NULL;
        char *err = NULL;
        ampc_status st = ampc_graph_parse(text, n, &g, &err);
        if (st == AMPC_OK) { /* only the prefix that lacks just the final newline */
            ok++;
            cr_assert_eq(n, len - 1);
            ampc_graph_destroy(g);
            continue;
        }
        cr_assert_null(g);
        cr_assert_not_null(err, "prefix %zu: no message", n);
        int line, col;
        cr_assert_eq(sscanf(err, "%d:%d: ", &line, &col), 2, "prefix %zu: %s", n, err);
        free(err);
    }
    cr_assert_eq(ok, 1);
    ampc_graph *g = parse_ok(text);
    ampc_graph_destroy(g);
    /* A NUL byte inside the given length is a character like any other, and not a valid one. */
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse("graph \"g\" {\0}", 13, &g, &err), AMPC_E_PARSE);
    cr_assert_str_eq(err, "1:12: unexpected character '\\x00'");
    free(err);
}
