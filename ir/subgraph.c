/*
 * subgraph.c — subgraphs in the IR: ownership, the capture convention, and the checks the
 * verifier runs on the nodes that hold them. The design (docs/ir-control-flow.md says it at
 * length, with examples):
 *
 *   1. A subgraph is an ordinary ampc_graph held by a graph attribute (ampc_attr.graph) of a
 *      node: then_branch / else_branch of If, body of Loop and Scan. It is OWNED by the graph
 *      the node belongs to (graph->subgraphs), which destroys it; it lives in its own arena with
 *      its own name space, so names inside may repeat (shadow) names outside. Several nodes of
 *      one graph may hold the same subgraph (the ONNX importer's Scan-8 rewrite does); a pass
 *      that rewrites a body in place must first make sure no other node holds it.
 *   2. A body is SELF-CONTAINED: its nodes use only its own values. ONNX lets a body name any
 *      value of an enclosing scope; ampc makes each such use an explicit CAPTURE instead. The
 *      k captured outer values are appended to the node's inputs (after the ONNX inputs), and
 *      every body of the node gets k matching graph inputs appended after its ONNX inputs, in
 *      the same order: node input (n_inputs - k + i) enters every body as its input
 *      (body n_inputs - k + i), with the same dtype and shape. The node says k in its int
 *      attribute num_captures (absent: 0). With two bodies (If) both take all k captures, each
 *      ignoring the ones it does not use. So dependencies are plain edges: passes (dce, cse,
 *      use replacement), the verifier and the memory planner see what a body reads without
 *      looking inside it, and a body can be evaluated, verified or printed on its own.
 *   3. Values known at compile time are not captured but copied: the importer copies an outer
 *      constant (data, not a graph input) of at most 64K elements into the body as a constant
 *      of its own, so positions that must be known at compile time (Reshape's shape, Slice's
 *      starts) stay known inside bodies; larger constants (weights) are captured, not copied.
 *   4. Nested bodies capture through every level: a value two levels up becomes a capture of
 *      the outer body's node and again of the inner body's node.
 *   5. Shapes are static inside bodies as everywhere: each body input has the dtype and shape
 *      the node feeds it (the importer fills missing or symbolic ONNX body input shapes from the
 *      node's inputs), so the body's own nodes were inferred once, when it was built, and the
 *      node's inference checks the body interface against its inputs (infer/control.c).
 *
 * The verifier (verify.c) checks bodies recursively and calls ampc_ir_subgraph_verify_node for
 * the rest: ownership, and that captures and body interfaces line up. Constant folding skips
 * nodes whose bodies hold a node that must not fold (ampc_ir_node_bodies_foldable); cse merges
 * nodes with graph attributes only when they hold the very same subgraph.
 */
#include "subgraph.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_BODY_DEPTH = 64 }; /* nesting the fold check follows (deeper: treated as not foldable) */

ampc_graph *ampc_ir_subgraph_new(ampc_graph *parent, const char *name) {
    ampc_graph *sub = ampc_graph_create(name ? name : "body");
    if (!sub) {
        AMPC_FAIL(parent, NULL, AMPC_E_OOM, "out of host memory creating subgraph '%s'",
                  name ? name : "body");
        return NULL;
    }
    sub->opset = parent->opset;
    sub->max_loop_iterations = parent->max_loop_iterations;
    ampc_ir_subgraph_adopt(parent, sub);
    return sub;
}

void ampc_ir_subgraph_adopt(ampc_graph *parent, ampc_graph *sub) {
    AMPC_ASSERT(sub && sub != parent && !ampc_ir_subgraph_owned(parent, sub));
    size_t n = (size_t)parent->n_subgraphs + 1;
    parent->subgraphs = ampc_xrealloc(parent->subgraphs, n * sizeof *parent->subgraphs);
    parent->subgraphs[parent->n_subgraphs++] = sub;
}

bool ampc_ir_subgraph_owned(const ampc_graph *g, const ampc_graph *sub) {
    for (int32_t i = 0; i < g->n_subgraphs; i++)
        if (g->subgraphs[i] == sub) return true;
    return false;
}

bool ampc_ir_op_has_bodies(ampc_opcode op) {
    return op == AMPC_OP_IF || op == AMPC_OP_LOOP || op == AMPC_OP_SCAN;
}

