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

/* ---- ampc.LoopBegin and ampc.LoopEnd -----------------------------------------------------------
 * A Loop whose stop depends on data, in a GPU build's graph (passes/flatten_control.c), with N
 * loop-carried values (both marks' int attribute `carried`):
 *
 *   LoopBegin(M?, cond?, v_0 .. v_N-1, captures...)           -> (iter, go, s_0 .. s_N-1)
 *   LoopEnd(iter, go, M?, cond_out?, o_0 .. o_N-1, s_0 .. s_N-1) -> (f_0 .. f_N-1)
 *
 * iter (i64, one element) is the iteration number the body reads, s_j carried value j as the body
 * reads it, go (i32, one element) whether the loop goes on; the marks' steps write all three
 * (codegen/lower_loop.c). o_j and cond_out are what the body returns, f_j the Loop's outputs.
 * M, cond and cond_out may be absent and keep their places. A LoopBegin's captures (the outer
 * values the body reads) only order it after them, so that the body follows it. */
enum { AMPC_LOOP_ITER = 0, AMPC_LOOP_GO = 1, AMPC_LOOP_STATE = 2 };

/* A mark's `carried` attribute (N), -1 when absent or not an int; the attribute for N. */
int32_t ampc_loop_carried(const ampc_node *n);
ampc_attr ampc_loop_carried_attr(int32_t n);
/* The LoopBegin a LoopEnd closes (the producer of its input 0), NULL when it is not one. */
const ampc_node *ampc_loop_begin_of(const ampc_node *end);

#endif /* AMPC_SUBGRAPH_H */
