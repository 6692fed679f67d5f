/*
 * control.c — reference evaluation of the control-flow ops If, Loop and Scan: each runs its body
 * subgraph with ampc_graph_evaluate, once (If) or once per iteration (Loop, Scan), feeding it the
 * node's captures (the last num_captures inputs, see ir/subgraph.c) after its own inputs.
 * Loop-carried values and Scan states are handed from one iteration's outputs to the next one's
 * inputs without copies; scan outputs are written straight into their slot of the stacked
 * output, so the work is linear in the iterations and in the bytes moved.
 *
 * A body that fails (an index out of range inside it) fails the node: its diagnostics are moved
 * to the node's graph, prefixed with the attribute and the iteration, and cleared from the body
 * so that it can run again.
 *
 * One execution of a Loop runs at most the graph's max_loop_iterations iterations (default
 * AMPC_DEFAULT_MAX_LOOP_ITERATIONS): a trip count or a condition from data cannot make it run
 * for ever. Scan runs once per slice of its inputs, If once: both are bounded by their data.
 */
#include "ref.h"
#include "../subgraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Evaluates body b (attribute `attr` of n) on in[0..n_in-1] into out[0..b->n_outputs-1]
 * (malloc'ed by the evaluator; the caller frees them). iter < 0: not in a loop. */
static ampc_status run_body(ampc_graph *g, const ampc_node *n, const char *attr, ampc_graph *b,
                            const ampc_tensor *in, int32_t n_in, ampc_tensor *out, int64_t iter) {
    b->max_loop_iterations = g->max_loop_iterations; /* nested Loops share the bound */
    b->ref_tf32 = g->ref_tf32;
    ampc_status st = ampc_graph_evaluate(b, in, n_in, out, b->n_outputs);
    if (st == AMPC_OK) return st;
    ampc_strbuf sb = {0};
    for (int32_t i = 0; i < b->diag.n; i++)
        ampc_sb_printf(&sb, "%s%s", i ? "; " : "", b->diag.entries[i].msg);
    if (iter >= 0)
        AMPC_FAIL(g, n, st, "attribute '%s', iteration %lld: %s", attr, (long long)iter,
                  sb.data ? sb.data : ampc_status_str(st));
    else
        AMPC_FAIL(g, n, st, "attribute '%s': %s", attr, sb.data ? sb.data : ampc_status_str(st));
    ampc_sb_free(&sb);
    ampc_diag_clear(&b->diag);
    return st;
}

static size_t tensor_bytes(const ampc_tensor *t) {
    return (size_t)ampc_shape_numel(&t->shape) * ampc_dtype_size(t->dtype);
}

static ampc_graph *body_of(const ampc_node *n, const char *name) {
    ampc_graph *b = ampc_ir_node_body(n, name);
    AMPC_ASSERT(b); /* inference checked it */
    return b;
}

/* Copies a body output into a preallocated node output of the same type. */
static ampc_status put_output(ampc_graph *g, const ampc_node *n, int32_t i, ampc_tensor *dst,
                              const ampc_tensor *src) {
    if (src->dtype != dst->dtype || !ampc_shape_eq(&src->shape, &dst->shape)) {
        char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_EVAL, "output %d: the body gave %s%s, but %s%s was inferred",
                         i, ampc_dtype_name(src->dtype), ampc_shape_str(&src->shape, a, sizeof a),
                         ampc_dtype_name(dst->dtype), ampc_shape_str(&dst->shape, b, sizeof b));
    }
    size_t nb = tensor_bytes(dst);
    if (nb) memcpy(dst->data, src->data, nb);
    return AMPC_OK;
}

static void free_tensors(ampc_tensor *t, int32_t n) {
    for (int32_t i = 0; i < n; i++) ampc_tensor_free(&t[i]);
}

/* ---- If ------------------------------------------------------------------------------------- */

ampc_status ampc_ref_if_else(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    int32_t k = ampc_ir_node_captures(n);
    bool c = ampc_ref_load_i64(in[0]->data, in[0]->dtype, 0) != 0;
    const char *attr = c ? "then_branch" : "else_branch";
    ampc_graph *b = body_of(n, attr);
    ampc_tensor *bin = ampc_xcalloc((size_t)k + 1, sizeof *bin);
    ampc_tensor *bout = ampc_xcalloc((size_t)b->n_outputs + 1, sizeof *bout);
    for (int32_t i = 0; i < k; i++) bin[i] = *in[n->n_inputs - k + i];
    ampc_status st = run_body(g, n, attr, b, bin, k, bout, -1);
    for (int32_t i = 0; st == AMPC_OK && i < n->n_outputs; i++)
        st = put_output(g, n, i, out[i], &bout[i]);
    free_tensors(bout, b->n_outputs); /* all NULL when the body failed */
    free(bin);
    free(bout);
    return st;
}

/* ---- Loop ----------------------------------------------------------------------------------- */

