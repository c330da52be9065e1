# netns.sh - two "hosts" for the tests: network namespaces $A and $B with the addresses NET.1 and
# NET.2 on a veth pair. Source it after lib.sh, then `netns_hosts PREFIX NET` (e.g. ddlmh 10.77.0).
# Or K hosts: `netns_switch PREFIX NET K` makes namespaces $HOST_NS (NET.1 .. NET.K), each with a
# veth to one bridge in a namespace of its own (the switch), so that no interface of the
# machine's own is touched.
# Where that cannot run (not root, no `ip`, no namespaces, no Fashion-MNIST in $DATA) the test
# prints "skipped: REASON" and "0 passed, 0 failed" and exits 0. Also makes $tmp; on exit kills
# $bg_pid and whatever still runs in the namespaces, deletes them and $tmp.
DATA=/usr/share/datasets/fashion-mnist
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }

netns_cleanup() {
    [ -n "$bg_pid" ] && kill "$bg_pid" 2>/dev/null
    for ns in $NS_ALL; do
        pids=$(ip netns pids "$ns" 2>/dev/null); [ -n "$pids" ] && kill -9 $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$tmp"
}

# netns_start NAMESPACES: what every layout needs first; the namespaces go away on exit.
netns_start() {
    [ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
    command -v ip >/dev/null 2>&1 || skip "no ip command (apt-get install iproute2)"
    [ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
        skip "no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
    NS_ALL=$1
    tmp=$(mktemp -d)
    bg_pid=""
    trap netns_cleanup EXIT
    trap 'exit 1' INT TERM
}

netns_hosts() {
    A="$1$$a"; B="$1$$b"; va="$1v$$a"; vb="$1v$$b"
    netns_start "$A $B"
    ip netns add "$A" 2>/dev/null || skip "ip netns add failed (no network namespaces here)"
    ip netns add "$B" || skip "ip netns add failed"
    ip link add "$va" type veth peer name "$vb" || skip "cannot create a veth pair"
    ip link set "$va" netns "$A" && ip link set "$vb" netns "$B" &&
        ip -n "$A" addr add "$2.1/24" dev "$va" && ip -n "$B" addr add "$2.2/24" dev "$vb" &&
        ip -n "$A" link set "$va" up && ip -n "$B" link set "$vb" up &&
        ip -n "$A" link set lo up && ip -n "$B" link set lo up || skip "cannot configure the namespaces"
}

netns_switch() {
    sw="$1$$s"; HOST_NS=""
    i=1; while [ "$i" -le "$3" ]; do HOST_NS="$HOST_NS $1$$h$i"; i=$((i + 1)); done
    netns_start "$HOST_NS $sw"
    ip netns add "$sw" 2>/dev/null || skip "ip netns add failed (no network namespaces here)"
    ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || skip "cannot create a bridge"
    i=1
    for ns in $HOST_NS; do
        ip netns add "$ns" && ip link add "$1v$$h$i" type veth peer name "$1p$$h$i" &&
            ip link set "$1v$$h$i" netns "$ns" && ip link set "$1p$$h$i" netns "$sw" &&
            ip -n "$sw" link set "$1p$$h$i" master br0 && ip -n "$sw" link set "$1p$$h$i" up &&
            ip -n "$ns" addr add "$2.$i/24" dev "$1v$$h$i" && ip -n "$ns" link set "$1v$$h$i" up &&
            ip -n "$ns" link set lo up || skip "cannot configure namespace $ns"
        i=$((i + 1))
    done
}

# netns_shape PREFIX RATE [BURST]: every host of `netns_switch PREFIX` sends to the switch at RATE
# (tc's units: 1gbit, 500mbit), by htb with a bucket of BURST bytes (default: 1 ms at RATE; with
# tc's default of one frame htb waits on its timer after every packet, which a wire does not).
# Shaped again when called again. Skips (the reason, then exit 0) where tc cannot shape.
netns_shape() {
    burst=${3:-$(echo "$2" | awk '{ v = $1 + 0; u = tolower($1); sub(/^[0-9.]+/, "", u)
        m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : 1; printf "%.0f", v * m / 8 / 1000 }')}
    i=1
    for ns in $HOST_NS; do
        dev="$1v$$h$i"
        ip netns exec "$ns" tc qdisc del dev "$dev" root 2> /dev/null
        ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: htb default 1 r2q 1000 &&
            ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:1 htb rate "$2" burst "$burst" \
                cburst "$burst" 2>&1 | grep -v 'quantum of class' >&2 # one class: its quantum does not matter
        ip netns exec "$ns" tc class show dev "$dev" | grep -q "rate" || skip "tc cannot shape $dev to $2"
        i=$((i + 1))
    done
}
