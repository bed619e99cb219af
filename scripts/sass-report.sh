#!/bin/sh
# GPU machine (has cuobjdump): assemble PTX files and print, per kernel, the
# register/spill report and the SASS instruction mix (whole kernel), so a
# surprising timing can be read against what the hardware runs.
#   sh scripts/sass-report.sh FILE.ptx... ; SASS_OUT=dir keeps the .sass files
for ptx in "$@"; do
  name=$(basename "$ptx" .ptx)
  dir=${SASS_OUT:-/tmp}
  ptxas --gpu-name sm_90a -v "$ptx" -o "$dir/$name.cubin" 2>&1 | grep -E "registers|spill" | sed "s/^/$name: /"
  cuobjdump -sass "$dir/$name.cubin" > "$dir/$name.sass"
  total=$(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$dir/$name.sass")
  echo "$name: $total SASS instructions; top opcodes:"
  grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P[0-9T] )?[A-Z0-9_]+' "$dir/$name.sass" |
    awk '{print $NF}' | sort | uniq -c | sort -rn | head -25 | awk '{printf "  %6d %s\n", $1, $2}'
done
