#!/usr/bin/env bash
# Rehearses scripts/gpu-session.sh on a machine WITHOUT a GPU, so that a bug in its plumbing
# (unpacking, logging, parsing a render's figures, comparing images, packing the results) shows
# here and in CI, not in the 30 minutes a lent GPU host gives.
#
#   scripts/rehearse-gpu-session.sh            # exit 0: every check below held
#
# What stands in for the GPU host (all under one temporary folder, removed at the end):
#   nvidia-smi          answers the name and driver queries ("rehearsal (no GPU)", "0.0")
#   compute-sanitizer   runs the command it is given and prints a clean ERROR SUMMARY
#   gasworks-test       the debug binary with the test hooks (cargo build --features
#                       fault-injection; GW_REHEARSE_BIN to choose another) behind a wrapper:
#                       --backend optix becomes cpu with another --seed (its images differ from
#                       the CPU's by noise), --devices gpuDxS becomes cpu:S (gpuD, cpu:1;
#                       one CPU entry in all: gpu0x2,cpu becomes cpu), and --width/--height
#                       are divided by 8, so a render takes seconds
#   gasworks            the same, blind to the hooks' variables as the release binary is
#   tests/              one test binary (optix_gpu_context): its GPU tests fail here, which
#                       exercises the failure report of the tests step
#   stream_race         repro/stream-race/stream_race.c, built here, runs on the fake GPU
#   cc (GW_CC)          the cbaseline and cluster steps compile repro/gas-batch/gas_batch.c on
#                       the GPU host: the stand-in compiles it for real and runs the program it
#                       made on the fake GPU
#   failover's render   runs for real on the fake GPU too (GASWORKS_FAULT_AT_TILE set): the fake
#                       libcuda's kernel launch is the fault, so the step parses real warnings
#   build-bench         runs for real on a fake GPU (scripts/with-fake-gpu.sh): the stand-ins of
#                       libcuda and libnvoptix that tests/fake_gpu.rs uses, whose device memory
#                       is host memory; so the bench, sanitizer, race and watchdog steps parse
#                       build-bench's real lines, CSVs and messages
#
# Sessions: the short recipe with the rest of the protocol's steps (sanitizer, bench, nsys);
# race and watchdog; the render step again; the watchdog's two other outcomes; the second call
# of a lent GPU (cbaseline, cluster, the bench step's toystore enqueue threads alone); and the
# short recipe cut by its budgets (a hung test past the tests step's budget, a call's budget
# spent midway), which must stop in time and still pack its results.
#
# Checked: each step ran and printed its time; the tests step counted passes and failures and
# quoted the failing tests; the bench step quoted its headline lines and wrote its CSVs, the
# --isolate runs among them; a render's `time:` line was parsed into render-figures.csv; the
# scheduler step found one image across worker counts and schedules and across a time-limit stop
# and --resume; the sanitizer summaries were quoted; one tar.gz and one summary log came out
# where $OUT points; and the expected failures, and only those, were counted.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d "${TMPDIR:-/tmp}/gasworks-rehearsal.XXXXXX")"
trap 'rm -rf "$work"' EXIT
say() { echo "rehearse-gpu-session: $*" >&2; }

real="${GW_REHEARSE_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/gasworks}"
if [ -z "${GW_REHEARSE_BIN:-}" ]; then
    cargo build --quiet --features fault-injection --bin gasworks
fi
[ -x "$real" ] || { say "$real is not an executable"; exit 2; }

# ---- the stand-ins --------------------------------------------------------------------------
mkdir -p "$work/bin" "$work/stage/tests" "$work/out"
cat > "$work/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
case "$*" in
    *--query-gpu=name,*) echo "name, driver_version"; echo "rehearsal (no GPU), 0.0" ;;
    *--query-gpu=name*) echo "rehearsal (no GPU)" ;;
    *--query-gpu=driver_version*) echo "0.0" ;;
    *) echo "nvidia-smi stand-in of scripts/rehearse-gpu-session.sh" ;;
