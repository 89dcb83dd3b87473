#!/usr/bin/env bash
# run_device_tests.sh — all CUDA device tests and the KDA kernel benchmark, on the GPU machine.
#
# Builds nothing. Needs, prepared on the development machine (see docs/cuda.md):
#   build/cuda-device/   `make cuda-device-bins` (test_cuda_ops, test_cuda_kda, test_cuda_decode, kda_core_io,
#                        bench_kda_cuda, bench_ops_cuda) and BUILD_INFO (commit); optionally Triton's cache (bench/triton_cache.sh)
#   .whl/                flash-linear-attention and fla-core wheels (FLA is not installed there)
# Run through the device tool with carry [build/cuda-device, .whl]. The log goes to stdout and
# to $OUT/device_log.txt; the Triton cache to $OUT/triton_cache.tgz.part.NN for the next call.
# Steps (each under its own timeout, in order of importance): GPU info, op tests vs the CPU
# backend, KDA core tests vs the CPU core, one whole training step vs the CPU backend, the NCCL
# data-parallel path on one rank vs the plain path, generation (state ops, decoder) vs the CPU, our KDA benchmark, the memory-bound ops benchmark (bench_ops_cuda), FLA install, ours vs FLA vs a
# float64 recurrence then FLA's benchmark (one process: one Triton compile/autotune, ~3 min
# on a fresh machine), compute-sanitizer memcheck (racecheck too with KDA_RACECHECK=1) on a
# small KDA case.
set -u
cd "$(dirname "$0")/../.."
BIN=${KDA_DEVICE_BIN:-build/cuda-device}   # build/cuda-device-ptx80: the portable code path
OUTDIR=${OUT:-/tmp/kda-device-out}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/${KDA_DEVICE_LOG:-device_log.txt}
exec > >(tee "$LOG") 2>&1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
. bench/triton_cache.sh
. bench/fla_wheels.sh
triton_cache_restore "$BIN"

results=()
# KDA_DEVICE_STEPS=ops,kda,step,nccl,decode,bench,opsbench,fla,sanitizer picks steps (default: all)
want() { [ -z "${KDA_DEVICE_STEPS:-}" ] || [[ ",$KDA_DEVICE_STEPS," == *",$1,"* ]]; }
# KDA_DEVICE_BUDGET_S=N: every step's timeout is cut so that the script ends within N seconds
deadline=$((SECONDS + ${KDA_DEVICE_BUDGET_S:-100000}))
failed=0 # steps that failed or timed out: the script's exit status is 1 if any did
step() { # name timeout_s command...
    local name=$1 to=$2; shift 2
    local left=$((deadline - SECONDS - 8))
    [ "$left" -lt "$to" ] && to=$left
    if [ "$to" -le 0 ]; then
        results+=("$(printf '%-34s %-12s' "$name" "SKIPPED (no time left)")")
        return
    fi
    echo
    echo "=== $name (timeout ${to}s)"
    local t0=$SECONDS
    timeout "$to" "$@"
    local rc=$?
    local st=PASS
    [ $rc -ne 0 ] && st="FAIL(rc=$rc)"
    [ $rc -eq 124 ] && st="TIMEOUT"
    [ $rc -ne 0 ] && failed=$((failed + 1))
    results+=("$(printf '%-34s %-12s %4ds' "$name" "$st" $((SECONDS - t0)))")
}

echo "kda CUDA device tests, $(date -u '+%Y-%m-%d %H:%M UTC')"
[ -f "$BIN/BUILD_INFO" ] && cat "$BIN/BUILD_INFO"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader || true
missing=$(ldd "$BIN"/test_cuda_ops 2>&1 | grep "not found")
[ -n "$missing" ] && echo "missing libraries on this machine: $missing"

want ops && KDA_CUDA_BIG=1 step "ops vs CPU backend"  300 "$BIN/test_cuda_ops"
want kda && step "KDA core vs CPU core"          300 "$BIN/test_cuda_kda"
want step && step "whole training step vs CPU"    180 "$BIN/test_cuda_step"
want nccl && step "NCCL one rank = plain path"    240 bash tests/cuda/nccl_one_rank.sh "$BIN/kda"
want decode && step "decode ops + decoder vs CPU" 120 "$BIN/test_cuda_decode"
want bench && step "KDA benchmark (ours)"          180 "$BIN/bench_kda_cuda" 16 32
want opsbench && step "memory-bound ops benchmark"  240 "$BIN/bench_ops_cuda"
want fla && step "install FLA wheels"            180 bash -c '. bench/fla_wheels.sh && fla_wheels_install'
fla_site_path # the install ran in its own shell
want fla && step "KDA vs FLA vs fp64; FLA bench" 480 python3 tests/cuda/fla_kda_compare.py all "$BIN" 16 32
triton_cache_save "$OUTDIR"
if want sanitizer && command -v compute-sanitizer >/dev/null; then
    KDA_CUDA_SMALL=1 step "memcheck (small KDA case)" 180 compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$BIN/test_cuda_kda"
    step "memcheck (decode ops, decoder)" 180 compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$BIN/test_cuda_decode"
    [ -n "${KDA_RACECHECK:-}" ] && KDA_CUDA_SMALL=1 step "racecheck (small KDA case)" 240 \
        compute-sanitizer --tool racecheck --error-exitcode 3 "$BIN/test_cuda_kda"
fi
echo
echo "=== summary"
printf '%s\n' "${results[@]}"
grep -hE "^(ours|FLA) " "$LOG" | sort -u
[ "$failed" -eq 0 ] || { echo "$failed step(s) failed or timed out"; exit 1; }
