/*
 * elementwise.c — inference for the elementwise family: unary math, activations with attributes,
 * casts, numpy-broadcast binary and variadic ops, comparisons, logic, bitwise ops, Mod, PRelu,
 * Where and SwiGLU, and the random draws (RandomNormal, RandomUniform, their *Like forms,
 * Bernoulli, Multinomial). The output takes the broadcast shape of the inputs; its dtype follows
 * the first input except where the op says otherwise (comparisons, logic, IsNaN and IsInf give
 * bool, Cast gives its `to`, CastLike input 1's dtype, the random ops their `dtype`).
 */
#include "infer.h"
#include "ir/activation.h"

#include <string.h>

/* Which dtype classes each unary op accepts (ONNX's type constraints). */
static uint32_t unary_classes(ampc_opcode op) {
    switch (op) {
    case AMPC_OP_NEG: return DT_FLOAT | DT_SINT;
    case AMPC_OP_RELU: return DT_FLOAT | DT_SINT;
    case AMPC_OP_ABS: case AMPC_OP_SIGN: case AMPC_OP_SHRINK: return DT_NUM;
    case AMPC_OP_NOT: return DT_BOOL;
    case AMPC_OP_BITWISE_NOT: return DT_INT;
    default: return DT_FLOAT;
    }
}

static ampc_status unary_like(ampc_graph *g, ampc_node *n) {
    if (!ampc_infer_check_dtype(g, n, 0, unary_classes(n->op))) return AMPC_E_DTYPE;
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &n->inputs[0]->shape);
    if (n->op == AMPC_OP_GELU && ampc_gelu_form_of(n) == AMPC_GELU_INVALID)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'approximate' must be the string \"none\" or \"tanh\"");
    return AMPC_OK;
}

ampc_status ampc_infer_unary(ampc_graph *g, ampc_node *n) { return unary_like(g, n); }
ampc_status ampc_infer_unary_float(ampc_graph *g, ampc_node *n) { return unary_like(g, n); }
ampc_status ampc_infer_unary_bool(ampc_graph *g, ampc_node *n) { return unary_like(g, n); }

ampc_status ampc_infer_identity(ampc_graph *g, ampc_node *n) {
    (void)g;
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &n->inputs[0]->shape);
    return AMPC_OK;
}

/* Dropout at inference is the identity; the optional mask output is all true. A training_mode
 * input that is true (or not constant) has no inference meaning. */
ampc_status ampc_infer_dropout(ampc_graph *g, ampc_node *n) {
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (n->n_inputs > 2 && n->inputs[2]) {
        const ampc_value *t = n->inputs[2];
        if (!t->data || t->dtype != AMPC_DTYPE_BOOL || ampc_ir_numel(t) != 1)
            return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                             "input 2 'training_mode' must be a constant bool scalar for inference");
        if (*(const uint8_t *)t->data)
            return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                             "training_mode is true; ampc compiles inference graphs only");
    }
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &n->inputs[0]->shape);
    if (n->n_outputs > 1) ampc_infer_set(n, 1, AMPC_DTYPE_BOOL, &n->inputs[0]->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_clip(ampc_graph *g, ampc_node *n) {
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM)) return AMPC_E_DTYPE;
    for (int32_t i = 1; i < n->n_inputs; i++) {
        const ampc_value *b = n->inputs[i];
        if (!b) continue;
        if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
        if (ampc_ir_numel(b) != 1) {
            char s[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input %d '%s' (%s) must be a scalar, got %s", i,
                             b->name, i == 1 ? "min" : "max", ampc_shape_str(&b->shape, s, sizeof s));
        }
    }
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &n->inputs[0]->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_cast(ampc_graph *g, ampc_node *n) {
    const ampc_attr *a = ampc_ir_attr_find(n, "to");
    if (!a || a->kind != AMPC_ATTR_INT)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "Cast needs an int attribute 'to' (the target dtype)");
    ampc_dtype to = ampc_dtype_from_onnx((int32_t)a->i);
    if (to == AMPC_DTYPE_UNDEFINED)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "Cast to ONNX data type %lld is not supported (supported: float, double, "
                         "float16, bfloat16, integers and bool)",
                         (long long)a->i);
    if (!ampc_infer_check_dtype(g, n, 0, DT_ANY)) return AMPC_E_DTYPE;
    ampc_infer_set(n, 0, to, &n->inputs[0]->shape);
    return AMPC_OK;
}

