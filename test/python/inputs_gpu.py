"""Run-time inputs on a GPU (docs/abi.md, "Run-time inputs"): what the kernels
receive. Launches test/python/Inputs/inputs_probe.ptx, whose kernels write
the parameters they were passed for their inputs (doc's pointer and two
strides, softcap's f32, win's i32, doc's first element, batch) into the first
40 bytes of O (the forward, the dropout forward) or dQ (bwd_q), through every
way the package launches: Module.forward / backward, the torch ops under
autograd, torch.compile(fullgraph=True), and the refusals. Needs a GPU,
PyTorch and the runtime library (FLASHC_LIB_DIR):

    FLASHC_LIB_DIR=build-gpu python3 test/python/inputs_gpu.py

Prints one line a check and `N passed, M failed` last; exits 1 on a failure.
"""
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import flashc  # noqa: E402
import flashc.ops  # noqa: E402,F401

PTX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs", "inputs_probe.ptx")
B, SQ, SK = 2, 64, 128
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}")


def probe_words(t):
    """The 40 bytes a probe kernel wrote at the start of t (bf16)."""
    raw = bytes(t.detach().reshape(-1)[:20].view(torch.uint8).cpu().tolist())
    ptr, s0, s1, softcap, win, first, batch = struct.unpack("<QqqfiiI", raw)
    return {"ptr": ptr, "s0": s0, "s1": s1, "softcap": softcap, "win": win, "first": first,
            "batch": batch}


def expect(doc, softcap, win):
    return {"ptr": doc.data_ptr(), "s0": doc.stride(0), "s1": doc.stride(1), "softcap": softcap,
            "win": win, "first": int(doc[0, 0]), "batch": B}


def same(name, t, want):
    got = probe_words(t)
    check(name, got == want, f"got {got}, want {want}")


m = flashc.load(PTX)
dev = torch.device("cuda", 0)
q = torch.randn(B, SQ, 1, 64, device=dev, dtype=torch.bfloat16)
k = torch.randn(B, SK, 1, 64, device=dev, dtype=torch.bfloat16)
v = torch.randn(B, SK, 1, 64, device=dev, dtype=torch.bfloat16)
# doc: a strided view (every other column of a wider tensor), first element 12345
wide = torch.arange(B * 2 * SK, device=dev, dtype=torch.int32).reshape(B, 2 * SK)
wide[0, 0] = 12345
doc = wide[:, ::2]
inputs = {"doc": doc, "softcap": 2.5, "win": -7}
want = expect(doc, 2.5, -7)

# Module.forward: the plain kernel, then the dropout one (its six parameters
# come before the inputs')
out, lse = m.forward(q, k, v, inputs=inputs)
torch.cuda.synchronize()
same("forward: doc's pointer and strides, softcap, win", out, want)
out, lse = m.forward(q, k, v, dropout_p=0.1, seed=1, offset=2, inputs=inputs)
torch.cuda.synchronize()
same("forward with dropout (probe_dropout)", out, want)
bcast = doc[:, :1].expand(B, SK)  # stride 0: a broadcast dim
out, lse = m.forward(q, k, v, inputs={**inputs, "doc": bcast})
torch.cuda.synchronize()
same("forward: a broadcast input (stride 0)", out, expect(bcast, 2.5, -7))

# Module.backward, deterministic: pre, kv, q (the probe is bwd_q: dq)
dq, dk, dv = m.backward(torch.randn_like(out), q, k, v, out, lse, mode="deterministic",
                        inputs=inputs)
torch.cuda.synchronize()
same("backward: bwd_q's inputs", dq, want)

# the refusals, with the C runtime's messages (or the package's)
for name, bad, needle in (
        ("unbound input", {"doc": doc, "softcap": 1.0}, "input 'win' (i32) is not bound"),
        ("unknown input", {**inputs, "nope": 1.0}, "no run-time input of that name"),
        ("CPU tensor", {**inputs, "doc": doc.cpu()}, "must be on the same device"),
        ("wrong dtype", {**inputs, "doc": doc.float()}, "dtype is torch.float32"),
        ("wrong dims", {**inputs, "doc": doc[:, :SQ]}, "dim 1 is 64, the launch's seqlen_k is 128"),
        ("non-finite scalar", {**inputs, "softcap": float("nan")}, "not a finite number"),
        ("i32 out of range", {**inputs, "win": 2.0 ** 40}, "not an integer in int32 range"),
        ("overlap with out", None, "overlaps o")):
    try:
        if bad is None:  # doc inside the output
            o = torch.empty(B, SQ, 1, 64, device=dev, dtype=torch.bfloat16)
            m.on(q).forward(q, k, v, o, inputs={**inputs, "doc": o.view(torch.int32)[:, :, 0, 0]
                                                .as_strided((B, SK), (1, 1))})
        else:
            m.forward(q, k, v, inputs=bad)
        check(f"refused: {name}", False, "no error")
    except flashc.FlashcError as e:
        check(f"refused: {name}", needle in str(e), str(e))
try:
    m.forward(torch.randn(B, SK + 1, 1, 64, device=dev, dtype=torch.bfloat16), k, v,
              inputs=inputs)
    check("refused: require seqlen_q<=seqlen_k", False, "no error")
except flashc.FlashcError as e:
    check("refused: require seqlen_q<=seqlen_k", "requires seqlen_q <= seqlen_k" in str(e), str(e))

# the torch ops: attention with inputs, autograd through flashc::bwd (which
# gets the same inputs), the layout bhsd (inputs as declared, not transposed)
qg = q.clone().requires_grad_()
out = flashc.attention(qg, k, v, m, inputs=inputs, backward_mode="deterministic")
torch.cuda.synchronize()
same("attention op: forward", out, want)
out.float().sum().backward()
torch.cuda.synchronize()
same("attention op: autograd's backward (bwd_q)", qg.grad, want)
out = flashc.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), m,
                       layout="bhsd", inputs=inputs)
torch.cuda.synchronize()
same("attention op: layout bhsd", out.transpose(1, 2).contiguous(), want)

# opcheck: schema, autograd registration, fake tensors (outputs beyond the
# probe's 40 bytes are not written, so no comparison of values)
try:
    torch.library.opcheck(torch.ops.flashc.fwd.default,
                          (q, k, v, m.id, 0.0, 1, ["doc"], [doc], ["softcap", "win"], [2.5, -7.0]),
                          test_utils=("test_schema", "test_autograd_registration",
                                      "test_faketensor"))
    check("opcheck flashc::fwd with inputs", True)
except Exception as e:  # noqa: BLE001 (report whatever opcheck raised)
    check("opcheck flashc::fwd with inputs", False, f"{type(e).__name__}: {e}")


# torch.compile(fullgraph=True): the inputs dict traced into the op's lists
@torch.compile(fullgraph=True, dynamic=False)
def step(q, k, v, doc):
    return flashc.attention(q, k, v, m, inputs={"doc": doc, "softcap": 2.5, "win": -7})


try:
    out = step(q, k, v, doc)
    torch.cuda.synchronize()
    same("torch.compile(fullgraph=True) with inputs", out, want)
except Exception as e:  # noqa: BLE001
    check("torch.compile(fullgraph=True) with inputs", False, f"{type(e).__name__}: {e}")

passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
