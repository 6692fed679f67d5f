/*
 * test_cli.c — every ONNX backend test case through the command line, as a user runs it
 * (`ampc run model.onnx --reference --input NAME=input_K.pb ... --save-outputs DIR`, runner.h's
 * CONF_CLI), each its own Criterion test against tests/conformance/cli.tsv (generated with
 * docs/conformance.md by scripts/conformance.sh): a case recorded as passing must pass; one
 * recorded otherwise is skipped with its reason unless it now passes, which fails the test so
 * that the table is regenerated and stays true.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "params.h"

#include <criterion/criterion.h>
#include <stdlib.h>

ParameterizedTestParameters(conformance_cli, onnx_backend) {
    size_t n = 0;
    conf_row *cases = conf_test_params("cli.tsv", &n);
    return cr_make_param_array(conf_row, cases, n, conf_free_params);
}

ParameterizedTest(conf_row *c, conformance_cli, onnx_backend, .timeout = 120) {
    char dir[4096];
    conf_case_dir_or_skip(c, dir, sizeof dir);
    setenv("AMPC_BIN", AMPC_BINARY_DIR "/bin/ampc", 0);
    conf_result r;
    conf_run_case(dir, CONF_CLI, &r);
    if (c->status == CONF_PASS)
        cr_assert_eq(r.status, CONF_PASS, "%s/%s was expected to pass through the command line: %s: "
                     "%s", c->suite, c->name, conf_status_name(r.status), r.reason);
    else if (r.status == CONF_PASS)
        cr_assert_fail("%s/%s now passes through the command line (recorded: %s: %s); regenerate "
                       "the table with scripts/conformance.sh", c->suite, c->name,
                       conf_status_name(c->status), c->reason);
    else
        cr_skip_test("%s/%s: %s: %s", c->suite, c->name, conf_status_name(r.status), r.reason);
}
