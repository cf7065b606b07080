#!/usr/bin/env bash
# gasworks on a GPU host: the whole GPU protocol, from the archive that
# scripts/build-for-device.sh made (no Rust toolchain needed on the GPU host).
#
#   scripts/gpu-session.sh STEP...
#
# Steps, in the order the protocol runs them (each step's wall time is printed):
#   tests      every test binary with --include-ignored (the GPU tests are #[ignore]d)
#   sanitizer  compute-sanitizer memcheck + racecheck: one 8-stream shared-scratch GAS batch and
#              one short path-traced render of the (textured) sponza-like scene
#   bench      build-bench on the sponza-like scene (390 groups) and a ~10M-triangle toystore:
#              streams 1,2,4,8,16,32 x fast-build off/on, enqueue threads 1/4/8 x contexts,
#              merge-below 0/64/256/1024, assign round-robin/lpt x scratch shared/per-stream,
#              compaction off/on (CSV + SVG); the LPT and enqueue-thread runs with --isolate (a
#              process per configuration)
#   render     GPU and CPU renders on this host: Cornell 1024x1024 256 spp, sponza-like and the
#              10M toystore at 1920x1080 64 spp; samples/s and rays/s side by side, images kept
#              (lossless WebP);
#              each GPU image's mean luminance against the CPU's, in standard errors
#   depth      GPU vs CPU on the Cornell box at --max-depth 1..8 (the bounce a bias starts at;
#              depth 1 bit for bit), the tent filter's, a thin lens's and adaptive sampling's
#              pairs, and an environment map (gen sky) over the sponza-like atrium
#   sched      the tile scheduler with GPU workers (--devices gpu0x2 and gpu0x2,cpu, --stats) on
#              the toystore; the image must be bit-identical across GPU worker counts and schedules,
#              and after a --time-limit stop and --resume, and after a SIGTERM inside a render's
#              one pass and --resume under other tiles, and adaptive sampling's image on 1 and
#              4 streams and stopped and resumed; gpu0x2,cpu calibrated and with
#              --calibrate off, and gpu0x2 against gpu0x2,cpu at 256 spp (CPU shares cut into
#              pieces, and not: --slow-worker-pieces 0)
#   nsys       best effort: any Nsight Systems found on the host, on a short render
#   failover   a GPU that faults on purpose (GASWORKS_FAULT_AT_TILE: an illegal address, the
#              sticky error a kernel bug leaves), mid-frame and then in its calibration: every
#              stream of the GPU must be retired at once, in one warning, and the CPU workers
#              must finish the frame (exit 0, an image)
# Investigations (not in the calls below; run by name):
#   lpt        which part of LPT crashes (LPT's streams in build order, round-robin's in LPT's
#              order, per-stream scratch, CUDA_LAUNCH_BLOCKING=1, OptiX validation), then guard
#              bands after every scratch slice and GAS, LPT build weights, memcheck on LPT
#              batches (sponza-like; each run capped at 60 s)
#   race       the LPT / largest-first / threaded-enqueue crashes in fresh processes, first with
#              a context per stream (--build-contexts per-stream), then as they crashed, beside
#              the same with CUDA_DEVICE_MAX_CONNECTIONS=1, then racecheck and synccheck on LPT
#   watchdog   batches known to hang (LPT weight 1000 or 250, 4 streams) with GASWORKS_BUILD_WAIT_S=10:
#              the hang must end in the error naming the batch
#   connections  build-bench at 8..32 streams with CUDA_DEVICE_MAX_CONNECTIONS 8 and 32
#   cbaseline  the forum's batch loop in plain C (repro/gas-batch/gas_batch.c, compiled here)
#              beside build-bench, on the sponza-like scene and the toystore, same triangle
#              counts, streams 1..16, flags and repeats: gasworks / C per stream count, and each
#              one's host time per optixAccelBuild
#   cluster    does this GPU build OptiX 9's cluster acceleration structures? (gas_batch --probe)
# Groups sized for device calls of under 9 minutes each:
#   call1 = tests sanitizer     call2 = bench     call3 = render depth sched failover nsys
#   all = the three
#   short = tests depth render sched failover: the first call on a lent GPU, whose 15 minutes
#           no longer hold the whole protocol; its tests step stops each binary at 60 s
#           (GW_TEST_TIMEOUT_S) and itself at 270 s (GW_TESTS_BUDGET_S), so that the steps
#           after it run within the call's budget
#
# Results: bench/results/<date>-<device>/ (or $GW_RESULTS_DIR): one log per command, CSVs, plots
# and images, every file starting with the command, device, driver, git commit and date. At the
# end the script packs that folder into ONE tar.gz and writes ONE summary log, both into $OUT
# when that variable is set (the device tool brings back at most 8 files), else into
# bench/results/. Unpack the tar.gz at the repository root and commit the folder.
#
# Knobs (environment):
#   GW_ARCHIVE        the archive (default .device/gasworks-device.tar.xz)
#   GW_BUDGET_S       wall-clock budget of this invocation (default 530): no step starts, and
#                     running commands are stopped, past it; packing the results is kept for last
#   GW_REPEAT         build-bench repeats on the sponza-like scene (default 100)
#   GW_REPEAT_BIG     build-bench repeats on the 10M toystore (default 10)
#   GW_REPEAT_LPT, GW_REPEAT_CONN  repeats of the lpt (20) and connections (50) steps
#   GW_CONFIG_TIMEOUT_S  bench step: build-bench --config-timeout-s of its --isolate runs (60)
#   GW_TESTS          tests step: only these test binaries (space-separated names)
#   GW_TEST_TIMEOUT_S tests step: a test binary still running after this is stopped (150; 60 in
#                     the short recipe)
#   GW_TESTS_BUDGET_S tests step: no binary starts, and the running one is stopped, past this
#                     many seconds of the step (unbounded but for GW_BUDGET_S; 270 in short)
#   GW_BENCH_RUNS     bench step: only these runs (space-separated names, e.g.
#                     toystore-enqueue-threads)
#   GW_CC             cbaseline and cluster steps: the C compiler (default cc)
#   GW_SHELVES        toystore size (default 1007 shelves: about 10M triangles)
#   GW_SCENES_DIR     generated scenes (default /tmp/gasworks-scenes; large, never committed)
#   GW_SKIP_CPU=1     render step: GPU renders only (no GPU vs CPU comparison then)
#   GW_COMMITTED_RESULTS  render step: where earlier sessions' images are (default bench/results):
#                     an image bit for bit one of them is kept as IMAGE.same, naming it
#   GW_RENDER_SE      render step: the most standard errors the GPU's mean luminance may lie
#                     from the CPU's before the step fails (default 6)
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 2
t_start=$(date +%s)
budget=${GW_BUDGET_S:-530}
archive="${GW_ARCHIVE:-$root/.device/gasworks-device.tar.xz}"

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
[ $# -gt 0 ] || { usage >&2; exit 2; }
steps=()
# The short recipe's tighter tests step (see above); GW_TEST_TIMEOUT_S and GW_TESTS_BUDGET_S win.
test_timeout_default=150
tests_budget_default=""
for a in "$@"; do
    case "$a" in
        short)
            steps+=(tests depth render sched failover)
            test_timeout_default=60
            tests_budget_default=270 ;;
        call1) steps+=(tests sanitizer) ;;
        call2) steps+=(bench) ;;
        call3) steps+=(render depth sched failover nsys) ;;
        all) steps+=(tests sanitizer bench render depth sched failover nsys) ;;
        tests|sanitizer|bench|render|sched|failover|nsys|lpt|race|watchdog|depth|connections|cbaseline|cluster)
            steps+=("$a") ;;
        -h|--help) usage; exit 0 ;;
        *) echo "gpu-session: unknown step '$a'" >&2; usage >&2; exit 2 ;;
    esac
done
# Each step once, in the order given.
mapfile -t steps < <(printf '%s\n' "${steps[@]}" | awk '!seen[$0]++')

say() { echo "gpu-session: $*" >&2; }
elapsed() { echo $(( $(date +%s) - t_start )); }
left() { echo $(( budget - $(elapsed) )); }

# ---- the host -------------------------------------------------------------------------------
device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)"
if [ -z "$device" ]; then
    say "nvidia-smi finds no NVIDIA GPU on this host: these steps need one (nothing was run)"
    exit 2
fi

# ---- unpack the archive ---------------------------------------------------------------------
[ -f "$archive" ] || { say "$archive missing: run scripts/build-for-device.sh on the build machine and bring the archive here"; exit 2; }
dev="${GW_UNPACK_DIR:-/tmp/gasworks-device}"
rm -rf "$dev"
mkdir -p "$dev"
if ! tar -C "$dev" -xJf "$archive"; then
    say "could not unpack $archive"
    exit 2
fi
bin="$dev/gasworks"
# The binary the tests run, with the test hooks (feature fault-injection) the release binary
# lacks: the tests and the failover step's fault on purpose need them.
test_bin="$dev/gasworks-test"
# A GPU worker that fails must fail its check, not be retired while the CPU workers beside it
# finish the frame (the render's default, `--on-worker-error retire`).
export GASWORKS_ON_WORKER_ERROR=stop
tests_dir="$dev/tests"
commit="$(cat "$dev/git-commit" 2>/dev/null || echo unknown)"
[ -x "$bin" ] || { say "$archive holds no gasworks binary"; exit 2; }
[ -x "$test_bin" ] || { say "$archive holds no gasworks-test binary (rebuild it with scripts/build-for-device.sh)"; exit 2; }

# Test binaries embed the path they were built in (CARGO_MANIFEST_DIR for test data,
# CARGO_BIN_EXE_gasworks = <build root>/target/debug/gasworks for CLI tests). Where that path
# does not exist here, point it at this checkout, and give it the carried test binary.
build_root="$(cat "$dev/build-root" 2>/dev/null || true)"
if [ -n "$build_root" ] && [ ! -e "$build_root" ]; then
    mkdir -p "$(dirname "$build_root")" && ln -s "$root" "$build_root" \
        && say "linked the build root $build_root -> $root (test data paths)"
fi
if [ -n "$build_root" ] && [ ! -e "$build_root/target/debug/gasworks" ]; then
    mkdir -p "$build_root/target/debug" 2>/dev/null && ln -sf "$test_bin" "$build_root/target/debug/gasworks"
