#!/bin/sh
# Build machine: the GPU suites' specs compiled once per optional pass with
# that pass disabled, so the GPU round proves -disable-pass=PASS keeps every
# kernel correct: test/gpu/specs -> .device/variants/no-PASS (decode-only
# passes leave forward kernels unchanged and are skipped) and
# test/gpu/decode_specs -> .device/decode-variants/no-PASS (every pass); and
# the forward specs on mma.sync instead of wgmma -> .device/variants/mma-sync;
# and both suites with a deeper software pipeline (`stages = 3`: every K/V
# tile two steps ahead) -> variants/stages-3, decode-variants/stages-3.
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

# staged SPEC_DIR OUT_DIR N: every spec of SPEC_DIR with `stages = N` in a
# schedule block of its own; a kernel whose shared memory cannot hold N
# stages is refused by the tiling pass and left out (with its reason).
staged() {
  mkdir -p "$2"
  tmp=$(mktemp -d)
  for fa in "$1"/*.fa; do
    name=$(awk '/^attention /{print $2; exit}' "$fa")
    { cat "$fa"; printf 'schedule %s { stages = %s; }\n' "$name" "$3"; } >"$tmp/$name.fa"
    "$FLASHC" "$tmp/$name.fa" -emit=ptx --target=sm_90a -o "$2/$(basename "$fa" .fa).ptx" 2>"$tmp/err" ||
      echo "$2: $(basename "$fa" .fa) left out: $(head -1 "$tmp/err")"
  done
  rm -rf "$tmp"
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
staged test/gpu/specs "${VARIANTS_DIR:-.device/variants}/stages-3" 3
variants test/gpu/decode_specs "${DECODE_VARIANTS_DIR:-.device/decode-variants}" '!/\(required\)/ {print $1}'
# The decode kernels with the separate combine kernel: the path of modules
# compiled before the fused combine (docs/decode.md).
variant test/gpu/decode_specs "${DECODE_VARIANTS_DIR:-.device/decode-variants}/separate-combine" \
  -decode-combine=separate
staged test/gpu/decode_specs "${DECODE_VARIANTS_DIR:-.device/decode-variants}/stages-3" 3
