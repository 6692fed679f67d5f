#!/usr/bin/env bash
# baselines.sh COMMIT... — installs ampc as it was at each COMMIT into .devbase/<COMMIT>/ (Release:
# bin/ampc, its libraries and the runtime that `ampc -o` links), for compare.py's before/after rows
# on one machine in one run (docs/benchmarks.md). Carry .devbase with .devbin, .devlibs and .devdata
# (the same Debian libraries serve every commit), then on the GPU machine:
#
#   AMPC_BENCH_BASELINE=$(bash bench/baselines.sh --list aa19490 10fdd07) \
#       AMPC_BENCH_MODELS=llama bash scripts/gpu-check.sh bench
#
#   bench/baselines.sh COMMIT...          builds what is missing (a worktree in .devbase-src)
#   bench/baselines.sh --list COMMIT...   prints AMPC_BENCH_BASELINE's value for them, here
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ "${1:-}" = --list ]; then
  shift
  for c in "$@"; do printf '%s%s=%s' "${sep:-}" "$c" "$root/.devbase/$c/bin/ampc"; sep=,; done
  echo
  exit 0
fi
[ $# -gt 0 ] || { echo "usage: bench/baselines.sh [--list] COMMIT..." >&2; exit 2; }
src=.devbase-src
[ -d "$src" ] || git worktree add --detach -q "$src" HEAD
for c in "$@"; do
  [ -x ".devbase/$c/bin/ampc" ] && { echo "baselines: $c already in .devbase/$c"; continue; }
  git -C "$src" checkout -q --detach "$c"
  cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$src/build" -j "$(nproc)" --target ampc_cli ampc ampcrt ampc_runtime \
      > "$src/build.log" 2>&1 || { tail -20 "$src/build.log" >&2; exit 1; }
  cmake --install "$src/build" --prefix ".devbase/$c" >/dev/null
  echo "baselines: ampc at $c in .devbase/$c"
done
# The worktree's sources and build stay for the next call; only the installations travel.
du -sh .devbase
