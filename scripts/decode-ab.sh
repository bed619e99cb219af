#!/bin/bash
# Device side of a decode A/B round: builds the runtime, runs the decode
# correctness suite over $DECODE_DIR (default .device/decode), then times our
# kernels from each PTX directory given (same kernel names, e.g. two builds of
# the decode bench specs) with bench/decode_bench.py --sweep, contiguous and
# paged, in one process. Extra arguments go to decode_bench.py.
#   bash scripts/decode-ab.sh DIR1,DIR2 [--configs "1,32,8,8192"] [--nsplit 0,16]
set -u
cd "$(dirname "$0")/.."
BUILD=build-gpu
export PYTHONUNBUFFERED=1
cmake -S runtime -B $BUILD -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build $BUILD -j"$(nproc)" >/dev/null || { echo "decode-ab: runtime build failed"; exit 1; }
DECODE_DIR=${DECODE_DIR:-.device/decode}
status=0
if [ "$DECODE_DIR" != /none ]; then
  python3 test/gpu/decode.py "$DECODE_DIR" --lib $BUILD/libflashc_runtime.so > /tmp/decode-ab-suite.log 2>&1 || status=1
  grep -E "^FAIL" /tmp/decode-ab-suite.log | head -20
  echo "decode-ab suite ($DECODE_DIR): $(tail -1 /tmp/decode-ab-suite.log)"
fi
dirs=$1; shift
python3 bench/decode_bench.py --sweep "$dirs" --sweep-paged --lib $BUILD/libflashc_runtime.so "$@" || status=1
exit $status
