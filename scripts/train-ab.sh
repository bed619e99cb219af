#!/bin/bash
# Device side of a training-kernel A/B round (perf-log.md P87, P88 were done
# by hand this way): builds the runtime, runs test/gpu/backward.py and
# test/gpu/dropout.py on .device/backward and .device/dropout (SUITES=0
# skips them), then times the kernels of each PTX directory given (builds of
# the same specs: bench_bwd modules, or bench_dropout's) in alternating
# processes, ROUNDS times (default 2), and prints one line a row with every
# round's TFLOP/s of each directory side by side, so the noise between
# processes shows beside the difference. bench/bench_bwd.py runs with
# --mode bwd --no-peers (columns: default launch, atomic launch),
# bench/bench_dropout.py with --no-peers (its fwd and fwd+bwd TFLOP/s);
# extra arguments go to the bench (e.g. --only d128 --seqlen 8192).
#   bash scripts/train-ab.sh DIR1,DIR2[,...] [bench args...]
# Logs go to $OUT/ab when OUT is set. The table alone, from earlier logs:
#   bash scripts/train-ab.sh --table LOG...   (names TAG.ROUND.log)
set -u
cd "$(dirname "$0")/.."

# The table: rows keyed by the bench's own row text, a column per
# directory, every round's numbers in order.
table() {
  python3 - "$@" <<'EOF'
import os, re, sys
from collections import OrderedDict
rows = OrderedDict()   # row -> {tag: [values per round]}
tags = []
for path in sys.argv[1:]:
    base = os.path.basename(path)
    m = re.match(r"(.+)\.(\d+)\.log$", base)
    tag = m.group(1) if m else base
    if tag not in tags:
        tags.append(tag)
    row, in_bwd = None, False
    for line in open(path, errors="replace"):
        if line.startswith(("bwd, TFLOP", "fwdbwd, TFLOP", "peak memory")):
            in_bwd = line.startswith("bwd, TFLOP")   # the memory table's rows look alike
            continue
        b = in_bwd and re.match(r"^\s*(\d+)\s+\d+\s+(\d+)\s+(\d+)\s+(True|False)\s+(\d+)\s*\|\s*([\d.]+)\s+([\d.]+)", line)
        if b:   # bench_bwd: D B H Hkv causal S | default atomic ...
            d, h, hk, causal, s, det, at = b.groups()
            key = f"bwd d{d} h{h}/{hk} {'causal' if causal == 'True' else 'full'} {s}"
            rows.setdefault(key, {}).setdefault(tag, []).append(f"{det}/{at}")
            continue
        n = re.match(r"^(\S+)\s+check (ok|WRONG)", line)
        if n:   # bench_dropout: NAME check ..., then "  flashc MODE p=P  VALUE"
            row = n.group(1)
            continue
        v = re.match(r"^\s+flashc (\S+) (p=\S+)\s+([\d.]+)", line)
        if v and row:
            key = f"{row} {v.group(1)} {v.group(2)}"
            rows.setdefault(key, {}).setdefault(tag, []).append(v.group(3))
if not rows:
    sys.exit("train-ab: no bench rows in " + " ".join(sys.argv[1:]))
w = max(len(k) for k in rows)
print(f"{'row':{w}} | " + " | ".join(tags) + "   (bench_bwd: default/atomic; every round)")
for key, cols in rows.items():
    print(f"{key:{w}} | " + " | ".join(" ".join(cols.get(t, ["-"])) for t in tags))
EOF
}

if [ "${1:-}" = --table ]; then
  shift
  table "$@"
  exit $?
fi
dirs=${1:?usage: train-ab.sh DIR1,DIR2[,...] [bench args...]}
shift
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT/ab"
export PYTHONUNBUFFERED=1
BUILD=build-gpu
cmake -S runtime -B $BUILD -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build $BUILD -j"$(nproc)" >/dev/null || { echo "train-ab: runtime build failed"; exit 1; }
status=0
if [ "${SUITES:-1}" != 0 ]; then
  for s in backward dropout; do
    python3 test/gpu/$s.py .device/$s --lib $BUILD/libflashc_runtime.so > "$OUT/ab/suite_$s.log" 2>&1 || status=1
    grep -E "^FAIL" "$OUT/ab/suite_$s.log" | head -10
    echo "train-ab suite $s: $(tail -1 "$OUT/ab/suite_$s.log")"
  done
fi
logs=()
for r in $(seq 1 "${ROUNDS:-2}"); do
  for d in ${dirs//,/ }; do
    tag=$(echo "$d" | sed 's|^\.device/||; s|/$||; s|/|_|g')
    log="$OUT/ab/$tag.$r.log"
    if ls "$d"/bwd_*.ptx >/dev/null 2>&1; then
      python3 bench/bench_bwd.py --ptx-dir "$d" --mode bwd --no-peers "$@" > "$log" 2>&1 || status=1
    else
      python3 bench/bench_dropout.py --ptx-dir "$d" --lib $BUILD/libflashc_runtime.so --no-peers "$@" \
        > "$log" 2>&1 || status=1
    fi
    logs+=("$log")
  done
done
table "${logs[@]}" || status=1
exit $status
