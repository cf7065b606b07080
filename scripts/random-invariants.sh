#!/usr/bin/env bash
# Randomised end-to-end checks of what gasworks promises about its images, on random render
# options (scene, size, spp, depth, seed, filter, environment and its scale and share, lens,
# --aov layers, adaptive sampling, crops, PNG or EXR, a PNG's exposure and tone curve). Each
# round checks, byte for byte:
#   schedule  another thread count, schedule, pass size (but under --noise-threshold, whose
#             passes decide the image), tile count, stealing and calibration, and CPU workers
#             that ask for GPU-sized tiles (GASWORKS_CPU_TILE_WORK: tiles counted from the
#             work, and adaptive sampling's tiles that skip the stopped blocks; under --mpi
#             the ranks' render too): the same image and layers;
#   crops     two crops of the frame (--pixelbounds; on the 16-pixel grid under
#             --noise-threshold) merged: the whole render's image and layers;
#   stop      a render stopped by SIGTERM or SIGINT at a random moment (in one process also
#             killed by SIGKILL, under --checkpoint-every; at times on GPU-sized tiles, as
#             above): `preview` of its resume file is
#             the stopped image (key included), and `--resume` (on other threads and another
#             schedule) finishes it as the uninterrupted render;
#   limit     a render under a short --time-limit, repeated with --resume until complete: the
#             uninterrupted render and layers, each stop's preview its image.
# With --mpi (BIN built with `--features mpi`; OpenMPI's mpirun on this machine), the frame is
# also rendered by `mpirun -np 2..4` ranks, and the stop and the time limit run under mpirun
# (the stop signals mpirun; the resume runs under mpirun or in one process), each checked
# against one process's image; crops (refused under several ranks) stay in one process. And
#   fault     a rank other than 0 dies (exit, SIGKILL or abort) or hangs (silent: rank 0
#             names it after GASWORKS_RANK_TIMEOUT_S=2) after a random number of tiles: the
#             job fails, and rank 0 writes what the other ranks hold (its preview the image;
#             resumed, the uninterrupted render), or the image alone where the lost rank's
#             pixels cannot be rendered again from it (and says so), or says that nothing had
#             arrived; nothing else is left.
# A check that fails prints its command lines; the exit status is 1 when any failed.
# GPU-sized tiles and rank faults are test hooks, in a BIN built with the cargo feature
# fault-injection (`cargo test` builds target/debug/gasworks so, `cargo build --release` does
# not): with a BIN without them they are drawn but not run, and the script says so once.
#
#   scripts/random-invariants.sh [--mpi] BIN [ROUNDS [SEED]]
#
# Defaults: 4 rounds, seed 1 (the same seed draws the same options; where a stop lands depends
# on the machine). The scenes are generated small into $WORK, where each round's files stay;
# without $WORK, a temporary folder, removed when every check held.
set -uo pipefail

mpi=() # the launcher's command, with --mpi
if [ "${1:-}" = --mpi ]; then
    shift
    mpi=(mpirun --oversubscribe)
    [ "$(id -u)" != 0 ] || mpi+=(--allow-run-as-root)
    # The ranks run on this machine: shared memory and loopback, whatever networks it has.
    export OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader,tcp}"
    export OMPI_MCA_btl_tcp_if_include="${OMPI_MCA_btl_tcp_if_include:-lo}"
