"""The host cost of one call of flashc's PyTorch op, beside SDPA's.

    python3 bench/bench_op_overhead.py PTX [--calls 2000]

PTX is a compiled module with `grad = true` (e.g. examples/tiny_gpt.fa, bf16,
4 heads over 2, d 64). On a tiny problem (B=1, S=128: the GPU work is a few
microseconds) the wall time per call of a loop of calls is the host's work:
dispatch, allocation, argument marshalling, the launch. Reported for the
forward alone (no grad) and forward + backward through autograd, flashc's op
and SDPA's flash backend (K/V repeated for its heads) on the same inputs.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

try:
    import flashc  # an installed package (or PYTHONPATH) first
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import flashc


def per_call_us(fn, calls):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx")
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    mod = flashc.load(a.ptx)
    info = mod.info
    h, kh, d = info["heads"], info["kv_heads"], info["head_dim"]
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[info["dtype"]]
    q = torch.randn(1, 128, h, d, device="cuda", dtype=dt, requires_grad=True)
    k = torch.randn(1, 128, kh, d, device="cuda", dtype=dt, requires_grad=True)
    v = torch.randn(1, 128, kh, d, device="cuda", dtype=dt, requires_grad=True)
    causal = info["mask"] == "causal"
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(q, k, v):
        qh, kh_, vh = (t.transpose(1, 2) for t in (q, k, v))
        kh_, vh = kh_.repeat_interleave(h // kh, 1), vh.repeat_interleave(h // kh, 1)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(qh, kh_, vh, is_causal=causal).transpose(1, 2)

    rows = []
    with torch.no_grad():
        rows.append(("forward", per_call_us(lambda: flashc.attention(q, k, v, mod), a.calls),
                     per_call_us(lambda: sdpa(q, k, v), a.calls)))
    rows.append(("forward + backward", per_call_us(lambda: flashc.attention(q, k, v, mod).sum().backward(), a.calls // 2),
                 per_call_us(lambda: sdpa(q, k, v).sum().backward(), a.calls // 2)))
    print(f"op overhead: B=1 S=128 H={h}/{kh} d={d} {info['dtype']}; {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; wall us per call (host-bound)")
    for name, ours, theirs in rows:
        print(f"  {name:20s} flashc {ours:7.1f} us   sdpa {theirs:7.1f} us")


if __name__ == "__main__":
    main()
