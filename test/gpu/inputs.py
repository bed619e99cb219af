"""Run-time inputs on the GPU (issue 20): specs that read tensors and scalars
given at launch (test/gpu/input_specs, built by scripts/build-gpu-kernels.sh
into .device/inputs).

    python3 test/gpu/inputs.py .device/inputs [--seed N]

For every case: flashc.attention (forward and autograd backward, through
the torch.library ops) with fresh random q, k, v, dout and inputs, against
the spec's math written again here in torch: in float64 (ref) and in the
input dtype (pt). FlashAttention's rule: max|out - ref| <= 2 max|pt - ref|
+ 1e-5, gradients 3x, no NaN; fully masked rows (a window of 0) give out = 0
and zero gradients. New input values reuse the same kernel (no recompile),
strides 0 and transposed views are read as given, and bad bindings are
refused with the C runtime's message (a `require` broken, a wrong dim or
dtype, a missing or unknown input).
A block-sparse table (inp_blocks: 128 x 128 blocks, one entry per tile pair)
reads the same way as the other masks, and an all-zero table gives zeros.
A bf16 bias (inp_hbias: 2-byte elements) is read
at odd row strides, one element off its base and broadcast over the keys
(at d128 the kernel stage-inputs left gathering those: its copy
@NAME_gathered), and contiguous with 16-byte rows (the kernel whose
producer copies the bias tile by TMA: passes/stage_inputs.c).
Decode: inp_dec_d128_bf16 (slopes, a softcap value and a per-query bias)
through Module.decode against the same reference per sequence, forward only.
Prints PASS/FAIL lines and `inputs: N passed, N failed`.
"""
import functools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check  # noqa: E402
from gpu_check import DT, err, finish, load_modules, rand, report, run_cases, start  # noqa: E402
import flashc  # noqa: E402
import flashc.ops  # noqa: E402


# ---- each spec's math: (score modifier, keep mask) over [b, h, sq, sk] ----

def grids(b, h, sq, sk):
    dev = "cuda"
    return (torch.arange(b, device=dev)[:, None, None, None],
            torch.arange(h, device=dev)[None, :, None, None],
            torch.arange(sq, device=dev)[None, None, :, None],
            torch.arange(sk, device=dev)[None, None, None, :])


def doc_math(s, ins, B, H, Q, K):
    doc = ins["doc"].long()  # [b, seqlen_k]; q < seqlen_q <= seqlen_k (the spec's require)
    dq = doc[:, :Q.shape[2]][:, None, :, None]
    dk = doc[:, None, None, :]
    return s, (K <= Q) & (dq == dk)


def t5_math(s, ins, B, H, Q, K):
    bucket = (K - Q + 16).clamp(0, 31)
    bias = ins["bias"].to(s.dtype)[H, bucket]
    slope = ins["slopes"].to(s.dtype)[H]
    w = ins["window"]
    return s + bias - slope * (Q - K).abs().to(s.dtype), ((Q - K) < w) & ((K - Q) < w)


def bias_math(s, ins, B, H, Q, K):
    cap = ins["cap"]
    return cap * torch.tanh(s / cap) + ins["bias"].to(s.dtype), None


def prefix_math(s, ins, B, H, Q, K):
    return s, (K <= Q) | (K < ins["prefix"].long()[:, None, None, None])


