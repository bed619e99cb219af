"""What the package-level GPU suites (torch_ops.py, inputs.py, varlen.py,
block_lists.py) share: the PASS/FAIL lines, the error measure of
FlashAttention's rule, fresh random tensors, the dtype names of the
metadata, the summary line; for the suites over a folder of kernels, their
arguments and seed, loading the kernels, the per-case loop and the check
that a launch is refused.

    from gpu_check import DT, err, rand, report, finish, parse_args
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import flashc  # noqa: E402

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


def start(suite):
    """The arguments of a suite over a folder of kernels: ptx_dir, --seed
    (random by default) and parse_args' --lib. Prints `SUITE: seed N`, seeds
    torch and returns the arguments and a CPU generator of that seed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx_dir")
    ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
    a = parse_args(ap)
    print(f"{suite}: seed {a.seed}")
    torch.manual_seed(a.seed)
    return a, torch.Generator().manual_seed(a.seed)


def load_modules(ptx_dir, names, unfit=None):
    """flashc.load of ptx_dir/NAME.ptx for each name, by name. A missing file
    is a failure, and so is a module for which unfit(mod) gives a reason;
    neither is returned."""
    mods = {}
    for name in names:
        path = os.path.join(ptx_dir, name + ".ptx")
        if not os.path.exists(path):
            report(False, name, f"no {path}")
            continue
        mod = flashc.load(path)
        why = unfit(mod) if unfit else None
        if why:
            report(False, name, why)
            continue
        mods[name] = mod
    return mods


def run_cases(mods, cases, check):
    """check(mod, name, case) for each case of cases[name] of every loaded
    module; an exception is that case's failure."""
    for name, mod in mods.items():
        for case in cases[name]:
            try:
                check(mod, name, case)
            except Exception as e:  # noqa: BLE001 - reported as a failure
                report(False, f"{name} {case}", f"{type(e).__name__}: {e}")


def expect_refusal(label, fn, want, limit=120):
    """fn() must raise, with `want` in the message (shown cut to limit)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        report(want in str(e), f"refuse {label}", f"{type(e).__name__}: {str(e)[:limit]}")
        return
    report(False, f"refuse {label}", "launch was accepted")
