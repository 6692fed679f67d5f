/*
 * control.c — shape and dtype inference of the control-flow ops If, Loop and Scan.
 *
 * Their bodies are subgraphs (graph attributes) built with concrete input types before the node
 * (ir/subgraph.c: a body's inputs are its ONNX inputs, then the node's captures), so every value
 * inside already has its dtype and shape. Inference checks the body interface against what the
 * node feeds it (counts, the dtype and shape of every body input, the captures), then derives
 * the node's outputs from the body's outputs:
 *
 *   If    both branches give the same dtypes and shapes; when they disagree in shape the
 *         condition must be a constant, and the taken branch decides.
 *   Loop  loop-carried values keep their dtype and shape; scan outputs get a new first dim, the
 *         trip count, which must be known at compile time (see trip_count below).
 *   Scan  (opset 9 form) states keep their dtype and shape; scan inputs are sliced along their
 *         scan axis (one sequence length for all), scan outputs stacked along theirs.
 */
#include "infer.h"
#include "../subgraph.h"

#include <stdio.h>
#include <string.h>

/* ---- shared checks -------------------------------------------------------------------------- */

static bool is_const(const ampc_value *v) {
    return v && v->data && !(v->flags & AMPC_VALUE_INPUT); /* an input's data is only a default */
}

static bool one_element(const ampc_value *v) { return ampc_shape_numel(&v->shape) == 1; }

/* The graph attribute `name` of n: present, a graph, and built without errors. */
static ampc_graph *body_of(ampc_graph *g, ampc_node *n, const char *name) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    if (!a) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' (a graph) is required", name);
        return NULL;
    }
    if (a->kind != AMPC_ATTR_GRAPH || !a->graph) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be a graph", name);
        return NULL;
    }
    ampc_graph *b = a->graph;
    if (ampc_graph_status(b) != AMPC_OK) {
        AMPC_FAIL(g, n, ampc_graph_status(b), "attribute '%s': subgraph '%s' failed to build: %s",
                  name, b->name, b->diag.n ? b->diag.entries[0].msg : "(no message)");
        return NULL;
    }
    for (int32_t i = 0; i < b->n_outputs; i++)
        if (b->outputs[i]->flags & AMPC_VALUE_POISON) {
            AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "attribute '%s': subgraph output %d '%s' comes "
                      "from a node that failed to build", name, i, b->outputs[i]->name);
            return NULL;
        }
    return b;
}

/* The capture count: attribute num_captures, in range (the node has `fixed` other inputs at
 * least), every capture present. -1 with a diagnostic otherwise. */
static int32_t captures_of(ampc_graph *g, ampc_node *n, int32_t fixed) {
    if (n->n_inputs > 64) { /* the evaluator's per-node limit */
        AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "the node has %d inputs (captures included); ampc "
                  "supports at most 64", n->n_inputs);
        return -1;
    }
    int64_t k = ampc_ir_attr_int(g, n, AMPC_ATTR_NUM_CAPTURES, 0);
    if (ampc_graph_status(g) != AMPC_OK) return -1; /* mistyped: reported */
    if (k < 0 || k > n->n_inputs - fixed) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' is %lld, but the node has %d inputs of which "
                  "at most %d can be captures", AMPC_ATTR_NUM_CAPTURES, (long long)k, n->n_inputs,
                  AMPC_MAX(n->n_inputs - fixed, 0));
        return -1;
    }
    for (int32_t i = n->n_inputs - (int32_t)k; i < n->n_inputs; i++)
        if (!n->inputs[i]) {
            AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "input %d is absent, but it is capture %d "
                      "(captures are always present)", i, i - (n->n_inputs - (int32_t)k));
            return -1;
        }
    return (int32_t)k;
}

/* Checks that body b (attribute `attr`) has n_in inputs and n_out outputs; `layout` says what
 * they are, for the message. */
