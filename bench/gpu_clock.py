"""Brings the GPU out of its idle clocks before the first timing.

A GPU that sat idle (a fresh device machine reads ~345 MHz) ramps its clocks
over the first tens of milliseconds of work; the per-call warm-up of a short
kernel does not cover that, and the first configurations of a bench then read
slow (H100, 2026-11-22: B=1 GQA 8k paged decode 20.3 / 22.2 / 23.0 us in three
calls that started cold). A few hundred milliseconds of matmuls first.
"""
import time


def spin_up(seconds=0.3):
    import torch
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()
    del a
