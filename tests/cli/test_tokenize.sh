#!/usr/bin/env bash
# kda tokenize: JSON lines through the Llama 3 tokenizer give BOS + `kda encode` ids + EOD per
# document; the output is byte-identical for 1 and 2 threads and for plain / gzip / zstd
# input; the three plain-text document modes; Parquet fixtures; an interrupted run (SIGINT or
# SIGKILL) leaves no PREFIX.bin/.idx; bad input stops with one line naming the file.
. "$(dirname "$0")/lib.sh"
DUMP=${KDA_BUILD:-build}/tools/idx_dump
TOK=data/tokenizer/llama3/tokenizer.json
[ -x "$DUMP" ] || { bad "$DUMP not built (make ${KDA_BUILD:-build}/tools/idx_dump)"; finish; exit 1; }

python3 - "$TMP/docs.jsonl" <<'EOF'
import json, random, sys
r = random.Random(7)
words = ["the", "learning", "é", "漢字", "🙂", "  ", "\n", "123456", "don't", "<|end_of_text|>", "x" * 40]
with open(sys.argv[1], "w") as f:
    for i in range(1500):
        f.write(json.dumps({"id": i, "text": "".join(r.choice(words) for _ in range(r.randint(0, 60)))}) + "\n")
EOF
tokenize() { $KDA tokenize --tokenizer $TOK --quiet "$@" 2> "$TMP/err" || { bad "kda tokenize $*: $(tail -2 "$TMP/err")"; return 1; }; }

# 1. ids = BOS + encode + EOD, as Megatron's preprocess_data with a HF tokenizer
tokenize --input "$TMP/docs.jsonl" -o "$TMP/t2" --threads 2
$KDA encode --tokenizer $TOK --bos < "$TMP/docs.jsonl" > "$TMP/enc.jsonl"
$DUMP dump "$TMP/t2" > "$TMP/t2.json"
python3 - "$TMP/enc.jsonl" "$TMP/t2.json" <<'EOF' && ok "1500 JSON-lines documents: BOS 128000 + kda encode ids + EOD 128001 each, int32" || bad "ids differ from kda encode"
import json, sys
enc = [json.loads(l)["ids"] + [128001] for l in open(sys.argv[1])]
got = json.load(open(sys.argv[2]))
assert got["dtype"] == 4, got["dtype"]
assert got["document_index"] == list(range(len(enc) + 1))
assert got["sequences"] == enc
EOF

# 2. thread count and compression do not change a byte
tokenize --input "$TMP/docs.jsonl" -o "$TMP/t1" --threads 1
gzip -c "$TMP/docs.jsonl" > "$TMP/docs.jsonl.gz"
zstd -q -c "$TMP/docs.jsonl" > "$TMP/docs.jsonl.zst" 2>/dev/null || python3 -c "print('no zstd')" >/dev/null
tokenize --input "$TMP/docs.jsonl.gz" -o "$TMP/tg"
if cmp -s "$TMP/t1.bin" "$TMP/t2.bin" && cmp -s "$TMP/t1.idx" "$TMP/t2.idx"; then ok "1 and 2 threads: identical .bin and .idx"; else bad "thread count changed the output"; fi
cmp -s "$TMP/tg.bin" "$TMP/t1.bin" && cmp -s "$TMP/tg.idx" "$TMP/t1.idx" && ok "gzip input: identical output" || bad "gzip input differs"
if command -v zstd >/dev/null; then
  tokenize --input "$TMP/docs.jsonl.zst" -o "$TMP/tz"
  cmp -s "$TMP/tz.bin" "$TMP/t1.bin" && cmp -s "$TMP/tz.idx" "$TMP/t1.idx" && ok "zstd input: identical output" || bad "zstd input differs"
fi

