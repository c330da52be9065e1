#!/bin/sh
# test_hier.sh - the two-level all-reduce between real network stacks: 2 and 4 hosts (network
# namespaces on one bridge) of 2 ranks each, one ddlrun per host (--nodes H), over tcp and zmq,
# run build/tests/test_hier --env: every rank checks every case (odd and small counts, int64, max,
# mean) against the sum computed in one process in the documented order, and rank 0 prints the
# CRCs. They must be the same over tcp and zmq, and the same as 2 hosts x 2 ranks made on loopback
# (two ddlruns --nodes 2 in this namespace: the hosts then come from local_rank). Needs root and
# `ip netns` (skipped otherwise).
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
. tests/netns.sh
NET=10.84.0
netns_switch ddlhi $NET 4
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DDL_TOKEN=hier-test-secret-0123456789 DDL_ALGO=hier
ns() { echo $HOST_NS | cut -d' ' -f"$1"; }
seq_port=0

# job H T WHERE: test_hier --env on H nodes of 2 ranks over T; WHERE "ns": host k in namespace k,
# "lo": every node in this namespace. Rank 0's CRC lines in $tmp/crc.H.T.WHERE.
job() {
    seq_port=$((seq_port + 1)); port=$((39000 + ($$ + seq_port * 7) % 2000))
    master=$NET.1; [ "$3" = lo ] && master=127.0.0.1
    k=1; pids=""
    while [ $k -le "$1" ]; do
        pre=""; [ "$3" = ns ] && pre="ip netns exec $(ns $k)"
        $pre timeout 120 "$BUILD/bin/ddlrun" -n 2 --nodes "$1" --node-rank $((k - 1)) --master "$master:$port" \
            --timeout 60 -t "$2" "$BUILD/tests/test_hier" --env > "$tmp/out.$k" 2>&1 &
        pids="$pids $!"
        k=$((k + 1))
    done
    rc=0
    for p in $pids; do wait "$p" || rc=1; done
    cat "$tmp"/out.* > "$tmp/all"; rm -f "$tmp"/out.*
    grep '^crc ' "$tmp/all" > "$tmp/crc.$1.$2.$3"
    results=$(grep -c '^[0-9]* passed, 0 failed' "$tmp/all")
    echo "$1 hosts x 2 ranks over $2 ($3): exit $rc, $results of $((2 * $1)) ranks passed every check, $(wc -l < "$tmp/crc.$1.$2.$3") CRCs"
    [ "$rc" -eq 0 ] && [ "$results" -eq $((2 * $1)) ] && [ -s "$tmp/crc.$1.$2.$3" ] && ok ||
        { bad "$1 hosts x 2 over $2 ($3)"; tail -n 8 "$tmp/all"; }
}

for t in tcp zmq; do
    if "$BUILD/bin/ddl-bench" allreduce -t "$t" -n 2 -b 4K -e 4K --iters 1 2>&1 | grep -q "not compiled in"; then
        echo "$t: skipped (not compiled in)"; continue
    fi
    for h in 2 4; do job $h $t ns; done
    job 2 $t lo
done
for h in 2 4; do
    [ -s "$tmp/crc.$h.zmq.ns" ] || continue
    cmp -s "$tmp/crc.$h.tcp.ns" "$tmp/crc.$h.zmq.ns" && ok || bad "$h hosts: tcp and zmq gave different bits"
done
cmp -s "$tmp/crc.2.tcp.ns" "$tmp/crc.2.tcp.lo" && ok || bad "2 hosts in namespaces and on loopback gave different bits"
echo "CRCs, 2 hosts x 2: $(awk '{ printf "%s ", $3 }' "$tmp/crc.2.tcp.ns")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
