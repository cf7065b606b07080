#!/usr/bin/env bash
# The error `gasworks denoise` leaves: renders SCENE at each SPP with its --aov layers,
# denoises each, and prints, against a converged reference, the RMS error of the pixels and of
# 4x4 block means and the mean luminance's change, noisy / denoised (the table in
# docs/guide/output-and-layers.md, "Denoising without a library").
#
#   scripts/denoise-error.sh BIN SCENE [WIDTH [HEIGHT [REF_SPP [SPPS]]]]
#
# Defaults: 256x256, a 2048-spp reference, SPPS "4 16 64", seed 1, the CPU backend. Extra
# denoise options go in $DENOISE_OPTS (e.g. "--keep-fireflies"); the images stay in $WORK (a
# temporary folder unless set).
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,11p' "$0" >&2
    exit 2
fi
bin="$1"
scene="$2"
width="${3:-256}"
height="${4:-256}"
ref_spp="${5:-2048}"
spps="${6:-4 16 64}"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
read -r -a opts <<< "${DENOISE_OPTS:-}"

render() { # OUT SPP [OPTIONS...]
    local out="$1" spp="$2"
    shift 2
    "$bin" render "$scene" -o "$out" --width "$width" --height "$height" --spp "$spp" \
        --backend cpu --seed 1 -q "$@" || { echo "denoise-error: cannot render $out" >&2; exit 1; }
}

echo "denoise-error: $scene ${width}x${height}, reference $ref_spp spp, in $work"
render "$work/ref.exr" "$ref_spp"
echo "spp | pixels' RMS error | 4x4 blocks' RMS error | mean luminance (noisy / denoised)"
for spp in $spps; do
    render "$work/n$spp.exr" "$spp" --aov albedo,normal
    "$bin" denoise "$work/n$spp.exr" -o "$work/d$spp.exr" -q "${opts[@]}"
    "$bin" image-stats --json --block 4 "$work/ref.exr" "$work/n$spp.exr" "$work/d$spp.exr" |
        python3 -c '
import json, sys
_, n, d = json.load(sys.stdin)
f = lambda k, fmt: fmt % n[k] + " / " + fmt % d[k]
print(sys.argv[1], "|", f("rms_difference_from_first", "%.4f"), "|",
      f("rms_block_difference_from_first", "%.4f"), "|",
      f("mean_luminance_change_percent", "%+.2f%%"))' "$spp"
done
