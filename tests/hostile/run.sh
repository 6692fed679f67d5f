#!/usr/bin/env bash
# run.sh AMPC WORK — runs the hostile-input corpus (hostile.py) with the project's .venv, which
# scripts/gen-onnx-tests.sh makes (scripts/test.sh runs it first). Exit 77 (ctest: skipped) when
# the .venv is missing.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py="$root/.venv/bin/python"
if ! "$py" -c 'import onnx, numpy' 2>/dev/null; then
  echo "hostile corpus skipped: no $py with onnx and numpy (run scripts/gen-onnx-tests.sh)"
  exit 77
fi
exec "$py" "$root/tests/hostile/hostile.py" --ampc "$1" --work "$2"
