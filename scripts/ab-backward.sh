#!/bin/sh
# GPU machine: an A/B of two builds of the backward bench's modules, e.g. a
# pass on and off (here: build/tools/flashc SPEC -disable-pass=X into DIR_A,
# the default into DIR_B, from .device/bench_bwd/specs). Runs
# bench/profile_bwd.py on each module of DIR_A and the same-named one of
# DIR_B, alternating ROUNDS times, and prints every launch's median of REPS
# (ms: pre + kernels + post, atomic and deterministic launches):
#   sh scripts/ab-backward.sh DIR_A DIR_B [ROUNDS=2] [REPS=15] [SEQLEN=8192]
# profile_bwd.py does not check results: the GPU suites do.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,9p' "$0"; exit 2; }
A=$1; B=$2; ROUNDS=${3:-2}; REPS=${4:-15}; SEQLEN=${5:-8192}
LOG=$(mktemp)
r=1
while [ "$r" -le "$ROUNDS" ]; do
  for ptx in "$A"/*.ptx; do
    name=$(basename "$ptx")
    for dir in "$A" "$B"; do
      python3 bench/profile_bwd.py --ptx "$dir/$name" --reps "$REPS" --seqlen "$SEQLEN" |
        sed "s|^|$dir $r |" >> "$LOG"
    done
  done
  r=$((r + 1))
done
# lines: DIR ROUND NAME S=.. B=.. LABEL: MS ms -> a median per (name, label, dir, round)
python3 - "$LOG" "$A" "$B" <<'EOF'
import statistics, sys
from collections import defaultdict
log, a, b = sys.argv[1:4]
t = defaultdict(list)
for line in open(log):
    d, rnd, name, _, _, label, ms, _ = line.split()
    t[(name, label.rstrip(":"), d, rnd)].append(float(ms))
rounds = sorted({k[3] for k in t})
print(f"{'module':34s} {'launch':13s} | {a} (ms, a round each) | {b} | b/a")
for name, label in sorted({(k[0], k[1]) for k in t}):
    ma = [statistics.median(t[(name, label, a, r)]) for r in rounds]
    mb = [statistics.median(t[(name, label, b, r)]) for r in rounds]
    print(f"{name:34s} {label:13s} | {', '.join(f'{x:.3f}' for x in ma)} | "
          f"{', '.join(f'{x:.3f}' for x in mb)} | {statistics.median(mb) / statistics.median(ma):.3f}")
EOF
rm -f "$LOG"
