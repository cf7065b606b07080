#!/usr/bin/env bash
# The long runs of the randomised end-to-end invariants (scripts/random-invariants.sh), of which
# CI runs only a few rounds on a fixed seed to stay within its time. Run it before a release, or
# after a change to the scheduler, the session, checkpoints or the cluster:
#
#   scripts/long-invariants.sh [ROUNDS [SEED]]
#
# ROUNDS (default 40) rounds on the release build, as many on the tests' build (with the test
# hooks: GPU-sized CPU tiles), and a third of them under mpirun -np 2..4 when OpenMPI is
# installed (a build with the features mpi and fault-injection: rank faults too). SEED defaults
# to the time, so that each run draws other options; it is printed, to repeat a failing run.
# Each check that fails prints its command lines; the exit status is 1 when any failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
rounds="${1:-40}"
seed="${2:-$(($(date +%s) % 32768))}"
echo "long-invariants: $rounds rounds, seed $seed (repeat with: $0 $rounds $seed)"

failed=0
run() {
    echo "== $*"
    scripts/random-invariants.sh "$@" | grep -v '^round ' || failed=1
}

cargo build --quiet --release --bin gasworks || exit 2
run target/release/gasworks "$rounds" "$seed"
cargo build --quiet --features fault-injection --bin gasworks || exit 2
run target/debug/gasworks "$rounds" "$seed"
if command -v mpirun > /dev/null; then
    cargo build --quiet --features mpi,fault-injection --bin gasworks || exit 2
    run --mpi target/debug/gasworks "$(((rounds + 2) / 3))" "$seed"
else
    echo "long-invariants: no mpirun on this machine: the cluster's rounds are left out"
fi
exit "$failed"
