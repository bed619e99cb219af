#!/usr/bin/env python3
"""flashc backward benchmark (issue 17, "Speed"), run on the GPU machine.

    python3 bench/bench_bwd.py --ptx-dir .device/bench_bwd [--mode bwd|fwdbwd|both] [--quick] [--json F] [--plot F.png]

(`sh scripts/build-bench-kernels.sh` here writes .device/bench_bwd; on the GPU
machine, with .device carried: python3 bench/bench_bwd.py --json $OUT/bench_bwd.json
--plot $OUT/bench_bwd.png; about 3-5 minutes on an H100; --list shows the grid.)

The grid is PEERS.md's backward grid (bench/configs.py backward_grid): head dim
64/128/256 with heads x head_dim = 2048, causal and not, seqlen 2k/8k/16k at
16k tokens (batch = 16384 / seqlen), plus GQA 32/8 at head dim 128, 8k; bf16.
Per row, in one process on the same random q, k, v, dO:

  flashc   the module of the grad = true spec (scripts/build-bench-kernels.sh ->
           .device/bench_bwd/NAME.ptx), launched straight through the CUDA driver
           (test/gpu/ptx_launch.py, the launcher of test/gpu/backward.py); O and LSE
           from the module's own forward kernel. bwd = the runtime's default
           launch (FA_BACKWARD_AUTO: the one the module's `backward_auto` key
           names, codegen/meta_backward.c; the `auto` column says which);
           fwdbwd = forward + that.
           Ablation columns: `det` = the deterministic launch (_bwd_pre, _bwd_kv,
           _bwd_q), `atomic` = the atomic launch (dq_acc memset,
           _bwd_pre, _bwd, _bwd_post); `noskip` (causal rows) = the module compiled with
           -disable-pass=mask-skip (.device/bench_bwd/no-mask-skip), timed only
           where its backward kernels differ from the default's (else "=").
           `sync` / `syncat` = both launches of the module compiled with
           -mma=sync (.device/bench_bwd/mma-sync): wgmma vs mma.sync (the
           metadata's `mma` line is printed).
           Checked before timing: O on sampled rows (bench.py's check) and dQ, dK,
           dV of both launches on the last batch's last K/V head group against a
           float64 autograd reference with test/gpu/backward.py's 3x rule (a
           failure is printed and marks the row NO; the row is still timed).
  FA2      SDPA, SDPBackend.FLASH_ATTENTION     (leaves: the [B, S, H, D] inputs
  cuDNN    SDPA, SDPBackend.CUDNN_ATTENTION      seen as [B, H, S, D] views, as bench.py)
  Flex     torch.compile'd flex_attention (block mask for causal; contiguous
           [B, H, S, D] copies), compiled by an untimed first call; a failure
           skips it. Rows that start after --flex-budget-s seconds skip it.

Peers' bwd = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True) on a
forward made once, dout copied into out's layout (PEERS.md: o.backward(do,
retain_graph=True); autograd.grad does the same without accumulating into
.grad); fwdbwd = forward + that.
Timing: CUDA events around each call after an untimed first call and warm-up,
median of up to --reps (fewer when a call is long: about --target-ms per
measurement). With fwdbwd, flashc's forward half is also timed alone (JSON
fwd_flashc_*) and each kernel of its fwd+bwd sequence with events between
the launches (fwdbwd_flashc_steps, ms), printed on the row's progress line. TFLOP/s: forward = 4*B*H*S*S*D (halved when causal), bwd = 2.5x,
fwdbwd = 3.5x that. Peak memory (rows at 16k, or --mem-all): max_memory_allocated
during one backward minus what was allocated before it (flashc's dQ/dK/dV,
delta and dq_acc allocated by torch inside), MiB, and the ratio to FA2's.
Rows run 8k first (PEERS.md has Flex there), then 2k, then 16k; after
--budget-s seconds the remaining rows are skipped (the run stays under a
10-minute device call). Prints the tables, writes --json and --plot (bwd) and
the plot's _fwdbwd twin. Exit status 1 when a flashc check failed.
"""
import argparse
import json
import math
import os
import sys
import time
from functools import partial

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "gpu"))