fi
export GASWORKS_BIN="$test_bin"
# GPU hosts have no C/C++ compiler: the tests that build C or C++ code ran on the build
# machine; here they skip, saying so (tests/support/mod.rs), instead of failing.
export GASWORKS_SKIP_COMPILER_TESTS=1
export GASWORKS_GIT_COMMIT="$commit"
export GASWORKS_NVTX_RECORDER="$dev/libnvtx_recorder.so"

date_utc="$(date -u +%Y-%m-%d)"
slug="$(echo "$device" | tr -cs 'A-Za-z0-9' '-' | sed 's/-$//')"
out="${GW_RESULTS_DIR:-bench/results/$date_utc-$slug}"
mkdir -p "$out"
# The GPU tests' batch-by-batch progress (tests/raycast_support): after a hang, its last line
# names the configuration that hung.
export GASWORKS_TEST_PROGRESS="$out/test-progress.log"
scenes="${GW_SCENES_DIR:-/tmp/gasworks-scenes}"
mkdir -p "$scenes"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
summary_dir="${OUT:-bench/results}"
mkdir -p "$summary_dir"
summary="$summary_dir/gpu-session-$stamp.log"

# ---- provenance and logging -----------------------------------------------------------------
header() {
    local file="$1"; shift
    {
        echo "# command: $*"
        echo "# device: $device"
        echo "# driver: $driver"
        echo "# git commit: $commit"
        echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    } > "$file"
}
header "$summary" "scripts/gpu-session.sh $*"
{
    echo "# steps: ${steps[*]}"
    echo "# budget: ${budget} s"
    # The knobs this invocation was given (repeats, toystore size, ...), which its figures depend on.
    env | grep '^GW_' | sort | sed 's/^/# env: /'
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv 2>/dev/null | sed 's/^/# /'
    sed 's/^/# archive: /' "$dev/MANIFEST" | head -n 4
} >> "$summary"
note() { echo "$*" | tee -a "$summary" >&2; }

failures=0
fail() { note "FAILED: $*"; failures=$((failures + 1)); }

# logged LOG CMD...: runs CMD under the budget, its output after a provenance header in LOG.
logged() {
    local log="$1"; shift
    local remaining
    remaining=$(left)
    header "$log" "$@"
    if [ "$remaining" -le 15 ]; then
        echo "# not run: the session's time budget (${budget} s) was spent" >> "$log"
        note "skipped (budget spent): $*"
        return 124
    fi
    say "$* > $log"
    timeout -k 5 $((remaining - 10)) "$@" >> "$log" 2>&1
    local rc=$?
    echo "# exit status: $rc" >> "$log"
    [ $rc -eq 124 ] && echo "# stopped: it ran past its time limit (the session's budget, or the step's cap)" >> "$log"
    return $rc
}

# A CSV keeps its plain form; its provenance goes beside it.
meta() { local file="$1"; shift; header "$file.meta" "$@"; }

# ---- scenes ---------------------------------------------------------------------------------
sponza="$scenes/sponza-like/sponza_like.obj"
toystore="$scenes/toystore/toystore.obj"
cornell="$root/assets/cornell/cornell.obj"
need_sponza() {
    [ -s "$sponza" ] || logged "$out/gen-sponza-like.log" "$bin" gen sponza-like --quiet -o "$(dirname "$sponza")" \
        || fail "gen sponza-like"
}
need_toystore() {
    [ -s "$toystore" ] || logged "$out/gen-toystore.log" "$bin" gen toystore --shelves "${GW_SHELVES:-1007}" --quiet \
        -o "$(dirname "$toystore")" || fail "gen toystore"
}

# The compute-sanitizer binary: on the PATH, else in a CUDA or NVIDIA folder; empty if none.
find_sanitizer() {
    command -v compute-sanitizer && return
    local c
    for c in /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer; do
        [ -x "$c" ] && { echo "$c"; return; }
    done
    return 0
}

# ---- steps ----------------------------------------------------------------------------------
# The test that was running when a test binary was stopped: the last "test NAME ... " line of
# its log that has no result after it (libtest prints the name when the test starts).
hung_test() {
    # What follows "... " is the result (ok, FAILED, ignored) or, for a test stopped midway,
    # nothing, the log's "# exit status" line, or the test's own progress lines.
    awk '/^test [^ ]+ \.\.\. / { r = $0; sub(/^test [^ ]+ \.\.\. /, "", r); t = (r ~ /^(ok|FAILED|ignored)/) ? "" : $2 }
         END { if (t != "") print t }' "$1"
}

