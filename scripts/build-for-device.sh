#!/usr/bin/env bash
# Build, here (no GPU needed), what scripts/gpu-checks.sh runs on a GPU host, into .device/
# (git-ignored):
#   .device/gasworks       the release binary
#   .device/tests/NAME     every test binary (cargo test --no-run), debug info stripped
#   .device/libnvtx_recorder.so   the NVTX test tool
#   .device/git-commit     the commit they were built from
# The device tool carries .device/ to the GPU host (64 MiB at most, hence the stripping).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
dest="$root/.device"
rm -rf "$dest"
mkdir -p "$dest/tests"

cargo build --release --bin gasworks
cp target/release/gasworks "$dest/gasworks"
strip --strip-debug "$dest/gasworks" 2>/dev/null || true

# Every test executable, named after its target (lib tests become "gasworks-lib").
cargo test --no-run --message-format=json 2>/dev/null | python3 -c '
import json, shutil, sys
dest = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m.get("profile", {}).get("test"):
        continue
    t = m["target"]
    name = t["name"] + ("-lib" if "lib" in t["kind"] else "")
    if "bin" in t["kind"]:
        name = t["name"] + "-bin"
    exe = m["executable"]
    shutil.copy(exe, f"{dest}/{name}")
    print(f"{name} <- {exe}")
' "$dest/tests"
for t in "$dest"/tests/*; do strip --strip-debug "$t" 2>/dev/null || true; done

# The NVTX recorder tool for tests/gpu_accel_nvtx.rs (GPU hosts may have no C compiler).
${CC:-cc} -shared -fPIC -O1 -o "$dest/libnvtx_recorder.so" tests/support/nvtx_recorder.c

git describe --always --dirty --abbrev=12 > "$dest/git-commit" 2>/dev/null || git rev-parse HEAD > "$dest/git-commit" 2>/dev/null || echo unknown > "$dest/git-commit"
du -sh "$dest"
