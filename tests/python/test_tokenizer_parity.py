"""Parity of `kda encode` / `kda decode` with Hugging Face `tokenizers` and `tiktoken`.

Compares ids on the bundled corpus (line by line and as whole blocks) and on >= 10,000
generated strings (mixed scripts, digits, whitespace runs, emoji, contractions, special-token
strings), with and without special tokens; broken UTF-8 against HF on the Python string that
bytes.decode("utf-8", errors="replace") gives; decode against HF's decode; and variants of
tokenizer.json (merges as [a, b] lists, ignore_merges off, GPT-2 style ByteLevel pre-tokenizer,
add_prefix_space) against HF loading the same variant. Every call to kda goes through one
subprocess per batch. Exit status non-zero on any mismatch; replay with KDA_TEST_SEED.
"""
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unicodedata

import tiktoken
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KDA = os.environ.get("KDA_BIN", os.path.join(ROOT, "kda"))
TOK_JSON = os.path.join(ROOT, "data", "tokenizer", "llama3", "tokenizer.json")
SHARED = os.path.join(ROOT, "..", "shared", "data")
CORPUS = next(p for p in [os.path.join(ROOT, "data", "tinyshakespeare.txt"),
                          os.path.join(SHARED, "corpus", "tinyshakespeare.txt")] if os.path.exists(p))
SHARED_MODEL = os.path.join(SHARED, "tokenizer", "llama3", "tokenizer.model")

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print(("  ok    " if ok else "  FAIL  ") + what, flush=True)


def first_diff(got, want, texts):
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"first difference at item {i}: text {texts[i][:80]!r}\n        kda {g[:24]}\n        ref {w[:24]}"
    return f"lengths differ: {len(got)} vs {len(want)}"


def kda(cmd, lines, *flags):
    """Runs `kda <cmd> flags` once with all lines (bytes) on stdin; returns the parsed output lines."""
    out = subprocess.run([KDA, cmd, *flags], input=b"".join(l + b"\n" for l in lines), capture_output=True)
    if out.returncode != 0:
        raise RuntimeError(f"kda {cmd} {' '.join(flags)} failed: {out.stderr.decode(errors='replace')}")
    res = [json.loads(l) for l in out.stdout.split(b"\n")[:-1]]  # not splitlines: text may hold U+2028
    if len(res) != len(lines):
        raise RuntimeError(f"kda {cmd}: {len(lines)} lines in, {len(res)} out")
    return res


def kda_encode(texts, *flags):
    return [r["ids"] for r in kda("encode", [json.dumps({"text": t}).encode() for t in texts], *flags)]


def kda_encode_bytes(raws, *flags):
    """Raw (possibly broken) UTF-8 inside the JSON strings: kda reads invalid bytes as U+FFFD."""
    lines = [json.dumps({"text": r.decode("utf-8", "surrogateescape")}, ensure_ascii=False)
             .encode("utf-8", "surrogateescape") for r in raws]
    return [r["ids"] for r in kda("encode", lines, *flags)]


def kda_decode(id_lists, *flags):
    return [r["text"] for r in kda("decode", [json.dumps({"ids": ids}).encode() for ids in id_lists], *flags)]


def hf_encode(tok, texts, add_special=False):
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=add_special)]


# ---- tiktoken built from the ranks (tokenizer.json's vocab; Meta's .model when present) ----

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


def make_tiktoken(spec):
    bd = byte_decoder()
    ranks = {bytes(bd[ch] for ch in tok): i for tok, i in spec["model"]["vocab"].items()}
    if os.path.exists(SHARED_MODEL):
        with open(SHARED_MODEL) as f:
            meta = {base64.b64decode(b): int(r) for b, r in (l.split() for l in f if l.strip())}
        check(meta == ranks, "Meta's tokenizer.model ranks == tokenizer.json vocab (tiktoken built from either)")
    specials = {t["content"]: t["id"] for t in spec["added_tokens"]}
    pat = spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    return tiktoken.Encoding("llama3", pat_str=pat, mergeable_ranks=ranks, special_tokens=specials)


# ---- generated strings ----

def assigned_chars(lo, hi):
    """Characters assigned in this Python's Unicode database (3.11: Unicode 14, the version of
    PCRE2 10.42): characters new in later versions may be letters to one library and
    unassigned to another, which is not a tokenizer difference."""
    return [chr(c) for c in range(lo, hi) if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]


SCRIPTS = [assigned_chars(*r) for r in [
    (0x00C0, 0x0250), (0x0370, 0x0400), (0x0400, 0x0500), (0x0590, 0x0600), (0x0600, 0x0700),
    (0x0900, 0x0980), (0x0E00, 0x0E80), (0x3040, 0x3100), (0x4E00, 0x4F00), (0xAC00, 0xAD00),
    (0x0300, 0x0370), (0x1F300, 0x1F650), (0x2000, 0x2070), (0x2100, 0x2200), (0x10000, 0x10100),
    (0x1D400, 0x1D500)]]
