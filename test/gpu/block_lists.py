"""Block lists on the GPU (issue 20; docs/abi.md, "Block lists"): the
classifier kernels of specs whose masks read run-time tensors, over the
kernels test/gpu/inputs.py runs (test/gpu/input_specs, built by
scripts/build-gpu-kernels.sh into .device/inputs with the block-lists pass
on).

    python3 test/gpu/block_lists.py .device/inputs [--seed N] [--lib PATH]

Specs: inp_doc_d128_bf16 (document ids at q and k: one list for every head)
and inp_blocks_d64_bf16 (a per-head 128 x 128 block table: one list per
head). For every case:
  - lists built by each launch (no blocks) against lists built once
    (Module.blocks, fa_blocks_create) and given to three forward + backward
    launches, with launches of other inputs in between (which rebuild the
    module's own lists): out, lse, dq, dk, dv bitwise equal (the
    deterministic backward; the atomic one's dk, dv), and flashc.attention's
    autograd with blocks= equal to it without;
  - both against inputs.py's reference (float64, and the input dtype:
    max|out - ref| <= 2 max|pt - ref| + 1e-5, gradients 3x);
  - the lists the classifiers wrote (Blocks.lists(), read back) against the
    mask classified on the host: per row, the count and the listed steps are
    exactly the tile pairs that keep something, ascending, each marked full
    exactly where the mask keeps every element in range (a tile past the
    sequence's end may be marked partial where the host calls it full: its
    bounds are masked anyway), then an even sentinel.
Also: a Blocks of other sizes, or of another module, is refused with the C
runtime's message; a module without classifiers gives an empty Blocks.
Prints PASS/FAIL lines and `block_lists: N passed, N failed`.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check import (DT, err, expect_refusal, finish, load_modules, rand, report,  # noqa: E402
                       run_cases, start)
from inputs import MATH, case_inputs, grids, ref_grads  # noqa: E402
import flashc  # noqa: E402
import flashc.ops  # noqa: E402

CASES = {  # (batch, seqlen_q, seqlen_k)
    "inp_doc_d128_bf16": [(2, 1023, 1023), (1, 2048, 2048), (2, 113, 203)],
    "inp_blocks_d64_bf16": [(2, 2048, 2048), (1, 1000, 1900)],
}


def math_of(name):
    return MATH["_".join(name.split("_")[:2])]


def launch(mod, q, k, v, do, ins, blocks, mode):
    """Module.forward then Module.backward: (out, lse, dq, dk, dv)."""
    out, lse = mod.forward(q, k, v, inputs=ins, blocks=blocks)
    dq, dk, dv = mod.backward(do, q, k, v, out, lse, mode=mode, inputs=ins, blocks=blocks)
    return out, lse, dq, dk, dv


def same_bits(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def check_reuse(mod, name, case, gen):
    """Bitwise: lists built per launch vs built once and reused."""
    info = mod.info
    dt, H, KH, D, DV = (DT[info["dtype"]], info["heads"], info["kv_heads"], info["head_dim"],
                        info["v_head_dim"])
    b, sq, sk = case
    ins = case_inputs(name, b, sq, sk, H, gen)
    other = case_inputs(name, b, sq, sk, H, gen)  # other values: the module's lists rebuilt
    q, k, v = rand(b, sq, H, D, dtype=dt), rand(b, sk, KH, D, dtype=dt), rand(b, sk, KH, DV, dtype=dt)
    do = rand(b, sq, H, DV, dtype=dt)
    label = f"b={b} sq={sq} sk={sk}"
    for mode in ("deterministic", "atomic"):
        auto = launch(mod, q, k, v, do, ins, None, mode)
        blocks = mod.blocks(q, k, inputs=ins)
        ok, n = True, 0
        for _ in range(3):
            launch(mod, q, k, v, do, other, None, mode)  # the module's scratch lists change
            got = launch(mod, q, k, v, do, ins, blocks, mode)
            # the atomic backward's dq varies in its last bits from run to run
            want, have = (auto, got) if mode == "deterministic" else \
                (auto[:2] + auto[3:], got[:2] + got[3:])
            ok &= same_bits(want, have)
            n += 1
        torch.cuda.synchronize()
        report(ok, f"{name} reuse {mode}", f"{label}: {len(blocks)} classifiers, {n} launches "
               f"with one Blocks {'bitwise equal' if ok else 'DIFFER from'} per-launch lists "
               f"(out, lse, {'dq, ' if mode == 'deterministic' else ''}dk, dv)")
        blocks.close()
    return q, k, v, do, ins


def check_ref(mod, name, case, tensors):
    """attention with and without blocks= (autograd, deterministic): the same
    bits, and inputs.py's reference rule."""
    q, k, v, do, ins = tensors
    info = mod.info
    dt = DT[info["dtype"]]
    b, sq, sk = case
    blocks = flashc.blocks(q, k, mod, inputs=ins)
    got = {}
    for key, bl in (("auto", None), ("blocks", blocks)):
        args = [x.clone().requires_grad_() for x in (q, k, v)]
        out = flashc.attention(*args, mod, inputs=ins, blocks=bl)
        out.backward(do)
        got[key] = [out.detach()] + [a.grad for a in args]
    scale = info["scale"] or 1.0
    ref = ref_grads(q, k, v, do, scale, math_of(name), ins, torch.float64)
    pt = ref_grads(q, k, v, do, scale, math_of(name), ins, dt)
    bits = same_bits(got["auto"], got["blocks"])
    ok, lines = bits, []
    for label, g, r, p_, mult in zip(("out", "dq", "dk", "dv"), got["blocks"], ref, pt, (2, 3, 3, 3)):
        e, bound = err(g, r), mult * err(p_, r) + 1e-5
        ok &= e <= bound and not torch.isnan(g).any().item()
        lines.append(f"{label} {e:.1e}/{bound:.1e}")
    report(ok, f"{name} attention(blocks=)", f"b={b} sq={sq} sk={sk}: "
           f"{'bitwise equal to' if bits else 'DIFFERS from'} without; " + ", ".join(lines))
    return blocks


