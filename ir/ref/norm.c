/*
 * norm.c — reference kernels for Softmax, LogSoftmax, LayerNormalization, (inference-mode)
 * BatchNormalization, InstanceNormalization, GroupNormalization, LRN, LpNormalization,
 * MeanVarianceNormalization and RMSNormalization. Math is in double and rounded once to the
 * output dtype (stash_type asks for at least f32 statistics; double satisfies every choice).
 *
 * Each kernel views its input as rows: Softmax and LpNorm as [outer, len, inner] around their
 * axis, LayerNorm and RMSNorm as [outer, inner] split at their axis, BatchNorm and InstanceNorm
 * as [N, C, spatial], GroupNorm as [N * groups, C / groups * spatial]; MVN maps each element to
 * its statistics group like a reduction. Every element is read a fixed number of times (Softmax:
 * max, sum of exponentials, write; the normalisations: mean, variance, write), so the cost is
 * linear; LRN reads each element once per channel of its window, like a 1-D pooling. Softmax
 * subtracts the row maximum before exponentiating, so no finite input overflows; variances are
 * two-pass population variances.
 */
#include "ref.h"
#include "ir/norm.h"

#include <math.h>
#include <stdlib.h>

/* The op's axis, normalised against rank (inference has range-checked it). */
static int32_t norm_axis(const ampc_node *n, int32_t rank) {
    const int32_t axis = ampc_axis_of(n, rank);
    AMPC_ASSERT(axis >= 0 && axis < rank);
    return axis;
}

static int64_t dims_prod(const ampc_shape *s, int32_t lo, int32_t hi) {
    int64_t p = 1;
    for (int32_t d = lo; d < hi; d++) p *= s->dims[d];
    return p;
}

ampc_status ampc_ref_softmax(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    const int32_t rank = x->shape.rank, ax = norm_axis(n, rank);
    const int64_t outer = dims_prod(&x->shape, 0, ax), len = x->shape.dims[ax];
    const int64_t inner = dims_prod(&x->shape, ax + 1, rank);
    const bool log_out = n->op == AMPC_OP_LOG_SOFTMAX;
    if (ampc_shape_numel(&x->shape) == 0) return AMPC_OK; /* outer * inner may still be large */
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * len * inner + i; /* element k of this row: base + k*inner */
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = ampc_ref_load_f64(x->data, x->dtype, base + k * inner);
                if (v > mx || isnan(v)) mx = v;
                if (isnan(mx)) break; /* the whole row is NaN */
            }
            for (int64_t k = 0; k < len; k++)
                sum += exp(ampc_ref_load_f64(x->data, x->dtype, base + k * inner) - mx);
            const double log_sum = log(sum);
            for (int64_t k = 0; k < len; k++) {
                double d = ampc_ref_load_f64(x->data, x->dtype, base + k * inner) - mx;
                ampc_ref_store_f64(y->data, y->dtype, base + k * inner,
                                   log_out ? d - log_sum : exp(d) / sum);
            }
        }
    }
    return AMPC_OK;
}

ampc_status ampc_ref_safe_softmax(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                  ampc_tensor *const *out) {
    ampc_status st = ampc_ref_softmax(g, n, in, out);
    for (int64_t i = 0, k = ampc_shape_numel(&out[0]->shape); st == AMPC_OK && i < k; i++)
        if (isnan(ampc_ref_load_f64(out[0]->data, out[0]->dtype, i)))
            ampc_ref_store_f64(out[0]->data, out[0]->dtype, i, 0.0);
    return st;
}

