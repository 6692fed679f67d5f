#!/usr/bin/env bash
# gpu-check.sh — ampc's GPU correctness on record: run on the GPU machine, from the repository root
# there, with .devbin, .devlibs and .devdata carried (bench/gpu-prepare.sh makes them here).
#
#   bash scripts/gpu-check.sh [PART...]       parts: tests conformance (default: both, the record)
#                                                    artifact bench (the libraries and the speed)
#
#   tests        every Criterion suite that touches the GPU (runtime, codegen, compiler, passes,
#                cli), with AMPC_REQUIRE_GPU=1: a GPU test that cannot reach the GPU fails, and the
#                only skips allowed are "needs N CUDA devices" (more than present), "needs
#                cuSPARSELt" and "runs only without ..." (a no-GPU path; CI runs those), each
#                printed with its reason. A failure listed in tests/gpu-known-faults.tsv counts as
#                a known fault, not a failure; a listed test that passes is reported.
#                AMPC_GPU_SUITES=REGEX runs only the suites whose names match (a change's own
#                suites when device time is short); the record's tests section then names it.
#   conformance  every ONNX backend test case compiled and run on the GPU (ampc-conformance --gpu
#                --tf32 --random): gpu.tsv (TF32 off, the suite's tolerances), gpu-tf32.tsv (the
#                default build, TF32 on, f32 outputs at rtol 1e-2, atol 1e-4) and gpu-random.tsv,
#                copied to tests/conformance/ to fill the GPU columns of docs/conformance.md
#                (scripts/conformance.sh). A case that passes in the committed gpu.tsv or
#                gpu-tf32.tsv and fails now is a regression.
#   artifact     ResNet-50 and BERT-base through `ampc -o` and a C program (bench/artifact-check.sh)
#   bench        ampc against PyTorch on the model zoo (bench/pytorch/compare.py; docs/benchmarks.md);
#                AMPC_BENCH_MODELS=key,key:batch,... runs a subset (one command is too short for
#                the whole zoo), bench/pytorch/merge.py joins the subsets' results
#
# Results go to $OUT (the device tool's output folder; ./gpu-out elsewhere): summary.txt,
# gpu-record.tsv, tests.log and the part's files. gpu-record.tsv is tests/gpu-record.tsv with the
# sections of the parts just run replaced, each stamped with the commit .devbin was built from,
# the GPU, the driver and the date: copy it over tests/gpu-record.tsv and commit it (scripts/test.sh
# warns when codegen/, runtime/ or passes/ changed after the tests section's commit). Each part fits the GPU machine's
# 10-minute command limit on one H100 or H200; run the parts in separate commands if together
# they would not. Exit status: 0 when every part passed, 1 otherwise.
set -uo pipefail
root=$(pwd)
out=${OUT:-gpu-out}
shards=${AMPC_SHARDS:-$(nproc)}
parts=${*:-tests conformance}
mkdir -p "$out"
[ -f .devlibs/env.sh ] || { echo "gpu-check: .devlibs/env.sh missing: run bench/gpu-prepare.sh here first and carry .devlibs" >&2; exit 2; }
[ -f .devbin/build-info ] || { echo "gpu-check: .devbin/build-info missing: run bench/gpu-prepare.sh and carry .devbin" >&2; exit 2; }
source .devlibs/env.sh
source .devbin/build-info # AMPC_BUILD_SOURCE_DIR, AMPC_BUILD_BINARY_DIR, AMPC_BUILD_COMMIT
[ -d .devbin/tests ] || tar xJf .devbin/tests.tar.xz -C .devbin

# The test suites name their sources and build tree by the paths they were built at: make those
# paths lead here (the source tree) and to .devbin (the build's binaries).
if [ ! -e "$AMPC_BUILD_SOURCE_DIR" ]; then
  mkdir -p "$(dirname "$AMPC_BUILD_SOURCE_DIR")" && ln -s "$root" "$AMPC_BUILD_SOURCE_DIR"
