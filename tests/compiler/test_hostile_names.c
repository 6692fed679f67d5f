/*
 * test_hostile_names.c — a model's names never change generated code. An ONNX model (an MLP, an
 * elementwise chain, a reduction, LayerNormalization, Softmax) whose graph, input, output, node
 * and initializer names, doc strings and an op-domain name try to end comments and literals,
 * splice lines, start directives, define a constructor or send terminal escapes generates CUDA,
 * host C and model.h that, without comments and literals, are byte-identical to those of the
 * same model named n0, n1, ...; the same holds for names given in the IR (the renamer the fuzz
 * target uses). The IR text of such names parses back to the same names; `--report` writes valid
 * JSON; `ampc inspect` prints no control byte; a library's C prefix is a checked identifier.
 * The escaping routines themselves are checked byte by byte.
 */
#define _GNU_SOURCE
#include "../onnx/onnx_builder.h"
#include "hostile_names.h"
#include "support.h"

#include "ir/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the model -------------------------------------------------------------------------------- */

/* The names of the model, in a fixed order: the graph, its values, its nodes, then the doc strings
 * and the op domain. */
enum {
    V_X, V_W1, V_B1, V_W2, V_G, V_BETA, V_TWO, V_MM1, V_A1, V_R, V_MM2, V_S, V_M, V_E,
    V_Y1, V_Y2, V_Y3, N_VALUES
};
enum { N_NODES = 10, N_NAMES = 1 + N_VALUES + N_NODES + 4 };

static Onnx__NodeProto *node(mb *b, const char *op, const char *name, const char *const *ins,
                             int n_in, const char *out, const char *doc) {
    Onnx__NodeProto *n = mb_make_node(b, op, name, NULL, NULL);
    for (int i = 0; i < n_in; i++) MB_PUSH(b, n->input, n->n_input, mb_str(b, ins[i]));
    MB_PUSH(b, n->output, n->n_output, mb_str(b, out));
    n->doc_string = mb_str(b, doc);
    MB_PUSH(b, b->graph.node, b->graph.n_node, n);
    return n;
}

static Onnx__TensorProto *weight(mb *b, const char *name, int64_t rows, int64_t cols, int seed) {
    int64_t dims[2] = {rows, cols};
    float data[16 * 8];
    const int64_t n = rows * (cols ? cols : 1); /* cols 0: a vector of rows values */
    for (int64_t i = 0; i < n; i++) data[i] = (float)(((i * 37 + seed) % 17) - 8) / 16.0f;
    Onnx__TensorProto *t = mb_tensor_raw(b, name, OT_FLOAT, cols ? 2 : 1, cols ? dims : &rows, data,
                                         (size_t)n * sizeof(float));
    mb_initializer(b, t);
    return t;
}

