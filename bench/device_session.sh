#!/usr/bin/env bash
# device_session.sh n|q|r|k|... — one session's GPU measurements in device calls (each under the
# 10-minute limit), everything built here beforehand (`make device-bins`, .whl with FLA's wheels):
#   n: session 17's first call on next/s17: the native build's device tests (sanitizers too),
#      the D3 chunk-GEMM path, the KDA core and the op benchmarks (fused recompute rows), ncu
#      per-kernel times of the core, kda's side of bench/step_vs_fla.sh, the two-pass CE rows'
#      step (then q, then r: the portable build's tests and the recompute sets);
#   k: a KDA-core change: the device tests, the core with the fused kernels against the
#      chunk-GEMM path (KDA_CORE_UNFUSED=1) in tests and speed, ncu per-kernel times of the
#      core, and kda's side of bench/step_vs_fla.sh;
#   v: the device tests on both builds, the memory plan against the measured peak and an
#      oversized micro-batch refused up front, the GEMM algorithm survey (kda bench
#      --gemm-survey) at 300M and 1B, the portable build's KDA core against FLA and float64;
#   w: a step change: the device tests on both builds, kda's side of bench/step_vs_fla.sh (its
#      memory lines are test_mem_plan.c's table), the SM clock and power during the 300M step, the
#      recompute settings' plans and peaks, the portable build's step;
#   s: a state-scan change: the device tests on both builds (racecheck too), test_cuda_kda with
#      each scan width (KDA_SCAN_VT=16, 32), the core's speed at each width and per kernel (ncu),
#      kda's side of bench/step_vs_fla.sh, selective-recompute variants at 300M 32 x 2048;
#   u: a step change after s: the device tests on both builds (racecheck too), the core's speed
#      and per-kernel times, kda's side of bench/step_vs_fla.sh, the recompute settings' plans and
#      peaks (300M, 1B);
#   z: session 18's one call (next/s18: gate and up one GEMM, b_proj in the input projection,
#      RMSNorm backward register kernels, the conv's q, k, v in one launch): the native build's
#      device tests (NCCL one rank, sanitizers too), the memory-bound ops (both RMSNorm backward
#      kernels), the parity run against the recorded FLA run (with the spread against session
#      17's kda), the 300M 32 x 2048 step of main (kda_base), of the gate+up commit alone (kda_gu,
#      where carried) and of next/s18, the 1B 16 x 2048 step of main and next/s18, the KDA core;
#      then, while time is left, ncu sections of the core's backward kernels;
#   z2: z cut to ~3 minutes (what session 18's device time left allowed): the device tests, the
#      parity run, the 300M 32 x 2048 step of main (kda_base) and of next/s18, the op benchmarks;
#   z3: session 19's first call on next/s18: z's device tests, parity run, 300M and 1B steps of
#      main (kda_base) and next/s18, op benchmarks and KDA core at 8-64 x 2048, then ncu's full
#      set with line info on the core's intra, D3 and finish kernels: the details page and each
#      kernel's SASS with its stall samples (ncu_core_source), to direct the core's next changes;
#   z4: session 19's second call on next/s18 (after z3's findings: the ZeRO-1 step on the plain
#      path's operations, two test fixes): the native build's device tests (NCCL one rank,
#      sanitizers too), nccl_one_rank.sh on main's kda (kda_base) to show where the ZeRO-1
#      mismatch came from, the parity run against the recorded FLA run, the 300M step of main and
#      next/s18;
#   (z5, session 19's A/B of KDA_FINISH_FASTEXP, is gone with that variable: its log is
#      bench/logs/device/2026-12-05_s19_z5_session_z5.txt)
#   p20: session 20's call on bench/pending/next-s20 (the finish kernel: diagonal blocks of dL and dAqk
#      in fp32, row loops two rows at once, B9's pairs once, intra's __expf): the core, step, decode
#      and memcheck tests, the core's speed against main's (bench_kda_base, carried beside it), ncu
#      per-kernel times, the parity run against the recorded FLA run, the 300M step of main
#      (kda_base) and of the series (the call also ran the old pair loops, KDA_FINISH_PAIRS=twice,
#      since removed);
#   i20: session 20's second change (the intra kernel: the inversion's column in registers and its
#      off-diagonal blocks 4 columns a thread, 16-byte staging reads, 16-byte pair-loop reads; same
#      arithmetic in the same order): the core, step, decode and memcheck tests, same_bits.sh
#      against main's kda (kda_base: checkpoints after 10 iterations byte-identical), the core's
#      speed against main's (bench_kda_base), ncu per-kernel times, the 300M step of main and of it;
#   p21: bench/pending/next-s21 (the intra kernel's WY products two tiles a warp at once, B7 in D3,
#      the fused kernels' and scans' fragment loads and stores as wmma.*.shared; the same bits): the
#      SASS's LDSM / MOVM / generic LD counts, the core (also KDA_CORE_UNFUSED=1, kda_b7_kernel's
#      path), step, decode, memcheck and racecheck tests, same_bits.sh against main's kda (kda_base;
#      also unfused and at K 64, V 128), the core's speed against main's
#      (bench_kda_base), ncu per-kernel times, the 300M step of main and of the series (session 21
#      also measured the conv forward at 8 / 16 / 32 time steps a thread: 16, main's, was fastest);
#   t22, t22f: issue 17's table in two calls (kda's side with the clocks through 24 steps and
#      the step's per-kernel ncu table; then FLA's side), joined by bench/step_table.py;
#   p22: bench/pending/next-s22 (cross-entropy rows by a cluster of four blocks, KDA_CE_CLUSTER=4;
#      the conv forward at 8 time steps a thread, KDA_CONV_RF=8; both dropped after this call):
#      the device tests (ops too), the op benchmarks each way, the ops test with the conv at 8
#      steps, memcheck of a tiny model's step with the four-block rows, the step of main's kda
#      (kda_base) and of this one with each row kernel, and the parity run with the default rows
#      (the prep kernel's rsqrt and decays change the bits) and with the four-block rows;
#   n22: ncu's full set on the fused core kernels (source-level stalls);
#   fk23: FLA's chunk_kda per kernel (ncu) at 32 x 2048 beside ours (where FLA's forward gains);
#   p23 / p24: the pending series next-s23 / next-s24 (bench/pending/README.md; not run as such);
#   p25: session 24's one call for next-s23, -s24, -s25 and -s26 (bench/RESULTS.md "Session 24");
#   (p27 / p28, session 25's A/Bs of the prep's bound and the fused prep + intra kernel, are gone with
#      their variables: bench/logs/device/2026-12-06_s25_p28_*)
#   s29: next/s29: the scans at 64 value columns a block (A/B) and one expf a column;
#   s30: next/s30: β·v not stored, staged from v by its readers (the same bits);
#   s31: session 26: the forward's output and the backward's D1 taken inside the state scans (the
#      same bits): device tests, same_bits.sh (also unfused, and at 64 scan columns), the core per
#      kernel and in time against main, the 300M steps (32 and 16 x 2048), the 1B step, and the
#      whole 300M step's per-kernel table (ncu) for what comes next;
#   d33: the scans' integer work (staging by per-thread pointer steps, 32-bit chunk offsets,
#      fragment addresses in 32 bits; the same bits): device tests, same_bits.sh at each scan
#      width, the core per kernel and in time against main, the 300M step, the scans' profile;
#   d34: d33 with the staging's pieces worked out once a kernel (d33 divided once a call: slower):
#      device tests, same_bits.sh at each width, the core per kernel and in time against main;
#   s35: bench/pending/next-s35: core_ab_checks, the 300M step, the fused kernels' stall profile;
#   v34: d34's parts apart (bench_v2: without the 32-bit fragment addresses, bench_v3: the forward
#      staging as before): the scans per kernel (ncu) and the core in time, against main;
#   w31: s31's build where B·H is below the SM count (8, 16 x 2048): the scan widths (default 32
#      forward / 16 backward, KDA_SCAN_VT=32, =64) in the core per kernel and in time, and the 300M
#      16 x 2048 step with each, against main;
#   m24: main after session 24's merge: every native device test, the core's ncu table, the 300M
#      step, then fk23;
#   s21: the SFU sigmoid (bits change) and the conv backward's blocks of 4 x 16 time steps: the
#      device tests (ops too, racecheck), the parity run against the recorded FLA run, main's op
#      benchmarks (bench_ops_base) and this one's (conv, gated norm, SwiGLU), the step against
#      main's (a first version of it, with 4 channels a thread as an A/B and SwiGLU on the new
#      sigmoid, ran too: bench/logs/device/2026-12-05_s21_s21a_*; the final one's: s21b);
#   c: the KDA core against FLA and float64 on the native build (tests/cuda/fla_kda_compare.py);
#   q: the parity run against the FLA run recorded by session 15's p (FLA_METRICS: ~1 minute
#      instead of 7), with KDA_BASE (default: the build kept as kda_base) beside it, and whether
#      the two kda builds' losses are identical to the bit (a change meant to keep the numbers);
#   r: recompute sets at 300M 32 x 2048 in one call, none first and last (~4 min): which set
#      saves the most memory within the issue's 3% (the default; with core_prep, kda_gates, o_proj,
#      in_proj added one by one; without swiglu);
#   p: the parity run alone (as in f2);
#   y: the fp32 small parameters (norm and conv weights, A_log, dt_bias read from the masters):
#      the native build's device tests (sanitizers too), the parity run against the recorded FLA
#      run with the drift per window beside FLA's own, the KDA core, the conv and norm ops
#      (conv + SiLU with every row loaded up front), the 300M step (the
#      config's selective recompute, then none), ncu per-kernel times of that step;
#   t: a refactor's check: the device tests on both builds (the D3 chunk-GEMM path too), the 300M
#      step at 32 and 64 x 2048 with their memory plans;
#   o1 (bench/pending/second-stream): the MLP's weight gradients on a second stream
#      (KDA_WGRAD_STREAM=1, 3), the cross-entropy's row kernel too (KDA_CE_STREAM=1):
#      bench_overlap_cuda, the hooks' tests, the 300M step each way;
#   e1: the 300M step's joules (kda bench's energy line) with the settings that change its work;
#   r1: the default selective set against no recompute at 300M 32 x 2048, alternating (the issue's 3%);
#   m1: session 35's in-place MLP backward: device tests (ops, step), the new default set against
#      the old one and none, the peaks of tests/test_mem_plan.c's table;
#   ts: the device tests ops and step alone; z1: the scratch-first allocation's bits and peak;
#   k1: the 300M and 1B op tables with the KDA core's kernels, every op (--all-ops);
#   g1: the GEMM survey timed under the power cap, the steps with its choice, 300M and 1B;
#   p37: the persistent prep (bench/pending/prep-persistent): tests, bits, A/B; n37: ncu stall
#      samples on the step's kernels below their bandwidth; p38: bench/pending/next-s38's tests
#      with racecheck, its bits against main, the op rows of main, the series and 0001 alone;
#   c39: bench/pending/ce-chunks (the cross-entropy's chunks equal and 256-aligned): device tests,
#      its bits against main where one chunk is taken, the 300M and 1B steps against main with the
#      head's op rows;
#   t38: `kda train`'s own tokens/s (its log line) on the 300M at 32 x 2048 a micro-batch, with
#      the optimizer every micro-batch (as kda bench and the issue's table) and with the recipe's
#      1024-sequence global batch (32 micro-batches a step), beside kda bench's step;
#   b1: the 1B's recompute sets (cheap modules against the default and none), a 300M op table;
#   v36: device tests (ops, step), the parity run with its bits against session 27's, same_bits.sh
#      run to run and against c5e17b0 (kda_base beside kda);
#   f1: both sides of bench/step_vs_fla.sh (issue 17's table); f2: the parity run on 1 x 2048 steps
#      (KDA_BASE: an earlier kda build trained beside it), per-kernel step times, the KDA core
#      against FLA and float64 on both builds;
#   a: device tests on the native Hopper build and on the portable compute_80-PTX build, the
#      KDA-core and op benchmarks, kda's side of bench/step_vs_fla.sh, recompute and portable-path
#      steps, the largest micro-batches with selective recompute;
#   b: FLA's side of bench/step_vs_fla.sh, the 150-step loss parity run (bench/parity_vs_fla.sh),
#      the KDA core against FLA and float64 (tests/cuda/fla_kda_compare.py).
# Through the device tool with carry [build/cuda-device, build/cuda-device-ptx80, .whl]. Logs in $OUT.
set -u
cd "$(dirname "$0")/.."
OUTDIR=${OUT:-/tmp/kda-session}; mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/session_$1.txt") 2>&1
. bench/fla_wheels.sh # FLA from the carried wheels
. bench/triton_cache.sh # Triton's cache carried between calls in 15 MiB parts
N=${KDA_DEVICE_DIR:-build/cuda-device} P=build/cuda-device-ptx80 # KDA_DEVICE_DIR: another prepared build
bash bench/carry_pack.sh --unpack # builds carried packed by xz (several fit the carry's 64 MiB)
echo "device_session $1: $(date -u '+%F %H:%M UTC'); $(cat $N/BUILD_INFO 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
t0=$SECONDS
lap() { echo "--- $1 done at $((SECONDS - t0)) s"; }
bench300() { # dir (its kda) or a kda binary, label, extra --set options (k=v ...); STEPS: timed steps (4)
    local extra=(); for kv in ${3:-}; do extra+=(--set "$kv"); done
    local bin=$1; [ -d "$bin" ] && bin=$bin/kda
    echo "== $2"
    timeout 120 "$bin" bench configs/kda-300M.yaml --device cuda --set micro_batch_size=32 --set global_batch_size=32 \
        --steps "${STEPS:-4}" --warmup 1 "${extra[@]}" | grep -E "backend cuda:|step |phase|GEMMs|GPU clock|energy|memory"
}
same_bits_rc() { # kda A, kda B: tests/cuda/same_bits.sh of the two, with recompute none, then selective
    for rc in null selective; do
        echo "== same_bits.sh, ${1##*/} against ${2##*/}, recompute_granularity=$rc"
        SAME_BITS_A_SET=recompute_granularity=$rc SAME_BITS_B_SET=recompute_granularity=$rc \
            timeout 90 bash tests/cuda/same_bits.sh "$1" "$2" | tail -1
    done
}
ops_ab() { # tag, size (300M_32, 1B_16: config and micro-batch x 2048), op-table pattern, builds...: the
    # configs' default-recompute step of each build in turn, two rounds, 8 timed steps, the step
    # line, the phases and the op rows matching the pattern; a build written kda@key=value runs
    # with `--set key=value` too
    local tag=$1 cfg=${2%_*} mb=${2#*_} pat=$3 r b f sets; shift 3
    for r in 1 2; do
        for b in "$@"; do
            echo "== $cfg ${mb}x2048, $b, round $r"
            sets=(); [[ $b == *@* ]] && sets=(--set "${b#*@}")
            f="$OUTDIR/${tag}_${cfg}_${b//[@=]/_}_$r.txt"
            timeout 120 $N/${b%%@*} bench configs/kda-$cfg.yaml --device cuda --set micro_batch_size=$mb \
                --set global_batch_size=$mb "${sets[@]}" --steps 8 --warmup 1 --all-ops > "$f" 2>&1
            grep -E "step |phase|$pat|energy" "$f"
        done
    done
}
fla_env() { # FLA from the carried wheels, Triton's cache carried between calls
    fla_wheels_install
    export TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1 PYTHONUNBUFFERED=1
    triton_cache_restore $N
}
parity_recorded() { # timeout (s), lines of its log shown[, spread]: the 150-step parity run of $N/kda
    # against the FLA run recorded in session 15 (FLA_METRICS: no FLA training here); with
    # "spread", the per-25-step spread beside session 17's kda and session 14's FLA
    local P_=${OUT:-/tmp/parity}
    fla_env
    GB=1 KDA=$N/kda DUMP=$N/dump_batches KDA_ALSO= \
        FLA_METRICS=bench/logs/parity_fla_metrics_2026-12-04_s15.jsonl timeout "$1" bash bench/parity_vs_fla.sh 2>&1 |
        tee "$OUTDIR/parity.txt" | grep -vE "^\s*$" | tail -"$2"
    [ "${3:-}" = spread ] && python3 bench/parity_spread.py bench/logs/parity_fla_metrics_2026-12-04_s15.jsonl \
        "$P_/kda_metrics.jsonl" bench/logs/parity_s17_p32_kda_metrics.jsonl bench/logs/parity_s14_fla_metrics.jsonl
    rm -rf "$P_/fla_init" "$P_/kda_init" "$P_/kda_train.log" "$P_"/kda_also*.log "$P_/batches.i32" # its own logs only
}
tests_on() { # build dir, steps, budget (s), log name, label: tests/cuda/run_device_tests.sh, its summary
    KDA_DEVICE_BIN=$1 KDA_DEVICE_STEPS=$2 KDA_DEVICE_BUDGET_S=$3 KDA_DEVICE_LOG=$4 \
        bash tests/cuda/run_device_tests.sh > /dev/null 2>&1
    grep -A20 "=== summary" "$OUTDIR/$4"; lap "$5"
}
both_builds() { # budgets (s) of the native and the portable build's tests
    tests_on $N ops,kda,step,decode,sanitizer "$1" device_log_native.txt "native device tests"
    tests_on $P ops,kda,step,decode "$2" device_log_ptx80.txt "portable (compute_80 PTX) device tests"
}
ncu_kda_kernels() { # [benchmark] [csv]: per-kernel times of the KDA core at 32 x 2048 (ncu), when ncu is
    # there; default this build's bench_kda_cuda into $OUTDIR/ncu_kda.csv
    command -v ncu >/dev/null || return 0
    local bin=${1:-bench_kda_cuda} csv=${2:-$OUTDIR/ncu_kda.csv}
    KDA_BENCH_ONCE=1 timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        --log-file "$csv" $N/$bin 32 > /dev/null 2>&1
    python3 bench/ncu_summary.py "$csv" --steps 2 | head -20; lap "ncu KDA kernels, $bin"
}
ncu_gemm_kernels() { # bench_gemm_cuda's gate/up kernels once each (ours, its variants, cuBLASLt + SwiGLU),
    # every metric per launch, when ncu is there: where our GEMM's time goes (tensor pipe, DRAM, L2)
    command -v ncu >/dev/null || return 0
    local m=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
    m=$m,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
    KDA_BENCH_ONLY="gate + up" KDA_BENCH_ONCE=1 timeout 120 ncu --clock-control none --csv --metrics "$m" \
        --log-file "$OUTDIR/ncu_gemm.csv" $N/bench_gemm_cuda > /dev/null 2>&1
    python3 bench/ncu_summary.py "$OUTDIR/ncu_gemm.csv" --all; lap "ncu, the gate/up kernels"
}
ncu_step_kernels() { # timeout (s), rows shown, label: per-kernel times of one 300M 32 x 2048 step (ncu;
    # warm-up, timed and profiled step), when ncu is there
    command -v ncu >/dev/null || return 0
    timeout "$1" ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$OUTDIR/ncu_step.csv" \
        $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=32 --set global_batch_size=32 \
        --steps 1 --warmup 1 > /dev/null 2>&1
    python3 bench/ncu_summary.py "$OUTDIR/ncu_step.csv" --steps 3 | head -"$2"; lap "$3"
}
core_vs_base() { # [sizes] [A] [B] [more...]: the KDA core at sizes x 2048 (16 32 64), A, B, ... in turn,
    # twice (default main's build carried as bench_kda_base, then this one's bench_kda_cuda)
    local a=${2:-bench_kda_base} b=${3:-bench_kda_cuda}
    local more=("${@:4}")
    for k in $a $b "${more[@]}" $a $b "${more[@]}"; do
        echo "== KDA core, $k"
        [ -x $N/$k ] && timeout 60 $N/$k ${1:-16 32 64} | grep "^ours"
    done
    lap "core A/B"
}
parts_vs_series() { # sizes, benchmark...: each given bench_kda_cuda of a series' first patches (device_prep.sh
    # EXTRA) per kernel (ncu) and in time against the whole series' bench_kda_cuda; absent ones skipped
    local sizes=$1; shift
    for k in "$@"; do
        [ -x $N/$k ] || continue
        ncu_kda_kernels $k /tmp/ncu_$k.csv
        core_vs_base "$sizes" $k bench_kda_cuda
    done
}
step_vs_base() { # the 300M 32 x 2048 step (the config's selective recompute): main's kda_base, then this kda, twice
    for k in kda_base kda kda_base kda; do [ -x $N/$k ] && bench300 $N/$k "300M 32x2048, selective (the config's), $k" ""; done
    lap "300M steps"
}
ncu_source() { # kernel regex, launches, name[, command]: ncu's full set on those kernels (default: the
    # KDA core's at 32 x 2048), its details ($OUTDIR/ncu_<name>_details.txt) and each kernel's SASS
    # with its stall samples (<name>_sass.csv.gz)
    command -v ncu >/dev/null || return 0
    KDA_BENCH_ONCE=1 timeout 150 ncu --clock-control none --set full --import-source yes \
        -k "regex:$1" -c "$2" -o "/tmp/$3_full" ${4:-$N/bench_kda_cuda 32} > "/tmp/ncu_$3.log" 2>&1
    tail -n 3 "/tmp/ncu_$3.log"
    ncu --import "/tmp/$3_full.ncu-rep" --page details > "$OUTDIR/ncu_$3_details.txt" 2>&1
    local keys="^  [a-z_]+|Duration|Throughput|Achieved Occupancy|Registers Per|Issue Slots|Eligible Warps|Stall"
    grep -E "$keys|Warp Cycles|Issued Warp" "$OUTDIR/ncu_$3_details.txt" | head -60
    ncu --import "/tmp/$3_full.ncu-rep" --page source --csv --print-source sass 2>/dev/null |
        gzip -c > "$OUTDIR/$3_sass.csv.gz"
    lap "ncu full set, $3"
}
decode_with_and_without_ours() { # the decode test with our GEMM on every product it takes, then off
    # (its decoder-vs-full-forward error grew to 3.9e-2 in session 31's run of next-s43)
    for s in 1 0; do
        echo "== test_cuda_decode, KDA_GEMM_SM90=$s"
        KDA_GEMM_SM90=$s timeout 60 $N/test_cuda_decode 2>&1 | grep -E "full forward|passed|failed"
    done
}
ncu_core_source() { ncu_source "kda_finish|kda_intra|kda_bwd_d3" 3 core; } # the core's fused kernels
ncu_swiglu_source() { KDA_BENCH_ONLY="SwiGLU" ncu_source "gemm_sm90_kernel" 3 swiglu $N/bench_gemm_cuda; } # fused GEMM
kda_step_table() { # kda's side of bench/step_vs_fla.sh (300M 16, 32; 1B 16): steps, phases, memory
    STEP_SIDES=kda STEPS=5 bash bench/step_vs_fla.sh > /dev/null 2>&1
    grep -vE "^$" "$OUTDIR/step_vs_fla_kda.txt" | grep -E "==|step |phase|GEMMs|memory|peak|\|"; lap "kda step table"
}
clocks_during() { # label, command...: the SM clock and power while the command runs (GEMMs alone run
    # ~20% faster than inside the step: throttling under the step's sustained load?)
    local label=$1; shift
    nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 > "$OUTDIR/clocks.csv" &
    local smi=$!
    "$@"
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
    python3 - "$OUTDIR/clocks.csv" "$label" <<'PY'
import sys, statistics
rows = [l.split(",") for l in open(sys.argv[1]) if l.count(",") == 1]
mhz = sorted(float(a) for a, b in rows); w = sorted(float(b) for a, b in rows)
if rows: print(f"  {sys.argv[2]}: SM clock median {statistics.median(mhz):.0f} MHz (min {mhz[0]:.0f}), power median {statistics.median(w):.0f} W (max {w[-1]:.0f}), {len(rows)} samples")
busy = sorted(float(a) for a, b in rows if float(b) > 300)  # the steps themselves, not start-up
if busy: print(f"  while drawing over 300 W ({len(busy)} samples): SM clock median {statistics.median(busy):.0f} MHz, min {busy[0]:.0f}")
PY
}
core_ab_checks() { # [same_bits settings] [core sizes]: a KDA-core change that keeps every bit, against main
    # (kda_base, bench_kda_base): the device tests (racecheck too), same_bits.sh as it is and with
    # each setting (default: each scan width), the core per kernel (ncu) and in time (default 8-64 x 2048)
    local abs=${1:-KDA_SCAN_VT=16 KDA_SCAN_VT=64} sizes=${2:-8 16 32 64}
    KDA_RACECHECK=1 tests_on $N kda,step,decode,sanitizer 120 device_log_native.txt \
        "native device tests (core, step, decode, memcheck, racecheck)"
    grep -E "FAIL" "$OUTDIR/device_log_native.txt" | head -12
    echo "== same_bits.sh: main (kda_base) against this build, then with each of: $abs"
    timeout 100 bash tests/cuda/same_bits.sh $N/kda_base $N/kda 2>&1 | tail -1
    for ab in $abs; do
        printf '#!/bin/sh\n%s exec %s "$@"\n' "$ab" "$PWD/$N/kda" > /tmp/kda_ab
        chmod +x /tmp/kda_ab
        timeout 100 bash tests/cuda/same_bits.sh $N/kda_base /tmp/kda_ab 2>&1 | tail -1
    done
    lap "tests, same bits"
    ncu_kda_kernels bench_kda_base /tmp/ncu_base.csv
    ncu_kda_kernels
    core_vs_base "$sizes"
}
case "$1" in
n) # session 17's first call: next/s17 (the 3-blocks fused kernels, selective recompute fused into
    # the backward ops, core_prep) built as build/cuda-device with main's kda kept as kda_base
    # (~9 min: the portable build's tests run in r)
    tests_on $N ops,kda,step,decode,sanitizer 200 device_log_native.txt "native device tests"
    echo "== test_cuda_kda with KDA_CORE_UNFUSED=1 (the D3 chunk-GEMM path)"
    KDA_CORE_UNFUSED=1 timeout 60 $N/test_cuda_kda 2>&1 | grep -E "FAIL|passed|failed" | tail -5
    echo "== KDA core, fused (default) then KDA_CORE_UNFUSED=1"
    timeout 60 $N/bench_kda_cuda 8 16 32 64 | grep "^ours"
    KDA_CORE_UNFUSED=1 timeout 60 $N/bench_kda_cuda 16 32 | grep "^ours"
    [ -x $N/bench_ops_cuda ] && timeout 60 $N/bench_ops_cuda | grep -E "rmsnorm|swiglu|lm_head|GB/s|copy"
    lap "KDA core and op benchmarks"
    ncu_kda_kernels
    kda_step_table
    KDA_CE_TWO_PASS=1 bench300 $N "300M 32x2048, the two-pass cross-entropy rows (KDA_CE_TWO_PASS=1)" ""
    lap "cross-entropy A/B"
    ;;
