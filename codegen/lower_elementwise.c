/*
 * lower_elementwise.c — generated kernels for the elementwise family (LOWER_ELEMENTWISE).
 *
 * One thread per output element in a grid-stride loop. Each input is loaded at its broadcast
 * offset (strides baked in) into the compute type of its dtype (float for f32/f16/bf16, double
 * for f64, 64-bit for integers); the op is one C expression over those locals (a, b, c, or
 * x0..xN for variadic ops), taken from the table below with attributes baked in as literals;
 * the result is converted to the output dtype on store. The expressions mirror the reference
 * kernels (ir/ref/elementwise.c), edge cases included (see kernels/elementwise.cuh).
 */
#include "codegen.h"
#include "ir/activation.h"

#include "ir/ref/ref.h"

#include <math.h>
#include <string.h>

/* A float attribute or its default. */
/* A literal of the compute type: "((float)0.20000000298023224)"; NaN and the infinities as their
 * bits (ampc_cg_put_typed). */
static void lit(ampc_strbuf *sb, const char *ct, double v) { ampc_cg_put_typed(sb, ct, v); }

/* Writes the expression of a unary float op over `a` (compute type ct); false when the op is
 * not one. */
static bool unary_float_expr(const ampc_node *n, const char *ct, ampc_strbuf *e) {
    static const struct {
        ampc_opcode op;
        const char *fn;
    } calls[] = {
        {AMPC_OP_SQRT, "m_sqrt"},   {AMPC_OP_EXP, "m_exp"},     {AMPC_OP_LOG, "m_log"},
        {AMPC_OP_ERF, "m_erf"},     {AMPC_OP_TANH, "m_tanh"},   {AMPC_OP_FLOOR, "m_floor"},
        {AMPC_OP_CEIL, "m_ceil"},   {AMPC_OP_ROUND, "m_rint"},  {AMPC_OP_SIN, "m_sin"},
        {AMPC_OP_COS, "m_cos"},     {AMPC_OP_TAN, "m_tan"},     {AMPC_OP_ASIN, "m_asin"},
        {AMPC_OP_ACOS, "m_acos"},   {AMPC_OP_ATAN, "m_atan"},   {AMPC_OP_SINH, "m_sinh"},
        {AMPC_OP_COSH, "m_cosh"},   {AMPC_OP_ASINH, "m_asinh"}, {AMPC_OP_ACOSH, "m_acosh"},
        {AMPC_OP_ATANH, "m_atanh"}, {AMPC_OP_SIGMOID, "sigmoid"}, {AMPC_OP_SOFTPLUS, "softplus"},
        {AMPC_OP_SIGN, "sign"},
    };
    for (int i = 0; i < AMPC_ARRAY_LEN(calls); i++)
        if (calls[i].op == n->op) {
            ampc_sb_printf(e, "ampc::%s(a)", calls[i].fn);
            return true;
        }
    switch (n->op) {
    case AMPC_OP_ABS: ampc_sb_puts(e, "ampc::m_abs(a)"); return true;
    case AMPC_OP_NEG: ampc_sb_puts(e, "(-a)"); return true;
    case AMPC_OP_RECIPROCAL: ampc_sb_printf(e, "((%s)1 / a)", ct); return true;
    case AMPC_OP_RELU: ampc_sb_printf(e, "(a > (%s)0 ? a : (a == a ? (%s)0 : a))", ct, ct); return true;
    case AMPC_OP_GELU:
        ampc_sb_printf(e, "ampc::%s(a)",
                       ampc_gelu_form_of(n) == AMPC_GELU_TANH ? "gelu_tanh" : "gelu_erf");
        return true;
    case AMPC_OP_SOFTSIGN: ampc_sb_printf(e, "(a / ((%s)1 + ampc::m_abs(a)))", ct); return true;
    case AMPC_OP_MISH: ampc_sb_puts(e, "(a * ampc::m_tanh(ampc::softplus(a)))"); return true;
    case AMPC_OP_HARD_SWISH:
        ampc_sb_printf(e, "(a * fmin(fmax(a / (%s)6 + (%s)0.5, (%s)0), (%s)1))", ct, ct, ct, ct);
        return true;
    case AMPC_OP_HARD_SIGMOID:
        ampc_sb_puts(e, "fmin(fmax(");
        lit(e, ct, ampc_act_params_of(n).p);
        ampc_sb_puts(e, " * a + ");
        lit(e, ct, ampc_act_params_of(n).q);
        ampc_sb_printf(e, ", (%s)0), (%s)1)", ct, ct);
        return true;
    case AMPC_OP_LEAKY_RELU:
        ampc_sb_puts(e, "(a < 0 ? ");
        lit(e, ct, ampc_act_params_of(n).p);
        ampc_sb_puts(e, " * a : a)");
        return true;
    case AMPC_OP_ELU:
        ampc_sb_puts(e, "(a < 0 ? ");
        lit(e, ct, ampc_act_params_of(n).p);
        ampc_sb_puts(e, " * ampc::m_expm1(a) : a)");
        return true;
    case AMPC_OP_SELU: {
        const ampc_act_params ap = ampc_act_params_of(n);
        const double al = ap.p, ga = ap.q;
        ampc_sb_puts(e, "(a <= 0 ? ");
        lit(e, ct, ga * al);
        ampc_sb_puts(e, " * ampc::m_expm1(a) : ");
        lit(e, ct, ga);
        ampc_sb_puts(e, " * a)");
        return true;
    }
    case AMPC_OP_CELU: {
        const double al = ampc_act_params_of(n).p;
        ampc_sb_puts(e, "(a > 0 ? a : ");
        lit(e, ct, al);
        ampc_sb_puts(e, " * ampc::m_expm1(a / ");
        lit(e, ct, al);
        ampc_sb_puts(e, "))");
        return true;
    }
    case AMPC_OP_THRESHOLDED_RELU:
        ampc_sb_puts(e, "(a > ");
        lit(e, ct, ampc_act_params_of(n).p);
        ampc_sb_printf(e, " ? a : (%s)0)", ct);
        return true;
    case AMPC_OP_SWISH:
        ampc_sb_puts(e, "(a * ampc::sigmoid(");
        lit(e, ct, ampc_act_params_of(n).p);
        ampc_sb_puts(e, " * a))");
        return true;
    case AMPC_OP_IS_NAN: ampc_sb_puts(e, "ampc::is_nan(a)"); return true;
    case AMPC_OP_IS_INF: {
        const ampc_elementwise_flags ef = ampc_elementwise_flags_of(n);
        const bool neg = ef.detect_negative, pos = ef.detect_positive;
        ampc_sb_printf(e, "(ampc::is_inf(a) && (a > 0 ? %s : %s))", pos ? "true" : "false",
                       neg ? "true" : "false");
        return true;
    }
    default: return false;
    }
}

