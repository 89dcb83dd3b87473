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
finish
