"""GPU check of the backward kernels (docs/backward.md), on the GPU machine.

    python3 test/gpu/backward.py PTX_DIR [--seed N] [--only NAME,...] [--reruns N]
                                 [--lib build-gpu/libflashc_runtime.so]

For every PTX_DIR/NAME.ptx whose NAME is in backward_specs.py: the module holds
the forward NAME and NAME_bwd_pre/_bwd/_bwd_post/_bwd_kv/_bwd_q. They are
launched here straight through the CUDA driver (ctypes; test/gpu/ptx_launch.py),
with the parameter lists and grids of docs/backward.md built from the PTX's metadata, so this
checks the ABI as written (the runtime's fa_backward is checked by its own
tests). Per case: fresh random q, k, v, dO; O and LSE from the forward kernel;
then both launches (atomic: dq_acc zeroed, pre, bwd, post; deterministic:
pre, bwd_kv, bwd_q), outputs poisoned with NaN, against FlashAttention's rule
with gradients at 3x:
    ref = autograd of the spec's attention in float64
    pt  = the same in the input dtype
    pass iff max|g - ref| <= 3 max|pt - ref| + 1e-5 for dQ, dK, dV; no NaN.
Fully masked rows (causal with seqlen_q > seqlen_k) must give zero dQ. The
deterministic launch is rerun --reruns times (default 100, issue 17): dQ, dK, dV must be
bitwise identical. With --lib, the runtime's fa_backward runs each launch
too (its own workspace, plan and checks): the same rule, and the
deterministic launch bitwise equal to the direct deterministic launch, and the
default one (FA_BACKWARD_AUTO) equal to the launch the module's backward_auto
names (deterministic: bitwise; atomic: dK and dV bitwise, dQ in bounds). Prints a line per case
and `N passed, N failed`.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backward_specs import SPECS  # noqa: E402
from ptx_launch import Driver, Kernels  # noqa: E402  (the launcher, shared with bench/bench_bwd.py)

DT = {"bf16": torch.bfloat16, "f16": torch.float16}
CPU_REFERENCE = False


# ---- references ---------------------------------------------------------------

def attention(spec, q, k, v, sq, sk, drop=None):
    """O of the spec's attention in q's dtype (float64 for the reference);
    drop = (keep [b, heads, sq, sk] bool, p): dropout (docs/dropout.md), the
    kept entries of P scaled by 1 / (1 - p) before the cast, as the kernels."""
    H, KH = spec["heads"], spec["kv_heads"]
    g = H // KH
    qh = q.transpose(1, 2)                                   # b h sq d
    kh = k.transpose(1, 2).repeat_interleave(g, dim=1)       # b h sk d
    vh = v.transpose(1, 2).repeat_interleave(g, dim=1)
    s = (qh @ kh.transpose(-1, -2)) * spec["scale"]
    if spec["score"]:  # score(s, torch, h, q, k): index tensors broadcasting to s [b, h, sq, sk]
        hi = torch.arange(H, device=q.device).view(1, H, 1, 1)
        qi = torch.arange(sq, device=q.device).view(1, 1, sq, 1)
        ki = torch.arange(sk, device=q.device).view(1, 1, 1, sk)
        s = spec["score"](s, torch, hi, qi, ki)
    if spec["mask"]:
        qi = torch.arange(sq, device=q.device).view(sq, 1)
        ki = torch.arange(sk, device=q.device).view(1, sk)
        keep = spec["mask"](qi, ki, sq, sk)
        s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    p = p / torch.where(l == 0, torch.ones_like(l), l)
    if drop is not None:
        p = p * drop[0].to(p.device, p.dtype) / (1 - drop[1])
    return (p.to(q.dtype) @ vh).transpose(1, 2)


def grads(spec, q, k, v, do, sq, sk, dtype, drop=None):
    qq, kk, vv = (x.detach().to(dtype).requires_grad_() for x in (q, k, v))
    o = attention(spec, qq, kk, vv, sq, sk, drop)
    o.backward(do.to(dtype))
    return qq.grad.double(), kk.grad.double(), vv.grad.double()


def err(x, r):
    return (x.double() - r).abs().max().item() if x.numel() else 0.0


# ---- the cases ----------------------------------------------------------------

def run_case(K, name, spec, case, gen, reruns, rt_mod=None):
    b, sq, sk = case
    dt = DT[spec["dtype"]]
    H, KH, D, DV = spec["heads"], spec["kv_heads"], spec["head_dim"], spec["v_head_dim"]

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32).to(dt)

    q, k, v = randn(b, sq, H, D), randn(b, sk, KH, D), randn(b, sk, KH, DV)
    do = randn(b, sq, H, DV)
    o = torch.full((b, sq, H, DV), float("nan"), device="cuda", dtype=dt)
    lse = torch.full((b, H, sq), float("nan"), device="cuda", dtype=torch.float32)
    K.forward(q, k, v, o, lse, b, sq, sk)
    if CPU_REFERENCE:  # compute-sanitizer's racecheck fails inside cuBLAS (gpu-sanitize.sh)
        cpu = [x.cpu() for x in (q, k, v, do)]
        ref = [x.cuda() for x in grads(spec, *cpu, sq, sk, torch.float64)]
        pt = [x.cuda() for x in grads(spec, *cpu, sq, sk, dt)]
    else:
        ref = grads(spec, q, k, v, do, sq, sk, torch.float64)
        pt = grads(spec, q, k, v, do, sq, sk, dt)
    line = f"{name:24s} b={b} sq={sq:<5d} sk={sk:<5d}"
    ok_all, outs = True, {}
    for det in (False, True):
        outs[det] = []
        for rep in range(1 + (reruns if det else 0)):
            dq = torch.full_like(q, float("nan"))
            dk = torch.full_like(k, float("nan"))
            dv = torch.full_like(v, float("nan"))
            delta = torch.full((b, H, sq), float("nan"), device="cuda", dtype=torch.float32)
            dq_acc = torch.empty((b, sq, H, D), device="cuda", dtype=torch.float32)
            K.backward((q, k, v, o, lse, do, dq, dk, dv, delta, dq_acc), b, sq, sk, det)
            torch.cuda.synchronize()
            outs[det].append((dq.clone(), dk.clone(), dv.clone()))
        dq, dk, dv = outs[det][0]
        nan = sum(int(torch.isnan(x).sum()) for x in (dq, dk, dv))
        errs = [err(x, r) for x, r in zip((dq, dk, dv), ref)]
        bounds = [3 * err(p, r) + 1e-5 for p, r in zip(pt, ref)]
        ok = nan == 0 and all(e <= bd for e, bd in zip(errs, bounds))
        same = all(all(torch.equal(a, c) for a, c in zip(outs[det][0], run))
                   for run in outs[det][1:])
        ok = ok and same
        if rt_mod is not None:  # the runtime's fa_backward: the same checks, det bitwise
            g = [torch.full_like(x, float("nan")) for x in (q, k, v)]
            rt_mod.backward(q, k, v, o, lse, do, *g, mode=rt_mod.BACKWARD_DETERMINISTIC if det
                            else rt_mod.BACKWARD_ATOMIC)
            torch.cuda.synchronize()
            rnan = sum(int(torch.isnan(x).sum()) for x in g)
            rerrs = [err(x, r) for x, r in zip(g, ref)]
            rok = rnan == 0 and all(e <= bd for e, bd in zip(rerrs, bounds))
            if det:
                rok = rok and all(torch.equal(a_, c) for a_, c in zip(g, outs[det][0]))
            if det == (rt_mod.info["backward_auto"] == "deterministic"):
                # FA_BACKWARD_AUTO (a zeroed args' mode) runs the launch the metadata
                # names: the deterministic one's results bitwise; the atomic one's
                # dK and dV bitwise (summed in order in every mode), dQ in bounds
                g2 = [torch.full_like(x, float("nan")) for x in (q, k, v)]
                rt_mod.backward(q, k, v, o, lse, do, *g2, mode=rt_mod.BACKWARD_AUTO)
                torch.cuda.synchronize()
                same_as = outs[det][0] if det else g
                first = 0 if det else 1
                rok = rok and all(torch.equal(a_, c) for a_, c in
                                  zip(g2[first:], same_as[first:]))
                rok = rok and not torch.isnan(g2[0]).any() and err(g2[0], ref[0]) <= bounds[0]
                line += f" auto={'det' if det else 'atomic'}"
            line += f" fa_backward {'ok' if rok else 'WRONG'}"
            ok = ok and rok
        ok_all &= ok
        tag = "det" if det else "atomic"
        line += (f" | {tag} dq {errs[0]:.2e}/{bounds[0]:.2e} dk {errs[1]:.2e}/{bounds[1]:.2e}"
                 f" dv {errs[2]:.2e}/{bounds[2]:.2e} nan {nan}")
        if det:
            line += f" bitwise x{1 + reruns} {'same' if same else 'DIFFER'}"
    print(("PASS " if ok_all else "FAIL ") + line, flush=True)
    return ok_all


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx_dir")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--reruns", type=int, default=100)
    ap.add_argument("--cpu-reference", action="store_true",
                    help="references on the CPU (for compute-sanitizer)")
    ap.add_argument("--lib", default="", help="also run the runtime's fa_backward (libflashc_runtime.so)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time()) % 100000
    global CPU_REFERENCE
    CPU_REFERENCE = a.cpu_reference
    print(f"backward: seed {seed} (rerun with --seed {seed})")
    torch.backends.cuda.matmul.allow_tf32 = False
    drv = Driver()
    rt_ctx = None
    if a.lib:
        import flashc_rt
        rt_ctx = flashc_rt.Runtime(a.lib).context(0)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    passed = failed = 0
    t0 = time.time()
    for name in sorted(n[:-4] for n in os.listdir(a.ptx_dir) if n.endswith(".ptx")):
        if a.only and name not in a.only.split(","):
            continue
        if name not in SPECS:
            print(f"SKIP {name}: no entry in backward_specs.py")
            continue
        try:
            K = Kernels(drv, os.path.join(a.ptx_dir, name + ".ptx"), name)
            rt_mod = rt_ctx.load_ptx(os.path.join(a.ptx_dir, name + ".ptx")) if rt_ctx else None
        except RuntimeError as e:
            print(f"FAIL {name}: {e}")
            failed += 1
            continue
        for case in SPECS[name]["cases"]:
            try:
                ok = run_case(K, name, SPECS[name], case, gen, a.reruns, rt_mod)
            except RuntimeError as e:
                print(f"FAIL {name} {case}: {e}")
                ok = False
            passed += ok
            failed += not ok
    print(f"backward: {time.time() - t0:.1f} s on {torch.cuda.get_device_name()}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
