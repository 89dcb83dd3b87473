"""`kda export` / `kda import` against transformers + FLA's KDAForCausalLM (fp32, CPU) — issue 4.

Export: `kda train` makes a tiny checkpoint (configs/tiny-bytes.yaml, 3 iterations), `kda export`
writes it as an HF folder in fp32 (--dtype fp32) and in bf16 (the default).
transformers' AutoModelForCausalLM.from_pretrained loads each folder in float32 (after
`import fla` registers model_type "kda"; FLA's Triton entry points replaced by fla_cpu).
Checked:
  - the folder's tensors are the checkpoint's, bit for bit (fp32) or rounded to bf16 (bf16),
    and from_pretrained loads every one of them (no missing / unexpected / resized tensor,
    lm_head tied to the embedding);
  - logits on the same tokens: transformers vs kda's own (build/tools/model_io --load CKPT),
    rel err <= 1e-4 for the fp32 export; for the bf16 export kda runs on the same
    bf16-rounded weights (the export imported back with `kda import`), rel err <= 1e-4 too;
    the bf16 export against kda's fp32 logits is checked with BF16_TOL (bf16 keeps 8
    significant bits: each weight moves by up to 2^-9 = 2e-3 relative, and the logits of a
    2-layer model move by a few times that);
  - the loss (labels = input_ids) of both sides, |delta| <= 1e-4.

Import (the reference recipe's FLA-init flow): KDAForCausalLM(KDAConfig(tiny)) built under
torch.manual_seed(42) (FLA's own initialisation; intermediate_size left null, as FLA's
default config has it), saved with save_pretrained in four forms: transformers' own (no
lm_head.weight), with an explicit lm_head.weight copy, sharded (max_shard_size small enough
for several shards plus model.safetensors.index.json), and cast to bf16. Each is run
through `kda import`; checked:
  - the imported checkpoint's tensors equal FLA's state dict bit for bit (bf16 values for
    the bf16 folder);
  - the first-iteration loss: FLA's forward on a batch vs kda's loss on the same batch from
    the imported checkpoint (model_io --load), |delta| <= 1e-4 (and logits rel err <= 1e-4);
  - `kda export --dtype fp32` of the imported checkpoint gives back FLA's tensors bit for bit
    and a config.json with FLA's sizes and token ids.

Run from the repo root:
  KDA_BIN=$PWD/kda KDA_BUILD=build .venv/bin/python tests/python/test_export_import.py
(KDA_TEST_SEED=<n> replays the token batch.)
"""

from __future__ import annotations

import copy
import json
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

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import fla_cpu  # noqa: E402

TOL = 1e-4        # logits rel err, and |loss delta|, fp32 paths
BF16_TOL = 2e-2   # logits rel err, bf16 export vs kda's fp32 weights
B, T = 2, 100     # T = 100: one full chunk of 64 and a partial one
FLA_MODEL = dict(hidden_size=64, num_hidden_layers=2, num_heads=2, head_dim=16, expand_v=2.0, conv_size=4,
                 vocab_size=256, intermediate_size=None, hidden_ratio=4, norm_eps=1e-6, tie_word_embeddings=True,
                 bos_token_id=1, eos_token_id=2)

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"  {'ok  ' if ok else 'FAIL'}  {what}")
    if not ok:
        failures.append(what)


def rel(a, b) -> float:
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    nb = torch.linalg.vector_norm(b).item()
    d = torch.linalg.vector_norm(a - b).item()
    return d / nb if nb > 0 else d


def exe_paths() -> tuple[Path, Path]:
    kda = Path(os.environ.get("KDA_BIN", ROOT / "kda"))
    build = Path(os.environ.get("KDA_BUILD", "build"))
    if not build.is_absolute():
        build = ROOT / build
    model_io = build / "tools" / "model_io"
    for p, how in ((kda, "make kda (or set KDA_BIN)"), (model_io, f"make {build.name}/tools/model_io")):
        if not p.is_file():
            sys.exit(f"test_export_import: {p} not found: build it with `{how}`")
    return kda, model_io


