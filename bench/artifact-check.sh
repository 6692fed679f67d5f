#!/usr/bin/env bash
# artifact-check.sh — on the GPU machine: export ResNet-50 and BERT-base (random weights) with
# torch, compile each with `ampc MODEL.onnx -o MODEL.so` (timed), build a C program against each
# library's header, run it, and compare its outputs with onnxruntime's CPU outputs. Also
# `ampc run MODEL.so --iterations 200` for the GPU latency. Every precision mode: fp32, tf32, and
# fp16 / bf16 (the precision pass) and auto (its error search, calibrated on other inputs than
# the ones checked: $work/MODEL.calib), each against onnxruntime's f32 outputs. Results in
# $OUT/artifact.txt; each build's --report JSON in $OUT/MODEL.PRECISION.report.json.
# Needs the install tree in .devbin (bench/gpu-prepare.sh) and .devlibs.
set -uo pipefail
source bench/gpu-env.sh
report="$out/artifact.txt"
: > "$report"
$py bench/export_models.py $work > "$out/export.log" 2>&1 || { echo "export failed" >> "$report"; tail -20 "$out/export.log" >> "$report"; }
# AMPC_ARTIFACT_SPECS replaces the list: MODEL:PRECISION[:EXTRA], EXTRA being more ampc options
# with '+' for spaces (bert:bf16:--keep-fp32+Softmax).
specs=${AMPC_ARTIFACT_SPECS:-"resnet50:fp32 bert:fp32 resnet50:tf32 bert:tf32 resnet50:fp16 bert:fp16
  resnet50:bf16 bert:bf16 resnet50:auto bert:auto resnet50:auto:--auto-type+bf16
  bert:auto:--auto-type+bf16"}
for spec in $specs; do
  model=${spec%%:*} rest=${spec#*:}
  precision=${rest%%:*} extra=""
  [ "$rest" != "$precision" ] && extra=${rest#*:} && extra=${extra//+/ }
  tag=$precision${extra:+_${extra//[^a-z0-9]/}}
  [ "$precision" = auto ] && extra="$extra --calibrate $work/$model.calib"
  [ -f $work/$model.onnx ] || continue
  echo "== $model, --precision $precision $extra" >> "$report"
  rm -f $work/$model.so
  start=$(date +%s%N)
  if ! .devbin/bin/ampc $work/$model.onnx -o $work/$model.so --precision $precision $extra \
       --report "$out/$model.$tag.report.json" > "$out/$model.$tag.compile.log" 2>&1; then
    echo "$model: ampc -o failed: $(head -c 1500 "$out/$model.$tag.compile.log")" >> "$report"; continue
  fi
  echo "$model: ampc -o $model.so took $(( ($(date +%s%N) - start) / 1000000 )) ms (cold kernel cache)" >> "$report"
  rm -f $work/$model.so && start=$(date +%s%N)
  .devbin/bin/ampc $work/$model.onnx -o $work/$model.so --precision $precision $extra >> "$out/$model.$tag.compile.log" 2>&1
  echo "$model: ampc -o $model.so took $(( ($(date +%s%N) - start) / 1000000 )) ms (warm kernel cache)" >> "$report"
  cc -O2 -DMODEL=$model -include $work/$model.h -o $work/check_$model bench/artifact_check.c \
     $work/$model.so -Wl,-rpath,$work >> "$report" 2>&1
  $work/check_$model $work $model >> "$report" 2>&1 || echo "$model: the C program failed" >> "$report"
  $py - "$work" "$model" "$precision" >> "$report" 2>&1 <<'PY'
import sys, numpy as np
work, model, precision = sys.argv[1], sys.argv[2], sys.argv[3]
lines = [l.split(None, 3) for l in open("%s/%s.txt" % (work, model)) if l.startswith("output")]
for k, (_, name, dtype, shape) in enumerate(lines):
    shape = eval(shape)
    ref = np.fromfile("%s/%s.out%d.bin" % (work, model, k), dtype=dtype).reshape(shape)
    got = np.fromfile("%s/%s.gpu%d.bin" % (work, model, k), dtype=dtype).reshape(shape)
    err = np.abs(got.astype(np.float64) - ref)
    # Tolerance relative to the output's scale: fp32 accumulates rounding over tens of layers
    # in a different order than onnxruntime; TF32 rounds every operand to a 10-bit mantissa;
    # fp16 and bf16 store every tensor with 11 and 8 bits.
    scale = np.abs(ref).max()
    rel = {"fp32": 1e-4, "tf32": 5e-3}.get(precision, 1e-2)
    ok = (err <= rel * scale).all()
    print("%s output %s %s: max |gpu - onnxruntime| %.3g, max |ref| %.3g (ratio %.2g), mean %.3g: %s"
          % (model, name, list(shape), err.max(), scale, err.max() / scale, err.mean(),
             ("MATCH (|err| <= %g max|ref|)" % rel) if ok else ("MISMATCH (> %g max|ref|)" % rel)))
PY
  .devbin/bin/ampc run $work/$model.so --iterations 200 --warmup 20 2>/dev/null | grep latency | sed "s/^/$model: /" >> "$report"
  .devbin/bin/ampc run $work/$model.so --profile 2>/dev/null | head -14 > "$out/$model.$tag.profile.txt"
done
cat "$report"
