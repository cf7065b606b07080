#!/usr/bin/env bash
# A camera path through the toy store with the geometry spread over ranks, frame by frame:
# the path messages forwarded a sample and the geometry moved, with the cells placed by the
# last frame's traffic (--reassign SHARE) against the first frame's placement kept. The two
# runs take turns, fixed first.
#
#   scripts/domain-path-bench.sh BIN RANKS SHELVES FRAMES SHARE [render options...]
#
# e.g. 4 ranks, 120 shelves, the first 30 frames of its walk at 320x180, 4 spp, 5% a frame:
#   cargo build --release --features mpi
#   scripts/domain-path-bench.sh target/release/gasworks 4 120 30 5% --width 320 --height 180 --spp 4
#
# Prints one CSV row per frame (stdout), then a text plot of the forwarded messages and their
# min / median / max over the frames after the first:
# - forwarded_fixed, forwarded_moved: path messages sent between ranks a sample;
# - crossing_fixed, crossing_moved: the share (%) of the frame's shaded segments that joined
#   cells on different ranks;
# - cells_moved, bytes_moved: what moved before the frame (read from the file by its new rank);
# - seconds_fixed, seconds_moved: the frame's time (one run each: noisy on a shared machine).
set -euo pipefail

if [ $# -lt 5 ]; then
    sed -n '2,12p' "$0" >&2
    exit 2
fi
bin="$1"
ranks="$2"
shelves="$3"
frames="$4"
share="$5"
shift 5
[ -x "$bin" ] || { echo "domain-path-bench: $bin is not an executable" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "domain-path-bench: needs mpirun" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/domain-path-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$bin" gen toystore --shelves "$shelves" -o "$work" >/dev/null
head -n "$((frames + 1))" "$work/toystore-walk.csv" > "$work/path.csv"
run() {
    local name="$1"
    shift
    OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader,tcp}" \
        OMPI_MCA_btl_tcp_if_include="${OMPI_MCA_btl_tcp_if_include:-lo}" \
        mpirun --oversubscribe --allow-run-as-root -np "$ranks" \
        "$bin" render "$work/toystore.obj" --camera-path "$work/path.csv" \
        -o "$work/$name-####.exr" --backend cpu --distribute-geometry -v "$@" \
        2> "$work/$name.log" || { cat "$work/$name.log" >&2; exit 1; }
}
run fixed "$@"
run moved --reassign "$share" "$@"

python3 - "$work/fixed.log" "$work/moved.log" "$frames" <<'EOF'
import re, statistics, sys
def figures(path):
    text = open(path).read()
    # "frame N: F path messages forwarded a sample; C% of S segments between cells of ..."
    fwd = {int(n): (float(f), float(c)) for n, f, c in re.findall(
        r"^frame (\d+): ([0-9.]+) path messages forwarded a sample; ([0-9.]+)% of", text, re.M)}
    # "frame N: moving K cells (B bytes of groups) for frame N+1: ..."
    moves = {int(n) + 1: (int(k), int(b)) for n, k, b in re.findall(
        r"^frame (\d+): moving (\d+) cells \((\d+) bytes of groups\)", text, re.M)}
    seconds = [float(s) for s in re.findall(r"^rendered in ([0-9.]+) s on", text, re.M)]
    return fwd, moves, seconds
fixed, _, sec_fixed = figures(sys.argv[1])
moved, moves, sec_moved = figures(sys.argv[2])
frames = int(sys.argv[3])
rows = []
print("frame,forwarded_fixed,forwarded_moved,crossing_fixed,crossing_moved,cells_moved,bytes_moved,seconds_fixed,seconds_moved")
for n in range(1, frames + 1):
    if n not in fixed or n not in moved:
        continue
    k, b = moves.get(n, (0, 0))
    row = (n, *fixed[n], *moved[n], k, b, sec_fixed[n - 1], sec_moved[n - 1])
    rows.append(row)
    print(f"{n},{row[1]:.3f},{row[3]:.3f},{row[2]:.1f},{row[4]:.1f},{k},{b},{row[7]:.2f},{row[8]:.2f}")
if not rows:
    sys.exit("domain-path-bench: no per-frame figures in the logs")
top = max(max(r[1], r[3]) for r in rows) or 1.0
width = 50
print("\nper frame: path messages forwarded a sample (F fixed, M moved; 0 to %.2f)" % top)
for r in rows:
    line = [" "] * (width + 1)
    for v, c in ((r[1], "F"), (r[3], "M")):
        at = round(v / top * width)
        line[at] = "*" if line[at] not in (" ", c) else c
    print(f"{r[0]:>5} |{''.join(line)}|")
def mmm(v):
    return "n/a" if not v else f"{min(v):.3f}/{statistics.median(v):.3f}/{max(v):.3f}"
later = rows[1:]
print(f"\nframes 2..{rows[-1][0]}, min/median/max:")
print(f"  forwarded a sample: fixed {mmm([r[1] for r in later])}, moved {mmm([r[3] for r in later])}")
print(f"  segments crossing (%): fixed {mmm([r[2] for r in later])}, moved {mmm([r[4] for r in later])}")
print(f"  bytes moved a frame: {mmm([float(r[6]) for r in later])}")
print(f"  frame seconds: fixed {mmm([r[7] for r in later])}, moved {mmm([r[8] for r in later])}")
EOF
