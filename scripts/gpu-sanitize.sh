#!/usr/bin/env bash
# gpu-sanitize.sh — NVIDIA compute-sanitizer over ampc's GPU code on the GPU machine: the tools
# memcheck (out-of-bounds and misaligned accesses, CUDA API errors) and racecheck (shared-memory
# hazards), each over
#   runtime   the Criterion suites that run the runtime (.devbin/tests/runtime_test_*): plans,
#             providers, hostile callers, threads
#   conform   the ONNX backend test cases of the suites in $AMPC_SANITIZE_SUITES (default: node,
#             simple, pytorch-operator, pytorch-converted: 1072 cases, every op family; the
#             generated node-onnx1.23 suite repeats node's ops at newer opsets and is left out),
#             compiled and run on the GPU by ampc-conformance --gpu, sharded over the CPUs
# Prints one line per tool and exits 1 when any tool found an error (its first reports follow),
# 2 when none did but a run was cut short by its time limit, 0 otherwise.
#
# Run it like scripts/gpu-check.sh, from the repository root on the GPU machine with .devbin,
# .devlibs and .devdata carried (bench/gpu-prepare.sh makes them on the development machine):
#
#   bash scripts/gpu-sanitize.sh
#
# Logs go to $OUT (./gpu-sanitize-out elsewhere): <tool>-runtime.log, <tool>-conform.<k>.log and
# summary.txt. Time: filling the kernel cache is cut at 100 s and each of the 4 sanitized runs at
# $AMPC_SANITIZE_LIMIT seconds (default 80), so the whole script stays under 7.5 minutes;
# COMPUTE_SANITIZER names another sanitizer binary.
set -uo pipefail
out=${OUT:-gpu-sanitize-out}
build=${AMPC_GPU_BUILD:-.devbin}
shards=${AMPC_SHARDS:-$(nproc)}
limit=${AMPC_SANITIZE_LIMIT:-80}
suites=${AMPC_SANITIZE_SUITES:-node simple pytorch-operator pytorch-converted}
cs=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
mkdir -p "$out"
[ -f .devlibs/env.sh ] && source .devlibs/env.sh
[ -d .devbin/tests ] || tar xJf .devbin/tests.tar.xz -C .devbin # bench/gpu-prepare.sh packs them
[ -x "$cs" ] || { echo "gpu-sanitize: no compute-sanitizer at $cs (set COMPUTE_SANITIZER)" >&2; exit 2; }
if [ -z "${AMPC_ONNX_TESTDATA:-}" ]; then
  mkdir -p /tmp/otd && tar xzf .devdata/onnx-testdata.tgz -C /tmp/otd
  export AMPC_ONNX_TESTDATA=/tmp/otd/data
fi
# A kernel cache shared by every run: NVRTC compiles each kernel once, the sanitized runs then
# spend their time in the kernels, not in the compiler.
export AMPC_CACHE_DIR=/tmp/ampc-cache-sanitize
suite_args=()
for s in $suites; do suite_args+=(--suite "$s"); done

# The sanitizer's options: every process (Criterion forks one per test), a distinct exit status
# for its own findings, one summary per process in the log, and no reports of CUDA API calls that
# return an error: the runtime checks every call's status itself, the hostile-input tests provoke
# such errors on purpose, and the kernel parameter check probes one index past the last
# parameter (cudaFuncGetParamInfo answers cudaErrorInvalidValue there: the only way to count
# them). What is counted is memory errors (memcheck) and shared-memory hazards (racecheck).
sanitize() { # TOOL LOG COMMAND...
  local tool=$1 log=$2
  shift 2
  timeout --signal=INT --kill-after=15 "$limit" "$cs" --tool "$tool" --target-processes all \
    --error-exitcode 86 --print-limit 20 --report-api-errors no --log-file "$log" "$@"
}

# Errors in a sanitizer log: the sum over its per-process "ERROR SUMMARY: N errors" lines, and
# for racecheck the errors of its "RACECHECK SUMMARY: ... (N errors, M warnings)" lines.
errors_in() {
  cat "$@" 2>/dev/null | awk '
    /ERROR SUMMARY: [0-9]+ error/ { for (i = 1; i <= NF; i++) if ($i == "SUMMARY:") e += $(i + 1) }
    /RACECHECK SUMMARY:/ { if (match($0, /\(([0-9]+) error/)) { s = substr($0, RSTART + 1); r += s + 0 } }
    END { print (e > r ? e : r) + 0 }'
}

# Cases that ran: Criterion's "Tested: N" per suite; ampc-conformance -v prints one line a case.
runtime_cases() { grep -ah 'Synthesis: Tested:' "$@" 2>/dev/null | awk '{ n += $4 } END { print n + 0 }'; }
conform_cases() { cat "$@" 2>/dev/null | grep -acE '^[A-Za-z0-9_.-]+/test_[^:]*: '; }

# Fill the kernel cache once without the sanitizer (at most 100 s; what is left compiles under it).
for k in $(seq 0 $((shards - 1))); do
  timeout 100 "$build/bin/ampc-conformance" "${suite_args[@]}" --gpu --shard "$k/$shards" \
    > "/tmp/warm.$k.log" 2>&1 &
done
wait

status=0
: > "$out/summary.txt"
for tool in memcheck racecheck; do
  cut=""
  # runtime suites, one after the other, each within the time left of this run's limit
  start=$(date +%s)
  : > "$out/$tool-runtime.out"
  for t in "$build"/tests/runtime_test_*; do
    [ -x "$t" ] || continue
    left=$((limit - ($(date +%s) - start)))
    [ "$left" -gt 5 ] || { cut="$cut runtime"; break; }
    limit=$left sanitize "$tool" "$out/$tool-runtime.$(basename "$t").log" "$t" --jobs=4 \
      >> "$out/$tool-runtime.out" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] && cut="$cut $(basename "$t")"
  done
  rt_err=$(errors_in "$out/$tool-runtime".*.log)
  rt_cases=$(runtime_cases "$out/$tool-runtime.out")
  # conformance, sharded
  for k in $(seq 0 $((shards - 1))); do
    ( sanitize "$tool" "$out/$tool-conform.$k.log" "$build/bin/ampc-conformance" "${suite_args[@]}" \
        --gpu --shard "$k/$shards" -v > "$out/$tool-conform.$k.out" 2>&1
      [ $? -eq 124 ] && touch "$out/$tool-conform.$k.cut" ) &
  done
  wait
  ls "$out/$tool-conform".*.cut >/dev/null 2>&1 && cut="$cut conformance($(ls "$out/$tool-conform".*.cut | wc -l) of $shards shards)"
  cf_err=$(errors_in "$out/$tool-conform".*.log)
  cf_cases=$(conform_cases "$out/$tool-conform".*.out)
  line="$tool: $((rt_err + cf_err)) errors; runtime suites: $rt_err errors in $rt_cases tests; conformance ($suites): $cf_err errors in $cf_cases cases"
  [ -n "$cut" ] && line="$line; cut by the ${limit}s limit:$cut"
  echo "$line" | tee -a "$out/summary.txt"
  if [ $((rt_err + cf_err)) -gt 0 ]; then
    status=1
    grep -ah -m3 -A12 -E '^========= (Invalid|Program hit|Race reported|Error:|.*[Hh]azard)' \
      "$out/$tool"-*.log | head -80 | tee -a "$out/summary.txt"
  elif [ -n "$cut" ] && [ "$status" -eq 0 ]; then
    status=2
  fi
done
exit $status
