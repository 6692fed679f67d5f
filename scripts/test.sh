#!/usr/bin/env bash
# test.sh — builds ampc twice (release with debug info; debug with ASan+UBSan) and runs the whole
# Criterion suite under ctest in both, then the short fuzz run: every libFuzzer target of
# tests/fuzz for 20 s (scripts/fuzz.sh), then the short crash-safety and valgrind runs on a small
# model (a convolution block of the fuzz seeds; docs/reliability.md has the long ones), then the
# tensor-core kernels (attention, dense GEMM) and the warp-row norm emulated on the CPU against
# double-precision references, and generated elementwise chains against the reference evaluator
# (bench/kernels/*-emu.sh). Fails when a suite fails, the fuzzers
# find anything, a kill tears a file, valgrind reports an error or a leak, or an emulated kernel
# differs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh" default debug
"$root/scripts/gpu-record-age.sh" || true
"$root/scripts/gen-onnx-tests.sh"
start=$(date +%s)
status=0
for preset in default debug; do
  echo "== ctest ($preset) =="
  ctest --preset "$preset" -j "$(nproc)" || status=1
done
echo "test.sh: suites took $(( $(date +%s) - start )) s"
echo "== fuzz (20 s per target, seed 1) =="
start=$(date +%s)
AMPC_FUZZ_SEED=1 "$root/scripts/fuzz.sh" 20 || status=1
echo "test.sh: fuzz build and run took $(( $(date +%s) - start )) s"
echo "== crash safety and memcheck (small model) =="
start=$(date +%s)
small="$root/tests/fuzz/corpus/compile/conv_block.onnx"
AMPC_MODEL=$small "$root/scripts/crash-safety.sh" 4 || status=1
AMPC_MODEL=$small "$root/scripts/memcheck.sh" || status=1
echo "test.sh: crash safety and memcheck took $(( $(date +%s) - start )) s"
echo "== kernels emulated on the CPU =="
start=$(date +%s)
"$root/bench/kernels/attention-emu.sh" || status=1
"$root/bench/kernels/gemm-emu.sh" || status=1
"$root/bench/kernels/norm-emu.sh" || status=1
"$root/bench/kernels/chain-emu.sh" || status=1
echo "test.sh: kernel emulation took $(( $(date +%s) - start )) s"
exit $status
