/*
 * fuse_matmul.c — matmul epilogues: a MatMul by a matrix followed by a bias Add, a residual Add
 * and/or a ReLU becomes one ampc.FusedMatMul, y = relu(A @ B + bias + z), which the GPU runs as a
 * single cuBLASLt call (the bias and ReLU in its epilogue, the residual as its C operand with
 * beta = 1) instead of a GEMM and up to three elementwise passes over its output. Transformer
 * layers export exactly this: MatMul -> Add(bias) [-> Add(residual)] for every projection.
 *
 * A GELU ends a chain too; torch.onnx writes every BERT FFN as MatMul -> Add(bias) -> GELU, and
 * the GELU's pass over the [tokens, 4 hidden] activation goes:
 *   - approximate = "tanh": activation "GeluTanh", cuBLASLt's GELU epilogue, which is that form;
 *   - the erf form (as fuse-gelu writes it), with ampc's own GEMM kernel asked for
 *     (--gemm-kernel, gemm_kernel) and an f16/bf16 product with K and N multiples of 8:
 *     activation "Gelu", which that kernel runs exactly (codegen/dense_gemm.c);
 *   - the erf form after any other f16/bf16 product: "GeluTanh" only when the user asked for
 *     it (--fast-gelu, fast_gelu), since it changes the model's numbers; otherwise the GELU
 *     stays exact, a kernel of its own. The tanh form is within 4.73e-4 of the erf form for
 *     every input (at most 0.3 of f16's own rounding error for x >= 0; largest, relative to the
 *     tiny result, for x in [-5, -2]; cuBLASLt's epilogue measured within 5e-4 on the H200;
 *     docs/precision.md). On the H200 --fast-gelu took BERT-base's steps' graph from 0.396 to
 *     0.376 ms at one sequence and from 1.726 to 1.604 ms at 32 (docs/benchmarks.md).
 *
 * The chain starts at a MatMul whose B is a matrix ([K, N]) and whose A has rank >= 2 (so the
 * product is one GEMM of all of A's rows), nothing empty, with a float type other than f64 (cuBLASLt's
 * epilogues are not relied on for f64). It then takes, while the current value has exactly one
 * use and is not a graph output:
 *   Add(., c)   c of the same dtype holding N elements along its last dim: the bias (once)
 *   Add(., z)   z of exactly the current shape and dtype: the residual (once)
 *   Relu        ends the chain
 *   Reshape     keeping the last dim (the rows regrouped, each as it was), once: the fused node
 *               takes A reshaped the same way ([rows..., K]), so the bias, residual and
 *               activation after it fold in too (nn.Linear on flattened rows, reshaped back
 *               before the residual Add: GPT-2's projections, an MHA's output projection)
 * A Gemm starts a chain too when it is a plain product plus bias, as nn.Linear exports it:
 * transA = 0, alpha = 1, a constant B (transposed here when transB = 1, a copy of the weights
 * in [K, N] order), and C absent or a bias of N elements with beta = 1; a Gemm with nothing to
 * fold after it stays a Gemm (its own lowering already puts the bias in the epilogue).
 * The sparsity pass's mark (sparse24) goes with the MatMul or Gemm into the fused node; the
 * transposed copy of a transB weight keeps its groups of 4 along K. The fused node takes the
 * place and output of the chain's last node (every input is then
 * produced before it: the order stays topological); the others are removed. The fused op rounds
 * once where the chain rounded after each node: within one rounding of the output type. The
 * reference evaluator implements ampc.FusedMatMul the same way (ir/ref/contract.c).
 */
#include "passes.h"
#include "ir/activation.h"

#include <stdlib.h>
#include <string.h>

typedef struct chain {
    ampc_node *mm, *last, *nodes[4];
    ampc_node *rows; /* a Reshape of the rows in the chain (the product then has its shape) */
    int32_t n_nodes;
    ampc_value *b;         /* the [K, N] matrix (a transposed copy for a Gemm with transB) */
    ampc_value *bias, *z;
    ampc_fused_act act; /* AMPC_ACT_NONE, or the activation that ends the chain */
    bool fast;       /* "GeluTanh" for an erf GELU (--fast-gelu): the report's n_tanh_gelus */
} chain;

static bool is_bias(const ampc_value *c, const ampc_value *cur, int64_t nn) {
    return c->dtype == cur->dtype && c->shape.rank >= 1 && c->shape.dims[c->shape.rank - 1] == nn &&
           ampc_shape_numel(&c->shape) == nn;
}

