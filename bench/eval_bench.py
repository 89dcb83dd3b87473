"""Scoring throughput side by side: `kda eval` vs lm-evaluation-harness (`hf` model), CPU, one run.
(The same on a GPU: bench/gpu_gen_eval_bench.sh.)

    KDA_BIN=$PWD/kda .venv/bin/python bench/eval_bench.py [--threads 1,2] [--limit 50] [--batch-size 8]

The model: an FLA-initialised KDAForCausalLM with the Llama 3 vocabulary (128,256 ids, hidden 224,
4 layers, 7 heads x 32, value heads x 2, MLP 896; 32.6 M parameters, 28.7 M of them the tied
embedding; generate_bench.py's 33M shape), its weights moved off init as in
tests/python/test_lm_eval_parity.py (so the choices' log-likelihoods have some spread), saved with
save_pretrained next to the bundled Llama 3 tokenizer files, turned into a kda checkpoint by
`kda import` and exported back by `kda export --dtype fp32` for lm-eval.

The items: arc_easy, hellaswag, piqa from tests/data/eval, the first --limit documents of each
(50 = all bundled arc_easy and piqa items), 0-shot. lm-eval reads them through the local task
configs that test_lm_eval_parity.py writes (lm-eval's own task YAMLs, dataset swapped for a local
JSON file; its document conversion is imported from there, not copied).

Each side runs once per thread count T (kda: `--set num_threads=T`; lm-eval: torch.set_num_threads(T)),
same batch size (distinct model inputs per forward), fp32. Times (wall clock):
  scoring  kda: from its "N tasks, D documents, R requests" stderr line (printed after the tasks
           are read and tokenized and the model is loaded) to the process's exit (the forwards,
           log-softmax, metrics, table, results and samples files).
           lm-eval: the time inside HFLM._loglikelihood_tokens (batching, forwards, log-softmax,
           gathering; the requests are already tokenized when it is called).
  run      kda: the whole `kda eval` process (start, tokenizer, tasks, tokenization, checkpoint
           load, scoring, output). lm-eval: simple_evaluate on an already-loaded HFLM (task
           configs, datasets, requests, tokenization, scoring, metrics); the model load
           (HFLM(...)) is timed once and printed apart.
items/s = documents / time, requests/s = (context, continuation) pairs / time. The acc and acc_norm
of every task (aggregate and per document) must be identical on both sides, or the run fails.
The machine may be shared: numbers are one run each, not a best-of.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import bench_env  # noqa: E402  (bench/ is the script's directory)
import kda_runs  # noqa: E402
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))

# The parity test sets the offline / cache environment and its temporary directory on import
# (before torch, transformers and datasets load); this benchmark works in that directory too.
import test_lm_eval_parity as parity  # noqa: E402

import torch  # noqa: E402

import fla_cpu  # noqa: E402

TMP = parity._TMP
TASKS = ("arc_easy", "hellaswag", "piqa")
MODEL_33M = dict(hidden_size=224, num_hidden_layers=4, num_heads=7, head_dim=32, expand_v=2.0, intermediate_size=896,
                 vocab_size=128256, conv_size=4, norm_eps=1e-6, bos_token_id=128000, eos_token_id=128001)


def kda_bin() -> str:
    return kda_runs.kda_bin("eval_bench")


def run(cmd: list, what: str) -> str:
    return kda_runs.run(cmd, what, "eval_bench").stdout


def make_model() -> tuple[Path, Path]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models.kda import KDAConfig, KDAForCausalLM
    torch.manual_seed(0)
    model = KDAForCausalLM(KDAConfig(**MODEL_33M, tie_word_embeddings=True, attn_mode="chunk",
                                     **fla_cpu.kda_config_flags())).float()
    with torch.no_grad():  # off FLA's init, as in test_lm_eval_parity.py
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * (0.5 if "embeddings" in name else 0.1))
    fla = TMP / "m33_fla"
    model.save_pretrained(fla, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (fla / f).write_bytes((parity.TOKENIZER / f).read_bytes())
    ck, exp = TMP / "m33", TMP / "m33_hf"
    run([kda_bin(), "import", fla, ck], "kda import")
    run([kda_bin(), "export", ck, exp, "--dtype", "fp32"], "kda export")
    return ck, exp


# ---- the two sides ---------------------------------------------------------------------------------

def kda_side(ck: Path, data: Path, threads: int, limit: int, batch: int) -> dict:
    """One `kda eval` process; stderr is read as it comes to time the scoring phase."""
    tag = f"kda_t{threads}"
    out, samples, table = TMP / f"{tag}.json", TMP / f"{tag}_samples.jsonl", TMP / f"{tag}_table.txt"
    cmd = [kda_bin(), "eval", ck, "--device", "cpu", "--tasks", ",".join(TASKS), "--data-dir", data, "--limit", limit, "--batch-size",
           batch, "--output", out, "--log-samples", samples, "--set", f"num_threads={threads}", "--no-progress"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    with open(table, "w") as tf:
        return kda_runs.kda_eval_timed(cmd, out, samples, "eval_bench", stdout=tf, env=env)


def hf_model(exp: Path, batch: int):
    """lm-eval's HF model on the exported folder, and the seconds its load took."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fla  # noqa: F401  registers model_type "kda" with transformers' Auto classes
        from lm_eval.models.huggingface import HFLM
    fla_cpu.install()
    t0 = time.perf_counter()
    lm = HFLM(pretrained=str(exp), dtype="float32", backend="causal", batch_size=batch, device="cpu")
    return lm, time.perf_counter() - t0


