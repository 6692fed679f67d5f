/*
 * lower_contract.c — GPU lowering of the contractions (LOWER_CONTRACT): MatMul, Gemm,
 * MatMulInteger, QLinearMatMul and Einsum; ampc.FusedAttention goes to lower_attention.c.
 *
 * Float MatMul and Gemm (f32, f16, bf16, f64) become cuBLASLt steps (runtime/plan.h's
 * ampc_rt_gemm: row-major operands, batched with batch strides). f32 runs with the compile's
 * math option (TF32 by default).
 *   MatMul: a 1-D first operand is one row (m = 1), a 1-D second operand one column (n = 1,
 *     ldb = 1). The batch dims broadcast numpy-style. An operand whose batch dims are all 1 has
 *     batch stride 0; when B is the shared one, the batch folds into M (one plain GEMM of
 *     batch * m rows). When the broadcast is partial ([2,1,M,K] x [1,3,K,N]), the output batch
 *     dims split at the smallest position s such that, over dims s.., each operand is either
 *     wholly present or wholly broadcast: those dims form one strided batch and the dims before
 *     s are enumerated, one GEMM step per outer index (at most MAX_GEMM_STEPS; beyond that a
 *     generated kernel does the whole product). An empty contraction (k = 0) is a memset.
 *   Gemm: transA / transB are the step's transpose flags, alpha and beta its scalars. C, when
 *     present and beta != 0: a full [M,N] C is the step's C operand; a row vector ([N] or
 *     [1,N]) with beta == 1 is the bias epilogue (not for f64, where cuBLASLt's epilogues are not
 *     relied on); any other C (a scalar, [M,1], a row with beta != 1) is first broadcast into D by
 *     a generated kernel and the step then reads C = D.
 *   ampc.FusedMatMul (passes/fuse_matmul.c): one GEMM of all of A's rows, the bias and ReLU in
 *     the epilogue, the residual as C with beta = 1.
 * Integer MatMul and Gemm, MatMulInteger, QLinearMatMul and Einsum are generated kernels, one
 * thread per output element looping over the contracted dims: integers accumulate in wrapping
 * 64-bit arithmetic (as the reference), floats in f32 (f64 for f64). QLinearMatMul requantises as
 * ir/ref/quant.c does: the multiplier in f32 steps, the rest in double without fused
 * multiply-adds, rounded half to even and saturated.
 */
#include "codegen.h"
#include "ir/activation.h"

#include <math.h>
#include <stdlib.h>

#include <string.h>

enum { MAX_GEMM_STEPS = 32 };

static bool lt_dtype(ampc_dtype t) {
    return t == AMPC_DTYPE_F32 || t == AMPC_DTYPE_F16 || t == AMPC_DTYPE_BF16 || t == AMPC_DTYPE_F64;
}

/* ref advanced by `elems` elements of `es` bytes (a matrix inside a batched tensor). */
static ampc_rt_ref sub_ref(ampc_rt_ref r, int64_t elems, size_t es) {
    int64_t off = elems * (int64_t)es;
    r.offset += off;
    r.bytes -= off;
    return r;
}

static uint8_t math_for(ampc_cg *cg, ampc_dtype t) {
    return t == AMPC_DTYPE_F32 ? ampc_cg_opts(cg)->math : (uint8_t)AMPC_RT_MATH_DEFAULT;
}

/* ---- matrix geometry ------------------------------------------------------------------------- */

/* A (batched) matrix product's geometry: y[b] = op(a[b]) @ op(b[b]) with the batch dims of each
 * operand broadcast to the output's. */
typedef struct mm_geom {
    int64_t m, n, k;
    bool ta, tb;           /* Gemm: A stored [K,M], B stored [N,K] */
    ampc_shape so, sa, sb; /* batch shapes: the output's and each operand's own */
} mm_geom;

