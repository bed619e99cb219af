"""What the peer benchmarks (bench_variants.py, bench_varlen.py) share
without torch (their --write-specs runs on the build machine): the command
line and the table's cells.
"""
import argparse


def peer_args():
    """--write-specs DIR | --ptx-dir DIR [--json F] [--no-bwd] [--no-flex] [--only a,b]
    [--head-dim N] (the same N both times: the specs are written for it)
    [--backward-mode auto|deterministic|atomic] (flashc's fwd+bwd launch)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-specs", help="write one spec a row into this folder and stop")
    ap.add_argument("--ptx-dir", help="the rows' PTX (flashc DIR/NAME.fa -o DIR/NAME.ptx)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--no-bwd", action="store_true", help="forward only")
    ap.add_argument("--no-flex", action="store_true", help="without FlexAttention")
    ap.add_argument("--only", default="", help="comma separated row names")
    ap.add_argument("--head-dim", type=int, default=0,
                    help="every row's head dim (default: the bench's own, 128)")
    ap.add_argument("--backward-mode", default="auto", choices=("auto", "deterministic", "atomic"),
                    help="flashc.attention's backward_mode in the fwd+bwd timings")
    return ap.parse_args()


def cell(row, key):
    """row[key] as an 8-wide TFLOP/s cell, '-' when the row has none."""
    return f"{row[key]:8.1f}" if key in row else f"{'-':>8s}"


def ratio(row, ours, theirs):
    """Their time over ours (> 1: flashc is faster), '-' when either is missing."""
    return f"{row[theirs] / row[ours]:5.2f}" if theirs in row and ours in row else f"{'-':>5s}"


def write_specs(d, names, spec_text):
    """d/NAME.fa = spec_text(NAME) for each name (the build machine then
    compiles each with flashc)."""
    import os
    os.makedirs(d, exist_ok=True)
    for name in names:
        with open(os.path.join(d, name + ".fa"), "w") as f:
            f.write(spec_text(name))
