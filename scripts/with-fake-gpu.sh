#!/usr/bin/env bash
# Runs a command on the fake GPU (tests/support/fake_gpu_cuda.c and fake_gpu_optix.c, see
# docs/gpu-checks.md): stand-ins for libcuda.so.1 and libnvoptix.so.1 whose device memory is host
# memory, which refuse what a driver would and log every call. For working on the OptiX
# backend's host code without a GPU; no device code runs, so images come out black.
#
#   scripts/with-fake-gpu.sh target/release/gasworks build-bench SCENE.obj --streams 1,8
#   FAKE_GPU_LOG=calls.log scripts/with-fake-gpu.sh target/release/gasworks render SCENE.obj -o x.png --backend optix
#   FAKE_OPTIX_HANG_AT_BUILD=3 GASWORKS_BUILD_WAIT_S=1 scripts/with-fake-gpu.sh ...   # a hung driver
#   FAKE_CUDA_DEVICES=2 scripts/with-fake-gpu.sh target/release/gasworks render SCENE.obj -o x.exr \
#       --backend optix --devices gpu0x2,gpu1x2 -v   # two alike GPUs
#   cargo build --features fault-injection   # the test hooks, for a GPU that faults on purpose:
#   GASWORKS_FAULT_AT_TILE=3 scripts/with-fake-gpu.sh target/debug/gasworks render SCENE.obj \
#       -o x.exr --backend optix --devices gpu0x2,cpu
#
# The two libraries are built with cc into $GW_FAKE_GPU_DIR (default target/fake-gpu) when
# missing or older than their sources; the command then runs with LD_LIBRARY_PATH and
# GASWORKS_OPTIX_LIBRARY pointing at them.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${GW_FAKE_GPU_DIR:-$root/target/fake-gpu}"
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

# build SOURCE LIBRARY: compiles when the library is missing or older than its source.
build() {
    if [ ! -e "$2" ] || [ "$1" -nt "$2" ]; then
        cc -shared -fPIC -O1 -o "$2.tmp" "$1"
        mv "$2.tmp" "$2"
    fi
}
mkdir -p "$dir"
build "$root/tests/support/fake_gpu_cuda.c" "$dir/libcuda.so.1"
cp -p "$dir/libcuda.so.1" "$dir/libcuda.so" # cudarc tries libcuda.so first
build "$root/tests/support/fake_gpu_optix.c" "$dir/libnvoptix.so.1"

export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GASWORKS_OPTIX_LIBRARY="$dir/libnvoptix.so.1"
exec "$@"
