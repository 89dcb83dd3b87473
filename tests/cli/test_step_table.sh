#!/usr/bin/env bash
# bench/step_table.py (issue 17's table from bench/step_vs_fla.sh's logs): kda's and FLA's rows
# paired by size, the ratio, memory; a tokens-per-joule column only where a log has the board's
# energy counter (kda bench's "energy through the timed steps" line, fla_train_bench.py's
# "J a step" tail), "-" for a side without it; a log without any keeps the five columns.
. "$(dirname "$0")/lib.sh"
cat > "$TMP/with.txt" <<'LOG'
== kda 300M micro-batch 32
  step 260.5 ms (median of 5; min 252.2, max 270.4) | 251603 tokens/s | 1.832 GFLOP/token (3 x forward, §7)
  460.9 TFLOP/s achieved | MFU 46.6% of 989.4 TFLOP/s
  energy through the timed steps: 180.2 J a step (692 W on average) | 364 tokens per joule
  GPU memory in use (peak): 29.31 GiB of 139.80 GiB
== kda 1B micro-batch 16
  step 459.7 ms (median of 5; min 444.3, max 464.8) | 71288 tokens/s | 7.079 GFLOP/token (3 x forward, §7)
  504.7 TFLOP/s achieved | MFU 51.0% of 989.4 TFLOP/s
  GPU memory in use (peak): 50.12 GiB of 139.80 GiB
FLA 300M micro-batch 32 x 2048: 395.6 ms/step | 165658 tokens/s | MFU 30.7% | peak 47.1 GiB | loss 6.7324 | 260.0 J a step, 252 tokens per joule
FLA 1B micro-batch 16 x 2048: 591.4 ms/step | 55411 tokens/s | MFU 39.6% | peak 67.8 GiB | loss 0.0095
LOG
out=$(python3 bench/step_table.py "$TMP/with.txt")
grep -q "tokens per joule kda / FLA |$" <<< "$out" && ok "the energy column's header" || bad "no energy column: $out"
grep -qF "| 300M, 32 | 251.6k (46.6%) | 165.7k (30.7%) | 1.52 | 29.3 / 47.1 GiB | 364 / 252 |" <<< "$out" &&
  ok "300M row: both sides' tokens per joule" || bad "300M row: $out"
grep -qF "| 1B, 16 | 71.3k (51.0%) | 55.4k (39.6%) | 1.29 | 50.1 / 67.8 GiB | - / - |" <<< "$out" &&
  ok "1B row without counters: '-' each side" || bad "1B row: $out"
grep -v "^FLA 1B" "$TMP/with.txt" > "$TMP/no_fla_1b.txt" # a call cut before FLA's 1B
out=$(python3 bench/step_table.py "$TMP/no_fla_1b.txt")
grep -qF "| 1B, 16 | 71.3k (51.0%) | - | - | 50.1 / - GiB | - / - |" <<< "$out" &&
  ok "1B row without FLA's side: '-' for its memory" || bad "1B row without FLA: $out"
grep -v "energy through" "$TMP/with.txt" | sed 's/ | [0-9.]* J a step.*//' > "$TMP/without.txt"
out=$(python3 bench/step_table.py "$TMP/without.txt")
grep -qF "| 300M, 32 | 251.6k (46.6%) | 165.7k (30.7%) | 1.52 | 29.3 / 47.1 GiB |" <<< "$out" &&
  ! grep -q "joule" <<< "$out" && ok "without counters: the five columns as before" || bad "without counters: $out"
finish
