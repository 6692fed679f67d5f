/*
 * check.c — a build's outputs against the model as written (see check.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "compiler/check.h"

#include "ir/ir.h"
#include "ir/ref/ref.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static ampc_status failf(char **err, ampc_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampc_strbuf sb = {0};
    ampc_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    if (err) *err = ampc_sb_take(&sb);
    else ampc_sb_free(&sb);
    return st;
}

static void set_start(ampc_check_set *c, const ampc_graph *g, ampc_tensor **inputs, int32_t n);

static void free_tensors(ampc_tensor *t, int32_t n) {
    for (int32_t i = 0; t && i < n; i++) ampc_tensor_free(&t[i]);
    free(t);
}

ampc_status ampc_check_set_init(ampc_check_set *c, ampc_graph *g, ampc_tensor **inputs,
                                int32_t n_samples, char **err) {
    set_start(c, g, inputs, n_samples);
    for (int32_t k = 0; k < n_samples; k++) {
        c->ref[k] = ampc_xcalloc((size_t)g->n_outputs + 1, sizeof **c->ref);
        if (ampc_graph_evaluate(g, inputs[k], g->n_inputs, c->ref[k], g->n_outputs) != AMPC_OK) {
            ampc_status st = failf(err, ampc_graph_status(g), "the model as written, sample %d, "
                                   "on the reference evaluator: %s", k, ampc_graph_errors(g));
            ampc_check_set_free(c);
            return st;
        }
    }
    return AMPC_OK;
}

/* c's fields for g's outputs, the references not yet filled. */
static void set_start(ampc_check_set *c, const ampc_graph *g, ampc_tensor **inputs, int32_t n) {
    memset(c, 0, sizeof *c);
    c->inputs = inputs;
    c->n_samples = n;
    c->n_inputs = g->n_inputs;
    c->n_outputs = g->n_outputs;
    c->ref = ampc_xcalloc((size_t)n + 1, sizeof *c->ref);
    c->names = ampc_xcalloc((size_t)g->n_outputs + 1, sizeof *c->names);
    for (int32_t i = 0; i < g->n_outputs; i++) c->names[i] = ampc_xstrdup(g->outputs[i]->name);
}

ampc_status ampc_check_set_from_module(ampc_check_set *c, ampc_module *m, const ampc_graph *g,
                                       ampc_tensor **inputs, int32_t n_samples, char **err) {
    set_start(c, g, inputs, n_samples);
    for (int32_t k = 0; k < n_samples; k++) {
        c->ref[k] = ampc_xcalloc((size_t)g->n_outputs + 1, sizeof **c->ref);
        for (int32_t i = 0; i < g->n_outputs; i++) {
            const ampc_value *v = g->outputs[i];
            c->ref[k][i] = (ampc_tensor){v->dtype, v->shape, ampc_xcalloc(ampc_ir_nbytes(v) + 1, 1)};
        }
        ampc_status st = ampc_module_run(m, inputs[k], g->n_inputs, c->ref[k], g->n_outputs, NULL);
        if (st != AMPC_OK) {
            failf(err, st, "the GPU run failed: %s", ampc_module_errors(m));
            ampc_check_set_free(c);
            return st;
        }
    }
    return AMPC_OK;
}

double ampc_check_cost(const ampc_graph *g) {
    double macs = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead || n->n_inputs < 2 || !n->inputs[0] || !n->inputs[1] || !n->n_outputs) continue;
        double y = (double)ampc_ir_numel(n->outputs[0]);
        const ampc_value *a = n->inputs[0], *w = n->inputs[1];
        if (ampc_op_has(n->op, T_CONTRACT) && a->shape.rank > 0)
            macs += y * (double)a->shape.dims[a->shape.rank - 1];
        else if (ampc_op_has(n->op, T_CONV) && w->shape.rank > 0 && w->shape.dims[0] > 0)
            macs += y * (double)ampc_ir_numel(w) / (double)w->shape.dims[0];
    }
    return macs;
}