static bool body_arity(ampc_graph *g, ampc_node *n, const char *attr, const ampc_graph *b,
                       int32_t n_in, int32_t n_out, const char *in_layout,
                       const char *out_layout) {
    if (b->n_inputs != n_in) {
        AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "attribute '%s': subgraph '%s' has %d inputs, expected "
                  "%d (%s)", attr, b->name, b->n_inputs, n_in, in_layout);
        return false;
    }
    if (b->n_outputs != n_out) {
        AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "attribute '%s': subgraph '%s' has %d outputs, "
                  "expected %d (%s)", attr, b->name, b->n_outputs, n_out, out_layout);
        return false;
    }
    return true;
}

/* Checks that body input bi has dtype t and shape s, which the node feeds it as `what`. */
static bool body_input_is(ampc_graph *g, ampc_node *n, const char *attr, const ampc_graph *b,
                          int32_t bi, ampc_dtype t, const ampc_shape *s, const char *what) {
    const ampc_value *v = b->inputs[bi];
    if (v->dtype == t && ampc_shape_eq(&v->shape, s)) return true;
    char got[AMPC_TYPE_STR_MAX], sh[AMPC_SHAPE_STR_MAX];
    AMPC_FAIL(g, n, v->dtype == t ? AMPC_E_SHAPE : AMPC_E_DTYPE,
              "attribute '%s': subgraph input %d '%s' is %s, but the node feeds it %s%s (%s)", attr,
              bi, v->name, ampc_value_type_str(v, got, sizeof got), ampc_dtype_name(t),
              ampc_shape_str(s, sh, sizeof sh), what);
    return false;
}

/* Checks the k captures of n against the last k inputs of body b. */
static bool body_captures_ok(ampc_graph *g, ampc_node *n, const char *attr, const ampc_graph *b,
                             int32_t k) {
    for (int32_t i = 0; i < k; i++) {
        const ampc_value *outer = n->inputs[n->n_inputs - k + i];
        char what[160];
        snprintf(what, sizeof what, "capture %d: input %d '%.100s'", i, n->n_inputs - k + i,
                 outer->name);
        if (!body_input_is(g, n, attr, b, b->n_inputs - k + i, outer->dtype, &outer->shape, what))
            return false;
    }
    return true;
}

/* Checks that body output bo keeps the dtype and shape of body input bi (a loop-carried value
 * or a scan state): a changing dtype is an error, a changing shape is not static. */
static bool body_keeps_type(ampc_graph *g, ampc_node *n, const ampc_graph *b, int32_t bo,
                            int32_t bi, const char *what) {
    const ampc_value *in = b->inputs[bi], *out = b->outputs[bo];
    char x[AMPC_TYPE_STR_MAX], y[AMPC_TYPE_STR_MAX];
    if (out->dtype != in->dtype) {
        AMPC_FAIL(g, n, AMPC_E_DTYPE, "%s enters the body as %s (input %d '%s') but the body "
                  "returns %s (output %d '%s'); it must keep its dtype", what,
                  ampc_value_type_str(in, x, sizeof x), bi, in->name,
                  ampc_value_type_str(out, y, sizeof y), bo, out->name);
        return false;
    }
    if (!ampc_shape_eq(&out->shape, &in->shape)) {
        AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "%s enters the body as %s (input %d '%s') but the "
                  "body returns %s (output %d '%s'); ampc compiles static shapes, so it must keep "
                  "its shape from one iteration to the next", what,
                  ampc_value_type_str(in, x, sizeof x), bi, in->name,
                  ampc_value_type_str(out, y, sizeof y), bo, out->name);
        return false;
    }
    return true;
}

/* Sets output i to dtype t and shape s with a new dim of size len inserted at `axis`. */
static bool set_stacked(ampc_graph *g, ampc_node *n, int32_t i, ampc_dtype t, const ampc_shape *s,
                        int32_t axis, int64_t len) {
    if (s->rank + 1 > AMPC_MAX_RANK) {
        AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "output %d stacks values of rank %d, giving rank %d; "
                  "ampc supports ranks up to %d", i, s->rank, s->rank + 1, AMPC_MAX_RANK);
        return false;
    }
    ampc_shape r = {.rank = s->rank + 1};
    for (int32_t d = 0, j = 0; d < r.rank; d++) r.dims[d] = d == axis ? len : s->dims[j++];
    ampc_infer_set(n, i, t, &r);
    return true;
}

