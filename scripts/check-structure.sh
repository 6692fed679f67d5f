#!/usr/bin/env bash
# check-structure.sh — rules of the source tree that a compiler does not check, each printed with
# file:line and the rule when broken (exit status 1 then; ctest runs it as structure/rules):
#
# 1. Layers (docs/layers.md): each layer of the pipeline includes only the layers below it (and
#    itself), and the command line (cli/) reaches the compiler through include/ and the one
#    internal header compiler/tool.h:
#
#   layer        may include (besides include/, its own folder and system headers)
#   ir           -
#   frontends    ir
#   passes       ir
#   codegen      ir runtime (the plan it writes)
#   runtime      -          (a generated library links it alone)
#   compiler     ir frontends passes codegen runtime
#   cli          compiler/tool.h only
#
# 2. Plan steps: no hand-written switch over step kinds (runtime/steps.def expands them).
# 3. The environment: getenv only in runtime/options.c, the compiler's tool locator and cli/.
# 4. Every AMPC_* variable the source names is in docs/options.md.
# 5. Every op-table row has a GPU lowering or is on the reference-only list: a row of lowering
#    kind REFERENCE is named nowhere in codegen/; every other row
#    (but NONE, resolved at compile time) is named by its family's lowering in codegen/.
# 6. Attributes are named in one place: the family headers of ir/ (ir/activation.h, ir/conv.h,
#    ...; docs/adding-an-op.md), inference and the importer. The reference, code generation, the
#    passes and the layers above read and write a node's parameters through those decoders and
#    constructors, never by an attribute's name.
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
      echo "check-structure: $file:$line includes \"$inc\"; $rule"
      bad=1
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$layer" --include='*.c' --include='*.h')
done

# 2. Plan steps: every kind of step is a row of runtime/steps.def, and code over the kinds is
#    expanded from it; a `case AMPC_RT_STEP_...` written by hand is a switch a new kind would miss.
while IFS= read -r hit; do
  echo "check-structure: ${hit%%:*}:$(printf '%s' "${hit#*:}" | cut -d: -f1) switches on a step kind by hand; expand runtime/steps.def instead"
  bad=1
done < <(grep -rnE 'case[[:space:]]+AMPC_RT_STEP_' $layers include --include='*.c' --include='*.h')

# 3. The environment (docs/options.md): getenv only in the runtime's options, the compiler's tool
#    locator and the command line; generated code and the passes depend on their options alone.
readers="runtime/options.c compiler/artifact.c compiler/cache.c compiler/nvrtc.c"
while IFS= read -r hit; do
  file=${hit%%:*}
  case "$file" in cli/*) continue ;; esac
  case " $readers " in *" $file "*) continue ;; esac
  echo "check-structure: $file:$(printf '%s' "${hit#*:}" | cut -d: -f1) reads the environment; a setting is a field of ampc_rt_options (runtime/options.c) or a compile option (docs/options.md)"
  bad=1
done < <(grep -rnE '\bgetenv[[:space:]]*\(' $layers include --include='*.c' --include='*.h')

# 4. Every AMPC_* variable the source names ("AMPC_X" as a whole string) is in docs/options.md.
for var in $(grep -rhoE '"AMPC_[A-Z0-9_]+"' $layers include --include='*.c' --include='*.h' | tr -d '"' | sort -u); do
  grep -q "\b$var\b" docs/options.md || { echo "check-structure: $var is read but not in docs/options.md"; bad=1; }
done

# 5. The op table against code generation (docs/adding-an-op.md).
while read -r id kind; do
  named=0
  grep -rqE "AMPC_OP_${id}\b" codegen --include='*.c' && named=1
  case "$kind" in
    NONE) ;;
    REFERENCE)
      [ $named = 1 ] && { echo "check-structure: ir/ops.def: $id is on the reference-only list ($kind) but codegen/ lowers it: give its row its family's lowering kind"; bad=1; } ;;
    *)
      [ $named = 0 ] && { echo "check-structure: ir/ops.def: $id has lowering kind $kind but codegen/ never names AMPC_OP_$id: lower it, or make its kind REFERENCE and add it to docs/adding-an-op.md"; bad=1; } ;;
  esac
done < <(sed -nE 's/^OP\(([A-Z0-9_]+),.*,[[:space:]]*([A-Z_]+)\)[[:space:]]*$/\1 \2/p' ir/ops.def)

# 6. Attribute names outside the decoders: a call of an *attr* function with a literal name, or an
#    attribute written with a literal name ({.name = "x", .kind = AMPC_ATTR_...}).
while IFS= read -r hit; do
  echo "check-structure: ${hit%%:*}:$(printf '%s' "${hit#*:}" | cut -d: -f1) names an attribute by string; read or write a node's parameters through its family's decoder in ir/ (docs/adding-an-op.md)"
  bad=1
done < <(grep -rnE '\b[a-z_0-9]*attr[a-z_0-9]*\([^"();]*"[A-Za-z_][A-Za-z_0-9]*"|\.name = "[A-Za-z_0-9]*",? *\.kind = AMPC_ATTR' \
           ir/ref codegen passes compiler runtime cli --include='*.c')

[ $bad = 0 ] && echo "check-structure: every include follows the layers; no switch over step kinds; the environment is read in its places and documented; every op has a GPU lowering or is on the reference-only list; attributes are named only by their decoders"
exit $bad
