/*
 * quant.cuh — device helpers of the kernels of codegen/lower_quant.c: rounding half to even with
 * saturation (as ir/ref/quant.c's saturate_rint) and the child lookup of TfIdfVectorizer's
 * n-gram trie (baked into the kernel as sorted per-node child lists).
 */
#pragma once

namespace ampc {

/* v rounded half to even and saturated into [lo, hi]; NaN gives 0. */
__device__ __forceinline__ double q_sat_rint(double v, double lo, double hi) {
    v = rint(v);
    return v != v ? 0.0 : v < lo ? lo : v > hi ? hi : v;
}

/* The child of trie node nd for token tok, or -1: node nd's children are entries
 * first[nd] .. first[nd + 1] - 1 of (tok_of, child_of), sorted by token. */
__device__ __forceinline__ int tf_child(const int *first, const long long *tok_of,
                                        const int *child_of, int nd, long long tok) {
    int lo = first[nd], hi = first[nd + 1];
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (tok_of[mid] < tok) lo = mid + 1;
        else hi = mid;
    }
    return lo < first[nd + 1] && tok_of[lo] == tok ? child_of[lo] : -1;
}

} // namespace ampc
