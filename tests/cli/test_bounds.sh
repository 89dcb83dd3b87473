#!/usr/bin/env bash
# Every count and size has a bound: a value past it is refused at start with the key, the value
# and the allowed range (num_threads 30000 hung, 100000 crashed inside libgomp).
. "$(dirname "$0")/lib.sh"
for kv in num_threads=30000:"[0, 1024]" num_threads=100000:"[0, 1024]" num_threads=-1:"[0, 1024]" micro_batch_size=0:"[1, 65536]" \
          micro_batch_size=1000000:"[1, 65536]" global_batch_size=100000000:"[1, 16777216]" \
          seq_length=100000000:"[1, 16777216]" hidden_size=1000000:"[1, 65536]" num_hidden_layers=100000:"[1, 4096]" \
          num_heads=100000:"[1, 4096]" vocab_size=100000000:"[1, 16777216]" intermediate_size=10000000:"[0, 1048576]" \
          conv_size=1000:"[1, 64]" kda_chunk_size=1000000:"[1, 65536]" sample_tokens=10000000:"[0, 1048576]"; do
  set_=${kv%%:*}; want=${kv#*:}; key=${set_%%=*}; val=${set_#*=}
  expect_fail "train --set $set_" "config: $key $val" timeout 20 $KDA train --set "$set_" --dry-run
  err=$(timeout 20 $KDA train --set "$set_" --dry-run 2>&1 >/dev/null)
  grep -qF -- "$want" <<<"$err" && ok "  names the range $want" || bad "  '$err' lacks '$want'"
done
out=$(timeout 60 $KDA train --set num_threads=1024 --dry-run 2>&1) && ok "num_threads 1024 (the bound) accepted" || bad "num_threads=1024 refused: $out"
expect_fail "tokenize --threads 100000" "--threads" $KDA tokenize --input README.md --output-prefix "$TMP/x" --threads 100000
expect_fail "bench --steps 0" "--steps" $KDA bench --steps 0
expect_fail "bench --steps abc" "--steps" $KDA bench --steps abc
finish
