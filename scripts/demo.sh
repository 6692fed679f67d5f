#!/usr/bin/env bash
# demo.sh — builds ampc and runs its demo: the seed MLP (784-128-10) built with the C DSL and
# evaluated by the reference evaluator.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" default
exec "$root/build/bin/mlp" "$@"
