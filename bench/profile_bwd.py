#!/usr/bin/env python3
"""One launch of each backward kernel of a bench module, for a profiler.

    ncu --clock-control none --kernel-name regex:_bwd python3 bench/profile_bwd.py \\
        --ptx .device/bench_bwd/bwd_d128_h16_kv16_full_bf16.ptx --seqlen 8192

The module's forward makes O and LSE; then the atomic launch (pre, bwd, post)
and the deterministic one (pre, bwd_kv, bwd_q) run once each after one untimed
warm-up of both, so a profiler that captures by kernel name sees one launch of
every backward kernel (the warm-up launches are skipped with --launch-skip 5 or
--launch-skip-before-match; or use -c with a regex per kernel). Prints each
launch's time (CUDA events) too, so it is useful without a profiler. Batch is
16384 / seqlen, as in bench_bwd.py's grid; heads, head dim, GQA and causality
come from the module's metadata.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "gpu"))

from ptx_launch import Driver, Kernels  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptx", required=True)
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=1, help="timed launches of each kind after the warm-up")
    args = ap.parse_args()
    name = os.path.basename(args.ptx)[:-4]
    drv = Driver()
    K = Kernels(drv, args.ptx, name)
    m = K.meta[name]
    H, Hk, D = int(m["heads"]), int(m["kv_heads"]), int(m["head_dim"])
    S = args.seqlen
    B = max(1, 16384 // S)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    q = torch.randn(B, S, H, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(B, S, Hk, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(B, S, Hk, D, device=dev, dtype=torch.bfloat16)
    do = torch.randn(B, S, H, D, device=dev, dtype=torch.bfloat16)
    o = torch.empty_like(q)
    lse = torch.empty((B, H, S), device=dev, dtype=torch.float32)
    K.forward_launch(q, k, v, o, lse, B, S, S)()
    dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
    delta = torch.empty((B, H, S), device=dev, dtype=torch.float32)
    dq_acc = torch.empty((B, S, H, D), device=dev, dtype=torch.float32)
    t = (q, k, v, o, lse, do, dq, dk, dv, delta, dq_acc)
    launches = {"atomic": K.backward_launch(t, B, S, S, False),
                "deterministic": K.backward_launch(t, B, S, S, True)}
    for go in launches.values():
        go()
    torch.cuda.synchronize()
    for label, go in launches.items():
        for _ in range(args.reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            go()
            e1.record()
            torch.cuda.synchronize()
            print(f"{name} S={S} B={B} {label}: {e0.elapsed_time(e1):.3f} ms")


if __name__ == "__main__":
    main()
