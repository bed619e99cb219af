#!/usr/bin/env python3
"""Philox4x32 bits on the GPU against the host (issue 18, codegen of u32 ops).

    python3 test/gpu/philox_bits.py PTX [--rounds 7]

PTX: test/codegen/Inputs/philox_tile.py's forward-kind kernel compiled by
flashc (scripts/build-gpu-kernels.sh writes .device/philox/philox_bits_R.ptx).
Its O[b, q, h, c] is byte c % 4 of word (c // 4) % 4 of philox4x32_R(counter
= (q, c, h, b), key = (0x12345678, 0x9abcdef0)); here every element of a
launch with odd seqlen (a partial last Q tile) and batch 3 is compared with
Random123's algorithm in Python (checked against its known answers first).
Exit status 1 on any mismatch.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptx_launch import Driver, Kernels  # noqa: E402

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
MASK = 0xFFFFFFFF
KEY = (0x12345678, 0x9ABCDEF0)


def philox(ctr, key, rounds):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK, p1 & MASK, ((p0 >> 32) ^ c3 ^ k1) & MASK, p0 & MASK
    return c0, c1, c2, c3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    kat = {7: (0x5F6FB709, 0x0D893F64, 0x4F121F81, 0x4F730A48),
           10: (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)}
    assert philox((0, 0, 0, 0), (0, 0), 7) == kat[7] and philox((0, 0, 0, 0), (0, 0), 10) == kat[10]
    drv = Driver()
    K = Kernels(drv, a.ptx, "philox_bits")
    m = K.meta["philox_bits"]
    H, D = int(m["heads"]), int(m["head_dim"])
    B, S = 3, 131
    dev = "cuda"
    q = torch.zeros(B, S, H, D, device=dev, dtype=torch.float16)
    o = torch.full_like(q, float("nan"))
    lse = torch.zeros(B, H, S, device=dev, dtype=torch.float32)
    K.forward(q, q, q, o, lse, B, S, S)
    torch.cuda.synchronize()
    got = o.float().cpu()
    bad = 0
    for b in range(B):
        for h in range(H):
            for s in range(S):
                for c in range(D):
                    w = philox((s, c, h, b), KEY, a.rounds)[(c // 4) % 4]
                    want = (w >> (8 * (c % 4))) & 0xFF
                    if got[b, s, h, c].item() != want:
                        if bad < 5:
                            print(f"FAIL b={b} q={s} h={h} c={c}: {got[b, s, h, c].item()} != {want}")
                        bad += 1
    n = B * S * H * D
    print(f"philox_bits rounds={a.rounds}: {n - bad} of {n} elements equal the host's")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
