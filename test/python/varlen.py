"""test/python/varlen.test: variable-length batches through the package without
a GPU or torch. A varlen module's metadata (Module.varlen, each kernel's
layout); VarlenBatch (the longest lengths computed from a host copy of the
prefix sums, which then goes to the runtime; host copies given; none when
both maxima are given); the launch structs the package builds from packed
3-D tensors and cu_seqlens, judged by the C checks (fa_forward_check,
fa_backward_check: the ctypes fa_varlen and the args' last field must be the
header's for the C checks to see them); what the package refuses itself
(the prefix sums' dtype, rank, device, lengths; the tensors' rank); and
Module.forward / Module.backward with cu_seqlens reaching the C calls
through a stand-in loaded module and a stand-in torch (the shapes they
allocate, the workspace size they ask for, the host copies they pass).
Tensors are stand-ins with torch's interface at fake device addresses; the
checks never dereference them. argv[1]: test/python/Inputs/varlen_probe.ptx
(GQA 4/2, d64, an input w f32 [batch])."""
import ctypes
import sys

import flashc
from flashc import _capi, runtime

from stand_ins import CUDA0, FAKE_DTYPES, Fake, FakeTorch, reads, verdict  # test/python/stand_ins.py

runtime._DTYPE_CODES = FAKE_DTYPES  # what _dtype_code maps torch's dtypes to


m = flashc.load(sys.argv[1])
print(m, "varlen", m.varlen)
print("layouts", sorted({k["layout"] for k in m.kernels}))
lib = runtime.runtime_library()
info = m._infos[0]
H, KH, D = 4, 2, 64
CQ, CK = [0, 100, 300, 301], [0, 200, 300, 1000]
TQ, TK, N = CQ[-1], CK[-1], len(CQ) - 1
base = 1 << 40
q = Fake(base, "bfloat16", TQ, H, D)
k = Fake(base + (1 << 36), "bfloat16", TK, KH, D)
v = Fake(base + (2 << 36), "bfloat16", TK, KH, D)
o = Fake(base + (3 << 36), "bfloat16", TQ, H, D)
lse = Fake(base + (4 << 36), "float32", H, TQ)
cu_q = Fake(base + (10 << 36), "int32", N + 1, values=CQ)
cu_k = Fake(base + (11 << 36), "int32", N + 1, values=CK)
w = Fake(base + (12 << 36), "float32", N)


def batch(**kw):
    """A VarlenBatch, or the package's refusal."""
    args = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, device=CUDA0)
    args.update(kw)
    try:
        return runtime.VarlenBatch(**args)
    except (flashc.FlashcError, TypeError) as e:
        return f"package: {type(e).__name__}: {e}"


del reads[:]
print("computed:", batch(), "device reads", len(reads))
del reads[:]
print("given:", batch(max_seqlen_q=256, max_seqlen_k=700), "device reads", len(reads))
print("host copies:", batch(host_cu_seqlens_q=CQ, host_cu_seqlens_k=tuple(CK)), "device reads",
      len(reads))
print("host copy, max given:", batch(max_seqlen_q=512, host_cu_seqlens_q=CQ))
print("int64:", batch(cu_seqlens_q=Fake(cu_q.addr, "int64", N + 1, values=CQ)))
print("2-D:", batch(cu_seqlens_k=Fake(cu_k.addr, "int32", 2, 2, values=CK)))
print("device:", batch(cu_seqlens_q=Fake(cu_q.addr, "int32", N + 1, device="cpu", values=CQ)))
print("lengths:", batch(cu_seqlens_k=Fake(cu_k.addr, "int32", N, values=CK[:-1])))
print("max type:", batch(max_seqlen_q=2.5))
print("host length:", batch(host_cu_seqlens_q=CQ[:-1]))


def as4d(t):
    """t as a [1, total, heads, d] tensor (a padded launch's rank)."""
    return Fake(t.addr, t.dtype, 1, *t.shape)


def forward(vb, kinfo=info, ts=(q, k, v, o), inputs=None):
    return verdict(lib.fa_forward_check, kinfo,
                   lambda: runtime.forward_args(info, *ts, lse, stream=0,
                                                inputs=inputs or {"w": w}, varlen=vb))


good = runtime.VarlenBatch(cu_q, cu_k, device=CUDA0)
print("fwd good:", forward(good))
print("fwd max given (no host copy: fa_forward reads the device arrays):",
      forward(runtime.VarlenBatch(cu_q, cu_k, 256, 700, CUDA0)))
print("fwd last:", forward(runtime.VarlenBatch(cu_q, cu_k, device=CUDA0,
                                               host_cu_seqlens_q=[0, 100, 300, 300])))
print("fwd decreasing:", forward(runtime.VarlenBatch(cu_q, cu_k, device=CUDA0,
                                                     host_cu_seqlens_k=[0, 200, 100, 1000])))
