/*
 * verify.c — the IR verifier: checks every structural invariant of a graph and reports each
 * violation as an AMPC_E_VERIFY diagnostic naming the node or value. The pipeline runs it between
 * passes (always in tests), so a pass that breaks the graph is caught at the pass that did it.
 *
 * Invariants, in the order they are checked:
 *   1. values: the slot holds a value whose id is its index, with a name that the name map sends
 *      back to it (so names are unique), not poisoned, a valid dtype, rank 0..AMPC_MAX_RANK, dims
 *      >= 0 and a size that fits 64 bits; a producer, when set, is a live node of this graph that
 *      lists the value among its outputs; input/output flags match the graph's lists.
 *   2. graph inputs: values of this graph, listed once, produced by no node.
 *   3. nodes, in order: id equals position, a valid op and a name, arity within the op table's
 *      bounds, required inputs present; every input a value of this graph defined before use
 *      (a graph input, a constant with data, or an output of an earlier node); every output a
 *      value of this graph whose producer is this node and no other; attributes well formed
 *      (names, list arrays, tensor data, subgraphs valid recursively); subgraphs owned by this
 *      graph, and a control-flow node's captures matching its bodies' inputs (subgraph.c).
 *   4. graph outputs: values of this graph that are defined.
 * It runs in O(nodes + values + edges) and never modifies the graph (only its diagnostics).
 */
#include "ir.h"
#include "subgraph.h"

#include <stdlib.h>
#include <string.h>

#define VFAIL(g, n, ...) (errors++, AMPC_FAIL((g), (n), AMPC_E_VERIFY, __VA_ARGS__))

static bool is_member(const ampc_graph *g, const ampc_value *v) {
    return v && v->id >= 0 && v->id < g->n_values && g->values[v->id] == v;
}

static bool node_member(const ampc_graph *g, const ampc_node *n) {
    return n && n->id >= 0 && n->id < g->n_nodes && g->nodes[n->id] == n;
}

static bool lists_output(const ampc_node *n, const ampc_value *v) {
    for (int32_t i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] == v) return true;
    return false;
}

/* Checks one value in isolation (invariant 1); returns the number of errors. */
static int check_value(ampc_graph *g, int32_t i, const bool *listed_in, const bool *listed_out) {
    int errors = 0;
    const ampc_value *v = g->values[i];
    if (!v) return VFAIL(g, NULL, "value slot %d is NULL", i), errors;
    if (!v->name) return VFAIL(g, NULL, "value %d has no name", i), errors;
    if (v->id != i)
        VFAIL(g, NULL, "value '%s' has id %d but sits at index %d of the value list", v->name,
              v->id, i);
    const ampc_value *m = ampc_strmap_get(&g->names, v->name);
    if (!m)
        VFAIL(g, NULL, "value %d '%s' is missing from the name map", i, v->name);
    else if (m != v && is_member(g, m))
        VFAIL(g, NULL, "value %d '%s': value %d has the same name (names must be unique)", i,
              v->name, m->id);
    else if (m != v)
        VFAIL(g, NULL, "value %d '%s': the name map sends its name to a value outside the graph", i,
              v->name);
    if (v->flags & AMPC_VALUE_POISON)
        return VFAIL(g, NULL, "value %d '%s' is poisoned (its construction failed)", i, v->name),
               errors;
    if (v->dtype <= AMPC_DTYPE_UNDEFINED || v->dtype >= AMPC_DTYPE_COUNT)
        VFAIL(g, NULL, "value %d '%s' has no valid dtype (%d)", i, v->name, (int)v->dtype);
    if (v->shape.rank < 0 || v->shape.rank > AMPC_MAX_RANK) {
        VFAIL(g, NULL, "value %d '%s' has rank %d (ampc supports 0 to %d)", i, v->name,
              v->shape.rank, AMPC_MAX_RANK);
    } else {
        int64_t numel = 1, bytes;
        bool neg = false, overflow = false;
        for (int32_t d = 0; d < v->shape.rank; d++) {
            if (v->shape.dims[d] < 0) {
                VFAIL(g, NULL, "value %d '%s' has a negative dimension %d (%lld)", i, v->name, d,
                      (long long)v->shape.dims[d]);
                neg = true;
                break;
            }
            overflow |= !ampc_mul_ok(numel, v->shape.dims[d], &numel);
        }
        overflow |= !ampc_mul_ok(numel, (int64_t)AMPC_MAX(ampc_dtype_size(v->dtype), 1), &bytes);
        if (!neg && overflow)
            VFAIL(g, NULL, "value %d '%s' has more elements than a 64-bit size can count", i,
                  v->name);
    }
    const ampc_node *p = v->producer;
    if (p && !node_member(g, p))
        VFAIL(g, NULL, "value %d '%s' names a producer node that is not in the graph", i, v->name);
    else if (p && p->dead)
        VFAIL(g, NULL, "value %d '%s' names removed node %d as its producer", i, v->name, p->id);
    else if (p && !lists_output(p, v))
        VFAIL(g, NULL,
              "value %d '%s' names node %d as its producer, but that node does not list it as an "
              "output",
              i, v->name, p->id);
    if ((v->flags & AMPC_VALUE_INPUT) && !listed_in[i])
        VFAIL(g, NULL, "value %d '%s' is flagged as a graph input but is not in the input list", i,
              v->name);
    if ((v->flags & AMPC_VALUE_OUTPUT) && !listed_out[i])
        VFAIL(g, NULL, "value %d '%s' is flagged as a graph output but is not in the output list",
              i, v->name);
    return errors;
}

