/*
 * fold_scale.c — a product by a scalar constant after a matmul with constant weights moves into
 * the weights, once, at compile time:
 *
 *   (A @ B + bias) * c  =  A @ (B c) + bias c
 *
 * and so through Reshape, Flatten, Squeeze, Unsqueeze and Transpose between the two, which only
 * move elements and commute with a scalar product. torch exports scaled_dot_product_attention
 * that way: Mul(query, sqrt(scale)) after the query projection's Reshape and Transpose, and
 * Mul(key^T, sqrt(scale)) after the key's; the two scaling kernels of every attention layer go.
 *
 * The matmul is a MatMul or an ampc.FusedMatMul whose B (and bias) are constants, with no residual
 * (it is not scaled), and a ReLU only when c > 0 (relu(x) c = relu(x c) then); never a GELU. Every value from
 * the matmul to the Mul has that one use and is not a graph output. B c and bias c are new
 * constants (the old ones may have other readers), each element rounded once to its type; the
 * product was rounded twice before (after the matmul, after the Mul): within a rounding of the
 * type either way.
 */
#include "passes.h"
#include "ir/activation.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool moves_only(ampc_opcode op) {
    return op == AMPC_OP_RESHAPE || op == AMPC_OP_FLATTEN || op == AMPC_OP_SQUEEZE ||
           op == AMPC_OP_UNSQUEEZE || op == AMPC_OP_TRANSPOSE;
}

/* The value of a float scalar constant, or NAN. */
static double scalar_of(const ampc_value *v) {
    if (!v || !v->data || !ampc_dtype_is_float(v->dtype) || ampc_ir_numel(v) != 1) return NAN;
    return ampc_ref_load_f64(v->data, v->dtype, 0);
}

/* The matmul whose product reaches Mul node m only through moves, each value used once; NULL
 * when there is none or it cannot take the scale. */
static ampc_node *scaled_matmul(const ampc_graph *g, const ampc_uses *u, const ampc_node *m,
                                ampc_value *v, double c) {
    (void)g;
    for (;;) {
        if (u->count[v->id] != 1 || (v->flags & AMPC_VALUE_OUTPUT)) return NULL;
        ampc_node *p = v->producer;
        if (!p || p->dead) return NULL;
        if (moves_only(p->op)) {
            v = p->inputs[0];
            continue;
        }
        if (p->op != AMPC_OP_MATMUL && p->op != AMPC_OP_FUSED_MATMUL) return NULL;
        if (!p->inputs[1]->data || p->inputs[1]->dtype != m->outputs[0]->dtype) return NULL;
        if (p->op == AMPC_OP_FUSED_MATMUL) {
            if (p->n_inputs > 3 && p->inputs[3]) return NULL; /* the residual is not scaled */
            if (p->n_inputs > 2 && p->inputs[2] && !p->inputs[2]->data) return NULL;
            const ampc_fused_act act = ampc_fused_act_of(p);
            if (act != AMPC_ACT_NONE && (!(c > 0) || act != AMPC_ACT_RELU))
                return NULL; /* gelu(x) c is not gelu(x c) */
        }
        return p;
    }
}

/* v * c as a new constant of v's dtype. */
static ampc_value *scaled_constant(ampc_graph *g, const ampc_value *v, double c) {
    int64_t k = ampc_ir_numel(v);
    void *d = malloc((size_t)k * ampc_dtype_size(v->dtype) + 1);
    if (!d) return NULL;
    for (int64_t i = 0; i < k; i++)
        ampc_ref_store_f64(d, v->dtype, i, ampc_ref_load_f64(v->data, v->dtype, i) * c);
    char name[160];
    snprintf(name, sizeof name, "%.140s_scaled", v->name);
    ampc_value *r = ampc_ir_const_new(g, name, v->dtype, &v->shape, d);
    free(d);
    return r;
}

ampc_status ampc_pass_fold_scale(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    /* The Mul outputs to replace and their replacements; the map is made at the end, when the
     * scaled constants have their ids. */
    ampc_value **from = calloc((size_t)g->n_nodes + 1, sizeof *from);
    ampc_value **to = calloc((size_t)g->n_nodes + 1, sizeof *to);
    int32_t n_map = 0;
    ampc_status st = from && to ? AMPC_OK : AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    for (int32_t i = 0; st == AMPC_OK && i < g->n_nodes; i++) {
        ampc_node *m = g->nodes[i];
        if (m->dead || m->op != AMPC_OP_MUL || m->n_inputs != 2) continue;
        int32_t k = isnan(scalar_of(m->inputs[1])) ? 0 : 1; /* k: the scalar's operand */
        double c = scalar_of(m->inputs[k]);
        ampc_value *v = m->inputs[1 - k];
        if (isnan(c) || isinf(c) || v->data || !ampc_shape_eq(&v->shape, &m->outputs[0]->shape))
            continue;
        ampc_node *p = scaled_matmul(g, &uses, m, v, c);
        if (!p) continue;
        ampc_value *b = scaled_constant(g, p->inputs[1], c), *bias = NULL;
        bool has_bias = p->op == AMPC_OP_FUSED_MATMUL && p->n_inputs > 2 && p->inputs[2];
        if (has_bias) bias = scaled_constant(g, p->inputs[2], c);
        if (!b || (has_bias && !bias)) {
            st = AMPC_FAIL(g, m, AMPC_E_OOM, "out of host memory");
            break;
        }
        p->inputs[1] = b;
        if (has_bias) p->inputs[2] = bias;
        from[n_map] = m->outputs[0];
        to[n_map++] = v;
        ampc_ir_node_remove(g, m);
        if (ampc_pass_report(cx)) ampc_pass_report(cx)->n_folded_scales++;
        *changed = true;
    }
    ampc_value **map = st == AMPC_OK && n_map ? calloc((size_t)g->n_values + 1, sizeof *map) : NULL;
    if (n_map && st == AMPC_OK && !map) st = AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    if (map) {
        for (int32_t i = 0; i < n_map; i++) map[from[i]->id] = to[i];
        ampc_ir_graph_replace_uses(g, map);
        ampc_ir_graph_compact(g);
    }
    free(map);
    free(from);
    free(to);
    ampc_pass_uses_free(&uses);
    return st;
}
