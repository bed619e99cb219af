"""GPU correctness suite for flashc decode kernels (runs on the GPU machine).

    python3 test/gpu/decode.py PTX_DIR [--lib build-gpu/libflashc_runtime.so]
                               [--seed N] [--only NAME[,NAME]]

For every PTX_DIR/NAME.ptx whose NAME is in decode_specs.py, runs that
kernel's cases through fa_decode (ctypes) with fresh random inputs, outputs
poisoned with NaN, every cache position past a sequence's length NaN (and
every block-table entry past it pointing at a NaN page), host copies of the
lengths and the block table (so the runtime validates them), and the rule of
correctness.py: ref = float64 attention, pt = the same in the input dtype,
pass iff max|out - ref| <= 2 max|pt - ref| + 1e-5 and no NaN; LSE against
float32 attention's error + 1e-4; rows without keys O = 0, LSE = -inf; the
padding of a strided O stays NaN. Prints one line per case and
`N passed, N failed` last; writes $OUT/decode.json when OUT is set.
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import correctness  # noqa: E402
from correctness import LSE_SLACK, compare  # noqa: E402
from decode_specs import DECODE_SPECS, case  # noqa: E402
from flashc_rt_decode import DecodeModule  # noqa: E402
from specs import causal  # noqa: E402
from suite import Suite  # noqa: E402

DT = {"bf16": torch.bfloat16, "f16": torch.float16}
NAN = float("nan")


# ---- inputs ----------------------------------------------------------------

def logical_inputs(spec, c, gen):
    """q [b, q_len, H, D] and per sequence k_b, v_b [len_b, KH, D] (float32)."""
    H, KH, D, DV = spec["heads"], spec["kv_heads"], spec["head_dim"], spec["v_head_dim"]
    B, ql = len(c["lens"]), c["q_len"]

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=torch.float32)

    q = randn(B, ql, H, D)
    ks = [randn(n, KH, D) for n in c["lens"]]
    vs = [randn(n, KH, DV) for n in c["lens"]]
    g = H // KH
    if c["inputs"] == "hot":  # one score ~ 120 = phi + 110: p = exp(s - phi) would overflow
        for b, n in enumerate(c["lens"]):
            if n:
                k0 = ks[b][0].repeat_interleave(g, dim=0)          # [H, D]
                q[b] = 120.0 / D ** 0.5 * k0[None] + 0.1 * randn(ql, H, D)
    elif c["inputs"] == "cold":  # every score ~ -150: every exp(s - phi) underflows
        u = randn(KH, D)
        for b, n in enumerate(c["lens"]):
            ks[b] = u[None] + 0.5 * randn(n, KH, D)
            q[b] = -150.0 / D ** 0.5 * u.repeat_interleave(g, dim=0)[None].expand(ql, H, D)
    return q, ks, vs


def cache_tensors(spec, c, ks, vs, dt, gen):
    """k, v caches (NaN wherever no token lives), block table (or None)."""
    KH, D, DV = spec["kv_heads"], spec["head_dim"], spec["v_head_dim"]
    lens, B = c["lens"], len(c["lens"])
    if spec["cache"] != "paged":
        cap = max(lens) + 5  # a NaN tail after the longest sequence too
        k = torch.full((B, cap, KH, D), NAN, device="cuda", dtype=dt)
        v = torch.full((B, cap, KH, DV), NAN, device="cuda", dtype=dt)
        for b, n in enumerate(lens):
            k[b, :n], v[b, :n] = ks[b].to(dt), vs[b].to(dt)
        return k, v, None
    ps = spec["page_size"]
    need = [(n + ps - 1) // ps for n in lens]
    pages = sum(need) + 1                     # the last page stays NaN: the poison page
    poison = pages - 1
    perm = torch.randperm(pages - 1, generator=torch.Generator().manual_seed(
        int(torch.randint(0, 1 << 30, (1,), generator=gen, device="cuda")))).tolist()
    max_pages = max(need) + 1                 # every row has entries past its length
    bt = torch.full((B, max_pages), poison, dtype=torch.int32)
    k = torch.full((pages, ps, KH, D), NAN, device="cuda", dtype=dt)
    v = torch.full((pages, ps, KH, DV), NAN, device="cuda", dtype=dt)
    at = 0
    for b, n in enumerate(lens):
        ids = perm[at:at + need[b]]
        at += need[b]
        bt[b, :need[b]] = torch.tensor(ids, dtype=torch.int32)
        if n:
            idx = torch.tensor(ids, device="cuda")
            kp = torch.full((need[b] * ps, KH, D), NAN, device="cuda")
            vp = torch.full((need[b] * ps, KH, DV), NAN, device="cuda")
            kp[:n], vp[:n] = ks[b], vs[b]
            k[idx] = kp.view(need[b], ps, KH, D).to(dt)
            v[idx] = vp.view(need[b], ps, KH, DV).to(dt)
    return k, v, bt


def outputs(spec, c, dt):
    B, ql, H, DV = len(c["lens"]), c["q_len"], spec["heads"], spec["v_head_dim"]
    if c["layout"] == "strided":
        o_base = torch.full((B, ql, H, DV + 8), NAN, device="cuda", dtype=dt)
        o = o_base[..., :DV]
    else:
        o_base = o = torch.full((B, ql, H, DV), NAN, device="cuda", dtype=dt)
    lse = torch.full((B, H, ql), NAN, device="cuda") if c["lse"] else None
    return o, o_base, lse


# ---- one case ----------------------------------------------------------------

def check_case(spec, c, q, ks, vs, o, lse):
    """correctness.compare per sequence (its own cache length), maxed."""
    ref_spec = dict(heads=spec["heads"], kv_heads=spec["kv_heads"], scale=spec["scale"],
                    mask=causal if spec["causal"] else None, score=None)
    tot = dict(o_err=0.0, o_pt=0.0, lse_err=0.0, lse_pt=0.0, nan=0, masked_bad=0, masked_rows=0)
    for b, n in enumerate(c["lens"]):
        lse_b = lse[b:b + 1] if lse is not None else None
        if n == 0:  # no keys at all: every row O = 0, LSE = -inf
            ob = o[b].double()
            tot["nan"] += int(torch.isnan(ob).sum())
            tot["masked_bad"] += int((ob != 0).any(dim=-1).sum())
            tot["masked_rows"] += ob.shape[0] * ob.shape[1]
            if lse_b is not None:
                tot["masked_bad"] += int((lse_b != float("-inf")).sum())
            continue
        r = compare(ref_spec, q[b:b + 1], ks[b][None], vs[b][None], o[b:b + 1], lse_b,
                    c["q_len"], n)
        for key in tot:
            tot[key] = max(tot[key], r[key]) if key.endswith(("err", "pt")) else tot[key] + r[key]
    return tot


def run_case(mod, name, spec, c, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    dt = DT[spec["dtype"]]
    q32, ks, vs = logical_inputs(spec, c, gen)
    k, v, bt = cache_tensors(spec, c, ks, vs, dt, gen)
    B, D = len(c["lens"]), spec["head_dim"]
    if c["layout"] == "strided":
        q = torch.full((B, c["q_len"], spec["heads"], D + 8), NAN, device="cuda", dtype=dt)[..., :D]
        q.copy_(q32)
    else:
        q = q32.to(dt)
    ks = [x.to(dt) for x in ks]  # the reference sees what the kernel sees
    vs = [x.to(dt) for x in vs]
    o, o_base, lse = outputs(spec, c, dt)
    seqlens_h = torch.tensor(c["lens"], dtype=torch.int32)
    seqlens = seqlens_h.cuda()
    bt_dev = bt.cuda() if bt is not None else None
    t0 = time.time()
    # A kernel compiled without split-kv (-disable-pass=split-kv, or the FA1
    # loop order) has no combine kernel and runs one split: the runtime
    # refuses a forced nsplit > 1 for it, so such a case runs with auto.
    nsplit_asked = c["nsplit"] if mod.info["decode"]["combine_kernel"] else 0
    mod.decode(q, k, v, o, seqlens, bt_dev, lse, host_seqlens=seqlens_h, host_block_table=bt,
               nsplit=nsplit_asked)
    torch.cuda.synchronize()
    nsplit, ran = mod.last_nsplit(), mod.last_kernel()
    r = check_case(spec, c, q, ks, vs, o, lse)
    pad_bad = int((~torch.isnan(o_base[..., spec["v_head_dim"]:])).sum()) if c["layout"] == "strided" else 0
    o_tol = 2 * r["o_pt"] + 1e-5
    lse_tol = 2 * r["lse_pt"] + LSE_SLACK
    ok = (r["nan"] == 0 and r["masked_bad"] == 0 and pad_bad == 0 and r["o_err"] <= o_tol
          and (lse is None or r["lse_err"] <= lse_tol))
    r.update(kernel=name, ran=ran, case=c, nsplit_run=nsplit, seed=seed, pad_bad=pad_bad, o_tol=o_tol,
             lse_tol=lse_tol, passed=ok, seconds=round(time.time() - t0, 3))
    return r


def describe(r):
    c = r["case"]
    lens = c["lens"] if len(c["lens"]) <= 4 else c["lens"][:4] + ["..."]
    lse = f"lse {r['lse_err']:.2e}/{r['lse_tol']:.2e}" if c["lse"] else "lse scratch"
    extra = ""
    if r["nan"] or r["masked_bad"] or r["pad_bad"]:
        extra = f" NaN {r['nan']} bad-masked {r['masked_bad']} pad-written {r['pad_bad']}"
    return (f"{'PASS' if r['passed'] else 'FAIL'} {r['kernel']:<30} ql={c['q_len']:<2} "
            f"lens={lens} nsplit={c['nsplit'] or 'auto'}->{r['nsplit_run']} {c['inputs']:<5} "
            f"{c['layout']:<7} o {r['o_err']:.2e}/{r['o_tol']:.2e} {lse} "
            f"masked-rows {r['masked_rows']}{extra}"
            + (f" ran {r['ran']}" if r.get("ran") and r["ran"] != r["kernel"] else ""))


# ---- validation through the binding ----------------------------------------------

def validation_cases(mod, spec):
    """Refused launches: the status must come back and nothing be launched."""
    dt, H, KH, D, DV = (DT[spec["dtype"]], spec["heads"], spec["kv_heads"], spec["head_dim"],
                        spec["v_head_dim"])
    ps = spec["page_size"]
    q = torch.randn(2, 1, H, D, device="cuda", dtype=dt)
    o = torch.empty(2, 1, H, DV, device="cuda", dtype=dt)
    k = torch.randn(8, ps, KH, D, device="cuda", dtype=dt)
    v = torch.randn(8, ps, KH, DV, device="cuda", dtype=dt)
    lens_h = torch.tensor([3 * ps, 1], dtype=torch.int32)
    bt_h = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]], dtype=torch.int32)
    bad_bt = bt_h.clone()
    bad_bt[0, 2] = 8  # needed by length 3 * ps, one past the pool
    long_h = torch.tensor([4 * ps + 1, 1], dtype=torch.int32)
    k_ps = torch.randn(16, ps // 2, KH, D, device="cuda", dtype=dt)
    q17 = torch.randn(2, 17, H, D, device="cuda", dtype=dt)
    o17 = torch.empty(2, 17, H, DV, device="cuda", dtype=dt)
    want = [
        ("block table entry past the pool", (q, k, v, o, lens_h.cuda(), bad_bt.cuda()),
         dict(host_seqlens=lens_h, host_block_table=bad_bt), "FA_ERR_INVALID_ARGUMENT"),
        ("length past max_pages * page_size", (q, k, v, o, long_h.cuda(), bt_h.cuda()),
         dict(host_seqlens=long_h, host_block_table=bt_h), "FA_ERR_SHAPE"),
        ("page size", (q, k_ps, k_ps, o, lens_h.cuda(), bt_h.cuda()), {}, "FA_ERR_SHAPE"),
        ("q_len 17", (q17, k, v, o17, lens_h.cuda(), bt_h.cuda()), {}, "FA_ERR_SHAPE"),
        ("valid", (q, k, v, o, lens_h.cuda(), bt_h.cuda()),
         dict(host_seqlens=lens_h, host_block_table=bt_h), "FA_OK"),
    ]
    results = []
    for label, ts, kw, status in want:
        got, msg = mod.decode(*ts, check=False, **kw)
        results.append((label, got == status, f"{got}: {msg}"))
    torch.cuda.synchronize()
    return results


# ---- main ----------------------------------------------------------------------

def small_cases(spec):
    """--small (the compute-sanitizer grid, scripts/gpu-sanitize.sh): the
    kernel's cases of at most 5000 keys, three at most, and one batch-1 8k
    cache, which launches a small-batch variant where there is one."""
    cases = [c for c in spec["cases"] if max(c["lens"]) <= 5000][:3]
    return cases + [case(1, [8192])]


def main():
    def add_args(ap):
        ap.add_argument("--small", action="store_true",
                        help="a few short caches a kernel (for compute-sanitizer)")
        ap.add_argument("--cpu-reference", action="store_true",
                        help="compute the references on the CPU (no cuBLAS on the GPU)")
    st = Suite("decode", add_args)
    correctness.REF_DEVICE = "cpu" if st.args.cpu_reference else "cuda"
    validated = False
    for name, spec in st.kernels(DECODE_SPECS, "test/gpu/decode_specs.py"):
        mod = st.load(name, lambda path: DecodeModule(st.ctx, path))
        if mod is None:
            continue
        info = mod.info
        st.check_meta(name, info, {k: spec[k] for k in ("head_dim", "v_head_dim", "heads",
                                                        "kv_heads", "dtype")}, "decode_specs.py")
        dinfo = info["decode"]
        if dinfo["cache"] != spec["cache"] or dinfo["page_size"] != spec["page_size"]:
            print(f"FAIL {name}: metadata cache {dinfo['cache']}/{dinfo['page_size']} but "
                  f"decode_specs.py says {spec['cache']}/{spec['page_size']}")
            st.failed += 1
        ran = set()
        for i, c in enumerate(small_cases(spec) if st.args.small else spec["cases"]):
            st.run_case(name, spec, c, lambda: run_case(mod, name, spec, c, st.seed * 1000 + i),
                        describe)
            ran.add(mod.last_kernel())
        # A small-batch variant (metadata wide_kernel) is checked only if some case ran it.
        wide = dinfo["wide_kernel"]
        if wide and wide not in ran and not spec["expect_fail"]:
            print(f"FAIL {name}: no case launched its small-batch variant {wide} "
                  f"(ran: {', '.join(sorted(k for k in ran if k))})")
            st.failed += 1
        if spec["cache"] == "paged" and not validated and not spec["expect_fail"]:
            validated = True
            st.validation(name, 30, validation_cases(mod, spec))
        mod.close()
        torch.cuda.empty_cache()
    return st.finish("decode.json")


if __name__ == "__main__":
    sys.exit(main())
