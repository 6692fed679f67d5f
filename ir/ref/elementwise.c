/*
 * elementwise.c — reference kernels for the elementwise family. Float math is done in double and
 * rounded once to the output dtype; integer math in 64-bit two's complement, wrapping like numpy
 * (division or modulus by zero gives 0 rather than trapping). Activations are written so that
 * NaN propagates and nothing overflows in an intermediate (Softplus, Sigmoid-based Swish).
 *
 * The random ops draw from a deterministic generator (xoshiro256**, seeded from the node's
 * `seed` attribute, or from its name when there is none), so the reference gives the same values
 * on every run. Those values are not the ones numpy, PyTorch or onnxruntime draw: random outputs
 * are comparable with other frameworks only in distribution, never bit for bit.
 */
#include "ref.h"
#include "ir/activation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- unary ---------------------------------------------------------------------------------- */

/* True for the unsigned integer dtypes. */
static bool is_unsigned(ampc_dtype t) {
    return ampc_dtype_is_int(t) && !ampc_dtype_is_signed(t);
}

static double gelu(double x, bool tanh_approx) {
    if (tanh_approx) return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
}

/* log(1 + e^x) without overflow for large x. */
static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

/* 1 / (1 + e^-x), without overflow for large |x|. */
static double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

/* v limited to [0, 1]; NaN stays NaN (fmin/fmax would drop it). */
static double clamp01(double v) { return v < 0 ? 0.0 : v > 1 ? 1.0 : v; }

static double unary_f(ampc_opcode op, double x, bool flag) {
    switch (op) {
    case AMPC_OP_ABS: return fabs(x);
    case AMPC_OP_NEG: return -x;
    case AMPC_OP_RECIPROCAL: return 1.0 / x;
    case AMPC_OP_SQRT: return sqrt(x);
    case AMPC_OP_EXP: return exp(x);
    case AMPC_OP_LOG: return log(x);
    case AMPC_OP_ERF: return erf(x);
    case AMPC_OP_RELU: return x > 0 ? x : (x == x ? 0.0 : x);
    case AMPC_OP_SIGMOID: return sigmoid(x);
    case AMPC_OP_TANH: return tanh(x);
    case AMPC_OP_GELU: return gelu(x, flag);
    case AMPC_OP_FLOOR: return floor(x);
    case AMPC_OP_CEIL: return ceil(x);
    case AMPC_OP_ACOS: return acos(x);
    case AMPC_OP_ACOSH: return acosh(x);
    case AMPC_OP_ASIN: return asin(x);
    case AMPC_OP_ASINH: return asinh(x);
    case AMPC_OP_ATAN: return atan(x);
    case AMPC_OP_ATANH: return atanh(x);
    case AMPC_OP_COS: return cos(x);
    case AMPC_OP_COSH: return cosh(x);
    case AMPC_OP_SIN: return sin(x);
    case AMPC_OP_SINH: return sinh(x);
    case AMPC_OP_TAN: return tan(x);
    case AMPC_OP_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x; /* 0, -0 and NaN map to themselves */
    case AMPC_OP_ROUND: return nearbyint(x); /* the default rounding mode: half to even */
    case AMPC_OP_SOFTPLUS: return softplus(x);
    case AMPC_OP_SOFTSIGN: return x / (1.0 + fabs(x));
    case AMPC_OP_MISH: return x * tanh(softplus(x));
    case AMPC_OP_HARD_SWISH: return x * clamp01(x / 6.0 + 0.5); /* alpha = 1/6, beta = 0.5 */
    default: AMPC_ASSERT(!"not a float unary op"); return 0;
    }
}

/* Integer unary ops; `u` marks unsigned data, whose loaded value is never negative (u64 above
 * INT64_MAX loads as a negative int64 and must not be treated as one). */
