# shellcheck shell=bash
# Shared by the benchmark scripts (sourced, not run): the summary every speed or noise figure
# is quoted with.

# min_median_max: "MIN MEDIAN MAX" of the numbers on stdin, one per line, to 3 decimals (the
# median of an even count is the mean of the middle two). Fails on no numbers.
min_median_max() {
    sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) exit 1
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3f %.3f %.3f\n", v[1], m, v[NR] }'
}
