"""test/python/inputs.test: run-time inputs through the package without a GPU
or torch. A module's declared inputs (Module.inputs, each kernel's dict);
then the launch structs the package builds from a dict of inputs, handed to
the C checks (fa_forward_check, fa_backward_check): the ctypes layouts of
fa_input and the args' last fields must be the C header's for the C checks
to see the bindings. Tensors are stand-ins with torch's interface (data_ptr,
dim, shape, stride, dtype, device) at fake device addresses; the checks never
dereference them. Then a decode module's (fa_decode_check; Module.decode's
inputs= through LoadedModule.decode to the C call, with stand-ins for torch
and the loaded module). argv[1]: test/python/Inputs/inputs_probe.ptx,
argv[2]: test/python/Inputs/decode_inputs.ptx."""
import ctypes
import sys

import flashc
from flashc import _capi, runtime

from stand_ins import CUDA0, FAKE_DTYPES, Fake, verdict  # test/python/stand_ins.py

runtime._DTYPE_CODES = FAKE_DTYPES  # what _dtype_code maps torch's dtypes to


m = flashc.load(sys.argv[1])
print(m)
print("inputs", m.inputs)
for k in m.kernels:
    print(k["kernel"], [name for name, _, _ in k["inputs"]], k["requires"])

lib = runtime.runtime_library()
info = m._infos[0]
B, SQ, SK = 2, 64, 128
base = 1 << 40
q = Fake(base, "bfloat16", B, SQ, 1, 64)
k = Fake(base + (1 << 36), "bfloat16", B, SK, 1, 64)
v = Fake(base + (2 << 36), "bfloat16", B, SK, 1, 64)
o = Fake(base + (3 << 36), "bfloat16", B, SQ, 1, 64)
lse = Fake(base + (4 << 36), "float32", B, 1, SQ)
doc = Fake(base + (6 << 36), "int32", B, SK)
GOOD = {"doc": doc, "softcap": 30.0, "win": 64}


def forward(inputs, sq=SQ):
    """fa_forward_check's verdict on a launch of seqlen_q sq with `inputs`,
    or the package's refusal."""
    qs = Fake(q.addr, "bfloat16", B, sq, 1, 64)
    os_ = Fake(o.addr, "bfloat16", B, sq, 1, 64)
    return verdict(lib.fa_forward_check, info,
                   lambda: runtime.forward_args(info, qs, k, v, os_, lse, stream=0,
                                                inputs=inputs))


print("fwd good:", forward(GOOD))
print("fwd any order, a 0-d tensor for a scalar:",
      forward({"win": 64, "softcap": Fake(0, "float32"), "doc": doc}))
print("fwd strided doc:", forward({**GOOD, "doc": Fake(doc.addr, "int32", B, SK,
                                                       strides=(0, 3))}))
print("fwd none:", forward(None))
print("fwd missing:", forward({"doc": doc, "softcap": 1.0}))
print("fwd unknown:", forward({**GOOD, "nope": 1.0}))
print("fwd dims:", forward({**GOOD, "doc": Fake(doc.addr, "int32", B, SQ)}))
print("fwd overlap:", forward({**GOOD, "doc": Fake(o.addr, "int32", B, SK)}))
print("fwd scalar:", forward({**GOOD, "softcap": float("inf")}))
print("fwd i32:", forward({**GOOD, "win": 2.5}))
print("fwd require:", forward(GOOD, sq=SK + 1))
# what the C struct cannot carry, the package checks
print("fwd device:", forward({**GOOD, "doc": Fake(doc.addr, "int32", B, SK, device="cpu")}))
print("fwd rank:", forward({**GOOD, "doc": Fake(doc.addr, "int32", B, SK, 1)}))
print("fwd dtype:", forward({**GOOD, "doc": Fake(doc.addr, "int64", B, SK)}))
print("fwd tensor for a scalar:", forward({**GOOD, "softcap": doc}))
print("fwd number for a tensor:", forward({**GOOD, "doc": 3}))
print("fwd not a dict:", forward([doc]))
print("fwd not a number:", forward({**GOOD, "win": "64"}))

