"""Loading and launching flashc kernels on torch tensors (libflashc_runtime.so).

    mod = flashc.load("attn.ptx")                # or flashc.compile(spec)
    out, lse = mod.forward(q, k, v)              # q [b, s, h, d] CUDA tensors
    dq, dk, dv = mod.backward(dout, q, k, v, out, lse)
    out = mod.decode(q, k_cache, v_cache, cache_seqlens, block_table=None)
    out, lse = mod.forward(q, k, v, inputs={"doc": doc_ids, "softcap": 30.0})  # run-time inputs
    out, lse = mod.forward(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)  # varlen: q [total_q, h, d]
    b = mod.blocks(q, k, inputs={"doc": doc_ids})  # block lists built once (docs/abi.md)
    out, lse = mod.forward(q, k, v, inputs={"doc": doc_ids}, blocks=b)

Module holds the image (PTX with its metadata, or a cubin with the metadata
text beside it) and is loaded on a GPU the first time a launch needs it there
(one fa_module per device, in the device's primary context: the one PyTorch
uses). Launches are zero-copy (tensors go to the C runtime with their strides;
what it refuses raises FlashcError with its message: the C checks are the only
rules), on torch's current stream, with the workspace from torch's caching
allocator. The C structs and functions are declared in _capi.py.
"""
import ctypes
import hashlib
import itertools
import os
import threading
import weakref

from . import _capi

__all__ = ["FlashcError", "Module", "load", "load_bundle", "tensor_desc", "input_array",
           "LoadedModule", "VarlenBatch", "Blocks"]

BACKWARD_MODES = {"auto": 0, "deterministic": 1, "atomic": 2}


class FlashcError(RuntimeError):
    """A C API call failed: status is its fa_status name, message the C message."""

    def __init__(self, status, message):
        self.status_code = status
        self.status = _capi.STATUS[status] if 0 <= status < len(_capi.STATUS) else str(status)
        self.message = message
        super().__init__(f"{self.status}: {message}" if message else self.status)


_lock = threading.Lock()
_lib = None


