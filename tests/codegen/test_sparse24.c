/*
 * test_sparse24.c — compression of 2:4 sparse weights for mma.sp (codegen/sparse24.c): the
 * metadata of hand-made examples against the PTX ISA's rule written out here, the round trip
 * decompress(compress(w)) == w bit for bit over shapes and dtypes, and the refusals (a matrix
 * that is not 2:4, or not 1:2 for tf32; a bad K or dtype; a metadata nibble the instruction
 * rejects) with messages naming the tensor, the row and the group.
 */
#include "support.h"

#include "codegen/sparse24.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The ISA's rule for one f16/bf16 chunk of 4: the two stored positions lo < hi as two 2-bit
 * indices, lo in bits 1..0 and hi in bits 3..2. */
static uint32_t nib24(uint32_t lo, uint32_t hi) { return hi << 2 | lo; }
/* For tf32, the chunk of 2 stores element 0 (0b0100) or element 1 (0b1110). */
enum { TF32_FIRST = 0x4, TF32_SECOND = 0xE };
/* Padding chunks (rows or columns past the matrix) select elements 0 and 1. */
enum { PAD = 0x4 };

/* The metadata word of row r (< 8) of a one-tile matrix: chunks c0..c3 of row r in bits 15..0,
 * row r + 8 (padding here) in bits 31..16. */
static uint32_t word(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3) {
    uint32_t pad_row = PAD | PAD << 4 | PAD << 8 | PAD << 12;
    return c0 | c1 << 4 | c2 << 8 | c3 << 12 | pad_row << 16;
}

static uint16_t h(float x) { return ampc_f32_to_f16(x); }

Test(sparse24, metadata_of_a_4x8_f16_example_follows_the_isa_rule) {
    /* Columns 0..3 are group 0, 4..7 group 1 (K = 8: one 32-column tile, the rest padding). */
    const uint16_t a = h(1), b = h(2), c = h(-3), d = h(4), z = 0;
    uint16_t m[4][8] = {
        {a, b, z, z, z, z, c, d}, /* group 0: 0,1      group 1: 2,3 */
        {z, a, z, b, c, z, z, d}, /* group 0: 1,3      group 1: 0,3 */
        {z, z, a, z, z, z, z, z}, /* group 0: only 2 -> 0,2 (lowest free position)  group 1: none -> 0,1 */
        {a, z, b, z, z, c, d, z}, /* group 0: 0,2      group 1: 1,2 */
    };
    ampc_diag d_ = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&d_, "w", AMPC_DTYPE_F16, m, 4, 8, &s), AMPC_OK);
    /* Tiles: 1 row tile (16 rows, 12 of them padding) x 1 K tile (m16n8k32): 16 words, word
     * 2g + h for lane 4g + h: K columns 16h..16h+15 of rows g (low half) and g + 8 (high). */
    cr_assert_eq(s.n_meta, 16);
    const uint32_t P = word(PAD, PAD, PAD, PAD);
    uint32_t want[16] = {
        word(nib24(0, 1), nib24(2, 3), PAD, PAD), P, /* 0b0100, 0b1110 */
        word(nib24(1, 3), nib24(0, 3), PAD, PAD), P, /* 0b1101, 0b1100 */
        word(nib24(0, 2), nib24(0, 1), PAD, PAD), P, /* 0b1000, 0b0100 */
        word(nib24(0, 2), nib24(1, 2), PAD, PAD), P, /* 0b1000, 0b1001 */
        P, P, P, P, P, P, P, P,
    };
    cr_assert_eq(want[0], 0x444444E4u); /* the rule spelled out once more, in hex */
    cr_assert_eq(want[2], 0x444444CDu);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(s.meta[i], want[i], "word %d: got 0x%08X, want 0x%08X", i, s.meta[i], want[i]);
    /* Values: each row's stored elements in column order, 2 per group. */
    uint16_t want_v[4][4] = {{a, b, c, d}, {a, b, c, d}, {z, a, z, z}, {a, b, c, d}};
    cr_assert_eq(memcmp(s.values, want_v, sizeof want_v), 0);
    ampc_cg_sparse24_free(&s);
    ampc_diag_free(&d_);
}