/* Whether node n's input 1 (Pow's exponent) is one constant element equal to v. */
static bool exponent_is(const ampc_node *n, double v) {
    const ampc_value *b = n->inputs[1];
    return b->data && !(b->flags & AMPC_VALUE_INPUT) && ampc_ir_numel(b) == 1 &&
           ampc_ref_load_f64(b->data, b->dtype, 0) == v;
}

/* Expression of a binary op over a, b (same compute type ct unless Pow). */
static bool binary_expr(const ampc_node *n, const char *ct, bool fl, ampc_strbuf *e) {
    const char *wrap = fl ? NULL : "";
    switch (n->op) {
    case AMPC_OP_ADD: ampc_sb_puts(e, wrap ? "ampc::wrap_add(a, b)" : "(a + b)"); return true;
    case AMPC_OP_SUB: ampc_sb_puts(e, wrap ? "ampc::wrap_sub(a, b)" : "(a - b)"); return true;
    /* A float product rounds on its own (ampc::mul_rn): a Mul read by an Add in the same chain
     * would otherwise be contracted into one fused multiply-add, rounded once. */
    case AMPC_OP_MUL: ampc_sb_puts(e, wrap ? "ampc::wrap_mul(a, b)" : "ampc::mul_rn(a, b)"); return true;
    case AMPC_OP_DIV: ampc_sb_puts(e, wrap ? "ampc::idiv(a, b)" : "(a / b)"); return true;
    case AMPC_OP_POW:
        /* Integer bases go through double, truncated and saturated into the 64-bit compute
         * type (then wrapped to the output type as integer results are), as the reference does.
         * A constant exponent of 2 is a * a, of 3 in float (double)a * a * a: the square is
         * exact and so is the cube in double, so both round once, as the reference's pow in
         * double does, where powf may be a few units off (and a general powf, ~40 instructions
         * an element, is what limits GELU's tanh form written out: x + 0.044715 x^3). */
        if (fl && exponent_is(n, 2)) ampc_sb_puts(e, "ampc::mul_rn(a, a)");
        else if (fl && exponent_is(n, 3) && !strcmp(ct, "float"))
            ampc_sb_puts(e, "(float)((double)a * a * a)");
        else if (fl) ampc_sb_puts(e, "ampc::m_pow(a, (decltype(a))b)");
        else ampc_sb_printf(e, "ampc::sat_int<%s>(ampc::m_pow((double)a, (double)b))", ct);
        return true;
    case AMPC_OP_EQUAL: ampc_sb_puts(e, "(a == b)"); return true;
    case AMPC_OP_LESS: ampc_sb_puts(e, "(a < b)"); return true;
    case AMPC_OP_LESS_EQUAL: ampc_sb_puts(e, "(a <= b)"); return true;
    case AMPC_OP_GREATER: ampc_sb_puts(e, "(a > b)"); return true;
    case AMPC_OP_GREATER_EQUAL: ampc_sb_puts(e, "(a >= b)"); return true;
    case AMPC_OP_AND: ampc_sb_puts(e, "(a && b)"); return true;
    case AMPC_OP_OR: ampc_sb_puts(e, "(a || b)"); return true;
    case AMPC_OP_XOR: ampc_sb_puts(e, "(!a != !b)"); return true;
    case AMPC_OP_BITWISE_AND: ampc_sb_puts(e, "(a & b)"); return true;
    case AMPC_OP_BITWISE_OR: ampc_sb_puts(e, "(a | b)"); return true;
    case AMPC_OP_BITWISE_XOR: ampc_sb_puts(e, "(a ^ b)"); return true;
    case AMPC_OP_PRELU: ampc_sb_printf(e, "(a < (%s)0 ? b * a : a)", ct); return true;
    case AMPC_OP_SWIGLU: /* a * sigmoid(alpha a) * b */
        ampc_sb_puts(e, "(a * ampc::sigmoid(");
        lit(e, ct, ampc_act_params_of(n).p);
        ampc_sb_puts(e, " * a) * b)");
        return true;
    case AMPC_OP_MOD:
        if (fl) ampc_sb_puts(e, "ampc::m_fmod(a, b)");
        else ampc_sb_printf(e, "ampc::imod(a, b, %s)",
                            ampc_elementwise_flags_of(n).fmod ? "true" : "false");
        return true;
    default: return false;
    }
}