step_tests() {
    # One binary may not take the whole call: a hang (LPT batches hung on the H100, a test
    # with LPT batches on the H200) is stopped at GW_TEST_TIMEOUT_S, named, and the binary is
    # run again without it.
    local t n=0 cap="${GW_TEST_TIMEOUT_S:-$test_timeout_default}" ran=() step_budget="${GW_TESTS_BUDGET_S:-$tests_budget_default}"
    # The step's own budget (the short recipe's): `budget` shadowed here, so that `left` and
    # `logged` stop the step at it and the steps after it keep their time.
    if [ -n "$step_budget" ]; then
        local budget=$(( $(elapsed) + step_budget < budget ? $(elapsed) + step_budget : budget ))
    fi
    note "tests: each binary stopped after $cap s${step_budget:+, the step after $step_budget s}"
    for t in "$tests_dir"/*; do
        [ -x "$t" ] || continue
        # GW_TESTS: only the test binaries named there (space-separated), to rerun a fix.
        if [ -n "${GW_TESTS:-}" ] && [[ " $GW_TESTS " != *" $(basename "$t") "* ]]; then
            continue
        fi
        if [ "$(left)" -le 15 ]; then
            fail "tests: the step's time ran out before $(basename "$t") and the binaries after it"
            break
        fi
        n=$((n + 1))
        # One test thread: the GPU tests share one device (out-of-memory and timing tests).
        local log name skips=() attempt=1 rc
        name="$(basename "$t")"
        log="$out/test-$name.log"
        ran+=("$log")
        while :; do
            logged "$log" timeout -k 5 "$cap" "$t" --include-ignored --test-threads=1 "${skips[@]}"
            rc=$?
            [ $rc -eq 124 ] || break
            local hung
            hung="$(hung_test "$log")"
            # Not a test that hung (the budget ran out, or nothing started): give up on it.
            if [ -z "$hung" ] || [ "$(left)" -le 30 ] || [ $attempt -ge 4 ]; then
                break
            fi
            fail "test $hung in $name hung: stopped after $cap s (see $out/test-$name-hung$attempt.log)"
            [ -s "$GASWORKS_TEST_PROGRESS" ] && tail -n 1 "$GASWORKS_TEST_PROGRESS" | sed 's/^/    last started: /' | tee -a "$summary" >&2
            mv "$log" "$out/test-$name-hung$attempt.log"
            skips+=(--skip "$hung" --exact)
            attempt=$((attempt + 1))
        done
        if [ "$rc" -ne 0 ]; then
            fail "tests in $name (see $log)"
            # The failing tests, where they panicked and the panic message (the line after),
            # so the summary alone says what broke.
            awk '/^test .* FAILED$/ {print; next} /panicked at/ {print; if ((getline m) > 0) print "      " m}' "$log" \
                | head -n 24 | sed 's/^/    /' | tee -a "$summary" >&2
        fi
    done
    [ $n -gt 0 ] || fail "no test binaries in the archive"
    # One line per binary: passed / failed / ignored counts, of the binaries run now (with
    # GW_TESTS, the folder also holds the logs of an earlier call, which are not counted).
    [ $n -gt 0 ] && grep -h "^test result" "${ran[@]}" 2>/dev/null | awk '{p+=$4; f+=$6; i+=$8} END {printf "tests: %d passed, %d failed, %d ignored\n", p, f, i}' \
        | tee -a "$summary" >&2
}

step_sanitizer() {
    need_sponza
    local cs
    cs="$(find_sanitizer)"
    if [ -z "$cs" ]; then
        header "$out/sanitizer.log" compute-sanitizer
        echo "compute-sanitizer is not installed on this host: memcheck and racecheck still owed" >> "$out/sanitizer.log"
        fail "compute-sanitizer missing"
        return
    fi
    # shellcheck disable=SC2034 # read through the nameref `cmd` below
    local build=("$bin" build-bench "$sponza" --streams 8 --scratch shared --repeat 1 --warmup 0)
    # The sponza-like scene, for what the Cornell box lacks: texture reads (colour, height and
    # cut-out maps), bump mapping and the any-hit program, 390 GASes and their SBT records.
    # shellcheck disable=SC2034 # read through the nameref `cmd` below
    local render=("$bin" render "$sponza" -o "$out/sanitizer-render.png" --backend optix --width 128 --height 72
        --spp 4 --quiet)
    local tool what
    for tool in memcheck racecheck; do
        for what in build render; do
            local -n cmd="$what"
            logged "$out/sanitizer-$tool-$what.log" "$cs" --tool "$tool" --error-exitcode 99 "${cmd[@]}" \
                || fail "compute-sanitizer $tool on the $what (see $out/sanitizer-$tool-$what.log)"
            grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$out/sanitizer-$tool-$what.log" | sed "s/^/$tool $what: /" | tee -a "$summary" >&2
        done
    done
    rm -f "$out/sanitizer-render.png"
}

# bench_one NAME SCENE REPEAT ARGS...: one build-bench invocation, CSV + SVG + log.
bench_one() {
    local name="$1" scene="$2" repeat="$3"; shift 3
    # The bench step's GW_BENCH_RUNS (its `bench_only`): the runs it does not name are left out.
    if [ -n "${bench_only:-}" ] && [[ " $bench_only " != *" $name "* ]]; then
        return 0
    fi
    local cmd=("$bin" build-bench "$scene" --repeat "$repeat" --csv "$out/bench-$name.csv" --plot "$out/bench-$name.svg" "$@")
    # A caller's `bench_cap` (seconds) bounds the run: a hung batch fails it, the step goes on.
    local cap=()
    [ -n "${bench_cap:-}" ] && cap=(timeout -k 5 "$bench_cap")
    logged "$out/bench-$name.log" "${cap[@]}" "${cmd[@]}" || fail "build-bench $name (see $out/bench-$name.log)"
    meta "$out/bench-$name.csv" "${cmd[@]}"
}

step_bench() {
    need_sponza
    need_toystore
    # 32 streams: build-bench then asks CUDA for 32 hardware queues for the whole run, so that
    # 16 and 32 streams are measured beside 1 in the same process.
    local r="${GW_REPEAT:-100}" rb="${GW_REPEAT_BIG:-10}" s=1,2,4,8,16,32
    # A hung batch (LPT hung twice on the H100) fails its run, not the step.
    local bench_cap="${GW_CMD_TIMEOUT_S:-200}" # read by bench_one
    local bench_only="${GW_BENCH_RUNS:-}" # read by bench_one
    # One factor at a time around the default (fast-trace, round-robin, shared scratch, one GAS
    # per group, no compaction): the whole cross product would be 320 configurations.
    # The headline runs first (8 streams against 1, the single GAS), then the enqueue threads
    # (the open question), the isolated assign/scratch run last: a call's budget that runs out
    # cuts the slowest, least telling runs (2026-11-27: 407 s in all, cut 2 rows short).
    bench_one sponza-flags "$sponza" "$r" --streams "$s" --flags both
    bench_one toystore-flags "$toystore" "$rb" --streams "$s" --flags both
    # LPT and threaded enqueues through one context have crashed and hung (docs/gas-builds.md,
    # known issue): each configuration of the runs below runs in a process of its own
    # (--isolate), so that one crash costs one row, not every row after it (the H200's
    # enqueue-threads run crashed in its 10th of 16 and never timed the 6 after). A process
    # each costs a context and the scene's load, about a second, so these get twice the cap.
    local iso=(--isolate --config-timeout-s "${GW_CONFIG_TIMEOUT_S:-60}")
    # Host-bound? From 16 streams the toystore's batch is its host enqueue (52 ms, 2026-11-27).
    # Through a context per stream the enqueue threads' calls run side by side: on sponza-like
    # 4 threads on 16 streams took 9.07 ms against 15.7 through one context. Does it carry to
    # the 10M toystore? `auto` gives 1 thread one context, 4 and 8 threads a context each.
    bench_cap=$((2 * bench_cap)) bench_one toystore-enqueue-threads "$toystore" "$rb" --streams 8,16,32 \
        --enqueue-threads 1,4,8 --build-contexts auto "${iso[@]}"
    bench_cap=$((2 * bench_cap)) bench_one sponza-enqueue-threads "$sponza" "$r" --streams 8,16,32 --enqueue-threads 1,4,8 \
        --build-contexts shared,per-stream "${iso[@]}"
    bench_one sponza-compact "$sponza" "$r" --streams "$s" --flags both --compact
    bench_one sponza-merge "$sponza" "$r" --streams "$s" --merge-below 0,64,256,1024,4096
    bench_one toystore-merge-compact "$toystore" "$rb" --streams "$s" --merge-below 0,64,256,1024 --compact
    bench_cap=$((2 * bench_cap)) bench_one sponza-assign-scratch "$sponza" "$r" --streams "$s" --assign round-robin,lpt --scratch shared,per-stream "${iso[@]}"
    note "bench: $r repeats on sponza-like, $rb on the toystore (GW_REPEAT, GW_REPEAT_BIG)"
    # The headline: median build time per stream count, and 8 streams against 1.
    local f
    for f in "$out"/bench-*.log; do
        # Also the default's variants (", compact", ", merge<64", ", 4 enqueue threads"): a
        # compaction or merging run's headline is those (the plain pattern quoted only its
        # single GAS, found by the rehearsal on the fake GPU).
        grep -E "^ ?(1|8) streams \| [a-z-]+, round-robin, shared scratch(, [^|]+)? \||^single GAS" "$f" 2>/dev/null | head -n 12 \
            | cut -c1-200 | sed "s|^|$(basename "$f" .log): |"
    done | tee -a "$summary" >&2
}

# same_as_committed IMAGE: an image bit for bit the same as one an earlier session committed
# under bench/results (the renderer is deterministic: 2026-11-27's GPU images at 4e0653b were
# those of 2026-11-26 at 04c3eb4 and e162ad4) is kept as IMAGE.same, a line naming that file
# and the checksum, not as a second copy: the committed results travel with every device call.
same_as_committed() {
    local img="$1" committed="${GW_COMMITTED_RESULTS:-$root/bench/results}" here sum match
    [ -s "$img" ] || return 0
    here="$(cd "$(dirname "$img")" && pwd)"
    committed="$(cd "$committed" 2>/dev/null && pwd)" || return 0
    sum="$(sha256sum "$img" | cut -d' ' -f1)"
    match="$(find "$committed" -name '*.webp' ! -path "$here/*" -print0 2>/dev/null \
        | xargs -0 -r sha256sum | awk -v s="$sum" '$1 == s {print $2; exit}')"
    [ -n "$match" ] || return 0
    match="${match#"$root"/}"
    echo "$(basename "$img"): bit for bit $match (sha256 $sum, $(stat -c %s "$img") bytes)" > "$img.same"
    rm -f "$img"
    note "render: $(basename "$img") is bit for bit $match (kept as $(basename "$img").same)"
}

render_csv="$out/render-figures.csv"
# render_one NAME OBJ BACKEND WIDTH HEIGHT SPP: one render, its log, image and CSV row. The
# render is an EXR (linear radiance, kept with the scenes: too big to bring back) for
# compare_backends; the image committed with the results is made from it by `gasworks merge`.
render_one() {
    local name="$1" obj="$2" backend="$3" w="$4" h="$5" spp="$6"
    local log="$out/render-$name-$backend.log" exr="$scenes/render-$name-$backend.exr" img="$out/$name-$backend.webp"
    rm -f "$exr"
    # -v: the scheduler's summary too, with how well the cost map ranked the tiles.
    local cmd=("$bin" render "$obj" -o "$exr" --backend "$backend" --width "$w" --height "$h" --spp "$spp" --max-depth 8 -v)
    logged "$log" "${cmd[@]}" || { fail "render $name on $backend (see $log)"; return; }
    # Every GPU image is kept, as a lossless WebP (a PNG's pixels in about a third fewer bytes:
    # the committed results travel with every later device call, 64 MiB in all); of the CPU's,
    # only the Cornell box's: anyone can make the others again without a GPU (the log holds
    # the command).
    if [ "$backend" != cpu ] || [ "$name" = cornell ]; then
        "$bin" merge "$exr" -o "$img" >> "$log" 2>&1 || fail "WebP of $exr (see $log)"
        same_as_committed "$img"
    fi
    # The render's timings line (tests/cli_render_output.rs pins its format):
    # "time: load L s, build B s, render R s, S M samples/s" and, for OptiX,
    # ", R M rays/s (N rays)".
    local figures rays
    figures="$(sed -n 's/^time: load \([0-9.]*\) s, build \([0-9.]*\) s, render \([0-9.]*\) s, \([0-9.]*\) M samples\/s.*/\1,\2,\3,\4/p' "$log" | tail -n1)"
    rays="$(sed -n 's/^time: .*, \([0-9.]*\) M rays\/s (\([0-9]*\) rays).*/\2,\1/p' "$log" | tail -n1)"
    [ -n "$figures" ] || { fail "no time: line in $log"; return; }
    [ -n "$rays" ] || rays=","
    echo "$name,$backend,$w,$h,$spp,8,$figures,$rays" >> "$render_csv"
    note "render $name $backend ${w}x${h} ${spp} spp: load,build,render s, M samples/s = $figures; rays, M rays/s = $rays"
    local ranked
    ranked="$(grep -m1 'cost map vs measured tile times' "$log" | sed 's/^ *//')"
    [ -z "$ranked" ] || note "render $name $backend: $ranked"
}

step_render() {
    need_sponza
    need_toystore
    # No comparison with a render of an earlier run (another binary, perhaps).
    rm -f "$scenes"/render-*.exr
    if [ ! -s "$render_csv" ]; then
        echo "scene,backend,width,height,spp,max_depth,load_s,build_s,render_s,msamples_per_s,rays,mrays_per_s" > "$render_csv"
        meta "$render_csv" "scripts/gpu-session.sh render"
    fi
    local backends=(optix)
    [ "${GW_SKIP_CPU:-0}" = 1 ] || backends+=(cpu)
    local b
    for b in "${backends[@]}"; do
        render_one cornell "$cornell" "$b" 1024 1024 256
        render_one sponza-like "$sponza" "$b" 1920 1080 64
        render_one toystore "$toystore" "$b" 1920 1080 64
    done
    local name
    for name in cornell sponza-like toystore; do
        compare_backends "$name"
    done
    compare_aov_layers
}

# `--aov` on a GPU render: the layers are traced on the CPU BVH whatever the backend (a GPU
# render without CPU workers builds it and traces them on a thread of its own, beside the GPU's
# setup and frame), so the GPU render's layer files are the CPU render's, byte for byte. A few
# seconds: the Cornell box at 256x256, 4 spp. Then what the layers add to a GPU render's wall
# time: the toystore at 1920x1080, 64 spp, on the GPU without and with them (about 10 s).
compare_aov_layers() {
    local b layer log
    for b in optix cpu; do
        log="$out/aov-$b.log"
        logged "$log" "$bin" render "$cornell" -o "$scenes/aov-$b.exr" --backend "$b" \
            --width 256 --height 256 --spp 4 --aov albedo,normal \
            || { fail "render --aov on $b (see $log)"; return; }
    done
    for layer in albedo normal; do
        if cmp -s "$scenes/aov-optix.$layer.exr" "$scenes/aov-cpu.$layer.exr"; then
            note "render aov: the GPU render's $layer layer is the CPU render's, byte for byte"
        else
            fail "render aov: the GPU render's $layer layer differs from the CPU render's (see $out/aov-optix.log)"
        fi
    done
    grep -q "beside the GPU's setup and frame" "$out/aov-optix.log" \
        || fail "render aov: the GPU render did not trace its layers beside the GPU (see $out/aov-optix.log)"
    local with t0 t1 walls=()
    for with in none layers; do
        log="$out/aov-toystore-$with.log"
        local extra=()
        [ "$with" = none ] || extra=(--aov "albedo,normal")
        t0=$(date +%s%N)
        logged "$log" "$bin" render "$toystore" -o "$scenes/aov-toystore.exr" --backend optix \
            --width 1920 --height 1080 --spp 64 "${extra[@]}" \
            || { fail "render the toystore on the GPU, $with (see $log)"; return; }
        t1=$(date +%s%N)
        walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", (b - a) / 1e9}')")
        echo "# process wall time: ${walls[-1]} s" >> "$log"
    done
    note "render aov toystore 1920x1080 64 spp on the GPU: process wall time ${walls[0]} s without --aov, ${walls[1]} s with albedo,normal ($(sed -n 's/^aov: .*normal, \(.*\))$/\1/p' "$out/aov-toystore-layers.log"))"
}

