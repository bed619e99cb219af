#!/bin/sh
# Build machine: the variants benchmark's kernels (bench/bench_variants.py)
# compiled with extra flashc flags into .device/bench_variants_NAME, beside
# the default build in .device/bench_variants (scripts/build-bench-kernels.sh),
# for a same-process A/B of a pass on the variants table:
#   sh scripts/build-variants-ab.sh NAME FLAG...
#   e.g. sh scripts/build-variants-ab.sh nopersist -disable-pass=persistent
# Device side, alternating the two directories (each ~1 minute):
#   for d in .device/bench_variants .device/bench_variants_NAME \
#            .device/bench_variants .device/bench_variants_NAME; do
#     FLASHC_LIB_DIR=build-gpu python3 bench/bench_variants.py --ptx-dir $d; done
set -e
cd "$(dirname "$0")/.."
FLASHC=${FLASHC:-build/tools/flashc}
[ $# -ge 2 ] || { sed -n '2,11p' "$0"; exit 2; }
NAME=$1
shift
OUT=.device/bench_variants_$NAME
rm -rf "$OUT"
mkdir -p "$OUT"
python3 bench/bench_variants.py --write-specs "$OUT" >/dev/null
for spec in "$OUT"/*.fa; do
  name=$(basename "$spec" .fa)
  # a variant's own flags (NAME.flags: document_noskip's -disable-pass=mask-skip) come last
  # shellcheck disable=SC2046
  "$FLASHC" "$spec" -emit=ptx --target=sm_90a "$@" $(cat "$OUT/$name.flags") -o "$OUT/$name.ptx"
done
echo "variants A/B: $(ls "$OUT"/*.ptx | wc -l) PTX in $OUT ($*)"
