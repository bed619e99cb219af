#!/usr/bin/env python3
"""The top instructions of an ncu source page (scripts/ncu-sass.sh): samples,
executions and the two largest stall reasons each, and the stall reasons of
the warps after the role split (the first setmaxnreg increase: a
warp-specialized kernel's consumers) against the whole.

    python3 scripts/ncu_top.py sass.csv [N]
"""
import csv
import sys


def main():
    rows = list(csv.reader(open(sys.argv[1])))
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    hdr = rows[1]
    idx = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[2:] if len(r) == len(hdr)]
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]

    def num(r, k):
        v = r[idx[k]]
        return int(v) if v.isdigit() else 0

    def addr(r):
        return int(r[0], 16)

    total = sum(num(r, "Warp Stall Sampling (All Samples)") for r in data)
    split = next((addr(r) for r in data if "USETMAXREG.TRY_ALLOC" in r[1]), None)
    print(f"samples {total}" + (f", consumers from +{split - addr(data[0]):05x}" if split else ""))
    top = sorted(data, key=lambda r: -num(r, "Warp Stall Sampling (All Samples)"))[:n]
    for r in top:
        rs = sorted(((num(r, k), k[6:]) for k in reasons), reverse=True)[:2]
        why = ", ".join(f"{k} {v}" for v, k in rs if v)
        print(f"  +{addr(r) - addr(data[0]):05x} {num(r, 'Warp Stall Sampling (All Samples)'):8d} "
              f"{num(r, 'Instructions Executed'):10d}  {r[1].strip()[:64]:64s} {why}")
    for name, keep in (("all", lambda r: True), ("consumers", lambda r: split and addr(r) >= split)):
        if name == "consumers" and not split:
            continue
        tot = {k: 0 for k in reasons}
        for r in data:
            if keep(r):
                for k in reasons:
                    tot[k] += num(r, k)
        s = sum(tot.values()) or 1
        print(f"{name}: " + ", ".join(f"{k[6:]} {100 * v / s:.1f}%"
                                      for k, v in sorted(tot.items(), key=lambda x: -x[1])[:8]))


if __name__ == "__main__":
    main()
