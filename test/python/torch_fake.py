"""test/python/torch_fake.test: the torch ops without a GPU. Importing
flashc.ops defines flashc::fwd / bwd / decode; their fake implementations give
the output shapes, dtypes and strides from a module's metadata (what
torch.compile traces with), gradients' fakes follow q, k, v's strides, and a
CPU tensor is refused by the dispatcher (the ops have CUDA kernels only).
Run-time inputs (argv[3]: inputs_probe.ptx) travel through fwd, bwd and
decode as their four lists; the fakes' shapes do not depend on them."""
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import flashc
import flashc.ops

train, decode, probe = (flashc.load(p) for p in sys.argv[1:4])
print("ops:", ", ".join(str(getattr(torch.ops.flashc, n).default._schema).split("(")[0]
                        for n in ("fwd", "bwd", "decode")))
print("fwd tags:", [str(t).split(".")[-1] for t in torch.ops.flashc.fwd.default.tags])
for n in ("fwd", "bwd", "decode"):
    print(f"{n} inputs:", [f"{a.name}={a.default_value}"
                           for a in getattr(torch.ops.flashc, n).default._schema.arguments[-4:]])
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
