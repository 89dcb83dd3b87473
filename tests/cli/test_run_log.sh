#!/usr/bin/env bash
# What a run reports: metrics at <save>/metrics.jsonl by default with a header row (kda version,
# backend, config) and the per-iteration fields; validation loss at the end (eval_interval 100); a resumed run drops rows past its checkpoint
# (a crashed run's) and appends, one row per iteration; log lines carry elapsed and time left;
# a closing summary; TensorBoard events when tensorboard_dir is set; bf16 on the CPU warns.
. "$(dirname "$0")/lib.sh"
run() { $KDA train configs/tiny-bytes.yaml --device cpu --set lr_warmup_iters=2 --set log_interval=5 --set sample_tokens=0 \
          --set save="$TMP/ck" --set save_interval=10 --set tensorboard_dir="$TMP/tb" "$@"; }
run --set train_iters=20 > "$TMP/log1" 2>&1 || bad "first run failed: $(tail -3 "$TMP/log1")"
M=$TMP/ck/metrics.jsonl
[ -f "$M" ] && ok "metrics at <save>/metrics.jsonl by default" || bad "no $M"
python3 - "$M" "$($KDA --version)" <<'PY' && ok "header row and rows 1,5,10,15,20 with every field" || bad "metrics content"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows[0]["kda_version"] == sys.argv[2] and "config" in rows[0] and rows[0]["backend"].startswith("cpu"), rows[0]
its = [r["iteration"] for r in rows if "loss" in r]
assert its == [1, 5, 10, 15, 20], its
assert [r["iteration"] for r in rows if "val_loss" in r] == [20], "validation at the end of training"
for r in rows[1:]:
    if "val_loss" in r: continue
    for k in ("loss", "lr", "grad_norm", "ms_per_iter", "tokens_per_s", "consumed_samples", "consumed_tokens", "wall_time"):
        assert k in r, (k, r)
PY
grep -qE "^iter +20/20 .* [0-9hms]+ elapsed, [0-9hms]+ left$" "$TMP/log1" && ok "log lines carry elapsed and time left" || bad "log line: $(grep '^iter' "$TMP/log1" | tail -1)"
grep -q "^kda train: done: iterations 0 -> 20, .* checkpoint $TMP/ck/iter_0000020; metrics $M$" "$TMP/log1" && ok "closing summary" || bad "summary: $(tail -1 "$TMP/log1")"
ls "$TMP"/tb/events.out.tfevents.* > /dev/null 2>&1 && [ -s "$(ls "$TMP"/tb/events.out.tfevents.* | head -1)" ] && ok "TensorBoard event file written" || bad "no TensorBoard events"
echo '{"iteration": 25, "loss": 99.0}' >> "$M" # a run that crashed after its checkpoint at 20
run --set train_iters=30 --set load="$TMP/ck" > "$TMP/log2" 2>&1 || bad "resume failed: $(tail -3 "$TMP/log2")"
grep -q "dropped 1 rows past iteration 20" "$TMP/log2" && ok "resume says it dropped the stale row" || bad "no drop message: $(head -5 "$TMP/log2")"
python3 - "$M" <<'PY' && ok "after the resume: one history, rows 1..30 once each, two header rows" || bad "metrics after resume"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
its = [r["iteration"] for r in rows if "loss" in r]
assert its == [1, 5, 10, 15, 20, 25, 30], its
assert all(r["loss"] < 50 for r in rows if "loss" in r)
assert [r["iteration"] for r in rows if "val_loss" in r] == [20, 30], rows
heads = [r for r in rows if "kda_version" in r]
assert len(heads) == 2 and heads[1]["start_iteration"] == 20
PY
# eval_interval: validation every 10 iterations; a run resumed at 10 gives the uninterrupted run's
# validation losses (evaluation k reads the k-th run of valid samples)
v() { $KDA train configs/tiny-bytes.yaml --device cpu --set lr_warmup_iters=2 --set log_interval=5 --set sample_tokens=0 \
        --set eval_interval=10 --set eval_iters=2 --set lr_decay_iters=20 "$@" > /dev/null 2>&1; }
vals() { sed -n 's/.*"iteration": \([0-9]*\), "val_loss": \([0-9.]*\).*/\1 \2/p' "$1"; }
v --set train_iters=20 --set save="$TMP/v1" && v --set train_iters=10 --set save="$TMP/v2" \
  && v --set train_iters=20 --set save="$TMP/v2" --set load="$TMP/v2" || bad "validation runs failed"
[ "$(vals "$TMP/v1/metrics.jsonl" | cut -d' ' -f1 | tr '\n' ' ')" = "10 20 " ] && ok "validation at iterations 10 and 20" \
  || bad "validation rows: $(vals "$TMP/v1/metrics.jsonl" | tr '\n' ';')"
[ -n "$(vals "$TMP/v1/metrics.jsonl")" ] && [ "$(vals "$TMP/v1/metrics.jsonl")" = "$(vals "$TMP/v2/metrics.jsonl")" ] \
  && ok "resumed at 10: the same validation losses" || bad "validation after resume: $(vals "$TMP/v2/metrics.jsonl" | tr '\n' ';')"
err=$($KDA train configs/tiny-bytes.yaml --device cpu --set bf16=true --set train_iters=1 --set lr_warmup_iters=0 \
        --set sample_tokens=0 2>&1 >/dev/null)
grep -q "warning: bf16: true has no effect on the cpu backend" <<<"$err" && ok "bf16 on the CPU warns" || bad "no bf16 warning: $err"
finish