ampc_status ampc_ref_layer_norm(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *scale = in[1];
    const ampc_tensor *bias = n->n_inputs > 2 ? in[2] : NULL;
    const int32_t rank = x->shape.rank, ax = norm_axis(n, rank);
    const int64_t outer = dims_prod(&x->shape, 0, ax), inner = dims_prod(&x->shape, ax, rank);
    const double eps = ampc_norm_params_of(n).eps;
    ampc_tensor *y = out[0];
    ampc_tensor *mean_out = n->n_outputs > 1 ? out[1] : NULL;
    ampc_tensor *inv_out = n->n_outputs > 2 ? out[2] : NULL;

    /* One iterator over all of X gives the Scale and B offsets of each element (operand 1 is
     * Scale again when there is no B). */
    const ampc_shape *shapes[2] = {&scale->shape, bias ? &bias->shape : &scale->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &x->shape, shapes, 2);
    for (int64_t r = 0; r < outer; r++) {
        const int64_t base = r * inner;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < inner; j++) sum += ampc_ref_load_f64(x->data, x->dtype, base + j);
        const double mean = sum / (double)inner; /* NaN for an empty row, as 0/0 in ONNX */
        for (int64_t j = 0; j < inner; j++) {
            double d = ampc_ref_load_f64(x->data, x->dtype, base + j) - mean;
            sq += d * d;
        }
        const double inv = 1.0 / sqrt(sq / (double)inner + eps);
        for (int64_t j = 0; j < inner; j++, ampc_bcast_iter_next(&it)) {
            double v = (ampc_ref_load_f64(x->data, x->dtype, base + j) - mean) * inv *
                       ampc_ref_load_f64(scale->data, scale->dtype, it.off[0]);
            if (bias) v += ampc_ref_load_f64(bias->data, bias->dtype, it.off[1]);
            ampc_ref_store_f64(y->data, y->dtype, base + j, v);
        }
        if (mean_out) ampc_ref_store_f64(mean_out->data, mean_out->dtype, r, mean);
        if (inv_out) ampc_ref_store_f64(inv_out->data, inv_out->dtype, r, inv);
    }
    return AMPC_OK;
}

ampc_status ampc_ref_batch_norm(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *scale = in[1], *b = in[2], *mean = in[3], *var = in[4];
    ampc_tensor *y = out[0];
    const int32_t rank = x->shape.rank;
    const int64_t batch = x->shape.dims[0], c = rank >= 2 ? x->shape.dims[1] : 1;
    const int64_t spatial = dims_prod(&x->shape, 2, rank);
    const double eps = ampc_norm_params_of(n).eps;
    if (ampc_shape_numel(&x->shape) == 0) return AMPC_OK;
    for (int64_t ch = 0; ch < c; ch++) {
        /* Y = (X - mean) / sqrt(var + epsilon) * scale + B, per channel. */
        const double m = ampc_ref_load_f64(mean->data, mean->dtype, ch);
        const double sd = sqrt(ampc_ref_load_f64(var->data, var->dtype, ch) + eps);
        const double s = ampc_ref_load_f64(scale->data, scale->dtype, ch);
        const double bb = ampc_ref_load_f64(b->data, b->dtype, ch);
        for (int64_t i = 0; i < batch; i++) {
            const int64_t base = (i * c + ch) * spatial;
            for (int64_t k = 0; k < spatial; k++) {
                double v = ampc_ref_load_f64(x->data, x->dtype, base + k);
                ampc_ref_store_f64(y->data, y->dtype, base + k, (v - m) / sd * s + bb);
            }
        }
    }
    return AMPC_OK;
}

/* Normalises `len` elements starting at `base` with stride 1 of x into y: (x - mean) / sqrt(var
 * + eps), then * scale + bias (per channel ch, or 1 and 0 when scale is NULL). Two passes for
 * the statistics, one for the write. */
static void normalise_row(const ampc_tensor *x, ampc_tensor *y, int64_t base, int64_t len,
                          double eps, double scale, double bias) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < len; j++) sum += ampc_ref_load_f64(x->data, x->dtype, base + j);
    const double mean = sum / (double)len;
    for (int64_t j = 0; j < len; j++) {
        double d = ampc_ref_load_f64(x->data, x->dtype, base + j) - mean;
        sq += d * d;
    }
    const double inv = 1.0 / sqrt(sq / (double)len + eps);
    for (int64_t j = 0; j < len; j++) {
        double v = ampc_ref_load_f64(x->data, x->dtype, base + j);
        ampc_ref_store_f64(y->data, y->dtype, base + j, (v - mean) * inv * scale + bias);
    }
}

ampc_status ampc_ref_instance_norm(ampc_graph *g, const ampc_node *n,
                                   const ampc_tensor *const *in, ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *scale = in[1], *b = in[2];
    const int64_t batch = x->shape.dims[0], c = x->shape.dims[1];
    const int64_t spatial = dims_prod(&x->shape, 2, x->shape.rank);
    const double eps = ampc_norm_params_of(n).eps;
    if (ampc_shape_numel(&x->shape) == 0) return AMPC_OK;
    for (int64_t i = 0; i < batch; i++)
        for (int64_t ch = 0; ch < c; ch++)
            normalise_row(x, out[0], (i * c + ch) * spatial, spatial, eps,
                          ampc_ref_load_f64(scale->data, scale->dtype, ch),
                          ampc_ref_load_f64(b->data, b->dtype, ch));
    return AMPC_OK;
}