def lm_eval_side(lm, tasks: Path, threads: int, limit: int) -> dict:
    torch.set_num_threads(threads)
    res, clock, run_s = kda_runs.lm_eval_timed(lm, [f"kda_{t}" for t in TASKS], tasks, limit)
    docs = sum(len(res["samples"][f"kda_{t}"]) for t in TASKS)
    return {"docs": docs, "reqs": clock["reqs"], "score_s": clock["s"], "run_s": run_s, "results": res["results"],
            "samples": res["samples"]}


def acc_mismatches(ours: dict, theirs: dict) -> list[str]:
    """Where acc / acc_norm differ, per task and per document; empty when identical."""
    bad = []
    for t in TASKS:
        mine, their_samples = ours["samples"].get(t, {}), theirs["samples"][f"kda_{t}"]
        if len(mine) != len(their_samples):
            bad.append(f"{t}: {len(mine)} documents scored by kda, {len(their_samples)} by lm-eval")
        for s in their_samples:
            m = mine.get(s["doc_id"], {})
            for metric in ("acc", "acc_norm"):
                if metric in s and float(m.get(metric, -1)) != float(s[metric]):
                    bad.append(f"{t} doc {s['doc_id']}: {metric} {m.get(metric)} vs lm-eval {s[metric]}")
        for key in ("acc,none", "acc_norm,none"):
            a, b = ours["results"][t].get(key), theirs["results"][f"kda_{t}"].get(key)
            if a != b:
                bad.append(f"{t} {key}: kda {a} vs lm-eval {b}")
    return bad


# ---- report ------------------------------------------------------------------------------------------

def machine() -> str:
    import lm_eval
    return bench_env.machine(f"lm-eval {lm_eval.__version__}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--limit", type=int, default=50, help="documents per task (default 50)")
    ap.add_argument("--batch-size", type=int, default=8, help="model inputs per forward, both sides (default 8)")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    t_start = time.time()
    warnings.filterwarnings("ignore")
    import logging
    logging.disable(logging.WARNING)  # lm-eval's per-task notes; failures still raise
    rows, bad = [], []
    try:
        ck, exp = make_model()
        data, tasks, _ = parity.build_tasks(TMP)
        print(f"[model and task files ready in {time.time() - t_start:.1f} s]", flush=True)
        ours = {t: kda_side(ck, data, t, a.limit, a.batch_size) for t in threads}
        lm, load_s = hf_model(exp, a.batch_size)
        print(f"[lm-eval HF model loaded in {load_s:.1f} s]", flush=True)
        for t in threads:
            theirs = lm_eval_side(lm, tasks, t, a.limit)
            o = ours[t]
            if (o["docs"], o["reqs"]) != (theirs["docs"], theirs["reqs"]):
                bad.append(f"{t} thread(s): kda {o['docs']} documents / {o['reqs']} requests, "
                           f"lm-eval {theirs['docs']} / {theirs['reqs']}")
            bad += [f"{t} thread(s): {b}" for b in acc_mismatches(o, theirs)]
            rows.append((t, o, theirs))
            print(f"[{t} thread(s): kda {o['run_s']:.1f} s, lm-eval {theirs['run_s']:.1f} s]", flush=True)
        accs = {k: (v["acc,none"], v.get("acc_norm,none")) for k, v in ours[threads[0]]["results"].items()}
    finally:
        parity.shutil.rmtree(TMP, ignore_errors=True)

    print(f"\nmachine: {machine()}")
    o = rows[0][1]
    print(f"{', '.join(TASKS)}: first {a.limit} documents each, 0-shot; {o['docs']} documents, {o['reqs']} requests; "
          f"batch {a.batch_size}, fp32; lm-eval model load {load_s:.1f} s (not in its run time)\n")
    print("| threads | kda scoring | lm-eval scoring | kda items/s | lm-eval items/s | kda req/s | lm-eval req/s | "
          "scoring ratio | kda run | lm-eval run | run ratio | acc identical |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for t, o, h in rows:
        same = "yes" if not [b for b in bad if b.startswith(f"{t} thread")] else "NO"
        print(f"| {t} | {o['score_s']:.2f} s | {h['score_s']:.2f} s | {o['docs'] / o['score_s']:.1f} | "
              f"{h['docs'] / h['score_s']:.1f} | {o['reqs'] / o['score_s']:.1f} | {h['reqs'] / h['score_s']:.1f} | "
              f"{h['score_s'] / o['score_s']:.1f}x | {o['run_s']:.2f} s | {h['run_s']:.2f} s | "
              f"{h['run_s'] / o['run_s']:.1f}x | {same} |")
    print("\n(ratios: how many times faster kda is; items = documents, requests = (context, continuation) pairs)")
    print("acc / acc_norm: " + "; ".join(f"{k} {v[0]:.2f} / {v[1]:.2f}" if v[1] is not None else f"{k} {v[0]:.2f}"
                                         for k, v in sorted(accs.items())))
    print(f"total {time.time() - t_start:.0f} s")
    if bad:
        print("eval_bench: acc or counts differ:\n  " + "\n  ".join(bad[:10]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
