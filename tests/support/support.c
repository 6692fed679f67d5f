/*
 * support.c — helpers shared by the test suites (see support.h).
 */
#define _GNU_SOURCE /* popen */
#include "support.h"

#include "ampc_runtime.h"
#include "ir/ref/ref.h"
#include "passes/passes.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

/* ---- GPU against the reference evaluator ---------------------------------------------------- */

bool t_tensors_close(const ampc_tensor *got, const ampc_tensor *ref, double rtol, double atol,
                     const char *name, char *msg, size_t cap) {
    int64_t n = ampc_shape_numel(&ref->shape), worst = -1;
    double worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!ampc_dtype_is_float(ref->dtype)) {
            int64_t x = ampc_ref_load_i64(got->data, got->dtype, i);
            int64_t e = ampc_ref_load_i64(ref->data, ref->dtype, i);
            if (x == e) continue;
            snprintf(msg, cap, "output '%s' element %lld: got %lld, expected %lld", name,
                     (long long)i, (long long)x, (long long)e);
            return false;
        }
        double x = ampc_ref_load_f64(got->data, got->dtype, i);
        double e = ampc_ref_load_f64(ref->data, ref->dtype, i);
        if ((isnan(x) && isnan(e)) || x == e) continue;
        double excess = isnan(x) || isnan(e) || isinf(x) || isinf(e)
                            ? INFINITY
                            : fabs(x - e) - (atol + rtol * fabs(e));
        if (excess > worst_excess || (worst < 0 && excess > 0)) worst_excess = excess, worst = i;
    }
    if (worst < 0) return true;
    snprintf(msg, cap,
             "output '%s' (%s) worst element %lld: got %.9g, expected %.9g (rtol %g, atol %g)",
             name, ampc_dtype_name(ref->dtype), (long long)worst,
             ampc_ref_load_f64(got->data, got->dtype, worst),
             ampc_ref_load_f64(ref->data, ref->dtype, worst), rtol, atol);
    return false;
}

static void check_tolerance(const t_gpu_check *c, ampc_dtype t, double *rtol, double *atol) {
    if (c->tolerance) {
        c->tolerance(t, rtol, atol);
        return;
    }
    bool half = t == AMPC_DTYPE_F16 || t == AMPC_DTYPE_BF16;
    *rtol = half ? fmax(c->rtol, 1e-2) : c->rtol;
    *atol = half ? fmax(c->atol, 1e-2) : c->atol;
}

/* The reason there is no CUDA device (malloc'ed), or NULL when there is one. */
static char *no_gpu_reason(void) {
    int32_t n_dev = 0;
    char *err = NULL;
    if (ampc_rt_device_count(&n_dev, &err) == AMPC_OK && n_dev > 0) return NULL;
    if (!err) err = ampc_xstrdup("no CUDA device");
    return err;
}

bool t_require_gpu(void) {
    const char *v = getenv("AMPC_REQUIRE_GPU");
    return v && strcmp(v, "0") != 0 && v[0] != '\0';
}

/* Skips the calling test with `reason`, or fails it under AMPC_REQUIRE_GPU=1. */
static void skip_or_fail_without_gpu(const char *reason) {
    if (t_require_gpu()) cr_assert_fail("AMPC_REQUIRE_GPU=1 but this GPU test cannot run: %s", reason);
    cr_skip_test("%s", reason);
}

ampc_rt_device_info t_skip_without_gpu(void) {
    char *why = no_gpu_reason();
    if (why) {
        char reason[1024];
        snprintf(reason, sizeof reason, "%s", why);
        free(why);
        skip_or_fail_without_gpu(reason);
    }
    ampc_rt_device_info info;
    char *err = NULL;
    cr_assert_eq(ampc_rt_device_info_get(0, &info, &err), AMPC_OK, "%s", err);
    if (!info.supported) {
        char reason[512];
        snprintf(reason, sizeof reason, "device 0 (%s) has compute capability %d.%d: ampc needs 8.0",
                 info.name, info.major, info.minor);
        skip_or_fail_without_gpu(reason);
    }
    return info;
}

void t_skip_needs_devices(int want, int visible) {
    if (visible == 0 && t_require_gpu())
        cr_assert_fail("AMPC_REQUIRE_GPU=1 but no CUDA device is visible (this test needs %d)", want);
    cr_skip_test("needs %d CUDA devices, %d visible", want, visible);
}

void t_skip_needs_cusparselt(const char *why) { cr_skip_test("needs cuSPARSELt: %s", why); }

void t_skip_only_without(const char *what, const char *why) {
    cr_skip_test("runs only without %s: %s", what, why);
}

