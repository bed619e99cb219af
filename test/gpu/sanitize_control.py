"""The negative control of scripts/gpu-sanitize.sh: proof that the sanitizer
sees flashc's kernels. One forward launch whose O descriptor claims rows past
the end of its allocation (the runtime cannot know an allocation's size:
docs/runtime.md), so the kernel writes out of bounds and memcheck must say so.

    python3 test/gpu/sanitize_control.py PTX [--lib LIB]
"""
import argparse
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import flashc_rt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx")
    ap.add_argument("--lib", default="build-gpu/libflashc_runtime.so")
    a = ap.parse_args()
    rt = flashc_rt.Runtime(a.lib)
    ctx = rt.context(0)
    mod = ctx.load_ptx(a.ptx)
    info = mod.info
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[info["dtype"]]
    B, S, H, KH, D, DV = 1, 256, info["heads"], info["kv_heads"], info["head_dim"], info["v_head_dim"]
    q = torch.randn(B, S, H, D, device="cuda", dtype=dt)
    k = torch.randn(B, S, KH, D, device="cuda", dtype=dt)
    v = torch.randn(B, S, KH, DV, device="cuda", dtype=dt)
    o_small = torch.empty(B, 1, H, DV, device="cuda", dtype=dt)  # one row of 256
    args = mod.args(q, k, v, o_small)
    args.o.dim[1] = S  # the descriptor claims all 256 rows
    st = mod.lib.fa_forward(mod.handle, ctypes.byref(args))
    torch.cuda.synchronize()
    print(f"control launch: {flashc_rt.STATUS[st]} (O has 1 row of {S}: out of bounds by design)")


if __name__ == "__main__":
    main()
