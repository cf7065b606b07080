#!/usr/bin/env bash
# What `--checkpoint-every` costs a render: the same `gasworks render` without checkpoints and
# with one every EVERY, interleaved round by round (plain, checkpointed, plain, ...) so that
# both see the same machine load, then min / median / max of the render time of each, the
# ratio of the medians (checkpointed / plain), the checkpoints written, and the extra time
# per checkpoint (the difference of the medians over the median count).
#
#   scripts/checkpoint-cost.sh BIN ROUNDS EVERY SCENE [render options...]
#
# e.g. a 4K film (133 MB a checkpoint) on the CPU backend:
#   cargo build --release
#   scripts/checkpoint-cost.sh target/release/gasworks 4 1s assets/cornell/cornell.obj \
#       --width 3840 --height 2160 --spp 2 --threads 2
#
# The figures are wall clock: on a machine with as many render threads as cores they include
# what the checkpoint's copy, encoding and hash take from the render threads.
set -euo pipefail

if [ $# -lt 4 ]; then
    sed -n '2,10p' "$0" >&2
    exit 2
fi
bin="$1"
rounds="$2"
every="$3"
shift 3
[ -x "$bin" ] || { echo "checkpoint-cost: $bin is not an executable" >&2; exit 2; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# "render X s" of a render's time line.
render_s() { sed -n 's/^time: .* render \([0-9.]*\) s.*/\1/p' "$1"; }
# "N" and "S" of "checkpoints: N written ... the slowest in S s".
checkpoints() { sed -n 's/^checkpoints: \([0-9]*\) written .*the slowest in \([0-9.]*\) s.*/\1 \2/p' "$1"; }

# shellcheck source=lib/stats.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/stats.sh"
stats() { min_median_max; }

for ((r = 1; r <= rounds; r++)); do
    for mode in plain checkpointed; do
        extra=()
        [ "$mode" = checkpointed ] && extra=(--checkpoint-every "$every")
        log="$tmp/$mode.$r.log"
        if ! "$bin" render "$@" -o "$tmp/$mode.exr" "${extra[@]}" > "$log" 2>&1; then
            echo "checkpoint-cost: round $r ($mode) failed:" >&2
            cat "$log" >&2
            exit 1
        fi
        s="$(render_s "$log")"
        [ -n "$s" ] || { echo "checkpoint-cost: no render time in round $r ($mode):" >&2; cat "$log" >&2; exit 1; }
        echo "$s" >> "$tmp/$mode.s"
        if [ "$mode" = checkpointed ]; then
            c="$(checkpoints "$log")"
            [ -n "$c" ] || { echo "checkpoint-cost: no checkpoint written in round $r:" >&2; cat "$log" >&2; exit 1; }
            echo "$c" >> "$tmp/checkpoints"
            echo "round $r: plain $(tail -1 "$tmp/plain.s") s, checkpointed $s s ($(cut -d' ' -f1 <<<"$c") checkpoints, the slowest $(cut -d' ' -f2 <<<"$c") s)"
        fi
    done
done

read -r pmin pmed pmax < <(stats < "$tmp/plain.s")
read -r cmin cmed cmax < <(stats < "$tmp/checkpointed.s")
read -r nmin nmed nmax < <(cut -d' ' -f1 "$tmp/checkpoints" | stats)
read -r smin smed smax < <(cut -d' ' -f2 "$tmp/checkpoints" | stats)
echo "render s, plain:        min $pmin  median $pmed  max $pmax"
echo "render s, checkpointed: min $cmin  median $cmed  max $cmax  (every $every)"
echo "checkpoints per render: min $nmin  median $nmed  max $nmax; the slowest write: min $smin  median $smed  max $smax s"
awk -v p="$pmed" -v c="$cmed" -v n="$nmed" 'BEGIN {
    printf "checkpointed / plain (medians): %.3fx; extra per checkpoint: %.3f s\n", c / p, (c - p) / n }'
