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
