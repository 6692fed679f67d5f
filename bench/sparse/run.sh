#!/usr/bin/env bash
# run.sh — 2:4 sparse GEMMs on the GPU machine, from the repository root there (docs/sparsity.md).
#
#   bench/sparse/run.sh          the sparse test suites, then ampc's dense GEMM step against its
#                                2:4 steps (cuSPARSELt, ampc's own mma.sp kernel) at M = N = K =
#                                4096 and 8192 (f16), 4096 (bf16) and BERT-base's linear shapes at
#                                M = 4096 (N x K = 768x768, 3072x768, 768x3072; f16 and bf16);
#                                a few minutes
#   bench/sparse/run.sh bert     BERT-base seq128 b32, every linear layer pruned: dense against
#                                sparse end to end, and the b1 library against the reference
#                                evaluator (bench/sparse/bert.py; a few minutes; AMPC_BERT_CHECK=0
#                                skips the reference check, the slow part)
#
# Results in $OUT (./gpu-out elsewhere): sparse.txt (read first), sparse-tests.log; for bert:
# bert-sparse.txt, bert-sparse.log, bert-sparse-report.json. Needs .devbin (bench/gpu-prepare.sh)
# and .devlibs. cuSPARSELt comes from the PyTorch venv unless AMPC_CUSPARSELT_PATH names a file.
set -uo pipefail
source bench/gpu-env.sh
venv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
if [ -z "${AMPC_CUSPARSELT_PATH:-}" ]; then
  for f in $venv/cusparselt/lib/libcusparseLt.so.0 $venv/cu13/lib/libcusparseLt.so.0; do
    [ -f "$f" ] && export AMPC_CUSPARSELT_PATH=$f && break
  done
fi

if [ "${1:-}" = bert ]; then
  AMPC=.devbin/bin/ampc $py bench/sparse/bert.py $work/sparse-bert "$out"
  exit $?
fi

res=$out/sparse.txt
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "cuSPARSELt: ${AMPC_CUSPARSELT_PATH:-(by soname, libcusparseLt.so.0 on LD_LIBRARY_PATH)}"
} > "$res" 2>&1
status=0
[ -d .devbin/tests ] || tar xJf .devbin/tests.tar.xz -C .devbin # bench/gpu-prepare.sh packs them
.devbin/tests/runtime_test_sparse --jobs=4 --verbose > "$out/sparse-tests.log" 2>&1 || status=1
.devbin/tests/codegen_test_sparse_gemm --jobs=4 --verbose >> "$out/sparse-tests.log" 2>&1 || status=1
echo "sparse suites: $(grep -a 'Synthesis' "$out/sparse-tests.log" | tr '\n' ' ')" >> "$res"
grep -a -E '^\[(SKIP|FAIL)' "$out/sparse-tests.log" | head -20 >> "$res"
grep -a -A2 'Assertion Failed' "$out/sparse-tests.log" | head -40 >> "$res"
# The GEMM steps, dense against the two sparse ways; AMPC_SPARSE_VERBOSE shows the times
# measured at load.
bert=4096x768x768,4096x3072x768,4096x768x3072
for spec in "4096x4096x4096,8192x8192x8192 f16" "4096x4096x4096 bf16" "$bert f16" "$bert bf16"; do
  set -- $spec
  AMPC_SPARSE_VERBOSE=1 .devbin/bin/ampc-bench-sparse --shapes "$1" --dtype "$2" --iterations 200 \
    >> "$res" 2>&1 || status=1
done
cat "$res"
exit $status
