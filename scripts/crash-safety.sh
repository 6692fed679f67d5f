#!/usr/bin/env bash
# crash-safety.sh — checks that no data is lost when compiles share a kernel cache or die
# mid-way: the NVRTC image cache (compiler/cache.c) and the library writer (`-o model.so`,
# compiler/artifact.c) both write temporaries and rename them into place.
#
#   scripts/crash-safety.sh [KILLS]      default 6 kills; needs build/bin/ampc (scripts/setup.sh)
#
# Model: ResNet-50 from bench/compile-time/make_resnet50.py (the project's .venv; about 50
# kernels, 2 to 3 s of NVRTC on 2 cores with an empty cache), or AMPC_MODEL=FILE. Steps:
#   1. reference   the PTX of every kernel with the cache off (--emit ptx)
#   2. concurrent  two compiles at once (-o a.so, -o b.so) into one empty cache; both must
#                  succeed and every entry must be whole
#   3. warm        a compile on that cache must hit every entry (no entry file replaced) and give
#                  the reference PTX
#   4. killed      KILLS compiles into a second empty cache, each killed with SIGKILL after a
#                  delay spread over the time step 2 took, over an existing library: after each kill every cache entry must
#                  be whole (header, length, SHA-256) and the library either the old one, byte
#                  for byte, or a complete new one; then a compile on the cache the kills left
#                  must give the reference PTX
#   5. sweep       the next compile to k.so must remove the temporaries (k.so.tmp.PID,
#                  k.h.tmp.PID) the kills left, and two planted for a pid that has exited, and
#                  keep one whose process still runs
# Prints one line per check and a summary; exits 1 on the first broken promise.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ampc=${AMPC:-$root/build/bin/ampc}
kills=${1:-6}
work=$(mktemp -d "${TMPDIR:-/tmp}/ampc-crash-safety-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "crash-safety: FAIL: $*" >&2; exit 1; }

model=${AMPC_MODEL:-}
if [ -z "$model" ]; then
  model="$work/resnet50.onnx"
  "${PYTHON:-$root/.venv/bin/python3}" "$root/bench/compile-time/make_resnet50.py" "$model"
fi

# Every entry <key>.<target>.<ptx|cubin> must be whole: the "AMPCIMG1" magic, a payload length
# equal to the file's size less the 48-byte header, and the SHA-256 of the payload. Prints
# "<entries> <temporaries>"; fails on a torn entry.
check_cache() {
  local dir=$1 n=0 tmps=0 f size len want got
  if [ ! -d "$dir" ]; then echo "0 0"; return; fi # killed before it made the folder
  for f in "$dir"/*; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    size=$(stat -c %s "$f")
    [ "$size" -ge 48 ] || fail "cache entry $f is $size bytes, shorter than its header"
    [ "$(head -c 8 "$f")" = AMPCIMG1 ] || fail "cache entry $f lacks the AMPCIMG1 magic"
    len=$(od -An -t u8 -j 8 -N 8 "$f" | tr -d ' ')
    [ "$len" -eq $((size - 48)) ] || fail "cache entry $f: header says $len bytes, file holds $((size - 48))"
    want=$(od -An -t x1 -j 16 -N 32 "$f" | tr -d ' \n')
    got=$(tail -c +49 "$f" | sha256sum | cut -d' ' -f1)
    [ "$want" = "$got" ] || fail "cache entry $f: SHA-256 of the payload differs from its header"
  done
  tmps=$(find "$dir" -maxdepth 1 -name '.*' -type f | wc -l)
  echo "$n $tmps"
}

# 1. reference, cache off
AMPC_CACHE_DIR= "$ampc" "$model" --emit ptx -o "$work/ref.ptx" >/dev/null
echo "reference:  $(grep -c '^.visible .entry' "$work/ref.ptx") generated kernels compiled with the cache off (the rest are cuDNN and cuBLASLt steps)"

# 2. two compiles at once into one empty cache; their time spreads the kills of step 4 over a
# whole `-o` compile, NVRTC and the library writer included
c1="$work/cache-shared"
t0=$(date +%s%N)
AMPC_CACHE_DIR=$c1 "$ampc" "$model" -o "$work/a.so" >"$work/a.log" 2>&1 & pa=$!
AMPC_CACHE_DIR=$c1 "$ampc" "$model" -o "$work/b.so" >"$work/b.log" 2>&1 & pb=$!
wait $pa || fail "the first of two concurrent compiles failed: $(cat "$work/a.log")"
wait $pb || fail "the second of two concurrent compiles failed: $(cat "$work/b.log")"
cold=$(awk -v ns=$(( $(date +%s%N) - t0 )) 'BEGIN { printf "%.2f", ns / 1e9 }')
read -r n tmps < <(check_cache "$c1")
[ "$tmps" -eq 0 ] || fail "two concurrent compiles left $tmps temporaries in the cache"
echo "concurrent: 2 compiles sharing one empty cache: both succeeded, $n entries all whole, no temporaries"

# 3. warm: every entry hit (none replaced: same inodes), same PTX as the reference
before=$(ls -i "$c1" | sort)
AMPC_CACHE_DIR=$c1 "$ampc" "$model" --emit ptx -o "$work/warm.ptx" >/dev/null
[ "$(ls -i "$c1" | sort)" = "$before" ] || fail "a warm compile replaced cache entries (misses after a concurrent fill)"
cmp -s "$work/ref.ptx" "$work/warm.ptx" || fail "PTX from the warm cache differs from the reference"
echo "warm:       every kernel from the cache (no entry replaced), PTX identical to the reference"

# 4. compiles killed mid-way over an existing library
c2="$work/cache-killed"
cp "$work/a.so" "$work/k.so"
cp "$work/a.so" "$work/old.so"
killed=0 finished=0
for i in $(seq 1 "$kills"); do
  delay=$(awk -v i="$i" -v k="$kills" -v t="$cold" 'BEGIN { printf "%.2f", 0.05 + t * (i - 1) / (k > 1 ? k - 1 : 1) }')
  AMPC_CACHE_DIR=$c2 "$ampc" "$model" -o "$work/k.so" >/dev/null 2>&1 & p=$!
  sleep "$delay"
  if kill -KILL $p 2>/dev/null; then killed=$((killed + 1)); else finished=$((finished + 1)); fi
  wait $p 2>/dev/null || true
  read -r n tmps < <(check_cache "$c2")
  if cmp -s "$work/k.so" "$work/old.so"; then lib="the old library, intact"
  else
    nm -D --defined-only "$work/k.so" 2>/dev/null | grep -q ' k_create$' ||
      fail "after a kill at ${delay}s, k.so is neither the old library nor a complete new one"
    lib="a complete new library (k_create exported)"
    cp "$work/k.so" "$work/old.so"
  fi
  echo "killed:     after ${delay}s: $n cache entries all whole, $tmps stray temporaries; k.so is $lib"
done
strays=$(find "$work" -maxdepth 1 \( -name 'k.so.tmp.*' -o -name 'k.h.tmp.*' \) | wc -l)
AMPC_CACHE_DIR=$c2 "$ampc" "$model" --emit ptx -o "$work/after.ptx" >/dev/null
cmp -s "$work/ref.ptx" "$work/after.ptx" || fail "PTX from the cache the kills left differs from the reference"
echo "after kills: a compile on the cache the kills left gives the reference PTX"

# 5. sweep: the next `-o k.so` removes the temporaries of the killed compiles (their processes
# are gone) and keeps one whose process still runs (a live `sleep` standing in for a compile)
# The kills may leave none (a kill must land inside the library writer's last second), so the
# temporaries of one more killed compile are planted: a pid that has exited.
dead=$(sh -c 'echo $$')
echo partial > "$work/k.so.tmp.$dead"
echo partial > "$work/k.h.tmp.$dead"
strays=$((strays + 2))
sleep 600 & live=$!
echo partial > "$work/k.so.tmp.$live"
AMPC_CACHE_DIR=$c2 "$ampc" "$model" -o "$work/k.so" >/dev/null 2>&1 || { kill $live; fail "a compile after the kills failed"; }
left=$(find "$work" -maxdepth 1 \( -name 'k.so.tmp.*' -o -name 'k.h.tmp.*' \) ! -name "k.so.tmp.$live" | wc -l)
[ -f "$work/k.so.tmp.$live" ] || { kill $live; fail "the temporary of a live process (k.so.tmp.$live) was removed"; }
kill $live; wait $live 2>/dev/null || true
[ "$left" -eq 0 ] || fail "$left temporaries of killed compiles are still there after the next compile"
echo "sweep:      the next compile removed all $strays temporaries of dead compiles (2 planted), kept the live process's one"
echo "crash-safety: OK: $killed of $kills compiles killed mid-way ($finished had finished), no torn cache entry, no torn library; $((strays - 2)) stray library temporaries (k.so.tmp.PID) left by the kills; the next compile removed every temporary of a dead compile"
