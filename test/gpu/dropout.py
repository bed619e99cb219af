"""GPU check of dropout (docs/dropout.md) through the runtime, on the GPU machine.

    python3 test/gpu/dropout.py PTX_DIR --lib build-gpu/libflashc_runtime.so
                                [--seed N] [--only NAME,...] [--reruns N]

For every PTX_DIR/NAME.ptx whose NAME is in SPECS below (the modules of
test/gpu/dropout_specs/NAME.fa: NAME, NAME_dropout and the backward kernels,
which take dropout's arguments), through fa_forward / fa_backward:
  1. per case, fresh random q, k, v, dO and a fresh (seed, offset): O, LSE of
     fa_forward with the spec's p, and dQ, dK, dV of fa_backward (atomic and
     deterministic) with the same p, seed, offset, outputs NaN-poisoned,
     against FlashAttention's rule, the mask M from fa_dropout_mask (the host
     definition):
        ref = the spec's attention with O = (P o M / (1 - p)) V, float64
        pt  = the same in the input dtype
        O: max|out - ref| <= 2 max|pt - ref| + 1e-5; gradients at 3x;
        LSE: the undropped one, within 1e-4 (relative above 1); no NaN;
     then the same backward at p = 0 against the reference without dropout;
  2. the mask bits themselves, on one unmasked-shape case: Q = 0 makes P
     uniform over the allowed keys, V the identity (seqlen_k = v_head_dim),
     so O[q, k] != 0 exactly where the forward kernel kept (q, k); dO the
     identity (seqlen_q = v_head_dim) makes dV[k, q] != 0 exactly where the
     K/V-outer backward kernel kept it: both equal to fa_dropout_mask
     (within the attention mask) bit for bit;
  3. the race test: --reruns (default 250) forward + deterministic backward
     launches with the same seed and offset: O, LSE, dQ, dK, dV bitwise
     identical; another offset changes O;
  4. for the `dropout_mask = torch` specs: PyTorch's SDPA flash backend on
     the same inputs with return_debug_mask; its seed and offset give
     fa_dropout_mask the same mask as its debug mask's sign bits, and our O
     on them is within the 2x rule of the float64 reference on that mask.
Prints a line per check and `N passed, N failed`.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backward import attention, err, grads  # noqa: E402  (the references, with dropout)
from backward_specs import softcap, spec  # noqa: E402
from specs import causal, window  # noqa: E402
import flashc_rt  # noqa: E402

DT = {"bf16": torch.bfloat16, "f16": torch.float16}

# No (1, 1, 1) case: with one key the exact dS is 0, and PyTorch's bf16
# autograd (pt) cancels to exactly 0 too, but FlashAttention's D = rowsum(dO o O)
# reads O rounded to bf16, which with dropout's 1 / (1 - p) is not V: |dS| ~
# 2^-9 |dP| against a bound of 1e-5 (the p = 0 suite, backward.py, has it:
# there O = V exactly). (1, 1, 67) keeps the single query row; with three keys
# (1, 1, 3) the rule's maxima were over 3 x 64 gradient elements a head, few
# enough that PyTorch's bf16 error fell under a third of ours on some draws
# (dK 6.5e-3 against 5.5e-3, docs/perf-log.md P132): 67 keys keep one row and
# a partial tile with enough elements for the maxima to mean something.
SPECS = {
    "drop_mha_d64_bf16_causal": dict(spec("bf16", 64, 4, 4, mask=causal, cases=[
        (2, 128, 128), (1, 203, 1025), (2, 300, 17), (1, 1, 67)]), p=0.1),
    "drop_gqa_d128_bf16": dict(spec("bf16", 128, 8, 2, cases=[
        (1, 1025, 1023), (2, 113, 17), (1, 2048, 2048)]), p=0.17),
    "drop_softcap_d128_f16_window": dict(spec("f16", 128, 4, 2, v_head_dim=64, mask=window(100),
                                              score=softcap(30.0), cases=[
        (1, 1023, 1023), (2, 17, 300)]), p=0.5),
    "drop_d256_bf16_causal": dict(spec("bf16", 256, 2, 2, mask=causal, cases=[
        (1, 203, 113), (2, 64, 1025)]), p=0.1),
    # dropout_mask = torch: PyTorch's flash-backend mask (check_torch below too)
    "drop_torch_d128_bf16_causal": dict(spec("bf16", 128, 4, 4, mask=causal, cases=[
        (2, 300, 300), (1, 1025, 1023)]), p=0.15, torch=True),
    "drop_torch_d64_f16": dict(spec("f16", 64, 6, 6, cases=[(2, 203, 517)]), p=0.3, torch=True),
}


def allowed(s, sq, sk):
    """The attention mask [sq, sk] (True: attended)."""
    if not s["mask"]:
        return torch.ones(sq, sk, dtype=torch.bool)
    return s["mask"](torch.arange(sq).view(sq, 1), torch.arange(sk).view(1, sk), sq, sk)


def check_values(mod, name, s, case, gen, rng):
    b, sq, sk = case
    dt = DT[s["dtype"]]
    H, KH, D, DV, p = s["heads"], s["kv_heads"], s["head_dim"], s["v_head_dim"], s["p"]

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dt)

    q, k, v, do = randn(b, sq, H, D), randn(b, sk, KH, D), randn(b, sk, KH, DV), randn(b, sq, H, DV)
    seed, offset = int(rng.integers(0, 2**63)), int(rng.integers(0, 2**40)) * 4
    keep = mod.dropout_mask(p, seed, offset, b, sq, sk).bool()
    drop = (keep, p)
    o = torch.full((b, sq, H, DV), float("nan"), device="cuda", dtype=dt)
    lse = torch.full((b, H, sq), float("nan"), device="cuda", dtype=torch.float32)
    mod.forward(q, k, v, o, lse, dropout=(p, seed, offset))
    torch.cuda.synchronize()
    ref = attention(s, q.double(), k.double(), v.double(), sq, sk, drop)
    pt = attention(s, q, k, v, sq, sk, drop)
    e, bound = err(o, ref), 2 * err(pt, ref) + 1e-5
    lse_ref = undropped_lse(s, q.double(), k.double(), sq, sk)
    lse_err = lse_gap(lse, lse_ref)
    nan = int(torch.isnan(o).sum() + torch.isnan(lse).sum())
    ok = nan == 0 and e <= bound and lse_err <= 1e-4
    line = (f"{name:30s} b={b} sq={sq:<5d} sk={sk:<5d} p={p} O {e:.2e}/{bound:.2e} "
            f"LSE {lse_err:.1e} nan {nan}")
    for pp, dr in ((p, drop), (0.0, None)):
        gref = grads(s, q, k, v, do, sq, sk, torch.float64, dr)
        gpt = grads(s, q, k, v, do, sq, sk, dt, dr)
        o2, lse2 = o, lse
        if pp == 0.0:  # the plain forward's O and LSE for the backward at p = 0
            o2 = torch.full_like(o, float("nan"))
            lse2 = torch.full_like(lse, float("nan"))
            mod.forward(q, k, v, o2, lse2)
        bounds = [3 * err(a, r) + 1e-5 for a, r in zip(gpt, gref)]
        for mode, tag in ((mod.BACKWARD_ATOMIC, "atomic"), (mod.BACKWARD_DETERMINISTIC, "det")):
            g = [torch.full_like(x, float("nan")) for x in (q, k, v)]
            mod.backward(q, k, v, o2, lse2, do, *g, mode=mode, dropout=(pp, seed, offset))
            torch.cuda.synchronize()
            errs = [err(x, r) for x, r in zip(g, gref)]
            gnan = sum(int(torch.isnan(x).sum()) for x in g)
            gok = gnan == 0 and all(x <= y for x, y in zip(errs, bounds))
            ok &= gok
            line += (f" | p={pp} {tag} dq {errs[0]:.1e}/{bounds[0]:.1e} dk {errs[1]:.1e}/"
                     f"{bounds[1]:.1e} dv {errs[2]:.1e}/{bounds[2]:.1e}{'' if gok else ' WRONG'}")
    print(("PASS " if ok else "FAIL ") + line, flush=True)
    return ok


def undropped_lse(s, q, k, sq, sk):
    """LSE [b, h, sq] of the scores (dropout does not change it); -inf for empty rows."""
    H, KH = s["heads"], s["kv_heads"]
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(H // KH, dim=1)
    sc = (qh @ kh.transpose(-1, -2)) * s["scale"]
    if s["score"]:
        hi = torch.arange(H, device=q.device).view(1, H, 1, 1)
        qi = torch.arange(sq, device=q.device).view(1, 1, sq, 1)
        ki = torch.arange(sk, device=q.device).view(1, 1, 1, sk)
        sc = s["score"](sc, torch, hi, qi, ki)
    sc = sc.masked_fill(~allowed(s, sq, sk).to(q.device), float("-inf"))
    return torch.logsumexp(sc, dim=-1)


def lse_gap(lse, ref):
    lse, ref = lse.double(), ref
    both_inf = torch.isinf(ref) & (lse == ref)
    d = torch.where(both_inf, torch.zeros_like(ref), (lse - ref).abs() / ref.abs().clamp(min=1))
    return d.max().item() if d.numel() else 0.0


def check_bits(mod, name, s, gen, rng):
    """O != 0 and dV != 0 exactly where the host mask keeps (within the attention mask)."""
    dt = DT[s["dtype"]]
    H, KH, D, DV, p = s["heads"], s["kv_heads"], s["head_dim"], s["v_head_dim"], s["p"]
    b, n = 2, DV
    seed, offset = int(rng.integers(0, 2**63)), int(rng.integers(0, 2**62))
    q = torch.zeros(b, n, H, D, device="cuda", dtype=dt)
    k = torch.randn(b, n, KH, D, generator=gen, device="cuda").to(dt)
    eye = torch.eye(n, device="cuda", dtype=dt)
    v = eye.view(1, n, 1, n).expand(b, n, KH, n).contiguous()
    o = torch.full((b, n, H, DV), float("nan"), device="cuda", dtype=dt)
    lse = torch.empty((b, H, n), device="cuda", dtype=torch.float32)
    mod.forward(q, k, v, o, lse, dropout=(p, seed, offset))
    do = eye.view(1, n, 1, n).expand(b, n, H, n).contiguous()
    g = [torch.full_like(x, float("nan")) for x in (q, k, v)]
    mod.backward(q, k, v, o, lse, do, *g, mode=mod.BACKWARD_DETERMINISTIC,
                 dropout=(p, seed, offset))
    torch.cuda.synchronize()
    want = mod.dropout_mask(p, seed, offset, b, n, n).bool() & allowed(s, n, n)
    # Q = 0 with a score modifier of s alone keeps P uniform: softcap(0) = 0.
    got_fwd = (o.float().cpu() != 0).permute(0, 2, 1, 3)        # [b, h, q, k]
    dvk = g[2].float().cpu()                                     # [b, k, kv_head, q]
    G = H // KH
    fwd_same = torch.equal(got_fwd, want)
    # dV of K/V head j != 0 where any query head of its group kept (q, k)
    want_kv = want.view(b, KH, G, n, n).any(dim=2)
    got_kv = (dvk != 0).permute(0, 2, 3, 1)                      # [b, kv_head, q, k]
    bwd_same = torch.equal(got_kv, want_kv)
    ok = fwd_same and bwd_same
    print(f"{'PASS' if ok else 'FAIL'} {name:30s} mask bits: forward O {'==' if fwd_same else '!='}"
          f" host mask, backward dV {'==' if bwd_same else '!='} host mask "
          f"({int(want.sum())} of {want.numel()} kept)", flush=True)
    return ok


def check_torch(mod, name, s, gen):
    """dropout_mask = torch: PyTorch's SDPA flash backend with return_debug_mask
    on the same q, k, v; its seed and offset (output 6) given to fa_forward and
    fa_dropout_mask: the host mask equals the sign bits of PyTorch's debug mask
    (output 8) wherever the attention mask allows, and our O is within the 2x
    rule of the float64 reference on that mask, as close as PyTorch's own."""
    dt = DT[s["dtype"]]
    H, D, DV, p = s["heads"], s["head_dim"], s["v_head_dim"], s["p"]
    b, sq, sk = 2, 333, 333 if s["mask"] else 517

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dt)

    q, k, v = randn(b, sq, H, D), randn(b, sk, H, D), randn(b, sk, H, DV)
    res = torch.ops.aten._scaled_dot_product_flash_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p=p,
        is_causal=bool(s["mask"]), return_debug_mask=True, scale=s["scale"])
    torch.cuda.synchronize()
    rng = res[6].view(torch.int64).tolist() if res[6].numel() == 2 else [int(res[6]), int(res[7])]
    seed, offset = rng[0] & (2**64 - 1), rng[1] & (2**64 - 1)
    dbg = res[8][:, :, :sq, :sk].float().cpu()
    theirs = ~torch.signbit(dbg)
    allow = allowed(s, sq, sk)
    ours = mod.dropout_mask(p, seed, offset, b, sq, sk).bool()
    same = torch.equal(ours & allow, theirs & allow)
    o = torch.full((b, sq, H, DV), float("nan"), device="cuda", dtype=dt)
    mod.forward(q, k, v, o, dropout=(p, seed, offset))
    torch.cuda.synchronize()
    drop = (ours, p)
    ref = attention(s, q.double(), k.double(), v.double(), sq, sk, drop)
    pt = attention(s, q, k, v, sq, sk, drop)
    e, bound = err(o, ref), 2 * err(pt, ref) + 1e-5
    e_torch = err(res[0].transpose(1, 2), ref)
    ok = same and e <= bound
    print(f"{'PASS' if ok else 'FAIL'} {name:30s} torch: seed {seed} offset {offset}: mask "
          f"{'==' if same else '!='} PyTorch's debug mask ({int((theirs & allow).sum())} of "
          f"{int(allow.sum()) * b * H} kept); O {e:.2e}/{bound:.2e} (PyTorch's own {e_torch:.2e})",
          flush=True)
    return ok


