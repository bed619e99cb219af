"""flashc for Python: compile attention specs, load and launch their kernels on
torch tensors, and train through them (docs/python.md).

    import flashc
    m = flashc.compile(source_or_path, kernel=None, target="sm_90a")   # needs libflashc_jit
    m = flashc.load("attn.ptx")          # a compiled module; needs libflashc_runtime only
    out = flashc.attention(q, k, v, m)   # differentiable, torch.compile-able (torch.library ops)
    out, lse = m.forward(q, k, v); dq, dk, dv = m.backward(dout, q, k, v, out, lse)
    out = m.decode(q, k_cache, v_cache, cache_seqlens, block_table)
    out = flashc.attention(q, k, v, m, cu_seqlens_q=cu, cu_seqlens_k=cu)  # varlen = true: packed
    b = flashc.blocks(q, k, m, inputs={"doc": doc})  # block lists built once (run-time masks)
    out = flashc.attention(q, k, v, m, inputs={"doc": doc}, blocks=b)

compile() goes through libflashc_jit.so (the compiler and the runtime in one
library; LLVM/MLIR 22 where it compiles) and its kernel cache. A spec with
errors raises CompileError carrying the compiler's diagnostics
(`file:line:col: error: ...`, the source line and a caret). Launches go
through the C runtime (runtime.py); the torch ops are in ops.py. torch is
imported only when a launch needs it.
"""
import ctypes
import os

from . import _capi
from .runtime import Blocks, FlashcError, Module, load, load_bundle, module_of

__all__ = ["compile", "load", "load_bundle", "attention", "blocks", "Module", "CompiledModule",
           "Blocks", "CompileError", "FlashcError"]
__version__ = "0.1.0"


class CompileError(FlashcError):
    """The spec has errors; str() is the compiler's diagnostics."""

    def __str__(self):
        return self.message


CompiledModule = Module  # compile() returns a Module; the old name stays valid


def attention(q, k, v, module, **kw):
    """Attention through `module`'s kernels as a differentiable torch op
    (flashc.ops.attention: layout, dropout_p, backward_mode, return_lse,
    inputs, and cu_seqlens_q / cu_seqlens_k / max_seqlen_q / max_seqlen_k
    for a varlen module's packed sequences, blocks: lists built once by
    flashc.blocks)."""
    from . import ops
    return ops.attention(q, k, v, module, **kw)


def blocks(q, k, module, *, layout="bshd", inputs=None):
    """module's block lists (docs/abi.md, "Block lists") for attention launches
    on q and k (their sizes and device, in `layout` as attention takes them;
    no data is read) with run-time inputs `inputs`, built once: a Blocks to
    pass as attention(blocks=) while the inputs keep their values
    (Module.blocks)."""
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"flashc: layout must be 'bshd' or 'bhsd', got {layout!r}")
    if layout == "bhsd":
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    return module.blocks(q, k, inputs=inputs)


def _lib():
    return _capi.load_declared("flashc_jit")


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
    return module_of(ptx=body, source=filename)
