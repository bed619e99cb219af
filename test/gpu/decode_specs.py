"""The math of every decode kernel the decode suite checks, and its launches.

Each entry matches test/gpu/decode_specs/NAME.fa (one kernel per file; the
PTX is NAME.ptx in the decode PTX directory): the reference must compute what
the spec says. `naive_dec_*` entries have no .fa: they are the CUDA test
fixture's own (test/gpu/fixtures/naive_decode.cu), negative controls.

Decode semantics (docs/decode.md): q_len new tokens per sequence, the last
q_len positions of its cache of cache_seqlens[b] tokens; causal keeps key k
for query t iff k <= t + len - q_len (rows with no key: O = 0, LSE = -inf).

cases: dict(q_len, lens (one cache length per sequence: batch = len(lens)),
  nsplit (0 = auto / the kernel's split = N, else forced), inputs:
    randn  fresh N(0, 1) q, k, v
    hot    q aligned with key 0: one score ~ phi + 110 (unified max must fall back)
    cold   every score ~ -150 (far below phi - 80: the other fallback)
  layout: contig (separate tensors) | strided (q and o views with padding,
  o's padding must stay NaN), lse: whether an LSE tensor is passed)
"""
import math


def case(q_len, lens, nsplit=0, inputs="randn", layout="contig", lse=True):
    return dict(q_len=q_len, lens=list(lens), nsplit=nsplit, inputs=inputs, layout=layout,
                lse=lse)


def dspec(dtype, head_dim, heads, kv_heads, cases, causal=True, cache="contiguous", page_size=0,
          split="auto", unified_max=None, v_head_dim=None, expect_fail=False, fixture=None,
          q_len_max=None):
    return dict(dtype=dtype, head_dim=head_dim, v_head_dim=v_head_dim or head_dim, heads=heads,
                kv_heads=kv_heads, causal=causal, cache=cache, page_size=page_size, split=split,
                unified_max=unified_max, scale=1.0 / math.sqrt(head_dim), cases=cases,
                expect_fail=expect_fail, fixture=fixture or {}, q_len_max=q_len_max)


DECODE_SPECS = {
    "dec_gqa_d128_bf16": dspec("bf16", 128, 32, 8, cases=[
        case(1, [1]), case(4, [17], nsplit=3), case(16, [128, 1000], layout="strided"),
        case(1, [131072]), case(4, [4097, 1, 65536, 17], nsplit=3, lse=False),
        case(16, [1000, 0, 3], nsplit=1), case(1, [262144])]),
    "dec_gqa_d128_bf16_paged64": dspec("bf16", 128, 32, 8, cache="paged", page_size=64, cases=[
        case(1, [65536]), case(16, [4097, 17, 1], nsplit=3), case(4, [1000, 128], nsplit=1),
        case(1, [131072, 1000], layout="strided"), case(4, [262144, 17])]),
    "dec_mha_d64_f16_paged16": dspec("f16", 64, 16, 16, causal=False, cache="paged",
                                     page_size=16, split=3, cases=[
        case(1, [1000]), case(16, [17, 4097]), case(4, [65536], nsplit=1),
        case(1, [128, 1, 1000, 17], nsplit=0, lse=False)]),
    "dec_mqa_d256_bf16_paged256": dspec("bf16", 256, 8, 1, cache="paged", page_size=256, cases=[
        case(1, [4097]), case(16, [1000, 1], nsplit=3), case(4, [65536])]),
    "dec_gqa_d128_bf16_umax": dspec("bf16", 128, 32, 8, unified_max=10, cases=[
        case(1, [4097]), case(4, [1000, 17], nsplit=3, inputs="hot"),
        case(1, [65536], inputs="cold"), case(16, [128], nsplit=1, inputs="hot"),
        case(4, [131072], inputs="randn")]),
    "dec_gqa_d128_bf16_paged64_umax": dspec("bf16", 128, 32, 8, cache="paged", page_size=64,
                                            unified_max=10, cases=[
        case(4, [4097, 128]), case(1, [131072], inputs="hot"),
        case(16, [1000], nsplit=3, inputs="cold")]),
    # q_len_max * group <= 16: one 16-row tile, the warps split the keys
    # (warp-split-kv), also with paging and the unified max.
    "dec_gqa_d128_bf16_q4": dspec("bf16", 128, 32, 8, q_len_max=4, cases=[
        case(1, [1]), case(4, [17], nsplit=3), case(4, [1000, 128], layout="strided"),
        case(1, [131072]), case(4, [4097, 1, 65536, 17], nsplit=3, lse=False),
        case(1, [1000, 0, 3], nsplit=1), case(1, [262144])]),
    "dec_gqa_d128_bf16_q1_paged64_umax": dspec("bf16", 128, 32, 8, q_len_max=1, cache="paged",
                                               page_size=64, unified_max=10, cases=[
        case(1, [65536]), case(1, [4097, 17, 1], nsplit=3, inputs="hot"),
        case(1, [1000, 128], nsplit=1, inputs="cold"), case(1, [131072, 1000], layout="strided")]),
    "dec_mha_d128_bf16_split1": dspec("bf16", 128, 32, 32, split=1, cases=[
        case(1, [4097]), case(16, [1000, 17], layout="strided")]),

    # Negative control (fixture only): the combine drops the last split.
    "naive_dec_bug_combine": dspec("bf16", 128, 32, 8, expect_fail=True,
                                   fixture=dict(bug="combine"), cases=[case(1, [4097], nsplit=3)]),
}


def spec_text(name, s):
    """The .fa text of a decode spec (docs/decode.md's syntax)."""
    lines = [f"# {name}: checked by test/gpu/decode.py (math in test/gpu/decode_specs.py)",
             f"attention {name} {{",
             f"  dtype = {'fp16' if s['dtype'] == 'f16' else s['dtype']}; head_dim = {s['head_dim']}; heads = {s['heads']}; "
             f"kv_heads = {s['kv_heads']};",
             f"  mask = {'causal' if s['causal'] else 'none'};",
             "  mode = decode;",
             f"  split = {s['split']};"]
    if s["cache"] == "paged":
        lines.append(f"  cache = paged({s['page_size']});")
    if s["unified_max"] is not None:
        lines.append(f"  unified_max = {s['unified_max']};")
    if s.get("q_len_max"):
        lines.append(f"  q_len_max = {s['q_len_max']};")
    return "\n".join(lines + ["}"]) + "\n"


if __name__ == "__main__":
    import os
    import sys
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                             "decode_specs")
    os.makedirs(out, exist_ok=True)
    for n, s in DECODE_SPECS.items():
        if not n.startswith("naive_"):
            with open(os.path.join(out, n + ".fa"), "w") as f:
                f.write(spec_text(n, s))
    print(f"wrote specs to {out}")