static const char *const kind_names[] = {"undefined", "int",     "float",  "string", "ints",
                                         "floats",    "strings", "tensor", "graph"};

/* Checks a node's attributes; returns the number of errors. */
static int check_attrs(ampc_graph *g, const ampc_node *n) {
    int errors = 0;
    for (int32_t k = 0; k < n->n_attrs; k++) {
        const ampc_attr *a = &n->attrs[k];
        if (!a->name) {
            VFAIL(g, n, "attribute %d has no name", k);
            continue;
        }
        switch (a->kind) {
        case AMPC_ATTR_INT:
        case AMPC_ATTR_FLOAT: break;
        case AMPC_ATTR_STRING:
            if (!a->s) VFAIL(g, n, "attribute '%s' is a string without text (NULL)", a->name);
            break;
        case AMPC_ATTR_INTS:
        case AMPC_ATTR_FLOATS:
        case AMPC_ATTR_STRINGS: {
            const void *arr = a->kind == AMPC_ATTR_INTS     ? (const void *)a->ints
                              : a->kind == AMPC_ATTR_FLOATS ? (const void *)a->floats
                                                            : (const void *)a->strings;
            if (a->n < 0)
                VFAIL(g, n, "attribute '%s' has a negative count (%d)", a->name, a->n);
            else if (a->n && !arr)
                VFAIL(g, n, "attribute '%s' (%s) has %d entries but no array", a->name,
                      kind_names[a->kind], a->n);
            for (int32_t j = 0; a->kind == AMPC_ATTR_STRINGS && arr && j < a->n; j++)
                if (!a->strings[j]) VFAIL(g, n, "attribute '%s': string %d is NULL", a->name, j);
            break;
        }
        case AMPC_ATTR_TENSOR:
            if (!a->tensor || !a->tensor->data)
                VFAIL(g, n, "attribute '%s' is a tensor without data", a->name);
            break;
        case AMPC_ATTR_GRAPH: {
            if (!a->graph) {
                VFAIL(g, n, "attribute '%s' is a graph attribute without a graph", a->name);
                break;
            }
            ampc_graph *sub = a->graph;
            int32_t before = sub->diag.n;
            if (ampc_ir_verify(sub) != AMPC_OK) {
                VFAIL(g, n, "attribute '%s': subgraph '%s' is invalid: %s", a->name, sub->name,
                      before < sub->diag.n ? sub->diag.entries[before].msg : "(no message)");
                for (int32_t j = before; j < sub->diag.n; j++) free(sub->diag.entries[j].msg);
                sub->diag.n = before; /* the parent now carries the report */
            }
            break;
        }
        default: VFAIL(g, n, "attribute '%s' has an invalid kind %d", a->name, (int)a->kind);
        }
    }
    return errors;
}

/* Checks node n at position i (invariant 3); marks its outputs defined. */
static int check_node(ampc_graph *g, int32_t i, bool *defined, int32_t *producer_of) {
    int errors = 0;
    ampc_node *n = g->nodes[i];
    if (!n) return VFAIL(g, NULL, "node slot %d is NULL", i), errors;
    if ((unsigned)n->op >= AMPC_OP_COUNT)
        return VFAIL(g, NULL, "node %d has an invalid op code %d", i, (int)n->op), errors;
    if (!n->name)
        return VFAIL(g, NULL, "node %d (%s) has no name", i, ampc_op_get(n->op)->onnx), errors;
    if (n->id != i) VFAIL(g, n, "has id %d but sits at index %d of the node list", n->id, i);
    if (n->dead) return errors;
    const ampc_op_info *info = ampc_op_get(n->op);
    if (n->n_inputs < info->min_in || (info->max_in >= 0 && n->n_inputs > info->max_in)) {
        if (info->max_in < 0)
            VFAIL(g, n, "%s takes at least %d inputs, got %d", info->onnx, info->min_in,
                  n->n_inputs);
        else
            VFAIL(g, n, "%s takes %d to %d inputs, got %d", info->onnx, info->min_in, info->max_in,
                  n->n_inputs);
    }
    if (n->n_outputs < info->min_out || (info->max_out >= 0 && n->n_outputs > info->max_out)) {
        if (info->max_out < 0)
            VFAIL(g, n, "%s has at least %d outputs, got %d", info->onnx, info->min_out,
                  n->n_outputs);
        else
            VFAIL(g, n, "%s has %d to %d outputs, got %d", info->onnx, info->min_out, info->max_out,
                  n->n_outputs);
    }
    for (int32_t j = 0; j < n->n_inputs; j++) {
        const ampc_value *v = n->inputs[j];
        if (!v) {
            if (ampc_op_input_required(n->op, j)) VFAIL(g, n, "input %d is required but absent", j);
            continue;
        }
        if (!is_member(g, v)) {
            VFAIL(g, n, "input %d '%s' is not a value of this graph", j, v->name ? v->name : "?");
            continue;
        }
        if (defined[v->id]) continue;
        const ampc_node *p = v->producer;
        if (p && node_member(g, p) && !p->dead && p->id > i)
            VFAIL(g, n,
                  "input %d '%s' is used before it is defined (its producer is node %d, "
                  "later in the order)",
                  j, v->name, p->id);
        else
            VFAIL(g, n,
                  "input %d '%s' is not defined: it is not a graph input, a constant with "
                  "data or the output of an earlier node",
                  j, v->name);
    }
    for (int32_t j = 0; j < n->n_outputs; j++) {
        ampc_value *v = n->outputs[j];
        if (!v) {
            VFAIL(g, n, "output %d is NULL", j);
            continue;
        }
        if (!is_member(g, v)) {
            VFAIL(g, n, "output %d '%s' is not a value of this graph", j, v->name ? v->name : "?");
            continue;
        }
        if (producer_of[v->id] >= 0) {
            VFAIL(g, n, "output %d '%s' is also produced by node %d (a value has one producer)", j,
                  v->name, producer_of[v->id]);
            continue;
        }
        producer_of[v->id] = i;
        if (v->flags & AMPC_VALUE_INPUT) VFAIL(g, n, "output %d '%s' is a graph input", j, v->name);
        if (v->producer != n) {
            if (v->producer)
                VFAIL(g, n, "output %d '%s' names node %d as its producer", j, v->name,
                      v->producer->id);
            else
                VFAIL(g, n, "output %d '%s' has no producer set", j, v->name);
        }
        defined[v->id] = true;
    }
    return errors + check_attrs(g, n) + ampc_ir_subgraph_verify_node(g, n); /* subgraph.c */
}

