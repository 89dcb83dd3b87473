"""Megatron compatibility of our token files and our data order — issue 3.

1. Files we write are read by megatron-core's IndexedDataset with the same dtype, tokens,
   sequence lengths and document boundaries (uint16 and int32, empty documents). Our writer is
   driven through build/tools/idx_dump, and, when the kda program is built, through
   `kda tokenize` (bytes tokenizer, JSON lines, end-of-document id appended). And `kda tokenize`
   with the Llama 3 tokenizer.json writes .bin/.idx byte-identical to Megatron's
   preprocess_data.py pipeline (HF tokenizer with its BOS, + EOD 128001, IndexedDatasetBuilder,
   int32) on the same JSON lines, empty and special-token-bearing documents included.
2. Files megatron-core's IndexedDatasetBuilder writes (add_item/end_document with several
   sequences per document, add_document, uint16 and int32) are read by our reader the same.
3. The GPT training samples, in order, equal megatron-core's GPTDataset / BlendedDataset built
   by BlendedMegatronDatasetBuilder for the same files, split string, seed, sequence length and
   sample counts: one file over one and several epochs (with the separate last epoch), a
   weighted blend of two files, and an unweighted blend; every sample of train, valid and test.

Run from the repo root: KDA_BUILD=build .venv/bin/python tests/python/test_megatron_compat.py
(KDA_TEST_SEED=<n> replays a seed). Needs megatron-core (which needs torch) in the venv.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import types
import warnings
from pathlib import Path

import numpy as np

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

ROOT = Path(__file__).resolve().parent.parent.parent
passed = failed = 0


def check(cond: bool, what: str) -> None:
    global passed, failed
    if cond:
        passed += 1
        print(f"  ok    {what}", flush=True)
    else:
        failed += 1
        print(f"  FAIL  {what}", flush=True)


def build_dir() -> Path:
    b = Path(os.environ.get("KDA_BUILD", "build"))
    return b if b.is_absolute() else ROOT / b


def idx_dump() -> Path:
    exe = build_dir() / "tools" / "idx_dump"
    if not exe.is_file():
        sys.exit(f"test_megatron_compat: {exe} not found: build it with `make {build_dir().name}/tools/idx_dump`")
    return exe


def run(args: list, stdin: str | None = None) -> str:
    r = subprocess.run([str(a) for a in args], input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args[:3]))}... failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def random_docs(rng: np.random.RandomState, n: int, vocab: int, max_len: int) -> list[list[int]]:
    docs = []
    for i in range(n):
        length = 0 if i % 9 == 4 else int(rng.randint(1, max_len + 1))
        d = rng.randint(0, vocab, size=length).tolist()
        if d:
            d[0] = vocab - 1
        docs.append(d)
    return docs


def megatron_view(prefix: str) -> dict:
    from megatron.core.datasets.indexed_dataset import DType, IndexedDataset

    ds = IndexedDataset(prefix)
    return {
        "dtype": DType.code_from_dtype(ds.index.dtype),
        "sequence_lengths": ds.sequence_lengths.tolist(),
        "document_index": ds.document_indices.tolist(),
        "sequences": [ds[i].tolist() for i in range(len(ds))],
    }


def expected_view(docs: list[list[int]], dtype_code: int) -> dict:
    seqs = [d for d in docs if d]
    doc_index = [0]
    for d in docs:
        doc_index.append(doc_index[-1] + (1 if d else 0))
    return {"dtype": dtype_code, "sequence_lengths": [len(s) for s in seqs], "document_index": doc_index,
            "sequences": seqs}


def ours_to_megatron(tmp: Path, rng: np.random.RandomState) -> None:
    for vocab, code in ((1000, 8), (128256, 4)):
        docs = random_docs(rng, 60, vocab, 200)
        prefix = tmp / f"ours_{vocab}"
        run([idx_dump(), "write", prefix, vocab], "".join(json.dumps({"ids": d}) + "\n" for d in docs))
        got = megatron_view(str(prefix))
        want = expected_view(docs, code)
        check(got == want, f"megatron-core reads our vocab-{vocab} file: dtype {got['dtype']}, "
              f"{len(got['sequences'])} sequences, {len(got['document_index']) - 1} documents, same tokens")


def kda_tokenize_to_megatron(tmp: Path, rng: np.random.RandomState) -> None:
    kda = Path(os.environ.get("KDA_BIN", ROOT / "kda"))
    if not kda.is_file() or subprocess.run([kda, "tokenize", "--help"], capture_output=True).returncode != 0:
        check(False, f"kda tokenize runs from {kda} (make kda builds it; KDA_BIN names another)")
        return
    texts = ["".join(chr(int(c)) for c in rng.randint(32, 127, size=int(rng.randint(0, 300)))) for _ in range(40)]
    texts[3] = ""
    src = tmp / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    prefix = tmp / "tok"
    r = subprocess.run([kda, "tokenize", "--input", src, "--output-prefix", prefix, "--tokenizer", "bytes",
                        "--eod", "256"], capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f"kda tokenize ran: {r.stderr.strip()}")
        return
    got = megatron_view(str(prefix))
    docs = [list(t.encode()) + [256] if t else [] for t in texts]
    check(got == expected_view(docs, 8), f"megatron-core reads `kda tokenize` output: {len(got['sequences'])} "
          f"sequences, bytes + end-of-document 256")


def llama3_like_megatron(tmp: Path, rng: np.random.RandomState) -> None:
    kda = Path(os.environ.get("KDA_BIN", ROOT / "kda"))
    tok_path = ROOT / "data" / "tokenizer" / "llama3" / "tokenizer.json"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        check(False, "tokenizers imports (tests/python/requirements.txt installs it)")
        return
    if not kda.is_file() or not tok_path.is_file():
        check(False, f"the kda program ({kda}) and {tok_path} are there")
        return
    import torch
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder

    words = ["The", " cat", " sat", " on", " the", " mat", ".", "\n", " é", "漢字", " 🙂", " 2024", " don't",
             "<|end_of_text|>", "<|begin_of_text|>", "  ", "\t", " photosynthesis"]
    texts = ["".join(words[int(i)] for i in rng.randint(0, len(words), size=int(rng.randint(0, 80)))) for _ in range(300)]
    texts[5] = ""
    src = tmp / "llama.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    # Megatron's tools/preprocess_data.py: ids = tokenizer(text).input_ids (HF adds BOS), then
    # EOD appended when there are ids; builder dtype DType.optimal_dtype(vocab_size)
    tok = Tokenizer.from_file(str(tok_path))
    b = IndexedDatasetBuilder(str(tmp / "mega.bin"), dtype=DType.optimal_dtype(tok.get_vocab_size()))
    for t in texts:
        ids = tok.encode(t, add_special_tokens=True).ids
        if ids:
            ids.append(128001)
        b.add_document(torch.tensor(ids, dtype=torch.int64), [len(ids)] if ids else [])
    b.finalize(str(tmp / "mega.idx"))
    r = subprocess.run([kda, "tokenize", "--input", src, "--output-prefix", tmp / "ours_llama", "--tokenizer",
                        tok_path, "--quiet"], capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f"kda tokenize with the Llama 3 tokenizer ran: {r.stderr.strip()}")
        return
    same = all((tmp / f"ours_llama.{e}").read_bytes() == (tmp / f"mega.{e}").read_bytes() for e in ("bin", "idx"))
    check(same, "`kda tokenize` (Llama 3) == Megatron preprocess_data.py pipeline, byte for byte (.bin and .idx, "
          f"{len(texts)} documents)")


def megatron_to_ours(tmp: Path, rng: np.random.RandomState) -> None:
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    for vocab, dtype in ((1000, np.uint16), (128256, np.int32)):
        prefix = tmp / f"theirs_{vocab}"
        b = IndexedDatasetBuilder(f"{prefix}.bin", dtype=dtype)
        for i in range(30):
            if i % 3 == 0:  # a document of several sequences
                for _ in range(int(rng.randint(1, 4))):
                    b.add_item(torch.from_numpy(rng.randint(0, vocab, size=int(rng.randint(1, 50)))))
                b.end_document()
            elif i % 7 == 5:
                b.add_document(np.zeros(0, dtype=np.int64), [])
            else:
                n = int(rng.randint(1, 80))
                b.add_document(rng.randint(0, vocab, size=n), [n])
        b.finalize(f"{prefix}.idx")
        want = megatron_view(str(prefix))
        got = json.loads(run([idx_dump(), "dump", prefix]))
        check(got == want, f"we read megatron-core's {np.dtype(dtype).name} file: {len(got['sequences'])} sequences in "
              f"{len(got['document_index']) - 1} documents, same tokens and boundaries")


def megatron_samples(paths: list, split: str, seed: int, seq: int, sizes: list, which: int) -> list[list[int]]:
    from megatron.core.datasets.blended_dataset import BlendedDataset
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    if len(paths) % 2 == 0 and all(_is_number(p) for p in paths[0::2]):
        blend = ([str(p) for p in paths[1::2]], [float(w) for w in paths[0::2]])
    else:
        blend = ([str(p) for p in paths], None)
    tok = types.SimpleNamespace(vocab_size=1 << 20, eod=0, pad=-1, unique_identifiers={"class": "stub"})
    cfg = GPTDatasetConfig(random_seed=seed, sequence_length=seq, blend=blend, split=split, tokenizer=tok,
                           reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False)
    # (no path_to_cache: BlendedDataset's cache needs torch.distributed; GPTDataset then caches
    # its indices under <prefix>/cache/, inside the test's temporary folder)
    ds = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, cfg).build()[which]
    out = []
    for i in range(len(ds)):
        if isinstance(ds, BlendedDataset):
            d, k = int(ds.dataset_index[i]), int(ds.dataset_sample_index[i])
            text, _ = ds.datasets[d]._query_document_sample_shuffle_indices(k)
        else:
            text, _ = ds._query_document_sample_shuffle_indices(i)
        out.append(text.tolist())
    return out


def _is_number(s) -> bool:
    try:
        float(str(s))
        return True
    except ValueError:
        return False


def our_samples(paths: list, split: str, seed: int, seq: int, sizes: list, which: int) -> list[list[int]]:
    name = ("train", "valid", "test")[which]
    lines = run([idx_dump(), "gpt", split, seed, seq, sizes[0], sizes[1], name, *paths]).splitlines()
    n = json.loads(lines[0])["num_samples"]
    assert n == len(lines) - 1
    return [json.loads(line) for line in lines[1:]]


def gpt_order(tmp: Path, rng: np.random.RandomState, seed: int) -> None:
    # two files of documents with random lengths (one sequence each, as kda tokenize writes)
    prefixes = []
    for name, n_docs, max_len in (("a", 1000, 60), ("b", 150, 120)):
        docs = [rng.randint(0, 60000, size=int(rng.randint(1, max_len + 1))).tolist() for _ in range(n_docs)]
        # the split "969,30,1" gives the last document a part of its own; one token there cannot
        # make a sample, which kda refuses with a message (megatron-core cycles it across epochs)
        if len(docs[-1]) < 2:
            docs[-1].append(int(rng.randint(0, 60000)))
        prefix = tmp / f"gpt_{name}"
        run([idx_dump(), "write", prefix, 65000], "".join(json.dumps({"ids": d}) + "\n" for d in docs))
        prefixes.append(prefix)
    a, b = prefixes
    mseed = int(seed % (1 << 32))
    cases = [
        ("one file, one epoch", [a], "969,30,1", 64, [200, 20, 20]),
        ("one file, several epochs (short last one)", [a], "90,8,2", 33, [2200, 300, 300]),
        ("one file, several epochs (full last one)", [a], "80,10,10", 50, [1400, 100, 100]),
        ("weighted blend 0.3/0.7", ["0.3", a, "0.7", b], "90,8,2", 40, [700, 40, 40]),
        ("weighted blend 2:1", ["2", a, "1", b], "90,10,0", 21, [1500, 60, 0]),
        ("unweighted blend", [a, b], "90,10,0", 32, [900, 50, 0]),
    ]
    for what, paths, split, seq, sizes in cases:
        for which in range(3):
            frac = [float(x) for x in split.split(",")]
            if frac[which] == 0:
                continue
            t0 = time.time()
            theirs = megatron_samples(paths, split, mseed, seq, sizes, which)
            ours = our_samples(paths, split, mseed, seq, sizes, which)
            first_diff = next((i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y), None)
            check(ours == theirs, f"{what}, {('train', 'valid', 'test')[which]}: {len(ours)} samples of {seq}+1 "
                  f"tokens equal megatron-core's in order"
                  + ("" if ours == theirs else f" (ours {len(ours)}, theirs {len(theirs)}, first difference at "
                     f"{first_diff})") + f" [{time.time() - t0:.1f}s]")


def main() -> int:
    try:
        import megatron.core.datasets.indexed_dataset  # noqa: F401
    except ImportError as e:
        print(f"test_megatron_compat: megatron-core is not importable ({e}); add megatron-core to "
              f"tests/python/requirements.txt")
        return 1
    seed = int(os.environ.get("KDA_TEST_SEED", time.time()))
    print(f"seed {seed} (replay with KDA_TEST_SEED={seed})")
    rng = np.random.RandomState(seed % (1 << 32))
    with tempfile.TemporaryDirectory(prefix="kda_megatron_") as t:
        tmp = Path(t)
        ours_to_megatron(tmp, rng)
        kda_tokenize_to_megatron(tmp, rng)
        llama3_like_megatron(tmp, rng)
        megatron_to_ours(tmp, rng)
        gpt_order(tmp, rng, seed)
    print(f"test_megatron_compat: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
