# Shared helpers for the command-line tests (sourced). Run from the repo root.
set -u
KDA=${KDA_BIN:-./kda}
T_PASS=0; T_FAIL=0
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ok()   { T_PASS=$((T_PASS+1)); echo "  ok    $*"; }
bad()  { T_FAIL=$((T_FAIL+1)); echo "  FAIL  $*"; }
# expect_fail "description" "substring expected in stderr" cmd...
expect_fail() {
  local what=$1 pat=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$pat" <<<"$err" && [ "$(grep -c . <<<"$err")" -le 3 ]; then ok "$what (exit $rc: $(head -1 <<<"$err"))"
  else bad "$what: exit $rc, stderr: $err (wanted non-zero exit and a short message containing '$pat')"; fi
}
finish() { echo "$(basename "$0"): $T_PASS passed, $T_FAIL failed"; [ $T_FAIL -eq 0 ]; }
