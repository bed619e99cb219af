"""flashc kernels as PyTorch operators (torch.library), with autograd.

    out = flashc.attention(q, k, v, module, layout="bshd", dropout_p=0.0, inputs=None)
    out = flashc.attention(q, k, v, module, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)  # varlen

Three operators, defined once per process when this module is imported:

    flashc::fwd(q, k, v, module, dropout_p, bwd_mode=0, input_names=None,
                input_tensors=None, scalar_names=None, scalar_values=[],
                cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                max_seqlen_k=0, blocks=0) -> (out, lse, rng)
    flashc::bwd(dout, q, k, v, out, lse, rng, module, dropout_p, mode, input_names=None,
                input_tensors=None, scalar_names=None, scalar_values=[],
                cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                max_seqlen_k=0, blocks=0) -> (dq, dk, dv)
    flashc::decode(q, k_cache, v_cache, cache_seqlens, block_table?, module, nsplit,
                   input_names=None, input_tensors=None, scalar_names=None,
                   scalar_values=[]) -> (out, lse)

Tensors are in the runtime's order [batch, seqlen, heads, head_dim];
attention(layout="bhsd") takes and returns SDPA's [batch, heads, seqlen,
head_dim] through transposed views (no copy). `module` is a Module's id (the
ops cannot take a Python object); the fake (meta) implementations read the
shapes from its metadata, so the ops trace under torch.compile without graph
breaks. fwd saves LSE and the dropout state for bwd (register_autograd);
its bwd_mode (fa_backward_mode) is only what its backward will use.

Run-time inputs (docs/abi.md, Module.inputs) travel as two pairs of lists,
tensors by name and scalars by name (an operator cannot take a dict; a
schema's str and Tensor lists take no [] default, hence None);
attention(inputs={...}) splits the dict (_split_inputs; decode takes the
same lists, its inputs' dims batch and q_len). fwd saves them for bwd, which gets
the same values. They get no gradient: a learned bias's is not computed
(the op's backward returns None for each).

Variable-length batches (a module of a `varlen = true` spec; docs/abi.md
"Variable-length batches", FlashAttention's flash_attn_varlen_func): q [total_q,
heads, head_dim], k, v [total_k, kv_heads, d], cu_seqlens_q / cu_seqlens_k
int32 [num_seqs + 1] on q's device, max_seqlen_q / max_seqlen_k ints (0 in the
ops, None in attention: computed by the launch from a host copy of the prefix
sums, which then also spares the runtime its own read of them). out is
[total_q, heads, v_head_dim], lse [heads, total_q], the gradients packed like
q, k, v; fwd saves the prefix sums for bwd. The fakes read the shapes alone,
so a varlen op traces under torch.compile like a padded one.

Block lists (a module whose mask reads run-time tensors has classifier
kernels; docs/abi.md "Block lists"): without `blocks`, each launch builds the
lists it needs; attention(blocks=flashc.blocks(...)) reuses lists built once,
passed to the ops as the Blocks' id (0: none; like `module`, an op cannot take
the object). fwd's autograd keeps the Blocks alive and gives the same id to
bwd, so the backward of that forward reuses them too.

Dropout draws (seed, offset) from torch's CUDA generator of q's device as
SDPA's flash backend does (seed = initial_seed, offset advanced by
batch * heads * 32), so a spec with `dropout_mask = torch` reproduces SDPA's
mask for the same generator state; rng = int64 [seed, offset] on the CPU.
fwd is tagged nondeterministic_seeded: compilers neither fold nor merge it.
"""
import torch

from . import runtime

__all__ = ["attention", "fwd", "bwd", "decode"]

_lib = torch.library.Library("flashc", "DEF")
_TAGS = (torch.Tag.nondeterministic_seeded,)
_INPUTS = ("str[]? input_names=None, Tensor[]? input_tensors=None, str[]? scalar_names=None, "
           "float[] scalar_values=[]")
