#!/usr/bin/env bash
# check-layers.sh — the include rules of the source tree: each layer of the pipeline includes only
# the layers below it (and itself), and the command line (cli/) reaches the compiler through
# include/ and the one internal header compiler/tool.h. Prints every include that breaks a rule
# (file:line, the include, the rule) and exits 1 if there is one. Run by ctest (layers/includes).
#
#   layer        may include (besides include/, its own folder and system headers)
#   ir           -
#   frontends    ir
#   passes       ir
#   codegen      ir runtime (the plan it writes)
#   runtime      -          (a generated library links it alone)
#   compiler     ir frontends passes codegen runtime
#   cli          compiler/tool.h only
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
declare -A allowed=(
  [ir]="ir" [frontends]="frontends ir" [passes]="passes ir" [codegen]="codegen ir runtime"
  [runtime]="runtime" [compiler]="compiler ir frontends passes codegen runtime" [cli]="cli"
)
layers="ir frontends passes codegen runtime compiler cli"
bad=0
for layer in $layers; do
  while IFS= read -r hit; do
    file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}
    inc=$(printf '%s' "$rest" | sed -E 's/^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/')
    case "$inc" in */*) ;; *) continue ;; esac          # a file of the same folder
    top=${inc%%/*}
    [ -e "$(dirname "$file")/$inc" ] && [ "$top" != "$layer" ] && [ ! -d "$top" ] && continue # a subfolder
    case " $layers " in *" $top "*) ;; *) continue ;; esac # not a layer (e.g. CUDA's own)
    ok=0
    for a in ${allowed[$layer]}; do [ "$top" = "$a" ] && ok=1; done
    [ "$layer" = cli ] && [ "$inc" = compiler/tool.h ] && ok=1
    if [ $ok = 0 ]; then
      rule="$layer/ includes only from: ${allowed[$layer]}"
      [ "$layer" = cli ] && rule="cli/ includes only from: cli, compiler/tool.h"
      echo "check-layers: $file:$line includes \"$inc\"; $rule"
      bad=1
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$layer" --include='*.c' --include='*.h')
done
[ $bad = 0 ] && echo "check-layers: every include follows the layers"
exit $bad
