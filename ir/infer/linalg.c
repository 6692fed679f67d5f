/*
 * linalg.c — inference for the linear algebra ops: Einsum and Det.
 *
 * Einsum's equation is parsed by ir/einsum.c, which the reference, code generation and this
 * inference use, so that they cannot disagree on what a subscript means.
 */
#include "infer.h"
#include "ir/einsum.h"

#include <string.h>

/* Einsum: the output has the labels of the output term (explicit, or implicit: "..." then the
 * labels used once, alphabetically); labels missing from it are summed over. */
ampc_status ampc_infer_einsum(ampc_graph *g, ampc_node *n) {
    char msg[160];
    if (!ampc_ir_attr_find(n, "equation"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'equation' is required");
    int32_t before = g->diag.n + g->diag.dropped;
    const char *eq = ampc_ir_attr_string(g, n, "equation", "");
    if (g->diag.n + g->diag.dropped != before) return AMPC_E_ATTR;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        if (!ampc_infer_check_dtype(g, n, i, DT_NUM)) return AMPC_E_DTYPE;
        if (i && !ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
    }
    if (n->n_inputs > AMPC_EINSUM_MAX_INPUTS)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED, "Einsum takes at most %d inputs, got %d",
                         AMPC_EINSUM_MAX_INPUTS, n->n_inputs);
    const ampc_shape *shapes[AMPC_EINSUM_MAX_INPUTS];
    for (int32_t i = 0; i < n->n_inputs; i++) shapes[i] = &n->inputs[i]->shape;
    ampc_einsum e;
    ampc_shape y;
    if (!ampc_einsum_parse(eq, n->n_inputs, &e, msg, sizeof msg))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "equation \"%s\" has %s (the node has %d inputs)", eq,
                         msg, n->n_inputs);
    if (!ampc_einsum_bind(&e, shapes, msg, sizeof msg) || !ampc_einsum_out_shape(&e, &y, msg, sizeof msg))
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "equation \"%s\" does not fit the inputs: %s", eq,
                         msg);
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &y);
    return AMPC_OK;
}

/* Det: X [..., M, M] (floats) -> [...]. */
ampc_status ampc_infer_det(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    char s[AMPC_SHAPE_STR_MAX];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    int32_t r = x->shape.rank;
    if (r < 2 || x->shape.dims[r - 1] != x->shape.dims[r - 2])
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must be [..., M, M] (square matrices), got %s", x->name,
                         ampc_shape_str(&x->shape, s, sizeof s));
    ampc_shape y = {r - 2, {0}};
    for (int32_t d = 0; d < r - 2; d++) y.dims[d] = x->shape.dims[d];
    ampc_infer_set(n, 0, x->dtype, &y);
    return AMPC_OK;
}
