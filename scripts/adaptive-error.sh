#!/usr/bin/env bash
# What adaptive sampling (`render --noise-threshold T`) buys: for each threshold, renders SCENE
# adaptively (at most SPP samples per pixel) and uniformly at the same mean samples per pixel,
# side by side, ROUNDS times with other seeds, and prints against a converged reference the
# noise each leaves as a PNG shows it (`image-stats`: RMS over the pixels, and over the 16x16
# blocks the 95th percentile and the worst) with the ratios adaptive / uniform, min, median
# and max over the rounds; and the render times' ratio.
#
#   scripts/adaptive-error.sh BIN SCENE [WIDTH [HEIGHT [REF_SPP [SPP [THRESHOLDS]]]]]
#
# Defaults: 128x128, a 4096-spp reference, SPP 512, THRESHOLDS "0.02 0.01 0.005", ROUNDS=3,
# the CPU backend (BACKEND=optix on a GPU host); more render options for every render in
# $RENDER_OPTS (e.g. "--env-map sky/sky.exr"). The images stay in $WORK (a temporary folder
# unless set).
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,15p' "$0" >&2
    exit 2
fi
bin="$1"
scene="$2"
width="${3:-128}"
height="${4:-128}"
ref_spp="${5:-4096}"
spp="${6:-512}"
thresholds="${7:-0.02 0.01 0.005}"
rounds="${ROUNDS:-3}"
backend="${BACKEND:-cpu}"
read -r -a render_opts <<< "${RENDER_OPTS:-}"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"

render() { # OUT SEED SPP [OPTIONS...]: prints the render's stderr
    local out="$1" seed="$2" n="$3"
    shift 3
    "$bin" render "$scene" -o "$out" --width "$width" --height "$height" --spp "$n" \
        --backend "$backend" --seed "$seed" --progress none "${render_opts[@]}" "$@" 2>&1 ||
        { echo "adaptive-error: cannot render $out" >&2; exit 1; }
}

# The figures of one image against the reference: "rms p95 max" of the display error.
noise() {
    "$bin" image-stats --json "$work/ref.exr" "$1" | python3 -c '
import json, sys
e = json.load(sys.stdin)[1]["display_block_error_from_first"]
print(e["rms"], e["p95"], e["max"])'
}

echo "adaptive-error: $scene ${width}x${height}, reference $ref_spp spp, at most $spp spp, $rounds rounds, backend $backend, options '${RENDER_OPTS:-}', in $work"
"$bin" --version 2>/dev/null || true
render "$work/ref.exr" 999 "$ref_spp" -q > /dev/null
echo "reference: $("$bin" image-stats "$work/ref.exr" | awk '/^mean/ { print $2, $3 }')"
rows="$work/rows.txt"
: > "$rows"
for t in $thresholds; do
    for r in $(seq 1 "$rounds"); do
        a="$work/a-$t-$r.exr"
        log="$(render "$a" "$r" "$spp" --noise-threshold "$t")"
        mean="$(sed -n 's/.*adaptive: \([0-9.]*\) samples per pixel on average.*/\1/p' <<< "$log")"
        stopped="$(sed -n 's/.*, \([0-9]* of [0-9]*\) blocks stopped.*/\1/p' <<< "$log")"
        ta="$(sed -n 's/^time: .* render \([0-9.]*\) s.*/\1/p' <<< "$log")"
        n="$(python3 -c "print(max(1, round($mean)))")"
        u="$work/u-$t-$r.exr"
        tu="$(render "$u" "$r" "$n" | sed -n 's/^time: .* render \([0-9.]*\) s.*/\1/p')"
        echo "$t $r $mean $n $ta $tu $(noise "$a") $(noise "$u") ${stopped// /_}" >> "$rows"
    done
done
python3 - "$rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def spread(v, fmt):
    v = sorted(v)
    return f"{fmt % v[0]} / {fmt % statistics.median(v)} / {fmt % v[-1]}"
print("per round: threshold, seed, adaptive mean spp, uniform spp, seconds (adaptive, uniform),")
print("  display noise (RMS, 95th percentile block, worst block) adaptive then uniform, blocks stopped")
for r in rows:
    print("  " + " ".join(r))
print()
print("threshold | mean spp | worst block: adaptive, uniform, ratio | 95th pct block ratio | RMS ratio | time ratio  (min / median / max over rounds)")
for t in dict.fromkeys(r[0] for r in rows):
    rs = [list(map(float, r[2:12])) for r in rows if r[0] == t]
    col = lambda i: [x[i] for x in rs]
    ratio = lambda i, j: [x[i] / x[j] for x in rs]
    # Columns: mean spp, uniform spp, seconds a/u, then (rms, p95, max) adaptive, uniform.
    print(f"{t} | {spread(col(0), '%.1f')} | {spread(col(6), '%.4f')}, {spread(col(9), '%.4f')}, "
          f"{spread(ratio(6, 9), '%.2f')} | {spread(ratio(5, 8), '%.2f')} | {spread(ratio(4, 7), '%.2f')} | "
          f"{spread(ratio(2, 3), '%.2f')}")
PY