static int64_t unary_i(ampc_opcode op, int64_t x, bool u) {
    switch (op) {
    case AMPC_OP_ABS: return !u && x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case AMPC_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case AMPC_OP_RELU: return x > 0 ? x : 0;
    case AMPC_OP_NOT: return !x;
    case AMPC_OP_SIGN: return u ? x != 0 : (x > 0) - (x < 0);
    case AMPC_OP_BITWISE_NOT: return (int64_t)~(uint64_t)x; /* the store keeps the low bits */
    default: AMPC_ASSERT(!"not an integer unary op"); return 0;
    }
}

ampc_status ampc_ref_unary(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    int64_t count = ampc_shape_numel(&x->shape);
    bool flag = false;
    if (n->op == AMPC_OP_GELU) flag = ampc_gelu_form_of(n) == AMPC_GELU_TANH;
    (void)g;
    if (ampc_dtype_is_float(x->dtype)) {
        for (int64_t i = 0; i < count; i++)
            ampc_ref_store_f64(y->data, y->dtype, i,
                               unary_f(n->op, ampc_ref_load_f64(x->data, x->dtype, i), flag));
    } else {
        const bool u = is_unsigned(x->dtype);
        for (int64_t i = 0; i < count; i++)
            ampc_ref_store_i64(y->data, y->dtype, i,
                               unary_i(n->op, ampc_ref_load_i64(x->data, x->dtype, i), u));
    }
    return AMPC_OK;
}

ampc_status ampc_ref_identity(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    (void)g, (void)n;
    size_t nb = (size_t)ampc_shape_numel(&in[0]->shape) * ampc_dtype_size(in[0]->dtype);
    if (nb) memcpy(out[0]->data, in[0]->data, nb);
    return AMPC_OK;
}

ampc_status ampc_ref_dropout(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    ampc_ref_identity(g, n, in, out);
    if (n->n_outputs > 1) memset(out[1]->data, 1, (size_t)ampc_shape_numel(&out[1]->shape));
    return AMPC_OK;
}

ampc_status ampc_ref_clip(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    const ampc_tensor *lo = n->n_inputs > 1 ? in[1] : NULL, *hi = n->n_inputs > 2 ? in[2] : NULL;
    int64_t count = ampc_shape_numel(&x->shape);
    if (ampc_dtype_is_float(x->dtype)) {
        double l = lo ? ampc_ref_load_f64(lo->data, lo->dtype, 0) : -INFINITY;
        double h = hi ? ampc_ref_load_f64(hi->data, hi->dtype, 0) : INFINITY;
        for (int64_t i = 0; i < count; i++) {
            double v = ampc_ref_load_f64(x->data, x->dtype, i);
            if (v < l) v = l;
            if (v > h) v = h;
            ampc_ref_store_f64(out[0]->data, x->dtype, i, v);
        }
    } else {
        bool u64 = x->dtype == AMPC_DTYPE_U64;
        for (int64_t i = 0; i < count; i++) {
            int64_t v = ampc_ref_load_i64(x->data, x->dtype, i);
            if (lo) {
                int64_t l = ampc_ref_load_i64(lo->data, lo->dtype, 0);
                if (u64 ? (uint64_t)v < (uint64_t)l : v < l) v = l;
            }
            if (hi) {
                int64_t h = ampc_ref_load_i64(hi->data, hi->dtype, 0);
                if (u64 ? (uint64_t)v > (uint64_t)h : v > h) v = h;
            }
            ampc_ref_store_i64(out[0]->data, x->dtype, i, v);
        }
    }
    return AMPC_OK;
}

ampc_status ampc_ref_cast(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    (void)g, (void)n;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    int64_t count = ampc_shape_numel(&x->shape);
    bool via_float = ampc_dtype_is_float(x->dtype) || ampc_dtype_is_float(y->dtype);
    for (int64_t i = 0; i < count; i++) {
        if (via_float) /* truncates toward zero into integers; bool is != 0 */
            ampc_ref_store_f64(y->data, y->dtype, i, ampc_ref_load_f64(x->data, x->dtype, i));
        else /* integers wrap modulo 2^bits, as numpy's astype does */
            ampc_ref_store_i64(y->data, y->dtype, i, ampc_ref_load_i64(x->data, x->dtype, i));
    }
    return AMPC_OK;
}

