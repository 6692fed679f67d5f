#!/usr/bin/env bash
# gpu-prepare.sh — readies what scripts/gpu-check.sh (and the other GPU-machine scripts: bench/,
# scripts/gpu-sanitize.sh) need there (see ../shared/gpu/README.md):
#   .devbin/   an installation of ampc (bin/ampc, lib/, include/, lib/ampc/: what `ampc -o
#              model.so` links) plus the tools and every test suite that touches the GPU
#              (tests.tar.xz), debug info stripped, and build-info: the commit it was built from and
#              the paths the suites were built at (gpu-check.sh makes those paths lead there)
#   .devlibs/  the Debian libraries that machine lacks, and env.sh
#   .devdata/  the ONNX test data
# All three are git-ignored; carry them in the device call.
#
#   bench/gpu-prepare.sh            builds build-gpu/ (Release: what the benchmarks measure)
#   AMPC_GPU_BUILD_DIR=build bench/gpu-prepare.sh    uses the default preset's build/ as it is
#                                   (enough for gpu-check.sh; no second build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${AMPC_GPU_BUILD_DIR:-build-gpu}
if [ "$build" = build-gpu ]; then
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j "$(nproc)"
rm -rf .devbin && mkdir -p .devbin/tests
cmake --install "$build" --prefix .devbin >/dev/null
cp "$build"/bin/* .devbin/bin/
# The suites that touch the GPU: the runtime, code generation, the compiler's libraries, the
# passes' GPU comparisons and the command line's `run`.
cp "$build"/tests/runtime_test_* "$build"/tests/codegen_test_* "$build"/tests/compiler_test_* \
   "$build"/tests/passes_test_* "$build"/tests/cli_test_* .devbin/tests/
find .devbin -type f \( -perm -u+x -o -name '*.a' \) -exec strip --strip-debug {} + 2>/dev/null || true
commit=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD -- . ':!tests/gpu-record.tsv' || commit="$commit+uncommitted-changes"
cat > .devbin/build-info <<EOF
AMPC_BUILD_COMMIT=$commit
AMPC_BUILD_SOURCE_DIR=$root
AMPC_BUILD_BINARY_DIR=$root/$build
EOF
# ampc-mpi-run (examples/mpi, built when MPI is found) takes Open MPI from the GPU machine, whose
# mpirun must match its libraries: its MPI libraries are not packed.
../shared/gpu/pack-libs $(ls .devbin/bin/* | grep -v '/ampc-mpi-run$') .devbin/tests/* .devbin/lib/*.so
# The suites travel compressed (the device call carries 64 MiB in all); gpu-check.sh unpacks them.
tar cJf .devbin/tests.tar.xz -C .devbin tests && rm -rf .devbin/tests
mkdir -p .devdata
[ -f .devdata/onnx-testdata.tgz ] || tar czf .devdata/onnx-testdata.tgz -C /usr/share/libonnx-testdata data
du -sh .devbin .devlibs .devdata