/* The failure of a Loop about to start iteration limit + 1; M < 0: the trip count is absent. */
static ampc_status loop_limit_error(ampc_graph *g, const ampc_node *n, int64_t limit, int64_t M) {
    char why[160];
    if (M >= 0)
        snprintf(why, sizeof why, "trip count %lld from input '%s'", (long long)M,
                 n->inputs[0]->name);
    else
        snprintf(why, sizeof why, "no trip count, and the condition stayed true");
    return AMPC_FAIL(g, n, AMPC_E_EVAL, "more than %lld iterations (%s); raise the limit with "
                     "--max-loop-iterations N (ampc_graph_set_max_loop_iterations)",
                     (long long)limit, why);
}

ampc_status ampc_ref_loop(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    ampc_graph *b = body_of(n, "body");
    int32_t k = ampc_ir_node_captures(n), N = n->n_inputs - 2 - k, K = n->n_outputs - N;
    int64_t M = in[0] ? ampc_ref_load_i64(in[0]->data, in[0]->dtype, 0) : INT64_MAX;
    bool cond = in[1] ? ampc_ref_load_i64(in[1]->data, in[1]->dtype, 0) != 0 : true;
    int64_t T = K > 0 ? out[N]->shape.dims[0] : -1; /* rows of the scan outputs (inferred) */
    int64_t limit = g->max_loop_iterations > 0 ? g->max_loop_iterations
                                               : AMPC_DEFAULT_MAX_LOOP_ITERATIONS;

    int32_t nb_in = 2 + N + k;
    ampc_tensor *bin = ampc_xcalloc((size_t)nb_in, sizeof *bin);
    ampc_tensor *bout = ampc_xcalloc((size_t)b->n_outputs + 1, sizeof *bout);
    ampc_tensor *carried = ampc_xcalloc((size_t)N + 1, sizeof *carried);
    bool *owned = ampc_xcalloc((size_t)N + 1, sizeof *owned);
    int64_t iter = 0;
    uint8_t cond_in = 1;
    bin[0] = (ampc_tensor){AMPC_DTYPE_I64, b->inputs[0]->shape, &iter};
    bin[1] = (ampc_tensor){AMPC_DTYPE_BOOL, b->inputs[1]->shape, &cond_in};
    for (int32_t j = 0; j < N; j++) carried[j] = *in[2 + j]; /* borrowed until replaced */
    for (int32_t i = 0; i < k; i++) bin[2 + N + i] = *in[n->n_inputs - k + i];

    ampc_status st = AMPC_OK;
    for (; iter < M && cond; iter++) {
        if (iter == limit) {
            st = loop_limit_error(g, n, limit, in[0] ? M : -1);
            break;
        }
        for (int32_t j = 0; j < N; j++) bin[2 + j] = carried[j];
        if ((st = run_body(g, n, "body", b, bin, nb_in, bout, iter)) != AMPC_OK) break;
        cond = ampc_ref_load_i64(bout[0].data, bout[0].dtype, 0) != 0;
        ampc_tensor_free(&bout[0]);
        for (int32_t j = 0; j < N; j++) {
            if (owned[j]) ampc_tensor_free(&carried[j]);
            carried[j] = bout[1 + j];
            owned[j] = true;
        }
        for (int32_t j = 0; j < K; j++) {
            ampc_tensor *y = &bout[1 + N + j];
            size_t row = tensor_bytes(y);
            if (st == AMPC_OK && iter >= T)
                st = AMPC_FAIL(g, n, AMPC_E_EVAL, "iteration %lld: the scan outputs were inferred "
                               "for %lld iterations", (long long)iter, (long long)T);
            if (st == AMPC_OK && row)
                memcpy((char *)out[N + j]->data + (size_t)iter * row, y->data, row);
            ampc_tensor_free(y);
        }
        if (st != AMPC_OK) break;
    }
    if (st == AMPC_OK && K > 0 && iter != T)
        st = AMPC_FAIL(g, n, AMPC_E_EVAL, "the loop ran %lld iterations, but its scan outputs were "
                       "inferred for %lld", (long long)iter, (long long)T);
    for (int32_t j = 0; st == AMPC_OK && j < N; j++) st = put_output(g, n, j, out[j], &carried[j]);
    for (int32_t j = 0; j < N; j++)
        if (owned[j]) ampc_tensor_free(&carried[j]);
    free(bin);
    free(bout);
    free(carried);
    free(owned);
    return st;
}

/* ---- Scan ----------------------------------------------------------------------------------- */

/* Bytes of the dims before `axis` (as a count of rows) and after it (as bytes per row). */
static void split_at(const ampc_tensor *t, int32_t axis, int64_t *outer, size_t *inner) {
    int64_t o = 1, i = 1;
    for (int32_t d = 0; d < axis; d++) o *= t->shape.dims[d];
    for (int32_t d = axis + 1; d < t->shape.rank; d++) i *= t->shape.dims[d];
    *outer = o;
    *inner = (size_t)i * ampc_dtype_size(t->dtype);
}

