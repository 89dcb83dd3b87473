#!/usr/bin/env bash
# bench/triton_cache.sh (the device scripts' carried Triton cache): a cache larger than one part
# is saved as 15 MiB parts, each under the 16 MiB a device call hands back, and restored
# byte-identical from them; the single tarball of older calls still restores, and so do the
# parts repacked by xz (triton_cache.tar.xz, as the header says to make it); an empty or
# missing cache saves nothing (so an old cache's parts are not replaced by an empty one).
. "$(dirname "$0")/lib.sh"
. bench/triton_cache.sh
export TRITON_CACHE_DIR=$TMP/cache
mkdir -p "$TRITON_CACHE_DIR/k/0" "$TMP/out" "$TMP/carry"
head -c 34000000 /dev/urandom > "$TRITON_CACHE_DIR/k/0/kernel.cubin"
echo '{"name": "k"}' > "$TRITON_CACHE_DIR/k/0/kernel.json"
triton_cache_save "$TMP/out"
n=$(ls "$TMP/out" | grep -c '^triton_cache\.tgz\.part\.[0-9][0-9]$')
big=$(find "$TMP/out" -type f -size +16383k | wc -l)
[ "$n" = 3 ] && [ "$big" = 0 ] && ok "a 34 MB cache saved as 3 parts, none over 16 MiB" ||
  bad "parts: $n (wanted 3), $big over 16 MiB: $(ls -l "$TMP/out")"
cp "$TMP/out"/* "$TMP/carry/"
TRITON_CACHE_DIR=$TMP/back triton_cache_restore "$TMP/carry"
diff -r "$TMP/cache" "$TMP/back" > /dev/null && ok "restored from the parts: identical" || bad "restored from the parts: differs"
tar czf "$TMP/old.tgz" -C "$TRITON_CACHE_DIR" . && mkdir -p "$TMP/olddir" && mv "$TMP/old.tgz" "$TMP/olddir/triton_cache.tgz"
TRITON_CACHE_DIR=$TMP/back2 triton_cache_restore "$TMP/olddir"
diff -r "$TMP/cache" "$TMP/back2" > /dev/null && ok "restored from one tarball: identical" || bad "restored from one tarball: differs"
mkdir -p "$TMP/xzdir" && cat "$TMP/out"/triton_cache.tgz.part.* | gunzip | xz -9 -T2 > "$TMP/xzdir/triton_cache.tar.xz"
TRITON_CACHE_DIR=$TMP/back3 triton_cache_restore "$TMP/xzdir"
diff -r "$TMP/cache" "$TMP/back3" > /dev/null && ok "restored from the parts repacked by xz: identical" ||
  bad "restored from triton_cache.tar.xz: differs"
TRITON_CACHE_DIR=$TMP/empty triton_cache_save "$TMP/out"
[ "$(ls "$TMP/out" | grep -c part)" = 3 ] && ok "an empty cache saves nothing, the parts stay" ||
  bad "an empty cache's save changed the parts: $(ls "$TMP/out")"
TRITON_CACHE_DIR=$TMP/none triton_cache_restore "$TMP/nothing-here" && [ -d "$TMP/none" ] &&
  [ -z "$(ls -A "$TMP/none")" ] && ok "nothing to restore: an empty cache directory" || bad "restore from nothing"
finish
