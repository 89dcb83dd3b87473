#!/usr/bin/env bash
# kda generate end to end: a tiny checkpoint trained for 5 iterations, generated from by its save
# directory and its iter_ directory (same text), greedy and seeded sampling reproducible,
# prompts from a file, end of text, stats on stderr only, early close of stdout, the
# end-of-training sample equal to kda generate's text, and bad input.
# (The numbers themselves — every greedy id against a full forward — are tests/test_generate.c.)
. "$(dirname "$0")/lib.sh"
gen() { $KDA generate "$@" --set num_threads=1; }

same() { cmp -s "$TMP/$1" "$TMP/$2"; }

# ---- a freshly initialised byte-level model (no checkpoint needed) ----
gen --init-seed 3 --config configs/tiny-bytes.yaml --prompt "ROMEO:" --max-new-tokens 30 > "$TMP/a" 2>"$TMP/err" && ok "--init-seed model generates" || bad "init-seed run: $(cat "$TMP/err")"
[ "$(head -c 6 "$TMP/a")" = "ROMEO:" ] && [ "$(wc -c < "$TMP/a")" -gt 8 ] && ok "prompt echoed, continuation follows ($(wc -c < "$TMP/a") bytes)" || bad "output: $(od -c "$TMP/a" | head -2)"
gen --init-seed 3 --config configs/tiny-bytes.yaml --prompt "ROMEO:" --max-new-tokens 30 > "$TMP/b"
same a b && ok "greedy is deterministic" || bad "two greedy runs differ"
gen --init-seed 4 --config configs/tiny-bytes.yaml --prompt "ROMEO:" --max-new-tokens 30 > "$TMP/c"
same a c && bad "init seeds 3 and 4 give the same text" || ok "another init seed, another model"

# ---- a trained checkpoint ----
if ! $KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=5 --set lr_warmup_iters=1 --set save="$TMP/ck" --set sample_tokens=0 \
        --set num_threads=1 > "$TMP/train.log" 2>&1; then
  bad "training the tiny checkpoint failed: $(tail -3 "$TMP/train.log")"; finish; exit 1
fi
ck="$TMP/ck/$(cat "$TMP/ck/latest")"
gen "$TMP/ck" --prompt "ROMEO:" --max-new-tokens 40 > "$TMP/g1" 2>"$TMP/err" && ok "generates from the save directory" || bad "save dir: $(cat "$TMP/err")"
gen "$ck" --prompt "ROMEO:" --max-new-tokens 40 > "$TMP/g2"
[ -s "$TMP/g1" ] && same g1 g2 && ok "save dir and $(basename "$ck") give the same greedy text" || bad "save dir vs iter dir differ"
same g1 a && bad "checkpoint text equals the init-seed text" || ok "the checkpoint's weights are used (text differs from an untrained model)"

samp=(--prompt "To be" --max-new-tokens 40 --temperature 0.9 --top-k 40 --top-p 0.95 --repetition-penalty 1.1)
gen "$ck" "${samp[@]}" --seed 7 > "$TMP/s1"
gen "$ck" "${samp[@]}" --seed 7 > "$TMP/s2"
gen "$ck" "${samp[@]}" --seed 8 > "$TMP/s3"
same s1 s2 && ok "sampling with --seed 7 twice: same text" || bad "same seed, different text"
same s1 s3 && bad "seeds 7 and 8 give the same text" || ok "--seed 8 gives other text"
gen "$ck" --prompt "ROMEO:" --max-new-tokens 40 --temperature 1.0 --top-k 1 --seed 5 > "$TMP/k1"
same k1 g1 && ok "--top-k 1 equals greedy" || bad "top-k 1 differs from greedy"

printf 'First line\n\nSecond: two\r\nthird\n' > "$TMP/prompts.txt"
gen "$ck" --prompt-file "$TMP/prompts.txt" --max-new-tokens 0 > "$TMP/p.out"
printf 'First line\nSecond: two\nthird\n' > "$TMP/p.want"
cmp -s "$TMP/p.out" "$TMP/p.want" && ok "--prompt-file: 3 prompts (blank line skipped, CRLF stripped), one output line each" \
  || bad "prompt file output: $(od -c "$TMP/p.out" | head -3)"

# end of text: make the first greedy byte the eos id, the continuation becomes empty
first=$(gen "$ck" --prompt "ROMEO:" --max-new-tokens 1 --no-echo | head -c 1)
if [ -n "$first" ] && [ "$(printf '%s' "$first" | od -An -tu1 | tr -d ' ')" -lt 128 ]; then
  id=$(printf '%s' "$first" | od -An -tu1 | tr -d ' ')
  e=$(gen "$ck" --prompt "ROMEO:" --max-new-tokens 40 --set eos_token_id=$id --show-stats 2>"$TMP/err")
  [ "$e" = "ROMEO:" ] && grep -q "stopped at end of text" "$TMP/err" && ok "eos_token_id $id ends the text at once" \
    || bad "eos: '$e' / $(cat "$TMP/err")"
