#!/bin/sh
# Build machine: the ablation kernels (bench/configs.py ablation_grid) once
# with every pass and once per optional pass disabled, one PTX directory per
# variant under .device/ablation (decode-only passes leave forward kernels
# unchanged and are skipped), and once on mma.sync instead of wgmma
# (mma-sync); bench.py --ablation runs them.
set -e
FLASHC=${FLASHC:-build/tools/flashc}
ROOT=${ABLATION_DIR:-.device/ablation}
rm -rf "$ROOT"
mkdir -p "$ROOT/specs"
python3 bench/configs.py --write-ablation-specs "$ROOT/specs" >/dev/null
variants="all-passes mma-sync"
for p in $("$FLASHC" --list-passes | awk '!/\(required\)/ && !/ decode: / {print $1}'); do
  variants="$variants no-$p"
done
for v in $variants; do
  mkdir -p "$ROOT/$v"
  flag=""
  case "$v" in
    all-passes) ;;
    mma-sync) flag="-mma=sync" ;;
    *) flag="-disable-pass=${v#no-}" ;;
  esac
  for spec in "$ROOT"/specs/*.fa; do
    "$FLASHC" "$spec" -emit=ptx --target=sm_90a $flag -o "$ROOT/$v/$(basename "$spec" .fa).ptx"
  done
  echo "$v: $(ls "$ROOT/$v" | wc -l) PTX"
done
rm -rf "$ROOT/specs"
