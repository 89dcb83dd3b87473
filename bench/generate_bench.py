"""Generation speed side by side: `kda generate` vs transformers + FLA's generate, CPU, one run.
(The same on a GPU: bench/gpu_gen_eval_bench.sh.)

    KDA_BIN=$PWD/kda .venv/bin/python bench/generate_bench.py [--threads T] [--new-tokens N]

Two models, each a kda checkpoint exported with `kda export --dtype fp32`, which is the folder
transformers loads (float32; FLA imported first, its Triton entry points replaced by the
pure-PyTorch substitutes of tests/python/fla_cpu.py, since FLA has no CPU kernels):
  tiny  configs/tiny-bytes.yaml (byte vocabulary, 0.46 M parameters), one training step of `kda train`
  33M   FLA-initialised KDAForCausalLM with the Llama 3 vocabulary (128,256 ids, hidden 224,
        4 layers, 7 heads x 32, value heads x 2, MLP 896; 32.6 M parameters, 28.7 M of them the
        tied embedding), saved with save_pretrained and turned into a checkpoint by `kda import`
Prompts of three lengths (Tiny Shakespeare text); the 33M model gets BOS + the Llama 3 ids of
the same text (kda encodes it itself; transformers gets the ids from `tokenizers`). No end of
text is set, so every run makes exactly N tokens (greedy).

Measured, per prompt, after one warm-up generation on each side (same process, model loaded),
best of R runs (--repeat, default 2; the machine may be shared):
  time to first token  from the start of generation (prefill included) to the first new id
  decode tokens/s      (N - 1) / time from the first new id to the last
kda: `kda generate --show-stats --print-ids` (one process, all prompts). transformers:
model.generate(ids, max_new_tokens=N, do_sample=False, use_cache=True), timed by a streamer
(generate hands it each new id as soon as it is chosen). Both sides use T threads
(num_threads / torch.set_num_threads). The greedy ids of both are compared too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import bench_env  # noqa: E402  (bench/ is the script's directory)
import kda_runs  # noqa: E402
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))
_TMP = Path(tempfile.mkdtemp(prefix="kda_gen_bench_"))
os.environ.update(HF_HOME=str(_TMP / "hf_home"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                  TOKENIZERS_PARALLELISM="false", HF_HUB_DISABLE_PROGRESS_BARS="1")

import torch  # noqa: E402

import fla_cpu  # noqa: E402

TOKENIZER = ROOT / "data" / "tokenizer" / "llama3"
MODEL_33M = dict(hidden_size=224, num_hidden_layers=4, num_heads=7, head_dim=32, expand_v=2.0, intermediate_size=896,
                 vocab_size=128256, conv_size=4, norm_eps=1e-6, bos_token_id=128000, eos_token_id=None)


def kda_bin() -> str:
    return kda_runs.kda_bin("generate_bench")


def run(cmd: list, what: str) -> subprocess.CompletedProcess:
    return kda_runs.run(cmd, what, "generate_bench")


# ---- models ---------------------------------------------------------------------------------------

def make_tiny(tmp: Path) -> tuple[Path, Path]:
    save, exp = tmp / "tiny", tmp / "tiny_hf"
    run([kda_bin(), "train", "configs/tiny-bytes.yaml", "--device", "cpu", "--set", "train_iters=1", "--set",
         "lr_warmup_iters=0", "--set", "sample_tokens=0", "--set", f"save={save}"], "kda train (tiny)")
    run([kda_bin(), "export", save, exp, "--dtype", "fp32"], "kda export (tiny)")
    return save, exp


def make_33m(tmp: Path) -> tuple[Path, Path]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models.kda import KDAConfig, KDAForCausalLM
    torch.manual_seed(0)
    model = KDAForCausalLM(KDAConfig(**MODEL_33M, tie_word_embeddings=True, attn_mode="chunk",
                                     **fla_cpu.kda_config_flags())).float()
    fla = tmp / "m33_fla"
    model.save_pretrained(fla, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / f, fla / f)
    ck, exp = tmp / "m33", tmp / "m33_hf"
    run([kda_bin(), "import", fla, ck], "kda import (33M)")
    run([kda_bin(), "export", ck, exp, "--dtype", "fp32"], "kda export (33M)")
    return ck, exp


# ---- the two sides ---------------------------------------------------------------------------------

def kda_side(ck: Path, prompts: list[str], new: int, threads: int, repeat: int) -> list[dict]:
    """Stats and ids per prompt, best of `repeat`; a first run of prompt 1 warms up."""
    cmd = [kda_bin(), "generate", ck, "--device", "cpu", "--max-new-tokens", new, "--print-ids", "--show-stats",
           "--set", f"num_threads={threads}"]
    return kda_runs.kda_generate(cmd, prompts, repeat, "generate_bench")


def hf_side(folder: Path, prompt_ids: list[list[int]], new: int, threads: int, repeat: int) -> list[dict]:
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()

    def one(ids):
        clock = kda_runs.Clock()
        with torch.no_grad():
            t0 = time.perf_counter()
            out = model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False, use_cache=True,
                                 streamer=clock)
        gen = out[0, len(ids):].tolist()
        ttft = clock.times[0] - t0
        rate = (len(gen) - 1) / (clock.times[-1] - clock.times[0]) if len(gen) > 1 else 0.0
        return {"prompt_tokens": len(ids), "ttft_ms": ttft * 1e3, "new": len(gen), "tok_s": rate, "ids": gen}

    one(prompt_ids[0])  # warm-up
    runs = [one(ids) for _ in range(repeat) for ids in prompt_ids]
    return [kda_runs.best(runs[k::len(prompt_ids)]) for k in range(len(prompt_ids))]


# ---- report ------------------------------------------------------------------------------------------

def same(o: dict, h: dict) -> bool:
    return o["ids"] == h["ids"] and o["ids_stable"] and h["ids_stable"]


def machine() -> str:
    import fla
    return bench_env.machine(f"FLA {fla.__version__}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="threads on both sides (default 1)")
    ap.add_argument("--new-tokens", type=int, default=64, help="new tokens per prompt (default 64)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per prompt and side; the best is kept (default 2)")
    a = ap.parse_args()
    t_start = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fla  # noqa: F401  registers model_type "kda"
        from transformers.utils import logging as hf_logging
        from tokenizers import Tokenizer
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)
    fla_cpu.install()

    text = (ROOT / "data" / "tinyshakespeare.txt").read_text()
    prompts = [text[:24], text[:300], text[:1500]]
    tok = Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
    rows = []
    try:
        for name, make, encode in (
                ("tiny", make_tiny, lambda p: list(p.encode())),
                ("33M", make_33m, lambda p: [MODEL_33M["bos_token_id"]] + tok.encode(p, add_special_tokens=False).ids)):
            t = time.time()
            ck, exp = make(_TMP)
            t_make = time.time() - t
            ours = kda_side(ck, prompts, a.new_tokens, a.threads, a.repeat)
            t = time.time()
            theirs = hf_side(exp, [encode(p) for p in prompts], a.new_tokens, a.threads, a.repeat)
            print(f"[{name}: model made in {t_make:.1f} s, transformers side {time.time() - t:.1f} s]", flush=True)
            for o, h in zip(ours, theirs):
                if o["prompt_tokens"] != h["prompt_tokens"]:
                    sys.exit(f"generate_bench: prompt lengths differ ({o['prompt_tokens']} vs {h['prompt_tokens']})")
                rows.append((name, o, h))
    finally:
        shutil.rmtree(_TMP, ignore_errors=True)

    print(f"\nmachine: {machine()}")
    print(f"{a.threads} thread(s) each side, {a.new_tokens} new tokens per prompt, greedy, fp32, best of {a.repeat}\n")
    print("| model | prompt tokens | kda TTFT | HF+FLA TTFT | TTFT ratio | kda decode | HF+FLA decode | "
          "decode ratio | same ids |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, o, h in rows:
        print(f"| {name} | {o['prompt_tokens']} | {o['ttft_ms']:.1f} ms | {h['ttft_ms']:.1f} ms | "
              f"{h['ttft_ms'] / max(o['ttft_ms'], 0.05):.1f}x | {o['tok_s']:.0f} tok/s | {h['tok_s']:.0f} tok/s | "
              f"{o['tok_s'] / h['tok_s']:.1f}x | {'yes' if same(o, h) else 'NO'} |")
    print(f"\n(ratios: how many times faster kda is; kda's TTFT is printed to 0.1 ms, so a ratio on a TTFT "
          f"under 1 ms is rough; total {time.time() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
