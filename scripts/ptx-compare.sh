#!/bin/sh
# ptx-compare.sh BASE_REV [HEAD_REV]: is the PTX of every spec in the repo
# byte-identical when built by flashc at BASE_REV and at HEAD_REV (default
# HEAD)? The proof a refactoring of codegen/ changed nothing it emits.
#
#   scripts/ptx-compare.sh 9a559e2          # base commit vs HEAD
#   scripts/ptx-compare.sh 9a559e2 -        # vs the working tree's build ($BUILD, default build)
#
# Each revision's flashc is built from `git read-tree` of that commit into one
# incremental source tree (only the files that differ get rewritten, so the
# next build recompiles only those) and cached per commit hash; the base's
# outputs are cached too. Inputs, all taken from this checkout so both sides
# compile the same specs: examples/*.fa, every .fa under test/ (specs that
# fail to compile are compared by their error text), the GPU suites'
# test/gpu/specs and test/gpu/decode_specs, those two with `stages = 3`
# (scripts/build-variant-kernels.sh), and the benchmark specs
# (bench/configs.py, bench/decode_bench.py --write-specs). A file of several
# kernels is compiled once per kernel (--kernel=NAME). Flag sets: the
# default (sm_90a), --target=sm_80, -mma=sync (forward kernels),
# -decode-combine=separate (decode kernels), and -disable-pass=P for every
# optional pass (decode-only passes on decode kernels only).
#
# Prints `identical: N files, M flag sets` and exits 0, or lists the differing
# outputs and exits 1 (2: a build failed). Environment: JOBS (parallel
# compiles, default 2), PTX_COMPARE_CACHE (default $TMPDIR/flashc-ptx-compare),
# BUILD (the build folder for HEAD_REV -, default build), KEEP=1 keeps the
# head outputs in the cache for inspection.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 BASE_REV [HEAD_REV|-]" >&2; exit 2; }
BASE_REV=$1
HEAD_REV=${2:-HEAD}
JOBS=${JOBS:-2}
CACHE=${PTX_COMPARE_CACHE:-${TMPDIR:-/tmp}/flashc-ptx-compare}
BUILD=${BUILD:-build}
mkdir -p "$CACHE/bin" "$CACHE/out"
exec 9>"$CACHE/lock"
flock 9 # one run at a time per cache (they share the incremental tree)

# build_rev REV: prints the path of flashc built at commit REV (cached).
build_rev() {
  hash=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "ptx-compare: no commit $1" >&2; return 2; }
  bin=$CACHE/bin/$hash/flashc
  if [ ! -x "$bin" ]; then
    src=$CACHE/src obj=$CACHE/obj
    mkdir -p "$src"
    # One source tree for every revision: read-tree -u rewrites only the
    # files whose content differs from the last revision built there.
    GIT_INDEX_FILE=$CACHE/src.index git --work-tree="$src" read-tree --reset -u "$hash" >&2
    echo "ptx-compare: building flashc at $(git log -1 --format='%h %s' "$hash" | cut -c1-60)" >&2
    if ! { cmake -S "$src" -B "$obj" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$CACHE/cmake.log" 2>&1 &&
           cmake --build "$obj" --target flashc -j "$JOBS" >"$CACHE/build.log" 2>&1; }; then
      echo "ptx-compare: build at $hash failed, see $CACHE/build.log" >&2
      tail -20 "$CACHE/build.log" >&2
      return 2
    fi
    mkdir -p "$CACHE/bin/$hash"
    cp "$obj/tools/flashc" "$bin.tmp" && mv "$bin.tmp" "$bin"
  fi
  echo "$bin"
}

BASE_FC=$(build_rev "$BASE_REV") || exit 2
BASE_HASH=$(git rev-parse "$BASE_REV^{commit}")
if [ "$HEAD_REV" = - ]; then
  cmake --build "$BUILD" --target flashc -j "$JOBS" >/dev/null || exit 2
  HEAD_FC=$ROOT/$BUILD/tools/flashc
  HEAD_KEY=
else
  HEAD_FC=$(build_rev "$HEAD_REV") || exit 2
  HEAD_KEY=$(git rev-parse "$HEAD_REV^{commit}")
fi