void t_gpu_vs_reference(ampc_graph *g, const t_gpu_check *c) {
    const char *what = c->what ? c->what : "";
    char *why = no_gpu_reason();
    if (why) {
        char reason[512];
        snprintf(reason, sizeof reason, "%s", why);
        free(why);
        ampc_graph_destroy(g);
        skip_or_fail_without_gpu(reason);
    }
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s: %s", what, ampc_graph_errors(g));
    const int32_t n_in = ampc_graph_input_count(g), n_out = ampc_graph_output_count(g);
    ampc_tensor *in = calloc((size_t)n_in + 1, sizeof *in), *ref = calloc((size_t)n_out + 1, sizeof *ref);
    ampc_tensor *got = calloc((size_t)n_out + 1, sizeof *got);
    char **names = calloc((size_t)n_out + 1, sizeof *names);
    uint64_t seed = c->seed;
    for (int32_t i = 0; i < n_in; i++) {
        const ampc_value *v = ampc_graph_input(g, i);
        in[i] = (ampc_tensor){ampc_value_dtype(v), ampc_value_shape(v), NULL};
        in[i].data = calloc((size_t)ampc_shape_numel(&in[i].shape) + 1, ampc_dtype_size(in[i].dtype));
        c->fill(&in[i], ampc_value_name(v), &seed);
    }
    ampc_status st = ampc_graph_evaluate(g, in, n_in, ref, n_out);
    cr_assert_eq(st, AMPC_OK, "%s: reference: %s", what, ampc_graph_errors(g));
    for (int32_t i = 0; i < n_out; i++) {
        names[i] = ampc_xstrdup(ampc_value_name(ampc_graph_output(g, i)));
        int64_t n = ampc_shape_numel(&ref[i].shape);
        got[i] = (ampc_tensor){ref[i].dtype, ref[i].shape, calloc((size_t)n + 1, ampc_dtype_size(ref[i].dtype))};
        for (int64_t k = 0; k < n; k++) ampc_ref_store_f64(got[i].data, got[i].dtype, k, 12345.0);
    }
    ampc_module *m = NULL;
    static const int32_t none = 0;
    ampc_compile_options o = {.archs = &none, .n_archs = 0, .cache_dir = "", .pipeline = c->pipeline,
                              .no_tf32 = !c->tf32};
    st = ampc_compile(g, &o, &m);
    cr_assert_eq(st, AMPC_OK, "%s: %s", what, ampc_graph_errors(g));
    st = ampc_module_run(m, in, n_in, got, n_out, NULL);
    char msg[512] = "";
    bool ok = st == AMPC_OK;
    for (int32_t i = 0; ok && i < n_out; i++) {
        double rtol, atol;
        check_tolerance(c, ref[i].dtype, &rtol, &atol);
        ok = t_tensors_close(&got[i], &ref[i], rtol, atol, names[i], msg, sizeof msg);
    }
    if (st != AMPC_OK) snprintf(msg, sizeof msg, "%s", ampc_module_errors(m));
    ampc_module_destroy(m);
    for (int32_t i = 0; i < n_in; i++) free(in[i].data);
    for (int32_t i = 0; i < n_out; i++) {
        ampc_tensor_free(&ref[i]);
        free(got[i].data);
        free(names[i]);
    }
    free(in), free(ref), free(got), free(names);
    ampc_graph_destroy(g);
    cr_assert_eq(st, AMPC_OK, "%s: run failed: %s", what, msg);
    cr_assert(ok, "%s: %s", what, msg);
}

int32_t t_count_op(const ampc_graph *g, ampc_opcode op) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) n += !g->nodes[i]->dead && g->nodes[i]->op == op;
    return n;
}

void t_fill_uniform_f32(ampc_tensor *t, const char *name, uint64_t *seed) {
    (void)name;
    float *p = t->data;
    for (int64_t i = 0; i < ampc_shape_numel(&t->shape); i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(*seed >> 40) / (double)(1ull << 24) * 2 - 1);
    }
}

