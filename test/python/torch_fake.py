"""test/python/torch_fake.test: the torch ops without a GPU. Importing
flashc.ops defines flashc::fwd / bwd / decode; their fake implementations give
the output shapes, dtypes and strides from a module's metadata (what
torch.compile traces with), gradients' fakes follow q, k, v's strides, and a
CPU tensor is refused by the dispatcher (the ops have CUDA kernels only).
Run-time inputs (argv[3]: inputs_probe.ptx) travel through fwd, bwd and
decode as their four lists; the fakes' shapes do not depend on them. A varlen
module (argv[4]: varlen_probe.ptx) takes packed [total, heads, d] tensors and
cu_seqlens: out [total_q, heads, dv], lse [heads, total_q], gradients packed
like q, k, v, also through autograd (the prefix sums saved for bwd); what
cannot go with them is refused before any launch."""
import ctypes
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import flashc
import flashc.ops
from flashc import runtime

train, decode, probe, vprobe = (flashc.load(p) for p in sys.argv[1:5])
print("ops:", ", ".join(str(getattr(torch.ops.flashc, n).default._schema).split("(")[0]
                        for n in ("fwd", "bwd", "decode")))
print("fwd tags:", [str(t).split(".")[-1] for t in torch.ops.flashc.fwd.default.tags])
INPUT_ARGS = ("input_names", "input_tensors", "scalar_names", "scalar_values")
VARLEN_ARGS = ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")
for n in ("fwd", "bwd", "decode"):
    args = getattr(torch.ops.flashc, n).default._schema.arguments
    print(f"{n} inputs:", [f"{a.name}={a.default_value}" for a in args if a.name in INPUT_ARGS])
for n in ("fwd", "bwd"):
    args = getattr(torch.ops.flashc, n).default._schema.arguments
    print(f"{n} varlen:", [f"{a.name}={a.default_value}" for a in args if a.name in VARLEN_ARGS])
for n in ("fwd", "bwd"):
    args = getattr(torch.ops.flashc, n).default._schema.arguments
    print(f"{n} blocks:", [f"{a.name}={a.default_value}" for a in args if a.name == "blocks"])
