#!/usr/bin/env bash
# memcheck.sh — valgrind's memcheck over ampc's compile pipeline on a ResNet-50-sized model
# (bench/compile-time/make_resnet50.py: 25.6 M weights, 53 convolutions, the project's .venv):
#
#   ir      ampc model.onnx --emit ir        import and every pass, no code generation
#   lib     ampc model.onnx -o model.so        the whole pipeline (codegen, host C, the library
#                                          writer), on a kernel cache a first run (without
#                                          valgrind) filled: NVRTC is answered from the cache;
#                                          the C compiler it runs is a child valgrind does not trace
#   cold    ampc model.onnx --emit ptx       with the cache off, so NVRTC itself runs under
#                                          valgrind (slow: only with --cold)
#
#   scripts/memcheck.sh [--cold]       needs build/bin/ampc (scripts/setup.sh) and valgrind
#   AMPC_MEMCHECK_RUNS=lib scripts/memcheck.sh     the whole pipeline only (ResNet-50: ~minutes)
#
# A run fails on any memcheck error and on any leak (definite or indirect; "possibly lost" and
# "still reachable" blocks are reported, not failed: libraries such as cudart keep allocations
# until exit). Prints one row per run and exits 1 when any run failed; logs stay in $AMPC_MEMCHECK_LOGS
# (default a temporary folder, removed).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ampc=${AMPC:-$root/build/bin/ampc}
# AMPC_MEMCHECK_RUNS picks the runs (default "ir lib"). On ResNet-50 the `ir` run spends its time
# printing 25.6 M weights as text (340 MB, 94 s of CPU without valgrind, hours under it); `lib`
# goes through the same import and passes without printing them.
runs=${AMPC_MEMCHECK_RUNS:-ir lib}
[ "${1:-}" = "--cold" ] && runs="$runs cold"
work=$(mktemp -d "${TMPDIR:-/tmp}/ampc-memcheck-XXXXXX")
trap 'rm -rf "$work"' EXIT
logs=${AMPC_MEMCHECK_LOGS:-$work}
mkdir -p "$logs"
# AMPC_MODEL=FILE checks another model (ResNet-50's `ir` run takes over 10 min on 2 busy cores).
if [ -n "${AMPC_MODEL:-}" ]; then cp "$AMPC_MODEL" "$work/model.onnx"
else "${PYTHON:-$root/.venv/bin/python3}" "$root/bench/compile-time/make_resnet50.py" "$work/model.onnx"; fi
AMPC_CACHE_DIR="$work/cache" "$ampc" "$work/model.onnx" -o "$work/fill.so" >/dev/null

vg=(valgrind --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=definite,indirect
    --error-exitcode=1 --num-callers=30)
# Bytes of one leak kind from valgrind's LEAK SUMMARY ("definitely lost: 0 bytes in 0 blocks").
# None at all ("All heap blocks were freed") prints 0.
lost() { local v; v=$(sed -n "s/.*$1: \([0-9,]*\) bytes.*/\1/p" "$2" | tr -d , | tail -1); echo "${v:-0}"; }
status=0
printf '| run | command | wall | errors | definitely lost | indirectly lost | possibly lost | still reachable |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for r in $runs; do
  case $r in
    ir) cache="$work/cache"; args=(--emit ir -o "$work/model.ir") ;;
    lib) cache="$work/cache"; args=(-o "$work/model.so") ;;
    cold) cache=""; args=(--emit ptx -o "$work/model.ptx") ;;
  esac
  log="$logs/memcheck-$r.log"
  t0=$(date +%s)
  rc=0
  AMPC_CACHE_DIR=$cache "${vg[@]}" --log-file="$log" "$ampc" "$work/model.onnx" "${args[@]}" >/dev/null 2>&1 || rc=$?
  t=$(( $(date +%s) - t0 ))
  errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9,]*\) errors.*/\1/p' "$log" | tr -d , | tail -1)
  printf '| %s | `ampc model.onnx %s` | %d s | %s | %s | %s | %s | %s |\n' "$r" "${args[*]/#$work\//}" "$t" \
    "${errs:-?}" "$(lost 'definitely lost' "$log")" "$(lost 'indirectly lost' "$log")" \
    "$(lost 'possibly lost' "$log")" "$(lost 'still reachable' "$log")"
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "memcheck: $r failed (exit $rc); the first report:" >&2
    grep -m1 -A25 -E '^==[0-9]+== (Invalid|Conditional|Use of|Syscall|Mismatched|[0-9,]+ bytes in)' "$log" >&2 || tail -30 "$log" >&2
  fi
done
exit $status
