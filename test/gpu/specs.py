"""The math of every kernel the GPU suite checks, and the launches it tries.

Each entry matches test/gpu/specs/NAME.fa (one kernel per file; the PTX is
NAME.ptx): the reference must compute what the spec says, so the spec's
scale, score modifier and mask are written here again as torch ops.
`naive_attention` and the `naive_bug_*` negative controls have no .fa: they
are the CUDA test fixture's own specs (test/gpu/fixtures).

Masks are bottom-right aligned (as FlashAttention's): with q' = q + sk - sq,
causal keeps k <= q'; window(L) keeps q' - L < k <= q'.

cases: (batch, seqlen_q, seqlen_k, layout) where layout is
  contig  separate contiguous [b, s, h, d] tensors
  packed  q, k, v slices of one [b, s, heads + 2 kv_heads, d] tensor (needs
          seqlen_q == seqlen_k and head_dim == v_head_dim); O padded by 8
  bhsd    every tensor a transposed view of [b, h, s, d] memory
Seqlens cover 1, 17, 113, 203, 1023, 1025, 4096, seqlen_q != seqlen_k both
ways; seqlen_q > seqlen_k with a causal mask gives fully masked top rows.
"""
import math


def causal(q, k, sq, sk):
    return k <= q + (sk - sq)


def window(length):
    def keep(q, k, sq, sk):
        qa = q + (sk - sq)
        return (k <= qa) & (k > qa - length)
    return keep


def documents(bounds):
    """Packed documents split at `bounds` (raw q, k positions), causal within each."""
    def keep(q, k, sq, sk):
        dq = sum((q >= b).long() for b in bounds)
        dk = sum((k >= b).long() for b in bounds)
        return (k <= q) & (dq == dk)
    return keep


def softcap(cap):
    def score(s, torch):
        return cap * torch.tanh(s / cap)
    return score


def spec(dtype, head_dim, heads, kv_heads, cases, mask=None, score=None, v_head_dim=None,
         scale=None, fixture=None, expect_fail=False):
    return dict(dtype=dtype, head_dim=head_dim, v_head_dim=v_head_dim or head_dim,
                heads=heads, kv_heads=kv_heads, mask=mask, score=score,
                scale=scale if scale is not None else 1.0 / math.sqrt(head_dim),
                cases=cases, fixture=fixture or {}, expect_fail=expect_fail)