Test(sparse24, metadata_of_a_2x8_tf32_example_follows_the_isa_rule) {
    float m[2][8] = {
        {1, 0, 0, 2, 3, 0, 0, 0},  /* pairs: first, second, first, none -> first */
        {0, -1, 0, 0, 0, 5, 6, 0}, /* second, none, second, first */
    };
    ampc_diag d = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&d, "w", AMPC_DTYPE_F32, m, 2, 8, &s), AMPC_OK);
    cr_assert_eq(s.n_meta, 8); /* one 16 x 8 tile */
    cr_assert_eq(s.meta[0], word(TF32_FIRST, TF32_SECOND, TF32_FIRST, TF32_FIRST));
    cr_assert_eq(s.meta[1], word(TF32_SECOND, TF32_FIRST, TF32_SECOND, TF32_FIRST));
    cr_assert_eq(s.meta[2], word(PAD, PAD, PAD, PAD));
    float want_v[2][4] = {{1, 2, 3, 0}, {-1, 0, 5, 6}};
    cr_assert_eq(memcmp(s.values, want_v, sizeof want_v), 0);
    ampc_cg_sparse24_free(&s);
    ampc_diag_free(&d);
}

/* Rows 16..31 and K columns 16..31 land in the words the layout says: tile (row tile 1, K tile
 * 0) of a 32 x 32 f16 matrix is words 16..31; row 16 + 8 + 3 (g = 3, high half), columns 20..23
 * (h = 1, chunk 1 of that half) are word 16 + 2 * 3 + 1, bits 23..20. */
Test(sparse24, a_later_tile_lands_where_the_layout_says) {
    uint16_t m[32][32] = {{0}};
    m[27][16 + 4 + 1] = h(1);
    m[27][16 + 4 + 3] = h(2);
    ampc_diag d = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&d, "w", AMPC_DTYPE_F16, m, 32, 32, &s), AMPC_OK);
    cr_assert_eq(s.n_meta, 2 * 1 * 16);
    for (int64_t i = 0; i < s.n_meta; i++) {
        uint32_t want = word(PAD, PAD, PAD, PAD);
        if (i == 16 + 2 * 3 + 1)
            want = (want & ~(0xFu << 20)) | nib24(1, 3) << 20;
        cr_assert_eq(s.meta[i], want, "word %lld: 0x%08X, want 0x%08X", (long long)i, s.meta[i], want);
    }
    ampc_cg_sparse24_free(&s);
    ampc_diag_free(&d);
}

/* ---- round trips ---------------------------------------------------------------------------- */

static uint64_t next(uint64_t *st) {
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return *st >> 33;
}

/* A random matrix with `keep` of every `chunk` consecutive elements of a row non-zero (random
 * bits, never a zero pattern), the others +0; sometimes fewer. */
static void random_sparse(void *m, size_t es, int64_t rows, int64_t k, int chunk, int keep,
                          uint64_t seed) {
    memset(m, 0, (size_t)(rows * k) * es);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < k; c += chunk) {
            int n = (int)(next(&seed) % (uint64_t)(keep + 1)); /* 0..keep non-zeros */
            for (int j = 0; j < n; j++) {
                int64_t at = r * k + c + (int64_t)(next(&seed) % (uint64_t)chunk);
                uint32_t bits = (uint32_t)next(&seed) | 1u; /* odd: never +-0 */
                if (es == 2) ((uint16_t *)m)[at] = (uint16_t)bits;
                else ((uint32_t *)m)[at] = bits;
            }
        }
}

static void round_trip(ampc_dtype t, int64_t rows, int64_t k, uint64_t seed) {
    bool tf32 = t == AMPC_DTYPE_F32;
    size_t es = tf32 ? 4 : 2;
    void *m = malloc((size_t)(rows * k) * es + 1), *back = malloc((size_t)(rows * k) * es + 1);
    random_sparse(m, es, rows, k, tf32 ? 2 : 4, tf32 ? 1 : 2, seed);
    ampc_diag d = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&d, "w", t, m, rows, k, &s), AMPC_OK, "%s x %s",
                 ampc_dtype_name(t), ampc_diag_join(&d));
    cr_assert_eq(ampc_cg_sparse24_decompress(&d, &s, back), AMPC_OK);
    cr_assert_eq(memcmp(m, back, (size_t)(rows * k) * es), 0, "%s %lld x %lld: round trip differs",
                 ampc_dtype_name(t), (long long)rows, (long long)k);
    int64_t kt = ampc_cg_sparse24_k_tile(t);
    cr_assert_eq(s.n_meta, (rows + 15) / 16 * ((k + kt - 1) / kt) * (tf32 ? 8 : 16));
    ampc_cg_sparse24_free(&s);
    ampc_diag_free(&d);
    free(m);
    free(back);
}

