#!/usr/bin/env bash
# Build/test dependencies from Debian. `check`: install what is missing when root (apt-get),
# else name the packages and stop. `install`: same, always trying.
set -euo pipefail
PKGS="gcc make libyaml-dev libopenblas-dev libpcre2-dev libjansson-dev libzstd-dev zlib1g-dev libsnappy-dev bzip2 xz-utils python3-venv openmpi-bin libopenmpi-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "kda: installing missing build dependencies:$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q $missing >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $missing >/dev/null; }
else
  echo "kda: missing build dependencies:$missing" >&2
  echo "kda: install them with: sudo apt-get install$missing" >&2
  exit 1
fi
