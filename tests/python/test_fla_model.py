"""Whole-model parity with FLA's KDAForCausalLM (fp32, CPU) — issue 2.

Our side: build/tools/model_io initialises a tiny model from a seed (kda-model.md §4), moves
every parameter off its init, runs forward + backward on random ids and writes the weights
(FLA key names, safetensors), the gradients, the logits and the loss. It runs twice: with
the chunked KDA core and with the recurrent one.

FLA's side: KDAForCausalLM built from a KDAConfig with the same sizes, in float32 on the CPU,
loaded with our weights (tied head: model.embeddings.weight only), forward with
labels=input_ids, backward. FLA's Triton entry points are replaced by pure PyTorch
(fla_cpu.py prints which); the KDA core runs as FLA's naive recurrence.

Checked, each ||ours - FLA|| / ||FLA|| <= 1e-4: logits, loss, and the gradient of every
parameter, for both of our cores. Also printed (not checked): the error of both sides
against FLA's model run in float64, which tells which side is off when a check fails.

Run from the repo root: KDA_BUILD=build .venv/bin/python tests/python/test_fla_model.py
(KDA_TEST_SEED=<n> replays a seed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

import fla_cpu  # noqa: E402

TOL = 1e-4
B, T = 2, 100  # T = 100: one full chunk of 64 and a partial one
PERTURB = 0.1
MODEL = dict(hidden_size=32, num_hidden_layers=2, num_heads=2, head_dim=16, expand_v=2.0,
             intermediate_size=64, vocab_size=100, conv_size=4, norm_eps=1e-6)


def model_io_path() -> Path:
    build = Path(os.environ.get("KDA_BUILD", "build"))
    if not build.is_absolute():
        build = ROOT / build
    exe = build / "tools" / "model_io"
    if not exe.is_file():
        sys.exit(f"test_fla_model: {exe} not found: build it with `make {build.name}/tools/model_io` "
                 f"or point KDA_BUILD at the build directory")
    return exe


def run_ours(exe: Path, ids: np.ndarray, seed: int, algo: str, tmp: Path) -> dict:
    ids_path = tmp / "ids.bin"
    ids.astype("<i4").tofile(ids_path)
    out = tmp / algo
    cmd = [str(exe)]
    for k, v in MODEL.items():
        cmd += ["--set", f"{k}={v}"]
    # the default byte tokenizer would demand vocab_size >= 256; no tokenizer is used here
    cmd += ["--set", "tokenizer_type=HuggingFaceTokenizer"]
    cmd += ["--set", "tie_word_embeddings=true", "--set", f"kda_algo={algo}", "--seed", str(seed),
            "--perturb", str(PERTURB), "--ids", str(ids_path), "--batch", str(B), "--seq", str(T),
            "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"test_fla_model: model_io failed ({r.returncode}):\n  {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    print("  " + r.stdout.strip())
    return {
        "weights": load_file(out / "weights.safetensors"),
        "grads": load_file(out / "grads.safetensors"),
        "logits": load_file(out / "logits.safetensors")["logits"],
        "loss": json.loads((out / "loss.json").read_text())["loss"],
    }


def build_fla(weights: dict, dtype: torch.dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models.kda import KDAConfig, KDAForCausalLM
        cfg = KDAConfig(**MODEL, tie_word_embeddings=True, use_cache=False, attn_mode="chunk",
                        **fla_cpu.kda_config_flags())
        model = KDAForCausalLM(cfg).to(dtype)
    model.train()  # no dropout anywhere; train mode = FLA's training path (chunk mode, no cache)
    names = {n for n, _ in model.named_parameters()}
    if set(weights) != names:
        sys.exit(f"test_fla_model: parameter names differ from FLA's\n  only ours: {sorted(set(weights) - names)}"
                 f"\n  only FLA's: {sorted(names - set(weights))}")
    sd = {k: v.to(dtype) for k, v in weights.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if set(missing) - {"lm_head.weight"} or unexpected:
        sys.exit(f"test_fla_model: load_state_dict missing {missing}, unexpected {unexpected}")
    if model.lm_head.weight.data_ptr() != model.model.embeddings.weight.data_ptr():
        sys.exit("test_fla_model: FLA's lm_head is not tied to model.embeddings after loading")
    for n, p in model.named_parameters():
        if not torch.equal(p.detach(), sd[n]):
            sys.exit(f"test_fla_model: {n} did not load")
    return model


def run_fla(weights: dict, ids: np.ndarray, dtype: torch.dtype) -> dict:
    model = build_fla(weights, dtype)
    x = torch.from_numpy(ids.astype(np.int64))
    out = model(input_ids=x, labels=x)
    out.loss.backward()
    return {
        "logits": out.logits.detach(),
        "loss": out.loss.item(),
        "grads": {n: p.grad.detach().clone() for n, p in model.named_parameters()},
    }


def rel(a, b) -> float:
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    nb = torch.linalg.vector_norm(b).item()
    d = torch.linalg.vector_norm(a - b).item()
    return d / nb if nb > 0 else d


def main() -> int:
    seed = int(os.environ.get("KDA_TEST_SEED", int(time.time()) % 1_000_000))
    print(f"seed {seed} (replay with KDA_TEST_SEED={seed})")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    exe = model_io_path()
    print("FLA on the CPU, substitutions:")
    for line in fla_cpu.install():
        print("  " + line)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, MODEL["vocab_size"], size=(B, T), dtype=np.int64)
    print(f"model {MODEL}, B={B} T={T}, perturb {PERTURB}")

    failures = []
    with tempfile.TemporaryDirectory(prefix="kda_fla_model_") as td:
        tmp = Path(td)
        ours = {algo: run_ours(exe, ids, seed, algo, tmp) for algo in ("chunk", "recurrent")}
    w = ours["chunk"]["weights"]
    same_w = all(torch.equal(w[n], ours["recurrent"]["weights"][n]) for n in w)
    if not same_w:
        failures.append("weights differ between the two model_io runs (same seed)")
    fla32 = run_fla(w, ids, torch.float32)
    fla64 = run_fla(w, ids, torch.float64)  # information only: which side is closer to exact

    worst = {}

    def check(label, ours_v, fla_v, ref64_v):
        e = rel(ours_v, fla_v)
        ok = e <= TOL
        algo = label.split(":")[0]
        worst[algo] = max(worst.get(algo, (0.0, "")), (e, label))
        print(f"  {'ok  ' if ok else 'FAIL'}  {label:<44} rel {e:.2e}   "
              f"(vs fp64: ours {rel(ours_v, ref64_v):.1e}, FLA {rel(fla_v, ref64_v):.1e})")
        if not ok:
            failures.append(label)

    for algo in ("chunk", "recurrent"):
        o = ours[algo]
        print(f"ours ({algo} core) vs FLA fp32, tolerance {TOL:g}:")
        check(f"{algo}: loss", o["loss"], fla32["loss"], fla64["loss"])
        check(f"{algo}: logits", o["logits"], fla32["logits"], fla64["logits"])
        for n in fla32["grads"]:
            check(f"{algo}: d {n}", o["grads"][n], fla32["grads"][n], fla64["grads"][n])
        print(f"  loss: ours {o['loss']:.9f}  FLA {fla32['loss']:.9f}  FLA fp64 {fla64['loss']:.9f}")
        print(f"  worst: {worst[algo][0]:.2e} ({worst[algo][1]})")

    n_checks = 2 * (2 + len(fla32["grads"]))
    if failures:
        print(f"test_fla_model: {len(failures)} of {n_checks} checks FAILED (seed {seed}): " + ", ".join(failures))
        return 1
    print(f"test_fla_model: all {n_checks} checks passed (seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
