#!/usr/bin/env bash
# bench/prep_lib.sh (device builds in worktrees): a build at a commit with patches applied; the
# worktree reused while the commit and patches match (a file the build left stays), made afresh
# when the patches change; patches that do not apply or a build that fails: non-zero with a
# message naming the build. make is replaced by a stub that writes build/out/kda from the tree.
. "$(dirname "$0")/lib.sh"
R=$TMP/repo; mkdir -p "$R"
git -C "$R" init -q -b main && git -C "$R" config user.email t@t && git -C "$R" config user.name t
echo one > "$R/src.txt" && git -C "$R" add src.txt && git -C "$R" commit -qm one
git -C "$R" checkout -qb side && echo two > "$R/src.txt" && git -C "$R" commit -qam two &&
  git -C "$R" format-patch -q -1 -o "$TMP/p" && git -C "$R" checkout -q main
cat > "$TMP/mk" <<'MK'
#!/usr/bin/env bash
[ -f fail ] && { echo "stub: failing as asked"; exit 2; }
mkdir -p build/out && cp src.txt build/out/kda && date +%s%N >> build/out/runs
MK
chmod +x "$TMP/mk"
run() { (cd "$R" && prep_mk=("$TMP/mk") && KDA_PREP_DIR=$TMP/wt . "$OLDPWD/bench/prep_lib.sh" && "$@"); }
out=$(run prep_build a main "$TMP"/p/*.patch) && [ "$(cat "$TMP/wt/a/build/out/kda")" = two ] &&
  ok "built at main with the patch applied" || bad "build with a patch: $out"
touch "$TMP/wt/a/left"
run prep_build a main "$TMP"/p/*.patch > /dev/null && [ -f "$TMP/wt/a/left" ] && [ "$(wc -l < "$TMP/wt/a/build/out/runs")" = 2 ] &&
  ok "same commit and patches: the worktree is reused, make runs again" || bad "the worktree was not reused"
run prep_build a main > /dev/null && [ ! -f "$TMP/wt/a/left" ] && [ "$(cat "$TMP/wt/a/build/out/kda")" = one ] &&
  ok "other patches (none): a fresh worktree at main" || bad "a change of patches kept the old worktree"
echo junk > "$TMP/bad.patch"
expect_fail "a patch that does not apply" "the patches for b do not apply" run prep_build b main "$TMP/bad.patch"
run prep_build c main > /dev/null; touch "$TMP/wt/c/fail"
expect_fail "a build that fails" "c did not build" run prep_build c main
[ "$(run prep_out c)" = "$TMP/wt/c/build/out" ] && ok "prep_out names the build's folder" || bad "prep_out: $(run prep_out c)"
run prep_drop c && [ ! -d "$TMP/wt/c" ] && ok "prep_drop removes the worktree" || bad "prep_drop left $TMP/wt/c"
finish