/* Broadcast shape of all present inputs, with every input of input 0's dtype. */
static ampc_status broadcast_same(ampc_graph *g, ampc_node *n, uint32_t classes, ampc_shape *s) {
    if (!ampc_infer_check_dtype(g, n, 0, classes)) return AMPC_E_DTYPE;
    for (int32_t i = 1; i < n->n_inputs; i++)
        if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
    return ampc_infer_bcast_shapes(g, n, (const ampc_value *const *)n->inputs, n->n_inputs, s)
               ? AMPC_OK
               : AMPC_E_SHAPE;
}

ampc_status ampc_infer_broadcast(ampc_graph *g, ampc_node *n) {
    ampc_shape s;
    ampc_status st = broadcast_same(g, n, DT_NUM, &s);
    if (st == AMPC_OK) ampc_infer_set(n, 0, n->inputs[0]->dtype, &s);
    return st;
}

/* ampc.AllReduce: one input per rank, all of one dtype and shape. */
ampc_status ampc_infer_all_reduce(ampc_graph *g, ampc_node *n) {
    const ampc_value *a = n->inputs[0];
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM)) return AMPC_E_DTYPE;
    for (int32_t i = 1; i < n->n_inputs; i++) {
        if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
        if (!ampc_shape_eq(&n->inputs[i]->shape, &a->shape))
            return AMPC_FAIL(g, n, AMPC_E_SHAPE, "every rank's input must have one shape: input 0 "
                             "'%s' and input %d '%s' differ", a->name, i, n->inputs[i]->name);
    }
    ampc_infer_set(n, 0, a->dtype, &a->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_compare(ampc_graph *g, ampc_node *n) {
    ampc_shape s;
    ampc_status st = broadcast_same(g, n, n->op == AMPC_OP_EQUAL ? DT_ANY : DT_NUM, &s);
    if (st == AMPC_OK) ampc_infer_set(n, 0, AMPC_DTYPE_BOOL, &s);
    return st;
}

ampc_status ampc_infer_logical(ampc_graph *g, ampc_node *n) {
    ampc_shape s;
    ampc_status st = broadcast_same(g, n, DT_BOOL, &s);
    if (st == AMPC_OK) ampc_infer_set(n, 0, AMPC_DTYPE_BOOL, &s);
    return st;
}

/* Pow: the exponent may have its own numeric dtype; the output has the base's. */
ampc_status ampc_infer_pow(ampc_graph *g, ampc_node *n) {
    ampc_shape s;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT | DT_SINT) ||
        !ampc_infer_check_dtype(g, n, 1, DT_NUM))
        return AMPC_E_DTYPE;
    if (!ampc_infer_bcast_shapes(g, n, (const ampc_value *const *)n->inputs, 2, &s))
        return AMPC_E_SHAPE;
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &s);
    return AMPC_OK;
}

ampc_status ampc_infer_where(ampc_graph *g, ampc_node *n) {
    ampc_shape s;
    if (!ampc_infer_check_dtype(g, n, 0, DT_BOOL) || !ampc_infer_same_dtype(g, n, 1, 2))
        return AMPC_E_DTYPE;
    if (!ampc_infer_bcast_shapes(g, n, (const ampc_value *const *)n->inputs, 3, &s))
        return AMPC_E_SHAPE;
    ampc_infer_set(n, 0, n->inputs[1]->dtype, &s);
    return AMPC_OK;
}

/* ---- activations with attributes, IsNaN / IsInf -------------------------------------------- */

/* Reads a float attribute; false when it is mistyped (the reader has already reported it). */
static bool read_float(ampc_graph *g, const ampc_node *n, const char *name, float dflt,
                       float *out) {
    int32_t before = g->diag.n + g->diag.dropped;
    *out = ampc_ir_attr_float(g, n, name, dflt);
    return g->diag.n + g->diag.dropped == before;
}

