/*
 * auto_precision.c — --precision auto (see auto_precision.h for the method).
 *
 * A probe is a float value some node produces. Each search evaluation makes every probe a graph
 * output, so both runs hand back the same values by name; the probes' producers and the probes
 * they read are taken once from the model as imported (names are stable from one load to the
 * next).
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "compiler/auto_precision.h"

#include "ir/ir.h"
#include "ir/ref/ref.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Activations kept for the comparison, at most, over the search samples (raw tensors of their
 * own dtype). */
#define PROBE_BUDGET_BYTES ((int64_t)3 << 30)

typedef struct probe {
    char *value;        /* the value's name */
    char *node;         /* its producer's name */
    int32_t *reads;     /* probes the producer reads */
    int32_t n_reads;
    ampc_tensor *ref;   /* its value in the model as written, per search sample */
    double err;         /* this round's relative error (the largest over the samples) */
} probe;

typedef struct search {
    const ampc_auto_options *o;
    ampc_graph *(*load)(void *user);
    void *user;
    probe *probes;
    int32_t n_probes, n_outputs; /* the model's own outputs come first */
    char **kept;                 /* names moved to f32 so far */
    int32_t n_kept;
    char *err;
} search;

static ampc_status fail(search *s, ampc_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampc_strbuf sb = {0};
    ampc_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    free(s->err);
    s->err = ampc_sb_take(&sb);
    return st;
}

static bool probe_worthy(const ampc_value *v) {
    return v && !v->data && !(v->flags & AMPC_VALUE_POISON) && ampc_dtype_is_float(v->dtype) &&
           v->dtype != AMPC_DTYPE_F64;
}

static int32_t probe_index(const search *s, const char *value) {
    for (int32_t i = 0; i < s->n_probes; i++)
        if (!strcmp(s->probes[i].value, value)) return i;
    return -1;
}

/* The probes of the model as imported: its outputs first, then every float value a node makes. */
static ampc_status find_probes(search *s, ampc_graph *g) {
    s->probes = ampc_xcalloc((size_t)g->n_values + 1, sizeof *s->probes);
    int64_t bytes = 0;
    for (int32_t i = 0; i < g->n_outputs; i++) {
        s->probes[s->n_probes++] = (probe){.value = ampc_xstrdup(g->outputs[i]->name),
                                           .node = ampc_xstrdup("")};
    }
    s->n_outputs = g->n_outputs;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        for (int32_t k = 0; !n->dead && k < n->n_outputs; k++) {
            const ampc_value *v = n->outputs[k];
            int32_t at = probe_index(s, v->name);
            if (!probe_worthy(v) && at < 0) continue;
            if (at < 0) {
                at = s->n_probes++;
                s->probes[at] = (probe){.value = ampc_xstrdup(v->name)};
            }
            probe *p = &s->probes[at];
            free(p->node);
            p->node = ampc_xstrdup(n->name);
            p->reads = ampc_xcalloc((size_t)n->n_inputs + 1, sizeof *p->reads);
            for (int32_t j = 0; j < n->n_inputs; j++) {
                int32_t r = n->inputs[j] ? probe_index(s, n->inputs[j]->name) : -1;
                if (r >= 0) p->reads[p->n_reads++] = r;
            }
            bytes += ampc_ir_numel(v) * (int64_t)ampc_dtype_size(v->dtype) * s->o->n_search;
        }
    }
    if (bytes > PROBE_BUDGET_BYTES)
        return fail(s, AMPC_E_OOM, "the model's activations for %d calibration samples take %.1f "
                    "GiB; the search keeps them all (at most %.0f GiB): calibrate with fewer "
                    "samples or a smaller batch (--shape)", s->o->n_search,
                    (double)bytes / (1 << 30), (double)PROBE_BUDGET_BYTES / (1 << 30));
    return AMPC_OK;
}

