#!/usr/bin/env bash
# bench/fla_wheels.sh (FLA's wheels installed on the device machine): with no wheels it fails and
# says what to carry; a carried wheel is installed into FLA_SITE, which goes on PYTHONPATH once,
# and python then imports it; a second call finds it and installs nothing; a python that imports
# fla without the site (a venv with FLA) leaves PYTHONPATH alone.
. "$(dirname "$0")/lib.sh"
. bench/fla_wheels.sh
PY=${KDA_TEST_PY:-python3}
# a python with pip that does not find fla by itself: else a fresh venv of it (Debian's python3 has
# no pip; an activated .venv has FLA)
if ! "$PY" -m pip --version > /dev/null 2>&1 ||
  "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("fla") is None)' 2> /dev/null; then
  "$PY" -m venv "$TMP/venv" > /dev/null 2>&1 && PY=$TMP/venv/bin/python ||
    { echo "SKIP: $PY cannot make a venv with pip (install python3-venv, or set KDA_TEST_PY)"; exit 77; }
fi
ROOT=$PWD
export FLA_SITE=$TMP/site PYTHONPATH=
cd "$TMP"
err=$(fla_wheels_install "$PY" 2>&1) && bad "no wheels: returned 0" ||
  { [[ "$err" == *"carry .whl"* ]] && ok "no wheels: fails, says to carry .whl" || bad "no wheels: message '$err'"; }
# a minimal wheel of a package named fla (what pip needs: the package, METADATA, WHEEL, RECORD)
mkdir -p w/fla w/fla-0.0.1.dist-info .whl
echo 'VERSION = "test"' > w/fla/__init__.py
printf 'Metadata-Version: 2.1\nName: fla\nVersion: 0.0.1\n' > w/fla-0.0.1.dist-info/METADATA
printf 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n' > w/fla-0.0.1.dist-info/WHEEL
printf 'fla/__init__.py,,\nfla-0.0.1.dist-info/METADATA,,\nfla-0.0.1.dist-info/WHEEL,,\nfla-0.0.1.dist-info/RECORD,,\n' \
  > w/fla-0.0.1.dist-info/RECORD
(cd w && "$PY" -m zipfile -c "$TMP/.whl/fla-0.0.1-py3-none-any.whl" fla fla-0.0.1.dist-info)
fla_wheels_install "$PY" && [ -f "$FLA_SITE/fla/__init__.py" ] && ok "the carried wheel installed into FLA_SITE" ||
  bad "install: $(ls -R "$FLA_SITE" 2>&1 | head)"
[ "$("$PY" -c 'import fla; print(fla.VERSION)' 2>&1)" = test ] && ok "python imports it through PYTHONPATH" ||
  bad "import after install: PYTHONPATH=$PYTHONPATH"
touch -d '2000-01-01' "$FLA_SITE/fla/__init__.py"
fla_wheels_install "$PY" && fla_site_path && [ "$PYTHONPATH" = "$FLA_SITE" ] &&
  [ "$(stat -c %Y "$FLA_SITE/fla/__init__.py")" = "$(date -d '2000-01-01' +%s)" ] &&
  ok "a second call installs nothing; FLA_SITE on PYTHONPATH once" || bad "second call: PYTHONPATH=$PYTHONPATH"
mv .whl whl.off
export PYTHONPATH=
fla_wheels_install "$PY" && [ "$PYTHONPATH" = "$FLA_SITE" ] &&
  ok "a later script (PYTHONPATH reset, no wheels left): the earlier install is found" || bad "later script: PYTHONPATH=$PYTHONPATH"
mkdir -p "$TMP/elsewhere" && cp -r "$FLA_SITE/fla" "$TMP/elsewhere/" # fla found elsewhere, not in FLA_SITE
export PYTHONPATH=$TMP/elsewhere
fla_wheels_install "$PY" && [ "$PYTHONPATH" = "$TMP/elsewhere" ] &&
  ok "fla importable as it is: PYTHONPATH unchanged" || bad "fla importable: PYTHONPATH=$PYTHONPATH"
cd "$ROOT"
finish
