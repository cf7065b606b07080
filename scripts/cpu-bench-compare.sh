#!/usr/bin/env bash
# Two gasworks binaries side by side on the CPU backend, in one run: `cpu-bench` of each,
# interleaved round by round (A, B, A, B, ...) so that both see the same machine load, then
# min / median / max over the rounds of each figure and the ratio of the medians (B / A).
#
#   scripts/cpu-bench-compare.sh OLD_BIN NEW_BIN ROUNDS SCENE [cpu-bench options...]
#
# e.g. the binary of main against this checkout's, on the Cornell box:
#   git archive main | tar -x -C /tmp/gw-base && (cd /tmp/gw-base && cargo build --release)
#   cargo build --release
#   scripts/cpu-bench-compare.sh /tmp/gw-base/target/release/gasworks target/release/gasworks \
#       5 assets/cornell/cornell.obj --spp 4 --threads 2
#
# Figures: BVH build (Mtri/s) and path tracing (Msamples/s and Mrays/s, wall clock) for each
# thread count cpu-bench measures, and the process's peak resident memory (MB, "-" threads);
# each round runs cpu-bench with --repeat 1. Wall-clock figures on a
# loaded machine measure the CPU share too: say so when quoting them.
set -euo pipefail

if [ $# -lt 4 ]; then
    sed -n '2,9p' "$0" >&2
    exit 2
fi
a="$1"
b="$2"
rounds="$3"
shift 3
for bin in "$a" "$b"; do
    [ -x "$bin" ] || { echo "cpu-bench-compare: $bin is not an executable" >&2; exit 2; }
done

# shellcheck source=lib/stats.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/stats.sh"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# One line per figure: "<section> <threads> <value>", section build or render.
figures() {
    awk '
        /^BVH build/      { s = "build"; next }
        /^path tracing/   { s = "render"; next }
        /^rays traced/    { s = "rays"; next }
        /^peak resident memory/ { print "memory", "-", $4; s = ""; next }
        /^[a-z]/          { s = "" }
        s != "" && /thread\(s\): min/ {
            t = $1; v = $4; print s, t, v
        }'
}

for ((r = 1; r <= rounds; r++)); do
    for which in A B; do
        bin="$a"
        [ "$which" = B ] && bin="$b"
        "$bin" cpu-bench "$@" --repeat 1 | figures | sed "s/^/$which /" >>"$tmp/all"
    done
done

echo "A = $a"
echo "B = $b"
echo "cpu-bench $* ; $rounds interleaved rounds"
printf '%-8s %7s  %-34s %-34s %s\n' figure threads "A min / median / max" "B min / median / max" "B/A (medians)"
while read -r key; do
    s="${key%/*}"
    t="${key#*/}"
    stats() {
        awk -v w="$1" -v s="$s" -v t="$t" '$1 == w && $2 == s && $3 == t { print $4 }' "$tmp/all" |
            min_median_max
    }
    read -r amin amed amax <<<"$(stats A)"
    read -r bmin bmed bmax <<<"$(stats B)"
    case "$s" in
        render) unit="Msamples/s" ;;
        rays) unit="Mrays/s" ;;
        memory) unit="MB" ;;
        *) unit="Mtri/s" ;;
    esac
    printf '%-8s %7s  %-34s %-34s %.2fx\n' "$s" "$t" \
        "$amin / $amed / $amax $unit" "$bmin / $bmed / $bmax $unit" \
        "$(awk -v x="$bmed" -v y="$amed" 'BEGIN { print (y > 0) ? x / y : 0 }')"
done < <(awk '{print $2 "/" $3}' "$tmp/all" | sort -u)
