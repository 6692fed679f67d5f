/*
 * dense_gemm.c — ampc's own dense GEMM kernel for a GEMM step (codegen/kernels/gemm.cuh): the
 * step's own_kernel, y = act(alpha * x @ W + beta * c + bias) with the step's epilogue.
 *
 * Two uses. A step with a GELU epilogue (fuse-matmul took the erf GELU after the product) can
 * run only here: cuBLASLt's GELU epilogue is the tanh approximation, so the runtime launches
 * this kernel and never plans cuBLASLt for it. Every other step it takes is one more candidate:
 * the runtime times it against cuBLASLt's choice at load on the model's own buffers and keeps
 * the faster (runtime/prov_cublaslt.c); small products, where cuBLASLt's kernels leave most of
 * the GPU idle, are where it wins.
 *
 * What it takes: f16 or bf16 throughout (operands, output, bias), one GEMM (batch 1), x not
 * transposed, W as [K, N] or, with trans_b, [N, K]; K and N multiples of 8, the pitches of x and
 * W multiples of 8 and of c and y of 2, x and W 16-byte aligned. Anything else keeps the step on
 * cuBLASLt alone (and a GELU step that it cannot take is an internal error: fuse-matmul asks
 * for the same).
 *
 * The tile is chosen from the product's size: the largest of the configurations below whose
 * grid covers the GPU (GRID_FULL blocks), with K split over a cluster of 2, 4 or 8 blocks
 * (gemm.cuh) where the tiles alone are too few and K has at least two of the configuration's
 * stages a block; else the smallest configuration, split as far as K allows. The weight is read
 * where it lies, so the kernel adds nothing to the weights blob.
 */
#include "internal.h"

/* A configuration of dense_gemm<...>: BM x BN of y a block, BK of K a stage, warps WM x WN,
 * STAGES stages of shared memory. */
typedef struct gemm_cfg {
    int bm, bn, bk, wm, wn, stages;
} gemm_cfg;

static const gemm_cfg CONFIGS[] = {
    {128, 128, 32, 2, 4, 4}, /* 256 threads, warps of 64 x 32 */
    {64, 128, 32, 2, 2, 4},  /* 128 threads, 32 x 64 */
    {64, 64, 32, 2, 2, 4},   /* 32 x 32 */
    {32, 64, 64, 2, 2, 3},   /* 16 x 32 */
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0], GRID_FULL = 120, PAD = 8, SPLIT_MAX = 8 };

/* smem<BM, BN, BK, STAGES, WT>::bytes of gemm.cuh (the generated kernel asserts that they
 * agree). */
static uint32_t smem_bytes(const gemm_cfg *c, bool wt) {
    int x = c->bm * (c->bk + PAD);
    int w = wt ? c->bn * (c->bk + PAD) : c->bk * (c->bn + PAD);
    return (uint32_t)(c->stages * (x + w) * 2);
}

/* partial<BM, BN>::bytes of gemm.cuh: split K's f32 tile. */
static uint32_t partial_bytes(const gemm_cfg *c) { return (uint32_t)(c->bm * (c->bn + PAD) * 4); }

static int64_t blocks(const gemm_cfg *c, int64_t m, int64_t n) {
    return ((m + c->bm - 1) / c->bm) * ((n + c->bn - 1) / c->bn);
}

/* The configuration and the blocks K is split over (1: none) for an m x n x k product. */
static const gemm_cfg *pick(int64_t m, int64_t n, int64_t k, int *split) {
    for (int i = 0; i < N_CONFIGS; i++) {
        const int64_t b = blocks(&CONFIGS[i], m, n), kts = (k + CONFIGS[i].bk - 1) / CONFIGS[i].bk;
        for (int s = 1; s <= SPLIT_MAX && (s == 1 || kts >= 2 * s); s *= 2) {
            if (b * s >= GRID_FULL) {
                *split = s;
                return &CONFIGS[i];
            }
        }
    }
    const gemm_cfg *c = &CONFIGS[N_CONFIGS - 1];
    const int64_t kts = (k + c->bk - 1) / c->bk;
    *split = 1;
    while (*split < SPLIT_MAX && kts >= 4 * *split) *split *= 2;
    return c;
}