/* Reads an int attribute that must be 0 or 1. */
static bool read_flag(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                      int64_t *out) {
    int32_t before = g->diag.n + g->diag.dropped;
    *out = ampc_ir_attr_int(g, n, name, dflt);
    if (g->diag.n + g->diag.dropped != before) return false;
    if (*out != 0 && *out != 1) {
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute '%s' must be 0 or 1, got %lld", name,
                  (long long)*out);
        return false;
    }
    return true;
}

/* LeakyRelu, Elu, Selu, Celu, ThresholdedRelu, HardSigmoid, Shrink, Swish: float attributes
 * (alpha, beta, gamma, bias, lambd) whose kinds are checked here; the reference and code
 * generation read them with the ONNX defaults through ampc_act_params_of (ir/activation.h). */
ampc_status ampc_infer_activation(ampc_graph *g, ampc_node *n) {
    static const char *const names[] = {"alpha", "beta", "gamma", "bias", "lambd"};
    if (!ampc_infer_check_dtype(g, n, 0, unary_classes(n->op))) return AMPC_E_DTYPE;
    for (int i = 0; i < AMPC_ARRAY_LEN(names); i++) {
        float v;
        if (!read_float(g, n, names[i], 0, &v)) return AMPC_E_ATTR;
    }
    if (n->op == AMPC_OP_CELU && ampc_act_params_of(n).p == 0) /* the kinds checked above */
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'alpha' must be non-zero (Celu divides by it), got 0");
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &n->inputs[0]->shape);
    return AMPC_OK;
}

/* IsNaN and IsInf: a float input, a bool output of its shape. */
ampc_status ampc_infer_is_class(ampc_graph *g, ampc_node *n) {
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (n->op == AMPC_OP_IS_INF) {
        int64_t f;
        if (!read_flag(g, n, "detect_negative", 1, &f) || !read_flag(g, n, "detect_positive", 1, &f))
            return AMPC_E_ATTR;
    }
    ampc_infer_set(n, 0, AMPC_DTYPE_BOOL, &n->inputs[0]->shape);
    return AMPC_OK;
}

/* ---- Mod, bitwise ops, PRelu, CastLike ----------------------------------------------------- */

/* Mod: numeric inputs of one dtype, broadcast; fmod 0 (integer modulus with the divisor's sign)
 * is defined for integers only, so floats need fmod=1. */
ampc_status ampc_infer_mod(ampc_graph *g, ampc_node *n) {
    ampc_shape s;
    int64_t fmod;
    ampc_status st = broadcast_same(g, n, DT_NUM, &s);
    if (st != AMPC_OK) return st;
    if (!read_flag(g, n, "fmod", 0, &fmod)) return AMPC_E_ATTR;
    if (!fmod && ampc_dtype_is_float(n->inputs[0]->dtype))
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'fmod' must be 1 for floating-point inputs (input 0 '%s' is "
                         "%s), got 0",
                         n->inputs[0]->name, ampc_dtype_name(n->inputs[0]->dtype));
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &s);
    return AMPC_OK;
}

/* BitShift (unsigned integers, `direction` "LEFT" or "RIGHT") and BitwiseAnd/Or/Xor (any
 * integers): both inputs of one dtype, broadcast. */
ampc_status ampc_infer_bitwise(ampc_graph *g, ampc_node *n) {
    ampc_shape s;
    if (n->op == AMPC_OP_BIT_SHIFT) {
        const ampc_value *x = n->inputs[0];
        if (!ampc_dtype_in(x->dtype, DT_UINT))
            return AMPC_FAIL(g, n, AMPC_E_DTYPE,
                             "input 0 '%s' must be an unsigned integer type (u8, u16, u32, u64), "
                             "got %s",
                             x->name, ampc_dtype_name(x->dtype));
        const ampc_attr *a = ampc_ir_attr_find(n, "direction");
        if (!a || a->kind != AMPC_ATTR_STRING || (strcmp(a->s, "LEFT") && strcmp(a->s, "RIGHT")))
            return AMPC_FAIL(g, n, AMPC_E_ATTR,
                             "attribute 'direction' must be the string \"LEFT\" or \"RIGHT\"%s",
                             a ? "" : " (it is required)");
    }
    ampc_status st = broadcast_same(g, n, DT_INT, &s);
    if (st == AMPC_OK) ampc_infer_set(n, 0, n->inputs[0]->dtype, &s);
    return st;
}

