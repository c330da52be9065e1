#!/bin/sh
# test_local_user.sh - what another user of this host could do to a job, and can no longer:
#  - forge JOIN notes to an elastic job started by hand without a token (shm, DDL_PEERS): the join
#    key was an HMAC under an empty key of the job id, and the notes made both ranks admit a phantom,
#    wait for it and fail. Now such a job draws its own secret: the notes are dropped, the job ends
#    with the weights of a run nobody disturbed, and the forger gets no admission. A replacement
#    (DDL_JOIN=1) without a token is refused, naming DDL_TOKEN.
#  - take the name of the next generation's shared-memory segment (/dev/shm/ddl-JOB~e1) before a
#    rank is lost: the name carries an HMAC keyed by the token now, and the regroup goes on.
#  - swap the parent of ddlrun's --log-dir for a link to a private directory while the job runs
#    (here the program itself does it, before a restart writes the logs again): the logs go on into
#    the directory ddlrun opened, and the private directory's rank.0.log stays as it was.
# As root the stranger runs as nobody (setpriv), else as this user. Needs python3 and Fashion-MNIST.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
LENET=$BUILD/bin/lenet
DDLRUN=$BUILD/bin/ddlrun
DATA=${DDL_DATA:-/usr/share/datasets/fashion-mnist}
if [ ! -d "$DATA" ] || ! command -v "$PYTHON" > /dev/null; then
    echo "skipped: needs Fashion-MNIST in $DATA and python3"; echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d) || exit 1
chmod 755 "$tmp"
trap 'rm -rf "$tmp"; rm -f /dev/shm/ddl-lu$$*' EXIT
export OPENBLAS_NUM_THREADS=1 DDL_HEARTBEAT_TIMEOUT_MS=1000 DDL_HEARTBEAT_INTERVAL_MS=200 DDL_TIMEOUT_MS=5000
ARGS="--data $DATA --epochs 1 --train-limit 3000 --batch 64 --quiet" # 47 steps
# stranger CMD...: exec CMD as another user when we can be one (run it in a subshell or with &)
stranger() {
    if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
        exec setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
    fi
    exec "$@"
}

