"""Write the Parquet fixtures of tests/test_parquet.c into tests/data/parquet/ (run once, commit).

Each NAME.parquet is written by pyarrow with one combination of the settings our reader
supports (PLAIN / dictionary encodings with the fallback to PLAIN, nulls, uncompressed /
snappy / gzip / zstd pages, data page v1 / v2, several row groups and pages); NAME.expect
holds the column's non-null values in row order, each as its byte length, a newline, the
bytes, a newline (so any bytes survive). unsupported_*.parquet use settings the reader must
refuse with a clear message. The rows are FineWeb-Edu-shaped (text, id, dump, url, ...) with
a nested list column in front of "text", so the reader has to find the right leaf.

    .venv/bin/python tests/python/make_parquet_fixtures.py   (needs pyarrow)
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

OUT = Path(__file__).resolve().parent.parent / "data" / "parquet"

WORDS = ["the", "of", "learning", "energy", "photosynthesis", "é", "漢字", "🙂", "naïve", "Ωmega", "tab\there",
         "line\nbreak", "quote\"d", "zero\u0000byte", "  spaces  ", "<|end_of_text|>"]


def texts(rng: random.Random, n: int, null_every: int) -> list:
    out = []
    for i in range(n):
        if null_every and i % null_every == 3:
            out.append(None)
        elif i % 11 == 0:
            out.append("")  # an empty document
        elif i % 5 == 1:
            out.append(f"repeated value {i % 3}")  # dictionary-friendly repeats
        else:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))))
    return out


def table(vals: list) -> pa.Table:
    n = len(vals)
    return pa.table({
        "tags": pa.array([[f"t{i}", "x"] if i % 4 else None for i in range(n)], type=pa.list_(pa.string())),
        "text": pa.array(vals, type=pa.string()),
        "id": pa.array([f"<urn:uuid:{i:08d}>" for i in range(n)]),
        "dump": pa.array(["CC-MAIN-2024-10"] * n),
        "token_count": pa.array(list(range(n)), type=pa.int64()),
        "score": pa.array([i / 7 for i in range(n)], type=pa.float64()),
    })


def expect(path: Path, vals: list) -> None:
    with open(path, "wb") as f:
        for v in vals:
            if v is None:
                continue
            b = v.encode()
            f.write(b"%d\n" % len(b) + b + b"\n")


CASES = [
    # name, rows, null_every, write_table options
    ("plain_none_v1", 80, 0, dict(use_dictionary=False, compression="none", data_page_version="1.0")),
    ("dict_snappy_v1_nulls", 200, 7, dict(use_dictionary=True, compression="snappy", data_page_version="1.0")),
    ("plain_dictionary_format1", 100, 8, dict(use_dictionary=True, compression="gzip", version="1.0")),
    ("dict_zstd_v2_rowgroups", 300, 5, dict(use_dictionary=True, compression="zstd", data_page_version="2.0",
                                            row_group_size=70)),
    ("plain_gzip_v2_nulls", 150, 4, dict(use_dictionary=False, compression="gzip", data_page_version="2.0",
                                         row_group_size=64)),
    ("plain_snappy_pages", 250, 6, dict(use_dictionary=False, compression="snappy", data_page_size=512,
                                        row_group_size=100)),
    ("dict_fallback_zstd", 300, 9, dict(use_dictionary=True, compression="zstd", dictionary_pagesize_limit=300,
                                        data_page_size=400, row_group_size=200)),
    ("dict_none_v2_pages", 120, 3, dict(use_dictionary=True, compression="none", data_page_version="2.0",
                                        data_page_size=256)),
]

UNSUPPORTED = [
    ("unsupported_delta", dict(use_dictionary=False, column_encoding={"text": "DELTA_BYTE_ARRAY"},
                               compression="none")),
    ("unsupported_lz4", dict(compression="lz4")),
]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20260301)
    for name, rows, null_every, opts in CASES:
        vals = texts(rng, rows, null_every)
        pq.write_table(table(vals), OUT / f"{name}.parquet", **opts)
        expect(OUT / f"{name}.expect", vals)
        back = pq.read_table(OUT / f"{name}.parquet").column("text").to_pylist()
        assert back == vals, name
    # a required (non-nullable) column
    vals = texts(rng, 90, 0)
    schema = pa.schema([pa.field("text", pa.string(), nullable=False), pa.field("n", pa.int32())])
    t = pa.table({"text": vals, "n": list(range(90))}, schema=schema)
    pq.write_table(t, OUT / "required_snappy.parquet", compression="snappy")
    expect(OUT / "required_snappy.expect", vals)
    for name, opts in UNSUPPORTED:
        pq.write_table(table(texts(rng, 30, 0)), OUT / f"{name}.parquet", **opts)
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, into {OUT}")


if __name__ == "__main__":
    main()