/* PRelu: slope (input 1) has X's dtype and broadcasts to X in one direction, so the output has
 * X's shape. */
ampc_status ampc_infer_prelu(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *slope = n->inputs[1];
    if (!ampc_infer_check_dtype(g, n, 0, DT_NUM) || !ampc_infer_same_dtype(g, n, 0, 1))
        return AMPC_E_DTYPE;
    bool ok = slope->shape.rank <= x->shape.rank;
    for (int32_t d = 0; ok && d < slope->shape.rank; d++) {
        int64_t a = slope->shape.dims[d], b = x->shape.dims[x->shape.rank - slope->shape.rank + d];
        ok = a == b || a == 1;
    }
    if (!ok) {
        char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' (slope) must broadcast to the shape of input 0 '%s' %s "
                         "(unidirectional), got %s",
                         slope->name, x->name, ampc_shape_str(&x->shape, a, sizeof a),
                         ampc_shape_str(&slope->shape, b, sizeof b));
    }
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* CastLike: Cast of input 0 to the dtype of input 1 (whose contents are not read). */
ampc_status ampc_infer_cast_like(ampc_graph *g, ampc_node *n) {
    if (!ampc_infer_check_dtype(g, n, 0, DT_ANY) || !ampc_infer_check_dtype(g, n, 1, DT_ANY))
        return AMPC_E_DTYPE;
    ampc_infer_set(n, 0, n->inputs[1]->dtype, &n->inputs[0]->shape);
    return AMPC_OK;
}

/* SwiGLU: A * sigmoid(alpha * A) * B for A and B of one float dtype and one shape (the op does not
 * broadcast). */
ampc_status ampc_infer_swiglu(ampc_graph *g, ampc_node *n) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1];
    float alpha;
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT) || !ampc_infer_same_dtype(g, n, 0, 1))
        return AMPC_E_DTYPE;
    if (!read_float(g, n, "alpha", 1.0f, &alpha)) return AMPC_E_ATTR;
    if (!ampc_shape_eq(&a->shape, &b->shape)) {
        char sa[AMPC_SHAPE_STR_MAX], sb[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "inputs 0 '%s' and 1 '%s' must have one shape (SwiGLU does not "
                         "broadcast), got %s and %s",
                         a->name, b->name, ampc_shape_str(&a->shape, sa, sizeof sa),
                         ampc_shape_str(&b->shape, sb, sizeof sb));
    }
    ampc_infer_set(n, 0, a->dtype, &a->shape);
    return AMPC_OK;
}

/* ---- random draws --------------------------------------------------------------------------- */

/* The element type named by the `dtype` attribute (an ONNX TensorProto code), `dflt` when it is
 * absent; UNDEFINED with a diagnostic when it names no type ampc has. */
static ampc_dtype dtype_attr(ampc_graph *g, const ampc_node *n, ampc_dtype dflt) {
    const ampc_attr *a = ampc_ir_attr_find(n, "dtype");
    if (!a) return dflt;
    ampc_dtype t = a->kind == AMPC_ATTR_INT && a->i == (int32_t)a->i
                       ? ampc_dtype_from_onnx((int32_t)a->i)
                       : AMPC_DTYPE_UNDEFINED;
    if (t == AMPC_DTYPE_UNDEFINED)
        AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'dtype' must be an int naming an ONNX element "
                  "type ampc has (float, double, float16, bfloat16, integers, bool), got %lld",
                  a->kind == AMPC_ATTR_INT ? (long long)a->i : -1LL);
    return t;
}

/* The float attributes of the random ops (mean, scale, low, high, seed) must be floats. */
static bool random_floats_ok(ampc_graph *g, const ampc_node *n) {
    static const char *const names[] = {"mean", "scale", "low", "high", "seed"};
    float v;
    for (int i = 0; i < AMPC_ARRAY_LEN(names); i++)
        if (!read_float(g, n, names[i], 0, &v)) return false;
    return true;
}

