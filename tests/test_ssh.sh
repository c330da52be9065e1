#!/bin/sh
# test_ssh.sh - ddlrun -H over real OpenSSH: two network namespaces (hosts a and b, 10.80.0.1 and
# 10.80.0.2 on a veth pair), each with its own sshd (a config, host key, authorized_keys and pid
# file in a temporary directory; key authentication only), and an ssh config that names the hosts
# a and b, with a fresh client key and a known_hosts of the two host keys. The head ddlrun runs on
# a, with --ssh-agent "ssh -F CONFIG -o BatchMode=yes". Checked: the 4-rank job over tcp gives the
# weights_crc of the same job on one host; kill -9 of the head, with the ssh connection to b cut at
# the same time, leaves no process of the job on either host within seconds; with b's sshd
# stopped, ddlrun fails at once and names host b; with b unreachable, ddlrun's own ssh command
# (its ConnectTimeout) names b within seconds. Needs root, `ip netns` and sshd
# (openssh-server); skipped with the reason otherwise. Everything it starts is stopped on exit.
# ddl-test: beside (builds or computes and bounds no time: it runs beside another such test)
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
SSHD=${SSHD:-/usr/sbin/sshd}
. tests/netns.sh
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
[ -x "$SSHD" ] || skip "no $SSHD (apt-get install openssh-server)"
command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 ||
    skip "no ssh or ssh-keygen (apt-get install openssh-client)"
[ -x "$(getent passwd root | cut -d: -f7)" ] || skip "root has no login shell for ssh to run commands with"
netns_hosts ddlssh 10.80.0

# sshd's privilege separation directory, as Debian's service makes it; removed again if made here
made_run_sshd=""
[ -d /run/sshd ] || { mkdir -m 755 /run/sshd && made_run_sshd=1; }
sshd_pids=""
ssh_cleanup() {
    [ -n "$sshd_pids" ] && kill $sshd_pids 2>/dev/null
    netns_cleanup
    [ -n "$made_run_sshd" ] && rmdir /run/sshd 2>/dev/null
}
trap ssh_cleanup EXIT

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
DDLRUN=$BUILD/bin/ddlrun
ARGS="--epochs 1 --train-limit 2000 --seed 3 --quiet --data $DATA"
port=29500

# ---- keys, the two sshd, the client's config ----
ssh-keygen -q -t ed25519 -N '' -C ddl-test-client -f "$tmp/id_ed25519" || skip "ssh-keygen failed"
cp "$tmp/id_ed25519.pub" "$tmp/authorized_keys"
: > "$tmp/known_hosts"
# start_sshd NAME NAMESPACE ADDRESS: sshd -D in NAMESPACE, listening on ADDRESS only
start_sshd() {
    d="$tmp/$1"; mkdir -p "$d"
    ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" || skip "ssh-keygen failed"
    cat > "$d/sshd_config" <<EOF
ListenAddress $3
HostKey $d/host_key
PidFile $d/sshd.pid
AuthorizedKeysFile $tmp/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
PrintLastLog no
LogLevel VERBOSE
EOF
    "$SSHD" -t -f "$d/sshd_config" 2> "$d/check" || skip "sshd rejects the test's config: $(head -n 1 "$d/check")"
    ip netns exec "$2" "$SSHD" -D -f "$d/sshd_config" -E "$d/sshd.log" &
    sshd_pids="$sshd_pids $!"
    eval "sshd_$1=$!"
    echo "$1,$3 $(cut -d' ' -f1,2 "$d/host_key.pub")" >> "$tmp/known_hosts"
}
start_sshd a "$A" 10.80.0.1
start_sshd b "$B" 10.80.0.2
cat > "$tmp/ssh_config" <<EOF
Host a
    HostName 10.80.0.1
Host b
    HostName 10.80.0.2
Host *
    User root
    IdentityFile $tmp/id_ed25519
    IdentitiesOnly yes
    IdentityAgent none
    UserKnownHostsFile $tmp/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    LogLevel ERROR
EOF
SSH="ssh -F $tmp/ssh_config -o BatchMode=yes"
# on_a COMMAND...: COMMAND on host a (the head's host)
on_a() { ip netns exec "$A" "$@"; }
for h in a b; do
    i=0; while [ $i -lt 50 ] && ! on_a $SSH "$h" true 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    if on_a $SSH "$h" true 2> "$tmp/ssh.err"; then ok; else
        bad "ssh to $h with the test's key: $(cat "$tmp/ssh.err")"; tail -n 5 "$tmp/$h/sshd.log"; fi
done

# job_procs NS: the processes in NS besides its sshd listener (the job's, and ssh sessions)
job_procs() {
    ip netns pids "$1" | while read -r p; do
        case " $sshd_pids " in *" $p "*) ;; *) echo "$p" ;; esac
    done | wc -l
}
# lenets NS: the lenet processes in NS
lenets() {
    for p in $(ip netns pids "$1"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = lenet ] && echo "$p"
    done | wc -l
}
head_job() { # head_job ARGS...: the head ddlrun on a, over ssh to a and b ($AGENT: the --ssh-agent)
    on_a env PATH="$PATH" "$DDLRUN" -H a:2,b:2 ${AGENT:+--ssh-agent "$AGENT"} --master "10.80.0.1:$port" -t tcp \
        --timeout 30 -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS "$@"
}
AGENT=$SSH