z3)
    tests_on $N ops,kda,step,nccl,decode,sanitizer 150 device_log_native.txt "native device tests"
    parity_recorded 150 8 spread
    lap "loss parity vs the recorded FLA run"
    for k in kda_base kda kda_base kda; do bench300 $N/$k "300M 32x2048, selective (the config's), $k" ""; done
    lap "300M steps"
    for k in kda_base kda; do
        echo "== 1B 16x2048, selective (the config's), $k"
        timeout 120 $N/$k bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
            --steps 3 --warmup 1 | grep -E "step |phase|GEMMs|memory"
    done
    lap "1B steps"
    timeout 60 $N/bench_ops_cuda | grep -E "copy|rmsnorm|conv|swiglu|lm_head|cross"
    timeout 60 $N/bench_kda_cuda 8 16 32 64 | grep "^ours"
    lap "op benchmarks, core"
    ncu_core_source
    ;;
z4)
    tests_on $N ops,kda,step,nccl,decode,sanitizer 150 device_log_native.txt "native device tests"
    echo "== nccl_one_rank.sh on main's kda (kda_base)"
    timeout 100 bash tests/cuda/nccl_one_rank.sh $N/kda_base 2>&1 | grep -E "^(ok|FAIL)|differs" | cut -c1-160
    lap "NCCL one rank on main"
    parity_recorded 150 4
    lap "loss parity vs the recorded FLA run"
    for k in kda_base kda; do bench300 $N/$k "300M 32x2048, selective (the config's), $k" ""; done
    lap "300M steps"
    ;;