void ampc_check_set_free(ampc_check_set *c) {
    for (int32_t k = 0; c->ref && k < c->n_samples; k++) free_tensors(c->ref[k], c->n_outputs);
    for (int32_t i = 0; c->names && i < c->n_outputs; i++) free(c->names[i]);
    free(c->ref);
    free(c->names);
    memset(c, 0, sizeof *c);
}

/* The element range [*lo, *hi) of rows [row0, row1) of t's leading axis (every element when
 * rows is false or t has no axis). */
static void row_range(const ampc_tensor *t, bool rows, int64_t row0, int64_t row1, int64_t *lo,
                      int64_t *hi) {
    int64_t n = ampc_shape_numel(&t->shape);
    *lo = 0, *hi = n;
    if (!rows || t->shape.rank == 0 || t->shape.dims[0] <= 0) return;
    int64_t per = n / t->shape.dims[0];
    *lo = AMPC_MIN(row0, t->shape.dims[0]) * per;
    *hi = AMPC_MIN(row1, t->shape.dims[0]) * per;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

ampc_accuracy ampc_accuracy_of(const ampc_tensor *const *got, const ampc_tensor *const *ref,
                               int32_t n, bool rows, int64_t row0, int64_t row1) {
    ampc_accuracy a = {0, 0};
    double scale = 0, worst = 0;
    int64_t total = 0;
    bool broken = false; /* a NaN or infinity the reference lacks */
    for (int32_t k = 0; k < n; k++) {
        int64_t lo, hi;
        row_range(ref[k], rows, row0, row1, &lo, &hi);
        total += hi - lo;
        for (int64_t i = lo; i < hi; i++) {
            double r = fabs(ampc_ref_load_f64(ref[k]->data, ref[k]->dtype, i));
            if (r > scale && isfinite(r)) scale = r;
        }
    }
    double *rel = ampc_xcalloc((size_t)total + 1, sizeof *rel);
    int64_t at = 0;
    for (int32_t k = 0; k < n; k++) {
        int64_t lo, hi;
        row_range(ref[k], rows, row0, row1, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            double y = ampc_ref_load_f64(got[k]->data, got[k]->dtype, i);
            double r = ampc_ref_load_f64(ref[k]->data, ref[k]->dtype, i);
            double d = y == r ? 0 : fabs(y - r); /* equal infinities agree */
            if (isnan(d) && !isnan(r)) broken = true;
            if (isnan(d)) d = 0;                  /* NaN where the model has NaN agrees */
            if (d > worst) worst = d;
            rel[at++] = d / (fabs(r) + 1e-3 * scale + 1e-300);
        }
    }
    qsort(rel, (size_t)at, sizeof *rel, by_value);
    a.max_rel = broken ? INFINITY : worst / (scale > 0 ? scale : 1);
    a.p999 = broken ? INFINITY : at ? rel[(int64_t)ceil(0.999 * (double)at) - 1] : 0;
    free(rel);
    return a;
}

double ampc_accuracy_worst(const ampc_accuracy *acc, int32_t n) {
    double w = 0;
    for (int32_t i = 0; i < n; i++)
        if (!(acc[i].max_rel <= w)) w = acc[i].max_rel; /* NaN and infinity win */
    return w;
}

/* Checks that g's inputs and outputs are the check set's (a configuration that splits the batch
 * over GPUs changes them). */
static ampc_status same_io(const ampc_check_set *c, const ampc_graph *g, char **err) {
    if (g->n_inputs != c->n_inputs || g->n_outputs != c->n_outputs)
        return failf(err, AMPC_E_UNSUPPORTED, "the build has %d inputs and %d outputs, the model "
                     "%d and %d: this configuration cannot be checked against it", g->n_inputs,
                     g->n_outputs, c->n_inputs, c->n_outputs);
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const ampc_tensor *r = &c->ref[0][i];
        if (!ampc_shape_eq(&g->outputs[i]->shape, &r->shape))
            return failf(err, AMPC_E_UNSUPPORTED, "output '%s' of the build has another shape "
                         "than the model's (a batch split over GPUs): it cannot be checked",
                         c->names[i]);
    }
    return AMPC_OK;
}

