#!/bin/sh
# wire.sh - make bench's all-reduce against the wire (BENCH_ONLY=wire; issue 33, item 4): on 2
# and 4 hosts (network namespaces on one bridge, one rank each), every host's link shaped with
# htb to 1 and to 10 Gbit/s, REPEAT (default 3) alternated runs of
#   ddl       ddl-bench allreduce over tcp (ddlrun, one node per host), 8 MiB and 32 MiB
#   iperf3    iperf3 --bidir between hosts 1 and 2 (and 3 and 4 at the same time on 4 hosts):
#             what TCP carries each way when every host sends and receives one stream at once,
#             as in the ring
#   MPI       Open MPI's MPI_Allreduce (tools/bench/mpi_allreduce.c; pml ob1, btl tcp, as Open MPI
#             picks with no fast network), mpirun reaching the other namespaces through
#             tests/ns-agent.sh, 8 MiB and 32 MiB; and again with --mca btl_tcp_links 2 (two
#             connections per pair of ranks: Open MPI's own knob for a faster TCP link)
# and prints, for each (hosts, rate), the medians: bus bandwidth (nccl-tests: busbw = algbw x
# 2 (n - 1) / n) in GB/s, the link's rate, iperf3's rate each way (the receivers' figures, the
# mean of both ways and both pairs, after 1 s left out), and ddl's ratios to the link, to iperf3
# and to both MPI_Allreduce figures (issue 33's targets: >= 0.9 of the link, or of iperf3 where
# the cores cannot fill the link; >= 1 of MPI).
# The arithmetic: the ring moves 2 (n - 1) / n of the vector over every link each way, so its
# busbw is what one link carries each way: at most the TCP payload rate, 1448 of every 1514
# bytes htb counts (0.956 of the rate: 0.1196 GB/s at 1 Gbit/s, 1.196 GB/s at 10 Gbit/s), less
# the time a link idles between pieces. At 10 Gbit/s the 2 cores, not the link, are the limit:
# iperf3 --bidir tells how much TCP itself gets through them.
# Environment: REPEAT (default 3), WIRE_HOSTS (default "2 4"), WIRE_RATES (default
# "1gbit 10gbit", tc's units), WIRE_SECONDS (iperf3's, default 5), BUILD. Needs root and `ip
# netns` (skipped otherwise), iperf3 and Open MPI's mpirun and mpicc (their columns are "-"
# without them). Never part of make test.
set -u
BUILD=${BUILD:-build}
REPEAT=${REPEAT:-3}
HOSTS=${WIRE_HOSTS:-2 4}
RATES=${WIRE_RATES:-1gbit 10gbit}
SECS=${WIRE_SECONDS:-5}
here=$(dirname "$0")
. "$here/lib.sh"
. tests/netns.sh # its skip() says why and exits 0; it makes $tmp and removes it with the namespaces
NET=10.82.0
netns_switch ddlwr $NET 4
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DDL_TOKEN=wire-bench-secret-0123456789
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ns() { echo $HOST_NS | cut -d' ' -f"$1"; }

# shape RATE: every host's link to the switch, htb at RATE with a bucket of 1 ms at that rate
# (WIRE_BURST bytes if set). With tc's default bucket (one 1514-byte frame from 10 Gbit/s down)
# htb waits on its timer after every packet, which a wire does not: at 1 Gbit/s iperf3 then
# carries 926 Mbit/s each way, not the 955 TCP can carry in 1514-byte frames.
shape() { netns_shape ddlwr "$1" "${WIRE_BURST:-}"; }
# gbps RATE: tc's rate (e.g. 1gbit, 10gbit, 500mbit) in GB/s
gbps() {
    echo "$1" | awk '{ v = $1 + 0; u = tolower($1); sub(/^[0-9.]+/, "", u)
        m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : 1; printf "%.4f", v * m / 8e9 }'
}

have_iperf=0; command -v iperf3 > /dev/null 2>&1 && have_iperf=1
have_mpi=0
if command -v mpirun > /dev/null 2>&1 && command -v mpicc > /dev/null 2>&1 && mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    mkdir -p "$BUILD/bench" && mpicc $BENCH_CFLAGS -o "$BUILD/bench/mpi_allreduce" "$here/mpi_allreduce.c" && have_mpi=1
fi
hostlist() { k=1; l=""; while [ $k -le "$1" ]; do l="$l${l:+,}$NET.$k:1"; k=$((k + 1)); done; echo "$l"; }
k=1; NS_AGENT_HOSTS=""
while [ $k -le 4 ]; do NS_AGENT_HOSTS="$NS_AGENT_HOSTS $NET.$k=$(ns $k)"; k=$((k + 1)); done
export NS_AGENT_HOSTS
seq_port=0

# busbw_of FILE BYTES: column 5 of the row for BYTES checked ok
busbw_of() { awk -v b="$2" '$1 == b && $6 == "ok" { print $5 }' "$1" | tail -n 1; }

# ddl H: ddl-bench allreduce over tcp on hosts 1..H; its rows in $tmp/ddl.out
ddl() {
    seq_port=$((seq_port + 1)); port=$((36000 + ($$ + seq_port * 7) % 2000))
    k=1; pids=""
    while [ $k -le "$1" ]; do
        ip netns exec "$(ns $k)" "$BUILD/bin/ddlrun" -n 1 --nodes "$1" --node-rank $((k - 1)) --master "$NET.1:$port" \
            --timeout 60 -t tcp "$BUILD/bin/ddl-bench" allreduce -b 8M -e 32M -f 4 --iters 10 --warmup 3 \
            > "$tmp/ddl.$k" 2>&1 &
        pids="$pids $!"
        k=$((k + 1))
    done
    wait $pids
    cp "$tmp/ddl.1" "$tmp/ddl.out"
}

