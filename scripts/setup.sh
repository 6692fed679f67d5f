#!/usr/bin/env bash
# setup.sh — installs what ampc needs that is missing, then configures and builds a preset.
#
#   scripts/setup.sh [PRESET...]     presets from CMakePresets.json (default: "default")
#
# Needs: Debian 12 (or a derivative) and the CUDA toolkit (12.0 or newer) at $CUDA_HOME,
# default /usr/local/cuda. Debian packages are installed with apt-get when missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/nvrtc.h" ] || [ ! -f "$cuda/include/cuda_runtime_api.h" ]; then
  echo "ampc setup: CUDA toolkit not found: looked for $cuda/include/nvrtc.h and cuda_runtime_api.h" >&2
  echo "  ampc needs the CUDA toolkit (12.0 or newer; NVRTC compiles without a GPU)." >&2
  echo "  If it is installed elsewhere, point at it: CUDA_HOME=/path/to/cuda $0" >&2
  exit 1
fi

packages="cmake gcc g++ make pkg-config python3 python3-venv libprotobuf-c-dev protobuf-c-compiler libcriterion-dev libonnx-dev libonnx-testdata clang libclang-rt-14-dev valgrind libopenmpi-dev"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "ampc setup: installing Debian packages:$missing"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "ampc setup: need root (or sudo) to run: apt-get install$missing" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

presets=${*:-default}
for preset in $presets; do
  cmake --preset "$preset" -DCUDA_HOME="$cuda" >/dev/null
  cmake --build --preset "$preset" -j "$(nproc)"
done
