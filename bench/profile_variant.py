#!/usr/bin/env python3
"""Where one variant's fwd+bwd spends its GPU time: kernel by kernel, flashc's op
(autograd, as bench_variants.py times it) beside FlexAttention's.

    python3 bench/profile_variant.py --ptx-dir .device/bench_variants --only causal,window1024

For each variant: torch.profiler over `--calls` fwd+bwd calls after warm-up, then
each CUDA kernel's name, launches per call and microseconds per call, the sum of
the kernels and the wall time per call (CUDA events over the same calls), so the
gap between the backward kernels' own time (bench_bwd.py's) and the op's shows.
Shapes and inputs are bench_variants.py's (B = 2, H = 16, S = 8192, d = 128).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_variants as bv  # noqa: E402


def kernel_table(torch, fn, calls):
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        r = rows.setdefault(e.name, [0, 0.0])
        r[0] += 1
        r[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return rows, start.elapsed_time(end) * 1e3 / calls


def show(label, rows, wall_us, calls):
    total = sum(us for _, us in rows.values()) / calls
    print(f"  {label}: kernels {total:9.1f} us/call, wall {wall_us:9.1f} us/call")
    for name, (n, us) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"    {us / calls:9.1f} us  x{n / calls:4.1f}  {name[:110]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptx-dir", required=True)
    ap.add_argument("--only", default="causal")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--backward-mode", default="auto")
    a = ap.parse_args()
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import flashc
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    B, H, S, D = bv.B, bv.H, bv.S, bv.D
    for name in a.only.split(","):
        mod = flashc.load(os.path.join(a.ptx_dir, name + ".ptx"))
        ins = bv.runtime_inputs(name, torch)
        mask_mod, score_mod = bv.flex_mods(name, torch, ins)
        g = torch.Generator(device="cuda").manual_seed(1)
        q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
                       for _ in range(4))
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        print(f"{name}: B={B} H={H} S={S} d={D}, {a.calls} calls")

        def ours():
            flashc.attention(qg, kg, vg, mod, layout="bhsd", inputs=ins,
                             backward_mode=a.backward_mode).backward(do)
        rows, wall = kernel_table(torch, ours, a.calls)
        show("flashc fwd+bwd", rows, wall, a.calls)
        if not a.no_flex:
            flex = torch.compile(flex_attention, dynamic=False)
            bm = (create_block_mask(mask_mod, B=None, H=H if name in bv.PER_HEAD else None,
                                    Q_LEN=S, KV_LEN=S, device="cuda") if mask_mod else None)

            def theirs():
                flex(qg, kg, vg, score_mod=score_mod, block_mask=bm).backward(do)
            rows, wall = kernel_table(torch, theirs, a.calls)
            show("Flex fwd+bwd", rows, wall, a.calls)


if __name__ == "__main__":
    main()
