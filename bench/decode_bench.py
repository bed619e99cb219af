#!/usr/bin/env python3
"""flashc decode benchmark, run on the GPU machine.

The decode grid of ../shared/PEERS.md (q_len 1, head dim 128, bf16, GQA 32/8
and MHA 32/32, batch 1..64, KV 4k..128k): our decode kernels (PTX loaded
through the C runtime's fa_decode) against PyTorch SDPA with the flash
(FlashAttention-2) and cuDNN backends (q [B, H, 1, D] against the K/V cache;
enable_gqa for GQA), in the same process, on fresh random inputs. Our
contiguous and paged (page 64, shuffled block table) kernels run the same
configurations (target: paged within 5% of contiguous). Each of our results
is checked against a float64 reference (first and last sequence) before it is
timed. Timing: each call captured `--inner` times into a CUDA graph (launch
gaps out of microsecond timings), replays timed with CUDA events, median of
`--trials`; inputs rotate over enough K/V copies to exceed the L2 cache. The kernels are compiled for
single-token decode (`q_len_max = 1`, what the grid measures; with GQA 32/8
that lets one 16-row Q tile hold the group and the warps split the keys).
Reports microseconds, TB/s of K+V read, and the ratio to each peer.

    python3 bench/decode_bench.py --ptx-dir .device/decode-bench [--quick] [--json out.json]
    python3 bench/decode_bench.py --write-specs DIR     (the .fa of BENCH_KERNELS)
    python3 bench/decode_bench.py --sweep DIR1,DIR2 --configs "8,32,8,16384" --nsplit 0,4,8
        (ours only: each PTX dir, e.g. other schedules, at each forced nsplit; 0 = auto)
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "gpu"))

# PEERS.md's decode grid: (batch, heads, kv_heads, cache length).
GRID = [(1, 32, 8, 8192), (1, 32, 8, 65536), (1, 32, 8, 131072), (1, 32, 32, 8192),
        (1, 32, 32, 65536), (1, 32, 32, 131072), (8, 32, 8, 16384), (8, 32, 32, 16384),
        (32, 32, 8, 4096), (32, 32, 32, 4096), (64, 32, 8, 8192), (64, 32, 32, 8192)]
QUICK = [(1, 32, 8, 8192), (8, 32, 8, 16384), (32, 32, 32, 4096)]
D = 128
PAGE = 64
L2_BYTES = 50 << 20


def _kernel(heads, kv_heads, paged):
    s = dict(dtype="bf16", head_dim=D, v_head_dim=D, heads=heads, kv_heads=kv_heads,
             causal=False, cache="paged" if paged else "contiguous",
             page_size=PAGE if paged else 0, split="auto", unified_max=None,
             scale=1.0 / math.sqrt(D), fixture={}, q_len_max=1)
    return s


def kernel_name(heads, kv_heads, paged):
    kind = "mha" if heads == kv_heads else "gqa"
    return f"dec_bench_{kind}_h{heads}_kv{kv_heads}_d{D}_bf16" + ("_paged64" if paged else "")


BENCH_KERNELS = {kernel_name(h, kv, p): _kernel(h, kv, p)
                 for h, kv in ((32, 8), (32, 32)) for p in (False, True)}


def write_specs(out_dir):
    from decode_specs import spec_text
    os.makedirs(out_dir, exist_ok=True)
    for name, s in BENCH_KERNELS.items():
        with open(os.path.join(out_dir, name + ".fa"), "w") as f:
            f.write(spec_text(name, s))
    print("\n".join(sorted(BENCH_KERNELS)))


# ---- timing ------------------------------------------------------------------

def graph_us(calls, inner, trials):
    """Median microseconds per call: `calls` (a list of thunks, cycled) captured
    `inner` times into one CUDA graph, replays timed with events."""
    import torch
    for fn in calls:  # warm-up: module scratch, cuDNN plans, lazy inits
        fn()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in calls:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(inner):
            calls[i % len(calls)]()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / inner)
    return statistics.median(times)


# ---- inputs and check --------------------------------------------------------

def make_sets(B, H, KH, L, copies, gen, q_len=1):
    """`copies` independent (q, k, v) sets: q [B, q_len, H, D], k/v [B, L, KH, D]."""
    import torch
    out = []
    for _ in range(copies):
        q = torch.randn(B, q_len, H, D, generator=gen, device="cuda").bfloat16()
        k = torch.randn(B, L, KH, D, generator=gen, device="cuda").bfloat16()
        v = torch.randn(B, L, KH, D, generator=gen, device="cuda").bfloat16()
        out.append((q, k, v))
    return out


def to_paged(k, v, gen):
    """The same caches in pages of PAGE through a shuffled block table."""
    import torch
    B, L, KH, _ = k.shape
    per = L // PAGE
    perm = torch.randperm(B * per, generator=torch.Generator().manual_seed(
        int(torch.randint(0, 1 << 30, (1,), generator=gen, device="cuda"))))
    bt = perm.view(B, per).to(torch.int32).cuda()
    kp = torch.empty(B * per, PAGE, KH, D, device="cuda", dtype=k.dtype)
    vp = torch.empty_like(kp)
    kp[bt.view(-1).long()] = k.reshape(B * per, PAGE, KH, D)
    vp[bt.view(-1).long()] = v.reshape(B * per, PAGE, KH, D)
    return kp, vp, bt


def check(o, q, k, v, kv_heads):
    """Our output against float64 on the first and last sequence (correctness.py's rule)."""
    from correctness import compare
    spec = dict(heads=q.shape[2], kv_heads=kv_heads, scale=1.0 / math.sqrt(D), mask=None,
                score=None)
    worst, bound, nan = 0.0, 0.0, 0
    for b in sorted({0, q.shape[0] - 1}):
        r = compare(spec, q[b:b + 1], k[b:b + 1], v[b:b + 1], o[b:b + 1], None, q.shape[1],
                    k.shape[1])
        worst, bound, nan = max(worst, r["o_err"]), max(bound, 2 * r["o_pt"] + 1e-5), nan + r["nan"]
    return nan == 0 and worst <= bound, worst, bound


# ---- one configuration -------------------------------------------------------------

def run_config(mods, cfg, args, gen):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B, H, KH, L = cfg
    kv_bytes = 2 * B * L * KH * D * 2
    copies = max(1, min(8, math.ceil(4 * L2_BYTES / kv_bytes)))
    sets = make_sets(B, H, KH, L, copies, gen)
    row = dict(batch=B, heads=H, kv_heads=KH, seqlen=L, head_dim=D, kv_bytes=kv_bytes)
    seq = torch.full((B,), L, dtype=torch.int32, device="cuda")
    for paged in (False, True):
        key = "paged" if paged else "flashc"
        mod = mods.get(kernel_name(H, KH, paged))
        if mod is None:
            continue
        calls, outs = [], []
        for q, k, v in sets:
            o = torch.full_like(q, float("nan"))
            if paged:
                kp, vp, bt = to_paged(k, v, gen)
                args_ = (q, kp, vp, o, seq, bt)
            else:
                args_ = (q, k, v, o, seq, None)
            outs.append(o)
            calls.append(lambda a=args_: mod.decode(*a, max_seqlen=L))
        calls[0]()
        torch.cuda.synchronize()
        ok, err, bound = check(outs[0], *sets[0], KH)
        row[key + "_ok"], row[key + "_err"], row[key + "_nsplit"] = ok, err, mod.last_nsplit()
        row[key + "_kernel"] = mod.last_kernel()  # the kernel or its small-batch variant
        if ok:
            row[key + "_us"] = graph_us(calls, args.inner, args.trials)
        del calls, outs
    for peer, backend in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        def make(q, k, v, backend=backend):
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            def run():
                with sdpa_kernel(backend):
                    return torch.nn.functional.scaled_dot_product_attention(
                        qt, kt, vt, enable_gqa=H != KH)
            return run
        try:
            row[peer + "_us"] = graph_us([make(*s) for s in sets], args.inner, args.trials)
        except Exception as e:  # a backend that does not take the configuration
            row[peer + "_us"] = None
            row[peer + "_error"] = (str(e).splitlines() or [type(e).__name__])[0][:120]
    for key in ("flashc", "paged", "fa2", "cudnn"):
        us = row.get(key + "_us")
        row[key + "_tbs"] = kv_bytes / (us * 1e-6) / 1e12 if us else None
    del sets
    torch.cuda.empty_cache()
    return row


def sweep(dirs, cfgs, nsplits, args, gen):
    """Our kernels only, from each PTX directory of `dirs` (the same kernel
    names, e.g. compiled with other schedules), at each forced nsplit (0 =
    the runtime's choice): one line per timing, checked against float64 first."""
    import torch
    from flashc_rt_decode import DecodeModule
    rt_ctx = args._ctx
    mods = {d: {n: DecodeModule(rt_ctx, os.path.join(d, n + ".ptx")) for n in BENCH_KERNELS
                if os.path.exists(os.path.join(d, n + ".ptx"))} for d in dirs}
    rows = []
    for B, H, KH, L in cfgs:
        sets = make_sets(B, H, KH, L, max(1, min(8, math.ceil(4 * L2_BYTES / (4 * B * L * KH * D)))),
                         gen, args.q_len)
        seq = torch.full((B,), L, dtype=torch.int32, device="cuda")
        paged_sets = [to_paged(k, v, gen) for _, k, v in sets] if args.sweep_paged else None
        for paged in ((False, True) if args.sweep_paged else (False,)):
            for d in dirs:
                mod = mods[d].get(kernel_name(H, KH, paged))
                if mod is None:
                    continue
                for ns in nsplits:
                    calls, outs = [], []
                    for i, (q, k, v) in enumerate(sets):
                        o = torch.full_like(q, float("nan"))
                        kk, vv, bt = paged_sets[i] if paged else (k, v, None)
                        outs.append(o)
                        calls.append(lambda a=(q, kk, vv, o, seq, bt), n=ns:
                                     mod.decode(*a, max_seqlen=L, nsplit=n))
                    calls[0]()
                    torch.cuda.synchronize()
                    ok, err, _ = check(outs[0], *sets[0], KH)
                    us = graph_us(calls, args.inner, args.trials) if ok else None
                    r = dict(dir=d, batch=B, heads=H, kv_heads=KH, seqlen=L, paged=paged,
                             nsplit=mod.last_nsplit(), kernel=mod.last_kernel(), forced=ns, ok=ok,
                             us=us)
                    rows.append(r)
                    print(f"sweep: {os.path.basename(d.rstrip('/')):>12} B={B:<3} q_len={args.q_len} H={H} Hkv={KH:<2} "
                          f"L={L:<6} {'paged' if paged else 'contig'} nsplit {r['nsplit']:>3} "
                          f"(asked {ns}): {fmt(us, 8)} us {'ok' if ok else 'WRONG'}", flush=True)
                    del calls, outs
        del sets, paged_sets
        torch.cuda.empty_cache()
    return rows


def parse_cfgs(text):
    """"B,H,KH,L;B,H,KH,L" -> [(B, H, KH, L), ...]"""
    return [tuple(int(x) for x in c.split(",")) for c in text.split(";") if c.strip()]


def fmt(x, w=7, p=1):
    return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) and x is not None else f"{'-':>{w}}"


