#!/bin/sh
# threads.sh - make bench's figures for --threads (issue 12): LeNet (one epoch) and U-Net (SCENES
# scenes), one process, ddl with 2 threads against ddl with 1 and against PyTorch 1.13 with 2
# (torch.set_num_threads(2)) in NCHW, channels_last and bfloat16 autocast (torch_modes.py; the
# table has NCHW, as before, and the fastest), the runs alternated REPEAT times; medians. Before
# each round, tools/bench/cores.c: what both cores give at once against one (the ceiling of a
# 2-thread speedup on this machine at that time), and for LeNet one round of
# tools/bench/lockstep.c (the ceiling of whatever meets every step). Called by bench.sh.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
EPOCHS=${EPOCHS:-1}
SCENES=${SCENES:-1024}
DATA=/usr/share/datasets/fashion-mnist
here=$(dirname "$0")
. "$here/lib.sh"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
rss=$tmp/rss; rss_t=$tmp/rss_t

# one NAME TARGET_VS_TORCH DDL_COMMAND... -- TORCH_COMMAND...: the three runs, REPEAT times
one() {
    name=$1 target=$2; shift 2
    ddl=""; while [ "$1" != "--" ]; do ddl="$ddl $1"; shift; done; shift
    : > "$tmp/d1"; : > "$tmp/d2"; : > "$tmp/t2"; : > "$tmp/r"; : > "$tmp/modes"
    i=0
    while [ $i -lt "$REPEAT" ]; do
        cores_probe "$tmp/cores"
        [ "$name" = LeNet ] && lockstep_probe "$tmp/lockstep"
        a=$($ddl --threads 1 | field images_per_sec)
        b=$(peak_rss "$rss" $ddl --threads 2 | field images_per_sec)
        c=$(peer_modes "$tmp/modes" peak_rss "$rss_t" "$@" --threads 2)
        echo "   run $((i + 1)): ddl 1 thread $a, ddl 2 threads $b, pytorch 2 threads $c images/s"
        echo "$a" >> "$tmp/d1"; echo "$b" >> "$tmp/d2"; echo "$c" >> "$tmp/t2"
        [ -n "$a" ] && [ -n "$b" ] && ratio "$b" "$a" >> "$tmp/r" && echo >> "$tmp/r"
        i=$((i + 1))
    done
    # beside the ratio of the medians, the median of each run's ratio: a run's 1- and 2-thread
    # processes ran back to back, so a host that slows for a while slows both
    a=$(median < "$tmp/d1"); b=$(median < "$tmp/d2"); c=$(median < "$tmp/t2"); q=$(median < "$tmp/r")
    echo "${name}_2threads: ddl_1thread=$a ddl_2threads=$b pytorch_2threads=$c speedup=$(ratio "$b" "$a") run_speedup=$q vs_pytorch=$(ratio "$b" "$c")"
    record "$name training, images/s, 2 threads (median run ratio $q)" "$b" "ddl, 1 thread" "$a" "$(ratio "$b" "$a")" ">= 1.8" \
        "$(cat "$rss")" "-"
    record "$name training, images/s, 2 threads" "$b" "PyTorch 1.13, 2 threads" "$c" "$(ratio "$b" "$c")" "$target" \
        "$(cat "$rss")" "$(cat "$rss_t")"
    record_best "$name training, images/s, 2 threads" "$b" "$tmp/modes" "-"
    # LeNet's 2 parts run a thread each and meet every step: the same ceiling as 2 ranks
    [ "$name" = LeNet ] && lockstep_record "LeNet training, images/s, 2 threads" "$b" "$tmp/lockstep"
    return 0
}

echo "== --threads 2: LeNet $EPOCHS epoch(s) and U-Net $SCENES scenes, 1 process; $REPEAT alternated runs"
one LeNet ">= 2.5" "$BUILD/bin/lenet" --epochs "$EPOCHS" --quiet --data "$DATA" -- \
    /usr/bin/python3 "$here/lenet_torch.py" --epochs "$EPOCHS" --data "$DATA"
one U-Net ">= 1.5" "$BUILD/bin/unet" --scenes "$SCENES" --test-scenes 32 --epochs 1 --quiet -- \
    /usr/bin/python3 "$here/unet_torch.py" --scenes "$SCENES"
cores_record "machine during the --threads runs" "$tmp/cores"