ampc_status ampc_ir_verify(ampc_graph *g) {
    int errors = 0;
    int32_t nv = g->n_values;
    bool *listed_in = ampc_xcalloc((size_t)nv + 1, 1),
         *listed_out = ampc_xcalloc((size_t)nv + 1, 1);
    bool *defined = ampc_xcalloc((size_t)nv + 1, 1);
    int32_t *producer_of = ampc_xmalloc(((size_t)nv + 1) * sizeof *producer_of);
    for (int32_t i = 0; i < nv; i++) producer_of[i] = -1;

    /* 2. graph inputs (first, so the flag checks of 1 know the lists) */
    for (int32_t i = 0; i < g->n_inputs; i++) {
        const ampc_value *v = g->inputs[i];
        if (!is_member(g, v)) {
            VFAIL(g, NULL, "graph input %d '%s' is not a value of this graph", i,
                  v && v->name ? v->name : "?");
            continue;
        }
        if (listed_in[v->id]) VFAIL(g, NULL, "graph input %d '%s' is listed twice", i, v->name);
        listed_in[v->id] = defined[v->id] = true;
        if (!(v->flags & AMPC_VALUE_INPUT))
            VFAIL(g, NULL, "graph input %d '%s' is not flagged as an input", i, v->name);
        if (v->producer)
            VFAIL(g, NULL, "graph input %d '%s' is produced by node %d", i, v->name,
                  v->producer->id);
    }
    for (int32_t i = 0; i < g->n_outputs; i++)
        if (is_member(g, g->outputs[i])) listed_out[g->outputs[i]->id] = true;

    /* 1. values */
    int name_errors = 0;
    for (int32_t i = 0; i < nv; i++) {
        int e = check_value(g, i, listed_in, listed_out);
        errors += e;
        name_errors += e;
        const ampc_value *v = g->values[i];
        if (v && !v->producer && v->data) defined[i] = true; /* a constant */
    }
    if (!name_errors && g->names.len != (size_t)nv)
        VFAIL(g, NULL, "the name map holds %zu names for %d values", g->names.len, nv);

    /* 3. nodes */
    for (int32_t i = 0; i < g->n_nodes; i++) errors += check_node(g, i, defined, producer_of);

    /* 4. graph outputs */
    for (int32_t i = 0; i < g->n_outputs; i++) {
        const ampc_value *v = g->outputs[i];
        if (!is_member(g, v)) {
            VFAIL(g, NULL, "graph output %d '%s' is not a value of this graph", i,
                  v && v->name ? v->name : "?");
            continue;
        }
        if (!(v->flags & AMPC_VALUE_OUTPUT))
            VFAIL(g, NULL, "graph output %d '%s' is not flagged as an output", i, v->name);
        if (!defined[v->id])
            VFAIL(g, NULL,
                  "graph output %d '%s' is not defined: it is not a graph input, a "
                  "constant with data or the output of a node",
                  i, v->name);
    }
    free(listed_in);
    free(listed_out);
    free(defined);
    free(producer_of);
    return errors ? AMPC_E_VERIFY : AMPC_OK;
}

ampc_status ampc_graph_verify(ampc_graph *g) {
    if (!g) return AMPC_E_INVALID_ARG;
    return ampc_ir_verify(g);
}