/* Fills b with the model, names from namer (hn_plain or hn_hostile). */
static void build(mb *b, hn_namer namer) {
    char names[N_NAMES][4096];
    for (int i = 0; i < N_NAMES; i++) namer(names[i], sizeof names[i], i, NULL);
    const char *vn[N_VALUES], *nn[N_NODES];
    for (int i = 0; i < N_VALUES; i++) vn[i] = names[1 + i];
    for (int i = 0; i < N_NODES; i++) nn[i] = names[1 + N_VALUES + i];
    const char *doc = names[N_NAMES - 4], *gdoc = names[N_NAMES - 3], *mdoc = names[N_NAMES - 2];
    mb_init(b, 8, 17);
    mb_opset(b, names[N_NAMES - 1], 1); /* a domain no node uses */
    b->graph.name = mb_str(b, names[0]);
    b->graph.doc_string = mb_str(b, gdoc);
    b->model.doc_string = mb_str(b, mdoc);
    b->model.producer_name = mb_str(b, mdoc);
    mb_input(b, vn[V_X], OT_FLOAT, "4,16")->doc_string = mb_str(b, doc);
    weight(b, vn[V_W1], 16, 8, 1);
    weight(b, vn[V_B1], 8, 0, 2);
    weight(b, vn[V_W2], 8, 8, 3);
    weight(b, vn[V_G], 8, 0, 4);
    weight(b, vn[V_BETA], 8, 0, 5);
    weight(b, vn[V_TWO], 1, 0, 6)->doc_string = mb_str(b, doc);
    node(b, "MatMul", nn[0], (const char *[]){vn[V_X], vn[V_W1]}, 2, vn[V_MM1], doc);
    node(b, "Add", nn[1], (const char *[]){vn[V_MM1], vn[V_B1]}, 2, vn[V_A1], doc);
    node(b, "Relu", nn[2], (const char *[]){vn[V_A1]}, 1, vn[V_R], doc);
    node(b, "MatMul", nn[3], (const char *[]){vn[V_R], vn[V_W2]}, 2, vn[V_MM2], doc);
    node(b, "Sigmoid", nn[4], (const char *[]){vn[V_MM2]}, 1, vn[V_S], doc);
    node(b, "Mul", nn[5], (const char *[]){vn[V_S], vn[V_MM2]}, 2, vn[V_M], doc);
    node(b, "Add", nn[6], (const char *[]){vn[V_M], vn[V_TWO]}, 2, vn[V_E], doc);
    Onnx__NodeProto *ln = node(b, "LayerNormalization", nn[7],
                               (const char *[]){vn[V_E], vn[V_G], vn[V_BETA]}, 3, vn[V_Y1], doc);
    mb_attr_i(b, ln, "axis", -1);
    mb_attr_f(b, ln, "epsilon", 1e-5f);
    Onnx__NodeProto *rm = node(b, "ReduceMean", nn[8], (const char *[]){vn[V_E]}, 1, vn[V_Y2], doc);
    mb_attr_ints(b, rm, "axes", 1, (const int64_t[]){1});
    mb_attr_i(b, rm, "keepdims", 0);
    Onnx__NodeProto *sm = node(b, "Softmax", nn[9], (const char *[]){vn[V_MM2]}, 1, vn[V_Y3], doc);
    mb_attr_i(b, sm, "axis", -1);
    mb_output(b, vn[V_Y1], OT_FLOAT, "4,8")->doc_string = mb_str(b, doc);
    mb_output(b, vn[V_Y2], OT_FLOAT, "4");
    mb_output(b, vn[V_Y3], OT_FLOAT, "4,8");
}

/* The model with names from namer, imported. */
static ampc_graph *model(hn_namer namer) {
    mb b;
    build(&b, namer);
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = mb_import(&b, NULL, NULL, &g, &err);
    cr_assert_eq(st, AMPC_OK, "import: %s", err ? err : "");
    free(err);
    mb_free(&b);
    return g;
}

/* The same model as an ONNX file at path (for the CLI). */
static void write_model_file(const char *path, hn_namer namer) {
    mb b;
    build(&b, namer);
    size_t len;
    uint8_t *buf = mb_pack(&b, &len);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    mb_free(&b);
}

/* Compiles g (PTX for compute_80, no GPU needed) and returns what it generates. Destroys g. */
static char *generated(ampc_graph *g, const char *source) {
    static const int32_t none = 0;
    ampc_compile_options o = {.archs = &none, .n_archs = 0};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    char *text = hn_sources(m, source);
    ampc_module_destroy(m);
    return text;
}

static void expect_same_code(const char *hostile, const char *plain) {
    char *diff = hn_compare(hostile, plain);
    cr_assert_null(diff, "%s", diff);
}

/* ---- generated code --------------------------------------------------------------------------- */

