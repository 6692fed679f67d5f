#!/usr/bin/env bash
# multi-gpu.sh — tensor parallelism on 2 GPUs against 1, on the 2-GPU machine, from the
# repository root there (prepared by bench/gpu-prepare.sh; .devbin and .devlibs carried along).
#
# The model is a stack of transformer MLP blocks in f16 (x + relu(x @ W1 + b1) @ W2 + b2, hidden
# 1024 -> 4096 -> 1024, $LAYERS blocks, 16 x 512 = 8192 tokens), written with the `onnx` package
# and random weights. ampc builds it for 1 GPU and with --gpus 2 --partition tensor (each block's
# pair split column- then row-parallel, one NCCL all-reduce of the block's 8192 x 1024 output);
# `ampc run` times each (median of CUDA-event times around every launch after warm-up; for 2 GPUs
# from before the first rank starts to after the last ends) on the same input and saves the
# outputs, which numpy compares; 2 GPUs run twice, step by step and with one CUDA graph per GPU
# (AMPC_MULTI_GPU_GRAPHS=1).
#
# Data parallelism: ResNet-50 (torchvision, random weights) exported by torch at batch 64, built
# with --precision fp16 for 1 GPU and with --gpus 2 --partition data (each GPU runs batch 32,
# the weights replicated); `ampc run` times both the same way and the throughput ratio (images
# a second, 2 GPUs over 1) is reported against the 1.9x target; numpy compares the outputs.
# Writes $OUT/multi-gpu.txt (and the logs next to it). About two minutes of GPU time.
# Then bert_pipeline (below: the same encoder cut into 2 stages, --partition pipeline,
# MICRO_BATCHES=8; SKIP_PIPELINE=1 skips it).
# Then bert_tensor_parallel (below; SKIP_BERT=1 skips it, BERT_LAYERS=N sizes it):
# a BERT encoder with its attention split by heads, its own section of the same file.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
source bench/gpu-env.sh
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on the shared hosts (env.sh sets it as well)
ampc=${AMPC_BIN:-.devbin/bin/ampc}
layers=${LAYERS:-4}
iters=${ITERATIONS:-100}
dir=$work/multi-gpu
rm -rf "$dir" && mkdir -p "$dir"
report=$out/multi-gpu.txt
nvidia-smi --query-gpu=index,name,memory.total --format=csv > "$report" 2>&1
nvidia-smi topo -m >> "$report" 2>&1

"$py" - "$dir" "$layers" <<'PY' >> "$report" 2>&1 || { echo "writing the model failed" >> "$report"; exit 1; }
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d, layers = sys.argv[1], int(sys.argv[2])
tokens, hidden, ffn = 16 * 512, 1024, 4096
rng = np.random.default_rng(0)
inits, nodes, x = [], [], "x"
def const(name, a):
    inits.append(numpy_helper.from_array(a.astype(np.float16), name))
    return name
for l in range(layers):
    w1 = const(f"w1_{l}", rng.standard_normal((hidden, ffn)) / np.sqrt(hidden))
    b1 = const(f"b1_{l}", rng.standard_normal(ffn) * 0.02)
    w2 = const(f"w2_{l}", rng.standard_normal((ffn, hidden)) / np.sqrt(ffn) * 0.5)
    b2 = const(f"b2_{l}", rng.standard_normal(hidden) * 0.02)
    p = f"l{l}_"
    nodes += [helper.make_node("MatMul", [x, w1], [p + "h"]),
              helper.make_node("Add", [p + "h", b1], [p + "hb"]),
              helper.make_node("Relu", [p + "hb"], [p + "a"]),
              helper.make_node("MatMul", [p + "a", w2], [p + "o"]),
              helper.make_node("Add", [p + "o", b2], [p + "ob"]),
              helper.make_node("Add", [x, p + "ob"], [p + "y"])]
    x = p + "y"
nodes.append(helper.make_node("Identity", [x], ["y"]))
g = helper.make_graph(nodes, "mlp_stack",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [tokens, hidden])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [tokens, hidden])],
                      inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/mlp.onnx")
np.save(f"{d}/x.npy", rng.standard_normal((tokens, hidden)).astype(np.float16))
print(f"model: {layers} blocks of {hidden} -> {ffn} -> {hidden}, {tokens} tokens, f16; "
      f"{2 * 2 * tokens * hidden * ffn * layers / 1e9:.0f} GFLOP a run")
PY