esac
EOF
cat > "$work/bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
# Options come before the command, as gpu-session.sh passes them: --tool T --error-exitcode N.
tool=memcheck
while [ $# -gt 0 ]; do
    case "$1" in
        --tool) tool="$2"; shift 2 ;;
        --*) shift 2 ;;
        *) break ;;
    esac
done
echo "========= COMPUTE-SANITIZER stand-in ($tool)"
"$@"
rc=$?
if [ "$tool" = racecheck ]; then
    echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
else
    echo "========= ERROR SUMMARY: 0 errors"
fi
exit $rc
EOF
# The fake GPU that build-bench runs on (scripts/with-fake-gpu.sh builds it here, once).
GW_FAKE_GPU_DIR="$work/fakegpu" scripts/with-fake-gpu.sh true
cat > "$work/stage/gasworks-test" <<EOF
#!/usr/bin/env bash
# gasworks behind the rehearsal's rewrites (scripts/rehearse-gpu-session.sh).
real="$real"
with_fake_gpu="$root/scripts/with-fake-gpu.sh"
export GW_FAKE_GPU_DIR="$work/fakegpu"
EOF
cat >> "$work/stage/gasworks-test" <<'EOF'
# build-bench on the fake GPU. GW_REHEARSE_BUILD_BENCH=hang: it blocks where no watchdog sees
# (the watchdog step must then report the hang its cap killed); =watchdog: its third
# optixAccelBuild never returns, and the watchdog must end it (half a second in).
if [ "${1:-}" = build-bench ]; then
    case "${GW_REHEARSE_BUILD_BENCH:-}" in
        hang) exec sleep 600 ;;
        watchdog) export FAKE_OPTIX_HANG_AT_BUILD=3 GASWORKS_BUILD_WAIT_S=0.5 ;;
    esac
    exec "$with_fake_gpu" "$real" "$@"
fi
# The failover step's render (a fault on purpose) and the sched step's threaded enqueue (whose
# backend line is checked) on the fake GPU as well, their arguments kept.
if [ -n "${GASWORKS_FAULT_AT_TILE:-}" ]; then
    exec "$with_fake_gpu" "$real" "$@"
fi
case " $* " in
    *" --enqueue-threads "*) exec "$with_fake_gpu" "$real" "$@" ;;
    # The --aov layers are traced on the CPU whatever the backend: on the fake GPU, the real
    # render's host path, they must be the CPU render's (its image is not looked at).
    *" --aov "*) exec "$with_fake_gpu" "$real" "$@" ;;
esac
args=()
while [ $# -gt 0 ]; do
    a="$1"; shift
    case "$a" in
        --backend)
            # Another seed, so that the "GPU" image differs from the CPU's by noise alone, as a
            # real GPU's does: the render step's comparison then takes its real path.
            if [ "${1:-}" = optix ]; then args+=(--backend cpu --seed 7); shift; continue; fi ;;
        --devices)
            # One CPU entry, as --devices refuses a device named twice: gpu0x2 becomes cpu:2,
            # gpu0x2,cpu becomes cpu (every thread), gpu0x2,cpu:3 becomes cpu:5.
            args+=(--devices "$(echo "$1" | awk -F, '{
                n = 0; all = 0
                for (i = 1; i <= NF; i++) {
                    e = $i
                    if (e == "cpu") all = 1
                    else if (e ~ /^cpu:[0-9]+$/) n += substr(e, 5)
                    else if (e ~ /^gpu[0-9]+x[0-9]+$/) { sub(/^gpu[0-9]+x/, "", e); n += e }
                    else if (e ~ /^gpu[0-9]+$/) n += 1
                    else { print $0; exit }
                }
                print (all ? "cpu" : "cpu:" n)
            }')")
            shift; continue ;;
        --width|--height)
            args+=("$a" $(( ($1 + 7) / 8 ))); shift; continue ;;
    esac
    args+=("$a")
done
exec "$real" "${args[@]}"
EOF
# The release binary's stand-in: the test binary's, blind to the test hooks as the release
# build is, so that a step which needs them fails here if it runs the release binary.
# shellcheck source=scripts/lib/fault-hooks.sh
. "$root/scripts/lib/fault-hooks.sh"
cat > "$work/stage/gasworks" <<EOF
#!/usr/bin/env bash
unset $(fault_hook_names | tr '\n' ' ')
exec "\$(dirname "\$0")/gasworks-test" "\$@"
EOF
chmod +x "$work/bin/"* "$work/stage/gasworks" "$work/stage/gasworks-test"

