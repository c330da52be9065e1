#!/bin/sh
# elastic.sh - make bench's elastic training (BENCH_ONLY=elastic, issue 32 item 5), medians of
# REPEAT (default 3) alternated runs:
#   1. what elastic mode costs with no failure: LeNet one epoch, 2 ranks over shm and 4 over tcp,
#      `ddlrun --elastic 1:N` against plain `ddlrun`, images/s (target: elastic >= 0.98x);
#   2. what a replacement costs: U-Net (Adam, --width 32: 23 MB of weights and moments) on 4 ranks
#      over tcp, rank 2 killed after step 2;
#      its replacement receives weights and both Adam moments from the leader, and logs the bytes
#      and the time ("elastic: state received from ..."); beside it, ddl-bench allgather over tcp
#      of the same bytes on 4 ranks (what a plain all-gather moves in that time; target: the
#      transfer >= 0.8x its rate), and the undisturbed run's weights_crc against the recovered one.
# The arithmetic: the transfer is a broadcast from the leader, so the joiner's link carries S bytes
# once: about S / B; an all-gather of S bytes over a ring carries (n - 1) S / n per link: on one
# host's loopback both are bounded by copying, not a wire. Never part of make test.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
here=$(dirname "$0")
. "$here/lib.sh"
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
export OPENBLAS_NUM_THREADS=1 DDL_HEARTBEAT_TIMEOUT_MS=1000
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

echo "== elastic mode with no failure: LeNet, 1 epoch, images/s, $REPEAT alternated runs"
for cfg in "2 shm" "4 tcp"; do
    set -- $cfg; n=$1; t=$2
    : > "$tmp/plain"; : > "$tmp/el"
    r=0
    while [ $r -lt "$REPEAT" ]; do
        a=$("$BUILD/bin/ddlrun" -n "$n" -t "$t" "$BUILD/bin/lenet" --epochs 1 --quiet --data "$DATA" 2>/dev/null |
            field images_per_sec)
        b=$("$BUILD/bin/ddlrun" -n "$n" -t "$t" --elastic "1:$n" "$BUILD/bin/lenet" --epochs 1 --quiet --data "$DATA" \
            2>/dev/null | field images_per_sec)
        echo "   run $((r + 1)), $n ranks over $t: plain $a, elastic $b images/s"
        [ -n "$a" ] && echo "$a" >> "$tmp/plain"; [ -n "$b" ] && echo "$b" >> "$tmp/el"
        r=$((r + 1))
    done
    a=$(median < "$tmp/plain"); b=$(median < "$tmp/el")
    echo "elastic_cost_${n}x$t: plain_images_per_sec=$a elastic_images_per_sec=$b ratio=$(ratio "$b" "$a")"
    record "LeNet images/s, $n ranks over $t, no failure: elastic (--elastic 1:$n)" "$b" "plain ddlrun" "$a" \
        "$(ratio "$b" "$a")" ">= 0.98" "-" "-"
done

echo "== a replacement joins: U-Net (Adam, width 32), 4 ranks over tcp, rank 2 killed after step 2"
UARGS="--scenes 384 --test-scenes 32 --epochs 1 --width 32 --quiet --data $DATA" # 23 MB of state
ref=$("$BUILD/bin/ddlrun" -n 4 -t tcp "$BUILD/bin/unet" $UARGS 2>/dev/null | field weights_crc)
: > "$tmp/rate"; : > "$tmp/ag"
r=0
while [ $r -lt "$REPEAT" ]; do
    DDL_TEST_FAIL="2:2:kill" "$BUILD/bin/ddlrun" -n 4 -t tcp --elastic 2:4 "$BUILD/bin/unet" $UARGS \
        > "$tmp/out" 2> "$tmp/err"
    got=$(field weights_crc < "$tmp/out"); world=$(field world < "$tmp/out")
    line=$(grep "elastic: state received from" "$tmp/err" | tail -n 1)
    mb=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) MB (weights.*/\1/p')
    rate=$(echo "$line" | sed -n 's/.* \([0-9.]*\) GB\/s.*/\1/p')
    bytes=$(awk -v m="${mb:-0}" 'BEGIN { printf "%d", m * 1e6 }')
    ag=""
    if [ "$bytes" -gt 0 ]; then
        ag=$("$BUILD/bin/ddl-bench" allgather -t tcp -n 4 -b "$bytes" -e "$bytes" --iters 5 --warmup 2 |
            awk '$1 ~ /^[0-9]+$/ && $NF == "ok" { print $4 }' | tail -n 1)
    fi
    echo "   run $((r + 1)): world $world, weights_crc $got (undisturbed $ref), state ${mb:-?} MB at ${rate:-?} GB/s;" \
        "all-gather of the same bytes ${ag:-?} GB/s"
    [ -n "$rate" ] && echo "$rate" >> "$tmp/rate"; [ -n "$ag" ] && echo "$ag" >> "$tmp/ag"
    r=$((r + 1))
done
a=$(median < "$tmp/rate"); b=$(median < "$tmp/ag")
echo "elastic_rejoin: state_GBs=$a allgather_GBs=$b ratio=$(ratio "$a" "$b")"
record "U-Net (width 32) state to a replacement (weights + Adam moments), 4 ranks over tcp, GB/s" "$a" \
    "ddl-bench allgather of the same bytes" "$b" "$(ratio "$a" "$b")" ">= 0.8" "-" "-"
