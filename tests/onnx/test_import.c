/*
 * test_import.c — the ONNX importer on models crafted here with protobuf-c (onnx_builder.h):
 * initializers in every encoding, external data and its path rules, each kind of bad input with
 * its exact message, the coverage list, per-opset rewriting of older forms, Constant nodes,
 * symbolic dims and their options, constant-bound inputs, model-local functions (with fields
 * newer than the schema carried as unknown fields), `inspect`, and a few models of the ONNX
 * backend test data evaluated against their expected outputs.
 *
 * Ops of families still being implemented make some tests skip (with the reason) until they land.
 */
#define _GNU_SOURCE /* open_memstream, mkdtemp, symlink */
#include "onnx_builder.h"

#include "ir/ref/ref.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------------------------------- */

/* Imports and asserts success; skips when an op of a family still being written is missing. */
static ampc_graph *import_ok(mb *b, const char *dir, const ampc_import_options *o) {
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = mb_import(b, dir, o, &g, &err);
    if (st != AMPC_OK && err && strstr(err, "not implemented")) {
        char msg[512];
        snprintf(msg, sizeof msg, "an op this test needs is not implemented yet: %s", err);
        free(err);
        cr_skip_test("%s", msg);
    }
    cr_assert_eq(st, AMPC_OK, "import failed (%s):\n%s", ampc_status_str(st), err ? err : "");
    cr_assert_not_null(g);
    cr_assert_null(err);
    return g;
}

/* Imports, asserts failure with status `want` and a message containing `needle`. */
static void import_fails(mb *b, const char *dir, const ampc_import_options *o, ampc_status want,
                         const char *needle) {
    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    ampc_status st = mb_import(b, dir, o, &g, &err);
    cr_assert_null(g, "a failed import must leave *out NULL");
    cr_assert_not_null(err);
    cr_assert(strstr(err, needle), "expected a message containing\n  %s\ngot (%s)\n  %s", needle,
              ampc_status_str(st), err);
    cr_assert_eq(st, want, "status: got %s, expected %s (message: %s)", ampc_status_str(st),
                 ampc_status_str(want), err);
    free(err);
}

/* Evaluates a graph with up to 4 inputs and returns output i. */
static ampc_tensor eval_out(ampc_graph *g, const ampc_tensor *in, int32_t n_in, int32_t i) {
    ampc_tensor out[16];
    int32_t n_out = ampc_graph_output_count(g);
    cr_assert(n_out <= 16 && i < n_out);
    ampc_status st = ampc_graph_evaluate(g, in, n_in, out, n_out);
    if (st != AMPC_OK && strstr(ampc_graph_errors(g), "not implemented"))
        cr_skip_test("an op this test needs is not implemented yet: %s", ampc_graph_errors(g));
    cr_assert_eq(st, AMPC_OK, "evaluation failed:\n%s", ampc_graph_errors(g));
    for (int32_t k = 0; k < n_out; k++)
        if (k != i) ampc_tensor_free(&out[k]);
    return out[i];
}

/* A fresh temporary folder; files written with put_file are removed by rm_dir. */
typedef struct tmpdir {
    char path[64];
    char files[8][300];
    int n;
} tmpdir;

static void mk_dir(tmpdir *d) {
    memset(d, 0, sizeof *d);
    strcpy(d->path, "/tmp/ampc-onnx-test-XXXXXX");
    cr_assert_not_null(mkdtemp(d->path));
}

static void put_file(tmpdir *d, const char *rel, const void *data, size_t n) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", d->path, rel);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "cannot write %s", p);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
    snprintf(d->files[d->n++], sizeof d->files[0], "%s", p);
}

static void rm_dir(tmpdir *d) {
    for (int i = d->n - 1; i >= 0; i--) remove(d->files[i]);
    rmdir(d->path);
}

/* A model y = Relu(x + w), x: f32[2,3] input, w: f32[3] initializer in raw_data. */
static void add_relu_model(mb *b, int64_t opset) {
    mb_init(b, 8, opset);
    mb_input(b, "x", OT_FLOAT, "2,3");
    float w[3] = {1, 2, -3};
    mb_initializer(b, mb_tensor_raw(b, "w", OT_FLOAT, 1, (int64_t[]){3}, w, sizeof w));
    mb_node(b, "Add", "add", "x,w", "s");
    mb_node(b, "Relu", "relu", "s", "y");
    mb_output(b, "y", OT_FLOAT, "2,3");
}

/* ---- building and evaluating ---------------------------------------------------------------- */

Test(onnx_import, add_relu_with_raw_initializer) {
    mb b;
    add_relu_model(&b, 13);
    ampc_graph *g = import_ok(&b, NULL, NULL);
    cr_assert_eq(ampc_graph_input_count(g), 1);
    cr_assert_str_eq(ampc_value_name(ampc_graph_input(g, 0)), "x");
    cr_assert_eq(ampc_graph_output_count(g), 1);
    cr_assert_str_eq(ampc_value_name(ampc_graph_output(g, 0)), "y");
    cr_assert_eq(g->opset, 13);
    float xv[6] = {-5, 1, 2, 3, -4, 0};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), xv);
    ampc_tensor out = eval_out(g, &in, 1, 0);
    double want[6] = {0, 3, 0, 4, 0, 0}; /* relu(x + [1,2,-3]) */
    t_expect_close(&out, SHAPE(2, 3), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* One initializer per dtype, each read through Identity into an output; expected bytes. */
typedef struct enc_case {
    const char *name;
    int32_t onnx;
    ampc_dtype dt;
    uint8_t bytes[16]; /* 2 elements, little-endian */
} enc_case;

static const enc_case enc_cases[] = {
    {"f32", OT_FLOAT, AMPC_DTYPE_F32, {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}},            /* 1, -2 */
    {"f64", OT_DOUBLE, AMPC_DTYPE_F64, {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0xc0}},
    {"i64", OT_INT64, AMPC_DTYPE_I64, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 7}},
    {"i32", OT_INT32, AMPC_DTYPE_I32, {0xfe, 0xff, 0xff, 0xff, 0x40, 0x42, 0x0f, 0}},  /* -2, 1e6 */
    {"i16", OT_INT16, AMPC_DTYPE_I16, {0x00, 0x80, 0xff, 0x7f}},                      /* min, max */
    {"i8", OT_INT8, AMPC_DTYPE_I8, {0x80, 0x05}},
    {"u8", OT_UINT8, AMPC_DTYPE_U8, {0xff, 0x00}},
    {"u16", OT_UINT16, AMPC_DTYPE_U16, {0xff, 0xff, 0x01, 0x00}},
    {"u32", OT_UINT32, AMPC_DTYPE_U32, {0x00, 0x28, 0x6b, 0xee, 1}},                  /* 4e9, 1 */
    {"u64", OT_UINT64, AMPC_DTYPE_U64, {1, 0, 0, 0, 0, 0, 0, 0x80, 2}},              /* 2^63+1 */
    {"bool", OT_BOOL, AMPC_DTYPE_BOOL, {0, 1}},
    {"f16", OT_FLOAT16, AMPC_DTYPE_F16, {0x00, 0x3c, 0x00, 0xc0}},                   /* 1, -2 */
    {"bf16", OT_BFLOAT16, AMPC_DTYPE_BF16, {0x80, 0x3f, 0x40, 0x40}},                /* 1, 3 */
};

/* Fills the typed field ONNX uses for the dtype with the case's two elements. */
static void fill_typed(mb *b, Onnx__TensorProto *t, const enc_case *c) {
    size_t es = ampc_dtype_size(c->dt);
    switch (c->onnx) {
    case OT_FLOAT:
        t->float_data = mb_alloc(b, 8), t->n_float_data = 2;
        memcpy(t->float_data, c->bytes, 8);
        break;
    case OT_DOUBLE:
        t->double_data = mb_alloc(b, 16), t->n_double_data = 2;
        memcpy(t->double_data, c->bytes, 16);
        break;
    case OT_INT64:
        t->int64_data = mb_alloc(b, 16), t->n_int64_data = 2;
        memcpy(t->int64_data, c->bytes, 16);
        break;
    case OT_UINT32:
    case OT_UINT64:
        t->uint64_data = mb_alloc(b, 16), t->n_uint64_data = 2;
        for (int i = 0; i < 2; i++) {
            uint64_t v = 0;
            memcpy(&v, c->bytes + i * es, es);
            t->uint64_data[i] = v;
        }
        break;
    default: /* int32_data: sign-extended integers, 16-bit float patterns, bools */
        t->int32_data = mb_alloc(b, 8), t->n_int32_data = 2;
        for (int i = 0; i < 2; i++) {
            int64_t v = 0;
            memcpy(&v, c->bytes + i * es, es);
            if (c->dt == AMPC_DTYPE_I8) v = (int8_t)v;
            if (c->dt == AMPC_DTYPE_I16) v = (int16_t)v;
            if (c->dt == AMPC_DTYPE_BOOL && v) v = 5; /* any non-zero is true */
            t->int32_data[i] = (int32_t)v;
        }
        break;
    }
}

