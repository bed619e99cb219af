"""The Python package on the GPU (issue 19): flashc's kernels as PyTorch ops.

    python3 test/gpu/torch_ops.py .device/torch [--seed N] [--no-compile]

Loads the PTX of test/gpu/torch_specs (built here by scripts/build-gpu-kernels.sh;
the device has no LLVM/MLIR, so the package runs runtime-only) and checks:
  values    flashc.attention forward and backward (autograd) in both layouts
            against SDPA's math backend in float64 (and the explicit math
            in float64 agrees with it): max|out - ref| <= 2 max|pt - ref|
            + 1e-5, gradients 3x, pt the same math in the input dtype; GQA
            without repeat; an odd seqlen; poisoned outputs (NaN) never read.
  dropout   the op draws (seed, offset) from torch's CUDA generator as SDPA's
            flash backend does: after torch.manual_seed both advance the
            generator equally; the mask is fa_dropout_mask(seed, offset), out
            and gradients meet the rule against a float64 reference with that
            mask, and SDPA's own output (same seed) is as close to it.
  opcheck   torch.library.opcheck of flashc::fwd (autograd, fake, AOT dispatch
            with dynamic shapes), flashc::bwd and flashc::decode (both caches).
  fake      shapes, dtypes and strides under FakeTensorMode.
  compile   torch.compile(fullgraph=True) of a block using flashc.attention:
            no graph break, loss and gradients equal eager's.
  decode    flashc.Module.decode and flashc::decode, contiguous and paged.
  refusals  a wrong dtype / head count / device / module kind raises
            FlashcError (or ValueError) with the C runtime's message.
  stream    a launch on a side stream goes on that stream.
  bundle    the cubins of a `flashc --bundle` directory (PTX_DIR/bundle,
            built by scripts/build-gpu-kernels.sh) load and compute what
            the PTX modules do, forward and gradients.
Prints PASS/FAIL lines and `torch_ops: N passed, N failed`.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check import DT, err, finish, parse_args, report  # noqa: E402
import flashc  # noqa: E402
import flashc.ops  # noqa: E402


def ref_attention(q, k, v, causal, scale, keep=None, p=0.0):
    """Attention in q's dtype, [b, s, h, d] in and out: GQA by repeating k, v;
    causal aligned bottom-right (docs/language.md); keep: a 0/1 mask [b, h,
    sq, sk] applied to P with 1/(1-p)."""
    b, sq, h, _ = q.shape
    sk, kh = k.shape[1], k.shape[2]
    qh = q.transpose(1, 2)
    kh_ = k.transpose(1, 2).repeat_interleave(h // kh, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(h // kh, dim=1)
    s = (qh @ kh_.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    pm = torch.softmax(s, dim=-1)
    if keep is not None:
        pm = pm * keep.to(pm.dtype) / (1 - p)
    return (pm @ vh).transpose(1, 2)


def sdpa_math(q, k, v, causal, scale, keep=None, p=0.0):
    """SDPA's math backend ([b, s, h, d] in and out; GQA by enable_gqa; the
    causal mask bottom-right as a boolean mask): the float64 reference."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    assert keep is None
    sq, sk = q.shape[1], k.shape[1]
    mask = None
    if causal:
        i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
        mask = torch.arange(sk, device=q.device)[None, :] <= i
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=mask, scale=scale, enable_gqa=True)
    return o.transpose(1, 2)


def ref_grads(q, k, v, do, causal, scale, dtype, keep=None, p=0.0, fn=ref_attention):
    """(out, dq, dk, dv) of fn (ref_attention or sdpa_math) computed in `dtype`."""
    xs = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
    o = fn(*xs, causal, scale, keep, p)
    o.backward(do.to(dtype))
    return [o.detach()] + [x.grad for x in xs]


def rand(*shape, dtype):
    return torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)


