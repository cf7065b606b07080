#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, run on a GPU host from the repository root with the
# binaries that scripts/build-for-device.sh put in .device/ (no Rust toolchain needed there).
#
#   scripts/gpu-checks.sh [STEP...]     steps: tests bench sanitizer (default: all three)
#
# Results go to bench/results/<date>-<device>/ (or $GW_RESULTS_DIR): one log per step, the
# build-bench CSVs and SVG plots, each file starting with the command, device, driver, git
# commit and date. Commit that folder.
#
# Scenes come from `gasworks gen`; override the commands with GW_GEN_SPONZA / GW_GEN_TOYSTORE
# (each gets the output path appended). The toystore has 1007 shelves of 9936 triangles:
# about 10M triangles.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin="$root/.device/gasworks"
tests_dir="$root/.device/tests"
[ -x "$bin" ] || { echo "gpu-checks: $bin missing; run scripts/build-for-device.sh first" >&2; exit 2; }

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests bench sanitizer)

device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)"
[ -n "$device" ] || { echo "gpu-checks: nvidia-smi finds no GPU" >&2; exit 2; }
commit="$(cat .device/git-commit 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)"
# build-bench writes the commit the binaries were built from into its CSV rows.
export GASWORKS_GIT_COMMIT="$commit"
# Tests that run the binary use the carried one (cargo's path is the build machine's).
export GASWORKS_BIN="$bin"
# The prebuilt NVTX recorder for tests/gpu_accel_nvtx.rs.
[ -f .device/libnvtx_recorder.so ] && export GASWORKS_NVTX_RECORDER="$root/.device/libnvtx_recorder.so"
date="$(date -u +%Y-%m-%d)"
slug="$(echo "$device" | tr -cs 'A-Za-z0-9' '-' | sed 's/-$//')"
out="${GW_RESULTS_DIR:-bench/results/$date-$slug}"
mkdir -p "$out"
scenes="$out/scenes"   # generated OBJs: large, not for committing
mkdir -p "$scenes"
echo "*" > "$scenes/.gitignore"

# Writes the provenance header (as '#' comments) for a command into a file.
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

# Runs a command, logging it under a header; returns its status.
logged() {
    local log="$1"; shift
    header "$log" "$@"
    echo "gpu-checks: $* > $log" >&2
    "$@" >> "$log" 2>&1
    local rc=$?
    echo "# exit status: $rc" >> "$log"
    return $rc
}

failures=0
fail() { echo "gpu-checks: FAILED: $*" >&2; failures=$((failures + 1)); }

gen_scenes() {
    if [ ! -s "$scenes/sponza-like.obj" ]; then
        logged "$out/gen-sponza-like.log" ${GW_GEN_SPONZA:-$bin gen sponza-like -o} "$scenes/sponza-like.obj" \
            || fail "gen sponza-like"
    fi
    if [ ! -s "$scenes/toystore-10m.obj" ]; then
        logged "$out/gen-toystore.log" ${GW_GEN_TOYSTORE:-$bin gen toystore --shelves 1007 -o} "$scenes/toystore-10m.obj" \
            || fail "gen toystore"
    fi
}

step_tests() {
    for t in "$tests_dir"/*; do
        [ -x "$t" ] || continue
        # --include-ignored: the GPU tests are #[ignore = "needs an NVIDIA GPU"].
        logged "$out/test-$(basename "$t").log" "$t" --include-ignored --test-threads=1 \
            || fail "tests in $(basename "$t")"
    done
}

# build-bench CSV files get the provenance header too, as a sidecar (CSV stays plain).
bench_one() {
    local name="$1" scene="$2"; shift 2
    local cmd=("$bin" build-bench "$scene" --streams 1,2,4,8,16 --flags both --repeat "${GW_REPEAT:-100}"
        --csv "$out/$name.csv" --plot "$out/$name.svg" "$@")
    logged "$out/$name.log" "${cmd[@]}" || fail "build-bench $name"
    header "$out/$name.csv.meta" "${cmd[@]}"
}

step_bench() {
    gen_scenes
    local merge="${GW_MERGE_BELOW:-64,256,1024}"
    bench_one sponza-like-per-group "$scenes/sponza-like.obj" --merge-below 0 --compact
    bench_one sponza-like-merged "$scenes/sponza-like.obj" --merge-below "$merge" --compact
    bench_one sponza-like-assign-scratch "$scenes/sponza-like.obj" --assign round-robin,lpt \
        --scratch shared,per-stream
    bench_one toystore-10m-per-group "$scenes/toystore-10m.obj" --merge-below 0 --compact
    bench_one toystore-10m-merged "$scenes/toystore-10m.obj" --merge-below "$merge"
}

step_sanitizer() {
    gen_scenes
    local cs
    cs="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1)"
    if [ -z "$cs" ]; then
        header "$out/sanitizer.log" compute-sanitizer
        echo "compute-sanitizer is not installed on this host: memcheck and racecheck still owed" >> "$out/sanitizer.log"
        fail "compute-sanitizer missing"
        return
    fi
    # One builder run: every build mode's code path once, few repeats.
    local run=("$bin" build-bench "$scenes/sponza-like.obj" --streams 4 --repeat 2 --compact --merge-below 0,64)
    logged "$out/sanitizer-memcheck.log" "$cs" --tool memcheck --error-exitcode 99 "${run[@]}" \
        || fail "memcheck"
    logged "$out/sanitizer-racecheck.log" "$cs" --tool racecheck --error-exitcode 99 "${run[@]}" \
        || fail "racecheck"
}

for s in "${steps[@]}"; do
    case "$s" in
        tests) step_tests ;;
        bench) step_bench ;;
        sanitizer) step_sanitizer ;;
        *) echo "gpu-checks: unknown step $s (tests, bench, sanitizer)" >&2; exit 2 ;;
    esac
done
echo "gpu-checks: results in $out; $failures failure(s)" >&2
[ "$failures" -eq 0 ]
