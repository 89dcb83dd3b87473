"""`kda generate` against transformers + FLA's generate (issue 5, part 1): identical greedy ids.

Byte vocabulary: `kda train` makes a tiny checkpoint (configs/tiny-bytes.yaml, 30 iterations, so the
continuations are not one repeated byte), `kda export --dtype fp32` writes it as an HF folder,
and transformers loads that folder in float32 (FLA imported first so model_type "kda" is
known; FLA's Triton entry points replaced by fla_cpu). For three prompts — one longer than 64
tokens, so kda's prefill spans two feed blocks and FLA's prefill takes its chunk path — the
ids of `kda generate CKPT --prompt P --max-new-tokens 40 --print-ids` (greedy) must equal
those of model.generate(ids, max_new_tokens=40, do_sample=False), both with use_cache=True
(FLA's recurrent decode: conv state + KDA state carried in its Cache, one token per step)
and with use_cache=False (the whole sequence again at every step). tokenizer_type byte: the
prompt's bytes are its ids, no BOS (the config sets none). Also checked: kda's text output is
the prompt and the bytes of those ids; FLA's cached run really decoded one token at a time
from a cache; the continuations are not degenerate (several distinct ids); greedy with a
repetition penalty of 1.2 matches as well (Hugging Face's RepetitionPenaltyLogitsProcessor).

Llama 3 vocabulary: a KDAForCausalLM (vocab 128256, hidden 32, 1 layer) with FLA's own
initialisation, saved with save_pretrained next to the bundled Llama 3 tokenizer files and
turned into a kda checkpoint by `kda import`. Greedy 20 tokens from `kda generate` and from
transformers on FLA's folder, on the same prompt ids (BOS 128000 + the tokenizer's ids of the
text): identical ids. FLA's initialisation makes a model that repeats one token, so the same is
also done with every weight moved off init by N(0, 0.5^2) noise, where the ids vary.

The smallest gap between the two largest logits over every greedy step (FLA's side) is
printed: a mismatch at a step where it is ~1e-6 would be a tie broken by rounding, not a bug.

Run from the repo root:
  KDA_BIN=$PWD/kda .venv/bin/python tests/python/test_generate_parity.py
(KDA_TEST_SEED=<n> changes the Llama 3 model's seed.)
"""

from __future__ import annotations

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

_TMP = Path(tempfile.mkdtemp(prefix="kda_gen_parity_"))
os.environ.update(HF_HOME=str(_TMP / "hf_home"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                  TOKENIZERS_PARALLELISM="false", HF_HUB_DISABLE_PROGRESS_BARS="1")

import torch  # noqa: E402

import fla_cpu  # noqa: E402

NEW_BYTE = 40
NEW_LLAMA = 20
TOKENIZER = ROOT / "data" / "tokenizer" / "llama3"
LLAMA_MODEL = dict(hidden_size=32, num_hidden_layers=1, num_heads=2, head_dim=16, expand_v=2.0, intermediate_size=64,
                   vocab_size=128256, conv_size=4, norm_eps=1e-6, bos_token_id=128000, eos_token_id=128001)
BOS = 128000

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"  {'ok  ' if ok else 'FAIL'}  {what}")
    if not ok:
        failures.append(what)


def kda_bin() -> str:
    exe = Path(os.environ.get("KDA_BIN", ROOT / "kda"))
    if not exe.is_file():
        sys.exit(f"test_generate_parity: {exe} not found: run `make kda` (or point KDA_BIN at the kda program)")
    return str(exe.resolve())


def run(cmd: list, what: str) -> bytes:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"test_generate_parity: {what} failed ({r.returncode}):\n  {' '.join(map(str, cmd))}\n"
                 f"{r.stdout.decode(errors='replace')}{r.stderr.decode(errors='replace')}")
    return r.stdout


def kda_ids(ckpt: Path, prompt: str, new: int, *extra) -> list[int]:
    out = run([kda_bin(), "generate", ckpt, "--prompt", prompt, "--max-new-tokens", new, "--print-ids",
               "--set", "num_threads=1", *extra], "kda generate --print-ids").decode()
    return [int(t) for t in out.split()]


