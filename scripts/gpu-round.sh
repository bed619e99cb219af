#!/bin/bash
# One whole GPU round, on the GPU machine (nvcc, cmake, PyTorch; no LLVM/MLIR):
#   1. builds the runtime alone (cmake -S runtime), with its test program and
#      examples/host_forward
#   2. with --fixture: compiles the naive CUDA test fixture once per spec of
#      test/gpu/specs.py into .device/fixture-ptx and uses that directory
#   3. runs examples/host_forward on one kernel (C host program, CPU check, TFLOP/s)
#   4. runs test/gpu/correctness.py over the PTX directory
#   5. runs test/gpu/backward.py over $BACKWARD_DIR (default .device/backward),
#      and test/gpu/philox_bits.py on .device/philox (u32 codegen vs the host),
#      and test/gpu/dropout.py over .device/dropout (through the runtime),
#      and test/gpu/torch_ops.py over .device/torch (the Python package's ops),
#      and test/gpu/inputs.py and test/gpu/block_lists.py over .device/inputs (run-time
#      inputs, block lists);
#      with TRAIN=1 examples/train_tiny_gpt.py and examples/hf_attention.py
#   6. runs bench/bench.py over $BENCH_DIR (default .device/bench) when both exist
#      (and, with BENCH_BWD=1, bench/bench_bwd.py over .device/bench_bwd;
#      with BENCH_DROPOUT=1, bench/bench_dropout.py over .device/bench_dropout;
#      with BENCH_VARIANTS=1, bench/bench_variants.py over .device/bench_variants)
# and prints a short summary last. Logs and JSON go to $OUT when it is set.
# SUITES=0 skips steps 2-5 and the pass-disabled suites: the benchmarks alone.
#
#   bash scripts/gpu-round.sh [--fixture] [PTX_DIR]     (default .device/ptx)
#
# PTX_DIR is made on the build machine by scripts/build-gpu-kernels.sh and
# travels with the device call's carry: [".device"].
set -u
cd "$(dirname "$0")/.."
FIXTURE=0
PTX_DIR=.device/ptx
for a in "$@"; do
  case "$a" in
    --fixture) FIXTURE=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) PTX_DIR=$a ;;
  esac
done
OUT=${OUT:-$(mktemp -d)}
export OUT PYTHONUNBUFFERED=1
BUILD=build-gpu
declare -a SUMMARY=()
status=0
note() { SUMMARY+=("$1"); }
step() { echo; echo "=== $1"; }

step "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nvcc --version | tail -1

step "build the runtime (runtime only)"
if cmake -S runtime -B $BUILD -DCMAKE_BUILD_TYPE=Release >$OUT/cmake.log 2>&1 &&
   cmake --build $BUILD -j"$(nproc)" >>$OUT/cmake.log 2>&1; then
  note "runtime build: ok"
else
  tail -30 $OUT/cmake.log
  echo "gpu-round: the runtime did not build"; exit 1
fi
$BUILD/test/bin/flashc-rt-test context

# SUITES=0: the benchmarks alone (every correctness suite skipped; each
# benchmark still checks its own rows before timing them).
if [ "${SUITES:-1}" = 1 ]; then
if [ $FIXTURE = 1 ]; then
  step "build the naive test fixtures (nvcc -ptx)"
  PTX_DIR=.device/fixture-ptx
  if python3 test/gpu/fixtures/build_fixtures.py $PTX_DIR; then
    note "fixtures: $(ls $PTX_DIR/*.ptx | wc -l) PTX built"
  else
    note "fixtures: build FAILED"; status=1
  fi