static bool float_product(const ampc_node *n) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
    return ampc_dtype_is_float(y->dtype) && y->dtype != AMPC_DTYPE_F64 && b->shape.rank == 2 &&
           a->shape.rank >= 2 && b->shape.dims[0] > 0 && ampc_ir_numel(y) > 0;
}

/* A Gemm that is A @ B(^T) + bias; c->bias is set from its C. */
static bool gemm_qualifies(const ampc_node *n, chain *c) {
    if (!float_product(n) || !n->inputs[1]->data) return false;
    const ampc_gemm_params gp = ampc_gemm_params_of(n);
    if (gp.ta || gp.alpha != 1) return false;
    const ampc_value *cv = n->n_inputs > 2 ? n->inputs[2] : NULL;
    if (cv && (gp.beta != 1 ||
               !is_bias(cv, n->outputs[0], n->outputs[0]->shape.dims[1])))
        return false;
    c->bias = n->n_inputs > 2 ? n->inputs[2] : NULL;
    return true;
}

/* B as [K, N]: the Gemm's B itself, or a transposed copy of the constant when transB = 1. */
static ampc_value *matrix_b(ampc_graph *g, const ampc_node *n) {
    ampc_value *b = n->inputs[1];
    if (!ampc_gemm_params_of(n).tb) return b;
    int64_t rows = b->shape.dims[0], cols = b->shape.dims[1];
    size_t es = ampc_dtype_size(b->dtype);
    unsigned char *t = malloc((size_t)(rows * cols) * es);
    if (!t) return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++)
            memcpy(t + (size_t)(k * rows + r) * es, (const unsigned char *)b->data + (size_t)(r * cols + k) * es, es);
    ampc_shape s = {2, {cols, rows}};
    ampc_value *v = ampc_ir_const_new(g, NULL, b->dtype, &s, t);
    free(t);
    return v;
}

/* Whether ampc's own GEMM kernel can take an erf GELU as the epilogue of this product. */
static bool gelu_fits(const ampc_value *cur, const chain *c) {
    const ampc_value *a = c->mm->inputs[0]; /* [..., K]: transA is 0 */
    int64_t k = a->shape.dims[a->shape.rank - 1];
    int64_t nn = cur->shape.dims[cur->shape.rank - 1];
    return (cur->dtype == AMPC_DTYPE_F16 || cur->dtype == AMPC_DTYPE_BF16) &&
           a->dtype == cur->dtype && k % 8 == 0 && nn % 8 == 0;
}

/* The activation a GELU after this product becomes in the epilogue, or AMPC_ACT_NONE when it
 * stays a node of its own (file comment). */
static ampc_fused_act gelu_act(const ampc_pipeline_options *o, const ampc_node *gelu,
                            const ampc_value *cur, const chain *c) {
    const ampc_gelu_form form = ampc_gelu_form_of(gelu);
    if (form == AMPC_GELU_TANH) return AMPC_ACT_GELU_TANH;
    if (form != AMPC_GELU_ERF) return AMPC_ACT_NONE;
    if (o->gemm_kernel && gelu_fits(cur, c)) return AMPC_ACT_GELU;
    bool low = cur->dtype == AMPC_DTYPE_F16 || cur->dtype == AMPC_DTYPE_BF16;
    return low && o->fast_gelu ? AMPC_ACT_GELU_TANH : AMPC_ACT_NONE;
}

/* Follows the chain from mm as far as the rules allow; false when nothing follows it. */
static bool grow(const ampc_pipeline_options *o, chain *c, const ampc_uses *uses) {
    ampc_value *cur = c->mm->outputs[0];
    int64_t nn = cur->shape.dims[cur->shape.rank - 1];
    for (ampc_node *next; (next = ampc_pass_only_user(uses, cur)) && c->act == AMPC_ACT_NONE;) {
        if (next->op == AMPC_OP_RELU) {
            c->act = AMPC_ACT_RELU;
        } else if (next->op == AMPC_OP_GELU && (c->act = gelu_act(o, next, cur, c)) != AMPC_ACT_NONE) {
            c->fast = c->act == AMPC_ACT_GELU_TANH && ampc_gelu_form_of(next) != AMPC_GELU_TANH;
        } else if (next->op == AMPC_OP_RESHAPE && !c->rows && next->inputs[0] == cur &&
                   next->outputs[0]->shape.rank >= 2 &&
                   next->outputs[0]->shape.dims[next->outputs[0]->shape.rank - 1] == nn) {
            c->rows = next; /* the rows regrouped, each row as it was: the product's shape */
        } else if (next->op == AMPC_OP_ADD && next->n_inputs == 2) {
            ampc_value *other = next->inputs[0] == cur ? next->inputs[1] : next->inputs[0];
            if (next->inputs[0] == next->inputs[1]) break;
            if (!c->bias && is_bias(other, cur, nn) && ampc_shape_eq(&next->outputs[0]->shape, &cur->shape))
                c->bias = other;
            else if (!c->z && other->dtype == cur->dtype && ampc_shape_eq(&other->shape, &cur->shape))
                c->z = other;
            else
                break;
        } else {
            break;
        }
        c->nodes[c->n_nodes++] = next;
        c->last = next;
        cur = next->outputs[0];
    }
    return c->n_nodes > (c->rows ? 1 : 0); /* a Reshape alone folds nothing */
}

