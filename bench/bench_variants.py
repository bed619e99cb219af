"""Attention variants beside FlexAttention (issue 20), in one process on the GPU machine.

    python3 bench/bench_variants.py --write-specs DIR   # here: one spec a variant, DIR/NAME.fa
    (flashc DIR/NAME.fa -o DIR/NAME.ptx for each: scripts/build-bench-kernels.sh)
    python3 bench/bench_variants.py --ptx-dir DIR [--json F] [--no-bwd] [--only a,b]

The rows of ../shared/PEERS.md's variants table (B = 2, H = 16, S = 8192,
head dim 128, bf16): causal, sliding window 1024 (causal), document mask (6
packed documents, causal within each), PrefixLM (2048), softcap 50 (causal
and full), ALiBi (causal); and with run-time inputs (`input NAME: ...`, bound
at each launch): the document mask from a tensor of document ids, T5's
relative bias table (32 log-spaced buckets per head, causal), a full additive
bias [B, H, S, S] (bf16), softcap 50 with the cap a run-time scalar, a block-sparse
layout (128 x 128 blocks, a 0/1 table per head: the diagonal and ~20%). Each is
one flashc spec (grad = true) and the same
math as a FlexAttention mask_mod / score_mod with its BlockMask; flashc runs
through the Python package (flashc.attention, so fwd+bwd is autograd's).
TFLOP/s are counted on the kept (q, k) pairs, as PEERS.md does: forward 4 B H
S^2 d x density, fwd+bwd 3.5x that. Times are medians of CUDA-event timings
(5 calls back to back per timing, so the host's per-call work overlaps the
GPU's) after warm-up, fresh random inputs. Before timing, flashc's output is checked
against Flex's (max |diff| under 2e-2 and no NaN: a sanity check; the GPU
suites hold the accuracy rule). `document_noskip` is the document spec
compiled with -disable-pass=mask-skip: what classifying its tiles is worth;
`*_nolists` the run-time-input specs with -disable-pass=block-lists (each
step classified in the kernel: what the classifier's lists are worth; with
them every launch builds its lists, the classifier's time included);
`*_prebuilt` the same kernels with lists built once (flashc.blocks) and
given to every call.
"""
import json
import math
import os
import sys
import time

from table import cell, peer_args, ratio, write_specs

B, H, S, D = 2, 16, 8192, 128
DOC_LENGTHS = (1000, 1500, 500, 2200, 1700, 1292)  # 6 documents, 8192 tokens
DOC_BOUNDS = tuple(sum(DOC_LENGTHS[:i]) for i in range(1, len(DOC_LENGTHS)))
PREFIX = 2048


def _chain(var):
    """`var < b1 ? 0 : var < b2 ? 1 : ...`: the document of position var."""
    return " : ".join(f"{var} < {b} ? {i}" for i, b in enumerate(DOC_BOUNDS)) + \
        f" : {len(DOC_BOUNDS)}"


# name -> (spec body, extra flashc flags)
VARIANTS = {
    "causal": ("mask = causal;", []),
    "window1024": ("mask = window(1024);", []),
    "document": (f"let dq = {_chain('q')};\n  let dk = {_chain('k')};\n"
                 "  mask(b, h, q, k) = k <= q && dq == dk;", []),
    "document_noskip": (None, ["-disable-pass=mask-skip"]),
    "prefix_lm": (f"mask(b, h, q, k) = k < {PREFIX} || k <= q;", []),
    "softcap50_causal": ("mask = causal;\n  score(s, b, h, q, k) = 50 * tanh(s / 50);", []),
    "softcap50_full": ("score(s, b, h, q, k) = 50 * tanh(s / 50);", []),
    "alibi_causal": ("mask = causal;\n  score(s, b, h, q, k) = s - exp2(-(h + 1) / 2) * abs(q - k);", []),
    # run-time inputs (runtime_inputs below makes their values)
    "document_rt": ("input doc: i32[batch, seqlen_k];\n"
                    "  mask(b, h, q, k) = k <= q && doc[b, q] == doc[b, k];", []),
    "document_rt_noskip": (None, ["-disable-pass=mask-skip"]),
    "document_rt_nolists": (None, ["-disable-pass=block-lists"]),
    "t5_bias": ("input rel_bias: f32[heads, 32];\n  mask = causal;\n  let n = max(q - k, 0);\n"
                "  let bucket = min(max(n < 16 ? n : 16 + floor(log(n / 16) / log(8) * 16), 0), 31);\n"
                "  score(s, b, h, q, k) = s + rel_bias[h, bucket];", []),
    "full_bias": ("input bias: bf16[batch, heads, seqlen_q, seqlen_k];\n"
                  "  score(s, b, h, q, k) = s + bias[b, h, q, k];", []),
    "softcap_rt_causal": ("input cap: f32;\n  mask = causal;\n"
                          "  score(s, b, h, q, k) = cap * tanh(s / cap);", []),
    "block_sparse": ("input blocks: i32[heads, 64, 64];\n"
                     "  mask(b, h, q, k) = blocks[h, min(floor(q / 128), 63), "
                     "min(floor(k / 128), 63)] != 0;", []),
    "block_sparse_nolists": (None, ["-disable-pass=block-lists"]),
    "document_rt_prebuilt": (None, []),
    "block_sparse_prebuilt": (None, []),
}
PER_HEAD = {"block_sparse", "block_sparse_nolists", "block_sparse_prebuilt"}  # masks that read h
SPEC_OF = {"document_noskip": "document", "document_rt_noskip": "document_rt",
           "document_rt_nolists": "document_rt", "block_sparse_nolists": "block_sparse",
           "document_rt_prebuilt": "document_rt", "block_sparse_prebuilt": "block_sparse"}
