/*
 * test_bind.c — inputs that must be known at compile time, given on the command line: `ampc run
 * MODEL.onnx --input NAME=FILE` binds the inputs that set a shape, axes, sizes or pads (an
 * Unsqueeze's axes) and keeps the others run-time inputs; `-o` / `--emit` take `--bind NAME=FILE`,
 * which makes the input a constant of the build (the header no longer lists it) and refuses an
 * input read only at run time, a name the model does not have, a file of another type, and IR
 * text; without a value the error says how to give one. And `ampc inspect` says whether `-o`
 * builds the model (its GPU line: the same pipeline and code generation), with -o's own reason
 * when it does not (a 1-D DeformConv, which has no GPU lowering yet).
 */
#include "support.h"

#include "../onnx/onnx_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ampc(out, ...) t_ampc((out), 120, __VA_ARGS__)

/* Writes the model b builds to path and frees the builder. */
static void save(mb *b, const char *path) {
    size_t len;
    uint8_t *buf = mb_pack(b, &len);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    mb_free(b);
}

/* y = Relu(Unsqueeze(x [2, 3], axes [1])), axes a graph input (opset 18). */
static void write_model(const char *path) {
    mb b;
    mb_init(&b, 8, 18);
    mb_input(&b, "x", OT_FLOAT, "2,3");
    mb_input(&b, "axes", OT_INT64, "1");
    mb_output(&b, "y", OT_FLOAT, NULL);
    mb_node(&b, "Unsqueeze", "unsqueeze", "x,axes", "u");
    mb_node(&b, "Relu", "relu", "u", "y");
    save(&b, path);
}

typedef struct files {
    char *dir, model[512], x[512], axes[512], axes32[512];
} files;

