/*
 * fuzz_compile.c — libFuzzer target for the compile pipeline short of NVRTC: a small model (ONNX
 * bytes, or IR text) -> import -> the pass pipeline with the verifier between passes -> the memory
 * plan -> codegen (kernel plan and CUDA C) -> the host C of a library (`ampc --emit c`).
 *
 * NVRTC is left out: it takes 0.1 to 1 s per kernel, which would starve the fuzzer, and it is
 * NVIDIA's code; the CUDA C it would compile is produced and checked to be non-empty. Every stage
 * either succeeds or fails with diagnostics; none may abort, leak or allocate what the input did
 * not justify.
 *
 * Names: a model that compiles is imported twice more, renamed once n0, n1, ... and once with
 * hostile names made from the input's bytes (newlines, comment ends, quotes, backslashes, control
 * bytes, ../), and compiled again: the generated CUDA, host C and model.h of the two, without
 * comments and literals (tests/support/hostile_names.h), must be byte-identical, and both must
 * compile or fail alike. A difference means a name reached generated code.
 */
#include "fuzz.h"

#include "../support/hostile_names.h"

#include "codegen/codegen.h"
#include "compiler/module.h"
#include "passes/passes.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* IR text begins (after blanks) with `graph` or a `//` comment; neither byte sequence can start
 * a ModelProto ('g' and '/' are tags of wire type 7, which does not exist). */
static bool is_ir_text(const uint8_t *data, size_t size) {
    size_t i = 0;
    while (i < size && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
        i++;
    return (size - i >= 5 && !memcmp(data + i, "graph", 5)) ||
           (size - i >= 2 && !memcmp(data + i, "//", 2));
}

static ampc_graph *import(const uint8_t *data, size_t size) {
    ampc_graph *g = NULL;
    char *err = NULL;
    ampc_status st;
    if (is_ir_text(data, size)) {
        st = ampc_graph_parse((const char *)data, size, &g, &err);
    } else {
        ampc_import_options o = {.max_batch = 2};
        st = ampc_onnx_import_buffer(data, size, NULL, &o, &g, &err);
    }
    if (st != AMPC_OK) fuzz_check_failure(st, err, "import");
    free(err);
    return g;
}

/* The pass pipeline and the memory plan; false (the failure checked) when g does not compile. */
static bool optimize(ampc_graph *g) {
    ampc_pipeline_options po = {.verify = true};
    ampc_status st = ampc_graph_optimize(g, &po);
    if (st == AMPC_OK) {
        bool changed;
        st = ampc_pass_plan_memory(g, NULL, &changed);
    }
    if (st != AMPC_OK) fuzz_check_failure(st, ampc_graph_errors(g), "the pass pipeline");
    return st == AMPC_OK;
}

/* Codegen; NULL (the failure checked) when it fails. */
static ampc_cg_output *codegen(ampc_graph *g) {
    ampc_cg_options co = {.math = AMPC_RT_MATH_TF32};
    ampc_cg_output *cg = NULL;
    ampc_status st = ampc_cg_generate(g, &co, &cg);
    if (st != AMPC_OK) {
        fuzz_check_failure(st, ampc_graph_errors(g), "ampc_cg_generate");
        FUZZ_CHECK(!cg, "a failed codegen returned output");
        return NULL;
    }
    return cg;
}

/* Codegen and the host C; the plan's images are absent since NVRTC does not run. */
static void generate(ampc_graph *g) {
    ampc_cg_output *cg = codegen(g);
    if (!cg) return;
    for (int32_t u = 0; u < cg->n_units; u++)
        FUZZ_CHECK(cg->sources[u] && *cg->sources[u], "translation unit %d is empty", u);
    ampc_module m = {.cg = cg};
    char *c = ampc_module_host_c(&m, "model");
    FUZZ_CHECK(c && *c, "ampc_module_host_c gave no text");
    free(c);
    ampc_cg_output_free(cg);
}

/* The model renamed n0, n1, ... and renamed with hostile names from the input's bytes generates
 * the same code once comments and literals are stripped. */
static void check_names(const uint8_t *data, size_t size) {
    ampc_graph *plain = import(data, size), *hostile = import(data, size);
    hn_bytes bytes = {data, size};
    if (plain && hostile && hn_rename(plain, hn_plain, NULL) &&
        hn_rename(hostile, hn_hostile, &bytes)) {
        bool ok = optimize(plain);
        FUZZ_CHECK(optimize(hostile) == ok, "the model compiles under one set of names only");
        ampc_cg_output *a = ok ? codegen(plain) : NULL, *b = ok ? codegen(hostile) : NULL;
        FUZZ_CHECK(!a == !b, "code generation succeeds under one set of names only");
        if (a && b) {
            ampc_module ma = {.cg = a}, mb = {.cg = b};
            char *ta = hn_sources(&ma, "model.onnx"), *tb = hn_sources(&mb, "model.onnx");
            char *diff = hn_compare(tb, ta);
            FUZZ_CHECK(!diff, "a model name changed the generated code: %s", diff);
            free(ta);
            free(tb);
        }
        ampc_cg_output_free(a);
        ampc_cg_output_free(b);
    }
    ampc_graph_destroy(plain);
    ampc_graph_destroy(hostile);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ampc_graph *g = import(data, size);
    if (!g) return 0;
    bool ok = optimize(g);
    if (ok) generate(g);
    ampc_graph_destroy(g);
    if (ok) check_names(data, size);
    return 0;
}
