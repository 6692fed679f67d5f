/*
 * test_conformance.c — every ONNX backend test case as its own Criterion test.
 *
 * The expected result of each case is recorded in tests/conformance/expected.tsv (generated with
 * docs/conformance.md by scripts/conformance.sh). A case expected to pass must pass. A case
 * expected to fail or be unsupported is skipped with its recorded reason — unless it now passes,
 * which fails the test so that the table is regenerated and stays true.
 */
#include "params.h"

#include <criterion/criterion.h>

ParameterizedTestParameters(conformance, onnx_backend) {
    size_t n = 0;
    conf_row *cases = conf_test_params("expected.tsv", &n);
    return cr_make_param_array(conf_row, cases, n, conf_free_params);
}

ParameterizedTest(conf_row *c, conformance, onnx_backend, .timeout = 120) {
    char dir[4096];
    conf_case_dir_or_skip(c, dir, sizeof dir);
    conf_result r;
    conf_run_case(dir, CONF_REFERENCE, &r);
    if (c->status == CONF_PASS)
        cr_assert_eq(r.status, CONF_PASS, "%s/%s was expected to pass: %s: %s", c->suite, c->name,
                     conf_status_name(r.status), r.reason);
    else if (r.status == CONF_PASS)
        cr_assert_fail("%s/%s now passes (recorded: %s: %s); regenerate the table with "
                       "scripts/conformance.sh", c->suite, c->name, conf_status_name(c->status),
                       c->reason);
    else
        cr_skip_test("%s/%s: %s: %s", c->suite, c->name, conf_status_name(r.status), r.reason);
}

/* The graph a GPU build runs (its own rewrites: control flow written out, ONNX Attention as
 * ampc.FusedAttention, ...) evaluated on the CPU: every case the reference passes passes there
 * too, so those rewrites are checked against the test data without a GPU. */
ParameterizedTestParameters(conformance, gpu_graph) {
    size_t n = 0;
    conf_row *cases = conf_test_params("expected.tsv", &n);
    return cr_make_param_array(conf_row, cases, n, conf_free_params);
}

ParameterizedTest(conf_row *c, conformance, gpu_graph, .timeout = 120) {
    char dir[4096];
    conf_case_dir_or_skip(c, dir, sizeof dir);
    if (c->status != CONF_PASS)
        cr_skip_test("%s/%s: the reference does not pass it (%s)", c->suite, c->name,
                     conf_status_name(c->status));
    conf_result r;
    conf_run_case(dir, CONF_GPU_GRAPH, &r);
    cr_assert_eq(r.status, CONF_PASS, "%s/%s: the GPU build's graph on the reference: %s: %s",
                 c->suite, c->name, conf_status_name(r.status), r.reason);
}

/* The GPU columns' tolerances against the test data: the TF32-off build at the suite's own for
 * every dtype; the default build (TF32 on) at rtol 1e-2, atol 1e-4 for f32 outputs, never tighter
 * than the suite's, and at the suite's for every other dtype (their products do not use TF32). */
Test(conformance, data_tolerance_by_configuration) {
    static const ampc_dtype all[] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16,
                                     AMPC_DTYPE_F64, AMPC_DTYPE_I64, AMPC_DTYPE_I32,
                                     AMPC_DTYPE_I8,  AMPC_DTYPE_U8,  AMPC_DTYPE_BOOL};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        double rtol, atol;
        conf_data_tolerance(CONF_GPU, all[i], &rtol, &atol);
        cr_assert(rtol == CONF_RTOL && atol == CONF_ATOL, "TF32 off, %s: rtol %g, atol %g",
                  ampc_dtype_name(all[i]), rtol, atol);
        conf_data_tolerance(CONF_GPU_DEFAULT, all[i], &rtol, &atol);
        if (all[i] == AMPC_DTYPE_F32)
            cr_assert(rtol == 1e-2 && atol == 1e-4 && rtol >= CONF_RTOL && atol >= CONF_ATOL,
                      "default build, f32: rtol %g, atol %g", rtol, atol);
        else
            cr_assert(rtol == CONF_RTOL && atol == CONF_ATOL, "default build, %s: rtol %g, atol %g",
                      ampc_dtype_name(all[i]), rtol, atol);
    }
}