for g in 1 2; do
  args=""
  [ $g = 2 ] && args="--gpus 2 --partition tensor"
  # shellcheck disable=SC2086
  if ! "$ampc" "$dir/mlp.onnx" $args -o "$dir/mlp$g.so" > "$out/multi-gpu-build$g.log" 2>&1; then
    echo "building for $g GPU(s) failed: $(tail -5 "$out/multi-gpu-build$g.log")" >> "$report"
    continue
  fi
  "$ampc" inspect "$dir/mlp$g.so" > "$out/multi-gpu-inspect$g.log" 2>&1
  "$ampc" run "$dir/mlp$g.so" --input "x=$dir/x.npy" --save-outputs "$dir/out$g" \
    --warmup 20 --iterations "$iters" > "$out/multi-gpu-run$g.log" 2>&1 ||
    echo "running on $g GPU(s) failed: $(tail -5 "$out/multi-gpu-run$g.log")" >> "$report"
done
# 2 GPUs again with one CUDA graph per GPU (opt-in: AMPC_MULTI_GPU_GRAPHS=1), as 1 GPU replays one
AMPC_MULTI_GPU_GRAPHS=1 "$ampc" run "$dir/mlp2.so" --input "x=$dir/x.npy" --save-outputs "$dir/out2g" \
  --warmup 20 --iterations "$iters" > "$out/multi-gpu-run2g.log" 2>&1 ||
  echo "running on 2 GPUs with graphs failed: $(tail -5 "$out/multi-gpu-run2g.log")" >> "$report"

# ---- data parallelism: ResNet-50 b64 fp16 on 1 GPU and split by batch over 2 -----------------
"$py" - "$dir" <<'PY' >> "$report" 2>&1 || echo "exporting ResNet-50 at batch 64 failed" >> "$report"
import sys, numpy as np, torch, torchvision
d = sys.argv[1]
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
x = torch.randn(64, 3, 224, 224)
torch.onnx.export(m, (x,), f"{d}/resnet50_b64.onnx", input_names=["x"], opset_version=17,
                  dynamo=False)
np.save(f"{d}/rx.npy", x.numpy())
print("model: ResNet-50 (torchvision, random weights), batch 64, --precision fp16")
PY
for g in 1 2; do
  args="--precision fp16"
  [ $g = 2 ] && args="$args --gpus 2 --partition data"
  # shellcheck disable=SC2086
  if ! "$ampc" "$dir/resnet50_b64.onnx" $args -o "$dir/rn$g.so" > "$out/multi-gpu-data-build$g.log" 2>&1; then
    echo "building ResNet-50 b64 for $g GPU(s) failed: $(tail -5 "$out/multi-gpu-data-build$g.log")" >> "$report"
    continue
  fi
  "$ampc" inspect "$dir/rn$g.so" > "$out/multi-gpu-data-inspect$g.log" 2>&1
  "$ampc" run "$dir/rn$g.so" --input "x=$dir/rx.npy" --save-outputs "$dir/rnout$g" \
    --warmup 20 --iterations "$iters" > "$out/multi-gpu-data-run$g.log" 2>&1 ||
    echo "running ResNet-50 b64 on $g GPU(s) failed: $(tail -5 "$out/multi-gpu-data-run$g.log")" >> "$report"
done
grep -h "data parallel:" "$out/multi-gpu-data-inspect2.log" >> "$report" 2>/dev/null

python3 - "$dir" "$out" <<'PY' >> "$report" 2>&1
import re, sys, numpy as np
d, out = sys.argv[1], sys.argv[2]
med = {}
names = {"1": "1 GPU (CUDA graph)", "2": "2 GPUs (step by step)", "2g": "2 GPUs (a CUDA graph per GPU)"}
for g in ("1", "2", "2g"):
    try:
        m = re.search(r"median ([0-9.]+) ms", open(f"{out}/multi-gpu-run{g}.log").read())
        med[g] = float(m.group(1)) if m else None
    except OSError:
        med[g] = None
    print(f"{names[g]}: median {med[g]} ms")
for g in ("2", "2g"):
    if med["1"] and med[g]:
        print(f"speed-up {names[g]} over 1 GPU: {med['1'] / med[g]:.2f}x "
              f"(latency ratio {med[g] / med['1']:.3f})")
