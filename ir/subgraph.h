/*
 * subgraph.h — subgraphs: the bodies of the control-flow ops (If, Loop, Scan), held by a node's
 * graph attributes and owned by the graph the node belongs to. The conventions (ownership,
 * explicit captures, what the verifier and the passes assume) are written down in subgraph.c and
 * docs/ir-control-flow.md.
 */
#ifndef AMPC_SUBGRAPH_H
#define AMPC_SUBGRAPH_H

#include "ir.h"

/* The attribute that tells how many of a control-flow node's inputs are captures: the last
 * `num_captures` inputs of the node, matched one to one with the last `num_captures` inputs of
 * every body. Absent means 0. */
#define AMPC_ATTR_NUM_CAPTURES "num_captures"

/* Creates an empty graph owned by `parent` (destroyed with it), to be the value of a graph
 * attribute of one of parent's nodes. `name` is copied (NULL gives "body"); the opset is
 * parent's. Returns NULL only when host memory is exhausted (recorded on parent). */
ampc_graph *ampc_ir_subgraph_new(ampc_graph *parent, const char *name);
/* Hands `sub` (made with ampc_graph_create) over to `parent`, which destroys it from then on.
 * Adopting a graph twice, or a graph into itself, is a bug (asserted). */
void ampc_ir_subgraph_adopt(ampc_graph *parent, ampc_graph *sub);
/* Whether `sub` is among the subgraphs `g` owns. */
bool ampc_ir_subgraph_owned(const ampc_graph *g, const ampc_graph *sub);

/* Whether op runs subgraphs (If, Loop, Scan). */
bool ampc_ir_op_has_bodies(ampc_opcode op);
/* The node's capture count: its num_captures attribute, 0 when absent (or not an int: the
 * verifier and inference report that). */
int32_t ampc_ir_node_captures(const ampc_node *n);

/* A control-flow node's body by its attribute's name ("body", "then_branch", "else_branch"):
 * NULL when it has none of that name (inference reports it). */
ampc_graph *ampc_ir_node_body(const ampc_node *n, const char *name);

/* A list of Scan's ints attributes; entries past its end (all of them when it is absent) are 0. */
typedef struct ampc_scan_list {
    const int64_t *v;
    int32_t n;
} ampc_scan_list;

static inline int64_t ampc_scan_entry(ampc_scan_list l, int32_t j) {
    return j < l.n ? l.v[j] : 0;
}

/* Scan's attributes (inference has checked them). */
typedef struct ampc_scan_params {
    int32_t n_scan_inputs;                  /* num_scan_inputs */
    ampc_scan_list in_axes, out_axes;       /* scan_input_axes, scan_output_axes (negative:
                                               counted from the end) */
    ampc_scan_list in_dirs, out_dirs;       /* scan_input_directions, scan_output_directions:
                                               1 = from the end */
} ampc_scan_params;

ampc_scan_params ampc_scan_params_of(const ampc_node *n);

/* The verifier's part for node n of g: every graph attribute is owned by g (and is not g), and a
 * control-flow node's captures and body interfaces line up (counts, and a capture's dtype and
 * shape equal to the body input it enters as). Each violation is an AMPC_E_VERIFY diagnostic
 * against n; returns how many were recorded. Bodies themselves are verified by the caller. */
int ampc_ir_subgraph_verify_node(ampc_graph *g, const ampc_node *n);

/* False when a body of n (at any depth) holds a node that must never be constant-folded
 * (T_NOFOLD: random ops, Loop), so that folding n would fold that node too. */
bool ampc_ir_node_bodies_foldable(const ampc_node *n);

#endif /* AMPC_SUBGRAPH_H */
