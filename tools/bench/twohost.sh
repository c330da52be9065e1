#!/bin/sh
# twohost.sh - LeNet on two "hosts" joined by a 1 Gbit/s link: network namespaces A and B (one
# rank each, over tcp), each end of the veth pair shaped with
#   tc qdisc add dev IF root tbf rate 1gbit burst 32kb latency 20ms
# (a large burst such as 256kb would hide the link at LeNet's size; TWOHOST_QDISC="..." shapes with
# another qdisc, to compare: its figures then go into the table too). For DDL_COMPRESS=none, bf16
# and fp16 without overlap (one bucket), none and bf16 with DDL_OVERLAP=1, and none with
# DDL_OVERLAP=2 (the thread at real-time priority, as root), with DDL_BUCKET_KB=OVERLAP_BUCKET_KB
# (default 32: the gradient in 3 buckets, cut at layer ends), EPOCHS epoch(s), alternated REPEAT
# times; and the same 2 ranks on loopback (no namespaces, no shaping) as the peer. Prints medians
# of images/s and of the gradient all-reduce
# time per step (comm_frac x the step time, from the run's summary line), and adds them to make
# bench's table. Needs root and `ip netns` (skipped otherwise). Part of make bench
# (BENCH_ONLY=twohost); never of make test. Last, the link's own cost: the wall and CPU time of
# rank 0 per all-reduce of LeNet's gradient over it (ddl-bench under /usr/bin/time).
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
EPOCHS=${EPOCHS:-1}
here=$(dirname "$0")
. "$here/lib.sh"
cd "$here/../.." || exit 1
. tests/netns.sh
netns_hosts ddlbh 10.79.0
QDISC=${TWOHOST_QDISC:-tbf rate 1gbit burst 32kb latency 20ms} # the issue's link; others only to compare
# shape NS IF: QDISC on IF; "htb rate R" is a root htb with one class of rate R (htb passes a
# segmentation-offload packet whole, where tbf cuts it into 1448-byte packets, one timer each)
shape() {
    case $QDISC in
    "htb rate "*) ip netns exec "$1" tc qdisc add dev "$2" root handle 1: htb default 1 &&
        ip netns exec "$1" tc class add dev "$2" parent 1: classid 1:1 htb rate "${QDISC#htb rate }" ;;
    *) ip netns exec "$1" tc qdisc add dev "$2" root $QDISC ;;
    esac
}
for pair in "$A $va" "$B $vb"; do
    set -- $pair
    shape "$1" "$2" || skip "tc cannot shape $2 with $QDISC"
done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DDL_TOKEN=twohost-bench-secret-0123456789
ARGS="--epochs $EPOCHS --quiet --data $DATA"

# summary FILE: "images_per_sec allreduce_ms_per_step" of a run's summary line
summary() {
    sed -n 's/^summary:.* images_per_sec=\([0-9.]*\).* comm_frac=\([0-9.]*\).*/\1 \2/p' "$1" |
        awk '{ printf "%s %.3f\n", $1, $2 * 64 / $1 * 1000 }'
}

# two_hosts Z O: one run of rank 0 in A and rank 1 in B with DDL_COMPRESS=Z DDL_OVERLAP=O; its summary
two_hosts() {
    port=$((33000 + ($$ + i * 11 + $2 * 3) % 2000))
    kb=0; [ "$2" != 0 ] && kb=${OVERLAP_BUCKET_KB:-32}  # overlap needs buckets below the gradient's 241 KiB
    ip netns exec "$A" env DDL_COMPRESS="$1" DDL_OVERLAP="$2" DDL_BUCKET_KB=$kb "$BUILD/bin/ddlrun" -n 1 --nodes 2 --node-rank 0 \
        --master "10.79.0.1:$port" --timeout 60 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/a" 2>&1 &
    pa=$!
    ip netns exec "$B" env DDL_COMPRESS="$1" DDL_OVERLAP="$2" DDL_BUCKET_KB=$kb "$BUILD/bin/ddlrun" -n 1 --nodes 2 --node-rank 1 \
        --master "10.79.0.1:$port" --timeout 60 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/b" 2>&1
    wait $pa || { echo "   run failed:"; tail -n 3 "$tmp/a" "$tmp/b"; return 1; }
    summary "$tmp/a"
}

