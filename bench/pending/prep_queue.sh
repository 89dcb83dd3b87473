#!/usr/bin/env bash
# prep_queue.sh — rebuilds every build the queued device calls need (README.md here, "Queue"), from
# a fresh checkout: build/ and .whl are not kept between sessions, and the queue's calls carry them.
#   build/cuda-main   main's device binaries (the f1 and n40 modes)
#   build/cuda-d40    main's kda and bench_kda_cuda as kda_base / bench_kda_base (d41's and d42's A)
#   build/cuda-d41    main + d3-bf16 0001; c32's kda and test_cuda_kda as kda_c32 / test_cuda_kda_c32
#   build/cuda-d42    main + d3-bf16 0001-0002
#   build/carry/{d40,d41,d42}.tar.xz   the last three packed (bench/carry_pack.sh)
#   .whl              FLA 0.6.0's wheels for the device's Python 3.12, when missing
# Each build is stripped and names its commit and patches in BUILD_INFO. ~12 minutes from nothing
# on 2 cores; the worktrees under $KDA_PREP_DIR (bench/prep_lib.sh) are reused while they match.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/prep_lib.sh
pend=bench/pending

put() { # DIR NAME [FILE[=AS]...]: NAME's binaries (all, or the FILEs, renamed AS) into build/DIR
    local dir=build/$1 name=$2 f all
    shift 2
    mkdir -p "$dir"
    if [ $# -eq 0 ]; then mapfile -t all < <(ls "$(prep_out "$name")") && set -- "${all[@]}"; fi
    for f in "$@"; do
        cp "$(prep_out "$name")/${f%%=*}" "$dir/${f#*=}"
        strip --strip-debug "$dir/${f#*=}"
    done
}
info() { # DIR NAME NOTE: NAME's build info and what it holds into build/DIR/BUILD_INFO
    { (cd "$prep/$2" && tools/build_info.sh); echo "$3"; } > "build/$1/BUILD_INFO"
}

prep_build main main
prep_build d41 main "$pend"/d3-bf16/0001-*.patch
prep_build c32 main "$pend"/c32/0001-*.patch
prep_build d42 main "$pend"/d3-bf16/000[12]-*.patch

rm -rf build/cuda-main build/cuda-d40 build/cuda-d41 build/cuda-d42
put cuda-main main
info cuda-main main "main $(git rev-parse --short main)"
put cuda-d40 main kda=kda_base bench_kda_cuda=bench_kda_base
info cuda-d40 main "kda_base, bench_kda_base: main $(git rev-parse --short main)"
put cuda-d41 d41
put cuda-d41 c32 kda=kda_c32 test_cuda_kda=test_cuda_kda_c32
info cuda-d41 d41 "main + bench/pending/d3-bf16 0001; kda_c32, test_cuda_kda_c32: main + bench/pending/c32 0001"
put cuda-d42 d42
info cuda-d42 d42 "main + bench/pending/d3-bf16 0001-0002"
rm -f build/cuda-*/bench_ops_cuda build/cuda-*/kda_core_io # no queued mode runs them
rm -rf build/carry && mkdir -p build/carry
for d in d40 d41 d42; do bash bench/carry_pack.sh "$d" "build/cuda-$d"; done

if ! compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 -d .whl flash-linear-attention==0.6.0 fla-core==0.6.0
fi
du -sh build/cuda-main build/carry .whl
echo "prep_queue: ready; the calls and their carries are in bench/pending/README.md (Queue)"
