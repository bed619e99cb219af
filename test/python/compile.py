"""test/python/compile.test: the Python package (python/flashc) compiles a
spec through libflashc_jit.so and raises the C compiler's diagnostics;
its ctypes struct sizes equal the C headers' (argv[1]: the C sizes)."""
import ctypes
import sys

import flashc
from flashc import _capi

c_sizes = dict(kv.split("=") for kv in sys.argv[1].split(","))
for name, cls in (("fa_kernel_info", _capi.KernelInfo), ("fa_decode_info", _capi.DecodeInfo),
                  ("fa_jit_options", _capi.JitOptions), ("fa_tensor", _capi.Tensor),
                  ("fa_forward_args", _capi.ForwardArgs), ("fa_backward_args", _capi.BackwardArgs),
                  ("fa_decode_args", _capi.DecodeArgs), ("fa_input_info", _capi.InputInfo),
                  ("fa_input", _capi.Input), ("fa_varlen", _capi.Varlen),
                  ("fa_block_lists", _capi.BlockLists), ("fa_blocks_args", _capi.BlocksArgs)):
    py = ctypes.sizeof(cls)
    print(f"{name}: C {c_sizes[name]} ctypes {py} {'same' if int(c_sizes[name]) == py else 'DIFFER'}")
structs = {"fa_kernel_info": _capi.KernelInfo, "fa_input": _capi.Input,
           "fa_forward_args": _capi.ForwardArgs, "fa_backward_args": _capi.BackwardArgs,
           "fa_decode_args": _capi.DecodeArgs, "fa_varlen": _capi.Varlen,
           "fa_block_lists": _capi.BlockLists, "fa_blocks_args": _capi.BlocksArgs}
offsets = [k for k in c_sizes if "." in k]
differ = [k for k in offsets
          if getattr(structs[k.split(".")[0]], k.split(".")[1]).offset != int(c_sizes[k])]
print(f"offsets of the input, varlen and block-list fields: {len(offsets)} checked, "
      f"{differ or 'all same'}")

m = flashc.compile("attention a { dtype = bf16; head_dim = 64; heads = 8; kv_heads = 2; "
                   "mask = causal; dropout = 0.1; dropout_mask = torch; grad = true; }",
                   cache_dir="")
print(m)
for k in m.kernels:
    print(k["kernel"], k["mode"], k["role"], k["dtype"], k["heads"], k["kv_heads"], k["mask"],
          k["dropout"], k["dropout_of"] or "-", k["dropout_mask"])
print("ptx", "ok" if ".visible .entry a_dropout(" in m.ptx else "MISSING")
for bad, kw in (("attention a { dtype = bf16; head_dim = 63; heads = 8; }", {}),
                ("attention a { dtype = bf16; head_dim = 64; heads = 8; }", {"target": "sm_70"}),
                ("attention a { dtype = bf16; head_dim = 64; heads = 8; }", {"kernel": "b"})):
    try:
        flashc.compile(bad, cache_dir="", **kw)
        print("no error")
    except flashc.CompileError as e:
        print("CompileError", e.status)
        print(e)
    except flashc.FlashcError as e:
        print("FlashcError", e)
