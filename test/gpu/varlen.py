"""Packed sequences of different lengths on the GPU (issue 20, `varlen = true`):
specs test/gpu/varlen_specs, built by scripts/build-gpu-kernels.sh into
.device/varlen.

    python3 test/gpu/varlen.py .device/varlen [--seed N]

For every case: flashc.attention with cu_seqlens (forward and autograd
backward through the torch.library ops) on fresh random packed q, k, v,
dout [total, heads, d], against the spec's math applied to each sequence on
its own (positions from 0, seqlen_q / seqlen_k its own lengths), in float64
(ref) and in the input dtype (pt). FlashAttention's rule: max|out - ref| <=
2 max|pt - ref| + 1e-5, gradients 3x, no NaN; sequences with no keys give
out = 0 and zero gradients; dropout (vl_drop) per sequence against
fa_dropout_mask's decision at each sequence's own positions. The LSE ([heads, total_q], FlashAttention's
varlen layout) is checked against the float64 logsumexp. Then: lengths that
lie on the device (the kernel clamps them: nothing outside O is written),
and bad launches refused with the runtime's message (non-monotonic prefix
sums, a last entry that is not the total, a sequence longer than the
maximum, a padded kernel given cu_seqlens, a varlen kernel given none).
Prints PASS/FAIL lines and `varlen: N passed, N failed`.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check import DT, err, finish, parse_args, rand, report  # noqa: E402
import flashc  # noqa: E402
import flashc.ops  # noqa: E402


# ---- each spec's math on one sequence: (scores, keep) over [1, h, sq, sk] ----

def causal_math(s, ins, i, H, Q, K, sq, sk):
    return s, K <= Q + (sk - sq)


def full_math(s, ins, i, H, Q, K, sq, sk):
    return s, None


def window_softcap_math(s, ins, i, H, Q, K, sq, sk):
    qa = Q + (sk - sq)
    return 30 * torch.tanh(s / 30), (K <= qa) & (K > qa - 100)


def alibi_in_math(s, ins, i, H, Q, K, sq, sk):
    qa = Q + (sk - sq)
    slope = ins["slopes"].to(s.dtype)[H]
    return s / ins["temp"][i].to(s.dtype) - slope * (qa - K).to(s.dtype), K <= qa


MATH = {"vl_drop": causal_math, "vl_causal": causal_math, "vl_full": full_math, "vl_window": window_softcap_math,
        "vl_alibi": alibi_in_math}


def seq_attention(q, k, v, scale, math, ins, i, drop_keep=None, p_drop=0.0):
    """One sequence: q [sq, h, d], k, v [sk, kh, d] -> (out [sq, h, dv],
    lse [h, sq]); GQA by repeating k, v; rows with no key give 0 (lse -inf);
    drop_keep [h, sq, sk] (dropout): P's kept elements scaled by 1 / (1 - p)."""
    sq, h, _ = q.shape
    sk, kh = k.shape[0], k.shape[1]
    if sq == 0 or sk == 0:  # no queries, or no keys: 0 rows (lse -inf); keep the graph
        z = (q.sum() + k.sum() + v.sum()) * 0
        out = torch.zeros(sq, h, v.shape[2], dtype=q.dtype, device=q.device) + z
        return out, torch.full((h, sq), float("-inf"), dtype=q.dtype, device=q.device)
    qh = q.transpose(0, 1)[None]
    kk = k.transpose(0, 1).repeat_interleave(h // kh, dim=0)[None]
    vv = v.transpose(0, 1).repeat_interleave(h // kh, dim=0)[None]
    s = (qh @ kk.transpose(-1, -2)) * scale
    dev = q.device
    H = torch.arange(h, device=dev)[None, :, None, None]
    Q = torch.arange(sq, device=dev)[None, None, :, None]
    K = torch.arange(sk, device=dev)[None, None, None, :]
    s, keep = math(s, ins, i, H, Q, K, sq, sk)
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    lse = m + torch.log(torch.exp(s - m).sum(-1, keepdim=True))  # -inf where no key is kept
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    p = p / torch.where(l == 0, torch.ones_like(l), l)
    if drop_keep is not None:
        p = p * drop_keep[None].to(p.dtype) / (1 - p_drop)
    return (p @ vv)[0].transpose(0, 1), lse[0, :, :, 0]


def packed_attention(q, k, v, cq, ck, scale, math, ins, keep=None, p_drop=0.0):
    """keep: fa_dropout_mask over (num_seqs, max lengths); sequence i's mask
    is its [i, :, :len_q, :len_k] slice (the decision is per (b, h, q, k))."""
    outs, lses = [], []
    for i in range(len(cq) - 1):
        ki = keep[i, :, :cq[i + 1] - cq[i], :ck[i + 1] - ck[i]] if keep is not None else None
        o, l = seq_attention(q[cq[i]:cq[i + 1]], k[ck[i]:ck[i + 1]], v[ck[i]:ck[i + 1]],
                             scale, math, ins, i, ki, p_drop)
        outs.append(o)
        lses.append(l)
    return torch.cat(outs, 0), torch.cat(lses, 1)


def ref_grads(q, k, v, do, cq, ck, scale, math, ins, dtype, keep=None, p_drop=0.0):
    xs = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
    o, lse = packed_attention(*xs, cq, ck, scale, math, ins, keep, p_drop)
    o.backward(do.to(dtype))
    return [o.detach()] + [x.grad for x in xs], lse.detach()


def prefix(lens):
    c = [0]
    for n in lens:
        c.append(c[-1] + n)
    return c


def cu(c):
    return torch.tensor(c, dtype=torch.int32, device="cuda")


def case_inputs(name, nseq, H, gen):
    if name.startswith("vl_alibi"):
        return {"slopes": (torch.rand(H, generator=gen) * 0.1).cuda(),
                "temp": (torch.rand(nseq, generator=gen) * 1.5 + 0.5).cuda()}
    return None


CASES = {  # (query lengths, key lengths); None: the same as the queries
    "vl_causal_d128_bf16": [((1, 17, 128, 129, 1000, 300, 2048, 5), None), ((4096,), None),
                            ((0, 63, 0, 700), None), ((200, 31), (1000, 31))],
    "vl_full_d64_f16": [((5, 300, 0, 77, 1025), (400, 1, 1000, 77, 129)), ((3, 8), (0, 513))],
    "vl_window_softcap_d96_bf16": [((1000, 33, 257, 1), None), ((100, 900), (1500, 900))],
    "vl_alibi_in_d128_bf16": [((513, 1, 1024, 77), None), ((64, 300), (64, 2000))],
}


def check_case(mod, name, lens_q, lens_k, gen):
    info = mod.info
    dt, H, KH, D, DV = (DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"],
                        info["v_head_dim"])
    lens_k = lens_k or lens_q
    cq, ck = prefix(lens_q), prefix(lens_k)
    math = MATH["_".join(name.split("_")[:2])]
    ins = case_inputs(name, len(lens_q), H, gen)
    q, k, v = rand(cq[-1], H, D, dtype=dt), rand(ck[-1], KH, D, dtype=dt), rand(ck[-1], KH, DV, dtype=dt)
    do = rand(cq[-1], H, DV, dtype=dt)
    args = [x.clone().requires_grad_() for x in (q, k, v)]
    out = flashc.attention(*args, mod, cu_seqlens_q=cu(cq), cu_seqlens_k=cu(ck),
                           max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), inputs=ins)
    out.backward(do)
    got = [out] + [a.grad for a in args]
    scale = info["scale"]
    ref, ref_lse = ref_grads(q, k, v, do, cq, ck, scale, math, ins, torch.float64)
    pt, _ = ref_grads(q, k, v, do, cq, ck, scale, math, ins, dt)
    ok, lines = True, []
    for label, g, r, p_, mult in zip(("out", "dq", "dk", "dv"), got, ref, pt, (2, 3, 3, 3)):
        e, bound = err(g, r), mult * err(p_, r) + 1e-5
        ok &= g.shape == r.shape and e <= bound and not torch.isnan(g).any().item()
        lines.append(f"{label} {e:.1e}/{bound:.1e}")
    # the LSE through the module's own forward: [heads, total_q]
    o2 = torch.full((cq[-1], H, DV), float("nan"), device="cuda", dtype=dt)
    lse = torch.full((H, cq[-1]), float("nan"), device="cuda")
    mod.forward(q, k, v, out=o2, lse=lse, cu_seqlens_q=cu(cq), cu_seqlens_k=cu(ck),
                max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), inputs=ins)
    torch.cuda.synchronize()
    live = torch.isfinite(ref_lse)
    e_lse = err(lse[live], ref_lse[live])
    ok &= e_lse < 1e-3 and bool((lse[~live] <= -1e30).all().item() if (~live).any() else True)
    ok &= torch.equal(o2, out.detach())  # one kernel, one result
    lines.append(f"lse {e_lse:.1e}")
    # the atomic launch too: its dQ sums in the workspace padded to the longest
    # sequence (where the main kernel's TMA reductions add, docs/abi.md)
    at = [x.clone().requires_grad_() for x in (q, k, v)]
    out_at = flashc.attention(*at, mod, cu_seqlens_q=cu(cq), cu_seqlens_k=cu(ck),
                              max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), inputs=ins,
                              backward_mode="atomic")
    out_at.backward(do)
    for label, g, r, p_ in zip(("dq", "dk", "dv"), [a.grad for a in at], ref[1:], pt[1:]):
        e, bound = err(g, r), 3 * err(p_, r) + 1e-5
        ok &= g.shape == r.shape and e <= bound and not torch.isnan(g).any().item()
        lines.append(f"atomic {label} {e:.1e}/{bound:.1e}")
    # sequences without keys: their rows are 0 and so are their gradients
    empty_rows = [t for i in range(len(lens_q)) if lens_k[i] == 0 for t in range(cq[i], cq[i + 1])]
    if empty_rows:
        rows = torch.tensor(empty_rows, device="cuda")
        ok &= out.detach()[rows].abs().max().item() == 0 and args[0].grad[rows].abs().max().item() == 0
        lines.append(f"{len(empty_rows)} keyless rows 0")
    report(ok, f"{name} {len(lens_q)} seqs", f"total {cq[-1]}/{ck[-1]}: " + ", ".join(lines))