p20)
    tests_on $N kda,step,decode,sanitizer 140 device_log_native.txt "native device tests (core, step, decode, memcheck)"
    core_vs_base
    ncu_kda_kernels
    parity_recorded 150 4
    lap "loss parity vs the recorded FLA run"
    step_vs_base
    ;;
p22) # session 22's record: KDA_CE_CLUSTER=4 and KDA_CONV_RF=8 were A/Bs of next-s22, dropped
    # after this call (main reads neither value now; its runs with them are main's default)
    KDA_RACECHECK=1 tests_on $N ops,kda,step,decode,sanitizer 170 device_log_native.txt \
        "native device tests (ops, core, step, decode, memcheck, racecheck)"
    echo "== bench_ops_cuda (CE rows: the default two blocks a row, one block, four blocks)"
    timeout 60 $N/bench_ops_cuda | grep -E "copy|conv|lm_head_ce"
    echo "== bench_ops_cuda, KDA_CONV_RF=8"
    KDA_CONV_RF=8 timeout 60 $N/bench_ops_cuda | grep -E "conv_silu_fwd"
    lap "op benchmarks"
    echo "== test_cuda_ops with KDA_CONV_RF=8 (the conv forward at 8 steps a thread)"
    KDA_CONV_RF=8 timeout 90 $N/test_cuda_ops 2>&1 | grep -E "FAIL|passed|failed" | tail -4
    for tool in memcheck; do # the four-block rows (distributed shared memory) under the sanitizer
        echo "== compute-sanitizer $tool: kda bench, tiny model, KDA_CE_CLUSTER=4"
        KDA_CE_CLUSTER=4 timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 $N/kda bench configs/tiny.yaml \
            --device cuda --steps 1 --warmup 0 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|step |rror" | head -5
        echo "   exit ${PIPESTATUS[0]}"
    done
    lap "CE rows and conv checks"
    for run in base 2 4 base 2 4; do # main's kda (kda_base), then this one with each row kernel
        if [ $run = base ]; then
            [ -x $N/kda_base ] && bench300 $N/kda_base "300M 32x2048, selective, main's kda (kda_base)" ""
        else
            KDA_CE_CLUSTER=$run bench300 $N "300M 32x2048, selective, KDA_CE_CLUSTER=$run" ""
        fi
    done
    lap "300M steps"
    parity_recorded 150 4
    lap "loss parity vs the recorded FLA run (the prep's rsqrt and decays)"
    KDA_CE_CLUSTER=4 parity_recorded 150 4
    lap "loss parity vs the recorded FLA run, KDA_CE_CLUSTER=4"
    ;;
p23) # next-s23 (sessions 22-23, not run on a GPU before): q22's checks of its same-bits patch
    # (kda_base / bench_kda_base: main's build), the cross-entropy A/B KDA_CE_EXP_ONCE=1, the conv A/B KDA_CONV_STREAM=1
    # (a record: never run as such; session 24 ran p25 instead, and both A/B variables are gone)
    Q22_SLIM=1 bash "$0" q22 2>&1 | grep -v "^device_session q22"
    echo "== test_cuda_ops (the CE and conv A/Bs inside; its log: test_cuda_ops.txt)"
    timeout 90 $N/test_cuda_ops > "$OUTDIR/test_cuda_ops.txt" 2>&1
    grep -E "FAIL|passed|failed" "$OUTDIR/test_cuda_ops.txt" | tail -8
    echo "   EXP_ONCE checks passed: $(grep -c "ok .*EXP_ONCE" "$OUTDIR/test_cuda_ops.txt")"
    # (bench_ops_cuda reaches its CE rows only after ~60 s: the step's CE phase below measures it)
    for run in 0 1 0 1; do
        KDA_CE_EXP_ONCE=$run bench300 $N "300M 32x2048, selective, KDA_CE_EXP_ONCE=$run" ""
    done
    lap "CE A/B in the step"
    # the conv stream kernels' A/B (KDA_CONV_STREAM=1; meant to keep every bit): test_cuda_ops above
    # compared them with the default kernels; the whole step's bits, the conv rows, the step
    printf '#!/bin/sh\nKDA_CONV_STREAM=1 exec %s "$@"\n' "$PWD/$N/kda" > /tmp/kda_conv_stream
    chmod +x /tmp/kda_conv_stream
    echo "   conv stream checks passed: $(grep -c "ok .*conv stream" "$OUTDIR/test_cuda_ops.txt") (of 21)"
    timeout 60 bash tests/cuda/same_bits.sh $N/kda /tmp/kda_conv_stream 2>&1 | tail -3
    KDA_BENCH_ONLY=conv_silu timeout 60 $N/bench_ops_cuda 2>&1 | grep -E "^(copy|conv_silu)"
    for run in 1 0; do
        KDA_CONV_STREAM=$run bench300 $N "300M 32x2048, selective, KDA_CONV_STREAM=$run" ""
    done
    lap "conv stream A/B"
    KDA_CE_EXP_ONCE=1 parity_recorded 150 4
    lap "loss parity vs the recorded FLA run, KDA_CE_EXP_ONCE=1"
    ;;
p25) # session 24's one call for next-s23, next-s24, next-s25 and next-s26 together (machines were
    # scarce: one start for all). This build: next/s26 (all four series); kda_base / bench_kda_base:
    # main; kda_s23: next/s23's kda. (A record: the A/B variables and the prep-grid checks it counts
    # are gone since; bench/RESULTS.md "Session 24" has what it measured.) Order: tests, the bit comparisons, the core and the step A/Bs,
    # the conv rows, ncu per kernel, the parity run with the cross-entropy A/B (which changes bits)
    KDA_RACECHECK=1 tests_on $N ops,kda,step,decode,sanitizer 170 device_log_native.txt \
        "native device tests (ops, core, step, decode, memcheck, racecheck)"
    L_=$OUTDIR/device_log_native.txt
    echo "   EXP_ONCE checks passed: $(grep -c "ok .*EXP_ONCE" $L_); conv stream checks passed: $(grep -c "ok .*conv stream" $L_) (of 21); prep grid checks passed: $(grep -c "ok .*prep on" $L_) (of 16)"
    grep -E "FAIL" $L_ | head -5
    echo "== same_bits.sh: main (kda_base) against next/s23 (kda_s23): the prep's v loads, the row loops"
    timeout 100 bash tests/cuda/same_bits.sh $N/kda_base $N/kda_s23 2>&1 | tail -1
    echo "== same_bits.sh: next/s23 (kda_s23) against this build: ex2 decays, the persistent prep, the chunk GEMM"
    timeout 100 bash tests/cuda/same_bits.sh $N/kda_s23 $N/kda 2>&1 | tail -1
    printf '#!/bin/sh\nKDA_CONV_STREAM=1 exec %s "$@"\n' "$PWD/$N/kda" > /tmp/kda_conv_stream
    chmod +x /tmp/kda_conv_stream
    echo "== same_bits.sh: this build against itself with KDA_CONV_STREAM=1"
    timeout 100 bash tests/cuda/same_bits.sh $N/kda /tmp/kda_conv_stream 2>&1 | tail -1
    lap "tests, same bits"
    SLIM_=${P25_SLIM:-} # P25_SLIM=1 (little device time left): one round of each A/B, no conv rows, no ncu
    if [ -n "$SLIM_" ]; then
        for k in bench_kda_base bench_kda_cuda; do echo "== KDA core, $k"; timeout 60 $N/$k 16 32 64 | grep "^ours"; done
    else
        core_vs_base
    fi
    for run in base 0 1 ${SLIM_:+x} base 0 1; do # the step: main, this build, this build with KDA_CE_EXP_ONCE=1
        [ "$run" = x ] && break
        if [ $run = base ]; then
            bench300 $N/kda_base "300M 32x2048, selective, main's kda (kda_base)" ""
        else
            KDA_CE_EXP_ONCE=$run bench300 $N "300M 32x2048, selective, this build, KDA_CE_EXP_ONCE=$run" ""
        fi
    done
    for run in 1 0; do
        KDA_CONV_STREAM=$run bench300 $N "300M 32x2048, selective, this build, KDA_CONV_STREAM=$run" ""
        [ -n "$SLIM_" ] && break
    done
    lap "300M steps"
    [ -n "$SLIM_" ] || for run in 0 1; do
        echo "== conv rows, KDA_CONV_STREAM=$run"
        KDA_CONV_STREAM=$run KDA_BENCH_ONLY=conv_silu timeout 60 $N/bench_ops_cuda 2>&1 | grep -E "^(copy|conv_silu)"
    done
    lap "conv rows"
    [ -n "$SLIM_" ] || for k in bench_kda_base bench_kda_cuda; do # per kernel: prep, intra, finish, B7 before and after
        echo "== ncu, $k"
        KDA_BENCH_ONCE=1 timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --csv \
            --log-file "$OUTDIR/ncu_kda_$k.csv" $N/$k 32 > /dev/null 2>&1
        python3 bench/ncu_summary.py "$OUTDIR/ncu_kda_$k.csv" --steps 2 | head -14
    done
    lap "ncu KDA kernels, main and this"
    KDA_CE_EXP_ONCE=1 parity_recorded 150 4
    lap "loss parity vs the recorded FLA run, this build with KDA_CE_EXP_ONCE=1"
    ;;
p24) # next-s24 (session 23, after next-s23): decay_exp by ex2.approx.ftz, the same bits but for
    # decays below 2^-126: q22's checks with kda_base / bench_kda_base = next-s23's build, then the
    # parity run (in case same_bits.sh shows a subnormal decay's difference)
    Q22_SLIM=1 bash "$0" q22 2>&1 | grep -v "^device_session q22"
    parity_recorded 150 4
    lap "loss parity vs the recorded FLA run"
    ;;
