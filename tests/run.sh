#!/usr/bin/env bash
# The whole test suite (what `make test` and CI run):
#   1. C tests (build/tests/test_*), 2. the same under ASan+UBSan (build-san/),
#   2b. libFuzzer targets of the file readers for a bounded time, 3. command-line tests (tests/cli/*.sh), 4. parity tests against the reference Python
#   stack (tests/python/test_*.py in the project venv made by tools/pyenv.sh).
# Ends with "N passed, N failed, N skipped"; exit status non-zero only if something failed.
# Skip protocol (as automake's): a test that cannot run here (no GPU, no mpirun) prints one line
# saying why and exits 77; it is counted as skipped, never as passed.
# KDA_TEST_ONLY=c|san|fuzz|cli|py limits the run to one group; KDA_TEST_CLI_GLOB picks other
# command-line scripts (tests/cli/test_run_counts.sh checks the counting with made-up ones).
set -u
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)
passed=0; failed=0; skipped=0; failures=(); skips=()
logdir=build/test-logs; mkdir -p "$logdir"
only=${KDA_TEST_ONLY:-}

run_one() { # name, command...
  local name=$1; shift
  local log="$logdir/$(echo "$name" | tr '/ ' '__').log"
  local t0=$(date +%s)
  timeout "${KDA_TEST_TIMEOUT:-900}" "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ]; then
    passed=$((passed+1)); printf '  PASS  %-48s %4ds\n' "$name" $(( $(date +%s)-t0 ))
  elif [ $rc -eq 77 ]; then
    skipped=$((skipped+1)); skips+=("$name")
    printf '  SKIP  %-48s %4ds  %s\n' "$name" $(( $(date +%s)-t0 )) "$(grep -m1 -i skip "$log" | cut -c1-100)"
  else
    failed=$((failed+1)); failures+=("$name"); printf '  FAIL  %-48s %4ds  (log: %s)\n' "$name" $(( $(date +%s)-t0 )) "$log"
    tail -n 25 "$log" | sed 's/^/        | /'
  fi
}

echo "== build"
make -s -j"$jobs" kda test-bins || { echo "build failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }

if [ -z "$only" ] || [ "$only" = c ]; then
  echo "== C tests"
  for t in build/tests/test_*; do [ -x "$t" ] && run_one "c/$(basename "$t")" "$t"; done
fi

if [ -z "$only" ] || [ "$only" = san ]; then
  echo "== C tests under ASan+UBSan"
  if make -s -j"$jobs" SAN=1 test-bins; then
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    for t in build-san/tests/test_*; do [ -x "$t" ] && KDA_SAN=1 run_one "san/$(basename "$t")" "$t"; done
    unset ASAN_OPTIONS UBSAN_OPTIONS
  else
    failed=$((failed+1)); failures+=("san/build")
  fi
fi

if [ -z "$only" ] || [ "$only" = fuzz ]; then
  echo "== fuzzers (libFuzzer, ${KDA_FUZZ_SECONDS:-20} s each; longer runs: docs/fuzzing.md)"
  if command -v clang >/dev/null && make -s -j"$jobs" FUZZ=1 fuzz-bins >"$logdir/fuzz-build.log" 2>&1; then
    for f in build-fuzz/fuzz/fuzz_*; do
      name=$(basename "$f"); corpus=build-fuzz/corpus/$name; mkdir -p "$corpus"
      ASAN_OPTIONS=detect_leaks=0 run_one "fuzz/$name" "$f" -max_total_time="${KDA_FUZZ_SECONDS:-20}" -rss_limit_mb=4096 \
        -detect_leaks=0 -artifact_prefix="$logdir/$name-" "$corpus" "tests/fuzz/seeds/$name"
    done
  else
    failed=$((failed+1)); failures+=("fuzz/build"); tail -5 "$logdir/fuzz-build.log"
  fi
fi

if [ -z "$only" ] || [ "$only" = cli ]; then
  echo "== command-line tests"
  for t in ${KDA_TEST_CLI_GLOB:-tests/cli/test_*.sh}; do [ -f "$t" ] && run_one "cli/$(basename "$t")" bash "$t"; done
fi

if [ -z "$only" ] || [ "$only" = py ]; then
  echo "== parity tests against the Python reference stack"
  if [ "${KDA_SKIP_PY:-0}" = 1 ]; then
    for t in tests/python/test_*.py; do [ -f "$t" ] && { skipped=$((skipped+1)); skips+=("py/$(basename "$t")"); }; done
    echo "  SKIP  all parity tests (KDA_SKIP_PY=1)"
  elif tools/pyenv.sh; then
    for t in tests/python/test_*.py; do
      [ -f "$t" ] && KDA_BIN="$root/kda" KDA_BUILD="$root/build" PYTHONUNBUFFERED=1 run_one "py/$(basename "$t")" "$root/.venv/bin/python" "$t"
    done
  else
    failed=$((failed+1)); failures+=("py/venv")
  fi
fi

echo
if [ "$failed" -gt 0 ]; then echo "failed: ${failures[*]}"; fi
if [ "$skipped" -gt 0 ]; then echo "skipped: ${skips[*]}"; fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
