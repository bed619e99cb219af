#!/usr/bin/env python3
"""Runs each decode implementation a few times on one configuration, for a
profiler (ncu) to read: our kernels from each PTX directory given, then PyTorch
SDPA's cuDNN and flash backends. Nothing is timed or checked here
(bench/decode_bench.py does that).

    ncu --clock-control none -k regex:'dec_bench|cudnn|flash' \\
        python3 bench/decode_profile.py --dirs .device/decode-bench --configs "1,32,8,8192"
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "gpu"))

import decode_bench as db  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dirs", required=True, help="comma-separated PTX directories")
    ap.add_argument("--configs", default="1,32,8,8192")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--paged", action="store_true", help="our paged kernels instead")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import flashc_rt
    from flashc_rt_decode import DecodeModule
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    ctx = flashc_rt.Runtime(args.lib).context(0)
    for B, H, KH, L in db.parse_cfgs(args.configs):
        (q, k, v), = db.make_sets(B, H, KH, L, 1, gen)
        seq = torch.full((B,), L, dtype=torch.int32, device="cuda")
        o = torch.empty_like(q)
        kk, vv, bt = db.to_paged(k, v, gen) if args.paged else (k, v, None)
        for d in args.dirs.split(","):
            mod = DecodeModule(ctx, os.path.join(d, db.kernel_name(H, KH, args.paged) + ".ptx"))
            for _ in range(args.runs):
                mod.decode(q, kk, vv, o, seq, bt, max_seqlen=L)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            for _ in range(args.runs):
                with sdpa_kernel(backend):
                    torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, enable_gqa=H != KH)
        torch.cuda.synchronize()
        print(f"decode_profile: B={B} H={H} Hkv={KH} L={L} done", flush=True)


if __name__ == "__main__":
    main()
