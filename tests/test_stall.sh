#!/bin/sh
# test_stall.sh - a stalled rank on another host is named, fast, by every rank. Two network
# namespaces are two hosts (10.78.0.1 and 10.78.0.2), each runs one ddlrun with 2 ranks of LeNet
# over tcp (world 4). In each of 10 trials, once training runs, a random rank of host B is
# stopped (SIGSTOP): both ranks of host A must fail naming it ("rank V (pid P ...) stopped
# responding"), within the heartbeat timeout + 1 s, and so must the other rank of host B; ddlrun on
# B names the stopped rank. With DDL_HEARTBEAT_TIMEOUT_MS=1000 (DDL_TIMEOUT_MS stays 30 s, so
# only the heartbeat can be this fast). Needs root and `ip netns`; skipped with the reason otherwise.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
. tests/netns.sh
netns_hosts ddlst 10.78.0

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DDL_HEARTBEAT_TIMEOUT_MS=1000
HB_MS=1000
ARGS="--epochs 200 --train-limit 2000 --seed 1 --data $DATA"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# node NS RANK PORT OUT: ddlrun for node RANK (2 ranks) inside namespace NS, in the background
node() {
    ip netns exec "$1" env DDL_TOKEN=stall-test-secret-0123456789 "$BUILD/bin/ddlrun" -n 2 --nodes 2 \
        --node-rank "$2" --master "10.78.0.1:$3" --timeout 30 -t tcp "$BUILD/bin/lenet" $ARGS > "$4" 2>&1 &
}

# rank_pid R: the pid of the lenet process that is rank R in namespace B
rank_pid() {
    for p in $(ip netns pids "$B"); do
        tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "DDL_RANK=$1" &&
            grep -q lenet "/proc/$p/cmdline" 2>/dev/null && { echo "$p"; return; }
    done
}

# named FILE V PID: how many lines of FILE name rank V (pid PID) as stopped
named() { grep -c "rank $2 (pid $3 .*stopped responding" "$1" 2>/dev/null; }

trials=10; worst=0
for trial in $(seq 1 $trials); do
    port=$((31000 + ($$ + trial * 7) % 2000))
    victim=$((2 + $(od -An -N1 -tu1 /dev/urandom) % 2))
    rm -f "$tmp/a" "$tmp/b"   # a file of the last trial must not look like this one started
    node "$A" 0 "$port" "$tmp/a"; pa=$!
    node "$B" 1 "$port" "$tmp/b"; pb=$!
    until grep -q '^epoch' "$tmp/a" 2>/dev/null || ! kill -0 $pa 2>/dev/null; do sleep 0.05; done
    vpid=$(rank_pid $victim)
    [ -n "$vpid" ] || { bad "trial $trial: no pid for rank $victim"; kill $pa $pb; wait; continue; }
    t0=$(now_ms); kill -STOP "$vpid"
    ms=-1
    while [ $(( $(now_ms) - t0 )) -lt $((HB_MS + 5000)) ]; do
        if [ "$(named "$tmp/a" $victim "$vpid")" -ge 2 ]; then ms=$(( $(now_ms) - t0 )); break; fi
        sleep 0.05
    done
    wait $pa; ra=$?; wait $pb; rb=$?
    kill -KILL "$vpid" 2>/dev/null
    other=$((5 - victim))
    if [ $ms -ge 0 ] && [ $ms -le $((HB_MS + 1000)) ]; then ok; else
        bad "trial $trial: host A's ranks did not both name rank $victim (pid $vpid) within $((HB_MS + 1000)) ms (took $ms ms)"
        grep -v '^epoch' "$tmp/a" | tail -n 4; fi
    [ "$(named "$tmp/b" $victim "$vpid")" -ge 1 ] && grep -q "rank $other: .*rank $victim (pid $vpid" "$tmp/b" && ok ||
        { bad "trial $trial: rank $other on host B did not name rank $victim"; grep -v '^epoch' "$tmp/b" | tail -n 4; }
    grep -q "ddlrun: rank $victim (pid $vpid) was stopped" "$tmp/b" && ok || bad "trial $trial: ddlrun on B did not name the stopped rank"
    [ $ra -ne 0 ] && [ $rb -ne 0 ] && ok || bad "trial $trial: a node exited 0 ($ra, $rb)"
    [ $ms -gt $worst ] && worst=$ms
    echo "trial $trial: rank $victim stopped; named by host A's ranks after $ms ms"
done
echo "slowest: $worst ms (heartbeat timeout $HB_MS ms, limit $((HB_MS + 1000)) ms)"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
