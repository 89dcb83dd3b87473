#!/usr/bin/env bash
# Checkpoints: exact resume (N straight == k + resume + N-k, bit-identical losses), SIGINT
# (finish the step, save, exit 0), keep-last-N, `latest`, and crash safety: SIGKILL at random
# moments of a run that saves every iteration, resumed each time, >= 20 kills; every
# checkpoint left behind loads and the final losses equal the uninterrupted run's.
. "$(dirname "$0")/lib.sh"
N=24
common=(configs/tiny-bytes.yaml --device cpu --set log_interval=1 --set sample_tokens=0 --set train_iters=$N
        --set seq_length=64 --set hidden_size=64 --set intermediate_size=128 --set num_threads=1
        --set lr_warmup_iters=4 --set lr_decay_iters=$N)
loss_of() { sed -n 's/.*"iteration": \([0-9]*\), "loss": \([0-9.e+-]*\),.*/\1 \2/p' "$@" | sort -n | uniq; }

# 1. straight run
$KDA train "${common[@]}" --set metrics_file="$TMP/straight.jsonl" > "$TMP/straight.log" 2>&1 || bad "straight run: $(tail -3 "$TMP/straight.log")"
loss_of "$TMP/straight.jsonl" > "$TMP/straight.loss"

# 2. k steps, save, resume, N-k steps
$KDA train "${common[@]}" --set train_iters=10 --set save="$TMP/ck" --set metrics_file="$TMP/a.jsonl" > "$TMP/a.log" 2>&1 || bad "first half: $(tail -3 "$TMP/a.log")"
[ "$(cat "$TMP/ck/latest")" = iter_0000010 ] && ok "latest points at iter_0000010" || bad "latest: $(cat "$TMP/ck/latest" 2>&1)"
$KDA train "${common[@]}" --set save="$TMP/ck" --set load="$TMP/ck" --set metrics_file="$TMP/b.jsonl" > "$TMP/b.log" 2>&1 || bad "resume: $(tail -3 "$TMP/b.log")"
grep -q "loaded .*iteration 10" "$TMP/b.log" && ok "resume reports iteration 10" || bad "resume log: $(head -4 "$TMP/b.log")"
loss_of "$TMP/a.jsonl" "$TMP/b.jsonl" > "$TMP/resumed.loss"
if cmp -s "$TMP/straight.loss" "$TMP/resumed.loss" && [ "$(wc -l < "$TMP/straight.loss")" = $N ]; then ok "10 + resume + 14 steps: $N losses bit-identical to $N straight"
else bad "resumed losses differ: $(diff "$TMP/straight.loss" "$TMP/resumed.loss" | head -4)"; fi

# 2b. finetune: weights only, iteration and data restart at 0; no_load_optim: resume at 10 with
#     fresh AdamW moments (step 12's loss, after the first fresh update, differs from the
#     straight run's); no_load_rng still resumes with the saved moments
$KDA train "${common[@]}" --set train_iters=3 --set load="$TMP/ck" --set finetune=true --set metrics_file="$TMP/ft.jsonl" > "$TMP/ft.log" 2>&1
grep -q "fine-tuning start" "$TMP/ft.log" && [ "$(loss_of "$TMP/ft.jsonl" | head -1 | cut -d' ' -f1)" = 1 ] \
  && ok "finetune loads weights only and starts at iteration 1" || bad "finetune: $(tail -3 "$TMP/ft.log")"
$KDA train "${common[@]}" --set train_iters=12 --set load="$TMP/ck/iter_0000010" --set no_load_optim=true --set metrics_file="$TMP/nlo.jsonl" > "$TMP/nlo.log" 2>&1
l12=$(loss_of "$TMP/nlo.jsonl" | awk '$1==12{print $2}'); s12=$(awk '$1==12{print $2}' "$TMP/straight.loss")
[ -n "$l12" ] && [ "$l12" != "$s12" ] && grep -q "iteration 10" "$TMP/nlo.log" \
  && ok "no_load_optim resumes at 10 with fresh moments (step 12 loss $l12 vs $s12 straight)" || bad "no_load_optim: '$l12' vs '$s12': $(tail -2 "$TMP/nlo.log")"
$KDA train "${common[@]}" --set train_iters=12 --set load="$TMP/ck/iter_0000010" --set no_load_rng=true --set metrics_file="$TMP/nlr.jsonl" > "$TMP/nlr.log" 2>&1
l12=$(loss_of "$TMP/nlr.jsonl" | awk '$1==12{print $2}')
[ -n "$l12" ] && [ "$l12" = "$s12" ] && ok "no_load_rng resumes at 10 with the saved moments (step 12 loss equals)" || bad "no_load_rng: '$l12' vs '$s12'"

# 3. keep-last-N
$KDA train "${common[@]}" --set save="$TMP/keep" --set save_interval=2 --set keep_last_n=3 --set train_iters=12 > "$TMP/k.log" 2>&1
n=$(ls -d "$TMP"/keep/iter_* 2>/dev/null | wc -l)
[ "$n" = 3 ] && [ -d "$TMP/keep/iter_0000012" ] && ok "keep_last_n 3 keeps 3 checkpoints (newest iter_0000012)" || bad "keep: $(ls "$TMP/keep")"

