"""ctypes declarations of the C API (runtime/flashc_runtime.h, jit/flashc_jit.h)
and how the libraries are found. Struct layouts mirror the headers; the CI test
test/python/compile.test checks their sizes (and the offsets of the run-time
inputs' and the varlen fields) against the C compiler's."""
import ctypes
import ctypes.util
import os

FA_NAME_MAX = 128
STATUS = ["FA_OK", "FA_ERR_INVALID_ARGUMENT", "FA_ERR_DTYPE", "FA_ERR_SHAPE", "FA_ERR_STRIDE",
          "FA_ERR_ALIGNMENT", "FA_ERR_NULL_POINTER", "FA_ERR_TOO_LARGE", "FA_ERR_NO_DEVICE",
          "FA_ERR_CUDA", "FA_ERR_LOAD", "FA_ERR_META", "FA_ERR_OUT_OF_MEMORY",
          "FA_ERR_UNSUPPORTED", "FA_ERR_COMPILE"]
FA_OK, FA_ERR_COMPILE = 0, 14
MODULE_MAX_KERNELS = 16
MAX_INPUTS = 8          # FA_MAX_INPUTS
INPUT_NAME_MAX = 64     # FA_INPUT_NAME_MAX
MAX_TMAPS = 4           # FA_MAX_TMAPS
# fa_input_dim: a tensor input's dim that is a launch size (negative), by its metadata name
INPUT_DIMS = {-1: "batch", -2: "seqlen_q", -3: "seqlen_k"}


class DecodeInfo(ctypes.Structure):
    _fields_ = [("cache", ctypes.c_int), ("page_size", ctypes.c_int), ("split", ctypes.c_int),
                ("q_len_max", ctypes.c_int), ("combine_kernel", ctypes.c_char * FA_NAME_MAX),
                ("combine_threads", ctypes.c_int), ("has_unified_max", ctypes.c_int),
                ("unified_max", ctypes.c_double), ("combine_pdl", ctypes.c_int),
                ("combine_fused", ctypes.c_int), ("wide_kernel", ctypes.c_char * FA_NAME_MAX),
                ("wide_tile_kv", ctypes.c_int), ("wide_threads", ctypes.c_int),
                ("wide_smem_bytes", ctypes.c_int)]


class InputInfo(ctypes.Structure):
    """fa_input_info: one run-time input a kernel declares."""
    _fields_ = [("name", ctypes.c_char * INPUT_NAME_MAX), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int), ("dims", ctypes.c_int * 4)]


class TmapInfo(ctypes.Structure):
    """fa_tmap_info: one tensor map a kernel takes (TMA copies of Q, K, V or an input)."""
    _fields_ = [("tensor", ctypes.c_char), ("rows", ctypes.c_int),
                ("input", ctypes.c_char * INPUT_NAME_MAX)]