q22) # session 22: the prep's v loads issued with q, k, f; B7's and the l2norm backward's rows 4 at
    # a time (all the same bits: kda_base and bench_kda_base are main f507ab5 here); then n22
    tests_on $N kda,step 120 device_log_native.txt "native device tests (core, step)"
    echo "== same_bits.sh: main's kda (kda_base) against this build (K 32, V 64; then unfused D3)"
    timeout 100 bash tests/cuda/same_bits.sh $N/kda_base $N/kda 2>&1 | tail -3
    KDA_CORE_UNFUSED=1 timeout 100 bash tests/cuda/same_bits.sh $N/kda_base $N/kda 2>&1 | tail -1
    lap "tests, same bits"
    core_vs_base
    for k in bench_kda_base bench_kda_cuda; do # per kernel: prep, D3, finish before and after
        echo "== ncu, $k"
        KDA_BENCH_ONCE=1 timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
            --log-file "$OUTDIR/ncu_kda_$k.csv" $N/$k 32 > /dev/null 2>&1
        python3 bench/ncu_summary.py "$OUTDIR/ncu_kda_$k.csv" --steps 2 | head -14
    done
    lap "ncu KDA kernels, main and this"
    step_vs_base
    [ -n "${Q22_SLIM:-}" ] || ncu_core_source # Q22_SLIM=1: without the ~150 s profile
    ;;
n22) # where the finish, intra and D3 kernels stall now (their SASS changed in session 21); the
    # core's and the step's per-kernel tables on this card
    ncu_core_source
    ncu_kda_kernels
    ncu_step_kernels 170 45 "ncu per-kernel table of a step"
    ;;
m24) # main after session 24 (its hand edits after the p25 call: the one cluster CE kernel, the
    # stream conv forward at W = 4, test_conv_fwd_bits, the prep back to bf3b5fa's): every native
    # device test with memcheck and racecheck, the core's per-kernel table (ncu), the 300M step;
    # then fk23 (FLA's chunk_kda kernel by kernel), ~7 minutes with FLA's Triton compilation
    KDA_RACECHECK=1 tests_on $N ops,kda,step,decode,sanitizer 170 device_log_native.txt \
        "native device tests (ops, core, step, decode, memcheck, racecheck)"
    grep -E "FAIL|conv_silu_fwd W=4" "$OUTDIR/device_log_native.txt" | head -8
    bench300 $N "300M 32x2048, selective (the config's)" ""
    lap "300M step"
    bash "$0" fk23 2>&1 | grep -v "^device_session fk23"
    ;;
fk23) # FLA's chunk_kda kernel by kernel (ncu) at 32 x 2048 beside ours: FLA's forward is ~1.5x
    # faster than ours at 64 x 2048 (1.49 vs 2.32 ms, sessions 13/21) while its backward is not;
    # which of its kernels does what ours does in less time. Triton's cache returns in $OUT
    ncu_kda_kernels
    fla_env
    if command -v ncu >/dev/null; then
        timeout 420 ncu --clock-control none --metrics gpu__time_duration.sum --csv --profile-from-start off \
            --log-file "$OUTDIR/ncu_fla_kda.csv" python3 tests/cuda/fla_kda_compare.py profile 32 2>&1 | tail -2
        triton_cache_save "$OUTDIR"
        python3 bench/ncu_summary.py "$OUTDIR/ncu_fla_kda.csv" | head -32
        lap "ncu FLA chunk_kda, one forward + backward"
    fi
    ;;
s29) # next/s29 (session 25): the state scans at 64 value columns a block (KDA_SCAN_VT=64, an A/B),
    # one expf a key column and the backward's dVn rows in one buffer (the same bits); this build =
    # next/s29, kda_base / bench_kda_base = main's.
    # Few files in $OUT (the device tool returns only so many)
    KDA_RACECHECK=1 tests_on $N kda,step,decode,sanitizer 120 device_log_native.txt \
        "native device tests (core, step, decode, memcheck, racecheck)"
    grep -E "FAIL|KDA_SCAN_VT" "$OUTDIR/device_log_native.txt" | head -12
    echo "== same_bits.sh: main (kda_base) against this build, then with KDA_SCAN_VT=64"
    timeout 100 bash tests/cuda/same_bits.sh $N/kda_base $N/kda 2>&1 | tail -1
    printf '#!/bin/sh\nKDA_SCAN_VT=64 exec %s "$@"\n' "$PWD/$N/kda" > /tmp/kda_ab
    chmod +x /tmp/kda_ab
    timeout 100 bash tests/cuda/same_bits.sh $N/kda_base /tmp/kda_ab 2>&1 | tail -1
    lap "tests, same bits"
    ncu_kda_kernels bench_kda_base /tmp/ncu_base.csv
    for vt in "" 32 64; do
        echo "== ncu, the core at 32 x 2048, this build, KDA_SCAN_VT=${vt:-default (32 forward, 16 backward)}"
        KDA_SCAN_VT=$vt ncu_kda_kernels
        rm -f "$OUTDIR/ncu_kda.csv"
    done
    for vt in base "" 64 base "" 64; do
        if [ "$vt" = base ]; then
            echo "== KDA core, main (bench_kda_base)"
            timeout 60 $N/bench_kda_base 16 32 64 | grep "^ours"
            continue
        fi
        echo "== KDA core, this build, KDA_SCAN_VT=${vt:-default}"
        KDA_SCAN_VT=$vt timeout 60 $N/bench_kda_cuda 16 32 64 | grep "^ours"
    done
    lap "core, scan widths"
    for k in "kda_base " "kda " "kda 64" "kda_base " "kda " "kda 64"; do
        set -- $k
        KDA_SCAN_VT=${2:-} bench300 $N/$1 "300M 32x2048, selective, $1, KDA_SCAN_VT=${2:-default}" ""
    done
    lap "300M steps"
    ;;
s30) # next/s31 (session 25, prepared): β·v no longer stored by the prep (its readers scale v's rows
    # by β as they stage them) and the scans' per-element loops 8 columns a thread (both the same
    # bits); this build = next/s31, kda_base / bench_kda_base = main's
    core_ab_checks KDA_CORE_UNFUSED=1 "16 32 64" # unfused: the scaled β·v view
    ncu_source kda_scan 2 scans # the scans' stall profile at 32 x 2048 (64 columns): what next
    step_vs_base
    # test_mem_plan's table (its plans shrink without β·v): plan and peak of each row, for its update
    for row in "300M none 16" "300M none 32" "300M selective 32" "300M selective+core_prep 32" "300M full 32" \
        "1B none 16" "1B selective4 16"; do
        set -- $row
        extra=(--set recompute_granularity=${2%%+*}); [ "$2" = none ] && extra=(--set recompute_granularity=null)
        [ "$2" = selective+core_prep ] && extra+=(--set "recompute_modules=[layernorm,conv,swiglu,gated_norm,core_prep]")
        [ "$2" = selective4 ] && extra=(--set recompute_granularity=selective --set "recompute_modules=[layernorm,conv,swiglu,gated_norm]")
        echo "== memory, kda-$1 $2 x $3"
        timeout 150 $N/kda bench configs/kda-$1.yaml --device cuda --set micro_batch_size=$3 --set global_batch_size=$3 \
            "${extra[@]}" --steps 1 --warmup 1 2>&1 | grep -E "memory planned|peak"
    done
    lap "memory table"
    ;;
t22) # main as it is: issue 17's table, kda's side (then t22f: FLA's, on the same card type; join
    # the two logs with bench/step_table.py); the SM clock and power through 24 steps (are the
    # step's GEMMs, ~13% slower than alone, held back by the 700 W cap?); the step's per-kernel table
    kda_step_table
    clocks_during "300M 32x2048, 24 steps" timeout 150 $N/kda bench configs/kda-300M.yaml --device cuda \
        --set micro_batch_size=32 --set global_batch_size=32 --steps 24 --warmup 1
    lap "clocks through 24 steps"
    ncu_step_kernels 170 40 "ncu per-kernel table of a step"
    ;;
t22f) # FLA's side of issue 17's table (its Triton compilation alone takes ~5 minutes)
    fla_env
    STEP_SIDES=fla STEPS=5 timeout 560 bash bench/step_vs_fla.sh > /dev/null 2>&1
    grep -vE "^$" "$OUTDIR/step_vs_fla_fla.txt" | grep -E "==|step |peak|^FLA|\|"; lap "FLA step table"
    triton_cache_save "$OUTDIR" # its parts into build/cuda-device/ make the next FLA call ~5 minutes shorter
    ;;
s21)
    KDA_RACECHECK=1 tests_on $N ops,kda,step,decode,sanitizer 170 device_log_native.txt \
        "native device tests (ops, core, step, decode, memcheck, racecheck)"
    parity_recorded 150 4
    lap "loss parity vs the recorded FLA run"
    for b in bench_ops_base bench_ops_cuda; do
        echo "== $b"
        timeout 60 $N/$b | grep -E "copy|gated|conv|swiglu"
    done
    lap "op benchmarks"
    step_vs_base
    ;;
p21)
    if command -v cuobjdump >/dev/null; then # whether the fragment loads became ldmatrix: per kernel
        for bin in $N/bench_kda_base $N/bench_kda_cuda; do
            echo "== SASS of $bin: LDSM, MOVM, generic LD per KDA kernel"
            cuobjdump -sass $bin 2>/dev/null | awk '/Function :/{f=$3} /LDSM/{a[f]++} /MOVM/{m[f]++}
                / LD\./{g[f]++} END{for(k in a)if(k~/kda/)print "  "k, a[k]+0, m[k]+0, g[k]+0; for(k in m)if(!(k in a)&&k~/kda/)print "  "k, 0, m[k], g[k]+0}'
        done
    fi
    KDA_RACECHECK=1 tests_on $N kda,step,decode,sanitizer 150 device_log_native.txt \
        "native device tests (core, step, decode, memcheck, racecheck)"
    echo "== test_cuda_kda with KDA_CORE_UNFUSED=1 (D3 as chunk GEMMs, then kda_b6_b7_kernel)"
    KDA_CORE_UNFUSED=1 timeout 90 $N/test_cuda_kda 2>&1 | grep -E "FAIL|passed|failed" | tail -4
    echo "== same_bits.sh: main's kda (kda_base) against this build (K 32, V 64; then unfused D3; then K 64, V 128)"
    timeout 100 bash tests/cuda/same_bits.sh $N/kda_base $N/kda 2>&1 | tail -3
    KDA_CORE_UNFUSED=1 timeout 100 bash tests/cuda/same_bits.sh $N/kda_base $N/kda 2>&1 | tail -1
    SAME_BITS_A_SET=head_dim=64 SAME_BITS_B_SET=head_dim=64 timeout 100 bash tests/cuda/same_bits.sh $N/kda_base $N/kda 2>&1 | tail -1
    lap "tests, same bits"
    core_vs_base
    ncu_kda_kernels
    step_vs_base
    ;;
i20)
    tests_on $N kda,step,decode,sanitizer 120 device_log_native.txt "native device tests (core, step, decode, memcheck)"
    echo "== same_bits.sh: main's kda (kda_base) against this build"
    timeout 120 bash tests/cuda/same_bits.sh $N/kda_base $N/kda 2>&1 | tail -6
    lap "same bits"
    core_vs_base
    ncu_kda_kernels
    step_vs_base
    ;;
z2)
    tests_on $N ops,kda,step,nccl,decode,sanitizer 100 device_log_native.txt "native device tests"
    parity_recorded 100 6 spread
    lap "loss parity vs the recorded FLA run"
    for k in kda_base kda; do [ -x $N/$k ] && bench300 $N/$k "300M 32x2048, selective (the config's), $k" ""; done
    lap "300M steps"
    timeout 60 $N/bench_ops_cuda | grep -E "copy|rmsnorm_bwd|conv|swiglu|lm_head"
    lap "op benchmarks"
    ;;