def check_race(mod, name, s, gen, rng, reruns):
    b, sq, sk = 2, 333, 301
    dt = DT[s["dtype"]]
    H, KH, D, DV, p = s["heads"], s["kv_heads"], s["head_dim"], s["v_head_dim"], s["p"]

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dt)

    q, k, v, do = randn(b, sq, H, D), randn(b, sk, KH, D), randn(b, sk, KH, DV), randn(b, sq, H, DV)
    seed, offset = int(rng.integers(0, 2**63)), int(rng.integers(0, 2**40))
    first, same = None, True
    for _ in range(reruns):
        o = torch.full((b, sq, H, DV), float("nan"), device="cuda", dtype=dt)
        lse = torch.full((b, H, sq), float("nan"), device="cuda", dtype=torch.float32)
        mod.forward(q, k, v, o, lse, dropout=(p, seed, offset))
        g = [torch.full_like(x, float("nan")) for x in (q, k, v)]
        mod.backward(q, k, v, o, lse, do, *g, mode=mod.BACKWARD_DETERMINISTIC,
                     dropout=(p, seed, offset))
        run = [o, lse] + g
        if first is None:
            first = [x.clone() for x in run]
        else:
            same &= all(torch.equal(a, c) for a, c in zip(first, run))
    o2 = torch.empty_like(first[0])
    mod.forward(q, k, v, o2, dropout=(p, seed, offset + 1))
    torch.cuda.synchronize()
    moved = not torch.equal(o2, first[0])
    ok = same and moved
    print(f"{'PASS' if ok else 'FAIL'} {name:30s} race: {reruns} runs of forward + deterministic "
          f"backward {'bitwise identical' if same else 'DIFFER'}; offset + 1 "
          f"{'changes' if moved else 'does NOT change'} O", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx_dir")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--reruns", type=int, default=250)
    a = ap.parse_args()
    import numpy as np
    seed = a.seed if a.seed is not None else int(time.time()) % 100000
    print(f"dropout: seed {seed} (rerun with --seed {seed})")
    torch.backends.cuda.matmul.allow_tf32 = False
    ctx = flashc_rt.Runtime(a.lib).context(0)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    rng = np.random.default_rng(seed)
    passed = failed = 0
    t0 = time.time()
    for name in sorted(n[:-4] for n in os.listdir(a.ptx_dir) if n.endswith(".ptx")):
        if (a.only and name not in a.only.split(",")) or name not in SPECS:
            continue
        s = SPECS[name]
        try:
            mod = ctx.load_ptx(os.path.join(a.ptx_dir, name + ".ptx"))
            results = [check_values(mod, name, s, c, gen, rng) for c in s["cases"]]
            results.append(check_bits(mod, name, s, gen, rng))
            if s.get("torch"):
                results.append(check_torch(mod, name, s, gen))
            results.append(check_race(mod, name, s, gen, rng, a.reruns))
        except (RuntimeError, flashc_rt.FlashcError) as e:
            print(f"FAIL {name}: {e}")
            results = [False]
        passed += sum(results)
        failed += len(results) - sum(results)
    print(f"dropout: {time.time() - t0:.1f} s on {torch.cuda.get_device_name()}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
