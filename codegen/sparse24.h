/*
 * sparse24.h — 2:4 structured-sparse weights in the form the sparse tensor-core instructions
 * read: compressed values plus metadata (sparse24.c has the format and the PTX ISA facts it rests
 * on; docs/sparsity.md describes it for users).
 *
 * The matrix is the instruction's sparse operand A: `rows` x `k` row-major, K contiguous (for a
 * MatMul weight B [K, N] that is B transposed, N rows of K). Two instruction forms:
 *   f16 and bf16 (stored as uint16): mma.sp.sync.aligned.m16n8k32, 2:4 along K — every group of
 *     4 consecutive elements of a row holds at most 2 non-zeros;
 *   f32 run as tf32: mma.sp.sync.aligned.m16n8k8, 1:2 along K — every pair holds at most 1
 *     non-zero (stricter than 2:4: a 2:4 matrix is not always 1:2).
 */
#ifndef AMPC_CG_SPARSE24_H
#define AMPC_CG_SPARSE24_H

#include "ir/ir.h"

/* A compressed matrix. values and meta are malloc'ed (ampc_cg_sparse24_free). */
typedef struct ampc_cg_sparse24 {
    ampc_dtype dtype;  /* f16, bf16 (2:4, m16n8k32) or f32 (1:2, tf32 m16n8k8) */
    int64_t rows, k;   /* the dense matrix */
    void *values;      /* rows x k/2 elements of dtype, row-major: each row's kept elements in
                          column order */
    uint32_t *meta;    /* n_meta words: for each 16-row tile (row-major over tiles), for each K
                          tile (32 columns f16/bf16, 8 tf32), 16 words f16/bf16 (word 2g + h
                          for lane 4g + h, kernels/sparse_layout.cuh) or 8 tf32 (word g for
                          lane 4g + selector) */
    int64_t n_meta;
} ampc_cg_sparse24;

/* Columns of K one instruction covers (32 for f16/bf16, 8 for tf32); 0 for another dtype. */
int64_t ampc_cg_sparse24_k_tile(ampc_dtype dtype);

/* Compresses the rows x k matrix `dense` (dtype f16/bf16 as uint16, or f32). Fails with
 * AMPC_E_INVALID_ARG and a message in d naming `name` (the tensor), the row and the group when
 * the matrix is not 2:4 (f32: 1:2) along K, when k is not a multiple of 4 (f32: 2), or for
 * another dtype; *out is then zeroed. AMPC_E_OOM without a message when memory runs out.
 * Rows and K past the last whole tile are padding: their metadata selects elements 0 and 1. */
ampc_status ampc_cg_sparse24_compress(ampc_diag *d, const char *name, ampc_dtype dtype,
                                      const void *dense, int64_t rows, int64_t k,
                                      ampc_cg_sparse24 *out);

/* Writes the rows x k dense matrix back (the dropped elements are +0). Fails with
 * AMPC_E_INVALID_ARG and a message in d when a metadata nibble is not one the instruction
 * accepts. */
ampc_status ampc_cg_sparse24_decompress(ampc_diag *d, const ampc_cg_sparse24 *s, void *dense);

void ampc_cg_sparse24_free(ampc_cg_sparse24 *s);

#endif
