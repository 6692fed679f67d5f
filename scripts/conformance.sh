#!/usr/bin/env bash
# conformance.sh — runs the ONNX backend suites on the reference evaluator and regenerates
# docs/conformance.md and tests/conformance/expected.tsv from the results. The GPU columns are
# read from tests/conformance/gpu.tsv (TF32 off, the suite's tolerances), gpu-tf32.tsv (the
# default build, TF32 on, f32 outputs at rtol 1e-2, atol 1e-4) and gpu-random.tsv, which
# scripts/gpu-check.sh writes on the GPU machine; a column whose file is missing reads "not run".
# The command-line column runs here too (every case through `ampc run --reference`) and writes
# tests/conformance/cli.tsv, which tests/conformance/test_cli.c checks.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" default >/dev/null
"$root/scripts/gen-onnx-tests.sh"
"$root/build/bin/ampc-conformance" --markdown "$root/docs/conformance.md" \
  --expect "$root/tests/conformance/expected.tsv" \
  --gpu-results "$root/tests/conformance/gpu.tsv" \
  --tf32-results "$root/tests/conformance/gpu-tf32.tsv" \
  --random-results "$root/tests/conformance/gpu-random.tsv" \
  --cli --cli-out "$root/tests/conformance/cli.tsv" "$@"
