/*
 * test_fuse_attention.c — the fuse-attention pass and the ampc.FusedAttention kernels.
 *
 *   fuse_attention::*      the pass on graphs built with the DSL: BERT's export (heads split by
 *                          Reshape + Transpose, K transposed twice, Div by sqrt(D), the mask Add,
 *                          Softmax, heads merged back) and torch's scaled_dot_product_attention
 *                          export (sqrt-scale Muls on Q and K^T, the SafeSoftmax guard) fuse into
 *                          one node; near misses stay; the fused graph computes what the unfused
 *                          one does on the reference evaluator, in f32 and under --precision fp16.
 *   fuse_attention_nvrtc:: the generated kernels compile (PTX for compute_80 and an sm_80 cubin,
 *                          no GPU needed): f16/bf16 take the tensor-core kernel (mma.sync in the
 *                          PTX), f32 the generic one.
 *   fuse_attention_gpu::   compiled and run on the GPU against the reference evaluator of the
 *                          unfused f32 graph: S = 128, 77, 512, D = 64, several B x H, with and
 *                          without a mask (padding and fully masked rows), fp16, bf16 and f32.
 *                          Without a GPU they skip with the runtime's reason.
 */
#include "support.h"

#include "ir/ref/ref.h"
#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* MHA: torch's nn.MultiheadAttention (batch_first) as exported: x [B, S, E] turned sequence-
 * first, one packed projection [S, B, 3E], Q, K and V taken by Gather from its [3, S, B, E]
 * rearrangement, each split into heads through [S, B*H, D]; SDPA's scales. */
enum form { BERT, SDPA, PLAIN, MHA };
enum variant {
    FUSES,
    NO_MERGE,     /* no Transpose + Reshape after the second MatMul: fuses, Y stays [B,H,S,D] */
    AXIS_2,       /* softmax over the query axis: stays */
    SCORES_READ,  /* the scores are also a graph output: stays */
    TENSOR_SCALE, /* the scores multiplied by a tensor, not a scalar: stays */
    MASK_LEFT,    /* Add(mask * 1, scores): the mask on the left, itself a product: fuses */
    V_SCALED,     /* V multiplied by 2: fuses, the Mul stays (it scales Y, not the scores) */
    WINDOWED,     /* Swin: a constant bias [1, H, S, S], then, seen as [B / 2, 2, H, S, S], a
                   * constant shift mask per window [1, 2, 1, S, S]: fuses, one mask */
    OUT_PROJ,     /* MHA: the output projection (Gemm, transB) on the [S*B, E] rows, reshaped to
                   * [S, B, E], permuted back to batch-first and added to x: fuses, Y written
                   * batch-first, the projection and the Add one FusedMatMul */
    CAUSAL,       /* a decoder's constant causal mask [B, 1, S, S] (0 up to the diagonal, -inf
                   * past it, expanded over the batch): fuses, the mask implied (causal = 1) */
    CAUSAL_FINITE, /* the same with -10000 for -inf: fuses, the mask stays an input */
};

typedef struct acase {
    int64_t B, H, S, D;
    enum form form;
    bool mask;
    enum variant variant;
    ampc_dtype t;  /* of the inputs and every tensor (0: f32) */
    bool proj;     /* Q, K, V projected from one input x [B, S, H*D] by constant weights */
    bool bias;     /* with proj: each projection adds a constant bias */
    bool cross;    /* with proj: K and V projected from a second input x2 (cross-attention) */
    bool k_read;   /* with proj: K's projection is also a graph output */
    int64_t group; /* > 1: K and V have H / group heads, each repeated for `group` query heads
                    * (grouped-query attention: Unsqueeze, Expand, Reshape); inputs only */
} acase;

static ampc_dtype dtype_of(const acase *c) { return c->t ? c->t : AMPC_DTYPE_F32; }

/* A scalar constant of the case's dtype. */
static ampc_value *scalar(ampc_graph *g, const acase *c, double v) {
    unsigned char bits[8];
    ampc_ref_store_f64(bits, dtype_of(c), 0, v);
    return ampc_constant(g, NULL, dtype_of(c), 0, NULL, bits);
}

/* x [B, S, E] times a constant [E, E] of small deterministic values (in x's dtype), plus a
 * constant bias [E] when the case has one. */
static ampc_value *project(ampc_graph *g, const acase *c, ampc_value *x, int salt) {
    const int64_t E = c->H * c->D, wd[2] = {E, E};
    const ampc_dtype t = ampc_value_dtype(x);
    unsigned char *w = malloc((size_t)(E * E) * ampc_dtype_size(t));
    for (int64_t i = 0; i < E * E; i++)
        ampc_ref_store_f64(w, t, i, sin((double)(i * 7 + salt)) / sqrt((double)E));
    ampc_value *y = ampc_matmul(g, x, ampc_constant(g, NULL, t, 2, wd, w));
    if (c->bias) {
        for (int64_t i = 0; i < E; i++) ampc_ref_store_f64(w, t, i, cos((double)(i * 3 + salt)));
        y = ampc_add(g, y, ampc_constant(g, NULL, t, 1, &E, w));
    }
    free(w);
    return y;
}

/* The MHA form's Q, K and V [B, H, S, D] from x [B, S, E]: see enum form. */
static void packed_heads(ampc_graph *g, const acase *c, ampc_value *x, ampc_value *qkv[3]) {
    const int64_t E = c->H * c->D, wd[2] = {E, 3 * E}, E3 = 3 * E;
    const ampc_dtype t = ampc_value_dtype(x);
    unsigned char *w = malloc((size_t)(E * 3 * E) * ampc_dtype_size(t));
    for (int64_t i = 0; i < E * 3 * E; i++)
        ampc_ref_store_f64(w, t, i, sin((double)(i * 7 + 1)) / sqrt((double)E));
    static const int64_t seq_first[3] = {1, 0, 2}, to_front[5] = {3, 1, 2, 0, 4};
    ampc_value *y = ampc_matmul(g, ampc_transpose(g, x, seq_first, 3),
                                ampc_constant(g, NULL, t, 2, wd, w));
    if (c->bias) {
        for (int64_t i = 0; i < 3 * E; i++) ampc_ref_store_f64(w, t, i, cos((double)(i * 3 + 1)));
        y = ampc_add(g, y, ampc_constant(g, NULL, t, 1, &E3, w));
    }
    free(w);
    const int64_t sb3e[4] = {c->S, c->B, 3, E}, zero[1] = {0}, three[1] = {3};
    const int64_t rows[3] = {c->S, c->B * c->H, c->D}, bhsd[4] = {c->B, c->H, c->S, c->D};
    ampc_value *u = ampc_op(g, "Unsqueeze",
                            (ampc_value *[]){ampc_reshape(g, y, sb3e, 4), t_const_i64(g, SHAPE(1), zero)},
                            2, NULL, 0);
    ampc_value *sq = ampc_op(g, "Squeeze",
                             (ampc_value *[]){ampc_transpose(g, u, to_front, 5),
                                              t_const_i64(g, SHAPE(1), three)},
                             2, NULL, 0);
    for (int64_t i = 0; i < 3; i++) {
        ampc_value *one = ampc_op(g, "Gather", (ampc_value *[]){sq, ampc_scalar_i64(g, i)}, 2, NULL, 0);
        ampc_value *r = ampc_transpose(g, ampc_reshape(g, one, rows, 3), seq_first, 3);
        qkv[i] = ampc_reshape(g, r, bhsd, 4);
    }
}

static ampc_value *heads(ampc_graph *g, ampc_value *x, const acase *c, const int64_t perm[4]) {
    const int64_t split[4] = {c->B, c->S, c->H, c->D};
    return ampc_transpose(g, ampc_reshape(g, x, split, 4), perm, 4);
}

/* K or V [B, S, (H / group) * D] split into its heads [B, H / group, S, D], each then repeated
 * for `group` query heads as transformers' repeat_kv exports it: [B, H, S, D]. */