ampc_status ampc_ref_scan(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    ampc_graph *b = body_of(n, "body");
    int32_t k = ampc_ir_node_captures(n);
    const ampc_scan_params sp = ampc_scan_params_of(n);
    int32_t M = sp.n_scan_inputs;
    int32_t N = n->n_inputs - k - M, K = n->n_outputs - N, nb_in = N + M + k;
    int32_t *in_ax = ampc_xcalloc((size_t)M + 1, sizeof *in_ax);
    int32_t *out_ax = ampc_xcalloc((size_t)K + 1, sizeof *out_ax);
    for (int32_t j = 0; j < M; j++) {
        int64_t a = ampc_scan_entry(sp.in_axes, j);
        in_ax[j] = (int32_t)(a < 0 ? a + in[N + j]->shape.rank : a);
    }
    for (int32_t j = 0; j < K; j++) {
        int64_t a = ampc_scan_entry(sp.out_axes, j);
        out_ax[j] = (int32_t)(a < 0 ? a + out[N + j]->shape.rank : a);
    }
    int64_t L = in[N]->shape.dims[in_ax[0]];

    ampc_tensor *bin = ampc_xcalloc((size_t)nb_in + 1, sizeof *bin);
    ampc_tensor *bout = ampc_xcalloc((size_t)b->n_outputs + 1, sizeof *bout);
    ampc_tensor *state = ampc_xcalloc((size_t)N + 1, sizeof *state);
    bool *owned = ampc_xcalloc((size_t)N + 1, sizeof *owned);
    ampc_status st = AMPC_OK;
    for (int32_t j = 0; j < N; j++) state[j] = *in[j];
    for (int32_t j = 0; j < M && st == AMPC_OK; j++) { /* one slice buffer per scan input */
        const ampc_value *bv = b->inputs[N + j];
        size_t nb = ampc_ir_nbytes(bv);
        bin[N + j] = (ampc_tensor){bv->dtype, bv->shape, malloc(nb ? nb : 1)};
        if (!bin[N + j].data)
            st = AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory for a slice of %zu bytes", nb);
    }
    for (int32_t i = 0; i < k; i++) bin[N + M + i] = *in[n->n_inputs - k + i];

    for (int64_t t = 0; st == AMPC_OK && t < L; t++) {
        for (int32_t j = 0; j < N; j++) bin[j] = state[j];
        for (int32_t j = 0; j < M; j++) { /* gather slice t (or L-1-t) along the scan axis */
            int64_t pos = ampc_scan_entry(sp.in_dirs, j) ? L - 1 - t : t, outer;
            size_t inner;
            split_at(in[N + j], in_ax[j], &outer, &inner);
            const char *src = in[N + j]->data;
            char *dst = bin[N + j].data;
            for (int64_t o = 0; o < outer && inner; o++)
                memcpy(dst + (size_t)o * inner, src + ((size_t)o * (size_t)L + (size_t)pos) * inner,
                       inner);
        }
        if ((st = run_body(g, n, "body", b, bin, nb_in, bout, t)) != AMPC_OK) break;
        for (int32_t j = 0; j < N; j++) {
            if (owned[j]) ampc_tensor_free(&state[j]);
            state[j] = bout[j];
            owned[j] = true;
        }
        for (int32_t j = 0; j < K; j++) { /* scatter into row t (or L-1-t) of the output */
            int64_t pos = ampc_scan_entry(sp.out_dirs, j) ? L - 1 - t : t, outer;
            size_t inner;
            split_at(out[N + j], out_ax[j], &outer, &inner);
            char *dst = out[N + j]->data;
            const char *src = bout[N + j].data;
            for (int64_t o = 0; o < outer && inner; o++)
                memcpy(dst + ((size_t)o * (size_t)L + (size_t)pos) * inner, src + (size_t)o * inner,
                       inner);
            ampc_tensor_free(&bout[N + j]);
        }
    }
    for (int32_t j = 0; st == AMPC_OK && j < N; j++) st = put_output(g, n, j, out[j], &state[j]);
    for (int32_t j = 0; j < N; j++)
        if (owned[j]) ampc_tensor_free(&state[j]);
    for (int32_t j = 0; j < M; j++) free(bin[N + j].data);
    free(bin);
    free(bout);
    free(state);
    free(owned);
    free(in_ax);
    free(out_ax);
    return st;
}

/* ampc.LoopBegin and ampc.LoopEnd mark a Loop in a GPU build's graph (ir/subgraph.h); the
 * reference evaluator runs the Loop node itself. */
ampc_status ampc_ref_loop_mark(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                               ampc_tensor *const *out) {
    (void)in, (void)out;
    return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "%s marks a Loop for the GPU's plan; the reference "
                     "evaluator runs the Loop node, not its marks", ampc_op_get(n->op)->onnx);
}
