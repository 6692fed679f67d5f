/*
 * sparse24.c — compression of 2:4 (tf32: 1:2) sparse weights for mma.sp, and its inverse.
 *
 * What the PTX ISA says, and this file relies on (PTX ISA, "Warp Level Matrix Multiply-Accumulate
 * Instructions", section "Matrix multiply-accumulate operation using mma.sp instruction with sparse
 * matrix A"):
 *   - "Sparse matrix storage": the M x K operand A is packed into M x K/2 elements, each row's
 *     non-zeros in order; their positions are given by the metadata operand.
 *     .f16/.bf16: granularity 2:4 — each chunk of 4 adjacent elements of a row has 2 zeros; the
 *     positions of the 2 stored elements are two 2-bit indices. With ordered metadata the only
 *     meaningful 4-bit values are 0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110: the lower index
 *     in bits 1..0, the higher in bits 3..2 (0b0100 = elements 0 and 1); 0b0000, 0b0101, 0b1010
 *     and 0b1111 (an index twice) are invalid.
 *     .tf32: granularity 1:2 — each chunk of 2 adjacent elements has one zero; the stored
 *     element's position is a 4-bit index, 0b0100 (element 0) or 0b1110 (element 1).
 *   - The sparsity selector names the threads of each group of four consecutive threads that
 *     supply the metadata: for m16n8k32 (f16/bf16) two threads (selector 0: threads 0 and 1),
 *     for m16n8k8 (tf32) one thread, 0..3.
 *   - "Matrix fragments for sparse mma.m16n8k32 with .f16 and .bf16 types": the metadata is one
 *     .b32 register; thread 4g + h (selector 0) holds K columns 16h..16h+15 of row g in bits
 *     15..0 and of row g + 8 in bits 31..16, chunk q (columns 16h + 4q..+3) in bits 4q+3..4q.
 *     So one 16 x 32 tile has 16 words, word 2g + h (kernels/sparse_layout.cuh, which the
 *     kernel uses too, has the placement).
 *   - "... m16n8k8 with .tf32": one register per group g, row g in bits 15..0 and row g + 8 in
 *     bits 31..16, chunk c (columns 2c, 2c+1) in bits 4c+3..4c: one 16 x 8 tile has 8 words.
 *
 * A group with fewer non-zeros than the instruction stores is completed with its lowest unused
 * positions (the zeros there are stored as values), so every group has a valid nibble and the
 * values keep their exact bits; only dropped zeros come back as +0 (a -0 there becomes +0).
 */
#include "codegen/sparse24.h"

#include "codegen/kernels/sparse_layout.cuh" /* the f16/bf16 metadata placement, shared with
                                                 * the kernel */

#include <stdlib.h>
#include <string.h>

int64_t ampc_cg_sparse24_k_tile(ampc_dtype dtype) {
    if (dtype == AMPC_DTYPE_F16 || dtype == AMPC_DTYPE_BF16) return AMPC_SPL_MMA_K;
    return dtype == AMPC_DTYPE_F32 ? 8 : 0;
}

/* The form of one dtype: elements per chunk, stored per chunk, bytes per element. */
typedef struct sp_form {
    int chunk, keep;
    size_t es;
} sp_form;

static sp_form form_of(ampc_dtype t) {
    if (t == AMPC_DTYPE_F32) return (sp_form){2, 1, 4};
    return (sp_form){4, 2, 2};
}

/* Element i is zero (either sign). */
static bool is_zero(const void *data, size_t es, int64_t i) {
    if (es == 4) {
        uint32_t b;
        memcpy(&b, (const unsigned char *)data + (size_t)i * 4, 4);
        return (b & 0x7fffffffu) == 0;
    }
    uint16_t h;
    memcpy(&h, (const unsigned char *)data + (size_t)i * 2, 2);
    return (h & 0x7fffu) == 0;
}

