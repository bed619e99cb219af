"""Train a small decoder-only transformer with flashc attention and with SDPA.

    python3 examples/train_tiny_gpt.py [--ptx tiny_gpt.ptx] [--steps 200] [--dropout 0.1]

The model (4 layers, width 256, 4 query heads over 2 key/value heads of dim 64,
learned positions, pre-norm, tied embeddings; random init) learns a synthetic
language: token streams from a fixed random Markov chain over 256 symbols, so
no download is needed and the best reachable loss is the chain's entropy
(printed). The same model, init and batches are trained twice:

  flashc  attention = flashc.attention(q, k, v, module, dropout_p=p): the
          kernels of examples/tiny_gpt.fa (GQA without repeating K/V; dropout
          with `dropout_mask = torch`)
  sdpa    F.scaled_dot_product_attention on its flash backend (K/V repeated
          for the query heads, as Hugging Face's models do)

Both draw dropout from torch's CUDA generator the same way, so with the same
seed the two runs drop the same attention weights and differ only in
rounding. Pass: over the run the loss curves stay within --tol (mean absolute
difference over the last 20 steps) and --max-tol (any single step).
--ptx loads a compiled module (flashc -emit=ptx examples/tiny_gpt.fa): the
runtime-only package (no LLVM/MLIR on the machine); without it the spec is
compiled with flashc.compile.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashc  # noqa: E402

VOCAB, DIM, LAYERS, HEADS, KV_HEADS, HEAD_DIM, SEQ = 256, 256, 4, 4, 2, 64, 512


class Attention(torch.nn.Module):
    def __init__(self, impl, module, dropout):
        super().__init__()
        self.impl, self.module, self.dropout = impl, module, dropout
        self.qkv = torch.nn.Linear(DIM, (HEADS + 2 * KV_HEADS) * HEAD_DIM, bias=False)
        self.out = torch.nn.Linear(HEADS * HEAD_DIM, DIM, bias=False)
        torch.nn.init.normal_(self.out.weight, std=0.02 / math.sqrt(2 * LAYERS))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], -1)
        q = q.view(b, s, HEADS, HEAD_DIM)
        k = k.view(b, s, KV_HEADS, HEAD_DIM)
        v = v.view(b, s, KV_HEADS, HEAD_DIM)
        p = self.dropout if self.training else 0.0
        if self.impl == "flashc":
            o = flashc.attention(q, k, v, self.module, dropout_p=p)
        else:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            rep = HEADS // KV_HEADS
            qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
            kh, vh = kh.repeat_interleave(rep, 1), vh.repeat_interleave(rep, 1)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o = F.scaled_dot_product_attention(qh, kh, vh, dropout_p=p, is_causal=True)
            o = o.transpose(1, 2)
        return self.out(o.reshape(b, s, HEADS * HEAD_DIM))


class Block(torch.nn.Module):
    def __init__(self, impl, module, dropout):
        super().__init__()
        self.n1, self.n2 = torch.nn.LayerNorm(DIM), torch.nn.LayerNorm(DIM)
        self.attn = Attention(impl, module, dropout)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(),
                                       torch.nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class TinyGPT(torch.nn.Module):
    def __init__(self, impl, module, dropout):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, DIM)
        torch.nn.init.normal_(self.emb.weight, std=0.02)  # tied: the logits start near uniform
        self.pos = torch.nn.Parameter(torch.randn(SEQ, DIM) * 0.02)
        self.blocks = torch.nn.ModuleList(Block(impl, module, dropout) for _ in range(LAYERS))
        self.norm = torch.nn.LayerNorm(DIM)

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos[: tokens.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x) @ self.emb.weight.t()


def markov_chain(seed):
    """A random sparse-ish transition matrix over VOCAB symbols and its entropy rate."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(VOCAB, VOCAB, generator=g, dtype=torch.float64) * 2.5
    trans = torch.softmax(logits, -1)
    pi = torch.full((VOCAB,), 1.0 / VOCAB, dtype=torch.float64)
    for _ in range(200):  # the stationary distribution
        pi = pi @ trans
    entropy = -(pi[:, None] * trans * trans.clamp_min(1e-300).log()).sum().item()
    return trans.float(), entropy


