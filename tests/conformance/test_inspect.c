/*
 * test_inspect.c — `ampc inspect` (ampc_onnx_inspect) on every model of every conformance suite:
 * it must return a status for each (the model imports, or the reason it does not) and never
 * crash. One Criterion test per suite; a crash anywhere fails that suite's test.
 */
#include "runner.h"

#include "ampc.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* `min_import`: the fraction of the suite's models that must import without options (the simple
 * suite's models mostly need their inputs bound, so it gets none). */
static void inspect_suite(const char *suite, double min_import) {
    char **names;
    const char *root = conf_suite_root(suite);
    int n = conf_list_cases(root, suite, &names);
    if (!n) cr_skip_test("suite %s not found under %s", suite, root);
    FILE *devnull = fopen("/dev/null", "w");
    cr_assert_not_null(devnull);
    int imported = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s/%s/model.onnx", root, suite, names[i]);
        ampc_status st = ampc_onnx_inspect(path, devnull);
        cr_assert(st >= AMPC_OK && st < AMPC_STATUS_COUNT, "%s: status %d", path, (int)st);
        imported += st == AMPC_OK;
    }
    fclose(devnull);
    /* A regression that breaks import wholesale fails here. */
    cr_expect_geq(imported, (int)(min_import * n), "%s: only %d of %d models import", suite,
                  imported, n);
    conf_free_names(names, n);
}

Test(inspect, node) { inspect_suite("node", 0.5); }
Test(inspect, pytorch_converted) { inspect_suite("pytorch-converted", 0.9); }
Test(inspect, pytorch_operator) { inspect_suite("pytorch-operator", 0.9); }
Test(inspect, simple) { inspect_suite("simple", 0.0); }
Test(inspect, node_onnx_newer) { inspect_suite(CONF_NEWER_SUITE, 0.5); }