# 4. SIGINT: finish the step, save, exit 0
$KDA train "${common[@]}" --set train_iters=100000 --set save="$TMP/sig" > "$TMP/sig.log" 2>&1 &
pid=$!; sleep 3; kill -INT $pid; wait $pid; rc=$?
[ $rc = 0 ] && grep -q "stopped by signal" "$TMP/sig.log" && [ -f "$TMP/sig/latest" ] && ok "SIGINT: exit 0 and saved $(cat "$TMP/sig/latest")" || bad "SIGINT: rc $rc, $(tail -2 "$TMP/sig.log")"

# 4b. SIGINT during a long validation: it stops between micro-batches (not logged), the run saves
# and exits within seconds (it ran every validation to its end, then another, ~3 minutes)
$KDA train "${common[@]}" --set train_iters=100000 --set eval_interval=2 --set eval_iters=400 --set save="$TMP/sigv" \
  > "$TMP/sigv.log" 2>&1 &
pid=$!; for i in $(seq 100); do grep -q "^iter" "$TMP/sigv.log" 2>/dev/null && break; sleep 0.1; done; sleep 1
t0=$SECONDS; kill -INT $pid; wait $pid; rc=$?
[ $rc = 0 ] && [ $((SECONDS - t0)) -le 10 ] && grep -q "cut short by a signal" "$TMP/sigv.log" && [ -f "$TMP/sigv/latest" ] &&
  ok "SIGINT during validation: saved $(cat "$TMP/sigv/latest") and exit 0 in $((SECONDS - t0)) s" ||
  bad "SIGINT during validation: rc $rc after $((SECONDS - t0)) s: $(tail -3 "$TMP/sigv.log")"
# 4c. SIGTERM during the sample after training (the checkpoint is written): the process ends at once
# (SIGTERM: a script's background job ignores SIGINT, and kda puts back what it inherited)
$KDA train "${common[@]}" --set train_iters=2 --set sample_tokens=1000000 --set save="$TMP/sigs" > "$TMP/sigs.log" 2>&1 &
pid=$!; for i in $(seq 300); do grep -q -- "---- sample" "$TMP/sigs.log" 2>/dev/null && break; sleep 0.1; done
t0=$SECONDS; kill -TERM $pid; wait $pid; rc=$?
[ $rc = 143 ] && [ $((SECONDS - t0)) -le 5 ] && [ -f "$TMP/sigs/latest" ] && ok "SIGTERM during the sample: exit 143 at once, checkpoint kept" ||
  bad "SIGTERM during the sample: rc $rc after $((SECONDS - t0)) s: $(tail -c 300 "$TMP/sigs.log")"

# 5. crash safety: SIGKILL at random moments, resume each time
kills=0; tries=0; loaded=0; rm -rf "$TMP/crash"; : > "$TMP/crash.jsonl"
while [ $tries -lt 200 ]; do
  tries=$((tries+1))
  $KDA train "${common[@]}" --set save="$TMP/crash" --set load="$TMP/crash" --set save_interval=1 --set keep_last_n=2 \
     --set metrics_file="$TMP/c$tries.jsonl" > "$TMP/c.log" 2>&1 &
  pid=$!
  sleep 0.$((RANDOM % 9 + 1))
  if kill -9 $pid 2>/dev/null; then wait $pid 2>/dev/null; kills=$((kills+1)); else wait $pid; rc=$?; [ $rc = 0 ] || { bad "run $tries failed: $(tail -3 "$TMP/c.log")"; break; }; fi
  # every checkpoint left behind loads
  for d in "$TMP"/crash/iter_*; do
    loaded=$((loaded+1))
    [ -d "$d" ] || continue
    case "$(basename "$d")" in *.*) continue;; esac  # .tmp-PID / .old-PID leftovers of a killed save
    $KDA train "${common[@]}" --set load="$d" --dry-run > "$TMP/l.log" 2>&1 || { bad "checkpoint $d does not load: $(tail -2 "$TMP/l.log")"; }
  done
  [ -f "$TMP/crash/latest" ] && [ "$(cat "$TMP/crash/latest")" = "$(printf 'iter_%07d' $N)" ] && [ $kills -ge 20 ] && break
  if [ -f "$TMP/crash/latest" ] && [ "$(cat "$TMP/crash/latest")" = "$(printf 'iter_%07d' $N)" ]; then rm -rf "$TMP/crash"; fi # finished early: start over to get more kills
done
[ $loaded -ge 20 ] && ok "$loaded checkpoint loads after kills" || bad "only $loaded checkpoints were checked"
[ $kills -ge 20 ] && ok "$kills SIGKILLs during a checkpoint-every-step run, resumed each time" || bad "only $kills kills in $tries tries"
# the losses of the final complete run chain: replay the last uninterrupted segment from its start
loss_of "$TMP"/c*.jsonl | awk '{l[$1]=$2} END {for (i in l) print i, l[i]}' | sort -n > "$TMP/crash.loss"
if cmp -s "$TMP/straight.loss" "$TMP/crash.loss"; then ok "after $kills kills, every iteration's loss equals the uninterrupted run's"
else bad "crash-resumed losses differ: $(diff "$TMP/straight.loss" "$TMP/crash.loss" | head -4)"; fi
finish