# One test binary with GPU tests (they fail without a GPU) and CPU tests (they pass).
test_bin="$(cargo test --no-run --test optix_gpu_context --message-format=json 2>/dev/null \
    | python3 -c 'import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "optix_gpu_context":
        print(m["executable"])' | tail -n1)"
[ -x "$test_bin" ] || { say "could not build the optix_gpu_context test binary"; exit 2; }
cp "$test_bin" "$work/stage/tests/optix_gpu_context"
# A stand-in test binary whose second test hangs unless skipped (as gpu_accel_raycast's
# guard-band test hung on the H200): the tests step must stop it at GW_TEST_TIMEOUT_S, name it, and run the rest again.
cat > "$work/stage/tests/stand_in_hang" <<'EOF2'
#!/usr/bin/env bash
echo "running 2 tests"
echo "test fast_one ... ok"
if [[ " $* " == *" --skip slow_one "* ]]; then
    echo
    echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out; finished in 0.00s"
    exit 0
fi
printf 'test slow_one ... '
exec sleep 600
EOF2
chmod +x "$work/stage/tests/stand_in_hang"
# The stream-race reproducer, built as build-for-device.sh builds it, on the fake GPU.
${CC:-cc} -O2 -o "$work/stream_race" repro/stream-race/stream_race.c -ldl
cat > "$work/stage/stream_race" <<EOF2
#!/usr/bin/env bash
GW_FAKE_GPU_DIR="$work/fakegpu" exec "$root/scripts/with-fake-gpu.sh" "$work/stream_race" "\$@"
EOF2
chmod +x "$work/stage/stream_race"
# The C compiler of the cbaseline and cluster steps (GW_CC): compiles for real, and leaves at
# -o's path a program that runs the one it made on the fake GPU.
cat > "$work/cc-fake-gpu" <<EOF2
#!/usr/bin/env bash
set -euo pipefail
args=("\$@") o=""
for ((i = 0; i < \${#args[@]}; i++)); do [ "\${args[i]}" = -o ] && o="\${args[i + 1]}"; done
[ -n "\$o" ] || { echo "cc-fake-gpu: no -o" >&2; exit 2; }
${CC:-cc} -Wall -Werror "\${args[@]/#\$o/\$o.real}"
printf '#!/usr/bin/env bash\nGW_FAKE_GPU_DIR="%s" exec "%s" "%s" "\$@"\n' "$work/fakegpu" "$root/scripts/with-fake-gpu.sh" "\$o.real" > "\$o"
chmod +x "\$o"
EOF2
chmod +x "$work/cc-fake-gpu"
echo "rehearsal-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" > "$work/stage/git-commit"
echo "$root" > "$work/stage/build-root"
echo "rehearsal archive: a wrapper around $real" > "$work/stage/MANIFEST"
tar -C "$work/stage" -cJf "$work/archive.tar.xz" .

# ---- the session ----------------------------------------------------------------------------
say "running scripts/gpu-session.sh short + the rest of all's steps with the stand-ins (a few minutes with a debug build)"
set +e
PATH="$work/bin:$PATH" OUT="$work/out" GW_ARCHIVE="$work/archive.tar.xz" GW_UNPACK_DIR="$work/dev" \
    GW_RESULTS_DIR="$work/results" GW_SCENES_DIR="$work/scenes" GW_SHELVES=2 GW_REPEAT=2 \
    GW_REPEAT_BIG=1 GW_BUDGET_S=1500 GW_TEST_TIMEOUT_S=5 \
    bash scripts/gpu-session.sh short sanitizer bench nsys > "$work/session.log" 2>&1
rc=$?
# The investigation steps run by name (race, watchdog), in a session of their own: on the fake
# GPU their build-bench runs pass (it neither races nor hangs unless told to).
PATH="$work/bin:$PATH" OUT="$work/out2" GW_ARCHIVE="$work/archive.tar.xz" GW_UNPACK_DIR="$work/dev2" \
    GW_RESULTS_DIR="$work/results2" GW_SCENES_DIR="$work/scenes" GW_BUDGET_S=600 \
    bash scripts/gpu-session.sh race watchdog > "$work/session2.log" 2>&1
rc2=$?
# The render step again, GPU only, against the first run's results as the committed ones: the
# stand-in renders the same pixels again, so every image must be named, not copied.
PATH="$work/bin:$PATH" OUT="$work/out3" GW_ARCHIVE="$work/archive.tar.xz" GW_UNPACK_DIR="$work/dev3" \
    GW_RESULTS_DIR="$work/results3" GW_SCENES_DIR="$work/scenes" GW_SHELVES=2 GW_BUDGET_S=600 \
    GW_SKIP_CPU=1 GW_COMMITTED_RESULTS="$work/results" \
    bash scripts/gpu-session.sh render > "$work/session3.log" 2>&1 || true
# The watchdog step's other two outcomes: a run its cap had to kill (a failure), and a run the
# watchdog ended (what the step looks for).
for mode in hang watchdog; do
    PATH="$work/bin:$PATH" OUT="$work/out-$mode" GW_ARCHIVE="$work/archive.tar.xz" \
        GW_UNPACK_DIR="$work/dev-$mode" GW_RESULTS_DIR="$work/results-$mode" GW_SCENES_DIR="$work/scenes" \
        GW_BUDGET_S=600 GW_REHEARSE_BUILD_BENCH=$mode GW_WATCHDOG_CAP_S=2 \
        bash scripts/gpu-session.sh watchdog > "$work/session-$mode.log" 2>&1 || true
done
# A lent GPU's second call, as docs/gpu-checks.md gives it: the C baseline beside build-bench,
# the cluster probe, then the bench step's toystore enqueue-thread runs alone.
PATH="$work/bin:$PATH" OUT="$work/out-second" GW_ARCHIVE="$work/archive.tar.xz" GW_UNPACK_DIR="$work/dev-second" \
    GW_RESULTS_DIR="$work/results-second" GW_SCENES_DIR="$work/scenes" GW_SHELVES=2 GW_REPEAT=2 \
    GW_REPEAT_BIG=1 GW_BUDGET_S=600 GW_CC="$work/cc-fake-gpu" GW_BENCH_RUNS=toystore-enqueue-threads \
    bash scripts/gpu-session.sh cbaseline cluster bench > "$work/session-second.log" 2>&1
rc_second=$?
# The short recipe cut short: a test that hangs past the tests step's own budget (20 s), then
# a call's budget (40 s) spent in the depth step: the call must end in time, with its results.
cut_t0=$(date +%s)
PATH="$work/bin:$PATH" OUT="$work/out-cut" GW_ARCHIVE="$work/archive.tar.xz" GW_UNPACK_DIR="$work/dev-cut" \
    GW_RESULTS_DIR="$work/results-cut" GW_SCENES_DIR="$work/scenes" GW_SHELVES=2 GW_BUDGET_S=40 \
    GW_TESTS=stand_in_hang GW_TEST_TIMEOUT_S=30 GW_TESTS_BUDGET_S=20 \
    bash scripts/gpu-session.sh short > "$work/session-cut.log" 2>&1
cut_s=$(( $(date +%s) - cut_t0 ))
set -e

# ---- the checks -----------------------------------------------------------------------------
problems=0
check() { # check DESCRIPTION COMMAND...: one line, ok or FAILED
    local what="$1"; shift
    if "$@" >/dev/null 2>&1; then echo "  ok      $what"; else echo "  FAILED  $what"; problems=$((problems + 1)); fi
}
has() { grep -qE "$1" "$work/session.log"; }
count() { grep -cE "$1" "$work/session.log" || true; }

summaries=("$work"/out/gpu-session-*.log)
packs=("$work"/out/results-*.tar.gz)
echo "rehearse-gpu-session: the session exited with $rc; its output:"
sed 's/^/    | /' "$work/session.log"
echo "rehearse-gpu-session: checks"
check "the session exits non-zero (the GPU-only commands failed)" test "$rc" -ne 0
check "short: the recipe's steps in its order, then the others named" \
    grep -q "^# steps: tests depth render sched failover sanitizer bench nsys$" "${summaries[0]}"
check "short: the tests step's own budget applied (the per-binary stop given)" \
    has "^tests: each binary stopped after 5 s, the step after 270 s$"
for s in tests sanitizer bench render depth sched failover nsys; do
    check "step $s ran and printed its time" has "^step $s: [0-9]+ s, [0-9]+ failure"
done
check "tests: passes and failures counted" has "^tests: [0-9]+ passed, [1-9][0-9]* failed"
check "tests: the failing GPU tests quoted in the summary" has "^    test .* FAILED$"
check "tests: a hung test stopped and named" has "^FAILED: test slow_one in stand_in_hang hung: stopped after 5 s"
check "tests: the rest of its binary run again without it" grep -q "^test result: ok. 1 passed" "$work/results/test-stand_in_hang.log"
check "sanitizer: memcheck and racecheck summaries quoted for the render" \
    has "^racecheck render: .*RACECHECK SUMMARY"
check "bench: no build-bench run failed (on the fake GPU)" test "$(count '^FAILED: build-bench ')" -eq 0
check "bench: the logs name the fake GPU" grep -q "Fake GPU (host memory)" "$work/results/bench-sponza-flags.log"
for run in sponza-flags toystore-flags sponza-compact sponza-merge toystore-merge-compact sponza-assign-scratch; do
    check "bench: the summary quotes $run's 1- and 8-stream lines and its single GAS" bash -c \
        "grep -qE '^bench-$run:  1 streams \\| fast-trace, round-robin, shared scratch' '$work/session.log' &&
         grep -qE '^bench-$run:  8 streams \\| fast-trace, round-robin, shared scratch' '$work/session.log' &&
         grep -qE '^bench-$run: single GAS \\| single GAS, fast-trace' '$work/session.log'"
done
# --isolate: 6 stream counts x 2 assignments x 2 scratch modes, 3 x 3 enqueue threads x 2
# context modes, and on the toystore 3 x 3 with `auto`, each a process of its own, and the
# reference: every row back in the CSV.
check "bench: the isolated assign/scratch run wrote its 24 rows and the reference" \
    test "$(grep -c '^sponza' "$work/results/bench-sponza-assign-scratch.csv")" -eq 25
check "bench: the isolated enqueue-thread run wrote its 18 rows and the reference" \
    test "$(grep -c '^sponza' "$work/results/bench-sponza-enqueue-threads.csv")" -eq 19
check "bench: the toystore's enqueue threads (auto contexts) wrote 9 rows and the reference" \
    test "$(grep -c '^toystore' "$work/results/bench-toystore-enqueue-threads.csv")" -eq 10
check "bench: auto gave 1 thread one context and 4 and 8 threads a context per stream" bash -c \
    "grep -qE '^ 8 streams \| fast-trace, round-robin, shared scratch \| ' '$work/results/bench-toystore-enqueue-threads.log' &&
     grep -qE '^16 streams \| fast-trace, round-robin, shared scratch, a context per stream, 4 enqueue threads \| ' '$work/results/bench-toystore-enqueue-threads.log'"
check "bench: an isolated run names its scene and device once" \
    test "$(grep -c ' groups, .* triangles; ' "$work/results/bench-sponza-enqueue-threads.log")" -eq 1
for scene in cornell sponza-like toystore; do
    for b in optix cpu; do
        check "render: figures of $scene on $b parsed" \
            grep -qE "^$scene,$b,[0-9]+,[0-9]+,[0-9]+,8,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+," "$work/results/render-figures.csv"
        check "render: how well the cost map ranked $scene's tiles on $b, noted" \
            has "^render $scene $b: cost map vs measured tile times \(pass 1, [0-9]+ tiles\): Spearman "
    done
done
check "render: images kept as lossless WebP (or named, where bit for bit a committed one)" bash -c \
    "test -s '$work/results/cornell-optix.webp' || grep -q '^cornell-optix.webp: bit for bit bench/results/' '$work/results/cornell-optix.webp.same'"
for scene in cornell sponza-like toystore; do
    check "render: $scene's image, bit for bit one already committed, named and not copied" bash -c \
        "test ! -e '$work/results3/$scene-optix.webp' &&
         grep -qE '^$scene-optix.webp: bit for bit .*/results/$scene-optix.webp \(sha256 [0-9a-f]{64}, [0-9]+ bytes\)$' '$work/results3/$scene-optix.webp.same'"
done
# The stand-in GPU renders on the CPU with another seed: the images differ by noise alone.
for scene in cornell sponza-like toystore; do
    check "render: $scene compared with the CPU's, within noise" \
        has "^render compare $scene: GPU vs CPU mean luminance [-+][0-9.]+%, .*: [0-9.]+ standard errors$"
done
check "render: a GPU render's --aov layers are a CPU render's, byte for byte" bash -c \
    "grep -q '^render aov: the GPU render.s albedo layer is the CPU render.s, byte for byte' '$work/session.log' &&
     grep -q '^render aov: the GPU render.s normal layer is the CPU render.s, byte for byte' '$work/session.log'"
check "render: a GPU render's --aov layers traced beside it, its wall time without and with them" \
    has "^render aov toystore 1920x1080 64 spp on the GPU: process wall time [0-9.]+ s without --aov, [0-9.]+ s with albedo,normal \\(16 spp, traced in [0-9.]+ s beside the GPU's setup and frame\\)$"
check "sched: one image across worker counts and schedules" has "^sched: every GPU worker count and schedule gave one image"
check "sched: a time-limit stop and --resume gave the uninterrupted image" has "^sched: stopped at a time limit and resumed"
check "sched: a stop inside the one pass and --resume under other tiles gave the uninterrupted image" \
    has "^sched: stopped inside its one pass and resumed under other tiles on the GPU: the uninterrupted image .*samples 0..1024 in [0-9]* of [0-9]* pixels"
check "sched: adaptive sampling gave one image on 1 and 4 streams and after a stop and --resume" \
    has "^sched: adaptive sampling on the GPU: one image on 1 and 4 streams and after a stop and --resume"
check "sched: the adaptive render's skipping tiles replayed as planned (from its OUT.blocks.csv)" \
    has "^sched: adaptive on 1 stream, replayed: [0-9]* passes, [1-9][0-9]* over part of the image, largest difference from the planned costs [0-9.]*e-(0[5-9]|[1-9][0-9])"
check "depth: the adaptive pair compared, with the samples each took" \
    has "^depth 8, adaptive: .* GPU adaptive: [0-9.]* samples per pixel, CPU adaptive: [0-9.]* samples per pixel"
check "sched: per-worker efficiency quoted" has "[Ee]fficiency"
check "sched: 4 enqueue threads got a context per stream (the fake GPU's render)" \
    has "^sched: 4 enqueue threads through a context per stream \(auto\): another image"
check "failover: the fake GPU's fault retired its four streams in one warning" \
    has "^failover: warning: worker gpu0/s[0-3] .*CUDA_ERROR_ILLEGAL_ADDRESS.*gpu0 can render no more \(its device is lost.*\), so its workers gpu0/s"
check "failover: a fault in the calibration retired the four streams before the first pass" \
    has "^failover-calibration: warning: calibrating worker gpu0/s0 .*CUDA_ERROR_ILLEGAL_ADDRESS.*gpu0 can render no more \(its device is lost.*\), so its workers gpu0/s"
check "failover: no failure" has "^step failover: [0-9]+ s, 0 failure"
check "depth: no failure" has "^step depth: [0-9]+ s, 0 failure"
check "depth: every depth compared, and the tent, thin-lens and environment-map pairs" bash -c \
    "for d in 1 2 3 4 6 8; do grep -q \"^depth \$d: \" '$work/session.log' || exit 1; done; grep -q '^depth 1, tent filter: ' '$work/session.log' && grep -q '^depth 8, thin lens: ' '$work/session.log' && grep -q '^depth 8, environment map: ' '$work/session.log'"
check "nsys: a line for the best effort" has "^nsys: "
# The failures the rehearsal expects: the test binary and the hung stand-in test. Anything more
# is a plumbing bug.
check "exactly the expected 2 failures" has "^gpu-session: 2 failure\(s\)"
check "one summary log in \$OUT" test "${#summaries[@]}" -eq 1 -a -s "${summaries[0]}"
check "one results tar.gz in \$OUT" test "${#packs[@]}" -eq 1 -a -s "${packs[0]}"
check "the tar.gz holds the summary, the CSVs and the logs" bash -c \
    "tar -tzf '${packs[0]}' | grep -q 'gpu-session-.*\.log' && tar -tzf '${packs[0]}' | grep -q 'render-figures.csv' && tar -tzf '${packs[0]}' | grep -q 'bench-sponza-flags.log'"
check "every result file starts with its provenance" bash -c \
    "for f in '$work'/results/*.log '$work'/results/*.meta; do head -n1 \"\$f\" | grep -q '^# command: ' || exit 1; done"

echo "rehearse-gpu-session: the race and watchdog session exited with $rc2; its output:"
sed 's/^/    | /' "$work/session2.log"
has2() { grep -qE "$1" "$work/session2.log"; }
check "race: the step ran and printed its time" has2 "^step race: [0-9]+ s, 0 failure"
check "race: the reproducer's seven runs logged with their exit status, on the 390 GASes" bash -c \
    "test \$(grep -c '^## exit ' '$work/results2/repro.log') -eq 7 && grep -q '^stream_race: 390 GASes, 260202 triangles (largest 80514), 8 streams' '$work/results2/repro.log'"
check "race: the reproducer's runs counted in the summary" \
    has2 "^race: the reproducer \(stream_race, no gasworks code\): 7 of 7 runs passed; exit statuses .*: 0 0 0 0 0 0 0 $"
check "race: twelve build-bench runs logged with their exit status" \
    test "$(grep -c '^## exit ' "$work/results2/race.log")" -eq 12
check "race: the passing runs counted in the summary" has2 "^race: build-bench runs that passed \(of 12\): 12$"
check "race: six runs with a context per stream logged with their exit status" \
    test "$(grep -c '^## exit ' "$work/results2/race-contexts.log")" -eq 6
check "race: those counted apart in the summary" \
    has2 "^race: with a context per stream, build-bench runs that passed \(of 6\): 6$"
check "watchdog: runs that pass are not hangs, and the next is tried" \
    has2 "^watchdog: try 4 \(weight 250\) did not hang \(passed\)"
check "watchdog: the step says when no try hung" has2 "^watchdog: none of 4 tries hung"
check "race and watchdog: no failure" has2 "^gpu-session: 0 failure\(s\)"
for mode in hang watchdog; do
    echo "rehearse-gpu-session: the watchdog step with build-bench standing in as '$mode':"
    sed 's/^/    | /' "$work/session-$mode.log"
done
check "watchdog: a run its cap killed is the failure, after one try" \
    grep -qE "^FAILED: watchdog: try 1 \(weight 1000\) hung past its 2 s cap \(exit 124\) without the watchdog's message" "$work/session-hang.log"
check "watchdog: that is the only failure" grep -qE "^gpu-session: 1 failure\(s\)" "$work/session-hang.log"
check "watchdog: a run the watchdog ended is named with its message and status" \
    grep -qE "^watchdog: try 1 \(weight 1000\) hung and was named \(exit 75 after [0-9]+ s\): error: 390 GAS builds" "$work/session-watchdog.log"
check "watchdog: and is no failure" grep -qE "^gpu-session: 0 failure\(s\)" "$work/session-watchdog.log"

echo "rehearse-gpu-session: the second call (cbaseline cluster bench) exited with $rc_second; its output:"
sed 's/^/    | /' "$work/session-second.log"
has_second() { grep -qE "$1" "$work/session-second.log"; }
check "cbaseline, cluster, bench: each ran, no failure" bash -c \
    "for s in cbaseline cluster bench; do grep -qE \"^step \$s: [0-9]+ s, 0 failure\" '$work/session-second.log' || exit 1; done"
check "second call: no failure at all" has_second "^gpu-session: 0 failure\(s\)"
check "cbaseline: gas_batch compiled on the host (GW_CC) and run from there" \
    grep -q "^# command: timeout .*/gas_batch.built .*cbaseline-sponza-like-triangle-counts.txt" "$work/results-second/cbaseline-sponza-like-c.log"
for scene in sponza-like toystore; do
    check "cbaseline: the C loop on $scene's build-bench GASes, each stream count and flag timed" bash -c \
        "test \$(grep -cE '^ ?[0-9]+ streams \| fast-(trace|build) \| [0-9]+ GASes \| min [0-9.]+ median [0-9.]+ max [0-9.]+ ms \| host enqueue median [0-9.]+ ms \([0-9.]+ us per optixAccelBuild\)' '$work/results-second/cbaseline-$scene-c.log') -eq 10"
    check "cbaseline: $scene compared row for row with build-bench (CSV, 10 rows)" \
        test "$(grep -cE '^fast-(trace|build),(1|2|4|8|16),[0-9.]+,[0-9.]+,([0-9.]+|n/a),[0-9.]+,[0-9.]+$' "$work/results-second/cbaseline-$scene.csv")" -eq 10
    check "cbaseline: the summary gives $scene's gasworks / C and host times per optixAccelBuild" \
        has_second "^cbaseline $scene fast-trace  8 streams: gasworks [0-9.]+ ms / C [0-9.]+ ms = ([0-9.]+|n/a)x; host per optixAccelBuild: gasworks [0-9.]+ us, C [0-9.]+ us$"
done
check "cbaseline: the C loop built the 390 GASes build-bench built, at 16 hardware queues" \
    grep -q "^gas_batch: 390 GASes, 260202 triangles (largest 80514), .*CUDA_DEVICE_MAX_CONNECTIONS=16$" "$work/results-second/cbaseline-sponza-like-c.log"
check "cluster: the device's answer quoted" \
    has_second "^cluster: cluster acceleration structures on Fake GPU \(host memory\): not supported \(OPTIX_DEVICE_PROPERTY_CLUSTER_ACCEL = 0\)$"
check "bench (GW_BENCH_RUNS): the toystore's enqueue-thread runs alone, every row written" bash -c \
    "test \$(ls '$work'/results-second/bench-*.log | wc -l) -eq 3 && test \$(grep -c '^toystore' '$work/results-second/bench-toystore-enqueue-threads.csv') -eq 10"
check "second call: every result file starts with its provenance" bash -c \
    "for f in '$work'/results-second/*.log '$work'/results-second/*.meta; do head -n1 \"\$f\" | grep -q '^# command: ' || exit 1; done"
check "second call: one summary log and one tar.gz in \$OUT" bash -c \
    "test \$(ls '$work'/out-second/gpu-session-*.log | wc -l) -eq 1 && test \$(ls '$work'/out-second/results-*.tar.gz | wc -l) -eq 1"

echo "rehearse-gpu-session: the short recipe cut by its budgets took $cut_s s; its output:"
sed 's/^/    | /' "$work/session-cut.log"
has_cut() { grep -qE "$1" "$work/session-cut.log"; }
check "short, cut: the tests step stopped at its own 20 s budget, not at the binary's 30 s" bash -c \
    "grep -qE '^step tests: ([0-9]|1[0-9]|2[0-5]) s, ' '$work/session-cut.log' && grep -q '^# stopped' '$work/results-cut/test-stand_in_hang.log'"
check "short, cut: the depth step ran after it" has_cut "^step depth: [0-9]+ s, "
check "short, cut: the steps past the call's 40 s budget not started, and counted" bash -c \
    "grep -q '^step failover: not started, the 40 s budget is spent' '$work/session-cut.log' && grep -q '^FAILED: step failover not run' '$work/session-cut.log'"
check "short, cut: the call ended in time (within 15 s of its budget) and packed its results" bash -c \
    "test $cut_s -le 55 && test \$(ls '$work'/out-cut/results-*.tar.gz | wc -l) -eq 1 && test \$(ls '$work'/out-cut/gpu-session-*.log | wc -l) -eq 1"

if [ "$problems" -gt 0 ]; then
    say "$problems check(s) failed: fix scripts/gpu-session.sh before a GPU session spends its time on it"
    exit 1
fi
say "every check held"