class KernelInfo(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("kernel", ctypes.c_char * FA_NAME_MAX),
                ("mode", ctypes.c_int), ("dtype", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("v_head_dim", ctypes.c_int), ("heads", ctypes.c_int), ("kv_heads", ctypes.c_int),
                ("mask", ctypes.c_int), ("scale", ctypes.c_double), ("tile_q", ctypes.c_int),
                ("tile_kv", ctypes.c_int), ("warps", ctypes.c_int), ("stages", ctypes.c_int),
                ("threads", ctypes.c_int), ("smem_bytes", ctypes.c_int), ("grid", ctypes.c_int),
                ("workspace_floats_per_row", ctypes.c_int), ("target", ctypes.c_char * 32),
                ("passes", ctypes.c_char * 512), ("decode", DecodeInfo), ("role", ctypes.c_int),
                ("forward", ctypes.c_char * FA_NAME_MAX), ("dropout", ctypes.c_double),
                ("dropout_of", ctypes.c_char * FA_NAME_MAX), ("dropout_torch", ctypes.c_int),
                ("ninputs", ctypes.c_int), ("inputs", InputInfo * MAX_INPUTS),
                ("require_q_le_k", ctypes.c_int), ("require_k_le_q", ctypes.c_int),
                ("varlen", ctypes.c_int), ("blocks", ctypes.c_int), ("list_heads", ctypes.c_int),
                ("block_list", ctypes.c_char * FA_NAME_MAX), ("chunk", ctypes.c_int),
                ("classes", ctypes.c_char * FA_NAME_MAX), ("ntmaps", ctypes.c_int),
                ("tmaps", TmapInfo * MAX_TMAPS), ("gather_of", ctypes.c_char * FA_NAME_MAX),
                ("long_rows_of", ctypes.c_char * FA_NAME_MAX), ("long_rows_min", ctypes.c_int),
                ("backward_auto", ctypes.c_int)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("dim", ctypes.c_int64 * 4), ("stride", ctypes.c_int64 * 4)]


class Input(ctypes.Structure):
    """fa_input: one run-time input's value at a launch."""
    _fields_ = [("name", ctypes.c_char_p), ("tensor", Tensor), ("value", ctypes.c_double)]


class Varlen(ctypes.Structure):
    """fa_varlen: the sequences of a varlen launch (docs/abi.md, "Variable-length
    batches"): device prefix sums, optional host copies, their count and the
    longest lengths."""
    _fields_ = [("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p),
                ("host_cu_seqlens_q", ctypes.c_void_p), ("host_cu_seqlens_k", ctypes.c_void_p),
                ("num_seqs", ctypes.c_int), ("max_seqlen_q", ctypes.c_int64),
                ("max_seqlen_k", ctypes.c_int64)]


class BlockLists(ctypes.Structure):
    """fa_block_lists: one classifier's lists (docs/abi.md, "Block lists"):
    blk_list int32 [batch, list_heads, row_tiles, list_len] and blk_count int32
    [batch, list_heads, row_tiles] in device memory, strides in elements."""
    _fields_ = [("kernel", ctypes.c_int), ("list", ctypes.c_void_p), ("count", ctypes.c_void_p),
                ("list_dim", ctypes.c_int64 * 4), ("list_stride", ctypes.c_int64 * 4),
                ("count_dim", ctypes.c_int64 * 3), ("count_stride", ctypes.c_int64 * 3)]


class BlocksArgs(ctypes.Structure):
    """fa_blocks_args: the sizes and run-time inputs of the launches an
    fa_blocks is built for."""
    _fields_ = [("batch", ctypes.c_int64), ("seqlen_q", ctypes.c_int64),
                ("seqlen_k", ctypes.c_int64), ("inputs", ctypes.POINTER(Input)),
                ("num_inputs", ctypes.c_int), ("stream", ctypes.c_void_p)]


_DROPOUT_FIELDS = [("dropout_p", ctypes.c_double), ("seed", ctypes.c_uint64),
                   ("offset", ctypes.c_uint64)]
# the last fields of fa_forward_args, fa_backward_args and fa_decode_args
_INPUT_FIELDS = [("inputs", ctypes.POINTER(Input)), ("num_inputs", ctypes.c_int)]
# after them in fa_forward_args and fa_backward_args: a varlen launch's
# sequences, then the block lists given (an fa_blocks handle)
_VARLEN_FIELDS = [("varlen", ctypes.POINTER(Varlen)), ("blocks", ctypes.c_void_p)]


class ForwardArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor),
                ("lse", ctypes.c_void_p), ("stream", ctypes.c_void_p)] + _DROPOUT_FIELDS + \
        _INPUT_FIELDS + _VARLEN_FIELDS


class BackwardArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor),
                ("lse", ctypes.c_void_p), ("dout", Tensor), ("dq", Tensor), ("dk", Tensor),
                ("dv", Tensor), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t), ("stream", ctypes.c_void_p),
                ("mode", ctypes.c_int)] + _DROPOUT_FIELDS + _INPUT_FIELDS + _VARLEN_FIELDS


class DecodeArgs(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor),
                ("lse", ctypes.c_void_p), ("cache_seqlens", ctypes.c_void_p),
                ("block_table", ctypes.c_void_p), ("max_pages", ctypes.c_int64),
                ("bt_stride", ctypes.c_int64), ("host_cache_seqlens", ctypes.c_void_p),
                ("host_block_table", ctypes.c_void_p), ("max_seqlen", ctypes.c_int64),
                ("nsplit", ctypes.c_int), ("stream", ctypes.c_void_p)] + _INPUT_FIELDS


class JitOptions(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("target", ctypes.c_char_p),
                ("disable_passes", ctypes.c_char_p), ("cache_dir", ctypes.c_char_p),
                ("filename", ctypes.c_char_p), ("stats", ctypes.c_void_p)]


MODES = ["forward", "backward", "decode", "blocks"]
GRIDS = ["q_tiles,heads,batch", "1,heads,batch", "splits,kv_heads,batch",
         "k_tiles,kv_heads,batch", "row_tiles,list_heads,batch",
         "row_tiles*chunks,list_heads,batch"]