# Agreement of the GPU render with the CPU's, scene by scene: the difference of their mean
# luminances in standard errors over the pixels (`gasworks image-stats`, the CPU image first).
# Two unbiased renders differ by a few at most; a bias in either (a wrong texture lookup, a
# lost light path) shows as many. Above GW_RENDER_SE (default 6) the step fails.
compare_backends() {
    local name="$1" cpu="$scenes/render-$1-cpu.exr" gpu="$scenes/render-$1-optix.exr"
    local log="$out/compare-$name.log" line se
    [ -s "$cpu" ] && [ -s "$gpu" ] || return 0
    logged "$log" "$bin" image-stats "$cpu" "$gpu" || { fail "image-stats of the $name renders (see $log)"; return; }
    if grep -q "pixels bit-identical to the first image" "$log"; then
        note "render compare $name: the GPU and CPU images are bit-identical"
        return
    fi
    line="$(grep -m1 "mean luminance difference" "$log" || true)"
    se="$(sed -n 's/.*: \([0-9.]*\|inf\) standard errors$/\1/p' <<< "$line")"
    [ -n "$se" ] || { fail "no mean luminance difference in $log"; return; }
    note "render compare $name: GPU vs CPU $(grep -m1 '^vs first' "$log" | sed 's/^vs first *//; s/, fireflies.*//'),${line#*difference}"
    if [ "$se" = inf ] || awk -v se="$se" -v limit="${GW_RENDER_SE:-6}" 'BEGIN { exit !(se > limit) }'; then
        fail "the GPU render of $name differs from the CPU's by $se standard errors of the mean luminance (see $log)"
    fi
}

step_sched() {
    need_toystore
    local w=960 h=540 spp=16 ref="" d sch
    # Bit-identical across GPU worker counts and schedules (EXR: the exact floats).
    for d in gpu0 gpu0x2 gpu0x4; do
        for sch in regular sorted adaptive; do
            local img="$scenes/sched-$d-$sch.exr" log="$out/sched-$d-$sch.log"
            logged "$log" "$bin" render "$toystore" -o "$img" --backend optix --devices "$d" --schedule "$sch" \
                --width $w --height $h --spp $spp --stats "$out/sched-$d-$sch.csv" \
                || { fail "scheduler render --devices $d --schedule $sch (see $log)"; continue; }
            local sum
            sum="$(sha256sum "$img" | cut -d' ' -f1)"
            echo "# image sha256: $sum" >> "$log"
            if [ -z "$ref" ]; then ref="$sum"; elif [ "$sum" != "$ref" ]; then
                fail "image differs with --devices $d --schedule $sch (sha256 $sum, first was $ref)"
            fi
        done
    done
    [ -n "$ref" ] && note "sched: every GPU worker count and schedule gave one image (sha256 $ref)" 
    # The GAS builds as render enqueues them with threads: 4 enqueue threads on 16 streams, for
    # which --build-contexts auto (the default) picks a context per stream. The backend line
    # must say so; the image is expected to be the one above (the same GASes, built through
    # other contexts), and is reported either way.
    local threaded="$scenes/sched-enqueue-threads.exr" tlog="$out/sched-enqueue-threads.log" tsum
    if logged "$tlog" "$bin" render "$toystore" -o "$threaded" --backend optix --devices gpu0 \
        --streams 16 --enqueue-threads 4 --width $w --height $h --spp $spp; then
        grep -q "16 streams (.*4 enqueue threads, a context per stream)" "$tlog" \
            || fail "sched: --enqueue-threads 4 did not get a context per stream under --build-contexts auto (see $tlog)"
        tsum="$(sha256sum "$threaded" | cut -d' ' -f1)"
        if [ "$tsum" = "$ref" ]; then
            note "sched: 4 enqueue threads through a context per stream (auto): the same image"
        else
            note "sched: 4 enqueue threads through a context per stream (auto): another image (sha256 $tsum; image-stats in $tlog)"
            "$bin" image-stats "$scenes/sched-gpu0-regular.exr" "$threaded" >> "$tlog" 2>&1
        fi
    else
        fail "sched: the render with 4 enqueue threads on 16 streams (see $tlog)"
    fi
    # GPU and CPU workers together: per-worker busy time and efficiency, calibrated (the
    # default) and not (how the H100 ran it on 2026-11-24: 1.564 s against 0.05 s without the
    # CPU); then a frame heavy enough (256 spp) for the CPU threads to help, beside gpu0x2 alone.
    logged "$out/sched-gpu0x2-cpu.log" "$bin" render "$toystore" -o "$scenes/sched-mixed.exr" --backend optix \
        --devices gpu0x2,cpu --width $w --height $h --spp $spp --stats "$out/sched-gpu0x2-cpu.csv" \
        || fail "scheduler render --devices gpu0x2,cpu"
    logged "$out/sched-gpu0x2-cpu-uncalibrated.log" "$bin" render "$toystore" -o "$scenes/sched-mixed-u.exr" \
        --backend optix --devices gpu0x2,cpu --calibrate off --width $w --height $h --spp $spp \
        --stats "$out/sched-gpu0x2-cpu-uncalibrated.csv" \
        || fail "scheduler render --devices gpu0x2,cpu --calibrate off"
    local d256
    for d256 in gpu0x2 gpu0x2,cpu; do
        logged "$out/sched-${d256/,/-}-256spp.log" "$bin" render "$toystore" -o "$scenes/sched-256.exr" \
            --backend optix --devices "$d256" --width $w --height $h --spp 256 \
            --stats "$out/sched-${d256/,/-}-256spp.csv" \
            || fail "scheduler render --devices $d256 --spp 256"
    done
    # Beside it, the CPU threads' shares not cut into pieces (as on the H200 on 2026-11-26,
    # when they took no tile): what the pieces change, in the same call.
    logged "$out/sched-gpu0x2-cpu-256spp-uncut.log" "$bin" render "$toystore" -o "$scenes/sched-256.exr" \
        --backend optix --devices gpu0x2,cpu --slow-worker-pieces 0 --width $w --height $h --spp 256 \
        --stats "$out/sched-gpu0x2-cpu-256spp-uncut.csv" \
        || fail "scheduler render --devices gpu0x2,cpu --spp 256 --slow-worker-pieces 0"
    # The same in four passes: a CPU group the guard kept idle in one pass must keep its speed
    # for the next (fixed 2026-11-25; before, it was planned at the GPU's speed from pass 2 on).
    logged "$out/sched-gpu0x2-cpu-256spp-passes.log" "$bin" render "$toystore" -o "$scenes/sched-256p.exr" \
        --backend optix --devices gpu0x2,cpu --width $w --height $h --spp 256 --pass-spp 64 \
        --stats "$out/sched-gpu0x2-cpu-256spp-passes.csv" \
        || fail "scheduler render --devices gpu0x2,cpu --spp 256 --pass-spp 64"
    # And on the GPU alone: do costs measured on a GPU make its own later passes better
    # planned, as they do on CPU threads? (`gasworks schedule-sim --replay-corrections` replays it.)
    logged "$out/sched-gpu0x2-256spp-passes.log" "$bin" render "$toystore" -o "$scenes/sched-256g.exr" \
        --backend optix --devices gpu0x2 --width $w --height $h --spp 256 --pass-spp 64 \
        --stats "$out/sched-gpu0x2-256spp-passes.csv" \
        || fail "scheduler render --devices gpu0x2 --spp 256 --pass-spp 64"
    grep -hiE "efficiency|makespan|calibration" "$out"/sched-*.log 2>/dev/null | head -n 40 | tee -a "$summary" >&2
    # The cost maps (0.5 MB each, one per render) are compressed: `gunzip` them before
    # `gasworks schedule-sim` replays a render's tiles.
    gzip -9f "$out"/sched-*.costmap.csv 2>/dev/null || true
    # A GPU render stopped by --time-limit after its first pass, then resumed: the image of an
    # uninterrupted render in the same passes, bit for bit.
    local passes=(--backend optix --devices gpu0x2 --width "$w" --height "$h" --spp "$spp" --pass-spp 4)
    local whole="$scenes/sched-passes.exr" part="$scenes/sched-resumed.exr"
    rm -f "$part.gasworks-resume"
    if logged "$out/sched-passes.log" "$bin" render "$toystore" -o "$whole" "${passes[@]}" \
        && logged "$out/sched-time-limit.log" "$bin" render "$toystore" -o "$part" "${passes[@]}" --time-limit 0.001s \
        && logged "$out/sched-resumed.log" "$bin" render "$toystore" -o "$part" "${passes[@]}" \
            --resume "$part.gasworks-resume"; then
        local a b
        a="$(sha256sum "$whole" | cut -d' ' -f1)"
        b="$(sha256sum "$part" | cut -d' ' -f1)"
        if [ "$a" = "$b" ]; then
            note "sched: stopped at a time limit and resumed on the GPU: the uninterrupted image (sha256 $a)"
        else
            fail "resumed GPU render differs from the uninterrupted one (sha256 $b, expected $a)"
        fi
    else
        fail "time-limit/resume renders on the GPU (see $out/sched-time-limit.log, $out/sched-resumed.log)"
    fi
    step_sched_mid_pass_stop
    step_sched_adaptive
}

# Adaptive sampling on the GPU (--noise-threshold, since 2026-12-01): from the third pass on,
# the GPU's tiles skip the stopped blocks (since 2026-12-02: the launches' skip bytes; before,
# pieces of any shape between them). The image must not depend on the GPU's worker count, and
# a --time-limit stop (after one pass) resumed must give it too, bit for bit. The first render
# runs with -v: its `work per pass` table says whether a late pass of few blocks delivers its
# samples as fast as a full pass (the note quotes the first and the last pass).
# The first and the last row of a render log's `work per pass` table (-v), as
# "1: 4 tiles, 2073600, 412.00; 16: 3 tiles, 1352192, 398.20".
work_per_pass_ends() {
    awk '/^  work per pass:/ { on = 1; next }
         on && /^    +[0-9]/ { row = $1 ": " $2 " tiles, " $4 ", " $7; if (!first) first = row; last = row; next }
         on { on = 0 }
         END { if (first) print first "; " last; else print "no table" }' "$1"
}