_VARLEN = ("Tensor? cu_seqlens_q=None, Tensor? cu_seqlens_k=None, int max_seqlen_q=0, "
           "int max_seqlen_k=0, int blocks=0")
_lib.define("fwd(Tensor q, Tensor k, Tensor v, int module, float dropout_p, int bwd_mode=0, "
            f"{_INPUTS}, {_VARLEN}) -> (Tensor out, Tensor lse, Tensor rng)", tags=_TAGS)
_lib.define("bwd(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor rng, "
            f"int module, float dropout_p, int mode, {_INPUTS}, {_VARLEN}) "
            "-> (Tensor dq, Tensor dk, Tensor dv)")
_lib.define("decode(Tensor q, Tensor k_cache, Tensor v_cache, Tensor cache_seqlens, "
            f"Tensor? block_table, int module, int nsplit, {_INPUTS}) "
            "-> (Tensor out, Tensor lse)")

_U64 = 1 << 64


def _module(module_id):
    m = runtime._modules.get(module_id)
    if m is None:
        raise ValueError(f"flashc: no module with id {module_id} in this process")
    return m


def _out_shapes(q, m):
    """out [b, sq, heads, v_head_dim] and lse [b, heads, sq] (q's sizes, the
    kernel's v_head_dim); a varlen launch's q [total_q, heads, d]: out
    [total_q, heads, v_head_dim], lse [heads, total_q]. The C runtime checks
    the rest at launch."""
    if q.dim() == 3:
        total, h = q.shape[0], q.shape[1]
        return (total, h, m.info["v_head_dim"]), (h, total)
    b, sq, h = q.shape[0], q.shape[1], q.shape[2]
    return (b, sq, h, m.info["v_head_dim"]), (b, h, sq)


def _blocks(blocks_id):
    """The Blocks an op's blocks id names (0: None)."""
    if not blocks_id:
        return None
    b = runtime._blocks_by_id.get(blocks_id)
    if b is None:
        raise ValueError(f"flashc: no Blocks with id {blocks_id} in this process (closed or "
                         "collected: keep it alive while launches use it)")
    return b