/* ---- binary --------------------------------------------------------------------------------- */

static double binary_f(ampc_opcode op, double a, double b) {
    switch (op) {
    case AMPC_OP_ADD: case AMPC_OP_SUM: case AMPC_OP_MEAN: case AMPC_OP_ALL_REDUCE: return a + b;
    case AMPC_OP_SUB: return a - b;
    case AMPC_OP_MUL: return a * b;
    case AMPC_OP_DIV: return a / b;
    case AMPC_OP_POW: return pow(a, b);
    case AMPC_OP_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case AMPC_OP_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case AMPC_OP_EQUAL: return a == b;
    case AMPC_OP_LESS: return a < b;
    case AMPC_OP_LESS_EQUAL: return a <= b;
    case AMPC_OP_GREATER: return a > b;
    case AMPC_OP_GREATER_EQUAL: return a >= b;
    default: AMPC_ASSERT(!"not a float binary op"); return 0;
    }
}

/* Integer binary ops; `u` selects unsigned 64-bit comparison and division. */
static int64_t binary_i(ampc_opcode op, int64_t a, int64_t b, bool u) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case AMPC_OP_ADD: case AMPC_OP_SUM: case AMPC_OP_MEAN: case AMPC_OP_ALL_REDUCE:
        return (int64_t)(ua + ub);
    case AMPC_OP_SUB: return (int64_t)(ua - ub);
    case AMPC_OP_MUL: return (int64_t)(ua * ub);
    case AMPC_OP_DIV:
        if (b == 0) return 0;
        if (u) return (int64_t)(ua / ub);
        if (a == INT64_MIN && b == -1) return a;
        return a / b;
    case AMPC_OP_MAX: return (u ? ua > ub : a > b) ? a : b;
    case AMPC_OP_MIN: return (u ? ua < ub : a < b) ? a : b;
    case AMPC_OP_EQUAL: return a == b;
    case AMPC_OP_LESS: return u ? ua < ub : a < b;
    case AMPC_OP_LESS_EQUAL: return u ? ua <= ub : a <= b;
    case AMPC_OP_GREATER: return u ? ua > ub : a > b;
    case AMPC_OP_GREATER_EQUAL: return u ? ua >= ub : a >= b;
    case AMPC_OP_AND: return a && b;
    case AMPC_OP_OR: return a || b;
    case AMPC_OP_XOR: return !a != !b;
    default: AMPC_ASSERT(!"not an integer binary op"); return 0;
    }
}

/* out = op(a, b) with broadcasting; a and b share a dtype except for Pow's exponent. */
static void binary_loop(ampc_opcode op, const ampc_tensor *a, const ampc_tensor *b, ampc_tensor *y) {
    const ampc_shape *shapes[2] = {&a->shape, &b->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &y->shape, shapes, 2);
    int64_t count = ampc_shape_numel(&y->shape);
    bool fl = ampc_dtype_is_float(a->dtype) || (op == AMPC_OP_POW);
    bool u = a->dtype == AMPC_DTYPE_U64;
    for (int64_t i = 0; i < count; i++, ampc_bcast_iter_next(&it)) {
        if (fl) {
            double r = binary_f(op, ampc_ref_load_f64(a->data, a->dtype, it.off[0]),
                                ampc_ref_load_f64(b->data, b->dtype, it.off[1]));
            /* Integer Pow is integer arithmetic: the power saturates into int64 (u64 into u64)
             * and wraps to a narrower type, as Mul's product does (a store of the double would
             * saturate to the narrow type's range instead). */
            if (!ampc_dtype_is_float(y->dtype) && y->dtype != AMPC_DTYPE_U64 &&
                y->dtype != AMPC_DTYPE_BOOL)
                ampc_ref_store_i64(y->data, y->dtype, i, ampc_ref_sat_int(r, AMPC_DTYPE_I64));
            else ampc_ref_store_f64(y->data, y->dtype, i, r);
        } else {
            int64_t r = binary_i(op, ampc_ref_load_i64(a->data, a->dtype, it.off[0]),
                                 ampc_ref_load_i64(b->data, b->dtype, it.off[1]), u);
            ampc_ref_store_i64(y->data, y->dtype, i, r);
        }
    }
}

