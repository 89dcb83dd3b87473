#!/usr/bin/env python3
"""drift.py -- how much do (R) a bf16 residual stream and (P) bf16 copies of the small parameters
make a KDA training run drift from an fp32-residual / fp32-small-param autocast baseline, compared
with a tiny random perturbation (stand-in for FLA's own non-determinism)?

  .venv/bin/python bench/drift/drift.py --mode A  --out runs/A.jsonl   (from the repository root)
  ... --mode A --perturb-init SEED      (A': 1e-7 relative Gaussian noise on every weight, once)
  ... --mode A --grad-noise SEED        (A'': 1e-7 relative noise on every gradient, every step)
  ... --mode R | P | RP

Model: FLA KDAForCausalLM (fla_cpu pure-torch substitutes), hidden 256, 4 layers, 4 heads x 32,
expand_v 2, intermediate 1024, vocab 256 (bytes), tied embeddings, seed 42 init.
Numerics of the baseline (meant to be FLA's CUDA reference mode): fp32 masters, linears under
torch.autocast('cpu', bfloat16) (bf16 inputs, bf16 output), residual stream fp32, short conv in
fp32 on the bf16 projection output with the fp32 weight, output rounded to bf16 (as FLA's Triton
causal_conv1d), KDA gate / l2norm / recurrence in fp32 (autocast off), o_norm in fp32 -> bf16,
RMSNorms fp32, loss = fp32 cross entropy of the bf16 logits.
R: embedding output and every residual add's output rounded to bf16, in forward AND backward
   (the gradient flowing along the residual stream is rounded to bf16 at each of those points).
P: attn_norm, mlp_norm, final norm, o_norm weights, A_log, dt_bias, q/k/v conv weights are read
   as bf16-rounded copies of the fp32 masters (straight-through: grads go to the masters).
"""
import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F
import torch.nn.utils.parametrize as parametrize

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import fla_cpu  # noqa: E402
from fla_parity_train import make_adamw, optimizer_step  # noqa: E402  (the parity run's optimizer)

CFG = dict(hidden_size=256, num_hidden_layers=4, num_heads=4, head_dim=32, intermediate_size=1024,
           expand_v=2.0, use_short_conv=True, conv_size=4, vocab_size=256, norm_eps=1e-6,
           tie_word_embeddings=True, max_position_embeddings=2048, use_cache=False, attn_mode="chunk",
           bos_token_id=1, eos_token_id=2)


class RoundBF16(torch.autograd.Function):
    """x -> bf16(x) held in x's dtype; the backward rounds the incoming gradient to bf16 too
    (round_grad) or passes it straight through (a bf16 copy of an fp32 master weight)."""
    @staticmethod
    def forward(ctx, x, round_grad):
        ctx.round_grad = round_grad
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return (g.to(torch.bfloat16).to(g.dtype) if ctx.round_grad else g), None


class BF16Copy(torch.nn.Module):
    def forward(self, w):
        return RoundBF16.apply(w, False)


ROUND_RESIDUAL = False


def rres(x):
    return RoundBF16.apply(x, True) if ROUND_RESIDUAL else x


def block_forward(self, hidden_states, attention_mask=None, past_key_values=None, use_cache=False,
                  output_attentions=False, attnres_states=None, **kwargs):
    # KDABlock.forward, non-attnres, fuse_norm=False path, with optional residual rounding
    residual = hidden_states
    h = self.attn_norm(hidden_states)
    h, attentions, past_key_values = self.attn(hidden_states=h, attention_mask=attention_mask,
                                               past_key_values=past_key_values, use_cache=use_cache,
                                               output_attentions=output_attentions, **kwargs)
    h = rres(residual + h)
    residual = h
    h = self.mlp(self.mlp_norm(h), **kwargs)
    h = rres(residual + h)
    return (h, attentions, past_key_values, attnres_states)


