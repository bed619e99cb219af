#!/bin/bash
# compute-sanitizer over a reduced forward and decode grid, on the GPU machine:
# memcheck (out-of-bounds and misaligned accesses, global and shared), racecheck
# (shared-memory hazards), synccheck (barrier misuse) and initcheck (reads of
# uninitialized global memory), each over
#   - test/gpu/correctness.py --small: every forward kernel of PTX_DIR, two
#     short launches (partial tiles, fully masked rows, a strided layout) and
#     the refused launches;
#   - test/gpu/decode.py --small: every decode kernel of DECODE_DIR, up to
#     three short caches plus a batch-1 8k cache (the small-batch variant).
# A tool that reports any error fails the script; the summary says which.
# Run it again for every new kernel kind (issue 15).
#
#   bash scripts/gpu-sanitize.sh [PTX_DIR] [DECODE_DIR]   (default .device/ptx .device/decode)
#   TOOLS="memcheck racecheck" ONLY=kernel1,kernel2 bash scripts/gpu-sanitize.sh
#
# Needs the runtime built by scripts/gpu-round.sh (build-gpu/) or builds it.
set -u
cd "$(dirname "$0")/.."
PTX_DIR=${1:-.device/ptx}
DECODE_DIR=${2:-.device/decode}
TOOLS=${TOOLS:-memcheck racecheck synccheck initcheck}
OUT=${OUT:-$(mktemp -d)}
BUILD=build-gpu
export PYTHONUNBUFFERED=1
if [ ! -f $BUILD/libflashc_runtime.so ]; then
  cmake -S runtime -B $BUILD -DCMAKE_BUILD_TYPE=Release >$OUT/cmake.log 2>&1 &&
    cmake --build $BUILD -j"$(nproc)" >>$OUT/cmake.log 2>&1 ||
    { tail -20 $OUT/cmake.log; echo "gpu-sanitize: the runtime did not build"; exit 1; }
fi
LIB=$BUILD/libflashc_runtime.so
ONLY_ARG=${ONLY:+--only $ONLY}
SAN=(compute-sanitizer --error-exitcode 86 --print-limit 20)
compute-sanitizer --version | tail -1
status=0
declare -a SUMMARY=()
run() { # tool label log command...
  local tool=$1 label=$2 log=$3
  shift 3
  local t0=$SECONDS
  "${SAN[@]}" --tool "$tool" "$@" >"$log" 2>&1
  local rc=$?
  local errors
  errors=$(grep -E -m1 'ERROR SUMMARY: [0-9]+ error' "$log" | grep -oE '[0-9]+ error' || echo "? error")
  local suite
  suite=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    SUMMARY+=("$tool $label: clean ($errors(s); $suite; $((SECONDS - t0)) s)")
  else
    SUMMARY+=("$tool $label: FAILED rc=$rc ($errors(s); $suite; $((SECONDS - t0)) s)")
    status=1
    grep -E -m20 '=========' "$log" | head -40
  fi
}
# The negative control: a launch that writes out of bounds on purpose must
# be reported, or the sanitizer is not seeing flashc's kernels.
ONE=$(ls $PTX_DIR/*.ptx 2>/dev/null | head -1)
if [ -n "$ONE" ]; then
  echo "=== memcheck: negative control ($(basename $ONE .ptx))"
  "${SAN[@]}" --tool memcheck python3 test/gpu/sanitize_control.py $ONE --lib $LIB \
    >$OUT/san-control.log 2>&1
  if grep -q 'Invalid __global__ write' $OUT/san-control.log; then
    SUMMARY+=("memcheck negative control: reported, as it must ($(grep -oE 'ERROR SUMMARY: [0-9]+ error' $OUT/san-control.log | head -1))")
  else
    SUMMARY+=("memcheck negative control: NOT reported: the sanitizer does not see the kernels")
    status=1
    tail -20 $OUT/san-control.log
  fi
fi
for tool in $TOOLS; do
  # initcheck reads the suites' poisoned outputs as initialized (they are
  # written by torch.full), so it checks what the kernels read.
  extra=()
  [ "$tool" = racecheck ] && extra=(--racecheck-report hazard)
  if ls $PTX_DIR/*.ptx >/dev/null 2>&1; then
    echo "=== $tool: forward ($PTX_DIR)"
    run $tool forward $OUT/san-$tool-forward.log "${extra[@]}" \
      python3 test/gpu/correctness.py $PTX_DIR --small --lib $LIB $ONLY_ARG
  fi
  if ls $DECODE_DIR/*.ptx >/dev/null 2>&1; then
    echo "=== $tool: decode ($DECODE_DIR)"
    run $tool decode $OUT/san-$tool-decode.log "${extra[@]}" \
      python3 test/gpu/decode.py $DECODE_DIR --small --lib $LIB $ONLY_ARG
  fi
done
echo
echo "=== gpu-sanitize summary"
printf '%s\n' "${SUMMARY[@]}"
exit $status