ORIENTS = [None, "rows", "cols"]  # fa_blocks_orient
DTYPES = ["f16", "bf16", "f32", "i32"]
MASKS = ["none", "causal", "window", "expr"]
ROLES = ["none", "pre", "main", "kv", "q", "post", "dv"]


def info_dict(k):
    """A KernelInfo as a plain dict (names as the metadata spells them)."""
    return {"kernel": k.kernel.decode(), "mode": MODES[k.mode], "dtype": DTYPES[k.dtype],
            "head_dim": k.head_dim, "v_head_dim": k.v_head_dim, "heads": k.heads,
            "kv_heads": k.kv_heads, "mask": MASKS[k.mask], "scale": k.scale,
            "tile_q": k.tile_q, "tile_kv": k.tile_kv, "threads": k.threads,
            "smem_bytes": k.smem_bytes, "role": ROLES[k.role], "forward": k.forward.decode(),
            "dropout": k.dropout, "dropout_of": k.dropout_of.decode(),
            "dropout_mask": "torch" if k.dropout_torch else "exact",
            "warps": k.warps, "stages": k.stages,
            "grid": GRIDS[k.grid] if 0 <= k.grid < len(GRIDS) else k.grid,
            "workspace_floats_per_row": k.workspace_floats_per_row,
            "target": k.target.decode(), "passes": k.passes.decode(),
            "decode": _decode_dict(k.decode) if k.mode == 2 else None,
            "inputs": [input_tuple(k.inputs[i]) for i in range(k.ninputs)],
            "requires": [r for r, on in (("seqlen_q<=seqlen_k", k.require_q_le_k),
                                         ("seqlen_k<=seqlen_q", k.require_k_le_q)) if on],
            "layout": "varlen" if k.varlen else "padded",
            # block lists: a classifier's (mode blocks) orientation and list_heads,
            # or a visiting kernel's classifier (block_list) and its
            "blocks": ORIENTS[k.blocks] if 0 <= k.blocks < 3 else k.blocks,
            "list_heads": k.list_heads, "block_list": k.block_list.decode(),
            # a two-phase classifier: its classes kernel; a classes kernel: its chunk
            "chunk": k.chunk, "classes": k.classes.decode(),
            # the launch backward_mode "auto" runs (docs/backward.md)
            "backward_auto": {1: "deterministic", 2: "atomic"}.get(k.backward_auto,
                                                                    "deterministic")}


def input_tuple(x):
    """An InputInfo as (name, dtype, dims): dims a tuple of ints (constants)
    and "batch" / "seqlen_q" / "seqlen_k"; () for a scalar."""
    return (x.name.decode(), DTYPES[x.dtype],
            tuple(INPUT_DIMS.get(x.dims[d], x.dims[d]) for d in range(x.rank)))


def _decode_dict(d):
    out = {name: getattr(d, name) for name, _ in DecodeInfo._fields_}
    out["combine_kernel"] = out["combine_kernel"].decode()
    out["wide_kernel"] = out["wide_kernel"].decode()
    out["cache"] = "paged" if d.cache == 1 else "contiguous"
    return out


def _candidates(name):
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = []
    if os.environ.get("FLASHC_LIB_DIR"):
        dirs.append(os.environ["FLASHC_LIB_DIR"])
    dirs.append(here)  # a wheel or an install may put the libraries beside the package
    repo = os.path.normpath(os.path.join(here, "..", ".."))
    for sub in ("build/jit", "build/runtime", "build-gpu", "build-rt"):
        dirs.append(os.path.join(repo, sub))
    return [os.path.join(d, f"lib{name}.so") for d in dirs]


_loaded = {}


def loaded_jit():
    """libflashc_jit when this process has loaded it, else None."""
    return _loaded.get("flashc_jit")


def load_first(names):
    """The first of the libraries `names` that loads (declared); OSError
    naming where each was looked for when none does."""
    errors = []
    for name in names:
        try:
            return load_declared(name)
        except OSError as e:
            errors.append(str(e))
    raise OSError("; ".join(errors))


def load_declared(name):
    """libNAME.so loaded once per process, its C API declared."""
    if name not in _loaded:
        _loaded[name] = declare(load_library(name))
    return _loaded[name]


def parse_module_meta(lib, text):
    """The KernelInfo of every kernel of a module's metadata (fa_meta_parse_module)."""
    infos = (KernelInfo * MODULE_MAX_KERNELS)()
    count = ctypes.c_int()
    err = ctypes.create_string_buffer(4096)
    st = lib.fa_meta_parse_module(text, len(text), infos, ctypes.byref(count), err, len(err))
    if st != FA_OK:
        from .runtime import FlashcError
        raise FlashcError(st, err.value.decode(errors="replace"))
    return [infos[i] for i in range(count.value)]


