/*
 * sparse_gemm.c — ampc's own 2:4 sparse GEMM for a GEMM step whose weight the sparsity pass
 * marked (ampc_rt_gemm.sparse24): the weight is compressed here, at compile time, into the
 * weights blob (codegen/sparse24.c's format, padded to whole blocks), and a kernel instantiating
 * codegen/kernels/sparse_gemm.cuh with the step's epilogue becomes the step's own_kernel. The
 * step itself stays a cuBLASLt GEMM: the runtime times the dense call, cuSPARSELt (when present)
 * and this kernel once at load and keeps the fastest (runtime/prov_cublaslt.c).
 *
 * The kernel computes y^T = W^T x^T: W^T (N x K, groups of 4 along K) is mma.sp's sparse A
 * operand, x is its B as it lies in memory (sparse_gemm.cuh has the reasoning). What it takes:
 * f16 or bf16 throughout (operands, output, bias), one GEMM (batch 1), x not transposed, the
 * weight a constant ([K, N], or [N, K] for a Gemm with transB), K and N multiples of 8, the row
 * pitches of x multiple of 8 and of c and y of 2, x 16-byte aligned; any epilogue (bias, ReLU,
 * GELU, the residual c with beta, alpha). A multi-GPU plan gets none (its per-rank weights are
 * packed from the steps' own refs). Anything else keeps the step as it was: dense or cuSPARSELt.
 *
 * The cost: the compressed copy (K/2 values and K/16 metadata bytes a row, rows padded to the
 * block) adds about 9/16 of the weight to the weights blob.
 */
#include "internal.h"

#include "codegen/kernels/sparse_layout.cuh"
#include "codegen/sparse24.h"

#include <stdlib.h>
#include <string.h>

/* The one configuration (sparse_gemm.cuh's template parameters): 128 features x 128 activation
 * rows a block, 64 of K a stage, 8 warps as 2 x 4 (64 x 32 each), 3 stages. */
enum { SG_BF = 128, SG_BT = 128, SG_BK = 64, SG_WF = 2, SG_WT = 4, SG_STAGES = 3 };

/* sp_smem<BF, BT, BK, STAGES>::bytes of sparse_gemm.cuh (the generated kernel asserts that they
 * agree). */
static uint32_t smem_bytes(void) {
    uint32_t a = SG_BF * (SG_BK / 2 + 8) * 2;
    uint32_t e = (SG_BF / 16) * (SG_BK / 32) * AMPC_SPL_META_WORDS * 4;
    uint32_t x = SG_BT * (SG_BK + 8) * 2;
    uint32_t stages = SG_STAGES * (a + e + x), out = SG_BT * (SG_BF + 4) * 4;
    return stages > out ? stages : out;
}

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* Why the kernel does not take p, or NULL when it does. */
static const char *why_not(const ampc_cg *cg, const ampc_rt_gemm *p) {
    ampc_dtype t = p->dtype_ab;
    if (t != AMPC_DTYPE_F16 && t != AMPC_DTYPE_BF16) return "not f16/bf16";
    if (p->dtype_cd != t) return "output dtype differs";
    if (p->batch != 1 || p->trans_a) return "batched or transposed activation";
    if (p->b.space != AMPC_RT_WEIGHTS) return "weight not a constant";
    if (p->k % 8 || p->n % 8 || p->lda % 8 || p->a.offset % 16) return "K, N or x's pitch";
    if (p->ldd % 2 || (p->c.bytes && p->ldc % 2)) return "y's or c's pitch";
    bool bias = ampc_cg_epi_bias(p->epilogue);
    if (bias && p->dtype_bias != t) return "bias dtype";
    if (cg->n_ranks > 1) return "multi-GPU plan";
    if (p->m > (int64_t)65535 * SG_BT || p->n > INT32_MAX / 2 || p->k > INT32_MAX / 2)
        return "too large";
    return NULL;
}

/* Appends `bytes` of data to the weights blob at a 256-byte boundary; its ref, or a ref with
 * bytes 0 when memory runs out. */
static ampc_rt_ref append_weights(ampc_cg *cg, const void *data, size_t bytes) {
    ampc_cg_output *o = cg->out;
    int64_t at = round_up(o->plan.weights_bytes, 256);
    unsigned char *w = realloc(o->weights_owned, (size_t)(at + (int64_t)bytes));
    if (!w) return (ampc_rt_ref){AMPC_RT_WEIGHTS, 0, 0};
    memset(w + o->plan.weights_bytes, 0, (size_t)(at - o->plan.weights_bytes));
    memcpy(w + at, data, bytes);
    o->weights_owned = w;
    o->plan.weights = w;
    o->plan.weights_bytes = at + (int64_t)bytes;
    return (ampc_rt_ref){AMPC_RT_WEIGHTS, at, (int64_t)bytes};
}

/* W^T (N x K) from the step's weight, padded with zeros to np x kp. */
static uint16_t *weight_rows(const ampc_cg *cg, const ampc_rt_gemm *p, int64_t np, int64_t kp) {
    uint16_t *wt = calloc((size_t)(np * kp), sizeof *wt);
    if (!wt) return NULL;
    const unsigned char *b = (const unsigned char *)cg->out->weights_owned + p->b.offset;
    for (int64_t f = 0; f < p->n; f++)
        for (int64_t k = 0; k < p->k; k++) {
            int64_t at = p->trans_b ? f * p->ldb + k : k * p->ldb + f; /* B [N,K] or [K,N] */
            memcpy(&wt[f * kp + k], b + at * 2, 2);
        }
    return wt;
}