z)
    tests_on $N ops,kda,step,nccl,decode,sanitizer 150 device_log_native.txt "native device tests"
    parity_recorded 200 12 spread
    lap "loss parity vs the recorded FLA run"
    for k in kda_base kda_gu kda; do
        [ -x $N/$k ] && bench300 $N/$k "300M 32x2048, selective (the config's), $k" ""
    done
    lap "300M steps"
    timeout 60 $N/bench_ops_cuda | grep -E "copy|rmsnorm|conv|swiglu|summary|total"
    lap "op benchmarks"
    for k in kda_base kda; do
        [ -x $N/$k ] || continue
        echo "== 1B 16x2048, selective (the config's), $k"
        timeout 120 $N/$k bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
            --steps 3 --warmup 1 | grep -E "step |phase|GEMMs|memory"
    done
    timeout 60 $N/bench_kda_cuda 32 | grep "^ours"
    lap "1B steps, core"
    bench300 $N "300M 32x2048, no recompute, kda" recompute_granularity=null
    lap "300M without recompute"
    if command -v ncu >/dev/null && [ $((SECONDS - t0)) -lt "${ZNCU_BEFORE_S:-300}" ]; then
        KDA_BENCH_ONCE=1 timeout 60 ncu --clock-control none -k "regex:kda_finish|kda_intra|kda_bwd_d3" -c 6 \
            --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
            $N/bench_kda_cuda 32 > "$OUTDIR/ncu_core_sections.txt" 2>&1
        grep -E "^  [a-z_]+|Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles" \
            "$OUTDIR/ncu_core_sections.txt" | head -60
        lap "ncu sections of the core's kernels"
    fi
    ;;
y)
    tests_on $N ops,kda,step,decode,sanitizer 200 device_log_native.txt "native device tests"
    parity_recorded 300 30 # its cleanup leaves kda_metrics.jsonl, which the spreads read
    P_=${OUT:-/tmp/parity}
    python3 bench/parity_spread.py bench/logs/parity_fla_metrics_2026-12-04_s15.jsonl "$P_/kda_metrics.jsonl" \
        bench/logs/parity_s17_kda_metrics.jsonl bench/logs/parity_s14_fla_metrics.jsonl
    python3 bench/parity_spread.py bench/logs/parity_s14_fla_metrics.jsonl "$P_/kda_metrics.jsonl" \
        bench/logs/parity_s17_kda_metrics.jsonl
    lap "loss parity vs the recorded FLA runs"
    timeout 60 $N/bench_kda_cuda 16 32 | grep "^ours"
    [ -x $N/bench_ops_cuda ] && timeout 60 $N/bench_ops_cuda | grep -E "copy|conv|rmsnorm"
    bench300 $N "300M 32x2048, the config's selective recompute" ""
    bench300 $N "300M 32x2048, no recompute" recompute_granularity=null
    lap "KDA core and steps"
    [ "${YNCU:-1}" = 1 ] && ncu_step_kernels 150 45 "ncu per-kernel times"
    ;;
r)
    tests_on $P ops,kda,step,decode 130 device_log_ptx80.txt "portable (compute_80 PTX) device tests"
    bench300 $N "300M 32x2048, no recompute" ""
    bench300 $N "300M 32x2048, recompute selective (default set)" recompute_granularity=selective
    D=layernorm,conv,swiglu,gated_norm
    for set in "[$D,core_prep]" "[$D,core_prep,kda_gates]" "[$D,core_prep,kda_gates,o_proj]" \
        "[$D,core_prep,kda_gates,o_proj,in_proj]" "[$D,kda_gates,o_proj]" "[layernorm,conv,gated_norm]"; do
        bench300 $N "300M 32x2048, recompute selective $set" \
            "recompute_granularity=selective recompute_modules=$set"
    done
    bench300 $N "300M 32x2048, no recompute (again)" ""
    bench300 $N "300M 32x2048, recompute full" recompute_granularity=full
    echo "== 1B 16x2048, recompute selective"
    timeout 120 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
        --set recompute_granularity=selective --steps 3 --warmup 1 | grep -E "step |phase|memory"
    lap "recompute sets (and test_mem_plan's full and 1B selective peaks)"
    ;;
q)
    fla_env
    GB=1 KDA=$N/kda DUMP=$N/dump_batches KDA_ALSO="${KDA_BASE:-$N/kda_base}" \
        FLA_METRICS=bench/logs/parity_fla_metrics_2026-12-04_s15.jsonl timeout 400 bash bench/parity_vs_fla.sh 2>&1 |
        tee "$OUTDIR/parity.txt" | grep -vE "^\s*$" | tail -34
    python3 - "${OUT:-/tmp/parity}/kda_metrics.jsonl" "${OUT:-/tmp/parity}/kda_also1.jsonl" <<'PY'
import json, sys
rd = lambda f: [r["loss"] for r in map(json.loads, open(f)) if "iteration" in r and "loss" in r]
a, b = rd(sys.argv[1]), rd(sys.argv[2])
diff = [i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y]
print(f"kda against KDA_BASE, {len(a)} / {len(b)} steps: " +
      ("losses identical to the bit" if len(a) == len(b) and not diff else f"losses differ from step {diff[0] if diff else '-'}"))
PY
    lap "loss parity vs the recorded FLA run"
    ;;
c)
    fla_env
    timeout 400 python3 tests/cuda/fla_kda_compare.py all $N 16 32 2>&1 | tail -16; lap "KDA core vs FLA (native)"
    ;;
u)
    KDA_RACECHECK=1 both_builds 200 120
    timeout 60 $N/bench_kda_cuda 8 16 32 64 | grep "^ours"; lap "KDA core speed"
    ncu_kda_kernels
    kda_step_table
    bench300 $N "300M 32x2048, default" ""
    bench300 $N "300M 32x2048, recompute selective" recompute_granularity=selective
    bench300 $N "300M 32x2048, recompute full" recompute_granularity=full
    echo "== 1B 16x2048, recompute selective"
    timeout 120 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
        --set recompute_granularity=selective --steps 3 --warmup 1 | grep -E "step |phase|memory"
    lap "recompute"
    ;;
s)
    KDA_RACECHECK=1 both_builds 200 120
    for vt in 16 32; do
        echo "== test_cuda_kda with KDA_SCAN_VT=$vt"
        KDA_SCAN_VT=$vt timeout 60 $N/test_cuda_kda 2>&1 | grep -E "FAIL|passed|failed" | tail -5
    done
    echo "== KDA core: default scan widths (forward 32, backward 16), then both 16, both 32"
    timeout 60 $N/bench_kda_cuda 8 16 32 64 | grep "^ours"
    for vt in 16 32; do KDA_SCAN_VT=$vt timeout 60 $N/bench_kda_cuda 32 | grep "^ours"; done
    lap "KDA core tests and speed"
    ncu_kda_kernels
    kda_step_table
    clocks_during "300M 32x2048 steps" bench300 $N "300M 32x2048 (clocks)" ""
    bench300 $N "300M 32x2048, recompute selective (default modules)" recompute_granularity=selective
    bench300 $N "300M 32x2048, recompute selective without conv" \
        "recompute_granularity=selective recompute_modules=[layernorm,swiglu,gated_norm]"
    lap "recompute variants"
    ;;
v36) # session 36, after session 35's MLP backward in place (main 1fd75ec) and the step profile by
    # op: the device tests (ops, step: the profile's op table adds up to its phases), the 150-step
    # parity run against the recorded FLA run, its losses and gradient norms against session 27's
    # kda run (the same bits since session 24, so equal lines mean the in-place MLP kept them), and
    # same_bits.sh: this build against itself (run to run) and against c5e17b0's kda (kda_base)
    tests_on $N ops,step 120 device_log_native.txt "device tests (ops, step)"
    parity_recorded 150 6
    python3 - "${OUT:-/tmp/parity}/kda_metrics.jsonl" bench/logs/parity_s27_s37_kda_metrics.jsonl <<'PYEOF'
import json, sys
rows = [[(r["iteration"], r["loss"], r["grad_norm"]) for r in map(json.loads, open(f)) if "loss" in r] for f in sys.argv[1:]]
diff = [a for a, b in zip(*rows) if a != b]
print(f"parity losses and grad norms against session 27's run: {len(rows[0])} / {len(rows[1])} iterations, "
      f"{len(diff)} differ" + (f" (first: {diff[0]})" if diff else " (the same bits)"))
PYEOF
    lap "loss parity vs the recorded FLA run"
    echo "== same_bits.sh: this build twice"; timeout 90 bash tests/cuda/same_bits.sh $N/kda $N/kda | tail -2
    echo "== same_bits.sh: c5e17b0 (kda_base) against this build"; timeout 90 bash tests/cuda/same_bits.sh $N/kda_base $N/kda | tail -2
    lap "same bits"
    ;;
ts) # the device tests a host-side or model change needs (ops, whole step), before a table
    tests_on $N ops,step 120 device_log_native.txt "device tests (ops, step)"
    ;;
k1) # bench/pending/kda-core-spans (session 36; no device time was left to run it): the KDA core's
    # kernels as spans of their own in kda bench's op table ("kda_bwd: finish"), on a build with
    # the patch applied: the device tests, then the 300M 32 x 2048 step's full table with the default set and
    # without recompute (what the core_prep rerun and the other reruns cost inside the step)
    tests_on $N ops,step 120 device_log_native.txt "device tests (ops, step)"
    for set in "recompute_granularity=selective" "recompute_granularity=null"; do
        echo "== 300M 32x2048, $set"
        timeout 120 $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=32 \
            --set global_batch_size=32 --set "$set" --steps 4 --warmup 1 --all-ops > "$OUTDIR/bench_300M_32_${set#*=}.txt" 2>&1
        grep -E "step |phase|by op|^    " "$OUTDIR/bench_300M_32_${set#*=}.txt" | head -90
    done
    lap "300M op tables"
    echo "== 1B 16x2048, the config's recompute set"
    timeout 150 $N/kda bench configs/kda-1B.yaml --device cuda --steps 4 --warmup 1 --all-ops \
        > "$OUTDIR/bench_1B_16.txt" 2>&1
    grep -E "step |phase|by op|^    " "$OUTDIR/bench_1B_16.txt" | head -90
    lap "1B op table"
    ;;
z1) # session 36: the gradient scratch allocated before the layers (a layer's z placed in its dz
    # by layer_buffers alone): the device tests, same_bits.sh against the build before (kda_base),
    # with the tiny config's none and with selective, and the 300M step's peak (29.68 GiB before)
    tests_on $N ops,step 120 device_log_native.txt "device tests (ops, step)"
    same_bits_rc $N/kda_base $N/kda
    lap "same bits"
    STEPS=4 bench300 $N "300M 32x2048, selective (default set)" ""
    lap "300M step"
    ;;
b1) # session 36: the 1B's recompute set. Its only memory bound is FLA's 67.8 GiB (none: 70.4),
    # and its default set (the 300M's six modules, 51.0 GiB) was chosen for the 300M's 30 GiB. The
    # cheap modules (swiglu, layernorm: a rewrite in a backward kernel, no rerun) against the
    # default and none, alternating, 10 timed steps each; first the device tests (ops, step: the
    # op table's GEMM FLOPs) and one 300M step's op table with each GEMM's TFLOP/s
    tests_on $N ops,step 120 device_log_native.txt "device tests (ops, step)"
    timeout 120 $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=32 --set global_batch_size=32 \
        --steps 4 --warmup 1 > "$OUTDIR/bench_300M_32_ops.txt" 2>&1
    grep -A40 "by op" "$OUTDIR/bench_300M_32_ops.txt" | head -34; lap "300M op table"
    for r in 1 2; do
        for set in "recompute_modules=[layernorm,conv,swiglu,gated_norm,core_prep,kda_gates]" \
            "recompute_modules=[swiglu,layernorm]" "recompute_modules=[swiglu]" "recompute_granularity=null"; do
            echo "== 1B 16x2048, $set, round $r"
            timeout 120 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 \
                --set global_batch_size=16 --set "$set" --steps 10 --warmup 1 | grep -E "step |phase|energy|memory"
        done
    done
    lap "1B recompute sets"
    ;;
f1) # issue 17's table: both sides of bench/step_vs_fla.sh in one call, at the issue's three sizes
    # (FLA's first step compiles Triton's kernels for ~300 s: the rows without recompute would
    # leave FLA's 1B no time; STEP_SPECS puts them back)
    # (10 timed steps a row: within 4-5 the step time still spreads by ~10% as the power
    # controller settles, session 34, and NVML's energy counter needs a window of seconds)
    fla_env
    # (F1_S: its limit, less than the call's where Triton's cache must still be saved after a cut)
    STEP_SPECS=${STEP_SPECS:-300M_16 300M_32 1B_16} STEPS=10 timeout "${F1_S:-585}" bash bench/step_vs_fla.sh > /dev/null 2>&1
    grep -vE "^$" "$OUTDIR/step_vs_fla.txt" | grep -E "==|step |phase|GEMMs|peak|^FLA|\|"; lap "kda and FLA step table"
    triton_cache_save "$OUTDIR"
    ;;
