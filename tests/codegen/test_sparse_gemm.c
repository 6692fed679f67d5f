/*
 * test_sparse_gemm.c — ampc's generated 2:4 sparse GEMM (codegen/sparse_gemm.c,
 * codegen/kernels/sparse_gemm.cuh and sparse_layout.cuh), on the CPU:
 *   - the layout proof: the compressed weight and metadata of codegen/sparse24.c, copied into a
 *     shared-memory image exactly as the kernel's cp.async stage does, read into fragments at
 *     the addresses the kernel gives ldmatrix and its metadata loads, and multiplied by an
 *     emulation of mma.sp m16n8k32 written from the PTX ISA's fragment tables (independently of
 *     sparse_layout.cuh), must give the dense product exactly (the values are small dyadic
 *     numbers, so every sum is exact in f32). A wrong nibble order, word placement, selector
 *     or ldmatrix address fails it;
 *   - codegen: a marked GEMM step gets its own_kernel, whose compressed weight (in the
 *     weights blob) decompresses to the padded weight; an f32 one gets none;
 *   - NVRTC compiles the kernel for compute_80, sm_80 and sm_90 in f16 and bf16 with every
 *     epilogue the plan can ask (none, bias, bias + ReLU, ReLU, residual).
 * GPU runs against the reference evaluator are in tests/runtime/test_sparse.c.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "support.h"

#include "ampc_runtime.h"
#include "codegen/kernels/sparse_layout.cuh"
#include "codegen/sparse24.h"
#include "compiler/module.h"

#include <stdlib.h>
#include <string.h>

/* ---- the layout proof ------------------------------------------------------------------------- */

/* The emulated block: R 16-row tiles of the weight, T 8-row tiles of the activation, one warp
 * doing every instruction; K = KP (two stages of BK). */
enum { BK = 64, R = 2, T = 2, ROWS = 16 * R, TOKS = 8 * T, KP = 2 * BK };

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

typedef struct half_codec {
    uint16_t (*from)(float);
    float (*to)(uint16_t);
} half_codec;

/* A register of two 16-bit elements: element 0 in the low half (little-endian, as ldmatrix and
 * the fragments are). */
static float reg_half(const half_codec *hc, uint32_t r, int which) {
    return hc->to((uint16_t)(which ? r >> 16 : r & 0xFFFF));
}

/* ldmatrix.x4 (PTX ISA, ldmatrix): lanes 8i..8i+7 give the row addresses of matrix i; lane l
 * receives, in register i, elements 2(l%4) and 2(l%4)+1 of row l/4 of matrix i. */
static void ldmatrix_x4(const uint16_t *smem, const int addr[32], int lane, uint32_t r[4]) {
    for (int i = 0; i < 4; i++) {
        const uint16_t *row = smem + addr[8 * i + lane / 4] + 2 * (lane % 4);
        r[i] = (uint32_t)row[0] | (uint32_t)row[1] << 16;
    }
}

/* mma.sp.sync.aligned.m16n8k32.row.col.f32, sparsity selector 0, from the PTX ISA's tables:
 *   A (compressed 16 x 16): element (i, j) is in lane 4(i%8) + (j%8)/2, register
 *     (i >= 8) + 2(j >= 8), half j%2;
 *   metadata of row i, chunk c (K columns 4c..4c+3): lane 4(i%8) + c/4, bits 4(c%4)+3..4(c%4)
 *     of the low half for i < 8, of the high half for i >= 8; the nibble's bits 1..0 and 3..2
 *     are the positions, in the chunk, of the chunk's stored elements 0 and 1;
 *   B (32 x 8): element (k, n) in lane 4n + (k%8)/2, register k/8, half k%2;
 *   D (16 x 8): element (i, n) in lane 4(i%8) + n/2, register 2(i >= 8) + n%2. */
static void mma_sp(const half_codec *hc, uint32_t a[32][4], uint32_t b[32][4], uint32_t e[32],
                   float d[32][4]) {
    for (int i = 0; i < 16; i++)
        for (int n = 0; n < 8; n++) {
            float sum = 0;
            for (int c = 0; c < 8; c++) {
                uint32_t meta = e[4 * (i % 8) + c / 4] >> ((i >= 8 ? 16 : 0) + 4 * (c % 4));
                for (int s = 0; s < 2; s++) {
                    int j = 2 * c + s, pos = (int)(s ? meta >> 2 & 3 : meta & 3), k = 4 * c + pos;
                    float av = reg_half(hc, a[4 * (i % 8) + (j % 8) / 2][(i >= 8) + 2 * (j >= 8)], j % 2);
                    float bv = reg_half(hc, b[4 * n + (k % 8) / 2][k / 8], k % 2);
                    sum += av * bv;
                }
            }
            d[4 * (i % 8) + n / 2][2 * (i >= 8) + n % 2] += sum;
        }
}

