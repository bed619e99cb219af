#!/bin/sh
# fuzz-found.sh [BUILD]: replays each known-bug reproducer of test/fuzz/found/
# with its guard lifted (FLASHC_FUZZ_KNOWN_BUGS, test/fuzz/README.md) and
# says whether the bug is still there. Exit status 0 either way.
build=${1:-build}
bin=$build/test/bin
found=$(dirname "$0")/../test/fuzz/found
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
while read -r bug harness file; do
  [ -x "$bin/fuzz_$harness" ] || { echo "$bug: no $bin/fuzz_$harness"; continue; }
  if (cd "$tmp" && FUZZ_SCRATCH=$tmp FLASHC_FUZZ_KNOWN_BUGS=$bug "$OLDPWD/$bin/fuzz_$harness" -timeout=5 \
        "$OLDPWD/$found/$file") >"$tmp/log" 2>&1; then
    echo "$bug: fixed ($file passes; move it into test/fuzz/corpus/$harness, drop the guard)"
  else
    echo "$bug: still there ($file): $(grep -m1 -E 'runtime error|invariant|overlaps|refuses|destroyed|took|ERROR' "$tmp/log" | cut -c1-160)"
  fi
done <<LIST
contiguous launch launch-contiguous-overflow
extent launch launch-extent-overflow
ranges launch launch-ranges-wrap
cli-o cli cli-o-existing
cache-fifo cache cache-fifo
name-length pipeline pipeline-name-length
LIST
