/*
 * lower_norm.c — generated kernels for the LOWER_NORM family: Softmax, LogSoftmax, Hardmax,
 * LpNormalization, LayerNormalization, RMSNormalization, InstanceNormalization,
 * GroupNormalization, MeanVarianceNormalization, BatchNormalization (inference) and LRN; its kind
 * also takes the losses to lower_loss.c.
 *
 * Most of them are row operations: the input is viewed as rows of `len` elements (Softmax,
 * Hardmax and LpNorm as [outer, len, inner] around their axis; LayerNorm and RMSNorm as
 * [outer, inner] split at their axis; InstanceNorm as [N * C, spatial]; GroupNorm as
 * [N * groups, C / groups * spatial]; MVN groups elements by its kept dims like a reduction).
 * A row is handled by one thread, one warp or one block (make_rows), which makes a fixed number
 * of passes over it: statistics reduced across the row's threads with kernels/reduce.cuh, then
 * the write. Softmax subtracts the row maximum; statistics are two-pass (mean, then squared
 * deviations) in f32 (f64 for f64 tensors or stash_type f64), as the reference evaluator
 * (ir/ref/norm.c) computes them in double. BatchNormalization and LRN are one thread per element.
 * Edge cases follow the reference: a NaN row stays NaN, an empty LayerNorm row has NaN
 * statistics, a zero norm divides by zero.
 */
#include "codegen.h"
#include "ir/norm.h"

#include <stdio.h>
#include <string.h>

/* Opens "for (long long j = <first>; j < len; j += w)": the row elements of this thread. */
static void open_row_loop(ampc_cg_kernel *k, const ampc_cg_rows *r, int64_t len) {
    ampc_cg_open(k, "for (long long j = %s; j < %lldLL; j += %d)", ampc_cg_rows_tid(r), (long long)len, r->w);
}

/* Emits "v = row_allreduce<w>(v, op, id);" when a row has several threads. */
static void allreduce(ampc_cg_kernel *k, const ampc_cg_rows *r, const char *v, const char *op, const char *id) {
    if (r->w > 1) ampc_cg_line(k, "%s = ampc::row_allreduce<%d>(%s, %s, %s);", v, r->w, v, op, id);
}

/* "if (threadIdx.x == 0) " when a row has several threads: per-row writes happen once. */
static const char *first_only(const ampc_cg_rows *r) { return r->w > 1 ? "if (threadIdx.x == 0) " : ""; }

/* ---- attributes and shapes ------------------------------------------------------------------ */




/* The accumulation type for float tensors: double when any is f64, else float. */

/* The accumulation type of a statistics-computing op: acc_type of its tensors, or double when
 * stash_type (the statistics' precision) asks for f64. */
static const char *stash_acc_type(const ampc_node *n, const ampc_value *const *vs, int32_t k) {
    return ampc_norm_params_of(n).stash_f64 ? "double" : ampc_cg_acc_type(vs, k);
}

/* Emits the base offset `b` of row `row` of [outer, len, inner] (element j at b + j * inner). */
static void emit_axis_base(ampc_cg_kernel *k, int64_t len, int64_t inner) {
    if (inner == 1) ampc_cg_line(k, "const long long b = row * %lldLL;", (long long)len);
    else
        ampc_cg_line(k, "const long long b = (row / %lldLL) * %lldLL + row %% %lldLL;", (long long)inner,
                     (long long)(len * inner), (long long)inner);
}

/* ---- Softmax, LogSoftmax, Hardmax, LpNormalization: along one axis ---------------------------- */

/* One kernel: a row per thread, warp or block (make_rows) of the [outer, len, inner] view; every
 * row's threads read its elements j = tid, tid + w, ... and combine partial results with
 * row_allreduce before the write pass. */
