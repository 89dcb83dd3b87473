#!/usr/bin/env bash
# kda --version and kda version: the release in VERSION, the commit the build came from (and
# "modified" exactly when src/ or the Makefile differ from it), and the CUDA architectures; the
# same string in every checkpoint (state.json) and in the metrics header.
. "$(dirname "$0")/lib.sh"
v1=$($KDA --version) && v2=$($KDA version) || bad "kda --version / kda version failed"
[ "$v1" = "$v2" ] && ok "--version and version agree: $v1" || bad "'$v1' vs '$v2'"
grep -q "^kda $(cat VERSION) (commit $(git rev-parse --short=12 HEAD)" <<<"$v1" && ok "release $(cat VERSION) and commit $(git rev-parse --short=12 HEAD)" \
  || bad "version line '$v1' does not name VERSION $(cat VERSION) and HEAD $(git rev-parse --short=12 HEAD)"
if git diff --quiet HEAD -- src Makefile; then grep -qv "modified" <<<"$v1" && ok "clean tree: not marked modified" || bad "clean tree marked modified: $v1"
else grep -q ", modified" <<<"$v1" && ok "modified tree: marked modified" || bad "modified tree not marked: $v1"; fi
if command -v nvcc >/dev/null; then grep -qE "; CUDA [0-9a ]+ \+ PTX [0-9]*\)$" <<<"$v1" && ok "CUDA architectures named" || bad "no CUDA archs in '$v1'"
else grep -q "; no CUDA)" <<<"$v1" && ok "a build without nvcc says no CUDA" || bad "'$v1'"; fi
$KDA train configs/tiny-bytes.yaml --device cpu --set train_iters=1 --set lr_warmup_iters=0 --set sample_tokens=0 \
  --set save="$TMP/ck" > /dev/null 2>&1 || bad "a one-iteration run with save failed"
grep -qF "\"kda_version\": \"$v1\"" "$TMP/ck/iter_0000001/state.json" && ok "the checkpoint names the kda that wrote it" \
  || bad "state.json has no kda_version '$v1'"
grep -qF "\"kda_version\":\"$v1\"" "$TMP/ck/metrics.jsonl" && ok "so does the metrics header" || bad "metrics header lacks '$v1'"
finish