static void matmul_geom(const ampc_value *a, const ampc_value *b, mm_geom *g) {
    const ampc_shape *xa = &a->shape, *xb = &b->shape;
    memset(g, 0, sizeof *g);
    g->m = xa->rank >= 2 ? xa->dims[xa->rank - 2] : 1;
    g->k = xa->dims[xa->rank - 1];
    g->n = xb->rank >= 2 ? xb->dims[xb->rank - 1] : 1;
    g->sa.rank = xa->rank >= 2 ? xa->rank - 2 : 0;
    g->sb.rank = xb->rank >= 2 ? xb->rank - 2 : 0;
    memcpy(g->sa.dims, xa->dims, (size_t)g->sa.rank * sizeof(int64_t));
    memcpy(g->sb.dims, xb->dims, (size_t)g->sb.rank * sizeof(int64_t));
    g->so.rank = AMPC_MAX(g->sa.rank, g->sb.rank);
    for (int32_t d = 0; d < g->so.rank; d++) {
        int32_t da = d - (g->so.rank - g->sa.rank), db = d - (g->so.rank - g->sb.rank);
        int64_t x = da >= 0 ? g->sa.dims[da] : 1, y = db >= 0 ? g->sb.dims[db] : 1;
        g->so.dims[d] = x == 1 ? y : x;
    }
}

/* The fields every GEMM step of a product shares. */
static ampc_rt_gemm gemm_base(ampc_cg *cg, const ampc_value *a, const ampc_value *y) {
    ampc_rt_gemm p;
    memset(&p, 0, sizeof p);
    p.batch = 1;
    p.dtype_ab = a->dtype;
    p.dtype_cd = y->dtype;
    p.dtype_bias = y->dtype;
    p.math = math_for(cg, a->dtype);
    p.epilogue = AMPC_RT_EPI_NONE;
    p.alpha = 1.0f;
    p.beta = 0.0f;
    return p;
}

/* The sparsity pass's 2:4 mark carried to the step (plan.h's ampc_rt_gemm.sparse24): only for a
 * single GEMM whose B is a weight, the operand the runtime compresses once at creation. */
static void mark_sparse(const ampc_node *n, ampc_rt_gemm *p) {
    p->sparse24 = p->batch == 1 && p->b.space == AMPC_RT_WEIGHTS &&
                  ampc_node_sparse24(n);
}

/* ---- generated matrix products --------------------------------------------------------------- */

/* Opens a one-thread-per-output kernel body of a product and declares, inside the grid loop,
 * col_, row_ (the output element's matrix coordinates) and abase_, bbase_ (the element offsets of
 * its A and B matrices, batch broadcast applied). */
static void naive_head(ampc_cg_kernel *k, const mm_geom *g, int64_t count) {
    ampc_cg_grid_loop(k, count);
    ampc_cg_line(k, "const long long col_ = i %% %lldLL, row_ = (i / %lldLL) %% %lldLL;",
                 (long long)g->n, (long long)g->n, (long long)g->m);
    ampc_cg_line(k, "const long long bt_ = i / %lldLL;", (long long)(g->m * g->n));
    const char *oa = ampc_cg_bcast_offset(k, &g->so, &g->sa, "bt_");
    ampc_cg_line(k, "const long long abase_ = %s * %lldLL;", oa, (long long)(g->m * g->k));
    const char *ob = ampc_cg_bcast_offset(k, &g->so, &g->sb, "bt_");
    ampc_cg_line(k, "const long long bbase_ = %s * %lldLL;", ob, (long long)(g->k * g->n));
}

/* The index expressions of A(row_, p_) and B(p_, col_). */
static void a_at(char *buf, size_t len, const mm_geom *g) {
    if (g->ta) snprintf(buf, len, "abase_ + p_ * %lldLL + row_", (long long)g->m);
    else snprintf(buf, len, "abase_ + row_ * %lldLL + p_", (long long)g->k);
}
static void b_at(char *buf, size_t len, const mm_geom *g) {
    if (g->tb) snprintf(buf, len, "bbase_ + col_ * %lldLL + p_", (long long)g->k);
    else snprintf(buf, len, "bbase_ + p_ * %lldLL + col_", (long long)g->n);
}

/* Emits the accumulation loop: `acc_` in the compute type (floats) or wrapping u64 (integers),
 * with optional zero points (expressions of long long) subtracted from each operand. */