/* ---- If ------------------------------------------------------------------------------------- */

ampc_status ampc_infer_if_else(ampc_graph *g, ampc_node *n) {
    int32_t k = captures_of(g, n, 1);
    if (k < 0) return ampc_graph_status(g);
    const ampc_value *cond = n->inputs[0];
    if (!ampc_infer_check_dtype(g, n, 0, DT_BOOL)) return AMPC_E_DTYPE;
    if (!one_element(cond)) {
        char s[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' (the condition) must hold one element, "
                         "got shape %s", cond->name, ampc_shape_str(&cond->shape, s, sizeof s));
    }
    static const char *const names[2] = {"then_branch", "else_branch"};
    ampc_graph *br[2];
    char layout[64];
    snprintf(layout, sizeof layout, "%d capture%s", k, k == 1 ? "" : "s");
    for (int i = 0; i < 2; i++) {
        if (!(br[i] = body_of(g, n, names[i]))) return ampc_graph_status(g);
        if (!body_arity(g, n, names[i], br[i], k, n->n_outputs, layout, "one per output of the If"))
            return AMPC_E_INVALID_ARG;
        if (!body_captures_ok(g, n, names[i], br[i], k)) return ampc_graph_status(g);
    }
    int taken = is_const(cond) ? (((const uint8_t *)cond->data)[0] ? 0 : 1) : -1;
    for (int32_t i = 0; i < n->n_outputs; i++) {
        const ampc_value *t = br[0]->outputs[i], *e = br[1]->outputs[i];
        char x[AMPC_TYPE_STR_MAX], y[AMPC_TYPE_STR_MAX];
        if (t->dtype != e->dtype)
            return AMPC_FAIL(g, n, AMPC_E_DTYPE, "output %d: then_branch gives %s ('%s'), "
                             "else_branch gives %s ('%s'); both branches must give one dtype", i,
                             ampc_value_type_str(t, x, sizeof x), t->name,
                             ampc_value_type_str(e, y, sizeof y), e->name);
        if (taken < 0 && !ampc_shape_eq(&t->shape, &e->shape))
            return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "output %d: then_branch gives %s ('%s'), "
                             "else_branch gives %s ('%s'); ampc compiles static shapes, so both "
                             "branches must give one shape unless the condition (input 0 '%s') "
                             "is known at compile time", i, ampc_value_type_str(t, x, sizeof x),
                             t->name, ampc_value_type_str(e, y, sizeof y), e->name, cond->name);
        const ampc_value *src = taken == 1 ? e : t;
        ampc_infer_set(n, i, src->dtype, &src->shape);
    }
    return AMPC_OK;
}

/* ---- Loop ----------------------------------------------------------------------------------- */

/* What the body's condition output (output 0) is. */
typedef enum { COND_RUNTIME, COND_PASSED, COND_TRUE, COND_FALSE } cond_kind;

static cond_kind body_cond(const ampc_graph *b) {
    const ampc_value *v = b->outputs[0];
    for (;;) {
        if (is_const(v)) return ((const uint8_t *)v->data)[0] ? COND_TRUE : COND_FALSE;
        if (v == b->inputs[1]) return COND_PASSED; /* the condition input, unchanged */
        if (!v->producer || v->producer->op != AMPC_OP_IDENTITY) return COND_RUNTIME;
        v = v->producer->inputs[0];
    }
}

/* The trip count of a Loop, when it is known at compile time. It is when the loop cannot stop
 * early and its bound is a constant:
 *   - the initial condition (input 1) is constant false: 0 iterations;
 *   - else it must be absent or a constant true, and
 *       the body returns its condition input unchanged (through Identity nodes at most) or a
 *       constant true: the trip count is M (input 0), which must be a constant (max(M, 0));
 *       the body returns a constant false: one iteration (none when M <= 0).
 * Otherwise false, with the reason in why. */
