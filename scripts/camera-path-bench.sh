#!/usr/bin/env bash
# A camera path through the toy store, frame by frame: how well each frame's cost map ranked
# its tiles and how well its first pass balanced, planned with the previous frame's measured
# cost blended with the estimate (what a sequence does), against the estimate alone.
#
#   scripts/camera-path-bench.sh BIN SHELVES FRAMES [render options...]
#
# e.g. 120 shelves, the first 40 frames of its walk at 640x360, 16 spp:
#   cargo build --release
#   scripts/camera-path-bench.sh target/release/gasworks 120 40 --width 640 --height 360 --spp 16
#
# Prints one CSV row per frame (stdout), then a text plot of the two Spearmans and the two
# simulated efficiencies, and their min / median / max over the frames after the first:
# - spearman_plan, spearman_estimate: rank correlation of the tiles' planned and estimated
#   cost with their measured cost (first pass);
# - efficiency_plan, efficiency_estimate: the first pass's makespan efficiency, simulated on
#   its measured tile costs with the frame's workers (sched::temporal::FrameFigures);
# - efficiency_rendered: the first pass as it ran (one run: noisy on a shared machine).
set -euo pipefail

if [ $# -lt 3 ]; then
    sed -n '2,11p' "$0" >&2
    exit 2
fi
bin="$1"
shelves="$2"
frames="$3"
shift 3
[ -x "$bin" ] || { echo "camera-path-bench: $bin is not an executable" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/camera-path-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$bin" gen toystore --shelves "$shelves" -o "$work" >/dev/null
head -n "$((frames + 1))" "$work/toystore-walk.csv" > "$work/path.csv"
"$bin" render "$work/toystore.obj" --camera-path "$work/path.csv" -o "$work/frame-####.exr" \
    --backend cpu -v "$@" 2> "$work/log" || { cat "$work/log" >&2; exit 1; }

echo "frame,spearman_plan,spearman_estimate,efficiency_plan,efficiency_estimate,efficiency_rendered"
# "frame N: planned with ...: Spearman P (the estimate alone E); first pass efficiency A%
# simulated (the estimate alone B%), C% rendered"
sed -nE 's/^frame ([0-9]+): planned with .*: Spearman ([-0-9.NaN]+) \(the estimate alone ([-0-9.NaN]+)\); first pass efficiency ([0-9.]+)% simulated \(the estimate alone ([0-9.]+)%\), ([0-9.]+)% rendered$/\1,\2,\3,\4,\5,\6/p' \
    "$work/log" | tee "$work/figures.csv"

python3 - "$work/figures.csv" <<'EOF'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1]))]
def col(i):
    return [float(r[i]) for r in rows[1:] if r[i] not in ("NaN", "nan")]
width = 40
print("\nper frame: Spearman (P planned, E estimate alone; 0 to 1) | efficiency simulated (60 to 100%)")
for r in rows:
    sp, se, ep, ee = (float(x) for x in r[1:5])
    def mark(a, b, lo, hi):
        line = [" "] * (width + 1)
        for v, c in ((b, "E"), (a, "P")):
            if v == v:  # not NaN
                at = round((min(max(v, lo), hi) - lo) / (hi - lo) * width)
                line[at] = "*" if line[at] not in (" ", c) else c
        return "".join(line)
    print(f"{r[0]:>5} |{mark(sp, se, 0.0, 1.0)}|{mark(ep, ee, 60.0, 100.0)}|")
def mmm(v):
    return "n/a" if not v else f"{min(v):.3f}/{statistics.median(v):.3f}/{max(v):.3f}"
print(f"\nframes 2..{len(rows)}, min/median/max:")
print(f"  Spearman: planned {mmm(col(1))}, the estimate alone {mmm(col(2))}")
print(f"  efficiency simulated (%): planned {mmm(col(3))}, the estimate alone {mmm(col(4))}")
print(f"  efficiency rendered (%): {mmm(col(5))}")
EOF