Test(hostile_names, onnx_names_never_change_generated_code, .timeout = 120) {
    char *plain = generated(model(hn_plain), "model.onnx");
    char *hostile = generated(model(hn_hostile), "model.onnx");
    /* the names did reach the sources (escaped): the comparison compares something */
    cr_assert(strstr(hostile, "\\x1b[2J"), "the escaped terminal sequence is in a comment");
    cr_assert(strstr(hostile, "\\033[2J"), "the escaped name is in a string literal");
    cr_assert(!strchr(hostile, '\x1b') && !strchr(hostile, '\x7f'), "no raw control byte");
    cr_assert_str_neq(hostile, plain);
    expect_same_code(hostile, plain);
    free(plain);
    free(hostile);
}

Test(hostile_names, ir_names_never_change_generated_code, .timeout = 120) {
    char *plain = generated(model(hn_plain), "model.onnx");
    ampc_graph *g = model(hn_plain);
    cr_assert(hn_rename(g, hn_hostile, NULL));
    char *hostile = generated(g, "model.onnx");
    cr_assert_str_neq(hostile, plain);
    expect_same_code(hostile, plain);
    free(plain);
    free(hostile);
}

Test(hostile_names, model_path_in_the_header_is_escaped, .timeout = 120) {
    char *plain = generated(model(hn_plain), "model.onnx");
    char *hostile = generated(model(hn_plain), "m*/\n#error x\n/*\\.onnx");
    expect_same_code(hostile, plain);
    free(plain);
    free(hostile);
}

/* ---- the stripper ----------------------------------------------------------------------------- */

Test(hostile_names, stripper_removes_comments_and_literals_only) {
    const char *src = "int a; // c \\\n still c\n/* b */ char *s = \"x\\\"y\"; char c = '\\'';\n"
                      "int b = 1 / 2 * 3;";
    char *s = hn_strip(src);
    cr_assert_str_eq(s, "int a;  \n  char *s = \"\"; char c = '';\nint b = 1 / 2 * 3;");
    free(s);
    /* a difference outside comments and literals is found */
    char *d = hn_compare("int a; /* x */", "int b; /* x */");
    cr_assert_not_null(d);
    free(d);
}

/* ---- the escaping routines -------------------------------------------------------------------- */

/* Checks that text, placed in a comment of a C translation unit, compiles as that comment and
 * nothing else: the lexer view (hn_strip) of the unit is the unit without the comment. */
static void expect_comment_holds(const char *open, const char *close, const char *text) {
    ampc_strbuf sb = {0};
    ampc_sb_printf(&sb, "int a;\n%s'", open);
    ampc_sb_put_comment_text(&sb, text);
    ampc_sb_printf(&sb, "'%s\nint b;\n", close);
    char *s = hn_strip(sb.data);
    cr_assert_str_eq(s, "int a;\n \nint b;\n", "%s comment of %s", open, sb.data);
    for (const unsigned char *p = (const unsigned char *)sb.data; *p; p++)
        cr_assert((*p >= 0x20 && *p < 0x7f) || *p == '\n', "byte 0x%02x in %s", *p, sb.data);
    cr_assert(!strstr(sb.data, "??"), "no trigraph can start: %s", sb.data);
    free(s);
    ampc_sb_free(&sb);
}

Test(hostile_names, comment_text_cannot_leave_the_comment) {
    char all[256];
    for (int i = 1; i < 256; i++) all[i - 1] = (char)i;
    all[255] = 0;
    for (int f = 0; f < (int)(sizeof hn_fragments / sizeof *hn_fragments); f++) {
        expect_comment_holds("/* ", " */", hn_fragments[f]);
        expect_comment_holds("// ", "", hn_fragments[f]);
    }
    for (int i = 0; i < 255; i += 40) {
        expect_comment_holds("/* ", " */", all + i);
        expect_comment_holds("// ", "", all + i);
    }
    expect_comment_holds("// ", "", "ends in a backslash\\");
    expect_comment_holds("/* ", " */", "***///***");
    /* long text is cut short */
    char longer[300];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    ampc_strbuf sb = {0};
    ampc_sb_put_comment_text(&sb, longer);
    cr_assert_eq(sb.len, (size_t)AMPC_COMMENT_TEXT_MAX + 3);
    ampc_sb_free(&sb);
}

