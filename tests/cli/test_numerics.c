/*
 * test_numerics.c — what `ampc` says and checks about a build's numbers: the `math:` line at
 * every compile for each choice that changes them (TF32, a lower precision, GELU's tanh form,
 * 2:4 pruning, folded scales) and its copies in --report and in the library (`ampc inspect`);
 * --precision auto refusing a build whose checked error misses the tolerance (with --sparsity
 * prune too), --accept-error recording it; the calibration sample layouts.
 */
#define _POSIX_C_SOURCE 200809L
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ampc(out, ...) t_ampc((out), 120, __VA_ARGS__)

/* A product, a scale after it and a GELU: each choice shows on the math: line. */
static const char scaled_text[] =
    "graph \"scaled\" {\n"
    "  input %x : f32[4,8]\n"
    "  const %w : f32[8,8] = [1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8,\n"
    "    1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8, 1, 2, 3, 4, 5, 6, 7, 8,\n"
    "    -1, -2, -3, -4, -5, -6, -7, -8, 1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8]\n"
    "  const %k : f32[] = [0.125]\n"
    "  %y : f32[4,8] = MatMul(%x, %w) @\"mm\"\n"
    "  %z : f32[4,8] = Mul(%y, %k) @\"scale\"\n"
    "  output %z\n"
    "}\n";

static char *model_file(const char *d, const char *name, const char *text) {
    static char path[600];
    snprintf(path, sizeof path, "%s/%s", d, name);
    t_write_text(path, text);
    return path;
}

