#!/bin/sh
# Build machine: the GPU suites' specs compiled once per optional pass with
# that pass disabled, so the GPU round proves -disable-pass=PASS keeps every
# kernel correct: test/gpu/specs -> .device/variants/no-PASS (decode-only
# passes leave forward kernels unchanged and are skipped) and
# test/gpu/decode_specs -> .device/decode-variants/no-PASS (every pass); and
# the forward specs on mma.sync instead of wgmma -> .device/variants/mma-sync.
set -e
FLASHC=${FLASHC:-build/tools/flashc}

# variant SPEC_DIR OUT_DIR FLAG: every spec of SPEC_DIR compiled with FLAG.
variant() {
  mkdir -p "$2"
  for fa in "$1"/*.fa; do
    "$FLASHC" "$fa" -emit=ptx --target=sm_90a "$3" -o "$2/$(basename "$fa" .fa).ptx"
  done
  echo "$2: $(ls "$2" | wc -l) PTX"
}

# variants SPEC_DIR ROOT AWK_FILTER: one no-PASS folder per pass the filter keeps.
variants() {
  rm -rf "$2"
  for p in $("$FLASHC" --list-passes | awk "$3"); do
    variant "$1" "$2/no-$p" -disable-pass="$p"
  done
}
variants test/gpu/specs "${VARIANTS_DIR:-.device/variants}" '!/\(required\)/ && !/ decode: / {print $1}'
# The same forward kernels on mma.sync instead of wgmma.
variant test/gpu/specs "${VARIANTS_DIR:-.device/variants}/mma-sync" -mma=sync
variants test/gpu/decode_specs "${DECODE_VARIANTS_DIR:-.device/decode-variants}" '!/\(required\)/ {print $1}'
# The decode kernels with the separate combine kernel: the path of modules
# compiled before the fused combine (docs/decode.md).
variant test/gpu/decode_specs "${DECODE_VARIANTS_DIR:-.device/decode-variants}/separate-combine" \
  -decode-combine=separate
