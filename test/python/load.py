"""test/python/load.test: the runtime-only side of the package (no LLVM/MLIR,
no GPU, no torch): a module written by the CLI loads from its PTX or from a
cubin with its metadata beside it, saves and loads back, and a launch on a
machine without a GPU fails with the runtime's message."""
import os
import sys

import flashc
from flashc import _capi, runtime

ptx, meta, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
m = flashc.load(ptx)
print(m, "has_backward", m.has_backward, "has_dropout", m.has_dropout)
print("library", os.path.basename(runtime.runtime_library()._name))
print("jit loaded", _capi.loaded_jit() is not None)
k = m.kernel("t_bwd_kv")
print(k["kernel"], k["role"], k["heads"], k["kv_heads"], k["head_dim"], k["dtype"])
m.save(os.path.join(tmp, "again.ptx"))
print("round trip", flashc.load(os.path.join(tmp, "again.ptx")).kernels == m.kernels)
# a cubin is opaque to the package: its metadata file says what it holds
with open(os.path.join(tmp, "t.cubin"), "wb") as f:
    f.write(b"\x7fELF not really a cubin")
with open(meta, "rb") as src, open(os.path.join(tmp, "t.cubin.meta"), "wb") as dst:
    dst.write(src.read())
c = flashc.load(os.path.join(tmp, "t.cubin"))
print("cubin", c, c.cubin is not None)
print("bundle", sorted(flashc.load_bundle(tmp)))
try:
    flashc.load(os.path.join(tmp, "none.cubin"))
except FileNotFoundError as e:
    print("FileNotFoundError", type(e).__name__)
os.remove(os.path.join(tmp, "t.cubin.meta"))
try:
    flashc.load(os.path.join(tmp, "t.cubin"))
except FileNotFoundError as e:
    print(e)
try:
    m.kernel("nope")
except KeyError as e:
    print("KeyError", e)
bundle = flashc.load_bundle(sys.argv[4])
print("cli bundle", list(bundle), [len(m.kernels) for m in bundle.values()])
os.environ["FLASHC_LIBCUDA"] = "/nonexistent/libcuda.so.1"  # as on a machine without a driver
try:
    m.on(0)
except flashc.FlashcError as e:
    print("no GPU:", e.status)