# ---- forged join notes to a job without a token ----
# pair OUT [FORGER ARGS]: ranks 0 and 1 of an elastic job (1:3, slot 2 free) started by hand, no
# token, over shm; with FORGER ARGS a stranger sends join notes for slot 2 all along. OUT.0, OUT.1.
pair() {
    out=$1; shift
    ports=$("$PYTHON" tests/forge_join.py --ports 3)
    p0=${ports%%,*}; p1=${ports#*,}; p1=${p1%%,*}
    fp=
    if [ $# -gt 0 ]; then
        stranger "$PYTHON" tests/forge_join.py "$@" --seconds 30 "$p0" "$p1" > "$out.forge" 2>&1 &
        fp=$!
    fi
    env -u DDL_TOKEN DDL_WORLD_SIZE=2 DDL_TRANSPORT=shm DDL_ELASTIC=1:3 DDL_JOB=lu$$ \
        DDL_PEERS="127.0.0.1:$(echo "$ports" | sed 's/,/,127.0.0.1:/g')" sh -c '
        DDL_RANK=0 "$1" $2 > "$3.0" 2>&1 & a=$!
        DDL_RANK=1 "$1" $2 > "$3.1" 2>&1; b=$?
        wait $a; a=$?
        echo "$a $b" > "$3.rc"' sh "$LENET" "$ARGS" "$out"
    if [ -n "$fp" ]; then
        kill "$fp" 2> /dev/null
        wait "$fp"
    fi
}
pair "$tmp/ref"
ref=$(crc "$tmp/ref.0")
[ "$(cat "$tmp/ref.rc")" = "0 0" ] && [ -n "$ref" ]
check "an undisturbed elastic pair without a token: $(cat "$tmp/ref.rc"), weights_crc $ref" $?
pair "$tmp/forged" --job lu$$ --slot 2
got=$(crc "$tmp/forged.0")
[ "$(cat "$tmp/forged.rc")" = "0 0" ] && [ "$got" = "$ref" ]
check "forged join notes ($(cat "$tmp/forged.forge")): both ranks end well with the undisturbed weights ($(cat "$tmp/forged.rc"); $got vs $ref)" $?
grep -q 'forge: [1-9][0-9]* notes, 0 admissions' "$tmp/forged.forge" && ! grep -q 'asks to join' "$tmp/forged.0" "$tmp/forged.1"
check "the stranger was never admitted and the ranks never regrouped for it" $?
[ "$(cat "$tmp/forged.rc")" = "0 0" ] || tail -n 3 "$tmp/forged.0" "$tmp/forged.1"

out=$(env -u DDL_TOKEN DDL_WORLD_SIZE=2 DDL_RANK=1 DDL_TRANSPORT=shm DDL_ELASTIC=1:2 DDL_JOIN=1 \
      DDL_PEERS=127.0.0.1:1,127.0.0.1:2 "$LENET" $ARGS 2>&1)
[ $? -ne 0 ] && printf '%s\n' "$out" | grep -q 'needs the job.s token (DDL_TOKEN)'
check "a replacement without a token is refused, naming DDL_TOKEN: $out" $?

out=$(env -u DDL_TOKEN DDL_INSECURE=1 DDL_PEERS=127.0.0.1:1,127.0.0.1:2 "$DDLRUN" -n 1 --nodes 2 --node-rank 0 \
      --master 127.0.0.1:1 --elastic 1:2 -t tcp true 2>&1)
printf '%s\n' "$out" | grep -q 'without a token (DDL_INSECURE=1): a lost rank is not replaced'
check "ddlrun --elastic on several nodes without a token says that lost ranks are not replaced: $out" $?

# ---- the next generation's segment, taken first ----
# 3 ranks, elastic 2:3, rank 1 killed after step 10: the others regroup (generation 1) over shm
"$DDLRUN" -n 3 -t shm "$LENET" $ARGS > "$tmp/ref3" 2>&1
ref3=$(crc "$tmp/ref3")
(stranger "$PYTHON" -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))' \
    /dev/shm/ddl-lu$$s~e1)
DDL_JOB=lu$$s DDL_TEST_FAIL=1:10:kill "$DDLRUN" -n 3 -t shm --elastic 2:3 --replacements 0 "$LENET" $ARGS \
    > "$tmp/squat" 2> "$tmp/squat.err"
rc=$?
got=$(crc "$tmp/squat")
[ $rc -eq 0 ] && [ -n "$ref3" ] && [ "$got" = "$ref3" ] && [ "$(field world < "$tmp/squat")" = 2 ]
check "/dev/shm/ddl-JOB~e1 taken by a stranger first: the regroup goes on (exit $rc, world $(field world < "$tmp/squat"), $got vs $ref3)" $?
[ $rc -eq 0 ] || tail -n 4 "$tmp/squat.err"
rm -f /dev/shm/ddl-lu$$s~e1

# ---- ddlrun --log-dir: a parent swapped during the run, a link planted by another user ----
mkdir -p "$tmp/pub/logs" "$tmp/private/logs"
chmod 700 "$tmp/private"
echo precious > "$tmp/private/logs/rank.0.log"
cat > "$tmp/swap.sh" << END
#!/bin/sh
if [ -z "\$DDL_RESTART" ]; then # the first run: the parent becomes a link to the private directory
    mv "$tmp/pub" "$tmp/pub.old" && ln -s "$tmp/private" "$tmp/pub"
    echo first; exit 1
fi
echo second
END
"$DDLRUN" -n 1 --restarts 1 --log-dir "$tmp/pub/logs" sh "$tmp/swap.sh" > /dev/null 2> "$tmp/swap.err"
rc=$?
[ $rc -eq 0 ] && [ "$(cat "$tmp/private/logs/rank.0.log")" = precious ] &&
    [ "$(cat "$tmp/pub.old/logs/rank.0.log")" = second ]
check "--log-dir's parent swapped for a link before a restart: the private rank.0.log stays (exit $rc: $(cat "$tmp/private/logs/rank.0.log"), $(cat "$tmp/pub.old/logs/rank.0.log" 2> /dev/null))" $?
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
    mkdir "$tmp/att" && chown nobody "$tmp/att"
    (stranger ln -s "$tmp/private" "$tmp/att/d")
    "$DDLRUN" -n 1 --log-dir "$tmp/att/d/logs" sh -c 'echo planted' > /dev/null 2> "$tmp/att.err"
    rc=$?
    [ $rc -ne 0 ] && grep -q 'symbolic link of uid [0-9]*, not ours' "$tmp/att.err" &&
        [ "$(cat "$tmp/private/logs/rank.0.log")" = precious ]
    check "--log-dir through another user's link is refused, naming it (exit $rc: $(cat "$tmp/att.err"))" $?
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
