#!/bin/sh
# Runs HERE (the build machine, with LLVM/MLIR): compiles every GPU-suite spec
# test/gpu/specs/NAME.fa to .device/ptx/NAME.ptx (one kernel per file) with
# the flashc built in $BUILD (default build), checks each with ptxas, and
# lists what it made. .device/ is git-ignored; a device call takes it along
# with carry: [".device"], then runs `bash scripts/gpu-round.sh`.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FLASHC=$BUILD/tools/flashc
OUT_DIR=.device/ptx
[ -x "$FLASHC" ] || { echo "build-gpu-kernels: $FLASHC not built (make build)"; exit 1; }
mkdir -p $OUT_DIR
ok=0; bad=0
for fa in test/gpu/specs/*.fa; do
  name=$(basename "$fa" .fa)
  if "$FLASHC" "$fa" -emit=ptx --target=sm_90a -o $OUT_DIR/$name.ptx &&
     ptxas --gpu-name sm_90a $OUT_DIR/$name.ptx -o /dev/null; then
    ok=$((ok + 1))
  else
    echo "build-gpu-kernels: $name FAILED"; rm -f $OUT_DIR/$name.ptx; bad=$((bad + 1))
  fi
done
echo "build-gpu-kernels: $ok PTX in $OUT_DIR, $bad failed ($(du -sh $OUT_DIR | cut -f1))"
# The decode suite's specs (test/gpu/decode.py) -> .device/decode.
DEC_DIR=.device/decode
mkdir -p $DEC_DIR
dok=0; dbad=0
for fa in test/gpu/decode_specs/*.fa; do
  name=$(basename "$fa" .fa)
  if "$FLASHC" "$fa" -emit=ptx --target=sm_90a -o $DEC_DIR/$name.ptx &&
     ptxas --gpu-name sm_90a $DEC_DIR/$name.ptx -o /dev/null; then
    dok=$((dok + 1))
  else
    echo "build-gpu-kernels: decode $name FAILED"; rm -f $DEC_DIR/$name.ptx; dbad=$((dbad + 1))
  fi
done
echo "build-gpu-kernels: $dok decode PTX in $DEC_DIR, $dbad failed"
[ $bad = 0 ] && [ $dbad = 0 ]
