"""GPU correctness suite for flashc kernels (runs on the GPU machine).

    python3 test/gpu/correctness.py PTX_DIR [--lib build-gpu/libflashc_runtime.so]
                                    [--seed N] [--only NAME[,NAME]] [--quick]

For every PTX_DIR/NAME.ptx whose NAME is in specs.py, runs that kernel's
launch grid through the runtime (ctypes) with fresh random inputs, outputs
poisoned with NaN, and FlashAttention's rule:
    ref = the spec's attention in float64 (on the GPU, upcast inputs)
    pt  = the same attention in the input dtype (S, P, O rounded to it)
    pass iff max|out - ref| <= 2 max|pt - ref| + 1e-5, and no NaN.
LSE (float32) is held to max|lse - ref| <= 2 max|lse32 - ref| + 1e-4 where
lse32 is float32 attention's. Kernels with `expect_fail` in specs.py (the
fixture's planted bugs) must fail: that is reported as "caught". Fully masked rows must give O = 0 and
LSE = -inf exactly; the padding around a padded O must stay NaN (unwritten).
Prints one line per case and `N passed, N failed` last; writes
$OUT/correctness.json when OUT is set; exits 1 on any failure.
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from specs import SPECS  # noqa: E402
from suite import Suite  # noqa: E402

DT = {"bf16": torch.bfloat16, "f16": torch.float16}
CHUNK_BYTES = 1 << 29  # float64 scores per reference chunk
# LSE is float32 computed from float32 scores, so its baseline is float32
# attention (not the bf16/fp16 one, whose rounded S would allow errors of
# 1e-2); the absolute slack covers exp2/log approximations on rows of 4096
# keys (LSE values ~10, float32 ulp ~1e-6).
LSE_SLACK = 1e-4


# ---- inputs --------------------------------------------------------------

def make_inputs(spec, b, sq, sk, layout, gen):
    """q, k, v, o (o poisoned with NaN) and o's base buffer (for padding checks)."""
    dt, H, KH = DT[spec["dtype"]], spec["heads"], spec["kv_heads"]
    D, DV = spec["head_dim"], spec["v_head_dim"]
    dev = "cuda"

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=dev, dtype=torch.float32).to(dt)

    if layout == "packed":
        assert sq == sk and D == DV, "packed layout needs seqlen_q == seqlen_k and D == DV"
        qkv = randn(b, sq, H + 2 * KH, D)
        q, k, v = qkv[:, :, :H], qkv[:, :, H:H + KH], qkv[:, :, H + KH:]
        o_base = torch.full((b, sq, H, DV + 8), float("nan"), device=dev, dtype=dt)
        o = o_base[..., :DV]
    elif layout == "bhsd":
        q = randn(b, H, sq, D).transpose(1, 2)
        k = randn(b, KH, sk, D).transpose(1, 2)
        v = randn(b, KH, sk, DV).transpose(1, 2)
        o_base = torch.full((b, H, sq, DV), float("nan"), device=dev, dtype=dt)
        o = o_base.transpose(1, 2)
    else:
        q, k, v = randn(b, sq, H, D), randn(b, sk, KH, D), randn(b, sk, KH, DV)
        o_base = torch.full((b, sq, H, DV), float("nan"), device=dev, dtype=dt)
        o = o_base
    return q, k, v, o, o_base


# ---- reference -------------------------------------------------------------

