#!/usr/bin/env bash
# nccl_one_rank.sh KDA_BINARY — on one GPU: the data-parallel path (NCCL communicator of one rank,
# per-layer reductions on NCCL's stream, ZeRO-1 sharded optimizer with its own fp32 master shard
# and all-gather of the bf16 working weights) must equal the plain path exactly: same losses and
# byte-identical checkpoints (weights and both Adam moments). Then the same through the
# RANK/WORLD_SIZE launch (no MPI), and resumes across the two paths (ZeRO checkpoint on the plain
# path, plain checkpoint through ZeRO).
set -u
. "$(dirname "$0")/lib.sh"
K=${1:-build/cuda-device/kda}
export NCCL_NVLS_ENABLE=0
if [ -z "${KDA_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q libnccl.so.2; then
  lib=$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -f "$lib" ] && export KDA_NCCL_LIBRARY=$lib
fi
echo "NCCL library: ${KDA_NCCL_LIBRARY:-from the loader path}"
T=$(mktemp -d)
CFG=configs/tiny-bytes.yaml; [ -f $CFG ] || CFG=configs/tiny.yaml
args=(train $CFG --device cuda --set train_iters=12 --set log_interval=1 --set sample_tokens=0 --set save_interval=6
      --set keep_last_n=0 --set lr_warmup_iters=2)
fail=0
$K "${args[@]}" --set save=$T/plain --set metrics_file=$T/plain.jsonl > $T/plain.log 2>&1 || { echo "FAIL plain run"; tail -5 $T/plain.log; fail=1; }
$K "${args[@]}" --set save=$T/zero --set use_distributed_optimizer=true --set metrics_file=$T/zero.jsonl > $T/zero.log 2>&1 \
  || { echo "FAIL NCCL/ZeRO run"; tail -5 $T/zero.log; fail=1; }
grep -E "NCCL|data parallel|shard" $T/zero.log
RANK=0 WORLD_SIZE=1 KDA_NCCL_ID_FILE=$T/ncclid $K "${args[@]}" --set save=$T/env --set use_distributed_optimizer=true \
  --set metrics_file=$T/env.jsonl > $T/env.log 2>&1 || { echo "FAIL env-launched run"; tail -5 $T/env.log; fail=1; }
echo "losses plain: $(loss $T/plain.jsonl)"
echo "losses zero : $(loss $T/zero.jsonl)"
for run in zero env; do
  same=1
  for it in iter_0000006 iter_0000012; do
    same_checkpoint $T/plain/$it $T/$run/$it $run/$it || same=0
  done
  if [ $same = 1 ] && [ "$(loss $T/plain.jsonl)" = "$(loss $T/$run.jsonl)" ] && [ -s $T/$run.jsonl ]; then
    echo "ok    NCCL one rank ($run launch), ZeRO-1: losses and checkpoints byte-identical to the plain path"
  else
    echo "FAIL  NCCL one rank ($run launch) differs from the plain path"; fail=1
  fi
done
# resume the ZeRO checkpoint at iteration 6 on the plain path: iterations 7-12 equal
$K "${args[@]}" --set load=$T/zero/iter_0000006 --set save="" --set metrics_file=$T/res.jsonl > $T/res.log 2>&1 || { echo "FAIL resume"; fail=1; }
a=$(loss $T/plain.jsonl | tr ' ' '\n' | grep . | tail -6 | tr '\n' ' '); b=$(loss $T/res.jsonl)
[ -n "$b" ] && [ "$a" = "$b" ] && echo "ok    ZeRO checkpoint resumed on the plain path: iterations 7-12 identical" || { echo "FAIL resume: $a vs $b"; fail=1; }
# and the other way: the plain checkpoint resumed through ZeRO-1 (fp32 master shard loaded, bf16
# working weights all-gathered): iterations 7-12 equal
$K "${args[@]}" --set load=$T/plain/iter_0000006 --set save="" --set use_distributed_optimizer=true \
  --set metrics_file=$T/res2.jsonl > $T/res2.log 2>&1 || { echo "FAIL resume through ZeRO"; tail -3 $T/res2.log; fail=1; }
b=$(loss $T/res2.jsonl)
[ -n "$b" ] && [ "$a" = "$b" ] && echo "ok    plain checkpoint resumed through ZeRO-1 (NCCL): iterations 7-12 identical" || { echo "FAIL ZeRO resume: $a vs $b"; fail=1; }
rm -rf $T
exit $fail
