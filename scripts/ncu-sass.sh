#!/bin/bash
# Where one kernel's warps wait, instruction by instruction (perf-log P109), on
# the GPU machine: ncu samples the warps' stall reasons of one launch of each
# kernel whose name matches REGEX while CMD runs, and scripts/ncu_top.py
# prints the top instructions of the SASS with their reasons.
#
#   bash scripts/ncu-sass.sh REGEX OUTDIR CMD...
#   e.g. bash scripts/ncu-sass.sh '_bwd$' $OUT/bwd python3 bench/bench_bwd.py \
#          --ptx-dir .device/bench_bwd --only bwd_d128_h16_kv16_full --seqlen 8192 \
#          --mode bwd --no-flex --no-peers --reps 20 --target-ms 20
#
# Writes OUTDIR/rep.ncu-rep, OUTDIR/sass.csv (ncu's source page) and
# OUTDIR/details.txt; skips the first SKIP (default 6) matching launches (warm-up).
set -u
regex=$1 out=$2
shift 2
mkdir -p "$out"
ncu --clock-control none --kernel-name "regex:$regex" --launch-skip "${SKIP:-6}" --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy \
    -o "$out/rep" "$@" > "$out/ncu.log" 2>&1 || { tail -5 "$out/ncu.log"; exit 1; }
ncu -i "$out/rep.ncu-rep" --page source --csv --print-source sass > "$out/sass.csv" 2>&1
ncu -i "$out/rep.ncu-rep" --page details > "$out/details.txt" 2>&1
grep -E "^  [a-z_0-9]+ \(|Duration|Compute \(SM\) Throughput|highest-utilized|Spilling Requests  " \
    "$out/details.txt"
python3 "$(dirname "$0")/ncu_top.py" "$out/sass.csv"
