/*
 * test_nvrtc.c — the kernels of every ONNX backend test case compile with NVRTC for sm_80 (PTX
 * for compute_80 and an sm_80 cubin), which needs no GPU: CI proves on every change that what
 * the GPU machine last ran still compiles.
 *
 * The cases and what to expect come from tests/conformance/gpu.tsv (the last GPU run): a case
 * that ran on the GPU (pass or fail there) must compile; a case the GPU run reported as
 * unsupported (an op without a GPU kernel) must still be refused as unsupported — or, once its
 * op gains a kernel, compile, which the test reports as a skip asking for a new GPU run. A case
 * that failed before reaching the GPU (the importer or the passes rejected the model) must
 * still fail. And `ampc inspect` agrees with `-o` on every case: ampc_compile_check (what
 * inspect's "GPU build" line runs) passes exactly when the compile does.
 */
#include "params.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* True when the GPU run got as far as compiling (its failure, if any, came later). */
static bool reached_gpu(const conf_row *c) {
    static const char *const before[] = {"import:", "test data:", "passes:", "no test input"};
    if (c->status == CONF_UNSUPPORTED) return false;
    for (size_t i = 0; i < sizeof before / sizeof *before; i++)
        if (!strncmp(c->reason, before[i], strlen(before[i]))) return false;
    return true;
}

ParameterizedTestParameters(nvrtc, every_case_compiles) {
    size_t n = 0;
    conf_row *cases = conf_test_params("gpu.tsv", &n);
    return cr_make_param_array(conf_row, cases, n, conf_free_params);
}

ParameterizedTest(conf_row *c, nvrtc, every_case_compiles, .timeout = 300) {
    char dir[4096];
    conf_case_dir_or_skip(c, dir, sizeof dir);
    conf_result r, k;
    conf_run_case(dir, CONF_COMPILE, &r);
    conf_run_case(dir, CONF_CHECK, &k);
    cr_assert_eq(k.status == CONF_PASS, r.status == CONF_PASS, "%s/%s: inspect's GPU line says %s "
                 "(%s), -o's compile %s (%s)", c->suite, c->name, conf_status_name(k.status),
                 k.reason, conf_status_name(r.status), r.reason);
    if (reached_gpu(c))
        cr_assert_eq(r.status, CONF_PASS, "%s/%s ran on the GPU but does not compile now: %s: %s",
                     c->suite, c->name, conf_status_name(r.status), r.reason);
    else if (c->status == CONF_FAIL)
        cr_assert_eq(r.status, CONF_FAIL, "%s/%s: expected to fail before compiling (%s), got %s",
                     c->suite, c->name, c->reason, conf_status_name(r.status));
    else if (r.status == CONF_PASS)
        cr_skip_test("%s/%s compiles now (the last GPU run found it unsupported: %s); run "
                     "scripts/gpu-check.sh on the GPU machine to refresh gpu.tsv", c->suite, c->name,
                     c->reason);
    else
        cr_assert_eq(r.status, CONF_UNSUPPORTED, "%s/%s: expected 'unsupported' (%s), got %s: %s",
                     c->suite, c->name, c->reason, conf_status_name(r.status), r.reason);
}