import bench  # noqa: E402  (median_ms, fwd_flops, check, fmt, plot, flex_compiled, flex_block_mask)
import configs  # noqa: E402
from ptx_launch import Driver, Kernels, sequence  # noqa: E402

PEERS = ("fa2", "cudnn", "flex")
BWD_FLOPS, FWDBWD_FLOPS = 2.5, 3.5


# ---- timing and memory -----------------------------------------------------------

def time_ms(fn, reps, target_ms):
    """Median ms of fn() over about target_ms of calls (bench.sustained_ms)."""
    return bench.sustained_ms(fn, reps, target_ms)


def steps_ms(fn, reps=10):
    """Median ms of each kernel launch of a ptx_launch sequence (nested
    sequences flattened), CUDA events between the launches: where the time
    of fwd+bwd goes when its sum differs from its parts'."""
    steps, todo = [], [fn]
    while todo:
        f = todo.pop(0)
        if hasattr(f, "launches"):
            todo[:0] = list(f.launches)
        else:
            steps.append(f)
    fn()
    torch.cuda.synchronize()
    times = [[] for _ in steps]
    for _ in range(reps):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(len(steps) + 1)]
        ev[0].record()
        for i, f in enumerate(steps):
            f()
            ev[i + 1].record()
        ev[-1].synchronize()
        for i in range(len(steps)):
            times[i].append(ev[i].elapsed_time(ev[i + 1]))
    return [sorted(t)[len(t) // 2] for t in times]


def peak_mib(fn):
    """Peak bytes allocated by torch during fn() above what was allocated before, MiB."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    res = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del res
    return peak / 2**20


def short(e):
    s = str(e).strip()
    return (s.splitlines()[0][:160] if s else type(e).__name__)


# ---- flashc -------------------------------------------------------------------

def bwd_bodies(path):
    """The PTX text of each backward kernel (its .entry to the next), by name."""
    text = open(path).read()
    parts = text.split("\n.visible .entry ")[1:]
    out = {}
    for p in parts:
        name = p.split("(", 1)[0].strip()
        if "_bwd" in name:
            out[name] = p
    return out


class Modules:
    """Each module loaded once (its rows differ only in batch and seqlen)."""

    def __init__(self, drv, ptx_dir):
        self.drv, self.dir = drv, ptx_dir
        self.loaded, self.load_ms, self.nms_same = {}, {}, {}

    def get(self, name, variant=""):
        key = (name, variant)
        if key not in self.loaded:
            path = os.path.join(self.dir, variant, name + ".ptx")
            if not os.path.exists(path):
                self.loaded[key] = FileNotFoundError(f"no {path} (scripts/build-bench-kernels.sh, carry .device)")
            else:
                t0 = time.perf_counter()
                try:
                    K = Kernels(self.drv, path, name)
                    m = K.meta[name]
                    if m.get("grid") not in ("q_tiles,heads,batch", "persistent") or \
                            m.get("workspace_floats_per_row", 0):
                        raise RuntimeError(f"forward grid {m.get('grid')}, workspace "
                                           f"{m.get('workspace_floats_per_row')}: not launched here")
                    self.loaded[key] = K
                except RuntimeError as e:
                    self.loaded[key] = e
                self.load_ms[name + ("/" + variant if variant else "")] = (time.perf_counter() - t0) * 1e3
        return self.loaded[key]

    def nms_differs(self, name):
        """Whether the -disable-pass=mask-skip module's backward kernels differ
        from the default module's (None: no such PTX)."""
        if name not in self.nms_same:
            a = os.path.join(self.dir, name + ".ptx")
            b = os.path.join(self.dir, "no-mask-skip", name + ".ptx")
            self.nms_same[name] = None if not (os.path.exists(a) and os.path.exists(b)) else \
                bwd_bodies(a) == bwd_bodies(b)
        same = self.nms_same[name]
        return None if same is None else not same

    def has_variant(self, name, variant):
        return os.path.exists(os.path.join(self.dir, variant, name + ".ptx"))

    def engines(self):
        out = {}
        for (name, variant), K in self.loaded.items():
            if isinstance(K, Kernels) and not variant:
                for kname, m in K.meta.items():
                    role = "forward" if kname == name else "backward"
                    out.setdefault(role, set()).add(m.get("mma", "?"))
        return out


def reference(c, q, k, v, do, scale):
    """float64 and input-dtype autograd gradients of the last batch's last K/V
    head group (test/gpu/backward.py's reference), and the 3x bounds."""
    import backward  # test/gpu/backward.py
    from backward_specs import causal as causal_mask
    B, S, H, Hkv = c["batch"], c["seqlen"], c["heads"], c["kv_heads"]
    g = H // Hkv
    b, hk = B - 1, Hkv - 1
    qs, dos = q[b:b + 1, :, hk * g:(hk + 1) * g], do[b:b + 1, :, hk * g:(hk + 1) * g]
    ks, vs = k[b:b + 1, :, hk:hk + 1], v[b:b + 1, :, hk:hk + 1]
    spec = dict(heads=g, kv_heads=1, scale=scale, score=None, mask=causal_mask if c["causal"] else None)
    ref = backward.grads(spec, qs, ks, vs, dos, S, S, torch.float64)
    pt = backward.grads(spec, qs, ks, vs, dos, S, S, q.dtype)
    bounds = [3 * backward.err(p, r) + 1e-5 for p, r in zip(pt, ref)]
    del pt
    sl = (b, hk, g)
    return ref, bounds, sl


def verify(ref, bounds, sl, dq, dk, dv):
    import backward
    b, hk, g = sl
    got = (dq[b:b + 1, :, hk * g:(hk + 1) * g], dk[b:b + 1, :, hk:hk + 1], dv[b:b + 1, :, hk:hk + 1])
    nan = sum(int(torch.isnan(x).sum()) for x in (dq, dk, dv))
    errs = [backward.err(x, r) for x, r in zip(got, ref)]
    ok = nan == 0 and all(e <= bd for e, bd in zip(errs, bounds))
    return ok, errs, nan


def flashc_impls(mods, c, q, k, v, do, scale, row, modes):
    """flashc's timed functions {impl: {mode: fn}} and memory functions
    {impl: fn}; checks both launches first (row: ok, errors)."""
    B, S, H, D = c["batch"], c["seqlen"], c["heads"], c["head_dim"]
    name = configs.bwd_kernel_name(c)
    K = mods.get(name)
    if not isinstance(K, Kernels):
        row["flashc_error"] = short(K)
        row["ok"] = False
        return {}, {}
    dev = q.device
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, S), float("nan"), device=dev, dtype=torch.float32)
    fwd = K.forward_launch(q, k, v, o, lse, B, S, S)
    fwd()
    torch.cuda.synchronize()
    ok_fwd, err_fwd, bound_fwd = bench.check(o, q, k, v, c["causal"], scale)
    row.update(fwd_ok=ok_fwd, fwd_err=err_fwd, fwd_bound=bound_fwd)
    dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
    delta = torch.empty((B, H, S), device=dev, dtype=torch.float32)
    dq_acc = torch.empty((B, S, H, D), device=dev, dtype=torch.float32)
    t = (q, k, v, o, lse, do, dq, dk, dv, delta, dq_acc)
    # flashc = the runtime's default launch (FA_BACKWARD_AUTO: the launch the
    # module's backward_auto key names); flashc_det and flashc_atomic = both
    # launches, ablation columns (one of them times AUTO's launch again)
    auto_det = K.meta[name].get("backward_auto", "deterministic") != "atomic"
    row["auto"] = "det" if auto_det else "atomic"
    launches = {"flashc": K.backward_launch(t, B, S, S, auto_det),
                "flashc_det": K.backward_launch(t, B, S, S, True),
                "flashc_atomic": K.backward_launch(t, B, S, S, False)}
    if c["causal"]:
        diff = mods.nms_differs(name)
        row["noskip"] = {None: "no PTX", False: "same backward PTX", True: "timed"}[diff]
        if diff:
            K2 = mods.get(name, "no-mask-skip")
            if isinstance(K2, Kernels):
                launches["flashc_nms"] = K2.backward_launch(t, B, S, S, True)
            else:
                row["flashc_nms_error"] = short(K2)
    K3 = mods.get(name, "mma-sync") if mods.has_variant(name, "mma-sync") else None
    if isinstance(K3, Kernels):
        launches["flashc_sync"] = K3.backward_launch(t, B, S, S, True)
        launches["flashc_sync_atomic"] = K3.backward_launch(t, B, S, S, False)
    elif K3 is not None:
        row["flashc_sync_error"] = short(K3)
    ref, bounds, sl = reference(c, q, k, v, do, scale)
    ok_all = ok_fwd
    for impl, go in launches.items():
        for x in (dq, dk, dv):
            x.fill_(float("nan"))
        go()
        torch.cuda.synchronize()
        ok, errs, nan = verify(ref, bounds, sl, dq, dk, dv)
        row[impl + "_check"] = dict(ok=ok, dq=errs[0], dk=errs[1], dv=errs[2], nan=nan,
                                    bound_dq=bounds[0], bound_dk=bounds[1], bound_dv=bounds[2])
        ok_all &= ok
    row["ok"] = ok_all
    del ref
    torch.cuda.empty_cache()  # the float64 reference's blocks, before the peers' workspaces
    timed = {impl: {"bwd": go} for impl, go in launches.items()} if "bwd" in modes else {}
    if "fwdbwd" in modes:
        timed.setdefault("flashc", {})["fwdbwd"] = sequence([fwd, launches["flashc"]])
        timed["flashc"]["fwd"] = fwd  # after fwdbwd: its forward half alone (the JSON's fwd_flashc_*)

    def mem(det):
        def go():
            g = tuple(torch.empty_like(x) for x in (q, k, v))
            dl = torch.empty((B, H, S), device=dev, dtype=torch.float32)
            acc = None if det else torch.empty((B, S, H, D), device=dev, dtype=torch.float32)
            K.backward((q, k, v, o, lse, do) + g + (dl, acc), B, S, S, det)
            return g
        return go
    memfns = {"flashc": mem(auto_det), "flashc_atomic": mem(False)}
    row["_keep"] = (o, lse, dq, dk, dv, delta, dq_acc, launches)  # alive while timed
    return timed, memfns