# mpi H OUT [MCA ARGS...]: mpi_allreduce under mpirun on hosts 1..H; its rows in $tmp/OUT
mpi() {
    h=$1 out=$tmp/$2; shift 2
    : > "$out"
    [ $have_mpi = 1 ] || return 0
    timeout 120 ip netns exec "$(ns 1)" mpirun --allow-run-as-root -np "$h" -H "$(hostlist "$h")" \
        --mca plm_rsh_agent "$PWD/tests/ns-agent.sh" --mca pml ob1 --mca btl self,tcp \
        --mca btl_tcp_if_include $NET.0/24 --mca oob_tcp_if_include $NET.0/24 "$@" -x OPENBLAS_NUM_THREADS=1 \
        "$PWD/$BUILD/bench/mpi_allreduce" -b 8M -e 32M -f 4 --iters 10 --warmup 3 > "$out" 2>&1 ||
        { echo "   MPI_Allreduce failed:"; tail -n 3 "$out"; }
}

# iperf H: iperf3 --bidir between hosts 1-2 (and 3-4), all at once; prints the mean rate each way in GB/s
iperf() {
    [ $have_iperf = 1 ] || { echo "-"; return 0; }
    a=1; pids=""
    while [ $a -lt "$1" ]; do
        b=$((a + 1)); port=$((37000 + ($$ + a) % 2000))
        ip netns exec "$(ns $b)" iperf3 -s -1 -p $port > /dev/null 2>&1 &
        a=$((a + 2))
    done
    sleep 0.5
    a=1
    while [ $a -lt "$1" ]; do
        b=$((a + 1)); port=$((37000 + ($$ + a) % 2000))
        ip netns exec "$(ns $a)" iperf3 -c "$NET.$b" -p $port --bidir -t "$SECS" -O 1 -J > "$tmp/iperf.$a" 2>&1 &
        pids="$pids $!"
        a=$((a + 2))
    done
    wait $pids
    a=1
    while [ $a -lt "$1" ]; do
        # the receivers' figures, both ways
        sed -n '/"sum_received"/,/}/s/.*"bits_per_second":[[:space:]]*\([0-9.e+]*\).*/\1/p;/"sum_received_bidir_reverse"/,/}/s/.*"bits_per_second":[[:space:]]*\([0-9.e+]*\).*/\1/p' "$tmp/iperf.$a"
        a=$((a + 2))
    done | awk '{ s += $1; n++ } END { if (n) printf "%.4f\n", s / n / 8e9; else print "-" }'
}

F="d8 d32 m8 m32 l8 l32 ip"
for rate in $RATES; do
    shape "$rate"
    link=$(gbps "$rate")
    for h in $HOSTS; do
        echo "== all-reduce on the wire: $h hosts x 1 rank, links of $rate (htb, $link GB/s each way); $REPEAT alternated runs"
        for f in $F; do : > "$tmp/$f"; done
        r=1
        while [ $r -le "$REPEAT" ]; do
            ddl "$h"; d8=$(busbw_of "$tmp/ddl.out" 8388608); d32=$(busbw_of "$tmp/ddl.out" 33554432)
            [ -n "$d8$d32" ] || { echo "   ddl failed:"; tail -n 3 "$tmp"/ddl.?; }
            ip=$(iperf "$h")
            mpi "$h" mpi.out; m8=$(busbw_of "$tmp/mpi.out" 8388608); m32=$(busbw_of "$tmp/mpi.out" 33554432)
            mpi "$h" mpi2.out --mca btl_tcp_links 2
            l8=$(busbw_of "$tmp/mpi2.out" 8388608); l32=$(busbw_of "$tmp/mpi2.out" 33554432)
            echo "   run $r, GB/s: ddl ${d8:--} (8 MiB) ${d32:--} (32 MiB); iperf3 --bidir ${ip:--} each way;" \
                "MPI_Allreduce ${m8:--} ${m32:--}, with 2 links per pair ${l8:--} ${l32:--}"
            for f in $F; do eval "v=\${$f:-}"; [ -n "$v" ] && [ "$v" != - ] && echo "$v" >> "$tmp/$f"; done
            r=$((r + 1))
        done
        for f in $F; do eval "$f=\$(median < \$tmp/\$f)"; done
        echo "wire_${h}hosts_$rate: link_GBs=$link iperf3_GBs=$ip ddl_8M_GBs=$d8 ddl_32M_GBs=$d32 mpi_8M_GBs=$m8" \
            "mpi_32M_GBs=$m32 mpi_2links_8M_GBs=$l8 mpi_2links_32M_GBs=$l32"
        for z in 8 32; do
            eval "d=\$d$z; m=\$m$z; l=\$l$z"
            echo "   $z MiB: ddl/link $(ratio "$d" "$link"), ddl/iperf3 $(ratio "$d" "$ip"), ddl/MPI_Allreduce $(ratio "$d" "$m")," \
                "ddl/MPI_Allreduce with 2 links $(ratio "$d" "$l")"
            what="all-reduce busbw, GB/s, $h hosts x 1 rank over tcp, $rate (htb), $z MiB"
            record "$what" "$d" "the link" "$link" "$(ratio "$d" "$link")" ">= 0.9 (or of iperf3)"
            record "$what" "$d" "iperf3 --bidir, each way" "$ip" "$(ratio "$d" "$ip")" ">= 0.9 where the cores cannot fill the link"
            record "$what" "$d" "Open MPI MPI_Allreduce (ob1, tcp)" "$m" "$(ratio "$d" "$m")" ">= 1"
            record "$what" "$d" "Open MPI MPI_Allreduce, btl_tcp_links 2" "$l" "$(ratio "$d" "$l")" ">= 1"
        done
    done
done