static ampc_status lower_axis_op(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    if (ampc_ir_numel(x) == 0) return AMPC_OK;
    const int32_t rank = x->shape.rank, ax = ampc_axis_of(n, rank);
    const int64_t len = x->shape.dims[ax], inner = ampc_cg_dims_prod(&x->shape, ax + 1, rank);
    const int64_t outer = ampc_cg_dims_prod(&x->shape, 0, ax);
    const char *at = ampc_cg_acc_type(&x, 1), *yt = ampc_cg_ctype(y->dtype);
    ampc_cg_rows r = ampc_cg_rows_make(outer * inner, len, inner == 1);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    char elem[64]; /* element j of the row */
    snprintf(elem, sizeof elem, "%s[b + j * %lldLL]", px, (long long)inner);
    ampc_cg_rows_open(k, &r);
    emit_axis_base(k, len, inner);

    switch (n->op) {
    case AMPC_OP_SOFTMAX: case AMPC_OP_LOG_SOFTMAX: case AMPC_OP_SAFE_SOFTMAX: {
        /* max (NaN sticks), sum of exp(x - max), write (SafeSoftmax: a NaN written as 0) */
        ampc_cg_line(k, "%s mx = -(%s)INFINITY;", at, at);
        open_row_loop(k, &r, len);
        ampc_cg_line(k, "mx = ampc::red_max()(mx, ampc::cvt<%s>(%s));", at, elem);
        ampc_cg_close(k);
        char id[48];
        snprintf(id, sizeof id, "-(%s)INFINITY", at);
        allreduce(k, &r, "mx", "ampc::red_max()", id);
        ampc_cg_line(k, "%s s = (%s)0;", at, at);
        open_row_loop(k, &r, len);
        ampc_cg_line(k, "s += ampc::m_exp(ampc::cvt<%s>(%s) - mx);", at, elem);
        ampc_cg_close(k);
        snprintf(id, sizeof id, "(%s)0", at);
        allreduce(k, &r, "s", "ampc::red_add()", id);
        if (n->op == AMPC_OP_LOG_SOFTMAX) ampc_cg_line(k, "const %s ls = ampc::m_log(s);", at);
        open_row_loop(k, &r, len);
        ampc_cg_line(k, "const %s d = ampc::cvt<%s>(%s) - mx;", at, at, elem);
        if (n->op == AMPC_OP_SAFE_SOFTMAX) {
            ampc_cg_line(k, "const %s v = ampc::m_exp(d) / s;", at);
            ampc_cg_line(k, "%s[b + j * %lldLL] = ampc::cvt<%s>(v == v ? v : (%s)0);", py,
                         (long long)inner, yt, at);
        } else {
            ampc_cg_line(k, "%s[b + j * %lldLL] = ampc::cvt<%s>(%s);", py, (long long)inner, yt,
                         n->op == AMPC_OP_LOG_SOFTMAX ? "d - ls" : "ampc::m_exp(d) / s");
        }
        ampc_cg_close(k);
        break;
    }
    case AMPC_OP_HARDMAX:
        /* 1 at the first maximum (a NaN counts as the maximum), 0 elsewhere */
        ampc_cg_line(k, "%s bv = (%s)0;", at, at);
        ampc_cg_line(k, "long long bi = -1;");
        open_row_loop(k, &r, len);
        ampc_cg_line(k, "const %s v = ampc::cvt<%s>(%s);", at, at, elem);
        ampc_cg_line(k, "if (ampc::arg_better<true, false>(bv, bi, v, j)) bv = v, bi = j;");
        ampc_cg_close(k);
        ampc_cg_line(k, "ampc::row_argreduce<%d, true, false>(bv, bi);", r.w);
        open_row_loop(k, &r, len);
        ampc_cg_line(k, "%s[b + j * %lldLL] = ampc::cvt<%s>(j == bi ? 1.0f : 0.0f);", py, (long long)inner, yt);
        ampc_cg_close(k);
        break;
    case AMPC_OP_LP_NORM: {
        /* x / (sum |x|) or x / sqrt(sum x^2); a zero norm divides by zero, as the reference */
        const bool l1 = ampc_norm_params_of(n).l1;
        ampc_cg_line(k, "%s s = (%s)0;", at, at);
        open_row_loop(k, &r, len);
        ampc_cg_line(k, "const %s v = ampc::cvt<%s>(%s);", at, at, elem);
        ampc_cg_line(k, "s += %s;", l1 ? "ampc::m_abs(v)" : "v * v");
        ampc_cg_close(k);
        char id[48];
        snprintf(id, sizeof id, "(%s)0", at);
        allreduce(k, &r, "s", "ampc::red_add()", id);
        if (!l1) ampc_cg_line(k, "s = ampc::m_sqrt(s);");
        open_row_loop(k, &r, len);
        ampc_cg_line(k, "%s[b + j * %lldLL] = ampc::cvt<%s>(ampc::cvt<%s>(%s) / s);", py, (long long)inner, yt,
                     at, elem);
        ampc_cg_close(k);
        break;
    }
    default: AMPC_ASSERT(!"not an axis op");
    }
    ampc_cg_close(k);
    return ampc_cg_rows_end(k, &r);
}

/* ---- LayerNorm, RMSNorm, InstanceNorm, GroupNorm: contiguous rows with statistics ------------ */

/* How a statistics row is normalised. */
typedef struct stat_row {
    int64_t n_rows, len;
    bool center;       /* subtract the mean (all but RMSNorm) */
    double eps;
    const char *at;    /* accumulation type */
} stat_row;

/* Emits the statistics of row `row` (elements px[b + j], j < len): `mean` (0 when not centred)
 * and `inv` = 1 / sqrt(var + eps), var the mean squared deviation. */
static void emit_stats(ampc_cg_kernel *k, const ampc_cg_rows *r, const stat_row *s, const char *px) {
    const char *at = s->at;
    char id[48];
    snprintf(id, sizeof id, "(%s)0", at);
    ampc_cg_line(k, "const long long b = row * %lldLL;", (long long)s->len);
    if (s->center) {
        ampc_cg_line(k, "%s sum = (%s)0;", at, at);
        open_row_loop(k, r, s->len);
        ampc_cg_line(k, "sum += ampc::cvt<%s>(%s[b + j]);", at, px);
        ampc_cg_close(k);
        allreduce(k, r, "sum", "ampc::red_add()", id);
        if (s->len) ampc_cg_line(k, "const %s mean = sum / (%s)%lld;", at, at, (long long)s->len);
        else ampc_cg_line(k, "const %s mean = (%s)NAN; /* an empty row: 0 / 0 */", at, at);
    } else {
        ampc_cg_line(k, "const %s mean = (%s)0;", at, at);
    }
    ampc_cg_line(k, "%s sq = (%s)0;", at, at);
    open_row_loop(k, r, s->len);
    ampc_cg_line(k, "const %s d = ampc::cvt<%s>(%s[b + j]) - mean;", at, at, px);
    ampc_cg_line(k, "sq += d * d;");
    ampc_cg_close(k);
    allreduce(k, r, "sq", "ampc::red_add()", id);
    if (s->len)
        ampc_cg_line(k, "const %s inv = (%s)1 / ampc::m_sqrt(sq / (%s)%lld + (%s)%s);", at, at, at,
                     (long long)s->len, at, ampc_cg_f64(s->eps).s);
    else ampc_cg_line(k, "const %s inv = (%s)NAN;", at, at);
}