static void check_encodings(bool raw) {
    mb b;
    mb_init(&b, 8, 13);
    const int n = AMPC_ARRAY_LEN(enc_cases);
    for (int i = 0; i < n; i++) {
        const enc_case *c = &enc_cases[i];
        char w[16], y[16];
        snprintf(w, sizeof w, "w_%s", c->name);
        snprintf(y, sizeof y, "y_%s", c->name);
        Onnx__TensorProto *t;
        if (raw) {
            uint8_t bytes[16];
            memcpy(bytes, c->bytes, sizeof bytes);
            if (c->dt == AMPC_DTYPE_BOOL) bytes[1] = 7; /* stored as 1 */
            t = mb_tensor_raw(&b, w, c->onnx, 1, (int64_t[]){2}, bytes, 2 * ampc_dtype_size(c->dt));
        } else {
            t = mb_tensor(&b, w, c->onnx, 1, (int64_t[]){2});
            fill_typed(&b, t, c);
        }
        mb_initializer(&b, t);
        mb_node(&b, "Identity", y, w, y);
        mb_output(&b, y, c->onnx, "2");
    }
    ampc_graph *g = import_ok(&b, NULL, NULL);
    ampc_tensor out[AMPC_ARRAY_LEN(enc_cases)];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, n), AMPC_OK, "%s", ampc_graph_errors(g));
    for (int i = 0; i < n; i++) {
        const enc_case *c = &enc_cases[i];
        cr_assert_eq(out[i].dtype, c->dt, "%s: dtype %s", c->name, ampc_dtype_name(out[i].dtype));
        cr_assert_eq(out[i].shape.rank, 1);
        cr_assert_eq(out[i].shape.dims[0], 2);
        cr_assert(!memcmp(out[i].data, c->bytes, 2 * ampc_dtype_size(c->dt)), "%s: wrong bytes",
                  c->name);
        ampc_tensor_free(&out[i]);
    }
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_import, initializers_in_typed_fields_every_dtype) { check_encodings(false); }
Test(onnx_import, initializers_in_raw_data_every_dtype) { check_encodings(true); }

Test(onnx_import, initializer_size_mismatches_name_the_tensor) {
    mb b;
    mb_init(&b, 8, 13);
    Onnx__TensorProto *t = mb_tensor(&b, "w", OT_FLOAT, 2, (int64_t[]){2, 2});
    t->float_data = mb_alloc(&b, 12), t->n_float_data = 3;
    mb_initializer(&b, t);
    mb_node(&b, "Identity", "id", "w", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_PARSE,
                 "initializer 'w': float_data has 3 values, expected 4 (f32[2,2])");
    t->n_float_data = 0;
    t->has_raw_data = 1, t->raw_data.len = 6, t->raw_data.data = mb_alloc(&b, 6);
    import_fails(&b, NULL, NULL, AMPC_E_PARSE,
                 "initializer 'w': raw_data has 6 bytes, expected 16 (f32[2,2])");
    t->has_raw_data = 0, t->raw_data.len = 0;
    import_fails(&b, NULL, NULL, AMPC_E_PARSE, "initializer 'w' has no data (f32[2,2] needs 16 "
                                               "bytes in raw_data, float_data or external data)");
    t->data_type = OT_STRING;
    import_fails(&b, NULL, NULL, AMPC_E_UNSUPPORTED,
                 "initializer 'w' has element type STRING, which ampc does not support");
    t->data_type = OT_FLOAT8E4M3FN;
    import_fails(&b, NULL, NULL, AMPC_E_UNSUPPORTED,
                 "initializer 'w' has element type FLOAT8E4M3FN, which ampc does not support");
    mb_free(&b);
}

/* Values in int32_data that do not fit the tensor's type (u8, i8, u16, i16, the bits of f16 and
 * bf16) were truncated; data in both raw_data and a typed field was read from raw_data. Both
 * are refused, naming the tensor and (for a value) its index. */
