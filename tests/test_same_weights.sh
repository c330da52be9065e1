#!/bin/sh
# test_same_weights.sh - the same training gives bit-identical weights over every transport:
# LeNet, one epoch on the first 3000 Fashion-MNIST images, seed 42, on 2 and on 3 ranks, over
# shm, tcp and zmq (ddlrun) and mpi (mpirun, ddl's own collectives): every weights_crc of a world
# size must be equal. The summary line says which transport ran; that is checked too.
# Transports not compiled in (or mpirun missing) are skipped with the reason.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DATA=/usr/share/datasets/fashion-mnist
if [ ! -e "$DATA/train-images-idx3-ubyte.gz" ] && [ ! -e "$DATA/train-images-idx3-ubyte" ]; then
    echo "skipped: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"; echo "0 passed, 0 failed"; exit 0
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # Open MPI's allocations at exit
ARGS="--epochs 1 --train-limit 3000 --seed 42 --quiet --data $DATA"
have_mpi=0
if command -v mpirun >/dev/null 2>&1 && nm "$BUILD/libddl.a" 2>/dev/null | grep -q ' U MPI_Isend'; then have_mpi=1; fi
mpiflags=""
mpirun --version 2>/dev/null | grep -q "Open MPI" && mpiflags="--oversubscribe"


for n in 2 3; do
    ref=""; ref_t=""
    for t in shm tcp zmq mpi; do
        if [ "$t" = mpi ]; then
            if [ "$have_mpi" -eq 0 ]; then echo "$t: skipped (no mpirun or built without MPI)"; continue; fi
            out=$(timeout 120 mpirun $mpiflags -np "$n" "$BUILD/bin/lenet" $ARGS 2>&1)
        else
            out=$(timeout 120 "$BUILD/bin/ddlrun" -n "$n" -t "$t" "$BUILD/bin/lenet" $ARGS 2>&1)
            if printf '%s' "$out" | grep -q "not compiled in"; then echo "$t: skipped (not compiled in)"; continue; fi
        fi
        crc=$(printf '%s\n' "$out" | field weights_crc)
        tr=$(printf '%s\n' "$out" | field transport)
        w=$(printf '%s\n' "$out" | field world)
        echo "$n ranks over $t: transport=$tr world=$w weights_crc=$crc"
        if [ -z "$crc" ] || [ "$tr" != "$t" ] || [ "$w" != "$n" ]; then
            bad "$t on $n ranks gave no summary for transport $t world $n"; printf '%s\n' "$out" | tail -n 5; continue
        fi
        ok
        if [ -z "$ref" ]; then ref=$crc; ref_t=$t
        elif [ "$crc" = "$ref" ]; then ok
        else bad "$n ranks: weights_crc $crc over $t differs from $ref over $ref_t"; fi
    done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