# ------------------------------------------------------------- the inputs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptx-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
SPECS=$WORK/specs
mkdir -p "$SPECS/bench" "$SPECS/decode-bench" "$SPECS/stages3"
python3 bench/configs.py --write-specs "$SPECS/bench" >/dev/null
python3 bench/decode_bench.py --write-specs "$SPECS/decode-bench" >/dev/null
for fa in test/gpu/specs/*.fa test/gpu/decode_specs/*.fa; do
  name=$(awk '/^attention /{print $2; exit}' "$fa")
  d=$SPECS/stages3/$(basename "$(dirname "$fa")")
  mkdir -p "$d"
  { cat "$fa"; printf 'schedule %s { stages = 3; }\n' "$name"; } >"$d/$(basename "$fa")"
done
{
  ls examples/*.fa
  find test -name '*.fa' | sort
  find "$SPECS" -name '*.fa' | sort
} >"$WORK/spec-files"

# Flag sets: NAME FLAGS WHO (all | forward | decode).
PASSES=$("$BASE_FC" --list-passes | awk '!/\(required\)/ {print $1 (/ decode: / ? " decode" : " all")}')
{
  echo "default - all"
  echo "sm_80 --target=sm_80 all"
  echo "mma-sync -mma=sync forward"
  echo "separate-combine -decode-combine=separate decode"
  echo "$PASSES" | while read -r p who; do echo "no-$p -disable-pass=$p $who"; done
} >"$WORK/flagsets"

# The job list: OUT SPEC KERNEL FLAG (one compile each; KERNEL - for a file
# without kernels, whose error is compared under the default flags only).
: >"$WORK/jobs"
while read -r fa; do
  rel=$(echo "$fa" | sed "s|^$SPECS/|gen/|; s|/|_|g; s|\.fa\$||")
  kernels=$("$BASE_FC" -emit=spec "$fa" 2>/dev/null | awk '/^kernel /{print $2}') || true
  modes=$("$BASE_FC" -emit=spec "$fa" 2>/dev/null | awk '/^  mode /{print $2}') || true
  [ -n "$kernels" ] || { kernels=-; modes=forward; }
  set -- $modes
  for k in $kernels; do
    mode=${1:-forward}
    [ $# -gt 0 ] && shift
    while read -r set flag who; do
      case "$who:$mode" in all:* | forward:forward | decode:decode) ;; *) continue ;; esac
      [ "$k" != - ] || [ "$set" = default ] || continue # an error: once is enough
      echo "$set/$rel.$k $fa $k $flag"
    done <"$WORK/flagsets"
  done
done <"$WORK/spec-files" >>"$WORK/jobs"

# run FLASHC OUTDIR: every job into OUTDIR (PTX in .ptx, exit status and
# errors in .err).
run() {
  awk '{print $1}' "$WORK/jobs" | sed 's|/[^/]*$||' | sort -u | (cd "$2" && xargs mkdir -p)
  # shellcheck disable=SC2016
  xargs -P "$JOBS" -L 1 sh -c '
    fc=$0 out=$1 fa=$2 k=$3 flag=$4
    set -- -emit=ptx
    [ "$k" = - ] || set -- "$@" --kernel="$k"
    [ "$flag" = - ] || set -- "$@" "$flag"
    "$fc" "$fa" "$@" -o "$out.ptx" 2>"$out.err"
    echo "rc=$?" >>"$out.err"
    sed -i "s|[^ ]*/ptx-compare\.[A-Za-z0-9]*/specs/|GEN/|g" "$out.err"' "$1" <"$WORK/jobs.$3"
}

# Outputs go to OUT/<flag set>/<spec>.<kernel>.{ptx,err}.
outputs() { # FLASHC KEY OUTDIR
  if [ -n "$2" ] && [ -f "$CACHE/out/$2/.done" ]; then
    echo "$CACHE/out/$2"
    return
  fi
  dir=${2:+$CACHE/out/$2}
  dir=${dir:-$WORK/head}
  rm -rf "$dir"
  mkdir -p "$dir"
  awk -v d="$dir" '{$1 = d "/" $1; print}' "$WORK/jobs" >"$WORK/jobs.$3"
  run "$1" "$dir" "$3"
  touch "$dir/.done"
  echo "$dir"
}

INPUT_KEY=$( (cat "$WORK/jobs"; sed "s|^$SPECS/||" "$WORK/spec-files"; cat $(cat "$WORK/spec-files")) |
  sed "s|$SPECS|GEN|g" | sha256sum | cut -c1-16)
# The base's outputs are cached; the head's only when HEAD_REV is a commit.
BASE_OUT=$(outputs "$BASE_FC" "$BASE_HASH-$INPUT_KEY" base)
HEAD_OUT=$(outputs "$HEAD_FC" "${HEAD_KEY:+$HEAD_KEY-$INPUT_KEY}" head)

# --------------------------------------------------------------- compare
nfiles=$(find "$BASE_OUT" -name '*.ptx' -size +0 | wc -l)
nerr=$(grep -L '^rc=0$' -r "$BASE_OUT" --include='*.err' | wc -l)
nsets=$(awk '{print $1}' "$WORK/jobs" | sed 's|/.*||' | sort -u | wc -l)
if diff -r -q "$BASE_OUT" "$HEAD_OUT" >"$WORK/diff" 2>&1; then
  echo "identical: $nfiles files, $nsets flag sets ($nerr compiles that fail, with identical errors)"
  [ -n "$HEAD_KEY" ] || [ "${KEEP:-0}" != 1 ] || cp -r "$HEAD_OUT" "$CACHE/out/last-head"
  exit 0
fi
echo "ptx-compare: outputs differ from $BASE_REV ($(wc -l <"$WORK/diff") files):"
sed "s|$BASE_OUT/||g; s|$HEAD_OUT/||g" "$WORK/diff" | head -50
rm -rf "$CACHE/out/last-head"
cp -r "$HEAD_OUT" "$CACHE/out/last-head"
echo "ptx-compare: base outputs in $BASE_OUT, head outputs in $CACHE/out/last-head"
exit 1