static void naive_loop(ampc_cg_kernel *k, const mm_geom *g, const char *pa, const char *pb,
                       ampc_dtype t, const char *za, const char *zb) {
    char ia[96], ib[96];
    a_at(ia, sizeof ia, g);
    b_at(ib, sizeof ib, g);
    if (ampc_dtype_is_float(t)) {
        const char *ct = ampc_cg_compute_type(t);
        ampc_cg_line(k, "%s acc_ = 0;", ct);
        ampc_cg_open(k, "for (long long p_ = 0; p_ < %lldLL; p_++)", (long long)g->k);
        ampc_cg_line(k, "acc_ += ampc::cvt<%s>(%s[%s]) * ampc::cvt<%s>(%s[%s]);", ct, pa, ia, ct,
                     pb, ib);
    } else {
        ampc_cg_line(k, "unsigned long long acc_ = 0;");
        ampc_cg_open(k, "for (long long p_ = 0; p_ < %lldLL; p_++)", (long long)g->k);
        ampc_cg_line(k, "const long long a_ = (long long)%s[%s]%s%s;", pa, ia, za ? " - " : "",
                     za ? za : "");
        ampc_cg_line(k, "const long long b_ = (long long)%s[%s]%s%s;", pb, ib, zb ? " - " : "",
                     zb ? zb : "");
        ampc_cg_line(k, "acc_ += (unsigned long long)a_ * (unsigned long long)b_;");
    }
    ampc_cg_close(k);
}

/* MatMul (or Gemm without C and scalars) by a generated kernel: integers, and float products
 * whose broadcast needs too many GEMM steps. */
static ampc_status naive_product(ampc_cg *cg, const ampc_node *n, const mm_geom *g) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
    int64_t count = ampc_ir_numel(y);
    bool fl = ampc_dtype_is_float(y->dtype);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, fl ? "matmul" : "matmul_int");
    const char *pa = ampc_cg_param(k, a, false), *pb = ampc_cg_param(k, b, false);
    const char *py = ampc_cg_param(k, y, true);
    naive_head(k, g, count);
    naive_loop(k, g, pa, pb, y->dtype, NULL, NULL);
    if (fl)
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(acc_);", py, ampc_cg_ctype(y->dtype));
    else
        ampc_cg_line(k, "%s[i] = (%s)acc_;", py, ampc_cg_ctype(y->dtype));
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- MatMul ---------------------------------------------------------------------------------- */

/* The GEMM steps of a float MatMul (see the file comment); *fits is false when the broadcast
 * would need more than MAX_GEMM_STEPS steps (nothing emitted then). */