static bool trip_count(const ampc_node *n, const ampc_graph *b, int64_t *T, char *why, size_t nw) {
    const ampc_value *m = n->inputs[0], *c = n->n_inputs > 1 ? n->inputs[1] : NULL;
    if (c && !is_const(c)) {
        snprintf(why, nw, "the initial condition (input 1 '%.64s') is computed at run time",
                 c->name);
        return false;
    }
    if (c && !((const uint8_t *)c->data)[0]) {
        *T = 0;
        return true;
    }
    cond_kind k = body_cond(b);
    if (k == COND_RUNTIME) {
        snprintf(why, nw, "the body computes its condition (output 0 '%.64s') at run time, so the "
                 "loop may stop early", b->outputs[0]->name);
        return false;
    }
    if (m && !is_const(m)) {
        snprintf(why, nw, "the trip count M (input 0 '%.64s') is computed at run time", m->name);
        return false;
    }
    int64_t mv = m ? AMPC_MAX(((const int64_t *)m->data)[0], 0) : INT64_MAX;
    *T = k == COND_FALSE ? AMPC_MIN(mv, 1) : mv;
    return true;
}

ampc_status ampc_infer_loop(ampc_graph *g, ampc_node *n) {
    if (n->n_inputs < 2)
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "Loop takes M and cond (each may be absent) "
                         "before its loop-carried values, got %d inputs", n->n_inputs);
    int32_t k = captures_of(g, n, 2);
    if (k < 0) return ampc_graph_status(g);
    int32_t N = n->n_inputs - 2 - k, K = n->n_outputs - N;
    if (K < 0)
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "Loop has %d loop-carried values (inputs 2 to "
                         "%d) but %d outputs; it has one output per loop-carried value, then its "
                         "scan outputs", N, N + 1, n->n_outputs);
    const ampc_value *m = n->inputs[0], *c = n->inputs[1];
    char s[AMPC_TYPE_STR_MAX];
    if (m && (m->dtype != AMPC_DTYPE_I64 || !one_element(m)))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 0 '%s' (the trip count M) must be an i64 "
                         "tensor of one element, got %s", m->name,
                         ampc_value_type_str(m, s, sizeof s));
    if (c && (c->dtype != AMPC_DTYPE_BOOL || !one_element(c)))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "input 1 '%s' (the condition) must be a bool tensor "
                         "of one element, got %s", c->name, ampc_value_type_str(c, s, sizeof s));
    for (int32_t j = 2; j < 2 + N; j++)
        if (!n->inputs[j])
            return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "input %d (loop-carried value %d) is "
                             "absent; loop-carried values are required", j, j - 2);
    ampc_graph *b = body_of(g, n, "body");
    if (!b) return ampc_graph_status(g);
    char in_layout[160], out_layout[160];
    snprintf(in_layout, sizeof in_layout, "the iteration number, the condition, %d loop-carried "
             "value%s and %d capture%s", N, N == 1 ? "" : "s", k, k == 1 ? "" : "s");
    snprintf(out_layout, sizeof out_layout, "the condition, %d loop-carried value%s and %d scan "
             "output%s", N, N == 1 ? "" : "s", K, K == 1 ? "" : "s");
    if (!body_arity(g, n, "body", b, 2 + N + k, 1 + N + K, in_layout, out_layout))
        return AMPC_E_INVALID_ARG;
    const ampc_value *it = b->inputs[0], *bc = b->inputs[1], *co = b->outputs[0];
    if (it->dtype != AMPC_DTYPE_I64 || !one_element(it))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "attribute 'body': subgraph input 0 '%s' (the "
                         "iteration number) must be an i64 tensor of one element, got %s",
                         it->name, ampc_value_type_str(it, s, sizeof s));
    if (bc->dtype != AMPC_DTYPE_BOOL || !one_element(bc))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "attribute 'body': subgraph input 1 '%s' (the "
                         "condition) must be a bool tensor of one element, got %s", bc->name,
                         ampc_value_type_str(bc, s, sizeof s));
    if (co->dtype != AMPC_DTYPE_BOOL || !one_element(co))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "attribute 'body': subgraph output 0 '%s' (the "
                         "condition) must be a bool tensor of one element, got %s", co->name,
                         ampc_value_type_str(co, s, sizeof s));
    for (int32_t j = 0; j < N; j++) {
        const ampc_value *v = n->inputs[2 + j];
        char what[160];
        snprintf(what, sizeof what, "loop-carried value %d: input %d '%.100s'", j, 2 + j, v->name);
        if (!body_input_is(g, n, "body", b, 2 + j, v->dtype, &v->shape, what))
            return ampc_graph_status(g);
    }
    if (!body_captures_ok(g, n, "body", b, k)) return ampc_graph_status(g);
    for (int32_t j = 0; j < N; j++) {
        char what[64];
        snprintf(what, sizeof what, "loop-carried value %d", j);
        if (!body_keeps_type(g, n, b, 1 + j, 2 + j, what)) return ampc_graph_status(g);
        ampc_infer_set(n, j, n->inputs[2 + j]->dtype, &n->inputs[2 + j]->shape);
    }
    int64_t T = 0;
    char why[256] = "";
    bool known = trip_count(n, b, &T, why, sizeof why);
    if (known && T == INT64_MAX)
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "the Loop never ends: it has no trip count M "
                         "(input 0 is absent) and its condition stays true (the initial one is "
                         "%s and the body %s)", c ? "a constant true" : "absent",
                         body_cond(b) == COND_PASSED ? "returns it unchanged"
                                                     : "returns a constant true");
    if (K > 0 && !known)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "Loop has %d scan output%s, stacked along a new "
                         "first dim whose size is the number of iterations, and ampc compiles "
                         "static shapes: it needs that number at compile time, but %s (it is "
                         "known when M is a constant and the condition is absent or a constant "
                         "true that the body returns unchanged)", K, K == 1 ? "" : "s", why);
    for (int32_t j = 0; j < K; j++) {
        const ampc_value *v = b->outputs[1 + N + j];
        if (!set_stacked(g, n, N + j, v->dtype, &v->shape, 0, T)) return AMPC_E_UNSUPPORTED;
    }
    return AMPC_OK;
}

