#!/usr/bin/env bash
# mpi.sh — one process per GPU on the 2-GPU machine, from the repository root there (prepared by
# bench/gpu-prepare.sh; .devbin and .devlibs carried along). Uses bench/multi-gpu.sh's model (a
# stack of f16 transformer MLP blocks built with --gpus 2 --partition tensor), building it first
# when this run has not.
#
#   1. examples/mpi under `mpirun -np 2`: each process loads one rank on its GPU (the NCCL id
#      sent with MPI_Bcast), runs, times; rank 0 then runs the same library in one process over
#      both GPUs and every rank compares its outputs with that ("MATCH" per rank).
#   2. `ampc run` under `mpirun -np 2` (rank from Open MPI's environment, the id through
#      --nccl-id-file), its outputs compared with numpy against the single-process 2-GPU run of
#      multi-gpu.sh, and its median latency against that run's.
# Writes $OUT/mpi.txt (logs next to it). About a minute of GPU time after the model is built.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
source bench/gpu-env.sh
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on the shared hosts (env.sh sets it as well)
ampc=${AMPC_BIN:-.devbin/bin/ampc}
example=.devbin/bin/ampc-mpi-run
iters=${ITERATIONS:-100}
dir=$work/multi-gpu
report=$out/mpi.txt
: > "$report"
if [ ! -f "$dir/mlp2.so" ] || [ ! -f "$dir/out2/y.npy" ]; then
  echo "building the model with bench/multi-gpu.sh first" >> "$report"
  bash bench/multi-gpu.sh > "$out/mpi-multi-gpu.log" 2>&1
fi
mpirun=$(command -v mpirun || true)
if [ -z "$mpirun" ]; then echo "no mpirun on this machine" >> "$report"; cat "$report"; exit 1; fi
"$mpirun" --version 2>&1 | head -1 >> "$report"
# Open MPI's own libraries come from the machine (the example links libmpi.so.40, whose ABI is
# stable across 4.x); everything else from .devlibs. -x passes the environment to both ranks.
mpi=("$mpirun" --allow-run-as-root -np 2 --bind-to none -x LD_LIBRARY_PATH -x PATH
     -x NCCL_NVLS_ENABLE -x AMPC_CACHE_DIR)

echo "== examples/mpi: mpirun -np 2 ampc-mpi-run mlp2.so $iters" >> "$report"
if [ -x "$example" ]; then
  ldd "$example" | grep "not found" >> "$report"
  timeout 300 "${mpi[@]}" "$example" "$dir/mlp2.so" "$iters" > "$out/mpi-example.log" 2>&1
  echo "exit status $?" >> "$report"
  grep -E "^rank|ranks (match|differ)" "$out/mpi-example.log" >> "$report" ||
    tail -20 "$out/mpi-example.log" >> "$report"
else
  echo "$example is missing: build with MPI found (libopenmpi-dev) and rerun gpu-prepare.sh" >> "$report"
fi

echo "== ampc run under mpirun -np 2 (--nccl-id-file)" >> "$report"
rm -rf "$dir/outmpi" "$dir/nccl-id"
timeout 300 "${mpi[@]}" "$ampc" run "$dir/mlp2.so" --input "x=$dir/x.npy" \
  --nccl-id-file "$dir/nccl-id" --save-outputs "$dir/outmpi" --warmup 20 --iterations "$iters" \
  > "$out/mpi-run.log" 2>&1
echo "exit status $?" >> "$report"
grep -E "^rank|latency|CUDA graph|ampc:" "$out/mpi-run.log" >> "$report"

python3 - "$dir" "$out" <<'PY' >> "$report" 2>&1
import re, sys, numpy as np
d, out = sys.argv[1], sys.argv[2]
def median(log):
    try:
        m = re.search(r"median ([0-9.]+) ms", open(log).read())
        return float(m.group(1)) if m else None
    except OSError:
        return None
one, two = median(f"{out}/multi-gpu-run2.log"), median(f"{out}/mpi-run.log")
print(f"median: one process over 2 GPUs {one} ms, one process per GPU {two} ms"
      + (f" (ratio {two / one:.3f})" if one and two else ""))
try:
    a = np.load(f"{d}/out2/y.npy").astype(np.float32)
    b = np.load(f"{d}/outmpi/y.npy").astype(np.float32)
    diff = np.abs(a - b)
    print(f"outputs (one process per GPU vs one process, y {a.shape}): "
          f"{'identical' if (diff == 0).all() else 'DIFFER'}, max |diff| {diff.max():.4g}")
except Exception as e:
    print(f"output comparison failed: {e}")
PY
cat "$report"
