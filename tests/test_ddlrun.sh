#!/bin/sh
# test_ddlrun.sh - the launcher: environment of the ranks, exit codes, the one-line failure
# message, --tag-output, signal forwarding, and that a killed rank stops the job quickly.
# Ends with "N passed, N failed"; exit status non-zero on any failure.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
DDLRUN=$BUILD/bin/ddlrun
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

now_ms() { date +%s%3N; }

if [ ! -x "$DDLRUN" ]; then
    echo "no $DDLRUN: build first" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

# ---- all ranks succeed ----
"$DDLRUN" -n 3 sh -c 'exit 0'; check "3 ranks exit 0 -> 0" $?

# ---- environment ----
"$DDLRUN" -n 3 --job myjob --timeout 7 sh -c 'echo "$DDL_RANK $DDL_WORLD_SIZE $DDL_LOCAL_RANK $DDL_LOCAL_SIZE $DDL_MASTER $DDL_JOB $DDL_TRANSPORT $DDL_TIMEOUT_MS ${DDL_TOKEN:+token}"' \
    > "$tmp/env" 2>&1
check "env run exits 0" $?
for r in 0 1 2; do
    grep -Eq "^$r 3 $r 3 127\.0\.0\.1:[0-9]+ myjob shm 7000 token\$" "$tmp/env"; check "env of rank $r" $?
done
[ "$(cut -d' ' -f5 "$tmp/env" | sort -u | wc -l)" -eq 1 ]; check "one DDL_MASTER for all ranks" $?
# its port lies below the ephemeral range (32768 up), where an outgoing connection could take it
# before rank 0 listens
port=$(head -n 1 "$tmp/env" | cut -d' ' -f5 | cut -d: -f2)
[ -n "$port" ] && [ "$port" -ge 10000 ] && [ "$port" -lt 30000 ]; check "DDL_MASTER's port $port in [10000, 30000)" $?
env -u DDL_JOB "$DDLRUN" -n 2 sh -c 'echo "$DDL_JOB"' > "$tmp/job" 2>&1
[ "$(sort -u "$tmp/job" | wc -l)" -eq 1 ] && grep -Eq '^[0-9a-f]{16}$' "$tmp/job"; check "random hex job id, shared" $?
printf 'node-secret-of-24-bytes!\n' > "$tmp/tok"; chmod 600 "$tmp/tok"
env -u DDL_TOKEN "$DDLRUN" -n 2 -t tcp --nodes 2 --node-rank 1 --master 10.1.2.3:29500 --job j --token-file "$tmp/tok" \
    sh -c 'echo "$DDL_RANK $DDL_WORLD_SIZE $DDL_LOCAL_RANK $DDL_MASTER $DDL_TRANSPORT $DDL_TOKEN"' > "$tmp/nodes" 2>/dev/null
grep -q '^2 4 0 10.1.2.3:29500 tcp node-secret-of-24-bytes!$' "$tmp/nodes" &&
    grep -q '^3 4 1 10.1.2.3:29500 tcp node-secret-of-24-bytes!$' "$tmp/nodes"
check "--nodes/--node-rank ranks and world; the token from --token-file" $?

# ---- tokens: several nodes need one; a token file only its owner reads ----
env -u DDL_TOKEN -u DDL_INSECURE "$DDLRUN" -n 1 --nodes 2 --master 10.1.2.3:29500 sh -c 'echo started' \
    > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && ! grep -q started "$tmp/out" && grep -q 'no DDL_TOKEN' "$tmp/err" && grep -q 'DDL_INSECURE=1' "$tmp/err"
