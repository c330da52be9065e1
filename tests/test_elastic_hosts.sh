#!/bin/sh
# test_elastic_hosts.sh - elastic training across two hosts: network namespaces A and B, each with
# its own pid namespace too (unshare --pid), so no rank can see another host's processes and a
# dead rank is found by its closed links and its silence, as between real machines. One ddlrun
# per host (--nodes 2, 2 ranks each, --elastic 2:4, tcp); a rank of host B is killed (kill -9) or
# stopped (SIGSTOP) after a random step: the other three go on and end with the weights of the
# same job on one host, undisturbed (weights_crc). ELASTIC_HOST_TRIALS (default 10) trials of each,
# each a LeNet epoch of 40 steps (about 1 s a kill, 1.5 s a stop: a 0.5 s heartbeat here, to fit
# make test's 10 minutes; test_elastic and test_elastic.sh stop ranks under a 1 s one).
# Needs root, `ip netns` and unshare; skipped with the reason otherwise. Ends with "N passed, N failed".
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
command -v unshare > /dev/null 2>&1 || { echo "skipped: no unshare"; echo "0 passed, 0 failed"; exit 0; }
. tests/netns.sh
netns_hosts ddlel 10.83.0
export OPENBLAS_NUM_THREADS=1 DDL_HEARTBEAT_TIMEOUT_MS=500 DDL_HEARTBEAT_INTERVAL_MS=100
export DDL_TOKEN=elastic-hosts-secret-0123456789
TRIALS=${ELASTIC_HOST_TRIALS:-10}
ARGS="--epochs 1 --train-limit 2500 --batch 64 --quiet --data $DATA" # 40 steps
rand() { echo $(( $(od -An -N2 -tu2 /dev/urandom) % ($2 - $1 + 1) + $1 )); }

"$BUILD/bin/ddlrun" -n 4 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/ref" 2>&1; check "one host, 4 ranks" $?
ref=$(crc "$tmp/ref")

# host NS NODE [ENV...]: that host's ddlrun, in its own pid namespace
host() {
    ns=$1; node=$2; shift 2
    ip netns exec "$ns" env "$@" unshare --pid --fork --mount-proc "$BUILD/bin/ddlrun" -n 2 --nodes 2 \
        --node-rank "$node" --master "10.83.0.1:$port" --timeout 30 --elastic 2:4 -t tcp "$BUILD/bin/lenet" $ARGS
}

trial() {
    port=$(( 35000 + ($$ + k * 13 + ${#1} * 7) % 2000 ))
    victim=$(rand 2 3); at=$(rand 2 36)
    host "$A" 0 > "$tmp/a" 2> "$tmp/ea" &
    pa=$!
    host "$B" 1 DDL_TEST_FAIL="$victim:$at:$1" > "$tmp/b" 2> "$tmp/eb" &
    pb=$!
    wait $pa; ra=$?
    # a stopped rank: killed now that the others finished, not a second later by ddlrun
    for p in $(ip netns pids "$B"); do
        [ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" = T ] && kill -9 "$p" 2>/dev/null
    done
    wait $pb; rb=$?
    got=$(crc "$tmp/a"); world=$(field world < "$tmp/a")
    ms=$(cat "$tmp/ea" "$tmp/eb" | sed -n 's/.*regroup 1 took \([0-9]*\) ms.*/\1/p' | sort -n | tail -n 1)
    echo "   rank $victim $1 after step $at: host A exit $ra, host B exit $rb, world $world, regroup ${ms:-?} ms"
    [ $ra -eq 0 ] && [ "$world" = 3 ] && [ "$got" = "$ref" ] && [ -n "$ref" ]
    check "rank $victim on host B ${1}ped after step $at: 3 ranks on 2 hosts finish with one host's weights ($got vs $ref)" $?
    [ -n "$ms" ] && echo "$1 $ms" >> "$tmp/lost"
    [ $ra -eq 0 ] || tail -n 4 "$tmp/ea" "$tmp/eb"
}
k=0
while [ $k -lt "$TRIALS" ]; do
    trial kill
    trial stop
    k=$((k + 1))
done
# the time lost per failure: from the failed call to the survivors training again
for how in kill stop; do
    awk -v h=$how '$1 == h { n++; s += $2; if ($2 > m) m = $2 } END { if (n) printf "   %s: %d regroups, mean %.0f ms, at most %d ms%s\n", h, n, s / n, m, h == "stop" ? " after the heartbeat (0.5 s) named the rank" : " from the failed call" }' "$tmp/lost"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