# ---- peers --------------------------------------------------------------------

def autograd_impl(fwd, leaves, dout, modes):
    out = fwd()  # the forward whose backward is timed (graph retained)
    dout = torch.empty_like(out).copy_(dout)  # dO in O's layout, as training hands it over
    def bwd():
        return torch.autograd.grad(out, leaves, dout, retain_graph=True)

    def fwdbwd():
        return torch.autograd.grad(fwd(), leaves, dout)
    fns = {m: f for m, f in (("bwd", bwd), ("fwdbwd", fwdbwd)) if m in modes}
    return fns, bwd, out


def peer_sdpa(backend, c, q, k, v, do, scale, modes):
    from torch.nn.attention import sdpa_kernel
    F = torch.nn.functional
    qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v))
    dot = do.transpose(1, 2)
    gqa = c["heads"] != c["kv_heads"]

    def fwd():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=c["causal"], scale=scale,
                                                  enable_gqa=gqa)
    return autograd_impl(fwd, (qt, kt, vt), dot, modes)


def peer_flex(c, q, k, v, do, scale, modes):
    fn = bench.flex_compiled()
    qt, kt, vt = (x.detach().transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v))
    dot = do.transpose(1, 2).contiguous()
    bm = bench.flex_block_mask(c["causal"], c["seqlen"], q.device)
    gqa = c["heads"] != c["kv_heads"]
    return autograd_impl(lambda: fn(qt, kt, vt, block_mask=bm, scale=scale, enable_gqa=gqa),
                         (qt, kt, vt), dot, modes)