# replay_summary LOG: of a `schedule-sim --replay-corrections` log, the passes over part of
# the image and the largest difference of any pass between the replayed costs and the
# render's (near 0 where the replay rebuilt the plan).
replay_summary() {
    awk '/^pass [0-9]+:/ { n++; if (/over part of the image/) part++; d = $NF + 0; if (d > most) most = d }
         END { printf "%d passes, %d over part of the image, largest difference from the planned costs %.1e\n", n, part, most }' "$1"
}

step_sched_adaptive() {
    local opts=(--backend optix --width 960 --height 540 --spp 64 --noise-threshold 0.02)
    local one="$scenes/sched-adaptive-gpu0.exr" four="$scenes/sched-adaptive-gpu0x4.exr"
    local part="$scenes/sched-adaptive-resumed.exr"
    rm -f "$part.gasworks-resume"
    if logged "$out/sched-adaptive-gpu0.log" "$bin" render "$toystore" -o "$one" "${opts[@]}" --devices gpu0 -v \
            --stats "$out/sched-adaptive-gpu0.csv" \
        && logged "$out/sched-adaptive-gpu0x4.log" "$bin" render "$toystore" -o "$four" "${opts[@]}" --devices gpu0x4 \
        && logged "$out/sched-adaptive-time-limit.log" "$bin" render "$toystore" -o "$part" "${opts[@]}" \
            --devices gpu0x2 --time-limit 0.001s \
        && logged "$out/sched-adaptive-resumed.log" "$bin" render "$toystore" -o "$part" "${opts[@]}" \
            --devices gpu0x2 --resume "$part.gasworks-resume"; then
        local a b c
        a="$(sha256sum "$one" | cut -d' ' -f1)"
        b="$(sha256sum "$four" | cut -d' ' -f1)"
        c="$(sha256sum "$part" | cut -d' ' -f1)"
        if [ "$a" = "$b" ] && [ "$a" = "$c" ]; then
            note "sched: adaptive sampling on the GPU: one image on 1 and 4 streams and after a stop and --resume (sha256 $a); $(grep -m1 '^output:' "$out/sched-adaptive-gpu0.log" | sed 's/^output: [^(]*//')"
            note "sched: adaptive on 1 stream, work per pass (pass: tiles, rendered pixel-samples, M pixel-samples/s): $(work_per_pass_ends "$out/sched-adaptive-gpu0.log")"
            # Its tiles that skip stopped blocks, replayed from its statistics (OUT.blocks.csv
            # among them): the costs rebuilt must be those it planned with, pass by pass.
            local replay="$out/sched-adaptive-gpu0-replay.log"
            if logged "$replay" "$bin" schedule-sim "$out/sched-adaptive-gpu0.csv" --replay-corrections; then
                note "sched: adaptive on 1 stream, replayed: $(replay_summary "$replay")"
            else
                fail "schedule-sim --replay-corrections on the adaptive GPU render (see $replay)"
            fi
            gzip -9f "$out"/sched-adaptive-gpu0.costmap.csv 2>/dev/null || true
        else
            fail "adaptive sampling on the GPU: the images differ (1 stream $a, 4 streams $b, stopped and resumed $c)"
        fi
    else
        fail "adaptive renders on the GPU (see $out/sched-adaptive-*.log)"
    fi
}

