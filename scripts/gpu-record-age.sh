#!/usr/bin/env bash
# gpu-record-age.sh — how far the code has moved since the GPU last checked it: the number of
# commits after the commit in tests/gpu-record.tsv's tests section (scripts/gpu-check.sh on the
# GPU machine) that touched codegen/, runtime/ or passes/. CI has no GPU, so this is a warning,
# never a failure: it tells the next person to run scripts/gpu-check.sh there. Exit 0 always.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 0
record=tests/gpu-record.tsv
line=$(grep -m1 '^## tests: ' "$record" 2>/dev/null)
commit=$(sed -nE 's/.* at commit ([0-9a-f]+).*/\1/p' <<< "$line")
if [ -z "$commit" ]; then
  echo "warning: $record has no tests section: the GPU suites have never been recorded (run scripts/gpu-check.sh on the GPU machine)"
  exit 0
fi
if ! git rev-parse -q --verify "$commit^{commit}" >/dev/null 2>&1 || ! git merge-base --is-ancestor "$commit" HEAD 2>/dev/null; then
  echo "warning: $record names commit $commit, which is not in this branch's history"
  exit 0
fi
case "$line" in *uncommitted*) note=" (that run had uncommitted changes on top)" ;; *) note="" ;; esac
n=$(git rev-list --count "$commit..HEAD" -- codegen runtime passes)
if [ "$n" -gt 0 ]; then
  echo "warning: $n commit(s) since the GPU record ($commit$note) touched codegen/, runtime/ or passes/: run scripts/gpu-check.sh on the GPU machine and commit its tests/gpu-record.tsv"
else
  echo "GPU record: $line"
fi
exit 0
