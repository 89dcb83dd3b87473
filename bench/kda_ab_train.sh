#!/usr/bin/env bash
# kda_ab_train.sh KDA_A KDA_B — two kda builds train the same model from the same seed on the same
# real text for STEPS steps (default 150; 300M recipe, 16 x 2048 tokens a step, the bundled Tiny
# Shakespeare with the Llama 3 tokenizer) and the losses are compared step by step: prints both
# and the largest relative difference, exits 1 above TOL (default 0.003). For checking that a
# change to the kernels keeps a training run where it was (a baseline build against a new one).
set -u
cd "$(dirname "$0")/.."
A=$1 B=$2
OUTDIR=${OUT:-/tmp}/ab; mkdir -p "$OUTDIR"
STEPS=${STEPS:-150} TOL=${TOL:-0.003}
run() { # binary, name
    timeout 240 "$1" train configs/kda-300M.yaml --device cuda --set data_format=text \
        --set train_data_path=data/tinyshakespeare.txt --set micro_batch_size=16 --set global_batch_size=16 \
        --set seq_length=2048 --set train_iters="$STEPS" --set log_interval=1 --set sample_tokens=0 \
        --set save= --set load= --set metrics_file="$OUTDIR/$2.jsonl" > "$OUTDIR/$2.log" 2>&1 || { echo "$2 failed:"; tail -5 "$OUTDIR/$2.log"; }
}
run "$A" a
run "$B" b
python3 - "$OUTDIR/a.jsonl" "$OUTDIR/b.jsonl" "$TOL" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"iteration"' in l]
b = [json.loads(l) for l in open(sys.argv[2]) if '"iteration"' in l]
tol = float(sys.argv[3])
n = min(len(a), len(b))
worst, at = 0.0, 0
for i in range(n):
    d = abs(a[i]["loss"] - b[i]["loss"]) / abs(a[i]["loss"])
    if d > worst: worst, at = d, a[i]["iteration"]
    if i < 3 or (i + 1) % 10 == 0: print(f"  step {a[i]['iteration']:4d}  A {a[i]['loss']:.5f}  B {b[i]['loss']:.5f}  rel {d:.2e}")
ok = n > 0 and n == len(a) == len(b) and worst <= tol
print(f"kda A/B: {n} steps, largest relative loss difference {worst:.2e} at step {at} (tolerance {tol}): {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
