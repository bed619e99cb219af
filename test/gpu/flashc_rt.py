"""The GPU tests' and benches' handle on the flashc runtime: a thin adapter over
the Python package (python/flashc/runtime.py holds the ctypes structs, the
declarations and the launches; this file keeps the tests' older call shapes).

    rt = Runtime("build-gpu/libflashc_runtime.so")
    ctx = rt.context(0)
    mod = ctx.load_ptx("kernel.ptx")      # or rt.load_ptx(path): a context on GPU 0
    mod.info["head_dim"]
    mod.forward(q, k, v, o, lse=None)      # raises FlashcError on a refused launch
    status, msg = mod.forward(q, k, v, o, check=False)
    mod.forward(q, k, v, o, lse, dropout=(0.1, seed, offset))   # docs/dropout.md
    mod.forward(q, k, v, o, lse, inputs={"doc": doc, "softcap": 30.0})  # run-time inputs
    mask = mod.dropout_mask(0.1, seed, offset, b, sq, sk)     # uint8 [b, heads, sq, sk]

Tensors are torch tensors on the GPU in [batch, seqlen, heads, head_dim] order
(any strides: the runtime validates them); lse is float32 [batch, heads,
seqlen_q] or None. Launches go on torch's current stream.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from flashc import _capi  # noqa: E402
from flashc import runtime as _rt  # noqa: E402
from flashc.runtime import FlashcError, tensor_desc  # noqa: E402,F401

STATUS, DTYPES, MASKS = _capi.STATUS, _capi.DTYPES, _capi.MASKS
Tensor = _capi.Tensor


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
    """The runtime library at `path`, declared by the package."""

    def __init__(self, path=None):
        self.lib = _capi.declare(ctypes.CDLL(path or default_lib_path()))
        self._default_ctx = None

    def context(self, device=0):
        return Context(self, device)

    def load_ptx(self, path, device=0):
        """Loads a PTX file in a context on `device` that this Runtime keeps."""
        if self._default_ctx is None:
            self._default_ctx = Context(self, device)
        return self._default_ctx.load_ptx(path)

    def meta_parse(self, text):
        raw = text.encode() if isinstance(text, str) else text
        return _capi.info_dict(_capi.parse_module_meta(self.lib, raw)[0])


class Context(_rt.Context):
    def __init__(self, rt, device):
        super().__init__(rt.lib, device)
        self.rt = rt

    def load_ptx(self, path):
        with open(path, "rb") as f:
            return Module(self, f.read())


class Module(_rt.LoadedModule):
    # fa_backward_mode
    BACKWARD_AUTO, BACKWARD_DETERMINISTIC, BACKWARD_ATOMIC = 0, 1, 2

    def __init__(self, ctx, ptx):
        super().__init__(ctx, ptx=ptx)

    def args(self, q, k, v, o, lse=None, stream=None, dropout=(0.0, 0, 0), inputs=None):
        return self.forward_args(q, k, v, o, lse, stream, *dropout, inputs=inputs)

    def forward(self, q, k, v, o, lse=None, stream=None, check=True, dropout=(0.0, 0, 0),
                inputs=None):
        """fa_forward; dropout = (p, seed, offset); inputs: the run-time inputs
        (name -> tensor or number); returns (status name, message)."""
        p, seed, offset = dropout
        return super().forward(q, k, v, o, lse, stream, p, seed, offset, check, inputs=inputs)

    def backward(self, q, k, v, o, lse, dout, dq, dk, dv, mode=0, stream=None,
                 dropout=(0.0, 0, 0), inputs=None):
        """fa_backward with the module's own workspace; raises FlashcError."""
        p, seed, offset = dropout
        super().backward(q, k, v, o, lse, dout, dq, dk, dv, mode=mode, stream=stream,
                         dropout_p=p, seed=seed, offset=offset, inputs=inputs)

    def dropout_mask(self, p, seed, offset, b, sq, sk):
        """fa_dropout_mask: the keep decisions as a uint8 CPU tensor [b, heads, sq, sk]."""
        return _rt.dropout_mask(self.lib, self.lib.fa_module_info(self.handle), self.info["heads"],
                                p, seed, offset, b, sq, sk)
