/*
 * activation.h — the parameters of the parameterised activations (HardSigmoid, LeakyRelu, Elu,
 * Selu, Celu, ThresholdedRelu, Shrink, Swish, SwiGLU), Gelu's form, ampc.FusedMatMul's epilogue
 * and Gemm's, decoded by one function each for the reference evaluator (ref/elementwise.c,
 * ref/contract.c), code generation (codegen/lower_elementwise.c, codegen/lower_contract.c) and
 * the passes that rewrite Gemm and fused products. Inference checks the attributes' kinds and
 * values; these only decode them, with the ONNX defaults where an attribute is absent.
 */
#ifndef AMPC_IR_ACTIVATION_H
#define AMPC_IR_ACTIVATION_H

#include "ir/ir.h"

/* An activation's two parameters, each the float32 attribute (or default) widened to double, as
 * a runtime reading the attribute sees it:
 *   HardSigmoid     p alpha (0.2), q beta (0.5):      clamp(p x + q, 0, 1)
 *   LeakyRelu       p alpha (0.01)
 *   Selu            p alpha (1.6732632...), q gamma (1.0507010...)
 *   Shrink          p lambd (0.5), q bias (0)
 *   Elu, Celu, ThresholdedRelu, Swish, SwiGLU: p alpha (1), q 0 */
typedef struct ampc_act_params {
    double p, q;
} ampc_act_params;

ampc_act_params ampc_act_params_of(const ampc_node *n);

/* Gelu's form (its `approximate` attribute): the erf form ("none" or absent), the tanh form
 * ("tanh"), or anything else, which inference refuses. */
typedef enum ampc_gelu_form { AMPC_GELU_ERF, AMPC_GELU_TANH, AMPC_GELU_INVALID } ampc_gelu_form;

ampc_gelu_form ampc_gelu_form_of(const ampc_node *n);
/* The attribute that gives a Gelu node form f (AMPC_GELU_ERF or AMPC_GELU_TANH). */
ampc_attr ampc_gelu_form_attr(ampc_gelu_form f);

/* ampc.FusedMatMul's epilogue activation (its `activation`: absent, "Relu", "Gelu", "GeluTanh"). */
typedef enum ampc_fused_act {
    AMPC_ACT_NONE,
    AMPC_ACT_RELU,
    AMPC_ACT_GELU,     /* the erf form */
    AMPC_ACT_GELU_TANH /* GELU's tanh form */
} ampc_fused_act;

ampc_fused_act ampc_fused_act_of(const ampc_node *n);
/* The attribute that gives an ampc.FusedMatMul (or, AMPC_ACT_RELU, an ampc.FusedConv) activation
 * a (not AMPC_ACT_NONE, which is no attribute). */
ampc_attr ampc_fused_act_attr(ampc_fused_act a);

/* The flags of the other elementwise ops: IsInf's detect_negative and detect_positive (1, 1),
 * Mod's fmod (0: integers take the divisor's sign) and BitShift's direction ("LEFT" or
 * "RIGHT"). */
typedef struct ampc_elementwise_flags {
    bool detect_negative, detect_positive;
    bool fmod;
    bool shift_left;
} ampc_elementwise_flags;

ampc_elementwise_flags ampc_elementwise_flags_of(const ampc_node *n);

/* Gemm's Y = alpha * A' B' + beta * C with A' = A^T when ta, B' = B^T when tb (transA, transB;
 * alpha and beta 1 when absent). Any other node: the identity (no transpose, 1 and 1). */
typedef struct ampc_gemm_params {
    bool ta, tb;
    float alpha, beta;
} ampc_gemm_params;

ampc_gemm_params ampc_gemm_params_of(const ampc_node *n);

/* Cast node n's target type `to`: when it is `from`, it becomes `to` and true is returned (what
 * the precision pass does to a Cast to f32); false otherwise, n unchanged. */
bool ampc_cast_retarget(ampc_node *n, ampc_dtype from, ampc_dtype to);
/* The attribute of a Cast to `to`. */
ampc_attr ampc_cast_to_attr(ampc_dtype to);

/* The random ops' draws: RandomNormal(Like) gives mean + scale * N(0, 1) (0 and 1 when absent),
 * RandomUniform(Like) low + (high - low) * U[0, 1) (0 and 1); Bernoulli and Multinomial use the
 * seed alone. `seeded`: the float attribute seed was given (its value in seed). */
typedef struct ampc_random_params {
    double mean, scale, low, high;
    bool seeded;
    float seed;
} ampc_random_params;

ampc_random_params ampc_random_params_of(const ampc_node *n);

#endif