# rows whose block lists are built once (flashc.blocks) and reused by every
# timed call, as a model reuses them across layers and forward / backward
PREBUILT = {"document_rt_prebuilt", "block_sparse_prebuilt"}


def spec_text(name):
    body = VARIANTS[SPEC_OF.get(name, name)][0]
    return (f"# bench/bench_variants.py: {name} (B={B}, H={H}, S={S}, d={D})\n"
            f"attention var_{name} {{\n  dtype = bf16; head_dim = {D}; heads = {H}; grad = true;\n"
            f"  {body}\n}}\n")


def write_variant_specs(d):
    write_specs(d, VARIANTS, spec_text)
    for name in VARIANTS:
        flags = VARIANTS[name][1]
        with open(os.path.join(d, name + ".flags"), "w") as f:
            f.write(" ".join(flags) + "\n")
    print(f"bench_variants: {len(VARIANTS)} specs in {d} (NAME.fa, NAME.flags: extra flashc flags)")


def doc_ids(torch):
    doc = torch.zeros(S, dtype=torch.int32, device="cuda")
    for b in DOC_BOUNDS:
        doc[b:] += 1
    return doc


def t5_bucket(q, k, torch):
    n = (q - k).clamp(min=0)
    large = 16 + torch.floor(torch.log(n.float() / 16) / math.log(8) * 16)
    return torch.where(n < 16, n.float(), large).clamp(0, 31).long()


def runtime_inputs(name, torch):
    """The values of variant name's run-time inputs (flashc's `inputs`)."""
    g = torch.Generator(device="cuda").manual_seed(7)
    name = SPEC_OF.get(name, name)
    if name == "document_rt":
        return {"doc": doc_ids(torch).expand(B, S).contiguous()}
    if name == "t5_bias":
        return {"rel_bias": torch.randn(H, 32, device="cuda", generator=g)}
    if name == "full_bias":
        return {"bias": torch.randn(B, H, S, S, device="cuda", dtype=torch.bfloat16, generator=g)}
    if name == "softcap_rt_causal":
        return {"cap": 50.0}
    if name == "block_sparse":  # 128 x 128 blocks: the diagonal and ~20% of the others
        nb = S // 128
        blocks = (torch.rand(H, nb, nb, device="cuda", generator=g) < 0.2).int()
        return {"blocks": blocks | torch.eye(nb, dtype=torch.int32, device="cuda")}
    return None


