#!/bin/sh
# twohost.sh - LeNet on two "hosts" joined by a 1 Gbit/s link: network namespaces A and B (one
# rank each, over tcp), each end of the veth pair shaped with
#   tc qdisc add dev IF root tbf rate 1gbit burst 32kb latency 20ms
# (a large burst such as 256kb would hide the link at LeNet's size). For DDL_COMPRESS=none, bf16
# and fp16, EPOCHS epoch(s), alternated REPEAT times; and the same 2 ranks on loopback (no
# namespaces, no shaping) as the peer. Prints medians of images/s and of the gradient all-reduce
# time per step (comm_frac x the step time, from the run's summary line), and adds them to make
# bench's table. Needs root and `ip netns` (skipped otherwise). Part of make bench
# (BENCH_ONLY=twohost); never of make test.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
EPOCHS=${EPOCHS:-1}
here=$(dirname "$0")
. "$here/lib.sh"
cd "$here/../.." || exit 1
. tests/netns.sh
netns_hosts ddlbh 10.79.0
for pair in "$A $va" "$B $vb"; do
    set -- $pair
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate 1gbit burst 32kb latency 20ms ||
        skip "tc cannot shape $2 (needs the sch_tbf module)"
done
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DDL_TOKEN=twohost-bench-secret-0123456789
ARGS="--epochs $EPOCHS --quiet --data $DATA"

# summary FILE: "images_per_sec allreduce_ms_per_step" of a run's summary line
summary() {
    sed -n 's/^summary:.* images_per_sec=\([0-9.]*\).* comm_frac=\([0-9.]*\).*/\1 \2/p' "$1" |
        awk '{ printf "%s %.3f\n", $1, $2 * 64 / $1 * 1000 }'
}

# two_hosts Z: one run of rank 0 in A and rank 1 in B with DDL_COMPRESS=Z; its summary
two_hosts() {
    port=$((33000 + ($$ + i * 11) % 2000))
    ip netns exec "$A" env DDL_COMPRESS="$1" "$BUILD/bin/ddlrun" -n 1 --nodes 2 --node-rank 0 \
        --master "10.79.0.1:$port" --timeout 60 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/a" 2>&1 &
    pa=$!
    ip netns exec "$B" env DDL_COMPRESS="$1" "$BUILD/bin/ddlrun" -n 1 --nodes 2 --node-rank 1 \
        --master "10.79.0.1:$port" --timeout 60 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/b" 2>&1
    wait $pa || { echo "   run failed:"; tail -n 3 "$tmp/a" "$tmp/b"; return 1; }
    summary "$tmp/a"
}

echo "== LeNet, 2 hosts x 1 rank over tcp, 1 Gbit/s (tbf burst 32kb), $EPOCHS epoch(s); $REPEAT alternated runs"
for z in none bf16 fp16 loopback; do : > "$tmp/$z.ips"; : > "$tmp/$z.ar"; done
i=0
while [ $i -lt "$REPEAT" ]; do
    for z in none bf16 fp16; do
        two_hosts $z > "$tmp/one" && read -r ips ar < "$tmp/one" && echo "$ips" >> "$tmp/$z.ips" && echo "$ar" >> "$tmp/$z.ar" &&
            echo "   run $((i + 1)) DDL_COMPRESS=$z: $ips images/s, all-reduce $ar ms per step"
    done
    "$BUILD/bin/ddlrun" -n 2 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/l" 2>&1 && summary "$tmp/l" > "$tmp/one" &&
        read -r ips ar < "$tmp/one" && echo "$ips" >> "$tmp/loopback.ips" && echo "$ar" >> "$tmp/loopback.ar" &&
        echo "   run $((i + 1)) loopback (2 ranks, no link): $ips images/s, all-reduce $ar ms per step"
    i=$((i + 1))
done
for z in none bf16 fp16 loopback; do
    eval "ips_$z=\$(median < \$tmp/$z.ips); ar_$z=\$(median < \$tmp/$z.ar)"
done
echo "twohost: none_images_per_sec=$ips_none bf16_images_per_sec=$ips_bf16 fp16_images_per_sec=$ips_fp16" \
     "loopback_images_per_sec=$ips_loopback none_allreduce_ms=$ar_none bf16_allreduce_ms=$ar_bf16 fp16_allreduce_ms=$ar_fp16"
record "LeNet gradient all-reduce, ms/step, 2 hosts at 1 Gbit/s, bf16" "$ar_bf16" "ddl float32" "$ar_none" \
    "$(ratio "$ar_none" "$ar_bf16")" ">= 1.8"
record "LeNet gradient all-reduce, ms/step, 2 hosts at 1 Gbit/s, fp16" "$ar_fp16" "ddl float32" "$ar_none" \
    "$(ratio "$ar_none" "$ar_fp16")" ">= 1.8"
record "LeNet images/s, 2 hosts at 1 Gbit/s, float32" "$ips_none" "2 ranks on loopback" "$ips_loopback" \
    "$(ratio "$ips_none" "$ips_loopback")" "-"
record "LeNet images/s, 2 hosts at 1 Gbit/s, bf16" "$ips_bf16" "2 ranks on loopback" "$ips_loopback" \
    "$(ratio "$ips_bf16" "$ips_loopback")" ">= 0.9 (with overlap)"