/* Integer unary ops. */
static bool unary_int_expr(const ampc_node *n, const char *ct, ampc_strbuf *e) {
    switch (n->op) {
    case AMPC_OP_ABS: ampc_sb_printf(e, "(a < (%s)0 ? (%s)(0ull - (unsigned long long)a) : a)", ct, ct); return true;
    case AMPC_OP_NEG: ampc_sb_printf(e, "(%s)(0ull - (unsigned long long)a)", ct); return true;
    case AMPC_OP_RELU: ampc_sb_printf(e, "(a > (%s)0 ? a : (%s)0)", ct, ct); return true;
    case AMPC_OP_SIGN: ampc_sb_printf(e, "(%s)((a > (%s)0) - (a < (%s)0))", ct, ct, ct); return true;
    case AMPC_OP_NOT: ampc_sb_puts(e, "(!a)"); return true;
    case AMPC_OP_BITWISE_NOT: ampc_sb_puts(e, "(~a)"); return true;
    default: return false;
    }
}

/* Loads input i (at the broadcast offset for the output shape) into local `name`. */
static void load(ampc_cg_kernel *k, const ampc_node *n, int32_t i, const char *name,
                 const char **params) {
    const ampc_value *v = n->inputs[i], *y = n->outputs[0];
    const char *off = ampc_cg_bcast_offset(k, &y->shape, &v->shape, "i");
    const char *ct = ampc_cg_compute_type(v->dtype);
    ampc_cg_line(k, "const %s %s = ampc::cvt<%s>(%s[%s]);", ct, name, ct, params[i], off);
}

static bool f32_compute(ampc_dtype t) {
    return t == AMPC_DTYPE_F32 || t == AMPC_DTYPE_F16 || t == AMPC_DTYPE_BF16;
}

/* Whether input v, broadcast to y, keeps y's whole last dim: w consecutive elements of y (w
 * dividing that dim) then read w consecutive elements of v (a channels-last scale or bias). */
static bool keeps_rows(const ampc_value *v, const ampc_value *y) {
    const int32_t r = v->shape.rank, yr = y->shape.rank;
    return r >= 1 && yr >= r && v->shape.dims[r - 1] == y->shape.dims[yr - 1];
}

/* Elements a thread takes at once in the vector form: every tensor computes in f32 (f32, f16,
 * bf16), every input has the output's shape, one element, or a broadcast keeping the last dim
 * (keeps_rows), one output, and the count and (with such a broadcast) the last dim are
 * multiples of the width (16 bytes of the narrowest type). 0 otherwise. */
static int32_t vector_width(const ampc_node *n) {
    const ampc_value *y = n->outputs[0];
    if (n->n_outputs != 1 || !f32_compute(y->dtype) || y->shape.rank < 1) return 0;
    size_t narrow = ampc_dtype_size(y->dtype);
    bool rows = false;
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        if (v == NULL || !f32_compute(v->dtype)) return 0;
        const bool whole = ampc_shape_eq(&v->shape, &y->shape) || ampc_ir_numel(v) == 1;
        if (!whole && !keeps_rows(v, y)) return 0;
        rows |= !whole;
        if (ampc_dtype_size(v->dtype) < narrow) narrow = ampc_dtype_size(v->dtype);
    }
    int32_t w = (int32_t)(16 / narrow);
    int64_t count = ampc_ir_numel(y), last = y->shape.dims[y->shape.rank - 1];
    return count > 0 && count % w == 0 && (!rows || last % w == 0) ? w : 0;
}

/* The vector form: thread t of the grid-stride loop takes elements [w * v, w * v + w), loads
 * each full-shape input, and each broadcast one that keeps the last dim, with one access per 16
 * bytes, computes `expr` per element in f32 and stores the w results at once. */
static ampc_status lower_vector(ampc_cg_kernel *k, const ampc_node *n, const char *expr,
                                const char *const *params, const char *out, int32_t w) {
    static const char *const names[3] = {"a", "b", "c"};
    const int64_t count = ampc_ir_numel(n->outputs[0]);
    ampc_cg_grid_loop(k, count / w);
    ampc_cg_line(k, "float in_[%d][%d], r_[%d];", n->n_inputs, w, w);
    for (int32_t i = 0; i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i], *y = n->outputs[0];
        char first[32];
        snprintf(first, sizeof first, "i * %d", w);
        if (ampc_ir_numel(v) == 1 && count != 1)
            ampc_cg_line(k, "for (int u = 0; u < %d; u++) in_[%d][u] = ampc::to_f32(%s[0]);", w, i,
                         params[i]);
        else if (ampc_shape_eq(&v->shape, &y->shape))
            ampc_cg_line(k, "ampc::ld_vec<%d>(%s + %s, in_[%d]);", w, params[i], first, i);
        else /* a broadcast keeping the last dim: the w elements lie together from here */
            ampc_cg_line(k, "ampc::ld_vec<%d>(%s + %s, in_[%d]);", w, params[i],
                         ampc_cg_bcast_offset(k, &y->shape, &v->shape, first), i);
    }
    ampc_cg_line(k, "#pragma unroll");
    ampc_cg_open(k, "for (int u = 0; u < %d; u++)", w);
    for (int32_t i = 0; i < n->n_inputs; i++)
        ampc_cg_line(k, "const float %s = in_[%d][u];", names[i], i);
    ampc_cg_line(k, "const auto r = %s;", expr);
    ampc_cg_line(k, "r_[u] = (float)r;");
    ampc_cg_close(k);
    ampc_cg_line(k, "ampc::st_vec<%d>(%s + i * %d, r_);", w, out, w);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count / w, 256);
}