def check_values(mod, name, layout, b, sq, sk):
    info = mod.info
    dt, H, KH, D, DV = (DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"],
                        info["v_head_dim"])
    causal = info["mask"] == "causal"
    q, k, v = rand(b, sq, H, D, dtype=dt), rand(b, sk, KH, D, dtype=dt), rand(b, sk, KH, DV, dtype=dt)
    do = rand(b, sq, H, DV, dtype=dt)
    args = [x.clone().requires_grad_() for x in (q, k, v)]
    if layout == "bhsd":
        args = [x.detach().transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v)]
    out = flashc.attention(*args, mod, layout=layout)
    out.backward(do if layout == "bshd" else do.transpose(1, 2))
    got = [out] + [a.grad for a in args]
    if layout == "bhsd":
        got = [t.transpose(1, 2) for t in got]
    ref = ref_grads(q, k, v, do, causal, info["scale"], torch.float64, fn=sdpa_math)
    pt = ref_grads(q, k, v, do, causal, info["scale"], dt)
    mine = ref_grads(q, k, v, do, causal, info["scale"], torch.float64)
    lines = [f"refs {max(err(a, b) for a, b in zip(ref, mine)):.0e} apart"]
    ok = all(err(a, b) < 1e-9 for a, b in zip(ref, mine))  # the two float64 references agree
    for label, g, r, p_, mult in zip(("out", "dq", "dk", "dv"), got, ref, pt, (2, 3, 3, 3)):
        e, bound = err(g, r), mult * err(p_, r) + 1e-5
        ok &= e <= bound and not torch.isnan(g).any().item()
        lines.append(f"{label} {e:.1e}/{bound:.1e}")
    report(ok, f"{name} {layout}", f"b={b} sq={sq} sk={sk}: " + ", ".join(lines))


def check_deterministic(mod, name, runs=8):
    """backward_mode "auto" under torch.use_deterministic_algorithms: the
    deterministic launch whatever the module's backward_auto, so reruns
    give bitwise the same dQ, dK, dV."""
    info = mod.info
    dt, H, KH, D = DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"]
    q, k, v, do = (rand(2, 1000, h, D, dtype=dt) for h in (H, KH, KH, H))
    grads = []
    torch.use_deterministic_algorithms(True)
    try:
        for _ in range(runs):
            args = [x.clone().requires_grad_() for x in (q, k, v)]
            flashc.attention(*args, mod).backward(do)
            grads.append([a.grad for a in args])
    finally:
        torch.use_deterministic_algorithms(False)
    same = all(torch.equal(a, b) for g in grads[1:] for a, b in zip(g, grads[0]))
    report(same, f"{name} deterministic algorithms",
           f"backward_auto {info['backward_auto']}: {runs} runs "
           f"{'bitwise equal' if same else 'DIFFER'}")


def check_dropout(mod, name, seed):
    info = mod.info
    dt, H, D, p = DT[info["dtype"]], info["heads"], info["head_dim"], mod.dropout
    causal = info["mask"] == "causal"
    b, s = 2, 200
    q, k, v, do = (rand(b, s, H, D, dtype=dt) for _ in range(4))
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    # SDPA's flash backend with dropout from a known generator state
    torch.manual_seed(seed)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o_sdpa = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)),
                                                dropout_p=p, is_causal=causal,
                                                scale=info["scale"]).transpose(1, 2)
    off_sdpa = gen.get_offset()
    torch.manual_seed(seed)
    args = [x.clone().requires_grad_() for x in (q, k, v)]
    out = flashc.attention(*args, mod, dropout_p=p)
    off_ours = gen.get_offset()
    out.backward(do)
    keep = mod.dropout_mask(p, seed, 0, b, s, s).cuda()
    ref = ref_grads(q, k, v, do, causal, info["scale"], torch.float64, keep, p)
    pt = ref_grads(q, k, v, do, causal, info["scale"], dt, keep, p)
    got = [out] + [a.grad for a in args]
    lines, ok = [], off_ours == off_sdpa
    for label, g, r, p_, mult in zip(("out", "dq", "dk", "dv"), got, ref, pt, (2, 3, 3, 3)):
        e, bound = err(g, r), mult * err(p_, r) + 1e-5
        ok &= e <= bound
        lines.append(f"{label} {e:.1e}/{bound:.1e}")
    e_sdpa = err(o_sdpa, ref[0])
    ok &= e_sdpa <= 2 * err(pt[0], ref[0]) + 1e-5  # SDPA kept the same elements
    report(ok, f"{name} dropout p={p}", f"generator offset after: ours {off_ours}, SDPA's "
           f"{off_sdpa}; {', '.join(lines)}; SDPA's out vs our mask's ref {e_sdpa:.1e}")
    # a second call draws a new offset: a different mask
    torch.manual_seed(seed)
    o1 = flashc.attention(q, k, v, mod, dropout_p=p)
    o2 = flashc.attention(q, k, v, mod, dropout_p=p)
    report(not torch.equal(o1, o2) and gen.get_offset() == 2 * off_ours,
           f"{name} dropout advances", f"offset {gen.get_offset()} after two calls; masks differ")