Test(math, each_choice_that_changes_numbers_is_on_the_math_line, .timeout = 240) {
    char *d = t_tmpdir("num"), *out;
    char *m = model_file(d, "m.ir", scaled_text);
    /* fp32: nothing changes numbers but the folded scale */
    cr_assert_eq(ampc(&out, "%s --emit ir --precision fp32", m), 0, "%s", out);
    cr_assert(strstr(out, "ampc: math: 1 scalar product folded into constant weights\n"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision fp32 --disable-pass fold-scale", m), 0, "%s", out);
    cr_assert(strstr(out, "ampc: math: exact (every op in the model's declared types, one "
                          "rounding each)\n"), "%s", out);
    free(out);
    /* the default: TF32 for the f32 product */
    cr_assert_eq(ampc(&out, "%s --emit cuda -o %s/m.cu --disable-pass fold-scale", m, d), 0, "%s", out);
    cr_assert(strstr(out, "ampc: math: TF32 for 1 f32 matmul/convolution (--precision fp32: off)\n"),
              "%s", out);
    free(out);
    /* fp16: the nodes moved */
    cr_assert_eq(ampc(&out, "%s --emit ir --precision fp16 --disable-pass fold-scale", m), 0, "%s", out);
    cr_assert(strstr(out, "ampc: math: f16 for 2 nodes declared f32 (0 kept in f32)\n"), "%s", out);
    free(out);
    /* 2:4 pruning: each layer, the energy, and the pruned model's measured error */
    cr_assert_eq(ampc(&out, "%s --emit ir --precision fp32 --sparsity prune --disable-pass fold-scale", m),
                 0, "%s", out);
    cr_assert(strstr(out, "ampc: --sparsity prune: MatMul 'mm' (weight [8,8]): "), "%s", out);
    cr_assert(strstr(out, "ampc: --sparsity prune: the pruned model against the model, on 2 "
                          "random samples (the reference evaluator): outputs' error "), "%s", out);
    cr_assert(strstr(out, "ampc: math: 2:4 pruning of 1 layer (--sparsity prune): "), "%s", out);
    cr_assert(strstr(out, "; pruning's measured outputs' error "), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* --report and the library carry the same line; inspect shows it. */
Test(math, report_and_library_record_the_math_line, .timeout = 240) {
    char *d = t_tmpdir("num"), lib[600], report[600], *out;
    char *m = model_file(d, "m.ir", scaled_text);
    snprintf(lib, sizeof lib, "%s/m.so", d);
    snprintf(report, sizeof report, "%s/r.json", d);
    cr_assert_eq(ampc(&out, "%s -o %s --report %s", m, lib, report), 0, "%s", out);
    cr_assert(strstr(out, "ampc: math: TF32 for 1 f32 matmul/convolution (--precision fp32: off); "
                          "1 scalar product folded into constant weights\n"), "%s", out);
    free(out);
    char *json = t_read_text(report);
    cr_assert(strstr(json, "\"math\": \"TF32 for 1 f32 matmul/convolution (--precision fp32: off); "
                           "1 scalar product folded into constant weights\""), "%s", json);
    free(json);
    cr_assert_eq(ampc(&out, "inspect %s", lib), 0, "%s", out);
    cr_assert(strstr(out, "math: TF32 for 1 f32 matmul/convolution (--precision fp32: off); "
                          "1 scalar product folded into constant weights\n"), "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s --precision fp32 --disable-pass fold-scale", m, lib), 0, "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "inspect %s", lib), 0, "%s", out);
    cr_assert(strstr(out, "math: exact (every op in the model's declared types, one rounding "
                          "each)\n"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

/* A product whose 2:4 pruning removes much of the weights: --precision auto's search can move
 * every node back to f32, but the build it ships is pruned, and the check (the build as it
 * ships, on held-out samples) sees it: the build is refused and nothing is written; with
 * --accept-error it is written and the library records the error. */
Test(auto_precision, refuses_a_build_whose_checked_error_misses_the_tolerance, .timeout = 240) {
    char *d = t_tmpdir("num"), lib[600], hdr[600], report[600], *out;
    char *m = model_file(d, "m.ir", scaled_text);
    snprintf(lib, sizeof lib, "%s/m.so", d);
    snprintf(hdr, sizeof hdr, "%s/m.h", d);
    snprintf(report, sizeof report, "%s/r.json", d);
    cr_assert_eq(ampc(&out, "%s -o %s --precision auto --sparsity prune", m, lib), 1, "%s", out);
    cr_assert(strstr(out, "the build as it ships, on the reference evaluator with TF32 emulated, "
                          "on 1 held-out sample: error "), "%s", out);
    cr_assert(strstr(out, ": NOT MET\n"), "%s", out);
    cr_assert(strstr(out, "precision auto: the build would miss --tolerance 0.01 (error "), "%s", out);
    cr_assert(strstr(out, "not written"), "%s", out);
    free(out);
    struct stat st;
    cr_assert_neq(stat(lib, &st), 0, "a refused build leaves no library");
    cr_assert_neq(stat(hdr, &st), 0, "a refused build leaves no header");
    /* the same with --emit ir: refused too */
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --sparsity prune", m), 1, "%s", out);
    free(out);
    cr_assert_eq(ampc(&out, "%s -o %s --precision auto --sparsity prune --accept-error --report %s",
                      m, lib, report), 0, "%s", out);
    cr_assert(strstr(out, "NOT MET, accepted (--accept-error)"), "%s", out);
    cr_assert(strstr(out, "ampc: math: ") && strstr(out, "NOT MET: accepted with --accept-error"),
              "%s", out);
    free(out);
    char *json = t_read_text(report);
    cr_assert(strstr(json, "\"met\": false, \"accepted\": true"), "%s", json);
    free(json);
    cr_assert_eq(ampc(&out, "inspect %s", lib), 0, "%s", out);
    cr_assert(strstr(out, "math: ") && strstr(out, "2:4 pruning of 1 layer") &&
              strstr(out, "--precision auto: outputs' error ") &&
              strstr(out, "NOT MET: accepted with --accept-error"), "%s", out);
    free(out);
    /* without pruning the same model meets the tolerance and is written */
    cr_assert_eq(ampc(&out, "%s -o %s --precision auto", m, lib), 0, "%s", out);
    cr_assert(strstr(out, ": met\n"), "%s", out);
    free(out);
    t_rmdir_all(d);
}

static void write_npy(const char *path, ampc_shape shape, double start) {
    int64_t n = ampc_shape_numel(&shape);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(start + 0.01 * (double)i);
    ampc_tensor t = {AMPC_DTYPE_F32, shape, v};
    char *err = NULL;
    cr_assert_eq(ampc_tensor_write_npy(path, &t, &err), AMPC_OK, "%s", err ? err : "");
    free(v);
}

/* The sample layouts of --calibrate: one folder per sample, K stacked in one file, one sample
 * split along its batch; a file of another shape is refused naming both. */
Test(auto_precision, calibration_samples_in_each_layout, .timeout = 240) {
    char *d = t_tmpdir("num"), cal[600], p[700], *out;
    char *m = model_file(d, "m.ir", scaled_text);
    snprintf(cal, sizeof cal, "%s/folders", d);
    cr_assert_eq(mkdir(cal, 0700), 0);
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%d", cal, k);
        cr_assert_eq(mkdir(p, 0700), 0);
        snprintf(p, sizeof p, "%s/%d/x.npy", cal, k);
        write_npy(p, (ampc_shape){2, {4, 8}}, -0.5 + 0.1 * k);
    }
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --tolerance 0.1 --calibrate %s", m, cal), 0, "%s", out);
    cr_assert(strstr(out, "on 1 held-out sample: error "), "3 samples: 2 search, 1 checks\n%s", out);
    cr_assert_null(strstr(out, "random"), "%s", out);
    free(out);
    snprintf(cal, sizeof cal, "%s/stacked", d);
    cr_assert_eq(mkdir(cal, 0700), 0);
    snprintf(p, sizeof p, "%s/x.npy", cal);
    write_npy(p, (ampc_shape){3, {4, 4, 8}}, -0.3);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --tolerance 0.1 --calibrate %s", m, cal), 0, "%s", out);
    cr_assert(strstr(out, "on 2 held-out samples: error "), "4 samples: 2 search, 2 check\n%s", out);
    free(out);
    write_npy(p, (ampc_shape){2, {4, 8}}, -0.3);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --tolerance 0.1 --calibrate %s", m, cal), 0, "%s", out);
    cr_assert(strstr(out, "on the last 2 of the one sample's 4 rows (the search used the first 2)"),
              "%s", out);
    free(out);
    write_npy(p, (ampc_shape){2, {4, 7}}, -0.3);
    cr_assert_eq(ampc(&out, "%s --emit ir --precision auto --tolerance 0.1 --calibrate %s", m, cal), 1, "%s", out);
    cr_assert(strstr(out, "x.npy: input 'x' is f32[4,8] (K samples of it: f32[K,4,8]), the file "
                          "holds f32[4,7]"), "%s", out);
    free(out);
    t_rmdir_all(d);
}
