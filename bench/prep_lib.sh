# prep_lib.sh — device builds in git worktrees (sourced, not run; bench/device_prep.sh and
# bench/pending/prep_queue.sh). Each build is sm_90a code only (the device machine's H100 / H200),
# in its own worktree under $prep (default /tmp/kda-device-prep), so the checkout's files are not
# touched. A worktree left from an earlier run at the same commit and patches is reused, so make
# rebuilds only what changed (the builds take ~1.5 minutes each from nothing on 2 cores).
#   prep_build NAME REV [PATCH...]   $prep/NAME at REV with the patches applied (git am), its
#                                    device binaries built into $prep/NAME/build/out
#   prep_out NAME                    the folder of NAME's binaries
#   prep_drop NAME                   removes NAME's worktree
# prep_mk, the build's command (make's target cuda-device-bins is appended), may be set before.
prep=${KDA_PREP_DIR:-/tmp/kda-device-prep}
declare -p prep_mk > /dev/null 2>&1 || prep_mk=(make BUILD=build/dev-sm90a CUDA_ARCHS=90a CUDA_PTX= DEVICE_DIR=build/out)

prep_out() { echo "$prep/$1/build/out"; }

prep_drop() {
    git worktree remove --force "$prep/$1" 2>/dev/null || rm -rf "${prep:?}/$1"
}

prep_build() {
    local name=$1 rev=$2 wt=$prep/$1
    shift 2
    local want
    want="$(git rev-parse "$rev") $(cat /dev/null "$@" | sha1sum | cut -c1-12)"
    mkdir -p "$prep"
    if [ ! -f "$wt/.prep_key" ] || [ "$(cat "$wt/.prep_key")" != "$want" ]; then
        prep_drop "$name"
        git worktree add -q --detach "$wt" "$rev"
        if [ $# -gt 0 ]; then
            (cd "$wt" && git am -q --3way "$@") ||
                { echo "prep_build: the patches for $name do not apply on $rev" >&2; return 1; }
        fi
        echo "$want" > "$wt/.prep_key"
    fi
    echo "== building $name ($(git -C "$wt" log --oneline -1))"
    (cd "$wt" && "${prep_mk[@]}" cuda-device-bins -j"$(nproc)" > build.log 2>&1) ||
        { tail -20 "$wt/build.log"; echo "prep_build: $name did not build" >&2; return 1; }
}