int32_t ampc_ir_node_captures(const ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, AMPC_ATTR_NUM_CAPTURES);
    if (!a || a->kind != AMPC_ATTR_INT || a->i < 0 || a->i > n->n_inputs) return 0;
    return (int32_t)a->i;
}

int32_t ampc_loop_carried(const ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, "carried");
    if (!a || a->kind != AMPC_ATTR_INT || a->i < 0 || a->i > n->n_inputs) return -1;
    return (int32_t)a->i;
}

ampc_attr ampc_loop_carried_attr(int32_t n) {
    return (ampc_attr){.name = "carried", .kind = AMPC_ATTR_INT, .i = n};
}

const ampc_node *ampc_loop_begin_of(const ampc_node *end) {
    const ampc_value *it = end->n_inputs > 0 ? end->inputs[0] : NULL;
    const ampc_node *b = it ? it->producer : NULL;
    return b && b->op == AMPC_OP_LOOP_BEGIN ? b : NULL;
}

ampc_graph *ampc_ir_node_body(const ampc_node *n, const char *name) {
    const ampc_attr *a = ampc_ir_attr_find(n, name);
    return a && a->kind == AMPC_ATTR_GRAPH ? a->graph : NULL;
}

static ampc_scan_list scan_list(const ampc_node *n, const char *name) {
    const ampc_attr *a = ampc_attr_ints_of(n, name);
    return a ? (ampc_scan_list){a->ints, a->n} : (ampc_scan_list){NULL, 0};
}

ampc_scan_params ampc_scan_params_of(const ampc_node *n) {
    return (ampc_scan_params){.n_scan_inputs = (int32_t)ampc_attr_int_or(n, "num_scan_inputs", 0),
                              .in_axes = scan_list(n, "scan_input_axes"),
                              .out_axes = scan_list(n, "scan_output_axes"),
                              .in_dirs = scan_list(n, "scan_input_directions"),
                              .out_dirs = scan_list(n, "scan_output_directions")};
}

/* ---- the verifier's part -------------------------------------------------------------------- */

#define VFAIL(g, n, ...) (errors++, AMPC_FAIL((g), (n), AMPC_E_VERIFY, __VA_ARGS__))

/* Inputs of the node that are not captures and are always there: If's cond; Loop's M and cond
 * (which may be absent, but hold their places). */
static int32_t fixed_inputs(ampc_opcode op) {
    return op == AMPC_OP_SCAN ? 0 : op == AMPC_OP_IF ? 1 : 2;
}

/* How many inputs and outputs body `b` of node n must have, given k captures. */
static void body_arity(const ampc_node *n, int32_t k, int32_t *want_in, int32_t *want_out) {
    switch (n->op) {
    case AMPC_OP_IF: *want_in = k, *want_out = n->n_outputs; break;
    /* Loop body: (iteration, cond, N carried, captures) -> (cond, N carried, K scan outputs);
     * the node: (M, cond, N carried, captures) -> (N carried, K scan outputs). */
    case AMPC_OP_LOOP: *want_in = n->n_inputs, *want_out = n->n_outputs + 1; break;
    /* Scan body: (N states, M slices, captures) -> (N states, K scan outputs). */
    default: *want_in = n->n_inputs, *want_out = n->n_outputs; break;
    }
}

/* Checks one body of a control-flow node against its k captures. */
static int check_body(ampc_graph *g, const ampc_node *n, const ampc_attr *a, int32_t k) {
    int errors = 0;
    const ampc_graph *b = a->graph;
    int32_t want_in, want_out;
    body_arity(n, k, &want_in, &want_out);
    if (b->n_inputs != want_in)
        VFAIL(g, n, "attribute '%s': subgraph '%s' has %d inputs, expected %d for this %s node "
              "(%d of them captures)", a->name, b->name, b->n_inputs, want_in,
              ampc_op_get(n->op)->onnx, k);
    if (b->n_outputs != want_out)
        VFAIL(g, n, "attribute '%s': subgraph '%s' has %d outputs, expected %d for this %s node",
              a->name, b->name, b->n_outputs, want_out, ampc_op_get(n->op)->onnx);
    if (b->n_inputs < k) return errors;
    for (int32_t i = 0; i < k; i++) {
        const ampc_value *outer = n->inputs[n->n_inputs - k + i];
        const ampc_value *inner = b->inputs[b->n_inputs - k + i];
        if (!outer || !inner) continue; /* reported by the caller / the body's own check */
        if (outer->dtype == inner->dtype && ampc_shape_eq(&outer->shape, &inner->shape)) continue;
        char x[AMPC_TYPE_STR_MAX], y[AMPC_TYPE_STR_MAX];
        VFAIL(g, n, "capture %d: input %d '%s' is %s but enters subgraph '%s' (attribute '%s') as "
              "input %d '%s' of type %s; a capture keeps its dtype and shape", i,
              n->n_inputs - k + i, outer->name, ampc_value_type_str(outer, x, sizeof x), b->name,
              a->name, b->n_inputs - k + i, inner->name, ampc_value_type_str(inner, y, sizeof y));
    }
    return errors;
}