/* A minimal JSON checker (RFC 8259): one value and nothing after it; strings hold no control
 * byte and only valid escapes, and are valid UTF-8. Returns the end of the value or NULL. */
static const char *json_value(const char *p);

static const char *json_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    return p;
}

static const char *json_string(const char *p) {
    if (*p++ != '"') return NULL;
    while (*p != '"') {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            p++;
            if (*p == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (!strchr("0123456789abcdefABCDEF", p[k]) || !p[k]) return NULL;
                p += 5;
            } else if (*p && strchr("\"\\/bfnrt", *p)) {
                p++;
            } else {
                return NULL;
            }
            continue;
        }
        int len = ampc_utf8_len((const unsigned char *)p, strlen(p));
        if (len == 0) return NULL;
        p += len;
    }
    return p + 1;
}

static const char *json_value(const char *p) {
    p = json_ws(p);
    if (*p == '"') return json_string(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = json_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                p = json_string(json_ws(p));
                if (!p) return NULL;
                p = json_ws(p);
                if (*p++ != ':') return NULL;
            }
            p = json_value(p);
            if (!p) return NULL;
            p = json_ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    char *end;
    strtod(p, &end);
    return end > p && (*p == '-' || (*p >= '0' && *p <= '9')) ? end : NULL;
}

static bool json_valid(const char *text) {
    const char *end = json_value(text);
    return end && *json_ws(end) == 0;
}

Test(hostile_names, json_strings_are_valid_whatever_the_bytes) {
    char all[256];
    for (int i = 1; i < 256; i++) all[i - 1] = (char)i;
    all[255] = 0;
    const char *cases[] = {all, "\xc2\x9b[2J", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf",
                           "caf\xc3\xa9", "\xe2\x82", "\"}, {\"evil\": 1"};
    for (int i = 0; i < (int)(sizeof cases / sizeof *cases); i++) {
        ampc_strbuf sb = {0};
        ampc_sb_puts(&sb, "{\"name\": ");
        ampc_sb_put_json_str(&sb, cases[i]);
        ampc_sb_puts(&sb, "}");
        cr_assert(json_valid(sb.data), "case %d: %s", i, sb.data);
        cr_assert(!strchr(sb.data, '\x1b') && !strstr(sb.data, "\xc2\x9b"), "case %d", i);
        ampc_sb_free(&sb);
    }
    ampc_strbuf sb = {0};
    ampc_sb_put_json_str(&sb, "caf\xc3\xa9 \x1b \xff");
    cr_assert_str_eq(sb.data, "\"caf\xc3\xa9 \\u001b \\ufffd\"");
    ampc_sb_free(&sb);
    cr_assert(!json_valid("{\"a\": \"\x01\"}"), "the checker can fail");
}

Test(hostile_names, terminal_text_escapes_controls_keeps_utf8) {
    ampc_strbuf sb = {0};
    const char *in = "a\tb\n\x1b[2J\r\x7f\xc2\x9b\xc3\xa9\xff\xe2\x88\x80";
    cr_assert_eq(ampc_sb_put_terminal_text(&sb, in, strlen(in), true), strlen(in));
    cr_assert_str_eq(sb.data, "a\tb\n\\x1b[2J\\x0d\\x7f\\xc2\\x9b\xc3\xa9\\xff\xe2\x88\x80");
    ampc_sb_free(&sb);
    /* a UTF-8 sequence cut by the end of one write waits for the next */
    const char *cut = "x\xe2\x88";
    cr_assert_eq(ampc_sb_put_terminal_text(&sb, cut, 3, false), 1);
    cr_assert_str_eq(sb.data, "x");
    cr_assert_eq(ampc_sb_put_terminal_text(&sb, cut, 3, true), 3);
    cr_assert_str_eq(sb.data, "xx\\xe2\\x88");
    ampc_sb_free(&sb);
    /* a byte that cannot start a longer sequence does not wait */
    cr_assert_eq(ampc_sb_put_terminal_text(&sb, "\xed\xa0", 2, false), 2);
    ampc_sb_free(&sb);
}