/* The offset into p (Scale or B, which broadcasts to x) of element e = b + j of a row of the
 * normalised dims [ax, rank): "j" when p holds exactly one row (the usual [C] or [H, W]),
 * else computed from e by broadcasting. */
static bool is_one_row(const ampc_value *x, const ampc_value *p, int32_t ax) {
    const int32_t shift = x->shape.rank - p->shape.rank;
    bool one_row = ampc_ir_numel(p) == ampc_cg_dims_prod(&x->shape, ax, x->shape.rank);
    for (int32_t d = 0; d < p->shape.rank; d++)
        if (d + shift < ax && p->shape.dims[d] != 1) one_row = false;
    return one_row;
}

static const char *row_param_offset(ampc_cg_kernel *k, const ampc_value *x, const ampc_value *p, int32_t ax) {
    return is_one_row(x, p, ax) ? "j" : ampc_cg_bcast_offset(k, &x->shape, &p->shape, "e");
}

/* The tensors of a LayerNormalization or RMSNormalization node (absent ones NULL). */
typedef struct norm_io {
    const ampc_value *x, *scale, *bias, *y, *mean, *inv;
    int32_t ax;
    const ampc_value *out;  /* what the kernel writes: y, or the output of a Cast or Mul of y */
    const ampc_node *cast;  /* that Cast or Mul, or NULL */
    const ampc_value *post; /* the Mul's other operand (ampc_ir_norm_post_scale), or NULL */
} norm_io;

/* The vector width of the warp-row kernel (kernels/reduce.cuh's norm_rows_warp) for these rows,
 * or 0 when they do not fit it: rows longer than 2048 (the registers a lane holds) or not a
 * multiple of 32 elements, f64 statistics, Scale or B broadcast over rows, mean and inv outputs
 * of different types. */
static int32_t warp_rows_vec(const stat_row *s, const norm_io *t) {
    if (strcmp(s->at, "float") != 0 || s->len > 2048 || s->len % 32 != 0) return 0;
    if (!is_one_row(t->x, t->scale, t->ax) || (t->bias && !is_one_row(t->x, t->bias, t->ax)) ||
        (t->post && !is_one_row(t->x, t->post, t->ax)))
        return 0;
    if (t->mean && t->inv && t->mean->dtype != t->inv->dtype) return 0;
    int32_t vec = 16 / (int32_t)ampc_dtype_size(t->x->dtype);
    while (vec > 1 && s->len % (32 * vec) != 0) vec /= 2;
    return vec;
}

/* The norm's input X as kernel k reads it: its parameter or, when a chain of fused elementwise
 * ops computes it (fuse-elementwise), `xf`, an ampc::elem_fn of the flat index that computes each
 * element where the kernel reads it (no kernel of its own, no tensor). xf[e] reads either. The
 * lambda holds copies of the pointers it reads ([=]), not references to the parameters. */
static const char *norm_input(ampc_cg *cg, ampc_cg_kernel *k, const ampc_value *x) {
    if (!(x->flags & AMPC_VALUE_FUSED)) return ampc_cg_param(k, x, false);
    ampc_cg_open(k, "const auto xf = ampc::elem_fn_of([=](long long i)");
    char v[16];
    ampc_cg_chain_element(cg, k, x->producer, true, v, sizeof v);
    ampc_cg_line(k, "return %s;", v);
    ampc_cg_close_with(k, "});");
    return "xf";
}

/* The rows with norm_rows_warp: a warp a row, four rows a block. */
enum { HOLD_ROWS = 1024 };
static ampc_status lower_norm_warp_rows(ampc_cg *cg, const ampc_node *n, const stat_row *s,
                                        const norm_io *t, int32_t vec) {
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    if (t->cast) ampc_cg_kernel_covers(k, t->cast);
    const bool fused = t->x->flags & AMPC_VALUE_FUSED; /* a chain's lambda, emitted below */
    const char *px = fused ? NULL : norm_input(cg, k, t->x), *ps = ampc_cg_param(k, t->scale, false);
    const char *pb = t->bias ? ampc_cg_param(k, t->bias, false) : "(const float *)nullptr";
    const char *py = ampc_cg_param(k, t->out, true);
    const ampc_value *stat = t->mean ? t->mean : t->inv;
    char none[64];
    snprintf(none, sizeof none, "(%s *)nullptr", stat ? ampc_cg_ctype(stat->dtype) : "float");
    const char *pm = t->mean ? ampc_cg_param(k, t->mean, true) : none;
    const char *pi = t->inv ? ampc_cg_param(k, t->inv, true) : none;
    /* Scale and B held in registers while the rows are few (HOLD_ROWS: a grid of at most 256
     * blocks, latency-bound), read before waiting when they are constants (reduce.cuh) */
    const bool hold = s->n_rows <= HOLD_ROWS && s->len <= 1024;
    const bool const_sb = t->scale->data && (!t->bias || t->bias->data);
    ampc_cg_kernel_pdl_in_body(k);
    if (fused) px = norm_input(cg, k, t->x);
    char post[96] = "";
    if (t->post) snprintf(post, sizeof post, ", %s", ampc_cg_param(k, t->post, false));
    ampc_cg_line(k, "ampc::norm_rows_warp<%lld, %d, %s, %d, %s>(%s, %s, %s, %s, %s, %s, (float)%s, "
                 "%lldLL%s);", (long long)s->len, vec, s->center ? "true" : "false",
                 hold ? (const_sb ? 2 : 1) : 0, ampc_cg_ctype(t->y->dtype), px, ps, pb, py, pm, pi,
                 ampc_cg_f64(s->eps).s, (long long)s->n_rows, post);
    int64_t blocks = (s->n_rows + 3) / 4;
    if (blocks > 65536) blocks = 65536;
    const uint32_t grid[3] = {(uint32_t)blocks, 1, 1}, block[3] = {32, 4, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, 0);
}