static ampc_status matmul_steps(ampc_cg *cg, const ampc_node *n, const mm_geom *g, bool *fits) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
    const int32_t R = g->so.rank;
    int64_t ba[AMPC_MAX_RANK], bb[AMPC_MAX_RANK], sta[AMPC_MAX_RANK], stb[AMPC_MAX_RANK],
        std_[AMPC_MAX_RANK];
    int64_t ma = g->m * g->k, mb = g->k * g->n, md = g->m * g->n;
    /* Each operand's batch dims aligned to the output's, and its element stride per dim (0 where
     * it broadcasts). */
    int64_t ca = ma, cb = mb, cd = md;
    for (int32_t d = R - 1; d >= 0; d--) {
        int32_t da = d - (R - g->sa.rank), db = d - (R - g->sb.rank);
        ba[d] = da >= 0 ? g->sa.dims[da] : 1;
        bb[d] = db >= 0 ? g->sb.dims[db] : 1;
        sta[d] = ba[d] == 1 ? 0 : ca;
        stb[d] = bb[d] == 1 ? 0 : cb;
        std_[d] = cd;
        ca *= ba[d];
        cb *= bb[d];
        cd *= g->so.dims[d];
    }
    /* The split: the smallest s with every operand uniform (all present or all broadcast) over
     * the dims s.. that have more than one entry. */
    int32_t s = R;
    for (int32_t cand = 0; cand <= R; cand++) {
        bool ok = true;
        for (int op = 0; op < 2 && ok; op++) {
            const int64_t *bx = op ? bb : ba;
            bool seen_full = false, seen_bcast = false;
            for (int32_t d = cand; d < R; d++) {
                if (g->so.dims[d] == 1) continue;
                if (bx[d] == 1) seen_bcast = true;
                else seen_full = true;
            }
            ok = !(seen_full && seen_bcast);
        }
        if (ok) {
            s = cand;
            break;
        }
    }
    int64_t outer = 1, inner = 1;
    bool a_full = false, b_full = false;
    for (int32_t d = 0; d < s; d++) outer *= g->so.dims[d];
    for (int32_t d = s; d < R; d++) {
        inner *= g->so.dims[d];
        if (g->so.dims[d] > 1) a_full |= ba[d] > 1, b_full |= bb[d] > 1;
    }
    *fits = outer <= MAX_GEMM_STEPS;
    if (!*fits) return AMPC_OK;

    size_t ea = ampc_dtype_size(a->dtype), eb = ampc_dtype_size(b->dtype);
    size_t ey = ampc_dtype_size(y->dtype);
    ampc_rt_ref ra = ampc_cg_ref(cg, a), rb = ampc_cg_ref(cg, b), ry = ampc_cg_ref(cg, y);
    int64_t coord[AMPC_MAX_RANK] = {0};
    for (int64_t o = 0; o < outer; o++) {
        int64_t oa = 0, ob = 0, od = 0;
        for (int32_t d = 0; d < s; d++) oa += coord[d] * sta[d], ob += coord[d] * stb[d],
                                        od += coord[d] * std_[d];
        ampc_rt_gemm p = gemm_base(cg, a, y);
        p.m = g->m;
        p.n = g->n;
        p.k = g->k;
        p.batch = inner;
        p.lda = g->k;
        p.ldb = g->n;
        p.ldc = p.ldd = g->n;
        p.stride_a = inner > 1 && !a_full ? 0 : ma;
        p.stride_b = inner > 1 && !b_full ? 0 : mb;
        p.stride_d = md;
        if (p.batch > 1 && p.stride_b == 0) {
            /* B is shared by the whole batch and A's matrices are contiguous: one GEMM of
             * batch * m rows. */
            p.m *= p.batch;
            p.batch = 1;
            p.stride_a = p.m * p.k;
            p.stride_d = p.m * p.n;
        }
        p.a = sub_ref(ra, oa, ea);
        p.b = sub_ref(rb, ob, eb);
        p.d = sub_ref(ry, od, ey);
        mark_sparse(n, &p);
        ampc_status st = ampc_cg_step_gemm(cg, n, &p);
        if (st != AMPC_OK) return st;
        for (int32_t d = s - 1; d >= 0; d--) { /* next outer coordinate, row-major */
            if (++coord[d] < g->so.dims[d]) break;
            coord[d] = 0;
        }
    }
    return AMPC_OK;
}

static ampc_status lower_matmul(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
    mm_geom g;
    matmul_geom(a, b, &g);
    if (!lt_dtype(y->dtype)) return naive_product(cg, n, &g);
    if (g.k == 0) return ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, y));
    bool fits;
    ampc_status st = matmul_steps(cg, n, &g, &fits);
    if (st != AMPC_OK || fits) return st;
    return naive_product(cg, n, &g);
}

/* ampc.FusedMatMul: one GEMM of all of A's rows by the matrix B; the bias, ReLU and tanh GELU
 * go to cuBLASLt's epilogue, the residual z is the C operand with beta = 1; the erf GELU makes
 * the epilogue one that only ampc's own kernel runs (dense_gemm.c). */
static ampc_status lower_fused_matmul(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
    const ampc_value *bias = n->n_inputs > 2 ? n->inputs[2] : NULL;
    const ampc_value *z = n->n_inputs > 3 ? n->inputs[3] : NULL;
    const ampc_fused_act act = ampc_fused_act_of(n);
    bool gelu = act == AMPC_ACT_GELU, tanh = act == AMPC_ACT_GELU_TANH, relu = act == AMPC_ACT_RELU;
    ampc_rt_gemm p = gemm_base(cg, a, y);
    p.k = b->shape.dims[0];
    p.n = b->shape.dims[1];
    p.m = p.k ? ampc_ir_numel(a) / p.k : 0;
    if (p.k == 0 || p.m == 0 || p.n == 0)
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "ampc.FusedMatMul with an empty dimension (m %lld, n %lld, k %lld)",
                         (long long)p.m, (long long)p.n, (long long)p.k);
    p.lda = p.k;
    p.ldb = p.n;
    p.ldc = p.ldd = p.n;
    p.stride_a = p.m * p.k;
    p.stride_b = p.k * p.n;
    p.stride_c = p.stride_d = p.m * p.n;
    p.a = ampc_cg_ref(cg, a);
    p.b = ampc_cg_ref(cg, b);
    p.d = ampc_cg_ref(cg, y);
    p.epilogue = bias ? (relu   ? AMPC_RT_EPI_BIAS_RELU
                         : gelu ? AMPC_RT_EPI_BIAS_GELU
                         : tanh ? AMPC_RT_EPI_BIAS_GELU_TANH
                                : AMPC_RT_EPI_BIAS)
                      : (relu   ? AMPC_RT_EPI_RELU
                         : gelu ? AMPC_RT_EPI_GELU
                         : tanh ? AMPC_RT_EPI_GELU_TANH
                                : AMPC_RT_EPI_NONE);
    if (bias) {
        p.bias = ampc_cg_ref(cg, bias);
        p.dtype_bias = bias->dtype;
    }
    if (z) {
        p.c = ampc_cg_ref(cg, z);
        p.beta = 1.0f;
    }
    mark_sparse(n, &p);
    return ampc_cg_step_gemm(cg, n, &p);
}