# ---- FLA's side -------------------------------------------------------------------------------

class DecodeLog:
    """Records every KDA layer call: (tokens in the call, whether FLA's cache held this layer's
    KDA state and conv state on entry), as the layer itself looks them up."""

    def __init__(self, model):
        from fla.layers.kda import KimiDeltaAttention
        self.calls: list[tuple[int, bool]] = []
        self.handles = [m.register_forward_pre_hook(self._hook, with_kwargs=True)
                        for m in model.modules() if isinstance(m, KimiDeltaAttention)]
        self.n_layers = len(self.handles)

    def _hook(self, module, args, kwargs):
        from fla.layers.utils import get_layer_cache
        h = args[0] if args else kwargs["hidden_states"]
        cache = kwargs.get("past_key_values")
        state = get_layer_cache(module, cache) if cache is not None else None
        carried = state is not None and state.get("recurrent_state") is not None \
            and state.get("conv_state") is not None and all(c is not None for c in state["conv_state"])
        self.calls.append((h.shape[1], carried))

    def close(self):
        for h in self.handles:
            h.remove()


def hf_generate(model, ids: list[int], new: int, use_cache: bool, **kw) -> tuple[list[int], float, DecodeLog]:
    """Greedy continuation ids, the smallest top-2 logit gap over the steps, the KDA layer calls."""
    log = DecodeLog(model)
    try:
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False, use_cache=use_cache,
                                 output_scores=True, return_dict_in_generate=True, **kw)
    finally:
        log.close()
    gen = out.sequences[0, len(ids):].tolist()
    gap = min((s[0].topk(2).values[0] - s[0].topk(2).values[1]).item() for s in out.scores)
    return gen, gap, log


def load_hf(folder: Path):
    from transformers import AutoModelForCausalLM
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return model.eval()


def one_token_steps(log: DecodeLog, n_prompt: int, n_new: int) -> bool:
    """FLA's cached generate: the prompt once per layer from no state, then one token per step
    and layer from the carried KDA + conv state."""
    calls, n_layers = log.calls, log.n_layers
    if n_layers == 0 or len(calls) != n_layers * n_new or any(c != (n_prompt, False) for c in calls[:n_layers]):
        return False
    return all(c == (1, True) for c in calls[n_layers:])


def compare(name: str, ck: Path, model, prompt: str, prompt_ids: list[int], new: int,
            kda_extra: tuple = (), hf_extra: dict | None = None) -> list[int]:
    hf_extra = hf_extra or {}
    t0 = time.time()
    ours = kda_ids(ck, prompt, new, *kda_extra)
    t1 = time.time()
    cached, gap_c, log = hf_generate(model, prompt_ids, new, True, **hf_extra)
    t2 = time.time()
    full, gap_f, _ = hf_generate(model, prompt_ids, new, False, **hf_extra)
    t3 = time.time()
    print(f"    {name}: kda {t1 - t0:.2f} s, FLA cached {t2 - t1:.2f} s, FLA uncached {t3 - t2:.2f} s; "
          f"smallest top-2 logit gap {min(gap_c, gap_f):.3g}")
    print(f"      kda: {ours}")
    same = ours == cached
    if not same:
        print(f"      FLA: {cached}")
    check(same, f"{name}: kda's {len(ours)} greedy ids == transformers+FLA generate (use_cache=True)")
    check(ours == full, f"{name}: kda's ids == transformers+FLA generate (use_cache=False)")
    check(one_token_steps(log, len(prompt_ids), len(cached)),
          f"{name}: FLA's cached run: prompt ({len(prompt_ids)} tokens) once, then {len(cached) - 1} one-token "
          f"steps from its carried KDA + conv state ({len(log.calls)} KDA layer calls, {log.n_layers} layers)")
    return ours


# ---- byte vocabulary: the trained tiny model --------------------------------------------------