/* The kernel: its parameters (compressed values and metadata, x, c, bias, y) and one call of the
 * template with the step's constants. */
static ampc_status emit(ampc_cg *cg, const ampc_node *n, int32_t step, ampc_rt_ref vals,
                        ampc_rt_ref meta, int64_t np, int64_t kp) {
    const ampc_rt_gemm *p = &cg->steps[step].gemm;
    const char *t = p->dtype_ab == AMPC_DTYPE_F16 ? "ampc::f16" : "ampc::bf16";
    const char *ct = ampc_cg_ctype(p->dtype_ab);
    bool bias = ampc_cg_epi_bias(p->epilogue);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, "sparse_gemm");
    const char *pv = ampc_cg_param_ref(k, vals, ct, false);
    const char *pm = ampc_cg_param_ref(k, meta, "unsigned int", false);
    const char *px = ampc_cg_param_ref(k, p->a, ct, false);
    const char *pc = p->c.bytes ? ampc_cg_param_ref(k, p->c, ct, false) : "nullptr";
    const char *pb = bias ? ampc_cg_param_ref(k, p->bias, ct, false) : "nullptr";
    const char *py = ampc_cg_param_ref(k, p->d, ct, true);
    ampc_cg_line(k, "static_assert(ampc::sp24::sp_smem<%d, %d, %d, %d>::bytes == %u, "
                    "\"codegen/sparse_gemm.c's smem_bytes\");",
                 SG_BF, SG_BT, SG_BK, SG_STAGES, smem_bytes());
    ampc_cg_line(k, "ampc::sp24::sp_args<%s> a_;", t);
    ampc_cg_line(k, "a_.wv = %s; a_.meta = %s; a_.x = %s; a_.c = %s; a_.bias = %s; a_.y = %s;",
                 pv, pm, px, pc, pb, py);
    ampc_cg_line(k, "a_.M = %lld; a_.N = %lld; a_.K = %lld; a_.Kp = %lld;", (long long)p->m,
                 (long long)p->n, (long long)p->k, (long long)kp);
    ampc_cg_line(k, "a_.ldx = %lldLL; a_.ldc = %lldLL; a_.ldy = %lldLL;", (long long)p->lda,
                 (long long)(p->c.bytes ? p->ldc : 0), (long long)p->ldd);
    ampc_cg_line(k, "a_.alpha = (float)%s; a_.beta = (float)%s;", ampc_cg_f64(p->alpha).s,
                 ampc_cg_f64(p->c.bytes ? p->beta : 0.0f).s);
    ampc_cg_line(k, "ampc::sp24::sparse_gemm<%s, %d, %d, %d, %d, %d, %d, %d>(a_);", t, SG_BF,
                 SG_BT, SG_BK, SG_WF, SG_WT, SG_STAGES, ampc_cg_epi_act(p->epilogue));
    uint32_t grid[3] = {(uint32_t)(np / SG_BF), (uint32_t)((p->m + SG_BT - 1) / SG_BT), 1};
    uint32_t block[3] = {SG_WF * SG_WT * 32, 1, 1};
    return ampc_cg_kernel_end_gemm_alt(k, step, grid, block, smem_bytes());
}

ampc_status ampc_cg_sparse_gemm(ampc_cg *cg, const ampc_node *n, int32_t step) {
    const ampc_rt_gemm p = cg->steps[step].gemm;
    if (why_not(cg, &p) != NULL) return AMPC_OK; /* the step stays dense or cuSPARSELt */
    int64_t np = round_up(p.n, SG_BF), kp = round_up(p.k, SG_BK);
    uint16_t *wt = weight_rows(cg, &p, np, kp);
    if (!wt) return AMPC_FAIL(cg->g, n, AMPC_E_OOM, "out of host memory compressing a 2:4 weight");
    ampc_diag d = {0};
    ampc_cg_sparse24 s;
    ampc_status st = ampc_cg_sparse24_compress(&d, n->name, p.dtype_ab, wt, np, kp, &s);
    free(wt);
    if (st != AMPC_OK) {
        /* The pass marked the weight 2:4 along K: a failure here is ours, not the user's. */
        st = AMPC_FAIL(cg->g, n, st == AMPC_E_OOM ? AMPC_E_OOM : AMPC_E_INTERNAL,
                       "compressing the 2:4 weight of a marked GEMM: %s",
                       d.n ? d.entries[0].msg : "out of memory");
        ampc_diag_free(&d);
        return st;
    }
    ampc_diag_free(&d);
    ampc_rt_ref vals = append_weights(cg, s.values, (size_t)(np * kp / 2) * 2);
    ampc_rt_ref meta = vals.bytes ? append_weights(cg, s.meta, (size_t)s.n_meta * 4)
                                  : (ampc_rt_ref){0};
    ampc_cg_sparse24_free(&s);
    if (!vals.bytes || !meta.bytes)
        return AMPC_FAIL(cg->g, n, AMPC_E_OOM, "out of host memory for a compressed 2:4 weight");
    return emit(cg, n, step, vals, meta, np, kp);
}