else
  ok "eos check skipped (first greedy byte not ASCII)"
fi

gen "$ck" --prompt "ROMEO:" --max-new-tokens 40 --show-stats > "$TMP/o1" 2>"$TMP/stats"
same o1 g1 && grep -q "prefill" "$TMP/stats" && grep -q "first token after" "$TMP/stats" && grep -q "tokens/s" "$TMP/stats" \
  && ok "--show-stats on stderr only: $(head -1 "$TMP/stats")" || bad "stats: $(cat "$TMP/stats")"

n=$(gen "$ck" --prompt "ROMEO:" --max-new-tokens 1000000 2>/dev/null | head -c 20 | wc -c)
[ "$n" = 20 ] && ok "streams: a reader closing after 20 bytes ends the run" || bad "read $n bytes"

# ---- the Llama 3 tokenizer (random model with its vocabulary): BOS prepended, text stays UTF-8 ----
hf=(--init-seed 1 --set vocab_size=128256 --set tokenizer_type=HuggingFaceTokenizer --set bos_token_id=128000
    --set tokenizer_model=data/tokenizer/llama3/tokenizer.json --prompt "The capital of France is" --max-new-tokens 16)
gen "${hf[@]}" --temperature 1 --seed 2 --show-stats > "$TMP/hf" 2>"$TMP/err" && grep -q "^\[prompt 1\] 6 prompt tokens" "$TMP/err" \
  && ok "HuggingFaceTokenizer: BOS + 5 prompt tokens" || bad "hf tokenizer: $(cat "$TMP/err")"
[ "$(head -c 24 "$TMP/hf")" = "The capital of France is" ] && iconv -f UTF-8 -t UTF-8 "$TMP/hf" > /dev/null \
  && ok "HuggingFaceTokenizer: streamed text is valid UTF-8 ($(wc -c < "$TMP/hf") bytes)" || bad "hf output: $(od -c "$TMP/hf" | head -3)"

# ---- the end-of-training sample is this generator's text (kda_sample_print, sample.h) ----
# temperature 0.8 from the seed ^ 0x5eed stream; the sample's context starts with the
# tokenizer's BOS, so generate gets bos_token_id 128000
if $KDA train configs/tiny.yaml --device cpu --set train_iters=2 --set lr_warmup_iters=1 --set data_format=text \
     --set train_data_path=data/tinyshakespeare.txt --set eval_iters=0 --set save="$TMP/ckl" --set sample_tokens=30 \
     --set num_threads=1 > "$TMP/trainl.log" 2>&1; then
  sed -n '/^---- sample (temperature 0.8) ----$/,/^-------*$/p' "$TMP/trainl.log" | sed '1d;$d' > "$TMP/sample"
  gen "$TMP/ckl" --prompt "ROMEO:" --max-new-tokens 30 --temperature 0.8 --seed $((42 ^ 0x5eed)) --set bos_token_id=128000 \
    > "$TMP/gen_sample" 2>"$TMP/err"
  [ "$(head -c 6 "$TMP/sample")" = "ROMEO:" ] && same sample gen_sample \
    && ok "the end-of-training sample equals kda generate --temperature 0.8 --seed 42^0x5eed ($(wc -c < "$TMP/sample") bytes)" \
    || bad "sample vs generate: $(od -c "$TMP/sample" | head -2) / $(od -c "$TMP/gen_sample" | head -2) $(cat "$TMP/err")"
else
  bad "training the tiny Llama 3 checkpoint failed: $(tail -3 "$TMP/trainl.log")"
fi

# ---- bad input ----
expect_fail "missing checkpoint" "$TMP/nope" $KDA generate "$TMP/nope" --prompt hi
mkdir -p "$TMP/empty_save"
expect_fail "save directory without a checkpoint" "empty_save" $KDA generate "$TMP/empty_save" --prompt hi
: > "$TMP/empty.txt"
expect_fail "empty prompt file" "no prompts" $KDA generate "$ck" --prompt-file "$TMP/empty.txt"
expect_fail "missing prompt file" "$TMP/none.txt" $KDA generate "$ck" --prompt-file "$TMP/none.txt"
expect_fail "no prompt" "no prompt" $KDA generate "$ck"
expect_fail "empty prompt without BOS" "empty" $KDA generate "$ck" --prompt ""
expect_fail "no model" "no model" $KDA generate --prompt hi
expect_fail "top-p out of range" "top-p" $KDA generate "$ck" --prompt hi --top-p 1.5
expect_fail "temperature not a number" "--temperature" $KDA generate "$ck" --prompt hi --temperature warm
expect_fail "unknown option" "--beam" $KDA generate "$ck" --prompt hi --beam 4
expect_fail "--tokenizer FILE with a byte-level model" "byte-level" $KDA generate "$ck" --prompt hi --tokenizer data/tokenizer/llama3/tokenizer.json
finish
