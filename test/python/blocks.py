"""test/python/blocks.test: block lists through the package without a GPU or
torch (docs/abi.md, "Block lists"). A module with classifier kernels (argv[1]:
test/runtime/Inputs/blocks_doc.meta, inp_doc_d128_bf16's kernels with three
classifiers) and its metadata dicts; the fa_blocks_args the package builds,
judged by the C checks (fa_blocks_check, so the ctypes BlocksArgs must be the
header's), fa_block_lists_shape / fa_blocks_params through the ctypes
BlockLists; the args' blocks field (fa_forward_check sees it NULL when none
is given, the package's refusals of what is no usable Blocks); and
Module.blocks / Blocks / Module.forward(blocks=) / Module.backward(blocks=)
through a stand-in C library (each fa_blocks_create judged by
fa_blocks_check of every classifier, the handle passed to the launches,
fa_blocks_destroy once). Tensors are stand-ins at fake device addresses."""
import ctypes
import sys

import flashc
from flashc import _capi, runtime

from stand_ins import CUDA0, FAKE_DTYPES, Fake, FakeTorch, verdict  # test/python/stand_ins.py

runtime._DTYPE_CODES = FAKE_DTYPES

with open(sys.argv[1], "rb") as f:
    m = runtime.module_of(cubin=b"\x7fELF stand-in", meta=f.read())
print(m.name, "has_blocks", m.has_blocks)
for k in m.kernels:
    print(" ", k["kernel"], k["mode"], k["grid"], k["blocks"], k["list_heads"],
          k["block_list"] or "-")
lib = runtime.runtime_library()
B, SQ, SK, H, KH, D = 2, 300, 1000, 16, 4, 128
base = 1 << 40
q = Fake(base, "bfloat16", B, SQ, H, D)
k = Fake(base + (1 << 36), "bfloat16", B, SK, KH, D)
v = Fake(base + (2 << 36), "bfloat16", B, SK, KH, D)
o = Fake(base + (3 << 36), "bfloat16", B, SQ, H, D)
lse = Fake(base + (4 << 36), "float32", B, H, SQ)
doc = Fake(base + (12 << 36), "int32", B, SK)
cls = m._infos[6]  # inp_doc_d128_bf16_blocks_rows128x128


def classifier(batch=B, sq=SQ, sk=SK, inputs=None):
    return verdict(lib.fa_blocks_check, cls, lambda: runtime.blocks_args(
        m._infos[0], batch, sq, sk, inputs if inputs is not None else {"doc": doc}, CUDA0, 0))


print("blocks args good:", classifier())
print("blocks args doc dims:", classifier(inputs={"doc": Fake(doc.addr, "int32", B, SQ)}))
print("blocks args no doc:", classifier(inputs={}))
print("blocks args doc on cpu:",
      classifier(inputs={"doc": Fake(doc.addr, "int32", B, SK, device="cpu")}))
print("blocks args require:", classifier(sq=SK + 1))
print("blocks args batch type:", classifier(batch=2.0))

# the shape and the classifier's parameters through the ctypes BlockLists
bl = _capi.BlockLists()
st = lib.fa_block_lists_shape(ctypes.byref(cls), B, SQ, SK, ctypes.byref(bl))
print("shape:", _capi.STATUS[st], "kernel", bl.kernel, "list", list(bl.list_dim),
      list(bl.list_stride), "count", list(bl.count_dim), list(bl.count_stride))
bl.list, bl.count = 0x1d000000000, 0x1d100000000
params = (ctypes.c_byte * (24 * 96))()  # fa_param[FA_BACKWARD_MAX_PARAMS]: 24 bytes each
n = ctypes.c_int()
a = runtime.blocks_args(m._infos[0], B, SQ, SK, {"doc": doc}, CUDA0, 0)
st = lib.fa_blocks_params(ctypes.byref(cls), ctypes.byref(a), ctypes.byref(bl), params,
                          ctypes.byref(n))


class Param(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("name", ctypes.c_char_p), ("value", ctypes.c_int64)]


plist = ctypes.cast(params, ctypes.POINTER(Param))
print("params:", _capi.STATUS[st], " ".join(f"{plist[i].name.decode()}={plist[i].value:#x}"
                                             for i in range(n.value)))


# the launch args' blocks field
def forward(blocks=None, kinfo=m._infos[0]):
    return verdict(lib.fa_forward_check, kinfo, lambda: runtime.forward_args(
        m._infos[0], q, k, v, o, lse, stream=0, inputs={"doc": doc}, blocks=blocks))


