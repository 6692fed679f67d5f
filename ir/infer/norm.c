/*
 * norm.c — inference for softmax and the normalisations:
 *   Softmax, LogSoftmax (opset 13): one axis (default -1); output = input dtype and shape.
 *   LayerNormalization (opset 17): normalises over dims [axis, rank) (axis default -1); Scale and
 *     optional B broadcast to X's shape (numpy, one direction); outputs Y (X's dtype and shape)
 *     and optional Mean and InvStdDev, whose shape is X's with dims >= axis set to 1 and whose
 *     dtype is stash_type (default 1, f32).
 *   BatchNormalization (opset 15, inference only): scale, B, input_mean and input_var are [C],
 *     C being dim 1 of X (1 for a 1-D X); output Y only.
 *   InstanceNormalization (opset 6): X is [N, C, D1...]; scale and B are [C].
 *   GroupNormalization (opset 21): X is [N, C, D1...]; num_groups (required) divides C; scale and
 *     bias are per channel, [C]. (Opset 18 had them per group, [num_groups]: the importer expands
 *     such constants to [C].)
 *   LRN (opset 13): X is [N, C, D1...]; size (required, >= 1) is the channel window.
 *   LpNormalization (opset 1): axis (default -1), p 1 or 2 (default 2).
 *   MeanVarianceNormalization (opset 13): axes (default [0, 2, 3]), distinct and in range.
 *   RMSNormalization (opset 23): like LayerNormalization over dims [axis, rank) without a bias and
 *     without statistics outputs; scale broadcasts to X, and Y has scale's dtype.
 * All of them keep X's shape.
 */
#include "infer.h"

/* Reads an int attribute; false when it is mistyped (the reader has already reported it). */
static bool read_int(ampc_graph *g, const ampc_node *n, const char *name, int64_t dflt,
                     int64_t *out) {
    int32_t before = g->diag.n + g->diag.dropped;
    *out = ampc_ir_attr_int(g, n, name, dflt);
    return g->diag.n + g->diag.dropped == before;
}

static bool read_float(ampc_graph *g, const ampc_node *n, const char *name, float dflt,
                       float *out) {
    int32_t before = g->diag.n + g->diag.dropped;
    *out = ampc_ir_attr_float(g, n, name, dflt);
    return g->diag.n + g->diag.dropped == before;
}

/* Input 0 must be a float tensor of rank >= 1 (these ops work along an axis). */
static ampc_status check_x(ampc_graph *g, const ampc_node *n) {
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (n->inputs[0]->shape.rank == 0)
        return AMPC_FAIL(g, n, AMPC_E_SHAPE, "input 0 '%s' must have rank >= 1, got a scalar",
                         n->inputs[0]->name);
    return AMPC_OK;
}

ampc_status ampc_infer_softmax(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t axis;
    int32_t ax;
    ampc_status st = check_x(g, n);
    if (st != AMPC_OK) return st;
    if (!ampc_infer_axis_attr(g, n, &axis)) return AMPC_E_ATTR;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "attribute 'axis'", &ax)) return AMPC_E_ATTR;
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* True when `s` broadcasts to `to` in one direction (numpy rules, `to` unchanged). */
static bool bcast_to(const ampc_shape *s, const ampc_shape *to) {
    if (s->rank > to->rank) return false;
    for (int32_t d = 0; d < s->rank; d++) {
        int64_t a = s->dims[d], b = to->dims[to->rank - s->rank + d];
        if (a != b && a != 1) return false;
    }
    return true;
}

/* The dtype named by a stash_type attribute: an ONNX floating-point type code. */
static bool stash_dtype(ampc_graph *g, const ampc_node *n, int64_t stash, ampc_dtype *out) {
    *out = stash == (int32_t)stash ? ampc_dtype_from_onnx((int32_t)stash) : AMPC_DTYPE_UNDEFINED;
    if (ampc_dtype_is_float(*out)) return true;
    AMPC_FAIL(g, n, AMPC_E_ATTR,
              "attribute 'stash_type' must be an ONNX floating-point data type "
              "(1 float, 10 float16, 11 double, 16 bfloat16), got %lld",
              (long long)stash);
    return false;
}

