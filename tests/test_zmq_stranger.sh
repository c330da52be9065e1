#!/bin/sh
# test_zmq_stranger.sh - a stranger at a zmq rank's port during start-up cannot abort the rank.
# libzmq 4.3.4 aborts a process that answers a PING on a connection whose engine has failed
# (issue #4364): a stranger that passed ZeroMQ's own handshake (the NULL mechanism) and sent 1500
# one-byte messages and a PING in one write, then reset the connection, made rank 0 of a job
# waiting for rank 1 die ("Assertion failed: !_io_error", exit 134) in every try. A job with a
# token speaks PLAIN with a credential derived from the token, checked by ddl's ZAP handler
# (transports/zmq_zap.c). Rank 0 of a 2-rank ddl-bench job over zmq waits in open while
# tests/zmtp_stranger.py tries 5 times with NULL and twice with PLAIN and a wrong password; a peer
# with the right one passes; a real rank of another token is told at once; then rank 1 starts. Checked: no stranger gets through ZeroMQ's
# handshake (libzmq closes a NULL peer at a PLAIN server's greeting, our handler refuses the
# wrong password),
# both ranks finish their all-reduces (exit 0) and nothing asserted.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
BENCH=$BUILD/bin/ddl-bench
if ! command -v "$PYTHON" >/dev/null 2>&1 || [ ! -x "$BENCH" ] ||
    "$BENCH" allreduce -t zmq -n 2 -b 4K -e 4K --iters 1 2>&1 | grep -q "not compiled in"; then
    echo "skipped: needs python3 and $BENCH with zmq"; echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d)
bg=""
cleanup() { for p in $bg; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
export DDL_TOKEN=zmq-stranger-secret-0123456789 DDL_JOB=zmq-stranger DDL_TIMEOUT_MS=20000 DDL_TRANSPORT=zmq DDL_WORLD_SIZE=2
# the job's PLAIN password, as transports/zmq_zap.c derives it: HMAC-SHA256(token, label NUL job)
password=$("$PYTHON" -c 'import hmac, hashlib, os
print(hmac.new(os.environ["DDL_TOKEN"].encode(), b"ddl-zmq-plain-v1\0" + os.environ["DDL_JOB"].encode(), hashlib.sha256).hexdigest())')
wrong=$(printf '%s' "$password" | tr '0-9a-f' '1-9a-f0')
port=$(free_port)
rank() { DDL_RANK=$1 DDL_MASTER=127.0.0.1:$port "$BENCH" allreduce -t zmq -b 4K -e 64K --iters 2; }

rank 0 > "$tmp/r0" 2>&1 & r0=$!; bg="$r0"
for i in $(seq 100); do
    ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && break
    kill -0 "$r0" 2>/dev/null || break
    sleep 0.05
done
: > "$tmp/strangers"
for i in 1 2 3 4 5; do
    "$PYTHON" tests/zmtp_stranger.py 127.0.0.1 "$port" 1500 >> "$tmp/strangers" 2>&1
    sleep 0.3
done
sed 's/^/  stranger: /' "$tmp/strangers"
[ "$(grep -c '^mechanism=.* passed=0$' "$tmp/strangers")" -eq 5 ]
check "5 strangers of the NULL mechanism: none gets through ZeroMQ's handshake" $?
for user in ddl someone; do
    out=$("$PYTHON" tests/zmtp_stranger.py 127.0.0.1 "$port" 1500 PLAIN "$user" "$wrong" 2>&1)
    echo "  PLAIN stranger, user $user, a wrong password: $out"
    [ "$out" = "mechanism=PLAIN passed=0" ]; check "a PLAIN stranger with a wrong password (user $user) is refused" $?
done
out=$("$PYTHON" tests/zmtp_stranger.py 127.0.0.1 "$port" 0 PLAIN ddl "$password" 2>&1)
echo "  PLAIN peer with the job's password: $out"
[ "$out" = "mechanism=PLAIN passed=1" ]; check "a peer with the job's credential passes (the strangers above are refused for theirs)" $?
kill -0 "$r0" 2>/dev/null; check "rank 0 is alive after the strangers" $?

# a rank of another token is told so at once (its own ZeroMQ handshake is refused), not at its timeout
t0=$(date +%s%N)
DDL_TOKEN=another-secret-0123456789 DDL_TIMEOUT_MS=8000 rank 1 > "$tmp/other" 2>&1; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "  a rank with another token: exit $rc after $ms ms: $(grep -m1 -o "refused us at ZeroMQ's handshake: wrong token" "$tmp/other")"
[ $rc -ne 0 ] && [ $ms -lt 4000 ] && grep -q "rank 0 at 127.0.0.1:$port refused us at ZeroMQ's handshake: wrong token" "$tmp/other"
check "a rank with another token is refused within 4 s, rank 0 named, the token said" $?

rank 1 > "$tmp/r1" 2>&1; rc1=$?
wait "$r0"; rc0=$?; bg=""
echo "exits $rc0 $rc1"
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]; check "the job finishes its all-reduces (exits $rc0 $rc1)" $?
! grep -q "Assertion failed" "$tmp/r0" "$tmp/r1"; check "no assertion in libzmq" $?
[ $rc0 -eq 0 ] || tail -n 3 "$tmp/r0"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