/* LayerNormalization and RMSNormalization: rows [outer, inner] split at the axis; Scale and B
 * broadcast to X (their offsets from the element's flat index). The kernel writes `out`: the
 * norm's output, or the output of the Cast or the Mul by a constant that reads it (fused:
 * passes/fuse_elementwise.c), each value rounded to the norm's type first, then multiplied and
 * rounded again as the Mul's own kernel would. */
static ampc_status lower_layer_norm(ampc_cg *cg, const ampc_node *n, const ampc_node *cast) {
    const bool rms = n->op == AMPC_OP_RMS_NORM;
    const ampc_value *x = n->inputs[0], *scale = n->inputs[1];
    const ampc_value *bias = !rms && n->n_inputs > 2 ? n->inputs[2] : NULL;
    const ampc_value *y = n->outputs[0], *out = cast ? cast->outputs[0] : y;
    const int32_t pk = cast ? ampc_ir_norm_post_scale(n, cast) : -1;
    const ampc_value *post = pk >= 0 ? cast->inputs[pk] : NULL;
    const ampc_value *mean_out = !rms && n->n_outputs > 1 ? n->outputs[1] : NULL;
    const ampc_value *inv_out = !rms && n->n_outputs > 2 ? n->outputs[2] : NULL;
    const int32_t rank = x->shape.rank, ax = ampc_axis_of(n, rank);
    stat_row s = {ampc_cg_dims_prod(&x->shape, 0, ax), ampc_cg_dims_prod(&x->shape, ax, rank), !rms,
                  ampc_norm_params_of(n).eps, NULL};
    const ampc_value *all[4] = {x, scale, bias, y};
    s.at = stash_acc_type(n, all, 4);
    const bool stats = (mean_out && ampc_ir_numel(mean_out)) || (inv_out && ampc_ir_numel(inv_out));
    if (s.n_rows == 0 || (ampc_ir_numel(y) == 0 && !stats)) return AMPC_OK;
    if (x->flags & AMPC_VALUE_FUSED) { /* a chain computes X in this kernel */
        ampc_status st = ampc_cg_chain_check(cg, x->producer);
        if (st != AMPC_OK) return st;
    }
    const norm_io t = {x, scale, bias, y, mean_out && ampc_ir_numel(mean_out) ? mean_out : NULL,
                       inv_out && ampc_ir_numel(inv_out) ? inv_out : NULL, ax, out, cast, post};
    const int32_t vec = ampc_ir_numel(y) ? warp_rows_vec(&s, &t) : 0;
    if (vec > 0) return lower_norm_warp_rows(cg, n, &s, &t, vec);
    ampc_cg_rows r = ampc_cg_rows_make(s.n_rows, s.len, true);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    if (cast) ampc_cg_kernel_covers(k, cast);
    const char *px = norm_input(cg, k, x), *ps = ampc_cg_param(k, scale, false);
    const char *pb = bias ? ampc_cg_param(k, bias, false) : NULL;
    const char *py = ampc_cg_param(k, out, true);
    const char *pm = mean_out ? ampc_cg_param(k, mean_out, true) : NULL;
    const char *pi = inv_out ? ampc_cg_param(k, inv_out, true) : NULL;
    ampc_cg_rows_open(k, &r);
    emit_stats(k, &r, &s, px);
    open_row_loop(k, &r, s.len);
    ampc_cg_line(k, "const long long e = b + j;");
    const char *so = row_param_offset(k, x, scale, ax);
    const char *bo = bias ? row_param_offset(k, x, bias, ax) : NULL;
    ampc_cg_line(k, "%s v = (ampc::cvt<%s>(%s[e]) - mean) * inv * ampc::cvt<%s>(%s[%s]);", s.at, s.at, px, s.at,
                 ps, so);
    if (bias) ampc_cg_line(k, "v += ampc::cvt<%s>(%s[%s]);", s.at, pb, bo);
    if (post) /* the Mul's arithmetic on the norm's rounded value, in f32 (its types') */
        ampc_cg_line(k, "%s[e] = ampc::cvt<%s>(ampc::cvt<float>(ampc::cvt<%s>(v)) * "
                     "ampc::cvt<float>(%s[%s]));", py, ampc_cg_ctype(out->dtype),
                     ampc_cg_ctype(y->dtype), ampc_cg_param(k, post, false),
                     row_param_offset(k, x, post, ax));
    else if (out == y) ampc_cg_line(k, "%s[e] = ampc::cvt<%s>(v);", py, ampc_cg_ctype(y->dtype));
    else ampc_cg_line(k, "%s[e] = ampc::cvt<%s>(ampc::cvt<%s>(v));", py, ampc_cg_ctype(out->dtype),
                      ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    if (pm) ampc_cg_line(k, "%s%s[row] = ampc::cvt<%s>(mean);", first_only(&r), pm, ampc_cg_ctype(mean_out->dtype));
    if (pi) ampc_cg_line(k, "%s%s[row] = ampc::cvt<%s>(inv);", first_only(&r), pi, ampc_cg_ctype(inv_out->dtype));
    ampc_cg_close(k);
    return ampc_cg_rows_end(k, &r);
}

/* InstanceNormalization (rows [N * C, spatial], scale and B per channel row % C) and
 * GroupNormalization (rows [N * G, C / G * spatial], channel (row % G) * C/G + j / spatial). */
static ampc_status lower_channel_norm(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *scale = n->inputs[1], *bias = n->inputs[2], *y = n->outputs[0];
    if (ampc_ir_numel(x) == 0) return AMPC_OK;
    const int64_t batch = x->shape.dims[0], c = x->shape.dims[1];
    const int64_t spatial = ampc_cg_dims_prod(&x->shape, 2, x->shape.rank);
    const bool group = n->op == AMPC_OP_GROUP_NORM;
    const int64_t groups = group ? ampc_norm_params_of(n).groups : c, per = c / groups;
    const ampc_value *all[3] = {x, scale, bias};
    stat_row s = {batch * groups, per * spatial, true, ampc_norm_params_of(n).eps,
                  stash_acc_type(n, all, 3)};
    ampc_cg_rows r = ampc_cg_rows_make(s.n_rows, s.len, true);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *ps = ampc_cg_param(k, scale, false);
    const char *pb = ampc_cg_param(k, bias, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_rows_open(k, &r);
    emit_stats(k, &r, &s, px);
    if (!group) {
        ampc_cg_line(k, "const long long ch = row %% %lldLL;", (long long)c);
        ampc_cg_line(k, "const %s sc = ampc::cvt<%s>(%s[ch]), bi = ampc::cvt<%s>(%s[ch]);", s.at, s.at, ps, s.at,
                     pb);
    }
    open_row_loop(k, &r, s.len);
    if (group) {
        ampc_cg_line(k, "const long long ch = (row %% %lldLL) * %lldLL + j / %lldLL;", (long long)groups,
                     (long long)per, (long long)spatial);
        ampc_cg_line(k, "const %s sc = ampc::cvt<%s>(%s[ch]), bi = ampc::cvt<%s>(%s[ch]);", s.at, s.at, ps, s.at,
                     pb);
    }
    ampc_cg_line(k, "%s[b + j] = ampc::cvt<%s>((ampc::cvt<%s>(%s[b + j]) - mean) * inv * sc + bi);", py,
                 ampc_cg_ctype(y->dtype), s.at, px);
    ampc_cg_close(k);
    ampc_cg_close(k);
    return ampc_cg_rows_end(k, &r);
}

/* ---- MeanVarianceNormalization: statistics over any axes ------------------------------------- */

typedef struct dims {
    int32_t n;
    int64_t size[AMPC_MAX_RANK], stride[AMPC_MAX_RANK];
} dims;

/* Splits s into kept and normalised (on) dims, outermost first, size-1 dims dropped and
 * neighbours of one kind merged (as lower_reduce.c does for reductions). */
static void split_dims(const ampc_shape *s, const bool *on, dims *kept, dims *red) {
    int64_t st[AMPC_MAX_RANK], acc = 1;
    for (int32_t d = s->rank - 1; d >= 0; d--) st[d] = acc, acc *= s->dims[d];
    kept->n = red->n = 0;
    int last = -1;
    for (int32_t d = 0; d < s->rank; d++) {
        if (s->dims[d] == 1) continue;
        dims *l = on[d] ? red : kept;
        if (last == (int)on[d]) {
            l->size[l->n - 1] *= s->dims[d];
            l->stride[l->n - 1] = st[d];
        } else {
            l->size[l->n] = s->dims[d];
            l->stride[l->n] = st[d];
            l->n++;
        }
        last = on[d];
    }
}

/* Emits the offset of flat index idx over the dims of l; returns its name. */
static const char *emit_offset(ampc_cg_kernel *k, const dims *l, const char *idx) {
    if (l->n == 0) return "0LL";
    const char *off = ampc_cg_local(k, "o"), *rem = ampc_cg_local(k, "q");
    ampc_cg_line(k, "long long %s = 0, %s = %s;", off, rem, idx);
    for (int32_t j = l->n - 1; j > 0; j--) {
        ampc_cg_line(k, "%s += (%s %% %lldLL) * %lldLL;", off, rem, (long long)l->size[j],
                     (long long)l->stride[j]);
        ampc_cg_line(k, "%s /= %lldLL;", rem, (long long)l->size[j]);
    }
    ampc_cg_line(k, "%s += %s * %lldLL;", off, rem, (long long)l->stride[0]);
    return off;
}

/* A row per statistics group (the product of the kept dims): its base offset decomposes the row
 * index over the kept dims, each element's offset its index over the normalised ones. */
static ampc_status lower_mvn(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    if (ampc_ir_numel(x) == 0) return AMPC_OK;
    const int32_t rank = x->shape.rank;
    bool on[AMPC_MAX_RANK];
    ampc_mvn_dims(n, rank, on);
    int64_t group = 1;
    for (int32_t d = 0; d < rank; d++)
        if (on[d]) group *= x->shape.dims[d];
    dims kept, red;
    split_dims(&x->shape, on, &kept, &red);
    const char *at = ampc_cg_acc_type(&x, 1), *yt = ampc_cg_ctype(y->dtype);
    const bool contiguous = red.n == 1 && red.stride[0] == 1;
    ampc_cg_rows r = ampc_cg_rows_make(ampc_ir_numel(x) / group, group, contiguous);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    char id[48];
    snprintf(id, sizeof id, "(%s)0", at);
    ampc_cg_rows_open(k, &r);
    const char *base = emit_offset(k, &kept, "row");
    /* Three passes over the group: sum, squared deviations, write (x - mean) / (sd + 1e-9). */
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 0) ampc_cg_line(k, "%s sum = (%s)0;", at, at);
        if (pass == 1) ampc_cg_line(k, "%s sq = (%s)0;", at, at);
        open_row_loop(k, &r, group);
        const char *off = emit_offset(k, &red, "j");
        ampc_cg_line(k, "const long long e = %s + %s;", base, off);
        ampc_cg_line(k, "const %s v = ampc::cvt<%s>(%s[e]);", at, at, px);
        if (pass == 0) ampc_cg_line(k, "sum += v;");
        if (pass == 1) ampc_cg_line(k, "sq += (v - mean) * (v - mean);");
        if (pass == 2) ampc_cg_line(k, "%s[e] = ampc::cvt<%s>((v - mean) / (sd + (%s)1e-9));", py, yt, at);
        ampc_cg_close(k);
        if (pass == 0) {
            allreduce(k, &r, "sum", "ampc::red_add()", id);
            ampc_cg_line(k, "const %s mean = sum / (%s)%lld;", at, at, (long long)group);
        }
        if (pass == 1) {
            allreduce(k, &r, "sq", "ampc::red_add()", id);
            ampc_cg_line(k, "const %s sd = ampc::m_sqrt(sq / (%s)%lld);", at, at, (long long)group);
        }
    }
    ampc_cg_close(k);
    return ampc_cg_rows_end(k, &r);
}