/* The expression of node n over its inputs a, b and c (in the compute type of input 0) into e;
 * *variadic for Max/Min/Sum/Mean, which fold their inputs instead. false when n has none. */
static bool node_expr(const ampc_node *n, ampc_strbuf *e, bool *variadic) {
    const ampc_value *x = n->inputs[0];
    bool fl = ampc_dtype_is_float(x->dtype);
    const char *ct = ampc_cg_compute_type(x->dtype);
    bool ok = false;
    *variadic = false;
    switch (n->op) {
    case AMPC_OP_CAST: case AMPC_OP_CAST_LIKE: case AMPC_OP_DROPOUT:
        ampc_sb_puts(e, "a");
        ok = true;
        break;
    case AMPC_OP_WHERE: ampc_sb_puts(e, "(a ? b : c)"); ok = true; break;
    case AMPC_OP_MAX: case AMPC_OP_MIN: case AMPC_OP_SUM: case AMPC_OP_MEAN: *variadic = ok = true; break;
    case AMPC_OP_CLIP: {
        bool lo = n->n_inputs > 1 && n->inputs[1], hi = n->n_inputs > 2 && n->inputs[2];
        ampc_sb_puts(e, "a");
        if (lo) {
            ampc_strbuf t = {0};
            ampc_sb_printf(&t, "(%s < b ? b : %s)", e->data, e->data);
            ampc_sb_free(e);
            *e = t;
        }
        if (hi) {
            ampc_strbuf t = {0};
            ampc_sb_printf(&t, "(%s > c ? c : %s)", e->data, e->data);
            ampc_sb_free(e);
            *e = t;
        }
        ok = true;
        break;
    }
    case AMPC_OP_SHRINK: {
        const ampc_act_params ap = ampc_act_params_of(n);
        const double l = ap.p, b = ap.q;
        const char *dt = fl ? ct : "double"; /* integer Shrink computes in double, truncates */
        ampc_sb_printf(e, "((%s)a < -", dt);
        lit(e, dt, l);
        ampc_sb_printf(e, " ? (%s)a + ", dt);
        lit(e, dt, b);
        ampc_sb_printf(e, " : (%s)a > ", dt);
        lit(e, dt, l);
        ampc_sb_printf(e, " ? (%s)a - ", dt);
        lit(e, dt, b);
        ampc_sb_printf(e, " : (%s)0)", dt);
        ok = true;
        break;
    }
    case AMPC_OP_BIT_SHIFT: {
        const bool left = ampc_elementwise_flags_of(n).shift_left;
        int bits = (int)ampc_dtype_size(x->dtype) * 8;
        ampc_sb_printf(e, "(b >= %d ? (%s)0 : (%s)(a %s b))", bits, ct, ct, left ? "<<" : ">>");
        ok = true;
        break;
    }
    default:
        if (n->n_inputs == 1) ok = fl ? unary_float_expr(n, ct, e) : unary_int_expr(n, ct, e);
        else ok = binary_expr(n, ct, fl, e);
    }
    return ok;
}

/* ---- fused chains (passes/fuse_elementwise.c) ------------------------------------------------- *
 * Node `root` reads values marked AMPC_VALUE_FUSED: their producers (and theirs, recursively)
 * are computed here, element i by thread i, in the order of the chain. Each value of the chain
 * is rounded to its type and read back as the separate kernels stored and loaded it, so the
 * results are the same bit for bit; the chain's other inputs ("leaves") are read once each, at
 * their broadcast offset for the root's shape (every value of the chain has that shape, or, for
 * a value computed from leaves alone, one that broadcasts to it: its leaves broadcast to the
 * root's shape as well, and each element computes it again from them). A
 * Gather heading the chain reads its table and indices at the gathered position instead
 * (ampc_cg_gather_element, the Gather kernel's own body); a Transpose, Slice or Expand heading
 * it reads its input where the view's element is (ampc_cg_view_of), so the view is never
 * copied. A Concat in the chain takes each element from the input that holds it: the element's
 * index along the axis picks the input, and the input's own chain (or its load) is computed
 * there, at the element's index in the input's shape (chain_concat). */
enum { CHAIN_MAX = 32 };

typedef struct chain {
    const ampc_node *nodes[CHAIN_MAX]; /* producers before readers, the root last */
    int32_t n;
    const ampc_value *leaves[3 * CHAIN_MAX];
    int32_t n_leaves;
} chain;

