/*
 * fuse_conv.c — convolution epilogues: a Conv followed by a residual Add and/or a ReLU becomes
 * one ampc.FusedConv, y = relu(conv(x, w) + b + z), which the GPU runs as one cuDNN call (or one
 * generated kernel) instead of a convolution and one or two elementwise passes over its output.
 *
 * Patterns, for a Conv whose output has no other use and is not a graph output:
 *   Conv -> Relu                       FusedConv(x, w, b)        activation=Relu
 *   Conv -> Add(., z)                  FusedConv(x, w, b, z)
 *   Conv -> Add(., z) -> Relu          FusedConv(x, w, b, z)     activation=Relu
 * where z has exactly the Conv output's shape and dtype (no broadcasting) and the Add's output,
 * when a Relu follows, has no other use either. The fused node takes the place (and output) of
 * the LAST node of the pattern: every input (z included, often computed after the Conv) is then
 * produced before it, so the node order stays topological. The Conv and Add are removed.
 *
 * Numerics: the fused op rounds once, where the unfused graph rounded after the convolution and
 * after the Add; the difference is within one rounding of the output type. The reference
 * evaluator implements ampc.FusedConv the same way (ir/ref/conv.c), so fused graphs are checked
 * against it like any other.
 */
#include "passes.h"
#include "ir/activation.h"

#include <stdlib.h>
#include <string.h>

/* Turns `last` into FusedConv(conv's inputs, z) with conv's attributes (+ activation), keeping
 * last's output, and removes conv (and `add` when it is not `last`). */
static ampc_status fuse(ampc_graph *g, ampc_node *conv, ampc_node *add, ampc_node *last,
                        ampc_value *z, bool relu, ampc_uses *u) {
    ampc_value *in[4] = {conv->inputs[0], conv->inputs[1], conv->n_inputs > 2 ? conv->inputs[2] : NULL, z};
    ampc_attr *attrs = malloc(((size_t)conv->n_attrs + 1) * sizeof *attrs);
    if (!attrs) return AMPC_E_OOM;
    memcpy(attrs, conv->attrs, (size_t)conv->n_attrs * sizeof *attrs);
    int32_t n_attrs = conv->n_attrs;
    if (relu) attrs[n_attrs++] = ampc_fused_act_attr(AMPC_ACT_RELU);
    int32_t n_in = z ? 4 : (in[2] ? 3 : 2);
    const char *name = conv->name;
    ampc_ir_node_remove(g, conv);
    if (add && add != last) ampc_ir_node_remove(g, add);
    ampc_status st = ampc_pass_rewrite(g, last, AMPC_OP_FUSED_CONV, name, in, n_in, attrs, n_attrs, u);
    free(attrs);
    return st;
}

/* Conv output -> Add(conv output, z): z, the Add's other input, when it qualifies. */
static ampc_value *residual_of(const ampc_node *add, const ampc_value *y) {
    if (add->op != AMPC_OP_ADD || add->n_inputs != 2) return NULL;
    ampc_value *z = add->inputs[0] == y ? add->inputs[1] : add->inputs[1] == y ? add->inputs[0] : NULL;
    if (!z || z == y || z->dtype != y->dtype || !ampc_shape_eq(&z->shape, &y->shape)) return NULL;
    return z;
}

ampc_status ampc_pass_fuse_conv(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++) {
        ampc_node *conv = g->nodes[i];
        if (conv->dead || conv->op != AMPC_OP_CONV || !ampc_dtype_is_float(conv->outputs[0]->dtype))
            continue;
        ampc_value *y = conv->outputs[0];
        ampc_node *next = ampc_pass_only_user(&uses, y);
        if (!next) continue;
        if (next->op == AMPC_OP_RELU) {
            st = fuse(g, conv, NULL, next, NULL, true, &uses);
            *changed = true;
            continue;
        }
        ampc_value *z = residual_of(next, y);
        if (!z) continue;
        ampc_node *relu = ampc_pass_only_user(&uses, next->outputs[0]);
        if (relu && relu->op != AMPC_OP_RELU) relu = NULL;
        st = fuse(g, conv, next, relu ? relu : next, z, relu != NULL, &uses);
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (*changed) ampc_ir_graph_compact(g);
    return st;
}
