/*
 * lower_loss.c — generated kernels for the loss family (ir/infer/loss.c, ir/ref/loss.c):
 * NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, LOWER_NORM rows dispatched from
 * lower_norm.c. One thread per (n, d) column; reductions "sum" and "mean" run in one block that
 * reduces the partial sums. Edge cases follow the reference: a loss whose targets are all ignored
 * is 0 / 0.
 */
#include "codegen.h"
#include "ir/loss.h"

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ------------------------------------- */

/* Input 0 viewed as [N, C, D] and the target as [N, D]: column i = n * D + d holds the classes
 * of one target. SCE takes the column's log-softmax first (and writes log_prob when asked). */
ampc_status ampc_cg_lower_loss(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *t = n->inputs[1];
    const ampc_value *w = n->n_inputs > 2 ? n->inputs[2] : NULL;
    const ampc_value *y = n->outputs[0], *lp = n->n_outputs > 1 ? n->outputs[1] : NULL;
    const bool sce = n->op == AMPC_OP_SCE_LOSS;
    const int64_t batch = x->shape.dims[0], c = x->shape.dims[1];
    const int64_t inner = ampc_cg_dims_prod(&x->shape, 2, x->shape.rank), cols = batch * inner;
    const ampc_loss_params lps = ampc_loss_params_of(n);
    const bool none = lps.reduction == AMPC_LOSS_NONE, sum = lps.reduction == AMPC_LOSS_SUM;
    const bool has_ignore = lps.has_ignore;
    /* "none" with no column has nothing to write; "sum" / "mean" of nothing still writes 0 or
     * 0 / 0 into its scalar. */
    if (ampc_ir_numel(y) == 0 && (!lp || ampc_ir_numel(lp) == 0)) return AMPC_OK;
    const ampc_value *all[3] = {x, w, NULL};
    const char *at = ampc_cg_acc_type(all, 2), *yt = ampc_cg_ctype(y->dtype);

    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *pt = ampc_cg_param(k, t, false);
    const char *pw = w ? ampc_cg_param(k, w, false) : NULL;
    const char *py = ampc_cg_param(k, y, true), *pl = lp ? ampc_cg_param(k, lp, true) : NULL;
    /* "none": a thread per (n, d) column; "sum" / "mean": one block of 256 threads striding over
     * the columns, then a block reduction of the loss and weight sums. */
    if (none) {
        ampc_cg_grid_loop(k, cols);
    } else {
        ampc_cg_line(k, "%s tot = (%s)0, wsum = (%s)0;", at, at, at);
        ampc_cg_open(k, "for (long long i = threadIdx.x; i < %lldLL; i += 256)", (long long)cols);
    }
    ampc_cg_line(k, "const long long b = (i / %lldLL) * %lldLL + i %% %lldLL; /* class 0 of column i */",
                 (long long)inner, (long long)(c * inner), (long long)inner);
    if (sce) {
        /* log-softmax over the classes of the column, max-shifted */
        ampc_cg_line(k, "%s mx = -(%s)INFINITY, s = (%s)0;", at, at, at);
        ampc_cg_line(k, "for (long long j = 0; j < %lldLL; j++) mx = ampc::red_max()(mx, ampc::cvt<%s>(%s[b + j * %lldLL]));",
                     (long long)c, at, px, (long long)inner);
        ampc_cg_line(k, "for (long long j = 0; j < %lldLL; j++) s += ampc::m_exp(ampc::cvt<%s>(%s[b + j * %lldLL]) - mx);",
                     (long long)c, at, px, (long long)inner);
        ampc_cg_line(k, "const %s ls = ampc::m_log(s);", at);
        if (pl)
            ampc_cg_line(k, "for (long long j = 0; j < %lldLL; j++) %s[b + j * %lldLL] = ampc::cvt<%s>(ampc::cvt<%s>(%s[b + j * %lldLL]) - mx - ls);",
                         (long long)c, pl, (long long)inner, ampc_cg_ctype(lp->dtype), at, px, (long long)inner);
    }
    ampc_cg_line(k, "const long long cls = (long long)%s[i];", pt);
    ampc_cg_line(k, "%s loss = (%s)0, wt = (%s)0;", at, at, at);
    if (has_ignore) ampc_cg_open(k, "if (cls != %lldLL)", (long long)lps.ignore);
    else ampc_cg_open(k, "if (true)");
    /* A class outside [0, C) is a value error on the reference evaluator; here it gives NaN. */
    ampc_cg_open(k, "if (cls < 0 || cls >= %lldLL)", (long long)c);
    ampc_cg_line(k, "loss = wt = (%s)NAN;", at);
    ampc_cg_close(k);
    ampc_cg_open(k, "else");
    ampc_cg_line(k, "const %s logp = ampc::cvt<%s>(%s[b + cls * %lldLL])%s;", at, at, px, (long long)inner,
                 sce ? " - mx - ls" : "");
    if (pw) ampc_cg_line(k, "wt = ampc::cvt<%s>(%s[cls]);", at, pw);
    else ampc_cg_line(k, "wt = (%s)1;", at);
    ampc_cg_line(k, "loss = -logp * wt;");
    ampc_cg_close(k);
    ampc_cg_close(k);
    if (none) {
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(loss);", py, yt);
        ampc_cg_line(k, "(void)wt;");
        ampc_cg_close(k);
        return ampc_cg_kernel_end(k, cols, 256);
    }
    ampc_cg_line(k, "tot += loss;");
    ampc_cg_line(k, "wsum += wt;");
    ampc_cg_close(k);
    ampc_cg_line(k, "tot = ampc::block_allreduce(tot, ampc::red_add(), (%s)0);", at);
    ampc_cg_line(k, "wsum = ampc::block_allreduce(wsum, ampc::red_add(), (%s)0);", at);
    ampc_cg_line(k, "if (threadIdx.x == 0) %s[0] = ampc::cvt<%s>(%s);", py, yt, sum ? "tot" : "tot / wsum");
    if (sum) ampc_cg_line(k, "(void)wsum;");
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {256, 1, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, 0);
}