check "--nodes 2 without a token does not start, and says why" $?
env -u DDL_TOKEN DDL_INSECURE=1 "$DDLRUN" -n 1 --nodes 2 --master 10.1.2.3:29500 sh -c 'echo started' > "$tmp/out" 2>&1
grep -q started "$tmp/out"; check "DDL_INSECURE=1: starts without a token" $?
chmod 644 "$tmp/tok"
"$DDLRUN" -n 1 --token-file "$tmp/tok" sh -c 'echo started' > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && ! grep -q started "$tmp/out" && grep -q 'chmod 600' "$tmp/err"
check "a token file others may read is refused" $?
DDL_TOKEN=short "$DDLRUN" -n 1 sh -c 'echo "$DDL_TOKEN"' > "$tmp/out" 2> "$tmp/err"
grep -q '^short$' "$tmp/out" && grep -q 'DDL_TOKEN is 5 bytes; 16 or more' "$tmp/err"; check "a short token is warned about" $?
env -u DDL_TOKEN "$DDLRUN" -n 2 sh -c 'echo "$DDL_TOKEN"' > "$tmp/out" 2>&1
[ "$(sort -u "$tmp/out" | wc -l)" -eq 1 ] && grep -Eq '^[0-9a-f]{32}$' "$tmp/out"; check "one node: a random token, shared" $?

# ---- tagged output ----
"$DDLRUN" -n 2 --tag-output sh -c 'echo "hello from $DDL_RANK"; echo "second line"; echo "to stderr" >&2; printf "no newline"' \
    > "$tmp/out" 2> "$tmp/err"
check "--tag-output run exits 0" $?
grep -qx '\[0\] hello from 0' "$tmp/out" && grep -qx '\[1\] hello from 1' "$tmp/out"; check "stdout lines tagged" $?
[ "$(grep -c '^\[[01]\] second line$' "$tmp/out")" -eq 2 ]; check "every line tagged" $?
grep -qx '\[1\] no newline' "$tmp/out"; check "last line without newline tagged" $?
grep -qx '\[0\] to stderr' "$tmp/err"; check "stderr tagged, on stderr" $?
! grep -qv '^\[[01]\] ' "$tmp/out"; check "no untagged line" $?

# ---- a rank exits non-zero ----
"$DDLRUN" -n 3 sh -c '[ "$DDL_RANK" = 2 ] && exit 3; sleep 30' 2> "$tmp/err"
rc=$?
[ $rc -ne 0 ]; check "non-zero exit code propagates ($rc)" $?
grep -Eq '^ddlrun: rank 2 \(pid [0-9]+\) exited with code 3; stopped the other ranks$' "$tmp/err"; check "exit message" $?
[ "$(wc -l < "$tmp/err")" -eq 1 ]; check "one line" $?

# ---- a rank is killed: others stopped within 5 s ----
t0=$(now_ms)
"$DDLRUN" -n 3 sh -c '[ "$DDL_RANK" = 1 ] && kill -9 $$; sleep 30' 2> "$tmp/err"
rc=$?; t1=$(now_ms)
[ $rc -ne 0 ]; check "killed rank -> non-zero ($rc)" $?
[ $((t1 - t0)) -lt 5000 ]; check "killed rank -> done in $((t1 - t0)) ms" $?
grep -Eq '^ddlrun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\); stopped the other ranks$' "$tmp/err"
check "kill message" $?

# ---- a rank that ignores SIGTERM is killed after 2 s ----
t0=$(now_ms)
"$DDLRUN" -n 2 sh -c 'trap "" TERM; [ "$DDL_RANK" = 0 ] && sleep 0.3 && exit 1; sleep 30' 2> "$tmp/err"
rc=$?; t1=$(now_ms)
[ $rc -ne 0 ] && [ $((t1 - t0)) -ge 1900 ] && [ $((t1 - t0)) -lt 5000 ]; check "SIGKILL after 2 s ($((t1 - t0)) ms)" $?

# ---- signals are forwarded ----
"$DDLRUN" -n 2 sh -c 'trap "echo got-term-$DDL_RANK; exit 0" TERM; sleep 30 & wait' > "$tmp/sig" 2> "$tmp/err" &
pid=$!
sleep 0.5
kill -TERM $pid
t0=$(now_ms)
wait $pid; rc=$?; t1=$(now_ms)
[ $rc -eq 143 ]; check "SIGTERM -> exit 143 ($rc)" $?
grep -q got-term-0 "$tmp/sig" && grep -q got-term-1 "$tmp/sig"; check "SIGTERM forwarded to every rank" $?
[ $((t1 - t0)) -lt 3000 ]; check "stopped promptly after SIGTERM" $?
grep -q 'received signal 15' "$tmp/err"; check "signal message" $?

