/*
 * attention.h — the attention family's parameters, decoded once: ampc.FusedAttention's and where
 * it writes its output (for inference, infer/attention.c, which reports malformed attributes; the
 * reference evaluator, ref/attention.c; code generation, codegen/lower_attention.c, which bakes
 * them into its kernel; and the passes that build and edit the node), ONNX Attention's and
 * RotaryEmbedding's (for the reference evaluator).
 *
 * The result Y [B, H, Sq, Dv] is stored as Transpose(Y, y_perm) and the node's output is those
 * bytes with the shape y_shape: y_perm defaults to (0, 1, 2, 3), y_shape to the transposed dims.
 * merge_heads = 1 (the heads merged back, BERT's [B, Sq, H*Dv]) is y_perm (0, 2, 1, 3) with
 * y_shape [B, Sq, H*Dv]; it excludes the other two.
 */
#ifndef AMPC_IR_ATTENTION_H
#define AMPC_IR_ATTENTION_H

#include "ir/ir.h"

/* For node n with dims [B, H, Sq, Sk, D, Dv]: ys, the element steps of Y's (b, h, s, d) in the
 * output, and *y, the output's shape. NULL, or what is malformed (a static string naming the
 * attribute and the rule it breaks). */
const char *ampc_attention_y_layout(const ampc_node *n, const int64_t dims[6], int64_t ys[4],
                                    ampc_shape *y);

/* Everything an ampc.FusedAttention node says, decoded once (inference has checked it): Y[b, h,
 * i, :] = softmax(scale * Q[b, h, i, :] K[b, h / group]^T + mask[b % mp, h, i, :]) V[b, h / group],
 * each operand read through its element steps from its offset. With causal the mask is not an
 * input but implied: 0 at keys j <= i + causal_off, -inf past them (passes/fuse_attention.c
 * finds it in a constant mask), so kernels skip the keys no row of theirs sees without reading
 * a mask. */
typedef struct ampc_attention_params {
    int64_t B, H, Sq, Sk, D, Dv; /* dims */
    int64_t qs[4], ks[4], vs[4]; /* the element steps of (b, h, s, d) in Q, K and V */
    int64_t off[3];              /* offsets: where Q, K and V start in their inputs, elements */
    int64_t ms[4];  /* the mask's, broadcast right-aligned to [B, H, Sq, Sk] (unit dims step 0);
                       zeros without a mask */
    int64_t ys[4];  /* Y's in the output (ampc_attention_y_layout) */
    ampc_shape y;   /* the output's shape */
    int64_t group;  /* kv_group: the query heads a K/V head serves (1) */
    int64_t mp;     /* mask_period: batch b reads the mask's entry b % mp (B) */
    double scale;   /* 1 when absent */
    bool safe;      /* a row with no finite score gives 0 (else NaN) */
    bool causal;    /* the mask is implied (no mask input): 0 for key j <= i + causal_off, */
    int64_t causal_off; /* -inf past it (a causal mask, bottom-right aligned: Sk - Sq) */
} ampc_attention_params;

void ampc_attention_params_of(const ampc_node *n, ampc_attention_params *p);

/* An ampc.FusedAttention node's attributes as a pass builds or edits them: read with
 * ampc_attention_form_of, written with ampc_attention_form_attrs (a new node's attribute list) or
 * ampc_attention_form_set (an existing node's). Only what differs from the defaults is written. */
typedef struct ampc_attention_form {
    int64_t dims[6];             /* B, H, Sq, Sk, D, Dv */
    int64_t qs[4], ks[4], vs[4]; /* q_strides, k_strides, v_strides */
    double scale;
    bool safe, merge_heads;
    int64_t off[3];              /* offsets (0, 0, 0) */
    int64_t group;               /* kv_group (1) */
    bool has_perm;               /* y_perm given (merge_heads excludes it) */
    int64_t y_perm[4];
    int32_t y_rank;              /* y_shape's rank, 0 when not given */
    int64_t y_shape[AMPC_MAX_RANK];
    int64_t mask_period;         /* 0 when not given (B) */
    bool causal;                 /* causal (0) and causal_offset (0): the implied mask */
    int64_t causal_off;
} ampc_attention_form;

/* False when n lacks dims or a stride attribute of 4 entries (a node inference has accepted
 * always has them). */
bool ampc_attention_form_of(const ampc_node *n, ampc_attention_form *f);
/* The attributes of form f in the graph's arena: *attrs, *n of them. AMPC_E_OOM. */
ampc_status ampc_attention_form_attrs(ampc_graph *g, const ampc_attention_form *f, ampc_attr **attrs,
                                      int32_t *n);
/* Replaces node n's attributes of the form with form f's (the others, a rank, stay). AMPC_E_OOM. */
ampc_status ampc_attention_form_set(ampc_graph *g, ampc_node *n, const ampc_attention_form *f);

/* ONNX Attention's attributes (inference has checked them). */
typedef struct ampc_onnx_attention {
    int64_t q_heads, kv_heads;   /* q_num_heads, kv_num_heads: 0 when not given */
    int64_t qk_mode;             /* qk_matmul_output_mode (0) */
    bool causal;                 /* is_causal */
    int64_t left, right;         /* left_window_size, right_window_size (-1: unbounded) */
    bool has_scale;              /* scale given; else 1 / sqrt(head size) */
    double scale;
    double softcap;              /* 0: none */
    int32_t softmax_precision;   /* an ONNX data type; 0 when not given (the inputs' type) */
} ampc_onnx_attention;

ampc_onnx_attention ampc_onnx_attention_of(const ampc_node *n);

/* RotaryEmbedding's attributes. */
typedef struct ampc_rotary_params {
    bool interleaved;
    int64_t heads;               /* num_heads, for 3-D input (1 when not given) */
    int64_t rot_dim;             /* rotary_embedding_dim: 0 = the whole head */
} ampc_rotary_params;

ampc_rotary_params ampc_rotary_params_of(const ampc_node *n);

#endif
