#!/usr/bin/env bash
# Data parallelism with the sharded (ZeRO-1) optimizer and checkpoints across rank counts:
#  - use_distributed_optimizer on one process is bit-identical to the plain path (same checkpoint bytes);
#  - mpirun -np 2 with ZeRO-1 gives the losses of one process with the same global batch;
#  - a checkpoint written by 2 ranks (sharded) resumes on 1 rank, and one written by 1 rank resumes
#    on 2 ranks (sharded), each continuing the uninterrupted 1-rank run's losses to fp32 rounding;
#  - a diverging run stops every rank with the message;
#  - one rank dying alone (bad data path on rank 1 only) ends the whole job instead of hanging;
#  - ranks that load different checkpoints are stopped before training.
. "$(dirname "$0")/lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
CFG=${KDA_BYTE_CONFIG:-configs/tiny-bytes.yaml}; [ -f "$CFG" ] || CFG=configs/tiny.yaml
args=(train "$CFG" --device cpu --set log_interval=1 --set sample_tokens=0 --set global_batch_size=16
      --set micro_batch_size=4 --set num_threads=1 --set lr_warmup_iters=2 --set save_interval=4 --set keep_last_n=0)
MPI=(mpirun --oversubscribe -np 2)
losses() { sed -n 's/.*"loss": \([0-9.e+-]*\),.*/\1/p' "$1"; }
# worst relative difference of two loss columns; $3 = how many lines (from the end of the first)
cmp_losses() {
  paste -d' ' <(losses "$1" | tail -n "$3") <(losses "$2") | awk '{d=($1-$2)/$1; if (d<0) d=-d; if (d>w) w=d} END {printf "%.3e", w}'
}
run() { local log=$1; shift; "$@" > "$log" 2>&1 || { bad "run failed: $* : $(tail -3 "$log")"; return 1; }; }

run "$TMP/a.log" $KDA "${args[@]}" --set train_iters=8 --set save="$TMP/a" --set metrics_file="$TMP/a.jsonl"
run "$TMP/z1.log" $KDA "${args[@]}" --set train_iters=8 --set save="$TMP/z1" --set use_distributed_optimizer=true \
    --set metrics_file="$TMP/z1.jsonl"
grep -q "ZeRO-1" "$TMP/z1.log" && ok "one process, use_distributed_optimizer: ZeRO-1 path taken" || bad "no ZeRO-1 line: $(head -4 "$TMP/z1.log")"
same=1
for f in model.safetensors optim.exp_avg.safetensors optim.exp_avg_sq.safetensors; do
  for it in iter_0000004 iter_0000008; do cmp -s "$TMP/a/$it/$f" "$TMP/z1/$it/$f" || same=0; done
done
[ $same = 1 ] && cmp -s <(losses "$TMP/a.jsonl") <(losses "$TMP/z1.jsonl") \
  && ok "one rank through the sharded optimizer = plain path, bit for bit (losses, weights, Adam moments)" \
  || bad "one-rank sharded path differs from the plain path"

run "$TMP/z2.log" "${MPI[@]}" $KDA "${args[@]}" --set train_iters=8 --set save="$TMP/z2" \
    --set use_distributed_optimizer=true --set metrics_file="$TMP/z2.jsonl"
grep -q "shard of rank 0" "$TMP/z2.log" && ok "2 ranks: $(grep -o 'shard of rank 0: [0-9]* floats' "$TMP/z2.log") of $(grep -o 'of [0-9]*$' "$TMP/z2.log" | head -1 | cut -c4-)" \
  || bad "no shard line: $(head -5 "$TMP/z2.log")"
w=$(cmp_losses "$TMP/a.jsonl" "$TMP/z2.jsonl" 8)
awk -v w="$w" 'BEGIN{exit !(w <= 2e-5)}' && [ "$(losses "$TMP/z2.jsonl" | wc -l)" = 8 ] \
  && ok "mpirun -np 2 ZeRO-1: 8 losses equal to one process (worst rel diff $w <= 2e-5)" || bad "ZeRO-1 np2 losses differ ($w)"
