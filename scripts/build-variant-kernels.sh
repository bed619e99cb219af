#!/bin/sh
# Build machine: the GPU suites' specs compiled once per optional pass with
# that pass disabled, so the GPU round proves -disable-pass=PASS keeps every
# kernel correct: test/gpu/specs -> .device/variants/no-PASS (decode-only
# passes leave forward kernels unchanged and are skipped) and
# test/gpu/decode_specs -> .device/decode-variants/no-PASS (every pass); and
# the forward specs on mma.sync instead of wgmma -> .device/variants/mma-sync.
set -e
FLASHC=${FLASHC:-build/tools/flashc}

# variants SPEC_DIR ROOT AWK_FILTER
variants() {
  rm -rf "$2"
  for p in $("$FLASHC" --list-passes | awk "$3"); do
    mkdir -p "$2/no-$p"
    for fa in "$1"/*.fa; do
      "$FLASHC" "$fa" -emit=ptx --target=sm_90a -disable-pass="$p" -o "$2/no-$p/$(basename "$fa" .fa).ptx"
    done
    echo "$2/no-$p: $(ls "$2/no-$p" | wc -l) PTX"
  done
}
variants test/gpu/specs "${VARIANTS_DIR:-.device/variants}" '!/\(required\)/ && !/ decode: / {print $1}'
# The same forward kernels on mma.sync instead of wgmma (-mma=sync).
d=${VARIANTS_DIR:-.device/variants}/mma-sync
mkdir -p "$d"
for fa in test/gpu/specs/*.fa; do
  "$FLASHC" "$fa" -emit=ptx --target=sm_90a -mma=sync -o "$d/$(basename "$fa" .fa).ptx"
done
echo "$d: $(ls "$d" | wc -l) PTX"
variants test/gpu/decode_specs "${DECODE_VARIANTS_DIR:-.device/decode-variants}" '!/\(required\)/ {print $1}'
# The decode kernels with the separate combine kernel (-decode-combine=separate):
# the path of modules compiled before the fused combine (docs/decode.md).
d=${DECODE_VARIANTS_DIR:-.device/decode-variants}/separate-combine
mkdir -p "$d"
for fa in test/gpu/decode_specs/*.fa; do
  "$FLASHC" "$fa" -emit=ptx --target=sm_90a -decode-combine=separate -o "$d/$(basename "$fa" .fa).ptx"
done
echo "$d: $(ls "$d" | wc -l) PTX"
