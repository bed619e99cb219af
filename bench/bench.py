#!/usr/bin/env python3
"""flashc forward benchmark, run on the GPU machine.

Our kernels (PTX compiled by flashc on the build machine, loaded through the C
runtime with ctypes) and the peers (PyTorch SDPA with the flash backend =
FlashAttention-2, SDPA with the cuDNN backend, FlexAttention compiled) run in
the same process on fresh random inputs. Each of our results is checked against
a float64 reference on a sample of query rows before it is timed. Timing: CUDA
events around each call after warm-up, median of the repeats.

    python3 bench/bench.py --ptx-dir .device/bench [--quick] [--json out.json] [--plot out.png]

The PTX directory holds one PTX per configuration, named as bench/configs.py
says, plus compile_times.json written by scripts/build-bench-kernels.sh.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "gpu"))

import configs  # noqa: E402
import flashc_rt  # noqa: E402


def median_ms(fn, warmup=5, reps=20, inner=1):
    """Median time of fn() in ms, CUDA events, after warm-up. inner > 1 times
    that many calls back to back per pair of events (the mean of them): the
    host's per-call work (Python, an op's dispatch) then overlaps the GPU's
    instead of being timed as idle GPU time."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / inner)
    return statistics.median(times)


def sustained_ms(fn, reps, target_ms, inner=1):
    """Median ms of fn() over about target_ms of calls (at most reps timings
    of `inner` calls, at least 3): one untimed first call (compiles,
    allocates), one timed to size the run, then warm-up. The H100's power
    cap moves its clocks in 100-300 ms phases (docs/perf-log.md P93): a
    median of a few long calls reads one."""
    fn()
    torch.cuda.synchronize()
    one = median_ms(fn, warmup=0, reps=1, inner=inner)
    n = max(3, min(reps, int(target_ms / max(one * inner, 1e-3))))
    return median_ms(fn, warmup=2, reps=n, inner=inner)


def fwd_flops(c):
    f = 4.0 * c["batch"] * c["heads"] * c["seqlen"] * c["seqlen"] * c["head_dim"]
    return f / 2 if c["causal"] else f


def reference_rows(q, k, v, causal, scale, rows):
    """float64 attention for the query rows `rows` (all batches and heads).
    q: [B, S, H, D]; k, v: [B, S, Hkv, D]. Returns [B, len(rows), H, D]."""
    B, S, H, D = q.shape
    Hkv = k.shape[2]
    g = H // Hkv
    qs = q[:, rows].double().permute(0, 2, 1, 3)  # B H r D
    kk = k.double().permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
    vv = v.double().permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
    s = torch.matmul(qs, kk.transpose(-1, -2)) * scale
    if causal:
        kidx = torch.arange(S, device=q.device)
        keep = kidx[None, :] <= rows[:, None]  # seqlen_q == seqlen_k: aligned
        s = s.masked_fill(~keep[None, None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, vv).permute(0, 2, 1, 3)


def reference_rows_lowp(q, k, v, causal, scale, rows):
    """The same math in the input dtype (FlashAttention's `pt` baseline)."""
    B, S, H, D = q.shape
    g = H // k.shape[2]
    qs = q[:, rows].permute(0, 2, 1, 3)
    kk = k.permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
    vv = v.permute(0, 2, 1, 3).repeat_interleave(g, dim=1)
    s = torch.matmul(qs, kk.transpose(-1, -2)) * scale
    if causal:
        kidx = torch.arange(S, device=q.device)
        keep = kidx[None, :] <= rows[:, None]
        s = s.masked_fill(~keep[None, None], float("-inf"))
    p = torch.softmax(s.float(), dim=-1).to(q.dtype)
    return torch.matmul(p, vv).permute(0, 2, 1, 3)


def check(out, q, k, v, causal, scale):
    S = q.shape[1]
    g = torch.Generator(device="cpu").manual_seed(0)
    rows = torch.randperm(S, generator=g)[: min(S, 192)].sort().values.to(q.device)
    ref = reference_rows(q, k, v, causal, scale, rows)
    pt = reference_rows_lowp(q, k, v, causal, scale, rows)
    got = out[:, rows].double()
    err = (got - ref).abs().max().item()
    bound = 2 * (pt.double() - ref).abs().max().item() + 1e-5
    ok = math.isfinite(err) and err <= bound and not torch.isnan(out).any().item()
    return ok, err, bound


def peer_sdpa(backend, q, k, v, causal, scale, gqa):
    from torch.nn.attention import sdpa_kernel
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    def run():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(
                qt, kt, vt, is_causal=causal, scale=scale, enable_gqa=gqa)
    return run


_flex_cache = {}


def flex_compiled():
    """flex_attention under torch.compile, one per process (bench_bwd.py too)."""
    from torch.nn.attention.flex_attention import flex_attention
    if "fn" not in _flex_cache:
        # Every configuration is a new shape: allow the recompiles, or dynamo
        # falls back to the unfused eager path after 8 and times that.
        import torch._dynamo
        torch._dynamo.config.cache_size_limit = 256
        torch._dynamo.config.accumulated_cache_size_limit = 4096
        _flex_cache["fn"] = torch.compile(flex_attention, dynamic=False)
    return _flex_cache["fn"]


def flex_block_mask(causal, S, device):
    """The causal block mask of FlexAttention (None: no mask)."""
    if not causal:
        return None
    from torch.nn.attention.flex_attention import create_block_mask
    return create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, S, S, device=device)