def install():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fla_cpu.install()
        import fla.layers.kda as fla_kda_layer
        from fla.models.kda.modeling_kda import KDABlock
        from fla.modules import ShortConvolution
    base_conv = ShortConvolution.forward  # fla_cpu's torch conv

    def conv_fp32(self, x, *a, **k):  # FLA's Triton conv: fp32 math on bf16 x and fp32 weight -> x.dtype
        with torch.autocast("cpu", enabled=False):
            y, s = base_conv(self, x.float(), *a, **k)
        return y.to(x.dtype), s
    ShortConvolution.forward = conv_fp32
    base_kda = fla_kda_layer.chunk_kda

    def kda_fp32(*a, **k):  # gate, l2norm, recurrence in fp32; output in v.dtype (bf16)
        with torch.autocast("cpu", enabled=False):
            return base_kda(*a, **k)
    fla_kda_layer.chunk_kda = kda_fp32
    KDABlock.forward = block_forward


def build(a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models import KDAConfig, KDAForCausalLM
        cfg = KDAConfig(**CFG, **fla_cpu.kda_config_flags())
        torch.manual_seed(42)
        model = KDAForCausalLM(cfg)
    model.tie_weights()
    assert model.lm_head.weight.data_ptr() == model.model.embeddings.weight.data_ptr(), "untied"
    if a.perturb_init is not None:
        g = torch.Generator().manual_seed(a.perturb_init)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + a.eps_rel * torch.randn(p.shape, generator=g))
    if "R" in a.mode:
        global ROUND_RESIDUAL
        ROUND_RESIDUAL = True
        model.model.embeddings.register_forward_hook(lambda m, i, o: RoundBF16.apply(o, True))
    if "P" in a.mode:
        n = 0
        for name, mod in list(model.named_modules()):
            leaf = name.rsplit(".", 1)[-1]
            targets = []
            if leaf in ("attn_norm", "mlp_norm", "norm", "o_norm") or leaf.endswith("_conv1d"):
                targets = ["weight"]
            if hasattr(mod, "A_log") and isinstance(getattr(mod, "A_log"), torch.nn.Parameter):
                targets = ["A_log", "dt_bias"]
            for t in targets:
                parametrize.register_parametrization(mod, t, BF16Copy())
                n += 1
        print(json.dumps({"P_parametrized": n}), file=sys.stderr)
    return model


def batches(a):
    data = np.frombuffer(open(a.text, "rb").read(), dtype=np.uint8)
    rng = np.random.default_rng(a.data_seed)
    starts = rng.integers(0, data.size - a.seq - 1, size=(a.steps, a.batch))
    return [torch.from_numpy(np.stack([data[s:s + a.seq + 1] for s in row]).astype(np.int64)) for row in starts]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="A", choices=["A", "R", "P", "RP"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--perturb-init", type=int, default=None)
    ap.add_argument("--grad-noise", type=int, default=None)
    ap.add_argument("--eps-rel", type=float, default=1e-7)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data-seed", type=int, default=0)
    ap.add_argument("--text", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    ap.set_defaults(beta1=0.9, beta2=0.95, eps=1e-8, decay_style="constant")  # for make_adamw / lr_at
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    install()
    model = build(a)
    model.train()
    opt = make_adamw(model, a)  # linear warm-up, then constant lr (decay_style constant)
    gnoise = torch.Generator().manual_seed(a.grad_noise) if a.grad_noise is not None else None
    data = batches(a)
    t0 = time.time()
    with open(a.out, "w") as f:
        for k in range(a.steps):
            x = data[k]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = model.model(input_ids=x[:, :-1].contiguous(), use_cache=False)[0]
                logits = model.lm_head(h)
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
            loss.backward()
            if gnoise is not None:
                with torch.no_grad():
                    for p in model.parameters():
                        p.grad.mul_(1 + a.eps_rel * torch.randn(p.shape, generator=gnoise))
            gn, lr = optimizer_step(model, opt, k, a)
            rec = {"iteration": k + 1, "loss": loss.item(), "lr": lr, "grad_norm": gn,
                   "t": round(time.time() - t0, 2)}
            if k == 0:
                rec.update(h_dtype=str(h.dtype), logits_dtype=str(logits.dtype))
            f.write(json.dumps(rec) + "\n")
            f.flush()
    print(json.dumps({"done": a.out, "mode": a.mode, "seconds": round(time.time() - t0, 1)}))


if __name__ == "__main__":
    main()