static ampc_value *kv_heads(ampc_graph *g, ampc_value *x, const acase *c) {
    static const int64_t bhsd[4] = {0, 2, 1, 3}, two[1] = {2};
    const int64_t kvh = c->H / c->group, split[4] = {c->B, c->S, kvh, c->D};
    const int64_t wide[5] = {c->B, kvh, c->group, c->S, c->D}, all[4] = {c->B, c->H, c->S, c->D};
    ampc_value *h = ampc_transpose(g, ampc_reshape(g, x, split, 4), bhsd, 4);
    ampc_value *u = ampc_op(g, "Unsqueeze", (ampc_value *[]){h, t_const_i64(g, SHAPE(1), two)}, 2,
                            NULL, 0);
    ampc_value *e = ampc_op(g, "Expand", (ampc_value *[]){u, t_const_i64(g, SHAPE(5), wide)}, 2,
                            NULL, 0);
    return ampc_reshape(g, e, all, 4);
}

/* MHA's output projection of y [S*B, E] (Gemm with transB and a bias), reshaped to [S, B, E],
 * permuted to batch-first and added to x [B, S, E]. */
static ampc_value *out_projection(ampc_graph *g, const acase *c, ampc_value *y, ampc_value *x) {
    static const int64_t seq_first[3] = {1, 0, 2};
    const int64_t E = c->H * c->D, ee[2] = {E, E}, sbe[3] = {c->S, c->B, E};
    const ampc_dtype t = ampc_value_dtype(y);
    unsigned char *w = malloc((size_t)(E * E) * ampc_dtype_size(t));
    for (int64_t i = 0; i < E * E; i++) ampc_ref_store_f64(w, t, i, cos((double)(i * 5 + 2)) / sqrt((double)E));
    ampc_value *wo = ampc_constant(g, NULL, t, 2, ee, w);
    for (int64_t i = 0; i < E; i++) ampc_ref_store_f64(w, t, i, sin((double)i) / 2);
    ampc_value *bo = ampc_constant(g, NULL, t, 1, &E, w);
    free(w);
    ampc_attr_arg trans_b = AMPC_ATTR_I("transB", 1);
    ampc_value *p = ampc_op(g, "Gemm", (ampc_value *[]){y, wo, bo}, 3, &trans_b, 1);
    return ampc_add(g, ampc_transpose(g, ampc_reshape(g, p, sbe, 3), seq_first, 3), x);
}

/* The attention of case c over inputs xq, xk, xv [B, S, H*D] (PLAIN: [B, H, S, D]) and the
 * mask [B, 1, 1, S]. */
