/*
 * test_tensor_io.c — tensor files: numpy .npy (format 1.0 to 3.0, every dtype, scalars and empty
 * arrays, hand-written headers, hostile files) and ONNX TensorProto .pb (every encoding, external
 * data relative to the file, bad files), read with ampc_tensor_read_file and written with
 * ampc_tensor_write_npy / ampc_tensor_write_pb.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "onnx_builder.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static void setup(void) {
    strcpy(dir, "/tmp/ampc-tio-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

/* Removes every file in the folder (only files this suite wrote are there), then the folder. */
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(tensor_io, .init = setup, .fini = teardown);

static const char *path_of(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_bytes(const char *name, const void *data, size_t n) {
    FILE *f = fopen(path_of(name), "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* Reads a file and asserts success. */
static ampc_tensor read_ok(const char *name, char **tname) {
    ampc_tensor t;
    char *err = NULL;
    ampc_status st = ampc_tensor_read_file(path_of(name), &t, tname, &err);
    cr_assert_eq(st, AMPC_OK, "%s: %s", name, err ? err : "");
    cr_assert_null(err);
    return t;
}

/* Reads a file and asserts the failure status and a message containing needle. */
static void read_fails(const char *name, ampc_status want, const char *needle) {
    ampc_tensor t = {AMPC_DTYPE_F32, {1, {1}}, (void *)1};
    char *err = NULL, *tname = (char *)1;
    ampc_status st = ampc_tensor_read_file(path_of(name), &t, &tname, &err);
    cr_assert_eq(st, want, "%s: got %s: %s", name, ampc_status_str(st), err ? err : "");
    cr_assert_null(t.data, "a failed read leaves no data");
    cr_assert_null(tname);
    cr_assert(err && strstr(err, needle), "%s: expected\n  %s\ngot\n  %s", name, needle,
              err ? err : "(null)");
    free(err);
}

/* A .npy file from a header dict and data, in format `major`. */
static void write_npy(const char *name, int major, const char *dict, const void *data, size_t n) {
    uint8_t buf[512];
    size_t hl = strlen(dict), at;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major, buf[7] = 0;
    if (major == 1) {
        buf[8] = (uint8_t)hl, buf[9] = (uint8_t)(hl >> 8);
        at = 10;
    } else {
        buf[8] = (uint8_t)hl, buf[9] = (uint8_t)(hl >> 8), buf[10] = 0, buf[11] = 0;
        at = 12;
    }
    memcpy(buf + at, dict, hl);
    if (n) memcpy(buf + at + hl, data, n);
    write_bytes(name, buf, at + hl + n);
}

/* ---- numpy ---------------------------------------------------------------------------------- */

Test(tensor_io, npy_round_trip_every_dtype) {
    static const ampc_dtype dts[] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_F64,
                                     AMPC_DTYPE_I64, AMPC_DTYPE_I32, AMPC_DTYPE_I16,
                                     AMPC_DTYPE_I8,  AMPC_DTYPE_U64, AMPC_DTYPE_U32,
                                     AMPC_DTYPE_U16, AMPC_DTYPE_U8,  AMPC_DTYPE_BOOL};
    for (int k = 0; k < AMPC_ARRAY_LEN(dts); k++) {
        uint8_t data[6 * 8];
        for (int i = 0; i < (int)sizeof data; i++) data[i] = (uint8_t)(i * 37 + k);
        if (dts[k] == AMPC_DTYPE_BOOL)
            for (int i = 0; i < 6; i++) data[i] &= 1;
        ampc_tensor t = {dts[k], {2, {2, 3}}, data};
        char *err = NULL;
        cr_assert_eq(ampc_tensor_write_npy(path_of("t.npy"), &t, &err), AMPC_OK, "%s", err);
        char *name;
        ampc_tensor r = read_ok("t.npy", &name);
        cr_assert_str_eq(name, "t");
        cr_assert_eq(r.dtype, dts[k], "%s", ampc_dtype_name(dts[k]));
        cr_assert(ampc_shape_eq(&r.shape, &t.shape));
        cr_assert(!memcmp(r.data, data, 6 * ampc_dtype_size(dts[k])), "%s",
                  ampc_dtype_name(dts[k]));
        ampc_tensor_free(&r);
        free(name);
    }
}

Test(tensor_io, npy_header_is_what_numpy_writes) {
    float v[3] = {1, 2, 3};
    ampc_tensor t = {AMPC_DTYPE_F32, {1, {3}}, v};
    cr_assert_eq(ampc_tensor_write_npy(path_of("v.npy"), &t, NULL), AMPC_OK);
    FILE *f = fopen(path_of("v.npy"), "rb");
    uint8_t buf[256];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    /* The dict padded with spaces to a 64-byte boundary: 10 + 118 = 128 bytes, then the data. */
    cr_assert_eq(n, 128 + 12, "a 128-byte header and 12 bytes of data, got %zu bytes", n);
    cr_assert(!memcmp(buf, "\x93NUMPY\x01\x00\x76\x00", 10));
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    cr_assert(!memcmp(buf + 10, dict, strlen(dict)));
    for (size_t i = 10 + strlen(dict); i < 127; i++) cr_assert_eq(buf[i], ' ');
    cr_assert_eq(buf[127], '\n');
    cr_assert(!memcmp(buf + 128, v, 12));
}

Test(tensor_io, npy_scalars_empty_arrays_and_rank_8) {
    double s = -2.5;
    ampc_tensor t = {AMPC_DTYPE_F64, {0, {0}}, &s};
    cr_assert_eq(ampc_tensor_write_npy(path_of("s.npy"), &t, NULL), AMPC_OK);
    ampc_tensor r = read_ok("s.npy", NULL);
    cr_assert_eq(r.shape.rank, 0);
    cr_assert_eq(*(double *)r.data, -2.5);
    ampc_tensor_free(&r);

    ampc_tensor e = {AMPC_DTYPE_I32, {2, {0, 5}}, NULL};
    cr_assert_eq(ampc_tensor_write_npy(path_of("e.npy"), &e, NULL), AMPC_OK);
    r = read_ok("e.npy", NULL);
    cr_assert(r.shape.rank == 2 && r.shape.dims[0] == 0 && r.shape.dims[1] == 5);
    ampc_tensor_free(&r);

    uint8_t ones[1] = {1};
    ampc_tensor r8 = {AMPC_DTYPE_U8, {8, {1, 1, 1, 1, 1, 1, 1, 1}}, ones};
    cr_assert_eq(ampc_tensor_write_npy(path_of("r8.npy"), &r8, NULL), AMPC_OK);
    r = read_ok("r8.npy", NULL);
    cr_assert_eq(r.shape.rank, 8);
    ampc_tensor_free(&r);
}

Test(tensor_io, npy_versions_2_and_3_and_hand_written_headers) {
    int16_t v[4] = {-1, 2, -3, 4};
    write_npy("v2.npy", 2, "{\"descr\":\"<i2\",\"fortran_order\":False,\"shape\":(2,2)}", v, 8);
    ampc_tensor r = read_ok("v2.npy", NULL);
    cr_assert_eq(r.dtype, AMPC_DTYPE_I16);
    cr_assert(r.shape.rank == 2 && r.shape.dims[1] == 2);
    cr_assert_eq(((int16_t *)r.data)[2], -3);
    ampc_tensor_free(&r);

    uint8_t b[3] = {0, 2, 1};
    write_npy("v3.npy", 3, "{'shape': (3L,), 'fortran_order': False, 'descr': '|b1'}  \n", b, 3);
    r = read_ok("v3.npy", NULL);
    cr_assert_eq(r.dtype, AMPC_DTYPE_BOOL);
    cr_assert(((uint8_t *)r.data)[1] == 1, "non-zero bytes read as true (1)");
    ampc_tensor_free(&r);

    uint16_t h[2] = {0x3c00, 0xc000}; /* 1, -2 */
    write_npy("h.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", h, 4);
    r = read_ok("h.npy", NULL);
    cr_assert_eq(r.dtype, AMPC_DTYPE_F16);
    cr_assert_eq(ampc_f16_to_f32(((uint16_t *)r.data)[1]), -2.0f);
    ampc_tensor_free(&r);
}

Test(tensor_io, bf16_is_written_as_f32) {
    uint16_t v[2] = {0x3f80, 0xc040}; /* 1, -3 */
    ampc_tensor t = {AMPC_DTYPE_BF16, {1, {2}}, v};
    cr_assert_eq(ampc_tensor_write_npy(path_of("b.npy"), &t, NULL), AMPC_OK);
    ampc_tensor r = read_ok("b.npy", NULL);
    cr_assert_eq(r.dtype, AMPC_DTYPE_F32);
    cr_assert_eq(((float *)r.data)[0], 1.0f);
    cr_assert_eq(((float *)r.data)[1], -3.0f);
    ampc_tensor_free(&r);
}

Test(tensor_io, hostile_npy_files) {
    const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    float v[2] = {1, 2};
    write_bytes("magic.npy", "\x93NUMPX\x01\x00", 8);
    read_fails("magic.npy", AMPC_E_PARSE, "is not a numpy .npy file: it does not start with the "
                                          "\\x93NUMPY magic");
    write_bytes("short.npy", "\x93NUMPY\x01", 7);
    read_fails("short.npy", AMPC_E_PARSE, "the numpy header is truncated (7 bytes in the file)");
    write_bytes("hlen.npy", "\x93NUMPY\x01\x00\xff\x7f{}", 12);
    read_fails("hlen.npy", AMPC_E_PARSE, "the numpy header is truncated");
    write_npy("v9.npy", 1, ok, v, 8);
    {
        FILE *f = fopen(path_of("v9.npy"), "r+b");
        fseek(f, 6, SEEK_SET);
        fputc(9, f);
        fclose(f);
    }
    read_fails("v9.npy", AMPC_E_UNSUPPORTED, "numpy format version 9.0 is not supported");
    write_npy("fortran.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", v, 8);
    read_fails("fortran.npy", AMPC_E_UNSUPPORTED, "holds a Fortran-order (column-major) array");
    write_npy("big.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", v, 8);
    read_fails("big.npy", AMPC_E_UNSUPPORTED, "holds big-endian data ('>f4'); ampc reads "
                                              "little-endian ('<') data only");
    write_npy("c8.npy", 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", v, 8);
    read_fails("c8.npy", AMPC_E_UNSUPPORTED, "has numpy type '<c8', which ampc does not support");
    write_npy("size.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", v, 8);
    read_fails("size.npy", AMPC_E_PARSE, "the header says <f4[3] (12 bytes of data), but the file "
                                         "holds 8 bytes after the header");
    write_npy("over.npy", 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", v,
              8);
    read_fails("over.npy", AMPC_E_OVERFLOW, "the array's size overflows 64 bits");
    write_npy("huge.npy", 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", v, 8);
    read_fails("huge.npy", AMPC_E_OVERFLOW, "a dimension in the numpy header overflows 64 bits");
    write_npy("rank9.npy", 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", v, 4);
    read_fails("rank9.npy", AMPC_E_UNSUPPORTED, "the array has more than 8 dimensions");
    write_npy("nokey.npy", 1, "{'descr': '<f4', 'shape': (2,), }", v, 8);
    read_fails("nokey.npy", AMPC_E_PARSE, "the numpy header is not a dict with 'descr', "
                                          "'fortran_order' and 'shape'");
    write_npy("junk.npy", 1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", v, 8);
    read_fails("junk.npy", AMPC_E_PARSE, "(at header byte 34)");
    write_npy("open.npy", 1, "{'descr': '<f4", NULL, 0);
    read_fails("open.npy", AMPC_E_PARSE, "the numpy header is not a dict");
    write_npy("neg.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", v, 8);
    read_fails("neg.npy", AMPC_E_PARSE, "the numpy header is not a dict");
    read_fails("missing.npy", AMPC_E_IO, "cannot open");
    char sub[80];
    snprintf(sub, sizeof sub, "%s/adir.npy", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    read_fails("adir.npy", AMPC_E_IO, "not a regular file");
}

/* ---- TensorProto ---------------------------------------------------------------------------- */

Test(tensor_io, pb_round_trip_keeps_name_dtype_and_bits) {
    uint16_t v[3] = {0x3f80, 0x7fc0, 0x0001}; /* bf16: 1, NaN, the smallest subnormal */
    ampc_tensor t = {AMPC_DTYPE_BF16, {2, {3, 1}}, v};
    char *err = NULL;
    cr_assert_eq(ampc_tensor_write_pb(path_of("t.pb"), &t, "weights", &err), AMPC_OK, "%s", err);
    char *name;
    ampc_tensor r = read_ok("t.pb", &name);
    cr_assert_str_eq(name, "weights");
    cr_assert_eq(r.dtype, AMPC_DTYPE_BF16);
    cr_assert(r.shape.rank == 2 && r.shape.dims[0] == 3 && r.shape.dims[1] == 1);
    cr_assert(!memcmp(r.data, v, sizeof v));
    ampc_tensor_free(&r);
    free(name);
}

/* Packs a TensorProto into a file. */
static void write_proto(const char *name, const Onnx__TensorProto *t) {
    size_t n = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = malloc(n ? n : 1);
    onnx__tensor_proto__pack(t, buf);
    write_bytes(name, buf, n);
    free(buf);
}

Test(tensor_io, pb_typed_fields_and_external_data) {
    mb b;
    mb_init(&b, 0, 0);
    Onnx__TensorProto *t = mb_tensor(&b, "i", OT_INT64, 1, (int64_t[]){3});
    t->int64_data = mb_alloc(&b, 24), t->n_int64_data = 3;
    t->int64_data[0] = -1, t->int64_data[1] = INT64_MAX, t->int64_data[2] = 0;
    write_proto("i.pb", t);
    ampc_tensor r = read_ok("i.pb", NULL);
    cr_assert_eq(r.dtype, AMPC_DTYPE_I64);
    cr_assert_eq(((int64_t *)r.data)[1], INT64_MAX);
    ampc_tensor_free(&r);

    t = mb_tensor(&b, "h", OT_FLOAT16, 0, NULL);
    t->int32_data = mb_alloc(&b, 4), t->n_int32_data = 1;
    t->int32_data[0] = 0xbc00; /* -1 */
    write_proto("h.pb", t);
    r = read_ok("h.pb", NULL);
    cr_assert_eq(r.dtype, AMPC_DTYPE_F16);
    cr_assert_eq(r.shape.rank, 0);
    cr_assert_eq(ampc_f16_to_f32(*(uint16_t *)r.data), -1.0f);
    ampc_tensor_free(&r);

    /* External data next to the .pb file. */
    float w[2] = {0.25f, 8};
    write_bytes("data.bin", w, sizeof w);
    t = mb_tensor(&b, "ext", OT_FLOAT, 1, (int64_t[]){2});
    mb_external(&b, t, "data.bin", NULL, "8");
    write_proto("ext.pb", t);
    r = read_ok("ext.pb", NULL);
    cr_assert_eq(((float *)r.data)[1], 8.0f);
    ampc_tensor_free(&r);
    mb_external(&b, t = mb_tensor(&b, "esc", OT_FLOAT, 1, (int64_t[]){2}), "../data.bin", NULL,
                NULL);
    write_proto("esc.pb", t);
    read_fails("esc.pb", AMPC_E_PARSE, "tensor 'esc' in '");
    read_fails("esc.pb", AMPC_E_PARSE, "external data location '../data.bin' has a '..' component");
    mb_free(&b);
}

Test(tensor_io, bad_pb_files) {
    write_bytes("garbage.pb", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11);
    read_fails("garbage.pb", AMPC_E_PARSE, "is neither a numpy .npy file nor an ONNX TensorProto");
    mb b;
    mb_init(&b, 0, 0);
    Onnx__TensorProto *t = mb_tensor(&b, "s", OT_STRING, 1, (int64_t[]){1});
    write_proto("s.pb", t);
    read_fails("s.pb", AMPC_E_UNSUPPORTED, "has element type STRING, which ampc does not support");
    t = mb_tensor(&b, "n", OT_FLOAT, 1, (int64_t[]){4});
    t->float_data = mb_alloc(&b, 8), t->n_float_data = 2;
    write_proto("n.pb", t);
    read_fails("n.pb", AMPC_E_PARSE, "float_data has 2 values, expected 4 (f32[4])");
    t = mb_tensor(&b, "d", OT_FLOAT, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1});
    write_proto("d.pb", t);
    read_fails("d.pb", AMPC_E_UNSUPPORTED, "has rank 9; ampc supports ranks up to 8");
    Onnx__TensorProto *nt = mb_tensor(&b, "notype", 0, 0, NULL);
    nt->has_data_type = 0;
    write_proto("notype.pb", nt);
    read_fails("notype.pb", AMPC_E_PARSE, "tensor 'notype' in '");
    read_fails("notype.pb", AMPC_E_PARSE, "has no data_type");
    mb_free(&b);
    write_bytes("empty.pb", "", 0);
    read_fails("empty.pb", AMPC_E_PARSE, "has no data_type");
}

Test(tensor_io, invalid_arguments) {
    ampc_tensor t;
    char *err = NULL;
    cr_assert_eq(ampc_tensor_read_file(NULL, &t, NULL, &err), AMPC_E_INVALID_ARG);
    cr_assert(err && strstr(err, "path is NULL"));
    free(err);
    cr_assert_eq(ampc_tensor_read_file("x", NULL, NULL, NULL), AMPC_E_INVALID_ARG);
    ampc_tensor bad = {AMPC_DTYPE_F32, {1, {-1}}, NULL};
    cr_assert_eq(ampc_tensor_write_npy(path_of("bad.npy"), &bad, &err), AMPC_E_INVALID_ARG);
    cr_assert(err && strstr(err, "negative dimension"), "%s", err);
    free(err);
    ampc_tensor nodata = {AMPC_DTYPE_F32, {1, {2}}, NULL};
    cr_assert_eq(ampc_tensor_write_pb(path_of("bad.pb"), &nodata, NULL, &err), AMPC_E_INVALID_ARG);
    cr_assert(err && strstr(err, "data is NULL"), "%s", err);
    free(err);
    float v = 1;
    ampc_tensor ok = {AMPC_DTYPE_F32, {0, {0}}, &v};
    cr_assert_eq(ampc_tensor_write_npy("/nonexistent/dir/x.npy", &ok, &err), AMPC_E_IO);
    cr_assert(err && strstr(err, "cannot create '/nonexistent/dir/x.npy'"), "%s", err);
    free(err);
}