def check_opcheck(mod, name):
    info = mod.info
    dt, H, KH, D = DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"]
    q, k, v = rand(2, 130, H, D, dtype=dt), rand(2, 130, KH, D, dtype=dt), rand(2, 130, KH, D, dtype=dt)
    for x in (q, k, v):
        x.requires_grad_()
    try:
        torch.library.opcheck(torch.ops.flashc.fwd.default, (q, k, v, mod.id, 0.0, 0))
        out, lse, rng = torch.ops.flashc.fwd(q.detach(), k.detach(), v.detach(), mod.id, 0.0, 0)
        torch.library.opcheck(torch.ops.flashc.bwd.default,
                              (torch.randn_like(out), q.detach(), k.detach(), v.detach(), out, lse,
                               rng, mod.id, 0.0, 1))
        report(True, f"{name} opcheck", "flashc::fwd and flashc::bwd: schema, autograd "
               "registration, fake tensor, AOT dispatch (dynamic)")
    except Exception as e:  # noqa: BLE001 - opcheck raises OpCheckError and others
        report(False, f"{name} opcheck", f"{type(e).__name__}: {e}"[:2000])


def check_fake(mod, name):
    from torch._subclasses.fake_tensor import FakeTensorMode
    info = mod.info
    dt, H, KH, D, DV = (DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"],
                        info["v_head_dim"])
    with FakeTensorMode():
        q = torch.empty(3, H, 77, D, device="cuda", dtype=dt)
        k = torch.empty(3, KH, 91, D, device="cuda", dtype=dt)
        v = torch.empty(3, KH, 91, DV, device="cuda", dtype=dt)
        out, lse = flashc.attention(q, k, v, mod, layout="bhsd", return_lse=True)
        shape_ok = (tuple(out.shape) == (3, H, 77, DV) and tuple(lse.shape) == (3, H, 77)
                    and out.dtype == dt and lse.dtype == torch.float32)
    report(shape_ok, f"{name} fake", f"out {tuple(out.shape)} {out.dtype}, lse {tuple(lse.shape)}")


class Block(torch.nn.Module):
    """A pre-norm attention block: what a model around the op looks like."""

    def __init__(self, mod, dim):
        super().__init__()
        info = mod.info
        self.mod, self.h, self.kh, self.d = mod, info["heads"], info["kv_heads"], info["head_dim"]
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, (self.h + 2 * self.kh) * self.d, bias=False)
        self.proj = torch.nn.Linear(self.h * self.d, dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).split(
            [self.h * self.d, self.kh * self.d, self.kh * self.d], dim=-1)
        o = flashc.attention(q.view(b, s, self.h, self.d), k.view(b, s, self.kh, self.d),
                             v.view(b, s, self.kh, self.d), self.mod)
        return x + self.proj(o.reshape(b, s, self.h * self.d))


def check_compile(mod, name):
    info = mod.info
    dt = DT[info["dtype"]]
    torch.manual_seed(7)
    blk = Block(mod, 256).cuda().to(dt)
    x = rand(2, 300, 256, dtype=dt)

    def step(m, x):
        y = m(x)
        loss = y.float().square().mean()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in m.parameters()]

    loss_e, g_e = step(blk, x)
    blk.zero_grad()
    try:
        from torch import _dynamo
        _dynamo.reset()
        expl = _dynamo.explain(blk)(x)
        breaks = expl.graph_break_count
        t0 = time.time()
        cblk = torch.compile(blk, fullgraph=True, dynamic=False)
        loss_c, g_c = step(cblk, x)
        t_c = time.time() - t0
        blk.zero_grad()
        x2 = rand(2, 333, 256, dtype=dt)  # a new length: recompiles or runs dynamic, no break
        cblk(x2).float().sum().backward()
        e_loss = abs(loss_c.item() - loss_e.item()) / max(abs(loss_e.item()), 1e-6)
        e_grad = max(err(a, b) / max(b.abs().max().item(), 1e-6) for a, b in zip(g_c, g_e))
        ok = breaks == 0 and e_loss < 2e-2 and e_grad < 5e-2
        report(ok, f"{name} torch.compile", f"fullgraph, {breaks} graph breaks, first step "
               f"{t_c:.1f} s; loss rel diff {e_loss:.1e}, grads rel diff {e_grad:.1e} vs eager")
    except Exception as e:  # noqa: BLE001
        report(False, f"{name} torch.compile", f"{type(e).__name__}: {e}"[:3000])


