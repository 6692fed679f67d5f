/*
 * loss.c — reference kernel for NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
 *
 * Input 0 is viewed as [N, C, D] (D the product of the dims after the class dim, 1 for [N, C])
 * and the target as [N, D]. SoftmaxCrossEntropyLoss first takes the log-softmax of its scores
 * over the class dim (shifted by each column's maximum, so no finite score overflows), keeps it
 * in double and writes it to the optional log_prob output; NegativeLogLikelihoodLoss uses its
 * input as the log-probabilities. Then each (n, d) gets
 *     loss = -logp[n, t, d] * w[t]      (w = 1 without a weight input)
 * with loss = 0 and weight 0 where t equals ignore_index. A target outside [0, C) that is not
 * ignore_index is a value error. Reduction "sum" adds the losses; "mean" divides that sum by
 * the sum of the weights applied (the count of targets not ignored without a weight input), so
 * a batch whose targets are all ignored gives 0 / 0 = NaN. Every element is read once per pass:
 * linear.
 */
#include "ref.h"
#include "ir/loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ampc_status ampc_ref_loss(ampc_graph *g, const ampc_node *n, const ampc_tensor *const *in,
                          ampc_tensor *const *out) {
    const ampc_tensor *x = in[0], *t = in[1];
    const ampc_tensor *w = n->n_inputs > 2 ? in[2] : NULL;
    const bool sce = n->op == AMPC_OP_SCE_LOSS;
    const int64_t batch = x->shape.dims[0], c = x->shape.dims[1];
    int64_t inner = 1;
    for (int32_t d = 2; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    const ampc_loss_params lps = ampc_loss_params_of(n);
    const bool has_ignore = lps.has_ignore;
    const int64_t ignore = lps.ignore;
    const int64_t count = ampc_shape_numel(&x->shape);

    /* SCE: log-softmax over dim 1 of each [n, :, d] column, in double. */
    double *lp = NULL;
    if (sce) {
        lp = malloc((size_t)(count ? count : 1) * sizeof(double));
        if (!lp) return AMPC_FAIL(g, n, AMPC_E_OOM, "out of host memory for %lld log-probabilities",
                                  (long long)count);
        for (int64_t i = 0; count && i < batch; i++)
            for (int64_t d = 0; d < inner; d++) {
                const int64_t base = i * c * inner + d;
                double mx = -INFINITY, sum = 0;
                for (int64_t k = 0; k < c; k++) {
                    double v = ampc_ref_load_f64(x->data, x->dtype, base + k * inner);
                    if (v > mx || isnan(v)) mx = v;
                }
                for (int64_t k = 0; k < c; k++)
                    sum += exp(ampc_ref_load_f64(x->data, x->dtype, base + k * inner) - mx);
                const double log_sum = log(sum);
                for (int64_t k = 0; k < c; k++) {
                    const int64_t at = base + k * inner;
                    lp[at] = ampc_ref_load_f64(x->data, x->dtype, at) - mx - log_sum;
                    if (n->n_outputs > 1) ampc_ref_store_f64(out[1]->data, out[1]->dtype, at, lp[at]);
                }
            }
    }

    double total = 0, wsum = 0;
    const bool none = lps.reduction == AMPC_LOSS_NONE;
    for (int64_t i = 0; i < batch; i++)
        for (int64_t d = 0; d < inner; d++) {
            const int64_t at = i * inner + d; /* the target's element */
            const int64_t cls = ampc_ref_load_i64(t->data, t->dtype, at);
            double loss = 0, wt = 0;
            if (!has_ignore || cls != ignore) {
                if (cls < 0 || cls >= c) {
                    free(lp);
                    return AMPC_FAIL(g, n, AMPC_E_EVAL,
                                     "input 1 '%s' holds %lld at element %lld, outside the class "
                                     "range [0, %lld)%s",
                                     n->inputs[1]->name, (long long)cls, (long long)at,
                                     (long long)c, has_ignore ? " and not ignore_index" : "");
                }
                const int64_t src = (i * c + cls) * inner + d;
                const double logp = sce ? lp[src] : ampc_ref_load_f64(x->data, x->dtype, src);
                wt = w ? ampc_ref_load_f64(w->data, w->dtype, cls) : 1.0;
                loss = -logp * wt;
            }
            if (none) ampc_ref_store_f64(out[0]->data, out[0]->dtype, at, loss);
            total += loss;
            wsum += wt;
        }
    if (!none)
        ampc_ref_store_f64(out[0]->data, out[0]->dtype, 0,
                           lps.reduction == AMPC_LOSS_SUM ? total : total / wsum);
    free(lp);
    return AMPC_OK;
}
