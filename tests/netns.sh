# netns.sh - two "hosts" for the tests: network namespaces $A and $B with the addresses NET.1 and
# NET.2 on a veth pair. Source it after lib.sh, then `netns_hosts PREFIX NET` (e.g. ddlmh 10.77.0).
# Where that cannot run (not root, no `ip`, no namespaces, no Fashion-MNIST in $DATA) the test
# prints "skipped: REASON" and "0 passed, 0 failed" and exits 0. Also makes $tmp; on exit kills
# $bg_pid and whatever still runs in the namespaces, deletes them and $tmp.
DATA=/usr/share/datasets/fashion-mnist
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }

netns_cleanup() {
    [ -n "$bg_pid" ] && kill "$bg_pid" 2>/dev/null
    for ns in "$A" "$B"; do
        pids=$(ip netns pids "$ns" 2>/dev/null); [ -n "$pids" ] && kill -9 $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$tmp"
}

netns_hosts() {
    [ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
    command -v ip >/dev/null 2>&1 || skip "no ip command (apt-get install iproute2)"
    [ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
        skip "no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
    A="$1$$a"; B="$1$$b"; va="$1v$$a"; vb="$1v$$b"
    tmp=$(mktemp -d)
    bg_pid=""
    trap netns_cleanup EXIT
    trap 'exit 1' INT TERM
    ip netns add "$A" 2>/dev/null || skip "ip netns add failed (no network namespaces here)"
    ip netns add "$B" || skip "ip netns add failed"
    ip link add "$va" type veth peer name "$vb" || skip "cannot create a veth pair"
    ip link set "$va" netns "$A" && ip link set "$vb" netns "$B" &&
        ip -n "$A" addr add "$2.1/24" dev "$va" && ip -n "$B" addr add "$2.2/24" dev "$vb" &&
        ip -n "$A" link set "$va" up && ip -n "$B" link set "$vb" up &&
        ip -n "$A" link set lo up && ip -n "$B" link set lo up || skip "cannot configure the namespaces"
}
