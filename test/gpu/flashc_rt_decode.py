"""ctypes binding of the flashc runtime's decode entry points (fa_decode).

    rt = flashc_rt.Runtime(lib)
    mod = DecodeModule(rt.context(0), "kernel.ptx")
    mod.info["decode"]["cache"], mod.info["decode"]["page_size"]
    mod.decode(q, k, v, o, cache_seqlens, block_table=None, lse=None,
               host_seqlens=None, host_block_table=None, nsplit=0)

Tensors are torch tensors: q [b, q_len, heads, d], k/v contiguous [b, capacity,
kv_heads, d] or paged [num_pages, page_size, kv_heads, d], o like q (v dims);
cache_seqlens int32 [b] and block_table int32 [b, max_pages] on the GPU; the
host copies (CPU int32 tensors) make the runtime validate lengths and table.
Launches go on torch's current stream.
"""
import ctypes

import flashc_rt
from flashc_rt import STATUS, FlashcError, Tensor, tensor_desc


class DecodeInfo(ctypes.Structure):
    _fields_ = [("cache", ctypes.c_int), ("page_size", ctypes.c_int), ("split", ctypes.c_int),
                ("q_len_max", ctypes.c_int), ("combine_kernel", ctypes.c_char * 128),
                ("combine_threads", ctypes.c_int), ("has_unified_max", ctypes.c_int),
                ("unified_max", ctypes.c_double), ("combine_pdl", ctypes.c_int),
                ("combine_fused", ctypes.c_int), ("wide_kernel", ctypes.c_char * 128),
                ("wide_tile_kv", ctypes.c_int), ("wide_threads", ctypes.c_int),
                ("wide_smem_bytes", ctypes.c_int)]


class KernelInfoDecode(flashc_rt.KernelInfo):
    _fields_ = [("decode", DecodeInfo)]

    def as_dict(self):
        d = {name: getattr(self, name) for name, _ in flashc_rt.KernelInfo._fields_}
        for key in ("kernel", "target", "passes"):
            d[key] = d[key].decode()
        d["dtype"] = flashc_rt.DTYPES[self.dtype]
        d["mask"] = flashc_rt.MASKS[self.mask]
        d["grid"] = ["q_tiles,heads,batch", "1,heads,batch", "splits,kv_heads,batch"][self.grid]
        dd = {name: getattr(self.decode, name) for name, _ in DecodeInfo._fields_}
        dd["combine_kernel"] = dd["combine_kernel"].decode()
        dd["wide_kernel"] = dd["wide_kernel"].decode()
        dd["cache"] = "paged" if dd["cache"] == 1 else "contiguous"
        d["decode"] = dd
        return d


class DecodeArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor),
                ("lse", ctypes.c_void_p), ("cache_seqlens", ctypes.c_void_p),
                ("block_table", ctypes.c_void_p), ("max_pages", ctypes.c_int64),
                ("bt_stride", ctypes.c_int64), ("host_cache_seqlens", ctypes.c_void_p),
                ("host_block_table", ctypes.c_void_p), ("max_seqlen", ctypes.c_int64),
                ("nsplit", ctypes.c_int), ("stream", ctypes.c_void_p)]


def _setup(lib):
    if getattr(lib, "_decode_ready", False):
        return
    P = ctypes.c_void_p
    lib.fa_decode.restype, lib.fa_decode.argtypes = ctypes.c_int, [P, ctypes.POINTER(DecodeArgs)]
    lib.fa_decode_last_nsplit.restype, lib.fa_decode_last_nsplit.argtypes = ctypes.c_int, [P]
    lib.fa_decode_last_kernel.restype, lib.fa_decode_last_kernel.argtypes = ctypes.c_char_p, [P]
    lib._decode_ready = True


class DecodeModule(flashc_rt.Module):
    def __init__(self, ctx, path):
        with open(path, "rb") as f:
            ptx = f.read()
        _setup(ctx.rt.lib)
        super().__init__(ctx, ptx)

    def _info(self):
        p = self.lib.fa_module_info(self.handle)
        return ctypes.cast(p, ctypes.POINTER(KernelInfoDecode)).contents.as_dict()

    @property
    def info(self):
        return self._info() if self.handle else {}

    @info.setter
    def info(self, _):  # the base class sets the forward view; the decode view is read live
        pass

    def decode_args(self, q, k, v, o, cache_seqlens, block_table=None, lse=None,
                    host_seqlens=None, host_block_table=None, nsplit=0, max_seqlen=0,
                    stream=None):
        import torch
        a = DecodeArgs()
        a.q, a.k, a.v, a.o = (tensor_desc(t) for t in (q, k, v, o))
        a.lse = lse.data_ptr() if lse is not None else None
        a.cache_seqlens = cache_seqlens.data_ptr() if cache_seqlens is not None else None
        if block_table is not None:
            a.block_table = block_table.data_ptr()
            a.max_pages, a.bt_stride = block_table.shape[1], block_table.stride(0)
        a.host_cache_seqlens = host_seqlens.data_ptr() if host_seqlens is not None else None
        a.host_block_table = host_block_table.data_ptr() if host_block_table is not None else None
        a.max_seqlen, a.nsplit = max_seqlen, nsplit
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        a.stream = stream or None
        return a

    def decode(self, *args, check=True, **kw):
        """Launches fa_decode; returns (status name, message). The host tensors
        must stay alive during the call only (fa_decode reads them at once)."""
        a = self.decode_args(*args, **kw)
        st = self.lib.fa_decode(self.handle, ctypes.byref(a))
        msg = self.lib.fa_module_errmsg(self.handle).decode()
        if check and st:
            raise FlashcError(st, msg)
        return (STATUS[st] if 0 <= st < len(STATUS) else str(st)), msg

    def last_nsplit(self):
        return self.lib.fa_decode_last_nsplit(self.handle)

    def last_kernel(self):
        """The split kernel the last decode launched (the kernel or its small-batch variant)."""
        return self.lib.fa_decode_last_kernel(self.handle).decode()