# A GPU render in one pass (the default) stopped by SIGTERM once some tiles are done, then
# resumed under another layout: the resume file keeps the finished tiles (since 2026-11-27),
# the resumed run renders the pass only where it is missing, and the image is the
# uninterrupted one, bit for bit.
step_sched_mid_pass_stop() {
    local one=(--backend optix --devices gpu0x2 --width 960 --height 540 --spp 1024)
    local whole="$scenes/sched-one-pass.exr" part="$scenes/sched-one-pass-stopped.exr"
    local slog="$out/sched-stopped-mid-pass.log" rlog="$out/sched-resumed-mid-pass.log"
    rm -f "$part" "$part.gasworks-resume"
    if [ "$(left)" -le 60 ]; then
        note "skipped (budget spent): the mid-pass stop and resume"
        return
    fi
    header "$slog" "$bin" render "$toystore" -o "$part" "${one[@]}" --tiles 64 --progress lines
    "$bin" render "$toystore" -o "$part" "${one[@]}" --tiles 64 --progress lines >> "$slog" 2>&1 &
    local pid=$! waited=0 rc=0
    # The first progress line comes once a tenth of the tiles are done: then the signal.
    until grep -q "^progress: .* of 64 tiles" "$slog" || ! kill -0 "$pid" 2>/dev/null || [ $waited -ge 600 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || rc=$?
    echo "# exit status $rc" >> "$slog"
    if [ "$rc" != 143 ] || [ ! -s "$part.gasworks-resume" ]; then
        fail "sched: the one-pass GPU render was not stopped inside its pass with a resume file (exit $rc; see $slog)"
        return
    fi
    if logged "$rlog" "$bin" render "$toystore" -o "$part" "${one[@]}" --tiles 23 --schedule adaptive \
            --resume "$part.gasworks-resume" \
        && logged "$out/sched-one-pass.log" "$bin" render "$toystore" -o "$whole" "${one[@]}"; then
        local a b
        a="$(sha256sum "$whole" | cut -d' ' -f1)"
        b="$(sha256sum "$part" | cut -d' ' -f1)"
        if [ "$a" = "$b" ]; then
            note "sched: stopped inside its one pass and resumed under other tiles on the GPU: the uninterrupted image (sha256 $a; $(grep -m1 -o 'samples 0..1024 in [0-9]* of [0-9]* pixels' "$rlog"))"
        else
            fail "the GPU render resumed from a stop inside its pass differs from the uninterrupted one (sha256 $b, expected $a)"
        fi
    else
        fail "sched: the resumed or the uninterrupted one-pass render (see $rlog, $out/sched-one-pass.log)"
    fi
}

# LPT stream assignment (the first H100 run of 2026-11-24 died with CUDA_ERROR_ILLEGAL_ADDRESS
# at 8 streams, LPT, shared scratch; the second hung at 4): every run capped
# (GW_CMD_TIMEOUT_S, 60 s) so that a hang fails one run, not the session.
#  1. round-robin and LPT with guard bands (--guard-bytes): does any build write outside the
#     bytes OptiX asked for? (checked after every run);
#  2. LPT build weights (GW_LPT_WEIGHTS): the weight that balances build time, not triangles;
#  3. compute-sanitizer memcheck on LPT batches.
step_lpt() {
    need_sponza
    local r="${GW_REPEAT_LPT:-20}" limit="${GW_CMD_TIMEOUT_S:-60}" w a
    local bench_cap="$limit" # read by bench_one
    # Which part of LPT breaks (2026-11-24: weight 0 crashed at 8 streams, 250 and 1000 hung at
    # 4, round-robin never failed; every crash was with shared scratch): LPT's streams in build
    # order, round-robin's streams in LPT's order, per-stream scratch, every launch serialised
    # (a race goes away under CUDA_LAUNCH_BLOCKING=1, a bad build does not), OptiX validation.
    bench_one lpt-w0-issued-build "$sponza" "$r" --streams 4,8 --assign lpt --lpt-build-weight 0 --issue-order build --build-contexts shared
    bench_one rr-issued-largest-first "$sponza" "$r" --streams 4,8 --assign round-robin --issue-order largest-first --build-contexts shared
    bench_one lpt-w0-per-stream "$sponza" "$r" --streams 4,8 --assign lpt --lpt-build-weight 0 --scratch per-stream --build-contexts shared
    CUDA_LAUNCH_BLOCKING=1 bench_one lpt-w0-launch-blocking "$sponza" "$r" --streams 4,8 --assign lpt --lpt-build-weight 0 --build-contexts shared
    bench_one lpt-w0-validation "$sponza" 3 --streams 8 --assign lpt --lpt-build-weight 0 --validation --build-contexts shared
    for a in round-robin lpt; do
        bench_one "guards-$a" "$sponza" "$r" --streams 4,8,16 --assign "$a" --scratch shared,per-stream --guard-bytes 65536
    done
    for w in ${GW_LPT_WEIGHTS:-0 1000 5000 20000}; do
        bench_one "lpt-w$w" "$sponza" "$r" --streams 1,2,4,8,16 --assign lpt --lpt-build-weight "$w" --build-contexts shared
    done
    grep -h "streams |\|^guards\|^error\|caused by\|^# stopped\|exit status" "$out"/bench-guards-*.log "$out"/bench-lpt-*.log \
        "$out"/bench-rr-*.log 2>/dev/null \
        | tee -a "$summary" >&2
    local cs
    cs="$(find_sanitizer)"
    if [ -n "$cs" ]; then
        logged "$out/sanitizer-memcheck-lpt.log" timeout -k 5 $((limit + 30)) "$cs" --tool memcheck --error-exitcode 99 \
            "$bin" build-bench "$sponza" --streams 4,8 --assign lpt --scratch shared --repeat 3 --warmup 0 \
            || fail "compute-sanitizer memcheck on LPT batches (see $out/sanitizer-memcheck-lpt.log)"
        grep -h "ERROR SUMMARY" "$out/sanitizer-memcheck-lpt.log" | sed "s/^/memcheck lpt: /" | tee -a "$summary" >&2
    fi
}

# The race behind the LPT crashes (docs/gas-builds.md, known issue), the probes of the H200's
# afternoon session (2026-11-26) as one step: each failing configuration in fresh processes,
# beside the same with one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1, where it passed),
# then compute-sanitizer racecheck and synccheck on it. Each run capped at 30 s (GW_RACE_CAP_S)
# with a 10 s watchdog, so a hang also checks the watchdog. One log, race.log: per run its
# arguments, the result line or error, and the exit status.
# race_run ENV ARGS...: one build-bench run of the race step into $race_log (ENV a VAR=value,
# or - for none).
race_log=""
race_cap=30
# The scene of the next race_run: the 390-group sponza-like unless a run names another.
race_scene=""
race_run() {
    local env="$1" rc=0 t0 scene="${race_scene:-$sponza}"
    shift
    [ "$(left)" -gt $((race_cap + 15)) ] || { echo "## not run (budget): $env $*" >> "$race_log"; return; }
    echo "## $env $* (scene $(basename "$(dirname "$scene")")/$(basename "$scene"))" >> "$race_log"
    t0=$(date +%s)
    if [ "$env" = - ]; then
        GASWORKS_BUILD_WAIT_S=10 timeout -k 5 "$race_cap" "$bin" build-bench "$scene" "$@" > "$out/race-run.tmp" 2>&1 || rc=$?
    else
        env "$env" GASWORKS_BUILD_WAIT_S=10 timeout -k 5 "$race_cap" "$bin" build-bench "$scene" "$@" > "$out/race-run.tmp" 2>&1 || rc=$?
    fi
    grep -E "streams \||^error|caused by|did not finish" "$out/race-run.tmp" | cut -c1-300 >> "$race_log"
    echo "## exit $rc after $(( $(date +%s) - t0 )) s" >> "$race_log"
}

# repro_run ENV ARGS...: the reproducer (repro/stream-race/stream_race.c) on the sponza-like
# triangle counts, capped like a build-bench run, into repro.log with its exit status.
repro_run() {
    local env="$1" rc=0 t0
    shift
    [ "$(left)" -gt $((race_cap + 15)) ] || { echo "## not run (budget): $env $*" >> "$repro_log"; return; }
    echo "## $env $*" >> "$repro_log"
    t0=$(date +%s)
    if [ "$env" = - ]; then
        timeout -k 5 "$race_cap" "$repro" "$repro_counts" "$@" > "$out/repro-run.tmp" 2>&1 || rc=$?
    else
        env "$env" timeout -k 5 "$race_cap" "$repro" "$repro_counts" "$@" > "$out/repro-run.tmp" 2>&1 || rc=$?
    fi
    # The setup line, the failure and OptiX's last words; of the batches' times, the last.
    {
        grep -v "^batch " "$out/repro-run.tmp" | tail -n 12 | cut -c1-300
        grep "^batch " "$out/repro-run.tmp" | tail -n 1
        echo "## exit $rc after $(( $(date +%s) - t0 )) s"
    } >> "$repro_log"
}

# The reproducer for NVIDIA: no gasworks code, the same batch as build-bench's failing ones
# (the sponza-like scene's 390 triangle counts, 8 streams, one scratch allocation cut per
# stream), issued largest first through one context, beside build order, a context per
# stream and one hardware queue, which passed in build-bench.
step_race_repro() {
    repro="$dev/stream_race"
    if [ ! -x "$repro" ]; then
        repro="$dev/stream_race.built"
        if ! cc -O2 -o "$repro" "$root/repro/stream-race/stream_race.c" -ldl 2> "$out/repro-cc.log"; then
            note "race: no stream_race in the archive and no C compiler here: the reproducer was not run"
            return
        fi
    fi
    repro_counts="$out/sponza-like-triangle-counts.txt"
    "$bin" info "$sponza" --groups --quiet | sed -n '/^group list:/,$p' | awk 'NR > 1 {print $1}' > "$repro_counts"
    repro_log="$out/repro.log"
    header "$repro_log" "stream_race $repro_counts ARGS ($(wc -l < "$repro_counts") GASes), each capped at $race_cap s"
    repro_run - --streams 8 --order largest --repeat 20
    repro_run - --streams 8 --order largest --repeat 20
    repro_run - --streams 8 --order largest --repeat 20
    repro_run - --streams 8 --order largest --assign lpt --repeat 20
    repro_run - --streams 8 --order build --repeat 20
    repro_run - --streams 8 --order largest --contexts per-stream --repeat 20
    repro_run CUDA_DEVICE_MAX_CONNECTIONS=1 --streams 8 --order largest --repeat 20
    note "race: the reproducer (stream_race, no gasworks code): $(grep -c "^## exit 0" "$repro_log") of 7 runs passed; exit statuses (largest first x3, LPT largest first, build order, a context per stream, one hardware queue): $(grep "^## exit" "$repro_log" | awk '{printf "%s ", $3}')"
}

step_race() {
    need_sponza
    local cs tool
    race_cap="${GW_RACE_CAP_S:-30}"
    # First the smallest question: does a program with no gasworks code in it crash the same
    # way? (If it does, NVIDIA gets it.)
    step_race_repro
    # First the question of this step: do the crashes go with a context per stream? The
    # failing batches share nothing of gasworks' with each other but the one OptiX context's
    # internal state (docs/gas-builds.md). The same configurations as below, each build
    # through its own stream's context (tests/gpu_build_contexts.rs checks the hits).
    race_log="$out/race-contexts.log"
    header "$race_log" "build-bench $sponza ARGS --build-contexts per-stream, each capped at $race_cap s, GASWORKS_BUILD_WAIT_S=10"
    local pc=(--build-contexts per-stream)
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 1 --warmup 0 "${pc[@]}"
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 1 --warmup 0 "${pc[@]}"
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 1 --warmup 0 "${pc[@]}"
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 20 "${pc[@]}"
    race_run - --streams 8 --assign round-robin --issue-order largest-first --repeat 20 "${pc[@]}"
    race_run - --streams 8 --enqueue-threads 4 --repeat 20 "${pc[@]}"
    grep -c "^## exit 0" "$race_log" | sed 's/^/race: with a context per stream, build-bench runs that passed (of 6): /' | tee -a "$summary" >&2
    # Then as they crashed: through one context (build-bench's `auto` would now pick a context
    # per stream for every one of them).
    race_log="$out/race.log"
    local sc=(--build-contexts shared)
    header "$race_log" "build-bench $sponza ARGS --build-contexts shared, each capped at $race_cap s, GASWORKS_BUILD_WAIT_S=10"
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 1 --warmup 0 "${sc[@]}"
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 1 --warmup 0 "${sc[@]}"
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 1 --warmup 0 "${sc[@]}"
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 20 "${sc[@]}"
    race_run CUDA_DEVICE_MAX_CONNECTIONS=1 --streams 8 --assign lpt --lpt-build-weight 0 --repeat 20 "${sc[@]}"
    race_run CUDA_DEVICE_MAX_CONNECTIONS=2 --streams 8 --assign lpt --lpt-build-weight 0 --repeat 20 "${sc[@]}"
    race_run - --streams 8 --assign round-robin --issue-order largest-first --repeat 20 "${sc[@]}"
    race_run CUDA_DEVICE_MAX_CONNECTIONS=1 --streams 8 --assign round-robin --issue-order largest-first --repeat 20 "${sc[@]}"
    race_run - --streams 8 --assign lpt --lpt-build-weight 0 --flags fast-build --repeat 20 "${sc[@]}"
    race_run - --streams 8 --enqueue-threads 4 --repeat 20 "${sc[@]}"
    # Does the crash follow the number of builds in a batch? OptiX's last words on the H200
    # were about its queue of outstanding requests ("syncing on outstanding request event
    # (T = 229, H = 696)", "acquiring CBL command list buffer"): the same LPT weight-0 batch
    # at 8 streams over sponza-like scenes of 48 and 1560 groups, in fresh processes.
    local groups dir
    for groups in 48 1560; do
        dir="$(dirname "$(dirname "$sponza")")/sponza-like-$groups"
        [ -s "$dir/sponza_like.obj" ] || "$bin" gen sponza-like --groups "$groups" --quiet -o "$dir" > /dev/null 2>&1
        race_scene="$dir/sponza_like.obj"
        race_run - --streams 8 --assign lpt --lpt-build-weight 0 --repeat 20 "${sc[@]}"
    done
    race_scene=""
    rm -f "$out/race-run.tmp"
    cs="$(find_sanitizer)"
    if [ -n "$cs" ]; then
        for tool in racecheck synccheck; do
            logged "$out/sanitizer-$tool-lpt.log" timeout -k 5 $((race_cap * 3)) "$cs" --tool "$tool" \
                "$bin" build-bench "$sponza" --streams 8 --assign lpt --lpt-build-weight 0 --repeat 2 --warmup 0 --build-contexts shared
            grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$out/sanitizer-$tool-lpt.log" | sed "s/^/$tool lpt: /" | tee -a "$summary" >&2
        done
    fi
    grep -c "^## exit 0" "$race_log" | sed 's/^/race: build-bench runs that passed (of 12): /' | tee -a "$summary" >&2
}

# The watchdog on GAS batches (GASWORKS_BUILD_WAIT_S; src/optix/watchdog.rs): LPT weighted
# 1000 or 250 at 4 streams hung on the H100 (2026-11-24) and the H200 (2026-11-26), or crashed
# at once. The H200's hangs blocked the host inside the enqueue, where only the watchdog's
# thread can speak: with a 10 s limit, a hung run must end with the message naming the batch
# (exit 75 from the watchdog, or 1 from GasBatch::wait's own report) well within its 45 s cap.
# Up to GW_WATCHDOG_TRIES runs (default 4), alternating the two weights, until one hangs. A run
# that passes or fails at once says nothing of the watchdog and the next is tried; a run that
# the cap had to kill is the failure this step looks for. One log, watchdog.log.
step_watchdog() {
    need_sponza
    local log="$out/watchdog.log" try tries="${GW_WATCHDOG_TRIES:-4}" wd_cap="${GW_WATCHDOG_CAP_S:-45}"
    local limit="${GW_WATCHDOG_S:-10}" weight rc t0 said
    header "$log" "GASWORKS_BUILD_WAIT_S=$limit build-bench $sponza --streams 4 --assign lpt --lpt-build-weight W --repeat 20 --build-contexts shared, each capped at $wd_cap s, until one hangs"
    for ((try = 1; try <= tries; try++)); do
        [ "$(left)" -gt $((wd_cap + 15)) ] || { note "watchdog: try $try not run (budget)"; return; }
        weight=$(( try % 2 == 1 ? 1000 : 250 ))
        echo "## try $try: --lpt-build-weight $weight" >> "$log"
        rc=0
        t0=$(date +%s)
        GASWORKS_BUILD_WAIT_S="$limit" timeout -k 5 "$wd_cap" "$bin" build-bench "$sponza" --streams 4 \
            --assign lpt --lpt-build-weight "$weight" --repeat 20 --build-contexts shared > "$out/watchdog-run.tmp" 2>&1 || rc=$?
        cat "$out/watchdog-run.tmp" >> "$log"
        echo "## exit $rc after $(( $(date +%s) - t0 )) s" >> "$log"
        said="$(grep -m1 -E "ending the process now|did not finish within" "$out/watchdog-run.tmp" | cut -c1-400)"
        if [ -n "$said" ]; then
            note "watchdog: try $try (weight $weight) hung and was named (exit $rc after $(( $(date +%s) - t0 )) s): $said"
            rm -f "$out/watchdog-run.tmp"
            return
        fi
        case "$rc" in
            0) note "watchdog: try $try (weight $weight) did not hang (passed)" ;;
            124|137)
                fail "watchdog: try $try (weight $weight) hung past its $wd_cap s cap (exit $rc) without the watchdog's message (see $log)"
                rm -f "$out/watchdog-run.tmp"
                return ;;
            *) note "watchdog: try $try (weight $weight) did not hang (exit $rc: $(grep -m1 -E "^error|caused by" "$out/watchdog-run.tmp" | cut -c1-200))" ;;
        esac
    done
    rm -f "$out/watchdog-run.tmp"
    note "watchdog: none of $tries tries hung (nothing learned of the watchdog)"
}

