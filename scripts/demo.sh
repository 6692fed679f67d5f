#!/usr/bin/env bash
# demo.sh — builds ampc and runs its demo: the seed MLP (784-128-10, batch 64) built with the C
# DSL, evaluated by the reference evaluator (checked against plain C loops), compiled into a
# shared library (build/demo/mlp.so + mlp.h), and a C program (examples/app/app.c) built
# against that library and run: on the GPU when there is one; without one the program prints
# the library's "no CUDA device" error and the reference output above stands.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" default
demo="$root/build/demo"
mkdir -p "$demo"
"$root/build/bin/mlp" 64 --library "$demo/mlp.so"
cc -std=c11 -O2 -Wall -I "$demo" -o "$demo/app" "$root/examples/app/app.c" "$demo/mlp.so" \
  -Wl,-rpath,"$demo"
echo "built $demo/app against mlp.so; running it:"
if "$demo/app"; then
  echo "demo: the compiled library ran on the GPU"
else
  echo "demo: no usable GPU here, so the library reports the error above; the logits printed" \
       "first are the reference evaluator's"
fi