def runtime_library():
    """The C library the launches go through: libflashc_jit.so when compile()
    has loaded it (it holds the runtime too: one copy per process), else
    libflashc_runtime.so, else libflashc_jit.so."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = _capi.loaded_jit() or _capi.load_first(("flashc_runtime", "flashc_jit"))
        return _lib


def _torch():
    try:
        import torch
    except ImportError as e:  # the compiler part works without torch; launches need it
        raise ImportError("flashc: launching kernels needs PyTorch (import torch failed: "
                          f"{e})") from e
    return torch


_DTYPE_CODES = None


def _dtype_code(t):
    global _DTYPE_CODES
    if _DTYPE_CODES is None:
        torch = _torch()
        _DTYPE_CODES = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2, torch.int32: 3}
    return _DTYPE_CODES.get(t.dtype, 99)  # 99: the C check names the dtype as unknown


_I64x4 = ctypes.c_int64 * 4


def tensor_desc(t, packed=False):
    """The fa_tensor of a 4-D torch tensor: its address, dtype, sizes and
    strides (in elements), no copy. packed: a varlen launch's 3-D [total,
    heads, head_dim] tensor, as the [1, total, heads, head_dim] fa_tensor the
    runtime takes (its batch stride 0: never used)."""
    rank = 3 if packed else 4
    if t.dim() != rank:
        want = ("3-D [total, heads, head_dim] (varlen: the sequences packed)" if packed
                else "4-D [batch, seqlen, heads, head_dim]")
        raise ValueError(f"flashc: expected a {want} tensor, got shape {tuple(t.shape)}")
    shape, stride = tuple(t.shape), tuple(t.stride())
    if packed:
        shape, stride = (1,) + shape, (0,) + stride
    return _capi.Tensor(t.data_ptr() or None, _dtype_code(t), _I64x4(*shape), _I64x4(*stride))


def _error(status, message):
    return FlashcError(_capi.STATUS.index(status), message)


def _input_binding(b, x, value, device):
    """Fills the Input b for the declared input x (an InputInfo; None for a
    name the kernel does not declare: the C check refuses it) from value: a
    torch tensor (its address, dtype, sizes and strides in elements) or a
    number. What the C struct cannot carry is checked here: the tensor's
    device and rank (fa_input has no rank: it reads the declared one), a
    tensor given for a scalar and the reverse."""
    name = b.name.decode()
    is_tensor = hasattr(value, "data_ptr")
    if is_tensor and value.dim() == 0 and (x is None or x.rank == 0):
        value, is_tensor = value.item(), False  # a 0-d tensor for a scalar: its value
    if x is not None and is_tensor != (x.rank > 0):
        _, dtype, dims = _capi.input_tuple(x)
        decl = f"{dtype} [{', '.join(str(d) for d in dims)}]" if dims else dtype
        given = "a tensor" if is_tensor else f"{type(value).__name__} {value!r}"
        raise _error("FA_ERR_INVALID_ARGUMENT", f"input '{name}' is a "
                     f"{'tensor' if x.rank else 'scalar'} ({decl}) but {given} was given")
    if not is_tensor:
        if not isinstance(value, (int, float)):
            raise TypeError(f"flashc: input '{name}' must be a torch tensor or a number, got "
                            f"{type(value).__name__}")
        b.value = float(value)
        return
    if value.device != device:
        raise _error("FA_ERR_INVALID_ARGUMENT", f"input '{name}' is on {value.device}, the "
                     f"launch's tensors on {device}: run-time inputs must be on the same device")
    if value.dim() > 4 or (x is not None and value.dim() != x.rank):
        want = f"the kernel declares {x.rank}" if x is not None else "at most 4 are possible"
        raise _error("FA_ERR_SHAPE", f"input '{name}' has {value.dim()} dims, {want}")
    if x is not None and _dtype_code(value) != x.dtype:  # the C message names no torch dtype
        raise _error("FA_ERR_DTYPE", f"input '{name}': dtype is {value.dtype} but the kernel "
                     f"declares {_capi.DTYPES[x.dtype]}")
    pad = (0,) * (4 - value.dim())
    b.tensor = _capi.Tensor(value.data_ptr() or None, _dtype_code(value),
                            _I64x4(*(tuple(value.shape) + pad)),
                            _I64x4(*(tuple(value.stride()) + pad)))


def input_array(info, inputs, device):
    """The fa_input array of `inputs` (a dict name -> torch tensor or number)
    for a launch of kernel `info` (a KernelInfo) on `device`: (array, count,
    keep), where keep holds what the array points at (the names' bytes) and
    must outlive the C call. (None, 0, None) for no inputs."""
    if not inputs:
        return None, 0, None
    if not isinstance(inputs, dict):
        raise TypeError(f"flashc: inputs must be a dict of name -> tensor or number, got "
                        f"{type(inputs).__name__}")
    declared = {info.inputs[i].name.decode(): info.inputs[i] for i in range(info.ninputs)}
    arr = (_capi.Input * len(inputs))()
    keep = []
    for b, (name, value) in zip(arr, inputs.items()):
        keep.append(name.encode())
        b.name = keep[-1]
        _input_binding(b, declared.get(name), value, device)
    return arr, len(inputs), keep


def _set_inputs(a, info, inputs, q):
    """Points args a at the fa_input array of `inputs` for kernel `info`;
    what the array points at is kept in a._keep, alive as long as a."""
    arr, n, keep = input_array(info, inputs, q.device)
    a.inputs = ctypes.cast(arr, ctypes.POINTER(_capi.Input)) if arr is not None else None
    a.num_inputs = n
    a._keep = (arr, keep)


class VarlenBatch:
    """The sequences of a varlen launch (fa_varlen; docs/abi.md, "Variable-length
    batches"): cu_seqlens_q and cu_seqlens_k, int32 CUDA tensors [num_seqs + 1]
    on the launch's device (the prefix sums of the lengths), and the longest
    lengths max_seqlen_q, max_seqlen_k. A max_seqlen left None is computed
    from a host copy of its prefix sums (one device-to-host copy), and that
    copy goes to the runtime too, which then validates it without reading
    the device array again (it reads and checks the arrays it has no copy
    of: one synchronization per launch either way). host_cu_seqlens_q /
    host_cu_seqlens_k: the same values on the host (a list of ints or a CPU
    tensor), when the caller has them: no device read at all then."""

    def __init__(self, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                 device=None, host_cu_seqlens_q=None, host_cu_seqlens_k=None):
        for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
            _check_cu_seqlens(name, t, device)
        n_q, n_k = cu_seqlens_q.shape[0], cu_seqlens_k.shape[0]
        if n_q != n_k:
            raise _error("FA_ERR_SHAPE", f"cu_seqlens_q has {n_q} entries but cu_seqlens_k "
                         f"{n_k}: both are [num_seqs + 1]")
        self.cu_seqlens_q, self.cu_seqlens_k = cu_seqlens_q, cu_seqlens_k
        self.num_seqs = n_q - 1
        self.max_seqlen_q, self.host_q = _longest("max_seqlen_q", max_seqlen_q, cu_seqlens_q,
                                                  host_cu_seqlens_q)
        self.max_seqlen_k, self.host_k = _longest("max_seqlen_k", max_seqlen_k, cu_seqlens_k,
                                                  host_cu_seqlens_k)

    def struct(self):
        """The fa_varlen (a _capi.Varlen) of this batch; it points at the
        host copies this object holds, so keep the object alive across the C
        call."""
        v = _capi.Varlen()
        v.cu_seqlens_q, v.cu_seqlens_k = self.cu_seqlens_q.data_ptr(), self.cu_seqlens_k.data_ptr()
        v.host_cu_seqlens_q = ctypes.addressof(self.host_q) if self.host_q is not None else None
        v.host_cu_seqlens_k = ctypes.addressof(self.host_k) if self.host_k is not None else None
        v.num_seqs, v.max_seqlen_q, v.max_seqlen_k = (self.num_seqs, self.max_seqlen_q,
                                                      self.max_seqlen_k)
        return v

    def __repr__(self):
        return (f"<VarlenBatch {self.num_seqs} sequences, max_seqlen_q {self.max_seqlen_q}, "
                f"max_seqlen_k {self.max_seqlen_k}, host copies "
                f"{'q' if self.host_q is not None else '-'}{'k' if self.host_k is not None else '-'}>")


def _check_cu_seqlens(name, t, device):
    """What fa_varlen's bare pointers cannot tell the C checks: an int32
    tensor, 1-D, contiguous, with at least one entry, on the launch's device."""
    if not hasattr(t, "data_ptr"):
        raise TypeError(f"flashc: {name} must be an int32 tensor [num_seqs + 1], got "
                        f"{type(t).__name__}")
    if _dtype_code(t) != 3:
        raise _error("FA_ERR_DTYPE", f"{name}: dtype is {t.dtype}, must be int32")
    if t.dim() != 1 or t.shape[0] < 1 or not t.is_contiguous():
        raise _error("FA_ERR_SHAPE", f"{name} must be a contiguous 1-D tensor of num_seqs + 1 "
                     f"prefix sums, got shape {tuple(t.shape)}")
    if device is not None and t.device != device:
        raise _error("FA_ERR_INVALID_ARGUMENT", f"{name} is on {t.device}, the launch's tensors "
                     f"on {device}: the prefix sums must be on the same device")


def _longest(name, given, cu, host):
    """(max_seqlen, host copy): the given max, or for None the longest step
    of the prefix sums (at least 1); the host copy an int32 ctypes array of
    `host`'s values (a list or a CPU tensor), or for None, when the max must
    be computed, of cu's (cu.tolist(): a device-to-host copy), else None."""
    if given is not None and (isinstance(given, bool) or not isinstance(given, int)):
        raise TypeError(f"flashc: {name} must be an int or None, got {type(given).__name__}")
    if host is None and given is not None:
        return given, None
    src = cu if host is None else host
    values = [int(x) for x in (src.tolist() if hasattr(src, "tolist") else src)]
    if len(values) != cu.shape[0]:
        raise _error("FA_ERR_SHAPE", f"host_cu_seqlens_{name[-1]} has {len(values)} values but "
                     f"cu_seqlens_{name[-1]} {cu.shape[0]}: the host copy holds the same values")
    if not all(-2**31 <= x < 2**31 for x in values):
        raise _error("FA_ERR_INVALID_ARGUMENT", f"host_cu_seqlens_{name[-1]}: a value is "
                     "outside int32 range")
    longest = max((b - a for a, b in zip(values, values[1:])), default=0)
    return (given if given is not None else max(longest, 1)), (ctypes.c_int32 * len(values))(*values)


def _set_varlen(a, varlen):
    """Points args a at varlen's fa_varlen (None: a padded batch), kept alive
    in a._varlen with the batch whose host copies it points at."""
    if varlen is None:
        a.varlen = None
        return
    v = varlen.struct()
    a.varlen = ctypes.pointer(v)
    a._varlen = (v, varlen)


def _set_blocks(a, blocks, device):
    """Points args a at blocks' fa_blocks (None: the launch builds the lists
    it needs), kept alive in a._blocks. What the C struct cannot tell is
    checked here: a Blocks, not closed, made on the launch's device."""
    if blocks is None:
        a.blocks = None
        return
    if not isinstance(blocks, Blocks):
        raise TypeError(f"flashc: blocks must be a flashc Blocks (Module.blocks), got "
                        f"{type(blocks).__name__}")
    if not blocks.handle:
        raise _error("FA_ERR_INVALID_ARGUMENT", "blocks: this Blocks was closed")
    if blocks.device != device:
        raise _error("FA_ERR_INVALID_ARGUMENT", f"blocks were built on {blocks.device}, the "
                     f"launch's tensors are on {device}")
    a.blocks = blocks.handle.value
    a._blocks = blocks


def forward_args(info, q, k, v, o, lse=None, stream=None, dropout_p=0.0, seed=0, offset=0,
                 inputs=None, varlen=None, blocks=None):
    """The ForwardArgs (fa_forward_args) of a launch of kernel `info` (a
    KernelInfo: whose run-time inputs `inputs` binds) on torch tensors;
    varlen: a VarlenBatch for a varlen kernel, whose q, k, v, o are then
    packed [total, heads, head_dim]; blocks: a Blocks of the module for
    these sizes and inputs (None: the launch builds its block lists)."""
    a = _capi.ForwardArgs()
    packed = varlen is not None
    a.q, a.k, a.v, a.o = (tensor_desc(t, packed) for t in (q, k, v, o))
    a.lse = _ptr(lse)
    a.stream = _stream(q, stream)
    a.dropout_p, a.seed, a.offset = dropout_p, seed, offset
    _set_inputs(a, info, inputs, q)
    _set_varlen(a, varlen)
    _set_blocks(a, blocks, q.device)
    return a


def backward_args(info, q, k, v, o, lse, dout, dq, dk, dv, mode=0, workspace=None, stream=None,
                  dropout_p=0.0, seed=0, offset=0, inputs=None, varlen=None, blocks=None):
    """The BackwardArgs (fa_backward_args) of a launch, as forward_args."""
    a = _capi.BackwardArgs()
    packed = varlen is not None
    a.q, a.k, a.v, a.o = (tensor_desc(t, packed) for t in (q, k, v, o))
    a.dout, a.dq, a.dk, a.dv = (tensor_desc(t, packed) for t in (dout, dq, dk, dv))
    a.lse = _ptr(lse)
    if workspace is not None:
        a.workspace, a.workspace_bytes = workspace.data_ptr() or None, workspace.numel()
    a.stream = _stream(q, stream)
    a.mode = int(mode)
    a.dropout_p, a.seed, a.offset = dropout_p, seed, offset
    _set_inputs(a, info, inputs, q)
    _set_varlen(a, varlen)
    _set_blocks(a, blocks, q.device)
    return a


def blocks_args(info, batch, seqlen_q, seqlen_k, inputs=None, device=None, stream=None):
    """The BlocksArgs (fa_blocks_args) of lists for launches of (batch,
    seqlen_q, seqlen_k) on `device`, whose run-time inputs (declared by
    `info`, a KernelInfo of the module) `inputs` binds; stream: the
    caller's, else torch's current stream of the device."""
    for name, n in (("batch", batch), ("seqlen_q", seqlen_q), ("seqlen_k", seqlen_k)):
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"flashc: {name} must be an int, got {type(n).__name__}")
    a = _capi.BlocksArgs()
    a.batch, a.seqlen_q, a.seqlen_k = batch, seqlen_q, seqlen_k
    arr, n, keep = input_array(info, inputs, device)
    a.inputs = ctypes.cast(arr, ctypes.POINTER(_capi.Input)) if arr is not None else None
    a.num_inputs = n
    a._keep = (arr, keep)
    a.stream = _device_stream(device, stream)
    return a


def decode_args(info, q, k, v, o, cache_seqlens, block_table=None, lse=None, host_seqlens=None,
                host_block_table=None, nsplit=0, max_seqlen=0, stream=None, inputs=None):
    """The DecodeArgs (fa_decode_args) of a launch of decode kernel `info`
    on torch tensors; inputs binds its run-time inputs (dims batch and
    seqlen_q = q_len)."""
    a = _capi.DecodeArgs()
    a.q, a.k, a.v, a.o = (tensor_desc(t) for t in (q, k, v, o))
    a.lse = _ptr(lse)
    a.cache_seqlens = _ptr(cache_seqlens)
    if block_table is not None:
        if block_table.dim() != 2 or block_table.stride(1) != 1:
            raise ValueError("flashc: block_table must be int32 [batch, max_pages] with "
                             f"contiguous rows; got shape {tuple(block_table.shape)}, "
                             f"strides {block_table.stride()}")
        a.block_table = block_table.data_ptr()
        a.max_pages, a.bt_stride = block_table.shape[1], block_table.stride(0)
    a.host_cache_seqlens = _ptr(host_seqlens)
    a.host_block_table = _ptr(host_block_table)
    a.max_seqlen, a.nsplit = max_seqlen, nsplit
    a.stream = _stream(q, stream)
    _set_inputs(a, info, inputs, q)
    return a


_raw_stream = None


def _stream(t, stream):
    """The stream to launch on: the caller's, else torch's current stream of
    t's device (its raw handle, without making a torch.cuda.Stream)."""
    return _device_stream(t.device, stream)


def _device_stream(device, stream):
    """_stream of a torch.device."""
    global _raw_stream
    if stream is not None:
        return stream or None
    if _raw_stream is None:
        torch = _torch()
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _raw_stream = raw if raw else (lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _raw_stream(getattr(device, "index", None)) or None


def _ptr(t):
    return t.data_ptr() if t is not None else None


_blocks_by_id = weakref.WeakValueDictionary()  # id -> Blocks: the torch ops name them by id


class _DeviceArray:
    """An int32 array in device memory that `owner` keeps alive, as torch
    takes it without a copy (__cuda_array_interface__)."""

    def __init__(self, owner, ptr, shape, strides):
        self._owner = owner
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": "<i4", "data": (ptr or 0, False), "version": 2,
            "strides": tuple(4 * s for s in strides)}


class Blocks:
    """Block lists built once (fa_blocks; docs/abi.md, "Block lists"): every
    classifier kernel's lists of one module for launches of (batch, seqlen_q,
    seqlen_k) with the run-time inputs' values they were built from. Give it
    to any number of launches of that module and those sizes (forward and
    backward: blocks=) while the inputs keep their values; build a new one
    when they change. Made by Module.blocks / LoadedModule.blocks /
    flashc.blocks; the lists are built on the stream given (torch's current
    one), in order with the launches that follow on it. close() frees them
    (after synchronizing the device); so does the garbage collector."""

    def __init__(self, loaded, batch, seqlen_q, seqlen_k, inputs=None, device=None,
                 stream=None):
        self.lib, self.handle, self.module = loaded.lib, ctypes.c_void_p(), loaded
        self.batch, self.seqlen_q, self.seqlen_k = batch, seqlen_q, seqlen_k
        self.device = device
        a = blocks_args(loaded._info0, batch, seqlen_q, seqlen_k, inputs, device, stream)
        st = self.lib.fa_blocks_create(loaded.handle, ctypes.byref(a), ctypes.byref(self.handle))
        if st:
            loaded._raise(st)
        self.inputs = dict(inputs or {})  # what the lists were built from, kept alive
        self.id = next(_ids)
        _blocks_by_id[self.id] = self

    def __len__(self):
        return self.lib.fa_blocks_count(self.handle) if self.handle else 0

    def lists(self):
        """The lists as torch int32 CUDA tensors (views of the handle's memory,
        which they keep alive): a list of (classifier kernel name, blk_list
        [batch, list_heads, row_tiles, list_len], blk_count [batch,
        list_heads, row_tiles])."""
        torch = _torch()
        out = []
        for i in range(len(self)):
            bl = _capi.BlockLists()
            st = self.lib.fa_blocks_lists(self.handle, i, ctypes.byref(bl))
            if st:
                raise FlashcError(st, f"fa_blocks_lists refused index {i}")
            name = self.module.kernels[bl.kernel]["kernel"]
            lst = _DeviceArray(self, bl.list, bl.list_dim, bl.list_stride)
            cnt = _DeviceArray(self, bl.count, bl.count_dim, bl.count_stride)
            out.append((name, torch.as_tensor(lst, device=self.device),
                        torch.as_tensor(cnt, device=self.device)))
        return out

    def close(self):
        """Frees the lists (fa_blocks_destroy), once launches that may still
        read them are done (the device is synchronized first)."""
        if self.handle:
            try:
                _torch().cuda.synchronize(self.device)
            except Exception:  # no torch (a stand-in), or the process is exiting
                pass
            self.lib.fa_blocks_destroy(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self):
        self.close()

    def __repr__(self):
        return (f"<flashc Blocks of {self.module.kernels[0]['kernel']}: batch {self.batch}, "
                f"seqlen_q {self.seqlen_q}, seqlen_k {self.seqlen_k}, {len(self)} classifiers>")


class Context:
    """The primary context of one GPU (fa_context)."""

    def __init__(self, lib, device):
        self.lib, self.device, self.handle = lib, device, ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        st = lib.fa_context_create(device, ctypes.byref(self.handle), err, len(err))
        if st:
            raise FlashcError(st, err.value.decode(errors="replace"))

    def close(self):
        if self.handle:
            self.lib.fa_context_destroy(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self):
        self.close()


_contexts = {}


def context(device, lib=None):
    """The process's Context of GPU `device` (created on first use)."""
    lib = lib or runtime_library()
    key = (id(lib), device)
    with _lock:
        if key not in _contexts:
            _contexts[key] = Context(lib, device)
        return _contexts[key]


class LoadedModule:
    """One fa_module: a module's kernels loaded on one GPU. The launch methods
    take tensors the caller allocated; Module's allocate them."""

    def __init__(self, ctx, ptx=None, cubin=None, meta=None):
        self.ctx, self.lib, self.handle = ctx, ctx.lib, ctypes.c_void_p()
        if cubin is not None:
            st = self.lib.fa_module_load_cubin(ctx.handle, cubin, len(cubin), meta, len(meta),
                                               ctypes.byref(self.handle))
        else:
            st = self.lib.fa_module_load_ptx(ctx.handle, ptx, len(ptx), ctypes.byref(self.handle))
        if st:
            raise FlashcError(st, self.lib.fa_context_errmsg(ctx.handle).decode(errors="replace"))
        n = self.lib.fa_module_kernel_count(self.handle)
        self.kernels = [_capi.info_dict(self.lib.fa_module_kernel_info(self.handle, i).contents)
                        for i in range(n)]
        # kernel 0's declarations of run-time inputs (every kernel's: docs/abi.md)
        self._info0 = self.lib.fa_module_info(self.handle).contents

    @property
    def info(self):
        """Kernel 0's metadata (the one forward / decode launch) as a dict."""
        return self.kernels[0]

    def _raise(self, st):
        raise FlashcError(st, self.lib.fa_module_errmsg(self.handle).decode(errors="replace"))

    def _result(self, st, check):
        msg = self.lib.fa_module_errmsg(self.handle).decode(errors="replace") if st else ""
        if check and st:
            raise FlashcError(st, msg)
        return (_capi.STATUS[st] if 0 <= st < len(_capi.STATUS) else str(st)), msg

    def forward_args(self, q, k, v, o, lse=None, stream=None, dropout_p=0.0, seed=0, offset=0,
                     inputs=None, varlen=None, blocks=None):
        return forward_args(self._info0, q, k, v, o, lse, stream, dropout_p, seed, offset, inputs,
                            varlen, blocks)

    def forward(self, q, k, v, o, lse=None, stream=None, dropout_p=0.0, seed=0, offset=0,
                check=True, inputs=None, varlen=None, blocks=None):
        """fa_forward into o (and lse: float32 [b, heads, seqlen_q] or None).
        inputs: the kernel's run-time inputs, a dict name -> tensor (on q's
        device) or number; varlen: a VarlenBatch for a varlen kernel, q, k,
        v, o then packed [total, heads, d] and lse [heads, total_q]; blocks:
        this module's Blocks for these sizes and inputs (None: the launch
        builds the block lists it needs). Raises FlashcError on a refused
        launch (check=False: returns (status name, message) instead)."""
        a = self.forward_args(q, k, v, o, lse, stream, dropout_p, seed, offset, inputs, varlen,
                              blocks)
        return self._result(self.lib.fa_forward(self.handle, ctypes.byref(a)), check)

    def blocks(self, batch, seqlen_q, seqlen_k, inputs=None, device=None, stream=None):
        """fa_blocks_create: a Blocks of this module for launches of (batch,
        seqlen_q, seqlen_k) with run-time inputs `inputs` (as forward's) on
        `device` (a torch.device, default this module's GPU; the inputs'
        tensors are on it), built on `stream` (None: torch's current stream)."""
        if device is None:
            device = _torch().device("cuda", self.ctx.device)
        return Blocks(self, batch, seqlen_q, seqlen_k, inputs, device, stream)

    def backward_workspace_size(self, batch, seqlen_q, seqlen_k, mode=0):
        """fa_backward_workspace_size in bytes; a varlen launch's is its
        padded batch's: pass num_seqs, max_seqlen_q, max_seqlen_k."""
        n = ctypes.c_size_t()
        st = self.lib.fa_backward_workspace_size(self.lib.fa_module_info(self.handle), batch,
                                                 seqlen_q, seqlen_k, int(mode), ctypes.byref(n))
        if st:
            raise FlashcError(st, "fa_backward_workspace_size refused the sizes "
                              f"(batch {batch}, seqlen_q {seqlen_q}, seqlen_k {seqlen_k})")
        return n.value

    def backward(self, q, k, v, o, lse, dout, dq, dk, dv, mode=0, workspace=None, stream=None,
                 dropout_p=0.0, seed=0, offset=0, inputs=None, varlen=None, blocks=None):
        """fa_backward into dq, dk, dv. mode: fa_backward_mode (0 auto, 1
        deterministic, 2 atomic); workspace: a uint8 CUDA tensor of at least
        backward_workspace_size bytes, or None for the module's own scratch;
        inputs: the forward's run-time inputs (the same values); varlen: the
        forward's VarlenBatch (every tensor packed, lse [heads, total_q]);
        blocks: the forward's Blocks (or None)."""
        a = backward_args(self._info0, q, k, v, o, lse, dout, dq, dk, dv, mode, workspace, stream,
                          dropout_p, seed, offset, inputs, varlen, blocks)
        st = self.lib.fa_backward(self.handle, ctypes.byref(a))
        if st:
            self._raise(st)

    def decode_args(self, q, k, v, o, cache_seqlens, block_table=None, lse=None,
                    host_seqlens=None, host_block_table=None, nsplit=0, max_seqlen=0,
                    stream=None, inputs=None):
        return decode_args(self._info0, q, k, v, o, cache_seqlens, block_table, lse,
                           host_seqlens, host_block_table, nsplit, max_seqlen, stream, inputs)

    def decode(self, q, k, v, o, cache_seqlens, block_table=None, lse=None, host_seqlens=None,
               host_block_table=None, nsplit=0, max_seqlen=0, stream=None, check=True,
               inputs=None):
        """fa_decode into o (docs/decode.md). The int32 tensors' dtypes are
        checked here (the C API takes bare pointers); inputs: the decode
        kernel's run-time inputs, as for forward (the combine takes none)."""
        torch = _torch()
        for name, t in (("cache_seqlens", cache_seqlens), ("block_table", block_table),
                        ("host_seqlens", host_seqlens), ("host_block_table", host_block_table)):
            if t is not None and t.dtype != torch.int32:
                raise TypeError(f"flashc: {name} must be int32, got {t.dtype}")
            if t is not None and not t.is_contiguous() and name != "block_table":
                raise ValueError(f"flashc: {name} must be contiguous")
        a = self.decode_args(q, k, v, o, cache_seqlens, block_table, lse, host_seqlens,
                             host_block_table, nsplit, max_seqlen, stream, inputs)
        return self._result(self.lib.fa_decode(self.handle, ctypes.byref(a)), check)

    def last_nsplit(self):
        return self.lib.fa_decode_last_nsplit(self.handle)

    def last_kernel(self):
        """The split kernel the last decode launched (the kernel or its small-batch variant)."""
        return self.lib.fa_decode_last_kernel(self.handle).decode()

    def close(self):
        if self.handle:
            self.lib.fa_module_destroy(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self):
        self.close()


_ids = itertools.count(1)
_modules = {}  # id -> Module: the torch ops name a module by its id
_by_image = {}  # image digest -> Module: the same image is one module, loaded once a GPU


def _need_4d(**tensors):
    for name, t in tensors.items():
        if t.dim() != 4:
            raise ValueError(f"flashc: {name} must be 4-D [batch, seqlen, heads, head_dim], got "
                             f"shape {tuple(t.shape)}")


def _need_packed(**tensors):
    for name, t in tensors.items():
        if t.dim() != 3:
            raise ValueError(f"flashc: {name} must be 3-D [total, heads, head_dim] in a varlen "
                             f"launch (the sequences packed), got shape {tuple(t.shape)}")


def _varlen_of(q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, host_q=None,
               host_k=None):
    """The VarlenBatch of a launch given cu_seqlens (None: a padded launch)."""
    if cu_seqlens_q is None and cu_seqlens_k is None:
        if any(x is not None for x in (max_seqlen_q, max_seqlen_k, host_q, host_k)):
            raise ValueError("flashc: max_seqlen_q / max_seqlen_k / host_cu_seqlens_q / "
                             "host_cu_seqlens_k go with cu_seqlens_q and cu_seqlens_k (a varlen "
                             "launch)")
        return None
    if cu_seqlens_q is None or cu_seqlens_k is None:
        raise ValueError("flashc: a varlen launch takes both cu_seqlens_q and cu_seqlens_k "
                         f"({'cu_seqlens_q' if cu_seqlens_q is None else 'cu_seqlens_k'} is "
                         "missing)")
    return VarlenBatch(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, q.device, host_q,
                       host_k)


class Module:
    """A compiled flashc module (flashc.compile, flashc.load): its image and
    its kernels' metadata; loaded on each GPU at its first launch there."""

    def __init__(self, ptx=None, cubin=None, meta=None, source=None):
        if (ptx is None) == (cubin is None):
            raise ValueError("flashc: a module is a PTX image or a cubin with its metadata")
        if cubin is not None and meta is None:
            raise ValueError("flashc: a cubin needs its metadata text (flashc -emit=meta)")
        self.ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
        self.cubin = cubin
        self.meta = meta.encode() if isinstance(meta, str) else meta
        self.source = source
        self._infos = _capi.parse_module_meta(runtime_library(),
                                              self.meta if cubin is not None else self._image())
        self.kernels = [_capi.info_dict(i) for i in self._infos]
        self._loaded = {}
        self.id = next(_ids)
        _modules[self.id] = self

    def _image(self):
        return self.ptx.encode()

    @property
    def name(self):
        return self.kernels[0]["kernel"]

    @property
    def info(self):
        return self.kernels[0]

    def kernel(self, name):
        """The metadata dict of kernel `name` (KeyError when absent)."""
        for k in self.kernels:
            if k["kernel"] == name:
                return k
        raise KeyError(f"{self.name}: no kernel {name!r} (has {[k['kernel'] for k in self.kernels]})")

    @property
    def inputs(self):
        """The run-time inputs the module's kernels take (docs/abi.md), in
        their order: a list of (name, dtype, dims), dims a tuple of ints and
        "batch" / "seqlen_q" / "seqlen_k", () for a scalar. Launches bind
        them by name: inputs={"doc": tensor, "softcap": 30.0}."""
        return list(self.info["inputs"])

    @property
    def has_backward(self):
        return any(k["mode"] == "backward" for k in self.kernels)

    @property
    def has_dropout(self):
        return any(k["dropout_of"] for k in self.kernels)

    @property
    def dropout(self):
        """The spec's `dropout = P` (its default rate; 0.0 without dropout)."""
        return max((k["dropout"] for k in self.kernels if k["dropout_of"]), default=0.0)

    def __repr__(self):
        return f"<flashc module {self.name}: {', '.join(k['kernel'] for k in self.kernels)}>"

    def save(self, path):
        """Writes the image: PATH (the PTX, metadata at its top), or for a
        cubin PATH and PATH.meta. flashc.load reads it back."""
        if self.cubin is not None:
            with open(path, "wb") as f:
                f.write(self.cubin)
            with open(path + ".meta", "wb") as f:
                f.write(self.meta)
        else:
            with open(path, "w") as f:
                f.write(self.ptx)

    def on(self, device):
        """The LoadedModule of GPU `device` (an int, a torch.device or a
        tensor), loading it there first if needed."""
        if hasattr(device, "device"):
            device = device.device
        if hasattr(device, "type"):
            if device.type != "cuda":
                raise ValueError(f"flashc: tensors must be on a CUDA device, got {device}")
            device = device.index if device.index is not None else _torch().cuda.current_device()
        with _lock:
            m = self._loaded.get(device)
        if m is None:
            ctx = context(device)
            m = (LoadedModule(ctx, cubin=self.cubin, meta=self.meta) if self.cubin is not None
                 else LoadedModule(ctx, ptx=self._image()))
            with _lock:
                m = self._loaded.setdefault(device, m)
        return m

    # ---- launches that allocate their outputs (torch tensors) ----

    @property
    def varlen(self):
        """Whether the module's kernels take packed sequences (`varlen =
        true`: metadata layout varlen); its launches then take cu_seqlens."""
        return self.info["layout"] == "varlen"

    @property
    def has_blocks(self):
        """Whether the module has classifier kernels (mode blocks: a mask
        that reads run-time tensors; docs/abi.md, "Block lists"), whose lists
        Module.blocks builds once for many launches."""
        return any(k["mode"] == "blocks" for k in self.kernels)

    def blocks(self, q, k, inputs=None, stream=None):
        """The block lists of launches on q [batch, seqlen_q, heads, d] and k
        [batch, seqlen_k, kv_heads, d] (their sizes and device; no data is
        read) with run-time inputs `inputs` (as forward's): a Blocks, built
        now on torch's current stream (or `stream`), to pass as blocks= to
        forward and backward launches of these sizes while the inputs keep
        their values. A module without classifiers gives an empty one
        (launches ignore it)."""
        _need_4d(q=q, k=k)
        return self.on(q).blocks(q.shape[0], q.shape[1], k.shape[1], inputs, q.device, stream)

    def forward(self, q, k, v, dropout_p=0.0, seed=0, offset=0, out=None, lse=None,
                inputs=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                max_seqlen_k=None, host_cu_seqlens_q=None, host_cu_seqlens_k=None, blocks=None):
        """Forward on [batch, seqlen, heads, head_dim] tensors: returns (out,
        lse), out [b, seqlen_q, heads, v_head_dim] in q's dtype, lse float32
        [b, heads, seqlen_q]. dropout (p, seed, offset) as fa_forward_args;
        inputs: the run-time inputs (Module.inputs), a dict name -> tensor
        on q's device (int32, float32, float16 or bfloat16 as declared, any
        strides) or number. A varlen module (Module.varlen) takes its
        sequences packed, FlashAttention's flash_attn_varlen_func layout: q
        [total_q, heads, head_dim], k, v [total_k, kv_heads, d],
        cu_seqlens_q / cu_seqlens_k int32 [num_seqs + 1] on q's device and
        max_seqlen_q / max_seqlen_k ints (None: computed from a host copy of
        the prefix sums, which the runtime then validates without another
        read; host_cu_seqlens_q / host_cu_seqlens_k: host copies, when the
        caller has them: VarlenBatch); out is then [total_q, heads,
        v_head_dim] and lse [heads, total_q]. blocks: a Blocks of this
        module (Module.blocks) for these sizes and inputs, reused instead of
        building the block lists again. No autograd: flashc.attention is
        the differentiable op."""
        torch = _torch()
        varlen = _varlen_of(q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            host_cu_seqlens_q, host_cu_seqlens_k)
        if varlen is not None:
            _need_packed(q=q, k=k, v=v)
            lse_shape = (q.shape[1], q.shape[0])
        else:
            _need_4d(q=q, k=k, v=v)
            lse_shape = (q.shape[0], q.shape[2], q.shape[1])
        if out is None:
            out = q.new_empty(tuple(q.shape[:-1]) + (self.info["v_head_dim"],))
        if lse is None:
            lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device)
        self.on(q).forward(q, k, v, out, lse, dropout_p=dropout_p, seed=seed, offset=offset,
                           inputs=inputs, varlen=varlen, blocks=blocks)
        return out, lse

    def backward(self, dout, q, k, v, out, lse, mode="auto", dropout_p=0.0, seed=0, offset=0,
                 dq=None, dk=None, dv=None, inputs=None, cu_seqlens_q=None, cu_seqlens_k=None,
                 max_seqlen_q=None, max_seqlen_k=None, host_cu_seqlens_q=None,
                 host_cu_seqlens_k=None, blocks=None):
        """Backward (needs a module compiled with `grad = true`): returns (dq,
        dk, dv) shaped and strided as q, k, v. mode: "auto",
        "deterministic" or "atomic" (fa_backward_mode); the workspace comes
        from torch's caching allocator; inputs: the forward's run-time
        inputs (no gradient is computed for them); a varlen module's
        cu_seqlens and max_seqlens are the forward's (every tensor packed,
        lse [heads, total_q]; its workspace is the padded batch's, num_seqs
        x max_seqlen_q); blocks: the forward's Blocks, or None."""
        torch = _torch()
        varlen = _varlen_of(q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            host_cu_seqlens_q, host_cu_seqlens_k)
        m = self.on(q)
        code = BACKWARD_MODES[mode] if isinstance(mode, str) else int(mode)
        dq = torch.empty_like(q) if dq is None else dq
        dk = torch.empty_like(k) if dk is None else dk
        dv = torch.empty_like(v) if dv is None else dv
        if varlen is not None:
            _need_packed(dout=dout, q=q, k=k, v=v, out=out)
            sizes = (varlen.num_seqs, varlen.max_seqlen_q, varlen.max_seqlen_k)
        else:
            _need_4d(dout=dout, q=q, k=k, v=v, out=out)
            sizes = (q.shape[0], q.shape[1], k.shape[1])
        n = m.backward_workspace_size(*sizes, code)
        ws = torch.empty(max(n, 1), dtype=torch.uint8, device=q.device)
        m.backward(q, k, v, out, lse, dout, dq, dk, dv, mode=code, workspace=ws,
                   dropout_p=dropout_p, seed=seed, offset=offset, inputs=inputs, varlen=varlen,
                   blocks=blocks)
        return dq, dk, dv

    def decode(self, q, k_cache, v_cache, cache_seqlens, block_table=None, nsplit=0,
               max_seqlen=0, host_seqlens=None, host_block_table=None, return_lse=False,
               inputs=None):
        """Decode (a module of mode decode): q [b, q_len, heads, d] against a
        contiguous [b, capacity, kv_heads, d] or paged [pages, page_size,
        kv_heads, d] cache holding cache_seqlens[b] (int32 CUDA) tokens;
        block_table int32 [b, max_pages] for a paged cache; inputs: the
        run-time inputs (Module.inputs) as for forward, their dims batch
        and seqlen_q = q_len. Returns out (and lse float32 [b, heads,
        q_len] with return_lse)."""
        torch = _torch()
        _need_4d(q=q, k_cache=k_cache, v_cache=v_cache)
        out = q.new_empty(q.shape[:3] + (self.info["v_head_dim"],))
        lse = None
        if return_lse:
            lse = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32,
                              device=q.device)
        self.on(q).decode(q, k_cache, v_cache, out, cache_seqlens, block_table, lse,
                          host_seqlens, host_block_table, nsplit, max_seqlen, inputs=inputs)
        return (out, lse) if return_lse else out

    def dropout_mask(self, p, seed, offset, batch, seqlen_q, seqlen_k):
        """fa_dropout_mask on the host: which elements a launch with (p, seed,
        offset) keeps, as a uint8 CPU tensor [batch, heads, seqlen_q, seqlen_k]
        (1 kept). The definition the kernels evaluate, bit for bit."""
        return dropout_mask(runtime_library(), ctypes.byref(self._infos[0]), self.info["heads"],
                            p, seed, offset, batch, seqlen_q, seqlen_k)