/* ---- Scan ----------------------------------------------------------------------------------- */

/* Reads an optional ints attribute of `count` entries into out (default 0s); entries of a
 * direction attribute must be 0 or 1. */
static bool scan_ints(ampc_graph *g, ampc_node *n, const char *name, int32_t count, bool direction,
                      int64_t *out) {
    int32_t have;
    const int64_t *v = ampc_ir_attr_ints(g, n, name, &have);
    if (ampc_graph_status(g) != AMPC_OK) return false;
    for (int32_t i = 0; i < count; i++) out[i] = 0;
    if (!v) return true;
    if (have != count) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' has %d entries, expected %d (one per %s)",
                  name, have, count, strstr(name, "input") ? "scan input" : "scan output");
        return false;
    }
    for (int32_t i = 0; i < count; i++) {
        if (direction && v[i] != 0 && v[i] != 1) {
            AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' entry %d is %lld; directions are 0 "
                      "(forward) or 1 (reverse)", name, i, (long long)v[i]);
            return false;
        }
        out[i] = v[i];
    }
    return true;
}

ampc_status ampc_infer_scan(ampc_graph *g, ampc_node *n) {
    int32_t k = captures_of(g, n, 0);
    if (k < 0) return ampc_graph_status(g);
    const ampc_attr *ma = ampc_ir_attr_find(n, "num_scan_inputs");
    if (!ma)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'num_scan_inputs' (an int) is required");
    int64_t M = ampc_ir_attr_int(g, n, "num_scan_inputs", 0);
    if (ampc_graph_status(g) != AMPC_OK) return ampc_graph_status(g);
    if (M < 1 || M > n->n_inputs - k)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'num_scan_inputs' is %lld, but the node has "
                         "%d inputs besides its %d captures (expected 1 to %d)", (long long)M,
                         n->n_inputs - k, k, n->n_inputs - k);
    int32_t N = n->n_inputs - k - (int32_t)M, K = n->n_outputs - N;
    if (K < 0)
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "Scan has %d state variables (inputs 0 to %d) "
                         "but %d outputs; it has one output per state variable, then its scan "
                         "outputs", N, N - 1, n->n_outputs);
    for (int32_t j = 0; j < N + M; j++)
        if (!n->inputs[j])
            return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "input %d is absent; Scan's states and scan "
                             "inputs are required", j);
    enum { MAXS = 64 };
    if (M > MAXS || K > MAXS)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "Scan has %lld scan inputs and %d scan outputs; "
                         "ampc supports at most %d of each", (long long)M, K, MAXS);
    int64_t in_axes[MAXS], in_dirs[MAXS], out_axes[MAXS], out_dirs[MAXS];
    if (!scan_ints(g, n, "scan_input_axes", (int32_t)M, false, in_axes) ||
        !scan_ints(g, n, "scan_input_directions", (int32_t)M, true, in_dirs) ||
        !scan_ints(g, n, "scan_output_axes", K, false, out_axes) ||
        !scan_ints(g, n, "scan_output_directions", K, true, out_dirs))
        return ampc_graph_status(g);

    /* The sequence length: one for all scan inputs. */
    int64_t L = -1;
    int32_t first = -1;
    ampc_shape slices[MAXS];
    for (int32_t j = 0; j < M; j++) {
        const ampc_value *x = n->inputs[N + j];
        char what[48];
        snprintf(what, sizeof what, "scan_input_axes entry %d", j);
        int32_t ax;
        if (x->shape.rank < 1)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (scan input %d) is a scalar; a "
                             "scan input has a sequence axis", N + j, x->name, j);
        if (!ampc_infer_axis(g, n, in_axes[j], x->shape.rank, what, &ax)) return AMPC_E_ATTR;
        int64_t len = x->shape.dims[ax];
        if (L >= 0 && len != L)
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "scan inputs must have one sequence length: input "
                             "%d '%s' has %lld along its scan axis %d, input %d '%s' has %lld",
                             N + first, n->inputs[N + first]->name, (long long)L,
                             (int)in_axes[first], N + j, x->name, (long long)len);
        if (L < 0) L = len, first = j;
        slices[j] = (ampc_shape){.rank = x->shape.rank - 1};
        for (int32_t d = 0, e = 0; d < x->shape.rank; d++)
            if (d != ax) slices[j].dims[e++] = x->shape.dims[d];
    }

    ampc_graph *b = body_of(g, n, "body");
    if (!b) return ampc_graph_status(g);
    char in_layout[160], out_layout[160];
    snprintf(in_layout, sizeof in_layout, "%d state variable%s, %lld scan input slice%s and %d "
             "capture%s", N, N == 1 ? "" : "s", (long long)M, M == 1 ? "" : "s", k,
             k == 1 ? "" : "s");
    snprintf(out_layout, sizeof out_layout, "%d state variable%s and %d scan output%s", N,
             N == 1 ? "" : "s", K, K == 1 ? "" : "s");
    if (!body_arity(g, n, "body", b, N + (int32_t)M + k, N + K, in_layout, out_layout))
        return AMPC_E_INVALID_ARG;
    for (int32_t j = 0; j < N; j++) {
        const ampc_value *v = n->inputs[j];
        char what[160];
        snprintf(what, sizeof what, "state variable %d: input %d '%.100s'", j, j, v->name);
        if (!body_input_is(g, n, "body", b, j, v->dtype, &v->shape, what))
            return ampc_graph_status(g);
    }
    for (int32_t j = 0; j < M; j++) {
        const ampc_value *x = n->inputs[N + j];
        char what[160];
        snprintf(what, sizeof what, "one slice of scan input %d: input %d '%.100s'", j, N + j,
                 x->name);
        if (!body_input_is(g, n, "body", b, N + j, x->dtype, &slices[j], what))
            return ampc_graph_status(g);
    }
    if (!body_captures_ok(g, n, "body", b, k)) return ampc_graph_status(g);
    for (int32_t j = 0; j < N; j++) {
        char what[64];
        snprintf(what, sizeof what, "state variable %d", j);
        if (!body_keeps_type(g, n, b, j, j, what)) return ampc_graph_status(g);
        ampc_infer_set(n, j, n->inputs[j]->dtype, &n->inputs[j]->shape);
    }
    for (int32_t j = 0; j < K; j++) {
        const ampc_value *v = b->outputs[N + j];
        char what[48];
        snprintf(what, sizeof what, "scan_output_axes entry %d", j);
        int32_t ax;
        if (!ampc_infer_axis(g, n, out_axes[j], v->shape.rank + 1, what, &ax)) return AMPC_E_ATTR;
        if (!set_stacked(g, n, N + j, v->dtype, &v->shape, ax, L)) return AMPC_E_UNSUPPORTED;
    }
    return AMPC_OK;
}

