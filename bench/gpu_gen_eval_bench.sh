#!/usr/bin/env bash
# One device call: `kda generate --device cuda` (time to first token, decode tokens/s) and
# `kda eval --device cuda` (items/s) side by side with transformers + FLA generate and lm-eval's
# hf model (or, where lm-eval is not installed, a minimal FLA forward-scoring loop) on the same
# GPU, model (FLA's 300M shape, random init moved off init) and items: bench/gpu_gen_eval_bench.py.
# Needs build/cuda-device/kda (`make cuda-device-bins`) and .whl/ (FLA wheels, docs/cuda.md);
# run through the device tool with carry [build/cuda-device, .whl]. About 3-5 minutes on an H200
# (most of it FLA's Triton compile/autotune on a fresh machine; build/cuda-device/triton_cache.tgz
# from an earlier run is reused). Output also in $OUT/gpu_gen_eval_bench.txt. Extra arguments go
# to the Python script (e.g. --new-tokens 64 --limit 25, --skip eval).
set -u
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp}
exec > >(tee "$OUTDIR/gpu_gen_eval_bench.txt") 2>&1
export KDA_BIN=${KDA_BIN:-$PWD/build/cuda-device/kda}
echo "kda generate/eval GPU bench, $(date -u '+%F %H:%M UTC'), $(head -1 build/cuda-device/BUILD_INFO 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
[ -x "$KDA_BIN" ] || { echo "gpu_gen_eval_bench: $KDA_BIN missing: run make cuda-device-bins here first"; exit 1; }
. bench/fla_wheels.sh
fla_wheels_install
export TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1 PYTHONUNBUFFERED=1
. bench/triton_cache.sh
triton_cache_restore build/cuda-device
python3 -c "import lm_eval.models.huggingface" 2>/dev/null && echo "lm-eval: $(python3 -c 'import lm_eval; print(lm_eval.__version__)')" \
  || echo "lm-eval: not installed here; the scoring reference is a minimal FLA forward loop"
timeout "${BENCH_TIMEOUT:-560}" python3 bench/gpu_gen_eval_bench.py --device cuda "$@"
rc=$?
triton_cache_save "$OUTDIR"
exit $rc