ampc_status ampc_infer_layer_norm(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    ampc_status st = check_x(g, n);
    if (st != AMPC_OK) return st;
    for (int32_t i = 1; i < n->n_inputs; i++) {
        const ampc_value *p = n->inputs[i];
        if (!p) continue;
        if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
        if (!bcast_to(&p->shape, &x->shape)) {
            char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input %d '%s' (%s) must broadcast to the shape of input 0 '%s' %s, "
                             "got %s",
                             i, p->name, i == 1 ? "Scale" : "B", x->name,
                             ampc_shape_str(&x->shape, a, sizeof a),
                             ampc_shape_str(&p->shape, b, sizeof b));
        }
    }
    int64_t axis, stash;
    float eps;
    int32_t ax;
    if (!ampc_infer_axis_attr(g, n, &axis) || !read_float(g, n, "epsilon", 1e-5f, &eps) ||
        !read_int(g, n, "stash_type", 1, &stash))
        return AMPC_E_ATTR;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "attribute 'axis'", &ax)) return AMPC_E_ATTR;
    ampc_dtype sdt;
    if (!stash_dtype(g, n, stash, &sdt)) return AMPC_E_ATTR;

    ampc_infer_set(n, 0, x->dtype, &x->shape);
    ampc_shape stat = x->shape;
    for (int32_t d = ax; d < stat.rank; d++) stat.dims[d] = 1;
    for (int32_t i = 1; i < n->n_outputs; i++) ampc_infer_set(n, i, sdt, &stat);
    return AMPC_OK;
}

ampc_status ampc_infer_batch_norm(ampc_graph *g, ampc_node *n) {
    static const char *const role[5] = {"X", "scale", "B", "input_mean", "input_var"};
    const ampc_value *x = n->inputs[0];
    ampc_status st = check_x(g, n);
    if (st != AMPC_OK) return st;
    int64_t training;
    float eps, momentum;
    if (!read_int(g, n, "training_mode", 0, &training) ||
        !read_float(g, n, "epsilon", 1e-5f, &eps) || !read_float(g, n, "momentum", 0.9f, &momentum))
        return AMPC_E_ATTR;
    if (training != 0 && training != 1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'training_mode' must be 0 or 1, got %lld",
                         (long long)training);
    /* The running-statistics outputs exist only in training mode (opsets before 14 had no
     * training_mode attribute: asking for them was what selected it). */
    if (training || n->n_outputs > 1)
        return AMPC_FAIL(g, n, AMPC_E_UNSUPPORTED,
                         "training_mode=1 (running statistics outputs) is not supported: ampc "
                         "compiles inference graphs, where BatchNormalization normalises with "
                         "input_mean and input_var (this node has training_mode=%lld and %d "
                         "outputs)",
                         (long long)training, n->n_outputs);

    /* The per-channel inputs: float, [C]; scale and B share a dtype, as do mean and var. */
    const int64_t c = x->shape.rank >= 2 ? x->shape.dims[1] : 1;
    char xs[AMPC_SHAPE_STR_MAX];
    ampc_shape_str(&x->shape, xs, sizeof xs);
    for (int32_t i = 1; i < 5; i++) {
        const ampc_value *p = n->inputs[i];
        if (!ampc_infer_check_dtype(g, n, i, DT_FLOAT)) return AMPC_E_DTYPE;
        if ((i == 2 || i == 4) && !ampc_infer_same_dtype(g, n, i - 1, i)) return AMPC_E_DTYPE;
        if (p->shape.rank != 1 || p->shape.dims[0] != c) {
            char ps[AMPC_SHAPE_STR_MAX];
            return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                             "input %d '%s' (%s) must have shape [%lld], the channel count (%s "
                             "input 0 '%s' %s), got %s",
                             i, p->name, role[i], (long long)c,
                             x->shape.rank >= 2 ? "dim 1 of" : "1 for the 1-D", x->name, xs,
                             ampc_shape_str(&p->shape, ps, sizeof ps));
        }
    }
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

