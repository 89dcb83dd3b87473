"""kda_ref — shared pieces of the KDA parity tests (torch on the CPU).

  test_seed(cli_seed)     the seed to use (--seed, else KDA_TEST_SEED, else time-based), printed
  rel(a, b)               ||a - b|| / ||b|| in float64 (FLA's own error measure)
  import_fla_kda()        FLA's pure-PyTorch KDA functions, without the "no Triton" warning
  l2norm(x)               x * rsqrt(sum x^2 + 1e-6) over the last axis (kda-model.md §2.3 notes;
                          FLA's l2norm_fwd kernel computes exactly this, in Triton only)
  gate(f, A_log, dt_bias) -exp(A_log[h]) * softplus(f + dt_bias[h*K + j]) in the input dtype
                          (§2.4; torch's softplus has the same z > 20 -> z branch)
  recurrence(q, k, v, g, beta, scale)
                          §3.1 token by token in the input dtype, our own transcription (FLA's
                          naive functions always compute in float32, so this is the float64 oracle)
  ORACLE_DIR              docs/, where the float64 numpy oracle kda_chunk_reference.py lives (beside
                          kda-model.md, which it accompanies)
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent.parent


def test_seed(cli_seed: int | None = None) -> int:
    if cli_seed is not None:
        seed = cli_seed
    elif os.environ.get("KDA_TEST_SEED"):
        seed = int(os.environ["KDA_TEST_SEED"])
    else:
        seed = int(time.time()) % 1_000_000
    print(f"seed {seed} (replay with KDA_TEST_SEED={seed})")
    return seed


def rel(a, b) -> float:
    a = torch.as_tensor(a).detach().to(torch.float64)
    b = torch.as_tensor(b).detach().to(torch.float64)
    if a.shape != b.shape:
        raise ValueError(f"rel: shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    nb = torch.linalg.vector_norm(b).item()
    d = torch.linalg.vector_norm(a - b).item()
    return d / nb if nb > 0 else d


def import_fla_kda():
    """(naive_recurrent_kda, naive_chunk_kda, naive_kda_gate) from the installed FLA."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Triton is not supported on current platform, roll back to CPU."
        from fla.ops.kda.gate import naive_kda_gate
        from fla.ops.kda.naive import naive_chunk_kda, naive_recurrent_kda
    return naive_recurrent_kda, naive_chunk_kda, naive_kda_gate


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def gate(f: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
    H, K = f.shape[-2:]
    return -A_log.exp().view(H, 1) * F.softplus(f + dt_bias.view(H, K))


def recurrence(q, k, v, g, beta, scale):
    """o [B,T,H,V] of kda-model.md §3.1 with S0 = 0; q, k already normalised, g = log decay."""
    B, T, H, K = q.shape
    S = q.new_zeros(B, H, K, v.shape[-1])
    outs = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None]
        e = v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S)
        S = S + torch.einsum("bhk,bhv->bhkv", beta[:, t, :, None] * k[:, t], e)
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, S))
    return torch.stack(outs, 1)


ORACLE_DIR = ROOT / "docs"


def die(msg: str):
    print(msg, file=sys.stderr)
    sys.exit(1)
