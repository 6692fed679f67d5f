#!/usr/bin/env bash
# conv-engines.sh — on the GPU machine: how ResNet-50's convolutions run through cuDNN. The
# fp32-exported ResNet-50 (bench/export_models.py) is compiled with --precision fp16, once with
# --layout nchw and once with --layout nhwc (the default); each library runs (`ampc run
# --iterations 200`) with cuDNN's legacy calls only (AMPC_CUDNN_GRAPH=0) and with the default,
# the faster of the legacy calls and the graph API per convolution, timed at creation. Prints one latency line per variant; the
# per-convolution timings and choices (AMPC_CUDNN_VERBOSE=1) go to $OUT/conv-engines.LAYOUT.MODE.log.
# Needs the install tree in .devbin and .devlibs (bench/gpu-prepare.sh).
set -uo pipefail
source bench/gpu-env.sh
[ -f $work/resnet50.onnx ] || $py bench/export_models.py $work > "$out/export.log" 2>&1
for layout in nchw nhwc; do
  so=$work/resnet50_$layout.so
  if ! .devbin/bin/ampc $work/resnet50.onnx -o $so --precision fp16 --layout $layout \
       > "$out/conv-engines.$layout.compile.log" 2>&1; then
    echo "resnet50 fp16 $layout: ampc -o failed (conv-engines.$layout.compile.log)"; continue
  fi
  for mode in legacy choice; do
    log="$out/conv-engines.$layout.$mode.log"
    AMPC_CUDNN_GRAPH=$([ $mode = legacy ] && echo 0 || echo auto) AMPC_CUDNN_VERBOSE=1 \
      .devbin/bin/ampc run $so --iterations 200 --warmup 20 > "$log" 2>&1
    took=$(grep -c 'graph$' "$log")
    echo "resnet50 fp16 b1 $layout, $mode: $(grep latency "$log" | head -1) ($took convolutions on the graph API)"
  done
done