ampc_status ampc_ref_binary(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    (void)g;
    binary_loop(n->op, in[0], in[1], out[0]);
    return AMPC_OK;
}

/* Max, Min, Sum, Mean over any number of inputs: folded left to right into a wide accumulator of
 * the output shape, rounded once at the end. */
ampc_status ampc_ref_variadic(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    ampc_tensor *y = out[0];
    int64_t count = ampc_shape_numel(&y->shape);
    bool fl = ampc_dtype_is_float(y->dtype), u = y->dtype == AMPC_DTYPE_U64;
    size_t esz = fl ? sizeof(double) : sizeof(int64_t);
    void *acc = calloc((size_t)(count ? count : 1), esz);
    if (!acc) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    for (int32_t k = 0; k < n->n_inputs; k++) {
        const ampc_shape *shapes[1] = {&in[k]->shape};
        ampc_bcast_iter it;
        ampc_bcast_iter_init(&it, &y->shape, shapes, 1);
        for (int64_t i = 0; i < count; i++, ampc_bcast_iter_next(&it)) {
            if (fl) {
                double v = ampc_ref_load_f64(in[k]->data, in[k]->dtype, it.off[0]), *a = acc;
                a[i] = k ? binary_f(n->op, a[i], v) : v;
            } else {
                int64_t v = ampc_ref_load_i64(in[k]->data, in[k]->dtype, it.off[0]), *a = acc;
                a[i] = k ? binary_i(n->op, a[i], v, u) : v;
            }
        }
    }
    for (int64_t i = 0; i < count; i++) {
        if (fl) {
            double v = ((double *)acc)[i];
            ampc_ref_store_f64(y->data, y->dtype, i, n->op == AMPC_OP_MEAN ? v / n->n_inputs : v);
        } else {
            int64_t v = ((int64_t *)acc)[i];
            ampc_ref_store_i64(y->data, y->dtype, i, n->op == AMPC_OP_MEAN ? v / n->n_inputs : v);
        }
    }
    free(acc);
    return AMPC_OK;
}

ampc_status ampc_ref_where(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    (void)g, (void)n;
    const ampc_shape *shapes[3] = {&in[0]->shape, &in[1]->shape, &in[2]->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &out[0]->shape, shapes, 3);
    int64_t count = ampc_shape_numel(&out[0]->shape);
    size_t esz = ampc_dtype_size(out[0]->dtype);
    const uint8_t *c = in[0]->data;
    for (int64_t i = 0; i < count; i++, ampc_bcast_iter_next(&it)) {
        bool pick = c[it.off[0]] != 0;
        ampc_ref_copy_elem(out[0]->data, i, pick ? in[1]->data : in[2]->data,
                           pick ? it.off[1] : it.off[2], esz);
    }
    return AMPC_OK;
}

/* ---- activations with attributes, IsNaN / IsInf -------------------------------------------- */

static double act_f(ampc_opcode op, double x, ampc_act_params a) {
    switch (op) {
    case AMPC_OP_HARD_SIGMOID: return clamp01(a.p * x + a.q);
    case AMPC_OP_LEAKY_RELU: return x < 0 ? a.p * x : x;
    case AMPC_OP_ELU: return x < 0 ? a.p * expm1(x) : x;
    case AMPC_OP_SELU: return x <= 0 ? a.q * a.p * expm1(x) : a.q * x;
    /* max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): for x > 0 the second term is 0 whatever
     * alpha's sign, for x <= 0 the first is; NaN takes the second branch and stays NaN. */
    case AMPC_OP_CELU: return x > 0 ? x : a.p * expm1(x / a.p);
    case AMPC_OP_THRESHOLDED_RELU: return x > a.p ? x : 0.0;
    case AMPC_OP_SHRINK: return x < -a.p ? x + a.q : x > a.p ? x - a.q : 0.0;
    case AMPC_OP_SWISH: return x * sigmoid(a.p * x);
    default: AMPC_ASSERT(!"not an activation"); return 0;
    }
}