# ---- one row --------------------------------------------------------------------

def run_config(mods, c, args, use_flex):
    from torch.nn.attention import SDPBackend
    dev = torch.device("cuda")
    dtype = torch.bfloat16 if c["dtype"] == "bf16" else torch.float16
    B, S, H, Hkv, D = c["batch"], c["seqlen"], c["heads"], c["kv_heads"], c["head_dim"]
    scale = 1.0 / math.sqrt(D)
    q = torch.randn(B, S, H, D, device=dev, dtype=dtype)
    k = torch.randn(B, S, Hkv, D, device=dev, dtype=dtype)
    v = torch.randn(B, S, Hkv, D, device=dev, dtype=dtype)
    do = torch.randn(B, S, H, D, device=dev, dtype=dtype)
    modes = ("bwd", "fwdbwd") if args.mode == "both" else (args.mode,)
    row = dict(c, kernel=configs.bwd_kernel_name(c))
    flops = {"bwd": BWD_FLOPS * bench.fwd_flops(c), "fwdbwd": FWDBWD_FLOPS * bench.fwd_flops(c),
             "fwd": bench.fwd_flops(c)}
    mem_row = S == 16384 or args.mem_all
    try:
        timed, memfns = flashc_impls(mods, c, q, k, v, do, scale, row, modes)
    except RuntimeError as e:  # a refused launch
        row["flashc_error"], row["ok"] = short(e), False
        timed, memfns = {}, {}
    for impl, fns in timed.items():
        for mode, fn in fns.items():
            try:
                row[f"{mode}_{impl}_ms"] = time_ms(fn, args.reps, args.target_ms)
                if mode == "fwdbwd":  # each kernel's share, launched as in the sequence
                    row[f"{mode}_{impl}_steps"] = steps_ms(fn)
            except RuntimeError as e:
                row[f"{mode}_{impl}_error"] = short(e)
    if mem_row:
        for impl, fn in memfns.items():
            try:
                row[f"mem_{impl}_mib"] = peak_mib(fn)
            except RuntimeError as e:
                row[f"mem_{impl}_error"] = short(e)
    row.pop("_keep", None)
    del timed, memfns
    peers = {} if args.no_peers else {
        "fa2": partial(peer_sdpa, SDPBackend.FLASH_ATTENTION, c, q, k, v, do, scale, modes),
        "cudnn": partial(peer_sdpa, SDPBackend.CUDNN_ATTENTION, c, q, k, v, do, scale, modes)}
    if use_flex and not args.no_peers:
        peers["flex"] = partial(peer_flex, c, q, k, v, do, scale, modes)
    for impl, make in peers.items():
        try:
            fns, bwdfn, out = make()
            for mode, fn in fns.items():
                row[f"{mode}_{impl}_ms"] = time_ms(fn, args.reps, args.target_ms)
            if mem_row:
                row[f"mem_{impl}_mib"] = peak_mib(bwdfn)
            del fns, bwdfn, out
        except Exception as e:  # a peer that does not support the config, or OOM
            row[f"{impl}_error"] = short(e)
        torch.cuda.empty_cache()
    for key in [k_ for k_ in row if k_.endswith("_ms") and k_.split("_")[0] in flops]:
        ms = row[key]
        row[key[:-3] + "_tflops"] = flops[key.split("_")[0]] / (ms * 1e-3) / 1e12 if ms else None
    del q, k, v, do
    torch.cuda.empty_cache()
    return row