fi
if ! ls $PTX_DIR/*.ptx >/dev/null 2>&1; then
  echo "gpu-round: no PTX in $PTX_DIR (run scripts/build-gpu-kernels.sh here first, carry .device)"
  exit 1
fi

step "runtime loads on the GPU: a cubin + metadata, and refused loads"
T=$BUILD/test/bin/flashc-rt-test
ONE=$(ls $PTX_DIR/*.ptx | head -1)
ptxas --gpu-name sm_90a "$ONE" -o $OUT/one.cubin && grep 'flashc.meta' "$ONE" >$OUT/one.meta &&
  $T load-cubin $OUT/one.cubin $OUT/one.meta && note "cubin load: ok" || { note "cubin load: FAILED"; status=1; }
sed 's/\bld\.global\b/ld.glob4l/' "$ONE" >$OUT/broken.ptx
$T load $OUT/broken.ptx | head -8   # expect FA_ERR_LOAD with the JIT's error log
$T load test/runtime/Inputs/mha_f16_d64_vd32.ptx | head -4
$T load $OUT/one.meta | head -4     # metadata only: no PTX body

step "examples/host_forward"
# One kernel whose mask the C reference knows: prefer the fixture / llama3.
HF_PTX=""
for cand in naive_attention llama3_prefill; do
  [ -f $PTX_DIR/$cand.ptx ] && { HF_PTX=$PTX_DIR/$cand.ptx; break; }
done
[ -z "$HF_PTX" ] && HF_PTX=$(grep -l -E 'flashc.meta mask (none|causal)' $PTX_DIR/*.ptx | head -1)
if [ -n "$HF_PTX" ]; then
  if $BUILD/examples/host_forward $HF_PTX --seed=$RANDOM --batch=2 --sq=1000 --sk=1000 \
       2>&1 | tee $OUT/host_forward.log; then
    note "host_forward $(basename $HF_PTX .ptx): $(grep -o 'PASS\|FAIL' $OUT/host_forward.log | head -1), $(grep -o '[0-9.]* TFLOP/s' $OUT/host_forward.log)"
  else
    note "host_forward $(basename $HF_PTX .ptx): FAILED"; status=1
  fi
else
  note "host_forward: no kernel with mask none/causal"
fi

step "correctness suite"
set -o pipefail
if python3 test/gpu/correctness.py $PTX_DIR --lib $BUILD/libflashc_runtime.so 2>&1 |
     tee $OUT/correctness.log; then
  note "correctness: $(tail -1 $OUT/correctness.log)"
else
  note "correctness: $(tail -1 $OUT/correctness.log) (FAILED)"; status=1
fi

# Decode: the suite over $DECODE_DIR and the benchmark over $DECODE_BENCH_DIR
# (scripts/build-gpu-kernels.sh, build-bench-kernels.sh); with --fixture, the
# naive decode fixture (test/gpu/fixtures/naive_decode.cu) stands in for both.
DECODE_DIR=${DECODE_DIR:-.device/decode}
DECODE_BENCH_DIR=${DECODE_BENCH_DIR:-.device/decode-bench}
if [ $FIXTURE = 1 ]; then
  DECODE_DIR=.device/fixture-decode DECODE_BENCH_DIR=.device/fixture-decode-bench
  python3 test/gpu/fixtures/build_decode_fixtures.py $DECODE_DIR &&
    python3 test/gpu/fixtures/build_decode_fixtures.py --bench $DECODE_BENCH_DIR ||
    { note "decode fixtures: build FAILED"; status=1; }
  DECODE_BENCH_ARGS=${DECODE_BENCH_ARGS:---quick --inner 3 --trials 3}
fi
if ls $DECODE_DIR/*.ptx >/dev/null 2>&1; then
  step "decode correctness suite"
  if python3 test/gpu/decode.py $DECODE_DIR --lib $BUILD/libflashc_runtime.so 2>&1 |
       tee $OUT/decode.log; then
    note "decode: $(tail -1 $OUT/decode.log)"
  else
    note "decode: $(tail -1 $OUT/decode.log) (FAILED)"; status=1
  fi
else
  note "decode: skipped (no PTX in $DECODE_DIR)"
fi
if ls $DECODE_BENCH_DIR/*.ptx >/dev/null 2>&1; then
  step "decode benchmark"
  if python3 bench/decode_bench.py --ptx-dir $DECODE_BENCH_DIR --lib $BUILD/libflashc_runtime.so \
       --json $OUT/decode_bench.json ${DECODE_BENCH_ARGS:-} 2>&1 | tee $OUT/decode_bench.log; then
    note "decode bench: done (table above, $OUT/decode_bench.log)"
  else
    note "decode bench: FAILED"; status=1
  fi
fi

# suite NAME SCRIPT DIR [ARGS...]: a correctness suite (a test/gpu script run
# through the runtime) over the PTX of DIR, its log in $OUT/NAME.log and its
# last line in the summary; skipped when DIR has no PTX.
suite() {
  local name=$1 script=$2 dir=$3
  shift 3
  if ls $dir/*.ptx >/dev/null 2>&1; then
    step "$name correctness suite"
    if python3 $script $dir --lib $BUILD/libflashc_runtime.so "$@" 2>&1 | tee $OUT/$name.log; then
      note "$name: $(tail -1 $OUT/$name.log)"
    else
      note "$name: $(tail -1 $OUT/$name.log) (FAILED)"; status=1
    fi
  else
    note "$name: skipped (no PTX in $dir)"
  fi
}
# Backward and dropout: the suites over $BACKWARD_DIR and $DROPOUT_DIR
# (scripts/build-gpu-kernels.sh).
suite backward test/gpu/backward.py ${BACKWARD_DIR:-.device/backward} ${BACKWARD_ARGS:-}
suite dropout test/gpu/dropout.py ${DROPOUT_DIR:-.device/dropout} ${DROPOUT_ARGS:-}
# The Python package's torch ops (python/flashc, runtime-only: no LLVM/MLIR here).
suite torch_ops test/gpu/torch_ops.py ${TORCH_OPS_DIR:-.device/torch} ${TORCH_OPS_ARGS:-}
# Run-time inputs (input NAME: ...) through the package's ops.
suite inputs test/gpu/inputs.py ${INPUTS_DIR:-.device/inputs} ${INPUTS_ARGS:-}
# Block lists (a mask reading run-time tensors: the classifier kernels' lists,
# built per launch and once, reused; the lists against the host's).
suite block_lists test/gpu/block_lists.py ${INPUTS_DIR:-.device/inputs} ${INPUTS_ARGS:-}
# Packed sequences (varlen = true) through the package's ops.
suite varlen test/gpu/varlen.py ${VARLEN_DIR:-.device/varlen} ${VARLEN_ARGS:-}
# ... and what the kernels receive: a probe module that writes its parameters back.
step "inputs ABI probe"
if FLASHC_LIB_DIR=$BUILD python3 test/python/inputs_gpu.py 2>&1 | tee $OUT/inputs_probe.log; then
  note "inputs_probe: $(tail -1 $OUT/inputs_probe.log)"
else
  note "inputs_probe: $(tail -1 $OUT/inputs_probe.log) (FAILED)"; status=1
fi

# TRAIN=1: examples/train_tiny_gpt.py (flashc vs SDPA loss curves, ~1 minute).
if [ "${TRAIN:-0}" = 1 ] && [ -f .device/examples/tiny_gpt.ptx ]; then
  step "training example"
  if FLASHC_LIB_DIR=$BUILD python3 examples/train_tiny_gpt.py --ptx .device/examples/tiny_gpt.ptx \
       --json $OUT/train_tiny_gpt.json ${TRAIN_ARGS:-} 2>&1 | tee $OUT/train.log; then
    note "train: $(tail -1 $OUT/train.log)"
  else
    note "train: $(tail -1 $OUT/train.log) (FAILED)"; status=1
  fi
  # examples/hf_attention.py: transformers from the wheels scripts/fetch-hf-wheels.sh carried
  if [ -d .device/wheels ] && [ -f .device/examples/hf_llama.ptx ]; then
    step "Hugging Face attention backend"
    HF_SITE=/tmp/flashc-hf-site
    [ -d $HF_SITE ] || pip install -q --no-index --find-links .device/wheels --target $HF_SITE \
      "transformers<5" >$OUT/hf_pip.log 2>&1
    if PYTHONPATH=$HF_SITE FLASHC_LIB_DIR=$BUILD python3 examples/hf_attention.py \
         --ptx .device/examples/hf_llama.ptx 2>&1 | tee $OUT/hf.log; then
      note "hf: $(grep -c PASS $OUT/hf.log) checks passed ($(grep -o 'transformers [0-9.]*' $OUT/hf.log))"
    else
      note "hf: FAILED ($(tail -1 $OUT/hf.log))"; status=1
    fi
  else
    note "hf: skipped (no .device/wheels: scripts/fetch-hf-wheels.sh)"
  fi
fi

# Philox bits (u32 codegen) against the host, 7 and 10 rounds.
if ls .device/philox/*.ptx >/dev/null 2>&1; then
  step "philox bits"
  for r in 7 10; do
    if python3 test/gpu/philox_bits.py .device/philox/philox_bits_$r.ptx --rounds $r 2>&1 |
         tee $OUT/philox_$r.log; then
      note "philox $r rounds: $(tail -1 $OUT/philox_$r.log)"
    else
      note "philox $r rounds: $(tail -1 $OUT/philox_$r.log) (FAILED)"; status=1
    fi
  done
fi
else
  note "suites: skipped (SUITES=0)"
fi

BENCH_DIR=${BENCH_DIR:-.device/bench}
if [ -f bench/bench.py ] && ls $BENCH_DIR/*.ptx >/dev/null 2>&1; then
  step "benchmark"
  # BENCH_ARGS: extra bench.py flags, e.g. "--quick --no-flex".
  if PYTHONUNBUFFERED=1 python3 bench/bench.py --ptx-dir $BENCH_DIR --lib $BUILD/libflashc_runtime.so \
       --json $OUT/bench.json --plot $OUT/bench.png ${BENCH_ARGS:-} 2>&1 | tee $OUT/bench.log; then
    note "bench: done (table above, $OUT/bench.log)"
  else
    note "bench: FAILED"; status=1
  fi
elif [ -f bench/bench.py ]; then
  note "bench: skipped (no PTX in $BENCH_DIR: scripts/build-bench-kernels.sh, carry .device)"
fi

# BENCH_BWD=1: the backward benchmark (bench/bench_bwd.py, 3-5 minutes) over
# $BENCH_BWD_DIR (scripts/build-bench-kernels.sh).
BENCH_BWD_DIR=${BENCH_BWD_DIR:-.device/bench_bwd}
if [ "${BENCH_BWD:-0}" = 1 ] && ls $BENCH_BWD_DIR/*.ptx >/dev/null 2>&1; then
  step "backward benchmark"
  if PYTHONUNBUFFERED=1 python3 bench/bench_bwd.py --ptx-dir $BENCH_BWD_DIR \
       --json $OUT/bench_bwd.json --plot $OUT/bench_bwd.png ${BENCH_BWD_ARGS:-} 2>&1 | tee $OUT/bench_bwd.log; then
    note "bench bwd: $(tail -1 $OUT/bench_bwd.log)"
  else
    note "bench bwd: $(tail -1 $OUT/bench_bwd.log) (FAILED)"; status=1
  fi
fi

# BENCH_DROPOUT=1: the dropout benchmark (bench/bench_dropout.py) over
# .device/bench_dropout (its --write-specs, compiled on the build machine).
if [ "${BENCH_DROPOUT:-0}" = 1 ] && ls .device/bench_dropout/*.ptx >/dev/null 2>&1; then
  step "dropout benchmark"
  if PYTHONUNBUFFERED=1 python3 bench/bench_dropout.py --ptx-dir .device/bench_dropout \
       --lib $BUILD/libflashc_runtime.so --json $OUT/bench_dropout.json 2>&1 | tee $OUT/bench_dropout.log; then
    note "bench dropout: $(tail -1 $OUT/bench_dropout.log)"
  else
    note "bench dropout: $(tail -1 $OUT/bench_dropout.log) (FAILED)"; status=1
  fi
fi

# BENCH_VARLEN=1: packed sequences beside FA2's varlen kernels and Flex
# (bench/bench_varlen.py over .device/bench_varlen).
if [ "${BENCH_VARLEN:-0}" = 1 ] && ls .device/bench_varlen/*.ptx >/dev/null 2>&1; then
  step "varlen benchmark"
  if FLASHC_LIB_DIR=$BUILD python3 bench/bench_varlen.py --ptx-dir .device/bench_varlen \
       --json $OUT/bench_varlen.json ${BENCH_VARLEN_ARGS:-} 2>&1 | tee $OUT/bench_varlen.log; then
    note "bench varlen: $(tail -1 $OUT/bench_varlen.log)"
  else
    note "bench varlen: $(tail -1 $OUT/bench_varlen.log) (FAILED)"; status=1
  fi
fi

# BENCH_VARIANTS=1: the variants benchmark (bench/bench_variants.py, ~1 minute)
# over .device/bench_variants (scripts/build-bench-kernels.sh).
if [ "${BENCH_VARIANTS:-0}" = 1 ] && ls .device/bench_variants/*.ptx >/dev/null 2>&1; then
  step "variants benchmark"
  if PYTHONUNBUFFERED=1 FLASHC_LIB_DIR=$BUILD python3 bench/bench_variants.py \
       --ptx-dir .device/bench_variants --json $OUT/bench_variants.json 2>&1 | tee $OUT/bench_variants.log; then
    note "bench variants: $(tail -1 $OUT/bench_variants.log)"
  else
    note "bench variants: $(tail -1 $OUT/bench_variants.log) (FAILED)"; status=1
  fi
fi

VARIANTS_DIR=${VARIANTS_DIR:-.device/variants}
if [ "${SUITES:-1}" = 1 ] && [ -d "$VARIANTS_DIR" ]; then
  step "correctness with each optional pass disabled (first case of each kernel)"
  for d in "$VARIANTS_DIR"/*/; do
    v=$(basename "$d")
    if python3 test/gpu/correctness.py "$d" --quick --lib $BUILD/libflashc_runtime.so > $OUT/variant-$v.log 2>&1; then
      note "correctness $v: $(tail -1 $OUT/variant-$v.log)"
    else
      note "correctness $v: $(tail -1 $OUT/variant-$v.log) (FAILED)"; status=1
      grep -E "^FAIL" $OUT/variant-$v.log | head -5
    fi
  done