/* The activations with attributes. All are float-only except Shrink, whose integer form computes
 * in double (the bias is a float) and truncates on store, as ONNX's astype does. */
ampc_status ampc_ref_activation(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    const ampc_act_params a = ampc_act_params_of(n);
    const int64_t count = ampc_shape_numel(&x->shape);
    for (int64_t i = 0; i < count; i++)
        ampc_ref_store_f64(y->data, y->dtype, i,
                           act_f(n->op, ampc_ref_load_f64(x->data, x->dtype, i), a));
    return AMPC_OK;
}

/* IsNaN, and IsInf with its detect_negative / detect_positive flags (default 1). */
ampc_status ampc_ref_is_class(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    uint8_t *y = out[0]->data;
    const ampc_elementwise_flags ef = ampc_elementwise_flags_of(n);
    const bool neg = ef.detect_negative, pos = ef.detect_positive;
    const int64_t count = ampc_shape_numel(&x->shape);
    for (int64_t i = 0; i < count; i++) {
        double v = ampc_ref_load_f64(x->data, x->dtype, i);
        y[i] = n->op == AMPC_OP_IS_NAN ? isnan(v) != 0
                                       : isinf(v) && (v > 0 ? pos : neg);
    }
    return AMPC_OK;
}

/* ---- Mod, bitwise ops, PRelu ---------------------------------------------------------------- */

/* Integer remainder. fmod: truncated (C's %, the dividend's sign); otherwise floored (numpy's
 * mod, the divisor's sign). `u` divides as unsigned 64-bit. A zero divisor gives 0. */