fi
[ -e "$AMPC_BUILD_BINARY_DIR" ] || ln -s "$root/.devbin" "$AMPC_BUILD_BINARY_DIR"
export AMPC_RUNTIME_DIR="$root/.devbin/lib/ampc" AMPC_CACHE_DIR=/tmp/ampc-cache
mkdir -p /tmp/otd && tar xzf .devdata/onnx-testdata.tgz -C /tmp/otd
export AMPC_ONNX_TESTDATA=/tmp/otd/data

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
stamp="scripts/gpu-check.sh at commit ${AMPC_BUILD_COMMIT}; ${ngpu}x ${gpu:-no GPU} (driver ${driver:-none}); $(date -u +%Y-%m-%dT%H:%MZ)"
record=/tmp/gpu-record.new
: > "$record"
summary="$out/summary.txt"
echo "# $stamp" > "$summary"
status=0
[ -n "$gpu" ] || { echo "gpu-check: nvidia-smi finds no GPU" | tee -a "$summary"; status=1; }

# Classifies one suite's verbose Criterion log into a record row; prints the notes.
suite_row() {
  local name=$1 log=$2 rc=$3
  local tested passed failed crashed skipped bad known unknown_fail fixed notes result
  read -r tested passed failed crashed < <(grep -a 'Synthesis' "$log" | tail -1 |
    sed -E 's/.*Tested: ([0-9]+) \| Passing: ([0-9]+) \| Failing: ([0-9]+) \| Crashing: ([0-9]+).*/\1 \2 \3 \4/')
  [ -n "${tested:-}" ] || { tested=0 passed=0 failed=0 crashed=0; rc=${rc:-1}; }
  skipped=$(grep -ac '^\[SKIP\]' "$log")
  # Skips of the allowed classes; any other is a failure of the check.
  bad=$(grep -a '^\[SKIP\]' "$log" | grep -avE '^\[SKIP\] [^ ]+: (needs [0-9]+ CUDA devices|needs at most [0-9]+ CUDA devices|needs cuSPARSELt|runs only without )')
  # Failed or crashed tests, split into known faults and the rest.
  local faults
  faults=$(grep -v '^#' tests/gpu-known-faults.tsv 2>/dev/null | cut -f1)
  known=""; unknown_fail=""
  while read -r t; do
    [ -n "$t" ] || continue
    if grep -qxF "$t" <<< "$faults"; then known="$known $t"; else unknown_fail="$unknown_fail $t"; fi
  done < <(grep -a '^\[FAIL\]' "$log" | sed -E 's/^\[FAIL\] ([^:]+::[^:]+):.*/\1/' | sort -u)
  fixed=""
  while read -r t; do
    [ -n "$t" ] && grep -aqF "[PASS] $t:" "$log" && fixed="$fixed $t"
  done <<< "$faults"
  notes=""
  [ -n "$bad" ] && notes="$notes skips not allowed on the GPU machine: $(echo "$bad" | sed 's/^\[SKIP\] //' | head -3 | tr '\n' ';')"
  [ -n "$unknown_fail" ] && notes="$notes failed:$unknown_fail;"
  [ -n "$known" ] && notes="$notes known faults (tests/gpu-known-faults.tsv):$known;"
  [ -n "$fixed" ] && notes="$notes known faults that now pass (remove from the list):$fixed;"
  local allowed=$(grep -a '^\[SKIP\]' "$log" | grep -aoE ': (needs [0-9]+ CUDA devices|needs at most [0-9]+ CUDA devices|needs cuSPARSELt|runs only without [^:]+)' | sort | uniq -c | sed -E 's/^ *([0-9]+) : (.*)/\2 (\1)/' | tr '\n' ';')
  [ -n "$allowed" ] && notes="$notes skipped: $allowed"
  result=ok
  if [ -n "$bad" ] || [ -n "$unknown_fail" ] || { [ "$rc" != 0 ] && [ -z "$known" ]; } || [ "$tested" = 0 -a "$skipped" = 0 ]; then
    result=FAIL
  fi
  printf 'tests\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$tested" "$passed" "$((failed + crashed))" \
    "$skipped" "$result" "${notes# }" >> "$record"
  printf '%-36s %4s tested, %4s passed, %3s failed, %3s skipped: %s %s\n' "$name" "$tested" "$passed" \
    "$((failed + crashed))" "$skipped" "$result" "${notes# }" >> "$summary"
  [ "$result" = ok ]
}

