#!/bin/sh
# A rank killed with kill -9 in the middle of training: every other rank fails with DDL_EPEER
# naming the dead rank within 2 s (not after the timeout), over shm and tcp; a rank that stops
# answering (SIGSTOP) gives DDL_ETIMEDOUT after DDL_TIMEOUT_MS; and ddlrun exits non-zero
# within 5 s with one line naming the rank that failed: the killed one, not the one that exited
# with code 1 on noticing it; and ranks die with ddlrun when ddlrun itself is killed (SIGKILL).
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
LENET="$BUILD/bin/lenet"
tmp=$(mktemp -d); trap 'kill -9 $(cat "$tmp"/pid.* 2>/dev/null) 2>/dev/null; rm -rf "$tmp"' EXIT
now() { date +%s.%N; }

# start_ranks T WORLD: start WORLD ranks of lenet over transport T in the background.
start_ranks() {
    port=$((21000 + $$ % 11000))   # below the ephemeral ports (32768 and up)
    r=0
    while [ $r -lt "$2" ]; do
        DDL_TRANSPORT=$1 DDL_RANK=$r DDL_WORLD_SIZE=$2 DDL_LOCAL_RANK=$r DDL_LOCAL_SIZE=$2 \
        DDL_MASTER=127.0.0.1:$port DDL_JOB="kill-$$-$1" DDL_TOKEN=kill-test-token-0123456789 DDL_TIMEOUT_MS=${TIMEOUT_MS:-30000} OPENBLAS_NUM_THREADS=1 \
            "$LENET" --epochs 50 --train-limit 20000 > "$tmp/out.$r" 2>&1 &
        echo $! > "$tmp/pid.$r"
        r=$((r + 1))
    done
}

# training FILE: wait (at most 20 s) for rank 0's start-up line in FILE (printed once every rank
# is connected), and half a second more: the ranks are training.
training() {
    for i in $(seq 1 400); do grep -q "^ddl [0-9]" "$1" 2>/dev/null && break; sleep 0.05; done
    sleep 0.5
}

# running PID: the process exists and is not a zombie (kill -0 succeeds on zombies).
running() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# wait_exit PID LIMIT_S: wait for PID to end, at most LIMIT_S seconds; prints seconds waited.
wait_exit() {
    t0=$(now)
    while running "$1"; do
        if [ "$(echo "$(now) - $t0 > $2" | bc)" = 1 ]; then kill -9 "$1" 2>/dev/null; echo 999; return; fi
        sleep 0.05
    done
    echo "$(now) - $t0" | bc
}

for t in shm tcp; do
    start_ranks $t 3
    training "$tmp/out.0"
    kill -9 "$(cat "$tmp/pid.1")"
    for r in 0 2; do
        secs=$(wait_exit "$(cat "$tmp/pid.$r")" 10)
        wait "$(cat "$tmp/pid.$r")" 2>/dev/null; rc=$?
        if [ "$(echo "$secs <= 2" | bc)" = 1 ]; then ok; else bad "$t: rank $r took ${secs}s to notice the dead rank"; fi
        if [ $rc -ne 0 ]; then ok; else bad "$t: rank $r exited 0 after a peer died"; fi
        if grep -i "peer died or closed" "$tmp/out.$r" | grep -q "rank 1"; then ok; else
            bad "$t: rank $r's error does not name rank 1 as dead:"; cat "$tmp/out.$r"; fi
    done
    rm -f "$tmp"/pid.*
done

# A rank that stops answering without dying: the others time out after DDL_TIMEOUT_MS.
TIMEOUT_MS=1500 start_ranks shm 2
training "$tmp/out.0"
kill -STOP "$(cat "$tmp/pid.1")"
secs=$(wait_exit "$(cat "$tmp/pid.0")" 10)
if [ "$(echo "$secs >= 1.0 && $secs <= 4" | bc)" = 1 ]; then ok; else bad "stalled peer: rank 0 ended after ${secs}s, expected about 1.5 s"; fi
if grep -qi "timed out" "$tmp/out.0"; then ok; else bad "stalled peer: no timeout error:"; cat "$tmp/out.0"; fi
kill -9 "$(cat "$tmp/pid.1")" 2>/dev/null; rm -f "$tmp"/pid.*

# ddlrun: kill -9 one rank; ddlrun stops the others and exits non-zero within 5 s.
OPENBLAS_NUM_THREADS=1 "$BUILD/bin/ddlrun" -n 2 -t shm "$LENET" --epochs 50 > "$tmp/ddlrun.out" 2>&1 &
runner=$!
training "$tmp/ddlrun.out"
victim=$(pgrep -P $runner | tail -n 1)
kill -9 "$victim"
secs=$(wait_exit $runner 10)
wait $runner; rc=$?
if [ "$(echo "$secs <= 5" | bc)" = 1 ] && [ $rc -ne 0 ]; then ok; else bad "ddlrun took ${secs}s / exit $rc after a rank was killed"; fi
if grep -q "ddlrun: rank [01] .*signal 9" "$tmp/ddlrun.out"; then ok; else bad "ddlrun did not name the killed rank:"; cat "$tmp/ddlrun.out"; fi

# ddlrun names the rank that was killed, not the one that exited with code 1 on noticing it. Made
# certain: ddlrun is stopped while rank 1 (the younger child) is killed and rank 0 exits on
# noticing, so both wait to be reaped at once, the older first.
named=0; trials=3
for k in $(seq 1 $trials); do
    OPENBLAS_NUM_THREADS=1 "$BUILD/bin/ddlrun" -n 2 -t shm "$LENET" --epochs 50 --train-limit 20000 \
        > "$tmp/name.out" 2>&1 &
    runner=$!
    training "$tmp/name.out"
    first=$(pgrep -P $runner | sort -n | head -n 1); victim=$(pgrep -P $runner | sort -n | tail -n 1)
    kill -STOP $runner
    kill -9 "$victim"
    for i in $(seq 1 60); do [ "$(sed 's/.*) \(.\).*/\1/' "/proc/$first/stat" 2>/dev/null)" = Z ] && break; sleep 0.05; done
    kill -CONT $runner
    wait $runner
    grep -q "ddlrun: rank 1 (pid $victim) was killed by signal 9" "$tmp/name.out" && named=$((named + 1))
done
if [ $named -eq $trials ]; then ok; else bad "ddlrun named the killed rank in $named of $trials trials:"; cat "$tmp/name.out"; fi

# ddlrun itself killed with SIGKILL: its ranks die with it (no orphan trains on) and leave no
# shared-memory segment behind.
segs_before=$(ls /dev/shm | grep -c '^ddl-')
OPENBLAS_NUM_THREADS=1 "$BUILD/bin/ddlrun" -n 2 -t shm "$LENET" --epochs 50 --train-limit 20000 \
    > "$tmp/orphan.out" 2>&1 &
runner=$!
training "$tmp/orphan.out"
children=$(pgrep -P $runner | tr '\n' ' ')
kill -9 $runner
wait $runner 2>/dev/null
left=""
for c in $children; do
    secs=$(wait_exit "$c" 3)
    [ "$secs" = 999 ] && left="$left $c"
done
if [ -n "$children" ] && [ -z "$left" ]; then ok; else bad "ranks [$children] outlived a SIGKILLed ddlrun:$left"; fi
if [ "$(ls /dev/shm | grep -c '^ddl-')" -eq "$segs_before" ]; then ok; else bad "a shm segment was left: $(ls /dev/shm)"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