e1) # session 34: the step is held by the 700 W cap, so a faster step is one that needs fewer
    # joules. kda bench's energy line (NVML's counter over the timed steps) for what changes the
    # work of a 300M step: the default twice, no recompute, the cross-entropy's chunk at 2 GiB,
    # micro-batches 16 and 64 (joules a token compare across them); then cuBLASLt's fastest
    # candidates timed alone, in the step under the cap (session 14, H200: +0.9%). 20 timed
    # steps each: NVML's counter moves every 20-100 ms, so a few steps would be off by percents
    export STEPS=20
    for r in 1 2; do bench300 $N "300M 32x2048, selective, default" ""; done
    bench300 $N "300M 32x2048, no recompute" "recompute_granularity=null"
    KDA_CE_SCRATCH_MB=2048 bench300 $N "300M 32x2048, selective, KDA_CE_SCRATCH_MB=2048" ""
    bench300 $N "300M 16x2048, selective" "micro_batch_size=16 global_batch_size=16"
    bench300 $N "300M 64x2048, selective" "micro_batch_size=64 global_batch_size=64"
    lap "the 300M step's energy"
    echo "== 300M 32x2048, selective, cuBLASLt's fastest candidates alone (--gemm-survey), then the steps with them"
    timeout 240 $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=32 --set global_batch_size=32 \
        --steps 20 --warmup 1 --gemm-survey | grep -E "step |GEMM survey: [0-9]|surveyed|energy"
    lap "GEMM survey"
    ;;
p37) # session 37 (branch s37-prep): the KDA prep with persistent blocks and the next chunk's loads in
    # flight (kda: 5 blocks an SM, kda4: 4, no spill); kda_base = main 2cb2a1e. The device tests with
    # racecheck, the same bits as main's (same_bits.sh: none and selective; kda4 against kda), then the
    # 300M 32 x 2048 step, three builds alternating, two rounds: the prep's in-step time (op table)
    export KDA_RACECHECK=1
    tests_on $N ops,kda,step,decode,sanitizer 260 device_log_native.txt "device tests (ops, kda, step, decode, sanitizer)"
    same_bits_rc $N/kda_base $N/kda
    echo "== same_bits.sh, kda against kda4, selective"
    timeout 90 bash tests/cuda/same_bits.sh $N/kda $N/kda4 | tail -1
    lap "same bits"
    ops_ab p37 300M_32 ": prep" kda_base kda kda4
    lap "prep A/B in the step"
    ;;
p38) # bench/pending/next-s38 applied (the prep's K = 32 norms by two threads a row, Γ's rows at an
    # odd pitch, rmsnorm_fwd's pieces loaded together; the same bits), kda_base = main's kda,
    # kda_01 (when carried) = 0001 alone: the device tests with racecheck, same_bits.sh with none and
    # selective, then the 300M 32 x 2048 step alternating, two rounds, the prep's op-table rows
    export KDA_RACECHECK=1
    tests_on $N ops,kda,step,decode,sanitizer 200 device_log_native.txt "device tests (ops, kda, step, decode, sanitizer)"
    same_bits_rc $N/kda_base $N/kda
    lap "same bits"
    ops_ab p38 300M_32 ": prep|rmsnorm_fwd" kda_base kda $([ -x $N/kda_01 ] && echo kda_01)
    lap "prep A/B in the step"
    ;;
n37) # session 37: ncu's full set with stall samples on the step's kernels below their bandwidth (the
    # persistent prep of p37 was slower, so the prep is held by something other than its loads):
    # the forward's prep, rmsnorm and conv; the backward's conv, its column sums, the gated norm
    nbench="$N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=32 --set global_batch_size=32 --steps 1 --warmup 0"
    ncu_source "kda_prep_kernel|rmsnorm_fwd_vec|conv_silu_fwd_stream" 3 fwd_small "$nbench"
    ncu_source "conv_silu_bwd_pair|colreduce_add_kernel|gated_rmsnorm_bwd_vec" 5 bwd_small "$nbench"
    ;;
g1) # session 37: cuBLASLt's candidates timed as the step runs them: 40 ms each on operands of the
    # step's scale (session 35's survey timed 10 calls on zeros, at a clock and power the capped
    # step never sees: alone 3.3% faster, the step +0.3%). The 300M 32 x 2048 default step, then
    # the steps with the surveyed algorithms in the same process, then the default again (20 steps
    # each); the 1B the same way at 16 x 2048
    export STEPS=20
    echo "== 300M 32x2048, selective, --gemm-survey (40 ms a candidate, random operands)"
    timeout 240 $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=32 --set global_batch_size=32 \
        --steps 20 --warmup 1 --gemm-survey > "$OUTDIR/survey_300M_32.txt" 2>&1
    grep -E "step |GEMM survey: [0-9]|surveyed|energy|GPU clock" "$OUTDIR/survey_300M_32.txt"
    bench300 $N "300M 32x2048, selective, default (after the survey)" ""
    lap "300M GEMM survey"
    echo "== 1B 16x2048, --gemm-survey"
    timeout 240 $N/kda bench configs/kda-1B.yaml --device cuda --steps 16 --warmup 1 --gemm-survey \
        > "$OUTDIR/survey_1B_16.txt" 2>&1
    grep -E "step |GEMM survey: [0-9]|surveyed|energy|GPU clock" "$OUTDIR/survey_1B_16.txt"
    lap "1B GEMM survey"
    ;;
r1) # deliverable 3's bound (selective recompute <= 3% of the step's speed): the configs' default
    # selective set against no recompute at 300M 32 x 2048, alternating, 20 timed steps each
    # (session 35's H100: 3.7%)
    export STEPS=20
    for r in 1 2; do
        bench300 $N "300M 32x2048, selective (default set), round $r" ""
        bench300 $N "300M 32x2048, no recompute, round $r" "recompute_granularity=null"
    done
    lap "selective against none"
    ;;
m1) # session 35: dgu over gu, z over dz (1 GiB less at selective, 0.5 without recompute) and the
    # default selective set without o_proj: the device tests (ops: swiglu_bwd in place; step: every
    # recompute mode's bits), the new default against the set with o_proj and none (alternating),
    # then the peaks tests/test_mem_plan.c's table compares with the plan
    tests_on $N ops,step 120 device_log_native.txt "device tests (ops, step)"
    export STEPS=10
    for r in 1 2; do
        bench300 $N "300M 32x2048, selective (new default set), round $r" ""
        bench300 $N "300M 32x2048, selective with o_proj (the old default set), round $r" \
            "recompute_modules=[layernorm,conv,swiglu,gated_norm,core_prep,kda_gates,o_proj]"
        bench300 $N "300M 32x2048, no recompute, round $r" "recompute_granularity=null"
    done
    lap "the new default set against the old and none"
    export STEPS=2
    bench300 $N "300M 16x2048, no recompute" "recompute_granularity=null micro_batch_size=16 global_batch_size=16"
    bench300 $N "300M 32x2048, full" "recompute_granularity=full"
    bench300 $N "300M 32x2048, selective [layernorm,conv,swiglu,gated_norm,core_prep]" \
        "recompute_modules=[layernorm,conv,swiglu,gated_norm,core_prep]"
    for set in "recompute_granularity=null" "recompute_modules=[layernorm,conv,swiglu,gated_norm]"; do
        echo "== 1B 16x2048, $set"
        timeout 120 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
            --set "$set" --steps 2 --warmup 1 | grep -E "step |memory"
    done
    lap "the memory table's peaks"
    ;;
c39) # bench/pending/ce-chunks applied (kda, the test binaries), main's kda as kda_base: the
    # cross-entropy's chunks of equal, 256-aligned rows (16 x 4096 at 65536 tokens, not 15 x 4160
    # and 3136): device tests (ops: several chunks at the real vocabulary), same_bits.sh against
    # main (its small model takes one chunk: the same bits), then the 300M 32 x 2048 and the 1B
    # 16 x 2048 steps of both, alternating, two rounds, with the head's op rows and the peaks
    tests_on $N ops,step 200 device_log_native.txt "device tests (ops, step)"
    same_bits_rc $N/kda_base $N/kda
    lap "same bits"
    ops_ab c39 300M_32 "lm_head_ce_acc|GPU memory in use" kda_base kda
    lap "300M A/B"
    ops_ab c39 1B_16 "lm_head_ce_acc|GPU memory in use" kda_base kda
    lap "1B A/B"
    ;;
t38) # session 38: what a user of `kda train` sees against kda bench's figure, on real text
    # (tinyshakespeare tokenized here, carried in $N/data: epochs repeat it), no checkpoints; -k:
    # the trainer ends its iteration on SIGTERM
    D=$N/data/tinyshakespeare-llama3
    train_log() { # global batch, iterations: the trainer's log lines
        echo "== kda train 300M, micro-batch 32, global batch $1, $2 iterations"
        timeout -k 10 150 $N/kda train configs/kda-300M.yaml --device cuda --set micro_batch_size=32 \
            --set global_batch_size=$1 --set train_iters=$2 --set lr_warmup_iters=0 --set lr_decay_iters=$2 \
            --set log_interval=1 --set save= --set load= --set "train_data_path=[$D]" --set split=1000,0,0 \
            2>&1 | tail -n $(($2 + 4))
    }
    train_log 32 24
    lap "train, the optimizer every micro-batch"
    train_log 1024 4
    lap "train, the recipe's global batch"
    STEPS=10 bench300 $N "kda bench 300M 32x2048, selective (10 timed steps)" ""
    lap "bench beside it"
    ;;
n40) # session 40: where the KDA core's fused kernels (finish, D3, intra) stall at main, after
    # next-s42's recipe specialisation (the last source profile, session 27's, predates it): their
    # per-kernel times at 32 x 2048 and ncu's full set with the SASS stall samples
    ncu_kda_kernels
    ncu_core_source
    ;;
d40) # session 40 (bench/pending/d3-finish): D3 and the finish as one kernel at the recipe's sizes,
    # the parts called, each with its own 80 registers (0002), dL between them in shared memory
    # (0003). kda, bench_kda_cuda, the tests: 0001-0003; *_s1: 0001-0002; *_split /
    # *_inline: the same binaries with KDA_D3_FINISH_SPLIT=1 (the two kernels) / KDA_D3_FINISH_INLINE=1
    # (the parts inlined: ~40 bytes of spill); kda_base = main's kda. Device tests with racecheck
    # (0001-0002's test_cuda_kda too), same_bits.sh against main, the core's kernels (ncu) and its time
    # alone, the 300M 32 x 2048 step alternating, two rounds, the core's op rows; last, ncu's full
    # set with stall samples on the one kernel (~2 minutes)
    export KDA_RACECHECK=1
    tests_on $N kda,step,sanitizer 200 device_log_native.txt "device tests (kda, step, sanitizer)"
    echo "== test_kda_s1 (0001-0002)"; timeout 120 $N/test_kda_s1 2>&1 | grep -E "FAIL|passed|failed" | tail -4
    same_bits_rc $N/kda_base $N/kda
    same_bits_rc $N/kda_base $N/kda_s1
    lap "same bits"
    ncu_kda_kernels bench_kda_cuda "$OUTDIR/ncu_kda_one.csv"
    ncu_kda_kernels bench_kda_split "$OUTDIR/ncu_kda_split.csv"
    core_vs_base "16 32 64" bench_kda_base bench_kda_cuda bench_kda_s1 bench_kda_inline bench_kda_split
    ops_ab d40 300M_32 "kda_bwd|KDA core" kda_base kda kda_s1
    lap "300M A/B"
    ncu_source "kda_d3_finish" 2 d3f # where the one kernel stalls (SASS with samples: d3f_sass.csv.gz)
    ;;
d41) # session 41 (bench/pending/d3-bf16): D3's fp32 intermediates (dVn, dWm, dTinv, Xc) as single
    # bf16 operands, as FLA rounds them, not bf16 hi + lo pairs (7 of D3's 17 MMA passes). $N
    # (build/cuda-d41): main + d3-bf16 0001; build/cuda-d40's kda_base / bench_kda_base: main. The
    # bits change. In turn: device tests (kda, step, decode, memcheck), the core's kernels (ncu)
    # and its time alone beside main's, the 300M 32 x 2048 step alternating with main's; the step
    # at chunk 32 (main's generic kernels and bench/pending/c32's) beside 64; last, the 150-step
    # parity run against session 15's recorded FLA run (~7 min)
    ln -sf ../cuda-d40/kda_base $N/kda_base; ln -sf ../cuda-d40/bench_kda_base $N/bench_kda_base
    tests_on $N kda,step,decode,sanitizer 150 device_log_native.txt "device tests (kda, step, decode)"
    ncu_kda_kernels bench_kda_cuda "$OUTDIR/ncu_kda_bf16.csv"
    core_vs_base "16 32 64"
    ops_ab d41 300M_32 "kda_bwd|KDA core" kda_base kda
    lap "300M A/B"
    # chunk 32 against the recipe's 64: main's generic kernels and bench/pending/c32's (kda_c32: the
    # per-chunk kernels compiled for chunk 32; its test_cuda_kda checks them against the generic ones)
    echo "== test_cuda_kda_c32"
    timeout 120 $N/test_cuda_kda_c32 2>&1 | grep -E "FAIL|C=32\)|generic|passed|failed" | tail -12
    ops_ab d41 300M_32 "KDA core|peak" kda_base@kda_chunk_size=32 kda_c32@kda_chunk_size=32 \
        kda_base@kda_chunk_size=64
    lap "chunk 32 / 64"
    parity_recorded 150 8 spread; lap "parity" # last: it decides only if the rest is faster
    ;;