def blocks_math(s, ins, B, H, Q, K):
    qb, kb = (Q // 128).clamp(max=15), (K // 128).clamp(max=15)
    return s, ins["blocks"].long()[H, qb, kb] != 0


def temp_math(s, ins, B, H, Q, K):
    """s arrives unscaled (the spec's scale is 1 / (8 temp), known at launch)."""
    s = s / (8 * ins["temp"])
    cap = ins["cap"]
    sq, sk = s.shape[2], s.shape[3]
    return cap * torch.tanh(s / cap), K <= Q + (sk - sq)


def attention_ref(q, k, v, scale, math, ins):
    """The spec's attention in q's dtype ([b, s, h, d] in and out; GQA by
    repeating k, v); fully masked rows give 0."""
    b, sq, h, _ = q.shape
    sk, kh = k.shape[1], k.shape[2]
    qh = q.transpose(1, 2)
    kh_ = k.transpose(1, 2).repeat_interleave(h // kh, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(h // kh, dim=1)
    s = (qh @ kh_.transpose(-1, -2)) * scale
    s, keep = math(s, ins, *grids(b, h, sq, sk))
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    p = p / torch.where(l == 0, torch.ones_like(l), l)
    return (p @ vh).transpose(1, 2)


def ref_grads(q, k, v, do, scale, math, ins, dtype):
    xs = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
    o = attention_ref(*xs, scale, math, ins)
    o.backward(do.to(dtype))
    return [o.detach()] + [x.grad for x in xs]


# ---- cases ----------------------------------------------------------------

def doc_ids(b, s, ndocs, gen):
    """Sorted document ids: ndocs documents of random lengths per sequence."""
    cuts = torch.sort(torch.randint(1, s, (b, ndocs - 1), generator=gen))[0]
    pos = torch.arange(s)[None, :]
    return (pos[:, :, None] >= cuts[:, None, :]).sum(-1).to(torch.int32).cuda()


def case_inputs(name, b, sq, sk, H, gen, variant=""):
    if name.startswith("inp_doc"):
        return {"doc": doc_ids(b, sk, 6, gen)}
    if name.startswith("inp_t5"):
        return {"bias": torch.randn(H, 32, generator=gen).to(torch.bfloat16).cuda(),
                "slopes": (torch.rand(H, generator=gen) * 0.1).cuda(),
                "window": 0 if variant == "empty" else int(torch.randint(1, 300, (1,), generator=gen))}
    if name.startswith("inp_bias") or name.startswith("inp_hbias"):
        half = name.startswith("inp_hbias")  # bf16: read two columns a load where it can
        bias = torch.randn(b, H, sq, sk + 1, generator=gen).cuda()
        bias = bias.to(torch.bfloat16) if half else bias
        bias = bias[..., 1:] if variant == "offset" else bias[..., :sk]  # the base 1 element off
        if variant == "contig":  # 16-byte rows: stage-inputs' tensor map copies it (d128)
            bias = bias.contiguous()
        if variant == "broadcast":  # stride 0 over the batch
            bias = bias[:1].expand(b, H, sq, sk)
        if variant == "kbroadcast":  # stride 0 over the keys: no two columns adjacent
            bias = bias[..., :1].expand(b, H, sq, sk)
        return {"bias": bias, "cap": float(torch.rand(1, generator=gen)) * 20 + 5}
    if name.startswith("inp_prefix"):
        return {"prefix": torch.randint(0, sk + 1, (b,), generator=gen).to(torch.int32).cuda()}
    if name.startswith("inp_blocks"):  # ~30% of the blocks, the diagonal's always (no empty rows)
        t = (torch.rand(H, 16, 16, generator=gen) < 0.3).to(torch.int32)
        if variant == "empty":
            t.zero_()
        else:
            t |= torch.eye(16, dtype=torch.int32)[None]
        return {"blocks": t.cuda()}
    if name.startswith("inp_temp"):
        return {"temp": float(torch.rand(1, generator=gen)) * 1.5 + 0.25,
                "cap": float(torch.rand(1, generator=gen)) * 20 + 5}
    raise KeyError(name)


MATH = {"inp_doc": doc_math, "inp_t5": t5_math, "inp_bias": bias_math, "inp_hbias": bias_math,
        "inp_prefix": prefix_math,
        "inp_temp": temp_math, "inp_blocks": blocks_math}
CASES = {  # (batch, seqlen_q, seqlen_k, variant)
    "inp_doc_d128_bf16": [(2, 1023, 1023, ""), (1, 4096, 4096, ""), (2, 113, 203, "")],
    "inp_t5_d64_f16": [(2, 1025, 1025, ""), (1, 203, 1023, ""), (1, 113, 113, "empty")],
    "inp_bias_d64_bf16": [(2, 513, 1023, ""), (3, 203, 203, "broadcast")],
    "inp_hbias_d64_bf16": [(2, 513, 1024, ""), (2, 300, 1023, ""), (1, 203, 256, "offset"),
                           (2, 128, 256, "kbroadcast")],
    "inp_hbias_d128_bf16": [(2, 513, 1024, ""), (1, 1023, 1025, ""), (1, 203, 256, "offset"),
                            (2, 128, 256, "kbroadcast"), (2, 513, 1024, "contig"),
                            (1, 1000, 1000, "contig"), (1, 77, 2056, "contig")],
    "inp_prefix_d128_bf16": [(3, 1023, 1023, ""), (2, 17, 1025, "")],
    "inp_temp_d64_bf16": [(2, 1023, 1023, ""), (1, 203, 4096, "")],
    "inp_blocks_d64_bf16": [(2, 2048, 2048, ""), (1, 1000, 1900, ""), (1, 300, 300, "empty")],
}


def check_case(mod, name, case, gen):
    info = mod.info
    dt, H, KH, D, DV = (DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"],
                        info["v_head_dim"])
    b, sq, sk, variant = case
    math = MATH["_".join(name.split("_")[:2])]
    ins = case_inputs(name, b, sq, sk, H, gen, variant)
    q, k, v = rand(b, sq, H, D, dtype=dt), rand(b, sk, KH, D, dtype=dt), rand(b, sk, KH, DV, dtype=dt)
    do = rand(b, sq, H, DV, dtype=dt)
    args = [x.clone().requires_grad_() for x in (q, k, v)]
    out = flashc.attention(*args, mod, inputs=ins)
    out.backward(do)
    got = [out] + [a.grad for a in args]
    scale = info["scale"] or 1.0  # 0: known at launch only (the case's math applies it)
    ref = ref_grads(q, k, v, do, scale, math, ins, torch.float64)
    pt = ref_grads(q, k, v, do, scale, math, ins, dt)
    ok, lines = True, []
    for label, g, r, p_, mult in zip(("out", "dq", "dk", "dv"), got, ref, pt, (2, 3, 3, 3)):
        e, bound = err(g, r), mult * err(p_, r) + 1e-5
        ok &= e <= bound and not torch.isnan(g).any().item()
        lines.append(f"{label} {e:.1e}/{bound:.1e}")
    if variant == "empty":  # every row fully masked: exact zeros
        ok &= all(g.abs().max().item() == 0 for g in got)
        lines.append("all zero")
    report(ok, f"{name} {variant or 'values'}", f"b={b} sq={sq} sk={sk}: " + ", ".join(lines))


expect_refusal = functools.partial(gpu_check.expect_refusal, limit=110)


def check_refusals(mods):
    doc = mods["inp_doc_d128_bf16"]
    q = rand(1, 300, 16, 128, dtype=torch.bfloat16)
    k = rand(1, 200, 4, 128, dtype=torch.bfloat16)
    ids = torch.zeros(1, 200, dtype=torch.int32, device="cuda")
    expect_refusal("require seqlen_q<=seqlen_k", lambda: flashc.attention(q, k, k, doc, inputs={"doc": ids}),
                   "seqlen_q")
    q2 = rand(1, 200, 16, 128, dtype=torch.bfloat16)
    expect_refusal("dim", lambda: flashc.attention(q2, k, k, doc, inputs={"doc": ids[:, :100]}), "doc")
    expect_refusal("dtype", lambda: flashc.attention(q2, k, k, doc, inputs={"doc": ids.float()}), "doc")
    expect_refusal("missing", lambda: flashc.attention(q2, k, k, doc), "doc")
    expect_refusal("unknown", lambda: flashc.attention(q2, k, k, doc, inputs={"doc": ids, "x": 1.0}), "x")
    t5 = mods["inp_t5_d64_f16"]
    q3 = rand(1, 64, 8, 64, dtype=torch.float16)
    good = {"bias": torch.zeros(8, 32, dtype=torch.bfloat16, device="cuda"),
            "slopes": torch.zeros(8, device="cuda"), "window": 1.5}
    expect_refusal("i32 scalar not integral", lambda: flashc.attention(q3, q3, q3, t5, inputs=good),
                   "window")


def check_decode(mod, gen):
    """Decode with inputs: q_len tokens of each sequence against its cache
    (lengths 1 .. 5000, one empty-ish), forward only, against the float64
    reference of the same math per sequence (the 2x rule, pt in bf16)."""
    info = mod.info
    H, KH, D = info["heads"], info["kv_heads"], info["head_dim"]
    for b, ql, lens, nsplit in ((3, 1, (1, 777, 5000), 0), (2, 4, (300, 4096), 0), (4, 2, (17, 2, 900, 64), 3)):
        cap_len = max(lens)
        q = rand(b, ql, H, D, dtype=torch.bfloat16)
        kc = rand(b, cap_len, KH, D, dtype=torch.bfloat16)
        vc = rand(b, cap_len, KH, D, dtype=torch.bfloat16)
        seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
        ins = {"slopes": (torch.rand(H, generator=gen) * 0.05).cuda(),
               "cap": float(torch.rand(1, generator=gen)) * 20 + 5,
               "qbias": torch.randn(b, ql, generator=gen).cuda()}
        out = mod.decode(q, kc, vc, seq, nsplit=nsplit, inputs=ins)
        worst, bound, ok = 0.0, 0.0, not torch.isnan(out).any().item()
        for i in range(b):
            n = lens[i]

            def math(s, ins_, B, H_, Q, K, i=i, n=n):
                sq = s.shape[2]
                qq = Q + (n - sq)  # the queries are the last q_len positions of the cache
                s = ins_["cap"] * torch.tanh(s / ins_["cap"]) - ins_["slopes"].to(s.dtype)[H_] * (qq - K) \
                    + ins_["qbias"][i].to(s.dtype)[Q]
                return s, K <= qq
            qi, ki, vi = q[i:i + 1], kc[i:i + 1, :n], vc[i:i + 1, :n]
            ref = attention_ref(qi.double(), ki.double(), vi.double(), info["scale"], math, ins)
            pt = attention_ref(qi, ki, vi, info["scale"], math, ins)
            e, bd = err(out[i:i + 1], ref), 2 * err(pt, ref) + 1e-5
            worst, bound, ok = max(worst, e), max(bound, bd), ok and e <= bd
        report(ok, "inp_dec_d128_bf16 decode", f"b={b} q_len={ql} lens={lens} nsplit={nsplit}: "
               f"out {worst:.1e}/{bound:.1e}")


def check_reuse(mods, gen):
    """Two document layouts, one module: the second call's output follows
    the second layout (no stale state, no recompile)."""
    mod = mods["inp_doc_d128_bf16"]
    b, s = 1, 1024
    q, k, v = (rand(b, s, 16 if i == 0 else 4, 128, dtype=torch.bfloat16) for i in range(3))
    outs = []
    for nd in (2, 9):
        ins = {"doc": doc_ids(b, s, nd, gen)}
        o = flashc.attention(q, k, v, mod, inputs=ins)
        r = attention_ref(q.double(), k.double(), v.double(), mod.info["scale"], doc_math, ins)
        outs.append(err(o, r))
    report(max(outs) < 2e-2, "reuse one kernel, two layouts", f"errors {outs[0]:.1e}, {outs[1]:.1e}")


def main():
    a, gen = start("inputs")
    mods = load_modules(a.ptx_dir, CASES)
    run_cases(mods, CASES, lambda mod, name, case: check_case(mod, name, case, gen))
    dec = os.path.join(a.ptx_dir, "inp_dec_d128_bf16.ptx")
    if os.path.exists(dec):
        try:
            check_decode(flashc.load(dec), gen)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            report(False, "inp_dec_d128_bf16 decode", f"{type(e).__name__}: {e}")
    else:
        report(False, "inp_dec_d128_bf16", f"no {dec}")
    if "inp_doc_d128_bf16" in mods and "inp_t5_d64_f16" in mods:
        check_refusals(mods)
        check_reuse(mods, gen)
    finish("inputs")


if __name__ == "__main__":
    main()