Test(onnx_import, out_of_range_typed_values_and_data_given_twice_are_refused) {
    static const struct { int32_t ot; int32_t bad; const char *want; } cases[] = {
        {OT_UINT8, 256, "initializer 'w': int32_data[1] = 256 is outside the range of u8 (0 to 255)"},
        {OT_INT8, -129, "initializer 'w': int32_data[1] = -129 is outside the range of i8 (-128 to 127)"},
        {OT_UINT16, -1, "initializer 'w': int32_data[1] = -1 is outside the range of u16 (0 to 65535)"},
        {OT_INT16, 40000, "initializer 'w': int32_data[1] = 40000 is outside the range of i16 (-32768 to 32767)"},
        {OT_FLOAT16, 65536, "initializer 'w': int32_data[1] = 65536 is outside the range of f16 (0 to 65535: the value's bits)"},
        {OT_BFLOAT16, 70000, "initializer 'w': int32_data[1] = 70000 is outside the range of bf16 (0 to 65535: the value's bits)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mb b;
        mb_init(&b, 8, 13);
        Onnx__TensorProto *t = mb_tensor(&b, "w", cases[k].ot, 1, (int64_t[]){2});
        t->int32_data = mb_alloc(&b, 2 * sizeof(int32_t)), t->n_int32_data = 2;
        t->int32_data[0] = 1, t->int32_data[1] = cases[k].bad;
        mb_initializer(&b, t);
        mb_node(&b, "Identity", "id", "w", "y");
        mb_output(&b, "y", cases[k].ot, NULL);
        import_fails(&b, NULL, NULL, AMPC_E_PARSE, cases[k].want);
        t->int32_data[1] = 1; /* in range: imports */
        ampc_graph_destroy(import_ok(&b, NULL, NULL));
        mb_free(&b);
    }
    mb b;
    mb_init(&b, 8, 13);
    Onnx__TensorProto *t = mb_tensor(&b, "w", OT_FLOAT, 1, (int64_t[]){2});
    t->float_data = mb_alloc(&b, 8), t->n_float_data = 2;
    t->has_raw_data = 1, t->raw_data.len = 8, t->raw_data.data = mb_alloc(&b, 8);
    mb_initializer(&b, t);
    mb_node(&b, "Identity", "id", "w", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_PARSE,
                 "initializer 'w' holds data twice, 8 bytes in raw_data and 2 values in a typed "
                 "field (float_data, int32_data...): which one is meant is ambiguous");
    mb_free(&b);
}

/* A graph output declared with another element type, rank or dim than the model computes is
 * refused (a program would be told the wrong type); symbolic and unknown dims match anything. */
Test(onnx_import, declared_output_types_must_match_what_is_computed) {
    static const struct { int32_t elem; const char *dims; ampc_status st; const char *want; } cases[] = {
        {OT_INT64, "2,3", AMPC_E_DTYPE, "graph output 'y' is declared i64[2,3], but the model computes f32[2,3]"},
        {OT_FLOAT, "6", AMPC_E_SHAPE, "graph output 'y' is declared f32[6], but the model computes f32[2,3]"},
        {OT_FLOAT, "2,4", AMPC_E_SHAPE, "graph output 'y' is declared f32[2,4], but the model computes f32[2,3]"},
        {OT_FLOAT, "2,3", AMPC_OK, NULL},
        {OT_FLOAT, "N,?", AMPC_OK, NULL},
        {OT_FLOAT, NULL, AMPC_OK, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mb b;
        mb_init(&b, 8, 13);
        mb_input(&b, "x", OT_FLOAT, "2,3");
        mb_node(&b, "Relu", "r", "x", "y");
        mb_output(&b, "y", cases[k].elem, cases[k].dims);
        if (cases[k].want) import_fails(&b, NULL, NULL, cases[k].st, cases[k].want);
        else ampc_graph_destroy(import_ok(&b, NULL, NULL));
        mb_free(&b);
    }
}

Test(onnx_import, empty_initializer_needs_no_data) {
    mb b;
    mb_init(&b, 8, 13);
    mb_initializer(&b, mb_tensor(&b, "w", OT_FLOAT, 2, (int64_t[]){0, 3}));
    mb_node(&b, "Relu", "r", "w", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b, NULL, NULL);
    ampc_tensor out = eval_out(g, NULL, 0, 0);
    t_expect_close(&out, SHAPE(0, 3), NULL, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* ---- external data -------------------------------------------------------------------------- */

/* y = Identity(w), w: f32[3] stored externally at `loc` (offset/length as given). */
static void external_model(mb *b, const char *loc, const char *offset, const char *length) {
    mb_init(b, 8, 13);
    Onnx__TensorProto *t = mb_tensor(b, "w", OT_FLOAT, 1, (int64_t[]){3});
    mb_external(b, t, loc, offset, length);
    mb_initializer(b, t);
    mb_node(b, "Identity", "id", "w", "y");
    mb_output(b, "y", OT_FLOAT, "3");
}

/* 8 bytes of padding, then the floats 1.5, -2, 4. */
static void write_weights(tmpdir *d, const char *rel) {
    uint8_t buf[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4};
    float w[3] = {1.5f, -2, 4};
    memcpy(buf + 8, w, sizeof w);
    put_file(d, rel, buf, sizeof buf);
}

Test(onnx_import, external_data_with_offset_and_length) {
    tmpdir d;
    mk_dir(&d);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/sub", d.path);
    cr_assert_eq(mkdir(sub, 0700), 0);
    write_weights(&d, "w.bin");
    write_weights(&d, "sub/w.bin");
    const char *locs[2] = {"w.bin", "sub/w.bin"};
    for (int i = 0; i < 2; i++) {
        mb b;
        external_model(&b, locs[i], "8", "12");
        ampc_graph *g = import_ok(&b, d.path, NULL);
        ampc_tensor out = eval_out(g, NULL, 0, 0);
        double want[3] = {1.5, -2, 4};
        t_expect_close(&out, SHAPE(3), want, 0, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
        mb_free(&b);
    }
    /* Through a model file: the folder is the file's. */
    mb b;
    external_model(&b, "w.bin", "8", NULL);
    size_t len;
    uint8_t *buf = mb_pack(&b, &len);
    put_file(&d, "model.onnx", buf, len);
    char path[256];
    snprintf(path, sizeof path, "%s/model.onnx", d.path);
    ampc_graph *g = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_onnx_import_file(path, NULL, &g, &err), AMPC_OK, "%s", err);
    ampc_tensor out = eval_out(g, NULL, 0, 0);
    cr_assert_eq(((float *)out.data)[2], 4.0f);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
    rmdir(sub); /* after its file: rm_dir removes files in reverse order */
    rm_dir(&d);
}

Test(onnx_import, external_data_that_leaves_the_folder_is_refused) {
    tmpdir d, other;
    mk_dir(&d);
    mk_dir(&other);
    write_weights(&d, "w.bin");
    write_weights(&other, "outside.bin");
    char target[256], link[256];
    snprintf(target, sizeof target, "%s/outside.bin", other.path);
    snprintf(link, sizeof link, "%s/link.bin", d.path);
    cr_assert_eq(symlink(target, link), 0);

    struct {
        const char *loc, *offset, *length;
        ampc_status st;
        const char *msg;
    } cases[] = {
        {"/etc/passwd", NULL, NULL, AMPC_E_PARSE,
         "initializer 'w': external data location '/etc/passwd' is absolute; it must be relative "
         "to the model's folder"},
        {"../w.bin", NULL, NULL, AMPC_E_PARSE,
         "initializer 'w': external data location '../w.bin' has a '..' component, which would "
         "leave the model's folder"},
        {"a/../../w.bin", NULL, NULL, AMPC_E_PARSE, "has a '..' component"},
        {"link.bin", "8", "12", AMPC_E_PARSE, "outside the model's folder"},
        {"w.bin", "100", "12", AMPC_E_PARSE,
         "initializer 'w': external data offset 100 + length 12 runs past the end of 'w.bin' (20 "
         "bytes)"},
        {"w.bin", "16", NULL, AMPC_E_PARSE, "offset 16 + length 12 runs past the end"},
        {"w.bin", "0", "8", AMPC_E_PARSE,
         "initializer 'w': external data length 8 does not match the tensor's size (12 bytes)"},
        {"w.bin", "-4", NULL, AMPC_E_PARSE,
         "external data offset '-4' is not a non-negative integer"},
        {"missing.bin", NULL, NULL, AMPC_E_IO, "initializer 'w': cannot open external data file"},
        {"", NULL, NULL, AMPC_E_PARSE, "external data location '' is empty"},
    };
    for (int i = 0; i < AMPC_ARRAY_LEN(cases); i++) {
        mb b;
        external_model(&b, cases[i].loc, cases[i].offset, cases[i].length);
        import_fails(&b, d.path, NULL, cases[i].st, cases[i].msg);
        mb_free(&b);
    }
    mb b;
    external_model(&b, "w.bin", "8", "12");
    import_fails(&b, NULL, NULL, AMPC_E_INVALID_ARG,
                 "initializer 'w': external data 'w.bin' needs the model's folder, and none was "
                 "given");
    Onnx__TensorProto *t = b.graph.initializer[0];
    t->n_external_data = 0;
    import_fails(&b, d.path, NULL, AMPC_E_PARSE,
                 "initializer 'w': external data has no 'location' entry");
    mb_free(&b);
    remove(link);
    rm_dir(&d);
    rm_dir(&other);
}

/* ---- bad files ------------------------------------------------------------------------------ */

static void buffer_fails(const void *data, size_t len, ampc_status want, const char *needle) {
    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    ampc_status st = ampc_onnx_import_buffer(data, len, NULL, NULL, &g, &err);
    cr_assert_null(g);
    cr_assert_eq(st, want, "got %s: %s", ampc_status_str(st), err ? err : "");
    cr_assert(err && strstr(err, needle), "expected\n  %s\ngot\n  %s", needle,
              err ? err : "(null)");
    free(err);
}

Test(onnx_import, truncated_garbage_and_empty_files_are_parse_errors) {
    mb b;
    add_relu_model(&b, 13);
    size_t len;
    uint8_t *buf = mb_pack(&b, &len);
    buffer_fails(buf, len / 2, AMPC_E_PARSE,
                 "not an ONNX model (a truncated file, or not protobuf)");
    buffer_fails(buf, len - 1, AMPC_E_PARSE, "not an ONNX model");
    const char *text = "hello, this is not a model\n";
    buffer_fails(text, strlen(text), AMPC_E_PARSE, "not an ONNX model");
    buffer_fails(buf, 0, AMPC_E_PARSE, "not an ONNX model: the data is empty");
    /* Valid protobuf, but no ModelProto fields: an empty message. */
    uint8_t unknown_only[3] = {0xf8, 0x3e, 0x01}; /* field 999, varint 1 */
    buffer_fails(unknown_only, 3, AMPC_E_PARSE, "not an ONNX model: ir_version is missing");
    mb_free(&b);
}

Test(onnx_import, deeply_nested_messages_are_refused_not_a_stack_overflow) {
    /* graph { node { attribute { g { node { attribute { g ... } } } } } } nested 200 times. */
    enum { LEVELS = 200 };
    size_t cap = 16 * LEVELS + 64, len = 0;
    uint8_t *buf = calloc(1, cap), *tmp = calloc(1, cap);
    const uint8_t tags[3] = {0x32 /* AttributeProto.g = 6 */, 0x2a /* NodeProto.attribute = 5 */,
                             0x0a /* GraphProto.node = 1 */};
    for (int level = 0; level < LEVELS; level++)
        for (int k = 0; k < 3; k++) {
            size_t n = 0;
            tmp[n++] = tags[k];
            size_t v = len;
            do {
                tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                v >>= 7;
            } while (v);
            memcpy(tmp + n, buf, len);
            len += n;
            memcpy(buf, tmp, len);
        }
    /* ModelProto.graph = 7 around it, after ir_version = 8. */
    size_t n = 0;
    tmp[n++] = 0x08, tmp[n++] = 0x08, tmp[n++] = 0x3a;
    size_t v = len;
    do {
        tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    memcpy(tmp + n, buf, len);
    buffer_fails(tmp, n + len, AMPC_E_PARSE, "messages nest deeper than 100 levels");
    free(buf);
    free(tmp);
}

/* A model that uses most of what the importer reads: symbolic dims, an initializer, a Constant,
 * attributes, a model-local function with a default attribute, value_info. */
static void rich_model(mb *b) {
    mb_init(b, 9, 13);
    mb_opset(b, "custom", 1);
    Onnx__FunctionProto *f = mb_function(b, "custom", "F", "p", "q", 13);
    Onnx__NodeProto *c = mb_fn_node(b, f, "Constant", "k", "", "k");
    mb_attr_ref(b, c, "value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "alpha");
    mb_fn_node(b, f, "Mul", "m", "p,k", "q");
    Onnx__AttributeProto *a = mb_attr(b, NULL, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1, a->f = 2;
    size_t n = onnx__attribute_proto__get_packed_size(a);
    uint8_t *ab = mb_alloc(b, n);
    onnx__attribute_proto__pack(a, ab);
    mb_unknown_bytes(b, &f->base, 11, ab, n);
    mb_input(b, "x", OT_FLOAT, "N,3");
    float w[3] = {1, 2, -3};
    mb_initializer(b, mb_tensor_raw(b, "w", OT_FLOAT, 1, (int64_t[]){3}, w, sizeof w));
    Onnx__NodeProto *k = mb_node(b, "Constant", "c", "", "two");
    mb_attr_ints(b, k, "value_ints", 2, (int64_t[]){1, 3});
    mb_node(b, "Add", "add", "x,w", "s");
    Onnx__NodeProto *clip = mb_node(b, "Clip", "clip", "s", "t");
    mb_attr_f(b, clip, "min", 0);
    Onnx__NodeProto *call = mb_node(b, "F", "call", "t", "u");
    call->domain = "custom";
    mb_node(b, "Relu", "relu", "u", "y");
    Onnx__ValueInfoProto *vi = mb_value_info(b, "s", OT_FLOAT, "N,3");
    MB_PUSH(b, b->graph.value_info, b->graph.n_value_info, vi);
    mb_output(b, "y", OT_FLOAT, "N,3");
    mb_output(b, "two", OT_INT64, "2");
}

Test(onnx_import, mutated_models_never_crash) {
    /* A small fuzz: flip bytes of a valid model (and cut some short); every outcome is a status,
     * never a crash, and out/err agree with the status. Some rounds go through inspect too. */
    tmpdir d;
    mk_dir(&d);
    char path[256];
    snprintf(path, sizeof path, "%s/m.onnx", d.path);
    mb b;
    rich_model(&b);
    size_t len;
    uint8_t *orig = mb_pack(&b, &len), *buf = malloc(len);
    ampc_import_options o = {.max_batch = 2};
    ampc_graph *g0 = NULL;
    cr_assert_eq(ampc_onnx_import_buffer(orig, len, NULL, &o, &g0, NULL), AMPC_OK,
                 "the unmutated model imports");
    ampc_graph_destroy(g0);
    uint32_t seed = 12345;
    int ok = 0, failed = 0;
    for (int round = 0; round < 600; round++) {
        memcpy(buf, orig, len);
        for (int k = 0; k < 1 + round % 4; k++) {
            seed = seed * 1103515245u + 12345u;
            buf[(seed >> 8) % len] ^= (uint8_t)(1u << ((seed >> 4) & 7));
        }
        size_t cut = round % 7 == 0 ? (seed >> 3) % len : len;
        ampc_graph *g = NULL;
        char *err = NULL;
        ampc_status st = ampc_onnx_import_buffer(buf, cut, NULL, &o, &g, &err);
        if (st == AMPC_OK) {
            cr_assert_not_null(g);
            cr_assert_null(err);
            ok++;
        } else {
            cr_assert_null(g);
            cr_assert(err && *err, "round %d: failure without a message", round);
            failed++;
        }
        ampc_graph_destroy(g);
        free(err);
        if (round % 8 == 0) {
            FILE *f = fopen(path, "wb");
            cr_assert_eq(fwrite(buf, 1, cut, f), cut);
            fclose(f);
            char *text = NULL;
            size_t n = 0;
            FILE *out = open_memstream(&text, &n);
            st = ampc_onnx_inspect(path, out);
            fclose(out);
            cr_assert(st < AMPC_STATUS_COUNT && strstr(text, "model: "), "%s", text);
            free(text);
        }
    }
    cr_assert(failed > 0 && ok > 0 && ok + failed == 600, "ok %d, failed %d", ok, failed);
    remove(path);
    rm_dir(&d);
    free(buf);
    mb_free(&b);
}

Test(onnx_import, ir_version_and_opset_limits) {
    mb b;
    add_relu_model(&b, 13);
    b.model.ir_version = 2;
    import_fails(&b, NULL, NULL, AMPC_E_UNSUPPORTED,
                 "the model's ir_version 2 is too old: ampc reads IR versions 3 to 14");
    b.model.ir_version = 99;
    import_fails(
        &b, NULL, NULL, AMPC_E_UNSUPPORTED,
        "the model's ir_version 99 is newer than ampc knows: it reads IR versions 3 to 14");
    b.model.has_ir_version = 0;
    import_fails(&b, NULL, NULL, AMPC_E_PARSE, "not an ONNX model: ir_version is missing");
    b.model.has_ir_version = 1, b.model.ir_version = 10;
    b.model.opset_import[0]->version = 99;
    import_fails(&b, NULL, NULL, AMPC_E_UNSUPPORTED,
                 "the model imports opset 99 of the default domain, newer than ampc knows (28)");
    b.model.opset_import[0]->version = 13;
    mb_opset(&b, "ai.onnx", 12);
    import_fails(&b, NULL, NULL, AMPC_E_PARSE,
                 "opset_import lists domain 'ai.onnx' twice (versions 13 and 12)");
    b.model.n_opset_import = 1;
    b.model.graph = NULL;
    import_fails(&b, NULL, NULL, AMPC_E_PARSE, "not an ONNX model: it has no graph");
    mb_free(&b);

    ampc_graph *g = (ampc_graph *)1;
    char *err = NULL;
    cr_assert_eq(ampc_onnx_import_file("/nonexistent/m.onnx", NULL, &g, &err), AMPC_E_IO);
    cr_assert_null(g);
    cr_assert(strstr(err, "cannot open '/nonexistent/m.onnx'"), "%s", err);
    free(err);
}

/* ---- structure ------------------------------------------------------------------------------ */

Test(onnx_import, dangling_and_missing_names) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "2");
    mb_node(&b, "Add", "add0", "x,w", "s");
    mb_node(&b, "Relu", "r", "s", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);
    mb_output(&b, "zz", OT_FLOAT, NULL);
    import_fails(
        &b, NULL, NULL, AMPC_E_VERIFY,
        "node 0 'add0' (Add): input 1 'w' is not produced by any node, nor a graph input or "
        "an initializer\ngraph output 'zz' is not produced by any node, nor a graph input "
        "or an initializer");
    mb_free(&b);
}

Test(onnx_import, cycles_are_reported_and_unsorted_graphs_sorted) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "3");
    mb_node(&b, "Add", "a", "x,rb", "ra");
    mb_node(&b, "Relu", "b", "ra", "rb");
    mb_output(&b, "rb", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_VERIFY,
                 "the graph has a cycle: 2 nodes can never run, each waiting on another:\n"
                 "  node 0 'a' (Add) needs 'rb' from node 1 'b' (Relu)\n"
                 "  node 1 'b' (Relu) needs 'ra' from node 0 'a' (Add)");
    mb_free(&b);

    /* Out of order but acyclic: sorted, then imported. */
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "3");
    mb_node(&b, "Neg", "n2", "t", "y");
    mb_node(&b, "Relu", "n1", "x", "t");
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b, NULL, NULL);
    float xv[3] = {-1, 2, 0};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3), xv);
    ampc_tensor out = eval_out(g, &in, 1, 0);
    double want[3] = {0, -2, 0};
    t_expect_close(&out, SHAPE(3), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_import, duplicate_names) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "3");
    mb_node(&b, "Relu", "r1", "x", "y");
    mb_node(&b, "Neg", "r2", "x", "y");
    mb_node(&b, "Abs", "r3", "y", "x");
    mb_output(&b, "y", OT_FLOAT, NULL);
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_VERIFY,
                 "node 1 'r2' (Neg): output 0 'y' is already defined by node 0 'r1' (Relu) (ONNX "
                 "values are assigned once)\n"
                 "node 2 'r3' (Abs): output 0 'x' is already defined by a graph input (ONNX values "
                 "are assigned once)\n"
                 "graph output 'y' is listed twice (duplicate output names)");
    mb_free(&b);

    mb_init(&b, 8, 13);
    float w[1] = {1};
    mb_initializer(&b, mb_tensor_raw(&b, "w", OT_FLOAT, 1, (int64_t[]){1}, w, 4));
    mb_initializer(&b, mb_tensor_raw(&b, "w", OT_FLOAT, 1, (int64_t[]){1}, w, 4));
    mb_node(&b, "Relu", "r", "w", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_VERIFY, "initializer 'w' is defined twice");
    mb_free(&b);
}