/* The drawn dtype must be a float type. */
static ampc_status need_float_out(ampc_graph *g, const ampc_node *n, ampc_dtype t) {
    if (ampc_dtype_is_float(t)) return AMPC_OK;
    return AMPC_FAIL(g, n, AMPC_E_DTYPE,
                     "the output dtype (attribute 'dtype', or else %s) must be a float type, got "
                     "%s",
                     n->n_inputs ? "input 0's" : "f32", ampc_dtype_name(t));
}

/* RandomNormal, RandomUniform: a tensor of the `shape` attribute, dtype `dtype` (default f32). */
ampc_status ampc_infer_random(ampc_graph *g, ampc_node *n) {
    int32_t cnt;
    int32_t before = g->diag.n + g->diag.dropped;
    const int64_t *dims = ampc_ir_attr_ints(g, n, "shape", &cnt);
    if (g->diag.n + g->diag.dropped != before) return AMPC_E_ATTR;
    if (!ampc_ir_attr_find(n, "shape"))
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'shape' is required (the output dims)");
    if (cnt > AMPC_MAX_RANK)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "attribute 'shape' has %d dims; ampc supports ranks up to %d", cnt,
                         AMPC_MAX_RANK);
    ampc_shape y = {cnt, {0}};
    for (int32_t i = 0; i < cnt; i++) {
        if (dims[i] < 0)
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'shape' entry %d is negative: %lld", i,
                             (long long)dims[i]);
        y.dims[i] = dims[i];
    }
    ampc_dtype t = dtype_attr(g, n, AMPC_DTYPE_F32);
    if (t == AMPC_DTYPE_UNDEFINED || !random_floats_ok(g, n)) return AMPC_E_ATTR;
    ampc_status st = need_float_out(g, n, t);
    if (st) return st;
    ampc_infer_set(n, 0, t, &y);
    return AMPC_OK;
}

/* RandomNormalLike, RandomUniformLike: input 0's shape (its contents are not read), dtype
 * `dtype` or else input 0's. */
ampc_status ampc_infer_random_like(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    ampc_dtype t = dtype_attr(g, n, x->dtype);
    if (t == AMPC_DTYPE_UNDEFINED || !random_floats_ok(g, n)) return AMPC_E_ATTR;
    ampc_status st = need_float_out(g, n, t);
    if (st) return st;
    ampc_infer_set(n, 0, t, &x->shape);
    return AMPC_OK;
}

/* Bernoulli: one draw per element of the float probabilities in input 0, dtype `dtype` or else
 * input 0's. */
ampc_status ampc_infer_bernoulli(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    ampc_dtype t = dtype_attr(g, n, x->dtype);
    if (t == AMPC_DTYPE_UNDEFINED || !random_floats_ok(g, n)) return AMPC_E_ATTR;
    ampc_infer_set(n, 0, t, &x->shape);
    return AMPC_OK;
}

/* Multinomial: input 0 [B, K] holds unnormalised log-probabilities of K classes per row; the
 * output [B, sample_size] holds class indices of dtype `dtype` (i32, the default, or i64). */
ampc_status ampc_infer_multinomial(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (x->shape.rank != 2) {
        char s[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must be 2-D [batch, classes], got %s", x->name,
                         ampc_shape_str(&x->shape, s, sizeof s));
    }
    int32_t before = g->diag.n + g->diag.dropped;
    int64_t k = ampc_ir_attr_int(g, n, "sample_size", 1);
    if (g->diag.n + g->diag.dropped != before) return AMPC_E_ATTR;
    if (k < 1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'sample_size' must be positive, got %lld",
                         (long long)k);
    ampc_dtype t = dtype_attr(g, n, AMPC_DTYPE_I32);
    if (t == AMPC_DTYPE_UNDEFINED || !random_floats_ok(g, n)) return AMPC_E_ATTR;
    if (t != AMPC_DTYPE_I32 && t != AMPC_DTYPE_I64)
        return AMPC_FAIL(g, n, AMPC_E_DTYPE, "attribute 'dtype' must name i32 or i64, got %s",
                         ampc_dtype_name(t));
    ampc_shape y = {2, {x->shape.dims[0], k}};
    ampc_infer_set(n, 0, t, &y);
    return AMPC_OK;
}
