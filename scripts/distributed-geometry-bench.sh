#!/usr/bin/env bash
# Distributed geometry against image-plane MPI, on the same ranks, in one run: for each rank
# count, `gasworks render` under mpirun with and without --distribute-geometry, taking turns
# round by round, then min / median / max of each figure and the ratio of the medians.
#
#   scripts/distributed-geometry-bench.sh BIN SCENE ROUNDS "RANK COUNTS" [render options...]
#
# e.g. the 10M-triangle toystore on 1, 2 and 4 ranks:
#   cargo build --release --features mpi
#   target/release/gasworks gen toystore --shelves 1007 -o /tmp/t10m
#   scripts/distributed-geometry-bench.sh target/release/gasworks /tmp/t10m/toystore.obj 3 \
#       "1 2 4" --width 320 --height 180 --spp 4
#
# Figures, one CSV row per run (stdout), then the summary:
# - job_s: mpirun's wall clock, loading and building included;
# - render_s: the frame alone ("time: ... render" for image-plane work, "rendered in" else);
# - rss_max_mib, rss_sum_mib: the largest and the sum of the ranks' peak RSS (GNU time);
# - forwarded_per_sample, bytes_per_sample: path messages sent between ranks (shadow rays,
#   segments, hits to shade) and all bytes sent, per sample (distributed geometry only);
# - queue_peak_mib: the most paths one rank had out at once, times the largest path message
#   (141 bytes): a bound on its share of the messages in flight.
# With GW_REPLICATE=5% set, a third mode, replicated: --distribute-geometry --replicate 5%.
# Ranks on one machine share its cores: say so when quoting the times.
set -euo pipefail

if [ $# -lt 4 ]; then
    sed -n '2,9p' "$0" >&2
    exit 2
fi
bin="$1"
scene="$2"
rounds="$3"
counts="$4"
shift 4
opts=("$@")
[ -x "$bin" ] || { echo "distributed-geometry-bench: $bin is not an executable" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "distributed-geometry-bench: mpirun is not installed" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "distributed-geometry-bench: /usr/bin/time (GNU time) is not installed" >&2; exit 2; }

# shellcheck source=lib/stats.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/stats.sh"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)

# One run: prints its CSV row. $1 ranks, $2 mode (image or geometry), $3 round.
run() {
    local np="$1" mode="$2" round="$3" extra=() log="$tmp/log"
    [ "$mode" = geometry ] && extra=(--distribute-geometry)
    [ "$mode" = replicated ] && extra=(--distribute-geometry --replicate "$GW_REPLICATE")
    local t0 t1
    # GNU time appends each rank's line to a file: mpirun may drop what a rank writes to
    # stderr as it exits.
    rm -f "$tmp/rss"
    t0=$(date +%s.%N)
    "${mpi[@]}" -np "$np" /usr/bin/time -a -o "$tmp/rss" -f "peak-rss-kib %M" \
        "$bin" render "$scene" -o "$tmp/$mode.exr" --backend cpu -v "${opts[@]}" "${extra[@]}" \
        >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
    t1=$(date +%s.%N)
    cat "$tmp/rss" >>"$log"
    awk -v np="$np" -v mode="$mode" -v round="$round" -v job="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '
        /^peak-rss-kib/ { kib = $2; sum += kib; if (kib > max) max = kib }
        /^time:/ { for (i = 1; i <= NF; i++) if ($i == "render") { r = $(i + 1) } }
        /^rendered in/ { r = $3 }
        /samples of its pixels; sent/ {
            samples += $3; fwd += $9 + $12 + $14; bytes += $20
            if ($24 > peak) peak = $24 }
        END {
            fps = samples ? fwd / samples : ""; bps = samples ? bytes / samples : ""
            q = mode != "image" ? peak * 141 / 1048576 : ""
            printf "%d,%s,%d,%.3f,%s,%.1f,%.1f,%s,%s,%s\n", np, mode, round, job, r,
                max / 1024, sum / 1024, fps, bps, q }' "$log"
}

modes="image geometry"
[ -n "${GW_REPLICATE:-}" ] && modes="$modes replicated"
echo "ranks,mode,round,job_s,render_s,rss_max_mib,rss_sum_mib,forwarded_per_sample,bytes_per_sample,queue_peak_mib"
for round in $(seq 1 "$rounds"); do
    for np in $counts; do
        for mode in $modes; do
            run "$np" "$mode" "$round"
        done
    done
done | tee "$tmp/rows.csv"

echo
echo "figure (min median max over $rounds rounds), ranks, mode, figures, mode / image (medians)"
for np in $counts; do
    for col in 4:job_s 5:render_s 6:rss_max_mib 7:rss_sum_mib 8:forwarded_per_sample; do
        c="${col%%:*}" name="${col#*:}"
        img=$(awk -F, -v np="$np" -v c="$c" '$1 == np && $2 == "image" { print $c }' "$tmp/rows.csv" | min_median_max || true)
        for mode in $modes; do
            fig=$(awk -F, -v np="$np" -v c="$c" -v m="$mode" '$1 == np && $2 == m && $c != "" { print $c }' "$tmp/rows.csv" | min_median_max) || continue
            ratio=$(awk -v a="$(echo "$img" | cut -d' ' -f2)" -v b="$(echo "$fig" | cut -d' ' -f2)" \
                'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')
            echo "$name, $np, $mode, $fig, $ratio"
        done
    done
done
