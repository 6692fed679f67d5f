/*
 * lower_attention.c — the GPU lowering of ampc.FusedAttention (passes/fuse_attention.c), one
 * generated kernel calling a template of codegen/kernels/attention.cuh with the node's sizes and
 * strides baked in as constants:
 *
 *   - ampc::attn_mma (tensor cores, flash-attention style; grid (ceil(Sq / 64), H, B), blocks
 *     of 4 warps: MMA_WARPS; two stages of key tiles in dynamic shared memory: mma_smem) for
 *     f16/bf16 (and ampc::attn_mma_split, 16 query rows a block and the keys split over its four
 *     warps, when attn_mma's grid would leave most of the GPU idle: SPLIT_BELOW) when both head
 *     sizes are multiples of 16 up to 128, every head dim is contiguous (step 1), every other
 *     step of Q, K, V and Y is a multiple of 8 elements and the tensors start 16-byte aligned,
 *     so tiles load in 16-byte chunks (the mask's too when its rows are contiguous and aligned
 *     the same way: mask_vector);
 *   - ampc::attn_rows otherwise (f32, f64, other head sizes or layouts): one warp a query row.
 *
 * Q, K and V start at their inputs' element offsets (the columns of a joined projection,
 * passes/fuse_qkv.c): each pointer argument carries its own. With kv_group g, query head h
 * reads K and V head h / g (grouped-query attention reads each K/V head where it is). Y's steps
 * follow merge_heads, or y_perm and y_shape (ir/attention.h). The mask's steps are those of its
 * right-aligned broadcast to [B, H, Sq, Sk] (0 where it has a unit dim); with mask_period W its
 * first dim has W entries and batch b reads entry b % W (windowed attention's shift mask).
 * causal (no mask input) is the kernels' CAUSAL flag with its offset in the descriptor: no mask
 * is read, and attn_mma's blocks compute only the key tiles their rows see.
 */
#include "codegen.h"

#include "ir/attention.h"

#include <string.h>

/* Where operand i (Q, K, V) starts: its input's bytes from its element offset on. */
static ampc_rt_ref operand_ref(ampc_cg *cg, const ampc_node *n, const ampc_attention_params *s, int32_t i) {
    ampc_rt_ref r = ampc_cg_ref(cg, n->inputs[i]);
    const int64_t skip = s->off[i] * (int64_t)ampc_dtype_size(n->inputs[i]->dtype);
    r.offset += skip;
    r.bytes -= skip;
    return r;
}

/* Whether the tensor-core kernel takes this node (see the file comment). */
static bool mma_fits(ampc_cg *cg, const ampc_node *n, const ampc_attention_params *s) {
    const ampc_dtype t = n->inputs[0]->dtype;
    if (t != AMPC_DTYPE_F16 && t != AMPC_DTYPE_BF16) return false;
    if (s->D % 16 || s->D > 128 || s->Dv % 16 || s->Dv > 128) return false;
    if (s->B > 65535 || s->H > 65535) return false;
    const int64_t *st[4] = {s->qs, s->ks, s->vs, s->ys};
    for (int32_t i = 0; i < 4; i++)
        if (st[i][3] != 1 || st[i][0] % 8 || st[i][1] % 8 || st[i][2] % 8) return false;
    for (int32_t i = 0; i < 3; i++)
        if (operand_ref(cg, n, s, i).offset % 16) return false;
    return ampc_cg_ref(cg, n->outputs[0]).offset % 16 == 0;
}

/* Below this many blocks of attn_mma (B * H * ceil(Sq / 64)) most of the GPU is idle (108 SMs
 * on an A100, 132 on an H100 or H200) and attn_mma_split takes the node instead: four times the
 * blocks, the keys split over the warps, their states combined at the end. Measured on an H100
 * (docs/benchmarks.md, attention-bench.sh): at 48 and 64 blocks (batch 1 of GPT-2, ViT-B/16 and
 * the Llama-style decoder) attn_mma is 8-19 % faster than the split kernel. */
enum { SPLIT_BELOW = 32 };

/* attn_mma's warps a block (16 query rows each; the kernel takes 4 or 8). Blocks of 8 warps
 * share each key tile copied into shared memory among twice the rows, but on an H100
 * (attention-bench.sh at the zoo's shapes, D = 64) they were slower everywhere but ViT-B/16 at
 * batch 32 (38.8 against 40.6 us): 6 % slower for the causal decoders (a block waits at each
 * tile for its warp with the most keys), 4 % for BERT's and T5's 128 x 128. */
enum { MMA_WARPS = 4 };

/* The dynamic shared memory of attn_mma (split: attn_mma_split), attn_stage in attention.cuh:
 * two stages of a K tile and a V tile (64 keys; split: 128) with rows padded by 8 elements and,
 * with a mask, its tile (16 rows a warp; split: 16). For D = 64 with a mask 53 KB (split: 80
 * KB), for D = 128 86 KB: over the 48 KB default, which the runtime opts into. */
static uint32_t mma_smem(const ampc_node *n, const ampc_attention_params *s, bool split) {
    const int64_t keys = split ? 128 : 64, mrows = split ? 16 : 16 * MMA_WARPS;
    const int64_t mask = n->n_inputs > 3 && n->inputs[3] ? mrows * keys : 0;
    const int64_t stage = keys * (s->D + 8) + keys * (s->Dv + 8) + mask;
    return (uint32_t)(2 * stage * (int64_t)ampc_dtype_size(n->inputs[0]->dtype));
}