static int64_t mod_i(int64_t a, int64_t b, bool fmod, bool u) {
    if (b == 0) return 0;
    if (u) return (int64_t)((uint64_t)a % (uint64_t)b);
    if (b == -1) return 0; /* INT64_MIN % -1 traps in C */
    int64_t r = a % b;
    if (!fmod && r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
}

ampc_status ampc_ref_mod(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *a = in[0], *b = in[1];
    ampc_tensor *y = out[0];
    const bool use_fmod = ampc_elementwise_flags_of(n).fmod;
    const bool fl = ampc_dtype_is_float(a->dtype), u = is_unsigned(a->dtype);
    const ampc_shape *shapes[2] = {&a->shape, &b->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &y->shape, shapes, 2);
    const int64_t count = ampc_shape_numel(&y->shape);
    for (int64_t i = 0; i < count; i++, ampc_bcast_iter_next(&it)) {
        if (fl) /* floats require fmod=1 (inference checks): C's fmod, exact */
            ampc_ref_store_f64(y->data, y->dtype, i,
                               fmod(ampc_ref_load_f64(a->data, a->dtype, it.off[0]),
                                    ampc_ref_load_f64(b->data, b->dtype, it.off[1])));
        else
            ampc_ref_store_i64(y->data, y->dtype, i,
                               mod_i(ampc_ref_load_i64(a->data, a->dtype, it.off[0]),
                                     ampc_ref_load_i64(b->data, b->dtype, it.off[1]), use_fmod, u));
    }
    return AMPC_OK;
}

/* BitShift and BitwiseAnd/Or/Xor on the 64-bit patterns; the store keeps the dtype's low bits.
 * Shifting by the bit width or more gives 0 (every bit shifted out), where C would be undefined. */
ampc_status ampc_ref_bitwise(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *a = in[0], *b = in[1];
    ampc_tensor *y = out[0];
    const uint64_t bits = 8 * (uint64_t)ampc_dtype_size(a->dtype);
    const bool left = n->op == AMPC_OP_BIT_SHIFT && ampc_elementwise_flags_of(n).shift_left;
    const ampc_shape *shapes[2] = {&a->shape, &b->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &y->shape, shapes, 2);
    const int64_t count = ampc_shape_numel(&y->shape);
    for (int64_t i = 0; i < count; i++, ampc_bcast_iter_next(&it)) {
        uint64_t x = (uint64_t)ampc_ref_load_i64(a->data, a->dtype, it.off[0]);
        uint64_t s = (uint64_t)ampc_ref_load_i64(b->data, b->dtype, it.off[1]), r;
        switch (n->op) {
        case AMPC_OP_BIT_SHIFT: r = s >= bits ? 0 : left ? x << s : x >> s; break;
        case AMPC_OP_BITWISE_AND: r = x & s; break;
        case AMPC_OP_BITWISE_OR: r = x | s; break;
        case AMPC_OP_BITWISE_XOR: r = x ^ s; break;
        default: AMPC_ASSERT(!"not a bitwise op"); r = 0; break;
        }
        ampc_ref_store_i64(y->data, y->dtype, i, (int64_t)r);
    }
    return AMPC_OK;
}

/* PRelu: x < 0 ? slope * x : x, slope broadcast to X's shape. */
ampc_status ampc_ref_prelu(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                           ampc_tensor *const *out) {
    (void)g, (void)n;
    const ampc_tensor *x = in[0], *slope = in[1];
    ampc_tensor *y = out[0];
    const bool fl = ampc_dtype_is_float(x->dtype), u = is_unsigned(x->dtype);
    const ampc_shape *shapes[2] = {&x->shape, &slope->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &y->shape, shapes, 2);
    const int64_t count = ampc_shape_numel(&y->shape);
    for (int64_t i = 0; i < count; i++, ampc_bcast_iter_next(&it)) {
        if (fl) {
            double v = ampc_ref_load_f64(x->data, x->dtype, it.off[0]);
            if (v < 0) v *= ampc_ref_load_f64(slope->data, slope->dtype, it.off[1]);
            ampc_ref_store_f64(y->data, y->dtype, i, v);
        } else {
            int64_t v = ampc_ref_load_i64(x->data, x->dtype, it.off[0]);
            if (!u && v < 0) /* wraps like numpy's integer multiply */
                v = (int64_t)((uint64_t)v *
                              (uint64_t)ampc_ref_load_i64(slope->data, slope->dtype, it.off[1]));
            ampc_ref_store_i64(y->data, y->dtype, i, v);
        }
    }
    return AMPC_OK;
}

/* ---- SwiGLU --------------------------------------------------------------------------------- */

ampc_status ampc_ref_swiglu(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *a = in[0], *b = in[1];
    ampc_tensor *y = out[0];
    const double alpha = ampc_act_params_of(n).p;
    const int64_t count = ampc_shape_numel(&a->shape);
    for (int64_t i = 0; i < count; i++) {
        double av = ampc_ref_load_f64(a->data, a->dtype, i);
        ampc_ref_store_f64(y->data, y->dtype, i,
                           av * sigmoid(alpha * av) * ampc_ref_load_f64(b->data, b->dtype, i));
    }
    return AMPC_OK;
}

/* ---- random draws --------------------------------------------------------------------------- */

/* xoshiro256** (Blackman and Vigna), seeded through splitmix64. */
typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return res;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Standard normal by Box-Muller (one value per pair of uniforms). */
static double rng_normal(rng *r) {
    double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r); /* u1 in (0, 1]: log is finite */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The generator of node n: from the bits of its float `seed` attribute, or, without one, from a
 * hash of the node's name, so that two unseeded random nodes of one graph draw differently. */
static rng rng_of(const ampc_node *n) {
    const ampc_random_params p = ampc_random_params_of(n);
    uint64_t x = 0xcbf29ce484222325ull; /* FNV-1a */
    if (p.seeded) {
        uint32_t bits;
        memcpy(&bits, &p.seed, sizeof bits);
        x = bits;
    } else {
        for (const char *c = n->name; *c; c++) x = (x ^ (unsigned char)*c) * 0x100000001b3ull;
    }
    rng r;
    for (int i = 0; i < 4; i++) r.s[i] = splitmix64(&x);
    return r;
}

/* Multinomial: for each row, sample_size class indices drawn from softmax(row) by inverting the
 * cumulative distribution (binary search). */
static ampc_status multinomial(ampc_graph *g, const ampc_node *n, const ampc_tensor *x,
                               ampc_tensor *y, rng *r) {
    int64_t B = x->shape.dims[0], K = x->shape.dims[1], S = y->shape.dims[1];
    double *cdf = malloc((size_t)AMPC_MAX(K, 1) * sizeof *cdf);
    if (!cdf) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory");
    for (int64_t b = 0; b < B; b++) {
        double mx = -INFINITY, total = 0;
        for (int64_t k = 0; k < K; k++)
            mx = fmax(mx, ampc_ref_load_f64(x->data, x->dtype, b * K + k));
        for (int64_t k = 0; k < K; k++) {
            total += exp(ampc_ref_load_f64(x->data, x->dtype, b * K + k) - mx);
            cdf[k] = total;
        }
        if (!(total > 0) || !isfinite(total)) {
            free(cdf);
            return AMPC_FAIL(g, n, AMPC_E_EVAL,
                             "row %lld of input 0 '%s' gives no finite probability distribution "
                             "(every log-probability is -inf or NaN, or there are no classes)",
                             (long long)b, n->inputs[0]->name);
        }
        for (int64_t s0 = 0; s0 < S; s0++) {
            double u = rng_uniform(r) * total;
            int64_t lo = 0, hi = K - 1; /* the first k with cdf[k] > u */
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (cdf[mid] > u) hi = mid;
                else lo = mid + 1;
            }
            ampc_ref_store_i64(y->data, y->dtype, b * S + s0, lo);
        }
    }
    free(cdf);
    return AMPC_OK;
}

