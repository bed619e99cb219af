#!/bin/sh
# Build machine: the GPU-suite specs (test/gpu/specs) compiled once per
# optional pass with that pass disabled, into .device/variants/no-PASS, so the
# GPU round proves that -disable-pass=PASS keeps every kernel correct.
set -e
FLASHC=${FLASHC:-build/tools/flashc}
ROOT=${VARIANTS_DIR:-.device/variants}
rm -rf "$ROOT"
for p in $("$FLASHC" --list-passes | awk '!/\(required\)/ && !/ decode: / {print $1}'); do
  mkdir -p "$ROOT/no-$p"
  for fa in test/gpu/specs/*.fa; do
    "$FLASHC" "$fa" -emit=ptx --target=sm_90a -disable-pass="$p" -o "$ROOT/no-$p/$(basename "$fa" .fa).ptx"
  done
  echo "no-$p: $(ls "$ROOT/no-$p" | wc -l) PTX"
done