/* ---- BatchNormalization and LRN: a thread per element --------------------------------------- */

/* The statements giving `q`, BatchNormalization's output (and the Relu's, with `relu`) of one
 * element, in y's type, from `xv` (the element of X in at) at channel `ch`: Y = (X - mean) /
 * sqrt(var + epsilon) * scale + B, the Relu applied to the value rounded to yt (the norm's
 * type: a Relu keeps it). */
static void batch_norm_value(ampc_cg_kernel *k, const ampc_node *n, bool relu, const char *at,
                             const char *yt, const char *const *p, const char *xv, const char *ch) {
    ampc_cg_line(k, "const %s sd = ampc::m_sqrt(ampc::cvt<%s>(%s[%s]) + (%s)%s);", at, at, p[4], ch,
                 at, ampc_cg_f64(ampc_norm_params_of(n).eps).s);
    ampc_cg_line(k, "const %s v = (%s - ampc::cvt<%s>(%s[%s])) / sd;", at, xv, at, p[3], ch);
    ampc_cg_line(k, "const %s bn = ampc::cvt<%s>(v * ampc::cvt<%s>(%s[%s]) + ampc::cvt<%s>(%s[%s]));",
                 yt, yt, at, p[1], ch, at, p[2], ch);
    if (!relu) {
        ampc_cg_line(k, "const %s q = bn;", yt);
        return;
    } /* Relu's expression (lower_elementwise.c) on the stored value: NaN stays NaN */
    ampc_cg_line(k, "const %s a = ampc::cvt<%s>(bn);", at, at);
    ampc_cg_line(k, "const %s q = ampc::cvt<%s>(a > (%s)0 ? a : (a == a ? (%s)0 : a));", yt, yt, at,
                 at);
}