Test(onnx_import, negative_and_overflowing_dims) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "2,-3");
    mb_input(&b, "big", OT_FLOAT, "4294967296,4294967296");
    mb_node(&b, "Relu", "r", "x", "y");
    mb_node(&b, "Relu", "r2", "big", "y2");
    mb_output(&b, "y", OT_FLOAT, NULL);
    mb_output(&b, "y2", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_SHAPE,
                 "graph input 'x' dim 1 is -3; dims must be >= 0\n"
                 "graph input 'big' has dims [4294967296,4294967296] whose size overflows 64 bits");
    mb_free(&b);

    mb_init(&b, 8, 13);
    mb_initializer(&b, mb_tensor(&b, "w", OT_FLOAT, 2, (int64_t[]){2, -1}));
    mb_node(&b, "Relu", "r", "w", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_SHAPE,
                 "initializer 'w' has a negative dimension: dims[1] = -1");
    b.graph.initializer[0]->dims[0] = INT64_C(1) << 62;
    b.graph.initializer[0]->dims[1] = 4;
    import_fails(&b, NULL, NULL, AMPC_E_OVERFLOW,
                 "initializer 'w' has dims [4611686018427387904,4] whose size overflows 64 bits");
    mb_free(&b);

    /* The product overflows at the second dim: the message still shows the third one. */
    mb_init(&b, 8, 13);
    mb_initializer(&b, mb_tensor(&b, "w", OT_FLOAT, 3, (int64_t[]){INT64_C(1) << 62, 8, 7}));
    mb_node(&b, "Relu", "r", "w", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_OVERFLOW,
                 "initializer 'w' has dims [4611686018427387904,8,7] whose size overflows 64 bits");
    mb_free(&b);
}

/* ---- coverage ------------------------------------------------------------------------------- */

Test(onnx_import, every_unsupported_node_is_listed_at_once) {
    mb b;
    mb_init(&b, 8, 13);
    mb_opset(&b, "ai.onnx.ml", 2);
    mb_input(&b, "x", OT_FLOAT, "3");
    Onnx__NodeProto *n = mb_node(&b, "LabelEncoder", "le", "x", "a");
    n->domain = "ai.onnx.ml";
    mb_node(&b, "Relu", "relu", "x", "b");
    n = mb_node(&b, "Bar", "foo", "x", "c");
    n->domain = "com.foo";
    mb_node(&b, "NotAnOp", "nope", "x", "d");
    n = mb_node(&b, "Relu", "relu_g", "x", "e");
    Onnx__GraphProto *body = mb_alloc(&b, sizeof *body);
    onnx__graph_proto__init(body);
    mb_attr(&b, n, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = body;
    n = mb_node(&b, "Constant", "cst", "", "f");
    mb_attr_s(&b, n, "value_string", "hello");
    mb_node(&b, "Gelu", "gelu_old", "x", "g");
    mb_output(&b, "b", OT_FLOAT, NULL);
    import_fails(
        &b, NULL, NULL, AMPC_E_UNSUPPORTED,
        "6 nodes are not supported:\n"
        "  node 0 'le' (ai.onnx.ml::LabelEncoder): op not in ampc's op table (ampc "
        "implements the default ONNX domain)\n"
        "  node 2 'foo' (com.foo::Bar): op not in ampc's op table (and domain 'com.foo' is "
        "not in the model's opset_import)\n"
        "  node 3 'nope' (NotAnOp): op not in ampc's op table\n"
        "  node 4 'relu_g' (Relu): attribute 'body' is a graph, which ampc does not take "
        "for Relu\n"
        "  node 5 'cst' (Constant): a Constant with attribute 'value_string' makes a string "
        "tensor, which ampc does not support\n"
        "  node 6 'gelu_old' (Gelu): opset 13 is older than ampc supports for Gelu (opsets "
        "20 to the newest)");
    mb_free(&b);
}

/* ---- older opsets mapped onto the newest form ----------------------------------------------- */

/* y = Op(x) evaluated at x; the node built with `setup`. */
static ampc_tensor run_unary_model(mb *b, const char *dims, const float *xv, ampc_shape xs) {
    ampc_graph *g = import_ok(b, NULL, NULL);
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, xs, (void *)xv);
    ampc_tensor out = eval_out(g, &in, 1, 0);
    (void)dims;
    ampc_graph_destroy(g);
    return out;
}

