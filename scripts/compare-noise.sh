#!/usr/bin/env bash
# Compare the noise of two gasworks binaries (two versions, or one with different options) on
# one scene: both render the same frames with the same seeds, and each frame's RMS difference
# from a converged reference (rendered once by NEW) is its error. Two unbiased renderers differ
# only in noise, so the ratio OLD / NEW of their errors, seed by seed, says which converges
# faster per sample (min, median and max over the seeds). The same for the error of 4x4 block
# means (image-stats --block 4): the noise left at a coarser scale, where blue noise (errors
# that offset their neighbours') is lower than independent pixels' for the same RMS.
#
#   scripts/compare-noise.sh OLD_BIN NEW_BIN SCENE [SPP [SEEDS [REF_SPP [SIZE]]]]
#
# Defaults: 16 spp, 7 seeds, a 4096-spp reference, 128x128. Extra render options go in
# $RENDER_OPTS (the same for every render, e.g. "--max-depth 4"). Prints one line per seed and
# the summary; the images stay in $WORK (a temporary folder unless set).
set -euo pipefail

if [ $# -lt 3 ]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi
old="$1"
new="$2"
scene="$3"
spp="${4:-16}"
seeds="${5:-7}"
ref_spp="${6:-4096}"
size="${7:-128}"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
# shellcheck source=lib/stats.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/stats.sh"
read -r -a opts <<< "${RENDER_OPTS:-}"

render() { # BIN SPP SEED OUT
    "$1" render "$scene" -o "$4" --width "$size" --height "$size" --spp "$2" --seed "$3" \
        "${opts[@]}" > /dev/null 2>&1 || { echo "compare-noise: $1 failed to render $4" >&2; exit 1; }
}
rms() { # REFERENCE IMAGE: the RMS difference and that of 4x4 block means, from image-stats' JSON
    "$new" image-stats "$1" "$2" --json --block 4 | python3 -c '
import json, sys
r = json.load(sys.stdin)[1]
print(r["rms_difference_from_first"], r["rms_block_difference_from_first"])'
}

echo "scene $scene, ${size}x${size}, $spp spp, seeds 1..$seeds, reference $ref_spp spp (seed 1000) by $new"
render "$new" "$ref_spp" 1000 "$work/reference.exr"
ratios=()
block_ratios=()
for seed in $(seq 1 "$seeds"); do
    render "$old" "$spp" "$seed" "$work/old-$seed.exr"
    render "$new" "$spp" "$seed" "$work/new-$seed.exr"
    read -r e_old b_old < <(rms "$work/reference.exr" "$work/old-$seed.exr")
    read -r e_new b_new < <(rms "$work/reference.exr" "$work/new-$seed.exr")
    ratio=$(python3 -c "print(f'{$e_old / $e_new:.3f}')")
    block_ratio=$(python3 -c "print(f'{$b_old / $b_new:.3f}')")
    ratios+=("$ratio")
    block_ratios+=("$block_ratio")
    echo "seed $seed: RMS error old $e_old, new $e_new, old/new $ratio;" \
        "4x4 block means old $b_old, new $b_new, old/new $block_ratio"
done
summary() { # LABEL RATIO...
    local label="$1" min med max
    shift
    read -r min med max < <(printf '%s\n' "$@" | min_median_max)
    echo "old/new $label over $# seeds: min $min, median $med, max $max"
}
summary "RMS error" "${ratios[@]}"
summary "RMS error of 4x4 block means" "${block_ratios[@]}"
echo "images in $work"