/* Where a chain is computed: the name of its root's element index and the prefix of its
 * locals (a Concat's inputs are chains of their own, computed in its branches: chain_concat). */
typedef struct chain_at {
    const char *idx, *pre;
} chain_at;

/* Concats nest in chains at most this deep (the pass fuses none into another's input chain). */
enum { CHAIN_DEPTH_MAX = 4 };

/* A node heading a chain: a Gather, a view or a Concat, whose inputs the kernel reads itself. */
static bool chain_head(const ampc_node *n) {
    return n->op == AMPC_OP_GATHER || n->op == AMPC_OP_CONCAT || ampc_op_is_strided_view(n->op);
}

static bool chain_collect(chain *c, const ampc_node *n) {
    /* a head's inputs are read at the gathered or viewed positions, not as leaves */
    for (int32_t i = 0; !chain_head(n) && i < n->n_inputs; i++) {
        const ampc_value *v = n->inputs[i];
        if (!v) continue;
        if (v->flags & AMPC_VALUE_FUSED) {
            if (!v->producer || !chain_collect(c, v->producer)) return false;
            continue;
        }
        bool seen = false;
        for (int32_t j = 0; j < c->n_leaves && !seen; j++) seen = c->leaves[j] == v;
        if (!seen) c->leaves[c->n_leaves++] = v;
    }
    if (c->n == CHAIN_MAX) return false;
    c->nodes[c->n++] = n;
    return true;
}

/* The local holding value v inside the kernel: a leaf's "<pre>l<j>", a chain value's
 * "<pre>v<k>". */
static void chain_local(const chain *c, const char *pre, const ampc_value *v, char *buf, size_t size) {
    for (int32_t j = 0; j < c->n_leaves; j++)
        if (c->leaves[j] == v) {
            snprintf(buf, size, "%sl%d", pre, j);
            return;
        }
    for (int32_t k = 0; k < c->n; k++)
        if (c->nodes[k]->outputs[0] == v) {
            snprintf(buf, size, "%sv%d", pre, k);
            return;
        }
    snprintf(buf, size, "?");
}

/* Stores r into `dst` (`dst`<m> when m >= 0, else dst[i]) of dtype t. A float result goes into
 * a float type through the compute type (rounded as the reference rounds); into an integer type
 * directly, truncated and saturated to t's range by ampc::cvt (NaN -> 0), never by a C cast of
 * an out-of-range value. */
static void store_result(ampc_cg_kernel *k, const char *dst, int32_t m, ampc_dtype t) {
    char to[64];
    if (m >= 0) snprintf(to, sizeof to, "%s%d", dst, m);
    else snprintf(to, sizeof to, "%s[i]", dst);
    if (ampc_dtype_is_float(t))
        ampc_cg_line(k, "%s = ampc::cvt<%s>((%s)r);", to, ampc_cg_ctype(t), ampc_cg_compute_type(t));
    else ampc_cg_line(k, "%s = ampc::cvt<%s>(r);", to, ampc_cg_ctype(t));
}

/* Collects the chain ending at node `last` into c and checks that every node has an
 * expression, as alone it would need, the chains of its Concats' inputs too (depth: how many
 * Concats hold this chain). */
static ampc_status chain_of_at(ampc_cg *cg, const ampc_node *last, chain *c, int32_t depth) {
    ampc_graph *g = ampc_cg_graph(cg);
    c->n = c->n_leaves = 0;
    if (!chain_collect(c, last))
        return AMPC_FAIL(g, last, AMPC_E_INTERNAL, "a fused elementwise chain of more than %d "
                         "nodes", CHAIN_MAX);
    for (int32_t m = 0; m < c->n; m++) {
        const ampc_node *n = c->nodes[m];
        if (n->op == AMPC_OP_CONCAT) {
            if (depth >= CHAIN_DEPTH_MAX)
                return AMPC_FAIL(g, n, AMPC_E_INTERNAL, "Concats nested more than %d deep in a "
                                 "fused elementwise chain", CHAIN_DEPTH_MAX);
            for (int32_t i = 0; i < n->n_inputs; i++) {
                const ampc_value *x = n->inputs[i];
                if (!x || !(x->flags & AMPC_VALUE_FUSED)) continue;
                chain inner;
                ampc_status st = chain_of_at(cg, x->producer, &inner, depth + 1);
                if (st != AMPC_OK) return st;
            }
        }
        if (chain_head(n)) continue;
        ampc_strbuf e = {0};
        bool variadic = false, ok = node_expr(c->nodes[m], &e, &variadic) && !variadic;
        ampc_sb_free(&e);
        if (!ok)
            return AMPC_FAIL(g, c->nodes[m], AMPC_E_UNSUPPORTED, "%s on %s has no generated GPU "
                             "kernel yet; it runs on the reference evaluator only",
                             ampc_op_get(c->nodes[m]->op)->onnx,
                             ampc_dtype_name(c->nodes[m]->inputs[0]->dtype));
    }
    return AMPC_OK;
}

static ampc_status chain_of(ampc_cg *cg, const ampc_node *last, chain *c) {
    return chain_of_at(cg, last, c, 0);
}

ampc_status ampc_cg_chain_check(ampc_cg *cg, const ampc_node *last) {
    chain c;
    return chain_of(cg, last, &c);
}

static void chain_element_at(ampc_cg *cg, ampc_cg_kernel *k, const ampc_node *last, bool cover_last,
                             chain_at at, char *result, size_t size);