def flex_mods(name, torch, ins=None):
    """(mask_mod, score_mod) of FlexAttention for variant name (ins: its
    run-time inputs, captured by the mods)."""
    doc = doc_ids(torch)
    base = SPEC_OF.get(name, name)

    def causal(b, h, q, k):
        return k <= q

    masks = {
        "causal": causal,
        "window1024": lambda b, h, q, k: (k <= q) & (k > q - 1024),
        "document": lambda b, h, q, k: (k <= q) & (doc[q] == doc[k]),
        "prefix_lm": lambda b, h, q, k: (k < PREFIX) | (k <= q),
        "softcap50_causal": causal,
        "softcap50_full": None,
        "alibi_causal": causal,
        "document_rt": lambda b, h, q, k: (k <= q) & (ins["doc"][b, q] == ins["doc"][b, k]),
        "t5_bias": causal,
        "full_bias": None,
        "softcap_rt_causal": causal,
        "block_sparse": lambda b, h, q, k: ins["blocks"][h, q // 128, k // 128] != 0,
    }
    scores = {
        "softcap50_causal": lambda s, b, h, q, k: 50 * torch.tanh(s / 50),
        "softcap50_full": lambda s, b, h, q, k: 50 * torch.tanh(s / 50),
        "alibi_causal": lambda s, b, h, q, k: s - torch.exp2(-(h + 1.0) / 2) * (q - k).abs(),
        "t5_bias": lambda s, b, h, q, k: s + ins["rel_bias"][h, t5_bucket(q, k, torch)],
        "full_bias": lambda s, b, h, q, k: s + ins["bias"][b, h, q, k],
        "softcap_rt_causal": lambda s, b, h, q, k: 50 * torch.tanh(s / 50),
    }
    return masks[base], scores.get(base)


def density(mask_mod, torch):
    if mask_mod is None:
        return 1.0
    q = torch.arange(S, device="cuda").view(S, 1)
    k = torch.arange(S, device="cuda").view(1, S)
    return sum(mask_mod(torch.zeros((), dtype=torch.long, device="cuda"),
                        torch.full((), h, dtype=torch.long, device="cuda"), q, k).float().mean().item()
               for h in range(H)) / H


def main():
    global D
    a = peer_args()
    D = a.head_dim or D
    if a.write_specs:
        write_variant_specs(a.write_specs)
        return
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import flashc
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    from torch import _dynamo
    from bench import sustained_ms

    def time_ms(fn):  # 5 calls back to back a timing: the op's host work overlaps the GPU's;
        # the median over ~400 ms of calls: the power cap's phases (docs/perf-log.md P93)
        return sustained_ms(fn, reps=200, target_ms=400, inner=5)
    names = [n for n in VARIANTS if not a.only or n in a.only.split(",")]
    print(f"bench_variants: B={B} H={H} S={S} d={D} bf16; {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; TFLOP/s on kept pairs; ratio = Flex time / flashc time; "
          f"backward {a.backward_mode}")
    rows = []
    print(f"{'variant':18s} {'density':>7s} {'fwd ms':>8s} {'TFLOP/s':>8s} {'Flex':>8s} {'x':>5s}"
          f" | {'fwdbwd ms':>9s} {'TFLOP/s':>8s} {'Flex':>8s} {'x':>5s} | check")
    for name in names:
        mod = flashc.load(os.path.join(a.ptx_dir, name + ".ptx"))
        _dynamo.reset()  # a fresh compile a variant: no recompile limit reached
        flex = torch.compile(flex_attention, dynamic=False)
        ins = runtime_inputs(name, torch)
        mask_mod, score_mod = flex_mods(name, torch, ins)
        dens = density(mask_mod, torch)
        flops = 4.0 * B * H * S * S * D * dens
        g = torch.Generator(device="cuda").manual_seed(len(rows) + 1)
        q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
                       for _ in range(4))
        row = dict(variant=name, density=dens)
        blk = (flashc.blocks(q, k, mod, layout="bhsd", inputs=ins) if name in PREBUILT
               else None)
        ours_fwd = lambda: flashc.attention(q, k, v, mod, layout="bhsd", inputs=ins,  # noqa: E731
                                            blocks=blk)
        out = ours_fwd()
        bm = None
        if not a.no_flex:
            # a mask that reads the head needs a BlockMask per head (H=None
            # evaluates it for head 0 only and broadcasts that)
            bm = (create_block_mask(mask_mod, B=None, H=H if name in PER_HEAD else None,
                                    Q_LEN=S, KV_LEN=S, device="cuda")
                  if mask_mod else None)
            flex_fwd = lambda: flex(q, k, v, score_mod=score_mod, block_mask=bm)  # noqa: E731
            ref = flex_fwd()
            diff = (out.float() - ref.float()).abs().max().item()
            row["check"] = "ok" if diff < 2e-2 and not torch.isnan(out).any() else f"DIFF {diff:.2e}"
            row["max_diff_vs_flex"] = diff
        row["fwd_ms"] = time_ms(ours_fwd)
        row["fwd_tflops"] = flops / row["fwd_ms"] / 1e9
        if not a.no_flex:
            row["flex_fwd_ms"] = time_ms(flex_fwd)
            row["flex_fwd_tflops"] = flops / row["flex_fwd_ms"] / 1e9
        if not a.no_bwd:
            qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

            def ours_fb():
                flashc.attention(qg, kg, vg, mod, layout="bhsd", inputs=ins, blocks=blk,
                                 backward_mode=a.backward_mode).backward(do)

            row["fwdbwd_ms"] = time_ms(ours_fb)
            row["fwdbwd_tflops"] = 3.5 * flops / row["fwdbwd_ms"] / 1e9
            if not a.no_flex:
                def flex_fb():
                    flex(qg, kg, vg, score_mod=score_mod, block_mask=bm).backward(do)
                row["flex_fwdbwd_ms"] = time_ms(flex_fb)
                row["flex_fwdbwd_tflops"] = 3.5 * flops / row["flex_fwdbwd_ms"] / 1e9
        rows.append(row)

        print(f"{name:18s} {dens:7.3f} {row['fwd_ms']:8.3f} {cell(row, 'fwd_tflops')} "
              f"{cell(row, 'flex_fwd_tflops')} {ratio(row, 'fwd_ms', 'flex_fwd_ms')} | "
              f"{row.get('fwdbwd_ms', float('nan')):9.3f} {cell(row, 'fwdbwd_tflops')} "
              f"{cell(row, 'flex_fwdbwd_tflops')} {ratio(row, 'fwdbwd_ms', 'flex_fwdbwd_ms')} | "
              f"{row.get('check', '-')}", flush=True)
        del q, k, v, do
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                           time=time.strftime("%Y-%m-%d %H:%M:%S"), rows=rows), f, indent=1)
    bad = [r["variant"] for r in rows if r.get("check", "ok") != "ok"]
    print(f"bench_variants: {len(rows)} variants, {len(bad)} outside the sanity check"
          + (f" ({', '.join(bad)})" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
