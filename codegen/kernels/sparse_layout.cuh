/*
 * sparse_layout.cuh — the index arithmetic of the 2:4 sparse GEMM (sparse_gemm.cuh): where the
 * compressed weight and its metadata lie in memory (codegen/sparse24.c writes them), and which
 * shared-memory address each lane hands to ldmatrix or reads metadata from.
 *
 * It is plain C as well as CUDA C++: the kernel includes it (as "ampc/sparse_layout.cuh") and
 * so does the CPU test (tests/codegen/test_sparse_gemm.c), which emulates ldmatrix and mma.sp on
 * exactly these addresses and checks the product against the dense one. A change here is thus
 * checked on the CPU for both sides at once.
 *
 * The facts from the PTX ISA it encodes (mma.sp.sync.aligned.m16n8k32 with .f16/.bf16, sections
 * "Sparse matrix storage" and "Matrix fragments for sparse mma.m16n8k32 with .f16 and .bf16"):
 *   - A (sparse, 16 x 32 logical) is given as its 16 x 16 compressed values, four .b32 registers
 *     of two elements: a0 (row g, columns 2t, 2t+1), a1 (row g+8, same), a2 (row g, 2t+8, +9),
 *     a3 (row g+8, 2t+8, +9), with g = lane / 4 (groupID), t = lane % 4 (threadID_in_group):
 *     what ldmatrix.x4 gives from the four 8 x 8 quadrants in the order (top-left, bottom-left,
 *     top-right, bottom-right);
 *   - B (32 x 8 dense, .col) four registers: b_j holds rows (k) 8j + 2t, 8j + 2t + 1 of column g:
 *     what ldmatrix.x4 gives from a row-major [8 columns][32 k] tile, matrix j being k 8j..8j+7;
 *   - the metadata is one .b32 register; with sparsity selector 0, lanes 4g and 4g+1 supply it:
 *     lane 4g + h describes K columns 16h..16h+15 of rows g (bits 15..0) and g + 8 (bits 31..16),
 *     chunk q (columns 16h + 4q .. +3) in bits 4q+3..4q of its half;
 *   - C/D (16 x 8, f32): c0, c1 at row g, columns 2t, 2t+1; c2, c3 at row g + 8.
 */
#ifndef AMPC_SPARSE_LAYOUT_CUH
#define AMPC_SPARSE_LAYOUT_CUH

#if defined(__CUDACC__)
#define AMPC_SPL_FN __host__ __device__ __forceinline__
#else
#define AMPC_SPL_FN static inline
#endif

/* One instruction: 16 rows of A (the weight's output features), 8 columns of B (activation rows),
 * 32 of K; the compressed A tile is 16 x 16 and its metadata 16 words (a word per lane that can
 * supply it: 8 groups x 2). */
enum {
    AMPC_SPL_MMA_M = 16,
    AMPC_SPL_MMA_N = 8,
    AMPC_SPL_MMA_K = 32,
    AMPC_SPL_META_WORDS = 16,
};

/* The metadata word of a 16 x 32 tile that holds row r (0..15) and 4-column chunk c (0..7), and
 * the nibble's shift in it. Tiles lie row-major (all K tiles of rows 0..15, then rows 16..31),
 * AMPC_SPL_META_WORDS words each, so a block's K range of one 16-row tile is contiguous. */
AMPC_SPL_FN int ampc_spl_meta_word(int r, int c) { return 2 * (r % 8) + c / 4; }
AMPC_SPL_FN int ampc_spl_meta_shift(int r, int c) { return (r >= 8 ? 16 : 0) + 4 * (c % 4); }

/* The word lane reads for selector 0 (lanes 4g, 4g+1 matter; 4g+2 and 4g+3 read their group's
 * words too, which the instruction ignores). */
AMPC_SPL_FN int ampc_spl_meta_lane_word(int lane) { return 2 * (lane / 4) + (lane % 4) % 2; }

/* ldmatrix.x4 row addresses. A: lane l points at row l % 16, compressed column (l / 16) * 8 of a
 * 16 x 16 compressed tile; B: lane l at activation row l % 8, K column (l / 8) * 8 of an
 * 8 x 32 tile (both relative to the tile's corner in shared memory). */
AMPC_SPL_FN int ampc_spl_a_ldm_row(int lane) { return lane % 16; }
AMPC_SPL_FN int ampc_spl_a_ldm_col(int lane) { return (lane / 16) * 8; }
AMPC_SPL_FN int ampc_spl_b_ldm_row(int lane) { return lane % 8; }
AMPC_SPL_FN int ampc_spl_b_ldm_col(int lane) { return (lane / 8) * 8; }

/* Shared-memory row pitches, in elements, of the compressed weight tile (bk / 2 values a row)
 * and of the activation tile (bk a row): 8 elements (16 bytes) of padding make the 8 row
 * addresses of one ldmatrix matrix fall in 8 different 16-byte bank groups (80- and 144-byte
 * pitches for bk = 64), so it reads without bank conflicts. */
AMPC_SPL_FN int ampc_spl_a_pitch(int bk) { return bk / 2 + 8; }
AMPC_SPL_FN int ampc_spl_x_pitch(int bk) { return bk + 8; }

#endif /* AMPC_SPARSE_LAYOUT_CUH */
