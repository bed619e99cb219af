"""What the package-level GPU suites (torch_ops.py, inputs.py, varlen.py)
share: the PASS/FAIL lines, the error measure of FlashAttention's rule,
fresh random tensors, the dtype names of the metadata, the summary line.

    from gpu_check import DT, err, rand, report, finish, parse_args
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

DT = {"bf16": torch.bfloat16, "f16": torch.float16}
results = []


def report(ok, name, msg, width=40):
    """One PASS/FAIL line; the verdict counts toward finish()."""
    results.append(bool(ok))
    print(f"{'PASS' if ok else 'FAIL'} {name:{width}s} {msg}", flush=True)


def err(a, b):
    """max |a - b| in float64 (0 for empty tensors)."""
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def rand(*shape, dtype):
    """Standard normal values of dtype on the GPU (drawn in float32)."""
    return torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)


def finish(suite):
    """Prints `SUITE: N passed, N failed` and exits 0 only when all passed."""
    npass = sum(results)
    print(f"{suite}: {npass} passed, {len(results) - npass} failed")
    sys.exit(0 if npass == len(results) else 1)


def parse_args(ap):
    """ap's arguments plus --lib (the runtime library, as scripts/gpu-round.sh
    passes it: its folder becomes FLASHC_LIB_DIR, which the package reads at
    its first load)."""
    ap.add_argument("--lib", default=None, help="the runtime library (default: the package's "
                    "search: FLASHC_LIB_DIR, the repository's build folders)")
    a = ap.parse_args()
    if a.lib:
        os.environ["FLASHC_LIB_DIR"] = os.path.dirname(os.path.abspath(a.lib))
    return a