/* Node m of chain c, a Concat, into its local <pre>v<m>: the element's index along the axis
 * picks the input that holds it; that input's element index (the same but for the axis, shifted
 * by the input's start) is computed, and the input read there, or its chain computed there. */
static void chain_concat(ampc_cg *cg, ampc_cg_kernel *k, const ampc_node *n, int32_t m, chain_at at) {
    const ampc_value *y = n->outputs[0];
    int64_t axis = ampc_axis_attr(n);
    if (axis < 0) axis += y->shape.rank;
    const int64_t inner = ampc_cg_dims_prod(&y->shape, (int32_t)axis + 1, y->shape.rank);
    const int64_t dim = y->shape.dims[axis];
    ampc_cg_line(k, "%s %sv%d;", ampc_cg_ctype(y->dtype), at.pre, m);
    ampc_cg_open(k, "/* node %d of the chain: a Concat read in place */", m);
    const char *c = ampc_cg_local(k, "c");
    ampc_cg_line(k, "const long long %s = %s / %lldLL %% %lldLL;", c, at.idx, (long long)inner,
                 (long long)dim);
    int32_t last = -1; /* the last input with elements: the final else */
    for (int32_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i]->shape.dims[axis] > 0) last = i;
    int64_t start = 0;
    bool first = true;
    for (int32_t i = 0; i <= last; i++) {
        const ampc_value *x = n->inputs[i];
        const int64_t d = x->shape.dims[axis];
        if (d == 0) continue;
        if (i == last) ampc_cg_open(k, "%s", first ? "" : "else");
        else ampc_cg_open(k, "%sif (%s < %lldLL)", first ? "" : "else ", c, (long long)(start + d));
        first = false;
        const char *xi = ampc_cg_local(k, "i");
        ampc_cg_line(k, "const long long %s = %s / %lldLL * %lldLL + (%s - %lldLL) * %lldLL + %s %% %lldLL;",
                     xi, at.idx, (long long)(dim * inner), (long long)(d * inner), c,
                     (long long)start, (long long)inner, at.idx, (long long)inner);
        if (x->flags & AMPC_VALUE_FUSED) {
            char pre[48], r[64];
            snprintf(pre, sizeof pre, "%sc%d_%d_", at.pre, m, i);
            chain_element_at(cg, k, x->producer, true, (chain_at){xi, pre}, r, sizeof r);
            ampc_cg_line(k, "%sv%d = %s;", at.pre, m, r);
        } else {
            ampc_cg_line(k, "%sv%d = %s[%s];", at.pre, m, ampc_cg_param(k, x, false), xi);
        }
        ampc_cg_close(k);
        start += d;
    }
    ampc_cg_close(k);
}

/* The chain's nodes, each into its local <pre>v<m>, from the leaves' locals <pre>l<j>, at
 * element index at.idx. */
static void chain_nodes(ampc_cg *cg, ampc_cg_kernel *k, const chain *c, chain_at at) {
    static const char *const names[3] = {"a", "b", "c"};
    for (int32_t m = 0; m < c->n; m++) {
        const ampc_node *n = c->nodes[m];
        const ampc_value *o = n->outputs[0];
        if (n->op == AMPC_OP_GATHER) {
            char dst[64];
            snprintf(dst, sizeof dst, "%sv%d", at.pre, m);
            ampc_cg_line(k, "%s %s;", ampc_cg_ctype(o->dtype), dst);
            ampc_cg_open(k, "/* node %d of the chain: the lookup */", m);
            ampc_cg_gather_element(k, n, ampc_cg_param(k, n->inputs[0], false),
                                   ampc_cg_param(k, n->inputs[1], false), at.idx, dst);
            ampc_cg_close(k);
            continue;
        }
        if (n->op == AMPC_OP_CONCAT) {
            chain_concat(cg, k, n, m, at);
            continue;
        }
        int64_t src0, steps[AMPC_MAX_RANK];
        const ampc_value *src = ampc_cg_view_of(cg, n, &src0, steps);
        if (src) {
            const char *off = ampc_cg_strided_offset(k, &o->shape, steps, at.idx);
            ampc_cg_line(k, "const %s %sv%d = %s[%lldLL + %s]; /* node %d of the chain: a view */",
                         ampc_cg_ctype(o->dtype), at.pre, m, ampc_cg_param(k, src, false),
                         (long long)src0, off, m);
            continue;
        }
        ampc_strbuf e = {0};
        bool variadic = false;
        node_expr(n, &e, &variadic); /* checked above */
        ampc_cg_line(k, "%s %sv%d;", ampc_cg_ctype(o->dtype), at.pre, m);
        ampc_cg_open(k, "/* node %d of the chain */", m);
        for (int32_t i = 0; i < n->n_inputs && i < 3; i++) {
            const ampc_value *v = n->inputs[i];
            if (!v) continue;
            char local[64];
            chain_local(c, at.pre, v, local, sizeof local);
            const char *ct = ampc_cg_compute_type(v->dtype);
            ampc_cg_line(k, "const %s %s = ampc::cvt<%s>(%s);", ct, names[i], ct, local);
        }
        ampc_cg_line(k, "const auto r = %s;", e.data);
        char dst[64];
        snprintf(dst, sizeof dst, "%sv", at.pre);
        store_result(k, dst, m, o->dtype);
        ampc_cg_close(k);
        ampc_sb_free(&e);
    }
}

