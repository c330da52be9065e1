#!/bin/sh
# test_mpi.sh - the transport conformance suite and the collectives test over the mpi transport,
# each rank started by mpirun (-np 2, 3 and 4), plus ddl-bench under mpirun with ddl's own
# all-reduce and with the native one (MPI_Iallreduce), and a stalled rank (SIGSTOP) that must end the
# job after DDL_TIMEOUT_MS, not hang it in MPI_Finalize. Skipped, with the reason, when mpirun is
# missing or the library was built without MPI. Killed-peer cases are not run under MPI: Open
# MPI ends the whole job when one rank dies (tests/ranks.h skips them).
# Under SAN=address, leak detection is off for these runs only: Open MPI's own allocations at
# exit are reported as leaks (ASAN_OPTIONS=detect_leaks=0).
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1

if ! command -v mpirun >/dev/null 2>&1; then
    echo "skipped: mpirun is not installed (apt-get install openmpi-bin)"; echo "0 passed, 0 failed"; exit 0
fi
if ! nm "$BUILD/libddl.a" 2>/dev/null | grep -q ' U MPI_Isend'; then
    echo "skipped: $BUILD/libddl.a was built without MPI (WITH_MPI=0)"; echo "0 passed, 0 failed"; exit 0
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
flags=""
mpirun --version 2>/dev/null | grep -q "Open MPI" && flags="--oversubscribe"
out=$(mktemp); trap 'rm -f "$out"' EXIT

# run_suite PROGRAM NP: every rank prints "N passed, N failed"; add them all up.
run_suite() {
    start=$(date +%s)
    timeout 180 mpirun $flags -np "$2" -x DDL_TEST_TRANSPORT=mpi "$BUILD/tests/$1" > "$out" 2>&1
    rc=$?
    lines=$(grep -cE '^[0-9]+ passed, [0-9]+ failed' "$out")
    p=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | awk '{s += $1} END {print s + 0}')
    f=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | awk '{s += $3} END {print s + 0}')
    pass=$((pass + p)); fail=$((fail + f))
    echo "$1 under mpirun -np $2: $p passed, $f failed, $lines of $2 ranks reported, exit $rc, $(( $(date +%s) - start )) s"
    if [ "$rc" -ne 0 ] || [ "$lines" -ne "$2" ]; then
        bad "$1 -np $2 (exit $rc, $lines ranks reported)"; tail -n 20 "$out"
    elif [ "$f" -ne 0 ]; then
        grep -E 'CHECK|FAIL|rank' "$out" | head -n 20
    fi
}

for np in 2 3 4; do
    run_suite test_transport "$np"
    run_suite test_collectives "$np"
done

# ddl-bench under mpirun: it must not fork, take its rank from mpirun, and check its sums
for native in "" --native; do
    timeout 60 mpirun $flags -np 2 "$BUILD/bin/ddl-bench" allreduce -t mpi -b 4K -e 1M -f 16 --iters 5 --warmup 1 \
        $native > "$out" 2>&1
    rc=$?
    rows=$(grep -cE '^ +[0-9]+ +[0-9]+ .* ok$' "$out")
    if [ "$rc" -eq 0 ] && [ "$rows" -eq 3 ] && grep -q "transport mpi, 2 ranks" "$out"; then ok; else
        bad "ddl-bench -t mpi $native under mpirun (exit $rc, $rows rows ok)"; tail -n 10 "$out"; fi
done

# a lone process with the OMPI environment but the rank wrong for it is refused, not hung
timeout 60 mpirun $flags -np 2 -x DDL_RANK=0 -x DDL_WORLD_SIZE=2 -x DDL_TIMEOUT_MS=2000 "$BUILD/bin/ddl-bench" allreduce -t mpi \
    -b 4K -e 4K --iters 1 > "$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "MPI says this is rank 1 of 2, the configuration says rank 0 of 2" "$out"; then ok; else
    bad "a rank whose DDL_RANK disagrees with MPI is refused with a clear message (exit $rc)"; tail -n 5 "$out"; fi

# a stalled rank (SIGSTOP) makes the others time out; the job then ends, it does not hang in
# MPI_Finalize waiting for the stopped rank (it used to, until mpirun's own timeout)
start=$(date +%s)
timeout 60 mpirun $flags -np 2 -x DDL_TIMEOUT_MS=2000 "$BUILD/bin/lenet" --epochs 3 --train-limit 20000 --quiet \
    > "$out" 2>&1 &
job=$!
stopped=""
for i in $(seq 1 100); do
    for p in $(pgrep -f "$BUILD/bin/lenet --epochs 3 --train-limit 20000"); do
        tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=1$' && stopped=$p
    done
    [ -n "$stopped" ] && break
    sleep 0.1
done
sleep 1 # training is under way
[ -n "$stopped" ] && kill -STOP "$stopped"
wait $job; rc=$?
secs=$(( $(date +%s) - start ))
[ -n "$stopped" ] && kill -9 "$stopped" 2>/dev/null
if [ -n "$stopped" ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$secs" -lt 30 ] &&
    grep -q "rank 0 timed out after 2000 ms waiting for rank 1" "$out"; then ok; else
    bad "a stalled rank under mpirun: the job ends with a timeout naming rank 1 (exit $rc after $secs s)"
    tail -n 8 "$out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