def peer_flex(q, k, v, causal, scale, gqa):
    fn = flex_compiled()
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    B, H, S, D = qt.shape
    bm = flex_block_mask(causal, S, q.device)
    return lambda: fn(qt, kt, vt, block_mask=bm, scale=scale, enable_gqa=gqa)


def run_config(rt, c, ptx_dir, args):
    dev = torch.device("cuda")
    dtype = torch.bfloat16 if c["dtype"] == "bf16" else torch.float16
    B, S, H, Hkv, D = c["batch"], c["seqlen"], c["heads"], c["kv_heads"], c["head_dim"]
    scale = 1.0 / math.sqrt(D)
    q = torch.randn(B, S, H, D, device=dev, dtype=dtype)
    k = torch.randn(B, S, Hkv, D, device=dev, dtype=dtype)
    v = torch.randn(B, S, Hkv, D, device=dev, dtype=dtype)
    flops = fwd_flops(c)
    row = dict(c)
    path = os.path.join(ptx_dir, configs.kernel_name(c) + ".ptx")
    t0 = time.perf_counter()
    mod = rt.load_ptx(path)
    row["load_ms"] = (time.perf_counter() - t0) * 1e3
    o = torch.full_like(q[..., : c["head_dim"]], float("nan"))
    status, msg = mod.forward(q, k, v, o)
    torch.cuda.synchronize()
    ok, err, bound = check(o, q, k, v, c["causal"], scale)
    row.update(ok=ok, err=err, bound=bound)
    if not ok:  # why: the launch's status, the error, where the NaNs are
        nan = torch.isnan(o).any(dim=-1)  # [B, S, H]
        where = nan.nonzero()[:1].tolist()
        row["why"] = (f"{status} {msg}; err {err:.2e} > {bound:.2e}; "
                      f"{int(nan.sum())} of {nan.numel()} rows NaN, first (b, s, h) {where}")
        print(f"{configs.kernel_name(c)} S={S}: {row['why']}", flush=True)
    if ok:  # the FA1-order ablation kernels are slow: sustained_ms takes 3 of them
        row["flashc_ms"] = sustained_ms(lambda: mod.forward(q, k, v, o), args.reps, args.target_ms)
    peers = {}
    if args.no_peers:
        row["flashc_tflops"] = flops / (row["flashc_ms"] * 1e-3) / 1e12 if row.get("flashc_ms") else None
        mod.close()
        return row
    from torch.nn.attention import SDPBackend
    gqa = H != Hkv
    peers["fa2"] = lambda: peer_sdpa(SDPBackend.FLASH_ATTENTION, q, k, v, c["causal"], scale, gqa)
    peers["cudnn"] = lambda: peer_sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v, c["causal"], scale, gqa)
    if not args.no_flex:
        peers["flex"] = lambda: peer_flex(q, k, v, c["causal"], scale, gqa)
    for name, make in peers.items():
        try:
            row[name + "_ms"] = sustained_ms(make(), args.reps, args.target_ms)
        except Exception as e:  # a peer that does not support the config
            row[name + "_ms"] = None
            row[name + "_error"] = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
    for name in ["flashc"] + list(peers):
        ms = row.get(name + "_ms")
        row[name + "_tflops"] = flops / (ms * 1e-3) / 1e12 if ms else None
    mod.close()
    del q, k, v, o
    torch.cuda.empty_cache()
    return row