/* The proof for one element type: every step the kernel takes, on the CPU. */
static void layout_proof(ampc_dtype t, const half_codec *hc, uint64_t seed) {
    /* W^T (ROWS x KP, 2:4 along K, values in {+-0.5, +-1, +-1.5, +-2}) and x (TOKS x KP). */
    uint16_t *wt = calloc(ROWS * KP, 2), *x = calloc(TOKS * KP, 2);
    float *wf = calloc(ROWS * KP, sizeof *wf), *xf = calloc(TOKS * KP, sizeof *xf);
    for (int r = 0; r < ROWS; r++)
        for (int g = 0; g < KP; g += 4) {
            int keep = (int)(lcg(&seed) % 3); /* 0, 1 or 2 non-zeros: padding positions too */
            int p0 = (int)(lcg(&seed) % 4), p1 = (p0 + 1 + (int)(lcg(&seed) % 3)) % 4;
            for (int q = 0; q < keep; q++) {
                float v = (float)((int)(lcg(&seed) % 4) + 1) * 0.5f * (lcg(&seed) % 2 ? 1 : -1);
                int at = r * KP + g + (q ? p1 : p0);
                wf[at] = v;
                wt[at] = hc->from(v);
            }
        }
    for (int i = 0; i < TOKS * KP; i++) {
        xf[i] = (float)((int)(lcg(&seed) % 9) - 4) * 0.25f;
        x[i] = hc->from(xf[i]);
    }
    ampc_diag dg = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&dg, "w", t, wt, ROWS, KP, &s), AMPC_OK, "%s",
                 ampc_diag_join(&dg));
    const uint16_t *vals = s.values;

    float acc[R][T][32][4];
    memset(acc, 0, sizeof acc);
    int ap = ampc_spl_a_pitch(BK), xp = ampc_spl_x_pitch(BK);
    uint16_t *sa = calloc((size_t)(ROWS * ap), 2), *sx = calloc((size_t)(TOKS * xp), 2);
    uint32_t se[R * (BK / 32) * AMPC_SPL_META_WORDS];
    for (int kt = 0; kt < KP / BK; kt++) {
        /* the stage, as sp_load_stage fills it (16-byte copies; f0 = t0 = 0) */
        for (int r = 0; r < ROWS; r++)
            memcpy(sa + r * ap, vals + r * (KP / 2) + kt * (BK / 2), BK / 2 * 2);
        for (int rt = 0; rt < R; rt++)
            memcpy(se + rt * (BK / 32) * AMPC_SPL_META_WORDS,
                   s.meta + (rt * (KP / 32) + kt * (BK / 32)) * AMPC_SPL_META_WORDS,
                   (BK / 32) * AMPC_SPL_META_WORDS * 4);
        for (int r = 0; r < TOKS; r++) memcpy(sx + r * xp, x + r * KP + kt * BK, BK * 2);
        /* the inner loop of sparse_gemm, lane by lane */
        for (int ks = 0; ks < BK / 32; ks++)
            for (int rt = 0; rt < R; rt++) {
                int aaddr[32];
                uint32_t a[32][4], e[32];
                for (int l = 0; l < 32; l++)
                    aaddr[l] = (rt * 16 + ampc_spl_a_ldm_row(l)) * ap + ks * 16 + ampc_spl_a_ldm_col(l);
                for (int l = 0; l < 32; l++) {
                    ldmatrix_x4(sa, aaddr, l, a[l]);
                    e[l] = se[(rt * (BK / 32) + ks) * AMPC_SPL_META_WORDS + ampc_spl_meta_lane_word(l)];
                }
                for (int j = 0; j < T; j++) {
                    int baddr[32];
                    uint32_t b[32][4];
                    for (int l = 0; l < 32; l++)
                        baddr[l] = (j * 8 + ampc_spl_b_ldm_row(l)) * xp + ks * 32 + ampc_spl_b_ldm_col(l);
                    for (int l = 0; l < 32; l++) ldmatrix_x4(sx, baddr, l, b[l]);
                    mma_sp(hc, a, b, e, acc[rt][j]);
                }
            }
    }
    /* the epilogue's placement of c0..c3 (sparse_gemm.cuh): c0 (f g, t 2q), c1 (g, 2q+1),
     * c2 (g+8, 2q), c3 (g+8, 2q+1), g = lane / 4, q = lane % 4 */
    int bad = 0;
    for (int rt = 0; rt < R; rt++)
        for (int j = 0; j < T; j++)
            for (int l = 0; l < 32; l++)
                for (int q = 0; q < 4; q++) {
                    int f = rt * 16 + l / 4 + (q >= 2 ? 8 : 0), tk = j * 8 + 2 * (l % 4) + q % 2;
                    float want = 0;
                    for (int k = 0; k < KP; k++) want += wf[f * KP + k] * xf[tk * KP + k];
                    float got = acc[rt][j][l][q];
                    if (got != want && bad++ < 5)
                        cr_log_error("%s: y^T[%d][%d] = %g, the dense product is %g",
                                     ampc_dtype_name(t), f, tk, (double)got, (double)want);
                }
    cr_assert_eq(bad, 0, "%s: %d of %d outputs differ from the dense product", ampc_dtype_name(t),
                 bad, ROWS * TOKS);
    ampc_cg_sparse24_free(&s);
    ampc_diag_free(&dg);
    free(wt), free(x), free(wf), free(xf), free(sa), free(sx);
}

