#!/usr/bin/env bash
# The start line names the backend, the device and why it was chosen: --device cpu says so;
# device auto either runs on a usable GPU (naming it and its code path) or says in one line why
# it fell back to the CPU; --device cuda without a usable GPU fails with the reason.
. "$(dirname "$0")/lib.sh"
run() { $KDA train configs/tiny-bytes.yaml --set train_iters=1 --set lr_warmup_iters=0 --set sample_tokens=0 "$@" 2>&1; }
out=$(run --device cpu)
grep -q "^kda train: backend cpu: fp32 on the CPU, .* (device cpu)$" <<<"$out" && ok "--device cpu: $(grep -m1 'backend cpu:' <<<"$out")" \
  || bad "--device cpu start line: $(head -3 <<<"$out")"
out=$(run --device auto)
if grep -q "^kda train: backend cuda: GPU [0-9]* .*compute capability [0-9.]*.*; .*kernels" <<<"$out"; then
  ok "device auto on a GPU: $(grep -m1 'backend cuda:' <<<"$out")"
elif grep -q "^kda train: backend cpu: .*(device auto fell back to the CPU: ..*)$" <<<"$out"; then
  ok "device auto without a usable GPU says why: $(grep -m1 'fell back' <<<"$out" | sed 's/.*(device/(device/')"
  expect_fail "--device cuda without a usable GPU names the reason" "device 'cuda' requested but unavailable: " \
    $KDA train configs/tiny-bytes.yaml --set train_iters=1 --set lr_warmup_iters=0 --device cuda
else
  bad "device auto start line: $(head -3 <<<"$out")"
fi
finish