d42) # session 41 (bench/pending/d3-bf16 0001-0002), the call after d41 if 0001 held the parity
    # bound: the backward state scan's dS and dVn as single bf16 operands too. $N (build/cuda-d42):
    # main + 0001-0002; build/cuda-d41's kda / bench_kda_cuda (0001) as kda_d3 / bench_kda_d3;
    # build/cuda-d40's kda_base / bench_kda_base: main. Device tests (kda, step, memcheck), the
    # core alone and the 300M 32 x 2048 step beside both, then the parity run (~5 min)
    ln -sf ../cuda-d40/kda_base $N/kda_base; ln -sf ../cuda-d40/bench_kda_base $N/bench_kda_base
    ln -sf ../cuda-d41/kda $N/kda_d3; ln -sf ../cuda-d41/bench_kda_cuda $N/bench_kda_d3
    tests_on $N kda,step,sanitizer 150 device_log_native.txt "device tests (kda, step)"
    ncu_kda_kernels bench_kda_cuda "$OUTDIR/ncu_kda_bf16_scan.csv"
    core_vs_base "16 32 64" bench_kda_base bench_kda_cuda bench_kda_d3
    ops_ab d42 300M_32 "kda_bwd|KDA core" kda_base kda kda_d3
    lap "300M A/B"
    parity_recorded 150 8 spread; lap "parity"
    ;;
f1b) # issue 17's 1B row alone, both sides in one call (FLA's 1B compiles its Triton kernels for
    # minutes; the 300M rows' call may run out of time before it)
    fla_env
    # (10 timed steps, F1_S: as f1)
    STEP_SPECS=1B_16 FLA_MODELS=1B STEPS=10 timeout "${F1_S:-585}" bash bench/step_vs_fla.sh > /dev/null 2>&1
    grep -vE "^$" "$OUTDIR/step_vs_fla.txt" | grep -E "==|step |phase|GEMMs|peak|^FLA|\|"; lap "kda and FLA 1B step"
    triton_cache_save "$OUTDIR"
    ;;
t)
    both_builds 120 110
    echo "== test_cuda_kda with KDA_CORE_UNFUSED=1 (the D3 chunk-GEMM path)"
    KDA_CORE_UNFUSED=1 timeout 60 $N/test_cuda_kda 2>&1 | grep -E "FAIL|passed|failed" | tail -5
    for mb in 32 64; do
        echo "== 300M ${mb}x2048"
        timeout 100 $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=$mb \
            --set global_batch_size=$mb --steps 3 --warmup 1 | grep -E "step |phase|memory"
    done
    lap "steps"
    ;;
p)
    fla_env
    GB=1 KDA=$N/kda DUMP=$N/dump_batches KDA_ALSO= timeout 560 bash bench/parity_vs_fla.sh 2>&1 | tee "$OUTDIR/parity.txt" |
        grep -vE "^\s*$" | tail -32
    lap "loss parity vs FLA"
    triton_cache_save "$OUTDIR" # for build/cuda-device/ next time
    ;;
f2) # the parity run on text that does not repeat (1 x 2048 a step: 150 steps read 307k of the
    # 316k tokens once), the previous build beside it; per-kernel step times; the KDA core
    # against FLA and float64 on the native and the portable build
    fla_env
    GB=1 KDA=$N/kda DUMP=$N/dump_batches KDA_ALSO="${KDA_BASE:-}" timeout 420 bash bench/parity_vs_fla.sh 2>&1 | tee "$OUTDIR/parity.txt" |
        grep -vE "^\s*$" | tail -32
    lap "loss parity vs FLA"
    ncu_step_kernels 100 40 "ncu per-kernel times"
    timeout 60 $N/bench_kda_cuda 8 16 32 64 | grep "^ours"
    timeout 150 python3 tests/cuda/fla_kda_compare.py all $N 8 16 32 64 2>&1 | tail -14; lap "KDA core vs FLA (native)"
    [ -d $P ] && timeout 90 python3 tests/cuda/fla_kda_compare.py all $P 16 32 2>&1 | tail -10 && lap "KDA core vs FLA (portable)"
    triton_cache_save "$OUTDIR"
    ;;
k)
    tests_on $N ops,kda,step,decode,sanitizer 200 device_log_native.txt "native device tests"
    echo "== test_cuda_kda with KDA_CORE_UNFUSED=1 (the D3 chunk-GEMM path)"
    KDA_CORE_UNFUSED=1 timeout 60 $N/test_cuda_kda 2>&1 | grep -E "FAIL|passed|failed" | tail -5
    echo "== KDA core, fused (default) then KDA_CORE_UNFUSED=1"
    timeout 60 $N/bench_kda_cuda 8 16 32 64 | grep "^ours"
    KDA_CORE_UNFUSED=1 timeout 60 $N/bench_kda_cuda 16 32 | grep "^ours"
    lap "KDA core A/B"
    ncu_kda_kernels
    kda_step_table
    ;;
w)
    both_builds 150 120
    kda_step_table
    clocks_during "300M 32x2048 steps" bench300 $N "300M 32x2048 (clocks)" ""
    bench300 $N "300M 32x2048, recompute selective" recompute_granularity=selective
    bench300 $N "300M 32x2048, recompute full" recompute_granularity=full
    echo "== 1B 16x2048, recompute selective"
    timeout 120 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
        --set recompute_granularity=selective --steps 3 --warmup 1 | grep -E "step |phase|memory"
    bench300 $P "300M 32x2048, portable compute_80 PTX build" ""
    lap "recompute and portable steps"
    ;;
v)
    both_builds 150 150
    for mb in 16 32 64; do
        echo "== 300M ${mb}x2048: memory plan vs measured peak"
        timeout 100 $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=$mb \
            --set global_batch_size=$mb --steps 2 --warmup 1 | grep -E "step |memory"
    done
    echo "== 1B 16x2048: memory plan vs measured peak"
    timeout 100 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
        --steps 2 --warmup 1 | grep -E "step |memory"
    echo "== 300M 112x2048: refused before anything large is allocated?"
    t1=$(date +%s%N)
    timeout 60 $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=112 --set global_batch_size=112 \
        --steps 1 2>&1 | head -12
    echo "rc=${PIPESTATUS[0]} after $((($(date +%s%N) - t1) / 1000000)) ms"; lap "memory plans"
    echo "== GEMM algorithm survey, 300M 32x2048"
    timeout 150 $N/kda bench configs/kda-300M.yaml --device cuda --set micro_batch_size=32 --set global_batch_size=32 \
        --steps 3 --warmup 1 --gemm-survey | grep -vE "^kda bench"
    echo "== GEMM algorithm survey, 1B 16x2048"
    timeout 150 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
        --steps 3 --warmup 1 --gemm-survey | grep -vE "^kda bench"
    lap "GEMM surveys"
    fla_env
    timeout 240 python3 tests/cuda/fla_kda_compare.py all $P 16 32 2>&1 | tail -14; lap "KDA core vs FLA (portable)"
    triton_cache_save "$OUTDIR"
    ;;
a)
    tests_on $N ops,kda,step,nccl,decode,sanitizer 170 device_log_native.txt "native device tests"
    tests_on $P ops,kda,step,decode 200 device_log_ptx80.txt "portable (compute_80 PTX) device tests"
    [ -x $N/bench_ops_cuda ] && timeout 60 $N/bench_ops_cuda | tail -25
    timeout 60 $N/bench_kda_cuda 16 32 | grep "^ours"; echo "(portable:)"; timeout 90 $P/bench_kda_cuda 16 32 | grep "^ours"
    lap "kernel benchmarks"
    kda_step_table
    bench300 $N "300M 32x2048, recompute selective (default modules)" recompute_granularity=selective
    bench300 $N "300M 32x2048, recompute selective without swiglu" \
        "recompute_granularity=selective recompute_modules=[layernorm,conv,gated_norm]"
    bench300 $N "300M 32x2048, recompute selective with core_attn" \
        "recompute_granularity=selective recompute_modules=[layernorm,conv,gated_norm,swiglu,core_attn]"
    bench300 $P "300M 32x2048, portable compute_80 PTX build" ""
    echo "== 1B 16x2048, recompute selective"
    timeout 120 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
        --set recompute_granularity=selective --steps 3 --warmup 1 | grep -E "step |phase|memory"
    lap "recompute and portable steps"
    ncu_step_kernels 200 32 "ncu per-kernel times"
    KDA_BATCHES="64 96 128" KDA_BENCH_SET=recompute_granularity=selective timeout 150 bash bench/gpu_maxbatch.sh $N configs/kda-300M.yaml
    KDA_BATCHES="32 48" KDA_BENCH_SET=recompute_granularity=selective timeout 100 bash bench/gpu_maxbatch.sh $N configs/kda-1B.yaml
    lap "largest micro-batches"
    ;;
s31) # session 26: O and D1 inside the scans (the same bits); kda_base / bench_kda_base = main's
    core_ab_checks "KDA_CORE_UNFUSED=1 KDA_SCAN_VT=64"
    step_vs_base
    for k in kda_base kda; do
        echo "== 300M 16x2048, selective, $k"
        timeout 90 $N/$k bench configs/kda-300M.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
            --steps 4 --warmup 1 | grep -E "step |phase|GPU clock"
    done
    lap "300M steps"
    echo "== 1B 16x2048, selective (this build)"
    timeout 170 $N/kda bench configs/kda-1B.yaml --device cuda --set micro_batch_size=16 --set global_batch_size=16 \
        --steps 3 --warmup 1 | grep -E "step |phase|GEMMs|GPU clock|memory"
    lap "1B step"
    ncu_step_kernels 170 45 "ncu per-kernel table of the 300M 32 x 2048 step"
    ;;
d33) # session 26: the scans' integer work; kda_base / bench_kda_base = main's
    core_ab_checks
    step_vs_base
    ncu_source kda_scan 2 scans # the scans' profile after the change: instructions by kind
    ;;
d34) # session 26: d33's staging with its pieces once a kernel; kda_base / bench_kda_base = main's
    core_ab_checks
    ;;
g43) # bench/pending/next-s43 (our Hopper GEMM for the x·Wᵀ products): the ops test (the GEMM against
    # cuBLASLt and the CPU), the whole step and decode against the CPU, memcheck of the GEMM's small
    # cases; the GEMM benchmark against cuBLASLt; then, if it ran, ncu on the gate/up kernels, the
    # 300M step against main (and with the dx products on cuBLASLt: next-s43 0013's A/B) and the
    # recorded-FLA parity run. Every step under a timeout: a hang in a new kernel must not take the
    # whole call.
    tests_on $N ops,step,decode 330 device_log_native.txt "device tests (ops with the GEMM, step, decode)"
    grep -E "gemm|GEMM|FAIL" "$OUTDIR/device_log_native.txt" | head -30
    echo "== memcheck, our GEMM's small cases (every variant)"
    KDA_CUDA_SMALL=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/test_cuda_ops 2>&1 | tail -3
    if timeout 100 $N/bench_gemm_cuda; then
        lap "GEMM benchmark"
        ncu_gemm_kernels
        step_vs_base
        KDA_GEMM_SM90_DX=0 bench300 $N "300M 32x2048, selective, the dx products on cuBLASLt (KDA_GEMM_SM90_DX=0)"
        parity_recorded 150 4
        lap "loss parity vs the recorded FLA run"
    fi
    ;;
g44) # our GEMM's gate + up beside cuBLASLt's: ncu's full set with the SASS's stall samples (where the
    # cooperative kernel's tensor pipe idles: 75.5% active against cuBLASLt's 86.9%, session 30)
    KDA_BENCH_ONLY="gate + up" ncu_source "gemm_sm90_kernel|nvjet" 3 gemm $N/bench_gemm_cuda
    ;;