/* RandomNormal(Like): mean + scale * N(0, 1); RandomUniform(Like): low + (high - low) * U[0, 1);
 * Bernoulli: 1 where U[0, 1) < p (p must lie in [0, 1]); Multinomial: see above. Elements are
 * drawn in row-major order. */
ampc_status ampc_ref_random(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                            ampc_tensor *const *out) {
    ampc_tensor *y = out[0];
    rng r = rng_of(n);
    const ampc_random_params p = ampc_random_params_of(n);
    const int64_t count = ampc_shape_numel(&y->shape);
    switch (n->op) {
    case AMPC_OP_MULTINOMIAL: return multinomial(g, n, in[0], y, &r);
    case AMPC_OP_BERNOULLI:
        for (int64_t i = 0; i < count; i++) {
            double p = ampc_ref_load_f64(in[0]->data, in[0]->dtype, i);
            if (!(p >= 0 && p <= 1))
                return AMPC_FAIL(g, n, AMPC_E_EVAL,
                                 "element %lld of input 0 '%s' is %g; a probability must lie in "
                                 "[0, 1]",
                                 (long long)i, n->inputs[0]->name, p);
            ampc_ref_store_f64(y->data, y->dtype, i, rng_uniform(&r) < p ? 1.0 : 0.0);
        }
        return AMPC_OK;
    case AMPC_OP_RANDOM_NORMAL:
    case AMPC_OP_RANDOM_NORMAL_LIKE: {
        for (int64_t i = 0; i < count; i++)
            ampc_ref_store_f64(y->data, y->dtype, i, p.mean + p.scale * rng_normal(&r));
        return AMPC_OK;
    }
    default: { /* RandomUniform(Like) */
        for (int64_t i = 0; i < count; i++)
            ampc_ref_store_f64(y->data, y->dtype, i, p.low + (p.high - p.low) * rng_uniform(&r));
        return AMPC_OK;
    }
    }
}