static void chain_element_at(ampc_cg *cg, ampc_cg_kernel *k, const ampc_node *last, bool cover_last,
                             chain_at at, char *result, size_t size) {
    chain c;
    chain_of(cg, last, &c); /* checked by ampc_cg_chain_check */
    const ampc_value *y = last->outputs[0];
    for (int32_t m = 0; m < c.n; m++)
        if (cover_last || c.nodes[m] != last) ampc_cg_kernel_covers(k, c.nodes[m]);
    for (int32_t j = 0; j < c.n_leaves; j++) {
        const ampc_value *v = c.leaves[j];
        const char *off = ampc_cg_bcast_offset(k, &y->shape, &v->shape, at.idx);
        ampc_cg_line(k, "const %s %sl%d = %s[%s];", ampc_cg_ctype(v->dtype), at.pre, j,
                     ampc_cg_param(k, v, false), off);
    }
    chain_nodes(cg, k, &c, at);
    snprintf(result, size, "%sv%d", at.pre, c.n - 1);
}

void ampc_cg_chain_element(ampc_cg *cg, ampc_cg_kernel *k, const ampc_node *last, bool cover_last,
                           char *result, size_t size) {
    chain_element_at(cg, k, last, cover_last, (chain_at){"i", ""}, result, size);
}

/* Elements a thread takes at once when the chain's kernel has the vector form (as a single
 * node's, vector_width): no head (every value is at the root's index), every leaf and the root
 * computing in f32, each leaf of the root's shape, one element, or a broadcast keeping the last
 * dim. 0 otherwise. */
static int32_t chain_vector_width(const chain *c, const ampc_value *y) {
    if (!f32_compute(y->dtype) || y->shape.rank < 1) return 0;
    for (int32_t m = 0; m < c->n; m++)
        if (chain_head(c->nodes[m])) return 0;
    size_t narrow = ampc_dtype_size(y->dtype);
    bool rows = false;
    for (int32_t j = 0; j < c->n_leaves; j++) {
        const ampc_value *v = c->leaves[j];
        const bool whole = ampc_shape_eq(&v->shape, &y->shape) || ampc_ir_numel(v) == 1;
        if (!f32_compute(v->dtype) || (!whole && !keeps_rows(v, y))) return 0;
        rows |= !whole;
        if (ampc_dtype_size(v->dtype) < narrow) narrow = ampc_dtype_size(v->dtype);
    }
    const int32_t w = (int32_t)(16 / narrow);
    const int64_t count = ampc_ir_numel(y), last = y->shape.dims[y->shape.rank - 1];
    return count > 0 && count % w == 0 && (!rows || last % w == 0) ? w : 0;
}

/* The chain's kernel in the vector form: each leaf loaded w elements at a time (16 bytes of
 * the narrowest type) into floats, which hold every f32, f16 and bf16 value exactly, the chain
 * computed for each of the w elements from them as the element form computes it, the w results
 * stored at once. */
static ampc_status lower_chain_vector(ampc_cg *cg, const ampc_node *root, const chain *c,
                                      int32_t w) {
    const ampc_value *y = root->outputs[0];
    const int64_t count = ampc_ir_numel(y);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, root, "chain");
    ampc_cg_kernel_restrict(k);
    for (int32_t m = 0; m < c->n; m++)
        if (c->nodes[m] != root) ampc_cg_kernel_covers(k, c->nodes[m]);
    ampc_cg_grid_loop(k, count / w);
    char first[32];
    snprintf(first, sizeof first, "i * %d", w);
    for (int32_t j = 0; j < c->n_leaves; j++) {
        const ampc_value *v = c->leaves[j];
        const char *p = ampc_cg_param(k, v, false);
        ampc_cg_line(k, "float lf%d[%d];", j, w);
        if (ampc_ir_numel(v) == 1 && count != 1)
            ampc_cg_line(k, "for (int u = 0; u < %d; u++) lf%d[u] = ampc::to_f32(%s[0]);", w, j, p);
        else
            ampc_cg_line(k, "ampc::ld_vec<%d>(%s + %s, lf%d);", w, p,
                         ampc_cg_bcast_offset(k, &y->shape, &v->shape, first), j);
    }
    ampc_cg_line(k, "float r_[%d];", w);
    ampc_cg_line(k, "#pragma unroll");
    ampc_cg_open(k, "for (int u = 0; u < %d; u++)", w);
    for (int32_t j = 0; j < c->n_leaves; j++) {
        const char *t = ampc_cg_ctype(c->leaves[j]->dtype);
        ampc_cg_line(k, "const %s l%d = ampc::cvt<%s>(lf%d[u]);", t, j, t, j);
    }
    chain_nodes(cg, k, c, (chain_at){"i", ""});
    ampc_cg_line(k, "r_[u] = ampc::to_f32(v%d);", c->n - 1);
    ampc_cg_close(k);
    ampc_cg_line(k, "ampc::st_vec<%d>(%s + %s, r_);", w, ampc_cg_param(k, y, true), first);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count / w, 256);
}