def load_library(name):
    """libNAME.so: FLASHC_LIB_DIR, beside the package, the repository's build
    folders, then the loader's search path. Raises OSError naming where it looked."""
    tried = []
    for path in _candidates(name):
        if os.path.exists(path):
            return ctypes.CDLL(path)
        tried.append(path)
    found = ctypes.util.find_library(name)
    if found:
        return ctypes.CDLL(found)
    raise OSError(f"lib{name}.so not found (set FLASHC_LIB_DIR; looked in "
                  f"{', '.join(os.path.dirname(t) for t in tried)} and the loader's path)")


def declare(lib):
    """Sets restype/argtypes of the C API functions lib exports (the runtime's
    in both libraries, the compiler's in libflashc_jit)."""
    P, S, I, U64, I64 = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64,
                         ctypes.c_int64)
    KI = ctypes.POINTER(KernelInfo)
    sig = {
        "fa_context_create": (I, [I, ctypes.POINTER(P), ctypes.c_char_p, S]),
        "fa_context_destroy": (None, [P]),
        "fa_context_errmsg": (ctypes.c_char_p, [P]),
        "fa_module_load_ptx": (I, [P, ctypes.c_char_p, S, ctypes.POINTER(P)]),
        "fa_module_load_cubin": (I, [P, ctypes.c_char_p, S, ctypes.c_char_p, S,
                                     ctypes.POINTER(P)]),
        "fa_module_destroy": (None, [P]),
        "fa_module_errmsg": (ctypes.c_char_p, [P]),
        "fa_module_info": (KI, [P]),
        "fa_module_kernel_count": (I, [P]),
        "fa_module_kernel_info": (KI, [P, I]),
        "fa_meta_parse": (I, [ctypes.c_char_p, S, KI, ctypes.c_char_p, S]),
        "fa_forward_check": (I, [KI, ctypes.POINTER(ForwardArgs), ctypes.c_char_p, S]),
        "fa_forward_params": (I, [KI, ctypes.POINTER(ForwardArgs), U64, U64, P,
                                  ctypes.POINTER(I)]),
        "fa_forward": (I, [P, ctypes.POINTER(ForwardArgs)]),
        "fa_backward_workspace_size": (I, [KI, I64, I64, I64, I, ctypes.POINTER(S)]),
        "fa_backward_check": (I, [KI, ctypes.POINTER(BackwardArgs), ctypes.c_char_p, S]),
        "fa_backward": (I, [P, ctypes.POINTER(BackwardArgs)]),
        "fa_decode_check": (I, [KI, ctypes.POINTER(DecodeArgs), ctypes.c_char_p, S]),
        "fa_decode": (I, [P, ctypes.POINTER(DecodeArgs)]),
        "fa_decode_last_nsplit": (I, [P]),
        "fa_decode_last_kernel": (ctypes.c_char_p, [P]),
        "fa_dropout_mask": (I, [KI, ctypes.c_double, U64, U64, I64, I64, I64, P]),
        "fa_block_lists_shape": (I, [KI, I64, I64, I64, ctypes.POINTER(BlockLists)]),
        "fa_blocks_check": (I, [KI, ctypes.POINTER(BlocksArgs), ctypes.c_char_p, S]),
        "fa_blocks_params": (I, [KI, ctypes.POINTER(BlocksArgs), ctypes.POINTER(BlockLists), P,
                                 ctypes.POINTER(I)]),
        "fa_blocks_create": (I, [P, ctypes.POINTER(BlocksArgs), ctypes.POINTER(P)]),
        "fa_blocks_destroy": (None, [P]),
        "fa_blocks_count": (I, [P]),
        "fa_blocks_lists": (I, [P, I, ctypes.POINTER(BlockLists)]),
        "fa_status_string": (ctypes.c_char_p, [I]),
        "fa_meta_parse_module": (I, [ctypes.c_char_p, S, ctypes.POINTER(KernelInfo),
                                     ctypes.POINTER(I), ctypes.c_char_p, S]),
        "fa_jit_options_init": (None, [ctypes.POINTER(JitOptions)]),
        "fa_jit_compile": (I, [ctypes.c_char_p, S, ctypes.POINTER(JitOptions),
                               ctypes.POINTER(P), ctypes.POINTER(S), ctypes.c_char_p, S]),
        "fa_jit_free": (None, [P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = res, args
    return lib
