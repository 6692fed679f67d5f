#!/usr/bin/env bash
# gen-onnx-tests.sh — writes the node tests of the onnx 1.23 package (opsets up to 28) to
# .onnx-tests/node-onnx1.23, using a project-local virtual environment (.venv) with the
# packages of tests/conformance/requirements.txt. Does nothing when they are already there.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$root/.onnx-tests"
stamp="$out/.stamp"
req="$root/tests/conformance/requirements.txt"
if [ -f "$stamp" ] && cmp -s "$stamp" "$req"; then exit 0; fi
if [ ! -x "$root/.venv/bin/python" ]; then
  python3 -m venv "$root/.venv"
fi
"$root/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
mkdir -p "$out"
"$root/.venv/bin/python" "$root/tests/conformance/gen_node_tests.py" "$out"
cp "$req" "$stamp"
