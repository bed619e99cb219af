"""The math of every backward the GPU suite checks (test/gpu/backward.py).

Each entry matches test/gpu/backward_specs/NAME.fa (grad = true): the
reference must compute what the spec says, so mask and score are written
here again as torch ops (masks bottom-right aligned, as FlashAttention's).
cases: (batch, seqlen_q, seqlen_k); seqlen_q > seqlen_k with a causal mask
gives fully masked rows (their dQ must be 0).
"""
import math

from specs import causal, documents, window  # noqa: F401  (the forward suite's masks)


def every_third(q, k, sq, sk):
    return (k <= q) & ((q - k) % 3 != 1)


def early_rows(q, k, sq, sk):
    return (q < 300) & (k <= q)


def softcap(cap):
    def score(s, torch, h, q, k):
        return cap * torch.tanh(s / cap)
    return score


def alibi(s, torch, h, q, k):
    return s - torch.exp2(-(h + 1.0) / 2) * (q - k).abs()


def spec(dtype, head_dim, heads, kv_heads, cases, mask=None, score=None, v_head_dim=None,
         scale=None):
    return dict(dtype=dtype, head_dim=head_dim, v_head_dim=v_head_dim or head_dim, heads=heads,
                kv_heads=kv_heads, mask=mask, score=score,
                scale=scale if scale is not None else 1.0 / math.sqrt(head_dim), cases=cases)


SPECS = {
    "bwd_mha_d64_bf16_causal": spec("bf16", 64, 4, 4, mask=causal, cases=[
        (2, 128, 128), (1, 17, 203), (2, 203, 17), (1, 1023, 1025), (1, 1, 1)]),
    "bwd_gqa_d128_bf16": spec("bf16", 128, 8, 2, cases=[
        (1, 1025, 1023), (2, 113, 17), (1, 1, 64), (1, 4096, 4096)]),
    "bwd_mqa_d96_f16_window": spec("f16", 96, 4, 1, mask=window(100), cases=[
        (1, 1023, 1023), (2, 17, 300)]),
    "bwd_d128_dv64_f16_causal": spec("f16", 128, 4, 2, v_head_dim=64, mask=causal, cases=[
        (2, 203, 203), (1, 300, 113)]),
    "bwd_d256_bf16": spec("bf16", 256, 2, 2, cases=[(1, 203, 113), (2, 64, 1025)]),
    "bwd_softcap_d128_bf16_causal": spec("bf16", 128, 4, 2, mask=causal, score=softcap(30.0),
                                         cases=[(1, 1023, 1023), (2, 113, 300)]),
    "bwd_alibi_d64_f16": spec("f16", 64, 4, 4, score=alibi, cases=[(1, 203, 203), (2, 17, 113)]),
    "bwd_mha_d80_bf16_causal": spec("bf16", 80, 4, 4, mask=causal, cases=[
        (1, 1025, 1025), (2, 203, 17), (1, 17, 1023)]),
    "bwd_gqa_d192_f16": spec("f16", 192, 4, 2, cases=[(1, 1023, 1025), (2, 113, 113)]),
    # a backward schedule of its own: 128 x 128 tiles, 8 warps, 1 stage
    "bwd_sched_d64_bf16_causal": spec("bf16", 64, 4, 2, mask=causal, cases=[
        (1, 1025, 1025), (2, 203, 113), (1, 17, 300)]),
    # head dims of 8 mod 16: S^T / S (d = 40) and dP = dO V^T (dv = 40, 72)
    # end with an m16n8k8 step
    "bwd_gqa_d40_f16": spec("f16", 40, 4, 2, cases=[(1, 203, 203), (2, 113, 1025)]),
    "bwd_d64_dv40_bf16_causal": spec("bf16", 64, 4, 2, v_head_dim=40, mask=causal, cases=[
        (1, 1025, 1023), (2, 17, 203)]),
    "bwd_mha_d72_bf16_window": spec("bf16", 72, 4, 4, mask=window(100), cases=[
        (1, 1023, 1023), (2, 113, 17)]),
    "bwd_custom_d64_bf16": spec("bf16", 64, 4, 2, mask=every_third, cases=[
        (1, 203, 203), (2, 113, 113)]),
    "bwd_or_d64_f16": spec("f16", 64, 4, 2, mask=early_rows, cases=[
        (1, 1025, 1025), (2, 203, 700), (1, 700, 203)]),
    "bwd_doc_d64_bf16": spec("bf16", 64, 4, 2, mask=documents((300, 700, 1500)), cases=[
        (1, 2048, 2048), (2, 1025, 1025), (1, 203, 203)]),
    "bwd_doc_d128_bf16": spec("bf16", 128, 4, 2, mask=documents((300, 700, 1500)), cases=[
        (1, 2048, 2048), (2, 1025, 1025), (1, 203, 203)]),
}
