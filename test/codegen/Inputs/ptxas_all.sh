#!/bin/sh
# ptxas_all.sh FLASHC EXAMPLES_DIR TARGET TMPDIR
# Compiles every kernel of every example spec that the frontend and passes
# accept (-emit=tile succeeds) to PTX for TARGET and assembles it with ptxas.
# Prints one line per kernel; exits 1 if any accepted kernel fails in codegen
# or ptxas. Kernels the frontend refuses (not implemented yet) are listed as
# "skip" and do not fail the test: they are not codegen's to compile.
flashc=$1 dir=$2 target=$3 tmp=$4
mkdir -p "$tmp"
status=0
for fa in "$dir"/*.fa; do
  for k in $(sed -n 's/^attention[ \t]\{1,\}\([A-Za-z0-9_]*\).*/\1/p' "$fa"); do
    base=$(basename "$fa" .fa)
    if ! "$flashc" -emit=tile --target="$target" --kernel="$k" "$fa" >/dev/null 2>&1; then
      echo "skip $base/$k (frontend refuses it)"
      continue
    fi
    ptx="$tmp/$k.$target.ptx"
    if ! "$flashc" -emit=ptx --target="$target" --kernel="$k" "$fa" -o "$ptx" 2>"$tmp/err"; then
      echo "FAIL codegen $base/$k"; cat "$tmp/err"; status=1; continue
    fi
    if ! ptxas --gpu-name "$target" "$ptx" -o "$tmp/$k.cubin" 2>"$tmp/err"; then
      echo "FAIL ptxas $base/$k"; cat "$tmp/err"; status=1; continue
    fi
    echo "ok $base/$k $target"
  done
done
exit $status