/* The Concat whose output X of BatchNormalization n is, read in place (fuse-elementwise's
 * concat_into_norm: along the last axis, maybe reshaped to [R, C] rows), or NULL. */
static const ampc_node *norm_concat(const ampc_node *n) {
    const ampc_value *x = n->inputs[0];
    const ampc_node *p = x->producer;
    if (!(x->flags & AMPC_VALUE_FUSED) || !p) return NULL;
    if (p->op == AMPC_OP_RESHAPE) {
        x = p->inputs[0];
        p = x->producer;
        if (!(x->flags & AMPC_VALUE_FUSED) || !p) return NULL;
    }
    return p->op == AMPC_OP_CONCAT ? p : NULL;
}

/* Declares src_ and at_, where element `e` of rows [R, c] (channel `ch`) of Concat `cat`'s output
 * lies: in the input whose channels hold ch (params pin, one per input), at its row-major
 * index. */
static void concat_source(ampc_cg_kernel *k, const ampc_node *cat, const char *const *pin,
                          int64_t c, const char *e, const char *ch) {
    const char *t = ampc_cg_ctype(cat->outputs[0]->dtype);
    ampc_cg_line(k, "const %s *src_;", t);
    ampc_cg_line(k, "long long at_;");
    ampc_cg_line(k, "const long long row_ = %s / %lldLL;", e, (long long)c);
    int64_t off = 0;
    for (int32_t j = 0; j < cat->n_inputs; j++) {
        const ampc_value *v = cat->inputs[j];
        const int64_t cj = v->shape.dims[v->shape.rank - 1];
        const bool last = j == cat->n_inputs - 1;
        if (last) ampc_cg_line(k, "%s {", j ? "else" : "");
        else ampc_cg_line(k, "%sif (%s < %lldLL) {", j ? "else " : "", ch, (long long)(off + cj));
        ampc_cg_line(k, "    src_ = %s, at_ = row_ * %lldLL + (%s - %lldLL);", pin[j], (long long)cj,
                     ch, (long long)off);
        ampc_cg_line(k, "}");
        off += cj;
    }
}

