"""Packed sequences of different lengths (issue 20, `varlen = true`) beside
FlashAttention-2's varlen kernels and FlexAttention, in one process on the GPU machine.

    python3 bench/bench_varlen.py --write-specs DIR   # here: one spec a row, DIR/NAME.fa
    python3 bench/bench_varlen.py --ptx-dir DIR [--json F] [--no-bwd] [--only a,b]

Each row packs NSEQ sequences of mixed lengths (drawn once from a fixed seed,
256 .. 8192 tokens, about 64k in all) into [total, heads, 128] bf16 tensors
with cu_seqlens: flashc through the Python package (flashc.attention with
cu_seqlens, fwd+bwd by autograd), FlashAttention-2's varlen kernels as
PyTorch ships them (aten._flash_attention_forward / _backward with
cum_seq_q/k: flash_attn_varlen_func), and FlexAttention on the same packed
tokens as one sequence with a document mask (its BlockMask skips the blocks
between documents). TFLOP/s are counted on the kept (q, k) pairs of each
sequence (forward 4 H d x pairs, fwd+bwd 3.5x that). Medians of CUDA-event
timings (5 calls back to back a timing) after warm-up; before timing,
flashc's output is checked against FA2's (max |diff| under 2e-2, no NaN).
"""
import json
import os
import random
import sys
import time

from table import cell, peer_args, ratio, write_specs

D = 128
NSEQ = 24
ROWS = {  # name: (heads, kv_heads, causal)
    "varlen_causal": (16, 16, True),
    "varlen_full": (16, 16, False),
    "varlen_gqa_causal": (32, 8, True),
}


def lengths():
    r = random.Random(20)
    return [r.choice((256, 512, 1000, 2048, 3000, 4096, 8192)) + r.randrange(0, 64) for _ in range(NSEQ)]


def spec_text(name):
    h, kh, causal = ROWS[name]
    mask = "mask = causal; " if causal else ""
    return (f"# bench/bench_varlen.py row {name}\n"
            f"attention {name} {{\n  dtype = bf16; head_dim = {D}; heads = {h}; kv_heads = {kh};\n"
            f"  {mask}grad = true; varlen = true;\n}}\n")


