#!/usr/bin/env bash
# A short real training run of the tiny config on the CPU: the loss falls, the log and the
# metrics file carry every field, and two runs with the same seed are identical.
. "$(dirname "$0")/lib.sh"
run() { $KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=40 --set log_interval=10 --set sample_tokens=0 \
          --set metrics_file="$1" > "$2" 2>&1; }
run "$TMP/m1.jsonl" "$TMP/log1" && ok "40 iterations of configs/tiny-bytes.yaml" || { bad "training failed: $(tail -3 "$TMP/log1")"; finish; exit 1; }
grep -q "tokens/s" "$TMP/log1" && grep -q "grad norm" "$TMP/log1" && ok "log line has loss, lr, grad norm, tokens/s" || bad "log line fields: $(grep iter "$TMP/log1" | head -2)"
n=$(grep -c '"iteration"' "$TMP/m1.jsonl")
[ "$n" -ge 4 ] && ok "metrics file has $n JSON lines" || bad "metrics file has $n lines"
first=$(grep '"loss": ' "$TMP/m1.jsonl" | head -1 | sed 's/.*"loss": \([0-9.]*\).*/\1/')
last=$(grep '"loss": ' "$TMP/m1.jsonl" | tail -1 | sed 's/.*"loss": \([0-9.]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < a - 0.5)}' && ok "loss falls: $first -> $last" || bad "loss did not fall enough: $first -> $last"
run "$TMP/m2.jsonl" "$TMP/log2"
cut -d, -f1-2 "$TMP/m1.jsonl" > "$TMP/a"; cut -d, -f1-2 "$TMP/m2.jsonl" > "$TMP/b"
cmp -s "$TMP/a" "$TMP/b" && ok "same seed, same losses" || bad "two runs with the same seed differ"
finish