# A GPU whose context is lost mid-frame: gasworks faults on purpose on the GPU's 5th tile (a
# kernel storing to address 0; the test binary's hook, which the release binary has not got),
# under the render's default --on-worker-error retire. The sticky
# error must retire all four streams in one warning, and the CPU threads finish the frame.
# (tests/gpu_lost_context.rs checks the same within the tests step; this keeps the words.)
step_failover() {
    # Mid-frame (the GPU's 5th tile, uncalibrated), then in the calibration (its first tile is
    # its calibration piece: the streams must be retired before the first pass).
    failover_run failover 5 off "in pass"
    failover_run failover-calibration 1 on "before pass 1"
}

# failover_run NAME TILE CALIBRATE WHEN: the render whose GPU tile TILE faults on purpose, and
# its checks; WHEN is how the closing line must say the streams were retired.
failover_run() {
    local name="$1" tile="$2" calibrate="$3" when="$4"
    local log="$out/$name.log" img="$scenes/$name.exr" warnings warning
    GASWORKS_FAULT_AT_TILE=$tile GASWORKS_ON_WORKER_ERROR=retire logged "$log" "$test_bin" render "$cornell" -o "$img" \
        --backend optix --devices gpu0x4,cpu --calibrate "$calibrate" --width 512 --height 512 --spp 16 --pass-spp 4 \
        --stats "$out/$name-stats.csv" \
        || { fail "$name: the render whose GPU faulted on purpose did not finish on the CPU (see $log)"; return; }
    warnings="$(grep -E '^warning: (calibrating )?worker gpu0/s' "$log" || true)"
    warning="$(head -n1 <<< "$warnings")"
    note "$name: ${warning:-no retirement warning}"
    note "$name: $(grep -m1 '^warning: the frame went on without' "$log" || echo 'no closing warning')"
    if [ -z "$warning" ] || [ "$(wc -l <<< "$warnings")" != 1 ]; then
        fail "$name: not exactly one retirement warning (see $log)"
    fi
    grep -qE 'CUDA_ERROR_(ILLEGAL_ADDRESS|LAUNCH_FAILED)' <<< "$warning" || fail "$name: the warning names no sticky CUDA error (see $log)"
    grep -qE 'gpu0 can render no more \(its device is lost.*\), so its workers' <<< "$warning" \
        || fail "$name: the GPU's streams were not retired together (see $log)"
    grep -q '^warning: the frame went on without 4 of ' "$log" || fail "$name: the closing line does not count 4 retired streams (see $log)"
    grep -q "^warning: the frame went on without .*retired $when" "$log" || fail "$name: the closing line does not say \"retired $when\" (see $log)"
    [ -s "$img" ] || fail "$name: no image"
}

# GPU against CPU on the Cornell box path depth by path depth (--max-depth 1..8): where the two
# first disagree is the bounce that holds the difference.
step_depth() {
    local w=256 h=256 spp=256 d b
    for d in 1 2 3 4 6 8; do
        for b in optix cpu; do
            logged "$out/depth-$d-$b.log" "$bin" render "$cornell" -o "$scenes/depth-$d-$b.exr" --backend "$b" \
                --width $w --height $h --spp $spp --max-depth "$d" --quiet || fail "depth $d render on $b"
        done
        logged "$out/depth-$d-compare.log" "$bin" image-stats "$scenes/depth-$d-cpu.exr" "$scenes/depth-$d-optix.exr" \
            || fail "image-stats at depth $d"
        note "depth $d: $(grep -m1 '^vs first' "$out/depth-$d-compare.log" | sed 's/^vs first *//; s/, fireflies.*//');$(grep -m1 'mean luminance difference' "$out/depth-$d-compare.log" | sed 's/.*difference//')"
    done
    for b in optix cpu; do
        logged "$out/depth-8-two-sided-$b.log" "$bin" render "$cornell" -o "$scenes/depth-8-two-sided-$b.exr" --backend "$b" \
            --width $w --height $h --spp $spp --max-depth 8 --two-sided-lights --quiet || fail "two-sided render on $b"
    done
    logged "$out/depth-8-two-sided-compare.log" "$bin" image-stats "$scenes/depth-8-two-sided-cpu.exr" "$scenes/depth-8-two-sided-optix.exr"
    note "depth 8, two-sided lights: $(grep -m1 'mean luminance difference' "$out/depth-8-two-sided-compare.log" | sed 's/.*difference//')"
    # The tent pixel filter puts the jitter through sqrt: at depth 1 still bit for bit.
    for b in optix cpu; do
        logged "$out/depth-1-tent-$b.log" "$bin" render "$cornell" -o "$scenes/depth-1-tent-$b.exr" --backend "$b" \
            --width $w --height $h --spp $spp --max-depth 1 --filter tent --quiet || fail "tent render on $b"
    done
    logged "$out/depth-1-tent-compare.log" "$bin" image-stats "$scenes/depth-1-tent-cpu.exr" "$scenes/depth-1-tent-optix.exr" \
        || fail "image-stats of the tent renders"
    note "depth 1, tent filter: $(grep -m1 -e 'bit-identical' -e 'pixels differ' "$out/depth-1-tent-compare.log" | sed 's/^ *//')"
    # A thin lens draws one more slot, the lens point, through cosf and sinf, which the GPU
    # rounds its own way: compared by the mean, as the depth-8 renders are.
    for b in optix cpu; do
        logged "$out/depth-8-lens-$b.log" "$bin" render "$cornell" -o "$scenes/depth-8-lens-$b.exr" --backend "$b" \
            --width $w --height $h --spp $spp --max-depth 8 --lens-radius 20 --focus-distance 1100 --quiet \
            || fail "thin-lens render on $b"
    done
    logged "$out/depth-8-lens-compare.log" "$bin" image-stats "$scenes/depth-8-lens-cpu.exr" "$scenes/depth-8-lens-optix.exr" \
        || fail "image-stats of the thin-lens renders"
    note "depth 8, thin lens: $(grep -m1 'mean luminance difference' "$out/depth-8-lens-compare.log" | sed 's/.*difference//')"
    # Adaptive sampling (--noise-threshold) decides from each backend's own samples, so the
    # two stop other blocks at other passes: compared by the mean, and by the samples taken.
    for b in optix cpu; do
        logged "$out/depth-8-adaptive-$b.log" "$bin" render "$cornell" -o "$scenes/depth-8-adaptive-$b.exr" --backend "$b" \
            --width $w --height $h --spp $spp --max-depth 8 --noise-threshold 0.01 \
            || fail "adaptive render on $b"
    done
    logged "$out/depth-8-adaptive-compare.log" "$bin" image-stats "$scenes/depth-8-adaptive-cpu.exr" "$scenes/depth-8-adaptive-optix.exr" \
        || fail "image-stats of the adaptive renders"
    note "depth 8, adaptive: $(grep -m1 'mean luminance difference' "$out/depth-8-adaptive-compare.log" | sed 's/.*difference//'); GPU $(grep -m1 -o 'adaptive: [0-9.]* samples per pixel' "$out/depth-8-adaptive-optix.log"), CPU $(grep -m1 -o 'adaptive: [0-9.]* samples per pixel' "$out/depth-8-adaptive-cpu.log")"
    # An environment map (gen sky: a sun that next events must sample) over the sponza-like
    # atrium, open to the sky: its lookups go through acosf and atan2f, compared by the mean.
    need_sponza
    logged "$out/gen-sky.log" "$bin" gen sky -o "$scenes/sky" --sun-elevation 50 || fail "gen sky"
    for b in optix cpu; do
        logged "$out/depth-8-env-map-$b.log" "$bin" render "$sponza" -o "$scenes/depth-8-env-map-$b.exr" --backend "$b" \
            --width $w --height $h --spp 64 --max-depth 8 --env-map "$scenes/sky/sky.exr" --quiet \
            || fail "environment-map render on $b"
    done
    logged "$out/depth-8-env-map-compare.log" "$bin" image-stats "$scenes/depth-8-env-map-cpu.exr" "$scenes/depth-8-env-map-optix.exr" \
        || fail "image-stats of the environment-map renders"
    note "depth 8, environment map: $(grep -m1 'mean luminance difference' "$out/depth-8-env-map-compare.log" | sed 's/.*difference//')"
}

# Streams past 8: CUDA gives a context 8 hardware work queues unless CUDA_DEVICE_MAX_CONNECTIONS
# says otherwise, so streams 9..16 share queues with 1..8 (the 16-stream figures stop gaining).
step_connections() {
    need_sponza
    need_toystore
    local c
    for c in 8 32; do
        CUDA_DEVICE_MAX_CONNECTIONS=$c bench_one "connections-$c-sponza" "$sponza" "${GW_REPEAT_CONN:-50}" --streams 1,8,16,32
        CUDA_DEVICE_MAX_CONNECTIONS=$c bench_one "connections-$c-toystore" "$toystore" 5 --streams 8,16,32
        grep -h "streams |" "$out/bench-connections-$c-sponza.log" "$out/bench-connections-$c-toystore.log" 2>/dev/null \
            | sed "s/^/CUDA_DEVICE_MAX_CONNECTIONS=$c: /" | tee -a "$summary" >&2
    done
}