/* Measures outs[k][i] (the configuration's outputs) against the references into acc. */
static void measure(const ampc_check_set *c, ampc_tensor **outs, ampc_accuracy *acc) {
    const ampc_tensor **got = ampc_xcalloc((size_t)c->n_samples + 1, sizeof *got);
    const ampc_tensor **ref = ampc_xcalloc((size_t)c->n_samples + 1, sizeof *ref);
    for (int32_t i = 0; i < c->n_outputs; i++) {
        for (int32_t k = 0; k < c->n_samples; k++) got[k] = &outs[k][i], ref[k] = &c->ref[k][i];
        bool fl = ampc_dtype_is_float(c->ref[0][i].dtype);
        acc[i] = fl ? ampc_accuracy_of(got, ref, c->n_samples, c->rows, c->row0, c->row1)
                    : ampc_accuracy_of(ref, ref, 0, false, 0, 0);
    }
    free(got);
    free(ref);
}

static void free_outs(const ampc_check_set *c, ampc_tensor **outs) {
    for (int32_t k = 0; outs && k < c->n_samples; k++) free_tensors(outs[k], c->n_outputs);
    free(outs);
}

ampc_status ampc_check_reference(const ampc_check_set *c, ampc_graph *g,
                                 const ampc_pipeline_options *po, bool tf32, ampc_accuracy *acc,
                                 char **err) {
    if (ampc_graph_optimize(g, po) != AMPC_OK)
        return failf(err, ampc_graph_status(g), "%s", ampc_graph_errors(g));
    ampc_status st = same_io(c, g, err);
    if (st != AMPC_OK) return st;
    ampc_graph_set_reference_tf32(g, tf32);
    ampc_tensor **outs = ampc_xcalloc((size_t)c->n_samples + 1, sizeof *outs);
    for (int32_t k = 0; st == AMPC_OK && k < c->n_samples; k++) {
        outs[k] = ampc_xcalloc((size_t)c->n_outputs + 1, sizeof **outs);
        st = ampc_graph_evaluate(g, c->inputs[k], c->n_inputs, outs[k], c->n_outputs);
        if (st != AMPC_OK) failf(err, st, "%s", ampc_graph_errors(g));
    }
    if (st == AMPC_OK) measure(c, outs, acc);
    free_outs(c, outs);
    return st;
}

ampc_status ampc_check_module(const ampc_check_set *c, ampc_module *m, ampc_accuracy *acc,
                              char **err) {
    ampc_status st = AMPC_OK;
    ampc_tensor **outs = ampc_xcalloc((size_t)c->n_samples + 1, sizeof *outs);
    for (int32_t k = 0; st == AMPC_OK && k < c->n_samples; k++) {
        outs[k] = ampc_xcalloc((size_t)c->n_outputs + 1, sizeof **outs);
        for (int32_t i = 0; i < c->n_outputs; i++) {
            const ampc_tensor *r = &c->ref[k][i];
            size_t nb = (size_t)ampc_shape_numel(&r->shape) * ampc_dtype_size(r->dtype);
            outs[k][i] = (ampc_tensor){r->dtype, r->shape, ampc_xcalloc(nb + 1, 1)};
        }
        st = ampc_module_run(m, c->inputs[k], c->n_inputs, outs[k], c->n_outputs, NULL);
        if (st != AMPC_OK) failf(err, st, "the GPU run failed: %s", ampc_module_errors(m));
    }
    if (st == AMPC_OK) measure(c, outs, acc);
    free_outs(c, outs);
    return st;
}
