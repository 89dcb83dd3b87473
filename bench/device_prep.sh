#!/usr/bin/env bash
# device_prep.sh [SERIES_DIR] — builds build/cuda-device for an A/B device call (bench/device_session.sh)
# from a fresh checkout: the series' binaries (main with SERIES_DIR's patches applied, e.g.
# bench/pending/next-s35; main itself when none is given) and main's kda and bench_kda_cuda beside
# them as kda_base and bench_kda_base; sm_90a code only, stripped, with BUILD_INFO naming both.
# Each build runs in its own git worktree under $KDA_PREP_DIR (default /tmp/kda-device-prep), so the
# checkout's files are not touched but build/cuda-device. Binaries no device mode needs
# (bench_ops_cuda, kda_core_io) are left out, and the script says whether the carry (the tracked
# files, build/cuda-device and .whl) fits the device tool's 64 MiB.
#   BASE=<rev>    the baseline (default main); SERIES_BASE=<rev> where the patches go (default BASE)
#   EXTRA="name=patch-count ..."   also bench_kda_cuda of the first N patches, as build/cuda-device/name
#   LEAVE_OUT="file ..."   binaries of build/cuda-device to leave out as well (e.g. test_cuda_ops, which no
#                          A/B mode runs), to keep a carry with several EXTRA builds under 64 MiB
set -euo pipefail
cd "$(dirname "$0")/.."
series_arg=${1:-} series=${1:-} base=${BASE:-main}
[ -z "$series" ] || series=$(cd "$series" && pwd)
sbase=${SERIES_BASE:-$base}
. bench/prep_lib.sh

patches() { # a series' patches in order, the first N of them when N is given
  local all=("$series"/*.patch)
  [ -e "${all[0]}" ] || { echo "device_prep: no patches in $series" >&2; exit 1; }
  printf '%s\n' "${all[@]:0:${1:-${#all[@]}}}"
}
build() { # name rev [N patches]: the series' first N patches (all when N is not given) on rev
  local name=$1 rev=$2 ps=()
  [ -n "$series" ] && [ "$name" != base ] && mapfile -t ps < <(patches "${3:-}")
  prep_build "$name" "$rev" "${ps[@]}" || exit 1
}

build base "$base"
build series "$sbase"
out=build/cuda-device
rm -rf "$out" && mkdir -p "$out"
cp "$prep"/series/build/out/* "$out"/
rm -f "$out"/bench_ops_cuda "$out"/kda_core_io
for f in ${LEAVE_OUT:-}; do rm -f "$out/$f"; done
cp "$prep"/base/build/out/kda "$out"/kda_base
cp "$prep"/base/build/out/bench_kda_cuda "$out"/bench_kda_base
for kv in ${EXTRA:-}; do
  build "${kv%%=*}" "$sbase" "${kv#*=}"
  cp "$prep/${kv%%=*}/build/out/bench_kda_cuda" "$out/${kv%%=*}"
done
for f in "$out"/*; do strip --strip-debug "$f"; done
{
  (cd "$prep/series" && tools/build_info.sh)
  echo "series: ${series_arg:-none} on $(git rev-parse --short "$sbase") ($(git -C "$prep/series" rev-parse --short HEAD));" \
    "kda_base, bench_kda_base: $base $(git rev-parse --short "$base")${EXTRA:+; extra: $EXTRA}"
} > "$out"/BUILD_INFO
cat "$out"/BUILD_INFO
mib=$(( ($(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) + $(du -sb "$out" | cut -f1) + \
  $( [ -d .whl ] && du -sb .whl | cut -f1 || echo 0)) / 1048576 ))
echo "carry [build/cuda-device, .whl] with the tracked files: $mib MiB (the device tool takes 64)"
[ -d .whl ] || echo "no .whl: download FLA's wheels (docs/cuda.md) if the mode runs FLA"
for name in base series ${EXTRA:+$(for kv in $EXTRA; do echo "${kv%%=*}"; done)}; do
  prep_drop "$name"
done
