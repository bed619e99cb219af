#!/usr/bin/env python3
"""The SASS instruction mix of a kernel's loops (cuobjdump: the GPU machine's, or here
after scripts/fetch-sass-tools.sh).

    python3 scripts/sass-loops.py FILE.ptx KERNEL [KERNEL...] [--top 3] [--per N]

Assembles FILE.ptx for sm_90a, disassembles each KERNEL and finds its loops
(a branch to a lower address: the instructions from there to the
branch); prints the largest --top loops with their instruction count and
opcode histogram, and with --per N the counts divided by N (the elements a
thread holds per step: instructions an element). Whole-kernel histograms
(scripts/sass-report.sh) mix the prologue, the epilogue and the producer's
code into what the consumer's loop issues per step.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def functions(sass):
    """{name: [lines]} from cuobjdump -sass output."""
    out, name = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name:
            out[name].append(line)
    return out


def loops(lines):
    """[(start, end, [opcodes])] for each backward branch (BRA to a lower
    address), by instruction index."""
    insns, index = [], {}
    for line in lines:
        m = INSN.match(line)
        if m:
            index[int(m.group(1), 16)] = len(insns)
            insns.append((m.group(3), m.group(4)))
    found = []
    for i, (op, rest) in enumerate(insns):
        t = re.match(r"\s*(0x[0-9a-f]+)", rest)
        if op.startswith("BRA") and t and index.get(int(t.group(1), 16), i + 1) <= i:
            s = index[int(t.group(1), 16)]
            found.append((s, i, [o for o, _ in insns[s:i + 1]]))
    return len(insns), found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx")
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--per", type=float, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "k.cubin")
        subprocess.run(["ptxas", "--gpu-name", "sm_90a", a.ptx, "-o", cubin], check=True)
        sass = subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True,
                              text=True).stdout
    funcs = functions(sass)
    for k in a.kernels:
        if k not in funcs:
            sys.exit(f"sass-loops: no kernel {k} in {a.ptx} (has {', '.join(sorted(funcs))})")
        total, found = loops(funcs[k])
        print(f"{k}: {total} instructions, {len(found)} loops")
        for s, e, ops in sorted(found, key=lambda x: -len(x[2]))[:a.top]:
            hist = collections.Counter(o.split(".")[0] for o in ops)
            per = f" ({len(ops) / a.per:.2f} per element)" if a.per else ""
            print(f"  loop [{s}, {e}]: {len(ops)} instructions{per}")
            for op, n in hist.most_common(18):
                extra = f" {n / a.per:6.2f}" if a.per else ""
                print(f"    {n:5d}{extra} {op}")


if __name__ == "__main__":
    main()