def host_tiles(keep, tq, tk, cols):
    """keep [b, lh, sq, sk] classified per tile pair of a rows (tq x tk) or
    cols list: (any, all, edge) over [b, lh, row_tiles, steps]; `all` counts
    the elements in range only, edge marks tiles that pass the end."""
    if cols:
        keep, tq, tk = keep.transpose(2, 3), tk, tq
    b, lh, R, S = keep.shape
    nr, ns = -(-R // tq), -(-S // tk)
    pad = (0, ns * tk - S, 0, nr * tq - R)
    k8 = keep.to(torch.uint8)
    anyk = F.pad(k8, pad, value=0).reshape(b, lh, nr, tq, ns, tk).amax(dim=(3, 5)) > 0
    allk = F.pad(k8, pad, value=1).reshape(b, lh, nr, tq, ns, tk).amin(dim=(3, 5)) > 0
    r = torch.arange(nr, device=keep.device)[:, None]
    s = torch.arange(ns, device=keep.device)[None, :]
    edge = ((r + 1) * tq > R) | ((s + 1) * tk > S)
    return anyk, allk, edge.expand(b, lh, nr, ns)


def check_lists(mod, name, case, tensors, blocks):
    """The lists each classifier wrote against the host's classification."""
    q, k, v, do, ins = tensors
    b, sq, sk = case
    H = mod.info["heads"]
    _, keep = math_of(name)(torch.zeros(1, 1, 1, 1, device="cuda"), ins, *grids(b, H, sq, sk))
    keep = torch.broadcast_to(keep, (b, H, sq, sk))
    torch.cuda.synchronize()
    for kname, lst, cnt in blocks.lists():
        kinfo = mod.kernel(kname)
        lh, cols = kinfo["list_heads"], kinfo["blocks"] == "cols"
        kp = keep if lh == H else keep[:, :1]
        anyk, allk, edge = (t.cpu() for t in host_tiles(kp, kinfo["tile_q"], kinfo["tile_kv"], cols))
        lst, cnt = lst.cpu(), cnt.cpu()
        bad, conservative, rows = [], 0, 0
        want_shape = tuple(anyk.shape[:3])
        if tuple(cnt.shape) != want_shape or lst.shape[3] != anyk.shape[3] + 1:
            report(False, f"{name} lists {kname}", f"shape {tuple(lst.shape)} / {tuple(cnt.shape)}, "
                   f"host {want_shape} x {anyk.shape[3] + 1}")
            continue
        for idx in torch.cartesian_prod(*(torch.arange(n) for n in want_shape)).tolist():
            rows += 1
            bi, hi, ri = idx
            n = int(cnt[bi, hi, ri])
            want = torch.nonzero(anyk[bi, hi, ri]).flatten().tolist()
            if not 0 <= n < lst.shape[3]:
                bad.append(f"row {idx}: count {n} out of [0, {lst.shape[3] - 1}]")
                continue
            entries = lst[bi, hi, ri, :n + 1].tolist()
            steps = [e >> 1 for e in entries[:n]]
            if n != len(want) or steps != want or entries[n] % 2:
                bad.append(f"row {idx}: count {n} steps {steps[:8]} sentinel {entries[n]}; "
                           f"host {want[:8]}")
                continue
            for e, s in zip(entries[:n], steps):
                full, host_full = e & 1, bool(allk[bi, hi, ri, s])
                if full == host_full:
                    continue
                if not full and host_full and edge[bi, hi, ri, s]:
                    conservative += 1
                    continue
                bad.append(f"row {idx} step {s}: full {full}, host {int(host_full)}")
        report(not bad, f"{name} lists {kname}",
               f"b={b} sq={sq} sk={sk}: {rows} rows, list_heads {lh}, {kinfo['blocks']}"
               + (f", {conservative} edge tiles partial" if conservative else "")
               + (f"; {len(bad)} wrong, first: {bad[0]}" if bad else ": as the host classifies"))


def check_refusals(mods, gen):
    doc, blk = mods.get("inp_doc_d128_bf16"), mods.get("inp_blocks_d64_bf16")
    if doc is None:
        return
    q = rand(1, 256, 16, 128, dtype=torch.bfloat16)
    k = rand(1, 256, 4, 128, dtype=torch.bfloat16)
    ins = case_inputs("inp_doc_d128_bf16", 1, 256, 256, 16, gen)
    blocks = doc.blocks(q, k, inputs=ins)
    q2 = rand(1, 128, 16, 128, dtype=torch.bfloat16)
    expect_refusal("blocks of other sizes", lambda: doc.forward(q2, k, k, inputs=ins, blocks=blocks),
                   "blocks: made for batch 1, seqlen_q 256")
    if blk is not None:
        qb = rand(1, 256, 4, 64, dtype=torch.bfloat16)
        kb = rand(1, 256, 2, 64, dtype=torch.bfloat16)
        bins = case_inputs("inp_blocks_d64_bf16", 1, 256, 256, 4, gen)
        expect_refusal("blocks of another module",
                       lambda: blk.forward(qb, kb, kb, inputs=bins, blocks=blocks), "blocks:")
    expect_refusal("blocks: inputs of other sizes",
                   lambda: doc.blocks(q, k, inputs={"doc": ins["doc"][:, :100]}), "doc")
    blocks.close()
    expect_refusal("a closed Blocks", lambda: doc.forward(q, k, k, inputs=ins, blocks=blocks),
                   "closed")


def check_no_classifiers(ptx_dir):
    """A module without classifiers: an empty Blocks, launches as without."""
    path = os.path.join(ptx_dir, "inp_t5_d64_f16.ptx")
    if not os.path.exists(path):
        return
    mod = flashc.load(path)
    if mod.has_blocks:
        report(True, "no classifiers", "inp_t5_d64_f16 has classifiers: nothing to check")
        return
    q = rand(1, 200, 8, 64, dtype=torch.float16)
    ins = {"bias": torch.randn(8, 32, device="cuda").to(torch.bfloat16),
           "slopes": torch.rand(8, device="cuda") * 0.1, "window": 50}
    blocks = mod.blocks(q, q, inputs=ins)
    a = mod.forward(q, q, q, inputs=ins)
    b = mod.forward(q, q, q, inputs=ins, blocks=blocks)
    report(len(blocks) == 0 and same_bits(a, b), "no classifiers",
           f"inp_t5_d64_f16: {len(blocks)} lists, launch with the empty Blocks "
           f"{'bitwise equal' if same_bits(a, b) else 'DIFFERS'}")


def main():
    a, gen = start("block_lists")
    mods = load_modules(a.ptx_dir, CASES, lambda mod: None if mod.has_blocks else (
        "no classifier kernels (mode blocks): built with the block-lists pass off?"))

    def check_case(mod, name, case):
        tensors = check_reuse(mod, name, case, gen)
        blocks = check_ref(mod, name, case, tensors)
        check_lists(mod, name, case, tensors, blocks)
        blocks.close()

    run_cases(mods, CASES, check_case)
    try:
        check_refusals(mods, gen)
        check_no_classifiers(a.ptx_dir)
    except Exception as e:  # noqa: BLE001 - reported as a failure
        report(False, "refusals", f"{type(e).__name__}: {e}")
    finish("block_lists")


if __name__ == "__main__":
    main()
