"""`kda eval` against lm-evaluation-harness (issue 5, part 3).

The model: a one-layer FLA KDAForCausalLM with the Llama 3 vocabulary (128,256 ids, hidden 32),
FLA's initialisation with its weights moved off init (so the choices' log-likelihoods differ by
more than rounding), saved with save_pretrained next to the bundled Llama 3 tokenizer files,
turned into a kda checkpoint by `kda import`, and exported back by `kda export --dtype fp32`.

Our side: `kda eval CHECKPOINT` on the task files (tests/data/eval, first items; HellaSwag as
its original JSON lines rebuilt from the text form) with --log-samples.
lm-eval's side: lm_eval.simple_evaluate with its "hf" model on the exported folder (FLA imported
first, so transformers knows model_type kda, and fla_cpu.install() so it runs on the CPU), on the
same documents through local task configs that include lm-eval's own task YAMLs (templates,
preprocessing, metrics) and only swap the dataset for a local JSON file.

Checked, per task (arc_easy, hellaswag, piqa, winogrande, mmlu_abstract_algebra 5-shot):
the (context, continuation) strings of every request are identical; every log-likelihood
agrees to rel err <= 1e-4; per document acc / acc_norm are identical; the aggregated acc,
acc_norm and their stderr are identical.

Run from the repo root: KDA_BIN=./kda .venv/bin/python tests/python/test_lm_eval_parity.py
(KDA_TEST_SEED=<n> replays a seed; KDA_EVAL_LIMIT=<n> documents per task, default 12).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

# offline, and caches inside the temporary directory (set before datasets / transformers load)
_TMP = Path(tempfile.mkdtemp(prefix="kda_lm_eval_"))
os.environ.update(HF_HOME=str(_TMP / "hf"), HF_DATASETS_CACHE=str(_TMP / "hf" / "datasets"), HF_HUB_OFFLINE="1",
                  HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                  TQDM_DISABLE="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1")

import torch  # noqa: E402

import fla_cpu  # noqa: E402

TOL = 1e-4
LIMIT = int(os.environ.get("KDA_EVAL_LIMIT", "12"))
FEWSHOT = 5
DATA = ROOT / "tests" / "data" / "eval"
TOKENIZER = ROOT / "data" / "tokenizer" / "llama3"
MODEL = dict(hidden_size=32, num_hidden_layers=1, num_heads=2, head_dim=16, expand_v=2.0, intermediate_size=64,
             vocab_size=128256, conv_size=4, norm_eps=1e-6, bos_token_id=128000, eos_token_id=128001)


def kda_bin() -> str:
    exe = Path(os.environ.get("KDA_BIN", ROOT / "kda"))
    if not exe.is_file():
        sys.exit(f"test_lm_eval_parity: {exe} not found: run `make` (or point KDA_BIN at the kda program)")
    return str(exe)


def run(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"test_lm_eval_parity: command failed ({r.returncode}):\n  {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


# ---- the model -------------------------------------------------------------------------------------

def make_model(tmp: Path, seed: int) -> tuple[Path, Path]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models.kda import KDAConfig, KDAForCausalLM
    torch.manual_seed(seed)
    cfg = KDAConfig(**MODEL, tie_word_embeddings=True, attn_mode="chunk", **fla_cpu.kda_config_flags())
    model = KDAForCausalLM(cfg).float()
    with torch.no_grad():  # off FLA's init: logits with some spread
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * (0.5 if "embeddings" in name else 0.1))
    hf = tmp / "hf"
    model.save_pretrained(hf, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / f, hf / f)
    ck, exp = tmp / "ck", tmp / "export"
    print("  " + run([kda_bin(), "import", str(hf), str(ck)]).strip())
    print("  " + run([kda_bin(), "export", str(ck), str(exp), "--dtype", "fp32"]).strip())
    return ck, exp


# ---- task files ------------------------------------------------------------------------------------

def jsonl(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def hellaswag_docs() -> list[dict]:
    """The text form's examples as the release's records: "label: ctx" split at the first ": ",
    ctx split into ctx_a / ctx_b at its last ". " (the harness joins them with a space)."""
    import bz2
    lines = bz2.open(DATA / "hellaswag" / "hellaswag_val_full.txt.bz2", "rt", encoding="utf-8").read().splitlines()
    docs = []
    for i in range(0, len(lines) - 5, 6):
        label, ctx = lines[i].split(": ", 1)
        k = ctx.rfind(". ")
        ctx_a, ctx_b = (ctx[:k + 1], ctx[k + 2:]) if k >= 0 else (ctx, "")
        docs.append({"activity_label": label, "ctx_a": ctx_a, "ctx_b": ctx_b, "endings": lines[i + 2:i + 6],
                     "label": lines[i + 1]})
    return docs


def build_tasks(tmp: Path) -> tuple[Path, Path, list[str]]:
    """Our data dir (tmp/data) and lm-eval's task dir (tmp/tasks); returns lm-eval's task names."""
    import lm_eval
    lm_tasks = Path(lm_eval.__file__).parent / "tasks"
    data, tasks = tmp / "data", tmp / "tasks"
    for d in ("arc_easy", "piqa", "winogrande"):
        shutil.copytree(DATA / d, data / d)
    for split in ("test", "dev"):
        (data / "mmlu" / split).mkdir(parents=True)
        shutil.copy(DATA / "mmlu" / split / f"abstract_algebra_{split}.csv", data / "mmlu" / split)
    hs = write_jsonl(data / "hellaswag" / "hellaswag_val.jsonl", hellaswag_docs())

    # lm-eval's documents, in the fields of the Hugging Face datasets its configs read
    docs = tmp / "docs"
    arc = [{"question": r["query"].removeprefix("Question: "),
            "choices": {"text": r["choices"], "label": [chr(65 + i) for i in range(len(r["choices"]))]},
            "answerKey": chr(65 + r["gold"])} for r in jsonl(DATA / "arc_easy" / "arc_easy.jsonl")]
    labels = (DATA / "piqa" / "valid-labels.lst").read_text().split()
    piqa = [dict(r, label=int(labels[i])) for i, r in enumerate(jsonl(DATA / "piqa" / "valid.jsonl"))]
    wino = []
    for r in jsonl(DATA / "winogrande" / "winogrande.jsonl"):
        c1, c2 = r["context_options"]
        k = 0
        while k < min(len(c1), len(c2)) and c1[k] == c2[k]:
            k += 1
        assert "_" not in c1[:k], "a context holds '_' before the blank"
        wino.append({"sentence": c1[:k] + "_ " + r["continuation"], "option1": c1[k:], "option2": c2[k:],
                     "answer": str(r["gold"] + 1)})
    import csv
    def mmlu(split):
        rows = csv.reader(open(DATA / "mmlu" / split / f"abstract_algebra_{split}.csv", newline="", encoding="utf-8"))
        return [{"question": q, "subject": "abstract_algebra", "choices": [a, b, c, d], "answer": "ABCD".index(ans)}
                for q, a, b, c, d, ans in rows]

    specs = {  # name: (lm-eval yaml, {split: docs}, extra keys)
        "kda_arc_easy": ("arc/arc_easy.yaml", {"test": arc}, {}),
        "kda_hellaswag": ("hellaswag/hellaswag.yaml", {"validation": jsonl(hs)}, {}),
        "kda_piqa": ("piqa/piqa.yaml", {"validation": piqa}, {}),
        "kda_winogrande": ("winogrande/default.yaml", {"validation": wino}, {}),
        "kda_mmlu_abstract_algebra": ("mmlu/default/mmlu_abstract_algebra.yaml",
                                      {"test": mmlu("test"), "dev": mmlu("dev")}, {"num_fewshot": FEWSHOT}),
    }
    tasks.mkdir()
    for name, (yaml_rel, splits, extra) in specs.items():
        files = {s: str(write_jsonl(docs / name / f"{s}.jsonl", rows)) for s, rows in splits.items()}
        lines = [f"include: {lm_tasks / yaml_rel}", f"task: {name}", "tag: []", "dataset_path: json",
                 "dataset_name: null", "dataset_kwargs:", "  data_files:"]
        lines += [f"    {s}: {p}" for s, p in files.items()]
        lines += ["training_split: null"]
        if "validation" not in files:
            lines += ["validation_split: null"]
        lines += [f"{k}: {v}" for k, v in extra.items()]
        (tasks / f"{name}.yaml").write_text("\n".join(lines) + "\n")
    return data, tasks, list(specs)


# ---- the two runs ------------------------------------------------------------------------------------

def run_lm_eval(exp: Path, tasks: Path, names: list[str]) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fla  # noqa: F401  (registers model_type kda with transformers' Auto classes)
    fla_cpu.install()
    return lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={exp},dtype=float32,backend=causal", tasks=names,
                                   task_manager=TaskManager(include_path=str(tasks)), limit=LIMIT, log_samples=True,
                                   batch_size=4, device="cpu", random_seed=0, numpy_random_seed=0,
                                   torch_random_seed=0, fewshot_random_seed=0)


def run_kda(ck: Path, data: Path, tmp: Path) -> tuple[dict, dict]:
    out, samples = tmp / "kda_results.json", tmp / "kda_samples.jsonl"
    table = run([kda_bin(), "eval", str(ck), "--tasks", "arc_easy,hellaswag,piqa,winogrande,mmlu_abstract_algebra",
                 "--data-dir", str(data), "--limit", str(LIMIT), "--num-fewshot", str(FEWSHOT), "--batch-size", "4",
                 "--output", str(out), "--log-samples", str(samples), "--set", "num_threads=2", "--no-progress"])
    print(table)
    by_task: dict = {}
    for s in jsonl(samples):
        by_task.setdefault(s["task"], {})[s["doc_id"]] = s
    return json.loads(out.read_text()), by_task


def lm_eval_requests(sample: dict) -> list[tuple[str, str]]:
    args = sample["arguments"]
    if isinstance(args, dict):  # {"gen_args_0": {"arg_0": ctx, "arg_1": cont}, ...}
        return [(a["arg_0"], a["arg_1"]) for a in args.values()]
    return [tuple(a[:2]) for a in args]


def main() -> int:
    seed = int(os.environ.get("KDA_TEST_SEED", int(time.time()) % 1_000_000))
    print(f"seed {seed} (replay with KDA_TEST_SEED={seed}), {LIMIT} documents per task")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    tmp = _TMP
    failures: list[str] = []
    try:
        t0 = time.time()
        ck, exp = make_model(tmp, seed)
        data, tasks, names = build_tasks(tmp)
        ours_res, ours = run_kda(ck, data, tmp)
        t1 = time.time()
        theirs_res = run_lm_eval(exp, tasks, names)
        t2 = time.time()
        print(f"kda eval + setup {t1 - t0:.1f} s, lm-eval {t2 - t1:.1f} s")
        n_ll = 0
        for name in names:
            ours_name = name.removeprefix("kda_")
            mine, their_samples = ours.get(ours_name, {}), theirs_res["samples"][name]
            worst, n_docs, bad = 0.0, 0, []
            if len(mine) != len(their_samples):
                bad.append(f"{len(mine)} documents scored by kda, {len(their_samples)} by lm-eval")
            for s in their_samples:
                m = mine.get(s["doc_id"])
                if m is None:
                    bad.append(f"doc {s['doc_id']} missing on our side")
                    continue
                n_docs += 1
                reqs = lm_eval_requests(s)
                if [tuple(a) for a in m["arguments"]] != reqs:
                    bad.append(f"doc {s['doc_id']}: requests differ:\n      ours {m['arguments']}\n      lm-eval {reqs}")
                lls = [float(r[0]) for r in s["filtered_resps"]]
                for a, b in zip(m["lls"], lls):
                    e = abs(a - b) / max(abs(b), 1e-30)
                    worst = max(worst, e)
                    n_ll += 1
                    if e > TOL:
                        bad.append(f"doc {s['doc_id']}: ll {a!r} vs lm-eval {b!r} (rel {e:.2e})")
                for metric in ("acc", "acc_norm"):
                    if metric in s and float(m.get(metric, -1)) != float(s[metric]):
                        bad.append(f"doc {s['doc_id']}: {metric} {m.get(metric)} vs lm-eval {s[metric]}")
            r_ours, r_theirs = ours_res["results"][ours_name], theirs_res["results"][name]
            agg = []
            for key in ("acc,none", "acc_stderr,none", "acc_norm,none", "acc_norm_stderr,none"):
                if key not in r_theirs:
                    continue
                a, b = r_ours.get(key), r_theirs[key]
                same = (a == b == "N/A") or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-12))
                agg.append(f"{key.split(',')[0]} {b if isinstance(b, str) else round(b, 4)}")
                if not same:
                    bad.append(f"{key}: ours {a} vs lm-eval {b}")
            status = "ok  " if not bad else "FAIL"
            print(f"  {status}  {name:<28} {n_docs} docs, lls worst rel err {worst:.2e}; " + ", ".join(agg))
            for b in bad[:5]:
                print(f"        {b}")
            if bad:
                failures.append(name)
        if n_ll == 0:
            failures.append("no log-likelihood compared")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"test_lm_eval_parity: FAILED (seed {seed}): {', '.join(failures)}")
        return 1
    print(f"test_lm_eval_parity: {len(names)} tasks identical to lm-eval, {n_ll} log-likelihoods within {TOL:g} "
          f"(seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