# the gathered checkpoint holds whole tensors
sz1=$(stat -c %s "$TMP/a/iter_0000008/optim.exp_avg.safetensors"); sz2=$(stat -c %s "$TMP/z2/iter_0000008/optim.exp_avg.safetensors")
[ "$sz1" = "$sz2" ] && ok "sharded checkpoint has whole tensors (optimizer file $sz2 bytes, as one rank's)" \
  || bad "optimizer file sizes differ: $sz1 vs $sz2"

# 2 ranks (sharded) -> 1 rank: resume from iteration 4 of the 2-rank run
run "$TMP/r1.log" $KDA "${args[@]}" --set train_iters=8 --set load="$TMP/z2/iter_0000004" --set save="" \
    --set metrics_file="$TMP/r1.jsonl"
w=$(cmp_losses "$TMP/a.jsonl" "$TMP/r1.jsonl" 4)
awk -v w="$w" 'BEGIN{exit !(w <= 2e-5)}' && [ "$(losses "$TMP/r1.jsonl" | wc -l)" = 4 ] \
  && ok "2-rank ZeRO checkpoint resumed on 1 rank: iterations 5-8 match (worst rel diff $w)" || bad "2->1 resume differs ($w)"
# 1 rank -> 2 ranks (sharded)
run "$TMP/r2.log" "${MPI[@]}" $KDA "${args[@]}" --set train_iters=8 --set load="$TMP/a/iter_0000004" --set save="" \
    --set use_distributed_optimizer=true --set metrics_file="$TMP/r2.jsonl"
w=$(cmp_losses "$TMP/a.jsonl" "$TMP/r2.jsonl" 4)
awk -v w="$w" 'BEGIN{exit !(w <= 2e-5)}' && [ "$(losses "$TMP/r2.jsonl" | wc -l)" = 4 ] \
  && ok "1-rank checkpoint resumed on 2 ranks with ZeRO-1: iterations 5-8 match (worst rel diff $w)" || bad "1->2 resume differs ($w)"

# a diverging run stops on every rank with the message (no rank left waiting in a collective)
nan=(--set train_iters=6 --set lr=1e30 --set lr_warmup_iters=0 --set save="")
expect_fail "NaN stop, one process" "is not finite" $KDA "${args[@]}" "${nan[@]}"
out=$(timeout 120 "${MPI[@]}" $KDA "${args[@]}" "${nan[@]}" --set use_distributed_optimizer=true 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "is not finite" <<<"$out" \
  && ok "NaN stop, 2 ranks with ZeRO-1: every rank stops (exit $rc, no hang)" || bad "2-rank NaN stop: rc $rc: $(tail -3 <<<"$out")"

# one rank dies alone after MPI is up (its data path is wrong): the job ends (mpirun, or our MPI_Abort
# under launchers that would wait), no hang
out=$(timeout 120 mpirun --oversubscribe -np 1 $KDA "${args[@]}" --set train_iters=4 --set save="" : \
      -np 1 $KDA "${args[@]}" --set train_iters=4 --set save="" --set train_data_path="$TMP/no-such-data" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "no-such-data" <<<"$out" \
  && ok "rank 1 dies alone (missing data): the job ends (exit $rc, no hang), message names the path" \
  || bad "lone rank death: rc $rc: $(tail -3 <<<"$out")"
# ranks that loaded different checkpoints are refused before the first step
out=$(timeout 120 mpirun --oversubscribe -np 1 $KDA "${args[@]}" --set train_iters=8 --set save="" --set load="$TMP/a/iter_0000008" : \
      -np 1 $KDA "${args[@]}" --set train_iters=8 --set save="" --set load="$TMP/a/iter_0000004" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "loaded different checkpoints" <<<"$out" \
  && ok "ranks on different checkpoints refused (exit $rc)" || bad "checkpoint mismatch: rc $rc: $(tail -3 <<<"$out")"

# a launch layout without MPI on the CPU backend is refused with what to do
expect_fail "RANK/WORLD_SIZE launch on the CPU backend" "launch with mpirun" \
  env RANK=0 WORLD_SIZE=2 $KDA "${args[@]}" --set train_iters=4
finish