for g in ("2", "2g"):
    try:
        a = np.load(f"{d}/out1/y.npy").astype(np.float32)
        b = np.load(f"{d}/out{g}/y.npy").astype(np.float32)
        diff = np.abs(a - b)
        tol = 2e-2 * (1 + np.abs(a))
        print(f"output match ({names[g]} vs 1 GPU, y {a.shape}): "
              f"{'match' if (diff <= tol).all() else 'MISMATCH'}, max |diff| {diff.max():.4g}, "
              f"max |y| {np.abs(a).max():.4g}, elements outside 2e-2 relative: "
              f"{int((diff > tol).sum())}")
    except Exception as e:
        print(f"output comparison ({names[g]}) failed: {e}")
PY
python3 - "$dir" "$out" <<'PY' >> "$report" 2>&1
import glob, re, sys, numpy as np
d, out = sys.argv[1], sys.argv[2]
print("data parallelism, ResNet-50 b64 fp16:")
med = {}
for g in ("1", "2"):
    try:
        m = re.search(r"median ([0-9.]+) ms", open(f"{out}/multi-gpu-data-run{g}.log").read())
        med[g] = float(m.group(1)) if m else None
    except OSError:
        med[g] = None
    name = "1 GPU" if g == "1" else "2 GPUs (--partition data, 32 images each)"
    ips = f", {64 / med[g] * 1000:.0f} images/s" if med[g] else ""
    print(f"  {name}: median {med[g]} ms{ips}")
if med["1"] and med["2"]:
    r = med["1"] / med["2"]
    print(f"  throughput 2 GPUs over 1: {r:.2f}x (target >= 1.9x: {'met' if r >= 1.9 else 'NOT met'})")
try:
    a = np.load(sorted(glob.glob(f"{d}/rnout1/*.npy"))[0]).astype(np.float32)  # the one output
    b = np.load(sorted(glob.glob(f"{d}/rnout2/*.npy"))[0]).astype(np.float32)
    diff = np.abs(a - b)
    tol = 2e-2 * np.abs(a).max()  # fp16 logits: each GPU's cuDNN engines differ by an ulp or so
    print(f"  output match (2 GPUs vs 1 GPU, {a.shape}, within 2e-2 of max |y|): "
          f"{'match' if a.shape == b.shape and (diff <= tol).all() else 'MISMATCH'}, "
          f"max |diff| {diff.max():.4g}, max |y| {np.abs(a).max():.4g}, argmax agreement "
          f"{(a.argmax(1) == b.argmax(1)).mean() * 100:.1f}%")
except Exception as e:
    print(f"  output comparison failed: {e}")
PY

