/*
 * fuzz_compile.c — libFuzzer target for the compile pipeline short of NVRTC: a small model (ONNX
 * bytes, or IR text) -> import -> the pass pipeline with the verifier between passes -> the memory
 * plan -> codegen (kernel plan and CUDA C) -> the host C of a library (`ampc --emit c`).
 *
 * NVRTC is left out: it takes 0.1 to 1 s per kernel, which would starve the fuzzer, and it is
 * NVIDIA's code; the CUDA C it would compile is produced and checked to be non-empty. Every stage
 * either succeeds or fails with diagnostics; none may abort, leak or allocate what the input did
 * not justify.
 */
#include "fuzz.h"

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

/* Codegen and the host C; the plan's images are absent since NVRTC does not run. */
static void generate(ampc_graph *g) {
    ampc_cg_options co = {.math = AMPC_RT_MATH_TF32};
    ampc_cg_output *cg = NULL;
    ampc_status st = ampc_cg_generate(g, &co, &cg);
    if (st != AMPC_OK) {
        fuzz_check_failure(st, ampc_graph_errors(g), "ampc_cg_generate");
        FUZZ_CHECK(!cg, "a failed codegen returned output");
        return;
    }
    for (int32_t u = 0; u < cg->n_units; u++)
        FUZZ_CHECK(cg->sources[u] && *cg->sources[u], "translation unit %d is empty", u);
    ampc_module m = {.cg = cg};
    char *c = ampc_module_host_c(&m, "model");
    FUZZ_CHECK(c && *c, "ampc_module_host_c gave no text");
    free(c);
    ampc_cg_output_free(cg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ampc_graph *g = import(data, size);
    if (!g) return 0;
    ampc_pipeline_options po = {.verify = true};
    ampc_status st = ampc_graph_optimize(g, &po);
    if (st == AMPC_OK) {
        bool changed;
        st = ampc_pass_plan_memory(g, &changed);
    }
    if (st != AMPC_OK) fuzz_check_failure(st, ampc_graph_errors(g), "the pass pipeline");
    else generate(g);
    ampc_graph_destroy(g);
    return 0;
}