Test(hostile_names, utf8_lengths) {
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"a", 1), 1);
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\xc3\xa9", 2), 2);
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\xe2\x88\x80", 3), 3);
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\xc0\xaf", 2), 0);         /* overlong */
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\xe0\x80\xaf", 3), 0);     /* overlong */
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\xed\xa0\x80", 3), 0);     /* surrogate */
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\xf4\x90\x80\x80", 4), 0); /* > U+10FFFF */
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\x80", 1), 0);
    cr_assert_eq(ampc_utf8_len((const unsigned char *)"\xe2\x88", 2), 0);         /* cut short */
}

/* ---- the IR text ------------------------------------------------------------------------------ */

Test(hostile_names, ir_text_of_hostile_names_parses_back) {
    ampc_graph *g = model(hn_plain);
    cr_assert(hn_rename(g, hn_hostile, NULL));
    /* and one value named with every byte from 1 to 255 */
    char all[256];
    for (int i = 1; i < 256; i++) all[i - 1] = (char)i;
    all[255] = 0;
    cr_assert_eq(ampc_ir_value_rename(g, g->inputs[0], all), AMPC_OK);
    char *text = ampc_graph_to_text(g, true);
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        cr_assert(*p >= 0x20 || *p == '\n', "control byte 0x%02x in the IR text", *p);
        cr_assert(*p != 0x7f, "DEL in the IR text");
        int len = ampc_utf8_len(p, strlen((const char *)p));
        cr_assert(len > 0, "the IR text is not UTF-8 at byte %td", (const char *)p - text);
        cr_assert(!(len == 2 && p[0] == 0xc2 && p[1] < 0xa0), "a C1 control in the IR text");
        p += len;
    }
    ampc_graph *back = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &back, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_str_eq(back->name, g->name);
    cr_assert_eq(back->n_inputs, g->n_inputs);
    cr_assert_str_eq(back->inputs[0]->name, all);
    for (int32_t i = 0; i < g->n_outputs; i++)
        cr_assert_str_eq(back->outputs[i]->name, g->outputs[i]->name);
    int32_t found = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        for (int32_t j = 0; j < back->n_nodes; j++)
            if (!strcmp(g->nodes[i]->name, back->nodes[j]->name)) {
                found++;
                break;
            }
    cr_assert_eq(found, g->n_nodes, "every node name reads back");
    for (int32_t i = 0; i < g->n_values; i++)
        cr_assert_not_null(ampc_ir_value_find(back, g->values[i]->name), "value %s", g->values[i]->name);
    char *again = ampc_graph_to_text(back, true);
    cr_assert_str_eq(again, text);
    free(again);
    free(text);
    ampc_graph_destroy(back);
    ampc_graph_destroy(g);
}

/* ---- the command line ------------------------------------------------------------------------- */

/* `ampc ARGS`, killed after 120 s: its exit status, its output in *out (t_ampc). */
#define ampc_cli(out, ...) t_ampc((out), 120, __VA_ARGS__)

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot read %s", path);
    ampc_strbuf sb = {0};
    int c;
    while ((c = fgetc(f)) != EOF) ampc_sb_putc(&sb, (char)c);
    fclose(f);
    return ampc_sb_take(&sb);
}

/* Asserts that text holds no byte a terminal acts on: no control byte but '\n' and '\t', no DEL,
 * no C1 control, nothing that is not UTF-8. */