/* A fresh copy of the model with every probe among its outputs. */
static ampc_graph *load_probed(search *s) {
    ampc_graph *g = s->load(s->user);
    if (!g) return NULL;
    for (int32_t i = s->n_outputs; i < s->n_probes; i++) {
        ampc_value *v = ampc_ir_value_find(g, s->probes[i].value);
        if (v && !(v->flags & AMPC_VALUE_OUTPUT)) ampc_ir_graph_add_output(g, v);
    }
    return g;
}

static void free_outputs(ampc_tensor *t, int32_t n) {
    for (int32_t i = 0; t && i < n; i++) ampc_tensor_free(&t[i]);
    free(t);
}

/* Evaluates g on search sample k; *out receives its outputs (g->n_outputs of them). */
static ampc_status evaluate(search *s, ampc_graph *g, int32_t k, ampc_tensor **out) {
    *out = ampc_xcalloc((size_t)g->n_outputs + 1, sizeof **out);
    ampc_status st = ampc_graph_evaluate(g, s->o->samples[k], g->n_inputs, *out, g->n_outputs);
    if (st != AMPC_OK) fail(s, st, "%s", ampc_graph_errors(g));
    return st;
}

/* The model as written on every search sample: each probe's reference values. */
static ampc_status reference_run(search *s) {
    ampc_graph *g = load_probed(s);
    if (!g) return fail(s, AMPC_E_INVALID_ARG, "cannot load the model again");
    for (int32_t i = 0; i < s->n_probes; i++)
        s->probes[i].ref = ampc_xcalloc((size_t)s->o->n_search + 1, sizeof *s->probes[i].ref);
    ampc_status st = AMPC_OK;
    for (int32_t k = 0; st == AMPC_OK && k < s->o->n_search; k++) {
        ampc_tensor *out;
        if ((st = evaluate(s, g, k, &out)) != AMPC_OK) break;
        for (int32_t i = 0; i < g->n_outputs; i++) {
            int32_t at = probe_index(s, g->outputs[i]->name);
            if (at < 0) continue;
            s->probes[at].ref[k] = out[i];
            out[i] = (ampc_tensor){0};
        }
        free_outputs(out, g->n_outputs);
    }
    ampc_graph_destroy(g);
    return st;
}

/* The probe's error in output `got` of sample k: max |Δ| / max |ref| (the model's outputs over
 * the search's rows only when one sample is split along its batch). */
static double probe_error(const search *s, int32_t at, const ampc_tensor *got, int32_t k) {
    const ampc_tensor *g1 = got, *r1 = &s->probes[at].ref[k];
    bool rows = s->o->split_batch && at < s->n_outputs;
    return ampc_accuracy_of(&g1, &r1, 1, rows, 0, s->o->batch / 2).max_rel;
}

/* Whether node `name` of the optimised graph computes in the low type (its first float output is
 * of that type). */
static bool runs_low(const ampc_graph *g, const char *name, ampc_dtype low) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const ampc_node *n = g->nodes[i];
        if (n->dead || strcmp(n->name, name)) continue;
        for (int32_t k = 0; k < n->n_outputs; k++)
            if (ampc_dtype_is_float(n->outputs[k]->dtype)) return n->outputs[k]->dtype == low;
    }
    return false;
}

static bool already_kept(const search *s, const char *name) {
    for (int32_t i = 0; i < s->n_kept; i++)
        if (!strcmp(s->kept[i], name)) return true;
    return false;
}

typedef struct candidate {
    int32_t probe;
    double gain; /* the error the node adds to what it reads */
} candidate;

