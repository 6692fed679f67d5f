#!/usr/bin/env bash
# attention-emu.sh — builds bench/kernels/attention_emu.cpp with the host C++ compiler against
# the CUDA headers and runs it: the FusedAttention kernels of codegen/kernels/attention.cuh
# emulated on the CPU (128 threads a block) against a double-precision reference. No GPU needed;
# a few minutes on two cores. Exit status 0 when every case matches.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/emu-run.sh" attention_emu