ANY_BMP = assigned_chars(0x80, 0x10000)
ANY_ASTRAL = assigned_chars(0x10000, 0x30000)
WORDS = ("the of and to in is was that for it with as his on be at by I you he had not are but from or "
         "have an they which one were her all she there would their we him been has when who will more no "
         "if out so said what up its about into than them can only other new some could time these two may "
         "HTTP JSON tokenizer Llama McDonald iPhone naïve café résumé Zürich straße").split()
PIECES = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "'ſ",
          "\u2019s", "n't", "'", "''", "'x", " '", "'1",
          " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", " \n\n ", "\t\t", "\x0b", "\x0c",
          "\x85", "\xa0", "\u1680", "\u2000", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
          "\u180e", "\x1c", "\x1f", "\u200b", "\u200d", "\ufeff", "\x00", "\x7f",
          "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
          "<|reserved_special_token_17|>", "<|reserved_special_token_250|>", "<|eot_id", "<|", "|>", "<||>",
          "<|begin_of_text|><|eot_id|>", "<|<|eot_id|>|>",
          "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇺🇸", "❤️", "🏳️\u200d🌈", "½", "²", "٣", "Ⅻ", "①", "𝟘",
          "...", "!!", "?!", ",", ".", ";", ":", "-", "--", "—", "(", ")", "[]", "{}", "<>", "/", "\\", "\"",
          "`", "~", "@", "#", "$", "%", "^", "&", "*", "_", "+", "=", "|", "©", "®", "°", "€", "\ufffd",
          "e\u0301", "\u0301", "ﬁ", "Ａ", "ǅ"]


def random_text(rng):
    parts = []
    for _ in range(rng.randint(1, 24)):
        k = rng.random()
        if k < 0.25:
            w = rng.choice(WORDS)
            parts.append(rng.choice(["", " "]) + rng.choice([w, w.capitalize(), w.upper()]))
        elif k < 0.45:
            parts.append(rng.choice(PIECES))
        elif k < 0.55:
            parts.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 12))))
        elif k < 0.70:
            s = rng.choice(SCRIPTS)
            parts.append("".join(rng.choice(s) for _ in range(rng.randint(1, 8))))
        elif k < 0.78:
            parts.append(rng.choice(ANY_BMP))
        elif k < 0.82:
            parts.append(rng.choice(ANY_ASTRAL))
        elif k < 0.90:
            parts.append(rng.choice([" ", "\n", "\t", "\u3000", "\xa0"]) * rng.randint(2, 40))
        else:
            parts.append("".join(chr(rng.randint(32, 126)) for _ in range(rng.randint(1, 10))))
    return "".join(parts)


def random_broken(rng):
    """Raw bytes, drawn again while they decode to a character unassigned in this Python's Unicode
    database: random bytes can spell one (CI, 2026-12-05: U+2EDBA, CJK Extension I, Unicode 15.1,
    a letter to HF and not to PCRE2 10.42), which assigned_chars keeps out of the text above."""
    while True:
        raw = random_broken_once(rng)
        if all(unicodedata.category(c) != "Cn" for c in raw.decode("utf-8", "replace")):
            return raw


def random_broken_once(rng):
    out = bytearray()
    for _ in range(rng.randint(1, 20)):
        k = rng.random()
        if k < 0.4:
            out += random_text(rng).encode()[: rng.randint(0, 12)]  # may cut a character in two
        elif k < 0.7:
            out += bytes(rng.randint(0x80, 0xFF) for _ in range(rng.randint(1, 4)))
        else:
            out += rng.choice([b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"\xf0\x9f\x98",
                               b"\xe2\x82", b"\xff\xfe", b"\xf8\x88\x80\x80\x80", b"<|eot_id|>", b" \xe2\x80\xaf"])
    return bytes(out)


# ---- the checks ----

def compare(name, got, want, texts):
    same = got == want
    n_tok = sum(len(w) for w in want)
    check(same, f"{name}: {len(texts)} texts, {n_tok} tokens identical" + ("" if same else "\n        " + first_diff(got, want, texts)))


