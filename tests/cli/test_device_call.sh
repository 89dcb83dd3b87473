#!/usr/bin/env bash
# bench/device_call.sh (one device call's modes): with a stand-in device_session.sh and nvidia-smi,
# an h200: mode is skipped on an H100 and run on an H200 (an h100: mode the other way), MODE@DIR
# runs MODE with KDA_DEVICE_DIR=DIR, the modes share one time limit (DEVICE_CALL_S) and a mode past
# it is stopped, and what they wrote under $OUT comes back as one logs.tgz beside the .gz files (the
# device tool returns 8 files at most), with Triton's cache parts dropped unless KEEP_TRITON_CACHE=1.
. "$(dirname "$0")/lib.sh"
R=$TMP/repo; mkdir -p "$R/bench" "$TMP/out"
cp bench/device_call.sh "$R/bench/"
cat > "$R/bench/device_session.sh" <<'STUB'
OUTDIR=${OUT:-/tmp/kda-session}
echo "$1 dir=${KDA_DEVICE_DIR:-}" > "$OUTDIR/session_$1.txt"
echo data | gzip > "$OUTDIR/$1_sass.csv.gz"
echo part > "$OUTDIR/triton_cache.tgz.part.00"
[ "$1" = slow ] && sleep 30
exit 0
STUB
mkdir -p "$TMP/h100" "$TMP/h200" # stand-in nvidia-smi for each card
printf '#!/bin/sh\necho "NVIDIA H100 80GB HBM3"\n' > "$TMP/h100/nvidia-smi"
printf '#!/bin/sh\necho "NVIDIA H200"\n' > "$TMP/h200/nvidia-smi"
chmod +x "$TMP/h100/nvidia-smi" "$TMP/h200/nvidia-smi"
call() { (cd "$R" && OUT=$TMP/out PATH=$TMP/$1:/usr/bin:/bin bash bench/device_call.sh "${@:2}" 2>&1); } # card, specs
log=$(DEVICE_CALL_S=5 call h100 h200:f1@build/m g47@build/s slow)
grep -q "skip f1@build/m (not an H200)" <<<"$log" && ok "an h200: mode is skipped on an H100" ||
  bad "h200:f1 not skipped: $log"
names=$(ls "$TMP/out" | sort | tr '\n' ' ')
[ "$names" = "g47_sass.csv.gz logs.tgz slow_sass.csv.gz " ] && ok "one logs.tgz beside the .gz files, no cache parts" ||
  bad "files under \$OUT: $names"
tar xzf "$TMP/out/logs.tgz" -C "$TMP" && grep -q "g47 dir=build/s" "$TMP/session_g47.txt" &&
  ok "MODE@DIR ran with KDA_DEVICE_DIR=DIR" || bad "g47's log: $(cat "$TMP/session_g47.txt" 2>&1)"
grep -qE "device_call: rc 124 after [0-9] s" <<<"$log" && ok "the slow mode was stopped at DEVICE_CALL_S" ||
  bad "no stop at the limit: $log"
rm -rf "$TMP/out"; mkdir -p "$TMP/out"
KEEP_TRITON_CACHE=1 call h100 g47 > /dev/null
[ -f "$TMP/out/triton_cache.tgz.part.00" ] && ok "KEEP_TRITON_CACHE=1 keeps the cache parts" ||
  bad "KEEP_TRITON_CACHE=1: $(ls "$TMP/out")"
rm -rf "$TMP/out"; mkdir -p "$TMP/out"
log=$(call h200 h200:f1@build/m h100:f1b@build/m)
tar xzf "$TMP/out/logs.tgz" -C "$TMP" 2>/dev/null && grep -q "f1 dir=build/m" "$TMP/session_f1.txt" 2>/dev/null &&
  ok "on an H200 the h200: mode runs" || bad "h200:f1 on an H200: $(ls "$TMP/out")"
grep -q "skip f1b@build/m (an H200)" <<<"$log" && [ ! -f "$TMP/session_f1b.txt" ] &&
  ok "on an H200 the h100: mode is skipped" || bad "h100:f1b on an H200: $log"
rm -rf "$TMP/out" "$TMP"/session_*; mkdir -p "$TMP/out"
call h100 h100:f1b@build/m > /dev/null
tar xzf "$TMP/out/logs.tgz" -C "$TMP" 2>/dev/null && grep -q "f1b dir=build/m" "$TMP/session_f1b.txt" 2>/dev/null &&
  ok "on an H100 the h100: mode runs" || bad "h100:f1b on an H100: $(ls "$TMP/out")"
finish
