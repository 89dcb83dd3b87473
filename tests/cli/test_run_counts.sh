#!/usr/bin/env bash
# tests/run.sh counts honestly: a test that exits 77 (the skip protocol, tests/test_util.h) is
# skipped, not passed; the closing line is "N passed, N failed, N skipped"; the exit status is
# non-zero only when something failed. The CUDA tests use the protocol when there is no GPU.
. "$(dirname "$0")/lib.sh"
d="$TMP/counts"; mkdir -p "$d"
echo 'echo fine; exit 0' >"$d/t_pass.sh"
echo 'echo "SKIP: no widget here"; exit 77' >"$d/t_skip.sh"
echo 'echo broken; exit 1' >"$d/t_zfail.sh"
out=$(KDA_TEST_ONLY=cli KDA_TEST_CLI_GLOB="$d/t_*.sh" tests/run.sh 2>&1); rc=$?
last=$(tail -1 <<<"$out")
[ "$last" = "1 passed, 1 failed, 1 skipped" ] && ok "closing line: $last" || bad "closing line '$last' (wanted '1 passed, 1 failed, 1 skipped')"
[ $rc -ne 0 ] && ok "a failure gives a non-zero exit ($rc)" || bad "exit 0 despite a failure"
grep -q "SKIP  cli/t_skip.sh.*no widget here" <<<"$out" && ok "the skip is listed with its reason" || bad "no SKIP line: $out"
out=$(KDA_TEST_ONLY=cli KDA_TEST_CLI_GLOB="$d/t_[ps]*.sh" tests/run.sh 2>&1); rc=$?
last=$(tail -1 <<<"$out")
[ "$last" = "1 passed, 0 failed, 1 skipped" ] && [ $rc -eq 0 ] && ok "skips alone leave exit 0: $last" || bad "exit $rc, '$last'"
# a CUDA device test without a GPU says SKIP and exits 77 (with a GPU it runs and must pass)
for t in build/tests/test_cuda_ops build/tests/test_cuda_step; do
  [ -x "$t" ] || { bad "$t not built (make test-bins)"; continue; }
  o=$("$t" 2>&1); r=$?
  if grep -q "^SKIP" <<<"$o"; then [ $r -eq 77 ] && ok "$(basename "$t") without a GPU: exit 77" || bad "$(basename "$t") printed SKIP but exited $r"
  else [ $r -eq 0 ] && ok "$(basename "$t") ran on a GPU and passed" || bad "$(basename "$t") exit $r"; fi
done
finish
