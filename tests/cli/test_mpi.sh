#!/usr/bin/env bash
# CPU data parallelism through MPI: `mpirun -np 2 kda train` splits each global batch across
# the ranks and all-reduces gradients; its losses equal one process with the same global
# batch to fp32 rounding (the gradient sum order differs).
. "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
args=(train configs/tiny-bytes.yaml --device cpu --set train_iters=12 --set log_interval=1 --set sample_tokens=0
      --set global_batch_size=16 --set micro_batch_size=4 --set num_threads=1 --set lr_warmup_iters=2)
$KDA "${args[@]}" --set metrics_file="$TMP/one.jsonl" > "$TMP/one.log" 2>&1 || bad "single process run failed: $(tail -3 "$TMP/one.log")"
mpirun --oversubscribe -np 2 $KDA "${args[@]}" --set metrics_file="$TMP/two.jsonl" > "$TMP/two.log" 2>&1 \
  || bad "mpirun -np 2 failed: $(tail -5 "$TMP/two.log")"
grep -q "2 ranks" "$TMP/two.log" && ok "rank 0 reports 2 ranks" || bad "no '2 ranks' in the log: $(head -3 "$TMP/two.log")"
n=$(grep -c '"loss": ' "$TMP/two.jsonl" 2>/dev/null || echo 0)
[ "$n" = 12 ] && ok "metrics written once (by rank 0): $n lines" || bad "metrics lines: $n"
paste -d' ' <(sed -n 's/.*"loss": \([0-9.e+-]*\),.*/\1/p' "$TMP/one.jsonl") <(sed -n 's/.*"loss": \([0-9.e+-]*\),.*/\1/p' "$TMP/two.jsonl") > "$TMP/pairs"
worst=$(awk '{d=($1-$2)/$1; if (d<0) d=-d; if (d>w) w=d} END {printf "%.3e", w}' "$TMP/pairs")
awk -v w="$worst" 'BEGIN{exit !(w <= 2e-5)}' && [ -s "$TMP/pairs" ] && ok "12 losses equal to one process (worst rel diff $worst <= 2e-5)" \
  || bad "losses differ (worst rel diff $worst): $(head -3 "$TMP/pairs")"
finish