/* ---- Gemm ------------------------------------------------------------------------------------ */


/* A literal double for generated code ("((double)0.5)"; NaN and inf as bits, ampc_cg_f64). */
static void dlit(char *buf, size_t len, double v) {
    snprintf(buf, len, "((double)%s)", ampc_cg_f64(v).s);
}

/* D = scale * C broadcast to [M,N] (scale 1: a plain broadcast copy), by a generated kernel. */
static ampc_status broadcast_c(ampc_cg *cg, const ampc_node *n, const ampc_value *c,
                               const ampc_value *y, double scale) {
    int64_t count = ampc_ir_numel(y);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "gemm_c");
    const char *pc = ampc_cg_param(k, c, false), *py = ampc_cg_param(k, y, true);
    const char *ct = ampc_cg_compute_type(y->dtype);
    ampc_cg_grid_loop(k, count);
    const char *off = ampc_cg_bcast_offset(k, &y->shape, &c->shape, "i");
    if (scale == 1.0) {
        ampc_cg_line(k, "%s[i] = %s[%s];", py, pc, off);
    } else {
        ampc_strbuf s = {0};
        ampc_cg_put_typed(&s, ct, scale);
        ampc_cg_line(k, "%s[i] = ampc::cvt<%s>(%s * ampc::cvt<%s>(%s[%s]));", py,
                     ampc_cg_ctype(y->dtype), s.data, ct, pc, off);
        ampc_sb_free(&s);
    }
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* Integer Gemm: the product and its epilogue in one generated kernel, as ir/ref/contract.c
 * computes it (wrapping integers when alpha and beta are 1, else double, truncated). */
static ampc_status gemm_int(ampc_cg *cg, const ampc_node *n, const mm_geom *g,
                            const ampc_gemm_params *at) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
    const ampc_value *c = n->n_inputs > 2 ? n->inputs[2] : NULL;
    int64_t count = ampc_ir_numel(y);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "gemm_int");
    const char *pa = ampc_cg_param(k, a, false), *pb = ampc_cg_param(k, b, false);
    const char *pc = c ? ampc_cg_param(k, c, false) : NULL, *py = ampc_cg_param(k, y, true);
    const char *yt = ampc_cg_ctype(y->dtype);
    naive_head(k, g, count);
    naive_loop(k, g, pa, pb, y->dtype, NULL, NULL);
    const char *off = c ? ampc_cg_bcast_offset(k, &y->shape, &c->shape, "i") : NULL;
    if (at->alpha == 1.0 && (!c || at->beta == 1.0)) {
        if (c) ampc_cg_line(k, "acc_ += (unsigned long long)(long long)%s[%s];", pc, off);
        ampc_cg_line(k, "%s[i] = (%s)acc_;", py, yt);
    } else {
        char al[80], be[80];
        dlit(al, sizeof al, at->alpha);
        dlit(be, sizeof be, at->beta);
        ampc_cg_line(k, "double v_ = ampc::mul_rn(%s, (double)(%s)acc_);", al,
                     y->dtype == AMPC_DTYPE_U64 ? "unsigned long long" : "long long");
        if (c)
            ampc_cg_line(k, "v_ = ampc::add_rn(v_, ampc::mul_rn(%s, ampc::cvt<double>(%s[%s])));",
                         be, pc, off);
        ampc_cg_line(k, "%s[i] = ampc::cv::store_f64<%s>(v_);", py, yt);
    }
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

