#!/usr/bin/env bash
# Build, here (no GPU needed), everything scripts/gpu-session.sh runs on a GPU host, and pack it
# into ONE compressed archive:
#
#   .device/gasworks-device.tar.xz
#     gasworks                 the release binary, as `cargo build --release` makes it
#     gasworks-test            the binary the tests run (CARGO_BIN_EXE_gasworks, which
#                              cargo test --no-run builds, in the test profile) with the
#                              test hooks (feature fault-injection), for the tests and the
#                              failover step
#     tests/NAME               every test binary (cargo test --no-run), symbols stripped
#     libnvtx_recorder.so      the NVTX injection recorder (GPU hosts may have no C compiler)
#     stream_race              repro/stream-race/stream_race.c, the one-context build race's
#                              reproducer for NVIDIA (the race step runs it)
#     gas_batch                repro/gas-batch/gas_batch.c, the forum's batch loop in C (the
#                              cbaseline and cluster steps compile it on the GPU host, and
#                              run this one where the host has no C compiler)
#     nsys-libs/               libdw.so.1 and the libraries it needs but libc, from this
#                              machine: the Nsight Systems importer on the lent GPU hosts
#                              lacks libdw.so.1 and so made no report (2026-11-24, -26); the
#                              nsys step lends it those the host has not got
#     git-commit               the commit they were built from (`-dirty` when the tree was)
#     build-root               the repository path they were built in: test binaries embed it
#                              (CARGO_MANIFEST_DIR, CARGO_BIN_EXE_gasworks), so the GPU host
#                              links that path to its own copy of the repository
#     MANIFEST                 size and sha256 of every file, the toolchain, the build date
#
# The device tool carries the working tree plus the paths named in `carry` (64 MiB in all), so
# the archive must stay small: the script refuses (exit 1) above GW_ARCHIVE_LIMIT_MIB (40).
# Nothing else is left under .device/: the staging folder is removed.
#
#   scripts/build-for-device.sh            # then, on the GPU host: scripts/gpu-session.sh STEP...
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
limit_mib="${GW_ARCHIVE_LIMIT_MIB:-40}"
dest="$root/.device"
archive="$dest/gasworks-device.tar.xz"
stage="$(mktemp -d "${TMPDIR:-/tmp}/gasworks-device.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests"

echo "build-for-device: release binary" >&2
cargo build --release --bin gasworks
cp target/release/gasworks "$stage/gasworks"

echo "build-for-device: test binaries" >&2
# Every test executable, named after its target ("-lib" for the library's unit tests, "-bin"
# for the binary's), and the gasworks binary they run, as gasworks-test. cargo prints one JSON
# message per artifact on stdout, and its progress and any compile error, as usual, on stderr.
cargo test --no-run --message-format=json-render-diagnostics | python3 -c '
import json, shutil, sys
stage = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    name = t["name"]
    if not m.get("profile", {}).get("test"):
        if name == "gasworks" and "bin" in t["kind"]:
            shutil.copy(m["executable"], f"{stage}/gasworks-test")
        continue
    if "lib" in t["kind"]:
        name += "-lib"
    elif "bin" in t["kind"]:
        name += "-bin"
    shutil.copy(m["executable"], f"{stage}/tests/{name}")
' "$stage" || { echo "build-for-device: building the test binaries failed (cargo test --no-run, above)" >&2; exit 1; }
ntests="$(find "$stage/tests" -type f | wc -l)"
[ "$ntests" -gt 0 ] || { echo "build-for-device: cargo test --no-run produced no test binaries" >&2; exit 1; }
[ -x "$stage/gasworks-test" ] || { echo "build-for-device: cargo test --no-run built no gasworks binary for the tests" >&2; exit 1; }

