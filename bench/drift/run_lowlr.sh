#!/usr/bin/env bash
# Second, less chaotic regime: the recipe's lr shape (linear warm-up to 2e-4), 100 steps,
# warm-up 133 so lr reaches 1.5e-4 at step 100 (the real 150-step run's lr at its end).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-../../.venv/bin/python}
mkdir -p runs_lowlr
start=$(date +%s)
X="--lr 2e-4 --warmup 133 --steps 100"
printf '%s\n' \
  "--mode A --out runs_lowlr/A.jsonl" \
  "--mode R --out runs_lowlr/R.jsonl" \
  "--mode A --perturb-init 1 --out runs_lowlr/Ainit1.jsonl" \
  "--mode P --out runs_lowlr/P.jsonl" \
  | xargs -P 2 -I{} sh -c "$PY drift.py {} $X 2>/dev/null"
echo "wall: $(( $(date +%s) - start )) s"
$PY ../parity_spread.py runs_lowlr/A.jsonl runs_lowlr/Ainit1.jsonl runs_lowlr/R.jsonl runs_lowlr/P.jsonl
