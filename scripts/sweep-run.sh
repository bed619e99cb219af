#!/bin/bash
# Device side of scripts/sweep-schedules.sh: builds the runtime, then runs
# bench/bench.py (peers in the same process) over every .device/sweep/GROUP/NAME,
# filtered by GROUP (a kernel-name substring), and prints the rows per schedule.
#   bash scripts/sweep-run.sh [extra bench.py flags]     (default --no-flex)
set -u
cd "$(dirname "$0")/.."
BUILD=build-gpu
cmake -S runtime -B $BUILD -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build $BUILD -j"$(nproc)" >/dev/null || { echo "sweep-run: runtime build failed"; exit 1; }
for g in .device/sweep/*/; do
  group=$(basename "$g")
  for d in "$g"*/; do
    echo "## $group $(basename "$d")"
    python3 bench/bench.py --ptx-dir "$d" --only "$group" --lib $BUILD/libflashc_runtime.so \
      ${@:---no-flex} 2>&1 | grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ |rows NaN'
  done
done