def byte_model_part(tmp: Path) -> None:
    print("byte vocabulary: tiny checkpoint (configs/tiny-bytes.yaml, 30 iterations), fp32 export")
    save, exp = tmp / "tiny", tmp / "tiny_hf"
    t = time.time()
    run([kda_bin(), "train", "configs/tiny-bytes.yaml", "--device", "cpu", "--set", "train_iters=30", "--set",
         "lr_warmup_iters=2", "--set", "sample_tokens=0", "--set", f"save={save}", "--set", "log_interval=30"],
        "kda train")
    print(f"  trained in {time.time() - t:.1f} s; " + run([kda_bin(), "export", save, exp, "--dtype", "fp32"],
                                                           "kda export").decode().strip())
    model = load_hf(exp)
    check(model.config.bos_token_id is None and model.config.vocab_size == 256,
          "exported config: vocab 256, no BOS (a prompt's ids are its bytes)")
    shakespeare = (ROOT / "data" / "tinyshakespeare.txt").read_bytes()[1900:2000].decode()
    prompts = ["the", "O, what a", shakespeare]
    distinct = set()
    for i, p in enumerate(prompts):
        ids = list(p.encode())
        ours = compare(f"prompt {i + 1} ({len(ids)} bytes)", save, model, p, ids, NEW_BYTE)
        distinct |= set(ours)
        text = run([kda_bin(), "generate", save, "--prompt", p, "--max-new-tokens", NEW_BYTE, "--set", "num_threads=1"],
                   "kda generate")
        check(text == p.encode() + bytes(ours) + b"\n", f"prompt {i + 1}: kda's text = prompt + the bytes of its ids")
    check(len(distinct) >= 5, f"the continuations use {len(distinct)} distinct bytes (>= 5: not one repeated byte)")
    compare("prompt 1, repetition penalty 1.2", save, model, prompts[0], list(prompts[0].encode()), NEW_BYTE,
            ("--repetition-penalty", "1.2"), {"repetition_penalty": 1.2})


# ---- Llama 3 vocabulary: an FLA-initialised model through kda import --------------------------

def llama_model_part(tmp: Path, seed: int) -> None:
    from tokenizers import Tokenizer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models.kda import KDAConfig, KDAForCausalLM
    tok = Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
    prompt = "The capital of France is"
    ids = [BOS] + tok.encode(prompt, add_special_tokens=False).ids
    for moved in (False, True):
        name = "FLA init" + (", weights moved off init" if moved else "")
        print(f"Llama 3 vocabulary: KDAForCausalLM(vocab 128256, hidden 32, 1 layer), {name}, seed {seed}")
        torch.manual_seed(seed)
        cfg = KDAConfig(**LLAMA_MODEL, tie_word_embeddings=True, attn_mode="chunk", **fla_cpu.kda_config_flags())
        model = KDAForCausalLM(cfg).float()
        if moved:
            with torch.no_grad():
                for pname, p in model.named_parameters():
                    p.add_(torch.randn_like(p) * 0.5)
        hf = tmp / f"llama_hf_{int(moved)}"
        model.save_pretrained(hf, safe_serialization=True)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(TOKENIZER / f, hf / f)
        ck = tmp / f"llama_ck_{int(moved)}"
        print("  " + run([kda_bin(), "import", hf, ck], "kda import").decode().strip())
        model = load_hf(hf)  # FLA's own folder, as transformers reads it
        ours = compare(f"'{prompt}' ({len(ids)} ids with BOS)", ck, model, prompt, ids, NEW_LLAMA)
        if moved:
            check(len(set(ours)) >= 5, f"{len(set(ours))} distinct ids in the continuation (>= 5)")


def main() -> int:
    seed = int(os.environ.get("KDA_TEST_SEED", "7"))
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fla  # noqa: F401  registers model_type "kda" with transformers
        from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    # transformers 5 warns that FLA's prepare_inputs_for_generation still names past_key_values
    warnings.filterwarnings("ignore", category=FutureWarning)
    for line in fla_cpu.install():
        print(f"  fla_cpu: {line}")
    torch.set_num_threads(1)
    try:
        byte_model_part(_TMP)
        llama_model_part(_TMP, seed)
    finally:
        shutil.rmtree(_TMP, ignore_errors=True)
    print(f"test_generate_parity: {'FAILED ' + str(len(failures)) if failures else 'all passed'} "
          f"({time.time() - t0:.1f} s)")
    for f in failures:
        print(f"  failed: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