# ---- output ---------------------------------------------------------------------

def cell(r, key, w=7, p=1):
    x = r.get(key)
    return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else f"{'-':>{w}}"


def ratio(r, a, b):
    x, y = r.get(a), r.get(b)
    return x / y if isinstance(x, (int, float)) and isinstance(y, (int, float)) and y else None


def head(r):
    return (f"{r['head_dim']:>4} {r['batch']:>3} {r['heads']:>3} {r['kv_heads']:>3} "
            f"{str(r['causal']):>6} {r['seqlen']:>6}")


HEAD = f"{'D':>4} {'B':>3} {'H':>3} {'Hkv':>3} {'causal':>6} {'S':>6}"


def print_tables(rows, modes):
    for mode in modes:
        print(f"\n{mode}, TFLOP/s ({'2.5' if mode == 'bwd' else '3.5'}x forward FLOPs); ratios flashc / peer")
        ab = mode == "bwd"
        print(HEAD + f" | {'flashc':>7}" +
              (f" {'auto':>6} {'det':>7} {'atomic':>7} {'noskip':>7} {'sync':>7} {'syncat':>7}" if ab else "") +
              f" {'FA2':>7} {'cuDNN':>7} {'Flex':>7} | {'/FA2':>5} {'/cuDNN':>6} {'/Flex':>5}" +
              (f" {'det/at':>6}" if ab else "") + " | ok")
        for r in rows:
            f = f"{mode}_flashc_tflops"
            line = head(r) + " | " + cell(r, f)
            if ab:
                nms = cell(r, "bwd_flashc_nms_tflops")
                if r.get("noskip") == "same backward PTX":
                    nms = f"{'=':>7}"
                line += f" {r.get('auto', '-'):>6} " + cell(r, "bwd_flashc_det_tflops")
                line += " " + cell(r, "bwd_flashc_atomic_tflops") + " " + nms
                line += " " + cell(r, "bwd_flashc_sync_tflops") + " " + cell(r, "bwd_flashc_sync_atomic_tflops")
            line += " " + " ".join(cell(r, f"{mode}_{p}_tflops") for p in PEERS) + " | "
            line += " ".join(f"{x:{w}.2f}" if x else f"{'-':>{w}}" for x, w in
                             [(ratio(r, f, f"{mode}_{p}_tflops"), w) for p, w in zip(PEERS, (5, 6, 5))])
            if ab:
                x = ratio(r, "bwd_flashc_det_tflops", "bwd_flashc_atomic_tflops")
                line += f" {x:6.2f}" if x else f" {'-':>6}"
            line += " | " + ("yes" if r.get("ok") else "NO")
            print(line)
    mem = [r for r in rows if any(k.startswith("mem_") and k.endswith("_mib") for k in r)]
    if mem:
        print("\npeak memory of one backward (torch max_memory_allocated above what was allocated "
              "before; flashc: dQ/dK/dV, delta, dq_acc), MiB; ratio to FA2")
        print(HEAD + f" | {'flashc':>7} {'atomic':>7} {'FA2':>7} {'cuDNN':>7} {'Flex':>7} | {'/FA2':>5} {'at/FA2':>7}")
        for r in mem:
            cells = " ".join(cell(r, f"mem_{i}_mib", 7, 0) for i in ("flashc", "flashc_atomic", "fa2", "cudnn", "flex"))
            a, d = ratio(r, "mem_flashc_mib", "mem_fa2_mib"), ratio(r, "mem_flashc_atomic_mib", "mem_fa2_mib")
            print(head(r) + " | " + cells + " | " + (f"{a:5.2f}" if a else f"{'-':>5}") +
                  " " + (f"{d:7.2f}" if d else f"{'-':>7}"))


