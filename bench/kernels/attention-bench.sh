#!/usr/bin/env bash
# attention-bench.sh — ampc's attention kernels (bench/kernels/attention_bench.cu) against
# PyTorch's scaled_dot_product_attention (CUDA graph) at the attention shapes of the zoo's models,
# on the GPU machine (nvcc there; PyTorch from AMPC_TORCH_PYTHON):
#   bash bench/kernels/attention-bench.sh [KERNELS_DIR]
# KERNELS_DIR: the folder of .cuh files to build against (default codegen/kernels), so that a
# changed kernel and the committed one can be timed in one run (AMPC_ATTN_FLAGS=-DAB_ONE_WIDTH
# for kernels from before attn_mma's block width was a template parameter).
# Each shape times the kernel the lowering picks, then the other attn_mma widths (in brackets
# when the lowering would not pick that kernel family).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
src=${1:-$root/codegen/kernels}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ampc"
cp "$src"/*.cuh "$work/ampc/"
# name B H Hkv Sq Sk D mask (0 none, 1 causal tensor, 2 padding, 3 bias, 4 causal implied: what
# fuse-attention makes of a constant causal mask; the -tensor rows time the same shape reading it)
shapes="llama-b1 1 16 4 256 256 64 4
llama-b16 16 16 4 256 256 64 4
llama-b16-tensor 16 16 4 256 256 64 1
gpt2-b1 1 12 12 256 256 64 4
gpt2-b16 16 12 12 256 256 64 4
vit-b1 1 12 12 197 197 64 0
vit-b32 32 12 12 197 197 64 0
bert-b32 32 12 12 128 128 64 2
t5-b32 32 8 8 128 128 64 3
swin-b1 64 3 3 49 49 32 3
swin-b32 2048 3 3 49 49 32 3"
build() {
  set -- $1
  "$cuda/bin/nvcc" -std=c++17 -O3 -arch=sm_90 -I"$work" -DAB_B=$2 -DAB_H=$3 -DAB_HKV=$4 \
    -DAB_SQ=$5 -DAB_SK=$6 -DAB_D=$7 -DAB_MASK=$8 ${AMPC_ATTN_FLAGS:-} \
    "$root/bench/kernels/attention_bench.cu" -o "$work/$1"
}
export -f build; export cuda work root AMPC_ATTN_FLAGS
printf '%s\n' "$shapes" | xargs -P "$(nproc)" -I{} bash -c 'build "{}"'
printf '%s\n' "$shapes" | while read -r name rest; do
  "$work/$name" | sed "s/^/$(printf '%-16s ' "$name")/"
  [ "${PIPESTATUS[0]}" = 0 ] || echo "$name (mismatch or failure)"
done
[ -n "${AMPC_ATTN_PEER:-1}" ] && [ "${AMPC_ATTN_PEER:-1}" != 0 ] || exit 0
printf '%s\n' "$shapes" | "${AMPC_TORCH_PYTHON:-/opt/torch/.venv/bin/python}" -c '
import sys, torch, torch.nn.functional as F
for line in sys.stdin:
    name, b, h, hkv, sq, sk, d, mask = line.split(); b, h, hkv, sq, sk, d, mask = map(int, (b, h, hkv, sq, sk, d, mask))
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.rand(b, h, sq, d, device="cuda", generator=g, dtype=torch.float16) * 2 - 1
    k = (torch.rand(b, hkv, sk, d, device="cuda", generator=g, dtype=torch.float16) * 2 - 1).repeat_interleave(h // hkv, 1)
    v = (torch.rand(b, hkv, sk, d, device="cuda", generator=g, dtype=torch.float16) * 2 - 1).repeat_interleave(h // hkv, 1)
    m = None
    mask = 1 if mask == 4 else mask
    if mask == 2:
        m = torch.zeros(b, 1, 1, sk, device="cuda", dtype=torch.float16); m[..., sk - sk // 4:] = float("-inf")
    if mask == 3:
        m = torch.rand(1, h, sq, sk, device="cuda", generator=g, dtype=torch.float16)
    f = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=mask == 1)
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): f()
    torch.cuda.current_stream().wait_stream(s)
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        for _ in range(100): f()
    for _ in range(3): gr.replay()
    ts = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); gr.replay(); e1.record(); torch.cuda.synchronize(); ts.append(e0.elapsed_time(e1) * 10)
    ts.sort()
    print("%-16s PyTorch SDPA %8.2f us" % (name, ts[2]))
'