def attention(spec, q, k, v, sq, sk, exact):
    """One batch element: q [sq, H, D], k/v [sk, KH, *]. exact: float64 all the
    way; else the dtype path (S, P, O rounded to the input dtype, softmax in
    float32, as torch computes attention in bf16/fp16). Returns O [sq, H, DV]
    (float64) and LSE [H, sq] (float64), fully masked rows O = 0, LSE = -inf."""
    H, KH = spec["heads"], spec["kv_heads"]
    if sk == 0:  # no key at all: every row fully masked (O = 0, LSE = -inf)
        return (torch.zeros(sq, H, v.shape[-1], dtype=torch.float64, device=q.device),
                torch.full((H, sq), float("-inf"), dtype=torch.float64, device=q.device))
    g = H // KH
    qh = q.transpose(0, 1)                                   # [H, sq, D]
    kh = k.transpose(0, 1).repeat_interleave(g, dim=0)       # [H, sk, D]
    vh = v.transpose(0, 1).repeat_interleave(g, dim=0)
    qi = torch.arange(sq, device=q.device).view(sq, 1)
    ki = torch.arange(sk, device=q.device).view(1, sk)
    keep = spec["mask"](qi, ki, sq, sk) if spec["mask"] else torch.ones(
        sq, sk, dtype=torch.bool, device=q.device)
    if exact:
        s = torch.matmul(qh.double(), kh.double().transpose(1, 2)) * spec["scale"]
        if spec["score"]:
            s = spec["score"](s, torch)
    else:
        s = torch.matmul(qh, kh.transpose(1, 2)).float() * spec["scale"]
        if spec["score"]:
            s = spec["score"](s, torch)
        s = s.to(q.dtype).float()                             # S rounded
    s = s.masked_fill(~keep, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    lse = (torch.log(l) + m).squeeze(-1).double()             # -inf where l == 0
    p = p / torch.where(l == 0, torch.ones_like(l), l)
    if exact:
        o = torch.matmul(p, vh.double())
    else:
        o = torch.matmul(p.to(q.dtype), vh).double()          # P and O rounded
    return o.transpose(0, 1), lse


def heads_per_chunk(spec, sq, sk):
    return max(1, min(spec["heads"], CHUNK_BYTES // max(1, sq * sk * 8 * 3)))


# Where compare() computes the references: "cpu" under compute-sanitizer
# (--cpu-reference), whose racecheck fails inside cuBLAS's own kernels.
REF_DEVICE = "cuda"


def compare(spec, q, k, v, o, lse, sq, sk):
    """Max errors of out / pt against ref over the whole launch."""
    q, k, v, o = (t.to(REF_DEVICE) for t in (q, k, v, o))
    lse = lse.to(REF_DEVICE) if lse is not None else None
    H, KH = spec["heads"], spec["kv_heads"]
    g = H // KH
    hc = heads_per_chunk(spec, sq, sk)
    hc = max(g, hc // g * g)  # whole GQA groups per chunk
    r = dict(o_err=0.0, o_pt=0.0, lse_err=0.0, lse_pt=0.0, nan=0, masked_bad=0, masked_rows=0)
    for b in range(q.shape[0]):
        for h0 in range(0, H, hc):
            h1 = min(H, h0 + hc)
            qs, ks, vs = q[b, :, h0:h1], k[b, :, h0 // g:h1 // g], v[b, :, h0 // g:h1 // g]
            sub = dict(spec, heads=h1 - h0, kv_heads=(h1 - h0) // g)
            ro, rl = attention(sub, qs, ks, vs, sq, sk, exact=True)
            po, _ = attention(sub, qs, ks, vs, sq, sk, exact=False)
            _, pl = attention(sub, qs.float(), ks.float(), vs.float(), sq, sk, exact=False)
            out = o[b, :, h0:h1].double()
            r["nan"] += int(torch.isnan(out).sum())
            r["o_err"] = max(r["o_err"], float((out - ro).abs().nan_to_num(float("inf")).max()))
            r["o_pt"] = max(r["o_pt"], float((po - ro).abs().max()))
            masked = torch.isinf(rl)                              # [h, sq]
            r["masked_rows"] += int(masked.sum())
            if masked.any():
                rows_o = out.transpose(0, 1)[masked]              # [n, DV]
                r["masked_bad"] += int((rows_o != 0).any(dim=-1).sum())
            if lse is not None:
                got = lse[b, h0:h1].double()
                r["nan"] += int(torch.isnan(got).sum())
                if masked.any():
                    r["masked_bad"] += int((got[masked] != float("-inf")).sum())
                live = ~masked
                if live.any():
                    r["lse_err"] = max(r["lse_err"], float(
                        (got[live] - rl[live]).abs().nan_to_num(float("inf")).max()))
                    r["lse_pt"] = max(r["lse_pt"], float((pl[live] - rl[live]).abs().max()))
    return r


# ---- one case ----------------------------------------------------------------

def run_case(mod, name, spec, case, seed, want_lse):
    b, sq, sk, layout = case
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    q, k, v, o, o_base = make_inputs(spec, b, sq, sk, layout, gen)
    lse = None
    if want_lse:
        lse = torch.full((b, spec["heads"], sq), float("nan"), device="cuda",
                         dtype=torch.float32)
    t0 = time.time()
    mod.forward(q, k, v, o, lse)
    torch.cuda.synchronize()
    r = compare(spec, q, k, v, o, lse, sq, sk)
    pad_bad = 0
    if layout == "packed":
        pad_bad = int((~torch.isnan(o_base[..., spec["v_head_dim"]:])).sum())
    o_tol = 2 * r["o_pt"] + 1e-5
    lse_tol = 2 * r["lse_pt"] + LSE_SLACK
    ok = (r["nan"] == 0 and r["masked_bad"] == 0 and pad_bad == 0 and r["o_err"] <= o_tol
          and (lse is None or r["lse_err"] <= lse_tol))
    r.update(kernel=name, batch=b, seqlen_q=sq, seqlen_k=sk, layout=layout, seed=seed,
             lse_checked=want_lse, pad_bad=pad_bad, o_tol=o_tol, lse_tol=lse_tol, passed=ok,
             seconds=round(time.time() - t0, 3))
    return r


def describe(r):
    lse = (f"lse {r['lse_err']:.2e}/{r['lse_tol']:.2e}" if r["lse_checked"] else "lse scratch")
    extra = ""
    if r["nan"] or r["masked_bad"] or r["pad_bad"]:
        extra = f" NaN {r['nan']} bad-masked {r['masked_bad']} pad-written {r['pad_bad']}"
    return (f"{'PASS' if r['passed'] else 'FAIL'} {r['kernel']:<22} b={r['batch']} "
            f"sq={r['seqlen_q']} sk={r['seqlen_k']} {r['layout']:<6} "
            f"o {r['o_err']:.2e}/{r['o_tol']:.2e} {lse} masked-rows {r['masked_rows']}{extra}")


# ---- validation through the binding --------------------------------------------

def validation_cases(mod, spec):
    """A few refused launches: the status must come back, nothing launched."""
    dt, H, KH, D = DT[spec["dtype"]], spec["heads"], spec["kv_heads"], spec["head_dim"]
    DV = spec["v_head_dim"]
    q = torch.randn(1, 16, H, D, device="cuda", dtype=dt)
    k = torch.randn(1, 16, KH, D, device="cuda", dtype=dt)
    v = torch.randn(1, 16, KH, DV, device="cuda", dtype=dt)
    o = torch.empty(1, 16, H, DV, device="cuda", dtype=dt)
    bad_k = torch.randn(1, 16, KH, D + 8, device="cuda", dtype=dt)
    other = torch.float16 if dt == torch.bfloat16 else torch.bfloat16
    flat = torch.empty(1 * 16 * H * D + 8, device="cuda", dtype=dt)
    misaligned = flat[1:1 + 16 * H * D].view(1, 16, H, D)
    want = [("k head_dim", (q, bad_k, v, o), "FA_ERR_SHAPE"),
            ("q dtype", (q.to(other), k, v, o), "FA_ERR_DTYPE"),
            ("q misaligned", (misaligned, k, v, o), "FA_ERR_ALIGNMENT"),
            ("o aliases q", (q, k, v, q[..., :DV] if DV <= D else o), "FA_ERR_INVALID_ARGUMENT"
             if DV <= D else "FA_OK")]
    results = []
    for label, ts, status in want:
        got, msg = mod.forward(*ts, check=False)
        results.append((label, got == status, f"{got}: {msg}"))
    torch.cuda.synchronize()
    return results


# ---- main ----------------------------------------------------------------------

# --small (the compute-sanitizer grid, scripts/gpu-sanitize.sh): partial Q and
# K/V tiles, several K/V tiles, seqlen_q > seqlen_k (fully masked rows under a
# causal mask) and a strided layout, on few blocks.
SMALL_CASES = [(1, 130, 203, "contig"), (2, 77, 65, "bhsd")]

def main():
    def add_args(ap):
        ap.add_argument("--quick", action="store_true", help="first case of each kernel only")
        ap.add_argument("--small", action="store_true",
                        help="two short launches a kernel (for compute-sanitizer)")
        ap.add_argument("--cpu-reference", action="store_true",
                        help="compute the references on the CPU (no cuBLAS on the GPU)")
    global REF_DEVICE
    st = Suite("correctness", add_args)
    REF_DEVICE = "cpu" if st.args.cpu_reference else "cuda"
    first = True
    for name, spec in st.kernels(SPECS, "test/gpu/specs.py"):
        mod = st.load(name, st.ctx.load_ptx)
        if mod is None:
            continue
        st.check_meta(name, mod.info, {k: spec[k] for k in ("head_dim", "v_head_dim", "heads",
                                                            "kv_heads", "dtype")}, "specs.py")
        cases = (SMALL_CASES if st.args.small else spec["cases"][:1] if st.args.quick
                 else spec["cases"])
        for i, case in enumerate(cases):
            want_lse = i % 3 != 2 or spec["expect_fail"]
            st.run_case(name, spec, list(case),
                        lambda: run_case(mod, name, spec, case, st.seed * 1000 + i,
                                         want_lse=want_lse), describe)
        if first:
            st.validation(name, 22, validation_cases(mod, spec))
            first = False
        mod.close()
    return st.finish("correctness.json")


if __name__ == "__main__":
    sys.exit(main())
