"""Direct CUDA-driver launches of a flashc module's kernels (ctypes), for torch tensors.

Used by test/gpu/backward.py (the backward suite) and bench/bench_bwd.py (the
backward benchmark); the one copy of the launcher, so that both exercise the
ABI as docs/abi.md and docs/backward.md write it, not through the runtime.

    drv = Driver()
    K = Kernels(drv, "NAME.ptx", "NAME")      # the forward NAME and NAME_bwd_*
    K.forward(q, k, v, o, lse, b, sq, sk)     # launches now
    K.backward((q, k, v, o, lse, do, dq, dk, dv, delta, dq_acc), b, sq, sk, deterministic)
    go = K.backward_launch(t, b, sq, sk, deterministic)   # parameters built once;
    go()                                                  # go() only launches (timing)

Tensors are [batch, seqlen, heads, head_dim] (any strides along those);
lse and delta f32 [batch, heads, seqlen_q], dq_acc f32 [batch, seqlen_q,
heads, head_dim], contiguous. Launches go on torch's current stream.
"""
import ctypes

import torch


class Driver:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # the primary context, current

    def check(self, rc, what):
        if rc != 0:
            s = ctypes.c_char_p()
            self.cu.cuGetErrorString(rc, ctypes.byref(s))
            raise RuntimeError(f"{what}: CUDA error {rc} {s.value.decode() if s.value else ''}")

    def load(self, path):
        data = open(path, "rb").read() + b"\0"
        mod = ctypes.c_void_p()
        self.check(self.cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(data)), "load " + path)
        return mod, parse_meta(data.decode())

    def unload(self, mod):
        self.check(self.cu.cuModuleUnload(mod), "unload")

    def function(self, mod, name, meta):
        fn = ctypes.c_void_p()
        self.check(self.cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), name)
        smem = meta["smem_bytes"]
        if smem > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
            self.check(self.cu.cuFuncSetAttribute(fn, 8, smem), name + " smem")
        return fn

    def prepare(self, fn, grid, meta, params):
        """A launch with its parameter array built once: calling it launches."""
        holders = list(params)
        ptrs = (ctypes.c_void_p * len(holders))(
            *[h.addr if isinstance(h, TensorMap) else ctypes.cast(ctypes.pointer(h), ctypes.c_void_p)
              for h in holders])
        cu, check = self.cu, self.check
        gx, gy, gz = grid
        threads, smem = meta["threads"], meta["smem_bytes"]

        def go():
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            check(cu.cuLaunchKernel(fn, gx, gy, gz, threads, 1, 1, smem, stream, ptrs, None),
                  "launch")
        go.holders = holders  # the parameter values live as long as the launch
        return go

    def launch(self, fn, grid, meta, params):
        self.prepare(fn, grid, meta, params)()

    def tensor_map(self, t, rows):
        """The CUtensorMap of Q, K or V (t: [b, s, h, d], 2-byte elements) as a
        kernel with metadata `tma q|k|v ROWS` takes it, or of the backward's
        dq_acc (f32, `tma dq_acc ROWS`) (docs/abi.md "Tensor maps"): 4-d,
        innermost first, boxes of 128 bytes of columns (64, f32: 32) x rows,
        the 128-byte swizzle, out-of-range rows read as zeros (a reduction
        drops them)."""
        m = TensorMap()
        if t.numel() == 0:
            return m  # never read: the kernel's K/V loop has no step
        b, s, h, d = t.shape
        dims = (ctypes.c_uint64 * 4)(d, s, h, b)
        st = t.stride()
        es = t.element_size()
        strides = (ctypes.c_uint64 * 3)(*[16 if n == 1 else x * es
                                          for n, x in ((s, st[1]), (h, st[2]), (b, st[0]))])
        box = (ctypes.c_uint32 * 4)(128 // es, rows, 1, 1)
        one = (ctypes.c_uint32 * 4)(1, 1, 1, 1)
        # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 / FLOAT16 / FLOAT32
        dtype = {torch.bfloat16: 9, torch.float16: 6, torch.float32: 7}[t.dtype]
        enc = self.cu.cuTensorMapEncodeTiled
        enc.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        # interleave none, swizzle 128B (3), L2 promotion 256B (3), OOB fill zeros
        self.check(enc(m.addr, dtype, 4, t.data_ptr(), dims, strides, box, one, 0, 3, 3, 0),
                   "cuTensorMapEncodeTiled")
        return m


class TensorMap:
    """A 128-byte CUtensorMap in a 64-byte aligned host buffer (addr), passed
    by value as a kernel parameter."""
    def __init__(self):
        self.buf = ctypes.create_string_buffer(128 + 64)
        self.addr = (ctypes.addressof(self.buf) + 63) & ~63


def parse_meta(text):
    """kernel name -> its metadata dict (every `// flashc.meta` block)."""
    out, cur = {}, None
    for line in text.splitlines():
        if not line.startswith("// flashc.meta "):
            continue
        key, _, val = line[len("// flashc.meta "):].partition(" ")
        if key == "kernel":
            cur = out.setdefault(val, {"kernel": val})
        elif cur is not None and key == "tma":  # one line per tensor map: [("k", rows), ...]
            t, _, rows = val.partition(" ")
            cur.setdefault("tma", []).append((t, int(rows)))
        elif cur is not None:
            cur[key] = int(val) if val.lstrip("-").isdigit() else val
    return out


# ---- parameters (docs/abi.md, docs/backward.md) -----------------------------

def ptr(t):
    return ctypes.c_uint64(t.data_ptr() if t is not None else 0)


def strides(t):
    s = t.stride()  # [b, s, h, d]
    return [ctypes.c_int64(s[0]), ctypes.c_int64(s[1]), ctypes.c_int64(s[2])]


def sizes(b, sq, sk):
    return [ctypes.c_int32(b), ctypes.c_int32(sq), ctypes.c_int32(sk)]


def cdiv(a, b):
    return (a + b - 1) // b


def sequence(launches):
    def go():
        for f in launches:
            f()
    go.launches = launches
    return go


class Kernels:
    def __init__(self, drv, path, name):
        self.drv = drv
        self.mod, self.meta = drv.load(path)
        self.name = name
        self.fn = {k: drv.function(self.mod, k, m) for k, m in self.meta.items()}

    def close(self):
        if self.mod is not None:
            self.drv.unload(self.mod)
            self.mod = None

    def prepare(self, suffix, grid_kind, b, sq, sk, params):
        kname = self.name + suffix
        m = self.meta[kname]
        heads, kvh = m["heads"], m["kv_heads"]
        if grid_kind == "k":
            grid = (max(1, cdiv(sk, m["tile_kv"])), kvh, b)
        elif m.get("grid") == "persistent":  # one block an SM walks the tiles (docs/abi.md)
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            grid = (max(1, min(sms, cdiv(sq, m["tile_q"]) * heads * b)), 1, 1)
        else:
            grid = (max(1, cdiv(sq, m["tile_q"])), heads, b)
        return self.drv.prepare(self.fn[kname], grid, m, params)

    def run(self, suffix, grid_kind, b, sq, sk, params):
        self.prepare(suffix, grid_kind, b, sq, sk, params)()

    def forward_launch(self, q, k, v, o, lse, b, sq, sk):
        ws = None
        p = [ptr(q), ptr(k), ptr(v), ptr(o), ptr(lse), ptr(ws)] + sizes(b, sq, sk) + \
            strides(q) + strides(k) + strides(v) + strides(o)
        for t, rows in self.meta[self.name].get("tma", []):  # the maps come last
            p.append(self.drv.tensor_map({"q": q, "k": k, "v": v}[t], rows))
        return self.prepare("", "q", b, sq, sk, p)

    def forward(self, q, k, v, o, lse, b, sq, sk):
        self.forward_launch(q, k, v, o, lse, b, sq, sk)()

    def backward_launch(self, t, b, sq, sk, deterministic):
        """The atomic launch (dq_acc zeroed, pre, bwd, post) or the
        deterministic one (pre, bwd_kv, bwd_q), parameters built once."""
        q, k, v, o, lse, do, dq, dk, dv, delta, dq_acc = t
        steps = [self.prepare("_bwd_pre", "q", b, sq, sk, [ptr(o), ptr(do), ptr(delta)] +
                              sizes(b, sq, sk) + strides(o) + strides(do))]
        main = [ptr(q), ptr(k), ptr(v), ptr(do), ptr(lse), ptr(delta),
                ptr(None if deterministic else dq_acc), ptr(dk), ptr(dv)] + sizes(b, sq, sk) + \
            strides(q) + strides(k) + strides(v) + strides(do) + strides(dk) + strides(dv)
        # bwd_dv (split-dkdv: dV in a kernel of its own) takes bwd_kv's list
        dv_main = main[:6] + [ptr(None)] + main[7:]
        has_dv = (self.name + "_bwd_dv") in self.meta
        if deterministic:
            steps.append(self.prepare("_bwd_kv", "k", b, sq, sk, main))
            if has_dv:
                steps.append(self.prepare("_bwd_dv", "k", b, sq, sk, dv_main))
            steps.append(self.prepare("_bwd_q", "q", b, sq, sk,
                                      [ptr(q), ptr(k), ptr(v), ptr(do), ptr(lse), ptr(delta), ptr(dq)] +
                                      sizes(b, sq, sk) + strides(q) + strides(k) + strides(v) +
                                      strides(do) + strides(dq)))
        else:
            steps.insert(0, dq_acc.zero_)  # the runtime's memset, before pre
            maps = [self.drv.tensor_map(dq_acc, rows)  # the map of its TMA reductions, last
                    for t_, rows in self.meta[self.name + "_bwd"].get("tma", []) if t_ == "dq_acc"]
            steps.append(self.prepare("_bwd", "k", b, sq, sk, main + maps))
            if has_dv:
                steps.append(self.prepare("_bwd_dv", "k", b, sq, sk, dv_main))
            steps.append(self.prepare("_bwd_post", "q", b, sq, sk, [ptr(dq_acc), ptr(dq)] +
                                      sizes(b, sq, sk) + strides(dq)))
        go = sequence(steps)
        go.tensors = t  # alive as long as the launch
        return go

    def backward(self, t, b, sq, sk, deterministic):
        self.backward_launch(t, b, sq, sk, deterministic)()