def run(cmd: list, what: str) -> str:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"test_export_import: {what} failed ({r.returncode}):\n  {' '.join(map(str, cmd))}\n"
                 f"{r.stdout}{r.stderr}")
    return r.stdout.strip()


def kda_side(model_io: Path, ckpt_dir: Path, ids_path: Path, out: Path) -> dict:
    """kda's logits and loss for the ids, weights from a checkpoint directory."""
    line = run([model_io, "--config", ckpt_dir / "config.yaml", "--load", ckpt_dir, "--ids", ids_path,
                "--batch", B, "--seq", T, "--out", out], f"model_io --load {ckpt_dir}")
    print("    " + line)
    return {"logits": load_file(out / "logits.safetensors")["logits"],
            "loss": json.loads((out / "loss.json").read_text())["loss"]}


def latest(save_dir: Path) -> Path:
    return save_dir / (save_dir / "latest").read_text().strip()


def folder_tensors(folder: Path) -> tuple[dict, dict]:
    """All tensors of an HF folder (single file or shards) and their dtypes as stored."""
    index = folder / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() \
        else ["model.safetensors"]
    tensors, dtypes = {}, {}
    for f in files:
        with safe_open(folder / f, "pt") as st:
            for k in st.keys():
                tensors[k] = st.get_tensor(k)
                dtypes[k] = tensors[k].dtype
    return tensors, dtypes


def bitwise_equal(a: dict, b: dict, what: str) -> None:
    names_ok = set(a) == set(b)
    bad = [n for n in a if n in b and not (a[n].dtype == b[n].dtype and torch.equal(a[n], b[n]))]
    check(names_ok and not bad, f"{what}: {len(a)} tensors, same names and bits"
          + ("" if names_ok else f" (names differ: {sorted(set(a) ^ set(b))})")
          + ("" if not bad else f" (differ: {bad[:4]})"))


# ---- export ---------------------------------------------------------------------------------

def load_hf(folder: Path):
    from transformers import AutoModelForCausalLM
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, info = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, output_loading_info=True)
    missing = set(info.get("missing_keys", ())) - {"lm_head.weight"}
    bad = {k: v for k, v in info.items() if k != "missing_keys" and v}
    check(not missing and not bad, f"from_pretrained({folder.name}): {type(model).__name__}, nothing missing, "
          f"unexpected or mismatched ({info})")
    check(model.lm_head.weight.data_ptr() == model.model.embeddings.weight.data_ptr(),
          f"{folder.name}: lm_head tied to model.embeddings")
    return model


def hf_side(model, ids: torch.Tensor) -> dict:
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)
    return {"logits": out.logits, "loss": out.loss.item()}


def compare(label: str, ours: dict, theirs: dict, tol: float, loss_tol: float | None = TOL) -> None:
    e = rel(ours["logits"], theirs["logits"])
    check(e <= tol, f"{label}: logits rel err {e:.3e} (tol {tol:g})")
    d = abs(ours["loss"] - theirs["loss"])
    msg = f"{label}: loss kda {ours['loss']:.9f}  HF/FLA {theirs['loss']:.9f}  |delta| {d:.3e}"
    if loss_tol is None:
        print(f"  info  {msg}")
    else:
        check(d <= loss_tol, msg + f" (tol {loss_tol:g})")