# the backward's struct: the same bindings, the outputs dq, dk, dv
dout = Fake(base + (5 << 36), "bfloat16", B, SQ, 1, 64)
dq = Fake(base + (7 << 36), "bfloat16", B, SQ, 1, 64)
dk = Fake(base + (8 << 36), "bfloat16", B, SK, 1, 64)
dv = Fake(base + (9 << 36), "bfloat16", B, SK, 1, 64)


def backward(inputs):
    return verdict(lib.fa_backward_check, info,
                   lambda: runtime.backward_args(info, q, k, v, o, lse, dout, dq, dk, dv,
                                                 stream=0, inputs=inputs))


print("bwd good:", backward(GOOD))
print("bwd overlap:", backward({**GOOD, "doc": Fake(dk.addr, "int32", B, SK)}))
print("bwd missing:", backward({"doc": doc, "win": 1}))

# ---- decode: inputs sized by batch and seqlen_q = q_len ----
dm = flashc.load(sys.argv[2])
print(dm)
print("decode inputs", dm.inputs)
dinfo = dm._infos[0]
QL, PAGES = 3, 9
dq_ = Fake(base, "bfloat16", B, QL, 4, 64)
dk_ = Fake(base + (1 << 36), "bfloat16", PAGES, 64, 1, 64)
dv_ = Fake(base + (2 << 36), "bfloat16", PAGES, 64, 1, 64)
do_ = Fake(base + (3 << 36), "bfloat16", B, QL, 4, 64)
dlse = Fake(base + (4 << 36), "float32", B, 4, QL)
seqlens = Fake(base + (5 << 36), "int32", B)
table = Fake(base + (6 << 36), "int32", B, 4)
pos = Fake(base + (7 << 36), "int32", B, QL)
slopes = Fake(base + (8 << 36), "float32", 4)
DGOOD = {"pos": pos, "slopes": slopes, "softcap": 30.0}


def decode_check(inputs, kinfo=dinfo):
    return verdict(lib.fa_decode_check, kinfo,
                   lambda: runtime.decode_args(dinfo, dq_, dk_, dv_, do_, seqlens, table, dlse,
                                               stream=0, inputs=inputs))


print("decode good:", decode_check(DGOOD))
print("decode none:", decode_check(None))
print("decode q_len:", decode_check({**DGOOD, "pos": Fake(pos.addr, "int32", B, QL + 1)}))
print("decode const:", decode_check({**DGOOD, "slopes": Fake(slopes.addr, "float32", 8)}))
print("decode overlap:", decode_check({**DGOOD, "pos": Fake(do_.addr, "int32", B, QL)}))
print("decode scalar:", decode_check({**DGOOD, "softcap": float("nan")}))
print("decode number for a tensor:", decode_check({**DGOOD, "pos": 1}))
plain = _capi.KernelInfo.from_buffer_copy(dinfo)
plain.ninputs = 0
print("decode no inputs kernel:", decode_check(DGOOD, plain))


# Module.decode(inputs=...) -> LoadedModule.decode -> fa_decode: a stand-in
# loaded module whose fa_decode is fa_decode_check (no GPU), and a stand-in
# torch (the int32 dtype LoadedModule.decode compares with).
class CheckOnly:
    """The C library as LoadedModule uses it, fa_decode judged by fa_decode_check."""

    def __init__(self):
        self.msg = ctypes.create_string_buffer(512)

    def fa_decode(self, handle, args):
        return lib.fa_decode_check(ctypes.byref(dinfo), args, self.msg, len(self.msg))

    def fa_module_errmsg(self, handle):
        return self.msg.value


class FakeTorch:
    int32 = "int32"


loaded = object.__new__(runtime.LoadedModule)
loaded._info0, loaded.lib, loaded.handle = dinfo, CheckOnly(), ctypes.c_void_p()
dm.on = lambda device: loaded
saved_torch, runtime._torch = runtime._torch, lambda: FakeTorch
runtime._raw_stream = lambda device_index: 0  # the default stream
for label, inputs in (("good", DGOOD), ("missing", {"pos": pos, "softcap": 1.0})):
    try:
        out = dm.decode(dq_, dk_, dv_, seqlens, table, inputs=inputs)
        print(f"Module.decode {label}: out {out.shape}")
    except flashc.FlashcError as e:
        print(f"Module.decode {label}: {e}")
runtime._torch, runtime._raw_stream = saved_torch, None
loaded.handle = None  # nothing to destroy
