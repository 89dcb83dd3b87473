#!/usr/bin/env bash
# bench/carry_pack.sh (device builds carried packed by xz): two build folders packed into one
# build/carry/NAME.tar.xz and unpacked by --unpack byte-identical, with their modes; a folder
# that is not there, or not directly under build/, is refused with a message naming it.
. "$(dirname "$0")/lib.sh"
R=$TMP/repo; mkdir -p "$R/bench" "$R/build/cuda-a" "$R/build/cuda-b"
cp bench/carry_pack.sh "$R/bench/"
head -c 3000000 /dev/urandom > "$R/build/cuda-a/kda"; chmod +x "$R/build/cuda-a/kda"
cp "$R/build/cuda-a/kda" "$R/build/cuda-b/kda"; echo "commit x" > "$R/build/cuda-b/BUILD_INFO"
(cd "$R" && bash bench/carry_pack.sh two build/cuda-a build/cuda-b > /dev/null) && [ -f "$R/build/carry/two.tar.xz" ] &&
  ok "packed two folders into build/carry/two.tar.xz" || bad "packing failed"
size=$(stat -c %s "$R/build/carry/two.tar.xz" 2>/dev/null || echo 0)
[ "$size" -gt 0 ] && [ "$size" -lt 4000000 ] && ok "the shared 3 MB is packed once ($size bytes)" ||
  bad "packed size $size (wanted under 4 MB for 6 MB of which half repeats)"
mv "$R/build/cuda-a" "$TMP/a0"; mv "$R/build/cuda-b" "$TMP/b0"
(cd "$R" && bash bench/carry_pack.sh --unpack > /dev/null) && diff -r "$TMP/a0" "$R/build/cuda-a" > /dev/null &&
  diff -r "$TMP/b0" "$R/build/cuda-b" > /dev/null && [ -x "$R/build/cuda-a/kda" ] &&
  ok "--unpack restores both folders byte-identical, modes kept" || bad "--unpack: folders differ or lost their modes"
expect_fail "a folder that is not there" "build/cuda-none" bash "$R/bench/carry_pack.sh" x build/cuda-none
mkdir -p "$R/elsewhere"
expect_fail "a folder outside build/" "directly under build/" bash -c "cd '$R' && bash bench/carry_pack.sh x elsewhere"
finish
