#!/bin/sh
# Builds, HERE, the A/B of the atomic launch's kernel (main) at d128
# (passes/group_dq.c, docs/perf-log.md P94) from the bench's backward specs
# (.device/bench_bwd/specs, scripts/build-bench-kernels.sh):
#   .device/dq_base     -disable-pass=group-dq (64-key tiles, dQ in two
#                       64-column chunks, 4 warps)
#   .device/dq_cols     group-dq without the producer warpgroup on main
#                       (-disable-pass=warp-specialize: only the atomic
#                       launch's columns compare)
#   .device/dq_cols_ws  the default: group-dq and a producer on main
# Then on the GPU machine (bench_bwd checks every launch it times):
#   SUITES=0 bash scripts/train-ab.sh .device/dq_base,.device/dq_cols,.device/dq_cols_ws --only d128
set -eu
cd "$(dirname "$0")/.."
F=${BUILD:-build}/tools/flashc
# build DIR [flashc flags...]
build() {
  dir=$1; shift
  rm -rf "$dir"; mkdir -p "$dir"
  for s in .device/bench_bwd/specs/bwd_d128*.fa; do
    "$F" "$s" -emit=ptx --target=sm_90a "$@" -o "$dir/$(basename "$s" .fa).ptx"
  done
  echo "$dir: $(ls "$dir" | wc -l) PTX"
}
build .device/dq_base -disable-pass=group-dq
build .device/dq_cols -disable-pass=warp-specialize
build .device/dq_cols_ws