/* The positions a chunk stores (pos[0] < pos[1] when two): its non-zeros, completed with the
 * lowest unused positions. Returns the number of non-zeros. */
static int chunk_positions(const void *row, const sp_form *f, int64_t first, int pos[2]) {
    int nz = 0, n = 0;
    bool used[4] = {false};
    for (int j = 0; j < f->chunk; j++)
        if (!is_zero(row, f->es, first + j)) {
            if (n < f->keep) pos[n++] = j, used[j] = true;
            nz++;
        }
    for (int j = 0; n < f->keep; j++)
        if (!used[j]) pos[n++] = j, used[j] = true;
    if (f->keep == 2 && pos[0] > pos[1]) {
        int t = pos[0];
        pos[0] = pos[1], pos[1] = t;
    }
    return nz;
}

static uint32_t nibble(const sp_form *f, const int pos[2]) {
    if (f->keep == 1) return pos[0] ? 0xEu : 0x4u;
    return (uint32_t)(pos[1] << 2 | pos[0]);
}

/* Metadata words of one 16-row x K-tile piece: f16/bf16 (m16n8k32) 16, tf32 (m16n8k8) 8. */
static int64_t words_per_tile(const sp_form *f) { return f->keep == 2 ? AMPC_SPL_META_WORDS : 8; }

/* Where chunk c of row r puts its nibble: word index and shift. f16/bf16 follow
 * sparse_layout.cuh (the kernel reads the same functions); tf32: word (r % 8) of the tile,
 * rows r % 16 >= 8 in the upper half. */
static void meta_place(int64_t k, int64_t kt, const sp_form *f, int64_t r, int64_t c, int64_t *word,
                       int *shift) {
    int64_t n_kt = (k + kt - 1) / kt, per_tile = kt / f->chunk;
    int64_t tile = (r / 16) * n_kt + c / per_tile;
    int rr = (int)(r % 16), cc = (int)(c % per_tile);
    if (f->keep == 2) {
        *word = tile * AMPC_SPL_META_WORDS + ampc_spl_meta_word(rr, cc);
        *shift = ampc_spl_meta_shift(rr, cc);
        return;
    }
    *word = tile * 8 + rr % 8;
    *shift = (rr >= 8 ? 16 : 0) + 4 * cc;
}

static ampc_status refuse(ampc_diag *d, ampc_cg_sparse24 *out, const char *name, const char *what) {
    memset(out, 0, sizeof *out);
    return ampc_diag_error(d, NULL, AMPC_E_INVALID_ARG, "tensor '%s': %s", name ? name : "", what);
}

/* Every metadata word starts as padding: each chunk selects elements 0 and 1 (0b0100). */
static void fill_padding(uint32_t *meta, int64_t n) {
    for (int64_t i = 0; i < n; i++) meta[i] = 0x44444444u;
}

