#!/usr/bin/env bash
# step_vs_fla.sh — issue 17's table in one device call: the 300M training step at 16 and 32 x 2048
# and the 1B at 16 x 2048, first kda (`kda bench`, with its per-phase line), then FLA's fastest
# mode (bench/fla_train_bench.py: amp + TF32, fused AdamW, FLA's fused kernels) on the same card,
# then a table with the ratios (bench/step_table.py).
# On the GPU machine, through the device tool with carry [build/cuda-device, .whl]:
#   bash bench/step_vs_fla.sh            both sides
#   STEP_SIDES=kda bash bench/step_vs_fla.sh   kda only; STEP_SIDES=fla: FLA only
#   STEP_SPECS="1B_16" FLA_MODELS=1B bash bench/step_vs_fla.sh   both sides of one size
#   (two device calls, each under the 10-minute limit: python3 bench/step_table.py LOG1 LOG2 joins them)
# Needs build/cuda-device/kda (`make cuda-device-bins`), or $KDA_DEVICE_DIR/kda. Log: $OUT/step_vs_fla.txt.
set -u
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp}
SIDES=${STEP_SIDES:-kda,fla}
LOG=$OUTDIR/step_vs_fla${STEP_SIDES:+_$STEP_SIDES}.txt
exec > >(tee "$LOG") 2>&1
D=${KDA_DEVICE_DIR:-build/cuda-device} # another prepared build (as bench/device_session.sh)
K=${KDA:-$D/kda}
STEPS=${STEPS:-6}
echo "step_vs_fla: $(date -u '+%F %H:%M UTC'), $(head -1 "$D/BUILD_INFO" 2>/dev/null || echo 'no BUILD_INFO')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# the configs' default (selective recompute), then without recompute where FLA's fastest mode
# keeps everything too
# (STEP_SPECS: another list, e.g. "300M_16 1B_16" where a call's time is short)
for spec in ${STEP_SPECS:-300M_16 300M_32 300M_32_none 1B_16 1B_16_none}; do
    [[ ",$SIDES," == *",kda,"* ]] || break
    set -- ${spec//_/ }
    echo "== kda $1 micro-batch $2${3:+ (recompute $3)}"
    timeout 300 "$K" bench "configs/kda-$1.yaml" --device cuda --set "micro_batch_size=$2" --set "global_batch_size=$2" \
        --steps "$STEPS" --warmup 2 ${3:+--set recompute_granularity=null} ${KDA_BENCH_SET:+--set $KDA_BENCH_SET}
done
if [[ ",$SIDES," == *",fla,"* ]]; then
    echo "== FLA (same card)"
    . bench/fla_wheels.sh
    fla_wheels_install
    export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton_cache} PYTHONUNBUFFERED=1
    # (FLA_MODELS: one of them alone, e.g. "1B" for a call of its own after the 300M one ran out of time)
    for model in ${FLA_MODELS:-300M 1B}; do
        if [ "$model" = 300M ]; then
            timeout 420 python3 bench/fla_train_bench.py --model 300M --micro 16,32 --steps "$STEPS" --warmup 2
        else
            timeout 420 python3 bench/fla_train_bench.py --model "$model" --micro 16 --steps "$STEPS" --warmup 2
        fi
    done
fi
echo
python3 bench/step_table.py "$LOG"
