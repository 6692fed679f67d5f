#!/usr/bin/env bash
# test_install.sh BUILD_DIR — installs ampc from BUILD_DIR into a temporary prefix, builds
# examples/app against that installation alone (find_package(ampc 0.1 REQUIRED), pkg-config),
# checks that a version no installation satisfies is refused, and runs the
# app: without a GPU it must fail with the library's "no CUDA device" error, with one it must
# print the logits.
set -euo pipefail
build=$1
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ampc-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
for f in bin/ampc lib/libampc.so lib/libampcrt.so include/ampc.h include/ampc_runtime.h \
         lib/ampc/libampc_runtime.a lib/ampc/include/runtime/plan.h lib/ampc/include/runtime/steps.def \
         lib/pkgconfig/ampc.pc lib/cmake/ampc/ampcConfig.cmake lib/cmake/ampc/ampcConfigVersion.cmake; do
  [ -e "$work/prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs ampcrt | grep -q -- "-lampcrt" \
  || { echo "pkg-config ampcrt does not give -lampcrt"; exit 1; }
# The installed ampc compiles a model on its own (no build tree: AMPC_RUNTIME_DIR unset, and
# the build tree moved out of sight would make no difference since lib/ampc/ is found first).
"$work/prefix/bin/ampc" "$src/tests/install/affine.ampc" -o "$work/affine.so"
[ -f "$work/affine.so" ] && [ -f "$work/affine.h" ] || { echo "ampc -o wrote no library"; exit 1; }
cmake -S "$src/examples/app" -B "$work/app" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/cfg.log"
# The version file: a request for a later major version than the installed one is refused.
mkdir -p "$work/v9"
printf 'cmake_minimum_required(VERSION 3.25)\nproject(v9 LANGUAGES C)\nfind_package(ampc 9.0 REQUIRED)\n' \
  > "$work/v9/CMakeLists.txt"
if cmake -S "$work/v9" -B "$work/v9/build" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/v9.log" 2>&1; then
  echo "find_package(ampc 9.0) must fail against ampc 0.x"; exit 1
fi
grep -q "ampcConfigVersion.cmake" "$work/v9.log" || grep -q "version" "$work/v9.log" \
  || { cat "$work/v9.log"; echo "find_package(ampc 9.0) failed for another reason"; exit 1; }
cmake --build "$work/app" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
set +e
"$work/app/app" > "$work/out.txt" 2>&1
rc=$?
set -e
cat "$work/out.txt"
if grep -q "no CUDA device: " "$work/out.txt"; then
  [ $rc -ne 0 ] || { echo "the app must exit non-zero on the error"; exit 1; }
  echo "ok: the installed ampc built the app; without a GPU it reports the no-device error"
else
  [ $rc -eq 0 ] && grep -q "sample 0:" "$work/out.txt" || { echo "the app failed"; exit 1; }
  echo "ok: the app ran the MLP on the GPU"
fi
