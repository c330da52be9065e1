#!/bin/sh
# hier.sh - make bench's flat ring against the two-level all-reduce (BENCH_ONLY=hier; issue 33,
# item 3): on 2 and 4 hosts (network namespaces on one bridge) of 2 ranks each, every host's link
# shaped with htb to 1 Gbit/s (a bucket of 1 ms at that rate, as wire.sh), ddl-bench allreduce over
# tcp from 64 KiB to 32 MiB (x2 a row) with DDL_ALGO=ring and DDL_ALGO=hier, alternated REPEAT
# times (default 3); the medians of each size's time, their ratio and what the arithmetic predicts.
# The arithmetic, for an S-byte vector on H hosts of L ranks (n = H L), links of B bytes/s each way
# (TCP's payload: 1448 of every 1514 bytes, 0.1196 GB/s at 1 Gbit/s):
#   flat ring: 2 (n - 1) network steps in lock-step; in each, the one rank of a host whose right
#     neighbour is on the next host sends S / n over the host's link: 2 (n - 1) / n S per link,
#     t = 2 (n - 1) (S / (n B) + a), a the cost of one step beyond its bytes (a round trip, the
#     pieces' turn-around)
#   two-level: 2 (L - 1) steps over shared memory (S / L each, copies at memory speed), and
#     2 (H - 1) network steps in which the host's L ranks each send S / (L H) at once: S / H per
#     link and step, 2 (H - 1) / H S per link, t = 2 (H - 1) (S / (H B) + a) + the shm steps
#   ratio at large S: (n - 1) H / (n (H - 1)): 1.5 on 2 hosts x 2, 1.17 on 4 x 2; at small S the
#     steps count: 2 (n - 1) = 6 against 2 (H - 1) = 2 (2 x 2), 14 against 6 (4 x 2).
# Environment: REPEAT (default 3), HIER_HOSTS (default "2 4"), HIER_RATE (default 1gbit), BUILD.
# Needs root and `ip netns` (skipped otherwise). Never part of make test.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
HOSTS=${HIER_HOSTS:-2 4}
RATE=${HIER_RATE:-1gbit}
here=$(dirname "$0")
. "$here/lib.sh"
. tests/netns.sh # its skip() says why and exits 0; it makes $tmp and removes it with the namespaces
NET=10.83.0
netns_switch ddlhr $NET 4
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DDL_TOKEN=hier-bench-secret-0123456789
ns() { echo $HOST_NS | cut -d' ' -f"$1"; }

netns_shape ddlhr "$RATE" # htb, a bucket of 1 ms at RATE (tests/netns.sh)
seq_port=0

# one H ALGO: ddl-bench allreduce on hosts 1..H, 2 ranks each; "bytes time_us" rows (rank 0's)
one() {
    seq_port=$((seq_port + 1)); port=$((38000 + ($$ + seq_port * 7) % 2000))
    k=1; pids=""
    while [ $k -le "$1" ]; do
        ip netns exec "$(ns $k)" env DDL_ALGO="$2" "$BUILD/bin/ddlrun" -n 2 --nodes "$1" --node-rank $((k - 1)) \
            --master "$NET.1:$port" --timeout 60 -t tcp "$BUILD/bin/ddl-bench" allreduce -b 64K -e 32M -f 2 \
            --iters 10 --warmup 3 > "$tmp/r$k" 2>&1 &
        pids="$pids $!"
        k=$((k + 1))
    done
    wait $pids
    awk '$1 ~ /^[0-9]+$/ && $NF == "ok" { print $1, $3 }' "$tmp/r1"
    [ "$(awk '$1 ~ /^[0-9]+$/ && $NF == "ok"' "$tmp/r1" | wc -l)" -eq 10 ] ||
        { echo "   $2 on $1 hosts failed:" >&2; tail -n 3 "$tmp/r1" >&2; }
}

echo "== flat ring against two-level all-reduce: H hosts x 2 ranks over tcp, links of $RATE (htb); $REPEAT alternated runs"
for H in $HOSTS; do
    n=$((H * 2))
    : > "$tmp/ring.$H"; : > "$tmp/hier.$H"
    r=0
    while [ $r -lt "$REPEAT" ]; do
        one "$H" ring >> "$tmp/ring.$H"
        one "$H" hier >> "$tmp/hier.$H"
        r=$((r + 1))
    done
    echo "   $H hosts x 2 ranks: bytes ring_us hier_us ring/hier predicted(bandwidth only)"
    worst=""
    for bytes in $(awk '{ print $1 }' "$tmp/ring.$H" | sort -n -u); do
        a=$(awk -v b="$bytes" '$1 == b { print $2 }' "$tmp/ring.$H" | median)
        b=$(awk -v b="$bytes" '$1 == b { print $2 }' "$tmp/hier.$H" | median)
        pred=$(awk -v n=$n -v h=$H 'BEGIN { printf "%.2f", (n - 1) * h / (n * (h - 1)) }')
        q=$(ratio "$a" "$b")
        echo "   $bytes $a $b $q $pred"
        worst=$(awk -v w="$worst" -v q="$q" 'BEGIN { print (w == "" || q + 0 < w + 0) ? q : w }')
        case $bytes in 262144 | 33554432)
            record "all-reduce time, us, $H hosts x 2 ranks, $RATE, $bytes bytes: two-level (DDL_ALGO=hier)" "$b" \
                "flat ring (DDL_ALGO=ring)" "$a" "$q" "$( [ "$H" = 2 ] && [ "$bytes" = 262144 ] && echo ">= 1.4" || echo "> 1")" ;;
        esac
    done
    echo "hier_${H}x2: slowest ring/hier over 64 KiB-32 MiB: $worst (target: > 1 at every size)"
done