def check_dropout(mod, gen_seed):
    """Dropout per sequence: after torch.manual_seed the op draws (seed, 0)
    and advances the generator by num_seqs x heads x 32 (SDPA's rule, a
    varlen batch's batch being its sequences); its keep decision is
    fa_dropout_mask's over (num_seqs, the longest lengths), each sequence's
    mask the slice at its own positions. Out and gradients against float64
    with that mask (2x / 3x rule); two calls draw different masks."""
    info = mod.info
    H, KH, D, p = info["heads"], info["kv_heads"], info["head_dim"], mod.dropout
    lens = (1, 130, 257, 64)
    c = prefix(lens)
    q, k, v, do = (rand(c[-1], n, D, dtype=torch.bfloat16) for n in (H, KH, KH, H))
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    torch.manual_seed(gen_seed)
    args = [x.clone().requires_grad_() for x in (q, k, v)]
    kw = dict(cu_seqlens_q=cu(c), cu_seqlens_k=cu(c), max_seqlen_q=max(lens), max_seqlen_k=max(lens))
    out = flashc.attention(*args, mod, dropout_p=p, **kw)
    advanced = gen.get_offset() == len(lens) * H * 32
    out.backward(do)
    keep = mod.dropout_mask(p, gen_seed, 0, len(lens), max(lens), max(lens)).cuda()
    ref, _ = ref_grads(q, k, v, do, c, c, info["scale"], causal_math, None, torch.float64, keep, p)
    pt, _ = ref_grads(q, k, v, do, c, c, info["scale"], causal_math, None, torch.bfloat16, keep, p)
    ok, lines = advanced, []
    for label, g, r, p_, mult in zip(("out", "dq", "dk", "dv"), [out] + [a.grad for a in args], ref, pt,
                                     (2, 3, 3, 3)):
        e, bound = err(g, r), mult * err(p_, r) + 1e-5
        ok &= e <= bound and not torch.isnan(g).any().item()
        lines.append(f"{label} {e:.1e}/{bound:.1e}")
    o2 = flashc.attention(q, k, v, mod, dropout_p=p, **kw)
    ok &= not torch.equal(o2, out.detach())
    report(ok, f"{mod.info['kernel']} dropout p={p}", f"offset advanced {advanced}; "
           + ", ".join(lines) + "; a second call's mask differs")