fi
if [ $# -lt 1 ]; then
    sed -n '2,37p' "$0" >&2
    exit 2
fi
bin="$1"
rounds="${2:-4}"
RANDOM="${3:-1}"
work="${WORK:-}"
[ -n "$work" ] || { work="$(mktemp -d)" && own_work=1; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/fault-hooks.sh
. "$root/scripts/lib/fault-hooks.sh"
hooks=1 # whether $bin has the test hooks
if ! has_fault_hooks "$bin"; then
    hooks=""
    echo "random-invariants: $bin has no test hooks (not built with --features fault-injection):" \
        "no GPU-sized CPU tiles (GASWORKS_CPU_TILE_WORK)${mpi[*]:+ and no rank faults (GASWORKS_TEST_FAULT)}"
fi
if [ ${#mpi[@]} -gt 0 ]; then
    # A binary built without `--features mpi` refuses to run as ranks: say so once, not in
    # every check.
    if ! probe=$("${mpi[@]}" -np 2 "$bin" render "$root/assets/cornell/cornell.obj" -o "$work/probe.exr" \
        --width 8 --height 8 --spp 1 -q 2>&1); then
        echo "random-invariants: $bin cannot render under mpirun -np 2 (--mpi needs a build with --features mpi):" >&2
        printf '%s\n' "$probe" | grep -m 1 . >&2
        [ -z "${own_work:-}" ] || rm -rf "$work"
        exit 2
    fi
    rm -f "$work/probe.exr"
fi

# choose VAR WORD...: one of the words into VAR, drawn in this shell (a command substitution's
# subshell would draw from a $RANDOM of its own, and the seed would not repeat the options).
choose() {
    local var="$1"
    shift
    local words=("$@")
    printf -v "$var" '%s' "${words[RANDOM % ${#words[@]}]}"
}
checks=0
failed=0
scene="" filter="" apass="" schedule="" steal="" spp="" pass="" ext="" signal="" kind="" # set by choose
fail() { # CHECK ROUND WHAT COMMAND...
    local check="$1" round="$2" what="$3"
    shift 3
    failed=$((failed + 1))
    echo "FAIL $check, round $round: $what"
    echo "  $*"
}
render() { # OUT ERRFILE ARGS...: gasworks render, quiet; its status
    local out="$1" err="$2"
    shift 2
    "$bin" render "$scene" -o "$out" "${opts[@]}" -q "$@" 2> "$err"
}
with_tile_work() { # TILE_WORK COMMAND...: COMMAND (`render`, `launch`), its CPU workers
    local work="$1" # asking for tiles of TILE_WORK pixel-samples as GPU workers do
    shift # (GASWORKS_CPU_TILE_WORK, which mpirun's local ranks inherit; none when empty)
    if [ -n "$work" ]; then GASWORKS_CPU_TILE_WORK="$work" "$@"; else "$@"; fi
}
gpu_sized() { # a GASWORKS_CPU_TILE_WORK for `with_tile_work`, or nothing, at random (drawn here:
    # call it in this shell, never in a $(...))
    tile_work=""
    [ $((RANDOM % 3)) != 0 ] || tile_work=$((200 + RANDOM % 20000))
    [ -n "$hooks" ] || tile_work="" # drawn all the same: a seed draws the same options
}
launch() { # NP OUT ERRFILE ARGS...: gasworks render, quiet, under mpirun -np NP; its status
    local np="$1" out="$2" err="$3"
    shift 3
    timeout --kill-after=10 120 "${mpi[@]}" -np "$np" "$bin" render "$scene" -o "$out" "${opts[@]}" -q "$@" 2> "$err"
}
same_as() { # CHECK ROUND REF OUT EXT HOW COMMAND: OUT.EXT and its layers (OUT.LAYER.exr) are
    local x # REF's, byte for byte; HOW says how OUT was made
    for x in ".$5" "${layers[@]/#/.}"; do
        [ "$x" = ".$5" ] || x="$x.exr"
        cmp -s "$3$x" "$4$x" || fail "$1" "$2" "$6, ${4##*/}$x differs from ${3##*/}$x" "$7"
    done
}
previews_as() { # CHECK ROUND RESUME IMAGE PREVIEW: `gasworks preview RESUME -o PREVIEW` is IMAGE
    if ! "$bin" preview "$3" -o "$5" -q 2> "$5.err"; then
        fail "$1" "$2" "preview failed: $(cat "$5.err")" "$bin preview $3 -o $5"
    elif ! cmp -s "$4" "$5"; then
        fail "$1" "$2" "the preview of the resume file differs from ${4##*/}" "$bin preview $3 -o $5"
    fi
}
stuck="" # what hung after the last `wait_stopped`: "", "mpirun" or "a rank"
wait_stopped() { # PID: waits for the job a signal stopped; its status into $status
    # mpirun, at most a minute: OpenMPI 4.1's mpirun can hang in its teardown after a signal,
    # once every rank has left (its ranks then zombies): mpirun's fault, not a rank's.
    local pid="$1" t=0
    stuck=""
    if [ ${#mpi[@]} -gt 0 ]; then
        while kill -0 "$pid" 2> /dev/null && [ "$t" -lt 600 ]; do
            sleep 0.1
            t=$((t + 1))
        done
        if kill -0 "$pid" 2> /dev/null; then
            stuck=mpirun
            ps --ppid "$pid" -o stat= | grep -qv '^Z' && stuck="a rank"
            pkill -KILL -P "$pid"
            kill -KILL "$pid"
        fi
    fi
    wait "$pid" 2> /dev/null # (not bash's "Killed" line after a SIGKILL)
    status=$?
}
where="" # how the last `anywhere` ran: "mpirun -np N" or "one process"
anywhere() { # OUT ERRFILE ARGS...: `render`, or with --mpi under mpirun -np 2..4 or in one
    local np=1 # process, at random (drawn here: called in this shell, never in a $(...))
    [ ${#mpi[@]} = 0 ] || np=$((1 + RANDOM % 4))
    if [ "$np" -gt 1 ]; then
        where="mpirun -np $np"
        launch "$np" "$@"
    else
        where="one process"
        render "$@"
    fi
}

mkdir -p "$work/scenes"
"$bin" gen sponza-like -o "$work/scenes/sponza" --groups 40 --triangles 20000 --quiet > /dev/null &&
    "$bin" gen toystore -o "$work/scenes/toystore" --shelves 2 --quiet > /dev/null &&
    "$bin" gen sky -o "$work/scenes/sky" --map-width 128 --quiet > /dev/null || {
    echo "random-invariants: cannot generate the scenes into $work/scenes" >&2
    exit 1
}
scenes=("$root/assets/cornell/cornell.obj" "$work/scenes/sponza/sponza_like.obj"
    "$work/scenes/toystore/toystore.obj")
sky="$work/scenes/sky/sky.exr"
echo "random-invariants: $rounds rounds${mpi:+ (with mpirun)}, in $work"

for round in $(seq 1 "$rounds"); do
    d="$work/round-$round"
    rm -rf "$d"
    mkdir -p "$d"
    choose scene "${scenes[@]}"
    choose filter box tent

    # --- schedule and crops: a small frame, any options.
    w=$((17 + RANDOM % 60))
    h=$((9 + RANDOM % 50))
    spp=$((1 + RANDOM % 8))
    # Adaptive sampling: passes of one or two samples, at least three of them.
    adaptive=()
    if [ $((RANDOM % 3)) = 0 ]; then
        choose apass 1 2
        [ "$spp" -ge $((3 * apass)) ] || spp=$((3 * apass + RANDOM % 3))
        adaptive=(--noise-threshold "0.0$((1 + RANDOM % 9))" --pass-spp "$apass")
    fi
    opts=(--width "$w" --height "$h" --spp "$spp" --max-depth $((1 + RANDOM % 8))
        --seed $((RANDOM % 5)) --filter "$filter" "${adaptive[@]}")
    case $((RANDOM % 3)) in
        1) opts+=(--env "0.2,0.3,0.4") ;;
        2)
            opts+=(--env-map "$sky" --env-rotate $((RANDOM % 360)))
            [ $((RANDOM % 2)) = 0 ] && opts+=(--env-scale "0.$((2 + RANDOM % 8))")
            [ $((RANDOM % 2)) = 0 ] && opts+=(--env-share "0.$((RANDOM % 10))")
            ;;
    esac
    [ $((RANDOM % 3)) = 0 ] && opts+=(--two-sided-lights)
    [ $((RANDOM % 3)) = 0 ] && opts+=(--lens-radius "0.0$((1 + RANDOM % 9))" --focus-distance $((1 + RANDOM % 5)))
    layers=()
    [ $((RANDOM % 3)) = 0 ] && { opts+=(--aov "albedo,normal" --aov-spp $((1 + RANDOM % 4))); layers=(albedo normal); }
    echo "round $round: $(basename "$scene") ${opts[*]}"
    if ! render "$d/a.exr" "$d/a.err"; then
        fail schedule "$round" "the render failed: $(cat "$d/a.err")" "$bin render $scene -o $d/a.exr ${opts[*]}"
        continue
    fi
    choose schedule regular sorted adaptive
    choose steal on off
    choose calibrate on off
    other=(--threads $((1 + RANDOM % 3)) --schedule "$schedule"
        --steal "$steal" --calibrate "$calibrate" --slow-worker-pieces $((1 + RANDOM % 16)))
    # (Under --noise-threshold the pass size is the render's: it decides which blocks stop.)
    [ ${#adaptive[@]} -gt 0 ] || other+=(--pass-spp $((1 + RANDOM % spp)))
    [ $((RANDOM % 2)) = 0 ] && other+=(--tiles $((1 + RANDOM % 100)))
    gpu_sized
    as="${tile_work:+GASWORKS_CPU_TILE_WORK=$tile_work }"
    checks=$((checks + 1))
    if ! with_tile_work "$tile_work" render "$d/b.exr" "$d/b.err" "${other[@]}"; then
        fail schedule "$round" "failed: $(cat "$d/b.err")" "$as$bin render $scene -o $d/b.exr ${opts[*]} ${other[*]}"
    else
        same_as schedule "$round" "$d/a" "$d/b" exr "rendered with $as${other[*]}" "$as$bin render $scene -o $d/b.exr ${opts[*]} ${other[*]}"
    fi
    if [ ${#mpi[@]} -gt 0 ]; then
        np=$((2 + RANDOM % 3))
        choose schedule regular sorted adaptive
        gpu_sized
        as="${tile_work:+GASWORKS_CPU_TILE_WORK=$tile_work }"
        checks=$((checks + 1))
        if ! with_tile_work "$tile_work" launch "$np" "$d/n.exr" "$d/n.err" --threads 1 --schedule "$schedule"; then
            fail ranks "$round" "mpirun -np $np failed: $(cat "$d/n.err")" "${as}mpirun -np $np $bin render $scene -o $d/n.exr ${opts[*]} --threads 1 --schedule $schedule"
        else
            same_as ranks "$round" "$d/a" "$d/n" exr "rendered by $np ranks${as:+ ($as)}" "${as}mpirun -np $np $bin render $scene -o $d/n.exr ${opts[*]} --threads 1 --schedule $schedule"
        fi
    fi
    if [ ${#adaptive[@]} -gt 0 ]; then
        # On the 16-pixel grid, as --noise-threshold asks (w is at least 17).
        x=$((16 * (1 + RANDOM % ((w - 1) / 16))))
        bounds=("0,$x,0,$h" "$x,$w,0,$h")
    elif [ $((RANDOM % 2)) = 0 ]; then
        x=$((1 + RANDOM % (w - 1)))
        bounds=("0,$x,0,$h" "$x,$w,0,$h")
    else
        y=$((1 + RANDOM % (h - 1)))
        bounds=("0,$w,0,$y" "0,$w,$y,$h")
    fi
    checks=$((checks + 1))
    if render "$d/c1.exr" "$d/c1.err" --pixelbounds "${bounds[0]}" &&
        render "$d/c2.exr" "$d/c2.err" --pixelbounds "${bounds[1]}" --threads 1; then
        for f in "" "${layers[@]/#/.}"; do
            if ! "$bin" merge "$d/c1$f.exr" "$d/c2$f.exr" -o "$d/m$f.exr" -q 2> "$d/m.err"; then
                fail crops "$round" "merge failed: $(cat "$d/m.err")" "$bin merge $d/c1$f.exr $d/c2$f.exr -o $d/m$f.exr"
            elif ! cmp -s "$d/a$f.exr" "$d/m$f.exr"; then
                fail crops "$round" "the crops ${bounds[*]} merged differ from a$f.exr" "$bin render $scene -o $d/c1.exr ${opts[*]} --pixelbounds ${bounds[0]}"
            fi
        done
    else
        fail crops "$round" "a crop failed: $(cat "$d/c1.err" "$d/c2.err")" "$bin render $scene ... ${opts[*]} --pixelbounds ${bounds[*]}"
    fi

    # --- stop and resume: a frame long enough (about a second) to be stopped inside.
    w=$((100 + RANDOM % 100))
    h=$((80 + RANDOM % 80))
    choose spp 64 128
    choose filter box tent
    choose pass 4 8 16 "$spp"
    opts=(--width "$w" --height "$h" --spp "$spp" --seed $((RANDOM % 3)) --filter "$filter")
    # Adaptive sampling, in passes of 4 to 16 (or --spp/16 when none are given).
    adaptive=()
    if [ $((RANDOM % 3)) = 0 ]; then
        adaptive=(--noise-threshold "0.0$((1 + RANDOM % 5))")
        [ "$pass" != "$spp" ] || pass=16
    fi
    opts+=("${adaptive[@]}")
    [ $((RANDOM % 2)) = 0 ] && opts+=(--pass-spp "$pass")
    [ $((RANDOM % 3)) = 0 ] && opts+=(--env-map "$sky")
    layers=()
    [ $((RANDOM % 3)) = 0 ] && { opts+=(--aov "albedo,normal"); layers=(albedo normal); }
    if [ ${#mpi[@]} = 0 ] && [ $((RANDOM % 3)) = 0 ]; then
        if [ ${#adaptive[@]} -gt 0 ]; then
            opts+=(--pixelbounds "16,$(((w - 1) / 16 * 16)),0,$h")
        else
            opts+=(--pixelbounds "3,$((w - 5)),2,$((h - 1))")
        fi
    fi
    choose ext exr png
    # A PNG's tone mapping (refused for an EXR), which a stopped image and its preview share.
    [ "$ext" = png ] && [ $((RANDOM % 3)) = 0 ] && opts+=(--exposure "$((RANDOM % 3 - 1)).5" --tonemap aces)
    echo "round $round: $(basename "$scene") ${opts[*]} .$ext"
    t0=$(date +%s%N)
    if ! render "$d/full.$ext" "$d/full.err"; then
        fail stop "$round" "the render failed: $(cat "$d/full.err")" "$bin render $scene -o $d/full.$ext ${opts[*]}"
        continue
    fi
    full_ms=$((($(date +%s%N) - t0) / 1000000))
    # The stop comes at a random point of the time the full render took: in one process
    # from 0 to 110% of it (now and then while loading, now and then after the frame); under
    # mpirun at 0.1 s plus up to 35% of it. mpirun passes a signal on to the ranks a few
    # tenths of a second late, and a stop lets the tiles in flight finish: with 2 ranks on a
    # frame of 6 tiles that took 1.1 s, a SIGTERM at 0.2 s left 4 tiles done, and one at
    # 0.5 s came after the frame. So 7 of 12 stops (seeds 11 and 12, 6 rounds each) landed
    # inside; the others' frames took 0.27 to 0.72 s. (With delays of 0.3 to 1.3 s whatever
    # the frame, about half had come after it, and with 0.3 s plus 5 to 95% of it, 10 of 12.)
    if [ ${#mpi[@]} -gt 0 ]; then
        ms=$((100 + full_ms * (RANDOM % 36) / 100))
    else
        ms=$((full_ms * (RANDOM % 111) / 100))
    fi
    # In one process also SIGKILL, which leaves only the checkpoints (--checkpoint-every) to
    # resume from. (mpirun cannot pass a SIGKILL on to its ranks.)
    if [ ${#mpi[@]} -gt 0 ]; then choose signal TERM INT; else choose signal TERM INT KILL; fi
    every=()
    if [ "$signal" = KILL ]; then
        every=(--checkpoint-every "0.$((1 + RANDOM % 3))s")
        # Late enough for a checkpoint (after the first tile) more often than not.
        [ "$ms" -ge 600 ] || ms=$((600 + RANDOM % 400))
    fi
    delay=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
    threads=$((1 + RANDOM % 2))
    # gasworks (or mpirun) itself in the background, not `render` (a function: its subshell
    # would take the signal, and gasworks would finish unstopped). A background command of a
    # script starts with SIGINT ignored: a SIGINT before the frame's handlers are in place is
    # lost, and the render finishes.
    if [ ${#mpi[@]} -gt 0 ]; then
        np=$((2 + RANDOM % 3))
        how="mpirun -np $np"
        "${mpi[@]}" -np "$np" "$bin" render "$scene" -o "$d/s.$ext" "${opts[@]}" -q --threads 1 2> "$d/s.err" &
    else
        gpu_sized
        how="${tile_work:+GASWORKS_CPU_TILE_WORK=$tile_work }--threads $threads${every[*]:+ ${every[*]}}"
        if [ -n "$tile_work" ]; then
            GASWORKS_CPU_TILE_WORK="$tile_work" "$bin" render "$scene" -o "$d/s.$ext" "${opts[@]}" -q --threads "$threads" "${every[@]}" 2> "$d/s.err" &
        else
            "$bin" render "$scene" -o "$d/s.$ext" "${opts[@]}" -q --threads "$threads" "${every[@]}" 2> "$d/s.err" &
        fi
    fi
    pid=$!
    sleep "$delay"
    kill "-$signal" "$pid" 2> /dev/null
    wait_stopped "$pid"
    case "$stuck" in
        mpirun) echo "  ($how: mpirun hung in its teardown after SIG$signal, every rank gone; killed)" ;;
        "a rank") fail stop "$round" "a rank was still running a minute after SIG$signal" "$bin render $scene -o $d/s.$ext ${opts[*]} $how" ;;
    esac
    resume="$d/s.$ext.gasworks-resume"
    checks=$((checks + 1))
    if [ -f "$resume" ]; then
        previewed="" # (no image after SIGKILL: the checkpoint alone)
        [ ! -f "$d/s.$ext" ] || { previews_as stop "$round" "$resume" "$d/s.$ext" "$d/p.$ext"; previewed="previewed and "; }
        choose schedule regular sorted adaptive
        other=(--threads $((1 + RANDOM % 3)) --schedule "$schedule" --resume "$resume")
        if ! anywhere "$d/s.$ext" "$d/r.err" "${other[@]}"; then
            fail stop "$round" "the resume ($where) failed: $(cat "$d/r.err")" "$bin render $scene -o $d/s.$ext ${opts[*]} ${other[*]}"
        else
            same_as stop "$round" "$d/full" "$d/s" "$ext" "stopped ($how) after ${delay} s by SIG$signal and resumed ($where)" "$bin render $scene -o $d/s.$ext ${opts[*]} ${other[*]}"
            [ ! -e "$resume" ] || fail stop "$round" "the resume file is left behind" "ls $resume"
        fi
        echo "  stopped ($how) after $delay s (of the full render's $full_ms ms) by SIG$signal (status $status), ${previewed}resumed ($where)"
    elif [ "$status" = 0 ] || [ -f "$d/s.$ext" ]; then
        # Finished before the signal. (mpirun may then exit 1: the signal came in its teardown.)
        same_as stop "$round" "$d/full" "$d/s" "$ext" "finished ($how) before SIG$signal (status $status)" "$bin render $scene -o $d/s.$ext ${opts[*]} $how"
        echo "  finished ($how) before SIG$signal at $delay s (the full render took $full_ms ms; status $status)"
    else
        # Stopped while loading or building (the signals end the process then), or before
        # the first tile was done (killed: before the first checkpoint): nothing to resume.
        echo "  stopped ($how) by SIG$signal at $delay s before a tile was done (status $status)"
    fi

    # --- a rank dies (with --mpi): rank 0 writes what has arrived, which resumes.
    if [ ${#mpi[@]} -gt 0 ]; then
        np=$((2 + RANDOM % 3))
        choose kind exit kill abort silence
        victim=$((1 + RANDOM % (np - 1)))
        fault="rank=$victim,after=$((RANDOM % 5)),kind=$kind"
    fi
    # (Drawn without the hooks too: a seed draws the same options.)
    if [ ${#mpi[@]} -gt 0 ] && [ -n "$hooks" ]; then
        f="$d/fault"
        mkdir -p "$f"
        checks=$((checks + 1))
        GASWORKS_TEST_FAULT="$fault" GASWORKS_RANK_TIMEOUT_S=2 launch "$np" "$f/f.$ext" "$f/f.err" --threads 1
        status=$?
        cmd="GASWORKS_TEST_FAULT=$fault GASWORKS_RANK_TIMEOUT_S=2 mpirun -np $np $bin render $scene -o $f/f.$ext ${opts[*]} --threads 1"
        left=""
        for x in "$f"/*; do
            case "${x##*/}" in
                f.err | "f.$ext" | "f.$ext.gasworks-resume" | f.albedo.exr | f.normal.exr) ;;
                *) left="$left ${x##*/}" ;;
            esac
        done
        [ -z "$left" ] || fail fault "$round" "left beside the image:$left" "$cmd"
        if [ "$kind" = silence ] && [ "$status" != 0 ] && ! grep -q "rank $victim has sent nothing for" "$f/f.err"; then
            fail fault "$round" "status $status, but rank $victim was not named silent: $(cat "$f/f.err")" "$cmd"
        fi
        if [ "$status" = 0 ]; then
            # The rank had no more tiles to render than the fault waited for.
            cmp -s "$d/full.$ext" "$f/f.$ext" ||
                fail fault "$round" "the job succeeded, but f.$ext differs from full.$ext" "$cmd"
            echo "  $fault under mpirun -np $np: the frame ended first"
        elif [ -f "$f/f.$ext.gasworks-resume" ]; then
            if [ ! -f "$f/f.$ext" ]; then
                fail fault "$round" "a resume file but no image (status $status): $(cat "$f/f.err")" "$cmd"
            else
                previews_as fault "$round" "$f/f.$ext.gasworks-resume" "$f/f.$ext" "$f/p.$ext"
            fi
            if ! anywhere "$f/f.$ext" "$f/r.err" --threads 1 --resume "$f/f.$ext.gasworks-resume"; then
                fail fault "$round" "the resume ($where) failed: $(cat "$f/r.err")" "$cmd --resume $f/f.$ext.gasworks-resume"
            else
                same_as fault "$round" "$d/full" "$f/f" "$ext" "resumed ($where)" "$cmd --resume $f/f.$ext.gasworks-resume"
            fi
            echo "  $fault under mpirun -np $np: status $status, what had arrived written and resumed ($where)"
        elif grep -q "pixels rank $victim held were lost with it" "$f/f.err"; then
            # Its pixels held more than the complete passes' samples: the image keeps what
            # the other ranks held, and no resume file claims the rest (docs/cluster.md).
            [ -f "$f/f.$ext" ] ||
                fail fault "$round" "pixels named lost, but no image (status $status): $(cat "$f/f.err")" "$cmd"
            echo "  $fault under mpirun -np $np: status $status, the other ranks' pixels written, rank $victim's named lost"
        elif grep -q "no tile had arrived, so no image was written" "$f/f.err"; then
            echo "  $fault under mpirun -np $np: status $status, no tile had arrived"
        else
            fail fault "$round" "status $status, and rank 0 wrote nothing and said nothing: $(cat "$f/f.err")" "$cmd"
        fi
    fi

    # --- the time limit, every other round: repeated with --resume until complete.
    [ $((round % 2)) = 0 ] || continue
    limit="0.$((2 + RANDOM % 4))s"
    runs=0
    resume_args=()
    checks=$((checks + 1))
    while :; do
        runs=$((runs + 1))
        if [ "$runs" -gt 64 ]; then
            fail limit "$round" "not complete after 64 runs of --time-limit $limit" "$bin render $scene -o $d/t.$ext ${opts[*]} --time-limit $limit"
            break
        fi
        if ! anywhere "$d/t.$ext" "$d/t.err" --time-limit "$limit" "${resume_args[@]}"; then
            fail limit "$round" "run $runs ($where) failed: $(cat "$d/t.err")" "$bin render $scene -o $d/t.$ext ${opts[*]} --time-limit $limit ${resume_args[*]}"
            break
        fi
        [ -f "$d/t.$ext.gasworks-resume" ] || {
            same_as limit "$round" "$d/full" "$d/t" "$ext" "complete after $runs runs of --time-limit $limit" "$bin render $scene -o $d/t.$ext ${opts[*]} --time-limit $limit"
            echo "  --time-limit $limit: complete after $runs runs"
            break
        }
        previews_as limit "$round" "$d/t.$ext.gasworks-resume" "$d/t.$ext" "$d/tp.$ext"
        resume_args=(--resume "$d/t.$ext.gasworks-resume")
    done
done

echo "random-invariants: $checks checks, $failed failed"
[ "$failed" = 0 ] || exit 1
[ -z "${own_work:-}" ] || rm -rf "$work"
