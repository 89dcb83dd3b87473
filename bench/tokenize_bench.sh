#!/usr/bin/env bash
# tokenize_bench.sh — `kda tokenize` end to end (JSON lines -> .bin/.idx with the Llama 3
# tokenizer) with 1, 2, 4, ... threads up to the core count, the outputs compared byte for byte
# with the 1-thread one; then gzip input and the bytes tokenizer (the pipeline without BPE).
#
#   bench/tokenize_bench.sh              uses ./kda
#   KDA=driver bench/tokenize_bench.sh   builds a tokenize-only program from src/ instead (for a
#                                        machine where the whole kda does not build)
# The input is made here: 60,000 documents of 5-80 random Tiny Shakespeare lines (~110 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${TMPDIR:-/tmp}/kda_tokbench
mkdir -p "$W"
KDA=${KDA:-./kda}
if [ "$KDA" = driver ]; then
  printf '#include "cli/cli.h"\nint main(int c, char **v) { return cmd_tokenize(c - 1, v + 1); }\n' > "$W/drv.c"
  gcc -std=c11 -O2 -march=x86-64-v2 -fopenmp -D_GNU_SOURCE -Isrc -o "$W/kda" "$W/drv.c" src/base/common.c src/text/doc_source.c \
    src/formats/parquet.c src/formats/parquet_thrift.c src/data/indexed_dataset.c src/data/tokenize_files.c src/cli/cli_tokenize.c src/cli/cli_args.c \
    src/base/run_guard.c src/text/tokenizer_*.c \
    -ljansson -lzstd -lz -lsnappy -lpcre2-8 -lm -lpthread
  KDA=$W/kda
fi
TOK=data/tokenizer/llama3/tokenizer.json
python3 - "$W/in.jsonl" <<'EOF'
import json, random, sys
r = random.Random(1)
lines = [l for l in open("data/tinyshakespeare.txt").read().split("\n") if l.strip()]
with open(sys.argv[1], "w") as f:
    for d in range(60000):
        f.write(json.dumps({"text": "\n".join(r.choice(lines) for _ in range(r.randint(5, 80))), "id": d}) + "\n")
EOF
echo "input: $(du -m "$W/in.jsonl" | cut -f1) MB of JSON lines, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
cores=$(nproc)
t=1
while [ $t -le "$cores" ]; do
  $KDA tokenize --input "$W/in.jsonl" -o "$W/out$t" --tokenizer $TOK --threads $t --quiet
  if [ $t -gt 1 ]; then
    cmp -s "$W/out1.bin" "$W/out$t.bin" && cmp -s "$W/out1.idx" "$W/out$t.idx" && echo "  $t threads: output identical to 1 thread" \
      || echo "  $t threads: OUTPUT DIFFERS"
  fi
  t=$((t * 2))
done
gzip -1 -c "$W/in.jsonl" > "$W/in.jsonl.gz"
$KDA tokenize --input "$W/in.jsonl.gz" -o "$W/gz" --tokenizer $TOK --quiet
$KDA tokenize --input "$W/in.jsonl" -o "$W/bytes" --tokenizer bytes --quiet
rm -rf "$W"
