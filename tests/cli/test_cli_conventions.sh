#!/usr/bin/env bash
# One rule for every command: usage errors exit 2 with one "kda: error: " prefix; an unknown
# option says "unknown option" (never "needs a value"); a missing value says "needs a value";
# "--key=value" works as "--key value" and "--flag=x" is refused; "kda help CMD" prints CMD's
# help, and that help lists every option CMD's parser accepts. The options are derived from the
# source: every option-like string literal ("--key", "-k") of the file that defines cmd_CMD
# (main.c for version) and of cli_args.c is tried on CMD, and each one CMD does not call an
# unknown option must be listed in its help (in the usage synopsis, or at the start of an
# option line), so a new undocumented option fails here.
. "$(dirname "$0")/lib.sh"
usage_err() { # what, substring, cmd...
  local what=$1 pat=$2; shift 2
  local err rc; err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$pat" <<<"$err" && [ "$(grep -c . <<<"$err")" -eq 1 ] && [[ $err == "kda: error: "* ]] \
     && [ "$(grep -o 'kda: error:' <<<"$err" | wc -l)" -eq 1 ]; then ok "$what (exit 2: $err)"
  else bad "$what: exit $rc, stderr: $err (wanted exit 2, one line 'kda: error: ...$pat')"; fi
}
CMDS="train bench export import generate encode decode tokenize eval plot version"
for c in $CMDS; do
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
# ---- every option a parser accepts is in its help; --key=value as --key value; --flag=x refused ----
listed() { # the options a help text lists: in the "usage:" lines, or first on an indented line
  awk '/^usage:/ { syn = 1 }
       syn && !/^usage:/ && !/^[ \t]/ { syn = 0 }
       syn { while (match($0, /-[-]?[A-Za-z][A-Za-z0-9-]*/)) {
               print substr($0, RSTART, RLENGTH); $0 = substr($0, RSTART + RLENGTH) }
             next }
       /^[ \t]+-/ { sub(/=.*/, "", $1); f = $1; sub(/,$/, "", f); print f
                    if ($1 ~ /,$/) { sub(/=.*/, "", $2); print $2 } }'
}
src_of() { # the files that hold CMD's parser
  if [ "$1" = version ]; then echo src/cli/main.c; else grep -l "^int cmd_$1(" src/cli/cli_*.c; fi
}
for c in $CMDS; do
  files=$(src_of $c)
  [ -n "$files" ] || { bad "$c: no source file defines cmd_$c"; continue; }
  help=$($KDA help $c 2>&1 | listed)
  accepted=(); missing=(); eqbad=()
  for o in $(grep -ohE '"--?[A-Za-z][A-Za-z0-9-]*=?"' $files src/cli/cli_args.c | tr -d '"=' | sort -u); do
    [ "$o" = --help ] || [ "$o" = -h ] && continue   # every command's; 'kda help' says so
    err=$(timeout 60 $KDA $c "$o" </dev/null 2>&1 >/dev/null)
    grep -qF "unknown option '$o'" <<<"$err" && continue # another command's option, or a word in a message
    accepted+=("$o")
    grep -qxF -- "$o" <<<"$help" || missing+=("$o")
    [[ $o == --* ]] || continue
    if grep -qF -- "$o needs a value" <<<"$err"; then # --key=zzz must do what --key zzz does
      a=$(timeout 60 $KDA $c "$o" zzz </dev/null 2>&1 >/dev/null); ra=$?
      b=$(timeout 60 $KDA $c "$o=zzz" </dev/null 2>&1 >/dev/null); rb=$?
      [ "$ra" = "$rb" ] && [ "$a" = "$b" ] || eqbad+=("$o=zzz: exit $rb '$b' vs $o zzz: exit $ra '$a'")
    else # a flag: --flag=1 is a usage error, not a flag plus an argument
      b=$(timeout 60 $KDA $c "$o=1" </dev/null 2>&1 >/dev/null); rb=$?
      [ $rb -eq 2 ] && grep -qF -- "$o takes no value" <<<"$b" || eqbad+=("$o=1: exit $rb '$b'")
    fi
  done
  if [ ${#accepted[@]} -eq 0 ] && [ $c != version ]; then
    bad "$c: no option found in $files (is the derivation broken?)"
  elif [ ${#missing[@]} -eq 0 ]; then
    ok "$c: its help lists all ${#accepted[@]} options its parser accepts (${accepted[*]})"
  else
    bad "$c: accepted but not in 'kda help $c': ${missing[*]}"
  fi
  [ ${#eqbad[@]} -eq 0 ] && ok "$c: --key=value works as --key value, --flag=x is refused" || bad "$c: ${eqbad[*]}"
done
# missing, extra or conflicting arguments are usage errors too
usage_err "export without arguments" "needs CHECKPOINT and OUT_DIR" $KDA export
usage_err "import without arguments" "needs HF_DIR and SAVE_DIR" $KDA import
usage_err "import with three arguments" "unexpected 'c'" $KDA import a b c
usage_err "generate without a model" "no model" $KDA generate --prompt hi
usage_err "generate with a checkpoint and --init-seed" "not both" $KDA generate ckpt --init-seed 1
usage_err "eval without a checkpoint" "no checkpoint" $KDA eval --tasks arc_easy
usage_err "eval without --tasks" "no tasks" $KDA eval ckpt
usage_err "tokenize without input" "no input" $KDA tokenize --output-prefix x
usage_err "tokenize without --output-prefix" "no --output-prefix" $KDA tokenize --input x
usage_err "tokenize --format xml" "--format 'xml'" $KDA tokenize --input x -o y --format xml
usage_err "export --dtype fp8" "--dtype 'fp8'" $KDA export a b --dtype fp8
usage_err "train with two configs" "takes one config file" $KDA train a.yaml b.yaml
usage_err "bench with two configs" "takes one config file" $KDA bench a.yaml b.yaml
usage_err "plot without files" "no metrics files" $KDA plot -o x.svg
usage_err "encode with an argument" "unexpected 'x'" $KDA encode x
usage_err "version with an argument" "unexpected 'x'" $KDA version x
usage_err "train --set without '='" "--set 'lr' must be key=value" $KDA train --set lr
usage_err "eval --device gpu" "--device 'gpu': use auto, cpu or cuda" $KDA eval ckpt --tasks x --device gpu
# --key=value
out=$($KDA train --set=num_threads=1 --dry-run 2>&1) && grep -q "1 thread" <<<"$out" && ok "train --set=num_threads=1 works" || bad "--set=k=v: $out"
usage_err "bench --steps=abc" "--steps 'abc' must be a whole number" $KDA bench --steps=abc
# a run-time error (not usage) exits 1 with the prefix
err=$($KDA train --set hidden_size=0 --dry-run 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] && [[ $err == "kda: error: "* ]] && ok "a config error exits 1: $err" || bad "config error: exit $rc, $err"
finish
