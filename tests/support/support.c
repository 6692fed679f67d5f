/*
 * support.c — helpers shared by the test suites (see support.h).
 */
#include "support.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ampc_shape t_shape(const int64_t *dims_with_lead, int32_t rank) {
    ampc_shape s = {rank, {0}};
    for (int32_t i = 0; i < rank; i++) s.dims[i] = dims_with_lead[i + 1];
    return s;
}

ampc_value *t_input(ampc_graph *g, const char *name, ampc_dtype t, ampc_shape s) {
    return ampc_input(g, name, t, s.rank, s.dims);
}

ampc_value *t_const(ampc_graph *g, ampc_dtype t, ampc_shape s, const void *data) {
    return ampc_constant(g, NULL, t, s.rank, s.dims, data);
}

ampc_value *t_const_f32(ampc_graph *g, ampc_shape s, const double *vals) {
    int64_t n = ampc_shape_numel(&s);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)vals[i];
    ampc_value *v = t_const(g, AMPC_DTYPE_F32, s, f);
    free(f);
    return v;
}

ampc_value *t_const_i64(ampc_graph *g, ampc_shape s, const int64_t *vals) {
    return t_const(g, AMPC_DTYPE_I64, s, vals);
}

ampc_tensor t_tensor(ampc_dtype t, ampc_shape s, void *data) { return (ampc_tensor){t, s, data}; }

ampc_tensor t_eval1(ampc_graph *g, ampc_value *v, const ampc_tensor *inputs, int32_t n_inputs) {
    ampc_tensor out = {0};
    cr_assert_eq(ampc_output(g, v, NULL), AMPC_OK, "building failed:\n%s", ampc_graph_errors(g));
    ampc_status st = ampc_graph_evaluate(g, inputs, n_inputs, &out, 1);
    cr_assert_eq(st, AMPC_OK, "evaluation failed (%s):\n%s", ampc_status_str(st),
                 ampc_graph_errors(g));
    return out;
}

static void expect_shape(const ampc_tensor *got, ampc_shape s) {
    char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
    cr_assert(ampc_shape_eq(&got->shape, &s), "shape: got %s, expected %s",
              ampc_shape_str(&got->shape, a, sizeof a), ampc_shape_str(&s, b, sizeof b));
}

void t_expect_close(const ampc_tensor *got, ampc_shape s, const double *expected, double rtol,
                    double atol) {
    expect_shape(got, s);
    int64_t n = ampc_shape_numel(&s), worst = -1;
    double worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ampc_ref_load_f64(got->data, got->dtype, i), e = expected[i];
        if (isnan(e) && isnan(x)) continue;
        if (isinf(e) && x == e) continue;
        double excess = fabs(x - e) - (atol + rtol * fabs(e));
        if (isnan(x) || isnan(e) || excess > worst_excess) {
            worst_excess = isnan(x) || isnan(e) ? INFINITY : excess;
            worst = i;
        }
    }
    if (worst >= 0)
        cr_assert_fail("worst element %lld: got %.9g, expected %.9g (rtol %g, atol %g)",
                       (long long)worst, ampc_ref_load_f64(got->data, got->dtype, worst),
                       expected[worst], rtol, atol);
}

void t_expect_ints(const ampc_tensor *got, ampc_shape s, const int64_t *expected) {
    expect_shape(got, s);
    int64_t n = ampc_shape_numel(&s);
    for (int64_t i = 0; i < n; i++) {
        int64_t x = ampc_ref_load_i64(got->data, got->dtype, i);
        cr_assert_eq(x, expected[i], "element %lld: got %lld, expected %lld", (long long)i,
                     (long long)x, (long long)expected[i]);
    }
}

void t_expect_diag(ampc_graph *g, const char *needle) {
    const char *text = ampc_graph_errors(g);
    cr_assert(strstr(text, needle), "expected a diagnostic containing\n  %s\ngot\n  %s", needle,
              text[0] ? text : "(no diagnostics)");
}
