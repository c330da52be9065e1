#!/bin/sh
# test_mac.sh - frame MACs (DDL_MAC=1) stop a relay in the middle from altering gradients. Two
# lenet ranks over tcp on loopback, rank 1 reaching rank 0 through tests/relay.py, which flips 7 bits
# in each of 4 bytes of the stream rank 1 sends, a megabyte in (inside a gradient). Without MACs the job ends
# "fine" with other weights than an undisturbed run: the attack works. With DDL_MAC=1 the ranks stop
# with an error that names the MAC check and rank 1. The same over zmq, the relay on the link
# rank 1 sends to rank 0 on. Also: MACs give the same weights as no MACs
# over tcp and zmq; ranks that disagree on DDL_MAC are refused at the handshake with a message that
# names it; DDL_MAC=1 without a token is refused; test_transport and test_collectives pass over tcp
# and zmq with every message MAC'd (2 and 3 ranks). Needs python3 and a build with libsodium.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DATA=/usr/share/datasets/fashion-mnist
skip() { echo "skipped: $*"; echo "0 passed, 0 failed"; exit 0; }
command -v "$PYTHON" >/dev/null 2>&1 || skip "no python3"
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || [ -e "$DATA/train-images-idx3-ubyte" ] ||
    skip "no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)"
grep -q "WITH_SODIUM ?= 1" "$BUILD/config.mk" 2>/dev/null || nm "$BUILD/libddl.a" 2>/dev/null | grep -q crypto_onetimeauth ||
    skip "$BUILD was built without libsodium (WITH_SODIUM=0)"