Test(onnx_import, clip_min_max_attributes_become_inputs_before_opset_11) {
    float xv[4] = {-2, 0.5f, 3, -0.25f};
    double want[4] = {-1, 0.5, 1, -0.25};
    for (int form = 0; form < 2; form++) {
        mb b;
        mb_init(&b, form ? 8 : 3, form ? 11 : 6);
        mb_input(&b, "x", OT_FLOAT, "4");
        Onnx__NodeProto *n;
        if (form == 0) {
            n = mb_node(&b, "Clip", "clip", "x", "y");
            mb_attr_f(&b, n, "min", -1);
            mb_attr_f(&b, n, "max", 1);
        } else {
            float lo = -1, hi = 1;
            mb_initializer(&b, mb_tensor_raw(&b, "lo", OT_FLOAT, 0, NULL, &lo, 4));
            mb_initializer(&b, mb_tensor_raw(&b, "hi", OT_FLOAT, 0, NULL, &hi, 4));
            mb_node(&b, "Clip", "clip", "x,lo,hi", "y");
        }
        mb_output(&b, "y", OT_FLOAT, NULL);
        ampc_graph *g = import_ok(&b, NULL, NULL);
        /* Both forms give one Clip node whose min and max are constant inputs. */
        cr_assert_eq(ampc_graph_node_count(g), 1);
        const ampc_node *clip = g->nodes[0];
        cr_assert_eq(clip->op, AMPC_OP_CLIP);
        cr_assert_eq(clip->n_inputs, 3);
        cr_assert_eq(clip->n_attrs, 0, "the attributes are gone");
        cr_assert(clip->inputs[1]->data && clip->inputs[2]->data);
        cr_assert_eq(*(float *)clip->inputs[1]->data, -1.0f);
        cr_assert_eq(*(float *)clip->inputs[2]->data, 1.0f);
        ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(4), xv);
        ampc_tensor out = eval_out(g, &in, 1, 0);
        t_expect_close(&out, SHAPE(4), want, 0, 0);
        ampc_tensor_free(&out);
        ampc_graph_destroy(g);
        mb_free(&b);
    }
}

Test(onnx_import, reduce_axes_attribute_before_13_equals_input_from_13) {
    float xv[6] = {1, 2, 3, 4, 5, 6};
    double want[2] = {6, 15}; /* sum over axis 1 of [[1,2,3],[4,5,6]] */
    const char *op[2] = {"ReduceSum", "ReduceMean"};
    int64_t attr_opset[2] = {11, 17}, input_opset[2] = {13, 18};
    for (int k = 0; k < 2; k++)
        for (int form = 0; form < 2; form++) {
            mb b;
            mb_init(&b, 8, form ? input_opset[k] : attr_opset[k]);
            mb_input(&b, "x", OT_FLOAT, "2,3");
            Onnx__NodeProto *n;
            if (form == 0) {
                n = mb_node(&b, op[k], "r", "x", "y");
                mb_attr_ints(&b, n, "axes", 1, (int64_t[]){1});
            } else {
                int64_t ax = 1;
                mb_initializer(&b, mb_tensor_raw(&b, "axes", OT_INT64, 1, (int64_t[]){1}, &ax, 8));
                n = mb_node(&b, op[k], "r", "x,axes", "y");
            }
            mb_attr_i(&b, n, "keepdims", 0);
            mb_output(&b, "y", OT_FLOAT, NULL);
            ampc_graph *g = import_ok(&b, NULL, NULL);
            const ampc_node *r = g->nodes[0];
            cr_assert_eq(r->n_inputs, 2, "%s opset %lld: axes is input 1", op[k],
                         (long long)g->opset);
            cr_assert_null(ampc_ir_attr_find(r, "axes"));
            cr_assert_eq(*(int64_t *)r->inputs[1]->data, 1);
            ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2, 3), xv);
            ampc_tensor out = eval_out(g, &in, 1, 0);
            double mean[2] = {2, 5};
            t_expect_close(&out, SHAPE(2), k ? mean : want, 1e-6, 0);
            ampc_tensor_free(&out);
            ampc_graph_destroy(g);
            mb_free(&b);
        }
}

Test(onnx_import, unsqueeze_axes_attribute_at_opset_11) {
    mb b;
    mb_init(&b, 6, 11);
    mb_input(&b, "x", OT_FLOAT, "3");
    Onnx__NodeProto *n = mb_node(&b, "Unsqueeze", "u", "x", "y");
    mb_attr_ints(&b, n, "axes", 2, (int64_t[]){0, 2});
    mb_output(&b, "y", OT_FLOAT, NULL);
    float xv[3] = {1, 2, 3};
    ampc_tensor out = run_unary_model(&b, "3", xv, SHAPE(3));
    double want[3] = {1, 2, 3};
    t_expect_close(&out, SHAPE(1, 3, 1), want, 0, 0);
    ampc_tensor_free(&out);
    mb_free(&b);
}

Test(onnx_import, legacy_broadcast_attributes_before_opset_7) {
    /* Suffix broadcasting (no axis) is numpy's; an axis is honoured by reshaping input 1. */
    float xv[6] = {1, 2, 3, 4, 5, 6}, yv[3] = {10, 20, 30}, zv[2] = {100, 200};
    mb b;
    mb_init(&b, 3, 6);
    mb_input(&b, "x", OT_FLOAT, "2,3");
    mb_initializer(&b, mb_tensor_raw(&b, "y", OT_FLOAT, 1, (int64_t[]){3}, yv, sizeof yv));
    Onnx__NodeProto *n = mb_node(&b, "Add", "a", "x,y", "s");
    mb_attr_i(&b, n, "broadcast", 1);
    mb_output(&b, "s", OT_FLOAT, NULL);
    ampc_tensor out = run_unary_model(&b, "2,3", xv, SHAPE(2, 3));
    double want[6] = {11, 22, 33, 14, 25, 36};
    t_expect_close(&out, SHAPE(2, 3), want, 0, 0);
    ampc_tensor_free(&out);
    mb_free(&b);

    mb_init(&b, 3, 6);
    mb_input(&b, "x", OT_FLOAT, "2,3");
    mb_initializer(&b, mb_tensor_raw(&b, "z", OT_FLOAT, 1, (int64_t[]){2}, zv, sizeof zv));
    n = mb_node(&b, "Mul", "m", "x,z", "s");
    mb_attr_i(&b, n, "broadcast", 1);
    mb_attr_i(&b, n, "axis", 0);
    mb_output(&b, "s", OT_FLOAT, NULL);
    out = run_unary_model(&b, "2,3", xv, SHAPE(2, 3));
    double want2[6] = {100, 200, 300, 800, 1000, 1200};
    t_expect_close(&out, SHAPE(2, 3), want2, 0, 0);
    ampc_tensor_free(&out);
    mb_free(&b);
}

Test(onnx_import, softmax_before_13_coerces_to_2d) {
    /* Softmax-11 with axis=1 on [2,2,2] normalises over the last 4 elements of each batch row. */
    mb b;
    mb_init(&b, 6, 11);
    mb_input(&b, "x", OT_FLOAT, "2,2,2");
    Onnx__NodeProto *n = mb_node(&b, "Softmax", "sm", "x", "y");
    mb_attr_i(&b, n, "axis", 1);
    mb_output(&b, "y", OT_FLOAT, "2,2,2");
    float xv[8] = {0, 1, 2, 3, 1, 1, 1, 1};
    ampc_tensor out = run_unary_model(&b, "2,2,2", xv, SHAPE(2, 2, 2));
    double want[8], s = 0;
    for (int i = 0; i < 4; i++) s += exp(xv[i]);
    for (int i = 0; i < 4; i++) want[i] = exp(xv[i]) / s;
    for (int i = 4; i < 8; i++) want[i] = 0.25;
    t_expect_close(&out, SHAPE(2, 2, 2), want, 1e-6, 0);
    ampc_tensor_free(&out);
    mb_free(&b);
}