static int by_gain(const void *a, const void *b) {
    double x = ((const candidate *)a)->gain, y = ((const candidate *)b)->gain;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The build's pipeline options with the search's precision and its choice so far. */
static ampc_pipeline_options build_options(const ampc_auto_options *o, char **kept,
                                           int32_t n_kept) {
    ampc_pipeline_options po = o->pipeline;
    po.precision = o->low;
    po.auto_fp32 = (const char *const *)kept;
    po.n_auto_fp32 = n_kept;
    po.verify = true;
    po.record = NULL, po.n_records = NULL, po.max_records = 0;
    po.trace = NULL, po.dump_after = NULL;
    return po;
}

/* One low-type evaluation of the probed build: the outputs' error in *error; the nodes running
 * low, ranked by what each adds, go to cands (*n_cands of them). */
static ampc_status low_run(search *s, double *error, candidate *cands, int32_t *n_cands) {
    ampc_graph *g = load_probed(s);
    if (!g) return fail(s, AMPC_E_INVALID_ARG, "cannot load the model again");
    ampc_pipeline_options po = build_options(s->o, s->kept, s->n_kept);
    ampc_status st = ampc_graph_optimize(g, &po);
    if (st != AMPC_OK) fail(s, st, "%s", ampc_graph_errors(g));
    ampc_graph_set_reference_tf32(g, s->o->tf32);
    for (int32_t i = 0; i < s->n_probes; i++) s->probes[i].err = 0;
    for (int32_t k = 0; st == AMPC_OK && k < s->o->n_search; k++) {
        ampc_tensor *out;
        if ((st = evaluate(s, g, k, &out)) != AMPC_OK) break;
        for (int32_t i = 0; i < g->n_outputs; i++) {
            int32_t at = probe_index(s, g->outputs[i]->name);
            if (at < 0 || !s->probes[at].ref[k].data) continue;
            double e = probe_error(s, at, &out[i], k);
            if (!(e <= s->probes[at].err)) s->probes[at].err = e;
        }
        free_outputs(out, g->n_outputs);
    }
    *error = 0;
    for (int32_t i = 0; i < s->n_outputs; i++)
        if (!(s->probes[i].err <= *error)) *error = s->probes[i].err;
    *n_cands = 0;
    ampc_dtype low = s->o->low == AMPC_PRECISION_BF16 ? AMPC_DTYPE_BF16 : AMPC_DTYPE_F16;
    for (int32_t i = 0; st == AMPC_OK && i < s->n_probes; i++) {
        const probe *p = &s->probes[i];
        if (!p->node || !*p->node || already_kept(s, p->node) || !runs_low(g, p->node, low)) continue;
        double in = 0;
        for (int32_t k = 0; k < p->n_reads; k++)
            if (s->probes[p->reads[k]].err > in) in = s->probes[p->reads[k]].err;
        cands[(*n_cands)++] = (candidate){i, p->err - in};
    }
    qsort(cands, (size_t)*n_cands, sizeof *cands, by_gain);
    ampc_graph_destroy(g);
    return st;
}

/* The search's rounds; fills r's kept list, errors and rounds. */
static ampc_status run_search(search *s, ampc_auto_result *r) {
    const ampc_auto_options *o = s->o;
    candidate *cands = ampc_xcalloc((size_t)s->n_probes + 1, sizeof *cands);
    int32_t max_rounds = o->max_rounds > 0 ? o->max_rounds : 8;
    ampc_status st = AMPC_OK;
    for (int32_t round = 0; st == AMPC_OK; round++) {
        double error = 0;
        int32_t n_cands = 0;
        if ((st = low_run(s, &error, cands, &n_cands)) != AMPC_OK) break;
        r->rounds++;
        if (round == 0) r->error_low = error;
        r->error = error;
        bool met = error <= o->tolerance;
        /* Each round moves back twice as many nodes as the one before, from 1/32 of the nodes
         * running low: a few rounds reach any fraction. */
        int32_t k = (int32_t)ceil((double)n_cands * (1 << (round < 5 ? round : 5)) / 32.0);
        if (o->log)
            fprintf(o->log, "ampc: precision auto, round %d: outputs' error %.3g on the search "
                    "samples (tolerance %g), %d nodes low%s\n", round + 1, error, o->tolerance,
                    n_cands, met ? ": done" : n_cands && round + 1 < max_rounds ? "" : ": giving up");
        if (met || !n_cands || round + 1 >= max_rounds) break;
        for (int32_t i = 0; i < k && i < n_cands; i++) {
            s->kept[s->n_kept++] = ampc_xstrdup(s->probes[cands[i].probe].node);
            if (o->log)
                fprintf(o->log, "ampc:   to f32: node '%s' (adds %.3g to the error of '%s')\n",
                        s->probes[cands[i].probe].node, cands[i].gain, s->probes[cands[i].probe].value);
        }
    }
    free(cands);
    return st;
}

/* The check: what ships, built without probes, on the check samples. */
static ampc_status check_build(search *s, ampc_auto_result *r) {
    const ampc_auto_options *o = s->o;
    ampc_graph *g = s->load(s->user);
    if (!g) return fail(s, AMPC_E_INVALID_ARG, "cannot load the model again");
    bool split = o->split_batch, same = !split && o->n_search >= o->n_samples;
    ampc_tensor **inputs = split || same ? o->samples : o->samples + o->n_search;
    int32_t n = split || same ? o->n_samples : o->n_samples - o->n_search;
    char *err = NULL;
    ampc_status st = ampc_check_set_init(&r->check, g, inputs, n, &err);
    ampc_graph_destroy(g);
    if (st == AMPC_OK && split) {
        r->check.rows = true;
        r->check.row0 = o->batch / 2;
        r->check.row1 = o->batch;
    }
    if (st == AMPC_OK && !(g = s->load(s->user))) st = AMPC_E_INVALID_ARG;
    if (st == AMPC_OK) {
        ampc_pipeline_options po = build_options(o, r->kept, r->n_kept);
        r->acc = ampc_xcalloc((size_t)r->check.n_outputs + 1, sizeof *r->acc);
        st = ampc_check_reference(&r->check, g, &po, o->tf32, r->acc, &err);
        ampc_graph_destroy(g);
    }
    if (st != AMPC_OK) return fail(s, st, "checking the build: %s", err ? err : "cannot load the model");
    free(err);
    r->check_error = ampc_accuracy_worst(r->acc, r->check.n_outputs);
    r->met = r->check_error <= o->tolerance;
    return AMPC_OK;
}

ampc_status ampc_auto_precision(ampc_graph *(*load)(void *user), void *user,
                                const ampc_auto_options *o, ampc_auto_result *r, char **err) {
    memset(r, 0, sizeof *r);
    if (err) *err = NULL;
    search s = {.o = o, .load = load, .user = user};
    ampc_graph *g = load(user);
    ampc_status st = g ? find_probes(&s, g) : fail(&s, AMPC_E_INVALID_ARG, "cannot load the model");
    ampc_graph_destroy(g);
    s.kept = ampc_xcalloc((size_t)s.n_probes + 1, sizeof *s.kept);
    if (st == AMPC_OK) st = reference_run(&s);
    if (st == AMPC_OK) st = run_search(&s, r);
    r->kept = s.kept;
    r->n_kept = s.n_kept;
    for (int32_t i = 0; i < s.n_probes; i++) {
        free(s.probes[i].value);
        free(s.probes[i].node);
        free(s.probes[i].reads);
        free_outputs(s.probes[i].ref, s.probes[i].ref ? o->n_search : 0);
    }
    free(s.probes);
    if (st == AMPC_OK) st = check_build(&s, r);
    if (st != AMPC_OK) {
        if (err) *err = s.err ? s.err : ampc_xstrdup("the precision search failed");
        else free(s.err);
        ampc_auto_result_free(r);
        return st;
    }
    free(s.err);
    return AMPC_OK;
}

void ampc_auto_result_free(ampc_auto_result *r) {
    for (int32_t i = 0; i < r->n_kept; i++) free(r->kept[i]);
    free(r->kept);
    free(r->acc);
    ampc_check_set_free(&r->check);
    r->kept = NULL;
    r->acc = NULL;
    r->n_kept = 0;
}