def matmul_ceiling(args, n=8192):
    """The bf16 tensor cores' sustained rate here: torch.matmul of two n x n
    bf16 matrices (cuBLAS), TFLOP/s over ~target_ms of calls (PEERS.md's
    ceiling bf16_matmul_8192, measured in the same process as the grid:
    issue 21's d128 16k target is 90% of it)."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = sustained_ms(lambda: torch.matmul(a, b), args.reps, args.target_ms)
    del a, b
    torch.cuda.empty_cache()
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def fmt(x, w=7, p=1):
    return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) and x is not None else f"{'-':>{w}}"


def print_table(rows):
    print(f"{'D':>4} {'B':>3} {'H':>3} {'Hkv':>3} {'causal':>6} {'S':>6} | {'flashc':>7} {'FA2':>7} {'cuDNN':>7} {'Flex':>7} | {'/FA2':>5} {'/cuDNN':>6} {'/Flex':>5} | ok")
    for r in rows:
        f = r.get("flashc_tflops")
        def ratio(p):
            t = r.get(p + "_tflops")
            return f / t if f and t else None
        print(f"{r['head_dim']:>4} {r['batch']:>3} {r['heads']:>3} {r['kv_heads']:>3} {str(r['causal']):>6} {r['seqlen']:>6} | "
              f"{fmt(f)} {fmt(r.get('fa2_tflops'))} {fmt(r.get('cudnn_tflops'))} {fmt(r.get('flex_tflops'))} | "
              f"{fmt(ratio('fa2'), 5, 2)} {fmt(ratio('cudnn'), 6, 2)} {fmt(ratio('flex'), 5, 2)} | {'yes' if r['ok'] else 'NO'}")


PLOT_SERIES = [("flashc_tflops", "flashc"), ("fa2_tflops", "FlashAttention-2 (SDPA)"),
               ("cudnn_tflops", "cuDNN (SDPA)"), ("flex_tflops", "FlexAttention")]


def plot(rows, path, series=None, title=""):
    """TFLOP/s over seqlen, one panel per (head dim, causal, heads, dtype);
    series: (row key, label[, linestyle]) (default: the forward's four)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench: matplotlib missing, no plot")
        return
    groups = {}
    for r in rows:
        groups.setdefault((r["head_dim"], r["causal"], r["heads"], r["kv_heads"], r["dtype"]), []).append(r)
    n = len(groups)
    ncols = min(n, 4)
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.8 * nrows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.axis("off")
    for ax, (key, rs) in zip(flat, sorted(groups.items())):
        rs = sorted(rs, key=lambda r: r["seqlen"])
        xs = [r["seqlen"] for r in rs]
        for i, (skey, label, *style) in enumerate(series or PLOT_SERIES):
            ys = [r.get(skey) if isinstance(r.get(skey), (int, float)) else None for r in rs]
            if any(y for y in ys):  # one color per series in every panel
                ax.plot(xs, [y if y else float("nan") for y in ys], marker="o", label=label,
                        color=f"C{i}", linestyle=style[0] if style else "-")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x // 1024}k" if x >= 1024 else str(x) for x in xs])
        ax.set_title(f"{title}d={key[0]} {'causal' if key[1] else 'non-causal'} H={key[2]}/{key[3]} {key[4]}")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.grid(alpha=0.3)
    seen = {}  # every series of any panel, in the first panel's legend
    for ax in flat[:n]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    flat[0].legend(list(seen.values()), list(seen), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"bench: plot written to {path}")


def ablation(rt, args):
    """What each idea is worth: the same configurations compiled with one
    optional pass disabled at a time (one PTX directory per variant), or any
    other A/B of PTX directories (--ablation-grid forward: the whole forward
    grid, --only filters it). Variants alternate within each configuration so
    that clock drift hits them alike."""
    args.no_peers = True
    variants = sorted(d for d in os.listdir(args.ablation) if os.path.isdir(os.path.join(args.ablation, d)))
    variants.sort(key=lambda v: (v != "all-passes", v))
    grid = configs.forward_grid() if args.ablation_grid == "forward" else configs.ablation_grid()
    grid = [c for c in grid if (not args.only or args.only in configs.kernel_name(c))
            and (not args.max_seqlen or c["seqlen"] <= args.max_seqlen)
            and (not args.min_seqlen or c["seqlen"] >= args.min_seqlen)]
    table = {}
    bad = 0
    for c in grid:
        for v in variants:
            r = run_config(rt, c, os.path.join(args.ablation, v), args)
            bad += not r["ok"]
            table[(v, configs.kernel_name(c), c["seqlen"])] = r
            print(f"ablation: {v:28s} {configs.kernel_name(c)} S={c['seqlen']}: ok={r['ok']} "
                  f"{fmt(r.get('flashc_tflops'))} TFLOP/s", flush=True)
    cols = [(configs.kernel_name(c), c["seqlen"], c["causal"], c) for c in grid]

    def label(c):  # the head dim, and GQA or fp16 where the row differs from the grid's MHA bf16
        extra = (f" {c['heads']}/{c['kv_heads']}" if c["heads"] != c["kv_heads"] else "") + \
                (" fp16" if c["dtype"] != "bf16" else "")
        return f"d{c['head_dim']}{extra} {'causal' if c['causal'] else 'full'} S={c['seqlen']}"
    print("\nablation, TFLOP/s (ratio to all-passes):")
    print(f"{'variant':28s} " + " ".join(f"{label(c):>22s}" for *_, c in cols))
    for v in variants:
        cells = []
        for name, s, _, _ in cols:
            t = table[(v, name, s)].get("flashc_tflops")
            base = table.get(("all-passes", name, s), {}).get("flashc_tflops")
            cells.append(f"{fmt(t)} ({fmt(t / base if t and base else None, 4, 2)})")
        print(f"{v:28s} " + " ".join(f"{c:>22s}" for c in cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(variant=v, **r) for (v, _, _), r in table.items()], f, indent=1)
    print(f"\n{len(table) - bad} passed, {bad} failed")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx-dir", default=".device/bench")
    ap.add_argument("--lib", default=None, help="path of libflashc_runtime.so")
    ap.add_argument("--quick", action="store_true", help="a few configurations only")
    ap.add_argument("--only", default=None, help="substring filter on kernel names")
    # --target-ms decides: every median spans ~400 ms of calls (the card's
    # power cap moves its clocks in 100-300 ms phases, docs/perf-log.md P93)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--target-ms", type=float, default=400.0)
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--ablation", default=None,
                    help="directory of PTX directories, one per -disable-pass variant (scripts/build-ablation-kernels.sh)")
    ap.add_argument("--ablation-grid", choices=("ablation", "forward"), default="ablation",
                    help="--ablation: the head-dim-128 grid (default) or the whole forward grid")
    ap.add_argument("--max-seqlen", type=int, default=None,
                    help="only the configurations of at most this many rows (the short rows of a sweep)")
    ap.add_argument("--min-seqlen", type=int, default=None,
                    help="only the configurations of at least this many rows")
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    torch.manual_seed(int(time.time()))
    rt = flashc_rt.Runtime(args.lib)
    args.no_peers = False
    from gpu_clock import spin_up
    spin_up()
    if args.ablation:
        return ablation(rt, args)
    ceiling = matmul_ceiling(args)
    print(f"bench: bf16 matmul 8192 (cuBLAS), the tensor cores' ceiling here: {ceiling:.1f} TFLOP/s",
          flush=True)
    rows = []
    for c in configs.forward_grid(quick=args.quick):
        if args.only and args.only not in configs.kernel_name(c):
            continue
        if (args.max_seqlen and c["seqlen"] > args.max_seqlen) or (args.min_seqlen and c["seqlen"] < args.min_seqlen):
            continue
        r = run_config(rt, c, args.ptx_dir, args)
        rows.append(r)
        print(f"bench: {configs.kernel_name(c)} S={c['seqlen']} B={c['batch']}: ok={r['ok']} err={r['err']:.2e} (bound {r['bound']:.2e})"
              f" flashc={fmt(r.get('flashc_tflops'))} fa2={fmt(r.get('fa2_tflops'))} cudnn={fmt(r.get('cudnn_tflops'))} flex={fmt(r.get('flex_tflops'))} TFLOP/s", flush=True)
    ct = os.path.join(args.ptx_dir, "compile_times.json")
    compile_times = json.load(open(ct)) if os.path.exists(ct) else {}
    if compile_times:
        print("\ncompile time, spec to PTX (build machine) and PTX to loaded module (here):")
        loads = {}
        for r in rows:
            loads.setdefault(configs.kernel_name(r), r["load_ms"])
        for name, ms in sorted(compile_times.items()):
            print(f"  {name:40s} {ms:8.1f} ms   load {fmt(loads.get(name), 8, 1)} ms")
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "matmul_ceiling_tflops": ceiling, "rows": rows,
           "compile_ms": compile_times}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    print(f"\nforward, {out['device']}, torch {out['torch']}, TFLOP/s (medians over ~{args.target_ms:g} ms):")
    print_table(rows)
    for r in rows:  # issue 21: d128 non-causal 16k >= 90% of the matmul ceiling
        if r["head_dim"] == 128 and not r["causal"] and r["seqlen"] == 16384 and r.get("flashc_tflops"):
            print(f"d128 full 16k: {r['flashc_tflops']:.1f} TFLOP/s, "
                  f"{r['flashc_tflops'] / ceiling:.2f} of the matmul ceiling ({ceiling:.1f})")
    bad = [r for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
