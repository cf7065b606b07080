#!/usr/bin/env bash
# Two MPI ranks of one thread each against one process of two threads, on one machine:
# makespan and efficiency from each render's own summary, interleaved in one script so that
# all see the same machine load, and the images compared bit for bit. The ranks run twice:
# with OpenMPI's default binding (each rank pinned to a core when np <= 2) and with
# --bind-to none (scheduled like the threads of one process).
#
#   cargo build --release --features mpi
#   scripts/cluster-vs-threads.sh [REPEATS] [extra render flags...]
#
# Needs OpenMPI's mpirun. As root, OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) are set here.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
shift || true
bin=target/release/gasworks
scene=assets/cornell/cornell.obj
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=(render "$scene" --width 512 --height 512 --spp 32 -v "$@")

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# 1 process x 2 threads: $bin ${args[*]} --threads 2"
echo "# 2 ranks x 1 thread:    mpirun --oversubscribe [--bind-to none] -np 2 $bin ${args[*]} --threads 1"
printf '%-24s %6s %12s %11s %10s\n' run repeat "makespan s" efficiency "wall s"
for i in $(seq 1 "$repeats"); do
  # Alternate which goes first, so that a trend in the machine's load favours neither.
  order="threads ranks unbound"
  [ $((i % 2)) = 0 ] && order="unbound ranks threads"
  for mode in $order; do
    t0=$(date +%s.%N)
    if [ "$mode" = threads ]; then
      "$bin" "${args[@]}" --threads 2 -o "$out/threads.exr" 2>"$out/log" >/dev/null
      label="1 process x 2 threads"
    elif [ "$mode" = ranks ]; then
      mpirun --oversubscribe -np 2 "$bin" "${args[@]}" --threads 1 -o "$out/ranks.exr" 2>"$out/log" >/dev/null
      label="2 ranks x 1 thread"
    else
      mpirun --oversubscribe --bind-to none -np 2 "$bin" "${args[@]}" --threads 1 -o "$out/unbound.exr" 2>"$out/log" >/dev/null
      label="2 ranks, --bind-to none"
    fi
    t1=$(date +%s.%N)
    # The frame summary: "  makespan X s, busy Y s, efficiency Z%, steals N"
    line=$(grep -m1 '^  makespan' "$out/log")
    makespan=$(sed -E 's/.*makespan ([0-9.]+) s.*/\1/' <<<"$line")
    eff=$(sed -E 's/.*efficiency ([0-9.]+%).*/\1/' <<<"$line")
    printf '%-24s %6s %12s %11s %10.2f\n' "$label" "$i" "$makespan" "$eff" "$(echo "$t1 - $t0" | bc)"
    if [ "$mode" != threads ] && [ "$i" = 1 ]; then
      grep -E '^cluster:|^  rank |^  steals:' "$out/log" | sed -E 's/^/    /; s/ +\[.*\]$//'
    fi
  done
done
if cmp -s "$out/threads.exr" "$out/ranks.exr" && cmp -s "$out/threads.exr" "$out/unbound.exr"; then
  echo "images: bit-identical"
else
  echo "images: DIFFER"
  exit 1
fi
