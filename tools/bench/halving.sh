#!/bin/sh
# halving.sh - make bench's recursive halving against the ring on one host (BENCH_ONLY=halving):
# LeNet, one epoch, 4 ranks over shm and over tcp, DDL_ALGO=ring against the default (auto: a world
# of 4 adds by recursive halving and doubling, src/comm/halving.c), alternated REPEAT times
# (default 3); medians of images/s and their ratio. Its 241 KiB gradient goes in 4 exchanges of
# 120, 60, 60 and 120 KiB instead of the ring's 6 of 60 KiB; the bytes are the same.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
here=$(dirname "$0")
. "$here/lib.sh"
DATA=/usr/share/datasets/fashion-mnist
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "== recursive halving against the ring: LeNet, 1 epoch, 4 ranks on one host; $REPEAT alternated runs"
for t in shm tcp; do
    : > "$tmp/ring"; : > "$tmp/auto"
    r=0
    while [ "$r" -lt "$REPEAT" ]; do
        for a in ring auto; do
            rate=$(DDL_ALGO=$a "$BUILD/bin/ddlrun" -n 4 -t "$t" "$BUILD/bin/lenet" --epochs 1 --quiet --data "$DATA" 2>&1 |
                   field images_per_sec)
            echo "   $t $a: $rate images/s"
            echo "$rate" >> "$tmp/$a"
        done
        r=$((r + 1))
    done
    ring=$(median < "$tmp/ring"); auto=$(median < "$tmp/auto")
    record "LeNet images/s, 4 ranks over $t: recursive halving (DDL_ALGO auto)" "$auto" "the ring (DDL_ALGO=ring)" \
        "$ring" "$(ratio "$auto" "$ring")" ">= 1"
done