Test(sparse_gemm, fragments_and_metadata_reproduce_the_dense_product_f16) {
    half_codec hc = {ampc_f32_to_f16, ampc_f16_to_f32};
    for (uint64_t seed = 1; seed <= 4; seed++) layout_proof(AMPC_DTYPE_F16, &hc, seed);
}

Test(sparse_gemm, fragments_and_metadata_reproduce_the_dense_product_bf16) {
    half_codec hc = {ampc_f32_to_bf16, ampc_bf16_to_f32};
    for (uint64_t seed = 5; seed <= 8; seed++) layout_proof(AMPC_DTYPE_BF16, &hc, seed);
}

/* The placement functions, spelled out for a few cases of the ISA's table. */
Test(sparse_gemm, layout_functions_answer_the_isa_placement) {
    cr_assert_eq(ampc_spl_meta_lane_word(0), 0);
    cr_assert_eq(ampc_spl_meta_lane_word(1), 1);
    cr_assert_eq(ampc_spl_meta_lane_word(5), 3);
    cr_assert_eq(ampc_spl_meta_word(9, 5), 3);  /* row 9: g 1 (high half), chunk 5: h 1 */
    cr_assert_eq(ampc_spl_meta_shift(9, 5), 20);
}

/* ---- codegen and NVRTC ------------------------------------------------------------------------ */

typedef enum epi_kind { E_NONE, E_BIAS, E_BIAS_RELU, E_RELU, E_RESIDUAL } epi_kind;

/* y = epilogue(x[m,k] @ w[k,n]) with w 2:4 along K (2 of every 4 rows of a column non-zero). */
static ampc_graph *graph(ampc_dtype t, int64_t m, int64_t n, int64_t k, epi_kind ek) {
    ampc_graph *g = ampc_graph_create("sp");
    int64_t xd[2] = {m, k}, wd[2] = {k, n}, yd[2] = {m, n};
    ampc_value *x = ampc_input(g, "x", t, 2, xd);
    uint16_t *w = calloc((size_t)(k * n), 2), *b = calloc((size_t)n, 2),
             *z = calloc((size_t)(m * n), 2);
    uint16_t (*from)(float) = t == AMPC_DTYPE_F16 ? ampc_f32_to_f16 : ampc_f32_to_bf16;
    for (int64_t r = 0; r < k; r++)
        for (int64_t c = 0; c < n; c++)
            if ((r + c) % 4 < 2) w[r * n + c] = from((float)((r * 3 + c) % 5) - 2.0f + 0.5f);
    for (int64_t i = 0; i < n; i++) b[i] = from(0.25f * (float)(i % 3));
    for (int64_t i = 0; i < m * n; i++) z[i] = from(0.5f);
    ampc_value *y = ampc_matmul(g, x, ampc_constant(g, "w", t, 2, wd, w));
    if (ek == E_BIAS || ek == E_BIAS_RELU) y = ampc_add(g, y, ampc_constant(g, "b", t, 1, &n, b));
    if (ek == E_RESIDUAL) y = ampc_add(g, y, ampc_constant(g, "z", t, 2, yd, z));
    if (ek == E_BIAS_RELU || ek == E_RELU) y = ampc_relu(g, y);
    free(w), free(b), free(z);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK, "%s", ampc_graph_errors(g));
    return g;
}