/* A's rows regrouped as the Reshape in the chain regroups the product's: A reshaped to its
 * leading dims and A's own last; NULL for want of memory. */
static ampc_value *rows_of_a(ampc_graph *g, const chain *c) {
    ampc_value *a = c->mm->inputs[0];
    const ampc_shape *to = &c->rows->outputs[0]->shape;
    int64_t dims[AMPC_MAX_RANK];
    memcpy(dims, to->dims, (size_t)to->rank * sizeof *dims);
    dims[to->rank - 1] = a->shape.dims[a->shape.rank - 1];
    ampc_value *in[2] = {a, ampc_ir_const_new(g, NULL, AMPC_DTYPE_I64,
                                              &(ampc_shape){.rank = 1, .dims = {to->rank}}, dims)};
    ampc_node *n = NULL;
    if (!in[1] || ampc_ir_node_build(g, AMPC_OP_RESHAPE, c->rows->name, in, 2, NULL, 0, 1, NULL,
                                     &n) != AMPC_OK)
        return NULL;
    return n->outputs[0];
}

/* Turns the chain's last node into the FusedMatMul and removes the others. */
static ampc_status fuse(ampc_graph *g, chain *c, ampc_uses *u) {
    ampc_value *a = c->rows ? rows_of_a(g, c) : c->mm->inputs[0];
    if (!a || ampc_pass_uses_grow(g, u) != AMPC_OK) return AMPC_E_OOM;
    ampc_value *in[4] = {a, c->b, c->bias, c->z};
    ampc_attr attrs[2];
    int32_t n_attrs = 0;
    if (c->act != AMPC_ACT_NONE) attrs[n_attrs++] = ampc_fused_act_attr(c->act);
    if (ampc_node_sparse24(c->mm)) /* the sparsity pass's mark */
        attrs[n_attrs++] = (ampc_attr){.name = AMPC_ATTR_SPARSE24, .kind = AMPC_ATTR_INT, .i = 1};
    const char *name = c->mm->name;
    ampc_ir_node_remove(g, c->mm);
    for (int32_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i] != c->last) ampc_ir_node_remove(g, c->nodes[i]);
    return ampc_pass_rewrite(g, c->last, AMPC_OP_FUSED_MATMUL, name, in,
                             c->z ? 4 : c->bias ? 3 : 2, attrs, n_attrs, u);
}

ampc_status ampc_pass_fuse_matmul(ampc_graph *g, const ampc_pass_ctx *cx, bool *changed) {
    *changed = false;
    ampc_uses uses;
    if (ampc_pass_uses(g, &uses) != AMPC_OK) return AMPC_FAIL(g, NULL, AMPC_E_OOM, "out of host memory");
    ampc_status st = AMPC_OK;
    const int32_t n_old = g->n_nodes;
    for (int32_t i = 0; i < n_old && st == AMPC_OK; i++) {
        ampc_node *n = g->nodes[i];
        chain c;
        memset(&c, 0, sizeof c);
        c.mm = n;
        if (n->dead || !(n->op == AMPC_OP_MATMUL ? float_product(n)
                         : n->op == AMPC_OP_GEMM && gemm_qualifies(n, &c)))
            continue;
        if (!grow(ampc_pass_opt(cx), &c, &uses)) continue;
        if (!(c.b = matrix_b(g, n))) {
            st = AMPC_FAIL(g, n, AMPC_E_OOM, "out of memory transposing the weights");
            break;
        }
        st = fuse(g, &c, &uses);
        if (st == AMPC_E_OOM) st = AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
        if (ampc_pass_report(cx)) ampc_pass_report(cx)->n_tanh_gelus += c.fast;
        *changed = true;
    }
    ampc_pass_uses_free(&uses);
    if (g->n_nodes > n_old) ampc_ir_graph_settle(g, n_old); /* A's rows regrouped */
    if (*changed) ampc_ir_graph_compact(g);
    return st;
}