/* ---- channel normalisations: X is [N, C, D1...] ---------------------------------------------- */

/* Input 0 is float with rank >= 2 (a batch and a channel dim). */
static ampc_status check_nc(ampc_graph *g, const ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    if (x->shape.rank < 2) {
        char s[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 0 '%s' must have rank >= 2 ([N, C, D1, ...]), got %s", x->name,
                         ampc_shape_str(&x->shape, s, sizeof s));
    }
    return AMPC_OK;
}

/* Input i (named `role`) has X's dtype and shape [C], C = dim 1 of X. `form` (may be "") is
 * inserted into the message after the expected shape. */
static ampc_status check_per_channel(ampc_graph *g, const ampc_node *n, int32_t i,
                                     const char *role, const char *form) {
    const ampc_value *x = n->inputs[0], *p = n->inputs[i];
    const int64_t c = x->shape.dims[1];
    if (!ampc_infer_same_dtype(g, n, 0, i)) return AMPC_E_DTYPE;
    if (p->shape.rank == 1 && p->shape.dims[0] == c) return AMPC_OK;
    char xs[AMPC_SHAPE_STR_MAX], ps[AMPC_SHAPE_STR_MAX];
    return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                     "input %d '%s' (%s) must have shape [%lld], the channel count (dim 1 of "
                     "input 0 '%s' %s)%s, got %s",
                     i, p->name, role, (long long)c, x->name,
                     ampc_shape_str(&x->shape, xs, sizeof xs), form,
                     ampc_shape_str(&p->shape, ps, sizeof ps));
}