void t_expect_same_outputs(ampc_graph *a, ampc_graph *b, const ampc_tensor *in, int32_t n_in,
                           double rtol, double atol) {
    const int32_t n_out = ampc_graph_output_count(a);
    cr_assert_eq(n_out, ampc_graph_output_count(b), "the graphs give %d and %d outputs", n_out,
                 ampc_graph_output_count(b));
    ampc_tensor *ya = calloc((size_t)n_out + 1, sizeof *ya), *yb = calloc((size_t)n_out + 1, sizeof *yb);
    cr_assert_eq(ampc_graph_evaluate(a, in, n_in, ya, n_out), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_evaluate(b, in, n_in, yb, n_out), AMPC_OK, "%s", ampc_graph_errors(b));
    char msg[512];
    for (int32_t i = 0; i < n_out; i++) {
        cr_assert(t_tensors_close(&yb[i], &ya[i], rtol, atol, ampc_value_name(ampc_graph_output(a, i)),
                                  msg, sizeof msg), "%s", msg);
        ampc_tensor_free(&ya[i]);
        ampc_tensor_free(&yb[i]);
    }
    free(ya);
    free(yb);
}

void t_expect_same_outputs_filled(ampc_graph *a, ampc_graph *b, t_fill_fn fill, uint64_t seed,
                                  double rtol, double atol) {
    const int32_t n_in = ampc_graph_input_count(a);
    ampc_tensor *in = calloc((size_t)n_in + 1, sizeof *in);
    cr_assert_not_null(in);
    for (int32_t k = 0; k < n_in; k++) {
        const ampc_value *v = ampc_graph_input(a, k);
        const ampc_shape s = ampc_value_shape(v);
        const ampc_dtype t = ampc_value_dtype(v);
        in[k] = t_tensor(t, s, calloc((size_t)ampc_shape_numel(&s) + 1, ampc_dtype_size(t)));
        cr_assert_not_null(in[k].data);
        fill(&in[k], ampc_value_name(v), &seed);
    }
    t_expect_same_outputs(a, b, in, n_in, rtol, atol);
    for (int32_t k = 0; k < n_in; k++) free(in[k].data);
    free(in);
}

void t_expect_gpu_build_same(t_case_build build, size_t n, t_fill_fn fill, uint64_t seed,
                             double rtol, double atol,
                             void (*check)(size_t i, const ampc_graph *optimised)) {
    for (size_t i = 0; i < n; i++) {
        ampc_graph *a = build(i, 0), *b = build(i, 0);
        ampc_pipeline_options po = {.verify = true, .gpu_build = true};
        cr_assert_eq(ampc_graph_optimize(b, &po), AMPC_OK, "case %zu: %s", i, ampc_graph_errors(b));
        if (check) check(i, b);
        t_expect_same_outputs_filled(a, b, fill, seed + i, rtol, atol);
        ampc_graph_destroy(a), ampc_graph_destroy(b);
    }
}

void t_gpu_vs_reference_cases(t_case_build build, size_t n, const char *(*what)(size_t i),
                              t_fill_fn fill, uint64_t seed, double tol32, double tol16) {
    t_skip_without_gpu();
    for (size_t i = 0; i < n; i++)
        for (int h = 0; h < 2; h++) {
            const ampc_dtype t = h ? AMPC_DTYPE_F16 : AMPC_DTYPE_F32;
            char name[160];
            snprintf(name, sizeof name, "%s, %s", what(i), ampc_dtype_name(t));
            const double tol = h ? tol16 : tol32;
            t_gpu_check chk = {.fill = fill, .seed = seed + i, .rtol = tol, .atol = tol,
                               .what = name};
            t_gpu_vs_reference(build(i, t), &chk);
        }
}

void t_expect_second_run_unchanged(ampc_graph *g, const char *pass, ampc_pipeline_options o) {
    ampc_pass_record rec[1];
    int32_t n_rec = 0;
    o.record = rec, o.max_records = 1, o.n_records = &n_rec;
    cr_assert_eq(ampc_pipeline_run_pass(g, pass, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert(n_rec == 1 && rec[0].changed, "the first run of %s changed nothing", pass);
    n_rec = 0;
    cr_assert_eq(ampc_pipeline_run_pass(g, pass, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert(n_rec == 1 && !rec[0].changed, "a second run of %s changed the graph:\n%s", pass,
              ampc_graph_to_text(g, false));
}

int t_ampc(char **out, int timeout_s, const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout %d %s/bin/ampc %s 2>&1", timeout_s, AMPC_BINARY_DIR, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "cannot run %s", cmd);
    ampc_strbuf sb = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        for (size_t i = 0; i < n; i++) ampc_sb_putc(&sb, buf[i]);
    int st = pclose(p);
    *out = ampc_sb_take(&sb);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

char *t_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

void t_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

char *t_tmpdir(const char *tag) {
    char *d = NULL;
    cr_assert_geq(asprintf(&d, "/tmp/ampc-%s-XXXXXX", tag), 0);
    cr_assert_not_null(mkdtemp(d), "cannot create %s", d);
    return d;
}

void t_rmdir_all(char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}
