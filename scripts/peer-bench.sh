#!/usr/bin/env bash
# gasworks' CPU backend against its peers on the same scenes, in one run, taking turns each
# round: gasworks, Mitsuba 3 scalar_rgb, Mitsuba 3 llvm_ad_rgb, Embree's own traversal (issue 69).
#
#   scripts/peer-bench.sh BIN [--rounds N] [--threads T,...] [--spp N] [--max-depth D] [SCENE...]
#
# e.g. the issue's two scenes (the defaults), 3 rounds, 1 thread and all cores:
#   cargo build --release --bin gasworks --example trace_rays
#   scripts/peer-bench.sh target/release/gasworks --rounds 3 --threads 1,2 cornell sponza-like
#
# SCENE: cornell (assets/cornell, 512x512, 64 spp), sponza-like (`gen sponza-like`, 640x360,
# 16 spp) or an OBJ file (512x512, 16 spp), each optionally :WxH[:SPP] (cornell:256x256:16);
# --spp overrides every scene's. Defaults: 3 rounds, threads 1 and all cores, max depth 8.
# Also --embree-rays N (4000000: Embree's batch per round), --normals keep (vertex normals kept
# for both renderers; the default, flat, drops them for both: docs/cpu-backend.md says why).
# Every scene is rendered in plain colours by all: textures, bump maps and masks stripped, each
# material Lambert Kd (+ Ke for lights); materials gasworks would render otherwise (glossy,
# mirror, glass, see-through) become Lambert too, with a warning. The camera is gasworks'
# default for the scene (printed), passed explicitly to both renderers.
#
# Prints each round's times, the agreement of the mean radiances (z-scores: the script fails
# past 3 sigma, or 5 in a part of the image) and a table of min / median / max samples/s
# (Embree, "gasworks rays" and "gasworks trace": rays/s) over the rounds, with gasworks / peer
# of the medians. "gasworks trace" is gasworks' closest-hit traversal alone on Embree's very
# rays (examples/trace_rays.rs, found as BIN's examples/trace_rays: build both as below).
# docs/cpu-backend.md says which conventions are matched.
#
# Environment: PEER_BENCH_VENV, the Python venv to create or reuse (default
# ${TMPDIR:-/tmp}/gasworks-peer-bench-venv; pip installs mitsuba==3.9.1, embreex, numpy);
# DRJIT_LIBLLVM_PATH, the libLLVM for llvm_ad_rgb (default: Debian's libLLVM-19, else the newest
# libLLVM-*.so* in /usr/lib/x86_64-linux-gnu; llvm_ad_rgb is skipped when none renders: Dr.Jit
# 1.5 aborts with bookworm's libLLVM-15); PEER_BENCH_KEEP=1 keeps the work folder (images,
# converted scenes).
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '2,9p' "$0" >&2
    exit 2
fi
bin="$1"
shift
[ -x "$bin" ] || { echo "peer-bench: $bin is not an executable" >&2; exit 2; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"

venv="${PEER_BENCH_VENV:-${TMPDIR:-/tmp}/gasworks-peer-bench-venv}"
py="$venv/bin/python"
ready() {
    [ -x "$py" ] && "$py" -c 'import mitsuba, embreex, numpy; assert mitsuba.__version__ == "3.9.1"' \
        2>/dev/null
}
if ! ready; then
    echo "peer-bench: setting up $venv (pip: mitsuba==3.9.1 embreex numpy)" >&2
    python3 -m venv "$venv"
    "$py" -m pip install --quiet --upgrade pip >&2
    "$py" -m pip install --quiet "mitsuba==3.9.1" embreex numpy >&2
    ready || { echo "peer-bench: $venv: mitsuba 3.9.1, embreex or numpy does not import" >&2; exit 1; }
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/peer-bench.XXXXXX")"
if [ "${PEER_BENCH_KEEP:-0}" = 1 ]; then
    echo "peer-bench: work folder $work (kept)" >&2
else
    trap 'rm -rf "$work"' EXIT
fi

# Dr.Jit's llvm variant needs a libLLVM: DRJIT_LIBLLVM_PATH, else Debian's libLLVM-19, else the
# newest libLLVM-N there is.
llvm_flag=()
skip_llvm() {
    echo "peer-bench: $1: skipping Mitsuba's llvm_ad_rgb (apt install libllvm19, or set DRJIT_LIBLLVM_PATH)" >&2
    llvm_flag=(--no-llvm)
}
lib_dir=/usr/lib/x86_64-linux-gnu
if [ -z "${DRJIT_LIBLLVM_PATH:-}" ]; then
    for lib in "$lib_dir/libLLVM-19.so" "$lib_dir/libLLVM-19.so.1" "$lib_dir/libLLVM.so.19.1"; do
        if [ -e "$lib" ]; then DRJIT_LIBLLVM_PATH="$lib"; break; fi
    done
fi
if [ -z "${DRJIT_LIBLLVM_PATH:-}" ]; then
    DRJIT_LIBLLVM_PATH="$(find "$lib_dir" -maxdepth 1 -name 'libLLVM-*.so*' 2>/dev/null | sort -V | tail -n 1)"
fi
if [ -z "${DRJIT_LIBLLVM_PATH:-}" ]; then
    skip_llvm "no libLLVM found"
else
    export DRJIT_LIBLLVM_PATH
    # A small render, not just set_variant: Dr.Jit 1.5 loads libLLVM-15, but its path tracer's
    # kernel then aborts in LLVM's instruction selection (fminimum). Its kernel cache goes to
    # $HOME/.drjit: the work folder's here.
    mkdir -p "$work/home"
    check='import drjit as dr, mitsuba as mi
mi.set_variant("llvm_ad_rgb")
dr.eval(mi.render(mi.load_dict(mi.cornell_box()), spp=1))'
    if ! (HOME="$work/home" "$py" -c "$check" || exit 1) >"$work/llvm-check.log" 2>&1; then
        why="$(grep -m1 -E 'ERROR|Error' "$work/llvm-check.log" || tail -n 1 "$work/llvm-check.log")"
        skip_llvm "Dr.Jit cannot render with $DRJIT_LIBLLVM_PATH ($why)"
    fi
fi

# gasworks' traversal alone on Embree's rays: the example built beside BIN
# (cargo build --release --example trace_rays puts it in target/release/examples/).
trace_flag=()
trace_bin="$(dirname "$bin")/examples/trace_rays"
if [ -x "$trace_bin" ]; then
    trace_flag=(--trace-bin "$trace_bin")
else
    echo "peer-bench: no $trace_bin (cargo build --release --example trace_rays): gasworks' traversal-alone row skipped" >&2
fi

"$py" "$here/peer_bench.py" --bin "$bin" --repo "$repo" --work "$work" ${llvm_flag[@]+"${llvm_flag[@]}"} \
    ${trace_flag[@]+"${trace_flag[@]}"} "$@"