/* ---- ampc.LoopBegin and ampc.LoopEnd (ir/subgraph.h) ---------------------------------------- */

ampc_status ampc_infer_loop_begin(ampc_graph *g, ampc_node *n) {
    const int32_t N = ampc_loop_carried(n);
    if (N < 0 || n->n_inputs < 2 + N || n->n_outputs != AMPC_LOOP_STATE + N)
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "a LoopBegin with %d inputs and %d outputs "
                         "and `carried` %d: expected M, cond, the N carried values and the "
                         "captures in, the iteration number, the go flag and N values out",
                         n->n_inputs, n->n_outputs, N);
    const ampc_value *m = n->inputs[0], *c = n->inputs[1];
    if ((m && (m->dtype != AMPC_DTYPE_I64 || !one_element(m))) ||
        (c && (c->dtype != AMPC_DTYPE_BOOL || !one_element(c))))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "a LoopBegin's M must be one i64 and its cond one "
                         "bool");
    const ampc_shape scalar = {0};
    ampc_infer_set(n, AMPC_LOOP_ITER, AMPC_DTYPE_I64, &scalar);
    ampc_infer_set(n, AMPC_LOOP_GO, AMPC_DTYPE_I32, &scalar);
    for (int32_t j = 0; j < N; j++) {
        const ampc_value *v = n->inputs[2 + j];
        if (!v) return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "carried value %d is absent", j);
        ampc_infer_set(n, AMPC_LOOP_STATE + j, v->dtype, &v->shape);
    }
    return AMPC_OK;
}

