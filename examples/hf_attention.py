"""flashc as a Hugging Face transformers attention backend.

    python3 examples/hf_attention.py [--ptx hf_llama.ptx]

Registers flashc.attention with transformers' AttentionInterface as "flashc"
(and a mask function that gives it no mask for unpadded causal batches and
refuses padded ones: the kernel's `mask = causal` is the mask), builds a small
Llama (2 layers, 8 query heads over 2 KV heads of dim 64; random init, no
download) with attn_implementation="flashc" and the same weights with "sdpa",
and compares both against the float64 "eager" model:
  logits       max|flashc - ref| <= 2 max|sdpa - ref| + 1e-5
  gradients    of one training step's loss, every parameter:
               max|flashc - ref| <= 3 max|sdpa - ref| + 1e-5
--ptx loads the compiled examples/hf_llama.fa (runtime-only); without it the
spec is compiled with flashc.compile.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashc  # noqa: E402

MODULE = None


def flashc_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                     **kwargs):
    """transformers' attention function signature: query [b, heads, s, d],
    key/value [b, kv_heads, s, d] (not repeated); returns ([b, s, heads, d], None)."""
    if attention_mask is not None:
        raise NotImplementedError("flashc: the attention kernel applies its own causal mask; "
                                  "padded batches are not supported here")
    if scaling is not None and abs(scaling - MODULE.info["scale"]) > 1e-6 * scaling:
        raise ValueError(f"flashc: the model scales by {scaling}, the kernel by "
                         f"{MODULE.info['scale']}")
    out = flashc.attention(query, key, value, MODULE, layout="bhsd", dropout_p=dropout)
    return out.transpose(1, 2), None


def flashc_mask(batch_size, cache_position, kv_length, kv_offset=0, mask_function=None,
                attention_mask=None, **kwargs):
    """No mask tensor: the kernel is causal. A padding mask is refused."""
    if attention_mask is not None and not bool(attention_mask.all()):
        raise NotImplementedError("flashc: padded batches need a varlen kernel (not here)")
    return None


def err(a, b):
    return (a.double() - b.double()).abs().max().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptx", help="a compiled examples/hf_llama.fa (default: flashc.compile it)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    global MODULE
    MODULE = (flashc.load(args.ptx) if args.ptx else
              flashc.compile(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "hf_llama.fa")))
    import transformers
    from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM
    AttentionInterface.register("flashc", flashc_attention)
    try:
        from transformers import AttentionMaskInterface
        AttentionMaskInterface.register("flashc", flashc_mask)
    except ImportError:
        pass
    torch.manual_seed(args.seed)
    cfg = dict(vocab_size=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
               num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=1024)
    models = {}
    ref = LlamaForCausalLM(LlamaConfig(**cfg)).double().cuda()  # the weights, float64
    for impl, dtype in (("eager", torch.float64), ("sdpa", torch.bfloat16),
                        ("flashc", torch.bfloat16)):
        m = LlamaForCausalLM._from_config(LlamaConfig(**cfg), attn_implementation=impl,
                                          dtype=dtype).cuda()
        m.load_state_dict(ref.state_dict())
        models[impl] = m.to(dtype)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}; attention implementations: "
          f"{[m.config._attn_implementation for m in models.values()]}")
    ids = torch.randint(0, cfg["vocab_size"], (2, 384), device="cuda")
    out = {}
    for impl, m in models.items():
        m.train()
        res = m(input_ids=ids, labels=ids)
        res.loss.backward()
        out[impl] = (res.logits.detach(), res.loss.item(),
                     {n: p.grad.detach() for n, p in m.named_parameters()})
    (lr, lossr, gr), (ls, losss, gs), (lf, lossf, gf) = out["eager"], out["sdpa"], out["flashc"]
    e_f, e_s = err(lf, lr), err(ls, lr)
    ok_logits = e_f <= 2 * e_s + 1e-5
    print(f"{'PASS' if ok_logits else 'FAIL'} logits: flashc {e_f:.2e}, sdpa {e_s:.2e} from the "
          f"float64 eager model; loss {lossf:.5f} / {losss:.5f} / {lossr:.5f} (flashc/sdpa/ref)")
    worst, n_ok = None, 0
    for n in gr:
        a, b = err(gf[n], gr[n]), err(gs[n], gr[n])
        ok = a <= 3 * b + 1e-5
        n_ok += ok
        ratio = a / max(b, 1e-12)
        if worst is None or ratio > worst[1]:
            worst = (n, ratio, a, b)
    ok_grads = n_ok == len(gr)
    print(f"{'PASS' if ok_grads else 'FAIL'} gradients: {n_ok} of {len(gr)} parameters within 3x "
          f"sdpa's error; the largest ratio {worst[1]:.2f} ({worst[0]}: flashc {worst[2]:.2e}, "
          f"sdpa {worst[3]:.2e})")
    sys.exit(0 if ok_logits and ok_grads else 1)


if __name__ == "__main__":
    main()
