#!/usr/bin/env bash
# Outputs are checked at start, before the model is built or the first iteration runs: a `save`
# that is a file or cannot be created, a metrics_file that is a folder, eval --output and
# tokenize --output-prefix under a file. Two runs on one save folder: the second refuses to start;
# a killed run leaves no stuck lock.
. "$(dirname "$0")/lib.sh"
T="$KDA train configs/tiny-bytes.yaml --device cpu --set sample_tokens=0 --set lr_warmup_iters=0"
touch "$TMP/afile"
early() { # what, pattern, args...: fails, and before any iteration
  local what=$1 pat=$2; shift 2
  expect_fail "$what" "$pat" "$@"
  "$@" 2>/dev/null | grep -q "^iter" && bad "  $what: iterations ran before the error" || ok "  before the first iteration"
}
early "save is a file" "save '$TMP/afile' is a file, not a folder" $T --set save="$TMP/afile" --set train_iters=5
early "save cannot be created" "save '/proc/kda-no/such'" $T --set save=/proc/kda-no/such --set train_iters=5
early "save under a file" "save '$TMP/afile/sub'" $T --set save="$TMP/afile/sub" --set train_iters=5
early "metrics_file is a folder" "metrics_file '$TMP' is a folder" $T --set metrics_file="$TMP" --set train_iters=5
early "metrics_file under a file" "metrics_file '$TMP/afile/m.jsonl'" $T --set metrics_file="$TMP/afile/m.jsonl" --set train_iters=5
expect_fail "eval --output under a file" "--output '$TMP/afile/r.json'" $KDA eval "$TMP/nock" --tasks arc_easy --output "$TMP/afile/r.json"
expect_fail "eval --output is a folder" "--output '$TMP' is a folder" $KDA eval "$TMP/nock" --tasks arc_easy --output "$TMP"
expect_fail "tokenize --output-prefix under a file" "--output-prefix '$TMP/afile/x.bin'" $KDA tokenize --tokenizer bytes --input README.md --output-prefix "$TMP/afile/x"
# the lock
$T --set save="$TMP/s" --set train_iters=100000 --set save_interval=0 >"$TMP/run1.log" 2>&1 & pid=$!
for _ in $(seq 100); do grep -q "^iter" "$TMP/run1.log" && break; sleep 0.2; done
[ -f "$TMP/s/.lock" ] && ok "the first run holds $TMP/s/.lock" || bad "no lock file: $(cat "$TMP/run1.log")"
expect_fail "a second run on the same save" "is in use by another run (pid $pid" $T --set save="$TMP/s" --set train_iters=5
kill -9 $pid; wait $pid 2>/dev/null
out=$($T --set save="$TMP/s" --set train_iters=2 2>&1) && ok "after kill -9 a new run starts (no stuck lock)" || bad "after kill -9: $out"
out=$($T --set save="$TMP/s2" --set train_iters=2 --dry-run 2>&1) && ok "dry run with a new save folder" || bad "dry run: $out"
# a resume with nothing left to do says so; an interrupt without save says nothing was saved
out=$($T --set save="$TMP/s3" --set load="$TMP/s3" --set train_iters=2 2>&1) || bad "2 iterations: $out"
out=$($T --set save="$TMP/s3" --set load="$TMP/s3" --set train_iters=2 2>&1)
grep -q "nothing to do: the checkpoint is at iteration 2 and train_iters is 2" <<<"$out" && ok "resume with nothing to do says so" || bad "resume: $out"
$T --set train_iters=100000 >"$TMP/run2.log" 2>&1 & pid=$!
for _ in $(seq 100); do grep -q "^iter" "$TMP/run2.log" && break; sleep 0.2; done
kill -INT $pid; wait $pid
grep -q "no checkpoint written (save is not set)" "$TMP/run2.log" && ok "interrupt without save says no checkpoint written" || bad "interrupt: $(tail -2 "$TMP/run2.log")"
finish
