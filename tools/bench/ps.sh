#!/bin/sh
# ps.sh - make bench's ring against parameter server (BENCH_ONLY=ps): all-reduce time of LeNet's
# and U-Net's gradient sizes on 4 hosts (network namespaces on one bridge), one rank each, every
# host's link shaped to 1 Gbit/s with htb; ddl-bench allreduce over tcp with DDL_ALGO=ring and
# DDL_ALGO=ps, alternated REPEAT times (default 3), medians.
# The arithmetic: with n ranks on links of B bytes/s each way, the ring sends and receives
# 2 (n - 1) / n of an S-byte vector on every link: about 2 (n - 1) S / (n B); the server's one link
# carries (n - 1) S in and (n - 1) S out, one after the other piece by piece: about (n - 1) S / B
# when receiving and sending overlap across pieces, 2 (n - 1) S / B when they do not. At n = 4 the
# parameter server takes 2x to 4x the ring's time; latency (one round trip per piece) moves both
# up at small sizes. Needs root and `ip netns` (skipped otherwise). Never part of make test.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
RATE=${PS_RATE:-1gbit}
here=$(dirname "$0")
. "$here/lib.sh"
. tests/netns.sh # its skip() says why and exits 0; it makes $tmp and removes it with the namespaces
netns_switch ddlps 10.81.0 4
i=1
for ns in $HOST_NS; do
    dev="ddlpsv$$h$i" # netns_switch's name for host i's end
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: htb default 1 r2q 1000 &&
        ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:1 htb rate "$RATE" ||
        skip "tc cannot shape $dev"
    i=$((i + 1))
done
export OPENBLAS_NUM_THREADS=1 DDL_TOKEN=ps-bench-secret-0123456789
ns() { echo $HOST_NS | cut -d' ' -f"$1"; }

# one ALGO BYTES: ddl-bench allreduce of BYTES on the 4 hosts; its time in microseconds
one() {
    port=$((34000 + ($$ + i * 7) % 2000)); i=$((i + 1))
    k=1
    while [ $k -le 4 ]; do
        ip netns exec "$(ns $k)" env DDL_ALGO="$1" "$BUILD/bin/ddlrun" -n 1 --nodes 4 --node-rank $((k - 1)) \
            --master "10.81.0.1:$port" --timeout 60 -t tcp "$BUILD/bin/ddl-bench" allreduce -b "$2" -e "$2" \
            --iters 10 --warmup 3 > "$tmp/r$k" 2>&1 &
        eval "p$k=\$!"
        k=$((k + 1))
    done
    wait $p1 $p2 $p3 $p4
    awk '$1 ~ /^[0-9]+$/ && $NF == "ok" { print $3 }' "$tmp/r1" | tail -n 1
}

echo "== ring against parameter server: 4 hosts x 1 rank over tcp, links of $RATE (htb); $REPEAT alternated runs"
i=0
for size in 247K 8M; do # LeNet's gradient (61,706 floats), and U-Net's order of magnitude
    : > "$tmp/ring"; : > "$tmp/ps"
    r=0
    while [ $r -lt "$REPEAT" ]; do
        a=$(one ring $size); b=$(one ps $size)
        echo "   run $((r + 1)), $size: ring $a us, ps $b us"
        [ -n "$a" ] && echo "$a" >> "$tmp/ring"; [ -n "$b" ] && echo "$b" >> "$tmp/ps"
        r=$((r + 1))
    done
    a=$(median < "$tmp/ring"); b=$(median < "$tmp/ps")
    echo "ps_$size: ring_us=$a ps_us=$b ps_over_ring=$(ratio "$b" "$a")"
    record "all-reduce time, us, 4 hosts x 1 rank, $RATE, $size: ring" "$a" "parameter server (DDL_ALGO=ps)" "$b" \
        "$(ratio "$b" "$a")" "2 to 4 (arithmetic)" "-" "-"
done
