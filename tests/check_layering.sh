#!/usr/bin/env bash
# Layering check (a ctest case, so part of make test): every quoted #include between the library's
# folders runs down the stack, never up or sideways:
#   ir <- lowering <- backends <- runtime (tensor core) <- autograd <- capture, nn
#      <- include, bindings, tools
# distributed/ (process groups, collectives) sits on ir/ beside lowering/: it includes only ir/,
# and backends/ and everything above it may include it.
# runtime/ records ops for autograd through its own interface (runtime/tape.h), which autograd/
# implements and registers, so nothing in runtime/ includes autograd/. capture/ and nn/ are peers:
# neither includes the other. Exits 1 naming each upward include.
# Usage: tests/check_layering.sh [source root] (default: this checkout).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# The folders a folder's files may include from (its own included).
declare -A allowed=(
  [ir]="ir"
  [lowering]="ir lowering"
  [distributed]="ir distributed"
  [backends]="ir lowering distributed backends"
  [runtime]="ir lowering distributed backends runtime"
  [autograd]="ir lowering distributed backends runtime autograd"
  [capture]="ir lowering distributed backends runtime autograd capture"
  [nn]="ir lowering distributed backends runtime autograd nn"
  [include]="ir lowering distributed backends runtime autograd capture nn include"
  [bindings]="ir lowering distributed backends runtime autograd capture nn bindings"
  [tools]="ir lowering distributed backends runtime autograd capture nn tools"
)
layered=" ir lowering distributed backends runtime autograd capture nn include bindings tools "

bad=0
checked=0
for folder in "${!allowed[@]}"; do
  [ -d "$folder" ] || continue
  while IFS= read -r -d '' file; do
    checked=$((checked + 1))
    while IFS=: read -r line target; do
      top=${target%%/*}
      [ "$top" != "$target" ] || continue                # a header beside the file ("x.h")
      [[ $layered == *" $top "* ]] || continue           # not one of the library's folders
      [[ " ${allowed[$folder]} " == *" $top "* ]] && continue
      echo "layering: $file:$line includes \"$target\": $folder/ may include only from: ${allowed[$folder]}"
      bad=1
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
             sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1:\2/')
  done < <(find "$folder" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o -name '*.cu' \
                                    -o -name '*.def' \) -print0)
done
[ "$checked" -gt 0 ] || { echo "layering: no source files under $root"; exit 1; }
if [ "$bad" -ne 0 ]; then exit 1; fi
echo "layering: $checked files, no upward include"