def notes(rows, mods, args):
    out = []
    eng = mods.engines() if mods else {}
    be = ",".join(sorted(eng.get("backward", []))) or "?"
    out.append(f"engine: backward kernels on {be} (metadata `mma`; `none`: no matmul), forward on "
               f"{','.join(sorted(eng.get('forward', []))) or '?'}; the sync/syncat columns: "
               "the same spec compiled with -mma=sync")
    same = sorted(n for n, s in (mods.nms_same.items() if mods else []) if s)
    if same:
        out.append("mask-skip ablation: the backward kernels compiled with -disable-pass=mask-skip are "
                   "identical to the default's for " + ", ".join(same) +
                   " (mask-skip does not act on the backward kernels): `=` in the noskip column, not timed")
    for r in rows:
        for k_, v in r.items():
            if k_.endswith("_error"):
                out.append(f"{r['kernel']} S={r['seqlen']}: {k_[:-6]}: {v}")
    skipped = [r for r in rows if r.get("skipped")]
    if skipped:
        out.append(f"{len(skipped)} rows skipped: past --budget-s {args.budget_s}")
    return out


def plot_twins(rows, path, modes):
    root, ext = os.path.splitext(path)
    for mode in modes:
        # the same colors in both plots: fwdbwd has no atomic / noskip keys, their slots stay empty
        series = [(f"{mode}_flashc_tflops", f"flashc {mode} (default: FA_BACKWARD_AUTO)"),
                  (f"{mode}_flashc_atomic_tflops", f"flashc {mode} (atomic)", "--"),
                  (f"{mode}_flashc_nms_tflops", f"flashc {mode} (no mask-skip)", ":")]
        series += [(f"{mode}_{p}_tflops", {"fa2": "FlashAttention-2 (SDPA)", "cudnn": "cuDNN (SDPA)",
                                           "flex": "FlexAttention"}[p] + f" {mode}") for p in PEERS]
        bench.plot(rows, path if mode == modes[0] else f"{root}_{mode}{ext or '.png'}",
                   series=series, title=f"{mode}: ")


