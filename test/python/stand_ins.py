"""Stand-ins for torch tensors, for the package's tests without a GPU or torch
(inputs.py, varlen.py): what the launch builders read of a tensor (data_ptr,
dim, shape, stride, dtype, device) at fake device addresses, which the C
checks never dereference."""

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
