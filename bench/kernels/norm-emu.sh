#!/usr/bin/env bash
# norm-emu.sh — builds bench/kernels/norm_emu.cpp with the host C++ compiler against the CUDA
# headers and runs it: the warp-row LayerNormalization / RMSNormalization kernel of
# codegen/kernels/reduce.cuh emulated on the CPU (one warp a block) against a double-precision
# reference, and its post-scaled form bit for bit against the norm and Mul it replaces. No GPU
# needed; seconds on two cores. Exit status 0 when every case matches.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/emu-run.sh" norm_emu