def run_order(grid):
    """8k rows first (PEERS.md's Flex rows), then 2k, then 16k."""
    rank = {8192: 0, 2048: 1, 16384: 2}
    return sorted(grid, key=lambda c: rank.get(c["seqlen"], 3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx-dir", default=".device/bench_bwd")
    ap.add_argument("--mode", choices=("bwd", "fwdbwd", "both"), default="both")
    ap.add_argument("--quick", action="store_true", help="seqlen 2k and 8k only")
    ap.add_argument("--only", default=None, help="substring filter on kernel names (bwd_d128_h16_...)")
    ap.add_argument("--seqlen", default=None, help="comma list: only these seqlens")
    # --target-ms decides: every median spans ~400 ms of calls, longer than
    # the power cap's clock swings (1545-1980 MHz in 100-ms phases under a
    # d64 fwd+bwd at ~700 W; 10 reps of an 11-ms call read one phase, P93)
    ap.add_argument("--reps", type=int, default=1000, help="timed calls per measurement, at most")
    ap.add_argument("--target-ms", type=float, default=400.0,
                    help="about this much timed GPU time per measurement (fewer reps for long calls)")
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--mem-all", action="store_true", help="peak memory on every row, not only 16k")
    ap.add_argument("--flex-budget-s", type=float, default=180.0,
                    help="rows that start after this many seconds skip FlexAttention (its compiles)")
    ap.add_argument("--budget-s", type=float, default=330.0,
                    help="rows that would start after this many seconds are skipped")
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None, help="PNG of bwd TFLOP/s; fwdbwd beside it as NAME_fwdbwd.png")
    ap.add_argument("--list", action="store_true", help="print the grid and the PTX it needs, then exit")
    args = ap.parse_args()
    modes = ("bwd", "fwdbwd") if args.mode == "both" else (args.mode,)
    grid = configs.backward_grid(quick=args.quick)
    if args.only:
        grid = [c for c in grid if args.only in configs.bwd_kernel_name(c)]
    if args.seqlen:
        keep = {int(s) for s in args.seqlen.split(",")}
        grid = [c for c in grid if c["seqlen"] in keep]
    if args.list:
        for c in run_order(grid):
            name = configs.bwd_kernel_name(c)
            have = os.path.exists(os.path.join(args.ptx_dir, name + ".ptx"))
            print(f"{name} B={c['batch']} S={c['seqlen']} fwd {bench.fwd_flops(c) / 1e12:.3f} TFLOP"
                  f" {'' if have else '(no PTX in ' + args.ptx_dir + ')'}")
        return 0
    t_start = time.time()
    torch.manual_seed(int(time.time()))
    drv = Driver()
    mods = Modules(drv, args.ptx_dir)
    from gpu_clock import spin_up
    spin_up()
    rows = []
    for c in run_order(grid):
        elapsed = time.time() - t_start
        if elapsed > args.budget_s:
            rows.append(dict(c, kernel=configs.bwd_kernel_name(c), skipped=True, ok=True))
            print(f"bench_bwd: {configs.bwd_kernel_name(c)} S={c['seqlen']}: skipped (past --budget-s)")
            continue
        use_flex = not args.no_flex and elapsed <= args.flex_budget_s
        t0 = time.time()
        r = run_config(mods, c, args, use_flex)
        if not use_flex and not args.no_flex:
            r["flex_error"] = "skipped: past --flex-budget-s"
        r["row_s"] = time.time() - t0
        rows.append(r)
        checks = " ".join(f"{i}:{'ok' if r[i + '_check']['ok'] else 'FAIL'}" for i in
                          ("flashc", "flashc_det", "flashc_atomic", "flashc_nms") if i + "_check" in r)
        print(f"bench_bwd: {r['kernel']} S={c['seqlen']} B={c['batch']} ({r['row_s']:.1f} s): "
              f"fwd {'ok' if r.get('fwd_ok') else 'FAIL'} {checks} | "
              + " ".join(f"{m} " + " ".join(f"{i}={cell(r, f'{m}_{i}_tflops', 1)}"
                                            for i in ("flashc", "flashc_det", "flashc_atomic", "fa2", "cudnn", "flex")
                                            if f"{m}_{i}_tflops" in r) for m in modes)
              + (f" | fwd flashc={cell(r, 'fwd_flashc_tflops', 1)}" if "fwd_flashc_tflops" in r else "")
              + (" | fwdbwd steps ms " + " ".join(f"{x:.3f}" for x in r["fwdbwd_flashc_steps"])
                 if "fwdbwd_flashc_steps" in r else "")
              + (f" | flashc: {r['flashc_error']}" if "flashc_error" in r else ""), flush=True)
        for i in ("flashc", "flashc_det", "flashc_atomic", "flashc_nms"):
            ch = r.get(i + "_check")
            if ch and not ch["ok"]:
                print(f"  {i}: dq {ch['dq']:.2e}/{ch['bound_dq']:.2e} dk {ch['dk']:.2e}/{ch['bound_dk']:.2e}"
                      f" dv {ch['dv']:.2e}/{ch['bound_dv']:.2e} nan {ch['nan']}")
    key = {configs.bwd_kernel_name(c) + str(c["seqlen"]): i for i, c in enumerate(grid)}
    rows.sort(key=lambda r: key[r["kernel"] + str(r["seqlen"])])  # the tables in PEERS.md's order
    done = [r for r in rows if not r.get("skipped")]
    ct = os.path.join(args.ptx_dir, "compile_times.json")
    compile_times = json.load(open(ct)) if os.path.exists(ct) else {}
    print(f"\nbackward, {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, median of <= {args.reps}")
    print_tables(done, modes)
    if compile_times or mods.load_ms:
        print("\ncompile (build machine, spec to PTX: forward + 5 backward kernels) and load here (PTX JIT):")
        for name in sorted(set(compile_times) | set(mods.load_ms)):
            print(f"  {name:44s} compile {cell(compile_times, name, 8, 0)} ms   load {cell(mods.load_ms, name, 8, 0)} ms")
    ns = notes(rows, mods, args)
    if ns:
        print("\nnotes:")
        for n in ns:
            print("  " + n)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "modes": list(modes), "rows": rows,
           "compile_ms": compile_times, "load_ms": mods.load_ms, "notes": ns,
           "total_s": time.time() - t_start}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    if args.plot:
        plot_twins(done, args.plot, modes)
    bad = [r for r in done if not r.get("ok")]
    print(f"\nbench_bwd: {time.time() - t_start:.0f} s")
    print(f"{len(done) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
