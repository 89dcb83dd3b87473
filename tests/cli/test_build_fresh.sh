#!/usr/bin/env bash
# The first build on a fresh machine: the deps step (tools/deps.sh) installs OpenMPI during the
# build, so mpicc is absent when the Makefile is read and appears before the first compile. The
# MPI flags must be asked for at recipe time and every object must wait for the deps step, also
# under make -j. Simulated in a clean build folder: MPICC names a wrapper that does not exist yet,
# and a fake deps step (DEPS_SH) creates it; src/comm/dist.c includes <mpi.h>.
. "$(dirname "$0")/lib.sh"
real=$(command -v mpicc) || { bad "mpicc not installed: cannot simulate the OpenMPI install (run tools/deps.sh install)"; finish; exit 1; }
mkdir -p "$TMP/bin"
cat >"$TMP/deps.sh" <<DEPS
#!/usr/bin/env bash
sleep 1   # an install takes a while: a compile started in parallel would run before it ends
printf '#!/bin/sh\nexec "$real" "\$@"\n' >"$TMP/bin/mpicc" && chmod +x "$TMP/bin/mpicc"
echo "fake deps: mpicc installed" >&2
DEPS
chmod +x "$TMP/deps.sh"
[ ! -e "$TMP/bin/mpicc" ] && ok "mpicc absent before the build" || bad "mpicc exists before the build"
out=$(make -j2 MPICC="$TMP/bin/mpicc" DEPS_SH="$TMP/deps.sh" BUILD="$TMP/build" \
      "$TMP/build/src/comm/dist.o" "$TMP/build/src/base/common.o" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -f "$TMP/build/src/comm/dist.o" ]; then ok "first build with mpicc installed mid-build (make -j2) compiles src/comm/dist.c"
else bad "first build failed (exit $rc): $(grep -m3 -E 'error|Error' <<<"$out")"; fi
grep -q "mpi.h: No such file" <<<"$out" && bad "mpi.h not found: MPI flags were read before the deps step" || ok "no 'mpi.h: No such file'"
# the deps step ran before any compile (order-only prerequisite)
first=$(grep -n -m1 -E "fake deps|-c -o" <<<"$out" | cut -d: -f2-)
grep -q "fake deps" <<<"$first" && ok "deps step ran before the first compile" || bad "a compile ran before the deps step: $first"
finish