# Symbols stay out: backtraces on the GPU host lose function names, but the archive shrinks
# by ~3x, and every failure we care about prints its own message.
strip --strip-all "$stage/gasworks" "$stage/gasworks-test" "$stage"/tests/* 2>/dev/null || true

echo "build-for-device: NVTX recorder" >&2
${CC:-cc} -shared -fPIC -O1 -o "$stage/libnvtx_recorder.so" tests/support/nvtx_recorder.c

echo "build-for-device: the stream-race reproducer" >&2
${CC:-cc} -O2 -o "$stage/stream_race" repro/stream-race/stream_race.c -ldl

echo "build-for-device: the C baseline of the batch (gas_batch)" >&2
${CC:-cc} -O2 -o "$stage/gas_batch" repro/gas-batch/gas_batch.c -ldl

# Best effort: without libdw here the archive simply has no nsys-libs/, and the nsys step says
# what the importer lacks.
# awk reads to the end (no `exit`): under pipefail, an awk that quits early makes ldconfig die
# of SIGPIPE once its list outgrows the pipe buffer (64 KiB), and the script with it (exit 141,
# CI 2026-11-26 on a machine with more libraries than this one).
# GW_LDCONFIG: another ldconfig, for CI's (a variable, not PATH: cargo rebuilds when PATH moves).
libdw="$("${GW_LDCONFIG:-ldconfig}" -p 2>/dev/null | awk '$1 == "libdw.so.1" && /x86-64/ && !found {print $NF; found = 1}')"
if [ -n "$libdw" ] && [ -f "$libdw" ]; then
    mkdir -p "$stage/nsys-libs"
    cp -L "$libdw" "$stage/nsys-libs/"
    ldd "$libdw" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
        case "$name" in libc.so.*|ld-linux*|libm.so.*|libpthread.so.*|libdl.so.*) continue ;; esac
        cp -L "$path" "$stage/nsys-libs/$name"
    done
    echo "build-for-device: nsys-libs: $(cd "$stage/nsys-libs" && echo *)" >&2
else
    echo "build-for-device: no libdw.so.1 on this machine (Debian: libdw1): the archive carries no nsys-libs/" >&2
fi

git describe --always --dirty --abbrev=12 > "$stage/git-commit" 2>/dev/null \
    || git rev-parse HEAD > "$stage/git-commit" 2>/dev/null || echo unknown > "$stage/git-commit"
echo "$root" > "$stage/build-root"
{
    echo "# gasworks device archive"
    echo "# commit: $(cat "$stage/git-commit")"
    echo "# built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m)"
    echo "# $(rustc --version)"
    (cd "$stage" && find . -type f ! -name MANIFEST | sort | while read -r f; do
        printf '%s  %10d  %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(stat -c %s "$f")" "${f#./}"
    done)
} > "$stage/MANIFEST"

mkdir -p "$dest"
# The ~54 test binaries each hold most of the library: one xz stream whose dictionary spans
# the whole tar (~130 MiB) finds every copy, 11 MiB where `xz -6 -T0` (blocks of 24 MiB,
# compressed apart) made 20 MiB (2026-11-26), which with the committed results no longer fitted
# a device call. Costs about a minute on one core and ~2 GiB of memory here, 192 MiB to unpack
# there; should it fail (memory), the old settings are used.
if ! tar -C "$stage" -cf - . | xz -9 --lzma2=preset=9,dict=192MiB -T1 > "$archive.tmp"; then
    echo "build-for-device: xz with a 192 MiB dictionary failed; packing with xz -6 -T0" >&2
    tar -C "$stage" -cf - . | xz -6 -T0 > "$archive.tmp"
fi
size=$(stat -c %s "$archive.tmp")
size_mib=$(( (size + 1048575) / 1048576 ))
raw_mib=$(( $(du -sb "$stage" | cut -f1) / 1048576 ))
if [ "$size" -gt $(( limit_mib * 1048576 )) ]; then
    rm -f "$archive.tmp"
    echo "build-for-device: REFUSED: the archive is ${size_mib} MiB (${raw_mib} MiB unpacked), over the ${limit_mib} MiB limit." >&2
    echo "build-for-device: the device tool carries at most 64 MiB, working tree included; shrink the binaries (fewer test targets, less debug info) or raise GW_ARCHIVE_LIMIT_MIB knowingly." >&2
    exit 1
fi
# The device tool carries the tracked files (and untracked ones git does not ignore) WITH the
# archive, 64 MiB in all: committed results grow the tree with every GPU session.
tree=$(git ls-files -z --cached --others --exclude-standard 2>/dev/null | xargs -0 -r stat -c %s 2>/dev/null \
    | awk '{s += $1} END {print s + 0}')
carry_mib=$(( (tree + size + 1048575) / 1048576 ))
if [ "$carry_mib" -gt "${GW_CARRY_LIMIT_MIB:-62}" ]; then
    rm -f "$archive.tmp"
    echo "build-for-device: REFUSED: the working tree ($(( tree / 1048576 )) MiB) and the archive (${size_mib} MiB) come to ${carry_mib} MiB, over the ${GW_CARRY_LIMIT_MIB:-62} MiB a device call can carry (64 MiB, less a margin)." >&2
    echo "build-for-device: compress or drop what bench/results holds that is not GPU evidence (CPU images, repeated cost maps), or shrink the archive." >&2
    exit 1
fi
mv "$archive.tmp" "$archive"
# Anything an older version of this script left (the unpacked layout) would travel too.
find "$dest" -mindepth 1 -maxdepth 1 ! -name "$(basename "$archive")" -exec rm -rf {} +
echo "build-for-device: $archive: ${size_mib} MiB (${raw_mib} MiB unpacked, $ntests test binaries, commit $(cat "$stage/git-commit")); with the working tree a device call carries ${carry_mib} MiB" >&2
echo "build-for-device: carry it with the device tool (carry: [\".device\"]) or copy it to the GPU host; there run scripts/gpu-session.sh" >&2
