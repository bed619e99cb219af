"""Stand-ins for torch tensors and torch's allocation functions, for the
package's tests without a GPU or torch (inputs.py, varlen.py, blocks.py): what
the launch builders read of a tensor (data_ptr, dim, shape, stride, dtype,
device) at fake device addresses, which the C checks never dereference; and
the C checks' verdict on the structs the package builds from them."""
import ctypes

import flashc
from flashc import _capi

CUDA0 = "cuda:0"
# what flashc.runtime._dtype_code maps the stand-ins' dtype names to
FAKE_DTYPES = {"float16": 0, "bfloat16": 1, "float32": 2, "int32": 3, "int64": 99, "uint8": 98}
reads = []  # the addresses of the stand-ins read back to the host (tolist)


class Fake:
    """A tensor of `shape` at device address `addr`, contiguous unless
    `strides` says otherwise; `values` is what tolist() reads back."""

    def __init__(self, addr, dtype, *shape, device=CUDA0, strides=None, values=None):
        self.addr, self.dtype, self.shape, self.device = addr, dtype, tuple(shape), device
        self.values = values
        if strides is None:
            strides, n = [], 1
            for d in reversed(shape):
                strides.insert(0, n)
                n *= d
        self._strides = tuple(strides)

    def data_ptr(self):
        return self.addr

    def dim(self):
        return len(self.shape)

    def stride(self, d=None):
        return self._strides if d is None else self._strides[d]

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def item(self):
        return 2.0

    def is_contiguous(self):
        return True

    def tolist(self):
        reads.append(self.addr)
        return list(self.values)

    def new_empty(self, shape):
        return Fake(self.addr + (1 << 35), self.dtype, *shape, device=self.device)


class FakeTorch:
    """What the package asks of torch for the tensors a launch allocates
    (outputs, LSE, workspace): stand-ins at fake addresses."""
    int32, float32, uint8 = "int32", "float32", "uint8"
    at = (1 << 40) + (13 << 36)  # where empty() puts them

    @staticmethod
    def empty(shape, dtype=None, device=None):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return Fake(FakeTorch.at, dtype, *shape, device=device)

    @staticmethod
    def empty_like(t):
        return Fake(t.addr + (1 << 35), t.dtype, *t.shape, device=t.device)


def verdict(check, kinfo, build):
    """The C check's verdict on the args struct build() makes, or the
    package's refusal while building it."""
    try:
        a = build()
    except (flashc.FlashcError, TypeError, ValueError) as e:
        return f"package: {type(e).__name__}: {e}"
    msg = ctypes.create_string_buffer(512)
    st = check(ctypes.byref(kinfo), ctypes.byref(a), msg, len(msg))
    return f"C: {_capi.STATUS[st]}" + (f": {msg.value.decode()}" if st else "")
