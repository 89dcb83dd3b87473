#!/usr/bin/env bash
# Includes go downward: a file in src/<folder> includes only from its own folder or from folders
# listed before it here (the order of DEVELOPERS.md's table). Fails naming each upward include.
set -u
cd "$(dirname "$0")/../.."
order="base formats text data model comm backend/cpu backend/cuda backend train infer cli"
rank() { local i=0; for f in $order; do [ "$f" = "$1" ] && { echo $i; return; }; i=$((i+1)); done; echo -1; }
folder_of() { # src/backend/cuda/x.cu -> backend/cuda, src/model/x.h -> model
  local p=${1#src/}; p=${p%/*}; echo "$p"; }
bad=0; n=0
for f in $(git ls-files 'src/*.c' 'src/*.h' 'src/*.cu' 'src/*.cuh'); do
  from=$(folder_of "$f"); rf=$(rank "$from")
  [ "$rf" -lt 0 ] && { echo "FAIL: $f is in no known folder ($from)"; bad=1; continue; }
  while read -r inc; do
    n=$((n+1))
    [[ "$inc" == */* ]] || continue  # same folder
    to=${inc%/*}; rt=$(rank "$to")
    if [ "$rt" -lt 0 ]; then echo "FAIL: $f includes $inc from an unknown folder"; bad=1
    elif [ "$rt" -gt "$rf" ]; then echo "FAIL: $f ($from) includes $inc ($to), a folder below it"; bad=1; fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done
for d in $order; do [ -f "src/${d%%/*}/README.md" ] || { echo "FAIL: src/${d%%/*} has no README.md"; bad=1; }; done
[ $n -gt 100 ] || { echo "FAIL: only $n includes found (the check is not looking at the tree)"; bad=1; }
[ $bad = 0 ] && echo "ok: $n includes, all downward"
exit $bad