def check_clamped(mod):
    """Prefix sums that lie on the device (the host copies the runtime
    checked say otherwise): the kernel clamps each sequence to [0, total] and
    to the maximum, so it writes nothing outside O (a poisoned guard region
    around O stays as it was) and reads nothing outside Q, K, V."""
    H, KH, D = mod.info["heads"], mod.info["kv_heads"], mod.info["head_dim"]
    lens = (100, 200, 300)
    c = prefix(lens)
    q, k, v = rand(c[-1], H, D, dtype=torch.bfloat16), rand(c[-1], KH, D, dtype=torch.bfloat16), \
        rand(c[-1], KH, D, dtype=torch.bfloat16)
    guard = 64
    buf = torch.full((c[-1] + 2 * guard, H, D), 7.0, device="cuda", dtype=torch.bfloat16)
    o = buf[guard:guard + c[-1]]
    lies = cu([0, -50, 10**9, 2**31 - 1])
    try:
        mod.forward(q, k, v, out=o, cu_seqlens_q=lies, cu_seqlens_k=lies, max_seqlen_q=300,
                    max_seqlen_k=300, host_cu_seqlens_q=c, host_cu_seqlens_k=c)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - reported
        report(False, "lying cu_seqlens clamped", f"{type(e).__name__}: {e}")
        return
    ok = bool((buf[:guard] == 7).all().item() and (buf[guard + c[-1]:] == 7).all().item())
    report(ok, "lying cu_seqlens clamped", "guard rows around O untouched" if ok else "guard written")