int ampc_ir_subgraph_verify_node(ampc_graph *g, const ampc_node *n) {
    int errors = 0;
    for (int32_t i = 0; i < n->n_attrs; i++) {
        const ampc_attr *a = &n->attrs[i];
        if (a->kind != AMPC_ATTR_GRAPH || !a->graph || !a->name) continue;
        if (a->graph == g)
            VFAIL(g, n, "attribute '%s': the graph is its own subgraph", a->name);
        else if (!ampc_ir_subgraph_owned(g, a->graph))
            VFAIL(g, n, "attribute '%s': subgraph '%s' is not owned by graph '%s' (create it with "
                  "ampc_ir_subgraph_new or hand it over with ampc_ir_subgraph_adopt)", a->name,
                  a->graph->name, g->name);
    }
    if (!ampc_ir_op_has_bodies(n->op)) return errors;
    if (n->op == AMPC_OP_LOOP && n->n_inputs < 2)
        return VFAIL(g, n, "Loop has %d inputs; M and cond keep their places (0 and 1) even when "
                     "absent", n->n_inputs), errors;

    const ampc_attr *ka = ampc_ir_attr_find(n, AMPC_ATTR_NUM_CAPTURES);
    int32_t fixed = fixed_inputs(n->op), k = 0;
    if (ka && ka->kind != AMPC_ATTR_INT) {
        return VFAIL(g, n, "attribute '%s' must be an int", AMPC_ATTR_NUM_CAPTURES), errors;
    } else if (ka && (ka->i < 0 || ka->i > n->n_inputs - fixed)) {
        return VFAIL(g, n, "attribute '%s' is %lld, but the node has %d inputs of which at most %d "
                     "can be captures", AMPC_ATTR_NUM_CAPTURES, (long long)ka->i, n->n_inputs,
                     AMPC_MAX(n->n_inputs - fixed, 0)),
               errors;
    } else if (ka) {
        k = (int32_t)ka->i;
    }
    for (int32_t i = n->n_inputs - k; i < n->n_inputs; i++)
        if (!n->inputs[i])
            VFAIL(g, n, "input %d is absent, but it is capture %d (captures are always present)",
                  i, i - (n->n_inputs - k));
    for (int32_t i = 0; i < n->n_attrs; i++) {
        const ampc_attr *a = &n->attrs[i];
        if (a->kind == AMPC_ATTR_GRAPH && a->graph && a->name) errors += check_body(g, n, a, k);
    }
    return errors;
}

/* ---- folding -------------------------------------------------------------------------------- */

static bool graph_foldable(const ampc_graph *b, int depth) {
    if (depth > MAX_BODY_DEPTH) return false;
    for (int32_t i = 0; i < b->n_nodes; i++) {
        const ampc_node *m = b->nodes[i];
        if (m->dead) continue;
        if (ampc_op_has(m->op, T_NOFOLD)) return false;
        for (int32_t j = 0; j < m->n_attrs; j++)
            if (m->attrs[j].kind == AMPC_ATTR_GRAPH && m->attrs[j].graph &&
                !graph_foldable(m->attrs[j].graph, depth + 1))
                return false;
    }
    return true;
}

bool ampc_ir_node_bodies_foldable(const ampc_node *n) {
    for (int32_t j = 0; j < n->n_attrs; j++)
        if (n->attrs[j].kind == AMPC_ATTR_GRAPH && n->attrs[j].graph &&
            !graph_foldable(n->attrs[j].graph, 1))
            return false;
    return true;
}
