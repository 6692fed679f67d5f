#!/usr/bin/env bash
# fuzz.sh — builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan, build-fuzz/)
# and runs each for a fixed time, one after another on one core, printing per target the inputs
# executed, the coverage reached (libFuzzer's cov = edges, ft = features) and the crashes.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   default 30; CI (scripts/test.sh) runs 20
#   scripts/fuzz.sh --seeds                rewrites the committed seed corpus (tests/fuzz/corpus)
#
# Environment: AMPC_FUZZ_TARGETS="onnx ir_text" runs a subset (default: every tests/fuzz/fuzz_*.c);
# AMPC_FUZZ_JOBS=N runs N workers per target (default 1); AMPC_FUZZ_KEEP_GOING=1 runs libFuzzer's
# fork mode, which goes on after a finding (each one saved), so a long run counts them all;
# AMPC_FUZZ_SEED=N fixes libFuzzer's random seed (default: a new one each run). CI fixes it, so
# that a CI run explores the same inputs as the same command run here: a finding in CI then
# reproduces with `AMPC_FUZZ_SEED=1 scripts/fuzz.sh 20`; long runs keep random seeds.
#
# Each target starts from its committed seeds (tests/fuzz/corpus/<target>/, read only) and the
# inputs of past findings (tests/fuzz/regressions/<target>/, each named after its bug), plus,
# when Debian's libonnx-testdata is installed, the models (onnx, compile) and input tensors
# (tensor_io) of the ONNX backend node tests; what it finds that adds coverage is kept in
# build-fuzz/corpus/<target>/ for the next run. Limits per input: 2 GiB of RSS, 1 GiB in one
# malloc, 10 s: an input that goes past one is a finding like a crash. A finding is saved as
# build-fuzz/artifacts/<target>/<kind>-<sha1>; the script prints its path and exits 1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build="$root/build-fuzz"

if [ "${1:-}" = "--seeds" ]; then
  py="$root/.venv/bin/python"
  [ -x "$py" ] || "$root/scripts/gen-onnx-tests.sh"
  [ -x "$root/build/bin/ampc" ] || { echo "fuzz.sh --seeds: needs build/bin/ampc (scripts/setup.sh)" >&2; exit 1; }
  rm -rf "$root/tests/fuzz/corpus"
  "$py" "$root/tests/fuzz/make_corpus.py" "$root/tests/fuzz/corpus" "$root/build/bin/ampc"
  echo "fuzz.sh: seeds written to tests/fuzz/corpus ($(find tests/fuzz/corpus -type f | wc -l) files)"
  exit 0
fi

secs=${1:-30}
jobs=${AMPC_FUZZ_JOBS:-1}
seed=${AMPC_FUZZ_SEED:-}
start=$(date +%s)
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" >/dev/null
echo "fuzz.sh: fuzz build took $(( $(date +%s) - start )) s"

# The ONNX backend node tests as extra seeds, copied once (flat, so a seed directory holds only
# what the target reads).
node_tests=/usr/include/onnx/backend/test/data/node
extra="$build/seeds"
if [ -d "$node_tests" ] && [ ! -f "$extra/.done" ]; then
  mkdir -p "$extra/models" "$extra/tensors"
  for d in "$node_tests"/*/; do
    t=$(basename "$d")
    [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$extra/models/$t.onnx"
    [ -f "$d/test_data_set_0/input_0.pb" ] && cp "$d/test_data_set_0/input_0.pb" "$extra/tensors/$t.pb"
  done
  touch "$extra/.done"
fi

targets=${AMPC_FUZZ_TARGETS:-$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c | sed 's/^fuzz_//'; done)}
# -jobs=1 would still fork a worker; one job runs in process.
parallel=()
if [ "${AMPC_FUZZ_KEEP_GOING:-0}" = 1 ]; then
  parallel=(-fork="$jobs" -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
elif [ "$jobs" -gt 1 ]; then
  parallel=(-jobs="$jobs" -workers="$jobs")
fi
status=0
printf '%-10s %6s %10s %8s %7s %7s %7s  %s\n' target seconds execs exec/s cov ft corpus findings
for t in $targets; do
  work="$build/corpus/$t" art="$build/artifacts/$t" log="$build/logs/$t.log"
  mkdir -p "$work" "$art" "$(dirname "$log")"
  seeds=("$root/tests/fuzz/corpus/$t")
  [ -d "$root/tests/fuzz/regressions/$t" ] && seeds+=("$root/tests/fuzz/regressions/$t")
  case $t in
    onnx|compile) [ -d "$extra/models" ] && seeds+=("$extra/models") ;;
    tensor_io) [ -d "$extra/tensors" ] && seeds+=("$extra/tensors") ;;
  esac
  mark="$build/logs/$t.start"
  touch "$mark"
  t0=$(date +%s)
  rc=0
  # detect_leaks: LeakSanitizer checks every input; a leak is a finding.
  ASAN_OPTIONS=detect_leaks=1 \
    "$build/bin/fuzz_$t" -max_total_time="$secs" ${seed:+-seed=$seed} -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -timeout=10 -max_len=16384 -print_final_stats=1 "${parallel[@]}" \
    -artifact_prefix="$art/" "$work" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  if [ "$jobs" -gt 1 ]; then cat fuzz-*.log >>"$log" 2>/dev/null; rm -f fuzz-*.log; fi
  took=$(( $(date +%s) - t0 ))
  execs=$( (grep -o 'stat::number_of_executed_units: [0-9]*' "$log" || true) | awk '{s += $2} END {print s + 0}')
  # The last status line: "#N NEW cov: ..." in process, "#N: cov: ..." in fork mode (which
  # prints no final stats: its executions are the N of that line).
  last=$( (grep -E '^#[0-9]+:?[[:space:]].*cov: ' "$log" || true) | tail -1)
  [ "$execs" -gt 0 ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
  execs=${execs:-0}
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  found=$(find "$art" -type f -newer "$mark" | wc -l)
  printf '%-10s %6s %10s %8s %7s %7s %7s  %s\n' "$t" "$took" "$execs" "$(( execs / (took > 0 ? took : 1) ))" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$found"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    echo "fuzz.sh: fuzz_$t failed (exit $rc); log: $log" >&2
    grep -E -A12 '^==[0-9]+==ERROR|fuzz check failed|runtime error' "$log" | head -40 >&2 || true
    grep -E '^SUMMARY|Test unit written to|^Base64' "$log" | head -6 >&2 || true
    find "$art" -type f -newer "$mark" | sed 's/^/  input: /' >&2
  fi
done
echo "fuzz.sh: $(( $(date +%s) - start )) s in all"
exit $status