def dropout_mask(lib, info, heads, p, seed, offset, batch, seqlen_q, seqlen_k):
    """fa_dropout_mask of kernel `info` (a pointer to its fa_kernel_info) into
    a new uint8 CPU tensor [batch, heads, seqlen_q, seqlen_k] (1 kept)."""
    torch = _torch()
    m = torch.empty((batch, heads, seqlen_q, seqlen_k), dtype=torch.uint8)
    st = lib.fa_dropout_mask(info, p, seed, offset, batch, seqlen_q, seqlen_k, m.data_ptr())
    if st:
        raise FlashcError(st, f"fa_dropout_mask refused p = {p} or the sizes")
    return m


def module_of(ptx=None, cubin=None, meta=None, source=None):
    """The Module of an image: the one already made for the same bytes (so
    compiling or loading a spec again reuses its loaded kernels), else a new
    one. flashc.compile and flashc.load go through it."""
    h = hashlib.sha256()
    for part in (ptx, cubin, meta):
        b = part.encode() if isinstance(part, str) else (part or b"")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    key = h.hexdigest()
    with _lock:
        m = _by_image.get(key)
    if m is None:
        m = Module(ptx=ptx, cubin=cubin, meta=meta, source=source)
        with _lock:
            m = _by_image.setdefault(key, m)
    return m