/* GroupNormalization: statistics over each group of C / num_groups consecutive channels (with
 * their spatial dims), then the per-channel scale and bias. */
ampc_status ampc_ref_group_norm(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                                ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *scale = in[1], *b = in[2];
    ampc_tensor *y = out[0];
    const int64_t batch = x->shape.dims[0], c = x->shape.dims[1];
    const int64_t spatial = dims_prod(&x->shape, 2, x->shape.rank);
    const int64_t groups = ampc_norm_params_of(n).groups, per = c / groups;
    const int64_t len = per * spatial;
    const double eps = ampc_norm_params_of(n).eps;
    if (ampc_shape_numel(&x->shape) == 0) return AMPC_OK;
    for (int64_t r = 0; r < batch * groups; r++) {
        const int64_t base = r * len;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < len; j++) sum += ampc_ref_load_f64(x->data, x->dtype, base + j);
        const double mean = sum / (double)len;
        for (int64_t j = 0; j < len; j++) {
            double d = ampc_ref_load_f64(x->data, x->dtype, base + j) - mean;
            sq += d * d;
        }
        const double inv = 1.0 / sqrt(sq / (double)len + eps);
        for (int64_t k = 0; k < per; k++) {
            const int64_t ch = (r % groups) * per + k;
            const double s = ampc_ref_load_f64(scale->data, scale->dtype, ch);
            const double bb = ampc_ref_load_f64(b->data, b->dtype, ch);
            for (int64_t j = base + k * spatial; j < base + (k + 1) * spatial; j++) {
                double v = ampc_ref_load_f64(x->data, x->dtype, j);
                ampc_ref_store_f64(y->data, y->dtype, j, (v - mean) * inv * s + bb);
            }
        }
    }
    return AMPC_OK;
}

/* LRN: y = x / (bias + alpha / size * sum of x^2 over channels [c - floor((size - 1) / 2),
 * c + ceil((size - 1) / 2)] clipped to [0, C - 1]) ^ beta. */
ampc_status ampc_ref_lrn(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    const int64_t batch = x->shape.dims[0], c = x->shape.dims[1];
    const int64_t spatial = dims_prod(&x->shape, 2, x->shape.rank);
    const ampc_norm_params np = ampc_norm_params_of(n);
    const int64_t size = np.size;
    const double alpha = np.alpha, beta = np.beta, bias = np.bias;
    const int64_t before = (size - 1) / 2, after = size - 1 - before; /* floor and ceil */
    if (ampc_shape_numel(&x->shape) == 0) return AMPC_OK;
    for (int64_t i = 0; i < batch; i++)
        for (int64_t ch = 0; ch < c; ch++) {
            const int64_t lo = ch - before < 0 ? 0 : ch - before;
            const int64_t hi = ch + after > c - 1 ? c - 1 : ch + after;
            for (int64_t k = 0; k < spatial; k++) {
                double sq = 0;
                for (int64_t w = lo; w <= hi; w++) {
                    double v = ampc_ref_load_f64(x->data, x->dtype, (i * c + w) * spatial + k);
                    sq += v * v;
                }
                const int64_t at = (i * c + ch) * spatial + k;
                const double v = ampc_ref_load_f64(x->data, x->dtype, at);
                ampc_ref_store_f64(y->data, y->dtype, at,
                                   v / pow(bias + alpha / (double)size * sq, beta));
            }
        }
    return AMPC_OK;
}

/* LpNormalization: x / ||x||_p along the axis. A zero norm divides by zero (NaN for 0 / 0), as
 * ONNX's reference does. */
ampc_status ampc_ref_lp_norm(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                             ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    const int32_t rank = x->shape.rank, ax = norm_axis(n, rank);
    const int64_t outer = dims_prod(&x->shape, 0, ax), len = x->shape.dims[ax];
    const int64_t inner = dims_prod(&x->shape, ax + 1, rank);
    const bool l1 = ampc_norm_params_of(n).l1;
    if (ampc_shape_numel(&x->shape) == 0) return AMPC_OK;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const int64_t base = o * len * inner + i;
            double norm = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = ampc_ref_load_f64(x->data, x->dtype, base + k * inner);
                norm += l1 ? fabs(v) : v * v;
            }
            if (!l1) norm = sqrt(norm);
            for (int64_t k = 0; k < len; k++) {
                double v = ampc_ref_load_f64(x->data, x->dtype, base + k * inner);
                ampc_ref_store_f64(y->data, y->dtype, base + k * inner, v / norm);
            }
        }
    return AMPC_OK;
}

