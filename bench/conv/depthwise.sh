#!/usr/bin/env bash
# depthwise.sh DIR — on the GPU machine (.devbin, .devlibs carried): `ampc run --profile` of each
# depthwise case bench/conv/depthwise.py wrote to DIR: the convolution's step (its provider and
# time) and the whole run's latency. A build before the depthwise kernel gives cuDNN's times.
set -uo pipefail
source .devlibs/env.sh
export AMPC_RUNTIME_DIR=$PWD/.devbin/lib/ampc AMPC_CACHE_DIR=/tmp/ampc-cache
for f in "$1"/*.ir; do
  echo "== $(basename "$f" .ir)"
  .devbin/bin/ampc run "$f" --precision fp16 --profile --iterations 30 --warmup 5 2>&1 |
    grep -E "FusedConv|latency over"
done
