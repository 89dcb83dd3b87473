#!/usr/bin/env bash
# pyenv.sh — the project-local Python reference environment (<repo>/.venv) for the parity tests.
#
#   tools/pyenv.sh            create .venv when missing or out of date, else return at once
#   tools/pyenv.sh --force    rebuild it
#
# .venv holds exactly tests/python/requirements.txt (torch on the CPU, FLA, transformers, ...).
# It counts as complete only when .venv/.kda-stamp matches the hash of requirements.txt and the
# Python version; then this script takes well under a second. Otherwise the environment is
# built in .venv.tmp, checked by importing what the tests import, and only then renamed to
# .venv, so an interrupted or failed build never leaves a half-made .venv behind. A fresh
# build downloads ~4 GB and takes ~6.2 GB on disk (torch from PyPI is a CUDA build: PyPI has no
# CPU-only torch, so its CUDA libraries come along even on a CPU-only machine) and takes a few minutes. KDA_PYTHON picks the base interpreter
# (default python3). Concurrent calls wait for each other (flock on .venv.lock).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$ROOT/.venv
TMP=$ROOT/.venv.tmp
REQ=$ROOT/tests/python/requirements.txt
STAMP=.kda-stamp
PY=${KDA_PYTHON:-python3}

say() { echo "pyenv: $*"; }
fail() { echo "pyenv: error: $*" >&2; exit 1; }

force=0
case "${1:-}" in
  "") ;;
  --force) force=1 ;;
  *) echo "usage: tools/pyenv.sh [--force]" >&2; exit 2 ;;
esac

[ -f "$REQ" ] || fail "$REQ is missing"
command -v "$PY" >/dev/null || fail "no '$PY' on PATH: install Python 3 (>= 3.10) or set KDA_PYTHON"
pyver=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])') ||
  fail "'$PY' does not run"
want="$(sha256sum "$REQ" | cut -d' ' -f1) python-$pyver"

is_current() {
  [ -f "$VENV/$STAMP" ] && [ "$(cat "$VENV/$STAMP")" = "$want" ] && "$VENV/bin/python" -c '' 2>/dev/null
}

if [ $force = 0 ] && is_current; then
  say "$VENV is up to date"
  exit 0
fi

exec 9>"$ROOT/.venv.lock"
if ! flock -n 9; then
  say "waiting for another tools/pyenv.sh to finish"
  flock 9
fi
if [ $force = 0 ] && is_current; then # built by the one we waited for
  say "$VENV is up to date"
  exit 0
fi

ok=0
cleanup() { [ $ok = 1 ] || rm -rf "$TMP"; }
trap cleanup EXIT
trap 'fail "interrupted"' INT TERM

# pip unpacks the ~4 GB of wheels under TMPDIR and installs ~6.2 GB into .venv.tmp; with the old
# .venv still present until the rename, say so before a long download rather than after it.
need_gb=12
free_gb() { df -P -k "$1" 2>/dev/null | awk 'NR == 2 { print int($4 / 1048576) }'; }
rm -rf "$TMP" # a killed build's leftover: gone before the space is counted and the build starts
for dir in "$ROOT" "${TMPDIR:-/tmp}"; do
  have=$(free_gb "$dir" || true) # no figure (a TMPDIR that does not exist): no check
  if [ -n "$have" ] && [ "$have" -lt $need_gb ]; then
    fail "only $have GB free on the disk of $dir; building $VENV needs ~$need_gb GB (wheels unpacked under TMPDIR, ~6.2 GB installed): free some space or point TMPDIR at a larger disk"
  fi
done

start=$(date +%s)
if [ -d "$VENV" ]; then say "$VENV is out of date (requirements or Python changed): rebuilding"; fi
say "creating a Python $pyver virtual environment in $TMP"
"$PY" -m venv --prompt .venv "$TMP" ||
  fail "'$PY -m venv' failed: on Debian install python3-venv (apt-get install python3-venv)"

n=$(grep -c -E '^[A-Za-z0-9]' "$REQ")
say "installing $n pinned packages from tests/python/requirements.txt (first time: ~4 GB, a few minutes)"
log=$TMP/pip-install.log
set +e
PIP_DISABLE_PIP_VERSION_CHECK=1 "$TMP/bin/python" -m pip install --no-input --no-cache-dir --progress-bar off -r "$REQ" 2>&1 |
  tee "$log" | sed -n -u -E 's/^(Collecting [^ ]+|Installing collected packages).*/pyenv:   \1/p'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  echo "---- last lines of pip's output ----" >&2
  tail -n 25 "$log" >&2
  fail "pip install -r tests/python/requirements.txt failed (exit $rc); nothing was changed in $VENV"
fi

say "checking that the test imports work (torch, FLA's KDA, transformers, ...)"
"$TMP/bin/python" - <<'EOF' || fail "the new environment cannot import what the tests need (see above)"
import warnings
warnings.simplefilter("ignore")  # FLA: "Triton is not supported on current platform, roll back to CPU"
import einops, numpy, safetensors, tiktoken, tokenizers, torch, transformers
from fla.ops.kda.naive import naive_chunk_kda, naive_recurrent_kda
from fla.ops.kda.gate import naive_kda_gate
from fla.models.kda import KDAConfig, KDAForCausalLM
x = torch.randn(1, 64, 1, 8, dtype=torch.float32)
o, _ = naive_recurrent_kda(x, x, x, -x.abs(), torch.rand(1, 64, 1))
assert torch.isfinite(o).all()
print("pyenv:   torch %s, flash-linear-attention %s, transformers %s" % (
    torch.__version__, __import__("fla").__version__, transformers.__version__))
EOF

# A venv records its own path in its scripts (pip's shebang, activate): point them at .venv.
grep -rlI --null -F "$TMP" "$TMP/bin" "$TMP/pyvenv.cfg" | xargs -0 -r sed -i "s|$TMP|$VENV|g"
rm -f "$log"
echo "$want" >"$TMP/$STAMP"
rm -rf "$VENV"
mv "$TMP" "$VENV"
ok=1
"$VENV/bin/python" -c 'import torch' || fail "$VENV/bin/python cannot import torch after the rename"
say "ready: $VENV/bin/python (built in $(($(date +%s) - start)) s)"
