"""The decode tests' module: flashc_rt.Module loaded from a path, with the
package's decode launch (python/flashc/runtime.py).

    mod = DecodeModule(flashc_rt.Runtime(lib).context(0), "kernel.ptx")
    mod.info["decode"]["cache"], mod.info["decode"]["page_size"]
    mod.decode(q, k, v, o, cache_seqlens, block_table=None, lse=None,
               host_seqlens=None, host_block_table=None, nsplit=0, inputs=None)

Tensors are torch tensors: q [b, q_len, heads, d], k/v contiguous [b, capacity,
kv_heads, d] or paged [num_pages, page_size, kv_heads, d], o like q (v dims);
cache_seqlens int32 [b] and block_table int32 [b, max_pages] on the GPU; the
host copies (CPU int32 tensors) make the runtime validate lengths and table.
inputs: the kernel's run-time inputs, a dict name -> tensor or number as for
forward (their dims batch and seqlen_q = q_len; LoadedModule.decode binds them).
decode() returns (status name, message) and raises unless check=False.
"""
import flashc_rt


class DecodeModule(flashc_rt.Module):
    def __init__(self, ctx, path):
        with open(path, "rb") as f:
            super().__init__(ctx, f.read())
