#!/usr/bin/env bash
# One rule for every command: usage errors exit 2 with one "kda: error: " prefix; an unknown
# option says "unknown option" (never "needs a value"); a missing value says "needs a value";
# "--key=value" works as "--key value"; "kda help CMD" prints CMD's help.
. "$(dirname "$0")/lib.sh"
usage_err() { # what, substring, cmd...
  local what=$1 pat=$2; shift 2
  local err rc; err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$pat" <<<"$err" && [ "$(grep -c . <<<"$err")" -eq 1 ] && [[ $err == "kda: error: "* ]] \
     && [ "$(grep -o 'kda: error:' <<<"$err" | wc -l)" -eq 1 ]; then ok "$what (exit 2: $err)"
  else bad "$what: exit $rc, stderr: $err (wanted exit 2, one line 'kda: error: ...$pat')"; fi
}
for c in train bench tokenize encode decode export import generate eval plot; do
  usage_err "$c --bogus at the end" "unknown option '--bogus'" $KDA $c --bogus
  usage_err "$c --bogus before a value" "unknown option '--bogus'" $KDA $c --bogus 1
  h=$($KDA help $c 2>&1); rc=$?; h2=$($KDA $c --help 2>&1)
  [ $rc -eq 0 ] && [ -n "$h" ] && [ "$h" = "$h2" ] && ok "kda help $c = kda $c --help" || bad "kda help $c: exit $rc, differs from $c --help"
done
usage_err "generate --seed without a value" "--seed needs a value" $KDA generate ckpt --seed
usage_err "eval --batch-size x" "--batch-size 'x' must be a whole number" $KDA eval ckpt --batch-size x
usage_err "bench --steps abc" "--steps 'abc' must be a whole number" $KDA bench --steps abc
usage_err "tokenize --threads 0" "--threads '0' must be a whole number in [1, 1024]" $KDA tokenize --input x --output-prefix y --threads 0
usage_err "generate --temperature abc" "--temperature 'abc' must be a number" $KDA generate ckpt --temperature abc
usage_err "kda help nosuch" "unknown command 'nosuch'" $KDA help nosuch
usage_err "kda nosuch" "unknown command 'nosuch'" $KDA nosuch
# --key=value
out=$($KDA train --set=num_threads=1 --dry-run 2>&1) && grep -q "1 thread" <<<"$out" && ok "train --set=num_threads=1 works" || bad "--set=k=v: $out"
usage_err "bench --steps=abc" "--steps 'abc' must be a whole number" $KDA bench --steps=abc
# a run-time error (not usage) exits 1 with the prefix
err=$($KDA train --set hidden_size=0 --dry-run 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && [[ $err == "kda: error: "* ]] && ok "a config error exits 1: $err" || bad "config error: exit $rc, $err"
finish
