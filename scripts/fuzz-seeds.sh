#!/usr/bin/env bash
# Writes the fuzz targets' seed files under fuzz/seeds/TARGET (not committed: the minimised
# corpus under fuzz/corpus/ is) from `gasworks gen`, small renders and the tests' OBJ files.
# An `obj` input is the OBJ, then each file it reads after a line `@@@ NAME`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
g=target/release/gasworks
seeds=fuzz/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{obj,resume,exr_window,png_text,costmap}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# OBJ + its files, as one input: bundle OUT OBJ [FILE...]
bundle() {
    local out=$1 obj=$2
    shift 2
    {
        cat "$obj"
        for f in "$@"; do
            printf '\n@@@ %s\n' "$(basename "$f")"
            cat "$f"
        done
    } >"$seeds/obj/$out"
}

$g gen cornell -o "$work/cornell" >/dev/null
$g gen sponza-like --groups 7 --triangles 300 -o "$work/sp" >/dev/null
$g gen toystore --shelves 1 -o "$work/toy" >/dev/null
bundle cornell "$work/cornell/cornell.obj" "$work/cornell/cornell.mtl"
# The sponza-like scene's small textures (bump, mask, a flat colour); the big ones stay out.
bundle sponza-like "$work/sp/sponza_like.obj" "$work/sp/sponza_like.mtl" \
    "$work/sp/sponza_like.bump1.png" "$work/sp/sponza_like.colour3.png" \
    "$work/sp/sponza_like.mask4.png"
head -c 16384 "$work/toy/toystore.obj" | sed '$d' >"$work/toy/head.obj"
bundle toystore-head "$work/toy/head.obj" "$work/toy/toystore.mtl"
for f in assets/cornell/cornell.obj tests/data/*.obj; do
    [[ $(stat -c %s "$f") -le 65536 ]] && bundle "test-$(basename "$f" .obj)" "$f"
done

# Renders: images and resume files (cut by a time limit), plain and adaptive, with stats.
scene=$work/cornell/cornell.obj
small=(--width 24 --height 16 --spp 64 --pass-spp 4 --time-limit 0.001s -q)
$g render "$scene" "${small[@]}" -o "$work/a.exr" --stats "$work/a.csv"
$g render "$scene" "${small[@]}" -o "$work/b.png" --noise-threshold 0.01 --stats "$work/b.csv"
$g render "$scene" "${small[@]}" -o "$work/crop.exr" --pixelbounds 4,20,2,14
$g render "$scene" "${small[@]}" -o "$work/crop.png" --pixelbounds 4,20,2,14
cp "$work/a.exr" "$work/crop.exr" "$seeds/exr_window/"
cp "$work/b.png" "$work/crop.png" "$seeds/png_text/"
# A resume target's input is the file before its 8-byte checksum (the target appends it).
for f in "$work"/*.gasworks-resume; do
    head -c -8 "$f" >"$seeds/resume/$(basename "$f")"
done
for f in "$work"/{a,b}.*csv; do
    cp "$f" "$seeds/costmap/"
done
gzip -c "$work/a.costmap.csv" >"$seeds/costmap/a.costmap.csv.gz"
for t in obj resume exr_window png_text costmap; do
    echo "$seeds/$t: $(ls "$seeds/$t" | wc -l) files, $(du -sk "$seeds/$t" | cut -f1) KiB"
done
