/*
 * fuse_gelu.c — GELU written out as elementwise ops becomes one Gelu node (ONNX Gelu-20, erf
 * form): exporters (torch.onnx for nn.GELU and transformers' activations before opset 20) write
 *
 *   x * 0.5 * (1 + erf(x / sqrt(2)))
 *
 * as Div(x, 1.4142...) or Mul(x, 0.7071...) -> Erf -> Add(., 1) -> then Mul by x and by 0.5 in
 * either order: (x * A) * 0.5 or (x * 0.5) * A. Five kernels, each a pass over the tensor, become
 * one. The scalars must be what the formula says (sqrt(2) or its inverse within the precision of
 * the tensor's type; 1 and 0.5 exactly); every intermediate value must have this one use and not
 * be a graph output. The Gelu takes the place and output of the last Mul, after everything it
 * reads. It rounds once where the chain rounded five times: within a few roundings of the type.
 */
#include "passes.h"
#include "ir/activation.h"

#include <math.h>
#include <string.h>

/* The value of a scalar float constant (numel 1), or NAN. */
static double scalar(const ampc_value *v) {
    if (!v || !v->data || !ampc_dtype_is_float(v->dtype) || ampc_shape_numel(&v->shape) != 1)
        return NAN;
    double x;
    switch (v->dtype) {
    case AMPC_DTYPE_F32: x = *(const float *)v->data; break;
    case AMPC_DTYPE_F64: x = *(const double *)v->data; break;
    case AMPC_DTYPE_F16: x = ampc_f16_to_f32(*(const uint16_t *)v->data); break;
    case AMPC_DTYPE_BF16: x = ampc_bf16_to_f32(*(const uint16_t *)v->data); break;
    default: return NAN;
    }
    return x;
}

/* The operand of binary node n other than v (NULL when v is not an operand). */
static ampc_value *other(const ampc_node *n, const ampc_value *v) {
    if (n->n_inputs != 2) return NULL;
    return n->inputs[0] == v ? n->inputs[1] : n->inputs[1] == v ? n->inputs[0] : NULL;
}

static bool near(double x, double want, double rel) { return fabs(x - want) <= rel * fabs(want); }

/* The Gelu chain around Erf node e, or false. *last receives the final Mul, *x the input. */
static bool match(const ampc_node *e, const ampc_uses *u, ampc_node **last, ampc_value **x,
                  ampc_node *chain[4]) {
    ampc_node *scale = e->inputs[0]->producer;
    if (!scale || !ampc_pass_only_user(u, e->inputs[0])) return false;
    if (scale->n_inputs != 2) return false;
    bool swapped = scale->op == AMPC_OP_MUL && !isnan(scalar(scale->inputs[0]));
    ampc_value *in = scale->inputs[swapped ? 1 : 0];
    double c = scalar(scale->inputs[swapped ? 0 : 1]);
    double rel = in && in->dtype == AMPC_DTYPE_F32 ? 1e-6 : 1e-2; /* f16/bf16 constants round */
    if (!((scale->op == AMPC_OP_DIV && near(c, sqrt(2.0), rel)) ||
          (scale->op == AMPC_OP_MUL && near(c, sqrt(0.5), rel))))
        return false;
    ampc_node *add = ampc_pass_only_user(u, e->outputs[0]);
    if (!add || add->op != AMPC_OP_ADD || scalar(other(add, e->outputs[0])) != 1.0) return false;
    ampc_node *m1 = ampc_pass_only_user(u, add->outputs[0]);
    if (!m1 || m1->op != AMPC_OP_MUL) return false;
    ampc_value *o1 = other(m1, add->outputs[0]);
    if (!o1) return false;
    ampc_node *fourth, *end;
    if (o1 == in) { /* (x * A) * 0.5: the chain ends at the Mul by 0.5 */
        end = ampc_pass_only_user(u, m1->outputs[0]);
        if (!end || end->op != AMPC_OP_MUL || scalar(other(end, m1->outputs[0])) != 0.5) return false;
        fourth = m1;
    } else { /* (x * 0.5) * A: o1 is x * 0.5, the chain ends at m1 */
        ampc_node *half = o1->producer;
        if (!half || half->op != AMPC_OP_MUL || !ampc_pass_only_user(u, o1) ||
            other(half, in) == NULL || scalar(other(half, in)) != 0.5)
            return false;
        end = m1;
        fourth = half;
    }
    if (!ampc_shape_eq(&end->outputs[0]->shape, &in->shape) || end->outputs[0]->dtype != in->dtype)
        return false;
    chain[0] = scale, chain[1] = (ampc_node *)e, chain[2] = add, chain[3] = fourth;
    *last = end;
    *x = in;
    return true;
}

ampc_status ampc_pass_fuse_gelu(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    (void)cx;
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    for (int32_t i = 0; i < g->n_nodes && st == AMPC_OK; i++) {
        ampc_node *e = g->nodes[i], *last, *chain[4];
        ampc_value *x;
        if (e->dead || e->op != AMPC_OP_ERF || !match(e, &uses, &last, &x, chain)) continue;
        ampc_attr exact = ampc_gelu_form_attr(AMPC_GELU_ERF);
        for (int k = 0; k < 4; k++) ampc_ir_node_remove(g, chain[k]);
        st = ampc_pass_rewrite(g, last, AMPC_OP_GELU, last->name, &x, 1, &exact, 1, &uses);
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (*changed) ampc_ir_graph_compact(g);
    return st;
}
