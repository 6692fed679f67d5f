#!/usr/bin/env bash
# bench/memory/peak-rss.sh [MIB...] — the host memory ampc uses to compile a large model: for an
# MLP whose weights take MIB mebibytes (make_mlp.py, one ONNX file; default 256 and 1024), the
# peak resident set size (GNU time's "Maximum resident set size") of
#   ampc MODEL --emit ir            import + passes (no code generation)
#   ampc MODEL -o model.so          the whole pipeline: codegen, NVRTC (empty kernel cache), the
#                                   library with its weights (a sidecar file above 1 GiB)
# Prints one markdown row per run, for docs/reliability.md. Needs build/bin/ampc and the
# project's .venv (scripts/gen-onnx-tests.sh makes it); about 3x the largest size in free memory.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ampc=${AMPC:-$root/build/bin/ampc}
py=${PYTHON:-$root/.venv/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/ampc-peak-rss-XXXXXX")
trap 'rm -rf "$work"' EXIT
sizes=${*:-256 1024}
# AMPC_PEAK_RSS_COMMANDS="lib" measures the library build only: `--emit ir` prints every weight
# as text (about 3.3 bytes of text per byte of weights; 1 GiB of weights is minutes of printing).
commands="ir lib"
[ -n "${AMPC_PEAK_RSS_COMMANDS:-}" ] && commands=$AMPC_PEAK_RSS_COMMANDS

# Runs the command under GNU time; prints "<peak RSS MiB> <wall s>".
measure() {
  /usr/bin/time -v -o "$work/time.txt" "$@" >/dev/null 2>"$work/stderr.txt" ||
    { echo "peak-rss: failed: $*" >&2; cat "$work/stderr.txt" >&2; exit 1; }
  local kb wall
  kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.txt")
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.txt")
  echo "$((kb / 1024)) $wall"
}

echo "| model | file | command | peak RSS | RSS / file | wall |"
echo "|---|---|---|---|---|---|"
for mib in $sizes; do
  model="$work/mlp$mib.onnx"
  "$py" "$root/bench/memory/make_mlp.py" "$model" "$mib"
  fmib=$(( $(stat -c %s "$model") / 1048576 ))
  for cmd in $commands; do
    rm -rf "$work/cache" "$work"/lib.*
    if [ "$cmd" = "lib" ]; then args=(-o "$work/lib.so"); label="ampc MODEL -o model.so"
    else args=(--emit ir -o "$work/out.ir"); label="ampc MODEL --emit ir"; fi
    read -r rss wall < <(AMPC_CACHE_DIR="$work/cache" measure "$ampc" "$model" "${args[@]}")
    ratio=$(awk -v a="$rss" -v b="$fmib" 'BEGIN { printf "%.2f", a / b }')
    echo "| MLP, ${mib} MiB of f32 weights | $fmib MiB | \`$label\` | $rss MiB | $ratio | $wall |"
    rm -f "$work/out.ir" "$work"/lib.*
  done
  rm -f "$model"
done