def _varlen(q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """The ops' varlen arguments as the launches' VarlenBatch (None for a
    padded launch); a max_seqlen of 0 is computed from the prefix sums."""
    if cu_seqlens_q is None and cu_seqlens_k is None:
        return None
    return runtime._varlen_of(q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q or None,
                              max_seqlen_k or None)


def _draw_rng(q, dropout_p, varlen=None):
    """(seed, offset) from the CUDA generator of q's device, advanced as
    SDPA's flash backend advances it (batch x heads x 32; a varlen launch's
    batch is its sequences); (0, 0) without dropout."""
    if dropout_p == 0.0:
        return 0, 0
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("flashc: dropout under CUDA graph capture is not supported (the "
                           "generator offset would be frozen into the graph)")
    gen = torch.cuda.default_generators[q.device.index if q.device.index is not None
                                        else torch.cuda.current_device()]
    seed, offset = gen.initial_seed(), gen.get_offset()
    batch, heads = (varlen.num_seqs, q.shape[1]) if varlen is not None else (q.shape[0], q.shape[2])
    gen.set_offset(offset + batch * heads * 32)
    return seed, offset


def _inputs(input_names, input_tensors, scalar_names, scalar_values):
    """The ops' four lists (None: empty) as the dict the launches take (None
    for none)."""
    input_names, input_tensors, scalar_names, scalar_values = (
        list(x or ()) for x in (input_names, input_tensors, scalar_names, scalar_values))
    if len(input_names) != len(input_tensors) or len(scalar_names) != len(scalar_values):
        raise ValueError(f"flashc: {len(input_names)} input names for {len(input_tensors)} "
                         f"tensors, {len(scalar_names)} scalar names for {len(scalar_values)} "
                         "values")
    d = dict(zip(input_names, input_tensors))
    for name, value in zip(scalar_names, scalar_values):
        if name in d:
            raise ValueError(f"flashc: input '{name}' is given as a tensor and as a scalar")
        d[name] = value
    if len(d) != len(input_names) + len(scalar_names):
        raise ValueError(f"flashc: an input name is given twice: {input_names + scalar_names}")
    return d or None


def _fwd_cuda(q, k, v, module, dropout_p, bwd_mode=0, input_names=None, input_tensors=None,
              scalar_names=None, scalar_values=(), cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen_q=0, max_seqlen_k=0, blocks=0):
    m = _module(module)
    inputs = _inputs(input_names, input_tensors, scalar_names, scalar_values)
    varlen = _varlen(q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    out_shape, lse_shape = _out_shapes(q, m)
    out = q.new_empty(out_shape)
    lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device)
    seed, offset = _draw_rng(q, dropout_p, varlen)
    m.on(q).forward(q, k, v, out, lse, dropout_p=dropout_p, seed=seed, offset=offset,
                    inputs=inputs, varlen=varlen, blocks=_blocks(blocks))
    # int64 holds the u64 seed's bits
    rng = torch.tensor([seed - _U64 if seed >= 1 << 63 else seed, offset], dtype=torch.int64)
    return out, lse, rng


_lib.impl("fwd", _fwd_cuda, "CUDA")


@torch.library.register_fake("flashc::fwd")
def _fwd_fake(q, k, v, module, dropout_p, bwd_mode=0, input_names=None, input_tensors=None,
              scalar_names=None, scalar_values=(), cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen_q=0, max_seqlen_k=0, blocks=0):
    m = _module(module)
    out_shape, lse_shape = _out_shapes(q, m)
    return (q.new_empty(out_shape), q.new_empty(lse_shape, dtype=torch.float32),
            torch.empty(2, dtype=torch.int64, device="cpu"))


def _bwd_cuda(dout, q, k, v, out, lse, rng, module, dropout_p, mode, input_names=None,
              input_tensors=None, scalar_names=None, scalar_values=(), cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, blocks=0):
    m = _module(module)
    inputs = _inputs(input_names, input_tensors, scalar_names, scalar_values)
    # autograd may hand a broadcast or strided gradient (e.g. of out.sum()):
    # the kernels need the last dim contiguous and 16-byte rows
    if dout.stride(-1) != 1 or any(s % 8 for s in dout.stride()[:-1]) or dout.data_ptr() % 16:
        dout = dout.contiguous()
    seed, offset = (int(x) for x in rng.tolist())
    dq, dk, dv = m.backward(dout, q, k, v, out, lse, mode=mode, dropout_p=dropout_p,
                            seed=seed % _U64, offset=offset, inputs=inputs,
                            cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                            max_seqlen_q=max_seqlen_q or None, max_seqlen_k=max_seqlen_k or None,
                            blocks=_blocks(blocks))
    return dq, dk, dv


_lib.impl("bwd", _bwd_cuda, "CUDA")


@torch.library.register_fake("flashc::bwd")
def _bwd_fake(dout, q, k, v, out, lse, rng, module, dropout_p, mode, input_names=None,
              input_tensors=None, scalar_names=None, scalar_values=(), cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, blocks=0):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _decode_cuda(q, k_cache, v_cache, cache_seqlens, block_table, module, nsplit,
                 input_names=None, input_tensors=None, scalar_names=None, scalar_values=()):
    m = _module(module)
    inputs = _inputs(input_names, input_tensors, scalar_names, scalar_values)
    return m.decode(q, k_cache, v_cache, cache_seqlens, block_table, nsplit=nsplit,
                    return_lse=True, inputs=inputs)


_lib.impl("decode", _decode_cuda, "CUDA")


@torch.library.register_fake("flashc::decode")
def _decode_fake(q, k_cache, v_cache, cache_seqlens, block_table, module, nsplit,
                 input_names=None, input_tensors=None, scalar_names=None, scalar_values=()):
    out_shape, lse_shape = _out_shapes(q, _module(module))
    return q.new_empty(out_shape), q.new_empty(lse_shape, dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    # all fifteen arguments: torch fills in the defaults the call left out
    q, k, v, module, dropout_p, bwd_mode = inputs[:6]
    input_names, input_tensors, scalar_names, scalar_values = inputs[6:10]
    cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, blocks = inputs[10:15]
    out, lse, rng = output
    # the varlen launch's prefix sums after the run-time inputs' tensors
    cu = tuple(t for t in (cu_seqlens_q, cu_seqlens_k) if t is not None)
    ctx.save_for_backward(q, k, v, out, lse, rng, *(input_tensors or ()), *cu)
    ctx.module, ctx.dropout_p, ctx.mode = module, dropout_p, bwd_mode
    ctx.input_names, ctx.scalar_names = input_names, scalar_names
    ctx.scalar_values = list(scalar_values)
    ctx.ncu, ctx.max_seqlen_q, ctx.max_seqlen_k = len(cu), max_seqlen_q, max_seqlen_k
    # the forward's Blocks serve its backward: held here until then
    ctx.blocks, ctx.blocks_obj = blocks, _blocks(blocks)
    ctx.mark_non_differentiable(lse, rng)


def _backward(ctx, dout, dlse, drng):
    q, k, v, out, lse, rng, *rest = ctx.saved_tensors
    split = len(rest) - ctx.ncu
    input_tensors, cu = rest[:split], rest[split:]
    # both prefix sums or neither: a launch with one is refused before it saves
    varlen = dict(zip(("cu_seqlens_q", "cu_seqlens_k"), cu))
    if varlen:
        varlen.update(max_seqlen_q=ctx.max_seqlen_q, max_seqlen_k=ctx.max_seqlen_k)
    if ctx.blocks:
        varlen["blocks"] = ctx.blocks
    dq, dk, dv = torch.ops.flashc.bwd(dout, q, k, v, out, lse, rng, ctx.module, ctx.dropout_p,
                                      ctx.mode, ctx.input_names, input_tensors, ctx.scalar_names,
                                      ctx.scalar_values, **varlen)
    # module, dropout_p, bwd_mode, the run-time inputs, the varlen
    # arguments and blocks get no gradient (a learned bias's is not computed). One per argument the call passed, in
    # its structure: needs_input_grad has that shape, a list where autograd
    # sees one (a list of tensors, and an empty list of anything); the
    # dispatcher drops trailing arguments equal to their defaults, so it may
    # be 5 long.
    need = ctx.needs_input_grad
    return (dq, dk, dv) + tuple([None] * len(n) if isinstance(n, (list, tuple)) else None
                                for n in need[3:])


torch.library.register_autograd("flashc::fwd", _backward, setup_context=_setup_context)


fwd = torch.ops.flashc.fwd
bwd = torch.ops.flashc.bwd
decode = torch.ops.flashc.decode


def _split_inputs(inputs):
    """attention's inputs dict as fwd's four lists: tensors (0-d ones are
    scalars: their value) and numbers, each by name (None for no name)."""
    names, tensors, scalar_names, values = [], [], [], []
    for name, value in (inputs or {}).items():
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            names.append(name)
            tensors.append(value)
        elif isinstance(value, (int, float, torch.Tensor)):
            scalar_names.append(name)
            values.append(float(value))
        else:
            raise TypeError(f"flashc: input '{name}' must be a tensor or a number, got "
                            f"{type(value).__name__}")
    return names or None, tensors or None, scalar_names or None, values


def _varlen_kwargs(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, layout):
    """attention's varlen arguments as fwd's keywords ({} for a padded
    launch: the op as without them); refuses what cannot go together."""
    if cu_seqlens_q is None and cu_seqlens_k is None:
        if max_seqlen_q is not None or max_seqlen_k is not None:
            raise ValueError("flashc: max_seqlen_q / max_seqlen_k go with cu_seqlens_q and "
                             "cu_seqlens_k (a varlen launch)")
        return {}
    if cu_seqlens_q is None or cu_seqlens_k is None:
        raise ValueError("flashc: a varlen launch takes both cu_seqlens_q and cu_seqlens_k")
    if layout != "bshd":
        raise ValueError(f"flashc: a varlen launch's tensors are packed [total, heads, "
                         f"head_dim]: layout must be 'bshd', got {layout!r}")
    for name, m in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise ValueError(f"flashc: {name} must be a positive int or None, got {m!r}")
    return {"cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k,
            "max_seqlen_q": max_seqlen_q or 0, "max_seqlen_k": max_seqlen_k or 0}


def attention(q, k, v, module, *, layout="bshd", dropout_p=0.0, backward_mode="auto",
              return_lse=False, inputs=None, cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen_q=None, max_seqlen_k=None, blocks=None):
    """Attention of q, k, v through `module` (a flashc.Module compiled from a
    spec; its heads, kv_heads, head dims, dtype, mask, score modifier and
    scale), differentiable when the module has `grad = true`.
    layout: "bshd" ([batch, seqlen, heads, head_dim], FlashAttention's and
    the runtime's) or "bhsd" (SDPA's); GQA takes k, v with kv_heads heads
    (no repeat). dropout_p: 0, or p in (0, 1) for a module with `dropout`
    (pass 0 in eval). backward_mode: "auto" (the launch the module's
    metadata names, module.info["backward_auto"]; "deterministic" while
    torch.use_deterministic_algorithms is on), "deterministic" (reruns
    bitwise equal) or "atomic".
    inputs: the module's run-time inputs (module.inputs), a dict name ->
    tensor on q's device (as declared, whatever the layout) or number; they
    get no gradient. Returns out in the layout given (and lse float32
    [batch, heads, seqlen_q] with return_lse).
    Varlen (a module compiled with `varlen = true`; FlashAttention's
    flash_attn_varlen_func): q [total_q, heads, head_dim], k, v [total_k,
    kv_heads, d] with cu_seqlens_q, cu_seqlens_k (int32 [num_seqs + 1] on
    q's device, the prefix sums of the lengths) and max_seqlen_q,
    max_seqlen_k (ints; None: computed at the launch from a host copy of the
    prefix sums); layout "bshd", no dropout. out is [total_q, heads,
    v_head_dim] (lse [heads, total_q]); the gradients are packed like q, k, v.
    blocks: the module's block lists for these sizes and inputs, built once
    (flashc.blocks / Module.blocks; docs/abi.md "Block lists"), reused by
    this launch and its backward; None: each launch builds the lists its
    kernels visit."""
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"flashc: layout must be 'bshd' or 'bhsd', got {layout!r}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"flashc: dropout_p must be in [0, 1), got {dropout_p}")
    varlen = _varlen_kwargs(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, layout)
    rank = 3 if varlen else 4
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != rank:
            shape = "3-D [total, heads, head_dim] (varlen)" if varlen else f"4-D ({layout})"
            raise ValueError(f"flashc: {name} must be {shape}, got shape {tuple(t.shape)}")
    if layout == "bhsd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    extra = _split_inputs(inputs) if inputs else ()  # none: the op as without inputs
    if blocks is not None:
        if not isinstance(blocks, runtime.Blocks):
            raise TypeError(f"flashc: blocks must be a flashc Blocks (flashc.blocks), got "
                            f"{type(blocks).__name__}")
        varlen = dict(varlen, blocks=blocks.id)
    if backward_mode not in runtime.BACKWARD_MODES:
        raise ValueError(f"flashc: backward_mode must be one of "
                         f"{', '.join(runtime.BACKWARD_MODES)}, got {backward_mode!r}")
    if backward_mode == "auto" and torch.are_deterministic_algorithms_enabled():
        backward_mode = "deterministic"
    out, lse, _ = fwd(q, k, v, module.id, float(dropout_p), runtime.BACKWARD_MODES[backward_mode],
                      *extra, **varlen)
    if layout == "bhsd":
        out = out.transpose(1, 2)
    return (out, lse) if return_lse else out