def main():
    global D
    a = peer_args()
    D = a.head_dim or D
    if a.write_specs:
        write_specs(a.write_specs, ROWS, spec_text)
        return
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import flashc
    from bench import sustained_ms

    def time_ms(fn):  # the median over ~400 ms of calls (docs/perf-log.md P93)
        return sustained_ms(fn, reps=200, target_ms=400, inner=5)

    lens = lengths()
    total = sum(lens)
    cu_list = [0]
    for n in lens:
        cu_list.append(cu_list[-1] + n)
    cu = torch.tensor(cu_list, dtype=torch.int32, device="cuda")
    maxlen = max(lens)
    doc = torch.repeat_interleave(torch.arange(NSEQ, device="cuda"),
                                  torch.tensor(lens, device="cuda"))
    print(f"bench_varlen: {NSEQ} sequences, {total} tokens (lengths {min(lens)}..{maxlen}), d={D} bf16; "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}; TFLOP/s on kept pairs; "
          f"x = peer time / flashc time")
    print(f"{'row':18s} {'fwd ms':>8s} {'TFLOP/s':>8s} {'FA2':>8s} {'x':>5s} {'Flex':>8s} {'x':>5s} | "
          f"{'fwdbwd ms':>9s} {'TFLOP/s':>8s} {'FA2':>8s} {'x':>5s} {'Flex':>8s} {'x':>5s} | check")
    names = [n for n in ROWS if not a.only or n in a.only.split(",")]
    rows = []
    for name in names:
        h, kh, causal = ROWS[name]
        mod = flashc.load(os.path.join(a.ptx_dir, name + ".ptx"))
        pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lens)
        flops = 4.0 * h * D * pairs
        g = torch.Generator(device="cuda").manual_seed(len(rows) + 1)
        q = torch.randn(total, h, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(total, kh, D, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
        do = torch.randn(total, h, D, device="cuda", dtype=torch.bfloat16, generator=g)
        scale = D ** -0.5
        kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=maxlen, max_seqlen_k=maxlen)
        row = dict(row=name, heads=h, kv_heads=kh, causal=causal, tokens=total, pairs=pairs)

        def ours_fwd():
            return flashc.attention(q, k, v, mod, **kw)

        def fa2_fwd(qq=q, kk=k, vv=v):
            return torch.ops.aten._flash_attention_forward(qq, kk, vv, cu, cu, maxlen, maxlen, 0.0, causal,
                                                           False, scale=scale)
        out = ours_fwd()
        try:
            ref = fa2_fwd()[0]
            diff = (out.float() - ref.float()).abs().max().item()
            row["check"] = "ok" if diff < 2e-2 and not torch.isnan(out).any() else f"DIFF {diff:.2e}"
        except Exception as e:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
            fa2_fwd = None
            row["check"] = f"no FA2: {type(e).__name__}: {str(e)[:80]}"
        row["fwd_ms"] = time_ms(ours_fwd)
        if fa2_fwd:
            row["fa2_fwd_ms"] = time_ms(fa2_fwd)
        flex = bm = None
        if not a.no_flex:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            flex = torch.compile(flex_attention, dynamic=False)

            def mask_mod(b, hh, qi, ki):
                same = doc[qi] == doc[ki]
                return same & (ki <= qi) if causal else same
            bm = create_block_mask(mask_mod, B=None, H=None, Q_LEN=total, KV_LEN=total, device="cuda")
            qf, kf, vf = (t.transpose(0, 1)[None] for t in (q, k, v))

            def flex_fwd():
                return flex(qf, kf, vf, block_mask=bm, enable_gqa=h != kh)
            row["flex_fwd_ms"] = time_ms(flex_fwd)
        if not a.no_bwd:
            qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

            def ours_fb():
                flashc.attention(qg, kg, vg, mod, backward_mode=a.backward_mode, **kw).backward(do)
            row["fwdbwd_ms"] = time_ms(ours_fb)
            if fa2_fwd:
                def fa2_fb():
                    o, lse, rng, unused, _ = fa2_fwd()
                    torch.ops.aten._flash_attention_backward(do, q, k, v, o, lse, cu, cu, maxlen, maxlen,
                                                             0.0, causal, rng, unused, scale=scale)
                row["fa2_fwdbwd_ms"] = time_ms(fa2_fb)
            if flex:
                qf, kf, vf = (t.transpose(0, 1)[None].detach().requires_grad_() for t in (q, k, v))
                dof = do.transpose(0, 1)[None]

                def flex_fb():
                    flex(qf, kf, vf, block_mask=bm, enable_gqa=h != kh).backward(dof)
                row["flex_fwdbwd_ms"] = time_ms(flex_fb)
        for key in [k_ for k_ in row if k_.endswith("_ms")]:
            mult = 3.5 if "fwdbwd" in key else 1.0
            row[key.replace("_ms", "_tflops")] = mult * flops / row[key] / 1e9
        rows.append(row)

        print(f"{name:18s} {row['fwd_ms']:8.3f} {cell(row, 'fwd_tflops')} {cell(row, 'fa2_fwd_tflops')} "
              f"{ratio(row, 'fwd_ms', 'fa2_fwd_ms')} {cell(row, 'flex_fwd_tflops')} {ratio(row, 'fwd_ms', 'flex_fwd_ms')} | "
              f"{row.get('fwdbwd_ms', float('nan')):9.3f} {cell(row, 'fwdbwd_tflops')} {cell(row, 'fa2_fwdbwd_tflops')} "
              f"{ratio(row, 'fwdbwd_ms', 'fa2_fwdbwd_ms')} {cell(row, 'flex_fwdbwd_tflops')} "
              f"{ratio(row, 'fwdbwd_ms', 'flex_fwdbwd_ms')} | {row['check']}", flush=True)
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, lengths=lens,
                           time=time.strftime("%Y-%m-%d %H:%M:%S"), rows=rows), f, indent=1)
    bad = [r["row"] for r in rows if r["check"] != "ok"]
    print(f"bench_varlen: {len(rows)} rows, {len(bad)} outside the sanity check"
          + (f" ({', '.join(bad)})" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