# ---- Attention split by heads: a BERT-style encoder, 1 GPU against --gpus 2 --partition tensor --
# transformers' BertModel with random weights (hidden 1024, 16 heads, FFN 4096: GPT-2-medium's
# sizes; $BERT_LAYERS layers, 24 by default), exported by torch in f32 at batch 16 x seq 512 and
# compiled with --precision fp16 for 1 GPU and for 2 (each layer's attention split by heads and
# its MLP split as above: two all-reduces of 16 x 512 x 1024 per layer). Writes its section of
# $report: build times, the split the pass reports, medians, the speed-up (target 1.5x), whether
# the outputs match, and the all-reduces' share estimated from NCCL all-reduces of the same size
# timed alone (torch.cuda.nccl, the same two GPUs) times their count.
bert_tensor_parallel() {
  local layers=${BERT_LAYERS:-24} d=$work/multi-gpu-bert
  rm -rf "$d" && mkdir -p "$d"
  echo "== attention split by heads: BERT encoder, $layers layers, 1 GPU vs 2 (tensor) ==" >> "$report"
  "$py" - "$d" "$layers" <<'PY' >> "$report" 2>&1 || { echo "exporting the encoder failed" >> "$report"; return 1; }
import sys, time, numpy as np, torch
from transformers import BertConfig, BertModel
d, layers = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
cfg = BertConfig(hidden_size=1024, num_attention_heads=16, intermediate_size=4096,
                 num_hidden_layers=layers, max_position_embeddings=512)
class Enc(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bert = BertModel(cfg)
    def forward(self, input_ids, attention_mask):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
m = Enc().eval()
ids = torch.randint(0, cfg.vocab_size, (16, 512), dtype=torch.int64)
mask = torch.ones(16, 512, dtype=torch.int64)
mask[1::2, 384:] = 0  # odd sequences padded after 384 tokens
t0 = time.time()
torch.onnx.export(m, (ids, mask), f"{d}/bert.onnx", input_names=["input_ids", "attention_mask"],
                  output_names=["y"], opset_version=17, dynamo=False)
np.save(f"{d}/input_ids.npy", ids.numpy())
np.save(f"{d}/attention_mask.npy", mask.numpy())
print(f"model: BertModel hidden 1024, 16 heads, FFN 4096, {layers} layers, batch 16 x seq 512; "
      f"{sum(p.numel() for p in m.parameters()) / 1e6:.0f} M parameters; exported in {time.time() - t0:.0f} s")
PY
  local g args t0
  for g in 1 2; do
    args="--precision fp16"
    [ $g = 2 ] && args="$args --gpus 2 --partition tensor --report $d/report2.json"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    if ! "$ampc" "$d/bert.onnx" $args -o "$d/bert$g.so" > "$out/multi-gpu-bert-build$g.log" 2>&1; then
      echo "building for $g GPU(s) failed: $(tail -5 "$out/multi-gpu-bert-build$g.log")" >> "$report"
      continue
    fi
    echo "built for $g GPU(s) in $(( $(date +%s) - t0 )) s" >> "$report"
    for e in "" 1; do
      [ $g = 1 ] && [ -n "$e" ] && continue
      AMPC_MULTI_GPU_GRAPHS=$e "$ampc" run "$d/bert$g.so" --input "input_ids=$d/input_ids.npy" \
        --input "attention_mask=$d/attention_mask.npy" --save-outputs "$d/out$g$e" \
        --warmup 10 --iterations "$iters" > "$out/multi-gpu-bert-run$g$e.log" 2>&1 ||
        echo "running on $g GPU(s) (graphs '$e') failed: $(tail -5 "$out/multi-gpu-bert-run$g$e.log")" >> "$report"
    done
  done
  cp "$d/report2.json" "$out/multi-gpu-bert-report2.json" 2>/dev/null
  "$py" - "$d" "$out" "$layers" <<'PY' >> "$report" 2>&1
import json, re, sys, time, numpy as np, torch
d, out, layers = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    blocks = json.load(open(f"{d}/report2.json")).get("partition", [])
    for kind in ("attention", "mlp"):
        b = [x for x in blocks if x["kind"] == kind]
        print(f"partition: {sum(x['split'] for x in b)} of {len(b)} {kind} blocks split"
              + "".join(f"\n  whole: {x['node']}: {x['why']}" for x in b if not x["split"]))
except Exception as e:
    print(f"partition report unreadable: {e}")
names = {"1": "1 GPU (CUDA graph)", "2": "2 GPUs (step by step)", "21": "2 GPUs (a CUDA graph per GPU)"}
med = {}
for g in names:
    try:
        m = re.search(r"median ([0-9.]+) ms", open(f"{out}/multi-gpu-bert-run{g}.log").read())
        med[g] = float(m.group(1)) if m else None
    except OSError:
        med[g] = None
    print(f"{names[g]}: median {med[g]} ms")
for g in ("2", "21"):
    if med["1"] and med[g]:
        print(f"speed-up {names[g]} over 1 GPU: {med['1'] / med[g]:.2f}x (target 1.5x)")
    try:
        a = np.load(f"{d}/out1/y.npy").astype(np.float32)
        b = np.load(f"{d}/out{g}/y.npy").astype(np.float32)
        diff, tol = np.abs(a - b), 5e-2 * (1 + np.abs(a))
        print(f"output match ({names[g]} vs 1 GPU, y {a.shape}): "
              f"{'match' if (diff <= tol).all() else 'MISMATCH'}, max |diff| {diff.max():.4g}, "
              f"mean |diff| {diff.mean():.3g}, elements outside 5e-2 relative: {int((diff > tol).sum())}")
    except Exception as e:
        print(f"output comparison ({names[g]}) failed: {e}")
# the all-reduces alone: 2 per layer of 16 x 512 x 1024 f16, NCCL over the same two GPUs
try:
    xs = [torch.ones(16 * 512 * 1024, dtype=torch.float16, device=f"cuda:{i}") for i in (0, 1)]
    for _ in range(10):
        torch.cuda.nccl.all_reduce(xs)
    for i in (0, 1):
        torch.cuda.synchronize(i)
    t0, n = time.perf_counter(), 50
    for _ in range(n):
        torch.cuda.nccl.all_reduce(xs)
    for i in (0, 1):
        torch.cuda.synchronize(i)
    ar = (time.perf_counter() - t0) / n * 1e3
    share = ""
    for g in ("2", "21"):
        if med[g]:
            share += f"; {100 * 2 * layers * ar / med[g]:.0f}% of {names[g]}"
    print(f"all-reduce of 16 MiB alone: {ar:.3f} ms; {2 * layers} a run = {2 * layers * ar:.2f} ms{share} (estimate)")
except Exception as e:
    print(f"all-reduce timing failed: {e}")
PY
}

# ---- Pipeline: the same BERT-style encoder cut into 2 stages, 1 GPU against --gpus 2 --partition
# pipeline --- reuses bert_tensor_parallel's export and its 1-GPU run (hidden 1024, 16 heads, seq
# 512, batch 16, fp16: GPT-2-medium's sizes). Stage s (half the layers, by estimated cost) on GPU
# s, the batch in $MICRO_BATCHES micro-batches (8 by default: micro-batches of 2 sequences; the
# bound is 2 M / (M + 1) = 1.78x). Writes its section of $report: the stages from --report, the
# build time, the 2-GPU median and the throughput against 1 GPU (target 1.7x), and whether the
# outputs match. SKIP_PIPELINE=1 leaves it out.
bert_pipeline() {
  local d=$work/multi-gpu-bert micro=${MICRO_BATCHES:-8} t0
  echo "== pipeline: BERT encoder, 1 GPU vs 2 stages (--partition pipeline, $micro micro-batches) ==" >> "$report"
  if [ ! -f "$d/bert.onnx" ] || [ ! -f "$out/multi-gpu-bert-run1.log" ]; then
    echo "needs bert_tensor_parallel's export and 1-GPU run (SKIP_BERT unset)" >> "$report"
    return 1
  fi
  t0=$(date +%s)
  if ! "$ampc" "$d/bert.onnx" --precision fp16 --gpus 2 --partition pipeline --micro-batches "$micro" \
      --report "$d/report-pipe.json" -o "$d/bertp.so" > "$out/multi-gpu-bert-buildp.log" 2>&1; then
    echo "building the pipeline failed: $(tail -5 "$out/multi-gpu-bert-buildp.log")" >> "$report"
    return 1
  fi
  echo "built the pipeline in $(( $(date +%s) - t0 )) s" >> "$report"
  "$ampc" run "$d/bertp.so" --input "input_ids=$d/input_ids.npy" \
    --input "attention_mask=$d/attention_mask.npy" --save-outputs "$d/outp" \
    --warmup 10 --iterations "$iters" > "$out/multi-gpu-bert-runp.log" 2>&1 ||
    echo "running the pipeline failed: $(tail -5 "$out/multi-gpu-bert-runp.log")" >> "$report"
  cp "$d/report-pipe.json" "$out/multi-gpu-bert-report-pipe.json" 2>/dev/null
  "$py" - "$d" "$out" <<'PY' >> "$report" 2>&1
import json, re, sys, numpy as np
d, out = sys.argv[1], sys.argv[2]
try:
    p = json.load(open(f"{d}/report-pipe.json"))["pipeline"]
    total = sum(s["cost"] for s in p["list"])
    for s in p["list"]:
        print(f"stage {s['stage']}: {s['nodes']} nodes ({s['first']} .. {s['last']}), "
              f"{100 * s['cost'] / total:.1f}% of the cost, hands on {s['crossing']} tensor(s), "
              f"{s['crossing_bytes']} bytes per micro-batch: {s['tensors']}")
except Exception as e:
    print(f"pipeline report unreadable: {e}")
med = {}
for g in ("1", "p"):
    try:
        m = re.search(r"median ([0-9.]+) ms", open(f"{out}/multi-gpu-bert-run{g}.log").read())
        med[g] = float(m.group(1)) if m else None
    except OSError:
        med[g] = None
print(f"1 GPU: median {med['1']} ms; pipeline on 2 GPUs: median {med['p']} ms")
if med["1"] and med["p"]:
    print(f"throughput of the pipeline over 1 GPU: {med['1'] / med['p']:.2f}x (target 1.7x)")
try:
    a = np.load(f"{d}/out1/y.npy").astype(np.float32)
    b = np.load(f"{d}/outp/y.npy").astype(np.float32)
    diff, tol = np.abs(a - b), 5e-2 * (1 + np.abs(a))
    print(f"output match (pipeline vs 1 GPU, y {a.shape}): "
          f"{'match' if (diff <= tol).all() else 'MISMATCH'}, max |diff| {diff.max():.4g}, "
          f"elements outside 5e-2 relative: {int((diff > tol).sum())}")
except Exception as e:
    print(f"output comparison (pipeline) failed: {e}")
PY
}

[ "${SKIP_BERT:-}" = 1 ] || bert_tensor_parallel
[ "${SKIP_BERT:-}" = 1 ] || [ "${SKIP_PIPELINE:-}" = 1 ] || bert_pipeline
cat "$report"