# 3. plain text: per line (empty lines skipped), per block, per file; bytes tokenizer, EOD 0
printf 'first line\r\nsecond\n\n\nthird block\nstill third\n\nlast' > "$TMP/plain.txt"
count() { $DUMP dump "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["sequences"]), sum(map(len, d["sequences"])), d["sequences"][0][-3:], d["dtype"])'; }
$KDA tokenize --tokenizer bytes --quiet --input "$TMP/plain.txt" -o "$TMP/pl" 2>/dev/null
$KDA tokenize --tokenizer bytes --quiet --input "$TMP/plain.txt" -o "$TMP/pb" --text-docs block 2>/dev/null
$KDA tokenize --tokenizer bytes --quiet --input "$TMP/plain.txt" --input "$TMP/plain.txt" -o "$TMP/pf" --text-docs file 2>/dev/null
got="$(count "$TMP/pl") | $(count "$TMP/pb") | $(count "$TMP/pf")"
[ "$got" = "5 47 [110, 101, 0] 8 | 3 47 [110, 100, 0] 8 | 2 102 [115, 116, 0] 8" ] && ok "text per line / block / file: 5, 3, 2 documents, bytes + EOD 0, uint16" || bad "text modes: $got"

# 4. parquet: the non-null values of the text column, in order
pq=tests/data/parquet/dict_zstd_v2_rowgroups
$KDA tokenize --tokenizer bytes --quiet --input $pq.parquet -o "$TMP/pq" --no-append-eod 2>/dev/null
$DUMP dump "$TMP/pq" | python3 -c '
import json, sys
exp = open(sys.argv[1], "rb").read(); vals = []; i = 0
while i < len(exp):
    j = exp.index(b"\n", i); n = int(exp[i:j]); vals.append(list(exp[j + 1:j + 1 + n])); i = j + n + 2
d = json.load(sys.stdin)
docs = [d["sequences"][a] if b > a else [] for a, b in zip(d["document_index"], d["document_index"][1:])]
sys.exit(docs != vals)' $pq.expect && ok "parquet (zstd, v2 pages, 5 row groups, nulls): values in order, empty ones as empty documents" || bad "parquet documents differ"

# 5. interrupted runs leave nothing that looks complete: the input is a FIFO whose writer
#    sends 1.1 MB and then waits, so the run is surely still going when the signal comes
mkfifo "$TMP/fifo"
for sig in INT TERM KILL; do
  python3 -c 'import sys, time; sys.stdout.write(open("data/tinyshakespeare.txt").read()); sys.stdout.flush(); time.sleep(60)' > "$TMP/fifo" &
  wpid=$!
  $KDA tokenize --tokenizer $TOK --input "$TMP/fifo" -o "$TMP/big_$sig" --quiet 2> "$TMP/sig.err" &
  pid=$!
  sleep 1.5; kill -$sig $pid; wait $pid 2>/dev/null; rc=$?
  kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
  left=$(ls "$TMP" | grep -c "^big_$sig")
  if [ -e "$TMP/big_$sig.bin" ] || [ -e "$TMP/big_$sig.idx" ]; then bad "SIG$sig left $(ls "$TMP" | grep "^big_$sig" | tr '\n' ' ')"
  elif [ $sig = KILL ]; then ok "SIGKILL: no big_KILL.bin/.idx (only $left temporary file, <prefix>.bin.tmp.<pid>)"
  elif [ $rc -ge 128 ] && [ "$left" = 0 ] && grep -q "stopped by a signal" "$TMP/sig.err"; then ok "SIG$sig: exit $rc, no output and no temporary file"
  else bad "SIG$sig: rc $rc, $left files left, $(cat "$TMP/sig.err")"; fi
done

# 6. kda train reads the token files (data_format megatron); ids beyond vocab_size are refused
$KDA tokenize --tokenizer bytes --quiet --input data/tinyshakespeare.txt --text-docs block -o "$TMP/shake" 2>/dev/null
$KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=2 --set lr_warmup_iters=1 --set log_interval=1 --set sample_tokens=0 \
  --set data_format=megatron --set "train_data_path=[$TMP/shake]" > "$TMP/train.log" 2>&1 \
  && grep -q "iter      2/2" "$TMP/train.log" && ok "kda train on kda tokenize output: 2 iterations" || bad "train: $(tail -3 "$TMP/train.log")"
expect_fail "Llama 3 ids with vocab_size 256" "t2.bin" $KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=1 --set lr_warmup_iters=0 \
  --set data_format=megatron --set "train_data_path=[$TMP/t2]"

# 7. bad input: one line naming the file
printf '{"text": "ok"}\n{"text": 5}\n' > "$TMP/bad.jsonl"
expect_fail "JSON value not a string" "bad.jsonl:2" $KDA tokenize --tokenizer bytes --input "$TMP/bad.jsonl" -o "$TMP/out_bad"
printf '{"txt": "ok"}\n' > "$TMP/key.jsonl"
expect_fail "missing JSON key" "key.jsonl:1" $KDA tokenize --tokenizer bytes --input "$TMP/key.jsonl" -o "$TMP/out_bad"
python3 -c 'import json
for i in range(1, 3001): print("{\"text\": 5}" if i in (1700, 2900) else json.dumps({"text": "line %d" % i}))' > "$TMP/late.jsonl"
expect_fail "the first bad line in input order (2 threads)" "late.jsonl:1700:" $KDA tokenize --tokenizer bytes --threads 2 --input "$TMP/late.jsonl" -o "$TMP/out_bad"
printf 'not json\n' > "$TMP/nj.jsonl"
expect_fail "a line that is not JSON" "nj.jsonl:1" $KDA tokenize --tokenizer bytes --input "$TMP/nj.jsonl" -o "$TMP/out_bad"
expect_fail "missing parquet column" "no column 'body'" $KDA tokenize --tokenizer bytes --input $pq.parquet --column body -o "$TMP/out_bad"
expect_fail "missing input" "nope.jsonl" $KDA tokenize --tokenizer bytes --input "$TMP/nope.jsonl" -o "$TMP/out_bad"
head -c 3000 "$TMP/docs.jsonl.gz" > "$TMP/cut.jsonl.gz"
expect_fail "truncated gzip" "truncated" $KDA tokenize --tokenizer bytes --input "$TMP/cut.jsonl.gz" -o "$TMP/out_bad"
[ -z "$(ls "$TMP" | grep '^out_bad')" ] && ok "failed runs left no output files" || bad "left: $(ls "$TMP" | grep '^out_bad')"
expect_fail "an empty --output-prefix" "names no file" $KDA tokenize --tokenizer bytes --input "$TMP/docs.jsonl.gz" --output-prefix ""
expect_fail "an --output-prefix that is a folder" "names no file" $KDA tokenize --tokenizer bytes --input "$TMP/docs.jsonl.gz" --output-prefix "$TMP/"
[ ! -e "$TMP/.bin" ] && [ ! -e .bin ] && ok "no hidden .bin written" || bad "a nameless prefix wrote .bin"
finish
