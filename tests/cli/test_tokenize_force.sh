#!/usr/bin/env bash
# kda tokenize never overwrites existing outputs without --force (its own input included), and a
# run removes the temporary files a killed run left on the same prefix (their process is gone).
. "$(dirname "$0")/lib.sh"
printf 'hello\nworld\n' >"$TMP/in.txt"
$KDA tokenize --tokenizer bytes --quiet --input "$TMP/in.txt" --output-prefix "$TMP/a" && ok "first run writes a.bin/.idx" || bad "first run failed"
expect_fail "second run without --force" "a.bin' exists; pass --force" $KDA tokenize --tokenizer bytes --quiet --input "$TMP/in.txt" --output-prefix "$TMP/a"
$KDA tokenize --tokenizer bytes --quiet --input "$TMP/in.txt" --output-prefix "$TMP/a" 2>/dev/null; [ $? -eq 1 ] && ok "  exit 1" || bad "  exit not 1"
rm "$TMP/a.bin"; expect_fail "only the .idx exists" "a.idx' exists" $KDA tokenize --tokenizer bytes --quiet --input "$TMP/in.txt" --output-prefix "$TMP/a"
$KDA tokenize --tokenizer bytes --quiet --input "$TMP/in.txt" --output-prefix "$TMP/a" --force && [ -s "$TMP/a.bin" ] && ok "--force overwrites" || bad "--force failed"
cp "$TMP/in.txt" "$TMP/c.bin"; before=$(md5sum <"$TMP/c.bin")
expect_fail "input is the output" "'$TMP/c.bin' is also an input" $KDA tokenize --tokenizer bytes --quiet --input "$TMP/c.bin" --output-prefix "$TMP/c"
[ "$(md5sum <"$TMP/c.bin")" = "$before" ] && ok "  the input is untouched" || bad "  the input was overwritten"
# stale temporaries: a dead pid's are removed, a live one's kept
dead=999999; while kill -0 $dead 2>/dev/null; do dead=$((dead-1)); done
touch "$TMP/b.bin.tmp.$dead" "$TMP/b.idx.tmp.$dead" "$TMP/b.bin.tmp.$$"
err=$($KDA tokenize --tokenizer bytes --input "$TMP/in.txt" --output-prefix "$TMP/b" 2>&1 >/dev/null) || bad "run with stale temporaries failed: $err"
[ ! -e "$TMP/b.bin.tmp.$dead" ] && [ ! -e "$TMP/b.idx.tmp.$dead" ] && ok "a killed run's temporaries removed" || bad "stale temporaries left: $(ls "$TMP")"
grep -q "removed '$TMP/b.bin.tmp.$dead'" <<<"$err" && ok "  and said so" || bad "  not reported: $err"
[ -e "$TMP/b.bin.tmp.$$" ] && ok "a running process's temporary kept" || bad "a live process's temporary was removed"
# a real kill -9 mid-run, then a clean run
head -c 20000000 /dev/urandom | base64 -w 100 >"$TMP/big.txt"
$KDA tokenize --tokenizer bytes --quiet --threads 1 --input "$TMP/big.txt" --output-prefix "$TMP/k" & pid=$!
for _ in $(seq 50); do ls "$TMP"/k.bin.tmp.* >/dev/null 2>&1 && break; sleep 0.1; done
kill -9 $pid; wait $pid 2>/dev/null
ls "$TMP"/k.*.tmp.* >/dev/null 2>&1 && ok "kill -9 left temporaries (as expected)" || bad "no temporaries after kill -9 (run too fast?)"
$KDA tokenize --tokenizer bytes --quiet --input "$TMP/in.txt" --output-prefix "$TMP/k" 2>/dev/null
ls "$TMP"/k.*.tmp.* >/dev/null 2>&1 && bad "temporaries still there after the next run" || ok "the next run removed them"
finish
