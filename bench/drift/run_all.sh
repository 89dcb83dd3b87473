#!/usr/bin/env bash
# Runs every variant (2 at a time, 1 thread each) and prints the drift table.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-../../.venv/bin/python}
mkdir -p runs
start=$(date +%s)
printf '%s\n' \
  "--mode A --out runs/A.jsonl" \
  "--mode R --out runs/R.jsonl" \
  "--mode P --out runs/P.jsonl" \
  "--mode RP --out runs/RP.jsonl" \
  "--mode A --perturb-init 1 --out runs/Ainit1.jsonl" \
  "--mode A --perturb-init 2 --out runs/Ainit2.jsonl" \
  "--mode A --perturb-init 3 --out runs/Ainit3.jsonl" \
  "--mode A --grad-noise 1 --out runs/Agrad1.jsonl" \
  | xargs -P 2 -I{} sh -c "$PY drift.py {} 2>/dev/null"
echo "wall: $(( $(date +%s) - start )) s"
$PY ../parity_spread.py runs/A.jsonl runs/Ainit1.jsonl runs/Ainit2.jsonl runs/Ainit3.jsonl \
  runs/Agrad1.jsonl runs/R.jsonl runs/P.jsonl runs/RP.jsonl