static ampc_status lower_gemm(ampc_cg *cg, const ampc_node *n) {
    const ampc_value *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
    const ampc_value *c = n->n_inputs > 2 ? n->inputs[2] : NULL;
    const ampc_gemm_params at = ampc_gemm_params_of(n);
    mm_geom g;
    memset(&g, 0, sizeof g);
    g.ta = at.ta;
    g.tb = at.tb;
    g.m = y->shape.dims[0];
    g.n = y->shape.dims[1];
    g.k = a->shape.dims[at.ta ? 0 : 1];
    if (!lt_dtype(y->dtype)) return gemm_int(cg, n, &g, &at);
    bool use_c = c && at.beta != 0.0;
    if (g.k == 0) /* alpha * (empty sum) + beta * C */
        return use_c ? broadcast_c(cg, n, c, y, at.beta) : ampc_cg_step_memset(cg, n, ampc_cg_ref(cg, y));

    ampc_rt_gemm p = gemm_base(cg, a, y);
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    p.trans_a = at.ta;
    p.trans_b = at.tb;
    p.lda = a->shape.dims[1];
    p.ldb = b->shape.dims[1];
    p.ldc = p.ldd = g.n;
    p.stride_a = g.m * g.k;
    p.stride_b = g.k * g.n;
    p.stride_c = p.stride_d = g.m * g.n;
    p.alpha = (float)at.alpha;
    p.a = ampc_cg_ref(cg, a);
    p.b = ampc_cg_ref(cg, b);
    p.d = ampc_cg_ref(cg, y);
    if (use_c) {
        const ampc_shape *cs = &c->shape;
        bool full = ampc_shape_eq(cs, &y->shape);
        bool row = !full && cs->rank >= 1 && cs->dims[cs->rank - 1] == g.n &&
                   (cs->rank == 1 || cs->dims[0] == 1);
        if (full) {
            p.c = ampc_cg_ref(cg, c);
            p.beta = (float)at.beta;
        } else if (row && at.beta == 1.0 && y->dtype != AMPC_DTYPE_F64) {
            p.epilogue = AMPC_RT_EPI_BIAS;
            p.bias = ampc_cg_ref(cg, c);
            p.dtype_bias = c->dtype;
        } else {
            /* C broadcast into D first; the GEMM then accumulates onto it. */
            ampc_status st = broadcast_c(cg, n, c, y, 1.0);
            if (st != AMPC_OK) return st;
            p.c = p.d;
            p.beta = (float)at.beta;
        }
    }
    mark_sparse(n, &p);
    return ampc_cg_step_gemm(cg, n, &p);
}

/* ---- MatMulInteger and QLinearMatMul --------------------------------------------------------- */

/* Emits `const long long <name> = ...;`: the zero point (or any per-row / per-column parameter)
 * of operand x for the current output element: one element, one per row of A (`row`) or column
 * of B, or (MatMulInteger) a tensor of x's rank broadcast over x's batch dims. */
static void zero_point(ampc_cg_kernel *k, const ampc_value *x, const ampc_value *z, const char *pz,
                       bool row, const mm_geom *g, const char *name) {
    if (ampc_ir_numel(z) == 1) {
        ampc_cg_line(k, "const long long %s = (long long)%s[0];", name, pz);
    } else if (z->shape.rank == 1) {
        ampc_cg_line(k, "const long long %s = (long long)%s[%s];", name, pz, row ? "row_" : "col_");
    } else {
        /* Same rank as x; constant along the contracted dim, so read at p = 0. */
        const char *e = row ? "ea_" : "eb_";
        if (row)
            ampc_cg_line(k, "const long long ea_ = abase_ + row_ * %lldLL;", (long long)g->k);
        else
            ampc_cg_line(k, "const long long eb_ = bbase_ + col_;");
        const char *off = ampc_cg_bcast_offset(k, &x->shape, &z->shape, e);
        ampc_cg_line(k, "const long long %s = (long long)%s[%s];", name, pz, off);
    }
}