Test(onnx_import, dropout_ratio_and_cast_string_type_of_old_opsets) {
    mb b;
    mb_init(&b, 3, 1);
    mb_input(&b, "x", OT_FLOAT, "2");
    Onnx__NodeProto *n = mb_node(&b, "Dropout", "d", "x", "t");
    mb_attr_f(&b, n, "ratio", 0.25f);
    mb_attr_i(&b, n, "is_test", 1);
    n = mb_node(&b, "Cast", "c", "t", "y");
    mb_attr_s(&b, n, "to", "INT32");
    mb_output(&b, "y", OT_INT32, NULL);
    ampc_graph *g = import_ok(&b, NULL, NULL);
    const ampc_node *d = g->nodes[0];
    cr_assert_eq(d->op, AMPC_OP_DROPOUT);
    cr_assert_eq(d->n_attrs, 0, "ratio and is_test are gone");
    cr_assert_eq(d->n_inputs, 2);
    cr_assert_eq(*(float *)d->inputs[1]->data, 0.25f);
    cr_assert_eq(ampc_ir_attr_find(g->nodes[1], "to")->i, 6, "INT32 is code 6");
    float xv[2] = {1.7f, -2.2f};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2), xv);
    ampc_tensor out = eval_out(g, &in, 1, 0);
    int64_t want[2] = {1, -2};
    cr_assert_eq(out.dtype, AMPC_DTYPE_I32);
    t_expect_ints(&out, SHAPE(2), want);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* ---- Constant ------------------------------------------------------------------------------- */

Test(onnx_import, constant_nodes_with_every_value_attribute) {
    mb b;
    mb_init(&b, 8, 13);
    float tv[2] = {0.5f, -1.5f};
    Onnx__NodeProto *n = mb_node(&b, "Constant", "c0", "", "a");
    mb_attr_t(&b, n, "value", mb_tensor_raw(&b, "", OT_FLOAT, 1, (int64_t[]){2}, tv, sizeof tv));
    n = mb_node(&b, "Constant", "c1", "", "b");
    mb_attr_f(&b, n, "value_float", 2.5f);
    n = mb_node(&b, "Constant", "c2", "", "c");
    mb_attr_floats(&b, n, "value_floats", 2, (float[]){1, 2});
    n = mb_node(&b, "Constant", "c3", "", "d");
    mb_attr_i(&b, n, "value_int", -7);
    n = mb_node(&b, "Constant", "c4", "", "e");
    mb_attr_ints(&b, n, "value_ints", 3, (int64_t[]){4, 5, 6});
    mb_node(&b, "Add", "s1", "a,b", "ab");   /* [3, 1] */
    mb_node(&b, "Mul", "s2", "ab,c", "abc"); /* [3, 2] */
    mb_node(&b, "Add", "s3", "d,e", "de");   /* [-3, -2, -1] */
    mb_output(&b, "abc", OT_FLOAT, NULL);
    mb_output(&b, "de", OT_INT64, NULL);
    ampc_graph *g = import_ok(&b, NULL, NULL);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double w1[2] = {3, 2};
    int64_t w2[3] = {-3, -2, -1};
    t_expect_close(&out[0], SHAPE(2), w1, 0, 0);
    t_expect_ints(&out[1], SHAPE(3), w2);
    cr_assert_eq(out[1].dtype, AMPC_DTYPE_I64);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
    mb_free(&b);

    mb_init(&b, 8, 13);
    n = mb_node(&b, "Constant", "two", "", "a");
    mb_attr_f(&b, n, "value_float", 1);
    mb_attr_i(&b, n, "value_int", 1);
    mb_output(&b, "a", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_UNSUPPORTED,
                 "node 0 'two' (Constant): a Constant needs exactly one value attribute (value, "
                 "value_float(s), value_int(s)), got 2");
    mb_free(&b);
}

/* ---- symbolic dims and options -------------------------------------------------------------- */

static void symbolic_model(mb *b) {
    mb_init(b, 8, 13);
    mb_input(b, "x", OT_FLOAT, "N,3");
    mb_input(b, "z", OT_FLOAT, "N,3");
    mb_node(b, "Add", "add", "x,z", "y");
    mb_output(b, "y", OT_FLOAT, "N,3");
}

Test(onnx_import, symbolic_dims_need_a_shape_or_a_batch_bound) {
    mb b;
    symbolic_model(&b);
    import_fails(&b, NULL, NULL, AMPC_E_SHAPE,
                 "graph input 'x' dim 0 is the symbol 'N', which has no value: give the input's "
                 "shape with --shape x=AxBxC (declared [N,3]), or bound a batch dim 0 with "
                 "--max-batch N\ngraph input 'z' dim 0 is the symbol 'N'");

    /* A shape for x binds N for z too. */
    ampc_input_shape sh = {"x", {2, {5, 3}}};
    ampc_import_options o = {.shapes = &sh, .n_shapes = 1};
    ampc_graph *g = import_ok(&b, NULL, &o);
    ampc_shape zs = ampc_value_shape(ampc_graph_input(g, 1));
    cr_assert(zs.rank == 2 && zs.dims[0] == 5 && zs.dims[1] == 3);
    ampc_graph_destroy(g);

    /* --max-batch fixes dim 0. */
    ampc_import_options ob = {.max_batch = 4};
    g = import_ok(&b, NULL, &ob);
    cr_assert_eq(ampc_value_shape(ampc_graph_input(g, 0)).dims[0], 4);
    float xv[12], zv[12];
    for (int i = 0; i < 12; i++) xv[i] = (float)i, zv[i] = 1;
    ampc_tensor in[2] = {t_tensor(AMPC_DTYPE_F32, SHAPE(4, 3), xv),
                         t_tensor(AMPC_DTYPE_F32, SHAPE(4, 3), zv)};
    ampc_tensor out = eval_out(g, in, 2, 0);
    cr_assert_eq(((float *)out.data)[11], 12.0f);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    /* Shapes that contradict the model, or name no input. */
    ampc_input_shape bad[2] = {{"x", {2, {5, 4}}}, {"zz", {1, {1}}}};
    ampc_import_options o2 = {.shapes = bad, .n_shapes = 2};
    import_fails(&b, NULL, &o2, AMPC_E_INVALID_ARG,
                 "--shape names 'zz', which is not a graph input (the inputs are 'x', 'z')");
    o2.n_shapes = 1;
    import_fails(&b, NULL, &o2, AMPC_E_SHAPE,
                 "the shape given for input 'x' has dim 1 = 4, but the model fixes it to 3 [N,3]");
    bad[0].shape.rank = 3;
    import_fails(&b, NULL, &o2, AMPC_E_SHAPE,
                 "the shape given for input 'x' has rank 3, but the model declares rank 2 [N,3]");
    ampc_input_shape two[2] = {{"x", {2, {5, 3}}}, {"z", {2, {6, 3}}}};
    ampc_import_options o3 = {.shapes = two, .n_shapes = 2};
    import_fails(&b, NULL, &o3, AMPC_E_SHAPE,
                 "symbol 'N' is 6 in the shape given for input 'z' but 5 in the one given for 'x'");
    mb_free(&b);
}

Test(onnx_import, unknown_dims_and_missing_shapes) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "2,?");
    mb_input(&b, "s", OT_FLOAT, "B,seq");
    mb_input(&b, "r", OT_FLOAT, NULL);
    mb_node(&b, "Relu", "a", "x", "y1");
    mb_node(&b, "Relu", "b", "s", "y2");
    mb_node(&b, "Relu", "c", "r", "y3");
    mb_output(&b, "y1", OT_FLOAT, NULL);
    mb_output(&b, "y2", OT_FLOAT, NULL);
    mb_output(&b, "y3", OT_FLOAT, NULL);
    ampc_import_options o = {.max_batch = 8};
    import_fails(
        &b, NULL, &o, AMPC_E_SHAPE,
        "graph input 'x' dim 1 has no size (neither a value nor a symbol): give the "
        "input's shape with --shape x=AxBxC (declared [2,?]), or bound a batch dim 0 with "
        "--max-batch N\n"
        "graph input 's' dim 1 is the symbol 'seq', which has no value: give the input's "
        "shape with --shape s=AxBxC (declared [B,seq]), or bound a batch dim 0 with "
        "--max-batch N\n"
        "graph input 'r' has no shape in the model (not even a rank): give it with --shape "
        "r=AxBxC");
    mb_free(&b);
}

Test(onnx_import, inputs_bound_to_constants_and_initializer_inputs) {
    mb b;
    mb_init(&b, 3, 9);
    mb_input(&b, "a", OT_FLOAT, "2");
    mb_input(&b, "b", OT_FLOAT, "2");
    mb_input(&b, "w", OT_FLOAT, "2"); /* IR 3: initializers are listed as inputs too */
    float wv[2] = {100, 200};
    mb_initializer(&b, mb_tensor_raw(&b, "w", OT_FLOAT, 1, (int64_t[]){2}, wv, sizeof wv));
    mb_node(&b, "Sum", "s", "a,b,w", "y");
    mb_output(&b, "y", OT_FLOAT, NULL);

    float bv[2] = {10, 20};
    ampc_input_binding bind = {"b", t_tensor(AMPC_DTYPE_F32, SHAPE(2), bv)};
    ampc_import_options o = {.constants = &bind, .n_constants = 1};
    ampc_graph *g = import_ok(&b, NULL, &o);
    cr_assert_eq(ampc_graph_input_count(g), 1, "b is bound and w has an initializer");
    cr_assert_str_eq(ampc_value_name(ampc_graph_input(g, 0)), "a");
    float av[2] = {1, 2};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2), av);
    ampc_tensor out = eval_out(g, &in, 1, 0);
    double want[2] = {111, 222};
    t_expect_close(&out, SHAPE(2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);

    int64_t iv[2] = {1, 2};
    bind.value = t_tensor(AMPC_DTYPE_I64, SHAPE(2), iv);
    import_fails(&b, NULL, &o, AMPC_E_DTYPE,
                 "constant binding for input 'b' is i64, but the model declares f32");
    bind.name = "w";
    import_fails(&b, NULL, &o, AMPC_E_INVALID_ARG,
                 "constant binding names 'w', which has an initializer: it is a constant of the "
                 "model, not an input");
    mb_free(&b);
}

