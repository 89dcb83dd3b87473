#!/usr/bin/env bash
# The memory plan (src/model/mem_plan.h): a run that cannot fit fails before anything large is
# allocated, within a second and with little memory, with one `kda: error:` line that names what
# it needs and what is available, the parts by size, and settings that make it fit (planned, not
# guessed: a smaller micro_batch_size, recompute_granularity, a shorter seq_length, or a smaller
# model). --dry-run prints the plan broken down; --mem-plan prints it and allocates nothing
# (with --device cuda on a machine without a GPU: the CUDA backend's sizes).
. "$(dirname "$0")/lib.sh"
measure() { # runs "$@", sets err (stderr), rc, secs and rss (max resident KiB; 0 without GNU time)
  local t0 t1 f="$TMP/time"
  t0=$(date +%s.%N)
  if [ -x /usr/bin/time ]; then err=$(/usr/bin/time -o "$f" -f %M "$@" 2>&1 >/dev/null); rc=$?; rss=$(tail -1 "$f")
  else err=$("$@" 2>&1 >/dev/null); rc=$?; rss=0; fi
  t1=$(date +%s.%N); secs=$(echo "$t1 - $t0" | bc)
}
fails_fast() { # description, then what stderr must contain (grep -E patterns, all), then -- and the command
  local what=$1; shift; local pats=()
  while [ "$1" != -- ]; do pats+=("$1"); shift; done; shift
  measure timeout 60 "$@"
  local lines; lines=$(grep -c . <<<"$err")
  if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "^kda: error: " <<<"$err"; then ok "$what: one error line (exit $rc)"
  else bad "$what: exit $rc, $lines lines: $err"; return; fi
  for p in "${pats[@]}"; do grep -qE -- "$p" <<<"$err" && ok "  names /$p/" || bad "  lacks /$p/: $err"; done
  [ "$(echo "$secs < 5" | bc)" = 1 ] && ok "  in ${secs}s" || bad "  took ${secs}s"
  [ "$rss" -lt 1048576 ] && ok "  with ${rss} KiB resident at most" || bad "  used ${rss} KiB"
}
GIB='[0-9.]+ GiB'
# activations: 65536 sequences of 64 tokens a micro-batch
fails_fast "micro_batch_size 65536" "the run needs $GIB of (GPU )?memory but" "(available|free)" \
  "activations $GIB \(micro_batch_size 65536 x seq_length 64" "It fits with micro_batch_size [0-9]+ \($GIB; global_batch_size 65536 in [0-9]+ micro-batches\)" \
  "recompute_granularity: (selective|full)" -- \
  $KDA train --set micro_batch_size=65536 --set global_batch_size=65536 --dry-run
# a sequence too long for even one sequence with full recomputation
fails_fast "seq_length 16777216" "activations $GIB \(micro_batch_size 4 x seq_length 16777216" \
  "it fits with seq_length [0-9]+ at micro_batch_size 1 and recompute_granularity: full" -- \
  $KDA train --set seq_length=16777216 --dry-run
# the parameter state: the Llama 3 vocabulary at hidden 65536 (8.5 G parameters), then 80 wide layers
fails_fast "hidden_size 65536" "parameters, gradients and AdamW $GIB \([0-9]+ parameter floats: embedding 98%" \
  "The model's state alone \(micro-batch 1 x 1\) needs $GIB: lower vocab_size or hidden_size" -- \
  $KDA train --set hidden_size=65536 --dry-run
fails_fast "80 layers of hidden 16384" "layers 100%" "lower hidden_size, num_hidden_layers or intermediate_size" -- \
  $KDA train --set hidden_size=16384 --set num_hidden_layers=80 --set vocab_size=256 --set num_heads=128 --dry-run
# past what the kernels index (tokens x heads > 2^31 - 1)
fails_fast "65536 x 16777216 tokens" "more than the kernels index" "lower micro_batch_size or seq_length" -- \
  $KDA train --set micro_batch_size=65536 --set global_batch_size=65536 --set seq_length=16777216 --dry-run
# bench checks the same plan
fails_fast "bench at micro_batch_size 65536" "the run needs $GIB" "It fits with" -- \
  $KDA bench --set micro_batch_size=65536 --set global_batch_size=65536 --device cpu

