#!/bin/sh
# test_overlap.sh - DDL_OVERLAP and DDL_BUCKET_KB in training: LeNet on 3 ranks with 8 KiB
# buckets (the gradient in about 30, cut at layer ends in backward order) trains to the same
# weights with the all-reduce overlapped with backward on a thread as without, over shm, tcp and
# zmq (when built), and with DDL_COMPRESS=bf16 too; DDL_OVERLAP=2 (the thread at real-time
# priority where allowed, else a warning) gives the same weights; bad values are refused naming
# them; a rank killed while buckets are in flight ends the job with an error naming it, within
# seconds, not a hang.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DATA=/usr/share/datasets/fashion-mnist
[ -d "$DATA" ] || { echo "skipped: no $DATA"; echo "0 passed, 0 failed"; exit 0; }
export OPENBLAS_NUM_THREADS=1 DDL_TOKEN=overlap-test-secret-0123456789 DDL_BUCKET_KB=8
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
ARGS="--epochs 1 --train-limit 3000 --batch 63 --quiet --data $DATA"
run() { DDL_OVERLAP=$1 DDL_COMPRESS=$2 "$BUILD/bin/ddlrun" -n 3 -t "$3" "$BUILD/bin/lenet" $ARGS > "$tmp/$1.$2.$3" 2>&1; }
transports="shm tcp"
grep -q '^WITH_ZMQ ?= 1' "$BUILD/config.mk" 2>/dev/null && transports="$transports zmq" # else: built without zmq
for t in $transports; do
    for z in none bf16; do
        run 0 $z $t; check "DDL_OVERLAP=0 DDL_COMPRESS=$z over $t trains" $?
        run 1 $z $t; check "DDL_OVERLAP=1 DDL_COMPRESS=$z over $t trains" $?
        a=$(crc "$tmp/0.$z.$t"); b=$(crc "$tmp/1.$z.$t"); r=$(crc "$tmp/0.$z.shm")
        [ -n "$a" ] && [ "$a" = "$b" ]; check "$t, $z: the same weights with overlap as without ($a, $b)" $?
        [ "$a" = "$r" ]; check "$t, $z: the same weights as over shm ($a, $r)" $?
    done
done
[ "$(crc "$tmp/0.none.shm")" != "$(crc "$tmp/0.bf16.shm")" ]; check "bf16 buckets are compressed (other weights)" $?
# DDL_OVERLAP=2: the same weights; its thread at SCHED_FIFO where the process may (chrt -f works),
# and without the right (CAP_SYS_NICE dropped, RLIMIT_RTPRIO 0) a warning and the same weights
run 2 none tcp; check "DDL_OVERLAP=2 over tcp trains" $?
[ "$(crc "$tmp/2.none.tcp")" = "$(crc "$tmp/0.none.tcp")" ]; check "DDL_OVERLAP=2: the same weights as without overlap" $?
if chrt -f 1 true 2> /dev/null; then # this process may use real-time priority (root, CAP_SYS_NICE)
    ! grep -q "real-time priority" "$tmp/2.none.tcp"; check "DDL_OVERLAP=2 where real-time priority is allowed: no warning" $?
    DDL_OVERLAP=2 "$BUILD/bin/ddlrun" -n 2 -t tcp "$BUILD/bin/lenet" --epochs 100 --train-limit 3000 --data "$DATA" \
        > "$tmp/rt" 2>&1 &
    job=$!
    for _ in $(seq 100); do grep -q '^epoch' "$tmp/rt" 2>/dev/null && break; sleep 0.1; done
    fifo=0 # a thread of a rank with policy 1 (SCHED_FIFO: field 41 of /proc/PID/task/TID/stat)
    for p in $(pgrep -f "lenet --epochs 100 --train-limit 3000 --data"); do
        for st in /proc/"$p"/task/*/stat; do
            [ "$(sed 's/.*) //' "$st" 2>/dev/null | awk '{ print $39 }')" = 1 ] && fifo=$((fifo + 1))
        done
    done
    pkill -f "lenet --epochs 100 --train-limit 3000 --data"; wait $job
    [ "$fifo" -eq 2 ]; check "DDL_OVERLAP=2 where allowed: one SCHED_FIFO thread in each rank ($fifo in all)" $?
else
    echo "skipped the SCHED_FIFO checks: this process may not use real-time priority (chrt -f 1 failed)"
fi
if command -v setpriv > /dev/null && command -v prlimit > /dev/null; then
    DDL_OVERLAP=2 prlimit --rtprio=0 setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice \
        "$BUILD/bin/ddlrun" -n 3 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/nort" 2>&1
    check "DDL_OVERLAP=2 without the right to real-time priority trains" $?
    grep -q "DDL_OVERLAP=2: the all-reduce thread may not run at real-time priority" "$tmp/nort"
    check "... and warns that it may not run at real-time priority" $?
    [ "$(crc "$tmp/nort")" = "$(crc "$tmp/0.none.tcp")" ]; check "... and gives the same weights" $?
else
    echo "skipped the DDL_OVERLAP=2 fallback: no setpriv or prlimit (util-linux)"
fi
DDL_OVERLAP=3 "$BUILD/bin/ddlrun" -n 2 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/bad1" 2>&1
[ $? -ne 0 ] && grep -q "DDL_OVERLAP=3: expected 0, 1 or 2" "$tmp/bad1"; check "DDL_OVERLAP=3 is refused, naming it" $?
DDL_BUCKET_KB=-4 "$BUILD/bin/ddlrun" -n 2 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/bad2" 2>&1
[ $? -ne 0 ] && grep -q "DDL_BUCKET_KB=-4" "$tmp/bad2"; check "DDL_BUCKET_KB=-4 is refused, naming it" $?
# a rank killed mid-run, with buckets in flight on the thread: the job ends, naming it
DDL_OVERLAP=1 DDL_TIMEOUT_MS=10000 "$BUILD/bin/ddlrun" -n 3 -t tcp "$BUILD/bin/lenet" --epochs 100 --train-limit 3000 \
    --batch 63 --data "$DATA" > "$tmp/kill" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q '^epoch' "$tmp/kill" 2>/dev/null && break; sleep 0.1; done
victim=$(pgrep -f "lenet --epochs 100" | while read -r p; do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx DDL_RANK=1 && echo "$p"; done | head -n 1)
start=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
wait $job; rc=$?
secs=$(( $(date +%s) - start ))
[ -n "$victim" ] && [ $rc -ne 0 ] && [ $secs -le 15 ] && grep -q "rank 1" "$tmp/kill"
check "rank 1 killed during overlapped all-reduces: the job ends in ${secs} s naming it (exit $rc)" $?
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
