#!/usr/bin/env bash
# same_bits.sh KDA_A KDA_B — whether two kda builds train to the same bits on this GPU: a small
# model with the 300M model's head sizes (K = 32, V = 64, chunk 64; 8 chunks a sequence) trained
# 10 iterations from the same seed by each, its final checkpoints (weights and both Adam moments)
# compared byte by byte, and the losses of every iteration. For a change meant to keep every bit
# (a kernel's loads or loops reorganised with its arithmetic in the same order). Exit 0 when same.
# SAME_BITS_DEVICE=cpu runs it on the CPU; SAME_BITS_B_SET=key=value changes one setting of B (a check
# that a difference shows: SAME_BITS_B_SET=seed=43 must fail).
set -u
. "$(dirname "$0")/lib.sh"
A=${1:?usage: same_bits.sh KDA_A KDA_B}; B=${2:?usage: same_bits.sh KDA_A KDA_B}
T=$(mktemp -d)
args=(train configs/tiny-bytes.yaml --device "${SAME_BITS_DEVICE:-cuda}" --set hidden_size=256 --set head_dim=32 --set expand_v=2.0
      --set seq_length=512 --set micro_batch_size=4 --set global_batch_size=8 --set train_iters=10
      --set log_interval=1 --set sample_tokens=0 --set save_interval=10 --set keep_last_n=0 --set lr_warmup_iters=2)
fail=0
for x in A B; do
  bin=${!x}
  set_x=SAME_BITS_${x}_SET; "$bin" "${args[@]}" ${!set_x:+--set ${!set_x}} --set save=$T/$x --set metrics_file=$T/$x.jsonl > $T/$x.log 2>&1 ||
    { echo "FAIL: $bin did not train"; tail -5 $T/$x.log; fail=1; }
done
echo "losses $A: $(loss $T/A.jsonl)"
echo "losses $B: $(loss $T/B.jsonl)"
same_checkpoint $T/A/iter_0000010 $T/B/iter_0000010 iter_0000010 || fail=1
[ $fail = 0 ] && echo "ok    same bits: both builds' checkpoints after 10 iterations byte-identical" ||
  echo "FAIL  the two builds' training differs"
rm -rf $T
exit $fail