g47) # session 32: next-s43 0001-0020 (build/cuda-s43d) and 0001-0023 (build/cuda-s43f: 0021's k-blocks
    # of 32 and 6-stage rings, 0023's KDA_GEMM_EVICT_FIRST=1 A/B: our outputs under an evict-first L2
    # policy) in one call, both carried packed (bench/carry_pack.sh); what decides a merge first, the
    # diagnostics after (a call cut short by the device time left keeps the former): the ops and step
    # tests of both; the 300M step of main (kda_base), s43d's and s43f's defaults (ours only for the
    # fused backward) and s43f with evict-first stores, twice, then s43f in the 3-stage backward form
    # and with ours everywhere; the recorded-FLA parity run of s43f's default (0021 and 0023 keep the
    # products' order: s43d's bits); memcheck of the GEMM's small cases, the decode test with and
    # without our GEMM, the fused backward's rows of both, the whole GEMM benchmark of s43f, its
    # gate/up rows with evict-first stores; the fused kernels' stall samples (g45's)
    s43d=build/cuda-s43d s43f=build/cuda-s43f
    tests_on $s43f ops,step 150 device_log_native_s43f.txt "device tests of s43f (ops, step)"
    tests_on $s43d ops,step 150 device_log_native_s43d.txt "device tests of s43d (ops, step)"
    grep -hE "FAIL" "$OUTDIR"/device_log_native_s43?.txt | head -10
    N=$s43f
    for r in 1 2; do
        for k in $s43d/kda_base $s43d/kda $s43f/kda; do bench300 $k "300M 32x2048, selective, $k" ""; done
        KDA_GEMM_EVICT_FIRST=1 bench300 $N/kda "300M 32x2048, selective, s43f, KDA_GEMM_EVICT_FIRST=1" ""
    done
    KDA_GEMM_DSW_STAGES=3 bench300 $N/kda "300M 32x2048, selective, s43f, KDA_GEMM_DSW_STAGES=3" ""
    KDA_GEMM_SM90=1 bench300 $N/kda "300M 32x2048, selective, s43f, KDA_GEMM_SM90=1 (ours everywhere)" ""
    lap "300M steps"
    parity_recorded 150 4
    lap "loss parity vs the recorded FLA run"
    echo "== memcheck, our GEMM's small cases (every variant), s43f"
    KDA_CUDA_SMALL=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/test_cuda_ops 2>&1 | tail -3
    decode_with_and_without_ours
    for b in $s43d $s43f; do for st in 2 3; do
        echo "== $b, the fused backward, KDA_GEMM_DSW_STAGES=$st"
        KDA_GEMM_DSW_STAGES=$st KDA_BENCH_ONLY="SwiGLU bwd" timeout 30 $b/bench_gemm_cuda | tail -2
    done; done
    echo "== bench_gemm_cuda, s43f"; timeout 100 $N/bench_gemm_cuda; lap "GEMM benchmark, s43f"
    echo "== bench_gemm_cuda, s43f, gate + up rows, KDA_GEMM_EVICT_FIRST=1"
    KDA_GEMM_EVICT_FIRST=1 KDA_BENCH_ONLY="gate + up" timeout 60 $N/bench_gemm_cuda
    ncu_swiglu_source
    ;;
o1) # sessions 33-34 (a build with bench/pending/second-stream applied; closed in session 34):
    # work beside the GEMMs on a second stream. bench_overlap_cuda (dW gate+up /
    # down forked beside swiglu_bwd, rmsnorm_bwd, kda_bwd, at SM targets), the tests of the hooks
    # (test_cuda_ops: fork / join order, the cross-entropy's rows on the second stream; test_cuda_step:
    # the step's bits with the switch on), then the 300M step against the default with: gate and
    # up's dW on the second stream (KDA_WGRAD_STREAM=1), down's too (=3; KDA_WGRAD_SMS: cuBLASLt told
    # to target that many SMs); the cross-entropy's row kernel beside the head's GEMMs
    # (KDA_CE_STREAM=1; KDA_CE_GEMM_SMS the same for those GEMMs); both
    timeout 150 $N/test_cuda_ops 2>&1 | grep -E "two streams|second stream|FAIL|passed|failed" | tail -8
    timeout 150 $N/test_cuda_step 2>&1 | grep -E "second stream|FAIL|passed|failed" | tail -6
    lap "device tests (ops, step)"
    timeout 90 $N/bench_overlap_cuda 65536
    lap "two-stream overlap benchmark"
    for r in 1 2; do
        bench300 $N "300M 32x2048, selective, default" ""
        [ $r = 1 ] && KDA_WGRAD_STREAM=1 bench300 $N "300M 32x2048, selective, KDA_WGRAD_STREAM=1" ""
        KDA_WGRAD_STREAM=3 bench300 $N "300M 32x2048, selective, KDA_WGRAD_STREAM=3 (down's dW too)" ""
        KDA_WGRAD_STREAM=3 KDA_WGRAD_SMS=116 bench300 $N "300M 32x2048, selective, KDA_WGRAD_STREAM=3 KDA_WGRAD_SMS=116" ""
        KDA_CE_STREAM=1 bench300 $N "300M 32x2048, selective, KDA_CE_STREAM=1" ""
        KDA_CE_STREAM=1 KDA_CE_GEMM_SMS=116 bench300 $N "300M 32x2048, selective, KDA_CE_STREAM=1 KDA_CE_GEMM_SMS=116" ""
        KDA_WGRAD_STREAM=3 KDA_WGRAD_SMS=116 KDA_CE_STREAM=1 KDA_CE_GEMM_SMS=116 \
            bench300 $N "300M 32x2048, selective, both, SMS=116 each" ""
    done
    KDA_WGRAD_STREAM=3 KDA_WGRAD_SMS=100 bench300 $N "300M 32x2048, selective, KDA_WGRAD_STREAM=3 KDA_WGRAD_SMS=100" ""
    KDA_CE_STREAM=1 KDA_CE_GEMM_SMS=100 bench300 $N "300M 32x2048, selective, KDA_CE_STREAM=1 KDA_CE_GEMM_SMS=100" ""
    lap "300M steps"
    ;;
g45) # session 31: where the fused SwiGLU kernels stall (ncu's full set with stall samples: the forward
    # <1,2,0> at 49% tensor-pipe activity against the plain product's 79%, its clusters-of-one twin,
    # the backward <2,2,1>); and whether the decode test's larger error (3.9e-2, 1.0-2.1e-2 before
    # 0011) follows our GEMM (KDA_GEMM_SM90=0: cuBLASLt everywhere)
    decode_with_and_without_ours
    ncu_swiglu_source
    ;;
s42 | s42s | s42c) # bench/pending/next-s42 (0001 D3's layout a parameter, 0002 the fused kernels
    # specialised for C 64, K 32, V 64, 0003 B6 in D3, 0004 D3's tiles by cp.async, 0005 intra's βk / v
    # read before the inverse, 0006 finish's dQg / dKd / Gm before the pair loops, 0007
    # KDA_CORE_GENERIC and its test, 0008 the prep specialised too, 0009 mends; 0001-0002 as bench_s42b):
    # core_ab_checks with the unfused D3, 0001-0002 beside the series; then (not s42c) the 300M step
    # against main and, on the series' bits, the recorded-FLA parity run; then (s42 only) kda's side
    # of the step table. s42s and s42c are for a call with less device time left.
    core_ab_checks "KDA_CORE_UNFUSED=1" "16 32 64"
    parts_vs_series "16 32 64" bench_s42b
    if [ "$1" != s42c ]; then
        step_vs_base
        parity_recorded 150 4
        lap "loss parity vs the recorded FLA run"
    fi
    if [ "$1" = s42 ]; then kda_step_table; fi
    ;;
s38) # next/s38 (experiment: the finish kernel at 2 blocks an SM, 0001 alone as bench_s38a; with the
    # pair phase's dQg, dKd, Gm read before its loops, which spill at 3 blocks' 80 registers, as
    # bench_s38b; the series adds D3 at 2 blocks an SM)
    core_ab_checks "KDA_CORE_UNFUSED=1" "16 32 64"
    parts_vs_series "16 32 64" bench_s38a bench_s38b # 0001 alone, 0001 + 0002 (0003: D3 at 2 blocks too)
    ;;
s37) # next/s37 (B6's Σ h·dh in D3) against main: core_ab_checks with the unfused D3; then where the
    # build stands for issue 17 (its bits are main's when same_bits passes): the recorded-FLA parity
    # run, the kda side of the step table (300M 16, 32; 1B 16), the 300M 32 x 2048 step with no recompute
    core_ab_checks "KDA_CORE_UNFUSED=1" "16 32 64"
    parity_recorded 150 4
    lap "loss parity vs the recorded FLA run"
    kda_step_table
    bench300 $N "300M 32x2048, no recompute" recompute_granularity=null
    lap "300M 32 x 2048 without recompute"
    ;;
s36b) # next/s36b (the finish kernel's reads issued together, alone: s36's 0001 broke the forward
    # at K = V = 128 and gained nothing measurable): core_ab_checks with the unfused D3, the step
    core_ab_checks "KDA_CORE_UNFUSED=1" "16 32 64"
    step_vs_base
    ;;
s36) # next/s36 (0001: bf16 tiles by cp.async and fp32 tiles two rows at a time in D3, intra and finish;
    # 0002: the finish kernel's reads issued together): core_ab_checks with the unfused D3 too, 0001
    # alone (bench_s36a) beside the series, the 300M step against main, the fused kernels' stall profile
    core_ab_checks "KDA_CORE_UNFUSED=1"
    parts_vs_series "8 16 32 64" bench_s36a
    step_vs_base
    ncu_core_source
    ;;
s35) # bench/pending/next-s35 (0001: the scans' integer work, d34 without the forward's row pointers;
    # 0002: Aqk's zero blocks skipped): core_ab_checks on the series, 0001 alone (bench_s35a) beside
    # it, the 300M step against main, then the fused kernels' stall profile (finish, D3, intra: ncu
    # full set with SASS) for their integer work next
    core_ab_checks
    parts_vs_series "8 16 32 64" bench_s35a # patch 0001 alone (0002: Aqk's zero blocks skipped)
    step_vs_base
    ncu_core_source
    ;;
v34) # session 26: which part of d34 slows the forward scan (no tests: the same arithmetic)
    for k in bench_kda_base bench_kda_cuda bench_v2 bench_v3; do
        echo "== ncu, the scans at 32 x 2048, $k"
        KDA_BENCH_ONCE=1 timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k "regex:kda_scan" \
            --log-file /tmp/ncu_v.csv $N/$k 32 > /dev/null 2>&1
        python3 bench/ncu_summary.py /tmp/ncu_v.csv --steps 2 | head -6
    done
    lap "ncu"
    for r in 1 2; do
        for k in bench_kda_base bench_kda_cuda bench_v2 bench_v3; do
            echo "== KDA core, $k"; timeout 60 $N/$k 8 32 64 | grep "^ours"
        done
    done
    lap "core"
    ;;
w31) # the narrow scans after s31 (O and D1 inside them): which width where B·H < SMs
    for vt in "" 32 64; do
        echo "== ncu, the core at 16 x 2048, this build, KDA_SCAN_VT=${vt:-default}"
        KDA_SCAN_VT=$vt KDA_BENCH_ONCE=1 timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
            --log-file /tmp/ncu_w.csv $N/bench_kda_cuda 16 > /dev/null 2>&1
        python3 bench/ncu_summary.py /tmp/ncu_w.csv --steps 2 | head -10
    done
    lap "ncu at 16"
    for r in 1 2; do
        echo "== KDA core, main (bench_kda_base)"; timeout 60 $N/bench_kda_base 8 16 | grep "^ours"
        for vt in "" 32 64; do
            echo "== KDA core, this build, KDA_SCAN_VT=${vt:-default}"
            KDA_SCAN_VT=$vt timeout 60 $N/bench_kda_cuda 8 16 | grep "^ours"
        done
    done
    lap "core at 8, 16"
    for r in 1 2; do
        for vt in base "" 32 64; do
            bin=$N/kda; [ "$vt" = base ] && bin=$N/kda_base
            echo "== 300M 16x2048, selective, ${vt:-default}"
            KDA_SCAN_VT=${vt#base} timeout 90 $bin bench configs/kda-300M.yaml --device cuda --set micro_batch_size=16 \
                --set global_batch_size=16 --steps 4 --warmup 1 | grep -E "step |phase"
        done
    done
    lap "16 x 2048 steps"
    ;;
b)
    fla_env
    if [ -f bench/parity_vs_fla.sh ]; then
        KDA=$N/kda timeout 330 bash bench/parity_vs_fla.sh 2>&1 | tail -30; lap "loss parity vs FLA"
    fi
    STEP_SIDES=fla STEPS=5 timeout 300 bash bench/step_vs_fla.sh > /dev/null 2>&1
    grep -E "^FLA" "$OUTDIR/step_vs_fla_fla.txt"; lap "FLA step table"
    timeout 120 python3 tests/cuda/fla_kda_compare.py all $N 16 32 2>&1 | tail -12; lap "KDA core vs FLA vs fp64"
    triton_cache_save "$OUTDIR"
    ;;
esac
echo "device_session $1 finished in $((SECONDS - t0)) s"
