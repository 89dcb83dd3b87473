# triton_cache.sh — Triton's kernel cache carried between device calls (sourced, not run). FLA's
# first step on a fresh machine spends ~5 minutes compiling; the cache's tarball is cut into
# 15 MiB parts so that it comes back from the device (a file there comes back only under 16 MiB)
# and can be carried into the next call as DIR/triton_cache.tgz.part.NN (or one triton_cache.tgz, or
# triton_cache.tar.xz: the parts repacked here by xz, a quarter of their size).
# Repack the parts a call brought back: cat D/triton_cache.tgz.part.* | gunzip | xz -9 -T2 > D/triton_cache.tar.xz
#   triton_cache_restore DIR   unpack DIR's tarball or parts into $TRITON_CACHE_DIR, if there
#   triton_cache_save OUTDIR   the cache as OUTDIR/triton_cache.tgz.part.NN (nothing if it is empty)
triton_cache_restore() {
  mkdir -p "$TRITON_CACHE_DIR"
  if [ -f "$1/triton_cache.tgz" ]; then
    tar xzf "$1/triton_cache.tgz" -C "$TRITON_CACHE_DIR"
  elif [ -f "$1/triton_cache.tar.xz" ]; then # packed here by xz: 45 MB of parts -> 11.6 MB
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$1/triton_cache.tar.xz" "$TRITON_CACHE_DIR"
  elif compgen -G "$1/triton_cache.tgz.part.*" > /dev/null; then
    cat "$1"/triton_cache.tgz.part.* | tar xz -C "$TRITON_CACHE_DIR"
  fi
}
triton_cache_save() {
  [ -d "$TRITON_CACHE_DIR" ] && [ -n "$(ls -A "$TRITON_CACHE_DIR" 2>/dev/null)" ] || return 0
  rm -f "$1"/triton_cache.tgz.part.*
  tar czf - -C "$TRITON_CACHE_DIR" . 2>/dev/null | split -b 15M -d - "$1/triton_cache.tgz.part."
}
