"""ctypes binding of the flashc runtime (libflashc_runtime.so), for torch tensors.

    rt = Runtime("build-gpu/libflashc_runtime.so")
    ctx = rt.context(0)
    mod = ctx.load_ptx("kernel.ptx")      # or rt.load_ptx(path): a context on GPU 0
    mod.info["head_dim"]
    mod.forward(q, k, v, o, lse=None)      # raises FlashcError on a refused launch
    status, msg = mod.forward(q, k, v, o, check=False)
    mod.forward(q, k, v, o, lse, dropout=(0.1, seed, offset))   # docs/dropout.md
    mask = mod.dropout_mask(0.1, seed, offset, b, sq, sk)     # uint8 [b, heads, sq, sk]

Tensors are torch tensors on the GPU in [batch, seqlen, heads, head_dim] order
(any strides: the runtime validates them); lse is float32 [batch, heads,
seqlen_q] or None. Launches go on torch's current stream.
"""
import ctypes
import os

STATUS = ["FA_OK", "FA_ERR_INVALID_ARGUMENT", "FA_ERR_DTYPE", "FA_ERR_SHAPE", "FA_ERR_STRIDE",
          "FA_ERR_ALIGNMENT", "FA_ERR_NULL_POINTER", "FA_ERR_TOO_LARGE", "FA_ERR_NO_DEVICE",
          "FA_ERR_CUDA", "FA_ERR_LOAD", "FA_ERR_META", "FA_ERR_OUT_OF_MEMORY",
          "FA_ERR_UNSUPPORTED"]
DTYPES = ["f16", "bf16", "f32"]
MASKS = ["none", "causal", "window", "expr"]


class FlashcError(RuntimeError):
    def __init__(self, status, msg):
        self.status = STATUS[status] if 0 <= status < len(STATUS) else str(status)
        super().__init__(f"{self.status}: {msg}")


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("dim", ctypes.c_int64 * 4), ("stride", ctypes.c_int64 * 4)]


DROPOUT_FIELDS = [("dropout_p", ctypes.c_double), ("seed", ctypes.c_uint64),
                  ("offset", ctypes.c_uint64)]


class ForwardArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor),
                ("lse", ctypes.c_void_p), ("stream", ctypes.c_void_p)] + DROPOUT_FIELDS


class BackwardArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor),
                ("lse", ctypes.c_void_p), ("dout", Tensor), ("dq", Tensor), ("dk", Tensor),
                ("dv", Tensor), ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
                ("stream", ctypes.c_void_p), ("mode", ctypes.c_int)] + DROPOUT_FIELDS


class KernelInfo(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("kernel", ctypes.c_char * 128),
                ("mode", ctypes.c_int), ("dtype", ctypes.c_int),
                ("head_dim", ctypes.c_int), ("v_head_dim", ctypes.c_int),
                ("heads", ctypes.c_int), ("kv_heads", ctypes.c_int), ("mask", ctypes.c_int),
                ("scale", ctypes.c_double), ("tile_q", ctypes.c_int), ("tile_kv", ctypes.c_int),
                ("warps", ctypes.c_int), ("stages", ctypes.c_int), ("threads", ctypes.c_int),
                ("smem_bytes", ctypes.c_int), ("grid", ctypes.c_int),
                ("workspace_floats_per_row", ctypes.c_int), ("target", ctypes.c_char * 32),
                ("passes", ctypes.c_char * 512)]

    def as_dict(self):
        d = {name: getattr(self, name) for name, _ in self._fields_}
        for key in ("kernel", "target", "passes"):
            d[key] = d[key].decode()
        d["dtype"] = DTYPES[self.dtype]
        d["mask"] = MASKS[self.mask]
        d["grid"] = "1,heads,batch" if self.grid == 1 else "q_tiles,heads,batch"
        return d


def _dtype_code(t):
    import torch
    codes = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}
    return codes.get(t.dtype, 99)


def tensor_desc(t):
    """fa_tensor of a 4-D torch tensor (no copy; strides in elements)."""
    if t.dim() != 4:
        raise ValueError(f"expected a 4-D tensor, got {tuple(t.shape)}")
    d = Tensor()
    d.data = t.data_ptr() or None
    d.dtype = _dtype_code(t)
    for i in range(4):
        d.dim[i] = t.shape[i]
        d.stride[i] = t.stride(i)
    return d


def default_lib_path():
    """$FLASHC_RUNTIME_LIB, else the first build folder of the repo that has one."""
    if os.environ.get("FLASHC_RUNTIME_LIB"):
        return os.environ["FLASHC_RUNTIME_LIB"]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    for sub in ("build-gpu", "build-rt", "build/runtime", "build"):
        p = os.path.join(root, sub, "libflashc_runtime.so")
        if os.path.exists(p):
            return os.path.normpath(p)
    return "libflashc_runtime.so"  # the loader's search path


