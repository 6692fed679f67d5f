/*
 * test_conformance.c — every ONNX backend test case as its own Criterion test.
 *
 * The expected result of each case is recorded in tests/conformance/expected.tsv (generated with
 * docs/conformance.md by scripts/conformance.sh). A case expected to pass must pass. A case
 * expected to fail or be unsupported is skipped with its recorded reason — unless it now passes,
 * which fails the test so that the table is regenerated and stays true.
 */
#include "runner.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct conf_case {
    char suite[32], name[160], reason[400];
    conf_status expected;
} conf_case;

static void free_cases(struct criterion_test_params *p) { cr_free(p->params); }

ParameterizedTestParameters(conformance, onnx_backend) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/conformance/expected.tsv", AMPC_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    size_t n = 0, cap = 2048;
    conf_case *cases = cr_malloc(cap * sizeof *cases);
    char line[1024];
    while (f && fgets(line, sizeof line, f) && n < cap) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *suite = strtok(line, "\t"), *name = strtok(NULL, "\t"), *st = strtok(NULL, "\t"),
             *reason = strtok(NULL, "");
        if (!suite || !name || !st) continue;
        conf_case *c = &cases[n];
        memset(c, 0, sizeof *c);
        snprintf(c->suite, sizeof c->suite, "%s", suite);
        snprintf(c->name, sizeof c->name, "%s", name);
        snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
        if (conf_status_parse(st, &c->expected)) n++;
    }
    if (f) fclose(f);
    return cr_make_param_array(conf_case, cases, n, free_cases);
}

ParameterizedTest(conf_case *c, conformance, onnx_backend, .timeout = 120) {
    char dir[4096], model[4200];
    snprintf(dir, sizeof dir, "%s/%s/%s", conf_suite_root(c->suite), c->suite, c->name);
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    FILE *probe = fopen(model, "rb");
    if (!probe) cr_skip_test("ONNX test data not found at %s (scripts/setup.sh installs "
                             "libonnx-testdata and generates the newer suite)", dir);
    fclose(probe);
    conf_result r;
    conf_run_case(dir, CONF_REFERENCE, &r);
    if (c->expected == CONF_PASS)
        cr_assert_eq(r.status, CONF_PASS, "%s/%s was expected to pass: %s: %s", c->suite, c->name,
                     conf_status_name(r.status), r.reason);
    else if (r.status == CONF_PASS)
        cr_assert_fail("%s/%s now passes (recorded: %s: %s); regenerate the table with "
                       "scripts/conformance.sh", c->suite, c->name, conf_status_name(c->expected),
                       c->reason);
    else
        cr_skip_test("%s/%s: %s: %s", c->suite, c->name, conf_status_name(r.status), r.reason);
}