# ---- same weights as one host ----
ref=$("$DDLRUN" -n 4 "$BUILD/bin/lenet" $ARGS 2>&1 | field weights_crc)
echo "one host, 4 ranks: weights_crc=$ref"
[ -n "$ref" ] && ok || bad "the one-host reference run gave no summary"
t0=$(date +%s%3N)
# (on hosts of 2 ranks the default is the two-level all-reduce, which adds as one host does)
head_job "$BUILD/bin/lenet" $ARGS > "$tmp/run" 2>&1; rc=$?
t1=$(date +%s%3N)
crc=$(field weights_crc < "$tmp/run"); tr=$(field transport < "$tmp/run"); w=$(field world < "$tmp/run")
echo "-H a:2,b:2 over ssh: transport=$tr world=$w weights_crc=$crc (exit $rc, $((t1 - t0)) ms)"
[ "$rc" -eq 0 ] && [ "$tr" = tcp ] && [ "$w" = 4 ] && ok || { bad "the run over ssh did not finish cleanly"; tail -n 5 "$tmp/run"; }
[ -n "$crc" ] && [ "$crc" = "$ref" ] && ok || bad "over ssh: weights_crc '$crc' differs from one host's '$ref'"
grep -q 'Accepted publickey for root' "$tmp/b/sshd.log" && ok || bad "b's sshd logged no key login"

# ---- kill -9 of the head, and b's ssh connection cut: nothing left on either host ----
head_job "$BUILD/bin/lenet" --epochs 50 --train-limit 2000 --seed 3 --quiet --data "$DATA" > "$tmp/k" 2>&1 &
head=$!
bg_pid=$head
i=0; while [ $i -lt 100 ] && { [ "$(lenets "$A")" -lt 2 ] || [ "$(lenets "$B")" -lt 2 ]; }; do sleep 0.1; i=$((i + 1)); done
sleep 1 # past the rendezvous: training
before="$(lenets "$A") $(lenets "$B")"
ssh_b=$(pgrep -f "^ssh -F $tmp/ssh_config -o BatchMode=yes b " | head -n 1)
kill -9 "$head" $ssh_b; wait "$head" 2>/dev/null; bg_pid=""
i=0; while [ $i -lt 50 ] && [ "$(job_procs "$A")$(job_procs "$B")" != 00 ]; do sleep 0.1; i=$((i + 1)); done
after="$(job_procs "$A") $(job_procs "$B")"
echo "kill -9 of the head and of its ssh to b: lenet ranks on a and b $before before; processes of the job $after after $((i * 100)) ms"
[ "$before" = "2 2" ] && [ -n "$ssh_b" ] && [ "$after" = "0 0" ] && ok ||
    { bad "kill -9 of the head: ranks $before before, processes $after left (ssh to b: '$ssh_b')"; cat "$tmp/k"; }

# ---- a dead host: b's sshd stopped ----
kill "$sshd_b"; wait "$sshd_b" 2>/dev/null
t0=$(date +%s%3N)
head_job "$BUILD/bin/lenet" $ARGS > "$tmp/dead" 2>&1; rc=$?
t1=$(date +%s%3N)
msg=$(grep -m1 'host b' "$tmp/dead")
echo "b's sshd stopped: exit $rc in $((t1 - t0)) ms: $msg"
[ "$rc" -ne 0 ] && [ -n "$msg" ] && [ $((t1 - t0)) -lt 10000 ] && ok ||
    { bad "a dead host: exit $rc in $((t1 - t0)) ms, no line naming host b"; cat "$tmp/dead"; }
i=0; while [ $i -lt 30 ] && [ "$(job_procs "$A")" != 0 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(job_procs "$A")" = 0 ] && ok || bad "a dead host: $(job_procs "$A") processes of the job left on a"

# ---- an unreachable host, with ddlrun's own ssh command: its connect timeout names b ----
# a's packets to b go to a MAC no one has, and are lost; the ssh found first in PATH adds the config
mkdir "$tmp/bin"
printf '#!/bin/sh\nexec %s -F %s "$@"\n' "$(command -v ssh)" "$tmp/ssh_config" > "$tmp/bin/ssh"
chmod +x "$tmp/bin/ssh"
ip -n "$A" neigh replace 10.80.0.2 lladdr 02:00:00:00:00:42 dev "$va" nud permanent
t0=$(date +%s%3N)
AGENT="" PATH="$tmp/bin:$PATH" head_job "$BUILD/bin/lenet" $ARGS > "$tmp/lost" 2>&1; rc=$?
t1=$(date +%s%3N)
msg=$(grep -m1 'host b' "$tmp/lost")
echo "b unreachable: exit $rc in $((t1 - t0)) ms: $msg"
[ "$rc" -ne 0 ] && [ -n "$msg" ] && [ $((t1 - t0)) -lt 20000 ] && ok ||
    { bad "an unreachable host: exit $rc in $((t1 - t0)) ms, no line naming host b"; cat "$tmp/lost"; }

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
