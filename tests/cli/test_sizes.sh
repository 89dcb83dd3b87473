#!/usr/bin/env bash
# The size rule (DEVELOPERS.md): no function over 100 lines and no file over 800 lines in src/,
# CUDA device code exempt. tools/check_sizes.sh checks the tree; first it is shown to fail on
# made-up files that break the rule (and to pass those that keep it), so that a scanner that
# stopped seeing functions could not pass the tree unnoticed.
. "$(dirname "$0")/lib.sh"
CHECK=tools/check_sizes.sh
body() { # n statement lines
  local i; for ((i = 0; i < $1; i++)); do echo "    x += $i; /* { */ s = \"}\";"; done; }
fn() { # declaration up to the name, total lines (signature to closing brace), optional line above it
  local decl=$1 total=$2 prefix=${3:-} n
  n=$((total - 3)); [ -n "$prefix" ] && { echo "$prefix"; n=$((n - 1)); }
  echo "$decl(int x,"; echo "    const char *s) {"; body $n; echo "}"; }
expect() { # description, wanted exit status, pattern wanted in the output ('' none), path...
  local what=$1 want=$2 pat=$3 out rc; shift 3
  out=$($CHECK "$@" 2>&1); rc=$?
  if [ $rc -eq "$want" ] && { [ -z "$pat" ] || grep -qE -- "$pat" <<<"$out"; }; then ok "$what (exit $rc)"
  else bad "$what: exit $rc (wanted $want, /$pat/): $out"; fi
}
d=$TMP/src; mkdir -p "$d"
fn "static int ok100" 100 > "$d/ok.c"
expect "a 100-line function passes" 0 "longest function ok100 .*, 100 lines" "$d/ok.c"
fn "static int long101" 101 > "$d/long.c"
expect "a 101-line function fails, named with its line" 1 "long.c:1: function long101 is 101 lines \(limit 100\)" "$d/long.c"
{ echo 'extern "C" {'; echo '#include "x.h"'; echo '}'; echo 'namespace {'; fn "static int in_ns" 120; echo '}'; } > "$d/ns.cu"
expect "a long host function in a namespace of a .cu fails" 1 "ns.cu:5: function in_ns is 120 lines" "$d/ns.cu"
{ echo '#define LONG_MACRO(x) \'; echo '    do { \'; echo '    } while (0)'; fn "__global__ void __launch_bounds__(256) kern" 150 "template <int N>"
  fn "__device__ float dev" 130; fn "__host__ __device__ float both" 20; } > "$d/kern.cu"
expect "CUDA kernels and __device__ functions are exempt" 0 "2 of device code" "$d/kern.cu"
{ echo "static const int table[] = {"; for ((i = 0; i < 150; i++)); do echo "    $i,"; done; echo "};"
  echo "struct big {"; for ((i = 0; i < 150; i++)); do echo "    int f$i;"; done; echo "};"; fn "static int after" 10; } > "$d/data.c"
expect "initializers and structs are not functions" 0 "longest function after .*, 10 lines" "$d/data.c"
{ fn "static int short" 50; for ((i = 0; i < 751; i++)); do echo "// filler"; done; } > "$d/big.h"
expect "an 801-line file fails" 1 "big.h: 801 lines \(limit 800\)" "$d/big.h"
expect "a folder is searched, every file in it" 1 ": 3 over$" "$d"

out=$($CHECK 2>&1); rc=$?
if [ $rc -eq 0 ]; then ok "src/ keeps the rule: ${out#check_sizes: }"; else bad "src/ breaks the size rule:
$out"; fi
grep -q "longest function" <<<"$out" && [ "$(sed -n 's/^check_sizes: \([0-9]*\) files, \([0-9]*\) functions.*/\2/p' <<<"$out")" -gt 500 ] \
  && ok "the scan saw the tree's functions" || bad "the scan found too few functions: $out"
finish