print("fwd no blocks:", forward())
print("fwd blocks of another type:", forward(blocks="lists"))
stand_in = object.__new__(runtime.Blocks)
stand_in.handle, stand_in.device = ctypes.c_void_p(), CUDA0
print("fwd closed blocks:", forward(blocks=stand_in))
stand_in.handle, stand_in.device = ctypes.c_void_p(0x5000), "cuda:1"
print("fwd blocks on another device:", forward(blocks=stand_in))
stand_in.device = CUDA0
fa = runtime.forward_args(m._infos[0], q, k, v, o, lse, stream=0, inputs={"doc": doc},
                          blocks=stand_in)
print("fwd blocks field:", hex(fa.blocks), "offset", _capi.ForwardArgs.blocks.offset)
stand_in.handle = ctypes.c_void_p()  # nothing to destroy


# Module.blocks -> LoadedModule.blocks -> fa_blocks_create, and the handle
# through Module.forward / backward to fa_forward / fa_backward: a stand-in
# C library, a stand-in torch.
class StandInLib:
    """The C library as LoadedModule and Blocks use it."""

    def __init__(self):
        self.msg = ctypes.create_string_buffer(512)

    def fa_blocks_create(self, handle, args, out):
        a = args._obj
        print(f"  fa_blocks_create: batch {a.batch}, seqlen_q {a.seqlen_q}, seqlen_k "
              f"{a.seqlen_k}, {a.num_inputs} input(s), stream {a.stream}")
        for info in m._infos:
            if info.mode != 3:
                continue
            st = lib.fa_blocks_check(ctypes.byref(info), args, self.msg, len(self.msg))
            if st:
                return st
        out._obj.value = 0x5000
        return 0

    def fa_blocks_count(self, handle):
        return 3

    def fa_blocks_destroy(self, handle):
        print(f"  fa_blocks_destroy {handle.value:#x}")

    def _launch(self, name, check, args):
        a = args._obj
        print(f"  {name}: blocks {a.blocks:#x}" if a.blocks else f"  {name}: blocks NULL")
        a.blocks = None  # a stand-in handle: the C check would read it
        return check(ctypes.byref(m._infos[0]), args, self.msg, len(self.msg))

    def fa_forward(self, handle, args):
        return self._launch("fa_forward", lib.fa_forward_check, args)

    def fa_backward(self, handle, args):
        return self._launch("fa_backward", lib.fa_backward_check, args)

    def fa_module_errmsg(self, handle):
        return self.msg.value

    def fa_module_info(self, handle):
        return ctypes.byref(m._infos[0])

    def fa_backward_workspace_size(self, kinfo, b, sq, sk, mode, out):
        return lib.fa_backward_workspace_size(kinfo, b, sq, sk, mode, out)


loaded = object.__new__(runtime.LoadedModule)
loaded._info0, loaded.lib, loaded.handle = m._infos[0], StandInLib(), ctypes.c_void_p()
loaded.kernels = m.kernels
m.on = lambda device: loaded
saved_torch, runtime._torch = runtime._torch, lambda: FakeTorch
runtime._raw_stream = lambda device_index: 0  # the default stream
print("Module.blocks:")
b = m.blocks(q, k, inputs={"doc": doc})
print(" ", b, "id registered", runtime._blocks_by_id.get(b.id) is b)
print("Module.forward(blocks=):")
out, l_ = m.forward(q, k, v, inputs={"doc": doc}, blocks=b)
print("  out", out.shape, "lse", l_.shape)
print("Module.backward(blocks=):")
g = m.backward(o, q, k, v, o, lse, inputs={"doc": doc}, blocks=b)
print("  dq", g[0].shape, "dk", g[1].shape)
print("Module.forward():")
m.forward(q, k, v, inputs={"doc": doc})
print("Module.blocks refused (doc's seqlen dim):")
try:
    m.blocks(q, k, inputs={"doc": Fake(doc.addr, "int32", B, SQ)})
except flashc.FlashcError as e:
    print(" ", e)
print("flashc.blocks:")
b2 = flashc.blocks(q, k, m, inputs={"doc": doc})
print(" ", b2)
for bad in (dict(layout="sbhd"),):
    try:
        flashc.blocks(q, k, m, **bad)
    except ValueError as e:
        print("  ValueError:", e)
print("close:")
b.close()
b.close()
print("  closed handle", b.handle.value, "len", len(b))
try:
    m.forward(q, k, v, inputs={"doc": doc}, blocks=b)
except flashc.FlashcError as e:
    print("  forward with it:", e)
b2.close()
runtime._torch, runtime._raw_stream = saved_torch, None
