#!/usr/bin/env bash
# recompute_granularity / recompute_modules: bad values are refused with the key named, modules
# without selective are refused, and a real run gives the same losses with and without
# recomputation (selective with the default modules, selective with core_attn, selective with
# in_proj, kda_gates and o_proj, full).
. "$(dirname "$0")/lib.sh"
expect_fail "unknown granularity" "recompute_granularity 'some' is not one of" \
  $KDA train configs/tiny-bytes.yaml --device cpu --dry-run --set recompute_granularity=some
expect_fail "unknown module" "recompute_modules entry 'attn' is not one of" \
  $KDA train configs/tiny-bytes.yaml --device cpu --dry-run --set recompute_granularity=selective --set recompute_modules=attn
expect_fail "modules without selective" "recompute_modules is set but recompute_granularity is ''" \
  $KDA train configs/tiny-bytes.yaml --device cpu --dry-run --set recompute_modules=conv
run() { $KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=6 --set lr_warmup_iters=2 --set log_interval=1 --set sample_tokens=0 \
          --set metrics_file="$TMP/$1.jsonl" "${@:2}" > "$TMP/$1.log" 2>&1 || bad "$1 run failed: $(tail -2 "$TMP/$1.log")"
        sed -n 's/.*"loss": \([0-9.e+-]*\).*/\1/p' "$TMP/$1.jsonl" > "$TMP/$1.loss"; }
run none
run sel --set recompute_granularity=selective
run core --set recompute_granularity=selective --set recompute_modules=core_attn
run proj --set recompute_granularity=selective --set 'recompute_modules=[in_proj, kda_gates, o_proj]'
run full --set recompute_granularity=full
[ "$(wc -l < "$TMP/none.loss")" -eq 6 ] && ok "6 losses logged" || bad "losses: $(cat "$TMP/none.loss")"
for r in sel core proj full; do
  [ -s "$TMP/$r.loss" ] && cmp -s "$TMP/none.loss" "$TMP/$r.loss" && ok "$r: the same 6 losses as without recomputation" \
    || bad "$r: losses differ: $(paste -d' ' "$TMP/none.loss" "$TMP/$r.loss" | tr '\n' ';')"
done
finish
