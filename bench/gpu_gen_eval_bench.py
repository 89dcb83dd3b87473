"""Generation and scoring side by side on one device: kda vs transformers + FLA, same model, same items.

    bash bench/gpu_gen_eval_bench.sh        # the GPU machine (FLA from .whl/, kda from build/cuda-device/)
    KDA_BIN=$PWD/kda .venv/bin/python bench/gpu_gen_eval_bench.py --device cpu --shape tiny   # CPU path

The model: FLA's KDAForCausalLM with the 300M shape of configs/kda-300M.yaml (hidden 1024, 12
layers, 8 heads x 32, value heads x 2, MLP 4096, Llama 3 vocabulary of 128,256 ids, tied
embedding) or, for --shape tiny, the same layout at hidden 64 / 2 layers / MLP 128; FLA's random
initialisation moved off init (embeddings + N(0, 0.5), the rest + N(0, 0.1), as bench/eval_bench.py,
so greedy text is not one repeated id and the choices' log-likelihoods differ), saved with
save_pretrained (fp32) next to the bundled Llama 3 tokenizer files. kda gets it through `kda import`;
transformers loads that folder itself. Both sides run the same weights: on CUDA in bf16 (kda: bf16
working copy of the fp32 masters; transformers: the model cast to bf16, FLA's Triton kernels), on the
CPU in fp32 (transformers through tests/python/fla_cpu.py's torch substitutes).

Generation (greedy, no end of text, exactly --new-tokens ids; prompts of three lengths cut from Tiny
Shakespeare, BOS + Llama 3 ids): `kda generate --device D --show-stats --print-ids` in one process,
a warm-up prompt first, then --repeat rounds; transformers: model.generate(..., do_sample=False,
use_cache=True) timed by a streamer, one warm-up generation first. Per prompt the best of the
rounds: time to first token (prefill included) and decode tokens/s ((N - 1) / first-to-last).

Scoring (arc_easy, hellaswag, piqa from tests/data/eval, the first --limit documents each, 0-shot,
batch --batch-size): `kda eval --device D`, scoring time from its "... requests" stderr line to
the process's exit, and the whole process; lm-eval's `hf` model on the same folder and device
through tests/python/test_lm_eval_parity.py's local task configs, time inside
HFLM._loglikelihood_tokens and the whole simple_evaluate. Where lm-eval is not installed (the GPU
machine has no internet), the reference is a minimal loop instead: the (context, continuation)
pairs of kda's own samples file, tokenized the way lm-eval's _encode_pair does (BOS added unless
the text starts with it), one right-padded forward per batch of --batch-size inputs (longest
first), log-softmax, the continuation tokens' sum; it is said so in the table. Per-document acc
agreement is printed (bf16 on CUDA can flip near-ties, so it is reported, not required).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import bench_env  # noqa: E402  (bench/ is the script's directory)
import kda_runs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))

# offline and caches in its temporary directory (set before transformers loads)
import test_lm_eval_parity as parity  # noqa: E402

import torch  # noqa: E402

import fla_cpu  # noqa: E402

TMP = parity._TMP
TASKS = ("arc_easy", "hellaswag", "piqa")
SHAPES = {
    "300M": dict(hidden_size=1024, num_hidden_layers=12, num_heads=8, head_dim=32, expand_v=2.0,
                 intermediate_size=4096),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_heads=2, head_dim=32, expand_v=2.0, intermediate_size=128),
}
COMMON = dict(vocab_size=128256, conv_size=4, norm_eps=1e-6, bos_token_id=128000, eos_token_id=128001,
              max_position_embeddings=2048)


def kda_bin() -> str:
    return kda_runs.kda_bin("gpu_gen_eval_bench", "`make` (or `make cuda-device-bins` and KDA_BIN=build/cuda-device/kda)")


def run(cmd: list, what: str, env=None) -> subprocess.CompletedProcess:
    return kda_runs.run(cmd, what, "gpu_gen_eval_bench", env=env)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# ---- the model ----------------------------------------------------------------------------------------

def fla_bridges(device: str) -> None:
    """On the CPU: fla_cpu's torch substitutes. On the GPU FLA's kernels run; only the transformers-5
    bridges of fla_cpu are applied (tied-weights dict, `cache=` passed on to FLA's forward)."""
    if device == "cpu":
        fla_cpu.install()
        return
    import inspect
    import transformers
    from fla.models.kda.modeling_kda import KDAForCausalLM
    if int(transformers.__version__.split(".")[0]) >= 5:
        tied = getattr(KDAForCausalLM, "_tied_weights_keys", None)
        if isinstance(tied, (list, tuple)):
            KDAForCausalLM._tied_weights_keys = {"lm_head.weight": "model.embeddings.weight"}
        if "cache" not in inspect.signature(KDAForCausalLM.forward).parameters:
            KDAForCausalLM.forward = fla_cpu._forward_taking_cache(KDAForCausalLM.forward)


def make_model(shape: str, device: str) -> tuple[Path, Path, int]:
    """(FLA folder, kda checkpoint, parameter count)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models.kda import KDAConfig, KDAForCausalLM
    flags = fla_cpu.kda_config_flags() if device == "cpu" else {}
    torch.manual_seed(0)
    model = KDAForCausalLM(KDAConfig(**SHAPES[shape], **COMMON, tie_word_embeddings=True, attn_mode="chunk",
                                     **flags)).float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * (0.5 if "embeddings" in name else 0.1))
    n_params = sum(p.numel() for p in model.parameters())
    fla = TMP / "fla_model"
    model.save_pretrained(fla, safe_serialization=True)
    del model
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(parity.TOKENIZER / f, fla / f)
    ck = TMP / "kda_ck"
    run([kda_bin(), "import", fla, ck], "kda import")
    return fla, ck, n_params


def load_hf(fla: Path, device: str):
    from transformers import AutoModelForCausalLM
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    # loaded as saved (fp32), then cast: works whether this transformers spells it dtype or torch_dtype
    return AutoModelForCausalLM.from_pretrained(fla).to(device=device, dtype=dtype).eval()


# ---- generation -----------------------------------------------------------------------------------------

def kda_generate(ck: Path, prompts: list[str], a) -> list[dict]:
    cmd = [kda_bin(), "generate", ck, "--device", a.device, "--max-new-tokens", a.new_tokens, "--print-ids",
           "--show-stats"]
    if a.device == "cpu":
        cmd += ["--set", f"num_threads={a.threads}"]
    return kda_runs.kda_generate(cmd, prompts, a.repeat, "gpu_gen_eval_bench")


def hf_generate(model, prompt_ids: list[list[int]], a) -> list[dict]:
    def one(ids):
        clock = kda_runs.Clock()
        x = torch.tensor([ids], device=a.device)
        with torch.no_grad():
            sync(a.device)
            t0 = time.perf_counter()
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=a.new_tokens, do_sample=False,
                                 use_cache=True, streamer=clock, pad_token_id=COMMON["eos_token_id"])
        gen = out[0, len(ids):].tolist()
        rate = (len(gen) - 1) / (clock.times[-1] - clock.times[0]) if len(gen) > 1 else 0.0
        return {"prompt_tokens": len(ids), "ttft_ms": (clock.times[0] - t0) * 1e3, "tok_s": rate, "ids": gen}

    for ids in prompt_ids:  # warm-up: FLA's Triton kernels compile per shape class on first use
        one(ids)
    runs = [one(ids) for _ in range(a.repeat) for ids in prompt_ids]
    return [kda_runs.best(runs[k::len(prompt_ids)]) for k in range(len(prompt_ids))]


def common_prefix(x: list[int], y: list[int]) -> int:
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n


# ---- scoring ----------------------------------------------------------------------------------------------

def kda_data_dir() -> Path:
    """arc_easy, piqa as bundled; hellaswag as its original JSON lines (test_lm_eval_parity.py)."""
    data = TMP / "data_kda"
    for d in ("arc_easy", "piqa"):
        shutil.copytree(parity.DATA / d, data / d)
    parity.write_jsonl(data / "hellaswag" / "hellaswag_val.jsonl", parity.hellaswag_docs())
    return data


def kda_eval(ck: Path, data: Path, a) -> dict:
    out, samples = TMP / "kda_eval.json", TMP / "kda_samples.jsonl"
    cmd = [kda_bin(), "eval", ck, "--device", a.device, "--tasks", ",".join(TASKS), "--data-dir", data, "--limit",
           a.limit, "--batch-size", a.batch_size, "--output", out, "--log-samples", samples, "--no-progress"]
    if a.device == "cpu":
        cmd += ["--set", f"num_threads={a.threads}"]
    return kda_runs.kda_eval_timed(cmd, out, samples, "gpu_gen_eval_bench")


def have_lm_eval() -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import lm_eval  # noqa: F401
            from lm_eval.models.huggingface import HFLM  # noqa: F401
        return True
    except Exception:  # noqa: BLE001  (missing, or its optional imports missing)
        return False


def lm_eval_score(fla: Path, a) -> dict:
    from lm_eval.models.huggingface import HFLM
    _, tasks, _ = parity.build_tasks(Path(tempfile.mkdtemp(prefix="lm_eval_", dir=TMP)))  # fresh per pass
    t_load = time.perf_counter()
    lm = HFLM(pretrained=str(fla), dtype="bfloat16" if a.device == "cuda" else "float32", backend="causal",
              batch_size=a.batch_size, device=a.device)
    load_s = time.perf_counter() - t_load
    res, clock, run_s = kda_runs.lm_eval_timed(lm, [f"kda_{t}" for t in TASKS], tasks, a.limit,
                                               sync=lambda: sync(a.device))
    samples = {t: {s["doc_id"]: s for s in res["samples"][f"kda_{t}"]} for t in TASKS}
    return {"what": "lm-eval hf", "docs": sum(len(v) for v in samples.values()), "reqs": clock["reqs"],
            "score_s": clock["s"], "run_s": run_s, "load_s": load_s, "samples": samples}


def encode_pair(tok, bos: int, ctx: str, cont: str) -> tuple[list[int], list[int]]:
    """lm-eval's _encode_pair with the Llama 3 tokenizer's BOS (kda's eval codec does the same)."""
    def enc(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=not text.startswith("<|begin_of_text|>")).ids
    if not ctx:
        return [bos], tok.encode(cont, add_special_tokens=False).ids
    n = len(ctx) - len(ctx.rstrip())
    if n:
        ctx, cont = ctx[:-n], ctx[-n:] + cont
    whole, c = enc(ctx + cont), enc(ctx)
    return c, whole[len(c):]


def loop_score(model, samples: dict, a) -> dict:
    """The minimal forward-scoring loop on the pairs of kda's samples (when lm-eval is missing)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(parity.TOKENIZER / "tokenizer.json"))
    reqs = []  # (input ids, continuation length, (task, doc, choice))
    t0 = time.perf_counter()
    for t, docs in samples.items():
        for d, s in docs.items():
            for c, (ctx, cont) in enumerate(s["arguments"]):
                ci, co = encode_pair(tok, COMMON["bos_token_id"], ctx, cont)
                full = (ci + co)[-2049:]
                reqs.append((full[:-1], full[1:], len(co), (t, d, c)))
    reqs.sort(key=lambda r: -len(r[0]))
    ll: dict = {}
    sync(a.device)
    t_score = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(reqs), a.batch_size):
            batch = reqs[i:i + a.batch_size]
            T = len(batch[0][0])
            x = torch.zeros((len(batch), T), dtype=torch.long)
            for b, r in enumerate(batch):
                x[b, :len(r[0])] = torch.tensor(r[0])
            logp = torch.log_softmax(model(input_ids=x.to(a.device)).logits.float(), dim=-1)
            for b, (inp, tgt, n, key) in enumerate(batch):
                pos = torch.arange(len(inp) - n, len(inp), device=a.device)
                ll[key] = logp[b, pos, torch.tensor(tgt[-n:], device=a.device)].sum().item()
    sync(a.device)
    t_end = time.perf_counter()
    out = {t: {} for t in samples}
    for (t, d, c), v in ll.items():
        out[t].setdefault(d, {})[c] = v
    acc = {t: {d: {"acc": float(max(range(len(v)), key=lambda c: v[c]) == samples[t][d]["target"])}
               for d, v in docs.items()} for t, docs in out.items()}
    return {"what": "FLA forward loop (no lm-eval)", "docs": sum(len(v) for v in samples.values()), "reqs": len(reqs),
            "score_s": t_end - t_score, "run_s": t_end - t0, "load_s": 0.0, "samples": acc}


def acc_agreement(ours: dict, theirs: dict) -> tuple[int, int]:
    same = total = 0
    for t in TASKS:
        for d, s in theirs["samples"][t].items():
            m = ours["samples"].get(t, {}).get(d)
            if m is None:
                continue
            total += 1
            same += float(m["acc"]) == float(s["acc"])
    return same, total


# ---- main ---------------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--shape", default="300M", choices=tuple(SHAPES))
    ap.add_argument("--new-tokens", type=int, default=128, help="new tokens per prompt (default 128)")
    ap.add_argument("--repeat", type=int, default=2, help="timed rounds of the prompts per side (default 2)")
    ap.add_argument("--limit", type=int, default=50, help="documents per task (default 50)")
    ap.add_argument("--batch-size", type=int, default=32, help="inputs per forward when scoring (default 32)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads on both sides (--device cpu)")
    ap.add_argument("--skip", default="", help="comma list: generate, eval (parts to leave out)")
    ap.add_argument("--reference", default="auto", choices=("auto", "lm-eval", "loop"),
                    help="scoring reference: lm-eval when installed (auto), or the minimal FLA loop")
    ap.add_argument("--ref-warmup", type=int, default=None,
                    help="1: score once untimed before the timed reference pass (default: 1 on cuda, where FLA's "
                         "Triton kernels compile on first use; 0 on cpu)")
    a = ap.parse_args()
    if a.ref_warmup is None:
        a.ref_warmup = 1 if a.device == "cuda" else 0
    t_start = time.time()
    warnings.filterwarnings("ignore")
    import logging
    logging.disable(logging.WARNING)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_gen_eval_bench: --device cuda but torch sees no GPU")
    if a.device == "cpu":
        torch.set_num_threads(a.threads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fla  # noqa: F401  registers model_type "kda" with transformers
        from transformers.utils import logging as hf_logging
        from tokenizers import Tokenizer
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    fla_bridges(a.device)
    skip = set(filter(None, a.skip.split(",")))
    gen_rows, ev = [], None
    try:
        fla, ck, n_params = make_model(a.shape, a.device)
        print(f"[{a.shape} model ({n_params / 1e6:.1f} M parameters) made and imported in {time.time() - t_start:.1f} s]",
              flush=True)
        if "generate" not in skip:
            text = (ROOT / "data" / "tinyshakespeare.txt").read_text()
            prompts = [text[:24], text[:300], text[:1500]]
            tok = Tokenizer.from_file(str(parity.TOKENIZER / "tokenizer.json"))
            prompt_ids = [[COMMON["bos_token_id"]] + tok.encode(p, add_special_tokens=False).ids for p in prompts]
            t = time.time()
            ours = kda_generate(ck, prompts, a)
            print(f"[kda generate: {time.time() - t:.1f} s]", flush=True)
            t = time.time()
            model = load_hf(fla, a.device)
            theirs = hf_generate(model, prompt_ids, a)
            print(f"[transformers + FLA generate: {time.time() - t:.1f} s, warm-up included]", flush=True)
            del model
            for o, h in zip(ours, theirs):
                if o["prompt_tokens"] != h["prompt_tokens"]:
                    sys.exit(f"gpu_gen_eval_bench: prompt lengths differ ({o['prompt_tokens']} vs {h['prompt_tokens']})")
                gen_rows.append((o, h))
        if "eval" not in skip:
            t = time.time()
            ours = kda_eval(ck, kda_data_dir(), a)
            print(f"[kda eval: {time.time() - t:.1f} s]", flush=True)
            t = time.time()
            use_lm_eval = a.reference == "lm-eval" or (a.reference == "auto" and have_lm_eval())
            if use_lm_eval:
                if a.ref_warmup:  # FLA's Triton kernels compile/autotune on first use: one untimed pass
                    lm_eval_score(fla, a)
                    print(f"[lm-eval warm-up pass (untimed): {time.time() - t:.1f} s]", flush=True)
                theirs = lm_eval_score(fla, a)
            else:
                print("[the scoring reference is a minimal FLA forward-scoring loop on kda's (context, continuation) "
                      f"pairs ({'lm-eval is not installed here' if a.reference == 'auto' else '--reference loop'})]",
                      flush=True)
                t_load = time.perf_counter()
                model = load_hf(fla, a.device)
                load_s = time.perf_counter() - t_load
                if a.ref_warmup:
                    loop_score(model, ours["samples"], a)
                theirs = loop_score(model, ours["samples"], a)
                theirs["load_s"] = load_s
                del model
            print(f"[{theirs['what']}: {time.time() - t:.1f} s]", flush=True)
            ev = (ours, theirs)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)

    import fla as fla_mod
    dev = torch.cuda.get_device_name() if a.device == "cuda" else "CPU"
    try:
        where = bench_env.machine(f"FLA {fla_mod.__version__}")
    except Exception as e:  # noqa: BLE001  (no git or lscpu on the machine: the numbers still count)
        where = f"(machine line unavailable: {e}); torch {torch.__version__}, FLA {fla_mod.__version__}"
    print(f"\nmachine: {where}; device {dev}")
    prec = "bf16" if a.device == "cuda" else "fp32"
    print(f"model: FLA KDAForCausalLM, {a.shape} shape, {n_params / 1e6:.1f} M parameters, random init off init; "
          f"{a.device}, {prec}\n")
    if gen_rows:
        print(f"generation: greedy, {a.new_tokens} new tokens, best of {a.repeat}")
        print("| prompt tokens | kda TTFT | HF+FLA TTFT | TTFT ratio | kda decode | HF+FLA decode | decode ratio | "
              "same ids (prefix) |")
        print("|---|---|---|---|---|---|---|---|")
        for o, h in gen_rows:
            n = common_prefix(o["ids"], h["ids"])
            print(f"| {o['prompt_tokens']} | {o['ttft_ms']:.1f} ms | {h['ttft_ms']:.1f} ms | "
                  f"{h['ttft_ms'] / max(o['ttft_ms'], 0.05):.1f}x | {o['tok_s']:.0f} tok/s | {h['tok_s']:.0f} tok/s | "
                  f"{o['tok_s'] / max(h['tok_s'], 1e-9):.1f}x | {n}/{len(o['ids'])} |")
        print()
    if ev:
        o, h = ev
        same, total = acc_agreement(o, h)
        print(f"scoring: {', '.join(TASKS)}, first {a.limit} documents each, 0-shot, batch {a.batch_size}; "
              f"reference: {h['what']}")
        print("| side | documents | requests | scoring | items/s | requests/s | whole run |")
        print("|---|---|---|---|---|---|---|")
        print(f"| kda eval | {o['docs']} | {o['reqs']} | {o['score_s']:.2f} s | {o['docs'] / o['score_s']:.1f} | "
              f"{o['reqs'] / o['score_s']:.1f} | {o['run_s']:.2f} s |")
        print(f"| {h['what']} | {h['docs']} | {h['reqs']} | {h['score_s']:.2f} s | {h['docs'] / h['score_s']:.1f} | "
              f"{h['reqs'] / h['score_s']:.1f} | {h['run_s']:.2f} s (+ load {h['load_s']:.1f} s) |")
        print(f"\nscoring ratio {h['score_s'] / o['score_s']:.1f}x; per-document acc agrees on {same}/{total} "
              f"(acc kda: " + ", ".join(f"{t} {o['results'][t]['acc,none']:.2f}" for t in TASKS) + ")")
    print(f"\n(ratios: how many times faster kda is; total {time.time() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
