#!/usr/bin/env bash
# kda eval --tasks val_loss is training's validation (src/train/validate.c, the one
# implementation): a tiny model trained on the CPU with validation every 2 iterations, on a
# Megatron dataset and on a text file; kda eval on its checkpoints gives the validation loss that
# training logged (metrics.jsonl to its 6 decimals, the log line to its 4) for the same
# iteration, from the checkpoint's data settings and from --data-path / --split given
# explicitly; --eval-iters changes the batches scored; val_loss next to a task scores the same;
# the bad cases exit 2 (usage) or 1 (other errors) with one "kda: error:" line.
. "$(dirname "$0")/lib.sh"
# code, message substring, command...: exit CODE and a single "kda: error: " line holding MSG
fails_with() {
  local want=$1 pat=$2; shift 2
  local err rc; err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -eq "$want" ] && grep -qF -- "$pat" <<<"$err" && [ "$(grep -c . <<<"$err")" -eq 1 ] && [[ $err == "kda: error: "* ]]
  then ok "exit $want: $err"; else bad "wanted exit $want and one 'kda: error: ...$pat' line; got exit $rc: $err"; fi
}
# the val_loss value of a results JSON, as "%.6f" and "%.4f" (what metrics.jsonl and the log print)
loss_of() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["results"]["val_loss"]["loss,none"]; print("%.6f %.4f" % (v, v))' "$1"; }
# the val_loss of ITERATION's validation row in a metrics file, as written ("%.6f")
row_of() { sed -n "s/^{\"iteration\": $2, \"val_loss\": \([0-9.]*\),.*/\1/p" "$1"; }
train() { $KDA train configs/tiny-bytes.yaml --device cpu --set num_threads=1 --set lr_warmup_iters=1 --set sample_tokens=0 \
            --set log_interval=2 --set eval_interval=2 --set eval_iters=2 --set save_interval=2 "$@"; }
ev() { $KDA eval "$@" --no-progress; }

# ---- a Megatron dataset: validation at 2, 4, 6 (evaluations 1, 2, 3), checkpoints at each ----
$KDA tokenize --input data/tinyshakespeare.txt --text-docs block --tokenizer bytes --output-prefix "$TMP/shakes" --quiet \
  > /dev/null 2>&1 || bad "kda tokenize failed"
if ! train --set train_iters=6 --set data_format=megatron --set "train_data_path=[$TMP/shakes]" --set save="$TMP/ck" \
       > "$TMP/train.log" 2>&1; then
  bad "training failed: $(tail -3 "$TMP/train.log")"; finish; exit 1
fi
M=$TMP/ck/metrics.jsonl
[ "$(python3 -c 'import json,sys; print([json.loads(l)["iteration"] for l in open(sys.argv[1]) if "val_loss" in l])' "$M")" = "[2, 4, 6]" ] \
  || bad "training's validation rows: $(grep val_loss "$M")"
last_row=$(row_of "$M" 6); last_log=$(sed -n 's/^validation at iter 6 | loss \([0-9.]*\) .*/\1/p' "$TMP/train.log")
if ev "$TMP/ck" --tasks val_loss --output "$TMP/r.json" > "$TMP/r.out" 2> "$TMP/r.err"; then
  read -r got6 got4d <<<"$(loss_of "$TMP/r.json")"
  [ "$got6" = "$last_row" ] && [ "$got4d" = "$last_log" ] \
    && ok "the checkpoint's own data settings: loss $got6 = training's last validation row ($last_row; log $last_log)" \
    || bad "val_loss $got6 / $got4d, training logged $last_row / $last_log"
  grep -q "^|val_loss|    N/A|none  |      |loss      |↓  | *$last_log|" "$TMP/r.out" && grep -q "|perplexity|" "$TMP/r.out" \
    && ok "the table shows loss $last_log and perplexity" || bad "table: $(cat "$TMP/r.out")"
else
  bad "kda eval --tasks val_loss failed: $(cat "$TMP/r.err")"
fi
python3 - "$TMP/r.json" "$TMP/shakes" <<'EOF' && ok "results JSON: perplexity = exp(loss), 2 x 16 samples, 4096 tokens; configs name the data settings" || bad "results JSON: $(cat "$TMP/r.json")"
import json, math, sys
r = json.load(open(sys.argv[1]))
v, c = r["results"]["val_loss"], r["configs"]["val_loss"]
assert abs(v["perplexity,none"] - math.exp(v["loss,none"])) < 1e-9 * v["perplexity,none"], v
assert v["samples"] == 32 and v["tokens"] == 32 * 128 and v["iteration"] == 6, v
assert c["data_format"] == "megatron" and c["train_data_path"] == [sys.argv[2]] and c["split"] == "969,30,1", c
assert c["eval_iters"] == 2 and c["global_batch_size"] == 16 and c["micro_batch_size"] == 8 and c["eval_index"] == 3, c
assert r["higher_is_better"]["val_loss"] == {"loss": False, "perplexity": False}
EOF
row4=$(row_of "$M" 4)
ev "$TMP/ck/iter_0000004" --tasks val_loss --output "$TMP/r4.json" > /dev/null 2>&1
[ "$(loss_of "$TMP/r4.json" | cut -d' ' -f1)" = "$row4" ] && [ "$row4" != "$last_row" ] \
  && ok "iter_0000004: its own evaluation's samples, training's row at 4 ($row4)" || bad "iter 4: $(loss_of "$TMP/r4.json"), row $row4"