static ampc_graph *build(const acase *c) {
    static const int64_t bhsd[4] = {0, 2, 1, 3}, bhds[4] = {0, 2, 3, 1}, swap[4] = {0, 1, 3, 2};
    ampc_graph *g = ampc_graph_create("attn");
    const ampc_dtype t = dtype_of(c);
    const int64_t in3[3] = {c->B, c->S, c->H * c->D}, in4[4] = {c->B, c->H, c->S, c->D};
    const bool plain = c->form == PLAIN;
    ampc_value *xq, *xk, *xv;
    ampc_value *packed[3] = {NULL, NULL, NULL};
    ampc_value *x_mha = NULL;
    if (c->form == MHA) {
        packed_heads(g, c, x_mha = ampc_input(g, "x", t, 3, in3), packed);
        xq = xk = xv = NULL;
    } else if (c->proj) {
        ampc_value *x = ampc_input(g, "x", t, 3, in3);
        ampc_value *x2 = c->cross ? ampc_input(g, "x2", t, 3, in3) : x;
        xq = project(g, c, x, 1), xk = project(g, c, x2, 2), xv = project(g, c, x2, 3);
        if (c->k_read) ampc_output(g, xk, "k");
    } else {
        const int64_t kv3[3] = {c->B, c->S, c->H / (c->group ? c->group : 1) * c->D};
        xq = ampc_input(g, "xq", t, plain ? 4 : 3, plain ? in4 : in3);
        xk = ampc_input(g, "xk", t, plain ? 4 : 3, plain ? in4 : kv3);
        xv = ampc_input(g, "xv", t, plain ? 4 : 3, plain ? in4 : kv3);
    }
    ampc_value *q = xq, *kt, *v = xv;
    if (c->form == MHA) {
        ampc_value *r = scalar(g, c, sqrt(1 / sqrt((double)c->D)));
        q = ampc_mul(g, packed[0], r);
        kt = ampc_mul(g, ampc_transpose(g, packed[1], swap, 4), r);
        v = packed[2];
    } else if (plain) {
        kt = ampc_transpose(g, xk, swap, 4);
    } else if (c->group > 1) { /* grouped K and V, BERT's or SDPA's scale */
        q = heads(g, xq, c, bhsd);
        kt = ampc_transpose(g, kv_heads(g, xk, c), swap, 4);
        v = kv_heads(g, xv, c);
        if (c->form == SDPA) {
            ampc_value *r = scalar(g, c, sqrt(1 / sqrt((double)c->D)));
            q = ampc_mul(g, q, r), kt = ampc_mul(g, kt, r);
        }
    } else if (c->form == BERT) {
        q = heads(g, xq, c, bhsd);
        kt = ampc_transpose(g, heads(g, xk, c, bhsd), swap, 4);
        v = heads(g, xv, c, bhsd);
    } else { /* SDPA: sqrt(scale) on both sides */
        ampc_value *r = scalar(g, c, sqrt(1 / sqrt((double)c->D)));
        q = ampc_mul(g, heads(g, xq, c, bhsd), r);
        kt = ampc_mul(g, heads(g, xk, c, bhds), r);
        v = heads(g, xv, c, bhsd);
    }
    if (c->variant == V_SCALED) v = ampc_mul(g, v, scalar(g, c, 2));
    ampc_value *s = ampc_matmul(g, q, kt);
    if (c->variant == SCORES_READ) ampc_output(g, s, "scores");
    if (c->form == BERT) s = ampc_div(g, s, scalar(g, c, sqrt((double)c->D)));
    if (c->variant == TENSOR_SCALE) {
        const int64_t sd[4] = {c->B, c->H, c->S, c->S};
        s = ampc_mul(g, s, ampc_input(g, "w", t, 4, sd));
    }
    if (c->variant == WINDOWED) {
        const int64_t w5[5] = {c->B / 2, 2, c->H, c->S, c->S}, s4[4] = {c->B, c->H, c->S, c->S};
        const int64_t bd[5] = {0, 1, c->H, c->S, c->S}, md[6] = {0, 1, 2, 1, c->S, c->S};
        double *bias = malloc((size_t)(2 * c->H * c->S * c->S) * sizeof *bias);
        for (int64_t i = 0; i < c->H * c->S * c->S; i++) bias[i] = sin((double)i) / 4;
        s = ampc_add(g, s, ampc_cast(g, t_const_f32(g, t_shape(bd, 4), bias), t));
        for (int64_t i = 0; i < 2 * c->S * c->S; i++) /* window 1 masks its last key */
            bias[i] = i >= c->S * c->S && i % c->S == c->S - 1 ? -100 : 0;
        ampc_value *m = ampc_cast(g, t_const_f32(g, t_shape(md, 5), bias), t);
        s = ampc_reshape(g, ampc_add(g, ampc_reshape(g, s, w5, 5), m), s4, 4);
        free(bias);
    }
    if (c->variant == CAUSAL || c->variant == CAUSAL_FINITE) {
        const ampc_shape md = {4, {c->B, 1, c->S, c->S}};
        double *m = malloc((size_t)(c->B * c->S * c->S) * sizeof *m);
        for (int64_t e = 0; e < c->B * c->S * c->S; e++)
            m[e] = e % c->S <= e / c->S % c->S ? 0 : c->variant == CAUSAL ? -INFINITY : -10000;
        s = ampc_add(g, s, ampc_cast(g, t_const_f32(g, md, m), t));
        free(m);
    }
    if (c->mask) {
        const int64_t md[4] = {c->B, 1, 1, c->S};
        ampc_value *mask = ampc_input(g, "mask", t, 4, md);
        s = c->variant == MASK_LEFT ? ampc_add(g, ampc_mul(g, mask, scalar(g, c, 1)), s)
                                    : ampc_add(g, s, mask);
    }
    ampc_value *p = ampc_softmax(g, s, c->variant == AXIS_2 ? 2 : -1);
    if (c->form == SDPA) { /* the exporter's NaN guard (fuse-softmax makes it SafeSoftmax) */
        ampc_value *nan = ampc_op(g, "IsNaN", &p, 1, NULL, 0);
        ampc_value *w[3] = {nan, scalar(g, c, 0), p};
        p = ampc_op(g, "Where", w, 3, NULL, 0);
    }
    ampc_value *y = ampc_matmul(g, p, v);
    if (c->form == MHA && c->variant != NO_MERGE) { /* sequence-first: [S, B, H, D] as [S*B, E] */
        static const int64_t sbhd[4] = {2, 0, 1, 3};
        const int64_t rows[2] = {c->S * c->B, c->H * c->D};
        y = ampc_reshape(g, ampc_transpose(g, y, sbhd, 4), rows, 2);
        if (c->variant == OUT_PROJ) y = out_projection(g, c, y, x_mha);
    } else if (c->variant != NO_MERGE) {
        const int64_t merged[3] = {c->B, c->S, c->H * c->D};
        y = ampc_reshape(g, ampc_transpose(g, y, bhsd, 4), merged, 3);
    }
    ampc_output(g, y, "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* Q, K, V uniform in [-2, 2); the mask by batch b: b % 4 = 0 none, 1 the last quarter of the keys
 * -inf (padding), 2 every key -inf (a fully masked row), 3 the last half -10000. */
static void fill(ampc_tensor *t, const char *name, uint64_t *seed) {
    const int64_t n = ampc_shape_numel(&t->shape);
    if (strcmp(name, "mask")) {
        for (int64_t i = 0; i < n; i++) {
            *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
            ampc_ref_store_f64(t->data, t->dtype, i, (double)(*seed >> 40) / (double)(1ull << 24) * 4 - 2);
        }
        return;
    }
    const int64_t B = t->shape.dims[0], S = t->shape.dims[3];
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < S; j++) {
            const int r = (int)(b % 4);
            const double m = r == 1 && j >= S - S / 4 ? -INFINITY
                             : r == 2                 ? -INFINITY
                             : r == 3 && j >= S / 2   ? -10000.0
                                                      : 0.0;
            ampc_ref_store_f64(t->data, t->dtype, b * S + j, m);
        }
}

static ampc_pipeline_options pipeline(ampc_precision p, bool fuse) {
    static const char *off[1] = {"fuse-attention"};
    return (ampc_pipeline_options){.verify = true, .precision = p, .disable = fuse ? NULL : off,
                                   .n_disable = fuse ? 0 : 1};
}

/* The projection matmuls a fused case keeps: fuse-qkv joins those sharing an input and read by
 * the attention only. */
static int32_t projections_left(const acase *c) {
    if (c->form == MHA) return c->variant == OUT_PROJ ? 2 : 1;
    if (!c->proj) return 0;
    return c->cross ? 2 : c->k_read ? 2 : 1;
}

/* Optimises case c with and without the pass, checks what fused, and compares both graphs'
 * outputs on the reference evaluator within tol. */
static void check(const acase *c, ampc_precision prec, int32_t fused, double tol) {
    ampc_graph *a = build(c), *b = build(c);
    ampc_pipeline_options with = pipeline(prec, true), without = pipeline(prec, false);
    cr_assert_eq(ampc_graph_optimize(a, &with), AMPC_OK, "%s", ampc_graph_errors(a));
    cr_assert_eq(ampc_graph_optimize(b, &without), AMPC_OK, "%s", ampc_graph_errors(b));
    cr_assert_eq(t_count_op(a, AMPC_OP_FUSED_ATTENTION), fused);
    if (fused && c->variant != V_SCALED) {
        cr_assert_eq(t_count_op(a, AMPC_OP_MATMUL) + t_count_op(a, AMPC_OP_FUSED_MATMUL) +
                         t_count_op(a, AMPC_OP_SOFTMAX) + t_count_op(a, AMPC_OP_SAFE_SOFTMAX) +
                         t_count_op(a, AMPC_OP_MUL) + t_count_op(a, AMPC_OP_DIV),
                     projections_left(c) + (c->variant == MASK_LEFT), "only the projections "
                     "and the mask's product stay:\n%s",
                     ampc_graph_to_text(a, false));
        /* MHA's Transpose making x sequence-first too: its projection runs on x's rows */
        cr_assert_eq(t_count_op(a, AMPC_OP_TRANSPOSE), 0,
                     "the transposes fold into strides:\n%s", ampc_graph_to_text(a, false));
        cr_assert_eq(t_count_op(a, AMPC_OP_GATHER) + t_count_op(a, AMPC_OP_EXPAND), 0,
                     "the Gathers and Expands too:\n%s", ampc_graph_to_text(a, false));
    }
    const int32_t n_in = ampc_graph_input_count(a);
    ampc_tensor in[5];
    uint64_t seed = 7;
    for (int32_t i = 0; i < n_in; i++) {
        const ampc_value *v = ampc_graph_input(a, i);
        in[i] = (ampc_tensor){ampc_value_dtype(v), ampc_value_shape(v), NULL};
        in[i].data = calloc((size_t)ampc_shape_numel(&in[i].shape), ampc_dtype_size(in[i].dtype));
        fill(&in[i], ampc_value_name(v), &seed);
    }
    t_expect_same_outputs(a, b, in, n_in, tol, tol);
    for (int32_t i = 0; i < n_in; i++) free(in[i].data);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

/* Case c optimised (with fuse-qkv unless disabled); the caller destroys it. */
static ampc_graph *optimised(const acase *c, ampc_precision p, bool qkv) {
    static const char *off[1] = {"fuse-qkv"};
    ampc_graph *g = build(c);
    ampc_pipeline_options o = pipeline(p, true);
    if (!qkv) o.disable = off, o.n_disable = 1;
    cr_assert_eq(ampc_graph_optimize(g, &o), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static const ampc_node *attention_of(const ampc_graph *g) {
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == AMPC_OP_FUSED_ATTENTION) return g->nodes[i];
    cr_assert_fail("no ampc.FusedAttention");
    return NULL;
}

#define SMALL(form, mask, variant) {2 * 2, 3, 10, 8, form, mask, variant}

Test(fuse_attention, bert_export_fuses) {
    const acase c = SMALL(BERT, true, FUSES);
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
}

Test(fuse_attention, sdpa_export_with_guard_fuses) {
    const acase c = SMALL(SDPA, true, FUSES);
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
}

Test(fuse_attention, plain_heads_without_mask_fuse) {
    const acase c = SMALL(PLAIN, false, FUSES);
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
}

Test(fuse_attention, mask_on_the_left_fuses) {
    const acase c = SMALL(BERT, true, MASK_LEFT);
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
}

Test(fuse_attention, a_scalar_on_v_scales_the_output_not_the_scores) {
    const acase c = SMALL(SDPA, true, V_SCALED);
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
}

Test(fuse_attention, unmerged_output_fuses) {
    const acase c = SMALL(BERT, true, NO_MERGE);
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
}

Test(fuse_attention, fp16_matches_the_unfused_graph) {
    const acase c = {4, 3, 10, 8, BERT, true, FUSES, AMPC_DTYPE_F16},
                d = {4, 3, 10, 8, SDPA, true, FUSES, AMPC_DTYPE_F16};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-2);
    check(&d, AMPC_PRECISION_KEEP, 1, 1e-2);
}

Test(fuse_attention, bf16_matches_the_unfused_graph) {
    const acase c = {4, 3, 10, 8, BERT, true, FUSES, AMPC_DTYPE_BF16};
    check(&c, AMPC_PRECISION_KEEP, 1, 4e-2);
}

/* An f32 model compiled with --precision fp16: the projections run in f16, so do the heads'
 * transposes, which fold into the fused node; the SDPA form's scale Muls fold into it too
 * (before fold-scale could move them into the weights a second time). */
Test(fuse_attention, projected_model_under_precision_fp16) {
    const acase c = {4, 3, 10, 8, BERT, true, FUSES, 0, true},
                d = {4, 3, 10, 8, SDPA, true, FUSES, 0, true};
    check(&c, AMPC_PRECISION_FP16, 1, 1e-2);
    check(&d, AMPC_PRECISION_FP16, 1, 1e-2);
}

/* Q, K and V read from the packed projection, each at its third of a row: no copy of the
 * heads, no Gather; the projection runs on x's rows as they are, not on a sequence-first copy. */
Test(fuse_attention, multihead_attention_export_reads_the_packed_projection) {
    const acase c = SMALL(MHA, true, FUSES), d = {4, 3, 10, 8, MHA, false, FUSES, 0, true, true};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    check(&d, AMPC_PRECISION_KEEP, 1, 1e-5);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const ampc_node *n = attention_of(g);
    /* the projection of x's own rows, [B, S, 3E]: b steps S * 3E, h D, s 3E, d 1; Q at 0, K at
     * E, V at 2E */
    const int64_t E = c.H * c.D, want[4] = {c.S * 3 * E, c.D, 3 * E, 1}, off[3] = {0, E, 2 * E};
    cr_assert_arr_eq(ampc_ir_attr_find(n, "q_strides")->ints, want, sizeof want);
    cr_assert_arr_eq(ampc_ir_attr_find(n, "v_strides")->ints, want, sizeof want);
    cr_assert_arr_eq(ampc_ir_attr_find(n, "offsets")->ints, off, sizeof off);
    /* Y written sequence-first, [S, B, H, D], read as [S*B, E] */
    const int64_t y_perm[4] = {2, 0, 1, 3}, y_shape[2] = {c.S * c.B, E};
    cr_assert_eq(ampc_ir_attr_find(n, "merge_heads")->i, 0);
    cr_assert_arr_eq(ampc_ir_attr_find(n, "y_perm")->ints, y_perm, sizeof y_perm);
    cr_assert_arr_eq(ampc_ir_attr_find(n, "y_shape")->ints, y_shape, sizeof y_shape);
    ampc_graph_destroy(g);
}

/* The output projection, reshaped and permuted back to batch-first before the residual Add:
 * the fused node writes Y batch-first, the Transpose is a Reshape, and the projection, its bias
 * and the residual Add are one FusedMatMul over Y's rows. */
Test(fuse_attention, multihead_attention_output_projection_reads_batch_first_rows) {
    const acase c = {4, 3, 10, 8, MHA, true, OUT_PROJ, 0, true, true};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const ampc_node *n = attention_of(g);
    const int64_t y_perm[4] = {0, 2, 1, 3};
    cr_assert_arr_eq(ampc_ir_attr_find(n, "y_perm")->ints, y_perm, sizeof y_perm);
    cr_assert_eq(t_count_op(g, AMPC_OP_ADD) + t_count_op(g, AMPC_OP_GEMM), 0, "%s",
                 ampc_graph_to_text(g, false));
    int32_t residual = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
        residual += !g->nodes[i]->dead && g->nodes[i]->op == AMPC_OP_FUSED_MATMUL &&
                    g->nodes[i]->n_inputs == 4;
    cr_assert_eq(residual, 1, "the projection adds the residual: %s", ampc_graph_to_text(g, false));
    ampc_graph_destroy(g);
}

/* Grouped-query attention: K and V of H / group heads are read where they are, not repeated. */
Test(fuse_attention, grouped_query_attention_reads_each_kv_head_once) {
    const acase c = {2, 6, 10, 8, BERT, true, FUSES, .group = 3},
                d = {2, 4, 10, 8, SDPA, true, FUSES, .group = 2};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    check(&d, AMPC_PRECISION_KEEP, 1, 1e-5);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const ampc_node *n = attention_of(g);
    cr_assert_eq(ampc_ir_attr_find(n, "kv_group")->i, 3);
    /* K [B, S, 2 * D]: b steps S * 2D, the K/V head D, s 2D, d 1 */
    const int64_t want[4] = {c.S * 2 * c.D, c.D, 2 * c.D, 1};
    cr_assert_arr_eq(ampc_ir_attr_find(n, "k_strides")->ints, want, sizeof want);
    cr_assert_arr_eq(ampc_ir_attr_find(n, "v_strides")->ints, want, sizeof want);
    ampc_graph_destroy(g);
}

/* Swin's shifted windows: the bias and the per-window shift mask become one [W, H, S, S] mask
 * that batch entry b reads at b % W (mask_period). */
Test(fuse_attention, windowed_masks_become_one_periodic_mask) {
    const acase c = SMALL(SDPA, false, WINDOWED), d = {4, 3, 10, 8, BERT, false, WINDOWED, AMPC_DTYPE_F16};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    check(&d, AMPC_PRECISION_KEEP, 1, 1e-2);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const ampc_node *n = attention_of(g);
    cr_assert_eq(ampc_ir_attr_find(n, "mask_period")->i, 2);
    const ampc_shape want = {4, {2, c.H, c.S, c.S}};
    cr_assert(ampc_shape_eq(&n->inputs[3]->shape, &want));
    cr_assert_eq(t_count_op(g, AMPC_OP_RESHAPE) + t_count_op(g, AMPC_OP_ADD), 0, "%s",
                 ampc_graph_to_text(g, false));
    ampc_graph_destroy(g);
}

/* A decoder's causal mask, a constant of 0 and -inf expanded over the batch: the fused node
 * implies it (causal = 1, no mask input) and the constant leaves the graph; with -10000 for
 * -inf it stays a mask. */
Test(fuse_attention, a_constant_causal_mask_becomes_structure) {
    const acase c = SMALL(SDPA, false, CAUSAL), d = {4, 3, 10, 8, BERT, false, CAUSAL, AMPC_DTYPE_F16},
                e = SMALL(SDPA, false, CAUSAL_FINITE), p = {4, 3, 10, 8, SDPA, false, CAUSAL, 0, true};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    check(&d, AMPC_PRECISION_KEEP, 1, 1e-2);
    check(&e, AMPC_PRECISION_KEEP, 1, 1e-5);
    check(&p, AMPC_PRECISION_FP16, 1, 1e-2); /* the f32 mask's -inf in f16 */
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const ampc_node *n = attention_of(g);
    cr_assert_eq(n->n_inputs, 3, "%s", ampc_graph_to_text(g, false));
    cr_assert_eq(ampc_attr_int_or(n, "causal", 0), 1);
    cr_assert_null(ampc_ir_attr_find(n, "causal_offset"), "offset 0 is the default");
    for (int32_t i = 0; i < g->n_values; i++)
        cr_assert(!g->values[i]->data || ampc_ir_numel(g->values[i]) < c.S * c.S,
                  "the mask's constant is gone: %s", ampc_graph_to_text(g, false));
    ampc_graph_destroy(g);
    g = optimised(&e, AMPC_PRECISION_KEEP, true);
    n = attention_of(g);
    cr_assert_eq(n->n_inputs, 4);
    cr_assert_null(ampc_ir_attr_find(n, "causal"));
    ampc_graph_destroy(g);
}

/* An ampc.FusedAttention of one head (D = 4, safe) as onnx-attention writes it, over a constant
 * mask of `rows` x Sk values (rank 2; batch 2 with a batch dim when `batch`), before and after
 * fuse-attention. */
static ampc_graph *fused_over(const double *mask, int64_t Sq, int64_t Sk, int64_t rows, bool batch) {
    ampc_graph *g = ampc_graph_create("over_mask");
    const int64_t B = batch ? 2 : 1, qd[4] = {B, 1, Sq, 4}, kd[4] = {B, 1, Sk, 4};
    const ampc_shape md = batch ? (ampc_shape){4, {B, 1, rows, Sk}} : (ampc_shape){2, {rows, Sk}};
    const int64_t dims[6] = {B, 1, Sq, Sk, 4, 4}, qs[4] = {Sq * 4, Sq * 4, 4, 1}, ks[4] = {Sk * 4, Sk * 4, 4, 1};
    ampc_value *in[4] = {ampc_input(g, "q", AMPC_DTYPE_F32, 4, qd), ampc_input(g, "k", AMPC_DTYPE_F32, 4, kd),
                         ampc_input(g, "v", AMPC_DTYPE_F32, 4, kd),
                         t_const_f32(g, md, mask)};
    ampc_attr_arg a[5] = {AMPC_ATTR_IS("dims", dims, 6), AMPC_ATTR_IS("q_strides", qs, 4),
                          AMPC_ATTR_IS("k_strides", ks, 4), AMPC_ATTR_IS("v_strides", ks, 4),
                          AMPC_ATTR_I("safe", 1)};
    ampc_output(g, ampc_op(g, "ampc.FusedAttention", in, 4, a, 5), "y");
    cr_assert_eq(ampc_graph_status(g), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

/* Runs fuse-attention on the node over mask and checks that it computes what it did: the
 * attribute causal (want_causal: 1, 0 absent) and causal_offset (want_off), and whether the mask
 * input stays (want_inputs 4) or goes (3). */
static void mask_becomes(const double *mask, int64_t Sq, int64_t Sk, int64_t rows, bool batch,
                         int64_t want_causal, int64_t want_off, int32_t want_inputs) {
    ampc_graph *a = fused_over(mask, Sq, Sk, rows, batch), *b = fused_over(mask, Sq, Sk, rows, batch);
    bool changed = false;
    cr_assert_eq(ampc_pass_fuse_attention(a, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(a));
    const ampc_node *n = attention_of(a);
    cr_assert_eq(changed, want_inputs == 3);
    cr_assert_eq(n->n_inputs, want_inputs, "%s", ampc_graph_to_text(a, false));
    cr_assert_eq(ampc_attr_int_or(n, "causal", 0), want_causal, "%s", ampc_graph_to_text(a, false));
    cr_assert_eq(ampc_attr_int_or(n, "causal_offset", 0), want_off, "%s", ampc_graph_to_text(a, false));
    t_expect_same_outputs_filled(a, b, fill, 5, 1e-6, 1e-6);
    /* the attributes survive the IR text: parsed back, the node computes the same */
    char *text = ampc_graph_to_text(a, true), *err = NULL;
    ampc_graph *c = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &c, &err), AMPC_OK, "%s", err ? err : "");
    t_expect_same_outputs_filled(c, b, fill, 5, 0, 0);
    free(text);
    ampc_graph_destroy(c);
    ampc_graph_destroy(a);
    ampc_graph_destroy(b);
}

/* Causal masks with any offset (bottom-right aligned: Sk - Sq; negative: the first rows see no
 * key, which `safe` makes zeros), a mask of zeros (dropped), and near misses that stay: a row
 * out of the pattern, an entry of the batch that differs, a NaN, +inf, a finite -10000. */
Test(fuse_attention, causal_masks_of_any_offset_and_near_misses) {
    const double I = -INFINITY;
    const double right[3 * 5] = {0, 0, 0, I, I, 0, 0, 0, 0, I, 0, 0, 0, 0, 0};
    mask_becomes(right, 3, 5, 3, false, 1, 2, 3);
    const double late[4 * 4] = {I, I, I, I, 0, I, I, I, 0, 0, I, I, 0, 0, 0, I};
    mask_becomes(late, 4, 4, 4, false, 1, -1, 3);
    const double zeros[2 * 1 * 3 * 3] = {0};
    mask_becomes(zeros, 3, 3, 3, true, 0, 0, 3);
    const double odd[4 * 4] = {0, I, I, I, 0, 0, I, I, 0, I, 0, I, 0, 0, 0, 0};
    mask_becomes(odd, 4, 4, 4, false, 0, 0, 4);
    double per_batch[2 * 3 * 3] = {0, I, I, 0, 0, I, 0, 0, 0, 0, I, I, 0, 0, I, 0, 0, 0};
    mask_becomes(per_batch, 3, 3, 3, true, 1, 0, 3); /* both entries causal: implied */
    per_batch[9 + 1] = 0;                            /* the second sees one key more */
    mask_becomes(per_batch, 3, 3, 3, true, 0, 0, 4);
    const double values[3][3 * 3] = {{0, NAN, I, 0, 0, I, 0, 0, 0},
                                     {0, INFINITY, I, 0, 0, I, 0, 0, 0},
                                     {0, -10000, I, 0, 0, I, 0, 0, 0}};
    for (int32_t i = 0; i < 3; i++) mask_becomes(values[i], 3, 3, 3, false, 0, 0, 4);
    const double one_row[4] = {0, 0, I, I}; /* one row broadcast to 3 queries: not causal */
    mask_becomes(one_row, 3, 4, 1, false, 0, 0, 4);
}

/* A mask that is a graph input with a causal default stays an input: the caller may pass
 * another (a padding mask) at run time. */
Test(fuse_attention, a_mask_input_with_a_causal_default_stays) {
    static const char text[] =
        "graph \"d\" {\n"
        "  input %q : f32[1,1,2,4]\n"
        "  input %k : f32[1,1,2,4]\n"
        "  input %v : f32[1,1,2,4]\n"
        "  input %m : f32[2,2] = [0, -inf, 0, 0]\n"
        "  %y : f32[1,1,2,4] = ampc.FusedAttention(%q, %k, %v, %m) {dims = [1, 1, 2, 2, 4, 4], "
        "q_strides = [8, 8, 4, 1], k_strides = [8, 8, 4, 1], v_strides = [8, 8, 4, 1]}\n"
        "  output %y\n"
        "}\n";
    ampc_graph *g = NULL;
    char *err = NULL;
    cr_assert_eq(ampc_graph_parse(text, strlen(text), &g, &err), AMPC_OK, "%s", err ? err : "");
    bool changed = true;
    cr_assert_eq(ampc_pass_fuse_attention(g, NULL, &changed), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_not(changed);
    cr_assert_eq(attention_of(g)->n_inputs, 4);
    cr_assert_null(ampc_ir_attr_find(attention_of(g), "causal"));
    ampc_graph_destroy(g);
}

Test(fuse_attention, near_misses_stay) {
    const acase axis = SMALL(BERT, true, AXIS_2), read = SMALL(BERT, true, SCORES_READ),
                scale = SMALL(BERT, false, TENSOR_SCALE);
    check(&axis, AMPC_PRECISION_KEEP, 0, 0);
    check(&read, AMPC_PRECISION_KEEP, 0, 0);
    check(&scale, AMPC_PRECISION_KEEP, 0, 0);
}

Test(fuse_attention, the_fused_node_records_scale_strides_and_layout) {
    const acase c = SMALL(BERT, true, FUSES);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const ampc_node *n = attention_of(g);
    const int64_t HD = c.H * c.D, want_q[4] = {c.S * HD, c.D, HD, 1};
    const ampc_attr *qs = ampc_ir_attr_find(n, "q_strides"), *ks = ampc_ir_attr_find(n, "k_strides");
    cr_assert_arr_eq(qs->ints, want_q, sizeof want_q, "Q read from [B, S, H*D] directly");
    cr_assert_arr_eq(ks->ints, want_q, sizeof want_q, "K^T's two transposes fold too");
    cr_assert_float_eq(ampc_ir_attr_find(n, "scale")->f, 1 / sqrt(8.0), 1e-7);
    cr_assert_eq(ampc_ir_attr_find(n, "merge_heads")->i, 1);
    cr_assert_eq(ampc_ir_attr_find(n, "safe")->i, 0);
    cr_assert_eq(n->outputs[0]->shape.rank, 3);
    bool changed = true;
    cr_assert_eq(ampc_pass_fuse_attention(g, NULL, &changed), AMPC_OK);
    cr_assert_not(changed, "a second run finds nothing");
    ampc_graph_destroy(g);
}

Test(fuse_attention, inference_reports_bad_strides_and_masks) {
    ampc_graph *g = ampc_graph_create("bad");
    const int64_t d3[3] = {1, 4, 8}, md[2] = {3, 4};
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 3, d3);
    ampc_value *mask = ampc_input(g, "m", AMPC_DTYPE_F32, 2, md);
    const int64_t dims[6] = {1, 2, 4, 4, 4, 4}, good[4] = {32, 4, 8, 1}, far[4] = {32, 4, 9, 1};
    ampc_attr_arg a[5] = {AMPC_ATTR_IS("dims", dims, 6), AMPC_ATTR_IS("q_strides", far, 4),
                          AMPC_ATTR_IS("k_strides", good, 4), AMPC_ATTR_IS("v_strides", good, 4),
                          AMPC_ATTR_I("merge_heads", 1)};
    ampc_value *in[4] = {x, x, x, mask};
    ampc_op(g, "ampc.FusedAttention", in, 3, a, 5);
    t_expect_diag(g, "input 0 'x' has 32 elements, but q_strides reads [1,2,4,4] up to element 34");
    ampc_graph_destroy(g);
    g = ampc_graph_create("bad_mask");
    x = ampc_input(g, "x", AMPC_DTYPE_F32, 3, d3);
    mask = ampc_input(g, "m", AMPC_DTYPE_F32, 2, md);
    in[0] = in[1] = in[2] = x, in[3] = mask;
    a[1] = AMPC_ATTR_IS("q_strides", good, 4);
    ampc_op(g, "ampc.FusedAttention", in, 4, a, 5);
    t_expect_diag(g, "input 3 'm' (mask) must broadcast to the scores [1,2,4,4] ([B, H, Sq, Sk]), "
                     "got [3,4]");
    ampc_graph_destroy(g);
    /* kv_group must divide the heads; with 2 of them, K and V have one head (extent 1) */
    ampc_attr_arg ag[6] = {a[0], a[1], a[2], a[3], a[4], AMPC_ATTR_I("kv_group", 3)};
    g = ampc_graph_create("bad_group");
    in[0] = in[1] = in[2] = ampc_input(g, "x", AMPC_DTYPE_F32, 3, d3);
    ampc_op(g, "ampc.FusedAttention", in, 3, ag, 6);
    t_expect_diag(g, "attribute 'kv_group' (query heads a K/V head serves) must divide the 2 heads, "
                     "got 3");
    ampc_graph_destroy(g);
    const int64_t k_far[4] = {32, 100, 8, 1}; /* fits only as one K/V head */
    ag[2] = AMPC_ATTR_IS("k_strides", k_far, 4), ag[5] = AMPC_ATTR_I("kv_group", 2);
    g = ampc_graph_create("one_kv_head");
    in[0] = in[1] = in[2] = ampc_input(g, "x", AMPC_DTYPE_F32, 3, d3);
    cr_assert_not_null(ampc_op(g, "ampc.FusedAttention", in, 3, ag, 6), "%s", ampc_graph_errors(g));
    ampc_graph_destroy(g);
    /* the output layout: y_perm a permutation, y_shape holding Y, neither with merge_heads */
    static const int64_t twice[4] = {0, 0, 1, 2}, perm[4] = {2, 0, 1, 3}, small[2] = {4, 7};
    const ampc_attr_arg lay[3][2] = {
        {AMPC_ATTR_I("merge_heads", 0), AMPC_ATTR_IS("y_perm", twice, 4)},
        {AMPC_ATTR_IS("y_perm", perm, 4), AMPC_ATTR_IS("y_shape", small, 2)},
        {AMPC_ATTR_I("merge_heads", 1), AMPC_ATTR_IS("y_perm", perm, 4)}};
    /* mask_period: the mask's first dim has that many entries, dividing B */
    ampc_attr_arg ap[6] = {a[0], a[1], a[2], a[3], a[4], AMPC_ATTR_I("mask_period", 3)};
    g = ampc_graph_create("bad_period");
    in[0] = in[1] = in[2] = ampc_input(g, "x", AMPC_DTYPE_F32, 3, d3);
    const int64_t m4[4] = {3, 2, 4, 4};
    in[3] = ampc_input(g, "m", AMPC_DTYPE_F32, 4, m4);
    ampc_op(g, "ampc.FusedAttention", in, 4, ap, 6);
    t_expect_diag(g, "attribute 'mask_period' 3 needs a mask of rank 4 whose first dim has that "
                     "many entries, dividing B = 1");
    ampc_graph_destroy(g);
    /* causal: 0 or 1, no mask input beside it, its offset within [-Sq, Sk] */
    static const char *const causal_why[4] = {
        "attribute 'causal' must be 0 or 1, got 2",
        "attribute 'causal' = 1 implies the mask, so input 3 'm' must be absent",
        "attribute 'causal_offset' needs causal = 1",
        "attribute 'causal_offset' must be within [-Sq, Sk] = [-4, 4], got 5"};
    const ampc_attr_arg causal_attrs[4][2] = {
        {AMPC_ATTR_I("causal", 2), AMPC_ATTR_I("causal_offset", 0)},
        {AMPC_ATTR_I("causal", 1), AMPC_ATTR_I("causal_offset", 0)},
        {AMPC_ATTR_I("causal", 0), AMPC_ATTR_I("causal_offset", 1)},
        {AMPC_ATTR_I("causal", 1), AMPC_ATTR_I("causal_offset", 5)}};
    for (int32_t i = 0; i < 4; i++) {
        ampc_attr_arg ac[7] = {a[0], a[1], a[2], a[3], a[4], causal_attrs[i][0], causal_attrs[i][1]};
        g = ampc_graph_create("bad_causal");
        in[0] = in[1] = in[2] = ampc_input(g, "x", AMPC_DTYPE_F32, 3, d3);
        const int64_t m2[2] = {4, 4};
        in[3] = ampc_input(g, "m", AMPC_DTYPE_F32, 2, m2);
        ampc_op(g, "ampc.FusedAttention", in, i == 1 ? 4 : 3, ac, 7);
        t_expect_diag(g, causal_why[i]);
        ampc_graph_destroy(g);
    }
    static const char *const why[3] = {"output layout: y_perm must be a permutation of 0, 1, 2, 3",
                                       "output layout: y_shape must hold B * H * Sq * Dv elements",
                                       "output layout: merge_heads = 1 excludes y_perm and y_shape"};
    for (int32_t i = 0; i < 3; i++) {
        ampc_attr_arg al[6] = {a[0], a[1], a[2], a[3], lay[i][0], lay[i][1]};
        g = ampc_graph_create("bad_layout");
        in[0] = in[1] = in[2] = ampc_input(g, "x", AMPC_DTYPE_F32, 3, d3);
        ampc_op(g, "ampc.FusedAttention", in, 3, al, 6);
        t_expect_diag(g, why[i]);
        ampc_graph_destroy(g);
    }
}

/* ---- fuse-qkv: the projections joined ---------------------------------------------------- */

/* The attention's offsets are `want`, and operands i and j read one value exactly when
 * same[i] = same[j]. */
static void expect_reads(const ampc_graph *g, const int64_t want[3], const int32_t same[3]) {
    const ampc_node *n = attention_of(g);
    const ampc_attr *off = ampc_ir_attr_find(n, "offsets");
    cr_assert_not_null(off, "offsets recorded:\n%s", ampc_graph_to_text(g, false));
    cr_assert_arr_eq(off->ints, want, 3 * sizeof *want);
    for (int32_t i = 0; i < 3; i++)
        for (int32_t j = 0; j < i; j++)
            cr_assert_eq(n->inputs[i] == n->inputs[j], same[i] == same[j], "operands %d and %d", i, j);
}

Test(fuse_qkv, bert_projections_join_and_attention_reads_their_columns) {
    const acase c = {2, 3, 10, 8, BERT, true, FUSES, 0, true, true};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const int64_t E = c.H * c.D, want[3] = {0, E, 2 * E}, rows[4] = {c.S * 3 * E, c.D, 3 * E, 1};
    const int32_t same[3] = {0, 0, 0};
    expect_reads(g, want, same);
    const ampc_node *n = attention_of(g), *p = n->inputs[0]->producer;
    cr_assert_arr_eq(ampc_ir_attr_find(n, "q_strides")->ints, rows, sizeof rows);
    cr_assert_arr_eq(ampc_ir_attr_find(n, "k_strides")->ints, rows, sizeof rows);
    cr_assert_eq(p->op, AMPC_OP_FUSED_MATMUL, "the joined bias goes into the GEMM's epilogue");
    cr_assert_eq(p->n_inputs, 3);
    cr_assert_eq(p->inputs[1]->shape.dims[1], 3 * E);
    cr_assert_eq(ampc_ir_numel(p->inputs[2]), 3 * E);
    bool changed = true;
    cr_assert_eq(ampc_pass_fuse_qkv(g, NULL, &changed), AMPC_OK);
    cr_assert_not(changed, "a second run finds nothing");
    ampc_graph_destroy(g);
}

Test(fuse_qkv, sdpa_projections_without_bias_join) {
    const acase c = {2, 3, 10, 8, SDPA, true, FUSES, 0, true};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    cr_assert_eq(t_count_op(g, AMPC_OP_MATMUL), 1);
    ampc_graph_destroy(g);
}

Test(fuse_qkv, cross_attention_joins_k_and_v) {
    const acase c = {2, 3, 10, 8, BERT, true, FUSES, 0, true, true, true};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const int64_t want[3] = {0, 0, c.H * c.D};
    const int32_t same[3] = {0, 1, 1};
    expect_reads(g, want, same);
    ampc_graph_destroy(g);
}

Test(fuse_qkv, a_projection_read_elsewhere_stays_alone) {
    const acase c = {2, 3, 10, 8, BERT, true, FUSES, 0, true, true, false, true};
    check(&c, AMPC_PRECISION_KEEP, 1, 1e-5);
    ampc_graph *g = optimised(&c, AMPC_PRECISION_KEEP, true);
    const int64_t want[3] = {0, 0, c.H * c.D};
    const int32_t same[3] = {0, 1, 0};
    expect_reads(g, want, same);
    ampc_graph_destroy(g);
}

Test(fuse_qkv, under_precision_fp16_and_disabled) {
    const acase c = {4, 3, 10, 8, BERT, true, FUSES, 0, true, true};
    check(&c, AMPC_PRECISION_FP16, 1, 1e-2);
    ampc_graph *off = optimised(&c, AMPC_PRECISION_FP16, false);
    cr_assert_eq(t_count_op(off, AMPC_OP_FUSED_MATMUL), 3, "without the pass three projections stay");
    cr_assert_null(ampc_ir_attr_find(attention_of(off), "offsets"));
    ampc_graph_destroy(off);
}

Test(fuse_qkv, inference_checks_the_offsets) {
    ampc_graph *g = ampc_graph_create("far");
    const int64_t d3[3] = {1, 4, 24};
    ampc_value *x = ampc_input(g, "x", AMPC_DTYPE_F32, 3, d3);
    const int64_t dims[6] = {1, 2, 4, 4, 4, 4}, st[4] = {96, 4, 24, 1}, off[3] = {0, 8, 17};
    ampc_attr_arg a[6] = {AMPC_ATTR_IS("dims", dims, 6), AMPC_ATTR_IS("q_strides", st, 4),
                          AMPC_ATTR_IS("k_strides", st, 4), AMPC_ATTR_IS("v_strides", st, 4),
                          AMPC_ATTR_I("merge_heads", 1), AMPC_ATTR_IS("offsets", off, 3)};
    ampc_value *in[3] = {x, x, x};
    ampc_op(g, "ampc.FusedAttention", in, 3, a, 6);
    t_expect_diag(g, "input 2 'x' has 96 elements, but v_strides reads [1,2,4,4] up to element 96");
    ampc_graph_destroy(g);
}

/* ---- NVRTC: the kernels compile without a GPU ----------------------------------------------- */

/* Compiles case c under precision p for sm_80 and checks which kernel the CUDA calls (mma.sync
 * in the PTX for the tensor-core ones) and, when `also` is given, that the CUDA holds it. */
static void compiles(const acase *c, ampc_precision p, const char *kernel, const char *also) {
    ampc_graph *g = build(c);
    static const int32_t sm80 = 80;
    ampc_pipeline_options po = pipeline(p, true);
    ampc_compile_options o = {.archs = &sm80, .n_archs = 1, .cache_dir = "", .pipeline = &po};
    ampc_module *m = NULL;
    cr_assert_eq(ampc_compile(g, &o, &m), AMPC_OK, "%s", ampc_graph_errors(g));
    cr_assert_eq(t_count_op(g, AMPC_OP_FUSED_ATTENTION), 1);
    const bool tensor_cores = strcmp(kernel, "attn_rows") != 0;
    char call[64];
    snprintf(call, sizeof call, "ampc::%s<", kernel);
    bool mma = false, found = false, has = !also;
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++) {
        mma |= strstr(ampc_module_ptx(m, u), "mma.sync.aligned.m16n8k16") != NULL;
        found |= strstr(ampc_module_cuda(m, u), call) != NULL;
        has |= also && strstr(ampc_module_cuda(m, u), also) != NULL;
    }
    cr_assert(found, "the kernel calls %s", call);
    cr_assert(has, "the kernel's CUDA holds '%s'", also);
    cr_assert_eq(mma, tensor_cores);
    ampc_module_destroy(m);
    ampc_graph_destroy(g);
}

/* B * H * ceil(S / 64) blocks of 64 query rows: 1 * 12 * 2 = 24 leave the GPU idle, so the keys
 * are split over the warps; 8 * 12 * 2 = 192 fill it, with blocks of 4 warps. */
Test(fuse_attention_nvrtc, f16_takes_the_tensor_cores, .timeout = 300) {
    const acase c = {1, 12, 77, 64, BERT, true, FUSES, 0, true}, d = {8, 12, 77, 64, BERT, true, FUSES, 0, true};
    compiles(&c, AMPC_PRECISION_FP16, "attn_mma_split", NULL);
    compiles(&d, AMPC_PRECISION_FP16, "attn_mma", ", 4>(");
}

/* Q, K and V read from one joined projection at their offsets. */
Test(fuse_attention_nvrtc, joined_projections_take_the_tensor_cores, .timeout = 300) {
    const acase c = {8, 12, 128, 64, BERT, true, FUSES, 0, true, true};
    compiles(&c, AMPC_PRECISION_FP16, "attn_mma", NULL);
}

Test(fuse_attention_nvrtc, bf16_head_128_takes_the_tensor_cores, .timeout = 300) {
    const acase c = {1, 2, 40, 128, SDPA, true, FUSES, AMPC_DTYPE_BF16};
    compiles(&c, AMPC_PRECISION_KEEP, "attn_mma_split", NULL);
}

/* The implied causal mask: the CAUSAL flag and no mask argument, on both kernels. */
Test(fuse_attention_nvrtc, implied_causal_mask_compiles, .timeout = 300) {
    const acase c = {8, 16, 256, 64, SDPA, false, CAUSAL, AMPC_DTYPE_F16, .group = 4},
                d = {2, 3, 20, 32, BERT, false, CAUSAL};
    compiles(&c, AMPC_PRECISION_KEEP, "attn_mma", "false, true, 4>(");
    compiles(&d, AMPC_PRECISION_KEEP, "attn_rows", "false, true>(");
}

Test(fuse_attention_nvrtc, f32_and_odd_heads_take_the_generic_kernel, .timeout = 300) {
    const acase c = {2, 3, 20, 64, BERT, true, FUSES}, d = {1, 2, 20, 24, PLAIN, false, FUSES, AMPC_DTYPE_F16};
    compiles(&c, AMPC_PRECISION_KEEP, "attn_rows", NULL);
    compiles(&d, AMPC_PRECISION_KEEP, "attn_rows", NULL);
}

/* ---- GPU against the reference evaluator ----------------------------------------------------- */

static void on_gpu(const acase *c, ampc_precision p) {
    /* the same graph optimised as the compile will: the pattern must fuse, or this test would
     * check the unfused kernels */
    ampc_graph *twin = build(c);
    ampc_pipeline_options po = pipeline(p, true);
    cr_assert_eq(ampc_graph_optimize(twin, &po), AMPC_OK, "%s", ampc_graph_errors(twin));
    cr_assert_eq(t_count_op(twin, AMPC_OP_FUSED_ATTENTION), 1, "%s", ampc_graph_to_text(twin, false));
    ampc_graph_destroy(twin);
    const ampc_dtype t = p == AMPC_PRECISION_BF16 ? AMPC_DTYPE_BF16
                         : p == AMPC_PRECISION_FP16 ? AMPC_DTYPE_F16
                                                    : dtype_of(c);
    double tol = t == AMPC_DTYPE_BF16 ? 3e-2 : t == AMPC_DTYPE_F16 ? 6e-3 : 1e-4;
    /* Biases of up to 1 on the projections grow the scores, and their f16 rounding with them:
     * the reference evaluator's own f16 graph is 0.011 from the f32 one at S = 128. */
    if (c->bias && t != AMPC_DTYPE_F32) tol *= 3;
    const char *what = ampc_dtype_name(t);
    t_gpu_check chk = {.fill = fill, .seed = 11, .rtol = tol, .atol = tol, .pipeline = &po,
                       .what = what};
    t_gpu_vs_reference(build(c), &chk);
}

#define F16 AMPC_DTYPE_F16
#define BF16 AMPC_DTYPE_BF16

/* Grids of 32 blocks of 64 rows or more take attn_mma, smaller ones attn_mma_split (the
 * lowering's SPLIT_BELOW): the cases below cover both. */
Test(fuse_attention_gpu, fp16_s128_bert_masked_full_grid, .timeout = 300) {
    const acase c = {8, 12, 128, 64, BERT, true, FUSES, F16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, bf16_s77_sdpa_masked_full_grid, .timeout = 300) {
    const acase c = {16, 8, 77, 64, SDPA, true, FUSES, BF16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, joined_projections_full_grid_under_fp16, .timeout = 600) {
    const acase c = {8, 12, 128, 64, BERT, true, FUSES, 0, true, true};
    on_gpu(&c, AMPC_PRECISION_FP16);
}

Test(fuse_attention_gpu, fp16_s128_bert_masked, .timeout = 300) {
    const acase c = {4, 12, 128, 64, BERT, true, FUSES, F16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, bf16_s128_bert_masked, .timeout = 300) {
    const acase c = {4, 12, 128, 64, BERT, true, FUSES, BF16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, fp16_s77_sdpa_masked_tail, .timeout = 300) {
    const acase c = {4, 3, 77, 64, SDPA, true, FUSES, F16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, bf16_s77_unmasked, .timeout = 300) {
    const acase c = {3, 4, 77, 64, BERT, false, FUSES, BF16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, fp16_s512_masked, .timeout = 600) {
    const acase c = {4, 2, 512, 64, BERT, true, FUSES, F16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, bf16_s512_unmasked_plain_heads, .timeout = 600) {
    const acase c = {1, 2, 512, 64, PLAIN, false, NO_MERGE, BF16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, fp16_head_128_sdpa, .timeout = 300) {
    const acase c = {4, 2, 77, 128, SDPA, true, FUSES, F16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

/* The whole chain of an f32 model compiled with --precision fp16 (projections included). */
Test(fuse_attention_gpu, projected_f32_model_under_fp16, .timeout = 300) {
    const acase c = {2, 12, 128, 64, BERT, true, FUSES, 0, true};
    on_gpu(&c, AMPC_PRECISION_FP16);
}

/* BERT's layer: Q, K and V projected with biases, joined into one GEMM by fuse-qkv. */
Test(fuse_attention_gpu, joined_projections_with_bias_under_fp16, .timeout = 300) {
    const acase c = {2, 12, 128, 64, BERT, true, FUSES, 0, true, true};
    on_gpu(&c, AMPC_PRECISION_FP16);
}

Test(fuse_attention_gpu, cross_attention_joined_k_v_fp16, .timeout = 300) {
    const acase c = {2, 4, 77, 64, BERT, true, FUSES, 0, true, true, true};
    on_gpu(&c, AMPC_PRECISION_FP16);
}

/* Grouped-query attention as a Llama-style decoder exports it (16 query heads, 4 K/V heads). */
Test(fuse_attention_gpu, fp16_s256_grouped_query, .timeout = 300) {
    const acase c = {2, 16, 256, 64, SDPA, true, FUSES, F16, .group = 4};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, f32_generic_grouped_query, .timeout = 300) {
    const acase c = {2, 6, 40, 32, BERT, true, FUSES, .group = 3};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

/* nn.MultiheadAttention at ViT's sequence length: the tensor-core kernel reads Q, K and V out
 * of the packed projection's rows. */
Test(fuse_attention_gpu, fp16_s197_multihead_attention_packed, .timeout = 300) {
    const acase c = {4, 12, 197, 64, MHA, false, FUSES, F16, true, true};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

/* Swin-T's first stage at batch 2: 128 windows of 49 tokens, 3 heads of 32, the shift mask
 * repeating every 2 windows here. */
Test(fuse_attention_gpu, fp16_s49_windowed_masks, .timeout = 300) {
    const acase c = {128, 3, 49, 32, SDPA, false, WINDOWED, F16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

/* A decoder's causal mask implied by the kernels (fuse-attention drops the constant): the key
 * tiles past a block's last row not computed. A Llama-style shape (grouped K/V, attn_mma), batch
 * 1 (attn_mma_split), bf16 with a tail, and the generic kernel. */
Test(fuse_attention_gpu, fp16_s256_implied_causal_grouped, .timeout = 300) {
    const acase c = {4, 16, 256, 64, SDPA, false, CAUSAL, F16, .group = 4};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, fp16_s256_implied_causal_batch_1_split, .timeout = 300) {
    const acase c = {1, 4, 256, 64, SDPA, false, CAUSAL, F16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, bf16_s77_implied_causal, .timeout = 300) {
    const acase c = {8, 8, 77, 64, BERT, false, CAUSAL, BF16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, f32_generic_implied_causal, .timeout = 300) {
    const acase c = {2, 3, 40, 32, SDPA, false, CAUSAL};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, f32_generic_s77_masked, .timeout = 300) {
    const acase c = {4, 2, 77, 64, SDPA, true, FUSES};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}

Test(fuse_attention_gpu, fp16_odd_head_size_generic, .timeout = 300) {
    const acase c = {4, 2, 33, 24, BERT, true, FUSES, F16};
    on_gpu(&c, AMPC_PRECISION_KEEP);
}