print("fwd too long:", forward(runtime.VarlenBatch(cu_q, cu_k, 150, None, CUDA0,
                                                   host_cu_seqlens_q=CQ)))
print("fwd input batch:", forward(good, inputs={"w": Fake(w.addr, "float32", N + 1)}))
print("fwd no varlen:", forward(None, ts=[as4d(t) for t in (q, k, v, o)],
                               inputs={"w": Fake(w.addr, "float32", 1)}))
print("fwd 4-D q:", forward(good, ts=(as4d(q), k, v, o)))
padded = _capi.KernelInfo.from_buffer_copy(info)
padded.varlen = 0
print("fwd padded kernel:", forward(good, kinfo=padded))

# the backward's struct: the same batch, every tensor packed, lse [heads, total_q]
dout = Fake(base + (5 << 36), "bfloat16", TQ, H, D)
dq = Fake(base + (7 << 36), "bfloat16", TQ, H, D)
dk = Fake(base + (8 << 36), "bfloat16", TK, KH, D)
dv = Fake(base + (9 << 36), "bfloat16", TK, KH, D)


def backward(vb, ddk=dk):
    return verdict(lib.fa_backward_check, info,
                   lambda: runtime.backward_args(info, q, k, v, o, lse, dout, dq, ddk, dv,
                                                 stream=0, inputs={"w": w}, varlen=vb))


print("bwd good:", backward(good))
print("bwd dk:", backward(good, Fake(dk.addr, "bfloat16", TK - 1, KH, D)))
print("bwd last:", backward(runtime.VarlenBatch(cu_q, cu_k, device=CUDA0,
                                                host_cu_seqlens_k=[0, 200, 300, 999])))


# Module.forward / backward -> LoadedModule -> fa_forward / fa_backward: a
# stand-in loaded module whose launches are the C checks (no GPU), a
# stand-in torch for the outputs and the workspace they allocate.
class CheckOnly:
    """The C library as LoadedModule uses it, each launch judged by its check."""

    def __init__(self):
        self.msg = ctypes.create_string_buffer(512)
        self.last = None

    def _check(self, fn, args):
        self.last = args._obj
        return fn(ctypes.byref(info), args, self.msg, len(self.msg))

    def fa_forward(self, handle, args):
        return self._check(lib.fa_forward_check, args)

    def fa_backward(self, handle, args):
        return self._check(lib.fa_backward_check, args)

    def fa_module_errmsg(self, handle):
        return self.msg.value

    def fa_module_info(self, handle):
        return ctypes.byref(info)

    def fa_backward_workspace_size(self, kinfo, b, sq, sk, mode, out):
        print(f"  workspace size asked for batch {b}, seqlen_q {sq}, seqlen_k {sk}, mode {mode}")
        return lib.fa_backward_workspace_size(kinfo, b, sq, sk, mode, out)


def host_copies(a):
    vl = a.varlen.contents
    return "".join(c if p else "-" for c, p in (("q", vl.host_cu_seqlens_q),
                                                 ("k", vl.host_cu_seqlens_k)))


loaded = object.__new__(runtime.LoadedModule)
clib = CheckOnly()
loaded._info0, loaded.lib, loaded.handle = info, clib, ctypes.c_void_p()
m.on = lambda device: loaded
saved_torch, runtime._torch = runtime._torch, lambda: FakeTorch
runtime._raw_stream = lambda device_index: 0  # the default stream
for label, kw in (("max computed", {}), ("max given", dict(max_seqlen_q=200, max_seqlen_k=700)),
                  ("bad host copy", dict(host_cu_seqlens_k=[0, 200, 300, 999]))):
    try:
        out, l_ = m.forward(q, k, v, inputs={"w": w}, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **kw)
        print(f"Module.forward {label}: out {out.shape} lse {l_.shape}, host copies "
              f"{host_copies(clib.last)}")
    except flashc.FlashcError as e:
        print(f"Module.forward {label}: {e}")
for label, kw in (("max computed", {}), ("mode atomic", dict(mode="atomic"))):
    try:
        g = m.backward(dout, q, k, v, o, lse, inputs={"w": w}, cu_seqlens_q=cu_q,
                       cu_seqlens_k=cu_k, **kw)
        print(f"Module.backward {label}: dq {g[0].shape} dk {g[1].shape} dv {g[2].shape}")
    except flashc.FlashcError as e:
        print(f"Module.backward {label}: {e}")
for label, kw in (("one cu_seqlens", dict(cu_seqlens_q=cu_q)),
                  ("max without cu_seqlens", dict(max_seqlen_q=5))):
    try:
        m.forward(q, k, v, **kw)
    except ValueError as e:
        print(f"Module.forward {label}: ValueError: {e}")
try:
    m.forward(Fake(q.addr, "bfloat16", 1, TQ, H, D), k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
except ValueError as e:
    print(f"Module.forward 4-D q: ValueError: {e}")
runtime._torch, runtime._raw_stream = saved_torch, None
loaded.handle = None  # nothing to destroy
