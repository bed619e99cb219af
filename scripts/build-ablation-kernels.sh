#!/bin/sh
# Build machine: the ablation kernels (bench/configs.py ablation_grid) once
# with every pass and once per optional pass disabled, one PTX directory per
# variant under .device/ablation (decode-only passes leave forward kernels
# unchanged and are skipped), once on mma.sync instead of wgmma
# (mma-sync), and once per schedule option of the Hopper pipeline
# (docs/language.md: sched-tma0 the producer on cp.async, sched-pingpong1
# the consumer warpgroups taking turns, sched-overlap1 overlap-softmax
# wherever it applies); bench.py --ablation runs them.
set -e
FLASHC=${FLASHC:-build/tools/flashc}
ROOT=${ABLATION_DIR:-.device/ablation}
rm -rf "$ROOT"
mkdir -p "$ROOT/specs"
python3 bench/configs.py --write-ablation-specs "$ROOT/specs" >/dev/null
variants="all-passes mma-sync sched-tma0 sched-pingpong1 sched-overlap1"
for p in $("$FLASHC" --list-passes | awk '!/\(required\)/ && !/ decode: / {print $1}'); do
  variants="$variants no-$p"
done
for v in $variants; do
  mkdir -p "$ROOT/$v"
  flag=""
  case "$v" in
    all-passes) ;;
    mma-sync) flag="-mma=sync" ;;
    sched-*) ;;
    *) flag="-disable-pass=${v#no-}" ;;
  esac
  for spec in "$ROOT"/specs/*.fa; do
    name=$(basename "$spec" .fa)
    src=$spec
    case "$v" in
      sched-*) # the spec with a schedule block setting FIELD = VALUE
        field=${v#sched-}
        src="$ROOT/specs/$name.$v.fa.tmp"
        { cat "$spec"; echo "schedule $name { ${field%?} = ${field#"${field%?}"}; }"; } > "$src" ;;
    esac
    "$FLASHC" "$src" -emit=ptx --target=sm_90a $flag -o "$ROOT/$v/$name.ptx"
  done
  echo "$v: $(ls "$ROOT/$v" | wc -l) PTX"
done
rm -rf "$ROOT/specs"
