#!/bin/sh
# Runs HERE (the build machine, with LLVM/MLIR): compiles every GPU-suite spec
# test/gpu/specs/NAME.fa to .device/ptx/NAME.ptx (one kernel per file) with
# the flashc built in $BUILD (default build), checks each with ptxas, and
# lists what it made. .device/ is git-ignored; a device call takes it along
# with carry: [".device"], then runs `bash scripts/gpu-round.sh`.
# FLASHC_FLAGS: extra flashc options for every spec (an ablation or an
# opt-in codegen mode run through all suites, e.g. -lane-stats=carry).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FLASHC=$BUILD/tools/flashc
OUT_DIR=.device/ptx
[ -x "$FLASHC" ] || { echo "build-gpu-kernels: $FLASHC not built (make build)"; exit 1; }
# compile SPEC_DIR OUT_DIR LABEL: every spec of SPEC_DIR to OUT_DIR, checked
# by ptxas; prints a summary and returns the number of failures.
compile() {
  mkdir -p "$2"
  ok=0; bad=0
  for fa in "$1"/*.fa; do
    name=$(basename "$fa" .fa)
    # shellcheck disable=SC2086 # FLASHC_FLAGS: words
    if "$FLASHC" "$fa" -emit=ptx --target=sm_90a ${FLASHC_FLAGS:-} -o "$2/$name.ptx" &&
       ptxas --gpu-name sm_90a "$2/$name.ptx" -o /dev/null; then
      ok=$((ok + 1))
    else
      echo "build-gpu-kernels: $3 $name FAILED"; rm -f "$2/$name.ptx"; bad=$((bad + 1))
    fi
  done
  echo "build-gpu-kernels: $ok $3 PTX in $2, $bad failed ($(du -sh "$2" | cut -f1))"
  return $bad
}
status=0
compile test/gpu/specs $OUT_DIR forward || status=1
# The decode suite's specs (test/gpu/decode.py) -> .device/decode.
compile test/gpu/decode_specs .device/decode decode || status=1
# The backward suite's specs (test/gpu/backward.py) -> .device/backward.
compile test/gpu/backward_specs .device/backward backward || status=1
# The dropout suite's specs (test/gpu/dropout.py) -> .device/dropout.
compile test/gpu/dropout_specs .device/dropout dropout || status=1
# The Python package's torch ops (test/gpu/torch_ops.py) -> .device/torch.
compile test/gpu/torch_specs .device/torch torch || status=1
# Run-time inputs (test/gpu/inputs.py) -> .device/inputs.
compile test/gpu/input_specs .device/inputs inputs || status=1
# Packed sequences (test/gpu/varlen.py) -> .device/varlen.
compile test/gpu/varlen_specs .device/varlen varlen || status=1
# ... and one of the torch specs as a CLI bundle with its cubin (the AOT path's loads).
rm -rf .device/torch/bundle
"$FLASHC" test/gpu/torch_specs/tor_gqa_causal_bf16.fa --bundle=.device/torch/bundle ||
  { echo "build-gpu-kernels: the torch bundle FAILED"; status=1; }
# The attention of examples/train_tiny_gpt.py and hf_attention.py -> .device/examples.
mkdir -p .device/examples
for ex in tiny_gpt hf_llama; do
  "$FLASHC" examples/$ex.fa -o .device/examples/$ex.ptx ||
    { echo "build-gpu-kernels: examples/$ex.fa FAILED"; status=1; }
done
# Philox bits (test/gpu/philox_bits.py): the u32 ops' codegen, 7 and 10 rounds.
mkdir -p .device/philox
for r in 7 10; do
  python3 test/codegen/Inputs/philox_tile.py $r > .device/philox/philox_bits_$r.tile &&
    "$FLASHC" .device/philox/philox_bits_$r.tile -emit=ptx --target=sm_90a -o .device/philox/philox_bits_$r.ptx ||
    { echo "build-gpu-kernels: philox_bits_$r FAILED"; status=1; }
done
exit $status
