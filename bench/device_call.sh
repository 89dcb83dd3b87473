#!/usr/bin/env bash
# device_call.sh SPEC... — one device call's whole command: device_session.sh's modes in turn under
# one time limit, then everything they wrote under $OUT packed into $OUT/logs.tgz (the device tool
# brings back at most 8 files; the ncu reports, *.gz, stay beside it).
#   SPEC = [h200:|h100:]MODE[@BUILD_DIR]: h200: runs MODE only when the card is an H200 (the
#   issue's table is for that card), h100: only when it is not; @BUILD_DIR sets KDA_DEVICE_DIR.
#   KEEP_TRITON_CACHE=1: bring back the Triton cache that FLA's modes save (else it is dropped).
#   DEVICE_CALL_S: the seconds all modes may take together (default 540: a call's 600 s less the
#   machine's start and the transfers).
# Example (session 32's plan): bash bench/device_call.sh h200:f1@build/cuda-main g47
set -u
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp/kda-session}; mkdir -p "$OUTDIR"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "device_call: ${card:-no GPU}; $*"
modes=()
for spec in "$@"; do
    if [[ $spec == h200:* ]]; then
        spec=${spec#h200:}
        [[ $card == *H200* ]] || { echo "skip $spec (not an H200)"; continue; }
    elif [[ $spec == h100:* ]]; then
        spec=${spec#h100:}
        [[ $card != *H200* ]] || { echo "skip $spec (an H200)"; continue; }
    fi
    modes+=("$spec")
done
run_modes() {
    for spec in "$@"; do
        local mode=${spec%%@*} dir=
        [[ $spec == *@* ]] && dir=${spec#*@}
        (if [ -n "$dir" ]; then export KDA_DEVICE_DIR=$dir; fi; bash bench/device_session.sh "$mode")
    done
}
export -f run_modes
timeout "${DEVICE_CALL_S:-540}" bash -c 'run_modes "$@"' _ "${modes[@]}"
echo "device_call: rc $? after ${SECONDS} s"
# Triton's cache would take 3 of the 8 files that come back: only when asked for (a call without one)
[ "${KEEP_TRITON_CACHE:-0}" = 1 ] || rm -f "$OUTDIR"/triton_cache.tgz.part.*
cd "$OUTDIR" && files=$(ls | grep -vE '\.gz$|^logs\.tgz$|^triton_cache') &&
    [ -n "$files" ] && tar czf logs.tgz --remove-files $files
ls -la "$OUTDIR"