def test_export(kda: Path, model_io: Path, tmp: Path, ids_path: Path, ids: torch.Tensor) -> None:
    print("== export: kda checkpoint -> HF folder -> transformers")
    save = tmp / "train"
    t0 = time.time()
    run([kda, "train", "configs/tiny-bytes.yaml", "--device", "cpu", "--set", "train_iters=3", "--set", "lr_warmup_iters=1",
         "--set", "sample_tokens=0", "--set", f"save={save}"], "kda train (tiny, 3 iterations)")
    ck = latest(save)
    print(f"  trained {ck} in {time.time() - t0:.1f} s")
    e32, e16 = tmp / "export_fp32", tmp / "export_bf16"
    print("  " + run([kda, "export", save, e32, "--dtype", "fp32"], "kda export --dtype fp32"))
    print("  " + run([kda, "export", save, e16], "kda export (bf16 default)"))

    cfg = json.loads((e32 / "config.json").read_text())
    check(cfg.get("model_type") == "kda" and cfg.get("architectures") == ["KDAForCausalLM"]
          and cfg.get("tie_word_embeddings") is True,
          f"config.json: model_type {cfg.get('model_type')!r}, architectures {cfg.get('architectures')}, "
          f"tie_word_embeddings {cfg.get('tie_word_embeddings')}")
    masters = load_file(ck / "model.safetensors")
    t32, d32 = folder_tensors(e32)
    t16, d16 = folder_tensors(e16)
    check(set(d32.values()) == {torch.float32} and set(d16.values()) == {torch.bfloat16},
          f"dtypes: fp32 export {sorted(map(str, set(d32.values())))}, default export {sorted(map(str, set(d16.values())))}")
    bitwise_equal(t32, masters, "fp32 export vs checkpoint masters")
    bitwise_equal(t16, {k: v.to(torch.bfloat16) for k, v in masters.items()},
                  "bf16 export vs checkpoint masters rounded to bf16 (torch RNE)")

    # kda's side: the checkpoint itself, and the bf16 export imported back (bf16-rounded weights)
    ours32 = kda_side(model_io, ck, ids_path, tmp / "io_ckpt")
    run([kda, "import", e16, tmp / "reimported_bf16"], "kda import of the bf16 export")
    ck16 = latest(tmp / "reimported_bf16")
    bitwise_equal(load_file(ck16 / "model.safetensors"), {k: v.float() for k, v in t16.items()},
                  "bf16 export imported back: fp32 masters = the bf16 values")
    ours16 = kda_side(model_io, ck16, ids_path, tmp / "io_ckpt_bf16")

    hf32 = hf_side(load_hf(e32), ids)
    hf16 = hf_side(load_hf(e16), ids)
    compare("fp32 export: transformers vs kda", ours32, hf32, TOL)
    compare("bf16 export: transformers vs kda on the bf16-rounded weights", ours16, hf16, TOL)
    compare("bf16 export: transformers vs kda's fp32 weights", ours32, hf16, BF16_TOL, loss_tol=None)


# ---- import ---------------------------------------------------------------------------------

def fla_model():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fla.models.kda import KDAConfig, KDAForCausalLM
        cfg = KDAConfig(**FLA_MODEL, use_cache=False, attn_mode="chunk", **fla_cpu.kda_config_flags())
        torch.manual_seed(42)
        model = KDAForCausalLM(cfg)
    return model