static ampc_status lower_int_matmul(ampc_cg *cg, const ampc_node *n) {
    bool q = n->op == AMPC_OP_QLINEAR_MATMUL;
    const ampc_value *a = n->inputs[0], *b = n->inputs[q ? 3 : 1], *y = n->outputs[0];
    const ampc_value *za = n->n_inputs > 2 ? n->inputs[2] : NULL;
    const ampc_value *zb = q ? n->inputs[5] : n->n_inputs > 3 ? n->inputs[3] : NULL;
    mm_geom g;
    matmul_geom(a, b, &g);
    int64_t count = ampc_ir_numel(y);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, q ? "qlinear_matmul" : "matmul_integer");
    const char *pa = ampc_cg_param(k, a, false), *pb = ampc_cg_param(k, b, false);
    const char *pza = za ? ampc_cg_param(k, za, false) : NULL;
    const char *pzb = zb ? ampc_cg_param(k, zb, false) : NULL;
    const char *psa = NULL, *psb = NULL, *psy = NULL, *pzy = NULL;
    if (q) {
        psa = ampc_cg_param(k, n->inputs[1], false);
        psb = ampc_cg_param(k, n->inputs[4], false);
        psy = ampc_cg_param(k, n->inputs[6], false);
        pzy = ampc_cg_param(k, n->inputs[7], false);
    }
    const char *py = ampc_cg_param(k, y, true);
    naive_head(k, &g, count);
    if (za) zero_point(k, a, za, pza, true, &g, "za_");
    if (zb) zero_point(k, b, zb, pzb, false, &g, "zb_");
    naive_loop(k, &g, pa, pb, AMPC_DTYPE_I64, za ? "za_" : NULL, zb ? "zb_" : NULL);
    if (!q) {
        ampc_cg_line(k, "%s[i] = (int)(unsigned int)acc_;", py);
    } else {
        /* Per tensor, or one scale per row of A / column of B. */
        bool sa1 = ampc_ir_numel(n->inputs[1]) == 1, sb1 = ampc_ir_numel(n->inputs[4]) == 1;
        ampc_cg_line(k, "const float s_ = ampc::cv::requant_scale(ampc::cvt<float>(%s[%s]), "
                        "ampc::cvt<float>(%s[%s]), ampc::cvt<float>(%s[0]));",
                     psa, sa1 ? "0" : "row_", psb, sb1 ? "0" : "col_", psy);
        ampc_cg_line(k, "const double v_ = ampc::add_rn(ampc::mul_rn((double)(long long)acc_, "
                        "(double)s_), (double)(long long)%s[0]);", pzy);
        bool s8 = y->dtype == AMPC_DTYPE_I8;
        ampc_cg_line(k, "%s[i] = (%s)ampc::cv::sat_rint(v_, %s, %s);", py, ampc_cg_ctype(y->dtype),
                     s8 ? "-128.0" : "0.0", s8 ? "127.0" : "255.0");
    }
    ampc_cg_close(k);
    return ampc_cg_kernel_end(k, count, 256);
}

/* ---- entry ----------------------------------------------------------------------------------- */

ampc_status ampc_cg_lower_contract(ampc_cg *cg, const ampc_node *n) {
    if (n->op == AMPC_OP_RNN || n->op == AMPC_OP_GRU || n->op == AMPC_OP_LSTM)
        return ampc_cg_lower_rnn(cg, n);
    if (ampc_ir_numel(n->outputs[0]) == 0) return AMPC_OK; /* nothing to compute */
    switch (n->op) {
    case AMPC_OP_MATMUL: return lower_matmul(cg, n);
    case AMPC_OP_GEMM: return lower_gemm(cg, n);
    case AMPC_OP_FUSED_MATMUL: return lower_fused_matmul(cg, n);
    case AMPC_OP_FUSED_ATTENTION: return ampc_cg_lower_attention(cg, n);
    case AMPC_OP_MATMUL_INTEGER:
    case AMPC_OP_QLINEAR_MATMUL: return lower_int_matmul(cg, n);
    case AMPC_OP_EINSUM: return ampc_cg_lower_linalg(cg, n);
    case AMPC_OP_DFT: case AMPC_OP_STFT: return ampc_cg_lower_signal(cg, n);
    default:
        return AMPC_FAIL(ampc_cg_graph(cg), n, AMPC_E_UNSUPPORTED,
                         "%s has no GPU lowering yet; it runs on the reference evaluator only",
                         ampc_op_get(n->op)->onnx);
    }
}