# ---- -H localhost (no agent), -x, --log-dir, --nproc-per-node ----
FOO2=passed "$DDLRUN" -np 4 -H localhost:2,localhost:2 -x FOO=bar -x FOO2 \
    sh -c 'echo "$DDL_RANK $DDL_WORLD_SIZE $DDL_LOCAL_RANK $DDL_TRANSPORT $FOO $FOO2 ${DDL_TOKEN:+token}"' > "$tmp/h" 2>&1
check "-np 4 -H localhost:2,localhost:2 exits 0" $?
for r in 0 1 2 3; do grep -qx "$r 4 $((r % 2)) tcp bar passed token" "$tmp/h"; check "-H: env of rank $r" $?; done
"$DDLRUN" --nproc-per-node 2 --log-dir "$tmp/logs" sh -c 'echo "out $DDL_RANK"; echo "err $DDL_RANK" >&2' > "$tmp/out" 2>&1
[ ! -s "$tmp/out" ] && grep -qx 'out 1' "$tmp/logs/rank.1.log" && grep -qx 'err 1' "$tmp/logs/rank.1.log" &&
    grep -qx 'out 0' "$tmp/logs/rank.0.log"; check "--log-dir: one file per rank, stdout and stderr" $?
"$DDLRUN" -np 3 -H a:2,b:2 true 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'same number' "$tmp/err"; check "-H: uneven ranks per host refused" $?
"$DDLRUN" -np 5 -H a:2,b:2 true 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'only 4 slots' "$tmp/err"; check "-np beyond the slots refused" $?
"$DDLRUN" -n 2 -H a:2 true 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- '-np TOTAL' "$tmp/err"; check "-n with -H refused" $?
printf 'a slots=2\nb slots=x\n' > "$tmp/hf"
"$DDLRUN" --hostfile "$tmp/hf" true 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'line 2' "$tmp/err"; check "bad hostfile line named" $?
# a host name goes to the agent's command line (ssh HOST): one that could be an option is refused
"$DDLRUN" -np 2 -H "-oProxyCommand=touch $tmp/pwned:1,b:1" true 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "-H: host '-oProxyCommand=touch $tmp/pwned': expected a host name or address" "$tmp/err" &&
    [ ! -e "$tmp/pwned" ]; check "-H: a host name starting with '-' refused ($rc)" $?
printf 'a slots=1\n-oProxyCommand=x slots=1\n' > "$tmp/hf"
"$DDLRUN" --hostfile "$tmp/hf" true 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--hostfile $tmp/hf line 2: host '-oProxyCommand=x'" "$tmp/err"
check "--hostfile: a host name starting with '-' refused, its line named" $?
for h in 'a;b' 'a b' '$(x)' '[::1' '[-x]'; do
    "$DDLRUN" -H "$h" true 2> "$tmp/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "expected a host name or address" "$tmp/err"; check "-H '$h' refused" $?
done
"$DDLRUN" -np 3 -H '[::1]:1,[fe80::1%eth0],node-7.example.com:1' --ssh-agent false true 2> "$tmp/err"
! grep -q "expected a host name" "$tmp/err"; check "-H: [v6]:SLOTS, [v6] and a dotted name with '-' taken" $?
"$DDLRUN" -H nosuchhost.invalid --ssh-agent false true 2> "$tmp/err"; rc=$?
[ $rc -ne 0 ]; check "an agent that fails fails the job ($rc)" $?

