#!/usr/bin/env bash
# conformance.sh — runs the ONNX backend suites on the reference evaluator and regenerates
# docs/conformance.md and tests/conformance/expected.tsv from the results. The GPU column is
# read from tests/conformance/gpu.tsv, which scripts/gpu-check.sh writes on the GPU machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" default >/dev/null
"$root/scripts/gen-onnx-tests.sh"
"$root/build/bin/ampc-conformance" --markdown "$root/docs/conformance.md" \
  --expect "$root/tests/conformance/expected.tsv" \
  --gpu-results "$root/tests/conformance/gpu.tsv" \
  --random-results "$root/tests/conformance/gpu-random.tsv" "$@"
