#!/usr/bin/env bash
# gpu-prepare.sh — readies what bench/gpu-suite.sh needs on the GPU machine (see
# ../shared/gpu/README.md): a Release build in build-gpu/, the binaries the suite runs copied to
# .devbin/ (an installation, small enough to send; with ampc-mpi-run when MPI was found), the libraries that machine lacks in .devlibs/, and the ONNX
# test data in .devdata/. All four folders are git-ignored.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-gpu -j "$(nproc)"
rm -rf .devbin && mkdir -p .devbin/tests
# An installation (bin/ampc, lib/, include/, lib/ampc/: what `ampc -o model.so` links), plus the
# tools and test suites the GPU run uses.
cmake --install build-gpu --prefix .devbin >/dev/null
cp build-gpu/bin/* .devbin/bin/
cp build-gpu/tests/runtime_test_* build-gpu/tests/codegen_test_* build-gpu/tests/compiler_test_artifact \
   build-gpu/tests/passes_test_* .devbin/tests/
# ampc-mpi-run (examples/mpi, built when MPI is found) takes Open MPI from the GPU machine, whose
# mpirun must match its libraries: its MPI libraries are not packed.
../shared/gpu/pack-libs $(ls .devbin/bin/* | grep -v '/ampc-mpi-run$') .devbin/tests/* .devbin/lib/*.so
mkdir -p .devdata
[ -f .devdata/onnx-testdata.tgz ] || tar czf .devdata/onnx-testdata.tgz -C /usr/share/libonnx-testdata data
du -sh .devbin .devlibs .devdata