fi

DECODE_VARIANTS_DIR=${DECODE_VARIANTS_DIR:-.device/decode-variants}
if [ "${SUITES:-1}" = 1 ] && [ -d "$DECODE_VARIANTS_DIR" ]; then
  step "decode suite with each optional pass disabled"
  for d in "$DECODE_VARIANTS_DIR"/*/; do
    v=$(basename "$d")
    if python3 test/gpu/decode.py "$d" --lib $BUILD/libflashc_runtime.so > $OUT/decode-variant-$v.log 2>&1; then
      note "decode $v: $(tail -1 $OUT/decode-variant-$v.log)"
    else
      note "decode $v: $(tail -1 $OUT/decode-variant-$v.log) (FAILED)"; status=1
      grep -E "^FAIL" $OUT/decode-variant-$v.log | head -5
    fi
  done
fi

ABLATION_DIR=${ABLATION_DIR:-.device/ablation}
if [ "${ABLATION:-0}" = 1 ] && [ -d "$ABLATION_DIR" ]; then
  step "ablation (-disable-pass, one variant per directory)"
  if PYTHONUNBUFFERED=1 python3 bench/bench.py --ablation $ABLATION_DIR --lib $BUILD/libflashc_runtime.so \
       --json $OUT/ablation.json 2>&1 | tee $OUT/ablation.log; then
    note "ablation: done (table above, $OUT/ablation.log)"
  else
    note "ablation: FAILED"; status=1
  fi
fi

step "summary"
for s in "${SUMMARY[@]}"; do echo "  $s"; done
exit $status