ampc_status ampc_cg_sparse24_compress(ampc_diag *d, const char *name, ampc_dtype dtype,
                                      const void *dense, int64_t rows, int64_t k,
                                      ampc_cg_sparse24 *out) {
    int64_t kt = ampc_cg_sparse24_k_tile(dtype);
    char msg[256];
    if (!kt) {
        snprintf(msg, sizeof msg, "sparse tensor cores take f16, bf16 or f32 (as tf32), found %s",
                 ampc_dtype_name(dtype));
        return refuse(d, out, name, msg);
    }
    sp_form f = form_of(dtype);
    if (rows < 0 || k < 0 || k % f.chunk) {
        snprintf(msg, sizeof msg, "K must be a multiple of %d for %s sparse tensor cores, found %lld",
                 f.chunk, ampc_dtype_name(dtype), (long long)k);
        return refuse(d, out, name, msg);
    }
    int64_t n_meta = (rows + 15) / 16 * ((k + kt - 1) / kt) * words_per_tile(&f);
    *out = (ampc_cg_sparse24){.dtype = dtype, .rows = rows, .k = k, .n_meta = n_meta};
    out->values = malloc((size_t)(rows * k / 2) * f.es + 1);
    out->meta = malloc((size_t)n_meta * sizeof *out->meta + 1);
    if (!out->values || !out->meta) {
        ampc_cg_sparse24_free(out);
        return AMPC_E_OOM;
    }
    fill_padding(out->meta, n_meta);
    unsigned char *vals = out->values;
    for (int64_t r = 0; r < rows; r++) {
        const unsigned char *row = (const unsigned char *)dense + (size_t)(r * k) * f.es;
        for (int64_t c = 0; c < k / f.chunk; c++) {
            int pos[2];
            int nz = chunk_positions(row, &f, c * f.chunk, pos);
            if (nz > f.keep) {
                snprintf(msg, sizeof msg,
                         "%s: row %lld, group %lld (columns %lld..%lld) has %d non-zeros, at "
                         "most %d allowed",
                         f.keep == 2 ? "not 2:4 sparse along K"
                                     : "not 1:2 sparse along K, as mma.sp with .tf32 needs",
                         (long long)r,
                         (long long)c, (long long)(c * f.chunk), (long long)(c * f.chunk + f.chunk - 1),
                         nz, f.keep);
                ampc_cg_sparse24_free(out);
                return refuse(d, out, name, msg);
            }
            for (int j = 0; j < f.keep; j++, vals += f.es)
                memcpy(vals, row + (size_t)(c * f.chunk + pos[j]) * f.es, f.es);
            int64_t word;
            int shift;
            meta_place(k, kt, &f, r, c, &word, &shift);
            out->meta[word] = (out->meta[word] & ~(0xFu << shift)) | nibble(&f, pos) << shift;
        }
    }
    return AMPC_OK;
}

/* The positions nibble v stores; false when the instruction does not accept v. */
static bool positions_of(const sp_form *f, uint32_t v, int pos[2]) {
    if (f->keep == 1) {
        pos[0] = v == 0xE ? 1 : 0;
        return v == 0xE || v == 0x4;
    }
    pos[0] = (int)(v & 3), pos[1] = (int)(v >> 2);
    return pos[0] < pos[1];
}

ampc_status ampc_cg_sparse24_decompress(ampc_diag *d, const ampc_cg_sparse24 *s, void *dense) {
    sp_form f = form_of(s->dtype);
    int64_t kt = ampc_cg_sparse24_k_tile(s->dtype);
    if (!kt) return ampc_diag_error(d, NULL, AMPC_E_INVALID_ARG, "sparse matrix of dtype %s",
                                    ampc_dtype_name(s->dtype));
    memset(dense, 0, (size_t)(s->rows * s->k) * f.es);
    const unsigned char *vals = s->values;
    for (int64_t r = 0; r < s->rows; r++) {
        unsigned char *row = (unsigned char *)dense + (size_t)(r * s->k) * f.es;
        for (int64_t c = 0; c < s->k / f.chunk; c++) {
            int64_t word;
            int shift, pos[2];
            meta_place(s->k, kt, &f, r, c, &word, &shift);
            uint32_t v = s->meta[word] >> shift & 0xFu;
            if (!positions_of(&f, v, pos))
                return ampc_diag_error(d, NULL, AMPC_E_INVALID_ARG,
                                       "sparse metadata word %lld bits %d..%d: 0x%X is not a "
                                       "valid %s index (row %lld, group %lld)",
                                       (long long)word, shift + 3, shift, v,
                                       f.keep == 2 ? "2:4" : "tf32 1:2", (long long)r, (long long)c);
            for (int j = 0; j < f.keep; j++, vals += f.es)
                memcpy(row + (size_t)(c * f.chunk + pos[j]) * f.es, vals, f.es);
        }
    }
    return AMPC_OK;
}

void ampc_cg_sparse24_free(ampc_cg_sparse24 *s) {
    free(s->values);
    free(s->meta);
    s->values = NULL;
    s->meta = NULL;
}
