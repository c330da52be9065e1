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
. "$here/lib.sh"

have_mpi=0
if command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
    mkdir -p "$BUILD/bench"
    mpicc $BENCH_CFLAGS -o "$BUILD/bench/mpi_allreduce" "$here/mpi_allreduce.c" && have_mpi=1
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

# issue 12's all-reduce targets: shm against MPI_Allreduce in time at 4 KiB, 256 KiB and 64 MiB
# (ddl <= 0.8x, 0.5x, 0.5x its time), alternated REPEAT times, 2000 iterations after 200 untimed (20 at 64 MiB)
time_sizes() { # time_sizes NAME COMMAND...: time_us of 4 KiB, 256 KiB and 64 MiB appended to $tmp/NAME.{4K,256K,64M}
    name=$1; shift
    "$@" -b 4K -e 256K -f 64 --iters 2000 --warmup 200 > "$tmp/t" 2>&1 && "$@" -b 64M -e 64M > "$tmp/t2" 2>&1 || { tail -n 3 "$tmp/t"; return 1; }
    awk '$1 == 4096 && $6 == "ok" {print $3}' "$tmp/t" >> "$tmp/$name.4K"
    awk '$1 == 262144 && $6 == "ok" {print $3}' "$tmp/t" >> "$tmp/$name.256K"
    awk '$1 == 67108864 && $6 == "ok" {print $3}' "$tmp/t2" >> "$tmp/$name.64M"
}
if [ "$have_mpi" -eq 1 ]; then
    echo "== all-reduce time (us), 2 ranks, float32 sum: ddl over shm against Open MPI's MPI_Allreduce, median of $REPEAT alternated runs"
    for k in shm mpi; do for z in 4K 256K 64M; do : > "$tmp/$k.$z"; done; done
    i=0
    while [ "$i" -lt "$REPEAT" ]; do
        time_sizes shm "$BUILD/bin/ddl-bench" allreduce -t shm -n 2
        time_sizes mpi mpirun --oversubscribe -np 2 "$BUILD/bench/mpi_allreduce"
        i=$((i + 1))
    done
    for z in 4K 256K 64M; do
        d=$(median < "$tmp/shm.$z"); m=$(median < "$tmp/mpi.$z")
        t=">= 2 (0.5x its time)"; [ $z = 4K ] && t=">= 1.25 (0.8x its time)"
        echo "   $z: ddl shm $d us, MPI_Allreduce $m us"
        record "all-reduce time, us, 2 ranks over shm, $z" "$d" "Open MPI MPI_Allreduce" "$m" "$(ratio "$m" "$d")" "$t"
    done
fi
