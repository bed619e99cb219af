#!/bin/sh
# run.sh NAME SECONDS OUTDIR [libFuzzer flags...]: a bounded run of harness
# fuzz_NAME (on PATH) from its kept corpus test/fuzz/corpus/NAME, with the
# flags that suit it (options/NAME.options below). New inputs and crash
# artifacts go to OUTDIR/new and OUTDIR/art, never into the source tree.
# Used by the lit tests (fuzz_*.test) and by scripts/fuzz.sh (`make fuzz`).
set -e
name=$1 secs=$2 out=$3
shift 3
here=$(dirname "$0")
mkdir -p "$out/new" "$out/art"
case $name in
  parser)   flags="-max_len=4096 -dict=$here/spec.dict" ;;
  # a grad spec's modules go through LLVM whole (sanitized: the corpus's
  # d256 one takes ~10 s, libFuzzer's default slow-unit mark)
  pipeline) flags="-max_len=4096 -dict=$here/spec.dict -timeout=60 -report_slow_units=40" ;;
  tile)     flags="-max_len=8192 -dict=$here/tile.dict" ;;
  meta)     flags="-max_len=4096 -dict=$here/meta.dict" ;;
  launch)   flags="-max_len=512" ;;
  cache)    flags="-max_len=65536" ;;
  cli)      flags="-max_len=2048 -dict=$here/cli.dict -timeout=60" ;;
  *) echo "run.sh: no harness '$name'" >&2; exit 2 ;;
esac
exec "fuzz_$name" "$out/new" "$here/corpus/$name" -timeout=20 $flags \
  -max_total_time="$secs" -rss_limit_mb=4096 -artifact_prefix="$out/art/" \
  -print_final_stats=1 "$@"
