"""The benchmark grids (as in ../shared/PEERS.md) and the specs they need.

`python3 bench/configs.py --write-specs DIR` writes one .fa spec per kernel;
`--write-bwd-specs DIR` the backward grid's (grad = true, bench/bench_bwd.py);
scripts/build-bench-kernels.sh compiles them to PTX on the build machine.
"""
import os
import sys

SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
TOKENS = 16384
HIDDEN = 2048


def kernel_name(c):
    return f"fwd_d{c['head_dim']}_h{c['heads']}_kv{c['kv_heads']}_{'causal' if c['causal'] else 'full'}_{c['dtype']}"


def bwd_kernel_name(c):
    """The backward grid's module: forward bwd_... and its _bwd_* kernels."""
    return "bwd_" + kernel_name(c)[len("fwd_"):]


def forward_grid(quick=False):
    """Head dim 64/128/256, causal and not, batch x seqlen = 16k tokens,
    hidden 2048; GQA 32/8 at head dim 128; bf16 everywhere, fp16 on d=128."""
    grid = []
    seqlens = [2048, 8192] if quick else SEQLENS
    for d in (64, 128, 256):
        h = HIDDEN // d
        for causal in (False, True):
            for s in seqlens:
                grid.append(dict(dtype="bf16", head_dim=d, heads=h, kv_heads=h, causal=causal,
                                 seqlen=s, batch=TOKENS // s))
    for causal in (False, True):
        grid.append(dict(dtype="bf16", head_dim=128, heads=32, kv_heads=8, causal=causal, seqlen=8192, batch=2))
        grid.append(dict(dtype="fp16", head_dim=128, heads=16, kv_heads=16, causal=causal, seqlen=8192, batch=2))
    return grid


def backward_grid(quick=False):
    """PEERS.md's backward grid: head dim 64/128/256 (heads x head_dim = 2048),
    causal and not, seqlen 2k/8k/16k at 16k tokens (batch = 16384 / seqlen);
    GQA 32/8 at head dim 128, 8k, causal and not; bf16. quick: 2k and 8k."""
    grid = []
    seqlens = [2048, 8192] if quick else [2048, 8192, 16384]
    for d in (64, 128, 256):
        h = HIDDEN // d
        for causal in (False, True):
            for s in seqlens:
                grid.append(dict(dtype="bf16", head_dim=d, heads=h, kv_heads=h, causal=causal,
                                 seqlen=s, batch=TOKENS // s))
    for causal in (False, True):
        grid.append(dict(dtype="bf16", head_dim=128, heads=32, kv_heads=8, causal=causal, seqlen=8192, batch=2))
    return grid


def ablation_grid():
    """Head dim 128, causal and not, at seqlen 2k and 16k (16k tokens)."""
    return [dict(dtype="bf16", head_dim=128, heads=16, kv_heads=16, causal=causal, seqlen=s, batch=TOKENS // s)
            for causal in (False, True) for s in (2048, 16384)]


def spec_text(c, schedule=None, grad=False):
    lines = [f"attention {bwd_kernel_name(c) if grad else kernel_name(c)} {{",
             f"  dtype = {c['dtype']};",
             f"  head_dim = {c['head_dim']};",
             f"  heads = {c['heads']};",
             f"  kv_heads = {c['kv_heads']};",
             f"  mask = {'causal' if c['causal'] else 'none'};"]
    if grad:
        lines.append("  grad = true;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_specs(out_dir, grid=None, grad=False):
    os.makedirs(out_dir, exist_ok=True)
    seen = set()
    for c in grid or forward_grid():
        name = bwd_kernel_name(c) if grad else kernel_name(c)
        if name in seen:
            continue
        seen.add(name)
        with open(os.path.join(out_dir, name + ".fa"), "w") as f:
            f.write(spec_text(c, grad=grad))
    print("\n".join(sorted(seen)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-specs":
        write_specs(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--write-ablation-specs":
        write_specs(sys.argv[2], ablation_grid())
    elif len(sys.argv) == 3 and sys.argv[1] == "--write-bwd-specs":
        write_specs(sys.argv[2], backward_grid(), grad=True)
    else:
        print(__doc__)
