#!/usr/bin/env bash
# CPU training throughput of the tiny demo config and the 300M reference config
# (micro-batch 1 x 2048 for 300M, a few steps), through `kda bench`.
# Copy the output into bench/RESULTS.md with machine, date and commit.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s kda
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) threads; commit $(git rev-parse --short HEAD); $(date -u +%F)"
echo "== tiny (configs/tiny-bytes.yaml)"
./kda bench configs/tiny-bytes.yaml --device cpu --steps 10 --warmup 2
echo "== 300M (configs/kda-300M.yaml, micro-batch 1 x 2048)"
./kda bench configs/kda-300M.yaml --device cpu --set micro_batch_size=1 --set global_batch_size=1 --steps 3 --warmup 1
