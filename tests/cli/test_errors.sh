#!/usr/bin/env bash
# Bad input everywhere: one clear line naming the input, non-zero exit.
. "$(dirname "$0")/lib.sh"
# no command: the usage text (several lines) and a non-zero exit
out=$($KDA 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && grep -q "usage: kda" <<<"$out" && ok "no command prints usage, exit $rc" || bad "no command: exit $rc"
expect_fail "unknown command" "unknown command 'frobnicate'" $KDA frobnicate
pending=$($KDA help | sed -n 's/^  \([a-z]*\) .*\[not built yet:.*/\1/p' | head -1)
if [ -n "$pending" ]; then expect_fail "a command not built yet says so" "not built yet" $KDA "$pending"
else ok "every command is built (no 'not built yet' case left to check)"; fi
expect_fail "missing config file" "nope.yaml" $KDA train "$TMP/nope.yaml"
printf 'hidden_size: [1, 2\n' > "$TMP/broken.yaml"
expect_fail "malformed YAML names file:line" "broken.yaml:" $KDA train "$TMP/broken.yaml"
printf 'hiden_size: 64\n' > "$TMP/typo.yaml"
expect_fail "unknown key is named" "hiden_size" $KDA train "$TMP/typo.yaml"
printf 'hidden_size: sixty\n' > "$TMP/type.yaml"
expect_fail "wrong type is named" "hidden_size" $KDA train "$TMP/type.yaml"
expect_fail "inconsistent batch sizes" "global_batch_size" $KDA train configs/tiny-bytes.yaml --set global_batch_size=12 --set micro_batch_size=8
expect_fail "bad --set value" "seq_length" $KDA train configs/tiny-bytes.yaml --set seq_length=-3
expect_fail "missing data file" "no-such-corpus.txt" $KDA train configs/tiny-bytes.yaml --set train_data_path=$TMP/no-such-corpus.txt
expect_fail "cuda requested without a GPU or CUDA build" "cuda" env CUDA_VISIBLE_DEVICES= $KDA train configs/tiny-bytes.yaml --device cuda --set train_iters=1 --set lr_warmup_iters=0
# the tokenizer of the sample after training is loaded before the first iteration (a missing or
# broken file fails in a second, not after the run); without a sample an unreadable one is a warning
tt=(train configs/tiny.yaml --device cpu --set data_format=text --set train_data_path=data/tinyshakespeare.txt
    --set train_iters=2 --set lr_warmup_iters=0 --set eval_iters=0 --set num_hidden_layers=1)
expect_fail "train with a missing tokenizer_model" "$TMP/nope.json" $KDA "${tt[@]}" --set tokenizer_model="$TMP/nope.json"
echo '{"model": 3' > "$TMP/broken.json"
out=$($KDA "${tt[@]}" --set tokenizer_model="$TMP/broken.json" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "broken.json" <<<"$out" && ! grep -q "^iter" <<<"$out" && ok "a broken tokenizer file stops train before iteration 1" ||
  bad "broken tokenizer: exit $rc: $(tail -2 <<<"$out")"
out=$($KDA "${tt[@]}" --set tokenizer_type=byte --set vocab_size=256 --set sample_tokens=0 --set tokenizer_model="$TMP/nope.json" 2>&1)
rc=$?; [ $rc -eq 0 ] && ok "a byte-level run without a sample needs no tokenizer file" || bad "byte run: exit $rc: $(tail -2 <<<"$out")"
finish
