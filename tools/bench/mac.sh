#!/bin/sh
# mac.sh - what frame MACs (DDL_MAC=1, Poly1305) cost: ddl-bench allreduce, 2 ranks on loopback,
# tcp and zmq, at 4 KiB and 1 MiB, with and without --mac, alternated REPEAT times (default 5).
# Prints the median time and busbw of each, and busbw with MAC / without, per size; and zmq
# against libzmq alone (tools/bench/zmq_floor.c), what is ddl's share of zmq's time. Part of
# make bench (BENCH_ONLY=mac); never of make test.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-5}
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "== frame MACs: ddl-bench allreduce -n 2 at 4 KiB and 1 MiB, --mac against none, $REPEAT alternated runs"
# libzmq's own floor (tools/bench/zmq_floor.c, built on first use): a PAIR socket pair exchanging
# 4 KiB, and 512 KiB (a 1 MiB all-reduce of 2 ranks is two such exchanges and a sum), the latter
# also with no copy of ours (zero-copy sends, receives read in place): set against tcp's whole
# all-reduce, the most any zmq transport could reach here
floor=$(bench_tool zmq_floor -lzmq) || floor=""
i=0
while [ $i -lt "$REPEAT" ]; do # transports and MACs alternated within each round: the ratios share its noise
    for b in 4096 524288; do
        [ -n "$floor" ] && "$floor" $b 1000 3 | sed -n 's/.*exchange_us=\([0-9.]*\).*/\1/p' >> "$tmp/floor.$b"
    done
    [ -n "$floor" ] && "$floor" 524288 1000 3 zerocopy | sed -n 's/.*exchange_us=\([0-9.]*\).*/\1/p' >> "$tmp/floor.zc"
    for t in tcp zmq; do
        for m in plain mac; do
            flag=""; [ $m = mac ] && flag=--mac
            "$BUILD/bin/ddl-bench" allreduce -t $t -n 2 -b 4K -e 1M -f 256 --iters 300 --warmup 20 $flag |
                awk -v d="$tmp" -v m=$m -v t=$t '$1 ~ /^[0-9]+$/ { print $3 >> (d "/" t "." m "." $1 ".us"); print $5 >> (d "/" t "." m "." $1 ".bw") }'
        done
    done
    i=$((i + 1))
done
for t in tcp zmq; do
    for b in 4096 1048576; do
        pu=$(median < "$tmp/$t.plain.$b.us"); mu=$(median < "$tmp/$t.mac.$b.us")
        pb=$(median < "$tmp/$t.plain.$b.bw"); mb=$(median < "$tmp/$t.mac.$b.bw")
        echo "   $t $b bytes: no MAC $pu us ($pb GB/s busbw), MAC $mu us ($mb GB/s): busbw ratio $(ratio "$mb" "$pb")"
        eval "us_${t}_$b=$pu; bw_${t}_$b=$pb"
        record "all-reduce busbw with DDL_MAC=1, $t, $((b / 1024)) KiB, GB/s" "$mb" "ddl without MACs" "$pb" "$(ratio "$mb" "$pb")" ">= 0.9 (issue 11)"
    done
done
# issue 12's zmq targets, from the runs without MACs: busbw >= 0.7x tcp's, latency <= 2x tcp's
record "all-reduce busbw, GB/s, zmq, 1 MiB, 2 ranks on loopback" "$bw_zmq_1048576" "ddl tcp" "$bw_tcp_1048576" \
    "$(ratio "$bw_zmq_1048576" "$bw_tcp_1048576")" ">= 0.7"
record "all-reduce time, us, zmq, 4 KiB, 2 ranks on loopback" "$us_zmq_4096" "ddl tcp" "$us_tcp_4096" \
    "$(ratio "$us_tcp_4096" "$us_zmq_4096")" ">= 0.5 (2x its time)"
if [ -s "$tmp/floor.4096" ]; then
    f4=$(median < "$tmp/floor.4096"); f512=$(median < "$tmp/floor.524288")
    f1m=$(awk -v x="$f512" 'BEGIN { printf "%.2f", 2 * x }')
    fzc=$(median < "$tmp/floor.zc" | awk '{ printf "%.2f", 2 * $1 }')
    echo "   libzmq alone (zmq_floor): 4 KiB exchange $f4 us, 2 exchanges of 512 KiB $f1m us ($fzc us with no copy of ours)"
    record "all-reduce time, us, zmq, 4 KiB, 2 ranks on loopback" "$us_zmq_4096" "libzmq alone: one exchange" "$f4" \
        "$(ratio "$f4" "$us_zmq_4096")" "-"
    record "all-reduce time, us, zmq, 1 MiB, 2 ranks on loopback" "$us_zmq_1048576" \
        "libzmq alone: two exchanges of 512 KiB" "$f1m" "$(ratio "$f1m" "$us_zmq_1048576")" "-"
    record "all-reduce time, us, tcp, 1 MiB, 2 ranks on loopback" "$us_tcp_1048576" \
        "libzmq alone, zero-copy: two exchanges of 512 KiB" "$fzc" "$(ratio "$fzc" "$us_tcp_1048576")" "-"
fi
