#!/usr/bin/env python3
"""Writes N random attention specs (one kernel a file) for the ptxas test:
head dims, value head dims, GQA ratios, dtypes, masks (causal, windows, random
affine comparisons of q and k joined by && and ||), score modifiers (softcap,
ALiBi-like, random arithmetic), scales and schedules.

    gen_specs.py OUT_DIR N SEED
"""
import os
import random
import sys


def affine(r):
    a = r.choice(["q", "k", "q - k", "k - q", "q + seqlen_k - seqlen_q - k", "k + 3", "q / 2"])
    op = r.choice(["<", "<=", ">", ">="])
    return f"{a} {op} {r.randint(-64, 300)}"


def mask_line(r):
    kind = r.randrange(6)
    if kind == 0:
        return "mask = none;"
    if kind == 1:
        return "mask = causal;"
    if kind == 2:
        return f"mask = window({r.randint(1, 512)});"
    if kind == 3:
        return f"mask = window({r.randint(0, 256)}, {r.randint(0, 256)});"
    terms = [affine(r) for _ in range(r.randint(1, 3))]
    expr = terms[0]
    for t in terms[1:]:
        expr = f"({expr}) {r.choice(['&&', '||'])} ({t})"
    return f"mask(b, h, q, k) = {expr};"


def score_line(r):
    kind = r.randrange(4)
    if kind == 0:
        return ""
    if kind == 1:
        c = r.choice([20, 30, 50])
        return f"score(s, b, h, q, k) = {c} * tanh(s / {c});"
    if kind == 2:
        return ("let slope = exp2(-8 * (h + 1) / heads);\n"
                "  score(s, b, h, q, k) = s - slope * abs(q - k);")
    return f"score(s, b, h, q, k) = max(s * {r.uniform(0.5, 2):.3f}, s - {r.randint(1, 9)}) + min(h, 3) / 8;"


def spec(r, i):
    d = r.choice([32, 64, 96, 128, 160, 192, 256, 8 * r.randint(2, 32)])
    dv = d if r.random() < 0.7 else r.choice([d, 64, 128])
    kv = r.choice([1, 2, 4, 8])
    heads = kv * r.choice([1, 2, 4, 8])
    lines = [f"attention gen{i} {{",
             f"  dtype = {r.choice(['bf16', 'fp16'])};",
             f"  head_dim = {d};",
             f"  v_head_dim = {dv};",
             f"  heads = {heads};",
             f"  kv_heads = {kv};",
             f"  {mask_line(r)}"]
    s = score_line(r)
    if s:
        lines.append(f"  {s}")
    if r.random() < 0.3:
        lines.append(f"  scale = {r.uniform(0.01, 0.3):.4f};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    r = random.Random(seed)
    for i in range(n):
        with open(os.path.join(out, f"gen{i}.fa"), "w") as f:
            f.write(spec(r, i))


if __name__ == "__main__":
    main()
