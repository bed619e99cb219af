"""flashc for Python: compile attention specs (issue 19, first part).

    import flashc
    m = flashc.compile(source_or_path, kernel=None, target="sm_90a")
    m.ptx          # the module's PTX with its metadata (what `flashc -emit=ptx` writes)
    m.kernels      # one dict per kernel of the module (forward, NAME_dropout, _bwd_* ...)

compile() goes through libflashc_jit.so (the compiler and the runtime in one
library; LLVM/MLIR 22 where it compiles) and its kernel cache. A spec with
errors raises CompileError carrying the compiler's diagnostics
(`file:line:col: error: ...`, the source line and a caret). Launching on torch
tensors is not here yet (the test helper test/gpu/flashc_rt.py does it).
"""
import ctypes
import os

from . import _capi

__all__ = ["compile", "CompiledModule", "CompileError", "FlashcError"]
__version__ = "0.1.0"


class FlashcError(RuntimeError):
    """A C API call failed: status is its fa_status name."""

    def __init__(self, status, message):
        self.status = _capi.STATUS[status] if 0 <= status < len(_capi.STATUS) else str(status)
        self.message = message
        super().__init__(f"{self.status}: {message}" if message else self.status)


class CompileError(FlashcError):
    """The spec has errors; str() is the compiler's diagnostics."""

    def __init__(self, status, message):
        super().__init__(status, message)

    def __str__(self):
        return self.message


class CompiledModule:
    """One compiled module: its PTX and its kernels' metadata."""

    def __init__(self, ptx, kernels):
        self.ptx = ptx
        self.kernels = kernels

    @property
    def name(self):
        return self.kernels[0]["kernel"]

    def __repr__(self):
        return f"<flashc module {self.name}: {', '.join(k['kernel'] for k in self.kernels)}>"


_jit = None


def _lib():
    global _jit
    if _jit is None:
        _jit = _capi.declare(_capi.load_library("flashc_jit"))
    return _jit


def _source(spec):
    """(text, filename): spec is DSL text, or the path of a .fa file."""
    if "{" not in spec and os.path.exists(spec):
        with open(spec, "rb") as f:
            return f.read(), os.path.abspath(spec)
    return spec.encode(), "<spec>"


def compile(spec, kernel=None, target="sm_90a", disable_passes=None, cache_dir=None):
    """Compiles spec (DSL text or a .fa path) to a CompiledModule.
    kernel: the attention to compile (None: the source's only one);
    disable_passes: a list of optional passes to skip; cache_dir: None for the
    default kernel cache, "" for none. Raises CompileError for a spec with
    errors, FlashcError for other failures (an unknown target or pass, ...)."""
    lib = _lib()
    text, filename = _source(spec)
    o = _capi.JitOptions()
    lib.fa_jit_options_init(ctypes.byref(o))
    keep = []  # the bytes the options point at live as long as the call

    def c(s):
        b = s.encode()
        keep.append(b)
        return b
    o.kernel = c(kernel) if kernel else None
    o.target = c(target) if target else None
    o.disable_passes = c(",".join(disable_passes)) if disable_passes else None
    o.cache_dir = c(cache_dir) if cache_dir is not None else None
    o.filename = c(filename)
    ptx, n = ctypes.c_void_p(), ctypes.c_size_t()
    err = ctypes.create_string_buffer(16384)
    st = lib.fa_jit_compile(text, len(text), ctypes.byref(o), ctypes.byref(ptx), ctypes.byref(n),
                            err, len(err))
    if st != _capi.FA_OK:
        cls = CompileError if st == _capi.FA_ERR_COMPILE else FlashcError
        raise cls(st, err.value.decode(errors="replace"))
    try:
        body = ctypes.string_at(ptx, n.value)
    finally:
        lib.fa_jit_free(ptx)
    infos = (_capi.KernelInfo * _capi.MODULE_MAX_KERNELS)()
    count = ctypes.c_int()
    st = lib.fa_meta_parse_module(body, len(body), infos, ctypes.byref(count), err, len(err))
    if st != _capi.FA_OK:
        raise FlashcError(st, err.value.decode(errors="replace"))
    return CompiledModule(body.decode(), [_capi.info_dict(infos[i]) for i in range(count.value)])
