"""The benchmark grid (as in ../shared/PEERS.md) and the specs it needs.

`python3 bench/configs.py --write-specs DIR` writes one .fa spec per kernel;
scripts/build-bench-kernels.sh compiles them to PTX on the build machine.
"""
import os
import sys

SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
TOKENS = 16384
HIDDEN = 2048


def kernel_name(c):
    return f"fwd_d{c['head_dim']}_h{c['heads']}_kv{c['kv_heads']}_{'causal' if c['causal'] else 'full'}_{c['dtype']}"


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


def ablation_grid():
    """Head dim 128, causal and not, at seqlen 2k and 16k (16k tokens)."""
    return [dict(dtype="bf16", head_dim=128, heads=16, kv_heads=16, causal=causal, seqlen=s, batch=TOKENS // s)
            for causal in (False, True) for s in (2048, 16384)]


def spec_text(c, schedule=None):
    lines = [f"attention {kernel_name(c)} {{",
             f"  dtype = {c['dtype']};",
             f"  head_dim = {c['head_dim']};",
             f"  heads = {c['heads']};",
             f"  kv_heads = {c['kv_heads']};",
             f"  mask = {'causal' if c['causal'] else 'none'};",
             "}"]
    return "\n".join(lines) + "\n"


def write_specs(out_dir, grid=None):
    os.makedirs(out_dir, exist_ok=True)
    seen = set()
    for c in grid or forward_grid():
        name = kernel_name(c)
        if name in seen:
            continue
        seen.add(name)
        with open(os.path.join(out_dir, name + ".fa"), "w") as f:
            f.write(spec_text(c))
    print("\n".join(sorted(seen)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-specs":
        write_specs(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--write-ablation-specs":
        write_specs(sys.argv[2], ablation_grid())
    else:
        print(__doc__)