def check_decode(mod, name, paged):
    info = mod.info
    dt, H, KH, D, DV = (DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"],
                        info["v_head_dim"])
    causal = info["mask"] == "causal"
    lens = [1000, 37, 4096]
    b, qlen = len(lens), 1
    cap = max(lens)
    k_full, v_full = rand(b, cap, KH, D, dtype=dt), rand(b, cap, KH, DV, dtype=dt)
    q = rand(b, qlen, H, D, dtype=dt)
    seq = torch.tensor(lens, dtype=torch.int32, device="cuda")
    if paged:
        ps = info["decode"]["page_size"]
        pages = (cap + ps - 1) // ps
        perm = torch.randperm(b * pages, device="cuda").to(torch.int32)
        bt = perm.view(b, pages)
        k_c = torch.empty(b * pages, ps, KH, D, device="cuda", dtype=dt)
        v_c = torch.empty(b * pages, ps, KH, DV, device="cuda", dtype=dt)
        kp = F.pad(k_full, (0, 0, 0, 0, 0, pages * ps - cap)).view(b, pages, ps, KH, D)
        vp = F.pad(v_full, (0, 0, 0, 0, 0, pages * ps - cap)).view(b, pages, ps, KH, DV)
        k_c[bt.long()] = kp
        v_c[bt.long()] = vp
    else:
        bt, k_c, v_c = None, k_full, v_full
    out = mod.decode(q, k_c, v_c, seq, bt)
    out2, lse2 = torch.ops.flashc.decode(q, k_c, v_c, seq, bt, mod.id, 0)
    ok, lines = torch.equal(out, out2), []
    for i, L in enumerate(lens):
        args = (q[i:i + 1], k_full[i:i + 1, :L], v_full[i:i + 1, :L])
        r = ref_attention(*(t.double() for t in args), causal, info["scale"])
        p_ = ref_attention(*args, causal, info["scale"])
        e, bound = err(out[i:i + 1], r), 2 * err(p_, r) + 1e-5
        ok &= e <= bound
        lines.append(f"len {L}: {e:.1e}/{bound:.1e}")
    report(ok, f"{name} decode", f"{'paged' if paged else 'contiguous'}; op == method: "
           f"{torch.equal(out, out2)}; " + ", ".join(lines))
    try:
        torch.library.opcheck(torch.ops.flashc.decode.default, (q, k_c, v_c, seq, bt, mod.id, 0))
        report(True, f"{name} decode opcheck", "flashc::decode: schema, fake tensor, AOT dispatch")
    except Exception as e:  # noqa: BLE001
        report(False, f"{name} decode opcheck", f"{type(e).__name__}: {e}"[:2000])


def check_refusals(mods):
    gqa, fwd_only = mods["tor_gqa_causal_bf16"], mods["tor_fwd_only_bf16"]
    q = rand(1, 64, 8, 64, dtype=torch.bfloat16)
    k = rand(1, 64, 2, 64, dtype=torch.bfloat16)
    cases = [
        ("dtype", lambda: flashc.attention(q.half(), k.half(), k.half(), gqa), "FA_ERR_DTYPE"),
        ("heads", lambda: flashc.attention(q[:, :, :4], k, k, gqa), "FA_ERR_SHAPE"),
        ("dropout without a dropout kernel", lambda: flashc.attention(q, k, k, gqa, dropout_p=0.1),
         "FA_ERR_UNSUPPORTED"),
        ("backward of a forward-only module",
         lambda: flashc.attention(q[:, :, :4].requires_grad_(), q[:, :, :4], q[:, :, :4],
                                  fwd_only).sum().backward(), "FA_ERR_UNSUPPORTED"),
        ("cpu tensors", lambda: flashc.attention(q.cpu(), k.cpu(), k.cpu(), gqa), "CPU"),
        ("3-D q", lambda: flashc.attention(q[0], k, k, gqa), "ValueError"),
    ]
    for label, fn, want in cases:
        try:
            fn()
            torch.cuda.synchronize()
            report(False, f"refused: {label}", "no error")
        except Exception as e:  # noqa: BLE001
            text = f"{type(e).__name__}: {e}"
            ok = want in text if want != "CPU" else ("cuda" in text.lower() or "CPU" in text)
            report(ok, f"refused: {label}", text.splitlines()[0][:200])
    # a tensor whose last dim is not contiguous is refused by the C check, not copied
    qt = rand(1, 64, 64, 8, dtype=torch.bfloat16).transpose(2, 3)
    try:
        gqa.forward(qt, k, k)
        report(False, "refused: last dim strided", "no error")
    except flashc.FlashcError as e:
        report(e.status == "FA_ERR_STRIDE", "refused: last dim strided", str(e)[:200])