Test(sparse24, round_trip_is_exact_for_f16_and_bf16) {
    const int64_t shapes[][2] = {{16, 16}, {1, 4}, {5, 12}, {33, 40}, {64, 128}, {17, 20}};
    for (int i = 0; i < 6; i++) {
        round_trip(AMPC_DTYPE_F16, shapes[i][0], shapes[i][1], 11 + (uint64_t)i);
        round_trip(AMPC_DTYPE_BF16, shapes[i][0], shapes[i][1], 97 + (uint64_t)i);
    }
}

Test(sparse24, round_trip_is_exact_for_tf32) {
    const int64_t shapes[][2] = {{16, 8}, {1, 2}, {7, 6}, {20, 24}, {48, 64}};
    for (int i = 0; i < 5; i++) round_trip(AMPC_DTYPE_F32, shapes[i][0], shapes[i][1], 5 + (uint64_t)i);
}

/* ---- refusals ------------------------------------------------------------------------------- */

Test(sparse24, a_matrix_that_is_not_24_is_refused_naming_tensor_row_and_group) {
    uint16_t m[4][8] = {{0}};
    m[2][4] = h(1), m[2][5] = h(2), m[2][7] = h(3); /* row 2, group 1: 3 non-zeros */
    ampc_diag d = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&d, "fc.weight", AMPC_DTYPE_BF16, m, 4, 8, &s),
                 AMPC_E_INVALID_ARG);
    char *msg = ampc_diag_join(&d);
    cr_assert_str_eq(msg, "tensor 'fc.weight': not 2:4 sparse along K: row 2, group 1 (columns "
                          "4..7) has 3 non-zeros, at most 2 allowed");
    free(msg);
    cr_assert_null(s.values);
    cr_assert_null(s.meta);
    ampc_diag_free(&d);
}

Test(sparse24, tf32_needs_1_2_and_says_so) {
    float m[1][4] = {{1, 2, 0, 0}}; /* 2:4, but the first pair holds 2 */
    ampc_diag d = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&d, "w", AMPC_DTYPE_F32, m, 1, 4, &s), AMPC_E_INVALID_ARG);
    char *msg = ampc_diag_join(&d);
    cr_assert(strstr(msg, "tensor 'w': not 1:2 sparse along K, as mma.sp with .tf32 needs: row 0, "
                          "group 0 (columns 0..1) has 2 non-zeros, at most 1 allowed"), "%s", msg);
    free(msg);
    ampc_diag_free(&d);
}

Test(sparse24, bad_k_and_dtype_are_refused) {
    uint16_t m[6] = {0};
    ampc_diag d = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&d, "w", AMPC_DTYPE_F16, m, 1, 6, &s), AMPC_E_INVALID_ARG);
    cr_assert_eq(ampc_cg_sparse24_compress(&d, "w", AMPC_DTYPE_I32, m, 1, 4, &s), AMPC_E_INVALID_ARG);
    char *msg = ampc_diag_join(&d);
    cr_assert(strstr(msg, "tensor 'w': K must be a multiple of 4 for f16 sparse tensor cores, found 6"), "%s", msg);
    cr_assert(strstr(msg, "tensor 'w': sparse tensor cores take f16, bf16 or f32 (as tf32), found i32"), "%s", msg);
    free(msg);
    ampc_diag_free(&d);
}

Test(sparse24, decompress_rejects_an_invalid_nibble) {
    uint16_t m[1][4] = {{h(1), 0, 0, 0}}, back[4];
    ampc_diag d = {0};
    ampc_cg_sparse24 s;
    cr_assert_eq(ampc_cg_sparse24_compress(&d, "w", AMPC_DTYPE_F16, m, 1, 4, &s), AMPC_OK);
    s.meta[0] = (s.meta[0] & ~0xFu) | 0x5u; /* 0b0101: index 1 twice */
    cr_assert_eq(ampc_cg_sparse24_decompress(&d, &s, back), AMPC_E_INVALID_ARG);
    char *msg = ampc_diag_join(&d);
    cr_assert(strstr(msg, "sparse metadata word 0 bits 3..0: 0x5 is not a valid 2:4 index (row 0, group 0)"),
              "%s", msg);
    free(msg);
    ampc_cg_sparse24_free(&s);
    ampc_diag_free(&d);
}
