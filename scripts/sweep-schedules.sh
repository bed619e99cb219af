#!/bin/sh
# Build machine: the benchmark specs (bench/configs.py) whose names contain
# FILTER, compiled once per schedule, each into .device/sweep/FILTER/NAME, so
# one device call (scripts/sweep-run.sh) can time them all beside the peers:
#   sh scripts/sweep-schedules.sh FILTER NAME=TQ,TKV,WARPS,STAGES ...
#   sh scripts/sweep-schedules.sh FILTER NAME='{ FIELDS }' ...   (a schedule's body as is:
#      base='{ }' persist='{ persistent = 1; }' times the persistent forward)
# A schedule block appended to the spec is taken as given (passes/tiling.c),
# so this measures exactly the named shapes.
set -e
FLASHC=${FLASHC:-build/tools/flashc}
FILTER=$1
shift
SPECS=$(mktemp -d)
mkdir -p "$SPECS/sched"
python3 bench/configs.py --write-specs "$SPECS" >/dev/null
rm -rf .device/sweep/$FILTER
for sched in "$@"; do
  name=${sched%%=*}
  body=${sched#*=}
  mkdir -p .device/sweep/$FILTER/$name
  case $body in
  "{"*) what=$body ;;
  *)
    set -- $(echo "$body" | tr ',' ' ')
    body="{ tile q = $1, kv = $2; warps = $3; stages = $4; }"
    what="$1 x $2, $3 warps, $4 stages"
    ;;
  esac
  for spec in "$SPECS"/*"$FILTER"*.fa; do
    k=$(basename "$spec" .fa)
    { cat "$spec"; printf 'schedule %s %s\n' "$k" "$body"; } >"$SPECS/sched/$k.fa"
    "$FLASHC" -emit=ptx --target=sm_90a -o .device/sweep/$FILTER/$name/$k.ptx "$SPECS/sched/$k.fa"
  done
  echo "sweep: $name ($what): $(ls .device/sweep/$FILTER/$name | wc -l) PTX"
done
rm -rf "$SPECS"
