#!/usr/bin/env bash
# chain-emu.sh — fused elementwise chains run on the CPU against the reference evaluator
# (bench/kernels/chain_emu.py): the generated kernel of each small model, compiled as host C++
# against emu.h, equal bit for bit to `ampc run --reference`. No GPU needed; seconds.
#   bench/kernels/chain-emu.sh [AMPC]     (default: build/bin/ampc)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
exec "${AMPC_PYTHON:-$root/.venv/bin/python}" "$root/bench/kernels/chain_emu.py" "${1:-$root/build/bin/ampc}"
