#!/usr/bin/env bash
# gemm-bench.sh — builds bench/kernels/gemm_bench.cu with nvcc for sm_90 (the H200) into
# .devbin/gemm_bench, to be run on the GPU machine (source .devlibs/env.sh; .devbin/gemm_bench):
# ampc's dense GEMM in each tile configuration against cuBLAS at BERT's and the MLP's shapes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ampc" "$root/.devbin"
cp "$root"/codegen/kernels/*.cuh "$work/ampc/"
"$cuda/bin/nvcc" -std=c++17 -O3 -arch=sm_90 -I"$work" "$root/bench/kernels/gemm_bench.cu" \
  -o "$root/.devbin/gemm_bench" -lcublas