static files make_files(void) {
    files f = {.dir = t_tmpdir("bind")};
    snprintf(f.model, sizeof f.model, "%s/m.onnx", f.dir);
    snprintf(f.x, sizeof f.x, "%s/x.npy", f.dir);
    snprintf(f.axes, sizeof f.axes, "%s/axes.npy", f.dir);
    snprintf(f.axes32, sizeof f.axes32, "%s/axes32.npy", f.dir);
    write_model(f.model);
    float xv[6] = {-2, -1, 0, 1, 2, 3};
    int64_t av[1] = {1};
    int32_t a32[1] = {1};
    ampc_tensor xt = {AMPC_DTYPE_F32, {2, {2, 3}}, xv}, at = {AMPC_DTYPE_I64, {1, {1}}, av},
                a32t = {AMPC_DTYPE_I32, {1, {1}}, a32};
    char *err = NULL;
    cr_assert_eq(ampc_tensor_write_npy(f.x, &xt, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc_tensor_write_npy(f.axes, &at, &err), AMPC_OK, "%s", err ? err : "");
    cr_assert_eq(ampc_tensor_write_npy(f.axes32, &a32t, &err), AMPC_OK, "%s", err ? err : "");
    return f;
}

Test(bind, run_binds_the_compile_time_inputs_it_is_given) {
    files f = make_files();
    char *out;
    cr_assert_eq(ampc(&out, "run %s --reference --input x=%s --input axes=%s --save-outputs %s/out",
                      f.model, f.x, f.axes, f.dir), 0, "%s", out);
    cr_assert(strstr(out, "input 'axes' bound at compile time"), "%s", out);
    cr_assert_null(strstr(out, "input 'x' bound"), "x stays a run-time input: %s", out);
    free(out);
    char y[600], *err = NULL;
    snprintf(y, sizeof y, "%s/out/y.npy", f.dir);
    ampc_tensor t;
    cr_assert_eq(ampc_tensor_read_file(y, &t, NULL, &err), AMPC_OK, "%s", err ? err : "");
    double want[6] = {0, 0, 0, 1, 2, 3};
    t_expect_close(&t, SHAPE(2, 1, 3), want, 0, 0);
    ampc_tensor_free(&t);
    /* Without the value: the error names the input and says how to give it. */
    cr_assert_eq(ampc(&out, "run %s --reference --input x=%s", f.model, f.x), 1);
    cr_assert(strstr(out, "input 1 'axes' must be known at compile time"), "%s", out);
    cr_assert(strstr(out, "--bind NAME=FILE"), "%s", out);
    free(out);
    t_rmdir_all(f.dir);
}

Test(bind, bind_makes_the_input_a_constant_of_the_build) {
    files f = make_files();
    char *out;
    cr_assert_eq(ampc(&out, "%s --emit ir -o - --bind axes=%s", f.model, f.axes), 0, "%s", out);
    cr_assert(strstr(out, "const %axes : i64[1] = [1]"), "%s", out);
    cr_assert(strstr(out, "input %x : f32[2,3]"), "%s", out);
    cr_assert_null(strstr(out, "input %axes"), "%s", out);
    free(out);
    /* The library's header lists x only. */
    char lib[600], hdr[600];
    snprintf(lib, sizeof lib, "%s/m.so", f.dir);
    snprintf(hdr, sizeof hdr, "%s/m.h", f.dir);
    cr_assert_eq(ampc(&out, "%s -o %s --bind axes=%s", f.model, lib, f.axes), 0, "%s", out);
    free(out);
    char *h = t_read_text(hdr);
    cr_assert(strstr(h, "#define m_N_INPUTS 1\n"), "%s", h);
    cr_assert(strstr(h, "/* input 0: 'x' f32[2,3], 24 bytes */"), "%s", h);
    cr_assert_null(strstr(h, "'axes'"), "%s", h);
    free(h);
    t_rmdir_all(f.dir);
}

Test(bind, bind_refuses_what_it_cannot_bind) {
    files f = make_files();
    char *out, ir[600];
    /* an input read only at run time */
    cr_assert_eq(ampc(&out, "%s --emit ir -o - --bind axes=%s --bind x=%s", f.model, f.axes, f.x), 1);
    cr_assert(strstr(out, "the model reads input 'x' at run time only"), "%s", out);
    free(out);
    /* a name the model does not have */
    cr_assert_eq(ampc(&out, "%s --emit ir -o - --bind axs=%s", f.model, f.axes), 1);
    cr_assert(strstr(out, "'axs', which is not a graph input (the inputs are 'x', 'axes')"), "%s", out);
    free(out);
    /* a file of another type than the input's */
    cr_assert_eq(ampc(&out, "%s --emit ir -o - --bind axes=%s", f.model, f.axes32), 1);
    cr_assert(strstr(out, "'axes' is i32, but the model declares i64"), "%s", out);
    free(out);
    /* not NAME=FILE, a missing file */
    cr_assert_eq(ampc(&out, "%s --emit ir -o - --bind axes", f.model), 1);
    cr_assert(strstr(out, "--bind 'axes' is not NAME=FILE"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir -o - --bind axes=%s/none.npy", f.model, f.dir), 1);
    cr_assert(strstr(out, "none.npy"), "%s", out);
    free(out);
    /* IR text holds its constants itself */
    snprintf(ir, sizeof ir, "%s/m.ir", f.dir);
    t_write_text(ir, "graph \"g\" {\n  input %x : f32[2]\n  %y : f32[2] = Relu(%x)\n  output %y\n}\n");
    cr_assert_eq(ampc(&out, "%s --emit ir -o - --bind x=%s", ir, f.x), 1);
    cr_assert(strstr(out, "--bind applies to ONNX models"), "%s", out);
    free(out);
    t_rmdir_all(f.dir);
}

/* A 1-D DeformConv (a GPU build runs only 2-D ones): what inspect calls not buildable. */
static void write_deform_conv(const char *path) {
    mb b;
    mb_init(&b, 8, 19);
    mb_input(&b, "x", OT_FLOAT, "1,1,3");
    mb_input(&b, "off", OT_FLOAT, "1,2,2");
    mb_output(&b, "y", OT_FLOAT, NULL);
    float w[2] = {0.1f, 0.1f};
    mb_initializer(&b, mb_tensor_raw(&b, "W", OT_FLOAT, 3, (int64_t[]){1, 1, 2}, w, sizeof w));
    mb_node(&b, "DeformConv", "dc", "x,W,off", "y");
    save(&b, path);
}

Test(bind, inspect_says_what_o_does) {
    files f = make_files();
    char *out, dc[600], lib[600];
    cr_assert_eq(ampc(&out, "inspect %s --bind axes=%s", f.model, f.axes), 0, "%s", out);
    cr_assert(strstr(out, "GPU build: ok (1 step; `ampc MODEL -o MODEL.so` builds it)"), "%s", out);
    free(out);
    snprintf(dc, sizeof dc, "%s/dc.onnx", f.dir);
    snprintf(lib, sizeof lib, "%s/dc.so", f.dir);
    write_deform_conv(dc);
    cr_assert_eq(ampc(&out, "inspect %s", dc), 0, "%s", out);
    cr_assert(strstr(out, "GPU build: not possible; `-o` refuses it with:"), "%s", out);
    const char *reason = "a DeformConv over other than 2 spatial dims has no GPU lowering yet";
    cr_assert(strstr(out, reason), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s", dc, lib), 1);
    cr_assert(strstr(out, reason), "-o gives the reason inspect gave: %s", out);
    free(out);
    t_rmdir_all(f.dir);
}