class Runtime:
    def __init__(self, path=None):
        path = path or default_lib_path()
        self._default_ctx = None
        lib = self.lib = ctypes.CDLL(path)
        P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        sig = {
            "fa_status_string": (ctypes.c_char_p, [I]),
            "fa_context_create": (I, [I, ctypes.POINTER(P), ctypes.c_char_p, S]),
            "fa_context_destroy": (None, [P]),
            "fa_context_errmsg": (ctypes.c_char_p, [P]),
            "fa_module_load_ptx": (I, [P, ctypes.c_char_p, S, ctypes.POINTER(P)]),
            "fa_module_destroy": (None, [P]),
            "fa_module_errmsg": (ctypes.c_char_p, [P]),
            "fa_module_info": (ctypes.POINTER(KernelInfo), [P]),
            "fa_forward": (I, [P, ctypes.POINTER(ForwardArgs)]),
            "fa_backward": (I, [P, ctypes.POINTER(BackwardArgs)]),
            "fa_forward_check": (I, [ctypes.POINTER(KernelInfo), ctypes.POINTER(ForwardArgs),
                                     ctypes.c_char_p, S]),
            "fa_meta_parse": (I, [ctypes.c_char_p, S, ctypes.POINTER(KernelInfo),
                                  ctypes.c_char_p, S]),
            "fa_dropout_mask": (I, [ctypes.POINTER(KernelInfo), ctypes.c_double, ctypes.c_uint64,
                                    ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64,
                                    ctypes.c_int64, P]),
        }
        for name, (res, args) in sig.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args

    def context(self, device=0):
        return Context(self, device)

    def load_ptx(self, path, device=0):
        """Loads a PTX file in a context on `device` that this Runtime keeps."""
        if self._default_ctx is None:
            self._default_ctx = Context(self, device)
        return self._default_ctx.load_ptx(path)

    def meta_parse(self, text):
        info, err = KernelInfo(), ctypes.create_string_buffer(512)
        raw = text.encode() if isinstance(text, str) else text
        st = self.lib.fa_meta_parse(raw, len(raw), ctypes.byref(info), err, 512)
        if st:
            raise FlashcError(st, err.value.decode())
        return info.as_dict()


class Context:
    def __init__(self, rt, device):
        self.rt, self.handle = rt, ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        st = rt.lib.fa_context_create(device, ctypes.byref(self.handle), err, 1024)
        if st:
            raise FlashcError(st, err.value.decode())

    def load_ptx(self, path):
        with open(path, "rb") as f:
            text = f.read()
        return Module(self, text)

    def close(self):
        if self.handle:
            self.rt.lib.fa_context_destroy(self.handle)
            self.handle = ctypes.c_void_p()

    __del__ = close


class Module:
    def __init__(self, ctx, ptx):
        self.ctx, self.lib, self.handle = ctx, ctx.rt.lib, ctypes.c_void_p()
        st = self.lib.fa_module_load_ptx(ctx.handle, ptx, len(ptx), ctypes.byref(self.handle))
        if st:
            raise FlashcError(st, self.lib.fa_context_errmsg(ctx.handle).decode())
        self.info = self.lib.fa_module_info(self.handle).contents.as_dict()

    def args(self, q, k, v, o, lse=None, stream=None, dropout=(0.0, 0, 0)):
        import torch
        a = ForwardArgs()
        a.dropout_p, a.seed, a.offset = dropout
        a.q, a.k, a.v, a.o = (tensor_desc(t) for t in (q, k, v, o))
        a.lse = lse.data_ptr() if lse is not None else None
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        a.stream = stream or None
        return a

    def forward(self, q, k, v, o, lse=None, stream=None, check=True, dropout=(0.0, 0, 0)):
        """fa_forward; dropout = (p, seed, offset) (docs/dropout.md)."""
        a = self.args(q, k, v, o, lse, stream, dropout)
        st = self.lib.fa_forward(self.handle, ctypes.byref(a))
        msg = self.lib.fa_module_errmsg(self.handle).decode()
        if check and st:
            raise FlashcError(st, msg)
        return (STATUS[st] if 0 <= st < len(STATUS) else str(st)), msg

    # fa_backward_mode
    BACKWARD_AUTO, BACKWARD_DETERMINISTIC, BACKWARD_ATOMIC = 0, 1, 2

    def backward(self, q, k, v, o, lse, dout, dq, dk, dv, mode=0, stream=None,
                 dropout=(0.0, 0, 0)):
        """fa_backward with the module's own workspace (mode: fa_backward_mode,
        0 = the runtime's choice; dropout: the forward's (p, seed, offset));
        raises FlashcError."""
        import torch
        a = BackwardArgs()
        a.dropout_p, a.seed, a.offset = dropout
        a.q, a.k, a.v, a.o = (tensor_desc(t) for t in (q, k, v, o))
        a.dout, a.dq, a.dk, a.dv = (tensor_desc(t) for t in (dout, dq, dk, dv))
        a.lse = lse.data_ptr()
        a.stream = stream or torch.cuda.current_stream().cuda_stream or None
        a.mode = int(mode)
        st = self.lib.fa_backward(self.handle, ctypes.byref(a))
        if st:
            raise FlashcError(st, self.lib.fa_module_errmsg(self.handle).decode())

    def dropout_mask(self, p, seed, offset, b, sq, sk):
        """fa_dropout_mask: the keep decisions as a uint8 CPU tensor [b, heads, sq, sk]."""
        import torch
        m = torch.empty((b, self.info["heads"], sq, sk), dtype=torch.uint8)
        st = self.lib.fa_dropout_mask(self.lib.fa_module_info(self.handle), p, seed, offset,
                                      b, sq, sk, m.data_ptr())
        if st:
            raise FlashcError(st, "fa_dropout_mask")
        return m

    def close(self):
        if self.handle:
            self.lib.fa_module_destroy(self.handle)
            self.handle = ctypes.c_void_p()

    __del__ = close