# fixture: how test/gpu/fixtures/build_fixtures.py compiles the naive kernel
# for the spec (mask kind, window, softcap; ws = use the workspace; grid_one =
# the FA1-order grid).
SPECS = {
    "naive_attention": spec("bf16", 64, 4, 2, mask=causal, fixture=dict(mask=1, ws=True), cases=[
        (2, 128, 128, "contig"), (1, 17, 203, "contig"), (2, 203, 17, "contig"),
        (3, 1023, 1023, "packed"), (1, 1, 1025, "bhsd")]),
    "mha_d32_f16_causal": spec("f16", 32, 16, 16, mask=causal, fixture=dict(mask=1, grid_one=True), cases=[
        (2, 1, 1, "contig"), (2, 1025, 1025, "packed"), (1, 203, 113, "contig"),
        (1, 17, 4096, "bhsd")]),
    "gqa_d64_bf16": spec("bf16", 64, 32, 8, cases=[
        (2, 1023, 1025, "contig"), (1, 4096, 1, "contig"), (3, 113, 113, "packed"),
        (1, 17, 17, "bhsd"), (1, 2048, 2048, "contig"), (2, 2203, 3001, "bhsd")]),
    # the long-rows variant (passes/long_rows_variant.c) from 8192 rows, the kernel below
    "long_d64_f16_causal": spec("f16", 64, 2, 1, mask=causal, cases=[
        (1, 8192, 8192, "contig"), (1, 8200, 9001, "bhsd"), (1, 9001, 8200, "contig"),
        (2, 1025, 1023, "contig")]),
    "mqa_d96_f16_causal": spec("f16", 96, 8, 1, mask=causal, fixture=dict(mask=1, ws=True), cases=[
        (2, 203, 1023, "contig"), (1, 1025, 203, "bhsd"), (1, 4096, 4096, "contig")]),
    "llama3_prefill": spec("bf16", 128, 32, 8, mask=causal, fixture=dict(mask=1), cases=[
        (1, 4096, 4096, "contig"), (2, 1023, 1023, "packed"), (4, 113, 17, "contig"),
        (1, 1, 4096, "contig")]),
    "mha_d128_f16": spec("f16", 128, 16, 16, fixture=dict(ws=True), cases=[
        (2, 1025, 1023, "bhsd"), (1, 17, 113, "contig"), (1, 2048, 2048, "packed")]),
    # head dim 8 mod 16: the reduction of S = Q K^T ends with an m16n8k8 step
    "gqa_d40_bf16_causal": spec("bf16", 40, 8, 4, mask=causal, cases=[
        (2, 203, 203, "contig"), (1, 1025, 113, "bhsd"), (1, 1023, 1023, "packed"),
        (1, 17, 1023, "contig")]),
    "mha_d24_f16": spec("f16", 24, 8, 8, cases=[
        (2, 203, 113, "contig"), (1, 1025, 1025, "packed")]),
    "gqa_d136_bf16_window": spec("bf16", 136, 8, 2, mask=window(256), cases=[
        (1, 1023, 1023, "contig"), (2, 113, 300, "bhsd")]),
    "mha_d160_bf16_causal": spec("bf16", 160, 8, 8, mask=causal, fixture=dict(mask=1), cases=[
        (2, 203, 203, "packed"), (1, 1025, 4096, "contig"), (2, 17, 1, "contig")]),
    "gqa_d192_f16": spec("f16", 192, 16, 4, fixture=dict(ws=True), cases=[
        (1, 1023, 203, "contig"), (2, 113, 1025, "bhsd")]),
    "mha_d256_bf16_causal": spec("bf16", 256, 8, 8, mask=causal, fixture=dict(mask=1), cases=[
        (2, 1025, 1025, "contig"), (1, 203, 4096, "contig"), (1, 4096, 1023, "bhsd")]),
    # schedule overlap = 1 (the overlap-softmax pass): the d256 rows at
    # batch 16-32 caught the last V copy left in flight after the loop
    "overlap_d128_bf16_causal": spec("bf16", 128, 8, 2, mask=causal, cases=[
        (2, 1025, 1025, "contig"), (1, 203, 4096, "contig"), (1, 4096, 1023, "bhsd"),
        (3, 113, 113, "packed"), (2, 17, 1, "contig")]),
    "overlap_d256_bf16_causal": spec("bf16", 256, 4, 4, mask=causal, cases=[
        (32, 512, 512, "contig"), (16, 1024, 1024, "contig"), (1, 203, 4096, "bhsd"),
        (2, 1023, 1023, "packed")]),
    # schedule producer = 1 (the warp-specialize pass): a producer warpgroup
    # loads K/V into mbarrier-guarded rings; every step gets and releases
    # its slots (mask-skip's skipped steps too), zero-trip loops issue nothing
    "ws_d128_bf16_causal": spec("bf16", 128, 8, 2, mask=causal, cases=[
        (2, 1025, 1025, "contig"), (1, 203, 4096, "contig"), (1, 4096, 1023, "bhsd"),
        (3, 113, 113, "packed"), (2, 17, 1, "contig"), (2, 1, 17, "contig"),
        (2, 17, 0, "contig")]),  # no key: empty tensor maps, the producer prefetches them
    "ws_d128_f16": spec("f16", 128, 16, 4, cases=[
        (2, 1025, 1023, "bhsd"), (1, 17, 113, "contig"), (1, 2048, 2048, "packed"),
        (2, 4096, 4096, "contig")]),
    "ws_d256_bf16_causal": spec("bf16", 256, 4, 4, mask=causal, cases=[
        (32, 512, 512, "contig"), (16, 1024, 1024, "contig"), (1, 203, 4096, "bhsd"),
        (2, 1023, 1023, "packed")]),
    "ws_d64_bf16_causal": spec("bf16", 64, 8, 8, mask=causal, cases=[
        (2, 1025, 1025, "contig"), (1, 4096, 203, "contig"), (3, 113, 113, "packed"),
        (1, 17, 4096, "bhsd")]),
    # schedule persistent = 1 (passes/persistent.c): one block an SM walks
    # many tiles; more tiles than SMs, fewer, one, partial tiles, no key
    "persist_d128_bf16_gqa": spec("bf16", 128, 8, 2, cases=[
        (32, 512, 512, "contig"), (2, 1025, 1025, "contig"), (1, 203, 4096, "bhsd"),
        (3, 113, 113, "packed"), (1, 17, 1, "contig"), (2, 17, 0, "contig")]),
    "persist_d256_bf16": spec("bf16", 256, 4, 4, cases=[
        (32, 512, 512, "contig"), (2, 1023, 1023, "packed"), (1, 4096, 203, "contig"),
        (1, 17, 4096, "bhsd")]),
    # causal: mirrored pairs of Q tiles where there are at least as many
    # pairs as blocks (132 SMs: 32 x 512, 8 x 1025 with an odd count of Q
    # tiles, pairs spanning two heads, 16 x 384 x 200 with fully masked top
    # rows), one tile a turn below that (the rest); seqlen_q != seqlen_k
    # both ways, one key, no key
    "persist_d128_bf16_causal": spec("bf16", 128, 8, 2, mask=causal, cases=[
        (32, 512, 512, "contig"), (8, 1025, 1025, "packed"), (16, 384, 200, "bhsd"),
        (2, 1025, 1025, "contig"), (3, 384, 384, "packed"), (1, 203, 4096, "bhsd"),
        (1, 4096, 1023, "contig"), (2, 17, 1, "contig"), (2, 17, 0, "contig")]),
    "persist_d256_bf16_causal": spec("bf16", 256, 4, 4, mask=causal, cases=[
        (16, 1024, 1024, "contig"), (2, 1023, 1023, "packed"), (1, 4096, 203, "contig"),
        (3, 384, 384, "bhsd")]),
    "doc_d128_bf16": spec("bf16", 128, 8, 2, mask=documents((300, 700, 1500)), cases=[
        (2, 2048, 2048, "contig"), (1, 1025, 1025, "bhsd"), (1, 203, 203, "contig")]),
    "window_d128_bf16": spec("bf16", 128, 16, 4, mask=window(256),
                             fixture=dict(mask=2, window=256, ws=True), cases=[
        (2, 1025, 1025, "contig"), (1, 203, 4096, "bhsd"), (1, 4096, 1023, "contig"),
        (2, 113, 113, "packed")]),
    "softcap_d256_bf16": spec("bf16", 256, 8, 4, score=softcap(50.0),
                              fixture=dict(softcap=50.0), cases=[
        (2, 1023, 1023, "packed"), (1, 17, 4096, "contig"), (1, 4096, 203, "contig")]),

    # Negative controls (fixture only): the naive kernel with a planted bug.
    # The suite must FAIL each case; it reports that as "caught".
    "naive_bug_mask": spec("bf16", 64, 4, 2, mask=causal, expect_fail=True,
                           fixture=dict(mask=1, bug="mask"), cases=[(2, 203, 203, "contig")]),
    "naive_bug_lse": spec("f16", 64, 4, 2, mask=causal, expect_fail=True,
                          fixture=dict(mask=1, bug="lse"), cases=[(2, 203, 1023, "contig")]),
    "naive_bug_lastcol": spec("bf16", 128, 4, 4, expect_fail=True,
                              fixture=dict(bug="lastcol"), cases=[(1, 113, 113, "bhsd")]),
}