/* ---- functions ------------------------------------------------------------------------------ */

Test(onnx_import, model_local_functions_are_expanded) {
    mb b;
    mb_init(&b, 8, 13);
    mb_opset(&b, "custom", 1);
    Onnx__FunctionProto *f = mb_function(&b, "custom", "AddRelu", "p,q", "r", 13);
    mb_fn_node(&b, f, "Add", "add", "p,q", "t");
    mb_fn_node(&b, f, "Relu", "relu", "t", "r");
    mb_input(&b, "x", OT_FLOAT, "3");
    float wv[3] = {1, -5, 0};
    mb_initializer(&b, mb_tensor_raw(&b, "w", OT_FLOAT, 1, (int64_t[]){3}, wv, sizeof wv));
    Onnx__NodeProto *n = mb_node(&b, "AddRelu", "call1", "x,w", "y1");
    n->domain = "custom";
    n = mb_node(&b, "AddRelu", "call2", "y1,y1", "y2"); /* twice: names must not clash */
    n->domain = "custom";
    mb_output(&b, "y2", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b, NULL, NULL);
    cr_assert_eq(ampc_graph_node_count(g), 4);
    float xv[3] = {1, 2, -3};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(3), xv);
    ampc_tensor out = eval_out(g, &in, 1, 0);
    double want[3] = {4, 0, 0}; /* relu(2 * relu(x + w)) */
    t_expect_close(&out, SHAPE(3), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* Packs an AttributeProto (as FunctionProto.attribute_proto of a newer schema would carry it). */
static void add_default_attr(mb *b, Onnx__FunctionProto *f, const char *name, float v) {
    Onnx__AttributeProto *a = mb_attr(b, NULL, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
    size_t n = onnx__attribute_proto__get_packed_size(a);
    uint8_t *buf = mb_alloc(b, n);
    onnx__attribute_proto__pack(a, buf);
    mb_unknown_bytes(b, &f->base, 11, buf, n);
}

Test(onnx_import, function_attributes_references_and_defaults) {
    /* Scale(x) = x * alpha, alpha defaulting to 2 (attribute_proto, an IR 9 field). */
    mb b;
    mb_init(&b, 9, 15);
    mb_opset(&b, "custom", 1);
    Onnx__FunctionProto *f = mb_function(&b, "custom", "Scale", "x", "y", 15);
    add_default_attr(&b, f, "alpha", 2);
    Onnx__NodeProto *c = mb_fn_node(&b, f, "Constant", "k", "", "k");
    mb_attr_ref(&b, c, "value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "alpha");
    mb_fn_node(&b, f, "Mul", "m", "x,k", "y");
    mb_input(&b, "x", OT_FLOAT, "2");
    Onnx__NodeProto *n = mb_node(&b, "Scale", "s_default", "x", "y2");
    n->domain = "custom";
    n = mb_node(&b, "Scale", "s_three", "x", "y3");
    n->domain = "custom";
    mb_attr_f(&b, n, "alpha", 3);
    mb_output(&b, "y2", OT_FLOAT, NULL);
    mb_output(&b, "y3", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b, NULL, NULL);
    float xv[2] = {1, -2};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2), xv), out[2];
    cr_assert_eq(ampc_graph_evaluate(g, &in, 1, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double w2[2] = {2, -4}, w3[2] = {3, -6};
    t_expect_close(&out[0], SHAPE(2), w2, 0, 0);
    t_expect_close(&out[1], SHAPE(2), w3, 0, 0);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_import, function_overloads_from_a_newer_schema) {
    /* Two functions custom::F told apart by `overload` (IR 10: NodeProto field 8, FunctionProto
     * field 13), which the ONNX 1.12 schema does not know. */
    mb b;
    mb_init(&b, 10, 18);
    mb_opset(&b, "custom", 1);
    Onnx__FunctionProto *fa = mb_function(&b, "custom", "F", "x", "y", 18);
    mb_fn_node(&b, fa, "Relu", "r", "x", "y");
    mb_unknown_bytes(&b, &fa->base, 13, "a", 1);
    Onnx__FunctionProto *fb = mb_function(&b, "custom", "F", "x", "y", 18);
    mb_fn_node(&b, fb, "Neg", "n", "x", "y");
    mb_unknown_bytes(&b, &fb->base, 13, "b", 1);
    mb_input(&b, "x", OT_FLOAT, "2");
    Onnx__NodeProto *n = mb_node(&b, "F", "call", "x", "y");
    n->domain = "custom";
    mb_unknown_bytes(&b, &n->base, 8, "b", 1);
    mb_output(&b, "y", OT_FLOAT, NULL);
    ampc_graph *g = import_ok(&b, NULL, NULL);
    cr_assert_eq(g->nodes[0]->op, AMPC_OP_NEG, "overload 'b' is the Neg one");
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_import, recursive_and_unsupported_function_bodies_in_coverage) {
    mb b;
    mb_init(&b, 8, 13);
    mb_opset(&b, "custom", 1);
    Onnx__FunctionProto *f = mb_function(&b, "custom", "Loop", "x", "y", 13);
    Onnx__NodeProto *inner = mb_fn_node(&b, f, "Loop", "again", "x", "y");
    inner->domain = "custom";
    Onnx__FunctionProto *h = mb_function(&b, "custom", "Bad", "x", "y", 13);
    mb_fn_node(&b, h, "NotAnOp", "bad", "x", "y");
    mb_input(&b, "x", OT_FLOAT, "2");
    Onnx__NodeProto *n = mb_node(&b, "Loop", "call", "x", "y1");
    n->domain = "custom";
    n = mb_node(&b, "Bad", "call2", "x", "y2");
    n->domain = "custom";
    mb_output(&b, "y1", OT_FLOAT, NULL);
    mb_output(&b, "y2", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_UNSUPPORTED,
                 "2 nodes are not supported:\n"
                 "  node 0 'call' (custom::Loop) > body node 0 'again' (custom::Loop): function "
                 "'Loop' calls itself (directly or through others)\n"
                 "  node 1 'call2' (custom::Bad) > body node 0 'bad' (NotAnOp): op not in ampc's "
                 "op table");
    mb_free(&b);
}

/* ---- diagnostics, outputs, value_info ------------------------------------------------------- */

Test(onnx_import, inference_errors_name_the_onnx_node_and_all_are_reported) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "2,3");
    mb_input(&b, "v", OT_FLOAT, "4");
    mb_node(&b, "Relu", "ok", "x", "r");
    mb_node(&b, "Add", "bad_add", "r,v", "s");
    mb_node(&b, "Neg", "after", "s", "t"); /* poisoned silently */
    mb_node(&b, "Sub", "bad_sub", "v,x", "u");
    mb_output(&b, "t", OT_FLOAT, NULL);
    mb_output(&b, "u", OT_FLOAT, NULL);
    import_fails(&b, NULL, NULL, AMPC_E_SHAPE,
                 "node 1 'bad_add' (Add): input shapes do not broadcast: input 1 'v' is [4], but "
                 "dimension 0 is 4 where the other inputs give 3\n"
                 "node 3 'bad_sub' (Sub): input shapes do not broadcast");
    mb_free(&b);
}

Test(onnx_import, outputs_that_are_inputs_and_value_info_disagreement) {
    mb b;
    mb_init(&b, 8, 13);
    mb_input(&b, "x", OT_FLOAT, "2");
    mb_node(&b, "Relu", "r", "x", "y");
    Onnx__ValueInfoProto *vi = mb_value_info(&b, "y", OT_FLOAT, "7");
    MB_PUSH(&b, b.graph.value_info, b.graph.n_value_info, vi);
    mb_output(&b, "x", OT_FLOAT, "2");
    mb_output(&b, "y", OT_FLOAT, "2");
    ampc_graph *g = import_ok(&b, NULL, NULL); /* value_info that disagrees does not fail */
    cr_assert_eq(ampc_graph_output_count(g), 2);
    cr_assert_str_eq(ampc_value_name(ampc_graph_output(g, 0)), "x");
    cr_assert_str_eq(ampc_value_name(ampc_graph_output(g, 1)), "y");
    float xv[2] = {-1, 3};
    ampc_tensor in = t_tensor(AMPC_DTYPE_F32, SHAPE(2), xv);
    ampc_tensor out = eval_out(g, &in, 1, 1);
    double want[2] = {0, 3};
    t_expect_close(&out, SHAPE(2), want, 0, 0);
    ampc_tensor_free(&out);
    ampc_graph_destroy(g);
    mb_free(&b);
}

Test(onnx_import, constants_and_initializers_as_graph_outputs) {
    mb b;
    mb_init(&b, 8, 13);
    float wv[2] = {1, 2};
    mb_initializer(&b, mb_tensor_raw(&b, "w", OT_FLOAT, 1, (int64_t[]){2}, wv, sizeof wv));
    Onnx__NodeProto *n = mb_node(&b, "Constant", "c", "", "k");
    mb_attr_ints(&b, n, "value_ints", 2, (int64_t[]){7, 8});
    mb_output(&b, "w", OT_FLOAT, "2");
    mb_output(&b, "k", OT_INT64, "2");
    ampc_graph *g = import_ok(&b, NULL, NULL);
    cr_assert_eq(ampc_graph_input_count(g), 0);
    ampc_tensor out[2];
    cr_assert_eq(ampc_graph_evaluate(g, NULL, 0, out, 2), AMPC_OK, "%s", ampc_graph_errors(g));
    double w[2] = {1, 2};
    int64_t k[2] = {7, 8};
    t_expect_close(&out[0], SHAPE(2), w, 0, 0);
    t_expect_ints(&out[1], SHAPE(2), k);
    ampc_tensor_free(&out[0]);
    ampc_tensor_free(&out[1]);
    ampc_graph_destroy(g);
    mb_free(&b);
}

/* ---- inspect -------------------------------------------------------------------------------- */

static char *inspect_text(const char *path, ampc_status *st) {
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    *st = ampc_onnx_inspect(path, f);
    fclose(f);
    return text;
}

Test(onnx_import, inspect_prints_summary_coverage_and_errors) {
    tmpdir d;
    mk_dir(&d);
    mb b;
    mb_init(&b, 8, 13);
    b.model.producer_name = "crafted";
    b.model.producer_version = "1.0";
    mb_input(&b, "x", OT_FLOAT, "N,3");
    float wv[3] = {1, 2, 3};
    mb_initializer(&b, mb_tensor_raw(&b, "w", OT_FLOAT, 1, (int64_t[]){3}, wv, sizeof wv));
    mb_node(&b, "Add", "a", "x,w", "s");
    mb_node(&b, "Relu", "r1", "s", "t");
    mb_node(&b, "Relu", "r2", "t", "y");
    mb_output(&b, "y", OT_FLOAT, "N,3");
    size_t len;
    uint8_t *buf = mb_pack(&b, &len);
    put_file(&d, "ok.onnx", buf, len);
    mb_node(&b, "Frobnicate", "frob", "y", "z");
    buf = mb_pack(&b, &len);
    put_file(&d, "unsupported.onnx", buf, len);
    put_file(&d, "garbage.onnx", "not a model at all", 18);

    char path[256];
    ampc_status st;
    snprintf(path, sizeof path, "%s/ok.onnx", d.path);
    char *text = inspect_text(path, &st);
    const char *expect[] = {
        "  ir_version: 8\n  producer: crafted 1.0\n  opsets: ai.onnx 13\n",
        "  graph 'test': 3 nodes, 1 initializers (12 bytes)\n",
        "  inputs:\n    x: f32[N,3]\n  outputs:\n    y: f32[N,3]\n",
        "  ops:\n    Relu 2\n    Add 1\n",
        "  coverage: every node is supported\n",
        "  import: needs shapes:\n    graph input 'x' dim 0 is the symbol 'N', which has no "
        "value",
        "  import with --max-batch 1: ok (3 nodes, 1 inputs, 1 outputs in ampc's graph)\n",
    };
    for (int i = 0; i < AMPC_ARRAY_LEN(expect); i++)
        cr_assert(strstr(text, expect[i]), "missing\n%s\nin\n%s", expect[i], text);
    cr_assert_eq(st, AMPC_OK);
    free(text);

    snprintf(path, sizeof path, "%s/unsupported.onnx", d.path);
    text = inspect_text(path, &st);
    cr_assert(strstr(text, "  coverage: 1 node is not supported:\n    node 3 'frob' (Frobnicate): "
                           "op not in ampc's op table\n  import: failed (coverage)\n"), "%s", text);
    cr_assert_eq(st, AMPC_E_UNSUPPORTED);
    free(text);

    snprintf(path, sizeof path, "%s/garbage.onnx", d.path);
    text = inspect_text(path, &st);
    cr_assert(strstr(text, "  error: not an ONNX model"), "%s", text);
    cr_assert_eq(st, AMPC_E_PARSE);
    free(text);

    text = inspect_text("/nonexistent/x.onnx", &st);
    cr_assert(strstr(text, "  error: cannot open '/nonexistent/x.onnx'"), "%s", text);
    cr_assert_eq(st, AMPC_E_IO);
    free(text);
    mb_free(&b);
    rm_dir(&d);
}

/* ---- the ONNX backend test data ------------------------------------------------------------- */

#define NODE_DATA "/usr/share/libonnx-testdata/data/node"

/* Imports NODE_DATA/<test>/model.onnx (the input named `bind` becomes a constant), evaluates it on
 * test_data_set_0 and compares with the expected outputs (rtol 1e-3, atol 1e-7 as ONNX does). */
static void run_node_test(const char *test, const char *bind) {
    char dir[256], path[320];
    snprintf(dir, sizeof dir, NODE_DATA "/%s", test);
    struct stat sb;
    if (stat(dir, &sb) != 0) cr_skip_test("the ONNX test data (%s) is not installed", dir);
    ampc_tensor in[8] = {0}, want[8] = {0};
    char *names[8] = {0};
    int n_in = 0, n_out = 0;
    for (; n_in < 8; n_in++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, n_in);
        if (stat(path, &sb) != 0) break;
        char *err = NULL;
        cr_assert_eq(ampc_tensor_read_file(path, &in[n_in], &names[n_in], &err), AMPC_OK, "%s",
                     err);
    }
    for (; n_out < 8; n_out++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/output_%d.pb", dir, n_out);
        if (stat(path, &sb) != 0) break;
        char *err = NULL;
        cr_assert_eq(ampc_tensor_read_file(path, &want[n_out], NULL, &err), AMPC_OK, "%s", err);
    }
    /* The inputs named in `bind` become constants; the others stay inputs, in order. */
    ampc_input_binding binds[8];
    ampc_tensor rest[8];
    int n_bind = 0, n_rest = 0;
    for (int i = 0; i < n_in; i++) {
        if (bind && !strcmp(bind, names[i]))
            binds[n_bind++] = (ampc_input_binding){names[i], in[i]};
        else rest[n_rest++] = in[i];
    }
    ampc_import_options o = {.constants = binds, .n_constants = n_bind};
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st = ampc_onnx_import_file(path, &o, &g, &err);
    if (st != AMPC_OK && err && strstr(err, "not implemented"))
        cr_skip_test("%s: an op is not implemented yet: %s", test, err);
    cr_assert_eq(st, AMPC_OK, "%s: %s", test, err);
    cr_assert_eq(ampc_graph_output_count(g), n_out);
    ampc_tensor got[8];
    st = ampc_graph_evaluate(g, rest, n_rest, got, n_out);
    if (st != AMPC_OK && strstr(ampc_graph_errors(g), "not implemented"))
        cr_skip_test("%s: an op is not implemented yet: %s", test, ampc_graph_errors(g));
    cr_assert_eq(st, AMPC_OK, "%s: %s", test, ampc_graph_errors(g));
    for (int k = 0; k < n_out; k++) {
        cr_assert_eq(got[k].dtype, want[k].dtype, "%s output %d dtype", test, k);
        int64_t n = ampc_shape_numel(&want[k].shape);
        double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
        for (int64_t i = 0; i < n; i++) w[i] = ampc_ref_load_f64(want[k].data, want[k].dtype, i);
        t_expect_close(&got[k], want[k].shape, w, 1e-3, 1e-7);
        free(w);
        ampc_tensor_free(&got[k]);
        ampc_tensor_free(&want[k]);
    }
    for (int i = 0; i < n_in; i++) {
        ampc_tensor_free(&in[i]);
        free(names[i]);
    }
    ampc_graph_destroy(g);
}

