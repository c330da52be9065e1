#!/bin/sh
# test_cluster.sh - ddlrun as the head of a cluster: -H and --hostfile start the ranks on two
# "hosts", network namespaces with their own addresses (10.78.0.1 and 10.78.0.2 on a veth pair),
# through tests/ns-agent.sh as --ssh-agent. The 4-rank job over tcp must give the weights_crc of
# the same job on one host over shm; --log-dir writes one file per rank; -x reaches remote ranks;
# the token is on no command line; a failed remote rank stops the job; with --elastic a killed
# remote rank gets a replacement from its host's ddlrun, which joins; and kill -9 of the head
# leaves no process in either namespace (each node's ddlrun sees its stdin close).
# Needs root and `ip netns`; skipped with the reason otherwise.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
. tests/netns.sh
netns_hosts ddlcl 10.78.0

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export NS_AGENT_HOSTS="10.78.0.1=$A 10.78.0.2=$B"
DDLRUN=$BUILD/bin/ddlrun
AGENT="--ssh-agent tests/ns-agent.sh"
HOSTS=10.78.0.1:2,10.78.0.2:2
ARGS="--epochs 1 --train-limit 2000 --seed 42 --quiet --data $DATA"
port=$((30000 + $$ % 1000))
secret="cluster-secret-$$-0123456789"
printf '%s\n' "$secret" > "$tmp/token"; chmod 600 "$tmp/token"

