#!/bin/sh
# make bench: long runs and peer comparisons, never part of make test.
#   1. LeNet, one epoch, one process, one thread: ddl against PyTorch 1.13 (same model, data,
#      batch and recipe), alternated REPEAT times; medians and their ratio.
#   1b. U-Net (unet defaults: 64x64, batch 32, depth 3, width 8, Adam), SCENES training scenes,
#      one process, one thread: ddl against tools/bench/unet_torch.py, alternated REPEAT times.
#   2. Scaling: 2 ranks over shm against 1 rank (one epoch each).
#   3. ddl-bench allreduce for every transport at 256 KiB and 8 MiB, and MPI_Allreduce (busbw.sh).
#   4. What frame MACs cost (mac.sh).
#   5. ddl-serve under wrk: :predict with one LeNet instance per request (serve.sh).
# Environment: REPEAT (default 3), EPOCHS (default 1), BENCH_ONLY=lenet|unet|scaling|allreduce|mac|serve,
# SCENES (default 1024),
# SERVE_SECONDS (default 30), SERVE_CONNS (default 64).
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
EPOCHS=${EPOCHS:-1}
ONLY=${BENCH_ONLY:-}
DATA=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | tail -n 1; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

if [ -z "$ONLY" ] || [ "$ONLY" = lenet ]; then
    if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        DDL_BENCH_DEPS=1 sh tools/install-deps.sh || exit 1
    fi
    echo "== LeNet, $EPOCHS epoch(s), batch 64, SGD lr 0.01 momentum 0.9, 1 process, 1 thread; $REPEAT alternated runs"
    : > /tmp/ddl-bench-ddl.txt; : > /tmp/ddl-bench-torch.txt
    i=0
    while [ $i -lt "$REPEAT" ]; do
        d=$("$BUILD/bin/lenet" --epochs "$EPOCHS" --threads 1 --quiet --data "$DATA" | field images_per_sec)
        t=$(/usr/bin/python3 "$here/lenet_torch.py" --epochs "$EPOCHS" --threads 1 --data "$DATA" | field images_per_sec)
        echo "   run $((i + 1)): ddl $d images/s, pytorch $t images/s"
        echo "$d" >> /tmp/ddl-bench-ddl.txt; echo "$t" >> /tmp/ddl-bench-torch.txt
        i=$((i + 1))
    done
    d=$(median < /tmp/ddl-bench-ddl.txt); t=$(median < /tmp/ddl-bench-torch.txt)
    echo "lenet_1thread: ddl_images_per_sec=$d pytorch_images_per_sec=$t ratio=$(awk "BEGIN {printf \"%.2f\", $d / $t}")"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = unet ]; then
    SCENES=${SCENES:-1024}
    if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        DDL_BENCH_DEPS=1 sh tools/install-deps.sh || exit 1
    fi
    echo "== U-Net, $SCENES scenes 64x64, batch 32, depth 3, width 8, Adam, 1 process, 1 thread; $REPEAT alternated runs"
    : > /tmp/ddl-bench-ddl.txt; : > /tmp/ddl-bench-torch.txt
    i=0
    while [ $i -lt "$REPEAT" ]; do
        d=$("$BUILD/bin/unet" --scenes "$SCENES" --test-scenes 32 --epochs 1 --threads 1 --quiet --data "$DATA" | field images_per_sec)
        t=$(/usr/bin/python3 "$here/unet_torch.py" --scenes "$SCENES" --threads 1 | field images_per_sec)
        echo "   run $((i + 1)): ddl $d images/s, pytorch $t images/s"
        echo "$d" >> /tmp/ddl-bench-ddl.txt; echo "$t" >> /tmp/ddl-bench-torch.txt
        i=$((i + 1))
    done
    d=$(median < /tmp/ddl-bench-ddl.txt); t=$(median < /tmp/ddl-bench-torch.txt)
    echo "unet_1thread: ddl_images_per_sec=$d pytorch_images_per_sec=$t ratio=$(awk "BEGIN {printf \"%.2f\", $d / $t}")"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = scaling ]; then
    echo "== scaling: LeNet $EPOCHS epoch(s), global batch 64, 1 rank against 2 ranks over shm (1 thread each); $REPEAT runs"
    : > /tmp/ddl-bench-1.txt; : > /tmp/ddl-bench-2.txt
    i=0
    while [ $i -lt "$REPEAT" ]; do
        "$BUILD/bin/lenet" --epochs "$EPOCHS" --quiet --data "$DATA" | field images_per_sec >> /tmp/ddl-bench-1.txt
        "$BUILD/bin/ddlrun" -n 2 -t shm "$BUILD/bin/lenet" --epochs "$EPOCHS" --quiet --data "$DATA" | field images_per_sec >> /tmp/ddl-bench-2.txt
        i=$((i + 1))
    done
    one=$(median < /tmp/ddl-bench-1.txt); two=$(median < /tmp/ddl-bench-2.txt)
    echo "scaling: world1_images_per_sec=$one world2_images_per_sec=$two efficiency=$(awk "BEGIN {printf \"%.2f\", $two / (2 * $one)}")"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = allreduce ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/busbw.sh" # every transport and MPI_Allreduce, medians
fi

if [ -z "$ONLY" ] || [ "$ONLY" = mac ]; then
    BUILD=$BUILD sh "$here/mac.sh"
fi

if [ -z "$ONLY" ] || [ "$ONLY" = serve ]; then
    BUILD="$BUILD" REPEAT="$REPEAT" sh "$here/serve.sh"
fi