Test(onnx_backend, test_add) { run_node_test("test_add", NULL); }
Test(onnx_backend, test_add_bcast) { run_node_test("test_add_bcast", NULL); }
Test(onnx_backend, test_relu) { run_node_test("test_relu", NULL); }
Test(onnx_backend, test_sigmoid) { run_node_test("test_sigmoid", NULL); }
Test(onnx_backend, test_where_example) { run_node_test("test_where_example", NULL); }
Test(onnx_backend, test_clip_default_min) { run_node_test("test_clip_default_min", NULL); }
Test(onnx_backend, test_matmul_2d) { run_node_test("test_matmul_2d", NULL); }
Test(onnx_backend, test_reduce_sum_keepdims_example) {
    run_node_test("test_reduce_sum_keepdims_example", "axes");
}

/* `ampc inspect` on every model of the suite: it must print a summary and never crash, and no
 * model of the suite is malformed, so none may give a parse or internal error. */
Test(onnx_backend, inspect_every_model_of_the_suite, .timeout = 600) {
    static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    int seen = 0;
    for (int s = 0; s < AMPC_ARRAY_LEN(suites); s++) {
        char dir[256];
        snprintf(dir, sizeof dir, "/usr/share/libonnx-testdata/data/%s", suites[s]);
        DIR *d = opendir(dir);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
            char *text = NULL;
            size_t n = 0;
            FILE *f = open_memstream(&text, &n);
            ampc_status st = ampc_onnx_inspect(path, f);
            fclose(f);
            cr_assert(st != AMPC_E_PARSE && st != AMPC_E_INTERNAL && st != AMPC_E_IO,
                      "%s: %s\n%s", path, ampc_status_str(st), text);
            cr_assert(strstr(text, "  coverage: ") && strstr(text, "  ops:\n"), "%s", text);
            free(text);
            seen++;
        }
        closedir(d);
    }
    if (!seen) cr_skip_test("the ONNX test data is not installed");
    cr_assert_gt(seen, 1000);
}