def save_variants(model, tmp: Path) -> dict[str, Path]:
    """The same FLA model saved the ways an HF folder can come: returns name -> folder."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        native = tmp / "fla_native"
        model.save_pretrained(native)
        out["native (no lm_head.weight)"] = native

        explicit = tmp / "fla_explicit_head"
        shutil.copytree(native, explicit)
        sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        sd["lm_head.weight"] = model.model.embeddings.weight.detach().clone()
        save_file(sd, explicit / "model.safetensors", metadata={"format": "pt"})
        out["explicit lm_head.weight"] = explicit

        sharded = tmp / "fla_sharded"
        model.save_pretrained(sharded, max_shard_size="100KB")
        out["sharded"] = sharded

        bf16 = tmp / "fla_bf16"
        copy.deepcopy(model).to(torch.bfloat16).save_pretrained(bf16)
        out["bf16"] = bf16
    return out


def test_import(kda: Path, model_io: Path, tmp: Path, ids_path: Path, ids: torch.Tensor) -> None:
    print("== import: FLA-initialised KDAForCausalLM (seed 42) -> save_pretrained -> kda import")
    model = fla_model()
    model.train()  # the first training iteration's forward (chunk mode, no cache)
    ref = {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    print(f"  KDAConfig {FLA_MODEL}: intermediate_size -> {model.config.intermediate_size} in config, "
          f"{model.model.layers[0].mlp.intermediate_size} in the MLP; {sum(v.numel() for v in ref.values())} parameters")
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)
        fla32 = {"logits": out.logits, "loss": out.loss.item()}
        m16 = copy.deepcopy(model)
        for p in m16.parameters():
            p.copy_(p.to(torch.bfloat16).float())
        out = m16(input_ids=ids, labels=ids)
        fla16 = {"logits": out.logits, "loss": out.loss.item()}
    print(f"  FLA first-iteration loss: fp32 weights {fla32['loss']:.9f}, bf16-rounded weights {fla16['loss']:.9f}")

    variants = save_variants(model, tmp)
    native_keys = folder_tensors(variants["native (no lm_head.weight)"])[0].keys()
    check("lm_head.weight" not in native_keys, "save_pretrained leaves lm_head.weight out (tied)")
    check("lm_head.weight" in folder_tensors(variants["explicit lm_head.weight"])[0],
          "explicit variant holds lm_head.weight")
    shards = sorted(p.name for p in variants["sharded"].glob("model-*.safetensors"))
    check(len(shards) >= 2 and (variants["sharded"] / "model.safetensors.index.json").exists(),
          f"sharded variant: {len(shards)} shards + model.safetensors.index.json")

    for i, (name, folder) in enumerate(variants.items()):
        print(f"  -- {name}: {folder.name}")
        save = tmp / f"imported_{i}"
        print("    " + run([kda, "import", folder, save], f"kda import ({name})"))
        ck = latest(save)
        is_bf16 = name == "bf16"
        want = {k: (v.to(torch.bfloat16).float() if is_bf16 else v) for k, v in ref.items()}
        bitwise_equal(load_file(ck / "model.safetensors"), want, f"{name}: imported weights vs FLA's")
        ours = kda_side(model_io, ck, ids_path, tmp / f"io_import_{i}")
        compare(f"{name}: kda vs FLA first-iteration", ours, fla16 if is_bf16 else fla32, TOL)
        if name.startswith("native"):  # and back: export of the imported checkpoint
            back = tmp / "fla_roundtrip"
            print("    " + run([kda, "export", save, back, "--dtype", "fp32"], "kda export of the imported checkpoint"))
            bitwise_equal(folder_tensors(back)[0], ref, "FLA -> kda import -> kda export: tensors")
            a = json.loads((folder / "config.json").read_text())
            b = json.loads((back / "config.json").read_text())
            keys = ["hidden_size", "num_hidden_layers", "num_heads", "head_dim", "expand_v", "conv_size",
                    "vocab_size", "norm_eps", "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id"]
            diff = {k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}
            check(not diff and b.get("intermediate_size") == model.model.layers[0].mlp.intermediate_size,
                  f"round-trip config.json: same {len(keys)} keys, intermediate_size {b.get('intermediate_size')}"
                  + (f" (differ: {diff})" if diff else ""))


def main() -> int:
    seed = int(os.environ.get("KDA_TEST_SEED", int(time.time()) % 1_000_000))
    print(f"seed {seed} (replay with KDA_TEST_SEED={seed})")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    kda, model_io = exe_paths()
    print("FLA on the CPU, substitutions:")
    for line in fla_cpu.install():
        print("  " + line)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import fla  # noqa: F401  (registers model_type "kda" with transformers' Auto classes)
    ids_np = np.random.default_rng(seed).integers(0, 256, size=(B, T), dtype=np.int64)
    ids = torch.from_numpy(ids_np)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="kda_export_import_") as td:
        tmp = Path(td)
        ids_path = tmp / "ids.bin"
        ids_np.astype("<i4").tofile(ids_path)
        print(f"tokens: B={B} T={T}, ids from seed {seed}")
        test_export(kda, model_io, tmp, ids_path, ids)
        test_import(kda, model_io, tmp, ids_path, ids)
    print(f"({time.time() - t0:.1f} s)")
    if failures:
        print(f"test_export_import: {len(failures)} checks FAILED (seed {seed}):\n  " + "\n  ".join(failures))
        return 1
    print(f"test_export_import: all checks passed (seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