/* Why the kernel does not take p, or NULL when it does. */
static const char *why_not(const ampc_rt_gemm *p) {
    ampc_dtype t = p->dtype_ab;
    if (t != AMPC_DTYPE_F16 && t != AMPC_DTYPE_BF16) return "not f16/bf16";
    if (p->dtype_cd != t) return "the output's dtype differs";
    if (ampc_cg_epi_bias(p->epilogue) && p->dtype_bias != t) return "the bias's dtype differs";
    if (p->batch != 1 || p->trans_a) return "batched, or a transposed A";
    if (p->k % 8 || p->n % 8 || p->lda % 8 || p->ldb % 8) return "K, N or a pitch not a multiple of 8";
    if (p->a.offset % 16 || p->b.offset % 16) return "A or B not 16-byte aligned";
    if (p->ldd % 2 || p->d.offset % 4 || (p->c.bytes && (p->ldc % 2 || p->c.offset % 4)))
        return "C or D: odd pitch or offset";
    if (p->m < 1 || p->m > (int64_t)65535 * 32 || p->n > INT32_MAX / 2 || p->k > INT32_MAX / 2)
        return "empty or too large";
    return NULL;
}

ampc_status ampc_cg_dense_gemm(ampc_cg *cg, const ampc_node *n, int32_t step) {
    const ampc_rt_gemm *p = &cg->steps[step].gemm;
    const char *why = why_not(p);
    if (why != NULL) {
        if (ampc_cg_epi_act(p->epilogue) != 2) return AMPC_OK; /* the step stays on cuBLASLt */
        return AMPC_FAIL(cg->g, n, AMPC_E_INTERNAL, "a matmul with a GELU epilogue that ampc's "
                         "GEMM kernel does not take (%s)", why);
    }
    int split = 1;
    const gemm_cfg *c = pick(p->m, p->n, p->k, &split);
    const bool wt = p->trans_b;
    const char *t = p->dtype_ab == AMPC_DTYPE_F16 ? "ampc::f16" : "ampc::bf16";
    const char *ct = ampc_cg_ctype(p->dtype_ab);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "dense_gemm");
    const char *px = ampc_cg_param_ref(k, p->a, ct, false);
    const char *pw = ampc_cg_param_ref(k, p->b, ct, false);
    const char *pc = p->c.bytes ? ampc_cg_param_ref(k, p->c, ct, false) : "nullptr";
    const char *pb = ampc_cg_epi_bias(p->epilogue) ? ampc_cg_param_ref(k, p->bias, ct, false) : "nullptr";
    const char *py = ampc_cg_param_ref(k, p->d, ct, true);
    ampc_cg_line(k, "static_assert(ampc::gemm::smem<%d, %d, %d, %d, %s>::bytes == %u, "
                    "\"codegen/dense_gemm.c's smem_bytes\");",
                 c->bm, c->bn, c->bk, c->stages, wt ? "true" : "false", smem_bytes(c, wt));
    uint32_t smem = smem_bytes(c, wt);
    if (split > 1) {
        ampc_cg_line(k, "static_assert(ampc::gemm::partial<%d, %d>::bytes == %u, "
                        "\"codegen/dense_gemm.c's partial_bytes\");",
                     c->bm, c->bn, partial_bytes(c));
        if (partial_bytes(c) > smem) smem = partial_bytes(c);
        ampc_cg_kernel_cluster_z(k, split);
    }
    ampc_cg_line(k, "ampc::gemm::args<%s> a_;", t);
    ampc_cg_line(k, "a_.x = %s; a_.w = %s; a_.c = %s; a_.bias = %s; a_.y = %s;", px, pw, pc, pb, py);
    ampc_cg_line(k, "a_.M = %lld; a_.N = %lld; a_.K = %lld;", (long long)p->m, (long long)p->n,
                 (long long)p->k);
    ampc_cg_line(k, "a_.ldx = %lldLL; a_.ldw = %lldLL; a_.ldc = %lldLL; a_.ldy = %lldLL;",
                 (long long)p->lda, (long long)p->ldb, (long long)(p->c.bytes ? p->ldc : 0),
                 (long long)p->ldd);
    ampc_cg_line(k, "a_.alpha = (float)%s; a_.beta = (float)%s;", ampc_cg_f64(p->alpha).s,
                 ampc_cg_f64(p->c.bytes ? p->beta : 0.0f).s);
    ampc_cg_line(k, "ampc::gemm::dense_gemm<%s, %d, %d, %d, %d, %d, %d, %s, %d, %d>(a_);", t,
                 c->bm, c->bn, c->bk, c->wm, c->wn, c->stages, wt ? "true" : "false",
                 ampc_cg_epi_act(p->epilogue), split);
    uint32_t grid[3] = {(uint32_t)((p->n + c->bn - 1) / c->bn),
                        (uint32_t)((p->m + c->bm - 1) / c->bm), (uint32_t)split};
    uint32_t block[3] = {(uint32_t)(c->wm * c->wn * 32), 1, 1};
    return ampc_cg_kernel_end_gemm_alt(k, step, grid, block, smem);
}
