#!/usr/bin/env bash
# kda bench on the CPU: one timed step of a small model prints the step time, tokens/s and the
# memory plan; --gemm-survey on a backend without GEMM plans says so and changes nothing else;
# --all-ops is taken (the CPU has no op table to list).
. "$(dirname "$0")/lib.sh"
out=$($KDA bench configs/tiny-bytes.yaml --device cpu --steps 1 --warmup 0 --gemm-survey 2>&1); rc=$?
[ $rc -eq 0 ] && ok "bench --gemm-survey on the CPU exits 0" || bad "bench --gemm-survey: exit $rc: $out"
grep -q "^  GEMM survey: the cpu backend has none$" <<<"$out" && ok "the CPU backend says it has no GEMM survey" \
  || bad "no 'has none' line: $out"
grep -qE "^  step [0-9.]+ ms \(median of 1; .*\) \| [0-9]+ tokens/s" <<<"$out" && ok "one timed step: ms and tokens/s" \
  || bad "no step line: $out"
grep -qE "^  memory planned: parameters\+grads\+Adam" <<<"$out" && ok "the memory plan line" || bad "no plan line: $out"
grep -q "surveyed GEMM algorithms" <<<"$out" && bad "a surveyed-steps line without a survey: $out" \
  || ok "no surveyed-steps line where nothing was surveyed"
out=$($KDA bench configs/tiny-bytes.yaml --device cpu --steps 1 --warmup 0 --all-ops 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qE "^  step [0-9.]+ ms" <<<"$out" && ok "bench --all-ops on the CPU (no op table) exits 0" \
  || bad "bench --all-ops: exit $rc: $out"
out=$($KDA bench configs/tiny-bytes.yaml --device cpu --all-opz 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "unknown option '--all-opz'" <<<"$out" && ok "an unknown option is named" \
  || bad "bench --all-opz: exit $rc: $out"
for p in 0 -5; do
  out=$($KDA bench configs/tiny-bytes.yaml --device cpu --steps 1 --peak-tflops $p 2>&1); rc=$?
  [ $rc -ne 0 ] && grep -q -- "--peak-tflops '$p' must be above 0" <<<"$out" && ok "--peak-tflops $p refused" \
    || bad "bench --peak-tflops $p: exit $rc: $out"
done
finish