/* Whether attn_mma may load the mask's tiles in 16-byte chunks: rows contiguous, every step and
 * Sk multiples of 8 elements, the mask 16-byte aligned. */
static bool mask_vector(ampc_cg *cg, const ampc_node *n, const ampc_attention_params *s) {
    if (n->n_inputs < 4 || !n->inputs[3] || s->ms[3] != 1 || s->Sk % 8) return false;
    for (int32_t d = 0; d < 3; d++)
        if (s->ms[d] % 8) return false;
    return ampc_cg_ref(cg, n->inputs[3]).offset % 16 == 0;
}

static void emit_steps(ampc_cg_kernel *k, const char *name, const int64_t st[4]) {
    ampc_cg_line(k, "/* %s */ {%lldLL, %lldLL, %lldLL, %lldLL},", name, (long long)st[0],
                 (long long)st[1], (long long)st[2], (long long)st[3]);
}

/* The constant ampc::attn_desc `a` of the node. */
static void emit_desc(ampc_cg_kernel *k, const ampc_attention_params *s, double scale) {
    ampc_cg_line(k, "const ampc::attn_desc a = {");
    ampc_cg_line(k, "    %lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %lldLL,", (long long)s->B,
                 (long long)s->H, (long long)s->Sq, (long long)s->Sk, (long long)s->group,
                 (long long)s->mp);
    emit_steps(k, "q", s->qs);
    emit_steps(k, "k", s->ks);
    emit_steps(k, "v", s->vs);
    emit_steps(k, "mask", s->ms);
    emit_steps(k, "y", s->ys);
    ampc_cg_line(k, "    %s, /* causal */ %lldLL};", ampc_cg_f32((float)scale).s,
                 (long long)s->causal_off);
}

ampc_status ampc_cg_lower_attention(ampc_cg *cg, const ampc_node *n) {
    ampc_attention_params s;
    ampc_attention_params_of(n, &s); /* the attributes checked by inference */
    const double scale = s.scale;
    const bool is_safe = s.safe;
    const bool mma = mma_fits(cg, n, &s);
    const bool split = mma && s.B * s.H * ((s.Sq + 63) / 64) < SPLIT_BELOW;
    const char *t = ampc_cg_ctype(n->inputs[0]->dtype);
    ampc_cg_kernel *k = ampc_cg_kernel_begin(cg, n, mma ? "attention_mma" : "attention");
    const char *q = ampc_cg_param_ref(k, operand_ref(cg, n, &s, 0), t, false);
    const char *kk = ampc_cg_param_ref(k, operand_ref(cg, n, &s, 1), t, false);
    const char *v = ampc_cg_param_ref(k, operand_ref(cg, n, &s, 2), t, false);
    const char *mask = n->n_inputs > 3 && n->inputs[3] ? ampc_cg_param(k, n->inputs[3], false) : NULL;
    const char *y = ampc_cg_param(k, n->outputs[0], true);
    emit_desc(k, &s, scale);
    char m[96], flags[32];
    snprintf(m, sizeof m, "(const %s *)0", t);
    /* the template's last parameters: MVEC (attn_mma's), CAUSAL and attn_mma's warps */
    const int32_t warps = split ? 4 : MMA_WARPS;
    const char *mvec = mask_vector(cg, n, &s) ? "true" : "false";
    const char *causal = s.causal ? "true" : "false";
    if (split) snprintf(flags, sizeof flags, ", %s, %s", mvec, causal);
    else if (mma) snprintf(flags, sizeof flags, ", %s, %s, %d", mvec, causal, warps);
    else snprintf(flags, sizeof flags, ", %s", causal);
    ampc_cg_line(k, "ampc::%s<%s, %lld, %lld, %s%s>(%s, %s, %s, %s, %s, a);",
                 split ? "attn_mma_split" : mma ? "attn_mma" : "attn_rows", t, (long long)s.D,
                 (long long)s.Dv, is_safe ? "true" : "false", flags, q, kk, v, mask ? mask : m, y);
    if (mma) {
        const int64_t rows = split ? 16 : 16 * warps;
        const uint32_t grid[3] = {(uint32_t)((s.Sq + rows - 1) / rows), (uint32_t)s.H, (uint32_t)s.B};
        const uint32_t block[3] = {(uint32_t)(32 * warps), 1, 1};
        /* 16 warps an SM at head size 64 (four blocks of 4 warps: 128 registers a thread at
         * most; 130 for sm_90 unbounded, which would leave three) */
        if (!split && s.D <= 64 && s.Dv <= 64) ampc_cg_kernel_min_blocks(k, 16 / warps);
        return ampc_cg_kernel_end_launch(k, grid, block, mma_smem(n, &s, split));
    }
    int64_t blocks = (s.B * s.H * s.Sq + 3) / 4; /* 4 warps a block, one a row, grid-strided */
    if (blocks > 65535) blocks = 65535;
    const uint32_t grid[3] = {(uint32_t)blocks, 1, 1}, block[3] = {128, 1, 1};
    return ampc_cg_kernel_end_launch(k, grid, block, 0);
}