static void expect_terminal_safe(const char *text, const char *what) {
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        if (!strncmp((const char *)p, "\rampc: compiling kernels", 24)) { /* ampc's own line */
            p++;
            continue;
        }
        cr_assert(*p >= 0x20 || *p == '\n' || *p == '\t', "%s: control byte 0x%02x at %td", what,
                  *p, (const char *)p - text);
        cr_assert(*p != 0x7f, "%s: DEL", what);
        int len = ampc_utf8_len(p, strlen((const char *)p));
        cr_assert(len > 0, "%s: not UTF-8 at byte %td", what, (const char *)p - text);
        cr_assert(!(len == 2 && p[0] == 0xc2 && p[1] < 0xa0), "%s: a C1 control", what);
        p += len;
    }
}



Test(hostile_names, report_is_json_and_terminal_output_is_text, .timeout = 240) {
    char *dir = t_tmpdir("hostile"), path[600], out_path[600], report[600];
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    snprintf(out_path, sizeof out_path, "%s/m.cu", dir);
    snprintf(report, sizeof report, "%s/r.json", dir);
    write_model_file(path, hn_hostile);
    char *out = NULL;
    cr_assert_eq(ampc_cli(&out, "'%s' --emit cuda -o '%s' --report '%s' -v", path, out_path, report),
                 0, "%s", out);
    expect_terminal_safe(out, "compile -v");
    free(out);
    char *json = read_all(report);
    cr_assert(json_valid(json), "the report is not valid JSON:\n%s", json);
    cr_assert(strstr(json, "\\u001b[2J"), "the names are in the report, escaped");
    free(json);
    cr_assert_eq(ampc_cli(&out, "inspect '%s' --precision fp16", path), 0, "%s", out);
    expect_terminal_safe(out, "inspect");
    cr_assert(strstr(out, "\\x1b[2J"), "a name's escape sequence prints as text:\n%s", out);
    free(out);
    cr_assert_eq(ampc_cli(&out, "'%s' --emit ir", path), 0, "%s", out);
    expect_terminal_safe(out, "--emit ir");
    free(out);
    cr_assert_eq(ampc_cli(&out, "run --reference '%s'", path), 0, "%s", out);
    expect_terminal_safe(out, "run --reference");
    free(out);
    t_rmdir_all(dir);
}

Test(hostile_names, library_prefix_is_a_checked_identifier, .timeout = 120) {
    char *dir = t_tmpdir("hostile"), path[600];
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    write_model_file(path, hn_plain);
    const char *bad[] = {"int", "a-b", "9lives", "__x", "_Model", "x;system", ""};
    for (int i = 0; i < (int)(sizeof bad / sizeof *bad); i++) {
        char *out = NULL;
        cr_assert_eq(ampc_cli(&out, "'%s' --emit c --name '%s'", path, bad[i]), 1,
                     "--name '%s' is refused: %s", bad[i], out);
        cr_assert(strstr(out, "is not a C identifier that can prefix the library's functions"),
                  "--name '%s': %s", bad[i], out);
        free(out);
    }
    char *out = NULL;
    cr_assert_eq(ampc_cli(&out, "'%s' --emit c --name my_model", path), 0, "%s", out);
    cr_assert(strstr(out, "my_model_create"), "a good name is used");
    free(out);
    /* a name taken from the file: a keyword or a leading digit gets m_ */
    static const int32_t none = 0;
    ampc_compile_options o = {.archs = &none, .n_archs = 0};
    ampc_graph *g = model(hn_plain);
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    const char *files[][2] = {{"int.so", "int.h"}, {"1-a,b.so", "1-a,b.h"}};
    const char *want[] = {"int m_int_create(", "int m_1_a_b_create("};
    for (int i = 0; i < 2; i++) {
        char so[700], h[700];
        snprintf(so, sizeof so, "%s/%s", dir, files[i][0]);
        snprintf(h, sizeof h, "%s/%s", dir, files[i][1]);
        char *err = NULL;
        cr_assert_eq(ampc_module_write_library(m, so, NULL, &err), AMPC_OK, "%s", err ? err : "");
        char *text = read_all(h);
        cr_assert(strstr(text, want[i]), "%s declares %s", h, want[i]);
        free(text);
    }
    ampc_module_destroy(m);
    t_rmdir_all(dir);
}