step_nsys() {
    local log="$out/nsys.log" n
    header "$log" "nsys profile --trace=cuda,nvtx (best effort)"
    n="$( (command -v nsys; ls -d /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda*/bin/nsys \
        /usr/local/cuda*/nsight-systems*/bin/nsys /opt/nvidia/nsight-compute*/host/*/nsys \
        /usr/local/cuda*/nsight-compute*/host/*/nsys 2>/dev/null; timeout 60 find / -xdev -name nsys -type f -perm -u+x 2>/dev/null) | head -n1)"
    if [ -z "$n" ]; then
        echo "no nsys binary anywhere on this host: NVTX is verified through the injection recorder only" >> "$log"
        note "nsys: none found on this host"
        return
    fi
    echo "# nsys: $n" >> "$log"
    "$n" --version >> "$log" 2>&1
    # The importer that turns nsys's .qdstrm into a report lacked libdw.so.1 on the lent hosts:
    # lend it the libraries the archive carries (nsys-libs/, from the build machine) that this
    # host has not got, and only those, through LD_LIBRARY_PATH for nsys and the importer.
    local lend="" lib name
    if [ -d "$dev/nsys-libs" ]; then
        lend="/tmp/gasworks-nsys-libs"
        rm -rf "$lend" && mkdir -p "$lend"
        for lib in "$dev"/nsys-libs/*; do
            name="$(basename "$lib")"
            # grep without -q reads to the end: under pipefail an early exit would kill
            # ldconfig with SIGPIPE (a long list) and read as "not on this host".
            if ! ldconfig -p 2>/dev/null | grep "^[[:space:]]*$name " > /dev/null; then
                ln -s "$lib" "$lend/$name"
            fi
        done
        echo "# lent to nsys (not on this host): $(cd "$lend" && printf '%s ' *)" >> "$log"
    fi
    local rep="/tmp/gasworks-nsys-$stamp" path="${LD_LIBRARY_PATH:-}"
    [ -n "$lend" ] && path="$lend${path:+:$path}"
    LD_LIBRARY_PATH="$path" \
        logged "$out/nsys-profile.log" "$n" profile --trace=cuda,nvtx --force-overwrite true -o "$rep" \
        "$bin" render "$cornell" -o /tmp/gasworks-nsys.png --backend optix --width 256 --height 256 --spp 16 --quiet
    ls -la "$rep"* >> "$log" 2>&1
    # The first H100 session's nsys (from the Nsight Compute folder) left a .qdstrm and no
    # report: the importer that turns one into the other may lie elsewhere.
    if [ -f "$rep.qdstrm" ] && [ ! -f "$rep.nsys-rep" ]; then
        local imp
        imp="$( (ls "$(dirname "$n")"/QdstrmImporter "$(dirname "$n")"/../*/QdstrmImporter 2>/dev/null; \
            timeout 60 find / -xdev -name QdstrmImporter -type f -perm -u+x 2>/dev/null) | head -n1)"
        if [ -n "$imp" ]; then
            # What the importer still cannot find, if anything, for the next attempt.
            echo "# libraries the importer lacks, with what was lent: $(LD_LIBRARY_PATH="$path" ldd "$imp" 2>&1 \
                | awk '/not found/ {printf "%s ", $1}')" >> "$log"
            LD_LIBRARY_PATH="$path" logged "$out/nsys-import.log" "$imp" -i "$rep.qdstrm" || true
        else
            echo "no QdstrmImporter on this host: the .qdstrm cannot become a report here" >> "$log"
        fi
        ls -la "$rep"* >> "$log" 2>&1
    fi
    if ls "$rep".nsys-rep >/dev/null 2>&1; then
        logged "$out/nsys-stats.log" "$n" stats --report nvtx_sum "$rep.nsys-rep"
        note "nsys: report made; NVTX summary in $out/nsys-stats.log"
    else
        note "nsys: $n made no .nsys-rep (files: $(find "$(dirname "$rep")" -maxdepth 1 -name "$(basename "$rep")*" -printf '%f ' 2>/dev/null))"
    fi
}

# ---- the C baseline -------------------------------------------------------------------------
# gas_batch (repro/gas-batch/gas_batch.c): compiled here from this checkout, the driver's
# libcuda.so.1 and libnvoptix.so.1 loaded at run time; where this host has no C compiler, the
# archive's build of the same file. Sets `gas_batch`; fails the step without one.
gas_batch=""
need_gas_batch() {
    [ -n "$gas_batch" ] && return 0
    local cc_cmd=("${GW_CC:-cc}" -O2 -o "$dev/gas_batch.built" "$root/repro/gas-batch/gas_batch.c" -ldl)
    header "$out/gas-batch-cc.log" "${cc_cmd[@]}"
    if "${cc_cmd[@]}" >> "$out/gas-batch-cc.log" 2>&1; then
        gas_batch="$dev/gas_batch.built"
    elif [ -x "$dev/gas_batch" ]; then
        note "gas_batch: no C compiler here (see $out/gas-batch-cc.log): the archive's build is run"
        gas_batch="$dev/gas_batch"
    else
        fail "gas_batch: neither compiled here (see $out/gas-batch-cc.log) nor in the archive"
        return 1
    fi
}

# The issue-71 question: is build-bench's batch the driver's time, or does gasworks add to it?
# The forum's loop in C and build-bench on the same scene, triangle counts, streams, flags,
# repeats and hardware queues (CUDA_DEVICE_MAX_CONNECTIONS=16, what build-bench asks for at 16
# streams), one after the other in this call; then gasworks / C per stream count.
step_cbaseline() {
    need_gas_batch || return
    need_sponza
    cbaseline_scene sponza-like "$sponza" "${GW_REPEAT:-100}"
    need_toystore
    cbaseline_scene toystore "$toystore" "${GW_REPEAT_BIG:-10}"
}

# cbaseline_scene NAME SCENE REPEAT: gas_batch on the scene's per-group triangle counts (those
# of build-bench's GASes: `gasworks info --groups`, empty groups left out as build-bench leaves
# them), build-bench on the scene, and their comparison.
cbaseline_scene() {
    local name="$1" scene="$2" repeat="$3" counts="$out/cbaseline-$1-triangle-counts.txt"
    local streams=1,2,4,8,16 c_log="$out/cbaseline-$1-c.log" bench_cap="${GW_CMD_TIMEOUT_S:-200}"
    "$bin" info "$scene" --groups --quiet | sed -n '/^group list:/,$p' | awk 'NR > 1 && $1 > 0 {print $1}' > "$counts"
    CUDA_DEVICE_MAX_CONNECTIONS=16 logged "$c_log" timeout -k 5 "$bench_cap" "$gas_batch" "$counts" --streams "$streams" \
        --flags fast-trace,fast-build --repeat "$repeat" --warmup 3 || fail "gas_batch on $name (see $c_log)"
    CUDA_DEVICE_MAX_CONNECTIONS=16 bench_one "cbaseline-$name" "$scene" "$repeat" --streams "$streams" --flags both --warmup 3
    cbaseline_compare "$name" "$out/bench-cbaseline-$name.log" "$c_log" > "$out/cbaseline-$name.csv"
    meta "$out/cbaseline-$name.csv" "cbaseline_compare $name bench-cbaseline-$name.log $(basename "$c_log")"
    local rows
    rows=$(awk -F, 'NR > 1' "$out/cbaseline-$name.csv" | wc -l)
    [ "$rows" -eq 10 ] || fail "cbaseline $name: $rows of 10 stream counts x flags timed by both (see $c_log, $out/bench-cbaseline-$name.log)"
    awk -F, -v n="$name" 'NR > 1 {printf "cbaseline %s %s %2d streams: gasworks %s ms / C %s ms = %sx; host per optixAccelBuild: gasworks %s us, C %s us\n", n, $1, $2, $3, $4, $5, $6, $7}' \
        "$out/cbaseline-$name.csv" | tee -a "$summary" >&2
}

# cbaseline_compare NAME BENCH_LOG C_LOG: one CSV row per flags and stream count timed by both
# (same GAS count): the medians, their ratio, and each one's host time per optixAccelBuild.
cbaseline_compare() {
    echo "flags,streams,gasworks_median_ms,c_median_ms,gasworks_over_c,gasworks_us_per_build,c_us_per_build"
    awk '
        # build-bench: " 8 streams | fast-trace, round-robin, shared scratch | 390 GASes | min .. median M max .. ms | host enqueue median .. ms (U us per GAS) | ..."
        FNR == 1 { file++ }
        / streams \| / && (file == 1 ? $0 ~ / \| fast-(trace|build), round-robin, shared scratch \| / : $0 ~ / \| fast-(trace|build) \| /) {
            split($0, f, " [|] ")
            streams = f[1] + 0; flags = f[2]; sub(/,.*/, "", flags); gases = f[3] + 0
            m = f[4]; sub(/.*median /, "", m); sub(/ .*/, "", m)
            u = f[5]; sub(/.*\(/, "", u); sub(/ us.*/, "", u)
            key = flags "," streams
            if (file == 1) { g[key] = m; gu[key] = u; gn[key] = gases } else { c[key] = m; cu[key] = u; cn[key] = gases; order[++k] = key }
        }
        END {
            for (i = 1; i <= k; i++) {
                key = order[i]
                if (!(key in g) || gn[key] != cn[key]) continue
                ratio = c[key] > 0 ? sprintf("%.3f", g[key] / c[key]) : "n/a"
                print key "," g[key] "," c[key] "," ratio "," gu[key] "," cu[key]
            }
        }' "$2" "$3"
}

# OptiX 9's cluster acceleration structures (many GASes from clusters in a few calls): does this
# GPU build them? The device property's answer, and only that.
step_cluster() {
    need_gas_batch || return
    logged "$out/cluster.log" "$gas_batch" --probe || fail "gas_batch --probe (see $out/cluster.log)"
    note "cluster: $(grep -m1 '^cluster acceleration structures' "$out/cluster.log" || echo "no answer (see $out/cluster.log)")"
}

# ---- run ------------------------------------------------------------------------------------
note "gpu-session: $device, driver $driver, commit $commit, steps: ${steps[*]}"
for s in "${steps[@]}"; do
    if [ "$(left)" -le 20 ]; then
        note "step $s: not started, the ${budget} s budget is spent"
        fail "step $s not run"
        continue
    fi
    t0=$(date +%s)
    before=$failures
    "step_$s"
    note "step $s: $(( $(date +%s) - t0 )) s, $((failures - before)) failure(s)"
done
note "gpu-session: ${failures} failure(s) in $(elapsed) s; results in $out"

# ---- pack the results: one tar.gz beside the summary ----------------------------------------
pack="$summary_dir/results-$stamp.tar.gz"
cp "$summary" "$out/"
tar -czf "$pack" "$out"
size=$(stat -c %s "$pack")
# The device tool brings back files of at most 16 MiB: split a larger archive.
if [ "$size" -gt $((15 * 1048576)) ]; then
    split -b 15M -d "$pack" "$pack.part"
    rm -f "$pack"
    parts=("$pack".part*)
    note "results: ${#parts[@]} parts of $pack (join with cat before tar -xzf)"
else
    note "results: $pack ($((size / 1024)) KiB): unpack at the repository root with tar -xzf"
fi
[ "$failures" -eq 0 ]
