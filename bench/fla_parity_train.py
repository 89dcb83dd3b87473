#!/usr/bin/env python3
"""FLA's side of bench/parity_vs_fla.sh: the same initial weights and batches as `kda train`.

  init  OUT_DIR --size 300M|tiny [--vocab N]   KDAForCausalLM(KDAConfig(size)) under
        torch.manual_seed(42), save_pretrained (safetensors) -> `kda import` reads it
  train MODEL_DIR --batches F.i32 --steps S --global-batch G --seq T [recipe flags] [--device cuda|cpu]
        trains S steps on the dumped batches (dump_batches: S*G samples of T+1 int32 ids;
        inputs [:-1], labels [1:]) with kda's recipe (kda-model.md §6): AdamW (beta1, beta2,
        eps, decoupled wd) with the §6.3 decay groups (no decay for names with "bias" -- dt_bias,
        g_proj.1.bias -- or "norm"; A_log decayed), lr(k) of §6.2 (linear warm-up from 0, then
        cosine to min_lr), global-norm clip. CUDA: fp32 masters, bf16 autocast, FLA's fused
        kernels (as bench/fla_train_bench.py); CPU: fp32 through tests/python/fla_cpu.py.
        Prints one JSON line per step: {"iteration", "loss", "lr", "grad_norm"}.
"""
import argparse
import json
import math
import os
import sys
import warnings

import numpy as np
import torch

SIZES = {"300M": dict(hidden_size=1024, num_hidden_layers=12, num_heads=8, head_dim=32, intermediate_size=4096),
         "tiny": dict(hidden_size=64, num_hidden_layers=2, num_heads=2, head_dim=16, intermediate_size=256)}


def patch_tied(KDAForCausalLM):
    import transformers
    tied = getattr(KDAForCausalLM, "_tied_weights_keys", None)
    if int(transformers.__version__.split(".")[0]) >= 5 and isinstance(tied, (list, tuple)):
        KDAForCausalLM._tied_weights_keys = {"lm_head.weight": "model.embeddings.weight"}


def lr_at(k, a):  # kda-model.md §6.2 = src/model/optim.c kda_lr_at
    if a.warmup > 0 and k < a.warmup:
        return a.lr * k / a.warmup
    if a.decay_style == "constant":
        return a.lr
    if k >= a.decay_iters:
        return a.min_lr
    frac = (k - a.warmup) / (a.decay_iters - a.warmup) if a.decay_iters > a.warmup else 1.0
    if a.decay_style == "linear":
        return a.min_lr + (a.lr - a.min_lr) * (1.0 - frac)
    return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1.0 + math.cos(math.pi * frac))


def init(a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models import KDAConfig, KDAForCausalLM
        patch_tied(KDAForCausalLM)
        cfg = KDAConfig(**SIZES[a.size], expand_v=2.0, use_short_conv=True, conv_size=4, vocab_size=a.vocab,
                        norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=2048, use_cache=False,
                        attn_mode="chunk", bos_token_id=128000 if a.vocab > 128000 else 1,
                        eos_token_id=128001 if a.vocab > 128001 else 2)
        torch.manual_seed(42)
        model = KDAForCausalLM(cfg)
        model.save_pretrained(a.dir)
    n = sum(p.numel() for p in model.parameters())
    print(json.dumps({"init": a.dir, "size": a.size, "parameters": n}), flush=True)


def load(a, cuda):
    from safetensors.torch import load_file
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models import KDAConfig, KDAForCausalLM
        patch_tied(KDAForCausalLM)
        cj = json.load(open(os.path.join(a.dir, "config.json")))
        extra = {}
        if not cuda:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
            import fla_cpu
            fla_cpu.install()
            extra = fla_cpu.kda_config_flags()
        for k in ("architectures", "transformers_version", "dtype", "torch_dtype", "model_type"):
            cj.pop(k, None)
        cj.update(extra)
        cfg = KDAConfig(**cj)
        model = KDAForCausalLM(cfg)
    sd = load_file(os.path.join(a.dir, "model.safetensors"))
    r = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=False)
    missing = set(r.missing_keys) - {"lm_head.weight"}
    if missing or r.unexpected_keys:
        sys.exit(f"fla_parity_train: {a.dir}: missing {sorted(missing)}, unexpected {r.unexpected_keys}")
    model.tie_weights()
    if model.lm_head.weight.data_ptr() != model.model.embeddings.weight.data_ptr():
        sys.exit("fla_parity_train: lm_head is not tied to model.embeddings")
    return model


def make_adamw(model, a, fused=False):
    """AdamW(beta1, beta2, eps) with the kda-model.md §6.3 groups: no decay for names with "bias" or
    "norm"; lr is set every step by optimizer_step."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if ("bias" in n or "norm" in n) else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=0.0, betas=(a.beta1, a.beta2), eps=a.eps, fused=fused)


def optimizer_step(model, opt, k, a):
    """After step k's backward: global-norm clip, lr(k), the AdamW step, zeroed gradients.
    Returns (gradient norm before clipping, lr)."""
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip).item()
    lr = lr_at(k, a)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.step()
    opt.zero_grad(set_to_none=True)
    return gn, lr


def train(a):
    cuda = a.device == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    model = load(a, cuda).to(a.device)
    model.train()
    opt = make_adamw(model, a, fused=cuda)
    G, T = a.global_batch, a.seq
    data = np.fromfile(a.batches, dtype=np.int32)
    if data.size < a.steps * G * (T + 1):
        sys.exit(f"fla_parity_train: {a.batches} holds {data.size} ids, fewer than {a.steps}x{G}x{T + 1}")
    data = data[:a.steps * G * (T + 1)].reshape(a.steps, G, T + 1)
    mb = a.micro or G
    n_micro = G // mb
    for k in range(a.steps):
        batch = torch.from_numpy(data[k].astype(np.int64)).to(a.device)
        loss_sum = 0.0
        for i in range(n_micro):
            x = batch[i * mb:(i + 1) * mb]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                # KDAForCausalLM.forward, with the targets already shifted (kda's ids[1:]) given as
                # shift_labels: forward() itself would shift `labels` and drop the last position
                h = model.model(input_ids=x[:, :-1].contiguous(), use_cache=False)[0]
                loss, _ = model._compute_logits_and_loss(
                    hidden_states=h, shift_labels=x[:, 1:].contiguous(), logits_to_keep=0,
                    fuse_linear_cross_entropy=model.config.fuse_cross_entropy and model.training)
            (loss / n_micro).backward()
            loss_sum += loss.item() / n_micro
        gn, lr = optimizer_step(model, opt, k, a)
        print(json.dumps({"iteration": k + 1, "loss": loss_sum, "lr": lr, "grad_norm": gn}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["init", "train"])
    ap.add_argument("dir")
    ap.add_argument("--size", default="300M", choices=sorted(SIZES))
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--batches")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--micro", type=int, default=0, help="micro-batch (0: = global batch)")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--min-lr", type=float, default=2e-5)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--decay-iters", type=int, default=4768)
    ap.add_argument("--decay-style", default="cosine")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    init(a) if a.mode == "init" else train(a)


if __name__ == "__main__":
    sys.exit(main())
