#!/bin/bash
# Device side: ncu over bench/decode_profile.py (our decode kernels from each
# PTX directory, then cuDNN's and FlashAttention-2's) - duration, DRAM
# throughput, launch shape, occupancy, warp stall reasons per kernel.
#   bash scripts/decode-profile.sh DIR1[,DIR2] "B,H,KH,L;..." [--paged]
set -u
cd "$(dirname "$0")/.."
BUILD=build-gpu
cmake -S runtime -B $BUILD -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build $BUILD -j"$(nproc)" >/dev/null || { echo "decode-profile: runtime build failed"; exit 1; }
OUTF=${OUT:-/tmp}/decode-profile.txt
ncu --clock-control none -k regex:'dec_bench|cudnn|flash|sdpa|fmha' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats \
  --section Occupancy --section WarpStateStats --section SchedulerStats --print-details all \
  --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum \
  python3 bench/decode_profile.py --dirs "$1" --configs "$2" --lib $BUILD/libflashc_runtime.so \
  --runs 1 "${@:3}" > "$OUTF" 2>&1
echo "decode-profile: exit $?, $(wc -l < "$OUTF") lines in $OUTF"
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Registers Per|Grid Size|Block Size|Dynamic Shared|Achieved Occupancy|Theoretical Occ|Warp Cycles Per Issued|Stall|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|dram__bytes_read|lts__t_sectors_src|smsp__inst_executed" "$OUTF" |
  grep -v "^    ---" | head -400