# --dry-run: the plan, part by part, then the model
out=$($KDA train configs/tiny-bytes.yaml --device cpu --dry-run 2>&1) || bad "dry run failed: $out"
grep -q "^kda train: memory plan: backend cpu (device cpu), micro-batch 8 x 128, recompute_granularity none$" <<<"$out" \
  && ok "dry run heads the plan with the backend and the micro-batch" || bad "no plan header: $out"
for part in "parameters .* fp32 masters" "gradients" "AdamW moments" "layer activations .* KDA core's saved" \
            "head activations" "backward scratch" "token ids" "backend scratch .* held .* transient" "staging" \
            "total .* of $GIB available on the host \(MemAvailable\): fits"; do
  grep -qE "^kda train:  +$part" <<<"$out" && ok "dry run prints: $(grep -m1 -E "^kda train:  +$part" <<<"$out" | cut -c1-90)" \
    || bad "dry run lacks '$part': $out"
done
grep -qE "^kda train: memory planned: [0-9.]+ MiB on the host \(parameter state .*, activations .*, scratch .*\) of $GIB available$" <<<"$out" && ok "and the one-line summary" || bad "no summary line: $out"
# recomputation shows in the plan: selective and full keep less for the backward
act() { $KDA train configs/tiny-bytes.yaml --device cpu --mem-plan "$@" | sed -n 's/^kda train:  *layer activations *\([0-9.]*\) MiB.*/\1/p'; }
a0=$(act); a1=$(act --set recompute_granularity=selective); a2=$(act --set recompute_granularity=full)
[ -n "$a0" ] && [ "$(echo "$a2 < $a1 && $a1 < $a0" | bc)" = 1 ] && ok "layer activations: none $a0 > selective $a1 > full $a2 MiB" \
  || bad "layer activations: none '$a0', selective '$a1', full '$a2'"
# --mem-plan allocates nothing: a plan far bigger than the machine prints and exits 0
measure $KDA train --mem-plan --device cpu --set micro_batch_size=65536 --set global_batch_size=65536
[ $rc -eq 0 ] && [ "$rss" -lt 1048576 ] && ok "--mem-plan of a run that does not fit: exit 0, ${rss} KiB" || bad "--mem-plan: exit $rc, $rss KiB: $err"
# the CUDA plan without a GPU (a CUDA build): the sizes of the 300M config at 32 x 2048
out=$($KDA train configs/kda-300M.yaml --mem-plan --device cuda --set micro_batch_size=32 --set global_batch_size=1024 2>&1); rc=$?
if grep -q "total on the GPU" <<<"$out"; then
  ok "--mem-plan --device cuda: $(grep -m1 'total on the GPU' <<<"$out" | cut -c1-80)"
  grep -qE "layer activations +21.0[0-9] GiB" <<<"$out" && ok "  300M x 32 layer activations as the device plans them (selective, the config's)" || bad "  $out"
elif [ $rc -ne 0 ] && grep -q "built without CUDA" <<<"$out"; then
  ok "--mem-plan --device cuda in a build without CUDA names the reason"
else
  bad "--mem-plan --device cuda: exit $rc: $out"
fi
# sizes the backend's kernels do not take (its capabilities, kda_ops): refused before any allocation
for kv in conv_size=16 kda_chunk_size=128; do
  out=$($KDA train configs/tiny-bytes.yaml --mem-plan --device cuda --set $kv 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -q "the cuda backend's .* takes 1\.\." <<<"$out"; then ok "--device cuda with $kv refused: $(tail -1 <<<"$out" | cut -c1-90)"
  elif [ $rc -ne 0 ] && grep -q "built without CUDA" <<<"$out"; then ok "--device cuda with $kv: a build without CUDA names the reason"
  else bad "--device cuda with $kv: exit $rc: $out"; fi
done
out=$($KDA train configs/tiny-bytes.yaml --mem-plan --device cpu --set conv_size=64 2>&1) && ok "the CPU backend takes conv_size 64" ||
  bad "--device cpu conv_size=64: $out"
finish