# ---- --bind cores: each local rank on its own share of the CPUs ----
cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
show='echo "$DDL_LOCAL_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)"'
if [ "$(nproc)" -ge 2 ]; then
    "$DDLRUN" -n 2 --bind cores sh -c "$show" > "$tmp/bind" 2>&1
    a=$(awk '$1 == 0 {print $2}' "$tmp/bind"); b=$(awk '$1 == 1 {print $2}' "$tmp/bind")
    [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] && [ "$a" != "$cpus" ] && [ "$b" != "$cpus" ]
    check "--bind cores: ranks 0 and 1 on different CPUs ($a, $b of $cpus)" $?
    "$DDLRUN" -n 2 sh -c "$show" > "$tmp/bind" 2>&1
    [ "$(awk '{print $2}' "$tmp/bind" | sort -u)" = "$cpus" ]; check "no --bind: every rank may use every CPU" $?
else
    echo "skipped: --bind needs 2 CPUs or more"
fi
n=$(($(nproc) + 1))
"$DDLRUN" -n $n --bind cores sh -c "$show" > "$tmp/bind" 2> "$tmp/err"; rc=$?
[ $rc -eq 0 ] && grep -q "$n ranks on $(nproc) CPUs: not bound" "$tmp/err" && [ "$(wc -l < "$tmp/bind")" -eq $n ] &&
    [ "$(awk '{print $2}' "$tmp/bind" | sort -u)" = "$cpus" ]
check "--bind cores with more ranks than CPUs: said, and nothing bound" $?
"$DDLRUN" -n 2 --bind socket true 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--bind socket" "$tmp/err"; check "bad --bind value refused naming it" $?

# ---- usage errors ----
"$DDLRUN" sh -c 'exit 0' 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- '-n N is required' "$tmp/err" && grep -qx "try 'ddlrun --help'" "$tmp/err"; check "missing -n" $?
"$DDLRUN" -n 2 --nodes 2 sh -c 'exit 0' 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'master' "$tmp/err"; check "--nodes without --master" $?
"$DDLRUN" -n 2 -t carrier-pigeon true 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "carrier-pigeon" "$tmp/err"; check "bad transport" $?
"$DDLRUN" -n 2 2> "$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'no PROGRAM' "$tmp/err"; check "no program" $?
"$DDLRUN" -n 1 ./no/such/program 2> "$tmp/err"; rc=$?
[ $rc -eq 127 ] && grep -q "cannot run './no/such/program'" "$tmp/err"; check "missing program -> 127" $?

# a program named without ./ is looked up on PATH: ddlrun says so, and names the one here
(cd "$BUILD/bin" && ./ddlrun -n 1 lenet --epochs 0 > /dev/null 2> "$tmp/err"); rc=$?
[ $rc -ne 0 ] && grep -q "cannot run 'lenet': not found on PATH; the one in this directory is ./lenet" "$tmp/err"
check "ddlrun -n 1 lenet (no ./): not found on PATH, and ./lenet named" $?
"$DDLRUN" -n 1 no-such-program-here > /dev/null 2> "$tmp/err"
grep -q "cannot run 'no-such-program-here': not found on PATH$" "$tmp/err"; check "a name on no PATH: said" $?

# ---- the job id of a job on several nodes: from the token, which strangers do not have ----
printf 'secret-one-0123456789\n' > "$tmp/t1"; printf 'secret-two-0123456789\n' > "$tmp/t2"; chmod 600 "$tmp/t1" "$tmp/t2"
job() { "$DDLRUN" -n 1 --nodes 2 --node-rank "$2" --master 127.0.0.1:29911 --token-file "$tmp/$1" \
    sh -c 'echo "$DDL_JOB"' 2> /dev/null; }
j1=$(job t1 0); j1b=$(job t1 1); j2=$(job t2 0)
[ -n "$j1" ] && [ "$j1" = "$j1b" ] && [ "$j1" != "$j2" ] && [ ${#j1} -eq 17 ]
check "--nodes: every node derives the same job id from the token and the master; another token, another ($j1 $j1b $j2)" $?
old=$(printf '127.0.0.1:29911' | "$PYTHON" -c 'import sys, zlib; print("m%08x" % zlib.crc32(sys.stdin.buffer.read()))')
[ "$j1" != "$old" ]; check "--nodes: the job id is not the CRC of the master anyone can compute ($old)" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