/* Elements a thread of BatchNormalization takes at once: over channels-last rows ([R, C], the
 * layout pass's form) of f32, f16 or bf16 computed in float, 16 bytes of the narrower of x and y
 * when C is a multiple of it; 1 otherwise. */
static int32_t batch_norm_width(ampc_cg *cg, const ampc_value *x, const ampc_value *y,
                                const ampc_node *cat, int64_t c, int64_t spatial, const char *at) {
    const bool fl = x->dtype == AMPC_DTYPE_F32 || x->dtype == AMPC_DTYPE_F16 ||
                    x->dtype == AMPC_DTYPE_BF16;
    const bool yf = y->dtype == AMPC_DTYPE_F32 || y->dtype == AMPC_DTYPE_F16 ||
                    y->dtype == AMPC_DTYPE_BF16;
    if (!fl || !yf || spatial != 1 || strcmp(at, "float")) return 1;
    size_t narrow = ampc_dtype_size(x->dtype);
    if (ampc_dtype_size(y->dtype) < narrow) narrow = ampc_dtype_size(y->dtype);
    const int32_t w = (int32_t)(16 / narrow);
    for (int32_t j = 0; cat && j < cat->n_inputs; j++) { /* every vector within one input */
        const ampc_value *v = cat->inputs[j];
        if (v->shape.dims[v->shape.rank - 1] % w || ampc_cg_ref(cg, v).offset % 16) return 1;
    }
    return c % w == 0 ? w : 1;
}

/* BatchNormalization in inference form: an elementwise kernel whose per-channel operands
 * (scale, B, mean, var, each [C]) are read at the element's channel. With `relu` (the Relu that
 * reads it, fused: passes/fuse_elementwise.c) it writes the Relu's output, of the value rounded
 * to the norm's type first. Over channels-last rows a thread takes 16 bytes at once (the same
 * arithmetic per element), and X may be a Concat never stored (norm_concat): each element is
 * read from the input that holds it. */
static ampc_status lower_batch_norm(ampc_cg *cg, const ampc_node *n, const ampc_node *relu) {
    const ampc_value *x = n->inputs[0], *y = relu ? relu->outputs[0] : n->outputs[0];
    const int64_t count = ampc_ir_numel(x);
    if (count == 0) return AMPC_OK;
    const int32_t rank = x->shape.rank;
    const int64_t c = rank >= 2 ? x->shape.dims[1] : 1, spatial = ampc_cg_dims_prod(&x->shape, 2, rank);
    const char *at = ampc_cg_acc_type((const ampc_value *const *)n->inputs, 5);
    const ampc_node *cat = norm_concat(n);
    if ((x->flags & AMPC_VALUE_FUSED) && (!cat || spatial != 1))
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_INTERNAL, "X of this BatchNormalization is "
                         "computed in no kernel: expected a Concat along the rows' last dim, read "
                         "in place");
    if (cat && cat->n_inputs > AMPC_CONCAT_READ_MAX)
        return AMPC_FAIL(ampc_cg_graph(cg), cat, AMPC_E_INTERNAL, "a Concat read in place with %d "
                         "inputs; at most %d", cat->n_inputs, AMPC_CONCAT_READ_MAX);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    if (relu) ampc_cg_kernel_covers(k, relu);
    const char *p[5] = {NULL}, *pin[AMPC_CONCAT_READ_MAX];
    for (int32_t i = cat ? 1 : 0; i < 5; i++) p[i] = ampc_cg_param(k, n->inputs[i], false);
    if (cat) {
        ampc_cg_kernel_covers(k, cat);
        for (int32_t j = 0; j < cat->n_inputs; j++) pin[j] = ampc_cg_param(k, cat->inputs[j], false);
    }
    const char *py = ampc_cg_param(k, y, true), *yt = ampc_cg_ctype(y->dtype);
    const int32_t w = batch_norm_width(cg, x, y, cat, c, spatial, at);
    if (w > 1) {
        ampc_cg_grid_loop(k, count / w);
        ampc_cg_line(k, "float x_[%d], r_[%d];", w, w);
        ampc_cg_line(k, "const long long ch0 = i * %d %% %lldLL;", w, (long long)c);
        if (cat) {
            char e[32];
            snprintf(e, sizeof e, "i * %d", w);
            concat_source(k, cat, pin, c, e, "ch0");
            ampc_cg_line(k, "ampc::ld_vec<%d>(src_ + at_, x_);", w);
        } else {
            ampc_cg_line(k, "ampc::ld_vec<%d>(%s + i * %d, x_);", w, p[0], w);
        }
        ampc_cg_line(k, "#pragma unroll");
        ampc_cg_open(k, "for (int u = 0; u < %d; u++)", w);
        ampc_cg_line(k, "const long long ch = ch0 + u;");
        batch_norm_value(k, n, relu != NULL, at, yt, p, "x_[u]", "ch");
        ampc_cg_line(k, "r_[u] = ampc::to_f32(q);");
        ampc_cg_close(k);
        ampc_cg_line(k, "ampc::st_vec<%d>(%s + i * %d, r_);", w, py, w);
        ampc_cg_close(k);
        return ampc_cg_kernel_end(k, count / w, 256);
    }
    ampc_cg_grid_loop(k, count);
    if (c == 1) ampc_cg_line(k, "const long long ch = 0;");
    else if (spatial == 1) ampc_cg_line(k, "const long long ch = i %% %lldLL;", (long long)c);
    else ampc_cg_line(k, "const long long ch = (i / %lldLL) %% %lldLL;", (long long)spatial, (long long)c);
    if (cat) {
        concat_source(k, cat, pin, c, "i", "ch");
        ampc_cg_line(k, "const %s xv = ampc::cvt<%s>(src_[at_]);", at, at);
    } else {
        ampc_cg_line(k, "const %s xv = ampc::cvt<%s>(%s[i]);", at, at, p[0]);
    }
    batch_norm_value(k, n, relu != NULL, at, yt, p, "xv", "ch");
    ampc_cg_line(k, "%s[i] = q;", py);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* LRN: y = x / (bias + alpha / size * (sum of x^2 over the channel window)) ^ beta. */