part_tests() {
  local start=$(date +%s) t name log
  : > "$out/tests.log"
  for t in .devbin/tests/*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    [ -z "${AMPC_GPU_SUITES:-}" ] || [[ $name =~ $AMPC_GPU_SUITES ]] || continue
    log=/tmp/gpu-check.$name.log
    AMPC_REQUIRE_GPU=1 timeout 540 "$t" --verbose --jobs="$shards" > "$log" 2>&1
    local rc=$?
    { echo "== $name (exit $rc)"; cat "$log"; } >> "$out/tests.log"
    suite_row "$name" "$log" "$rc" || status=1
  done
  [ -z "${AMPC_GPU_SUITES:-}" ] || echo "# only the suites matching AMPC_GPU_SUITES=$AMPC_GPU_SUITES" | tee -a "$record" >> "$summary"
  echo "tests took $(( $(date +%s) - start )) s" >> "$summary"
}

part_conformance() {
  local start=$(date +%s) k
  if python3 tests/conformance/gen_node_tests.py /tmp/gen >/dev/null 2>&1; then
    export AMPC_ONNX_GENERATED=/tmp/gen
  else
    echo "conformance: the onnx package's node tests could not be written (node-onnx1.23 left out)" >> "$summary"
  fi
  local f
  for f in gpu gpu-tf32 gpu-random; do rm -f /tmp/"$f".*.tsv; done
  rm -f /tmp/conf.*.log
  for k in $(seq 0 $((shards - 1))); do
    AMPC_REQUIRE_GPU=1 .devbin/bin/ampc-conformance --gpu --tf32 --random --shard "$k/$shards" \
      --gpu-out "/tmp/gpu.$k.tsv" --tf32-out "/tmp/gpu-tf32.$k.tsv" \
      --random-out "/tmp/gpu-random.$k.tsv" -v > "/tmp/conf.$k.log" 2>&1 &
  done
  wait
  # Each column's file (gpu, gpu-tf32, gpu-random: --gpu, --tf32, --random): the shards' rows
  # under one header naming the GPU.
  for f in gpu gpu-tf32 gpu-random; do
    { echo "# suite	test	$f	reason (generated by ampc-conformance --${f#gpu-} on $gpu)"
      cat /tmp/"$f".*.tsv | grep -v '^#' | sort; } > "$out/$f.tsv"
  done
  cat /tmp/conf.*.log > "$out/conformance.log"
  for f in gpu gpu-tf32 gpu-random; do
    awk -F'\t' -v f=$f '!/^#/ {n[$1]++; c[$1" "$3]++}
      END {for (s in n) printf "conformance\t%s (%s)\t%d\t%d\t%d\t%d\tok\n", s, f, n[s], c[s" pass"], c[s" fail"], c[s" unsupported"]}' \
      "$out/$f.tsv" | sort >> "$record"
  done
  # A case that fails on the GPU where the committed table says it passed is a regression.
  local regressed
  for f in gpu gpu-tf32; do
    if [ ! -f "tests/conformance/$f.tsv" ]; then
      echo "conformance: no committed tests/conformance/$f.tsv, so no regression check of its column (commit this run's $f.tsv)" >> "$summary"
      continue
    fi
    regressed=$(awk -F'\t' 'FNR == NR {if (!/^#/) was[$1" "$2] = $3; next}
                            !/^#/ && $3 == "fail" && was[$1" "$2] == "pass" {print $1 "/" $2}' \
                "tests/conformance/$f.tsv" "$out/$f.tsv")
    if [ -n "$regressed" ]; then
      echo "conformance: passed in tests/conformance/$f.tsv, fail now: $(echo $regressed)" >> "$summary"
      sed -i "s/^\(conformance\t[^\t]* ($f)\t.*\t\)ok\$/\1FAIL/" "$record"
      status=1
    fi
  done
  # Not a failure of the check: the cases the default build (TF32) fails that pass with TF32 off.
  local tf32_only
  tf32_only=$(awk -F'\t' 'FNR == NR {if (!/^#/) off[$1" "$2] = $3; next}
                          !/^#/ && $3 == "fail" && off[$1" "$2] == "pass" {print $1 "/" $2}' \
              "$out/gpu.tsv" "$out/gpu-tf32.tsv")
  [ -z "$tf32_only" ] || echo "conformance: pass with TF32 off, fail in the default build (TF32 on, rtol 1e-2, atol 1e-4): $(echo $tf32_only)" >> "$summary"
  for f in gpu gpu-tf32 gpu-random; do
    [ "$(grep -vc '^#' "$out/$f.tsv")" -gt 0 ] || { echo "conformance: no case ran ($f.tsv is empty)" >> "$summary"; status=1; }
  done
  grep -a '^conformance' "$record" >> "$summary"
  echo "conformance took $(( $(date +%s) - start )) s" >> "$summary"
}

part_artifact() {
  bash bench/artifact-check.sh >> "$summary" 2>&1 || status=1
}

# The zoo, or the models AMPC_BENCH_MODELS names (compare.py; e.g. "gpt2,swin_t:32"), into
# $out/bench (everything) or $out/bench-<selection> ("bench-gpt2.swin_t-b32"), so that the
# results of several commands join with bench/pytorch/merge.py. No model and batch starts after
# AMPC_BENCH_BUDGET_S seconds (default 420: the last one finishes within the command's limit);
# those left are named in the summary, to run in the next command.
part_bench() {
  local name=bench
  [ -z "${AMPC_BENCH_MODELS:-}" ] || name="bench-$(printf '%s' "$AMPC_BENCH_MODELS" | sed 's/,/./g; s/:/-b/g; s/[^A-Za-z0-9_.-]/_/g')"
  AMPC="$root/.devbin/bin/ampc" AMPC_BENCH_COMMIT="$AMPC_BUILD_COMMIT" \
    AMPC_BENCH_BUDGET_S="${AMPC_BENCH_BUDGET_S:-420}" \
    "${AMPC_TORCH_PYTHON:-/opt/torch/.venv/bin/python}" bench/pytorch/compare.py "$out/$name" \
    > "$out/$name.log" 2>&1 || { echo "bench/pytorch/compare.py: a row failed, was not run or the run failed (see $name.log)" >> "$summary"; status=1; }
  [ -f "$out/$name/benchmarks.md" ] && cat "$out/$name/benchmarks.md" >> "$summary"
  grep -A30 '^zoo: ' "$out/$name.log" >> "$summary"
}

for part in $parts; do
  case "$part" in
    tests|conformance|artifact|bench) ;;
    *) echo "gpu-check: unknown part '$part' (tests, conformance, artifact, bench)" >&2; exit 2 ;;
  esac
done
# The committed record with the sections of the parts run so far replaced (written after each
# part, so that a run cut short still brings back what it finished).
write_record() {
  awk -v parts=" $1 " 'BEGIN {keep = 1} /^## / {p = $2; sub(/:$/, "", p); keep = index(parts, " " p " ") == 0}
                       keep' tests/gpu-record.tsv 2>/dev/null > "$out/gpu-record.tsv"
  cat "$record" >> "$out/gpu-record.tsv"
}
done_parts=""
for part in $parts; do
  echo "## $part: $stamp" >> "$record"
  [ "$part" = tests ] && printf '# part\tsuite\ttested\tpassed\tfailed\tskipped\tresult\tnotes\n' >> "$record"
  [ "$part" = conformance ] && printf '# part\tsuite (column)\ttests\tpass\tfail\tunsupported\tresult\n' >> "$record"
  "part_$part"
  done_parts="$done_parts $part"
  write_record "$done_parts"
done
echo "gpu-check: $([ $status = 0 ] && echo OK || echo FAILED) ($parts)" >> "$summary"
cat "$summary"
exit $status