tmp=$(mktemp -d)
bg=""
cleanup() { for p in $bg; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DDL_TOKEN=mac-test-secret-0123456789 DDL_TIMEOUT_MS=10000
ARGS="--epochs 1 --train-limit 2000 --seed 42 --quiet --data $DATA"

ref=$("$BUILD/bin/ddlrun" -n 2 -t tcp "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
[ -n "$ref" ] && ok || bad "the reference run gave no summary"

# pair MAC0 MAC1 FLIP [zmq]: rank 0 and rank 1 (through the relay, FLIP as relay.py) with DDL_MAC as
# given; outputs in $tmp/r0 $tmp/r1 $tmp/relay, exit codes in rc0 rc1. Over tcp rank 1 reaches rank
# 0 through the relay, which flips what rank 1 sends. Over zmq rank 1 sends to rank 0 on the
# connection rank 0's DEALER opened to rank 1's ROUTER: rank 0 reaches rank 1 through the relay,
# which flips what comes back (gradients the collectives read in place, in libzmq's own buffer).
pair() {
    a=$(free_port); b=$(free_port); r=$(free_port)
    t=${4:-tcp} peers0="127.0.0.1:$a,127.0.0.1:$b" peers1="127.0.0.1:$r,127.0.0.1:$b" target=$a way=""
    [ "$t" = zmq ] && peers0="127.0.0.1:$a,127.0.0.1:$r" peers1="127.0.0.1:$a,127.0.0.1:$b" target=$b way=back
    "$PYTHON" tests/relay.py "$r" "$target" "$3" $way 2> "$tmp/relay" & relay=$!; bg="$bg $relay"
    sleep 0.2
    env DDL_TRANSPORT=$t DDL_WORLD_SIZE=2 DDL_RANK=0 DDL_PEERS="$peers0" DDL_MAC=$1 \
        "$BUILD/bin/lenet" $ARGS > "$tmp/r0" 2>&1 & p0=$!
    env DDL_TRANSPORT=$t DDL_WORLD_SIZE=2 DDL_RANK=1 DDL_PEERS="$peers1" DDL_MAC=$2 \
        "$BUILD/bin/lenet" $ARGS > "$tmp/r1" 2>&1; rc1=$?
    wait $p0; rc0=$?
    kill $relay 2>/dev/null; wait $relay 2>/dev/null
}

pair 0 0 -1
crc=$(field weights_crc < "$tmp/r0")
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$crc" = "$ref" ] && ok ||
    { bad "through an honest relay: exits $rc0 $rc1, weights_crc '$crc' (want $ref)"; tail -n 3 "$tmp/r0" "$tmp/r1"; }

pair 0 0 1000000
crc=$(field weights_crc < "$tmp/r0")
echo "no MAC, 7 bits flipped by the relay: exits $rc0 $rc1, weights_crc=$crc (undisturbed $ref)"
grep -q flipped "$tmp/relay" && [ $rc0 -eq 0 ] && [ -n "$crc" ] && [ "$crc" != "$ref" ] && ok ||
    { bad "without MACs the flipped bits should pass unseen and change the weights"; tail -n 3 "$tmp/r0" "$tmp/relay"; }

pair 1 1 1000000
line=$(grep -m1 "MAC check" "$tmp/r0")
echo "DDL_MAC=1, the same bits flipped: exits $rc0 $rc1: $line"
grep -q flipped "$tmp/relay" && [ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] && printf '%s' "$line" | grep -q "rank 1 at" && ok ||
    { bad "with DDL_MAC=1 the altered message must be caught, naming rank 1"; tail -n 3 "$tmp/r0" "$tmp/r1"; }

pair 1 1 -1
crc=$(field weights_crc < "$tmp/r0")
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && [ "$crc" = "$ref" ] && ok ||
    { bad "DDL_MAC=1 through an honest relay: exits $rc0 $rc1, weights_crc '$crc'"; tail -n 3 "$tmp/r0" "$tmp/r1" "$tmp/relay"; }

DDL_TIMEOUT_MS=3000 # rank 0 refuses an unproven HELLO and waits on for a rank 1 that can join
pair 1 0 -1
DDL_TIMEOUT_MS=10000
[ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] && grep -q "DDL_MAC" "$tmp/r1" && ok ||
    { bad "ranks that disagree on DDL_MAC must be refused naming it (exits $rc0 $rc1)"; tail -n 2 "$tmp/r0" "$tmp/r1"; }

for t in tcp zmq; do
    crc=$(DDL_MAC=1 "$BUILD/bin/ddlrun" -n 3 -t "$t" "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
    plain=$("$BUILD/bin/ddlrun" -n 3 -t "$t" "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
    [ -n "$crc" ] && [ "$crc" = "$plain" ] && ok || bad "$t, 3 ranks: DDL_MAC=1 gives weights_crc '$crc', without '$plain'"
done

pair 0 0 1000000 zmq
crc=$(field weights_crc < "$tmp/r0")
echo "zmq, no MAC, 7 bits flipped by the relay: exits $rc0 $rc1, weights_crc=$crc (undisturbed $ref)"
grep -q flipped "$tmp/relay" && [ $rc0 -eq 0 ] && [ -n "$crc" ] && [ "$crc" != "$ref" ] && ok ||
    { bad "zmq without MACs: the flipped bits should pass unseen and change the weights"; tail -n 3 "$tmp/r0" "$tmp/relay"; }
pair 1 1 1000000 zmq
line=$(grep -m1 "MAC check" "$tmp/r0")
echo "zmq, DDL_MAC=1, the same bits flipped: exits $rc0 $rc1: $line"
grep -q flipped "$tmp/relay" && [ $rc0 -ne 0 ] && [ $rc1 -ne 0 ] && printf '%s' "$line" | grep -q "rank 1 at" && ok ||
    { bad "zmq with DDL_MAC=1: the altered message must be caught, naming rank 1"; tail -n 3 "$tmp/r0" "$tmp/r1"; }

# the transport and collective tests, every message MAC'd (tests/ranks.h reads DDL_TEST_MAC), 2 and 3 ranks
for t in tcp zmq; do
    for prog in test_transport test_collectives; do
        line=$(DDL_TEST_MAC=1 DDL_TEST_MAX_WORLD=3 DDL_TEST_TRANSPORT=$t "$BUILD/tests/$prog" 2>&1 | tail -n 1)
        case "$line" in *" passed, 0 failed") ok ;; *) bad "$prog over $t with DDL_MAC=1: $line" ;; esac
    done
done

out=$(DDL_MAC=1 DDL_INSECURE=1 DDL_TOKEN= DDL_TRANSPORT=tcp DDL_WORLD_SIZE=2 DDL_RANK=0 DDL_MASTER=127.0.0.1:$(free_port) \
    timeout 20 "$BUILD/bin/lenet" $ARGS 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && printf '%s' "$out" | grep -q "keyed by the token" && ok ||
    bad "DDL_MAC=1 without a token must be refused (exit $rc): $out"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
