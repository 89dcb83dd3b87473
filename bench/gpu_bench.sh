#!/usr/bin/env bash
# One device call: kda on the GPU (sanity training run, CPU-vs-GPU loss check, `kda bench` of
# tiny and 300M at seq 2048), then FLA's training step on the same card (bench/fla_train_bench.py).
# Needs build/cuda-device/kda (`make cuda-device-bins`) and .whl/ (FLA wheels); run through the
# device tool with carry [build/cuda-device, .whl]. Output also in $OUT/gpu_bench.txt.
set -u
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp}; exec > >(tee "$OUTDIR/gpu_bench.txt") 2>&1
K=build/cuda-device/kda
echo "kda GPU bench, $(date -u '+%F %H:%M UTC'), $(cat build/cuda-device/BUILD_INFO 2>/dev/null | head -1)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== tiny: 60 iterations on the GPU and on the CPU (losses should track within a few %)"
timeout 120 $K train configs/tiny-bytes.yaml --device cuda --set train_iters=60 --set log_interval=20 --set sample_tokens=0 --set lr_warmup_iters=5 | grep -E "^iter|backend"
timeout 120 $K train configs/tiny-bytes.yaml --device cpu --set train_iters=60 --set log_interval=20 --set sample_tokens=0 --set lr_warmup_iters=5 --set num_threads=16 | grep -E "^iter|backend"
echo "== kda bench (CUDA, bf16)"
timeout 60 $K bench configs/tiny-bytes.yaml --device cuda --set seq_length=2048 --set micro_batch_size=16 --steps 5 --warmup 2
for B in 16 32; do
  timeout 150 $K bench configs/kda-300M.yaml --device cuda --set micro_batch_size=$B --set global_batch_size=$B --steps 5 --warmup 2
done
echo "== FLA (same card)"
. bench/fla_wheels.sh
fla_wheels_install
export TRITON_CACHE_DIR=/tmp/triton_cache
timeout ${FLA_TIMEOUT:-420} python3 bench/fla_train_bench.py --micro 16,32 --steps 5 --warmup 2