def test_corpus(hf, tt):
    with open(CORPUS, encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines(keepends=True)
    blocks = ["".join(lines[i:i + 100]) for i in range(0, len(lines), 100)]
    groups = [("corpus lines (with their newline)", lines),
              ("corpus lines (without newline)", [l.rstrip("\n") for l in lines]),
              ("corpus blocks of 100 lines", blocks), ("corpus as one text", [text])]
    everything = kda_encode([t for _, texts in groups for t in texts])  # one kda process (loads once)
    for name, texts in groups:
        got, everything = everything[:len(texts)], everything[len(texts):]
        compare(f"{name} vs HF tokenizers", got, hf_encode(hf, texts), texts)
        compare(f"{name} vs tiktoken", got, tt.encode_ordinary_batch(texts), texts)
    got = kda_encode(blocks, "--bos")
    compare("corpus blocks with --bos vs HF add_special_tokens=True", got, hf_encode(hf, blocks, True), blocks)
    dec = kda_decode(got[:50])
    check(dec == ["<|begin_of_text|>" + b for b in blocks[:50]], "kda decode of corpus blocks == <|begin_of_text|> + text")


def test_random(hf, hf_text, tt, rng, n):
    texts = [random_text(rng) for _ in range(n)]
    got = kda_encode(texts)
    compare("random strings vs HF (specials matched)", got, hf_encode(hf, texts), texts)
    compare("random strings vs tiktoken allowed_special='all'", got,
            tt.encode_batch(texts, allowed_special="all"), texts)
    got_text = kda_encode(texts, "--no-special")
    compare("random strings --no-special vs HF encode_special_tokens=True", got_text, hf_encode(hf_text, texts), texts)
    compare("random strings --no-special vs tiktoken encode_ordinary", got_text, tt.encode_ordinary_batch(texts), texts)
    some = texts[: n // 10]
    compare("random strings --bos vs HF add_special_tokens=True", kda_encode(some, "--bos"), hf_encode(hf, some, True), some)
    compare("random strings --bos --no-special vs HF", kda_encode(some, "--bos", "--no-special"),
            hf_encode(hf_text, some, True), some)
    dec = kda_decode(got)
    check(dec == texts, f"kda decode(kda encode(x)) == x on {n} random strings")
    dec = kda_decode(got_text)
    check(dec == texts, f"same with --no-special")


def test_broken(hf, rng, n):
    raws = [random_broken(rng) for _ in range(n)]
    texts = [r.decode("utf-8", "replace") for r in raws]
    got = kda_encode_bytes(raws)
    compare("broken UTF-8 vs HF on bytes.decode('utf-8', 'replace')", got, hf_encode(hf, texts), texts)


def test_decode(hf, rng, n):
    ids = [[rng.randrange(128256) if rng.random() < 0.3 else rng.randrange(300) for _ in range(rng.randint(0, 20))]
           for _ in range(n)]
    want = [hf.decode(x, skip_special_tokens=False) for x in ids]
    got = kda_decode(ids)
    check(got == want, f"kda decode of {n} random id lists (partial UTF-8 -> U+FFFD) == HF decode")
    want = [hf.decode(x, skip_special_tokens=True) for x in ids]
    got = kda_decode(ids, "--skip-special")
    check(got == want, f"kda decode --skip-special == HF decode skip_special_tokens=True")


def test_variants(spec, rng, n):
    """tokenizer.json variants: HF loads the same file, kda must agree."""
    texts = [random_text(rng) for _ in range(n)] + ["Hello world", " leading", "x  y", "<|eot_id|>z"]

    def as_lists(s):  # the bundled file has "a b" strings; newer files write ["a", "b"]
        s["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in s["model"]["merges"]]

    def no_ignore(s):
        s["model"]["ignore_merges"] = False

    def gpt2(s):
        s["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}

    def gpt2_prefix(s):
        s["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}

    def split_prefix(s):
        s["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True

    def no_post(s):
        s["post_processor"] = None

    with tempfile.TemporaryDirectory() as d:
        for name, edit in [("merges as [a, b] lists", as_lists), ("ignore_merges false", no_ignore),
                           ("GPT-2 ByteLevel(use_regex) pre-tokenizer", gpt2),
                           ("ByteLevel(use_regex, add_prefix_space)", gpt2_prefix),
                           ("Split + ByteLevel(add_prefix_space)", split_prefix), ("no post_processor", no_post)]:
            s = json.loads(json.dumps(spec))
            edit(s)
            path = os.path.join(d, "tokenizer.json")
            with open(path, "w") as f:
                json.dump(s, f)
            ref = Tokenizer.from_file(path)
            compare(f"variant {name} vs HF", kda_encode(texts, "--tokenizer", path, "--bos"),
                    hf_encode(ref, texts, True), texts)


def main():
    seed = int(os.environ.get("KDA_TEST_SEED", time.time()))
    print(f"seed {seed} (replay with KDA_TEST_SEED={seed}); kda = {KDA}; corpus = {CORPUS}")
    if not os.access(KDA, os.X_OK):
        sys.exit(f"test_tokenizer_parity: {KDA} is not built (run make, or set KDA_BIN)")
    rng = random.Random(seed)
    with open(TOK_JSON, encoding="utf-8") as f:
        spec = json.load(f)
    hf = Tokenizer.from_file(TOK_JSON)
    hf_text = Tokenizer.from_file(TOK_JSON)
    hf_text.encode_special_tokens = True
    tt = make_tiktoken(spec)
    t0 = time.time()
    for name, fn in [("corpus", lambda: test_corpus(hf, tt)), ("random", lambda: test_random(hf, hf_text, tt, rng, 12000)),
                     ("broken", lambda: test_broken(hf, rng, 3000)), ("decode", lambda: test_decode(hf, rng, 2000)),
                     ("variants", lambda: test_variants(spec, rng, 1500))]:
        t1 = time.time()
        fn()
        print(f"  ({name}: {time.time() - t1:.1f} s)")
    print(f"test_tokenizer_parity: {passed} passed, {failed} failed ({time.time() - t0:.1f} s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
