#!/bin/sh
# Build machine: the decode-suite specs (test/gpu/decode_specs) compiled once
# per optional pass with that pass disabled, into .device/decode-variants/
# no-PASS, so the GPU round proves -disable-pass keeps decode kernels correct.
set -e
FLASHC=${FLASHC:-build/tools/flashc}
ROOT=${DECODE_VARIANTS_DIR:-.device/decode-variants}
rm -rf "$ROOT"
for p in $("$FLASHC" --list-passes | awk '!/\(required\)/ {print $1}'); do
  mkdir -p "$ROOT/no-$p"
  for fa in test/gpu/decode_specs/*.fa; do
    "$FLASHC" "$fa" -emit=ptx --target=sm_90a -disable-pass="$p" -o "$ROOT/no-$p/$(basename "$fa" .fa).ptx"
  done
  echo "no-$p: $(ls "$ROOT/no-$p" | wc -l) PTX"
done
