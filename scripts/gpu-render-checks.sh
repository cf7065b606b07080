#!/usr/bin/env bash
# The path tracer's measurements on a GPU host (issue 4), run from the repository root with the
# binaries that scripts/build-for-device.sh put in .device/:
#
#   scripts/gpu-render-checks.sh [tests] [render]     (default: both)
#
#   tests   the OptiX path tracer's GPU tests (tests/optix_pathtracer*.rs, --include-ignored)
#   render  `gasworks render` of each scene with --backend optix, then --backend cpu:
#             cornell       1024x1024, 256 spp, max depth 8
#             sponza-like   1920x1080,  64 spp, max depth 8
#             toystore-10m  1920x1080,  64 spp, max depth 8 (1007 shelves: about 10M triangles)
#           printing build time, render time, samples/s and (GPU) rays/s per render.
#
# Results go to bench/results/<date>-<device>/ (or $GW_RESULTS_DIR): the images (PNG), one log
# per render, and render-figures.csv, each starting with the command, device, driver, git
# commit and date (the CSV has them in render-figures.csv.meta). Commit that folder.
#
# Knobs: GW_RENDER_ARGS (extra render arguments, e.g. the scheduler's --devices gpu0x4
# --tiles 16: GPU throughput depends on tile size), GW_CPU_SPP (spp of the CPU renders, default
# the GPU's; samples/s stays comparable), GW_SCENE_CORNELL / GW_SCENE_SPONZA /
# GW_SCENE_TOYSTORE (an existing OBJ instead of generating one), GW_SKIP_CPU=1.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin="$root/.device/gasworks"
tests_dir="$root/.device/tests"
[ -x "$bin" ] || { echo "gpu-render-checks: $bin missing; run scripts/build-for-device.sh first" >&2; exit 2; }

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests render)

device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)"
driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)"
[ -n "$device" ] || { echo "gpu-render-checks: nvidia-smi finds no GPU" >&2; exit 2; }
commit="$(cat .device/git-commit 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)"
# The prebuilt NVTX recorder for tests/optix_pathtracer_nvtx.rs (GPU hosts may lack a C compiler).
[ -f .device/libnvtx_recorder.so ] && export GASWORKS_NVTX_RECORDER="$root/.device/libnvtx_recorder.so"
date="$(date -u +%Y-%m-%d)"
slug="$(echo "$device" | tr -cs 'A-Za-z0-9' '-' | sed 's/-$//')"
out="${GW_RESULTS_DIR:-bench/results/$date-$slug}"
mkdir -p "$out"
scenes="$out/scenes"   # generated OBJs: large, not for committing
mkdir -p "$scenes"
echo "*" > "$scenes/.gitignore"

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

logged() {
    local log="$1"; shift
    header "$log" "$@"
    echo "gpu-render-checks: $* > $log" >&2
    "$@" >> "$log" 2>&1
    local rc=$?
    echo "# exit status: $rc" >> "$log"
    return $rc
}

failures=0
fail() { echo "gpu-render-checks: FAILED: $*" >&2; failures=$((failures + 1)); }

# gen_scene NAME PRESET OBJ_NAME [GEN ARGS...]: prints the OBJ path (generating it if needed).
gen_scene() {
    local name="$1" preset="$2" obj="$3"; shift 3
    local dir="$scenes/$name"
    if [ ! -s "$dir/$obj" ]; then
        logged "$out/gen-$name.log" "$bin" gen "$preset" -o "$dir" --quiet "$@" || fail "gen $name"
    fi
    echo "$dir/$obj"
}

step_tests() {
    local found=0
    for t in "$tests_dir"/optix_pathtracer*; do
        [ -x "$t" ] || continue
        found=1
        logged "$out/test-$(basename "$t").log" "$t" --include-ignored --test-threads=1 --nocapture \
            || fail "tests in $(basename "$t")"
    done
    [ "$found" -eq 1 ] || fail "no optix_pathtracer test binaries in $tests_dir"
}

csv="$out/render-figures.csv"

# render_one NAME OBJ BACKEND WIDTH HEIGHT SPP: one render, its log, image and CSV row.
render_one() {
    local name="$1" obj="$2" backend="$3" w="$4" h="$5" spp="$6"
    local log="$out/render-$name-$backend.log" img="$out/$name-$backend.png"
    # shellcheck disable=SC2086
    local cmd=("$bin" render "$obj" -o "$img" --backend "$backend" --width "$w" --height "$h"
        --spp "$spp" --max-depth 8 --quiet ${GW_RENDER_ARGS:-})
    if ! logged "$log" "${cmd[@]}"; then
        fail "render $name on $backend"
        return
    fi
    # The render command's summary: "...; load L s, build B s, render R s, S M samples/s -> ..."
    # and, for OptiX, "rays: N traced, R M rays/s".
    local figures rays
    figures="$(sed -n 's/.*load \([0-9.]*\) s, build \([0-9.]*\) s, render \([0-9.]*\) s, \([0-9.]*\) M samples\/s.*/\1,\2,\3,\4/p' "$log" | tail -n1)"
    rays="$(sed -n 's/^rays: \([0-9]*\) traced, \([0-9.]*\) M rays\/s.*/\1,\2/p' "$log" | tail -n1)"
    [ -n "$figures" ] || { fail "no summary line in $log"; return; }
    [ -n "$rays" ] || rays=","
    echo "$name,$backend,$w,$h,$spp,8,$figures,$rays,$device,$driver,$commit" >> "$csv"
    echo "gpu-render-checks: $name $backend: load,build,render s, M samples/s = $figures; rays, M rays/s = $rays" >&2
}

step_render() {
    local cornell sponza toystore
    cornell="${GW_SCENE_CORNELL:-$(gen_scene cornell cornell cornell.obj)}"
    sponza="${GW_SCENE_SPONZA:-$(gen_scene sponza-like sponza-like sponza_like.obj)}"
    toystore="${GW_SCENE_TOYSTORE:-$(gen_scene toystore-10m toystore toystore.obj --shelves 1007)}"
    if [ ! -s "$csv" ]; then
        echo "scene,backend,width,height,spp,max_depth,load_s,build_s,render_s,msamples_per_s,rays,mrays_per_s,device,driver,commit" > "$csv"
        header "$csv.meta" "scripts/gpu-render-checks.sh render ${GW_RENDER_ARGS:-}"
    fi
    local backends=(optix)
    [ "${GW_SKIP_CPU:-0}" = 1 ] || backends+=(cpu)
    for backend in "${backends[@]}"; do
        local spp_c=256 spp_s=64
        if [ "$backend" = cpu ] && [ -n "${GW_CPU_SPP:-}" ]; then
            spp_c="$GW_CPU_SPP"
            spp_s="$GW_CPU_SPP"
        fi
        render_one cornell "$cornell" "$backend" 1024 1024 "$spp_c"
        render_one sponza-like "$sponza" "$backend" 1920 1080 "$spp_s"
        render_one toystore-10m "$toystore" "$backend" 1920 1080 "$spp_s"
    done
    column -s, -t < "$csv" >&2 || cat "$csv" >&2
}

for s in "${steps[@]}"; do
    case "$s" in
        tests) step_tests ;;
        render) step_render ;;
        *) echo "gpu-render-checks: unknown step $s (tests, render)" >&2; exit 2 ;;
    esac
done
echo "gpu-render-checks: results in $out; $failures failure(s)" >&2
[ "$failures" -eq 0 ]
