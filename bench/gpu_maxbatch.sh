#!/usr/bin/env bash
# gpu_maxbatch.sh [KDA] [CONFIG] — `kda bench` on the GPU at seq 2048 for growing micro-batches
# until one does not fit (kda stops with its out-of-memory message); prints step time, tokens/s,
# MFU and the GPU memory in use for each, and the largest micro-batch that fits.
# KDA_BENCH_SET="k=v ..." adds --set options (e.g. recompute_granularity=selective).
set -u
K=${1:-build/cuda-device/kda}; CFG=${2:-configs/kda-300M.yaml}
best=0
extra=(); for kv in ${KDA_BENCH_SET:-}; do extra+=(--set "$kv"); done
for B in ${KDA_BATCHES:-32 48 64 80 96 112 128}; do
  out=$(timeout 240 $K bench $CFG --device cuda --set micro_batch_size=$B --set global_batch_size=$B --steps 3 --warmup 1 "${extra[@]}" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "micro-batch $B: does not fit (exit $rc): $(echo "$out" | grep -m1 -E 'out of GPU memory|error' | cut -c1-220)"
    break
  fi
  echo "micro-batch $B: $(echo "$out" | grep -E 'step .* ms' | sed 's/ (median.*)//') | $(echo "$out" | grep -o 'MFU [0-9.]*%') | $(echo "$out" | grep -o 'in use (peak): .*')"
  best=$B
done
echo "largest micro-batch that fits ($CFG, seq 2048${KDA_BENCH_SET:+, $KDA_BENCH_SET}): $best"