def print_table(rows):
    print(f"{'B':>3} {'H':>3} {'Hkv':>3} {'L':>7} | {'flashc us':>9} {'TB/s':>5} {'paged us':>9} "
          f"{'TB/s':>5} {'FA2 us':>8} {'cuDNN us':>8} | {'/FA2':>5} {'/cuDNN':>6} {'paged/c':>7} | ok")
    for r in rows:
        f, p = r.get("flashc_us"), r.get("paged_us")

        def ratio(peer):  # speed ratio: > 1 means we are faster
            t = r.get(peer + "_us")
            return t / f if f and t else None
        ok = all(r.get(k + "_ok", True) for k in ("flashc", "paged"))
        print(f"{r['batch']:>3} {r['heads']:>3} {r['kv_heads']:>3} {r['seqlen']:>7} | "
              f"{fmt(f, 9)} {fmt(r.get('flashc_tbs'), 5, 2)} {fmt(p, 9)} {fmt(r.get('paged_tbs'), 5, 2)} "
              f"{fmt(r.get('fa2_us'), 8)} {fmt(r.get('cudnn_us'), 8)} | {fmt(ratio('fa2'), 5, 2)} "
              f"{fmt(ratio('cudnn'), 6, 2)} {fmt(p / f if p and f else None, 7, 3)} | "
              f"{'yes' if ok else 'NO'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx-dir", default=".device/decode-bench")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--quick", action="store_true", help="three configurations only")
    ap.add_argument("--inner", type=int, default=20, help="calls per CUDA graph")
    ap.add_argument("--trials", type=int, default=10, help="timed graph replays (median)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--write-specs", default=None)
    ap.add_argument("--configs", default=None, help="B,H,KH,L;... instead of the grid")
    ap.add_argument("--sweep", default=None,
                    help="comma-separated PTX dirs: time our kernels only, per dir and nsplit")
    ap.add_argument("--nsplit", default="0", help="sweep: comma-separated forced nsplit (0: auto)")
    ap.add_argument("--sweep-paged", action="store_true", help="sweep: the paged kernels too")
    ap.add_argument("--q-len", type=int, default=1, help="sweep: query tokens per sequence")
    args = ap.parse_args()
    if args.write_specs:
        write_specs(args.write_specs)
        return 0
    import torch
    import flashc_rt
    from flashc_rt_decode import DecodeModule
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int(time.time()))
    rt = flashc_rt.Runtime(args.lib)
    ctx = rt.context(0)
    args._ctx = ctx
    from gpu_clock import spin_up
    spin_up()
    if args.sweep:
        rows = sweep(args.sweep.split(","), parse_cfgs(args.configs) if args.configs else GRID,
                     [int(x) for x in args.nsplit.split(",")], args, gen)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
        bad = [r for r in rows if not r["ok"]]
        print(f"\nsweep: {len(rows) - len(bad)} passed, {len(bad)} failed")
        return 1 if bad else 0
    mods = {}
    for name in BENCH_KERNELS:
        path = os.path.join(args.ptx_dir, name + ".ptx")
        if os.path.exists(path):
            mods[name] = DecodeModule(ctx, path)
    print(f"decode bench: {len(mods)} kernels from {args.ptx_dir}: {', '.join(sorted(mods))}")
    rows = []
    for cfg in parse_cfgs(args.configs) if args.configs else QUICK if args.quick else GRID:
        r = run_config(mods, cfg, args, gen)
        rows.append(r)
        print(f"decode bench: B={cfg[0]} H={cfg[1]} Hkv={cfg[2]} L={cfg[3]}: "
              f"flashc {fmt(r.get('flashc_us'))} us (nsplit {r.get('flashc_nsplit')}, ok "
              f"{r.get('flashc_ok')}), paged {fmt(r.get('paged_us'))} us, fa2 {fmt(r.get('fa2_us'))}"
              f" us, cudnn {fmt(r.get('cudnn_us'))} us", flush=True)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"), "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(f"\ndecode, q_len 1, d {D}, bf16, {out['device']}, torch {out['torch']}: microseconds "
          f"(graph of {args.inner} calls, median of {args.trials}), TB/s of K+V read; ratios = "
          f"peer time / ours (> 1: we are faster); paged/c = paged time / contiguous time")
    print_table(rows)
    bad = [r for r in rows if not all(r.get(k + "_ok", True) for k in ("flashc", "paged"))]
    print(f"\n{len(rows) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
