#!/bin/sh
# Build machine: the variants benchmark's kernels (bench/bench_variants.py)
# compiled into OUT_DIR, extra flashc flags in every compile; a variant's
# own flags (NAME.flags: document_noskip's -disable-pass=mask-skip) come
# last. scripts/build-bench-kernels.sh builds .device/bench_variants with
# it; a second directory gives a same-process A/B of a pass:
#   sh scripts/build-variants-bench.sh OUT_DIR [FLAG...]
#   e.g. sh scripts/build-variants-bench.sh .device/bench_variants_nopersist -disable-pass=persistent
# then, on the device, the two directories alternating (each ~1 minute):
#   FLASHC_LIB_DIR=build-gpu python3 bench/bench_variants.py --ptx-dir DIR
set -e
FLASHC=${FLASHC:-build/tools/flashc}
[ $# -ge 1 ] || { sed -n '2,10p' "$0"; exit 2; }
OUT=$1
shift
mkdir -p "$OUT"
python3 bench/bench_variants.py --write-specs "$OUT" >/dev/null
for spec in "$OUT"/*.fa; do
  name=$(basename "$spec" .fa)
  # shellcheck disable=SC2046
  "$FLASHC" "$spec" -emit=ptx --target=sm_90a "$@" $(cat "$OUT/$name.flags") -o "$OUT/$name.ptx"
done
echo "variants bench: $(ls "$OUT"/*.ptx | wc -l) PTX in $OUT"
