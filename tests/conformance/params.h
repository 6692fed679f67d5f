/*
 * params.h — what the Criterion conformance suites share: their parameters (the rows of a
 * results table, in Criterion's memory) and the case folder of a row.
 */
#ifndef AMPC_CONF_PARAMS_H
#define AMPC_CONF_PARAMS_H

#include "runner.h"

/* criterion.h first: included after parameterized.h it leaves Test() undefined. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

/* The rows of tests/conformance/<table> copied into cr_malloc'ed memory (*n rows; none when the
 * table is missing). Pass to cr_make_param_array with conf_free_params. */
conf_row *conf_test_params(const char *table, size_t *n);
void conf_free_params(struct criterion_test_params *p);

/* The row's case folder into dir; skips the test (with the reason) when its model is absent. */
void conf_case_dir_or_skip(const conf_row *c, char *dir, size_t cap);

#endif
