#!/usr/bin/env bash
# carry_pack.sh NAME DIR... — pack prepared device builds (build/cuda-*) into build/carry/NAME.tar.xz
# for one device call; carry_pack.sh --unpack — unpack every build/carry/*.tar.xz into build/ (what
# device_session.sh does first on the device). The device tool carries at most 64 MiB; two builds
# of ~40 MB each share most of their bytes, and xz's 64 MiB window keeps one copy (session 32:
# build/cuda-s43d and build/cuda-s43e, 81 MB, packed to 1.5 MB; gzip's 32 KB window gives 53 MB).
# Unpacking uses Python's tarfile, so the device needs no xz binary.
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" = --unpack ]; then
    for a in build/carry/*.tar.xz; do
        [ -f "$a" ] || continue
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall("build")' "$a"
        echo "unpacked $a"
    done
    exit 0
fi
[ $# -ge 2 ] || { echo "usage: bash bench/carry_pack.sh NAME build/cuda-X [build/cuda-Y ...] | --unpack" >&2; exit 2; }
name=$1; shift
dirs=()
for d in "$@"; do
    [ -d "$d" ] || { echo "carry_pack: $d is not a directory (prepare it with bench/device_prep.sh)" >&2; exit 2; }
    [ "$(dirname "$d")" = build ] || { echo "carry_pack: $d must be directly under build/" >&2; exit 2; }
    dirs+=("$(basename "$d")")
done
mkdir -p build/carry
tar -C build -cf - "${dirs[@]}" | xz -9 -T2 > "build/carry/$name.tar.xz.tmp"
mv "build/carry/$name.tar.xz.tmp" "build/carry/$name.tar.xz"
ls -l "build/carry/$name.tar.xz"