static ampc_status lower_chain(ampc_cg *cg, const ampc_node *root) {
    chain c;
    ampc_status st = chain_of(cg, root, &c);
    if (st != AMPC_OK) return st;
    const ampc_value *y = root->outputs[0];
    const int32_t w = chain_vector_width(&c, y);
    if (w > 0) return lower_chain_vector(cg, root, &c, w);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, root, "chain");
    ampc_cg_kernel_restrict(k);
    char v[16];
    ampc_cg_elem_open(k);
    ampc_cg_chain_element(cg, k, root, false, v, sizeof v);
    ampc_cg_line(k, "%s[i] = %s;", ampc_cg_param(k, y, true), v);
    return ampc_cg_kernel_end(k, ampc_cg_elem_close(k, ampc_ir_numel(y)), 256);
}

ampc_status ampc_cg_lower_elementwise(ampc_cg *cg, const ampc_node *n) {
    if (n->op == AMPC_OP_QUANTIZE_LINEAR || n->op == AMPC_OP_DEQUANTIZE_LINEAR)
        return ampc_cg_lower_quant(cg, n);
    if (n->op == AMPC_OP_MEL_WEIGHT_MATRIX) return ampc_cg_lower_signal(cg, n);
    const ampc_node *p = n->inputs[0] ? n->inputs[0]->producer : NULL;
    if (p && (n->inputs[0]->flags & AMPC_VALUE_FUSED) &&
        ((n->op == AMPC_OP_CAST && (p->op == AMPC_OP_LAYER_NORM || p->op == AMPC_OP_RMS_NORM)) ||
         (n->op == AMPC_OP_RELU && p->op == AMPC_OP_BATCH_NORM)))
        return ampc_cg_lower_norm_cast(cg, p, n);
    for (int32_t i = 0; n->op == AMPC_OP_MUL && i < n->n_inputs; i++) { /* a norm's weight */
        const ampc_value *v = n->inputs[i];
        if (v && v->producer && (v->flags & AMPC_VALUE_FUSED) &&
            ampc_ir_norm_post_scale(v->producer, n) >= 0)
            return ampc_cg_lower_norm_cast(cg, v->producer, n);
    }
    for (int32_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] && (n->inputs[i]->flags & AMPC_VALUE_FUSED)) return lower_chain(cg, n);
    ampc_graph *g = ampc_cg_graph(cg);
    const ampc_value *y = n->outputs[0];
    const ampc_value *x = n->inputs[0];
    bool fl = ampc_dtype_is_float(x->dtype);
    const char *ct = ampc_cg_compute_type(x->dtype);
    ampc_strbuf e = {0};
    bool variadic = false;
    bool ok = node_expr(n, &e, &variadic);
    if (!ok) {
        ampc_sb_free(&e);
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "%s on %s has no generated GPU kernel yet; it runs on the reference "
                         "evaluator only", ampc_op_get(n->op)->onnx, ampc_dtype_name(x->dtype));
    }

    int64_t count = ampc_ir_numel(y);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    ampc_cg_kernel_restrict(k);
    const char *params[64], *outs[4];
    int32_t np = 0;
    for (int32_t i = 0; i < n->n_inputs && i < 60; i++)
        params[np++] = n->inputs[i] ? ampc_cg_param(k, n->inputs[i], false) : NULL;
    for (int32_t j = 0; j < n->n_outputs && j < 4; j++) outs[j] = ampc_cg_param(k, n->outputs[j], true);
    const int32_t w = variadic || n->n_inputs > 3 ? 0 : vector_width(n);
    if (w > 0) {
        ampc_status st = lower_vector(k, n, e.data, params, outs[0], w);
        ampc_sb_free(&e);
        return st;
    }
    ampc_cg_elem_open(k);
    if (variadic) {
        /* Fold left to right in the compute type; Mean divides once at the end. */
        load(k, n, 0, "acc0", params);
        ampc_cg_line(k, "%s r = acc0;", ct);
        for (int32_t i = 1; i < n->n_inputs; i++) {
            char nm[16];
            snprintf(nm, sizeof nm, "x%d", i);
            load(k, n, i, nm, params);
            const char *f = n->op == AMPC_OP_MAX   ? (fl ? "ampc::max_nan(r, %s)" : "(r > %s ? r : %s)")
                            : n->op == AMPC_OP_MIN ? (fl ? "ampc::min_nan(r, %s)" : "(r < %s ? r : %s)")
                                                   : (fl ? "(r + %s)" : "ampc::wrap_add(r, %s)");
            ampc_strbuf t = {0};
            ampc_sb_printf(&t, f, nm, nm);
            ampc_cg_line(k, "r = %s;", t.data);
            ampc_sb_free(&t);
        }
        if (n->op == AMPC_OP_MEAN) ampc_cg_line(k, "r = r / (%s)%d;", ct, n->n_inputs);
    } else {
        static const char *const names[3] = {"a", "b", "c"};
        for (int32_t i = 0; i < n->n_inputs && i < 3; i++)
            if (n->inputs[i]) load(k, n, i, names[i], params);
        ampc_cg_line(k, "const auto r = %s;", e.data);
    }
    store_result(k, outs[0], -1, y->dtype);
    if (n->op == AMPC_OP_DROPOUT && n->n_outputs > 1) ampc_cg_line(k, "%s[i] = true;", outs[1]);
    ampc_sb_free(&e);
    return ampc_cg_kernel_end(k, ampc_cg_elem_close(k, count), 256);
}