/* Advances the multi-index idx over shape s by one element and moves *off, an offset into the
 * statistics (ostride: its stride per dim, 0 along the normalised axes). */
static void stat_step(const ampc_shape *s, const int64_t *ostride, int64_t *idx, int64_t *off) {
    for (int32_t d = s->rank - 1; d >= 0; d--) {
        if (++idx[d] < s->dims[d]) {
            *off += ostride[d];
            return;
        }
        idx[d] = 0;
        *off -= ostride[d] * (s->dims[d] - 1);
    }
}

/* MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) with the statistics over `axes`,
 * as ONNX's function body (whose epsilon is added to the deviation, not the variance). Three
 * linear passes: sums, squared deviations, write. */
ampc_status ampc_ref_mvn(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                         ampc_tensor *const *out) {
    const ampc_tensor *x = in[0];
    ampc_tensor *y = out[0];
    const int32_t rank = x->shape.rank;
    const int64_t count = ampc_shape_numel(&x->shape);
    bool on[AMPC_MAX_RANK];
    ampc_mvn_dims(n, rank, on);
    int64_t ostride[AMPC_MAX_RANK], st = 1, group = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
        if (on[d]) {
            ostride[d] = 0;
            group *= x->shape.dims[d];
        } else {
            ostride[d] = st;
            st *= x->shape.dims[d];
        }
    }
    if (count == 0) return AMPC_OK;
    double *mean = calloc((size_t)st, sizeof(double)), *var = calloc((size_t)st, sizeof(double));
    if (!mean || !var) {
        free(mean);
        free(var);
        return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory for %lld statistics",
                         (long long)st);
    }
    for (int pass = 0; pass < 3; pass++) {
        int64_t idx[AMPC_MAX_RANK] = {0}, off = 0;
        for (int64_t i = 0; i < count; i++) {
            const double v = ampc_ref_load_f64(x->data, x->dtype, i);
            if (pass == 0) mean[off] += v;
            else if (pass == 1) var[off] += (v - mean[off]) * (v - mean[off]);
            else ampc_ref_store_f64(y->data, y->dtype, i, (v - mean[off]) / (var[off] + 1e-9));
            stat_step(&x->shape, ostride, idx, &off);
        }
        for (int64_t k = 0; k < st; k++) {
            if (pass == 0) mean[k] /= (double)group;
            else if (pass == 1) var[k] = sqrt(var[k] / (double)group); /* now the deviation */
        }
    }
    free(mean);
    free(var);
    return AMPC_OK;
}

/* RMSNormalization: x / sqrt(mean(x^2 over dims [axis, rank)) + epsilon) * scale; Y has scale's
 * dtype. */
ampc_status ampc_ref_rms_norm(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                              ampc_tensor *const *out) {
    (void)g;
    const ampc_tensor *x = in[0], *scale = in[1];
    ampc_tensor *y = out[0];
    const int32_t rank = x->shape.rank, ax = norm_axis(n, rank);
    const int64_t outer = dims_prod(&x->shape, 0, ax), inner = dims_prod(&x->shape, ax, rank);
    const double eps = ampc_norm_params_of(n).eps;
    const ampc_shape *shapes[1] = {&scale->shape};
    ampc_bcast_iter it;
    ampc_bcast_iter_init(&it, &x->shape, shapes, 1);
    if (ampc_shape_numel(&x->shape) == 0) return AMPC_OK;
    for (int64_t r = 0; r < outer; r++) {
        const int64_t base = r * inner;
        double sq = 0;
        for (int64_t j = 0; j < inner; j++) {
            double v = ampc_ref_load_f64(x->data, x->dtype, base + j);
            sq += v * v;
        }
        const double inv = 1.0 / sqrt(sq / (double)inner + eps);
        for (int64_t j = 0; j < inner; j++, ampc_bcast_iter_next(&it)) {
            double v = ampc_ref_load_f64(x->data, x->dtype, base + j) * inv *
                       ampc_ref_load_f64(scale->data, scale->dtype, it.off[0]);
            ampc_ref_store_f64(y->data, y->dtype, base + j, v);
        }
    }
    return AMPC_OK;
}
