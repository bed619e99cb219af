#!/bin/sh
# Build machine: compile every benchmark spec (bench/configs.py) to PTX in
# .device/bench, timing flashc from spec to PTX. Extra flashc flags (e.g.
# -disable-pass=mask-skip) may be given; they go into every compile.
# Also: the decode benchmark's kernels -> .device/decode-bench, and the
# backward benchmark's (bench/bench_bwd.py: grad = true specs, one module per
# kernel with the forward and its _bwd_* kernels) -> .device/bench_bwd, once
# more with -mma=sync -> .device/bench_bwd/mma-sync, the causal ones with
# -disable-pass=mask-skip -> .device/bench_bwd/no-mask-skip; the variants benchmark's
# (bench/bench_variants.py) -> .device/bench_variants; the varlen benchmark's
# (bench/bench_varlen.py) -> .device/bench_varlen; the dropout benchmark's
# (bench/bench_dropout.py) -> .device/bench_dropout.
set -e
FLASHC=${FLASHC:-build/tools/flashc}
OUT=${OUT_DIR:-.device/bench}
mkdir -p "$OUT/specs"
python3 bench/configs.py --write-specs "$OUT/specs" >/dev/null
echo "{" > "$OUT/compile_times.json"
first=1
for spec in "$OUT"/specs/*.fa; do
  name=$(basename "$spec" .fa)
  t0=$(date +%s%N)
  "$FLASHC" "$spec" -emit=ptx --target=sm_90a "$@" -o "$OUT/$name.ptx"
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  [ $first = 1 ] || echo "," >> "$OUT/compile_times.json"
  first=0
  printf '  "%s": %s' "$name" "$ms" >> "$OUT/compile_times.json"
  echo "$name: $ms ms"
done
echo "}" >> "$OUT/compile_times.json"
# The decode benchmark's kernels (bench/decode_bench.py) -> .device/decode-bench.
DOUT=${DECODE_OUT_DIR:-.device/decode-bench}
mkdir -p "$DOUT/specs"
python3 bench/decode_bench.py --write-specs "$DOUT/specs" >/dev/null
for spec in "$DOUT"/specs/*.fa; do
  "$FLASHC" "$spec" -emit=ptx --target=sm_90a "$@" -o "$DOUT/$(basename "$spec" .fa).ptx"
done
echo "decode bench: $(ls "$DOUT"/*.ptx | wc -l) PTX in $DOUT"
# The backward benchmark's kernels (bench/bench_bwd.py) -> .device/bench_bwd.
BOUT=${BWD_OUT_DIR:-.device/bench_bwd}
mkdir -p "$BOUT/specs" "$BOUT/no-mask-skip" "$BOUT/mma-sync"
python3 bench/configs.py --write-bwd-specs "$BOUT/specs" >/dev/null
echo "{" > "$BOUT/compile_times.json"
first=1
for spec in "$BOUT"/specs/*.fa; do
  name=$(basename "$spec" .fa)
  t0=$(date +%s%N)
  "$FLASHC" "$spec" -emit=ptx --target=sm_90a "$@" -o "$BOUT/$name.ptx"
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  [ $first = 1 ] || echo "," >> "$BOUT/compile_times.json"
  first=0
  printf '  "%s": %s' "$name" "$ms" >> "$BOUT/compile_times.json"
  echo "$name (forward + backward): $ms ms"
  "$FLASHC" "$spec" -emit=ptx --target=sm_90a "$@" -mma=sync -o "$BOUT/mma-sync/$name.ptx"
  case "$name" in
    *_causal_*) "$FLASHC" "$spec" -emit=ptx --target=sm_90a "$@" -disable-pass=mask-skip \
                  -o "$BOUT/no-mask-skip/$name.ptx" ;;
  esac
done
echo "}" >> "$BOUT/compile_times.json"
echo "backward bench: $(ls "$BOUT"/*.ptx | wc -l) PTX (+ $(ls "$BOUT"/mma-sync/*.ptx | wc -l) on mma.sync, $(ls "$BOUT"/no-mask-skip/*.ptx | wc -l) without mask-skip) in $BOUT, $(du -sh "$BOUT" | cut -f1)"
# The variants benchmark's kernels (bench/bench_variants.py) -> .device/bench_variants.
FLASHC=$FLASHC sh scripts/build-variants-bench.sh "${VARIANTS_OUT_DIR:-.device/bench_variants}" "$@"
# A benchmark script's specs (its --write-specs) compiled in place:
#   bench_dir WHAT SCRIPT DIR [flashc flags]
bench_dir() {
  what=$1 script=$2 dir=$3
  shift 3
  python3 "$script" --write-specs "$dir" >/dev/null
  for spec in "$dir"/*.fa; do
    "$FLASHC" "$spec" -emit=ptx --target=sm_90a "$@" -o "$dir/$(basename "$spec" .fa).ptx"
  done
  echo "$what bench: $(ls "$dir"/*.ptx | wc -l) PTX in $dir"
}
# The varlen benchmark's kernels (bench/bench_varlen.py) -> .device/bench_varlen.
bench_dir varlen bench/bench_varlen.py "${VARLEN_OUT_DIR:-.device/bench_varlen}" "$@"
# The dropout benchmark's kernels (bench/bench_dropout.py) -> .device/bench_dropout:
# each row's dropout module and, for the exact rows, its spec without dropout.
bench_dir dropout bench/bench_dropout.py "${DROPOUT_OUT_DIR:-.device/bench_dropout}" "$@"