echo "== LeNet, 2 hosts x 1 rank over tcp, each end shaped with $QDISC, $EPOCHS epoch(s); $REPEAT alternated runs"
CONFIGS=${TWOHOST_CONFIGS:-"none:0 bf16:0 fp16:0 none:1 bf16:1 none:2"}
for k in none_0 bf16_0 fp16_0 none_1 bf16_1 none_2 loopback; do : > "$tmp/$k.ips"; : > "$tmp/$k.ar"; done
i=0
while [ $i -lt "$REPEAT" ]; do
    for zo in $CONFIGS; do
        z=${zo%:*}; o=${zo#*:}
        two_hosts $z $o > "$tmp/one" && read -r ips ar < "$tmp/one" && echo "$ips" >> "$tmp/${z}_$o.ips" &&
            echo "$ar" >> "$tmp/${z}_$o.ar" &&
            echo "   run $((i + 1)) DDL_COMPRESS=$z DDL_OVERLAP=$o: $ips images/s, all-reduce $ar ms per step (exposed)"
    done
    "$BUILD/bin/ddlrun" -n 2 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/l" 2>&1 && summary "$tmp/l" > "$tmp/one" &&
        read -r ips ar < "$tmp/one" && echo "$ips" >> "$tmp/loopback.ips" && echo "$ar" >> "$tmp/loopback.ar" &&
        echo "   run $((i + 1)) loopback (2 ranks, no link): $ips images/s, all-reduce $ar ms per step"
    i=$((i + 1))
done
for k in none_0 bf16_0 fp16_0 none_1 bf16_1 none_2 loopback; do
    eval "ips_$k=\$(median < \$tmp/$k.ips); ar_$k=\$(median < \$tmp/$k.ar)"
done
echo "twohost: images_per_sec none=$ips_none_0 bf16=$ips_bf16_0 fp16=$ips_fp16_0 overlap=$ips_none_1" \
     "overlap_bf16=$ips_bf16_1 overlap_rt=$ips_none_2 loopback=$ips_loopback; allreduce_ms none=$ar_none_0 bf16=$ar_bf16_0 fp16=$ar_fp16_0"
record "LeNet gradient all-reduce, ms/step, 2 hosts at 1 Gbit/s, bf16" "$ar_bf16_0" "ddl float32" "$ar_none_0" \
    "$(ratio "$ar_none_0" "$ar_bf16_0")" ">= 1.8"
record "LeNet gradient all-reduce, ms/step, 2 hosts at 1 Gbit/s, fp16" "$ar_fp16_0" "ddl float32" "$ar_none_0" \
    "$(ratio "$ar_none_0" "$ar_fp16_0")" ">= 1.8"
record "LeNet images/s, 2 hosts at 1 Gbit/s, DDL_OVERLAP=1" "$ips_none_1" "ddl without overlap" "$ips_none_0" \
    "$(ratio "$ips_none_1" "$ips_none_0")" ">= 1.4"
record "LeNet images/s, 2 hosts at 1 Gbit/s, DDL_OVERLAP=2 (real-time thread)" "$ips_none_2" "ddl without overlap" \
    "$ips_none_0" "$(ratio "$ips_none_2" "$ips_none_0")" ">= 1.4"
record "LeNet images/s, 2 hosts at 1 Gbit/s, overlap + bf16" "$ips_bf16_1" "2 ranks on loopback" "$ips_loopback" \
    "$(ratio "$ips_bf16_1" "$ips_loopback")" ">= 0.9"
record "LeNet images/s, 2 hosts at 1 Gbit/s, float32, no overlap" "$ips_none_0" "2 ranks on loopback" "$ips_loopback" \
    "$(ratio "$ips_none_0" "$ips_loopback")" "-"

# The link's own cost: LeNet's gradient (61706 floats) all-reduced over it ITERS times after 20,
# rank 0's process under /usr/bin/time: wall and CPU time per call. On a real NIC the kernel's
# work for 241 KiB is tens of microseconds; here the shaper runs in the sender's system calls.
ITERS=${LINK_ITERS:-1000}
echo "== the link's own cost: ddl-bench allreduce of LeNet's gradient (241 KiB) over it, $ITERS calls"
if [ -x /usr/bin/time ]; then
    port=$((35000 + $$ % 2000))
    ip netns exec "$A" /usr/bin/time -f '%U %S' -o "$tmp/cpu" "$BUILD/bin/ddlrun" -n 1 --nodes 2 --node-rank 0 \
        --master "10.79.0.1:$port" --timeout 60 -t tcp "$BUILD/bin/ddl-bench" allreduce -b 246824 -e 246824 \
        --iters "$ITERS" --warmup 20 > "$tmp/lc" 2>&1 &
    pa=$!
    ip netns exec "$B" "$BUILD/bin/ddlrun" -n 1 --nodes 2 --node-rank 1 --master "10.79.0.1:$port" --timeout 60 \
        -t tcp "$BUILD/bin/ddl-bench" allreduce -b 246824 -e 246824 --iters "$ITERS" --warmup 20 > /dev/null 2>&1
    if wait $pa; then
        wall_ms=$(awk '$1 == 246824 { printf "%.3f", $3 / 1000 }' "$tmp/lc")
        cpu_ms=$(awk -v n="$ITERS" '{ printf "%.3f", ($1 + $2) * 1000 / (n + 20) }' "$tmp/cpu")
        echo "twohost: link allreduce_ms=$wall_ms cpu_ms=$cpu_ms (rank 0, user + system, per call)"
        record "CPU of rank 0 per 241 KiB all-reduce over the 1 Gbit/s link, ms" "$cpu_ms" "its wall time" "$wall_ms" \
            "$(ratio "$cpu_ms" "$wall_ms")" "-"
    else
        echo "   link cost run failed:"; tail -n 3 "$tmp/lc"
    fi
fi
