#!/usr/bin/env bash
# The default demo path (`make demo`) end to end at small scale, in a scratch folder that holds
# only the bundled data/: `kda train` with the built-in default (== configs/tiny.yaml: Llama 3
# vocabulary, token files of data/tinyshakespeare.txt) names the `kda tokenize` command when the
# token files are missing; that command (the same as the Makefile's demo recipe) makes them;
# 12 iterations of the default model train with finite, falling losses; the end-of-training
# sample comes out as text decoded by the Llama 3 tokenizer.
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
K=$(realpath "$KDA" 2>/dev/null || command -v "$KDA")
W=$TMP/ws
mkdir -p "$W" && ln -s "$ROOT/data" "$W/data"

# ---- missing token files: the message names the command that makes them ----
err=$(cd "$W" && "$K" train --device cpu 2>&1 >/dev/null); rc=$?
cmd=$(sed -n 's/.*make them with: \(\.\/kda tokenize [^`]*[^ `]\) *(`make demo` runs it).*/\1/p' <<<"$err")
if [ $rc -ne 0 ] && [ -n "$cmd" ] && grep -q "build/data/tinyshakespeare-llama3" <<<"$err"; then
  ok "built-in default without token files: exit $rc, names '$cmd'"
else
  bad "missing token files: exit $rc, message: $err"; finish; exit 1
fi
grep -qF -- "$cmd" Makefile && ok "the Makefile's demo recipe runs the same command" \
  || bad "the Makefile has no recipe line '$cmd' (keep the message in src/cli/cli_train.c and the demo target in sync)"

# ---- that command makes them ----
args=${cmd#./kda tokenize }
# shellcheck disable=SC2086  # the command's words, as the user would type them
(cd "$W" && "$K" tokenize $args --quiet) > "$TMP/tok.log" 2>&1 \
  && [ -s "$W/build/data/tinyshakespeare-llama3.bin" ] && [ -s "$W/build/data/tinyshakespeare-llama3.idx" ] \
  && ok "kda tokenize made the demo token files: $(tail -1 "$TMP/tok.log")" || bad "tokenize: $(tail -3 "$TMP/tok.log")"

# ---- the built-in default trains on them and prints a decoded sample ----
(cd "$W" && "$K" train --device cpu --set train_iters=12 --set lr_warmup_iters=2 --set log_interval=1 \
   --set sample_tokens=24 --set metrics_file="$TMP/m.jsonl") > "$TMP/train.log" 2>&1 \
  && ok "12 iterations of the built-in default: $(head -1 "$TMP/train.log")" \
  || { bad "training: $(tail -3 "$TMP/train.log")"; finish; exit 1; }
grep -q "vocab 128256" "$TMP/train.log" && ok "the default model has the Llama 3 vocabulary" || bad "vocab: $(head -1 "$TMP/train.log")"
losses=$(sed -n 's/.*"loss": \([^,]*\),.*/\1/p' "$TMP/m.jsonl")
n=$(wc -l <<<"$losses")
awk 'BEGIN{bad=0} !($1 ~ /^[0-9]+\.[0-9]+$/) {bad=1} END{exit bad}' <<<"$losses" && [ "$n" -eq 12 ] \
  && ok "12 finite losses" || bad "losses ($n): $losses"
first=$(head -1 <<<"$losses"); last=$(tail -1 <<<"$losses")
awk -v a="$first" -v b="$last" 'BEGIN{exit !(a > 11 && b < a - 1.0)}' && ok "loss falls: $first -> $last (ln 128256 = 11.76)" \
  || bad "loss did not fall by 1: $first -> $last"
sed -n '/^---- sample (temperature 0.8) ----$/,/^-------*$/p' "$TMP/train.log" | sed '1d;$d' > "$TMP/sample"
if [ "$(head -c 6 "$TMP/sample")" = "ROMEO:" ] && [ "$(wc -c < "$TMP/sample")" -ge 40 ] && iconv -f UTF-8 -t UTF-8 "$TMP/sample" > /dev/null \
   && ! LC_ALL=C grep -q '[[:cntrl:]]' <(tr -d '\n\t' < "$TMP/sample") && grep -q '[a-z][a-z]' "$TMP/sample"; then
  ok "sample decoded to text ($(wc -c < "$TMP/sample") bytes): $(head -c 70 "$TMP/sample" | tr '\n' ' ')"
else
  bad "sample: $(od -c "$TMP/sample" | head -4)"
fi
grep -q "sample skipped" "$TMP/train.log" && bad "sample skipped" || ok "no 'sample skipped'"
finish