ampc_status ampc_infer_instance_norm(ampc_graph *g, ampc_node *n) {
    float eps;
    ampc_status st = check_nc(g, n);
    if (st == AMPC_OK) st = check_per_channel(g, n, 1, "scale", "");
    if (st == AMPC_OK) st = check_per_channel(g, n, 2, "B", "");
    if (st != AMPC_OK) return st;
    if (!read_float(g, n, "epsilon", 1e-5f, &eps)) return AMPC_E_ATTR;
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &n->inputs[0]->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_group_norm(ampc_graph *g, ampc_node *n) {
    static const char form[] = " (per channel, as in opset 21; opset 18's per-group form is "
                               "expanded by the importer)";
    const ampc_value *x = n->inputs[0];
    ampc_status st = check_nc(g, n);
    if (st != AMPC_OK) return st;
    const ampc_attr *a = ampc_ir_attr_find(n, "num_groups");
    if (!a || a->kind != AMPC_ATTR_INT)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "GroupNormalization needs an int attribute "
                         "'num_groups'");
    const int64_t c = x->shape.dims[1];
    if (a->i < 1 || c % a->i)
        return AMPC_FAIL(g, n, AMPC_E_ATTR,
                         "attribute 'num_groups' must be positive and divide the channel count "
                         "%lld (dim 1 of input 0 '%s'), got %lld",
                         (long long)c, x->name, (long long)a->i);
    if (st == AMPC_OK) st = check_per_channel(g, n, 1, "scale", form);
    if (st == AMPC_OK) st = check_per_channel(g, n, 2, "bias", form);
    if (st != AMPC_OK) return st;
    float eps;
    int64_t stash;
    ampc_dtype sdt;
    if (!read_float(g, n, "epsilon", 1e-5f, &eps) || !read_int(g, n, "stash_type", 1, &stash) ||
        !stash_dtype(g, n, stash, &sdt))
        return AMPC_E_ATTR;
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_lrn(ampc_graph *g, ampc_node *n) {
    ampc_status st = check_nc(g, n);
    if (st != AMPC_OK) return st;
    const ampc_attr *a = ampc_ir_attr_find(n, "size");
    if (!a || a->kind != AMPC_ATTR_INT)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "LRN needs an int attribute 'size' (the channel "
                         "window)");
    if (a->i < 1)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'size' must be >= 1, got %lld",
                         (long long)a->i);
    float alpha, beta, bias;
    if (!read_float(g, n, "alpha", 1e-4f, &alpha) || !read_float(g, n, "beta", 0.75f, &beta) ||
        !read_float(g, n, "bias", 1.0f, &bias))
        return AMPC_E_ATTR;
    ampc_infer_set(n, 0, n->inputs[0]->dtype, &n->inputs[0]->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_lp_norm(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    int64_t axis, p;
    int32_t ax;
    ampc_status st = check_x(g, n);
    if (st != AMPC_OK) return st;
    if (!ampc_infer_axis_attr(g, n, &axis) || !read_int(g, n, "p", 2, &p)) return AMPC_E_ATTR;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "attribute 'axis'", &ax)) return AMPC_E_ATTR;
    if (p != 1 && p != 2)
        return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'p' must be 1 or 2, got %lld",
                         (long long)p);
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_mvn(ampc_graph *g, ampc_node *n) {
    static const int64_t dflt[3] = {0, 2, 3};
    const ampc_value *x = n->inputs[0];
    if (!ampc_infer_check_dtype(g, n, 0, DT_FLOAT)) return AMPC_E_DTYPE;
    const int64_t *axes = dflt;
    int32_t n_axes = 3;
    const ampc_attr *a = ampc_ir_attr_find(n, "axes");
    if (a) {
        if (a->kind != AMPC_ATTR_INTS)
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "attribute 'axes' must be a list of ints");
        axes = a->ints, n_axes = a->n;
    }
    bool seen[AMPC_MAX_RANK] = {false};
    for (int32_t i = 0; i < n_axes; i++) {
        int32_t d;
        if (!ampc_infer_axis(g, n, axes[i], x->shape.rank, "axes entry", &d)) return AMPC_E_ATTR;
        if (seen[d])
            return AMPC_FAIL(g, n, AMPC_E_ATTR, "axes must not repeat an axis: axis %d appears "
                             "twice (axes[%d] = %lld)", d, i, (long long)axes[i]);
        seen[d] = true;
    }
    ampc_infer_set(n, 0, x->dtype, &x->shape);
    return AMPC_OK;
}

ampc_status ampc_infer_rms_norm(ampc_graph *g, ampc_node *n) {
    const ampc_value *x = n->inputs[0], *scale = n->inputs[1];
    ampc_status st = check_x(g, n);
    if (st != AMPC_OK) return st;
    if (!ampc_infer_check_dtype(g, n, 1, DT_FLOAT)) return AMPC_E_DTYPE;
    if (!bcast_to(&scale->shape, &x->shape)) {
        char a[AMPC_SHAPE_STR_MAX], b[AMPC_SHAPE_STR_MAX];
        return AMPC_FAIL(g, n, AMPC_E_SHAPE,
                         "input 1 '%s' (scale) must broadcast to the shape of input 0 '%s' %s, "
                         "got %s",
                         scale->name, x->name, ampc_shape_str(&x->shape, a, sizeof a),
                         ampc_shape_str(&scale->shape, b, sizeof b));
    }
    int64_t axis, stash;
    float eps;
    int32_t ax;
    ampc_dtype sdt;
    if (!ampc_infer_axis_attr(g, n, &axis) || !read_float(g, n, "epsilon", 1e-5f, &eps) ||
        !read_int(g, n, "stash_type", 1, &stash))
        return AMPC_E_ATTR;
    if (!ampc_infer_axis(g, n, axis, x->shape.rank, "attribute 'axis'", &ax) ||
        !stash_dtype(g, n, stash, &sdt))
        return AMPC_E_ATTR;
    ampc_infer_set(n, 0, scale->dtype, &x->shape);
    return AMPC_OK;
}