ampc_status ampc_infer_loop_end(ampc_graph *g, ampc_node *n) {
    const int32_t N = ampc_loop_carried(n);
    const ampc_node *b = ampc_loop_begin_of(n);
    if (N < 0 || n->n_inputs != 4 + 2 * N || n->n_outputs != N || !b ||
        ampc_loop_carried(b) != N || n->inputs[1] != b->outputs[AMPC_LOOP_GO])
        return AMPC_FAIL(g, n, AMPC_E_INVALID_ARG, "a LoopEnd takes its LoopBegin's iteration "
                         "number and go flag, M, cond, the body's N values and the LoopBegin's N "
                         "values, and gives N (`carried`)");
    const ampc_value *m = n->inputs[2], *c = n->inputs[3];
    if ((m && (m->dtype != AMPC_DTYPE_I64 || !one_element(m))) ||
        (c && (c->dtype != AMPC_DTYPE_BOOL || !one_element(c))))
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "a LoopEnd's M must be one i64 and its condition "
                         "one bool");
    for (int32_t j = 0; j < N; j++) {
        const ampc_value *o = n->inputs[4 + j], *s = n->inputs[4 + N + j];
        if (!o || !s || s != b->outputs[AMPC_LOOP_STATE + j] || o->dtype != s->dtype ||
            !ampc_shape_eq(&o->shape, &s->shape))
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "carried value %d: the body's '%s' must have "
                             "the dtype and shape of the LoopBegin's '%s'", j,
                             o ? o->name : "", s ? s->name : "");
        ampc_infer_set(n, j, s->dtype, &s->shape);
    }
    return AMPC_OK;
}