def batches_of(trans, steps, batch_size, seed):
    """steps + 1 batches (the last for eval) of token streams of SEQ + 1
    symbols, the same for both runs: sampled all at once, one position at a
    time by inverting the rows' CDFs."""
    g = torch.Generator().manual_seed(seed)
    rows = (steps + 1) * batch_size
    cdf = trans.double().cumsum(-1)
    cdf[:, -1] = 1.0
    x = torch.empty(rows, SEQ + 1, dtype=torch.long)
    x[:, 0] = torch.randint(0, VOCAB, (rows,), generator=g)
    for t in range(1, SEQ + 1):
        u = torch.rand(rows, 1, generator=g, dtype=torch.float64)
        x[:, t] = torch.searchsorted(cdf[x[:, t - 1]], u).squeeze(1).clamp_max(VOCAB - 1)
    x = x.view(steps + 1, batch_size, SEQ + 1).cuda()
    return [(b[:, :-1], b[:, 1:]) for b in x]


def train(impl, module, args, trans, batches):
    torch.manual_seed(args.seed)  # the same init for both runs ...
    model = TinyGPT(impl, module, args.dropout).cuda()
    torch.cuda.manual_seed(args.seed + 1)  # ... and the same dropout draws
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    losses, t_steps = [], []
    for step in range(args.steps):
        x, y = batches[step]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        lr = args.lr * min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        t_steps.append(time.perf_counter() - t0)
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        x, y = batches[-1]
        eval_loss = F.cross_entropy(model(x).float().view(-1, VOCAB), y.reshape(-1)).item()
    return losses, eval_loss, sorted(t_steps[5:])[len(t_steps[5:]) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx", help="a compiled examples/tiny_gpt.fa (default: flashc.compile it)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tol", type=float, default=0.02, help="mean |loss diff| over the last 20 steps")
    ap.add_argument("--max-tol", type=float, default=0.1, help="largest |loss diff| at any step")
    ap.add_argument("--json", help="write the curves here")
    args = ap.parse_args()
    if args.ptx:
        module = flashc.load(args.ptx)
    else:
        module = flashc.compile(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "tiny_gpt.fa"))
    trans, entropy = markov_chain(args.seed)
    batches = batches_of(trans, args.steps, args.batch, args.seed + 2)
    print(f"tiny GPT: {LAYERS} layers, width {DIM}, {HEADS} heads over {KV_HEADS} KV heads "
          f"(dim {HEAD_DIM}), seq {SEQ}, batch {args.batch}, {args.steps} steps, attention "
          f"dropout {args.dropout}; {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"the chain's entropy rate (the best loss): {entropy:.4f} nats; uniform: "
          f"{math.log(VOCAB):.4f}")
    runs = {}
    for impl in ("flashc", "sdpa"):
        runs[impl] = train(impl, module, args, trans, batches)
    lf, ls = runs["flashc"][0], runs["sdpa"][0]
    diff = [abs(a - b) for a, b in zip(lf, ls)]
    print(f"{'step':>5} {'flashc':>8} {'sdpa':>8} {'|diff|':>8}")
    for s in list(range(0, args.steps, 20)) + [args.steps - 1]:
        print(f"{s:5d} {lf[s]:8.4f} {ls[s]:8.4f} {diff[s]:8.4f}")
    tail = sum(diff[-20:]) / len(diff[-20:])
    worst = max(diff)
    print(f"eval loss (no dropout): flashc {runs['flashc'][1]:.4f}, sdpa {runs['sdpa'][1]:.4f}")
    print(f"median step: flashc {runs['flashc'][2] * 1e3:.1f} ms, sdpa {runs['sdpa'][2] * 1e3:.1f} ms")
    ok = tail <= args.tol and worst <= args.max_tol and lf[-1] < 0.8 * lf[0]
    print(f"{'PASS' if ok else 'FAIL'} loss curves: mean |diff| over the last 20 steps "
          f"{tail:.4f} (tol {args.tol}), largest {worst:.4f} at step {diff.index(worst)} "
          f"(tol {args.max_tol}); loss {lf[0]:.3f} -> {lf[-1]:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"flashc": lf, "sdpa": ls, "eval": [runs["flashc"][1], runs["sdpa"][1]],
                       "entropy": entropy, "step_s": [runs["flashc"][2], runs["sdpa"][2]]}, f)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
