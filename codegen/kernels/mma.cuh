/*
 * mma.cuh — the tensor-core and shared-memory primitives of ampc's generated kernels (sm_80 and
 * up): mma.sync m16n8k16 with f32 accumulators, cp.async 16-byte copies, ldmatrix x4 (plain and
 * transposed). attention.cuh, gemm.cuh and sparse_gemm.cuh build on them.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k16, 16-bit A/B), with g = lane / 4, t = lane % 4:
 *   A (16 x 16, row): a0 = (row g, cols 2t, 2t+1), a1 = row g + 8, a2 / a3 the same at cols + 8
 *   B (16 x 8, col):  b0 = (rows 2t, 2t+1, col g), b1 = rows + 8
 *   C (16 x 8, f32):  c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = row g + 8
 * ldmatrix.x4 takes the row addresses of four 8 x 8 tiles from lanes 8i .. 8i + 7 (tile i) and
 * gives each thread register i: plain, the pair (row g, cols 2t, 2t+1) of tile i; transposed,
 * (rows 2t, 2t+1, col g).
 *
 * With AMPC_EMULATE_MMA defined (bench/kernels/emu.h), each primitive calls an emu_* function of
 * that name instead, so the kernels run on the CPU for validation without a GPU.
 */
#pragma once

#include "ampc/common.cuh"

namespace ampc {

template <typename T> struct mma_op;
template <> struct mma_op<f16> {
    /* c += a (16x16, row) * b (16x8, col) */
    static __device__ __forceinline__ void run(float c[4], const unsigned a[4], unsigned b0,
                                               unsigned b1) {
#ifdef AMPC_EMULATE_MMA
        emu_mma<f16>(c, a, b0, b1);
#else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
    }
    /* two floats rounded into one register, lo in the low half (one F2FP.PACK_AB) */
    static __device__ __forceinline__ unsigned pack(float lo, float hi) {
        const __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<const unsigned *>(&h);
    }
    /* the two halves of w as floats (exactly) */
    static __device__ __forceinline__ void unpack(unsigned w, float &lo, float &hi) {
        const __half2 h = *reinterpret_cast<const __half2 *>(&w);
        lo = __low2float(h), hi = __high2float(h);
    }
};
template <> struct mma_op<bf16> {
    static __device__ __forceinline__ void run(float c[4], const unsigned a[4], unsigned b0,
                                               unsigned b1) {
#ifdef AMPC_EMULATE_MMA
        emu_mma<bf16>(c, a, b0, b1);
#else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
    }
    static __device__ __forceinline__ unsigned pack(float lo, float hi) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<const unsigned *>(&h);
    }
    static __device__ __forceinline__ void unpack(unsigned w, float &lo, float &hi) {
        lo = __uint_as_float(w << 16), hi = __uint_as_float(w & 0xffff0000u);
    }
};

/* 16 bytes global -> shared without waiting (cp.async.cg; zeros and no read when !ok), the
 * commit of the copies issued so far as a group, the wait until at most N groups are pending. */
#ifdef AMPC_EMULATE_MMA
__device__ __forceinline__ void cp16(void *dst, const void *src, bool ok) { emu_cp16(dst, src, ok); }
__device__ __forceinline__ void cp_commit() {}
template <int N> __device__ __forceinline__ void cp_wait() {}
__device__ __forceinline__ void ldsm_x4(unsigned r[4], const void *p) { emu_ldsm_x4(r, p, false); }
__device__ __forceinline__ void ldsm_x4_trans(unsigned r[4], const void *p) { emu_ldsm_x4(r, p, true); }
#else
__device__ __forceinline__ unsigned smem_u32(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp16(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldsm_x4(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
#endif

} // namespace ampc