ev "$TMP/ck" --tasks val_loss --data-path "$TMP/shakes.idx" --split 969,30,1 --eval-iters 2 --seq-length 128 \
  --output "$TMP/r2.json" > /dev/null 2>&1
[ "$(loss_of "$TMP/r2.json" | cut -d' ' -f1)" = "$last_row" ] \
  && ok "--data-path PREFIX.idx --split --eval-iters --seq-length given explicitly: the same number" \
  || bad "explicit settings: $(loss_of "$TMP/r2.json") vs $last_row"
ev "$TMP/ck" --tasks val_loss,arc_easy --data-dir tests/data/eval --limit 4 --output "$TMP/r3.json" > "$TMP/r3.out" 2>/dev/null
[ "$(loss_of "$TMP/r3.json" | cut -d' ' -f1)" = "$last_row" ] && grep -q "^|arc_easy" "$TMP/r3.out" \
  && ok "val_loss next to a task (a larger model buffer): the same number" || bad "val_loss + arc_easy: $(cat "$TMP/r3.out")"
ev "$TMP/ck" --tasks val_loss --eval-iters 1 --output "$TMP/r1.json" > /dev/null 2>&1
python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["results"]["val_loss"]; assert v["samples"] == 16, v' "$TMP/r1.json" \
  && ok "--eval-iters 1: one global batch of 16 samples" || bad "--eval-iters 1"

# ---- a text file (data_format text, tiny-bytes' own data) ----
train --set train_iters=2 --set save="$TMP/ckt" > "$TMP/train2.log" 2>&1 || bad "text training failed: $(tail -3 "$TMP/train2.log")"
ev "$TMP/ckt" --tasks val_loss --output "$TMP/t.json" > /dev/null 2>&1
ev "$TMP/ckt" --tasks val_loss --data-path data/tinyshakespeare.txt --output "$TMP/t2.json" > /dev/null 2>&1
rowt=$(row_of "$TMP/ckt/metrics.jsonl" 2)
[ "$(loss_of "$TMP/t.json" | cut -d' ' -f1)" = "$rowt" ] && [ "$(loss_of "$TMP/t2.json" | cut -d' ' -f1)" = "$rowt" ] \
  && ok "text data: the checkpoint's settings and --data-path FILE give training's row ($rowt)" \
  || bad "text data: $(loss_of "$TMP/t.json") / $(loss_of "$TMP/t2.json"), training $rowt"

# ---- bad cases ----
fails_with 2 "--data-path needs a value" $KDA eval "$TMP/ck" --tasks val_loss --data-path
fails_with 1 "--data-path '$TMP/nope': neither a Megatron dataset" $KDA eval "$TMP/ck" --tasks val_loss --data-path "$TMP/nope"
mkdir -p "$TMP/nodata" && cp -r "$TMP/ck/iter_0000006" "$TMP/nodata/" && echo iter_0000006 > "$TMP/nodata/latest"
sed -i '/^train_data_path:/d; /^valid_data_path:/d' "$TMP/nodata/iter_0000006/config.yaml"
fails_with 2 "the checkpoint's config names no data" $KDA eval "$TMP/nodata" --tasks val_loss
ev "$TMP/nodata" --tasks val_loss --data-path "$TMP/shakes" --output "$TMP/n.json" > /dev/null 2>&1 \
  && [ "$(loss_of "$TMP/n.json" | cut -d' ' -f1)" = "$last_row" ] && ok "the same checkpoint with --data-path: training's number" \
  || bad "no-data checkpoint with --data-path: $(loss_of "$TMP/n.json")"
fails_with 1 "eval_iters is 0" $KDA eval "$TMP/ck" --tasks val_loss --set eval_iters=0
fails_with 1 "gives the valid split no share" $KDA eval "$TMP/ck" --tasks val_loss --split 1,0,0
fails_with 2 "--eval-iters '0' must be a whole number" $KDA eval "$TMP/ck" --tasks val_loss --eval-iters 0
fails_with 2 "--data-path is for --tasks val_loss" $KDA eval "$TMP/ck" --tasks arc_easy --data-dir tests/data/eval --data-path "$TMP/shakes"
fails_with 2 "--split is for --tasks val_loss" $KDA eval "$TMP/ck" --tasks arc_easy --data-dir tests/data/eval --split 0,1,0
fails_with 2 "--limit is for the multiple-choice tasks" $KDA eval "$TMP/ck" --tasks val_loss --limit 3
finish