ref=$("$DDLRUN" -n 4 -t shm "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
echo "one host, 4 ranks over shm: weights_crc=$ref"
[ -n "$ref" ] && ok || bad "the one-host reference run gave no summary"

# ---- -np 4 -H: same weights; the token on no command line ----
# (on 2 hosts of 2 ranks the default is the two-level all-reduce, which adds as one host does)
env -u DDL_TOKEN "$DDLRUN" -np 4 -H "$HOSTS" $AGENT --master "10.78.0.1:$port" --token-file "$tmp/token" \
    --timeout 30 -t tcp "$BUILD/bin/lenet" $ARGS > "$tmp/h" 2>&1 &
bg_pid=$!
seen=0
while kill -0 "$bg_pid" 2>/dev/null; do
    ps -eo args | grep -v grep | grep -q -- "$secret" && seen=1
    sleep 0.2
done
wait "$bg_pid"; rc=$?; bg_pid=""
crc=$(field weights_crc < "$tmp/h"); tr=$(field transport < "$tmp/h"); w=$(field world < "$tmp/h")
echo "-np 4 -H $HOSTS: transport=$tr world=$w weights_crc=$crc (exit $rc)"
[ "$rc" -eq 0 ] && [ "$tr" = tcp ] && [ "$w" = 4 ] && ok || { bad "-H run did not finish cleanly"; tail -n 5 "$tmp/h"; }
[ -n "$crc" ] && [ "$crc" = "$ref" ] && ok || bad "-H: weights_crc '$crc' differs from one host's '$ref'"
[ "$seen" -eq 0 ] && ok || bad "the token showed up in a command line (ps -eo args)"

# ---- --hostfile, default master (first host, port 29500), --log-dir ----
printf '# two hosts\n10.78.0.1 slots=2\n\n10.78.0.2 slots=2\n' > "$tmp/hostfile"
"$DDLRUN" --hostfile "$tmp/hostfile" $AGENT --log-dir "$tmp/logs" --timeout 30 "$BUILD/bin/lenet" $ARGS \
    > "$tmp/hf" 2>&1; rc=$?
n=$(ls "$tmp/logs" 2>/dev/null | grep -c '^rank\.[0-3]\.log$')
crc=$(field weights_crc < "$tmp/logs/rank.0.log" 2>/dev/null)
echo "--hostfile --log-dir: $n log files, rank 0's weights_crc=$crc (exit $rc)"
[ "$rc" -eq 0 ] && [ "$n" -eq 4 ] && ok || { bad "--hostfile --log-dir: exit $rc, $n log files"; tail -n 5 "$tmp/hf"; }
[ -n "$crc" ] && [ "$crc" = "$ref" ] && ok || bad "--hostfile: weights_crc '$crc' in rank.0.log differs from '$ref'"
! grep -q summary "$tmp/hf" && ok || bad "--log-dir: output also went to the terminal"

# ---- -x VAR=VALUE and -x VAR reach the remote ranks ----
BAR=from-the-head "$DDLRUN" -np 4 -H "$HOSTS" $AGENT --master "10.78.0.1:$port" -x FOO=hello -x BAR --tag-output \
    sh -c 'echo "$DDL_RANK $FOO $BAR"' > "$tmp/x" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -qx '\[3\] 3 hello from-the-head' "$tmp/x" && [ "$(grep -c 'hello from-the-head$' "$tmp/x")" -eq 4 ] &&
    ok || { bad "-x did not reach every rank (exit $rc)"; cat "$tmp/x"; }

# ---- a remote rank fails: the job stops, with its exit code and one line naming the rank ----
t0=$(date +%s%3N)
"$DDLRUN" -np 4 -H "$HOSTS" $AGENT --master "10.78.0.1:$port" sh -c '[ "$DDL_RANK" = 3 ] && exit 3; sleep 30' \
    > "$tmp/f" 2>&1; rc=$?; t1=$(date +%s%3N)
echo "rank 3 exits 3: ddlrun exit $rc in $((t1 - t0)) ms: $(grep -m1 'rank 3' "$tmp/f")"
[ "$rc" -eq 3 ] && [ $((t1 - t0)) -lt 8000 ] && grep -q 'rank 3 (pid [0-9]*) exited with code 3' "$tmp/f" && ok ||
    { bad "a failed remote rank: exit $rc in $((t1 - t0)) ms"; cat "$tmp/f"; }

# ---- --restarts across hosts: all nodes start again, with DDL_RESTART and a new job id ----
"$DDLRUN" -np 4 -H "$HOSTS" $AGENT --master "10.78.0.1:$port" --job cj --restarts 1 \
    sh -c '[ "$DDL_RANK" = 3 ] && [ -z "$DDL_RESTART" ] && exit 3; echo "ok $DDL_RANK $DDL_RESTART $DDL_JOB"' \
    > "$tmp/r" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -q 'node 1 (host 10.78.0.2) exited with code 3; restarting all 2 hosts (restart 1 of 1)' "$tmp/r" &&
    [ "$(grep -c '^ok [0-3] 1 cj-r1$' "$tmp/r")" -eq 4 ] && ok || { bad "--restarts across hosts (exit $rc)"; cat "$tmp/r"; }

# ---- --elastic across hosts: the head gives every rank a fixed address (DDL_PEERS, host by
# host); rank 3 (host B) is killed after step 5, host B's ddlrun starts a replacement, which joins
# the 3 others: 4 ranks end with one host's weights ----
EARGS="--epochs 2 --train-limit 6000 --seed 42 --quiet --data $DATA"
eref=$("$DDLRUN" -n 4 -t shm "$BUILD/bin/lenet" $EARGS 2>&1 | field weights_crc)
"$DDLRUN" -np 4 -H "$HOSTS" $AGENT --master "10.78.0.1:$port" --timeout 30 -t tcp --elastic 2:4 \
    -x DDL_TEST_FAIL=3:5:kill -x DDL_HEARTBEAT_TIMEOUT_MS=1000 -x DDL_LOG_LEVEL=info "$BUILD/bin/lenet" $EARGS > "$tmp/e" 2>&1; rc=$?
crc=$(field weights_crc < "$tmp/e"); w=$(field world < "$tmp/e")
echo "--elastic 2:4 -H $HOSTS, rank 3 killed: exit $rc, world $w, weights_crc=$crc (one host: $eref)"
[ "$rc" -eq 0 ] && [ "$w" = 4 ] && [ -n "$crc" ] && [ "$crc" = "$eref" ] &&
    grep -q "ddlrun: started pid [0-9]* to take rank 3's place" "$tmp/e" && grep -q "slot 3 joined as rank 3 of 4" "$tmp/e" &&
    ok || { bad "--elastic across hosts: a replacement on host B did not bring the world back to 4"; tail -n 8 "$tmp/e"; }

# ---- kill -9 of the head: no process left in either namespace ----
nsprocs() { ip netns pids "$1" | wc -l; }
"$DDLRUN" -np 4 -H "$HOSTS" $AGENT --master "10.78.0.1:$port" sleep 60 > "$tmp/k" 2>&1 &
head=$!
i=0; while [ $i -lt 50 ] && { [ "$(nsprocs "$A")" -lt 3 ] || [ "$(nsprocs "$B")" -lt 3 ]; }; do sleep 0.1; i=$((i + 1)); done
before="$(nsprocs "$A") $(nsprocs "$B")"
kill -9 "$head"; wait "$head" 2>/dev/null
i=0; while [ $i -lt 50 ] && [ "$(nsprocs "$A")$(nsprocs "$B")" != 00 ]; do sleep 0.1; i=$((i + 1)); done
after="$(nsprocs "$A") $(nsprocs "$B")"
echo "kill -9 of the head: processes in the namespaces $before before, $after after $((i * 100)) ms"
[ "$before" = "3 3" ] && [ "$after" = "0 0" ] && ok || { bad "kill -9 of the head left processes: $before -> $after"; cat "$tmp/k"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
