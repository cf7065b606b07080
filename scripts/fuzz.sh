#!/usr/bin/env bash
# Coverage-guided fuzzing of the readers (docs/guide/fuzzing.md), with cargo-fuzz on the
# stable toolchain (libFuzzer, no sanitizer: Rust's own checks and the budget allocator).
#
#   scripts/fuzz.sh TARGET SECONDS [JOBS]  fuzz one target (obj, resume, exr_window, png_text,
#                                          costmap) for SECONDS, in JOBS processes (1)
#   scripts/fuzz.sh replay [SECONDS]       every target over its committed corpus and the
#                                          seeds, then SECONDS (0) of fuzzing each: what CI
#                                          runs
#   scripts/fuzz.sh seeds                  write the seed files (fuzz/seeds/, not committed)
#                                          from `gasworks gen`, renders and the test data
#   scripts/fuzz.sh minimise TARGET        fold what runs found into fuzz/corpus/TARGET: the
#                                          fewest inputs of at most 8 KiB that reach every
#                                          edge they reach
#
# New inputs go to fuzz/runs/TARGET, crashes, hangs and over-budget inputs to
# fuzz/artifacts/TARGET; libFuzzer prints the executions and coverage as it goes.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(obj resume exr_window png_text costmap)
# A hang: longer than any input of the corpus takes by a factor of hundreds.
TIMEOUT_S=10
RSS_MB=2048

need_cargo_fuzz() {
    if ! cargo fuzz --version >/dev/null 2>&1; then
        echo "fuzz.sh: installing cargo-fuzz" >&2
        cargo install --locked cargo-fuzz@0.13.2
    fi
}

build() {
    need_cargo_fuzz
    # Release, with the debug assertions fuzz/Cargo.toml's profile sets.
    cargo fuzz build -s none -O "$@"
}

binary() { echo "fuzz/target/x86_64-unknown-linux-gnu/release/$1"; }

is_target() {
    local t
    for t in "${TARGETS[@]}"; do [[ $t == "$1" ]] && return 0; done
    return 1
}

# libFuzzer's options for TARGET: its dictionary where it has one, the limits.
options() {
    opts=("-timeout=$TIMEOUT_S" "-rss_limit_mb=$RSS_MB")
    [[ -f fuzz/dict/$1.dict ]] && opts+=("-dict=fuzz/dict/$1.dict")
    true
}

run() {
    local target=$1 seconds=$2 jobs=${3:-1}
    is_target "$target" || { echo "fuzz.sh: no target $target (${TARGETS[*]})" >&2; exit 2; }
    build "$target"
    mkdir -p "fuzz/runs/$target" "fuzz/artifacts/$target" "fuzz/corpus/$target"
    local dirs=("fuzz/runs/$target" "fuzz/corpus/$target")
    [[ -d fuzz/seeds/$target ]] && dirs+=("fuzz/seeds/$target")
    options "$target"
    # Fork mode: a crash is kept and the run goes on. The CPU time it took is printed last.
    TIMEFORMAT="fuzz.sh: $target: %R s wall, %U s user + %S s system CPU"
    time "$(binary "$target")" "${opts[@]}" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 \
        -ignore_ooms=1 -max_total_time="$seconds" -artifact_prefix="fuzz/artifacts/$target/" \
        "${dirs[@]}"
}

# Runs a libFuzzer command quietly: its last lines, or, when it fails, its last 40.
quiet() {
    local log rc=0
    log=$(mktemp)
    "$@" >"$log" 2>&1 || rc=$?
    if ((rc == 0)); then
        grep -E '^(Done|INFO: fuzzed for|#[0-9]+: .* time:)' "$log" | tail -1 || true
    else
        tail -40 "$log"
    fi
    rm -f "$log"
    return "$rc"
}

replay() {
    local seconds=${1:-0} target
    build
    [[ -d fuzz/seeds ]] || scripts/fuzz-seeds.sh
    for target in "${TARGETS[@]}"; do
        options "$target"
        echo "== $target: $(find "fuzz/corpus/$target" "fuzz/seeds/$target" -type f | wc -l)" \
            "corpus and seed inputs, then ${seconds} s"
        quiet "$(binary "$target")" "${opts[@]}" -runs=0 "fuzz/corpus/$target" \
            "fuzz/seeds/$target"
        if ((seconds > 0)); then
            # New inputs and crashes go to a scratch folder; a crash's input is printed in
            # base64 by libFuzzer (and fails the run).
            local scratch
            scratch=$(mktemp -d)
            quiet "$(binary "$target")" "${opts[@]}" -max_total_time="$seconds" \
                -artifact_prefix="$scratch/" "$scratch" "fuzz/corpus/$target"
            rm -rf "$scratch"
        fi
    done
}

# The largest input kept in the committed corpus: larger ones (the seeds, most of all) are
# made again by scripts/fuzz-seeds.sh, and replayed from there.
MAX_CORPUS_INPUT=8192

minimise() {
    local target=$1
    is_target "$target" || { echo "fuzz.sh: no target $target" >&2; exit 2; }
    build "$target"
    local small merged
    small=$(mktemp -d)
    merged=$(mktemp -d)
    local dirs=("fuzz/corpus/$target" "fuzz/runs/$target")
    [[ -d fuzz/seeds/$target ]] && dirs+=("fuzz/seeds/$target")
    # One cp each: a name (its hash) may be in several folders.
    find "${dirs[@]}" -type f -size -$((MAX_CORPUS_INPUT + 1))c -exec cp -f {} "$small/" \;
    # The fewest inputs that reach every edge the candidates reach (edges, not hit counts or
    # comparisons: a small corpus).
    options "$target"
    "$(binary "$target")" "${opts[@]}" -set_cover_merge=1 -use_counters=0 -use_cmp=0 \
        "$merged" "$small" 2>&1 | tail -1
    # The inputs of fixed crashes stay under their names, whatever the merge kept.
    find "fuzz/corpus/$target" -name 'regression-*' -exec cp -f {} "$merged/" \;
    rm -rf "fuzz/corpus/$target" "$small"
    mv "$merged" "fuzz/corpus/$target"
    echo "fuzz/corpus/$target: $(find "fuzz/corpus/$target" -type f | wc -l) inputs," \
        "$(du -sb "fuzz/corpus/$target" | cut -f1) bytes"
}

case "${1:-}" in
    replay) replay "${2:-0}" ;;
    seeds) exec scripts/fuzz-seeds.sh ;;
    minimise) minimise "${2:?TARGET}" ;;
    "" | -h | --help) sed -n '2,17p' "$0" ;;
    *) run "$1" "${2:?SECONDS}" "${3:-1}" ;;
esac