def load(path, meta=None):
    """Loads a compiled module from disk: a .ptx written by `flashc -emit=ptx`
    (or Module.save, or the kernel cache), or a cubin with its metadata (meta:
    the text of `flashc -emit=meta`, or its path; default PATH.meta). Needs
    the runtime library only (no LLVM/MLIR)."""
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"\x7fELF") or path.endswith((".cubin", ".fatbin")):
        if meta is None:
            meta = path + ".meta"
        if isinstance(meta, str) and os.path.exists(meta):
            with open(meta, "rb") as f:
                meta = f.read()
        elif isinstance(meta, str) and not meta.lstrip().startswith("//"):
            raise FileNotFoundError(f"flashc: {path} is a cubin; its metadata {meta} is missing "
                                    "(write it with flashc -emit=meta)")
        return module_of(cubin=data, meta=meta, source=path)
    return module_of(ptx=data, source=path)


def load_bundle(directory, image="auto"):
    """The modules of a bundle directory (`flashc --bundle=DIR`): a dict of
    kernel name -> Module, in bundle.txt's order (without bundle.txt: every
    .ptx of the directory). image: "auto" takes a module's cubin where the
    bundle has one (loaded as is: no JIT compile at the first launch; built
    for the bundle's target), "ptx" always the PTX (the driver compiles it
    for the GPU at hand)."""
    if image not in ("auto", "ptx"):
        raise ValueError(f"flashc: image must be 'auto' or 'ptx', got {image!r}")
    index = os.path.join(directory, "bundle.txt")
    if os.path.exists(index):
        with open(index) as f:
            rows = [line.split() for line in f if line.strip() and not line.startswith("#")]
        files = [r[2] if len(r) > 2 and image == "auto" else r[1] for r in rows]
    else:
        files = sorted(n for n in os.listdir(directory) if n.endswith(".ptx"))
    mods = {}
    for name in files:
        m = load(os.path.join(directory, name))
        mods[m.name] = m
    if not mods:
        raise FileNotFoundError(f"flashc: no .ptx modules in {directory}")
    return mods
