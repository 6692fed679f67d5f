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
# Each case's time limit is 30 s; an AddressSanitizer build (the asan preset) runs ampc two to
# three times slower, so it gets 60 s: a 200,000-node chain takes about 22 s there alone, and
# what grows faster than linearly still runs far past either limit.
limit=30
if ldd "$1" 2>/dev/null | grep -q libasan; then limit=60; fi
exec "$py" "$root/tests/hostile/hostile.py" --ampc "$1" --work "$2" --timeout "$limit"