with FakeTensorMode():
    q = torch.empty(3, 8, 77, 64, device="cuda", dtype=torch.bfloat16)   # SDPA's layout
    k = torch.empty(3, 2, 91, 64, device="cuda", dtype=torch.bfloat16)
    out, lse = flashc.attention(q, k, k, train, layout="bhsd", return_lse=True)
    print("bhsd out", tuple(out.shape), out.dtype, "strides", out.stride(), "lse",
          tuple(lse.shape), lse.dtype)
    o, l, rng = torch.ops.flashc.fwd(q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2),
                                     train.id, 0.0, 1)
    print("fwd out", tuple(o.shape), "contiguous", o.is_contiguous(), "rng", tuple(rng.shape),
          rng.dtype, rng.device)
    dq, dk, dv = torch.ops.flashc.bwd(o, q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2),
                                      o, l, rng, train.id, 0.0, 1)
    print("bwd dq strides == q's", dq.stride() == q.transpose(1, 2).stride(), "dk",
          tuple(dk.shape))
    qd = torch.empty(4, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    kc = torch.empty(4, 4096, 8, 128, device="cuda", dtype=torch.bfloat16)
    lens = torch.empty(4, device="cuda", dtype=torch.int32)
    od, ld = torch.ops.flashc.decode(qd, kc, kc, lens, None, decode.id, 0)
    print("decode out", tuple(od.shape), "lse", tuple(ld.shape))
    pos = torch.empty(4, 1, device="cuda", dtype=torch.int32)
    od, ld = torch.ops.flashc.decode(qd, kc, kc, lens, None, decode.id, 0, ["pos"], [pos],
                                     ["softcap"], [30.0])
    print("inputs: decode out", tuple(od.shape), "lse", tuple(ld.shape))
    qp = torch.empty(2, 64, 1, 64, device="cuda", dtype=torch.bfloat16)
    kp = torch.empty(2, 128, 1, 64, device="cuda", dtype=torch.bfloat16)
    doc = torch.empty(2, 128, device="cuda", dtype=torch.int32)
    out = flashc.attention(qp, kp, kp, probe, inputs={"doc": doc, "softcap": 30.0, "win": 3})
    print("inputs: attention out", tuple(out.shape))
    lists = (["doc"], [doc], ["softcap", "win"], [30.0, 3.0])
    o, l, rng = torch.ops.flashc.fwd(qp, kp, kp, probe.id, 0.0, 1, *lists)
    dq, dk, dv = torch.ops.flashc.bwd(o, qp, kp, kp, o, l, rng, probe.id, 0.0, 1, *lists)
    print("inputs: fwd out", tuple(o.shape), "bwd dk", tuple(dk.shape))
    # block lists: a stand-in Blocks (no GPU to build one) by its id, through
    # fwd, its autograd (which holds it for bwd) and bwd's fake
    fb = object.__new__(runtime.Blocks)
    fb.handle, fb.id = ctypes.c_void_p(), 1 << 40
    runtime._blocks_by_id[fb.id] = fb
    bq = torch.empty(2, 64, 1, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    out = flashc.attention(bq, kp, kp, probe, inputs={"doc": doc, "softcap": 30.0, "win": 3},
                           blocks=fb)
    out.float().sum().backward()
    print("blocks: attention out", tuple(out.shape), "dq", tuple(bq.grad.shape))
    try:
        flashc.attention(qp, kp, kp, probe, blocks="lists")
    except TypeError as e:
        print("blocks: TypeError:", e)
    # varlen: 3 sequences, 301 queries, 1000 keys, GQA 4/2, d64; w f32 [num_seqs]
    vq = torch.empty(301, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    vk = torch.empty(1000, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    vv = torch.empty(1000, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    cq = torch.empty(4, device="cuda", dtype=torch.int32)
    ck = torch.empty(4, device="cuda", dtype=torch.int32)
    w = torch.empty(3, device="cuda", dtype=torch.float32)
    out, lse = flashc.attention(vq, vk, vv, vprobe, cu_seqlens_q=cq, cu_seqlens_k=ck,
                                max_seqlen_q=200, max_seqlen_k=700, inputs={"w": w},
                                return_lse=True)
    print("varlen: attention out", tuple(out.shape), "lse", tuple(lse.shape), lse.dtype)
    out.float().sum().backward()
    print("varlen: autograd dq", tuple(vq.grad.shape), "dk", tuple(vk.grad.shape), "dv",
          tuple(vv.grad.shape))
    o, l, rng = torch.ops.flashc.fwd(vq, vk, vv, vprobe.id, 0.0, 1, ["w"], [w], None, [], cq,
                                     ck)  # the maxima left 0: the launch computes them
    dq, dk, dv = torch.ops.flashc.bwd(o, vq, vk, vv, o, l, rng, vprobe.id, 0.0, 1, ["w"], [w],
                                      None, [], cq, ck)
    print("varlen: fwd out", tuple(o.shape), "lse", tuple(l.shape), "bwd dq", tuple(dq.shape),
          "dk", tuple(dk.shape))
    for label, kw in (("one cu_seqlens", dict(cu_seqlens_q=cq)),
                      ("bhsd", dict(cu_seqlens_q=cq, cu_seqlens_k=ck, layout="bhsd")),
                      ("max 0", dict(cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=0)),
                      ("max alone", dict(max_seqlen_q=200)),
                      ("4-D", dict(cu_seqlens_q=cq, cu_seqlens_k=ck, q4=True))):
        try:
            qq = vq[None] if kw.pop("q4", False) else vq
            flashc.attention(qq, vk, vv, vprobe, **kw)
            print(f"varlen {label}: accepted")
        except ValueError as e:
            print(f"varlen {label}: ValueError: {e}")
try:
    flashc.attention(torch.zeros(1, 64, 8, 64, dtype=torch.bfloat16),
                     torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16),
                     torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16), train)
except NotImplementedError as e:
    print("cpu:", str(e).splitlines()[0][:60])
for bad in (dict(layout="sbhd"), dict(dropout_p=1.0)):
    try:
        flashc.attention(q, k, k, train, **bad)
    except ValueError as e:
        print("ValueError:", e)
try:
    flashc.attention(q, k, k, probe, inputs={"doc": "x"})
except TypeError as e:
    print("TypeError:", e)