def check_stream(mod, name):
    info = mod.info
    dt, H, KH, D = DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"]
    q, k, v = rand(2, 512, H, D, dtype=dt), rand(2, 512, KH, D, dtype=dt), rand(2, 512, KH, D, dtype=dt)
    base = flashc.attention(q, k, v, mod)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = flashc.attention(q, k, v, mod)
        ev = torch.cuda.Event()
        ev.record(side)
    ev.synchronize()
    report(torch.equal(out, base), f"{name} stream", "a launch under torch.cuda.stream(side) "
           "equals the default-stream one (the op launched on the current stream)")


def check_bundle(mods, bundle_dir):
    """A CLI bundle's cubins (flashc --bundle, ptxas on the build machine):
    loaded without the driver's JIT, they compute what the PTX modules do."""
    cub = flashc.load_bundle(bundle_dir)
    for name, m in cub.items():
        ref = mods[name]
        info = m.info
        dt, H, KH, D = DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"]
        q, k, v = rand(2, 300, H, D, dtype=dt), rand(2, 300, KH, D, dtype=dt), rand(2, 300, KH, D, dtype=dt)
        xs = [t.clone().requires_grad_() for t in (q, k, v)]
        o = flashc.attention(*xs, m)
        o.backward(torch.ones_like(o))
        ys = [t.clone().requires_grad_() for t in (q, k, v)]
        o2 = flashc.attention(*ys, ref)
        o2.backward(torch.ones_like(o2))
        diffs = [err(a, b) for a, b in zip([o] + [x.grad for x in xs], [o2] + [y.grad for y in ys])]
        report(m.cubin is not None and max(diffs) < 1e-2, f"{name} bundle cubin",
               f"out, dq, dk, dv vs the PTX module's: max diff {max(diffs):.1e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx_dir")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile check")
    ap.add_argument("--bundle", default=None, help="a `flashc --bundle` directory with cubins "
                    "of some of the same specs (default: PTX_DIR/bundle when it exists)")
    a = parse_args(ap)
    seed = a.seed if a.seed is not None else int(time.time()) % 100000
    print(f"torch_ops: torch {torch.__version__}, seed {seed} (rerun with --seed {seed}), "
          f"runtime {flashc.runtime.runtime_library()._name}")
    torch.manual_seed(seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    mods = flashc.load_bundle(a.ptx_dir)
    print("modules:", ", ".join(f"{n} ({len(m.kernels)} kernels)" for n, m in mods.items()))
    gqa, full = mods["tor_gqa_causal_bf16"], mods["tor_full_f16_d128"]
    check_values(gqa, "tor_gqa_causal_bf16", "bshd", 2, 257, 257)
    check_values(gqa, "tor_gqa_causal_bf16", "bhsd", 1, 384, 512)
    check_values(full, "tor_full_f16_d128", "bshd", 2, 129, 300)
    check_values(full, "tor_full_f16_d128", "bhsd", 3, 64, 64)
    check_deterministic(full, "tor_full_f16_d128")
    check_dropout(mods["tor_drop_torch_bf16"], "tor_drop_torch_bf16", seed)
    check_opcheck(gqa, "tor_gqa_causal_bf16")
    check_fake(gqa, "tor_gqa_causal_bf16")
    check_decode(mods["tor_decode_bf16"], "tor_decode_bf16", paged=False)
    check_decode(mods["tor_decode_paged_bf16"], "tor_decode_paged_bf16", paged=True)
    check_refusals(mods)
    check_stream(gqa, "tor_gqa_causal_bf16")
    bundle = a.bundle or os.path.join(a.ptx_dir, "bundle")
    if os.path.isdir(bundle):
        check_bundle(mods, bundle)
    if not a.no_compile:
        check_compile(gqa, "tor_gqa_causal_bf16")
    torch.cuda.synchronize()
    finish("torch_ops")


if __name__ == "__main__":
    main()