static ampc_module *compile(ampc_graph *g, const int32_t *archs, int32_t n_archs) {
    ampc_pipeline_options po = {.verify = true, .sparsity = AMPC_SPARSITY_VERIFY};
    ampc_compile_options o = {.archs = archs, .n_archs = n_archs, .cache_dir = "", .pipeline = &po};
    ampc_module *mod = NULL;
    ampc_status st = ampc_compile(g, &o, &mod);
    cr_assert_eq(st, AMPC_OK, "compile: %s", ampc_graph_errors(g));
    return mod;
}

static const ampc_rt_gemm *the_gemm(const ampc_module *mod) {
    const ampc_rt_plan *p = &mod->cg->plan;
    for (int32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].kind == AMPC_RT_STEP_GEMM) return &p->steps[i].gemm;
    cr_assert_fail("the plan has no GEMM step");
    return NULL;
}

/* M = 200 (not a multiple of the 128-row block), N = 200 (padded to 256), K = 96 (to 128). */
Test(sparse_gemm, a_marked_step_gets_the_kernel_and_its_compressed_weight) {
    static const int32_t none = 0;
    ampc_graph *g = graph(AMPC_DTYPE_F16, 200, 200, 96, E_BIAS);
    ampc_module *mod = compile(g, &none, 0);
    const ampc_rt_plan *p = &mod->cg->plan;
    const ampc_rt_gemm *gm = the_gemm(mod);
    const ampc_rt_kernel *k = &gm->own_kernel;
    cr_assert_eq(gm->sparse24, 1);
    cr_assert(k->name && strstr(k->name, "_sparse_gemm"), "no sparse kernel on the 2:4 step");
    cr_assert_eq(k->grid[0], 2, "N 200 -> 2 blocks of 128 features");
    cr_assert_eq(k->grid[1], 2, "M 200 -> 2 blocks of 128 rows");
    cr_assert_eq(k->block[0], 256);
    cr_assert_eq(k->n_args, 5, "values, metadata, x, bias, y");
    const ampc_rt_ref v = k->args[0].ref, m = k->args[1].ref;
    cr_assert(v.space == AMPC_RT_WEIGHTS && m.space == AMPC_RT_WEIGHTS);
    cr_assert_leq(m.offset + m.bytes, p->weights_bytes);
    cr_assert_eq(v.bytes, 256 * 128 / 2 * 2);
    cr_assert_eq(m.bytes, 256 / 16 * (128 / 32) * AMPC_SPL_META_WORDS * 4);
    /* the stored compressed weight decompresses to W^T padded with zeros */
    ampc_cg_sparse24 s = {.dtype = AMPC_DTYPE_F16, .rows = 256, .k = 128,
                          .values = (char *)p->weights + v.offset,
                          .meta = (uint32_t *)((char *)p->weights + m.offset),
                          .n_meta = m.bytes / 4};
    uint16_t *dense = calloc(256 * 128, 2);
    ampc_diag d = {0};
    cr_assert_eq(ampc_cg_sparse24_decompress(&d, &s, dense), AMPC_OK, "%s", ampc_diag_join(&d));
    const uint16_t *w = (const uint16_t *)((const char *)p->weights + gm->b.offset);
    for (int f = 0; f < 256; f++)
        for (int kk = 0; kk < 128; kk++) {
            uint16_t want = f < 200 && kk < 96 ? w[kk * 200 + f] : 0;
            cr_assert_eq(dense[f * 128 + kk], want, "W^T[%d][%d]", f, kk);
        }
    free(dense);
    ampc_diag_free(&d);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

Test(sparse_gemm, an_f32_step_gets_no_kernel) {
    static const int32_t none = 0;
    ampc_graph *g = ampc_graph_create("sp32");
    int64_t xd[2] = {16, 64}, wd[2] = {64, 32};
    float *w = calloc(64 * 32, sizeof *w);
    for (int i = 0; i < 64 * 32; i += 4) w[i] = 1.0f;
    ampc_value *y = ampc_matmul(g, ampc_input(g, "x", AMPC_DTYPE_F32, 2, xd),
                                ampc_constant(g, "w", AMPC_DTYPE_F32, 2, wd, w));
    free(w);
    cr_assert_eq(ampc_output(g, y, "y"), AMPC_OK);
    ampc_module *mod = compile(g, &none, 0);
    cr_assert_null(the_gemm(mod)->own_kernel.name);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}

/* Whether some unit of m contains s. */
static bool cuda_has(const ampc_module *m, const char *s) {
    for (int32_t u = 0; u < ampc_module_unit_count(m); u++)
        if (strstr(ampc_module_cuda(m, u), s)) return true;
    return false;
}

static void compiles(ampc_dtype t) {
    static const int32_t archs[2] = {80, 90};
    static const epi_kind eks[5] = {E_NONE, E_BIAS, E_BIAS_RELU, E_RELU, E_RESIDUAL};
    static const char *const acts[5] = {", 0>(a_);", ", 0>(a_);", ", 1>(a_);", ", 1>(a_);", ", 0>(a_);"};
    for (int i = 0; i < 5; i++) {
        ampc_graph *g = graph(t, 96, 256, 768, eks[i]);
        ampc_module *mod = compile(g, archs, 2);
        cr_assert_not_null(the_gemm(mod)->own_kernel.name, "epilogue %d: no sparse kernel", i);
        cr_assert(cuda_has(mod, "ampc::sp24::sparse_gemm<"), "epilogue %d", i);
        cr_assert(cuda_has(mod, acts[i]), "epilogue %d: activation", i);
        if (eks[i] == E_RESIDUAL) cr_assert(cuda_has(mod, "a_.beta = (float)1;"), "the residual");
        bool mma = false;
        for (int32_t u = 0; u < ampc_module_unit_count(mod); u++)
            mma |= strstr(ampc_module_ptx(mod, u), "mma.sp") != NULL;
        cr_assert(mma, "%s epilogue %d: the PTX has no mma.sp", ampc_dtype_name(t), i);
        ampc_module_destroy(mod);
        ampc_graph_destroy(g);
    }
}

Test(sparse_gemm, kernel_compiles_for_sm80_and_sm90_f16) { compiles(AMPC_DTYPE_F16); }
Test(sparse_gemm, kernel_compiles_for_sm80_and_sm90_bf16) { compiles(AMPC_DTYPE_BF16); }

/* The library of a plan with a sparse kernel builds (its host C holds the GEMM step's
 * own_kernel and argument array) and, loaded back, has the same kernel on the step. */
Test(sparse_gemm, the_library_keeps_the_own_kernel) {
    static const int32_t none = 0;
    ampc_graph *g = graph(AMPC_DTYPE_F16, 64, 128, 256, E_BIAS_RELU);
    ampc_module *mod = compile(g, &none, 0);
    char dir[] = "/tmp/ampc_spgemm_XXXXXX", path[128];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/sp.so", dir);
    char *err = NULL;
    ampc_status st = ampc_module_write_library(mod, path, NULL, &err);
    cr_assert_eq(st, AMPC_OK, "%s", err ? err : "");
    ampc_rt_artifact *a = NULL;
    cr_assert_eq(ampc_rt_load(path, &a, &err), AMPC_OK, "%s", err ? err : "");
    const ampc_rt_plan *p = ampc_rt_artifact_plan(a);
    const ampc_rt_kernel *want = &the_gemm(mod)->own_kernel, *got = NULL;
    for (int32_t i = 0; i < p->n_steps; i++)
        if (p->steps[i].kind == AMPC_RT_STEP_GEMM) got = &p->steps[i].gemm.own_kernel;
    cr_assert(got && got->name && strcmp(got->name, want->name) == 0);
    cr_assert_eq(got->n_args, want->n_args);
    cr_assert_eq(got->smem, want->smem);
    for (int32_t i = 0; i < want->n_args; i++)
        cr_assert(got->args[i].kind == want->args[i].kind &&
                  got->args[i].ref.space == want->args[i].ref.space &&
                  got->args[i].ref.offset == want->args[i].ref.offset &&
                  got->args[i].ref.bytes == want->args[i].ref.bytes, "argument %d", i);
    ampc_rt_unload(a);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    ampc_module_destroy(mod);
    ampc_graph_destroy(g);
}
