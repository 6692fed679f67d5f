# gpu-env.sh — sourced by the GPU-machine scripts of bench/ that build models with torch: the
# output folder ($OUT, else gpu-out), the libraries of .devlibs, the torch python ($py), the
# models' work folder ($work, shared so a second script reuses the first one's exports) and a
# kernel cache of its own.
out=${OUT:-gpu-out}
mkdir -p "$out"
source .devlibs/env.sh
py=${AMPC_TORCH_PYTHON:-/opt/torch/.venv/bin/python}
work=/tmp/artifact
mkdir -p $work
export AMPC_CACHE_DIR=/tmp/ampc-cache