def expect_refusal(name, fn, want):
    try:
        fn()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        ok = want in str(e)
        report(ok, f"refuse {name}", f"{type(e).__name__}: {str(e)[:110]}")
        return
    report(False, f"refuse {name}", "launch was accepted")


def check_refusals(mods, padded):
    mod = mods["vl_causal_d128_bf16"]
    q = rand(300, 16, 128, dtype=torch.bfloat16)
    k = rand(300, 4, 128, dtype=torch.bfloat16)

    def launch(cq, ck=None, mq=300, mk=300, m=mod, qq=q, kk=k):
        return flashc.attention(qq, kk, kk, m, cu_seqlens_q=cu(cq), cu_seqlens_k=cu(ck or cq),
                                max_seqlen_q=mq, max_seqlen_k=mk)
    expect_refusal("non-monotonic", lambda: launch([0, 200, 100, 300]), "cu_seqlens")
    expect_refusal("last != total", lambda: launch([0, 100, 299]), "cu_seqlens")
    expect_refusal("first != 0", lambda: launch([1, 100, 300]), "cu_seqlens")
    expect_refusal("longer than max", lambda: launch([0, 10, 300], mq=100, mk=100), "max_seqlen")
    expect_refusal("varlen kernel, no cu_seqlens", lambda: flashc.attention(q[None], k[None], k[None], mod),
                   "varlen")
    if padded is not None:
        i = padded.info
        qp = rand(300, i["heads"], i["head_dim"], dtype=DT[i["dtype"]])
        kp = rand(300, i["kv_heads"], i["head_dim"], dtype=DT[i["dtype"]])
        expect_refusal("padded kernel, cu_seqlens",
                       lambda: launch([0, 300], m=padded, qq=qp, kk=kp), "varlen")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--padded", default=".device/ptx/gqa_d64_bf16.ptx",
                    help="a padded (not varlen) kernel, for a refusal")
    ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
    a = parse_args(ap)
    print(f"varlen: seed {a.seed}")
    gen = torch.Generator().manual_seed(a.seed)
    torch.manual_seed(a.seed)
    mods = {}
    for f in sorted(os.listdir(a.dir)):
        if f.endswith(".ptx"):
            mods[f[:-4]] = flashc.load(os.path.join(a.dir, f))
    for name, cases in CASES.items():
        if name not in mods:
            report(False, name, "no kernel (scripts/build-gpu-kernels.sh)")
            continue
        for lq, lk in cases:
            try:
                check_case(mods[name], name, lq, lk, gen)
            except Exception as e:  # noqa: BLE001 - a failing case is reported, the rest run
                report(False, f"{name} {len(lq)} seqs", f"{type(e).__name__}: {str(e)[:200]}")
    if "vl_drop_d64_bf16" in mods:
        check_dropout(mods["vl_drop_d64_bf16"], a.seed % 100000)
    else:
        report(False, "vl_drop_d64_bf16", "no kernel (scripts/build-gpu-kernels.sh)")
    check_clamped(mods["vl_causal_d128_bf16"])
    check_refusals(mods, flashc.load(a.padded) if os.path.exists(a.padded) else None)
    finish("varlen")


if __name__ == "__main__":
    main()