static ampc_status lower_lrn(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *x = n->inputs[0], *y = n->outputs[0];
    const int64_t count = ampc_ir_numel(x);
    if (count == 0) return AMPC_OK;
    const int64_t c = x->shape.dims[1], spatial = ampc_cg_dims_prod(&x->shape, 2, x->shape.rank);
    const ampc_norm_params np = ampc_norm_params_of(n);
    const int64_t size = np.size, before = (size - 1) / 2, after = size - 1 - before;
    const double alpha = np.alpha, beta = np.beta, bias = np.bias;
    const char *at = ampc_cg_acc_type(&x, 1);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, ampc_op_get(n->op)->name);
    const char *px = ampc_cg_param(k, x, false), *py = ampc_cg_param(k, y, true);
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long ch = (i / %lldLL) %% %lldLL;", (long long)spatial, (long long)c);
    ampc_cg_line(k, "const long long b = i - ch * %lldLL; /* channel 0 of this position */", (long long)spatial);
    ampc_cg_line(k, "const long long lo = ch - %lldLL < 0 ? 0 : ch - %lldLL;", (long long)before, (long long)before);
    ampc_cg_line(k, "const long long hi = ch + %lldLL > %lldLL ? %lldLL : ch + %lldLL;", (long long)after,
                 (long long)(c - 1), (long long)(c - 1), (long long)after);
    ampc_cg_line(k, "%s sq = (%s)0;", at, at);
    ampc_cg_open(k, "for (long long w = lo; w <= hi; w++)");
    ampc_cg_line(k, "const %s v = ampc::cvt<%s>(%s[b + w * %lldLL]);", at, at, px, (long long)spatial);
    ampc_cg_line(k, "sq += v * v;");
    ampc_cg_close(k);
    ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(ampc::cvt<%s>(%s[i]) / ampc::m_pow((%s)%s + (%s)%s * sq, (%s)%s));",
                 py, ampc_cg_ctype(y->dtype), at, px, at, ampc_cg_f64(bias).s, at,
                 ampc_cg_f64(alpha / (double)size).s, at, ampc_cg_f64(beta).s);
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

ampc_status ampc_cg_lower_norm(ampc_cg *cg, const ampc_node *n) {
    switch (n->op) {
    case AMPC_OP_SOFTMAX: case AMPC_OP_LOG_SOFTMAX: case AMPC_OP_SAFE_SOFTMAX:
    case AMPC_OP_HARDMAX: case AMPC_OP_LP_NORM:
        return lower_axis_op(cg, n);
    case AMPC_OP_LAYER_NORM: case AMPC_OP_RMS_NORM: return lower_layer_norm(cg, n, NULL);
    case AMPC_OP_INSTANCE_NORM: case AMPC_OP_GROUP_NORM: return lower_channel_norm(cg, n);
    case AMPC_OP_MEAN_VARIANCE_NORM: return lower_mvn(cg, n);
    case AMPC_OP_BATCH_NORM: return lower_batch_norm(cg, n, NULL);
    case AMPC_OP_LRN: return lower_lrn(cg, n);
    case AMPC_OP_NLL_LOSS: case AMPC_OP_SCE_LOSS: return ampc_cg_lower_loss(cg, n);
    default:
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "%s has no GPU lowering yet; it runs on the reference evaluator only",
                         ampc_op_get(n->op)->onnx);
    }
}

ampc_status ampc_cg_lower_norm_cast(ampc_cg *cg, const ampc_node *norm, const ampc_node *cast) {
    if (norm->op == AMPC_OP_BATCH_NORM) return lower_batch_norm(cg, norm, cast);
    return lower_layer_norm(cg, norm, cast);
}
