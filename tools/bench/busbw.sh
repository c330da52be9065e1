#!/bin/sh
# busbw.sh - all-reduce bus bandwidth on 2 ranks at 256 KiB and 8 MiB for every transport, side
# by side with the MPI library's own MPI_Allreduce, medians of REPEAT runs (default 3).
#   shm, tcp, zmq   ddl-bench allreduce -t T -n 2 -b 256K -e 8M -f 32      (ddl-bench forks its ranks)
#   mpi             mpirun -np 2 ddl-bench allreduce -t mpi ...            (ddl's collectives over MPI p2p)
#   mpi --native    mpirun -np 2 ddl-bench allreduce -t mpi ... --native   (MPI_Iallreduce, tested to a deadline)
#   MPI_Allreduce   mpirun -np 2 mpi_allreduce ...                         (tools/bench/mpi_allreduce.c, blocking)
# Called by tools/bench/bench.sh; never part of make test.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
here=$(dirname "$0")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
SIZES="-b 256K -e 8M -f 32"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

have_mpi=0
if command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
    mkdir -p "$BUILD/bench"
    mpicc -O2 -o "$BUILD/bench/mpi_allreduce" "$here/mpi_allreduce.c" && have_mpi=1
fi

# run NAME COMMAND...: REPEAT runs; keep busbw of 256 KiB and 8 MiB (column 5), only rows checked ok
run() {
    name=$1; shift
    : > "$tmp/$name.s"; : > "$tmp/$name.l"
    i=0
    while [ "$i" -lt "$REPEAT" ]; do
        "$@" > "$tmp/out" 2>&1 || { echo "   $name failed:"; tail -n 3 "$tmp/out"; }
        awk '$1 == 262144 && $6 == "ok" {print $5}' "$tmp/out" >> "$tmp/$name.s"
        awk '$1 == 8388608 && $6 == "ok" {print $5}' "$tmp/out" >> "$tmp/$name.l"
        i=$((i + 1))
    done
    printf '%-14s %12s %12s   %s\n' "$name" "$(median < "$tmp/$name.s")" "$(median < "$tmp/$name.l")" "$*"
}

echo "== all-reduce busbw (GB/s, nccl-tests definition), 2 ranks, float32 sum, median of $REPEAT runs"
printf '%-14s %12s %12s   %s\n' "transport" "256KiB" "8MiB" "command"
for t in shm tcp zmq; do
    run "$t" "$BUILD/bin/ddl-bench" allreduce -t "$t" -n 2 $SIZES
done
if [ "$have_mpi" -eq 1 ]; then
    run mpi mpirun --oversubscribe -np 2 "$BUILD/bin/ddl-bench" allreduce -t mpi $SIZES
    run "mpi-native" mpirun --oversubscribe -np 2 "$BUILD/bin/ddl-bench" allreduce -t mpi $SIZES --native
    run "MPI_Allreduce" mpirun --oversubscribe -np 2 "$BUILD/bench/mpi_allreduce" $SIZES
else
    echo "(mpi rows skipped: mpirun or mpicc missing)"
fi
