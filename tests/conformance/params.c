/* params.c — parameters of the Criterion conformance suites (see params.h). */
#include "params.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

conf_row *conf_test_params(const char *table, size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/conformance/%s", AMPC_SOURCE_DIR, table);
    conf_row *rows = NULL;
    int k = conf_read_table(path, &rows);
    *n = k > 0 ? (size_t)k : 0;
    conf_row *out = cr_malloc((*n ? *n : 1) * sizeof *out);
    if (*n) memcpy(out, rows, *n * sizeof *out);
    free(rows);
    return out;
}

void conf_free_params(struct criterion_test_params *p) { cr_free(p->params); }

void conf_case_dir_or_skip(const conf_row *c, char *dir, size_t cap) {
    char model[4200];
    snprintf(dir, cap, "%s/%s/%s", conf_suite_root(c->suite), c->suite, c->name);
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    FILE *probe = fopen(model, "rb");
    if (!probe)
        cr_skip_test("ONNX test data not found at %s (scripts/setup.sh installs libonnx-testdata "
                     "and generates the newer suite)", dir);
    fclose(probe);
}
