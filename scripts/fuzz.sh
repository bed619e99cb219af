#!/bin/sh
# fuzz.sh BUILD SECONDS JOBS [NAME,NAME...]: `make fuzz`. Runs each libFuzzer
# harness (BUILD/test/bin/fuzz_NAME; all of them by default) for SECONDS from
# its kept corpus (test/fuzz/corpus/NAME), JOBS at a time, through
# test/fuzz/run.sh. New inputs and crash artifacts go to BUILD/fuzz/NAME/
# (new/, art/), logs to BUILD/fuzz/NAME.log. Exits 1 when a harness found
# something (its artifacts are listed). Environment: FUZZ_FLAGS, extra
# libFuzzer flags (test/fuzz/README.md).
# To keep what a run found, minimize it into the corpus:
#   BUILD/test/bin/fuzz_NAME -merge=1 test/fuzz/corpus/NAME BUILD/fuzz/NAME/new
set -u
build=${1:?usage: fuzz.sh BUILD SECONDS JOBS [NAMES]}
secs=${2:-300}
jobs=${3:-2}
names=$(echo "${4:-parser,pipeline,tile,meta,launch,cache,cli}" | tr ',' ' ')
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$build/test/bin" 2>/dev/null && pwd) || {
  echo "fuzz.sh: no $build/test/bin: build first (make build)" >&2
  exit 2
}
out=$(mkdir -p "$build/fuzz" && cd "$build/fuzz" && pwd)
for n in $names; do
  [ -x "$bin/fuzz_$n" ] || { echo "fuzz.sh: no harness $bin/fuzz_$n (clang with libFuzzer?)" >&2; exit 2; }
done
echo "fuzzing $names for $secs s each, $jobs at a time; output in $out"
echo $names | tr ' ' '\n' | PATH="$bin:$PATH" xargs -P "$jobs" -I{} sh -c \
  "rm -rf '$out/{}' && sh '$root/test/fuzz/run.sh' {} $secs '$out/{}' ${FUZZ_FLAGS:-} > '$out/{}.log' 2>&1; \
   echo \"{}: \$(grep -E '^stat::number_of_executed_units' '$out/{}.log' | awk '{print \$2}') runs, \
\$(grep -E '^stat::average_exec_per_sec' '$out/{}.log' | awk '{print \$2}') exec/s, \
\$(ls '$out/{}/new' | wc -l) new inputs, \$(ls '$out/{}/art' | wc -l) artifacts\""
found=0
for n in $names; do
  for a in "$out/$n/art/"*; do
    [ -e "$a" ] || continue
    echo "FOUND ($n): $a (log: $out/$n.log)"
    found=1
  done
done
exit $found
